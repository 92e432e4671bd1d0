//! Windowed detections (domain §6.3–6): drained-side traffic, ratio deviation, instance skew
//! and one-sided error spikes, over tumbling windows aligned to whole multiples of the window
//! in Unix time. "Requests" are RPC SERVER spans of apps whose effective channel is the
//! channel at their start. Spans are counted per (channel, app, window) and judged from the
//! counts ([`find`] over loaded spans; [`WindowCounts`] when the counts were taken as the
//! files were read, [`super::load::WindowCounter`]).

use std::collections::{BTreeSet, HashMap};

use dyeline_model::Color;
use dyeline_model::weights::weights;

use super::load::{Kind, SpanRec, Spans, Traffic};
use super::{
    AnalyzerConfig, DrainedSide, ErrorSpike, InstanceSkew, RatioDeviation, Thresholds, hex128,
};

/// Start of the window holding `t`.
pub fn window_start(t: i64, window: i64) -> i64 {
    t.div_euclid(window) * window
}

/// Two-sided p-value of the two-proportion z-test of `e1/n1` against `e2/n2` (pooled
/// variance). 1.0 when it is undefined (no errors at all, or every request failed).
pub fn two_proportion_p(e1: u64, n1: u64, e2: u64, n2: u64) -> f64 {
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let pooled = (e1 + e2) as f64 / (n1f + n2f);
    let var = pooled * (1.0 - pooled) * (1.0 / n1f + 1.0 / n2f);
    if var <= 0.0 {
        return 1.0;
    }
    let z = (e1 as f64 / n1f - e2 as f64 / n2f) / var.sqrt();
    libm::erfc(z.abs() / std::f64::consts::SQRT_2)
}

/// Exemplar trace ids kept per finding.
pub const EXEMPLARS: usize = 5;

/// A hash map with foldhash: the window pass looks up a group, an instance and its
/// exemplars per span, and SipHash and ordered maps showed in its time.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

#[derive(Default)]
struct ColorCounts {
    requests: u64,
    errors: u64,
    /// Requests and exemplars per instance (app-level groups only), in one map: one lookup
    /// per span.
    instances: FastMap<u32, (u64, Vec<u128>)>,
    exemplars: Vec<u128>,
    error_exemplars: Vec<u128>,
}

/// Keeps in `v` the [`EXEMPLARS`] smallest distinct trace ids seen, ascending: the same
/// exemplars whatever order the spans come in (a scan sorted by trace, or a merge of files
/// grouped by trace).
fn keep(v: &mut Vec<u128>, t: u128) {
    if v.len() == EXEMPLARS && v.last().is_some_and(|&max| t >= max) {
        return;
    }
    if let Err(at) = v.binary_search(&t) {
        v.insert(at, t);
        v.truncate(EXEMPLARS);
    }
}

fn hexes(v: &[u128]) -> Vec<String> {
    v.iter().map(|t| hex128(*t)).collect()
}

#[derive(Default)]
struct Group {
    blue: ColorCounts,
    green: ColorCounts,
    blue_percent: u8,
    straddles: bool,
}

impl Group {
    fn side(&mut self, c: Color) -> Option<&mut ColorCounts> {
        match c {
            Color::Blue => Some(&mut self.blue),
            Color::Green => Some(&mut self.green),
            Color::Unknown => None,
        }
    }
}

/// (channel, app, drained side is blue, kind, window start).
type DrainKey = (u32, u32, bool, Traffic, i64);

/// Drained-side traffic of one key: spans, instances, traces, blue_percent in force.
type DrainAcc = (u64, BTreeSet<u32>, BTreeSet<u128>, u8);

/// (channel, Some(app) | None, window start).
type GroupKey = (u32, Option<u32>, i64);

/// The per-window counts of some spans, before judging.
#[derive(Default)]
pub(super) struct Acc {
    drain: FastMap<DrainKey, DrainAcc>,
    groups: FastMap<GroupKey, Group>,
}

