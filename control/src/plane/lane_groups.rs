//! Lane groups in the control plane (domain §7.1): validated, versioned, persisted puts and
//! deletes, numbered in the same operation sequence as the channel operations (so
//! [`ControlPlane::latest_seq`] moves with them and every change is in the op log with its
//! actor), the groups now, and their history as the timeline's [`LaneGroupTimeline`]. The
//! rules are the model's ([`LaneGroups::check`]); this file persists them.
//!
//! In the store's operation log a lane group operation is a row with `op` `lane_group_put`
//! (the group as JSON in `lane_group`) or `lane_group_delete`, its group id as the subject
//! (SQLite: the `channel` column, migration 0003); the lane groups' table holds each group's
//! current body and version.

use dyeline_model::release::{
    LaneGroup, LaneGroupId, LaneGroupOp, LaneGroupTimeline, LaneGroups, ReleaseError,
};
use dyeline_model::time::now_unix_nano;
use serde::Serialize;
use utoipa::ToSchema;

use super::ControlPlane;
use crate::error::ControlError;
use crate::record::LaneGroupRecord;
use crate::store::{Guard, OpRow, Stored};

/// The lane group operations recorded so far and the groups they leave.
#[derive(Default)]
pub(super) struct LaneGroupHistory {
    pub(super) records: Vec<LaneGroupRecord>,
    pub(super) current: LaneGroups,
}

impl LaneGroupHistory {
    /// Appends `rec`, applying it to the current groups.
    pub(super) fn push(&mut self, rec: LaneGroupRecord) {
        self.current.apply(&rec.op);
        self.records.push(rec);
    }

    /// The recorded operations as a timeline, in time order (ties in sequence order).
    pub(super) fn timeline(&self) -> LaneGroupTimeline {
        let mut recs: Vec<&LaneGroupRecord> = self.records.iter().collect();
        recs.sort_by_key(|r| (r.t_unix_nano, r.seq));
        LaneGroupTimeline::from_ops(
            LaneGroups::new(),
            recs.into_iter()
                .map(|r| (r.t_unix_nano, r.op.clone()))
                .collect(),
        )
    }
}

/// A lane group as the API serves it: the group's fields and its `version` (the `ETag`).
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct LaneGroupState {
    /// The group.
    #[serde(flatten)]
    pub group: LaneGroup,
    /// Incremented by every put since the group was created; the `ETag` / `If-Match` value.
    pub version: u64,
}

/// The result of an accepted lane group write.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct LaneGroupWrite {
    /// The operation's sequence number.
    pub seq: u64,
    /// The group after it (absent after a delete).
    pub lane_group: Option<LaneGroupState>,
}

fn state_of(groups: &LaneGroups, id: &str) -> Option<LaneGroupState> {
    groups.get(id).map(|g| LaneGroupState {
        group: LaneGroup::clone(g),
        version: groups.version(id),
    })
}

impl ControlPlane {
    /// Every lane group now, in id order.
    pub fn lane_groups(&self) -> Vec<LaneGroupState> {
        let h = self.history.read();
        let groups = &h.lane_groups.current;
        groups
            .iter()
            .filter_map(|(g, _)| state_of(groups, g.id().as_str()))
            .collect()
    }

    /// One lane group now.
    ///
    /// # Errors
    /// [`ReleaseError::InvalidLaneGroupId`], [`ReleaseError::LaneGroupNotFound`].
    pub fn lane_group(&self, id: &str) -> Result<LaneGroupState, ControlError> {
        let id = LaneGroupId::new(id)?;
        state_of(&self.history.read().lane_groups.current, id.as_str())
            .ok_or_else(|| ReleaseError::LaneGroupNotFound(id.to_string()).into())
    }

    /// The lane group holding `app` now, if any.
    pub fn lane_group_of(&self, app: &str) -> Option<LaneGroupState> {
        let h = self.history.read();
        let groups = &h.lane_groups.current;
        let id = groups.group_of(app)?.id().clone();
        state_of(groups, id.as_str())
    }

