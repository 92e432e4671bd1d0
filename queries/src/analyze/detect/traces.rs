//! Per-trace detections (domain §6.1–2): cross-colour hops and missing decisions. Each trace is
//! judged as a whole (its spans may have arrived in any batch and order); the root-most span
//! of a channel is chosen by ancestor count, then start, then span id, so clock skew cannot
//! reorder it. Parents follow [`crate::analyze::parents`] (a Zipkin/B3 SERVER half is the
//! child of the CLIENT half sharing its span id), and a batch consumer's CONSUMER span with no
//! parent has the app of the span it links to as its caller (domain §3, §6.2).

use std::collections::HashMap;

use dyeline_model::{Color, TrafficKind};

use super::windows::window_start;
use crate::analyze::config::Thresholds;
use crate::analyze::findings::{
    AlertCounts, CrossColorHop, Detection, MissingDecision, Observation, alert_labels,
    counted_summary, hex64, hex128, time_text,
};
use crate::analyze::parents::SpanIds;
use crate::analyze::spans::{Kind, SpanRec, Spans};

/// App name used when no ancestor (or parent) exists.
pub const NONE_APP: &str = "(none)";
/// Caller app when the parent span is referenced but not in the data.
pub const UNKNOWN_APP: &str = "(unknown)";

/// Span id → its place in the trace, SERVER halves apart (foldhash: the map is filled and
/// read for every span of every trace in a channel, and SipHash showed in the pass's time).
type SpanIndex = SpanIds;

/// (trace, span id) → the app of that span, for the spans that parentless consumers link to.
type LinkedApps = HashMap<(u128, u64), u32, foldhash::fast::RandomState>;

/// Apps between a hop's span and its nearest ancestor in the channel that `via` names at most:
/// the apps of the nearest this-many spans above the hop span. A longer path (a hostile
/// trace: a chain of spans out of the channel above many hop spans) is cut there and `via`
/// starts with [`VIA_CUT`], so a trace's hops cost at most this many steps each.
pub const MAX_VIA_SPANS: usize = 256;
/// First entry of a `via` cut at [`MAX_VIA_SPANS`] spans.
pub const VIA_CUT: &str = "…";

/// Runs both per-trace detections over every trace of `spans` (sorted by trace).
pub fn find(spans: &Spans, hops: &mut Vec<CrossColorHop>, missing: &mut Vec<MissingDecision>) {
    find_with_orphans(spans, hops, missing, &mut Vec::new());
}

/// As [`find`], also pushing onto `orphans` the start (Unix ns) of every span of the walked
/// traces (those with a span in a channel) whose `parent_span_id` names a span not among
/// `spans`: an orphan, whose parent this node never received (or not yet, or outside the
/// range read). Found on the walk's parent links, at no extra cost.
pub fn find_with_orphans(
    spans: &Spans,
    hops: &mut Vec<CrossColorHop>,
    missing: &mut Vec<MissingDecision>,
    orphans: &mut Vec<i64>,
) {
    let mut sink = Sink {
        keep: &|_| true,
        hops,
        missing,
        counts: None,
        orphans,
    };
    find_into(spans, &mut sink);
}

/// How many findings the detections made, and on how many distinct span ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FindCounts {
    /// Cross-colour hops.
    pub hops: usize,
    /// Span ids with at least one hop.
    pub hop_spans: usize,
    /// Missing decisions.
    pub missing: usize,
    /// Span ids with at least one missing decision.
    pub missing_spans: usize,
}

/// As [`find`], keeping only the findings of the span ids `keep` accepts (the others are
/// counted, not made: a trace view keeps those of its page), in time order as the report
/// lists them.
pub fn find_some(
    spans: &Spans,
    keep: &dyn Fn(u64) -> bool,
    hops: &mut Vec<CrossColorHop>,
    missing: &mut Vec<MissingDecision>,
) -> FindCounts {
    let mut counted = Counted::default();
    let mut orphans = Vec::new();
    let mut sink = Sink {
        keep,
        hops,
        missing,
        counts: Some(&mut counted),
        orphans: &mut orphans,
    };
    find_into(spans, &mut sink);
    let key = |t: i64, trace: &str, span: &str| (t, trace.to_owned(), span.to_owned());
    hops.sort_by_cached_key(|h| key(h.t_unix_nano, &h.trace_id, &h.span_id));
    missing.sort_by_cached_key(|m| key(m.t_unix_nano, &m.trace_id, &m.span_id));
    FindCounts {
        hops: counted.hops,
        hop_spans: counted.hop_spans.len(),
        missing: counted.missing,
        missing_spans: counted.missing_spans.len(),
    }
}

