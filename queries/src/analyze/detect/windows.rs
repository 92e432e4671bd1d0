//! Windowed detections (domain §6.3–6): drained-side traffic, ratio deviation, instance skew
//! and one-sided error spikes, over tumbling windows aligned to whole multiples of the window
//! in Unix time. "Requests" are RPC SERVER spans of apps whose effective channel is the
//! channel at their start. Spans are counted per (channel, app, window) ([`Acc`], what is
//! counted in [`counts`]) and judged from the counts, each detection in its own file
//! ([`super::drained_side`], [`super::ratio_deviation`], [`super::instance_skew`],
//! [`super::error_spike`]): [`find`] over loaded spans; [`WindowCounts`] when the counts were
//! taken as the files were read ([`counter::WindowCounter`]).

pub mod counter;
pub(in crate::analyze::detect) mod counts;
mod wire;

use std::borrow::Borrow;

use dyeline_model::Color;

use super::{drained_side, error_spike, instance_skew, ratio_deviation};
use crate::analyze::config::{AnalyzerConfig, Thresholds};
use crate::analyze::findings::{DrainedSide, ErrorSpike, InstanceSkew, RatioDeviation};
use crate::analyze::spans::{SpanRec, Spans, sort_instance_rules};
pub use counts::EXEMPLARS;
use counts::{ColorCounts, DrainAcc, DrainKey, FastMap, Group, GroupAt, GroupKey, keep};

/// Start of the window holding `t`.
pub fn window_start(t: i64, window: i64) -> i64 {
    t.div_euclid(window) * window
}

/// The per-window counts of some spans, before judging.
#[derive(Default)]
pub(super) struct Acc {
    drain: FastMap<DrainKey, DrainAcc>,
    groups: FastMap<GroupKey, Group>,
}

impl Acc {
    /// Counts `spans` (some of `all`'s, resolved) into the windows of their effective
    /// channel; `per_channel` is [`per_channel`] of `all`.
    pub(super) fn add<S: Borrow<SpanRec>>(
        &mut self,
        all: &Spans,
        per_channel: &[(&Thresholds, i64)],
        spans: impl Iterator<Item = S>,
    ) {
        for s in spans {
            let s: &SpanRec = s.borrow();
            let Some(c) = s.channel.get() else { continue };
            let (since, until) = all.interval(s);
            let (t, w) = per_channel[c as usize];
            let ws = window_start(s.start, w);
            if let Some(kind) = s.traffic {
                let drained_color = match s.blue_percent {
                    0 => Some(Color::Blue),
                    100 => Some(Color::Green),
                    _ => None,
                };
                let grace = t.grace.as_nanos() as i64;
                if drained_color == Some(s.color) && s.start.saturating_sub(since) > grace {
                    let e = self
                        .drain
                        .entry((c, s.app, s.color == Color::Blue, kind, ws))
                        .or_default();
                    e.0 += 1;
                    e.1.insert(s.instance);
                    e.2.insert(s.trace);
                    e.3 = s.blue_percent;
                }
            }
            if !s.is_request() {
                continue;
            }
            let straddles = since > ws || until < ws + w;
            // Per app only: the channel's groups are the sums of its apps' (`judge`).
            let g = self.groups.entry((c, Some(s.app), ws)).or_default();
            g.blue_percent = s.blue_percent;
            g.straddles |= straddles;
            if let Some(side) = g.side(s.color) {
                side.requests += 1;
                side.errors += u64::from(s.is_error);
                keep(&mut side.exemplars, s.trace);
                if s.is_error {
                    keep(&mut side.error_exemplars, s.trace);
                }
                let inst = side.instances.entry(s.instance).or_default();
                inst.0 += 1;
                keep(&mut inst.1, s.trace);
            }
        }
    }

