//! The lane detections live (domain §7, issue 25's "Live" acceptance): `dyeline serve` with a
//! lane group and a small presence window W. (a) A request tagged for lane gray served by a
//! base instance while the app's idle gray instance is kept present by its OTLP metrics
//! exports is a `lane_leak`: its alert (labels `lane_group`, `lane`, `app`) reaches a real
//! Alertmanager within 10 s + W of the span's arrival (the time measured is printed), shows on
//! the group's lanes page, and resolves by the lane window. (b) A gray instance killed mid-run: the tagged requests
//! served by base from its last signal on are `lane_fallback`s, counted, never found nor
//! alerted, while a leak planted before the kill is.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::alerts::{am_alerts, now_ns, start_alertmanager};
use crate::util::*;

const TOKEN: &str = "e2e-live-lanes-token-01";
const S: i64 = 1_000_000_000;
/// The presence window W of the tests' config.
const W: i64 = 3 * S;
/// The live evaluation's timing in the tests' config (`[alerts]`).
const TIMING: &str = "interval = \"500ms\"\nlateness = \"3s\"\ntrace_quiet = \"1s\"\n";

/// The config: fast evaluation, W = 3 s, 5 s lane windows, alerts to `alertmanager`.
fn config(dir: &std::path::Path, alertmanager: Option<&str>) -> std::path::PathBuf {
    let cfg = dir.join("dyeline.toml");
    let am = alertmanager
        .map(|u| format!("alertmanager_url = \"{u}\"\n"))
        .unwrap_or_default();
    std::fs::write(
        &cfg,
        format!(
            "[alerts]\n{am}{TIMING}resend_interval = \"10s\"\n\n\
             [analyzer.lanes]\npresence_window = \"3s\"\nwindow = \"5s\"\n"
        ),
    )
    .unwrap();
    cfg
}

/// Starts the server with `cfg` and puts lane group `mall` over `apps` (lane gray falls
/// back to base).
fn start(dir: &std::path::Path, cfg: &std::path::Path, apps: &str) -> Server {
    let s = Server::start_with(
        &dir.join("data"),
        &[("DYELINE_API_TOKEN", TOKEN)],
        &["--config", cfg.to_str().unwrap()],
    );
    let r = reqwest::blocking::Client::new()
        .put(format!("http://{}/api/v1/lane-groups/mall", s.api))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(format!(r#"{{"apps": {apps}, "lanes": {{"gray": {{}}}}}}"#))
        .send()
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().unwrap());
    s
}

/// The resource attributes of `instance` of `app`, in lane `lane` (`None`: base).
pub(crate) fn resource(app: &str, instance: &str, lane: Option<&str>) -> String {
    let lane = lane
        .map(|l| format!(r#",{{"key":"deploy.lane","value":{{"stringValue":"{l}"}}}}"#))
        .unwrap_or_default();
    format!(
        r#"{{"attributes":[{{"key":"service.name","value":{{"stringValue":"{app}"}}}},
        {{"key":"service.instance.id","value":{{"stringValue":"{instance}"}}}}{lane}]}}"#
    )
}

/// Sends one SERVER root span of trace `trace` (started now, 20 ms long) tagged for lane
/// gray (`x-deploy-lane`), served by `instance` of `app` in `lane`; returns its start.
pub(crate) fn request(
    s: &Server,
    trace: u128,
    app: &str,
    instance: &str,
    lane: Option<&str>,
) -> i64 {
    let start = now_ns();
    let body = format!(
        r#"{{"resourceSpans":[{{"resource":{},"scopeSpans":[{{"spans":[{{
        "traceId":"{trace:032x}","spanId":"{:016x}","name":"GET /order","kind":2,
        "startTimeUnixNano":"{start}","endTimeUnixNano":"{}",
        "attributes":[{{"key":"x-deploy-lane","value":{{"stringValue":"gray"}}}}]}}]}}]}}]}}"#,
        resource(app, instance, lane),
        trace as u64 | 1,
        start + 20_000_000
    );
    let r = post_json(s, &body);
    assert_eq!(r.status, 200, "{}", r.text());
    start
}

/// An instance's periodic OTLP metrics export (a gauge point at the time of sending, every
/// 300 ms) until stopped: what keeps an idle instance present.
pub(crate) struct Exporter {
    stop: Arc<AtomicBool>,
    sent: Arc<Mutex<Vec<i64>>>,
    thread: Option<JoinHandle<()>>,
}

