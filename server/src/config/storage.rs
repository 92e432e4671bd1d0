//! `[storage]`, `[catalog]` and `[cluster]`: shared span storage (issue 26). Both
//! `[storage] object_store_url` and `[catalog] postgres_url` set turn it on; neither set (the
//! default) is the single-node store as before; one without the other is refused. Environment:
//! `DYELINE_STORAGE__OBJECT_STORE_URL`, `DYELINE_CATALOG__POSTGRES_URL`,
//! `DYELINE_CLUSTER__NODE_ID`, and the standard AWS variables for an `s3://` store. The URLs
//! and the node id are parsed by `dyeline_storage` ([`SharedStorage`]); the PostgreSQL URL is
//! a [`Secret`] (never in `Debug`), and no refusal repeats it.

use std::time::Duration;

use bytesize::ByteSize;
use dyeline_storage::{NodeId, ObjectStoreUrl, PostgresUrl};
use serde::{Deserialize, Serialize};

use super::{ConfigError, Secret, byte_size};

/// `[storage]`: the object store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageSettings {
    /// `s3://bucket/prefix` (endpoint, region and keys from the standard AWS variables) or
    /// `file:///path` (an existing directory). Default none: no shared storage.
    pub object_store_url: Option<String>,
    /// How often local files are uploaded. 1s to 1h. Default `5m`.
    #[serde(with = "humantime_serde")]
    pub upload_interval: Duration,
    /// The largest object one upload writes. 64 MiB to 1 GiB. Default 1 GiB.
    #[serde(deserialize_with = "byte_size")]
    pub upload_max_bytes: ByteSize,
    /// Use an object store that overwrites an existing object on a conditional create (the
    /// start-up self-test refuses it otherwise). Unsafe: two writers could overwrite each
    /// other's objects. Default false.
    pub allow_unsafe_overwrite: bool,
    /// Tests only: lets `upload_max_bytes` go down to 1 KiB, so a test sees several objects
    /// without writing gigabytes. Default false.
    pub small_uploads_for_tests: bool,
    /// The local cache of objects read whole (the analyzer; SQL reads byte ranges), under
    /// `DATA_DIR/cache/objects`. At least 64 MiB. Default 8 GiB.
    #[serde(deserialize_with = "byte_size")]
    pub cache_max_bytes: ByteSize,
    /// How often the catalog's listing is read again, for other nodes' uploads. 1s to 10m.
    /// Default `30s`.
    #[serde(with = "humantime_serde")]
    pub catalog_refresh: Duration,
    /// How often a node runs retention and the janitor (one node at a time). 1s to 1h.
    /// Default `5m`.
    #[serde(with = "humantime_serde")]
    pub maintenance_interval: Duration,
    /// The janitor deletes objects the catalog does not know once they are this old; an
    /// upload that takes half of it is put again. 1s to 7days. Default `1h`.
    #[serde(with = "humantime_serde")]
    pub janitor_grace: Duration,
    /// Tests only: abort the process at a step of the upload commit, as `kill -9` would
    /// (`after_put`, `after_commit`, `before_delete`). Default none.
    pub fault_for_tests: Option<String>,
}

impl Default for StorageSettings {
    fn default() -> Self {
        Self {
            object_store_url: None,
            upload_interval: Duration::from_secs(300),
            upload_max_bytes: ByteSize::gib(1),
            allow_unsafe_overwrite: false,
            small_uploads_for_tests: false,
            cache_max_bytes: ByteSize::gib(8),
            catalog_refresh: Duration::from_secs(30),
            maintenance_interval: Duration::from_secs(300),
            janitor_grace: Duration::from_secs(3600),
            fault_for_tests: None,
        }
    }
}

/// `[catalog]`: the PostgreSQL catalog of the object store's files.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CatalogSettings {
    /// `postgres://user:password@host:port/database`. Default none.
    pub postgres_url: Option<Secret>,
}

