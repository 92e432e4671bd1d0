//! The field cases of `../shared/cases` about ingest, decisions and colours (01–05, 07, 08, 10,
//! 18), each with its right result asserted through the running server.

use crate::util::*;

fn server_with_patterns(dir: &std::path::Path) -> Server {
    let cfg = dir.join("dyeline.toml");
    std::fs::write(&cfg, PATTERN_CONFIG).unwrap();
    Server::start_with(&dir.join("data"), &[], &["--config", cfg.to_str().unwrap()])
}

const CASE01_A: &str = r#"{"resourceSpans":[{"resource":{"attributes":[
   {"key":"service.name","value":{"stringValue":"order"}},
   {"key":"host.name","value":{"stringValue":"order-b1"}}]},
 "scopeSpans":[{"scope":{"name":"case01"},"spans":[
  {"traceId":"7d3f0c9a2b1e4f5a8c6d0e1f2a3b4c5d","spanId":"c0ffee0000a1b2c3",
   "name":"GET /order","kind":2,
   "startTimeUnixNano":"1718000000000000000","endTimeUnixNano":"1718000000300000000"},
  {"traceId":"7D3F0C9A2B1E4F5A8C6D0E1F2A3B4C5D","spanId":"0BADF00D00000001",
   "parentSpanId":"C0FFEE0000A1B2C3",
   "name":"SELECT stock","kind":3,
   "startTimeUnixNano":"1718000000010000000","endTimeUnixNano":"1718000000200000000"}
 ]}]}]}"#;

const T01: &str = "7d3f0c9a2b1e4f5a8c6d0e1f2a3b4c5d";

#[test]
fn case01_hex_ids_any_case_accepted_base64_refused() {
    let dir = temp_dir();
    let s = server_with_patterns(dir.path());
    let r = post_json(&s, CASE01_A);
    assert_eq!((r.status, r.text()), (200, "{}".to_owned()));
    assert_eq!(count_trace(&s, T01), 2);
    let rows = s.sql(&format!(
        "SELECT c.name, p.name FROM spans c JOIN spans p ON c.parent_span_id = p.span_id \
         WHERE c.trace_id = '{T01}' AND p.trace_id = '{T01}'"
    ));
    assert_eq!(
        rows,
        vec![vec![
            serde_json::json!("SELECT stock"),
            serde_json::json!("GET /order")
        ]]
    );
    // Looked up by the upper-case id (normalised by the caller with lower()).
    assert_eq!(
        scalar(
            &s,
            "SELECT count(*) FROM spans WHERE trace_id = lower('7D3F0C9A2B1E4F5A8C6D0E1F2A3B4C5D')"
        ),
        2
    );
    // Input B: base64 ids refuse the whole request, naming the field.
    let b = CASE01_A
        .replacen(
            "\"7d3f0c9a2b1e4f5a8c6d0e1f2a3b4c5d\"",
            "\"fT8MmiseT1qMbQ4fKjtMXQ==\"",
            1,
        )
        .replacen("\"c0ffee0000a1b2c3\"", "\"wP/uAAChssM=\"", 1)
        .replace("0BADF00D00000001", "0BADF00D00000002");
    let r = post_json(&s, &b);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.json()["message"].as_str().unwrap().contains("traceId"),
        "{}",
        r.text()
    );
    assert_eq!(
        scalar(
            &s,
            "SELECT count(*) FROM spans WHERE span_id = '0badf00d00000002'"
        ),
        0
    );
    // Input C: 30 hex digits, or a non-hex span id.
    for bad in [
        CASE01_A.replacen(
            "7d3f0c9a2b1e4f5a8c6d0e1f2a3b4c5d",
            "7d3f0c9a2b1e4f5a8c6d0e1f2a3b4c",
            1,
        ),
        CASE01_A.replacen("c0ffee0000a1b2c3", "c0ffee0000a1b2cz", 1),
    ] {
        let bad = bad.replace("0BADF00D00000001", "0BADF00D00000003");
        assert_eq!(post_json(&s, &bad).status, 400);
    }
    assert_eq!(
        scalar(
            &s,
            "SELECT count(*) FROM spans WHERE span_id = '0badf00d00000003'"
        ),
        0
    );
    assert_eq!(count_all(&s), 2);
}

