//! The control plane's HTTP routes under `/api/v1` (issue: control plane, items 1–5; the lane
//! group routes are [`lane_groups`]'s), with their OpenAPI description collected by utoipa from
//! the same handlers, so the document and the routes cannot drift apart. Errors are
//! `{"error": {"code", "message"}}`.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
pub use dyeline_model::error_body::{ErrorBody, ErrorDetail};
use dyeline_model::release::{Channel, Effective, Op, ReleaseError, TimelineDoc};
use dyeline_model::time::parse_time;
use dyeline_model::weights::{Weights, count_aware_weights, weights};
use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;
use utoipa::{IntoParams, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{Access, Auth};
use crate::error::ControlError;
use crate::plane::{ControlPlane, Cursor, Event, WriteOutcome, normalize_note};

pub mod gate;
pub mod lane_groups;

/// What the control routes share.
pub struct ControlApi {
    /// The control plane.
    pub plane: Arc<ControlPlane>,
    /// The token check.
    pub auth: Arc<Auth>,
    /// Registry weight updates of an app's instances are spread over this long; each
    /// instance's delay is a hash of its id within it (domain §5).
    pub apply_spread: Duration,
    /// Becomes true at shutdown: open event streams end.
    pub shutdown: watch::Receiver<bool>,
    /// The release gate's settings (`[gate]`).
    pub gate: gate::GateSettings,
}

type Ctx = State<Arc<ControlApi>>;

/// The OpenAPI document's fixed parts.
#[derive(OpenApi)]
#[openapi(
    info(title = "Dyeline API", description = "Release channels, ratios, weights, event streams and the timeline of a blue-green release (docs/domain.md §4–5), and the lane groups of gray lanes (§7.1)."),
    components(schemas(ErrorBody, ErrorDetail)),
    modifiers(&BearerAuth)
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The control routes with their OpenAPI paths, state applied.
pub fn router(ctx: Arc<ControlApi>) -> OpenApiRouter {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(list_channels))
        .routes(routes!(get_channel, put_channel, delete_channel))
        .routes(routes!(start_channel))
        .routes(routes!(ratio_channel))
        .routes(routes!(finish_channel))
        .routes(routes!(channel_weights))
        .routes(routes!(channel_events))
        .routes(routes!(channel_events_stream))
        .routes(routes!(app_effective))
        .routes(routes!(app_events))
        .routes(routes!(app_events_stream))
        .routes(routes!(timeline))
        .routes(routes!(gate::channel_gate, gate::channel_gate_post))
        .routes(routes!(gate::lane_group_gate, gate::lane_group_gate_post))
        .routes(routes!(lane_groups::list_lane_groups))
        .routes(routes!(
            lane_groups::get_lane_group,
            lane_groups::put_lane_group,
            lane_groups::delete_lane_group
        ))
        .with_state(ctx)
}

/// `{"channels": [...]}`.
#[derive(Serialize, ToSchema)]
pub struct ChannelList {
    /// Every channel, `global` first.
    pub channels: Vec<Channel>,
}

/// Lists the channels.
#[utoipa::path(get, path = "/api/v1/channels", tag = "channels",
    responses((status = 200, body = ChannelList), (status = 401, body = ErrorBody)))]
async fn list_channels(State(ctx): Ctx, headers: HeaderMap) -> Result<Response, ControlError> {
    ctx.auth.authorize(&headers, Access::Read)?;
    Ok(Json(ChannelList {
        channels: ctx.plane.channels(),
    })
    .into_response())
}

/// `response` with `ETag: "<version>"` when there is a version (a channel's or a lane
/// group's).
fn with_etag(mut response: Response, version: Option<u64>) -> Response {
    if let Some(version) = version
        && let Ok(v) = HeaderValue::from_str(&format!("\"{version}\""))
    {
        response.headers_mut().insert(header::ETAG, v);
    }
    response
}

/// One channel; its `ETag` is `"<version>"`.
#[utoipa::path(get, path = "/api/v1/channels/{id}", tag = "channels",
    params(("id" = String, Path, description = "Channel id")),
    responses((status = 200, body = Channel), (status = 404, body = ErrorBody)))]
