//! Page tests over a fixture source (no store): the numbers reach the HTML, the forms check
//! CSRF, the spike guard refuses and the override is recorded with the write.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use parking_lot::Mutex;
use tower::ServiceExt;

use crate::source::*;

mod detail;
mod i18n;
mod lanes;

const T0: i64 = 1_764_000_000_000_000_000;
const SEC: i64 = 1_000_000_000;
const TOKEN: &str = "secret-token";
const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

/// A trace of one root and 24,999 children (a chain under the first two), shown 10 spans a
/// page: [`wide`].
const WIDE: &str = "00000000000000000000000000000abc";
const WIDE_SPANS: usize = 25_001;

/// The page of [`WIDE`] from `offset`, as a source capped at 10 spans a view gives it.
fn wide(offset: usize) -> TraceView {
    let span = |i: usize| TraceSpan {
        span_id: format!("{i:016x}"),
        parent_span_id: (i > 0).then(|| "0000000000000000".to_owned()),
        depth: usize::from(i > 0) + if i == 1 { 99 } else { 0 },
        name: format!("span {i}"),
        span_kind: "SERVER".into(),
        traffic_kind: None,
        app: "order".into(),
        instance: "order-1".into(),
        host: None,
        color: "blue".into(),
        decisions: String::new(),
        start_unix_nano: T0 + i as i64,
        duration_ns: 1,
        status_code: "OK".into(),
        is_error: false,
        waiting_for_parent: false,
        hops: vec![],
        missing_decision_channels: vec![],
        lane: None,
        lane_tag: None,
        intended_lane: None,
        lane_group: None,
        lane_marks: vec![],
        status_message: None,
        scope: None,
        trace_state: None,
        attributes: vec![],
        resource_attributes: vec![],
        events: vec![],
        links: vec![],
    };
    TraceView {
        trace_id: WIDE.into(),
        span_count: WIDE_SPANS,
        offset,
        page_size: 10,
        start_unix_nano: T0,
        end_unix_nano: T0 + WIDE_SPANS as i64,
        hop_spans: 0,
        missing_spans: 0,
        lane_mark_spans: 0,
        spans: (offset.min(WIDE_SPANS)..(offset + 10).min(WIDE_SPANS))
            .map(span)
            .collect(),
    }
}

#[derive(Default)]
struct Fixture {
    writes: Mutex<Vec<(String, Action, Option<String>)>>,
    /// The `if_match` of each write, in order.
    if_matches: Mutex<Vec<Option<u64>>>,
    forced: Mutex<Vec<bool>>,
    spike_on: Option<&'static str>,
}

fn load(requests: u64, errors: u64, p99: f64) -> ColorLoad {
    ColorLoad {
        requests,
        errors,
        p99_ms: Some(p99),
    }
}

fn trade() -> ChannelRow {
    ChannelRow {
        id: "trade".into(),
        state: "releasing".into(),
        blue_percent: 10,
        apps: vec!["order".into(), "inventory".into()],
        blue: load(600, 6, 12.5),
        green: load(5400, 27, 9.25),
        unknown_requests: 3,
        firing_alerts: 1,
        hops_last_5m: 4,
    }
}

