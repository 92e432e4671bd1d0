//! The catalog in PostgreSQL: which objects hold which rows, and how far each node's uploads
//! have come. Its own numbered migrations (`storage/migrations/`, embedded; never edit one
//! that has shipped, add the next) create these tables:
//!
//! - `nodes` (`node_id`, `owner_epoch`): a process taking ownership of its node id
//!   ([`Catalog::claim_node`]) bumps the epoch and gets it back; every write of that node
//!   locks the node's row and checks `owner_epoch = mine`, failing with
//!   [`CatalogError::Fenced`] once another process has claimed the id since.
//! - `span_files`: one row per uploaded object of `spans` or `presence` rows (its key, hour,
//!   node, rows, bytes, first and last start, the trace-index object's key, created, deleted).
//! - `alert_lease`, `alerts`, `alert_deliveries` (migration 0006): the alert leader's lease,
//!   the alert book and the deliveries made, fenced by the lease's epoch ([`alerts`]).
//! - `ingest_checkpoints` (per node and kind): `uploaded_through_unix_ms`, the write time
//!   through which the node's local files are in registered objects (migration 0002 renamed it
//!   from `wal_position`: the staging unit is a local file named by its write time).
//!
//! [`Catalog::register_upload`] inserts file rows and advances the checkpoint in one
//! transaction, fenced: a crash or error at any point leaves either all of it or none, and a
//! key registered before is not registered again. Readers list files from here
//! ([`Catalog::live_files`]), never from a bucket listing.
//!
//! Does not own the objects themselves ([`crate::objects`]) nor when uploads, retention or
//! the janitor run (later: the uploader). Queries are plain `sqlx::query` (no live database at
//! build time). Errors never carry the URL's password.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Connection, Postgres, Row, Transaction};

use crate::node::NodeId;
use crate::urls::PostgresUrl;

/// The advisory lock key of [`Catalog::with_maintenance_lock`] ("dyeline-m").
const MAINTENANCE_LOCK: i64 = 0x6479_656c_696e_652d;

/// How long a connection attempt (and a wait for a pooled connection) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Errors of the catalog. None carries the connection URL's password.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The server could not be reached, or refused the connection.
    #[error("catalog {url}: cannot connect: {source}")]
    Connect {
        /// The URL, without its password.
        url: String,
        /// Why.
        source: sqlx::Error,
    },
    /// The migrations failed.
    #[error("catalog {url}: migrating the schema failed: {source}")]
    Migrate {
        /// The URL, without its password.
        url: String,
        /// Why.
        source: sqlx::migrate::MigrateError,
    },
    /// A statement failed.
    #[error("catalog: {what}: {source}")]
    Query {
        /// What was being done.
        what: &'static str,
        /// Why.
        source: sqlx::Error,
    },
    /// Another process has claimed the node id since this one did: it must stop writing.
    #[error(
        "catalog: node {node} is no longer owned by epoch {epoch} (another process claimed it): \
         write refused"
    )]
    Fenced {
        /// The node.
        node: NodeId,
        /// The epoch the refused write carried.
        epoch: i64,
    },
    /// The alert lease has passed to a later epoch since this leader took it: its write of
    /// the alert book or of a delivery is refused.
    #[error("catalog: the alert lease is no longer held by epoch {epoch}: write refused")]
    LeaderFenced {
        /// The epoch the refused write carried.
        epoch: i64,
    },
    /// A value does not fit the catalog's columns (a count or position past `i64::MAX`).
    #[error("catalog: {0}")]
    Invalid(String),
}

pub(crate) fn query_error(what: &'static str) -> impl FnOnce(sqlx::Error) -> CatalogError {
    move |source| CatalogError::Query { what, source }
}

/// What rows an object holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// `spans` rows.
    Spans,
    /// `presence` rows.
    Presence,
}

impl FileKind {
    /// The name stored in the catalog.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Spans => "spans",
            Self::Presence => "presence",
        }
    }

    fn parse(text: &str) -> Result<Self, CatalogError> {
        match text {
            "spans" => Ok(Self::Spans),
            "presence" => Ok(Self::Presence),
            other => Err(CatalogError::Invalid(format!(
                "unknown file kind {other:?}"
            ))),
        }
    }
}

