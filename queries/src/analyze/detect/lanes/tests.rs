//! The rules of §7.2–7.4 on small hand-made traces, one story each (the stories of the
//! lanes-small fixture, in miniature).

use std::collections::{HashMap, HashSet};
use std::num::NonZeroU64;

use dyeline_model::TrafficKind;

use super::presence::{Presence, PresenceBuilder};
use super::*;
use crate::analyze::intern::Interner;

pub(super) const MS: i64 = 1_000_000;
pub(super) const S: i64 = 1_000 * MS;
/// Every trace starts here (a whole minute).
pub(super) const T0: i64 = 1_800_000_000 * S;

// Apps.
pub(super) const GW: u32 = 0;
pub(super) const ORDER: u32 = 1;
pub(super) const INV: u32 = 2;
pub(super) const NOTIFY: u32 = 3;
pub(super) const PAY: u32 = 4;
pub(super) const PRICING: u32 = 5;
pub(super) const COUPON: u32 = 6;
pub(super) const SETTLE: u32 = 7;
pub(super) const BFF: u32 = 8;
const APPS: [&str; 9] = [
    "gateway",
    "order",
    "inventory",
    "notify",
    "payment",
    "pricing",
    "coupon",
    "settle",
    "bff",
];
// Lanes.
pub(super) const GRAY: u32 = 1;
pub(super) const GRAY2: u32 = 2;

#[derive(Clone, Debug)]
pub(super) struct T {
    span: u64,
    parent: Option<NonZeroU64>,
    kind: LaneKind,
    links: bool,
    app: u32,
    lane: u32,
    tag: Option<u32>,
    start: i64,
    pub(super) err: bool,
}

impl LaneFields for T {
    fn trace(&self) -> u128 {
        7
    }
    fn span(&self) -> u64 {
        self.span
    }
    fn parent(&self) -> Option<NonZeroU64> {
        self.parent
    }
    fn lane_kind(&self) -> LaneKind {
        self.kind
    }
    fn has_links(&self) -> bool {
        self.links
    }
    fn app(&self) -> u32 {
        self.app
    }
    fn instance(&self) -> u32 {
        self.app * 10 + self.lane
    }
    fn lane(&self) -> u32 {
        self.lane
    }
    fn tag(&self) -> Option<u32> {
        self.tag
    }
    fn start(&self) -> i64 {
        self.start
    }
    fn end(&self) -> i64 {
        self.start + 5 * MS
    }
    fn is_error(&self) -> bool {
        self.err
    }
}

pub(super) use LaneKind::{Client as C, Consumer as Q, Internal as I, Producer as P, Server as Sv};

/// A span `id` under `parent` (0: a root), of `kind`, app and serving lane, with its tag.
pub(super) fn sp(id: u64, parent: u64, kind: LaneKind, app: u32, lane: u32, tag: Option<u32>) -> T {
    T {
        span: id,
        parent: NonZeroU64::new(parent),
        kind,
        links: false,
        app,
        lane,
        tag,
        start: T0 + id as i64 * MS,
        err: false,
    }
}

/// The "mall" group of the stories: gateway is its entry app; `strict` lanes fall back to
/// none; coupon is in "promo", which allows reverse fallback.
pub(super) struct Groups {
    strict: HashSet<u32>,
}

impl LaneGroups for Groups {
    fn group(&self, app: u32, _: i64) -> Option<&str> {
        match app {
            GW | ORDER | INV | NOTIFY | PAY | PRICING | SETTLE => Some("mall"),
            COUPON => Some("promo"),
            _ => None,
        }
    }
    fn is_entry(&self, app: u32, _: i64) -> bool {
        app == GW
    }
    fn is_strict(&self, app: u32, lane: u32, t: i64) -> bool {
        self.group(app, t) == Some("mall") && self.strict.contains(&lane)
    }
    fn reverse_fallback(&self, app: u32, _: i64) -> bool {
        app == COUPON
    }
    fn spike_thresholds(&self, _: u32, _: i64) -> SpikeThresholds {
        SpikeThresholds::default()
    }
}

pub(super) struct World {
    pub(super) apps: Interner,
    pub(super) lanes: Interner,
    pub(super) presence: Presence,
    pub(super) groups: Groups,
    pub(super) tracked: Vec<bool>,
}