/// Counts of all findings, kept or not.
#[derive(Default)]
struct Counted {
    hops: usize,
    hop_spans: std::collections::HashSet<u64>,
    missing: usize,
    missing_spans: std::collections::HashSet<u64>,
}

/// Where findings go.
struct Sink<'a> {
    keep: &'a dyn Fn(u64) -> bool,
    hops: &'a mut Vec<CrossColorHop>,
    missing: &'a mut Vec<MissingDecision>,
    counts: Option<&'a mut Counted>,
    orphans: &'a mut Vec<i64>,
}

fn find_into(spans: &Spans, sink: &mut Sink<'_>) {
    let mut index = SpanIndex::default();
    let linked = linked_apps(spans);
    for trace in spans.traces() {
        if trace
            .iter()
            .any(|s| s.channel.get().is_some() && s.kind.is_judged())
        {
            one_trace(spans, trace, &mut index, &linked, sink);
        }
    }
}

/// The apps of the spans that parentless consumers link to ([`Spans::consumer_links`]), found
/// among the loaded spans (a linked span may be in another trace): one look-up per trace of a
/// linked span, none at all without links. Where a linked id is shared by a Zipkin/B3 pair,
/// the non-SERVER half (the one that sent) is taken.
fn linked_apps(spans: &Spans) -> LinkedApps {
    type Set<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;
    if spans.consumer_links.is_empty() {
        return LinkedApps::default();
    }
    let wanted: Set<(u128, u64)> = spans.consumer_links.values().flatten().copied().collect();
    let traces: Set<u128> = wanted.iter().map(|&(t, _)| t).collect();
    // (app, is the SERVER half) of each linked span found.
    let mut found: HashMap<(u128, u64), (u32, bool), foldhash::fast::RandomState> =
        HashMap::default();
    for trace in spans.traces() {
        if !traces.contains(&trace[0].trace) {
            continue;
        }
        for s in trace.iter().filter(|s| wanted.contains(&(s.trace, s.span))) {
            let server = s.kind == Kind::Server;
            let key = (s.trace, s.span);
            if found.get(&key).is_none_or(|&(_, held)| held && !server) {
                found.insert(key, (s.app, server));
            }
        }
    }
    found.into_iter().map(|(k, (app, _))| (k, app)).collect()
}

/// The caller of the parentless span `s` (§6.2): for a batch consumer's CONSUMER span, the
/// app of the first of its linked spans found ([`linked_apps`]); else [`NONE_APP`].
fn link_caller(spans: &Spans, s: &SpanRec, linked: &LinkedApps) -> String {
    let app = (s.kind == Kind::Consumer)
        .then(|| spans.consumer_links.get(&(s.trace, s.span)))
        .flatten()
        .and_then(|links| links.iter().find_map(|l| linked.get(l)));
    app.map_or(NONE_APP, |&a| spans.apps.name(a)).to_owned()
}