#[test]
fn case02_int64_as_string_or_number_keeps_every_nanosecond() {
    let dir = temp_dir();
    let s = server_with_patterns(dir.path());
    let body = r#"{"resourceSpans":[{"resource":{"attributes":[
      {"key":"service.name","value":{"stringValue":"order"}},
      {"key":"host.name","value":{"stringValue":"order-g1"}}]},
     "scopeSpans":[{"spans":[
      {"traceId":"11111111111111112222222222222222","spanId":"aaaaaaaaaaaaaa01","name":"s",
       "startTimeUnixNano":"1718000000123456789","endTimeUnixNano":"1718000000223456789",
       "attributes":[{"key":"retry.count","value":{"intValue":"42"}}]},
      {"traceId":"11111111111111112222222222222222","spanId":"aaaaaaaaaaaaaa02","name":"s",
       "startTimeUnixNano":1718000000123456789,"endTimeUnixNano":1718000000223456789,
       "attributes":[{"key":"retry.count","value":{"intValue":42}}]},
      {"traceId":"11111111111111112222222222222222","spanId":"aaaaaaaaaaaaaa03","name":"s",
       "startTimeUnixNano":"1718000000123456789","endTimeUnixNano":"1718000000123456939",
       "attributes":[{"key":"ratio","value":{"doubleValue":0.25}}]}]}]}]}"#;
    assert_eq!(post_json(&s, body).status, 200);
    let rows = s.sql(
        "SELECT span_id, start_time_unix_nano, duration_ns, attributes, color FROM spans ORDER BY span_id",
    );
    assert_eq!(rows.len(), 3);
    for r in &rows[..2] {
        assert_eq!(r[1], serde_json::json!(1_718_000_000_123_456_789_i64));
        assert_eq!(r[2], serde_json::json!(100_000_000));
        assert_eq!(r[3], serde_json::json!("{\"retry.count\":42}"));
        assert_eq!(r[4], serde_json::json!("green"));
    }
    assert_eq!(rows[2][2], serde_json::json!(150));
    let neg = body.replace("aaaaaaaaaaaaaa0", "bbbbbbbbbbbbbb0").replacen(
        "\"startTimeUnixNano\":\"1718000000123456789\"",
        "\"startTimeUnixNano\":\"2024-06-10T06:13:20Z\"",
        1,
    );
    assert_eq!(post_json(&s, &neg).status, 400);
    assert_eq!(count_all(&s), 3);
}

fn case03_span(span_id: &str, kind: &str, status: &str) -> String {
    let kind = if kind.is_empty() {
        String::new()
    } else {
        format!("\"kind\":{kind},")
    };
    let status = if status.is_empty() {
        String::new()
    } else {
        format!(",\"status\":{status}")
    };
    format!(
        r#"{{"traceId":"33333333333333334444444444444444","spanId":"{span_id}","name":"op",{kind}
            "startTimeUnixNano":"1718000000000000000","endTimeUnixNano":"1718000000001000000"{status}}}"#
    )
}

fn case03_request(spans: &[String]) -> String {
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[
          {{"key":"service.name","value":{{"stringValue":"stock"}}}},
          {{"key":"host.name","value":{{"stringValue":"stock-b1"}}}}]}},
          "scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
        spans.join(",")
    )
}

