//! Each span's effective channel and blue_percent at its start, and the app's configuration
//! interval holding it, from the control plane's timeline (domain §4): [`Changes`] per app,
//! applied span by span, and [`resolve`], which also sorts the spans by trace.

use dyeline_model::release::Timeline;

use crate::analyze::spans::{DecisionRec, SpanRec, Spans};

/// One effective configuration change of an app (domain §4).
#[derive(Clone, Copy)]
struct Change {
    /// When, Unix ns.
    t: i64,
    /// The effective channel from then on (interned), if any.
    channel: Option<u32>,
    /// The effective blue_percent from then on.
    blue_percent: u8,
    /// The interval it opens, in [`Spans::intervals`].
    interval: u32,
}

/// Each app's effective configuration changes, by app id, the first at `i64::MIN`.
pub(in crate::analyze) struct Changes(Vec<Vec<Change>>);

impl Changes {
    /// The changes of every app of `out`, interning their channels in `out.channels` and
    /// writing the intervals between them to `out.intervals`.
    pub(in crate::analyze) fn new(out: &mut Spans, timeline: &Timeline) -> Self {
        out.intervals = vec![(i64::MIN, i64::MAX)];
        let mut changes = Vec::with_capacity(out.apps.len());
        for a in 0..out.apps.len() as u32 {
            let list = timeline.changes(out.apps.name(a));
            let mut c = Vec::with_capacity(list.len());
            for (k, ch) in list.iter().enumerate() {
                let until = list.get(k + 1).map_or(i64::MAX, |n| n.t_unix_nano);
                let interval = out.intervals.len() as u32;
                out.intervals.push((ch.t_unix_nano, until));
                c.push(Change {
                    t: ch.t_unix_nano,
                    channel: ch
                        .effective
                        .channel
                        .as_ref()
                        .map(|id| out.channels.intern(id.as_str())),
                    blue_percent: ch.effective.blue_percent,
                    interval,
                });
            }
            changes.push(c);
        }
        Self(changes)
    }

    /// Sets `s`'s effective channel, blue_percent and the interval of the app's
    /// configuration holding its start.
    pub(in crate::analyze) fn apply(&self, s: &mut SpanRec) {
        let c = &self.0[s.app as usize];
        let n = c.partition_point(|ch| ch.t <= s.start);
        let ch = c[n.saturating_sub(1)];
        s.channel = crate::analyze::spans::ChannelRef::of(ch.channel);
        s.blue_percent = ch.blue_percent;
        s.interval = ch.interval;
    }
}

/// Resolves each span's effective channel, blue_percent and the times of the app's
/// surrounding configuration changes from `timeline` (domain §4), then sorts the spans by
/// trace, start and span id (decision records follow).
pub fn resolve(out: &mut Spans, timeline: &Timeline) {
    out.lane_groups = timeline.lane_groups().clone();
    let changes = Changes::new(out, timeline);
    let mut spans = out.take_flat();
    for s in &mut spans {
        changes.apply(s);
    }
    if let Some(order) = trace_order(&spans) {
        apply_order(&mut spans, &order);
        reindex(&mut out.decision_recs, &order);
    }
    out.set_chunks(vec![spans]);
}

/// The permutation that sorts `spans` by (trace, start, span id) — `order[new] = old` — or
/// `None` when they already are.
pub(super) fn trace_order(spans: &[SpanRec]) -> Option<Vec<usize>> {
    if spans.is_sorted_by_key(|s| (s.trace, s.start, s.span)) {
        return None;
    }
    // The keys sorted side by side (not through the records: that is a cache miss per
    // comparison); the index breaks ties so the order is total and the sort can be unstable.
    let mut keys: Vec<(u128, i64, u64, usize)> = spans
        .iter()
        .enumerate()
        .map(|(i, s)| (s.trace, s.start, s.span, i))
        .collect();
    keys.sort_unstable();
    Some(keys.into_iter().map(|k| k.3).collect())
}

/// Reorders `v` so that `v[new] = old v[order[new]]`.
pub(super) fn apply_order<T>(v: &mut Vec<T>, order: &[usize]) {
    let mut old: Vec<Option<T>> = std::mem::take(v).into_iter().map(Some).collect();
    *v = order.iter().filter_map(|&i| old[i].take()).collect();
}

/// Points decision records at their spans' new places after [`apply_order`] with `order`, and
/// keeps them in span order.
pub(super) fn reindex(recs: &mut [DecisionRec], order: &[usize]) {
    let mut new_index = vec![0usize; order.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    for d in recs.iter_mut() {
        d.index = new_index[d.index];
    }
    recs.sort_unstable_by_key(|d| d.index);
}
