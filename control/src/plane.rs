//! The control plane service: validated, versioned, persisted channel operations
//! (domain §4), the per-app and per-channel event streams numbered by operation, the timeline
//! document and the [`Timeline`] of every operation. Lane group operations (domain §7.1, same
//! sequence) are [`lane_groups`]'s; the offline import of a timeline is [`import`]'s. One SQLite
//! file (`control.db` in the data dir) holds every operation; the in-memory history is rebuilt
//! from it at open.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use dyeline_model::ChannelId;
use dyeline_model::release::{
    Channel, Channels, Effective, EventBody, EventKind, Op, ReleaseError, Timeline,
    TimelineChannel, TimelineDoc, TimelineEvent, app_events, channel_events, normalize_apps,
};

mod import;
pub mod lane_groups;

use dyeline_model::time::{now_unix_nano, rfc3339};
pub use import::ImportReport;
pub use lane_groups::{LaneGroupRecord, LaneGroupState, LaneGroupWrite};
use parking_lot::RwLock;
use serde::Serialize;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};
use tokio::sync::{Mutex, watch};
use utoipa::ToSchema;

use crate::error::ControlError;

/// The control database's file name inside the data dir.
pub const DB_FILE: &str = "control.db";

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

/// One recorded operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpRecord {
    /// Sequence number: increasing, never reused (also across restarts).
    pub seq: u64,
    /// When it was applied (for imports: the time in the imported timeline).
    pub t_unix_nano: i64,
    /// The channel.
    pub channel: ChannelId,
    /// The operation.
    pub op: Op,
    /// Token name of the writer, or `import`.
    pub actor: String,
    /// True for history recorded by `dyeline import --timeline`.
    pub imported: bool,
    /// Free text recorded with the operation (trimmed, 1..=[`NOTE_MAX_CHARS`] characters),
    /// e.g. why a ratio was raised while an alert fired; `None` when none was given.
    pub note: Option<String>,
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
}

fn op_columns(op: &Op) -> (Option<i64>, Option<String>) {
    match op {
        Op::Ratio(r) => (Some(i64::from(*r)), None),
        Op::Apps(a) => (
            None,
            Some(serde_json::to_string(a).expect("strings serialize")),
        ),
        _ => (None, None),
    }
}

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

/// The control plane: channels, operations and event streams over one SQLite database.
pub struct ControlPlane {
    pool: SqlitePool,
    write: Mutex<()>,
    history: RwLock<History>,
    latest: watch::Sender<u64>,
    read_only: bool,
}