    /// The counts with app, instance and channel ids mapped through `apps`, `instances`
    /// and `channels` (old id → new id; each map one-to-one).
    fn remap(self, apps: &[u32], instances: &[u32], channels: &[u32]) -> Acc {
        let app = |a: u32| apps[a as usize];
        let inst = |i: u32| instances[i as usize];
        let side = |mut c: ColorCounts| {
            c.instances = c.instances.into_iter().map(|(i, v)| (inst(i), v)).collect();
            c
        };
        Acc {
            drain: self
                .drain
                .into_iter()
                .map(|((c, a, blue, kind, ws), (n, is, ts, bp))| {
                    (
                        (channels[c as usize], app(a), blue, kind, ws),
                        (n, is.into_iter().map(inst).collect(), ts, bp),
                    )
                })
                .collect(),
            groups: self
                .groups
                .into_iter()
                .map(|((c, a, ws), g)| {
                    (
                        (channels[c as usize], a.map(app), ws),
                        Group {
                            blue: side(g.blue),
                            green: side(g.green),
                            ..g
                        },
                    )
                })
                .collect(),
        }
    }

    /// Adds `other`'s counts. The result is what one pass over both sets of spans gives:
    /// counts, instances and traces add up, exemplars are the smallest ids of both; a
    /// window's blue_percent is one of its spans' (they all share it where it is used: in
    /// the drained side, whose key fixes it, and in ratio deviation, which skips windows
    /// that straddle a change).
    fn absorb(&mut self, other: Acc) {
        for (k, (n, instances, traces, bp)) in other.drain {
            let e = self.drain.entry(k).or_default();
            e.0 += n;
            e.1.extend(instances);
            e.2.extend(traces);
            e.3 = bp;
        }
        for (k, g) in other.groups {
            let mine = self.groups.entry(k).or_default();
            mine.blue_percent = g.blue_percent;
            mine.straddles |= g.straddles;
            mine.blue.absorb(g.blue);
            mine.green.absorb(g.green);
        }
    }
}

/// Each channel's thresholds and window (ns, at least 1), by channel id of `names`.
pub(super) fn per_channel<'a>(
    names: &Spans,
    config: &'a AnalyzerConfig,
) -> Vec<(&'a Thresholds, i64)> {
    (0..names.channels.len() as u32)
        .map(|c| {
            let t = config.for_channel(names.channels.name(c));
            (t, t.window.as_nanos().max(1) as i64)
        })
        .collect()
}

/// Runs the four windowed detections, counting on two threads when `parallel` (each half
/// of the spans, then the counts added: the same findings as one pass).
pub fn find(
    spans: &Spans,
    config: &AnalyzerConfig,
    parallel: bool,
    drained: &mut Vec<DrainedSide>,
    ratio: &mut Vec<RatioDeviation>,
    skew: &mut Vec<InstanceSkew>,
    spikes: &mut Vec<ErrorSpike>,
) {
    let per_channel = per_channel(spans, config);
    let mut acc = Acc::default();
    if parallel {
        let [first, second] = spans.halves();
        let other = std::thread::scope(|scope| {
            let h = scope.spawn(|| {
                let mut a = Acc::default();
                a.add(spans, &per_channel, second.iter().flat_map(|c| c.iter()));
                a
            });
            acc.add(spans, &per_channel, first.iter().flat_map(|c| c.iter()));
            h.join().expect("window counting thread")
        });
        acc.absorb(other);
    } else {
        acc.add(spans, &per_channel, spans.iter());
    }
    judge(acc, spans, config, drained, ratio, skew, spikes);
}

/// The per-window counts of `spans`, not judged: what a cluster node publishes of its own
/// spans for the alert leader to merge with the others' ([`WindowCounts::merge`]) and judge.
pub fn count(spans: &Spans, config: &AnalyzerConfig) -> WindowCounts {
    let per_channel = per_channel(spans, config);
    let mut acc = Acc::default();
    acc.add(spans, &per_channel, spans.iter());
    let mut names = Spans::default();
    names.apps = spans.apps.clone();
    names.instances = spans.instances.clone();
    names.channels = spans.channels.clone();
    WindowCounts::new(acc, names, spans.len() as u64, spans.instance_rules.clone())
}

