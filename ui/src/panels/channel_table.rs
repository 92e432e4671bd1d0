//! The overview's channel table: every channel (global first) with state, blue_percent,
//! apps, requests/s and error rate per colour, unknown-colour requests, firing alerts and
//! hops in the last 5 minutes.

use leptos::prelude::*;

use crate::pages::{Chrome, error_rate, per_second};
use crate::source::ChannelRow;

/// One row per channel, linking to its page (the range kept), rates over `seconds`.
#[component]
pub fn ChannelTable<'a>(
    /// The page's frame (its path, range and links that keep it).
    chrome: &'a Chrome,
    /// Every channel.
    channels: &'a [ChannelRow],
    /// The length of the range, the denominator of the rates.
    seconds: f64,
) -> impl IntoView + use<> {
    let secs = seconds;
    let l = chrome.lang;
    let rows = channels
        .iter()
        .map(|c| {
            let href = chrome.link(&format!("/channels/{}", c.id));
            let apps = if c.apps.is_empty() && c.id == "global" {
                tr!(l, "channels.global_apps")
            } else {
                c.apps.join(", ")
            };
            let state_class = format!("state s-{}", c.state);
            let alert_class = if c.firing_alerts > 0 {
                "num alerting"
            } else {
                "num"
            };
            let hop_class = if c.hops_last_5m > 0 {
                "num alerting"
            } else {
                "num"
            };
            // An idle channel owns no traffic (its apps' requests count under global while
            // it releases, domain §4): "–" rather than a rate of 0 that reads as an outage.
            let idle = c.state == "idle"
                && c.blue.requests == 0
                && c.green.requests == 0
                && c.unknown_requests == 0;
            let idle_title = idle.then(|| tr!(l, "channels.idle"));
            let state = crate::pages::state_label(l, &c.state);
            let rate = |n: u64| {
                if idle {
                    "–".to_owned()
                } else {
                    per_second(n, secs)
                }
            };
            view! {
                <tr data-channel=c.id.clone()>
                    <td><a href=href>{c.id.clone()}</a></td>
                    <td><span class=state_class data-state=c.state.clone()>{state}</span></td>
                    <td class="num bp">{c.blue_percent}"%"</td>
                    <td class="apps">{apps}</td>
                    <td class="num" title=idle_title.clone()>{rate(c.blue.requests)}</td>
                    <td class="num" title=idle_title>{rate(c.green.requests)}</td>
                    <td class="num">{error_rate(&c.blue)}</td>
                    <td class="num">{error_rate(&c.green)}</td>
                    <td class="num">{c.unknown_requests}</td>
                    <td class=alert_class>{c.firing_alerts}</td>
                    <td class=hop_class>{c.hops_last_5m}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="data" id="channels">
            <thead>
                <tr>
                    <th>{tr!(l, "col.channel")}</th><th>{tr!(l, "col.state")}</th><th>"blue_percent"</th><th>{tr!(l, "col.apps")}</th>
                    <th>{tr!(l, "col.blue_rps")}</th><th>{tr!(l, "col.green_rps")}</th>
                    <th>{tr!(l, "col.blue_errors")}</th><th>{tr!(l, "col.green_errors")}</th>
                    <th>{tr!(l, "col.unknown_requests")}</th><th>{tr!(l, "col.firing_alerts")}</th><th>{tr!(l, "col.hops_5m")}</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
