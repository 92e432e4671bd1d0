//! Read-only SQL over `spans` (and the tables registered beside it: `presence`) for callers
//! (`POST /api/v1/sql`, `dyeline sql`): only `SELECT`, `WITH … SELECT` and
//! `EXPLAIN [ANALYZE | VERBOSE]` run. Every other statement (DDL, DML,
//! `COPY`, `SET`, `SELECT … INTO`, several statements) is refused before planning, and the plan
//! is checked again with DataFusion's [`SQLOptions`] (no DDL, DML or statements), so a
//! caller's query can never give the engine's sessions a table.
//!
//! A caller's query runs in its own session, bounded in rows and time per query and, across
//! queries, in memory and number ([`SqlBounds`]): a memory pool of `[sql] max_memory` (greedy,
//! spilling to disk off), at most `[sql] max_concurrent_queries` at once (the next is refused
//! at once as busy), and no value past `[sql] max_value_bytes` built by its functions or
//! written as a literal ([`guard`]). Refusals by a limit are counted in
//! `dyeline_sql_queries_refused_total{reason}` and name the setting that raises them.
//!
//! The analyzer's own plans (detections, drill-down, search, alerts) use another session,
//! [`SqlEngine::context`], with no pool bound: their shape is ours and their ranges are
//! bounded by their callers, and a caller's query cannot starve them.

mod guard;
mod predict;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::common::DataFusionError;
use datafusion::execution::context::{SQLOptions, SessionContext};
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::memory_pool::{
    GreedyMemoryPool, MemoryConsumer, MemoryPool, MemoryReservation, TrackConsumersPool,
};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionConfig;
use datafusion::sql::parser::{DFParser, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{Query, SetExpr, Statement};
use dyeline_model::{Category, HasCategory};
use futures::StreamExt;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio::sync::Semaphore;

pub use guard::{ValueTooLarge, human};
pub use predict::Amplifier;

/// Why a query was refused or failed. All are the caller's to fix (category invalid argument,
/// HTTP 400) except [`SqlError::Busy`] (saturated, 429: try again) and [`SqlError::Internal`]
/// (internal, 500); see its [`HasCategory`] impl.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SqlError {
    /// Not a single SELECT / WITH / EXPLAIN statement.
    #[error("only a single SELECT, WITH or EXPLAIN statement is allowed: {0}")]
    NotReadOnly(String),
    /// The text does not parse.
    #[error("SQL syntax error: {0}")]
    Syntax(String),
    /// Planning or execution failed (unknown column, type error, …).
    #[error("query failed: {0}")]
    Query(String),
    /// The query ran past the timeout and was cancelled.
    #[error("query exceeded the timeout of {0:?} and was cancelled (raise [sql] timeout)")]
    Timeout(Duration),
    /// `[sql] max_concurrent_queries` queries are running.
    #[error(
        "{0} SQL queries are already running, the most at once; try again shortly (raise [sql] max_concurrent_queries)"
    )]
    Busy(usize),
    /// The query needed more memory than the pool had left.
    #[error(
        "the query needed more memory than SQL queries may use together, {limit} (raise [sql] max_memory): {detail}"
    )]
    Memory {
        /// The pool's size, for people.
        limit: String,
        /// DataFusion's account of the refusal (the largest consumers).
        detail: String,
    },
    /// A function would have built (or a literal is) a value past `[sql] max_value_bytes`.
    #[error("{0}")]
    ValueTooLarge(String),
    /// A fault of the engine.
    #[error("internal error: {0}")]
    Internal(String),
}

impl HasCategory for SqlError {
    /// A query a limit refused (timeout, memory, value size) is the query's to change, as a
    /// syntax error is: invalid argument, like every refusal but busy and internal.
    fn category(&self) -> Category {
        match self {
            Self::NotReadOnly(_)
            | Self::Syntax(_)
            | Self::Query(_)
            | Self::Timeout(_)
            | Self::Memory { .. }
            | Self::ValueTooLarge(_) => Category::InvalidArgument,
            Self::Busy(_) => Category::Saturated,
            Self::Internal(_) => Category::Internal,
        }
    }
}

