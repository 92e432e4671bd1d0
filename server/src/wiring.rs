//! The server's wiring: the adapters that join the crates below it — the dashboard's source
//! over the queries' panels and the control plane ([`dashboard`]), the API port's router
//! composition ([`http`]), the control plane as the queries' ports ([`plane`]) and the store
//! as the collector's sink, with the observers of what it keeps ([`sink`]), and the alert
//! leader's election and book in the catalog as the queries' cluster port ([`alert_cluster`]),
//! the other nodes as the cluster-wide reads ask them ([`peers`]), and the release state as
//! metrics ([`release_metrics`]).

pub mod alert_cluster;
pub mod dashboard;
pub mod http;
pub mod peers;
pub mod plane;
pub mod release_metrics;
pub mod sink;
