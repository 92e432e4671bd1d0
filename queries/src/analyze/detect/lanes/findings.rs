//! What the lane rules find (domain §7.3–7.4): one record per finding type, the counted
//! exceptions ([`LaneCounts`]) and the coverage rows, as items of `dyeline analyze --format
//! json` (keys and fields as `../shared/tools/check_findings.py` documents). Ids are
//! lower-case hex, times decimal strings of Unix ns; `group` is the lane group of the judged
//! span's app at its start (`null`: none).

use dyeline_model::TrafficKind;
use serde::Serialize;

use crate::analyze::findings::nanos;

/// Why a request marked for a lane was served outside it (§7.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LeakReason {
    /// The span carries the lane's tag: the router did not honour it.
    TagIgnored,
    /// The span inherited the lane (its tag was lost on the way).
    TagDropped,
    /// No capacity in a strict lane, and served elsewhere anyway.
    StrictLane,
    /// No capacity in the lane, and served in another lane than base.
    WrongFallback,
}

/// Why base traffic reached a lane (§7.3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PollutionReason {
    /// No tag on the way.
    Untagged,
    /// A carried `base` tag (on the span or an upstream).
    ExplicitBase,
    /// The app had no base instance and its group does not allow reverse fallback.
    NoBaseInstance,
}

/// Where a tag was lost (§7.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DropWhere {
    /// Inside the caller: its CLIENT/PRODUCER span carries no tag.
    InProcess,
    /// On the wire: the caller span carries a tag.
    OnWire,
    /// No caller span to tell.
    Unknown,
}

/// Why a tag was set mid-trace (§7.3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TagChangeReason {
    /// The upstream's request was base.
    Injected,
    /// The upstream's request was in another lane.
    Changed,
}

impl LeakReason {
    /// Its name as written in JSON (`tag_ignored`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TagIgnored => "tag_ignored",
            Self::TagDropped => "tag_dropped",
            Self::StrictLane => "strict_lane",
            Self::WrongFallback => "wrong_fallback",
        }
    }
}

impl PollutionReason {
    /// Its name as written in JSON (`untagged`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Untagged => "untagged",
            Self::ExplicitBase => "explicit_base",
            Self::NoBaseInstance => "no_base_instance",
        }
    }
}

impl DropWhere {
    /// Its name as written in JSON (`in_process`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InProcess => "in_process",
            Self::OnWire => "on_wire",
            Self::Unknown => "unknown",
        }
    }
}

impl TagChangeReason {
    /// Its name as written in JSON (`injected`, `changed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Injected => "injected",
            Self::Changed => "changed",
        }
    }
}

/// §7.3.1: an entry span marked for a lane and served outside it.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LaneLeak {
    /// The deployment environment of the spans it was judged on (`deployment_environment`);
    /// left out of JSON when they had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Trace id.
    pub trace_id: String,
    /// The judged span.
    pub span_id: String,
    /// Its start, Unix ns.
    #[serde(serialize_with = "nanos")]
    #[schema(value_type = String)]
    pub t_unix_nano: i64,
    /// Lane group of its app at its start.
    pub group: Option<String>,
    /// The intended lane I(s).
    pub lane: String,
    /// RPC or MQ.
    #[schema(value_type = String)]
    pub kind: TrafficKind,
    /// Why.
    pub reason: LeakReason,
    /// The nearest ancestor entry span served in `lane` (`(none)`: none).
    pub from_app: String,
    /// Its lane (`null` with `(none)`).
    pub from_lane: Option<String>,
    /// The judged span's app.
    pub to_app: String,
    /// The lane that served it.
    pub to_lane: String,
    /// Apps of the entry spans between, each once, in call order.
    pub via: Vec<String>,
}

/// §7.3.2: an entry span that lost its upstream's tag.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LaneTagDropped {
    /// The deployment environment of the spans it was judged on (`deployment_environment`);
    /// left out of JSON when they had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Trace id.
    pub trace_id: String,
    /// The judged span.
    pub span_id: String,
    /// Its start, Unix ns.
    #[serde(serialize_with = "nanos")]
    #[schema(value_type = String)]
    pub t_unix_nano: i64,
    /// Lane group of its app at its start.
    pub group: Option<String>,
    /// Its app.
    pub app: String,
    /// The tag the upstream carried.
    pub lane: String,
    /// RPC or MQ.
    #[schema(value_type = String)]
    pub kind: TrafficKind,
    /// The upstream's app.
    pub dropped_by: String,
    /// Where it was lost.
    #[serde(rename = "where")]
    pub where_: DropWhere,
}

