//! The uploader: a background task of `dyeline serve` with shared storage that moves the
//! node's local files into the object store and the catalog, and keeps the store's listing of
//! the catalog's files current.
//!
//! One cycle (every [`UploadSettings::interval`] at most, sooner while files are due):
//!
//! 1. the store names the local files written at or before the end of the last closed
//!    interval (`Store::upload_cut`; no file written later is named at or before the cut);
//! 2. each is put as is (its row groups, bloom filters and page index unchanged) under a fresh
//!    key `spans/date=YYYY-MM-DD/hour=HH/node=ID/<ULID>.parquet` with a conditional create
//!    (multipart above [`MULTIPART_FROM`](crate::put::MULTIPART_FROM)), its trace-id index beside it as `<ULID>.traces`;
//! 3. one transaction registers them and advances the node's checkpoint to the cut, fenced by
//!    the node's owner epoch ([`Catalog::register_upload`]);
//! 4. the store swaps the local files for the objects under its one lock (`Store::uploaded`);
//!    the local files are deleted a grace later (a query that listed them may still read them).
//!
//! A crash between any two steps loses nothing and lists nothing twice: before 3 the local
//! files are still the rows (an object put but not registered is an orphan, deleted by the
//! janitor once older than its grace); after 3 a restart drops the local files the checkpoint
//! covers before reading the catalog's. The object store or PostgreSQL being down fails the
//! cycle, which is tried again with a doubling wait (1 s to 1 min); ingest goes on into local
//! staging until `store.staging_max_bytes`.
//!
//! Does not own the local files (the store), the catalog's schema ([`crate::catalog`]) or the
//! cache of objects ([`crate::cache`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use dyeline_store::layout::FileMeta;
use dyeline_store::trace_index::TraceIndex;
use dyeline_store::{RemoteFile, RemoteObjects, Rows, Store};
use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;

use crate::cache::ObjectCache;
use crate::catalog::{Catalog, CatalogError, FileKind, ListedFile, SpanFile};
use crate::compaction::CompactionSettings;
use crate::maintenance::MaintenanceSettings;
use crate::node::NodeId;
use crate::objects::Objects;
use crate::put::{UploadError, io_error, put_rows};
use crate::urls::PostgresUrl;

/// At most this many local files are registered by one transaction.
const FILES_PER_COMMIT: usize = 64;

/// At most this many trace-id indexes of other objects are fetched per cycle.
const INDEXES_PER_CYCLE: usize = 64;

/// A step of the upload commit after which a test may have the process abort, as `kill -9`
/// would stop it (`[storage] fault_for_tests`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// After the first object of a cycle is put, before it is registered.
    AfterPut,
    /// After the registration committed, before the store swaps the files.
    AfterCommit,
    /// After the swap, before the local files are deleted.
    BeforeDelete,
}

impl Fault {
    /// Parses `after_put`, `after_commit`, `before_delete`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "after_put" => Some(Self::AfterPut),
            "after_commit" => Some(Self::AfterCommit),
            "before_delete" => Some(Self::BeforeDelete),
            _ => None,
        }
    }
}

/// The uploader's settings.
#[derive(Debug, Clone)]
pub struct UploadSettings {
    /// This node.
    pub node: NodeId,
    /// `[storage] upload_interval`: files written in a closed interval are uploaded.
    pub interval: Duration,
    /// How long uploaded local files stay on disk after the swap (queries that listed them).
    pub local_grace: Duration,
    /// How often the catalog's listing is read again (other nodes' uploads).
    pub refresh: Duration,
    /// Abort at this step (tests only).
    pub fault: Option<Fault>,
    /// Retention and the janitor ([`crate::maintenance`]); an upload whose objects were put
    /// more than half the janitor's grace ago is not registered (put again next cycle).
    pub maintenance: MaintenanceSettings,
    /// How often the maintenance pass (and compaction) runs.
    pub maintenance_interval: Duration,
    /// Shared compaction (`None`: off), with its scratch files under `data_dir`.
    pub compaction: Option<CompactionSettings>,
    /// The node's data directory.
    pub data_dir: std::path::PathBuf,
}

