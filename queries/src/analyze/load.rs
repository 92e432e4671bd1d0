//! Reading the spans the analyzer needs: one DataFusion scan of `spans` (columns projected,
//! start time filtered and pruned by hour) into compact per-span records with interned app,
//! instance and channel names, and each span's effective channel from the timeline.

use std::collections::HashMap;

use arrow::array::{
    Array, AsArray, BooleanArray, Int64Array, ListArray, MapArray, StringArray, UInt32Array,
};
use datafusion::prelude::SessionContext;
use dyeline_control::Timeline;
use dyeline_model::Color;
use futures::StreamExt;

use crate::sql::SqlError;

/// Names interned as dense `u32` ids.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    /// foldhash: names are looked up once or more per span, SipHash showed in the load time.
    map: HashMap<String, u32, foldhash::fast::RandomState>,
    names: Vec<String>,
}

impl Interner {
    /// The id of `name`, adding it if new.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.map.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.map.insert(name.to_owned(), id);
        self.names.push(name.to_owned());
        id
    }

    /// The id of `name` if known.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.map.get(name).copied()
    }

    /// The name of `id`.
    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// Span kinds the analyzer distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SERVER.
    Server,
    /// CONSUMER.
    Consumer,
    /// CLIENT, PRODUCER, INTERNAL, UNSPECIFIED.
    Other,
}

/// Traffic kinds (domain §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Traffic {
    /// SERVER spans.
    Rpc,
    /// CONSUMER spans.
    Mq,
    /// Scheduled work.
    Job,
}

impl Traffic {
    /// `RPC`, `MQ`, `JOB`.
    pub fn as_str(self) -> &'static str {
        match self {
            Traffic::Rpc => "RPC",
            Traffic::Mq => "MQ",
            Traffic::Job => "JOB",
        }
    }
}

/// One span as the analyzer sees it.
#[derive(Clone, Debug)]
pub struct SpanRec {
    /// Trace id.
    pub trace: u128,
    /// Span id.
    pub span: u64,
    /// Parent span id, if any.
    pub parent: Option<u64>,
    /// App (`service_name`), interned in [`Spans::apps`].
    pub app: u32,
    /// Instance, interned in [`Spans::instances`].
    pub instance: u32,
    /// Instance colour.
    pub color: Color,
    /// SERVER / CONSUMER / other.
    pub kind: Kind,
    /// Traffic kind, if any.
    pub traffic: Option<Traffic>,
    /// Start, Unix ns.
    pub start: i64,
    /// End, Unix ns.
    pub end: i64,
    /// Error per domain §6 (resolved at ingest).
    pub is_error: bool,
    /// Decisions: (channel interned in [`Spans::channels`], colour), first-wins already.
    pub decisions: Vec<(u32, Color)>,
    /// Effective channel of the app at `start` (interned), if any.
    pub channel: Option<u32>,
    /// Effective blue_percent at `start`.
    pub blue_percent: u8,
    /// When the app's effective configuration last changed at or before `start`, Unix ns
    /// (`i64::MIN` if never).
    pub since: i64,
    /// When it next changes after `start` (`i64::MAX` if never).
    pub until: i64,
}

impl SpanRec {
    /// This span's decision for `channel`.
    pub fn decision(&self, channel: u32) -> Option<Color> {
        self.decisions
            .iter()
            .find(|(c, _)| *c == channel)
            .map(|(_, col)| *col)
    }
}

/// A span's decision fields, kept only for `--with-decisions` and the baggage lists.
#[derive(Clone, Debug)]
pub struct DecisionRec {
    /// Index of the span in [`Spans::spans`].
    pub index: usize,
    /// Attribute the decision was read from.
    pub source: String,
    /// Malformed pairs skipped.
    pub malformed_pairs: u32,
    /// Channels given twice with different colours.
    pub conflicting: Vec<String>,
}

/// Every span of the analysed range.
#[derive(Debug, Default)]
pub struct Spans {
    /// The spans, sorted by trace id then start.
    pub spans: Vec<SpanRec>,
    /// Spans that carry a decision source.
    pub decision_recs: Vec<DecisionRec>,
    /// App names.
    pub apps: Interner,
    /// Instance ids.
    pub instances: Interner,
    /// Channel ids (from decisions and the timeline).
    pub channels: Interner,
    /// (instance, app, color, rule) seen.
    pub instance_rules: Vec<(String, String, Color, String)>,
}

