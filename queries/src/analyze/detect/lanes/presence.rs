//! Presence and capacity (domain §7.1): an instance is present at t when it sent a signal
//! within W before t and another within W after t (a signal covering t is both); an app has
//! capacity in lane L at t when one of its instances of lane L is present.
//!
//! Signals are spans (covering their whole `[start, end]`) and the instants of OTLP metrics
//! and logs exports. [`PresenceBuilder`] takes them in any order and keeps, per instance, its
//! signals as sorted disjoint intervals; [`Presence::has_capacity`] answers with two binary
//! searches per instance of the app and lane. Only the apps the caller asks to track are kept
//! (the apps with a lane instance: no other app's capacity is ever asked). [`Covered`] is an
//! instance's signals over an interval as read from the store around one trace (its page).

use std::collections::HashMap;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// An interval over which an instance signalled (domain §7.1): a span of another trace, or
/// the times of OTLP metrics or logs exports (an instant: `start == end`). Several signals may
/// be given as one interval from the first start to the last end when none of them is more
/// than W from the next one's bucket (see the drilldown's reading of them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Covered {
    /// App.
    pub app: String,
    /// Instance id.
    pub instance: String,
    /// The instance's lane.
    pub lane: String,
    /// First signal, Unix ns.
    pub start: i64,
    /// Last signal's end, Unix ns.
    pub end: i64,
}

/// Signals of one instance: intervals, merged when they overlap or lie within the window W of
/// each other. Merging across a gap of at most W changes no answer: every time in such a gap
/// has a signal within W before and after it, so it is present either way, and the times
/// outside keep the same nearest signal on each side. It keeps a busy instance's signals to
/// a few intervals however many spans it served.
#[derive(Default)]
struct Signals {
    intervals: Vec<(i64, i64)>,
    /// Length of `intervals` after the last merge (merging again past twice that keeps the
    /// work linear over all pushes).
    merged: usize,
}

impl Signals {
    fn push(&mut self, start: i64, end: i64, w: i64) {
        self.intervals.push((start, end.max(start)));
        if self.intervals.len() > 2 * self.merged.max(32) {
            self.merge(w);
        }
    }

    fn merge(&mut self, w: i64) {
        let v = &mut self.intervals;
        v.sort_unstable();
        let mut out: Vec<(i64, i64)> = Vec::with_capacity(v.len());
        for &(a, b) in v.iter() {
            match out.last_mut() {
                Some(last) if a <= last.1.saturating_add(w) => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        *v = out;
        self.merged = v.len();
    }

    /// Present at `t` with window `w` (intervals merged).
    fn present(&self, t: i64, w: i64) -> bool {
        let v = &self.intervals;
        let i = v.partition_point(|&(a, _)| a <= t);
        if i > 0 && v[i - 1].1 >= t {
            return true;
        }
        let before = i > 0 && v[i - 1].1 >= t.saturating_sub(w);
        let after = i < v.len() && v[i].0 <= t.saturating_add(w);
        before && after
    }
}

/// Collects signals (see the module docs).
pub struct PresenceBuilder {
    window_ns: i64,
    tracked: Vec<bool>,
    /// Instance id → its signals per (app, lane) (one pair, unless the instance's lane
    /// changed). Instance ids are an interner's, dense from 0: a slot per id, no hashing per
    /// signal.
    by_instance: Vec<Vec<((u32, u32), Signals)>>,
}

impl PresenceBuilder {
    /// Presence with window W = `window_ns`, tracking the apps whose id is set in `tracked`.
    pub fn new(window_ns: i64, tracked: Vec<bool>) -> Self {
        Self {
            window_ns,
            tracked,
            by_instance: Vec::new(),
        }
    }

    /// `app` is tracked.
    pub fn tracks(&self, app: u32) -> bool {
        self.tracked.get(app as usize).copied().unwrap_or(false)
    }

    /// A signal of `instance` (of `app`, in `lane`) covering `[start, end]` (an instant:
    /// `start == end`). Ignored for an app not tracked. `instance` is an interned id (dense
    /// from 0).
    pub fn signal(&mut self, app: u32, lane: u32, instance: u32, start: i64, end: i64) {
        if !self.tracks(app) {
            return;
        }
        let w = self.window_ns;
        self.signals_of(instance, (app, lane)).push(start, end, w);
    }

    fn signals_of(&mut self, instance: u32, key: (u32, u32)) -> &mut Signals {
        let i = instance as usize;
        if i >= self.by_instance.len() {
            self.by_instance.resize_with(i + 1, Vec::new);
        }
        let slot = &mut self.by_instance[i];
        let at = match slot.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                slot.push((key, Signals::default()));
                slot.len() - 1
            }
        };
        &mut slot[at].1
    }

