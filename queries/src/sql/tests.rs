//! The read-only rule, the limits across queries and the value guard, over an empty `spans`
//! and DataFusion's own table functions.

use super::*;
use datafusion::datasource::MemTable;

#[test]
fn only_reads_pass() {
    assert!(SqlEngine::check_read_only("SELECT 1").is_ok());
    assert!(SqlEngine::check_read_only("with x as (select 1) select * from x").is_ok());
    assert!(SqlEngine::check_read_only("EXPLAIN SELECT * FROM spans").is_ok());
    assert!(SqlEngine::check_read_only("EXPLAIN ANALYZE SELECT 1").is_ok());
    for bad in [
        "DROP TABLE spans",
        "INSERT INTO spans VALUES (1)",
        "CREATE TABLE t AS SELECT 1",
        "CREATE VIEW v AS SELECT 1",
        "SELECT 1; SELECT 2",
        "SET datafusion.execution.batch_size = 1",
        "COPY spans TO '/tmp/x.csv'",
        "CREATE EXTERNAL TABLE t STORED AS CSV LOCATION '/etc/passwd'",
        "SELECT * INTO t FROM generate_series(1, 10)",
        "SELECT 1 UNION ALL (SELECT 2 INTO t)",
        "EXPLAIN SELECT 1 INTO t",
        "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
    ] {
        let e = SqlEngine::check_read_only(bad).unwrap_err();
        assert_eq!(e.code(), "not_read_only", "{bad}: {e}");
    }
    assert_eq!(
        SqlEngine::check_read_only("SELEC 1").unwrap_err().code(),
        "syntax_error"
    );
}

fn empty_spans() -> Arc<dyn TableProvider> {
    let schema = dyeline_model::schema::spans_schema();
    Arc::new(MemTable::try_new(schema, vec![vec![]]).unwrap())
}

fn engine(bounds: SqlBounds) -> SqlEngine {
    SqlEngine::bounded(empty_spans(), bounds).unwrap()
}

fn limits() -> SqlLimits {
    SqlLimits {
        max_rows: 100,
        timeout: Duration::from_secs(20),
    }
}

fn refused(e: &SqlEngine, reason: &str) -> u64 {
    e.metrics()
        .refused
        .get_or_create(&ReasonLabel {
            reason: match reason {
                "not_read_only" => "not_read_only",
                "concurrency" => "concurrency",
                "memory" => "memory",
                "value_size" => "value_size",
                _ => "timeout",
            },
        })
        .get()
}

#[tokio::test]
async fn a_plan_that_would_create_a_table_is_refused_and_none_appears() {
    let e = engine(SqlBounds::default());
    // The plan check alone (the parser check is bypassed here) refuses DDL and statements.
    let opts = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    for sql in [
        "SELECT * INTO t FROM generate_series(1, 10)",
        "CREATE VIEW t AS SELECT 1",
        "SET datafusion.execution.batch_size = 1",
    ] {
        assert!(
            e.callers.sql_with_options(sql, opts).await.is_err(),
            "{sql}"
        );
    }
    let err = e
        .query("SELECT * INTO t FROM generate_series(1, 10)", limits())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "not_read_only");
    assert_eq!(refused(&e, "not_read_only"), 1);
    for ctx in [&e.callers, &e.ctx] {
        assert!(!ctx.table_exist("t").unwrap());
    }
    let err = e
        .query("SELECT count(*) FROM t", limits())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "query_error", "{err}");
}

#[tokio::test]
async fn explain_and_explain_analyze_answer_plan_rows() {
    let e = engine(SqlBounds::default());
    for sql in [
        "EXPLAIN SELECT count(*) FROM spans",
        "EXPLAIN VERBOSE SELECT count(*) FROM spans",
        "EXPLAIN ANALYZE SELECT count(*) FROM generate_series(1, 1000)",
    ] {
        let r = e
            .query(sql, limits())
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(r.columns, ["plan_type", "plan"], "{sql}");
        let rows: usize = r.batches.iter().map(RecordBatch::num_rows).sum();
        assert!(rows >= 1, "{sql}");
    }
}

