//! The server's wiring: the adapters that join the crates below it — the dashboard's source
//! over the queries' panels and the control plane ([`dashboard`]), the API port's router
//! composition ([`http`]), the control plane as the queries' ports ([`plane`]) and the store
//! as the collector's sink, with the observers of what it keeps ([`sink`]).

pub mod dashboard;
pub mod http;
pub mod plane;
pub mod sink;
