//! The DataFusion table `spans`: the store's memory segments ∪ its Parquet files.
//!
//! Memory segments are decoded one at a time while a scan streams through them (never all at
//! once); segments whose start-time range misses the filters are skipped undecoded.
//!
//! Filters on `start_time_unix_nano` (`=`, `<`, `<=`, `>`, `>=`, `BETWEEN`, with integer
//! literals) prune Parquet files by hour partition before the scan; every filter is also handed
//! to the Parquet reader for row-group pruning. Filters are reported as inexact, so DataFusion
//! still applies them to every row. Filters `trace_id = '…'` and `trace_id IN (…)` skip the
//! segments and files whose [`crate::trace_index::TraceIndex`] lacks every id. File footers, page indexes and bloom filters are kept in
//! the session's metadata cache, so repeated lookups (a trace by id) read only the data pages.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::CachedParquetFileReaderFactory;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::union::UnionExec;
use dyeline_model::schema::{col, spans_schema};

use crate::layout::FileMeta;
use crate::segment::Segment;
use crate::state::Shared;
use crate::trace_index::may_hold_any;

/// A partition of memory segments, decoded lazily as the scan pulls batches.
#[derive(Debug)]
struct SegmentPartition {
    schema: SchemaRef,
    segments: Vec<Segment>,
}

impl PartitionStream for SegmentPartition {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let decoded = self
            .segments
            .clone()
            .into_iter()
            .map(|seg| seg.decode().map_err(Into::into));
        Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            futures::stream::iter(decoded),
        ))
    }
}

/// The `spans` table provider.
pub struct SpansTable {
    shared: Arc<Shared>,
    schema: SchemaRef,
    /// The store's presence rows (domain §7.1), read by the analyzer beside the spans.
    presence: Option<Arc<crate::presence::PresenceLog>>,
    /// Which nodes' objects of shared storage the table reads ([`SpansTable::own`],
    /// [`SpansTable::without`]).
    nodes: NodeFilter,
}

/// The objects of shared storage a table reads, by the node that registered them.
#[derive(Debug, Clone, Default)]
enum NodeFilter {
    /// Every node's.
    #[default]
    All,
    /// This node's only.
    Only(String),
    /// All but these nodes'.
    Except(Vec<String>),
}

impl std::fmt::Debug for SpansTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpansTable")
    }
}

impl SpansTable {
    pub(crate) fn new(
        shared: Arc<Shared>,
        presence: Option<Arc<crate::presence::PresenceLog>>,
    ) -> Self {
        Self {
            shared,
            schema: spans_schema(),
            presence,
            nodes: NodeFilter::All,
        }
    }

    /// The same table with only what node `node` received: its memory, its local files and
    /// the objects it uploaded itself, not other nodes' (a node's share of a cluster's live
    /// evaluation, which every node counts for its own spans only). Compaction outputs, which
    /// merge every node's spans of an hour, are registered by the node that compacted; they
    /// come `compaction_grace` (65 min by default) after their hour, long after a live range.
    pub fn own(&self, node: &str) -> SpansTable {
        self.with_nodes(NodeFilter::Only(node.to_owned()))
    }

    /// The same table without the objects `nodes` uploaded (a cluster-wide read takes their
    /// rows from the nodes themselves, each of which answers with its own).
    pub fn without(&self, nodes: &[String]) -> SpansTable {
        self.with_nodes(NodeFilter::Except(nodes.to_vec()))
    }

    fn with_nodes(&self, nodes: NodeFilter) -> SpansTable {
        SpansTable {
            shared: Arc::clone(&self.shared),
            schema: Arc::clone(&self.schema),
            presence: self.presence.clone(),
            nodes,
        }
    }

    /// The store's presence rows (domain §7.1), when this table belongs to a store that keeps
    /// them.
    pub fn presence(&self) -> Option<&Arc<crate::presence::PresenceLog>> {
        self.presence.as_ref()
    }

    /// A consistent view of the store's memory segments and Parquet files, as a scan of this
    /// table would see them now (for readers that cache per immutable file).
    pub fn snapshot(&self) -> crate::Snapshot {
        let mut snap = self.shared.snapshot();
        match &self.nodes {
            NodeFilter::All => {}
            NodeFilter::Only(node) => snap
                .files
                .retain(|f| f.remote.as_ref().is_none_or(|r| &r.node == node)),
            NodeFilter::Except(nodes) => snap
                .files
                .retain(|f| f.remote.as_ref().is_none_or(|r| !nodes.contains(&r.node))),
        }
        snap
    }
}

/// Inclusive bounds on `start_time_unix_nano` implied by `filters` (a conjunction).
pub fn start_time_bounds(filters: &[Expr]) -> (i64, i64) {
    time_bounds(filters, col::START_TIME_UNIX_NANO)
}

