//! The overview's instances of colour unknown (domain §1): counted and listed.

use leptos::prelude::*;

use crate::pages::chip;
use crate::source::UnknownInstance;

/// How many instances of unknown colour the range saw, and one row each.
#[component]
pub fn UnknownInstances<'a>(
    /// The instances whose colour is unknown.
    instances: &'a [UnknownInstance],
) -> impl IntoView + use<> {
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
        <h2>"Instances of colour " {chip("unknown")}</h2>
        <p class=unknown_class id="unknown-count">{unknown_count} " instance(s) of unknown colour in the range"</p>
        <table class="data">
            <thead><tr><th>"app"</th><th>"instance"</th><th>"host"</th><th>"spans"</th></tr></thead>
            <tbody>{unknown}</tbody>
        </table>
    }
}
