//! DataFusion over the span store: the session with the `spans` table registered, read-only SQL
//! with a row limit and a timeout ([`sql`]), and results rendered as JSON or a text table.
//!
//! Owns query execution; does not own storage (the store's table provider) or transport (the
//! server's `POST /api/v1/sql` and `dyeline sql`).

pub mod render;
pub mod sql;

pub use sql::{QueryResult, SqlBounds, SqlEngine, SqlError, SqlLimits, SqlMetrics};
pub mod alerts;
pub mod analyze;
pub mod drilldown;
pub mod panels;
pub mod rollup;
pub mod search;
pub mod summary;