async fn get_channel(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ControlError> {
    ctx.auth.authorize(&headers, Access::Read)?;
    let c = ctx.plane.channel(&id)?;
    Ok(with_etag(Json(&c).into_response(), Some(c.version)))
}

/// `If-Match: "<version>"` → the version; absent or `*` → no check.
fn if_match(headers: &HeaderMap) -> Result<Option<u64>, ControlError> {
    let Some(v) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    let text = v.to_str().unwrap_or("").trim();
    if text == "*" {
        return Ok(None);
    }
    let inner = text.strip_prefix("W/").unwrap_or(text).trim_matches('"');
    inner
        .parse()
        .map(Some)
        .map_err(|_| ControlError::InvalidIfMatch(text.to_owned()))
}

/// Authorizes a write, then reads the request (`op`: the operation, its optional note and
/// whether it overrides the spike guard) and hands it to the plane.
async fn write(
    ctx: &ControlApi,
    headers: &HeaderMap,
    id: &str,
    op: impl FnOnce() -> Result<(Op, Option<String>, bool), ControlError>,
    status: StatusCode,
) -> Result<Response, ControlError> {
    let (actor, if_match) = writer(ctx, headers)?;
    let (op, note, force) = op()?;
    let out: WriteOutcome = ctx
        .plane
        .write_with(id, op, &actor, if_match, note.as_deref(), force)
        .await?;
    let version = out.channel.as_ref().map(|c| c.version);
    Ok(with_etag((status, Json(out)).into_response(), version))
}

/// Authorizes a write: the token's name (the actor) and the `If-Match` version, if any.
fn writer(ctx: &ControlApi, headers: &HeaderMap) -> Result<(String, Option<u64>), ControlError> {
    let actor = ctx
        .auth
        .authorize(headers, Access::Write)?
        .ok_or(ControlError::Unauthorized("writes need a token"))?;
    Ok((actor, if_match(headers)?))
}

fn json_object(body: &[u8], shape: &str) -> Result<serde_json::Map<String, Value>, ControlError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ControlError::InvalidBody(format!(
            "missing body: expected {shape}"
        )));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ControlError::InvalidBody(format!(
            "expected a JSON object {shape}"
        ))),
        Err(e) => Err(ControlError::InvalidBody(format!(
            "body is not JSON ({e}); expected {shape}"
        ))),
    }
}

/// Body of `PUT /api/v1/channels/{id}`.
#[derive(Deserialize, ToSchema)]
pub struct PutChannel {
    /// App names (`service.name`); each may be in one local channel only.
    pub apps: Vec<String>,
}

/// Creates a channel or sets its apps (only while idle; 409 if an app is in another local
/// channel). 201 when created.
#[utoipa::path(put, path = "/api/v1/channels/{id}", tag = "channels", request_body = PutChannel,
    params(("id" = String, Path, description = "Channel id, [a-z0-9][a-z0-9-]{0,62}"),
           ("If-Match" = Option<String>, Header, description = "\"<version>\"; 412 if stale")),
    security(("bearer" = [])),
    responses((status = 200, body = WriteOutcome), (status = 201, body = WriteOutcome),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 409, body = ErrorBody), (status = 412, body = ErrorBody)))]
async fn put_channel(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ControlError> {
    let exists = ctx.plane.channel(&id).is_ok();
    let status = if exists {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    write(
        &ctx,
        &headers,
        &id,
        || {
            let shape = "{\"apps\": [\"app\", ...]}";
            let mut m = json_object(&body, shape)?;
            if let Some(k) = m.keys().find(|k| *k != "apps") {
                return Err(ControlError::InvalidBody(format!(
                    "unknown field {k:?}; expected {shape}"
                )));
            }
            let apps = m.remove("apps").ok_or_else(|| {
                ReleaseError::InvalidApps(format!("apps is missing; expected {shape}"))
            })?;
            let apps: Vec<String> = serde_json::from_value(apps)
                .map_err(|_| ReleaseError::InvalidApps("apps must be a list of strings".into()))?;
            Ok((Op::Apps(apps), None, false))
        },
        status,
    )
    .await
}

/// Deletes an idle local channel.
#[utoipa::path(delete, path = "/api/v1/channels/{id}", tag = "channels",
    params(("id" = String, Path, description = "Channel id"),
           ("If-Match" = Option<String>, Header, description = "\"<version>\"; 412 if stale")),
    security(("bearer" = [])),
    responses((status = 200, body = WriteOutcome), (status = 404, body = ErrorBody),
              (status = 409, body = ErrorBody), (status = 412, body = ErrorBody)))]
