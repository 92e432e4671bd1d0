//! Files kept in shared storage (issue 26), as the store handles them: a [`FileMeta`] whose
//! `remote` is a [`RemoteFile`](crate::object::RemoteFile) is an object in the bucket, listed
//! by the catalog ([`crate::object`] has the vocabulary). The store's file list holds its
//! local files and these side by side, so a query's snapshot reads each row once, wherever it
//! is.
//!
//! And the store's half of the upload commit: which local files are due ([`Store::upload_cut`]:
//! every file written at or before a cut, and no file written later is ever named at or before
//! it), the swap of uploaded local files for their objects under the one lock
//! ([`Store::uploaded`]), the catalog's listing put in place ([`Store::set_remote`]) and the
//! local files dropped once they are covered ([`Store::drop_uploaded_through`]).
//!
//! Does not own the upload itself, the catalog or the cache (`dyeline_storage`).

use std::collections::HashSet;
use std::io;

use crate::Store;
use crate::layout::{FileMeta, now_unix_ms};
use crate::object::Rows;
use crate::state::{Shared, WriteNames};

impl WriteNames {
    /// The write time to name the files of a flush by: now, or the floor a cut set if the
    /// clock is behind it. Pair with [`WriteNames::end_write`] once the files are listed.
    pub(crate) fn begin_write(names: &parking_lot::Mutex<Self>) -> i64 {
        let mut n = names.lock();
        let ms = now_unix_ms().max(n.floor_ms);
        n.in_flight = Some(ms);
        ms
    }

    /// The flush's files are in the file list (or it failed).
    pub(crate) fn end_write(names: &parking_lot::Mutex<Self>) {
        names.lock().in_flight = None;
    }
}

impl Shared {
    /// [`WriteNames::begin_write`] of the span files.
    pub(crate) fn begin_write(&self) -> i64 {
        WriteNames::begin_write(&self.names)
    }

    /// [`WriteNames::end_write`] of the span files.
    pub(crate) fn end_write(&self) {
        WriteNames::end_write(&self.names);
    }
}

impl Store {
    /// The local files an upload may take now: every local file written at or before the
    /// returned cut, which is `upto_ms` or just before a file being written. Files written
    /// later are named after the cut (the flusher's names are raised past it), so "every local
    /// file written at or before the cut" stays exact: a checkpoint at the cut covers them all.
    /// Ordered by write time, then path.
    pub fn upload_cut(&self, rows: Rows, upto_ms: i64) -> (i64, Vec<FileMeta>) {
        let cut = {
            let mut n = self.names(rows).lock();
            let cut = n
                .in_flight
                .map_or(upto_ms, |w| upto_ms.min(w.saturating_sub(1)));
            n.floor_ms = n.floor_ms.max(cut.saturating_add(1));
            cut
        };
        let mut files: Vec<FileMeta> = self.with_files(rows, |files| {
            files
                .iter()
                .filter(|f| f.is_local() && f.written_unix_ms <= cut)
                .cloned()
                .collect()
        });
        files.sort_by(|a, b| (a.written_unix_ms, &a.path).cmp(&(b.written_unix_ms, &b.path)));
        (cut, files)
    }

    /// An upload is registered: under the one lock, the local files written at or before
    /// `through_ms` leave the file list and `objects` (which hold their rows) join it, so a
    /// query sees one or the other. Returns the local files taken out, to be deleted once no
    /// query can still be reading them ([`Store::delete_local`]).
    pub fn uploaded(&self, rows: Rows, through_ms: i64, objects: Vec<FileMeta>) -> Vec<FileMeta> {
        self.with_files(rows, |files| {
            let (gone, keep): (Vec<FileMeta>, Vec<FileMeta>) = files
                .drain(..)
                .partition(|f| f.is_local() && f.written_unix_ms <= through_ms);
            *files = keep;
            let known: HashSet<String> = files
                .iter()
                .filter_map(|f| f.remote.as_ref().map(|r| r.key.clone()))
                .collect();
            files.extend(
                objects
                    .into_iter()
                    .filter(|f| f.remote.as_ref().is_some_and(|r| !known.contains(&r.key))),
            );
            gone
        })
    }

