//! Merging loaders (parts: one per Parquet file, and the memory segments) into one
//! [`Spans`] over a time range: names re-interned per part ([`IdMaps`]), each part's spans
//! copied or taken, resolved as they go, and the traces split between parts gathered
//! ([`split_traces`]); the parts' consumer links ([`Spans::consumer_links`]) are gathered whole.
//! [`Loader::merge_finish`] copies shared parts (the cache's); [`Loader::merge_owned`] takes
//! parts no one else holds.

use dyeline_model::Color;
use dyeline_model::release::Timeline;

use super::loader::Loader;
use super::resolve::Changes;
use crate::analyze::intern::Interner;
use crate::analyze::spans::{
    DecisionRec, LaneFact, LaneTable, NO_SOURCE, RuleSet, SpanRec, Spans, env_id, named_rules,
    source_id,
};

/// Merges of at least this many spans copy on two threads ([`Loader::merge_finish`]).
pub const PARALLEL_COPY_MIN: usize = 50_000;

/// One part's interned ids re-mapped into a merged [`Loader`]'s.
struct IdMaps {
    apps: Vec<u32>,
    instances: Vec<u32>,
    /// Decision sets, their channels mapped.
    decision_sets: Vec<u32>,
    sources: Vec<u32>,
    environments: Vec<u32>,
    rules: Vec<u32>,
    /// Lane facts ([`crate::analyze::spans::LaneTable`]).
    lanes: Vec<u16>,
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
        s.lane = self.lanes[usize::from(s.lane)];
        if let Some(id) = s.env.checked_sub(1) {
            s.env = env_id(self.environments[usize::from(id)]);
        }
        changes.apply(s);
    }
}

impl Loader {
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

/// The lane facts of `from` re-interned in `to` (their lanes and rules too), by id of `from`.
fn map_lanes(from: &LaneTable, to: &mut LaneTable) -> Vec<u16> {
    let names: Vec<u32> = (0..from.names.len() as u32)
        .map(|i| to.names.intern(from.names.name(i)))
        .collect();
    let rules: Vec<u32> = (0..from.rules.len() as u32)
        .map(|i| to.rules.intern(from.rules.name(i)))
        .collect();
    (0..from.facts())
        .map(|i| {
            let f = from.fact(u16::try_from(i).unwrap_or(0));
            to.intern(LaneFact {
                lane: names[f.lane as usize],
                rule: rules[f.rule as usize],
                tag: f.tag.map(|t| names[t as usize]),
            })
        })
        .collect()
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
                    environments: map(&p.out.environments, &mut all.out.environments),
                    rules: map(&p.rule_names, &mut all.rule_names),
                    lanes: map_lanes(&p.out.lanes, &mut all.out.lanes),
                }
            })
            .collect();
        // The consumers' links are keyed by span, not by index: gathered whole.
        for p in parts {
            all.out
                .consumer_links
                .extend(p.out.consumer_links.iter().map(|(k, v)| (*k, v.clone())));
        }
        for p in parts {
            let sources: Vec<u32> = (0..p.out.lanes.sources.len() as u32)
                .map(|i| all.out.lanes.sources.intern(p.out.lanes.sources.name(i)))
                .collect();
            let lanes = &mut all.out.lanes;
            lanes.carriers.extend(
                p.out
                    .lanes
                    .carriers
                    .iter()
                    .map(|(k, &(src, n))| (*k, (src.map(|s| sources[s as usize]), n))),
            );
            for (instance, values) in &p.out.lanes.invalid_values {
                let set = lanes.invalid_values.entry(instance.clone()).or_default();
                set.extend(values.iter().cloned());
            }
        }
        all.out.lane_groups = timeline.lane_groups().clone();
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

#[cfg(test)]
mod tests {
    use dyeline_model::TrafficKind;
    use proptest::prelude::*;

    use super::*;
    use crate::analyze::spans::{Decisions, Kind};

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
            traffic: Some(TrafficKind::Rpc),
            start,
            end: start + 1,
            is_error: false,
            decision_set: l.out.decision_sets.intern(decisions),
            channel: crate::analyze::spans::ChannelRef::NONE,
            blue_percent: 50,
            interval: 0,
            source,
            lane: 0,
            env: 0,
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
                    r.channel.get().map(|c| s.channels.name(c)),
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

        /// `trace_halves` cuts at a trace boundary: the halves hold every span once in order,
        /// no trace is in both, and the first half is the smallest such cut at or past half.
        #[test]
        fn trace_halves_keep_every_trace_whole(
            runs in prop::collection::vec(prop::collection::vec(1usize..5, 0..5), 0..5),
        ) {
            let mut n = 0u64;
            let mut trace = 0u8;
            let chunks: Vec<Vec<SpanRec>> = runs
                .iter()
                .map(|chunk| {
                    let mut out = Vec::new();
                    for &k in chunk {
                        trace += 1;
                        for _ in 0..k {
                            n += 1;
                            let mut l = Loader::default();
                            add(&mut l, &(trace, n as i64, n, 0, 0, None, false, 0, 0));
                            out.push(l.spans.remove(0));
                        }
                    }
                    out
                })
                .collect();
            let mut s = Spans::default();
            s.set_chunks(chunks);
            let all: Vec<(u128, u64)> = s.iter().map(|r| (r.trace, r.span)).collect();
            let [a, b] = s.trace_halves();
            let flat = |h: &Vec<&[SpanRec]>| -> Vec<(u128, u64)> {
                h.iter().copied().flatten().map(|r| (r.trace, r.span)).collect()
            };
            let (a, b) = (flat(&a), flat(&b));
            prop_assert_eq!([a.clone(), b.clone()].concat(), all.clone());
            let first: std::collections::HashSet<u128> = a.iter().map(|x| x.0).collect();
            prop_assert!(b.iter().all(|x| !first.contains(&x.0)));
            prop_assert!(a.len() >= all.len() / 2);
            // One span fewer in the first half would cut its last trace or fall short of half.
            if let Some(last) = a.last() {
                let tail = a.iter().rev().take_while(|x| x.0 == last.0).count();
                prop_assert!(a.len() - tail < all.len() / 2 || all.len() / 2 == 0);
            }
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