async fn delete_channel(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ControlError> {
    write(
        &ctx,
        &headers,
        &id,
        || Ok((Op::Delete, None, false)),
        StatusCode::OK,
    )
    .await
}

/// Optional body of `POST /api/v1/channels/{id}/start` and `.../finish`:
/// `{"note": "..."}` (finish also takes `"force": true`, see there). No body at all is the
/// same as no note.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, ToSchema)]
pub struct NoteBody {
    /// Free text recorded with the operation and shown on its events (`note`): trimmed,
    /// empty → none, at most 500 characters (else 400 `invalid_note`).
    #[serde(default)]
    #[schema(max_length = 500)]
    pub note: Option<String>,
}

/// The optional `note` of a request body object: absent or `null` → `None`; a string →
/// normalized by [`crate::plane::normalize_note`] (trimmed, empty → `None`).
///
/// # Errors
/// [`ControlError::InvalidNote`] for a note that is not a string or is longer than
/// [`crate::plane::NOTE_MAX_CHARS`] characters.
fn note_field(m: &serde_json::Map<String, Value>) -> Result<Option<String>, ControlError> {
    match m.get("note") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => normalize_note(Some(text)),
        Some(other) => Err(ControlError::InvalidNote(format!(
            "note must be a JSON string, not {other}"
        ))),
    }
}

/// Reads the optional body of start and finish: empty (or only whitespace) → no note; else
/// a JSON object `{"note": "..."}` whose `note` may be absent or `null` (other keys are
/// ignored). The note comes back normalized (trimmed, empty → `None`).
///
/// # Errors
/// [`ControlError::InvalidBody`] for a body that is not a JSON object;
/// [`ControlError::InvalidNote`] for a note that is not a string or is longer than
/// [`crate::plane::NOTE_MAX_CHARS`] characters.
pub fn parse_note_body(body: &[u8]) -> Result<Option<String>, ControlError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let m = json_object(body, "{\"note\": \"...\"} or no body")?;
    note_field(&m)
}

/// Reads the optional body of finish: as [`parse_note_body`], plus `"force": true` to finish
/// although the spike guard refuses (a finish from 100 or 0 moves traffic back to the other
/// colour).
///
/// # Errors
/// Those of [`parse_note_body`]; [`ControlError::InvalidBody`] for a `force` that is not a
/// JSON boolean.
pub fn parse_finish_body(body: &[u8]) -> Result<(Option<String>, bool), ControlError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok((None, false));
    }
    let m = json_object(body, "{\"note\": \"...\", \"force\": false} or no body")?;
    Ok((note_field(&m)?, force_field(&m)?))
}

/// The optional `force` of a request body object: absent or `null` → false.
///
/// # Errors
/// [`ControlError::InvalidBody`] for a value that is not a JSON boolean.
fn force_field(m: &serde_json::Map<String, Value>) -> Result<bool, ControlError> {
    match m.get("force") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(ControlError::InvalidBody(format!(
            "force must be a JSON boolean, not {other}"
        ))),
    }
}

/// Starts a release (blue_percent 50); 409 if already releasing. Optional body
/// `{"note": "..."}`.
#[utoipa::path(post, path = "/api/v1/channels/{id}/start", tag = "channels",
    request_body(content = Option<NoteBody>, description = "Optional: a note recorded with the operation"),
    params(("id" = String, Path, description = "Channel id"),
           ("If-Match" = Option<String>, Header, description = "\"<version>\"; 412 if stale")),
    security(("bearer" = [])),
    responses((status = 200, body = WriteOutcome), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
              (status = 412, body = ErrorBody)))]