impl Spans {
    /// The spans of each trace (they are sorted by trace), one slice per trace.
    pub fn traces(&self) -> impl Iterator<Item = &[SpanRec]> {
        self.spans.chunk_by(|a, b| a.trace == b.trace)
    }
}

fn parse_color(s: &str) -> Color {
    Color::parse(s).unwrap_or(Color::Unknown)
}

fn sql_err(e: impl std::fmt::Display) -> SqlError {
    SqlError::Internal(e.to_string())
}

/// The columns of `spans` the analyzer reads, in the order [`Loader::push`] expects them
/// (a batch may hold more after them).
pub const LOAD_COLUMN_NAMES: [&str; 16] = [
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
];

/// Number of [`LOAD_COLUMN_NAMES`].
pub const LOAD_COLUMN_COUNT: usize = LOAD_COLUMN_NAMES.len();

/// [`LOAD_COLUMN_NAMES`] as a SQL select list.
pub fn load_columns_sql() -> String {
    LOAD_COLUMN_NAMES.join(", ")
}

/// `batch`'s [`LOAD_COLUMN_NAMES`] columns, in that order (a stored batch or file holds the
/// whole `spans` schema in its own order).
///
/// # Errors
/// [`SqlError::Internal`] when a column is missing.
pub fn in_load_order(
    batch: &arrow::array::RecordBatch,
) -> Result<arrow::array::RecordBatch, SqlError> {
    let schema = batch.schema();
    let idx = LOAD_COLUMN_NAMES
        .iter()
        .map(|n| schema.index_of(n).map_err(sql_err))
        .collect::<Result<Vec<_>, _>>()?;
    batch.project(&idx).map_err(sql_err)
}

/// Turns record batches whose first columns are [`LOAD_COLUMN_NAMES`] into [`Spans`].
#[derive(Default)]
pub struct Loader {
    out: Spans,
    /// Colour rule of each span of `out.spans` (same index), interned in `rule_names`.
    span_rules: Vec<u32>,
    rule_names: Interner,
}