/// The counters the uploader keeps (registered by the server as `dyeline_storage_*`).
#[derive(Debug, Clone, Default)]
pub struct UploadMetrics {
    /// Local files uploaded and registered.
    pub files: prometheus_client::metrics::counter::Counter,
    /// Their bytes.
    pub bytes: prometheus_client::metrics::counter::Counter,
    /// Cycles that failed (tried again).
    pub failures: prometheus_client::metrics::counter::Counter,
    /// Objects the store lists from the catalog.
    pub listed: prometheus_client::metrics::gauge::Gauge,
    /// Bytes of local files not uploaded yet (the staging).
    pub staged_bytes: prometheus_client::metrics::gauge::Gauge,
    /// Files marked deleted by retention.
    pub expired: prometheus_client::metrics::counter::Counter,
    /// Objects deleted (deleted files' and the janitor's orphans).
    pub deleted_objects: prometheus_client::metrics::counter::Counter,
    /// Objects the janitor deleted (unknown to the catalog).
    pub orphans: prometheus_client::metrics::counter::Counter,
    /// Hours compacted in shared storage by this node.
    pub compacted_hours: prometheus_client::metrics::counter::Counter,
}

impl UploadMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        let r = registry.sub_registry_with_prefix("dyeline_storage");
        r.register(
            "uploaded_files",
            "Local span files uploaded to the object store and registered in the catalog",
            self.files.clone(),
        );
        r.register_with_unit(
            "uploaded",
            "Bytes of local span files uploaded and registered",
            prometheus_client::registry::Unit::Bytes,
            self.bytes.clone(),
        );
        r.register(
            "upload_failures",
            "Upload cycles that failed (the object store or catalog down; tried again)",
            self.failures.clone(),
        );
        r.register(
            "catalog_files",
            "Objects of span rows the catalog lists and this node reads",
            self.listed.clone(),
        );
        r.register(
            "expired_files",
            "Files of the catalog marked deleted by retention",
            self.expired.clone(),
        );
        r.register(
            "deleted_objects",
            "Objects deleted from the object store (deleted files and orphans)",
            self.deleted_objects.clone(),
        );
        r.register(
            "orphan_objects_deleted",
            "Objects the janitor deleted because the catalog does not know them",
            self.orphans.clone(),
        );
        r.register(
            "compacted_hours",
            "Hours of objects this node compacted in shared storage",
            self.compacted_hours.clone(),
        );
        r.register_with_unit(
            "staged",
            "Bytes of local span files not uploaded yet",
            prometheus_client::registry::Unit::Bytes,
            self.staged_bytes.clone(),
        );
    }
}

/// The store's file entry of a listed object.
pub fn listed_meta(
    f: &ListedFile,
    cache: &Arc<ObjectCache>,
    traces: Option<Arc<TraceIndex>>,
) -> Option<FileMeta> {
    let path = cache.path_of(&f.file.key)?;
    Some(FileMeta {
        path,
        hour_start_unix_nano: f.file.hour_unix_nano,
        written_unix_ms: f.file.max_start_unix_nano.div_euclid(1_000_000),
        size: f.file.bytes,
        traces,
        remote: Some(RemoteFile {
            key: f.file.key.clone(),
            node: f.node.clone(),
            objects: Arc::clone(cache) as Arc<dyn RemoteObjects>,
        }),
    })
}

/// Reads the catalog's listing into `store`: the node's local files its checkpoint covers
/// leave the file list (returned, to be deleted by a writer), and the listed objects take the
/// place of those the store held. With `indexes`, loads up to [`INDEXES_PER_CYCLE`] missing
/// trace-id indexes (a one-shot reader such as `dyeline analyze` gains nothing from them),
/// newest hours first.
///
/// # Errors
/// The catalog cannot be read.
pub async fn refresh(
    store: &Store,
    catalog: &Catalog,
    cache: &Arc<ObjectCache>,
    node: Option<&NodeId>,
    indexes: bool,
) -> Result<Vec<FileMeta>, UploadError> {
    let mut covered = Vec::new();
    for rows in [Rows::Spans, Rows::Presence] {
        covered.extend(refresh_rows(store, catalog, cache, node, rows, indexes).await?);
    }
    Ok(covered)
}

/// The catalog kind of `rows`.
pub fn kind_of(rows: Rows) -> FileKind {
    match rows {
        Rows::Spans => FileKind::Spans,
        Rows::Presence => FileKind::Presence,
    }
}