async fn start_channel(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ControlError> {
    write(
        &ctx,
        &headers,
        &id,
        || Ok((Op::Start, parse_note_body(&body)?, false)),
        StatusCode::OK,
    )
    .await
}

/// Finishes a release (blue_percent back to 50); 409 if idle, or (`spike_guard`, the alert in
/// the body) when that moves traffic toward a colour whose one-sided error spike fires,
/// unless `"force": true`. Optional body `{"note": "...", "force": false}`.
#[utoipa::path(post, path = "/api/v1/channels/{id}/finish", tag = "channels",
    request_body(content = Option<NoteBody>, description = "Optional: a note recorded with the operation"),
    params(("id" = String, Path, description = "Channel id"),
           ("If-Match" = Option<String>, Header, description = "\"<version>\"; 412 if stale")),
    security(("bearer" = [])),
    responses((status = 200, body = WriteOutcome), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
              (status = 412, body = ErrorBody)))]
async fn finish_channel(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ControlError> {
    write(
        &ctx,
        &headers,
        &id,
        || {
            let (note, force) = parse_finish_body(&body)?;
            Ok((Op::Finish, note, force))
        },
        StatusCode::OK,
    )
    .await
}

/// Body of `POST /api/v1/channels/{id}/ratio`: `{"blue_percent": 0..=100, "note": "..."}`
/// (`note` optional).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, ToSchema)]
pub struct RatioBody {
    /// Integer 0..=100.
    pub blue_percent: u8,
    /// Optional free text recorded with the operation and shown on its events (`note`):
    /// trimmed, empty → none, at most 500 characters (else 400 `invalid_note`).
    #[serde(default)]
    #[schema(max_length = 500)]
    pub note: Option<String>,
    /// Go ahead although the spike guard refuses (domain §4): recorded with the actor, the
    /// note naming the alert. Default false.
    #[serde(default)]
    pub force: bool,
}

/// Reads `{"blue_percent": N, "note": "...", "force": false}`: N must be a JSON integer in 0..=100 (domain
/// §4); `note` is optional (absent or `null`: none; a string comes back trimmed, empty →
/// `None`). Other keys are ignored.
///
/// # Errors
/// [`ControlError::InvalidBody`] for a missing or non-object body;
/// [`ReleaseError::InvalidBluePercent`] for a missing, fractional, textual or out-of-range
/// value (checked first); [`ControlError::InvalidNote`] for a note that is not a string or
/// is longer than [`crate::plane::NOTE_MAX_CHARS`] characters.
pub fn parse_ratio_body(body: &[u8]) -> Result<RatioBody, ControlError> {
    let shape = "{\"blue_percent\": 0..100}";
    let m = json_object(body, shape)?;
    let blue_percent = match m.get("blue_percent") {
        None => Err(ReleaseError::InvalidBluePercent(format!(
            "blue_percent is missing; expected {shape}"
        ))),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(r @ 0..=100) => Ok(r as u8),
            Some(r) => Err(ReleaseError::InvalidBluePercent(format!(
                "blue_percent {r} is outside 0..=100"
            ))),
            None => Err(ReleaseError::InvalidBluePercent(format!(
                "blue_percent {n} is not an integer 0..=100"
            ))),
        },
        Some(other) => Err(ReleaseError::InvalidBluePercent(format!(
            "blue_percent must be a JSON integer 0..=100, not {other}"
        ))),
    }?;
    Ok(RatioBody {
        blue_percent,
        note: note_field(&m)?,
        force: force_field(&m)?,
    })
}