/// The windowed counts of some spans, their names, and what else a report of them says:
/// what [`WindowCounter`](counter::WindowCounter) gives for one file, and [`WindowCounts::merge`]
/// for many. Memory: one entry per window, app, colour and instance (and per drained-side
/// trace), not per span.
#[derive(Default)]
pub struct WindowCounts {
    /// The counts, by the ids of `names`.
    acc: Acc,
    /// Apps, instances and channels of the counts' ids (its spans are empty).
    pub names: Spans,
    /// Spans counted (starting in the range).
    pub spans: u64,
    /// (instance, app, colour, rule) of the spans counted, sorted.
    pub instance_rules: Vec<(String, String, Color, String)>,
    /// The deployment environments of the spans counted (`None`: none); the counts of more
    /// than one mix them, and are judged per environment from the spans instead
    /// ([`crate::analyze::run`]). Not sent between cluster nodes.
    pub environments: std::collections::BTreeSet<Option<String>>,
}

impl WindowCounts {
    /// Counts assembled by [`WindowCounter`](counter::WindowCounter).
    fn new(
        acc: Acc,
        names: Spans,
        spans: u64,
        instance_rules: Vec<(String, String, Color, String)>,
    ) -> Self {
        Self {
            acc,
            names,
            spans,
            instance_rules,
            environments: Default::default(),
        }
    }

    /// The counts of all `parts` as one: names re-interned, counts added (as the two
    /// threads' halves in [`find`]), the instance rules united.
    pub fn merge(parts: Vec<WindowCounts>) -> WindowCounts {
        let mut out = WindowCounts::default();
        for p in parts {
            let names = &p.names;
            let apps: Vec<u32> = (0..names.apps.len() as u32)
                .map(|a| out.names.apps.intern(names.apps.name(a)))
                .collect();
            let instances: Vec<u32> = (0..names.instances.len() as u32)
                .map(|i| out.names.instances.intern(names.instances.name(i)))
                .collect();
            let channels: Vec<u32> = (0..names.channels.len() as u32)
                .map(|c| out.names.channels.intern(names.channels.name(c)))
                .collect();
            out.acc.absorb(p.acc.remap(&apps, &instances, &channels));
            out.spans += p.spans;
            out.instance_rules.extend(p.instance_rules);
            out.environments.extend(p.environments);
        }
        sort_instance_rules(&mut out.instance_rules);
        out.instance_rules.dedup();
        out
    }

    /// Drops the counts of windows starting before `from` (Unix ns).
    pub fn retain_from(&mut self, from: i64) {
        self.acc.drain.retain(|k, _| k.4 >= from);
        self.acc.groups.retain(|k, _| k.2 >= from);
    }

    /// The four windowed detections' findings from the counts (unsorted).
    pub fn judge(
        self,
        config: &AnalyzerConfig,
        drained: &mut Vec<DrainedSide>,
        ratio: &mut Vec<RatioDeviation>,
        skew: &mut Vec<InstanceSkew>,
        spikes: &mut Vec<ErrorSpike>,
    ) {
        judge(self.acc, &self.names, config, drained, ratio, skew, spikes);
    }
}

/// The findings of `acc`, whose ids are those of `spans`' names: each detection judges the
/// counts in its own file.
fn judge(
    acc: Acc,
    spans: &Spans,
    config: &AnalyzerConfig,
    drained: &mut Vec<DrainedSide>,
    ratio: &mut Vec<RatioDeviation>,
    skew: &mut Vec<InstanceSkew>,
    spikes: &mut Vec<ErrorSpike>,
) {
    let per_channel = per_channel(spans, config);
    let thresholds = |c: u32| per_channel[c as usize].0;
    let window_of = |c: u32| per_channel[c as usize].1;
    // The findings are sorted by the caller, so the maps' order does not matter.
    let Acc { drain, mut groups } = acc;
    // Each channel's groups: the sums of its apps' in the window (the instances are
    // judged per app only).
    let mut channels: FastMap<(u32, i64), Group> = FastMap::default();
    for ((c, app, ws), g) in &groups {
        if app.is_some() {
            let total = channels.entry((*c, *ws)).or_default();
            total.straddles |= g.straddles;
            total.blue_percent = g.blue_percent;
            total.blue.add_totals(&g.blue);
            total.green.add_totals(&g.green);
        }
    }
    groups.extend(channels.into_iter().map(|((c, ws), g)| ((c, None, ws), g)));

    drained_side::judge(drain, spans, window_of, drained);

    for ((c, app, ws), g) in &groups {
        let t: &Thresholds = thresholds(*c);
        let at = GroupAt {
            channel: spans.channels.name(*c),
            app: app.map(|a| spans.apps.name(a)),
            start: *ws,
            end: ws + window_of(*c),
        };
        // One-sided error spike, channel level and per app.
        error_spike::judge(g, t, &at, spikes);
        if at.app.is_none() {
            continue;
        }
        // Per app only.
        instance_skew::judge(g, t, &at, &spans.instances, skew);
        ratio_deviation::judge(g, t, &at, ratio);
    }
}

