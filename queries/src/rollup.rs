//! Per-minute channel rollups kept as spans arrive, so the channel summary (issue: analyzer,
//! item 5) over an hour of live data is answered from a few hundred cells instead of a scan
//! of every span of the hour.
//!
//! Owns [`Rollup`]: for each channel and Unix minute, per colour, the requests (SERVER spans of
//! apps whose effective channel at the span's start is the channel, domain §4), their errors
//! (domain §6.6, the row's `is_error`) and a DDSketch of their durations; plus the
//! cross-colour hops the live evaluation found, each counted once. It counts what
//! [`crate::summary::summarize`] counts, from the rows the store kept (a resent span counts
//! once), with the effective channel taken from the timeline at the span's start.
//!
//! What it cannot know, it does not answer ([`Rollup::summary`] returns `None` and the caller
//! scans spans): ranges that start before the rollup began (the first whole minute after it was
//! created: older spans are on disk from earlier runs or imports) or before its retention,
//! ranges whose ends are not whole minutes, and steps that are not whole minutes. Percentiles
//! from it are estimates (relative error at most [`SKETCH_RELATIVE_ACCURACY`]); counts, error
//! counts, shares and blue_percent are exact.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use dyeline_model::SpanKind;
use dyeline_model::release::Timeline;
use dyeline_model::schema::col;
use sketches_ddsketch::{Config, DDSketch};

use crate::analyze::detect::windows::window_start;
use crate::ports::{KeptRowsObserver, Releases};
use crate::summary::{ColorStep, Percentiles, Summary, check_steps, make_step};

/// One minute, ns.
pub const MINUTE_NS: i64 = 60_000_000_000;

/// Spans starting more than this after the wall clock are not counted (10 minutes).
pub const MAX_FUTURE_NS: i64 = 10 * MINUTE_NS;

/// Relative accuracy of the rollup's latency quantiles: an estimate lies within this fraction
/// of a true sample value at that rank.
pub const SKETCH_RELATIVE_ACCURACY: f64 = 0.01;

fn sketch() -> DDSketch {
    // Durations in ms; 1 ns is the smallest that needs to be told apart from zero.
    DDSketch::new(Config::new(SKETCH_RELATIVE_ACCURACY, 2048, 1e-6))
}

/// The sketch's estimate of the value at rank `round((n - 1) · p)` of its `n` samples, the
/// rank the exact [`crate::summary::percentile_ms`] takes, or `None` when empty. The sketch
/// itself reads rank `floor((n - 1) · q)`: `q` is moved to the middle of the wanted rank, so
/// the estimate is within [`SKETCH_RELATIVE_ACCURACY`] of the exact value, not of a
/// neighbour's (an hour's rollups against an exact scan differed by 1.02 % with the ranks
/// apart).
fn at_nearest_rank(sketch: &DDSketch, p: f64) -> Option<f64> {
    let n = sketch.count();
    if n == 0 {
        return None;
    }
    let last = (n - 1) as f64;
    let rank = (last * p).round();
    let q = if n == 1 {
        0.0
    } else {
        ((rank + 0.5) / last).min(1.0)
    };
    sketch.quantile(q).ok().flatten()
}

/// Requests of one colour in one cell.
#[derive(Clone)]
struct ColorCell {
    requests: u64,
    errors: u64,
    durations_ms: DDSketch,
}

impl Default for ColorCell {
    fn default() -> Self {
        Self {
            requests: 0,
            errors: 0,
            durations_ms: sketch(),
        }
    }
}

impl ColorCell {
    fn absorb(&mut self, other: &ColorCell) {
        self.requests += other.requests;
        self.errors += other.errors;
        // Both sketches share one config, so the merge cannot fail.
        let _ = self.durations_ms.merge(&other.durations_ms);
    }

    fn step(&self) -> ColorStep {
        let q = |p: f64| at_nearest_rank(&self.durations_ms, p).filter(|_| self.requests > 0);
        ColorStep {
            requests: self.requests,
            errors: self.errors,
            p50_ms: q(0.5),
            p99_ms: q(0.99),
        }
    }
}

/// One channel in one minute.
#[derive(Clone, Default)]
struct Cell {
    blue: ColorCell,
    green: ColorCell,
    unknown: u64,
    hops: u64,
}

