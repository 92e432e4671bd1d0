//! The trace page `/traces/{trace_id}` (a waterfall with each span's app, instance, host,
//! colour chip, decisions, lane (the lane that served it, its tag and intended lane) and
//! status; hop, missing-decision and lane spans marked, with the via
//! apps; one page of a large trace, `?offset=`, saying how many spans it left out) and trace
//! search `/traces` (the drilldown API's filters, lane, lane tag and lane group among them).

use leptos::prelude::*;

use super::{Chrome, chip, trace_link};
use crate::locale::Lang;
use crate::source::{TraceHit, TraceSearch, TraceView};
use dyeline_model::time::rfc3339_secs;

/// Indentation levels drawn at most: a deeper span is indented as this deep (its `depth`
/// is in the row's `data-depth` and its tooltip).
const MAX_INDENT: usize = 40;

/// `n` with thousands separated by commas (`190,001`).
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The trace page's body: one page of the trace's spans, with how many are left out and
/// links to the previous and next pages.
pub fn body(chrome: &Chrome, view_: &TraceView) -> AnyView {
    let (l, zone) = (chrome.lang, chrome.zone);
    let t0 = view_.start_unix_nano;
    let total = (view_.end_unix_nano - t0).max(1) as f64;
    let rows = view_
        .spans
        .iter()
        .map(|s| {
            let left = ((s.start_unix_nano - t0) as f64 / total * 100.0).clamp(0.0, 100.0);
            let width = (s.duration_ns.max(0) as f64 / total * 100.0).clamp(0.3, 100.0);
            let mut class = String::from("span");
            if !s.hops.is_empty() {
                class.push_str(" hop");
            }
            if !s.missing_decision_channels.is_empty() {
                class.push_str(" missing");
            }
            if s.is_error {
                class.push_str(" error");
            }
            if s.lane_marks.iter().any(|m| is_lane_finding(&m.mark)) {
                class.push_str(" lane-mark");
            }
            let marks = s
                .hops
                .iter()
                .map(|h| view! { <span class="mark m-hop">{tr!(l, "trace.hop")} " " {h.clone()}</span> })
                .collect_view();
            let missing_marks = s
                .missing_decision_channels
                .iter()
                .map(|c| view! { <span class="mark m-missing">{tr!(l, "trace.missing_for")} " " {c.clone()}</span> })
                .collect_view();
            let lane_marks = s
                .lane_marks
                .iter()
                .map(|m| {
                    let class = if is_lane_finding(&m.mark) { "mark m-lane" } else { "mark m-lane-counted" };
                    view! { <span class=class data-mark=m.mark.clone() title=lane_mark_help(l, &m.mark)>{m.text.clone()}</span> }
                })
                .collect_view();
            let waiting = s.waiting_for_parent.then(|| view! { <span class="mark">{tr!(l, "trace.waiting")}</span> });
            let kind = match &s.traffic_kind {
                Some(k) => format!("{} {k}", s.span_kind),
                None => s.span_kind.clone(),
            };
            let indent = 0.3 + s.depth.min(MAX_INDENT) as f64 * 1.2;
            let status_message = s
                .status_message
                .clone()
                .map(|m| view! { <br/><small class="status-message">{m}</small> });
            view! {
                <tr class=class data-depth=s.depth id=format!("span-{}", s.span_id) data-span-id=s.span_id.clone()>
                    <td class="name" style=format!("padding-left:{indent:.1}em") title=format!("depth {}", s.depth)>{s.name.clone()}</td>
                    <td>{kind}</td>
                    <td>{s.app.clone()}</td>
                    <td>{s.instance.clone()}</td>
                    <td>{s.host.clone().unwrap_or_else(|| "–".into())}</td>
                    <td>{chip(l, &s.color)}</td>
                    <td class="decisions">{if s.decisions.is_empty() { "–".to_owned() } else { s.decisions.clone() }}</td>
                    <td class="lane">{lane_cell(l, s, view_)}</td>
                    <td class=if s.is_error { "status error" } else { "status" }>{s.status_code.clone()}{if s.is_error { " (error)" } else { "" }}{status_message}</td>
                    <td class="num">{format!("{:.2} ms", s.duration_ns as f64 / 1e6)}</td>
                    <td class="bar"><div class="track"><div class="fill" style=format!("margin-left:{left:.2}%;width:{width:.2}%")></div></div></td>
                    <td class="marks">{marks}{missing_marks}{lane_marks}{waiting}</td>
                </tr>
                {detail_row(l, s)}
            }
        })
        .collect_view();
    let shown = view_.spans.len();
    let paging = (shown < view_.span_count).then(|| {
        let base = format!("/traces/{}", view_.trace_id);
        let first = (shown > 0).then(|| {
            tr!(
                l,
                "trace.page_shown",
                first = thousands(view_.offset + 1),
                last = thousands(view_.offset + shown),
                total = thousands(view_.span_count)
            )
        });
        let prev = (view_.offset > 0).then(|| {
            let to = view_.offset.saturating_sub(view_.page_size);
            view! { " " <a id="prev-page" href=format!("{base}?offset={to}")>{tr!(l, "trace.previous")}</a> }
        });
        let next_at = view_.offset + shown;
        let next = (shown > 0 && next_at < view_.span_count).then(|| {
            view! { " " <a id="next-page" href=format!("{base}?offset={next_at}")>{tr!(l, "trace.next")}</a> }
        });
        view! {
            <p class="facts" id="trace-page">
                {first.unwrap_or_else(|| tr!(l, "trace.no_span_at", offset = thousands(view_.offset)))}
                <span id="left-out">{thousands(view_.span_count - shown)}</span>{format!(" {}", tr!(l, "trace.left_out"))}
                " " {tr!(l, "trace.page_size", size = thousands(view_.page_size))}
                {prev}{next}
            </p>
        }
    });
    view! {
        <h1>{tr!(l, "trace.heading")} " " <code id="trace-id">{view_.trace_id.clone()}</code></h1>
        <p class="facts">
            <span id="span-count">{view_.span_count}</span>{format!(" {}", tr!(l, "trace.spans"))} " · " {format!("{:.2} ms", total / 1e6)}
            " · " {tr!(l, "trace.started")} " " <span id="trace-start">{zone.stamp(t0)}</span>
            " · " <span id="hop-count">{view_.hop_spans}</span>{format!(" {}", tr!(l, "trace.hop_spans"))} " · " <span id="missing-count">{view_.missing_spans}</span>{format!(" {}", tr!(l, "trace.missing_spans"))}
            " · " <span id="lane-mark-count">{view_.lane_mark_spans}</span>{format!(" {}", tr!(l, "trace.lane_marked_spans"))}
        </p>
        {paging}
        <table class="data waterfall" id="waterfall">
            <thead><tr><th>"span"</th><th>{tr!(l, "col.kind")}</th><th>{tr!(l, "col.app")}</th><th>{tr!(l, "col.instance")}</th><th>{tr!(l, "col.host")}</th><th>{tr!(l, "col.colour")}</th><th>{tr!(l, "col.decisions")}</th><th>{tr!(l, "col.lane")}</th><th>{tr!(l, "col.status")}</th><th>{tr!(l, "col.duration")}</th><th>{tr!(l, "col.timeline")}</th><th>{tr!(l, "col.marks")}</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
        {lane_legend(l, view_)}
    }
    .into_any()
}

