//! A page's alerts (a channel's, or a lane group's): firing and resolved, with labels, the
//! observed value against its threshold, since when and example traces.

use leptos::prelude::*;

use super::example_traces;
use crate::locale::{Lang, Zone};
use crate::source::AlertLine;

/// An alert's state (`firing`, `resolved`) as the reader's language says it.
fn alert_state(l: Lang, state: &str) -> String {
    match state {
        "firing" => tr!(l, "alerts.firing"),
        "resolved" => tr!(l, "alerts.resolved"),
        other => other.to_owned(),
    }
}

/// One row per alert of the channel, in the order given (firing first).
#[component]
pub fn Alerts<'a>(
    /// The page's language.
    lang: Lang,
    /// The zone the page shows times in.
    zone: Zone,
    /// The page's alerts, firing first.
    alerts: &'a [AlertLine],
) -> impl IntoView + use<> {
    let l = lang;
    let rows = alerts
        .iter()
        .map(|a| {
            let traces = example_traces(&a.trace_ids);
            view! {
                <tr class=format!("alert a-{}", a.state) data-alert=a.kind.clone()>
                    <td>{a.name.clone()}</td>
                    <td><span class=format!("state s-{}", a.state) data-state=a.state.clone()>{alert_state(l, &a.state)}</span></td>
                    <td>{a.labels.clone()}</td>
                    <td class="detail">{a.summary.clone()}</td>
                    <td>{zone.stamp(a.starts_at_unix_nano)}</td>
                    <td>{a.ends_at_unix_nano.map(|t| zone.stamp(t)).unwrap_or_default()}</td>
                    <td>{traces}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h2>{tr!(l, "alerts.title")}</h2>
        <table class="data" id="alerts">
            <thead><tr><th>{tr!(l, "col.alert")}</th><th>{tr!(l, "col.state")}</th><th>{tr!(l, "col.labels")}</th><th>{tr!(l, "col.observed_comparator_threshold")}</th><th>{tr!(l, "col.since")}</th><th>{tr!(l, "col.resolved")}</th><th>{tr!(l, "col.example_traces")}</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