/// Sets blue_percent while releasing; equal to the current value: accepted, no events. An
/// optional `note` is recorded with the operation and shown on its events. A change toward
/// the colour whose one-sided error spike fires for the channel is refused (409
/// `spike_guard`, the alert in `error.alert`) unless `"force": true`, which is recorded.
#[utoipa::path(post, path = "/api/v1/channels/{id}/ratio", tag = "channels", request_body = RatioBody,
    params(("id" = String, Path, description = "Channel id"),
           ("If-Match" = Option<String>, Header, description = "\"<version>\"; 412 if stale")),
    security(("bearer" = [])),
    responses((status = 200, body = WriteOutcome), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
              (status = 412, body = ErrorBody)))]
async fn ratio_channel(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ControlError> {
    write(
        &ctx,
        &headers,
        &id,
        || parse_ratio_body(&body).map(|b| (Op::Ratio(b.blue_percent), b.note, b.force)),
        StatusCode::OK,
    )
    .await
}

/// The weights answer (domain §5).
#[derive(Serialize, ToSchema)]
pub struct WeightsAnswer {
    /// Channel id.
    pub channel: String,
    /// Its blue_percent now (50 while idle).
    pub blue_percent: u8,
    /// Integer weight of each blue instance (count-aware when counts are given).
    pub blue_weight: u32,
    /// Integer weight of each green instance (count-aware when counts are given).
    pub green_weight: u32,
    /// Unrounded blue weight.
    pub blue_weight_exact: f64,
    /// Unrounded green weight.
    pub green_weight_exact: f64,
    /// Given blue instance count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blue_instances: Option<u32>,
    /// Given green instance count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub green_instances: Option<u32>,
    /// The blue share the plain (one-to-one) weights really give with these counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plain_weights_implied_blue_share: Option<f64>,
    /// Given instance id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// That instance's registry update delay, ms: a hash of its id within the configured
    /// spread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apply_delay_ms: Option<u64>,
}

/// Query of the weights route.
#[derive(Deserialize, IntoParams)]
pub struct WeightsQuery {
    /// Blue instance count (with `green_instances`: count-aware weights).
    pub blue_instances: Option<u32>,
    /// Green instance count.
    pub green_instances: Option<u32>,
    /// An instance id: adds its apply delay.
    pub instance: Option<String>,
}

/// The delay before instance `instance_id` applies new weights: FNV-1a of the id modulo
/// `spread` (domain §5: updates are spread out to avoid a request spike). Stable across
/// processes and versions.
pub fn apply_delay(instance_id: &str, spread: Duration) -> Duration {
    use std::hash::Hasher;
    let ms = spread.as_millis() as u64;
    if ms == 0 {
        return Duration::ZERO;
    }
    let mut h = fnv::FnvHasher::default();
    h.write(instance_id.as_bytes());
    Duration::from_millis(h.finish() % ms)
}

/// Instance weights for the channel's blue_percent (domain §5).
#[utoipa::path(get, path = "/api/v1/channels/{id}/weights", tag = "channels",
    params(("id" = String, Path, description = "Channel id"), WeightsQuery),
    responses((status = 200, body = WeightsAnswer), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
async fn channel_weights(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    query: Result<Query<WeightsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ControlError> {
    ctx.auth.authorize(&headers, Access::Read)?;
    let Query(q) = query.map_err(|e| ControlError::InvalidQuery(e.body_text()))?;
    let c = ctx.plane.channel(&id)?;
    let r = c.blue_percent;
    let counts = match (q.blue_instances, q.green_instances) {
        (Some(b), Some(g)) => Some((b, g)),
        (None, None) => None,
        _ => {
            return Err(ControlError::InvalidQuery(
                "give both blue_instances and green_instances, or neither".into(),
            ));
        }
    };
    let plain = weights(r).map_err(|e| ControlError::Storage(e.to_string()))?;
    let (w, implied): (Weights, Option<f64>) = match counts {
        None => (plain, None),
        Some((b, g)) => (
            count_aware_weights(r, b, g).map_err(|e| ControlError::Storage(e.to_string()))?,
            Some(plain.implied_blue_share(b, g)),
        ),
    };
    let delay = q
        .instance
        .as_deref()
        .map(|i| apply_delay(i, ctx.apply_spread).as_millis() as u64);
    Ok(Json(WeightsAnswer {
        channel: c.id.to_string(),
        blue_percent: r,
        blue_weight: w.blue_weight,
        green_weight: w.green_weight,
        blue_weight_exact: w.blue_weight_exact,
        green_weight_exact: w.green_weight_exact,
        blue_instances: counts.map(|c| c.0),
        green_instances: counts.map(|c| c.1),
        plain_weights_implied_blue_share: implied,
        instance: q.instance,
        apply_delay_ms: delay,
    })
    .into_response())
}

/// `{"events": [...]}`.
#[derive(Serialize, ToSchema)]
pub struct EventList {
    /// Events in order.
    pub events: Vec<Event>,
}

/// Query of the event routes.
#[derive(Deserialize, IntoParams)]
pub struct EventsQuery {
    /// Only events after this operation sequence number (or event id `seq.n`).
    pub after: Option<String>,
}

fn cursor(q: &EventsQuery, headers: &HeaderMap) -> Result<Cursor, ControlError> {
    if let Some(last) = headers.get("last-event-id") {
        return last
            .to_str()
            .map_err(|_| ControlError::InvalidQuery("Last-Event-ID is not text".into()))?
            .parse();
    }
    match &q.after {
        None => Ok(Cursor::default()),
        Some(a) => a.parse(),
    }
}

/// The channel's own stream: start, finish, flow changes and their derived events.
#[utoipa::path(get, path = "/api/v1/channels/{id}/events", tag = "events",
    params(("id" = String, Path, description = "Channel id"), EventsQuery),
    responses((status = 200, body = EventList), (status = 404, body = ErrorBody)))]
async fn channel_events(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<EventsQuery>,
) -> Result<Response, ControlError> {
    ctx.auth.authorize(&headers, Access::Read)?;
    let events = ctx.plane.channel_events(&id, cursor(&q, &headers)?)?;
    Ok(Json(EventList { events }).into_response())
}

/// The app's effective configuration now.
#[derive(Serialize, ToSchema)]
pub struct EffectiveAnswer {
    /// The app.
    pub app: String,
    /// Channel and blue_percent.
    #[serde(flatten)]
    pub effective: Effective,
    /// Plain weights for that blue_percent.
    pub blue_weight: u32,
    /// Plain weights for that blue_percent.
    pub green_weight: u32,
    /// Sequence number of the newest operation seen.
    pub seq: u64,
}

/// The effective channel, blue_percent and weights of any app now (domain §4).
#[utoipa::path(get, path = "/api/v1/apps/{app}/effective", tag = "apps",
    params(("app" = String, Path, description = "App name (service.name)")),
    responses((status = 200, body = EffectiveAnswer)))]
