//! The analysis routes under `/api/v1`, with their OpenAPI description collected by utoipa
//! from the same handlers (as `dyeline_control::api` does for the control routes):
//! `POST /api/v1/sql`, `GET /api/v1/findings`, `GET /api/v1/traces/{trace_id}`,
//! `GET /api/v1/traces`, `GET /api/v1/channels/{id}/summary` and `GET /api/v1/alerts`.
//! Errors are JSON `{"error": {"code", "message"}}` with a 4xx/5xx status ([`ApiError`]).
//! The server composes [`router`] with the control routes and checks tokens through the
//! [`ReadGate`] it gives.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use dyeline_model::HasCategory;
use dyeline_model::error_body::ErrorBody;
use dyeline_model::release::ReleaseError;
use dyeline_model::time::{BadTime, now_unix_nano, parse_time};
use dyeline_store::table::SpansTable;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::IntoParams;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::alerts::{AlertState, SharedAlerts};
use crate::analyze::detect::lanes::LaneCounts;
use crate::analyze::{AnalyzeError, AnalyzerConfig, Detection};
use crate::ports::Releases;
use crate::render;
use crate::rollup::SharedRollup;
use crate::sql::{SqlEngine, SqlError, SqlLimits};
use crate::trace_view::TraceViews;
use datafusion::prelude::SessionContext;

/// The read check of the analysis routes (reads are open unless `api.read_requires_token`):
/// the server's token check, given by its wiring.
pub trait ReadGate: Send + Sync {
    /// `Ok` when the request's headers may read.
    ///
    /// # Errors
    /// The refusal to answer with (401, 403).
    fn authorize_read(&self, headers: &HeaderMap) -> Result<(), ApiError>;
}

/// What the analysis routes share.
pub struct AnalysisApi {
    /// The SQL session.
    pub sql: SqlEngine,
    /// Its limits.
    pub sql_limits: SqlLimits,
    /// The token check.
    pub gate: Arc<dyn ReadGate>,
    /// The release state (its timeline places spans in channels).
    pub releases: Arc<dyn Releases>,
    /// Detection thresholds.
    pub analyzer: AnalyzerConfig,
    /// Live alerts.
    pub alerts: SharedAlerts,
    /// Per-minute channel rollups (when the live evaluation runs): the summary API answers
    /// live whole-minute ranges from them.
    pub rollup: Option<SharedRollup>,
    /// The store's `spans` (memory ∪ files): findings of one windowed type are counted
    /// from it as the files are read.
    pub spans: Arc<SpansTable>,
    /// The cap on one trace view (`[trace_view]`) and its counters.
    pub trace_views: TraceViews,
    /// In a cluster: reads that ask the other nodes too ([`crate::cluster_reads`]).
    pub cluster: Option<Arc<crate::cluster_reads::ClusterReads>>,
}

impl AnalysisApi {
    /// The session to read trace `id` in, and the nodes that did not answer for it: in a
    /// cluster every node's rows of it, else the store's session.
    ///
    /// # Errors
    /// [`SqlError::Internal`] when the session cannot be built.
    pub async fn trace_session(&self, id: &str) -> Result<(SessionContext, Vec<String>), SqlError> {
        match &self.cluster {
            Some(c) => {
                let t = c.trace_context(self.sql.context(), id).await?;
                Ok((t.ctx, t.unheard))
            }
            None => Ok((self.sql.context().clone(), Vec::new())),
        }
    }
}

/// An API error: status, code and message.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    /// A new error.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }
}

impl ApiError {
    /// Its HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// Its message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({"error": {"code": self.code, "message": self.message}})),
        )
            .into_response()
    }
}

impl From<BadTime> for ApiError {
    /// 400 `invalid_query`, as the control routes answer it.
    fn from(e: BadTime) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_query", e.to_string())
    }
}

impl ApiError {
    /// An error's answer: the status of its category in the house's one status table
    /// (`dyeline_model::status`), its code and its message.
    fn categorized(e: &(impl HasCategory + std::fmt::Display), code: &'static str) -> Self {
        let status = StatusCode::from_u16(e.category().http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self::new(status, code, e.to_string())
    }
}

impl From<ReleaseError> for ApiError {
    /// Its code and message as the control routes answer them.
    fn from(e: ReleaseError) -> Self {
        Self::categorized(&e, e.code())
    }
}

impl From<AnalyzeError> for ApiError {
    /// As the [`SqlError`] it reads as (a read error is internal).
    fn from(e: AnalyzeError) -> Self {
        SqlError::from(e).into()
    }
}

impl From<SqlError> for ApiError {
    fn from(e: SqlError) -> Self {
        Self::categorized(&e, e.code())
    }
}

/// The analysis routes with their OpenAPI paths, state applied.
pub fn router(api: Arc<AnalysisApi>) -> OpenApiRouter {
    OpenApiRouter::new()
        .routes(routes!(sql))
        .routes(routes!(findings))
        .routes(routes!(trace))
        .routes(routes!(cluster_trace_rows))
        .routes(routes!(alerts))
        .routes(routes!(channel_summary))
        .routes(routes!(search_traces))
        .with_state(api)
}

/// Body of `POST /api/v1/sql`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct SqlRequest {
    /// One read-only statement: SELECT, WITH or EXPLAIN over the `spans` table.
    sql: String,
}

