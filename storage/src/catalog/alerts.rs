//! The alert leader's tables in the catalog (migration 0006): the lease row (`alert_lease`:
//! holder, epoch, deadline), the alert book (`alerts`, one row per alert by fingerprint) and
//! the deliveries that succeeded (`alert_deliveries`, by idempotency key and target). Every
//! write of the book and every delivery record locks the lease row and checks that the
//! writer's epoch is still the lease's ([`CatalogError::LeaderFenced`] otherwise), like the
//! node writes' owner-epoch fence: a leader that lost the lease changes nothing.
//!
//! Does not own the election itself (taking and renewing the lease on the advisory lock's
//! connection: [`crate::leader`]) nor what an alert means (the `queries` crate's alert book;
//! the server converts between its alerts and [`AlertRow`]).

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;
use sqlx::postgres::PgRow;
use sqlx::{Postgres, Row, Transaction};

use super::{Catalog, CatalogError, query_error};

/// One alert as the book stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertRow {
    /// A hash of its sorted labels (Alertmanager's fingerprint), hex.
    pub fingerprint: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// True while firing, false once resolved.
    pub firing: bool,
    /// When it (last) started firing, Unix ns.
    pub starts_at_unix_nano: i64,
    /// When it resolved, Unix ns.
    pub ends_at_unix_nano: Option<i64>,
    /// End of the newest window in which its condition held, Unix ns.
    pub last_window_end_unix_nano: i64,
    /// Its findings' window, ns.
    pub window_ns: i64,
    /// Up to 5 trace ids for drilldown.
    pub exemplar_trace_ids: Vec<String>,
}

/// The lease as the catalog holds it (for `dyeline cluster status`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaseStatus {
    /// The node holding it, `None` before the first election.
    pub holder: Option<String>,
    /// Its epoch (0 before the first election; each takeover adds one).
    pub epoch: i64,
    /// Seconds until its deadline by the catalog's clock (negative: expired).
    pub remaining_s: Option<f64>,
}

/// Locks the lease row for the transaction and checks that `epoch` still holds it.
pub(crate) async fn fence_leader(
    tx: &mut Transaction<'_, Postgres>,
    epoch: i64,
) -> Result<(), CatalogError> {
    let held = sqlx::query("SELECT 1 FROM alert_lease WHERE id = 1 AND epoch = $1 FOR UPDATE")
        .bind(epoch)
        .fetch_optional(&mut **tx)
        .await
        .map_err(query_error("checking the alert lease's epoch"))?;
    match held {
        Some(_) => Ok(()),
        None => Err(CatalogError::LeaderFenced { epoch }),
    }
}

fn json(map: &BTreeMap<String, String>) -> Result<String, CatalogError> {
    serde_json::to_string(map).map_err(|e| CatalogError::Invalid(format!("alert labels: {e}")))
}

fn alert_row(r: &PgRow) -> Result<AlertRow, CatalogError> {
    let get = query_error("reading an alert");
    let map = |c: &str| -> Result<BTreeMap<String, String>, CatalogError> {
        let text: String = r.try_get(c).map_err(query_error("reading an alert"))?;
        serde_json::from_str(&text)
            .map_err(|e| CatalogError::Invalid(format!("alert column {c}: {e}")))
    };
    let state: String = r
        .try_get("state")
        .map_err(query_error("reading an alert"))?;
    Ok(AlertRow {
        fingerprint: r.try_get("fingerprint").map_err(get)?,
        labels: map("labels")?,
        annotations: map("annotations")?,
        firing: state == "firing",
        starts_at_unix_nano: r
            .try_get("starts_at_unix_nano")
            .map_err(query_error("reading an alert"))?,
        ends_at_unix_nano: r
            .try_get("ends_at_unix_nano")
            .map_err(query_error("reading an alert"))?,
        last_window_end_unix_nano: r
            .try_get("last_window_end_unix_nano")
            .map_err(query_error("reading an alert"))?,
        window_ns: r
            .try_get("window_ns")
            .map_err(query_error("reading an alert"))?,
        exemplar_trace_ids: r
            .try_get("exemplar_trace_ids")
            .map_err(query_error("reading an alert"))?,
    })
}

