//! The pure core of a release (domain §1, §4 and §7.1), with no I/O: the channels and their
//! state machine ([`Channels`], [`Op`], [`Channels::effective`]), the events one operation
//! yields on a channel's and on each app's stream ([`app_events`], [`channel_events`]), the
//! lane groups ([`LaneGroup`], [`LaneGroupOp`], [`LaneGroups`]), and the timeline that tells
//! any app's effective channel and blue_percent ([`Timeline::effective_at`]) and lane group
//! ([`Timeline::lane_group_at`]) at any instant, with its JSON document ([`TimelineDoc`]).
//! Refusals are [`ReleaseError`]s; the spike guard's rule is [`spike_guard`].
//!
//! `dyeline-control` persists, numbers and serves these over HTTP; `dyeline-queries` and the
//! dashboard read the timeline.
//!
//! ```text
//! TimelineDoc ──from_doc──▶ Timeline ──effective_at(app, t)──▶ Effective
//!                              │ replays
//! Op ──check / apply──▶ Channels (before, after) ──app_events / channel_events──▶ EventBody
//! LaneGroupOp ──check / apply──▶ LaneGroups ──▶ LaneGroupTimeline ──group_at(app, t)──▶ LaneGroup
//! ```

mod channels;
mod error;
mod events;
mod lane_group_timeline;
mod lane_groups;
pub mod spike_guard;
mod timeline;

pub use channels::{
    Channel, Channels, Effective, MAX_APP_NAME_LEN, NEUTRAL_BLUE_PERCENT, Op, ReleaseState,
    normalize_apps,
};
pub use error::ReleaseError;
pub use events::{EventBody, EventKind, app_events, app_transition, channel_events, flow_change};
pub use lane_group_timeline::{LaneGroupChange, LaneGroupTimeline};
pub use lane_groups::{
    Fallback, LaneGroup, LaneGroupId, LaneGroupOp, LaneGroupSpec, LaneGroups, LaneSettings,
    SpikeThresholds,
};
pub use timeline::{
    EffectiveChange, LaneGroupRef, Timeline, TimelineChannel, TimelineDoc, TimelineEvent,
    TimelineOp,
};
