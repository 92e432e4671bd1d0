//! Trace search (issue: analyzer, item 5): traces of a time range filtered by channel, app,
//! colour, error, hop and minimum duration, and by lane (domain §7: the lane of an instance
//! that served a span, a lane tag a span carries, the lane group of a span's app at its
//! start), and by attribute (`key=value` on a span's attributes, its resource's or a promoted
//! column: [`AttributeFilter`]), newest first, for the dashboard's lists and drilldown links.

use std::collections::{BTreeSet, HashSet};

use datafusion::prelude::SessionContext;
use dyeline_model::release::Timeline;
use dyeline_model::{Color, Detection};
use serde::Serialize;

use crate::analyze::config::LaneWindows;
use crate::analyze::detect::lanes::LaneReport;
use crate::analyze::detect::traces;
use crate::analyze::findings::{CrossColorHop, hex128};
use crate::analyze::read::scan::load;
use crate::analyze::spans::{Signal, SpanRec, Spans};
use crate::span_detail::AttributeFilter;
use crate::sql::SqlError;

/// Filters of a search (all optional; `limit` defaults to 100, at most 1000).
#[derive(Clone, Debug, Default)]
pub struct TraceQuery {
    /// A span of an app whose effective channel is this one.
    pub channel: Option<String>,
    /// A span of this app.
    pub app: Option<String>,
    /// A span on an instance of this colour.
    pub color: Option<Color>,
    /// Has (true) or has no (false) error span.
    pub error: Option<bool>,
    /// Has (true) or has no (false) cross-colour hop.
    pub hop: Option<bool>,
    /// Lasts at least this long (first start to last end), ms.
    pub min_duration_ms: Option<f64>,
    /// A span served by an instance of this lane (`base` included).
    pub lane: Option<String>,
    /// A span carrying this lane tag (`base`: an explicit base tag).
    pub lane_tag: Option<String>,
    /// A span of an app that was in this lane group at the span's start.
    pub lane_group: Option<String>,
    /// Has a lane finding of this type ([`Detection::LANE_PER_SPAN`]; of any of them for `Some(None)`).
    pub lane_finding: Option<Option<&'static str>>,
    /// A span with this attribute (span, resource or promoted: [`AttributeFilter`]).
    pub attribute: Option<AttributeFilter>,
    /// Spans starting at or after, Unix ns.
    pub from: i64,
    /// Spans starting before, Unix ns.
    pub to: i64,
    /// At most this many traces.
    pub limit: usize,
}

/// One trace of a search.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TraceSummary {
    /// Trace id, lower-case hex.
    pub trace_id: String,
    /// First span start, Unix ns (decimal string).
    pub start_unix_nano: String,
    /// Last end − first start, ms.
    pub duration_ms: f64,
    /// Spans stored.
    pub spans: usize,
    /// Apps, sorted.
    pub apps: Vec<String>,
    /// Colours of its instances, sorted.
    pub colors: Vec<String>,
    /// Channels its apps were in, sorted.
    pub channels: Vec<String>,
    /// Any error span.
    pub error: bool,
    /// Cross-colour hops in it.
    pub hops: usize,
}

/// A lane finding filter's value: `any` or the name of one of
/// [`Detection::LANE_PER_SPAN`] (domain §7.3; `None` for another).
pub fn lane_finding_type(text: &str) -> Option<Option<&'static str>> {
    let t = text.trim();
    if t == "any" {
        return Some(None);
    }
    Detection::LANE_PER_SPAN
        .iter()
        .map(|d| d.as_str())
        .find(|f| *f == t)
        .map(Some)
}

