//! Hardening, trace views (issue 23 item 1): a trace whose spans form a 20,000-deep chain, a
//! trace of one root and 200,000 children, and attribute values nested 100,000 deep, each
//! sent through the real OTLP/HTTP receiver and viewed through `GET /api/v1/traces/{id}` and
//! the token-less page `/traces/{id}` (reads are open by default). The views answer with one
//! capped page (`[trace_view] max_spans`, default 10,000) that says what it left out, the
//! server stays up and answers `/healthz` within a second throughout, and memory stays under
//! the bounds stated below.

use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use serde_json::Value;

use super::{HealthWatch, assert_up, peak_rss_bytes, rss_bytes};
use crate::util::*;

const MIB: u64 = 1 << 20;
/// `[trace_view] max_spans` by default.
const PAGE: usize = 10_000;

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// A span of `trace` (id `id`, parent `parent`, 0 = none) starting at `start`.
fn span(trace: u128, id: u64, parent: u64, start: u64) -> Span {
    Span {
        trace_id: trace.to_be_bytes().to_vec(),
        span_id: id.to_be_bytes().to_vec(),
        parent_span_id: if parent == 0 {
            Vec::new()
        } else {
            parent.to_be_bytes().to_vec()
        },
        name: "s".into(),
        kind: 2,
        start_time_unix_nano: start,
        end_time_unix_nano: start + 1_000,
        ..Default::default()
    }
}

/// One protobuf export request of `spans` from app `app` on colour `color`.
fn request(app: &str, color: &str, spans: Vec<Span>) -> Vec<u8> {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", app), kv("deploy.color", color)],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

fn send(s: &Server, body: Vec<u8>) {
    let len = body.len();
    let r = post_traces(s, &[("content-type", "application/x-protobuf")], body);
    assert_eq!(r.status, 200, "export of {len} bytes: {}", r.text());
}

/// GET on the API port: (status, body).
fn get(s: &Server, path: &str) -> (u16, String) {
    let r = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
        .get(format!("http://{}{path}", s.api))
        .send()
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    (r.status().as_u16(), r.text().unwrap())
}

fn get_json(s: &Server, path: &str) -> (u16, usize, Value) {
    let (status, body) = get(s, path);
    let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body:.300}"));
    (status, body.len(), v)
}

fn mib(b: u64) -> f64 {
    b as f64 / MIB as f64
}

