//! Presence (domain §7.1): the Python OpenTelemetry SDK's periodic metrics exporter and its
//! logs exporter keep an idle instance present in `presence` at the times they exported;
//! malformed metrics and logs bodies get the statuses trace bodies get (HTTP protobuf and JSON,
//! gzip, too large; gRPC plain and gzip-compressed), and are counted per signal; `dyeline
//! import` takes a metrics file beside a spans file and records each instance at each distinct
//! data point time.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::fixtures::sql_json;
use crate::util::*;

/// Runs `tests/python/export_presence.py`; returns the (signal, time) pairs it exported.
fn run_python(protocol: &str, endpoint: &str, instance: &str) -> Vec<(String, i64)> {
    let args = [
        "--protocol",
        protocol,
        "--endpoint",
        endpoint,
        "--instance",
        instance,
    ];
    let timing = ["--interval-ms", "300", "--run-ms", "1500"];
    python_json_lines("export_presence.py", &[&args[..], &timing[..]].concat())
        .into_iter()
        .map(|v| {
            (
                v["signal"].as_str().unwrap().to_owned(),
                v["time"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn an_idle_instance_is_present_at_its_sdks_export_times() {
    let dir = temp_dir();
    let s = Server::start(&dir.path().join("data"), &[]);
    let runs = [
        ("grpc", "pricing-idle-1", format!("http://{}", s.grpc)),
        ("http", "pricing-idle-2", format!("http://{}", s.http)),
    ];
    for (protocol, instance, endpoint) in runs {
        let sent = run_python(protocol, &endpoint, instance);
        let metrics = sent.iter().filter(|(s, _)| s == "metrics").count();
        let logs = sent.iter().filter(|(s, _)| s == "logs").count();
        // 1.5 s at 300 ms, and the export at shutdown; logs: one timed, one observed.
        assert!(metrics >= 3, "{protocol}: periodic exports {sent:?}");
        assert_eq!(logs, 2, "{protocol}: {sent:?}");
        let rows = s.sql(&format!(
            "SELECT signal, time_unix_nano, service_name, color, lane, lane_rule FROM presence \
             WHERE instance_id = '{instance}' ORDER BY signal, time_unix_nano"
        ));
        let got: Vec<(String, i64)> = rows
            .iter()
            .map(|r| (r[0].as_str().unwrap().to_owned(), r[1].as_i64().unwrap()))
            .collect();
        assert_eq!(got, sent, "{protocol}: present at exactly the export times");
        assert!(
            rows.iter().all(|r| r[2] == "pricing"
                && r[3] == "unknown"
                && r[4] == "gray"
                && r[5] == "deploy.lane"),
            "{rows:?}"
        );
    }
    assert_eq!(count_all(&s), 0, "no spans: present by its exports alone");
}

/// A metrics export of instance `inst`: a gauge with data points at `times`.
fn metrics_json(inst: &str, times: &[u64]) -> String {
    let points: Vec<String> = times
        .iter()
        .map(|t| format!(r#"{{"timeUnixNano":"{t}","asInt":"1"}}"#))
        .collect();
    format!(
        r#"{{"resourceMetrics":[{{"resource":{{"attributes":[{{"key":"host.name","value":{{"stringValue":"{inst}"}}}}]}},
        "scopeMetrics":[{{"metrics":[{{"name":"up","gauge":{{"dataPoints":[{}]}}}}]}}]}}]}}"#,
        points.join(",")
    )
}

#[test]
fn malformed_metrics_and_logs_bodies_get_the_trace_statuses_and_are_counted() {
    let dir = temp_dir();
    let mut s = Server::start(
        &dir.path().join("data"),
        &[("DYELINE_RECEIVER__MAX_BODY_SIZE", "64 KiB")],
    );
    let json = ("content-type", "application/json");
    let pb = ("content-type", "application/x-protobuf");
    let gz = ("content-encoding", "gzip");
    let bomb = gzip(&vec![b' '; 1024 * 1024]);
    // (what, headers, body, status, a word of the message, reason counted)
    type Case<'a> = (
        &'a str,
        Vec<(&'a str, &'a str)>,
        Vec<u8>,
        u16,
        &'a str,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (
            "bad protobuf",
            vec![pb],
            vec![0x0a, 0x05],
            400,
            "protobuf",
            "bad_data",
        ),
        (
            "bad JSON",
            vec![json],
            b"{\"resourceMetrics\": [".to_vec(),
            400,
            "JSON",
            "bad_data",
        ),
        (
            "empty JSON",
            vec![json],
            Vec::new(),
            400,
            "empty",
            "bad_data",
        ),
        (
            "wrong content type",
            vec![("content-type", "text/plain")],
            b"{}".to_vec(),
            415,
            "application/json",
            "unsupported_media_type",
        ),
        (
            "oversize",
            vec![json],
            vec![b' '; 100 * 1024],
            413,
            "max_body_size",
            "too_large",
        ),
        (
            "oversize protobuf",
            vec![pb],
            vec![0u8; 100 * 1024],
            413,
            "max_body_size",
            "too_large",
        ),
        (
            "bad gzip",
            vec![json, gz],
            b"{}".to_vec(),
            400,
            "gzip",
            "bad_data",
        ),
        (
            "gzip bomb",
            vec![json, gz],
            bomb,
            413,
            "max_body_size",
            "too_large",
        ),
        (
            "unknown encoding",
            vec![json, ("content-encoding", "br")],
            b"{}".to_vec(),
            415,
            "Content-Encoding",
            "unsupported_media_type",
        ),
    ];
    for signal in ["metrics", "logs"] {
        let path = format!("/v1/{signal}");
        for (what, headers, body, status, word, _) in &cases {
            let r = post_otlp(&s, &path, headers, body.clone());
            assert_eq!(r.status, *status, "{signal} {what}: {}", r.text());
            assert!(
                otlp_error(&r).message.contains(word),
                "{signal} {what}: {}",
                otlp_error(&r).message
            );
            // The same body to /v1/traces gets the same status.
            let t = post_traces(&s, headers, body.clone());
            assert_eq!(
                t.status,
                r.status,
                "{signal} {what}: traces answered {}",
                t.text()
            );
        }
    }
    // gRPC: an undecodable message, and one past the limit.
    for (service, signal) in [
        ("metrics.v1.MetricsService", "metrics"),
        ("logs.v1.LogsService", "logs"),
    ] {
        let path = format!("/opentelemetry.proto.collector.{service}/Export");
        let (status, _) = grpc_unary_raw(s.grpc, &path, &[0x0a, 0x05]).unwrap();
        assert_eq!(status, "3", "{signal}: INVALID_ARGUMENT");
        let (status, _) = grpc_unary_raw(s.grpc, &path, &vec![0u8; 100 * 1024]).unwrap();
        assert_eq!(status, "8", "{signal}: RESOURCE_EXHAUSTED");
    }
    let m = s.metrics();
    let expected = |reason: &str| cases.iter().filter(|c| c.5 == reason).count() as f64;
    for signal in ["metrics", "logs"] {
        for (reason, grpc) in [
            ("bad_data", 1.0),
            ("too_large", 1.0),
            ("unsupported_media_type", 0.0),
        ] {
            let got = metric(
                &m,
                "dyeline_receiver_presence_requests_refused_total",
                &[("signal", signal), ("reason", reason)],
            );
            assert_eq!(got, expected(reason) + grpc, "{signal} {reason}");
        }
    }
    // The trace refusals are counted as theirs, once per trace body sent.
    let traces = metric(
        &m,
        "dyeline_receiver_requests_refused_total",
        &[("reason", "bad_data")],
    );
    assert_eq!(traces, 2.0 * expected("bad_data"));

    // Nothing was recorded, and a valid export still is: a point without a time is rejected
    // through partial success, counted exactly.
    assert_eq!(scalar(&s, "SELECT count(*) FROM presence"), 0);
    let r = post_otlp(
        &s,
        "/v1/metrics",
        &[json],
        metrics_json(
            "cart-1",
            &[1_735_812_000_000_000_000, 0, 1_735_812_000_000_000_000],
        )
        .into_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["partialSuccess"]["rejectedDataPoints"], "1");
    let rows = s.sql("SELECT instance_id, time_unix_nano, signal FROM presence");
    assert_eq!(
        rows,
        [vec![
            Value::from("cart-1"),
            Value::from(1_735_812_000_000_000_000_i64),
            Value::from("metrics")
        ]]
    );
    let invalid = metric(
        &s.metrics(),
        "dyeline_receiver_presence_items_discarded_total",
        &[("signal", "metrics"), ("reason", "invalid_time")],
    );
    assert_eq!(invalid, 1.0);
    assert!(s.is_running());
}

