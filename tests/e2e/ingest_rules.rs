//! The ingest rules of domain §1–3 through the real binary: a batch consumer's span links and a
//! repeated baggage member exported by the real Python OpenTelemetry SDK; recorded OTLP bodies
//! (sent over HTTP and gRPC) for a Zipkin/B3 shared span id, times at 0 and past the year 2262,
//! spans older than the retention (refused by the receivers, kept by `dyeline import`) and
//! status codes sent as strings. Rows are checked with SQL, findings with `dyeline analyze`.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use serde_json::{Value, json};

use crate::analyze::{TOKEN, analyze, now_ns, release, server};
use crate::util::*;

/// Sends the OTLP/JSON `body` over gRPC (decoded as the HTTP receiver decodes it).
fn export_grpc(s: &Server, body: &str) -> ExportTraceServiceResponse {
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
    let request = dyeline_collector::json::decode_export_request(body.as_bytes()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        TraceServiceClient::connect(format!("http://{}", s.grpc))
            .await
            .unwrap()
            .export(request)
            .await
            .unwrap()
            .into_inner()
    })
}

/// One resource's spans as OTLP/JSON: `spans` are the span objects.
fn resource(service: &str, host: &str, spans: &[Value]) -> Value {
    json!({
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": service}},
            {"key": "host.name", "value": {"stringValue": host}}]},
        "scopeSpans": [{"spans": spans}]
    })
}

/// The value of counter `name{reason="…"}` in the metrics text.
fn discarded(s: &Server, reason: &str) -> i64 {
    let line = format!("dyeline_receiver_spans_discarded_total{{reason=\"{reason}\"}} ");
    s.metrics()
        .lines()
        .find_map(|l| l.strip_prefix(&line))
        .unwrap_or_else(|| panic!("no {line}"))
        .trim()
        .parse()
        .unwrap()
}

