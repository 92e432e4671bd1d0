//! The lanes pages' panels (domain §7), computed from a snapshot's spans and report: the lane
//! groups' index ([`lanes_index`]) and one group's (or the ungrouped apps') apps × lanes
//! matrix, findings, counts and error rates ([`lanes_panel`]). The groups shown are the ones
//! the caller gives (the control plane's now); the findings name each span's group as it was.

use std::collections::{BTreeMap, BTreeSet, HashMap};

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// One app's SERVER spans in one lane over the range: (requests, errors) per step, and their
/// totals.
type AppLane = (Vec<(u64, u64)>, u64, u64);

use dyeline_model::release::LaneGroup;

use super::TimeRange;
use crate::analyze::Report;
use crate::analyze::detect::lanes::{
    LaneCounts, LaneLeak, LaneMark, LaneReport, LaneTagChanged, LaneTagDropped,
};
use crate::analyze::spans::{Kind, Spans};

/// Example traces kept per finding row.
const EXAMPLES: usize = 5;

/// One line of the index: a group (`None`: the apps in no group).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupLine {
    /// Group id.
    pub group: Option<String>,
    /// Its apps (for `None`: the apps seen in no group).
    pub apps: Vec<String>,
    /// Its lanes other than base (for `None`: the lanes seen among its apps).
    pub lanes: Vec<String>,
    /// Lane findings of its apps.
    pub findings: u64,
    /// Counted fallbacks of its apps.
    pub lane_fallback: u64,
}

/// A group's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupSettings {
    /// Id.
    pub id: String,
    /// Entry apps.
    pub entry_apps: Vec<String>,
    /// Strict lanes.
    pub strict_lanes: Vec<String>,
    /// Reverse fallback allowed.
    pub reverse_fallback: bool,
}

/// An instance in a cell: its id, which signals showed it, and whether it signalled within
/// the presence window before the range's end.
#[derive(Clone, Debug, PartialEq)]
pub struct CellInstance {
    /// Instance id.
    pub instance: String,
    /// `spans`, `metrics` or both, comma-joined.
    pub signals: String,
    /// Signalled within W before the range's end.
    pub recent: bool,
}

/// An app in a lane over the range.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cell {
    /// Its instances.
    pub instances: Vec<CellInstance>,
    /// Coverage: served in lane, fallback, failover, leaked.
    pub served_in_lane: u64,
    /// ...
    pub lane_fallback: u64,
    /// ...
    pub failover: u64,
    /// ...
    pub leaked: u64,
    /// Base requests served in the lane.
    pub pollution: u64,
    /// SERVER spans its instances served.
    pub requests: u64,
    /// Their errors.
    pub errors: u64,
    /// The largest p99 of a window, ms.
    pub p99_ms: Option<f64>,
}

/// A row of lane findings grouped by what they name.
#[derive(Clone, Debug, PartialEq)]
pub struct FindingRow {
    /// Finding type.
    pub finding: &'static str,
    /// Where: the edge or app.
    pub place: String,
    /// The lane.
    pub lane: String,
    /// RPC or MQ.
    pub kind: String,
    /// Reason.
    pub reason: String,
    /// Occurrences.
    pub count: u64,
    /// First, Unix ns.
    pub first_unix_nano: i64,
    /// Example traces.
    pub trace_ids: Vec<String>,
}

/// A chart series: (step start, Unix ns; value, none for a step without data).
pub type Points = Vec<(i64, Option<f64>)>;

/// A lanes page's panels.
#[derive(Clone, Debug, PartialEq)]
pub struct LanesPanel {
    /// The group (`None`: the apps in no group).
    pub group: Option<GroupSettings>,
    /// Lanes, base first.
    pub lanes: Vec<String>,
    /// (app, a cell per lane).
    pub apps: Vec<(String, Vec<Cell>)>,
    /// Findings.
    pub findings: Vec<FindingRow>,
    /// Counts of the whole range.
    pub counts: LaneCounts,
    /// Per app with requests in a lane: per lane, (step start, error rate) points.
    pub error_rates: Vec<(String, Vec<(String, Points)>)>,
}

