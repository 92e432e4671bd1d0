//! The view models of the lanes pages (domain §7): the index of lane groups ([`LanesIndex`])
//! and one page per lane group or for the apps in no group ([`LanesPage`]): the apps × lanes
//! matrix, the lane findings, the counted exceptions and each app's error rate per lane.

use serde::{Deserialize, Serialize};

/// Which lanes page: a lane group's, or the apps in no group's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneScope<'a> {
    /// The lane group with this id.
    Group(&'a str),
    /// The apps in no lane group (they use the defaults of domain §7.1).
    Ungrouped,
}

/// One line of the lanes index: a lane group (or the apps in no group) and what was found in
/// it over the range.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaneGroupLine {
    /// The group id; `None` for the apps in no group.
    pub group: Option<String>,
    /// Its apps (for `None`: the apps seen in no group).
    pub apps: Vec<String>,
    /// Its lanes other than base (for `None`: the lanes seen).
    pub lanes: Vec<String>,
    /// Findings of each lane type over the range.
    pub findings: u64,
    /// Marked requests served in base for want of capacity (expected, never alerted).
    pub lane_fallback: u64,
    /// Firing lane alerts.
    pub firing_alerts: usize,
}

/// The lanes index `/lanes`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LanesIndex {
    /// One line per lane group, then one for the apps in no group.
    pub groups: Vec<LaneGroupLine>,
    /// Set when the range's analysis is not the newest (see [`super::Overview`]).
    pub analysed_to_unix_nano: Option<i64>,
}

/// A lane group's settings as the page shows them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaneGroupView {
    /// Id.
    pub id: String,
    /// Apps allowed to set or change a tag.
    pub entry_apps: Vec<String>,
    /// Lanes that fall back to none (strict).
    pub strict_lanes: Vec<String>,
    /// Base traffic may go to a lane while the app has no base instance.
    pub reverse_fallback: bool,
}

/// An instance in a cell of the matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaneInstance {
    /// Instance id.
    pub instance: String,
    /// Which signals showed it over the range: `spans`, `metrics`, `logs`, comma-joined.
    pub signals: String,
    /// Present at the end of the range (domain §7.1).
    pub present_at_end: bool,
}

/// One cell of the matrix: an app in a lane over the range.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LaneCell {
    /// Instances of the app in this lane seen over the range.
    pub instances: Vec<LaneInstance>,
    /// Entry spans marked for this lane served in it (not for base).
    pub served_in_lane: u64,
    /// ...served in base for want of capacity.
    pub lane_fallback: u64,
    /// ...retried outside the lane after it failed.
    pub failover: u64,
    /// ...leaked.
    pub leaked: u64,
    /// Base requests served in this lane (pollution; not for base).
    pub pollution: u64,
    /// SERVER spans served by this lane's instances.
    pub requests: u64,
    /// Their errors.
    pub errors: u64,
    /// Their p99 duration, ms (the largest window's when the range spans several).
    pub p99_ms: Option<f64>,
}

impl LaneCell {
    /// Errors / requests, when there were requests.
    pub fn error_rate(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.errors as f64 / self.requests as f64)
    }
}

/// One app's row of the matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaneAppRow {
    /// App.
    pub app: String,
    /// One cell per lane of [`LanesPage::lanes`], in order.
    pub cells: Vec<LaneCell>,
}

/// A lane finding, grouped as the page lists them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaneFindingRow {
    /// `lane_leak`, `lane_tag_dropped`, `lane_pollution`, `lane_tag_changed`, `lane_error_spike`.
    pub finding: String,
    /// The edge or place: e.g. `order (gray) → inventory (base) via payment`.
    pub place: String,
    /// The lane concerned.
    pub lane: String,
    /// RPC or MQ.
    pub kind: String,
    /// The finding's reason (`tag_ignored`, `in_process`, ...), or for a spike the rates.
    pub reason: String,
    /// Occurrences over the range.
    pub count: u64,
    /// First occurrence, Unix ns.
    pub first_unix_nano: i64,
    /// Example traces.
    pub trace_ids: Vec<String>,
}

/// A series' points: (step start, Unix ns; value or none for a step without data).
pub type StepPoints = Vec<(i64, Option<f64>)>;

/// One app's error rate per lane, one point per step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaneErrorSeries {
    /// App.
    pub app: String,
    /// Per lane (base first): the lane and its points (step start, error rate 0..=1 or none
    /// when the step had no request).
    pub lanes: Vec<(String, StepPoints)>,
}

/// The counted exceptions of domain §7.3 over the range.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LaneCountsView {
    /// Marked requests served in base for want of capacity.
    pub lane_fallback: u64,
    /// Retries that left a failing lane.
    pub failover: u64,
    /// Entry spans that did not record a tag that reappears below them.
    pub tag_not_recorded: u64,
    /// Base requests served in a lane for want of a base instance, as the group allows.
    pub reverse_fallback: u64,
    /// Entry spans whose intended lane cannot be told.
    pub undetermined: u64,
    /// Lane carriers that gave no lane id.
    pub malformed_lane_tags: u64,
}

/// A lanes page `/lanes/{group}` (or `/lanes/_ungrouped`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LanesPage {
    /// The group (`None`: the apps in no group).
    pub group: Option<LaneGroupView>,
    /// The lanes, base first: the matrix's columns.
    pub lanes: Vec<String>,
    /// One row per app.
    pub apps: Vec<LaneAppRow>,
    /// The lane findings.
    pub findings: Vec<LaneFindingRow>,
    /// The counted exceptions.
    pub counts: LaneCountsView,
    /// The live alerts of the group's lane findings (of the apps in no group for
    /// `_ungrouped`), firing first.
    pub alerts: Vec<super::AlertLine>,
    /// Seconds per step of [`LanesPage::error_rates`].
    pub step_seconds: u64,
    /// Each app's error rate per lane (apps with requests in a lane other than base).
    pub error_rates: Vec<LaneErrorSeries>,
    /// Set when the range's analysis is not the newest.
    pub analysed_to_unix_nano: Option<i64>,
}
