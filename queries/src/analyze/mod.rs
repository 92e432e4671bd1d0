//! The release analyzer (docs/domain.md §6): the six detections over the `spans` table and
//! the control plane's timeline. [`analyze`] scans the spans of a time range once with
//! DataFusion ([`load`]), resolves each span's effective channel and blue_percent from the
//! timeline, then judges traces ([`traces`]: cross-colour hops, missing decisions) and
//! tumbling windows ([`windows`]: drained side, ratio deviation, instance skew, error
//! spikes). The [`Report`] is the JSON read by `../shared/tools/check_findings.py`.
//! [`report_of`] runs some of the [`Detection`]s; [`report_windows`] judges windowed counts
//! taken without loading the spans ([`cache::count_windows_once`]).

pub mod cache;
pub mod load;
pub mod traces;
pub mod windows;

use std::collections::BTreeMap;
use std::time::Duration;

use datafusion::prelude::SessionContext;
use dyeline_model::release::Timeline;
use serde::{Deserialize, Serialize, Serializer};

use crate::sql::SqlError;

/// Thresholds of the detections; the defaults are those of domain §6.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// Tumbling window. Default 60 s.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// Drained-side traffic counts only this long after the app's effective blue_percent
    /// changed. Default 10 s.
    #[serde(with = "humantime_serde")]
    pub grace: Duration,
    /// Ratio deviation: at least this many requests in the window. Default 200.
    pub ratio_min_requests: u64,
    /// Ratio deviation: the gap must exceed this many percentage points... Default 5.
    pub ratio_min_gap_pp: f64,
    /// ...and this many binomial standard errors of r. Default 3.
    pub ratio_std_errors: f64,
    /// Instance skew: over this many times the colour's mean. Default 2.
    pub skew_factor: f64,
    /// Instance skew: at least this many requests on the colour. Default 100.
    pub skew_min_requests: u64,
    /// Error spike: error rate at least this. Default 0.02.
    pub spike_min_error_rate: f64,
    /// Error spike: at least this many times the other colour's rate. Default 3.
    pub spike_factor: f64,
    /// Error spike: two-sided two-proportion z-test p below this. Default 0.01.
    pub spike_p_value: f64,
    /// Error spike: at least this many requests on each colour. Default 100.
    pub spike_min_requests: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            window: Duration::from_secs(60),
            grace: Duration::from_secs(10),
            ratio_min_requests: 200,
            ratio_min_gap_pp: 5.0,
            ratio_std_errors: 3.0,
            skew_factor: 2.0,
            skew_min_requests: 100,
            spike_min_error_rate: 0.02,
            spike_factor: 3.0,
            spike_p_value: 0.01,
            spike_min_requests: 100,
        }
    }
}

/// Analyzer settings: default thresholds (`[analyzer.defaults]`) and per-channel
/// replacements (`[analyzer.channels.<id>]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AnalyzerConfig {
    /// Thresholds for every channel.
    pub defaults: Thresholds,
    /// Thresholds of named channels (each a whole set; unspecified keys take the defaults
    /// of domain §6).
    pub channels: BTreeMap<String, Thresholds>,
}

impl AnalyzerConfig {
    /// The thresholds of `channel`.
    pub fn for_channel(&self, channel: &str) -> &Thresholds {
        self.channels.get(channel).unwrap_or(&self.defaults)
    }
}

/// Lower-case 32-digit hex of a trace id.
pub fn hex128(v: u128) -> String {
    format!("{v:032x}")
}

/// Lower-case 16-digit hex of a span id.
pub fn hex64(v: u64) -> String {
    format!("{v:016x}")
}