/// [`refresh`] of one kind of rows.
async fn refresh_rows(
    store: &Store,
    catalog: &Catalog,
    cache: &Arc<ObjectCache>,
    node: Option<&NodeId>,
    rows: Rows,
    indexes: bool,
) -> Result<Vec<FileMeta>, UploadError> {
    let listing = catalog.listing(node, kind_of(rows)).await?;
    let covered = match listing.uploaded_through_unix_ms {
        Some(ms) => store.drop_uploaded_through(rows, i64::try_from(ms).unwrap_or(i64::MAX)),
        None => Vec::new(),
    };
    let held: std::collections::HashMap<String, bool> =
        store.remote_keys(rows).into_iter().collect();
    let mut want: Vec<&ListedFile> = listing
        .files
        .iter()
        .filter(|f| {
            indexes
                && f.file.trace_index_key.is_some()
                && held.get(&f.file.key) != Some(&true)
                && !cache.index_tried(&f.file.key)
        })
        .collect();
    want.sort_by_key(|f| std::cmp::Reverse(f.file.hour_unix_nano));
    want.truncate(INDEXES_PER_CYCLE);
    let mut loaded = std::collections::HashMap::new();
    for f in want {
        let Some(k) = &f.file.trace_index_key else {
            continue;
        };
        cache.mark_index_tried(&f.file.key);
        match cache
            .object_store()
            .get(&ObjectPath::from(k.as_str()))
            .await
        {
            Ok(got) => match got.bytes().await.ok().and_then(|b| TraceIndex::decode(&b)) {
                Some(ix) => {
                    loaded.insert(f.file.key.clone(), Arc::new(ix));
                }
                None => {
                    tracing::warn!(key = %k, "trace index object unreadable; the file is never skipped")
                }
            },
            Err(e) => tracing::warn!(key = %k, error = %e, "cannot read a trace index object"),
        }
    }
    let metas: Vec<FileMeta> = listing
        .files
        .iter()
        .filter_map(|f| {
            let meta = listed_meta(f, cache, loaded.get(&f.file.key).cloned());
            if meta.is_none() {
                tracing::warn!(key = %f.file.key, "catalog key outside the cache directory; not read");
            }
            meta
        })
        .collect();
    store.set_remote(rows, metas);
    Ok(covered)
}

/// The background uploader of one node ([module doc](self)).
pub struct Uploader {
    /// The node's store.
    pub store: Arc<Store>,
    /// The object store.
    pub objects: Objects,
    /// The cache objects are read through.
    pub cache: Arc<ObjectCache>,
    /// The catalog's URL.
    pub catalog_url: PostgresUrl,
    /// Settings.
    pub settings: UploadSettings,
    /// Counters.
    pub metrics: UploadMetrics,
    /// The epoch this process owns the node id by, once claimed (the heartbeat writes with
    /// it: [`crate::heartbeat`]).
    pub claimed: tokio::sync::watch::Sender<Option<i64>>,
}

/// A connected catalog and the epoch this process owns the node id by.
struct Session {
    catalog: Catalog,
    epoch: i64,
}

