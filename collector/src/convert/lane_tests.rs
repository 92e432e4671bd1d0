//! Tests of the lanes read at ingest (domain §7.1): the lane columns of converted rows, the
//! bench-only switch, and the one-pass carrier lookup against a scan per key.

use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use dyeline_model::schema::col;
use dyeline_model::{LaneCarrier, LaneCarriers, LaneRule, LaneRules};
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use proptest::prelude::*;

use super::attrs::{SpanAttrs, find};
use super::*;

fn text(t: &str) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(Value::StringValue(t.to_owned())),
    })
}

fn strings(items: &[&str]) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(Value::ArrayValue(ArrayValue {
            values: items.iter().map(|t| text(t).unwrap()).collect(),
        })),
    })
}

fn kv(key: &str, value: Option<AnyValue>) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value,
        ..Default::default()
    }
}

fn resource(attributes: Vec<KeyValue>, spans: Vec<Vec<KeyValue>>, first_id: u8) -> ResourceSpans {
    ResourceSpans {
        resource: Some(Resource {
            attributes,
            ..Default::default()
        }),
        scope_spans: vec![ScopeSpans {
            spans: spans
                .into_iter()
                .enumerate()
                .map(|(i, attributes)| Span {
                    trace_id: vec![7; 16],
                    span_id: vec![first_id + i as u8; 8],
                    start_time_unix_nano: 1,
                    end_time_unix_nano: 2,
                    attributes,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The lane fixtures' rules and carriers (their `dyeline.toml`, as JSON).
fn options() -> ConvertOptions {
    let rules: Vec<LaneRule> = serde_json::from_str(
        r#"[{"kind": "attribute", "key": "nacos.metadata.gray", "map": {"true": "gray", "false": "base"}},
            {"kind": "pattern", "key": "host.name", "regex": "^dw[a-z]+-(?P<lane>gray[0-9]*)-v[0-9.]+$"}]"#,
    )
    .unwrap();
    let carriers: Vec<LaneCarrier> = serde_json::from_str(
        r#"[{"key": "http.request.header.gray", "map": {"true": "gray", "false": "base"}}]"#,
    )
    .unwrap();
    ConvertOptions {
        lane_rules: Arc::new(LaneRules::new(&rules).unwrap()),
        lane_carriers: Arc::new(LaneCarriers::new(&carriers).unwrap()),
        ..ConvertOptions::default()
    }
}

fn column_strings(batch: &RecordBatch, name: &str) -> Vec<Option<String>> {
    let c = batch.column_by_name(name).unwrap().as_string::<i32>();
    (0..c.len())
        .map(|i| c.is_valid(i).then(|| c.value(i).to_owned()))
        .collect()
}

fn column_lists(batch: &RecordBatch, name: &str) -> Vec<Option<Vec<String>>> {
    let c = batch.column_by_name(name).unwrap().as_list::<i32>();
    (0..c.len())
        .map(|i| {
            c.is_valid(i).then(|| {
                let v = c.value(i);
                let v = v.as_string::<i32>();
                (0..v.len()).map(|j| v.value(j).to_owned()).collect()
            })
        })
        .collect()
}

fn column_u32(batch: &RecordBatch, name: &str) -> Vec<Option<u32>> {
    let c = batch
        .column_by_name(name)
        .unwrap()
        .as_primitive::<arrow::datatypes::UInt32Type>();
    (0..c.len())
        .map(|i| c.is_valid(i).then(|| c.value(i)))
        .collect()
}

fn some(values: &[&str]) -> Vec<Option<String>> {
    values
        .iter()
        .map(|v| (!v.is_empty()).then(|| (*v).to_owned()))
        .collect()
}

fn request() -> ExportTraceServiceRequest {
    let bool_true = Some(AnyValue {
        value: Some(Value::BoolValue(true)),
    });
    ExportTraceServiceRequest {
        resource_spans: vec![
            // deploy.lane not a lane id: recorded, then the host name decides.
            resource(
                vec![
                    kv("service.name", text("settle")),
                    kv("host.name", text("dwsettle-gray-v3.0.0")),
                    kv("deploy.lane", text("gray_2")),
                ],
                vec![
                    vec![kv("x-deploy-lane", text(" Gray "))],
                    vec![kv("url.path", text("/a"))],
                ],
                1,
            ),
            // A boolean Nacos flag; the user carrier after two malformed built-ins.
            resource(
                vec![
                    kv("service.name", text("inventory")),
                    kv("nacos.metadata.gray", bool_true),
                ],
                vec![
                    vec![
                        kv("http.request.header.gray", strings(&["true"])),
                        kv("x-deploy-lane", text("gray_v2")),
                        kv(
                            "http.request.header.baggage",
                            strings(&["a=1", "x-deploy-lane=gray%2Fv2;p"]),
                        ),
                    ],
                    vec![kv(
                        "http.request.header.baggage",
                        text("userId=alice%40example.com,x-deploy-lane=%67ray2;ttl=30"),
                    )],
                    vec![kv("http.request.header.gray", strings(&["maybe"]))],
                ],
                3,
            ),
            // Nothing marks it: base by default.
            resource(
                vec![kv("service.name", text("gateway"))],
                vec![vec![kv("baggage.x-deploy-lane", text("base"))]],
                6,
            ),
        ],
    }
}

#[test]
fn lane_columns_hold_the_instance_lane_and_each_span_tag() {
    let rows = convert_request(&request(), &options()).unwrap();
    assert_eq!(rows.malformed_lane_tags, 3);
    let b = rows.batch.unwrap();
    assert_eq!(
        column_strings(&b, col::LANE),
        some(&["gray", "gray", "gray", "gray", "gray", "base"])
    );
    assert_eq!(
        column_strings(&b, col::LANE_RULE),
        some(&[
            "host.name",
            "host.name",
            "nacos.metadata.gray",
            "nacos.metadata.gray",
            "nacos.metadata.gray",
            "default"
        ])
    );
    let invalid = Some(vec!["gray_2".to_owned()]);
    assert_eq!(
        column_lists(&b, col::LANE_INVALID_VALUES),
        [invalid.clone(), invalid, None, None, None, None]
    );
    assert_eq!(
        column_strings(&b, col::LANE_TAG),
        some(&["gray", "", "gray", "gray2", "", "base"])
    );
    assert_eq!(
        column_strings(&b, col::LANE_TAG_SOURCE),
        some(&[
            "x-deploy-lane",
            "",
            "http.request.header.gray",
            "http.request.header.baggage",
            "",
            "baggage.x-deploy-lane"
        ])
    );
    assert_eq!(
        column_u32(&b, col::MALFORMED_LANE_TAGS),
        [Some(0), Some(0), Some(2), Some(0), Some(1), Some(0)]
    );
    // The carriers stay in `attributes` (the raw values a user may want to see).
    let attributes = column_strings(&b, col::ATTRIBUTES);
    assert!(
        attributes[0]
            .as_deref()
            .unwrap()
            .contains("\"x-deploy-lane\""),
        "{attributes:?}"
    );
}

#[test]
fn the_bench_only_switch_leaves_every_lane_column_null() {
    let options = ConvertOptions {
        skip_lanes_bench_only: true,
        ..options()
    };
    let rows = convert_request(&request(), &options).unwrap();
    assert_eq!(rows.malformed_lane_tags, 0);
    let b = rows.batch.unwrap();
    for name in dyeline_model::schema::LANE_COLUMNS {
        assert_eq!(b.column_by_name(name).unwrap().null_count(), 6, "{name}");
    }
    // The other columns are as with lanes on.
    let on = convert_request(&request(), &super::lane_tests::options())
        .unwrap()
        .batch
        .unwrap();
    assert_eq!(
        b.column_by_name(col::COLOR_RULE),
        on.column_by_name(col::COLOR_RULE)
    );
    assert_eq!(
        b.column_by_name(col::ATTRIBUTES),
        on.column_by_name(col::ATTRIBUTES)
    );
}

/// Carrier keys and others, with values that are tags, malformed tags, baggage headers.
const KEYS: [&str; 6] = [
    "x-deploy-lane",
    "baggage.x-deploy-lane",
    "http.request.header.baggage",
    "http.request.header.gray",
    "http.request.header.x-env",
    "url.path",
];

fn any_value() -> impl Strategy<Value = Option<AnyValue>> {
    let t = prop::sample::select(vec![
        "gray",
        " GRAY2 ",
        "gray_v2",
        "%67ray",
        "true",
        "false",
        "",
        "a=1,x-deploy-lane=gray3;p",
        "x-deploy-lane=bad%2F",
        "x-deploy-lane=",
    ]);
    prop_oneof![
        t.clone().prop_map(text),
        prop::collection::vec(t, 0..3).prop_map(|v| strings(&v)),
        any::<bool>().prop_map(|b| Some(AnyValue {
            value: Some(Value::BoolValue(b)),
        })),
        Just(Some(AnyValue {
            value: Some(Value::IntValue(1)),
        })),
        Just(None),
    ]
}

proptest! {
    /// The tag found through the one-pass slots equals the tag of a scan per key (first
    /// occurrence of each key), for any attributes; the chain never fails a span.
    #[test]
    fn one_pass_carriers_equal_a_scan_per_key(
        attrs in prop::collection::vec(
            (prop::sample::select(KEYS.to_vec()), any_value())
                .prop_map(|(k, v)| kv(k, v)),
            0..8,
        ),
    ) {
        let carriers = LaneCarriers::new(&[
            LaneCarrier { key: "http.request.header.gray".into(), map: Some(
                [("true".to_owned(), "gray".to_owned())].into_iter().collect()) },
            LaneCarrier { key: "http.request.header.x-env".into(), map: None },
        ]).unwrap();
        let user: Vec<&str> = carriers.user_keys().collect();
        let attrs = crate::wire::kvs(&attrs);
        let found = SpanAttrs::of(&attrs, &user);
        let got = super::lane::lane_tag(&found, &carriers);
        let expected = carriers.resolve(|key| {
            find(&attrs, key).map(|v| {
                let items: Vec<&str> = match v {
                    crate::wire::Val::Str(s) => vec![*s],
                    crate::wire::Val::Bool(b) => vec![if *b { "true" } else { "false" }],
                    crate::wire::Val::Array(a) => a.iter().filter_map(super::attrs::str_value).collect(),
                    _ => Vec::new(),
                };
                items
            })
        });
        prop_assert_eq!(got, expected);
    }
}
