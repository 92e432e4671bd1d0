//! The dashboard's axum routes: pages, forms (sign-in, writes), the live stream and assets.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum_extra::extract::cookie::CookieJar;
use futures::Stream;

mod prefs;

use self::prefs::{here, language, prefs, zone};
use crate::guard;
use crate::locale::{Lang, UiSettings};
use crate::pages::{self, Chrome};
use crate::range;
use crate::session;
use crate::source::{Action, DashboardSource, LaneScope, SourceError, TraceSearch};

/// The dashboard's state: the source it reads and writes through.
pub struct Ui {
    source: Arc<dyn DashboardSource>,
    /// `[ui]`: the default language and time zone.
    settings: UiSettings,
    /// How often `/live` checks the source's data version.
    poll: Duration,
    /// Signs the forms' CSRF tokens.
    csrf_key: session::CsrfKey,
}

impl Ui {
    /// A dashboard over `source`; `/live` polls it every `poll`. Its forms are signed with a
    /// key made for this process.
    pub fn new(source: Arc<dyn DashboardSource>, poll: Duration) -> Arc<Self> {
        Self::with_csrf_key(source, poll, session::CsrfKey::random())
    }

    /// As [`Ui::new`], signing forms with `csrf_key`.
    pub fn with_csrf_key(
        source: Arc<dyn DashboardSource>,
        poll: Duration,
        csrf_key: session::CsrfKey,
    ) -> Arc<Self> {
        Self::with_settings(source, poll, csrf_key, UiSettings::default())
    }

    /// As [`Ui::with_csrf_key`], with the `[ui]` settings (default language and time zone).
    pub fn with_settings(
        source: Arc<dyn DashboardSource>,
        poll: Duration,
        csrf_key: session::CsrfKey,
        settings: UiSettings,
    ) -> Arc<Self> {
        Arc::new(Self {
            source,
            settings,
            poll,
            csrf_key,
        })
    }
}

type S = State<Arc<Ui>>;
type Params = Query<HashMap<String, String>>;

/// The dashboard router (mount at `/`).
pub fn router(ui: Arc<Ui>) -> Router {
    Router::new()
        .route("/", get(overview))
        .route("/channels/{id}", get(channel))
        .route("/channels/{id}/confirm", get(confirm))
        .route("/channels/{id}/actions", post(act))
        .route("/lanes", get(lanes_index))
        .route("/lanes/{id}", get(lanes))
        .route("/traces", get(search))
        .route("/traces/{trace_id}", get(trace))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/prefs", get(prefs))
        .route("/live", get(live))
        .route("/assets/style.css", get(style))
        .route("/assets/live.js", get(script))
        .with_state(ui)
}

fn param<'a>(p: &'a HashMap<String, String>, k: &str) -> Option<&'a str> {
    p.get(k).map(|s| s.trim()).filter(|s| !s.is_empty())
}

/// A rendered page with status and cookies.
struct Page {
    status: StatusCode,
    jar: CookieJar,
    html: String,
}

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        let mut r = (self.status, self.jar, Html(self.html)).into_response();
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        // `style-src-attr 'unsafe-inline'`: the trace waterfall positions its bars and indents
        // its span names with computed `style` attributes, which `style-src 'self'` alone
        // blocks (no `<style>` elements or scripts are allowed by it).
        r.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; \
                 img-src 'self' data:; frame-ancestors 'none'",
            ),
        );
        r
    }
}