/// Inclusive bounds on the Int64 time column `column` implied by `filters` (a conjunction).
pub fn time_bounds(filters: &[Expr], column: &str) -> (i64, i64) {
    let mut lo = i64::MIN;
    let mut hi = i64::MAX;
    for f in filters {
        bound(f, column, &mut lo, &mut hi);
    }
    (lo, hi)
}

fn literal_i64(e: &Expr) -> Option<i64> {
    match e {
        Expr::Literal(ScalarValue::Int64(Some(v)), _) => Some(*v),
        Expr::Literal(ScalarValue::Int32(Some(v)), _) => Some(i64::from(*v)),
        Expr::Literal(ScalarValue::UInt64(Some(v)), _) => i64::try_from(*v).ok(),
        Expr::Cast(c) => literal_i64(&c.expr),
        _ => None,
    }
}

/// `e` is column `name` (or a cast of it).
fn is_column(e: &Expr, name: &str) -> bool {
    match e {
        Expr::Column(c) => c.name == name,
        Expr::Cast(c) => is_column(&c.expr, name),
        _ => false,
    }
}

fn bound(e: &Expr, column: &str, lo: &mut i64, hi: &mut i64) {
    let is_time = |e: &Expr| is_column(e, column);
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            if *op == Operator::And {
                bound(left, column, lo, hi);
                bound(right, column, lo, hi);
                return;
            }
            let (op, v) = if is_time(left) {
                match literal_i64(right) {
                    Some(v) => (*op, v),
                    None => return,
                }
            } else if is_time(right) {
                match (literal_i64(left), op.swap()) {
                    (Some(v), Some(op)) => (op, v),
                    _ => return,
                }
            } else {
                return;
            };
            match op {
                Operator::Eq => {
                    *lo = (*lo).max(v);
                    *hi = (*hi).min(v);
                }
                Operator::Gt => *lo = (*lo).max(v.saturating_add(1)),
                Operator::GtEq => *lo = (*lo).max(v),
                Operator::Lt => *hi = (*hi).min(v.saturating_sub(1)),
                Operator::LtEq => *hi = (*hi).min(v),
                _ => {}
            }
        }
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) if is_time(expr) => {
            if let (Some(l), Some(h)) = (literal_i64(low), literal_i64(high)) {
                *lo = (*lo).max(l);
                *hi = (*hi).min(h);
            }
        }
        _ => {}
    }
}

/// The trace ids a conjunction of `filters` restricts rows to (`trace_id = '…'`, either way
/// round, or `trace_id IN ('…', …)`), or `None` when no filter does.
pub fn trace_ids_of(filters: &[Expr]) -> Option<Vec<String>> {
    filters.iter().find_map(trace_ids_in)
}

fn literal_str(e: &Expr) -> Option<String> {
    match e {
        Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::Utf8View(Some(s))
            | ScalarValue::LargeUtf8(Some(s)),
            _,
        ) => Some(s.clone()),
        Expr::Cast(c) => literal_str(&c.expr),
        _ => None,
    }
}

fn is_trace_col(e: &Expr) -> bool {
    is_column(e, col::TRACE_ID)
}

fn trace_ids_in(e: &Expr) -> Option<Vec<String>> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And => trace_ids_in(left).or_else(|| trace_ids_in(right)),
            Operator::Eq if is_trace_col(left) => literal_str(right).map(|v| vec![v]),
            Operator::Eq if is_trace_col(right) => literal_str(left).map(|v| vec![v]),
            _ => None,
        },
        Expr::InList(l) if !l.negated && is_trace_col(&l.expr) => {
            l.list.iter().map(literal_str).collect()
        }
        _ => None,
    }
}

/// What DataFusion asks of a scan of a store table (`TableProvider::scan`'s arguments).
#[derive(Clone, Copy)]
pub(crate) struct Scan<'a> {
    pub(crate) state: &'a dyn Session,
    pub(crate) projection: Option<&'a Vec<usize>>,
    pub(crate) filters: &'a [Expr],
    pub(crate) limit: Option<usize>,
}

