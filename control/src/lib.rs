//! Dyeline's control plane (docs/domain.md §4–5, and the lane groups of §7.1): the numbered
//! history of the release operations, with the per-app and per-channel event streams
//! ([`plane`]), kept in SQLite or, for a cluster, PostgreSQL (the store port and its two
//! adapters, `store`; the log's records, [`record`]), API tokens ([`auth`]), the throttling of failed authentications ([`throttle`]),
//! the firing alerts it reads for the spike guard and the release gate ([`alerts`]),
//! and the HTTP routes with their OpenAPI description ([`api`]). The rules themselves (channels
//! and their state machine, event derivation, lane groups, the timeline) are the pure core in
//! `dyeline_model::release`; users import them from there.

pub mod alerts;
pub mod api;
pub mod auth;
pub mod error;
pub mod plane;
pub mod record;
mod store;
pub mod throttle;

pub use alerts::{FiringAlert, FiringAlerts, NoAlerts, SharedFiringAlerts};
pub use auth::{ApiToken, Auth, Identity, Role};
pub use error::ControlError;
pub use plane::{
    ControlPlane, Cursor, Event, ImportReport, LaneGroupRecord, LaneGroupState, LaneGroupWrite,
    OpRecord,
};