/// Builds the frame of a page: CSRF secret, identity, language, zone and range.
async fn chrome(
    ui: &Ui,
    headers: &HeaderMap,
    jar: CookieJar,
    title: impl FnOnce(Lang) -> String,
    path: String,
    p: &HashMap<String, String>,
    live: bool,
) -> (CookieJar, Chrome, Result<(), (StatusCode, String)>) {
    let lang = language(ui, headers, &jar);
    let title = title(lang);
    let zone = zone(ui, &jar);
    let (jar, nonce) = session::csrf(jar);
    let token = session::token(&jar);
    let csrf = session::form_token(&ui.csrf_key, &nonce, token.as_deref());
    let identity = match token {
        Some(t) => ui.source.identify(&t).await.ok(),
        None => None,
    };
    let newest = ui.source.newest_span_unix_nano().await.unwrap_or(None);
    let explicit = param(p, "from").is_some() || param(p, "to").is_some();
    let now = range::now_whole_seconds();
    let (range, err) = match range::resolve(param(p, "from"), param(p, "to"), now, newest, &zone) {
        Ok(r) => (r, Ok(())),
        Err(e) => (
            range::resolve(None, None, now, newest, &zone).unwrap_or(crate::source::TimeRange {
                from_unix_nano: now - range::LIVE_RANGE_NS,
                to_unix_nano: now,
            }),
            Err((StatusCode::BAD_REQUEST, e.message(lang))),
        ),
    };
    let c = Chrome {
        title,
        here: here(&path, p),
        path,
        range,
        explicit_range: explicit,
        identity,
        csrf,
        live,
        lang,
        zone,
        tz_setting: ui.settings.time_zone,
    };
    (jar, c, err)
}

fn render(
    status: StatusCode,
    jar: CookieJar,
    chrome: &Chrome,
    body: leptos::prelude::AnyView,
) -> Page {
    Page {
        status,
        jar,
        html: pages::document(chrome, body),
    }
}

fn error_page(jar: CookieJar, chrome: &Chrome, status: StatusCode, message: &str) -> Page {
    render(
        status,
        jar,
        chrome,
        pages::error_body(chrome.lang, status.as_u16(), message),
    )
}

fn source_error(jar: CookieJar, chrome: &Chrome, e: &SourceError) -> Page {
    error_page(jar, chrome, e.status(), &e.to_string())
}

async fn overview(State(ui): S, headers: HeaderMap, jar: CookieJar, Query(p): Params) -> Page {
    let (jar, c, err) = chrome(
        &ui,
        &headers,
        jar,
        |l| tr!(l, "title.channels"),
        "/".into(),
        &p,
        true,
    )
    .await;
    if let Err((s, m)) = err {
        return error_page(jar, &c, s, &m);
    }
    match ui.source.overview(c.range).await {
        Ok(data) => {
            let body = pages::overview::body(&c, &data);
            render(StatusCode::OK, jar, &c, body)
        }
        Err(e) => source_error(jar, &c, &e),
    }
}

fn done_message(l: Lang, done: Option<&str>) -> Option<String> {
    match done? {
        "start" => Some(tr!(l, "flash.started")),
        "finish" => Some(tr!(l, "flash.finished")),
        d => d
            .strip_prefix("ratio-")
            .and_then(|p| p.parse::<u8>().ok())
            .filter(|p| *p <= 100)
            .map(|p| tr!(l, "flash.ratio", p = p)),
    }
}

async fn channel(
    State(ui): S,
    headers: HeaderMap,
    jar: CookieJar,
    Path(id): Path<String>,
    Query(p): Params,
) -> Page {
    let (jar, c, err) = chrome(
        &ui,
        &headers,
        jar,
        |l| tr!(l, "title.channel", id = id),
        format!("/channels/{id}"),
        &p,
        true,
    )
    .await;
    if let Err((s, m)) = err {
        return error_page(jar, &c, s, &m);
    }
    match ui.source.channel(&id, c.range).await {
        Ok(Some(page)) => {
            let flash = done_message(c.lang, param(&p, "done"));
            let body = pages::channel::body(&c, &page, param(&p, "app"), flash.as_deref());
            render(StatusCode::OK, jar, &c, body)
        }
        Ok(None) => error_page(
            jar,
            &c,
            StatusCode::NOT_FOUND,
            &tr!(c.lang, "error.no_channel", id = format!("{id:?}")),
        ),
        Err(e) => source_error(jar, &c, &e),
    }
}