#[cfg(test)]
mod tests {
    use dyeline_model::release::Op;

    use super::*;
    use crate::analyze::report::report;
    use crate::analyze::spans::Kind;
    use crate::analyze::testkit::{B, Sp};

    #[test]
    fn windows_align_to_unix_multiples() {
        let m = 60_000_000_000;
        assert_eq!(
            window_start(1_735_736_460_000_000_000, m),
            1_735_736_460_000_000_000
        );
        assert_eq!(
            window_start(1_735_736_519_999_999_999, m),
            1_735_736_460_000_000_000
        );
        assert_eq!(window_start(-1, m), -m);
    }

    #[test]
    fn window_counts_on_two_threads_find_what_one_pass_finds() {
        // Ratio deviation (20 % set, an even split served), instance skew, a one-sided spike and
        // drained-side JOBs, over three windows; the spans of each window's groups fall in both
        // halves of the list, so the halves' counts and exemplars must be added up.
        let mut b = B::new();
        b.channel("trade", &["order", "settle"])
            .op(-100.0, "trade", Op::Start)
            .op(-100.0, "trade", Op::Ratio(20))
            .op(125.0, "trade", Op::Ratio(0));
        for w in [0.0, 60.0] {
            b.requests("order", "order-b1", Color::Blue, w, 200, 0)
                .requests("order", "order-b2", Color::Blue, w, 20, 1)
                .requests("order", "order-b3", Color::Blue, w, 20, 0)
                .requests("order", "order-g1", Color::Green, w, 120, 25)
                .requests("order", "order-g2", Color::Green, w, 110, 20);
        }
        for (i, t) in [140.0, 150.0, 160.0, 170.0].into_iter().enumerate() {
            b.span(Sp {
                trace: 9_000 + i as u128,
                app: "settle",
                instance: if i % 2 == 0 { "settle-b1" } else { "settle-b2" },
                kind: Kind::Other,
                t,
                ..Sp::default()
            });
        }
        let spans = b.resolved();
        let config = AnalyzerConfig::default();
        // Under PARALLEL_DETECTIONS_MIN spans: one pass.
        let one = report(&spans, &config, false);
        assert!(
            !one.ratio_deviation.is_empty()
                && !one.instance_skew.is_empty()
                && !one.error_spike.is_empty()
                && !one.drained_side.is_empty(),
            "every windowed detection finds something: {} {} {} {}",
            one.ratio_deviation.len(),
            one.instance_skew.len(),
            one.error_spike.len(),
            one.drained_side.len()
        );
        let (mut drained, mut ratio, mut skew, mut spikes) = Default::default();
        super::find(
            &spans,
            &config,
            true,
            &mut drained,
            &mut ratio,
            &mut skew,
            &mut spikes,
        );
        fn sorted<T: serde::Serialize>(v: &[T]) -> Vec<String> {
            let mut s: Vec<String> = v
                .iter()
                .map(|x| serde_json::to_string(x).unwrap())
                .collect();
            s.sort();
            s
        }
        assert_eq!(sorted(&drained), sorted(&one.drained_side));
        assert_eq!(sorted(&ratio), sorted(&one.ratio_deviation));
        assert_eq!(sorted(&skew), sorted(&one.instance_skew));
        assert_eq!(sorted(&spikes), sorted(&one.error_spike));
    }
}
