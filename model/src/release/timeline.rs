//! The timeline: every channel and lane group operation in time order, as the JSON document
//! of `GET /api/v1/timeline` and `../shared/fixtures/analysis/*/timeline.json`
//! ([`TimelineDoc`]), and the functions that tell the effective channel and blue_percent of any
//! app at any instant ([`Timeline::effective_at`], domain §4) and its lane group
//! ([`Timeline::lane_group_at`], domain §7.1), used by the analyzer and the dashboard.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::channels::{Channel, Channels, Effective, Op};
use super::error::ReleaseError;
use super::lane_group_timeline::LaneGroupTimeline;
use super::lane_groups::{LaneGroup, LaneGroupId, LaneGroupOp, LaneGroups};
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

/// The `lane_group` of a timeline event: the whole group for `lane_group_put`, its id for
/// `lane_group_delete`.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
#[serde(untagged)]
pub enum LaneGroupRef {
    /// The group put (created or wholly replaced).
    Group(LaneGroup),
    /// The id of the group deleted.
    Id(LaneGroupId),
}

impl<'de> Deserialize<'de> for LaneGroupRef {
    /// A string is an id, an object a group (validated, with the group's own messages).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = LaneGroupRef;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a lane group object or a lane group id")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<LaneGroupRef, E> {
                LaneGroupId::new(s).map(LaneGroupRef::Id).map_err(E::custom)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                m: A,
            ) -> Result<LaneGroupRef, A::Error> {
                LaneGroup::deserialize(serde::de::value::MapAccessDeserializer::new(m))
                    .map(LaneGroupRef::Group)
            }
        }
        d.deserialize_any(V)
    }
}

/// One operation of a timeline document: a channel's (`channel` and `op` `start`, `ratio`,
/// `finish` or `apps`) or a lane group's (`op` `lane_group_put` or `lane_group_delete` with
/// `lane_group`, and no `channel`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TimelineEvent {
    /// Sequence number of the operation (absent in hand-written timelines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// When it was applied.
    pub t_unix_nano: UnixNanos,
    /// Channel id (channel operations only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// `start`, `ratio`, `finish` or `apps` (a membership change; deleting a channel is an
    /// `apps` change to `[]`); `lane_group_put` or `lane_group_delete`.
    pub op: String,
    /// For `ratio`: the new blue_percent, 0..=100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blue_percent: Option<i64>,
    /// For `apps`: the new app list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apps: Option<Vec<String>>,
    /// For `lane_group_put`: the whole group; for `lane_group_delete`: its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane_group: Option<LaneGroupRef>,
    /// Name of the token that made it (`import` for imported history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// Free text recorded with the operation (at most 500 characters after trimming);
    /// absent when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What a timeline event does: a channel operation or a lane group operation.
#[derive(Clone, Debug, PartialEq)]
pub enum TimelineOp {
    /// An operation on a channel.
    Channel(ChannelId, Op),
    /// An operation on lane groups.
    LaneGroup(LaneGroupOp),
}

impl TimelineOp {
    /// The `op` name of its event.
    pub fn name(&self) -> &'static str {
        match self {
            TimelineOp::Channel(_, op) => op.name(),
            TimelineOp::LaneGroup(op) => op.name(),
        }
    }
}

impl TimelineEvent {
    /// The event of a channel operation (a `delete` is written as an `apps` change to `[]`),
    /// without sequence number, actor or note.
    pub fn of_channel(t_unix_nano: i64, channel: &ChannelId, op: &Op) -> Self {
        let (name, blue_percent, apps) = match op {
            Op::Start => ("start", None, None),
            Op::Finish => ("finish", None, None),
            Op::Ratio(b) => ("ratio", Some(i64::from(*b)), None),
            Op::Apps(a) => ("apps", None, Some(a.clone())),
            Op::Delete => ("apps", None, Some(Vec::new())),
        };
        TimelineEvent {
            channel: Some(channel.to_string()),
            op: name.into(),
            blue_percent,
            apps,
            ..Self::bare(t_unix_nano)
        }
    }