#[async_trait]
impl DashboardSource for Fixture {
    async fn newest_span_unix_nano(&self) -> Result<Option<i64>, SourceError> {
        Ok(Some(T0))
    }
    async fn overview(&self, _: TimeRange) -> Result<Overview, SourceError> {
        let mut global = trade();
        global.id = "global".into();
        global.state = "idle".into();
        global.blue_percent = 50;
        global.apps = vec![];
        let mut pay = trade();
        pay.id = "pay".into();
        pay.state = "idle".into();
        pay.blue = ColorLoad::default();
        pay.green = ColorLoad::default();
        pay.unknown_requests = 0;
        Ok(Overview {
            channels: vec![global, trade(), pay],
            unknown_instances: vec![UnknownInstance {
                app: "legacy-proxy".into(),
                instance: "lp-1".into(),
                host: None,
                spans: 42,
            }],
            analysed_to_unix_nano: None,
            data_from_unix_nano: None,
        })
    }
    async fn channel(
        &self,
        id: &str,
        range: TimeRange,
    ) -> Result<Option<ChannelPage>, SourceError> {
        if id != "trade" {
            return Ok(None);
        }
        let alerts = self
            .spike_on
            .map(|c| AlertLine {
                name: "ErrorSpike".into(),
                state: "firing".into(),
                labels: format!("color={c} type=error_spike"),
                summary: format!("{c} error rate 31.00% (31 of 100)"),
                color: Some(c.into()),
                kind: "error_spike".into(),
                starts_at_unix_nano: T0 - 60 * SEC,
                ends_at_unix_nano: None,
                trace_ids: vec![TRACE.into()],
            })
            .into_iter()
            .collect();
        Ok(Some(ChannelPage {
            channel: trade(),
            version: 7,
            step_seconds: 30,
            steps: (0..4)
                .map(|i| Step {
                    start_unix_nano: range.from_unix_nano + i * 30 * SEC,
                    blue: load(10, 1, 5.0),
                    green: load(90, 0, 4.0),
                    blue_share: Some(0.1),
                    blue_percent: Some(10),
                    hops: 1,
                })
                .collect(),
            ops: vec![OpLine {
                seq: 3,
                t_unix_nano: T0 - 600 * SEC,
                op: "ratio".into(),
                blue_percent: Some(10),
                actor: "admin".into(),
                note: Some("override: earlier".into()),
            }],
            apps: vec![
                AppRow {
                    app: "order".into(),
                    blue: load(300, 3, 12.5),
                    green: load(2700, 9, 9.25),
                    unknown_requests: 0,
                },
                AppRow {
                    app: "inventory".into(),
                    blue: load(300, 3, 7.0),
                    green: load(2700, 18, 6.0),
                    unknown_requests: 3,
                },
            ],
            hops: vec![HopEdge {
                from_app: "order".into(),
                from_color: Some("green".into()),
                to_app: "inventory".into(),
                to_color: "blue".into(),
                kind: "RPC".into(),
                reason: "decision_mismatch".into(),
                via: vec!["legacy-proxy".into()],
                count: 17,
                trace_ids: vec![TRACE.into()],
            }],
            missing: vec![],
            findings: vec![WindowFinding {
                finding: Detection::InstanceSkew,
                app: Some("order".into()),
                color: "green".into(),
                kind: "RPC".into(),
                instance: Some("order-green-2".into()),
                detail: "700 of 900 green requests: 2.3× the mean".into(),
                window_start_unix_nano: T0 - 120 * SEC,
                trace_ids: vec![TRACE.into()],
            }],
            instances: vec![],
            alerts,
            analysed_to_unix_nano: Some(T0 - 5 * SEC),
            data_from_unix_nano: None,
            // Blue (the canary, 10 requests) slower than green (90).
            latency: LatencyComparison {
                bounds_ms: vec![1.0, 5.0, 10.0, 50.0],
                blue: ColorLatency {
                    counts: vec![0, 1, 4, 5, 0],
                    requests: 10,
                    p50_ms: Some(9.5),
                    p90_ms: Some(40.0),
                    p99_ms: Some(48.0),
                },
                green: ColorLatency {
                    counts: vec![0, 45, 45, 0, 0],
                    requests: 90,
                    p50_ms: Some(5.0),
                    p90_ms: Some(8.0),
                    p99_ms: Some(9.9),
                },
            },
        }))
    }
    async fn trace(&self, trace_id: &str, offset: usize) -> Result<Option<TraceView>, SourceError> {
        if trace_id == WIDE {
            return Ok(Some(wide(offset)));
        }
        Ok((trace_id == TRACE).then(|| TraceView {
            trace_id: TRACE.into(),
            span_count: 2,
            offset: 0,
            page_size: 10_000,
            start_unix_nano: T0,
            end_unix_nano: T0 + 10_000_000,
            hop_spans: 1,
            missing_spans: 0,
            lane_mark_spans: 1,
            spans: vec![
                TraceSpan {
                    span_id: "aaaaaaaaaaaaaaaa".into(),
                    parent_span_id: None,
                    depth: 0,
                    name: "GET /order".into(),
                    span_kind: "SERVER".into(),
                    traffic_kind: Some("RPC".into()),
                    app: "order".into(),
                    instance: "order-green-1".into(),
                    host: Some("host-green-1".into()),
                    color: "green".into(),
                    decisions: "trade=green".into(),
                    start_unix_nano: T0,
                    duration_ns: 10_000_000,
                    status_code: "OK".into(),
                    is_error: false,
                    waiting_for_parent: false,
                    hops: vec![],
                    missing_decision_channels: vec![],
                    lane: Some("gray".into()),
                    lane_tag: Some("gray".into()),
                    intended_lane: Some("gray".into()),
                    lane_group: Some("mall".into()),
                    lane_marks: vec![],
                    status_message: None,
                    scope: None,
                    trace_state: None,
                    attributes: vec![],
                    resource_attributes: vec![],
                    events: vec![],
                    links: vec![],
                },
                TraceSpan {
                    span_id: "bbbbbbbbbbbbbbbb".into(),
                    parent_span_id: Some("aaaaaaaaaaaaaaaa".into()),
                    depth: 1,
                    name: "reserve".into(),
                    span_kind: "SERVER".into(),
                    traffic_kind: Some("RPC".into()),
                    app: "inventory".into(),
                    instance: "inv-blue-1".into(),
                    host: Some("host-blue-1".into()),
                    color: "blue".into(),
                    decisions: "trade=green".into(),
                    start_unix_nano: T0 + 2_000_000,
                    duration_ns: 5_000_000,
                    status_code: "ERROR".into(),
                    is_error: true,
                    waiting_for_parent: false,
                    hops: vec![
                        "trade: order(green) → inventory(blue) decision_mismatch via legacy-proxy"
                            .into(),
                    ],
                    missing_decision_channels: vec![],
                    lane: Some("base".into()),
                    lane_tag: None,
                    intended_lane: Some("gray".into()),
                    lane_group: Some("mall".into()),
                    lane_marks: vec![
                        LaneMarkLine {
                            mark: "lane_leak".into(),
                            text: "LANE LEAK gray: order (gray) → inventory (base), tag_dropped"
                                .into(),
                        },
                        LaneMarkLine {
                            mark: "lane_tag_dropped".into(),
                            text: "TAG DROPPED gray by order, in_process".into(),
                        },
                    ],
                    status_message: Some("stock service timed out".into()),
                    scope: Some("io.opentelemetry.grpc 2.1".into()),
                    trace_state: Some("vendor=x1".into()),
                    attributes: vec![
                        ("rpc.grpc.status_code".into(), "4".into()),
                        ("sku".into(), "A-17".into()),
                    ],
                    resource_attributes: vec![("k8s.pod.name".into(), "inv-blue-1-7f".into())],
                    events: vec![TraceEvent {
                        time_unix_nano: T0 + 3_500_000,
                        name: "exception".into(),
                        attributes: vec![("exception.type".into(), "Timeout".into())],
                    }],
                    links: vec![TraceLink {
                        trace_id: "0123456789abcdef0123456789abcdef".into(),
                        span_id: "00000000000000ff".into(),
                        attributes: vec![("messaging.batch".into(), "true".into())],
                    }],
                },
            ],
        }))
    }
    async fn lanes_index(&self, _: TimeRange) -> Result<LanesIndex, SourceError> {
        Ok(lanes::index())
    }
    async fn lanes(
        &self,
        scope: LaneScope<'_>,
        _: TimeRange,
    ) -> Result<Option<LanesPage>, SourceError> {
        Ok(lanes::page(scope))
    }
    async fn search(&self, q: &TraceSearch, _: TimeRange) -> Result<Vec<TraceHit>, SourceError> {
        // The trace below is in lane group mall.
        let other_group = q.lane_group.as_deref().is_some_and(|g| g != "mall");
        Ok(if q.hop == Some(false) || other_group {
            vec![]
        } else {
            vec![TraceHit {
                trace_id: TRACE.into(),
                start_unix_nano: T0,
                duration_ms: 10.0,
                spans: 2,
                apps: vec!["inventory".into(), "order".into()],
                colors: vec!["blue".into(), "green".into()],
                error: true,
                hops: 1,
            }]
        })
    }
    async fn preview(
        &self,
        _: &str,
        action: &Action,
        _: TimeRange,
    ) -> Result<Vec<WeightPreview>, SourceError> {
        let bp = u32::from(action.blue_percent_after());
        Ok(vec![WeightPreview {
            app: "order".into(),
            blue_instances: 2,
            green_instances: 2,
            blue_weight: bp,
            green_weight: 100 - bp,
        }])
    }
    async fn identify(&self, token: &str) -> Result<Identity, SourceError> {
        if token == TOKEN {
            Ok(Identity {
                name: "owner".into(),
                can_write: true,
            })
        } else {
            Err(SourceError::Unauthorized(
                "the bearer token is not valid".into(),
            ))
        }
    }
    async fn write(
        &self,
        token: &str,
        id: &str,
        action: &Action,
        if_match: Option<u64>,
        note: Option<&str>,
        force: bool,
    ) -> Result<(), SourceError> {
        self.identify(token).await?;
        self.if_matches.lock().push(if_match);
        self.forced.lock().push(force);
        self.writes
            .lock()
            .push((id.to_owned(), action.clone(), note.map(str::to_owned)));
        Ok(())
    }
    fn data_version(&self) -> u64 {
        1
    }
}

