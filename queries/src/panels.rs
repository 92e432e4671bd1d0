//! Span-derived panels of the dashboard, one function per panel, computed once per snapshot
//! ([`snapshots`]: one load and report of a range) and reused by every request the snapshot
//! serves: per-channel loads for the overview ([`overview_parts`]), and a channel's time
//! series ([`channel_series`]), per-app table ([`app_table`]), hop edges ([`hop_edges`]),
//! missing decisions ([`missing_rows`]), window findings ([`window_findings`]),
//! per-instance counts ([`instance_counts`]) and the latency comparison ([`latency`]),
//! gathered by [`channel_parts`]. Live parts
//! (channel state, operations, alerts, weights in force) are not here; the server's adapter
//! adds them per request and copies these plain types into the pages' own.

pub mod lanes;
pub mod latency;
pub mod snapshots;

use std::collections::{BTreeMap, HashMap};

use dyeline_model::release::Timeline;
use dyeline_model::{Color, TrafficKind};

use crate::analyze::spans::{SpanRec, Spans};
use crate::analyze::{AnalyzerConfig, CrossColorHop, Report, WindowFinding};
use crate::sql::SqlError;
use crate::summary;

/// Five minutes, ns: the overview's hop column and the weights preview look back this far.
pub const FIVE_MIN_NS: i64 = 5 * 60 * 1_000_000_000;

/// A half-open time range `[from_unix_nano, to_unix_nano)`, Unix ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeRange {
    /// Start, inclusive, Unix ns.
    pub from_unix_nano: i64,
    /// End, exclusive, Unix ns.
    pub to_unix_nano: i64,
}

/// Requests, errors and latency of one colour over a range.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ColorLoad {
    /// Requests.
    pub requests: u64,
    /// Requests that are errors (domain §6).
    pub errors: u64,
    /// 99th percentile duration, ms (none without requests).
    pub p99_ms: Option<f64>,
}

/// Durations and errors of one colour, finished into a [`ColorLoad`].
#[derive(Clone, Default)]
struct Acc {
    durations: Vec<i64>,
    errors: u64,
}

impl Acc {
    fn finish(&mut self) -> ColorLoad {
        ColorLoad {
            requests: self.durations.len() as u64,
            errors: self.errors,
            p99_ms: summary::percentile_ms(&mut self.durations, 0.99),
        }
    }
}

/// Durations and errors per colour, and the spans of unknown colour.
#[derive(Clone, Default)]
pub struct ColorAcc {
    blue: Acc,
    green: Acc,
    unknown: u64,
}

/// What an app serves: RPC requests (SERVER), MQ messages (CONSUMER) and JOB runs (root
/// spans of traffic kind JOB), so MQ consumers and JOB apps have a row of the per-app table.
fn is_work(s: &SpanRec) -> bool {
    s.kind.is_judged() || (s.traffic == Some(TrafficKind::Job) && s.parent.is_none())
}

impl ColorAcc {
    /// Counts span `s` on its colour.
    pub fn add(&mut self, s: &SpanRec) {
        let acc = match s.color {
            Color::Blue => &mut self.blue,
            Color::Green => &mut self.green,
            Color::Unknown => {
                self.unknown += 1;
                return;
            }
        };
        acc.durations.push(s.end.saturating_sub(s.start).max(0));
        acc.errors += u64::from(s.is_error);
    }

    fn absorb(&mut self, other: Self) {
        self.blue.durations.extend(other.blue.durations);
        self.blue.errors += other.blue.errors;
        self.green.durations.extend(other.green.durations);
        self.green.errors += other.green.errors;
        self.unknown += other.unknown;
    }
}

/// A hash map with a fast non-cryptographic hasher (keys are our own interned ids).
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Adds `b`'s counts to `a`'s.
fn absorb<K: std::hash::Hash + Eq>(a: &mut FastMap<K, ColorAcc>, b: FastMap<K, ColorAcc>) {
    for (k, v) in b {
        a.entry(k).or_default().absorb(v);
    }
}

