//! The lane groups of the release timeline ([`LaneGroupTimeline::group_at`]: each app's group
//! as it was at a time) as the lane rules read them ([`LaneGroups`]).

use dyeline_model::LaneId;
use dyeline_model::release::{Fallback, LaneGroup, LaneGroupTimeline, SpikeThresholds};

use super::LaneGroups;
use crate::analyze::intern::Interner;

/// [`LaneGroups`] over a timeline's lane groups, naming apps and lanes by the analyzer's
/// interners.
pub struct TimelineGroups<'a> {
    timeline: &'a LaneGroupTimeline,
    apps: &'a Interner,
    lanes: &'a Interner,
}

impl<'a> TimelineGroups<'a> {
    /// The groups of `timeline`; app and lane ids are entries of `apps` and `lanes`.
    pub fn new(timeline: &'a LaneGroupTimeline, apps: &'a Interner, lanes: &'a Interner) -> Self {
        Self {
            timeline,
            apps,
            lanes,
        }
    }

    fn at(&self, app: u32, t: i64) -> Option<&'a LaneGroup> {
        self.timeline.group_at(self.apps.name(app), t)
    }
}

impl LaneGroups for TimelineGroups<'_> {
    fn group(&self, app: u32, t: i64) -> Option<&str> {
        self.at(app, t).map(|g| g.id().as_str())
    }

    fn is_entry(&self, app: u32, t: i64) -> bool {
        self.at(app, t)
            .is_some_and(|g| g.is_entry_app(self.apps.name(app)))
    }

    fn is_strict(&self, app: u32, lane: u32, t: i64) -> bool {
        let Some(g) = self.at(app, t) else {
            return false;
        };
        LaneId::new(self.lanes.name(lane)).is_ok_and(|l| g.fallback(&l) == Fallback::None)
    }

    fn reverse_fallback(&self, app: u32, t: i64) -> bool {
        self.at(app, t).is_some_and(LaneGroup::reverse_fallback)
    }

    fn spike_thresholds(&self, app: u32, t: i64) -> SpikeThresholds {
        self.at(app, t)
            .map(LaneGroup::thresholds)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use dyeline_model::release::{Timeline, TimelineDoc};

    use super::*;

    /// lanes-small's history: mall and promo put at 0 s, mall put again at 2085 s with gray2
    /// strict, promo deleted at 3285 s.
    #[test]
    fn groups_are_read_as_they_were_at_each_time() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fixtures/analysis/lanes-small/timeline.json"
        );
        let doc: TimelineDoc =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let t0 = 1_735_812_000_000_000_000i64;
        let s = |secs: i64| t0 + secs * 1_000_000_000;
        let timeline = Timeline::from_doc(&doc).unwrap();
        let mut apps = Interner::default();
        let (gateway, payment, coupon, bff) = (
            apps.intern("gateway"),
            apps.intern("payment"),
            apps.intern("coupon"),
            apps.intern("bff"),
        );
        let mut lanes = Interner::default();
        let (_, gray2) = (lanes.intern("base"), lanes.intern("gray2"));
        let g = TimelineGroups::new(timeline.lane_groups(), &apps, &lanes);
        assert_eq!(g.group(payment, s(10)), Some("mall"));
        assert_eq!(g.group(bff, s(10)), None);
        assert!(g.is_entry(gateway, s(10)) && !g.is_entry(payment, s(10)));
        assert!(!g.is_strict(payment, gray2, s(2000)));
        assert!(g.is_strict(payment, gray2, s(2200)));
        assert!(g.reverse_fallback(coupon, s(3200)));
        assert!(!g.reverse_fallback(coupon, s(3400)));
        assert_eq!(g.group(coupon, s(3400)), None);
        assert_eq!(g.spike_thresholds(payment, s(10)).spike_min_requests, 100);
    }
}