impl SqlError {
    /// A stable machine-readable code (the API's `error.code`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotReadOnly(_) => "not_read_only",
            Self::Syntax(_) => "syntax_error",
            Self::Query(_) => "query_error",
            Self::Timeout(_) => "timeout",
            Self::Busy(_) => "too_many_queries",
            Self::Memory { .. } => "memory_limit",
            Self::ValueTooLarge(_) => "value_too_large",
            Self::Internal(_) => "internal",
        }
    }

    /// The `reason` label of `dyeline_sql_queries_refused_total` when a limit or the read-only
    /// rule refused the query; `None` for other errors.
    pub fn refusal_reason(&self) -> Option<&'static str> {
        Some(match self {
            Self::NotReadOnly(_) => "not_read_only",
            Self::Timeout(_) => "timeout",
            Self::Busy(_) => "concurrency",
            Self::Memory { .. } => "memory",
            Self::ValueTooLarge(_) => "value_size",
            _ => return None,
        })
    }

    /// Sorts a DataFusion error: a limit's refusal (found anywhere in its chain) or a query
    /// error.
    fn from_datafusion(e: DataFusionError, bounds: &SqlBounds) -> Self {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(s) = source {
            if let Some(v) = s.downcast_ref::<ValueTooLarge>() {
                return Self::ValueTooLarge(v.to_string());
            }
            let df = s
                .downcast_ref::<DataFusionError>()
                .or_else(|| s.downcast_ref::<Arc<DataFusionError>>().map(AsRef::as_ref));
            if let Some(DataFusionError::ResourcesExhausted(detail)) = df {
                return Self::Memory {
                    limit: human(bounds.max_memory_bytes as u64),
                    detail: detail.clone(),
                };
            }
            source = s.source();
        }
        Self::Query(e.to_string())
    }
}

/// Limits of one query.
#[derive(Debug, Clone, Copy)]
pub struct SqlLimits {
    /// At most this many rows are returned (default 10,000).
    pub max_rows: usize,
    /// The query is cancelled after this long (default 30 s).
    pub timeout: Duration,
}

impl Default for SqlLimits {
    fn default() -> Self {
        Self {
            max_rows: 10_000,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Limits across the callers' queries of one engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqlBounds {
    /// Memory the running queries' operators (sorts, aggregations, join tables, the results
    /// of amplifying functions) may hold together (default 1 GiB).
    pub max_memory_bytes: usize,
    /// Queries running at once; more are refused as busy (default 4).
    pub max_concurrent_queries: usize,
    /// The largest value a query may build with a function or write as a literal (default
    /// 64 KiB: a value is copied once per row where operators repeat rows, so it is kept
    /// small).
    pub max_value_bytes: usize,
}

impl Default for SqlBounds {
    fn default() -> Self {
        Self {
            max_memory_bytes: 1 << 30,
            max_concurrent_queries: 4,
            max_value_bytes: 64 << 10,
        }
    }
}

/// Label: why a query was refused.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    /// `not_read_only`, `concurrency`, `memory`, `value_size` or `timeout`.
    pub reason: &'static str,
}

/// Counters of the SQL endpoint.
#[derive(Debug, Default, Clone)]
pub struct SqlMetrics {
    /// `dyeline_sql_queries_refused_total{reason}`: callers' queries refused by a limit or the
    /// read-only rule.
    pub refused: Family<ReasonLabel, Counter>,
}

impl SqlMetrics {
    /// Every refusal reason.
    pub const REASONS: [&'static str; 5] = [
        "not_read_only",
        "concurrency",
        "memory",
        "value_size",
        "timeout",
    ];

