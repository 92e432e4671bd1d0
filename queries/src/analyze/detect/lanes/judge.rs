//! The per-span rules of domain §7.3 over one trace at a time: lane leaks (with the counted
//! `failover` and `lane_fallback`), dropped tags (with `tag_not_recorded`), base traffic in a
//! lane (with `reverse_fallback`), tags set or changed mid-trace, and the undetermined count;
//! each judged span also goes into its window's coverage cell, and each SERVER span of a
//! tracked app into its window's request cell ([`super::windows`]).

use dyeline_model::TrafficKind;

use super::findings::{
    DropWhere, LaneLeak, LanePollution, LaneReport, LaneTagChanged, LaneTagDropped, LeakReason,
    PollutionReason, TagChangeReason,
};
use super::marks::Counted;
use super::presence::Presence;
use super::tree::{Intent, Parent, Tree, Up};
use super::windows::{Cells, Outcome};
use super::{BASE, LaneFields, LaneGroups, LaneKind};
use crate::analyze::detect::windows::window_start;
use crate::analyze::findings::{hex64, hex128};
use crate::analyze::intern::Interner;

/// What a `from_app` is when there is no such span.
const NONE_APP: &str = "(none)";

/// Judges traces one at a time into a [`LaneReport`] (see the module docs).
pub struct LaneJudge<'a, G: LaneGroups> {
    presence: &'a Presence,
    groups: &'a G,
    apps: &'a Interner,
    lanes: &'a Interner,
    /// Apps whose requests are counted per lane and window (the apps with a lane instance).
    tracked: &'a [bool],
    window_ns: i64,
    report: LaneReport,
    cells: Cells,
    /// The counted outcomes of the spans of the last trace judged, by index, when kept
    /// ([`LaneJudge::keep_counted`]).
    counted: Option<Vec<(usize, Counted)>>,
}

impl<'a, G: LaneGroups> LaneJudge<'a, G> {
    /// A judge with nothing judged yet: app and lane ids name entries of `apps` and `lanes`
    /// (whose id 0 is `base`), windows are `window_ns` long.
    pub fn new(
        presence: &'a Presence,
        groups: &'a G,
        apps: &'a Interner,
        lanes: &'a Interner,
        tracked: &'a [bool],
        window_ns: i64,
    ) -> Self {
        Self {
            presence,
            groups,
            apps,
            lanes,
            tracked,
            window_ns,
            report: LaneReport::default(),
            cells: Cells::default(),
            counted: None,
        }
    }

    /// Keeps each span's counted outcome (not a finding) of the traces judged from now on, by
    /// index into the trace's slice ([`LaneJudge::take_counted`]).
    pub(crate) fn keep_counted(&mut self) {
        self.counted = Some(Vec::new());
    }

