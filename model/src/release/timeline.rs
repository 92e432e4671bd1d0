//! The timeline: every channel operation in time order, as the JSON document of
//! `GET /api/v1/timeline` and `../shared/fixtures/analysis/*/timeline.json`
//! ([`TimelineDoc`]), and the one function that tells the effective channel and blue_percent
//! of any app at any instant ([`Timeline::effective_at`], domain §4), used by the analyzer and
//! the dashboard.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::channels::{Channel, Channels, Effective, Op};
use super::error::ReleaseError;
use crate::ids::ChannelId;
use crate::time::UnixNanos;

/// A channel of a timeline document with its apps (`global`'s list is empty: it holds every
/// app). In `GET /api/v1/timeline` these are the channels as they were at the range's start;
/// `apps` events change them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TimelineChannel {
    /// Channel id.
    pub id: String,
    /// App names.
    #[serde(default)]
    pub apps: Vec<String>,
}

/// One operation of a timeline document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TimelineEvent {
    /// Sequence number of the operation (absent in hand-written timelines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// When it was applied.
    pub t_unix_nano: UnixNanos,
    /// Channel id.
    pub channel: String,
    /// `start`, `ratio`, `finish` or `apps` (a membership change; deleting a channel is an
    /// `apps` change to `[]`).
    pub op: String,
    /// For `ratio`: the new blue_percent, 0..=100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blue_percent: Option<i64>,
    /// For `apps`: the new app list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apps: Option<Vec<String>>,
    /// Name of the token that made it (`import` for imported history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// Free text recorded with the operation (at most 500 characters after trimming);
    /// absent when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl TimelineEvent {
    /// The operation this event records.
    ///
    /// # Errors
    /// [`ReleaseError::InvalidTimeline`] for an unknown op, a ratio without an integer
    /// blue_percent in 0..=100, an apps op without apps, or an invalid channel id.
    pub fn to_op(&self) -> Result<(ChannelId, Op), ReleaseError> {
        let id = ChannelId::new(&self.channel).map_err(|_| {
            ReleaseError::InvalidTimeline(format!("channel id {:?} is invalid", self.channel))
        })?;
        let op = match self.op.as_str() {
            "start" => Op::Start,
            "finish" => Op::Finish,
            "ratio" => match self.blue_percent {
                Some(r @ 0..=100) => Op::Ratio(r as u8),
                other => {
                    return Err(ReleaseError::InvalidTimeline(format!(
                        "ratio on {:?} at {} needs blue_percent 0..=100, got {other:?}",
                        self.channel, self.t_unix_nano.0
                    )));
                }
            },
            "apps" => match &self.apps {
                Some(apps) => Op::Apps(apps.clone()),
                None => {
                    return Err(ReleaseError::InvalidTimeline(format!(
                        "apps op on {:?} has no apps list",
                        self.channel
                    )));
                }
            },
            other => {
                return Err(ReleaseError::InvalidTimeline(format!(
                    "op {other:?} is not start, ratio, finish or apps"
                )));
            }
        };
        Ok((id, op))
    }
}

/// The timeline document: `{"channels": [{"id", "apps"}], "events": [...]}` (extra keys such
/// as `description`, `t0_unix_nano` and `t_s` are accepted and ignored, except that
/// `t0_unix_nano` is when an import records the channels' app lists).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TimelineDoc {
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The reference time of a fixture; when present, imported channel lists apply from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t0_unix_nano: Option<UnixNanos>,
    /// Channels with their apps before the first event.
    pub channels: Vec<TimelineChannel>,
    /// Operations in time order.
    pub events: Vec<TimelineEvent>,
}

/// A change of one app's effective configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EffectiveChange {
    /// When it took effect (spans starting at or after it follow it).
    pub t_unix_nano: i64,
    /// The configuration from then on.
    pub effective: Effective,
}

/// A timeline ready for point queries: the channel states after each operation, in time
/// order (ties keep the document's order).
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    initial: Channels,
    points: Vec<(i64, ChannelId, Op, Channels)>,
}

impl Timeline {
    /// Builds a timeline from a document. Operations are replayed leniently (history is what
    /// happened, not a request to validate), in `t_unix_nano` order, ties in document order.
    ///
    /// # Errors
    /// [`ReleaseError::InvalidTimeline`] for an event that does not parse
    /// ([`TimelineEvent::to_op`]) or an invalid channel id.
    pub fn from_doc(doc: &TimelineDoc) -> Result<Self, ReleaseError> {
        let mut initial = Channels::new();
        for ch in &doc.channels {
            let id = ChannelId::new(&ch.id).map_err(|_| {
                ReleaseError::InvalidTimeline(format!("channel id {:?} is invalid", ch.id))
            })?;
            if !id.is_global() {
                initial.apply(&id, &Op::Apps(ch.apps.clone()));
            }
        }
        let mut ops = Vec::with_capacity(doc.events.len());
        for ev in &doc.events {
            let (id, op) = ev.to_op()?;
            ops.push((ev.t_unix_nano.0, id, op));
        }
        ops.sort_by_key(|(t, _, _)| *t);
        Ok(Self::from_ops(initial, ops))
    }