/// The apps of the scope: the group's, or the apps seen in the spans that are in none of
/// `groups`.
fn scope_apps(spans: &Spans, scope: Option<&LaneGroup>, groups: &[LaneGroup]) -> Vec<String> {
    match scope {
        Some(g) => g.apps().to_vec(),
        None => {
            // The apps of the range's spans and signals (the interner may also hold names of
            // a file's dictionary that no span of the range has).
            let mut seen = vec![false; spans.apps.len()];
            for s in spans.iter() {
                seen[s.app as usize] = true;
            }
            let apps: BTreeSet<String> = (0..spans.apps.len() as u32)
                .filter(|&a| seen[a as usize])
                .map(|a| spans.apps.name(a).to_owned())
                .chain(spans.signals.iter().map(|g| g.app.clone()))
                .filter(|a| !groups.iter().any(|g| g.contains(a)))
                .collect();
            apps.into_iter().collect()
        }
    }
}

/// The index: every group of `groups`, then the apps in none of them.
pub fn lanes_index(spans: &Spans, rep: &Report, groups: &[LaneGroup]) -> Vec<GroupLine> {
    let lane = rep.lane.as_ref();
    let mut out: Vec<GroupLine> = groups
        .iter()
        .map(|g| {
            let id = g.id().as_str();
            GroupLine {
                group: Some(id.to_owned()),
                apps: g.apps().to_vec(),
                lanes: g.lanes().keys().map(|l| l.as_str().to_owned()).collect(),
                findings: lane.map_or(0, |l| findings_of(l, Some(id)).len() as u64),
                lane_fallback: lane.map_or(0, |l| fallbacks(l, |app| g.contains(app))),
            }
        })
        .collect();
    out.sort_by(|a, b| a.group.cmp(&b.group));
    let apps = scope_apps(spans, None, groups);
    let set: BTreeSet<&str> = apps.iter().map(String::as_str).collect();
    out.push(GroupLine {
        group: None,
        lanes: seen_lanes(spans, &set),
        findings: lane.map_or(0, |l| findings_of(l, None).len() as u64),
        lane_fallback: lane.map_or(0, |l| fallbacks(l, |app| set.contains(app))),
        apps,
    });
    out
}

/// Fallbacks counted in the coverage rows of the apps `keep` keeps.
fn fallbacks(l: &LaneReport, keep: impl Fn(&str) -> bool) -> u64 {
    l.coverage
        .iter()
        .filter(|c| keep(&c.app))
        .map(|c| c.lane_fallback)
        .sum()
}

/// Which app ids of `spans` are among `apps` (a span's app is then one index, not a name
/// looked up in a set per span).
fn app_ids_in(spans: &Spans, apps: &BTreeSet<&str>) -> Vec<bool> {
    (0..spans.apps.len() as u32)
        .map(|a| apps.contains(spans.apps.name(a)))
        .collect()
}

/// Lanes other than base that the spans of `apps` were served in or tagged for, sorted.
fn seen_lanes(spans: &Spans, apps: &BTreeSet<&str>) -> Vec<String> {
    let in_scope = app_ids_in(spans, apps);
    // Lane facts are few: each is looked at once.
    let mut facts = BTreeSet::new();
    for s in spans.iter() {
        if in_scope[s.app as usize] {
            facts.insert(s.lane);
        }
    }
    let mut lanes = BTreeSet::new();
    for fact in facts {
        let f = spans.lanes.fact(fact);
        for l in std::iter::once(f.lane).chain(f.tag) {
            if l != 0 {
                lanes.insert(spans.lanes.names.name(l).to_owned());
            }
        }
    }
    lanes.into_iter().collect()
}

