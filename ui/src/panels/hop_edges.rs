//! The channel page's cross-colour hops (domain §6.1), grouped by edge.

use leptos::prelude::*;

use super::example_traces;
use crate::pages::chip;
use crate::source::HopEdge;

/// One row per hop edge: from and to (app and colour), kind, reason, the apps passed
/// through, the count and example traces.
#[component]
pub fn HopEdges<'a>(
    /// The cross-colour hop edges.
    hops: &'a [HopEdge],
) -> impl IntoView + use<> {
    let rows = hops
        .iter()
        .map(|h| {
            let traces = example_traces(&h.trace_ids);
            let via = if h.via.is_empty() { "–".to_owned() } else { h.via.join(" → ") };
            view! {
                <tr class="finding f-cross_color_hop" data-finding="cross_color_hop">
                    <td>{h.from_app.clone()} " " {chip(h.from_color.as_deref().unwrap_or("unknown"))}</td>
                    <td>{h.to_app.clone()} " " {chip(&h.to_color)}</td>
                    <td>{h.kind.clone()}</td>
                    <td>{h.reason.clone()}</td>
                    <td>{via}</td>
                    <td class="num">{h.count}</td>
                    <td>{traces}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h2>"Cross-colour hops"</h2>
        <table class="data" id="hops">
            <thead><tr><th>"from"</th><th>"to"</th><th>"kind"</th><th>"reason"</th><th>"via"</th><th>"count"</th><th>"example traces"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