/// Instances present all along: `(app, lane)` each.
pub(super) fn world(present: &[(u32, u32)], strict: &[u32]) -> World {
    let mut apps = Interner::default();
    for a in APPS {
        apps.intern(a);
    }
    let mut lanes = Interner::default();
    for l in ["base", "gray", "gray2"] {
        lanes.intern(l);
    }
    let tracked = vec![true; APPS.len()];
    let mut b = PresenceBuilder::new(60 * S, tracked.clone());
    for &(app, lane) in present {
        b.signal(app, lane, app * 10 + lane, T0 - 3600 * S, T0 + 3600 * S);
    }
    World {
        apps,
        lanes,
        presence: b.finish(),
        groups: Groups {
            strict: strict.iter().copied().collect(),
        },
        tracked,
    }
}

/// A judge of `w` with nothing judged yet.
pub(super) fn judge_of(w: &World) -> LaneJudge<'_, Groups> {
    LaneJudge::new(
        &w.presence,
        &w.groups,
        &w.apps,
        &w.lanes,
        &w.tracked,
        60 * S,
    )
}

pub(super) fn judge(w: &World, traces: &[Vec<T>]) -> LaneReport {
    let mut j = judge_of(w);
    for t in traces {
        j.trace(t);
    }
    j.finish()
}

/// Every base instance present, plus the given lane instances.
pub(super) fn with_base(lane_instances: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> = (0..APPS.len() as u32).map(|a| (a, BASE)).collect();
    v.extend_from_slice(lane_instances);
    v
}

fn coverage(r: &LaneReport) -> HashMap<(String, String), [u64; 6]> {
    let mut m = HashMap::new();
    for c in &r.coverage {
        let e = m.entry((c.lane.clone(), c.app.clone())).or_insert([0; 6]);
        for (k, v) in [
            c.served_in_lane,
            c.lane_fallback,
            c.failover,
            c.leaked,
            c.requests,
            c.errors,
        ]
        .into_iter()
        .enumerate()
        {
            e[k] += v;
        }
    }
    m
}

fn key(lane: &str, app: &str) -> (String, String) {
    (lane.to_owned(), app.to_owned())
}

#[test]
fn a_clean_gray_path_is_served_in_lane_and_falls_back_where_there_is_no_capacity() {
    let w = world(
        &with_base(&[(ORDER, GRAY), (INV, GRAY), (NOTIFY, GRAY)]),
        &[],
    );
    let t = vec![
        sp(1, 0, Sv, GW, BASE, Some(GRAY)),
        sp(2, 1, C, GW, BASE, Some(GRAY)),
        sp(3, 2, Sv, ORDER, GRAY, Some(GRAY)),
        sp(4, 3, C, ORDER, GRAY, Some(GRAY)),
        sp(5, 4, Sv, INV, GRAY, Some(GRAY)),
        sp(6, 5, P, INV, GRAY, Some(GRAY)),
        sp(7, 6, Q, NOTIFY, GRAY, Some(GRAY)),
        sp(8, 3, C, ORDER, GRAY, Some(GRAY)),
        sp(9, 8, Sv, PAY, BASE, Some(GRAY)),
    ];
    let r = judge(&w, &[t]);
    assert!(r.leaks.is_empty() && r.tags_dropped.is_empty(), "{r:#?}");
    assert!(
        r.pollution.is_empty() && r.tags_changed.is_empty(),
        "{r:#?}"
    );
    // gateway (no gray instance) and payment fall back.
    assert_eq!(r.counts.lane_fallback, 2);
    let cov = coverage(&r);
    assert_eq!(cov[&key("gray", "order")], [1, 0, 0, 0, 1, 0]);
    assert_eq!(cov[&key("gray", "notify")], [1, 0, 0, 0, 0, 0]);
    assert_eq!(cov[&key("gray", "gateway")], [0, 1, 0, 0, 0, 0]);
    assert_eq!(cov[&key("gray", "payment")], [0, 1, 0, 0, 0, 0]);
}