impl Catalog {
    /// The lease row.
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn alert_lease(&self) -> Result<LeaseStatus, CatalogError> {
        let r = sqlx::query(
            "SELECT holder, epoch, \
               CASE WHEN deadline = '-infinity' THEN NULL \
                    ELSE extract(epoch FROM deadline - now())::double precision END AS left_s \
             FROM alert_lease WHERE id = 1",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(query_error("reading the alert lease"))?;
        Ok(LeaseStatus {
            holder: r
                .try_get("holder")
                .map_err(query_error("reading the alert lease"))?,
            epoch: r
                .try_get("epoch")
                .map_err(query_error("reading the alert lease"))?,
            remaining_s: r
                .try_get("left_s")
                .map_err(query_error("reading the alert lease"))?,
        })
    }

    /// Writes `alerts` into the book (each row replaced by fingerprint, stamped with `epoch`)
    /// in one transaction fenced by the lease's epoch.
    ///
    /// # Errors
    /// [`CatalogError::LeaderFenced`] when `epoch` no longer holds the lease (nothing is
    /// written); [`CatalogError::Query`].
    pub async fn store_alerts(&self, epoch: i64, alerts: &[AlertRow]) -> Result<(), CatalogError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(query_error("starting an alert book write"))?;
        fence_leader(&mut tx, epoch).await?;
        for a in alerts {
            sqlx::query(
                "INSERT INTO alerts (fingerprint, labels, annotations, state, \
                   starts_at_unix_nano, ends_at_unix_nano, last_window_end_unix_nano, window_ns, \
                   exemplar_trace_ids, epoch) \
                 VALUES ($1, $2::jsonb, $3::jsonb, $4, $5, $6, $7, $8, $9, $10) \
                 ON CONFLICT (fingerprint) DO UPDATE SET labels = EXCLUDED.labels, \
                   annotations = EXCLUDED.annotations, state = EXCLUDED.state, \
                   starts_at_unix_nano = EXCLUDED.starts_at_unix_nano, \
                   ends_at_unix_nano = EXCLUDED.ends_at_unix_nano, \
                   last_window_end_unix_nano = EXCLUDED.last_window_end_unix_nano, \
                   window_ns = EXCLUDED.window_ns, \
                   exemplar_trace_ids = EXCLUDED.exemplar_trace_ids, \
                   epoch = EXCLUDED.epoch, updated_at = now()",
            )
            .bind(&a.fingerprint)
            .bind(json(&a.labels)?)
            .bind(json(&a.annotations)?)
            .bind(if a.firing { "firing" } else { "resolved" })
            .bind(a.starts_at_unix_nano)
            .bind(a.ends_at_unix_nano)
            .bind(a.last_window_end_unix_nano)
            .bind(a.window_ns.max(1))
            .bind(&a.exemplar_trace_ids)
            .bind(epoch)
            .execute(&mut *tx)
            .await
            .map_err(query_error("writing an alert"))?;
        }
        tx.commit()
            .await
            .map_err(query_error("committing an alert book write"))
    }

    /// Every alert of the book, by fingerprint.
    ///
    /// # Errors
    /// [`CatalogError::Query`], [`CatalogError::Invalid`] (a row the book would not hold).
    pub async fn alerts(&self) -> Result<Vec<AlertRow>, CatalogError> {
        let rows = sqlx::query(
            "SELECT fingerprint, labels::text AS labels, annotations::text AS annotations, \
               state, starts_at_unix_nano, ends_at_unix_nano, last_window_end_unix_nano, \
               window_ns, exemplar_trace_ids FROM alerts ORDER BY fingerprint",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(query_error("reading the alert book"))?;
        rows.iter().map(alert_row).collect()
    }

    /// Which of `keys` were delivered to which targets: (idempotency key, target) pairs.
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn deliveries(
        &self,
        keys: &[String],
    ) -> Result<HashSet<(String, String)>, CatalogError> {
        let rows = sqlx::query(
            "SELECT idempotency_key, target FROM alert_deliveries \
             WHERE idempotency_key = ANY($1)",
        )
        .bind(keys)
        .fetch_all(&self.pool)
        .await
        .map_err(query_error("reading alert deliveries"))?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("idempotency_key")
                        .map_err(query_error("reading a delivery"))?,
                    r.try_get("target")
                        .map_err(query_error("reading a delivery"))?,
                ))
            })
            .collect()
    }

    /// Records that `target` accepted the delivery `key`, fenced by the lease's epoch (a
    /// key recorded before stays as it was).
    ///
    /// # Errors
    /// [`CatalogError::LeaderFenced`] when `epoch` no longer holds the lease;
    /// [`CatalogError::Query`].
    pub async fn record_delivery(
        &self,
        epoch: i64,
        key: &str,
        target: &str,
    ) -> Result<(), CatalogError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(query_error("starting a delivery record"))?;
        fence_leader(&mut tx, epoch).await?;
        sqlx::query(
            "INSERT INTO alert_deliveries (idempotency_key, target, epoch) VALUES ($1, $2, $3) \
             ON CONFLICT DO NOTHING",
        )
        .bind(key)
        .bind(target)
        .bind(epoch)
        .execute(&mut *tx)
        .await
        .map_err(query_error("recording a delivery"))?;
        tx.commit()
            .await
            .map_err(query_error("committing a delivery record"))
    }
}