impl Loader {
    /// Adds the rows of `batch` (rows with a trace or span id that is not hex are skipped).
    ///
    /// # Errors
    /// [`SqlError::Internal`] when a column has an unexpected type.
    pub fn push(&mut self, batch: &arrow::array::RecordBatch) -> Result<(), SqlError> {
        let s = |i: usize| batch.column(i).as_any().downcast_ref::<StringArray>();
        let cols = (s(0), s(1), s(2), s(3), s(4), s(5), s(6), s(7), s(8));
        let (
            Some(trace),
            Some(span),
            Some(parent),
            Some(app),
            Some(inst),
            Some(color),
            Some(rule),
            Some(kind),
            Some(traffic),
        ) = cols
        else {
            return Err(sql_err("unexpected column types in spans"));
        };
        let start = batch
            .column(9)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| sql_err("start type"))?;
        let is_error = batch
            .column(10)
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| sql_err("is_error type"))?;
        let decisions = batch
            .column(11)
            .as_any()
            .downcast_ref::<MapArray>()
            .ok_or_else(|| sql_err("decisions type"))?;
        let source = batch
            .column(12)
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| sql_err("decision_source type"))?;
        let malformed = batch
            .column(13)
            .as_any()
            .downcast_ref::<UInt32Array>()
            .ok_or_else(|| sql_err("malformed type"))?;
        let conflicting = batch
            .column(14)
            .as_any()
            .downcast_ref::<ListArray>()
            .ok_or_else(|| sql_err("conflicting type"))?;
        let end = batch
            .column(15)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| sql_err("end type"))?;
        // Map and list entries are read through their offsets into the child arrays: taking
        // `value(i)` builds a sliced array per row, which cost more than the rest of the row.
        let dec_offsets = decisions.value_offsets();
        let (Some(dec_keys), Some(dec_vals)) = (
            decisions.keys().as_string_opt::<i32>(),
            decisions.values().as_string_opt::<i32>(),
        ) else {
            return Err(sql_err("decisions entry types"));
        };
        let conf_offsets = conflicting.value_offsets();
        let conf_vals = conflicting
            .values()
            .as_string_opt::<i32>()
            .ok_or_else(|| sql_err("conflicting_channels item type"))?;
        for i in 0..batch.num_rows() {
            let (Ok(t), Ok(sp)) = (
                u128::from_str_radix(trace.value(i), 16),
                u64::from_str_radix(span.value(i), 16),
            ) else {
                continue;
            };
            let parent_id = if parent.is_null(i) {
                None
            } else {
                u64::from_str_radix(parent.value(i), 16)
                    .ok()
                    .filter(|p| *p != 0)
            };
            let app_id = self.out.apps.intern(app.value(i));
            let inst_id = self.out.instances.intern(inst.value(i));
            let col = parse_color(color.value(i));
            let rule_text = if rule.is_null(i) {
                "none"
            } else {
                rule.value(i)
            };
            let rule_id = self.rule_names.intern(rule_text);
            self.span_rules.push(rule_id);
            let k = match kind.value(i) {
                "SERVER" => Kind::Server,
                "CONSUMER" => Kind::Consumer,
                _ => Kind::Other,
            };
            let tr = if traffic.is_null(i) {
                None
            } else {
                match traffic.value(i) {
                    "RPC" => Some(Traffic::Rpc),
                    "MQ" => Some(Traffic::Mq),
                    "JOB" => Some(Traffic::Job),
                    _ => None,
                }
            };
            let mut decs = Vec::new();
            if !decisions.is_null(i) {
                for j in dec_offsets[i] as usize..dec_offsets[i + 1] as usize {
                    if dec_vals.is_null(j) {
                        continue;
                    }
                    let c = parse_color(dec_vals.value(j));
                    if c != Color::Unknown {
                        decs.push((self.out.channels.intern(dec_keys.value(j)), c));
                    }
                }
            }
            let index = self.out.spans.len();
            if !source.is_null(i) {
                let conf: Vec<String> = if conflicting.is_null(i) {
                    Vec::new()
                } else {
                    (conf_offsets[i] as usize..conf_offsets[i + 1] as usize)
                        .filter(|j| !conf_vals.is_null(*j))
                        .map(|j| conf_vals.value(j).to_owned())
                        .collect()
                };
                self.out.decision_recs.push(DecisionRec {
                    index,
                    source: source.value(i).to_owned(),
                    malformed_pairs: malformed.value(i),
                    conflicting: conf,
                });
            }
            self.out.spans.push(SpanRec {
                trace: t,
                span: sp,
                parent: parent_id,
                app: app_id,
                instance: inst_id,
                color: col,
                kind: k,
                traffic: tr,
                start: start.value(i),
                end: end.value(i),
                is_error: is_error.value(i),
                decisions: decs,
                channel: None,
                blue_percent: 50,
                since: i64::MIN,
                until: i64::MAX,
            });
        }
        Ok(())
    }

    /// Spans added so far.
    pub fn len(&self) -> usize {
        self.out.spans.len()
    }

    /// True when no span was added.
    pub fn is_empty(&self) -> bool {
        self.out.spans.is_empty()
    }

    /// Adds the spans of `other` that start in `lo..=hi` (Unix ns), its names re-interned
    /// here; `other` is left as it is (it may be a cached part shared by many loads).
    pub fn absorb(&mut self, other: &Loader, lo: i64, hi: i64) {
        let map = |from: &Interner, to: &mut Interner| -> Vec<u32> {
            (0..from.len() as u32)
                .map(|i| to.intern(from.name(i)))
                .collect()
        };
        let apps = map(&other.out.apps, &mut self.out.apps);
        let instances = map(&other.out.instances, &mut self.out.instances);
        let channels = map(&other.out.channels, &mut self.out.channels);
        let rules = map(&other.rule_names, &mut self.rule_names);
        let recs = &other.out.decision_recs;
        let mut d = 0;
        for (k, s) in other.out.spans.iter().enumerate() {
            while d < recs.len() && recs[d].index < k {
                d += 1;
            }
            if s.start < lo || s.start > hi {
                continue;
            }
            let index = self.out.spans.len();
            if let Some(r) = recs.get(d).filter(|r| r.index == k) {
                self.out
                    .decision_recs
                    .push(DecisionRec { index, ..r.clone() });
            }
            self.out.spans.push(SpanRec {
                app: apps[s.app as usize],
                instance: instances[s.instance as usize],
                decisions: s
                    .decisions
                    .iter()
                    .map(|(c, col)| (channels[*c as usize], *col))
                    .collect(),
                ..s.clone()
            });
            self.span_rules.push(rules[other.span_rules[k] as usize]);
        }
    }

    /// The spans, with each one's effective channel resolved from `timeline` and sorted by
    /// trace ([`resolve`]).
    pub fn finish(self, timeline: &Timeline) -> Spans {
        let Self {
            mut out,
            span_rules,
            rule_names,
        } = self;
        let rules: std::collections::HashSet<(u32, u32, Color, u32), foldhash::fast::RandomState> =
            out.spans
                .iter()
                .zip(&span_rules)
                .map(|(s, r)| (s.instance, s.app, s.color, *r))
                .collect();
        let mut inst: Vec<(String, String, Color, String)> = rules
            .into_iter()
            .map(|(i, a, c, r)| {
                (
                    out.instances.name(i).to_owned(),
                    out.apps.name(a).to_owned(),
                    c,
                    rule_names.name(r).to_owned(),
                )
            })
            .collect();
        // A total order: an instance seen with two colours or rules lists them the same way
        // every run.
        inst.sort_by(|a, b| {
            (&a.0, &a.1, a.2.as_str(), &a.3).cmp(&(&b.0, &b.1, b.2.as_str(), &b.3))
        });
        out.instance_rules = inst;
        resolve(&mut out, timeline);
        out
    }
}

