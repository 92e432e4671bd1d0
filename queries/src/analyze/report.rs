//! The analyzer's report ([`Report`]): what ran, over how many spans and instances, the
//! baggage faults and every finding, and its JSON form (the one
//! `../shared/tools/check_findings.py` reads). [`report_of`] runs some of the [`Detection`]s
//! over loaded spans; [`report_windows`] judges windowed counts taken without loading them.

use std::collections::BTreeMap;

use dyeline_model::Color;
use serde::{Serialize, Serializer};

use super::config::AnalyzerConfig;
use super::detect::lanes::{
    self, InstanceLane, LaneCounts, LaneCoverage, LaneErrorSpike, LaneLeak, LanePollution,
    LaneReport, LaneTagChanged, LaneTagDropped, SpanLaneTag,
};
use super::detect::{traces, windows};
use super::findings::{
    CrossColorHop, Detection, DrainedSide, ErrorSpike, FindingRef, InstanceSkew, MissingDecision,
    RatioDeviation, hex64, hex128,
};
use super::spans::{NO_SOURCE, SpanRec, Spans};

/// An instance and the colour rule that decided it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstanceColor {
    /// Instance id.
    pub instance: String,
    /// App.
    pub app: String,
    /// Colour.
    pub color: Color,
    /// Attribute that decided it, or `none`.
    pub rule: String,
}

/// A span that carries a decision source (`--with-decisions`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpanDecision {
    /// Trace id.
    pub trace_id: String,
    /// Span id.
    pub span_id: String,
    /// App.
    pub app: String,
    /// Attribute read.
    pub source: String,
    /// channel → colour.
    pub decisions: BTreeMap<String, Color>,
    /// Malformed pairs skipped.
    pub malformed_pairs: u32,
    /// Channels given twice with different colours.
    pub conflicting: Vec<String>,
}

/// A span with malformed pairs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MalformedSpan {
    /// Trace id.
    pub trace_id: String,
    /// Span id.
    pub span_id: String,
    /// App.
    pub app: String,
    /// Pairs skipped.
    pub count: u32,
}

/// Malformed pairs: total and per span.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Malformed {
    /// Sum over spans.
    pub total: u64,
    /// Spans with at least one.
    pub spans: Vec<MalformedSpan>,
}

/// A conflicting decision (first pair kept).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConflictingDecision {
    /// Trace id.
    pub trace_id: String,
    /// Span id.
    pub span_id: String,
    /// App.
    pub app: String,
    /// Channel given twice.
    pub channel: String,
    /// The colour kept.
    pub kept: Option<Color>,
}

/// Everything the analyzer found. In JSON (the form `../shared/tools/check_findings.py`
/// reads), the lists of detections that did not run and the baggage faults when they were
/// not read are left out, not written empty: a reader cannot take "not looked for" for
/// "none found".
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Spans analysed.
    pub spans: u64,
    /// Instances with colour and rule.
    pub instances: Vec<InstanceColor>,
    /// Per-span decisions (only with `--with-decisions`).
    pub decisions: Option<Vec<SpanDecision>>,
    /// Malformed pairs.
    pub malformed_pairs: Malformed,
    /// Conflicting decisions.
    pub conflicting_decisions: Vec<ConflictingDecision>,
    /// False when the decisions were not read ([`report_windows`]): `malformed_pairs` and
    /// `conflicting_decisions` are then empty for want of looking.
    pub baggage_faults_read: bool,
    /// §6.1.
    pub cross_color_hops: Vec<CrossColorHop>,
    /// §6.2.
    pub missing_decisions: Vec<MissingDecision>,
    /// §6.3.
    pub drained_side: Vec<DrainedSide>,
    /// §6.4.
    pub ratio_deviation: Vec<RatioDeviation>,
    /// §6.5.
    pub instance_skew: Vec<InstanceSkew>,
    /// §6.6.
    pub error_spike: Vec<ErrorSpike>,
    /// The detections that ran, when not all did ([`report_of`]): the lists of the others
    /// are empty because they were not looked for.
    pub detections: Option<Vec<&'static str>>,
    /// Each instance's lane (domain §7.1), when a lane detection ran.
    pub lanes: Option<Vec<InstanceLane>>,
    /// The spans on which a lane carrier is present (with the lane rules and
    /// `--with-decisions`).
    pub lane_tags: Option<Vec<SpanLaneTag>>,
    /// The lane rules' findings, counts and coverage (domain §7.3–7.4), when a lane
    /// detection ran (the lists of those that did not are empty).
    pub lane: Option<LaneReport>,
    /// The start (Unix ns) of each span of a trace in a channel whose parent span is not
    /// among the spans read, when the trace detections ran (the live evaluation counts them:
    /// `dyeline_orphan_spans_total`). Not written in JSON.
    pub orphan_starts: Vec<i64>,
}