fn one_trace(
    spans: &Spans,
    ss: &[SpanRec],
    index: &mut SpanIndex,
    linked: &LinkedApps,
    sink: &mut Sink<'_>,
) {
    index.clear();
    for (k, s) in ss.iter().enumerate() {
        index.insert(s.span, s.kind == Kind::Server, k);
    }
    let parent: Vec<Option<usize>> = ss
        .iter()
        .map(|s| {
            index.parent(
                s.span,
                s.kind == Kind::Server,
                s.parent.map(std::num::NonZeroU64::get),
            )
        })
        .collect();
    sink.orphans.extend(
        ss.iter()
            .zip(&parent)
            .filter(|(s, p)| s.parent.is_some() && p.is_none())
            .map(|(s, _)| s.start),
    );
    // Ancestors present in the trace (a span reaching a parent cycle counts as deepest).
    let depth = depths(&parent);
    let mut channels: Vec<u32> = ss
        .iter()
        .filter(|s| s.kind.is_judged())
        .filter_map(|s| s.channel.get())
        .collect();
    channels.sort_unstable();
    channels.dedup();
    for c in channels {
        let cands: Vec<usize> = (0..ss.len())
            .filter(|&k| ss[k].kind.is_judged() && ss[k].channel.get() == Some(c))
            .collect();
        let Some(&root) = cands
            .iter()
            .min_by_key(|&&k| (depth[k], ss[k].start, ss[k].span))
        else {
            continue;
        };
        let trace_color = spans.decision(&ss[root], c).unwrap_or(ss[root].color);
        let channel = spans.channels.name(c);
        // Each span's nearest ancestor in the channel, found once per span (made at the
        // channel's first hop: most traces have none).
        let mut near: Vec<Near> = Vec::new();
        for &k in &cands {
            let s = &ss[k];
            let kind = if s.is_request() {
                TrafficKind::Rpc
            } else {
                TrafficKind::Mq
            };
            let dec = spans.decision(s, c);
            let kept = (sink.keep)(s.span);
            if dec.is_none()
                && let Some(c) = sink.counts.as_deref_mut()
            {
                c.missing += 1;
                c.missing_spans.insert(s.span);
            }
            if dec.is_none() && kept {
                let caller = match (s.parent, parent[k]) {
                    (_, Some(p)) => spans.apps.name(ss[p].app).to_owned(),
                    (None, None) => link_caller(spans, s, linked),
                    (Some(_), None) => UNKNOWN_APP.to_owned(),
                };
                sink.missing.push(MissingDecision {
                    environment: None,
                    trace_id: hex128(s.trace),
                    span_id: hex64(s.span),
                    channel: channel.to_owned(),
                    app: spans.apps.name(s.app).to_owned(),
                    caller_app: caller,
                    kind,
                    t_unix_nano: s.start,
                });
            }
            if trace_color == Color::Unknown || s.color == Color::Unknown {
                continue;
            }
            let hop = if k == root {
                dec.is_some_and(|d| d != s.color)
            } else {
                s.color != trace_color
            };
            if !hop {
                continue;
            }
            if s.kind == Kind::Consumer {
                let message = dec.unwrap_or(trace_color);
                let drained = match s.blue_percent {
                    0 => Some(Color::Blue),
                    100 => Some(Color::Green),
                    _ => None,
                };
                if drained == Some(message) {
                    continue; // the other side is meant to consume it
                }
            }
            if let Some(c) = sink.counts.as_deref_mut() {
                c.hops += 1;
                c.hop_spans.insert(s.span);
            }
            if !kept {
                continue;
            }
            let reason = match dec {
                Some(d) if d != s.color => "decision_mismatch",
                Some(_) => "decision_changed",
                None => "no_decision",
            };
            if near.is_empty() {
                near.resize(ss.len(), Near::Unknown);
            }
            let from = nearest_in(&parent, &mut near, k, |q| ss[q].channel.get() == Some(c));
            let via = via_apps(spans, ss, &parent, k, from);
            sink.hops.push(CrossColorHop {
                environment: None,
                trace_id: hex128(s.trace),
                span_id: hex64(s.span),
                channel: channel.to_owned(),
                from_app: from.map_or(NONE_APP.to_owned(), |q| {
                    spans.apps.name(ss[q].app).to_owned()
                }),
                from_color: from.map(|q| ss[q].color),
                to_app: spans.apps.name(s.app).to_owned(),
                to_color: s.color,
                kind,
                reason,
                via,
                t_unix_nano: s.start,
            });
        }
    }
}

/// Each span's count of ancestors in the trace, in time linear in the spans (each span's
/// parent walk stops at a span already counted). A span on a parent cycle, or one whose
/// ancestors reach one, counts `parent.len() + 1` (deeper than any real span).
fn depths(parent: &[Option<usize>]) -> Vec<usize> {
    const UNKNOWN: usize = usize::MAX;
    const ON_PATH: usize = usize::MAX - 1;
    let looped = parent.len() + 1;
    let mut depth = vec![UNKNOWN; parent.len()];
    let mut path: Vec<usize> = Vec::new();
    for k in 0..parent.len() {
        if depth[k] != UNKNOWN {
            continue;
        }
        path.clear();
        let mut cur = k;
        // Depth of the span just above the path's last one: `None` when that one is a root.
        let above: Option<usize> = loop {
            match depth[cur] {
                ON_PATH => break Some(looped),
                UNKNOWN => {
                    depth[cur] = ON_PATH;
                    path.push(cur);
                    match parent[cur] {
                        Some(p) => cur = p,
                        None => break None,
                    }
                }
                d => break Some(d),
            }
        };
        let mut d = match above {
            None => 0,
            Some(a) if a >= looped => looped,
            Some(a) => a + 1,
        };
        for &x in path.iter().rev() {
            depth[x] = d;
            if d < looped {
                d += 1;
            }
        }
    }
    depth
}

