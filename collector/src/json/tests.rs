//! Tests of the OTLP/JSON decoder: the field cases 01, 02, 03, 04 and 07, edge inputs, and
//! property tests (no panic on any input; writer → decoder round trip over random requests).

use super::*;
use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use proptest::prelude::*;
use serde_json::{Value as Json, json};

fn decode(s: &str) -> ExportTraceServiceRequest {
    decode_export_request(s.as_bytes()).unwrap_or_else(|e| panic!("{e}\n{s}"))
}

fn error(s: &str) -> JsonDecodeError {
    match decode_export_request(s.as_bytes()) {
        Ok(r) => panic!("accepted {s}: {r:?}"),
        Err(e) => e,
    }
}

/// The path and message of an `Invalid` error.
fn invalid(s: &str) -> (String, String) {
    match error(s) {
        JsonDecodeError::Invalid {
            path,
            message,
            line,
            column,
        } => {
            assert!(line > 0, "{path}: {message} {column}");
            (path, message)
        }
        e => panic!("not Invalid: {e:?}"),
    }
}

fn spans(r: &ExportTraceServiceRequest) -> Vec<&Span> {
    r.resource_spans
        .iter()
        .flat_map(|rs| &rs.scope_spans)
        .flat_map(|ss| &ss.spans)
        .collect()
}

fn h(s: &str) -> Vec<u8> {
    hex::decode(s).unwrap()
}

fn s(v: &str) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(V::StringValue(v.into())),
    })
}

fn kv(k: &str, value: Option<AnyValue>) -> KeyValue {
    KeyValue {
        key: k.into(),
        value,
        ..Default::default()
    }
}

/// One request with the given spans (JSON text) on resource `service.name=order`.
fn wrap(spans: &str) -> String {
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[
        {{"key":"service.name","value":{{"stringValue":"order"}}}}]}},
        "scopeSpans":[{{"scope":{{"name":"t"}},"spans":[{spans}]}}]}}]}}"#
    )
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

#[test]
fn case01_a_mixed_case_hex_ids_give_the_same_bytes() {
    let r = decode(CASE01_A);
    let rs = &r.resource_spans[0];
    let res = rs.resource.as_ref().unwrap();
    assert_eq!(
        res.attributes,
        vec![
            kv("service.name", s("order")),
            kv("host.name", s("order-b1"))
        ]
    );
    assert_eq!(rs.scope_spans[0].scope.as_ref().unwrap().name, "case01");
    let sp = spans(&r);
    assert_eq!(sp.len(), 2);
    assert_eq!(sp[0].trace_id, h("7d3f0c9a2b1e4f5a8c6d0e1f2a3b4c5d"));
    assert_eq!(sp[1].trace_id, sp[0].trace_id);
    assert_eq!(sp[0].span_id, h("c0ffee0000a1b2c3"));
    assert_eq!(sp[0].parent_span_id, Vec::<u8>::new());
    assert_eq!(sp[1].span_id, h("0badf00d00000001"));
    assert_eq!(sp[1].parent_span_id, sp[0].span_id);
    assert_eq!((sp[0].name.as_str(), sp[0].kind), ("GET /order", 2));
    assert_eq!((sp[1].name.as_str(), sp[1].kind), ("SELECT stock", 3));
    assert_eq!(sp[0].start_time_unix_nano, 1_718_000_000_000_000_000);
    assert_eq!(sp[0].end_time_unix_nano, 1_718_000_000_300_000_000);
    assert_eq!(sp[1].start_time_unix_nano, 1_718_000_000_010_000_000);
}

#[test]
fn case01_b_base64_ids_are_refused_naming_the_field() {
    let b = CASE01_A.replacen(
        r#""traceId":"7d3f0c9a2b1e4f5a8c6d0e1f2a3b4c5d","spanId":"c0ffee0000a1b2c3""#,
        r#""traceId":"fT8MmiseT1qMbQ4fKjtMXQ==","spanId":"wP/uAAChssM=""#,
        1,
    );
    let (path, message) = invalid(&b);
    assert_eq!(path, "resourceSpans[0].scopeSpans[0].spans[0].traceId");
    assert_eq!(
        message,
        "expected 32 hex digits, got 24 characters (base64 is not OTLP/JSON)"
    );
    let e = error(&b).to_string();
    assert!(
        e.starts_with(
            "resourceSpans[0].scopeSpans[0].spans[0].traceId: expected 32 hex digits, \
             got 24 characters (base64 is not OTLP/JSON) at line 5 column "
        ),
        "{e}"
    );
    // Only the span id in base64: the second span.
    let b = CASE01_A.replace(
        r#""spanId":"0BADF00D00000001""#,
        r#""spanId":"C63wDQAAAAE=""#,
    );
    let (path, message) = invalid(&b);
    assert_eq!(path, "resourceSpans[0].scopeSpans[0].spans[1].spanId");
    assert_eq!(
        message,
        "expected 16 hex digits, got 12 characters (base64 is not OTLP/JSON)"
    );
}

