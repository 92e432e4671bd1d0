//! The control plane service: validated, versioned, persisted channel operations
//! (domain §4), the per-app and per-channel event streams numbered by operation, the timeline
//! document and the [`Timeline`] of every operation. Lane group operations (domain §7.1, same
//! sequence) are [`lane_groups`]'s; the offline import of a timeline is [`import`]'s. A
//! [`Store`] holds every operation: one SQLite file (`control.db` in the data dir, the
//! default) or PostgreSQL shared by the nodes of a cluster. The in-memory history is rebuilt
//! from it at open and extended strictly in sequence order: by this node's writes, by the
//! operations other nodes committed (read back inside each write, before validating, and
//! after every wake-up of the PostgreSQL listener, [`follow`]).

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use dyeline_model::ChannelId;
use dyeline_model::release::{
    Channel, Channels, Effective, EventBody, EventKind, NEUTRAL_BLUE_PERCENT, Op, ReleaseError,
    Timeline, TimelineChannel, TimelineDoc, TimelineEvent, app_events, channel_events,
    normalize_apps,
};

mod follow;
mod import;
pub mod lane_groups;

pub use crate::record::{LaneGroupRecord, OpRecord};
use dyeline_model::time::{now_unix_nano, rfc3339};
pub use import::ImportReport;
pub use lane_groups::{LaneGroupState, LaneGroupWrite};
use parking_lot::RwLock;
use serde::Serialize;
use tokio::sync::{Mutex, watch};
use utoipa::ToSchema;

use crate::alerts::{FiringAlert, SharedFiringAlerts, SpikeRefusal};
use crate::error::ControlError;
use crate::store::postgres::PgStore;
pub use crate::store::sqlite::DB_FILE;
use crate::store::sqlite::SqliteStore;
use crate::store::{Guard, OpRow, Store, Stored, StoredOp, WriteTx};

/// The longest note an operation may carry, in characters (Unicode scalar values) after
/// trimming.
pub const NOTE_MAX_CHARS: usize = 500;

/// Normalizes an operation's note: surrounding whitespace trimmed; absent, empty or
/// whitespace-only → `None`.
///
/// # Errors
/// [`ControlError::InvalidNote`] (400 `invalid_note`) when the trimmed note is longer than
/// [`NOTE_MAX_CHARS`] characters.
pub fn normalize_note(note: Option<&str>) -> Result<Option<String>, ControlError> {
    let Some(text) = note.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let chars = text.chars().count();
    if chars > NOTE_MAX_CHARS {
        return Err(ControlError::InvalidNote(format!(
            "note is {chars} characters long; at most {NOTE_MAX_CHARS} are allowed"
        )));
    }
    Ok(Some(text.to_owned()))
}

struct Entry {
    rec: OpRecord,
    before: Arc<Channels>,
    after: Arc<Channels>,
}

#[derive(Default)]
struct History {
    /// Channel operations, in sequence order.
    entries: Vec<Entry>,
    current: Arc<Channels>,
    /// Lane group operations (their sequence numbers interleave with `entries`').
    lane_groups: lane_groups::LaneGroupHistory,
    /// The newest sequence number applied, channel or lane group (0: none).
    latest: u64,
}

/// A numbered event of an app's or a channel's stream (domain §4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct Event {
    /// `"<seq>.<n>"`: the operation's sequence number and the event's index among that
    /// operation's events on this stream, from 0. The SSE `id`.
    pub id: String,
    /// The operation's sequence number.
    pub seq: u64,
    /// The operation's time, RFC 3339 UTC.
    pub time: String,
    /// The event kind.
    pub event: EventKind,
    /// The channel it comes from.
    #[schema(value_type = String)]
    pub channel: ChannelId,
    /// Flow changes only: blue_percent before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<u8>,
    /// Flow changes only: blue_percent after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<u8>,
    /// Flow changes only: true when replayed after a switch of channel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<bool>,
    /// The operation's note (free text, at most [`NOTE_MAX_CHARS`] characters), on every
    /// event of that operation; absent when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A position in a stream: after event `n` of operation `seq`. `n = u32::MAX` means after
/// every event of `seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Cursor {
    /// Operation sequence number (0: before everything).
    pub seq: u64,
    /// Event index within it.
    pub n: u32,
}

impl Cursor {
    /// After every event of operation `seq`.
    pub fn after_seq(seq: u64) -> Self {
        Cursor { seq, n: u32::MAX }
    }
}

