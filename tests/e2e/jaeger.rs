//! The Jaeger HTTP query API (issue 28, item 1) as Grafana's Jaeger data source calls it: the
//! Rust `opentelemetry-otlp` exporter sends three traces gateway → order (a green order
//! instance deciding trade=green, a blue one deciding trade=blue with an error, a gray-lane
//! one with a lane tag); then services, operations, searches by Dyeline's tags, a trace by id
//! (decision tag, parent reference, processes), dependencies, and malformed input refused
//! with Jaeger's error envelope and its status, changing nothing; reads need the token when
//! `api.read_requires_token`.

use opentelemetry::trace::{
    Span as _, SpanKind, Status, TraceContextExt, Tracer, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde_json::{Value, json};

use crate::alerts::now_ns;
use crate::util::*;

const TOKEN: &str = "e2e-jaeger-token-0001";

fn provider(s: &Server, service: &str, host: &str, lane: Option<&str>) -> SdkTracerProvider {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("http://{}/v1/traces", s.http))
        .build()
        .unwrap();
    let mut resource = Resource::builder_empty()
        .with_service_name(service.to_owned())
        .with_attribute(KeyValue::new("host.name", host.to_owned()))
        .with_attribute(KeyValue::new("service.instance.id", host.to_owned()));
    if let Some(l) = lane {
        resource = resource.with_attribute(KeyValue::new("deploy.lane", l.to_owned()));
    }
    SdkTracerProvider::builder()
        .with_simple_exporter(exporter)
        .with_resource(resource.build())
        .build()
}

/// What one trace's spans were: (trace id, gateway server, gateway client, order server).
struct Sent {
    trace: String,
    client: String,
    order: String,
}

/// gateway SERVER → gateway CLIENT → order SERVER on `order`'s provider; `attrs` on the
/// gateway and order server spans.
fn call(
    gateway: &SdkTracerProvider,
    order: &SdkTracerProvider,
    attrs: &[(&'static str, &'static str)],
    error: bool,
) -> Sent {
    let (gt, ot) = (gateway.tracer("e2e"), order.tracer("e2e"));
    let kv: Vec<KeyValue> = attrs.iter().map(|(k, v)| KeyValue::new(*k, *v)).collect();
    let mut server = gt
        .span_builder("GET /buy")
        .with_kind(SpanKind::Server)
        .with_attributes(kv.clone())
        .start(&gt);
    let cx = Context::current().with_remote_span_context(server.span_context().clone());
    let client = gt
        .span_builder("call order")
        .with_kind(SpanKind::Client)
        .start_with_context(&gt, &cx);
    let cx2 = Context::current().with_remote_span_context(client.span_context().clone());
    let mut inner = ot
        .span_builder("POST /order")
        .with_kind(SpanKind::Server)
        .with_attributes(kv)
        .start_with_context(&ot, &cx2);
    if error {
        inner.set_status(Status::error("out of stock"));
    }
    let sent = Sent {
        trace: server.span_context().trace_id().to_string(),
        client: client.span_context().span_id().to_string(),
        order: inner.span_context().span_id().to_string(),
    };
    drop(inner);
    drop(client);
    server.end();
    sent
}

/// GET `path` on the API port (with the token unless `token` is false): (status, JSON body).
fn get(s: &Server, path: &str, token: bool) -> (u16, Value) {
    let mut req = reqwest::blocking::Client::new().get(format!("http://{}{path}", s.api));
    if token {
        req = req.bearer_auth(TOKEN);
    }
    let r = req.send().unwrap();
    let status = r.status().as_u16();
    let text = r.text().unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"));
    (status, body)
}

/// Spans stored (SQL with the token).
fn stored(s: &Server) -> i64 {
    let v: Value = reqwest::blocking::Client::new()
        .post(format!("http://{}/api/v1/sql", s.api))
        .bearer_auth(TOKEN)
        .json(&json!({"sql": "SELECT count(*) FROM spans"}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    v["rows"][0][0].as_i64().unwrap_or_else(|| panic!("{v}"))
}

fn ok(s: &Server, path: &str) -> Value {
    let (status, v) = get(s, path, true);
    assert_eq!(status, 200, "{path}: {v}");
    assert_eq!(v["errors"], Value::Null, "{path}: {v}");
    assert_eq!(
        (v["limit"].clone(), v["offset"].clone()),
        (json!(0), json!(0))
    );
    v
}

/// The trace ids of a search answer, in order.
fn ids(v: &Value) -> Vec<String> {
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["traceID"].as_str().unwrap().to_owned())
        .collect()
}

fn tag<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["tags"]
        .as_array()?
        .iter()
        .find(|t| t["key"] == key)
        .map(|t| &t["value"])
}

