//! One trace's structure as the lane rules need it (domain §7.2): each span's parent (by the
//! house's one rule, [`crate::analyze::parents`]: a Zipkin SERVER half under the other half
//! of its span id, §1), the entry spans (SERVER,
//! CONSUMER and root spans), each span's upstream (its nearest ancestor entry span, or a break
//! when the chain reaches a span missing from the trace), and each entry span's intended lane.
//!
//! Nothing here recurses: parent chains come from the data and may be deep or, in broken
//! data, circular (a circle is treated as a missing span).

use std::num::NonZeroU64;

use smallvec::SmallVec;

use super::{BASE, LaneFields, LaneKind};
use crate::analyze::parents::SpanIds;

/// A span's parent within the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Parent {
    /// No parent span id: a root.
    Root,
    /// A parent span id not among the trace's spans.
    Missing,
    /// The parent's index.
    Span(usize),
}

/// A span's nearest ancestor entry span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Up {
    /// None: the chain ends at a root without passing an entry span (or the span is a root).
    None,
    /// The chain reaches a missing span (or circles) first.
    Broken,
    /// The upstream's index.
    Entry(usize),
}

/// An entry span's intended lane I(s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Intent {
    /// Not an entry span (no I), or not yet resolved.
    None,
    /// Undetermined (§7.2): never judged, counted.
    Undetermined,
    /// Lane `lane`; `explicit` when it derives from a carried tag (on the span or an upstream).
    Lane { lane: u32, explicit: bool },
}

/// The structure of one trace's spans (indices into its slice).
pub(crate) struct Tree {
    pub parent: Vec<Parent>,
    pub entry: Vec<bool>,
    pub up: Vec<Up>,
    pub intent: Vec<Intent>,
    children: Option<Vec<SmallVec<[usize; 4]>>>,
}

impl Tree {
    /// The structure of `ss` (one trace's spans, each key once).
    pub(crate) fn new<S: LaneFields>(ss: &[S]) -> Self {
        let n = ss.len();
        let ids = SpanIds::of(
            ss.iter()
                .map(|s| (s.span(), s.lane_kind() == LaneKind::Server)),
        );
        let parent: Vec<Parent> = ss
            .iter()
            .map(|s| {
                let server = s.lane_kind() == LaneKind::Server;
                let named = s.parent().map(NonZeroU64::get);
                match ids.parent(s.span(), server, named) {
                    Some(p) => Parent::Span(p),
                    None if named.is_none() => Parent::Root,
                    None => Parent::Missing,
                }
            })
            .collect();
        let entry: Vec<bool> = ss
            .iter()
            .zip(&parent)
            .map(|(s, p)| s.lane_kind().is_judged() || *p == Parent::Root)
            .collect();
        let up = upstreams(&parent, &entry);
        let mut tree = Tree {
            parent,
            entry,
            up,
            intent: vec![Intent::None; n],
            children: None,
        };
        tree.intents(ss);
        tree
    }

    /// Resolves I(s) of every entry span, upstreams first.
    fn intents<S: LaneFields>(&mut self, ss: &[S]) {
        let mut chain = Vec::new();
        for i in 0..ss.len() {
            if !self.entry[i] || self.intent[i] != Intent::None {
                continue;
            }
            // Climb the upstreams until one whose I is known or decided by itself.
            chain.clear();
            let mut at = i;
            let base_of_chain = loop {
                chain.push(at);
                if let Some(tag) = ss[at].tag() {
                    break Intent::Lane {
                        lane: tag,
                        explicit: true,
                    };
                }
                match self.up[at] {
                    Up::Entry(u) if self.intent[u] != Intent::None => break self.intent[u],
                    Up::Entry(u) => at = u,
                    Up::Broken => break Intent::Undetermined,
                    Up::None => break root_intent(&ss[at], self.parent[at]),
                }
            };
            // The chain's top decided itself (tag, root rule, break) or took a known I; every
            // span below it inherits, and a span with its own tag was the top.
            let top = chain.len() - 1;
            self.intent[chain[top]] = base_of_chain;
            for k in (0..top).rev() {
                self.intent[chain[k]] = self.intent[chain[k + 1]];
            }
        }
    }

    /// The indices of the spans whose parent is `i`.
    pub(crate) fn children(&mut self, i: usize) -> &[usize] {
        let parent = &self.parent;
        let children = self.children.get_or_insert_with(|| {
            let mut c = vec![SmallVec::new(); parent.len()];
            for (k, p) in parent.iter().enumerate() {
                if let Parent::Span(p) = p {
                    c[*p].push(k);
                }
            }
            c
        });
        &children[i]
    }

    /// A span below `i` (of any kind) carries tag `lane`.
    pub(crate) fn tag_below<S: LaneFields>(&mut self, ss: &[S], i: usize, lane: u32) -> bool {
        let mut stack: Vec<usize> = self.children(i).to_vec();
        let mut seen = vec![false; ss.len()];
        while let Some(k) = stack.pop() {
            if std::mem::replace(&mut seen[k], true) {
                continue;
            }
            if ss[k].tag() == Some(lane) {
                return true;
            }
            stack.extend_from_slice(self.children(k));
        }
        false
    }

    /// The ancestor entry spans of `i`, nearest first (stops at a break).
    pub(crate) fn upstream_chain(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let mut at = i;
        std::iter::from_fn(move || match self.up[at] {
            Up::Entry(u) => {
                at = u;
                Some(u)
            }
            _ => None,
        })
    }

    /// `c(s)`: the parent of `i` when it is a CLIENT or PRODUCER span.
    pub(crate) fn caller<S: LaneFields>(&self, ss: &[S], i: usize) -> Option<usize> {
        match self.parent[i] {
            Parent::Span(p) if ss[p].lane_kind().is_caller() => Some(p),
            _ => None,
        }
    }
}

/// I of a root entry span without a tag: a JOB root's own instance lane, undetermined for a
/// batch consumer named by links only, else base.
fn root_intent<S: LaneFields>(s: &S, parent: Parent) -> Intent {
    debug_assert_eq!(parent, Parent::Root);
    match s.lane_kind() {
        LaneKind::Server => Intent::Lane {
            lane: BASE,
            explicit: false,
        },
        LaneKind::Consumer if s.has_links() => Intent::Undetermined,
        LaneKind::Consumer => Intent::Lane {
            lane: BASE,
            explicit: false,
        },
        _ => Intent::Lane {
            lane: s.lane(),
            explicit: false,
        },
    }
}

/// Each span's nearest ancestor entry span, without recursion; a parent circle is a break.
fn upstreams(parent: &[Parent], entry: &[bool]) -> Vec<Up> {
    const TODO: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let n = parent.len();
    let mut up = vec![Up::None; n];
    let mut state = vec![TODO; n];
    let mut path = Vec::new();
    for i in 0..n {
        if state[i] == DONE {
            continue;
        }
        // Walk up to a span whose answer is known, then fill the path back down.
        path.clear();
        let mut at = i;
        // The answer of the path's last span, from its parent.
        let mut answer = loop {
            match state[at] {
                DONE => break if entry[at] { Up::Entry(at) } else { up[at] },
                ON_PATH => break Up::Broken,
                _ => {}
            }
            state[at] = ON_PATH;
            path.push(at);
            match parent[at] {
                Parent::Root => break Up::None,
                Parent::Missing => break Up::Broken,
                Parent::Span(p) => at = p,
            }
        };
        // Fill the path back down: each span's answer comes from the one above it.
        while let Some(k) = path.pop() {
            up[k] = answer;
            state[k] = DONE;
            if entry[k] {
                answer = Up::Entry(k);
            }
        }
    }
    up
}