/// Implements `TableProvider` for a store table `$ty` (a `schema: SchemaRef` field and a
/// `fn plan(&self, &Scan) -> Result<Arc<dyn ExecutionPlan>>`): a base table whose filters are
/// all pushed down as inexact (the files prune by them, and DataFusion applies each again to
/// every row). The one provider skeleton of `spans` and `presence`.
macro_rules! store_table_provider {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl datafusion::catalog::TableProvider for $ty {
            fn schema(&self) -> arrow::datatypes::SchemaRef {
                std::sync::Arc::clone(&self.schema)
            }

            fn table_type(&self) -> datafusion::datasource::TableType {
                datafusion::datasource::TableType::Base
            }

            fn supports_filters_pushdown(
                &self,
                filters: &[&datafusion::logical_expr::Expr],
            ) -> datafusion::error::Result<Vec<datafusion::logical_expr::TableProviderFilterPushDown>>
            {
                Ok(vec![
                    datafusion::logical_expr::TableProviderFilterPushDown::Inexact;
                    filters.len()
                ])
            }

            async fn scan(
                &self,
                state: &dyn datafusion::catalog::Session,
                projection: Option<&Vec<usize>>,
                filters: &[datafusion::logical_expr::Expr],
                limit: Option<usize>,
            ) -> datafusion::error::Result<std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>>
            {
                self.plan(&$crate::table::Scan {
                    state,
                    projection,
                    filters,
                    limit,
                })
            }
        }
    };
}
pub(crate) use store_table_provider;

store_table_provider!(SpansTable);

impl SpansTable {
    /// The plan of a scan: memory segments and Parquet files, pruned by the start-time and
    /// trace-id filters.
    fn plan(&self, scan: &Scan<'_>) -> Result<Arc<dyn ExecutionPlan>> {
        let Scan {
            state,
            projection,
            filters,
            limit,
        } = *scan;
        let snap = self.snapshot();
        let (lo, hi) = start_time_bounds(filters);
        let traces = trace_ids_of(filters);
        let traces = traces.as_deref();
        let mut inputs: Vec<Arc<dyn ExecutionPlan>> = Vec::new();
        let segments: Vec<Segment> = snap
            .segments
            .into_iter()
            .filter(|seg| {
                seg.start_range()
                    .is_some_and(|(min, max)| min <= hi && max >= lo)
                    && may_hold_any(seg.traces(), traces)
            })
            .collect();
        if !segments.is_empty() {
            // Two partitions so both cores decode memory too.
            let half = segments.len().div_ceil(2);
            let parts: Vec<Arc<dyn PartitionStream>> = segments
                .chunks(half)
                .map(|c| {
                    Arc::new(SegmentPartition {
                        schema: Arc::clone(&self.schema),
                        segments: c.to_vec(),
                    }) as Arc<dyn PartitionStream>
                })
                .collect();
            inputs.push(Arc::new(StreamingTableExec::try_new(
                Arc::clone(&self.schema),
                parts,
                projection,
                Vec::new(),
                false,
                limit,
            )?));
        }
        let files: Vec<FileMeta> = snap
            .files
            .into_iter()
            .filter(|f| f.overlaps(lo, hi) && may_hold_any(f.traces.as_deref(), traces))
            .collect();
        inputs.extend(parquet_scans(
            state,
            &self.schema,
            &files,
            projection,
            filters,
            limit,
        )?);
        union_or_empty(inputs, &self.schema, projection)
    }
}

/// The union of `inputs`, or an empty plan of the projected `schema` when there is none.
pub(crate) fn union_or_empty(
    inputs: Vec<Arc<dyn ExecutionPlan>>,
    schema: &SchemaRef,
    projection: Option<&Vec<usize>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    match inputs.len() {
        0 => {
            let schema = match projection {
                Some(p) => Arc::new(schema.project(p)?),
                None => Arc::clone(schema),
            };
            Ok(Arc::new(EmptyExec::new(schema)))
        }
        _ => UnionExec::try_new(inputs),
    }
}

/// The object store URL scans of shared storage's objects are registered under (a name
/// only: the client is the one the objects came with).
const SHARED_OBJECTS_URL: &str = "dyeline-shared://objects";

/// Scans of `files`: one over the local files ([`parquet_scan`]) and one over the objects of
/// shared storage, read by byte ranges through their object store client (registered in the
/// session's runtime under [`SHARED_OBJECTS_URL`]). None when `files` is empty.
pub(crate) fn parquet_scans(
    state: &dyn Session,
    schema: &SchemaRef,
    files: &[FileMeta],
    projection: Option<&Vec<usize>>,
    filters: &[Expr],
    limit: Option<usize>,
) -> Result<Vec<Arc<dyn ExecutionPlan>>> {
    let (local, remote): (Vec<FileMeta>, Vec<FileMeta>) =
        files.iter().cloned().partition(FileMeta::is_local);
    let mut groups: Vec<(ObjectStoreUrl, Vec<PartitionedFile>)> = Vec::new();
    if !local.is_empty() {
        let parts = local
            .iter()
            .map(|f| {
                let path = f.path.to_string_lossy();
                PartitionedFile::new(path.trim_start_matches('/'), f.size)
            })
            .collect();
        groups.push((ObjectStoreUrl::local_filesystem(), parts));
    }
    if let Some(first) = remote.first().and_then(|f| f.remote.as_ref()) {
        let url = ObjectStoreUrl::parse(SHARED_OBJECTS_URL)?;
        state
            .runtime_env()
            .register_object_store(url.as_ref(), first.objects.object_store());
        let parts = remote
            .iter()
            .filter_map(|f| {
                let r = f.remote.as_ref()?;
                Some(PartitionedFile::new(r.key.clone(), f.size))
            })
            .collect();
        groups.push((url, parts));
    }
    groups
        .into_iter()
        .map(|g| parquet_scan(state, schema, g, projection, filters, limit))
        .collect()
}