    /// The event of a lane group operation, without sequence number, actor or note.
    pub fn of_lane_group(t_unix_nano: i64, op: &LaneGroupOp) -> Self {
        let lane_group = match op {
            LaneGroupOp::Put(g) => LaneGroupRef::Group(g.clone()),
            LaneGroupOp::Delete(id) => LaneGroupRef::Id(id.clone()),
        };
        TimelineEvent {
            op: op.name().into(),
            lane_group: Some(lane_group),
            ..Self::bare(t_unix_nano)
        }
    }

    fn bare(t_unix_nano: i64) -> Self {
        TimelineEvent {
            seq: None,
            t_unix_nano: UnixNanos(t_unix_nano),
            channel: None,
            op: String::new(),
            blue_percent: None,
            apps: None,
            lane_group: None,
            actor: None,
            note: None,
        }
    }

    /// The operation this event records.
    ///
    /// # Errors
    /// [`ReleaseError::InvalidTimeline`] for an unknown op, a ratio without an integer
    /// blue_percent in 0..=100, an apps op without apps, a channel op without a valid channel
    /// id, a lane group put without a group or a delete without an id, or a lane group op
    /// that names a channel.
    pub fn to_op(&self) -> Result<TimelineOp, ReleaseError> {
        let at = self.t_unix_nano.0;
        let bad = |what: String| Err(ReleaseError::InvalidTimeline(what));
        if self.op.starts_with("lane_group_") {
            if let Some(ch) = &self.channel {
                return bad(format!("{} at {at} names channel {ch:?}", self.op));
            }
            return match (self.op.as_str(), &self.lane_group) {
                ("lane_group_put", Some(LaneGroupRef::Group(g))) => {
                    Ok(TimelineOp::LaneGroup(LaneGroupOp::Put(g.clone())))
                }
                ("lane_group_delete", Some(LaneGroupRef::Id(id))) => {
                    Ok(TimelineOp::LaneGroup(LaneGroupOp::Delete(id.clone())))
                }
                ("lane_group_put", _) => bad(format!(
                    "lane_group_put at {at} needs the group object as lane_group"
                )),
                ("lane_group_delete", _) => bad(format!(
                    "lane_group_delete at {at} needs the group id as lane_group"
                )),
                (other, _) => bad(format!(
                    "op {other:?} is not lane_group_put or lane_group_delete"
                )),
            };
        }
        let Some(channel) = &self.channel else {
            return bad(format!("{} at {at} has no channel", self.op));
        };
        if self.lane_group.is_some() {
            return bad(format!(
                "{} on {channel:?} at {at} has a lane_group",
                self.op
            ));
        }
        let id = ChannelId::new(channel).map_err(|_| {
            ReleaseError::InvalidTimeline(format!("channel id {channel:?} is invalid"))
        })?;
        let op = match self.op.as_str() {
            "start" => Op::Start,
            "finish" => Op::Finish,
            "ratio" => match self.blue_percent {
                Some(r @ 0..=100) => Op::Ratio(r as u8),
                other => {
                    return bad(format!(
                        "ratio on {channel:?} at {at} needs blue_percent 0..=100, got {other:?}"
                    ));
                }
            },
            "apps" => match &self.apps {
                Some(apps) => Op::Apps(apps.clone()),
                None => return bad(format!("apps op on {channel:?} has no apps list")),
            },
            other => {
                return bad(format!(
                    "op {other:?} is not start, ratio, finish, apps, lane_group_put or \
                     lane_group_delete"
                ));
            }
        };
        Ok(TimelineOp::Channel(id, op))
    }
}

