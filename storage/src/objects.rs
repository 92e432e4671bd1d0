//! The object store: [`open`] turns an [`ObjectStoreUrl`] into an `object_store` client whose
//! every key lies under the URL's prefix (S3 through `AmazonS3Builder::from_env`, so the
//! standard AWS variables apply; `file://` through the local-filesystem store), and
//! [`self_test`] checks at start-up that the store refuses to overwrite: the upload commit
//! writes each object under a fresh key with a conditional create, and a store that silently
//! overwrites would let two writers replace each other's objects.
//!
//! Does not own what is written (the uploader, later) nor the catalog ([`crate::catalog`]).

use std::sync::Arc;
use std::time::Duration;

use object_store::ClientConfigKey;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::urls::ObjectStoreUrl;

/// The setting that lets a store that overwrites be used anyway (named in the refusal).
pub const ALLOW_UNSAFE_OVERWRITE: &str = "[storage] allow_unsafe_overwrite = true";

/// The key prefix of the self-test's probe objects (under the URL's prefix).
pub const PROBE_PREFIX: &str = "_dyeline/probe";

/// Longest one self-test step may take before the store counts as unreachable.
const STEP_TIMEOUT: Duration = Duration::from_secs(20);

/// Errors opening or checking the object store. Messages name the store by its URL without
/// secrets (AWS keys are never part of it).
#[derive(Debug, thiserror::Error)]
pub enum ObjectsError {
    /// The client could not be built (a bad AWS variable, a missing directory).
    #[error("object store {url}: {reason}")]
    Open {
        /// The store's URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The store did not answer, or answered with an error.
    #[error("object store {url}: unreachable or failing: {reason}")]
    Unreachable {
        /// The store's URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// A conditional create of an existing key succeeded (or conditional creates are not
    /// supported): the store overwrites silently.
    #[error(
        "object store {url} does not refuse to overwrite an existing object ({detail}): \
         refusing it, since two writers could overwrite each other's objects. Setting \
         {ALLOW_UNSAFE_OVERWRITE} uses it anyway, which is unsafe"
    )]
    Overwrites {
        /// The store's URL.
        url: String,
        /// What the second create did.
        detail: String,
    },
}

/// An opened store: the client (keys relative to the URL's prefix) and the URL it came from.
#[derive(Debug, Clone)]
pub struct Objects {
    /// The client; every key is under the URL's prefix.
    pub store: Arc<dyn ObjectStore>,
    /// The URL (prints without secrets).
    pub url: ObjectStoreUrl,
}

/// Opens the store of `url`. Nothing is sent yet (see [`self_test`]).
///
/// # Errors
/// [`ObjectsError::Open`]: an AWS variable the builder refuses, a `file://` directory that
/// does not exist.
pub fn open(url: &ObjectStoreUrl) -> Result<Objects, ObjectsError> {
    let open_error = |reason: String| ObjectsError::Open {
        url: url.to_string(),
        reason,
    };
    let store: Arc<dyn ObjectStore> = match url {
        ObjectStoreUrl::S3 { bucket, prefix } => {
            let builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
            // A plain-HTTP endpoint without AWS_ALLOW_HTTP fails on the first request with
            // only "builder error": say which variable it lacks here instead.
            let config = |key| builder.get_config_value(&key).unwrap_or_default();
            if config(AmazonS3ConfigKey::Endpoint).starts_with("http://")
                && !matches!(
                    config(AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp))
                        .to_ascii_lowercase()
                        .as_str(),
                    "1" | "true" | "on" | "yes" | "y"
                )
            {
                return Err(open_error(
                    "the endpoint (AWS_ENDPOINT_URL) is plain http://: set AWS_ALLOW_HTTP=true \
                     to use it, or use https://"
                        .into(),
                ));
            }
            let s3 = builder.build().map_err(|e| open_error(e.to_string()))?;
            if prefix.is_empty() {
                Arc::new(s3)
            } else {
                Arc::new(PrefixStore::new(s3, prefix.as_str()))
            }
        }
        ObjectStoreUrl::File { path } => {
            if !path.is_dir() {
                return Err(open_error(
                    "the directory does not exist (create it first)".into(),
                ));
            }
            Arc::new(LocalFileSystem::new_with_prefix(path).map_err(|e| open_error(e.to_string()))?)
        }
    };
    Ok(Objects {
        store,
        url: url.clone(),
    })
}

/// The outcome of a self-test that did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelfTest {
    /// The second conditional create was refused: the store is safe.
    RefusesOverwrite,
    /// The store overwrote, and `allow_unsafe_overwrite` let it be used.
    OverwritesAllowed,
}

/// How many probes the self-test writes before it calls a store unsafe: every one of them
/// must have been overwritten. SeaweedFS 4.48 (the test suite's store) now and then accepts
/// a second conditional create of a fresh key while refusing it every other time; a store
/// without conditional creates overwrites every time.
const PROBES: usize = 3;

/// What one probe found.
enum Probe {
    /// The second conditional create was refused with "already exists".
    Refused,
    /// The second conditional create succeeded.
    Overwrote,
    /// The store does not implement conditional creates.
    NotImplemented,
}