/// §7.3.3: base traffic served in a lane.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LanePollution {
    /// The deployment environment of the spans it was judged on (`deployment_environment`);
    /// left out of JSON when they had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Trace id.
    pub trace_id: String,
    /// The judged span.
    pub span_id: String,
    /// Its start, Unix ns.
    #[serde(serialize_with = "nanos")]
    #[schema(value_type = String)]
    pub t_unix_nano: i64,
    /// Lane group of its app at its start.
    pub group: Option<String>,
    /// Its app.
    pub app: String,
    /// The lane that served it.
    pub lane: String,
    /// RPC or MQ.
    #[schema(value_type = String)]
    pub kind: TrafficKind,
    /// Why.
    pub reason: PollutionReason,
    /// The upstream's app (`(none)` for a root).
    pub from_app: String,
}

/// §7.3.4: a tag set or changed mid-trace.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LaneTagChanged {
    /// The deployment environment of the spans it was judged on (`deployment_environment`);
    /// left out of JSON when they had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Trace id.
    pub trace_id: String,
    /// The judged span.
    pub span_id: String,
    /// Its start, Unix ns.
    #[serde(serialize_with = "nanos")]
    #[schema(value_type = String)]
    pub t_unix_nano: i64,
    /// Lane group of its app at its start.
    pub group: Option<String>,
    /// RPC or MQ.
    #[schema(value_type = String)]
    pub kind: TrafficKind,
    /// Why.
    pub reason: TagChangeReason,
    /// The upstream's app.
    pub from_app: String,
    /// The upstream's intended lane.
    pub from_lane: String,
    /// The judged span's app.
    pub to_app: String,
    /// Its tag.
    pub to_lane: String,
}

/// §7.4: one side's error rate spikes against the other's, per app and window.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LaneErrorSpike {
    /// The deployment environment of the spans it was judged on (`deployment_environment`);
    /// left out of JSON when they had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Lane group of the app at the window's start.
    pub group: Option<String>,
    /// App.
    pub app: String,
    /// The worse side (a lane, or `base`).
    pub lane: String,
    /// The other side.
    pub other_lane: String,
    /// RPC.
    #[schema(value_type = String)]
    pub kind: TrafficKind,
    /// Requests on the worse side.
    pub requests: u64,
    /// Its errors.
    pub errors: u64,
    /// Its error rate.
    pub error_rate: f64,
    /// Requests on the other side.
    pub other_requests: u64,
    /// Its errors.
    pub other_errors: u64,
    /// Its error rate.
    pub other_error_rate: f64,
    /// Two-sided two-proportion z-test.
    pub p_value: f64,
    /// Error traces on the worse side (the smallest ids).
    pub exemplar_trace_ids: Vec<String>,
    /// Window start, Unix ns.
    #[serde(serialize_with = "nanos")]
    #[schema(value_type = String)]
    pub window_start_unix_nano: i64,
    /// Window end (exclusive), Unix ns.
    #[serde(serialize_with = "nanos")]
    #[schema(value_type = String)]
    pub window_end_unix_nano: i64,
}

/// §7.4: lane coverage of one window, lane (not base) and app.
#[derive(Clone, Debug, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LaneCoverage {
    /// The deployment environment of the spans it was judged on (`deployment_environment`);
    /// left out of JSON when they had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Window start, Unix ns.
    #[serde(serialize_with = "nanos")]
    #[schema(value_type = String)]
    pub window_start_unix_nano: i64,
    /// Window end (exclusive), Unix ns.
    #[serde(serialize_with = "nanos")]
    #[schema(value_type = String)]
    pub window_end_unix_nano: i64,
    /// Lane.
    pub lane: String,
    /// App.
    pub app: String,
    /// Judged spans with I = lane served in it.
    pub served_in_lane: u64,
    /// ...served in base for want of capacity (expected).
    pub lane_fallback: u64,
    /// ...retried outside the lane after it failed.
    pub failover: u64,
    /// ...leaked (any reason).
    pub leaked: u64,
    /// SERVER spans served by the lane's instances.
    pub requests: u64,
    /// Their errors.
    pub errors: u64,
    /// Their p99 duration, ms.
    pub p99_ms: f64,
}

