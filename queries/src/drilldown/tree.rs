//! The shape of one trace's span tree as a flat list: every span once, in depth-first order
//! (roots, then each span's children, siblings by start time then span id), with its depth
//! and whether its parent is missing. Computed without recursion (an explicit stack, and
//! parent walks that visit each span once), so a trace whose spans form a chain as deep as
//! it has spans costs linear time and constant stack, whatever a client sent.
//!
//! Corrupt data is shown, not hidden: a span whose parent id names a span that is not stored
//! is a root marked `waiting_for_parent`; a span on a parent cycle (its ancestor chain comes
//! back to itself, including a span that is its own parent) is a root, and the spans that
//! hang from the cycle keep their parents. A span id stored twice is placed twice; children
//! hang from its first copy (by start, then span id).
//!
//! Parents follow [`crate::analyze::parents`]: the SERVER half of a Zipkin/B3 shared span id
//! hangs under the CLIENT half, and the spans whose parent is the shared id under the SERVER
//! half.

use crate::analyze::parents::SpanIds;

/// One span as the tree sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeSpan {
    /// Span id.
    pub span: u64,
    /// Parent span id (none for a root).
    pub parent: Option<u64>,
    /// A SERVER span (the child half of a shared span id).
    pub server: bool,
    /// Start, Unix ns (siblings are ordered by start, then span id).
    pub start: i64,
}

/// A span's place in the flat tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    /// Index of the span in the input.
    pub index: usize,
    /// Ancestors above it (0 for a root).
    pub depth: usize,
    /// Its parent id is set but names no stored span.
    pub waiting_for_parent: bool,
}

/// The flat tree of a trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeOrder {
    /// Every input span once, depth first.
    pub placed: Vec<Placed>,
    /// The deepest depth (0 for no span).
    pub max_depth: usize,
}

/// The flat tree of `spans` (any order): see the module docs.
pub fn tree_order(spans: &[TreeSpan]) -> TreeOrder {
    let n = spans.len();
    // Sibling order: by start, span id, then input index (a total order).
    let mut sorted: Vec<usize> = (0..n).collect();
    sorted.sort_unstable_by_key(|&i| (spans[i].start, spans[i].span, i));
    // First copy (in sibling order) of each span id, SERVER halves apart.
    let mut ids = SpanIds::default();
    for &i in &sorted {
        ids.insert(spans[i].span, spans[i].server, i);
    }
    let mut waiting = vec![false; n];
    let mut parent: Vec<Option<usize>> = spans
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let p = ids.parent(s.span, s.server, s.parent);
            waiting[i] = s.parent.is_some() && p.is_none();
            p
        })
        .collect();
    drop(ids);
    break_cycles(&mut parent);
    // Children lists in sibling order, as one array cut by offsets (no vector per span).
    let mut offsets = vec![0usize; n + 1];
    for p in parent.iter().flatten() {
        offsets[p + 1] += 1;
    }
    for i in 0..n {
        offsets[i + 1] += offsets[i];
    }
    let mut fill = offsets.clone();
    let mut children = vec![0usize; n];
    for &i in &sorted {
        if let Some(p) = parent[i] {
            children[fill[p]] = i;
            fill[p] += 1;
        }
    }
    drop(fill);
    // Depth first with an explicit stack: push in reverse so the first sibling pops first.
    let mut placed = Vec::with_capacity(n);
    let mut max_depth = 0;
    let mut stack: Vec<(usize, usize)> = sorted
        .iter()
        .rev()
        .filter(|&&i| parent[i].is_none())
        .map(|&i| (i, 0))
        .collect();
    while let Some((i, depth)) = stack.pop() {
        placed.push(Placed {
            index: i,
            depth,
            waiting_for_parent: waiting[i],
        });
        max_depth = max_depth.max(depth);
        for &c in children[offsets[i]..offsets[i + 1]].iter().rev() {
            stack.push((c, depth + 1));
        }
    }
    debug_assert_eq!(placed.len(), n, "every span is placed once");
    TreeOrder { placed, max_depth }
}

