//! Reading the spans the analyzer needs into compact per-span records ([`SpanRec`], in
//! [`Spans`]) with interned app, instance and channel names, and each span's effective
//! channel from the timeline: from a DataFusion scan of `spans` ([`load`]: columns
//! projected, start time filtered and pruned by hour) or from record batches read elsewhere
//! ([`Loader`]: per file, then merged). Also [`WindowCounter`]: the same batches counted into
//! the windowed detections' counts without keeping the records.

use std::collections::HashMap;

use arrow::array::{Array, AsArray, StringArray};
use arrow::datatypes::{Int64Type, UInt32Type};
use datafusion::prelude::SessionContext;
use dyeline_model::Color;
use dyeline_model::release::Timeline;
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

/// A set of decisions: (channel id, colour) pairs, up to three without a heap allocation (a
/// fourth channel costs one), interned in [`DecisionSets`].
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
    /// The span's decisions, a set interned in [`Spans::decision_sets`] (0: none):
    /// [`Spans::decisions`] reads it. The spans of a trace carry the same baggage, so a
    /// release's spans share a handful of sets, and an id keeps the record at 80 bytes.
    pub decision_set: u32,
    /// Effective channel of the app at `start` (interned), if any.
    pub channel: Option<u32>,
    /// Effective blue_percent at `start`.
    pub blue_percent: u8,
    /// The app's configuration interval holding `start`, in the load's intervals (0: the
    /// whole time line, before the span is resolved): [`Spans::interval`] reads it.
    pub interval: u32,
    /// The attribute the decisions were read from, interned in [`Spans::sources`], or
    /// [`NO_SOURCE`] (none; also for a load with more than 65,534 distinct ones, where the
    /// configured chain has a handful). It fits in the record's padding.
    pub source: u16,
}

/// [`SpanRec::source`] of a span without a decision source.
pub const NO_SOURCE: u16 = u16::MAX;

/// `id` as a [`SpanRec::source`].
fn source_id(id: u32) -> u16 {
    u16::try_from(id)
        .ok()
        .filter(|&v| v != NO_SOURCE)
        .unwrap_or(NO_SOURCE)
}

/// Distinct decision sets, interned: id 0 is the empty set.
#[derive(Clone, Debug)]
pub struct DecisionSets {
    sets: Vec<Decisions>,
    ids: HashMap<Decisions, u32, foldhash::fast::RandomState>,
}

impl Default for DecisionSets {
    fn default() -> Self {
        Self {
            sets: vec![Decisions::new()],
            ids: HashMap::default(),
        }
    }
}

impl DecisionSets {
    /// The id of `set`, adding it if new (the empty set is 0).
    pub fn intern(&mut self, set: Decisions) -> u32 {
        if set.is_empty() {
            return 0;
        }
        if let Some(&id) = self.ids.get(&set) {
            return id;
        }
        let id = self.sets.len() as u32;
        self.sets.push(set.clone());
        self.ids.insert(set, id);
        id
    }

    /// The set `id` ((channel, colour) pairs, channels interned in [`Spans::channels`]).
    ///
    /// # Panics
    /// For an id this table did not give.
    pub fn get(&self, id: u32) -> &[(u32, Color)] {
        &self.sets[id as usize]
    }

    /// Number of sets, the empty one included.
    pub fn len(&self) -> usize {
        self.sets.len()
    }

    /// Always false: the empty set is always there.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }
}

/// The baggage faults of a span that has them (malformed pairs skipped, channels given twice):
/// few spans, so they are kept beside the records rather than in each.
#[derive(Clone, Debug)]
pub struct DecisionRec {
    /// Index of the span in [`Spans::iter`]'s order.
    pub index: usize,
    /// Malformed pairs skipped.
    pub malformed_pairs: u32,
    /// Channels given twice with different colours.
    pub conflicting: Vec<String>,
}

impl DecisionRec {
    /// This record for the span at `index` of a merged result.
    fn at(&self, index: usize) -> DecisionRec {
        DecisionRec {
            index,
            ..self.clone()
        }
    }
}

/// Every span of the analysed range.
#[derive(Clone, Debug, Default)]
pub struct Spans {
    /// The spans in chunks (a merge of parts keeps one chunk per part), grouped by trace:
    /// each trace's spans are contiguous within one chunk, by start then span id. A single
    /// load ([`load`]) is one chunk with the traces sorted by id; a merge of parts
    /// ([`Loader::merge_finish`]) leaves them in the parts' order.
    chunks: Vec<Vec<SpanRec>>,
    /// Index of each chunk's first span among all the spans.
    offsets: Vec<usize>,
    /// Spans in all the chunks.
    len: usize,
    /// Spans that carry a decision source.
    pub decision_recs: Vec<DecisionRec>,
    /// App names.
    pub apps: Interner,
    /// Instance ids.
    pub instances: Interner,
    /// Channel ids (from decisions and the timeline).
    pub channels: Interner,
    /// Decision sources (attribute names) of [`SpanRec::source`].
    pub sources: Interner,
    /// Decision sets of [`SpanRec::decision_set`].
    pub decision_sets: DecisionSets,
    /// Configuration intervals of [`SpanRec::interval`]: (since, until), Unix ns, the app's
    /// last change at or before the span's start (`i64::MIN` if never) and its next change
    /// (`i64::MAX` if never). Entry 0 is the whole time line.
    intervals: Vec<(i64, i64)>,
    /// (instance, app, color, rule) seen.
    pub instance_rules: Vec<(String, String, Color, String)>,
}

impl Spans {
    /// `s`'s decisions: (channel, colour) pairs, first-wins already.
    pub fn decisions(&self, s: &SpanRec) -> &[(u32, Color)] {
        self.decision_sets.get(s.decision_set)
    }

    /// `s`'s decision for `channel`.
    pub fn decision(&self, s: &SpanRec, channel: u32) -> Option<Color> {
        self.decisions(s)
            .iter()
            .find(|(c, _)| *c == channel)
            .map(|(_, col)| *col)
    }

    /// (since, until) of `s`'s app configuration (an entry of the load's intervals): when it last
    /// changed at or before `s.start` and when it next changes, Unix ns.
    pub fn interval(&self, s: &SpanRec) -> (i64, i64) {
        self.intervals
            .get(s.interval as usize)
            .copied()
            .unwrap_or((i64::MIN, i64::MAX))
    }

    /// Number of spans.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there is no span.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every span, chunk after chunk (each trace's spans together).
    pub fn iter(&self) -> impl Iterator<Item = &SpanRec> + Clone {
        self.chunks.iter().flatten()
    }

    /// The span at `index` of [`Spans::iter`]'s order (a [`DecisionRec::index`]).
    ///
    /// # Panics
    /// When `index >= self.len()`, as a slice index does.
    pub fn get(&self, index: usize) -> &SpanRec {
        let c = self
            .offsets
            .partition_point(|&o| o <= index)
            .saturating_sub(1);
        &self.chunks[c][index - self.offsets[c]]
    }

    /// The spans as slices, in [`Spans::iter`]'s order; no trace spans two slices.
    pub fn chunks(&self) -> impl Iterator<Item = &[SpanRec]> {
        self.chunks.iter().map(Vec::as_slice)
    }

