//! The analyzer on data sent through the real receivers: cases 11 (a hop whose child arrives
//! first, in another batch and encoding, then is resent) and 17 (one-sided error spike: span
//! status and 5xx count, 4xx on SERVER spans does not), each analysed with `dyeline analyze`.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use serde_json::{Value, json};

use crate::util::*;

pub(crate) const TOKEN: &str = "e2e-analyze-token-01";

pub(crate) fn server(dir: &std::path::Path) -> Server {
    let cfg = dir.join("dyeline.toml");
    std::fs::write(&cfg, PATTERN_CONFIG).unwrap();
    Server::start_with(
        &dir.join("data"),
        &[("DYELINE_API_TOKEN", TOKEN)],
        &["--config", cfg.to_str().unwrap()],
    )
}

pub(crate) fn api(s: &Server, method: &str, path: &str, body: &str) {
    let resp = reqwest::blocking::Client::new()
        .request(method.parse().unwrap(), format!("http://{}{path}", s.api))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .unwrap();
    assert!(
        resp.status().is_success(),
        "{method} {path}: {}",
        resp.text().unwrap()
    );
}

pub(crate) fn release(s: &Server, ch: &str, apps: &[&str]) {
    api(
        s,
        "PUT",
        &format!("/api/v1/channels/{ch}"),
        &json!({ "apps": apps }).to_string(),
    );
    api(s, "POST", &format!("/api/v1/channels/{ch}/start"), "");
}

pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

pub(crate) fn analyze(dir: &std::path::Path) -> Value {
    let (ok, out, err) = run_cli(&[
        "analyze",
        "--data-dir",
        dir.join("data").to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(ok, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

#[test]
fn case11_hop_child_first_other_batch_other_encoding_resent_is_found_once() {
    let dir = temp_dir();
    let mut s = server(dir.path());
    release(&s, "ch1", &["order", "stock"]);
    let t = now_ns() + 1_000_000_000;
    // t = 0: the stock span alone, OTLP/JSON with upper-case ids.
    let stock = json!({"resourceSpans": [{
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "stock"}},
            {"key": "host.name", "value": {"stringValue": "stock-g1"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": "5E5E5E5E5E5E5E5E6F6F6F6F6F6F6F6F", "spanId": "5A00000000000003",
            "parentSpanId": "5A00000000000002", "name": "reserve", "kind": 2,
            "startTimeUnixNano": (t + 20_000_000).to_string(), "endTimeUnixNano": (t + 30_000_000).to_string(),
            "attributes": [{"key": "x-deploy-channel-type", "value": {"stringValue": "ch1=blue"}}]}]}]}]})
    .to_string();
    assert_eq!(post_json(&s, &stock).status, 200);
    // t = 20 s: the order spans, OTLP/protobuf.
    let span = |id: u64, parent: Option<u64>, name: &str, kind: i32, start: i64| Span {
        trace_id: hex::decode("5e5e5e5e5e5e5e5e6f6f6f6f6f6f6f6f").unwrap(),
        span_id: id.to_be_bytes().to_vec(),
        parent_span_id: parent.map(|p| p.to_be_bytes().to_vec()).unwrap_or_default(),
        name: name.into(),
        kind,
        start_time_unix_nano: start as u64,
        end_time_unix_nano: start as u64 + 50_000_000,
        attributes: vec![kv("x-deploy-channel-type", "ch1=blue")],
        ..Default::default()
    };
    let order = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", "order"), kv("host.name", "order-b1")],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans: vec![
                    span(0x5a00000000000001, None, "POST /checkout", 2, t),
                    span(
                        0x5a00000000000002,
                        Some(0x5a00000000000001),
                        "call stock",
                        3,
                        t + 10_000_000,
                    ),
                ],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let r = post_traces(
        &s,
        &[("content-type", "application/x-protobuf")],
        order.encode_to_vec(),
    );
    assert_eq!(r.status, 200);
    // t = 40 s: the first request again, byte for byte.
    assert_eq!(post_json(&s, &stock).status, 200);
    assert_eq!(count_trace(&s, "5e5e5e5e5e5e5e5e6f6f6f6f6f6f6f6f"), 3);
    // the resent span counts once in the metrics derived from spans
    let m = s.metrics();
    assert!(
        m.contains(
            r#"dyeline_spans_requests_total{channel="ch1",app="stock",color="green",kind="RPC"} 1"#
        ),
        "{m}"
    );
    assert!(s.stop());
    let v = analyze(dir.path());
    let hops = v["cross_color_hops"].as_array().unwrap();
    assert_eq!(hops.len(), 1, "{hops:?}");
    let h = &hops[0];
    assert_eq!(
        (
            &h["span_id"],
            &h["from_app"],
            &h["from_color"],
            &h["to_app"],
            &h["to_color"],
            &h["reason"]
        ),
        (
            &json!("5a00000000000003"),
            &json!("order"),
            &json!("blue"),
            &json!("stock"),
            &json!("green"),
            &json!("decision_mismatch")
        )
    );
    assert_eq!(v["spans"], 3);
    assert!(v["missing_decisions"].as_array().unwrap().is_empty());
}

