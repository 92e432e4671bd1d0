//! Reads that answer for the whole cluster from any node (issue 27, item 4), trace lookup
//! first. Every row of a cluster is held by exactly one node: the one that received it, in
//! its memory and local files until it uploads them, then as objects it registered (a
//! compaction's output is registered by the node that compacted). A node asks every other
//! live node ([`Peers`]) for its rows of a trace ([`ClusterReads::own_trace_rows`] answers on
//! the other side) and reads its own store for the rest: its own rows and the objects of the
//! nodes that did not answer (their rows not uploaded yet are then missing, and the answer
//! says which nodes were not heard). So a trace whose spans another node has not uploaded
//! yet (for up to `[storage] upload_interval`) is found anyway, and no row is read twice.
//!
//! Does not own how the peers are reached (the server's wiring) nor how a trace is shown
//! ([`crate::drilldown`]).

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use datafusion::catalog::TableProvider;
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use dyeline_store::table::SpansTable;
use futures::StreamExt;

use crate::ports::{PeerAnswer, Peers};
use crate::sql::SqlError;

fn internal(e: impl std::fmt::Display) -> SqlError {
    SqlError::Internal(e.to_string())
}

/// This node's side of cluster-wide reads.
pub struct ClusterReads {
    node: String,
    peers: Arc<dyn Peers>,
    spans: Arc<SpansTable>,
}

/// A trace's session for the whole cluster ([`ClusterReads::trace_context`]).
pub struct ClusterTrace {
    /// A session whose `spans` holds this node's rows and every answering node's (and the
    /// `presence` table of the base session, when it has one).
    pub ctx: SessionContext,
    /// Nodes that did not answer: their rows not uploaded yet are missing.
    pub unheard: Vec<String>,
}

impl ClusterReads {
    /// Node `node`'s reads over its store's `spans`, asking `peers`.
    pub fn new(node: String, peers: Arc<dyn Peers>, spans: Arc<SpansTable>) -> Self {
        Self { node, peers, spans }
    }

    /// The rows of trace `trace_id` this node holds itself, as an Arrow IPC stream (what a
    /// peer asks of it). `trace_id` is 32 lower-case hex digits.
    ///
    /// # Errors
    /// [`SqlError::Syntax`] for a malformed id; [`SqlError::Internal`] when the scan fails.
    pub async fn own_trace_rows(&self, trace_id: &str) -> Result<Vec<u8>, SqlError> {
        let id = crate::drilldown::normalize_trace_id(trace_id)?;
        let ctx = SessionContext::new();
        ctx.register_table("spans", Arc::new(self.spans.own(&self.node)))
            .map_err(internal)?;
        let mut stream = ctx
            .sql(&format!("SELECT * FROM spans WHERE trace_id = '{id}'"))
            .await
            .map_err(internal)?
            .execute_stream()
            .await
            .map_err(internal)?;
        let schema = stream.schema();
        let mut out = Vec::new();
        let mut w = StreamWriter::try_new(&mut out, &schema).map_err(internal)?;
        while let Some(b) = stream.next().await {
            w.write(&b.map_err(internal)?).map_err(internal)?;
        }
        w.finish().map_err(internal)?;
        drop(w);
        Ok(out)
    }

    /// A session over every node's rows of trace `trace_id` for [`crate::drilldown::trace`]:
    /// the peers' answers beside this node's store without the objects of the nodes that
    /// answered (they sent those rows themselves). `base` lends its `presence` table.
    ///
    /// # Errors
    /// [`SqlError::Internal`] when the session cannot be built.
    pub async fn trace_context(
        &self,
        base: &SessionContext,
        trace_id: &str,
    ) -> Result<ClusterTrace, SqlError> {
        let answers = self.peers.trace_rows(trace_id).await;
        let schema = TableProvider::schema(self.spans.as_ref());
        let mut answered = Vec::new();
        let mut unheard = Vec::new();
        let mut batches: Vec<RecordBatch> = Vec::new();
        for a in answers {
            match a {
                PeerAnswer::Rows { node, ipc } => match decode(&ipc) {
                    Ok(b) if b.iter().all(|b| b.schema().fields() == schema.fields()) => {
                        batches.extend(b);
                        answered.push(node);
                    }
                    Ok(_) => {
                        tracing::warn!(node, "a peer's trace rows have another schema");
                        unheard.push(node);
                    }
                    Err(e) => {
                        tracing::warn!(node, error = %e, "a peer's trace rows are unreadable");
                        unheard.push(node);
                    }
                },
                PeerAnswer::Unreachable { node, error } => {
                    tracing::warn!(node, error, "a peer did not answer for a trace");
                    unheard.push(node);
                }
            }
        }
        let ctx = SessionContext::new();
        ctx.register_table("spans_here", Arc::new(self.spans.without(&answered)))
            .map_err(internal)?;
        let peers = MemTable::try_new(Arc::clone(&schema), vec![batches]).map_err(internal)?;
        ctx.register_table("spans_peers", Arc::new(peers))
            .map_err(internal)?;
        let union = ctx
            .table("spans_here")
            .await
            .map_err(internal)?
            .union(ctx.table("spans_peers").await.map_err(internal)?)
            .map_err(internal)?;
        ctx.register_table("spans", union.into_view())
            .map_err(internal)?;
        if let Ok(p) = base.table_provider("presence").await {
            ctx.register_table("presence", p).map_err(internal)?;
        }
        Ok(ClusterTrace { ctx, unheard })
    }
}

/// The record batches of an Arrow IPC stream.
fn decode(ipc: &[u8]) -> Result<Vec<RecordBatch>, arrow::error::ArrowError> {
    StreamReader::try_new(std::io::Cursor::new(ipc), None)?.collect()
}