impl FromStr for Cursor {
    type Err = ControlError;
    /// `"<seq>.<n>"` (an event id) or `"<seq>"`.
    fn from_str(s: &str) -> Result<Self, ControlError> {
        let bad = || ControlError::InvalidQuery(format!("{s:?} is not an event id like 12.0"));
        match s.trim().split_once('.') {
            Some((a, b)) => Ok(Cursor {
                seq: a.parse().map_err(|_| bad())?,
                n: b.parse().map_err(|_| bad())?,
            }),
            None => Ok(Cursor::after_seq(s.trim().parse().map_err(|_| bad())?)),
        }
    }
}

/// The result of an accepted write.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct WriteOutcome {
    /// The operation's sequence number.
    pub seq: u64,
    /// The channel after it (absent after a delete).
    pub channel: Option<Channel>,
    /// With `force`: the alert the spike guard would have refused the write for (the write
    /// went ahead and its note says so). Absent when nothing was overridden.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forced_past: Option<FiringAlert>,
}

fn number(bodies: Vec<EventBody>, rec: &OpRecord, after: Cursor) -> Vec<Event> {
    bodies
        .into_iter()
        .enumerate()
        .filter(|(n, _)| {
            Cursor {
                seq: rec.seq,
                n: *n as u32,
            } > after
        })
        .map(|(n, b)| Event {
            id: format!("{}.{}", rec.seq, n),
            seq: rec.seq,
            time: rfc3339(rec.t_unix_nano),
            event: b.event,
            channel: b.channel,
            from: b.flow.map(|f| f.0),
            to: b.flow.map(|f| f.1),
            replay: b.flow.map(|f| f.2),
            note: rec.note.clone(),
        })
        .collect()
}

/// The control plane: channels, operations and event streams over a [`Store`].
pub struct ControlPlane {
    store: Box<dyn Store>,
    /// This node's writers take turns (PostgreSQL's counter row makes the nodes take turns).
    write: Mutex<()>,
    history: RwLock<History>,
    latest: watch::Sender<u64>,
    read_only: bool,
    /// Set by [`ControlPlane::close`]: the follower stops.
    closed: watch::Sender<bool>,
    /// The alerts the spike guard and the gate read ([`ControlPlane::set_firing_alerts`]);
    /// none until wired.
    alerts: std::sync::OnceLock<SharedFiringAlerts>,
}

impl ControlPlane {
    /// Opens (creating and migrating if needed) `data_dir/control.db` and replays its
    /// operations.
    ///
    /// # Errors
    /// [`ControlError::Storage`] when the file cannot be opened, migrated or read.
    pub async fn open(data_dir: &Path) -> Result<Self, ControlError> {
        Self::load(Box::new(SqliteStore::open(data_dir).await?), false).await
    }

    /// Opens `data_dir/control.db` read-only (for `dyeline analyze` and `sql` beside a
    /// running server). A data dir without one has no operations.
    ///
    /// # Errors
    /// [`ControlError::Storage`] when the file exists but cannot be read.
    pub async fn open_read_only(data_dir: &Path) -> Result<Self, ControlError> {
        Self::load(Box::new(SqliteStore::open_read_only(data_dir).await?), true).await
    }

    /// Opens the control plane in the PostgreSQL database at `url` (`[control]
    /// postgres_url`; errors show it as `label`, which must not hold the password), creating
    /// and migrating its schema if needed, replays its operations, and follows the other
    /// nodes' writes: after every notification and every reconnection of its listener, and
    /// every `poll` as a safety net, it re-reads the operations by sequence.
    ///
    /// # Errors
    /// [`ControlError::Storage`] when the database cannot be reached, migrated or read.
    pub async fn open_postgres(
        url: &str,
        label: &str,
        poll: std::time::Duration,
    ) -> Result<Arc<Self>, ControlError> {
        let store = PgStore::connect(url, label, true).await?;
        let wake = store.wake_ups();
        let plane = Arc::new(Self::load(Box::new(store), false).await?);
        if let Some(wake) = wake {
            follow::spawn(&plane, wake, poll);
        }
        Ok(plane)
    }

    /// Opens the control plane in PostgreSQL read-only (for `dyeline analyze` and `sql`): its
    /// operations as they are now, no follower, writes refused.
    ///
    /// # Errors
    /// [`ControlError::Storage`] when the database cannot be reached or read.
    pub async fn open_postgres_read_only(url: &str, label: &str) -> Result<Self, ControlError> {
        Self::load(Box::new(PgStore::connect(url, label, false).await?), true).await
    }

