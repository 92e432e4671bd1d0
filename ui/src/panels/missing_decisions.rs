//! The channel page's missing decisions (domain §6.2), grouped by caller.

use leptos::prelude::*;

use super::example_traces;
use crate::locale::Lang;
use crate::source::MissingRow;

/// One row per (caller app, app, kind): spans that arrived without the channel's decision,
/// with example traces.
#[component]
pub fn MissingDecisions<'a>(
    /// The page's language.
    lang: Lang,
    /// The (caller app, app, kind) rows without the channel's decision.
    missing: &'a [MissingRow],
) -> impl IntoView + use<> {
    let l = lang;
    let rows = missing
        .iter()
        .map(|m| {
            let traces = example_traces(&m.trace_ids);
            view! {
                <tr class="finding f-missing_decision" data-finding="missing_decision">
                    <td>{m.caller_app.clone()}</td><td>{m.app.clone()}</td><td>{m.kind.clone()}</td>
                    <td class="num">{m.count}</td><td>{traces}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h2>{tr!(l, "missing.title")}</h2>
        <table class="data" id="missing">
            <thead><tr><th>{tr!(l, "col.caller_app")}</th><th>{tr!(l, "col.app")}</th><th>{tr!(l, "col.kind")}</th><th>{tr!(l, "col.spans")}</th><th>{tr!(l, "col.example_traces")}</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