    /// The counted outcomes kept since the last call.
    pub(crate) fn take_counted(&mut self) -> Vec<(usize, Counted)> {
        self.counted
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Counts outcome `c` of span `i` (and keeps it when asked to).
    fn count(&mut self, i: usize, c: Counted) {
        let n = &mut self.report.counts;
        *match c {
            Counted::Undetermined => &mut n.undetermined,
            Counted::LaneFallback => &mut n.lane_fallback,
            Counted::Failover => &mut n.failover,
            Counted::ReverseFallback => &mut n.reverse_fallback,
            Counted::TagNotRecorded => &mut n.tag_not_recorded,
        } += 1;
        if let Some(v) = &mut self.counted {
            v.push((i, c));
        }
    }

    /// Adds `n` lane carriers that gave no lane id, and `m` instances with an invalid lane value.
    pub fn count_malformed(&mut self, carriers: u64, instances: u64) {
        self.report.counts.malformed_lane_tags += carriers;
        self.report.counts.invalid_instance_lanes += instances;
    }

    /// Judges one trace's spans (each key once, in any order).
    pub fn trace<S: LaneFields>(&mut self, ss: &[S]) {
        for s in ss {
            if s.lane_kind() == LaneKind::Server && self.is_tracked(s.app()) {
                let w = window_start(s.start(), self.window_ns);
                self.cells.request(w, s.lane(), s.app(), s, self.window_ns);
            }
        }
        if !self.worth_a_tree(ss) {
            return;
        }
        let mut tree = Tree::new(ss);
        for i in 0..ss.len() {
            if !tree.entry[i] {
                continue;
            }
            match tree.intent[i] {
                Intent::Undetermined => self.count(i, Counted::Undetermined),
                Intent::Lane { lane, explicit } if ss[i].lane_kind().is_judged() => {
                    self.judge(ss, &mut tree, i, lane, explicit);
                }
                _ => {}
            }
        }
    }

    /// Adds what `other` judged (other traces, by the same presence, groups and windows) to
    /// this judge, as if this one had judged them after its own.
    pub fn absorb(&mut self, other: Self) {
        self.report.absorb(other.report);
        self.cells.absorb(other.cells);
    }

    /// The report, with the windows judged.
    pub fn finish(self) -> LaneReport {
        let mut report = self.report;
        let (coverage, spikes, cells) =
            self.cells
                .finish(self.window_ns, self.groups, self.apps, self.lanes);
        report.coverage = coverage;
        report.error_spikes = spikes;
        report.spike_cells = cells;
        report
    }

    fn is_tracked(&self, app: u32) -> bool {
        self.tracked.get(app as usize).copied().unwrap_or(false)
    }

    /// False only when no rule can say anything of the trace: no tag, no lane instance, every
    /// parent present and no batch consumer (the common case of a release without lanes).
    fn worth_a_tree<S: LaneFields>(&self, ss: &[S]) -> bool {
        if ss
            .iter()
            .any(|s| s.tag().is_some() || s.lane() != BASE || s.has_links())
        {
            return true;
        }
        // Parents missing from the trace make entry spans undetermined: find them. Small
        // traces by a scan, larger ones by a sorted list of ids.
        if ss.len() <= 16 {
            return ss.iter().any(|s| {
                s.parent()
                    .is_some_and(|p| !ss.iter().any(|x| x.span() == p.get()))
            });
        }
        let mut ids: Vec<u64> = ss.iter().map(LaneFields::span).collect();
        ids.sort_unstable();
        ss.iter().any(|s| {
            s.parent()
                .is_some_and(|p| ids.binary_search(&p.get()).is_err())
        })
    }

    /// The rules of §7.3 for judged span `i` with intended lane `lane`.
    fn judge<S: LaneFields>(
        &mut self,
        ss: &[S],
        tree: &mut Tree,
        i: usize,
        lane: u32,
        explicit: bool,
    ) {
        let s = &ss[i];
        let (app, t, served) = (s.app(), s.start(), s.lane());
        let w = window_start(t, self.window_ns);
        if lane != BASE {
            let outcome = if served == lane {
                Outcome::Served
            } else if self.failover(ss, tree, i, lane) {
                self.count(i, Counted::Failover);
                Outcome::Failover
            } else if let Some(reason) = self.leak_reason(ss, tree, i, lane) {
                self.leak(ss, tree, i, lane, reason);
                Outcome::Leaked
            } else {
                self.count(i, Counted::LaneFallback);
                Outcome::Fallback
            };
            self.cells.cover(w, lane, app, outcome);
        } else if served != BASE {
            let reason = if self.presence.has_capacity(app, BASE, t) {
                Some(if explicit {
                    PollutionReason::ExplicitBase
                } else {
                    PollutionReason::Untagged
                })
            } else if self.groups.reverse_fallback(app, t) {
                self.count(i, Counted::ReverseFallback);
                None
            } else {
                Some(PollutionReason::NoBaseInstance)
            };
            if let Some(reason) = reason {
                let from_app = match tree.up[i] {
                    Up::Entry(u) => self.app_name(ss[u].app()),
                    _ => NONE_APP.to_owned(),
                };
                self.report.pollution.push(LanePollution {
                    environment: None,
                    trace_id: hex128(s.trace()),
                    span_id: hex64(s.span()),
                    t_unix_nano: t,
                    group: self.group(app, t),
                    app: self.app_name(app),
                    lane: self.lane_name(served),
                    kind: kind(s),
                    reason,
                    from_app,
                });
            }
        }
        self.dropped(ss, tree, i);
        self.changed(ss, tree, i);
    }

    /// §7.3.1: the leak reason of a span marked for `lane` and served elsewhere, or `None` for
    /// a `lane_fallback`.
    fn leak_reason<S: LaneFields>(
        &self,
        ss: &[S],
        tree: &Tree,
        i: usize,
        lane: u32,
    ) -> Option<LeakReason> {
        let s = &ss[i];
        let (app, t) = (s.app(), s.start());
        if self.presence.has_capacity(app, lane, t) {
            return Some(if s.tag() == Some(lane) {
                LeakReason::TagIgnored
            } else {
                LeakReason::TagDropped
            });
        }
        let root = tree.parent[i] == Parent::Root;
        if !root && !self.groups.is_entry(app, t) && self.groups.is_strict(app, lane, t) {
            return Some(LeakReason::StrictLane);
        }
        (s.lane() != BASE).then_some(LeakReason::WrongFallback)
    }

    /// An earlier entry span of the same app, with the same upstream, was served in `lane`
    /// and ended in error.
    fn failover<S: LaneFields>(&self, ss: &[S], tree: &Tree, i: usize, lane: u32) -> bool {
        let Up::Entry(u) = tree.up[i] else {
            return false;
        };
        let s = &ss[i];
        ss.iter().enumerate().any(|(k, e)| {
            k != i
                && tree.entry[k]
                && tree.up[k] == Up::Entry(u)
                && e.app() == s.app()
                && e.lane() == lane
                && e.is_error()
                && (e.start(), e.span()) < (s.start(), s.span())
        })
    }

    fn leak<S: LaneFields>(
        &mut self,
        ss: &[S],
        tree: &Tree,
        i: usize,
        lane: u32,
        reason: LeakReason,
    ) {
        let s = &ss[i];
        let chain: Vec<usize> = tree.upstream_chain(i).collect();
        let (from, between) = match chain.iter().position(|&u| ss[u].lane() == lane) {
            Some(k) => (Some(chain[k]), &chain[..k]),
            None => (None, &chain[..]),
        };
        let mut via: Vec<String> = Vec::new();
        for &u in between.iter().rev() {
            let name = self.app_name(ss[u].app());
            if !via.contains(&name) {
                via.push(name);
            }
        }
        self.report.leaks.push(LaneLeak {
            environment: None,
            trace_id: hex128(s.trace()),
            span_id: hex64(s.span()),
            t_unix_nano: s.start(),
            group: self.group(s.app(), s.start()),
            lane: self.lane_name(lane),
            kind: kind(s),
            reason,
            from_app: from.map_or_else(|| NONE_APP.to_owned(), |u| self.app_name(ss[u].app())),
            from_lane: from.map(|u| self.lane_name(ss[u].lane())),
            to_app: self.app_name(s.app()),
            to_lane: self.lane_name(s.lane()),
            via,
        });
    }

    /// §7.3.2: `i` carries no tag while its upstream carries a lane's.
    fn dropped<S: LaneFields>(&mut self, ss: &[S], tree: &mut Tree, i: usize) {
        let s = &ss[i];
        if s.tag().is_some() {
            return;
        }
        let Up::Entry(u) = tree.up[i] else {
            return;
        };
        let Some(lane) = ss[u].tag().filter(|&l| l != BASE) else {
            return;
        };
        if tree.tag_below(ss, i, lane) {
            self.count(i, Counted::TagNotRecorded);
            return;
        }
        let where_ = match tree.caller(ss, i) {
            Some(c) if ss[c].tag().is_some() => DropWhere::OnWire,
            Some(_) => DropWhere::InProcess,
            None => DropWhere::Unknown,
        };
        self.report.tags_dropped.push(LaneTagDropped {
            environment: None,
            trace_id: hex128(s.trace()),
            span_id: hex64(s.span()),
            t_unix_nano: s.start(),
            group: self.group(s.app(), s.start()),
            app: self.app_name(s.app()),
            lane: self.lane_name(lane),
            kind: kind(s),
            dropped_by: self.app_name(ss[u].app()),
            where_,
        });
    }

    /// §7.3.4: `i` carries a tag other than its upstream's intended lane, below a non-root
    /// upstream, and neither app may stain.
    fn changed<S: LaneFields>(&mut self, ss: &[S], tree: &Tree, i: usize) {
        let s = &ss[i];
        let Some(tag) = s.tag() else {
            return;
        };
        let Up::Entry(u) = tree.up[i] else {
            return;
        };
        let Intent::Lane { lane: from, .. } = tree.intent[u] else {
            return;
        };
        let up = &ss[u];
        if from == tag
            || tree.parent[u] == Parent::Root
            || self.groups.is_entry(up.app(), up.start())
            || self.groups.is_entry(s.app(), s.start())
        {
            return;
        }
        self.report.tags_changed.push(LaneTagChanged {
            environment: None,
            trace_id: hex128(s.trace()),
            span_id: hex64(s.span()),
            t_unix_nano: s.start(),
            group: self.group(s.app(), s.start()),
            kind: kind(s),
            reason: if from == BASE {
                TagChangeReason::Injected
            } else {
                TagChangeReason::Changed
            },
            from_app: self.app_name(up.app()),
            from_lane: self.lane_name(from),
            to_app: self.app_name(s.app()),
            to_lane: self.lane_name(tag),
        });
    }

    fn group(&self, app: u32, t: i64) -> Option<String> {
        self.groups.group(app, t).map(str::to_owned)
    }

    fn app_name(&self, app: u32) -> String {
        self.apps.name(app).to_owned()
    }

    fn lane_name(&self, lane: u32) -> String {
        self.lanes.name(lane).to_owned()
    }
}

/// RPC for a SERVER span, MQ for a CONSUMER span (the judged kinds).
fn kind<S: LaneFields>(s: &S) -> TrafficKind {
    if s.lane_kind() == LaneKind::Consumer {
        TrafficKind::Mq
    } else {
        TrafficKind::Rpc
    }
}
