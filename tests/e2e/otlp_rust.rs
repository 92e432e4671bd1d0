//! The Rust `opentelemetry-otlp` exporter (gRPC and HTTP/protobuf) sends spans whose resources
//! carry `service.name` and a `host.name` with a colour token and whose attributes carry
//! `x-deploy-channel-type`; the store holds every span exactly once with the right colour,
//! decisions and parent link.

use opentelemetry::trace::{Span as _, TraceContextExt, Tracer, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanExporter};

use crate::util::*;

/// (trace_id, span_id, parent_span_id or "", service, color, decision text or "").
type Expected = Vec<(String, String, String, String, String, String)>;

fn provider(exporter: impl SpanExporter + 'static, service: &str, host: &str) -> SdkTracerProvider {
    SdkTracerProvider::builder()
        .with_simple_exporter(exporter)
        .with_resource(
            Resource::builder_empty()
                .with_service_name(service.to_owned())
                .with_attribute(KeyValue::new("host.name", host.to_owned()))
                .with_attribute(KeyValue::new("service.instance.id", host.to_owned()))
                .build(),
        )
        .build()
}

/// Emits `n` traces gateway(order, blue) → inventory (green) through two providers.
fn emit(order: &SdkTracerProvider, inventory: &SdkTracerProvider, n: usize, tag: &str) -> Expected {
    let order_tracer = order.tracer("dyeline-e2e");
    let inv_tracer = inventory.tracer("dyeline-e2e");
    let mut expected = Vec::new();
    for i in 0..n {
        let decision = if i % 2 == 0 {
            "trade=blue&pay=green"
        } else {
            "trade=green"
        };
        let mut server = order_tracer
            .span_builder(format!("GET /order/{tag}/{i}"))
            .with_kind(opentelemetry::trace::SpanKind::Server)
            .with_attributes([KeyValue::new("x-deploy-channel-type", decision)])
            .start(&order_tracer);
        let sc = server.span_context().clone();
        let cx = Context::current().with_remote_span_context(sc.clone());
        let client = order_tracer
            .span_builder("call inventory")
            .with_kind(opentelemetry::trace::SpanKind::Client)
            .start_with_context(&order_tracer, &cx);
        let client_sc = client.span_context().clone();
        let cx2 = Context::current().with_remote_span_context(client_sc.clone());
        let mut inv = inv_tracer
            .span_builder("reserve")
            .with_kind(opentelemetry::trace::SpanKind::Server)
            .start_with_context(&inv_tracer, &cx2);
        inv.set_attribute(KeyValue::new("x-deploy-channel-type", decision));
        let inv_sc = inv.span_context().clone();
        drop(inv);
        drop(client);
        server.end();
        let t = sc.trace_id().to_string();
        expected.push((
            t.clone(),
            sc.span_id().to_string(),
            String::new(),
            "order".into(),
            "blue".into(),
            decision.into(),
        ));
        expected.push((
            t.clone(),
            client_sc.span_id().to_string(),
            sc.span_id().to_string(),
            "order".into(),
            "blue".into(),
            String::new(),
        ));
        expected.push((
            t,
            inv_sc.span_id().to_string(),
            client_sc.span_id().to_string(),
            "inventory".into(),
            "green".into(),
            decision.into(),
        ));
    }
    expected
}

fn check(s: &Server, mut expected: Expected) {
    expected.sort();
    let rows = s.sql(
        "SELECT trace_id, span_id, coalesce(parent_span_id, ''), service_name, color, coalesce(decision_text, ''), decisions \
         FROM spans ORDER BY trace_id, span_id",
    );
    let got: Expected = rows
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap().to_owned(),
                r[1].as_str().unwrap().to_owned(),
                r[2].as_str().unwrap().to_owned(),
                r[3].as_str().unwrap().to_owned(),
                r[4].as_str().unwrap().to_owned(),
                r[5].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        got, expected,
        "every span exactly once, with colour, decision and parent"
    );
    for r in rows.iter().filter(|r| r[5] == "trade=blue&pay=green") {
        assert_eq!(r[6], serde_json::json!({"trade": "blue", "pay": "green"}));
    }
}

#[test]
fn rust_grpc_exporter() {
    let dir = temp_dir();
    let s = Server::start(&dir.path().join("data"), &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _guard = rt.enter();
    let make = || {
        opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(format!("http://{}", s.grpc))
            .build()
            .unwrap()
    };
    let order = provider(make(), "order", "order-blue-1");
    let inventory = provider(make(), "inventory", "inventory-green-1");
    let expected = emit(&order, &inventory, 20, "grpc");
    order.shutdown().unwrap();
    inventory.shutdown().unwrap();
    check(&s, expected);
}

#[test]
fn rust_http_protobuf_exporter() {
    let dir = temp_dir();
    let s = Server::start(&dir.path().join("data"), &[]);
    let make = || {
        opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("http://{}/v1/traces", s.http))
            .build()
            .unwrap()
    };
    let order = provider(make(), "order", "order-blue-1");
    let inventory = provider(make(), "inventory", "inventory-green-1");
    let expected = emit(&order, &inventory, 20, "http");
    order.shutdown().unwrap();
    inventory.shutdown().unwrap();
    check(&s, expected);
}