impl Report {
    /// Every finding, detection by detection in the order of [`Detection::ALL`], each in its
    /// list's order.
    pub fn findings(&self) -> impl Iterator<Item = FindingRef<'_>> {
        let hops = self.cross_color_hops.iter().map(FindingRef::Hop);
        let lane = self.lane.as_ref();
        hops.chain(self.missing_decisions.iter().map(FindingRef::Missing))
            .chain(self.drained_side.iter().map(FindingRef::Drained))
            .chain(self.ratio_deviation.iter().map(FindingRef::Ratio))
            .chain(self.instance_skew.iter().map(FindingRef::Skew))
            .chain(self.error_spike.iter().map(FindingRef::Spike))
            .chain(
                lane.into_iter()
                    .flat_map(|l| l.leaks.iter().map(FindingRef::Leak)),
            )
            .chain(
                lane.into_iter()
                    .flat_map(|l| l.tags_dropped.iter().map(FindingRef::TagDropped)),
            )
            .chain(
                lane.into_iter()
                    .flat_map(|l| l.pollution.iter().map(FindingRef::Pollution)),
            )
            .chain(
                lane.into_iter()
                    .flat_map(|l| l.tags_changed.iter().map(FindingRef::TagChanged)),
            )
            .chain(
                lane.into_iter()
                    .flat_map(|l| l.error_spikes.iter().map(FindingRef::LaneSpike)),
            )
    }

    /// The findings of `d`, in its list's order.
    pub fn findings_of(&self, d: Detection) -> impl Iterator<Item = FindingRef<'_>> {
        self.findings().filter(move |f| f.detection() == d)
    }

    /// True when `d` ran (all do unless [`Report::detections`] lists some).
    pub fn ran(&self, d: Detection) -> bool {
        self.detections
            .as_ref()
            .is_none_or(|names| names.contains(&d.as_str()))
    }
}

/// [`Report`] as JSON: its fields in order, those not looked for left out.
#[derive(Serialize)]
struct ReportJson<'a> {
    spans: u64,
    instances: &'a [InstanceColor],
    #[serde(skip_serializing_if = "Option::is_none")]
    decisions: Option<&'a [SpanDecision]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    malformed_pairs: Option<&'a Malformed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conflicting_decisions: Option<&'a [ConflictingDecision]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cross_color_hops: Option<&'a [CrossColorHop]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    missing_decisions: Option<&'a [MissingDecision]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    drained_side: Option<&'a [DrainedSide]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio_deviation: Option<&'a [RatioDeviation]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    instance_skew: Option<&'a [InstanceSkew]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_spike: Option<&'a [ErrorSpike]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detections: Option<&'a [&'static str]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lanes: Option<&'a [InstanceLane]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lane_tags: Option<&'a [SpanLaneTag]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lane_leaks: Option<&'a [LaneLeak]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lane_tags_dropped: Option<&'a [LaneTagDropped]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lane_pollution: Option<&'a [LanePollution]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lane_tags_changed: Option<&'a [LaneTagChanged]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lane_error_spike: Option<&'a [LaneErrorSpike]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lane_counts: Option<&'a LaneCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lane_coverage: Option<&'a [LaneCoverage]>,
}