    pub(crate) async fn load(store: Box<dyn Store>, read_only: bool) -> Result<Self, ControlError> {
        let ops = store.ops_after(0).await?;
        let (latest, _) = watch::channel(0);
        let plane = ControlPlane {
            store,
            write: Mutex::new(()),
            history: RwLock::new(History::default()),
            latest,
            read_only,
            closed: watch::channel(false).0,
            alerts: std::sync::OnceLock::new(),
        };
        plane.absorb(ops, true)?;
        Ok(plane)
    }

    /// Applies `ops` (read from the store, in sequence order) that follow the history: those
    /// at or below its newest sequence number are already applied (e.g. this node's own
    /// write read back) and skipped. On a store that numbers without gaps, the rest must
    /// continue it one by one; the first that does not stops the application (a later read
    /// starts from there). With `notify`, stream subscribers are told.
    ///
    /// # Errors
    /// [`ControlError::Storage`] naming the gap.
    fn absorb(&self, ops: Vec<StoredOp>, notify: bool) -> Result<usize, ControlError> {
        let gap_free = self.store.gap_free();
        let mut h = self.history.write();
        let mut applied = 0;
        let mut gap = None;
        for op in ops {
            let seq = op.seq();
            if seq <= h.latest {
                continue;
            }
            if gap_free && seq != h.latest + 1 {
                gap = Some((h.latest, seq));
                break;
            }
            match op {
                StoredOp::Channel(rec) => h.push(rec),
                StoredOp::LaneGroup(rec) => h.lane_groups.push(rec),
            }
            h.latest = seq;
            applied += 1;
        }
        // Told while the history is locked: whoever sees the new latest_seq finds the
        // subscribers' watch there too.
        if notify {
            self.notify(h.latest);
        }
        drop(h);
        match gap {
            None => Ok(applied),
            Some((have, next)) => Err(ControlError::Storage(format!(
                "operations read out of order: {next} follows {have}"
            ))),
        }
    }

    /// Tells stream subscribers that operations up to `seq` are applied (never moving back).
    fn notify(&self, seq: u64) {
        self.latest.send_if_modified(|v| {
            let newer = seq > *v;
            if newer {
                *v = seq;
            }
            newer
        });
    }

    /// Inside write `tx` (holding the writer lock): applies what other writers committed
    /// since this node's newest operation, so validation sees the cluster's state.
    ///
    /// # Errors
    /// [`ControlError::Storage`]: the read failed, or the history does not reach the
    /// store's counter.
    async fn catch_up(&self, tx: &mut dyn WriteTx) -> Result<(), ControlError> {
        let after = self.latest_seq();
        let ops = tx.ops_after(after).await?;
        self.absorb(ops, true)?;
        if let Some(committed) = tx.committed_seq() {
            let have = self.latest_seq();
            if have != committed {
                return Err(ControlError::Storage(format!(
                    "this node holds operations up to {have}, the database's counter is at \
                     {committed}"
                )));
            }
        }
        Ok(())
    }