    /// Builds a timeline from an initial state and operations already in time order.
    pub fn from_ops(initial: Channels, ops: Vec<(i64, ChannelId, Op)>) -> Self {
        let mut points = Vec::with_capacity(ops.len());
        let mut state = initial.clone();
        for (t, id, op) in ops {
            state.apply(&id, &op);
            points.push((t, id, op, state.clone()));
        }
        Timeline { initial, points }
    }

    /// The channel states in force at `t_unix_nano`: after every operation at or before it.
    pub fn channels_at(&self, t_unix_nano: i64) -> &Channels {
        let n = self.points.partition_point(|(t, ..)| *t <= t_unix_nano);
        if n == 0 {
            &self.initial
        } else {
            &self.points[n - 1].3
        }
    }

    /// The effective channel and blue_percent of `app` at `t_unix_nano` (domain §4's matrix
    /// over the states of [`Timeline::channels_at`]).
    pub fn effective_at(&self, app: &str, t_unix_nano: i64) -> Effective {
        self.channels_at(t_unix_nano).effective(app)
    }

    /// Channel `id` as it was at `t_unix_nano`, if it existed.
    pub fn channel_at(&self, id: &str, t_unix_nano: i64) -> Option<&Channel> {
        self.channels_at(t_unix_nano).get(id)
    }

    /// Every change of `app`'s effective configuration, in time order, starting with the
    /// state before the first operation at `i64::MIN`.
    pub fn changes(&self, app: &str) -> Vec<EffectiveChange> {
        let mut out = vec![EffectiveChange {
            t_unix_nano: i64::MIN,
            effective: self.initial.effective(app),
        }];
        for (t, _, _, state) in &self.points {
            let e = state.effective(app);
            if out.last().is_some_and(|c| c.effective != e) {
                out.push(EffectiveChange {
                    t_unix_nano: *t,
                    effective: e,
                });
            }
        }
        out
    }

    /// The operations, in time order: (time, channel, op).
    pub fn ops(&self) -> impl Iterator<Item = (i64, &ChannelId, &Op)> {
        self.points.iter().map(|(t, id, op, _)| (*t, id, op))
    }

    /// True when there are no operations.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str =
        include_str!("../../../../shared/fixtures/analysis/release-small/timeline.json");

    #[test]
    fn release_small_timeline_answers_point_queries() {
        let doc: TimelineDoc = serde_json::from_str(FIXTURE).unwrap();
        let tl = Timeline::from_doc(&doc).unwrap();
        let t0 = doc.events[0].t_unix_nano.0;
        // before the first op nothing releases
        assert_eq!(tl.effective_at("order", t0 - 1).channel, None);
        // at t0 trade starts (ops apply to spans starting at or after their time)
        let e = tl.effective_at("order", t0);
        assert_eq!((e.channel.unwrap().as_str(), e.blue_percent), ("trade", 50));
        // after the ratio op at t0+1s, 30
        assert_eq!(
            tl.effective_at("inventory", t0 + 1_000_000_000)
                .blue_percent,
            30
        );
        // an app of no channel follows global, which never starts in this fixture
        assert_eq!(
            tl.effective_at("gateway", t0 + 10_000_000_000).channel,
            None
        );
        let changes = tl.changes("order");
        assert_eq!(changes.len(), 3, "{changes:?}");
        assert_eq!(changes[2].effective.blue_percent, 30);
    }

    #[test]
    fn bad_events_are_refused_with_a_reason() {
        let ev = |op: &str, bp: Option<i64>| TimelineEvent {
            seq: None,
            t_unix_nano: UnixNanos(1),
            channel: "trade".into(),
            op: op.into(),
            blue_percent: bp,
            apps: None,
            actor: None,
            note: None,
        };
        assert!(ev("ratio", Some(101)).to_op().is_err());
        assert!(ev("ratio", None).to_op().is_err());
        assert!(ev("launch", None).to_op().is_err());
        assert!(ev("apps", None).to_op().is_err());
        assert_eq!(ev("ratio", Some(0)).to_op().unwrap().1, Op::Ratio(0));
    }
}
