//! The Jaeger API's reads and conversion over an in-memory `spans` table of the full schema,
//! and its contract: every answer has the keys and JSON types, at every level, of the answers
//! of Jaeger's query service in `fixtures/jaeger_shapes.json` (its sources and licences are in
//! the file's `_source`).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Int32Array, Int64Array, MapBuilder, RecordBatch, StringArray,
    StringBuilder, UInt32Array,
};
use arrow::datatypes::DataType;
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use dyeline_model::schema::spans_schema;
use serde_json::{Value, json};

use super::model::Envelope;
use super::params::parse_tags;
use super::reads::{self, Search};
use super::{JaegerRefusal, convert};

const FIXTURE: &str = include_str!("fixtures/jaeger_shapes.json");

/// A stored span, with what the tests set.
#[derive(Clone, Default)]
struct S {
    trace: u128,
    span: u64,
    parent: u64,
    app: &'static str,
    name: &'static str,
    kind: &'static str,
    start_us: i64,
    dur_us: i64,
    color: &'static str,
    lane: Option<&'static str>,
    lane_tag: Option<&'static str>,
    decisions: &'static [(&'static str, &'static str)],
    error: bool,
    http: Option<i32>,
    attributes: &'static str,
    events: Option<&'static str>,
    links: Option<String>,
}

fn hex128(t: u128) -> String {
    format!("{t:032x}")
}

/// A session whose `spans` (every column of the schema) holds `rows`.
fn session(rows: &[S]) -> SessionContext {
    let schema = spans_schema();
    let n = rows.len();
    let text = |f: &dyn Fn(&S) -> Option<String>| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<StringArray>())
    };
    let cols: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|field| -> ArrayRef {
            let name = field.name().as_str();
            match name {
                "trace_id" => text(&|s| Some(hex128(s.trace))),
                "span_id" => text(&|s| Some(format!("{:016x}", s.span))),
                "parent_span_id" => {
                    text(&|s| (s.parent != 0).then(|| format!("{:016x}", s.parent)))
                }
                "name" => text(&|s| Some(s.name.into())),
                "span_kind" => text(&|s| Some(s.kind.into())),
                "traffic_kind" => text(&|s| (s.kind == "SERVER").then(|| "RPC".into())),
                "start_time_unix_nano" => Arc::new(
                    rows.iter()
                        .map(|s| s.start_us * 1_000)
                        .collect::<Int64Array>(),
                ),
                "end_time_unix_nano" => Arc::new(
                    rows.iter()
                        .map(|s| (s.start_us + s.dur_us) * 1_000)
                        .collect::<Int64Array>(),
                ),
                "duration_ns" => Arc::new(
                    rows.iter()
                        .map(|s| s.dur_us * 1_000)
                        .collect::<Int64Array>(),
                ),
                "status_code" => text(&|s| Some(if s.error { "ERROR" } else { "UNSET" }.into())),
                "status_message" => text(&|s| s.error.then(|| "boom".into())),
                "is_error" => {
                    Arc::new(rows.iter().map(|s| Some(s.error)).collect::<BooleanArray>())
                }
                "service_name" => text(&|s| Some(s.app.into())),
                "service_version" => text(&|_| Some("1.4.2".into())),
                "instance_id" => text(&|s| Some(format!("{}-{}-1", s.app, s.color))),
                "host_name" => text(&|s| Some(format!("{}-{}-1", s.app, s.color))),
                "color" => text(&|s| Some(s.color.into())),
                "color_rule" => text(&|_| Some("host.name".into())),
                "lane" => text(&|s| s.lane.map(Into::into)),
                "lane_rule" => text(&|_| Some("default".into())),
                "lane_tag" => text(&|s| s.lane_tag.map(Into::into)),
                "decisions" => {
                    let mut b = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
                    for s in rows {
                        for (k, v) in s.decisions {
                            b.keys().append_value(k);
                            b.values().append_value(v);
                        }
                        b.append(!s.decisions.is_empty()).unwrap();
                    }
                    Arc::new(b.finish())
                }
                "http_status_code" => Arc::new(rows.iter().map(|s| s.http).collect::<Int32Array>()),
                "resource_attributes" => text(&|_| Some(r#"{"k8s.pod.name":"p-1"}"#.into())),
                "attributes" => text(&|s| Some(s.attributes.into())),
                "events" => text(&|s| s.events.map(Into::into)),
                "links" => text(&|s| s.links.clone()),
                _ => match field.data_type() {
                    DataType::UInt32 => Arc::new(UInt32Array::from(vec![0; n])),
                    DataType::Utf8 if !field.is_nullable() => text(&|_| Some(String::new())),
                    t => arrow::array::new_null_array(t, n),
                },
            }
        })
        .collect();
    let batch = RecordBatch::try_new(Arc::clone(&schema), cols).unwrap();
    let ctx = SessionContext::new();
    let table = MemTable::try_new(schema, vec![vec![batch]]).unwrap();
    ctx.register_table("spans", Arc::new(table)).unwrap();
    ctx
}