impl ControlPlane {
    /// Opens (creating and migrating if needed) `data_dir/control.db` and replays its
    /// operations.
    ///
    /// # Errors
    /// [`ControlError::Storage`] when the file cannot be opened, migrated or read.
    pub async fn open(data_dir: &Path) -> Result<Self, ControlError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| ControlError::Storage(format!("{}: {e}", data_dir.display())))?;
        let options = SqliteConnectOptions::new()
            .filename(data_dir.join(DB_FILE))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        Self::load(pool, false).await
    }

    /// Opens `data_dir/control.db` read-only (for `dyeline analyze` and `sql` beside a
    /// running server). A data dir without one has no operations.
    ///
    /// # Errors
    /// [`ControlError::Storage`] when the file exists but cannot be read.
    pub async fn open_read_only(data_dir: &Path) -> Result<Self, ControlError> {
        let path = data_dir.join(DB_FILE);
        if !path.exists() {
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(SqliteConnectOptions::from_str("sqlite::memory:")?)
                .await?;
            sqlx::migrate!("./migrations").run(&pool).await?;
            return Self::load(pool, true).await;
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .read_only(true)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        Self::load(pool, true).await
    }

    async fn load(pool: SqlitePool, read_only: bool) -> Result<Self, ControlError> {
        // A database opened read-only is not migrated: one written before migration 0002
        // has no `note` column (its ops have no notes), one written before 0003 no
        // `lane_group` column (it has no lane group ops).
        let column = |name: &'static str| {
            let pool = pool.clone();
            async move {
                let has: bool = sqlx::query_scalar(
                    "SELECT COUNT(*) > 0 FROM pragma_table_info('ops') WHERE name = ?",
                )
                .bind(name)
                .fetch_one(&pool)
                .await?;
                Ok::<_, ControlError>(if has {
                    name.to_owned()
                } else {
                    format!("NULL AS {name}")
                })
            }
        };
        let note = column("note").await?;
        let lane_group = column("lane_group").await?;
        let rows = sqlx::query(&format!(
            "SELECT seq, t_unix_nano, channel, op, blue_percent, apps, actor, imported, {note}, \
             {lane_group} FROM ops ORDER BY seq"
        ))
        .fetch_all(&pool)
        .await?;
        let mut history = History::default();
        let mut last = 0;
        for row in rows {
            let channel: String = row.try_get("channel")?;
            let name: String = row.try_get("op")?;
            let seq = row.try_get::<i64, _>("seq")? as u64;
            let t_unix_nano = row.try_get("t_unix_nano")?;
            let actor = row.try_get("actor")?;
            let imported = row.try_get::<i64, _>("imported")? != 0;
            let note = row.try_get("note")?;
            last = seq;
            if name.starts_with("lane_group_") {
                let body: Option<String> = row.try_get("lane_group")?;
                history.lane_groups.push(LaneGroupRecord {
                    seq,
                    t_unix_nano,
                    op: lane_groups::op_from_row(&name, &channel, body.as_deref())?,
                    actor,
                    imported,
                    note,
                });
                continue;
            }
            let rec = OpRecord {
                seq,
                t_unix_nano,
                channel: ChannelId::new(&channel)
                    .map_err(|_| ControlError::Storage(format!("stored channel {channel:?}")))?,
                op: op_from_columns(&name, row.try_get("blue_percent")?, row.try_get("apps")?)?,
                actor,
                imported,
                note,
            };
            history.push(rec);
        }
        let (latest, _) = watch::channel(last);
        Ok(ControlPlane {
            pool,
            write: Mutex::new(()),
            history: RwLock::new(history),
            latest,
            read_only,
        })
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
        *self.latest.borrow()
    }

    /// A receiver that changes whenever a live operation is recorded (its value: the newest
    /// sequence number).
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
        self.writable()?;
        let id = parse_id(id)?;
        let note = normalize_note(note)?;
        let op = match op {
            Op::Apps(apps) => Op::Apps(normalize_apps(apps)?),
            other => other,
        };
        let _guard = self.write.lock().await;
        let current = self.history.read().current.clone();
        if let Op::Ratio(r) = op
            && r > 100
        {
            return Err(ReleaseError::InvalidBluePercent(format!(
                "blue_percent {r} is outside 0..=100"
            ))
            .into());
        }
        let exists = current.get(id.as_str()).is_some();
        if !exists && !matches!(op, Op::Apps(_)) {
            return Err(ReleaseError::ChannelNotFound(id.to_string()).into());
        }
        if let Some(expected) = if_match {
            let actual = current.get(id.as_str()).map_or(0, |c| c.version);
            if actual != expected {
                return Err(ControlError::VersionMismatch {
                    channel: id.to_string(),
                    expected,
                    actual,
                });
            }
        }
        current.check(&id, &op)?;
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
        let mut tx = self.pool.begin().await?;
        rec.seq = insert_op(&mut tx, &rec).await?;
        store_channel(&mut tx, &id, next.get(id.as_str())).await?;
        tx.commit().await?;
        let channel = next.get(id.as_str()).cloned();
        self.history
            .write()
            .push_applied(rec.clone(), Arc::new(next));
        self.latest.send_replace(rec.seq);
        tracing::info!(seq = rec.seq, channel = %id, op = rec.op.name(), actor, "control operation");
        Ok(WriteOutcome {
            seq: rec.seq,
            channel,
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

    /// Closes the database.
    pub async fn close(&self) {
        self.pool.close().await;
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

/// One row of `ops`: a channel operation (`subject` the channel, `blue_percent` or `apps`)
/// or a lane group operation (`subject` the group, `lane_group` the put group's JSON).
struct OpRow<'a> {
    t_unix_nano: i64,
    subject: &'a str,
    op: &'a str,
    blue_percent: Option<i64>,
    apps: Option<String>,
    lane_group: Option<String>,
    actor: &'a str,
    imported: bool,
    note: Option<&'a str>,
}

/// Inserts `row`; its sequence number.
async fn insert_row(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    row: OpRow<'_>,
) -> Result<u64, ControlError> {
    let seq: i64 = sqlx::query_scalar(
        "INSERT INTO ops (t_unix_nano, channel, op, blue_percent, apps, lane_group, actor, \
         imported, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
    )
    .bind(row.t_unix_nano)
    .bind(row.subject)
    .bind(row.op)
    .bind(row.blue_percent)
    .bind(row.apps)
    .bind(row.lane_group)
    .bind(row.actor)
    .bind(i64::from(row.imported))
    .bind(row.note)
    .fetch_one(&mut **tx)
    .await?;
    Ok(seq as u64)
}

async fn insert_op(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    rec: &OpRecord,
) -> Result<u64, ControlError> {
    let (blue_percent, apps) = op_columns(&rec.op);
    let row = OpRow {
        t_unix_nano: rec.t_unix_nano,
        subject: rec.channel.as_str(),
        op: rec.op.name(),
        blue_percent,
        apps,
        lane_group: None,
        actor: &rec.actor,
        imported: rec.imported,
        note: rec.note.as_deref(),
    };
    insert_row(tx, row).await
}

async fn store_channel(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    id: &ChannelId,
    channel: Option<&Channel>,
) -> Result<(), ControlError> {
    match channel {
        None => {
            sqlx::query("DELETE FROM channels WHERE id = ?")
                .bind(id.as_str())
                .execute(&mut **tx)
                .await?;
        }
        Some(c) => {
            sqlx::query(
                "INSERT INTO channels (id, apps, state, blue_percent, version) VALUES (?, ?, ?, ?, ?) \
                 ON CONFLICT(id) DO UPDATE SET apps = excluded.apps, state = excluded.state, \
                 blue_percent = excluded.blue_percent, version = excluded.version",
            )
            .bind(c.id.as_str())
            .bind(serde_json::to_string(&c.apps).expect("strings serialize"))
            .bind(c.state.as_str())
            .bind(i64::from(c.blue_percent))
            .bind(c.version as i64)
            .execute(&mut **tx)
            .await?;
        }
    }
    Ok(())
}