/// A span's nearest ancestor in a channel, once known.
#[derive(Clone, Copy)]
enum Near {
    Unknown,
    OnPath,
    Known(Option<usize>),
}

/// The nearest ancestor of `k` for which `inside` holds (none past a root or around a parent
/// cycle), memoised in `near` so that every span is walked once per channel.
fn nearest_in(
    parent: &[Option<usize>],
    near: &mut [Near],
    k: usize,
    inside: impl Fn(usize) -> bool,
) -> Option<usize> {
    let mut path: Vec<usize> = Vec::new();
    let mut cur = k;
    let found = loop {
        match near[cur] {
            Near::Known(v) => break v,
            Near::OnPath => break None,
            Near::Unknown => {}
        }
        near[cur] = Near::OnPath;
        path.push(cur);
        match parent[cur] {
            None => break None,
            Some(p) if inside(p) => break Some(p),
            Some(p) => cur = p,
        }
    };
    for x in path {
        near[x] = Near::Known(found);
    }
    found
}

/// The apps of the spans between `k` and its ancestor `from` (or the root), in call order,
/// each once; at most [`MAX_VIA_SPANS`] spans are looked at (then [`VIA_CUT`] comes first).
fn via_apps(
    spans: &Spans,
    ss: &[SpanRec],
    parent: &[Option<usize>],
    k: usize,
    from: Option<usize>,
) -> Vec<String> {
    let mut via_rev: Vec<u32> = Vec::new();
    let mut p = parent[k];
    let mut steps = 0;
    let mut cut = false;
    while let Some(q) = p {
        if Some(q) == from {
            break;
        }
        if steps >= ss.len() {
            break; // around a parent cycle
        }
        if steps == MAX_VIA_SPANS {
            cut = true;
            break;
        }
        steps += 1;
        via_rev.push(ss[q].app);
        p = parent[q];
    }
    let mut seen = std::collections::HashSet::with_capacity(via_rev.len());
    let mut via: Vec<String> = Vec::new();
    if cut {
        via.push(VIA_CUT.to_owned());
    }
    for a in via_rev.into_iter().rev() {
        if seen.insert(a) {
            via.push(spans.apps.name(a).to_owned());
        }
    }
    via
}

impl CrossColorHop {
    /// `from(colour) → to(colour)`: the apps and their instance colours (`-` with `(none)`).
    pub fn path_text(&self) -> String {
        format!(
            "{}({}) → {}({})",
            self.from_app,
            self.from_color.map_or("-", Color::as_str),
            self.to_app,
            self.to_color.as_str()
        )
    }

    /// ` via a → b` (the apps between the ancestor and the span), or nothing.
    pub fn via_text(&self) -> String {
        if self.via.is_empty() {
            String::new()
        } else {
            format!(" via {}", self.via.join(" → "))
        }
    }

    /// Its line in the text table.
    pub(crate) fn line(&self) -> String {
        format!(
            "  {} {} {}{} {} {} trace {}",
            time_text(self.t_unix_nano),
            self.channel,
            self.path_text(),
            self.via_text(),
            self.kind.as_str(),
            self.reason,
            self.trace_id
        )
    }

    /// Its alert: one per (channel, apps, colour, kind), its summary counting the hops of the
    /// key seen so far (`seen`).
    pub(crate) fn alert(&self, t: &Thresholds, seen: &mut AlertCounts) -> Observation {
        let l = alert_labels(
            Detection::CrossColorHop,
            &[
                ("environment", self.environment.as_deref()),
                ("channel", Some(&self.channel)),
                ("app", Some(&self.to_app)),
                ("color", Some(self.to_color.as_str())),
                ("kind", Some(self.kind.as_str())),
                ("from_app", Some(&self.from_app)),
                ("to_app", Some(&self.to_app)),
            ],
        );
        *seen.entry(l.clone()).or_default() += 1;
        let n = seen[&l];
        let window = t.window.as_nanos().max(1) as i64;
        let what = format!(
            "cross-colour hop(s) in {}: {}{} [{}]",
            self.channel,
            self.path_text(),
            self.via_text(),
            self.reason
        );
        Observation {
            summary: counted_summary(n, &what),
            labels: l,
            window_end: window_start(self.t_unix_nano, window) + window,
            exemplars: vec![self.trace_id.clone()],
            counted: Some((n, what)),
        }
    }
}

