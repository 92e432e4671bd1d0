//! The channel page `/channels/{id}`: blue share observed against blue_percent in force with
//! every operation annotated; requests/s, error rate and p99 per colour; blue's and green's
//! latency histograms side by side; per-app table; hop
//! edges, missing decisions, drained-side traffic by kind and the other window findings;
//! instances with skew and weights; alerts; the event log; and the release controls. Each
//! panel is a component of [`crate::panels`]; this file lays them out.

use leptos::prelude::*;

use super::{Chrome, encode};
use crate::panels::{
    Alerts, AppTable, BlueShareChart, ColorLoadChart, Controls, DrainedByKind, EventLog, HopEdges,
    Instances, LatencyHistogram, LoadMetric, MissingDecisions, WindowFindings,
};
use crate::source::ChannelPage;

/// The channel page's body; `app_filter` narrows the per-app table (case-insensitive
/// substring).
pub fn body(
    chrome: &Chrome,
    page: &ChannelPage,
    app_filter: Option<&str>,
    flash: Option<&str>,
) -> AnyView {
    let c = &page.channel;
    let (l, zone) = (chrome.lang, chrome.zone);
    let secs = chrome.range.rate_seconds(page.data_from_unix_nano);
    let state_class = format!("state s-{}", c.state);
    let flash =
        flash.map(|m| view! { <p class="flash" role="status" id="flash">{m.to_owned()}</p> });
    let search = chrome.link(&format!("/traces?channel={}", encode(&c.id)));
    let (range, steps, ops) = (chrome.range, &page.steps, &page.ops);
    let load_chart = |metric| {
        view! { <ColorLoadChart lang=l zone=zone metric=metric range=range step_seconds=page.step_seconds steps=steps ops=ops/> }
    };
    view! {
        <h1>{tr!(l, "channel.heading")} " " <span id="channel-id">{c.id.clone()}</span></h1>
        {flash}
        {super::staleness(chrome, page.analysed_to_unix_nano)}
        <p class="facts">
            <span class=state_class id="channel-state" data-state=c.state.clone()>{super::state_label(l, &c.state)}</span>
            " blue_percent " <strong id="blue-percent">{c.blue_percent}</strong> "%"
            " · " {tr!(l, "channel.apps")} " " {if c.apps.is_empty() { tr!(l, "channel.global_apps") } else { c.apps.join(", ") }}
            " · " {tr!(l, "channel.version")} " " {page.version}
            " · " <a href=search>{tr!(l, "channel.traces_link")}</a>
        </p>
        <section class="controls"><Controls chrome=chrome channel=c/></section>
        <section class="charts">
            <BlueShareChart lang=l zone=zone range=range steps=steps ops=ops/>
            {load_chart(LoadMetric::RequestsPerSecond)}
            {load_chart(LoadMetric::ErrorRate)}
            {load_chart(LoadMetric::P99)}
        </section>
        <section><LatencyHistogram lang=l latency=&page.latency/></section>
        <section>
            <AppTable chrome=chrome rows=&page.apps filter=app_filter seconds=secs/>
        </section>
        <section>
            <HopEdges lang=l hops=&page.hops/>
            <MissingDecisions lang=l missing=&page.missing/>
            <DrainedByKind lang=l findings=&page.findings/>
            <WindowFindings lang=l zone=zone findings=&page.findings/>
        </section>
        <section><Instances lang=l instances=&page.instances/></section>
        <section><Alerts lang=l zone=zone alerts=&page.alerts/></section>
        <section><EventLog lang=l zone=zone ops=&page.ops/></section>
    }
    .into_any()
}
