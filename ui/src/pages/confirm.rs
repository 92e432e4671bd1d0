//! The confirmation step of every channel write: what will change, the weights that will
//! apply to each app's instances (domain §5), the spike guard's refusal with its override
//! box, and the form that posts the write.

use dyeline_model::release::NEUTRAL_BLUE_PERCENT;
use leptos::prelude::*;

use super::{Chrome, encode};
use crate::source::{Action, ChannelRow, WeightPreview};

/// What the confirmation page shows.
pub struct Confirm<'a> {
    /// The channel now.
    pub channel: &'a ChannelRow,
    /// The channel's version now, sent back with the write (If-Match).
    pub version: u64,
    /// The write asked for.
    pub action: &'a Action,
    /// Weights after it.
    pub weights: &'a [WeightPreview],
    /// The spike guard's reason to refuse, if any.
    pub refusal: Option<String>,
    /// An error from a previous attempt (e.g. a 409 from the control API).
    pub error: Option<String>,
}

/// `start`, `ratio` or `finish`.
pub fn action_name(action: &Action) -> &'static str {
    match action {
        Action::Start => "start",
        Action::Ratio(_) => "ratio",
        Action::Finish => "finish",
    }
}

/// The confirmation page's body.
pub fn body(chrome: &Chrome, m: &Confirm<'_>) -> AnyView {
    let c = m.channel;
    let l = chrome.lang;
    let after = m.action.blue_percent_after();
    let what = match m.action {
        Action::Start => tr!(
            l,
            "confirm.start",
            id = c.id,
            neutral = NEUTRAL_BLUE_PERCENT
        ),
        Action::Ratio(p) => tr!(l, "confirm.ratio", id = c.id, from = c.blue_percent, to = p),
        Action::Finish => tr!(
            l,
            "confirm.finish",
            id = c.id,
            neutral = NEUTRAL_BLUE_PERCENT
        ),
    };
    let weights = m
        .weights
        .iter()
        .map(|w| {
            view! {
                <tr>
                    <td>{w.app.clone()}</td>
                    <td class="num">{w.blue_instances}</td><td class="num">{w.blue_weight}</td>
                    <td class="num">{w.green_instances}</td><td class="num">{w.green_weight}</td>
                </tr>
            }
        })
        .collect_view();
    let error = m
        .error
        .clone()
        .map(|e| view! { <p class="error" role="alert" id="write-error">{e}</p> });
    let refusal = m.refusal.clone().map(|r| {
        view! {
            <p class="refusal" role="alert" id="refusal">{r}</p>
            <label class="override"><input type="checkbox" name="override" value="1" id="override"/>
                " " {tr!(l, "confirm.override")}</label>
        }
    });
    let form = if chrome.identity.as_ref().is_some_and(|i| i.can_write) {
        view! {
            <form method="post" action=format!("/channels/{}/actions", c.id) id="confirm-form">
                <input type="hidden" name="csrf" value=chrome.csrf.clone()/>
                <input type="hidden" name="action" value=action_name(m.action)/>
                <input type="hidden" name="blue_percent" value=after.to_string()/>
                // The version this page showed: the write is refused if the channel changed since.
                <input type="hidden" name="version" value=m.version.to_string()/>
                {refusal}
                <button type="submit" id="confirm">{tr!(l, "confirm.confirm")}</button>
                " " <a href=chrome.link(&format!("/channels/{}", c.id))>{tr!(l, "confirm.cancel")}</a>
            </form>
        }
        .into_any()
    } else if chrome.identity.is_some() {
        view! { {refusal} <p class="error">{tr!(l, "confirm.read_only")}</p> }.into_any()
    } else {
        let next = format!(
            "/channels/{}/confirm?action={}&blue_percent={after}",
            c.id,
            action_name(m.action)
        );
        view! {
            {refusal}
            <p><a id="sign-in-to-confirm" href=format!("/login?next={}", encode(&next))>{tr!(l, "confirm.sign_in")}</a></p>
        }
        .into_any()
    };
    view! {
        <h1>{tr!(l, "confirm.confirm")}</h1>
        <p id="what">{what}</p>
        {error}
        <h2>{tr!(l, "confirm.weights")}</h2>
        <p class="hint">{tr!(l, "confirm.weights_hint", after = after)}</p>
        <table class="data" id="weights">
            <thead><tr><th>{tr!(l, "col.app")}</th><th>{tr!(l, "col.blue_instances")}</th><th>{tr!(l, "col.blue_weight")}</th><th>{tr!(l, "col.green_instances")}</th><th>{tr!(l, "col.green_weight")}</th></tr></thead>
            <tbody>{weights}</tbody>
        </table>
        {form}
    }
    .into_any()
}
