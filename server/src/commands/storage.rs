//! `dyeline storage check` and the start-up check `dyeline serve` runs in the background
//! when shared storage is configured. The work (self-test, migrations, retries) is
//! `dyeline_storage::check`'s; here are the arguments, the node id's resolution against the
//! data directory, the printing, and the handle `serve` waits on.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Subcommand;
use dyeline_storage::compaction::CompactionSettings;
use dyeline_storage::heartbeat::HeartbeatSettings;
use dyeline_storage::maintenance::MaintenanceSettings;
use dyeline_storage::{CheckSettings, ObjectCache, UploadMetrics, UploadSettings, Uploader};
use dyeline_store::Store;
use prometheus_client::registry::Registry;

use super::BoxError;
use crate::config::{Config, SharedStorage};

/// `dyeline storage …`.
#[derive(Subcommand)]
pub enum StorageCommand {
    /// Check the configured object store and catalog: the store's self-test (it must refuse
    /// to overwrite), the catalog's connection and migrations, this node's id and owner epoch.
    /// Exits non-zero with the reason when one fails.
    Check {
        /// Data directory (where the derived node id is kept).
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
}

impl StorageCommand {
    /// The `--data-dir` given.
    pub fn data_dir(&self) -> Option<&PathBuf> {
        match self {
            Self::Check { data_dir } => data_dir.as_ref(),
        }
    }
}

/// The check's settings: `shared` with the node id resolved (`[cluster] node_id`, else the
/// one kept in the data directory, else one derived from the host name and kept).
fn check_settings(shared: SharedStorage, config: &Config) -> Result<CheckSettings, BoxError> {
    let node = dyeline_storage::node::resolve(shared.node_id.as_ref(), &config.data_dir)
        .map_err(|e| format!("[cluster] node_id: {e}"))?;
    Ok(CheckSettings {
        object_store_url: shared.object_store_url,
        allow_unsafe_overwrite: shared.allow_unsafe_overwrite,
        postgres_url: shared.postgres_url,
        node,
    })
}

/// Runs `command`, printing what was checked.
///
/// # Errors
/// Shared storage not configured, or the first check that failed.
pub async fn run(config: Config, command: &StorageCommand) -> Result<(), BoxError> {
    match command {
        StorageCommand::Check { .. } => {
            let shared = config.shared_storage()?.ok_or(
                "nothing to check: shared storage is off (set [storage] object_store_url and \
                 [catalog] postgres_url)",
            )?;
            let report = dyeline_storage::check(&check_settings(shared, &config)?).await?;
            println!("{report}");
            Ok(())
        }
    }
}

/// For `serve`: when shared storage is configured, starts its check in the background
/// (retried while the store or catalog is down; ingest never waits for it), then the uploader
/// of `store`'s local files until `stop`. The handle ends with `Some(message)` only when the
/// store cannot be used (it overwrites, it cannot be opened). The heartbeat carries `api_url`
/// once the caller has bound the API and set it.
///
/// # Errors
/// A node id that cannot be resolved.
pub fn spawn_shared_storage(
    config: &Config,
    store: &Arc<Store>,
    registry: &mut Registry,
    stop: tokio::sync::watch::Receiver<bool>,
    api_url: Arc<std::sync::OnceLock<String>>,
) -> Result<Option<tokio::task::JoinHandle<Option<String>>>, BoxError> {
    let Some(shared) = config.shared_storage()? else {
        return Ok(None);
    };
    let settings = check_settings(shared.clone(), config)?;
    let metrics = UploadMetrics::default();
    metrics.register(registry);
    let store = Arc::clone(store);
    let data_dir = config.data_dir.clone();
    let local_grace = config.store.compaction_grace;
    let compaction = config.store.compaction.then(|| CompactionSettings {
        lateness: config.store.compaction_lateness,
        target_bytes: config.store.compaction_target_bytes.as_u64(),
        cooldown: config.store.compaction_grace,
        zstd_level: store.config().zstd_level,
    });
    let maintenance = MaintenanceSettings {
        retention: config.store.retention,
        // A reader lists a file up to one refresh after it is marked, then a query on it
        // runs up to the SQL timeout (which `compaction_grace` is at least).
        delete_grace: config.store.compaction_grace + shared.catalog_refresh,
        janitor_grace: shared.janitor_grace,
    };
    Ok(Some(tokio::spawn(async move {
        if let Err(e) = dyeline_storage::check_until_passed(&settings).await {
            return Some(e.to_string());
        }
        let objects = match dyeline_storage::objects::open(&settings.object_store_url) {
            Ok(o) => o,
            Err(e) => return Some(e.to_string()),
        };
        let cache = Arc::new(ObjectCache::new(
            Arc::clone(&objects.store),
            &data_dir,
            shared.cache_max_bytes,
            tokio::runtime::Handle::current(),
        ));
        let data_dir = data_dir.clone();
        let (claimed, epoch) = tokio::sync::watch::channel(None);
        let heartbeat = HeartbeatSettings {
            node: settings.node.clone(),
            catalog_url: settings.postgres_url.clone(),
            interval: shared.heartbeat_interval,
            started_unix_ms: dyeline_model::time::now_unix_ms(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            api_url,
        };
        tokio::spawn(dyeline_storage::heartbeat::run(
            Arc::clone(&store),
            heartbeat,
            epoch,
            stop.clone(),
        ));
        let uploader = Uploader {
            store,
            objects,
            cache,
            catalog_url: settings.postgres_url.clone(),
            settings: UploadSettings {
                node: settings.node.clone(),
                interval: shared.upload_interval,
                local_grace,
                refresh: shared.catalog_refresh,
                fault: shared.fault,
                maintenance,
                maintenance_interval: shared.maintenance_interval,
                compaction,
                data_dir,
            },
            metrics,
            claimed,
        };
        uploader.run(stop).await;
        None
    })))
}

/// The alert loop's cluster port and the election's task (it ends after giving the lease up).
pub type AlertClusterHandle = (
    Arc<dyn dyeline_queries::ports::AlertCluster>,
    tokio::task::JoinHandle<()>,
);

/// For `serve`: in a cluster (shared storage configured) with live alerts on, starts this
/// node's candidacy for alert leader (until `stop`) and returns the alert loop's cluster
/// port; `None` for a single node, whose alerts stay exactly as they were.
///
/// # Errors
/// A node id that cannot be resolved.
pub fn alert_cluster(
    config: &Config,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<Option<AlertClusterHandle>, BoxError> {
    if !config.alerts.enabled {
        return Ok(None);
    }
    let Some(shared) = config.shared_storage()? else {
        return Ok(None);
    };
    let node = dyeline_storage::node::resolve(shared.node_id.as_ref(), &config.data_dir)
        .map_err(|e| format!("[cluster] node_id: {e}"))?;
    let (leader, election) = dyeline_storage::leader::spawn(
        dyeline_storage::leader::ElectionSettings {
            node: node.clone(),
            catalog_url: shared.postgres_url.clone(),
            lease: shared.leader_lease,
        },
        stop,
    );
    let freshness = crate::wiring::alert_cluster::Freshness {
        share: config.alerts.interval * 3 + std::time::Duration::from_secs(2),
        alive: shared.heartbeat_interval * 3,
    };
    Ok(Some((
        Arc::new(crate::wiring::alert_cluster::CatalogAlerts::new(
            leader,
            shared.postgres_url,
            node,
            freshness,
        )),
        election,
    )))
}

/// For `serve`: in a cluster (shared storage configured), the reads that ask the other
/// nodes too (a trace lookup for the whole cluster); `None` for a single node.
///
/// # Errors
/// A node id that cannot be resolved.
pub fn cluster_reads(
    config: &Config,
    store: &Arc<Store>,
) -> Result<Option<Arc<dyeline_queries::cluster_reads::ClusterReads>>, BoxError> {
    let Some(shared) = config.shared_storage()? else {
        return Ok(None);
    };
    let node = dyeline_storage::node::resolve(shared.node_id.as_ref(), &config.data_dir)
        .map_err(|e| format!("[cluster] node_id: {e}"))?;
    let token = config
        .configured_tokens()
        .into_iter()
        .next()
        .map(|t| t.token);
    let peers = crate::wiring::peers::CatalogPeers::new(
        shared.postgres_url,
        node.clone(),
        shared.heartbeat_interval * 3,
        token,
    );
    Ok(Some(Arc::new(
        dyeline_queries::cluster_reads::ClusterReads::new(
            node.as_str().to_owned(),
            Arc::new(peers),
            store.table(),
        ),
    )))
}

/// For `dyeline sql` and `dyeline analyze` on a data directory: when shared storage is
/// configured, `store` (opened read-only) also lists the catalog's objects, and no longer
/// the local files the node's checkpoint says are among them.
///
/// # Errors
/// The catalog cannot be read; the object store cannot be opened.
pub async fn attach_read_only(config: &Config, store: &Store) -> Result<(), BoxError> {
    let Some(shared) = config.shared_storage()? else {
        return Ok(());
    };
    let node = match &shared.node_id {
        Some(n) => Some(n.clone()),
        None => dyeline_storage::node::read_kept(&config.data_dir)
            .map_err(|e| format!("[cluster] node_id: {e}"))?,
    };
    let objects = dyeline_storage::objects::open(&shared.object_store_url)?;
    let cache = Arc::new(ObjectCache::new(
        Arc::clone(&objects.store),
        &config.data_dir,
        shared.cache_max_bytes,
        tokio::runtime::Handle::current(),
    ));
    let catalog = dyeline_storage::Catalog::connect(&shared.postgres_url, 1).await?;
    let refreshed =
        dyeline_storage::uploader::refresh(store, &catalog, &cache, node.as_ref(), false).await;
    catalog.close().await;
    refreshed?;
    Ok(())
}

/// Completes with the start check's fatal message; never when there is no check or it
/// passed.
pub async fn fatal_start_check(check: Option<tokio::task::JoinHandle<Option<String>>>) -> String {
    if let Some(handle) = check
        && let Ok(Some(message)) = handle.await
    {
        return message;
    }
    std::future::pending().await
}
