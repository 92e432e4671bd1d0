//! The lane marks of one trace (the drilldown's, domain §7.2–7.3): the analyzer's own tree and
//! judge ([`super::tree`], [`LaneJudge`]) run over one trace's spans, with the lane group in
//! force at each span's start (the timeline of [`Spans::lane_groups`]) and presence from the
//! trace's spans, its signals and the signals around it ([`Covered`]: other traces' spans and
//! the store's presence rows, which the caller reads). What the judge finds of a span is a
//! [`LaneMark`] on it: a finding (leak, dropped tag, pollution, tag changed) or an outcome the
//! analyzer only counts (fallback, failover, reverse fallback, tag not recorded); with each
//! entry span's intended lane ([`TraceLanes`]). Nothing here judges a second time: a mark is
//! what the judge said.

use std::collections::HashMap;

use serde::Serialize;
use utoipa::ToSchema;

use super::findings::{LaneLeak, LanePollution, LaneTagChanged, LaneTagDropped};
use super::presence::Covered;
use super::records::{LaneSpan, presence};
use super::tree::{Intent, Tree};
use super::{BASE, LaneFields, LaneGroups, LaneJudge, TimelineGroups};
use crate::analyze::config::LaneWindows;
use crate::analyze::intern::Interner;
use crate::analyze::spans::Spans;

/// An outcome of §7.2–7.3 that the analyzer counts and does not report one by one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// The intended lane cannot be told.
    Undetermined,
    /// Served in base: its app had no capacity in its lane (expected).
    LaneFallback,
    /// A retry served outside a lane that had failed it.
    Failover,
    /// Base traffic served in a lane: its app had no base instance, and its group allows it.
    ReverseFallback,
    /// No tag recorded, but the tag is carried again below it.
    TagNotRecorded,
}

/// A lane mark on one span: a finding of §7.3 on it (the finding as `dyeline analyze` writes
/// it), or an outcome the analyzer counts, with the lane it concerns.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LaneMark {
    /// §7.3.1: the request left its lane here.
    LaneLeak(LaneLeak),
    /// §7.3.2: the tag was dropped on the way to this span.
    LaneTagDropped(LaneTagDropped),
    /// §7.3.3: base traffic served in a lane here.
    LanePollution(LanePollution),
    /// §7.3.4: the tag was set or changed here.
    LaneTagChanged(LaneTagChanged),
    /// Marked for `lane`, served in base: its app had no `lane` instance present (expected,
    /// counted as `lane_fallback`).
    LaneFallback {
        /// The intended lane.
        lane: String,
    },
    /// Marked for `lane` and served elsewhere after an earlier try in `lane` failed (counted
    /// as `failover`).
    Failover {
        /// The intended lane.
        lane: String,
    },
    /// Base traffic served in `lane`: its app had no base instance and its group allows it
    /// (counted as `reverse_fallback`).
    ReverseFallback {
        /// The lane that served it.
        lane: String,
    },
    /// No tag recorded on this span, but `lane`'s tag is carried again below it (counted as
    /// `tag_not_recorded`).
    TagNotRecorded {
        /// The lane of its upstream's tag.
        lane: String,
    },
}

impl LaneMark {
    /// Its type as written in JSON (`lane_leak`, …, `tag_not_recorded`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::LaneLeak(_) => "lane_leak",
            Self::LaneTagDropped(_) => "lane_tag_dropped",
            Self::LanePollution(_) => "lane_pollution",
            Self::LaneTagChanged(_) => "lane_tag_changed",
            Self::LaneFallback { .. } => "lane_fallback",
            Self::Failover { .. } => "failover",
            Self::ReverseFallback { .. } => "reverse_fallback",
            Self::TagNotRecorded { .. } => "tag_not_recorded",
        }
    }
}

/// What the lane rules say of one trace's spans (indices of [`Spans::iter`]).
pub struct TraceLanes {
    intent: Vec<Intent>,
    marks: HashMap<usize, Vec<LaneMark>>,
}

impl TraceLanes {
    /// The intended lane of span `i` (an entry span: a lane id, or `undetermined`; `None`
    /// for other spans); `lanes` names the lane ids ([`Spans::lanes`]' names).
    pub fn intended(&self, lanes: &Interner, i: usize) -> Option<String> {
        match self.intent.get(i)? {
            Intent::None => None,
            Intent::Undetermined => Some("undetermined".to_owned()),
            Intent::Lane { lane, .. } => Some(lanes.name(*lane).to_owned()),
        }
    }

