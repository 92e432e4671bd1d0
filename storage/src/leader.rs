//! The alert leader's election (issue 27, item 3): one node of the cluster evaluates and
//! delivers the alerts. Every node runs [`spawn`]; each keeps a dedicated connection to the
//! catalog and tries PostgreSQL's session advisory lock on it every `lease / 3`. The holder
//! of the lock takes the lease row (`alert_lease`) with `epoch = epoch + 1` only when its
//! deadline has passed (by the catalog's clock), or renews it when it holds it already
//! (`deadline = now() + lease`). The lock keeps two live candidates from racing; the lease
//! bounds a leader in time and its epoch fences every write of the alert book
//! ([`crate::catalog::alerts`]).
//!
//! The leader acts only until its own deadline, measured on its monotonic clock from the
//! start of its last successful renewal ([`Leadership::deadline`]): when it cannot reach
//! PostgreSQL, is paused (`SIGSTOP`) or cut off, it stops sending by itself before the lease
//! can pass to another node (whose catalog-clock deadline is later than this one). The
//! dedicated connection sets `idle_session_timeout = lease`, so a leader that stops renewing
//! loses its session, and with it the lock, by then too; otherwise a paused process would
//! hold the lock for ever.
//!
//! Does not own what the leader does (the server's alert loop) nor the book's tables.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{Connection, Row};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::catalog::{CatalogError, query_error};
use crate::node::NodeId;
use crate::urls::PostgresUrl;

/// The advisory lock key of the election ("dyelinea").
pub const LEADER_LOCK: i64 = 0x6479_656c_696e_6561;

/// What the election needs.
#[derive(Debug, Clone)]
pub struct ElectionSettings {
    /// This node.
    pub node: NodeId,
    /// The catalog.
    pub catalog_url: PostgresUrl,
    /// How long a lease lasts without renewal (renewed every third of it).
    pub lease: Duration,
}

/// This node's leadership while it holds the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leadership {
    /// The lease's epoch: every write of the alert book carries it.
    pub epoch: i64,
    /// When to stop acting, on this process's monotonic clock: the start of the last
    /// successful renewal plus the lease.
    pub deadline: Instant,
}

/// Whether this node leads, as the election publishes it.
#[derive(Debug, Clone)]
pub struct Leader {
    rx: watch::Receiver<Option<Leadership>>,
}

impl Leader {
    /// The epoch this node leads with now: `None` when it does not hold the lease, or its
    /// deadline has passed (however recent the last word of PostgreSQL).
    pub fn leading(&self) -> Option<i64> {
        self.rx
            .borrow()
            .filter(|l| Instant::now() < l.deadline)
            .map(|l| l.epoch)
    }

    /// How long this node may still act as leader: until its deadline, zero when it does
    /// not lead.
    pub fn lease_left(&self) -> Duration {
        self.rx.borrow().map_or(Duration::ZERO, |l| {
            l.deadline.saturating_duration_since(Instant::now())
        })
    }

    /// A leader that never leads and a sender to make it lead (tests).
    pub fn manual() -> (watch::Sender<Option<Leadership>>, Self) {
        let (tx, rx) = watch::channel(None);
        (tx, Self { rx })
    }
}

/// Starts the election; it runs until `stop` turns true, then gives the lease up (its
/// deadline set to now, so another node takes over at its next try) and the task ends.
pub fn spawn(
    settings: ElectionSettings,
    stop: watch::Receiver<bool>,
) -> (Leader, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(None);
    let task = tokio::spawn(run(settings, tx, stop));
    (Leader { rx }, task)
}

/// The election's state on its dedicated connection.
struct Candidate {
    settings: ElectionSettings,
    conn: Option<PgConnection>,
    locked: bool,
    /// The epoch of the lease this process holds.
    held: Option<i64>,
    /// The catalog's migrations have run (the lease row exists).
    migrated: bool,
}

async fn run(
    settings: ElectionSettings,
    tx: watch::Sender<Option<Leadership>>,
    mut stop: watch::Receiver<bool>,
) {
    let period = settings.lease / 3;
    let mut c = Candidate {
        settings,
        conn: None,
        locked: false,
        held: None,
        migrated: false,
    };
    loop {
        let attempt = Instant::now();
        match tokio::time::timeout(period, c.step()).await {
            Ok(Ok(Some(epoch))) => {
                if c.held != Some(epoch) {
                    tracing::info!(epoch, node = %c.settings.node.as_str(), "alert leader: lease taken");
                }
                c.held = Some(epoch);
                let _ = tx.send(Some(Leadership {
                    epoch,
                    deadline: attempt + c.settings.lease,
                }));
            }
            Ok(Ok(None)) => {
                if c.held.take().is_some() {
                    tracing::warn!("alert leader: lease lost to another node");
                }
                let _ = tx.send(None);
            }
            failed => {
                // The published leadership stays: it ends at its deadline by itself.
                match failed {
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "alert leader election: catalog unavailable")
                    }
                    _ => {
                        tracing::warn!("alert leader election: the catalog did not answer in time")
                    }
                }
                c.conn = None;
                c.locked = false;
            }
        }
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            _ = stop.changed() => {}
        }
        if *stop.borrow() {
            let _ = tx.send(None);
            c.give_up().await;
            return;
        }
    }
}