/// The server's channel rollups, shared by the sink (spans), the live evaluation (hops) and
/// the summary API.
pub type SharedRollup = std::sync::Arc<parking_lot::Mutex<Rollup>>;

/// The rollups of a running server (see the module doc). Not thread-safe by itself: the
/// server holds it behind a mutex; each call is short (one pass over a batch, or over the
/// cells of a range).
pub struct Rollup {
    /// (channel, minute start) → cell.
    cells: BTreeMap<(String, i64), Cell>,
    /// Hops already counted, by a 64-bit hash of (channel, trace id, span id) (a collision
    /// among a day's hops is about as likely as n² / 2⁶⁵), with the minute each came in.
    hops_seen: HashSet<u64>,
    hops_order: VecDeque<(i64, u64)>,
    /// Spans starting before this are not counted (and ranges starting before it not answered).
    covered_from: i64,
    /// Minutes older than the current one minus this are dropped.
    retention_ns: i64,
    /// The current minute (wall clock, from the callers' `now`).
    newest_minute: i64,
    /// Earliest start of a span skipped for starting too far in the future: ranges reaching
    /// it are left to the scan.
    skipped_from: Option<i64>,
    /// `newest_minute` at the last prune (pruning again before it moves drops nothing).
    pruned_for: i64,
}

impl Rollup {
    /// A rollup that counts spans starting at or after the first whole minute at or after
    /// `now_unix_nano`, keeping `retention_ns` (at least one minute) behind the newest minute.
    pub fn new(now_unix_nano: i64, retention_ns: i64) -> Self {
        let covered_from = window_start(now_unix_nano.saturating_add(MINUTE_NS - 1), MINUTE_NS);
        Self {
            cells: BTreeMap::new(),
            hops_seen: HashSet::new(),
            hops_order: VecDeque::new(),
            covered_from,
            retention_ns: retention_ns.max(MINUTE_NS),
            newest_minute: covered_from,
            pruned_for: covered_from,
            skipped_from: None,
        }
    }

    /// First time the rollup answers for, Unix ns (a whole minute).
    pub fn covered_from(&self) -> i64 {
        self.covered_from
            .max(self.newest_minute.saturating_sub(self.retention_ns))
    }

    /// Counts the rows of `batch` (the `spans` schema; rows the store kept) that are SERVER
    /// spans of an app in a channel at their start, per `timeline`, at wall-clock time
    /// `now_unix_nano`. A span starting more than [`MAX_FUTURE_NS`] after `now` (a skewed clock)
    /// is not counted, and ranges reaching its start are then left to the scan, so bad
    /// timestamps cannot grow the rollup. Batches without the needed columns are ignored.
    pub fn observe(&mut self, batch: &RecordBatch, timeline: &Timeline, now_unix_nano: i64) {
        self.advance(now_unix_nano);
        let (Some(app), Some(kind), Some(color), Some(err), Some(start), Some(dur)) = (
            batch.column_by_name(col::SERVICE_NAME),
            batch.column_by_name(col::SPAN_KIND),
            batch.column_by_name(col::COLOR),
            batch.column_by_name(col::IS_ERROR),
            batch.column_by_name(col::START_TIME_UNIX_NANO),
            batch.column_by_name(col::DURATION_NS),
        ) else {
            return;
        };
        let (Some(app), Some(kind), Some(color), Some(err), Some(start), Some(dur)) = (
            app.as_string_opt::<i32>(),
            kind.as_string_opt::<i32>(),
            color.as_string_opt::<i32>(),
            err.as_boolean_opt(),
            start.as_primitive_opt::<Int64Type>(),
            dur.as_primitive_opt::<Int64Type>(),
        ) else {
            return;
        };
        // Each app's configuration changes, resolved once per batch.
        let mut changes: HashMap<&str, Vec<(i64, Option<String>)>> = HashMap::new();
        // A request is a SERVER span (`SpanRec::is_request`): its stored text, compared as is
        // (one string comparison per row, no parsing).
        let server = SpanKind::Server.as_str();
        for i in 0..batch.num_rows() {
            if kind.is_null(i) || kind.value(i) != server || start.is_null(i) {
                continue;
            }
            let t = start.value(i);
            if t < self.covered_from() {
                continue;
            }
            if t > now_unix_nano.saturating_add(MAX_FUTURE_NS) {
                self.skipped_from = Some(self.skipped_from.map_or(t, |s| s.min(t)));
                continue;
            }
            let a = app.value(i);
            let c = changes.entry(a).or_insert_with(|| {
                timeline
                    .changes(a)
                    .into_iter()
                    .map(|ch| (ch.t_unix_nano, ch.effective.channel.map(|c| c.to_string())))
                    .collect()
            });
            let n = c.partition_point(|(at, _)| *at <= t);
            let Some(channel) = &c[n.saturating_sub(1)].1 else {
                continue;
            };
            let minute = window_start(t, MINUTE_NS);
            let cell = self.cells.entry((channel.clone(), minute)).or_default();
            let side = match color.value(i) {
                "blue" => &mut cell.blue,
                "green" => &mut cell.green,
                _ => {
                    cell.unknown += 1;
                    continue;
                }
            };
            side.requests += 1;
            side.errors += u64::from(!err.is_null(i) && err.value(i));
            let d = if dur.is_null(i) {
                0
            } else {
                dur.value(i).max(0)
            };
            side.durations_ms.add(d as f64 / 1e6);
        }
    }

