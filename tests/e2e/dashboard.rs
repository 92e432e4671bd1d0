//! The dashboard (issue 5) in real headless Chromium, driven over WebDriver (chromedriver +
//! fantoccini): release-walk's planted findings on the channel page and a hop's trace; sign-in,
//! start and a blue_percent change through the forms; the spike guard refusing an increase
//! while a live error spike fires, then the override, recorded with the event. The same pages
//! fetched without JavaScript (plain HTTP) carry the same numbers. Every page visited is
//! written as a PNG to `target/e2e-screenshots/` (or `$E2E_SCREENSHOT_DIR`).
//!
//! The browser and the HTML helpers are [`crate::browser`]'s.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::browser::*;
use crate::fixtures;
use crate::util::*;

#[test]
fn release_walk_overview_channel_findings_and_hop_trace() {
    let (_dir, data) = fixtures::import("release-walk", "spans.jsonl.gz");
    let s = Server::start(&data, &[]);
    let mut b = Browser::start("release-walk", base(&s));
    let expected = fixtures::expected("release-walk");

    // Overview: trade and global, trade's blue_percent as the control plane has it.
    b.goto("/");
    b.wait_for("table#channels tr[data-channel=trade]");
    b.shot("overview");
    let overview = b.rows("table#channels tbody tr");
    let ids: Vec<&str> = overview.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(ids, ["global", "trade"], "{overview:?}");
    let trade_api = get_json(&s, "/api/v1/channels/trade");
    let trade = find_row(&overview, &[(0, "trade")]).unwrap();
    assert_eq!(
        trade[2],
        format!("{}%", trade_api["blue_percent"]),
        "{trade:?} vs {trade_api}"
    );
    assert_eq!(trade[1], trade_api["state"].as_str().unwrap());
    // release-walk has traffic on both colours in its last hour.
    for col in [4, 5] {
        assert_ne!(trade[col], "0.0/s", "{trade:?}");
    }

    // The same overview without JavaScript: the same rows, number for number.
    let html = fetch_html(&s, "/");
    assert_eq!(html_rows(&html, "channels"), overview);

    // Channel trade, reached by its link.
    b.click_to("tr[data-channel=trade] a", "#channel-id");
    assert_eq!(b.text("#channel-id"), "trade");
    b.shot("channel-trade");
    let blue_percent = b.text("#blue-percent");
    assert_eq!(blue_percent, trade_api["blue_percent"].to_string());
    // Blue against green latency: both sides served requests in the range; each colour's
    // histogram holds every one of its requests, and its percentiles are in order.
    let summary = b.rows("#latency-summary tbody tr");
    let histogram = b.rows("#latency-histogram tbody tr");
    assert!(!histogram.is_empty(), "{summary:?}");
    for (k, row) in summary.iter().enumerate() {
        let requests: u64 = row[1].parse().unwrap();
        assert!(requests > 0, "{row:?}");
        // Cells: bucket, blue bar, "share% (n)", green bar, "share% (n)".
        let in_buckets: u64 = histogram
            .iter()
            .map(|h| {
                let cell = &h[2 + 2 * k];
                cell[cell.find('(').unwrap() + 1..cell.find(')').unwrap()]
                    .parse::<u64>()
                    .unwrap()
            })
            .sum();
        assert_eq!(in_buckets, requests, "{row:?} {histogram:?}");
        let ms = |c: &str| c.trim_end_matches(" ms").parse::<f64>().unwrap();
        assert!(
            ms(&row[2]) <= ms(&row[3]) && ms(&row[3]) <= ms(&row[4]),
            "{row:?}"
        );
    }
    assert_eq!(summary.len(), 2, "{summary:?}");
    let findings = b.rows("#findings tbody tr");
    let hops = b.rows("#hops tbody tr");
    let missing = b.rows("#missing tbody tr");
    assert!(!hops.is_empty(), "#hops is empty");

    // Every finding planted in release-walk (all of them are in channel trade) has its row.
    let mut seen_types = std::collections::BTreeSet::new();
    for p in expected["planted"].as_array().unwrap() {
        let f = &p["finding"];
        assert_eq!(f["channel"], "trade", "{p}");
        let ty = f["type"].as_str().unwrap();
        let st = |k: &str| f[k].as_str().unwrap_or("").to_owned();
        seen_types.insert(ty.to_owned());
        let found = match ty {
            "cross_color_hop" => {
                let from = format!("{} {}", st("from_app"), st("from_color"));
                let to = format!("{} {}", st("to_app"), st("to_color"));
                let via: Vec<&str> = f["via"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap())
                    .collect();
                let via = if via.is_empty() {
                    "–".to_owned()
                } else {
                    via.join(" → ")
                };
                find_row(
                    &hops,
                    &[
                        (0, &from),
                        (1, &to),
                        (2, &st("kind")),
                        (3, &st("reason")),
                        (4, &via),
                    ],
                )
                .is_some()
            }
            "missing_decision" => find_row(
                &missing,
                &[(0, &st("caller_app")), (1, &st("app")), (2, &st("kind"))],
            )
            .is_some(),
            _ => {
                let b_rows = b.rows(&format!("#findings tr[data-finding={ty}]"));
                let app = if f["app"].is_null() {
                    "(all)".to_owned()
                } else {
                    st("app")
                };
                let mut want = vec![(1, app.as_str()), (2, f["color"].as_str().unwrap())];
                let kind = st("kind");
                want.push((3, &kind));
                let instance = st("instance");
                if ty == "instance_skew" {
                    want.push((4, &instance));
                }
                // A drained-side row names its instances (possibly several) in its detail.
                find_row(&b_rows, &want).is_some_and(|r| {
                    ty != "drained_side" || r[5].contains(&format!("({instance})"))
                })
            }
        };
        assert!(
            found,
            "planted {} not shown: findings {findings:?} hops {hops:?} missing {missing:?}",
            p["id"]
        );
    }
    for ty in [
        "drained_side",
        "cross_color_hop",
        "ratio_deviation",
        "instance_skew",
        "error_spike",
    ] {
        assert!(seen_types.contains(ty), "release-walk plants no {ty}");
    }
    // Drained-side traffic by kind: the JOB and the MQ windows.
    let drained = b.text("#drained-by-kind");
    assert!(
        drained.contains("JOB: 1 window(s)") && !drained.contains("MQ: 0"),
        "{drained}"
    );

    // The same channel page without JavaScript: the same numbers.
    let path = b
        .current_url()
        .split_once(&b.base)
        .map(|(_, p)| p.to_owned())
        .unwrap();
    let html = fetch_html(&s, &path);
    assert_eq!(html_by_id(&html, "blue-percent"), blue_percent);
    assert_eq!(html_rows(&html, "findings"), findings);
    assert_eq!(html_rows(&html, "hops"), hops);
    assert_eq!(html_rows(&html, "missing"), missing);
    assert_eq!(html_rows(&html, "instances"), b.rows("#instances tbody tr"));
    assert_eq!(html_rows(&html, "apps"), b.rows("#apps tbody tr"));

    // Follow the legacy-proxy hop's first example trace: the offending span is marked.
    let legacy = expected["planted"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "legacy-hop")
        .unwrap();
    let row = hops
        .iter()
        .position(|r| r[4] == "legacy-proxy")
        .expect("the legacy-proxy hop row");
    let link = format!("#hops tbody tr:nth-child({}) a.trace", row + 1);
    let href = b.js(
        "return document.querySelector(arguments[0]).getAttribute('href');",
        vec![json!(link)],
    );
    let trace_id = href
        .as_str()
        .unwrap()
        .strip_prefix("/traces/")
        .unwrap()
        .to_owned();
    assert!(
        legacy["trace_ids"]
            .as_array()
            .unwrap()
            .contains(&json!(trace_id)),
        "{trace_id} is not a planted legacy-proxy hop trace"
    );
    b.click_to(&link, "table#waterfall");
    b.shot("trace-hop");
    assert_eq!(b.text("#trace-id"), trace_id);
    let hop_rows = b.rows("table#waterfall tr.hop");
    assert_eq!(hop_rows.len(), 1, "{hop_rows:?}");
    // columns: span, kind, app, instance, host, colour, decisions, lane, status, duration,
    // bar, marks
    assert_eq!(hop_rows[0][2], "inventory", "{hop_rows:?}");
    assert_eq!(hop_rows[0][5], "blue", "{hop_rows:?}");
    assert!(hop_rows[0][11].contains("HOP"), "{hop_rows:?}");
    assert!(
        b.js(
            "return document.querySelector('tr.hop').dataset.spanId.length;",
            vec![]
        ) == json!(16)
    );
    assert_eq!(b.text("#hop-count"), "1");
    // The waterfall's bars are drawn to scale: the hop span (3–4 ms, last) is narrower than
    // the root (the whole trace) and starts to its right.
    let bars = b.js(
        "return Array.from(document.querySelectorAll('#waterfall tbody tr .fill'))\
           .map(f => { const r = f.getBoundingClientRect(); return [r.left, r.width]; });",
        vec![],
    );
    let bars: Vec<(f64, f64)> = serde_json::from_value(bars).unwrap();
    let (root, hop) = (bars[0], *bars.last().unwrap());
    assert!(
        hop.1 < root.1 * 0.8 && hop.0 > root.0,
        "waterfall bars not to scale: {bars:?}"
    );
    // The trace page without JavaScript: the same waterfall, the same span marked.
    let html = fetch_html(&s, &format!("/traces/{trace_id}"));
    assert_eq!(html_span_rows(&html), b.rows(SPAN_ROWS));
    let span_id = b.js(
        "return document.querySelector('tr.hop').dataset.spanId;",
        vec![],
    );
    let at = html
        .find(&format!("data-span-id=\"{}\"", span_id.as_str().unwrap()))
        .unwrap();
    let open = &html[html[..at].rfind("<tr").unwrap()..];
    let open = &open[..open.find('>').unwrap()];
    assert!(open.contains("class=\"span hop"), "{open}");
}