impl MissingDecision {
    /// Its line in the text table.
    pub(crate) fn line(&self) -> String {
        format!(
            "  {} {} {} called by {} {} trace {}",
            time_text(self.t_unix_nano),
            self.channel,
            self.app,
            self.caller_app,
            self.kind.as_str(),
            self.trace_id
        )
    }

    /// Its alert: one per (channel, app, kind).
    pub(crate) fn alert(&self, t: &Thresholds) -> Observation {
        let window = t.window.as_nanos().max(1) as i64;
        Observation {
            labels: alert_labels(
                Detection::MissingDecision,
                &[
                    ("environment", self.environment.as_deref()),
                    ("channel", Some(&self.channel)),
                    ("app", Some(&self.app)),
                    ("kind", Some(self.kind.as_str())),
                ],
            ),
            summary: format!(
                "{} {} spans carry no decision for {} (caller {}); observed > threshold 0",
                self.app,
                self.kind.as_str(),
                self.channel,
                self.caller_app
            ),
            window_end: window_start(self.t_unix_nano, window) + window,
            exemplars: vec![self.trace_id.clone()],
            counted: None,
        }
    }
}

#[cfg(test)]
#[path = "traces/ingest_tests.rs"]
mod ingest_tests;

#[cfg(test)]
mod tests {
    use dyeline_model::release::{Channels, Op, Timeline};
    use dyeline_model::{ChannelId, Color, TrafficKind};

    use super::*;
    use crate::analyze::read::resolve::resolve;
    use crate::analyze::spans::{Kind, NO_SOURCE, SpanRec, Spans};
    use crate::analyze::testkit::{B, Sp, releasing};

    /// Spans of trace 1 in channel `trade` (releasing, all of `apps` in it): (span, parent,
    /// app, colour), started one after the other.
    fn trade(apps: &[&str], rows: &[(u64, Option<u64>, &str, Color)]) -> Spans {
        let mut spans = Spans::default();
        for (k, &(span, parent, app, color)) in rows.iter().enumerate() {
            let app = spans.apps.intern(app);
            let instance = spans.instances.intern("i");
            spans.push(SpanRec {
                trace: 1,
                span,
                parent: parent.and_then(std::num::NonZeroU64::new),
                app,
                instance,
                color,
                kind: Kind::Server,
                traffic: Some(TrafficKind::Rpc),
                start: 1_000 + k as i64,
                end: 2_000 + k as i64,
                is_error: false,
                decision_set: 0,
                channel: crate::analyze::spans::ChannelRef::NONE,
                blue_percent: 50,
                interval: 0,
                source: NO_SOURCE,
                lane: 0,
                env: 0,
            });
        }
        let id = ChannelId::new("trade").unwrap();
        let mut initial = Channels::new();
        initial.apply(&id, &Op::Apps(apps.iter().map(|a| a.to_string()).collect()));
        let ops = vec![(0, id.clone(), Op::Start), (0, id, Op::Ratio(50))];
        resolve(&mut spans, &Timeline::from_ops(initial, ops));
        spans
    }

    fn found(spans: &Spans) -> (Vec<CrossColorHop>, Vec<MissingDecision>) {
        let (mut h, mut m) = (Vec::new(), Vec::new());
        find(spans, &mut h, &mut m);
        (h, m)
    }

    /// The count of ancestors by walking, as the analyzer did before (quadratic).
    fn walked(parent: &[Option<usize>]) -> Vec<usize> {
        (0..parent.len())
            .map(|k| {
                let mut d = 0;
                let mut p = parent[k];
                while let Some(q) = p {
                    d += 1;
                    if d > parent.len() {
                        break;
                    }
                    p = parent[q];
                }
                d
            })
            .collect()
    }

    #[test]
    fn depths_equal_the_walk_with_cycles_and_tails() {
        // 0 root; 1 → 0; 2 → 3 → 4 → 2 (cycle); 5 → 2 (tail into it); 6 → 5; 7 → 7.
        let parent = [
            None,
            Some(0),
            Some(3),
            Some(4),
            Some(2),
            Some(2),
            Some(5),
            Some(7),
        ];
        assert_eq!(depths(&parent), walked(&parent));
        assert_eq!(depths(&parent)[..2], [0, 1]);
        assert!(depths(&parent)[2..].iter().all(|&d| d == parent.len() + 1));
    }

