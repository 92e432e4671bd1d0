//! The SQLite store: one file, `control.db` in the data directory, the single-node default.
//! Its schema is the numbered migrations in `control/migrations/` (`ops`, numbered by SQLite's
//! `AUTOINCREMENT` so a sequence number is never reused; `channels`; `lane_groups`). One
//! connection; the plane's write lock is the only writer lock needed, so rewrites are not
//! guarded ([`Guard`] is ignored: the in-memory check under that lock is the whole check, as
//! it always was). Also opened read-only beside a running server (`dyeline analyze`, `sql`),
//! on a database that may predate a migration.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use dyeline_model::ChannelId;
use dyeline_model::release::{Channel, LaneGroup, LaneGroupId};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, Sqlite, SqlitePool, Transaction};
use tokio::sync::watch;

use super::{Guard, OpRow, Store, Stored, StoredOp, StoredRow, WriteTx, apps_json, group_json};
use crate::error::ControlError;

/// The control database's file name inside the data dir.
pub const DB_FILE: &str = "control.db";

/// `control.db` through one connection.
pub(crate) struct SqliteStore {
    pool: SqlitePool,
    /// The select list of `ops`: a database opened read-only is not migrated, and one
    /// written before migration 0002 has no `note` column (its ops have no notes), one
    /// written before 0003 no `lane_group` column (it has no lane group ops).
    columns: String,
}

impl SqliteStore {
    /// Opens (creating and migrating if needed) `data_dir/control.db`.
    ///
    /// # Errors
    /// [`ControlError::Storage`] when the file cannot be opened or migrated.
    pub(crate) async fn open(data_dir: &Path) -> Result<Self, ControlError> {
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
        Self::with_pool(pool).await
    }

    /// Opens `data_dir/control.db` read-only; a data dir without one gets an empty
    /// in-memory database.
    ///
    /// # Errors
    /// [`ControlError::Storage`] when the file exists but cannot be read.
    pub(crate) async fn open_read_only(data_dir: &Path) -> Result<Self, ControlError> {
        let path = data_dir.join(DB_FILE);
        if !path.exists() {
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(SqliteConnectOptions::from_str("sqlite::memory:")?)
                .await?;
            sqlx::migrate!("./migrations").run(&pool).await?;
            return Self::with_pool(pool).await;
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .read_only(true)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        Self::with_pool(pool).await
    }

    async fn with_pool(pool: SqlitePool) -> Result<Self, ControlError> {
        let mut columns =
            String::from("seq, t_unix_nano, channel, op, blue_percent, apps, actor, imported");
        for name in ["note", "lane_group"] {
            let has: bool = sqlx::query_scalar(
                "SELECT COUNT(*) > 0 FROM pragma_table_info('ops') WHERE name = ?",
            )
            .bind(name)
            .fetch_one(&pool)
            .await?;
            if has {
                columns.push_str(&format!(", {name}"));
            } else {
                columns.push_str(&format!(", NULL AS {name}"));
            }
        }
        Ok(Self { pool, columns })
    }
}

/// Reads rows of `ops`.
fn decode(rows: Vec<sqlx::sqlite::SqliteRow>) -> Result<Vec<StoredOp>, ControlError> {
    rows.into_iter()
        .map(|row| {
            StoredRow {
                seq: row.try_get("seq")?,
                t_unix_nano: row.try_get("t_unix_nano")?,
                subject: row.try_get("channel")?,
                op: row.try_get("op")?,
                blue_percent: row.try_get("blue_percent")?,
                apps: row.try_get("apps")?,
                lane_group: row.try_get("lane_group")?,
                actor: row.try_get("actor")?,
                imported: row.try_get::<i64, _>("imported")? != 0,
                note: row.try_get("note")?,
            }
            .decode()
        })
        .collect()
}

#[async_trait]
impl Store for SqliteStore {
    async fn ops_after(&self, after: u64) -> Result<Vec<StoredOp>, ControlError> {
        let rows = sqlx::query(&format!(
            "SELECT {} FROM ops WHERE seq > ? ORDER BY seq",
            self.columns
        ))
        .bind(after as i64)
        .fetch_all(&self.pool)
        .await?;
        decode(rows)
    }

    async fn begin(&self) -> Result<Box<dyn WriteTx>, ControlError> {
        Ok(Box::new(SqliteTx {
            tx: self.pool.begin().await?,
            columns: self.columns.clone(),
        }))
    }

    fn gap_free(&self) -> bool {
        false
    }

    fn wake_ups(&self) -> Option<watch::Receiver<u64>> {
        None
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

struct SqliteTx {
    tx: Transaction<'static, Sqlite>,
    columns: String,
}

#[async_trait]
impl WriteTx for SqliteTx {
    fn committed_seq(&self) -> Option<u64> {
        None
    }

    async fn ops_after(&mut self, after: u64) -> Result<Vec<StoredOp>, ControlError> {
        let rows = sqlx::query(&format!(
            "SELECT {} FROM ops WHERE seq > ? ORDER BY seq",
            self.columns
        ))
        .bind(after as i64)
        .fetch_all(&mut *self.tx)
        .await?;
        decode(rows)
    }

    async fn insert(&mut self, row: OpRow<'_>) -> Result<u64, ControlError> {
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
        .fetch_one(&mut *self.tx)
        .await?;
        Ok(seq as u64)
    }

    async fn store_channel(
        &mut self,
        id: &ChannelId,
        channel: Option<&Channel>,
        _guard: Guard,
    ) -> Result<Stored, ControlError> {
        match channel {
            None => {
                sqlx::query("DELETE FROM channels WHERE id = ?")
                    .bind(id.as_str())
                    .execute(&mut *self.tx)
                    .await?;
            }
            Some(c) => {
                sqlx::query(
                    "INSERT INTO channels (id, apps, state, blue_percent, version) \
                     VALUES (?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET apps = excluded.apps, \
                     state = excluded.state, blue_percent = excluded.blue_percent, \
                     version = excluded.version",
                )
                .bind(c.id.as_str())
                .bind(apps_json(c))
                .bind(c.state.as_str())
                .bind(i64::from(c.blue_percent))
                .bind(c.version as i64)
                .execute(&mut *self.tx)
                .await?;
            }
        }
        Ok(Stored::Done)
    }

    async fn store_lane_group(
        &mut self,
        id: &LaneGroupId,
        group: Option<(&LaneGroup, u64)>,
        _guard: Guard,
    ) -> Result<Stored, ControlError> {
        match group {
            None => {
                sqlx::query("DELETE FROM lane_groups WHERE id = ?")
                    .bind(id.as_str())
                    .execute(&mut *self.tx)
                    .await?;
            }
            Some((g, version)) => {
                sqlx::query(
                    "INSERT INTO lane_groups (id, body, version) VALUES (?, ?, ?) \
                     ON CONFLICT(id) DO UPDATE SET body = excluded.body, version = excluded.version",
                )
                .bind(id.as_str())
                .bind(group_json(g)?)
                .bind(version as i64)
                .execute(&mut *self.tx)
                .await?;
            }
        }
        Ok(Stored::Done)
    }

    async fn commit(self: Box<Self>) -> Result<(), ControlError> {
        let SqliteTx { tx, .. } = *self;
        tx.commit().await?;
        Ok(())
    }
}
