//! The store reads behind the Jaeger API: SQL over the `spans` table (memory ∪ files, as
//! `/api/v1/sql` sees it) for the services, the operations, the trace ids a search matches
//! (every condition on one span, as Jaeger's stores judge it), the rows of traces by id, and
//! the app-to-app calls of a window. Every value from a request reaches the SQL as a quoted
//! literal ([`quote`]) or a number. Scans run off the server's async workers (the drilldown's
//! scan).

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int64Type};
use datafusion::prelude::SessionContext;

use super::model::{DependencyLink, Operation};
use super::params::{TagFilter, jaeger_kind};
use crate::sql::SqlError;

/// A SQL string literal of `text` (quotes doubled).
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Every batch of `sql`.
async fn collect(ctx: &SessionContext, sql: String) -> Result<Vec<RecordBatch>, SqlError> {
    crate::drilldown::scan(ctx, &sql, Vec::new(), |out, b| {
        out.push(b);
        Ok(())
    })
    .await
}

/// Column `i` of every batch as strings (nulls as empty).
fn texts(batches: &[RecordBatch], i: usize) -> Result<Vec<String>, SqlError> {
    let mut out = Vec::new();
    for b in batches {
        let c = arrow::compute::cast(b.column(i), &DataType::Utf8)
            .map_err(|e| SqlError::Internal(e.to_string()))?;
        let c = c.as_string::<i32>();
        out.extend((0..c.len()).map(|r| {
            if c.is_null(r) {
                String::new()
            } else {
                c.value(r).to_owned()
            }
        }));
    }
    Ok(out)
}

/// The apps that sent spans, sorted.
///
/// # Errors
/// [`SqlError`] when the scan fails.
pub async fn services(ctx: &SessionContext) -> Result<Vec<String>, SqlError> {
    let b = collect(
        ctx,
        "SELECT DISTINCT service_name FROM spans ORDER BY service_name".into(),
    )
    .await?;
    texts(&b, 0)
}

/// The span names (with their kinds) of `service`, of kind `kind` (stored upper-case name)
/// when given, sorted.
///
/// # Errors
/// [`SqlError`] when the scan fails.
pub async fn operations(
    ctx: &SessionContext,
    service: &str,
    kind: Option<&str>,
) -> Result<Vec<Operation>, SqlError> {
    let kind_filter = kind
        .map(|k| format!(" AND span_kind = {}", quote(k)))
        .unwrap_or_default();
    let b = collect(
        ctx,
        format!(
            "SELECT DISTINCT name, span_kind FROM spans WHERE service_name = {}{kind_filter} \
             ORDER BY name, span_kind",
            quote(service)
        ),
    )
    .await?;
    let (names, kinds) = (texts(&b, 0)?, texts(&b, 1)?);
    Ok(names
        .into_iter()
        .zip(kinds)
        .map(|(name, k)| Operation {
            name,
            span_kind: jaeger_kind(&k),
        })
        .collect())
}

/// A trace search: the conditions a span must meet (all of them, on the same span).
#[derive(Clone, Debug, Default)]
pub struct Search {
    /// `service.name`.
    pub service: String,
    /// Span name.
    pub operation: Option<String>,
    /// Tag conditions.
    pub tags: Vec<TagFilter>,
    /// Least duration, ns.
    pub min_duration_ns: Option<i64>,
    /// Most duration, ns.
    pub max_duration_ns: Option<i64>,
    /// Span start at or after, Unix ns.
    pub from: i64,
    /// Span start at or before, Unix ns.
    pub to: i64,
    /// At most this many traces.
    pub limit: usize,
}

/// The SQL condition of one tag filter.
pub fn tag_condition(f: &TagFilter) -> String {
    match f {
        TagFilter::Error(e) => format!("is_error = {e}"),
        TagFilter::Color(c) => format!("color = {}", quote(c.as_str())),
        TagFilter::Lane(l) => format!("coalesce(lane, 'base') = {}", quote(l)),
        TagFilter::LaneTag(l) => format!("lane_tag = {}", quote(l)),
        TagFilter::Decision { channel, color } => {
            format!("decisions[{}] = {}", quote(channel), quote(color.as_str()))
        }
        TagFilter::SpanKind(k) => format!("span_kind = {}", quote(k)),
        TagFilter::StatusCode(s) => format!("status_code = {}", quote(s)),
        TagFilter::HttpStatus(s) => format!("http_status_code = {s}"),
        TagFilter::GrpcStatus(s) => format!("rpc_grpc_status_code = {s}"),
        TagFilter::Text(col, v) => format!("{col} = {}", quote(v)),
    }
}