/// `[cluster]`: this node among others writing to the same store and catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterSettings {
    /// The node's id in object keys and the catalog: 1 to 63 lowercase letters, digits and
    /// `-`, starting and ending with a letter or digit. Default: derived from the host name
    /// on the first start with shared storage and kept in `DATA_DIR/node_id`.
    pub node_id: Option<String>,
    /// How often the node writes its heartbeat (alive, version, staging bytes, upload lag)
    /// into the catalog, for `dyeline cluster status`. 1s to 1m. Default `5s`.
    #[serde(with = "humantime_serde")]
    pub heartbeat_interval: Duration,
    /// The alert leader's lease: renewed every third of it; the leader stops delivering this
    /// long after its last renewal, and another node takes over once it passed. 2s to 10m.
    /// Default `10s`.
    #[serde(with = "humantime_serde")]
    pub leader_lease: Duration,
    /// Where the other nodes reach this node's API (`http://HOST:PORT`), written in its
    /// heartbeat. Default: the bound API address, with the host name for `0.0.0.0`. Set it
    /// when that name does not resolve from the other nodes (e.g. a Kubernetes pod's DNS name
    /// under its headless Service).
    pub advertise_url: Option<String>,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            node_id: None,
            heartbeat_interval: Duration::from_secs(5),
            leader_lease: Duration::from_secs(10),
            advertise_url: None,
        }
    }
}

/// Shared storage as configured, parsed.
#[derive(Debug, Clone)]
pub struct SharedStorage {
    /// The object store.
    pub object_store_url: ObjectStoreUrl,
    /// The catalog.
    pub postgres_url: PostgresUrl,
    /// `[cluster] node_id`, when set.
    pub node_id: Option<NodeId>,
    /// `[storage] allow_unsafe_overwrite`.
    pub allow_unsafe_overwrite: bool,
    /// `[storage] upload_interval`.
    pub upload_interval: Duration,
    /// `[storage] catalog_refresh`.
    pub catalog_refresh: Duration,
    /// `[storage] cache_max_bytes`.
    pub cache_max_bytes: u64,
    /// `[storage] maintenance_interval`.
    pub maintenance_interval: Duration,
    /// `[storage] janitor_grace`.
    pub janitor_grace: Duration,
    /// `[storage] fault_for_tests`.
    pub fault: Option<dyeline_storage::Fault>,
    /// `[cluster] heartbeat_interval`.
    pub heartbeat_interval: Duration,
    /// `[cluster] leader_lease`.
    pub leader_lease: Duration,
    /// `[cluster] advertise_url`, checked.
    pub advertise_url: Option<String>,
}

impl super::Config {
    /// Shared storage as configured (`[storage]`, `[catalog]`, `[cluster]`), parsed: `None`
    /// when it is off.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key at fault.
    pub fn shared_storage(&self) -> Result<Option<SharedStorage>, ConfigError> {
        shared_storage(&self.storage, &self.catalog, &self.cluster)
    }
}