/// Writes a probe object under a fresh key with a conditional create (must succeed), writes
/// it again the same way (must fail with "already exists"), then deletes it; up to
/// [`PROBES`] times while the second create succeeds. One refusal makes the store safe (a
/// warning says how many probes it overwrote first); overwriting every probe, or not
/// implementing conditional creates, makes it unsafe.
///
/// # Errors
/// [`ObjectsError::Overwrites`] when every probe was overwritten or conditional creates are
/// not implemented (unless `allow_unsafe_overwrite`); [`ObjectsError::Unreachable`] for any
/// other failure (a timeout, a refused connection, a missing bucket, bad credentials).
pub async fn self_test(
    store: &dyn ObjectStore,
    url: &ObjectStoreUrl,
    allow_unsafe_overwrite: bool,
) -> Result<SelfTest, ObjectsError> {
    for overwritten in 0..PROBES {
        match probe(store, url).await? {
            Probe::Refused => {
                if overwritten > 0 {
                    tracing::warn!(
                        object_store = %url,
                        overwritten,
                        "the object store accepted a second conditional create of a probe \
                         before refusing one: its conditional creates are not reliable"
                    );
                }
                return Ok(SelfTest::RefusesOverwrite);
            }
            Probe::NotImplemented => {
                return overwrites(
                    url,
                    allow_unsafe_overwrite,
                    "it does not support conditional creates",
                );
            }
            Probe::Overwrote => {}
        }
    }
    overwrites(
        url,
        allow_unsafe_overwrite,
        &format!(
            "a second conditional create of the same key succeeded, {PROBES} times of {PROBES}"
        ),
    )
}

/// One probe under a fresh key, deleted afterwards.
async fn probe(store: &dyn ObjectStore, url: &ObjectStoreUrl) -> Result<Probe, ObjectsError> {
    let unreachable = |reason: String| ObjectsError::Unreachable {
        url: url.to_string(),
        reason,
    };
    let key = Path::from(format!(
        "{PROBE_PREFIX}/{:016x}{:016x}",
        fastrand::u64(..),
        fastrand::u64(..)
    ));
    let create = || {
        let opts = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        tokio::time::timeout(
            STEP_TIMEOUT,
            store.put_opts(&key, PutPayload::from_static(b"dyeline probe"), opts),
        )
    };
    match create().await {
        Err(_) => return Err(unreachable(format!("no answer within {STEP_TIMEOUT:?}"))),
        Ok(Err(object_store::Error::NotImplemented { .. })) => return Ok(Probe::NotImplemented),
        Ok(Err(e)) => return Err(unreachable(e.to_string())),
        Ok(Ok(_)) => {}
    }
    let second = match create().await {
        Err(_) => Err(unreachable(format!("no answer within {STEP_TIMEOUT:?}"))),
        Ok(Err(object_store::Error::AlreadyExists { .. })) => Ok(Probe::Refused),
        Ok(Ok(_)) => Ok(Probe::Overwrote),
        Ok(Err(e)) => Err(unreachable(e.to_string())),
    };
    match tokio::time::timeout(STEP_TIMEOUT, store.delete(&key)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(%key, error = %e, "the object store's probe was not deleted"),
        Err(_) => tracing::warn!(%key, "the object store's probe was not deleted in time"),
    }
    second
}

fn overwrites(url: &ObjectStoreUrl, allow: bool, detail: &str) -> Result<SelfTest, ObjectsError> {
    let refusal = ObjectsError::Overwrites {
        url: url.to_string(),
        detail: detail.to_owned(),
    };
    if allow {
        tracing::warn!("{refusal}; used because allow_unsafe_overwrite is set");
        Ok(SelfTest::OverwritesAllowed)
    } else {
        Err(refusal)
    }
}

#[cfg(test)]
mod tests {
    use futures::stream::BoxStream;
    use object_store::{
        CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
        PutMultipartOptions, PutResult,
    };

    use super::*;

    /// A test-only store that drops the condition of every write: the real local store
    /// underneath, each `PutMode::Create` turned into an overwrite. It is what a store that
    /// ignores `If-None-Match` looks like to the self-test.
    /// `overwrites` limits how many creates it turns into overwrites (then it keeps
    /// conditions, as a store whose conditional creates fail now and then).
    #[derive(Debug)]
    struct OverwritingStoreForTests(LocalFileSystem, std::sync::atomic::AtomicUsize);

    impl OverwritingStoreForTests {
        fn new(dir: &std::path::Path, overwrites: usize) -> Self {
            Self(
                LocalFileSystem::new_with_prefix(dir).unwrap(),
                std::sync::atomic::AtomicUsize::new(overwrites),
            )
        }
    }