/// A chain 20,000 spans deep, one OTLP/HTTP protobuf request of about 1.4 MB, no token. Before,
/// opening it overflowed a worker's stack and aborted the process (the tree was built,
/// sorted, serialised and dropped recursively). Now each view is two flat pages with depths.
#[test]
fn a_trace_20_000_spans_deep_is_viewed_page_by_page_and_the_server_stays_up() {
    const DEPTH: u64 = 20_000;
    let dir = temp_dir();
    let mut s = Server::start(&dir.path().join("data"), &[]);
    let trace: u128 = 0xdeed_0000_0000_0000_0000_0000_0000_0001;
    let t0 = now_ns();
    // Leaf first, as a hostile client may order them.
    let spans: Vec<Span> = (1..=DEPTH)
        .rev()
        .map(|i| span(trace, i, i - 1, t0 + i))
        .collect();
    let body = request("chain", "blue", spans);
    assert!(body.len() > 1_000_000, "{} bytes", body.len());
    send(&s, body);
    let id = format!("{trace:032x}");
    let rss_before = rss_bytes(&s);
    let watch = HealthWatch::start(&s);
    let started = Instant::now();
    for round in 0..3 {
        for (offset, query) in [(0usize, ""), (PAGE, "?offset=10000")] {
            let (status, bytes, v) = get_json(&s, &format!("/api/v1/traces/{id}{query}"));
            assert_eq!(status, 200, "round {round}: {v:.300}");
            assert_eq!(v["span_count"], DEPTH);
            assert_eq!(v["offset"], offset);
            assert_eq!(v["returned"], PAGE);
            assert_eq!(v["left_out"], DEPTH as usize - PAGE);
            assert_eq!(v["max_depth"], DEPTH - 1);
            let next = (offset == 0).then_some(PAGE);
            assert_eq!(v["next_offset"], serde_json::json!(next));
            let spans = v["spans"].as_array().unwrap();
            assert_eq!(spans.len(), PAGE);
            // Depth-first down the chain: position k is span k + 1 at depth k.
            for (k, sp) in spans.iter().enumerate() {
                let at = offset + k;
                assert_eq!(sp["depth"], at, "round {round}, position {at}");
                assert_eq!(sp["span_id"], format!("{:016x}", at + 1));
            }
            assert!(bytes < 8 << 20, "{bytes} bytes of JSON for one page");
        }
        let (status, html) = get(&s, &format!("/traces/{id}"));
        assert_eq!(status, 200, "round {round}: {html:.300}");
        assert!(
            html.contains("spans 1–10,000 of 20,000 shown; "),
            "{html:.2000}"
        );
        assert!(html.contains("<span id=\"left-out\">10,000</span> left out"));
        assert!(html.contains("data-depth=\"9999\""));
        assert!(html.contains(&format!("href=\"/traces/{id}?offset=10000\"")));
        // Bound: about 990 bytes of HTML a span row with its folded detail (its resource's
        // deploy.color), 9.9 MB for the page.
        assert!(html.len() < 12 << 20, "{} bytes of HTML", html.len());
        let (status, html) = get(&s, &format!("/traces/{id}?offset=10000"));
        assert_eq!(status, 200);
        assert!(html.contains("spans 10,001–20,000 of 20,000 shown; "));
        assert!(html.contains("data-depth=\"19999\""));
    }
    let elapsed = started.elapsed();
    let health = watch.assert_healthy("viewing a 20,000-deep trace");
    assert_up(&mut s, "after viewing a 20,000-deep trace");
    let (rss_after, peak) = (rss_bytes(&s), peak_rss_bytes(&s));
    eprintln!(
        "deep chain: 6 API pages + 6 HTML pages in {elapsed:?}; healthz slowest {:?} of {} probes; RSS {:.0} → {:.0} MiB, peak {:.0} MiB",
        health.slowest,
        health.probes,
        mib(rss_before),
        mib(rss_after),
        mib(peak)
    );
    // Bound: a view adds the trace's records (80 bytes a span), its tree (a few words a
    // span), one page of strings and its JSON or HTML (under 8 MiB each), and the scan's
    // batches: measured about 65 MiB of peak over the resident size before the views, in a
    // debug build. The peak stays within 150 MiB of it.
    assert!(
        peak < rss_before + 150 * MIB,
        "peak RSS {:.0} MiB, {:.0} MiB before the views",
        mib(peak),
        mib(rss_before)
    );
    // The OpenAPI document describes the paging and the flat page.
    let (_, _, doc) = get_json(&s, "/api/v1/openapi.json");
    let op = &doc["paths"]["/api/v1/traces/{trace_id}"]["get"];
    let params: Vec<&str> = op["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(params, ["trace_id", "offset", "limit"]);
    let view = &doc["components"]["schemas"]["TraceView"]["properties"];
    for field in [
        "span_count",
        "offset",
        "returned",
        "left_out",
        "next_offset",
        "spans",
    ] {
        assert!(
            view.get(field).is_some(),
            "TraceView.{field} is not documented: {view}"
        );
    }
    assert!(doc["components"]["schemas"]["SpanNode"]["properties"]["depth"].is_object());
    let metrics = s.metrics();
    assert!(
        metrics.contains("dyeline_trace_views_total{outcome=\"partial\"} 12"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("trace_view"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// One root and 200,000 children, sent in five requests under the 16 MiB body limit, during a
/// release of the global channel so that every child on the other colour is a cross-colour
/// hop the view analyses. Before, one view returned 80–92 MB. Now a view returns one page of
/// 10,000 spans, says 190,001 were left out, and pages on with `offset`.
#[test]
fn a_trace_of_200_000_children_is_capped_paged_and_bounded_in_memory() {
    const CHILDREN: u64 = 200_000;
    const TOKEN: &str = "e2e-hardening-trace-1";
    let dir = temp_dir();
    // The live alert evaluation is off: it loads every span of its window every 2 s on the
    // async workers, which with 200,001 fresh spans in a debug build stalls /healthz on its
    // own, views or not (reported separately); this test measures the views.
    let mut s = Server::start(
        &dir.path().join("data"),
        &[
            ("DYELINE_API_TOKEN", TOKEN),
            ("DYELINE_ALERTS__ENABLED", "false"),
        ],
    );
    let start = reqwest::blocking::Client::new()
        .post(format!("http://{}/api/v1/channels/global/start", s.api))
        .bearer_auth(TOKEN)
        .send()
        .unwrap();
    assert!(start.status().is_success(), "{}", start.text().unwrap());
    let trace: u128 = 0xdeed_0000_0000_0000_0000_0000_0000_0002;
    let t0 = now_ns();
    send(
        &s,
        request("wide-root", "blue", vec![span(trace, 1, 0, t0)]),
    );
    for part in 0..5 {
        let spans = (0..CHILDREN / 5)
            .map(|k| {
                let i = part * (CHILDREN / 5) + k;
                span(trace, i + 2, 1, t0 + 1 + i)
            })
            .collect();
        send(&s, request("wide-child", "green", spans));
    }
    let id = format!("{trace:032x}");
    let rss_before = rss_bytes(&s);
    let watch = HealthWatch::start(&s);
    let started = Instant::now();
    let (status, bytes, v) = get_json(&s, &format!("/api/v1/traces/{id}"));
    assert_eq!(status, 200, "{v:.300}");
    assert_eq!(
        (
            &v["span_count"],
            &v["returned"],
            &v["left_out"],
            &v["next_offset"]
        ),
        (
            &Value::from(CHILDREN + 1),
            &Value::from(PAGE),
            &Value::from(190_001),
            &Value::from(PAGE)
        )
    );
    // Every child is a hop in the whole trace; the page lists its own.
    assert_eq!(v["cross_color_hop_count"], CHILDREN);
    assert_eq!(v["cross_color_hops"].as_array().unwrap().len(), PAGE - 1);
    let spans = v["spans"].as_array().unwrap();
    assert_eq!(spans.len(), PAGE);
    assert_eq!(
        (&spans[0]["depth"], &spans[0]["span_id"]),
        (&Value::from(0), &Value::from("0000000000000001"))
    );
    assert_eq!(spans[1]["hops"][0]["to_app"], "wide-child");
    assert!(spans[1..].iter().all(|sp| sp["depth"] == 1));
    // Bound: a page of 10,000 spans, each with a hop and a missing decision (listed in the
    // span and again in the page's lists), is about 11 MB of JSON; 80–92 MB before.
    assert!(bytes < 16 << 20, "{bytes} bytes of JSON for one page");
    // The second page: children 9,999.. by start (position 10,000 is child 9,999, id 10,001).
    let (status, _, v2) = get_json(&s, &format!("/api/v1/traces/{id}?offset=10000&limit=5000"));
    assert_eq!(status, 200);
    assert_eq!(
        (&v2["offset"], &v2["returned"]),
        (&Value::from(PAGE), &Value::from(5000))
    );
    assert_eq!(v2["spans"][0]["span_id"], format!("{:016x}", PAGE + 1));
    assert_eq!(
        v2["spans"][4999]["span_id"],
        format!("{:016x}", PAGE + 5000)
    );
    assert_eq!(v2["next_offset"], PAGE + 5000);
    // The last page, and one past the end.
    let (_, _, last) = get_json(&s, &format!("/api/v1/traces/{id}?offset=199990"));
    assert_eq!(
        (&last["returned"], &last["next_offset"]),
        (&Value::from(11), &Value::Null)
    );
    assert_eq!(
        last["spans"][10]["span_id"],
        format!("{:016x}", CHILDREN + 1)
    );
    // Asking for more than the cap is refused, naming the setting.
    let (status, _, e) = get_json(&s, &format!("/api/v1/traces/{id}?limit=20000"));
    assert_eq!(
        (status, &e["error"]["code"]),
        (400, &Value::from("invalid_query"))
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[trace_view] max_spans"),
        "{e}"
    );
    let (status, _, _) = get_json(&s, &format!("/api/v1/traces/{id}?offset=-1"));
    assert_eq!(status, 400);
    // The page (no token): the same cap, a plain statement and a link to the next page.
    {
        let (status, html) = get(&s, &format!("/traces/{id}"));
        assert_eq!(status, 200, "{html:.300}");
        assert!(
            html.contains("spans 1–10,000 of 200,001 shown; "),
            "{html:.2000}"
        );
        assert!(html.contains("<span id=\"left-out\">190,001</span> left out"));
        assert!(html.contains(&format!(
            "id=\"next-page\" href=\"/traces/{id}?offset=10000\""
        )));
        assert_eq!(html.matches("<tr data-depth=").count(), PAGE);
        assert!(html.contains("<span id=\"hop-count\">200000</span> hop span(s)"));
        // Bound: about 1,170 bytes of HTML a span row with its hop mark and its folded detail
        // (its resource's deploy.color), 11.7 MB for the page.
        assert!(html.len() < 14 << 20, "{} bytes of HTML", html.len());
    }
    let (status, html) = get(&s, &format!("/traces/{id}?offset=195000"));
    assert_eq!(status, 200);
    assert!(
        html.contains("spans 195,001–200,001 of 200,001 shown; "),
        "{html:.2000}"
    );
    assert!(html.contains(&format!(
        "id=\"prev-page\" href=\"/traces/{id}?offset=185000\""
    )));
    assert!(!html.contains("next-page"));
    let elapsed = started.elapsed();
    let health = watch.assert_healthy("viewing a trace of 200,001 spans");
    assert_up(&mut s, "after viewing a trace of 200,001 spans");
    let (rss_after, peak) = (rss_bytes(&s), peak_rss_bytes(&s));
    eprintln!(
        "wide trace: 3 API views + 2 pages in {elapsed:?}; healthz slowest {:?} of {} probes; RSS {:.0} → {:.0} MiB, peak {:.0} MiB",
        health.slowest,
        health.probes,
        mib(rss_before),
        mib(rss_after),
        mib(peak)
    );
    // Bound: the store holds the 200,001 spans in memory (RSS before the views); a view
    // adds the trace's records (80 bytes a span), its tree (a few words a span), the span
    // ids of its page, the findings of the page's spans only (the others are counted, not
    // made), one page of rows and its JSON or HTML, and the scans' batches: measured about
    // 90 MiB of peak over the resident size before the views, in a debug build (170 MiB
    // more while the 200,000 hops were all kept as strings). The peak stays within 200 MiB
    // of it, and what is left after the views within 100 MiB.
    assert!(
        peak < rss_before + 200 * MIB,
        "peak RSS {:.0} MiB, {:.0} MiB before the views",
        mib(peak),
        mib(rss_before)
    );
    assert!(
        rss_after < rss_before + 100 * MIB,
        "RSS {:.0} → {:.0} MiB",
        mib(rss_before),
        mib(rss_after)
    );
}

/// An `AnyValue` nested 100,000 arrays deep, hand-encoded (prost's encoder recurses), about
/// 0.9 MB of protobuf: refused with 400 naming the fixed limit, counted, and the server stays
/// up; the same value as OTLP/JSON too.
#[test]
fn attribute_values_nested_100_000_deep_are_refused_with_a_clear_400() {
    let dir = temp_dir();
    let mut s = Server::start(&dir.path().join("data"), &[]);
    let watch = HealthWatch::start(&s);
    let body = nested_array_request(100_000);
    let r = post_traces(&s, &[("content-type", "application/x-protobuf")], body);
    assert_eq!(r.status, 400);
    let message = rpc_status_message(&r.body);
    assert!(
        message.contains("attribute value nested too deep")
            && message.contains("47 levels of arrayValue")
            && message.contains("fixed"),
        "{message}"
    );
    // 47 levels are read and stored.
    let r = post_traces(
        &s,
        &[("content-type", "application/x-protobuf")],
        nested_array_request(47),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // As OTLP/JSON: serde_json's recursion limit, named.
    let mut v = String::from(r#"{"intValue":7}"#);
    let open = r#"{"arrayValue":{"values":["#.repeat(100_000);
    let close = "]}}".repeat(100_000);
    v = format!("{open}{v}{close}");
    let json = format!(
        r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"traceId":"0000000000000000000000000000d00d","spanId":"000000000000d00d","name":"deep","attributes":[{{"key":"deep","value":{v}}}]}}]}}]}}]}}"#
    );
    let r = post_json(&s, &json);
    assert_eq!(r.status, 400);
    let message = r.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("recursion limit exceeded: JSON nests at most 128 levels"),
        "{message:.500}"
    );
    watch.assert_healthy("deeply nested attribute values");
    assert_up(&mut s, "after deeply nested attribute values");
    assert_eq!(count_trace(&s, "0000000000000000000000000000d00e"), 1);
    let metrics = s.metrics();
    assert!(
        metrics.contains("dyeline_receiver_requests_refused_total{reason=\"bad_data\"} 2"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("refused"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// `google.rpc.Status.message` of a protobuf error body.
fn rpc_status_message(body: &[u8]) -> String {
    let st = RpcStatus::decode(body).expect("a google.rpc.Status body");
    assert_eq!(st.code, 3, "INVALID_ARGUMENT");
    st.message
}

/// A request with one span (trace `…d00e`) whose attribute `deep` is an `AnyValue` nested
/// `depth` arrays deep around an int, encoded from the inside out in linear time.
fn nested_array_request(depth: usize) -> Vec<u8> {
    fn header(out: &mut Vec<u8>, field: u8, len: usize) {
        out.push(field << 3 | 2);
        prost::encoding::encode_varint(len as u64, out);
    }
    let leaf = AnyValue {
        value: Some(any_value::Value::IntValue(7)),
    }
    .encode_to_vec();
    let mut headers: Vec<Vec<u8>> = Vec::with_capacity(depth);
    let mut len = leaf.len();
    for _ in 0..depth {
        // AnyValue.array_value (5) { ArrayValue.values (1) { inner } }
        let mut inner = Vec::new();
        header(&mut inner, 1, len);
        let mut h = Vec::new();
        header(&mut h, 5, inner.len() + len);
        h.extend_from_slice(&inner);
        len += h.len();
        headers.push(h);
    }
    let mut value = Vec::with_capacity(len);
    for h in headers.iter().rev() {
        value.extend_from_slice(h);
    }
    value.extend_from_slice(&leaf);
    let mut kv = Vec::new();
    header(&mut kv, 1, 4);
    kv.extend_from_slice(b"deep");
    header(&mut kv, 2, value.len());
    kv.extend_from_slice(&value);
    // Span.attributes is field 9; the rest of the request is prost-encoded around it.
    let mut sp = span(0xd00e, 0xd00e, 0, now_ns()).encode_to_vec();
    header(&mut sp, 9, kv.len());
    sp.extend_from_slice(&kv);
    let mut scope = Vec::new();
    header(&mut scope, 2, sp.len()); // ScopeSpans.spans
    scope.extend_from_slice(&sp);
    let mut resource = Vec::new();
    header(&mut resource, 2, scope.len()); // ResourceSpans.scope_spans
    resource.extend_from_slice(&scope);
    let mut body = Vec::new();
    header(&mut body, 1, resource.len()); // ExportTraceServiceRequest.resource_spans
    body.extend_from_slice(&resource);
    body
}