async fn get(
    app: &axum::Router,
    uri: &str,
    cookie: Option<&str>,
) -> (StatusCode, String, Vec<String>) {
    let mut req = Request::get(uri);
    if let Some(c) = cookie {
        req = req.header(header::COOKIE, c);
    }
    send(app, req.body(Body::empty()).unwrap()).await
}

async fn post(
    app: &axum::Router,
    uri: &str,
    cookie: &str,
    form: &str,
) -> (StatusCode, String, Vec<String>) {
    let req = Request::post(uri)
        .header(header::COOKIE, cookie)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(form.to_owned()))
        .unwrap();
    send(app, req).await
}

async fn send(app: &axum::Router, req: Request<Body>) -> (StatusCode, String, Vec<String>) {
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let mut headers: Vec<String> = res
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    if let Some(l) = res.headers().get(header::LOCATION) {
        headers.push(format!("location: {}", l.to_str().unwrap()));
    }
    let body = res.into_body().collect().await.unwrap().to_bytes();
    // Leptos separates adjacent text nodes with empty comments; they are not content.
    let html = String::from_utf8(body.to_vec()).unwrap().replace("<!>", "");
    (status, html, headers)
}

fn key() -> crate::session::CsrfKey {
    crate::session::CsrfKey::from_bytes([42; 32])
}