    /// Counts cross-colour hops found by the live evaluation at wall-clock time
    /// `now_unix_nano`: (channel, trace id, span id, time of the offending span, Unix ns); a
    /// hop already counted is not counted again.
    pub fn record_hops<'a>(
        &mut self,
        hops: impl IntoIterator<Item = (&'a str, &'a str, &'a str, i64)>,
        now_unix_nano: i64,
    ) {
        self.advance(now_unix_nano);
        for (channel, trace, span, t) in hops {
            if t < self.covered_from() || t > now_unix_nano.saturating_add(MAX_FUTURE_NS) {
                continue;
            }
            let mut h = std::hash::DefaultHasher::new();
            (channel, trace, span).hash(&mut h);
            let key = h.finish();
            if !self.hops_seen.insert(key) {
                continue;
            }
            let minute = window_start(t, MINUTE_NS);
            self.hops_order.push_back((minute, key));
            self.cells
                .entry((channel.to_owned(), minute))
                .or_default()
                .hops += 1;
        }
    }

    /// Moves the current minute to `now`'s and drops what fell out of the retention.
    fn advance(&mut self, now_unix_nano: i64) {
        self.newest_minute = self
            .newest_minute
            .max(window_start(now_unix_nano, MINUTE_NS));
        self.prune();
    }

    fn prune(&mut self) {
        if self.pruned_for == self.newest_minute {
            return;
        }
        self.pruned_for = self.newest_minute;
        let keep_from = self.covered_from();
        self.cells.retain(|(_, m), _| *m >= keep_from);
        // Hops arrive roughly in time order; drop the old ones from the front.
        while let Some((m, _)) = self.hops_order.front() {
            if *m >= keep_from {
                break;
            }
            if let Some((_, key)) = self.hops_order.pop_front() {
                self.hops_seen.remove(&key);
            }
        }
    }

    /// The summary of `channel` over `[from, to)` in steps of `step_ns` (as
    /// [`crate::summary::summarize`] would answer it, with estimated percentiles), or `None`
    /// when the rollup cannot answer exactly: `from` before [`Rollup::covered_from`], `from`,
    /// `to` or `step_ns` not whole minutes, or an invalid step (the caller's scan reports it).
    pub fn summary(
        &self,
        timeline: &Timeline,
        channel: &str,
        from: i64,
        to: i64,
        step_ns: i64,
    ) -> Option<Summary> {
        if check_steps(from, to, step_ns).is_err()
            || from < self.covered_from()
            || from % MINUTE_NS != 0
            || to % MINUTE_NS != 0
            || step_ns % MINUTE_NS != 0
            || self.skipped_from.is_some_and(|s| s < to)
        {
            return None;
        }
        let first = window_start(from, step_ns);
        let n = ((to - first) + step_ns - 1) / step_ns;
        let mut steps = Vec::with_capacity(n as usize);
        for i in 0..n {
            let start = first + i * step_ns;
            let mut acc = Cell::default();
            let lo = start.max(from);
            let hi = (start + step_ns).min(to);
            for (_, c) in self
                .cells
                .range((channel.to_owned(), lo)..(channel.to_owned(), hi))
            {
                acc.blue.absorb(&c.blue);
                acc.green.absorb(&c.green);
                acc.unknown += c.unknown;
                acc.hops += c.hops;
            }
            steps.push(make_step(
                timeline,
                channel,
                start,
                hi,
                [acc.blue.step(), acc.green.step()],
                acc.unknown,
                acc.hops,
            ));
        }
        Some(Summary {
            channel: channel.to_owned(),
            step_seconds: (step_ns / 1_000_000_000) as u64,
            steps,
            percentiles: Percentiles::Estimated,
        })
    }
}