const T1: u128 = 0xa1;
const T2: u128 = 0xa2;
const T3: u128 = 0xa3;
const BASE_US: i64 = 1_700_000_000_000_000;

/// Three traces: T1 gateway(blue) → order(green, decision trade=green, lane gray, error);
/// T2 gateway(green) → order(blue, decision trade=blue), later; T3 a consumer linking to T1.
fn rows() -> Vec<S> {
    let s = |trace, span, parent, app, name, kind, start| S {
        trace,
        span,
        parent,
        app,
        name,
        kind,
        start_us: BASE_US + start,
        dur_us: 1_000,
        color: "blue",
        attributes: "{}",
        ..S::default()
    };
    vec![
        S {
            dur_us: 50_000,
            attributes: r#"{"http.request.method":"GET","retries":2,"ratio":0.5,"cached":true,"path":["a","b"]}"#,
            events: Some(
                r#"[{"time_unix_nano":"1700000000000100000","name":"retry","attributes":{"attempt":1}}]"#,
            ),
            ..s(T1, 1, 0, "gateway", "GET /buy", "SERVER", 0)
        },
        s(T1, 2, 1, "gateway", "call order", "CLIENT", 10),
        S {
            color: "green",
            lane: Some("gray"),
            lane_tag: Some("gray"),
            decisions: &[("trade", "green"), ("pay", "blue")],
            error: true,
            http: Some(503),
            ..s(T1, 3, 2, "order", "POST /order", "SERVER", 20)
        },
        S {
            color: "green",
            ..s(T2, 4, 0, "gateway", "GET /buy", "SERVER", 5_000)
        },
        s(T2, 5, 4, "gateway", "call order", "CLIENT", 5_010),
        S {
            decisions: &[("trade", "blue")],
            ..s(T2, 6, 5, "order", "POST /order", "SERVER", 5_020)
        },
        S {
            links: Some(format!(
                r#"[{{"trace_id":"{}","span_id":"0000000000000003","attributes":{{}}}}]"#,
                hex128(T1)
            )),
            ..s(T3, 7, 0, "billing", "consume orders", "CONSUMER", 9_000)
        },
    ]
}

fn search(tags: &str) -> Search {
    Search {
        service: "order".into(),
        tags: parse_tags(&[tags], &[]).unwrap(),
        from: BASE_US * 1_000,
        to: (BASE_US + 10_000) * 1_000,
        limit: 100,
        ..Search::default()
    }
}

