//! The channel page's event log: every control operation on the channel, newest first.

use leptos::prelude::*;

use super::op_label;
use crate::locale::{Lang, Zone};
use crate::source::OpLine;

/// One row per operation of `ops` (given oldest first), newest first.
#[component]
pub fn EventLog<'a>(
    /// The page's language.
    lang: Lang,
    /// The zone the page shows times in.
    zone: Zone,
    /// The channel's operations, oldest first.
    ops: &'a [OpLine],
) -> impl IntoView + use<> {
    let l = lang;
    let rows = ops
        .iter()
        .rev()
        .map(|o| {
            view! {
                <tr>
                    <td class="num">{o.seq}</td>
                    <td>{zone.stamp(o.t_unix_nano)}</td>
                    <td>{op_label(o)}</td>
                    <td>{o.actor.clone()}</td>
                    <td class="note">{o.note.clone().unwrap_or_default()}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h2>{tr!(l, "events.title")}</h2>
        <table class="data" id="events">
            <thead><tr><th>{tr!(l, "col.seq")}</th><th>{tr!(l, "col.time")}</th><th>{tr!(l, "col.operation")}</th><th>{tr!(l, "col.actor")}</th><th>{tr!(l, "col.note")}</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
