//! The overview's instances of colour unknown (domain §1): counted and listed.

use leptos::prelude::*;

use crate::locale::Lang;
use crate::pages::chip;
use crate::source::UnknownInstance;

/// How many instances of unknown colour the range saw, and one row each.
#[component]
pub fn UnknownInstances<'a>(
    /// The page's language.
    lang: Lang,
    /// The instances whose colour is unknown.
    instances: &'a [UnknownInstance],
) -> impl IntoView + use<> {
    let l = lang;
    let unknown_count = instances.len();
    let unknown = instances
        .iter()
        .map(|u| {
            view! {
                <tr>
                    <td>{u.app.clone()}</td>
                    <td>{u.instance.clone()}</td>
                    <td>{u.host.clone().unwrap_or_else(|| "–".into())}</td>
                    <td class="num">{u.spans}</td>
                </tr>
            }
        })
        .collect_view();
    let unknown_class = if unknown_count > 0 { "warn" } else { "ok" };
    view! {
        <h2>{tr!(l, "unknown.title")} " " {chip(l, "unknown")}</h2>
        <p class=unknown_class id="unknown-count">{unknown_count} " " {tr!(l, "unknown.count")}</p>
        <table class="data">
            <thead><tr><th>{tr!(l, "col.app")}</th><th>{tr!(l, "col.instance")}</th><th>{tr!(l, "col.host")}</th><th>{tr!(l, "col.spans")}</th></tr></thead>
            <tbody>{unknown}</tbody>
        </table>
    }
}