    /// The spans cut in two halves of about equal length, each as slices in
    /// [`Spans::iter`]'s order (for folds on two threads; a trace may be cut).
    pub fn halves(&self) -> [Vec<&[SpanRec]>; 2] {
        let mut halves: [Vec<&[SpanRec]>; 2] = [Vec::new(), Vec::new()];
        let mut left = self.len / 2;
        for c in &self.chunks {
            let (a, b) = c.split_at(left.min(c.len()));
            left -= a.len();
            for (half, part) in halves.iter_mut().zip([a, b]) {
                if !part.is_empty() {
                    half.push(part);
                }
            }
        }
        halves
    }

    /// The spans of each trace (they are grouped by trace), one slice per trace.
    pub fn traces(&self) -> impl Iterator<Item = &[SpanRec]> {
        self.chunks
            .iter()
            .flat_map(|c| c.chunk_by(|a, b| a.trace == b.trace))
    }

    /// Appends `s` to the last chunk (a new trace, or the next span of the last trace).
    pub fn push(&mut self, s: SpanRec) {
        if self.chunks.is_empty() {
            self.chunks.push(Vec::new());
            self.offsets.push(0);
        }
        if let Some(last) = self.chunks.last_mut() {
            last.push(s);
        }
        self.len += 1;
    }

    /// Replaces the spans with `chunks` (empty ones are dropped).
    fn set_chunks(&mut self, chunks: Vec<Vec<SpanRec>>) {
        self.chunks = chunks.into_iter().filter(|c| !c.is_empty()).collect();
        self.offsets = Vec::with_capacity(self.chunks.len());
        let mut at = 0;
        for c in &self.chunks {
            self.offsets.push(at);
            at += c.len();
        }
        self.len = at;
    }

    /// The spans as one vector, the chunks emptied.
    fn take_flat(&mut self) -> Vec<SpanRec> {
        let chunks = std::mem::take(&mut self.chunks);
        self.offsets.clear();
        self.len = 0;
        if chunks.len() == 1 {
            return chunks.into_iter().next().unwrap_or_default();
        }
        chunks.concat()
    }
}

/// `f` of each row's value of the string column `col` (`None` for null), plain (`Utf8`) or
/// dictionary-encoded (`Dictionary(Int32, Utf8)`): for a dictionary, `f` runs once per
/// dictionary value and rows take their key's result.
///
/// # Errors
/// [`SqlError::Internal`] for another column type.
fn per_row<T: Clone>(
    col: &dyn Array,
    mut f: impl FnMut(Option<&str>) -> T,
) -> Result<Vec<T>, SqlError> {
    if let Some(plain) = col.as_string_opt::<i32>() {
        return Ok((0..plain.len())
            .map(|i| f((!plain.is_null(i)).then(|| plain.value(i))))
            .collect());
    }
    let dict = col
        .as_dictionary_opt::<arrow::datatypes::Int32Type>()
        .ok_or_else(|| sql_err(format!("unexpected column type {}", col.data_type())))?;
    let values = dict
        .values()
        .as_string_opt::<i32>()
        .ok_or_else(|| sql_err("dictionary values are not Utf8"))?;
    let mapped: Vec<T> = (0..values.len())
        .map(|i| f((!values.is_null(i)).then(|| values.value(i))))
        .collect();
    let none = f(None);
    let keys = dict.keys();
    Ok((0..keys.len())
        .map(|i| {
            if keys.is_null(i) {
                return none.clone();
            }
            usize::try_from(keys.value(i))
                .ok()
                .and_then(|k| mapped.get(k))
                .unwrap_or(&none)
                .clone()
        })
        .collect())
}

/// A 32-digit hex trace id (either case), or `None`. `const-hex` decodes with SIMD: ids are
/// three of the loader's sixteen columns and were a seventh of a file read's CPU with a
/// per-digit decoder.
fn hex_u128(s: &str) -> Option<u128> {
    let mut b = [0u8; 16];
    const_hex::decode_to_slice(s, &mut b).ok()?;
    Some(u128::from_be_bytes(b))
}

/// A 16-digit hex span id (either case), or `None`.
fn hex_u64(s: &str) -> Option<u64> {
    let mut b = [0u8; 8];
    const_hex::decode_to_slice(s, &mut b).ok()?;
    Some(u64::from_be_bytes(b))
}

fn parse_color(s: &str) -> Color {
    Color::parse(s).unwrap_or(Color::Unknown)
}

fn sql_err(e: impl std::fmt::Display) -> SqlError {
    SqlError::Internal(e.to_string())
}

/// The columns of `spans` the analyzer reads ([`Loader::push`] finds them by name). The
/// drilldown selects them in this order and reads its own columns after them.
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

/// The columns the windowed detections read (domain §6.3–6): the spans' apps, instances,
/// colours, kinds, starts and errors, and the trace ids their findings name. A subset of
/// [`LOAD_COLUMN_NAMES`].
pub const WINDOW_COLUMN_NAMES: [&str; 9] = [
    "trace_id",
    "service_name",
    "instance_id",
    "color",
    "color_rule",
    "span_kind",
    "traffic_kind",
    "start_time_unix_nano",
    "is_error",
];

/// Which of the analyzer's columns a load reads from Parquet files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoadColumns {
    /// [`LOAD_COLUMN_NAMES`]: what every detection and the decision report need.
    #[default]
    All,
    /// [`WINDOW_COLUMN_NAMES`]: enough for the four windowed detections
    /// ([`WindowCounter`]). The span and parent ids, the decisions with their source and
    /// faults, and the end are not read (they are the larger part of a file's bytes, and
    /// of its read time); the records' fields for them are empty ([`Loader::push`]).
    Windows,
}

impl LoadColumns {
    /// The column names read.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            LoadColumns::All => &LOAD_COLUMN_NAMES,
            LoadColumns::Windows => &WINDOW_COLUMN_NAMES,
        }
    }
}

/// Rows of a batch whose parsed decision entries [`Loader::push`] remembers.
const RECENT_DECISION_ROWS: usize = 8;

/// Number of [`LOAD_COLUMN_NAMES`].
pub const LOAD_COLUMN_COUNT: usize = LOAD_COLUMN_NAMES.len();

/// [`LOAD_COLUMN_NAMES`] as a SQL select list.
pub fn load_columns_sql() -> String {
    LOAD_COLUMN_NAMES.join(", ")
}

/// Turns record batches holding [`LOAD_COLUMN_NAMES`] (found by name) into [`Spans`].
#[derive(Clone, Default)]
pub struct Loader {
    /// Names, decision records; its spans stay empty until [`Loader::finish`].
    out: Spans,
    /// The spans added, in the order added until sorted.
    spans: Vec<SpanRec>,
    /// Colour rule of each span of `spans` (same index), interned in `rule_names`.
    span_rules: Vec<u32>,
    rule_names: Interner,
    /// The distinct trace ids of the spans, sorted, set by [`Loader::seal`].
    trace_ids: Option<Vec<u128>>,
    /// Min and max span start, set by [`Loader::seal`].
    start_bounds: Option<(i64, i64)>,
    /// Distinct (instance, app, colour, rule) ids, set by [`Loader::seal`].
    rules: Option<Vec<(u32, u32, Color, u32)>>,
}