#[test]
fn case01_c_wrong_length_or_non_hex_ids_are_refused() {
    let c = CASE01_A.replace(
        "7d3f0c9a2b1e4f5a8c6d0e1f2a3b4c5d",
        "7d3f0c9a2b1e4f5a8c6d0e1f2a3b4c",
    );
    let (path, message) = invalid(&c);
    assert_eq!(path, "resourceSpans[0].scopeSpans[0].spans[0].traceId");
    assert_eq!(message, "expected 32 hex digits, got 30 characters");
    let c = CASE01_A.replace("c0ffee0000a1b2c3", "c0ffee0000a1b2cz");
    let (path, message) = invalid(&c);
    assert_eq!(path, "resourceSpans[0].scopeSpans[0].spans[0].spanId");
    assert_eq!(
        message,
        "expected 16 hex digits, got non-hex character 'z' at index 15"
    );
    let c = CASE01_A.replace("C0FFEE0000A1B2C3", "C0FFEE0000A1B2C");
    assert_eq!(
        invalid(&c).0,
        "resourceSpans[0].scopeSpans[0].spans[1].parentSpanId"
    );
    let c = CASE01_A.replace(r#""0BADF00D00000001""#, "12");
    let (path, message) = invalid(&c);
    assert_eq!(path, "resourceSpans[0].scopeSpans[0].spans[1].spanId");
    assert_eq!(
        message,
        "invalid type: integer `12`, expected a string of 16 hex digits"
    );
    // Non-ASCII of the right byte length is reported, not sliced.
    let c = wrap(r#"{"spanId":"é00000000000000"}"#);
    assert!(invalid(&c).1.contains("non-hex character 'é' at index 0"));
}

#[test]
fn ids_empty_or_null_are_empty_bytes_and_all_zero_ids_are_kept() {
    let r = decode(&wrap(
        r#"{"traceId":"","spanId":null,"parentSpanId":""},
           {"traceId":"00000000000000000000000000000000","spanId":"0000000000000000"}"#,
    ));
    let sp = spans(&r);
    assert!(sp[0].trace_id.is_empty() && sp[0].span_id.is_empty());
    assert!(sp[0].parent_span_id.is_empty());
    assert_eq!(sp[1].trace_id, vec![0; 16]);
    assert_eq!(sp[1].span_id, vec![0; 8]);
}

#[test]
fn case02_int64_as_string_or_number_is_exact() {
    let r = decode(
        r#"{"resourceSpans":[{"resource":{"attributes":[
      {"key":"service.name","value":{"stringValue":"order"}},
      {"key":"host.name","value":{"stringValue":"order-g1"}}]},
     "scopeSpans":[{"spans":[
      {"traceId":"11111111111111112222222222222222","spanId":"aaaaaaaaaaaaaa01","name":"x",
       "startTimeUnixNano":"1718000000123456789","endTimeUnixNano":"1718000000223456789",
       "attributes":[{"key":"retry.count","value":{"intValue":"42"}}]},
      {"traceId":"11111111111111112222222222222222","spanId":"aaaaaaaaaaaaaa02","name":"x",
       "startTimeUnixNano":1718000000123456789,"endTimeUnixNano":1718000000223456789,
       "attributes":[{"key":"retry.count","value":{"intValue":42}}]},
      {"traceId":"11111111111111112222222222222222","spanId":"aaaaaaaaaaaaaa03","name":"x",
       "startTimeUnixNano":"1718000000123456789","endTimeUnixNano":"1718000000123456939",
       "attributes":[{"key":"ratio","value":{"doubleValue":0.25}}]}]}]}]}"#,
    );
    let sp = spans(&r);
    assert_eq!(sp[0].start_time_unix_nano, 1_718_000_000_123_456_789);
    assert_eq!(
        sp[0].end_time_unix_nano - sp[0].start_time_unix_nano,
        100_000_000
    );
    let int42 = Some(AnyValue {
        value: Some(V::IntValue(42)),
    });
    assert_eq!(sp[0].attributes, vec![kv("retry.count", int42)]);
    let mut s2 = sp[1].clone();
    s2.span_id = sp[0].span_id.clone();
    assert_eq!(&s2, sp[0]);
    assert_eq!(sp[2].end_time_unix_nano - sp[2].start_time_unix_nano, 150);
    let ratio = Some(AnyValue {
        value: Some(V::DoubleValue(0.25)),
    });
    assert_eq!(sp[2].attributes, vec![kv("ratio", ratio)]);
}

