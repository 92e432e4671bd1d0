//! Read-only SQL over `spans`: only `SELECT`, `WITH … SELECT` and `EXPLAIN` are run; every
//! other statement (DDL, DML, `COPY`, `SET`, several statements) is refused before planning.
//! A row limit cuts results (and says so) and a timeout cancels long queries.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::execution::context::SessionContext;
use datafusion::prelude::SessionConfig;
use datafusion::sql::parser::{DFParser, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::Statement;

/// Why a query was refused or failed. All are the caller's to fix (HTTP 400) except
/// [`SqlError::Internal`].
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
    #[error("query exceeded the timeout of {0:?} and was cancelled")]
    Timeout(Duration),
    /// A fault of the engine.
    #[error("internal error: {0}")]
    Internal(String),
}

impl SqlError {
    /// A stable machine-readable code (the API's `error.code`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotReadOnly(_) => "not_read_only",
            Self::Syntax(_) => "syntax_error",
            Self::Query(_) => "query_error",
            Self::Timeout(_) => "timeout",
            Self::Internal(_) => "internal",
        }
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

/// A query's result.
#[derive(Debug, Clone)]
pub struct QueryResult {
    /// Column names.
    pub columns: Vec<String>,
    /// Result batches (at most `max_rows` rows in all).
    pub batches: Vec<RecordBatch>,
    /// True when rows past the limit were cut.
    pub truncated: bool,
}

/// A DataFusion session with the table `spans`.
#[derive(Clone)]
pub struct SqlEngine {
    ctx: SessionContext,
}

impl SqlEngine {
    /// A session over `spans` (`target_partitions` = 2 on this class of machine is the
    /// DataFusion default of the core count).
    ///
    /// # Errors
    /// [`SqlError::Internal`] if the table cannot be registered.
    pub fn new(spans: Arc<dyn TableProvider>) -> Result<Self, SqlError> {
        let config = SessionConfig::new().with_information_schema(false);
        let ctx = SessionContext::new_with_config(config);
        ctx.register_table("spans", spans)
            .map_err(|e| SqlError::Internal(e.to_string()))?;
        Ok(Self { ctx })
    }

    /// The DataFusion session (for the analyzer's own plans).
    pub fn context(&self) -> &SessionContext {
        &self.ctx
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
        match &statements[0] {
            DFStatement::Statement(s) => match s.as_ref() {
                Statement::Query(_) => Ok(()),
                Statement::Explain { statement, .. } => match statement.as_ref() {
                    Statement::Query(_) => Ok(()),
                    other => Err(SqlError::NotReadOnly(first_words(&other.to_string()))),
                },
                other => Err(SqlError::NotReadOnly(first_words(&other.to_string()))),
            },
            DFStatement::Explain(e) => match e.statement.as_ref() {
                DFStatement::Statement(s) if matches!(s.as_ref(), Statement::Query(_)) => Ok(()),
                _ => Err(SqlError::NotReadOnly("EXPLAIN of a non-query".into())),
            },
            other => Err(SqlError::NotReadOnly(first_words(&format!("{other}")))),
        }
    }

    /// Runs one read-only query within `limits`.
    ///
    /// # Errors
    /// Every [`SqlError`].
    pub async fn query(&self, sql: &str, limits: SqlLimits) -> Result<QueryResult, SqlError> {
        Self::check_read_only(sql)?;
        let run = async {
            let df = self
                .ctx
                .sql(sql)
                .await
                .map_err(|e| SqlError::Query(e.to_string()))?;
            let columns: Vec<String> = df
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            let df = df
                .limit(0, Some(limits.max_rows.saturating_add(1)))
                .map_err(|e| SqlError::Query(e.to_string()))?;
            let batches = df
                .collect()
                .await
                .map_err(|e| SqlError::Query(e.to_string()))?;
            Ok::<_, SqlError>((columns, batches))
        };
        let (columns, mut batches) = tokio::time::timeout(limits.timeout, run)
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
        })
    }
}

fn first_words(s: &str) -> String {
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reads_pass() {
        assert!(SqlEngine::check_read_only("SELECT 1").is_ok());
        assert!(SqlEngine::check_read_only("with x as (select 1) select * from x").is_ok());
        assert!(SqlEngine::check_read_only("EXPLAIN SELECT * FROM spans").is_ok());
        for bad in [
            "DROP TABLE spans",
            "INSERT INTO spans VALUES (1)",
            "CREATE TABLE t AS SELECT 1",
            "SELECT 1; SELECT 2",
            "SET datafusion.execution.batch_size = 1",
            "COPY spans TO '/tmp/x.csv'",
            "CREATE EXTERNAL TABLE t STORED AS CSV LOCATION '/etc/passwd'",
        ] {
            let e = SqlEngine::check_read_only(bad).unwrap_err();
            assert_eq!(e.code(), "not_read_only", "{bad}: {e}");
        }
        assert_eq!(
            SqlEngine::check_read_only("SELEC 1").unwrap_err().code(),
            "syntax_error"
        );
    }
}
