//! The API port: `POST /api/v1/sql`, `GET /metrics` (Prometheus text), `GET /healthz`.
//! API errors are JSON `{"error": {"code", "message"}}` with a 4xx/5xx status.

use std::sync::Arc;

use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use dyeline_queries::render;
use dyeline_queries::{SqlEngine, SqlError, SqlLimits};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use serde::Deserialize;
use serde_json::json;

/// State of the API routes.
pub struct ApiState {
    /// The SQL session.
    pub sql: SqlEngine,
    /// Its limits.
    pub sql_limits: SqlLimits,
    /// Every registered metric.
    pub registry: Mutex<Registry>,
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

impl From<SqlError> for ApiError {
    fn from(e: SqlError) -> Self {
        let status = match e {
            SqlError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        };
        Self::new(status, e.code(), e.to_string())
    }
}

/// The API router.
pub fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/api/v1/sql", post(sql))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .fallback(|| async {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
        })
        .with_state(state)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SqlRequest {
    sql: String,
}

async fn sql(
    State(state): State<Arc<ApiState>>,
    body: Result<Json<SqlRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
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