/// Key–value pairs as a two-column table (none when there are none).
fn pairs_table(
    class: &'static str,
    caption: String,
    pairs: &[(String, String)],
) -> Option<AnyView> {
    if pairs.is_empty() {
        return None;
    }
    let rows = pairs
        .iter()
        .map(|(k, v)| view! { <tr><th>{k.clone()}</th><td>{v.clone()}</td></tr> })
        .collect_view();
    Some(view! { <table class=format!("kv {class}")><caption>{caption}</caption><tbody>{rows}</tbody></table> }.into_any())
}

/// `k=v; k=v` of an event's or a link's attributes.
fn inline_pairs(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The row under a span with what the waterfall row leaves out, folded (a `<details>`, no
/// script): its attributes, its resource and scope, its events (each at its offset from the
/// span's start) and its links (to the linked span's trace page); none for a span with none
/// of them.
fn detail_row(l: Lang, s: &crate::source::TraceSpan) -> Option<AnyView> {
    // A span with nothing more to show has no row (a page of 10,000 bare spans stays small).
    if s.attributes.is_empty()
        && s.resource_attributes.is_empty()
        && s.scope.is_none()
        && s.events.is_empty()
        && s.links.is_empty()
        && s.trace_state.is_none()
    {
        return None;
    }
    let mut resource = s.resource_attributes.clone();
    if let Some(scope) = &s.scope {
        resource.push(("otel.scope".into(), scope.clone()));
    }
    let mut summary = vec![tr!(l, "detail.attributes_n", n = s.attributes.len())];
    if !resource.is_empty() {
        summary.push(tr!(l, "detail.resource"));
    }
    if !s.events.is_empty() {
        summary.push(tr!(l, "detail.events_n", n = s.events.len()));
    }
    if !s.links.is_empty() {
        summary.push(tr!(l, "detail.links_n", n = s.links.len()));
    }
    if s.trace_state.is_some() {
        summary.push(tr!(l, "detail.trace_state"));
    }
    let events = (!s.events.is_empty()).then(|| {
        let rows = s
            .events
            .iter()
            .map(|e| {
                let at = (e.time_unix_nano - s.start_unix_nano) as f64 / 1e6;
                view! { <tr><td class="num">{format!("{at:+.2} ms")}</td><td>{e.name.clone()}</td><td>{inline_pairs(&e.attributes)}</td></tr> }
            })
            .collect_view();
        view! {
            <table class="kv events"><caption>{tr!(l, "detail.events")}</caption>
                <thead><tr><th>{tr!(l, "detail.at")}</th><th>{tr!(l, "detail.event")}</th><th>{tr!(l, "detail.attributes")}</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        }
    });
    let links = (!s.links.is_empty()).then(|| {
        let items = s
            .links
            .iter()
            .map(|l| {
                let href = format!("/traces/{}#span-{}", l.trace_id, l.span_id);
                let attrs = (!l.attributes.is_empty()).then(|| format!(" ({})", inline_pairs(&l.attributes)));
                view! { <li><a class="link" href=href>{format!("{} / {}", l.trace_id, l.span_id)}</a>{attrs}</li> }
            })
            .collect_view();
        view! { <div class="links"><strong>{tr!(l, "detail.links")}</strong><ul>{items}</ul></div> }
    });
    let trace_state = s
        .trace_state
        .clone()
        .map(|t| view! { <p class="trace-state">{tr!(l, "detail.trace_state")} ": " <code>{t}</code></p> });
    view! {
        <tr class="detail" data-detail-for=s.span_id.clone()>
            <td colspan="12">
                <details>
                    <summary>{summary.join(" · ")}</summary>
                    {pairs_table("attributes", tr!(l, "detail.attributes"), &s.attributes)}
                    {pairs_table("resource", tr!(l, "detail.resource"), &resource)}
                    {events}
                    {links}
                    {trace_state}
                </details>
            </td>
        </tr>
    }
    .into_any()
    .into()
}

/// The lane mark types (domain §7.3): the findings first, then the outcomes the analyzer
/// only counts.
const LANE_MARKS: [&str; 8] = [
    "lane_leak",
    "lane_tag_dropped",
    "lane_pollution",
    "lane_tag_changed",
    "lane_fallback",
    "failover",
    "reverse_fallback",
    "tag_not_recorded",
];

/// A lane mark type's label and what it means, in `l`.
fn lane_mark(l: Lang, mark: &str) -> Option<(String, String)> {
    Some(match mark {
        "lane_leak" => (
            tr!(l, "mark.lane_leak.label"),
            tr!(l, "mark.lane_leak.help"),
        ),
        "lane_tag_dropped" => (
            tr!(l, "mark.lane_tag_dropped.label"),
            tr!(l, "mark.lane_tag_dropped.help"),
        ),
        "lane_pollution" => (
            tr!(l, "mark.lane_pollution.label"),
            tr!(l, "mark.lane_pollution.help"),
        ),
        "lane_tag_changed" => (
            tr!(l, "mark.lane_tag_changed.label"),
            tr!(l, "mark.lane_tag_changed.help"),
        ),
        "lane_fallback" => (
            tr!(l, "mark.lane_fallback.label"),
            tr!(l, "mark.lane_fallback.help"),
        ),
        "failover" => (tr!(l, "mark.failover.label"), tr!(l, "mark.failover.help")),
        "reverse_fallback" => (
            tr!(l, "mark.reverse_fallback.label"),
            tr!(l, "mark.reverse_fallback.help"),
        ),
        "tag_not_recorded" => (
            tr!(l, "mark.tag_not_recorded.label"),
            tr!(l, "mark.tag_not_recorded.help"),
        ),
        _ => return None,
    })
}

/// The lane finding types (the marks that are findings, not outcomes only counted): the
/// model's per-span lane detections.
pub fn lane_finding_types() -> impl Iterator<Item = &'static str> {
    dyeline_model::Detection::LANE_PER_SPAN
        .into_iter()
        .map(dyeline_model::Detection::as_str)
}

/// A lane mark type is one of the four findings.
fn is_lane_finding(mark: &str) -> bool {
    lane_finding_types().any(|m| m == mark)
}

/// The search's lane finding filter for `text`: `any` or a finding type (`None` for another).
pub fn lane_finding_filter(text: &str) -> Option<String> {
    (text == "any" || is_lane_finding(text)).then(|| text.to_owned())
}

/// What a lane mark type means (the mark's title text).
fn lane_mark_help(l: Lang, mark: &str) -> String {
    lane_mark(l, mark).map_or_else(
        || mark.to_owned(),
        |(label, help)| format!("{label}: {help}"),
    )
}

/// The legend of the lane mark types shown on the page (none when the page has no lane mark).
fn lane_legend(l: Lang, view_: &TraceView) -> Option<AnyView> {
    let shown: Vec<&str> = LANE_MARKS
        .into_iter()
        .filter(|m| {
            view_
                .spans
                .iter()
                .any(|s| s.lane_marks.iter().any(|x| x.mark == **m))
        })
        .collect();
    if shown.is_empty() {
        return None;
    }
    let items = shown
        .into_iter()
        .filter_map(|m| lane_mark(l, m).map(|t| (m, t)))
        .map(|(m, (label, help))| {
            view! { <dt data-mark=m>{label}</dt><dd>{help}</dd> }
        })
        .collect_view();
    Some(
        view! {
            <h2>{tr!(l, "trace.lane_marks")}</h2>
            <dl class="legend" id="lane-legend">{items}</dl>
        }
        .into_any(),
    )
}

/// A span's lane cell: the lane that served it (a link to its app's lane group's page over
/// the trace's time, or to the page of the apps in no group), the tag it carries and the lane
/// its request was meant for (domain §7.2), each said in words.
fn lane_cell(l: Lang, s: &crate::source::TraceSpan, view_: &TraceView) -> AnyView {
    let Some(lane) = &s.lane else {
        return view! { "–" }.into_any();
    };
    let page = s.lane_group.as_deref().unwrap_or("_ungrouped");
    // The lanes page over the minutes around the trace.
    let minute = 60_000_000_000;
    let from = view_.start_unix_nano.div_euclid(minute) * minute - 5 * minute;
    let to = (view_.end_unix_nano.div_euclid(minute) + 1) * minute + 5 * minute;
    let href = format!(
        "/lanes/{}?from={}&to={}",
        super::encode(page),
        rfc3339_secs(from),
        rfc3339_secs(to)
    );
    let title = match &s.lane_group {
        Some(g) => tr!(l, "trace.lane_group", group = g),
        None => tr!(l, "trace.no_lane_group"),
    };
    let mut rest = String::new();
    if let Some(t) = &s.lane_tag {
        rest.push_str(&format!(" · {} {t}", tr!(l, "trace.tag")));
    }
    if let Some(i) = &s.intended_lane {
        rest.push_str(&format!(" · {} {i}", tr!(l, "trace.for")));
    }
    view! { <a class="lane" href=href title=title>{lane.clone()}</a>{rest} }.into_any()
}

fn selected(v: &Option<bool>, want: Option<bool>) -> bool {
    *v == want
}

/// The search page's body.
pub fn search_body(
    chrome: &Chrome,
    q: &TraceSearch,
    hits: &[TraceHit],
    channels: &[String],
) -> AnyView {
    let (l, zone) = (chrome.lang, chrome.zone);
    let any = tr!(l, "search.any");
    let channel_options = std::iter::once(String::new())
        .chain(channels.iter().cloned())
        .map(|c| {
            let sel = q.channel.as_deref().unwrap_or("") == c;
            let label = if c.is_empty() { any.clone() } else { c.clone() };
            view! { <option value=c selected=sel>{label}</option> }
        })
        .collect_view();
    let color_options = ["", "blue", "green", "unknown"]
        .into_iter()
        .map(|c| {
            let sel = q.color.as_deref().unwrap_or("") == c;
            let label = if c.is_empty() {
                any.clone()
            } else {
                c.to_owned()
            };
            view! { <option value=c selected=sel>{label}</option> }
        })
        .collect_view();
    let lane_finding_options = ["", "any"]
        .into_iter()
        .chain(lane_finding_types())
        .map(|f| {
            let sel = q.lane_finding.as_deref().unwrap_or("") == f;
            view! { <option value=f selected=sel>{if f.is_empty() { "–" } else { f }}</option> }
        })
        .collect_view();
    let tri = |name: &'static str, v: &Option<bool>| {
        view! {
            <select name=name>
                <option value="" selected=selected(v, None)>{tr!(l, "search.any")}</option>
                <option value="true" selected=selected(v, Some(true))>{tr!(l, "search.yes")}</option>
                <option value="false" selected=selected(v, Some(false))>{tr!(l, "search.no")}</option>
            </select>
        }
    };
    let rows = hits
        .iter()
        .map(|h| {
            let colors = h
                .colors
                .iter()
                .map(|c| view! { {chip(l, c)} " " })
                .collect_view();
            view! {
                <tr>
                    <td>{trace_link(&h.trace_id)}</td>
                    <td>{zone.stamp(h.start_unix_nano)}</td>
                    <td class="num">{format!("{:.2} ms", h.duration_ms)}</td>
                    <td class="num">{h.spans}</td>
                    <td>{h.apps.join(", ")}</td>
                    <td>{colors}</td>
                    <td>{if h.error { tr!(l, "search.error") } else { String::new() }}</td>
                    <td class="num">{h.hops}</td>
                </tr>
            }
        })
        .collect_view();
    let keep_range = (!chrome.range_query().is_empty()).then(|| {
        view! {
            <input type="hidden" name="from" value=rfc3339_secs(chrome.range.from_unix_nano)/>
            <input type="hidden" name="to" value=rfc3339_secs(chrome.range.to_unix_nano)/>
        }
    });
    view! {
        <h1>{tr!(l, "title.traces")}</h1>
        <form method="get" action="/traces" class="filters" id="search-form">
            {keep_range}
            <label>{tr!(l, "col.channel")} " " <select name="channel">{channel_options}</select></label>
            <label>" " {tr!(l, "col.app")} " " <input name="app" value=q.app.clone().unwrap_or_default() size="12"/></label>
            <label>" " {tr!(l, "col.colour")} " " <select name="color">{color_options}</select></label>
            <label>" " {tr!(l, "search.error")} " " {tri("error", &q.error)}</label>
            <label>" " {tr!(l, "search.hop")} " " {tri("hop", &q.hop)}</label>
            <label>" " {tr!(l, "col.lane")} " " <input name="lane" value=q.lane.clone().unwrap_or_default() size="8" title="a span served by an instance of this lane (base included)"/></label>
            <label>" " {tr!(l, "search.lane_tag")} " " <input name="lane_tag" value=q.lane_tag.clone().unwrap_or_default() size="8" title="a span carrying this lane tag"/></label>
            <label>" " {tr!(l, "search.lane_group")} " " <input name="lane_group" value=q.lane_group.clone().unwrap_or_default() size="8" title="a span of an app in this lane group at the span's start"/></label>
            <label>" " {tr!(l, "search.lane_finding")} " " <select name="lane_finding">{lane_finding_options}</select></label>
            <label>" " {tr!(l, "search.attribute")} " " <input name="attribute" value=q.attribute.clone().unwrap_or_default() size="18" placeholder="key=value" title=tr!(l, "search.attribute_help")/></label>
            <label>" " {tr!(l, "search.min_duration")} " " <input name="min_duration_ms" type="number" step="any" min="0" size="6" value=q.min_duration_ms.map(|v| v.to_string()).unwrap_or_default()/></label>
            <label>" " {tr!(l, "search.limit")} " " <input name="limit" type="number" min="1" max="1000" size="4" value=q.limit.to_string()/></label>
            <button type="submit">{tr!(l, "search.search")}</button>
        </form>
        <p id="hit-count">{hits.len()} " " {tr!(l, "search.traces_found")}</p>
        <table class="data" id="traces">
            <thead><tr><th>{tr!(l, "col.trace")}</th><th>{tr!(l, "col.start")}</th><th>{tr!(l, "col.duration")}</th><th>{tr!(l, "col.spans")}</th><th>{tr!(l, "col.apps")}</th><th>{tr!(l, "col.colours")}</th><th>{tr!(l, "search.error")}</th><th>{tr!(l, "col.hops")}</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}
