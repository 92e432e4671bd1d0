//! Turning record batches of the analyzer's columns into span records: [`Loader`] adds
//! batches ([`Loader::push`]), sorts them by trace ([`Loader::sort`], [`Loader::seal`]) and
//! finishes them into [`Spans`] resolved from the timeline ([`Loader::finish`]); merges of
//! loaders are in [`super::merge`]. A reader that keeps no record takes each batch's spans
//! out with [`Loader::drain_batch`].

use arrow::array::{Array, AsArray, StringArray};
use arrow::datatypes::{Int64Type, UInt32Type};
use dyeline_model::release::Timeline;
use dyeline_model::schema::col;
use dyeline_model::{Color, TrafficKind};
use smallvec::SmallVec;

use super::columns::{hex_u64, hex_u128, link_ids, parse_color, per_row, sql_err};
use super::resolve::{apply_order, reindex, resolve, trace_order};
use crate::analyze::intern::Interner;
use crate::analyze::spans::{
    DecisionRec, Decisions, Kind, LaneFact, NO_SOURCE, RuleSet, SpanRec, Spans, env_id,
    named_rules, source_id,
};
use crate::sql::SqlError;

/// The lane columns of one batch, read ([`Loader::lane_columns`]).
struct LaneColumns {
    lane: Vec<Option<u32>>,
    rule: Vec<Option<u32>>,
    tag: Vec<Option<u32>>,
    source: Vec<Option<u32>>,
    malformed: Option<arrow::array::UInt32Array>,
    invalid: Option<arrow::array::ListArray>,
}

/// Rows of a batch whose parsed decision entries [`Loader::push`] remembers.
const RECENT_DECISION_ROWS: usize = 8;