/// `n` root SERVER spans of `order` on `host`, each its own trace, in the window starting at
/// `ws`; `status` = (http.response.status_code, status code) per span.
fn server_spans(host: &str, color: &str, ws: i64, first: u32, statuses: &[(i64, i32)]) -> String {
    let spans: Vec<Value> = statuses
        .iter()
        .enumerate()
        .map(|(i, (http, code))| {
            let start = ws + 1_000_000_000 + i as i64 * 100_000_000;
            let mut span = json!({
                "traceId": format!("{:032x}", (u128::from(first) << 32) + i as u128 + 1),
                "spanId": format!("{:016x}", i + 1),
                "name": "GET /order", "kind": 2,
                "startTimeUnixNano": start.to_string(), "endTimeUnixNano": (start + 5_000_000).to_string(),
                "attributes": [
                    {"key": "http.response.status_code", "value": {"intValue": http.to_string()}},
                    {"key": "x-deploy-channel-type", "value": {"stringValue": format!("ch1={color}")}}]
            });
            if *code != 0 {
                span["status"] = json!({"code": code});
            }
            span
        })
        .collect();
    json!({"resourceSpans": [{
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "order"}},
            {"key": "host.name", "value": {"stringValue": host}}]},
        "scopeSpans": [{"spans": spans}]}]})
    .to_string()
}

fn spikes(v: &Value) -> Vec<(Value, String)> {
    let mut s: Vec<(Value, String)> = v["error_spike"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["app"].clone(), e["color"].as_str().unwrap().to_owned()))
        .collect();
    s.sort_by_key(|x| x.0.to_string());
    s
}

