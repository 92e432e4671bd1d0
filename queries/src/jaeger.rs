//! The Jaeger HTTP query API (issue 28, item 1) under `/jaeger/api/…`, answered from the span
//! store, so Grafana's Jaeger data source (URL `http://HOST:8080/jaeger`, the API port) and the
//! Jaeger UI can search and show Dyeline's traces with the instance colour, the channel
//! decisions and the lane as span tags:
//!
//! - `GET /jaeger/api/services`: app names;
//! - `GET /jaeger/api/services/{service}/operations`: its span names;
//! - `GET /jaeger/api/operations?service=&spanKind=`: `[{name, spanKind}]`;
//! - `GET /jaeger/api/traces?service=&operation=&tags=&minDuration=&maxDuration=&limit=&start=&end=`
//!   (or `traceID=…`, repeated): traces newest first;
//! - `GET /jaeger/api/traces/{traceID}`: one trace;
//! - `GET /jaeger/api/dependencies?endTs=&lookback=`: `[{parent, child, callCount}]`.
//!
//! Every answer has Jaeger's envelope `{"data", "total", "limit", "offset", "errors"}`; a
//! refusal is `{"data": null, …, "errors": [{"code", "msg"}]}` with that HTTP status: 400 for a
//! malformed parameter (the message names it), 404 for a trace not stored, 401/403 from the
//! read check the `/api/v1` routes make ([`ReadGate`], `api.read_requires_token`). Nothing here
//! writes. Owns the routes, the parameters' defaults and the envelope; the parsing is
//! [`params`]', the SQL [`reads`]', the JSON model [`model`]'s and the conversion of rows to
//! it [`convert`]'s.

pub mod convert;
pub mod model;
pub mod params;
pub mod reads;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use arrow::array::RecordBatch;
use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use dyeline_model::time::now_unix_nano;
use serde::Serialize;

use crate::http::{AnalysisApi, ApiError};
use crate::sql::SqlError;
use model::{Envelope, JaegerError};
use params::{parse_duration, parse_tags, parse_trace_id, parse_unix, span_kind};

/// Jaeger's default number of traces of a search.
pub const DEFAULT_LIMIT: usize = 100;
/// The most traces one search returns (a larger `limit` is lowered to it).
pub const MAX_LIMIT: usize = 1_000;
/// The range of a search without `start`: Jaeger's query service default, 2 days.
pub const DEFAULT_LOOKBACK_NS: i64 = 2 * 24 * 3_600_000_000_000;
/// The window of `dependencies` without `lookback`: Jaeger's default, 24 hours.
pub const DEFAULT_DEPENDENCY_LOOKBACK_MS: i64 = 24 * 3_600_000;

/// A refusal in Jaeger's envelope.
#[derive(Debug)]
pub struct JaegerRefusal {
    status: StatusCode,
    errors: Vec<JaegerError>,
}

impl JaegerRefusal {
    /// A refusal with one error.
    pub fn new(status: StatusCode, msg: impl Into<String>) -> Self {
        Self {
            status,
            errors: vec![JaegerError {
                code: status.as_u16(),
                msg: msg.into(),
                trace_id: None,
            }],
        }
    }

    /// 400 with `msg`.
    pub fn bad(msg: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, msg)
    }
}

impl IntoResponse for JaegerRefusal {
    fn into_response(self) -> Response {
        let body = Envelope::<()> {
            data: None,
            total: 0,
            limit: 0,
            offset: 0,
            errors: Some(self.errors),
        };
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<ApiError> for JaegerRefusal {
    /// Its status and message.
    fn from(e: ApiError) -> Self {
        Self::new(e.status(), e.message())
    }
}

impl From<SqlError> for JaegerRefusal {
    fn from(e: SqlError) -> Self {
        ApiError::from(e).into()
    }
}

/// A success: `data` with `total` items.
fn ok<T: Serialize>(data: T, total: usize) -> Response {
    axum::Json(Envelope::ok(data, total)).into_response()
}

/// The parameters of a request as (name, value) pairs, in order (a name may repeat).
type Params = Vec<(String, String)>;

/// The pairs of a query string, refused with 400 when it does not decode.
fn pairs(q: Result<Query<Params>, QueryRejection>) -> Result<Params, JaegerRefusal> {
    q.map(|Query(p)| p)
        .map_err(|e| JaegerRefusal::bad(format!("malformed query string: {}", e.body_text())))
}

/// The last non-empty value of `name` (Go's `FormValue` takes the first; they differ only for
/// a repeated parameter, which Grafana never sends).
fn param<'a>(p: &'a Params, name: &str) -> Option<&'a str> {
    p.iter()
        .rev()
        .find(|(k, v)| k == name && !v.trim().is_empty())
        .map(|(_, v)| v.as_str())
}

