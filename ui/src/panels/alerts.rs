//! A page's alerts (a channel's, or a lane group's): firing and resolved, with labels, the
//! observed value against its threshold, since when and example traces.

use leptos::prelude::*;

use super::example_traces;
use crate::source::AlertLine;
use dyeline_model::time::rfc3339_secs;

/// One row per alert of the channel, in the order given (firing first).
#[component]
pub fn Alerts<'a>(
    /// The page's alerts, firing first.
    alerts: &'a [AlertLine],
) -> impl IntoView + use<> {
    let rows = alerts
        .iter()
        .map(|a| {
            let traces = example_traces(&a.trace_ids);
            view! {
                <tr class=format!("alert a-{}", a.state) data-alert=a.kind.clone()>
                    <td>{a.name.clone()}</td>
                    <td><span class=format!("state s-{}", a.state)>{a.state.clone()}</span></td>
                    <td>{a.labels.clone()}</td>
                    <td class="detail">{a.summary.clone()}</td>
                    <td>{rfc3339_secs(a.starts_at_unix_nano)}</td>
                    <td>{a.ends_at_unix_nano.map(rfc3339_secs).unwrap_or_default()}</td>
                    <td>{traces}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h2>"Alerts"</h2>
        <table class="data" id="alerts">
            <thead><tr><th>"alert"</th><th>"state"</th><th>"labels"</th><th>"observed, comparator, threshold"</th><th>"since"</th><th>"resolved"</th><th>"example traces"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
