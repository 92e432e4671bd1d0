//! Trace drilldown (issue: analyzer, item 5; hardening, issue 23 item 1): one trace as a flat
//! span tree ([`tree`]: depth-first, each span with its depth) with each span's app,
//! instance, host, colour and decisions, and the cross-colour-hop and missing-decision markers
//! of domain §6.1–2 on the spans they concern. Spans whose parent is not (yet) stored are
//! roots marked `waiting_for_parent`.
//!
//! **Bounded.** A view holds one page of the tree ([`TracePage`]: an offset into the
//! depth-first order and a span limit the caller caps): only the page's spans are
//! materialised with their strings, serialised and rendered, and the view says how many
//! spans the trace has and how many it left out. The tree's shape and the hop analysis read
//! every span of the trace as compact records (80 bytes each, no strings per span). Nothing
//! here recurses over the trace: building, ordering and flattening use explicit stacks and
//! single parent walks, and the result is flat (no nested `children`), so serialising and
//! dropping it do not recurse either.

pub(crate) mod lanes;
pub mod tree;

use std::collections::{BTreeMap, HashMap, HashSet};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Int64Type};
use datafusion::prelude::SessionContext;
use dyeline_model::SpanKind;
use dyeline_model::release::Timeline;
use futures::StreamExt;
use serde::Serialize;
use utoipa::ToSchema;

use crate::analyze::config::LaneWindows;
use crate::analyze::detect::lanes::Covered;
use crate::analyze::detect::lanes::LaneMark;
use crate::analyze::detect::traces::{FindCounts, find_some};
use crate::analyze::findings::{CrossColorHop, MissingDecision, hex64};
use crate::analyze::read::columns::load_columns_sql;
use crate::analyze::read::loader::Loader;
use crate::analyze::spans::Spans;
use crate::span_detail;
use crate::sql::SqlError;
use tree::{TreeSpan, tree_order};

/// One span of the tree, in depth-first order.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct SpanNode {
    /// Span id, lower-case hex.
    pub span_id: String,
    /// Parent span id, if any.
    pub parent_span_id: Option<String>,
    /// Ancestors above it in the tree (0 for a root).
    pub depth: usize,
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
    /// The lane of its instance (domain §7.1; `base` for spans stored before lanes were
    /// read).
    pub lane: String,
    /// The lane tag it carries, if any.
    pub lane_tag: Option<String>,
    /// Its intended lane (domain §7.2) for an entry span: a lane, or `undetermined`.
    pub intended_lane: Option<String>,
    /// The lane group of its app at its start (none: the app was in no group).
    pub lane_group: Option<String>,
    /// What the lane rules found of this span (domain §7.3): a finding on it (`lane_leak`,
    /// `lane_tag_dropped`, `lane_pollution`, `lane_tag_changed`, as `dyeline analyze` writes
    /// them) or an outcome the analyzer counts (`lane_fallback`, `failover`,
    /// `reverse_fallback`, `tag_not_recorded`), each with its `type`.
    pub lane_marks: Vec<LaneMark>,
    /// Its status message (the description of an ERROR status), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// Its W3C trace state, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_state: Option<String>,
    /// The instrumentation scope (name and version) that made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope_name: Option<String>,
    /// The scope's version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope_version: Option<String>,
    /// Its attributes: the promoted ones under their OpenTelemetry keys
    /// ([`span_detail::PROMOTED_SPAN`]), then the others by key.
    pub attributes: Vec<span_detail::Attribute>,
    /// Its resource's attributes: `service.version`, then those not shown as columns, by key.
    pub resource_attributes: Vec<span_detail::Attribute>,
    /// Its events, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<span_detail::SpanEvent>,
    /// Its links, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<span_detail::SpanLink>,
}

/// Which part of a trace's depth-first order a view holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracePage {
    /// Spans skipped from the start of the order.
    pub offset: usize,
    /// Spans returned at most (the caller caps it: the server's `[trace_view] max_spans`).
    pub limit: usize,
}