impl Serialize for Report {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let faults = self.baggage_faults_read;
        let lane = |d: Detection| self.lane.as_ref().filter(|_| self.ran(d));
        ReportJson {
            spans: self.spans,
            instances: &self.instances,
            decisions: self.decisions.as_deref(),
            malformed_pairs: faults.then_some(&self.malformed_pairs),
            conflicting_decisions: faults.then_some(&self.conflicting_decisions[..]),
            cross_color_hops: self
                .ran(Detection::CrossColorHop)
                .then_some(&self.cross_color_hops[..]),
            missing_decisions: self
                .ran(Detection::MissingDecision)
                .then_some(&self.missing_decisions[..]),
            drained_side: self
                .ran(Detection::DrainedSide)
                .then_some(&self.drained_side[..]),
            ratio_deviation: self
                .ran(Detection::RatioDeviation)
                .then_some(&self.ratio_deviation[..]),
            instance_skew: self
                .ran(Detection::InstanceSkew)
                .then_some(&self.instance_skew[..]),
            error_spike: self
                .ran(Detection::ErrorSpike)
                .then_some(&self.error_spike[..]),
            detections: self.detections.as_deref(),
            lanes: self.lanes.as_deref(),
            lane_tags: self.lane_tags.as_deref(),
            lane_leaks: lane(Detection::LaneLeak).map(|l| &l.leaks[..]),
            lane_tags_dropped: lane(Detection::LaneTagDropped).map(|l| &l.tags_dropped[..]),
            lane_pollution: lane(Detection::LanePollution).map(|l| &l.pollution[..]),
            lane_tags_changed: lane(Detection::LaneTagChanged).map(|l| &l.tags_changed[..]),
            lane_error_spike: lane(Detection::LaneErrorSpike).map(|l| &l.error_spikes[..]),
            lane_counts: self.lane.as_ref().map(|l| &l.counts),
            lane_coverage: self.lane.as_ref().map(|l| &l.coverage[..]),
        }
        .serialize(serializer)
    }
}

/// Sorts `$v` by the listed fields of its items, in that order.
macro_rules! sort_by_fields {
    ($v:expr, $($f:ident $(.$m:ident())?),+) => {
        $v.sort_by(|a, b| ($(&a.$f$(.$m())?,)+).cmp(&($(&b.$f$(.$m())?,)+)))
    };
}

/// Reports over at least this many spans run the trace and window detections, and the lane
/// rules, on two threads.
const PARALLEL_DETECTIONS_MIN: usize = 50_000;

/// The detections of `spans` take two threads: enough spans, and a second core.
pub(crate) fn two_threads(spans: &Spans) -> bool {
    spans.len() >= PARALLEL_DETECTIONS_MIN
        && std::thread::available_parallelism().map_or(1, |n| n.get()) > 1
}

/// `fold` over the spans: with [`two_threads`], over each half on its own thread (halves cut
/// at a trace boundary when `whole_traces`), the second half's result handed to `absorb`
/// with the first's; else over all of them at once.
pub(crate) fn fold_halves<T: Send>(
    spans: &Spans,
    whole_traces: bool,
    fold: impl Fn(&[&[SpanRec]]) -> T + Sync,
    absorb: impl FnOnce(&mut T, T),
) -> T {
    if !two_threads(spans) {
        return fold(&spans.chunks().collect::<Vec<_>>());
    }
    let [first, second] = if whole_traces {
        spans.trace_halves()
    } else {
        spans.halves()
    };
    std::thread::scope(|scope| {
        let other = scope.spawn(|| fold(&second));
        let mut mine = fold(&first);
        absorb(&mut mine, other.join().expect("detection thread"));
        mine
    })
}

/// The report of already loaded spans: every detection.
pub fn report(spans: &Spans, config: &AnalyzerConfig, with_decisions: bool) -> Report {
    report_of(spans, config, with_decisions, &Detection::ALL)
}

