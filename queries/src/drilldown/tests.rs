//! The drilldown over an in-memory `spans` table (the columns it reads): pages put together
//! give the whole trace whichever way its rows were read (kept from the first scan, or
//! filled by a second), the counts say what was left out, and a chain 100,000 spans deep is
//! one flat page at a time.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, UInt32Array};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use dyeline_model::release::Timeline;
use dyeline_model::schema::spans_schema;

use super::*;

const TRACE: &str = "0123456789abcdef0123456789abcdef";

/// A row: (span id, parent id or 0, start).
type Row = (u64, u64, i64);

/// A session whose `spans` holds `rows` of [`TRACE`] (plus one span of another trace), in
/// batches of `batch` rows, all SERVER spans.
fn session(rows: &[Row], batch: usize) -> SessionContext {
    session_of_kinds(rows, batch, &|_| "SERVER")
}

/// [`session`], each row's span kind `kind(row index)`.
fn session_of_kinds(
    rows: &[Row],
    batch: usize,
    kind: &dyn Fn(usize) -> &'static str,
) -> SessionContext {
    let names = [
        "trace_id",
        "span_id",
        "parent_span_id",
        "service_name",
        "instance_id",
        "color",
        "color_rule",
        "span_kind",
        "traffic_kind",
        "start_time_unix_nano",
        "is_error",
        "decisions",
        "decision_source",
        "malformed_pairs",
        "conflicting_channels",
        "end_time_unix_nano",
        "links",
        "lane",
        "lane_rule",
        "lane_invalid_values",
        "lane_tag",
        "lane_tag_source",
        "malformed_lane_tags",
        "name",
        "host_name",
        "duration_ns",
        "status_code",
        "status_message",
        "trace_state",
        "scope_name",
        "scope_version",
        "service_version",
        "deployment_environment",
        "http_status_code",
        "rpc_grpc_status_code",
        "messaging_system",
        "consumer_group",
        "job_name",
        "attributes",
        "resource_attributes",
        "events",
    ];
    let full = spans_schema();
    let idx: Vec<usize> = names.iter().map(|n| full.index_of(n).unwrap()).collect();
    let schema = Arc::new(full.project(&idx).unwrap());
    let mut all: Vec<Row> = rows.to_vec();
    all.push((u64::MAX, 0, 1));
    let batches: Vec<RecordBatch> = all
        .chunks(batch.max(1))
        .enumerate()
        .map(|(c, chunk)| {
            let first = c * batch.max(1);
            let n = chunk.len();
            let text = |f: &dyn Fn(usize, &Row) -> Option<String>| -> ArrayRef {
                Arc::new(
                    chunk
                        .iter()
                        .enumerate()
                        .map(|(i, r)| f(i, r))
                        .collect::<StringArray>(),
                )
            };
            let other = |r: &Row| r.0 == u64::MAX;
            let cols: Vec<ArrayRef> = vec![
                text(&|_, r| {
                    Some(if other(r) {
                        "f".repeat(32)
                    } else {
                        TRACE.to_owned()
                    })
                }),
                text(&|_, r| Some(format!("{:016x}", r.0))),
                text(&|_, r| (r.1 != 0).then(|| format!("{:016x}", r.1))),
                text(&|_, _| Some("order".into())),
                text(&|_, _| Some("order-1".into())),
                text(&|_, r| {
                    Some(
                        if r.0 >= 1000 && !other(r) {
                            "green"
                        } else {
                            "blue"
                        }
                        .into(),
                    )
                }),
                text(&|_, _| Some("none".into())),
                text(&|i, _| Some(kind(first + i).into())),
                text(&|_, _| Some("RPC".into())),
                Arc::new(chunk.iter().map(|r| r.2).collect::<Int64Array>()),
                Arc::new(BooleanArray::from(vec![false; n])),
                arrow::array::new_null_array(schema.field(11).data_type(), n),
                text(&|_, _| None),
                Arc::new(UInt32Array::from(vec![0; n])),
                arrow::array::new_null_array(schema.field(14).data_type(), n),
                Arc::new(chunk.iter().map(|r| r.2 + 10).collect::<Int64Array>()),
                text(&|_, _| None),
                // The lane columns: spans stored before lanes were read.
                arrow::array::new_null_array(schema.field(17).data_type(), n),
                arrow::array::new_null_array(schema.field(18).data_type(), n),
                arrow::array::new_null_array(schema.field(19).data_type(), n),
                arrow::array::new_null_array(schema.field(20).data_type(), n),
                arrow::array::new_null_array(schema.field(21).data_type(), n),
                arrow::array::new_null_array(schema.field(22).data_type(), n),
                text(&|i, r| Some(format!("span {:x} of batch {c} row {i}", r.0))),
                text(&|_, _| Some("host-blue-1".into())),
                Arc::new(Int64Array::from(vec![10; n])),
                text(&|_, _| Some("OK".into())),
                text(&|_, r| (r.2 % 2 == 1).then(|| format!("odd start {}", r.2))),
                text(&|_, _| None),
                text(&|_, _| Some("io.test".into())),
                text(&|_, _| None),
                text(&|_, _| Some("1.4.2".into())),
                text(&|_, _| Some("production".into())),
                Arc::new(arrow::array::Int32Array::from(vec![Some(200); n])),
                arrow::array::new_null_array(schema.field(34).data_type(), n),
                text(&|_, _| None),
                text(&|_, _| None),
                text(&|_, _| None),
                text(&|_, r| Some(format!(r#"{{"span.n":{},"z":"last"}}"#, r.0))),
                text(&|_, _| Some(r#"{"k8s.pod.name":"order-1-abc"}"#.into())),
                text(&|_, r| {
                    Some(format!(
                        r#"[{{"time_unix_nano":"{}","name":"tick","attributes":{{}}}}]"#,
                        r.2 + 1
                    ))
                }),
            ];
            RecordBatch::try_new(Arc::clone(&schema), cols).unwrap()
        })
        .collect();
    let ctx = SessionContext::new();
    let table = MemTable::try_new(schema, vec![batches]).unwrap();
    ctx.register_table("spans", Arc::new(table)).unwrap();
    ctx
}

async fn view(ctx: &SessionContext, offset: usize, limit: usize) -> TraceView {
    view_in(ctx, &Timeline::default(), offset, limit).await
}

async fn view_in(
    ctx: &SessionContext,
    timeline: &Timeline,
    offset: usize,
    limit: usize,
) -> TraceView {
    trace(
        ctx,
        timeline,
        &crate::analyze::config::LaneWindows::default(),
        &TRACE.to_ascii_uppercase(),
        TracePage { offset, limit },
    )
    .await
    .unwrap()
    .expect("the trace is stored")
}

/// (span id, depth, waiting) of a view's spans.
fn shape(v: &TraceView) -> Vec<(String, usize, bool)> {
    v.spans
        .iter()
        .map(|s| (s.span_id.clone(), s.depth, s.waiting_for_parent))
        .collect()
}

#[tokio::test]
async fn pages_read_either_way_make_up_the_whole_trace() {
    // root 1 → 2 → 3; 1 → 4 (earlier than 2); 5's parent is absent; 6 ↔ 7 loop; 2 twice.
    let rows: Vec<Row> = vec![
        (3, 2, 30),
        (1, 0, 10),
        (2, 1, 20),
        (4, 1, 15),
        (5, 99, 12),
        (6, 7, 40),
        (7, 6, 41),
        (2, 1, 21),
    ];
    let ctx = session(&rows, 3);
    let whole = view(&ctx, 0, 100).await;
    assert_eq!(
        (
            whole.span_count,
            whole.returned,
            whole.left_out,
            whole.next_offset
        ),
        (8, 8, 0, None)
    );
    let id = |n: u64| format!("{n:016x}");
    assert_eq!(
        shape(&whole),
        vec![
            (id(1), 0, false),
            (id(4), 1, false),
            (id(2), 1, false),
            (id(3), 2, false),
            (id(2), 1, false),
            (id(5), 0, true),
            (id(6), 0, false),
            (id(7), 0, false),
        ]
    );
    // Each copy of span 2 keeps its own row (by start).
    assert_eq!(whole.spans[2].start_time_unix_nano, "20");
    assert_eq!(whole.spans[4].start_time_unix_nano, "21");
    assert_eq!(
        (whole.spans[0].host.as_deref(), whole.spans[0].duration_ns),
        (Some("host-blue-1"), 10)
    );
    assert_eq!(
        (
            whole.start_time_unix_nano.as_str(),
            whole.end_time_unix_nano.as_str(),
            whole.max_depth
        ),
        ("10", "51", 2)
    );
    // Spans stored before lanes were read are base; a root's request is meant for base, the
    // span whose parent is absent cannot be told (domain §7.2), and nothing is marked.
    let intended: Vec<Option<&str>> = whole
        .spans
        .iter()
        .map(|s| s.intended_lane.as_deref())
        .collect();
    assert_eq!(intended[0], Some("base"));
    assert_eq!(intended[5], Some("undetermined"));
    assert!(
        whole
            .spans
            .iter()
            .all(|s| s.lane == "base" && s.lane_tag.is_none() && s.lane_marks.is_empty()),
        "{:?}",
        whole.spans
    );
    assert_eq!(whole.lane_mark_span_count, 0);
    // Each row's detail is its own: the promoted status code under its OpenTelemetry key
    // first, then the stored attributes by key; the resource's version then the rest; the
    // event at its time; a status message only where one was stored.
    for s in &whole.spans {
        let n = u64::from_str_radix(&s.span_id, 16).unwrap();
        let attrs: Vec<(String, String)> = s
            .attributes
            .iter()
            .map(|a| (a.key.clone(), a.text()))
            .collect();
        assert_eq!(
            attrs,
            vec![
                ("http.response.status_code".to_owned(), "200".to_owned()),
                ("span.n".to_owned(), n.to_string()),
                ("z".to_owned(), "last".to_owned()),
            ]
        );
        let resource: Vec<&str> = s
            .resource_attributes
            .iter()
            .map(|a| a.key.as_str())
            .collect();
        assert_eq!(
            resource,
            vec![
                "service.version",
                "deployment.environment.name",
                "k8s.pod.name"
            ]
        );
        let start: i64 = s.start_time_unix_nano.parse().unwrap();
        assert_eq!(s.events.len(), 1);
        assert_eq!(s.events[0].time_unix_nano, (start + 1).to_string());
        assert_eq!(
            s.status_message,
            (start % 2 == 1).then(|| format!("odd start {start}"))
        );
        assert_eq!(s.scope_name.as_deref(), Some("io.test"));
        assert!(s.links.is_empty() && s.trace_state.is_none());
    }
    // Pages of 3 (a second scan fills them): the same spans, rows and all.
    let mut paged = Vec::new();
    let mut offset = Some(0);
    while let Some(o) = offset {
        let p = view(&ctx, o, 3).await;
        assert_eq!((p.offset, p.limit, p.span_count), (o, 3, 8));
        assert_eq!(p.left_out, 8 - p.returned);
        offset = p.next_offset;
        paged.extend(p.spans);
    }
    let json = |s: &[SpanNode]| serde_json::to_string(s).unwrap();
    assert_eq!(json(&paged), json(&whole.spans));
    // Past the end: nothing returned, everything left out.
    let past = view(&ctx, 50, 3).await;
    assert_eq!(
        (past.offset, past.returned, past.left_out, past.next_offset),
        (8, 0, 8, None)
    );
    // Another trace id: none.
    let none = trace(
        &ctx,
        &Timeline::default(),
        &crate::analyze::config::LaneWindows::default(),
        &"e".repeat(32),
        TracePage {
            offset: 0,
            limit: 3,
        },
    )
    .await
    .unwrap();
    assert!(none.is_none());
}

/// A chain 100,000 spans deep, stored leaf first: each page of 10,000 holds the next depths,
/// serialises flat (one span's JSON a bounded size, not nested), and the whole view is built without recursion.
#[tokio::test]
async fn a_chain_100_000_deep_is_viewed_a_flat_page_at_a_time() {
    const N: u64 = 100_000;
    let rows: Vec<Row> = (1..=N).rev().map(|i| (i, i - 1, i as i64)).collect();
    let ctx = session(&rows, 8192);
    for offset in [0usize, 90_000] {
        let v = view(&ctx, offset, 10_000).await;
        assert_eq!(
            (v.span_count, v.returned, v.left_out, v.max_depth),
            (N as usize, 10_000, 90_000, N as usize - 1)
        );
        for (k, s) in v.spans.iter().enumerate() {
            assert_eq!(
                (s.depth, s.span_id.clone()),
                (offset + k, format!("{:016x}", offset + k + 1))
            );
        }
        // Flat and bounded: each span's row, its three attributes, two resource attributes
        // and one event come to about 880 bytes.
        let json = serde_json::to_string(&v).unwrap();
        assert!(json.len() < 10 << 20, "{} bytes", json.len());
    }
}

/// Channel `trade` holding `order`, releasing at 50 since time 0.
fn trade_releasing() -> Timeline {
    use dyeline_model::ChannelId;
    use dyeline_model::release::{Channels, Op};
    let id = ChannelId::new("trade").unwrap();
    let mut initial = Channels::new();
    initial.apply(&id, &Op::Apps(vec!["order".into()]));
    Timeline::from_ops(
        initial,
        vec![(0, id.clone(), Op::Start), (0, id, Op::Ratio(50))],
    )
}

/// In a releasing channel, the green children of a blue root are hops: a page carries the
/// marks of its own spans, and the counts are the whole trace's.
#[tokio::test]
async fn a_page_marks_its_own_spans_and_counts_the_whole_traces() {
    let timeline = trade_releasing();
    // Root 1 (blue), children 1000..1005 (green), by start.
    let mut rows: Vec<Row> = vec![(1, 0, 10)];
    rows.extend((1000..1005).map(|i| (i, 1, i as i64)));
    let ctx = session(&rows, 2);
    let v = view_in(&ctx, &timeline, 2, 2).await;
    assert_eq!(
        (
            v.cross_color_hop_count,
            v.hop_span_count,
            v.missing_decision_count,
            v.missing_decision_span_count
        ),
        (5, 5, 6, 6)
    );
    let ids: Vec<&str> = v.spans.iter().map(|s| s.span_id.as_str()).collect();
    assert_eq!(ids, ["00000000000003e9", "00000000000003ea"]);
    assert!(
        v.spans
            .iter()
            .all(|s| s.hops.len() == 1 && s.missing_decision_channels == ["trade"])
    );
    assert_eq!(v.spans[0].hops[0].to_color.as_str(), "green");
    let listed: Vec<&str> = v
        .cross_color_hops
        .iter()
        .map(|h| h.span_id.as_str())
        .collect();
    assert_eq!(listed, ids);
    assert_eq!(v.missing_decisions.len(), 2);
}

/// Zipkin/B3: the SERVER half of a shared span id sits under its CLIENT half, the callee's
/// spans under the SERVER half; both halves start together here and each keeps its own row,
/// and only the SERVER half carries its findings.
#[tokio::test]
async fn the_halves_of_a_shared_span_id_are_two_rows_the_server_one_under_the_client_one() {
    let timeline = trade_releasing();
    // 1 root SERVER; 2 CLIENT and 2 SERVER (no parent recorded), same start; 3 under id 2.
    let rows: Vec<Row> = vec![(1, 0, 10), (2, 1, 20), (2, 0, 20), (3, 2, 30)];
    let kinds = ["SERVER", "CLIENT", "SERVER", "SERVER"];
    for batch in [1, 10] {
        let ctx = session_of_kinds(&rows, batch, &|i| kinds.get(i).copied().unwrap_or("SERVER"));
        // Whole, and a page of two filled by a second scan.
        for (offset, limit) in [(0, 10), (1, 2)] {
            let v = view_in(&ctx, &timeline, offset, limit).await;
            let got: Vec<(String, usize, &str, bool)> = v
                .spans
                .iter()
                .map(|s| {
                    (
                        s.span_id.clone(),
                        s.depth,
                        s.span_kind.as_str(),
                        s.waiting_for_parent,
                    )
                })
                .collect();
            let id = |n: u64| format!("{n:016x}");
            let all = [
                (id(1), 0, "SERVER", false),
                (id(2), 1, "CLIENT", false),
                (id(2), 2, "SERVER", false),
                (id(3), 3, "SERVER", false),
            ];
            assert_eq!(got, all[offset..(offset + limit).min(4)], "batch {batch}");
            // No SERVER span carries a decision (the root, the SERVER half of 2, span 3).
            assert_eq!(v.missing_decision_count, 3);
            for s in &v.spans {
                let expected: &[&str] = if s.span_kind == "CLIENT" {
                    &[]
                } else {
                    &["trade"]
                };
                assert_eq!(s.missing_decision_channels, expected, "{}", s.span_id);
            }
        }
    }
}