/// Merges of at least this many spans copy on two threads ([`Loader::merge_finish`]).
pub const PARALLEL_COPY_MIN: usize = 50_000;

/// One part's interned ids re-mapped into a merged [`Loader`]'s.
struct IdMaps {
    apps: Vec<u32>,
    instances: Vec<u32>,
    /// Decision sets, their channels mapped.
    decision_sets: Vec<u32>,
    sources: Vec<u32>,
    rules: Vec<u32>,
}

impl IdMaps {
    /// `s` with its ids mapped, resolved by `changes`.
    fn span(&self, s: &SpanRec, changes: &Changes) -> SpanRec {
        let mut rec = s.clone();
        self.map_in_place(&mut rec, changes);
        rec
    }

    /// Maps `s`'s ids and resolves it by `changes`.
    fn map_in_place(&self, s: &mut SpanRec, changes: &Changes) {
        s.app = self.apps[s.app as usize];
        s.instance = self.instances[s.instance as usize];
        s.decision_set = self.decision_sets[s.decision_set as usize];
        if s.source != NO_SOURCE {
            s.source = source_id(self.sources[s.source as usize]);
        }
        changes.apply(s);
    }
}

impl Loader {
    /// A loader with room for `spans` spans.
    pub fn with_capacity(spans: usize) -> Self {
        Self {
            spans: Vec::with_capacity(spans),
            span_rules: Vec::with_capacity(spans),
            ..Self::default()
        }
    }