/// Spans from this many on are folded on two threads, one half each, then joined: every
/// panel is a pass over every span of the range (a few hundred thousand records of 128
/// bytes, bound by memory bandwidth).
const PARALLEL_FOLD_MIN: usize = 50_000;

/// `fold` of `spans`, of each half on its own thread (joined by `join`) for large inputs.
pub fn fold_halves<T: Send>(
    spans: &Spans,
    fold: impl Fn(&[&[SpanRec]]) -> T + Sync,
    join: impl FnOnce(T, T) -> T,
) -> T {
    if spans.len() < PARALLEL_FOLD_MIN
        || std::thread::available_parallelism().map_or(1, |n| n.get()) < 2
    {
        return fold(&spans.chunks().collect::<Vec<_>>());
    }
    let [a, b] = spans.halves();
    let (x, y) = std::thread::scope(|scope| {
        let later = scope.spawn(|| fold(&b));
        (fold(&a), later.join().expect("panel fold thread"))
    });
    join(x, y)
}

/// One channel's span-derived totals.
#[derive(Clone, Debug, Default)]
pub struct ChannelLoad {
    /// Blue load.
    pub blue: ColorLoad,
    /// Green load.
    pub green: ColorLoad,
    /// Requests on instances of unknown colour.
    pub unknown_requests: u64,
    /// Hops in the last 5 minutes of the range.
    pub hops_last_5m: u64,
}

/// An instance whose colour could not be told (domain §1).
#[derive(Clone, Debug, PartialEq)]
pub struct UnknownInstance {
    /// App.
    pub app: String,
    /// Instance id.
    pub instance: String,
    /// Spans it sent in the range.
    pub spans: u64,
}

/// The overview's span-derived parts.
#[derive(Clone, Debug, Default)]
pub struct OverviewParts {
    /// Per channel id.
    pub channels: HashMap<String, ChannelLoad>,
    /// Instances of unknown colour, by app and instance.
    pub unknown_instances: Vec<UnknownInstance>,
}

/// Computes the overview's parts.
pub fn overview_parts(spans: &Spans, rep: &Report, range: TimeRange) -> OverviewParts {
    // One pass: requests per channel and colour, and spans per instance of unknown colour.
    type Fold = (FastMap<Option<u32>, ColorAcc>, FastMap<(u32, u32), u64>);
    let (loads, unknown) = fold_halves(
        spans,
        |half| {
            let mut out: Fold = Fold::default();
            for s in half.iter().copied().flatten() {
                if s.is_request() {
                    out.0.entry(s.channel.get()).or_default().add(s);
                }
                if s.color == Color::Unknown {
                    *out.1.entry((s.app, s.instance)).or_default() += 1;
                }
            }
            out
        },
        |mut a, b| {
            absorb(&mut a.0, b.0);
            for (k, n) in b.1 {
                *a.1.entry(k).or_default() += n;
            }
            a
        },
    );
    let mut channels: HashMap<String, ChannelLoad> = HashMap::new();
    for (k, mut l) in loads {
        let Some(c) = k else { continue };
        channels.insert(
            spans.channels.name(c).to_owned(),
            ChannelLoad {
                blue: l.blue.finish(),
                green: l.green.finish(),
                unknown_requests: l.unknown,
                hops_last_5m: 0,
            },
        );
    }
    for h in rep
        .cross_color_hops
        .iter()
        .filter(|h| h.t_unix_nano >= range.to_unix_nano - FIVE_MIN_NS)
    {
        channels.entry(h.channel.clone()).or_default().hops_last_5m += 1;
    }
    let mut unknown_instances: Vec<UnknownInstance> = unknown
        .into_iter()
        .map(|((app, instance), n)| UnknownInstance {
            app: spans.apps.name(app).to_owned(),
            instance: spans.instances.name(instance).to_owned(),
            spans: n,
        })
        .collect();
    unknown_instances.sort_by(|a, b| (&a.app, &a.instance).cmp(&(&b.app, &b.instance)));
    OverviewParts {
        channels,
        unknown_instances,
    }
}

