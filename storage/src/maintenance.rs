//! Retention and the janitor of shared storage: one pass, run by one node at a time (the
//! catalog's maintenance lock), every `[storage] maintenance_interval` by each node's uploader.
//!
//! 1. **Retention**: files registered more than `[store] retention` ago are marked deleted
//!    ([`Catalog::expire`]); readers drop them at their next listing.
//! 2. **Deletion**: files marked deleted at least [`MaintenanceSettings::delete_grace`] ago
//!    (longer than a listing's refresh plus the longest query, so no reader still holds
//!    one) have their objects and trace-index objects deleted, then their rows removed
//!    ([`Catalog::forget`]). A crash in between deletes them again at the next pass.
//! 3. **The janitor**: objects under the prefixes Dyeline writes that the catalog does not
//!    know (put by an upload that never registered: a crash, the catalog down) and older than
//!    [`MaintenanceSettings::janitor_grace`] are deleted. The uploader never registers an
//!    object put more than half that grace ago, so an object the janitor deletes can never be
//!    registered later. This is the one place that lists the bucket; readers never do.
//!
//! Does not own uploads ([`crate::uploader`]) or the catalog's schema ([`crate::catalog`]).

use std::collections::HashSet;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::catalog::Catalog;
use crate::objects::{ObjectsError, PROBE_PREFIX};
use crate::put::UploadError;

/// At most this many deleted files are handled per round trip.
const DELETE_BATCH: u32 = 1000;

/// The key prefixes Dyeline writes under (relative to the store's prefix), which the janitor
/// cleans.
pub const OWN_PREFIXES: [&str; 3] = ["spans/", "presence/", PROBE_PREFIX];

/// The pass's settings.
#[derive(Debug, Clone, Copy)]
pub struct MaintenanceSettings {
    /// `[store] retention`.
    pub retention: Duration,
    /// How long a file marked deleted stays readable.
    pub delete_grace: Duration,
    /// `[storage] janitor_grace`: how old an unknown object must be to be deleted.
    pub janitor_grace: Duration,
}

/// What a pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaintenanceReport {
    /// Files marked deleted by retention.
    pub expired: u64,
    /// Objects of deleted files deleted (files and trace indexes).
    pub deleted_objects: u64,
    /// Rows of deleted files removed.
    pub forgotten: u64,
    /// Unknown objects deleted by the janitor.
    pub orphans: u64,
}

fn objects_error(what: &str, e: &object_store::Error) -> UploadError {
    UploadError::Objects(ObjectsError::Unreachable {
        url: what.to_owned(),
        reason: e.to_string(),
    })
}

async fn delete_object(store: &dyn ObjectStore, key: &str) -> Result<bool, UploadError> {
    match store.delete(&ObjectPath::from(key)).await {
        Ok(()) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(objects_error(&format!("deleting {key}"), &e)),
    }
}