/// Runs a search; the lane findings (for `lane_finding`) are judged with the lane windows
/// `lanes` and the presence signals around the range.
///
/// # Errors
/// [`SqlError`] when the scan fails.
pub async fn search(
    ctx: &SessionContext,
    timeline: &Timeline,
    lanes: &LaneWindows,
    q: &TraceQuery,
) -> Result<Vec<TraceSummary>, SqlError> {
    let mut spans = load(ctx, timeline, Some(q.from), Some(q.to)).await?;
    let mut hops = Vec::new();
    let mut missing = Vec::new();
    traces::find(&spans, &mut hops, &mut missing);
    let mut report = None;
    if q.lane_finding.is_some() {
        let w = i64::try_from(lanes.presence_window.as_nanos()).unwrap_or(i64::MAX);
        let (from, to) = (q.from.saturating_sub(w), q.to.saturating_add(w));
        let rows = crate::drilldown::lanes::presence_rows(ctx, from, to, w, Vec::new()).await?;
        // A bucket's first and last signal stand for it (the drilldown's reading).
        spans.signals = rows
            .into_iter()
            .flat_map(|c| {
                let signal = |t| Signal {
                    app: c.app.clone(),
                    instance: c.instance.clone(),
                    lane: c.lane.clone(),
                    lane_rule: String::new(),
                    t_unix_nano: t,
                };
                [signal(c.start), signal(c.end)]
            })
            .collect();
        report = Some(crate::analyze::detect::lanes::find(&spans, lanes));
    }
    let with_attribute = attribute_traces(ctx, q).await?;
    Ok(search_in(
        &spans,
        &hops,
        report.as_ref(),
        with_attribute.as_ref(),
        q,
    ))
}

/// The traces of `[q.from, q.to)` with a span that has `q.attribute` (`None` without that
/// filter). The store narrows the rows (exactly for a promoted key, by the key's text in the
/// JSON columns otherwise); each candidate's JSON is then read to match key and value exactly.
///
/// # Errors
/// [`SqlError`] when the scan fails.
pub async fn attribute_traces(
    ctx: &SessionContext,
    q: &TraceQuery,
) -> Result<Option<HashSet<u128>>, SqlError> {
    let Some(filter) = q.attribute.clone() else {
        return Ok(None);
    };
    let sql = format!(
        "SELECT trace_id, attributes, resource_attributes FROM spans \
         WHERE start_time_unix_nano >= {} AND start_time_unix_nano < {} AND {}",
        q.from,
        q.to,
        filter.sql_condition()
    );
    let found = crate::drilldown::scan(ctx, &sql, (filter, HashSet::new()), |(f, found), b| {
        let text = |name: &str| {
            b.column_by_name(name)
                .map(|c| arrow::compute::cast(c, &arrow::datatypes::DataType::Utf8))
                .transpose()
                .map_err(|e| SqlError::Internal(e.to_string()))
        };
        let (ids, attrs, resource) = (
            text("trace_id")?,
            text("attributes")?,
            text("resource_attributes")?,
        );
        let Some(ids) = ids else {
            return Ok(());
        };
        let ids = arrow::array::AsArray::as_string::<i32>(&ids);
        fn json(c: &Option<arrow::array::ArrayRef>, r: usize) -> Option<&str> {
            c.as_ref().and_then(|c| {
                let c = arrow::array::AsArray::as_string::<i32>(c);
                arrow::array::Array::is_valid(c, r).then(|| c.value(r))
            })
        }
        for r in 0..b.num_rows() {
            let hit = f.is_promoted()
                || json(&attrs, r).is_some_and(|t| f.matches_json(t))
                || json(&resource, r).is_some_and(|t| f.matches_json(t));
            if hit && let Ok(id) = u128::from_str_radix(ids.value(r), 16) {
                found.insert(id);
            }
        }
        Ok(())
    })
    .await?
    .1;
    Ok(Some(found))
}

