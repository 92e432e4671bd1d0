//! DataFusion over the span store: the session with the `spans` table registered, read-only SQL
//! with a row limit and a timeout ([`sql`]), and results rendered as JSON or a text table.
//!
//! Owns query execution, the dashboard's panels ([`panels`]), the analysis routes ([`http`])
//! and the Jaeger HTTP query API for Grafana ([`jaeger`]); does not own storage (the store's
//! table provider), the server's composition of the routes with the control plane's, or its
//! token check (reached through the ports of [`ports`] and [`http::ReadGate`]).

pub mod render;
pub mod sql;

pub use sql::{QueryResult, SqlBounds, SqlEngine, SqlError, SqlLimits, SqlMetrics};
pub mod alerts;
pub mod analyze;
pub mod cluster_reads;
pub mod drilldown;
pub mod exposition;
pub mod http;
pub mod jaeger;
pub mod panels;
pub mod ports;
pub mod rollup;
pub mod search;
pub mod span_detail;
pub mod span_metrics;
pub mod summary;
pub mod trace_view;
