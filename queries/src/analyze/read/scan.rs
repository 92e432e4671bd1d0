//! The DataFusion path in: [`load`] scans `spans` (columns projected, the start time
//! filtered and pruned by hour) into resolved [`Spans`] on one thread.

use datafusion::prelude::SessionContext;
use dyeline_model::release::Timeline;
use futures::StreamExt;

use super::columns::{load_columns_sql, sql_err};
use super::loader::Loader;
use crate::analyze::spans::Spans;
use crate::sql::SqlError;

/// Scans `spans` with `from <= start_time_unix_nano < to` and resolves each span's
/// effective channel from `timeline`.
///
/// # Errors
/// [`SqlError::Internal`] when the scan fails.
pub async fn load(
    ctx: &SessionContext,
    timeline: &Timeline,
    from: Option<i64>,
    to: Option<i64>,
) -> Result<Spans, SqlError> {
    let mut filter = Vec::new();
    if let Some(f) = from {
        filter.push(format!("start_time_unix_nano >= {f}"));
    }
    if let Some(t) = to {
        filter.push(format!("start_time_unix_nano < {t}"));
    }
    let where_clause = if filter.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", filter.join(" AND "))
    };
    let sql = format!("SELECT {} FROM spans {where_clause}", load_columns_sql());
    let started = std::time::Instant::now();
    let df = ctx.sql(&sql).await.map_err(sql_err)?;
    let mut stream = df.execute_stream().await.map_err(sql_err)?;
    let mut loader = Loader::default();
    let mut converting = std::time::Duration::ZERO;
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(sql_err)?;
        let convert_started = std::time::Instant::now();
        loader.push(&batch)?;
        converting += convert_started.elapsed();
    }
    let scanned = started.elapsed();
    let out = loader.finish(timeline);
    tracing::debug!(
        spans = out.len(),
        scan_ms = (scanned - converting).as_secs_f64() * 1e3,
        convert_ms = converting.as_secs_f64() * 1e3,
        resolve_ms = (started.elapsed() - scanned).as_secs_f64() * 1e3,
        "load"
    );
    Ok(out)
}