async fn app_effective(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(app): Path<String>,
) -> Result<Response, ControlError> {
    ctx.auth.authorize(&headers, Access::Read)?;
    let seq = ctx.plane.latest_seq();
    let effective = ctx.plane.effective(&app);
    let w = weights(effective.blue_percent).unwrap_or(Weights::EVEN);
    Ok(Json(EffectiveAnswer {
        app,
        effective,
        blue_weight: w.blue_weight,
        green_weight: w.green_weight,
        seq,
    })
    .into_response())
}

/// The app's well-formed event stream (domain §4), all or after `after`.
#[utoipa::path(get, path = "/api/v1/apps/{app}/events", tag = "apps",
    params(("app" = String, Path, description = "App name (service.name)"), EventsQuery),
    responses((status = 200, body = EventList), (status = 400, body = ErrorBody)))]
async fn app_events(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(app): Path<String>,
    Query(q): Query<EventsQuery>,
) -> Result<Response, ControlError> {
    ctx.auth.authorize(&headers, Access::Read)?;
    let events = ctx.plane.app_events(&app, cursor(&q, &headers)?);
    Ok(Json(EventList { events }).into_response())
}

enum Source {
    App(String),
    Channel(String),
}

fn fetch(plane: &ControlPlane, source: &Source, after: Cursor) -> Vec<Event> {
    match source {
        Source::App(app) => plane.app_events(app, after),
        Source::Channel(id) => plane.channel_events(id, after).unwrap_or_default(),
    }
}