fn app(f: Arc<Fixture>) -> axum::Router {
    crate::router(crate::Ui::with_csrf_key(
        f,
        Duration::from_millis(50),
        key(),
    ))
}

const CSRF: &str = "0123456789abcdef0123456789abcdef";

/// The form token of a browser holding the `CSRF` nonce, not signed in.
fn anon_csrf() -> String {
    crate::session::form_token(&key(), CSRF, None)
}

/// The form token of a browser holding the `CSRF` nonce, signed in with `TOKEN`.
fn signed_csrf() -> String {
    crate::session::form_token(&key(), CSRF, Some(TOKEN))
}

fn signed_in() -> String {
    format!("dyeline_csrf={CSRF}; dyeline_token={TOKEN}")
}

#[tokio::test]
async fn overview_shows_every_channel_with_rates_and_unknown_instances() {
    let (status, html, cookies) = get(&app(Arc::default()), "/", None).await;
    assert_eq!(status, StatusCode::OK);
    // A capture older than 5 minutes opens on its last hour: 600 requests / 3600 s.
    assert!(html.contains(">0.2/s<"), "{html}");
    assert!(html.contains(">1.5/s<"), "5400 / 3600 s");
    assert!(html.contains(">1.00%<"), "blue error rate 6/600");
    assert!(html.contains(">0.50%<"), "green error rate 27/5400");
    let global = html.find("data-channel=\"global\"").unwrap();
    let trade = html.find("data-channel=\"trade\"").unwrap();
    assert!(global < trade, "global first");
    // An idle channel without traffic in the range shows no rate, not "0.0/s".
    let pay = &html[html.find("data-channel=\"pay\"").unwrap()..];
    let pay = &pay[..pay.find("</tr>").unwrap()];
    assert_eq!(
        pay.matches(">–<").count(),
        4,
        "rates and error rates: {pay}"
    );
    assert_eq!(
        pay.matches("not releasing in this range").count(),
        2,
        "{pay}"
    );
    assert!(!pay.contains("0.0/s"), "{pay}");
    assert!(html.contains("1 instance(s) of unknown colour"));
    assert!(html.contains("lp-1"));
    assert!(cookies.iter().any(|c| c.starts_with("dyeline_csrf=")
        && c.contains("HttpOnly")
        && c.contains("SameSite=Strict")));
}