#[test]
fn a_leak_after_a_fallback_hop_names_the_last_span_in_lane_and_the_apps_between() {
    let w = world(&with_base(&[(ORDER, GRAY), (INV, GRAY)]), &[]);
    let t = vec![
        sp(1, 0, Sv, GW, BASE, Some(GRAY)),
        sp(2, 1, Sv, ORDER, GRAY, Some(GRAY)),
        sp(3, 2, C, ORDER, GRAY, Some(GRAY)),
        sp(4, 3, Sv, PAY, BASE, Some(GRAY)),
        sp(5, 4, C, PAY, BASE, Some(GRAY)),
        sp(6, 5, Sv, INV, BASE, Some(GRAY)),
    ];
    let r = judge(&w, &[t]);
    assert_eq!(r.leaks.len(), 1, "{r:#?}");
    let l = &r.leaks[0];
    assert_eq!(l.span_id, "0000000000000006");
    assert_eq!(l.reason, LeakReason::TagIgnored);
    assert_eq!(
        (l.from_app.as_str(), l.from_lane.as_deref()),
        ("order", Some("gray"))
    );
    assert_eq!(
        (l.to_app.as_str(), l.to_lane.as_str()),
        ("inventory", "base")
    );
    assert_eq!(l.via, ["payment"]);
    assert_eq!(l.group.as_deref(), Some("mall"));
    assert_eq!(l.t_unix_nano, T0 + 6 * MS);
}

#[test]
fn a_leak_with_no_ancestor_in_lane_is_from_none_via_every_entry_span() {
    let w = world(&with_base(&[(INV, GRAY)]), &[]);
    let t = vec![
        sp(1, 0, Sv, GW, BASE, Some(GRAY)),
        sp(2, 1, Sv, ORDER, BASE, Some(GRAY)),
        sp(3, 2, Sv, ORDER, BASE, Some(GRAY)),
        sp(4, 3, Sv, INV, BASE, Some(GRAY)),
    ];
    let r = judge(&w, &[t]);
    assert_eq!(r.leaks.len(), 1, "{r:#?}");
    assert_eq!(r.leaks[0].from_app, "(none)");
    assert_eq!(r.leaks[0].from_lane, None);
    // Each app once, in call order.
    assert_eq!(r.leaks[0].via, ["gateway", "order"]);
}

#[test]
fn dropped_tags_say_where_and_a_tag_seen_again_below_is_only_not_recorded() {
    let w = world(&with_base(&[(ORDER, GRAY), (INV, GRAY)]), &[]);
    // In process: the caller span carries no tag; inventory has gray capacity: also a leak.
    let in_process = vec![
        sp(1, 0, Sv, GW, BASE, Some(GRAY)),
        sp(2, 1, Sv, ORDER, GRAY, Some(GRAY)),
        sp(3, 2, C, ORDER, GRAY, None),
        sp(4, 3, Sv, INV, BASE, None),
    ];
    // On the wire: the caller span carries another lane; served in gray anyway.
    let on_wire = vec![
        sp(11, 0, Sv, GW, BASE, Some(GRAY)),
        sp(12, 11, Sv, ORDER, GRAY, Some(GRAY)),
        sp(13, 12, C, ORDER, GRAY, Some(GRAY2)),
        sp(14, 13, Sv, INV, GRAY, None),
    ];
    // No caller span: an INTERNAL span between.
    let unknown = vec![
        sp(21, 0, Sv, GW, BASE, Some(GRAY)),
        sp(22, 21, Sv, ORDER, GRAY, Some(GRAY)),
        sp(23, 22, I, ORDER, GRAY, None),
        sp(24, 23, Sv, INV, GRAY, None),
    ];
    // Not recorded: a CLIENT span below carries gray again.
    let not_recorded = vec![
        sp(31, 0, Sv, GW, BASE, Some(GRAY)),
        sp(32, 31, Sv, ORDER, GRAY, Some(GRAY)),
        sp(33, 32, C, ORDER, GRAY, Some(GRAY)),
        sp(34, 33, Sv, INV, GRAY, None),
        sp(35, 34, C, INV, GRAY, Some(GRAY)),
    ];
    let r = judge(&w, &[in_process, on_wire, unknown, not_recorded]);
    let got: Vec<(&str, DropWhere, &str)> = r
        .tags_dropped
        .iter()
        .map(|d| (d.span_id.as_str(), d.where_, d.dropped_by.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("0000000000000004", DropWhere::InProcess, "order"),
            ("000000000000000e", DropWhere::OnWire, "order"),
            ("0000000000000018", DropWhere::Unknown, "order"),
        ]
    );
    assert_eq!(r.counts.tag_not_recorded, 1);
    assert_eq!(r.leaks.len(), 1, "{r:#?}");
    assert_eq!(r.leaks[0].reason, LeakReason::TagDropped);
    assert_eq!(r.leaks[0].span_id, "0000000000000004");
}

