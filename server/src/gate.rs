//! The one authorization check of the API port (issue 23): a middleware wrapped around the
//! whole router `serve` answers with (API, `/metrics`, dashboard pages, `/live`, the fallback),
//! so a route added anywhere is checked without doing anything. Only the paths of [`OPEN`]
//! skip it; they reveal nothing and must stay reachable:
//!
//! - `/healthz` and `/livez` answer `ok` and nothing else, `/readyz` `ok` or why the store
//!   refuses writes (probes carry no token);
//! - `/api/v1/openapi.json` is the same document for every installation (the API's shape is
//!   public; it declares which routes need a token);
//! - `/assets/style.css`, `/assets/live.js` are the dashboard's static files;
//! - `/login` (the sign-in page and form) and `/logout` (CSRF-checked; only clears a cookie).
//!
//! Every other request goes through [`Auth::check`], the same check the API handlers make:
//! reads need a token when `api.read_requires_token` (including `/metrics`: its counters name
//! channels, apps and hosts, and Prometheus sends `authorization: {credentials: …}`), and every
//! request other than GET/HEAD/OPTIONS needs a valid token always (besides the read-only
//! `POST /api/v1/sql`); the handlers still tell write tokens from read tokens (403). The API and
//! `/metrics` take the bearer header only; dashboard pages and `/live` also take the sign-in
//! cookie, whose value is a token checked the same way. Without a valid token a page redirects
//! to `/login?next=…`, the rest answer 401.
//!
//! Failed credentials (a wrong bearer token or cookie, a failed sign-in) are counted per client
//! and in total ([`Throttle`], `[api.throttle]`); over a limit, requests carrying a credential
//! get 429 with `Retry-After` without it being checked. `dyeline_auth_failures_total{reason}`
//! counts every refusal. Owns the classification of paths, the refusals and the OpenAPI
//! security declarations ([`document`]); the check itself is `dyeline_control::auth`'s.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use dyeline_control::ControlError;
use dyeline_control::auth::{self, Access, Auth};
use dyeline_control::throttle::{Blocked, Throttle, ThrottleLimits};
use dyeline_ui::session;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde_json::json;

/// Paths answered without any check (see the module doc for why each).
pub const OPEN: [&str; 8] = [
    "/healthz",
    "/livez",
    "/readyz",
    "/api/v1/openapi.json",
    "/assets/style.css",
    "/assets/live.js",
    "/login",
    "/logout",
];

/// Requests other than GET/HEAD/OPTIONS that only read (a token is needed only when reads
/// need one), besides the release gates ([`is_read_post`]).
pub const READ_POSTS: [&str; 1] = ["/api/v1/sql"];

/// Whether a POST to `path` only reads: [`READ_POSTS`], and the release gates
/// (`/api/v1/channels/{id}/gate`, `/api/v1/lane-groups/{id}/gate`), which a Flagger webhook
/// POSTs to without a way to send a token.
pub fn is_read_post(path: &str) -> bool {
    if READ_POSTS.contains(&path) {
        return true;
    }
    ["/api/v1/channels/", "/api/v1/lane-groups/"]
        .iter()
        .any(|prefix| {
            path.strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix("/gate"))
                .is_some_and(|id| !id.is_empty() && !id.contains('/'))
        })
}

/// The reasons of `dyeline_auth_failures_total`.
pub const REASONS: [&str; 5] = [
    "missing_token",
    "invalid_token",
    "sign_in",
    "throttled",
    "duplicate_cookie",
];

/// What a path is, for the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// In [`OPEN`], except `POST /login`.
    Open,
    /// `POST /login`: throttled, its 401 answers counted.
    SignIn,
    /// `/api/…`, `/jaeger/…` and `/metrics`: bearer header only; 401.
    Api,
    /// `/live`: bearer header or cookie; 401.
    Live,
    /// Everything else (dashboard pages, unknown paths): bearer header or cookie; a browser
    /// without either is sent to sign in.
    Page,
}

