//! The channel page's controls: start, set blue_percent (presets or a number) and finish,
//! each a form that leads to the confirmation page; a hint to sign in when nobody is.

use leptos::prelude::*;

use super::range_fields;
use crate::pages::Chrome;
use crate::source::ChannelRow;

/// A form of one button that asks to confirm `action` (its button's id too) at `url`.
fn action_form(
    chrome: &Chrome,
    url: &str,
    action: &'static str,
    label: String,
) -> impl IntoView + use<> {
    view! {
        <form method="get" action=url.to_owned() class="inline">
            <input type="hidden" name="action" value=action/>
            {range_fields(chrome)}
            <button type="submit" id=action>{label}</button>
        </form>
    }
}

/// The release controls of `channel`: ratio and finish while it releases, start while idle.
#[component]
pub fn Controls<'a>(
    /// The page's frame (who is signed in, the CSRF secret for the forms).
    chrome: &'a Chrome,
    /// The channel the controls act on.
    channel: &'a ChannelRow,
) -> impl IntoView + use<> {
    let c = channel;
    let l = chrome.lang;
    let action = format!("/channels/{}/confirm", c.id);
    let body = if c.state == "releasing" {
        let presets = [0u8, 1, 10, 50, 100]
            .into_iter()
            .map(|p| {
                let class = if p == c.blue_percent { "preset current" } else { "preset" };
                view! { <button type="submit" class=class name="preset" value=p.to_string()>{p}"%"</button> }
            })
            .collect_view();
        view! {
            <form method="get" action=action.clone() class="inline" id="ratio-form">
                <input type="hidden" name="action" value="ratio"/>
                {range_fields(chrome)}
                <span>{tr!(l, "controls.set_blue_percent")} " "</span>
                {presets}
                <label>" " {tr!(l, "controls.or")} " " <input type="number" name="blue_percent" min="0" max="100" step="1" size="4" id="blue-percent-field"/></label>
                <button type="submit" id="ratio-submit">{tr!(l, "controls.set")}</button>
            </form>
            {action_form(chrome, &action, "finish", tr!(l, "controls.finish"))}
        }
        .into_any()
    } else {
        action_form(chrome, &action, "start", tr!(l, "controls.start")).into_any()
    };
    let hint = if chrome.identity.is_none() {
        Some(view! { <p class="hint">{tr!(l, "controls.sign_in_hint")}</p> })
    } else {
        None
    };
    view! { <h2>{tr!(l, "controls.title")}</h2>{body}{hint} }
}