#[test]
fn case03_enums_map_by_value_full_names_tolerated_short_names_refused() {
    let dir = temp_dir();
    let s = server_with_patterns(dir.path());
    let spans = [
        case03_span("e000000000000000", "", ""),
        case03_span("e000000000000001", "1", r#"{"code":0}"#),
        case03_span("e000000000000002", "2", r#"{"code":1}"#),
        case03_span(
            "e000000000000003",
            "3",
            r#"{"code":2,"message":"upstream 503"}"#,
        ),
        case03_span("e000000000000004", "4", "{}"),
        case03_span("e000000000000005", "5", ""),
        case03_span("e000000000000006", "2", r#"{"code":2}"#),
    ];
    assert_eq!(post_json(&s, &case03_request(&spans)).status, 200);
    let rows = s.sql("SELECT span_kind, status_code FROM spans ORDER BY span_id");
    let got: Vec<(String, String)> = rows
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap().to_owned(),
                r[1].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want = [
        ("UNSPECIFIED", "UNSET"),
        ("INTERNAL", "UNSET"),
        ("SERVER", "OK"),
        ("CLIENT", "ERROR"),
        ("PRODUCER", "UNSET"),
        ("CONSUMER", "UNSET"),
        ("SERVER", "ERROR"),
    ];
    assert_eq!(got, want.map(|(a, b)| (a.to_owned(), b.to_owned())));
    assert_eq!(
        scalar(
            &s,
            "SELECT count(*) FROM spans WHERE instance_id = 'stock-b1' AND is_error"
        ),
        2
    );
    // Full enum names: stored exactly like …06.
    let full = case03_span(
        "e000000000000007",
        "\"SPAN_KIND_SERVER\"",
        r#"{"code":"STATUS_CODE_ERROR"}"#,
    );
    assert_eq!(post_json(&s, &case03_request(&[full])).status, 200);
    assert_eq!(
        s.sql("SELECT span_kind, status_code FROM spans WHERE span_id = 'e000000000000007'"),
        vec![vec![
            serde_json::json!("SERVER"),
            serde_json::json!("ERROR")
        ]]
    );
    // Short names: 400, nothing stored, still serving.
    for (kind, status) in [
        ("2", r#"{"code":"ERROR"}"#),
        ("\"SERVER\"", r#"{"code":2}"#),
    ] {
        let r = post_json(
            &s,
            &case03_request(&[case03_span("e000000000000008", kind, status)]),
        );
        assert_eq!(r.status, 400, "{}", r.text());
    }
    assert_eq!(count_all(&s), 8);
}

const CASE04_A: &str = r#"{"resourceSpans":[{"resource":{"attributes":[
   {"key":"service.name","value":{"stringValue":"order"}},
   {"key":"host.name","value":{"stringValue":"order-b1"}}],
   "droppedAttributesCount":0,"experimentalTags":[{"type":"service"}]},
 "schemaUrl":"https://opentelemetry.io/schemas/1.26.0",
 "scopeSpans":[{"scope":{"name":"case04","version":"0.1"},
  "spans":[{"traceId":"44444444444444445555555555555555","spanId":"4444444444444401",
   "flags":257,"name":"GET /order","kind":2,
   "startTimeUnixNano":"1718000100000000000","endTimeUnixNano":"1718000100050000000",
   "someFutureField":{"x":1}}]}]}],
 "vendorExtension":true}"#;

#[test]
fn case04_camel_and_snake_case_unknown_fields_ignored() {
    let dir = temp_dir();
    let s = server_with_patterns(dir.path());
    let r = post_json(&s, CASE04_A);
    assert_eq!((r.status, r.text()), (200, "{}".to_owned()));
    let snake = CASE04_A
        .replace("resourceSpans", "resource_spans")
        .replace("scopeSpans", "scope_spans")
        .replace("traceId", "trace_id")
        .replace("spanId", "span_id")
        .replace("startTimeUnixNano", "start_time_unix_nano")
        .replace("endTimeUnixNano", "end_time_unix_nano")
        .replace("stringValue", "string_value")
        .replace("4444444444444401", "4444444444444402");
    assert_eq!(post_json(&s, &snake).status, 200);
    let rows = s.sql("SELECT span_id, name, span_kind, duration_ns, service_name, color, scope_name FROM spans ORDER BY span_id");
    assert_eq!(rows.len(), 2, "snake_case must not be silently dropped");
    for (r, id) in rows.iter().zip(["4444444444444401", "4444444444444402"]) {
        assert_eq!(
            r,
            &vec![
                serde_json::json!(id),
                serde_json::json!("GET /order"),
                serde_json::json!("SERVER"),
                serde_json::json!(50_000_000),
                serde_json::json!("order"),
                serde_json::json!("blue"),
                serde_json::json!("case04"),
            ]
        );
    }
}