/// Parses and checks the three sections: `None` when shared storage is off.
///
/// # Errors
/// [`ConfigError::Invalid`] naming the key.
fn shared_storage(
    storage: &StorageSettings,
    catalog: &CatalogSettings,
    cluster: &ClusterSettings,
) -> Result<Option<SharedStorage>, ConfigError> {
    let bad =
        |key: &str, why: &dyn std::fmt::Display| Err(ConfigError::Invalid(format!("{key}: {why}")));
    if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&storage.upload_interval) {
        return bad("[storage] upload_interval", &"must be between 1s and 1h");
    }
    let (floor, floor_text) = if storage.small_uploads_for_tests {
        (ByteSize::kib(1), "1 KiB")
    } else {
        (ByteSize::mib(64), "64 MiB")
    };
    if storage.upload_max_bytes < floor || storage.upload_max_bytes > ByteSize::gib(1) {
        return bad(
            "[storage] upload_max_bytes",
            &format!("must be between {floor_text} and 1 GiB"),
        );
    }
    if storage.cache_max_bytes < ByteSize::mib(64) {
        return bad("[storage] cache_max_bytes", &"must be at least 64 MiB");
    }
    if !(Duration::from_secs(1)..=Duration::from_secs(600)).contains(&storage.catalog_refresh) {
        return bad("[storage] catalog_refresh", &"must be between 1s and 10m");
    }
    if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&storage.maintenance_interval)
    {
        return bad(
            "[storage] maintenance_interval",
            &"must be between 1s and 1h",
        );
    }
    if !(Duration::from_secs(1)..=Duration::from_secs(7 * 86_400)).contains(&storage.janitor_grace)
    {
        return bad("[storage] janitor_grace", &"must be between 1s and 7days");
    }
    if !(Duration::from_secs(1)..=Duration::from_secs(60)).contains(&cluster.heartbeat_interval) {
        return bad("[cluster] heartbeat_interval", &"must be between 1s and 1m");
    }
    if !(Duration::from_secs(2)..=Duration::from_secs(600)).contains(&cluster.leader_lease) {
        return bad("[cluster] leader_lease", &"must be between 2s and 10m");
    }
    let fault = match storage.fault_for_tests.as_deref() {
        None => None,
        Some(f) => match dyeline_storage::Fault::parse(f) {
            Some(f) => Some(f),
            None => {
                return bad(
                    "[storage] fault_for_tests",
                    &format!("{f:?}: expected after_put, after_commit or before_delete"),
                );
            }
        },
    };
    let node_id = match &cluster.node_id {
        Some(id) => match NodeId::parse(id) {
            Ok(id) => Some(id),
            Err(e) => return bad("[cluster] node_id", &e),
        },
        None => None,
    };
    let advertise_url = match &cluster.advertise_url {
        Some(u) => match dyeline_storage::node::parse_advertise_url(u) {
            Ok(u) => Some(u),
            Err(e) => return bad("[cluster] advertise_url", &e),
        },
        None => None,
    };
    let object_store_url = match &storage.object_store_url {
        Some(u) => match ObjectStoreUrl::parse(u) {
            Ok(u) => Some(u),
            Err(e) => return bad("[storage] object_store_url", &e),
        },
        None => None,
    };
    let postgres_url = match &catalog.postgres_url {
        Some(Secret(u)) => match PostgresUrl::parse(u) {
            Ok(u) => Some(u),
            Err(e) => return bad("[catalog] postgres_url", &e),
        },
        None => None,
    };
    match (object_store_url, postgres_url) {
        (None, None) => Ok(None),
        (Some(object_store_url), Some(postgres_url)) => Ok(Some(SharedStorage {
            object_store_url,
            postgres_url,
            node_id,
            allow_unsafe_overwrite: storage.allow_unsafe_overwrite,
            upload_interval: storage.upload_interval,
            catalog_refresh: storage.catalog_refresh,
            cache_max_bytes: storage.cache_max_bytes.as_u64(),
            maintenance_interval: storage.maintenance_interval,
            janitor_grace: storage.janitor_grace,
            fault,
            heartbeat_interval: cluster.heartbeat_interval,
            leader_lease: cluster.leader_lease,
            advertise_url,
        })),
        (Some(_), None) => bad(
            "[catalog] postgres_url",
            &"not set, but [storage] object_store_url is: shared storage needs both",
        ),
        (None, Some(_)) => bad(
            "[storage] object_store_url",
            &"not set, but [catalog] postgres_url is: shared storage needs both",
        ),
    }
}

#[cfg(test)]
mod tests {
    use figment::Figment;

    use super::super::Config;

    const PASSWORD: &str = "hunter2-config";

