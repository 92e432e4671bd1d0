//! Where the control plane's operations are kept: the [`Store`] port and its two adapters,
//! [`sqlite`] (one file in the data directory, the single-node default) and [`postgres`] (one
//! database shared by every node of a cluster, with `LISTEN/NOTIFY` wake-ups).
//!
//! A store holds the operation log (the source of truth: every accepted operation with its
//! sequence number) and, rewritten in the same transaction as each operation, the current row
//! of each channel and lane group. It does not own the rules (the model's), the in-memory
//! history and event streams ([`crate::plane`]), nor what a refused write answers.
//!
//! A write is a [`WriteTx`]: begun holding the store's writer lock (PostgreSQL: the counter
//! row `control_seq`, so writers of every node take turns), it reads what other writers
//! committed since the caller's latest sequence number (the caller applies those before it
//! validates), inserts operations with the next sequence numbers, rewrites rows guarded by
//! the version the caller validated against, and commits (PostgreSQL: with a `NOTIFY`).

use async_trait::async_trait;
use dyeline_model::ChannelId;
use dyeline_model::release::{Channel, LaneGroup, LaneGroupId, LaneGroupOp, Op};
use tokio::sync::watch;

use crate::error::ControlError;
use crate::record::{LaneGroupRecord, OpRecord};

pub(crate) mod postgres;
pub(crate) mod sqlite;

/// One recorded operation as read back: a channel's or a lane group's.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum StoredOp {
    /// A channel operation.
    Channel(OpRecord),
    /// A lane group operation.
    LaneGroup(LaneGroupRecord),
}

impl StoredOp {
    /// Its sequence number.
    pub(crate) fn seq(&self) -> u64 {
        match self {
            StoredOp::Channel(r) => r.seq,
            StoredOp::LaneGroup(r) => r.seq,
        }
    }
}

/// One operation row as the database gives it (the subject is the channel or the lane
/// group's id), before it is checked and turned into a [`StoredOp`].
pub(crate) struct StoredRow {
    pub(crate) seq: i64,
    pub(crate) t_unix_nano: i64,
    pub(crate) subject: String,
    pub(crate) op: String,
    pub(crate) blue_percent: Option<i64>,
    pub(crate) apps: Option<String>,
    pub(crate) lane_group: Option<String>,
    pub(crate) actor: String,
    pub(crate) imported: bool,
    pub(crate) note: Option<String>,
}

impl StoredRow {
    /// The operation this row records.
    ///
    /// # Errors
    /// [`ControlError::Storage`] for a row no version of Dyeline writes.
    pub(crate) fn decode(self) -> Result<StoredOp, ControlError> {
        let seq = u64::try_from(self.seq)
            .map_err(|_| ControlError::Storage(format!("stored op has seq {}", self.seq)))?;
        if self.op.starts_with("lane_group_") {
            return Ok(StoredOp::LaneGroup(LaneGroupRecord {
                seq,
                t_unix_nano: self.t_unix_nano,
                op: lane_group_op_from_row(&self.op, &self.subject, self.lane_group.as_deref())?,
                actor: self.actor,
                imported: self.imported,
                note: self.note,
            }));
        }
        let channel = ChannelId::new(&self.subject)
            .map_err(|_| ControlError::Storage(format!("stored channel {:?}", self.subject)))?;
        Ok(StoredOp::Channel(OpRecord {
            seq,
            t_unix_nano: self.t_unix_nano,
            channel,
            op: op_from_columns(&self.op, self.blue_percent, self.apps)?,
            actor: self.actor,
            imported: self.imported,
            note: self.note,
        }))
    }
}

/// One row to insert: a channel operation (`subject` the channel, `blue_percent` or `apps`)
/// or a lane group operation (`subject` the group, `lane_group` the put group's JSON).
pub(crate) struct OpRow<'a> {
    pub(crate) t_unix_nano: i64,
    pub(crate) subject: &'a str,
    pub(crate) op: &'static str,
    pub(crate) blue_percent: Option<i64>,
    pub(crate) apps: Option<String>,
    pub(crate) lane_group: Option<String>,
    pub(crate) actor: &'a str,
    pub(crate) imported: bool,
    pub(crate) note: Option<&'a str>,
}

impl<'a> OpRow<'a> {
    /// The row of channel operation `rec`.
    pub(crate) fn of_channel(rec: &'a OpRecord) -> Self {
        let (blue_percent, apps) = match &rec.op {
            Op::Ratio(r) => (Some(i64::from(*r)), None),
            Op::Apps(a) => (
                None,
                Some(serde_json::to_string(a).expect("strings serialize")),
            ),
            _ => (None, None),
        };
        OpRow {
            t_unix_nano: rec.t_unix_nano,
            subject: rec.channel.as_str(),
            op: rec.op.name(),
            blue_percent,
            apps,
            lane_group: None,
            actor: &rec.actor,
            imported: rec.imported,
            note: rec.note.as_deref(),
        }
    }

    /// The row of lane group operation `rec`.
    ///
    /// # Errors
    /// [`ControlError::Storage`] when the group does not serialize.
    pub(crate) fn of_lane_group(rec: &'a LaneGroupRecord) -> Result<Self, ControlError> {
        let body = match &rec.op {
            LaneGroupOp::Put(g) => Some(group_json(g)?),
            LaneGroupOp::Delete(_) => None,
        };
        Ok(OpRow {
            t_unix_nano: rec.t_unix_nano,
            subject: rec.op.id().as_str(),
            op: rec.op.name(),
            blue_percent: None,
            apps: None,
            lane_group: body,
            actor: &rec.actor,
            imported: rec.imported,
            note: rec.note.as_deref(),
        })
    }
}

