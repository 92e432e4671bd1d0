//! The port the dashboard reads and writes through: [`DashboardSource`] and the plain view
//! models it returns. The server implements it over the store, the analyzer and the control
//! plane; UI tests implement it over fixtures. Nothing here does I/O.

use async_trait::async_trait;
pub use dyeline_model::Detection;
use dyeline_model::release::NEUTRAL_BLUE_PERCENT;
use dyeline_model::{Category, HasCategory};
use serde::{Deserialize, Serialize};

mod lanes;
pub use lanes::{
    LaneAppRow, LaneCell, LaneCountsView, LaneErrorSeries, LaneFindingRow, LaneGroupLine,
    LaneGroupView, LaneInstance, LaneScope, LanesIndex, LanesPage, StepPoints,
};

/// A half-open time range `[from_unix_nano, to_unix_nano)`, Unix ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeRange {
    /// Start, inclusive, Unix ns.
    pub from_unix_nano: i64,
    /// End, exclusive, Unix ns.
    pub to_unix_nano: i64,
}

impl TimeRange {
    /// Length in seconds (at least 1 ns, so rates never divide by zero).
    pub fn seconds(&self) -> f64 {
        (self.to_unix_nano - self.from_unix_nano).max(1) as f64 / 1e9
    }

    /// Seconds a rate over this range divides by: from the later of the range start and
    /// `data_from_unix_nano` (the first span in the range) to the range end, at least 1 ns.
    /// A server started a minute ago shows its rate over that minute, not a fifth of it over
    /// a 5-minute range; a range with no span divides by its whole length.
    pub fn rate_seconds(&self, data_from_unix_nano: Option<i64>) -> f64 {
        let from = data_from_unix_nano.map_or(self.from_unix_nano, |d| d.max(self.from_unix_nano));
        (self.to_unix_nano - from).max(1) as f64 / 1e9
    }
}

/// What went wrong in a source call.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The caller's input is invalid (400): bad id, bad value.
    #[error("{0}")]
    Invalid(String),
    /// No such channel or trace (404).
    #[error("{0}")]
    NotFound(String),
    /// The token is missing or wrong (401).
    #[error("{0}")]
    Unauthorized(String),
    /// The token may not write (403).
    #[error("{0}")]
    Forbidden(String),
    /// The write conflicts with the channel's state (409): e.g. ratio while idle.
    #[error("{0}")]
    Conflict(String),
    /// Anything else (500): storage, query engine.
    #[error("{0}")]
    Internal(String),
}

impl SourceError {
    /// The error a page shows for an error of `category` with `message`: invalid, not found,
    /// unauthorized, forbidden or conflict (a failed `If-Match` too, shown as 409), and
    /// internal for the rest (limits, unavailability, faults).
    pub fn from_category(category: Category, message: String) -> Self {
        match category {
            Category::InvalidArgument => SourceError::Invalid(message),
            Category::NotFound => SourceError::NotFound(message),
            Category::Unauthenticated => SourceError::Unauthorized(message),
            Category::PermissionDenied => SourceError::Forbidden(message),
            Category::Conflict | Category::PreconditionFailed => SourceError::Conflict(message),
            Category::PayloadTooLarge
            | Category::UnsupportedMediaType
            | Category::Saturated
            | Category::Unavailable
            | Category::Internal => SourceError::Internal(message),
        }
    }

    /// The HTTP status a page shows for it: its category's
    /// ([`Category::http_status`](dyeline_model::Category::http_status)).
    pub fn status(&self) -> http::StatusCode {
        http::StatusCode::from_u16(self.category().http_status())
            .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl HasCategory for SourceError {
    fn category(&self) -> Category {
        match self {
            SourceError::Invalid(_) => Category::InvalidArgument,
            SourceError::NotFound(_) => Category::NotFound,
            SourceError::Unauthorized(_) => Category::Unauthenticated,
            SourceError::Forbidden(_) => Category::PermissionDenied,
            SourceError::Conflict(_) => Category::Conflict,
            SourceError::Internal(_) => Category::Internal,
        }
    }
}

/// Requests, errors and latency of one colour over a range.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ColorLoad {
    /// Requests (RPC SERVER spans of the channel's apps, domain §6).
    pub requests: u64,
    /// Requests that are errors (domain §6).
    pub errors: u64,
    /// 99th percentile duration, ms (none without requests).
    pub p99_ms: Option<f64>,
}

impl ColorLoad {
    /// errors / requests, none without requests.
    pub fn error_rate(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.errors as f64 / self.requests as f64)
    }
}