/// The report of already loaded spans for `detections` only (all when it lists them all;
/// [`Report::detections`] names them otherwise). The baggage faults are reported whatever
/// runs (the spans carry their decisions). Work is skipped by part: the trace walk of §6.1–2,
/// the window counts of §6.3–6 and the lane rules of §7 each run only when one of their
/// detections is asked for.
pub fn report_of(
    spans: &Spans,
    config: &AnalyzerConfig,
    with_decisions: bool,
    detections: &[Detection],
) -> Report {
    let run = |d: Detection| detections.contains(&d);
    let all = Detection::ALL.iter().all(|d| run(*d));
    let traces_run = run(Detection::CrossColorHop) || run(Detection::MissingDecision);
    let windows_run = detections.iter().any(|d| d.is_counted());
    let lanes_run = detections.iter().any(|d| d.is_lane());
    let mut r = Report {
        spans: spans.len() as u64,
        detections: (!all).then(|| detections_named(detections)),
        baggage_faults_read: true,
        ..Report::default()
    };
    r.instances = spans
        .instance_rules
        .iter()
        .map(|(i, a, c, rule)| InstanceColor {
            instance: i.clone(),
            app: a.clone(),
            color: *c,
            rule: rule.clone(),
        })
        .collect();
    // The baggage faults: few spans have them.
    for d in &spans.decision_recs {
        let s = spans.get(d.index);
        let trace_id = hex128(s.trace);
        let span_id = hex64(s.span);
        let app = spans.apps.name(s.app);
        if d.malformed_pairs > 0 {
            r.malformed_pairs.total += u64::from(d.malformed_pairs);
            r.malformed_pairs.spans.push(MalformedSpan {
                trace_id: trace_id.clone(),
                span_id: span_id.clone(),
                app: app.to_owned(),
                count: d.malformed_pairs,
            });
        }
        for ch in &d.conflicting {
            let kept = spans.channels.get(ch).and_then(|c| spans.decision(s, c));
            r.conflicting_decisions.push(ConflictingDecision {
                trace_id: trace_id.clone(),
                span_id: span_id.clone(),
                app: app.to_owned(),
                channel: ch.clone(),
                kept,
            });
        }
    }
    // Every span with a decision source, in span order, with its faults if any.
    let mut decisions = Vec::new();
    if with_decisions {
        let mut faults = spans.decision_recs.iter().peekable();
        for (index, s) in spans.iter().enumerate() {
            let fault = faults.next_if(|d| d.index == index);
            if s.source == NO_SOURCE {
                continue;
            }
            decisions.push(SpanDecision {
                trace_id: hex128(s.trace),
                span_id: hex64(s.span),
                app: spans.apps.name(s.app).to_owned(),
                source: spans.sources.name(u32::from(s.source)).to_owned(),
                decisions: spans
                    .decisions(s)
                    .iter()
                    .map(|(c, col)| (spans.channels.name(*c).to_owned(), *col))
                    .collect(),
                malformed_pairs: fault.map_or(0, |d| d.malformed_pairs),
                conflicting: fault.map(|d| d.conflicting.clone()).unwrap_or_default(),
            });
        }
    }
    if with_decisions {
        r.decisions = Some(decisions);
    }
    let t = std::time::Instant::now();
    // The trace detections and the window detections read the same spans and write
    // different findings: on large inputs they run on two threads.
    let traces_part = |hops: &mut Vec<CrossColorHop>,
                       missing: &mut Vec<MissingDecision>,
                       orphans: &mut Vec<i64>| {
        let started = std::time::Instant::now();
        traces::find_with_orphans(spans, hops, missing, orphans);
        // In time order, for people and stable output.
        sort_by_fields!(hops, t_unix_nano, trace_id, span_id);
        sort_by_fields!(missing, t_unix_nano, trace_id, span_id);
        started.elapsed()
    };
    let Report {
        cross_color_hops,
        missing_decisions,
        drained_side,
        ratio_deviation,
        instance_skew,
        error_spike,
        orphan_starts,
        ..
    } = &mut r;
    let parallel = two_threads(spans);
    // The window counting takes both threads when the trace detections do not run.
    let mut windows_part = |both_threads: bool| {
        let w = std::time::Instant::now();
        windows::find(
            spans,
            config,
            both_threads,
            drained_side,
            ratio_deviation,
            instance_skew,
            error_spike,
        );
        w.elapsed()
    };
    let (traces_took, windows_took) = if !traces_run || !windows_run {
        let d = if traces_run {
            traces_part(cross_color_hops, missing_decisions, orphan_starts)
        } else {
            std::time::Duration::ZERO
        };
        let w = if windows_run {
            windows_part(parallel)
        } else {
            std::time::Duration::ZERO
        };
        (d, w)
    } else if parallel {
        std::thread::scope(|scope| {
            let h = scope.spawn(|| traces_part(cross_color_hops, missing_decisions, orphan_starts));
            let w = windows_part(false);
            (h.join().expect("trace detections thread"), w)
        })
    } else {
        let d = traces_part(cross_color_hops, missing_decisions, orphan_starts);
        (d, windows_part(false))
    };
    // The lane rules (domain §7) find all five lane types in one pass.
    let lanes_took = lanes_run.then(|| {
        let started = std::time::Instant::now();
        r.lanes = Some(lanes::instance_lanes(spans));
        if with_decisions {
            r.lane_tags = Some(lanes::span_lane_tags(spans));
        }
        tracing::debug!(
            instance_lanes_ms = started.elapsed().as_secs_f64() * 1e3,
            "lane lists"
        );
        r.lane = Some(lanes::find(spans, &config.lanes));
        started.elapsed()
    });
    keep_only(&mut r, detections);
    tracing::debug!(
        lanes_ms = lanes_took.map_or(0.0, |d| d.as_secs_f64() * 1e3),
        traces_ms = traces_took.as_secs_f64() * 1e3,
        windows_ms = windows_took.as_secs_f64() * 1e3,
        detections_ms = t.elapsed().as_secs_f64() * 1e3,
        "detections"
    );
    r
}