    proptest::proptest! {
        #[test]
        fn depths_equal_the_walk(raw in proptest::collection::vec(proptest::option::of(0usize..30), 0..30)) {
            let n = raw.len();
            let parent: Vec<Option<usize>> = raw.iter().map(|p| p.filter(|&q| q < n)).collect();
            proptest::prop_assert_eq!(depths(&parent), walked(&parent));
        }
    }

    /// A chain of 20,000 SERVER spans in a releasing channel, the last on the other colour:
    /// one hop, found in linear time (the ancestor count was a walk per span: 2·10⁸ steps).
    #[test]
    fn a_chain_20_000_deep_is_judged_in_linear_time() {
        const N: u64 = 20_000;
        let rows: Vec<(u64, Option<u64>, &str, Color)> = (1..=N)
            .map(|i| {
                let color = if i == N { Color::Green } else { Color::Blue };
                (i, (i > 1).then(|| i - 1), "order", color)
            })
            .collect();
        let spans = trade(&["order"], &rows);
        let started = std::time::Instant::now();
        let (hops, missing) = found(&spans);
        assert!(
            started.elapsed().as_secs_f64() < 5.0,
            "{:?}",
            started.elapsed()
        );
        assert_eq!(hops.len(), 1);
        assert_eq!(hops[0].span_id, hex64(N));
        assert_eq!(hops[0].from_app, "order");
        assert!(hops[0].via.is_empty());
        assert_eq!(missing.len(), N as usize, "no span carries a decision");
    }

    /// A broom: a handle of 3,000 spans of an app outside the channel, and 3,000 hop spans
    /// hanging from its end. Each hop looks at most MAX_VIA_SPANS spans for its `via`, which
    /// then starts with the cut mark; its `from` is still the channel's root span.
    #[test]
    fn via_is_cut_on_a_long_path_out_of_the_channel() {
        const HANDLE: u64 = 3_000;
        let mut rows: Vec<(u64, Option<u64>, &str, Color)> = vec![(1, None, "order", Color::Blue)];
        for i in 2..=HANDLE + 1 {
            rows.push((
                i,
                Some(i - 1),
                if i % 2 == 0 { "proxy" } else { "mesh" },
                Color::Blue,
            ));
        }
        for i in 0..3_000 {
            rows.push((HANDLE + 2 + i, Some(HANDLE + 1), "stock", Color::Green));
        }
        // And one short path: order → proxy → stock.
        rows.push((90_001, Some(1), "proxy", Color::Blue));
        rows.push((90_002, Some(90_001), "stock", Color::Green));
        let spans = trade(&["order", "stock"], &rows);
        let started = std::time::Instant::now();
        let (hops, _) = found(&spans);
        assert!(
            started.elapsed().as_secs_f64() < 10.0,
            "{:?}",
            started.elapsed()
        );
        assert_eq!(hops.len(), 3_001);
        let far = hops
            .iter()
            .find(|h| h.span_id == hex64(HANDLE + 2))
            .unwrap();
        assert_eq!(far.from_app, "order");
        // The 256 spans nearest the hop, farthest first: 2746 (proxy) … 3001 (mesh).
        assert_eq!(far.via, vec![VIA_CUT, "proxy", "mesh"]);
        let near = hops.iter().find(|h| h.span_id == hex64(90_002)).unwrap();
        assert_eq!(
            (near.from_app.as_str(), near.via.clone()),
            ("order", vec!["proxy".to_owned()])
        );
        // Keeping one span's findings: the same one made, every one counted.
        let (mut kept_hops, mut kept_missing) = (Vec::new(), Vec::new());
        let counts = find_some(
            &spans,
            &|id| id == 90_002,
            &mut kept_hops,
            &mut kept_missing,
        );
        assert_eq!(kept_hops, vec![near.clone()]);
        assert_eq!(kept_missing.len(), 1);
        assert_eq!(kept_missing[0].span_id, hex64(90_002));
        assert_eq!(
            counts,
            FindCounts {
                hops: 3_001,
                hop_spans: 3_001,
                // The spans of the channel's apps: the root and the 3,001 stock spans.
                missing: 3_002,
                missing_spans: 3_002,
            }
        );
    }

