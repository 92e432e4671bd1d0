//! `dyeline import --timeline`: a timeline document recorded as the control plane's history,
//! its channel operations and its lane group operations in one time order, each checked
//! against the state it lands on, all in one transaction.

use dyeline_model::ChannelId;
use dyeline_model::release::{
    Channels, LaneGroupOp, Op, ReleaseError, TimelineDoc, TimelineOp, normalize_apps,
};
use dyeline_model::time::now_unix_nano;
use serde::Serialize;

use super::lane_groups::stored_group;
use super::{ControlPlane, OpRecord, normalize_note, parse_id};
use crate::error::ControlError;
use crate::record::LaneGroupRecord;
use crate::store::{Guard, OpRow, StoredOp};

/// What an import recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ImportReport {
    /// Channel operations recorded.
    pub recorded: usize,
    /// Lane group operations recorded.
    pub lane_group_recorded: usize,
    /// Operations already present (same time, subject and op) and skipped, so a re-import
    /// changes nothing.
    pub skipped: usize,
}

/// One operation to record.
enum Rec {
    Channel(OpRecord),
    LaneGroup(LaneGroupRecord),
}

/// An operation of the document, where it comes from.
struct Planned {
    t: i64,
    op: TimelineOp,
    note: Option<String>,
    /// One of the document's initial channel lists or lane groups: skipped when equal to
    /// the current state.
    initial: bool,
}

impl ControlPlane {
    /// Records a timeline document as history (`dyeline import --timeline`): the channels'
    /// app lists and the initial lane groups (at `t0_unix_nano`, else the first event's
    /// time), then the events in time order (ties in document order), each validated
    /// against the state it lands on (domain §4; §7.1: an app in at most one lane group, a
    /// deleted group must exist), with actor `import` and the event's `note` if it has one.
    /// Operations already present (same time, subject and op; notes are not compared), and
    /// initial app lists or groups equal to the current ones, are skipped, so importing the
    /// same timeline twice changes nothing. All or nothing: one transaction, holding the
    /// writer lock, checked against the operations committed before it (PostgreSQL: by any
    /// node). Live stream subscribers of this plane are not notified (other nodes on
    /// PostgreSQL follow it like any write).
    ///
    /// # Errors
    /// [`ReleaseError::InvalidTimeline`] naming the first event that does not parse or is
    /// refused, or whose note is over [`super::NOTE_MAX_CHARS`] characters;
    /// [`ControlError::Storage`].
    pub async fn import(&self, doc: &TimelineDoc) -> Result<ImportReport, ControlError> {
        self.writable()?;
        let _guard = self.write.lock().await;
        let planned = plan(doc)?;
        let mut tx = self.store.begin().await?;
        self.catch_up(&mut *tx).await?;
        let (mut channels, mut groups, existing, existing_groups) = {
            let h = self.history.read();
            (
                (*h.current).clone(),
                h.lane_groups.current.clone(),
                h.entries
                    .iter()
                    .map(|e| (e.rec.t_unix_nano, e.rec.channel.clone(), e.rec.op.clone()))
                    .collect::<Vec<_>>(),
                h.lane_groups
                    .records
                    .iter()
                    .map(|r| (r.t_unix_nano, r.op.clone()))
                    .collect::<Vec<_>>(),
            )
        };
        let mut report = ImportReport::default();
        let mut recs = Vec::new();
        for (i, p) in planned.into_iter().enumerate() {
            let (t, note) = (p.t, p.note);
            match p.op {
                TimelineOp::Channel(id, op) => {
                    // Already recorded: the same op on the same channel at the same time (so
                    // a timeline imported twice, or exported by this server and imported
                    // back, adds nothing); or an app list equal to the channel's current one.
                    let normalized = match &op {
                        Op::Apps(apps) => {
                            Op::Apps(normalize_apps(apps.clone()).unwrap_or_default())
                        }
                        other => other.clone(),
                    };
                    let recorded = existing
                        .iter()
                        .any(|(et, eid, eop)| *et == t && *eid == id && *eop == normalized);
                    let same_apps = matches!(&normalized, Op::Apps(apps)
                        if channels.get(id.as_str()).is_some_and(|c| &c.apps == apps));
                    if recorded || same_apps {
                        report.skipped += 1;
                        continue;
                    }
                    check_channel_op(&channels, i, t, &id, &op)?;
                    channels.apply(&id, &op);
                    recs.push(Rec::Channel(OpRecord {
                        seq: 0,
                        t_unix_nano: t,
                        channel: id,
                        op,
                        actor: "import".into(),
                        imported: true,
                        note,
                    }));
                }
                TimelineOp::LaneGroup(op) => {
                    let recorded = existing_groups
                        .iter()
                        .any(|(et, eop)| *et == t && *eop == op);
                    let same = p.initial
                        && matches!(&op, LaneGroupOp::Put(g)
                            if groups.get(g.id().as_str()).is_some_and(|c| c.as_ref() == g));
                    if recorded || same {
                        report.skipped += 1;
                        continue;
                    }
                    groups.check(&op).map_err(|e| {
                        ReleaseError::InvalidTimeline(format!(
                            "event {i} ({} of lane group {} at {t}): {e}",
                            op.name(),
                            op.id()
                        ))
                    })?;
                    groups.apply(&op);
                    recs.push(Rec::LaneGroup(LaneGroupRecord {
                        seq: 0,
                        t_unix_nano: t,
                        op,
                        actor: "import".into(),
                        imported: true,
                        note,
                    }));
                }
            }
        }
        // Each row is written as the import leaves it, unguarded: every state was computed
        // above from the operations committed before this transaction, under its lock.
        let mut stored = Vec::with_capacity(recs.len());
        for rec in recs {
            match rec {
                Rec::Channel(mut rec) => {
                    rec.seq = tx.insert(OpRow::of_channel(&rec)).await?;
                    tx.store_channel(
                        &rec.channel,
                        channels.get(rec.channel.as_str()),
                        Guard::None,
                    )
                    .await?;
                    report.recorded += 1;
                    stored.push(StoredOp::Channel(rec));
                }
                Rec::LaneGroup(mut rec) => {
                    rec.seq = tx.insert(OpRow::of_lane_group(&rec)?).await?;
                    let id = rec.op.id().clone();
                    tx.store_lane_group(&id, stored_group(&groups, &id), Guard::None)
                        .await?;
                    report.lane_group_recorded += 1;
                    stored.push(StoredOp::LaneGroup(rec));
                }
            }
        }
        tx.commit().await?;
        self.absorb(stored, false)?;
        Ok(report)
    }
}

