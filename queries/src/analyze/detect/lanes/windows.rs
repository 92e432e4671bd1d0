//! The per-window side of domain §7.4: lane coverage (judged spans with I = L by outcome, and
//! the SERVER spans served by L's instances: requests, errors, p99) per window, lane and app,
//! and the lane error spike (per app and window, each lane's requests against base's, the test
//! of §6.6). [`super::judge`] fills the cells; [`Cells::finish`] turns them into rows and
//! findings.

use std::collections::HashMap;

use dyeline_model::TrafficKind;

use super::findings::{LaneCoverage, LaneErrorSpike};
use super::{BASE, LaneFields, LaneGroups, SpikeThresholds};
use crate::analyze::detect::error_spike::two_proportion_p;
use crate::analyze::detect::windows::counts::{hexes, keep};
use crate::analyze::intern::Interner;
use crate::summary::percentile_ms;

/// What happened to a judged span marked for a lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Served in the lane.
    Served,
    /// Served in base for want of capacity.
    Fallback,
    /// Retried outside the failing lane.
    Failover,
    /// Leaked.
    Leaked,
}

/// One (window, lane, app).
#[derive(Default)]
struct Cell {
    served: u64,
    fallback: u64,
    failover: u64,
    leaked: u64,
    requests: u64,
    errors: u64,
    /// Durations of the requests (lanes other than base only: base cells feed the spike test).
    durations: Vec<i64>,
    /// The smallest error trace ids.
    error_exemplars: Vec<u128>,
}

/// The cells of some traces, by (window start, lane, app).
#[derive(Default)]
pub(crate) struct Cells {
    map: HashMap<(i64, u32, u32), Cell, foldhash::fast::RandomState>,
}

impl Cells {
    /// A SERVER span `s` served by an instance of `lane`, of `app`, in window `w`.
    pub(crate) fn request<S: LaneFields>(&mut self, w: i64, lane: u32, app: u32, s: &S, _: i64) {
        let c = self.map.entry((w, lane, app)).or_default();
        c.requests += 1;
        if s.is_error() {
            c.errors += 1;
            keep(&mut c.error_exemplars, s.trace());
        }
        if lane != BASE {
            c.durations.push((s.end() - s.start()).max(0));
        }
    }

    /// A judged span of `app` marked for `lane`, in window `w`, with its outcome.
    pub(crate) fn cover(&mut self, w: i64, lane: u32, app: u32, outcome: Outcome) {
        let c = self.map.entry((w, lane, app)).or_default();
        match outcome {
            Outcome::Served => c.served += 1,
            Outcome::Fallback => c.fallback += 1,
            Outcome::Failover => c.failover += 1,
            Outcome::Leaked => c.leaked += 1,
        }
    }

    /// Adds the cells of `other` (other traces) to these.
    pub(crate) fn absorb(&mut self, other: Self) {
        for (k, o) in other.map {
            let c = self.map.entry(k).or_default();
            c.served += o.served;
            c.fallback += o.fallback;
            c.failover += o.failover;
            c.leaked += o.leaked;
            c.requests += o.requests;
            c.errors += o.errors;
            c.durations.extend(o.durations);
            for t in o.error_exemplars {
                keep(&mut c.error_exemplars, t);
            }
        }
    }