/// As [`search`], over spans already loaded for `[q.from, q.to)`, the hops and the lane
/// findings found in them (the dashboard reuses its snapshot's load and report; without lane
/// findings, a `lane_finding` filter finds none), and the traces with `q.attribute`
/// ([`attribute_traces`]; without them, an attribute filter finds none).
pub fn search_in(
    spans: &Spans,
    hops: &[CrossColorHop],
    lanes: Option<&LaneReport>,
    with_attribute: Option<&HashSet<u128>>,
    q: &TraceQuery,
) -> Vec<TraceSummary> {
    // Hops by numeric trace id: no string is made for a trace that is not shown.
    let mut hop_count: std::collections::HashMap<u128, usize> = std::collections::HashMap::new();
    for h in hops {
        if let Ok(id) = u128::from_str_radix(&h.trace_id, 16) {
            *hop_count.entry(id).or_default() += 1;
        }
    }
    let channel_id = q.channel.as_deref().and_then(|c| spans.channels.get(c));
    let app_id = q.app.as_deref().and_then(|a| spans.apps.get(a));
    if (q.channel.is_some() && channel_id.is_none()) || (q.app.is_some() && app_id.is_none()) {
        return Vec::new();
    }
    let lane_findings = q.lane_finding.map(|ty| lane_finding_traces(lanes, ty));
    let Some(lanes) = LaneFilter::new(spans, q) else {
        return Vec::new();
    };
    // Filter with cheap checks, keep (start, end, hops, trace) and build summaries only for
    // the `limit` newest.
    // (start, end, hops, the trace's spans)
    type Hit<'a> = (i64, i64, usize, &'a [crate::analyze::spans::SpanRec]);
    let mut hits: Vec<Hit> = Vec::new();
    for t in spans.traces() {
        if channel_id.is_some() && !t.iter().any(|s| s.channel.get() == channel_id) {
            continue;
        }
        if app_id.is_some() && !t.iter().any(|s| Some(s.app) == app_id) {
            continue;
        }
        if let Some(c) = q.color
            && !t.iter().any(|s| s.color == c)
        {
            continue;
        }
        if !lanes.keeps(spans, t) {
            continue;
        }
        if let Some(found) = &lane_findings
            && !found.contains(&t[0].trace)
        {
            continue;
        }
        if q.attribute.is_some() && !with_attribute.is_some_and(|f| f.contains(&t[0].trace)) {
            continue;
        }
        if q.error.is_some_and(|e| e != t.iter().any(|s| s.is_error)) {
            continue;
        }
        let n_hops = hop_count.get(&t[0].trace).copied().unwrap_or(0);
        if q.hop.is_some_and(|h| h != (n_hops > 0)) {
            continue;
        }
        let start = t.iter().map(|s| s.start).min().unwrap_or(0);
        let end = t.iter().map(|s| s.end).max().unwrap_or(start);
        if q.min_duration_ms
            .is_some_and(|m| ((end - start).max(0) as f64 / 1e6) < m)
        {
            continue;
        }
        hits.push((start, end, n_hops, t));
    }
    // Newest first, ties by trace id (ascending).
    let newest_first = |a: &Hit, b: &Hit| b.0.cmp(&a.0).then(a.3[0].trace.cmp(&b.3[0].trace));
    let limit = q.limit.clamp(1, 1000);
    if hits.len() > limit {
        // The `limit` newest (a selection over every matching trace), then sorted.
        hits.select_nth_unstable_by(limit - 1, newest_first);
        hits.truncate(limit);
    }
    hits.sort_unstable_by(newest_first);
    hits.into_iter()
        .map(|(start, end, n_hops, t)| {
            let apps: BTreeSet<String> = t
                .iter()
                .map(|s| spans.apps.name(s.app).to_owned())
                .collect();
            let colors: BTreeSet<String> = t.iter().map(|s| s.color.as_str().to_owned()).collect();
            let channels: BTreeSet<String> = t
                .iter()
                .filter_map(|s| s.channel.get())
                .collect::<HashSet<u32>>()
                .into_iter()
                .map(|c| spans.channels.name(c).to_owned())
                .collect();
            TraceSummary {
                trace_id: hex128(t[0].trace),
                start_unix_nano: start.to_string(),
                duration_ms: (end - start).max(0) as f64 / 1e6,
                spans: t.len(),
                apps: apps.into_iter().collect(),
                colors: colors.into_iter().collect(),
                channels: channels.into_iter().collect(),
                error: t.iter().any(|s| s.is_error),
                hops: n_hops,
            }
        })
        .collect()
}

