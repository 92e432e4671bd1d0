//! Unit and property tests of the protobuf wire reader: it takes no body prost refuses and
//! reads what prost reads.

use super::*;
use arrow::array::AsArray;
use opentelemetry_proto::tonic::common::v1::{
    ArrayValue, EntityRef, InstrumentationScope, KeyValueList,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::{Event, Link};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec!["", "service.name", "host.name", "trade=blue", "ünï ☃"])
            .prop_map(str::to_owned),
        "[a-z.=&]{0,12}",
    ]
}

fn any_value() -> impl Strategy<Value = AnyValue> {
    let leaf = prop_oneof![
        Just(None),
        text().prop_map(|s| Some(Value::StringValue(s))),
        any::<bool>().prop_map(|b| Some(Value::BoolValue(b))),
        any::<i64>().prop_map(|i| Some(Value::IntValue(i))),
        prop::sample::select(vec![0.0, -1.5, 1e300, f64::INFINITY])
            .prop_map(|d| Some(Value::DoubleValue(d))),
        prop::collection::vec(any::<u8>(), 0..5).prop_map(|b| Some(Value::BytesValue(b))),
        any::<i32>().prop_map(|i| Some(Value::StringValueStrindex(i))),
    ]
    .prop_map(|value| AnyValue { value });
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(|values| AnyValue {
                value: Some(Value::ArrayValue(ArrayValue { values })),
            }),
            prop::collection::vec((text(), inner), 0..3).prop_map(|kvs| AnyValue {
                value: Some(Value::KvlistValue(KeyValueList {
                    values: kvs
                        .into_iter()
                        .map(|(key, v)| KeyValue {
                            key,
                            value: Some(v),
                            ..Default::default()
                        })
                        .collect(),
                })),
            }),
        ]
    })
}

fn attributes() -> impl Strategy<Value = Vec<KeyValue>> {
    prop::collection::vec(
        (text(), prop::option::of(any_value()), any::<i32>()).prop_map(
            |(key, value, key_strindex)| KeyValue {
                key,
                value,
                key_strindex,
            },
        ),
        0..4,
    )
}

fn id() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 16),
        prop::collection::vec(any::<u8>(), 8),
        prop::collection::vec(any::<u8>(), 0..3),
    ]
}

fn span() -> impl Strategy<Value = Span> {
    (
        (id(), id(), id(), text(), text(), any::<i32>(), any::<u32>()),
        (any::<u64>(), any::<u64>(), attributes()),
        prop::collection::vec((any::<u64>(), text(), attributes()), 0..2),
        prop::collection::vec((id(), id(), text(), attributes(), any::<u32>()), 0..2),
        prop::option::of((text(), any::<i32>())),
    )
        .prop_map(
            |(
                (trace_id, span_id, parent_span_id, trace_state, name, kind, flags),
                (start, end, attributes),
                events,
                links,
                status,
            )| Span {
                trace_id,
                span_id,
                parent_span_id,
                trace_state,
                name,
                kind,
                flags,
                start_time_unix_nano: start,
                end_time_unix_nano: end,
                attributes,
                dropped_attributes_count: 1,
                events: events
                    .into_iter()
                    .map(|(time_unix_nano, name, attributes)| Event {
                        time_unix_nano,
                        name,
                        attributes,
                        dropped_attributes_count: 0,
                    })
                    .collect(),
                links: links
                    .into_iter()
                    .map(|(trace_id, span_id, trace_state, attributes, flags)| Link {
                        trace_id,
                        span_id,
                        trace_state,
                        attributes,
                        dropped_attributes_count: 2,
                        flags,
                    })
                    .collect(),
                status: status.map(|(message, code)| Status { message, code }),
                ..Default::default()
            },
        )
}

fn request() -> impl Strategy<Value = ExportTraceServiceRequest> {
    let scope = prop::option::of((text(), text(), attributes())).prop_map(|s| {
        s.map(|(name, version, attributes)| InstrumentationScope {
            name,
            version,
            attributes,
            dropped_attributes_count: 3,
        })
    });
    let scope_spans = (scope, prop::collection::vec(span(), 0..3), text()).prop_map(
        |(scope, spans, schema_url)| ScopeSpans {
            scope,
            spans,
            schema_url,
        },
    );
    let resource =
        prop::option::of((attributes(), prop::collection::vec(text(), 0..2))).prop_map(|r| {
            r.map(|(attributes, keys)| Resource {
                attributes,
                dropped_attributes_count: 4,
                entity_refs: vec![EntityRef {
                    schema_url: "s".into(),
                    r#type: "service".into(),
                    id_keys: keys.clone(),
                    description_keys: keys,
                }],
            })
        });
    prop::collection::vec(
        (resource, prop::collection::vec(scope_spans, 0..3), text()).prop_map(
            |(resource, scope_spans, schema_url)| ResourceSpans {
                resource,
                scope_spans,
                schema_url,
            },
        ),
        0..3,
    )
    .prop_map(|resource_spans| ExportTraceServiceRequest { resource_spans })
}