#[tokio::test]
async fn jaeger_search_matches_each_tag_on_one_span() {
    let ctx = session(&rows());
    let ids = |s: Search| {
        let ctx = ctx.clone();
        async move { reads::search_ids(&ctx, &s).await.unwrap() }
    };
    let (t1, t2) = (hex128(T1), hex128(T2));
    assert_eq!(
        ids(search("{}")).await,
        vec![t2.clone(), t1.clone()],
        "newest first"
    );
    assert_eq!(
        ids(search(r#"{"dyeline.color":"green"}"#)).await,
        vec![t1.clone()]
    );
    assert_eq!(
        ids(search(r#"{"dyeline.color":"blue"}"#)).await,
        vec![t2.clone()]
    );
    assert_eq!(
        ids(search(r#"{"dyeline.decision.trade":"blue"}"#)).await,
        vec![t2.clone()]
    );
    assert_eq!(
        ids(search(r#"{"dyeline.decision.pay":"blue"}"#)).await,
        vec![t1.clone()]
    );
    assert_eq!(
        ids(search(r#"{"dyeline.decision.pay":"green"}"#)).await,
        Vec::<String>::new()
    );
    assert_eq!(
        ids(search(r#"{"dyeline.lane":"gray"}"#)).await,
        vec![t1.clone()]
    );
    // A span stored without a lane is a base span.
    assert_eq!(
        ids(search(r#"{"dyeline.lane":"base"}"#)).await,
        vec![t2.clone()]
    );
    assert_eq!(
        ids(search(r#"{"dyeline.lane_tag":"gray"}"#)).await,
        vec![t1.clone()]
    );
    assert_eq!(ids(search(r#"{"error":"true"}"#)).await, vec![t1.clone()]);
    assert_eq!(ids(search(r#"{"error":"false"}"#)).await, vec![t2.clone()]);
    assert_eq!(
        ids(search(r#"{"http.status_code":"503"}"#)).await,
        vec![t1.clone()]
    );
    // Same span: the green order span is not the one deciding trade=blue.
    assert!(
        ids(search(
            r#"{"dyeline.color":"green","dyeline.decision.trade":"blue"}"#
        ))
        .await
        .is_empty()
    );
    // A gateway tag does not make an order span match.
    assert!(ids(search(r#"{"span.kind":"client"}"#)).await.is_empty());
    let mut s = search("{}");
    s.service = "gateway".into();
    s.min_duration_ns = Some(10_000_000);
    assert_eq!(ids(s.clone()).await, vec![t1.clone()]);
    s.min_duration_ns = None;
    s.max_duration_ns = Some(2_000_000);
    assert_eq!(ids(s.clone()).await, vec![t2.clone(), t1.clone()]);
    s.operation = Some("no such".into());
    assert!(ids(s.clone()).await.is_empty());
    s.operation = Some("call order".into());
    s.limit = 1;
    assert_eq!(ids(s.clone()).await, vec![t2.clone()]);
    // The window bounds span starts.
    let mut s = search("{}");
    s.to = (BASE_US + 4_999) * 1_000;
    assert_eq!(ids(s).await, vec![t1.clone()]);
    // A quote in a value stays inside its literal.
    let mut s = search("{}");
    s.service = "order' OR '1'='1".into();
    assert!(ids(s).await.is_empty());
}

#[tokio::test]
async fn jaeger_trace_carries_colour_decisions_lane_and_references() {
    let ctx = session(&rows());
    let ids = [hex128(T1), hex128(T3)];
    let rows = reads::trace_rows(&ctx, &ids, None).await.unwrap();
    let traces = convert::traces(&rows, &ids).unwrap();
    assert_eq!(traces.len(), 2);
    let t = serde_json::to_value(&traces[0]).unwrap();
    assert_eq!(t["traceID"], hex128(T1));
    let spans = t["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 3);
    let tag = |span: &Value, key: &str| -> Option<Value> {
        span["tags"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["key"] == key)
            .map(|t| json!([t["type"], t["value"]]))
    };
    let root = &spans[0];
    assert_eq!(root["spanID"], "0000000000000001");
    assert_eq!(root["references"], json!([]));
    assert_eq!(root["startTime"], BASE_US);
    assert_eq!(root["duration"], 50_000);
    assert_eq!(tag(root, "span.kind"), Some(json!(["string", "server"])));
    assert_eq!(tag(root, "dyeline.color"), Some(json!(["string", "blue"])));
    assert_eq!(tag(root, "dyeline.lane"), Some(json!(["string", "base"])));
    assert_eq!(tag(root, "error"), None);
    assert_eq!(
        tag(root, "http.request.method"),
        Some(json!(["string", "GET"]))
    );
    assert_eq!(tag(root, "retries"), Some(json!(["int64", 2])));
    assert_eq!(tag(root, "ratio"), Some(json!(["float64", 0.5])));
    assert_eq!(tag(root, "cached"), Some(json!(["bool", true])));
    assert_eq!(tag(root, "path"), Some(json!(["string", r#"["a","b"]"#])));
    assert_eq!(
        root["logs"],
        json!([{"timestamp": 1_700_000_000_000_100i64, "fields": [
            {"key": "event", "type": "string", "value": "retry"},
            {"key": "attempt", "type": "int64", "value": 1}]}])
    );
    let order = &spans[2];
    assert_eq!(
        order["references"],
        json!([{"refType": "CHILD_OF", "traceID": hex128(T1), "spanID": "0000000000000002"}])
    );
    assert_eq!(
        tag(order, "dyeline.color"),
        Some(json!(["string", "green"]))
    );
    assert_eq!(
        tag(order, "dyeline.decision.trade"),
        Some(json!(["string", "green"]))
    );
    assert_eq!(
        tag(order, "dyeline.decision.pay"),
        Some(json!(["string", "blue"]))
    );
    assert_eq!(tag(order, "dyeline.lane"), Some(json!(["string", "gray"])));
    assert_eq!(
        tag(order, "dyeline.lane_tag"),
        Some(json!(["string", "gray"]))
    );
    assert_eq!(tag(order, "error"), Some(json!(["bool", true])));
    assert_eq!(
        tag(order, "otel.status_code"),
        Some(json!(["string", "ERROR"]))
    );
    assert_eq!(
        tag(order, "http.response.status_code"),
        Some(json!(["int64", 503]))
    );
    // Two resources (gateway on blue, order on green): two processes, with instance and host.
    assert_eq!(root["processID"], spans[1]["processID"]);
    assert_ne!(root["processID"], order["processID"]);
    let p = &t["processes"][order["processID"].as_str().unwrap()];
    assert_eq!(p["serviceName"], "order");
    assert_eq!(
        p["tags"],
        json!([
            {"key": "service.instance.id", "type": "string", "value": "order-green-1"},
            {"key": "host.name", "type": "string", "value": "order-green-1"},
            {"key": "service.version", "type": "string", "value": "1.4.2"},
            {"key": "k8s.pod.name", "type": "string", "value": "p-1"}
        ])
    );
    // A span link is a FOLLOWS_FROM reference.
    let consumer = &serde_json::to_value(&traces[1]).unwrap()["spans"][0];
    assert_eq!(
        consumer["references"],
        json!([{"refType": "FOLLOWS_FROM", "traceID": hex128(T1), "spanID": "0000000000000003"}])
    );
}

#[tokio::test]
async fn jaeger_services_operations_and_dependencies() {
    let ctx = session(&rows());
    assert_eq!(
        reads::services(&ctx).await.unwrap(),
        vec!["billing", "gateway", "order"]
    );
    let ops = reads::operations(&ctx, "gateway", None).await.unwrap();
    let ops: Vec<(String, String)> = ops.into_iter().map(|o| (o.name, o.span_kind)).collect();
    assert_eq!(
        ops,
        vec![
            ("GET /buy".into(), "server".into()),
            ("call order".into(), "client".into())
        ]
    );
    let ops = reads::operations(&ctx, "gateway", Some("CLIENT"))
        .await
        .unwrap();
    assert_eq!(ops.len(), 1);
    assert!(
        reads::operations(&ctx, "nobody", None)
            .await
            .unwrap()
            .is_empty()
    );
    let from = BASE_US * 1_000;
    let deps = reads::dependencies(&ctx, from, from + 10_000_000_000)
        .await
        .unwrap();
    let deps: Vec<(String, String, u64)> = deps
        .into_iter()
        .map(|d| (d.parent, d.child, d.call_count))
        .collect();
    assert_eq!(deps, vec![("gateway".into(), "order".into(), 2)]);
    // The window holds the child spans: only T2's call from 5 ms on.
    let deps = reads::dependencies(&ctx, from + 1_000_000, from + 10_000_000_000)
        .await
        .unwrap();
    assert_eq!(deps[0].call_count, 1);
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// One sample of two fixture values of the same shape (arrays' elements pooled, null taken
/// as an empty array), or `None` when their shapes differ (other keys, or other types).
fn merge(a: &Value, b: &Value) -> Option<Value> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            if x.len() != y.len() || x.keys().any(|k| !y.contains_key(k)) {
                return None;
            }
            let mut out = serde_json::Map::new();
            for (k, v) in x {
                out.insert(k.clone(), merge(v, &y[k])?);
            }
            Some(Value::Object(out))
        }
        (Value::Array(x), Value::Array(y)) => {
            Some(Value::Array(pool(x.iter().chain(y).cloned().collect())))
        }
        (Value::Null, Value::Array(_)) => Some(b.clone()),
        (Value::Array(_), Value::Null) => Some(a.clone()),
        _ if kind(a) == kind(b) => Some(a.clone()),
        _ => None,
    }
}

/// An array's elements with those of one shape merged: one sample per shape (the fixture's
/// spans become one span whose `references`, `tags` and `logs` hold every example; its tags
/// stay one per value type).
fn pool(items: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for item in items {
        let item = unify(&item);
        match out.iter().position(|o| merge(o, &item).is_some()) {
            Some(i) => out[i] = merge(&out[i], &item).unwrap_or_default(),
            None => out.push(item),
        }
    }
    out
}

/// A fixture with every array [`pool`]ed, so that an empty array in one example does not
/// stand for "any elements".
fn unify(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), unify(v))).collect()),
        Value::Array(a) => Value::Array(pool(a.clone())),
        other => other.clone(),
    }
}

/// Whether `ours` has the shape of the (unified) fixture `theirs`: the same keys (plus the
/// key Jaeger leaves out when 0, `flags`) with the same JSON types at every level; an array's
/// elements each of the shape of one of the fixture's samples; null and an array alike where
/// Jaeger's Go slices may be either (`warnings`, `errors`); `processes` is a map, each value
/// of the shape of the fixture's processes merged.
fn conforms(ours: &Value, theirs: &Value, path: &str) -> Result<(), String> {
    match (ours, theirs) {
        (Value::Object(o), Value::Object(t)) if path.ends_with(".processes") => {
            let mut values = t.values();
            let first = values
                .next()
                .ok_or(format!("{path}: empty fixture"))?
                .clone();
            let sample = values
                .try_fold(first, |acc, v| merge(&acc, v))
                .ok_or(format!("{path}: the fixture's processes differ"))?;
            for (k, v) in o {
                conforms(v, &sample, &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        (Value::Object(o), Value::Object(t)) => {
            for k in t.keys() {
                if !o.contains_key(k) {
                    return Err(format!("{path}: key {k:?} missing"));
                }
            }
            for (k, v) in o {
                match t.get(k) {
                    Some(tv) => conforms(v, tv, &format!("{path}.{k}"))?,
                    None if k == "flags" => {}
                    None => return Err(format!("{path}: key {k:?} is not Jaeger's")),
                }
            }
            Ok(())
        }
        (Value::Array(o), Value::Array(t)) => {
            if t.is_empty() {
                return Ok(());
            }
            for (i, v) in o.iter().enumerate() {
                let p = format!("{path}[{i}]");
                if !t.iter().any(|tv| conforms(v, tv, &p).is_ok()) {
                    return Err(conforms(v, &t[0], &p).err().unwrap_or(p));
                }
            }
            Ok(())
        }
        (Value::Null, Value::Array(_)) | (Value::Array(_), Value::Null) => Ok(()),
        (o, t) if kind(o) == kind(t) => Ok(()),
        (o, t) => Err(format!("{path}: {} where Jaeger has {}", kind(o), kind(t))),
    }
}

/// Every tag's value is of the JSON type its `type` says.
fn tags_typed(v: &Value) -> Result<(), String> {
    match v {
        Value::Object(m) => {
            if let (Some(Value::String(t)), Some(val), Some(_)) =
                (m.get("type"), m.get("value"), m.get("key"))
            {
                let ok = match t.as_str() {
                    "string" => val.is_string(),
                    "bool" => val.is_boolean(),
                    "int64" => val.is_i64(),
                    "float64" => val.is_f64(),
                    _ => false,
                };
                if !ok {
                    return Err(format!("tag {v} has a value not of its type"));
                }
            }
            m.values().try_for_each(tags_typed)
        }
        Value::Array(a) => a.iter().try_for_each(tags_typed),
        _ => Ok(()),
    }
}

async fn body(r: axum::response::Response) -> Value {
    let b = axum::body::to_bytes(r.into_body(), usize::MAX)
        .await
        .unwrap();
    serde_json::from_slice(&b).unwrap()
}

#[tokio::test]
async fn jaeger_answers_have_the_shapes_of_jaegers_own() {
    let mut fixture = unify(&serde_json::from_str(FIXTURE).unwrap());
    // A log's fields are key-values as tags are (Jaeger `model/json/model.go`: `Log.Fields
    // []KeyValue`, `Span.Tags []KeyValue`), of any value type: the fixture's logs have string
    // fields only.
    let span = &mut fixture["trace"]["spans"][0];
    let fields: Vec<Value> = span["logs"][0]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .chain(span["tags"].as_array().unwrap())
        .cloned()
        .collect();
    span["logs"][0]["fields"] = Value::Array(pool(fields));
    // The unified fixture has one span sample holding every example's references and tags.
    let spans = fixture["trace"]["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 1, "{spans:?}");
    assert_eq!(spans[0]["references"].as_array().unwrap().len(), 1);
    assert_eq!(
        spans[0]["tags"].as_array().unwrap().len(),
        3,
        "a tag per JSON type of value"
    );
    let ctx = session(&rows());
    let ids = [hex128(T1), hex128(T3)];
    let traces =
        convert::traces(&reads::trace_rows(&ctx, &ids, None).await.unwrap(), &ids).unwrap();
    for t in &traces {
        let t = serde_json::to_value(t).unwrap();
        conforms(&t, &fixture["trace"], "trace").unwrap();
        tags_typed(&t).unwrap();
    }
    let envelope = |data: Value, n| serde_json::to_value(Envelope::ok(data, n)).unwrap();
    let services = reads::services(&ctx).await.unwrap();
    conforms(
        &envelope(json!(services), 3),
        &fixture["services"],
        "services",
    )
    .unwrap();
    let ops = reads::operations(&ctx, "order", None).await.unwrap();
    conforms(
        &envelope(json!(ops), 1),
        &fixture["operations"],
        "operations",
    )
    .unwrap();
    let from = BASE_US * 1_000;
    let deps = reads::dependencies(&ctx, from, from + 10_000_000_000)
        .await
        .unwrap();
    conforms(
        &envelope(json!(deps), 1),
        &fixture["dependencies"],
        "dependencies",
    )
    .unwrap();
    let search = envelope(json!(traces), 2);
    let search_fixture =
        json!({"data": [fixture["trace"]], "total": 1, "limit": 0, "offset": 0, "errors": null});
    conforms(&search, &search_fixture, "search").unwrap();
    let refusal = axum::response::IntoResponse::into_response(JaegerRefusal::bad(
        "unable to parse param 'endTs'",
    ));
    assert_eq!(refusal.status(), 400);
    let refusal = body(refusal).await;
    conforms(&refusal, &fixture["error"], "error").unwrap();
    assert_eq!(refusal["errors"][0]["code"], 400);
    assert_eq!(refusal["data"], Value::Null);

    // The comparison itself tells wrong shapes apart.
    let mut wrong = serde_json::to_value(&traces[0]).unwrap();
    wrong["spans"][0]["startTime"] = json!("1");
    assert!(conforms(&wrong, &fixture["trace"], "trace").is_err());
    let mut wrong = serde_json::to_value(&traces[0]).unwrap();
    wrong["spans"][0]
        .as_object_mut()
        .unwrap()
        .remove("processID");
    assert!(conforms(&wrong, &fixture["trace"], "trace").is_err());
    let mut wrong = serde_json::to_value(&traces[0]).unwrap();
    wrong["spans"][0]["references"] =
        json!([{"refType": "CHILD_OF", "traceId": "a", "spanID": "b"}]);
    assert!(conforms(&wrong, &fixture["trace"], "trace").is_err());
    let mut wrong = serde_json::to_value(&traces[0]).unwrap();
    wrong["spans"][0]["tags"][0]["value"] = json!(["x"]);
    assert!(conforms(&wrong, &fixture["trace"], "trace").is_err());
    let mut wrong = serde_json::to_value(&traces[0]).unwrap();
    wrong["spans"][0]["tags"][0] = json!({"key": "k", "type": "bool", "value": "x"});
    assert!(tags_typed(&wrong).is_err());
    assert!(
        conforms(
            &json!({"data": ["a"], "total": 1}),
            &fixture["services"],
            "s"
        )
        .is_err()
    );
}

#[tokio::test]
async fn jaeger_trace_rows_cut_to_the_first_spans_by_start() {
    let ctx = session(&rows());
    let ids = [hex128(T1)];
    let mut rows = reads::trace_rows(&ctx, &ids, Some(2)).await.unwrap();
    let t = convert::traces(&rows, &ids).unwrap();
    let spans: Vec<&str> = t[0].spans.iter().map(|s| s.span_id.as_str()).collect();
    assert_eq!(spans, ["0000000000000001", "0000000000000002"]);
    super::keep_first(&mut rows, 1);
    assert_eq!(rows.iter().map(RecordBatch::num_rows).sum::<usize>(), 1);
    let t = convert::traces(&rows, &ids).unwrap();
    assert_eq!(t[0].spans[0].span_id, "0000000000000001");
    super::keep_first(&mut rows, 0);
    assert!(rows.is_empty());
}