    /// The local files written at or before `through_ms` leave the file list (their rows are
    /// in registered objects: the node's checkpoint covers them); returned for deletion.
    pub fn drop_uploaded_through(&self, rows: Rows, through_ms: i64) -> Vec<FileMeta> {
        self.uploaded(rows, through_ms, Vec::new())
    }

    /// Puts the catalog's listing of objects in place of the objects the file list held (one
    /// lock: a query sees the old listing or the new one). A listed object keeps the trace
    /// index it already had when `objects` brings none.
    pub fn set_remote(&self, rows: Rows, objects: Vec<FileMeta>) {
        self.with_files(rows, |files| {
            let (old, mut kept): (Vec<FileMeta>, Vec<FileMeta>) =
                files.drain(..).partition(|f| !f.is_local());
            let mut seen = HashSet::new();
            for mut f in objects {
                let Some(key) = f.remote.as_ref().map(|r| r.key.clone()) else {
                    continue;
                };
                if !seen.insert(key.clone()) {
                    continue;
                }
                if f.traces.is_none() {
                    f.traces = old
                        .iter()
                        .find(|o| o.remote.as_ref().is_some_and(|r| r.key == key))
                        .and_then(|o| o.traces.clone());
                }
                kept.push(f);
            }
            *files = kept;
        });
    }

    /// The keys of the objects in the file list, with whether each holds a trace index.
    pub fn remote_keys(&self, rows: Rows) -> Vec<(String, bool)> {
        self.with_files(rows, |files| {
            files
                .iter()
                .filter_map(|f| {
                    f.remote
                        .as_ref()
                        .map(|r| (r.key.clone(), f.traces.is_some()))
                })
                .collect()
        })
    }

    /// The write-name fence of `rows`' files.
    fn names(&self, rows: Rows) -> &parking_lot::Mutex<WriteNames> {
        match rows {
            Rows::Spans => &self.shared.names,
            Rows::Presence => self.presence.names(),
        }
    }

    /// Runs `f` on `rows`' file list under its lock (for spans, then the trace-index budget
    /// and gauges are applied again).
    fn with_files<T>(&self, rows: Rows, f: impl FnOnce(&mut Vec<FileMeta>) -> T) -> T {
        match rows {
            Rows::Spans => {
                let mut s = self.shared.state.write();
                let out = f(&mut s.files);
                self.shared.files_changed(&mut s);
                out
            }
            Rows::Presence => self.presence.with_files(f),
        }
    }

    /// Deletes local files taken out of the file list ([`Store::uploaded`]), and their hour
    /// directories once empty. Does nothing in a read-only store.
    pub fn delete_local(&self, files: Vec<FileMeta>) {
        if self.config.read_only || !self.config.persist {
            return;
        }
        for f in files.into_iter().filter(FileMeta::is_local) {
            match std::fs::remove_file(&f.path) {
                Ok(()) => tracing::debug!(path = %f.path.display(), "uploaded: local file deleted"),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %f.path.display(), error = %e, "uploaded: cannot delete the local file");
                }
            }
            if let Some(dir) = f.path.parent() {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }

    /// The write time (Unix ms) of the oldest local file of `rows` not uploaded yet, if any:
    /// how long uploads lag behind (a heartbeat's `upload_lag_ms`).
    pub fn oldest_local_written_ms(&self, rows: Rows) -> Option<i64> {
        let oldest = |files: &Vec<FileMeta>| {
            files
                .iter()
                .filter(|f| f.is_local())
                .map(|f| f.written_unix_ms)
                .min()
        };
        match rows {
            Rows::Spans => oldest(&self.shared.state.read().files),
            Rows::Presence => self.presence.with_files(|files| oldest(files)),
        }
    }