impl Uploader {
    /// Runs until `stop` turns true: connects and claims the node id, then uploads and
    /// refreshes every cycle; every failure waits (1 s doubling to 1 min) and tries again.
    /// Once another process has claimed the node id, it stops uploading (logged as an error).
    pub async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut session: Option<Session> = None;
        let mut pending: Vec<(Instant, Vec<FileMeta>)> = Vec::new();
        let mut wait = Duration::from_secs(1);
        let mut last_refresh = Instant::now() - self.settings.refresh;
        let mut last_maintenance = Instant::now();
        loop {
            let due = Instant::now();
            pending.retain(|(at, files)| {
                if due.duration_since(*at) >= self.settings.local_grace {
                    self.store.delete_local(files.clone());
                    false
                } else {
                    true
                }
            });
            let mut result = self
                .cycle(&mut session, &mut pending, &mut last_refresh)
                .await;
            if result.is_ok() && last_maintenance.elapsed() >= self.settings.maintenance_interval {
                last_maintenance = Instant::now();
                if let Some(s) = &session {
                    result = self.maintain(s).await.and(result);
                    if result.is_ok() {
                        // Compaction swapped objects: list them now, not a refresh later.
                        let relisted = self.relist(&s.catalog, &mut pending, &mut last_refresh);
                        result = relisted.await.and(result);
                    }
                }
            }
            self.metrics
                .staged_bytes
                .set(i64::try_from(self.store.local_file_bytes()).unwrap_or(i64::MAX));
            let listed = self.store.remote_keys(Rows::Spans).len();
            self.metrics
                .listed
                .set(i64::try_from(listed).unwrap_or(i64::MAX));
            let pause = match result {
                Ok(more) => {
                    wait = Duration::from_secs(1);
                    if more {
                        Duration::ZERO
                    } else {
                        self.settings.interval.min(self.settings.refresh)
                    }
                }
                Err(UploadError::Catalog(CatalogError::Fenced { node, epoch })) => {
                    // Claiming it back would fence the other process in turn: stop, loudly.
                    // Local staging fills up to its bound, then writes are refused.
                    tracing::error!(
                        node = %node.as_str(),
                        epoch,
                        "another process has claimed this node id: uploads stop here (two \
                         processes must never share a node id; restart this one with its own)"
                    );
                    return;
                }
                Err(e) => {
                    self.metrics.failures.inc();
                    tracing::warn!(error = %e, retry_in_s = wait.as_secs(), "shared storage unavailable: uploads wait, ingest goes on");
                    if matches!(
                        e,
                        UploadError::Catalog(
                            CatalogError::Connect { .. } | CatalogError::Query { .. }
                        )
                    ) {
                        session = None;
                    }
                    let w = wait;
                    wait = (wait * 2).min(Duration::from_secs(60));
                    w
                }
            };
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                _ = stop.changed() => {}
            }
            if *stop.borrow() {
                return;
            }
        }
    }

    /// [`refresh`] of this node's store (trace indexes loaded): the local files the
    /// checkpoint covers wait in `pending` for deletion, and `last_refresh` is now.
    async fn relist(
        &self,
        catalog: &Catalog,
        pending: &mut Vec<(Instant, Vec<FileMeta>)>,
        last_refresh: &mut Instant,
    ) -> Result<(), UploadError> {
        let node = Some(&self.settings.node);
        let covered = refresh(&self.store, catalog, &self.cache, node, true).await?;
        pending.push((Instant::now(), covered));
        *last_refresh = Instant::now();
        Ok(())
    }

    /// Shared compaction, then the maintenance pass, counted and logged.
    async fn maintain(&self, s: &Session) -> Result<(), UploadError> {
        let catalog = &s.catalog;
        if let Some(settings) = self.settings.compaction {
            let done = crate::compaction::run_pass(
                catalog,
                &self.cache,
                &self.settings.node,
                s.epoch,
                &self.settings.data_dir,
                settings,
            )
            .await?;
            self.metrics.compacted_hours.inc_by(done.len() as u64);
        }
        let pass = crate::maintenance::run_pass(
            catalog,
            self.objects.store.as_ref(),
            self.settings.maintenance,
        )
        .await?;
        if let Some(r) = pass {
            self.metrics.expired.inc_by(r.expired);
            self.metrics
                .deleted_objects
                .inc_by(r.deleted_objects + r.orphans);
            self.metrics.orphans.inc_by(r.orphans);
            if r != crate::maintenance::MaintenanceReport::default() {
                tracing::info!(?r, "shared storage maintenance");
            }
        }
        Ok(())
    }

    /// One cycle; true when more files are due at once.
    async fn cycle(
        &self,
        session: &mut Option<Session>,
        pending: &mut Vec<(Instant, Vec<FileMeta>)>,
        last_refresh: &mut Instant,
    ) -> Result<bool, UploadError> {
        if session.is_none() {
            let catalog = Catalog::connect(&self.catalog_url, 2).await?;
            let epoch = catalog.claim_node(&self.settings.node).await?;
            tracing::info!(node = %self.settings.node.as_str(), epoch, "shared storage: node claimed, uploads start");
            self.claimed.send_replace(Some(epoch));
            self.relist(&catalog, pending, last_refresh).await?;
            *session = Some(Session { catalog, epoch });
        }
        let Some(s) = session.as_ref() else {
            return Ok(false);
        };
        let mut more = self.upload(s, pending, Rows::Spans).await?;
        more |= self.upload(s, pending, Rows::Presence).await?;
        if last_refresh.elapsed() >= self.settings.refresh {
            self.relist(&s.catalog, pending, last_refresh).await?;
        }
        Ok(more)
    }

    /// Uploads and registers the due local files (at most [`FILES_PER_COMMIT`], whole write
    /// times); true when more are due.
    async fn upload(
        &self,
        s: &Session,
        pending: &mut Vec<(Instant, Vec<FileMeta>)>,
        kind: Rows,
    ) -> Result<bool, UploadError> {
        let interval_ms = i64::try_from(self.settings.interval.as_millis())
            .unwrap_or(i64::MAX)
            .max(1);
        let now_ms = dyeline_model::time::now_unix_nano().div_euclid(1_000_000);
        let closed = now_ms.div_euclid(interval_ms) * interval_ms - 1;
        let (cut, mut files) = self.store.upload_cut(kind, closed);
        if files.is_empty() {
            return Ok(false);
        }
        let mut through = cut;
        let mut more = false;
        if files.len() > FILES_PER_COMMIT {
            let last = files[FILES_PER_COMMIT - 1].written_unix_ms;
            let keep = files.partition_point(|f| f.written_unix_ms <= last);
            files.truncate(keep);
            through = last;
            more = true;
        }
        let mut rows = Vec::with_capacity(files.len());
        let mut metas = Vec::with_capacity(files.len());
        let mut bytes = 0u64;
        let put_from = Instant::now();
        for f in &files {
            let (row, meta) = self.put(f, kind).await?;
            if self.settings.fault == Some(Fault::AfterPut) {
                fault("after_put");
            }
            bytes += f.size;
            rows.push(row);
            metas.push(meta);
        }
        // The janitor deletes unknown objects older than its grace: an object put more than
        // half of it ago is left to it and the files are put again next cycle.
        if put_from.elapsed() > self.settings.maintenance.janitor_grace / 2 {
            return Err(UploadError::Local {
                path: format!("{} local files", files.len()),
                reason: "their upload took more than half the janitor's grace; put again".into(),
            });
        }
        let through_u = u64::try_from(through).unwrap_or(0);
        s.catalog
            .register_upload(
                &self.settings.node,
                s.epoch,
                kind_of(kind),
                &rows,
                through_u,
            )
            .await?;
        if self.settings.fault == Some(Fault::AfterCommit) {
            fault("after_commit");
        }
        let gone = self.store.uploaded(kind, through, metas);
        if self.settings.fault == Some(Fault::BeforeDelete) {
            fault("before_delete");
        }
        self.metrics.files.inc_by(files.len() as u64);
        self.metrics.bytes.inc_by(bytes);
        tracing::debug!(?kind, files = files.len(), bytes, through, "uploaded");
        pending.push((Instant::now(), gone));
        Ok(more)
    }

    /// Puts the local file `f` of `kind` and (spans) its trace-id index; returns its catalog
    /// row and the store's entry for the object.
    async fn put(&self, f: &FileMeta, kind: Rows) -> Result<(SpanFile, FileMeta), UploadError> {
        let index = match (kind, f.traces.clone()) {
            (Rows::Presence, _) => None,
            (Rows::Spans, Some(t)) => Some(t),
            (Rows::Spans, None) => {
                let local = f.path.clone();
                let read = tokio::task::spawn_blocking(move || {
                    dyeline_store::file_read::read_trace_index(&local)
                });
                let index = read
                    .await
                    .map_err(|e| io_error(&f.path, &std::io::Error::other(e)))?
                    .map_err(|e| io_error(&f.path, &e))?;
                Some(Arc::new(index))
            }
        };
        let row = put_rows(
            self.objects.store.as_ref(),
            &self.settings.node,
            kind_of(kind),
            f.hour_start_unix_nano,
            &f.path,
            f.size,
            index.as_deref(),
        )
        .await?;
        let listed = ListedFile {
            node: self.settings.node.as_str().to_owned(),
            file: row.clone(),
        };
        let meta = listed_meta(&listed, &self.cache, index).ok_or_else(|| {
            UploadError::Catalog(CatalogError::Invalid(format!(
                "object key {} outside the cache directory",
                row.key
            )))
        })?;
        // The object's bytes are the local file's: its cached copy, so this node reads its
        // own uploads without a GET (and while the bucket is down).
        self.cache.adopt(&f.path, &meta.path);
        Ok((row, meta))
    }
}

fn fault(step: &str) -> ! {
    tracing::error!(step, "fault_for_tests: aborting");
    std::process::abort()
}