/// Per-app load of the channel.
#[derive(Clone, Debug, PartialEq)]
pub struct AppRow {
    /// App.
    pub app: String,
    /// Blue load.
    pub blue: ColorLoad,
    /// Green load.
    pub green: ColorLoad,
    /// Requests on instances of unknown colour.
    pub unknown_requests: u64,
}

/// Cross-colour hops grouped by edge (domain §6.1).
#[derive(Clone, Debug, PartialEq)]
pub struct HopEdge {
    /// Calling app (none at the entry).
    pub from_app: String,
    /// Its colour (none when it has no instance colour).
    pub from_color: Option<String>,
    /// Called app.
    pub to_app: String,
    /// Its colour.
    pub to_color: String,
    /// RPC or MQ.
    pub kind: String,
    /// Why it is a hop (e.g. `decision_mismatch`).
    pub reason: String,
    /// Apps outside the channel the call passed through.
    pub via: Vec<String>,
    /// Hops on this edge in the range.
    pub count: u64,
    /// Up to 5 example trace ids.
    pub trace_ids: Vec<String>,
}

/// Missing decisions grouped by caller (domain §6.2).
#[derive(Clone, Debug, PartialEq)]
pub struct MissingRow {
    /// The app whose call arrived without the decision.
    pub caller_app: String,
    /// The receiving app.
    pub app: String,
    /// RPC or MQ.
    pub kind: String,
    /// Spans.
    pub count: u64,
    /// Up to 5 example trace ids.
    pub trace_ids: Vec<String>,
}

/// Requests of one instance of the channel's apps.
#[derive(Clone, Debug)]
pub struct InstanceCount {
    /// App.
    pub app: String,
    /// Instance id.
    pub instance: String,
    /// Colour.
    pub color: Color,
    /// Requests in the range.
    pub requests: u64,
    /// Mean requests per instance of its app and colour.
    pub color_mean: f64,
    /// Instances of its app seen blue / green in the range.
    pub app_instances: (u32, u32),
    /// Skewed in some window (domain §6.5).
    pub skewed: bool,
}

/// A channel page's span-derived parts.
#[derive(Clone, Debug, Default)]
pub struct ChannelParts {
    /// Step length, s.
    pub step_seconds: u64,
    /// Time series.
    pub steps: Vec<summary::Step>,
    /// Per-app load.
    pub apps: Vec<AppRow>,
    /// Hop edges.
    pub hops: Vec<HopEdge>,
    /// Missing decisions by caller.
    pub missing: Vec<MissingRow>,
    /// Window findings, newest first.
    pub findings: Vec<WindowFinding>,
    /// Instances.
    pub instances: Vec<InstanceCount>,
    /// Blue's and green's request latency, as histograms.
    pub latency: latency::LatencyComparison,
}

/// A hop edge: from app, from colour, to app, to colour, kind, reason, via apps.
type EdgeKey = (
    String,
    Option<String>,
    String,
    String,
    String,
    String,
    Vec<String>,
);

/// One hop as a line: `channel: from(colour) → to(colour) reason via a → b`.
pub fn hop_line(h: &CrossColorHop) -> String {
    format!(
        "{}: {} {}{}",
        h.channel,
        h.path_text(),
        h.reason,
        h.via_text()
    )
}

/// One pass over channel `cid`'s spans: what each app serves, the requests per
/// (app, instance, colour) — the per-app table's and the instances' counts — and the
/// requests' durations by colour (the latency comparison).
#[derive(Default)]
pub struct ChannelFold {
    by_app: FastMap<u32, ColorAcc>,
    per_instance: FastMap<(u32, u32, Color), u64>,
    latency: latency::LatencyAcc,
}

/// Folds channel `cid`'s spans into a [`ChannelFold`].
pub fn channel_fold(spans: &Spans, cid: Option<u32>) -> ChannelFold {
    let mut out = ChannelFold::default();
    for s in spans
        .iter()
        .filter(|s| cid.is_some() && s.channel.get() == cid)
    {
        if is_work(s) {
            out.by_app.entry(s.app).or_default().add(s);
        }
        if s.is_request() {
            *out.per_instance
                .entry((s.app, s.instance, s.color))
                .or_default() += 1;
            out.latency.add(s);
        }
    }
    out
}

