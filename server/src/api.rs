//! The API port: the control plane's routes (`dyeline_control::api`), `POST /api/v1/sql`,
//! `GET /metrics` (Prometheus text), `GET /healthz`, and `GET /api/v1/openapi.json`, the
//! OpenAPI document collected from the same handlers. API errors are JSON
//! `{"error": {"code", "message"}}` with a 4xx/5xx status.

use std::sync::Arc;

use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use dyeline_control::ControlError;
use dyeline_control::api::ControlApi;
use dyeline_control::auth::{Access, Auth};
use dyeline_queries::render;
use dyeline_queries::{SqlEngine, SqlError, SqlLimits};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use serde::Deserialize;
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// State of the API routes.
pub struct ApiState {
    /// The SQL session.
    pub sql: SqlEngine,
    /// Its limits.
    pub sql_limits: SqlLimits,
    /// Every registered metric.
    pub registry: Mutex<Registry>,
    /// The token check (reads of SQL are open unless `api.read_requires_token`).
    pub auth: Arc<Auth>,
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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({"error": {"code": self.code, "message": self.message}})),
        )
            .into_response()
    }
}

impl From<ControlError> for ApiError {
    fn from(e: ControlError) -> Self {
        Self::new(e.status(), e.code(), e.to_string())
    }
}

impl From<SqlError> for ApiError {
    fn from(e: SqlError) -> Self {
        let status = match e {
            SqlError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        };
        Self::new(status, e.code(), e.to_string())
    }
}

/// The API router: control routes, SQL, metrics, health and the OpenAPI document.
pub fn router(state: Arc<ApiState>, control: Arc<ControlApi>) -> Router {
    let own = OpenApiRouter::new()
        .routes(routes!(sql))
        .routes(routes!(metrics))
        .routes(routes!(healthz))
        .with_state(state);
    let (router, doc) = dyeline_control::api::router(control)
        .merge(own)
        .split_for_parts();
    let doc = Arc::new(doc);
    router
        .route(
            "/api/v1/openapi.json",
            get(move || {
                let doc = Arc::clone(&doc);
                async move { Json(doc.as_ref().clone()) }
            }),
        )
        .fallback(|| async {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
        })
}

/// Body of `POST /api/v1/sql`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct SqlRequest {
    /// One read-only statement: SELECT, WITH or EXPLAIN over the `spans` table.
    sql: String,
}

/// Liveness: `ok`.
#[utoipa::path(get, path = "/healthz", tag = "server", responses((status = 200, body = String)))]
async fn healthz() -> &'static str {
    "ok"
}

/// Runs one read-only SQL statement: `{"columns": [...], "rows": [[...]], "truncated"}`
/// (row limit and timeout from `sql.*`).
#[utoipa::path(post, path = "/api/v1/sql", tag = "sql", request_body = SqlRequest,
    responses((status = 200, description = "{\"columns\", \"rows\", \"truncated\"}"),
              (status = 400, body = dyeline_control::api::ErrorBody)))]
async fn sql(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
    body: Result<Json<SqlRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    state.auth.authorize(&headers, Access::Read)?;
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
    let result = state.sql.query(&req.sql, state.sql_limits).await?;
    Ok(Json(json!({
        "columns": result.columns,
        "rows": render::rows(&result.batches),
        "truncated": result.truncated,
    }))
    .into_response())
}

/// Prometheus / OpenMetrics text of the server's own counters.
#[utoipa::path(get, path = "/metrics", tag = "server", responses((status = 200, body = String)))]
async fn metrics(State(state): State<Arc<ApiState>>) -> Response {
    let mut out = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &state.registry.lock()) {
        return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
            .into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        out,
    )
        .into_response()
}
