//! Reading the spans the analyzer needs: one DataFusion scan of `spans` (columns projected,
//! start time filtered and pruned by hour) into compact per-span records with interned app,
//! instance and channel names, and each span's effective channel from the timeline.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, AsArray, BooleanArray, Int64Array, ListArray, MapArray, StringArray, UInt32Array,
};
use datafusion::prelude::SessionContext;
use dyeline_control::Timeline;
use dyeline_model::Color;
use futures::StreamExt;
use smallvec::SmallVec;

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

/// A span's decisions: (channel id, colour) pairs, up to three without a heap allocation (a
/// fourth channel costs one; three keep [`SpanRec`] at 128 bytes).
pub type Decisions = SmallVec<[(u32, Color); 3]>;

/// One span as the analyzer sees it.
#[derive(Clone, Debug)]
pub struct SpanRec {
    /// Trace id.
    pub trace: u128,
    /// Span id.
    pub span: u64,
    /// Parent span id, if any (an all-zero id is no parent, as in OTLP; the niche keeps the
    /// field at 8 bytes).
    pub parent: Option<std::num::NonZeroU64>,
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
    /// Decisions: (channel interned in [`Spans::channels`], colour), first-wins already;
    /// up to three are held inline.
    pub decisions: Decisions,
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
    /// Attribute the decision was read from (shared: a handful of distinct names).
    pub source: Arc<str>,
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
    /// Distinct decision sources seen, shared by the records that name them.
    sources: Vec<Arc<str>>,
    /// Min and max span start, set by [`Loader::seal`].
    start_bounds: Option<(i64, i64)>,
    /// Distinct (instance, app, colour, rule) ids, set by [`Loader::seal`].
    rules: Option<Vec<(u32, u32, Color, u32)>>,
}

/// Merges of at least this many spans copy on two threads ([`Loader::merge_finish`]).
pub const PARALLEL_COPY_MIN: usize = 50_000;

/// A span's place in a merge ([`Loader::keys_in`]): (trace, start, span id, part, index of
/// the span in the part). Sorted keys give the merged order.
pub type MergeKey = (u128, i64, u64, u32, u32);

/// One part's interned ids re-mapped into a merged [`Loader`]'s.
struct IdMaps {
    apps: Vec<u32>,
    instances: Vec<u32>,
    channels: Vec<u32>,
    rules: Vec<u32>,
}