    /// Re-reads the operations after this node's newest from the store and applies them in
    /// order (the follower's work after a wake-up). A read that is not gap-free is read again.
    ///
    /// # Errors
    /// [`ControlError::Storage`]: the read failed, or came back with a gap five times.
    pub(crate) async fn refresh(&self) -> Result<usize, ControlError> {
        let mut attempt = 0;
        loop {
            let ops = self.store.ops_after(self.latest_seq()).await?;
            match self.absorb(ops, true) {
                Ok(n) => return Ok(n),
                Err(e) if attempt >= 4 => return Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, "control plane: reading the operations again");
                    attempt += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(20 * attempt)).await;
                }
            }
        }
    }

    /// Adds this node's own committed operation (unless the follower read it back first).
    fn record_own(&self, rec: OpRecord, after: Arc<Channels>) {
        let mut h = self.history.write();
        if rec.seq <= h.latest {
            return;
        }
        let seq = rec.seq;
        h.push_applied(rec, after);
        h.latest = seq;
        self.notify(seq);
    }

    /// How many of this plane's operations `other` lacks: those with no operation of the
    /// same time, subject and kind there (e.g. a local `control.db`'s operations that a new
    /// PostgreSQL control plane has not been given with `dyeline import --timeline`).
    pub fn ops_missing_from(&self, other: &ControlPlane) -> usize {
        let mine = self.history.read();
        let theirs = other.history.read();
        let mut channel_ops: std::collections::HashMap<(i64, &str), Vec<&Op>> =
            std::collections::HashMap::new();
        for e in &theirs.entries {
            channel_ops
                .entry((e.rec.t_unix_nano, e.rec.channel.as_str()))
                .or_default()
                .push(&e.rec.op);
        }
        let channels = mine
            .entries
            .iter()
            .filter(|e| {
                channel_ops
                    .get(&(e.rec.t_unix_nano, e.rec.channel.as_str()))
                    .is_none_or(|ops| !ops.contains(&&e.rec.op))
            })
            .count();
        let groups = mine
            .lane_groups
            .records
            .iter()
            .filter(|r| {
                !theirs
                    .lane_groups
                    .records
                    .iter()
                    .any(|o| o.t_unix_nano == r.t_unix_nano && o.op == r.op)
            })
            .count();
        channels + groups
    }

    /// Refuses writes to a database opened read-only.
    fn writable(&self) -> Result<(), ControlError> {
        if self.read_only {
            return Err(ControlError::Storage(
                "the control database is open read-only".into(),
            ));
        }
        Ok(())
    }

    /// Every channel now, `global` first then by id.
    pub fn channels(&self) -> Vec<Channel> {
        let h = self.history.read();
        let mut v: Vec<Channel> = h.current.iter().cloned().collect();
        v.sort_by_key(|c| (!c.id.is_global(), c.id.clone()));
        v
    }

    /// Wires the firing alerts the spike guard ([`ControlPlane::write_with`]) and the release
    /// gate read; before it (and when called a second time, ignored) there are none.
    pub fn set_firing_alerts(&self, alerts: SharedFiringAlerts) {
        let _ = self.alerts.set(alerts);
    }

    /// The alerts firing now (none when no source is wired).
    pub fn firing_alerts(&self) -> Vec<FiringAlert> {
        self.alerts.get().map(|a| a.firing()).unwrap_or_default()
    }

    /// One channel now.
    ///
    /// # Errors
    /// [`ControlError::InvalidChannelId`], [`ReleaseError::ChannelNotFound`].
    pub fn channel(&self, id: &str) -> Result<Channel, ControlError> {
        let id = parse_id(id)?;
        self.history
            .read()
            .current
            .get(id.as_str())
            .cloned()
            .ok_or_else(|| ReleaseError::ChannelNotFound(id.to_string()).into())
    }

    /// The effective channel and blue_percent of `app` now (domain §4).
    pub fn effective(&self, app: &str) -> Effective {
        self.history.read().current.effective(app)
    }

    /// The sequence number of the newest operation, channel or lane group (0 when none): the
    /// version of the release configuration.
    pub fn latest_seq(&self) -> u64 {
        self.history.read().latest
    }

    /// A receiver that changes whenever a live operation is recorded, by this node or (on
    /// PostgreSQL) another (its value: the newest sequence number; this node's imports do
    /// not change it).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }

    /// Validates and applies `op` to channel `id` as `actor`, records it durably with
    /// `note` (free text, normalized by [`normalize_note`]: trimmed, empty → none), and
    /// notifies stream subscribers. With `if_match`, the channel's version must equal it
    /// (0 for a channel that does not exist yet).
    ///
    /// # Errors
    /// Those of [`Channels::check`], [`ControlError::InvalidChannelId`],
    /// [`ControlError::InvalidNote`] (400, a note over [`NOTE_MAX_CHARS`] characters),
    /// [`ControlError::VersionMismatch`] (412), [`ControlError::Storage`]. A refused write
    /// records nothing and consumes no sequence number.
    pub async fn write(
        &self,
        id: &str,
        op: Op,
        actor: &str,
        if_match: Option<u64>,
        note: Option<&str>,
    ) -> Result<WriteOutcome, ControlError> {
        self.write_with(id, op, actor, if_match, note, false).await
    }

    /// [`ControlPlane::write`] with the spike guard's override: a ratio change or a finish
    /// that moves the channel's traffic toward the colour whose one-sided error spike is
    /// firing for it (domain §4, [`crate::alerts::spike_guard`]) is refused unless `force`;
    /// a forced one is recorded with its actor and a note that names the alert
    /// ([`SpikeRefusal::forced_note`], after the request's own note), and the outcome
    /// carries the alert (`forced_past`). `force` changes nothing when the guard would not
    /// refuse.
    ///
    /// # Errors
    /// Those of [`ControlPlane::write`], and [`ControlError::SpikeGuard`] (409).
    pub async fn write_with(
        &self,
        id: &str,
        op: Op,
        actor: &str,
        if_match: Option<u64>,
        note: Option<&str>,
        force: bool,
    ) -> Result<WriteOutcome, ControlError> {
        self.writable()?;
        let id = parse_id(id)?;
        let note = normalize_note(note)?;
        let op = match op {
            Op::Apps(apps) => Op::Apps(normalize_apps(apps)?),
            other => other,
        };
        if let Op::Ratio(r) = op
            && r > 100
        {
            return Err(ReleaseError::InvalidBluePercent(format!(
                "blue_percent {r} is outside 0..=100"
            ))
            .into());
        }
        let _guard = self.write.lock().await;
        let mut tx = self.store.begin().await?;
        self.catch_up(&mut *tx).await?;
        let current = self.history.read().current.clone();
        let exists = current.get(id.as_str()).is_some();
        if !exists && !matches!(op, Op::Apps(_)) {
            return Err(ReleaseError::ChannelNotFound(id.to_string()).into());
        }
        let version = current.get(id.as_str()).map_or(0, |c| c.version);
        if let Some(expected) = if_match
            && version != expected
        {
            return Err(ControlError::VersionMismatch {
                channel: id.to_string(),
                expected,
                actual: version,
            });
        }
        current.check(&id, &op)?;
        let to = match op {
            Op::Ratio(r) => Some(r),
            Op::Finish => Some(NEUTRAL_BLUE_PERCENT),
            _ => None,
        };
        let refusal = match (to, current.get(id.as_str())) {
            (Some(to), Some(c)) => {
                crate::alerts::spike_guard(&self.firing_alerts(), id.as_str(), c.blue_percent, to)
                    .map(|alert| SpikeRefusal {
                        channel: id.to_string(),
                        from: c.blue_percent,
                        to,
                        alert,
                    })
            }
            _ => None,
        };
        let note = match &refusal {
            Some(r) if !force => return Err(ControlError::SpikeGuard(Box::new(r.clone()))),
            Some(r) => Some(r.forced_note(note.as_deref())),
            None => note,
        };
        let mut rec = OpRecord {
            seq: 0,
            t_unix_nano: now_unix_nano(),
            channel: id.clone(),
            op,
            actor: actor.to_owned(),
            imported: false,
            note,
        };
        let mut next = (*current).clone();
        next.apply(&id, &rec.op);
        rec.seq = tx.insert(OpRow::of_channel(&rec)).await?;
        // The database's row must still be at the version validated against (PostgreSQL:
        // another node may not have written it; the counter's lock makes this a second check).
        if let Stored::Stale { actual } = tx
            .store_channel(&id, next.get(id.as_str()), Guard::Version(version))
            .await?
        {
            return Err(ControlError::VersionMismatch {
                channel: id.to_string(),
                expected: if_match.unwrap_or(version),
                actual,
            });
        }
        tx.commit().await?;
        let channel = next.get(id.as_str()).cloned();
        self.record_own(rec.clone(), Arc::new(next));
        tracing::info!(seq = rec.seq, channel = %id, op = rec.op.name(), actor, "control operation");
        Ok(WriteOutcome {
            seq: rec.seq,
            channel,
            forced_past: refusal.map(|r| r.alert),
        })
    }

    /// Every recorded channel operation in sequence order (live and imported, with actor and
    /// note), or only those of channel `channel` when given (lane group operations:
    /// [`ControlPlane::lane_group_records`]). An invalid or unknown channel id gives
    /// an empty list.
    pub fn op_records(&self, channel: Option<&str>) -> Vec<OpRecord> {
        self.history
            .read()
            .entries
            .iter()
            .filter(|e| channel.is_none_or(|c| e.rec.channel.as_str() == c))
            .map(|e| e.rec.clone())
            .collect()
    }

    /// The events of `app`'s stream after `after`, in order (domain §4).
    pub fn app_events(&self, app: &str, after: Cursor) -> Vec<Event> {
        let h = self.history.read();
        let from = h.entries.partition_point(|e| e.rec.seq < after.seq);
        let mut out = Vec::new();
        for e in &h.entries[from..] {
            out.extend(number(app_events(app, &e.before, &e.after), &e.rec, after));
        }
        out
    }

    /// The events of channel `id`'s own stream after `after`, in order.
    ///
    /// # Errors
    /// [`ControlError::InvalidChannelId`]; [`ReleaseError::ChannelNotFound`] for a channel
    /// that neither exists nor ever had an operation.
    pub fn channel_events(&self, id: &str, after: Cursor) -> Result<Vec<Event>, ControlError> {
        let id = parse_id(id)?;
        let h = self.history.read();
        if h.current.get(id.as_str()).is_none() && !h.entries.iter().any(|e| e.rec.channel == id) {
            return Err(ReleaseError::ChannelNotFound(id.to_string()).into());
        }
        let from = h.entries.partition_point(|e| e.rec.seq < after.seq);
        let mut out = Vec::new();
        for e in h.entries[from..].iter().filter(|e| e.rec.channel == id) {
            out.extend(number(
                channel_events(&id, &e.rec.op, &e.before),
                &e.rec,
                after,
            ));
        }
        Ok(out)
    }

    /// The timeline document of operations with `from <= t_unix_nano <= to` in time order
    /// (ties in sequence order), channel and lane group operations alike; `channels` lists the
    /// channels with their apps, and `lane_groups` the lane groups, as they were just before
    /// `from` (those created later are given by their events). A channel `delete` is written
    /// as an `apps` change to `[]`.
    pub fn timeline_doc(&self, from: Option<i64>, to: Option<i64>) -> TimelineDoc {
        let tl = self.timeline();
        let from_t = from.unwrap_or(i64::MIN);
        let to_t = to.unwrap_or(i64::MAX);
        let (channels, lane_groups) = if from_t == i64::MIN {
            (Channels::new(), Vec::new())
        } else {
            let groups = tl.lane_groups().groups_at(from_t - 1);
            (
                tl.channels_at(from_t - 1).clone(),
                groups.iter().map(|(g, _)| g.as_ref().clone()).collect(),
            )
        };
        let inside = |t: i64| t >= from_t && t <= to_t;
        let h = self.history.read();
        let mut events: Vec<TimelineEvent> = h
            .entries
            .iter()
            .map(|e| &e.rec)
            .filter(|r| inside(r.t_unix_nano))
            .map(|r| TimelineEvent {
                seq: Some(r.seq),
                actor: Some(r.actor.clone()),
                note: r.note.clone(),
                ..TimelineEvent::of_channel(r.t_unix_nano, &r.channel, &r.op)
            })
            .chain(
                h.lane_groups
                    .records
                    .iter()
                    .filter(|r| inside(r.t_unix_nano))
                    .map(|r| TimelineEvent {
                        seq: Some(r.seq),
                        actor: Some(r.actor.clone()),
                        note: r.note.clone(),
                        ..TimelineEvent::of_lane_group(r.t_unix_nano, &r.op)
                    }),
            )
            .collect();
        events.sort_by_key(|e| (e.t_unix_nano, e.seq));
        TimelineDoc {
            description: None,
            t0_unix_nano: None,
            channels: channels
                .iter()
                .map(|c| TimelineChannel {
                    id: c.id.to_string(),
                    apps: c.apps.clone(),
                })
                .collect(),
            lane_groups,
            events,
        }
    }

    /// Every recorded operation, channel and lane group, as a [`Timeline`] for point queries,
    /// in time order (ties in sequence order).
    pub fn timeline(&self) -> Timeline {
        let h = self.history.read();
        let mut ops: Vec<(i64, u64, ChannelId, Op)> = h
            .entries
            .iter()
            .map(|e| {
                (
                    e.rec.t_unix_nano,
                    e.rec.seq,
                    e.rec.channel.clone(),
                    e.rec.op.clone(),
                )
            })
            .collect();
        ops.sort_by_key(|(t, seq, ..)| (*t, *seq));
        Timeline::from_ops(
            Channels::new(),
            ops.into_iter().map(|(t, _, id, op)| (t, id, op)).collect(),
        )
        .with_lane_groups(h.lane_groups.timeline())
    }

    /// Stops following other nodes' writes and closes the database.
    pub async fn close(&self) {
        self.closed.send_replace(true);
        self.store.close().await;
    }
}

impl History {
    /// Appends `rec`, applying it to the current state.
    fn push(&mut self, rec: OpRecord) {
        let mut next = (*self.current).clone();
        next.apply(&rec.channel, &rec.op);
        self.push_applied(rec, Arc::new(next));
    }

    /// Appends `rec` whose resulting state the caller already computed.
    fn push_applied(&mut self, rec: OpRecord, after: Arc<Channels>) {
        let before = std::mem::replace(&mut self.current, after.clone());
        self.entries.push(Entry { rec, before, after });
    }
}

fn parse_id(id: &str) -> Result<ChannelId, ControlError> {
    ChannelId::new(id).map_err(|_| ControlError::InvalidChannelId(id.to_owned()))
}
