//! The lane rules over the analyzer's loaded spans ([`Spans`]): each trace's records copied
//! into [`LaneSpan`]s with their lane facts, presence from the spans and the OTLP metrics and
//! logs signals ([`Spans::signals`]), the lane groups of the timeline the spans were resolved
//! by; and the lists the report
//! carries beside the findings: each instance's lane ([`InstanceLane`]) and each span's lane
//! carriers ([`SpanLaneTag`], with `--with-decisions`).

use std::num::NonZeroU64;

use serde::Serialize;

use super::presence::{Covered, Presence, PresenceBuilder};
use super::{BASE, LaneFields, LaneJudge, LaneKind, LaneReport, TimelineGroups};
use crate::analyze::config::LaneWindows;
use crate::analyze::findings::{hex64, hex128};
use crate::analyze::report::fold_halves;
use crate::analyze::spans::{Kind, SpanRec, Spans};

/// An instance and its lane (the `lanes` list of the report).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct InstanceLane {
    /// Instance id.
    pub instance: String,
    /// App.
    pub app: String,
    /// Lane.
    pub lane: String,
    /// `deploy.lane`, the key of the user rule that decided, or `default`.
    pub rule: String,
    /// Lane values met that are not lane ids.
    pub invalid_values: Vec<String>,
}

/// A span on which a lane carrier is present (`lane_tags` with `--with-decisions`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SpanLaneTag {
    /// Trace id.
    pub trace_id: String,
    /// Span id.
    pub span_id: String,
    /// App.
    pub app: String,
    /// The carrier that gave the tag (`null`: none did).
    pub source: Option<String>,
    /// The tag (`null`: no carrier gave a lane id).
    pub tag: Option<String>,
    /// Carriers on the span that gave no lane id.
    pub malformed: u32,
}

/// A span as the lane rules read it.
#[derive(Clone, Debug)]
pub struct LaneSpan {
    trace: u128,
    span: u64,
    parent: Option<NonZeroU64>,
    kind: LaneKind,
    links: bool,
    app: u32,
    instance: u32,
    lane: u32,
    tag: Option<u32>,
    start: i64,
    end: i64,
    is_error: bool,
}

impl LaneSpan {
    pub(crate) fn of(s: &SpanRec, spans: &Spans) -> Self {
        let fact = spans.lanes.fact(s.lane);
        let kind = match s.kind {
            Kind::Server => LaneKind::Server,
            Kind::Consumer => LaneKind::Consumer,
            Kind::Client => LaneKind::Client,
            Kind::Producer => LaneKind::Producer,
            Kind::Other => LaneKind::Internal,
        };
        Self {
            trace: s.trace,
            span: s.span,
            parent: s.parent,
            kind,
            links: kind == LaneKind::Consumer
                && s.parent.is_none()
                && spans.consumer_links.contains_key(&(s.trace, s.span)),
            app: s.app,
            instance: s.instance,
            lane: fact.lane,
            tag: fact.tag,
            start: s.start,
            end: s.end,
            is_error: s.is_error,
        }
    }
}

impl LaneFields for LaneSpan {
    fn trace(&self) -> u128 {
        self.trace
    }
    fn span(&self) -> u64 {
        self.span
    }
    fn parent(&self) -> Option<NonZeroU64> {
        self.parent
    }
    fn lane_kind(&self) -> LaneKind {
        self.kind
    }
    fn has_links(&self) -> bool {
        self.links
    }
    fn app(&self) -> u32 {
        self.app
    }
    fn instance(&self) -> u32 {
        self.instance
    }
    fn lane(&self) -> u32 {
        self.lane
    }
    fn tag(&self) -> Option<u32> {
        self.tag
    }
    fn start(&self) -> i64 {
        self.start
    }
    fn end(&self) -> i64 {
        self.end
    }
    fn is_error(&self) -> bool {
        self.is_error
    }
}

/// The lane findings, counts and coverage of `spans` (domain §7), judged by their lane groups
/// ([`Spans::lane_groups`]), with presence from the spans and their signals
/// ([`Spans::signals`]).
pub fn find(spans: &Spans, windows: &LaneWindows) -> LaneReport {
    let table = &spans.lanes;
    let started = std::time::Instant::now();
    let (presence, tracked) = presence(spans, windows, &[]);
    let presence_took = started.elapsed();
    let groups = TimelineGroups::new(&spans.lane_groups, &spans.apps, &table.names);
    let window = i64::try_from(windows.window.as_nanos()).unwrap_or(i64::MAX);
    // Each half of the traces on its own thread, when there are enough: a judge's findings
    // and cells are added up before the windows are judged.
    let judge_traces = |slices: &[&[SpanRec]]| {
        let mut judge = LaneJudge::new(
            &presence,
            &groups,
            &spans.apps,
            &table.names,
            &tracked,
            window,
        );
        let mut trace = Vec::new();
        for t in slices
            .iter()
            .flat_map(|c| c.chunk_by(|a, b| a.trace == b.trace))
        {
            trace.clear();
            trace.extend(t.iter().map(|s| LaneSpan::of(s, spans)));
            judge.trace(&trace);
        }
        judge
    };
    let mut judge = fold_halves(spans, true, judge_traces, |a, b| a.absorb(b));
    let judge_took = started.elapsed() - presence_took;
    let malformed: u64 = table.carriers.values().map(|&(_, n)| u64::from(n)).sum();
    judge.count_malformed(malformed, 0);
    let mut report = judge.finish();
    report.counts.invalid_instance_lanes = table.invalid_values.len() as u64;
    report.sort();
    tracing::debug!(
        presence_ms = presence_took.as_secs_f64() * 1e3,
        judge_ms = judge_took.as_secs_f64() * 1e3,
        finish_ms = (started.elapsed() - presence_took - judge_took).as_secs_f64() * 1e3,
        "lane rules"
    );
    report
}