/// The SQL of a search: trace ids with their latest matching span start, newest first.
pub fn search_sql(s: &Search) -> String {
    let mut conds = vec![
        format!("start_time_unix_nano >= {}", s.from),
        format!("start_time_unix_nano <= {}", s.to),
        format!("service_name = {}", quote(&s.service)),
    ];
    if let Some(op) = &s.operation {
        conds.push(format!("name = {}", quote(op)));
    }
    if let Some(d) = s.min_duration_ns {
        conds.push(format!("duration_ns >= {d}"));
    }
    if let Some(d) = s.max_duration_ns {
        conds.push(format!("duration_ns <= {d}"));
    }
    conds.extend(s.tags.iter().map(tag_condition));
    format!(
        "SELECT trace_id, max(start_time_unix_nano) AS latest FROM spans WHERE {} \
         GROUP BY trace_id ORDER BY latest DESC, trace_id LIMIT {}",
        conds.join(" AND "),
        s.limit
    )
}

/// The trace ids a search matches, newest first.
///
/// # Errors
/// [`SqlError`] when the scan fails.
pub async fn search_ids(ctx: &SessionContext, s: &Search) -> Result<Vec<String>, SqlError> {
    let b = collect(ctx, search_sql(s)).await?;
    texts(&b, 0)
}

/// The rows ([`super::convert::COLUMNS`]) of the traces `ids` (lower-case hex, checked by
/// the caller); with `first`, only the `first` rows by start then span id.
///
/// # Errors
/// [`SqlError`] when the scan fails.
pub async fn trace_rows(
    ctx: &SessionContext,
    ids: &[String],
    first: Option<usize>,
) -> Result<Vec<RecordBatch>, SqlError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let list: Vec<String> = ids.iter().map(|i| quote(i)).collect();
    let filter = if list.len() == 1 {
        format!("trace_id = {}", list[0])
    } else {
        format!("trace_id IN ({})", list.join(", "))
    };
    let first = first
        .map(|n| format!(" ORDER BY start_time_unix_nano, span_id LIMIT {n}"))
        .unwrap_or_default();
    collect(
        ctx,
        format!(
            "SELECT {} FROM spans WHERE {filter}{first}",
            super::convert::COLUMNS
        ),
    )
    .await
}

/// How far before a window a parent span may start and still be read (a call's parent starts
/// before it): one hour.
pub const PARENT_SLACK_NS: i64 = 3_600_000_000_000;

/// The app-to-app calls of spans starting in `[from, to]`: each span whose parent span (read
/// from up to [`PARENT_SLACK_NS`] before `from`) is of another app counts one call from the
/// parent's app to its own. Sorted by parent then child.
///
/// # Errors
/// [`SqlError`] when the scan fails.
pub async fn dependencies(
    ctx: &SessionContext,
    from: i64,
    to: i64,
) -> Result<Vec<DependencyLink>, SqlError> {
    let parent_from = from.saturating_sub(PARENT_SLACK_NS);
    let sql = format!(
        "SELECT p.service_name AS parent, c.service_name AS child, count(*) AS calls \
         FROM spans c JOIN spans p ON c.trace_id = p.trace_id AND c.parent_span_id = p.span_id \
         WHERE c.start_time_unix_nano >= {from} AND c.start_time_unix_nano <= {to} \
         AND p.start_time_unix_nano >= {parent_from} AND p.start_time_unix_nano <= {to} \
         AND c.service_name <> p.service_name \
         GROUP BY p.service_name, c.service_name ORDER BY parent, child"
    );
    let b = collect(ctx, sql).await?;
    let (parents, children) = (texts(&b, 0)?, texts(&b, 1)?);
    let mut counts = Vec::new();
    for batch in &b {
        let c = arrow::compute::cast(batch.column(2), &DataType::Int64)
            .map_err(|e| SqlError::Internal(e.to_string()))?;
        let c = c.as_primitive::<Int64Type>();
        counts.extend((0..c.len()).map(|r| c.value(r).max(0) as u64));
    }
    Ok(parents
        .into_iter()
        .zip(children)
        .zip(counts)
        .map(|((parent, child), call_count)| DependencyLink {
            parent,
            child,
            call_count,
        })
        .collect())
}
