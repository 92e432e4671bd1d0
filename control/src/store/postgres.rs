//! The PostgreSQL store (`[control] postgres_url`): the operation log and current rows shared
//! by every node of a cluster, in the schema `dyeline_control` of the given database (its own
//! migrations in `control/migrations_pg/`, its own `_sqlx_migrations`, tables prefixed
//! `control_`, so it sits beside the storage catalog's tables in the same database).
//!
//! - **Sequence numbers in commit order**: a write first locks the counter row
//!   (`SELECT … FROM control_seq FOR UPDATE`: writers of every node take turns there), and
//!   each operation takes its number with `UPDATE control_seq SET seq = seq + 1 RETURNING seq`
//!   in the same transaction. So numbers are allocated in commit order, and a rolled-back
//!   write gives its numbers back: the log has no gap.
//! - **Guarded rewrites**: a channel's or lane group's row is rewritten with `UPDATE … WHERE
//!   id = $1 AND version = $2` (an insert that must not conflict for version 0, a delete at
//!   the version): zero rows means another writer got there first ([`Stored::Stale`]).
//! - **Wake-ups**: a commit sends `NOTIFY dyeline_control`; one listener connection per node
//!   (`application_name` `dyeline-control-listen`) turns each notification, and each
//!   (re)connection after which some may have been missed, into a bump of
//!   [`Store::wake_ups`]. The payload is never read: the plane re-reads the log by sequence.
//!
//! Does not own what the plane does with a wake-up ([`crate::plane`]), nor the URL's parsing
//! and printing (the server's config); errors name the URL as the caller printed it, never
//! its password.

use std::time::Duration;

use async_trait::async_trait;
use dyeline_model::ChannelId;
use dyeline_model::release::{Channel, LaneGroup, LaneGroupId};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions, PgRow};
use sqlx::{Connection, PgConnection, Postgres, Row, Transaction};
use tokio::sync::watch;

use super::{Guard, OpRow, Store, Stored, StoredOp, StoredRow, WriteTx, apps_json, group_json};
use crate::error::ControlError;

/// The schema holding the control plane's tables.
pub const SCHEMA: &str = "dyeline_control";

/// The `NOTIFY` channel of committed writes.
pub const NOTIFY_CHANNEL: &str = "dyeline_control";

/// The `application_name` of each node's listener connection.
pub const LISTENER_APPLICATION_NAME: &str = "dyeline-control-listen";

/// The `application_name` of the other connections.
const APPLICATION_NAME: &str = "dyeline-control";

/// How long a connection attempt (and a wait for a pooled connection) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The advisory lock key under which the schema is created ("dyeline-c").
const SCHEMA_LOCK: i64 = 0x6479_656c_696e_6563;

/// The longest wait of the listener between two attempts to reconnect.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

const SELECT_OPS: &str = "SELECT seq, t_unix_nano, subject, op, blue_percent, apps, lane_group, \
     actor, imported, note FROM control_ops WHERE seq > $1 ORDER BY seq";

/// The control plane's tables in PostgreSQL, and this node's listener.
pub(crate) struct PgStore {
    pool: PgPool,
    listen_pool: PgPool,
    wake: Option<watch::Receiver<u64>>,
}