#[tokio::test]
async fn the_repeat_bomb_is_refused_before_it_allocates() {
    let e = engine(SqlBounds::default());
    let t = std::time::Instant::now();
    let err = e
        .query(
            "SELECT length(repeat(arrow_cast('x','LargeUtf8'), 100000000000))",
            limits(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "value_too_large", "{err}");
    assert!(err.to_string().contains("[sql] max_value_bytes"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(2));
    assert_eq!(refused(&e, "value_size"), 1);
}

#[tokio::test]
async fn amplifiers_are_refused_past_the_value_limit_and_pass_under_it() {
    let e = engine(SqlBounds::default());
    for (sql, ok) in [
        ("SELECT length(repeat('ab', 1000))", true),
        ("SELECT length(repeat('ab', 40000))", false),
        ("SELECT length(lpad('x', 100000))", false),
        ("SELECT length(rpad('x', 1000, 'yz'))", true),
        (
            "SELECT length(replace(repeat('a', 1000), '', repeat('b', 1000)))",
            false,
        ),
        ("SELECT length(replace('abc', 'b', 'xx'))", true),
        ("SELECT cardinality(range(1, 100000000))", false),
        ("SELECT cardinality(generate_series(1, 1000))", true),
        (
            "SELECT cardinality(range(TIMESTAMP '2000-01-01', TIMESTAMP '2030-01-01', INTERVAL '1 second'))",
            false,
        ),
        ("SELECT cardinality(array_repeat(1, 100000000))", false),
        ("SELECT cardinality(array_resize([1], 100000000, 0))", false),
        (
            "SELECT length(array_to_string(array_repeat(1, 1000), repeat('-', 1000)))",
            false,
        ),
        (
            "SELECT length(concat_ws(repeat('-', 30000), 'a', 'b', 'c'))",
            false,
        ),
        ("SELECT length(to_char(now(), repeat('%+', 20000)))", false),
        // Nesting a function that doubles its input stops where it passes the limit.
        (
            "SELECT length(encode(encode(encode(encode(encode(encode(encode(encode(repeat('x', 1000), 'hex'), 'hex'), 'hex'), 'hex'), 'hex'), 'hex'), 'hex'), 'hex'))",
            false,
        ),
        ("SELECT length(encode(repeat('x', 1000), 'hex'))", true),
        // A literal past the limit.
        (&format!("SELECT length('{}')", "x".repeat(70_000)), false),
    ] {
        let r = e.query(sql, limits()).await;
        match (ok, r) {
            (true, Ok(_)) => {}
            (false, Err(err)) => {
                assert_eq!(
                    err.code(),
                    "value_too_large",
                    "{}: {err}",
                    &sql[..sql.len().min(80)]
                );
                assert!(
                    err.to_string().contains("raise [sql] max_value_bytes"),
                    "{err}"
                );
            }
            (true, Err(err)) => panic!("{sql}: {err}"),
            (false, Ok(_)) => panic!("{} passed", &sql[..sql.len().min(80)]),
        }
    }
}

#[tokio::test]
async fn constant_amplifiers_repeated_over_rows_count_against_the_memory_pool() {
    let e = engine(SqlBounds {
        max_memory_bytes: 16 << 20,
        ..SqlBounds::default()
    });
    // 60 KB per row passes the value limit; a batch of 8192 rows of it is 490 MB.
    let err = e
        .query(
            "SELECT max(length(repeat('x', 60000))) FROM generate_series(1, 100000)",
            limits(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "memory_limit", "{err}");
    assert!(err.to_string().contains("raise [sql] max_memory"), "{err}");
    assert_eq!(refused(&e, "memory"), 1);
}

#[tokio::test]
async fn a_sort_or_aggregate_past_the_pool_is_refused_naming_max_memory() {
    let e = engine(SqlBounds {
        max_memory_bytes: 16 << 20,
        ..SqlBounds::default()
    });
    for sql in [
        "SELECT max(rn) FROM (SELECT row_number() OVER (ORDER BY value DESC) AS rn FROM generate_series(1, 5000000))",
        "SELECT count(*) FROM (SELECT value * 7919 % 4000000 AS k, count(*) FROM generate_series(1, 5000000) GROUP BY k)",
        "SELECT length(string_agg(CAST(value AS VARCHAR), ',')) FROM generate_series(1, 5000000)",
    ] {
        let err = e.query(sql, limits()).await.unwrap_err();
        assert_eq!(err.code(), "memory_limit", "{sql}: {err}");
    }
    // A small one still runs afterwards: the pool was given back.
    let r = e
        .query("SELECT count(*) FROM generate_series(1, 1000)", limits())
        .await
        .unwrap();
    assert_eq!(r.batches[0].num_rows(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_past_the_concurrency_limit_are_refused_as_busy() {
    let e = engine(SqlBounds {
        max_concurrent_queries: 1,
        ..SqlBounds::default()
    });
    let slow = {
        let e = e.clone();
        tokio::spawn(async move {
            e.query(
                "SELECT count(*) FROM generate_series(1, 200000000)",
                SqlLimits {
                    max_rows: 10,
                    timeout: Duration::from_secs(2),
                },
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let err = e.query("SELECT 1", limits()).await.unwrap_err();
    assert_eq!(err.code(), "too_many_queries");
    assert!(
        err.to_string()
            .contains("raise [sql] max_concurrent_queries"),
        "{err}"
    );
    assert_eq!(refused(&e, "concurrency"), 1);
    let slow = slow.await.unwrap().unwrap_err();
    assert_eq!(slow.code(), "timeout");
    assert_eq!(refused(&e, "timeout"), 1);
    // The slot is free again.
    assert!(e.query("SELECT 1", limits()).await.is_ok());
}

#[tokio::test]
async fn the_rows_kept_count_against_the_pool() {
    let e = engine(SqlBounds {
        max_memory_bytes: 16 << 20,
        ..SqlBounds::default()
    });
    let many = SqlLimits {
        max_rows: 100_000,
        timeout: Duration::from_secs(20),
    };
    let small = e
        .query(
            "SELECT repeat('x', 100) AS v FROM generate_series(1, 1000)",
            many,
        )
        .await
        .unwrap();
    assert!(
        small.held_bytes() >= 2 * 100 * 1000,
        "{}",
        small.held_bytes()
    );
    drop(small);
    // A value shared by every row (a view array: little memory) counts once per row, as the
    // answer copies it: 10,000 rows of 60 KB are past the default 1 GiB.
    let err = engine(SqlBounds::default())
        .query(
            "SELECT repeat('x', 60000) AS v FROM generate_series(1, 10000)",
            many,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "memory_limit", "{err}");
    // 100 MB of rows, none past the value limit.
    let err = e
        .query(
            "SELECT repeat('x', 1000) AS v FROM generate_series(1, 100000)",
            many,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "memory_limit", "{err}");
}

/// Every error's category, and so its HTTP status: the API answered 500 for internal, 429
/// for busy and 400 for the rest before the category table, and still does.
#[test]
fn every_error_has_its_category_and_status() {
    let s = || String::from("x");
    let rows = [
        (SqlError::NotReadOnly(s()), Category::InvalidArgument, 400),
        (SqlError::Syntax(s()), Category::InvalidArgument, 400),
        (SqlError::Query(s()), Category::InvalidArgument, 400),
        (
            SqlError::Timeout(Duration::from_secs(1)),
            Category::InvalidArgument,
            400,
        ),
        (SqlError::Busy(4), Category::Saturated, 429),
        (
            SqlError::Memory {
                limit: s(),
                detail: s(),
            },
            Category::InvalidArgument,
            400,
        ),
        (SqlError::ValueTooLarge(s()), Category::InvalidArgument, 400),
        (SqlError::Internal(s()), Category::Internal, 500),
    ];
    for (e, category, http) in rows {
        assert_eq!(e.category(), category, "{e:?}");
        assert_eq!(e.category().http_status(), http, "{e:?}");
    }
}

/// A table registered beside `spans` (the `presence` table) is read by callers' queries and
/// by the analyzer's session alike; a second table of the same name is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_registered_beside_spans_is_queried_in_both_sessions() {
    use arrow::array::{AsArray, Int64Array, RecordBatch};
    let schema = dyeline_model::presence::presence_schema();
    let rows = RecordBatch::try_new(
        Arc::clone(&schema),
        schema
            .fields()
            .iter()
            .map(|f| match f.name().as_str() {
                "time_unix_nano" => Arc::new(Int64Array::from(vec![5, 9])) as _,
                _ if f.is_nullable() => arrow::array::new_null_array(f.data_type(), 2),
                _ => Arc::new(arrow::array::StringArray::from(vec!["a", "b"])) as _,
            })
            .collect(),
    )
    .unwrap();
    let presence: Arc<dyn TableProvider> =
        Arc::new(MemTable::try_new(schema, vec![vec![rows]]).unwrap());
    let e = engine(SqlBounds::default());
    e.register_table("presence", Arc::clone(&presence)).unwrap();
    let r = e
        .query("SELECT max(time_unix_nano) FROM presence", limits())
        .await
        .unwrap();
    assert_eq!(
        r.batches[0]
            .column(0)
            .as_primitive::<arrow::datatypes::Int64Type>()
            .value(0),
        9
    );
    let own = e
        .context()
        .sql("SELECT count(*) FROM presence WHERE instance_id = 'b'")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(
        own[0]
            .column(0)
            .as_primitive::<arrow::datatypes::Int64Type>()
            .value(0),
        1
    );
    let again = e.register_table("presence", presence).unwrap_err();
    assert_eq!(again.code(), "internal");
}