/// Runs one read-only SQL statement: `{"columns": [...], "rows": [[...]], "truncated"}`
/// (row limit and timeout from `sql.*`).
#[utoipa::path(post, path = "/api/v1/sql", tag = "sql", request_body = SqlRequest,
    responses((status = 200, description = "{\"columns\", \"rows\", \"truncated\"}"),
              (status = 400, body = ErrorBody),
              (status = 429, description = "[sql] max_concurrent_queries are running; Retry-After", body = ErrorBody)))]
async fn sql(
    State(state): State<Arc<AnalysisApi>>,
    headers: HeaderMap,
    body: Result<Json<SqlRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    state.gate.authorize_read(&headers)?;
    let Json(req) = body.map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!(
                "expected a JSON body {{\"sql\": \"SELECT …\"}}: {}",
                e.body_text()
            ),
        )
    })?;
    let result = match state.sql.query(&req.sql, state.sql_limits).await {
        Ok(r) => r,
        // Busy: the other queries end within the timeout; a second is a fair first retry.
        Err(e @ SqlError::Busy(_)) => {
            let mut response = ApiError::from(e).into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            return Ok(response);
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Json(json!({
        "columns": result.columns,
        "rows": render::rows(&result.batches),
        "truncated": result.truncated,
    }))
    .into_response())
}

/// The longest range the analysis routes scan in one request (they hold its spans in
/// memory): 24 hours.
pub const MAX_RANGE_NS: i64 = 24 * 3_600_000_000_000;

/// The `[from, to)` of an analysis route (RFC 3339 or Unix ns; `to` defaults to now, `from`
/// to an hour before `to`), refused with 400 `invalid_range` when inverted or longer than
/// [`MAX_RANGE_NS`].
fn range(from: Option<&str>, to: Option<&str>) -> Result<(i64, i64), ApiError> {
    let to = match to {
        Some(t) => parse_time(t)?,
        None => now_unix_nano(),
    };
    let from = match from {
        Some(t) => parse_time(t)?,
        None => to.saturating_sub(3_600_000_000_000),
    };
    if to <= from || to.saturating_sub(from) > MAX_RANGE_NS {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_range",
            "give from < to, at most 24 hours apart (use `dyeline analyze` for longer post-mortems)",
        ));
    }
    Ok((from, to))
}

/// Query of `GET /api/v1/findings`.
#[derive(Deserialize, IntoParams)]
struct FindingsQuery {
    /// Only this channel (lane findings have none and are left out).
    channel: Option<String>,
    /// Only the lane findings of this lane group (`_ungrouped`: of apps in no group; the
    /// findings of §6 have none and are left out).
    lane_group: Option<String>,
    /// Only this type: cross_color_hop, missing_decision, drained_side, ratio_deviation,
    /// instance_skew, error_spike, lane_leak, lane_tag_dropped, lane_pollution,
    /// lane_tag_changed, lane_error_spike.
    #[serde(rename = "type")]
    kind: Option<String>,
    /// Only the spans of this deployment environment (`deployment.environment.name`).
    /// Without it every environment is judged apart and each finding carries its own.
    environment: Option<String>,
    /// Spans starting at or after (RFC 3339 or Unix ns). Default: one hour before `to`.
    from: Option<String>,
    /// Spans starting before. Default: now.
    to: Option<String>,
}

/// The detections of domain §6 and §7 over a time range: `{"findings": [...]}`, each item
/// the `dyeline analyze` JSON item plus its `type` (a lane finding's `group` is its app's lane
/// group at the time judged, `null` for none), and when a lane detection ran
/// `"lane_counts"`: the counted exceptions (`lane_fallback`, `failover`, ...), which are no
/// findings. Each deployment environment is judged apart; a finding of spans that name one
/// carries it as `environment`. With `type` one of the windowed detections of §6.3–6, only that one runs, counted
/// as the files are read (as `dyeline analyze --detections`); with a lane type only the lane
/// rules run.
#[utoipa::path(get, path = "/api/v1/findings", tag = "analysis", params(FindingsQuery),
    responses((status = 200, body = FindingsBody),
              (status = 400, body = ErrorBody)))]
