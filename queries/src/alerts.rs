//! Alerts from findings (issue: analyzer, item 3): the alert book ([`book`]: which alerts
//! fire and resolve, pure state), the live evaluation that feeds it in `dyeline serve`
//! ([`live`], with `[alerts]` settings) and the delivery of its changes to Alertmanager,
//! webhooks and chat robots ([`deliver`], [`robots`]); in a cluster, the book stored by the alert leader and its
//! delivery outbox ([`cluster`]), fed by every node's share of the evaluation ([`share`]).

pub mod book;
pub mod cluster;
pub mod deliver;
pub mod live;
pub mod robots;
pub mod share;

pub use book::{Alert, AlertBook, AlertState, Change, SharedAlerts};
pub use live::{AlertSettings, Live, spawn};