    #[test]
    fn hop_is_found_once_whatever_the_arrival_order_and_clock_skew() {
        // Case 11's shape: order (blue, decided blue) → stock on green. The stock span starts
        // before its parent (clock skew) and is listed first (it arrived first).
        let mut b = B::new();
        releasing(&mut b, "ch1", &["order", "stock"], 50);
        let blue = [("ch1", Color::Blue)];
        b.span(Sp {
            trace: 7,
            span: 3,
            parent: Some(2),
            app: "stock",
            instance: "stock-g1",
            color: Color::Green,
            t: 9.9,
            decisions: &blue,
            ..Sp::default()
        })
        .span(Sp {
            trace: 7,
            span: 1,
            app: "order",
            instance: "order-b1",
            t: 10.0,
            decisions: &blue,
            ..Sp::default()
        })
        .span(Sp {
            trace: 7,
            span: 2,
            parent: Some(1),
            app: "order",
            instance: "order-b1",
            kind: Kind::Other,
            t: 10.1,
            decisions: &blue,
            ..Sp::default()
        })
        // the same span resent is one row in the store; here a second trace checks independence
        .span(Sp {
            trace: 8,
            span: 1,
            app: "order",
            instance: "order-b1",
            t: 11.0,
            decisions: &blue,
            ..Sp::default()
        });
        let r = b.report();
        assert_eq!(r.cross_color_hops.len(), 1, "{:?}", r.cross_color_hops);
        let h = &r.cross_color_hops[0];
        assert_eq!(
            (
                h.span_id.as_str(),
                h.from_app.as_str(),
                h.from_color.map(|c| c.as_str()),
                h.to_app.as_str(),
                h.to_color.as_str(),
                h.reason,
                h.kind.as_str()
            ),
            (
                "0000000000000003",
                "order",
                Some("blue"),
                "stock",
                "green",
                "decision_mismatch",
                "RPC"
            )
        );
        assert!(h.via.is_empty());
        assert!(r.missing_decisions.is_empty());
    }

    #[test]
    fn hop_reasons_via_and_the_root_most_span() {
        let mut b = B::new();
        releasing(&mut b, "trade", &["order", "inventory"], 50);
        // order(green, decided green) → proxy (not in trade, drops) → gateway (decides blue again)
        // → inventory on blue with trade=blue: decision_changed via [proxy, gateway].
        let green = [("trade", Color::Green)];
        let blue = [("trade", Color::Blue)];
        b.span(Sp {
            trace: 1,
            span: 1,
            instance: "order-g",
            color: Color::Green,
            decisions: &green,
            t: 1.0,
            ..Sp::default()
        })
        .span(Sp {
            trace: 1,
            span: 2,
            parent: Some(1),
            instance: "order-g",
            color: Color::Green,
            kind: Kind::Other,
            t: 1.1,
            ..Sp::default()
        })
        .span(Sp {
            trace: 1,
            span: 3,
            parent: Some(2),
            app: "proxy",
            instance: "proxy-1",
            t: 1.2,
            ..Sp::default()
        })
        .span(Sp {
            trace: 1,
            span: 4,
            parent: Some(3),
            app: "gateway",
            instance: "gw-1",
            kind: Kind::Other,
            t: 1.3,
            ..Sp::default()
        })
        .span(Sp {
            trace: 1,
            span: 5,
            parent: Some(4),
            app: "inventory",
            instance: "inv-b",
            decisions: &blue,
            t: 1.4,
            ..Sp::default()
        })
        // a root-most span whose decision is not its colour is itself the hop
        .span(Sp {
            trace: 2,
            span: 1,
            app: "gateway",
            instance: "gw-1",
            kind: Kind::Other,
            t: 2.0,
            ..Sp::default()
        })
        .span(Sp {
            trace: 2,
            span: 2,
            parent: Some(1),
            instance: "order-g",
            color: Color::Green,
            decisions: &blue,
            t: 2.1,
            ..Sp::default()
        })
        .span(Sp {
            trace: 2,
            span: 3,
            parent: Some(2),
            app: "inventory",
            instance: "inv-b",
            decisions: &blue,
            t: 2.2,
            ..Sp::default()
        })
        // no decision anywhere: trace colour is the root's instance colour; the child on the
        // other colour is a no_decision hop and both are missing decisions
        .span(Sp {
            trace: 3,
            span: 1,
            instance: "order-g",
            color: Color::Green,
            t: 3.0,
            ..Sp::default()
        })
        .span(Sp {
            trace: 3,
            span: 2,
            parent: Some(1),
            app: "inventory",
            instance: "inv-b",
            t: 3.1,
            ..Sp::default()
        });
        let r = b.report();
        let mut hops: Vec<(String, &str, String, Vec<String>)> = r
            .cross_color_hops
            .iter()
            .map(|h| {
                (
                    h.trace_id[30..].to_owned(),
                    h.reason,
                    h.from_app.clone(),
                    h.via.clone(),
                )
            })
            .collect();
        hops.sort();
        assert_eq!(
            hops,
            vec![
                (
                    "01".into(),
                    "decision_changed",
                    "order".into(),
                    vec!["proxy".into(), "gateway".into()]
                ),
                (
                    "02".into(),
                    "decision_mismatch",
                    "(none)".into(),
                    vec!["gateway".into()]
                ),
                ("03".into(), "no_decision", "order".into(), vec![]),
            ]
        );
        let missing: Vec<(String, String)> = r
            .missing_decisions
            .iter()
            .map(|m| (m.app.clone(), m.caller_app.clone()))
            .collect();
        assert_eq!(
            missing,
            vec![
                ("order".into(), "(none)".into()),
                ("inventory".into(), "order".into())
            ]
        );
    }

