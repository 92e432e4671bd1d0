//! The marks of hand-built traces, each answer derived from domain §7.2–7.3 (worked out in
//! the comments), and equal to what the judge reports of the same trace.

use super::super::tests::*;
use super::*;
use crate::analyze::detect::lanes::{DropWhere, LeakReason, PollutionReason, TagChangeReason};

/// The marks of one trace in `w`: (index, mark types) of each marked span, by index.
fn marked(w: &World, t: &[T]) -> (TraceLanes, Vec<(usize, Vec<&'static str>)>) {
    let lanes = judge_marks(t, judge_of(w), &w.lanes);
    let mut v: Vec<(usize, Vec<&'static str>)> = (0..t.len())
        .filter(|&i| !lanes.marks(i).is_empty())
        .map(|i| (i, lanes.marks(i).iter().map(LaneMark::as_str).collect()))
        .collect();
    v.sort();
    (lanes, v)
}

#[test]
fn a_dropped_tag_is_marked_on_the_span_that_lost_it_with_its_leak_and_fallbacks_on_theirs() {
    // Gray instances of order and inventory; every app has base instances; gateway is mall's
    // entry app, no strict lane.
    let w = world(&with_base(&[(ORDER, GRAY), (INV, GRAY)]), &[]);
    let t = vec![
        // 0: root, tag gray: I = gray; gateway has no gray instance, served in base: a
        // lane_fallback (§7.3.1, counted).
        sp(1, 0, Sv, GW, BASE, Some(GRAY)),
        sp(2, 1, C, GW, BASE, Some(GRAY)),
        // 2: I = gray, served in gray: nothing.
        sp(3, 2, Sv, ORDER, GRAY, Some(GRAY)),
        // 3: order's CLIENT span without the tag (lost in process).
        sp(4, 3, C, ORDER, GRAY, None),
        // 4: no tag, its upstream (order) carries gray, nothing below carries it again:
        // lane_tag_dropped, in_process (§7.3.2). I = gray inherited, inventory has gray
        // capacity, served in base: lane_leak, tag_dropped, from order (gray) (§7.3.1).
        sp(5, 4, Sv, INV, BASE, None),
        sp(6, 3, C, ORDER, GRAY, Some(GRAY)),
        // 6: tag gray, payment has no gray instance, served in base: lane_fallback.
        sp(7, 6, Sv, PAY, BASE, Some(GRAY)),
        sp(8, 7, C, PAY, BASE, Some(GRAY2)),
        // 8: tag gray2 below payment, whose I is gray; payment's span is no root and neither
        // app is an entry app: lane_tag_changed, changed (§7.3.4). Pricing has no gray2
        // instance, served in base: lane_fallback for gray2.
        sp(9, 8, Sv, PRICING, BASE, Some(GRAY2)),
    ];
    let (lanes, marks) = marked(&w, &t);
    assert_eq!(
        marks,
        [
            (0, vec!["lane_fallback"]),
            (4, vec!["lane_leak", "lane_tag_dropped"]),
            (6, vec!["lane_fallback"]),
            (8, vec!["lane_tag_changed", "lane_fallback"]),
        ]
    );
    let LaneMark::LaneTagDropped(d) = &lanes.marks(4)[1] else {
        panic!("{:?}", lanes.marks(4));
    };
    assert_eq!(
        (d.dropped_by.as_str(), d.where_, d.lane.as_str()),
        ("order", DropWhere::InProcess, "gray")
    );
    let LaneMark::LaneLeak(l) = &lanes.marks(4)[0] else {
        panic!("{:?}", lanes.marks(4));
    };
    assert_eq!(l.reason, LeakReason::TagDropped);
    assert_eq!(
        (l.from_app.as_str(), l.to_app.as_str(), l.to_lane.as_str()),
        ("order", "inventory", "base")
    );
    let LaneMark::LaneTagChanged(c) = &lanes.marks(8)[0] else {
        panic!("{:?}", lanes.marks(8));
    };
    assert_eq!(
        (c.from_lane.as_str(), c.to_lane.as_str(), c.reason),
        ("gray", "gray2", TagChangeReason::Changed)
    );
    assert_eq!(
        lanes.marks(8)[1],
        LaneMark::LaneFallback {
            lane: "gray2".into()
        }
    );
    // Intended lanes: entry spans only; the inherited one is the upstream's tag.
    let intended: Vec<Option<String>> = (0..t.len()).map(|i| lanes.intended(&w.lanes, i)).collect();
    let gray = || Some("gray".to_owned());
    assert_eq!(
        intended,
        [
            gray(),
            None,
            gray(),
            None,
            gray(),
            None,
            gray(),
            None,
            Some("gray2".to_owned())
        ]
    );
    assert_eq!(lanes.marked_spans(), 4);
}

#[test]
fn base_traffic_in_a_lane_and_its_reverse_fallback_are_marked_where_served() {
    // Coupon (group promo, reverse fallback allowed) has no base instance; order and coupon
    // have gray ones.
    let mut present = with_base(&[(ORDER, GRAY), (COUPON, GRAY)]);
    present.retain(|&(app, lane)| !(app == COUPON && lane == BASE));
    let w = world(&present, &[]);
    let t = vec![
        // 0: untagged root: I = base.
        sp(11, 0, Sv, GW, BASE, None),
        sp(12, 11, C, GW, BASE, None),
        // 2: I = base (untagged), served in gray, order has base capacity: lane_pollution,
        // untagged (§7.3.3).
        sp(13, 12, Sv, ORDER, GRAY, None),
        sp(14, 13, C, ORDER, GRAY, None),
        // 4: I = base, served in gray, coupon has no base instance and promo allows it:
        // counted reverse_fallback, not a finding.
        sp(15, 14, Sv, COUPON, GRAY, None),
    ];
    let (lanes, marks) = marked(&w, &t);
    assert_eq!(
        marks,
        [(2, vec!["lane_pollution"]), (4, vec!["reverse_fallback"])]
    );
    let LaneMark::LanePollution(p) = &lanes.marks(2)[0] else {
        panic!("{:?}", lanes.marks(2));
    };
    assert_eq!(
        (p.reason, p.from_app.as_str(), p.lane.as_str()),
        (PollutionReason::Untagged, "gateway", "gray")
    );
    assert_eq!(
        lanes.marks(4),
        [LaneMark::ReverseFallback {
            lane: "gray".into()
        }]
    );
    assert_eq!(lanes.intended(&w.lanes, 4).as_deref(), Some("base"));
}

#[test]
fn a_retry_after_the_lane_failed_is_a_failover_and_a_tag_seen_again_is_not_recorded() {
    let w = world(&with_base(&[(ORDER, GRAY), (INV, GRAY)]), &[]);
    let mut t = vec![
        sp(21, 0, Sv, GW, BASE, Some(GRAY)),
        sp(22, 21, C, GW, BASE, Some(GRAY)),
        sp(23, 22, Sv, ORDER, GRAY, Some(GRAY)),
        sp(24, 23, C, ORDER, GRAY, Some(GRAY)),
        // 4: served in gray, failed.
        sp(25, 24, Sv, INV, GRAY, Some(GRAY)),
        sp(26, 23, C, ORDER, GRAY, Some(GRAY)),
        // 6: the retry, same app and upstream, served in base after the gray try failed:
        // failover (§7.3.1), not a leak though inventory has gray capacity.
        sp(27, 26, Sv, INV, BASE, Some(GRAY)),
        sp(28, 23, C, ORDER, GRAY, Some(GRAY)),
        // 8: no tag, upstream carries gray, but its CLIENT span below carries gray again:
        // tag_not_recorded (§7.3.2); I = gray, payment has no gray instance: lane_fallback.
        sp(29, 28, Sv, PAY, BASE, None),
        sp(30, 29, C, PAY, BASE, Some(GRAY)),
    ];
    t[4].err = true;
    let (lanes, marks) = marked(&w, &t);
    assert_eq!(
        marks,
        [
            (0, vec!["lane_fallback"]),
            (6, vec!["failover"]),
            (8, vec!["lane_fallback", "tag_not_recorded"]),
        ]
    );
    assert_eq!(
        lanes.marks(8)[1],
        LaneMark::TagNotRecorded {
            lane: "gray".into()
        }
    );
    // The same trace judged whole: the counts are the marks, one for one.
    let c = judge(&w, &[t]).counts;
    assert_eq!((c.lane_fallback, c.failover, c.tag_not_recorded), (2, 1, 1));
}

#[test]
fn mark_types_are_their_json_names() {
    let m = LaneMark::LaneFallback {
        lane: "gray".into(),
    };
    let v = serde_json::to_value(&m).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"type": "lane_fallback", "lane": "gray"})
    );
    assert_eq!(m.as_str(), "lane_fallback");
}