#[test]
fn jaeger_api_answers_grafana_from_the_store() {
    let dir = temp_dir();
    let s = Server::start(
        &dir.path().join("data"),
        &[
            ("DYELINE_API_TOKEN", TOKEN),
            ("DYELINE_API__READ_REQUIRES_TOKEN", "true"),
        ],
    );
    let start_us = now_ns() / 1_000 - 60_000_000;
    let gateway = provider(&s, "gateway", "gateway-blue-1", None);
    let order_green = provider(&s, "order", "order-green-1", None);
    let order_blue = provider(&s, "order", "order-blue-1", None);
    let order_gray = provider(&s, "order", "order-blue-2", Some("gray"));
    let a = call(
        &gateway,
        &order_green,
        &[("x-deploy-channel-type", "trade=green")],
        false,
    );
    let b = call(
        &gateway,
        &order_blue,
        &[("x-deploy-channel-type", "trade=blue")],
        true,
    );
    let c = call(&gateway, &order_gray, &[("x-deploy-lane", "gray")], false);
    for p in [gateway, order_green, order_blue, order_gray] {
        p.shutdown().unwrap();
    }
    assert_eq!(stored(&s), 9);
    let end_us = now_ns() / 1_000 + 60_000_000;
    let window = format!("&start={start_us}&end={end_us}&limit=20");

    // Reads need the token here, as the /api/v1 reads do.
    assert_eq!(get(&s, "/jaeger/api/services", false).0, 401);

    let v = ok(&s, "/jaeger/api/services");
    assert_eq!(v["data"], json!(["gateway", "order"]));
    assert_eq!(v["total"], 2);
    let v = ok(&s, "/jaeger/api/services/order/operations");
    assert_eq!(v["data"], json!(["POST /order"]));
    let v = ok(&s, "/jaeger/api/operations?service=gateway&spanKind=client");
    assert_eq!(
        v["data"],
        json!([{"name": "call order", "spanKind": "client"}])
    );
    let v = ok(&s, "/jaeger/api/operations?service=gateway");
    assert_eq!(
        v["data"],
        json!([{"name": "GET /buy", "spanKind": "server"}, {"name": "call order", "spanKind": "client"}])
    );

    // Searches as Grafana sends them: tags as a JSON object.
    let search = |service: &str, tags: &str| {
        ids(&ok(
            &s,
            &format!(
                "/jaeger/api/traces?service={service}&tags={}{window}",
                enc(tags)
            ),
        ))
    };
    assert_eq!(
        search("order", r#"{"dyeline.color":"green"}"#),
        vec![a.trace.clone()]
    );
    assert_eq!(
        search("gateway", r#"{"dyeline.color":"green"}"#),
        Vec::<String>::new()
    );
    assert_eq!(
        search("order", r#"{"dyeline.decision.trade":"blue"}"#),
        vec![b.trace.clone()]
    );
    assert_eq!(
        search("order", r#"{"error":"true"}"#),
        vec![b.trace.clone()]
    );
    assert_eq!(
        search("order", r#"{"dyeline.lane":"gray"}"#),
        vec![c.trace.clone()]
    );
    assert_eq!(
        search("gateway", r#"{"dyeline.lane_tag":"gray"}"#),
        vec![c.trace.clone()]
    );
    let mut all = search("gateway", "{}");
    all.sort();
    let mut expected = vec![a.trace.clone(), b.trace.clone(), c.trace.clone()];
    expected.sort();
    assert_eq!(all, expected);
    let v = ok(
        &s,
        &format!(
            "/jaeger/api/traces?service=order&operation={}&minDuration=0s&maxDuration=1h&limit=1{}",
            enc("POST /order"),
            &window.replace("&limit=20", "")
        ),
    );
    assert_eq!(v["total"], 1, "{v}");
    assert_eq!(v["data"][0]["traceID"], c.trace, "newest first");

    // One trace, by id (any case), with the decision tag and the parent reference.
    let v = ok(
        &s,
        &format!("/jaeger/api/traces/{}", a.trace.to_uppercase()),
    );
    assert_eq!(v["total"], 1);
    let t = &v["data"][0];
    assert_eq!(t["traceID"], a.trace);
    let spans = t["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 3);
    let order = spans.iter().find(|sp| sp["spanID"] == a.order).unwrap();
    assert_eq!(order["operationName"], "POST /order");
    assert_eq!(
        order["references"],
        json!([{"refType": "CHILD_OF", "traceID": a.trace, "spanID": a.client}])
    );
    assert_eq!(tag(order, "dyeline.decision.trade"), Some(&json!("green")));
    assert_eq!(tag(order, "dyeline.color"), Some(&json!("green")));
    assert_eq!(tag(order, "dyeline.lane"), Some(&json!("base")));
    assert_eq!(tag(order, "span.kind"), Some(&json!("server")));
    let process = &t["processes"][order["processID"].as_str().unwrap()];
    assert_eq!(process["serviceName"], "order");
    assert!(process["tags"].as_array().unwrap().contains(
        &json!({"key": "service.instance.id", "type": "string", "value": "order-green-1"})
    ));
    let v = ok(&s, &format!("/jaeger/api/traces/{}", b.trace));
    let order = v["data"][0]["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|sp| sp["spanID"] == b.order)
        .unwrap()
        .clone();
    assert_eq!(tag(&order, "error"), Some(&json!(true)));
    assert_eq!(tag(&order, "otel.status_code"), Some(&json!("ERROR")));
    let v = ok(&s, &format!("/jaeger/api/traces/{}", c.trace));
    let gray = &v["data"][0]["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|sp| sp["spanID"] == c.order)
        .unwrap()
        .clone();
    assert_eq!(tag(gray, "dyeline.lane"), Some(&json!("gray")));
    assert_eq!(tag(gray, "dyeline.lane_tag"), Some(&json!("gray")));

    // Dependencies: every order call came from the gateway.
    let v = ok(
        &s,
        &format!(
            "/jaeger/api/dependencies?endTs={}&lookback=3600000",
            end_us / 1_000
        ),
    );
    assert_eq!(
        v["data"],
        json!([{"parent": "gateway", "child": "order", "callCount": 3}])
    );

    // Malformed input: Jaeger's error envelope with its status, and nothing changed.
    let refused = |path: &str, status: u16, says: &str| {
        let (got, v) = get(&s, path, true);
        assert_eq!(got, status, "{path}: {v}");
        assert_eq!(v["data"], Value::Null, "{path}: {v}");
        assert_eq!(v["errors"][0]["code"], status, "{path}: {v}");
        let msg = v["errors"][0]["msg"].as_str().unwrap();
        assert!(msg.contains(says), "{path}: {msg}");
    };
    refused(
        &format!(
            "/jaeger/api/traces?service=order&tags={}",
            enc("{\"error\":")
        ),
        400,
        "cannot unmarshal JSON",
    );
    refused(
        &format!(
            "/jaeger/api/traces?service=order&tags={}",
            enc(r#"{"http.method":"GET"}"#)
        ),
        400,
        "\"http.method\"",
    );
    refused(
        "/jaeger/api/traces?service=order&minDuration=5parsecs",
        400,
        "'minDuration'",
    );
    refused(
        "/jaeger/api/traces?service=order&minDuration=1s&maxDuration=10ms",
        400,
        "'maxDuration'",
    );
    refused(
        "/jaeger/api/traces?service=order&start=yesterday",
        400,
        "'start'",
    );
    refused("/jaeger/api/traces?service=order&limit=-3", 400, "'limit'");
    refused("/jaeger/api/traces?tags=%7B%7D", 400, "'service'");
    refused("/jaeger/api/traces/not-a-trace-id", 400, "traceID");
    refused(
        &format!("/jaeger/api/traces/{}", "f".repeat(33)),
        400,
        "traceID",
    );
    refused(
        &format!("/jaeger/api/traces/{}", "ab".repeat(16)),
        404,
        "trace not found",
    );
    refused("/jaeger/api/operations", 400, "'service'");
    refused(
        "/jaeger/api/operations?service=order&spanKind=sideways",
        400,
        "'spanKind'",
    );
    refused("/jaeger/api/dependencies?endTs=foo", 400, "'endTs'");
    refused("/jaeger/api/dependencies?lookback=-1", 400, "'lookback'");
    assert_eq!(stored(&s), 9, "refusals change nothing");
    let v = ok(&s, "/jaeger/api/services");
    assert_eq!(v["data"], json!(["gateway", "order"]));
}