    /// Adds the rows of `batch`, whose columns are found by name among
    /// [`LOAD_COLUMN_NAMES`] (a batch may hold others). `trace_id`, `service_name`,
    /// `instance_id`, `color`, `color_rule`, `span_kind`, `traffic_kind`,
    /// `start_time_unix_nano` and `is_error` must be there ([`WINDOW_COLUMN_NAMES`]); the
    /// others may be left out of a read for the windowed detections only
    /// ([`LoadColumns::Windows`]), and their fields are then empty: span id 0, no parent, no
    /// decisions, no decision source or faults, the end equal to the start. Rows with a
    /// trace or span id that is not hex are skipped.
    ///
    /// # Errors
    /// [`SqlError::Internal`] when a required column is missing or a column has an
    /// unexpected type.
    pub fn push(&mut self, batch: &arrow::array::RecordBatch) -> Result<(), SqlError> {
        // New spans: the sealed facts no longer hold.
        self.start_bounds = None;
        self.rules = None;
        self.trace_ids = None;
        let rows = batch.num_rows();
        let col = |name: &str| batch.column_by_name(name);
        let required = |name: &str| col(name).ok_or_else(|| sql_err(format!("no column {name}")));
        let typed_err = |name: &str| sql_err(format!("unexpected type of column {name}"));
        let strings = |name: &str| -> Result<Option<&StringArray>, SqlError> {
            col(name)
                .map(|c| c.as_string_opt::<i32>().ok_or_else(|| typed_err(name)))
                .transpose()
        };
        let trace = strings("trace_id")?.ok_or_else(|| sql_err("no column trace_id"))?;
        let span = strings("span_id")?;
        let parent = strings("parent_span_id")?;
        // The low-cardinality columns, plain or dictionary-encoded (a Parquet file read with
        // dictionaries kept): each distinct value is interned or parsed once per dictionary.
        let apps = per_row(required("service_name")?, |v| {
            self.out.apps.intern(v.unwrap_or(""))
        })?;
        let insts = per_row(required("instance_id")?, |v| {
            self.out.instances.intern(v.unwrap_or(""))
        })?;
        let colors = per_row(required("color")?, |v| {
            v.map_or(Color::Unknown, parse_color)
        })?;
        let rules = per_row(required("color_rule")?, |v| {
            self.rule_names.intern(v.unwrap_or("none"))
        })?;
        let kinds = per_row(required("span_kind")?, |v| match v {
            Some("SERVER") => Kind::Server,
            Some("CONSUMER") => Kind::Consumer,
            _ => Kind::Other,
        })?;
        let traffics = per_row(required("traffic_kind")?, |v| match v {
            Some("RPC") => Some(Traffic::Rpc),
            Some("MQ") => Some(Traffic::Mq),
            Some("JOB") => Some(Traffic::Job),
            _ => None,
        })?;
        let sources = match col("decision_source") {
            Some(c) => per_row(c, |v| v.map(|name| self.out.sources.intern(name)))?,
            None => vec![None; rows],
        };
        let start = required("start_time_unix_nano")?
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| typed_err("start_time_unix_nano"))?;
        let is_error = required("is_error")?
            .as_boolean_opt()
            .ok_or_else(|| typed_err("is_error"))?;
        let end = col("end_time_unix_nano")
            .map(|c| {
                c.as_primitive_opt::<Int64Type>()
                    .ok_or_else(|| typed_err("end_time_unix_nano"))
            })
            .transpose()?;
        let malformed = col("malformed_pairs")
            .map(|c| {
                c.as_primitive_opt::<UInt32Type>()
                    .ok_or_else(|| typed_err("malformed_pairs"))
            })
            .transpose()?;
        // Map and list entries are read through their offsets into the child arrays: taking
        // `value(i)` builds a sliced array per row, which cost more than the rest of the row.
        let decisions = match col("decisions") {
            Some(c) => {
                let m = c.as_map_opt().ok_or_else(|| typed_err("decisions"))?;
                let (Some(keys), Some(vals)) = (
                    m.keys().as_string_opt::<i32>(),
                    m.values().as_string_opt::<i32>(),
                ) else {
                    return Err(typed_err("decisions"));
                };
                Some((m, m.value_offsets(), keys, vals))
            }
            None => None,
        };
        let conflicting = match col("conflicting_channels") {
            Some(c) => {
                let l = c
                    .as_list_opt::<i32>()
                    .ok_or_else(|| typed_err("conflicting_channels"))?;
                let vals = l
                    .values()
                    .as_string_opt::<i32>()
                    .ok_or_else(|| typed_err("conflicting_channels"))?;
                Some((l, l.value_offsets(), vals))
            }
            None => None,
        };
        let mut last_set: Option<(Decisions, u32)> = None;
        // Rows whose decision entries were parsed lately, with their sets: a row with the
        // same entries as one of them (the spans of a trace carry the same baggage, and a
        // release's traces a handful of combinations) takes its set without interning and
        // parsing them again. Replaced in turn.
        let mut recent: SmallVec<[(usize, u32); RECENT_DECISION_ROWS]> = SmallVec::new();
        let mut next_recent = 0usize;
        let mut last_trace: Option<(&str, u128)> = None;
        for i in 0..rows {
            // A trace's spans are adjacent: its id is decoded once per run of rows.
            let t = match last_trace {
                Some((text, id)) if text == trace.value(i) => Some(id),
                _ => hex_u128(trace.value(i)),
            };
            let sp = match span {
                Some(span) => hex_u64(span.value(i)),
                None => Some(0),
            };
            let (Some(t), Some(sp)) = (t, sp) else {
                continue;
            };
            last_trace = Some((trace.value(i), t));
            let parent_id = parent.and_then(|p| {
                (!p.is_null(i))
                    .then(|| hex_u64(p.value(i)))
                    .flatten()
                    .and_then(std::num::NonZeroU64::new)
            });
            self.span_rules.push(rules[i]);
            let decision_set = match &decisions {
                None => 0,
                Some((map, offsets, keys, vals)) => {
                    let same_entries = |a: usize, b: usize| {
                        let (ra, rb) = (
                            offsets[a] as usize..offsets[a + 1] as usize,
                            offsets[b] as usize..offsets[b + 1] as usize,
                        );
                        map.is_null(a) == map.is_null(b)
                            && ra.len() == rb.len()
                            && ra.zip(rb).all(|(x, y)| {
                                keys.value(x) == keys.value(y)
                                    && vals.is_null(x) == vals.is_null(y)
                                    && vals.value(x) == vals.value(y)
                            })
                    };
                    match recent.iter().find(|(r, _)| same_entries(*r, i)) {
                        Some((_, id)) => *id,
                        None => {
                            let mut decs = Decisions::new();
                            if !map.is_null(i) {
                                for j in offsets[i] as usize..offsets[i + 1] as usize {
                                    if vals.is_null(j) {
                                        continue;
                                    }
                                    let c = parse_color(vals.value(j));
                                    if c != Color::Unknown {
                                        decs.push((self.out.channels.intern(keys.value(j)), c));
                                    }
                                }
                            }
                            // Other entries may still make the same set (another order of
                            // channels, or a value that is not a colour): the last set is
                            // reused.
                            let id = match &last_set {
                                Some((set, id)) if *set == decs => *id,
                                _ => {
                                    let id = self.out.decision_sets.intern(decs.clone());
                                    last_set = Some((decs, id));
                                    id
                                }
                            };
                            if recent.len() < RECENT_DECISION_ROWS {
                                recent.push((i, id));
                            } else {
                                recent[next_recent] = (i, id);
                                next_recent = (next_recent + 1) % RECENT_DECISION_ROWS;
                            }
                            id
                        }
                    }
                }
            };
            let index = self.spans.len();
            let malformed_pairs = malformed.map_or(0, |m| m.value(i));
            let conflicts = match &conflicting {
                Some((l, offsets, _)) if !l.is_null(i) => {
                    offsets[i] as usize..offsets[i + 1] as usize
                }
                _ => 0..0,
            };
            if sources[i].is_some() && (malformed_pairs > 0 || !conflicts.is_empty()) {
                self.out.decision_recs.push(DecisionRec {
                    index,
                    malformed_pairs,
                    conflicting: match &conflicting {
                        Some((_, _, vals)) => conflicts
                            .filter(|j| !vals.is_null(*j))
                            .map(|j| vals.value(j).to_owned())
                            .collect(),
                        None => Vec::new(),
                    },
                });
            }
            let start = start.value(i);
            self.spans.push(SpanRec {
                trace: t,
                span: sp,
                parent: parent_id,
                app: apps[i],
                instance: insts[i],
                color: colors[i],
                kind: kinds[i],
                traffic: traffics[i],
                start,
                end: end.map_or(start, |e| e.value(i)),
                is_error: is_error.value(i),
                decision_set,
                channel: None,
                blue_percent: 50,
                interval: 0,
                source: sources[i].map_or(NO_SOURCE, source_id),
            });
        }
        Ok(())
    }

    /// Spans added so far.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True when no span was added.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Sorts the spans by (trace, start, span id), the order [`Loader::finish`] gives, each
    /// span's colour rule and decision record moving with it. Cheap when already sorted (rows
    /// of a Parquet file are written in that order).
    pub fn sort(&mut self) {
        if let Some(order) = trace_order(&self.spans) {
            apply_order(&mut self.spans, &order);
            apply_order(&mut self.span_rules, &order);
            reindex(&mut self.out.decision_recs, &order);
        }
    }

    /// The spans of `parts` that start in `lo..=hi` (Unix ns), finished: what
    /// [`Loader::finish`] gives for one loader holding just those spans (resolved from
    /// `timeline`, with their instance rules), up to the order of whole traces. Each part must
    /// be sorted ([`Loader::sort`]). The result is grouped by trace, not sorted by trace id:
    /// one chunk per part holding its traces in the part's order, then one chunk of the traces
    /// that have spans in more than one part (flushed to two files, or half still in memory),
    /// in trace order. Names are re-interned; the parts are left as they are (they may be
    /// cached parts shared by many loads). Each span is resolved as it is copied, and the
    /// instance rules come from the parts' own lists when a part lies wholly in the range.
    ///
    /// Cost: one sequential copy of the spans (parts on two threads from
    /// [`PARALLEL_COPY_MIN`] spans) and a sort of the parts' distinct trace ids; only the
    /// spans of split traces are sorted. A merge of every span by trace (a sort of 40-byte
    /// keys, then a random gather into one vector) took half the analyzer's time at 10
    /// million spans (bench/analyzer_10m.py).
    pub fn merge_finish(parts: &[&Loader], lo: i64, hi: i64, timeline: &Timeline) -> Spans {
        Self::merge_with(parts, lo, hi, timeline, PARALLEL_COPY_MIN)
    }

    /// [`Loader::merge_finish`], copying parts on two threads from `parallel_min` spans.
    fn merge_with(
        parts: &[&Loader],
        lo: i64,
        hi: i64,
        timeline: &Timeline,
        parallel_min: usize,
    ) -> Spans {
        let plan = MergePlan::new(parts, lo, hi, timeline);
        let jobs: Vec<(usize, &Loader)> = parts.iter().copied().enumerate().collect();
        plan.run(jobs, parallel_min, |(i, p), plan| plan.copy_part(i, p))
    }

    /// [`Loader::merge_finish`] of parts no one else holds, taken instead of copied: each
    /// part's spans are mapped and resolved where they lie and become one chunk of the result,
    /// so the spans are written once and no second vector of them is allocated (a one-off
    /// analysis, like `dyeline analyze`, holds each record once).
    pub fn merge_owned(parts: Vec<Loader>, lo: i64, hi: i64, timeline: &Timeline) -> Spans {
        Self::merge_owned_with(parts, lo, hi, timeline, PARALLEL_COPY_MIN)
    }

    /// [`Loader::merge_owned`], taking parts on two threads from `parallel_min` spans.
    fn merge_owned_with(
        parts: Vec<Loader>,
        lo: i64,
        hi: i64,
        timeline: &Timeline,
        parallel_min: usize,
    ) -> Spans {
        let refs: Vec<&Loader> = parts.iter().collect();
        let plan = MergePlan::new(&refs, lo, hi, timeline);
        drop(refs);
        let jobs: Vec<(usize, Loader)> = parts.into_iter().enumerate().collect();
        plan.run(jobs, parallel_min, |(i, p), plan| plan.take_part(i, p))
    }

    /// Spans added so far whose start is in `lo..=hi`, in a part sealed or not.
    fn count_in(&self, lo: i64, hi: i64) -> usize {
        self.spans
            .iter()
            .filter(|s| (lo..=hi).contains(&s.start))
            .count()
    }

    /// The spans, with each one's effective channel resolved from `timeline` and sorted by
    /// trace ([`resolve`]).
    pub fn finish(self, timeline: &Timeline) -> Spans {
        let started = std::time::Instant::now();
        let Self {
            mut out,
            spans,
            span_rules,
            rule_names,
            ..
        } = self;
        let rules: RuleSet = spans
            .iter()
            .zip(&span_rules)
            .map(|(s, r)| (s.instance, s.app, s.color, *r))
            .collect();
        out.instance_rules = named_rules(&out, &rule_names, rules);
        out.set_chunks(vec![spans]);
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
        // One walk: start bounds, distinct trace ids (the spans are sorted by trace) and
        // distinct rules (a run of spans of one instance inserts once).
        let mut bounds: Option<(i64, i64)> = None;
        let mut traces: Vec<u128> = Vec::new();
        let mut set = RuleSet::default();
        // The last (app, colour, rule) inserted per instance id: consecutive spans of a
        // sorted part are of one trace, so of other instances, and a set insert per span
        // was a twentieth of a file read.
        let mut last_rule: Vec<Option<(u32, Color, u32)>> = vec![None; self.out.instances.len()];
        for (s, r) in self.spans.iter().zip(&self.span_rules) {
            bounds = Some(bounds.map_or((s.start, s.start), |(a, b)| {
                (a.min(s.start), b.max(s.start))
            }));
            if traces.last() != Some(&s.trace) {
                traces.push(s.trace);
            }
            let rule = (s.app, s.color, *r);
            let last = &mut last_rule[s.instance as usize];
            if *last != Some(rule) {
                set.insert((s.instance, s.app, s.color, *r));
                *last = Some(rule);
            }
        }
        self.start_bounds = bounds;
        self.trace_ids = Some(traces);
        self.rules = Some(set.into_iter().collect());
    }
}