    /// The coverage rows (lanes other than base) and the error spikes, each sorted by window,
    /// app, lane; and every cell with requests as a [`SpikeCell`] (what a cluster node
    /// publishes for the leader to add up: [`judge_spike_cells`]).
    pub(crate) fn finish<G: LaneGroups>(
        self,
        window_ns: i64,
        groups: &G,
        apps: &Interner,
        lanes: &Interner,
    ) -> (Vec<LaneCoverage>, Vec<LaneErrorSpike>, Vec<SpikeCell>) {
        let mut keys: Vec<(i64, u32, u32)> = self.map.keys().copied().collect();
        keys.sort_unstable_by_key(|&(w, lane, app)| (w, apps.name(app), lanes.name(lane)));
        let mut coverage = Vec::new();
        let mut spikes = Vec::new();
        let mut cells = Vec::new();
        let mut map = self.map;
        for &(w, lane, app) in &keys {
            let at = group_instant(groups, app, w, window_ns);
            if let Some(c) = map.get(&(w, lane, app))
                && c.requests > 0
            {
                cells.push(SpikeCell {
                    window_start_unix_nano: w,
                    window_ns,
                    lane: lanes.name(lane).to_owned(),
                    app: apps.name(app).to_owned(),
                    group: groups.group(app, at).map(str::to_owned),
                    thresholds: groups.spike_thresholds(app, at),
                    requests: c.requests,
                    errors: c.errors,
                    error_exemplars: c.error_exemplars.clone(),
                });
            }
            if lane == BASE {
                continue;
            }
            if let (Some(c), Some(b)) = (map.get(&(w, lane, app)), map.get(&(w, BASE, app))) {
                let place = Place {
                    window_start: w,
                    window_ns,
                    app: apps.name(app),
                    group: groups.group(app, at),
                };
                let t = groups.spike_thresholds(app, at);
                let (c, b) = (c.side(lanes.name(lane)), b.side(lanes.name(BASE)));
                judge_pair(&place, c, b, &t, &mut spikes);
            }
            let Some(c) = map.get_mut(&(w, lane, app)) else {
                continue;
            };
            coverage.push(LaneCoverage {
                environment: None,
                window_start_unix_nano: w,
                window_end_unix_nano: w + window_ns,
                lane: lanes.name(lane).to_owned(),
                app: apps.name(app).to_owned(),
                served_in_lane: c.served,
                lane_fallback: c.fallback,
                failover: c.failover,
                leaked: c.leaked,
                requests: c.requests,
                errors: c.errors,
                p99_ms: percentile_ms(&mut c.durations, 0.99).unwrap_or(0.0),
            });
        }
        (coverage, spikes, cells)
    }
}

/// The instant whose lane group judges `app`'s window `[w, w + window_ns)`: its last instant
/// when the app is in a group then, else its start. A group put or changed during a window
/// judges that window (it is in force when the window closes and is reported), and a window
/// in which the app's group was deleted keeps the group it had at its start.
fn group_instant<G: LaneGroups>(groups: &G, app: u32, w: i64, window_ns: i64) -> i64 {
    let last = w.saturating_add(window_ns.max(1) - 1);
    if groups.group(app, last).is_some() {
        last
    } else {
        w
    }
}

/// The requests of one (window, lane, app) for the lane error spike, by name, with the group
/// and thresholds in force: a cluster node's share of the test, added up by the leader.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SpikeCell {
    /// Window start, Unix ns.
    pub window_start_unix_nano: i64,
    /// The lane window, ns.
    pub window_ns: i64,
    /// The lane its instances serve in.
    pub lane: String,
    /// The app.
    pub app: String,
    /// The app's lane group then.
    pub group: Option<String>,
    /// The group's spike thresholds then.
    pub thresholds: SpikeThresholds,
    /// SERVER spans.
    pub requests: u64,
    /// Of which errors.
    pub errors: u64,
    /// The smallest error trace ids.
    pub error_exemplars: Vec<u128>,
}

/// The lane error spikes of `cells` added up per (window, lane, app) (the cells of every
/// node), judged as one node judges its own, sorted by window, app, lane.
pub fn judge_spike_cells(cells: Vec<SpikeCell>) -> Vec<LaneErrorSpike> {
    let mut sum: std::collections::BTreeMap<(i64, String, String), SpikeCell> =
        std::collections::BTreeMap::new();
    for c in cells {
        let key = (c.window_start_unix_nano, c.app.clone(), c.lane.clone());
        match sum.get_mut(&key) {
            Some(s) => {
                s.requests += c.requests;
                s.errors += c.errors;
                for t in c.error_exemplars {
                    keep(&mut s.error_exemplars, t);
                }
            }
            None => {
                sum.insert(key, c);
            }
        }
    }
    let base_name = dyeline_model::LaneId::BASE;
    let mut spikes = Vec::new();
    for ((w, app, lane), c) in &sum {
        if lane == base_name {
            continue;
        }
        let Some(b) = sum.get(&(*w, app.clone(), base_name.to_owned())) else {
            continue;
        };
        let place = Place {
            window_start: *w,
            window_ns: c.window_ns,
            app,
            group: c.group.as_deref(),
        };
        judge_pair(&place, c.side(), b.side(), &c.thresholds, &mut spikes);
    }
    spikes
}