fn nanos<S: Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Domain §6.1: a SERVER/CONSUMER span whose colour differs from its trace's colour in the
/// channel (or a root-most span whose decision is not its colour).
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct CrossColorHop {
    /// Trace id, lower-case hex.
    pub trace_id: String,
    /// The offending span.
    pub span_id: String,
    /// Channel.
    pub channel: String,
    /// App of the nearest ancestor span in the channel, or `(none)`.
    pub from_app: String,
    /// Its instance colour (null with `(none)`).
    pub from_color: Option<&'static str>,
    /// App of the offending span.
    pub to_app: String,
    /// Its instance colour.
    pub to_color: &'static str,
    /// `RPC` (SERVER) or `MQ` (CONSUMER).
    pub kind: &'static str,
    /// `decision_mismatch`, `no_decision` or `decision_changed`.
    pub reason: &'static str,
    /// Apps between the ancestor and the span, in call order, each once.
    pub via: Vec<String>,
    /// The span's start, Unix ns.
    #[serde(serialize_with = "nanos")]
    #[schema(value_type = String)]
    pub t_unix_nano: i64,
}

/// Domain §6.2: a SERVER/CONSUMER span of an app in a releasing channel without a decision
/// for it.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct MissingDecision {
    /// Trace id.
    pub trace_id: String,
    /// The span.
    pub span_id: String,
    /// Channel.
    pub channel: String,
    /// Its app.
    pub app: String,
    /// App of its parent span (`(none)` for a root, `(unknown)` if the parent is absent).
    pub caller_app: String,
    /// `RPC` or `MQ`.
    pub kind: &'static str,
    /// The span's start, Unix ns.
    #[serde(serialize_with = "nanos")]
    #[schema(value_type = String)]
    pub t_unix_nano: i64,
}

/// Domain §6.3: traffic on the drained side, per window, app, colour and kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DrainedSide {
    /// Channel.
    pub channel: String,
    /// App.
    pub app: String,
    /// The drained colour that still took traffic.
    pub color: &'static str,
    /// `RPC`, `MQ` or `JOB`.
    pub kind: &'static str,
    /// Spans.
    pub count: u64,
    /// blue_percent in force (0 or 100).
    pub blue_percent: u8,
    /// Instances that took them.
    pub instances: Vec<String>,
    /// Every trace id (not a sample).
    pub trace_ids: Vec<String>,
    /// Window start, Unix ns.
    #[serde(serialize_with = "nanos")]
    pub window_start_unix_nano: i64,
    /// Window end (exclusive), Unix ns.
    #[serde(serialize_with = "nanos")]
    pub window_end_unix_nano: i64,
}

/// Domain §6.4: the observed blue share of requests is off blue_percent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RatioDeviation {
    /// Channel.
    pub channel: String,
    /// App.
    pub app: String,
    /// The over-served colour.
    pub color: &'static str,
    /// Always `RPC` (MQ is left out of ratio checks).
    pub kind: &'static str,
    /// Requests on blue and green instances.
    pub requests: u64,
    /// Observed blue share, 0..1.
    pub blue_share: f64,
    /// blue_percent in force.
    pub blue_percent: u8,
    /// The gap allowed: max(5 pp, 3 standard errors), as a share.
    pub tolerance: f64,
    /// The blue share the domain §5 weights imply for the instance counts seen.
    pub weight_implied_share: f64,
    /// Blue instances seen.
    pub blue_instances: u32,
    /// Green instances seen.
    pub green_instances: u32,
    /// `unequal_cluster_sizes` when the weight-implied share explains the observed one and
    /// the counts differ; else null.
    pub cause: Option<&'static str>,
    /// Up to 5 trace ids for drilldown.
    pub exemplar_trace_ids: Vec<String>,
    /// Window start, Unix ns.
    #[serde(serialize_with = "nanos")]
    pub window_start_unix_nano: i64,
    /// Window end, Unix ns.
    #[serde(serialize_with = "nanos")]
    pub window_end_unix_nano: i64,
}

/// Domain §6.5: one instance takes over 2× its colour's mean.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstanceSkew {
    /// Channel.
    pub channel: String,
    /// App.
    pub app: String,
    /// Colour.
    pub color: &'static str,
    /// The overloaded instance.
    pub instance: String,
    /// `RPC`.
    pub kind: &'static str,
    /// Its requests.
    pub requests: u64,
    /// Requests on the colour.
    pub color_requests: u64,
    /// Instances of the colour seen.
    pub instances_seen: u64,
    /// Mean requests per instance of the colour.
    pub mean_requests: f64,
    /// Up to 5 trace ids for drilldown.
    pub exemplar_trace_ids: Vec<String>,
    /// Window start, Unix ns.
    #[serde(serialize_with = "nanos")]
    pub window_start_unix_nano: i64,
    /// Window end, Unix ns.
    #[serde(serialize_with = "nanos")]
    pub window_end_unix_nano: i64,
}