fn sse_stream(
    ctx: Arc<ControlApi>,
    source: Source,
    after: Cursor,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let rx = ctx.plane.subscribe();
    let shutdown = ctx.shutdown.clone();
    futures::stream::unfold(
        (ctx, source, after, rx, shutdown, VecDeque::<Event>::new()),
        |(ctx, source, mut after, mut rx, mut shutdown, mut pending)| async move {
            loop {
                if *shutdown.borrow() {
                    return None;
                }
                if let Some(ev) = pending.pop_front() {
                    after = Cursor {
                        seq: ev.seq,
                        n: ev
                            .id
                            .rsplit('.')
                            .next()
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(0),
                    };
                    let sse = SseEvent::default()
                        .id(ev.id.clone())
                        .event(ev.event.as_str())
                        .json_data(&ev)
                        .unwrap_or_default();
                    return Some((Ok(sse), (ctx, source, after, rx, shutdown, pending)));
                }
                // Mark the current version seen before reading, so a write landing between
                // the read and the wait wakes us.
                rx.borrow_and_update();
                pending.extend(fetch(&ctx.plane, &source, after));
                if pending.is_empty() {
                    tokio::select! {
                        changed = rx.changed() => if changed.is_err() { return None },
                        _ = shutdown.changed() => return None,
                    }
                }
            }
        },
    )
}

/// The app's events as server-sent events (SSE `id` = event id; resumes after
/// `Last-Event-ID` or `after`, from the start otherwise).
#[utoipa::path(get, path = "/api/v1/apps/{app}/events/stream", tag = "apps",
    params(("app" = String, Path, description = "App name (service.name)"), EventsQuery,
           ("Last-Event-ID" = Option<String>, Header, description = "Resume after this event id")),
    responses((status = 200, description = "text/event-stream of events", content_type = "text/event-stream")))]
async fn app_events_stream(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(app): Path<String>,
    Query(q): Query<EventsQuery>,
) -> Result<Response, ControlError> {
    ctx.auth.authorize(&headers, Access::Read)?;
    let after = cursor(&q, &headers)?;
    Ok(Sse::new(sse_stream(ctx, Source::App(app), after))
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// The channel's events as server-sent events.
#[utoipa::path(get, path = "/api/v1/channels/{id}/events/stream", tag = "events",
    params(("id" = String, Path, description = "Channel id"), EventsQuery,
           ("Last-Event-ID" = Option<String>, Header, description = "Resume after this event id")),
    responses((status = 200, description = "text/event-stream of events", content_type = "text/event-stream"),
              (status = 404, body = ErrorBody)))]
async fn channel_events_stream(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<EventsQuery>,
) -> Result<Response, ControlError> {
    ctx.auth.authorize(&headers, Access::Read)?;
    let after = cursor(&q, &headers)?;
    ctx.plane.channel_events(&id, after)?;
    Ok(Sse::new(sse_stream(ctx, Source::Channel(id), after))
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// Query of the timeline route.
#[derive(Deserialize, IntoParams)]
pub struct TimelineQuery {
    /// From this time (RFC 3339 or Unix ns), inclusive.
    pub from: Option<String>,
    /// To this time, inclusive.
    pub to: Option<String>,
}

/// Every operation in time order, in the format of the fixtures' timeline.json.
#[utoipa::path(get, path = "/api/v1/timeline", tag = "timeline", params(TimelineQuery),
    responses((status = 200, body = TimelineDoc), (status = 400, body = ErrorBody)))]