async fn findings(
    State(state): State<Arc<AnalysisApi>>,
    headers: HeaderMap,
    Query(q): Query<FindingsQuery>,
) -> Result<Response, ApiError> {
    state.gate.authorize_read(&headers)?;
    let detections = match q.kind.as_deref() {
        // One type: only its detection runs (a windowed one counted as the files are read).
        Some(k) => vec![k.parse::<Detection>().map_err(|_| {
            let names: Vec<&str> = Detection::ALL.iter().map(|d| d.as_str()).collect();
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!("type {k:?} is not one of {}", names.join(", ")),
            )
        })?],
        None => Detection::ALL.to_vec(),
    };
    let (from, to) = range(q.from.as_deref(), q.to.as_deref())?;
    let timeline = state.releases.timeline();
    let report = crate::analyze::run(
        &state.spans,
        &timeline,
        &state.analyzer,
        (Some(from), Some(to)),
        &detections,
        false,
        &crate::analyze::EnvironmentFilter::of(q.environment.as_deref()),
    )
    .await?;
    let mut out = Vec::new();
    let group = q
        .lane_group
        .as_deref()
        .map(|g| (g != "_ungrouped").then_some(g));
    for f in report.findings() {
        if q.channel.as_deref().is_some_and(|c| f.channel() != Some(c)) {
            continue;
        }
        if group.is_some_and(|g| !f.detection().is_lane() || f.lane_group() != g) {
            continue;
        }
        // The finding's fields and its type, in name order (a JSON object's keys are kept
        // sorted), as this route has always written them.
        let mut item = serde_json::to_value(f).map_err(|e| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
        })?;
        item["type"] = json!(f.detection().as_str());
        out.push(item);
    }
    let lane_counts = report.lane.map(|l| l.counts);
    Ok(Json(FindingsBody {
        findings: out,
        lane_counts,
    })
    .into_response())
}

/// The body of `GET /api/v1/findings`.
#[derive(Serialize, ToSchema)]
struct FindingsBody {
    /// Each finding: its `dyeline analyze` JSON item plus `type` (the detection's name).
    #[schema(value_type = Vec<Object>)]
    findings: Vec<serde_json::Value>,
    /// The lane rules' counted exceptions, when a lane detection ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    lane_counts: Option<LaneCounts>,
}

/// Query of `GET /api/v1/traces/{trace_id}`.
#[derive(Deserialize, IntoParams)]
struct TraceQuery {
    /// Spans to skip from the start of the depth-first order (a later page). Default 0.
    offset: Option<usize>,
    /// Spans to return at most. Default and most: `[trace_view] max_spans` (10000).
    limit: Option<usize>,
}

/// One trace as a flat span tree, depth-first (each span with its `depth`), with app,
/// instance, host, colour, decisions, and the hop and missing-decision markers (domain
/// §6.1–2). One response holds one page: at most `[trace_view] max_spans` spans from
/// `offset`; it says the trace's `span_count`, how many spans it `returned`, how many it
/// `left_out` and the `next_offset`. The id is 32 hex digits in any case.
#[utoipa::path(get, path = "/api/v1/traces/{trace_id}", tag = "analysis",
    params(("trace_id" = String, Path, description = "32 hex digits, any case"), TraceQuery),
    responses((status = 200, body = crate::drilldown::TraceView),
              (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
async fn trace(
    State(state): State<Arc<AnalysisApi>>,
    headers: HeaderMap,
    Path(trace_id): Path<String>,
    query: Result<Query<TraceQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    state.gate.authorize_read(&headers)?;
    let id = crate::drilldown::normalize_trace_id(&trace_id)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_trace_id", e.to_string()))?;
    let invalid = |m: String| ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", m);
    let Query(q) = query.map_err(|e| {
        state.trace_views.refused();
        invalid(format!(
            "offset and limit are whole numbers ≥ 0: {}",
            e.body_text()
        ))
    })?;
    let page = state.trace_views.page(q.offset, q.limit).map_err(invalid)?;
    let timeline = state.releases.timeline();
    let (ctx, unheard) = state.trace_session(&id).await?;
    let view = crate::drilldown::trace(&ctx, &timeline, &state.analyzer.lanes, &id, page).await?;
    match view {
        Some(mut view) => {
            view.nodes_unheard = unheard;
            state.trace_views.served(&view);
            // A page is megabytes of JSON: serialised off the async workers.
            let body = tokio::task::spawn_blocking(move || serde_json::to_vec(&view))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()))
                .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e))?;
            Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
        }
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "trace_not_found",
            format!("no span of trace {id} is stored"),
        )),
    }
}