/// The real Python SDK: a CONSUMER span with no parent linking to its producer, one linking to
/// a span never sent, and `x-deploy-channel-type` in two captured baggage headers and twice in
/// one. The links are stored; the analyzer names the linked producer's app as the consumer's
/// caller (`(none)` when the linked span is not stored); the repeated member is joined with
/// `&`, its first pair winning and the conflict flagged.
#[test]
fn python_sdk_batch_consumer_links_and_repeated_baggage_members() {
    let dir = temp_dir();
    let mut s = server(dir.path());
    release(&s, "trade", &["order", "notify"]);
    let endpoint = format!("http://{}", s.grpc);
    let out = crate::otlp_python::run_script(
        "ingest_rules.py",
        &["--protocol", "grpc", "--endpoint", &endpoint],
    );
    let ids: Value = serde_json::from_str(&out).unwrap();
    let row = |case: &str, columns: &str| -> Vec<Value> {
        let rows = s.sql(&format!(
            "SELECT {columns} FROM spans WHERE trace_id = '{}' AND span_id = '{}'",
            ids[case]["trace_id"].as_str().unwrap(),
            ids[case]["span_id"].as_str().unwrap()
        ));
        assert_eq!(rows.len(), 1, "{case}");
        rows[0].clone()
    };
    let r = row("consumer", "links, parent_span_id, span_kind");
    let links: Value = serde_json::from_str(r[0].as_str().unwrap()).unwrap();
    assert_eq!(
        links,
        json!([{
            "trace_id": ids["producer"]["trace_id"],
            "span_id": ids["producer"]["span_id"],
            "attributes": {"messaging.batch.index": 0}
        }])
    );
    assert_eq!((&r[1], &r[2]), (&Value::Null, &json!("CONSUMER")));
    assert_eq!(row("producer", "links")[0], Value::Null);

    let r = row(
        "two_headers",
        "decision_source, decision_text, decisions, conflicting_channels",
    );
    assert_eq!(
        r,
        [
            json!("http.request.header.baggage"),
            json!("trade=blue&trade=green&pay=blue"),
            json!({"trade": "blue", "pay": "blue"}),
            json!(["trade"])
        ]
    );
    let r = row(
        "one_header",
        "decision_text, decisions, conflicting_channels",
    );
    assert_eq!(
        r,
        [
            json!("pay=green&pay=blue&trade=blue"),
            json!({"pay": "green", "trade": "blue"}),
            json!(["pay"])
        ]
    );

    assert!(s.stop());
    let v = analyze(dir.path());
    let mut missing: Vec<(String, String, String)> = v["missing_decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["span_id"].as_str().unwrap().to_owned(),
                m["app"].as_str().unwrap().to_owned(),
                m["caller_app"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    missing.sort();
    let mut expected = vec![
        (
            ids["consumer"]["span_id"].as_str().unwrap().to_owned(),
            "notify".to_owned(),
            "order".to_owned(),
        ),
        (
            ids["orphan"]["span_id"].as_str().unwrap().to_owned(),
            "notify".to_owned(),
            "(none)".to_owned(),
        ),
    ];
    expected.sort();
    assert_eq!(missing, expected, "{}", v["missing_decisions"]);
}

/// A recorded Zipkin/B3 trace (OTLP/JSON): the CLIENT and SERVER halves of each call share a
/// span id, and B3 gives both halves the caller's parent. Over HTTP, then resent over gRPC: each
/// half is stored once (five rows), the drilldown puts each SERVER half under its CLIENT half
/// and the callee's calls under the SERVER half, and the analyzer names each callee's caller.
#[test]
fn a_zipkin_shared_span_id_is_two_spans_over_http_and_grpc() {
    let dir = temp_dir();
    let mut s = server(dir.path());
    release(&s, "trade", &["gateway", "order", "stock"]);
    let t = now_ns() + 1_000_000_000;
    let trace = "b3b3b3b3b3b3b3b3c4c4c4c4c4c4c4c4";
    let span = |id: &str, parent: Option<&str>, name: &str, kind: u8, at: i64| {
        let mut v = json!({
            "traceId": trace, "spanId": id, "name": name, "kind": kind,
            "startTimeUnixNano": (t + at).to_string(),
            "endTimeUnixNano": (t + at + 1_000_000).to_string()});
        if let Some(p) = parent {
            v["parentSpanId"] = json!(p);
        }
        v
    };
    let mut root = span("a000000000000001", None, "GET /checkout", 2, 0);
    root["attributes"] =
        json!([{"key": "x-deploy-channel-type", "value": {"stringValue": "trade=blue"}}]);
    let body = json!({"resourceSpans": [
        resource("gateway", "gateway-b1", &[
            root,
            span("a000000000000002", Some("a000000000000001"), "call order", 3, 10),
        ]),
        resource("order", "order-b1", &[
            span("a000000000000002", Some("a000000000000001"), "POST /order", 2, 20),
            span("a000000000000003", Some("a000000000000002"), "call stock", 3, 30),
        ]),
        resource("stock", "stock-b1", &[
            span("a000000000000003", Some("a000000000000002"), "POST /reserve", 2, 40),
        ]),
    ]})
    .to_string();
    let r = post_json(&s, &body);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(count_trace(&s, trace), 5);
    // The same spans again over gRPC: retries of each half, nothing new.
    let resp = export_grpc(&s, &body);
    assert!(resp.partial_success.is_none(), "{resp:?}");
    assert_eq!(count_trace(&s, trace), 5);
    assert_eq!(discarded(&s, "duplicate"), 5);
    let kinds = s.sql(&format!(
        "SELECT span_kind, service_name FROM spans WHERE trace_id = '{trace}' \
         AND span_id = 'a000000000000002' ORDER BY span_kind"
    ));
    assert_eq!(
        kinds,
        [
            vec![json!("CLIENT"), json!("gateway")],
            vec![json!("SERVER"), json!("order")]
        ]
    );
    // The drilldown's tree.
    let view: Value = reqwest::blocking::Client::new()
        .get(format!("http://{}/api/v1/traces/{trace}", s.api))
        .bearer_auth(TOKEN)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let tree: Vec<(String, u64, String, String)> = view["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["span_id"].as_str().unwrap().to_owned(),
                n["depth"].as_u64().unwrap(),
                n["span_kind"].as_str().unwrap().to_owned(),
                n["app"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let node = |id: &str, depth: u64, kind: &str, app: &str| {
        (id.to_owned(), depth, kind.to_owned(), app.to_owned())
    };
    assert_eq!(
        tree,
        [
            node("a000000000000001", 0, "SERVER", "gateway"),
            node("a000000000000002", 1, "CLIENT", "gateway"),
            node("a000000000000002", 2, "SERVER", "order"),
            node("a000000000000003", 3, "CLIENT", "order"),
            node("a000000000000003", 4, "SERVER", "stock"),
        ],
        "{view}"
    );
    assert!(s.stop());
    let v = analyze(dir.path());
    let missing: Vec<(&str, &str)> = v["missing_decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["app"].as_str().unwrap(),
                m["caller_app"].as_str().unwrap(),
            )
        })
        .collect();
    // By span ids alone stock's parent would be the first span of id 2, the gateway's.
    assert_eq!(missing, [("order", "gateway"), ("stock", "order")]);
    assert_eq!(v["spans"], 5);
}

/// Recorded bodies with times at 0 and past the year 2262, over HTTP/JSON and gRPC: an end
/// before the start or of 0 is stored as the start (duration 0); a start of 0 and times that
/// do not fit `i64` nanoseconds are refused through partial success with exact counts and a
/// message, counted by reason.
#[test]
fn times_at_zero_and_past_2262_are_kept_with_duration_0_or_refused_with_exact_counts() {
    let dir = temp_dir();
    let s = Server::start(&dir.path().join("data"), &[]);
    let t: i64 = 1_750_000_000_000_000_000;
    let body = |trace: &str| {
        let span = |id: u8, start: &str, end: &str| {
            json!({"traceId": trace, "spanId": format!("{id:016x}"), "name": "op", "kind": 2,
                   "startTimeUnixNano": start, "endTimeUnixNano": end})
        };
        json!({"resourceSpans": [resource("order", "order-b1", &[
            span(1, &t.to_string(), &(t + 5).to_string()),
            span(2, &t.to_string(), &(t - 7).to_string()),
            span(3, &t.to_string(), "0"),
            span(4, "0", &t.to_string()),
            span(5, "9300000000000000000", "9300000000000000001"),
            span(6, &t.to_string(), "18446744073709551615"),
        ])]})
        .to_string()
    };
    let over_http = "7100000000000000000000000000000a";
    let r = post_json(&s, &body(over_http));
    assert_eq!(r.status, 200);
    let partial = &r.json()["partialSuccess"];
    assert_eq!(partial["rejectedSpans"], "3", "{}", r.text());
    assert_eq!(
        partial["errorMessage"],
        "resource_spans[0].scope_spans[0].spans[3]: start_time_unix_nano is 0 (not set)"
    );
    let over_grpc = "7100000000000000000000000000000b";
    let resp = export_grpc(&s, &body(over_grpc));
    let partial = resp.partial_success.expect("partial success");
    assert_eq!(partial.rejected_spans, 3);
    assert!(partial.error_message.contains("start_time_unix_nano is 0"));
    assert_eq!(discarded(&s, "missing_start_time"), 2);
    assert_eq!(discarded(&s, "invalid_time"), 4);
    for trace in [over_http, over_grpc] {
        let rows = s.sql(&format!(
            "SELECT span_id, start_time_unix_nano, end_time_unix_nano, duration_ns FROM spans \
             WHERE trace_id = '{trace}' ORDER BY span_id"
        ));
        let row = |id: u8, end: i64| {
            vec![
                json!(format!("{id:016x}")),
                json!(t),
                json!(end),
                json!(end - t),
            ]
        };
        assert_eq!(rows, [row(1, t + 5), row(2, t), row(3, t)], "{trace}");
    }
}

/// The receivers (HTTP and gRPC) refuse a span that ended longer ago than `[store] retention`
/// (partial success, counted, the message naming the setting); `dyeline import` keeps the same recorded span, and
/// the server started on the data then still holds it (retention deletes files by their write
/// time, so an imported capture stays the retention from its import).
#[test]
fn spans_older_than_the_retention_are_refused_by_the_receivers_and_kept_by_import() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let retention = [("DYELINE_STORE__RETENTION", "30days")];
    let mut s = Server::start(&data, &retention);
    let now = now_ns();
    let old: i64 = 1_718_000_000_000_000_000;
    let trace = "0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d";
    let span = |id: u8, start: i64| {
        json!({"traceId": trace, "spanId": format!("{id:016x}"), "name": "op", "kind": 2,
               "startTimeUnixNano": start.to_string(),
               "endTimeUnixNano": (start + 1_000_000).to_string()})
    };
    let body = json!({"resourceSpans": [resource("order", "order-b1", &[
        span(1, old),
        span(2, now),
    ])]})
    .to_string();
    let r = post_json(&s, &body);
    assert_eq!(r.status, 200);
    let partial = &r.json()["partialSuccess"];
    assert_eq!(partial["rejectedSpans"], "1", "{}", r.text());
    let message = partial["errorMessage"].as_str().unwrap();
    assert!(
        message.contains("[store] retention = 30days") && message.contains("spans[0]"),
        "{message}"
    );
    assert_eq!(discarded(&s, "older_than_retention"), 1);
    assert_eq!(count_trace(&s, trace), 1);
    // The same body over gRPC: the old span refused the same way, the new one a retry.
    let partial = export_grpc(&s, &body)
        .partial_success
        .expect("partial success");
    assert_eq!(partial.rejected_spans, 1);
    assert!(
        partial.error_message.contains("[store] retention = 30days"),
        "{partial:?}"
    );
    assert_eq!(discarded(&s, "older_than_retention"), 2);
    assert_eq!(count_trace(&s, trace), 1);
    assert!(s.stop());

    let capture = dir.path().join("capture.jsonl");
    std::fs::write(&capture, format!("{body}\n")).unwrap();
    let (ok, _, err) = run_cli(&[
        "import",
        "--data-dir",
        data.to_str().unwrap(),
        capture.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains("imported 1 spans") && err.contains("1 duplicates skipped"),
        "{err}"
    );
    // Served again with the same retention: the retention pass at start keeps the import.
    let s = Server::start(&data, &retention);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let rows = s.sql(&format!(
        "SELECT span_id FROM spans WHERE trace_id = '{trace}' ORDER BY span_id"
    ));
    assert_eq!(
        rows,
        [
            vec![json!("0000000000000001")],
            vec![json!("0000000000000002")]
        ]
    );
}

/// Status codes sent as decimal strings (a recorded body, over HTTP/JSON and gRPC) count as
/// their numbers, in the columns and in `is_error`; a string that is not a decimal integer is
/// absent (then the older HTTP key counts).
#[test]
fn status_codes_sent_as_strings_count_as_their_numbers() {
    let dir = temp_dir();
    let s = Server::start(&dir.path().join("data"), &[]);
    let t = now_ns();
    let body = |trace: &str| {
        let span = |id: u8, attrs: Value| {
            json!({"traceId": trace, "spanId": format!("{id:016x}"), "name": "op", "kind": 2,
                   "startTimeUnixNano": t.to_string(),
                   "endTimeUnixNano": (t + 1_000).to_string(), "attributes": attrs})
        };
        let attr = |k: &str, v: &str| json!({"key": k, "value": {"stringValue": v}});
        json!({"resourceSpans": [resource("order", "order-b1", &[
            span(1, json!([attr("http.response.status_code", "503")])),
            span(2, json!([attr("http.status_code", "404")])),
            span(3, json!([attr("rpc.grpc.status_code", "14")])),
            span(4, json!([attr("http.response.status_code", "5xx"), attr("http.status_code", "502")])),
            span(5, json!([attr("http.response.status_code", "503.0"), attr("rpc.grpc.status_code", "UNAVAILABLE")])),
        ])]})
        .to_string()
    };
    let over_http = "5050505050505050505050505050500a";
    assert_eq!(post_json(&s, &body(over_http)).status, 200);
    let over_grpc = "5050505050505050505050505050500b";
    assert!(export_grpc(&s, &body(over_grpc)).partial_success.is_none());
    for trace in [over_http, over_grpc] {
        let rows = s.sql(&format!(
            "SELECT http_status_code, rpc_grpc_status_code, is_error FROM spans \
             WHERE trace_id = '{trace}' ORDER BY span_id"
        ));
        assert_eq!(
            rows,
            [
                vec![json!(503), Value::Null, json!(true)],
                vec![json!(404), Value::Null, json!(false)],
                vec![Value::Null, json!(14), json!(true)],
                vec![json!(502), Value::Null, json!(true)],
                vec![Value::Null, Value::Null, json!(false)],
            ],
            "{trace}"
        );
    }
}