/// Domain §6.6: one colour's error rate is significantly above the other's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ErrorSpike {
    /// Channel.
    pub channel: String,
    /// App, or null for the channel level.
    pub app: Option<String>,
    /// The colour with the spike.
    pub color: &'static str,
    /// `RPC`.
    pub kind: &'static str,
    /// Its requests.
    pub requests: u64,
    /// Its errors.
    pub errors: u64,
    /// Its error rate.
    pub error_rate: f64,
    /// The other colour's requests.
    pub other_requests: u64,
    /// The other colour's errors.
    pub other_errors: u64,
    /// The other colour's error rate.
    pub other_error_rate: f64,
    /// Two-sided two-proportion z-test p-value.
    pub p_value: f64,
    /// Up to 5 trace ids for drilldown.
    pub exemplar_trace_ids: Vec<String>,
    /// Window start, Unix ns.
    #[serde(serialize_with = "nanos")]
    pub window_start_unix_nano: i64,
    /// Window end, Unix ns.
    #[serde(serialize_with = "nanos")]
    pub window_end_unix_nano: i64,
}

/// An instance and the colour rule that decided it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstanceColor {
    /// Instance id.
    pub instance: String,
    /// App.
    pub app: String,
    /// Colour.
    pub color: &'static str,
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
    pub decisions: BTreeMap<String, &'static str>,
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
    pub kept: Option<&'static str>,
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
    /// The detections that ran, when not all six did ([`report_of`]): the lists of the
    /// others are empty because they were not looked for.
    pub detections: Option<Vec<&'static str>>,
}

impl Report {
    /// True when `d` ran (all six do unless [`Report::detections`] lists some).
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
}

impl Serialize for Report {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let faults = self.baggage_faults_read;
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
        }
        .serialize(serializer)
    }
}

/// One of the six detections of domain §6, named as its findings' `type` in
/// `GET /api/v1/findings`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Detection {
    /// §6.1, `cross_color_hop`.
    CrossColorHop,
    /// §6.2, `missing_decision`.
    MissingDecision,
    /// §6.3, `drained_side`.
    DrainedSide,
    /// §6.4, `ratio_deviation`.
    RatioDeviation,
    /// §6.5, `instance_skew`.
    InstanceSkew,
    /// §6.6, `error_spike`.
    ErrorSpike,
}

impl Detection {
    /// The six, in the order of domain §6.
    pub const ALL: [Detection; 6] = [
        Detection::CrossColorHop,
        Detection::MissingDecision,
        Detection::DrainedSide,
        Detection::RatioDeviation,
        Detection::InstanceSkew,
        Detection::ErrorSpike,
    ];

    /// The finding type's name (`cross_color_hop`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Detection::CrossColorHop => "cross_color_hop",
            Detection::MissingDecision => "missing_decision",
            Detection::DrainedSide => "drained_side",
            Detection::RatioDeviation => "ratio_deviation",
            Detection::InstanceSkew => "instance_skew",
            Detection::ErrorSpike => "error_spike",
        }
    }

    /// True for the four tumbling-window detections (§6.3–6), false for the two judged per
    /// trace (§6.1–2).
    pub fn is_windowed(self) -> bool {
        !matches!(self, Detection::CrossColorHop | Detection::MissingDecision)
    }
}

impl std::str::FromStr for Detection {
    type Err = String;

    /// Parses a finding type's name.
    ///
    /// # Errors
    /// A name that is none of the six, listing them.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Detection::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Detection::ALL.iter().map(|d| d.as_str()).collect();
                format!("unknown detection {s:?}: one of {}", names.join(", "))
            })
    }
}

