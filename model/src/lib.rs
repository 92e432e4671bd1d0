//! Dyeline's vocabulary, with no I/O.
//!
//! This crate owns the words every other crate speaks (`../shared/docs/domain.md` §1–§5):
//! trace and span ids ([`ids`]), span kinds, statuses and traffic kinds ([`kinds`]), instance
//! colours and the configurable rules that resolve them ([`color`]), the per-channel decisions
//! carried in baggage and their codec ([`decision`]), instance weights ([`weights`]), the Arrow
//! schema of the `spans` table ([`schema`]) and of the `presence` table ([`presence`], domain
//! §7.1), instants in Unix nanoseconds with their text
//! forms ([`time`]), the pure core of a release: channels, their events and the timeline
//! ([`release`]), lane ids and the lane rules and carriers read at ingest ([`lane`], domain §7), and the one status category table every error answers through ([`status`]:
//! HTTP status, gRPC code, retryable). It does not own transport, storage or analysis.

pub mod bearer;
pub mod color;
pub mod decision;
pub mod detection;
pub mod error_body;
pub mod ids;
pub mod kinds;
pub mod lane;
pub mod presence;
pub mod release;
pub mod schema;
pub mod status;
pub mod time;
pub mod weights;

pub use color::{Color, ColorRule, ColorRules, ResolvedColor};
pub use decision::{DecisionSource, Decisions, ReadDecision};
pub use detection::Detection;
pub use ids::{ChannelId, IdError, SpanId, SpanKey, TraceId};
pub use kinds::{SpanKind, StatusCode, TrafficKind};
pub use lane::{InstanceLane, LaneCarrier, LaneCarriers, LaneId, LaneRule, LaneRules, LaneTag};
pub use presence::PresenceSignal;
pub use status::{Category, HasCategory};