#[test]
fn case17_error_spike_counts_status_and_5xx_not_server_4xx() {
    let dir = temp_dir();
    let mut s = server(dir.path());
    release(&s, "ch1", &["order"]);
    // the next whole minute: one 60 s window holds every span
    let minute = 60_000_000_000i64;
    let ws = (now_ns() / minute + 1) * minute;
    let mut blue = vec![(404, 0); 40];
    blue.extend(vec![(200, 0); 160]);
    let mut green = vec![(404, 0); 10];
    green.extend(vec![(503, 2); 30]);
    green.extend(vec![(200, 0); 160]);
    assert_eq!(
        post_json(&s, &server_spans("order-b1", "blue", ws, 1, &blue)).status,
        200
    );
    assert_eq!(
        post_json(&s, &server_spans("order-g1", "green", ws, 2, &green)).status,
        200
    );
    assert!(s.stop());
    let v = analyze(dir.path());
    assert_eq!(
        spikes(&v),
        vec![
            (json!("order"), "green".into()),
            (Value::Null, "green".into())
        ]
    );
    let e = &v["error_spike"][0];
    assert_eq!(
        (e["errors"].as_u64(), e["requests"].as_u64()),
        (Some(30), Some(200))
    );
    assert_eq!(
        e["other_errors"].as_u64(),
        Some(0),
        "the 40 blue 404s are not errors"
    );

    // Variant: 10 blue SERVER spans with 404 and status ERROR count as errors (4.8 %); the
    // spike is still green only.
    let mut s = server(dir.path());
    let bad = vec![(404, 2); 10];
    assert_eq!(
        post_json(
            &s,
            &server_spans("order-b1", "blue", ws + 30_000_000_000, 3, &bad)
        )
        .status,
        200
    );
    assert!(s.stop());
    let v = analyze(dir.path());
    assert_eq!(
        spikes(&v),
        vec![
            (json!("order"), "green".into()),
            (Value::Null, "green".into())
        ]
    );
    assert_eq!(v["error_spike"][0]["other_errors"].as_u64(), Some(10));
    assert_eq!(v["error_spike"][0]["other_requests"].as_u64(), Some(210));
}

