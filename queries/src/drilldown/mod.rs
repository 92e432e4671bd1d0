//! Trace drilldown (issue: analyzer, item 5): one trace as a span tree with each span's app,
//! instance, host, colour and decisions, and the cross-colour-hop and missing-decision markers
//! of domain §6.1–2 on the spans they concern. Spans whose parent is not (yet) stored are
//! roots marked `waiting_for_parent`.

use std::collections::{BTreeMap, HashMap};

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use datafusion::prelude::SessionContext;
use dyeline_control::Timeline;
use serde::Serialize;

use crate::analyze::load::{LOAD_COLUMN_COUNT, Loader, load_columns_sql};
use crate::analyze::{AnalyzerConfig, CrossColorHop, MissingDecision, report};
use crate::sql::SqlError;

/// One span of the tree.
#[derive(Clone, Debug, Serialize)]
pub struct SpanNode {
    /// Span id, lower-case hex.
    pub span_id: String,
    /// Parent span id, if any.
    pub parent_span_id: Option<String>,
    /// Span name.
    pub name: String,
    /// SERVER, CLIENT, …
    pub span_kind: String,
    /// RPC, MQ, JOB or null.
    pub traffic_kind: Option<String>,
    /// App (`service.name`).
    pub app: String,
    /// Instance id.
    pub instance: String,
    /// Host name.
    pub host: Option<String>,
    /// blue, green or unknown.
    pub color: String,
    /// channel → colour carried by the span.
    pub decisions: BTreeMap<String, String>,
    /// Start, Unix ns (decimal string).
    pub start_time_unix_nano: String,
    /// Duration, ns.
    pub duration_ns: i64,
    /// UNSET, OK, ERROR.
    pub status_code: String,
    /// Error per domain §6.
    pub is_error: bool,
    /// The parent id is set but that span is not stored (yet).
    pub waiting_for_parent: bool,
    /// This span is the offending end of a cross-colour hop (one per channel).
    pub hops: Vec<CrossColorHop>,
    /// Channels for which this SERVER/CONSUMER span lacks a decision.
    pub missing_decision_channels: Vec<String>,
    /// Child spans, by start time.
    pub children: Vec<SpanNode>,
}

/// A trace with its tree and findings.
#[derive(Clone, Debug, Serialize)]
pub struct TraceView {
    /// Trace id, lower-case hex.
    pub trace_id: String,
    /// Spans stored.
    pub span_count: usize,
    /// Root spans (and spans waiting for their parent), by start.
    pub roots: Vec<SpanNode>,
    /// The trace's hops.
    pub cross_color_hops: Vec<CrossColorHop>,
    /// The trace's missing decisions.
    pub missing_decisions: Vec<MissingDecision>,
}

/// Normalises a trace id given in any case: 32 hex digits → lower case.
///
/// # Errors
/// [`SqlError::Syntax`] for anything else.
pub fn normalize_trace_id(text: &str) -> Result<String, SqlError> {
    let t = text.trim();
    if t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(t.to_ascii_lowercase())
    } else {
        Err(SqlError::Syntax(format!(
            "{text:?} is not a trace id (32 hex digits)"
        )))
    }
}