async fn timeline(
    State(ctx): Ctx,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, ControlError> {
    ctx.auth.authorize(&headers, Access::Read)?;
    let from = q.get("from").map(|s| parse_time(s)).transpose()?;
    let to = q.get("to").map(|s| parse_time(s)).transpose()?;
    Ok(Json(ctx.plane.timeline_doc(from, to)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_bodies_are_validated_as_domain_4_says() {
        let ok = |b: &[u8]| parse_ratio_body(b).unwrap();
        assert_eq!(ok(br#"{"blue_percent": 0}"#).blue_percent, 0);
        assert_eq!(ok(br#"{"blue_percent": 100}"#).blue_percent, 100);
        assert_eq!(ok(br#"{"blue_percent": 100}"#).note, None);
        for bad in [
            &br#"{"blue_percent": 101}"#[..],
            br#"{"blue_percent": -1}"#,
            br#"{"blue_percent": 50.5}"#,
            br#"{"blue_percent": "50"}"#,
            br#"{"blue_percent": null}"#,
            br#"{}"#,
        ] {
            let e = parse_ratio_body(bad).unwrap_err();
            assert_eq!(
                e.code(),
                "invalid_blue_percent",
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(parse_ratio_body(b"").unwrap_err().code(), "invalid_body");
        assert_eq!(
            parse_ratio_body(b"[50]").unwrap_err().code(),
            "invalid_body"
        );
        assert_eq!(parse_ratio_body(b"{50").unwrap_err().code(), "invalid_body");
        assert_eq!(
            parse_ratio_body(b"").unwrap_err().to_string(),
            "missing body: expected {\"blue_percent\": 0..100}"
        );
    }

    #[test]
    fn notes_are_read_from_ratio_start_and_finish_bodies() {
        let ratio = |b: &str| parse_ratio_body(b.as_bytes());
        assert_eq!(
            ratio(r#"{"blue_percent": 10, "note": "  override: test \n"}"#).unwrap(),
            RatioBody {
                blue_percent: 10,
                note: Some("override: test".into()),
                force: false,
            }
        );
        for none in [
            r#"{"blue_percent": 10, "note": null}"#,
            r#"{"blue_percent": 10, "note": "   "}"#,
        ] {
            assert_eq!(ratio(none).unwrap().note, None, "{none}");
        }
        let at_limit = format!(r#"{{"blue_percent": 10, "note": "{}"}}"#, "é".repeat(500));
        assert_eq!(ratio(&at_limit).unwrap().note.unwrap().chars().count(), 500);
        let over = format!(r#"{{"blue_percent": 10, "note": "{}"}}"#, "x".repeat(501));
        assert_eq!(ratio(&over).unwrap_err().code(), "invalid_note");
        assert_eq!(
            ratio(r#"{"blue_percent": 10, "note": 7}"#)
                .unwrap_err()
                .code(),
            "invalid_note"
        );
        // blue_percent is judged before the note
        assert_eq!(
            ratio(r#"{"blue_percent": 101, "note": 7}"#)
                .unwrap_err()
                .code(),
            "invalid_blue_percent"
        );

        assert_eq!(parse_note_body(b"").unwrap(), None);
        assert_eq!(parse_note_body(b" \n").unwrap(), None);
        assert_eq!(parse_note_body(b"{}").unwrap(), None);
        assert_eq!(
            parse_note_body(br#"{"note": " why "}"#).unwrap().as_deref(),
            Some("why")
        );
        assert_eq!(parse_note_body(b"[1]").unwrap_err().code(), "invalid_body");
        assert_eq!(parse_note_body(b"note").unwrap_err().code(), "invalid_body");
        assert_eq!(
            parse_note_body(br#"{"note": ["x"]}"#).unwrap_err().code(),
            "invalid_note"
        );
    }

    #[test]
    fn apply_delays_are_stable_and_inside_the_spread() {
        let spread = Duration::from_secs(10);
        let a = apply_delay("order-blue-1", spread);
        assert_eq!(a, apply_delay("order-blue-1", spread));
        assert!(a < spread);
        let distinct: std::collections::HashSet<_> = (0..50)
            .map(|i| apply_delay(&format!("i-{i}"), spread))
            .collect();
        assert!(
            distinct.len() > 40,
            "delays should spread out: {}",
            distinct.len()
        );
        assert_eq!(apply_delay("x", Duration::ZERO), Duration::ZERO);
    }
}