/// Scans `spans` with `from <= start_time_unix_nano < to` and resolves each span's
/// effective channel from `timeline`.
///
/// # Errors
/// [`SqlError::Internal`] when the scan fails.
pub async fn load(
    ctx: &SessionContext,
    timeline: &Timeline,
    from: Option<i64>,
    to: Option<i64>,
) -> Result<Spans, SqlError> {
    let mut filter = Vec::new();
    if let Some(f) = from {
        filter.push(format!("start_time_unix_nano >= {f}"));
    }
    if let Some(t) = to {
        filter.push(format!("start_time_unix_nano < {t}"));
    }
    let where_clause = if filter.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", filter.join(" AND "))
    };
    let sql = format!("SELECT {} FROM spans {where_clause}", load_columns_sql());
    let started = std::time::Instant::now();
    let df = ctx.sql(&sql).await.map_err(sql_err)?;
    let mut stream = df.execute_stream().await.map_err(sql_err)?;
    let mut loader = Loader::default();
    let mut converting = std::time::Duration::ZERO;
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(sql_err)?;
        let convert_started = std::time::Instant::now();
        loader.push(&batch)?;
        converting += convert_started.elapsed();
    }
    let scanned = started.elapsed();
    let out = loader.finish(timeline);
    tracing::debug!(
        spans = out.spans.len(),
        scan_ms = (scanned - converting).as_secs_f64() * 1e3,
        convert_ms = converting.as_secs_f64() * 1e3,
        resolve_ms = (started.elapsed() - scanned).as_secs_f64() * 1e3,
        "load"
    );
    Ok(out)
}

/// Resolves each span's effective channel, blue_percent and the times of the app's
/// surrounding configuration changes from `timeline` (domain §4), then sorts the spans by
/// trace, start and span id (decision records follow).
pub fn resolve(out: &mut Spans, timeline: &Timeline) {
    // Effective channel per span, from each app's changes.
    let mut changes = Vec::with_capacity(out.apps.len());
    for a in 0..out.apps.len() as u32 {
        let c: Vec<(i64, Option<u32>, u8)> = timeline
            .changes(out.apps.name(a))
            .into_iter()
            .map(|ch| {
                (
                    ch.t_unix_nano,
                    ch.effective
                        .channel
                        .map(|id| out.channels.intern(id.as_str())),
                    ch.effective.blue_percent,
                )
            })
            .collect();
        changes.push(c);
    }
    for s in &mut out.spans {
        let c = &changes[s.app as usize];
        let n = c.partition_point(|(t, ..)| *t <= s.start);
        let (since, channel, bp) = c[n.saturating_sub(1)];
        s.channel = channel;
        s.blue_percent = bp;
        s.since = since;
        s.until = c.get(n).map_or(i64::MAX, |x| x.0);
    }
    // Sort by trace, keeping decision indexes valid.
    // The keys sorted side by side (not through the records: that is a cache miss per
    // comparison); the index breaks ties so the order is total and the sort can be unstable.
    let mut keys: Vec<(u128, i64, u64, usize)> = out
        .spans
        .iter()
        .enumerate()
        .map(|(i, s)| (s.trace, s.start, s.span, i))
        .collect();
    keys.sort_unstable();
    let order: Vec<usize> = keys.into_iter().map(|k| k.3).collect();
    let mut new_index = vec![0usize; order.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let mut unsorted: Vec<Option<SpanRec>> = std::mem::take(&mut out.spans)
        .into_iter()
        .map(Some)
        .collect();
    out.spans = order
        .iter()
        .filter_map(|&old| unsorted[old].take())
        .collect();
    for d in &mut out.decision_recs {
        d.index = new_index[d.index];
    }
}