/// Lane ids in filters are trimmed and lower-cased, as at ingest (domain §7.1).
fn lane_id(text: &str) -> String {
    text.trim().to_lowercase()
}

/// The lane filters of a query, resolved against the loaded spans.
struct LaneFilter<'a> {
    /// Lane id (of [`Spans::lanes`]) a span was served in.
    lane: Option<u32>,
    /// Lane id of a tag a span carries.
    tag: Option<u32>,
    /// The group asked for, and the apps (by id) ever in it.
    group: Option<(String, Vec<bool>)>,
    timeline: &'a dyeline_model::release::LaneGroupTimeline,
}

impl<'a> LaneFilter<'a> {
    /// `None` when a filter names a lane no span has (nothing can match).
    fn new(spans: &'a Spans, q: &TraceQuery) -> Option<Self> {
        let names = &spans.lanes.names;
        let find = |v: &Option<String>| match v {
            None => Some(None),
            Some(l) => names.get(&lane_id(l)).map(Some),
        };
        let group = q.lane_group.as_deref().map(|g| {
            let g = lane_id(g);
            let apps = (0..spans.apps.len() as u32)
                .map(|a| {
                    spans
                        .lane_groups
                        .changes(spans.apps.name(a))
                        .iter()
                        .any(|c| c.group.as_ref().is_some_and(|x| x.id().as_str() == g))
                })
                .collect();
            (g, apps)
        });
        Some(Self {
            lane: find(&q.lane)?,
            tag: find(&q.lane_tag)?,
            group,
            timeline: &spans.lane_groups,
        })
    }

    /// Trace `t` passes every lane filter.
    fn keeps(&self, spans: &Spans, t: &[SpanRec]) -> bool {
        let fact = |s: &SpanRec| spans.lanes.fact(s.lane);
        if let Some(l) = self.lane
            && !t.iter().any(|s| fact(s).lane == l)
        {
            return false;
        }
        if let Some(l) = self.tag
            && !t.iter().any(|s| fact(s).tag == Some(l))
        {
            return false;
        }
        if let Some((g, apps)) = &self.group {
            return t.iter().any(|s| {
                apps.get(s.app as usize).copied().unwrap_or(false)
                    && self
                        .timeline
                        .group_at(spans.apps.name(s.app), s.start)
                        .is_some_and(|x| x.id().as_str() == g)
            });
        }
        true
    }
}

/// The traces with a lane finding of type `ty` (any for `None`).
fn lane_finding_traces(lanes: Option<&LaneReport>, ty: Option<&str>) -> HashSet<u128> {
    let Some(l) = lanes else {
        return HashSet::new();
    };
    let of = |name: &str, ids: &mut dyn Iterator<Item = &String>| -> Vec<u128> {
        if ty.is_some_and(|t| t != name) {
            return Vec::new();
        }
        ids.filter_map(|id| u128::from_str_radix(id, 16).ok())
            .collect()
    };
    let mut out = HashSet::new();
    out.extend(of("lane_leak", &mut l.leaks.iter().map(|f| &f.trace_id)));
    out.extend(of(
        "lane_tag_dropped",
        &mut l.tags_dropped.iter().map(|f| &f.trace_id),
    ));
    out.extend(of(
        "lane_pollution",
        &mut l.pollution.iter().map(|f| &f.trace_id),
    ));
    out.extend(of(
        "lane_tag_changed",
        &mut l.tags_changed.iter().map(|f| &f.trace_id),
    ));
    out
}