/// Channel `id`'s time series over `range` in steps of `step_ns` (the summary's).
///
/// # Errors
/// [`SqlError::Syntax`] for a range with too many steps.
pub fn channel_series(
    spans: &Spans,
    rep: &Report,
    timeline: &Timeline,
    id: &str,
    range: TimeRange,
    step_ns: i64,
) -> Result<Vec<summary::Step>, SqlError> {
    summary::summarize(
        spans,
        rep,
        timeline,
        id,
        range.from_unix_nano,
        range.to_unix_nano,
        step_ns,
    )
    .map(|s| s.steps)
}

/// The per-app table, by app, from a [`ChannelFold`]'s per-app loads.
pub fn app_table(spans: &Spans, by_app: FastMap<u32, ColorAcc>) -> Vec<AppRow> {
    let mut apps: Vec<AppRow> = by_app
        .into_iter()
        .map(|(app, mut l)| AppRow {
            app: spans.apps.name(app).to_owned(),
            blue: l.blue.finish(),
            green: l.green.finish(),
            unknown_requests: l.unknown,
        })
        .collect();
    apps.sort_by(|a, b| a.app.cmp(&b.app));
    apps
}

/// Channel `id`'s cross-colour hops grouped by edge, most frequent first.
pub fn hop_edges(rep: &Report, id: &str) -> Vec<HopEdge> {
    let mut edges: BTreeMap<EdgeKey, (u64, Vec<String>)> = BTreeMap::new();
    for h in rep.cross_color_hops.iter().filter(|h| h.channel == id) {
        let e = edges
            .entry((
                h.from_app.clone(),
                h.from_color.map(|c| c.as_str().to_owned()),
                h.to_app.clone(),
                h.to_color.as_str().to_owned(),
                h.kind.as_str().to_owned(),
                h.reason.to_owned(),
                h.via.clone(),
            ))
            .or_default();
        e.0 += 1;
        if e.1.len() < 5 && !e.1.contains(&h.trace_id) {
            e.1.push(h.trace_id.clone());
        }
    }
    let mut hops: Vec<HopEdge> = edges
        .into_iter()
        .map(
            |((from_app, from_color, to_app, to_color, kind, reason, via), (count, trace_ids))| {
                HopEdge {
                    from_app,
                    from_color,
                    to_app,
                    to_color,
                    kind,
                    reason,
                    via,
                    count,
                    trace_ids,
                }
            },
        )
        .collect();
    hops.sort_by_key(|h| std::cmp::Reverse(h.count));
    hops
}

/// Channel `id`'s missing decisions grouped by caller, receiving app and kind.
pub fn missing_rows(rep: &Report, id: &str) -> Vec<MissingRow> {
    let mut miss: BTreeMap<(String, String, String), (u64, Vec<String>)> = BTreeMap::new();
    for m in rep.missing_decisions.iter().filter(|m| m.channel == id) {
        let e = miss
            .entry((
                m.caller_app.clone(),
                m.app.clone(),
                m.kind.as_str().to_owned(),
            ))
            .or_default();
        e.0 += 1;
        if e.1.len() < 5 && !e.1.contains(&m.trace_id) {
            e.1.push(m.trace_id.clone());
        }
    }
    miss.into_iter()
        .map(|((caller_app, app, kind), (count, trace_ids))| MissingRow {
            caller_app,
            app,
            kind,
            count,
            trace_ids,
        })
        .collect()
}

/// Channel `id`'s windowed findings, newest first: each one's row, written by its detection.
pub fn window_findings(rep: &Report, analyzer: &AnalyzerConfig, id: &str) -> Vec<WindowFinding> {
    let t = analyzer.for_channel(id);
    let mut findings: Vec<WindowFinding> = rep
        .findings()
        .filter(|f| f.channel() == Some(id))
        .filter_map(|f| f.window_finding(t))
        .collect();
    findings.sort_by_key(|f| std::cmp::Reverse(f.window_start_unix_nano));
    findings
}