#[test]
fn findings_and_trace_drilldown_over_the_api() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let fixture = shared_dir().join("fixtures/analysis/release-small");
    let (ok, _, err) = run_cli(&[
        "import",
        "--data-dir",
        data.to_str().unwrap(),
        "--timeline",
        fixture.join("timeline.json").to_str().unwrap(),
        fixture.join("spans.jsonl").to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let s = Server::start(&data, &[("DYELINE_API_TOKEN", TOKEN)]);
    let get = |path: &str| {
        let r = reqwest::blocking::get(format!("http://{}{path}", s.api)).unwrap();
        (r.status().as_u16(), r.json::<Value>().unwrap())
    };
    let range = "from=2025-01-01T00:00:00Z&to=2025-01-02T00:00:00Z";
    let (status, v) = get(&format!("/api/v1/findings?{range}"));
    assert_eq!(status, 200);
    let items = v["findings"].as_array().unwrap();
    let count = |t: &str| items.iter().filter(|i| i["type"] == t).count();
    assert_eq!(
        (count("cross_color_hop"), count("missing_decision")),
        (6, 3)
    );
    assert_eq!(items.len(), 9);
    let (_, v) = get(&format!(
        "/api/v1/findings?{range}&type=missing_decision&channel=trade"
    ));
    assert_eq!(v["findings"].as_array().unwrap().len(), 3);
    let (_, v) = get(&format!("/api/v1/findings?{range}&channel=pay"));
    assert_eq!(v["findings"].as_array().unwrap().len(), 0);
    let (status, v) = get(&format!("/api/v1/findings?{range}&type=hops"));
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (400, Some("invalid_query"))
    );
    let (status, v) = get("/api/v1/findings?from=2025-01-01T00:00:00Z&to=2025-01-03T00:00:00Z");
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (400, Some("invalid_range"))
    );
    let (status, _) = get("/api/v1/traces?from=2025-01-02T00:00:00Z&to=2025-01-01T00:00:00Z");
    assert_eq!(status, 400);
    // default range: the last hour holds none of the 2025 spans
    let (_, v) = get("/api/v1/findings");
    assert!(v["findings"].as_array().unwrap().is_empty());

    // Drilldown, looked up by the upper-case id.
    let (status, v) = get("/api/v1/traces/A1000000000000000000000000000004");
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["trace_id"], "a1000000000000000000000000000004");
    let nodes = v["spans"].as_array().unwrap();
    assert_eq!(nodes.len(), v["span_count"].as_u64().unwrap() as usize);
    assert_eq!(
        (v["returned"].as_u64(), v["left_out"].as_u64()),
        (Some(nodes.len() as u64), Some(0))
    );
    let depths: Vec<u64> = nodes.iter().map(|n| n["depth"].as_u64().unwrap()).collect();
    assert_eq!(
        depths.iter().filter(|&&d| d == 0).count(),
        1,
        "one tree: {depths:?}"
    );
    assert_eq!(depths[0], 0, "depth-first: the root first");
    assert!(
        depths.windows(2).all(|w| w[1] <= w[0] + 1),
        "depth-first: {depths:?}"
    );
    let hop = nodes
        .iter()
        .find(|n| !n["hops"].as_array().unwrap().is_empty())
        .unwrap();
    assert_eq!(hop["span_id"], "0400000000000007");
    assert_eq!(
        (hop["app"].as_str(), hop["color"].as_str()),
        (Some("inventory"), Some("blue"))
    );
    assert_eq!(hop["hops"][0]["via"], json!(["payment"]));
    assert_eq!(hop["decisions"]["trade"], "green");
    let (status, v) = get("/api/v1/traces/a1000000000000000000000000000007");
    assert_eq!(status, 200);
    assert_eq!(v["missing_decisions"][0]["caller_app"], "gateway");
    let (status, v) = get("/api/v1/traces/ffffffffffffffffffffffffffffffff");
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (404, Some("trace_not_found"))
    );
    // Channel summary: one 60 s step from the start of trade (release-small's spans lie in it).
    let (status, v) = get(
        "/api/v1/channels/trade/summary?from=2025-01-01T12:00:00Z&to=2025-01-01T12:01:00Z&step=60s",
    );
    assert_eq!(status, 200, "{v}");
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(
        (steps[0]["hops"].as_u64(), steps[0]["blue_percent"].as_u64()),
        (Some(6), Some(30))
    );
    let by_color = s.sql(
        "SELECT color, count(*) FROM spans WHERE span_kind = 'SERVER'          AND service_name IN ('order', 'inventory', 'notify', 'settle')          AND start_time_unix_nano >= 1735732800000000000 GROUP BY color ORDER BY color",
    );
    let count = |c: &str| {
        by_color
            .iter()
            .find(|r| r[0] == c)
            .map_or(0, |r| r[1].as_u64().unwrap())
    };
    assert_eq!(steps[0]["blue"]["requests"].as_u64(), Some(count("blue")));
    assert_eq!(steps[0]["green"]["requests"].as_u64(), Some(count("green")));
    assert!(
        steps[0]["blue"]["p99_ms"].as_f64().unwrap()
            >= steps[0]["blue"]["p50_ms"].as_f64().unwrap()
    );
    let (status, v) = get("/api/v1/channels/nope/summary");
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (404, Some("channel_not_found"))
    );
    let (status, _) = get("/api/v1/channels/trade/summary?step=0s");
    assert_eq!(status, 400);
    // Trace search.
    let (status, v) = get(&format!("/api/v1/traces?{range}&hop=true"));
    assert_eq!(status, 200, "{v}");
    let hop_traces: Vec<&str> = v["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["trace_id"].as_str().unwrap())
        .collect();
    assert_eq!(hop_traces.len(), 6, "{hop_traces:?}");
    assert!(hop_traces.contains(&"a1000000000000000000000000000004"));
    let (_, v) = get(&format!(
        "/api/v1/traces?{range}&channel=pay&hop=false&limit=2"
    ));
    let t = v["traces"].as_array().unwrap();
    assert_eq!(t.len(), 2);
    assert!(
        t.iter()
            .all(|x| x["channels"].as_array().unwrap().contains(&json!("pay")) && x["hops"] == 0)
    );
    let (_, v) = get(&format!("/api/v1/traces?{range}&app=risk&color=unknown"));
    assert!(
        v["traces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["trace_id"] == "a100000000000000000000000000000d")
    );
    let (status, _) = get(&format!("/api/v1/traces?{range}&color=purple"));
    assert_eq!(status, 400);
    let (status, v) = get("/api/v1/traces/not-an-id");
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (400, Some("invalid_trace_id"))
    );
}
