//! The deeper trace view and search by attribute (issue 28, item 8), with the Rust
//! `opentelemetry-otlp` exporter: a producer in one trace, a batch consumer in another that
//! links to it, carries attributes of each type, a promoted status code, an exception event,
//! an error status with its message, a resource with a pod and a version, and a named scope;
//! then the trace API returns all of it, the trace page folds it under the span, and search
//! by `key=value` finds the trace by a span attribute, a resource attribute or a promoted
//! one, exactly, refusing a malformed filter with 400.

use opentelemetry::trace::{Link, Span as _, SpanKind, Status, Tracer, TracerProvider as _};
use opentelemetry::{Context, InstrumentationScope, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde_json::{Value, json};

use crate::alerts::now_ns;
use crate::browser::fetch_html;
use crate::util::*;

fn provider(s: &Server, service: &str, pod: &str) -> SdkTracerProvider {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("http://{}/v1/traces", s.http))
        .build()
        .unwrap();
    let resource = Resource::builder_empty()
        .with_service_name(service.to_owned())
        .with_attribute(KeyValue::new(
            "service.instance.id",
            format!("{service}-blue-1"),
        ))
        .with_attribute(KeyValue::new("service.version", "1.4.2"))
        .with_attribute(KeyValue::new("k8s.pod.name", pod.to_owned()))
        .build();
    SdkTracerProvider::builder()
        .with_simple_exporter(exporter)
        .with_resource(resource)
        .build()
}

fn get_json(s: &Server, path: &str) -> (u16, Value) {
    let r = reqwest::blocking::get(format!("http://{}{path}", s.api)).unwrap();
    let status = r.status().as_u16();
    let text = r.text().unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"));
    (status, v)
}