impl Candidate {
    /// One try: `Some(epoch)` when this node holds the lease after it.
    async fn step(&mut self) -> Result<Option<i64>, CatalogError> {
        if !self.migrated {
            crate::catalog::Catalog::connect(&self.settings.catalog_url, 1)
                .await?
                .close()
                .await;
            self.migrated = true;
        }
        if self.conn.is_none() {
            let options: PgConnectOptions =
                self.settings.catalog_url.expose().parse().map_err(|_| {
                    CatalogError::Invalid("the catalog URL's options are not valid".into())
                })?;
            let mut conn = PgConnection::connect_with(&options)
                .await
                .map_err(|source| CatalogError::Connect {
                    url: self.settings.catalog_url.to_string(),
                    source,
                })?;
            sqlx::query(&format!(
                "SET idle_session_timeout = {}",
                self.settings.lease.as_millis()
            ))
            .execute(&mut conn)
            .await
            .map_err(query_error("setting the election session's idle timeout"))?;
            self.conn = Some(conn);
            self.locked = false;
        }
        let Some(conn) = self.conn.as_mut() else {
            return Ok(None);
        };
        if !self.locked {
            self.locked = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
                .bind(LEADER_LOCK)
                .fetch_one(&mut *conn)
                .await
                .map_err(query_error("trying the leader lock"))?;
            if !self.locked {
                return Ok(None);
            }
        }
        take_or_renew(conn, &self.settings, self.held).await
    }

    /// Ends the lease this process holds (best effort), and the session with its lock.
    async fn give_up(&mut self) {
        if let (Some(conn), Some(epoch)) = (self.conn.as_mut(), self.held) {
            let _ = sqlx::query(
                "UPDATE alert_lease SET deadline = least(deadline, now()) \
                 WHERE id = 1 AND epoch = $1",
            )
            .bind(epoch)
            .execute(&mut *conn)
            .await;
        }
        if let Some(conn) = self.conn.take() {
            let _ = conn.close().await;
        }
    }
}

/// With the lock held: renews the lease when `held` is its epoch and it has not expired,
/// takes it with the next epoch when it has expired, and leaves it to its holder otherwise.
async fn take_or_renew(
    conn: &mut PgConnection,
    settings: &ElectionSettings,
    held: Option<i64>,
) -> Result<Option<i64>, CatalogError> {
    let lease_s = settings.lease.as_secs_f64();
    let mut tx = conn
        .begin()
        .await
        .map_err(query_error("starting the lease"))?;
    let row = sqlx::query(
        "SELECT holder, epoch, deadline > now() AS live FROM alert_lease WHERE id = 1 FOR UPDATE",
    )
    .fetch_one(&mut *tx)
    .await
    .map_err(query_error("reading the alert lease"))?;
    let holder: Option<String> = row
        .try_get("holder")
        .map_err(query_error("reading the lease"))?;
    let epoch: i64 = row
        .try_get("epoch")
        .map_err(query_error("reading the lease"))?;
    let live: bool = row
        .try_get("live")
        .map_err(query_error("reading the lease"))?;
    let mine = holder.as_deref() == Some(settings.node.as_str()) && held == Some(epoch);
    let out = if mine && live {
        sqlx::query(
            "UPDATE alert_lease SET deadline = now() + make_interval(secs => $1) WHERE id = 1",
        )
        .bind(lease_s)
        .execute(&mut *tx)
        .await
        .map_err(query_error("renewing the alert lease"))?;
        Some(epoch)
    } else if !live {
        let next: i64 = sqlx::query_scalar(
            "UPDATE alert_lease SET holder = $1, epoch = epoch + 1, taken_at = now(), \
               deadline = now() + make_interval(secs => $2) \
             WHERE id = 1 RETURNING epoch",
        )
        .bind(settings.node.as_str())
        .bind(lease_s)
        .fetch_one(&mut *tx)
        .await
        .map_err(query_error("taking the alert lease"))?;
        Some(next)
    } else {
        None
    };
    tx.commit()
        .await
        .map_err(query_error("committing the alert lease"))?;
    Ok(out)
}

#[cfg(test)]
#[path = "leader_tests.rs"]
mod tests;
