//! The server's wiring: the adapters that join the crates below it (the dashboard's source
//! over the queries' panels and the control plane).

pub mod dashboard;