#[test]
fn case02_rfc3339_and_other_non_integers_are_refused() {
    let (path, message) = invalid(&wrap(r#"{"startTimeUnixNano":"2024-06-10T06:13:20Z"}"#));
    assert_eq!(
        path,
        "resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano"
    );
    assert_eq!(
        message,
        "expected an unsigned 64-bit integer (JSON number or decimal string), got \
         \"2024-06-10T06:13:20Z\" (times are Unix epoch nanoseconds, not RFC 3339 text)"
    );
    for bad in [
        r#"-1"#, r#""-1""#, "1.5", r#""1.5""#, r#""""#, r#"" 1""#, "true", "1e300",
    ] {
        let (path, _) = invalid(&wrap(&format!(r#"{{"endTimeUnixNano":{bad}}}"#)));
        assert_eq!(
            path, "resourceSpans[0].scopeSpans[0].spans[0].endTimeUnixNano",
            "{bad}"
        );
    }
    let (_, message) = invalid(&wrap(r#"{"endTimeUnixNano":"18446744073709551616"}"#));
    assert!(message.ends_with("(out of range)"), "{message}");
    let (path, _) = invalid(&wrap(r#"{"flags":4294967296}"#));
    assert!(path.ends_with("spans[0].flags"));
    let (path, _) = invalid(&wrap(
        r#"{"attributes":[{"key":"a","value":{"intValue":"9223372036854775808"}}]}"#,
    ));
    assert_eq!(
        path,
        "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.intValue"
    );
}

#[test]
fn int64_extremes_and_integral_floats() {
    let r = decode(&wrap(
        r#"{"startTimeUnixNano":"18446744073709551615","endTimeUnixNano":18446744073709551615,
            "droppedAttributesCount":"7","flags":1e3,"attributes":[
            {"key":"a","value":{"intValue":"-9223372036854775808"}},
            {"key":"b","value":{"intValue":9223372036854775807}},
            {"key":"c","value":{"intValue":-5}}]}"#,
    ));
    let sp = spans(&r)[0];
    assert_eq!(
        (sp.start_time_unix_nano, sp.end_time_unix_nano),
        (u64::MAX, u64::MAX)
    );
    assert_eq!((sp.dropped_attributes_count, sp.flags), (7, 1000));
    let ints: Vec<_> = sp
        .attributes
        .iter()
        .map(|a| a.value.clone().unwrap().value)
        .collect();
    assert_eq!(
        ints,
        vec![
            Some(V::IntValue(i64::MIN)),
            Some(V::IntValue(i64::MAX)),
            Some(V::IntValue(-5))
        ]
    );
}

#[test]
fn case03_enum_integers_map_exactly() {
    let r = decode(&wrap(
        r#"{"spanId":"e000000000000000"},
           {"spanId":"e000000000000001","kind":1,"status":{"code":0}},
           {"spanId":"e000000000000002","kind":2,"status":{"code":1}},
           {"spanId":"e000000000000003","kind":3,"status":{"code":2,"message":"upstream 503"}},
           {"spanId":"e000000000000004","kind":4,"status":{}},
           {"spanId":"e000000000000005","kind":5},
           {"spanId":"e000000000000006","kind":2,"status":{"code":2}},
           {"spanId":"e000000000000007","kind":9,"status":{"code":7}}"#,
    ));
    let sp = spans(&r);
    let kinds: Vec<i32> = sp.iter().map(|s| s.kind).collect();
    use opentelemetry_proto::tonic::trace::v1::span::SpanKind as K;
    let expected = [
        K::Unspecified,
        K::Internal,
        K::Server,
        K::Client,
        K::Producer,
        K::Consumer,
    ];
    let expected: Vec<i32> = expected.iter().map(|k| *k as i32).chain([2, 9]).collect();
    assert_eq!(kinds, expected);
    let codes: Vec<i32> = sp
        .iter()
        .map(|s| s.status.as_ref().map_or(0, |s| s.code))
        .collect();
    assert_eq!(codes, vec![0, 0, 1, 2, 0, 0, 2, 7]);
    assert_eq!(sp[0].status, None);
    assert_eq!(sp[4].status, Some(Status::default()));
    let st = sp[3].status.as_ref().unwrap();
    assert_eq!(
        (st.code, st.message.as_str()),
        (StatusCode::Error as i32, "upstream 503")
    );
}

#[test]
fn case03_full_enum_names_accepted_short_names_refused() {
    let int = decode(&wrap(
        r#"{"spanId":"e000000000000006","kind":2,"status":{"code":2}}"#,
    ));
    let named = decode(&wrap(
        r#"{"spanId":"e000000000000006","kind":"SPAN_KIND_SERVER",
            "status":{"code":"STATUS_CODE_ERROR"}}"#,
    ));
    assert_eq!(int, named);
    let r = decode(&wrap(
        r#"{"kind":"SPAN_KIND_CONSUMER","status":{"code":"STATUS_CODE_OK"}},
           {"kind":"SPAN_KIND_UNSPECIFIED","status":{"code":"STATUS_CODE_UNSET"}}"#,
    ));
    let sp = spans(&r);
    assert_eq!((sp[0].kind, sp[0].status.as_ref().unwrap().code), (5, 1));
    assert_eq!((sp[1].kind, sp[1].status.as_ref().unwrap().code), (0, 0));

    let (path, message) = invalid(&wrap(r#"{"kind":2,"status":{"code":"ERROR"}}"#));
    assert_eq!(path, "resourceSpans[0].scopeSpans[0].spans[0].status.code");
    assert_eq!(
        message,
        "unknown StatusCode name \"ERROR\": expected an integer or a full enum name such as \
         \"STATUS_CODE_ERROR\""
    );
    let (path, message) = invalid(&wrap(r#"{"kind":"SERVER"}"#));
    assert_eq!(path, "resourceSpans[0].scopeSpans[0].spans[0].kind");
    assert!(
        message.starts_with("unknown SpanKind name \"SERVER\""),
        "{message}"
    );
    for bad in [
        r#""span_kind_server""#,
        r#""2""#,
        "2.5",
        "4294967296",
        "true",
    ] {
        let (path, _) = invalid(&wrap(&format!(r#"{{"kind":{bad}}}"#)));
        assert!(path.ends_with(".kind"), "{bad}");
    }
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
fn case04_camel_case_with_unknown_fields() {
    let r = decode(CASE04_A);
    let rs = &r.resource_spans[0];
    assert_eq!(rs.schema_url, "https://opentelemetry.io/schemas/1.26.0");
    let res = rs.resource.as_ref().unwrap();
    assert_eq!(res.attributes.len(), 2);
    assert_eq!(res.dropped_attributes_count, 0);
    let scope = rs.scope_spans[0].scope.as_ref().unwrap();
    assert_eq!(
        (scope.name.as_str(), scope.version.as_str()),
        ("case04", "0.1")
    );
    let sp = spans(&r);
    assert_eq!(sp.len(), 1);
    let span = sp[0];
    assert_eq!(span.trace_id, h("44444444444444445555555555555555"));
    assert_eq!(span.span_id, h("4444444444444401"));
    assert_eq!(
        (span.name.as_str(), span.kind, span.flags),
        ("GET /order", 2, 257)
    );
    assert_eq!(
        span.end_time_unix_nano - span.start_time_unix_nano,
        50_000_000
    );
}

#[test]
fn case04_snake_case_names_give_the_identical_request() {
    let b = CASE04_A
        .replace("resourceSpans", "resource_spans")
        .replace("scopeSpans", "scope_spans")
        .replace("traceId", "trace_id")
        .replace(
            r#""spanId":"4444444444444401""#,
            r#""span_id":"4444444444444402""#,
        )
        .replace("startTimeUnixNano", "start_time_unix_nano")
        .replace("endTimeUnixNano", "end_time_unix_nano")
        .replace("stringValue", "string_value")
        .replace("droppedAttributesCount", "dropped_attributes_count")
        .replace("schemaUrl", "schema_url");
    assert!(!b.contains("Spans") && b.contains("span_id"));
    let mut rb = decode(&b);
    let ra = decode(CASE04_A);
    assert_eq!(spans(&rb)[0].span_id, h("4444444444444402"));
    rb.resource_spans[0].scope_spans[0].spans[0].span_id = h("4444444444444401");
    assert_eq!(ra, rb);
}

#[test]
fn case07_official_example_shape() {
    let r = decode(
        r#"{"resourceSpans":[{"resource":{"attributes":[
   {"key":"service.name","value":{"stringValue":"inventory.api"}}]},
 "scopeSpans":[{"scope":{"name":"inventory.http","version":"2.3.1",
   "attributes":[{"key":"inventory.scope.note","value":{"stringValue":"sample scope attr"}}]},
  "spans":[{"traceId":"0AF7651916CD43DD8448EB211C80319C","spanId":"B7AD6B7169203331",
   "parentSpanId":"B7AD6B7169203330","name":"handle reserve",
   "startTimeUnixNano":1718000200000000000,"endTimeUnixNano":1718000201000000000,
   "kind":2,"attributes":[{"key":"inventory.sku","value":{"stringValue":"A-17"}}]}]}]}]}"#,
    );
    let ss = &r.resource_spans[0].scope_spans[0];
    let scope = ss.scope.as_ref().unwrap();
    assert_eq!(
        (scope.name.as_str(), scope.version.as_str()),
        ("inventory.http", "2.3.1")
    );
    assert_eq!(
        scope.attributes,
        vec![kv("inventory.scope.note", s("sample scope attr"))]
    );
    let span = &ss.spans[0];
    assert_eq!(span.trace_id, h("0af7651916cd43dd8448eb211c80319c"));
    assert_eq!(span.span_id, h("b7ad6b7169203331"));
    assert_eq!(span.parent_span_id, h("b7ad6b7169203330"));
    assert_eq!((span.name.as_str(), span.kind), ("handle reserve", 2));
    assert_eq!(
        span.end_time_unix_nano - span.start_time_unix_nano,
        1_000_000_000
    );
    assert_eq!(span.attributes, vec![kv("inventory.sku", s("A-17"))]);
}

#[test]
fn every_span_field_is_decoded() {
    let r = decode(
        r#"{"resourceSpans":[{"resource":{"attributes":[],"droppedAttributesCount":3,
      "entityRefs":[{"schemaUrl":"u","type":"service","idKeys":["service.name"],
                     "descriptionKeys":["a","b"]}]},
    "schemaUrl":"rs","scopeSpans":[{"schemaUrl":"ss",
    "scope":{"name":"n","version":"v","droppedAttributesCount":"4",
             "attributes":[{"key":"k","value":{"boolValue":true}}]},
    "spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708",
      "traceState":"a=b","parentSpanId":"1112131415161718","flags":769,"name":"op",
      "kind":3,"startTimeUnixNano":"10","endTimeUnixNano":20,"droppedAttributesCount":1,
      "droppedEventsCount":2,"droppedLinksCount":"3",
      "attributes":[
        {"key":"s","value":{"stringValue":"x"}},{"key":"b","value":{"boolValue":false}},
        {"key":"i","value":{"intValue":"-3"}},{"key":"d","value":{"doubleValue":"1.5"}},
        {"key":"nan","value":{"doubleValue":"NaN"}},
        {"key":"inf","value":{"doubleValue":"Infinity"}},
        {"key":"ninf","value":{"doubleValue":"-Infinity"}},{"key":"d2","value":{"doubleValue":7}},
        {"key":"by","value":{"bytesValue":"AQL/"}},{"key":"by2","value":{"bytesValue":"-_8"}},
        {"key":"arr","value":{"arrayValue":{"values":[{"intValue":1},{}]}}},
        {"key":"kvl","value":{"kvlistValue":{"values":[{"key":"in","value":{"stringValue":"y"}}]}}},
        {"key":"empty","value":{}},{"key":"none"},
        {"key":"last","value":{"stringValue":"a","intValue":5,"boolValue":null}}],
      "events":[{"timeUnixNano":"15","name":"ev","droppedAttributesCount":1,
                 "attributes":[{"key":"e","value":{"stringValue":"v"}}]}],
      "links":[{"traceId":"0102030405060708090A0B0C0D0E0F11","spanId":"0102030405060709",
                "traceState":"c=d","flags":256,"droppedAttributesCount":2,
                "attributes":[{"key":"l","value":{"stringValue":"w"}}]}],
      "status":{"code":2,"message":"boom"}}]}]}]}"#,
    );
    let rs = &r.resource_spans[0];
    let res = rs.resource.as_ref().unwrap();
    assert_eq!(res.dropped_attributes_count, 3);
    assert_eq!(
        res.entity_refs,
        vec![EntityRef {
            schema_url: "u".into(),
            r#type: "service".into(),
            id_keys: vec!["service.name".into()],
            description_keys: vec!["a".into(), "b".into()],
        }]
    );
    assert_eq!(
        (
            rs.schema_url.as_str(),
            rs.scope_spans[0].schema_url.as_str()
        ),
        ("rs", "ss")
    );
    let scope = rs.scope_spans[0].scope.clone().unwrap();
    let bool_true = Some(AnyValue {
        value: Some(V::BoolValue(true)),
    });
    assert_eq!(
        scope,
        InstrumentationScope {
            name: "n".into(),
            version: "v".into(),
            attributes: vec![kv("k", bool_true)],
            dropped_attributes_count: 4,
        }
    );
    let span = &rs.scope_spans[0].spans[0];
    let a = |v: V| Some(AnyValue { value: Some(v) });
    let attrs = &span.attributes;
    assert_eq!(attrs.len(), 15);
    let nan = &attrs[4].value.as_ref().unwrap().value;
    assert!(matches!(nan, Some(V::DoubleValue(d)) if d.is_nan()));
    let mut attrs = attrs.clone();
    attrs.remove(4);
    let expected_attrs = vec![
        kv("s", s("x")),
        kv("b", a(V::BoolValue(false))),
        kv("i", a(V::IntValue(-3))),
        kv("d", a(V::DoubleValue(1.5))),
        kv("inf", a(V::DoubleValue(f64::INFINITY))),
        kv("ninf", a(V::DoubleValue(f64::NEG_INFINITY))),
        kv("d2", a(V::DoubleValue(7.0))),
        kv("by", a(V::BytesValue(vec![1, 2, 255]))),
        kv("by2", a(V::BytesValue(vec![251, 255]))),
        kv(
            "arr",
            a(V::ArrayValue(ArrayValue {
                values: vec![
                    AnyValue {
                        value: Some(V::IntValue(1)),
                    },
                    AnyValue { value: None },
                ],
            })),
        ),
        kv(
            "kvl",
            a(V::KvlistValue(KeyValueList {
                values: vec![kv("in", s("y"))],
            })),
        ),
        kv("empty", Some(AnyValue { value: None })),
        kv("none", None),
        kv("last", a(V::IntValue(5))),
    ];
    assert_eq!(attrs, expected_attrs);
    let expected = Span {
        trace_id: (1..=16).collect(),
        span_id: (1..=8).collect(),
        trace_state: "a=b".into(),
        parent_span_id: (0x11..=0x18).collect(),
        flags: 769,
        name: "op".into(),
        kind: 3,
        start_time_unix_nano: 10,
        end_time_unix_nano: 20,
        attributes: vec![],
        dropped_attributes_count: 1,
        events: vec![Event {
            time_unix_nano: 15,
            name: "ev".into(),
            attributes: vec![kv("e", s("v"))],
            dropped_attributes_count: 1,
        }],
        dropped_events_count: 2,
        links: vec![Link {
            trace_id: (1..=15).chain([17]).collect(),
            span_id: (1..=7).chain([9]).collect(),
            trace_state: "c=d".into(),
            attributes: vec![kv("l", s("w"))],
            dropped_attributes_count: 2,
            flags: 256,
        }],
        dropped_links_count: 3,
        status: Some(Status {
            message: "boom".into(),
            code: 2,
        }),
    };
    let mut span = span.clone();
    span.attributes.clear();
    assert_eq!(span, expected);
}

#[test]
fn nulls_mean_absent() {
    let r = decode(
        r#"{"resourceSpans":[{"resource":null,"schemaUrl":null,"scopeSpans":[{"scope":null,
        "spans":[{"traceId":null,"name":null,"kind":null,"flags":null,"status":null,
        "startTimeUnixNano":null,"attributes":null,"events":null,"links":null,
        "droppedAttributesCount":null},null]}]},null]}"#,
    );
    let rs = &r.resource_spans[0];
    assert_eq!(rs.resource, None);
    assert_eq!(rs.scope_spans[0].scope, None);
    assert_eq!(
        rs.scope_spans[0].spans,
        vec![Span::default(), Span::default()]
    );
    assert_eq!(r.resource_spans[1], ResourceSpans::default());
}