/// One page of a trace with its findings.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct TraceView {
    /// Trace id, lower-case hex.
    pub trace_id: String,
    /// Spans the trace has stored (all of them, not only this page's).
    pub span_count: usize,
    /// Index in the depth-first order of the first span returned.
    pub offset: usize,
    /// Most spans this view could return.
    pub limit: usize,
    /// Spans returned (`spans`).
    pub returned: usize,
    /// Spans of the trace not returned: `span_count - returned`.
    pub left_out: usize,
    /// The offset of the next page, if spans follow this one.
    pub next_offset: Option<usize>,
    /// The deepest span's depth in the whole trace.
    pub max_depth: usize,
    /// Earliest span start of the trace, Unix ns (decimal string).
    #[schema(value_type = String)]
    pub start_time_unix_nano: String,
    /// Latest span end of the trace, Unix ns (decimal string).
    #[schema(value_type = String)]
    pub end_time_unix_nano: String,
    /// Cross-colour hops in the whole trace.
    pub cross_color_hop_count: usize,
    /// Spans of the whole trace with at least one hop.
    pub hop_span_count: usize,
    /// Missing decisions in the whole trace.
    pub missing_decision_count: usize,
    /// Spans of the whole trace with at least one missing decision.
    pub missing_decision_span_count: usize,
    /// Spans of the whole trace with at least one lane mark.
    pub lane_mark_span_count: usize,
    /// This page's spans, depth-first (roots and spans waiting for their parent by start,
    /// each followed by its children, by start then span id).
    pub spans: Vec<SpanNode>,
    /// The hops of this page's spans.
    pub cross_color_hops: Vec<CrossColorHop>,
    /// The missing decisions of this page's spans.
    pub missing_decisions: Vec<MissingDecision>,
    /// In a cluster: the nodes that did not answer for the trace, whose rows not uploaded
    /// yet are missing from it (left out when every node answered).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes_unheard: Vec<String>,
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

/// The columns a span row shows, read after the analyzer's (`links` and
/// `deployment_environment` are among those).
const SHOWN_COLUMNS: &str = "name, host_name, duration_ns, status_code, status_message, \
     trace_state, scope_name, scope_version, service_version, http_status_code, \
     rpc_grpc_status_code, messaging_system, consumer_group, job_name, attributes, \
     resource_attributes, events";

/// Every column a page's rows are filled from (the second scan of a large trace).
const ROW_COLUMNS: &str = "span_id, parent_span_id, service_name, instance_id, color, span_kind, \
     traffic_kind, start_time_unix_nano, is_error, decisions, links, name, host_name, \
     duration_ns, status_code, status_message, trace_state, scope_name, scope_version, \
     service_version, deployment_environment, http_status_code, rpc_grpc_status_code, \
     messaging_system, consumer_group, job_name, attributes, resource_attributes, events";

fn internal(e: impl std::fmt::Display) -> SqlError {
    SqlError::Internal(e.to_string())
}

/// Runs `sql` and hands each record batch to `f(state, batch)` as it arrives (none is kept
/// here); returns `state`. The whole scan runs on one blocking thread with a runtime of its
/// own, so neither the plan's partitions (which DataFusion spawns as tasks) nor the rows'
/// conversion hold the server's async workers, which answer every other request (`/healthz`
/// among them) meanwhile.
pub(crate) async fn scan<S: Send + 'static>(
    ctx: &SessionContext,
    sql: &str,
    state: S,
    f: fn(&mut S, RecordBatch) -> Result<(), SqlError>,
) -> Result<S, SqlError> {
    let (ctx, sql) = (ctx.clone(), sql.to_owned());
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(internal)?;
        runtime.block_on(async move {
            let mut stream = ctx
                .sql(&sql)
                .await
                .map_err(internal)?
                .execute_stream()
                .await
                .map_err(internal)?;
            let mut state = state;
            while let Some(b) = stream.next().await {
                f(&mut state, b.map_err(internal)?)?;
            }
            Ok(state)
        })
    })
    .await
    .map_err(internal)?
}