impl PgStore {
    /// Connects to `url` (shown as `label` in errors), creates the schema and applies the
    /// migrations not applied yet (under advisory locks: nodes starting together take
    /// turns), and with `listen` starts the listener that feeds [`Store::wake_ups`].
    ///
    /// # Errors
    /// [`ControlError::Storage`]: the server cannot be reached or refuses, the schema cannot
    /// be created or migrated.
    pub(crate) async fn connect(
        url: &str,
        label: &str,
        listen: bool,
    ) -> Result<Self, ControlError> {
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            ControlError::Storage(format!("PostgreSQL {label}: {what}: {e}"))
        };
        // Parsed here, not by `connect(&str)`, so no error quotes the text.
        let base: PgConnectOptions = url.parse().map_err(|_| {
            fail(
                "cannot connect",
                &"the URL's options are not valid for PostgreSQL",
            )
        })?;
        // One direct attempt first: a pool retries until its timeout and then says only "pool
        // timed out", hiding the cause (connection refused, no such database, auth). It
        // creates the schema, once, under a transaction-scoped advisory lock.
        let mut conn =
            match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&base)).await {
                Ok(Ok(conn)) => conn,
                Ok(Err(e)) => return Err(fail("cannot connect", &e)),
                Err(_) => {
                    return Err(fail(
                        "cannot connect",
                        &format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()),
                    ));
                }
            };
        let mut tx = conn
            .begin()
            .await
            .map_err(|e| fail("creating the schema", &e))?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(SCHEMA_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(|e| fail("creating the schema", &e))?;
        sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {SCHEMA}"))
            .execute(&mut *tx)
            .await
            .map_err(|e| fail("creating the schema", &e))?;
        tx.commit()
            .await
            .map_err(|e| fail("creating the schema", &e))?;
        let _ = conn.close().await;
        // Every statement names the tables unqualified: the schema is the search path. A
        // transaction left open by a frozen process would hold every writer's lock: it is
        // ended after a while, and a writer waits for the lock a bounded time.
        let options = |name: &str| {
            base.clone().application_name(name).options([
                ("search_path", SCHEMA),
                ("idle_in_transaction_session_timeout", "30s"),
                ("lock_timeout", "15s"),
            ])
        };
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(CONNECT_TIMEOUT)
            .test_before_acquire(true)
            .connect_with(options(APPLICATION_NAME))
            .await
            .map_err(|e| fail("cannot connect", &e))?;
        sqlx::migrate!("./migrations_pg")
            .run(&pool)
            .await
            .map_err(|e| fail("migrating the schema", &e))?;
        let listen_pool = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect_lazy_with(options(LISTENER_APPLICATION_NAME));
        let wake = listen.then(|| {
            let (tx, rx) = watch::channel(0);
            tokio::spawn(listen_loop(listen_pool.clone(), tx));
            rx
        });
        Ok(Self {
            pool,
            listen_pool,
            wake,
        })
    }
}

/// Keeps one `LISTEN` connection and bumps `wake` after each notification and each
/// (re)connection, until the receivers are gone or the pool is closed.
async fn listen_loop(pool: PgPool, wake: watch::Sender<u64>) {
    let bump = || wake.send_modify(|n| *n = n.wrapping_add(1));
    let mut backoff = Duration::from_millis(100);
    loop {
        let connect = async {
            let mut l = PgListener::connect_with(&pool).await?;
            l.listen(NOTIFY_CHANNEL).await?;
            Ok::<_, sqlx::Error>(l)
        };
        let connected = tokio::select! {
            r = connect => r,
            () = wake.closed() => return,
        };
        let mut listener = match connected {
            Ok(l) => l,
            Err(sqlx::Error::PoolClosed) => return,
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff, "control plane: cannot listen to PostgreSQL");
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = wake.closed() => return,
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_millis(100);
        tracing::debug!("control plane: listening to PostgreSQL");
        // Notifications sent while no connection listened are lost: re-read.
        bump();
        loop {
            let next = tokio::select! {
                r = listener.try_recv() => r,
                () = wake.closed() => return,
            };
            match next {
                Ok(Some(_)) => bump(),
                // The connection was lost and the listener reconnected: re-read.
                Ok(None) => {
                    tracing::info!("control plane: the PostgreSQL listener reconnected");
                    bump();
                }
                Err(sqlx::Error::PoolClosed) => return,
                // E.g. the server ended the session (`pg_terminate_backend`): start afresh.
                Err(e) => {
                    tracing::info!(error = %e, "control plane: the PostgreSQL listener lost its connection");
                    break;
                }
            }
        }
    }
}