/// Turns record batches holding [`LOAD_COLUMN_NAMES`] (found by name) into [`Spans`].
#[derive(Clone, Default)]
pub struct Loader {
    /// Names, decision records; its spans stay empty until [`Loader::finish`].
    pub(super) out: Spans,
    /// The spans added, in the order added until sorted.
    pub(super) spans: Vec<SpanRec>,
    /// Colour rule of each span of `spans` (same index), interned in `rule_names`.
    pub(super) span_rules: Vec<u32>,
    pub(super) rule_names: Interner,
    /// The distinct trace ids of the spans, sorted, set by [`Loader::seal`].
    pub(super) trace_ids: Option<Vec<u128>>,
    /// Min and max span start, set by [`Loader::seal`].
    pub(super) start_bounds: Option<(i64, i64)>,
    /// Distinct (instance, app, colour, rule) ids, set by [`Loader::seal`].
    pub(super) rules: Option<Vec<(u32, u32, Color, u32)>>,
    /// The last lane facts interned and their id.
    last_lane: Option<(LaneFact, u16)>,
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
    /// decisions, no decision source or faults, the end equal to the start, no links (also
    /// for files written before the `links` column). Rows with a trace or span id that is not
    /// hex are skipped. The `links` JSON is parsed only for CONSUMER spans with no parent
    /// ([`Spans::consumer_links`]): other rows never touch it.
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
        let column = |name: &str| batch.column_by_name(name);
        let required =
            |name: &str| column(name).ok_or_else(|| sql_err(format!("no column {name}")));
        let typed_err = |name: &str| sql_err(format!("unexpected type of column {name}"));
        let strings = |name: &str| -> Result<Option<&StringArray>, SqlError> {
            column(name)
                .map(|c| c.as_string_opt::<i32>().ok_or_else(|| typed_err(name)))
                .transpose()
        };
        let trace = strings(col::TRACE_ID)?.ok_or_else(|| sql_err("no column trace_id"))?;
        let span = strings(col::SPAN_ID)?;
        let parent = strings(col::PARENT_SPAN_ID)?;
        let links = strings(col::LINKS)?;
        // The low-cardinality columns, plain or dictionary-encoded (a Parquet file read with
        // dictionaries kept): each distinct value is interned or parsed once per dictionary.
        let apps = per_row(required(col::SERVICE_NAME)?, |v| {
            self.out.apps.intern(v.unwrap_or(""))
        })?;
        let insts = per_row(required(col::INSTANCE_ID)?, |v| {
            self.out.instances.intern(v.unwrap_or(""))
        })?;
        let colors = per_row(required(col::COLOR)?, |v| {
            v.map_or(Color::Unknown, parse_color)
        })?;
        let rules = per_row(required(col::COLOR_RULE)?, |v| {
            self.rule_names.intern(v.unwrap_or("none"))
        })?;
        let kinds = per_row(required(col::SPAN_KIND)?, |v| match v {
            Some("SERVER") => Kind::Server,
            Some("CONSUMER") => Kind::Consumer,
            Some("CLIENT") => Kind::Client,
            Some("PRODUCER") => Kind::Producer,
            _ => Kind::Other,
        })?;
        let lanes = self.lane_columns(batch)?;
        let traffics = per_row(required(col::TRAFFIC_KIND)?, |v| match v {
            Some("RPC") => Some(TrafficKind::Rpc),
            Some("MQ") => Some(TrafficKind::Mq),
            Some("JOB") => Some(TrafficKind::Job),
            _ => None,
        })?;
        let envs = match column(col::DEPLOYMENT_ENVIRONMENT) {
            Some(c) => per_row(c, |v| {
                v.map_or(0, |name| env_id(self.out.environments.intern(name)))
            })?,
            None => vec![0; rows],
        };
        let sources = match column(col::DECISION_SOURCE) {
            Some(c) => per_row(c, |v| v.map(|name| self.out.sources.intern(name)))?,
            None => vec![None; rows],
        };
        let start = required(col::START_TIME_UNIX_NANO)?
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| typed_err(col::START_TIME_UNIX_NANO))?;
        let is_error = required(col::IS_ERROR)?
            .as_boolean_opt()
            .ok_or_else(|| typed_err(col::IS_ERROR))?;
        let end = column(col::END_TIME_UNIX_NANO)
            .map(|c| {
                c.as_primitive_opt::<Int64Type>()
                    .ok_or_else(|| typed_err(col::END_TIME_UNIX_NANO))
            })
            .transpose()?;
        let malformed = column(col::MALFORMED_PAIRS)
            .map(|c| {
                c.as_primitive_opt::<UInt32Type>()
                    .ok_or_else(|| typed_err(col::MALFORMED_PAIRS))
            })
            .transpose()?;
        // Map and list entries are read through their offsets into the child arrays: taking
        // `value(i)` builds a sliced array per row, which cost more than the rest of the row.
        let decisions = match column(col::DECISIONS) {
            Some(c) => {
                let m = c.as_map_opt().ok_or_else(|| typed_err(col::DECISIONS))?;
                let (Some(keys), Some(vals)) = (
                    m.keys().as_string_opt::<i32>(),
                    m.values().as_string_opt::<i32>(),
                ) else {
                    return Err(typed_err(col::DECISIONS));
                };
                Some((m, m.value_offsets(), keys, vals))
            }
            None => None,
        };
        let conflicting = match column(col::CONFLICTING_CHANNELS) {
            Some(c) => {
                let l = c
                    .as_list_opt::<i32>()
                    .ok_or_else(|| typed_err(col::CONFLICTING_CHANNELS))?;
                let vals = l
                    .values()
                    .as_string_opt::<i32>()
                    .ok_or_else(|| typed_err(col::CONFLICTING_CHANNELS))?;
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
            if kinds[i] == Kind::Consumer
                && parent_id.is_none()
                && let Some(links) = links.filter(|l| !l.is_null(i))
            {
                let linked = link_ids(links.value(i));
                if !linked.is_empty() {
                    self.out.consumer_links.insert((t, sp), linked);
                }
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
                channel: crate::analyze::spans::ChannelRef::NONE,
                blue_percent: 50,
                interval: 0,
                source: sources[i].map_or(NO_SOURCE, source_id),
                lane: 0,
                env: envs[i],
            });
            if let Some(l) = &lanes {
                self.lane_row(l, i);
            }
        }
        Ok(())
    }

    /// The lane columns of `batch` (domain §7.1), each value interned once per dictionary;
    /// `None` when the batch has none (a read for the windowed detections, or rows of a file
    /// written before the lane columns, which read as base by default with no tag).
    fn lane_columns(
        &mut self,
        batch: &arrow::array::RecordBatch,
    ) -> Result<Option<LaneColumns>, SqlError> {
        let Some(lane) = batch.column_by_name(col::LANE) else {
            return Ok(None);
        };
        let column = |name: &str| batch.column_by_name(name);
        let table = &mut self.out.lanes;
        let lane = per_row(lane, |v| v.map(|l| table.names.intern(l)))?;
        let rule = match column(col::LANE_RULE) {
            Some(c) => per_row(c, |v| v.map(|r| table.rules.intern(r)))?,
            None => vec![None; batch.num_rows()],
        };
        let tag = match column(col::LANE_TAG) {
            Some(c) => per_row(c, |v| v.map(|t| table.names.intern(t)))?,
            None => vec![None; batch.num_rows()],
        };
        let source = match column(col::LANE_TAG_SOURCE) {
            Some(c) => per_row(c, |v| v.map(|t| table.sources.intern(t)))?,
            None => vec![None; batch.num_rows()],
        };
        let malformed = column(col::MALFORMED_LANE_TAGS)
            .and_then(|c| c.as_primitive_opt::<UInt32Type>().cloned());
        let invalid =
            column(col::LANE_INVALID_VALUES).and_then(|c| c.as_list_opt::<i32>().cloned());
        Ok(Some(LaneColumns {
            lane,
            rule,
            tag,
            source,
            malformed,
            invalid,
        }))
    }

    /// The lane facts of row `i` of `l`, into the span just pushed.
    fn lane_row(&mut self, l: &LaneColumns, i: usize) {
        let table = &mut self.out.lanes;
        let fact = LaneFact {
            lane: l.lane[i].unwrap_or(0),
            rule: l.rule[i].unwrap_or(0),
            tag: l.tag[i],
        };
        // Rows mostly repeat the last row's facts: no lookup for them.
        let id = match self.last_lane {
            Some((f, id)) if f == fact => id,
            _ => {
                let id = table.intern(fact);
                self.last_lane = Some((fact, id));
                id
            }
        };
        let Some(rec) = self.spans.last_mut() else {
            return;
        };
        rec.lane = id;
        let malformed = l
            .malformed
            .as_ref()
            .filter(|m| !m.is_null(i))
            .map_or(0, |m| m.value(i));
        if l.source[i].is_some() || malformed > 0 {
            let server = rec.kind == Kind::Server;
            table
                .carriers
                .insert((rec.trace, rec.span, server), (l.source[i], malformed));
        }
        if let Some(list) = l.invalid.as_ref().filter(|v| !v.is_null(i)) {
            let values = list.value(i);
            let instance = self.out.instances.name(rec.instance).to_owned();
            if let Some(values) = values.as_string_opt::<i32>() {
                let set = table.invalid_values.entry(instance).or_default();
                set.extend(values.iter().flatten().map(str::to_owned));
            }
        }
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

    /// The names interned so far (apps, instances, channels, decision sources and sets):
    /// the ids of the spans added refer to them. Its spans are empty.
    pub fn names(&self) -> &Spans {
        &self.out
    }

    /// Takes out the spans added since the last drain (or since the start), each with its
    /// colour rule (an id of the loader's rule names, see [`Loader::name_rules`]), with the
    /// names their ids refer to; the loader keeps its names and the room of its vectors for
    /// the next batch. The spans' decision records go with them (dropped). For a reader of
    /// batches that keeps no record ([`WindowCounter`]).
    ///
    /// [`WindowCounter`]: crate::analyze::detect::windows::counter::WindowCounter
    pub fn drain_batch(&mut self) -> Drained<'_> {
        self.out.decision_recs.clear();
        self.start_bounds = None;
        self.rules = None;
        self.trace_ids = None;
        Drained {
            names: &mut self.out,
            spans: self.spans.drain(..).zip(self.span_rules.drain(..)),
        }
    }

    /// `rules` (distinct (instance, app, colour, rule) ids of this loader's names) by name,
    /// sorted as [`Spans::instance_rules`] are.
    pub(in crate::analyze) fn name_rules(
        &self,
        rules: RuleSet,
    ) -> Vec<(String, String, Color, String)> {
        named_rules(&self.out, &self.rule_names, rules)
    }

    /// The names ([`Loader::names`]), the loader given up.
    pub fn into_names(self) -> Spans {
        self.out
    }
}