impl Kind {
    fn of(method: &Method, path: &str) -> Self {
        match path {
            "/login" if method == Method::POST => Kind::SignIn,
            p if OPEN.contains(&p) => Kind::Open,
            "/live" => Kind::Live,
            "/metrics" => Kind::Api,
            p if p == "/api" || p.starts_with("/api/") => Kind::Api,
            // The Jaeger query API (Grafana's data source): an API, not pages.
            p if p.starts_with("/jaeger/") => Kind::Api,
            _ => Kind::Page,
        }
    }
}

/// Label of `dyeline_auth_failures_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// The gate's state: the token check, the throttle and its counter.
#[derive(Debug)]
pub struct Gate {
    auth: Arc<Auth>,
    throttle: Throttle,
    failures: Family<ReasonLabel, Counter>,
}

impl Gate {
    /// A gate applying `auth`, throttling failures at `limits`.
    pub fn new(auth: Arc<Auth>, limits: ThrottleLimits) -> Arc<Self> {
        Arc::new(Self {
            auth,
            throttle: Throttle::new(limits),
            failures: Family::default(),
        })
    }

    /// Registers `dyeline_auth_failures_total{reason}` (every reason from the start).
    pub fn register(&self, registry: &mut Registry) {
        for reason in REASONS {
            let _ = self.failures.get_or_create(&ReasonLabel { reason });
        }
        registry.register(
            "dyeline_auth_failures",
            "Requests refused by the API port's token check, by reason (missing_token, \
             invalid_token, sign_in, throttled, duplicate_cookie)",
            self.failures.clone(),
        );
    }

    /// `app` with every request going through the gate. Serve the result with
    /// `into_make_service_with_connect_info::<SocketAddr>()` so failures are counted per
    /// client (without it every client counts as one).
    pub fn wrap(self: &Arc<Self>, app: Router) -> Router {
        app.layer(axum::middleware::from_fn_with_state(
            Arc::clone(self),
            check,
        ))
    }

    fn count(&self, reason: &'static str) {
        self.failures.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// Counts a failed credential of `client`, logging when it reaches a limit.
    fn failed(&self, client: IpAddr, reason: &'static str) {
        self.count(reason);
        if self.throttle.failed(client) {
            let l = self.throttle.limits();
            tracing::warn!(
                %client,
                failures_per_client = l.per_client,
                failures_total = l.total,
                window = ?l.window,
                "failed authentications reached a limit of api.throttle: credentials are refused unchecked until the window ends"
            );
        }
    }

    fn too_many(&self, b: Blocked) -> Response {
        self.count("throttled");
        let (who, setting) = if b.total {
            ("from all clients", "failures_total")
        } else {
            ("from this client", "failures_per_client")
        };
        let body = json!({"error": {
            "code": "too_many_auth_failures",
            "message": format!(
                "too many failed tokens or sign-ins {who}; retry in {} s (raise [api.throttle] {setting})",
                b.retry_after_secs
            ),
        }});
        let mut r = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(b.retry_after_secs));
        r
    }
}

/// The client's address (unspecified when the server was not given connection info).
fn client_ip(req: &Request) -> IpAddr {
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip())
}

/// The middleware.
async fn check(State(gate): State<Arc<Gate>>, req: Request, next: Next) -> Response {
    let client = client_ip(&req);
    match Kind::of(req.method(), req.uri().path()) {
        Kind::Open => next.run(req).await,
        Kind::SignIn => {
            if let Some(b) = gate.throttle.blocked(client) {
                return gate.too_many(b);
            }
            let response = next.run(req).await;
            if response.status() == StatusCode::UNAUTHORIZED {
                gate.failed(client, "sign_in");
            }
            response
        }
        kind => protect(&gate, kind, client, req, next).await,
    }
}

/// What the request presented and where it came from.
struct Presented {
    /// The check's outcome.
    result: Result<Option<String>, ControlError>,
    /// A non-empty token was presented (a failure counts as a guess).
    guess: bool,
    /// It came from the sign-in cookie (clear it when it fails).
    from_cookie: bool,
}

