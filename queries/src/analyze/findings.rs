//! What the detections find (domain §6): one record per finding type, each an item of
//! `dyeline analyze --format json` and of `GET /api/v1/findings`, and [`Detection`], the six
//! detections by name. Ids are written as lower-case hex ([`hex128`], [`hex64`]), times as
//! decimal strings of Unix ns.

use serde::{Serialize, Serializer};

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
