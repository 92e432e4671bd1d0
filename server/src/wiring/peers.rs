//! The queries' [`Peers`] port over the catalog and HTTP: the other live nodes are those
//! whose heartbeat is recent and that said where their API answers (`nodes.api_url`); each is
//! asked concurrently, with this node's API token (the nodes of a cluster share their
//! tokens) and a timeout, for its own rows of a trace (`GET /api/v1/cluster/traces/{id}/rows`).
//! With the catalog unreachable no peer is known: the read answers from this node's store
//! (every uploaded object included) and says no node was unheard.

use std::time::Duration;

use async_trait::async_trait;
use dyeline_queries::ports::{PeerAnswer, Peers};
use dyeline_storage::node::NodeId;
use dyeline_storage::{Catalog, PostgresUrl};

/// How long a peer may take to answer.
const PEER_TIMEOUT: Duration = Duration::from_secs(5);

/// The other nodes, found in the catalog at `url`.
pub struct CatalogPeers {
    url: PostgresUrl,
    node: NodeId,
    alive: Duration,
    token: Option<String>,
    client: reqwest::Client,
    catalog: tokio::sync::Mutex<Option<Catalog>>,
}

impl CatalogPeers {
    /// The peers of `node`: nodes whose heartbeat is younger than `alive`, asked with
    /// `token` when there is one.
    pub fn new(url: PostgresUrl, node: NodeId, alive: Duration, token: Option<String>) -> Self {
        Self {
            url,
            node,
            alive,
            token,
            client: reqwest::Client::builder()
                .timeout(PEER_TIMEOUT)
                .build()
                .unwrap_or_default(),
            catalog: tokio::sync::Mutex::new(None),
        }
    }

    /// (node id, API base URL) of every other live node that said where its API answers.
    async fn live(&self) -> Result<Vec<(String, String)>, String> {
        let catalog = {
            let mut c = self.catalog.lock().await;
            match &*c {
                Some(c) => c.clone(),
                None => {
                    let connected = Catalog::connect(&self.url, 2)
                        .await
                        .map_err(|e| e.to_string())?;
                    *c = Some(connected.clone());
                    connected
                }
            }
        };
        let nodes = catalog.nodes().await.map_err(|e| e.to_string())?;
        Ok(nodes
            .into_iter()
            .filter(|n| n.node_id != self.node.as_str())
            .filter(|n| {
                n.heartbeat_age_s
                    .is_some_and(|a| a < self.alive.as_secs_f64())
            })
            .filter_map(|n| Some((n.node_id, n.api_url?)))
            .collect())
    }

    async fn ask(&self, node: String, url: String) -> PeerAnswer {
        let mut req = self.client.get(url);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let unreachable = |error: String| PeerAnswer::Unreachable {
            node: node.clone(),
            error,
        };
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => return unreachable(e.to_string()),
        };
        if !resp.status().is_success() {
            return unreachable(format!("answered {}", resp.status()));
        }
        match resp.bytes().await {
            Ok(b) => PeerAnswer::Rows {
                node: node.clone(),
                ipc: b.to_vec(),
            },
            Err(e) => unreachable(e.to_string()),
        }
    }
}

#[async_trait]
impl Peers for CatalogPeers {
    async fn trace_rows(&self, trace_id: &str) -> Vec<PeerAnswer> {
        let live = match self.live().await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "the cluster's nodes not read: answering from this node's store");
                return Vec::new();
            }
        };
        let asks = live.into_iter().map(|(node, base)| {
            let url = format!(
                "{}/api/v1/cluster/traces/{trace_id}/rows",
                base.trim_end_matches('/')
            );
            self.ask(node, url)
        });
        futures::future::join_all(asks).await
    }
}