#[test]
fn a_retry_off_a_failing_lane_is_a_failover_not_a_leak() {
    let w = world(&with_base(&[(ORDER, GRAY), (INV, GRAY)]), &[]);
    let mut failed = sp(4, 3, Sv, INV, GRAY, Some(GRAY));
    failed.err = true;
    let t = vec![
        sp(1, 0, Sv, GW, BASE, Some(GRAY)),
        sp(2, 1, Sv, ORDER, GRAY, Some(GRAY)),
        sp(3, 2, C, ORDER, GRAY, Some(GRAY)),
        failed,
        sp(5, 2, C, ORDER, GRAY, Some(GRAY)),
        sp(6, 5, Sv, INV, BASE, Some(GRAY)),
    ];
    let r = judge(&w, &[t]);
    assert!(r.leaks.is_empty(), "{r:#?}");
    assert_eq!(r.counts.failover, 1);
    assert_eq!(coverage(&r)[&key("gray", "inventory")], [1, 0, 1, 0, 1, 1]);
}

#[test]
fn without_capacity_a_strict_lane_or_another_lane_is_a_leak_else_a_fallback() {
    let w = world(&with_base(&[(ORDER, GRAY2), (PRICING, GRAY2)]), &[GRAY2]);
    // pricing serves gray traffic on its gray2 instance: wrong fallback.
    let wrong = vec![
        sp(1, 0, Sv, GW, BASE, Some(GRAY)),
        sp(2, 1, Sv, PRICING, GRAY2, Some(GRAY)),
    ];
    // gray2 is strict: payment (no root, no entry app) serving it in base leaks; the gateway
    // (an entry app) and a root payment span fall back.
    let strict = vec![
        sp(11, 0, Sv, BFF, BASE, Some(GRAY2)),
        sp(12, 11, Sv, GW, BASE, Some(GRAY2)),
        sp(13, 12, Sv, ORDER, GRAY2, Some(GRAY2)),
        sp(14, 13, Sv, PAY, BASE, Some(GRAY2)),
    ];
    let root = vec![sp(21, 0, Sv, PAY, BASE, Some(GRAY2))];
    let r = judge(&w, &[wrong, strict, root]);
    let got: Vec<(&str, LeakReason)> = r
        .leaks
        .iter()
        .map(|l| (l.span_id.as_str(), l.reason))
        .collect();
    assert_eq!(
        got,
        [
            ("0000000000000002", LeakReason::WrongFallback),
            ("000000000000000e", LeakReason::StrictLane),
        ]
    );
    let strict_leak = &r.leaks[1];
    assert_eq!(
        (strict_leak.from_app.as_str(), strict_leak.via.len()),
        ("order", 0)
    );
    // gateway (gray), bff, gateway (gray2), payment root.
    assert_eq!(r.counts.lane_fallback, 4);
}

#[test]
fn base_traffic_in_a_lane_is_pollution_unless_reverse_fallback_allows_it() {
    let w = world(
        &[
            (GW, BASE),
            (ORDER, BASE),
            (ORDER, GRAY),
            (INV, BASE),
            (NOTIFY, BASE),
            (NOTIFY, GRAY),
            (COUPON, GRAY),
            (SETTLE, GRAY),
        ],
        &[],
    );
    let untagged = vec![
        sp(1, 0, Sv, GW, BASE, None),
        sp(2, 1, Sv, ORDER, GRAY, None),
        sp(3, 2, Sv, INV, BASE, None),
        sp(4, 3, P, INV, BASE, None),
        sp(5, 4, Q, NOTIFY, GRAY, None),
    ];
    // A base tag inherited from the gateway.
    let explicit = vec![
        sp(11, 0, Sv, GW, BASE, Some(BASE)),
        sp(12, 11, Sv, ORDER, GRAY, None),
    ];
    // coupon has no base instance: reverse fallback in promo, pollution elsewhere.
    let reverse = vec![
        sp(21, 0, Sv, GW, BASE, None),
        sp(22, 21, Sv, COUPON, GRAY, None),
    ];
    // A JOB root on a gray instance with a base tag is never pollution itself.
    let job = vec![
        sp(31, 0, I, SETTLE, GRAY, Some(BASE)),
        sp(32, 31, Sv, INV, BASE, Some(BASE)),
    ];
    let r = judge(&w, &[untagged, explicit, reverse, job]);
    let got: Vec<(&str, PollutionReason, &str, TrafficKind)> = r
        .pollution
        .iter()
        .map(|p| (p.span_id.as_str(), p.reason, p.from_app.as_str(), p.kind))
        .collect();
    assert_eq!(
        got,
        [
            (
                "0000000000000002",
                PollutionReason::Untagged,
                "gateway",
                TrafficKind::Rpc
            ),
            (
                "0000000000000005",
                PollutionReason::Untagged,
                "inventory",
                TrafficKind::Mq
            ),
            (
                "000000000000000c",
                PollutionReason::ExplicitBase,
                "gateway",
                TrafficKind::Rpc
            ),
        ]
    );
    assert_eq!(r.counts.reverse_fallback, 1);
}

