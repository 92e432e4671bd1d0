//! What the detections find (domain §6): one record per finding type, each an item of
//! `dyeline analyze --format json` and of `GET /api/v1/findings` (the detections by name,
//! [`Detection`], are the model's; the lane findings of §7 are recorded in
//! `detect/lanes/findings.rs`). Ids are written as lower-case hex ([`hex128`], [`hex64`]),
//! times as decimal strings of Unix ns. [`FindingRef`] is one finding of any type, as the
//! readers of findings see it; each detection's file under `detect/` gives its answers (the
//! lane findings' in `detect/lane_alerts.rs`).

use std::collections::{BTreeMap, HashMap};

pub use dyeline_model::Detection;
use dyeline_model::{Color, TrafficKind};
use serde::{Serialize, Serializer};

use super::config::{AnalyzerConfig, Thresholds};
use super::detect::lanes::{
    LaneErrorSpike, LaneLeak, LanePollution, LaneTagChanged, LaneTagDropped,
};

/// Lower-case 32-digit hex of a trace id.
pub fn hex128(v: u128) -> String {
    format!("{v:032x}")
}

/// Lower-case 16-digit hex of a span id.
pub fn hex64(v: u64) -> String {
    format!("{v:016x}")
}

pub(crate) fn nanos<S: Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Domain §6.1: a SERVER/CONSUMER span whose colour differs from its trace's colour in the
/// channel (or a root-most span whose decision is not its colour).
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct CrossColorHop {
    /// The deployment environment of the spans it was judged on (`deployment_environment`);
    /// left out of JSON when they had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Trace id, lower-case hex.
    pub trace_id: String,
    /// The offending span.
    pub span_id: String,
    /// Channel.
    pub channel: String,
    /// App of the nearest ancestor span in the channel, or `(none)`.
    pub from_app: String,
    /// Its instance colour (null with `(none)`).
    #[schema(value_type = Option<String>)]
    pub from_color: Option<Color>,
    /// App of the offending span.
    pub to_app: String,
    /// Its instance colour.
    #[schema(value_type = String)]
    pub to_color: Color,
    /// `RPC` (SERVER) or `MQ` (CONSUMER).
    #[schema(value_type = String)]
    pub kind: TrafficKind,
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
    /// The deployment environment of the spans it was judged on (`deployment_environment`);
    /// left out of JSON when they had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
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
    #[schema(value_type = String)]
    pub kind: TrafficKind,
    /// The span's start, Unix ns.
    #[serde(serialize_with = "nanos")]
    #[schema(value_type = String)]
    pub t_unix_nano: i64,
}

/// Domain §6.3: traffic on the drained side, per window, app, colour and kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DrainedSide {
    /// The deployment environment of the spans it was judged on (`deployment_environment`);
    /// left out of JSON when they had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Channel.
    pub channel: String,
    /// App.
    pub app: String,
    /// The drained colour that still took traffic.
    pub color: Color,
    /// `RPC`, `MQ` or `JOB`.
    pub kind: TrafficKind,
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
    /// The deployment environment of the spans it was judged on (`deployment_environment`);
    /// left out of JSON when they had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Channel.
    pub channel: String,
    /// App.
    pub app: String,
    /// The over-served colour.
    pub color: Color,
    /// Always `RPC` (MQ is left out of ratio checks).
    pub kind: TrafficKind,
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
    /// The deployment environment of the spans it was judged on (`deployment_environment`);
    /// left out of JSON when they had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Channel.
    pub channel: String,
    /// App.
    pub app: String,
    /// Colour.
    pub color: Color,
    /// The overloaded instance.
    pub instance: String,
    /// `RPC`.
    pub kind: TrafficKind,
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
    /// The deployment environment of the spans it was judged on (`deployment_environment`);
    /// left out of JSON when they had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Channel.
    pub channel: String,
    /// App, or null for the channel level.
    pub app: Option<String>,
    /// The colour with the spike.
    pub color: Color,
    /// `RPC`.
    pub kind: TrafficKind,
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