/// The instance of a resource (domain §1): first present of `service.instance.id`,
/// `host.name`, `k8s.pod.name`.
fn instance_of(resource: &Value) -> String {
    let attrs = resource["attributes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    ["service.instance.id", "host.name", "k8s.pod.name"]
        .iter()
        .find_map(|k| {
            attrs
                .iter()
                .find(|a| a["key"] == *k)
                .and_then(|a| a["value"]["stringValue"].as_str())
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "unknown_instance".into())
}

/// Per instance, the distinct data point times of an OTLP/JSON metrics lines file.
fn presence_of(metrics: &str) -> BTreeMap<String, BTreeSet<u64>> {
    let mut out: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for line in metrics.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap();
        for rm in v["resourceMetrics"].as_array().unwrap() {
            let times = out.entry(instance_of(&rm["resource"])).or_default();
            for sm in rm["scopeMetrics"].as_array().into_iter().flatten() {
                for m in sm["metrics"].as_array().into_iter().flatten() {
                    for kind in [
                        "gauge",
                        "sum",
                        "histogram",
                        "exponentialHistogram",
                        "summary",
                    ] {
                        for p in m[kind]["dataPoints"].as_array().into_iter().flatten() {
                            let t = &p["timeUnixNano"];
                            let t = t.as_u64().or_else(|| t.as_str()?.parse().ok()).unwrap_or(0);
                            if t != 0 {
                                times.insert(t);
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

#[test]
fn import_records_presence_of_a_metrics_file_beside_its_spans() {
    let fixture = shared_dir().join("fixtures/analysis/lanes-small");
    let metrics = std::fs::read_to_string(fixture.join("metrics.jsonl")).unwrap();
    let expected = presence_of(&metrics);
    let dir = temp_dir();
    // The metrics file gzipped: `.gz` is inflated for metrics as for spans.
    let gz = dir.path().join("metrics.jsonl.gz");
    std::fs::write(&gz, gzip(metrics.as_bytes())).unwrap();
    let data = dir.path().join("data");
    let (ok, _, err) = run_cli(&[
        "--config",
        fixture.join("dyeline.toml").to_str().unwrap(),
        "import",
        "--data-dir",
        data.to_str().unwrap(),
        fixture.join("spans.jsonl").to_str().unwrap(),
        gz.to_str().unwrap(),
    ]);
    assert!(ok, "import failed: {err}");
    let total: usize = expected.values().map(BTreeSet::len).sum();
    assert!(
        err.contains(&format!(
            "recorded {total} presence signals ({total} from metrics, 0 from logs;"
        )),
        "{err}"
    );
    let rows = sql_json(
        &data,
        "SELECT instance_id, count(*), count(DISTINCT time_unix_nano) FROM presence \
         GROUP BY 1 ORDER BY 1",
    );
    let got: BTreeMap<String, (u64, u64)> = rows
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap().to_owned(),
                (r[1].as_u64().unwrap(), r[2].as_u64().unwrap()),
            )
        })
        .collect();
    let want: BTreeMap<String, (u64, u64)> = expected
        .iter()
        .map(|(i, t)| (i.clone(), (t.len() as u64, t.len() as u64)))
        .collect();
    assert_eq!(got, want);
    // Each instance's app and lane by the fixture's rules, as expected.json lists them.
    let lanes = sql_json(
        &data,
        "SELECT DISTINCT instance_id, service_name, lane, lane_rule FROM presence ORDER BY 1",
    );
    let listed: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("expected.json")).unwrap())
            .unwrap();
    let listed: BTreeMap<&str, &Value> = listed["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["instance"].as_str().unwrap(), l))
        .collect();
    assert_eq!(
        lanes.len(),
        expected.len(),
        "one lane per instance: {lanes:?}"
    );
    for r in &lanes {
        let want = listed[r[0].as_str().unwrap()];
        assert_eq!(
            (&r[1], &r[2], &r[3]),
            (&want["app"], &want["lane"], &want["rule"]),
            "{r:?}"
        );
    }
    assert!(lanes.iter().any(|r| r[2] != "base"), "{lanes:?}");
    // The spans of the same import landed too: every trace of the file.
    let spans = std::fs::read_to_string(fixture.join("spans.jsonl")).unwrap();
    let traces: BTreeSet<String> = spans
        .lines()
        .filter(|l| !l.trim().is_empty())
        .flat_map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let mut ids = Vec::new();
            for rs in v["resourceSpans"].as_array().unwrap() {
                for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                    for sp in ss["spans"].as_array().into_iter().flatten() {
                        ids.push(sp["traceId"].as_str().unwrap().to_ascii_lowercase());
                    }
                }
            }
            ids
        })
        .collect();
    let stored = sql_json(&data, "SELECT count(DISTINCT trace_id) FROM spans");
    assert_eq!(stored[0][0].as_u64(), Some(traces.len() as u64));
    assert!(traces.len() >= 38, "{}", traces.len());
}

/// gRPC messages compressed with gzip (`grpc-encoding: gzip`) to the three services: a valid
/// one is accepted and recorded, one inflating past the limit and one that is not gzip get
/// the same status for metrics and logs as for traces, counted per signal, and cost nothing.
#[test]
fn gzip_compressed_grpc_messages_get_the_trace_statuses_for_metrics_and_logs() {
    use prost::Message;

    let dir = temp_dir();
    let mut s = Server::start(
        &dir.path().join("data"),
        &[("DYELINE_RECEIVER__MAX_BODY_SIZE", "64 KiB")],
    );
    let t: u64 = 1_735_812_000_000_000_000;
    let host = |h: &str| json_resource(h);
    let metrics = dyeline_collector::json::decode_metrics_request(
        serde_json::json!({
            "resourceMetrics": [{"resource": host("gz-metrics-1"), "scopeMetrics": [{"metrics": [
                {"name": "up", "gauge": {"dataPoints": [{"timeUnixNano": t.to_string(), "asInt": "1"}]}}]}]}]
        })
        .to_string()
        .as_bytes(),
    )
    .unwrap();
    let logs = dyeline_collector::json::decode_logs_request(
        serde_json::json!({
            "resourceLogs": [{"resource": host("gz-logs-1"), "scopeLogs": [{"logRecords": [
                {"timeUnixNano": t.to_string(), "body": {"stringValue": "idle"}}]}]}]
        })
        .to_string()
        .as_bytes(),
    )
    .unwrap();
    let traces = dyeline_collector::json::decode_export_request(
        serde_json::json!({"resourceSpans": [{"resource": host("gz-traces-1"), "scopeSpans": [{"spans": [
            {"traceId": "0000000000000000000000000000a11a", "spanId": "000000000000a11a",
             "name": "ok", "kind": 2, "startTimeUnixNano": t.to_string(),
             "endTimeUnixNano": (t + 1_000_000).to_string()}]}]}]})
        .to_string()
        .as_bytes(),
    )
    .unwrap();
    let services = [
        ("traces", "trace.v1.TraceService", traces.encode_to_vec()),
        (
            "metrics",
            "metrics.v1.MetricsService",
            metrics.encode_to_vec(),
        ),
        ("logs", "logs.v1.LogsService", logs.encode_to_vec()),
    ];
    let bomb = gzip(&vec![0u8; 1024 * 1024]);
    let mut answers = Vec::new();
    for (signal, service, valid) in &services {
        let path = format!("/opentelemetry.proto.collector.{service}/Export");
        let send = |frame: &[u8]| grpc_unary_gzip(s.grpc, &path, frame).unwrap().0;
        assert_eq!(
            send(&gzip(valid)),
            "0",
            "{signal}: a valid compressed export"
        );
        answers.push((*signal, send(&bomb), send(b"not gzip at all")));
    }
    let (_, big, bad) = answers[0].clone();
    assert_eq!(big, "8", "traces: RESOURCE_EXHAUSTED");
    assert_eq!(
        bad, "13",
        "traces: INTERNAL, a message that does not inflate"
    );
    for (signal, b, x) in &answers[1..] {
        assert_eq!((b, x), (&big, &bad), "{signal} answers as traces do");
    }
    let m = s.metrics();
    for reason in ["too_large", "bad_data"] {
        assert_eq!(
            metric(
                &m,
                "dyeline_receiver_requests_refused_total",
                &[("reason", reason)]
            ),
            1.0
        );
        for signal in ["metrics", "logs"] {
            let labels = [("signal", signal), ("reason", reason)];
            let got = metric(
                &m,
                "dyeline_receiver_presence_requests_refused_total",
                &labels,
            );
            assert_eq!(got, 1.0, "{signal} {reason}");
        }
    }
    // Each valid export recorded, nothing of the refused ones.
    assert_eq!(count_all(&s), 1);
    let rows = s.sql("SELECT instance_id, signal, time_unix_nano FROM presence ORDER BY 1");
    assert_eq!(
        rows,
        [
            vec![
                Value::from("gz-logs-1"),
                Value::from("logs"),
                Value::from(t as i64)
            ],
            vec![
                Value::from("gz-metrics-1"),
                Value::from("metrics"),
                Value::from(t as i64)
            ],
        ]
    );
    assert!(s.is_running());
}

/// An OTLP/JSON resource with `host.name` = `host`.
fn json_resource(host: &str) -> Value {
    serde_json::json!({"attributes": [{"key": "host.name", "value": {"stringValue": host}}]})
}