proptest! {
    /// On any message prost writes, the wire reader's views are prost's.
    #[test]
    fn the_wire_reader_reads_what_prost_reads(req in request()) {
        let body = req.encode_to_vec();
        let view = RequestView::decode(&body).expect("a message prost wrote");
        // Debug text, so that NaN doubles compare equal.
        prop_assert_eq!(format!("{view:?}"), format!("{:?}", RequestView::from_prost(&req)));
    }

    /// Whatever damaged body the wire reader takes, prost takes too, and reads the same.
    #[test]
    fn the_wire_reader_accepts_nothing_prost_refuses(
        req in request(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let mut body = req.encode_to_vec();
        if body.is_empty() {
            return Ok(());
        }
        for (at, byte) in &edits {
            let i = at.index(body.len());
            body[i] = *byte;
        }
        if let Some(cut) = cut {
            body.truncate(cut.index(body.len()));
        }
        if let Ok(view) = RequestView::decode(&body) {
            let decoded = ExportTraceServiceRequest::decode(&body[..]);
            prop_assert!(decoded.is_ok(), "prost refused: {:?}", decoded.err());
            let decoded = decoded.expect("checked");
            prop_assert_eq!(
                format!("{view:?}"),
                format!("{:?}", RequestView::from_prost(&decoded))
            );
        }
    }
}

fn span_with(f: impl FnOnce(&mut Span)) -> ExportTraceServiceRequest {
    let mut span = Span {
        trace_id: vec![1; 16],
        span_id: vec![2; 8],
        name: "GET /".into(),
        start_time_unix_nano: 1_700_000_000_000_000_000,
        ..Default::default()
    };
    f(&mut span);
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: vec![span],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[test]
fn bodies_prost_refuses_are_refused_with_prosts_message() {
    // Invalid UTF-8 in a link's trace state.
    let mut body = span_with(|s| {
        s.links = vec![Link {
            trace_state: "\u{e9}t\u{e9}".into(),
            ..Default::default()
        }]
    })
    .encode_to_vec();
    let at = body
        .windows(2)
        .position(|w| w == "\u{e9}".as_bytes())
        .expect("the text is in the body");
    body[at] = 0xff;
    assert!(RequestView::decode(&body).is_err());
    let err = decode_request(&body).err().expect("prost refuses it too");
    assert!(err.to_string().contains("UTF-8"), "{err}");
    // Truncated in the middle of a span.
    let body = span_with(|_| {}).encode_to_vec();
    assert!(RequestView::decode(&body[..body.len() - 3]).is_err());
    assert!(decode_request(&body[..body.len() - 3]).is_err());
    // Field number 0.
    assert!(decode_request(&[0x02, 0x00]).is_err());
}

#[test]
fn values_nested_deeper_than_the_reader_goes_are_read_by_prost() {
    let mut value = AnyValue {
        value: Some(Value::StringValue("leaf".into())),
    };
    for _ in 0..MAX_DEPTH + 2 {
        value = AnyValue {
            value: Some(Value::ArrayValue(ArrayValue {
                values: vec![value],
            })),
        };
    }
    let req = span_with(|s| {
        s.attributes = vec![KeyValue {
            key: "deep".into(),
            value: Some(value),
            ..Default::default()
        }]
    });
    let body = req.encode_to_vec();
    assert!(RequestView::decode(&body).is_err());
    match decode_request(&body) {
        Ok(Decoded::Prost(r)) => assert_eq!(*r, req),
        _ => panic!("prost reads it"),
    }
    // And shallow enough, the reader's own views.
    let body = span_with(|_| {}).encode_to_vec();
    assert!(matches!(decode_request(&body), Ok(Decoded::View(_))));
}

/// A span whose one attribute is an `AnyValue` nested `depth` arrays deep around an int,
/// encoded by hand from the inside out (prost's encoder recurses), in linear time.
fn nested_array_body(depth: usize) -> Vec<u8> {
    fn header(out: &mut Vec<u8>, field: u8, len: usize) {
        out.push(field << 3 | 2);
        prost::encoding::encode_varint(len as u64, out);
    }
    let leaf = AnyValue {
        value: Some(Value::IntValue(7)),
    }
    .encode_to_vec();
    // Headers per level, innermost first: AnyValue.array_value (5) around ArrayValue,
    // ArrayValue.values (1) around the next AnyValue.
    let mut headers: Vec<Vec<u8>> = Vec::with_capacity(depth);
    let mut len = leaf.len();
    for _ in 0..depth {
        let mut h = Vec::new();
        let mut inner = Vec::new();
        header(&mut inner, 1, len);
        let array_len = inner.len() + len;
        header(&mut h, 5, array_len);
        h.extend_from_slice(&inner);
        len += h.len();
        headers.push(h);
    }
    let mut value = Vec::with_capacity(len);
    for h in headers.iter().rev() {
        value.extend_from_slice(h);
    }
    value.extend_from_slice(&leaf);
    // KeyValue { key: "deep", value } inside the span of `span_with`, spliced in as the
    // span's attribute field (9): the rest of the request is prost-encoded.
    let mut kv = Vec::new();
    header(&mut kv, 1, 4);
    kv.extend_from_slice(b"deep");
    header(&mut kv, 2, value.len());
    kv.extend_from_slice(&value);
    let mut span = span_with(|_| {}).resource_spans[0].scope_spans[0].spans[0].encode_to_vec();
    header(&mut span, 9, kv.len());
    span.extend_from_slice(&kv);
    let mut scope = Vec::new();
    header(&mut scope, 2, span.len());
    scope.extend_from_slice(&span);
    let mut resource = Vec::new();
    header(&mut resource, 2, scope.len());
    resource.extend_from_slice(&scope);
    let mut body = Vec::new();
    header(&mut body, 1, resource.len());
    body.extend_from_slice(&resource);
    body
}

#[test]
fn values_nested_past_prosts_limit_are_refused_as_too_deep_without_recursing() {
    // Within prost's limit the hand encoding is what prost reads.
    let body = nested_array_body(MAX_DEPTH + 2);
    match decode_request(&body) {
        Ok(Decoded::Prost(r)) => {
            let mut v = r.resource_spans[0].scope_spans[0].spans[0].attributes[0]
                .value
                .clone()
                .unwrap();
            let mut levels = 0;
            while let Some(Value::ArrayValue(a)) = v.value {
                v = a.values.into_iter().next().unwrap();
                levels += 1;
            }
            assert_eq!((levels, v.value), (MAX_DEPTH + 2, Some(Value::IntValue(7))));
        }
        other => panic!("prost reads it: {:?}", other.err()),
    }
    // The message's numbers: MAX_ARRAY_DEPTH levels are read, one more is too deep; what
    // is read is stored whole (the attributes' JSON holds every level).
    let body = nested_array_body(MAX_ARRAY_DEPTH);
    let Ok(Decoded::Prost(r)) = decode_request(&body) else {
        panic!("prost reads {MAX_ARRAY_DEPTH} levels")
    };
    let rows = crate::convert::convert_request(&r, &Default::default()).unwrap();
    let batch = rows.batch.expect("the span is stored");
    let attributes = batch
        .column_by_name(dyeline_model::schema::col::ATTRIBUTES)
        .unwrap()
        .as_string::<i32>()
        .value(0)
        .to_owned();
    let nested = format!(
        "{}7{}",
        "[".repeat(MAX_ARRAY_DEPTH),
        "]".repeat(MAX_ARRAY_DEPTH)
    );
    assert!(
        attributes.contains(&format!("\"deep\":{nested}")),
        "{attributes}"
    );
    // 100,000 levels (prost's limit is on: this would overflow the stack without it).
    for depth in [MAX_ARRAY_DEPTH + 1, 100_000] {
        let body = nested_array_body(depth);
        assert!(body.len() < 2_000_000, "{}", body.len());
        let err = decode_request(&body).err().expect("refused");
        assert_eq!(err, ProtobufError::TooDeep);
        let text = err.to_string();
        assert!(
            text.contains("nested too deep") && text.contains("fixed"),
            "{text}"
        );
    }
}
