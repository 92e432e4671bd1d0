//! The channel page's cross-colour hops (domain §6.1), grouped by edge.

use leptos::prelude::*;

use super::example_traces;
use crate::locale::Lang;
use crate::pages::chip;
use crate::source::HopEdge;

/// One row per hop edge: from and to (app and colour), kind, reason, the apps passed
/// through, the count and example traces.
#[component]
pub fn HopEdges<'a>(
    /// The page's language.
    lang: Lang,
    /// The cross-colour hop edges.
    hops: &'a [HopEdge],
) -> impl IntoView + use<> {
    let l = lang;
    let rows = hops
        .iter()
        .map(|h| {
            let traces = example_traces(&h.trace_ids);
            let via = if h.via.is_empty() { "–".to_owned() } else { h.via.join(" → ") };
            view! {
                <tr class="finding f-cross_color_hop" data-finding="cross_color_hop">
                    <td>{h.from_app.clone()} " " {chip(l, h.from_color.as_deref().unwrap_or("unknown"))}</td>
                    <td>{h.to_app.clone()} " " {chip(l, &h.to_color)}</td>
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
        <h2>{tr!(l, "hops.title")}</h2>
        <table class="data" id="hops">
            <thead><tr><th>{tr!(l, "col.from")}</th><th>{tr!(l, "col.to")}</th><th>{tr!(l, "col.kind")}</th><th>{tr!(l, "col.reason")}</th><th>{tr!(l, "col.via")}</th><th>{tr!(l, "col.count")}</th><th>{tr!(l, "col.example_traces")}</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