#[test]
fn case05_gzip_content_types_and_response_encoding() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
    use prost::Message;
    let dir = temp_dir();
    let s = server_with_patterns(dir.path());
    let json = CASE01_A.as_bytes().to_vec();
    // The same request in binary protobuf, made from the JSON by the server's own decoder would
    // be circular: build it with prost directly.
    let pb = case01_protobuf();
    let cases: Vec<(&str, &str, Vec<u8>, u16)> = vec![
        ("a", "application/json", gzip(&json), 200),
        ("b", "application/x-protobuf", gzip(&pb), 200),
        ("c", "application/json; charset=utf-8", json.clone(), 200),
        ("d", "text/plain", json.clone(), 415),
        ("e", "application/json", json.clone(), 400),
        ("g", "application/x-protobuf", pb.clone(), 200),
    ];
    for (row, ct, body, want) in cases {
        let mut headers = vec![("content-type", ct)];
        if row == "a" || row == "b" || row == "e" {
            headers.push(("content-encoding", "gzip"));
        }
        let r = post_traces(&s, &headers, body);
        assert_eq!(r.status, want, "row {row}: {}", r.text());
        match row {
            "a" | "c" => {
                assert!(r.content_type.starts_with("application/json"), "row {row}");
                assert_eq!(r.text(), "{}");
            }
            "b" | "g" => {
                assert_eq!(r.content_type, "application/x-protobuf", "row {row}");
                let resp = ExportTraceServiceResponse::decode(&r.body[..]).expect("protobuf");
                assert!(resp.partial_success.is_none());
            }
            _ => {}
        }
        assert_eq!(count_trace(&s, T01), 2, "after row {row}");
    }
    // f: two gzip members, split inside the JSON.
    let mid = json.len() / 2;
    let mut two = gzip(&json[..mid]);
    two.extend(gzip(&json[mid..]));
    let r = post_traces(
        &s,
        &[
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
        ],
        two,
    );
    assert_eq!(r.status, 200);
    assert_eq!(count_trace(&s, T01), 2);
}

/// Case 01 input A as protobuf bytes.
pub fn case01_protobuf() -> Vec<u8> {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{
        AnyValue, InstrumentationScope, KeyValue, any_value,
    };
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    use prost::Message;
    let kv = |k: &str, v: &str| KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.into())),
        }),
        ..Default::default()
    };
    let tid = hex::decode(T01).unwrap();
    let span = |id: &str, parent: &str, name: &str, kind: i32, s: u64, e: u64| Span {
        trace_id: tid.clone(),
        span_id: hex::decode(id).unwrap(),
        parent_span_id: hex::decode(parent).unwrap(),
        name: name.into(),
        kind,
        start_time_unix_nano: s,
        end_time_unix_nano: e,
        ..Default::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", "order"), kv("host.name", "order-b1")],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "case01".into(),
                    ..Default::default()
                }),
                spans: vec![
                    span(
                        "c0ffee0000a1b2c3",
                        "",
                        "GET /order",
                        2,
                        1_718_000_000_000_000_000,
                        1_718_000_000_300_000_000,
                    ),
                    span(
                        "0badf00d00000001",
                        "c0ffee0000a1b2c3",
                        "SELECT stock",
                        3,
                        1_718_000_000_010_000_000,
                        1_718_000_000_200_000_000,
                    ),
                ],
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
    .encode_to_vec()
}

