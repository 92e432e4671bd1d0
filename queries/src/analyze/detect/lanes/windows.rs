//! The per-window side of domain §7.4: lane coverage (judged spans with I = L by outcome, and
//! the SERVER spans served by L's instances: requests, errors, p99) per window, lane and app,
//! and the lane error spike (per app and window, each lane's requests against base's, the test
//! of §6.6). [`super::judge`] fills the cells; [`Cells::finish`] turns them into rows and
//! findings.

use std::collections::HashMap;

use dyeline_model::TrafficKind;

use super::findings::{LaneCoverage, LaneErrorSpike};
use super::{BASE, LaneFields, LaneGroups};
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
    /// app, lane.
    pub(crate) fn finish<G: LaneGroups>(
        self,
        window_ns: i64,
        groups: &G,
        apps: &Interner,
        lanes: &Interner,
    ) -> (Vec<LaneCoverage>, Vec<LaneErrorSpike>) {
        let mut keys: Vec<(i64, u32, u32)> = self.map.keys().copied().collect();
        keys.sort_unstable_by_key(|&(w, lane, app)| (w, apps.name(app), lanes.name(lane)));
        let mut coverage = Vec::new();
        let mut spikes = Vec::new();
        let mut map = self.map;
        for &(w, lane, app) in &keys {
            if lane == BASE {
                continue;
            }
            let base = map
                .get(&(w, BASE, app))
                .map(|b| (b.requests, b.errors, b.error_exemplars.clone()));
            let Some(c) = map.get_mut(&(w, lane, app)) else {
                continue;
            };
            if let Some((base_requests, base_errors, base_exemplars)) = base {
                let t = groups.spike_thresholds(app, w);
                let lane_side = (c.requests, c.errors, lane, &c.error_exemplars);
                let base_side = (base_requests, base_errors, BASE, &base_exemplars);
                for (x, y) in [(lane_side, base_side), (base_side, lane_side)] {
                    if let Some(p) = spike(x.0, x.1, y.0, y.1, &t) {
                        spikes.push(LaneErrorSpike {
                            group: groups.group(app, w).map(str::to_owned),
                            app: apps.name(app).to_owned(),
                            lane: lanes.name(x.2).to_owned(),
                            other_lane: lanes.name(y.2).to_owned(),
                            kind: TrafficKind::Rpc,
                            requests: x.0,
                            errors: x.1,
                            error_rate: x.1 as f64 / x.0 as f64,
                            other_requests: y.0,
                            other_errors: y.1,
                            other_error_rate: y.1 as f64 / y.0 as f64,
                            p_value: p,
                            exemplar_trace_ids: hexes(x.3),
                            window_start_unix_nano: w,
                            window_end_unix_nano: w + window_ns,
                        });
                    }
                }
            }
            coverage.push(LaneCoverage {
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
        (coverage, spikes)
    }
}

/// The p-value when side x (`ex` errors of `nx`) spikes against side y by the thresholds.
fn spike(nx: u64, ex: u64, ny: u64, ey: u64, t: &super::SpikeThresholds) -> Option<f64> {
    if nx < t.spike_min_requests || ny < t.spike_min_requests {
        return None;
    }
    let rx = ex as f64 / nx as f64;
    let ry = ey as f64 / ny as f64;
    let p = two_proportion_p(ex, nx, ey, ny);
    (rx >= t.spike_min_error_rate && rx >= t.spike_factor * ry && p < t.spike_p_value).then_some(p)
}
