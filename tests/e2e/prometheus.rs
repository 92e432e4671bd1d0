//! `/metrics` for Prometheus and Grafana (issue 28, item 2): the release state as gauges
//! (`dyeline_channel_blue_percent`, `dyeline_channel_releasing`, `dyeline_alerts_firing`),
//! trace-id exemplars on the span series in OpenMetrics, the Prometheus text format to
//! whoever does not ask for OpenMetrics, every name passing `promtool check metrics` (Debian
//! `prometheus`), and a real Prometheus with exemplar storage scraping the server and
//! answering an exemplar's trace id through its query API.

use serde_json::Value;
use std::process::{Child, Command, Stdio};

use crate::alerts::{free_port, now_ns};
use crate::control::{TOKEN, write};
use crate::support::Server;
use crate::uploads::wait_until;
use crate::util::{metric, post_json, temp_dir};

/// A Prometheus process, killed on drop.
struct Prometheus {
    child: Child,
    url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An error span of `order` on its blue instance in trace `trace`, started now.
fn error_span(trace: u128) -> String {
    let start = now_ns();
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[
        {{"key":"service.name","value":{{"stringValue":"order"}}}},
        {{"key":"host.name","value":{{"stringValue":"order-blue-1"}}}}]}},
        "scopeSpans":[{{"spans":[{{"traceId":"{trace:032x}","spanId":"00000000000000a1",
        "name":"GET /order","kind":2,"startTimeUnixNano":"{start}",
        "endTimeUnixNano":"{}","status":{{"code":2}},
        "attributes":[{{"key":"x-deploy-channel-type","value":{{"stringValue":"trade=blue"}}}}]
        }}]}}]}}]}}"#,
        start + 30_000_000
    )
}

#[test]
fn prometheus_scrapes_the_release_state_and_reads_an_exemplar_back() {
    let dir = temp_dir();
    let s = Server::start(&dir.path().join("data"), &[("DYELINE_API_TOKEN", TOKEN)]);
    write(
        &s,
        "PUT",
        "/api/v1/channels/trade",
        Some(r#"{"apps": ["order"]}"#),
    );
    write(&s, "POST", "/api/v1/channels/trade/start", None);
    write(
        &s,
        "POST",
        "/api/v1/channels/trade/ratio",
        Some(r#"{"blue_percent": 30}"#),
    );
    let trace: u128 = 0x7e57_0000_0000_0000_0000_0000_0000_00e1;
    assert_eq!(post_json(&s, &error_span(trace)).status, 200);

    // The Prometheus text format by default: the gauges, no exemplar, no EOF.
    let text = s.metrics();
    let labels = [("channel", "trade")];
    assert_eq!(metric(&text, "dyeline_channel_blue_percent", &labels), 30.0);
    assert_eq!(metric(&text, "dyeline_channel_releasing", &labels), 1.0);
    assert_eq!(
        metric(&text, "dyeline_alerts_firing", &[("type", "error_spike")]),
        0.0
    );
    let series = [("app", "order"), ("color", "blue"), ("kind", "RPC")];
    assert_eq!(metric(&text, "dyeline_spans_errors_total", &series), 1.0);
    assert!(
        !text.contains("# EOF") && !text.contains("trace_id="),
        "{text}"
    );
    assert!(text.contains("# TYPE dyeline_spans_requests_total counter"));

    // promtool checks every name, type, unit and help line.
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (apt-get install prometheus)");
    std::io::Write::write_all(&mut check.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // OpenMetrics to a scraper asking for it: the error series' exemplar is the trace.
    let om = reqwest::blocking::Client::new()
        .get(format!("http://{}/metrics", s.api))
        .header("accept", "application/openmetrics-text; version=1.0.0")
        .send()
        .unwrap()
        .text()
        .unwrap();
    let hex = format!("{trace:032x}");
    let errors_line = om
        .lines()
        .find(|l| l.starts_with("dyeline_spans_errors_total{") && l.contains("app=\"order\""))
        .unwrap_or_else(|| panic!("{om}"));
    assert!(
        errors_line.contains(&format!("# {{trace_id=\"{hex}\"}} 1")),
        "{errors_line}"
    );
    assert!(om.trim_end().ends_with("# EOF"));

    // A real Prometheus with exemplar storage scrapes it and gives the trace back.
    let port = free_port();
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: dyeline\n    \
             static_configs:\n      - targets: ['{}']\n",
            s.api
        ),
    )
    .unwrap();
    let prom = Prometheus {
        child: Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--enable-feature=exemplar-storage")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus runs (apt-get install prometheus)"),
        url: format!("http://127.0.0.1:{port}"),
    };
    let query = |path: &str| -> Option<Value> {
        reqwest::blocking::get(format!("{}{path}", prom.url))
            .ok()?
            .json()
            .ok()
    };
    let now_s = now_ns() / 1_000_000_000;
    let exemplars = format!(
        "/api/v1/query_exemplars?query=dyeline_spans_errors_total&start={}&end={}",
        now_s - 600,
        now_s + 600
    );
    wait_until("Prometheus holds the error series' exemplar", 60, || {
        query(&exemplars).is_some_and(|v| v.to_string().contains(&hex))
    });
    let v = query("/api/v1/query?query=dyeline_channel_blue_percent{channel=%22trade%22}").unwrap();
    assert_eq!(v["data"]["result"][0]["value"][1], "30", "{v}");
}