/// What the first scan gathers: every span's record, and the batches while they hold no
/// more rows than a page.
struct First {
    loader: Loader,
    kept: Option<Vec<RecordBatch>>,
    kept_rows: usize,
    limit: usize,
}

impl First {
    fn push(&mut self, b: RecordBatch) -> Result<(), SqlError> {
        self.loader.push(&b)?;
        self.kept_rows += b.num_rows();
        match &mut self.kept {
            Some(k) if self.kept_rows <= self.limit => k.push(b),
            _ => self.kept = None,
        }
        Ok(())
    }
}

/// One page of the trace `trace_id` (any case), or `None` when no span of it is stored.
///
/// The trace is scanned once; when it holds more spans than `page.limit`, its rows are not
/// kept from that scan, and a second scan fills in the page's rows only. The rows are read,
/// the tree built and the findings made on blocking threads, not on the caller's async
/// worker.
///
/// # Errors
/// [`SqlError::Syntax`] for a malformed id; [`SqlError::Internal`] when a scan fails.
pub async fn trace(
    ctx: &SessionContext,
    timeline: &Timeline,
    lane_windows: &LaneWindows,
    trace_id: &str,
    page: TracePage,
) -> Result<Option<TraceView>, SqlError> {
    let id = normalize_trace_id(trace_id)?;
    let started = std::time::Instant::now();
    let sql = format!(
        "SELECT {}, {SHOWN_COLUMNS} FROM spans WHERE trace_id = '{id}'",
        load_columns_sql()
    );
    let first = First {
        loader: Loader::default(),
        kept: Some(Vec::new()),
        kept_rows: 0,
        limit: page.limit,
    };
    let first = scan(ctx, &sql, first, First::push).await?;
    let scanned = started.elapsed();
    let timeline = timeline.clone();
    let First { loader, kept, .. } = first;
    let had_every_row = kept.is_some();
    let spans = tokio::task::spawn_blocking(move || loader.finish(&timeline))
        .await
        .map_err(internal)?;
    let around = lanes::around(ctx, &spans, lane_windows).await?;
    let lane_windows = lane_windows.clone();
    let mut shaped = tokio::task::spawn_blocking(move || {
        let mut s = Shaped::new(&spans, &lane_windows, &around, page)?;
        // A small trace: its rows are at hand.
        for b in kept.iter().flatten() {
            s.fill(b)?;
        }
        Ok::<_, SqlError>(s)
    })
    .await
    .map_err(internal)??;
    if !had_every_row && !shaped.wanted.is_empty() {
        let sql = format!("SELECT {ROW_COLUMNS} FROM spans WHERE trace_id = '{id}'");
        shaped = scan(ctx, &sql, shaped, |s, b| s.fill(&b)).await?;
    }
    if shaped.span_count == 0 {
        return Ok(None);
    }
    let view = shaped.view(id);
    tracing::debug!(
        trace_id = %view.trace_id,
        spans = view.span_count,
        returned = view.returned,
        scan_ms = scanned.as_secs_f64() * 1e3,
        total_ms = started.elapsed().as_secs_f64() * 1e3,
        "trace view"
    );
    Ok(Some(view))
}