#[test]
fn tags_set_mid_trace_are_findings_except_where_staining_is_allowed() {
    let w = world(
        &with_base(&[(ORDER, GRAY), (INV, GRAY), (PRICING, GRAY2)]),
        &[],
    );
    // Injected below a non-root upstream, neither app an entry app.
    let injected = vec![
        sp(1, 0, Sv, GW, BASE, None),
        sp(2, 1, Sv, ORDER, BASE, None),
        sp(3, 2, C, ORDER, BASE, Some(GRAY)),
        sp(4, 3, Sv, INV, GRAY, Some(GRAY)),
    ];
    // Changed from gray to gray2.
    let changed = vec![
        sp(11, 0, Sv, GW, BASE, Some(GRAY)),
        sp(12, 11, Sv, ORDER, GRAY, Some(GRAY)),
        sp(13, 12, Sv, PRICING, GRAY2, Some(GRAY2)),
    ];
    // Allowed: below a root; with the entry app (gateway) as the upstream.
    let below_root = vec![
        sp(21, 0, Sv, BFF, BASE, None),
        sp(22, 21, Sv, ORDER, GRAY, Some(GRAY)),
    ];
    let entry_upstream = vec![
        sp(31, 0, Sv, BFF, BASE, None),
        sp(32, 31, Sv, GW, BASE, None),
        sp(33, 32, Sv, ORDER, GRAY, Some(GRAY)),
    ];
    let r = judge(&w, &[injected, changed, below_root, entry_upstream]);
    let got: Vec<(&str, TagChangeReason, &str, &str, &str)> = r
        .tags_changed
        .iter()
        .map(|c| {
            (
                c.span_id.as_str(),
                c.reason,
                c.from_lane.as_str(),
                c.to_app.as_str(),
                c.to_lane.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "0000000000000004",
                TagChangeReason::Injected,
                "base",
                "inventory",
                "gray"
            ),
            (
                "000000000000000d",
                TagChangeReason::Changed,
                "gray",
                "pricing",
                "gray2"
            ),
        ]
    );
}

#[test]
fn a_gray_job_root_gives_its_lane_to_the_calls_below_it() {
    let w = world(&with_base(&[(INV, GRAY), (SETTLE, GRAY)]), &[]);
    let t = vec![
        sp(1, 0, I, SETTLE, GRAY, None),
        sp(2, 1, C, SETTLE, GRAY, None),
        sp(3, 2, Sv, INV, BASE, None),
    ];
    let r = judge(&w, &[t]);
    assert_eq!(r.leaks.len(), 1, "{r:#?}");
    assert_eq!(r.leaks[0].reason, LeakReason::TagDropped);
    assert_eq!(
        (
            r.leaks[0].from_app.as_str(),
            r.leaks[0].from_lane.as_deref()
        ),
        ("settle", Some("gray"))
    );
    // No tag upstream: nothing was dropped.
    assert!(r.tags_dropped.is_empty());
}

#[test]
fn orphans_and_batch_consumers_are_undetermined_and_never_judged() {
    let w = world(&with_base(&[(INV, GRAY), (NOTIFY, GRAY)]), &[]);
    // Parent 99 never arrived.
    let orphan = vec![sp(1, 99, Sv, INV, GRAY, None)];
    // A parentless consumer naming its producers by links, and the span it calls.
    let mut batch = sp(11, 0, Q, NOTIFY, GRAY, None);
    batch.links = true;
    let batch = vec![
        batch,
        sp(12, 11, C, NOTIFY, GRAY, None),
        sp(13, 12, Sv, PAY, BASE, None),
    ];
    // A tag decides even below a missing span.
    let tagged_orphan = vec![sp(21, 98, Sv, INV, GRAY, Some(GRAY))];
    let r = judge(&w, &[orphan, batch, tagged_orphan]);
    assert_eq!(r.counts.undetermined, 3);
    assert!(r.pollution.is_empty() && r.leaks.is_empty(), "{r:#?}");
    // Requests on gray instances count whatever their I.
    assert_eq!(coverage(&r)[&key("gray", "inventory")], [1, 0, 0, 0, 2, 0]);
}

