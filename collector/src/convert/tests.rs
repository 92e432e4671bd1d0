//! Unit and property tests of the OTLP → Arrow conversion.

use super::attrs::{find, source_slot, string_values};
use super::*;
use dyeline_model::decision::read_decision;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use proptest::prelude::*;

/// Attribute keys the one-pass lookup knows, and others.
const KEYS: [&str; 15] = [
    "job.name",
    "http.response.status_code",
    "http.status_code",
    "rpc.grpc.status_code",
    "rpc.response.status_code",
    "messaging.kafka.consumer.group",
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
            ("rpc.response.status_code", found.rpc_status),
            ("messaging.system", found.messaging_system),
            ("messaging.consumer.group.name", found.consumer_group),
            ("messaging.rocketmq.client_group", found.rocketmq_group),
            ("messaging.kafka.consumer.group", found.kafka_group),
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
                    start_time_unix_nano: 1_700_000_000_000_000_000,
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

/// The issue's span: 100,000 `cN=blue` pairs in its baggage, as a baggage attribute and as the
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
        start_time_unix_nano: 1_700_000_000_000_000_000,
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

/// A request of `spans` under one resource.
fn request_of(
    spans: Vec<opentelemetry_proto::tonic::trace::v1::Span>,
) -> ExportTraceServiceRequest {
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// A span of trace 1 with span id `[id; 8]` from `start` to `end`.
fn timed(id: u8, start: u64, end: u64) -> opentelemetry_proto::tonic::trace::v1::Span {
    opentelemetry_proto::tonic::trace::v1::Span {
        trace_id: vec![1; 16],
        span_id: vec![id; 8],
        start_time_unix_nano: start,
        end_time_unix_nano: end,
        ..Default::default()
    }
}

fn int64s(batch: &RecordBatch, name: &str) -> Vec<i64> {
    use arrow::array::AsArray;
    batch
        .column_by_name(name)
        .unwrap()
        .as_primitive::<arrow::datatypes::Int64Type>()
        .values()
        .to_vec()
}

/// Domain §1: an end before the start, or of 0, is kept with duration 0 (stored end = start);
/// a start of 0 and times past the year 2262 are refused, counted exactly, with a message.
#[test]
fn times_are_kept_with_duration_0_or_refused_by_the_rules_of_domain_1() {
    use dyeline_model::schema::col;
    let t = 1_700_000_000_000_000_000u64;
    let past_2262 = i64::MAX as u64 + 1;
    let rows = convert_request(
        &request_of(vec![
            timed(1, t, t + 5),
            timed(2, t, t - 7),
            timed(3, t, 0),
            timed(4, 0, t),
            timed(5, 0, 0),
            timed(6, past_2262, past_2262 + 1),
            timed(7, t, u64::MAX),
        ]),
        &ConvertOptions::default(),
    )
    .unwrap();
    let batch = rows.batch.clone().unwrap();
    let t = t as i64;
    assert_eq!(int64s(&batch, col::START_TIME_UNIX_NANO), [t, t, t]);
    assert_eq!(int64s(&batch, col::END_TIME_UNIX_NANO), [t + 5, t, t]);
    assert_eq!(int64s(&batch, col::DURATION_NS), [5, 0, 0]);
    assert_eq!(
        rows.rejected,
        [
            (RejectReason::MissingStartTime, 2),
            (RejectReason::InvalidTime, 2)
        ]
    );
    assert_eq!(rows.rejected_count(), 4);
    assert_eq!(
        rows.first_error.as_deref(),
        Some("resource_spans[0].scope_spans[0].spans[3]: start_time_unix_nano is 0 (not set)")
    );
    let only_late = convert_request(
        &request_of(vec![timed(7, 1, u64::MAX)]),
        &ConvertOptions::default(),
    )
    .unwrap();
    let message = only_late.first_error.unwrap();
    assert!(message.contains("beyond the year 2262"), "{message}");
    assert!(message.contains(&u64::MAX.to_string()), "{message}");
}

/// Domain §1: with a retention (the receivers'), a span that ended longer ago is refused with
/// a message naming the setting; without one (`dyeline import`) it is kept.
#[test]
fn spans_older_than_the_retention_are_refused_only_when_a_retention_is_given() {
    let hour = 3_600_000_000_000u64;
    let now = dyeline_model::time::now_unix_nano() as u64;
    let request = request_of(vec![
        timed(1, now - 3 * hour, now - 2 * hour),
        timed(2, now - 3 * hour, now - hour / 2),
        // Started before the cutoff, ended after it: kept.
        timed(3, now - 2 * hour, now - hour / 2),
        // An end of 0 is its start: judged by the start.
        timed(4, now - 2 * hour, 0),
    ]);
    let receiver = ConvertOptions {
        retention: Some(std::time::Duration::from_secs(3600)),
        ..ConvertOptions::default()
    };
    let rows = convert_request(&request, &receiver).unwrap();
    assert_eq!(rows.keys.len(), 2);
    assert_eq!(
        rows.keys
            .iter()
            .map(|k| k.span_id.to_bytes()[0])
            .collect::<Vec<_>>(),
        [2, 3]
    );
    assert_eq!(rows.rejected, [(RejectReason::OlderThanRetention, 2)]);
    let message = rows.first_error.unwrap();
    assert!(
        message.starts_with("resource_spans[0].scope_spans[0].spans[0]: the span ended at "),
        "{message}"
    );
    assert!(message.contains("[store] retention = 1h"), "{message}");
    let imported = convert_request(&request, &ConvertOptions::default()).unwrap();
    assert_eq!((imported.keys.len(), imported.rejected_count()), (4, 0));
}

/// Domain §1: a Zipkin/B3 SERVER half and CLIENT half sharing a span id get two keys; a
/// resend of one kind gets the same key.
#[test]
fn a_server_half_of_a_shared_span_id_has_its_own_key() {
    let t = 1_700_000_000_000_000_000;
    let kind = |k: SpanKind, mut s: opentelemetry_proto::tonic::trace::v1::Span| {
        s.kind = match k {
            SpanKind::Server => 2,
            SpanKind::Client => 3,
            _ => 1,
        };
        s
    };
    let rows = convert_request(
        &request_of(vec![
            kind(SpanKind::Client, timed(9, t, t + 10)),
            kind(SpanKind::Server, timed(9, t + 1, t + 9)),
            kind(SpanKind::Server, timed(9, t + 1, t + 9)),
        ]),
        &ConvertOptions::default(),
    )
    .unwrap();
    assert_eq!(rows.keys.len(), 3);
    assert_ne!(rows.keys[0], rows.keys[1]);
    assert_eq!(rows.keys[1], rows.keys[2]);
    assert_eq!(
        rows.keys.iter().map(|k| k.server).collect::<Vec<_>>(),
        [false, true, true]
    );
}

/// The status columns of one span whose attributes are `attrs`: (http, grpc, is_error).
/// The row of one span carrying `attrs`.
fn row_with(attrs: Vec<(&str, Value)>) -> RecordBatch {
    let mut span = timed(1, 1_700_000_000_000_000_000, 1_700_000_000_000_000_001);
    span.attributes = attrs
        .into_iter()
        .map(|(k, v)| KeyValue {
            key: k.into(),
            value: Some(AnyValue { value: Some(v) }),
            ..Default::default()
        })
        .collect();
    convert_request(&request_of(vec![span]), &ConvertOptions::default())
        .unwrap()
        .batch
        .unwrap()
}

fn statuses(attrs: Vec<(&str, Value)>) -> (Option<i32>, Option<i32>, bool) {
    use arrow::array::{Array, AsArray};
    use dyeline_model::schema::col;
    let batch = row_with(attrs);
    let int = |name: &str| {
        let c = batch
            .column_by_name(name)
            .unwrap()
            .as_primitive::<arrow::datatypes::Int32Type>();
        c.is_valid(0).then(|| c.value(0))
    };
    let is_error = batch
        .column_by_name(col::IS_ERROR)
        .unwrap()
        .as_boolean()
        .value(0);
    (
        int(col::HTTP_STATUS_CODE),
        int(col::RPC_GRPC_STATUS_CODE),
        is_error,
    )
}

/// Domain §1: a status code sent as a decimal string counts as its number; a string that is
/// not a decimal integer is absent (the legacy HTTP key is read then).
#[test]
fn status_codes_sent_as_decimal_strings_count_as_their_numbers() {
    let s = |t: &str| Value::StringValue(t.into());
    assert_eq!(
        statuses(vec![("http.response.status_code", s("503"))]),
        (Some(503), None, true)
    );
    assert_eq!(
        statuses(vec![("http.status_code", s(" 404 "))]),
        (Some(404), None, false)
    );
    assert_eq!(
        statuses(vec![("rpc.grpc.status_code", s("14"))]),
        (None, Some(14), true)
    );
    assert_eq!(
        statuses(vec![("rpc.grpc.status_code", s("0"))]),
        (None, Some(0), false)
    );
    // Not decimal integers: absent.
    for bad in ["5xx", "503.0", "", "0x1f7", "five", "99999999999"] {
        assert_eq!(
            statuses(vec![
                ("http.response.status_code", s(bad)),
                ("rpc.grpc.status_code", s(bad))
            ]),
            (None, None, false),
            "{bad:?}"
        );
    }
    // The current key unusable: the legacy one counts.
    assert_eq!(
        statuses(vec![
            ("http.response.status_code", s("n/a")),
            ("http.status_code", s("502"))
        ]),
        (Some(502), None, true)
    );
    assert_eq!(
        statuses(vec![
            ("http.response.status_code", Value::IntValue(200)),
            ("http.status_code", s("502"))
        ]),
        (Some(200), None, false)
    );
}

/// The current RPC status key (`rpc.response.status_code`, a string) is read beside the gRPC
/// one: any value but OK or 0 is an error; it stays an attribute (the gRPC column holds what
/// `rpc.grpc.status_code` sent).
#[test]
fn the_current_rpc_status_key_marks_errors_beside_the_grpc_one() {
    let s = |t: &str| Value::StringValue(t.into());
    let key = "rpc.response.status_code";
    for (value, error) in [
        (s("OK"), false),
        (s("ok"), false),
        (s("0"), false),
        (s(""), false),
        (s("UNAVAILABLE"), true),
        (s("DEADLINE_EXCEEDED"), true),
        (s("-32602"), true),
        (Value::IntValue(0), false),
        (Value::IntValue(14), true),
        (Value::BoolValue(true), false),
    ] {
        assert_eq!(
            statuses(vec![(key, value.clone())]),
            (None, None, error),
            "{value:?}"
        );
    }
    // Both keys: either one failing is an error.
    assert_eq!(
        statuses(vec![
            ("rpc.grpc.status_code", Value::IntValue(0)),
            (key, s("INTERNAL"))
        ]),
        (None, Some(0), true)
    );
}

/// `consumer_group` takes the current key, then RocketMQ's, then Kafka's older one; each is
/// left out of `attributes` as a promoted key.
#[test]
fn the_consumer_group_falls_back_to_the_older_kafka_key() {
    use arrow::array::AsArray;
    use dyeline_model::schema::col;
    let group = |attrs: Vec<(&str, &str)>| {
        let batch = row_with(
            attrs
                .into_iter()
                .map(|(k, v)| (k, Value::StringValue(v.into())))
                .collect(),
        );
        let text = |name: &str| {
            let c = batch.column_by_name(name).unwrap().as_string::<i32>();
            arrow::array::Array::is_valid(c, 0).then(|| c.value(0).to_owned())
        };
        (text(col::CONSUMER_GROUP), text(col::ATTRIBUTES).unwrap())
    };
    assert_eq!(
        group(vec![("messaging.kafka.consumer.group", "billing")]),
        (Some("billing".into()), "{}".into())
    );
    assert_eq!(
        group(vec![
            ("messaging.kafka.consumer.group", "old"),
            ("messaging.consumer.group.name", "new")
        ]),
        (Some("new".into()), "{}".into())
    );
    assert_eq!(
        group(vec![
            ("messaging.kafka.consumer.group", "k"),
            ("messaging.rocketmq.client_group", "r")
        ]),
        (Some("r".into()), "{}".into())
    );
}

proptest! {
    /// The status code parser: a decimal string is its number, like the integer; text with
    /// anything else in it is absent.
    #[test]
    fn status_code_strings_parse_as_decimal_integers(
        n in any::<i32>(),
        pad in prop::sample::select(vec!["", " ", "\t"]),
        junk in "[a-zA-Z.x_/]{1,3}",
    ) {
        use super::attrs::status_code_value;
        use crate::wire::Val;
        let text = format!("{pad}{n}{pad}");
        prop_assert_eq!(status_code_value(&Val::Str(&text)), Some(n));
        prop_assert_eq!(status_code_value(&Val::Int(i64::from(n))), Some(n));
        let bad = format!("{n}{junk}");
        prop_assert_eq!(status_code_value(&Val::Str(&bad)), None);
        let bad = format!("{junk}{n}");
        prop_assert_eq!(status_code_value(&Val::Str(&bad)), None);
        prop_assert_eq!(status_code_value(&Val::Int(i64::from(i32::MAX) + 1)), None);
    }
}

/// Span links are kept (domain §1): a JSON array in the `links` column, null without links.
#[test]
fn links_are_kept_as_a_json_array() {
    use arrow::array::{Array, AsArray};
    use opentelemetry_proto::tonic::trace::v1::span::Link;
    let t = 1_700_000_000_000_000_000;
    let mut linked = timed(1, t, t + 1);
    linked.links = vec![
        Link {
            trace_id: vec![0xab; 16],
            span_id: vec![0xcd; 8],
            trace_state: "v=1".into(),
            attributes: vec![KeyValue {
                key: "messaging.batch.index".into(),
                value: Some(AnyValue {
                    value: Some(Value::IntValue(0)),
                }),
                ..Default::default()
            }],
            ..Default::default()
        },
        Link {
            trace_id: vec![2; 16],
            span_id: vec![3; 8],
            ..Default::default()
        },
    ];
    let batch = convert_request(
        &request_of(vec![linked, timed(2, t, t + 1)]),
        &ConvertOptions::default(),
    )
    .unwrap()
    .batch
    .unwrap();
    let links = batch
        .column_by_name(dyeline_model::schema::col::LINKS)
        .unwrap()
        .as_string::<i32>();
    let expected = format!(
        r#"[{{"trace_id":"{}","span_id":"{}","trace_state":"v=1","attributes":{{"messaging.batch.index":0}}}},{{"trace_id":"{}","span_id":"{}","attributes":{{}}}}]"#,
        "ab".repeat(16),
        "cd".repeat(8),
        "02".repeat(16),
        "03".repeat(8)
    );
    assert_eq!(links.value(0), expected);
    let parsed: serde_json::Value = serde_json::from_str(links.value(0)).unwrap();
    assert_eq!(parsed[1]["span_id"], "0303030303030303");
    assert!(links.is_null(1));
}

/// The environment column takes `deployment.environment.name`, else the older
/// `deployment.environment` (an empty value counts as none), and both leave the resource's
/// JSON; a resource naming neither has a null environment.
#[test]
fn the_environment_is_read_from_the_current_key_then_the_older_one() {
    use arrow::array::{Array, AsArray};
    use dyeline_model::schema::col;
    use opentelemetry_proto::tonic::resource::v1::Resource;
    let env = |attrs: Vec<(&str, &str)>| {
        let mut request = request_of(vec![timed(
            1,
            1_700_000_000_000_000_000,
            1_700_000_000_000_000_001,
        )]);
        request.resource_spans[0].resource = Some(Resource {
            attributes: attrs
                .into_iter()
                .map(|(k, v)| KeyValue {
                    key: k.into(),
                    value: Some(AnyValue {
                        value: Some(Value::StringValue(v.into())),
                    }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
        let batch = convert_request(&request, &ConvertOptions::default())
            .unwrap()
            .batch
            .unwrap();
        let text = |name: &str| {
            let c = batch.column_by_name(name).unwrap().as_string::<i32>();
            c.is_valid(0).then(|| c.value(0).to_owned())
        };
        (
            text(col::DEPLOYMENT_ENVIRONMENT),
            text(col::RESOURCE_ATTRIBUTES).unwrap(),
        )
    };
    assert_eq!(
        env(vec![("deployment.environment.name", "production")]),
        (Some("production".into()), "{}".into())
    );
    assert_eq!(
        env(vec![
            ("deployment.environment", "old"),
            ("deployment.environment.name", "staging")
        ]),
        (Some("staging".into()), "{}".into())
    );
    assert_eq!(
        env(vec![
            ("deployment.environment.name", ""),
            ("deployment.environment", "qa")
        ]),
        (Some("qa".into()), "{}".into())
    );
    assert_eq!(
        env(vec![("region", "cn")]),
        (None, r#"{"region":"cn"}"#.into())
    );
}