    #[test]
    fn unknown_colours_and_consumers_of_the_drained_side_are_never_hops() {
        let mut b = B::new();
        releasing(&mut b, "trade", &["order", "notify", "stock"], 100); // green drained
        let green = [("trade", Color::Green)];
        let blue = [("trade", Color::Blue)];
        b.span(Sp {
            trace: 1,
            span: 1,
            decisions: &blue,
            t: 1.0,
            ..Sp::default()
        })
        .span(Sp {
            trace: 1,
            span: 2,
            parent: Some(1),
            app: "stock",
            instance: "stock-x",
            color: Color::Unknown,
            decisions: &blue,
            t: 1.1,
            ..Sp::default()
        })
        // a green-decided message consumed on blue while green is drained: meant to be
        .span(Sp {
            trace: 2,
            span: 1,
            instance: "order-g",
            color: Color::Green,
            kind: Kind::Other,
            decisions: &green,
            t: 2.0,
            ..Sp::default()
        })
        .span(Sp {
            trace: 2,
            span: 2,
            parent: Some(1),
            app: "notify",
            instance: "notify-b",
            kind: Kind::Consumer,
            decisions: &green,
            t: 2.1,
            ..Sp::default()
        });
        let r = b.report();
        assert!(r.cross_color_hops.is_empty(), "{:?}", r.cross_color_hops);

        // The same message consumed on blue while nothing is drained is an MQ hop.
        let mut b = B::new();
        releasing(&mut b, "trade", &["order", "notify"], 50);
        b.span(Sp {
            trace: 2,
            span: 1,
            instance: "order-g",
            color: Color::Green,
            kind: Kind::Other,
            decisions: &green,
            t: 2.0,
            ..Sp::default()
        })
        .span(Sp {
            trace: 2,
            span: 2,
            parent: Some(1),
            app: "notify",
            instance: "notify-b",
            kind: Kind::Consumer,
            decisions: &green,
            t: 2.1,
            ..Sp::default()
        });
        let r = b.report();
        assert_eq!(r.cross_color_hops.len(), 1);
        assert_eq!(
            (
                r.cross_color_hops[0].kind.as_str(),
                r.cross_color_hops[0].from_app.as_str()
            ),
            ("MQ", "order")
        );
    }

    #[test]
    fn nothing_is_found_outside_a_release() {
        let mut b = B::new();
        b.channel("trade", &["order", "inventory"]);
        b.op(100.0, "trade", Op::Start);
        // before the start: no decision, crossing colours, all fine
        b.span(Sp {
            trace: 1,
            span: 1,
            instance: "order-g",
            color: Color::Green,
            t: 10.0,
            ..Sp::default()
        })
        .span(Sp {
            trace: 1,
            span: 2,
            parent: Some(1),
            app: "inventory",
            instance: "inv-b",
            t: 10.1,
            ..Sp::default()
        });
        let r = b.report();
        assert!(r.cross_color_hops.is_empty() && r.missing_decisions.is_empty());
    }
}