/// Instances: requests per (app, instance, colour) of channel `id`'s spans (a
/// [`ChannelFold`]'s counts), with their app and colour's mean and instance skew.
pub fn instance_counts(
    spans: &Spans,
    rep: &Report,
    id: &str,
    counts: FastMap<(u32, u32, Color), u64>,
) -> Vec<InstanceCount> {
    let per_instance: BTreeMap<(u32, u32, Color), u64> = counts.into_iter().collect();
    let mut group: HashMap<(u32, Color), (u64, u32)> = HashMap::new();
    for (&(app, _, color), &n) in &per_instance {
        let g = group.entry((app, color)).or_default();
        g.0 += n;
        g.1 += 1;
    }
    per_instance
        .iter()
        .map(|(&(app, instance, color), &n)| {
            let (total, count) = group[&(app, color)];
            let name = spans.instances.name(instance).to_owned();
            InstanceCount {
                app: spans.apps.name(app).to_owned(),
                skewed: rep
                    .instance_skew
                    .iter()
                    .any(|s| s.channel == id && s.instance == name),
                instance: name,
                color,
                requests: n,
                color_mean: total as f64 / f64::from(count.max(1)),
                app_instances: (
                    group.get(&(app, Color::Blue)).map_or(0, |g| g.1),
                    group.get(&(app, Color::Green)).map_or(0, |g| g.1),
                ),
            }
        })
        .collect()
}

/// Computes channel `id`'s parts over `range`, in steps of `step_ns`.
///
/// # Errors
/// [`SqlError::Syntax`] for a range with too many steps.
pub fn channel_parts(
    spans: &Spans,
    rep: &Report,
    timeline: &Timeline,
    analyzer: &AnalyzerConfig,
    id: &str,
    range: TimeRange,
    step_ns: i64,
) -> Result<ChannelParts, SqlError> {
    let cid = spans.channels.get(id);
    // Two passes over the spans, one per thread: the summary's time series, and one pass for
    // the per-app table (what each app serves) and the per-instance requests (SERVER spans).
    let fold = || channel_fold(spans, cid);
    let series = || channel_series(spans, rep, timeline, id, range, step_ns);
    let (steps, fold) = if spans.len() >= PARALLEL_FOLD_MIN {
        std::thread::scope(|scope| {
            let later = scope.spawn(fold);
            let steps = series();
            (steps, later.join().expect("channel panel thread"))
        })
    } else {
        (series(), fold())
    };
    Ok(ChannelParts {
        step_seconds: (step_ns / 1_000_000_000) as u64,
        steps: steps?,
        apps: app_table(spans, fold.by_app),
        hops: hop_edges(rep, id),
        missing: missing_rows(rep, id),
        findings: window_findings(rep, analyzer, id),
        instances: instance_counts(spans, rep, id, fold.per_instance),
        latency: fold.latency.finish(),
    })
}

/// Instances seen per app and colour in `[since, …)`: the apps of the channel (`apps`; a
/// channel without apps, global: the apps whose effective channel was `channel`), by app,
/// as (app, blue instances, green instances).
pub fn instances_seen(
    spans: &Spans,
    channel: &str,
    apps: &[String],
    since: i64,
) -> Vec<(String, u32, u32)> {
    let cid = spans.channels.get(channel);
    let mut seen: BTreeMap<
        String,
        (
            std::collections::BTreeSet<u32>,
            std::collections::BTreeSet<u32>,
        ),
    > = BTreeMap::new();
    for a in apps {
        seen.entry(a.clone()).or_default();
    }
    for s in spans.iter().filter(|s| {
        s.start >= since
            && (apps.iter().any(|a| spans.apps.get(a) == Some(s.app))
                || (apps.is_empty() && cid.is_some() && s.channel.get() == cid))
    }) {
        let e = seen.entry(spans.apps.name(s.app).to_owned()).or_default();
        match s.color {
            Color::Blue => {
                e.0.insert(s.instance);
            }
            Color::Green => {
                e.1.insert(s.instance);
            }
            Color::Unknown => {}
        }
    }
    seen.into_iter()
        .map(|(app, (b, g))| (app, b.len() as u32, g.len() as u32))
        .collect()
}