/// Makes every span on a parent cycle a root, in time linear in the spans: each walk up the
/// parents stops at a span an earlier walk finished, so each span is walked once.
fn break_cycles(parent: &mut [Option<usize>]) {
    const NEW: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; parent.len()];
    let mut path: Vec<usize> = Vec::new();
    for i in 0..parent.len() {
        if state[i] != NEW {
            continue;
        }
        path.clear();
        let mut cur = Some(i);
        while let Some(c) = cur {
            match state[c] {
                DONE => break,
                ON_PATH => {
                    // `c` closes a cycle: it and the spans after it on the path.
                    let at = path.iter().rposition(|&x| x == c).unwrap_or(0);
                    for &x in &path[at..] {
                        parent[x] = None;
                    }
                    break;
                }
                _ => {
                    state[c] = ON_PATH;
                    path.push(c);
                    cur = parent[c];
                }
            }
        }
        for &x in &path {
            state[x] = DONE;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn s(span: u64, parent: Option<u64>, start: i64) -> TreeSpan {
        TreeSpan {
            span,
            parent,
            start,
            server: false,
        }
    }

    /// A SERVER span.
    fn sv(span: u64, parent: Option<u64>, start: i64) -> TreeSpan {
        TreeSpan {
            server: true,
            ..s(span, parent, start)
        }
    }

    /// (span id, depth, waiting) in placed order.
    fn shape(spans: &[TreeSpan]) -> Vec<(u64, usize, bool)> {
        tree_order(spans)
            .placed
            .iter()
            .map(|p| (spans[p.index].span, p.depth, p.waiting_for_parent))
            .collect()
    }

    #[test]
    fn children_follow_their_parent_by_start_then_span_id() {
        let spans = [
            s(5, Some(1), 30),
            s(1, None, 0),
            s(3, Some(1), 10),
            s(2, Some(1), 10),
            s(4, Some(2), 11),
            s(9, Some(77), 5),
        ];
        assert_eq!(
            shape(&spans),
            vec![
                (1, 0, false),
                (2, 1, false),
                (4, 2, false),
                (3, 1, false),
                (5, 1, false),
                (9, 0, true),
            ]
        );
        assert_eq!(tree_order(&spans).max_depth, 2);
    }

    #[test]
    fn cycles_become_roots_and_what_hangs_from_them_stays() {
        // 1 → 2 → 3 → 1 is a cycle; 4 hangs from 3; 5 is its own parent.
        let spans = [
            s(1, Some(3), 0),
            s(2, Some(1), 1),
            s(3, Some(2), 2),
            s(4, Some(3), 3),
            s(5, Some(5), 4),
        ];
        assert_eq!(
            shape(&spans),
            vec![
                (1, 0, false),
                (2, 0, false),
                (3, 0, false),
                (4, 1, false),
                (5, 0, false),
            ]
        );
    }

    #[test]
    fn a_duplicated_span_id_is_placed_twice_and_parents_its_children_once() {
        let spans = [
            s(1, None, 0),
            s(2, Some(1), 1),
            s(2, Some(1), 2),
            s(3, Some(2), 3),
        ];
        assert_eq!(
            shape(&spans),
            vec![(1, 0, false), (2, 1, false), (3, 2, false), (2, 1, false)]
        );
    }

    /// Zipkin/B3: the SERVER half of a shared id under its CLIENT half (whatever parent it
    /// names), the callee's spans under the SERVER half.
    #[test]
    fn a_server_half_hangs_under_its_client_half_and_the_callees_spans_under_it() {
        let spans = [
            sv(1, None, 0),
            // Client half of 2, and its SERVER half naming the client's parent (as B3 does).
            s(2, Some(1), 1),
            sv(2, Some(1), 2),
            // The callee's call out, under the shared id.
            s(3, Some(2), 3),
            // A SERVER half whose client half is not stored: a root waiting for its parent.
            sv(7, Some(6), 4),
        ];
        assert_eq!(
            shape(&spans),
            vec![
                (1, 0, false),
                (2, 1, false),
                (2, 2, false),
                (3, 3, false),
                (7, 0, true),
            ]
        );
        let t = tree_order(&spans);
        assert_eq!(t.placed[2].index, 2, "the SERVER half is the deeper copy");
        assert_eq!(t.max_depth, 3);
    }

    /// A chain 100,000 spans deep (more than any stack would take recursively), fed leaf
    /// first: depths 0..100,000 in order, in well under a second.
    #[test]
    fn a_chain_100_000_deep_is_flattened_without_recursion() {
        const N: u64 = 100_000;
        let spans: Vec<TreeSpan> = (1..=N)
            .rev()
            .map(|i| s(i, (i > 1).then(|| i - 1), i as i64))
            .collect();
        let started = std::time::Instant::now();
        let t = tree_order(&spans);
        assert!(
            started.elapsed().as_secs_f64() < 5.0,
            "{:?}",
            started.elapsed()
        );
        assert_eq!(t.max_depth, N as usize - 1);
        for (d, p) in t.placed.iter().enumerate() {
            assert_eq!((spans[p.index].span, p.depth), (d as u64 + 1, d));
        }
        // And a chain that closes on itself is all roots, in order.
        let mut ring = spans.clone();
        ring.last_mut().unwrap().parent = Some(N);
        let t = tree_order(&ring);
        assert_eq!(t.max_depth, 0);
        assert_eq!(t.placed.len(), N as usize);
    }

    /// The recursive definition (children by start then id, depth first), for small inputs.
    fn reference(spans: &[TreeSpan]) -> Vec<(usize, usize)> {
        fn walk(
            spans: &[TreeSpan],
            parent: &[Option<usize>],
            i: usize,
            d: usize,
            out: &mut Vec<(usize, usize)>,
        ) {
            out.push((i, d));
            let mut kids: Vec<usize> = (0..spans.len()).filter(|&c| parent[c] == Some(i)).collect();
            kids.sort_by_key(|&c| (spans[c].start, spans[c].span, c));
            for c in kids {
                walk(spans, parent, c, d + 1, out);
            }
        }
        let n = spans.len();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| (spans[i].start, spans[i].span, i));
        let first = |id: u64, server: bool| {
            order
                .iter()
                .copied()
                .find(|&i| spans[i].span == id && spans[i].server == server)
        };
        let mut parent: Vec<Option<usize>> = spans
            .iter()
            .map(|s| {
                let client = s.server.then(|| first(s.span, false)).flatten();
                client.or_else(|| {
                    let p = s.parent?;
                    first(p, true).or_else(|| first(p, false))
                })
            })
            .collect();
        // On a cycle: following parents from i comes back to i.
        let on_cycle: Vec<bool> = (0..n)
            .map(|i| {
                let mut p = parent[i];
                for _ in 0..=n {
                    match p {
                        Some(q) if q == i => return true,
                        Some(q) => p = parent[q],
                        None => return false,
                    }
                }
                false
            })
            .collect();
        for i in 0..n {
            if on_cycle[i] {
                parent[i] = None;
            }
        }
        let mut out = Vec::new();
        for &i in &order {
            if parent[i].is_none() {
                walk(spans, &parent, i, 0, &mut out);
            }
        }
        out
    }

    proptest! {
        #[test]
        fn the_flat_tree_is_the_recursive_one(
            raw in prop::collection::vec(
                (0u64..12, prop::option::of(0u64..14), 0i64..5, any::<bool>()),
                0..40,
            )
        ) {
            let spans: Vec<TreeSpan> = raw
                .iter()
                .map(|&(a, b, c, server)| TreeSpan { server, ..s(a, b, c) })
                .collect();
            let got: Vec<(usize, usize)> =
                tree_order(&spans).placed.iter().map(|p| (p.index, p.depth)).collect();
            prop_assert_eq!(got, reference(&spans));
        }
    }
}
