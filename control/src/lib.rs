//! Dyeline's control plane (docs/domain.md §4–5): release channels and their state machine
//! ([`state`]), the per-app and per-channel event streams derived from each operation
//! ([`events`]), persistence in SQLite and the numbered history ([`plane`]), the timeline
//! document and point queries over it ([`timeline`]), API tokens ([`auth`]), the throttling of
//! failed authentications ([`throttle`]), and the HTTP routes with their OpenAPI description
//! ([`api`]).

pub mod api;
pub mod auth;
pub mod error;
pub mod events;
pub mod plane;
pub mod state;
pub mod throttle;
pub mod timeline;

pub use auth::{ApiToken, Auth, Role};
pub use error::ControlError;
pub use plane::{ControlPlane, Cursor, Event, ImportReport, OpRecord};
pub use state::{Channel, Channels, Effective, Op, ReleaseState};
pub use timeline::{Timeline, TimelineDoc};