/// One finding of any detection, borrowed from a [`Report`](super::report::Report)
/// ([`Report::findings`](super::report::Report::findings)): what the readers of findings (the
/// text table, `GET /api/v1/findings`, the alerts, the dashboard) ask of a finding. Each
/// detection answers in its own file under `detect/`: the methods here only dispatch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FindingRef<'a> {
    /// §6.1 ([`super::detect::traces`]).
    Hop(&'a CrossColorHop),
    /// §6.2 ([`super::detect::traces`]).
    Missing(&'a MissingDecision),
    /// §6.3 ([`super::detect::drained_side`]).
    Drained(&'a DrainedSide),
    /// §6.4 ([`super::detect::ratio_deviation`]).
    Ratio(&'a RatioDeviation),
    /// §6.5 ([`super::detect::instance_skew`]).
    Skew(&'a InstanceSkew),
    /// §6.6 ([`super::detect::error_spike`]).
    Spike(&'a ErrorSpike),
    /// §7.3.1 ([`super::detect::lanes`]).
    Leak(&'a LaneLeak),
    /// §7.3.2.
    TagDropped(&'a LaneTagDropped),
    /// §7.3.3.
    Pollution(&'a LanePollution),
    /// §7.3.4.
    TagChanged(&'a LaneTagChanged),
    /// §7.4.
    LaneSpike(&'a LaneErrorSpike),
}

impl<'a> FindingRef<'a> {
    /// The detection that made it.
    pub fn detection(self) -> Detection {
        match self {
            FindingRef::Hop(_) => Detection::CrossColorHop,
            FindingRef::Missing(_) => Detection::MissingDecision,
            FindingRef::Drained(_) => Detection::DrainedSide,
            FindingRef::Ratio(_) => Detection::RatioDeviation,
            FindingRef::Skew(_) => Detection::InstanceSkew,
            FindingRef::Spike(_) => Detection::ErrorSpike,
            FindingRef::Leak(_) => Detection::LaneLeak,
            FindingRef::TagDropped(_) => Detection::LaneTagDropped,
            FindingRef::Pollution(_) => Detection::LanePollution,
            FindingRef::TagChanged(_) => Detection::LaneTagChanged,
            FindingRef::LaneSpike(_) => Detection::LaneErrorSpike,
        }
    }

    /// Its channel (§6); `None` for a lane finding (§7 judges by lane groups).
    pub fn channel(self) -> Option<&'a str> {
        match self {
            FindingRef::Hop(f) => Some(&f.channel),
            FindingRef::Missing(f) => Some(&f.channel),
            FindingRef::Drained(f) => Some(&f.channel),
            FindingRef::Ratio(f) => Some(&f.channel),
            FindingRef::Skew(f) => Some(&f.channel),
            FindingRef::Spike(f) => Some(&f.channel),
            FindingRef::Leak(_)
            | FindingRef::TagDropped(_)
            | FindingRef::Pollution(_)
            | FindingRef::TagChanged(_)
            | FindingRef::LaneSpike(_) => None,
        }
    }

    /// The lane group of a lane finding (its app's at the time judged), `None` for one of an
    /// app in no group and for the findings of §6.
    pub fn lane_group(self) -> Option<&'a str> {
        match self {
            FindingRef::Hop(_)
            | FindingRef::Missing(_)
            | FindingRef::Drained(_)
            | FindingRef::Ratio(_)
            | FindingRef::Skew(_)
            | FindingRef::Spike(_) => None,
            FindingRef::Leak(f) => f.group.as_deref(),
            FindingRef::TagDropped(f) => f.group.as_deref(),
            FindingRef::Pollution(f) => f.group.as_deref(),
            FindingRef::TagChanged(f) => f.group.as_deref(),
            FindingRef::LaneSpike(f) => f.group.as_deref(),
        }
    }

    /// The start of its window, Unix ns, for a windowed finding (§6.3–6, §7.4); `None` for
    /// those judged per span (their time is their span's start).
    pub fn window_start(self) -> Option<i64> {
        match self {
            FindingRef::Hop(_)
            | FindingRef::Missing(_)
            | FindingRef::Leak(_)
            | FindingRef::TagDropped(_)
            | FindingRef::Pollution(_)
            | FindingRef::TagChanged(_) => None,
            FindingRef::Drained(f) => Some(f.window_start_unix_nano),
            FindingRef::Ratio(f) => Some(f.window_start_unix_nano),
            FindingRef::Skew(f) => Some(f.window_start_unix_nano),
            FindingRef::Spike(f) => Some(f.window_start_unix_nano),
            FindingRef::LaneSpike(f) => Some(f.window_start_unix_nano),
        }
    }

    /// The tumbling window it is judged in (its channel's, or the lane rules' for a lane
    /// finding): an alert resolves once a whole one passed without it.
    pub fn window(self, config: &AnalyzerConfig) -> std::time::Duration {
        match self.channel() {
            Some(c) => config.for_channel(c).window,
            None => config.lanes.window,
        }
    }

    /// Its deployment environment, when the spans it was judged on name one.
    pub fn environment(self) -> Option<&'a str> {
        match self {
            FindingRef::Hop(f) => f.environment.as_deref(),
            FindingRef::Missing(f) => f.environment.as_deref(),
            FindingRef::Drained(f) => f.environment.as_deref(),
            FindingRef::Ratio(f) => f.environment.as_deref(),
            FindingRef::Skew(f) => f.environment.as_deref(),
            FindingRef::Spike(f) => f.environment.as_deref(),
            FindingRef::Leak(f) => f.environment.as_deref(),
            FindingRef::TagDropped(f) => f.environment.as_deref(),
            FindingRef::Pollution(f) => f.environment.as_deref(),
            FindingRef::TagChanged(f) => f.environment.as_deref(),
            FindingRef::LaneSpike(f) => f.environment.as_deref(),
        }
    }

    /// Its line in the text table of `dyeline analyze` (indented, no newline), ending in
    /// `(environment E)` when its spans name one.
    pub fn line(self) -> String {
        let line = match self {
            FindingRef::Hop(f) => f.line(),
            FindingRef::Missing(f) => f.line(),
            FindingRef::Drained(f) => f.line(),
            FindingRef::Ratio(f) => f.line(),
            FindingRef::Skew(f) => f.line(),
            FindingRef::Spike(f) => f.line(),
            FindingRef::Leak(f) => f.line(),
            FindingRef::TagDropped(f) => f.line(),
            FindingRef::Pollution(f) => f.line(),
            FindingRef::TagChanged(f) => f.line(),
            FindingRef::LaneSpike(f) => f.line(),
        };
        match self.environment() {
            Some(env) => format!("{line} (environment {env})"),
            None => line,
        }
    }

    /// What it tells the alerts, with `config`'s thresholds of its channel (or its lane
    /// window). `seen` counts the findings of each alert key so far in one evaluation (a
    /// hop's summary says how many hops of its key there were).
    ///
    /// An environment's finding raises its own alert: its labels carry `environment`, and a
    /// count of findings (hops, lane findings) counts those of its environment.
    pub fn alert(self, config: &AnalyzerConfig, seen: &mut AlertCounts) -> Observation {
        let lane_window = config.lanes.window.as_nanos().max(1) as i64;
        let t = config.for_channel(self.channel().unwrap_or_default());
        match self {
            FindingRef::Hop(f) => f.alert(t, seen),
            FindingRef::Missing(f) => f.alert(t),
            FindingRef::Drained(f) => f.alert(t),
            FindingRef::Ratio(f) => f.alert(),
            FindingRef::Skew(f) => f.alert(t),
            FindingRef::Spike(f) => f.alert(t),
            FindingRef::Leak(f) => f.alert(lane_window, seen),
            FindingRef::TagDropped(f) => f.alert(lane_window, seen),
            FindingRef::Pollution(f) => f.alert(lane_window, seen),
            FindingRef::TagChanged(f) => f.alert(lane_window, seen),
            FindingRef::LaneSpike(f) => f.alert(),
        }
    }

    /// Its row among the dashboard's window findings, with `t` the thresholds of its
    /// channel; `None` for the findings judged per trace (the dashboard shows them as hop
    /// edges and missing-decision rows) and for the lane findings (the lanes pages list them).
    pub fn window_finding(self, t: &Thresholds) -> Option<WindowFinding> {
        match self {
            FindingRef::Hop(_)
            | FindingRef::Missing(_)
            | FindingRef::Leak(_)
            | FindingRef::TagDropped(_)
            | FindingRef::Pollution(_)
            | FindingRef::TagChanged(_)
            | FindingRef::LaneSpike(_) => None,
            FindingRef::Drained(f) => Some(f.window_finding()),
            FindingRef::Ratio(f) => Some(f.window_finding()),
            FindingRef::Skew(f) => Some(f.window_finding(t)),
            FindingRef::Spike(f) => Some(f.window_finding(t)),
        }
    }
}

impl Serialize for FindingRef<'_> {
    /// The finding's own JSON (as in the report's lists).
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            FindingRef::Hop(f) => f.serialize(serializer),
            FindingRef::Missing(f) => f.serialize(serializer),
            FindingRef::Drained(f) => f.serialize(serializer),
            FindingRef::Ratio(f) => f.serialize(serializer),
            FindingRef::Skew(f) => f.serialize(serializer),
            FindingRef::Spike(f) => f.serialize(serializer),
            FindingRef::Leak(f) => f.serialize(serializer),
            FindingRef::TagDropped(f) => f.serialize(serializer),
            FindingRef::Pollution(f) => f.serialize(serializer),
            FindingRef::TagChanged(f) => f.serialize(serializer),
            FindingRef::LaneSpike(f) => f.serialize(serializer),
        }
    }
}

/// Labels of an alert: `alertname`, `type`, `channel` (or `lane_group` and `lane` for a lane
/// finding), and where they apply `environment`, `app`, `color`, `kind`, `instance`,
/// `from_app`, `to_app`, `reason`, .... An alert is keyed by them.
pub type AlertLabels = BTreeMap<String, String>;

/// Findings per alert key seen so far in one evaluation ([`FindingRef::alert`]).
pub type AlertCounts = HashMap<AlertLabels, usize>;

/// What one finding tells the alerts (`crate::alerts`): the alert it raises or updates, a
/// summary (observed value, comparator, threshold), the end of the window it was seen in,
/// and exemplar traces.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Observation {
    /// The alert's labels.
    pub labels: AlertLabels,
    /// The alert's `summary` annotation.
    pub summary: String,
    /// End of the window the finding was seen in, Unix ns.
    pub window_end: i64,
    /// Trace ids for drilldown.
    pub exemplars: Vec<String>,
    /// For an alert on a count of findings judged per span (hops, the lane findings): the
    /// findings of its key so far in the evaluation and what they are, the summary being
    /// [`counted_summary`] of both ([`Observation::recount`] says another count).
    pub counted: Option<(usize, String)>,
}

impl Observation {
    /// The observation with `n` findings of its key (a cluster's, summed over its nodes);
    /// unchanged when not a count.
    pub fn recount(&mut self, n: usize) {
        if let Some((count, what)) = &mut self.counted {
            *count = n;
            self.summary = counted_summary(n, what);
        }
    }
}

/// The summary of an alert on a count: `n` findings that are `what`, against the threshold 0.
pub(crate) fn counted_summary(n: usize, what: &str) -> String {
    format!("{n} {what}; observed {n} > threshold 0")
}

/// The labels of a `detection` alert: `alertname` (`Dyeline` and the type in CamelCase),
/// `type`, and each of `pairs` that has a value.
pub(crate) fn alert_labels(detection: Detection, pairs: &[(&str, Option<&str>)]) -> AlertLabels {
    let kind = detection.as_str();
    let mut l = BTreeMap::new();
    l.insert("alertname".into(), format!("Dyeline{}", camel(kind)));
    l.insert("type".into(), kind.into());
    for (k, v) in pairs {
        if let Some(v) = v {
            l.insert((*k).into(), (*v).into());
        }
    }
    l
}

fn camel(t: &str) -> String {
    t.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// A windowed finding as a row of the dashboard's channel page (the server copies it into
/// the page's own type).
#[derive(Clone, Debug, PartialEq)]
pub struct WindowFinding {
    /// Its detection.
    pub finding: Detection,
    /// App (none: the channel as a whole).
    pub app: Option<String>,
    /// Colour.
    pub color: Color,
    /// Traffic kind.
    pub kind: TrafficKind,
    /// Instance (instance skew).
    pub instance: Option<String>,
    /// The observed values against the thresholds, for people.
    pub detail: String,
    /// Window start, Unix ns.
    pub window_start_unix_nano: i64,
    /// Up to 5 trace ids for drilldown.
    pub trace_ids: Vec<String>,
}

/// `t` (Unix ns) as RFC 3339 UTC to the second, for people (the model's one time helper).
pub(crate) use dyeline_model::time::rfc3339_secs as time_text;