#[test]
fn empty_requests_and_bad_top_levels() {
    let empty = ExportTraceServiceRequest::default();
    for ok in [
        "{}",
        r#"{"resourceSpans":[]}"#,
        r#"{"resourceSpans":null}"#,
        " {\n} \n",
    ] {
        assert_eq!(decode(ok), empty, "{ok}");
    }
    assert_eq!(decode_export_request(b""), Err(JsonDecodeError::EmptyBody));
    assert_eq!(
        JsonDecodeError::EmptyBody.to_string(),
        "empty body is not a JSON object"
    );
    for bad in [
        "[]",
        "null",
        "5",
        r#""x""#,
        " ",
        "{} {}",
        "{",
        r#"{"resourceSpans":{}}"#,
    ] {
        let e = error(bad);
        assert!(
            matches!(&e, JsonDecodeError::Invalid { .. }),
            "{bad}: {e:?}"
        );
    }
    let (path, message) = invalid("[]");
    assert_eq!(path, "");
    assert_eq!(
        message,
        "invalid type: sequence, expected an ExportTraceServiceRequest JSON object"
    );
    let (path, message) = invalid(r#"{"resourceSpans":{}}"#);
    assert_eq!(path, "resourceSpans");
    assert_eq!(
        message,
        "invalid type: map, expected an array of a ResourceSpans object"
    );
}

#[test]
fn syntax_errors_name_the_enclosing_object() {
    let e = error(&wrap(r#"{"name":"a" "kind":2}"#));
    let JsonDecodeError::Invalid {
        path,
        message,
        line,
        ..
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!(path, "resourceSpans[0].scopeSpans[0].spans[0]");
    assert_eq!(message, "expected `,` or `}`");
    assert_eq!(*line, 3);
    // Keys are reported as sent (snake_case here).
    let (path, _) =
        invalid(r#"{"resource_spans":[{"scope_spans":[{"spans":[{"span_id":"x"}]}]}]}"#);
    assert_eq!(path, "resource_spans[0].scope_spans[0].spans[0].span_id");
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let depth = 10_000;
    let v = format!(
        r#"{}{{"intValue":1}}{}"#,
        r#"{"arrayValue":{"values":["#.repeat(depth),
        "]}}".repeat(depth)
    );
    let body = wrap(&format!(
        r#"{{"attributes":[{{"key":"deep","value":{v}}}]}}"#
    ));
    let (path, message) = invalid(&body);
    assert_eq!(message, super::RECURSION_MESSAGE);
    assert!(path.starts_with("resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value"));
    // Deep unknown fields are skipped by serde_json without recursion: no crash either way.
    let deep_unknown = format!(r#"{{"x":{}1{}}}"#, "[".repeat(depth), "]".repeat(depth));
    let _ = decode_export_request(deep_unknown.as_bytes());
    let deep_array = "[".repeat(100_000);
    assert!(decode_export_request(deep_array.as_bytes()).is_err());
}

#[test]
fn invalid_utf8_is_refused() {
    let mut body = wrap(r#"{"name":"abXYcd"}"#).into_bytes();
    let at = body.windows(2).position(|w| w == b"XY").unwrap();
    body[at] = 0xC3;
    body[at + 1] = 0x28;
    let e = decode_export_request(&body).unwrap_err();
    let JsonDecodeError::InvalidUtf8 { offset, line, .. } = e else {
        panic!("{e:?}")
    };
    assert_eq!((offset, line), (at, 3));
    assert!(e.to_string().starts_with("invalid UTF-8 at byte"));
    // A lone surrogate escape is invalid too.
    let (path, _) = invalid(&wrap(r#"{"name":"\ud800"}"#));
    assert!(path.ends_with("spans[0].name"));
}

#[test]
fn bad_bytes_and_doubles_are_refused() {
    let attr = |v: &str| wrap(&format!(r#"{{"attributes":[{{"key":"k","value":{v}}}]}}"#));
    for bad in [
        r#"{"bytesValue":"A"}"#,
        r#"{"bytesValue":"AQ=="x}"#,
        r#"{"bytesValue":"A==="}"#,
        r#"{"bytesValue":"AQ*="}"#,
        r#"{"doubleValue":"inf"}"#,
        r#"{"doubleValue":"1e999"}"#,
        r#"{"doubleValue":"abc"}"#,
        r#"{"doubleValue":true}"#,
        r#"{"boolValue":"true"}"#,
        r#"{"stringValue":5}"#,
    ] {
        let e = error(&attr(bad));
        assert!(e.to_string().contains("attributes[0].value"), "{bad}: {e}");
    }
    assert_eq!(base64_decode("AQ=="), Some(vec![1]));
    assert_eq!(base64_decode("AQI"), Some(vec![1, 2]));
    assert_eq!(base64_decode(""), Some(vec![]));
    assert_eq!(
        base64_decode("fT8MmiseT1qMbQ4fKjtMXQ==")
            .map(hex::encode)
            .as_deref(),
        Some("7d3f0c9a2b1e4f5a8c6d0e1f2a3b4c5d")
    );
}

// ---------------------------------------------------------------------------------------------
// Property tests.

/// Test-only OTLP/JSON writer: camelCase or (randomly) snake_case keys, int64 as strings or
/// (randomly) numbers, hex ids in either case, defaults randomly omitted, unknown fields added.
struct Writer(u64);

impl Writer {
    fn coin(&mut self) -> bool {
        // xorshift64
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 & 1 == 1
    }

    fn obj(&mut self, fields: Vec<(&'static str, &'static str, Option<Json>)>) -> Json {
        let mut m = serde_json::Map::new();
        for (camel, snake, v) in fields {
            let key = if self.coin() { camel } else { snake };
            match v {
                Some(v) => m.insert(key.to_owned(), v),
                None if self.coin() => m.insert(key.to_owned(), Json::Null),
                None => None,
            };
        }
        if self.coin() && self.coin() {
            m.insert(
                "someFutureField".into(),
                json!({"x": [1, "y", null, {"z": -2.5}]}),
            );
        }
        Json::Object(m)
    }

    /// `None` (omitted or null) for a default value, sometimes, else `Some(v)`.
    fn opt(&mut self, is_default: bool, v: Json) -> Option<Json> {
        if is_default && self.coin() {
            None
        } else {
            Some(v)
        }
    }

    fn u64(&mut self, v: u64) -> Option<Json> {
        let j = if self.coin() {
            json!(v)
        } else {
            json!(v.to_string())
        };
        self.opt(v == 0, j)
    }

    fn int(&mut self, v: i64) -> Json {
        if self.coin() {
            json!(v)
        } else {
            json!(v.to_string())
        }
    }

    fn id(&mut self, b: &[u8]) -> Option<Json> {
        let hex = hex::encode(b);
        let hex = if self.coin() { hex.to_uppercase() } else { hex };
        self.opt(b.is_empty(), json!(hex))
    }

    fn str(&mut self, v: &str) -> Option<Json> {
        self.opt(v.is_empty(), json!(v))
    }

    fn list<T>(&mut self, items: &[T], f: fn(&mut Self, &T) -> Json) -> Option<Json> {
        let v: Vec<Json> = items.iter().map(|i| f(self, i)).collect();
        self.opt(items.is_empty(), Json::Array(v))
    }

    fn any(&mut self, v: &AnyValue) -> Json {
        let f = |c: &'static str, s: &'static str, j: Json| vec![(c, s, Some(j))];
        let fields = match &v.value {
            None => vec![],
            Some(V::StringValue(s)) => f("stringValue", "string_value", json!(s)),
            Some(V::BoolValue(b)) => f("boolValue", "bool_value", json!(b)),
            Some(V::IntValue(i)) => f("intValue", "int_value", self.int(*i)),
            Some(V::DoubleValue(d)) => {
                let j = if d.is_infinite() {
                    json!(if *d > 0.0 { "Infinity" } else { "-Infinity" })
                } else if self.coin() {
                    json!(d)
                } else {
                    json!(d.to_string())
                };
                f("doubleValue", "double_value", j)
            }
            Some(V::BytesValue(b)) => f("bytesValue", "bytes_value", json!(base64(b, self.coin()))),
            Some(V::ArrayValue(a)) => {
                let values = Json::Array(a.values.iter().map(|v| self.any(v)).collect());
                let inner = self.obj(vec![("values", "values", Some(values))]);
                f("arrayValue", "array_value", inner)
            }
            Some(V::KvlistValue(l)) => {
                let values = Json::Array(l.values.iter().map(|v| self.kv(v)).collect());
                let inner = self.obj(vec![("values", "values", Some(values))]);
                f("kvlistValue", "kvlist_value", inner)
            }
            Some(V::StringValueStrindex(_)) => unreachable!("not generated"),
        };
        self.obj(fields)
    }

    fn kv(&mut self, kv: &KeyValue) -> Json {
        let value = kv.value.as_ref().map(|v| self.any(v));
        self.obj(vec![
            ("key", "key", Some(json!(kv.key))),
            ("value", "value", value),
        ])
    }

    fn span(&mut self, s: &Span) -> Json {
        let kind = match SpanKind::try_from(s.kind) {
            Ok(k) if self.coin() => json!(k.as_str_name()),
            _ => json!(s.kind),
        };
        let status = s.status.as_ref().map(|st| {
            let code = match StatusCode::try_from(st.code) {
                Ok(c) if self.coin() => json!(c.as_str_name()),
                _ => json!(st.code),
            };
            let code = self.opt(st.code == 0, code);
            let message = self.str(&st.message);
            self.obj(vec![
                ("code", "code", code),
                ("message", "message", message),
            ])
        });
        let fields = vec![
            ("traceId", "trace_id", self.id(&s.trace_id)),
            ("spanId", "span_id", self.id(&s.span_id)),
            ("traceState", "trace_state", self.str(&s.trace_state)),
            ("parentSpanId", "parent_span_id", self.id(&s.parent_span_id)),
            ("flags", "flags", self.opt(s.flags == 0, json!(s.flags))),
            ("name", "name", self.str(&s.name)),
            ("kind", "kind", self.opt(s.kind == 0, kind)),
            (
                "startTimeUnixNano",
                "start_time_unix_nano",
                self.u64(s.start_time_unix_nano),
            ),
            (
                "endTimeUnixNano",
                "end_time_unix_nano",
                self.u64(s.end_time_unix_nano),
            ),
            (
                "attributes",
                "attributes",
                self.list(&s.attributes, Self::kv),
            ),
            (
                "droppedAttributesCount",
                "dropped_attributes_count",
                self.u64(s.dropped_attributes_count.into()),
            ),
            ("events", "events", self.list(&s.events, Self::event)),
            (
                "droppedEventsCount",
                "dropped_events_count",
                self.u64(s.dropped_events_count.into()),
            ),
            ("links", "links", self.list(&s.links, Self::link)),
            (
                "droppedLinksCount",
                "dropped_links_count",
                self.u64(s.dropped_links_count.into()),
            ),
            ("status", "status", status),
        ];
        self.obj(fields)
    }

    fn event(&mut self, e: &Event) -> Json {
        let fields = vec![
            ("timeUnixNano", "time_unix_nano", self.u64(e.time_unix_nano)),
            ("name", "name", self.str(&e.name)),
            (
                "attributes",
                "attributes",
                self.list(&e.attributes, Self::kv),
            ),
            (
                "droppedAttributesCount",
                "dropped_attributes_count",
                self.u64(e.dropped_attributes_count.into()),
            ),
        ];
        self.obj(fields)
    }

    fn link(&mut self, l: &Link) -> Json {
        let fields = vec![
            ("traceId", "trace_id", self.id(&l.trace_id)),
            ("spanId", "span_id", self.id(&l.span_id)),
            ("traceState", "trace_state", self.str(&l.trace_state)),
            (
                "attributes",
                "attributes",
                self.list(&l.attributes, Self::kv),
            ),
            (
                "droppedAttributesCount",
                "dropped_attributes_count",
                self.u64(l.dropped_attributes_count.into()),
            ),
            ("flags", "flags", self.u64(l.flags.into())),
        ];
        self.obj(fields)
    }

    fn scope_spans(&mut self, ss: &ScopeSpans) -> Json {
        let scope = ss.scope.as_ref().map(|sc| {
            let fields = vec![
                ("name", "name", self.str(&sc.name)),
                ("version", "version", self.str(&sc.version)),
                (
                    "attributes",
                    "attributes",
                    self.list(&sc.attributes, Self::kv),
                ),
                (
                    "droppedAttributesCount",
                    "dropped_attributes_count",
                    self.u64(sc.dropped_attributes_count.into()),
                ),
            ];
            self.obj(fields)
        });
        let fields = vec![
            ("scope", "scope", scope),
            ("spans", "spans", self.list(&ss.spans, Self::span)),
            ("schemaUrl", "schema_url", self.str(&ss.schema_url)),
        ];
        self.obj(fields)
    }

    fn resource_spans(&mut self, rs: &ResourceSpans) -> Json {
        let resource = rs.resource.as_ref().map(|r| {
            let fields = vec![
                (
                    "attributes",
                    "attributes",
                    self.list(&r.attributes, Self::kv),
                ),
                (
                    "droppedAttributesCount",
                    "dropped_attributes_count",
                    self.u64(r.dropped_attributes_count.into()),
                ),
            ];
            self.obj(fields)
        });
        let fields = vec![
            ("resource", "resource", resource),
            (
                "scopeSpans",
                "scope_spans",
                self.list(&rs.scope_spans, Self::scope_spans),
            ),
            ("schemaUrl", "schema_url", self.str(&rs.schema_url)),
        ];
        self.obj(fields)
    }

    fn request(&mut self, r: &ExportTraceServiceRequest) -> String {
        let rs = self.list(&r.resource_spans, Self::resource_spans);
        self.obj(vec![("resourceSpans", "resource_spans", rs)])
            .to_string()
    }
}

/// Base64, standard alphabet with padding, or URL-safe without.
fn base64(b: &[u8], url: bool) -> String {
    let abc: &[u8] = if url {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    } else {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    };
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |a, (i, &x)| a | u32::from(x) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(abc[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
        if !url {
            out.push_str(&"=="[..3 - chunk.len()]);
        }
    }
    out
}

fn any_value() -> impl Strategy<Value = AnyValue> {
    let double = prop_oneof![
        (-1_000_000i32..1_000_000).prop_map(|i| f64::from(i) / 64.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(1e300),
    ];
    let leaf = prop_oneof![
        Just(None),
        "\\PC{0,6}".prop_map(|s| Some(V::StringValue(s))),
        any::<bool>().prop_map(|b| Some(V::BoolValue(b))),
        any::<i64>().prop_map(|i| Some(V::IntValue(i))),
        double.prop_map(|d| Some(V::DoubleValue(d))),
        prop::collection::vec(any::<u8>(), 0..7).prop_map(|b| Some(V::BytesValue(b))),
    ]
    .prop_map(|value| AnyValue { value });
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(|values| AnyValue {
                value: Some(V::ArrayValue(ArrayValue { values }))
            }),
            prop::collection::vec(("\\PC{0,4}", prop::option::of(inner)), 0..3).prop_map(|kvs| {
                let values = kvs.into_iter().map(|(k, v)| kv(&k, v)).collect();
                AnyValue {
                    value: Some(V::KvlistValue(KeyValueList { values })),
                }
            }),
        ]
    })
}

fn attributes() -> impl Strategy<Value = Vec<KeyValue>> {
    prop::collection::vec(
        ("[a-z.]{0,6}", prop::option::of(any_value())).prop_map(|(k, v)| kv(&k, v)),
        0..3,
    )
}

fn id(n: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![Just(vec![]), prop::collection::vec(any::<u8>(), n)]
}

fn span() -> impl Strategy<Value = Span> {
    let ids = (
        id(16),
        id(8),
        id(8),
        "[a-z=,]{0,5}",
        any::<u32>(),
        "\\PC{0,8}",
        0i32..8,
    );
    let times = (
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
    );
    let event =
        (any::<u64>(), "\\PC{0,4}", attributes(), any::<u32>()).prop_map(|(t, n, a, d)| Event {
            time_unix_nano: t,
            name: n,
            attributes: a,
            dropped_attributes_count: d,
        });
    let link = (
        id(16),
        id(8),
        "[a-z=]{0,3}",
        attributes(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(
            |(trace_id, span_id, trace_state, attributes, dropped_attributes_count, flags)| Link {
                trace_id,
                span_id,
                trace_state,
                attributes,
                dropped_attributes_count,
                flags,
            },
        );
    let status = prop::option::of((0i32..4, "\\PC{0,4}"))
        .prop_map(|s| s.map(|(code, message)| Status { code, message }));
    let rest = (
        attributes(),
        prop::collection::vec(event, 0..2),
        prop::collection::vec(link, 0..2),
        status,
    );
    (ids, times, rest).prop_map(
        |((t, s, p, ts, flags, name, kind), (st, en, da, de, dl), r)| Span {
            trace_id: t,
            span_id: s,
            trace_state: ts,
            parent_span_id: p,
            flags,
            name,
            kind,
            start_time_unix_nano: st,
            end_time_unix_nano: en,
            attributes: r.0,
            dropped_attributes_count: da,
            events: r.1,
            dropped_events_count: de,
            links: r.2,
            dropped_links_count: dl,
            status: r.3,
        },
    )
}

fn request() -> impl Strategy<Value = ExportTraceServiceRequest> {
    let scope = prop::option::of(("\\PC{0,4}", "[0-9.]{0,3}", attributes(), any::<u32>()))
        .prop_map(|s| {
            s.map(
                |(name, version, attributes, dropped_attributes_count)| InstrumentationScope {
                    name,
                    version,
                    attributes,
                    dropped_attributes_count,
                },
            )
        });
    let scope_spans = (scope, prop::collection::vec(span(), 0..3), "[a-z:/.]{0,4}").prop_map(
        |(scope, spans, schema_url)| ScopeSpans {
            scope,
            spans,
            schema_url,
        },
    );
    let resource = prop::option::of((attributes(), any::<u32>())).prop_map(|r| {
        r.map(|(attributes, dropped_attributes_count)| Resource {
            attributes,
            dropped_attributes_count,
            entity_refs: vec![],
        })
    });
    let rs = (
        resource,
        prop::collection::vec(scope_spans, 0..3),
        "[a-z:/.]{0,4}",
    )
        .prop_map(|(resource, scope_spans, schema_url)| ResourceSpans {
            resource,
            scope_spans,
            schema_url,
        });
    prop::collection::vec(rs, 0..3)
        .prop_map(|resource_spans| ExportTraceServiceRequest { resource_spans })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_export_request(&body);
    }

    #[test]
    fn json_ish_text_never_panics(body in r#"[\[\]{}":, 0-9a-zA-Z_.eE+\\-]{0,200}"#) {
        let _ = decode_export_request(body.as_bytes());
    }

    #[test]
    fn mutated_documents_never_panic(
        req in request(),
        seed in any::<u64>(),
        cuts in prop::collection::vec((any::<prop::sample::Index>(), 0usize..4, any::<u8>()), 1..4),
    ) {
        let mut body = Writer(seed | 1).request(&req).into_bytes();
        for (at, op, byte) in cuts {
            if body.is_empty() { break; }
            let i = at.index(body.len());
            match op {
                0 => { body.remove(i); }
                1 => body[i] = byte,
                2 => body.insert(i, b"{}[]\",:0-n"[usize::from(byte) % 10]),
                _ => body.truncate(i),
            }
        }
        let _ = decode_export_request(&body);
    }

    #[test]
    fn written_requests_decode_to_the_same_request(req in request(), seed in any::<u64>()) {
        let body = Writer(seed | 1).request(&req);
        let got = decode_export_request(body.as_bytes());
        prop_assert_eq!(got, Ok(req), "{}", body);
    }
}