/// Reads rows of `control_ops`.
fn decode(rows: Vec<PgRow>) -> Result<Vec<StoredOp>, ControlError> {
    rows.into_iter()
        .map(|row| {
            StoredRow {
                seq: row.try_get("seq")?,
                t_unix_nano: row.try_get("t_unix_nano")?,
                subject: row.try_get("subject")?,
                op: row.try_get("op")?,
                blue_percent: row.try_get("blue_percent")?,
                apps: row.try_get("apps")?,
                lane_group: row.try_get("lane_group")?,
                actor: row.try_get("actor")?,
                imported: row.try_get("imported")?,
                note: row.try_get("note")?,
            }
            .decode()
        })
        .collect()
}

#[async_trait]
impl Store for PgStore {
    async fn ops_after(&self, after: u64) -> Result<Vec<StoredOp>, ControlError> {
        let rows = sqlx::query(SELECT_OPS)
            .bind(after as i64)
            .fetch_all(&self.pool)
            .await?;
        decode(rows)
    }

    async fn begin(&self) -> Result<Box<dyn WriteTx>, ControlError> {
        let mut tx = self.pool.begin().await?;
        let committed: i64 = sqlx::query_scalar("SELECT seq FROM control_seq FOR UPDATE")
            .fetch_one(&mut *tx)
            .await?;
        Ok(Box::new(PgTx {
            tx,
            committed: committed as u64,
            last: None,
        }))
    }

    fn gap_free(&self) -> bool {
        true
    }

    fn wake_ups(&self) -> Option<watch::Receiver<u64>> {
        self.wake.clone()
    }

    async fn close(&self) {
        self.listen_pool.close().await;
        self.pool.close().await;
    }
}

/// A write holding the counter row's lock.
struct PgTx {
    tx: Transaction<'static, Postgres>,
    /// The counter when the lock was taken: the newest committed sequence number.
    committed: u64,
    /// The newest sequence number this write took.
    last: Option<u64>,
}

impl PgTx {
    /// Whether a guarded statement that touched `rows` rows did its work; if not, the version
    /// the database holds.
    async fn outcome(
        &mut self,
        rows: u64,
        guard: Guard,
        table: &str,
        id: &str,
    ) -> Result<Stored, ControlError> {
        if rows == 1 || guard == Guard::None {
            return Ok(Stored::Done);
        }
        let actual: Option<i64> =
            sqlx::query_scalar(&format!("SELECT version FROM {table} WHERE id = $1"))
                .bind(id)
                .fetch_optional(&mut *self.tx)
                .await?;
        Ok(Stored::Stale {
            actual: actual.unwrap_or(0) as u64,
        })
    }
}

#[async_trait]
impl WriteTx for PgTx {
    fn committed_seq(&self) -> Option<u64> {
        Some(self.committed)
    }

    async fn ops_after(&mut self, after: u64) -> Result<Vec<StoredOp>, ControlError> {
        let rows = sqlx::query(SELECT_OPS)
            .bind(after as i64)
            .fetch_all(&mut *self.tx)
            .await?;
        decode(rows)
    }

    async fn insert(&mut self, row: OpRow<'_>) -> Result<u64, ControlError> {
        let seq: i64 = sqlx::query_scalar(
            "WITH next AS (UPDATE control_seq SET seq = seq + 1 RETURNING seq) \
             INSERT INTO control_ops (seq, t_unix_nano, subject, op, blue_percent, apps, \
             lane_group, actor, imported, note) \
             SELECT next.seq, $1::BIGINT, $2::TEXT, $3::TEXT, $4::BIGINT, $5::TEXT, $6::TEXT, \
             $7::TEXT, $8::BOOLEAN, $9::TEXT FROM next RETURNING seq",
        )
        .bind(row.t_unix_nano)
        .bind(row.subject)
        .bind(row.op)
        .bind(row.blue_percent)
        .bind(row.apps)
        .bind(row.lane_group)
        .bind(row.actor)
        .bind(row.imported)
        .bind(row.note)
        .fetch_one(&mut *self.tx)
        .await?;
        self.last = Some(seq as u64);
        Ok(seq as u64)
    }

