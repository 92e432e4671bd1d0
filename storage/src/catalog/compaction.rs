//! The catalog's part of shared compaction: which hours are due ([`Catalog::compaction_due`]),
//! claiming an hour's files (`FOR UPDATE SKIP LOCKED`, so two nodes never merge the same
//! files: [`Catalog::claim_hour`]) and the swap ([`HourClaim::commit`]: the outputs inserted
//! and the inputs marked deleted in the claim's one transaction, fenced by the node's epoch).
//! A compaction that fails or crashes rolls the transaction back: the inputs stay live, and
//! its objects are orphans for the janitor.

use std::time::Duration;

use sqlx::{Postgres, Transaction};

use super::{
    Catalog, CatalogError, FILE_COLUMNS, FileKind, ListedFile, SpanFile, fence, insert_file,
    listed_file, query_error,
};
use crate::node::NodeId;

/// One hour in nanoseconds.
const HOUR_NS: i64 = 3_600_000_000_000;

/// An hour's live files, locked for one compaction until [`HourClaim::commit`] (or drop,
/// which rolls back).
pub struct HourClaim {
    tx: Transaction<'static, Postgres>,
    /// The hour (Unix ns).
    pub hour_unix_nano: i64,
    /// Its files as claimed (no other node's compaction holds them).
    pub inputs: Vec<ListedFile>,
}

impl Catalog {
    /// Up to `limit` hours of `kind` due for compaction, oldest first: ended at or before
    /// `closed_before` (Unix ns), holding more live files than `ceil(bytes / target_bytes)`,
    /// at least one file that is not a compaction's output, and no compaction output
    /// registered less than `cooldown` ago.
    ///
    /// The cooldown bounds the work late spans cause: a compaction merges the whole hour, so
    /// without it every upload of a few late spans into a closed hour would fetch, merge and
    /// put the hour again at every pass. With it an hour is merged at most once per
    /// cooldown, its late files waiting beside the outputs (read like any other file) until
    /// then, as the single-node store's hour with a journal waits for its grace.
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn compaction_due(
        &self,
        kind: FileKind,
        closed_before: i64,
        target_bytes: u64,
        cooldown: Duration,
        limit: u32,
    ) -> Result<Vec<i64>, CatalogError> {
        sqlx::query_scalar(
            "SELECT hour_unix_nano FROM span_files \
             WHERE kind = $1 AND deleted_at IS NULL AND hour_unix_nano <= $2 - $5 \
             GROUP BY hour_unix_nano \
             HAVING count(*) > ceil(sum(bytes)::float8 / $3) AND bool_or(NOT compacted) \
               AND coalesce(max(created_at) FILTER (WHERE compacted), '-infinity') \
                   <= now() - make_interval(secs => $6) \
             ORDER BY hour_unix_nano LIMIT $4",
        )
        .bind(kind.as_str())
        .bind(closed_before)
        .bind(target_bytes.max(1) as f64)
        .bind(i64::from(limit))
        .bind(HOUR_NS)
        .bind(cooldown.as_secs_f64())
        .fetch_all(&self.pool)
        .await
        .map_err(query_error("listing hours due for compaction"))
    }

    /// Claims the live files of `kind` in `hour`: locks their rows for a transaction
    /// (skipping rows another compaction holds) and returns them; `None` when fewer than two
    /// are free.
    ///
    /// # Errors
    /// [`CatalogError::Query`], [`CatalogError::Invalid`].
    pub async fn claim_hour(
        &self,
        kind: FileKind,
        hour_unix_nano: i64,
    ) -> Result<Option<HourClaim>, CatalogError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(query_error("starting a compaction"))?;
        let rows = sqlx::query(&format!(
            "SELECT {FILE_COLUMNS} FROM span_files \
             WHERE kind = $1 AND hour_unix_nano = $2 AND deleted_at IS NULL \
             ORDER BY key FOR UPDATE SKIP LOCKED"
        ))
        .bind(kind.as_str())
        .bind(hour_unix_nano)
        .fetch_all(&mut *tx)
        .await
        .map_err(query_error("claiming an hour's files"))?;
        if rows.len() < 2 {
            return Ok(None);
        }
        Ok(Some(HourClaim {
            tx,
            hour_unix_nano,
            inputs: rows.iter().map(listed_file).collect::<Result<_, _>>()?,
        }))
    }
}

impl HourClaim {
    /// The swap, in the claim's transaction: checks `node`'s `epoch`, inserts `outputs`
    /// (marked as compaction outputs, registered to `node`) and marks every input deleted.
    /// Readers listing after the commit see the outputs and not the inputs; before, the
    /// inputs and not the outputs.
    ///
    /// # Errors
    /// [`CatalogError::Fenced`], [`CatalogError::Query`], [`CatalogError::Invalid`]; nothing
    /// changed then.
    pub async fn commit(
        mut self,
        node: &NodeId,
        epoch: i64,
        outputs: &[SpanFile],
    ) -> Result<(), CatalogError> {
        fence(&mut self.tx, node, epoch).await?;
        for f in outputs {
            if insert_file(&mut self.tx, node, f, true).await? == 0 {
                return Err(CatalogError::Invalid(format!(
                    "compaction output {} is registered already",
                    f.key
                )));
            }
        }
        let inputs: Vec<&str> = self.inputs.iter().map(|f| f.file.key.as_str()).collect();
        sqlx::query("UPDATE span_files SET deleted_at = now() WHERE key = ANY($1)")
            .bind(&inputs)
            .execute(&mut *self.tx)
            .await
            .map_err(query_error("marking a compaction's inputs deleted"))?;
        self.tx
            .commit()
            .await
            .map_err(query_error("committing a compaction"))
    }
}
