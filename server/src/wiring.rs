//! The server's wiring: the adapters that join the crates below it — the dashboard's source
//! over the queries' panels and the control plane ([`dashboard`]), the API port's router
//! composition ([`http`]) and the control plane as the queries' ports ([`plane`]).

pub mod dashboard;
pub mod http;
pub mod plane;
