//! The catalog's record of the nodes themselves (migrations 0004, 0005): each node's owner writes a
//! heartbeat into its `nodes` row ([`Catalog::heartbeat`], fenced by the owner epoch, so a
//! process that lost its node id cannot keep it looking alive), and [`Catalog::nodes`] reads
//! every node back with its upload checkpoint and live files for `dyeline cluster status`.
//! Ages are measured by PostgreSQL's clock, one clock for every node.
//!
//! Does not own when heartbeats are sent ([`crate::heartbeat`]) nor how the status prints.

use serde::Serialize;
use sqlx::postgres::PgRow;
use sqlx::{Postgres, Row};

use super::{Catalog, CatalogError, fence, query_error};
use crate::node::NodeId;

/// What a node says of itself in a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    /// When this process started, Unix ms.
    pub started_unix_ms: i64,
    /// The binary's version.
    pub version: String,
    /// Bytes of local files not uploaded yet (the staging area's use).
    pub staging_bytes: u64,
    /// How long the oldest local file not uploaded yet has waited, ms (0 when none waits).
    pub upload_lag_ms: u64,
    /// Where its API answers (`http://host:port`), once it is bound.
    pub api_url: Option<String>,
}

/// One node as [`Catalog::nodes`] reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeStatus {
    /// The node id.
    pub node_id: String,
    /// Its current owner's epoch (bumped by every process that claimed the id).
    pub owner_epoch: i64,
    /// When the current owner claimed it, Unix ms.
    pub claimed_unix_ms: i64,
    /// When the current owner started, Unix ms (`None` before its first heartbeat).
    pub started_unix_ms: Option<i64>,
    /// Seconds since its last heartbeat, by the catalog's clock (`None`: never sent one).
    pub heartbeat_age_s: Option<f64>,
    /// The owner's version.
    pub version: Option<String>,
    /// Where its API answers, as its last heartbeat said.
    pub api_url: Option<String>,
    /// Bytes of local files it has not uploaded yet.
    pub staging_bytes: Option<u64>,
    /// How long its oldest local file not uploaded yet has waited, ms.
    pub upload_lag_ms: Option<u64>,
    /// Its spans checkpoint: local files written at or before this (Unix ms) are uploaded.
    pub spans_uploaded_through_unix_ms: Option<i64>,
    /// Live objects of spans it registered (compaction outputs count for the node that
    /// compacted).
    pub live_span_files: u64,
    /// Their bytes.
    pub live_span_bytes: u64,
}

fn to_i64(what: &str, v: u64) -> Result<i64, CatalogError> {
    i64::try_from(v).map_err(|_| CatalogError::Invalid(format!("{what} {v} is past i64::MAX")))
}

/// Column `c` of a row of [`Catalog::nodes`].
fn col<'r, T>(r: &'r PgRow, c: &str) -> Result<T, CatalogError>
where
    T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    r.try_get(c).map_err(query_error("reading a node"))
}

fn to_u64(v: Option<i64>) -> Option<u64> {
    v.and_then(|v| u64::try_from(v).ok())
}

impl Catalog {
    /// Records `beat` as `node`'s heartbeat, now by the catalog's clock.
    ///
    /// # Errors
    /// [`CatalogError::Fenced`] once another process has claimed `node` since `epoch`;
    /// [`CatalogError::Query`]; [`CatalogError::Invalid`] (a count past `i64::MAX`).
    pub async fn heartbeat(
        &self,
        node: &NodeId,
        epoch: i64,
        beat: &Beat,
    ) -> Result<(), CatalogError> {
        let staging = to_i64("staging bytes", beat.staging_bytes)?;
        let lag = to_i64("upload lag", beat.upload_lag_ms)?;
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(query_error("starting a heartbeat"))?;
        fence(&mut tx, node, epoch).await?;
        sqlx::query(
            "UPDATE nodes SET heartbeat_at = now(), \
             started_at = to_timestamp($2::double precision / 1000), version = $3, \
             staging_bytes = $4, upload_lag_ms = $5, api_url = $6 \
             WHERE node_id = $1",
        )
        .bind(node.as_str())
        .bind(beat.started_unix_ms as f64)
        .bind(&beat.version)
        .bind(staging)
        .bind(lag)
        .bind(beat.api_url.as_deref())
        .execute(&mut *tx)
        .await
        .map_err(query_error("writing a heartbeat"))?;
        tx.commit()
            .await
            .map_err(query_error("committing a heartbeat"))
    }

    /// Every node the catalog knows, by node id.
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn nodes(&self) -> Result<Vec<NodeStatus>, CatalogError> {
        let rows = sqlx::query(
            "SELECT n.node_id, n.owner_epoch, \
               (extract(epoch FROM n.claimed_at) * 1000)::bigint AS claimed_ms, \
               (extract(epoch FROM n.started_at) * 1000)::bigint AS started_ms, \
               extract(epoch FROM now() - n.heartbeat_at)::double precision AS age_s, \
               n.version, n.api_url, n.staging_bytes, n.upload_lag_ms, \
               c.uploaded_through_unix_ms, \
               coalesce(f.files, 0) AS files, coalesce(f.bytes, 0) AS bytes \
             FROM nodes n \
             LEFT JOIN ingest_checkpoints c ON c.node_id = n.node_id AND c.kind = 'spans' \
             LEFT JOIN (SELECT node_id, count(*) AS files, sum(bytes)::bigint AS bytes \
                        FROM span_files WHERE kind = 'spans' AND deleted_at IS NULL \
                        GROUP BY node_id) f ON f.node_id = n.node_id \
             ORDER BY n.node_id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(query_error("listing the nodes"))?;
        rows.iter()
            .map(|r| {
                Ok(NodeStatus {
                    node_id: col(r, "node_id")?,
                    owner_epoch: col(r, "owner_epoch")?,
                    claimed_unix_ms: col(r, "claimed_ms")?,
                    started_unix_ms: col(r, "started_ms")?,
                    heartbeat_age_s: col::<Option<f64>>(r, "age_s")?.map(|a| a.max(0.0)),
                    version: col(r, "version")?,
                    api_url: col(r, "api_url")?,
                    staging_bytes: to_u64(col(r, "staging_bytes")?),
                    upload_lag_ms: to_u64(col(r, "upload_lag_ms")?),
                    spans_uploaded_through_unix_ms: col(r, "uploaded_through_unix_ms")?,
                    live_span_files: to_u64(col(r, "files")?).unwrap_or(0),
                    live_span_bytes: to_u64(col(r, "bytes")?).unwrap_or(0),
                })
            })
            .collect()
    }
}