/// One channel on the overview.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChannelRow {
    /// Channel id (`global` for the global channel).
    pub id: String,
    /// `idle` or `releasing` (domain §4).
    pub state: String,
    /// blue_percent in force, 0..=100 (50 while idle).
    pub blue_percent: u8,
    /// Member apps (empty for `global`: every app without a releasing local channel).
    pub apps: Vec<String>,
    /// Blue instances' load over the range.
    pub blue: ColorLoad,
    /// Green instances' load over the range.
    pub green: ColorLoad,
    /// Requests served by instances whose colour is unknown (domain §1).
    pub unknown_requests: u64,
    /// Alerts of this channel firing now.
    pub firing_alerts: usize,
    /// Cross-colour hops in the 5 minutes that end at the range's end.
    pub hops_last_5m: u64,
}

/// An instance whose colour could not be told (domain §1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnknownInstance {
    /// App.
    pub app: String,
    /// Instance id.
    pub instance: String,
    /// Its host name, if any.
    pub host: Option<String>,
    /// Spans it sent in the range.
    pub spans: u64,
}

/// The overview page's data.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    /// Every channel, `global` first, then by id.
    pub channels: Vec<ChannelRow>,
    /// Instances of colour unknown seen in the range.
    pub unknown_instances: Vec<UnknownInstance>,
    /// End of the range whose spans were analysed, Unix ns, when it differs from the
    /// requested one (the source answered from a slightly older analysis while it makes a
    /// new one); none when they are the same.
    pub analysed_to_unix_nano: Option<i64>,
    /// Start of the first span in the range, Unix ns (none without spans): rates divide by
    /// [`TimeRange::rate_seconds`].
    pub data_from_unix_nano: Option<i64>,
}

/// One step of a channel's time series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Step start, Unix ns.
    pub start_unix_nano: i64,
    /// Blue load in the step.
    pub blue: ColorLoad,
    /// Green load in the step.
    pub green: ColorLoad,
    /// blue / (blue + green) requests; none without requests.
    pub blue_share: Option<f64>,
    /// blue_percent in force at the step's end; none while idle.
    pub blue_percent: Option<u8>,
    /// Cross-colour hops in the step.
    pub hops: u64,
}

/// A control operation on the channel (annotation and event log line).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpLine {
    /// Operation sequence number.
    pub seq: u64,
    /// When, Unix ns.
    pub t_unix_nano: i64,
    /// `start`, `ratio`, `finish`, `apps`, `delete`.
    pub op: String,
    /// Ratio only: the new blue_percent.
    pub blue_percent: Option<u8>,
    /// Token name of the writer, or `import`.
    pub actor: String,
    /// Note recorded with it (e.g. an override), if any.
    pub note: Option<String>,
}

/// Per-app load of the channel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppRow {
    /// App.
    pub app: String,
    /// Blue load.
    pub blue: ColorLoad,
    /// Green load.
    pub green: ColorLoad,
    /// Requests on instances of unknown colour.
    pub unknown_requests: u64,
}

/// Cross-colour hops grouped by edge (domain §6.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HopEdge {
    /// Calling app (none at the entry).
    pub from_app: String,
    /// Its colour (none when it has no instance colour).
    pub from_color: Option<String>,
    /// Called app.
    pub to_app: String,
    /// Its colour.
    pub to_color: String,
    /// RPC or MQ.
    pub kind: String,
    /// Why it is a hop (e.g. `decision_mismatch`).
    pub reason: String,
    /// Apps outside the channel the call passed through.
    pub via: Vec<String>,
    /// Hops on this edge in the range.
    pub count: u64,
    /// Up to 5 example trace ids.
    pub trace_ids: Vec<String>,
}

