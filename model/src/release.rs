//! The pure core of a release (domain §1 and §4), with no I/O: the channels and their state
//! machine ([`Channels`], [`Op`], [`Channels::effective`]), the events one operation yields on
//! a channel's and on each app's stream ([`app_events`], [`channel_events`]), and the timeline
//! that tells any app's effective channel and blue_percent at any instant
//! ([`Timeline::effective_at`]), with its JSON document ([`TimelineDoc`]). Refusals are
//! [`ReleaseError`]s.
//!
//! `dyeline-control` persists, numbers and serves these over HTTP; `dyeline-queries` and the
//! dashboard read the timeline.
//!
//! ```text
//! TimelineDoc ──from_doc──▶ Timeline ──effective_at(app, t)──▶ Effective
//!                              │ replays
//! Op ──check / apply──▶ Channels (before, after) ──app_events / channel_events──▶ EventBody
//! ```

mod channels;
mod error;
mod events;
mod timeline;

pub use channels::{
    Channel, Channels, Effective, MAX_APP_NAME_LEN, NEUTRAL_BLUE_PERCENT, Op, ReleaseState,
    normalize_apps,
};
pub use error::ReleaseError;
pub use events::{EventBody, EventKind, app_events, app_transition, channel_events, flow_change};
pub use timeline::{EffectiveChange, Timeline, TimelineChannel, TimelineDoc, TimelineEvent};
