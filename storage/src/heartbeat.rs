//! The node's heartbeat: every `[cluster] heartbeat_interval`, once the uploader has claimed
//! the node id (it publishes the epoch it owns), the node writes into its catalog row that it
//! is alive, its version, its API's address, its staging bytes and its upload lag ([`Catalog::heartbeat`]).
//! A heartbeat that fails is logged and tried at the next tick; one refused because another
//! process claimed the node id ends the task (the uploader stops too).
//!
//! Does not own the node row's schema or the status read back ([`crate::catalog::nodes`]).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use dyeline_model::time::now_unix_ms;
use dyeline_store::Rows;
use dyeline_store::Store;
use tokio::sync::watch;

use crate::catalog::nodes::Beat;
use crate::catalog::{Catalog, CatalogError};
use crate::node::NodeId;
use crate::urls::PostgresUrl;

/// What [`run`] reports and where.
#[derive(Debug, Clone)]
pub struct HeartbeatSettings {
    /// The node.
    pub node: NodeId,
    /// The catalog.
    pub catalog_url: PostgresUrl,
    /// Time between heartbeats.
    pub interval: Duration,
    /// When this process started, Unix ms.
    pub started_unix_ms: i64,
    /// The binary's version.
    pub version: String,
    /// Where this node's API answers, set once its listener is bound (its port may be chosen
    /// by the OS).
    pub api_url: Arc<OnceLock<String>>,
}

/// What `store` says of its staging area now.
pub fn beat(store: &Store, settings: &HeartbeatSettings) -> Beat {
    let now = now_unix_ms();
    let oldest = [Rows::Spans, Rows::Presence]
        .into_iter()
        .filter_map(|rows| store.oldest_local_written_ms(rows))
        .min();
    Beat {
        started_unix_ms: settings.started_unix_ms,
        version: settings.version.clone(),
        staging_bytes: store.local_file_bytes(),
        upload_lag_ms: oldest.map_or(0, |w| u64::try_from(now - w).unwrap_or(0)),
        api_url: settings.api_url.get().cloned(),
    }
}

/// Sends heartbeats until `stop` turns true, while `epoch` (the uploader's claim) is set.
pub async fn run(
    store: Arc<Store>,
    settings: HeartbeatSettings,
    mut epoch: watch::Receiver<Option<i64>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut catalog: Option<Catalog> = None;
    let mut tick = tokio::time::interval(settings.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            changed = epoch.changed() => {
                if changed.is_err() {
                    return; // the uploader has stopped
                }
            }
            _ = stop.changed() => {}
        }
        if *stop.borrow() {
            return;
        }
        let Some(owned) = *epoch.borrow_and_update() else {
            continue;
        };
        if catalog.is_none() {
            match Catalog::connect(&settings.catalog_url, 1).await {
                Ok(c) => catalog = Some(c),
                Err(e) => {
                    tracing::warn!(error = %e, "heartbeat: catalog unavailable");
                    continue;
                }
            }
        }
        let Some(c) = &catalog else { continue };
        match c
            .heartbeat(&settings.node, owned, &beat(&store, &settings))
            .await
        {
            Ok(()) => {}
            Err(CatalogError::Fenced { .. }) => {
                tracing::error!(node = %settings.node.as_str(), epoch = owned, "heartbeat: another process has claimed this node id; heartbeats stop");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "heartbeat not recorded; next tick tries again");
                if matches!(e, CatalogError::Connect { .. }) {
                    catalog = None;
                }
            }
        }
    }
}