/// The windowed detections' counts (domain §6.3–6) of spans read batch by batch, without
/// keeping their records: each batch's spans are resolved from the timeline, those starting
/// in `lo..=hi` are counted, and the records are dropped. Memory: the counts (one entry per
/// window, app, colour and instance) and one batch's records, not every span's; it is the
/// windowed-only path of `dyeline analyze` ([`super::cache::count_windows_once`]).
pub struct WindowCounter<'a> {
    loader: Loader,
    timeline: &'a Timeline,
    config: &'a super::AnalyzerConfig,
    lo: i64,
    hi: i64,
    /// The changes of the apps interned so far, rebuilt when a batch brings a new one.
    changes: Option<Changes>,
    per_channel: Vec<(&'a super::Thresholds, i64)>,
    acc: super::windows::Acc,
    spans: u64,
    rules: RuleSet,
    last_rule: Vec<Option<(u32, Color, u32)>>,
}

impl<'a> WindowCounter<'a> {
    /// A counter of the spans starting in `lo..=hi` (Unix ns) against `timeline`, with
    /// `config`'s thresholds and windows.
    pub fn new(
        timeline: &'a Timeline,
        config: &'a super::AnalyzerConfig,
        lo: i64,
        hi: i64,
    ) -> Self {
        Self {
            loader: Loader::default(),
            timeline,
            config,
            lo,
            hi,
            changes: None,
            per_channel: Vec::new(),
            acc: super::windows::Acc::default(),
            spans: 0,
            rules: RuleSet::default(),
            last_rule: Vec::new(),
        }
    }

    /// Counts the rows of `batch` (columns as [`Loader::push`] takes them; at least
    /// [`WINDOW_COLUMN_NAMES`]).
    ///
    /// # Errors
    /// As [`Loader::push`].
    pub fn push(&mut self, batch: &arrow::array::RecordBatch) -> Result<(), SqlError> {
        let apps_before = self.loader.out.apps.len();
        self.loader.push(batch)?;
        let out = &mut self.loader.out;
        // The baggage faults are not reported from here.
        out.decision_recs.clear();
        if self.changes.is_none() || out.apps.len() != apps_before {
            self.changes = Some(Changes::new(out, self.timeline));
        }
        if self.per_channel.len() != out.channels.len() {
            self.per_channel = super::windows::per_channel(out, self.config);
        }
        let Some(changes) = &self.changes else {
            return Ok(());
        };
        let mut spans = std::mem::take(&mut self.loader.spans);
        let span_rules = std::mem::take(&mut self.loader.span_rules);
        self.last_rule.resize(out.instances.len(), None);
        let (lo, hi) = (self.lo, self.hi);
        let mut k = 0;
        spans.retain_mut(|s| {
            let r = span_rules[k];
            k += 1;
            if !(lo..=hi).contains(&s.start) {
                return false;
            }
            changes.apply(s);
            let last = &mut self.last_rule[s.instance as usize];
            if *last != Some((s.app, s.color, r)) {
                self.rules.insert((s.instance, s.app, s.color, r));
                *last = Some((s.app, s.color, r));
            }
            true
        });
        self.spans += spans.len() as u64;
        self.acc.add(out, &self.per_channel, spans.iter());
        // The vectors are kept for the next batch.
        spans.clear();
        self.loader.spans = spans;
        let mut span_rules = span_rules;
        span_rules.clear();
        self.loader.span_rules = span_rules;
        Ok(())
    }

    /// The counts, with the names they refer to and the instance rules of the spans counted.
    pub fn finish(self) -> super::windows::WindowCounts {
        let rules = named_rules(&self.loader.out, &self.loader.rule_names, self.rules);
        let mut names = self.loader.out;
        names.decision_sets = DecisionSets::default();
        super::windows::WindowCounts::new(self.acc, names, self.spans, rules)
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
    sort_instance_rules(&mut inst);
    inst
}

/// Sorts (instance, app, colour, rule) by instance, app, colour name and rule: the order of
/// [`Spans::instance_rules`] and the report's instances, the same every run.
pub(super) fn sort_instance_rules(rules: &mut [(String, String, Color, String)]) {
    rules.sort_by(|a, b| (&a.0, &a.1, a.2.as_str(), &a.3).cmp(&(&b.0, &b.1, b.2.as_str(), &b.3)));
}

/// One effective configuration change of an app (domain §4).
#[derive(Clone, Copy)]
struct Change {
    /// When, Unix ns.
    t: i64,
    /// The effective channel from then on (interned), if any.
    channel: Option<u32>,
    /// The effective blue_percent from then on.
    blue_percent: u8,
    /// The interval it opens, in [`Spans::intervals`].
    interval: u32,
}

/// Each app's effective configuration changes, by app id, the first at `i64::MIN`.
struct Changes(Vec<Vec<Change>>);

impl Changes {
    /// The changes of every app of `out`, interning their channels in `out.channels` and
    /// writing the intervals between them to `out.intervals`.
    fn new(out: &mut Spans, timeline: &Timeline) -> Self {
        out.intervals = vec![(i64::MIN, i64::MAX)];
        let mut changes = Vec::with_capacity(out.apps.len());
        for a in 0..out.apps.len() as u32 {
            let list = timeline.changes(out.apps.name(a));
            let mut c = Vec::with_capacity(list.len());
            for (k, ch) in list.iter().enumerate() {
                let until = list.get(k + 1).map_or(i64::MAX, |n| n.t_unix_nano);
                let interval = out.intervals.len() as u32;
                out.intervals.push((ch.t_unix_nano, until));
                c.push(Change {
                    t: ch.t_unix_nano,
                    channel: ch
                        .effective
                        .channel
                        .as_ref()
                        .map(|id| out.channels.intern(id.as_str())),
                    blue_percent: ch.effective.blue_percent,
                    interval,
                });
            }
            changes.push(c);
        }
        Self(changes)
    }