/// A lane group as stored: its JSON (the timeline's `lane_group` object).
pub(crate) fn group_json(g: &LaneGroup) -> Result<String, ControlError> {
    serde_json::to_string(g)
        .map_err(|e| ControlError::Storage(format!("lane group {:?}: {e}", g.id().as_str())))
}

/// A channel's apps as stored (a JSON array).
pub(crate) fn apps_json(c: &Channel) -> String {
    serde_json::to_string(&c.apps).expect("strings serialize")
}

/// How a row rewrite is checked against what the database holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Guard {
    /// The row must be at this version (0: it must not exist) for the rewrite to happen.
    Version(u64),
    /// Written whatever the row holds (an import, which computed every state under the
    /// writer lock itself).
    None,
}

/// What a guarded rewrite did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stored {
    /// Written.
    Done,
    /// Not written: the row is at version `actual` (0: it does not exist), not the guard's.
    Stale {
        /// The version the database holds.
        actual: u64,
    },
}

/// The operation log and current rows (see the module's documentation).
#[async_trait]
pub(crate) trait Store: Send + Sync {
    /// Every recorded operation with a sequence number above `after`, in sequence order.
    async fn ops_after(&self, after: u64) -> Result<Vec<StoredOp>, ControlError>;

    /// Whether sequence numbers come without gaps (PostgreSQL's counter row), so a read that
    /// skips one is wrong; SQLite's `AUTOINCREMENT` numbers are only increasing.
    fn gap_free(&self) -> bool;

    /// Begins a write, holding the writer lock until commit or drop (a drop rolls back).
    async fn begin(&self) -> Result<Box<dyn WriteTx>, ControlError>;

    /// Bumped whenever another writer may have committed operations (a notification, and
    /// every (re)connection of the listener, after which notifications may have been
    /// missed). `None` when nobody else writes (SQLite).
    fn wake_ups(&self) -> Option<watch::Receiver<u64>>;

    /// Closes the connections (and stops any listener).
    async fn close(&self);
}

/// A write in progress (see the module's documentation). Dropped without
/// [`WriteTx::commit`], it records nothing.
#[async_trait]
pub(crate) trait WriteTx: Send {
    /// The newest sequence number committed, read under the writer lock (PostgreSQL's
    /// counter row); `None` when the store does not keep one (SQLite numbers rows itself).
    fn committed_seq(&self) -> Option<u64>;

    /// The operations committed with a sequence number above `after`, in sequence order,
    /// as this transaction sees them.
    async fn ops_after(&mut self, after: u64) -> Result<Vec<StoredOp>, ControlError>;

    /// Inserts `row` with the next sequence number; that number.
    async fn insert(&mut self, row: OpRow<'_>) -> Result<u64, ControlError>;

    /// Rewrites channel `id`'s row as `channel` (deletes it for `None`), if `guard` holds.
    async fn store_channel(
        &mut self,
        id: &ChannelId,
        channel: Option<&Channel>,
        guard: Guard,
    ) -> Result<Stored, ControlError>;

    /// Rewrites lane group `id`'s row as `group` at its version (deletes it for `None`), if
    /// `guard` holds.
    async fn store_lane_group(
        &mut self,
        id: &LaneGroupId,
        group: Option<(&LaneGroup, u64)>,
        guard: Guard,
    ) -> Result<Stored, ControlError>;

    /// Commits (PostgreSQL: and notifies every node's listener).
    async fn commit(self: Box<Self>) -> Result<(), ControlError>;
}

/// Reads a stored channel operation from its columns.
fn op_from_columns(
    name: &str,
    blue_percent: Option<i64>,
    apps: Option<String>,
) -> Result<Op, ControlError> {
    let bad = |what: &str| ControlError::Storage(format!("stored op is corrupt: {what}"));
    Ok(match name {
        "start" => Op::Start,
        "finish" => Op::Finish,
        "delete" => Op::Delete,
        "ratio" => Op::Ratio(
            blue_percent
                .and_then(|r| u8::try_from(r).ok())
                .filter(|r| *r <= 100)
                .ok_or_else(|| bad("ratio without blue_percent"))?,
        ),
        "apps" => Op::Apps(
            serde_json::from_str(apps.as_deref().ok_or_else(|| bad("apps without list"))?)
                .map_err(|_| bad("apps list is not JSON"))?,
        ),
        other => return Err(bad(other)),
    })
}

/// Reads a stored lane group operation: `op`, the group's id, the group's JSON for a put.
fn lane_group_op_from_row(
    name: &str,
    id: &str,
    body: Option<&str>,
) -> Result<LaneGroupOp, ControlError> {
    let bad =
        |what: String| ControlError::Storage(format!("stored lane group op is corrupt: {what}"));
    match name {
        "lane_group_put" => {
            let body = body.ok_or_else(|| bad(format!("put of {id:?} without a group")))?;
            serde_json::from_str(body)
                .map(LaneGroupOp::Put)
                .map_err(|e| bad(format!("{id:?}: {e}")))
        }
        "lane_group_delete" => LaneGroupId::new(id)
            .map(LaneGroupOp::Delete)
            .map_err(|e| bad(e.to_string())),
        other => Err(bad(other.to_owned())),
    }
}