#[test]
fn case05_grpc_gzip_stores_the_same_spans() {
    let dir = temp_dir();
    let s = server_with_patterns(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let code = rt.block_on(async {
        use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
        use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
        use prost::Message;
        let mut client = TraceServiceClient::connect(format!("http://{}", s.grpc))
            .await
            .unwrap()
            .send_compressed(tonic::codec::CompressionEncoding::Gzip);
        let req = ExportTraceServiceRequest::decode(&case01_protobuf()[..]).unwrap();
        let first = client.export(req.clone()).await.map(|_| ()).map_err(|e| e.code());
        let again = client.export(req).await.map(|_| ()).map_err(|e| e.code());
        (first, again)
    });
    assert_eq!(code, (Ok(()), Ok(())));
    assert_eq!(count_trace(&s, T01), 2, "a resend is not a new span");
}

#[test]
fn case07_official_example_shape() {
    let dir = temp_dir();
    let s = server_with_patterns(dir.path());
    let body = r#"{"resourceSpans":[{"resource":{"attributes":[
       {"key":"service.name","value":{"stringValue":"inventory.api"}}]},
     "scopeSpans":[{"scope":{"name":"inventory.http","version":"2.3.1",
       "attributes":[{"key":"inventory.scope.note","value":{"stringValue":"sample scope attr"}}]},
      "spans":[{"traceId":"0AF7651916CD43DD8448EB211C80319C","spanId":"B7AD6B7169203331",
       "parentSpanId":"B7AD6B7169203330","name":"handle reserve",
       "startTimeUnixNano":1718000200000000000,"endTimeUnixNano":1718000201000000000,
       "kind":2,"attributes":[{"key":"inventory.sku","value":{"stringValue":"A-17"}}]}]}]}]}"#;
    let r = post_json(&s, body);
    assert_eq!((r.status, r.text()), (200, "{}".to_owned()));
    let rows = s.sql(
        "SELECT trace_id, parent_span_id, service_name, span_kind, duration_ns, scope_name, scope_version, \
         instance_id, host_name, color, decisions, attributes FROM spans",
    );
    assert_eq!(
        rows,
        vec![vec![
            serde_json::json!("0af7651916cd43dd8448eb211c80319c"),
            serde_json::json!("b7ad6b7169203330"),
            serde_json::json!("inventory.api"),
            serde_json::json!("SERVER"),
            serde_json::json!(1_000_000_000),
            serde_json::json!("inventory.http"),
            serde_json::json!("2.3.1"),
            serde_json::json!("unknown_instance"),
            serde_json::Value::Null,
            serde_json::json!("unknown"),
            serde_json::Value::Null,
            serde_json::json!("{\"inventory.sku\":\"A-17\"}"),
        ]]
    );
    // The parent is missing from the store: the trace is incomplete, the span kept.
    assert_eq!(
        scalar(
            &s,
            "SELECT count(*) FROM spans c WHERE c.parent_span_id IS NOT NULL AND NOT EXISTS \
                   (SELECT 1 FROM spans p WHERE p.span_id = c.parent_span_id AND p.trace_id = c.trace_id)"
        ),
        1
    );
}

fn decision_request(span_id: &str, attr_key: &str, value: &str) -> String {
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[
          {{"key":"service.name","value":{{"stringValue":"order"}}}},
          {{"key":"host.name","value":{{"stringValue":"order-b1"}}}}]}},
          "scopeSpans":[{{"spans":[{{"traceId":"88888888888888889999999999999999","spanId":"{span_id}",
          "name":"GET /order","kind":2,"startTimeUnixNano":"1718000300000000000","endTimeUnixNano":"1718000300001000000",
          "attributes":[{{"key":{},"value":{{"stringValue":{}}}}}]}}]}}]}}]}}"#,
        serde_json::to_string(attr_key).unwrap(),
        serde_json::to_string(value).unwrap()
    )
}

fn decisions_of(s: &Server, span_id: &str) -> (serde_json::Value, i64, serde_json::Value) {
    let rows = s.sql(&format!(
        "SELECT decisions, malformed_pairs, conflicting_channels FROM spans WHERE span_id = '{span_id}'"
    ));
    assert_eq!(rows.len(), 1, "{span_id}");
    (
        rows[0][0].clone(),
        rows[0][1].as_i64().unwrap(),
        rows[0][2].clone(),
    )
}