    /// Every recorded lane group operation in sequence order (live and imported, with actor),
    /// or only those of group `id` when given.
    pub fn lane_group_records(&self, id: Option<&str>) -> Vec<LaneGroupRecord> {
        self.history
            .read()
            .lane_groups
            .records
            .iter()
            .filter(|r| id.is_none_or(|id| r.op.id().as_str() == id))
            .cloned()
            .collect()
    }

    /// Validates and applies `op` as `actor` (a put creates or wholly replaces its group, a
    /// delete removes it), records it durably with the next sequence number, and notifies
    /// subscribers. With `if_match`, the group's version must equal it (0 for a group that
    /// does not exist yet).
    ///
    /// # Errors
    /// [`ReleaseError::LaneGroupNotFound`] (404: a delete of a group that does not exist),
    /// [`ControlError::LaneGroupVersionMismatch`] (412),
    /// [`ReleaseError::AppInOtherLaneGroup`] (409), [`ControlError::Storage`]. A refused
    /// write records nothing and consumes no sequence number.
    pub async fn write_lane_group(
        &self,
        op: LaneGroupOp,
        actor: &str,
        if_match: Option<u64>,
    ) -> Result<LaneGroupWrite, ControlError> {
        self.writable()?;
        let _guard = self.write.lock().await;
        let mut tx = self.store.begin().await?;
        self.catch_up(&mut *tx).await?;
        let current = self.history.read().lane_groups.current.clone();
        let id = op.id().clone();
        if matches!(op, LaneGroupOp::Delete(_)) && current.get(id.as_str()).is_none() {
            return Err(ReleaseError::LaneGroupNotFound(id.to_string()).into());
        }
        if let Some(expected) = if_match {
            let actual = current.version(id.as_str());
            if actual != expected {
                return Err(ControlError::LaneGroupVersionMismatch {
                    lane_group: id.to_string(),
                    expected,
                    actual,
                });
            }
        }
        current.check(&op)?;
        let mut rec = LaneGroupRecord {
            seq: 0,
            t_unix_nano: now_unix_nano(),
            op,
            actor: actor.to_owned(),
            imported: false,
            note: None,
        };
        let version = current.version(id.as_str());
        let mut next = current;
        next.apply(&rec.op);
        rec.seq = tx.insert(OpRow::of_lane_group(&rec)?).await?;
        if let Stored::Stale { actual } = tx
            .store_lane_group(&id, stored_group(&next, &id), Guard::Version(version))
            .await?
        {
            return Err(ControlError::LaneGroupVersionMismatch {
                lane_group: id.to_string(),
                expected: if_match.unwrap_or(version),
                actual,
            });
        }
        tx.commit().await?;
        let seq = rec.seq;
        let op_name = rec.op.name();
        self.record_own_lane_group(rec);
        tracing::info!(seq, lane_group = %id, op = op_name, actor, "control operation");
        Ok(LaneGroupWrite {
            seq,
            lane_group: state_of(&next, id.as_str()),
        })
    }
}

/// Group `id` as it is in `groups`, with its version: what its row holds (`None`: no row).
pub(super) fn stored_group<'a>(
    groups: &'a LaneGroups,
    id: &LaneGroupId,
) -> Option<(&'a LaneGroup, u64)> {
    groups
        .get(id.as_str())
        .map(|g| (g.as_ref(), groups.version(id.as_str())))
}

impl ControlPlane {
    /// Adds this node's own committed lane group operation (unless the follower read it
    /// back first).
    fn record_own_lane_group(&self, rec: LaneGroupRecord) {
        let mut h = self.history.write();
        if rec.seq <= h.latest {
            return;
        }
        let seq = rec.seq;
        h.lane_groups.push(rec);
        h.latest = seq;
        self.notify(seq);
    }
}