impl ColorCounts {
    /// Adds `other`'s counts and exemplars (the smallest ids of both).
    fn absorb(&mut self, other: ColorCounts) {
        self.add_totals(&other);
        for (i, (n, ts)) in other.instances {
            let mine = self.instances.entry(i).or_default();
            mine.0 += n;
            for t in ts {
                keep(&mut mine.1, t);
            }
        }
    }

    /// Adds `other`'s requests, errors and exemplars, not its instances.
    fn add_totals(&mut self, other: &ColorCounts) {
        self.requests += other.requests;
        self.errors += other.errors;
        for &t in &other.exemplars {
            keep(&mut self.exemplars, t);
        }
        for &t in &other.error_exemplars {
            keep(&mut self.error_exemplars, t);
        }
    }
}

impl Acc {
    /// Counts `spans` (some of `all`'s, resolved) into the windows of their effective
    /// channel; `per_channel` is [`per_channel`] of `all`.
    pub(super) fn add<'a>(
        &mut self,
        all: &Spans,
        per_channel: &[(&Thresholds, i64)],
        spans: impl Iterator<Item = &'a SpanRec>,
    ) {
        for s in spans {
            let Some(c) = s.channel else { continue };
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
            if s.kind != Kind::Server {
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

/// The windowed counts of some spans, their names, and what else a report of them says:
/// what [`super::load::WindowCounter`] gives for one file, and [`WindowCounts::merge`]
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
}

impl WindowCounts {
    /// Counts assembled by [`super::load::WindowCounter`].
    pub(super) fn new(
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
        }
        super::load::sort_instance_rules(&mut out.instance_rules);
        out.instance_rules.dedup();
        out
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

/// The findings of `acc`, whose ids are those of `spans`' names.
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

    for ((c, app, color_blue, kind, ws), (count, instances, traces, bp)) in drain {
        let w = window_of(c);
        drained.push(DrainedSide {
            channel: spans.channels.name(c).to_owned(),
            app: spans.apps.name(app).to_owned(),
            color: if color_blue { "blue" } else { "green" },
            kind: kind.as_str(),
            count,
            blue_percent: bp,
            instances: {
                let mut names: Vec<String> = instances
                    .iter()
                    .map(|i| spans.instances.name(*i).to_owned())
                    .collect();
                names.sort();
                names
            },
            trace_ids: traces.iter().map(|t| hex128(*t)).collect(),
            window_start_unix_nano: ws,
            window_end_unix_nano: ws + w,
        });
    }

    for ((c, app, ws), g) in &groups {
        let t: &Thresholds = thresholds(*c);
        let we = ws + window_of(*c);
        let channel = spans.channels.name(*c).to_owned();
        let app_name = app.map(|a| spans.apps.name(a).to_owned());
        // One-sided error spike, channel level and per app.
        for (x, y, color) in [(&g.blue, &g.green, "blue"), (&g.green, &g.blue, "green")] {
            if x.requests < t.spike_min_requests || y.requests < t.spike_min_requests {
                continue;
            }
            let rx = x.errors as f64 / x.requests as f64;
            let ry = y.errors as f64 / y.requests as f64;
            let p = two_proportion_p(x.errors, x.requests, y.errors, y.requests);
            if rx >= t.spike_min_error_rate && rx >= t.spike_factor * ry && p < t.spike_p_value {
                spikes.push(ErrorSpike {
                    channel: channel.clone(),
                    app: app_name.clone(),
                    color,
                    kind: "RPC",
                    requests: x.requests,
                    errors: x.errors,
                    error_rate: rx,
                    other_requests: y.requests,
                    other_errors: y.errors,
                    other_error_rate: ry,
                    p_value: p,
                    exemplar_trace_ids: hexes(&x.error_exemplars),
                    window_start_unix_nano: *ws,
                    window_end_unix_nano: we,
                });
            }
        }
        let Some(app_name) = app_name else { continue };
        // Instance skew.
        for (side, color) in [(&g.blue, "blue"), (&g.green, "green")] {
            if side.requests < t.skew_min_requests || side.instances.is_empty() {
                continue;
            }
            let mean = side.requests as f64 / side.instances.len() as f64;
            let mut over: Vec<(&u32, &(u64, Vec<u128>))> = side
                .instances
                .iter()
                .filter(|(_, (n, _))| *n as f64 > t.skew_factor * mean)
                .collect();
            over.sort_by_key(|(inst, _)| **inst);
            for (inst, (n, exemplars)) in over {
                skew.push(InstanceSkew {
                    channel: channel.clone(),
                    app: app_name.clone(),
                    color,
                    instance: spans.instances.name(*inst).to_owned(),
                    kind: "RPC",
                    requests: *n,
                    color_requests: side.requests,
                    instances_seen: side.instances.len() as u64,
                    mean_requests: mean,
                    exemplar_trace_ids: hexes(exemplars),
                    window_start_unix_nano: *ws,
                    window_end_unix_nano: we,
                });
            }
        }
        // Ratio deviation.
        let n = g.blue.requests + g.green.requests;
        if g.straddles || n < t.ratio_min_requests || n == 0 {
            continue;
        }
        let r = f64::from(g.blue_percent) / 100.0;
        let observed = g.blue.requests as f64 / n as f64;
        let tolerance = (t.ratio_min_gap_pp / 100.0)
            .max(t.ratio_std_errors * (r * (1.0 - r) / n as f64).sqrt());
        if (observed - r).abs() <= tolerance {
            continue;
        }
        let (nb, ng) = (
            g.blue.instances.len() as u32,
            g.green.instances.len() as u32,
        );
        let implied = weights(g.blue_percent)
            .map(|w| w.implied_blue_share(nb, ng))
            .unwrap_or(r);
        let cause = (nb != ng && (implied - observed).abs() <= tolerance)
            .then_some("unequal_cluster_sizes");
        let over = if observed > r { &g.blue } else { &g.green };
        ratio.push(RatioDeviation {
            exemplar_trace_ids: hexes(&over.exemplars),
            channel,
            app: app_name,
            color: if observed > r { "blue" } else { "green" },
            kind: "RPC",
            requests: n,
            blue_share: observed,
            blue_percent: g.blue_percent,
            tolerance,
            weight_implied_share: implied,
            blue_instances: nb,
            green_instances: ng,
            cause,
            window_start_unix_nano: *ws,
            window_end_unix_nano: we,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exemplars_are_the_smallest_ids_whatever_the_order() {
        let ids: Vec<u128> = vec![9, 3, 7, 3, 1, 8, 2, 6, 5, 4];
        let mut forward = Vec::new();
        let mut backward = Vec::new();
        for &t in &ids {
            keep(&mut forward, t);
        }
        for &t in ids.iter().rev() {
            keep(&mut backward, t);
        }
        assert_eq!(forward, vec![1, 2, 3, 4, 5]);
        assert_eq!(backward, forward);
    }

    #[test]
    fn z_test_matches_known_values() {
        // 8% of 1000 against 0.5% of 1000: overwhelming.
        assert!(two_proportion_p(80, 1000, 5, 1000) < 1e-10);
        // equal rates: p = 1
        assert!((two_proportion_p(10, 1000, 10, 1000) - 1.0).abs() < 1e-12);
        // z = 1.96 → p ≈ 0.05: 60/500 vs 40/500, pooled 0.1, se = sqrt(.09*.004)=0.018974, z=2.108
        let p = two_proportion_p(60, 500, 40, 500);
        assert!((p - 0.03504).abs() < 1e-3, "{p}");
        // no errors at all: undefined, never a spike
        assert_eq!(two_proportion_p(0, 100, 0, 100), 1.0);
        assert_eq!(two_proportion_p(1, 0, 0, 100), 1.0);
    }

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
}