/// The timeline document: `{"channels": [{"id", "apps"}], "events": [...]}` (extra keys such
/// as `description`, `t0_unix_nano` and `t_s` are accepted and ignored, except that
/// `t0_unix_nano` is when an import records the channels' app lists and initial lane groups).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TimelineDoc {
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The reference time of a fixture; when present, imported channel lists apply from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t0_unix_nano: Option<UnixNanos>,
    /// Channels with their apps before the first event.
    pub channels: Vec<TimelineChannel>,
    /// Lane groups in force before the first event (in `GET /api/v1/timeline?from=…`: those
    /// of just before `from`); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lane_groups: Vec<LaneGroup>,
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
/// order (ties keep the document's order), and the lane groups over time.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    initial: Channels,
    points: Vec<(i64, ChannelId, Op, Channels)>,
    lane_groups: LaneGroupTimeline,
}

impl Timeline {
    /// Builds a timeline from a document, in `t_unix_nano` order, ties in document order.
    /// Channel operations are replayed leniently (history is what happened, not a request to
    /// validate); lane group operations are checked against the groups they land on (an app
    /// in two groups at once, or a delete of a group that does not exist, is refused).
    ///
    /// # Errors
    /// [`ReleaseError::InvalidTimeline`] for an event that does not parse
    /// ([`TimelineEvent::to_op`]), an invalid channel id or a refused lane group operation.
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
        let mut group_ops = Vec::new();
        for ev in &doc.events {
            match ev.to_op()? {
                TimelineOp::Channel(id, op) => ops.push((ev.t_unix_nano.0, id, op)),
                TimelineOp::LaneGroup(op) => group_ops.push((ev.t_unix_nano.0, op)),
            }
        }
        ops.sort_by_key(|(t, _, _)| *t);
        group_ops.sort_by_key(|(t, _)| *t);
        let groups = LaneGroupTimeline::checked(initial_lane_groups(doc)?, group_ops)?;
        Ok(Self::from_ops(initial, ops).with_lane_groups(groups))
    }

    /// Builds a timeline from an initial state and channel operations already in time order
    /// (no lane groups: see [`Timeline::with_lane_groups`]).
    pub fn from_ops(initial: Channels, ops: Vec<(i64, ChannelId, Op)>) -> Self {
        let mut points = Vec::with_capacity(ops.len());
        let mut state = initial.clone();
        for (t, id, op) in ops {
            state.apply(&id, &op);
            points.push((t, id, op, state.clone()));
        }
        Timeline {
            initial,
            points,
            lane_groups: LaneGroupTimeline::default(),
        }
    }

    /// This timeline with `lane_groups` as its lane groups over time.
    pub fn with_lane_groups(mut self, lane_groups: LaneGroupTimeline) -> Self {
        self.lane_groups = lane_groups;
        self
    }

    /// The lane groups over time.
    pub fn lane_groups(&self) -> &LaneGroupTimeline {
        &self.lane_groups
    }

    /// The lane group of `app` at `t_unix_nano` (the group as it was then; `None` for an app
    /// in no group): see [`LaneGroupTimeline::group_at`].
    pub fn lane_group_at(&self, app: &str, t_unix_nano: i64) -> Option<&LaneGroup> {
        self.lane_groups.group_at(app, t_unix_nano)
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

    /// The channel operations, in time order: (time, channel, op).
    pub fn ops(&self) -> impl Iterator<Item = (i64, &ChannelId, &Op)> {
        self.points.iter().map(|(t, id, op, _)| (*t, id, op))
    }

    /// True when there are no channel operations.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

/// The document's initial lane groups, in force before its first event.
fn initial_lane_groups(doc: &TimelineDoc) -> Result<LaneGroups, ReleaseError> {
    let mut groups = LaneGroups::new();
    for g in &doc.lane_groups {
        let op = LaneGroupOp::Put(g.clone());
        groups.check(&op).map_err(|e| {
            ReleaseError::InvalidTimeline(format!("initial lane group {:?}: {e}", g.id().as_str()))
        })?;
        groups.apply(&op);
    }
    Ok(groups)
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
            channel: Some("trade".into()),
            op: op.into(),
            blue_percent: bp,
            ..TimelineEvent::bare(1)
        };
        assert!(ev("ratio", Some(101)).to_op().is_err());
        assert!(ev("ratio", None).to_op().is_err());
        assert!(ev("launch", None).to_op().is_err());
        assert!(ev("apps", None).to_op().is_err());
        assert_eq!(
            ev("ratio", Some(0)).to_op().unwrap(),
            TimelineOp::Channel(ChannelId::new("trade").unwrap(), Op::Ratio(0))
        );
        // a channel op without a channel, a lane group op naming one or missing its group
        let no_channel = TimelineEvent {
            channel: None,
            ..ev("start", None)
        };
        assert!(
            no_channel
                .to_op()
                .unwrap_err()
                .to_string()
                .contains("has no channel")
        );
        let put_on_channel = ev("lane_group_put", None);
        assert!(
            put_on_channel
                .to_op()
                .unwrap_err()
                .to_string()
                .contains("names channel")
        );
        let read = |j: &str| serde_json::from_str::<TimelineEvent>(j).unwrap().to_op();
        let t = r#""t_unix_nano": "5""#;
        for bad in [
            format!(r#"{{{t}, "op": "lane_group_put"}}"#),
            format!(r#"{{{t}, "op": "lane_group_put", "lane_group": "mall"}}"#),
            format!(
                r#"{{{t}, "op": "lane_group_delete", "lane_group": {{"id": "m", "apps": []}}}}"#
            ),
            format!(r#"{{{t}, "op": "lane_group_move", "lane_group": "mall"}}"#),
            format!(r#"{{{t}, "channel": "trade", "op": "start", "lane_group": "mall"}}"#),
        ] {
            assert_eq!(read(&bad).unwrap_err().code(), "invalid_timeline", "{bad}");
        }
        // a bad group or id is refused while reading the document, with the group's reason
        for bad in [
            format!(
                r#"{{{t}, "op": "lane_group_put", "lane_group": {{"id": "m", "apps": ["a"], "entry_apps": ["b"]}}}}"#
            ),
            format!(r#"{{{t}, "op": "lane_group_delete", "lane_group": "Mall"}}"#),
            format!(r#"{{{t}, "op": "lane_group_delete", "lane_group": 7}}"#),
        ] {
            assert!(
                serde_json::from_str::<TimelineEvent>(&bad).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn lane_group_events_read_and_write_the_fixture_format() {
        let text = r#"{"t_unix_nano": "1735812000000000000", "t_s": 0, "op": "lane_group_put",
            "lane_group": {"id": "mall", "apps": ["gateway", "order"], "entry_apps": ["gateway"],
            "lanes": {"gray": {"fallback": "base"}, "gray2": {"fallback": "none"}},
            "reverse_fallback": false}}"#;
        let ev: TimelineEvent = serde_json::from_str(text).unwrap();
        let TimelineOp::LaneGroup(op) = ev.to_op().unwrap() else {
            panic!("a lane group op");
        };
        let LaneGroupOp::Put(g) = &op else {
            panic!("a put");
        };
        assert_eq!(g.apps(), ["gateway", "order"]);
        let back =
            serde_json::to_value(TimelineEvent::of_lane_group(1735812000000000000, &op)).unwrap();
        let mut want: serde_json::Value = serde_json::from_str(text).unwrap();
        want.as_object_mut().unwrap().remove("t_s");
        assert_eq!(back, want);
        let del = r#"{"t_unix_nano": "9", "op": "lane_group_delete", "lane_group": "promo"}"#;
        let ev: TimelineEvent = serde_json::from_str(del).unwrap();
        let TimelineOp::LaneGroup(op) = ev.to_op().unwrap() else {
            panic!("a delete");
        };
        assert_eq!(op, LaneGroupOp::Delete(LaneGroupId::new("promo").unwrap()));
        assert_eq!(
            serde_json::to_value(TimelineEvent::of_lane_group(9, &op)).unwrap(),
            serde_json::from_str::<serde_json::Value>(del).unwrap()
        );
    }
}