/// Reads the action of a confirm or write form.
fn parse_action(p: &HashMap<String, String>) -> Result<Action, String> {
    match param(p, "action") {
        Some("start") => Ok(Action::Start),
        Some("finish") => Ok(Action::Finish),
        Some("ratio") => {
            let text = param(p, "preset")
                .or_else(|| param(p, "blue_percent"))
                .ok_or("give blue_percent, an integer 0..100")?;
            match text.parse::<u8>() {
                Ok(v) if v <= 100 => Ok(Action::Ratio(v)),
                _ => Err(format!("blue_percent {text:?} is not an integer 0..100")),
            }
        }
        Some(other) => Err(format!("unknown action {other:?}: start, ratio or finish")),
        None => Err("give an action: start, ratio or finish".into()),
    }
}

/// Renders the confirmation page for `action` on `id`, with the guard's verdict.
async fn confirm_page(
    ui: &Ui,
    jar: CookieJar,
    c: &Chrome,
    id: &str,
    action: &Action,
    error: Option<String>,
    status: StatusCode,
) -> Page {
    let page = match ui.source.channel(id, c.range).await {
        Ok(Some(page)) => page,
        Ok(None) => {
            let m = tr!(c.lang, "error.no_channel", id = format!("{id:?}"));
            return error_page(jar, c, StatusCode::NOT_FOUND, &m);
        }
        Err(e) => return source_error(jar, c, &e),
    };
    let weights = match ui.source.preview(id, action, c.range).await {
        Ok(w) => w,
        Err(e) => return source_error(jar, c, &e),
    };
    let refusal = guard::refusal(c.lang, &page.channel, action, &page.alerts);
    let body = pages::confirm::body(
        c,
        &pages::confirm::Confirm {
            channel: &page.channel,
            version: page.version,
            action,
            weights: &weights,
            refusal,
            error,
        },
    );
    render(status, jar, c, body)
}

async fn confirm(
    State(ui): S,
    headers: HeaderMap,
    jar: CookieJar,
    Path(id): Path<String>,
    Query(p): Params,
) -> Page {
    let (jar, c, err) = chrome(
        &ui,
        &headers,
        jar,
        |l| tr!(l, "title.confirm", id = id),
        format!("/channels/{id}/confirm"),
        &p,
        false,
    )
    .await;
    if let Err((s, m)) = err {
        return error_page(jar, &c, s, &m);
    }
    match parse_action(&p) {
        Ok(action) => confirm_page(&ui, jar, &c, &id, &action, None, StatusCode::OK).await,
        Err(m) => error_page(jar, &c, StatusCode::BAD_REQUEST, &m),
    }
}

async fn act(
    State(ui): S,
    headers: HeaderMap,
    jar: CookieJar,
    Path(id): Path<String>,
    Form(f): Form<HashMap<String, String>>,
) -> Response {
    let none = HashMap::new();
    let (jar, c, _) = chrome(
        &ui,
        &headers,
        jar,
        |l| tr!(l, "title.confirm", id = id),
        format!("/channels/{id}/confirm"),
        &none,
        false,
    )
    .await;
    if let Err(e) = session::csrf_check(&ui.csrf_key, &headers, param(&f, "csrf").unwrap_or("")) {
        return error_page(jar, &c, StatusCode::FORBIDDEN, &e.to_string()).into_response();
    }
    let action = match parse_action(&f) {
        Ok(a) => a,
        Err(m) => return error_page(jar, &c, StatusCode::BAD_REQUEST, &m).into_response(),
    };
    // The channel version the confirmation page showed (absent from forms of older pages).
    let if_match = match param(&f, "version").map(str::parse::<u64>) {
        None => None,
        Some(Ok(v)) => Some(v),
        Some(Err(_)) => {
            let m = "version: the channel version the confirmation page showed (a whole number)";
            return error_page(jar, &c, StatusCode::BAD_REQUEST, m).into_response();
        }
    };
    let Some(token) = session::token(&jar) else {
        return Redirect::to(&format!(
            "/login?next={}",
            pages::encode(&format!("/channels/{id}"))
        ))
        .into_response();
    };
    let page = match ui.source.channel(&id, c.range).await {
        Ok(Some(p)) => p,
        Ok(None) => {
            return error_page(
                jar,
                &c,
                StatusCode::NOT_FOUND,
                &tr!(c.lang, "error.no_channel", id = format!("{id:?}")),
            )
            .into_response();
        }
        Err(e) => return source_error(jar, &c, &e).into_response(),
    };
    let refusal = guard::refusal(Lang::En, &page.channel, &action, &page.alerts);
    let overridden = param(&f, "override").is_some();
    if refusal.is_some() && !overridden {
        return confirm_page(&ui, jar, &c, &id, &action, None, StatusCode::CONFLICT)
            .await
            .into_response();
    }
    let note = refusal.as_deref().map(guard::override_note);
    match ui
        .source
        .write(
            &token,
            &id,
            &action,
            if_match,
            note.as_deref(),
            refusal.is_some(),
        )
        .await
    {
        Ok(()) => {
            let done = match action {
                Action::Start => "start".to_owned(),
                Action::Finish => "finish".to_owned(),
                Action::Ratio(p) => format!("ratio-{p}"),
            };
            (jar, Redirect::to(&format!("/channels/{id}?done={done}"))).into_response()
        }
        Err(e) => confirm_page(&ui, jar, &c, &id, &action, Some(e.to_string()), e.status())
            .await
            .into_response(),
    }
}