/// Analyses the spans starting in `[from, to)` (all when absent) of the `spans` table in
/// `ctx` against `timeline`.
///
/// # Errors
/// [`SqlError`] when the scan fails.
pub async fn analyze(
    ctx: &SessionContext,
    timeline: &Timeline,
    config: &AnalyzerConfig,
    from: Option<i64>,
    to: Option<i64>,
    with_decisions: bool,
) -> Result<Report, SqlError> {
    let started = std::time::Instant::now();
    let spans = load::load(ctx, timeline, from, to).await?;
    let loaded = started.elapsed();
    let r = report(&spans, config, with_decisions);
    tracing::debug!(
        spans = spans.len(),
        load_ms = loaded.as_secs_f64() * 1e3,
        report_ms = (started.elapsed() - loaded).as_secs_f64() * 1e3,
        "analysis"
    );
    Ok(r)
}

/// Sorts `$v` by the listed fields of its items, in that order.
macro_rules! sort_by_fields {
    ($v:expr, $($f:ident),+) => {
        $v.sort_by(|a, b| ($(&a.$f,)+).cmp(&($(&b.$f,)+)))
    };
}

/// Reports over at least this many spans run the trace and window detections on two threads.
const PARALLEL_DETECTIONS_MIN: usize = 50_000;

/// The report of already loaded spans: every detection.
pub fn report(spans: &load::Spans, config: &AnalyzerConfig, with_decisions: bool) -> Report {
    report_of(spans, config, with_decisions, &Detection::ALL)
}

/// The report of already loaded spans for `detections` only (all six when it lists them
/// all; [`Report::detections`] names them otherwise). The baggage faults are reported
/// whatever runs (the spans carry their decisions).
pub fn report_of(
    spans: &load::Spans,
    config: &AnalyzerConfig,
    with_decisions: bool,
    detections: &[Detection],
) -> Report {
    let run = |d: Detection| detections.contains(&d);
    let all = Detection::ALL.iter().all(|d| run(*d));
    let traces_run = run(Detection::CrossColorHop) || run(Detection::MissingDecision);
    let windows_run = detections.iter().any(|d| d.is_windowed());
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
            color: c.as_str(),
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
            let kept = spans
                .channels
                .get(ch)
                .and_then(|c| spans.decision(s, c))
                .map(|c| c.as_str());
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
            if s.source == load::NO_SOURCE {
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
                    .map(|(c, col)| (spans.channels.name(*c).to_owned(), col.as_str()))
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
    let traces_part = |hops: &mut Vec<CrossColorHop>, missing: &mut Vec<MissingDecision>| {
        let started = std::time::Instant::now();
        traces::find(spans, hops, missing);
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
        ..
    } = &mut r;
    let parallel = spans.len() >= PARALLEL_DETECTIONS_MIN
        && std::thread::available_parallelism().map_or(1, |n| n.get()) > 1;
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
            traces_part(cross_color_hops, missing_decisions)
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
            let h = scope.spawn(|| traces_part(cross_color_hops, missing_decisions));
            let w = windows_part(false);
            (h.join().expect("trace detections thread"), w)
        })
    } else {
        let d = traces_part(cross_color_hops, missing_decisions);
        (d, windows_part(false))
    };
    keep_only(&mut r, detections);
    tracing::debug!(
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
    sort_by_fields!(
        r.drained_side,
        window_start_unix_nano,
        channel,
        app,
        color,
        kind
    );
    sort_by_fields!(
        r.ratio_deviation,
        window_start_unix_nano,
        channel,
        app,
        color,
        kind
    );
    sort_by_fields!(
        r.instance_skew,
        window_start_unix_nano,
        channel,
        app,
        color,
        instance,
        kind
    );
    sort_by_fields!(
        r.error_spike,
        window_start_unix_nano,
        channel,
        app,
        color,
        kind
    );
}

/// The report of windowed counts ([`cache::count_windows_once`]) for `detections`, all of
/// them windowed (§6.3–6): the same findings, spans and instances as [`report_of`] over the
/// same spans; no baggage faults (the decisions are not read).
///
/// # Panics
/// When `detections` holds a trace detection (§6.1–2): counts cannot judge traces.
pub fn report_windows(
    counts: windows::WindowCounts,
    config: &AnalyzerConfig,
    detections: &[Detection],
) -> Report {
    assert!(
        detections.iter().all(|d| d.is_windowed()),
        "trace detections need spans, not counts"
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
                color: c.as_str(),
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
mod tests;