/// A trace read: its shape, findings and the page's rows as they are filled.
struct Shaped {
    span_count: usize,
    max_depth: usize,
    start: i64,
    end: i64,
    offset: usize,
    limit: usize,
    next_offset: Option<usize>,
    /// The page's spans (depth, waiting for parent), in order.
    placed: Vec<tree::Placed>,
    /// Page positions not yet filled, by (span id, start, a SERVER span), each list taken
    /// from the back.
    wanted: HashMap<RowKey, Vec<usize>>,
    rows: Vec<Option<SpanNode>>,
    /// The findings of the page's span ids, in time order.
    hops: Vec<CrossColorHop>,
    missing: Vec<MissingDecision>,
    /// The trace's findings counted.
    counts: FindCounts,
    /// Findings by span id (indices into `hops` / `missing`).
    hops_of: HashMap<u64, Vec<usize>>,
    missing_of: HashMap<u64, Vec<usize>>,
    /// The lane side of the page's spans, in page order, and of the trace.
    lanes: lanes::ViewLanes,
}

/// What a page row is matched by: (span id, start, is a SERVER span): the two halves of a
/// Zipkin/B3 shared span id may start together.
type RowKey = (u64, i64, bool);

/// A finding's span id as a number (0 when not hex, which no stored span id is).
fn span_number(hex: &str) -> u64 {
    let mut id = [0u8; 8];
    match const_hex::decode_to_slice(hex, &mut id) {
        Ok(()) => u64::from_be_bytes(id),
        Err(_) => 0,
    }
}

impl Shaped {
    /// The tree, findings and page of `spans` (one trace; no page rows yet), the lane marks
    /// judged with the signals `around` it.
    fn new(
        spans: &Spans,
        lane_windows: &LaneWindows,
        around: &[Covered],
        page: TracePage,
    ) -> Result<Self, SqlError> {
        let tree_spans: Vec<TreeSpan> = spans
            .iter()
            .map(|s| TreeSpan {
                span: s.span,
                parent: s.parent.map(std::num::NonZeroU64::get),
                start: s.start,
                server: s.kind == crate::analyze::spans::Kind::Server,
            })
            .collect();
        let shape = tree_order(&tree_spans);
        let n = tree_spans.len();
        let from = page.offset.min(n);
        let to = page.offset.saturating_add(page.limit).min(n);
        let placed = shape.placed[from..to].to_vec();
        let mut wanted: HashMap<RowKey, Vec<usize>> = HashMap::with_capacity(placed.len());
        for (pos, p) in placed.iter().enumerate().rev() {
            let s = &tree_spans[p.index];
            wanted
                .entry((s.span, s.start, s.server))
                .or_default()
                .push(pos);
        }
        // The findings of the page's spans only (a trace of 200,000 hops would otherwise
        // hold 200,000 of them in strings); all are counted.
        let on_page: HashSet<u64> = placed.iter().map(|p| tree_spans[p.index].span).collect();
        let (mut hops, mut missing) = (Vec::new(), Vec::new());
        let counts = find_some(spans, &|id| on_page.contains(&id), &mut hops, &mut missing);
        drop(on_page);
        let mut hops_of: HashMap<u64, Vec<usize>> = HashMap::new();
        for (k, h) in hops.iter().enumerate() {
            hops_of.entry(span_number(&h.span_id)).or_default().push(k);
        }
        let mut missing_of: HashMap<u64, Vec<usize>> = HashMap::new();
        for (k, m) in missing.iter().enumerate() {
            missing_of
                .entry(span_number(&m.span_id))
                .or_default()
                .push(k);
        }
        let lanes = lanes::view_lanes(spans, lane_windows, around, placed.iter().map(|p| p.index));
        let start = spans.iter().map(|s| s.start).min().unwrap_or(0);
        let end = spans
            .iter()
            .map(|s| s.end)
            .max()
            .unwrap_or(start)
            .max(start);
        Ok(Self {
            span_count: n,
            max_depth: shape.max_depth,
            start,
            end,
            offset: from,
            limit: page.limit,
            next_offset: (to < n).then_some(to),
            rows: vec![None; placed.len()],
            placed,
            wanted,
            hops,
            missing,
            counts,
            hops_of,
            missing_of,
            lanes,
        })
    }