async fn lanes_index(State(ui): S, headers: HeaderMap, jar: CookieJar, Query(p): Params) -> Page {
    let (jar, c, err) = chrome(
        &ui,
        &headers,
        jar,
        |l| tr!(l, "title.lanes"),
        "/lanes".into(),
        &p,
        true,
    )
    .await;
    if let Err((s, m)) = err {
        return error_page(jar, &c, s, &m);
    }
    match ui.source.lanes_index(c.range).await {
        Ok(data) => {
            let body = pages::lanes::index_body(&c, &data);
            render(StatusCode::OK, jar, &c, body)
        }
        Err(e) => source_error(jar, &c, &e),
    }
}

async fn lanes(
    State(ui): S,
    headers: HeaderMap,
    jar: CookieJar,
    Path(id): Path<String>,
    Query(p): Params,
) -> Page {
    let ungrouped = id == pages::lanes::UNGROUPED;
    let title = |l: Lang| {
        if ungrouped {
            tr!(l, "title.ungrouped")
        } else {
            tr!(l, "title.lane_group", id = id)
        }
    };
    let (jar, c, err) = chrome(&ui, &headers, jar, title, format!("/lanes/{id}"), &p, true).await;
    if let Err((s, m)) = err {
        return error_page(jar, &c, s, &m);
    }
    let scope = if ungrouped {
        LaneScope::Ungrouped
    } else {
        LaneScope::Group(&id)
    };
    match ui.source.lanes(scope, c.range).await {
        Ok(Some(data)) => {
            let body = pages::lanes::body(&c, &data);
            render(StatusCode::OK, jar, &c, body)
        }
        Ok(None) => error_page(
            jar,
            &c,
            StatusCode::NOT_FOUND,
            &tr!(c.lang, "error.no_lane_group", id = format!("{id:?}")),
        ),
        Err(e) => source_error(jar, &c, &e),
    }
}

