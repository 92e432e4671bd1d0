//! The lane groups over time (domain §7.1: "the analyzer uses the group as it was at the span's
//! start"): the groups after each operation, and per app the intervals of its group, so "the
//! lane group of app A at time t" is one hash lookup and one binary search
//! ([`LaneGroupTimeline::group_at`]), cheap enough to ask for every span.

use std::collections::HashMap;
use std::sync::Arc;

use super::error::ReleaseError;
use super::lane_groups::{LaneGroup, LaneGroupOp, LaneGroups};

/// From `t_unix_nano` on (until the next change), the app is in `group` (`None`: in none).
#[derive(Clone, Debug, PartialEq)]
pub struct LaneGroupChange {
    /// When it took effect: spans starting at or after it see it.
    pub t_unix_nano: i64,
    /// The app's group from then on.
    pub group: Option<Arc<LaneGroup>>,
}

/// Lane group operations in time order, ready for point queries.
#[derive(Clone, Debug, Default)]
pub struct LaneGroupTimeline {
    initial: LaneGroups,
    points: Vec<(i64, LaneGroupOp, LaneGroups)>,
    /// app → its changes in time order; an app absent here is in no group at any time.
    by_app: HashMap<String, Vec<LaneGroupChange>>,
}

impl LaneGroupTimeline {
    /// The groups `initial` (in force before every operation), then `ops` (time, op), already
    /// in time order (ties in the order they were applied), replayed leniently
    /// ([`LaneGroups::apply`]): recorded history, validated when it was written.
    pub fn from_ops(initial: LaneGroups, ops: Vec<(i64, LaneGroupOp)>) -> Self {
        let mut tl = LaneGroupTimeline {
            by_app: HashMap::new(),
            points: Vec::with_capacity(ops.len()),
            initial,
        };
        for (g, _) in tl.initial.iter() {
            for app in g.apps() {
                tl.by_app.insert(
                    app.clone(),
                    vec![LaneGroupChange {
                        t_unix_nano: i64::MIN,
                        group: Some(Arc::clone(g)),
                    }],
                );
            }
        }
        let mut state = tl.initial.clone();
        for (t, op) in ops {
            let mut touched: Vec<String> = state
                .get(op.id().as_str())
                .map(|g| g.apps().to_vec())
                .unwrap_or_default();
            if let LaneGroupOp::Put(g) = &op {
                touched.extend(g.apps().iter().cloned());
            }
            state.apply(&op);
            for app in touched {
                let group = state.group_of(&app).cloned();
                tl.record(app, t, group);
            }
            tl.points.push((t, op, state.clone()));
        }
        tl
    }

    /// As [`LaneGroupTimeline::from_ops`], each operation first checked against the groups it
    /// lands on ([`LaneGroups::check`]): for documents, where an app in two groups at once or
    /// a delete of a group that does not exist is a mistake to report.
    ///
    /// # Errors
    /// [`ReleaseError::InvalidTimeline`] naming the first refused operation and why.
    pub fn checked(
        initial: LaneGroups,
        ops: Vec<(i64, LaneGroupOp)>,
    ) -> Result<Self, ReleaseError> {
        let mut state = initial.clone();
        for (t, op) in &ops {
            state.check(op).map_err(|e| {
                ReleaseError::InvalidTimeline(format!(
                    "{} of lane group {:?} at {t}: {e}",
                    op.name(),
                    op.id().as_str()
                ))
            })?;
            state.apply(op);
        }
        Ok(Self::from_ops(initial, ops))
    }

    fn record(&mut self, app: String, t: i64, group: Option<Arc<LaneGroup>>) {
        let changes = self.by_app.entry(app).or_default();
        match changes.last_mut() {
            Some(last) if last.t_unix_nano == t => last.group = group,
            Some(last) if last.group == group => {}
            None if group.is_none() => {}
            _ => changes.push(LaneGroupChange {
                t_unix_nano: t,
                group,
            }),
        }
    }

    /// The lane group of `app` at `t_unix_nano`: the group as it was after every operation at
    /// or before that time; `None` for an app in no group then.
    pub fn group_at(&self, app: &str, t_unix_nano: i64) -> Option<&LaneGroup> {
        let changes = self.by_app.get(app)?;
        let n = changes.partition_point(|c| c.t_unix_nano <= t_unix_nano);
        changes.get(n.checked_sub(1)?)?.group.as_deref()
    }

    /// Every change of `app`'s group in time order (empty for an app never in a group; one
    /// at `i64::MIN` for an app in a group before every operation). For a reader that judges
    /// many spans of one app.
    pub fn changes(&self, app: &str) -> &[LaneGroupChange] {
        self.by_app.get(app).map_or(&[], Vec::as_slice)
    }