async fn protect(gate: &Gate, kind: Kind, client: IpAddr, req: Request, next: Next) -> Response {
    let presented = {
        let headers = req.headers();
        let cookie = if kind == Kind::Api {
            None
        } else {
            match session::unique_cookie(headers, session::TOKEN_COOKIE) {
                Ok(c) => c,
                Err(d) => {
                    gate.count("duplicate_cookie");
                    let body =
                        json!({"error": {"code": "duplicate_cookie", "message": d.to_string()}});
                    return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
                }
            }
        };
        // The header wins; the cookie counts where the header gives no token.
        let header = auth::bearer(headers);
        let (token, from_cookie) = match (header, cookie.as_deref()) {
            (Some(h), _) if !h.is_empty() => (Some(h), false),
            (_, Some(c)) => (Some(c), true),
            (h, None) => (h, false),
        };
        let guess = token.is_some_and(|t| !t.is_empty());
        if guess && let Some(b) = gate.throttle.blocked(client) {
            return gate.too_many(b);
        }
        let path = req.uri().path();
        let writes = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS)
            && !is_read_post(path);
        let result = match gate.auth.check(token, Access::Read) {
            // A write without a token is refused here even with open reads; the handler
            // then tells write tokens from read tokens.
            Ok(None) if writes => Err(ControlError::Unauthorized(
                "this request needs an Authorization: Bearer <token> header",
            )),
            r => r,
        };
        Presented {
            result,
            guess,
            from_cookie,
        }
    };
    let Presented {
        result,
        guess,
        from_cookie,
    } = presented;
    match result {
        Ok(_) => next.run(req).await,
        Err(e) => {
            if guess {
                gate.failed(client, "invalid_token");
            } else {
                gate.count("missing_token");
            }
            refuse(kind, &req, e, guess, from_cookie)
        }
    }
}

/// The answer to a request whose credential failed: pages without a bearer header go to
/// sign in, everything else gets the 401.
fn refuse(kind: Kind, req: &Request, e: ControlError, guess: bool, from_cookie: bool) -> Response {
    let from_header = guess && !from_cookie;
    let mut r = if kind == Kind::Page && !from_header {
        let next = match *req.method() {
            Method::GET | Method::HEAD => req
                .uri()
                .path_and_query()
                .map_or("/".to_owned(), |pq| session::local_path(pq.as_str())),
            // A form posted without a valid cookie: back to the page it was on.
            _ => referer_path(req.headers()),
        };
        let location = format!("/login?next={}", dyeline_ui::pages::encode(&next));
        let mut r = StatusCode::SEE_OTHER.into_response();
        if let Ok(v) = HeaderValue::from_str(&location) {
            r.headers_mut().insert(header::LOCATION, v);
        }
        r
    } else {
        let mut r = e.into_response();
        if guess {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer error=\"invalid_token\""),
            );
        }
        r
    };
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if from_cookie && let Ok(v) = HeaderValue::from_str(&session::clear_token_cookie()) {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
    r
}

/// The local path of a same-host `Referer`, else `/`.
fn referer_path(headers: &HeaderMap) -> String {
    let text = |h| headers.get(h).and_then(|v: &HeaderValue| v.to_str().ok());
    let (Some(referer), Some(host)) = (text(header::REFERER), text(header::HOST)) else {
        return "/".to_owned();
    };
    let rest = referer
        .strip_prefix("http://")
        .or_else(|| referer.strip_prefix("https://"))
        .unwrap_or("");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if authority.eq_ignore_ascii_case(host) && !path.is_empty() {
        session::local_path(path)
    } else {
        "/".to_owned()
    }
}