/// Drops from `r` the findings of detections not in `detections` (a pass finds several
/// types), and sorts the window findings by window, then by names: ids follow the order
/// spans were read in, which differs between a scan and a merge of files.
fn keep_only(r: &mut Report, detections: &[Detection]) {
    let run = |d: Detection| detections.contains(&d);
    if !run(Detection::CrossColorHop) {
        r.cross_color_hops.clear();
    }
    if !run(Detection::MissingDecision) {
        r.missing_decisions.clear();
    }
    if !run(Detection::DrainedSide) {
        r.drained_side.clear();
    }
    if !run(Detection::RatioDeviation) {
        r.ratio_deviation.clear();
    }
    if !run(Detection::InstanceSkew) {
        r.instance_skew.clear();
    }
    if !run(Detection::ErrorSpike) {
        r.error_spike.clear();
    }
    if let Some(l) = &mut r.lane {
        if !run(Detection::LaneLeak) {
            l.leaks.clear();
        }
        if !run(Detection::LaneTagDropped) {
            l.tags_dropped.clear();
        }
        if !run(Detection::LanePollution) {
            l.pollution.clear();
        }
        if !run(Detection::LaneTagChanged) {
            l.tags_changed.clear();
        }
        if !run(Detection::LaneErrorSpike) {
            l.error_spikes.clear();
        }
    }
    sort_by_fields!(
        r.drained_side,
        window_start_unix_nano,
        channel,
        app,
        color,
        kind.as_str()
    );
    sort_by_fields!(
        r.ratio_deviation,
        window_start_unix_nano,
        channel,
        app,
        color,
        kind.as_str()
    );
    sort_by_fields!(
        r.instance_skew,
        window_start_unix_nano,
        channel,
        app,
        color,
        instance,
        kind.as_str()
    );
    sort_by_fields!(
        r.error_spike,
        window_start_unix_nano,
        channel,
        app,
        color,
        kind.as_str()
    );
}

/// The report of windowed counts
/// ([`count_windows_once`](super::read::files::count_windows_once)) for `detections`, all of
/// them counted (§6.3–6): the same findings, spans and instances as [`report_of`] over the
/// same spans; no baggage faults (the decisions are not read).
///
/// # Panics
/// When `detections` holds a trace detection (§6.1–2) or a lane one (§7): counts cannot
/// judge traces, nor lanes.
pub fn report_windows(
    counts: windows::WindowCounts,
    config: &AnalyzerConfig,
    detections: &[Detection],
) -> Report {
    assert!(
        detections.iter().all(|d| d.is_counted()),
        "trace and lane detections need spans, not counts"
    );
    let t = std::time::Instant::now();
    let mut r = Report {
        spans: counts.spans,
        instances: counts
            .instance_rules
            .iter()
            .map(|(i, a, c, rule)| InstanceColor {
                instance: i.clone(),
                app: a.clone(),
                color: *c,
                rule: rule.clone(),
            })
            .collect(),
        detections: Some(detections_named(detections)),
        ..Report::default()
    };
    counts.judge(
        config,
        &mut r.drained_side,
        &mut r.ratio_deviation,
        &mut r.instance_skew,
        &mut r.error_spike,
    );
    keep_only(&mut r, detections);
    tracing::debug!(
        judge_ms = t.elapsed().as_secs_f64() * 1e3,
        "window detections"
    );
    r
}