#[test]
fn case08_channel_value_with_equals_properties_and_whitespace() {
    let dir = temp_dir();
    let s = server_with_patterns(dir.path());
    let rows = [
        (
            "8000000000000001",
            "x-deploy-channel-type",
            "ch1=blue&ch2=green",
        ),
        (
            "8000000000000002",
            "x-deploy-channel-type",
            "ch1=blue&ch2=green;ttl=30",
        ),
        (
            "8000000000000003",
            "http.request.header.baggage",
            "x-deploy-channel-type = ch1=blue&ch2=green ; src=gw , user-tier=gold",
        ),
        (
            "8000000000000004",
            "x-deploy-channel-type",
            "ch2=green&ch1=blue",
        ),
        (
            "8000000000000005",
            "x-deploy-channel-type",
            "  ch1=blue&ch2=green  ",
        ),
        (
            "8000000000000006",
            "http.request.header.baggage",
            "user-tier=gold,x-deploy-channel-type=ch1=green&ch2=green;prop",
        ),
    ];
    for (id, key, value) in rows {
        assert_eq!(
            post_json(&s, &decision_request(id, key, value)).status,
            200,
            "{id}"
        );
    }
    let blue_green = serde_json::json!({"ch1": "blue", "ch2": "green"});
    for (id, ..) in &rows[..5] {
        let (d, malformed, _) = decisions_of(&s, id);
        assert_eq!(d, blue_green, "{id}");
        assert_eq!(malformed, 0, "{id}");
    }
    let (d, ..) = decisions_of(&s, "8000000000000006");
    assert_eq!(d, serde_json::json!({"ch1": "green", "ch2": "green"}));
}

#[test]
fn case10_malformed_or_missing_decisions() {
    let dir = temp_dir();
    let s = server_with_patterns(dir.path());
    let values = [
        ("a000000000000001", "ch1=blue&&ch2=green&"),
        ("a000000000000002", "ch1=blue&ch2="),
        ("a000000000000003", "ch1=blue&ch2=purple"),
        ("a000000000000004", "ch1=blue&ch1=blue&ch2=green"),
        ("a000000000000005", "ch1=blue&ch1=green&ch2=green"),
        ("a000000000000006", ","),
        ("a000000000000007", ""),
    ];
    for (id, v) in values {
        assert_eq!(
            post_json(&s, &decision_request(id, "x-deploy-channel-type", v)).status,
            200
        );
    }
    assert_eq!(
        decisions_of(&s, "a000000000000001").0,
        serde_json::json!({"ch1": "blue", "ch2": "green"})
    );
    assert_eq!(
        decisions_of(&s, "a000000000000002").0,
        serde_json::json!({"ch1": "blue"})
    );
    let (d, malformed, _) = decisions_of(&s, "a000000000000003");
    assert_eq!((d, malformed), (serde_json::json!({"ch1": "blue"}), 1));
    assert_eq!(
        decisions_of(&s, "a000000000000004").0,
        serde_json::json!({"ch1": "blue", "ch2": "green"})
    );
    let (d, _, conflicting) = decisions_of(&s, "a000000000000005");
    assert_eq!(d, serde_json::json!({"ch1": "blue", "ch2": "green"}));
    assert_eq!(conflicting, serde_json::json!(["ch1"]));
    for id in ["a000000000000006", "a000000000000007"] {
        let d = decisions_of(&s, id).0;
        assert!(
            d.is_null() || d == serde_json::json!({}),
            "{id}: no decision at all, got {d}"
        );
    }
    // Input B: the decision lost on one hop is stored as no decision, the colour is the
    // instance's, and no extra colour-less row appears.
    let b = r#"{"resourceSpans":[
      {"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"gw"}},{"key":"host.name","value":{"stringValue":"gw-1"}}]},
       "scopeSpans":[{"spans":[{"traceId":"aaaa0000aaaa0000bbbb0000bbbb0000","spanId":"b000000000000001","name":"gw","kind":2,
        "startTimeUnixNano":"1718000400000000000","endTimeUnixNano":"1718000400009000000",
        "attributes":[{"key":"x-deploy-channel-type","value":{"stringValue":"ch1=blue"}}]}]}]},
      {"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"order"}},{"key":"host.name","value":{"stringValue":"order-b1"}}]},
       "scopeSpans":[{"spans":[
        {"traceId":"aaaa0000aaaa0000bbbb0000bbbb0000","spanId":"b000000000000002","parentSpanId":"b000000000000001","name":"order","kind":2,
         "startTimeUnixNano":"1718000400001000000","endTimeUnixNano":"1718000400008000000",
         "attributes":[{"key":"x-deploy-channel-type","value":{"stringValue":"ch1=blue"}}]},
        {"traceId":"aaaa0000aaaa0000bbbb0000bbbb0000","spanId":"b000000000000003","parentSpanId":"b000000000000002","name":"call stock","kind":3,
         "startTimeUnixNano":"1718000400002000000","endTimeUnixNano":"1718000400007000000"}]}]},
      {"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"stock"}},{"key":"host.name","value":{"stringValue":"stock-b1"}}]},
       "scopeSpans":[{"spans":[{"traceId":"aaaa0000aaaa0000bbbb0000bbbb0000","spanId":"b000000000000004","parentSpanId":"b000000000000003","name":"stock","kind":2,
        "startTimeUnixNano":"1718000400003000000","endTimeUnixNano":"1718000400006000000"}]}]}]}"#;
    assert_eq!(post_json(&s, b).status, 200);
    let rows = s.sql(
        "SELECT service_name, color, decision_source FROM spans \
         WHERE trace_id = 'aaaa0000aaaa0000bbbb0000bbbb0000' AND span_kind = 'SERVER' ORDER BY span_id",
    );
    assert_eq!(
        rows,
        vec![
            vec![
                serde_json::json!("gw"),
                serde_json::json!("unknown"),
                serde_json::json!("x-deploy-channel-type")
            ],
            vec![
                serde_json::json!("order"),
                serde_json::json!("blue"),
                serde_json::json!("x-deploy-channel-type")
            ],
            vec![
                serde_json::json!("stock"),
                serde_json::json!("blue"),
                serde_json::Value::Null
            ],
        ]
    );
}

