//! The lanes page's findings (domain §7.3–7.4): leaks, dropped tags, base traffic in a lane,
//! tags set mid-trace and lane error spikes, grouped by what they name, with links to example
//! traces; and the counted exceptions that are expected or undecidable and never alerted.

use leptos::prelude::*;

use super::example_traces;
use crate::range::clock;
use crate::source::{LaneCountsView, LaneFindingRow};

/// One row per finding group.
#[component]
pub fn LaneFindings<'a>(
    /// The findings.
    findings: &'a [LaneFindingRow],
    /// The counted exceptions.
    counts: &'a LaneCountsView,
) -> impl IntoView + use<> {
    let rows = findings
        .iter()
        .map(|f| {
            let class = format!("finding f-{}", f.finding);
            view! {
                <tr class=class data-finding=f.finding.clone()>
                    <td>{f.finding.clone()}</td>
                    <td>{f.place.clone()}</td>
                    <td>{f.lane.clone()}</td>
                    <td>{f.kind.clone()}</td>
                    <td>{f.reason.clone()}</td>
                    <td class="num">{f.count}</td>
                    <td>{clock(f.first_unix_nano)}</td>
                    <td>{example_traces(&f.trace_ids)}</td>
                </tr>
            }
        })
        .collect_view();
    let none = findings.is_empty().then(
        || view! { <p class="ok" id="no-lane-findings">"No lane finding in this range."</p> },
    );
    view! {
        <h2>"Lane findings"</h2>
        {none}
        <table class="data" id="lane-findings">
            <thead><tr><th>"finding"</th><th>"where"</th><th>"lane"</th><th>"kind"</th><th>"reason"</th><th>"count"</th><th>"first"</th><th>"example traces"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
        <p class="facts" id="lane-counts">
            "Counted, not alerted: "
            <span id="count-lane-fallback">{counts.lane_fallback}</span> " fallback to base (no instance in the lane) · "
            <span id="count-failover">{counts.failover}</span> " failover · "
            <span id="count-tag-not-recorded">{counts.tag_not_recorded}</span> " tag not recorded · "
            <span id="count-reverse-fallback">{counts.reverse_fallback}</span> " reverse fallback · "
            <span id="count-undetermined">{counts.undetermined}</span> " undetermined · "
            <span id="count-malformed">{counts.malformed_lane_tags}</span> " malformed lane tags"
        </p>
    }
}