    /// Bytes of the local Parquet files in the file list (the staging the uploader drains).
    pub fn local_file_bytes(&self) -> u64 {
        self.shared
            .local_file_bytes
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// True while the local files take [`StoreConfig::staging_max_bytes`] or more.
    ///
    /// [`StoreConfig::staging_max_bytes`]: crate::StoreConfig::staging_max_bytes
    pub(crate) fn staging_full(&self) -> bool {
        self.local_file_bytes() >= self.config.staging_max_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{RemoteFile, RemoteObjects};
    use crate::test_support::{open_unsynced, write};
    use object_store::ObjectStore;
    use object_store::local::LocalFileSystem;
    use std::path::Path;
    use std::sync::Arc;

    /// Stands in for the `storage` crate's cache (tested there against SeaweedFS): a
    /// directory plays the bucket, and a fetch copies the object into place.
    #[derive(Debug)]
    struct DirObjects(std::path::PathBuf);

    impl RemoteObjects for DirObjects {
        fn fetch(&self, key: &str, path: &Path) -> io::Result<()> {
            std::fs::create_dir_all(path.parent().unwrap())?;
            std::fs::copy(self.0.join(key), path).map(|_| ())
        }

        fn object_store(&self) -> Arc<dyn ObjectStore> {
            Arc::new(LocalFileSystem::new_with_prefix(&self.0).unwrap())
        }
    }

    async fn count(store: &Store) -> (i64, i64) {
        let ctx = datafusion::prelude::SessionContext::new();
        ctx.register_table("spans", store.table()).unwrap();
        let batches = ctx
            .sql("SELECT count(*) AS n, count(DISTINCT span_id) AS d FROM spans")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let b = &batches[0];
        let get = |i: usize| {
            b.column(i)
                .as_any()
                .downcast_ref::<arrow::array::Int64Array>()
                .unwrap()
                .value(0)
        };
        (get(0), get(1))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn uploaded_files_are_read_once_from_their_objects_and_later_files_named_after_the_cut() {
        let dir = tempfile::tempdir().unwrap();
        let bucket = tempfile::tempdir().unwrap();
        let store = open_unsynced(dir.path());
        write(&store, 0, 100).await;
        store.flush().await.unwrap();
        // A cut a minute ahead of the clock: a file written after it must still be named
        // after it, or a checkpoint at the cut would cover a file never uploaded.
        let cut_at = now_unix_ms() + 60_000;
        let (cut, files) = store.upload_cut(Rows::Spans, cut_at);
        assert_eq!(cut, cut_at);
        assert_eq!(files.len(), 1);
        let objects: Arc<dyn RemoteObjects> = Arc::new(DirObjects(bucket.path().to_path_buf()));
        let key = "spans/date=x/hour=y/node=n1/01.parquet".to_owned();
        std::fs::create_dir_all(bucket.path().join("spans/date=x/hour=y/node=n1")).unwrap();
        std::fs::copy(&files[0].path, bucket.path().join(&key)).unwrap();
        let object = FileMeta {
            path: dir.path().join("cache").join(&key),
            remote: Some(RemoteFile {
                key: key.clone(),
                node: "n1".into(),
                objects: Arc::clone(&objects),
            }),
            ..files[0].clone()
        };
        let gone = store.uploaded(Rows::Spans, cut, vec![object.clone()]);
        assert_eq!(gone, files);
        assert_eq!(count(&store).await, (100, 100));
        write(&store, 100, 50).await;
        store.flush().await.unwrap();
        let later: Vec<FileMeta> = store
            .snapshot()
            .files
            .into_iter()
            .filter(FileMeta::is_local)
            .collect();
        assert_eq!(later.len(), 1);
        assert!(
            later[0].written_unix_ms > cut,
            "{later:?} named at or before {cut}"
        );
        // SQL reads the object by ranges, the local file as before: each row once.
        assert_eq!(count(&store).await, (150, 150));
        // A reader of whole files gets the object through the cache.
        let src = crate::file_read::FileSource::new(object.clone());
        let rows: usize = src
            .open(&[dyeline_model::schema::col::SPAN_ID], &[])
            .unwrap()
            .reader
            .map(|b| b.unwrap().num_rows())
            .sum();
        assert_eq!(rows, 100);
        assert!(object.path.exists());
        // The catalog's listing replaces the objects held, and only them.
        store.set_remote(Rows::Spans, Vec::new());
        assert_eq!(count(&store).await, (50, 50));
        store.set_remote(Rows::Spans, vec![object.clone(), object]);
        assert_eq!(count(&store).await, (150, 150));
        assert_eq!(store.local_file_bytes(), later[0].size);
        store.delete_local(gone);
        assert!(!files[0].path.exists());
        crate::test_support::close(store).await;
    }
}
