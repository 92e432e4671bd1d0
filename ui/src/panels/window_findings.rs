//! The channel page's window findings (domain §6.3-6.6): drained-side traffic counted by
//! kind, and the table of every drained-side, ratio-deviation, skew and spike window.

use leptos::prelude::*;

use super::example_traces;
use crate::locale::{Lang, Zone};
use crate::pages::chip;
use crate::source::{Detection, WindowFinding};

/// The windowed detections, in the order the table lists their findings.
const WINDOWED: [Detection; 4] = [
    Detection::DrainedSide,
    Detection::RatioDeviation,
    Detection::InstanceSkew,
    Detection::ErrorSpike,
];

/// Windows with drained-side traffic, per kind (RPC, MQ, JOB).
#[component]
pub fn DrainedByKind<'a>(
    /// The page's language.
    lang: Lang,
    /// The channel's window findings.
    findings: &'a [WindowFinding],
) -> impl IntoView + use<> {
    let l = lang;
    let drained_total = |k: &str| -> u64 {
        findings
            .iter()
            .filter(|f| f.finding == Detection::DrainedSide && f.kind == k)
            .count() as u64
    };
    let drained_by_kind = ["RPC", "MQ", "JOB"]
        .into_iter()
        .map(|k| view! { <li>{k} ": " <span class="num">{drained_total(k)}</span> " " {tr!(l, "findings.windows")}</li> })
        .collect_view();
    view! {
        <h2>{tr!(l, "findings.drained_title")}</h2>
        <ul class="drained" id="drained-by-kind">{drained_by_kind}</ul>
    }
}

/// Every window finding, grouped by detection (drained side, ratio deviation, skew, spike),
/// in the order of `findings` within a group.
#[component]
pub fn WindowFindings<'a>(
    /// The page's language.
    lang: Lang,
    /// The zone the page shows times in.
    zone: Zone,
    /// The channel's window findings.
    findings: &'a [WindowFinding],
) -> impl IntoView + use<> {
    let l = lang;
    let rows = WINDOWED
        .into_iter()
        .flat_map(|d| findings.iter().filter(move |f| f.finding == d))
        .map(|f| {
            let traces = example_traces(&f.trace_ids);
            view! {
                <tr class=format!("finding f-{}", f.finding) data-finding=f.finding.as_str()>
                    <td>{crate::pages::finding_label(l, f.finding.as_str())}</td>
                    <td>{f.app.clone().unwrap_or_else(|| tr!(l, "findings.all_apps"))}</td>
                    <td>{chip(l, &f.color)}</td>
                    <td>{f.kind.clone()}</td>
                    <td>{f.instance.clone().unwrap_or_default()}</td>
                    <td class="detail">{f.detail.clone()}</td>
                    <td>{zone.clock(f.window_start_unix_nano)}</td>
                    <td>{traces}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h2>{tr!(l, "findings.title")}</h2>
        <table class="data" id="findings">
            <thead><tr><th>{tr!(l, "col.finding")}</th><th>{tr!(l, "col.app")}</th><th>{tr!(l, "col.colour")}</th><th>{tr!(l, "col.kind")}</th><th>{tr!(l, "col.instance")}</th><th>{tr!(l, "col.observed_vs_threshold")}</th><th>{tr!(l, "col.window")}</th><th>{tr!(l, "col.example_traces")}</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