/// Missing decisions grouped by caller (domain §6.2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MissingRow {
    /// The app whose call arrived without the decision.
    pub caller_app: String,
    /// The receiving app.
    pub app: String,
    /// RPC or MQ.
    pub kind: String,
    /// Spans.
    pub count: u64,
    /// Up to 5 example trace ids.
    pub trace_ids: Vec<String>,
}

/// A finding in one window: drained-side traffic, ratio deviation, skew or spike.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowFinding {
    /// [`Detection::DrainedSide`], [`Detection::RatioDeviation`],
    /// [`Detection::InstanceSkew`] or [`Detection::ErrorSpike`].
    pub finding: Detection,
    /// App (none for a channel-wide spike).
    pub app: Option<String>,
    /// Colour concerned.
    pub color: String,
    /// RPC, MQ or JOB.
    pub kind: String,
    /// Instance (skew only).
    pub instance: Option<String>,
    /// One line: observed value, comparator and threshold.
    pub detail: String,
    /// Window start, Unix ns.
    pub window_start_unix_nano: i64,
    /// Up to 5 example trace ids.
    pub trace_ids: Vec<String>,
}

/// One instance of the channel's apps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InstanceRow {
    /// App.
    pub app: String,
    /// Instance id.
    pub instance: String,
    /// `blue`, `green` or `unknown`.
    pub color: String,
    /// Requests it served in the range.
    pub requests: u64,
    /// Mean requests per instance of its app and colour.
    pub color_mean: f64,
    /// The analyzer found it skewed in some window of the range (domain §6.5).
    pub skewed: bool,
    /// Weight in force (domain §5), none while the channel is idle or colour unknown.
    pub weight: Option<u32>,
}

/// An alert of the channel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlertLine {
    /// `CrossColorHop`, `ErrorSpike`, …
    pub name: String,
    /// `firing` or `resolved`.
    pub state: String,
    /// Labels other than alertname and channel, `k=v` joined by spaces.
    pub labels: String,
    /// Observed value, comparator and threshold.
    pub summary: String,
    /// Colour label, if any.
    pub color: Option<String>,
    /// `type` label (the detection).
    pub kind: String,
    /// Since, Unix ns.
    pub starts_at_unix_nano: i64,
    /// Resolved at, Unix ns.
    pub ends_at_unix_nano: Option<i64>,
    /// Example trace ids.
    pub trace_ids: Vec<String>,
}

/// The channel page's data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChannelPage {
    /// The channel now.
    pub channel: ChannelRow,
    /// Its version (for If-Match).
    pub version: u64,
    /// Step length, seconds.
    pub step_seconds: u64,
    /// Time series over the range.
    pub steps: Vec<Step>,
    /// Control operations on this channel, oldest first (all time; the page shows those in
    /// the range on the chart and every one in the event log).
    pub ops: Vec<OpLine>,
    /// Per-app load, by app.
    pub apps: Vec<AppRow>,
    /// Hop edges, most frequent first.
    pub hops: Vec<HopEdge>,
    /// Missing decisions by caller.
    pub missing: Vec<MissingRow>,
    /// Window findings, newest first.
    pub findings: Vec<WindowFinding>,
    /// Instances of the channel's apps.
    pub instances: Vec<InstanceRow>,
    /// Alerts of the channel, firing first.
    pub alerts: Vec<AlertLine>,
    /// As [`Overview::analysed_to_unix_nano`].
    pub analysed_to_unix_nano: Option<i64>,
    /// As [`Overview::data_from_unix_nano`].
    pub data_from_unix_nano: Option<i64>,
    /// Blue's and green's request latency over the range, as histograms.
    #[serde(default)]
    pub latency: LatencyComparison,
}