async fn search(State(ui): S, headers: HeaderMap, jar: CookieJar, Query(p): Params) -> Page {
    let (jar, c, err) = chrome(
        &ui,
        &headers,
        jar,
        |l| tr!(l, "title.traces"),
        "/traces".into(),
        &p,
        true,
    )
    .await;
    if let Err((s, m)) = err {
        return error_page(jar, &c, s, &m);
    }
    let tri = |k: &str| match param(&p, k) {
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        None => Ok(None),
        Some(o) => Err(format!("{k}={o:?}: true or false")),
    };
    let q = (|| -> Result<TraceSearch, String> {
        Ok(TraceSearch {
            channel: param(&p, "channel").map(str::to_owned),
            app: param(&p, "app").map(str::to_owned),
            color: match param(&p, "color") {
                None => None,
                Some(c @ ("blue" | "green" | "unknown")) => Some(c.to_owned()),
                Some(o) => return Err(format!("color={o:?}: blue, green or unknown")),
            },
            error: tri("error")?,
            hop: tri("hop")?,
            min_duration_ms: param(&p, "min_duration_ms")
                .map(|v| v.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0))
                .map(|v| v.ok_or("min_duration_ms: a number ≥ 0"))
                .transpose()?,
            lane: param(&p, "lane").map(str::to_owned),
            lane_tag: param(&p, "lane_tag").map(str::to_owned),
            lane_group: param(&p, "lane_group").map(str::to_owned),
            lane_finding: param(&p, "lane_finding")
                .map(|f| pages::trace::lane_finding_filter(f).ok_or(f))
                .transpose()
                .map_err(|o| {
                    format!(
                        "lane_finding={o:?}: any or one of {}",
                        pages::trace::lane_finding_types()
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?,
            attribute: param(&p, "attribute")
                .map(|a| match a.split_once('=') {
                    Some((k, _)) if !k.trim().is_empty() => Ok(a.to_owned()),
                    _ => Err(format!("attribute={a:?}: key=value")),
                })
                .transpose()?,
            limit: param(&p, "limit")
                .map(|v| v.parse::<usize>().ok().filter(|v| (1..=1000).contains(v)))
                .map(|v| v.ok_or("limit: 1..1000"))
                .transpose()?
                .unwrap_or(50),
        })
    })();
    let q = match q {
        Ok(q) => q,
        Err(m) => return error_page(jar, &c, StatusCode::BAD_REQUEST, &m),
    };
    let channels = match ui.source.overview(c.range).await {
        Ok(o) => o.channels.into_iter().map(|c| c.id).collect::<Vec<_>>(),
        Err(e) => return source_error(jar, &c, &e),
    };
    match ui.source.search(&q, c.range).await {
        Ok(hits) => {
            let body = pages::trace::search_body(&c, &q, &hits, &channels);
            render(StatusCode::OK, jar, &c, body)
        }
        Err(e) => source_error(jar, &c, &e),
    }
}

async fn trace(
    State(ui): S,
    headers: HeaderMap,
    jar: CookieJar,
    Path(trace_id): Path<String>,
    Query(p): Params,
) -> Page {
    let (jar, c, _) = chrome(
        &ui,
        &headers,
        jar,
        |l| tr!(l, "title.trace", id = trace_id),
        format!("/traces/{trace_id}"),
        &p,
        true,
    )
    .await;
    let offset = match param(&p, "offset").map(str::parse::<usize>).transpose() {
        Ok(o) => o.unwrap_or(0),
        Err(_) => {
            let m = "offset: a whole number ≥ 0 (the first span shown)";
            return error_page(jar, &c, StatusCode::BAD_REQUEST, m);
        }
    };
    match ui.source.trace(&trace_id, offset).await {
        Ok(Some(v)) => {
            // A page of thousands of spans renders for a while: off the async workers.
            let frame = c.clone();
            let html = tokio::task::spawn_blocking(move || {
                pages::document(&frame, pages::trace::body(&frame, &v))
            })
            .await;
            match html {
                Ok(html) => Page {
                    status: StatusCode::OK,
                    jar,
                    html,
                },
                Err(e) => {
                    let m = format!("rendering the trace failed: {e}");
                    error_page(jar, &c, StatusCode::INTERNAL_SERVER_ERROR, &m)
                }
            }
        }
        Ok(None) => error_page(
            jar,
            &c,
            StatusCode::NOT_FOUND,
            &tr!(c.lang, "error.no_trace", id = trace_id),
        ),
        Err(e) => source_error(jar, &c, &e),
    }
}

async fn login_page(State(ui): S, headers: HeaderMap, jar: CookieJar, Query(p): Params) -> Page {
    let none = HashMap::new();
    let (jar, c, _) = chrome(
        &ui,
        &headers,
        jar,
        |l| tr!(l, "title.sign_in"),
        "/login".into(),
        &none,
        false,
    )
    .await;
    let next = session::local_path(param(&p, "next").unwrap_or("/"));
    let body = pages::login::body(&c, &next, None);
    render(StatusCode::OK, jar, &c, body)
}

async fn login(
    State(ui): S,
    headers: HeaderMap,
    jar: CookieJar,
    Form(f): Form<HashMap<String, String>>,
) -> Response {
    let none = HashMap::new();
    let (jar, c, _) = chrome(
        &ui,
        &headers,
        jar,
        |l| tr!(l, "title.sign_in"),
        "/login".into(),
        &none,
        false,
    )
    .await;
    let next = session::local_path(param(&f, "next").unwrap_or("/"));
    if let Err(e) = session::csrf_check(&ui.csrf_key, &headers, param(&f, "csrf").unwrap_or("")) {
        let message = match e {
            session::CsrfRefusal::Mismatch => tr!(c.lang, "login.expired"),
            d => d.to_string(),
        };
        let body = pages::login::body(&c, &next, Some(&message));
        return render(StatusCode::FORBIDDEN, jar, &c, body).into_response();
    }
    let token = param(&f, "token").unwrap_or("");
    match ui.source.identify(token).await {
        Ok(_) => (session::sign_in(jar, token), Redirect::to(&next)).into_response(),
        Err(e) => {
            let body = pages::login::body(&c, &next, Some(&e.to_string()));
            render(e.status(), jar, &c, body).into_response()
        }
    }
}

async fn logout(
    State(ui): S,
    headers: HeaderMap,
    jar: CookieJar,
    Form(f): Form<HashMap<String, String>>,
) -> Response {
    if let Err(e) = session::csrf_check(&ui.csrf_key, &headers, param(&f, "csrf").unwrap_or("")) {
        return (StatusCode::FORBIDDEN, e.to_string()).into_response();
    }
    (session::sign_out(jar), Redirect::to("/")).into_response()
}

/// `GET /live`: an SSE stream sending `event: change` (data: the source's data version)
/// whenever the version moves; comments keep idle connections open.
async fn live(State(ui): S) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let start = ui.source.data_version();
    let stream = futures::stream::unfold((ui, start), |(ui, seen)| async move {
        loop {
            tokio::time::sleep(ui.poll).await;
            let v = ui.source.data_version();
            if v != seen {
                let ev = Event::default().event("change").data(v.to_string());
                return Some((Ok(ev), (ui, v)));
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

async fn style() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        include_str!("../assets/style.css"),
    )
}

async fn script() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        include_str!("../assets/live.js"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn actions_parse_with_presets_first_and_bounds() {
        assert_eq!(parse_action(&p(&[("action", "start")])), Ok(Action::Start));
        assert_eq!(
            parse_action(&p(&[
                ("action", "ratio"),
                ("preset", "10"),
                ("blue_percent", "")
            ])),
            Ok(Action::Ratio(10))
        );
        assert_eq!(
            parse_action(&p(&[("action", "ratio"), ("blue_percent", "35")])),
            Ok(Action::Ratio(35))
        );
        assert!(parse_action(&p(&[("action", "ratio"), ("blue_percent", "101")])).is_err());
        assert!(parse_action(&p(&[("action", "ratio"), ("blue_percent", "5.5")])).is_err());
        assert!(parse_action(&p(&[("action", "drop")])).is_err());
    }

    #[test]
    fn flash_messages_come_from_codes_only() {
        assert_eq!(
            done_message(Lang::En, Some("ratio-10")).as_deref(),
            Some("blue_percent set to 10.")
        );
        assert_eq!(
            done_message(Lang::ZhCn, Some("ratio-10")).as_deref(),
            Some("blue_percent 已设为 10。")
        );
        assert_eq!(done_message(Lang::En, Some("ratio-500")), None);
        assert_eq!(done_message(Lang::En, Some("<script>")), None);
    }
}