/// The rows of one trace this node holds itself (its memory, local files and the objects it
/// uploaded), as an Arrow IPC stream of the `spans` schema: what another node of the cluster
/// asks to answer a trace lookup for the whole cluster. 404 `not_a_cluster` on a node
/// without shared storage.
#[utoipa::path(get, path = "/api/v1/cluster/traces/{trace_id}/rows", tag = "cluster",
    params(("trace_id" = String, Path, description = "32 hex digits, any case")),
    responses((status = 200, content_type = "application/vnd.apache.arrow.stream",
               description = "Arrow IPC stream"),
              (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
async fn cluster_trace_rows(
    State(state): State<Arc<AnalysisApi>>,
    headers: HeaderMap,
    Path(trace_id): Path<String>,
) -> Result<Response, ApiError> {
    state.gate.authorize_read(&headers)?;
    let Some(cluster) = &state.cluster else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_a_cluster",
            "this node runs without shared storage: it holds every row itself",
        ));
    };
    let id = crate::drilldown::normalize_trace_id(&trace_id)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_trace_id", e.to_string()))?;
    let body = cluster.own_trace_rows(&id).await?;
    Ok((
        [(header::CONTENT_TYPE, "application/vnd.apache.arrow.stream")],
        body,
    )
        .into_response())
}

/// Query of the channel summary.
#[derive(Deserialize, IntoParams)]
struct SummaryQuery {
    /// From (RFC 3339 or Unix ns). Default: one hour before `to`.
    from: Option<String>,
    /// To. Default: the end of the current minute (no span has started after now, so this is
    /// the same data as "now", on whole minutes).
    to: Option<String>,
    /// Step, e.g. `60s`, `5m`. Default `60s`.
    step: Option<String>,
    /// `true`: always scan the spans, for exact percentiles. By default a live range of whole
    /// minutes (with whole-minute steps) is answered from the server's per-minute rollups,
    /// whose percentiles are estimates within 1 % (the answer's `percentiles` says which).
    exact: Option<bool>,
}

/// Per step and colour: requests, errors, p50/p99 latency, observed blue share against the
/// blue_percent in force, and hop count, for the dashboard.
#[utoipa::path(get, path = "/api/v1/channels/{id}/summary", tag = "analysis",
    params(("id" = String, Path, description = "Channel id"), SummaryQuery),
    responses((status = 200, description = "{\"channel\", \"step_seconds\", \"steps\": [...]}"),
              (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
async fn channel_summary(
    State(state): State<Arc<AnalysisApi>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<SummaryQuery>,
) -> Result<Response, ApiError> {
    state.gate.authorize_read(&headers)?;
    let timeline = state.releases.timeline();
    if !state.releases.has_channel(&id) && !timeline.ops().any(|(_, c, _)| c.as_str() == id) {
        // 404 `channel_not_found`, as the control routes answer it.
        return Err(ReleaseError::ChannelNotFound(id).into());
    }
    let minute_end = {
        let m = crate::rollup::MINUTE_NS;
        let now = now_unix_nano();
        (now.div_euclid(m) + 1) * m
    };
    let to_text = q.to.clone().unwrap_or_else(|| minute_end.to_string());
    let (from, to) = range(q.from.as_deref(), Some(&to_text))?;
    let step = match &q.step {
        None => std::time::Duration::from_secs(60),
        Some(s) => humantime::parse_duration(s).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!("step {s:?}: {e}"),
            )
        })?,
    };
    let step_ns = step.as_nanos() as i64;
    if let Some(s) = (!q.exact.unwrap_or(false))
        .then_some(state.rollup.as_ref())
        .flatten()
        .and_then(|r| r.lock().summary(&timeline, &id, from, to, step_ns))
    {
        return Ok(Json(s).into_response());
    }
    let summary = crate::summary::channel_summary(
        state.sql.context(),
        &timeline,
        &state.analyzer,
        &id,
        from,
        to,
        step_ns,
    )
    .await?;
    Ok(Json(summary).into_response())
}