/// The document's operations in the order they are recorded: the channels' app lists and
/// the initial lane groups, then the events in time order (ties in document order).
fn plan(doc: &TimelineDoc) -> Result<Vec<Planned>, ControlError> {
    let mut events = Vec::with_capacity(doc.events.len());
    for ev in &doc.events {
        let op = ev.to_op()?;
        let t = ev.t_unix_nano.0;
        let note = normalize_note(ev.note.as_deref()).map_err(|e| {
            let on = match &op {
                TimelineOp::Channel(id, _) => format!("on {id}"),
                TimelineOp::LaneGroup(g) => format!("of lane group {}", g.id()),
            };
            ReleaseError::InvalidTimeline(format!("{} {on} at {t}: {e}", op.name()))
        })?;
        events.push(Planned {
            t,
            op,
            note,
            initial: false,
        });
    }
    events.sort_by_key(|p| p.t);
    let t_initial = doc
        .t0_unix_nano
        .map(|t| t.0)
        .or_else(|| events.first().map(|e| e.t))
        .unwrap_or_else(now_unix_nano);
    let initial = |op| Planned {
        t: t_initial,
        op,
        note: None,
        initial: true,
    };
    let mut planned = Vec::with_capacity(events.len() + doc.channels.len());
    for ch in &doc.channels {
        let id = parse_id(&ch.id)
            .map_err(|_| ReleaseError::InvalidTimeline(format!("channel id {:?}", ch.id)))?;
        if !id.is_global() {
            planned.push(initial(TimelineOp::Channel(id, Op::Apps(ch.apps.clone()))));
        }
    }
    for g in &doc.lane_groups {
        planned.push(initial(TimelineOp::LaneGroup(LaneGroupOp::Put(g.clone()))));
    }
    planned.extend(events);
    Ok(planned)
}

/// Checks channel op `op` (event `i` at `t`) against `channels`: the channel must be in the
/// document (an `apps` op creates it), and the op allowed in its state.
fn check_channel_op(
    channels: &Channels,
    i: usize,
    t: i64,
    id: &ChannelId,
    op: &Op,
) -> Result<(), ReleaseError> {
    if channels.get(id.as_str()).is_none() && !matches!(op, Op::Apps(_)) {
        return Err(ReleaseError::InvalidTimeline(format!(
            "event {i} ({} on {id} at {t}): channel {id:?} is not in the timeline's channels",
            op.name()
        )));
    }
    channels.check(id, op).map_err(|e| {
        ReleaseError::InvalidTimeline(format!("event {i} ({} on {id} at {t}): {e}", op.name()))
    })
}