    impl std::fmt::Display for OverwritingStoreForTests {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "OverwritingStoreForTests({})", self.0)
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for OverwritingStoreForTests {
        async fn put_opts(
            &self,
            location: &Path,
            payload: PutPayload,
            opts: PutOptions,
        ) -> object_store::Result<PutResult> {
            let left = self.1.load(std::sync::atomic::Ordering::SeqCst);
            let opts = if left > 0 {
                self.1.store(left - 1, std::sync::atomic::Ordering::SeqCst);
                PutOptions {
                    mode: PutMode::Overwrite,
                    ..opts
                }
            } else {
                opts
            };
            self.0.put_opts(location, payload, opts).await
        }
        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: PutMultipartOptions,
        ) -> object_store::Result<Box<dyn MultipartUpload>> {
            self.0.put_multipart_opts(location, opts).await
        }
        async fn get_opts(
            &self,
            location: &Path,
            options: GetOptions,
        ) -> object_store::Result<GetResult> {
            self.0.get_opts(location, options).await
        }
        fn delete_stream(
            &self,
            locations: BoxStream<'static, object_store::Result<Path>>,
        ) -> BoxStream<'static, object_store::Result<Path>> {
            self.0.delete_stream(locations)
        }
        fn list(
            &self,
            prefix: Option<&Path>,
        ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
            self.0.list(prefix)
        }
        async fn list_with_delimiter(
            &self,
            prefix: Option<&Path>,
        ) -> object_store::Result<ListResult> {
            self.0.list_with_delimiter(prefix).await
        }
        async fn copy_opts(
            &self,
            from: &Path,
            to: &Path,
            options: CopyOptions,
        ) -> object_store::Result<()> {
            self.0.copy_opts(from, to, options).await
        }
    }

    fn file_url(dir: &std::path::Path) -> ObjectStoreUrl {
        ObjectStoreUrl::parse(&format!("file://{}", dir.display())).unwrap()
    }

    #[tokio::test]
    async fn the_local_store_passes_and_leaves_no_probe() {
        let dir = tempfile::tempdir().unwrap();
        let url = file_url(dir.path());
        let objects = open(&url).unwrap();
        let outcome = self_test(objects.store.as_ref(), &url, false)
            .await
            .unwrap();
        assert_eq!(outcome, SelfTest::RefusesOverwrite);
        let left: Vec<_> = futures::StreamExt::collect::<Vec<_>>(objects.store.list(None)).await;
        assert!(left.is_empty(), "probe objects left: {left:?}");
    }

    #[tokio::test]
    async fn a_store_that_overwrites_is_refused_naming_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let url = file_url(dir.path());
        let store = OverwritingStoreForTests::new(dir.path(), usize::MAX);
        let e = self_test(&store, &url, false)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("allow_unsafe_overwrite = true")
                && e.contains("unsafe")
                && e.contains("overwrite each other")
                && e.contains(&url.to_string()),
            "{e}"
        );
        assert_eq!(
            self_test(&store, &url, true).await.unwrap(),
            SelfTest::OverwritesAllowed
        );
    }

    /// A store that overwrote one probe (two creates) and refused the next passes: only a
    /// store that overwrites every probe is refused.
    #[tokio::test]
    async fn a_store_that_overwrites_once_then_refuses_passes() {
        let dir = tempfile::tempdir().unwrap();
        let url = file_url(dir.path());
        let store = OverwritingStoreForTests::new(dir.path(), 2);
        assert_eq!(
            self_test(&store, &url, false).await.unwrap(),
            SelfTest::RefusesOverwrite
        );
        let store = OverwritingStoreForTests::new(dir.path(), 2 * PROBES);
        let e = self_test(&store, &url, false).await.unwrap_err();
        assert!(matches!(e, ObjectsError::Overwrites { .. }), "{e}");
        assert!(e.to_string().contains("3 times of 3"), "{e}");
        let left: Vec<_> = futures::StreamExt::collect::<Vec<_>>(store.list(None)).await;
        assert!(left.is_empty(), "probe objects left: {left:?}");
    }

    #[test]
    fn a_missing_directory_is_refused_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let url = file_url(&dir.path().join("absent"));
        let e = open(&url).unwrap_err().to_string();
        assert!(e.contains("absent") && e.contains("does not exist"), "{e}");
    }

    #[tokio::test]
    async fn seaweedfs_passes_and_leaves_no_probe() {
        let weed = crate::testkit::seaweed::Seaweed::start();
        let store = weed.store();
        let url = ObjectStoreUrl::parse("s3://dyeline").unwrap();
        assert_eq!(
            self_test(store.as_ref(), &url, false).await.unwrap(),
            SelfTest::RefusesOverwrite
        );
        let left: Vec<_> = futures::StreamExt::collect::<Vec<_>>(store.list(None)).await;
        assert!(left.is_empty(), "probe objects left: {left:?}");
    }

    #[tokio::test]
    async fn a_stopped_bucket_is_unreachable_not_unsafe() {
        let mut weed = crate::testkit::seaweed::Seaweed::start();
        let store = weed.store();
        weed.stop();
        let url = ObjectStoreUrl::parse("s3://dyeline/p").unwrap();
        let e = self_test(store.as_ref(), &url, false).await.unwrap_err();
        assert!(matches!(e, ObjectsError::Unreachable { .. }), "{e}");
        assert!(e.to_string().contains("s3://dyeline/p"), "{e}");
    }
}