    /// Sets `s`'s effective channel, blue_percent and the interval of the app's
    /// configuration holding its start.
    fn apply(&self, s: &mut SpanRec) {
        let c = &self.0[s.app as usize];
        let n = c.partition_point(|ch| ch.t <= s.start);
        let ch = c[n.saturating_sub(1)];
        s.channel = ch.channel;
        s.blue_percent = ch.blue_percent;
        s.interval = ch.interval;
    }
}

/// One part's spans as they enter a merge: its chunk (in range, resolved, ids mapped, split
/// traces taken out), the chunk's decision records indexed from the chunk's start, and the
/// spans of split traces with their records.
type PartOut = (
    Vec<SpanRec>,
    Vec<DecisionRec>,
    Vec<(SpanRec, Option<DecisionRec>)>,
);

/// What a merge of parts shares: the merged names, each part's id maps, the timeline's
/// changes, each part's split traces, which parts lie wholly in the range, and the rules.
struct MergePlan {
    all: Loader,
    maps: Vec<IdMaps>,
    changes: Changes,
    split: Vec<Vec<u128>>,
    whole: Vec<bool>,
    rules: RuleSet,
    lo: i64,
    hi: i64,
    started: std::time::Instant,
    planned: std::time::Duration,
}

impl MergePlan {
    fn new(parts: &[&Loader], lo: i64, hi: i64, timeline: &Timeline) -> Self {
        let started = std::time::Instant::now();
        let mut all = Loader::default();
        let map = |from: &Interner, to: &mut Interner| -> Vec<u32> {
            (0..from.len() as u32)
                .map(|i| to.intern(from.name(i)))
                .collect()
        };
        let maps: Vec<IdMaps> = parts
            .iter()
            .map(|p| {
                let channels = map(&p.out.channels, &mut all.out.channels);
                let sets = &p.out.decision_sets;
                IdMaps {
                    apps: map(&p.out.apps, &mut all.out.apps),
                    instances: map(&p.out.instances, &mut all.out.instances),
                    decision_sets: (0..sets.len() as u32)
                        .map(|i| {
                            all.out.decision_sets.intern(
                                sets.get(i)
                                    .iter()
                                    .map(|&(c, col)| (channels[c as usize], col))
                                    .collect(),
                            )
                        })
                        .collect(),
                    sources: map(&p.out.sources, &mut all.out.sources),
                    rules: map(&p.rule_names, &mut all.rule_names),
                }
            })
            .collect();
        let changes = Changes::new(&mut all.out, timeline);
        let whole: Vec<bool> = parts
            .iter()
            .map(|p| {
                p.start_bounds
                    .is_some_and(|(min, max)| lo <= min && max <= hi)
            })
            .collect();
        // The instance rules of a part wholly in the range are its own list, mapped; the
        // others' come from their in-range spans.
        let mut rules: RuleSet = RuleSet::default();
        for ((p, m), &whole) in parts.iter().zip(&maps).zip(&whole) {
            let mapped = |(inst, app, color, rule): (u32, u32, Color, u32)| {
                (
                    m.instances[inst as usize],
                    m.apps[app as usize],
                    color,
                    m.rules[rule as usize],
                )
            };
            match p.rules.as_ref().filter(|_| whole) {
                Some(own) => rules.extend(own.iter().copied().map(mapped)),
                None => rules.extend(
                    p.spans
                        .iter()
                        .zip(&p.span_rules)
                        .filter(|(s, _)| (lo..=hi).contains(&s.start))
                        .map(|(s, r)| mapped((s.instance, s.app, s.color, *r))),
                ),
            }
        }
        let split = split_traces(parts, &whole, lo, hi);
        Self {
            all,
            maps,
            changes,
            split,
            whole,
            rules,
            lo,
            hi,
            planned: started.elapsed(),
            started,
        }
    }

    /// Runs `one` over `jobs` (one per part, in part order; on two threads, about half the
    /// spans each, from `parallel_min` spans) and assembles the result: the parts' chunks in
    /// order, then the split traces' spans sorted by (trace, start, span id).
    fn run<J: Send + PartJob>(
        self,
        jobs: Vec<J>,
        parallel_min: usize,
        one: impl Fn(J, &MergePlan) -> PartOut + Sync,
    ) -> Spans {
        let total: usize = jobs.iter().map(PartJob::span_count).sum();
        let threads = total >= parallel_min
            && jobs.len() > 1
            && std::thread::available_parallelism().map_or(1, |n| n.get()) > 1;
        let mut jobs = jobs;
        let later_jobs = if threads {
            // The first jobs holding about half the spans stay on this thread.
            let mut before = 0;
            let cut = jobs
                .iter()
                .position(|j| {
                    before += j.span_count();
                    before > total / 2
                })
                .map_or(jobs.len(), |i| (i + 1).min(jobs.len() - 1).max(1));
            jobs.split_off(cut)
        } else {
            Vec::new()
        };
        let plan = &self;
        let one = &one;
        let outs: Vec<PartOut> = std::thread::scope(|scope| {
            let later = (!later_jobs.is_empty()).then(|| {
                scope.spawn(move || {
                    later_jobs
                        .into_iter()
                        .map(|j| one(j, plan))
                        .collect::<Vec<_>>()
                })
            });
            let mut outs: Vec<PartOut> = jobs.into_iter().map(|j| one(j, plan)).collect();
            if let Some(h) = later {
                outs.extend(h.join().expect("merge thread"));
            }
            outs
        });
        let copied = self.started.elapsed();
        let Self {
            all,
            rules,
            planned,
            started,
            ..
        } = self;
        let mut out = all.out;
        let mut chunks = Vec::with_capacity(outs.len() + 1);
        let mut recs = Vec::with_capacity(
            outs.iter()
                .map(|(_, r, t)| r.len() + t.iter().filter(|(_, r)| r.is_some()).count())
                .sum(),
        );
        let mut split = Vec::new();
        let mut offset = 0;
        for (chunk, chunk_recs, chunk_split) in outs {
            recs.extend(chunk_recs.into_iter().map(|r| DecisionRec {
                index: r.index + offset,
                ..r
            }));
            offset += chunk.len();
            chunks.push(chunk);
            split.extend(chunk_split);
        }
        let split_spans = split.len();
        split.sort_by_key(|(s, _)| (s.trace, s.start, s.span));
        let mut tail = Vec::with_capacity(split.len());
        for (s, r) in split {
            if let Some(r) = r {
                recs.push(DecisionRec {
                    index: offset + tail.len(),
                    ..r
                });
            }
            tail.push(s);
        }
        chunks.push(tail);
        out.set_chunks(chunks);
        out.decision_recs = recs;
        out.instance_rules = named_rules(&out, &all.rule_names, rules);
        tracing::debug!(
            spans = out.len(),
            split_spans,
            plan_ms = planned.as_secs_f64() * 1e3,
            copy_ms = (copied - planned).as_secs_f64() * 1e3,
            named_ms = (started.elapsed() - copied).as_secs_f64() * 1e3,
            "merge"
        );
        out
    }