    /// The marks on span `i`, findings first (in the order of §7.3), then counted outcomes.
    pub fn marks(&self, i: usize) -> &[LaneMark] {
        self.marks.get(&i).map_or(&[], Vec::as_slice)
    }

    /// Spans with at least one mark.
    pub fn marked_spans(&self) -> usize {
        self.marks.len()
    }
}

/// The spans of `spans` (one trace) may ask for capacity: one of them is served outside base
/// or carries a tag other than base. Otherwise every intended lane is base (or undetermined)
/// and every span is served in base, and no rule asks whether an instance was present: the
/// caller need not read the signals around the trace.
pub fn asks_capacity(spans: &Spans) -> bool {
    spans.iter().any(|s| {
        let f = spans.lanes.fact(s.lane);
        f.lane != BASE || f.tag.is_some_and(|t| t != BASE)
    })
}

/// The lane marks of `spans`, the spans of one trace (as the drilldown loads them), judged as
/// `dyeline analyze` judges them: by the lane groups of [`Spans::lane_groups`] at each span's
/// start, with presence from the spans, [`Spans::signals`] and `around`.
pub fn trace_lanes(spans: &Spans, windows: &LaneWindows, around: &[Covered]) -> TraceLanes {
    let (presence, tracked) = presence(spans, windows, around);
    let groups = TimelineGroups::new(&spans.lane_groups, &spans.apps, &spans.lanes.names);
    let ss: Vec<LaneSpan> = spans.iter().map(|s| LaneSpan::of(s, spans)).collect();
    let window = i64::try_from(windows.window.as_nanos()).unwrap_or(i64::MAX);
    let judge = LaneJudge::new(
        &presence,
        &groups,
        &spans.apps,
        &spans.lanes.names,
        &tracked,
        window,
    );
    judge_marks(&ss, judge, &spans.lanes.names)
}

/// Runs `judge` (with nothing judged yet) over one trace's spans `ss` and turns what it says of
/// each span into marks; `lanes` names the lane ids.
pub(crate) fn judge_marks<S: LaneFields, G: LaneGroups>(
    ss: &[S],
    mut judge: LaneJudge<'_, G>,
    lanes: &Interner,
) -> TraceLanes {
    judge.keep_counted();
    judge.trace(ss);
    let counted = judge.take_counted();
    let intent = Tree::new(ss).intent;
    // The findings name their span by id: one of the trace's judged spans (the CLIENT half of
    // a Zipkin shared id takes none of its SERVER half's).
    let mut judged: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, s) in ss.iter().enumerate() {
        if s.lane_kind().is_judged() {
            judged
                .entry(crate::analyze::findings::hex64(s.span()))
                .or_default()
                .push(i);
        }
    }
    let report = judge.finish();
    let mut marks: HashMap<usize, Vec<LaneMark>> = HashMap::new();
    let mut put = |span_id: &str, mark: LaneMark| {
        for &i in judged.get(span_id).map_or(&[][..], Vec::as_slice) {
            marks.entry(i).or_default().push(mark.clone());
        }
    };
    for f in report.leaks {
        put(&f.span_id.clone(), LaneMark::LaneLeak(f));
    }
    for f in report.tags_dropped {
        put(&f.span_id.clone(), LaneMark::LaneTagDropped(f));
    }
    for f in report.pollution {
        put(&f.span_id.clone(), LaneMark::LanePollution(f));
    }
    for f in report.tags_changed {
        put(&f.span_id.clone(), LaneMark::LaneTagChanged(f));
    }
    for (i, c) in counted {
        let intended = match intent[i] {
            Intent::Lane { lane, .. } => lanes.name(lane).to_owned(),
            _ => continue,
        };
        let mark = match c {
            Counted::Undetermined => continue,
            Counted::LaneFallback => LaneMark::LaneFallback { lane: intended },
            Counted::Failover => LaneMark::Failover { lane: intended },
            Counted::TagNotRecorded => LaneMark::TagNotRecorded { lane: intended },
            Counted::ReverseFallback => LaneMark::ReverseFallback {
                lane: lanes.name(ss[i].lane()).to_owned(),
            },
        };
        marks.entry(i).or_default().push(mark);
    }
    TraceLanes { intent, marks }
}

#[cfg(test)]
mod tests;