/// The names of `detections`, in the order of [`Detection::ALL`].
fn detections_named(detections: &[Detection]) -> Vec<&'static str> {
    Detection::ALL
        .iter()
        .filter(|d| detections.contains(d))
        .map(|d| d.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use dyeline_model::Color;

    use super::*;
    use crate::analyze::testkit::{B, S, T0, leak_and_spike, releasing};

    #[test]
    fn lane_detections_run_apart_from_the_six() {
        let spans = leak_and_spike();
        let config = AnalyzerConfig::default();
        let all = report(&spans, &config, false);
        let leaks = &all.lane.as_ref().unwrap().leaks;
        assert_eq!(leaks.len(), 1);
        assert_eq!(
            (
                leaks[0].to_app.as_str(),
                leaks[0].lane.as_str(),
                leaks[0].t_unix_nano
            ),
            ("order", "gray", T0 + 20 * S)
        );
        assert_eq!(all.error_spike.len(), 2);
        // Every finding, the lane ones after the six (the requests carry no decisions).
        let mut types: Vec<&str> = all.findings().map(|f| f.detection().as_str()).collect();
        types.dedup();
        assert_eq!(types, ["missing_decision", "error_spike", "lane_leak"]);

        // The six only: the lane rules do not run, and their keys are left out.
        let six = report_of(&spans, &config, false, &Detection::BLUE_GREEN);
        assert!(six.lane.is_none() && six.lanes.is_none());
        assert_eq!(six.error_spike.len(), 2);
        let json = serde_json::to_value(&six).unwrap();
        assert!(json.get("lane_leaks").is_none() && json.get("lane_counts").is_none());
        assert_eq!(json["detections"].as_array().unwrap().len(), 6);

        // One lane type only: none of the six runs; the other lane lists are not written.
        let leak = report_of(&spans, &config, false, &[Detection::LaneLeak]);
        assert!(leak.error_spike.is_empty() && !leak.ran(Detection::ErrorSpike));
        assert_eq!(leak.lane.as_ref().unwrap().leaks, *leaks);
        let json = serde_json::to_value(&leak).unwrap();
        assert_eq!(json["lane_leaks"].as_array().unwrap().len(), 1);
        assert!(json.get("lane_pollution").is_none() && json.get("error_spike").is_none());
        assert_eq!(json["lane_counts"]["lane_fallback"], 0);
        assert_eq!(json["lanes"].as_array().unwrap().len(), 3);

        // Another lane type: the leak is not listed.
        let other = report_of(&spans, &config, false, &[Detection::LanePollution]);
        assert_eq!(other.findings().count(), 0);
    }

    #[test]
    fn a_report_of_some_detections_names_them_and_drops_the_others() {
        let mut b = B::new();
        releasing(&mut b, "ch1", &["order"], 50);
        b.requests("order", "order-b1", Color::Blue, 0.0, 200, 0)
            .requests("order", "order-g1", Color::Green, 0.0, 200, 30);
        let spans = b.resolved();
        let config = AnalyzerConfig::default();
        let all = report(&spans, &config, false);
        assert_eq!(all.error_spike.len(), 2);
        assert!(all.detections.is_none());
        let only = super::report_of(
            &spans,
            &config,
            false,
            &[super::Detection::InstanceSkew, super::Detection::ErrorSpike],
        );
        assert_eq!(only.error_spike.len(), 2);
        assert_eq!(only.detections, Some(vec!["instance_skew", "error_spike"]));
        let none_of_them =
            super::report_of(&spans, &config, false, &[super::Detection::RatioDeviation]);
        assert!(none_of_them.error_spike.is_empty());
        assert_eq!("error_spike".parse(), Ok(super::Detection::ErrorSpike));
        assert!(
            "spike"
                .parse::<super::Detection>()
                .unwrap_err()
                .contains("cross_color_hop, missing_decision, drained_side")
        );
    }
}