    /// Every group at `t_unix_nano`: after every operation at or before it.
    pub fn groups_at(&self, t_unix_nano: i64) -> &LaneGroups {
        let n = self.points.partition_point(|(t, ..)| *t <= t_unix_nano);
        match n.checked_sub(1) {
            None => &self.initial,
            Some(i) => &self.points[i].2,
        }
    }

    /// The operations in time order: (time, op).
    pub fn ops(&self) -> impl Iterator<Item = (i64, &LaneGroupOp)> {
        self.points.iter().map(|(t, op, _)| (*t, op))
    }

    /// True when there are no operations and no initial groups.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty() && self.initial.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::{LaneGroupId, Timeline, TimelineDoc};

    const LANES_SMALL: &str =
        include_str!("../../../../shared/fixtures/analysis/lanes-small/timeline.json");

    fn put(t: i64, json: &str) -> (i64, LaneGroupOp) {
        (t, LaneGroupOp::Put(serde_json::from_str(json).unwrap()))
    }

    fn delete(t: i64, id: &str) -> (i64, LaneGroupOp) {
        (t, LaneGroupOp::Delete(LaneGroupId::new(id).unwrap()))
    }

    fn checked(ops: Vec<(i64, LaneGroupOp)>) -> Result<LaneGroupTimeline, ReleaseError> {
        LaneGroupTimeline::checked(LaneGroups::new(), ops)
    }

