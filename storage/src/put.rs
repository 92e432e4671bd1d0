//! Writing objects: their keys (`spans/date=YYYY-MM-DD/hour=HH/node=ID/<ULID>.parquet` and
//! the trace-id index beside it), the conditional create every object is written with, the
//! put of a local file (in parts when large), the put of a file of rows with its index and
//! catalog row ([`put_rows`], for the uploader and compaction), and [`UploadError`], what the
//! writers of shared storage (the uploader, compaction, maintenance) fail with.

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, WriteMultipart};

use dyeline_store::layout::HOUR_NS;
use dyeline_store::trace_index::TraceIndex;

use crate::catalog::{CatalogError, FileKind, SpanFile};
use crate::node::NodeId;
use crate::objects::ObjectsError;

/// Objects of at least this many bytes are put in parts.
pub const MULTIPART_FROM: u64 = 64 * 1024 * 1024;

/// Why an upload cycle failed.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The catalog failed (or fenced this process off).
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The object store failed.
    #[error(transparent)]
    Objects(#[from] ObjectsError),
    /// A local file could not be read.
    #[error("reading {path}: {reason}")]
    Local {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

/// The object key of a file of `hour` (Unix ns) uploaded by `node` under `id`.
pub fn object_key(kind: FileKind, hour_unix_nano: i64, node: &NodeId, id: &str) -> String {
    let secs = hour_unix_nano.div_euclid(1_000_000_000);
    let (date, hour) = match chrono::DateTime::from_timestamp(secs, 0) {
        Some(t) => (t.format("%Y-%m-%d").to_string(), t.format("%H").to_string()),
        None => (
            "invalid".to_owned(),
            "ns".to_owned() + &hour_unix_nano.to_string(),
        ),
    };
    format!(
        "{}/date={date}/hour={hour}/node={}/{id}.parquet",
        kind.as_str(),
        node.as_str()
    )
}

/// The key of the trace-id index object beside the object `key`.
pub fn trace_index_key(key: &str) -> String {
    format!("{}.traces", key.strip_suffix(".parquet").unwrap_or(key))
}

pub(crate) fn io_error(path: &std::path::Path, e: &std::io::Error) -> UploadError {
    UploadError::Local {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

pub(crate) fn store_error(key: &str, e: &object_store::Error) -> UploadError {
    UploadError::Objects(ObjectsError::Unreachable {
        url: format!("key {key}"),
        reason: e.to_string(),
    })
}

pub(crate) async fn put_create(
    store: &dyn ObjectStore,
    key: &str,
    payload: PutPayload,
) -> Result<(), UploadError> {
    let opts = PutOptions {
        mode: PutMode::Create,
        ..PutOptions::default()
    };
    store
        .put_opts(&ObjectPath::from(key), payload, opts)
        .await
        .map(|_| ())
        .map_err(|e| store_error(key, &e))
}

/// Puts the local file at `path` (`size` bytes) under `key`: one conditional create below
/// [`MULTIPART_FROM`], else a multipart upload (S3 offers no conditional create of a multipart
/// upload through this client; the key is a fresh ULID, so nothing is there to overwrite).
pub(crate) async fn put_file(
    store: &dyn ObjectStore,
    key: &str,
    path: &std::path::Path,
    size: u64,
) -> Result<(), UploadError> {
    if size < MULTIPART_FROM {
        let bytes = tokio::fs::read(path)
            .await
            .map_err(|e| io_error(path, &e))?;
        return put_create(store, key, PutPayload::from(bytes)).await;
    }
    let upload = store
        .put_multipart(&ObjectPath::from(key))
        .await
        .map_err(|e| store_error(key, &e))?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, 16 * 1024 * 1024);
    let mut file = tokio::fs::File::open(path)
        .await
        .map_err(|e| io_error(path, &e))?;
    let mut buf = vec![0u8; 8 * 1024 * 1024];
    loop {
        use tokio::io::AsyncReadExt;
        let n = file.read(&mut buf).await.map_err(|e| io_error(path, &e))?;
        if n == 0 {
            break;
        }
        writer
            .wait_for_capacity(4)
            .await
            .map_err(|e| store_error(key, &e))?;
        writer.write(&buf[..n]);
    }
    writer.finish().await.map_err(|e| store_error(key, &e))?;
    Ok(())
}

/// Puts the Parquet file of `kind` rows at `path` (`bytes` long, rows of the hour starting
/// `hour_unix_nano`) under a fresh key of `node`, and `index` (a trace-id index: spans) beside
/// it; returns the catalog row to register. Rows and the first and last time come from the
/// file's footer (the whole hour when its statistics say nothing).
///
/// # Errors
/// The file cannot be read; the object store fails.
pub(crate) async fn put_rows(
    store: &dyn ObjectStore,
    node: &NodeId,
    kind: FileKind,
    hour_unix_nano: i64,
    path: &std::path::Path,
    bytes: u64,
    index: Option<&TraceIndex>,
) -> Result<SpanFile, UploadError> {
    let time = match kind {
        FileKind::Spans => dyeline_model::schema::col::START_TIME_UNIX_NANO,
        FileKind::Presence => dyeline_model::presence::col::TIME_UNIX_NANO,
    };
    let local = path.to_path_buf();
    let (rows, range) = tokio::task::spawn_blocking(move || {
        dyeline_store::file_read::read_start_range(&local, time)
    })
    .await
    .map_err(|e| io_error(path, &std::io::Error::other(e)))?
    .map_err(|e| io_error(path, &e))?;
    let (min, max) = range.unwrap_or((hour_unix_nano, hour_unix_nano.saturating_add(HOUR_NS - 1)));
    let key = object_key(kind, hour_unix_nano, node, &ulid::Ulid::new().to_string());
    put_file(store, &key, path, bytes).await?;
    let mut index_key = None;
    if let Some(index) = index {
        let k = trace_index_key(&key);
        put_create(store, &k, PutPayload::from(index.encode())).await?;
        index_key = Some(k);
    }
    Ok(SpanFile {
        key,
        kind,
        hour_unix_nano,
        rows,
        bytes,
        min_start_unix_nano: min,
        max_start_unix_nano: max,
        trace_index_key: index_key,
    })
}