/// The trace `trace_id` (any case), or `None` when no span of it is stored.
///
/// # Errors
/// [`SqlError::Syntax`] for a malformed id; [`SqlError::Internal`] when the scan fails.
pub async fn trace(
    ctx: &SessionContext,
    timeline: &Timeline,
    config: &AnalyzerConfig,
    trace_id: &str,
) -> Result<Option<TraceView>, SqlError> {
    let id = normalize_trace_id(trace_id)?;
    // One scan: the analyzer's columns (for the hop and missing-decision marks) then the
    // ones the tree shows.
    let sql = format!(
        "SELECT {}, name, host_name, duration_ns, status_code FROM spans WHERE trace_id = '{id}'",
        load_columns_sql()
    );
    let batches = ctx
        .sql(&sql)
        .await
        .map_err(|e| SqlError::Internal(e.to_string()))?
        .collect()
        .await
        .map_err(|e| SqlError::Internal(e.to_string()))?;
    let mut loader = Loader::default();
    for b in &batches {
        loader.push(b)?;
    }
    let spans = loader.finish(timeline);
    if spans.is_empty() {
        return Ok(None);
    }
    let r = report(&spans, config, false);
    let mut nodes: Vec<SpanNode> = Vec::new();
    for b in &batches {
        let s = |i: usize| b.column(i).as_string::<i32>();
        let opt = |i: usize, r: usize| (!b.column(i).is_null(r)).then(|| s(i).value(r).to_owned());
        let x = LOAD_COLUMN_COUNT;
        let start = b.column(9).as_primitive::<Int64Type>();
        let dur = b.column(x + 2).as_primitive::<Int64Type>();
        let err = b.column(10).as_boolean();
        let decisions = b.column(11).as_map();
        for r in 0..b.num_rows() {
            let mut d = BTreeMap::new();
            if !decisions.is_null(r) {
                let e = decisions.value(r);
                let (k, v) = (
                    e.column(0).as_string::<i32>(),
                    e.column(1).as_string::<i32>(),
                );
                for j in 0..e.len() {
                    if !v.is_null(j) {
                        d.insert(k.value(j).to_owned(), v.value(j).to_owned());
                    }
                }
            }
            nodes.push(SpanNode {
                span_id: s(1).value(r).to_owned(),
                parent_span_id: opt(2, r),
                name: s(x).value(r).to_owned(),
                span_kind: s(7).value(r).to_owned(),
                traffic_kind: opt(8, r),
                app: s(3).value(r).to_owned(),
                instance: s(4).value(r).to_owned(),
                host: opt(x + 1, r),
                color: s(5).value(r).to_owned(),
                decisions: d,
                start_time_unix_nano: start.value(r).to_string(),
                duration_ns: dur.value(r),
                status_code: s(x + 3).value(r).to_owned(),
                is_error: err.value(r),
                waiting_for_parent: false,
                hops: Vec::new(),
                missing_decision_channels: Vec::new(),
                children: Vec::new(),
            });
        }
    }
    for n in &mut nodes {
        n.hops = r
            .cross_color_hops
            .iter()
            .filter(|h| h.span_id == n.span_id)
            .cloned()
            .collect();
        n.missing_decision_channels = r
            .missing_decisions
            .iter()
            .filter(|m| m.span_id == n.span_id)
            .map(|m| m.channel.clone())
            .collect();
    }
    nodes.sort_by_key(|n| {
        (
            n.start_time_unix_nano.parse::<i64>().unwrap_or(0),
            n.span_id.clone(),
        )
    });
    let ids: HashMap<String, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.span_id.clone(), i))
        .collect();
    // Attach children bottom-up: parent index per node, then build from the leaves.
    let parent: Vec<Option<usize>> = nodes
        .iter()
        .map(|n| n.parent_span_id.as_ref().and_then(|p| ids.get(p).copied()))
        .collect();
    // A cycle (corrupt data) would hide spans: any node whose ancestor chain loops is a root.
    let mut is_root: Vec<bool> = parent.iter().map(Option::is_none).collect();
    for i in 0..nodes.len() {
        let mut p = parent[i];
        let mut steps = 0;
        while let Some(q) = p {
            steps += 1;
            if steps > nodes.len() {
                is_root[i] = true;
                break;
            }
            p = parent[q];
        }
    }
    for (i, n) in nodes.iter_mut().enumerate() {
        n.waiting_for_parent = n.parent_span_id.is_some() && parent[i].is_none();
    }
    let mut slots: Vec<Option<SpanNode>> = nodes.into_iter().map(Some).collect();
    // Process deepest first so each child is complete when moved into its parent.
    let depth = |i: usize| {
        let mut d = 0;
        let mut p = parent[i];
        while let Some(q) = p {
            d += 1;
            if d > parent.len() {
                break;
            }
            p = parent[q];
        }
        d
    };
    let mut order: Vec<usize> = (0..slots.len()).filter(|&i| !is_root[i]).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(depth(i)));
    for i in order {
        if let (Some(p), Some(node)) = (parent[i], slots[i].take())
            && let Some(parent_node) = slots[p].as_mut()
        {
            parent_node.children.push(node);
        }
    }
    let mut roots: Vec<SpanNode> = slots.into_iter().flatten().collect();
    fn sort(n: &mut SpanNode) {
        n.children.sort_by_key(|c| {
            (
                c.start_time_unix_nano.parse::<i64>().unwrap_or(0),
                c.span_id.clone(),
            )
        });
        n.children.iter_mut().for_each(sort);
    }
    roots.iter_mut().for_each(sort);
    Ok(Some(TraceView {
        trace_id: id,
        span_count: spans.len(),
        roots,
        cross_color_hops: r.cross_color_hops,
        missing_decisions: r.missing_decisions,
    }))
}
