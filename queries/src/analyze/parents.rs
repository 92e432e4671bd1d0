//! Who a span's parent is within its trace (domain §1), the one rule every reader that builds
//! parent/child relations from span ids follows (the trace detections' walk, the drilldown's
//! tree): a span's parent is the span its `parent_span_id` names, except for Zipkin/B3 shared
//! span ids, where the CLIENT and the SERVER half of a call carry one span id. Then:
//! - the SERVER half is the other half's child: a SERVER span whose span id is also a
//!   non-SERVER span's of the trace hangs under that span, whatever its `parent_span_id`
//!   says (B3 gives both halves the caller's parent);
//! - a span whose `parent_span_id` is the shared id hangs under the SERVER half (the callee's
//!   own work is under the server span).
//!
//! [`SpanIds`] holds, for each span id of a trace, the first SERVER span and the first other
//! span carrying it (in the order they were added: a span id stored twice by one kind keeps
//! its first copy as the parent of its children).

use std::collections::HashMap;

/// "No span" in a [`Halves`] slot.
const NONE: u32 = u32::MAX;

/// The first SERVER and the first other span of one span id (indexes in the trace).
#[derive(Clone, Copy)]
struct Halves {
    server: u32,
    other: u32,
}

impl Halves {
    fn get(slot: u32) -> Option<usize> {
        (slot != NONE).then_some(slot as usize)
    }
}

/// The spans of one trace by span id, SERVER halves apart ([`SpanIds::insert`]), to find each
/// span's parent ([`SpanIds::parent`]). Reusable across traces ([`SpanIds::clear`]).
#[derive(Default)]
pub struct SpanIds {
    map: HashMap<u64, Halves, foldhash::fast::RandomState>,
}

impl SpanIds {
    /// An index of `spans`: (span id, is a SERVER span) of each, in order.
    pub fn of(spans: impl IntoIterator<Item = (u64, bool)>) -> Self {
        let mut ids = Self::default();
        for (k, (span, server)) in spans.into_iter().enumerate() {
            ids.insert(span, server, k);
        }
        ids
    }

    /// Forgets every span (keeps the room).
    pub fn clear(&mut self) {
        self.map.clear();
    }

    /// Adds the span at index `k` (below `u32::MAX`) with id `span`, a SERVER span when
    /// `server`; an id already held for that half keeps its first span.
    pub fn insert(&mut self, span: u64, server: bool, k: usize) {
        let k = u32::try_from(k).unwrap_or(NONE);
        let h = self.map.entry(span).or_insert(Halves {
            server: NONE,
            other: NONE,
        });
        let slot = if server { &mut h.server } else { &mut h.other };
        if *slot == NONE {
            *slot = k;
        }
    }

    /// The index of the parent of a span with id `span` (a SERVER span when `server`) whose
    /// `parent_span_id` is `parent`: the other half of its id for a SERVER half, else the
    /// span `parent` names (its SERVER half when the id is shared); `None` for a root or a
    /// parent not in the trace.
    pub fn parent(&self, span: u64, server: bool, parent: Option<u64>) -> Option<usize> {
        if server && let Some(client) = self.map.get(&span).and_then(|h| Halves::get(h.other)) {
            return Some(client);
        }
        let h = self.map.get(&parent?)?;
        Halves::get(h.server).or_else(|| Halves::get(h.other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (span id, SERVER?, parent id) → parent index, for each span.
    fn parents(spans: &[(u64, bool, Option<u64>)]) -> Vec<Option<usize>> {
        let ids = SpanIds::of(spans.iter().map(|&(s, server, _)| (s, server)));
        spans
            .iter()
            .map(|&(s, server, p)| ids.parent(s, server, p))
            .collect()
    }

    #[test]
    fn a_server_half_hangs_under_its_client_half_and_children_of_the_shared_id_under_it() {
        // 0: root SERVER 1; 1: CLIENT 2 under 1; 2: SERVER 2 (shared id, B3 gives it parent 1);
        // 3: CLIENT 3 under the shared id 2; 4: INTERNAL under 2.
        let spans = [
            (1, true, None),
            (2, false, Some(1)),
            (2, true, Some(1)),
            (3, false, Some(2)),
            (4, false, Some(2)),
        ];
        assert_eq!(parents(&spans), [None, Some(0), Some(1), Some(2), Some(2)]);
        // The same spans in another order: the same relations.
        let order = [3, 2, 4, 0, 1];
        let shuffled: Vec<_> = order.iter().map(|&i| spans[i]).collect();
        let got = parents(&shuffled);
        let back: Vec<Option<usize>> = got.iter().map(|p| p.map(|q| order[q])).collect();
        let mut expected = vec![None; 5];
        for (pos, &i) in order.iter().enumerate() {
            expected[pos] = [None, Some(0), Some(1), Some(2), Some(2)][i];
        }
        assert_eq!(back, expected);
    }

    #[test]
    fn without_shared_ids_parents_are_the_ids_named() {
        let spans = [
            (1, true, None),
            (2, false, Some(1)),
            (3, true, Some(2)),
            (4, false, Some(9)),
        ];
        assert_eq!(parents(&spans), [None, Some(0), Some(1), None]);
        // A SERVER span alone with its id keeps its named parent; a span id stored twice by
        // one kind parents its children from its first copy.
        let spans = [(1, false, None), (1, false, None), (2, true, Some(1))];
        assert_eq!(parents(&spans), [None, None, Some(0)]);
        let mut ids = SpanIds::of([(5, true)]);
        ids.clear();
        assert_eq!(ids.parent(6, false, Some(5)), None);
    }
}
