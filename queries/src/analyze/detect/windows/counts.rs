//! What the windowed detections count (domain §6.3–6), per window: requests, errors and
//! exemplars per colour of a group ([`Group`], [`ColorCounts`]) and the drained side's spans
//! ([`DrainAcc`]); and where a group's window is ([`GroupAt`]). The counting is
//! [`super::Acc`]'s; each detection's file judges them.

use std::collections::{BTreeSet, HashMap};

use dyeline_model::{Color, TrafficKind};

use crate::analyze::findings::hex128;

/// Exemplar trace ids kept per finding.
pub const EXEMPLARS: usize = 5;

/// A hash map with foldhash: the window pass looks up a group, an instance and its
/// exemplars per span, and SipHash and ordered maps showed in its time.
pub(in crate::analyze::detect) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Requests and errors of one colour in one group, with exemplars.
#[derive(Default)]
pub(in crate::analyze::detect) struct ColorCounts {
    /// Requests.
    pub requests: u64,
    /// Errors among them.
    pub errors: u64,
    /// Requests and exemplars per instance (app-level groups only), in one map: one lookup
    /// per span.
    pub instances: FastMap<u32, (u64, Vec<u128>)>,
    /// The smallest trace ids of the requests.
    pub exemplars: Vec<u128>,
    /// The smallest trace ids of the errors.
    pub error_exemplars: Vec<u128>,
}

/// Keeps in `v` the [`EXEMPLARS`] smallest distinct trace ids seen, ascending: the same
/// exemplars whatever order the spans come in (a scan sorted by trace, or a merge of files
/// grouped by trace).
pub(in crate::analyze::detect) fn keep(v: &mut Vec<u128>, t: u128) {
    if v.len() == EXEMPLARS && v.last().is_some_and(|&max| t >= max) {
        return;
    }
    if let Err(at) = v.binary_search(&t) {
        v.insert(at, t);
        v.truncate(EXEMPLARS);
    }
}

/// `v` as lower-case hex trace ids.
pub(in crate::analyze::detect) fn hexes(v: &[u128]) -> Vec<String> {
    v.iter().map(|t| hex128(*t)).collect()
}

/// The requests of one (channel, app or the whole channel, window), per colour.
#[derive(Default)]
pub(in crate::analyze::detect) struct Group {
    /// Blue requests.
    pub blue: ColorCounts,
    /// Green requests.
    pub green: ColorCounts,
    /// blue_percent in force (one of the spans').
    pub blue_percent: u8,
    /// The app's configuration changed within the window.
    pub straddles: bool,
}

impl Group {
    /// The counts of colour `c` (none for an unknown colour).
    pub(in crate::analyze::detect) fn side(&mut self, c: Color) -> Option<&mut ColorCounts> {
        match c {
            Color::Blue => Some(&mut self.blue),
            Color::Green => Some(&mut self.green),
            Color::Unknown => None,
        }
    }
}

/// (channel, app, drained side is blue, kind, window start).
pub(in crate::analyze::detect) type DrainKey = (u32, u32, bool, TrafficKind, i64);

/// Drained-side traffic of one key: spans, instances, traces, blue_percent in force.
pub(in crate::analyze::detect) type DrainAcc = (u64, BTreeSet<u32>, BTreeSet<u128>, u8);

/// (channel, Some(app) | None, window start).
pub(in crate::analyze::detect) type GroupKey = (u32, Option<u32>, i64);

impl ColorCounts {
    /// Adds `other`'s counts and exemplars (the smallest ids of both).
    pub(in crate::analyze::detect) fn absorb(&mut self, other: ColorCounts) {
        self.add_totals(&other);
        for (i, (n, ts)) in other.instances {
            let mine = self.instances.entry(i).or_default();
            mine.0 += n;
            for t in ts {
                keep(&mut mine.1, t);
            }
        }
    }

    /// Adds `other`'s requests, errors and exemplars, not its instances.
    pub(in crate::analyze::detect) fn add_totals(&mut self, other: &ColorCounts) {
        self.requests += other.requests;
        self.errors += other.errors;
        for &t in &other.exemplars {
            keep(&mut self.exemplars, t);
        }
        for &t in &other.error_exemplars {
            keep(&mut self.error_exemplars, t);
        }
    }
}

/// A group's place: its channel, its app (`None`: the whole channel) and its window
/// `[start, end)`, Unix ns.
pub(in crate::analyze::detect) struct GroupAt<'a> {
    /// Channel.
    pub channel: &'a str,
    /// App, or `None` for the channel's sum.
    pub app: Option<&'a str>,
    /// Window start.
    pub start: i64,
    /// Window end (exclusive).
    pub end: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exemplars_are_the_smallest_ids_whatever_the_order() {
        let ids: Vec<u128> = vec![9, 3, 7, 3, 1, 8, 2, 6, 5, 4];
        let mut forward = Vec::new();
        let mut backward = Vec::new();
        for &t in &ids {
            keep(&mut forward, t);
        }
        for &t in ids.iter().rev() {
            keep(&mut backward, t);
        }
        assert_eq!(forward, vec![1, 2, 3, 4, 5]);
        assert_eq!(backward, forward);
    }
}
