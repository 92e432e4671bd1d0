//! The local cache of objects: readers that read a file whole (the analyzer, through the
//! store's `FileSource`) get an object of shared storage as a local file, fetched once into
//! `DATA_DIR/cache/objects/<key>` and kept within a byte budget, least recently used dropped
//! first. Scans that read byte ranges (SQL, trace lookups) go to the object store directly
//! ([`ObjectCache::object_store`]).
//!
//! A fetch writes under a temporary name and renames, so a reader never opens half an object;
//! two processes sharing a data directory (`serve` and a `dyeline sql` beside it) may both
//! fetch one object, and the later rename wins with the same bytes. Each process keeps its own
//! account of the budget; one may drop a file the other then fetches again.
//!
//! Does not own which objects exist (the catalog) nor how rows are read (the store).

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use parking_lot::Mutex;

/// The cache directory under a data directory.
pub const CACHE_DIR: &str = "cache/objects";

/// The local cache of whole objects ([module doc](self)).
pub struct ObjectCache {
    store: Arc<dyn ObjectStore>,
    dir: PathBuf,
    max_bytes: u64,
    runtime: tokio::runtime::Handle,
    /// Files held: size and last use.
    held: Mutex<HashMap<PathBuf, (u64, Instant)>>,
    /// Objects whose trace-id index was fetched once (kept or dropped by the store's budget
    /// since: not fetched again).
    indexes_tried: Mutex<std::collections::HashSet<String>>,
}

impl fmt::Debug for ObjectCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectCache")
            .field("dir", &self.dir)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl ObjectCache {
    /// A cache of `store`'s objects under `data_dir`/[`CACHE_DIR`], at most `max_bytes`
    /// (an object larger than that is still fetched, and dropped at the next fetch). Fetches
    /// run on `runtime`. Files already there (from an earlier run) are counted, oldest first.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        data_dir: &Path,
        max_bytes: u64,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        let dir = data_dir.join(CACHE_DIR);
        let mut held = HashMap::new();
        let now = Instant::now();
        for (path, size) in files_under(&dir) {
            held.insert(path, (size, now));
        }
        Self {
            store,
            dir,
            max_bytes,
            runtime,
            held: Mutex::new(held),
            indexes_tried: Mutex::default(),
        }
    }

    /// True once [`ObjectCache::mark_index_tried`] was called for the object `key`.
    pub fn index_tried(&self, key: &str) -> bool {
        self.indexes_tried.lock().contains(key)
    }

    /// The trace-id index of the object `key` was fetched (or failed): not again.
    pub fn mark_index_tried(&self, key: &str) {
        self.indexes_tried.lock().insert(key.to_owned());
    }

    /// Where the object `key` is kept, `None` for a key that would leave the cache directory
    /// (an absolute path, `..`).
    pub fn path_of(&self, key: &str) -> Option<PathBuf> {
        let rel = Path::new(key);
        let plain = rel.components().all(|c| matches!(c, Component::Normal(_)));
        (plain && !key.is_empty()).then(|| self.dir.join(rel))
    }

    /// Fetches the object `key` to `path` (outside the cache: not counted, not evicted).
    ///
    /// # Errors
    /// The object cannot be read or the file written.
    pub async fn fetch_to(&self, key: &str, path: &Path) -> io::Result<u64> {
        Self::download(Arc::clone(&self.store), key.to_owned(), path.to_path_buf()).await
    }

    /// Takes the local file `local`, whose bytes were just put as an object, as that object's
    /// cached copy at `cached` (a [`ObjectCache::path_of`]): a hard link, so a node reads its
    /// own recent uploads without a GET, and while the bucket is down. Best effort: a link
    /// that cannot be made (another file system) leaves the object to be fetched when read.
    pub fn adopt(&self, local: &Path, cached: &Path) {
        let linked = cached
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| match std::fs::hard_link(local, cached) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
                other => other,
            })
            .and_then(|()| std::fs::metadata(cached));
        match linked {
            Ok(m) => {
                self.held
                    .lock()
                    .insert(cached.to_path_buf(), (m.len(), Instant::now()));
                self.evict(cached);
            }
            Err(e) => tracing::debug!(
                local = %local.display(),
                error = %e,
                "object cache: an uploaded file not kept as its object's copy"
            ),
        }
    }

    /// Bytes held now.
    pub fn held_bytes(&self) -> u64 {
        self.held.lock().values().map(|(s, _)| s).sum()
    }

    async fn download(store: Arc<dyn ObjectStore>, key: String, path: PathBuf) -> io::Result<u64> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension(format!("{}.tmp", fastrand::u64(..)));
        let result = async {
            let got = store
                .get(&ObjectPath::from(key.as_str()))
                .await
                .map_err(|e| io::Error::other(format!("object {key}: {e}")))?;
            let mut stream = got.into_stream();
            let mut file = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
            let mut bytes = 0u64;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| io::Error::other(format!("object {key}: {e}")))?;
                bytes += chunk.len() as u64;
                file.write_all(&chunk)?;
            }
            file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            Ok(bytes)
        }
        .await;
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    /// Drops least recently used files until the cache fits its budget, keeping `keep`.
    fn evict(&self, keep: &Path) {
        let mut held = self.held.lock();
        let mut total: u64 = held.values().map(|(s, _)| s).sum();
        if total <= self.max_bytes {
            return;
        }
        let mut order: Vec<(Instant, PathBuf, u64)> = held
            .iter()
            .filter(|(p, _)| p.as_path() != keep)
            .map(|(p, (s, t))| (*t, p.clone(), *s))
            .collect();
        order.sort();
        for (_, path, size) in order {
            if total <= self.max_bytes {
                break;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "object cache: cannot drop a file");
                    continue;
                }
            }
            held.remove(&path);
            total -= size;
        }
    }
}

