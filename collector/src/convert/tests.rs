//! Unit and property tests of the OTLP → Arrow conversion.

use super::attrs::{find, source_slot, string_values};
use super::*;
use dyeline_model::decision::read_decision;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use proptest::prelude::*;

/// Attribute keys the one-pass lookup knows, and others.
const KEYS: [&str; 13] = [
    "job.name",
    "http.response.status_code",
    "http.status_code",
    "rpc.grpc.status_code",
    "messaging.system",
    "messaging.consumer.group.name",
    "messaging.rocketmq.client_group",
    "x-deploy-channel-type",
    "baggage.x-deploy-channel-type",
    "http.request.header.baggage",
    "url.path",
    "job",
    "",
];

fn any_value() -> impl Strategy<Value = Option<AnyValue>> {
    let text = prop::sample::select(vec![
        "trade=blue",
        "trade=blue&pay=green",
        "pay=green;ttl=3",
        "",
        "&",
        "trade=purple",
        "x-deploy-channel-type=trade%3Dgreen",
        "a=1, x-deploy-channel-type = pay=blue",
        "503",
        "7",
    ]);
    let value = prop_oneof![
        text.clone()
            .prop_map(|t| Some(Value::StringValue(t.to_owned()))),
        any::<i64>().prop_map(|i| Some(Value::IntValue(i % 1000))),
        prop::collection::vec(text, 0..3).prop_map(|v| {
            Some(Value::ArrayValue(
                opentelemetry_proto::tonic::common::v1::ArrayValue {
                    values: v
                        .into_iter()
                        .map(|t| AnyValue {
                            value: Some(Value::StringValue(t.to_owned())),
                        })
                        .collect(),
                },
            ))
        }),
        Just(None),
    ];
    prop_oneof![value.prop_map(|value| Some(AnyValue { value })), Just(None)]
}

fn attributes() -> impl Strategy<Value = Vec<KeyValue>> {
    prop::collection::vec(
        (prop::sample::select(KEYS.to_vec()), any_value()).prop_map(|(k, value)| KeyValue {
            key: k.to_owned(),
            value,
            ..Default::default()
        }),
        0..12,
    )
}

proptest! {
    /// The one-pass lookup finds what a scan per key finds, duplicates and value-less keys
    /// included, and the memoised decision equals `read_decision`'s for every source order.
    #[test]
    fn one_pass_lookup_equals_a_scan_per_key(
        attrs in attributes(),
        order in prop::sample::subsequence(DecisionSource::DEFAULT_ORDER.to_vec(), 0..=3)
            .prop_shuffle(),
    ) {
        let attrs = crate::wire::kvs(&attrs);
        let found = SpanAttrs::of(&attrs, &[]);
        let slots = [
            ("job.name", found.job_name),
            ("http.response.status_code", found.http_status),
            ("http.status_code", found.http_status_legacy),
            ("rpc.grpc.status_code", found.grpc_status),
            ("messaging.system", found.messaging_system),
            ("messaging.consumer.group.name", found.consumer_group),
            ("messaging.rocketmq.client_group", found.rocketmq_group),
        ];
        for (key, slot) in slots {
            prop_assert_eq!(slot, find(&attrs, key), "{}", key);
        }
        for source in DecisionSource::DEFAULT_ORDER {
            prop_assert_eq!(
                found.decision[source_slot(source)],
                find(&attrs, source.as_str())
            );
        }
        let expected =
            read_decision(&order, |key| find(&attrs, key).map(|v| string_values(Some(v))));
        // Twice: a miss, then a hit in the memo.
        let mut memo = DecisionMemo::default();
        for _ in 0..2 {
            let got = memo.find(&order, &found);
            let got = got.as_ref().map(|f| memo.resolve(f));
            prop_assert_eq!(
                got.map(|(s, t, d)| (s, t.to_owned(), d.clone())),
                expected.as_ref().map(|r| (r.source, r.text.clone(), r.decisions.clone()))
            );
        }
    }
}

#[test]
fn an_http_status_key_without_a_value_falls_back_to_the_legacy_key() {
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    let attribute = |key: &str, value: Option<i64>| KeyValue {
        key: key.into(),
        value: value.map(|i| AnyValue {
            value: Some(Value::IntValue(i)),
        }),
        ..Default::default()
    };
    let request = |attributes| ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource::default()),
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id: vec![1; 16],
                    span_id: vec![2; 8],
                    attributes,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let status = |attributes| {
        let rows = convert_request(&request(attributes), &ConvertOptions::default()).unwrap();
        let batch = rows.batch.unwrap();
        let column = batch
            .column_by_name(dyeline_model::schema::col::HTTP_STATUS_CODE)
            .unwrap()
            .as_primitive::<arrow::datatypes::Int32Type>()
            .clone();
        column.is_valid(0).then(|| column.value(0))
    };
    use arrow::array::{Array, AsArray};
    let legacy = attribute("http.status_code", Some(503));
    assert_eq!(
        status(vec![
            attribute("http.response.status_code", None),
            legacy.clone()
        ]),
        Some(503)
    );
    assert_eq!(
        status(vec![
            attribute("http.response.status_code", Some(200)),
            legacy
        ]),
        Some(200)
    );
    assert_eq!(
        status(vec![attribute("http.response.status_code", None)]),
        None
    );
}

#[test]
fn hex_ids_are_lower_case() {
    let mut buf = [0u8; 32];
    assert_eq!(hex_str(&[0xAB, 0x01], &mut buf), "ab01");
    let t = TraceId::from_hex("7D3F0C9A2B1E4F5A8C6D0E1F2A3B4C5D").unwrap();
    assert_eq!(hex_str(&t.to_bytes(), &mut buf), t.to_string());
}

/// The span: 100,000 `cN=blue` pairs in its baggage, as a baggage attribute and as the
/// captured header. Each span keeps the first `MAX_PAIRS` decisions and is counted once.
#[test]
fn a_huge_decision_value_is_read_up_to_the_limits_and_counted() {
    use arrow::array::{Array, AsArray};
    use dyeline_model::decision::MAX_PAIRS;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    let pairs = (0..100_000)
        .map(|i| format!("c{i}=blue"))
        .collect::<Vec<_>>()
        .join("&");
    let span = |id: u8, key: &str, value: String| Span {
        trace_id: vec![1; 16],
        span_id: vec![id; 8],
        attributes: vec![KeyValue {
            key: key.into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue(value)),
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: vec![
                    span(1, "baggage.x-deploy-channel-type", pairs.clone()),
                    span(
                        2,
                        "http.request.header.baggage",
                        format!("a=1,x-deploy-channel-type={pairs};p,z=2"),
                    ),
                    span(3, "x-deploy-channel-type", "c1=green".into()),
                ],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let rows = convert_request(&request, &ConvertOptions::default()).unwrap();
    assert_eq!(rows.decisions_truncated, 2);
    let batch = rows.batch.unwrap();
    let decisions = batch
        .column_by_name(dyeline_model::schema::col::DECISIONS)
        .unwrap()
        .as_map();
    let lengths: Vec<usize> = (0..3).map(|i| decisions.value(i).len()).collect();
    assert_eq!(lengths, [MAX_PAIRS, MAX_PAIRS, 1]);
    let malformed = batch
        .column_by_name(dyeline_model::schema::col::MALFORMED_PAIRS)
        .unwrap()
        .as_primitive::<arrow::datatypes::UInt32Type>();
    assert_eq!(malformed.values().to_vec(), [0, 0, 0]);
}