    /// Group a holds order from 10 and is deleted at `deleted`; group b holds it from `b`.
    fn a_then_b(deleted: i64, b: i64) -> LaneGroupTimeline {
        checked(vec![
            put(10, r#"{"id": "a", "apps": ["order"]}"#),
            delete(deleted, "a"),
            put(b, r#"{"id": "b", "apps": ["order"]}"#),
        ])
        .unwrap()
    }

    fn id_at(tl: &LaneGroupTimeline, app: &str, t: i64) -> Option<String> {
        tl.group_at(app, t).map(|g| g.id().to_string())
    }

    #[test]
    fn the_group_at_a_time_follows_puts_replacements_and_deletes() {
        let tl = checked(vec![
            put(
                10,
                r#"{"id": "mall", "apps": ["order", "cart"], "lanes": {"gray": {}}}"#,
            ),
            put(10, r#"{"id": "promo", "apps": ["coupon"]}"#),
            // replaced: cart leaves mall, gray becomes strict
            put(
                20,
                r#"{"id": "mall", "apps": ["order"], "lanes": {"gray": {"fallback": "none"}}}"#,
            ),
            // cart may now join promo
            put(
                30,
                r#"{"id": "promo", "apps": ["coupon", "cart"], "reverse_fallback": true}"#,
            ),
            delete(40, "promo"),
        ])
        .unwrap();
        let gray = crate::LaneId::new("gray").unwrap();
        // before the first op, nothing; at its time, the group (ops apply from their time on)
        assert_eq!(id_at(&tl, "order", 9), None);
        assert_eq!(id_at(&tl, "order", 10).as_deref(), Some("mall"));
        assert_eq!(id_at(&tl, "coupon", 10).as_deref(), Some("promo"));
        // the group as it was: base fallback before 20, strict from 20
        use super::super::lane_groups::Fallback;
        assert_eq!(
            tl.group_at("order", 19).unwrap().fallback(&gray),
            Fallback::Base
        );
        assert_eq!(
            tl.group_at("order", 20).unwrap().fallback(&gray),
            Fallback::None
        );
        assert_eq!(id_at(&tl, "cart", 19).as_deref(), Some("mall"));
        assert_eq!(id_at(&tl, "cart", 25), None);
        assert_eq!(id_at(&tl, "cart", 30).as_deref(), Some("promo"));
        assert!(tl.group_at("cart", 35).unwrap().reverse_fallback());
        assert!(!tl.group_at("coupon", 29).unwrap().reverse_fallback());
        // deleted: its apps are in no group from then on; mall is untouched
        assert_eq!(id_at(&tl, "coupon", 40), None);
        assert_eq!(id_at(&tl, "cart", i64::MAX), None);
        assert_eq!(id_at(&tl, "order", i64::MAX).as_deref(), Some("mall"));
        // an app never in a group
        assert_eq!(id_at(&tl, "search", 30), None);
        assert!(tl.changes("search").is_empty());
        let cart: Vec<(i64, Option<String>)> = tl
            .changes("cart")
            .iter()
            .map(|c| (c.t_unix_nano, c.group.as_ref().map(|g| g.id().to_string())))
            .collect();
        assert_eq!(
            cart,
            [
                (10, Some("mall".into())),
                (20, None),
                (30, Some("promo".into())),
                (40, None)
            ]
        );
        // the whole state at a time
        assert_eq!(tl.groups_at(9).len(), 0);
        assert_eq!(tl.groups_at(10).len(), 2);
        assert_eq!(tl.groups_at(20).version("mall"), 2);
        assert_eq!(tl.groups_at(40).len(), 1);
        assert_eq!(tl.ops().count(), 5);
    }

    #[test]
    fn ops_at_one_time_apply_in_list_order() {
        let tl = a_then_b(10, 10);
        assert_eq!(id_at(&tl, "order", 10).as_deref(), Some("b"));
        assert_eq!(id_at(&tl, "order", 9), None);
    }

    #[test]
    fn an_app_in_two_groups_at_once_is_refused_but_may_move_over_time() {
        let two = checked(vec![
            put(10, r#"{"id": "a", "apps": ["order"]}"#),
            put(20, r#"{"id": "b", "apps": ["order"]}"#),
        ])
        .unwrap_err();
        assert_eq!(two.code(), "invalid_timeline");
        assert!(
            two.to_string()
                .contains("app \"order\" is already in lane group \"a\""),
            "{two}"
        );
        let gone = checked(vec![delete(5, "a")]);
        assert_eq!(gone.unwrap_err().code(), "invalid_timeline");
        // a then b, once a let it go
        let moved = a_then_b(15, 20);
        assert_eq!(id_at(&moved, "order", 12).as_deref(), Some("a"));
        assert_eq!(id_at(&moved, "order", 17), None);
        assert_eq!(id_at(&moved, "order", 20).as_deref(), Some("b"));
        // replayed leniently (recorded history), the later put wins and the app leaves a
        let lenient = LaneGroupTimeline::from_ops(
            LaneGroups::new(),
            vec![
                put(10, r#"{"id": "a", "apps": ["order", "cart"]}"#),
                put(20, r#"{"id": "b", "apps": ["order"]}"#),
            ],
        );
        assert_eq!(id_at(&lenient, "order", 20).as_deref(), Some("b"));
        assert_eq!(lenient.groups_at(20).get("a").unwrap().apps(), ["cart"]);
    }

    #[test]
    fn lanes_small_gives_each_app_its_group_over_time() {
        let doc: TimelineDoc = serde_json::from_str(LANES_SMALL).unwrap();
        let tl = Timeline::from_doc(&doc).unwrap();
        let t0 = doc.t0_unix_nano.unwrap().0;
        let s = |secs: i64| t0 + secs * 1_000_000_000;
        let gray2 = crate::LaneId::new("gray2").unwrap();
        use super::super::lane_groups::Fallback;
        assert_eq!(
            tl.lane_group_at("order", s(0)).unwrap().id().as_str(),
            "mall"
        );
        assert_eq!(
            tl.lane_group_at("order", s(2084)).unwrap().fallback(&gray2),
            Fallback::Base
        );
        assert_eq!(
            tl.lane_group_at("order", s(2085)).unwrap().fallback(&gray2),
            Fallback::None
        );
        assert!(
            tl.lane_group_at("coupon", s(3284))
                .unwrap()
                .reverse_fallback()
        );
        assert!(tl.lane_group_at("coupon", s(3285)).is_none());
        assert!(tl.lane_group_at("order", s(0) - 1).is_none());
        // the channels are idle throughout: lane groups do not touch them
        assert!(tl.is_empty());
        assert_eq!(tl.effective_at("order", s(100)).channel, None);
    }

    #[test]
    fn initial_groups_hold_from_the_beginning() {
        let doc: TimelineDoc = serde_json::from_str(
            r#"{"channels": [], "lane_groups": [{"id": "mall", "apps": ["order"]}],
                "events": [{"t_unix_nano": "50", "op": "lane_group_delete", "lane_group": "mall"}]}"#,
        )
        .unwrap();
        let tl = Timeline::from_doc(&doc).unwrap();
        assert_eq!(
            tl.lane_group_at("order", i64::MIN).unwrap().id().as_str(),
            "mall"
        );
        assert!(tl.lane_group_at("order", 50).is_none());
        let clash: TimelineDoc = serde_json::from_str(
            r#"{"channels": [], "lane_groups": [{"id": "a", "apps": ["order"]},
                {"id": "b", "apps": ["order"]}], "events": []}"#,
        )
        .unwrap();
        assert_eq!(
            Timeline::from_doc(&clash).unwrap_err().code(),
            "invalid_timeline"
        );
    }
}