/// Every value of `name`.
fn all<'a>(p: &'a Params, name: &str) -> Vec<&'a str> {
    p.iter()
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// The Jaeger routes under `/jaeger`, state applied (no OpenAPI: their contract is Jaeger's).
pub fn router(api: Arc<AnalysisApi>) -> Router {
    Router::new()
        .route("/jaeger/api/services", get(services))
        .route(
            "/jaeger/api/services/{service}/operations",
            get(service_operations),
        )
        .route("/jaeger/api/operations", get(operations))
        .route("/jaeger/api/traces", get(search))
        .route("/jaeger/api/traces/{trace_id}", get(trace))
        .route("/jaeger/api/dependencies", get(dependencies))
        .fallback(|| async {
            JaegerRefusal::new(StatusCode::NOT_FOUND, "no such endpoint of the Jaeger API")
        })
        .with_state(api)
}

fn gate(state: &AnalysisApi, headers: &HeaderMap) -> Result<(), JaegerRefusal> {
    state.gate.authorize_read(headers).map_err(Into::into)
}

async fn services(
    State(state): State<Arc<AnalysisApi>>,
    headers: HeaderMap,
) -> Result<Response, JaegerRefusal> {
    gate(&state, &headers)?;
    let s = reads::services(state.sql.context()).await?;
    let n = s.len();
    Ok(ok(s, n))
}

async fn service_operations(
    State(state): State<Arc<AnalysisApi>>,
    headers: HeaderMap,
    Path(service): Path<String>,
) -> Result<Response, JaegerRefusal> {
    gate(&state, &headers)?;
    let mut names: Vec<String> = reads::operations(state.sql.context(), &service, None)
        .await?
        .into_iter()
        .map(|o| o.name)
        .collect();
    names.dedup();
    let n = names.len();
    Ok(ok(names, n))
}

async fn operations(
    State(state): State<Arc<AnalysisApi>>,
    headers: HeaderMap,
    query: Result<Query<Params>, QueryRejection>,
) -> Result<Response, JaegerRefusal> {
    gate(&state, &headers)?;
    let p = pairs(query)?;
    let service = param(&p, "service")
        .ok_or_else(|| JaegerRefusal::bad("parameter 'service' is required"))?;
    let kind = match param(&p, "spanKind") {
        None => None,
        Some(k) => Some(span_kind(k).ok_or_else(|| {
            JaegerRefusal::bad(format!(
                "unable to parse param 'spanKind': {k:?} is not server, client, producer, \
                 consumer or internal"
            ))
        })?),
    };
    let ops = reads::operations(state.sql.context(), service, kind).await?;
    let n = ops.len();
    Ok(ok(ops, n))
}

/// The search of a request's parameters (Jaeger's `parseTraceQueryParams`), or the trace ids
/// it asks for by `traceID`.
enum SearchRequest {
    Search(reads::Search),
    Ids(Vec<String>),
}

fn search_request(p: &Params, now: i64) -> Result<SearchRequest, JaegerRefusal> {
    let ids: Vec<String> = all(p, "traceID")
        .into_iter()
        .map(parse_trace_id)
        .collect::<Result<_, _>>()
        .map_err(JaegerRefusal::bad)?;
    let to = match param(p, "end") {
        Some(t) => parse_unix("end", t, 1_000).map_err(JaegerRefusal::bad)?,
        None => now,
    };
    let from = match param(p, "start") {
        Some(t) => parse_unix("start", t, 1_000).map_err(JaegerRefusal::bad)?,
        None => to.saturating_sub(DEFAULT_LOOKBACK_NS),
    };
    let tags = parse_tags(&all(p, "tags"), &all(p, "tag")).map_err(JaegerRefusal::bad)?;
    let limit = match param(p, "limit") {
        None => DEFAULT_LIMIT,
        Some(l) => match l.trim().parse::<i64>() {
            Ok(0) => DEFAULT_LIMIT,
            Ok(n) if n > 0 => usize::try_from(n).unwrap_or(MAX_LIMIT).min(MAX_LIMIT),
            _ => {
                return Err(JaegerRefusal::bad(format!(
                    "unable to parse param 'limit': {l:?} is not a whole number ≥ 0"
                )));
            }
        },
    };
    let duration = |name: &str| {
        param(p, name)
            .map(|d| parse_duration(name, d))
            .transpose()
            .map_err(JaegerRefusal::bad)
    };
    let (min, max) = (duration("minDuration")?, duration("maxDuration")?);
    if !ids.is_empty() {
        return Ok(SearchRequest::Ids(ids));
    }
    let service =
        param(p, "service").ok_or_else(|| JaegerRefusal::bad("parameter 'service' is required"))?;
    if let (Some(a), Some(b)) = (min, max)
        && a != 0
        && b != 0
        && b < a
    {
        return Err(JaegerRefusal::bad(
            "'maxDuration' should be greater than 'minDuration'",
        ));
    }
    if from > to {
        return Err(JaegerRefusal::bad("'start' should not be after 'end'"));
    }
    Ok(SearchRequest::Search(reads::Search {
        service: service.to_owned(),
        operation: param(p, "operation").map(str::to_owned),
        tags,
        min_duration_ns: min.filter(|d| *d > 0),
        max_duration_ns: max.filter(|d| *d > 0),
        from,
        to,
        limit,
    }))
}

