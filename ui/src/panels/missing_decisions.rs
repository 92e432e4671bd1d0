//! The channel page's missing decisions (domain §6.2), grouped by caller.

use leptos::prelude::*;

use super::example_traces;
use crate::source::MissingRow;

/// One row per (caller app, app, kind): spans that arrived without the channel's decision,
/// with example traces.
#[component]
pub fn MissingDecisions<'a>(
    /// The (caller app, app, kind) rows without the channel's decision.
    missing: &'a [MissingRow],
) -> impl IntoView + use<> {
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
        <h2>"Missing decisions by caller"</h2>
        <table class="data" id="missing">
            <thead><tr><th>"caller app"</th><th>"app"</th><th>"kind"</th><th>"spans"</th><th>"example traces"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