pub(crate) const ALICE: &str = "e2e-dashboard-alice-0001";

pub(crate) fn config_with_alice(dir: &std::path::Path, extra: &str) -> PathBuf {
    let cfg = dir.join("dyeline.toml");
    std::fs::write(
        &cfg,
        format!("[[api.tokens]]\nname = \"alice\"\ntoken = \"{ALICE}\"\nrole = \"write\"\n{extra}"),
    )
    .unwrap();
    cfg
}

/// Signs in through `/login?next=…` with `token`, ending on `next`.
fn sign_in(b: &mut Browser, token: &str, next: &str, next_css: &str) {
    b.goto(&format!("/login?next={next}"));
    b.wait_for("input#token");
    b.shot("login");
    b.type_into("input#token", token);
    b.click_to("button#login", next_css);
    // The token is in an HttpOnly cookie: scripts cannot read it.
    let cookies = b.js("return document.cookie;", vec![]);
    assert!(!cookies.as_str().unwrap_or("").contains(token), "{cookies}");
    assert!(b.text("nav .who").contains("signed in as alice"));
}

/// `(op, actor, blue_percent)` of channel `id`'s operations in the timeline.
fn timeline_of(s: &Server, id: &str) -> Vec<(String, String, Option<u64>)> {
    get_json(s, "/api/v1/timeline")["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["channel"] == id)
        .map(|e| {
            (
                e["op"].as_str().unwrap().to_owned(),
                e["actor"].as_str().unwrap().to_owned(),
                e["blue_percent"].as_u64(),
            )
        })
        .collect()
}

#[test]
fn login_start_and_set_blue_percent_through_forms() {
    let dir = temp_dir();
    let cfg = config_with_alice(dir.path(), "");
    let s = Server::start_with(
        &dir.path().join("data"),
        &[],
        &["--config", cfg.to_str().unwrap()],
    );
    api_write(
        &s,
        ALICE,
        "PUT",
        "/api/v1/channels/pay",
        r#"{"apps": ["payment", "ledger"]}"#,
    );
    let mut b = Browser::start("forms", base(&s));

    sign_in(&mut b, ALICE, "/channels/pay", "#channel-id");
    assert_eq!(b.text("#channel-id"), "pay");
    assert_eq!(b.text("#channel-state"), "idle");
    b.shot("channel-idle");

    // Start → confirm page → Confirm.
    b.click_to("button#start", "form#confirm-form");
    assert_eq!(
        b.text("#what"),
        "Start releasing channel pay (blue_percent 50)"
    );
    b.shot("confirm-start");
    b.click_to("button#confirm", "#flash");
    assert_eq!(b.text("#flash"), "Release started.");
    assert_eq!(b.text("#channel-state"), "releasing");
    assert_eq!(b.text("#blue-percent"), "50");

    // 10 in the field → Set… → confirm page → Confirm.
    b.type_into("input#blue-percent-field", "10");
    b.click_to("button#ratio-submit", "form#confirm-form");
    assert_eq!(b.text("#what"), "Set blue_percent of pay from 50 to 10");
    assert!(!b.has("#refusal"));
    b.shot("confirm-ratio");
    b.click_to("button#confirm", "#flash");
    assert_eq!(b.text("#flash"), "blue_percent set to 10.");
    assert_eq!(b.text("#blue-percent"), "10");
    assert_eq!(b.text("#channel-state"), "releasing");
    b.shot("channel-10");

    // The control API agrees, and alice made both changes.
    let ch = get_json(&s, "/api/v1/channels/pay");
    assert_eq!(ch["blue_percent"], 10, "{ch}");
    assert_eq!(ch["state"], "releasing", "{ch}");
    let tl = timeline_of(&s, "pay");
    assert_eq!(
        tl,
        [
            ("apps".to_owned(), "alice".to_owned(), None),
            ("start".to_owned(), "alice".to_owned(), None),
            ("ratio".to_owned(), "alice".to_owned(), Some(10)),
        ]
    );
    let events = get_json(&s, "/api/v1/channels/pay/events");
    let flows: Vec<(u64, u64)> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "flow_change")
        .map(|e| (e["from"].as_u64().unwrap(), e["to"].as_u64().unwrap()))
        .collect();
    assert_eq!(flows.last(), Some(&(50, 10)), "{events}");
    // The page's event log: newest first, actor alice.
    let log = b.rows("#events tbody tr");
    assert_eq!(log[0][2], "→ 10%", "{log:?}");
    assert!(log.iter().all(|r| r[3] == "alice"), "{log:?}");

    // A confirmation page that went stale: the channel moves to 30 through the API while the
    // page asking to set 20 is open. Confirming is refused (the page sent the version it
    // showed) and the channel keeps 30; nothing is written over the other change.
    b.type_into("input#blue-percent-field", "20");
    b.click_to("button#ratio-submit", "form#confirm-form");
    assert_eq!(b.text("#what"), "Set blue_percent of pay from 10 to 20");
    api_write(
        &s,
        ALICE,
        "POST",
        "/api/v1/channels/pay/ratio",
        r#"{"blue_percent": 30}"#,
    );
    b.click_to("button#confirm", "#write-error");
    assert_eq!(b.status(), 409);
    assert!(
        b.text("#write-error").contains("is at version"),
        "{}",
        b.text("#write-error")
    );
    b.shot("confirm-stale");
    let ch = get_json(&s, "/api/v1/channels/pay");
    assert_eq!(ch["blue_percent"], 30, "{ch}");
    assert_eq!(timeline_of(&s, "pay").len(), 4);
}