    /// Adds the signals `other` collected (of other spans, with the same window and tracked
    /// apps) to these.
    pub fn absorb(&mut self, other: Self) {
        let w = self.window_ns;
        for (instance, slot) in other.by_instance.into_iter().enumerate() {
            for (key, signals) in slot {
                let mine = self.signals_of(instance as u32, key);
                mine.intervals.extend(signals.intervals);
                mine.merge(w);
            }
        }
    }

    /// The finished index.
    pub fn finish(self) -> Presence {
        let mut by: FastMap<(u32, u32), Vec<Signals>> = FastMap::default();
        for slot in self.by_instance {
            for (key, mut signals) in slot {
                signals.merge(self.window_ns);
                by.entry(key).or_default().push(signals);
            }
        }
        Presence {
            window_ns: self.window_ns,
            by,
        }
    }
}

/// Which instances were present when (see the module docs).
pub struct Presence {
    window_ns: i64,
    by: FastMap<(u32, u32), Vec<Signals>>,
}

impl Presence {
    /// `app` has an instance of `lane` present at `t`.
    pub fn has_capacity(&self, app: u32, lane: u32, t: i64) -> bool {
        self.by
            .get(&(app, lane))
            .is_some_and(|v| v.iter().any(|s| s.present(t, self.window_ns)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;
    const W: i64 = 60 * S;

    fn one(signals: &[(i64, i64)]) -> Presence {
        let mut b = PresenceBuilder::new(W, vec![true]);
        for &(a, z) in signals {
            b.signal(0, 1, 7, a * S, z * S);
        }
        b.finish()
    }

    proptest::proptest! {
        /// Merged signals answer as the signals themselves: present at t when a signal covers
        /// t, or one covers a time within W before t and another starts within W after it.
        #[test]
        fn merged_signals_answer_as_the_raw_ones(
            raw in proptest::collection::vec((0i64..600, 0i64..40), 0..80),
        ) {
            let raw: Vec<(i64, i64)> = raw.iter().map(|&(a, len)| (a * S, (a + len) * S)).collect();
            let p = one(&raw.iter().map(|&(a, z)| (a / S, z / S)).collect::<Vec<_>>());
            for t in (0..700).map(|t| t * S) {
                let covered = raw.iter().any(|&(a, z)| a <= t && t <= z);
                let before = raw.iter().any(|&(a, z)| a <= t && z >= t - W);
                let after = raw.iter().any(|&(a, _)| a > t && a <= t + W);
                proptest::prop_assert_eq!(
                    p.has_capacity(0, 1, t), covered || (before && after), "t {}", t / S
                );
            }
        }

        /// Signals collected by two builders, one absorbing the other, answer as one builder
        /// given them all (the analyzer collects each half of a load on its own thread): for
        /// every app, lane and time. Instance 3 changes lane, app 2 is not tracked.
        #[test]
        fn two_builders_absorbed_answer_as_one(
            signals in proptest::collection::vec(
                (0u32..3, 0u32..3, 0u32..5, 0i64..400, 0i64..30),
                0..120,
            ),
            cut in 0usize..120,
        ) {
            let tracked = vec![true, true, false];
            let mut all = PresenceBuilder::new(W, tracked.clone());
            let mut first = PresenceBuilder::new(W, tracked.clone());
            let mut second = PresenceBuilder::new(W, tracked);
            for (i, &(app, lane, instance, a, len)) in signals.iter().enumerate() {
                let (a, z) = (a * S, (a + len) * S);
                all.signal(app, lane, instance, a, z);
                let half = if i < cut { &mut first } else { &mut second };
                half.signal(app, lane, instance, a, z);
            }
            first.absorb(second);
            let (one, two) = (all.finish(), first.finish());
            for app in 0..3 {
                for lane in 0..3 {
                    for t in (0..500).step_by(3) {
                        proptest::prop_assert_eq!(
                            one.has_capacity(app, lane, t * S),
                            two.has_capacity(app, lane, t * S),
                            "app {} lane {} t {}", app, lane, t
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn present_between_two_signals_within_the_window() {
        // Metrics exports at 100 s and 160 s: present from 100 to 160, and just around them
        // only where the other side is within W too.
        let p = one(&[(100, 100), (160, 160)]);
        for t in [100, 120, 130, 160] {
            assert!(p.has_capacity(0, 1, t * S), "t = {t}");
        }
        // 99 s: the signal after (100) is within W, but nothing before.
        assert!(!p.has_capacity(0, 1, 99 * S));
        // 161 s: nothing after.
        assert!(!p.has_capacity(0, 1, 161 * S));
    }

    #[test]
    fn a_gap_longer_than_twice_the_window_has_an_absent_middle() {
        // Signals at 0 and 150 s: at 75 s the nearest before is 75 s back (> W).
        let p = one(&[(0, 0), (150, 150)]);
        assert!(!p.has_capacity(0, 1, 75 * S));
        // At 60 s: 0 is 60 s before (within W, inclusive) and 150 is 90 s after: absent.
        assert!(!p.has_capacity(0, 1, 60 * S));
        // Signals at 0 and 100 s: at 50 s both are within W.
        let p = one(&[(0, 0), (100, 100)]);
        assert!(p.has_capacity(0, 1, 50 * S));
    }

    #[test]
    fn a_span_covers_its_whole_interval_and_counts_on_both_sides() {
        // One long span from 10 to 500 s: present throughout, even alone.
        let p = one(&[(10, 500)]);
        assert!(p.has_capacity(0, 1, 300 * S));
        assert!(!p.has_capacity(0, 1, 501 * S));
        assert!(!p.has_capacity(0, 1, 9 * S));
    }

    #[test]
    fn capacity_needs_one_instance_present_not_two_half_present() {
        // Instance 7 signals only before t, instance 8 only after: neither is present.
        let mut b = PresenceBuilder::new(W, vec![true]);
        b.signal(0, 1, 7, 100 * S, 100 * S);
        b.signal(0, 1, 8, 130 * S, 130 * S);
        let p = b.finish();
        assert!(!p.has_capacity(0, 1, 115 * S));
        // Another lane or app has no capacity at all.
        assert!(!p.has_capacity(0, 2, 100 * S));
    }

    #[test]
    fn signals_in_any_order_and_many_merge_to_the_same_answers() {
        let mut b = PresenceBuilder::new(W, vec![true]);
        // Every 30 s from 0 to 3000 s, pushed backwards, with overlapping spans among them.
        for k in (0..=100).rev() {
            b.signal(0, 1, 7, k * 30 * S, k * 30 * S + S);
            b.signal(0, 1, 7, k * 30 * S, k * 30 * S);
        }
        let p = b.finish();
        assert!(p.has_capacity(0, 1, 1515 * S));
        assert!(!p.has_capacity(0, 1, 3002 * S));
    }

    #[test]
    fn untracked_apps_keep_nothing() {
        let mut b = PresenceBuilder::new(W, vec![false, true]);
        b.signal(0, 1, 7, 0, 100 * S);
        b.signal(5, 1, 7, 0, 100 * S);
        let p = b.finish();
        assert!(!p.has_capacity(0, 1, 50 * S));
        assert!(!p.has_capacity(5, 1, 50 * S));
    }
}