    /// Part `i`'s in-range spans copied, resolved and mapped ([`PartOut`]).
    fn copy_part(&self, i: usize, p: &Loader) -> PartOut {
        let (m, split) = (&self.maps[i], &self.split[i]);
        let n = if self.whole[i] {
            p.len()
        } else {
            p.count_in(self.lo, self.hi)
        };
        let mut spans = Vec::with_capacity(n);
        let mut recs = Vec::new();
        let mut taken = Vec::new();
        let mut d = 0;
        let mut c = 0;
        for (k, s) in p.spans.iter().enumerate() {
            if !(self.lo..=self.hi).contains(&s.start) {
                continue;
            }
            while d < p.out.decision_recs.len() && p.out.decision_recs[d].index < k {
                d += 1;
            }
            let rec = p.out.decision_recs.get(d).filter(|r| r.index == k);
            if in_sorted(split, &mut c, s.trace) {
                taken.push((m.span(s, &self.changes), rec.map(|r| r.at(0))));
                continue;
            }
            if let Some(r) = rec {
                recs.push(r.at(spans.len()));
            }
            spans.push(m.span(s, &self.changes));
        }
        (spans, recs, taken)
    }

    /// Part `i`'s in-range spans resolved and mapped where they lie ([`PartOut`]): the
    /// others are dropped from its vector, which becomes the chunk.
    fn take_part(&self, i: usize, mut p: Loader) -> PartOut {
        let (m, split) = (&self.maps[i], &self.split[i]);
        // The decision records are re-pointed where they lie too: a record whose span leaves
        // the chunk is marked (`usize::MAX`) and dropped after.
        let mut recs = std::mem::take(&mut p.out.decision_recs);
        let mut taken = Vec::new();
        let (mut k, mut kept, mut d, mut c) = (0usize, 0usize, 0usize, 0usize);
        p.spans.retain_mut(|s| {
            let index = k;
            k += 1;
            // A record whose span is gone (none in a well-formed part) is dropped.
            while d < recs.len() && recs[d].index < index {
                recs[d].index = usize::MAX;
                d += 1;
            }
            let rec = if d < recs.len() && recs[d].index == index {
                d += 1;
                Some(&mut recs[d - 1])
            } else {
                None
            };
            if !(self.lo..=self.hi).contains(&s.start) {
                if let Some(r) = rec {
                    r.index = usize::MAX;
                }
                return false;
            }
            m.map_in_place(s, &self.changes);
            if in_sorted(split, &mut c, s.trace) {
                let copy = rec.map(|r| {
                    let copy = r.at(0);
                    r.index = usize::MAX;
                    copy
                });
                taken.push((s.clone(), copy));
                return false;
            }
            if let Some(r) = rec {
                r.index = kept;
            }
            kept += 1;
            true
        });
        for r in &mut recs[d..] {
            r.index = usize::MAX;
        }
        recs.retain(|r| r.index != usize::MAX);
        (std::mem::take(&mut p.spans), recs, taken)
    }
}

/// Each part's in-range traces that also have in-range spans in another part, sorted. Parts
/// must be sorted; a sealed part wholly in range gives its trace list, others are walked.
fn split_traces(parts: &[&Loader], whole: &[bool], lo: i64, hi: i64) -> Vec<Vec<u128>> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    use std::collections::binary_heap::PeekMut;
    let mut split = vec![Vec::new(); parts.len()];
    if parts.iter().filter(|p| !p.is_empty()).count() < 2 {
        return split;
    }
    // Each part's distinct in-range trace ids, sorted: a sealed part wholly in range has
    // them; the others are walked.
    let walked: Vec<Option<Vec<u128>>> = parts
        .iter()
        .zip(whole)
        .map(|(p, &whole)| {
            p.trace_ids.as_ref().filter(|_| whole).is_none().then(|| {
                let mut ids: Vec<u128> = Vec::new();
                for s in p.spans.iter().filter(|s| (lo..=hi).contains(&s.start)) {
                    if ids.last() != Some(&s.trace) {
                        ids.push(s.trace);
                    }
                }
                ids
            })
        })
        .collect();
    let lists: Vec<&[u128]> = parts
        .iter()
        .zip(&walked)
        .map(|(p, w)| match w {
            Some(ids) => ids.as_slice(),
            None => p.trace_ids.as_deref().unwrap_or(&[]),
        })
        .collect();
    // A k-way merge of the lists (a heap of one cursor per part): equal neighbours are a
    // trace held by two parts. It reads each id once and allocates nothing per id, where
    // sorting every (trace, part) pair cost a fifth of a 10M-span analysis.
    let mut heap: BinaryHeap<Reverse<(u128, usize, usize)>> = lists
        .iter()
        .enumerate()
        .filter_map(|(i, l)| l.first().map(|&t| Reverse((t, i, 0))))
        .collect();
    // The last id popped, its part, and whether it was already found split.
    let mut prev: Option<(u128, usize, bool)> = None;
    while let Some(mut top) = heap.peek_mut() {
        let Reverse((t, i, at)) = *top;
        match lists[i].get(at + 1) {
            Some(&next) => *top = Reverse((next, i, at + 1)),
            None => {
                PeekMut::pop(top);
            }
        }
        match &mut prev {
            Some((pt, pi, found)) if *pt == t => {
                if !*found {
                    split[*pi].push(t);
                    *found = true;
                }
                split[i].push(t);
            }
            _ => prev = Some((t, i, false)),
        }
    }
    split
}

/// Whether `t` is in `sorted`, for a walk of increasing `t`: `cursor` moves forward only.
fn in_sorted(sorted: &[u128], cursor: &mut usize, t: u128) -> bool {
    while *cursor < sorted.len() && sorted[*cursor] < t {
        *cursor += 1;
    }
    sorted.get(*cursor) == Some(&t)
}

/// A part handed to a merge, with its index.
trait PartJob {
    /// Spans the part holds (in range or not): the weight that balances the threads.
    fn span_count(&self) -> usize;
}

impl PartJob for (usize, &Loader) {
    fn span_count(&self) -> usize {
        self.1.len()
    }
}