/// Where a leak went: `from (lane) → to (lane) via apps`.
fn leak_place(f: &LaneLeak) -> String {
    let from = match &f.from_lane {
        Some(lane) => format!("{} ({lane})", f.from_app),
        None => f.from_app.clone(),
    };
    let via = if f.via.is_empty() {
        String::new()
    } else {
        format!(" via {}", f.via.join(", "))
    };
    format!("{from} → {} ({}){via}", f.to_app, f.to_lane)
}

/// Where a tag was dropped: `dropped_by → app`.
fn dropped_place(f: &LaneTagDropped) -> String {
    format!("{} → {}", f.dropped_by, f.app)
}

/// Where a tag was set or changed: `from (lane) → to (lane)`.
fn changed_place(f: &LaneTagChanged) -> String {
    format!(
        "{} ({}) → {} ({})",
        f.from_app, f.from_lane, f.to_app, f.to_lane
    )
}

/// One line of a lane mark on a trace page's span (domain §7.3), in the words of the lanes
/// page's finding rows.
pub fn lane_mark_line(m: &LaneMark) -> String {
    match m {
        LaneMark::LaneLeak(f) => format!(
            "LANE LEAK {}: {}, {}",
            f.lane,
            leak_place(f),
            f.reason.as_str()
        ),
        LaneMark::LaneTagDropped(f) => format!(
            "TAG DROPPED {}: {}, {}",
            f.lane,
            dropped_place(f),
            f.where_.as_str()
        ),
        LaneMark::LanePollution(f) => format!(
            "LANE POLLUTION {}: base traffic from {}, {}",
            f.lane,
            f.from_app,
            f.reason.as_str()
        ),
        LaneMark::LaneTagChanged(f) => {
            format!("TAG CHANGED: {}, {}", changed_place(f), f.reason.as_str())
        }
        LaneMark::LaneFallback { lane } => format!("FALLBACK {lane} → base: no {lane} instance"),
        LaneMark::Failover { lane } => format!("FAILOVER from {lane}: a retry after {lane} failed"),
        LaneMark::ReverseFallback { lane } => {
            format!("REVERSE FALLBACK base → {lane}: no base instance")
        }
        LaneMark::TagNotRecorded { lane } => {
            format!("TAG NOT RECORDED {lane}: carried again below")
        }
    }
}