/// Blue's and green's request durations in the same buckets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyComparison {
    /// The buckets' upper bounds, ms; one more bucket holds what is slower than the last.
    pub bounds_ms: Vec<f64>,
    /// Blue.
    pub blue: ColorLatency,
    /// Green.
    pub green: ColorLatency,
}

/// One colour's request durations: per-bucket counts and percentiles.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ColorLatency {
    /// Requests per bucket (`bounds_ms.len() + 1` of them).
    pub counts: Vec<u64>,
    /// Requests.
    pub requests: u64,
    /// Median, ms.
    pub p50_ms: Option<f64>,
    /// 90th percentile, ms.
    pub p90_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
}

/// One span of a trace, in depth-first order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceSpan {
    /// Span id, hex.
    pub span_id: String,
    /// Parent span id, hex.
    pub parent_span_id: Option<String>,
    /// Depth in the tree, 0 for roots.
    pub depth: usize,
    /// Span name.
    pub name: String,
    /// SERVER, CLIENT, PRODUCER, CONSUMER, INTERNAL.
    pub span_kind: String,
    /// RPC, MQ, JOB or none.
    pub traffic_kind: Option<String>,
    /// App.
    pub app: String,
    /// Instance.
    pub instance: String,
    /// Host.
    pub host: Option<String>,
    /// `blue`, `green`, `unknown`.
    pub color: String,
    /// `channel=color` pairs, `&`-joined as in baggage.
    pub decisions: String,
    /// Start, Unix ns.
    pub start_unix_nano: i64,
    /// Duration, ns.
    pub duration_ns: i64,
    /// UNSET, OK, ERROR.
    pub status_code: String,
    /// Error per domain §6.
    pub is_error: bool,
    /// Its parent is not stored (yet).
    pub waiting_for_parent: bool,
    /// Hop markers on this span: one line each (channel, from → to, reason, via).
    pub hops: Vec<String>,
    /// Channels this span lacks a decision for.
    pub missing_decision_channels: Vec<String>,
    /// The lane of its instance (domain §7.1; spans stored before lanes were read are base);
    /// none when the source tells no lane.
    pub lane: Option<String>,
    /// The lane tag it carries, if any.
    pub lane_tag: Option<String>,
    /// Its intended lane (domain §7.2) for an entry span; `undetermined` when it cannot be told.
    pub intended_lane: Option<String>,
    /// The lane group of its app at its start (none: in no group); its lane links to the
    /// group's lanes page.
    pub lane_group: Option<String>,
    /// Lane markers on this span (a tag dropped here, the request left its lane here, base
    /// traffic served in a lane here, a tag set here, or an outcome the analyzer counts).
    pub lane_marks: Vec<LaneMarkLine>,
    /// Its status message (an ERROR status's description), if any.
    #[serde(default)]
    pub status_message: Option<String>,
    /// The instrumentation scope that made it: name and version.
    #[serde(default)]
    pub scope: Option<String>,
    /// Its W3C trace state, if any.
    #[serde(default)]
    pub trace_state: Option<String>,
    /// Its attributes, (key, value as text), the promoted ones first.
    #[serde(default)]
    pub attributes: Vec<(String, String)>,
    /// Its resource's attributes not shown in the row (the version, pod, namespace, …).
    #[serde(default)]
    pub resource_attributes: Vec<(String, String)>,
    /// Its events, in order.
    #[serde(default)]
    pub events: Vec<TraceEvent>,
    /// Its links, in order.
    #[serde(default)]
    pub links: Vec<TraceLink>,
}

/// One event of a span.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceEvent {
    /// When, Unix ns.
    pub time_unix_nano: i64,
    /// Its name (`exception`, …).
    pub name: String,
    /// Its attributes, (key, value as text).
    pub attributes: Vec<(String, String)>,
}

/// One link of a span.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceLink {
    /// Trace id, hex.
    pub trace_id: String,
    /// Span id, hex.
    pub span_id: String,
    /// Its attributes, (key, value as text).
    pub attributes: Vec<(String, String)>,
}