    async fn store_channel(
        &mut self,
        id: &ChannelId,
        channel: Option<&Channel>,
        guard: Guard,
    ) -> Result<Stored, ControlError> {
        let rows = match (channel, guard) {
            (None, Guard::None) => {
                sqlx::query("DELETE FROM control_channels WHERE id = $1")
                    .bind(id.as_str())
                    .execute(&mut *self.tx)
                    .await?
            }
            (None, Guard::Version(v)) => {
                sqlx::query("DELETE FROM control_channels WHERE id = $1 AND version = $2")
                    .bind(id.as_str())
                    .bind(v as i64)
                    .execute(&mut *self.tx)
                    .await?
            }
            (Some(c), guard) => {
                let sql = match guard {
                    Guard::None => {
                        "INSERT INTO control_channels (id, apps, state, blue_percent, version) \
                         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO UPDATE SET \
                         apps = excluded.apps, state = excluded.state, \
                         blue_percent = excluded.blue_percent, version = excluded.version"
                    }
                    Guard::Version(0) => {
                        "INSERT INTO control_channels (id, apps, state, blue_percent, version) \
                         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING"
                    }
                    Guard::Version(_) => {
                        "UPDATE control_channels SET apps = $2, state = $3, blue_percent = $4, \
                         version = $5 WHERE id = $1 AND version = $6"
                    }
                };
                let mut q = sqlx::query(sql)
                    .bind(c.id.as_str())
                    .bind(apps_json(c))
                    .bind(c.state.as_str())
                    .bind(i64::from(c.blue_percent))
                    .bind(c.version as i64);
                if let Guard::Version(v @ 1..) = guard {
                    q = q.bind(v as i64);
                }
                q.execute(&mut *self.tx).await?
            }
        };
        self.outcome(rows.rows_affected(), guard, "control_channels", id.as_str())
            .await
    }

    async fn store_lane_group(
        &mut self,
        id: &LaneGroupId,
        group: Option<(&LaneGroup, u64)>,
        guard: Guard,
    ) -> Result<Stored, ControlError> {
        let rows = match (group, guard) {
            (None, Guard::None) => {
                sqlx::query("DELETE FROM control_lane_groups WHERE id = $1")
                    .bind(id.as_str())
                    .execute(&mut *self.tx)
                    .await?
            }
            (None, Guard::Version(v)) => {
                sqlx::query("DELETE FROM control_lane_groups WHERE id = $1 AND version = $2")
                    .bind(id.as_str())
                    .bind(v as i64)
                    .execute(&mut *self.tx)
                    .await?
            }
            (Some((g, version)), guard) => {
                let sql = match guard {
                    Guard::None => {
                        "INSERT INTO control_lane_groups (id, body, version) VALUES ($1, $2, $3) \
                         ON CONFLICT (id) DO UPDATE SET body = excluded.body, \
                         version = excluded.version"
                    }
                    Guard::Version(0) => {
                        "INSERT INTO control_lane_groups (id, body, version) VALUES ($1, $2, $3) \
                         ON CONFLICT (id) DO NOTHING"
                    }
                    Guard::Version(_) => {
                        "UPDATE control_lane_groups SET body = $2, version = $3 \
                         WHERE id = $1 AND version = $4"
                    }
                };
                let mut q = sqlx::query(sql)
                    .bind(id.as_str())
                    .bind(group_json(g)?)
                    .bind(version as i64);
                if let Guard::Version(v @ 1..) = guard {
                    q = q.bind(v as i64);
                }
                q.execute(&mut *self.tx).await?
            }
        };
        self.outcome(
            rows.rows_affected(),
            guard,
            "control_lane_groups",
            id.as_str(),
        )
        .await
    }

    async fn commit(self: Box<Self>) -> Result<(), ControlError> {
        let PgTx { mut tx, last, .. } = *self;
        // Delivered to every listener at commit, and only if the commit happens.
        if let Some(seq) = last {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(NOTIFY_CHANNEL)
                .bind(seq.to_string())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
#[path = "postgres_tests.rs"]
mod tests;