/// What [`Loader::drain_batch`] takes out.
pub struct Drained<'a> {
    /// The loader's names, which the spans' ids refer to (mutable: resolving the spans
    /// interns the timeline's channels).
    pub names: &'a mut Spans,
    /// The spans, each with its colour rule id.
    pub spans: std::iter::Zip<std::vec::Drain<'a, SpanRec>, std::vec::Drain<'a, u32>>,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{BooleanArray, Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    /// Rows of (span id, parent, kind, links) in trace 1, with the columns a load requires.
    fn batch(rows: &[(u64, Option<u64>, &str, Option<&str>)], with_links: bool) -> RecordBatch {
        let n = rows.len();
        let text =
            |v: Vec<Option<String>>| Arc::new(StringArray::from(v)) as arrow::array::ArrayRef;
        let same = |v: &str| text(vec![Some(v.to_owned()); n]);
        let mut columns: Vec<(&str, arrow::array::ArrayRef)> = vec![
            (col::TRACE_ID, same(&format!("{:032x}", 1))),
            (
                col::SPAN_ID,
                text(rows.iter().map(|r| Some(format!("{:016x}", r.0))).collect()),
            ),
            (
                col::PARENT_SPAN_ID,
                text(
                    rows.iter()
                        .map(|r| r.1.map(|p| format!("{p:016x}")))
                        .collect(),
                ),
            ),
            (col::SERVICE_NAME, same("notify")),
            (col::INSTANCE_ID, same("notify-1")),
            (col::COLOR, same("blue")),
            (col::COLOR_RULE, same("deploy.color")),
            (
                col::SPAN_KIND,
                text(rows.iter().map(|r| Some(r.2.to_owned())).collect()),
            ),
            (col::TRAFFIC_KIND, text(vec![None; n])),
            (
                col::START_TIME_UNIX_NANO,
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| i as i64 + 1))),
            ),
            (col::IS_ERROR, Arc::new(BooleanArray::from(vec![false; n]))),
        ];
        if with_links {
            columns.push((
                col::LINKS,
                text(rows.iter().map(|r| r.3.map(str::to_owned)).collect()),
            ));
        }
        let schema = Schema::new(
            columns
                .iter()
                .map(|(name, c)| Field::new(*name, c.data_type().clone(), true))
                .collect::<Vec<_>>(),
        );
        assert!(
            columns
                .iter()
                .all(|(_, c)| c.data_type() != &DataType::Null)
        );
        RecordBatch::try_new(
            Arc::new(schema),
            columns.into_iter().map(|(_, c)| c).collect(),
        )
        .unwrap()
    }

    /// Links are kept for parentless CONSUMER spans only, through a merge too; a batch without
    /// the column (a file of schema version 1) loads with none.
    #[test]
    fn links_are_kept_for_parentless_consumers_only() {
        let link = |span: u64| {
            format!(
                r#"[{{"trace_id":"{:032x}","span_id":"{span:016x}","attributes":{{}}}}]"#,
                2
            )
        };
        let (l3, l4, l5) = (link(3), link(4), link(5));
        let rows = [
            (1, None, "CONSUMER", Some(l3.as_str())),
            (2, Some(1), "CONSUMER", Some(l4.as_str())),
            (3, None, "SERVER", Some(l5.as_str())),
            (4, None, "CONSUMER", None),
            (5, None, "CONSUMER", Some("not json")),
        ];
        let mut loader = Loader::default();
        loader.push(&batch(&rows, true)).unwrap();
        assert_eq!(loader.len(), 5);
        let links: Vec<_> = loader
            .out
            .consumer_links
            .iter()
            .map(|(k, v)| (*k, v.to_vec()))
            .collect();
        assert_eq!(links, [((1, 1), vec![(2, 3)])]);
        let mut old = Loader::default();
        old.push(&batch(&rows, false)).unwrap();
        assert_eq!(old.len(), 5);
        assert!(old.out.consumer_links.is_empty());
        // A merge of both parts keeps the link.
        loader.seal();
        old.seal();
        let timeline = Timeline::from_ops(dyeline_model::release::Channels::new(), Vec::new());
        let merged = Loader::merge_finish(&[&loader, &old], i64::MIN, i64::MAX, &timeline);
        assert_eq!(merged.len(), 10);
        assert_eq!(
            merged.consumer_links.get(&(1, 1)).map(|v| v.to_vec()),
            Some(vec![(2, 3)])
        );
        assert_eq!(loader.finish(&timeline).consumer_links.len(), 1);
    }
}