/// One lane mark on a span.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneMarkLine {
    /// Its type: `lane_leak`, `lane_tag_dropped`, `lane_pollution`, `lane_tag_changed`,
    /// `lane_fallback`, `failover`, `reverse_fallback` or `tag_not_recorded`.
    pub mark: String,
    /// What it says, one line (lane, apps and reason).
    pub text: String,
}

/// The trace page's data: one page of the trace's spans in depth-first order (a trace may
/// hold more spans than a page shows; the source caps a page).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceView {
    /// Trace id, hex.
    pub trace_id: String,
    /// Spans the trace has stored (all pages).
    pub span_count: usize,
    /// Index in the depth-first order of the first span of `spans`.
    pub offset: usize,
    /// Most spans a page shows (the next page starts this many spans later).
    pub page_size: usize,
    /// Earliest span start of the whole trace, Unix ns.
    pub start_unix_nano: i64,
    /// Latest span end of the whole trace, Unix ns.
    pub end_unix_nano: i64,
    /// Spans of the whole trace with a hop.
    pub hop_spans: usize,
    /// Spans of the whole trace with a missing decision.
    pub missing_spans: usize,
    /// Spans of the whole trace with a lane mark.
    pub lane_mark_spans: usize,
    /// This page's spans, depth-first, children by start.
    pub spans: Vec<TraceSpan>,
}

/// Trace search filters (those of `GET /api/v1/traces`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceSearch {
    /// Channel.
    pub channel: Option<String>,
    /// App.
    pub app: Option<String>,
    /// `blue`, `green`, `unknown`.
    pub color: Option<String>,
    /// Only traces with (true) or without (false) an error.
    pub error: Option<bool>,
    /// Only traces with (true) or without (false) a hop.
    pub hop: Option<bool>,
    /// Minimum duration, ms.
    pub min_duration_ms: Option<f64>,
    /// A span served by an instance of this lane (domain §7.1).
    pub lane: Option<String>,
    /// A span carrying this lane tag.
    pub lane_tag: Option<String>,
    /// A span of an app in this lane group at the span's start.
    pub lane_group: Option<String>,
    /// With a lane finding of this type (`lane_leak`, `lane_tag_dropped`, `lane_pollution`,
    /// `lane_tag_changed`) or of any (`any`).
    pub lane_finding: Option<String>,
    /// A span with this attribute, `key=value` (span, resource or promoted attribute).
    #[serde(default)]
    pub attribute: Option<String>,
    /// At most this many, newest first.
    pub limit: usize,
}

/// One search result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceHit {
    /// Trace id, hex.
    pub trace_id: String,
    /// Start, Unix ns.
    pub start_unix_nano: i64,
    /// Duration, ms.
    pub duration_ms: f64,
    /// Spans.
    pub spans: usize,
    /// Apps.
    pub apps: Vec<String>,
    /// Colours seen.
    pub colors: Vec<String>,
    /// Has an error.
    pub error: bool,
    /// Hops.
    pub hops: usize,
}

/// A write from the channel page's controls.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    /// Start releasing (blue_percent 50).
    Start,
    /// Set blue_percent, 0..=100.
    Ratio(u8),
    /// Finish (blue_percent back to 50).
    Finish,
}

impl Action {
    /// blue_percent after the action (domain §4: start and finish set 50).
    pub fn blue_percent_after(&self) -> u8 {
        match self {
            Action::Start | Action::Finish => NEUTRAL_BLUE_PERCENT,
            Action::Ratio(p) => *p,
        }
    }
}

/// Weights of one app's instances after an action (domain §5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WeightPreview {
    /// App.
    pub app: String,
    /// Blue instances seen recently.
    pub blue_instances: u32,
    /// Green instances seen recently.
    pub green_instances: u32,
    /// Weight of each blue instance.
    pub blue_weight: u32,
    /// Weight of each green instance.
    pub green_weight: u32,
}

/// Who a token belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Token name (recorded as the actor of writes).
    pub name: String,
    /// May write.
    pub can_write: bool,
}