/// Declares the gate in the OpenAPI document: the bearer scheme's description, and on every
/// operation but `/healthz` its security and the 401 and 429 answers, plus 403 on writes (which
/// always need a write token). Reads list the token as optional (`{}` first) unless
/// `reads_need_token`.
pub fn document(doc: &mut utoipa::openapi::OpenApi, reads_need_token: bool) {
    use utoipa::openapi::security::{
        HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
    };
    use utoipa::openapi::{Content, Ref, RefOr, ResponseBuilder};
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(format!(
                    "`Authorization: Bearer <token>` (scheme in any case), a token of `[[api.tokens]]`, \
                     `DYELINE_API_TOKEN` or `<data_dir>/api-token`. Writes always need a token of role \
                     `write`; reads need one when `api.read_requires_token` (this server: {}). \
                     Failed tokens are throttled (`[api.throttle]`, 429 with Retry-After).",
                    if reads_need_token { "yes" } else { "no" }
                )))
                .build(),
        ),
    );
    let error = |description: &str| {
        RefOr::T(
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    Content::new(Some(Ref::from_schema_name("ErrorBody"))),
                )
                .build(),
        )
    };
    for (path, item) in doc.paths.paths.iter_mut() {
        if OPEN.contains(&path.as_str()) {
            continue;
        }
        let read_post = is_read_post(path.as_str());
        for (op, write) in [
            (&mut item.get, false),
            (&mut item.head, false),
            (&mut item.options, false),
            (&mut item.post, !read_post),
            (&mut item.put, true),
            (&mut item.delete, true),
            (&mut item.patch, true),
        ] {
            let Some(op) = op else { continue };
            let bearer = SecurityRequirement::new("bearer", Vec::<String>::new());
            op.security = Some(if write || reads_need_token {
                vec![bearer]
            } else {
                vec![SecurityRequirement::default(), bearer]
            });
            let r = &mut op.responses.responses;
            r.entry("401".into()).or_insert_with(|| {
                error(if write {
                    "no token, or one that is not valid"
                } else {
                    "no token while api.read_requires_token, or a token that is not valid"
                })
            });
            if write {
                r.entry("403".into())
                    .or_insert_with(|| error("a token of role `read`"));
            }
            r.entry("429".into()).or_insert_with(|| {
                error("too many failed tokens or sign-ins (api.throttle); see Retry-After")
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_classified_with_an_explicit_open_list() {
        let get = Method::GET;
        let post = Method::POST;
        for (method, path, kind) in [
            (&get, "/healthz", Kind::Open),
            (&get, "/livez", Kind::Open),
            (&get, "/readyz", Kind::Open),
            (&get, "/readyz/", Kind::Page),
            (&get, "/api/v1/openapi.json", Kind::Open),
            (&get, "/assets/style.css", Kind::Open),
            (&get, "/assets/other.css", Kind::Page),
            (&get, "/login", Kind::Open),
            (&post, "/login", Kind::SignIn),
            (&post, "/logout", Kind::Open),
            (&get, "/live", Kind::Live),
            (&get, "/metrics", Kind::Api),
            (&get, "/api/v1/channels", Kind::Api),
            (&post, "/api/v1/sql", Kind::Api),
            (&get, "/api", Kind::Api),
            (&get, "/jaeger/api/services", Kind::Api),
            (&get, "/jaeger", Kind::Page),
            (&get, "/", Kind::Page),
            (&get, "/channels/trade", Kind::Page),
            (&post, "/channels/trade/actions", Kind::Page),
            (&get, "/traces/0af7651916cd43dd8448eb211c80319c", Kind::Page),
            (&get, "/healthz/", Kind::Page),
            (&get, "/HEALTHZ", Kind::Page),
            (&get, "/nothing", Kind::Page),
        ] {
            assert_eq!(Kind::of(method, path), kind, "{method} {path}");
        }
    }

    #[test]
    fn a_form_goes_back_to_its_page_on_this_host_only() {
        let h = |referer: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
            h.insert(header::REFERER, HeaderValue::from_str(referer).unwrap());
            h
        };
        assert_eq!(
            referer_path(&h("http://127.0.0.1:8080/channels/trade?from=1")),
            "/channels/trade?from=1"
        );
        assert_eq!(referer_path(&h("http://evil.example/channels/trade")), "/");
        assert_eq!(referer_path(&h("http://127.0.0.1:8080//evil.example")), "/");
        assert_eq!(referer_path(&h("http://127.0.0.1:8080")), "/");
        assert_eq!(referer_path(&HeaderMap::new()), "/");
    }
}