    /// Fills the page's rows that `b` holds.
    fn fill(&mut self, b: &RecordBatch) -> Result<(), SqlError> {
        if self.wanted.is_empty() {
            return Ok(());
        }
        fill_rows(b, &mut self.wanted, &mut self.rows, &self.placed)
    }

    /// The view: the filled rows with their marks, and the counts.
    fn view(&mut self, trace_id: String) -> TraceView {
        let mut page_hops = Vec::new();
        let mut page_missing = Vec::new();
        let mut nodes: Vec<SpanNode> = Vec::with_capacity(self.rows.len());
        let rows = std::mem::take(&mut self.rows).into_iter().enumerate();
        for (pos, mut node) in rows.filter_map(|(pos, r)| Some((pos, r?))) {
            if let Some(l) = self.lanes.rows.get_mut(pos) {
                node.lane = std::mem::take(&mut l.lane);
                node.lane_tag = l.tag.take();
                node.intended_lane = l.intended.take();
                node.lane_group = l.group.take();
                node.lane_marks = std::mem::take(&mut l.marks);
            }
            // Findings are of SERVER and CONSUMER spans only: the CLIENT half of a shared
            // span id takes none of its SERVER half's.
            let judged = [SpanKind::Server, SpanKind::Consumer]
                .iter()
                .any(|k| k.as_str() == node.span_kind);
            if !judged {
                nodes.push(node);
                continue;
            }
            let id = span_number(&node.span_id);
            if let Some(ks) = self.hops_of.get(&id) {
                node.hops = ks.iter().map(|&k| self.hops[k].clone()).collect();
                page_hops.extend(ks.iter().copied());
            }
            if let Some(ks) = self.missing_of.get(&id) {
                node.missing_decision_channels = ks
                    .iter()
                    .map(|&k| self.missing[k].channel.clone())
                    .collect();
                page_missing.extend(ks.iter().copied());
            }
            nodes.push(node);
        }
        // A span id on the page twice takes its findings twice; the page lists them once.
        page_hops.sort_unstable();
        page_hops.dedup();
        page_missing.sort_unstable();
        page_missing.dedup();
        let returned = nodes.len();
        TraceView {
            trace_id,
            span_count: self.span_count,
            offset: self.offset,
            limit: self.limit,
            returned,
            left_out: self.span_count - returned,
            next_offset: self.next_offset,
            max_depth: self.max_depth,
            start_time_unix_nano: self.start.to_string(),
            end_time_unix_nano: self.end.to_string(),
            cross_color_hop_count: self.counts.hops,
            hop_span_count: self.counts.hop_spans,
            missing_decision_count: self.counts.missing,
            missing_decision_span_count: self.counts.missing_spans,
            lane_mark_span_count: self.lanes.marked_spans,
            spans: nodes,
            cross_color_hops: page_hops.iter().map(|&k| self.hops[k].clone()).collect(),
            missing_decisions: page_missing
                .iter()
                .map(|&k| self.missing[k].clone())
                .collect(),
            nodes_unheard: Vec::new(),
        }
    }
}

/// A string column of `b` by name as plain strings (a dictionary-encoded one is cast).
fn strings(b: &RecordBatch, name: &str) -> Result<ArrayRef, SqlError> {
    let c = b
        .column_by_name(name)
        .ok_or_else(|| internal(format!("no column {name}")))?;
    if c.data_type() == &DataType::Utf8 {
        Ok(c.clone())
    } else {
        arrow::compute::cast(c, &DataType::Utf8).map_err(internal)
    }
}