#[test]
fn trace_view_shows_attributes_events_links_and_search_finds_by_attribute() {
    let dir = temp_dir();
    let s = Server::start(&dir.path().join("data"), &[]);
    let from = now_ns() - 60_000_000_000;

    let shop = provider(&s, "shop", "shop-5d9");
    let billing = provider(&s, "billing", "billing-7f");
    // Trace A: the producer.
    let st = shop.tracer("e2e");
    let producer = st
        .span_builder("publish orders")
        .with_kind(SpanKind::Producer)
        .start(&st);
    let (a_trace, a_span) = (
        producer.span_context().trace_id().to_string(),
        producer.span_context().span_id().to_string(),
    );
    let producer_context = producer.span_context().clone();
    drop(producer);
    // Trace B: the batch consumer, linked to the producer, in a scope with a version.
    let bt = billing.tracer_with_scope(
        InstrumentationScope::builder("e2e-consumer")
            .with_version("0.9.1")
            .build(),
    );
    let mut consumer = bt
        .span_builder("consume orders")
        .with_kind(SpanKind::Consumer)
        .with_attributes([
            KeyValue::new("sku", "A-17"),
            KeyValue::new("retries", 2i64),
            KeyValue::new("cached", true),
            KeyValue::new("http.response.status_code", 503i64),
        ])
        .with_links(vec![Link::new(
            producer_context,
            vec![KeyValue::new("messaging.batch.index", 0i64)],
            0,
        )])
        .start(&bt);
    consumer.add_event(
        "exception",
        vec![KeyValue::new("exception.type", "PaymentDeclined")],
    );
    consumer.set_status(Status::error("payment declined"));
    let (b_trace, b_span) = (
        consumer.span_context().trace_id().to_string(),
        consumer.span_context().span_id().to_string(),
    );
    drop(consumer);
    // Trace C: another sku.
    let mut other = bt
        .span_builder("consume refunds")
        .with_kind(SpanKind::Consumer)
        .with_attributes([KeyValue::new("sku", "A-170")])
        .start_with_context(&bt, &Context::new());
    other.set_attribute(KeyValue::new("retries", 3i64));
    let c_trace = other.span_context().trace_id().to_string();
    drop(other);
    for p in [shop, billing] {
        p.shutdown().unwrap();
    }
    assert_eq!(count_all(&s), 3);
    let to = now_ns() + 60_000_000_000;

    // The trace API returns the consumer's detail.
    let (status, v) = get_json(&s, &format!("/api/v1/traces/{b_trace}"));
    assert_eq!(status, 200, "{v}");
    let span = &v["spans"][0];
    assert_eq!(span["span_id"], b_span);
    assert_eq!(
        span["attributes"],
        json!([
            {"key": "http.response.status_code", "value": 503},
            {"key": "cached", "value": true},
            {"key": "retries", "value": 2},
            {"key": "sku", "value": "A-17"},
        ]),
        "{span}"
    );
    assert_eq!(
        span["resource_attributes"],
        json!([
            {"key": "service.version", "value": "1.4.2"},
            {"key": "k8s.pod.name", "value": "billing-7f"},
        ]),
        "{span}"
    );
    assert_eq!(span["status_message"], "payment declined");
    assert_eq!(
        (span["scope_name"].clone(), span["scope_version"].clone()),
        (json!("e2e-consumer"), json!("0.9.1"))
    );
    assert_eq!(span["events"][0]["name"], "exception");
    assert_eq!(
        span["events"][0]["attributes"],
        json!([{"key": "exception.type", "value": "PaymentDeclined"}])
    );
    let event_at: i64 = span["events"][0]["time_unix_nano"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let start: i64 = span["start_time_unix_nano"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(event_at >= start, "{event_at} < {start}");
    assert_eq!(
        (
            span["links"][0]["trace_id"].clone(),
            span["links"][0]["span_id"].clone()
        ),
        (json!(a_trace), json!(a_span))
    );
    assert_eq!(
        span["links"][0]["attributes"],
        json!([{"key": "messaging.batch.index", "value": 0}])
    );

    // The trace page folds it under the span, the link pointing at the producer's row.
    let html = fetch_html(&s, &format!("/traces/{b_trace}"));
    assert!(
        html.contains("4 attribute(s) · resource · 1 event(s) · 1 link(s)"),
        "{html}"
    );
    assert!(html.contains("<th>sku</th><td>A-17</td>"), "{html}");
    assert!(
        html.contains("<th>otel.scope</th><td>e2e-consumer 0.9.1</td>"),
        "{html}"
    );
    assert!(html.contains("exception.type=PaymentDeclined"), "{html}");
    assert!(
        html.contains(&format!("href=\"/traces/{a_trace}#span-{a_span}\"")),
        "{html}"
    );
    assert!(html.contains("(messaging.batch.index=0)"), "{html}");
    assert!(html.contains("payment declined"), "{html}");
    let a_html = fetch_html(&s, &format!("/traces/{a_trace}"));
    assert!(
        a_html.contains(&format!("id=\"span-{a_span}\"")),
        "{a_html}"
    );

    // Search by attribute: span, resource and promoted keys, exact values, any type.
    let search = |attribute: &str| -> (u16, Value) {
        get_json(
            &s,
            &format!(
                "/api/v1/traces?from={from}&to={to}&attribute={}",
                enc(attribute)
            ),
        )
    };
    let found = |attribute: &str| -> Vec<String> {
        let (status, v) = search(attribute);
        assert_eq!(status, 200, "{attribute}: {v}");
        let mut ids: Vec<String> = v["traces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["trace_id"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let mut b_and_c = vec![b_trace.clone(), c_trace.clone()];
    b_and_c.sort();
    assert_eq!(found("sku=A-17"), vec![b_trace.clone()]);
    assert_eq!(found("sku=A-1"), Vec::<String>::new());
    assert_eq!(found("retries=2"), vec![b_trace.clone()]);
    assert_eq!(found("cached=true"), vec![b_trace.clone()]);
    assert_eq!(
        found("http.response.status_code=503"),
        vec![b_trace.clone()]
    );
    assert_eq!(found("k8s.pod.name=billing-7f"), b_and_c);
    assert_eq!(found("k8s.pod.name=shop-5d9"), vec![a_trace.clone()]);
    assert_eq!(found("service.version=1.4.2").len(), 3);
    for bad in ["sku", "=A-17", "http.response.status_code=5xx"] {
        let (status, v) = search(bad);
        assert_eq!(status, 400, "{bad}: {v}");
        assert_eq!(v["error"]["code"], "invalid_query", "{bad}: {v}");
    }
    // The dashboard's search form takes the same filter (over a fixed range: a live page
    // shows what is analysed, which trails the newest spans).
    let html = fetch_html(
        &s,
        &format!("/traces?from={from}&to={to}&attribute={}", enc("sku=A-17")),
    );
    assert!(html.contains(&b_trace), "{html}");
    assert!(!html.contains(&c_trace), "{html}");
    assert_eq!(count_all(&s), 3, "reads changed nothing");
}