/// One object's catalog row as the uploader registers it (and the readers list it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanFile {
    /// The object's key, relative to the store's prefix.
    pub key: String,
    /// What rows it holds.
    pub kind: FileKind,
    /// The start of its hour, Unix nanoseconds.
    pub hour_unix_nano: i64,
    /// Rows it holds.
    pub rows: u64,
    /// Its size.
    pub bytes: u64,
    /// The earliest start time of its rows, Unix nanoseconds.
    pub min_start_unix_nano: i64,
    /// The latest start time of its rows, Unix nanoseconds.
    pub max_start_unix_nano: i64,
    /// The key of its trace-id index object, if it has one.
    pub trace_index_key: Option<String>,
}

/// A file's row as listed: the registered fields and the node that wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedFile {
    /// The node that registered it.
    pub node: String,
    /// The registered fields.
    pub file: SpanFile,
}

/// A reader's view of the catalog ([`Catalog::listing`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// The live files of the kind asked, oldest first.
    pub files: Vec<ListedFile>,
    /// The node's checkpoint: its local files written at or before this (Unix ms) are in
    /// `files`. `None` before its first upload.
    pub uploaded_through_unix_ms: Option<u64>,
}

/// What [`Catalog::register_upload`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registered {
    /// File rows inserted.
    pub inserted: u64,
    /// Files whose key was registered before (left as they were).
    pub already_known: u64,
}

/// A file marked deleted, for the janitor: the objects to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletedFile {
    /// The object's key.
    pub key: String,
    /// Its trace-id index object's key, if any.
    pub trace_index_key: Option<String>,
}

/// A connection pool to the catalog. Broken connections (a restarted server) are replaced on
/// the next use.
#[derive(Debug, Clone)]
pub struct Catalog {
    pool: PgPool,
    url: PostgresUrl,
}

pub(crate) const FILE_COLUMNS: &str = "key, kind, hour_unix_nano, node_id, rows, bytes, \
     min_start_unix_nano, max_start_unix_nano, trace_index_key";