/// Fills the page's rows found in `b` (matched by span id, start and SERVER or not) from its
/// columns.
fn fill_rows(
    b: &RecordBatch,
    wanted: &mut HashMap<RowKey, Vec<usize>>,
    rows: &mut [Option<SpanNode>],
    placed: &[tree::Placed],
) -> Result<(), SqlError> {
    let typed = |name: &str| internal(format!("unexpected type of column {name}"));
    let ints = |name: &str| {
        b.column_by_name(name)
            .and_then(|c| c.as_primitive_opt::<Int64Type>())
            .ok_or_else(|| typed(name))
    };
    let span_ids = strings(b, "span_id")?;
    let span_ids = span_ids.as_string::<i32>();
    let start = ints("start_time_unix_nano")?;
    let kinds = strings(b, "span_kind")?;
    let kinds = kinds.as_string::<i32>();
    // The rows of this batch on the page, and where they go.
    let mut hits: Vec<(usize, usize, u64)> = Vec::new();
    for r in 0..b.num_rows() {
        if span_ids.is_null(r) {
            continue;
        }
        let mut id = [0u8; 8];
        if const_hex::decode_to_slice(span_ids.value(r), &mut id).is_err() {
            continue;
        }
        let server = !kinds.is_null(r) && dyeline_model::SpanKey::is_server_text(kinds.value(r));
        let key = (u64::from_be_bytes(id), start.value(r), server);
        if let Some(positions) = wanted.get_mut(&key) {
            if let Some(pos) = positions.pop() {
                hits.push((r, pos, key.0));
            }
            if positions.is_empty() {
                wanted.remove(&key);
            }
        }
    }
    if hits.is_empty() {
        return Ok(());
    }
    let cols: Vec<ArrayRef> = [
        "parent_span_id",
        "service_name",
        "instance_id",
        "color",
        "span_kind",
        "traffic_kind",
        "name",
        "host_name",
        "status_code",
        "status_message",
        "trace_state",
        "scope_name",
        "scope_version",
        "service_version",
        "deployment_environment",
        "attributes",
        "resource_attributes",
        "events",
        "links",
    ]
    .iter()
    .map(|n| strings(b, n))
    .collect::<Result<_, _>>()?;
    let s: Vec<&StringArray> = cols.iter().map(|c| c.as_string::<i32>()).collect();
    let [
        parent,
        app,
        instance,
        color,
        kind,
        traffic,
        name,
        host,
        status,
        status_message,
        trace_state,
        scope_name,
        scope_version,
        service_version,
        environment,
        attributes,
        resource_attributes,
        events,
        links,
    ] = s[..]
    else {
        unreachable!("nineteen columns")
    };
    let promoted = Promoted::of(b)?;
    let opt = |a: &StringArray, r: usize| (!a.is_null(r)).then(|| a.value(r).to_owned());
    let text = |a: &StringArray, r: usize| opt(a, r).unwrap_or_default();
    let duration = ints("duration_ns")?;
    let is_error = b
        .column_by_name("is_error")
        .and_then(|c| c.as_boolean_opt())
        .ok_or_else(|| typed("is_error"))?;
    let decisions = b
        .column_by_name("decisions")
        .and_then(|c| c.as_map_opt())
        .ok_or_else(|| typed("decisions"))?;
    let keys = strings_of(decisions.keys()).ok_or_else(|| typed("decisions"))?;
    let vals = strings_of(decisions.values()).ok_or_else(|| typed("decisions"))?;
    let offsets = decisions.value_offsets();
    for (r, pos, span) in hits {
        let mut d = BTreeMap::new();
        if !decisions.is_null(r) {
            for j in offsets[r] as usize..offsets[r + 1] as usize {
                if !vals.is_null(j) {
                    d.insert(keys.value(j).to_owned(), vals.value(j).to_owned());
                }
            }
        }
        let p = placed[pos];
        rows[pos] = Some(SpanNode {
            span_id: hex64(span),
            parent_span_id: opt(parent, r),
            depth: p.depth,
            name: text(name, r),
            span_kind: text(kind, r),
            traffic_kind: opt(traffic, r),
            app: text(app, r),
            instance: text(instance, r),
            host: opt(host, r),
            color: text(color, r),
            decisions: d,
            start_time_unix_nano: start.value(r).to_string(),
            duration_ns: if duration.is_null(r) {
                0
            } else {
                duration.value(r)
            },
            status_code: text(status, r),
            is_error: !is_error.is_null(r) && is_error.value(r),
            waiting_for_parent: p.waiting_for_parent,
            hops: Vec::new(),
            missing_decision_channels: Vec::new(),
            lane: String::new(),
            lane_tag: None,
            intended_lane: None,
            lane_group: None,
            lane_marks: Vec::new(),
            status_message: opt(status_message, r).filter(|m| !m.is_empty()),
            trace_state: opt(trace_state, r).filter(|t| !t.is_empty()),
            scope_name: opt(scope_name, r).filter(|n| !n.is_empty()),
            scope_version: opt(scope_version, r).filter(|v| !v.is_empty()),
            attributes: promoted
                .attributes(r)
                .into_iter()
                .chain(span_detail::attributes(
                    attributes.is_valid(r).then(|| attributes.value(r)),
                ))
                .collect(),
            resource_attributes: [
                ("service.version", opt(service_version, r)),
                ("deployment.environment.name", opt(environment, r)),
            ]
            .into_iter()
            .filter_map(|(key, v)| {
                v.map(|v| span_detail::Attribute {
                    key: key.into(),
                    value: v.into(),
                })
            })
            .chain(span_detail::attributes(
                resource_attributes
                    .is_valid(r)
                    .then(|| resource_attributes.value(r)),
            ))
            .collect(),
            events: span_detail::events(events.is_valid(r).then(|| events.value(r))),
            links: span_detail::links(links.is_valid(r).then(|| links.value(r))),
        });
    }
    Ok(())
}