/// Sends live OTLP/JSON SERVER spans of `order` on blue (half of them errors) and green
/// (none) until dropped.
pub(crate) struct SpikeSender {
    stop: Arc<AtomicBool>,
    pub(crate) sent: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SpikeSender {
    pub(crate) fn start(s: &Server) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let url = format!("http://{}/v1/traces", s.http);
        let (st, se) = (stop.clone(), sent.clone());
        let thread = std::thread::spawn(move || {
            let client = reqwest::blocking::Client::new();
            let mut n: u64 = 0;
            let deadline = Instant::now() + Duration::from_secs(300);
            while !st.load(Ordering::Relaxed) && Instant::now() < deadline {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64;
                let resource = |color: &str, errors: bool, n: &mut u64| {
                    let spans: Vec<Value> = (0..10)
                        .map(|i| {
                            *n += 1;
                            let start = now - 20_000_000 + i * 1_000_000;
                            json!({
                                "traceId": format!("{:08x}{:024x}", *n, now),
                                "spanId": format!("{:016x}", *n + 1),
                                "name": "order.OrderService/Place",
                                "kind": 2,
                                "startTimeUnixNano": start.to_string(),
                                "endTimeUnixNano": (start + 5_000_000).to_string(),
                                "attributes": [
                                    {"key": "x-deploy-channel-type", "value": {"stringValue": format!("trade={color}")}},
                                    {"key": "rpc.system", "value": {"stringValue": "grpc"}},
                                ],
                                "status": if errors && i % 2 == 0 { json!({"code": 2}) } else { json!({}) },
                            })
                        })
                        .collect();
                    json!({
                        "resource": {"attributes": [
                            {"key": "service.name", "value": {"stringValue": "order"}},
                            {"key": "service.instance.id", "value": {"stringValue": format!("order-{color}-1")}},
                            {"key": "host.name", "value": {"stringValue": format!("order-{color}-1")}},
                        ]},
                        "scopeSpans": [{"spans": spans}],
                    })
                };
                let body = json!({"resourceSpans": [
                    resource("blue", true, &mut n),
                    resource("green", false, &mut n),
                ]});
                if client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.to_string())
                    .send()
                    .is_ok_and(|r| r.status().is_success())
                {
                    se.fetch_add(20, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        SpikeSender {
            stop,
            sent,
            thread: Some(thread),
        }
    }
}

impl Drop for SpikeSender {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(crate) fn blue_spike_firing(s: &Server) -> Option<Value> {
    get_json(s, "/api/v1/alerts?state=firing")["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| {
            a["labels"]["type"] == "error_spike"
                && a["labels"]["channel"] == "trade"
                && a["labels"]["color"] == "blue"
        })
        .cloned()
}

#[test]
fn spike_refusal_then_override_is_recorded() {
    let dir = temp_dir();
    let cfg = config_with_alice(
        dir.path(),
        "[analyzer.defaults]\nwindow = \"10s\"\ngrace = \"1s\"\nspike_min_requests = 20\n\
         [alerts]\ninterval = \"500ms\"\nlateness = \"2s\"\ntrace_quiet = \"1s\"\n",
    );
    let s = Server::start_with(
        &dir.path().join("data"),
        &[],
        &["--config", cfg.to_str().unwrap()],
    );
    api_write(
        &s,
        ALICE,
        "PUT",
        "/api/v1/channels/trade",
        r#"{"apps": ["order"]}"#,
    );
    api_write(&s, ALICE, "POST", "/api/v1/channels/trade/start", "");
    api_write(
        &s,
        ALICE,
        "POST",
        "/api/v1/channels/trade/ratio",
        r#"{"blue_percent": 10}"#,
    );

    // Live spans until the one-sided spike on blue fires (kept coming until the end).
    let sender = SpikeSender::start(&s);
    let deadline = Instant::now() + Duration::from_secs(60);
    let alert = loop {
        if let Some(a) = blue_spike_firing(&s) {
            break a;
        }
        assert!(
            Instant::now() < deadline,
            "no error_spike on blue after {} spans: {}",
            sender.sent.load(Ordering::Relaxed),
            get_json(&s, "/api/v1/alerts")
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let summary = alert["annotations"]["summary"].as_str().unwrap().to_owned();

    let mut b = Browser::start("spike", base(&s));
    sign_in(&mut b, ALICE, "/channels/trade", "#channel-id");
    assert_eq!(b.text("#blue-percent"), "10");
    let alerts = b.rows("#alerts tbody tr[data-alert=error_spike]");
    assert!(
        alerts.iter().any(|r| r[1] == "firing"),
        "the channel page lists the firing spike: {alerts:?}"
    );
    b.shot("channel-spiking");

    // Preset 50 → the confirm page already shows why it will be refused.
    b.click_to("button[name=preset][value='50']", "form#confirm-form");
    assert_eq!(b.text("#what"), "Set blue_percent of trade from 10 to 50");
    let reason = b.text("#refusal");
    assert!(
        reason.starts_with("refused: blue_percent 10 → 50 moves traffic to blue"),
        "{reason}"
    );
    assert!(
        reason.contains(summary.split_whitespace().next().unwrap()),
        "{reason} / {summary}"
    );
    b.shot("confirm-refusal");

    // Confirm without the override: 409, refused with the reason, nothing written.
    b.click_to("button#confirm", "#refusal");
    assert_eq!(b.status(), 409);
    let refused = b.text("#refusal");
    assert!(
        refused.starts_with("refused: blue_percent 10 → 50") && refused.contains("error spike"),
        "{refused}"
    );
    b.shot("refused-409");
    assert_eq!(get_json(&s, "/api/v1/channels/trade")["blue_percent"], 10);

    // Tick the override and confirm: written, with the override as the event's note.
    b.click("input#override");
    b.click_to("button#confirm", "#flash");
    assert_eq!(b.text("#flash"), "blue_percent set to 50.");
    assert_eq!(b.text("#blue-percent"), "50");
    let log = b.rows("#events tbody tr");
    let note = &log[0][4];
    assert_eq!(
        (log[0][2].as_str(), log[0][3].as_str()),
        ("→ 50%", "alice"),
        "{log:?}"
    );
    assert!(
        note.starts_with("override: refused: blue_percent 10 → 50"),
        "{log:?}"
    );
    b.shot("overridden");
    drop(sender);

    assert_eq!(get_json(&s, "/api/v1/channels/trade")["blue_percent"], 50);
    let events = get_json(&s, "/api/v1/channels/trade/events");
    let flow = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|e| e["event"] == "flow_change")
        .unwrap()
        .clone();
    assert_eq!(
        (flow["from"].as_u64(), flow["to"].as_u64()),
        (Some(10), Some(50))
    );
    let api_note = flow["note"].as_str().unwrap();
    assert!(api_note.starts_with("override:"), "{flow}");
    assert_eq!(api_note, note.as_str());
    // The earlier changes carry no note.
    assert!(
        events["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["seq"] != flow["seq"])
            .all(|e| e.get("note").is_none()),
        "{events}"
    );
}