impl Exporter {
    pub(crate) fn start(s: &Server, app: &str, instance: &str, lane: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(Mutex::new(Vec::new()));
        let (http, res) = (s.http, resource(app, instance, Some(lane)));
        let (stop2, sent2) = (Arc::clone(&stop), Arc::clone(&sent));
        let thread = std::thread::spawn(move || {
            let client = reqwest::blocking::Client::new();
            while !stop2.load(Ordering::SeqCst) {
                let t = now_ns();
                let body = format!(
                    r#"{{"resourceMetrics":[{{"resource":{res},"scopeMetrics":[{{"metrics":[{{
                    "name":"up","gauge":{{"dataPoints":[{{"timeUnixNano":"{t}","asInt":"1"}}]}}}}]}}]}}]}}"#
                );
                let r = client
                    .post(format!("http://{http}/v1/metrics"))
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .unwrap();
                assert!(r.status().is_success());
                sent2.lock().unwrap().push(t);
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        Exporter {
            stop,
            sent,
            thread: Some(thread),
        }
    }

    /// Stops exporting (the instance is killed); returns the time of its last signal.
    fn kill(&mut self) -> i64 {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        *self.sent.lock().unwrap().last().expect("exported")
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn get(s: &Server, path: &str) -> (u16, Value) {
    let r = reqwest::blocking::get(format!("http://{}{path}", s.api)).unwrap();
    (r.status().as_u16(), r.json().unwrap())
}

/// The lane alerts of the alert book (`/api/v1/alerts`).
fn lane_alerts(s: &Server) -> Vec<Value> {
    let (_, v) = get(s, "/api/v1/alerts");
    v["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["labels"].get("lane").is_some())
        .cloned()
        .collect()
}

#[test]
fn a_planted_lane_leak_alerts_within_ten_seconds_plus_the_presence_window() {
    let dir = temp_dir();
    let am = start_alertmanager(dir.path());
    let cfg = config(dir.path(), Some(&am.url));
    let s = start(dir.path(), &cfg, r#"["gateway", "order"]"#);
    // The idle gray instance of order is present by its metrics exports alone.
    let mut gray = Exporter::start(&s, "order", "order-gray-1", "gray");
    std::thread::sleep(Duration::from_millis(1_000));

    let arrived = now_ns();
    let t = request(&s, 0xa11, "order", "order-base-1", None);
    let am_leaks = || am_alerts(&am, "DyelineLaneLeak");
    let deadline = Instant::now() + Duration::from_secs(20);
    let fired = loop {
        let found = am_leaks();
        if !found.is_empty() {
            break found;
        }
        assert!(
            Instant::now() < deadline,
            "no DyelineLaneLeak in Alertmanager"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let took = now_ns() - arrived;
    eprintln!(
        "live lane leak: span arrival → alert firing in Alertmanager {:.2} s (W = {} s; {})",
        took as f64 / S as f64,
        W / S,
        TIMING.trim().replace('\n', ", ")
    );
    assert!(took <= 10 * S + W, "took {} ms", took / 1_000_000);
    let labels = &fired[0]["labels"];
    for (k, v) in [
        ("type", "lane_leak"),
        ("lane_group", "mall"),
        ("lane", "gray"),
        ("app", "order"),
        ("to_lane", "base"),
        ("from_app", "(none)"),
        ("kind", "RPC"),
        ("reason", "tag_ignored"),
    ] {
        assert_eq!(labels[k], v, "{k}: {labels}");
    }
    assert!(labels.get("channel").is_none(), "{labels}");
    assert!(
        fired[0]["generatorURL"]
            .as_str()
            .unwrap()
            .ends_with("/lanes/mall")
    );
    assert_eq!(
        fired[0]["annotations"]["exemplar_trace_ids"],
        format!("{:032x}", 0xa11)
    );

    // The lanes page of mall lists the live alert, and the index counts it.
    let page = |path: &str| {
        let r = reqwest::blocking::get(format!("http://{}{path}", s.api)).unwrap();
        assert_eq!(r.status(), 200);
        r.text().unwrap().replace("<!>", "")
    };
    let mall = page("/lanes/mall");
    let row = &mall[mall.find(r#"data-alert="lane_leak""#).expect("alert row")..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains("DyelineLaneLeak") && row.contains("firing"),
        "{row}"
    );
    assert!(row.contains("lane=gray"), "{row}");
    let index = page("/lanes");
    let group = &index[index.find(r#"data-group="mall""#).expect("mall row")..];
    let group = &group[..group.find("</tr>").unwrap()];
    assert!(
        group.contains(r#"<td class="num alerting">1</td>"#),
        "{group}"
    );

    // The finding in the API: its own fields, and a type filter that knows the lane types.
    let (status, v) = get(&s, "/api/v1/findings?type=lane_leak");
    assert_eq!(status, 200);
    let findings = v["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{v}");
    let f = &findings[0];
    assert_eq!(
        (
            &f["type"],
            &f["group"],
            &f["to_app"],
            &f["trace_id"],
            &f["t_unix_nano"]
        ),
        (
            &Value::from("lane_leak"),
            &Value::from("mall"),
            &Value::from("order"),
            &Value::from(format!("{:032x}", 0xa11)),
            &Value::from(t.to_string())
        )
    );
    assert_eq!(v["lane_counts"]["lane_fallback"], 0, "{v}");
    let (_, mall) = get(&s, "/api/v1/findings?lane_group=mall");
    assert_eq!(mall["findings"], v["findings"], "{mall}");
    let (_, other) = get(&s, "/api/v1/findings?lane_group=_ungrouped");
    assert_eq!(other["findings"], Value::Array(Vec::new()), "{other}");
    let (_, doc) = get(&s, "/api/v1/openapi.json");
    let params = doc["paths"]["/api/v1/findings"]["get"]["parameters"].to_string();
    assert!(
        params.contains("lane_group") && params.contains("lane_leak"),
        "{params}"
    );
    assert!(doc["components"]["schemas"]["LaneCounts"].is_object());
    let (status, bad) = get(&s, "/api/v1/findings?type=lane_fallback");
    assert_eq!(status, 400);
    let message = bad["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("lane_leak") && message.contains("lane_error_spike"),
        "{message}"
    );

    // Resolved once a lane window (5 s) and the lateness (3 s) passed without a new one.
    gray.kill();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let alerts = lane_alerts(&s);
        if alerts.len() == 1 && alerts[0]["state"] == "resolved" && am_leaks().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "not resolved: {alerts:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_killed_gray_instance_leaves_fallbacks_that_are_counted_and_never_alerted() {
    let dir = temp_dir();
    let cfg = config(dir.path(), None);
    let s = start(dir.path(), &cfg, r#"["stock"]"#);
    let mut gray = Exporter::start(&s, "stock", "stock-gray-1", "gray");
    std::thread::sleep(Duration::from_millis(600));
    // While it runs: one request served in lane, one leaked (the control: the evaluation
    // does find and alert what it should).
    request(&s, 0xb01, "stock", "stock-gray-1", Some("gray"));
    request(&s, 0xb02, "stock", "stock-base-1", None);
    std::thread::sleep(Duration::from_millis(600));
    let last = gray.kill();
    // From its last signal on, gray has no capacity: base serves its tagged requests.
    let mut fallbacks = Vec::new();
    for i in 0..8u128 {
        std::thread::sleep(Duration::from_millis(500));
        fallbacks.push(request(&s, 0xc00 + i, "stock", "stock-base-1", None));
    }
    assert!(fallbacks[0] > last && fallbacks[7] > last + W);
    // Judged with hindsight: W after the last request, plus the trace quiet time and a few
    // evaluations.
    let settled = fallbacks[7] + W + 3 * S;
    std::thread::sleep(Duration::from_nanos((settled - now_ns()).max(0) as u64));

    let (_, v) = get(&s, "/api/v1/findings");
    let lane_findings: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["type"].as_str().unwrap().starts_with("lane_"))
        .collect();
    assert_eq!(lane_findings.len(), 1, "{v}");
    assert_eq!(lane_findings[0]["type"], "lane_leak");
    assert_eq!(lane_findings[0]["trace_id"], format!("{:032x}", 0xb02));
    assert_eq!(v["lane_counts"]["lane_fallback"], 8, "{v}");
    assert_eq!(v["lane_counts"]["failover"], 0, "{v}");

    // Alerts: the leak only; nothing for the fallbacks.
    let alerts = lane_alerts(&s);
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_eq!(alerts[0]["labels"]["type"], "lane_leak");
    assert_eq!(
        alerts[0]["exemplar_trace_ids"],
        serde_json::json!([format!("{:032x}", 0xb02)])
    );
}
