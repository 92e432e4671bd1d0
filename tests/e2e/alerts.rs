//! Live alerts against a real Alertmanager (Debian `prometheus-alertmanager`): the 300–420 s
//! slice of release-walk (order-blue errors at 8 %) is replayed over OTLP/HTTP in real time,
//! shifted to the present, into `dyeline serve`; the one-sided error spike alert must appear
//! in Alertmanager with its labels, and resolve once the spike is over.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::util::*;

const TOKEN: &str = "e2e-alerts-token-0001";
const S: i64 = 1_000_000_000;

pub(crate) struct Alertmanager {
    pub(crate) child: Child,
    pub(crate) url: String,
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(crate) fn start_alertmanager(dir: &std::path::Path) -> Alertmanager {
    let cfg = dir.join("alertmanager.yml");
    std::fs::write(
        &cfg,
        "route:\n  receiver: blackhole\n  group_wait: 1s\nreceivers:\n  - name: blackhole\n",
    )
    .unwrap();
    let port = free_port();
    let child = Command::new("prometheus-alertmanager")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.path={}", dir.join("am-data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--cluster.listen-address=")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus-alertmanager runs (apt-get install prometheus-alertmanager)");
    let am = Alertmanager {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if reqwest::blocking::get(format!("{}/-/ready", am.url))
            .is_ok_and(|r| r.status().is_success())
        {
            return am;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("alertmanager did not become ready");
}

pub(crate) fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

fn shift_field(v: &mut Value, key: &str, shift: i64) -> i64 {
    let t: i64 = match &v[key] {
        Value::String(s) => s.parse().unwrap(),
        Value::Number(n) => n.as_i64().unwrap(),
        _ => panic!("no {key}"),
    };
    v[key] = json!((t + shift).to_string());
    t + shift
}

/// The slice's export requests, times shifted by `shift`, each with the time to send it (its
/// newest shifted end time), in send order.
fn slice(from: i64, to: i64, shift: i64) -> Vec<(i64, String)> {
    let path = shared_dir().join("fixtures/analysis/release-walk/spans.jsonl.gz");
    let file = std::fs::File::open(path).unwrap();
    let reader = BufReader::new(flate2::read::MultiGzDecoder::new(file));
    let mut out = Vec::new();
    for line in reader.lines() {
        let mut req: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let mut newest = i64::MIN;
        let mut any = false;
        for rs in req["resourceSpans"].as_array_mut().unwrap() {
            for ss in rs["scopeSpans"].as_array_mut().unwrap() {
                let spans = ss["spans"].as_array_mut().unwrap();
                spans.retain(|s| {
                    let t: i64 = s["startTimeUnixNano"].as_str().unwrap().parse().unwrap();
                    (from..to).contains(&t)
                });
                for s in spans.iter_mut() {
                    shift_field(s, "startTimeUnixNano", shift);
                    newest = newest.max(shift_field(s, "endTimeUnixNano", shift));
                    any = true;
                }
            }
        }
        if any {
            out.push((newest, req.to_string()));
        }
    }
    out.sort_by_key(|(t, _)| *t);
    out
}

/// The alerts named `alertname` that Alertmanager holds.
pub(crate) fn am_alerts(am: &Alertmanager, alertname: &str) -> Vec<Value> {
    let v: Value = reqwest::blocking::get(format!("{}/api/v2/alerts", am.url))
        .unwrap()
        .json()
        .unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .filter(|a| a["labels"]["alertname"] == alertname)
        .cloned()
        .collect()
}

fn am_spike_alerts(am: &Alertmanager) -> Vec<Value> {
    am_alerts(am, "DyelineErrorSpike")
        .into_iter()
        .filter(|a| a["labels"]["app"] == "order")
        .collect()
}

#[test]
fn live_error_spike_alert_reaches_alertmanager_and_resolves() {
    let dir = temp_dir();
    let am = start_alertmanager(dir.path());
    let cfg = dir.path().join("dyeline.toml");
    std::fs::write(
        &cfg,
        format!(
            "[alerts]\nalertmanager_url = \"{}\"\ninterval = \"1s\"\nlateness = \"5s\"\nresend_interval = \"10s\"\n",
            am.url
        ),
    )
    .unwrap();
    let s = Server::start_with(
        &dir.path().join("data"),
        &[("DYELINE_API_TOKEN", TOKEN)],
        &["--config", cfg.to_str().unwrap()],
    );
    let client = reqwest::blocking::Client::new();
    let api = |method: &str, path: &str, body: &str| {
        let r = client
            .request(method.parse().unwrap(), format!("http://{}{path}", s.api))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.text().unwrap());
    };
    api(
        "PUT",
        "/api/v1/channels/trade",
        r#"{"apps": ["order", "inventory", "notify", "settle"]}"#,
    );
    api("POST", "/api/v1/channels/trade/start", "");
    api(
        "POST",
        "/api/v1/channels/trade/ratio",
        r#"{"blue_percent": 50}"#,
    );

    // Fixture second 300 lands on the next whole minute (windows align to Unix minutes).
    let t0: i64 = 1_735_736_400 * S;
    let minute = 60 * S;
    let target = (now_ns() / minute + 1) * minute;
    let batches = slice(t0 + 300 * S, t0 + 420 * S, target - (t0 + 300 * S));
    assert!(batches.len() > 50, "{} batches", batches.len());
    let mut fired_at = None;
    for (send_at, body) in &batches {
        let wait = send_at - now_ns();
        if wait > 0 {
            std::thread::sleep(Duration::from_nanos(wait as u64));
        }
        assert_eq!(post_json(&s, body).status, 200);
        if fired_at.is_none() && !am_spike_alerts(&am).is_empty() {
            fired_at = Some(now_ns());
        }
    }
    // The spike alert is in Alertmanager with its labels (poll a little past the replay).
    let deadline = Instant::now() + Duration::from_secs(60);
    while fired_at.is_none() && Instant::now() < deadline {
        if !am_spike_alerts(&am).is_empty() {
            fired_at = Some(now_ns());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let fired_at = fired_at.expect("DyelineErrorSpike reached Alertmanager");
    assert!(
        fired_at < target + 120 * S + 10 * S,
        "fired {} s after the slice began",
        (fired_at - target) / S
    );
    let alerts = am_spike_alerts(&am);
    let labels = &alerts[0]["labels"];
    assert_eq!(
        (
            &labels["channel"],
            &labels["color"],
            &labels["kind"],
            &labels["type"]
        ),
        (
            &json!("trade"),
            &json!("blue"),
            &json!("RPC"),
            &json!("error_spike")
        )
    );
    assert!(
        alerts[0]["annotations"]["summary"]
            .as_str()
            .unwrap()
            .contains("< 0.01")
    );
    assert!(
        alerts[0]["generatorURL"]
            .as_str()
            .unwrap()
            .contains("/channels/trade")
    );
    let exemplars = alerts[0]["annotations"]["exemplar_trace_ids"]
        .as_str()
        .unwrap();
    assert!(!exemplars.is_empty() && exemplars.split(',').count() <= 5);
    // the channel-level alert too, and nothing on green
    let all: Value = client
        .get(format!("http://{}/api/v1/alerts?state=firing", s.api))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let firing = all["alerts"].as_array().unwrap();
    assert!(firing.iter().any(
        |a| a["labels"]["alertname"] == "DyelineErrorSpike" && a["labels"].get("app").is_none()
    ));
    assert!(!firing.iter().any(|a| a["labels"]["color"] == "green"));

    // The channel summary of the replayed minutes comes from the live per-minute rollups
    // and counts what a scan of the spans counts; its percentiles are estimates within 1 %
    // of a sample at the rank (the scan's nearest rank may sit one sample off).
    let summary = |exact: bool| -> Value {
        client
            .get(format!(
                "http://{}/api/v1/channels/trade/summary?from={target}&to={}&step=60s&exact={exact}",
                s.api,
                target + 2 * minute
            ))
            .send()
            .unwrap()
            .json()
            .unwrap()
    };
    let (rolled, scanned) = (summary(false), summary(true));
    assert_eq!(rolled["percentiles"], "estimated", "{rolled}");
    assert_eq!(scanned["percentiles"], "exact");
    let (rs, ss) = (
        rolled["steps"].as_array().unwrap(),
        scanned["steps"].as_array().unwrap(),
    );
    assert_eq!(rs.len(), 2);
    for (r, x) in rs.iter().zip(ss) {
        for color in ["blue", "green"] {
            assert_eq!(r[color]["requests"], x[color]["requests"], "{r} vs {x}");
            assert_eq!(r[color]["errors"], x[color]["errors"], "{r} vs {x}");
            if let (Some(a), Some(b)) = (r[color]["p50_ms"].as_f64(), x[color]["p50_ms"].as_f64()) {
                assert!((a - b).abs() <= 0.1 * b, "p50 {a} vs exact {b}");
            }
        }
        assert_eq!(r["unknown_requests"], x["unknown_requests"]);
        assert_eq!(r["blue_share"], x["blue_share"]);
        assert_eq!(r["blue_percent"], x["blue_percent"]);
    }
    assert!(
        rs[0]["blue"]["requests"].as_u64().unwrap() > 100,
        "{rolled}"
    );

    // After the spike: resolved in Dyeline, and gone from Alertmanager's active alerts.
    let deadline = Instant::now() + Duration::from_secs(150);
    loop {
        let v: Value = client
            .get(format!("http://{}/api/v1/alerts?state=resolved", s.api))
            .send()
            .unwrap()
            .json()
            .unwrap();
        let resolved = v["alerts"].as_array().unwrap().iter().any(|a| {
            a["labels"]["alertname"] == "DyelineErrorSpike" && a["labels"]["app"] == "order"
        });
        if resolved && am_spike_alerts(&am).is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the spike alert did not resolve: {v}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// `dyeline_orphan_spans_total`: spans of channel traces whose parent never arrived, each
/// counted once, `trace_quiet` after its start: two orphans (one under a root that did
/// arrive, one alone) among spans whose parents are all there.
#[test]
fn orphan_spans_are_counted_once_each_after_the_trace_quiet() {
    let dir = temp_dir();
    let s = Server::start(
        &dir.path().join("data"),
        &[
            ("DYELINE_API_TOKEN", TOKEN),
            ("DYELINE_ALERTS__INTERVAL", "1s"),
            ("DYELINE_ALERTS__TRACE_QUIET", "1s"),
        ],
    );
    let client = reqwest::blocking::Client::new();
    for (path, body) in [
        ("/api/v1/channels/trade", r#"{"apps": ["order", "stock"]}"#),
        ("/api/v1/channels/trade/start", ""),
    ] {
        let r = client
            .request(
                if body.is_empty() { "POST" } else { "PUT" }
                    .parse()
                    .unwrap(),
                format!("http://{}{path}", s.api),
            )
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.text().unwrap());
    }
    let orphans = || {
        s.metrics()
            .lines()
            .find_map(|l| l.strip_prefix("dyeline_orphan_spans_total "))
            .and_then(|v| v.parse::<f64>().ok())
            .expect("dyeline_orphan_spans_total in /metrics")
    };
    assert_eq!(orphans(), 0.0);
    // Sent after the evaluator's first pass (which only marks where counting starts).
    std::thread::sleep(Duration::from_millis(2500));
    let t = now_ns();
    // (trace, span, parent, app): trace 1 whole; trace 2's stock span names a parent that
    // never comes; trace 3 is a lone span under a missing parent.
    let spans = [
        (1, 1, None, "order"),
        (1, 2, Some(1), "stock"),
        (2, 3, None, "order"),
        (2, 4, Some(99), "stock"),
        (3, 5, Some(98), "order"),
    ];
    let body: Vec<String> = spans
        .iter()
        .map(|&(trace, span, parent, app): &(u64, u64, Option<u64>, &str)| {
            let parent = parent.map_or(String::new(), |p| format!(r#""parentSpanId":"{p:016x}","#));
            format!(
                r#"{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"{app}"}}}},{{"key":"service.instance.id","value":{{"stringValue":"{app}-blue-1"}}}}]}},"scopeSpans":[{{"spans":[{{"traceId":"{trace:032x}","spanId":"{span:016x}",{parent}"name":"op","kind":2,"startTimeUnixNano":"{t}","endTimeUnixNano":"{}"}}]}}]}}"#,
                t + 1_000_000
            )
        })
        .collect();
    let r = post_json(&s, &format!(r#"{{"resourceSpans":[{}]}}"#, body.join(",")));
    assert_eq!(r.status, 200, "{}", r.text());
    let deadline = Instant::now() + Duration::from_secs(20);
    while orphans() < 2.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(orphans(), 2.0);
    // Later evaluations read the same spans again and count nothing more.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(orphans(), 2.0);
}