#[tokio::test]
async fn channel_page_shows_findings_controls_and_events() {
    let (status, html, _) = get(&app(Arc::default()), "/channels/trade", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("id=\"blue-percent\">10<"), "{html}");
    assert!(html.contains("decision_mismatch"));
    assert!(html.contains("legacy-proxy"));
    assert!(html.contains(">17<"), "hop count");
    assert!(html.contains(&format!("/traces/{TRACE}")));
    assert!(html.contains("order-green-2"));
    assert!(html.contains("override: earlier"));
    assert!(
        html.contains("Spans analysed up to"),
        "an older analysis is said"
    );
    assert!(html.contains("<svg class=\"chart\""));
    assert!(html.contains("name=\"preset\" value=\"100\""));
    // The app filter narrows the table.
    let (_, html, _) = get(&app(Arc::default()), "/channels/trade?app=inv", None).await;
    let apps = &html[html.find("id=\"apps\"").unwrap()..];
    let apps = &apps[..apps.find("</table>").unwrap()];
    assert!(
        apps.contains("inventory") && !apps.contains(">order<"),
        "{apps}"
    );
    let (status, _, _) = get(&app(Arc::default()), "/channels/nope", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, html, _) = get(&app(Arc::default()), "/channels/trade?from=x", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(html.contains("RFC 3339"));
}

#[tokio::test]
async fn a_trace_page_shows_one_page_and_says_how_many_spans_it_left_out() {
    let (status, html, _) = get(&app(Arc::default()), &format!("/traces/{WIDE}"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(html.matches("<tr data-depth=").count(), 10, "{html}");
    assert!(html.contains("spans 1–10 of 25,001 shown; "), "{html}");
    assert!(
        html.contains("<span id=\"left-out\">24,991</span> left out"),
        "{html}"
    );
    assert!(html.contains(&format!(
        "id=\"next-page\" href=\"/traces/{WIDE}?offset=10\""
    )));
    assert!(!html.contains("prev-page"));
    // A deep span is indented as deep as MAX_INDENT and carries its depth.
    assert!(html.contains("data-depth=\"100\""), "{html}");
    assert!(html.contains("padding-left:48.3em"), "{html}");
    let (_, html, _) = get(
        &app(Arc::default()),
        &format!("/traces/{WIDE}?offset=24995"),
        None,
    )
    .await;
    assert_eq!(html.matches("<tr data-depth=").count(), 6);
    assert!(
        html.contains("spans 24,996–25,001 of 25,001 shown; "),
        "{html}"
    );
    assert!(html.contains(&format!(
        "id=\"prev-page\" href=\"/traces/{WIDE}?offset=24985\""
    )));
    assert!(!html.contains("next-page"));
    let (status, html, _) = get(
        &app(Arc::default()),
        &format!("/traces/{WIDE}?offset=-1"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(html.contains("offset: a whole number"), "{html}");
    // A whole trace says nothing of pages.
    let (_, html, _) = get(&app(Arc::default()), &format!("/traces/{TRACE}"), None).await;
    assert!(!html.contains("trace-page"));
}

#[tokio::test]
async fn trace_page_marks_the_hop_span_and_search_lists_it() {
    let (status, html, _) = get(&app(Arc::default()), &format!("/traces/{TRACE}"), None).await;
    assert_eq!(status, StatusCode::OK);
    let hop_row = html.find("data-span-id=\"bbbbbbbbbbbbbbbb\" class=\"span hop error lane-mark\"");
    assert!(hop_row.is_some(), "{html}");
    assert!(
        html.contains(
            "HOP trade: order(green) → inventory(blue) decision_mismatch via legacy-proxy"
        )
    );
    assert!(html.contains("chip c-blue\">blue<"));
    assert!(html.contains("host-blue-1"));
    let (status, _, _) = get(
        &app(Arc::default()),
        "/traces/ffffffffffffffffffffffffffffffff",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, html, _) = get(&app(Arc::default()), "/traces?hop=true", None).await;
    assert!(html.contains("1 trace(s)"));
    let (_, html, _) = get(&app(Arc::default()), "/traces?hop=false", None).await;
    assert!(html.contains("0 trace(s)"));
    let (status, _, _) = get(&app(Arc::default()), "/traces?limit=0", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn login_sets_an_httponly_cookie_and_rejects_bad_tokens_and_csrf() {
    let a = app(Arc::default());
    let c = format!("dyeline_csrf={CSRF}");
    let (status, _, _) = post(
        &a,
        "/login",
        &c,
        &format!("csrf={}&token=wrong&next=/", anon_csrf()),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = post(
        &a,
        "/login",
        &c,
        &format!("csrf=ffffffffffffffffffffffffffffffff&token={TOKEN}"),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, h) = post(
        &a,
        "/login",
        &c,
        &format!(
            "csrf={}&token={TOKEN}&next=%2Fchannels%2Ftrade",
            anon_csrf()
        ),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(
        h.iter()
            .any(|c| c.starts_with(&format!("dyeline_token={TOKEN}")) && c.contains("HttpOnly"))
    );
    assert!(h.contains(&"location: /channels/trade".to_owned()), "{h:?}");
    let (_, _, h) = post(
        &a,
        "/login",
        &c,
        &format!("csrf={}&token={TOKEN}&next=%2F%2Fevil.example", anon_csrf()),
    )
    .await;
    assert!(h.contains(&"location: /".to_owned()), "{h:?}");
}

#[tokio::test]
async fn sign_in_redirects_stay_local_and_never_fail() {
    let a = app(Arc::default());
    let c = format!("dyeline_csrf={CSRF}");
    for next in [
        "%2F%09%2Fevil.example",
        "%2F%5Cevil.example",
        "%2F%0D%0ASet-Cookie%3A%20x%3D1",
        "%2F%0A%2Fevil.example",
        "https%3A%2F%2Fevil.example",
    ] {
        let (status, _, h) = post(
            &a,
            "/login",
            &c,
            &format!("csrf={}&token={TOKEN}&next={next}", anon_csrf()),
        )
        .await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{next}");
        assert!(h.contains(&"location: /".to_owned()), "{next}: {h:?}");
        // The login page carries the same `next` in its form: refused there too.
        let (status, html, _) = get(&a, &format!("/login?next={next}"), None).await;
        assert_eq!(status, StatusCode::OK, "{next}");
        assert!(html.contains("name=\"next\" value=\"/\""), "{next}: {html}");
    }
}

#[tokio::test]
async fn forms_carry_a_signed_token_and_tossed_cookies_are_refused() {
    let f = Arc::new(Fixture::default());
    let a = app(f.clone());
    // The page's form token is the signature for this browser's nonce and session.
    let (_, html, _) = get(&a, "/channels/trade", Some(&signed_in())).await;
    assert!(
        html.contains(&format!("value=\"{}\"", signed_csrf())),
        "{html}"
    );
    assert!(!html.contains(&format!("value=\"{CSRF}\"")));
    // The old double submit (form value = cookie) is refused.
    let (status, _, _) = post(
        &a,
        "/channels/trade/actions",
        &signed_in(),
        &format!("csrf={CSRF}&action=ratio&blue_percent=50"),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A nonce tossed in beside the browser's own, with the attacker's matching form value
    // for it: refused, whichever cookie comes last.
    let tossed = "ffffffffffffffffffffffffffffffff";
    let forged = crate::session::form_token(&key(), tossed, Some(TOKEN));
    for cookies in [
        format!("dyeline_csrf={CSRF}; dyeline_token={TOKEN}; dyeline_csrf={tossed}"),
        format!("dyeline_csrf={tossed}; dyeline_csrf={CSRF}; dyeline_token={TOKEN}"),
    ] {
        let (status, html, _) = post(
            &a,
            "/channels/trade/actions",
            &cookies,
            &format!("csrf={forged}&action=ratio&blue_percent=50"),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(html.contains("two dyeline_csrf cookies"), "{html}");
    }
    assert!(f.writes.lock().is_empty());
}

#[tokio::test]
async fn writes_need_csrf_and_go_through_with_the_token() {
    let f = Arc::new(Fixture::default());
    let a = app(f.clone());
    let (status, html, _) = get(
        &a,
        "/channels/trade/confirm?action=ratio&preset=50",
        Some(&signed_in()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("from 10 to 50"), "{html}");
    assert!(html.contains("id=\"confirm\""));
    let (status, _, _) = post(
        &a,
        "/channels/trade/actions",
        &signed_in(),
        "csrf=bad&action=ratio&blue_percent=50",
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(f.writes.lock().is_empty());
    let (status, _, h) = post(
        &a,
        "/channels/trade/actions",
        &signed_in(),
        &format!("csrf={}&action=ratio&blue_percent=50", signed_csrf()),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(
        h.contains(&"location: /channels/trade?done=ratio-50".to_owned()),
        "{h:?}"
    );
    assert_eq!(
        f.writes.lock().as_slice(),
        &[("trade".to_owned(), Action::Ratio(50), None)]
    );
    // Without a token the write is not made: sign in first.
    let (status, _, h) = post(
        &a,
        "/channels/trade/actions",
        &format!("dyeline_csrf={CSRF}"),
        &format!("csrf={}&action=finish", anon_csrf()),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(h.iter().any(|l| l.starts_with("location: /login")), "{h:?}");
    assert_eq!(f.writes.lock().len(), 1);
}

#[tokio::test]
async fn an_increase_towards_a_spiking_colour_is_refused_unless_overridden() {
    let f = Arc::new(Fixture {
        spike_on: Some("blue"),
        ..Fixture::default()
    });
    let a = app(f.clone());
    let (status, html, _) = post(
        &a,
        "/channels/trade/actions",
        &signed_in(),
        &format!("csrf={}&action=ratio&blue_percent=50", signed_csrf()),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(html.contains("id=\"refusal\""), "{html}");
    assert!(html.contains("blue error rate 31.00%"));
    assert!(html.contains("name=\"override\""));
    assert!(f.writes.lock().is_empty());
    // Moving traffic away from blue is fine.
    let (status, _, _) = post(
        &a,
        "/channels/trade/actions",
        &signed_in(),
        &format!("csrf={}&action=ratio&blue_percent=0", signed_csrf()),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (status, _, _) = post(
        &a,
        "/channels/trade/actions",
        &signed_in(),
        &format!(
            "csrf={}&action=ratio&blue_percent=50&override=1",
            signed_csrf()
        ),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let w = f.writes.lock();
    assert_eq!(w.len(), 2);
    assert_eq!(w[1].1, Action::Ratio(50));
    let note = w[1].2.as_deref().expect("override recorded");
    assert!(
        note.starts_with("override: refused: blue_percent 10 → 50"),
        "{note}"
    );
    // The override is sent as `force`: the control plane's guard lets it through.
    assert_eq!(f.forced.lock().as_slice(), &[false, true]);
}

#[tokio::test]
async fn live_stream_and_assets_are_served() {
    let a = app(Arc::default());
    let (status, js, _) = get(&a, "/assets/live.js", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(js.contains("EventSource(\"/live\")"));
    let (status, css, _) = get(&a, "/assets/style.css", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(css.contains("prefers-color-scheme: dark"));
    let res = a
        .clone()
        .oneshot(Request::get("/live").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(res.headers()[header::CONTENT_TYPE], "text/event-stream");
}

#[tokio::test]
async fn a_write_carries_the_version_its_confirmation_page_showed() {
    let f = Arc::new(Fixture::default());
    let a = app(f.clone());
    let (status, html, _) = get(
        &a,
        "/channels/trade/confirm?action=ratio&preset=50",
        Some(&signed_in()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        html.contains("name=\"version\" value=\"7\""),
        "the form carries the channel's version: {html}"
    );
    // A version that is not a number is refused before anything is written.
    let (status, html, _) = post(
        &a,
        "/channels/trade/actions",
        &signed_in(),
        &format!(
            "csrf={}&action=ratio&blue_percent=50&version=seven",
            signed_csrf()
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(html.contains("version: the channel version"), "{html}");
    assert!(f.writes.lock().is_empty());
    let (status, _, _) = post(
        &a,
        "/channels/trade/actions",
        &signed_in(),
        &format!(
            "csrf={}&action=ratio&blue_percent=50&version=7",
            signed_csrf()
        ),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    // A form without a version (an older page) writes without the check.
    let (status, _, _) = post(
        &a,
        "/channels/trade/actions",
        &signed_in(),
        &format!("csrf={}&action=finish", signed_csrf()),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(f.if_matches.lock().as_slice(), &[Some(7), None]);
}
