//! The API port's composition: the control routes (`dyeline_control::api`), the analysis
//! routes (`dyeline_queries::http`), the Jaeger query API (`dyeline_queries::jaeger`, under
//! `/jaeger/api`), the server's own `GET /metrics` (Prometheus text) and
//! `GET /healthz`, `GET /livez`, `GET /readyz` (Kubernetes' probes), `GET /api/v1/openapi.json` (the OpenAPI document collected from the same
//! handlers) and the dashboard's pages; and the token check the analysis routes read
//! through. API errors are JSON `{"error": {"code", "message"}}` with a 4xx/5xx status.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use dyeline_control::api::ControlApi;
use dyeline_control::auth::{Access, Auth};
use dyeline_control::{ControlError, ControlPlane};
use dyeline_queries::http::{AnalysisApi, ApiError, ReadGate};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// State of the API routes.
pub struct ApiState {
    /// What the analysis routes share (SQL, analyzer, alerts, rollups, trace views).
    pub analysis: Arc<AnalysisApi>,
    /// Every registered metric.
    pub registry: Mutex<Registry>,
    /// The token check (reads of SQL are open unless `api.read_requires_token`).
    pub auth: Arc<Auth>,
    /// The control plane (its timeline places spans in channels).
    pub plane: Arc<ControlPlane>,
    /// The store (readiness: does it take writes).
    pub store: Arc<dyeline_store::Store>,
}

/// A control-plane refusal as the API's error (its status, code and message).
pub fn control_error(e: ControlError) -> ApiError {
    ApiError::new(e.status(), e.code(), e.to_string())
}

/// The control plane's token check as the analysis routes' read check.
pub struct AuthGate(pub Arc<Auth>);

impl ReadGate for AuthGate {
    fn authorize_read(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        self.0
            .authorize(headers, Access::Read)
            .map(|_| ())
            .map_err(control_error)
    }
}

/// The API port's router: control routes, analysis routes, metrics, health, the OpenAPI
/// document, and the dashboard's routes (`ui`).
pub fn router(state: Arc<ApiState>, control: Arc<ControlApi>, ui: Router) -> Router {
    let reads_need_token = state.auth.reads_need_token();
    let analysis_state = Arc::clone(&state.analysis);
    let analysis = dyeline_queries::http::router(Arc::clone(&state.analysis));
    let own = OpenApiRouter::new()
        .routes(routes!(metrics))
        .routes(routes!(healthz))
        .routes(routes!(livez))
        .routes(routes!(readyz))
        .with_state(state);
    let (router, mut doc) = dyeline_control::api::router(control)
        .merge(analysis)
        .merge(own)
        .split_for_parts();
    crate::gate::document(&mut doc, reads_need_token);
    let doc = Arc::new(doc);
    router
        .route(
            "/api/v1/openapi.json",
            get(move || {
                let doc = Arc::clone(&doc);
                async move { Json(doc.as_ref().clone()) }
            }),
        )
        // The Jaeger query API for Grafana's Jaeger data source (`/jaeger/api/...`).
        .merge(dyeline_queries::jaeger::router(Arc::clone(&analysis_state)))
        .fallback(|| async {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
        })
        .merge(ui)
}

/// Liveness, kept for probes written before `/livez`: `ok`.
#[utoipa::path(get, path = "/healthz", tag = "server", responses((status = 200, body = String)))]
async fn healthz() -> &'static str {
    "ok"
}

/// Liveness (Kubernetes' `livenessProbe`): the process answers HTTP. `ok`.
#[utoipa::path(get, path = "/livez", tag = "server", responses((status = 200, body = String)))]
async fn livez() -> &'static str {
    "ok"
}

/// Readiness (Kubernetes' `readinessProbe`): `ok` while the store takes writes: its WAL is
/// replayed (the API listens only after) and neither its rows in memory nor, with shared
/// storage, its local staging are at their bound, nor is it shutting down. Else 503
/// `not_ready` with the reason (`memory_full`, `staging_full`, `closed`): a node that would
/// refuse spans leaves the load balancer's and the gateway's ring until it takes them again.
#[utoipa::path(get, path = "/readyz", tag = "server",
    responses((status = 200, body = String),
              (status = 503, description = "the store refuses writes", body = dyeline_model::error_body::ErrorBody)))]
async fn readyz(State(state): State<Arc<ApiState>>) -> Response {
    match state.store.write_refusal() {
        None => "ok".into_response(),
        Some(reason) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            format!("the store refuses writes: {reason}"),
        )
        .into_response(),
    }
}

/// The server's metrics: OpenMetrics (with exemplars) to a scraper that accepts it, else the
/// Prometheus text format 0.0.4 ([`dyeline_queries::exposition`]).
#[utoipa::path(get, path = "/metrics", tag = "server", responses((status = 200, body = String)))]
async fn metrics(State(state): State<Arc<ApiState>>, headers: HeaderMap) -> Response {
    use dyeline_queries::exposition;
    let mut out = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &state.registry.lock()) {
        return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
            .into_response();
    }
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if exposition::accepts_openmetrics(accept) {
        ([(header::CONTENT_TYPE, exposition::OPENMETRICS)], out).into_response()
    } else {
        (
            [(header::CONTENT_TYPE, exposition::PROMETHEUS_TEXT)],
            exposition::prometheus_text(&out),
        )
            .into_response()
    }
}