/// Presence (domain §7.1) from `spans`, their signals ([`Spans::signals`]) and the signals
/// `around` them (other traces' spans, presence rows: see [`Covered`]), and the tracked apps:
/// those with an instance outside base among them (no other app's capacity is ever asked,
/// and only their requests are counted per lane).
pub(crate) fn presence(
    spans: &Spans,
    windows: &LaneWindows,
    around: &[Covered],
) -> (Presence, Vec<bool>) {
    let table = &spans.lanes;
    let lane_of = |name: &str| table.names.get(name);
    let others = spans
        .signals
        .iter()
        .map(|g| (&g.app, &g.instance, &g.lane, g.t_unix_nano, g.t_unix_nano))
        .chain(
            around
                .iter()
                .map(|c| (&c.app, &c.instance, &c.lane, c.start, c.end)),
        );
    let mut tracked = vec![false; spans.apps.len()];
    for s in spans.iter() {
        if table.fact(s.lane).lane != BASE {
            tracked[s.app as usize] = true;
        }
    }
    for (app, _, lane, _, _) in others.clone() {
        if let (Some(app), Some(lane)) = (spans.apps.get(app), lane_of(lane))
            && lane != BASE
        {
            tracked[app as usize] = true;
        }
    }
    let w = i64::try_from(windows.presence_window.as_nanos()).unwrap_or(i64::MAX);
    // The spans' signals, each half on its own thread when there are enough.
    let collect = |slices: &[&[SpanRec]]| {
        let mut b = PresenceBuilder::new(w, tracked.clone());
        for s in slices.iter().copied().flatten() {
            b.signal(s.app, table.fact(s.lane).lane, s.instance, s.start, s.end);
        }
        b
    };
    let mut presence = fold_halves(spans, false, collect, |a, b| a.absorb(b));
    // Instances only seen in signals take ids after the spans' instances.
    let mut extra = crate::analyze::intern::Interner::default();
    for (app, instance, lane, start, end) in others {
        let (Some(app), Some(lane)) = (spans.apps.get(app), lane_of(lane)) else {
            continue;
        };
        let instance = spans.instances.get(instance).unwrap_or_else(|| {
            u32::try_from(spans.instances.len()).unwrap_or(u32::MAX) + extra.intern(instance)
        });
        presence.signal(app, lane, instance, start, end);
    }
    (presence.finish(), tracked)
}

/// Each instance seen in `spans` or `signals` with its lane and the rule that decided it, by
/// instance.
pub fn instance_lanes(spans: &Spans) -> Vec<InstanceLane> {
    let signals = &spans.signals;
    let table = &spans.lanes;
    let mut fact_of = vec![None; spans.instances.len()];
    let mut app_of = vec![0u32; spans.instances.len()];
    for s in spans.iter() {
        fact_of[s.instance as usize] = Some(s.lane);
        app_of[s.instance as usize] = s.app;
    }
    let invalid = |instance: &str| -> Vec<String> {
        table
            .invalid_values
            .get(instance)
            .map(|v| v.iter().cloned().collect())
            .unwrap_or_default()
    };
    let mut out: std::collections::BTreeMap<String, InstanceLane> = fact_of
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let f = table.fact((*f)?);
            let instance = spans.instances.name(i as u32).to_owned();
            Some((
                instance.clone(),
                InstanceLane {
                    invalid_values: invalid(&instance),
                    app: spans.apps.name(app_of[i]).to_owned(),
                    lane: table.names.name(f.lane).to_owned(),
                    rule: table.rules.name(f.rule).to_owned(),
                    instance,
                },
            ))
        })
        .collect();
    for g in signals {
        out.entry(g.instance.clone())
            .or_insert_with(|| InstanceLane {
                instance: g.instance.clone(),
                app: g.app.clone(),
                lane: g.lane.clone(),
                rule: g.lane_rule.clone(),
                invalid_values: Vec::new(),
            });
    }
    out.into_values().collect()
}

/// Each span on which a lane carrier is present, in span order.
pub fn span_lane_tags(spans: &Spans) -> Vec<SpanLaneTag> {
    let table = &spans.lanes;
    if table.carriers.is_empty() {
        return Vec::new();
    }
    spans
        .iter()
        .filter_map(|s| {
            let &(source, malformed) =
                table
                    .carriers
                    .get(&(s.trace, s.span, s.kind == Kind::Server))?;
            Some(SpanLaneTag {
                trace_id: hex128(s.trace),
                span_id: hex64(s.span),
                app: spans.apps.name(s.app).to_owned(),
                source: source.map(|id| table.sources.name(id).to_owned()),
                tag: table
                    .fact(s.lane)
                    .tag
                    .map(|t| table.names.name(t).to_owned()),
                malformed,
            })
        })
        .collect()
}