/// §7.3–7.4: what is counted, not reported one by one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct LaneCounts {
    /// Marked requests served in base where the app had no capacity in their lane.
    pub lane_fallback: u64,
    /// Retries that left a failing lane.
    pub failover: u64,
    /// Entry spans that did not record a tag that reappears below them.
    pub tag_not_recorded: u64,
    /// Base requests served in a lane where the app had no base instance and its group allows it.
    pub reverse_fallback: u64,
    /// Entry spans whose intended lane cannot be told.
    pub undetermined: u64,
    /// Lane carriers that gave no lane id.
    pub malformed_lane_tags: u64,
    /// Instances with a lane marker value that is not a lane id.
    pub invalid_instance_lanes: u64,
}

/// Everything the lane rules found in some spans.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaneReport {
    /// §7.3.1.
    pub leaks: Vec<LaneLeak>,
    /// §7.3.2.
    pub tags_dropped: Vec<LaneTagDropped>,
    /// §7.3.3.
    pub pollution: Vec<LanePollution>,
    /// §7.3.4.
    pub tags_changed: Vec<LaneTagChanged>,
    /// §7.4.
    pub error_spikes: Vec<LaneErrorSpike>,
    /// §7.4 coverage rows.
    pub coverage: Vec<LaneCoverage>,
    /// Counted exceptions.
    pub counts: LaneCounts,
    /// §7.4: every (window, lane, app) cell's requests, for a cluster's leader to add up
    /// (`super::windows::judge_spike_cells`).
    pub spike_cells: Vec<super::windows::SpikeCell>,
}

impl LaneReport {
    /// Appends the findings and adds the counts of `other` (the judge of other traces; its
    /// coverage and spikes are judged after the merge, so they are empty).
    pub(crate) fn absorb(&mut self, other: Self) {
        let Self {
            leaks,
            tags_dropped,
            pollution,
            tags_changed,
            error_spikes,
            coverage,
            counts,
            spike_cells,
        } = other;
        self.spike_cells.extend(spike_cells);
        self.leaks.extend(leaks);
        self.tags_dropped.extend(tags_dropped);
        self.pollution.extend(pollution);
        self.tags_changed.extend(tags_changed);
        self.error_spikes.extend(error_spikes);
        self.coverage.extend(coverage);
        let LaneCounts {
            lane_fallback,
            failover,
            tag_not_recorded,
            reverse_fallback,
            undetermined,
            malformed_lane_tags,
            invalid_instance_lanes,
        } = counts;
        let n = &mut self.counts;
        n.lane_fallback += lane_fallback;
        n.failover += failover;
        n.tag_not_recorded += tag_not_recorded;
        n.reverse_fallback += reverse_fallback;
        n.undetermined += undetermined;
        n.malformed_lane_tags += malformed_lane_tags;
        n.invalid_instance_lanes += invalid_instance_lanes;
    }

    /// Sorts every list by time, then by ids and names (a load's span order differs between a
    /// scan and a merge of files).
    pub fn sort(&mut self) {
        self.leaks.sort_by(|a, b| {
            (a.t_unix_nano, &a.trace_id, &a.span_id).cmp(&(b.t_unix_nano, &b.trace_id, &b.span_id))
        });
        self.tags_dropped.sort_by(|a, b| {
            (a.t_unix_nano, &a.trace_id, &a.span_id).cmp(&(b.t_unix_nano, &b.trace_id, &b.span_id))
        });
        self.pollution.sort_by(|a, b| {
            (a.t_unix_nano, &a.trace_id, &a.span_id).cmp(&(b.t_unix_nano, &b.trace_id, &b.span_id))
        });
        self.tags_changed.sort_by(|a, b| {
            (a.t_unix_nano, &a.trace_id, &a.span_id).cmp(&(b.t_unix_nano, &b.trace_id, &b.span_id))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names the pages show are the names the JSON writes.
    #[test]
    fn reason_names_are_their_json_names() {
        let json = |v: serde_json::Value| v.as_str().unwrap().to_owned();
        for r in [
            LeakReason::TagIgnored,
            LeakReason::TagDropped,
            LeakReason::StrictLane,
            LeakReason::WrongFallback,
        ] {
            assert_eq!(r.as_str(), json(serde_json::to_value(r).unwrap()));
        }
        for r in [
            PollutionReason::Untagged,
            PollutionReason::ExplicitBase,
            PollutionReason::NoBaseInstance,
        ] {
            assert_eq!(r.as_str(), json(serde_json::to_value(r).unwrap()));
        }
        for r in [DropWhere::InProcess, DropWhere::OnWire, DropWhere::Unknown] {
            assert_eq!(r.as_str(), json(serde_json::to_value(r).unwrap()));
        }
        for r in [TagChangeReason::Injected, TagChangeReason::Changed] {
            assert_eq!(r.as_str(), json(serde_json::to_value(r).unwrap()));
        }
    }
}
