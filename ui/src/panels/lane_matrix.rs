//! The lanes page's apps × lanes matrix (domain §7.4): per app and lane over the range, the
//! instances seen (and by which signal, and whether present at the range's end), the entry
//! spans marked for the lane by outcome (served in lane, fallback, failover, leaked), the base
//! requests served in the lane (pollution), and the requests, errors and p99 the lane's
//! instances served.

use leptos::prelude::*;

use crate::locale::Lang;
use crate::source::{LaneAppRow, LaneCell};

/// One row per app, one column per lane (base first).
#[component]
pub fn LaneMatrix<'a>(
    /// The page's language.
    lang: Lang,
    /// The lanes, base first.
    lanes: &'a [String],
    /// One row per app, a cell per lane.
    apps: &'a [LaneAppRow],
) -> impl IntoView + use<> {
    let l = lang;
    let head = lanes
        .iter()
        .map(|l| view! { <th>{l.clone()}</th> })
        .collect_view();
    let rows = apps
        .iter()
        .map(|row| {
            let cells = row
                .cells
                .iter()
                .zip(lanes)
                .map(|(c, lane)| cell(l, &row.app, lane, c))
                .collect_view();
            view! { <tr><th scope="row">{row.app.clone()}</th>{cells}</tr> }
        })
        .collect_view();
    view! {
        <h2>{tr!(l, "matrix.title")}</h2>
        <p class="hint">{tr!(l, "matrix.hint")}</p>
        <table class="data lanes" id="lane-matrix">
            <thead><tr><th>{tr!(l, "col.app")}</th>{head}</tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

fn cell(l: Lang, app: &str, lane: &str, c: &LaneCell) -> impl IntoView + use<> {
    let base = lane == "base";
    let instances = if c.instances.is_empty() {
        view! { <div class="hint">{tr!(l, "matrix.no_instance")}</div> }.into_any()
    } else {
        c.instances
            .iter()
            .map(|i| {
                let absent = (!i.present_at_end).then(|| view! { " " <span class="warn">{tr!(l, "matrix.absent")}</span> });
                view! { <div class="instance">{i.instance.clone()} " (" {i.signals.clone()} ")" {absent}</div> }
            })
            .collect_view()
            .into_any()
    };
    let marked = (!base).then(|| {
        let leaked = (c.leaked > 0).then(|| view! { " · " <span class="warn">{tr!(l, "matrix.leaked", n = c.leaked)}</span> });
        view! {
            <div class="marked">
                {tr!(l, "matrix.marked", served = c.served_in_lane, fallback = c.lane_fallback, failover = c.failover)}
                {leaked}
            </div>
        }
    });
    let pollution = (c.pollution > 0).then(|| {
        view! { <div class="warn">{tr!(l, "matrix.base_traffic", n = c.pollution)}</div> }
    });
    let served = (c.requests > 0).then(|| {
        let rate = c.error_rate().map(|r| format!(" ({:.1}%)", r * 100.0)).unwrap_or_default();
        let p99 = c.p99_ms.map(|p| format!(" · p99 {p:.1} ms")).unwrap_or_default();
        view! { <div class="served">{tr!(l, "matrix.served", requests = c.requests, errors = c.errors)}{rate}{p99}</div> }
    });
    view! {
        <td class="cell" data-app=app.to_owned() data-lane=lane.to_owned()>
            {instances}{marked}{pollution}{served}
        </td>
    }
}
