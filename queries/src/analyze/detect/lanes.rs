//! Domain §7, lanes (full-link gray): the intended lane of each entry span (§7.2), the four
//! per-span findings and the counted exceptions (§7.3), lane coverage and the lane error spike
//! (§7.4).
//!
//! The rules read a span through [`LaneFields`] (its tree links, kind, app, instance, the
//! instance's lane and the span's lane tag, all resolved at ingest), lane groups through
//! [`LaneGroups`] (the group of an app as it was at a time) and presence through
//! [`presence::Presence`] (which instances signalled around a time). A [`LaneJudge`] takes one
//! trace at a time ([`LaneJudge::trace`]: the trace's structure in [`tree`], the rules in
//! [`judge`]) and is finished into a [`LaneReport`] ([`windows`] judges the per-window counts);
//! [`marks`] runs it over one trace for the drilldown's per-span marks.
//! Lane ids are dense `u32`s of one interner in which [`BASE`] (`base`) is id 0.

pub mod findings;
pub(crate) mod judge;
pub mod marks;
pub mod presence;
pub mod records;
pub(crate) mod timeline;
pub(crate) mod tree;
pub(crate) mod windows;

#[cfg(test)]
mod tests;

use std::num::NonZeroU64;

pub use dyeline_model::release::SpikeThresholds;

pub use findings::{
    DropWhere, LaneCounts, LaneCoverage, LaneErrorSpike, LaneLeak, LanePollution, LaneReport,
    LaneTagChanged, LaneTagDropped, LeakReason, PollutionReason, TagChangeReason,
};
pub use judge::LaneJudge;
pub use marks::{LaneMark, TraceLanes, asks_capacity, trace_lanes};
pub use presence::Covered;
pub use records::{InstanceLane, LaneSpan, SpanLaneTag, find, instance_lanes, span_lane_tags};
pub use timeline::TimelineGroups;
pub use windows::{SpikeCell, judge_spike_cells};

/// The interned id of the base lane (an interner of lanes holds `base` first).
pub const BASE: u32 = 0;

/// Span kinds as the lane rules tell them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneKind {
    /// SERVER.
    Server,
    /// CONSUMER.
    Consumer,
    /// CLIENT.
    Client,
    /// PRODUCER.
    Producer,
    /// INTERNAL or UNSPECIFIED.
    Internal,
}

impl LaneKind {
    /// SERVER or CONSUMER: the spans that are judged.
    pub fn is_judged(self) -> bool {
        matches!(self, Self::Server | Self::Consumer)
    }

    /// CLIENT or PRODUCER: a caller span (`c(s)` of §7.2).
    pub fn is_caller(self) -> bool {
        matches!(self, Self::Client | Self::Producer)
    }
}

/// What the lane rules read of a span.
pub trait LaneFields {
    /// Trace id.
    fn trace(&self) -> u128;
    /// Span id.
    fn span(&self) -> u64;
    /// Parent span id (`None`: a root).
    fn parent(&self) -> Option<NonZeroU64>;
    /// Its kind.
    fn lane_kind(&self) -> LaneKind;
    /// It names other spans by span links.
    fn has_links(&self) -> bool;
    /// App id.
    fn app(&self) -> u32;
    /// Instance id.
    fn instance(&self) -> u32;
    /// The instance's lane ([`BASE`] for base).
    fn lane(&self) -> u32;
    /// The lane tag it carries, if any ([`BASE`] for an explicit base tag).
    fn tag(&self) -> Option<u32>;
    /// Start, Unix ns.
    fn start(&self) -> i64;
    /// End, Unix ns.
    fn end(&self) -> i64;
    /// An error per domain §6.6.
    fn is_error(&self) -> bool;
}

/// Lane groups as they were at a time (domain §7.1). An app in no group uses the defaults: no
/// entry apps, every lane falls back to base, no reverse fallback, default thresholds.
pub trait LaneGroups {
    /// The id of `app`'s group at `t`, if it is in one.
    fn group(&self, app: u32, t: i64) -> Option<&str>;
    /// `app` is an entry app of its group at `t`.
    fn is_entry(&self, app: u32, t: i64) -> bool;
    /// Lane `lane` is strict (fallback `none`) in `app`'s group at `t`.
    fn is_strict(&self, app: u32, lane: u32, t: i64) -> bool;
    /// `app`'s group at `t` lets base traffic go to a lane while the app has no base instance.
    fn reverse_fallback(&self, app: u32, t: i64) -> bool;
    /// The lane error spike's thresholds for `app` at `t`.
    fn spike_thresholds(&self, app: u32, t: i64) -> SpikeThresholds;
}

/// No lane groups: every app uses the defaults.
pub struct NoGroups;

impl LaneGroups for NoGroups {
    fn group(&self, _: u32, _: i64) -> Option<&str> {
        None
    }
    fn is_entry(&self, _: u32, _: i64) -> bool {
        false
    }
    fn is_strict(&self, _: u32, _: u32, _: i64) -> bool {
        false
    }
    fn reverse_fallback(&self, _: u32, _: i64) -> bool {
        false
    }
    fn spike_thresholds(&self, _: u32, _: i64) -> SpikeThresholds {
        SpikeThresholds::default()
    }
}