/// One pass ([module doc](self)); `None` when another node holds the maintenance lock.
///
/// # Errors
/// The catalog or the object store failing; the pass is tried again at the next interval.
pub async fn run_pass(
    catalog: &Catalog,
    store: &dyn ObjectStore,
    settings: MaintenanceSettings,
) -> Result<Option<MaintenanceReport>, UploadError> {
    catalog
        .with_maintenance_lock(async {
            let mut report = MaintenanceReport {
                expired: catalog.expire(settings.retention).await?,
                ..MaintenanceReport::default()
            };
            loop {
                let deleted = catalog
                    .deleted_files(settings.delete_grace, DELETE_BATCH)
                    .await?;
                if deleted.is_empty() {
                    break;
                }
                let mut keys = Vec::with_capacity(deleted.len());
                for f in deleted {
                    for k in std::iter::once(&f.key).chain(f.trace_index_key.as_ref()) {
                        report.deleted_objects += u64::from(delete_object(store, k).await?);
                    }
                    keys.push(f.key);
                }
                report.forgotten += catalog.forget(&keys).await?;
            }
            let older_than = chrono::Utc::now()
                - chrono::Duration::from_std(settings.janitor_grace).unwrap_or_default();
            for prefix in OWN_PREFIXES {
                let known: HashSet<String> =
                    catalog.known_keys(prefix).await?.into_iter().collect();
                let listed: Vec<object_store::ObjectMeta> = store
                    .list(Some(&ObjectPath::from(prefix)))
                    .try_collect()
                    .await
                    .map_err(|e| objects_error(&format!("listing {prefix}"), &e))?;
                for meta in listed {
                    let key = meta.location.to_string();
                    if meta.last_modified < older_than && !known.contains(&key) {
                        tracing::info!(
                            key,
                            "janitor: deleting an object the catalog does not know"
                        );
                        report.orphans += u64::from(delete_object(store, &key).await?);
                    }
                }
            }
            Ok::<_, UploadError>(report)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{FileKind, SpanFile};
    use crate::node::NodeId;
    use crate::testkit::{postgres::Postgres, seaweed::Seaweed};
    use object_store::PutPayload;

    fn file(key: &str) -> SpanFile {
        SpanFile {
            key: key.into(),
            kind: FileKind::Spans,
            hour_unix_nano: 0,
            rows: 1,
            bytes: 1,
            min_start_unix_nano: 0,
            max_start_unix_nano: 0,
            trace_index_key: Some(format!("{key}.traces")),
        }
    }

    async fn keys(store: &dyn ObjectStore) -> Vec<String> {
        let mut k: Vec<String> = store
            .list(None)
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        k.sort();
        k
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn retention_deletes_after_the_grace_and_the_janitor_only_old_unknown_objects() {
        let weed = Seaweed::start();
        let pg = Postgres::start();
        let store = weed.store();
        let c = Catalog::connect(&crate::urls::PostgresUrl::parse(&pg.url("pw")).unwrap(), 2)
            .await
            .unwrap();
        let n = NodeId::parse("m-1").unwrap();
        let epoch = c.claim_node(&n).await.unwrap();
        for k in [
            "spans/a.parquet",
            "spans/a.parquet.traces",
            "spans/orphan.parquet",
            "other/mine.txt",
        ] {
            store
                .put(&ObjectPath::from(k), PutPayload::from_static(b"x"))
                .await
                .unwrap();
        }
        c.register_upload(&n, epoch, FileKind::Spans, &[file("spans/a.parquet")], 1)
            .await
            .unwrap();
        let hour = Duration::from_secs(3600);
        let keep_all = MaintenanceSettings {
            retention: hour,
            delete_grace: hour,
            janitor_grace: hour,
        };
        // Nothing past retention, nothing unknown old enough: nothing happens.
        let r = run_pass(&c, store.as_ref(), keep_all)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r, MaintenanceReport::default());
        assert_eq!(keys(store.as_ref()).await.len(), 4);
        // Past retention, within the deletion grace: marked, not deleted.
        let expire = MaintenanceSettings {
            retention: Duration::ZERO,
            ..keep_all
        };
        let r = run_pass(&c, store.as_ref(), expire).await.unwrap().unwrap();
        assert_eq!((r.expired, r.deleted_objects, r.orphans), (1, 0, 0));
        assert!(
            c.live_files(FileKind::Spans, 0, 1)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(keys(store.as_ref()).await.len(), 4);
        // Past the grace: the file's objects go, then its row; the old orphan under a
        // prefix Dyeline writes goes; an object elsewhere in the bucket stays.
        let all = MaintenanceSettings {
            retention: Duration::ZERO,
            delete_grace: Duration::ZERO,
            janitor_grace: Duration::ZERO,
        };
        let r = run_pass(&c, store.as_ref(), all).await.unwrap().unwrap();
        assert_eq!((r.deleted_objects, r.forgotten, r.orphans), (2, 1, 1));
        assert_eq!(keys(store.as_ref()).await, ["other/mine.txt"]);
        assert!(c.known_keys("spans/").await.unwrap().is_empty());
        // One node at a time: a pass inside another's lock does not run.
        let inner = c
            .with_maintenance_lock(async {
                Ok::<_, UploadError>(run_pass(&c, store.as_ref(), all).await.unwrap())
            })
            .await
            .unwrap();
        assert_eq!(inner, Some(None));
    }
}