/// Everything the dashboard reads and writes.
///
/// Implementations must be cheap to call per request; the server caches analysis results
/// between data changes.
#[async_trait]
pub trait DashboardSource: Send + Sync + 'static {
    /// Start of the newest stored span, Unix ns; none when nothing is stored.
    async fn newest_span_unix_nano(&self) -> Result<Option<i64>, SourceError>;
    /// The overview over `range`.
    async fn overview(&self, range: TimeRange) -> Result<Overview, SourceError>;
    /// The channel page over `range`, `None` for an unknown channel.
    async fn channel(&self, id: &str, range: TimeRange)
    -> Result<Option<ChannelPage>, SourceError>;
    /// One page of a trace (id: 32 hex digits, any case) from `offset` in its depth-first
    /// order, as many spans as the source's cap; `None` when no span of it is stored.
    async fn trace(&self, trace_id: &str, offset: usize) -> Result<Option<TraceView>, SourceError>;
    /// The lanes index over `range`: every lane group, then the apps in no group.
    async fn lanes_index(&self, range: TimeRange) -> Result<LanesIndex, SourceError>;
    /// The lanes page of `scope` over `range`, `None` for an unknown lane group.
    async fn lanes(
        &self,
        scope: LaneScope<'_>,
        range: TimeRange,
    ) -> Result<Option<LanesPage>, SourceError>;
    /// Traces matching `query` in `range`, newest first.
    async fn search(
        &self,
        query: &TraceSearch,
        range: TimeRange,
    ) -> Result<Vec<TraceHit>, SourceError>;
    /// The weights each app of channel `id` would get after `action`, from the instances
    /// seen in the last 5 minutes of `range`.
    async fn preview(
        &self,
        id: &str,
        action: &Action,
        range: TimeRange,
    ) -> Result<Vec<WeightPreview>, SourceError>;
    /// Who `token` is; [`SourceError::Unauthorized`] for an unknown token.
    async fn identify(&self, token: &str) -> Result<Identity, SourceError>;
    /// Applies `action` to channel `id` as the holder of `token`, recording `note` with it.
    /// With `if_match`, only while the channel is still at that version (the one the
    /// confirmation page showed): a channel changed since is a [`SourceError::Conflict`] and
    /// nothing is written. The control plane applies the spike guard (domain §4) to every
    /// write, refusing with [`SourceError::Conflict`] unless `force` (the owner ticked the
    /// override); the page shows the same rule's verdict first ([`crate::guard`]).
    async fn write(
        &self,
        token: &str,
        id: &str,
        action: &Action,
        if_match: Option<u64>,
        note: Option<&str>,
        force: bool,
    ) -> Result<(), SourceError>;
    /// A number that changes whenever the pages' data may have changed (new spans, a control
    /// operation, an alert); the live stream polls it.
    fn data_version(&self) -> u64;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every category is shown as the page error (and status) the dashboard chose by HTTP
    /// status before the category table: 400, 401, 403, 404 as such, 409 and 412 as a
    /// conflict (409), anything else internal (500).
    #[test]
    fn every_category_is_shown_as_a_page_error() {
        let rows = [
            (Category::InvalidArgument, 400),
            (Category::NotFound, 404),
            (Category::Conflict, 409),
            (Category::PreconditionFailed, 409),
            (Category::Unauthenticated, 401),
            (Category::PermissionDenied, 403),
            (Category::PayloadTooLarge, 500),
            (Category::UnsupportedMediaType, 500),
            (Category::Saturated, 500),
            (Category::Unavailable, 500),
            (Category::Internal, 500),
        ];
        assert_eq!(rows.map(|r| r.0), Category::ALL);
        for (c, page) in rows {
            let e = SourceError::from_category(c, "m".into());
            assert_eq!(e.status().as_u16(), page, "{c:?}");
            assert_eq!(e.to_string(), "m");
            // A page error keeps its category, but for a failed precondition (a conflict)
            // and what a page cannot tell apart (internal).
            if page != 500 && c != Category::PreconditionFailed {
                assert_eq!(e.category(), c);
            }
        }
    }
}