#[test]
fn a_zipkin_server_half_hangs_under_the_client_half_that_shares_its_id() {
    let w = world(&with_base(&[(ORDER, GRAY), (INV, GRAY)]), &[]);
    // CLIENT 3 and SERVER 3 share an id (and the CLIENT's parent); what inventory calls
    // names 3 as its parent and hangs under the SERVER half.
    let t = vec![
        sp(1, 0, Sv, GW, BASE, Some(GRAY)),
        sp(2, 1, Sv, ORDER, GRAY, Some(GRAY)),
        sp(3, 2, C, ORDER, GRAY, Some(GRAY)),
        sp(3, 2, Sv, INV, GRAY, None),
        sp(5, 3, C, INV, GRAY, None),
        sp(6, 5, Sv, PAY, BASE, None),
    ];
    let r = judge(&w, &[t]);
    // Inventory's SERVER half lost the tag on the wire (its caller, the CLIENT half, carries
    // it) and nothing below carries gray again. Payment's upstream is that SERVER half, which
    // carries no tag: nothing more was dropped.
    let got: Vec<(&str, DropWhere)> = r
        .tags_dropped
        .iter()
        .map(|d| (d.app.as_str(), d.where_))
        .collect();
    assert_eq!(got, [("inventory", DropWhere::OnWire)]);
    // payment inherits gray through the SERVER half and falls back (no gray payment).
    assert_eq!(r.counts.lane_fallback, 2);
}

#[test]
fn a_circle_of_parents_ends_and_is_undetermined() {
    let w = world(&with_base(&[(INV, GRAY)]), &[]);
    let t = vec![
        sp(1, 2, Sv, INV, GRAY, None),
        sp(2, 1, Sv, ORDER, BASE, None),
    ];
    let r = judge(&w, &[t]);
    assert_eq!(r.counts.undetermined, 2);
}

#[test]
fn a_lane_failing_more_than_base_is_a_lane_error_spike() {
    let w = world(&with_base(&[(ORDER, GRAY)]), &[]);
    let mut traces = Vec::new();
    for k in 0..400u64 {
        let lane = if k % 2 == 0 { GRAY } else { BASE };
        let mut s = sp(1, 0, Sv, ORDER, lane, (lane == GRAY).then_some(GRAY));
        s.span = 1 + k;
        s.start = T0 + k as i64 * 10 * MS;
        // 10 % of gray requests fail, 0.5 % of base.
        s.err = if lane == GRAY {
            k % 20 == 0
        } else {
            k % 400 == 1
        };
        traces.push(vec![s]);
    }
    let r = judge(&w, &traces);
    assert_eq!(r.error_spikes.len(), 1, "{:#?}", r.error_spikes);
    let s = &r.error_spikes[0];
    assert_eq!((s.lane.as_str(), s.other_lane.as_str()), ("gray", "base"));
    assert_eq!(
        (s.requests, s.errors, s.other_requests, s.other_errors),
        (200, 20, 200, 1)
    );
    assert_eq!(s.window_start_unix_nano, T0);
    assert_eq!(s.exemplar_trace_ids.len(), 1);
}