/// The live rollups as an observer of the rows the store keeps, placed in channels by the
/// timeline of `releases` now.
pub struct RollupObserver {
    /// The rollups.
    pub rollup: SharedRollup,
    /// The release state now.
    pub releases: std::sync::Arc<dyn Releases>,
}

impl KeptRowsObserver for RollupObserver {
    fn observe(&self, kept: &RecordBatch) {
        let timeline = self.releases.timeline();
        self.rollup
            .lock()
            .observe(kept, &timeline, dyeline_model::time::now_unix_nano());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use arrow::array::{BooleanArray, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use dyeline_model::ChannelId;
    use dyeline_model::release::{Channels, Op};

    use super::*;

    proptest! {
        /// The rollup's p50 and p99 are within the sketch's relative accuracy of the exact
        /// nearest-rank percentiles (the same rank): durations from 1 µs to 5 s, in one
        /// sketch or split over two merged ones.
        #[test]
        fn sketch_percentiles_are_within_accuracy_of_the_exact_rank(
            d in prop::collection::vec(1_000i64..5_000_000_000, 1..400),
            split in 0usize..400,
        ) {
            let (mut a, mut b) = (ColorCell::default(), ColorCell::default());
            for (i, &ns) in d.iter().enumerate() {
                let cell = if i < split { &mut a } else { &mut b };
                cell.requests += 1;
                cell.durations_ms.add(ns as f64 / 1e6);
            }
            a.absorb(&b);
            let step = a.step();
            let mut exact = d.clone();
            for (p, est) in [(0.5, step.p50_ms), (0.99, step.p99_ms)] {
                let want = crate::summary::percentile_ms(&mut exact, p).unwrap();
                let got = est.unwrap();
                prop_assert!(
                    (got - want).abs() <= want * SKETCH_RELATIVE_ACCURACY * (1.0 + 1e-9),
                    "p{p}: {got} vs exact {want}"
                );
            }
        }
    }

    /// A whole minute (Unix ns).
    const T0: i64 = 1_700_000_040_000_000_000;
    const S: i64 = 1_000_000_000;

    /// (app, span kind, color, is_error, start, duration ns)
    type Row<'a> = (&'a str, &'a str, &'a str, bool, i64, i64);

    fn batch(rows: &[Row]) -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new(col::SERVICE_NAME, DataType::Utf8, false),
            Field::new(col::SPAN_KIND, DataType::Utf8, false),
            Field::new(col::COLOR, DataType::Utf8, false),
            Field::new(col::IS_ERROR, DataType::Boolean, false),
            Field::new(col::START_TIME_UNIX_NANO, DataType::Int64, false),
            Field::new(col::DURATION_NS, DataType::Int64, false),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))),
                Arc::new(BooleanArray::from_iter(rows.iter().map(|r| Some(r.3)))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.4))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.5))),
            ],
        )
        .unwrap()
    }

    /// `trade` = [order]; started at T0 (blue_percent 50), ratio 20 at T0 + 90 s; `order`
    /// moves to channel `pay` at T0 + 150 s (trade finishes, pay takes it and starts).
    fn timeline() -> Timeline {
        let id = |s: &str| ChannelId::new(s).unwrap();
        let mut initial = Channels::new();
        initial.apply(&id("trade"), &Op::Apps(vec!["order".into()]));
        Timeline::from_ops(
            initial,
            vec![
                (T0, id("trade"), Op::Start),
                (T0 + 90 * S, id("trade"), Op::Ratio(20)),
                (T0 + 150 * S, id("trade"), Op::Finish),
                (T0 + 150 * S, id("trade"), Op::Apps(vec![])),
                (T0 + 150 * S, id("pay"), Op::Apps(vec!["order".into()])),
                (T0 + 150 * S, id("pay"), Op::Start),
            ],
        )
    }

    #[test]
    fn counts_match_the_spans_and_percentiles_are_within_the_sketch_accuracy() {
        let tl = timeline();
        let mut r = Rollup::new(T0 - 30 * S, 24 * 3600 * S);
        assert_eq!(r.covered_from(), T0);
        let mut rows: Vec<Row> = Vec::new();
        // Minute 0: blue 1..=100 ms (2 errors), green 101..=150 ms, 3 unknown.
        for i in 1..=100 {
            rows.push((
                "order",
                "SERVER",
                "blue",
                i <= 2,
                T0 + i * 100_000_000,
                i * 1_000_000,
            ));
        }
        for i in 101..=150 {
            rows.push(("order", "SERVER", "green", false, T0 + 5 * S, i * 1_000_000));
        }
        for _ in 0..3 {
            rows.push(("order", "SERVER", "unknown", false, T0 + 6 * S, 1_000_000));
        }
        // Not counted: a CLIENT span, an app in no channel, a span before the rollup began.
        rows.push(("order", "CLIENT", "blue", true, T0 + S, 1));
        rows.push(("risk", "SERVER", "blue", true, T0 + S, 1));
        rows.push(("order", "SERVER", "blue", true, T0 - S, 1));
        // Minute 1: 4 green, one an error. Minute 2 (from 150 s order is in pay): 2 blue in
        // trade before the switch, 5 blue in pay after it.
        for i in 0..4 {
            rows.push(("order", "SERVER", "green", i == 0, T0 + 70 * S, 5_000_000));
        }
        for _ in 0..2 {
            rows.push(("order", "SERVER", "blue", false, T0 + 140 * S, 5_000_000));
        }
        for _ in 0..5 {
            rows.push(("order", "SERVER", "blue", false, T0 + 160 * S, 5_000_000));
        }
        // Arriving in two batches changes nothing.
        let (a, b) = rows.split_at(77);
        r.observe(&batch(a), &tl, T0 + 200 * S);
        r.observe(&batch(b), &tl, T0 + 200 * S);
        // Hops: one sent twice, one in minute 1, one of another channel.
        r.record_hops(
            [
                ("trade", "t1", "s1", T0 + 10 * S),
                ("trade", "t2", "s2", T0 + 65 * S),
                ("pay", "t3", "s3", T0 + 170 * S),
            ],
            T0 + 200 * S,
        );
        r.record_hops([("trade", "t1", "s1", T0 + 10 * S)], T0 + 201 * S);

        let s = r.summary(&tl, "trade", T0, T0 + 180 * S, 60 * S).unwrap();
        assert_eq!(s.percentiles, Percentiles::Estimated);
        assert_eq!(s.steps.len(), 3);
        let m0 = &s.steps[0];
        assert_eq!(m0.start_unix_nano, T0.to_string());
        assert_eq!((m0.blue.requests, m0.blue.errors), (100, 2));
        assert_eq!((m0.green.requests, m0.green.errors), (50, 0));
        assert_eq!(m0.unknown_requests, 3);
        assert_eq!(m0.blue_share, Some(100.0 / 150.0));
        assert_eq!(m0.blue_percent, Some(50));
        assert_eq!(m0.hops, 1);
        // Exact p50 of 1..=100 ms lies between 50 and 51 ms (nearest rank), p99 at 99..100.
        let within = |v: Option<f64>, lo: f64, hi: f64| {
            let v = v.unwrap();
            assert!(
                v >= lo * (1.0 - SKETCH_RELATIVE_ACCURACY)
                    && v <= hi * (1.0 + SKETCH_RELATIVE_ACCURACY),
                "{v} not in [{lo}, {hi}] ± 1 %"
            );
        };
        within(m0.blue.p50_ms, 50.0, 51.0);
        within(m0.blue.p99_ms, 99.0, 100.0);
        within(m0.green.p50_ms, 125.0, 126.0);
        let m1 = &s.steps[1];
        assert_eq!(
            (m1.green.requests, m1.green.errors, m1.blue.requests),
            (4, 1, 0)
        );
        assert_eq!(m1.blue_share, Some(0.0));
        assert_eq!(m1.blue.p50_ms, None);
        within(m1.green.p99_ms, 5.0, 5.0);
        // The ratio change at 90 s is in force at the end of minute 1.
        assert_eq!(m1.blue_percent, Some(20));
        assert_eq!(m1.hops, 1);
        let m2 = &s.steps[2];
        assert_eq!(
            m2.blue.requests, 2,
            "only the spans before order left trade"
        );
        assert_eq!(
            m2.blue_percent, None,
            "trade is idle at the end of minute 2"
        );

        // Two-minute steps (aligned to the epoch, as the scan's) add the minutes up; the
        // last step stops at the range's end. Pay holds the rest.
        let two = r.summary(&tl, "trade", T0, T0 + 180 * S, 120 * S).unwrap();
        assert_eq!(two.steps.len(), 2);
        let (s0, s1) = (&two.steps[0], &two.steps[1]);
        assert_eq!((s0.blue.requests, s0.blue.errors), (100, 2));
        assert_eq!((s0.green.requests, s0.green.errors), (54, 1));
        assert_eq!((s0.unknown_requests, s0.hops), (3, 2));
        assert_eq!(
            (s1.start_unix_nano.as_str(), s1.blue.requests),
            ((T0 + 120 * S).to_string().as_str(), 2)
        );
        let pay = r.summary(&tl, "pay", T0, T0 + 180 * S, 60 * S).unwrap();
        assert_eq!(pay.steps[2].blue.requests, 5);
        assert_eq!(pay.steps[2].hops, 1);
        assert_eq!(pay.steps[0].blue_share, None);
    }

    #[test]
    fn ranges_it_cannot_answer_exactly_are_left_to_the_scan() {
        let tl = timeline();
        let r = Rollup::new(T0 + S, 3600 * S);
        assert_eq!(r.covered_from(), T0 + 60 * S);
        let m = 60 * S;
        assert!(
            r.summary(&tl, "trade", T0, T0 + 3 * m, m).is_none(),
            "before it began"
        );
        assert!(r.summary(&tl, "trade", T0 + m, T0 + 3 * m, m).is_some());
        assert!(r.summary(&tl, "trade", T0 + m + 1, T0 + 3 * m, m).is_none());
        assert!(r.summary(&tl, "trade", T0 + m, T0 + 3 * m - 1, m).is_none());
        assert!(
            r.summary(&tl, "trade", T0 + m, T0 + 3 * m, 30 * S)
                .is_none()
        );
        assert!(r.summary(&tl, "trade", T0 + m, T0 + 3 * m, 0).is_none());
    }

    #[test]
    fn minutes_past_the_retention_are_dropped_and_no_longer_answered() {
        let tl = timeline();
        let mut r = Rollup::new(T0, 120 * S);
        r.observe(
            &batch(&[("order", "SERVER", "blue", false, T0 + S, 1_000_000)]),
            &tl,
            T0 + 2 * S,
        );
        let one = r.summary(&tl, "trade", T0, T0 + 60 * S, 60 * S).unwrap();
        assert_eq!(one.steps[0].blue.requests, 1);
        // Ten minutes later the retention edge has passed the first minute.
        r.observe(
            &batch(&[("order", "SERVER", "blue", false, T0 + 600 * S, 1_000_000)]),
            &tl,
            T0 + 601 * S,
        );
        assert_eq!(r.covered_from(), T0 + 480 * S);
        assert!(r.summary(&tl, "trade", T0, T0 + 60 * S, 60 * S).is_none());
        assert_eq!(r.cells.len(), 1);
    }

    #[test]
    fn a_span_from_a_skewed_clock_is_not_counted_and_its_range_goes_to_the_scan() {
        let tl = timeline();
        let mut r = Rollup::new(T0, 24 * 3600 * S);
        let now = T0 + 30 * S;
        r.observe(
            &batch(&[
                ("order", "SERVER", "blue", false, T0 + S, 1_000_000),
                (
                    "order",
                    "SERVER",
                    "blue",
                    false,
                    T0 + 365 * 86_400 * S,
                    1_000_000,
                ),
            ]),
            &tl,
            now,
        );
        assert_eq!(r.cells.len(), 1, "the far-future span made no cell");
        assert!(r.summary(&tl, "trade", T0, T0 + 60 * S, 60 * S).is_some());
        assert!(
            r.summary(&tl, "trade", T0, T0 + 366 * 86_400 * S, 3600 * S)
                .is_none()
        );
    }
}