impl Cell {
    fn side<'a>(&'a self, lane: &'a str) -> Side<'a> {
        Side {
            requests: self.requests,
            errors: self.errors,
            lane,
            exemplars: &self.error_exemplars,
        }
    }
}

impl SpikeCell {
    fn side(&self) -> Side<'_> {
        Side {
            requests: self.requests,
            errors: self.errors,
            lane: &self.lane,
            exemplars: &self.error_exemplars,
        }
    }
}

/// Where a lane and base are compared.
struct Place<'a> {
    window_start: i64,
    window_ns: i64,
    app: &'a str,
    group: Option<&'a str>,
}

/// One side of the comparison: a lane's requests, errors and error exemplars.
#[derive(Clone, Copy)]
struct Side<'a> {
    requests: u64,
    errors: u64,
    lane: &'a str,
    exemplars: &'a [u128],
}

/// The spikes of `lane` against `base` and of `base` against `lane` at `place` by `t`.
fn judge_pair(
    place: &Place<'_>,
    lane: Side<'_>,
    base: Side<'_>,
    t: &SpikeThresholds,
    out: &mut Vec<LaneErrorSpike>,
) {
    for (x, y) in [(lane, base), (base, lane)] {
        if let Some(p) = spike(x.requests, x.errors, y.requests, y.errors, t) {
            out.push(LaneErrorSpike {
                environment: None,
                group: place.group.map(str::to_owned),
                app: place.app.to_owned(),
                lane: x.lane.to_owned(),
                other_lane: y.lane.to_owned(),
                kind: TrafficKind::Rpc,
                requests: x.requests,
                errors: x.errors,
                error_rate: x.errors as f64 / x.requests as f64,
                other_requests: y.requests,
                other_errors: y.errors,
                other_error_rate: y.errors as f64 / y.requests as f64,
                p_value: p,
                exemplar_trace_ids: hexes(x.exemplars),
                window_start_unix_nano: place.window_start,
                window_end_unix_nano: place.window_start + place.window_ns,
            });
        }
    }
}

/// The p-value when side x (`ex` errors of `nx`) spikes against side y by the thresholds.
fn spike(nx: u64, ex: u64, ny: u64, ey: u64, t: &SpikeThresholds) -> Option<f64> {
    if nx < t.spike_min_requests || ny < t.spike_min_requests {
        return None;
    }
    let rx = ex as f64 / nx as f64;
    let ry = ey as f64 / ny as f64;
    let p = two_proportion_p(ex, nx, ey, ny);
    (rx >= t.spike_min_error_rate && rx >= t.spike_factor * ry && p < t.spike_p_value).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(lane: &str, requests: u64, errors: u64, first_error: u128) -> SpikeCell {
        SpikeCell {
            window_start_unix_nano: 60,
            window_ns: 60,
            lane: lane.into(),
            app: "order".into(),
            group: Some("g".into()),
            thresholds: SpikeThresholds::default(),
            requests,
            errors,
            error_exemplars: (first_error..first_error + errors.min(5) as u128).collect(),
        }
    }

    /// Two nodes' cells, each under the test's 100 requests a side, spike once added up:
    /// the sums and the smallest exemplars of both.
    #[test]
    fn cells_of_several_nodes_are_judged_added_up() {
        let node = |first: u128| vec![cell("gray", 60, 6, first), cell("base", 60, 0, 0)];
        assert!(judge_spike_cells(node(100)).is_empty());
        let spikes = judge_spike_cells([node(100), node(10)].concat());
        assert_eq!(spikes.len(), 1, "{spikes:?}");
        let s = &spikes[0];
        assert_eq!(
            (s.lane.as_str(), s.other_lane.as_str(), s.requests, s.errors),
            ("gray", "base", 120, 12)
        );
        assert_eq!((s.other_requests, s.group.as_deref()), (120, Some("g")));
        assert_eq!(s.exemplar_trace_ids[0], format!("{:032x}", 10));
        assert_eq!(s.window_end_unix_nano, 120);
    }
}