impl dyeline_store::RemoteObjects for ObjectCache {
    fn fetch(&self, key: &str, path: &Path) -> io::Result<()> {
        if let Some(entry) = self.held.lock().get_mut(path) {
            entry.1 = Instant::now();
            if path.exists() {
                return Ok(());
            }
        }
        if let Ok(m) = std::fs::metadata(path) {
            self.held
                .lock()
                .insert(path.to_path_buf(), (m.len(), Instant::now()));
            return Ok(());
        }
        let started = Instant::now();
        let store = Arc::clone(&self.store);
        let (key_owned, path_owned) = (key.to_owned(), path.to_path_buf());
        let runtime = self.runtime.clone();
        // A plain thread blocks on the runtime, so a caller on one of its workers (or on
        // none) never starts a runtime inside a runtime.
        let bytes = std::thread::scope(|s| {
            s.spawn(move || runtime.block_on(Self::download(store, key_owned, path_owned)))
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("object fetch panicked")))
        })?;
        tracing::debug!(
            key,
            bytes,
            ms = started.elapsed().as_millis() as u64,
            "object cache: fetched"
        );
        self.held
            .lock()
            .insert(path.to_path_buf(), (bytes, Instant::now()));
        self.evict(path);
        Ok(())
    }

    fn object_store(&self) -> Arc<dyn ObjectStore> {
        Arc::clone(&self.store)
    }
}

/// The regular files under `dir` (recursively) and their sizes; temporary files are removed.
fn files_under(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                todo.push(path);
            } else if path.to_string_lossy().ends_with(".tmp") {
                let _ = std::fs::remove_file(&path);
            } else {
                out.push((path, meta.len()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dyeline_store::RemoteObjects;
    use object_store::PutPayload;
    use object_store::memory::InMemory;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn objects_are_fetched_once_and_the_least_recently_used_dropped_past_the_budget() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        for (k, n) in [
            ("a/1.parquet", 40),
            ("a/2.parquet", 40),
            ("b/3.parquet", 40),
        ] {
            store
                .put(&ObjectPath::from(k), PutPayload::from(vec![7u8; n]))
                .await
                .unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let cache = ObjectCache::new(
            Arc::clone(&store),
            dir.path(),
            100,
            tokio::runtime::Handle::current(),
        );
        assert_eq!(cache.path_of("../x"), None);
        assert_eq!(cache.path_of("/etc/passwd"), None);
        let p1 = cache.path_of("a/1.parquet").unwrap();
        let p2 = cache.path_of("a/2.parquet").unwrap();
        let p3 = cache.path_of("b/3.parquet").unwrap();
        tokio::task::spawn_blocking(move || {
            cache.fetch("a/1.parquet", &p1).unwrap();
            assert_eq!(std::fs::read(&p1).unwrap(), vec![7u8; 40]);
            cache.fetch("a/2.parquet", &p2).unwrap();
            // 1 used again: 2 is now the least recently used.
            cache.fetch("a/1.parquet", &p1).unwrap();
            assert_eq!(cache.held_bytes(), 80);
            cache.fetch("b/3.parquet", &p3).unwrap();
            assert_eq!(cache.held_bytes(), 80);
            assert!(p1.exists() && !p2.exists() && p3.exists());
            // A missing object is an error naming it, and leaves no temporary file.
            let missing = cache.path_of("a/none.parquet").unwrap();
            let e = cache.fetch("a/none.parquet", &missing).unwrap_err();
            assert!(e.to_string().contains("a/none.parquet"), "{e}");
            let left: Vec<_> = std::fs::read_dir(p1.parent().unwrap())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(left.len(), 1, "{left:?}");
        })
        .await
        .unwrap();
        // A new cache counts what an earlier one left.
        let again = ObjectCache::new(store, dir.path(), 100, tokio::runtime::Handle::current());
        assert_eq!(again.held_bytes(), 80);
    }

    /// An uploaded local file becomes its object's cached copy: read without the store (which
    /// here never held the object), counted in the budget, and kept after the local file goes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_adopted_upload_is_read_without_the_store() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let dir = tempfile::tempdir().unwrap();
        let cache = ObjectCache::new(store, dir.path(), 100, tokio::runtime::Handle::current());
        let local = dir.path().join("part-1.parquet");
        std::fs::write(&local, vec![3u8; 30]).unwrap();
        let cached = cache.path_of("spans/x/1.parquet").unwrap();
        cache.adopt(&local, &cached);
        assert_eq!(cache.held_bytes(), 30);
        std::fs::remove_file(&local).unwrap();
        tokio::task::spawn_blocking(move || {
            cache.fetch("spans/x/1.parquet", &cached).unwrap();
            assert_eq!(std::fs::read(&cached).unwrap(), vec![3u8; 30]);
            // Adopting again (an upload retried) changes nothing.
            cache.adopt(&cached, &cached);
            assert_eq!(cache.held_bytes(), 30);
        })
        .await
        .unwrap();
    }
}