    /// Registers the counters (every reason, so each series exists from the start).
    pub fn register(&self, registry: &mut Registry) {
        for reason in Self::REASONS {
            let _ = self.refused.get_or_create(&ReasonLabel { reason });
        }
        registry.register(
            "dyeline_sql_queries_refused",
            "Callers' SQL queries refused, by reason (a limit of [sql], or not read-only)",
            self.refused.clone(),
        );
    }
}

/// A query's result.
#[derive(Debug, Clone)]
pub struct QueryResult {
    /// Column names.
    pub columns: Vec<String>,
    /// Result batches (at most `max_rows` rows in all).
    pub batches: Vec<RecordBatch>,
    /// True when rows past the limit were cut.
    pub truncated: bool,
    /// The result's bytes, held in the query memory pool until the result is dropped (after
    /// the caller rendered it).
    held: Option<Arc<MemoryReservation>>,
}

impl QueryResult {
    /// Bytes of the result's rows as counted against `[sql] max_memory`.
    pub fn held_bytes(&self) -> usize {
        self.held.as_ref().map_or(0, |r| r.size())
    }
}

/// The DataFusion sessions over the table `spans`: one for callers' queries, bounded, and one
/// for the analyzer's own plans.
#[derive(Clone)]
pub struct SqlEngine {
    ctx: SessionContext,
    callers: SessionContext,
    slots: Arc<Semaphore>,
    bounds: SqlBounds,
    metrics: SqlMetrics,
    runtime: Arc<QueryRuntime>,
    pool: Arc<dyn MemoryPool>,
}

/// The threads callers' queries run on: a runtime of their own, one worker per core at a
/// lower priority (nice 10 on Linux), so that a query busy on every core leaves the server's
/// runtime (receivers, `/healthz`, the dashboard) its threads and the first claim on the CPU.
/// Stopped when the last engine sharing it is dropped.
struct QueryRuntime {
    handle: tokio::runtime::Handle,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl QueryRuntime {
    fn start() -> Result<Self, SqlError> {
        let threads = std::thread::available_parallelism().map_or(2, NonZeroUsize::get);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("dyeline-sql")
            .on_thread_start(lower_priority)
            .enable_all()
            .build()
            .map_err(|e| SqlError::Internal(format!("starting the SQL runtime: {e}")))?;
        let handle = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("dyeline-sql-runtime".into())
            .spawn(move || {
                // Ends when the sender is dropped; the runtime is dropped here, outside any
                // async context.
                let _ = rt.block_on(stopped);
                rt.shutdown_background();
            })
            .map_err(|e| SqlError::Internal(format!("starting the SQL runtime: {e}")))?;
        Ok(Self {
            handle,
            _stop: stop,
        })
    }
}

/// Lowers the calling thread's CPU priority (nice 10; on Linux the nice value is per thread).
// The one `unsafe` of the workspace (the lint denies it elsewhere): libc `setpriority`.
#[allow(unsafe_code)]
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority reads only its integer arguments; `who = 0` is the calling thread.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 10);
    }
}