impl Loader {
    /// Adds the rows of `batch` (rows with a trace or span id that is not hex are skipped).
    ///
    /// # Errors
    /// [`SqlError::Internal`] when a column has an unexpected type.
    pub fn push(&mut self, batch: &arrow::array::RecordBatch) -> Result<(), SqlError> {
        // New spans: the sealed facts no longer hold.
        self.start_bounds = None;
        self.rules = None;
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
                    .and_then(std::num::NonZeroU64::new)
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
            let mut decs = Decisions::new();
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
                let source = self.source(source.value(i));
                self.out.decision_recs.push(DecisionRec {
                    index,
                    source,
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

    /// The shared copy of decision source `name`.
    fn source(&mut self, name: &str) -> Arc<str> {
        if let Some(s) = self.sources.iter().find(|s| &***s == name) {
            return Arc::clone(s);
        }
        let s: Arc<str> = Arc::from(name);
        self.sources.push(Arc::clone(&s));
        s
    }

    /// Sorts the spans by (trace, start, span id), the order [`Loader::finish`] gives, each
    /// span's colour rule and decision record moving with it. Cheap when already sorted (rows
    /// of a Parquet file are written in that order).
    pub fn sort(&mut self) {
        if let Some(order) = trace_order(&self.out.spans) {
            apply_order(&mut self.out.spans, &order);
            apply_order(&mut self.span_rules, &order);
            reindex(&mut self.out.decision_recs, &order);
        }
    }

    /// The spans of `parts` that start in `lo..=hi` (Unix ns), finished: what
    /// [`Loader::finish`] gives for one loader holding just those spans (resolved from
    /// `timeline`, in trace order, with their instance rules). A merge of sorted runs, so each
    /// part must be sorted ([`Loader::sort`]). Names are re-interned; the parts are left as they
    /// are (they may be cached parts shared by many loads). Each span is resolved as it is
    /// copied, and the instance rules come from the parts' own lists when a part lies wholly in
    /// the range, so the merged spans are walked once, not three times.
    pub fn merge_finish(parts: &[&Loader], lo: i64, hi: i64, timeline: &Timeline) -> Spans {
        let started = std::time::Instant::now();
        // Every in-range span's key, part after part: runs already sorted, which the stable
        // sort (a merge sort that finds existing runs) merges in O(n log parts) — a binary
        // heap over the parts cost twice as much.
        let mut keys = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            p.keys_in(i as u32, lo, hi, &mut keys);
        }
        let gathered = started.elapsed();
        keys.sort();
        tracing::debug!(
            spans = keys.len(),
            keys_ms = gathered.as_secs_f64() * 1e3,
            sort_ms = (started.elapsed() - gathered).as_secs_f64() * 1e3,
            "merge keys"
        );
        Self::finish_keys(parts, &keys, lo, hi, timeline, PARALLEL_COPY_MIN)
    }

    /// The [`MergeKey`]s of this part's spans that start in `lo..=hi`, tagged `part`, appended
    /// to `out` in the part's order (sorted when the part is).
    pub fn keys_in(&self, part: u32, lo: i64, hi: i64, out: &mut Vec<MergeKey>) {
        out.extend(
            self.out
                .spans
                .iter()
                .enumerate()
                .filter(|(_, s)| (lo..=hi).contains(&s.start))
                .map(|(k, s)| (s.trace, s.start, s.span, part, k as u32)),
        );
    }

    /// [`Loader::merge_finish`] given the merge's keys: every span of `parts` that starts in
    /// `lo..=hi`, sorted ([`Loader::keys_in`] of each part, then sorted; a caller may keep
    /// them for the next merge of the same parts). Copies on two threads from `parallel_min`
    /// spans.
    pub fn finish_keys(
        parts: &[&Loader],
        keys: &[MergeKey],
        lo: i64,
        hi: i64,
        timeline: &Timeline,
        parallel_min: usize,
    ) -> Spans {
        let started = std::time::Instant::now();
        let mut all = Loader::default();
        let map = |from: &Interner, to: &mut Interner| -> Vec<u32> {
            (0..from.len() as u32)
                .map(|i| to.intern(from.name(i)))
                .collect()
        };
        let maps: Vec<IdMaps> = parts
            .iter()
            .map(|p| IdMaps {
                apps: map(&p.out.apps, &mut all.out.apps),
                instances: map(&p.out.instances, &mut all.out.instances),
                channels: map(&p.out.channels, &mut all.out.channels),
                rules: map(&p.rule_names, &mut all.rule_names),
            })
            .collect();
        let changes = Changes::new(&mut all.out, timeline);
        // The instance rules of a part wholly in the range are its own list, mapped; the
        // others' come from their in-range spans.
        let mut rules: RuleSet = RuleSet::default();
        for (p, m) in parts.iter().zip(&maps) {
            let whole = p.rules.as_ref().filter(|_| {
                p.start_bounds
                    .is_some_and(|(min, max)| lo <= min && max <= hi)
            });
            let mapped = |(inst, app, color, rule): (u32, u32, Color, u32)| {
                (
                    m.instances[inst as usize],
                    m.apps[app as usize],
                    color,
                    m.rules[rule as usize],
                )
            };
            match whole {
                Some(own) => rules.extend(own.iter().copied().map(mapped)),
                None => rules.extend(
                    p.out
                        .spans
                        .iter()
                        .zip(&p.span_rules)
                        .filter(|(s, _)| (lo..=hi).contains(&s.start))
                        .map(|(s, r)| mapped((s.instance, s.app, s.color, *r))),
                ),
            }
        }
        let ruled = started.elapsed();
        // The copy is a random gather over the parts, bound by memory latency: large merges
        // copy the two halves of the output on two threads, then join them (a sequential move).
        let halves = if keys.len() >= parallel_min
            && std::thread::available_parallelism().map_or(1, |n| n.get()) > 1
        {
            keys.len() / 2
        } else {
            keys.len()
        };
        let (first, second) = keys.split_at(halves);
        let (a, b) = std::thread::scope(|scope| {
            let later = (!second.is_empty())
                .then(|| scope.spawn(|| Loader::copy_keys(parts, &maps, &changes, second)));
            let a = Loader::copy_keys(parts, &maps, &changes, first);
            (a, later.map(|h| h.join().expect("merge copy thread")))
        });
        let (mut spans, mut recs) = a;
        if let Some((b_spans, b_recs)) = b {
            let offset = spans.len();
            spans.extend(b_spans);
            recs.extend(b_recs.into_iter().map(|r| DecisionRec {
                index: r.index + offset,
                ..r
            }));
        }
        let copied = started.elapsed();
        let mut out = all.out;
        out.spans = spans;
        out.decision_recs = recs;
        out.instance_rules = named_rules(&out, &all.rule_names, rules);
        tracing::debug!(
            spans = keys.len(),
            rules_ms = ruled.as_secs_f64() * 1e3,
            copy_ms = (copied - ruled).as_secs_f64() * 1e3,
            named_ms = (started.elapsed() - copied).as_secs_f64() * 1e3,
            "merge"
        );
        out
    }

    /// The spans named by `keys` (`.3` the part, `.4` the span's index in it), in that order,
    /// copied from `parts` with their ids mapped by `maps` and resolved by `changes`, with
    /// their decision records. Within one part the keys must come in increasing index order,
    /// as a merge of sorted parts gives them.
    fn copy_keys(
        parts: &[&Loader],
        maps: &[IdMaps],
        changes: &Changes,
        keys: &[MergeKey],
    ) -> (Vec<SpanRec>, Vec<DecisionRec>) {
        let mut spans = Vec::with_capacity(keys.len());
        let mut recs = Vec::new();
        // Each part's decision records are in span order; its spans come out in order too.
        let mut rec_cursor = vec![0usize; parts.len()];
        for &(.., part, k) in keys {
            let part = part as usize;
            let (from, k, m) = (parts[part], k as usize, &maps[part]);
            let from_recs = &from.out.decision_recs;
            let rec = &mut rec_cursor[part];
            while *rec < from_recs.len() && from_recs[*rec].index < k {
                *rec += 1;
            }
            if let Some(r) = from_recs.get(*rec).filter(|r| r.index == k) {
                recs.push(DecisionRec {
                    index: spans.len(),
                    ..r.clone()
                });
            }
            let s = &from.out.spans[k];
            let mut rec = SpanRec {
                app: m.apps[s.app as usize],
                instance: m.instances[s.instance as usize],
                decisions: s
                    .decisions
                    .iter()
                    .map(|(c, col)| (m.channels[*c as usize], *col))
                    .collect(),
                ..s.clone()
            };
            changes.apply(&mut rec);
            spans.push(rec);
        }
        (spans, recs)
    }

    /// The spans, with each one's effective channel resolved from `timeline` and sorted by
    /// trace ([`resolve`]).
    pub fn finish(self, timeline: &Timeline) -> Spans {
        let started = std::time::Instant::now();
        let Self {
            mut out,
            span_rules,
            rule_names,
            ..
        } = self;
        let rules: RuleSet = out
            .spans
            .iter()
            .zip(&span_rules)
            .map(|(s, r)| (s.instance, s.app, s.color, *r))
            .collect();
        out.instance_rules = named_rules(&out, &rule_names, rules);
        let ruled = started.elapsed();
        resolve(&mut out, timeline);
        tracing::debug!(
            rules_ms = ruled.as_secs_f64() * 1e3,
            resolve_ms = (started.elapsed() - ruled).as_secs_f64() * 1e3,
            "finish"
        );
        out
    }

    /// Sorts the spans ([`Loader::sort`]) and notes the part's start bounds and its instance
    /// rules, so a merge ([`Loader::merge_finish`]) over a range holding the whole part takes
    /// its rules from the list instead of from every span. Parts kept for many merges (the
    /// analyzer's per-file cache) are sealed once.
    pub fn seal(&mut self) {
        self.sort();
        let spans = &self.out.spans;
        self.start_bounds = spans
            .iter()
            .map(|s| s.start)
            .min()
            .zip(spans.iter().map(|s| s.start).max());
        let set: RuleSet = spans
            .iter()
            .zip(&self.span_rules)
            .map(|(s, r)| (s.instance, s.app, s.color, *r))
            .collect();
        self.rules = Some(set.into_iter().collect());
    }
}

/// Distinct (instance, app, colour, rule) ids.
type RuleSet = std::collections::HashSet<(u32, u32, Color, u32), foldhash::fast::RandomState>;

/// The instance rules of `rules` by name, in a total order: an instance seen with two colours
/// or rules lists them the same way every run.
fn named_rules(
    out: &Spans,
    rule_names: &Interner,
    rules: RuleSet,
) -> Vec<(String, String, Color, String)> {
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
    inst.sort_by(|a, b| (&a.0, &a.1, a.2.as_str(), &a.3).cmp(&(&b.0, &b.1, b.2.as_str(), &b.3)));
    inst
}

/// Each app's effective configuration changes (domain §4), by app id: (time, channel id,
/// blue_percent), the first at `i64::MIN`.
struct Changes(Vec<Vec<(i64, Option<u32>, u8)>>);

impl Changes {
    /// The changes of every app of `out`, interning their channels in `out.channels`.
    fn new(out: &mut Spans, timeline: &Timeline) -> Self {
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
        Self(changes)
    }

    /// Sets `s`'s effective channel, blue_percent and the times of the app's surrounding
    /// changes.
    fn apply(&self, s: &mut SpanRec) {
        let c = &self.0[s.app as usize];
        let n = c.partition_point(|(t, ..)| *t <= s.start);
        let (since, channel, bp) = c[n.saturating_sub(1)];
        s.channel = channel;
        s.blue_percent = bp;
        s.since = since;
        s.until = c.get(n).map_or(i64::MAX, |x| x.0);
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
    let changes = Changes::new(out, timeline);
    for s in &mut out.spans {
        changes.apply(s);
    }
    if let Some(order) = trace_order(&out.spans) {
        apply_order(&mut out.spans, &order);
        reindex(&mut out.decision_recs, &order);
    }
}

/// The permutation that sorts `spans` by (trace, start, span id) — `order[new] = old` — or
/// `None` when they already are.
fn trace_order(spans: &[SpanRec]) -> Option<Vec<usize>> {
    if spans.is_sorted_by_key(|s| (s.trace, s.start, s.span)) {
        return None;
    }
    // The keys sorted side by side (not through the records: that is a cache miss per
    // comparison); the index breaks ties so the order is total and the sort can be unstable.
    let mut keys: Vec<(u128, i64, u64, usize)> = spans
        .iter()
        .enumerate()
        .map(|(i, s)| (s.trace, s.start, s.span, i))
        .collect();
    keys.sort_unstable();
    Some(keys.into_iter().map(|k| k.3).collect())
}

/// Reorders `v` so that `v[new] = old v[order[new]]`.
fn apply_order<T>(v: &mut Vec<T>, order: &[usize]) {
    let mut old: Vec<Option<T>> = std::mem::take(v).into_iter().map(Some).collect();
    *v = order.iter().filter_map(|&i| old[i].take()).collect();
}

/// Points decision records at their spans' new places after [`apply_order`] with `order`, and
/// keeps them in span order.
fn reindex(recs: &mut [DecisionRec], order: &[usize]) {
    let mut new_index = vec![0usize; order.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    for d in recs.iter_mut() {
        d.index = new_index[d.index];
    }
    recs.sort_unstable_by_key(|d| d.index);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// (trace, start, span, app, instance, channel decided or not, has a decision record,
    /// rule, part it lands in).
    type Row = (u8, i64, u64, u8, u8, Option<u8>, bool, u8, usize);

    const APPS: [&str; 3] = ["order", "pay", "stock"];
    const CHANNELS: [&str; 2] = ["trade", "pay"];
    const RULES: [&str; 2] = ["host_name", "none"];

    /// Adds `r` to `l`, interning names in `l`'s own order (each part numbers them its way).
    fn add(l: &mut Loader, r: &Row) {
        let &(trace, start, span, app, inst, ch, rec, rule, _) = r;
        let app = l.out.apps.intern(APPS[app as usize % 3]);
        let instance = l.out.instances.intern(&format!("i{inst}"));
        let decisions: Decisions = ch
            .map(|c| {
                (
                    l.out.channels.intern(CHANNELS[c as usize % 2]),
                    Color::Green,
                )
            })
            .into_iter()
            .collect();
        if rec {
            let source = l.source("baggage");
            l.out.decision_recs.push(DecisionRec {
                index: l.out.spans.len(),
                source,
                malformed_pairs: u32::from(trace),
                conflicting: Vec::new(),
            });
        }
        l.span_rules
            .push(l.rule_names.intern(RULES[rule as usize % 2]));
        l.out.spans.push(SpanRec {
            trace: u128::from(trace),
            span,
            parent: None,
            app,
            instance,
            color: Color::Blue,
            kind: Kind::Server,
            traffic: Some(Traffic::Rpc),
            start,
            end: start + 1,
            is_error: false,
            decisions,
            channel: None,
            blue_percent: 50,
            since: i64::MIN,
            until: i64::MAX,
        });
    }

    /// `trade` = [order, pay], started at 5 (blue_percent 50), ratio 20 at 12; `stock` joins
    /// channel `pay` at 8: spans of each app resolve differently on each side of a change.
    fn test_timeline() -> Timeline {
        use dyeline_control::{Channels, Op};
        use dyeline_model::ChannelId;
        let id = |s: &str| ChannelId::new(s).unwrap();
        let mut initial = Channels::new();
        initial.apply(&id("trade"), &Op::Apps(vec!["order".into(), "pay".into()]));
        Timeline::from_ops(
            initial,
            vec![
                (5, id("trade"), Op::Start),
                (8, id("pay"), Op::Apps(vec!["stock".into()])),
                (12, id("trade"), Op::Ratio(20)),
            ],
        )
    }

    /// Everything of `s` with names instead of ids, sorted (spans that share trace, start and
    /// span id, a span sent twice, may come in either order).
    fn named(s: &Spans) -> Vec<String> {
        let mut v: Vec<String> = s
            .spans
            .iter()
            .map(|r| {
                let d: Vec<_> = r
                    .decisions
                    .iter()
                    .map(|(c, col)| (s.channels.name(*c), col.as_str()))
                    .collect();
                format!(
                    "{} {} {} {} {} {d:?} {:?} {} {} {}",
                    r.trace,
                    r.start,
                    r.span,
                    s.apps.name(r.app),
                    s.instances.name(r.instance),
                    r.channel.map(|c| s.channels.name(c)),
                    r.blue_percent,
                    r.since,
                    r.until
                )
            })
            .collect();
        v.extend(s.decision_recs.iter().map(|d| {
            let r = &s.spans[d.index];
            format!(
                "rec {} {} {} {}",
                r.trace, r.span, d.source, d.malformed_pairs
            )
        }));
        v.sort();
        v.push(format!("{:?}", s.instance_rules));
        v
    }

    /// Every pass of the analyzer and the dashboard streams these records: keep them at two
    /// cache lines (the parent id's niche made 144 bytes 128).
    #[test]
    fn span_records_fit_two_cache_lines() {
        assert_eq!(std::mem::size_of::<SpanRec>(), 128);
    }

    proptest! {
        /// Merging parts, each sorted, gives what loading all the spans in the range at once
        /// gives: same spans in trace order, decision records on the same spans, same rules.
        #[test]
        fn merging_sorted_parts_equals_one_load(
            rows in prop::collection::vec(
                (0u8..6, 0i64..20, 0u64..4, 0u8..3, 0u8..4, prop::option::of(0u8..2),
                 any::<bool>(), 0u8..2, 0usize..4),
                0..60,
            ),
            lo in 0i64..10,
            len in 0i64..20,
        ) {
            let hi = lo + len;
            let timeline = test_timeline();
            let mut parts: Vec<Loader> = (0..4).map(|_| Loader::default()).collect();
            let mut whole = Loader::default();
            for r in &rows {
                add(&mut parts[r.8], r);
                if (lo..=hi).contains(&r.1) {
                    add(&mut whole, r);
                }
            }
            for (i, p) in parts.iter_mut().enumerate() {
                // Sealed and unsealed parts: the rules come from the part's list or its spans.
                if i % 2 == 0 {
                    p.seal();
                } else {
                    p.sort();
                }
                prop_assert!(p.out.spans.is_sorted_by_key(|s| (s.trace, s.start, s.span)));
            }
            let refs: Vec<&Loader> = parts.iter().collect();
            let merged = Loader::merge_finish(&refs, lo, hi, &timeline);
            prop_assert_eq!(merged.spans.len(), whole.len());
            // The two-thread copy (from 1 span here) gives the same result.
            let mut keys = Vec::new();
            for (i, p) in refs.iter().enumerate() {
                p.keys_in(i as u32, lo, hi, &mut keys);
            }
            keys.sort();
            let split = Loader::finish_keys(&refs, &keys, lo, hi, &timeline, 1);
            prop_assert_eq!(named(&split), named(&merged));
            let recs = |s: &Spans| -> Vec<(usize, u128)> {
                s.decision_recs.iter().map(|d| (d.index, s.spans[d.index].trace)).collect()
            };
            prop_assert_eq!(recs(&split), recs(&merged));
            prop_assert!(merged.spans.is_sorted_by_key(|s| (s.trace, s.start, s.span)));
            prop_assert!(merged.decision_recs.is_sorted_by_key(|d| d.index));
            prop_assert_eq!(named(&merged), named(&whole.finish(&timeline)));
        }
    }
}