/// Traces judged by two judges, one absorbing the other, give what one judge gives them all:
/// findings, counts, coverage cells (requests, outcomes, p99) and spikes, wherever the traces
/// are cut (the analyzer judges each half of a load on its own thread).
#[test]
fn two_judges_absorbed_equal_one_judge() {
    let w = world(&with_base(&[(ORDER, GRAY), (PAY, GRAY2)]), &[]);
    let lanes = [BASE, GRAY, GRAY2];
    let tags = [None, Some(GRAY), Some(GRAY2), Some(BASE)];
    let traces: Vec<Vec<T>> = (0..300u64)
        .map(|k| {
            let at = |mut s: T, n: u64| {
                s.start = T0 + (k * 400 + n) as i64 * MS;
                s.err = (k * 7 + n).is_multiple_of(13);
                s
            };
            let (tag, below) = (tags[(k % 4) as usize], tags[(k % 5 % 4) as usize]);
            let (order, pay) = (lanes[(k % 3) as usize], lanes[(k / 3 % 3) as usize]);
            vec![
                at(sp(1, 0, Sv, GW, BASE, tag), 0),
                at(sp(2, 1, C, GW, BASE, tag), 1),
                at(sp(3, 2, Sv, ORDER, order, tag), 2),
                at(sp(4, 3, C, ORDER, order, below), 3),
                at(sp(5, 4, Sv, PAY, pay, below), 4),
            ]
        })
        .collect();
    let mut one = judge(&w, &traces);
    one.sort();
    assert!(!one.leaks.is_empty() && !one.pollution.is_empty() && !one.coverage.is_empty());
    for cut in [0, 1, 150, 299, 300] {
        let (a, b) = traces.split_at(cut);
        let mut first = judge_of(&w);
        a.iter().for_each(|t| first.trace(t));
        let mut second = judge_of(&w);
        b.iter().for_each(|t| second.trace(t));
        first.absorb(second);
        let mut two = first.finish();
        two.sort();
        assert_eq!(two, one, "cut at {cut}");
    }
}

/// An app's group put (or deleted) during a window judges that window: the demo puts its
/// group while the fleet already serves, and the window in which it did was judged as if the
/// app had no group.
#[test]
fn a_group_put_or_deleted_during_a_window_judges_that_window() {
    struct ChangesAt {
        at: i64,
        put: bool,
    }
    impl LaneGroups for ChangesAt {
        fn group(&self, _: u32, t: i64) -> Option<&str> {
            ((t >= self.at) == self.put).then_some("mall")
        }
        fn is_entry(&self, _: u32, _: i64) -> bool {
            false
        }
        fn is_strict(&self, _: u32, _: u32, _: i64) -> bool {
            false
        }
        fn reverse_fallback(&self, _: u32, _: i64) -> bool {
            false
        }
        fn spike_thresholds(&self, _: u32, t: i64) -> SpikeThresholds {
            // Outside the group nothing is ever a spike: the group's thresholds must be read.
            let mut th = SpikeThresholds::default();
            if self.group(0, t).is_none() {
                th.spike_min_requests = u64::MAX;
            }
            th
        }
    }
    let w = world(&[], &[]);
    let window = 60 * S;
    // Window [T0, T0+60s) spikes in gray; window [T0+60s, T0+120s) too.
    let cells = || {
        let mut cells = super::windows::Cells::default();
        for w0 in [T0, T0 + window] {
            for k in 0..400u64 {
                let lane = if k % 2 == 0 { GRAY } else { BASE };
                let mut s = sp(1 + k, 0, Sv, ORDER, lane, None);
                s.err = if lane == GRAY {
                    k % 20 == 0
                } else {
                    k % 400 == 1
                };
                cells.request(w0, lane, ORDER, &s, 0);
            }
        }
        cells
    };
    let groups_of = |g: &ChangesAt| {
        let (_, spikes, shares) = cells().finish(window, g, &w.apps, &w.lanes);
        let spikes: Vec<(i64, Option<String>)> = spikes
            .into_iter()
            .map(|s| (s.window_start_unix_nano, s.group))
            .collect();
        let shares: Vec<(i64, Option<String>)> = shares
            .into_iter()
            .map(|c| (c.window_start_unix_nano, c.group))
            .collect();
        (spikes, shares)
    };
    let mall = Some("mall".to_owned());
    // Put 30 s into the first window: both windows are the group's.
    let (spikes, shares) = groups_of(&ChangesAt {
        at: T0 + 30 * S,
        put: true,
    });
    assert_eq!(
        spikes,
        vec![(T0, mall.clone()), (T0 + window, mall.clone())]
    );
    assert!(shares.iter().all(|(_, g)| *g == mall), "{shares:?}");
    // Put at the second window's last instant: the first window has no group and no spike.
    let (spikes, _) = groups_of(&ChangesAt {
        at: T0 + 2 * window - 1,
        put: true,
    });
    assert_eq!(spikes, vec![(T0 + window, mall.clone())]);
    // Deleted 30 s into the first window: that window keeps the group it had; the next has none.
    let (spikes, shares) = groups_of(&ChangesAt {
        at: T0 + 30 * S,
        put: false,
    });
    assert_eq!(spikes, vec![(T0, mall.clone())]);
    assert!(shares.contains(&(T0 + window, None)), "{shares:?}");
}