/// Aborts a spawned query when its caller stops waiting (a client that hung up).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl SqlEngine {
    /// Sessions over `spans` with the default [`SqlBounds`] (`target_partitions` = 2 on this
    /// class of machine is the DataFusion default of the core count).
    ///
    /// # Errors
    /// [`SqlError::Internal`] if the table cannot be registered.
    pub fn new(spans: Arc<dyn TableProvider>) -> Result<Self, SqlError> {
        Self::bounded(spans, SqlBounds::default())
    }

    /// Sessions over `spans`, callers' queries within `bounds`.
    ///
    /// # Errors
    /// [`SqlError::Internal`] if the table cannot be registered or the runtime not built.
    pub fn bounded(spans: Arc<dyn TableProvider>, bounds: SqlBounds) -> Result<Self, SqlError> {
        let internal = |e: DataFusionError| SqlError::Internal(e.to_string());
        let config = || SessionConfig::new().with_information_schema(false);
        let ctx = SessionContext::new_with_config(config());
        ctx.register_table("spans", Arc::clone(&spans))
            .map_err(internal)?;
        // Greedy, not fair: with spilling off, the fair pool's share per spilling operator
        // would refuse a lone large sort as soon as any other operator registered; greedy lets
        // a query use what is free, and the concurrency limit keeps the queries few. Tracking
        // names the largest consumers in the refusal.
        let pool: Arc<dyn MemoryPool> = Arc::new(TrackConsumersPool::new(
            GreedyMemoryPool::new(bounds.max_memory_bytes),
            NonZeroUsize::new(3).expect("nonzero"),
        ));
        let result_pool = Arc::clone(&pool);
        // No spill files: a read-only endpoint writes nothing to disk.
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::clone(&pool))
            .with_disk_manager_builder(
                DiskManagerBuilder::default().with_mode(DiskManagerMode::Disabled),
            )
            .build_arc()
            .map_err(internal)?;
        let callers = SessionContext::new_with_config_rt(config(), runtime);
        callers.register_table("spans", spans).map_err(internal)?;
        callers.add_analyzer_rule(Arc::new(guard::GuardRule::new(
            guard::GuardLimits {
                max_value_bytes: bounds.max_value_bytes as u64,
            },
            pool,
        )));
        Ok(Self {
            ctx,
            callers,
            slots: Arc::new(Semaphore::new(bounds.max_concurrent_queries)),
            bounds,
            metrics: SqlMetrics::default(),
            runtime: Arc::new(QueryRuntime::start()?),
            pool: result_pool,
        })
    }

    /// Registers `table` as `name` beside `spans` in both sessions (the `presence` table).
    ///
    /// # Errors
    /// [`SqlError::Internal`] if the name is taken.
    pub fn register_table(
        &self,
        name: &str,
        table: Arc<dyn TableProvider>,
    ) -> Result<(), SqlError> {
        let internal = |e: DataFusionError| SqlError::Internal(e.to_string());
        // DataFusion would replace a table of the same name (`spans` itself) silently.
        if self.ctx.table_exist(name).map_err(internal)? {
            return Err(SqlError::Internal(format!(
                "a table named {name} is registered already"
            )));
        }
        self.ctx
            .register_table(name, Arc::clone(&table))
            .map_err(internal)?;
        self.callers.register_table(name, table).map_err(internal)?;
        Ok(())
    }

    /// The DataFusion session for the analyzer's own plans (not callers' queries).
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// The refusal counters.
    pub fn metrics(&self) -> &SqlMetrics {
        &self.metrics
    }

    /// The bounds of callers' queries.
    pub fn bounds(&self) -> SqlBounds {
        self.bounds
    }

    /// Start of the newest stored span, Unix ns; `None` when the table is empty.
    ///
    /// # Errors
    /// [`SqlError::Internal`] when the scan fails.
    pub async fn newest_span_unix_nano(&self) -> Result<Option<i64>, SqlError> {
        use arrow::array::{Array, AsArray};
        use arrow::datatypes::Int64Type;
        let batches = self
            .ctx
            .sql("SELECT max(start_time_unix_nano) AS newest FROM spans")
            .await
            .map_err(|e| SqlError::Internal(e.to_string()))?
            .collect()
            .await
            .map_err(|e| SqlError::Internal(e.to_string()))?;
        Ok(batches.first().and_then(|b| {
            let col = b.column(0).as_primitive_opt::<Int64Type>()?;
            (col.len() == 1 && col.is_valid(0)).then(|| col.value(0))
        }))
    }

    /// Refuses anything but one read-only statement.
    ///
    /// # Errors
    /// [`SqlError::Syntax`], [`SqlError::NotReadOnly`].
    pub fn check_read_only(sql: &str) -> Result<(), SqlError> {
        let statements = DFParser::parse_sql(sql).map_err(|e| SqlError::Syntax(e.to_string()))?;
        if statements.len() != 1 {
            return Err(SqlError::NotReadOnly(format!(
                "{} statements given",
                statements.len()
            )));
        }
        let query = |s: &Statement| match s {
            Statement::Query(q) if selects_into(q) => Err(SqlError::NotReadOnly(
                "SELECT … INTO creates a table".into(),
            )),
            Statement::Query(_) => Ok(()),
            other => Err(SqlError::NotReadOnly(first_words(&other.to_string()))),
        };
        match &statements[0] {
            DFStatement::Statement(s) => match s.as_ref() {
                Statement::Explain { statement, .. } => query(statement),
                other => query(other),
            },
            DFStatement::Explain(e) => match e.statement.as_ref() {
                DFStatement::Statement(s) if matches!(s.as_ref(), Statement::Query(_)) => query(s),
                _ => Err(SqlError::NotReadOnly("EXPLAIN of a non-query".into())),
            },
            other => Err(SqlError::NotReadOnly(first_words(&format!("{other}")))),
        }
    }

    /// Runs one read-only query within `limits` and the engine's bounds; a refusal by a limit
    /// is counted.
    ///
    /// # Errors
    /// Every [`SqlError`].
    pub async fn query(&self, sql: &str, limits: SqlLimits) -> Result<QueryResult, SqlError> {
        let (me, text) = (self.clone(), sql.to_owned());
        let mut task = AbortOnDrop(
            self.runtime
                .handle
                .spawn(async move { me.run(&text, limits).await }),
        );
        let result = (&mut task.0)
            .await
            .unwrap_or_else(|e| Err(SqlError::Internal(format!("the query's task: {e}"))));
        if let Err(e) = &result
            && let Some(reason) = e.refusal_reason()
        {
            self.metrics
                .refused
                .get_or_create(&ReasonLabel { reason })
                .inc();
        }
        result
    }

    async fn run(&self, sql: &str, limits: SqlLimits) -> Result<QueryResult, SqlError> {
        Self::check_read_only(sql)?;
        // Refused at once rather than queued: a queue would hold connections and memory for
        // a wait the caller cannot see; 429 with Retry-After says when to come back.
        let _slot = Arc::clone(&self.slots)
            .try_acquire_owned()
            .map_err(|_| SqlError::Busy(self.bounds.max_concurrent_queries))?;
        let read_only = SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(false)
            .with_allow_statements(false);
        let bounds = self.bounds;
        let run = async {
            let df = self
                .callers
                .sql_with_options(sql, read_only)
                .await
                .map_err(|e| SqlError::from_datafusion(e, &bounds))?;
            let columns: Vec<String> = df
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            // EXPLAIN must stay the root of its plan: it is not wrapped in the row limit (its
            // rows are cut below like any other).
            let explain = matches!(
                df.logical_plan(),
                LogicalPlan::Explain(_) | LogicalPlan::Analyze(_)
            );
            let df = if explain {
                df
            } else {
                df.limit(0, Some(limits.max_rows.saturating_add(1)))
                    .map_err(|e| SqlError::Query(e.to_string()))?
            };
            // The rows kept count against the pool too: a result of wide values can be as
            // large as any sort.
            let held = MemoryConsumer::new("query result").register(&self.pool);
            let mut stream = df
                .execute_stream()
                .await
                .map_err(|e| SqlError::from_datafusion(e, &bounds))?;
            let mut batches = Vec::new();
            while let Some(batch) = stream.next().await {
                let batch = batch.map_err(|e| SqlError::from_datafusion(e, &bounds))?;
                held.try_grow(result_bytes(&batch))
                    .map_err(|e| SqlError::from_datafusion(e, &bounds))?;
                batches.push(batch);
            }
            Ok::<_, SqlError>((columns, batches, held))
        };
        let (columns, mut batches, held) = tokio::time::timeout(limits.timeout, run)
            .await
            .map_err(|_| SqlError::Timeout(limits.timeout))??;
        let total: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let truncated = total > limits.max_rows;
        if truncated {
            let mut left = limits.max_rows;
            let mut kept = Vec::new();
            for b in batches {
                if left == 0 {
                    break;
                }
                let n = b.num_rows().min(left);
                kept.push(b.slice(0, n));
                left -= n;
            }
            batches = kept;
        }
        Ok(QueryResult {
            columns,
            batches,
            truncated,
            held: Some(Arc::new(held)),
        })
    }
}