#[test]
fn case18_instance_identity_from_resource_attributes() {
    let dir = temp_dir();
    let s = server_with_patterns(dir.path());
    let resource = |svc: Option<&str>,
                    host: Option<&str>,
                    inst: Option<&str>,
                    n: usize,
                    tag: u8,
                    kind: u8| {
        let mut attrs = Vec::new();
        for (k, v) in [
            ("service.name", svc),
            ("host.name", host),
            ("service.instance.id", inst),
        ] {
            if let Some(v) = v {
                attrs.push(format!(
                    r#"{{"key":"{k}","value":{{"stringValue":"{v}"}}}}"#
                ));
            }
        }
        let spans: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    r#"{{"traceId":"{:032x}","spanId":"{:016x}","name":"op","kind":{kind},
                       "startTimeUnixNano":"1718000500000000000","endTimeUnixNano":"1718000500001000000"}}"#,
                    (u128::from(tag) << 64) | (i as u128 + 1),
                    (u64::from(tag) << 32) | (i as u64 + 1),
                )
            })
            .collect();
        format!(
            r#"{{"resource":{{"attributes":[{}]}},"scopeSpans":[{{"spans":[{}]}}]}}"#,
            attrs.join(","),
            spans.join(",")
        )
    };
    let body = format!(
        r#"{{"resourceSpans":[{},{},{},{},{}]}}"#,
        resource(
            Some("order"),
            Some("node-7"),
            Some("order-b1-7f9c"),
            100,
            1,
            2
        ),
        resource(
            Some("stock"),
            Some("node-7"),
            Some("stock-b1-2b1d"),
            100,
            2,
            2
        ),
        resource(
            Some("order"),
            Some("node-7"),
            Some("order-b2-55aa"),
            60,
            3,
            2
        ),
        resource(Some("order"), None, Some("order-g1-91e0"), 40, 4, 2),
        resource(None, Some("node-9"), None, 5, 5, 1),
    );
    assert_eq!(post_json(&s, &body).status, 200);
    let rows =
        s.sql("SELECT service_name, instance_id, count(*) FROM spans GROUP BY 1, 2 ORDER BY 1, 2");
    assert_eq!(
        rows,
        vec![
            vec![
                serde_json::json!("order"),
                serde_json::json!("order-b1-7f9c"),
                serde_json::json!(100)
            ],
            vec![
                serde_json::json!("order"),
                serde_json::json!("order-b2-55aa"),
                serde_json::json!(60)
            ],
            vec![
                serde_json::json!("order"),
                serde_json::json!("order-g1-91e0"),
                serde_json::json!(40)
            ],
            vec![
                serde_json::json!("stock"),
                serde_json::json!("stock-b1-2b1d"),
                serde_json::json!(100)
            ],
            vec![
                serde_json::json!("unknown_service"),
                serde_json::json!("node-9"),
                serde_json::json!(5)
            ],
        ]
    );
}