impl PartJob for (usize, Loader) {
    fn span_count(&self) -> usize {
        self.1.len()
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
        spans = out.len(),
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
    let mut spans = out.take_flat();
    for s in &mut spans {
        changes.apply(s);
    }
    if let Some(order) = trace_order(&spans) {
        apply_order(&mut spans, &order);
        reindex(&mut out.decision_recs, &order);
    }
    out.set_chunks(vec![spans]);
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
        let mut source = NO_SOURCE;
        if rec {
            source = source_id(l.out.sources.intern("baggage"));
            l.out.decision_recs.push(DecisionRec {
                index: l.spans.len(),
                malformed_pairs: u32::from(trace),
                conflicting: Vec::new(),
            });
        }
        l.span_rules
            .push(l.rule_names.intern(RULES[rule as usize % 2]));
        l.spans.push(SpanRec {
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
            decision_set: l.out.decision_sets.intern(decisions),
            channel: None,
            blue_percent: 50,
            interval: 0,
            source,
        });
    }

    /// `trade` = [order, pay], started at 5 (blue_percent 50), ratio 20 at 12; `stock` joins
    /// channel `pay` at 8: spans of each app resolve differently on each side of a change.
    fn test_timeline() -> Timeline {
        use dyeline_model::ChannelId;
        use dyeline_model::release::{Channels, Op};
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
            .iter()
            .map(|r| {
                let d: Vec<_> = s
                    .decisions(r)
                    .iter()
                    .map(|(c, col)| (s.channels.name(*c), col.as_str()))
                    .collect();
                format!(
                    "{} {} {} {} {} {d:?} {:?} {} {:?} {:?}",
                    r.trace,
                    r.start,
                    r.span,
                    s.apps.name(r.app),
                    s.instances.name(r.instance),
                    r.channel.map(|c| s.channels.name(c)),
                    r.blue_percent,
                    s.interval(r),
                    (r.source != NO_SOURCE).then(|| s.sources.name(u32::from(r.source)))
                )
            })
            .collect();
        v.extend(s.decision_recs.iter().map(|d| {
            let r = s.get(d.index);
            format!("rec {} {} {}", r.trace, r.span, d.malformed_pairs)
        }));
        v.sort();
        v.push(format!("{:?}", s.instance_rules));
        v
    }

    #[test]
    fn ids_decode_from_hex_of_their_length_only() {
        assert_eq!(
            hex_u128("0123456789abcdefFEDCBA9876543210"),
            Some(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210)
        );
        assert_eq!(hex_u64("00000000000000Ff"), Some(255));
        for bad in [
            "",
            "ff",
            "0123456789abcdef0",
            "012345678gabcdef",
            "+123456789abcdef",
        ] {
            assert_eq!(hex_u64(bad), None, "{bad}");
        }
        assert_eq!(hex_u128("0123456789abcdef"), None);
    }

    /// The (trace, start, span) of each span, in order.
    fn in_order(s: &Spans) -> Vec<(u128, i64, u64)> {
        s.iter().map(|r| (r.trace, r.start, r.span)).collect()
    }

    /// Each trace's spans contiguous and in (start, span id) order.
    fn grouped(s: &Spans) -> bool {
        let mut seen = std::collections::HashSet::new();
        s.traces()
            .all(|t| seen.insert(t[0].trace) && t.is_sorted_by_key(|r| (r.start, r.span)))
    }

    /// Every pass of the analyzer and the dashboard streams these records, and a load holds
    /// one per span: keep them at 80 bytes (the parent id's niche made 144 bytes 128;
    /// interned decision sets and configuration intervals made 128 bytes 80).
    #[test]
    fn span_records_stay_at_80_bytes() {
        assert_eq!(std::mem::size_of::<SpanRec>(), 80);
    }

    proptest! {
        /// Chunks read as one sequence: `iter`, `get` and `halves` agree, the halves are
        /// about equal, and `traces` never joins spans of two chunks.
        #[test]
        fn chunks_read_as_one_sequence(sizes in prop::collection::vec(0usize..5, 0..6)) {
            let mut n = 0u64;
            let chunks: Vec<Vec<SpanRec>> = sizes
                .iter()
                .map(|&k| {
                    (0..k)
                        .map(|_| {
                            n += 1;
                            let mut l = Loader::default();
                            add(&mut l, &(0, n as i64, n, 0, 0, None, false, 0, 0));
                            l.spans.remove(0)
                        })
                        .collect()
                })
                .collect();
            let mut s = Spans::default();
            s.set_chunks(chunks);
            let all: Vec<u64> = s.iter().map(|r| r.span).collect();
            prop_assert_eq!(all.clone(), (1..=n).collect::<Vec<_>>());
            prop_assert_eq!(s.len(), all.len());
            for (i, id) in all.iter().enumerate() {
                prop_assert_eq!(s.get(i).span, *id);
            }
            let [a, b] = s.halves();
            let (a, b): (Vec<u64>, Vec<u64>) = (
                a.iter().copied().flatten().map(|r| r.span).collect(),
                b.iter().copied().flatten().map(|r| r.span).collect(),
            );
            prop_assert_eq!([a.clone(), b.clone()].concat(), all);
            prop_assert!(a.len() <= b.len() && b.len() <= a.len() + 1);
            // Every span is in trace 0, yet each non-empty chunk is its own slice.
            prop_assert_eq!(s.traces().count(), sizes.iter().filter(|&&k| k > 0).count());
        }

        /// Merging parts, each sorted, gives what loading all the spans in the range at once
        /// gives: same spans grouped by trace (a trace's spans may lie in several parts),
        /// decision records on the same spans, same rules; the two-thread copy gives the
        /// one-thread copy's order.
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
                prop_assert!(p.spans.is_sorted_by_key(|s| (s.trace, s.start, s.span)));
            }
            let refs: Vec<&Loader> = parts.iter().collect();
            let merged = Loader::merge_finish(&refs, lo, hi, &timeline);
            prop_assert_eq!(merged.len(), whole.len());
            // The two-thread copy (from 1 span here) gives the same spans in the same order.
            let split = Loader::merge_with(&refs, lo, hi, &timeline, 1);
            prop_assert_eq!(in_order(&split), in_order(&merged));
            prop_assert_eq!(named(&split), named(&merged));
            let recs = |s: &Spans| -> Vec<(usize, u128, u64)> {
                s.decision_recs
                    .iter()
                    .map(|d| (d.index, s.get(d.index).trace, s.get(d.index).span))
                    .collect()
            };
            prop_assert_eq!(recs(&split), recs(&merged));
            // Parts taken instead of copied, on one thread and on two: the same again.
            for parallel_min in [usize::MAX, 1] {
                let owned = Loader::merge_owned_with(parts.clone(), lo, hi, &timeline, parallel_min);
                prop_assert_eq!(in_order(&owned), in_order(&merged));
                prop_assert_eq!(named(&owned), named(&merged));
                prop_assert_eq!(recs(&owned), recs(&merged));
            }
            prop_assert!(grouped(&merged), "traces not grouped");
            prop_assert!(grouped(&split), "traces not grouped");
            prop_assert!(merged.decision_recs.is_sorted_by_key(|d| d.index));
            prop_assert!(split.decision_recs.is_sorted_by_key(|d| d.index));
            prop_assert_eq!(named(&merged), named(&whole.finish(&timeline)));
        }
    }
}
