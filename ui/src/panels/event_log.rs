//! The channel page's event log: every control operation on the channel, newest first.

use leptos::prelude::*;

use super::op_label;
use crate::source::OpLine;
use dyeline_model::time::rfc3339_secs;

/// One row per operation of `ops` (given oldest first), newest first.
#[component]
pub fn EventLog<'a>(
    /// The channel's operations, oldest first.
    ops: &'a [OpLine],
) -> impl IntoView + use<> {
    let rows = ops
        .iter()
        .rev()
        .map(|o| {
            view! {
                <tr>
                    <td class="num">{o.seq}</td>
                    <td>{rfc3339_secs(o.t_unix_nano)}</td>
                    <td>{op_label(o)}</td>
                    <td>{o.actor.clone()}</td>
                    <td class="note">{o.note.clone().unwrap_or_default()}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h2>"Event log"</h2>
        <table class="data" id="events">
            <thead><tr><th>"seq"</th><th>"time"</th><th>"operation"</th><th>"actor"</th><th>"note"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