/// Query of the trace search.
#[derive(Deserialize, IntoParams)]
struct SearchQuery {
    /// A span of an app in this channel.
    channel: Option<String>,
    /// A span of this app.
    app: Option<String>,
    /// A span on this colour: blue, green, unknown.
    color: Option<String>,
    /// true: with an error span; false: without.
    error: Option<bool>,
    /// true: with a cross-colour hop; false: without.
    hop: Option<bool>,
    /// Lasting at least this many ms.
    min_duration_ms: Option<f64>,
    /// A span served by an instance of this lane (`base` included; trimmed, any case).
    lane: Option<String>,
    /// A span carrying this lane tag (`base`: an explicit base tag).
    lane_tag: Option<String>,
    /// A span of an app that was in this lane group at the span's start.
    lane_group: Option<String>,
    /// With a lane finding of this type: lane_leak, lane_tag_dropped, lane_pollution,
    /// lane_tag_changed, or any of them (`any`).
    lane_finding: Option<String>,
    /// A span with this attribute, `key=value`: a span attribute, a resource attribute or
    /// a promoted one (`http.response.status_code=503`, `k8s.pod.name=order-7f`,
    /// `retries=2`); strings match by text, numbers and booleans by their JSON.
    attribute: Option<String>,
    /// From (RFC 3339 or Unix ns). Default: one hour before `to`.
    from: Option<String>,
    /// To. Default: now.
    to: Option<String>,
    /// At most this many (default 100, max 1000).
    limit: Option<usize>,
}

/// Traces of a range matching every filter given, newest first: `{"traces": [...]}`.
#[utoipa::path(get, path = "/api/v1/traces", tag = "analysis", params(SearchQuery),
    responses((status = 200, description = "{\"traces\": [...]}"),
              (status = 400, body = ErrorBody)))]
async fn search_traces(
    State(state): State<Arc<AnalysisApi>>,
    headers: HeaderMap,
    query: Result<Query<SearchQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    state.gate.authorize_read(&headers)?;
    let Query(q) = query
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", e.body_text()))?;
    let (from, to) = range(q.from.as_deref(), q.to.as_deref())?;
    let color = match q.color.as_deref() {
        None => None,
        Some(c) => Some(
            dyeline_model::Color::parse(c)
                .or((c == "unknown").then_some(dyeline_model::Color::Unknown))
                .ok_or_else(|| {
                    ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "invalid_query",
                        format!("color {c:?} is not blue, green or unknown"),
                    )
                })?,
        ),
    };
    let lane_finding = match q.lane_finding.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(f) => Some(crate::search::lane_finding_type(f).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!(
                    "lane_finding {f:?} is not any or one of {}",
                    dyeline_model::Detection::LANE_PER_SPAN
                        .map(|d| d.as_str())
                        .join(", ")
                ),
            )
        })?),
    };
    let tq = crate::search::TraceQuery {
        channel: q.channel,
        app: q.app,
        color,
        error: q.error,
        hop: q.hop,
        min_duration_ms: q.min_duration_ms,
        lane: q.lane.filter(|v| !v.trim().is_empty()),
        lane_tag: q.lane_tag.filter(|v| !v.trim().is_empty()),
        lane_group: q.lane_group.filter(|v| !v.trim().is_empty()),
        lane_finding,
        attribute: q
            .attribute
            .as_deref()
            .filter(|a| !a.trim().is_empty())
            .map(crate::span_detail::AttributeFilter::parse)
            .transpose()
            .map_err(|m| ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", m))?,
        from,
        to,
        limit: q.limit.unwrap_or(100),
    };
    let timeline = state.releases.timeline();
    let traces =
        crate::search::search(state.sql.context(), &timeline, &state.analyzer.lanes, &tq).await?;
    Ok(Json(json!({ "traces": traces })).into_response())
}

/// Query of `GET /api/v1/alerts`.
#[derive(Deserialize, IntoParams)]
struct AlertsQuery {
    /// `firing` or `resolved`; all when absent.
    state: Option<String>,
}

/// Live alerts of this server: `{"alerts": [...]}` with labels, annotations, state and times.
#[utoipa::path(get, path = "/api/v1/alerts", tag = "analysis", params(AlertsQuery),
    responses((status = 200, description = "{\"alerts\": [...]}"),
              (status = 400, body = ErrorBody)))]
async fn alerts(
    State(state): State<Arc<AnalysisApi>>,
    headers: HeaderMap,
    Query(q): Query<AlertsQuery>,
) -> Result<Response, ApiError> {
    state.gate.authorize_read(&headers)?;
    let filter = match q.state.as_deref() {
        None => None,
        Some("firing") => Some(AlertState::Firing),
        Some("resolved") => Some(AlertState::Resolved),
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!("state {other:?} is not firing or resolved"),
            ));
        }
    };
    Ok(Json(json!({ "alerts": state.alerts.lock().list(filter) })).into_response())
}