    /// Loads `toml` (and the jail's variables) as `dyeline` does.
    fn load(jail: &mut figment::Jail, toml: &str) -> Result<Config, String> {
        jail.create_file("dyeline.toml", toml)
            .map_err(|e| e.to_string())?;
        Config::load(Some(std::path::Path::new("dyeline.toml")), Figment::new())
            .map_err(|e| e.to_string())
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's closure returns figment's own error
    fn shared_storage_is_off_by_default_and_on_with_both_urls_from_the_environment() {
        figment::Jail::expect_with(|jail| {
            let off = load(jail, "")?;
            assert!(off.shared_storage().map_err(|e| e.to_string())?.is_none());
            assert_eq!(
                off.storage.upload_interval,
                std::time::Duration::from_secs(300)
            );
            assert_eq!(off.storage.upload_max_bytes, bytesize::ByteSize::gib(1));
            jail.set_env("DYELINE_STORAGE__OBJECT_STORE_URL", "s3://spans/prod");
            jail.set_env(
                "DYELINE_CATALOG__POSTGRES_URL",
                format!("postgres://dyeline:{PASSWORD}@db:5432/catalog"),
            );
            jail.set_env("DYELINE_CLUSTER__NODE_ID", "ingest-2");
            let on = load(jail, "[storage]\nupload_interval = \"2s\"\n")?;
            let shared = on.shared_storage().map_err(|e| e.to_string())?.expect("on");
            assert_eq!(shared.object_store_url.to_string(), "s3://spans/prod");
            assert_eq!(
                shared.postgres_url.to_string(),
                "postgres://dyeline@db:5432/catalog"
            );
            assert_eq!(shared.node_id.expect("set").as_str(), "ingest-2");
            assert_eq!(
                on.storage.upload_interval,
                std::time::Duration::from_secs(2)
            );
            // Secrets are never in the configuration's Debug (nor the parsed settings').
            let shown = format!("{on:?} {:?}", on.shared_storage());
            assert!(!shown.contains(PASSWORD), "{shown}");
            assert!(shown.contains("s3://spans/prod"), "{shown}");
            Ok(())
        });
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's closure returns figment's own error
    fn bad_values_are_refused_naming_the_key_and_never_the_password() {
        figment::Jail::expect_with(|jail| {
            let pg = format!("postgres://u:{PASSWORD}@db/c");
            for (toml, key, says) in [
                (
                    format!(
                        "[storage]\nobject_store_url = \"gs://b/p\"\n[catalog]\npostgres_url = \"{pg}\""
                    ),
                    "[storage] object_store_url",
                    "scheme gs:",
                ),
                (
                    format!(
                        "[storage]\nobject_store_url = \"s3:///p\"\n[catalog]\npostgres_url = \"{pg}\""
                    ),
                    "[storage] object_store_url",
                    "no bucket",
                ),
                (
                    format!(
                        "[storage]\nobject_store_url = \"file:///tmp\"\n[catalog]\npostgres_url = \"mysql://u:{PASSWORD}@db/c\""
                    ),
                    "[catalog] postgres_url",
                    "is not PostgreSQL",
                ),
                (
                    "[storage]\nobject_store_url = \"file:///tmp\"".to_owned(),
                    "[catalog] postgres_url",
                    "needs both",
                ),
                (
                    format!("[catalog]\npostgres_url = \"{pg}\""),
                    "[storage] object_store_url",
                    "needs both",
                ),
                (
                    "[storage]\nupload_max_bytes = \"10 MiB\"".to_owned(),
                    "[storage] upload_max_bytes",
                    "between 64 MiB and 1 GiB",
                ),
                (
                    "[storage]\nupload_max_bytes = \"2 GiB\"".to_owned(),
                    "[storage] upload_max_bytes",
                    "between 64 MiB and 1 GiB",
                ),
                (
                    "[storage]\nupload_interval = \"0s\"".to_owned(),
                    "[storage] upload_interval",
                    "between 1s and 1h",
                ),
                (
                    "[cluster]\nleader_lease = \"1s\"".to_owned(),
                    "[cluster] leader_lease",
                    "between 2s and 10m",
                ),
                (
                    "[cluster]\nleader_lease = \"11m\"".to_owned(),
                    "[cluster] leader_lease",
                    "between 2s and 10m",
                ),
                (
                    "[cluster]\nnode_id = \"Node_1\"".to_owned(),
                    "[cluster] node_id",
                    "is not a node id",
                ),
            ] {
                let e = load(jail, &toml).expect_err(&toml);
                assert!(e.contains(key) && e.contains(says), "{toml}: {e}");
                assert!(!e.contains(PASSWORD), "{toml}: {e}");
            }
            // Tests may lower the object size, and only they.
            let small = load(
                jail,
                "[storage]\nupload_max_bytes = \"4 KiB\"\nsmall_uploads_for_tests = true\n",
            )?;
            assert_eq!(small.storage.upload_max_bytes, bytesize::ByteSize::kib(4));
            Ok(())
        });
    }
}