/// Bytes of `batch`'s rows as the caller will hold them: each value's own bytes (a value
/// shared by many rows of a view array counts once per row, as the JSON answer copies it),
/// and never less than the memory of the rows' slice (a slice of a larger batch counts its own
/// rows only: the rest is the store's, held anyway). Counted twice: the answer holds the
/// values, then their text.
fn result_bytes(batch: &RecordBatch) -> usize {
    use arrow::array::Array;
    let bytes: usize = batch
        .columns()
        .iter()
        .map(|c| {
            let slice = c
                .to_data()
                .get_slice_memory_size()
                .unwrap_or_else(|_| c.get_array_memory_size());
            let values: u64 = predict::array_row_bytes(c.as_ref()).iter().sum();
            slice.max(usize::try_from(values).unwrap_or(usize::MAX))
        })
        .sum();
    bytes.saturating_mul(2)
}

/// True when a query's body (any side of its set operations, any parenthesized part) selects
/// `INTO` a table. Walked with a stack, not recursion: the nesting is the caller's.
fn selects_into(q: &Query) -> bool {
    let mut stack: Vec<&SetExpr> = vec![q.body.as_ref()];
    while let Some(e) = stack.pop() {
        match e {
            SetExpr::Select(s) if s.into.is_some() => return true,
            SetExpr::Query(q) => stack.push(q.body.as_ref()),
            SetExpr::SetOperation { left, right, .. } => {
                stack.push(left.as_ref());
                stack.push(right.as_ref());
            }
            _ => {}
        }
    }
    false
}

fn first_words(s: &str) -> String {
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests;
