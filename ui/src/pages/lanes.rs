//! The lanes pages (domain §7): the index `/lanes` (every lane group, then the apps in no
//! group, with what was found in each) and one page per group, `/lanes/{id}`, or for the apps
//! in no group, `/lanes/_ungrouped`: the group's settings, the apps × lanes matrix, the lane
//! findings and counts, their live alerts, and an error rate chart per app. The panels are in [`crate::panels`].

use leptos::prelude::*;

use super::Chrome;
use crate::panels::{Alerts, LaneErrorChart, LaneFindings, LaneMatrix};
use crate::source::{LanesIndex, LanesPage};

/// The path of the page for the apps in no lane group (`_` is not in the id grammar, so no
/// group can take it).
pub const UNGROUPED: &str = "_ungrouped";

/// The index's body.
pub fn index_body(chrome: &Chrome, data: &LanesIndex) -> AnyView {
    let l = chrome.lang;
    let rows = data
        .groups
        .iter()
        .map(|g| {
            let (id, label) = match &g.group {
                Some(id) => (id.clone(), id.clone()),
                None => (UNGROUPED.to_owned(), tr!(l, "lanes.no_group")),
            };
            let alerting = if g.firing_alerts > 0 {
                "num alerting"
            } else {
                "num"
            };
            view! {
                <tr data-group=id.clone()>
                    <td><a href=chrome.link(&format!("/lanes/{id}"))>{label}</a></td>
                    <td class="apps">{g.apps.join(", ")}</td>
                    <td>{if g.lanes.is_empty() { "–".to_owned() } else { g.lanes.join(", ") }}</td>
                    <td class="num">{g.findings}</td>
                    <td class="num">{g.lane_fallback}</td>
                    <td class=alerting>{g.firing_alerts}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h1>{tr!(l, "title.lanes")}</h1>
        {super::staleness(chrome, data.analysed_to_unix_nano)}
        <table class="data" id="lane-groups">
            <thead><tr><th>{tr!(l, "search.lane_group")}</th><th>{tr!(l, "col.apps")}</th><th>{tr!(l, "col.lanes")}</th><th class="num">{tr!(l, "col.findings")}</th><th class="num">{tr!(l, "col.fallback_to_base")}</th><th class="num">{tr!(l, "col.firing_alerts")}</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

/// A group's (or the ungrouped apps') page body.
pub fn body(chrome: &Chrome, data: &LanesPage) -> AnyView {
    let (l, zone) = (chrome.lang, chrome.zone);
    let (title, settings) = match &data.group {
        Some(g) => {
            let strict = if g.strict_lanes.is_empty() {
                tr!(l, "lanes.none")
            } else {
                g.strict_lanes.join(", ")
            };
            let entry = if g.entry_apps.is_empty() {
                tr!(l, "lanes.none")
            } else {
                g.entry_apps.join(", ")
            };
            (
                tr!(l, "title.lane_group", id = g.id),
                tr!(
                    l,
                    "lanes.settings",
                    entry = entry,
                    strict = strict,
                    reverse = if g.reverse_fallback {
                        tr!(l, "lanes.allowed")
                    } else {
                        tr!(l, "lanes.not_allowed")
                    }
                ),
            )
        }
        None => (tr!(l, "title.ungrouped"), tr!(l, "lanes.defaults")),
    };
    let charts = data
        .error_rates
        .iter()
        .map(|s| view! { <LaneErrorChart lang=l zone=zone range=chrome.range series=s/> })
        .collect_view();
    view! {
        <h1>{title}</h1>
        {super::staleness(chrome, data.analysed_to_unix_nano)}
        <p class="facts" id="lane-group-settings">{settings}</p>
        <LaneMatrix lang=l lanes=&data.lanes apps=&data.apps/>
        <LaneFindings lang=l zone=zone findings=&data.findings counts=&data.counts/>
        <Alerts lang=l zone=zone alerts=&data.alerts/>
        <h2>{tr!(l, "lanes.error_rate_title")}</h2>
        <section class="charts" id="lane-error-charts">{charts}</section>
    }
    .into_any()
}