/// The promoted span attribute columns of a batch ([`span_detail::PROMOTED_SPAN`]).
struct Promoted {
    /// (key, integer column) for the status codes, (key, text column) for the others.
    ints: Vec<(&'static str, arrow::array::Int32Array)>,
    texts: Vec<(&'static str, StringArray)>,
}

impl Promoted {
    fn of(b: &RecordBatch) -> Result<Self, SqlError> {
        let (mut ints, mut texts) = (Vec::new(), Vec::new());
        for p in span_detail::promoted_span_columns() {
            if p.integer {
                let c = b
                    .column_by_name(p.column)
                    .ok_or_else(|| internal(format!("no column {}", p.column)))?;
                let c = arrow::compute::cast(c, &DataType::Int32).map_err(internal)?;
                ints.push((
                    p.key,
                    c.as_primitive::<arrow::datatypes::Int32Type>().clone(),
                ));
            } else {
                texts.push((p.key, strings(b, p.column)?.as_string::<i32>().clone()));
            }
        }
        Ok(Self { ints, texts })
    }

    /// Row `r`'s promoted attributes that have a value, in
    /// [`span_detail::promoted_span_columns`]'s order.
    fn attributes(&self, r: usize) -> Vec<span_detail::Attribute> {
        let ints = self
            .ints
            .iter()
            .filter(|(_, c)| c.is_valid(r))
            .map(|(k, c)| span_detail::Attribute {
                key: (*k).to_owned(),
                value: c.value(r).into(),
            });
        let texts = self
            .texts
            .iter()
            .filter(|(_, c)| c.is_valid(r))
            .map(|(k, c)| span_detail::Attribute {
                key: (*k).to_owned(),
                value: c.value(r).into(),
            });
        ints.chain(texts).collect()
    }
}

/// A map's key or value strings (plain or dictionary-encoded).
fn strings_of(a: &ArrayRef) -> Option<StringArray> {
    match a.data_type() {
        DataType::Utf8 => Some(a.as_string::<i32>().clone()),
        _ => arrow::compute::cast(a, &DataType::Utf8)
            .ok()
            .map(|c| c.as_string::<i32>().clone()),
    }
}

#[cfg(test)]
mod tests;