/// The finding rows of the scope (a group id, or `None` for no group), grouped.
fn findings_of(l: &LaneReport, scope: Option<&str>) -> Vec<FindingRow> {
    let mut rows: BTreeMap<(&'static str, String, String, String, String), FindingRow> =
        BTreeMap::new();
    let mut add = |group: &Option<String>,
                   finding: &'static str,
                   place: String,
                   lane: &str,
                   kind: &str,
                   reason: String,
                   t: i64,
                   trace: &str| {
        if group.as_deref() != scope {
            return;
        }
        let key = (
            finding,
            place.clone(),
            lane.to_owned(),
            kind.to_owned(),
            reason.clone(),
        );
        let row = rows.entry(key).or_insert_with(|| FindingRow {
            finding,
            place,
            lane: lane.to_owned(),
            kind: kind.to_owned(),
            reason,
            count: 0,
            first_unix_nano: t,
            trace_ids: Vec::new(),
        });
        row.count += 1;
        row.first_unix_nano = row.first_unix_nano.min(t);
        if row.trace_ids.len() < EXAMPLES && !row.trace_ids.iter().any(|x| x == trace) {
            row.trace_ids.push(trace.to_owned());
        }
    };
    for f in &l.leaks {
        let place = leak_place(f);
        add(
            &f.group,
            "lane_leak",
            place,
            &f.lane,
            f.kind.as_str(),
            f.reason.as_str().to_owned(),
            f.t_unix_nano,
            &f.trace_id,
        );
    }
    for f in &l.tags_dropped {
        let place = dropped_place(f);
        add(
            &f.group,
            "lane_tag_dropped",
            place,
            &f.lane,
            f.kind.as_str(),
            f.where_.as_str().to_owned(),
            f.t_unix_nano,
            &f.trace_id,
        );
    }
    for f in &l.pollution {
        let place = format!("{} → {}", f.from_app, f.app);
        add(
            &f.group,
            "lane_pollution",
            place,
            &f.lane,
            f.kind.as_str(),
            f.reason.as_str().to_owned(),
            f.t_unix_nano,
            &f.trace_id,
        );
    }
    for f in &l.tags_changed {
        let place = changed_place(f);
        add(
            &f.group,
            "lane_tag_changed",
            place,
            &f.to_lane,
            f.kind.as_str(),
            f.reason.as_str().to_owned(),
            f.t_unix_nano,
            &f.trace_id,
        );
    }
    let mut out: Vec<FindingRow> = rows.into_values().collect();
    for s in &l.error_spikes {
        if s.group.as_deref() != scope {
            continue;
        }
        out.push(FindingRow {
            finding: "lane_error_spike",
            place: s.app.clone(),
            lane: s.lane.clone(),
            kind: s.kind.as_str().to_owned(),
            reason: format!(
                "{:.1}% errors ({} of {}) against {:.1}% on {}",
                s.error_rate * 100.0,
                s.errors,
                s.requests,
                s.other_error_rate * 100.0,
                s.other_lane
            ),
            count: 1,
            first_unix_nano: s.window_start_unix_nano,
            trace_ids: s.exemplar_trace_ids.clone(),
        });
    }
    out
}

/// The page of `scope` (one of `groups`, or `None` for the apps in none of them) over `range`,
/// error rates in steps of `step_ns`; an instance is recent when it signalled within
/// `presence_window_ns` before the range's end.
pub fn lanes_panel(
    spans: &Spans,
    rep: &Report,
    scope: Option<&LaneGroup>,
    groups: &[LaneGroup],
    range: TimeRange,
    step_ns: i64,
    presence_window_ns: i64,
) -> LanesPanel {
    let apps = scope_apps(spans, scope, groups);
    let scope_id = scope.map(|g| g.id().as_str());
    let group = scope.map(|g| GroupSettings {
        id: g.id().as_str().to_owned(),
        entry_apps: g.entry_apps().to_vec(),
        strict_lanes: g
            .lanes()
            .iter()
            .filter(|(_, s)| s.fallback == dyeline_model::release::Fallback::None)
            .map(|(l, _)| l.as_str().to_owned())
            .collect(),
        reverse_fallback: g.reverse_fallback(),
    });
    let set: BTreeSet<&str> = apps.iter().map(String::as_str).collect();
    let mut lanes = vec!["base".to_owned()];
    lanes.extend(seen_lanes(spans, &set));
    let lane_at = |name: &str| lanes.iter().position(|l| l == name);
    let empty = LaneReport::default();
    let report = rep.lane.as_ref().unwrap_or(&empty);
    let mut cells: BTreeMap<&str, Vec<Cell>> = apps
        .iter()
        .map(|a| (a.as_str(), vec![Cell::default(); lanes.len()]))
        .collect();
    // Instances, by the signals that showed them.
    let mut seen: BTreeMap<(String, usize, String), (BTreeSet<&str>, i64)> = BTreeMap::new();
    let step = step_ns.max(1);
    let steps = ((range.to_unix_nano - range.from_unix_nano) / step + 1) as usize;
    let mut series: BTreeMap<(String, usize), Vec<(u64, u64)>> = BTreeMap::new();
    // One pass over the spans keyed by ids (app, lane index, instance); names come after.
    let in_scope = app_ids_in(spans, &set);
    let lane_index: Vec<Option<usize>> = (0..spans.lanes.facts())
        .map(|fact| {
            let lane = spans.lanes.fact(u16::try_from(fact).unwrap_or(0)).lane;
            lane_at(spans.lanes.names.name(lane))
        })
        .collect();
    let mut by_instance: FastMap<(u32, usize, u32), i64> = FastMap::default();
    let mut by_app: FastMap<(u32, usize), AppLane> = FastMap::default();
    for s in spans.iter() {
        if !in_scope[s.app as usize] {
            continue;
        }
        // An id past the table reads as fact 0, as `LaneTable::fact` does.
        let Some(li) = lane_index
            .get(usize::from(s.lane))
            .copied()
            .unwrap_or(lane_index[0])
        else {
            continue;
        };
        let last = by_instance
            .entry((s.app, li, s.instance))
            .or_insert(i64::MIN);
        *last = (*last).max(s.end);
        if s.kind == Kind::Server {
            let (v, requests, errors) = by_app
                .entry((s.app, li))
                .or_insert_with(|| (vec![(0, 0); steps], 0, 0));
            *requests += 1;
            *errors += u64::from(s.is_error);
            let k = ((s.start - range.from_unix_nano).max(0) / step) as usize;
            if let Some(p) = v.get_mut(k) {
                p.0 += 1;
                p.1 += u64::from(s.is_error);
            }
        }
    }
    for ((app, li, instance), last) in by_instance {
        let e = seen
            .entry((
                spans.apps.name(app).to_owned(),
                li,
                spans.instances.name(instance).to_owned(),
            ))
            .or_insert((BTreeSet::new(), i64::MIN));
        e.0.insert("spans");
        e.1 = e.1.max(last);
    }
    for ((app, li), (v, requests, errors)) in by_app {
        let app = spans.apps.name(app);
        if li == 0
            && let Some(c) = cells.get_mut(app)
        {
            c[0].requests += requests;
            c[0].errors += errors;
        }
        series.insert((app.to_owned(), li), v);
    }
    for g in &spans.signals {
        if !set.contains(g.app.as_str()) {
            continue;
        }
        let Some(li) = lane_at(&g.lane) else { continue };
        let e = seen
            .entry((g.app.clone(), li, g.instance.clone()))
            .or_insert((BTreeSet::new(), i64::MIN));
        e.0.insert("metrics");
        e.1 = e.1.max(g.t_unix_nano);
    }
    for ((app, li, instance), (signals, last)) in &seen {
        if let Some(c) = cells.get_mut(app.as_str()) {
            c[*li].instances.push(CellInstance {
                instance: instance.clone(),
                signals: signals.iter().copied().collect::<Vec<_>>().join(", "),
                recent: *last >= range.to_unix_nano - presence_window_ns,
            });
        }
    }
    for c in &report.coverage {
        let (Some(row), Some(li)) = (cells.get_mut(c.app.as_str()), lane_at(&c.lane)) else {
            continue;
        };
        let cell = &mut row[li];
        cell.served_in_lane += c.served_in_lane;
        cell.lane_fallback += c.lane_fallback;
        cell.failover += c.failover;
        cell.leaked += c.leaked;
        cell.requests += c.requests;
        cell.errors += c.errors;
        if c.requests > 0 {
            cell.p99_ms = Some(cell.p99_ms.unwrap_or(0.0).max(c.p99_ms));
        }
    }
    for p in &report.pollution {
        if let (Some(row), Some(li)) = (cells.get_mut(p.app.as_str()), lane_at(&p.lane)) {
            row[li].pollution += 1;
        }
    }
    let mut error_rates = Vec::new();
    for app in &apps {
        let per_lane: Vec<(String, Points)> = (0..lanes.len())
            .filter_map(|li| {
                let v = series.get(&(app.clone(), li))?;
                let points = v
                    .iter()
                    .enumerate()
                    .map(|(k, &(n, e))| {
                        let t = range.from_unix_nano + k as i64 * step;
                        (t, (n > 0).then(|| e as f64 / n as f64))
                    })
                    .collect();
                Some((lanes[li].clone(), points))
            })
            .collect();
        if per_lane.iter().any(|(l, _)| l != "base") {
            error_rates.push((app.clone(), per_lane));
        }
    }
    LanesPanel {
        group,
        findings: findings_of(report, scope_id),
        counts: report.counts.clone(),
        apps: cells.into_iter().map(|(a, c)| (a.to_owned(), c)).collect(),
        lanes,
        error_rates,
    }
}