/// A scan of Parquet files of table `schema` in one object store (`files`: its URL and the
/// files): the filters handed to the Parquet reader for row-group (and page) pruning, the
/// files spread over the session's partitions. A file written before a nullable column
/// existed reads it as null (DataFusion adapts each file to the table schema).
fn parquet_scan(
    state: &dyn Session,
    schema: &SchemaRef,
    files: (ObjectStoreUrl, Vec<PartitionedFile>),
    projection: Option<&Vec<usize>>,
    filters: &[Expr],
    limit: Option<usize>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let (url, files) = files;
    // Footers, page indexes and bloom filters are read once per file and kept in the
    // session's metadata cache (store files are immutable and never reuse a name), so a
    // trace lookup over many files does not re-read and re-decode every footer.
    let runtime = state.runtime_env();
    let store = runtime.object_store(&url)?;
    let factory =
        CachedParquetFileReaderFactory::new(store, runtime.cache_manager.get_file_metadata_cache());
    let mut source =
        ParquetSource::new(Arc::clone(schema)).with_parquet_file_reader_factory(Arc::new(factory));
    if let Some(pred) = conjunction(filters.to_vec()) {
        let df_schema = DFSchema::try_from(Arc::clone(schema))?;
        if let Ok(p) = state.create_physical_expr(pred, &df_schema) {
            source = source.with_predicate(p);
        }
    }
    let n = state.config().target_partitions().max(1);
    let mut groups: Vec<Vec<PartitionedFile>> = vec![Vec::new(); n.min(files.len()).max(1)];
    let groups_len = groups.len();
    for (i, f) in files.into_iter().enumerate() {
        groups[i % groups_len].push(f);
    }
    let config = FileScanConfigBuilder::new(url, Arc::new(source))
        .with_file_groups(groups.into_iter().map(FileGroup::new).collect())
        .with_projection_indices(projection.cloned())?
        .with_limit(limit)
        .build();
    Ok(DataSourceExec::from_data_source(config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col as c, lit};

    #[test]
    fn time_filters_become_bounds() {
        let f = [
            c(col::START_TIME_UNIX_NANO).gt_eq(lit(100i64)),
            c(col::START_TIME_UNIX_NANO).lt(lit(200i64)),
            c("name").eq(lit("x")),
        ];
        assert_eq!(start_time_bounds(&f), (100, 199));
        let f = [lit(150i64).lt(c(col::START_TIME_UNIX_NANO))];
        assert_eq!(start_time_bounds(&f), (151, i64::MAX));
        let f = [c(col::START_TIME_UNIX_NANO).between(lit(5i64), lit(9i64))];
        assert_eq!(start_time_bounds(&f), (5, 9));
        assert_eq!(start_time_bounds(&[]), (i64::MIN, i64::MAX));
    }

    #[test]
    fn trace_filters_become_ids() {
        let id = "0af7651916cd43dd8448eb211c80319c";
        let f = [
            c(col::START_TIME_UNIX_NANO).gt_eq(lit(100i64)),
            c(col::TRACE_ID).eq(lit(id)),
        ];
        assert_eq!(trace_ids_of(&f), Some(vec![id.to_owned()]));
        assert_eq!(
            trace_ids_of(&[lit(id).eq(c(col::TRACE_ID))]),
            Some(vec![id.to_owned()])
        );
        assert_eq!(
            trace_ids_of(&[c(col::TRACE_ID).in_list(vec![lit("a"), lit("b")], false)]),
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
        // Negations, disjunctions and other columns do not restrict the ids.
        assert_eq!(
            trace_ids_of(&[c(col::TRACE_ID).in_list(vec![lit("a")], true)]),
            None
        );
        assert_eq!(
            trace_ids_of(&[c(col::TRACE_ID)
                .eq(lit("a"))
                .or(c(col::TRACE_ID).eq(lit("b")))]),
            None
        );
        assert_eq!(trace_ids_of(&[c(col::SPAN_ID).eq(lit("a"))]), None);
        assert_eq!(trace_ids_of(&[c(col::TRACE_ID).not_eq(lit("a"))]), None);
    }
}
