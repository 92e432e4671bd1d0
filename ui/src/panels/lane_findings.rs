//! The lanes page's findings (domain §7.3–7.4): leaks, dropped tags, base traffic in a lane,
//! tags set mid-trace and lane error spikes, grouped by what they name, with links to example
//! traces; and the counted exceptions that are expected or undecidable and never alerted.

use leptos::prelude::*;

use super::example_traces;
use crate::locale::{Lang, Zone};
use crate::source::{LaneCountsView, LaneFindingRow};

/// One row per finding group.
#[component]
pub fn LaneFindings<'a>(
    /// The page's language.
    lang: Lang,
    /// The zone the page shows times in.
    zone: Zone,
    /// The findings.
    findings: &'a [LaneFindingRow],
    /// The counted exceptions.
    counts: &'a LaneCountsView,
) -> impl IntoView + use<> {
    let l = lang;
    let rows = findings
        .iter()
        .map(|f| {
            let class = format!("finding f-{}", f.finding);
            view! {
                <tr class=class data-finding=f.finding.clone()>
                    // English shows the type's code; Chinese its label beside the code.
                    <td>{if l == Lang::En { f.finding.clone() } else { format!("{} {}", crate::pages::finding_label(l, &f.finding), f.finding) }}</td>
                    <td>{f.place.clone()}</td>
                    <td>{f.lane.clone()}</td>
                    <td>{f.kind.clone()}</td>
                    <td>{f.reason.clone()}</td>
                    <td class="num">{f.count}</td>
                    <td>{zone.clock(f.first_unix_nano)}</td>
                    <td>{example_traces(&f.trace_ids)}</td>
                </tr>
            }
        })
        .collect_view();
    let none = findings
        .is_empty()
        .then(|| view! { <p class="ok" id="no-lane-findings">{tr!(l, "lane_findings.none")}</p> });
    view! {
        <h2>{tr!(l, "lane_findings.title")}</h2>
        {none}
        <table class="data" id="lane-findings">
            <thead><tr><th>{tr!(l, "col.finding")}</th><th>{tr!(l, "col.where")}</th><th>{tr!(l, "col.lane")}</th><th>{tr!(l, "col.kind")}</th><th>{tr!(l, "col.reason")}</th><th>{tr!(l, "col.count")}</th><th>{tr!(l, "col.first")}</th><th>{tr!(l, "col.example_traces")}</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
        <p class="facts" id="lane-counts">
            {tr!(l, "lane_findings.counted")} " "
            <span id="count-lane-fallback">{counts.lane_fallback}</span> " " {tr!(l, "lane_findings.fallback")} " · "
            <span id="count-failover">{counts.failover}</span> " " {tr!(l, "lane_findings.failover")} " · "
            <span id="count-tag-not-recorded">{counts.tag_not_recorded}</span> " " {tr!(l, "lane_findings.tag_not_recorded")} " · "
            <span id="count-reverse-fallback">{counts.reverse_fallback}</span> " " {tr!(l, "lane_findings.reverse_fallback")} " · "
            <span id="count-undetermined">{counts.undetermined}</span> " " {tr!(l, "lane_findings.undetermined")} " · "
            <span id="count-malformed">{counts.malformed_lane_tags}</span> " " {tr!(l, "lane_findings.malformed")}
        </p>
    }
}