async fn search(
    State(state): State<Arc<AnalysisApi>>,
    headers: HeaderMap,
    query: Result<Query<Params>, QueryRejection>,
) -> Result<Response, JaegerRefusal> {
    gate(&state, &headers)?;
    let p = pairs(query)?;
    let ctx = state.sql.context();
    let (ids, asked) = match search_request(&p, now_unix_nano())? {
        SearchRequest::Search(s) => (reads::search_ids(ctx, &s).await?, false),
        SearchRequest::Ids(ids) => (ids, true),
    };
    let rows = reads::trace_rows(ctx, &ids, None).await?;
    let traces = convert::traces(&rows, &ids)?;
    // Asked by id: the ids not stored are errors beside the traces found, as in Jaeger.
    let missing: Vec<JaegerError> = if asked {
        ids.iter()
            .filter(|id| !traces.iter().any(|t| &t.trace_id == *id))
            .map(|id| JaegerError {
                code: StatusCode::NOT_FOUND.as_u16(),
                msg: "trace not found".into(),
                trace_id: Some(id.clone()),
            })
            .collect()
    } else {
        Vec::new()
    };
    let n = traces.len();
    let mut body = Envelope::ok(traces, n);
    if !missing.is_empty() {
        body.errors = Some(missing);
    }
    Ok(axum::Json(body).into_response())
}

async fn trace(
    State(state): State<Arc<AnalysisApi>>,
    headers: HeaderMap,
    Path(trace_id): Path<String>,
) -> Result<Response, JaegerRefusal> {
    gate(&state, &headers)?;
    let id = parse_trace_id(&trace_id).map_err(JaegerRefusal::bad)?;
    // In a cluster, every node's rows of the trace (as `/api/v1/traces/{id}` reads them).
    let (ctx, _unheard) = state.trace_session(&id).await?;
    let ids = [id];
    // At most `[trace_view] max_spans` spans, as the trace view's page: one more is read to
    // tell a longer trace, which is cut and says so in its warnings.
    let max = state.trace_views.max_spans();
    let mut rows = reads::trace_rows(&ctx, &ids, Some(max.saturating_add(1))).await?;
    let read: usize = rows.iter().map(RecordBatch::num_rows).sum();
    if read > max {
        keep_first(&mut rows, max);
    }
    let mut traces = convert::traces(&rows, &ids)?;
    let Some(t) = traces.first_mut() else {
        return Err(JaegerRefusal::new(StatusCode::NOT_FOUND, "trace not found"));
    };
    if read > max {
        t.warnings = Some(vec![format!(
            "Dyeline shows the first {max} spans of this trace by start ([trace_view] \
             max_spans); GET /api/v1/traces/{}?offset={max} pages through the rest",
            t.trace_id
        )]);
    }
    Ok(ok(traces, 1))
}

/// `batches` cut to their first `n` rows.
fn keep_first(batches: &mut Vec<RecordBatch>, n: usize) {
    let mut left = n;
    for b in batches.iter_mut() {
        let take = b.num_rows().min(left);
        *b = b.slice(0, take);
        left -= take;
    }
    batches.retain(|b| b.num_rows() > 0);
}

async fn dependencies(
    State(state): State<Arc<AnalysisApi>>,
    headers: HeaderMap,
    query: Result<Query<Params>, QueryRejection>,
) -> Result<Response, JaegerRefusal> {
    gate(&state, &headers)?;
    let p = pairs(query)?;
    let (from, to) = dependency_window(&p, now_unix_nano())?;
    let links = reads::dependencies(state.sql.context(), from, to).await?;
    let n = links.len();
    Ok(ok(links, n))
}

/// `[endTs − lookback, endTs]` in Unix ns: `endTs` in Unix ms (default now), `lookback` in ms
/// (default 24 hours), as Jaeger's `parseDependenciesQueryParams`.
fn dependency_window(p: &Params, now: i64) -> Result<(i64, i64), JaegerRefusal> {
    let to = match param(p, "endTs") {
        Some(t) => parse_unix("endTs", t, 1_000_000).map_err(JaegerRefusal::bad)?,
        None => now,
    };
    let lookback_ms = match param(p, "lookback") {
        Some(l) => l
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|l| *l > 0)
            .ok_or_else(|| {
                JaegerRefusal::bad(format!(
                    "unable to parse param 'lookback': {l:?} is not a whole number of ms > 0"
                ))
            })?,
        None => DEFAULT_DEPENDENCY_LOOKBACK_MS,
    };
    let lookback = lookback_ms.checked_mul(1_000_000).ok_or_else(|| {
        JaegerRefusal::bad(format!(
            "unable to parse param 'lookback': {lookback_ms} is too long"
        ))
    })?;
    Ok((to.saturating_sub(lookback), to))
}