impl Catalog {
    /// Connects (one connection at once, at most `max_connections`) and applies the
    /// migrations not applied yet (under PostgreSQL's advisory lock, so nodes starting
    /// together take turns).
    ///
    /// # Errors
    /// [`CatalogError::Connect`], [`CatalogError::Migrate`].
    pub async fn connect(url: &PostgresUrl, max_connections: u32) -> Result<Self, CatalogError> {
        let connect_error = |source| CatalogError::Connect {
            url: url.to_string(),
            source,
        };
        // Parsed from the URL here, not by `connect(&str)`, so no error quotes the text.
        let options: PgConnectOptions = url.expose().parse().map_err(|_| {
            connect_error(sqlx::Error::Configuration(
                "the URL's options are not valid for PostgreSQL".into(),
            ))
        })?;
        // One direct attempt first: the pool retries until its timeout and then says only
        // "pool timed out", hiding the cause (connection refused, no such database, auth).
        match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&options)).await {
            Ok(Ok(conn)) => {
                let _ = conn.close().await;
            }
            Ok(Err(e)) => return Err(connect_error(e)),
            Err(_) => {
                return Err(connect_error(sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()),
                ))));
            }
        }
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(CONNECT_TIMEOUT)
            .test_before_acquire(true)
            .connect_with(options)
            .await
            .map_err(connect_error)?;
        let catalog = Self {
            pool,
            url: url.clone(),
        };
        sqlx::migrate!("./migrations")
            .run(&catalog.pool)
            .await
            .map_err(|source| CatalogError::Migrate {
                url: url.to_string(),
                source,
            })?;
        Ok(catalog)
    }

    /// The URL connected to (prints without its password).
    pub fn url(&self) -> &PostgresUrl {
        &self.url
    }

    /// The version of the newest migration applied.
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn schema_version(&self) -> Result<i64, CatalogError> {
        sqlx::query_scalar::<_, Option<i64>>(
            "SELECT max(version) FROM _sqlx_migrations WHERE success",
        )
        .fetch_one(&self.pool)
        .await
        .map(Option::unwrap_or_default)
        .map_err(query_error("reading the schema version"))
    }

    /// Takes ownership of `node`: its epoch is bumped (1 for a new node) and returned. Writes
    /// carrying an older epoch fail from now on; a write of the older owner in progress
    /// finishes first (this waits for the node row's lock).
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn claim_node(&self, node: &NodeId) -> Result<i64, CatalogError> {
        sqlx::query_scalar(
            "INSERT INTO nodes (node_id, owner_epoch) VALUES ($1, 1) \
             ON CONFLICT (node_id) DO UPDATE \
             SET owner_epoch = nodes.owner_epoch + 1, claimed_at = now() \
             RETURNING owner_epoch",
        )
        .bind(node.as_str())
        .fetch_one(&self.pool)
        .await
        .map_err(query_error("claiming the node"))
    }

    /// The epoch of `node`'s current owner, `None` for a node never claimed (read only).
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn owner_epoch(&self, node: &NodeId) -> Result<Option<i64>, CatalogError> {
        sqlx::query_scalar("SELECT owner_epoch FROM nodes WHERE node_id = $1")
            .bind(node.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(query_error("reading the node's epoch"))
    }

    /// Registers an upload in one transaction: locks `node`'s row checking `epoch`, inserts
    /// `files` (a key registered before is left as it was and counted as already known), and
    /// advances the checkpoint of (`node`, `kind`) to `uploaded_through_unix_ms` (never
    /// backwards).
    /// Any failure rolls all of it back.
    ///
    /// # Errors
    /// [`CatalogError::Fenced`] when `epoch` is no longer the node's; [`CatalogError::Query`]
    /// (a file row the schema refuses, a lost connection), [`CatalogError::Invalid`] (a file
    /// of another kind than `kind`, a number past `i64::MAX`).
    pub async fn register_upload(
        &self,
        node: &NodeId,
        epoch: i64,
        kind: FileKind,
        files: &[SpanFile],
        uploaded_through_unix_ms: u64,
    ) -> Result<Registered, CatalogError> {
        let position = to_i64(uploaded_through_unix_ms, "uploaded_through_unix_ms")?;
        if let Some(f) = files.iter().find(|f| f.kind != kind) {
            return Err(CatalogError::Invalid(format!(
                "file {} holds {} rows, not {}: one registration is of one kind",
                f.key,
                f.kind.as_str(),
                kind.as_str()
            )));
        }
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(query_error("starting the registration"))?;
        fence(&mut tx, node, epoch).await?;
        let mut done = Registered {
            inserted: 0,
            already_known: 0,
        };
        for f in files {
            let inserted = insert_file(&mut tx, node, f, false).await?;
            if inserted == 1 {
                done.inserted += 1;
            } else {
                done.already_known += 1;
            }
        }
        sqlx::query(
            "INSERT INTO ingest_checkpoints (node_id, kind, uploaded_through_unix_ms) \
             VALUES ($1, $2, $3) ON CONFLICT (node_id, kind) DO UPDATE \
             SET uploaded_through_unix_ms = GREATEST( \
                     ingest_checkpoints.uploaded_through_unix_ms, \
                     EXCLUDED.uploaded_through_unix_ms), \
                 updated_at = now()",
        )
        .bind(node.as_str())
        .bind(kind.as_str())
        .bind(position)
        .execute(&mut *tx)
        .await
        .map_err(query_error("advancing the checkpoint"))?;
        tx.commit()
            .await
            .map_err(query_error("committing the registration"))?;
        Ok(done)
    }

    /// The write time (Unix ms) through which (`node`, `kind`)'s local files are registered, `None` before the
    /// first registration.
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn checkpoint(
        &self,
        node: &NodeId,
        kind: FileKind,
    ) -> Result<Option<u64>, CatalogError> {
        let position: Option<i64> = sqlx::query_scalar(
            "SELECT uploaded_through_unix_ms FROM ingest_checkpoints \
             WHERE node_id = $1 AND kind = $2",
        )
        .bind(node.as_str())
        .bind(kind.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(query_error("reading the checkpoint"))?;
        position
            .map(|p| to_u64(p, "uploaded_through_unix_ms"))
            .transpose()
    }

    /// The live (not deleted) files of `kind` with a row starting in `[from, to)` (Unix
    /// nanoseconds) by their first and last start, oldest first.
    ///
    /// # Errors
    /// [`CatalogError::Query`], [`CatalogError::Invalid`] (a row the schema would not hold).
    pub async fn live_files(
        &self,
        kind: FileKind,
        from_unix_nano: i64,
        to_unix_nano: i64,
    ) -> Result<Vec<ListedFile>, CatalogError> {
        let rows = sqlx::query(&format!(
            "SELECT {FILE_COLUMNS} FROM span_files \
             WHERE kind = $1 AND deleted_at IS NULL \
               AND min_start_unix_nano < $3 AND max_start_unix_nano >= $2 \
             ORDER BY min_start_unix_nano, key"
        ))
        .bind(kind.as_str())
        .bind(from_unix_nano)
        .bind(to_unix_nano)
        .fetch_all(&self.pool)
        .await
        .map_err(query_error("listing files"))?;
        rows.iter().map(listed_file).collect()
    }

    /// What a reader of `kind` needs, as of one moment (one read-only repeatable-read
    /// transaction, so an upload registered meanwhile is in both or neither): every live file
    /// of `kind`, oldest first, and `node`'s checkpoint (its local files written at or before
    /// it are among those files and must not be read twice); no checkpoint without a node.
    ///
    /// # Errors
    /// [`CatalogError::Query`], [`CatalogError::Invalid`].
    pub async fn listing(
        &self,
        node: Option<&NodeId>,
        kind: FileKind,
    ) -> Result<Listing, CatalogError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(query_error("starting the listing"))?;
        let rows = sqlx::query(&format!(
            "SELECT {FILE_COLUMNS} FROM span_files \
             WHERE kind = $1 AND deleted_at IS NULL ORDER BY min_start_unix_nano, key"
        ))
        .bind(kind.as_str())
        .fetch_all(&mut *tx)
        .await
        .map_err(query_error("listing files"))?;
        let through: Option<i64> = match node {
            Some(node) => sqlx::query_scalar(
                "SELECT uploaded_through_unix_ms FROM ingest_checkpoints \
                 WHERE node_id = $1 AND kind = $2",
            )
            .bind(node.as_str())
            .bind(kind.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(query_error("reading the checkpoint"))?,
            None => None,
        };
        tx.commit()
            .await
            .map_err(query_error("ending the listing"))?;
        Ok(Listing {
            files: rows.iter().map(listed_file).collect::<Result<_, _>>()?,
            uploaded_through_unix_ms: through
                .map(|p| to_u64(p, "uploaded_through_unix_ms"))
                .transpose()?,
        })
    }

    /// Marks the files of `keys` deleted (retention; the janitor deletes their objects
    /// later). Keys already marked or unknown are skipped; the count marked is returned.
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn mark_deleted(&self, keys: &[String]) -> Result<u64, CatalogError> {
        sqlx::query(
            "UPDATE span_files SET deleted_at = now() \
             WHERE key = ANY($1) AND deleted_at IS NULL",
        )
        .bind(keys)
        .execute(&self.pool)
        .await
        .map(|r| r.rows_affected())
        .map_err(query_error("marking files deleted"))
    }

    /// Retention: marks deleted the live files registered more than `retention` ago (their
    /// rows are past it, as a local file is `retention` after it was written); returns how
    /// many. Readers drop them at their next listing; their objects go a grace later.
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn expire(&self, retention: Duration) -> Result<u64, CatalogError> {
        sqlx::query(
            "UPDATE span_files SET deleted_at = now() \
             WHERE deleted_at IS NULL AND created_at < now() - make_interval(secs => $1)",
        )
        .bind(retention.as_secs_f64())
        .execute(&self.pool)
        .await
        .map(|r| r.rows_affected())
        .map_err(query_error("expiring files"))
    }

    /// Removes the rows of deleted files whose objects are gone (`keys`, each marked deleted
    /// before: a live row is never removed); returns how many.
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn forget(&self, keys: &[String]) -> Result<u64, CatalogError> {
        sqlx::query("DELETE FROM span_files WHERE key = ANY($1) AND deleted_at IS NOT NULL")
            .bind(keys)
            .execute(&self.pool)
            .await
            .map(|r| r.rows_affected())
            .map_err(query_error("forgetting deleted files"))
    }

    /// Runs `pass` while holding the catalog's maintenance lock (a PostgreSQL advisory lock
    /// held by a transaction), so one node at a time does retention and the janitor's listing;
    /// `None` without running it when another node holds the lock.
    ///
    /// # Errors
    /// [`CatalogError::Query`] taking or releasing the lock; `pass`'s own error.
    pub async fn with_maintenance_lock<T, E: From<CatalogError>>(
        &self,
        pass: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<Option<T>, E> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(query_error("starting the maintenance lock"))?;
        let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
            .bind(MAINTENANCE_LOCK)
            .fetch_one(&mut *tx)
            .await
            .map_err(query_error("taking the maintenance lock"))?;
        if !got {
            return Ok(None);
        }
        let out = pass.await;
        tx.commit()
            .await
            .map_err(query_error("releasing the maintenance lock"))?;
        out.map(Some)
    }

    /// The files marked deleted at least `grace` ago, oldest first, at most `limit`.
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn deleted_files(
        &self,
        grace: Duration,
        limit: u32,
    ) -> Result<Vec<DeletedFile>, CatalogError> {
        let rows = sqlx::query(
            "SELECT key, trace_index_key FROM span_files \
             WHERE deleted_at IS NOT NULL \
               AND deleted_at <= now() - make_interval(secs => $1) \
             ORDER BY deleted_at, key LIMIT $2",
        )
        .bind(grace.as_secs_f64())
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(query_error("listing deleted files"))?;
        rows.iter()
            .map(|r| {
                Ok(DeletedFile {
                    key: r.try_get("key").map_err(query_error("reading a row"))?,
                    trace_index_key: r
                        .try_get("trace_index_key")
                        .map_err(query_error("reading a row"))?,
                })
            })
            .collect()
    }

    /// Every object key the catalog knows (files, live or deleted, and their trace-index
    /// objects) starting with `prefix`, sorted: what the orphan janitor keeps.
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn known_keys(&self, prefix: &str) -> Result<Vec<String>, CatalogError> {
        sqlx::query_scalar(
            "SELECT k FROM ( \
                 SELECT key AS k FROM span_files \
                 UNION SELECT trace_index_key FROM span_files WHERE trace_index_key IS NOT NULL \
             ) keys WHERE starts_with(k, $1) ORDER BY k",
        )
        .bind(prefix)
        .fetch_all(&self.pool)
        .await
        .map_err(query_error("listing known keys"))
    }

    /// Closes the pool's connections.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Inserts the row of `f` registered by `node` (`compacted`: a compaction's output) unless
/// its key is known; returns the rows inserted (0 or 1).
pub(crate) async fn insert_file(
    tx: &mut Transaction<'_, Postgres>,
    node: &NodeId,
    f: &SpanFile,
    compacted: bool,
) -> Result<u64, CatalogError> {
    Ok(sqlx::query(&format!(
        "INSERT INTO span_files ({FILE_COLUMNS}, compacted) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (key) DO NOTHING"
    ))
    .bind(&f.key)
    .bind(f.kind.as_str())
    .bind(f.hour_unix_nano)
    .bind(node.as_str())
    .bind(to_i64(f.rows, "rows")?)
    .bind(to_i64(f.bytes, "bytes")?)
    .bind(f.min_start_unix_nano)
    .bind(f.max_start_unix_nano)
    .bind(f.trace_index_key.as_deref())
    .bind(compacted)
    .execute(&mut **tx)
    .await
    .map_err(query_error("registering a file"))?
    .rows_affected())
}

/// Locks `node`'s row for the transaction and checks that `epoch` still owns it.
pub(crate) async fn fence(
    tx: &mut Transaction<'_, Postgres>,
    node: &NodeId,
    epoch: i64,
) -> Result<(), CatalogError> {
    let owned =
        sqlx::query("SELECT 1 FROM nodes WHERE node_id = $1 AND owner_epoch = $2 FOR UPDATE")
            .bind(node.as_str())
            .bind(epoch)
            .fetch_optional(&mut **tx)
            .await
            .map_err(query_error("checking the node's epoch"))?;
    match owned {
        Some(_) => Ok(()),
        None => Err(CatalogError::Fenced {
            node: node.clone(),
            epoch,
        }),
    }
}

pub(crate) fn listed_file(r: &sqlx::postgres::PgRow) -> Result<ListedFile, CatalogError> {
    let get_i64 = |c: &str| -> Result<i64, CatalogError> {
        r.try_get::<i64, _>(c).map_err(query_error("reading a row"))
    };
    let kind: String = r.try_get("kind").map_err(query_error("reading a row"))?;
    Ok(ListedFile {
        node: r.try_get("node_id").map_err(query_error("reading a row"))?,
        file: SpanFile {
            key: r.try_get("key").map_err(query_error("reading a row"))?,
            kind: FileKind::parse(&kind)?,
            hour_unix_nano: get_i64("hour_unix_nano")?,
            rows: to_u64(get_i64("rows")?, "rows")?,
            bytes: to_u64(get_i64("bytes")?, "bytes")?,
            min_start_unix_nano: get_i64("min_start_unix_nano")?,
            max_start_unix_nano: get_i64("max_start_unix_nano")?,
            trace_index_key: r
                .try_get("trace_index_key")
                .map_err(query_error("reading a row"))?,
        },
    })
}

pub(crate) fn to_u64(v: i64, what: &str) -> Result<u64, CatalogError> {
    u64::try_from(v).map_err(|_| CatalogError::Invalid(format!("{what} {v} is negative")))
}

pub(crate) fn to_i64(v: u64, what: &str) -> Result<i64, CatalogError> {
    i64::try_from(v).map_err(|_| CatalogError::Invalid(format!("{what} {v} is past i64::MAX")))
}

pub mod alerts;
#[path = "catalog/compaction.rs"]
pub mod compaction;
pub mod nodes;
pub mod shares;

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;
