//! SQL endpoint (issue 23, items 2, 3, 6 and the EXPLAIN / `timeout = "0s"` lows): a caller
//! cannot create a table (`SELECT … INTO`, DDL, `COPY`, `SET`), cannot make the server build a
//! huge value (`repeat` with 1e11) or hold more than `[sql] max_memory` (sorts, aggregations,
//! constants repeated over rows), cannot run more than `[sql] max_concurrent_queries` at once
//! (429 + Retry-After), and every such refusal names its setting and is counted in
//! `dyeline_sql_queries_refused_total{reason}`. EXPLAIN and EXPLAIN ANALYZE answer plan rows.
//! `DYELINE_*` variables that are not settings (Kubernetes service links, the CLI's own) do
//! not stop `serve` or `sql`.

use std::process::Command;
use std::time::{Duration, Instant};

use super::{HealthWatch, assert_up, peak_rss_bytes, rss_bytes};
use crate::support::{Server, dyeline_bin};
use crate::util::temp_dir;

/// What Kubernetes injects into every pod of a namespace with a Service named `dyeline`, and
/// the CLI's own flag variable.
const UNRELATED_ENV: [(&str, &str); 5] = [
    ("DYELINE_PORT", "tcp://10.0.0.1:8080"),
    ("DYELINE_PORT_8080_TCP", "tcp://10.0.0.1:8080"),
    ("DYELINE_SERVICE_HOST", "10.0.0.1"),
    ("DYELINE_SERVICE_PORT", "8080"),
    ("DYELINE_SERVER", "http://10.0.0.1:8080"),
];

fn refused_count(server: &Server, reason: &str) -> u64 {
    let metrics = server.metrics();
    let prefix = format!("dyeline_sql_queries_refused_total{{reason=\"{reason}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} in {metrics}"))
}

fn assert_refused(server: &Server, sql: &str, status: u16, code: &str, setting: &str) -> Duration {
    let t = Instant::now();
    let (got, body) = server.sql_raw(sql);
    let took = t.elapsed();
    let short = &sql[..sql.len().min(90)];
    assert_eq!(
        (got, body["error"]["code"].as_str()),
        (status, Some(code)),
        "{short}: {body}"
    );
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(setting), "{short}: {message}");
    took
}

#[test]
fn sql_creates_no_table_explain_works_and_unrelated_env_is_ignored() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let server = Server::start(&data, &UNRELATED_ENV);
    for sql in [
        "SELECT * INTO t FROM generate_series(1, 100000000)",
        "CREATE TABLE t AS SELECT 1 AS x",
        "CREATE VIEW t AS SELECT 1 AS x",
        "COPY (SELECT 1) TO '/tmp/dyeline-sql-e2e.csv'",
        "SET datafusion.execution.batch_size = 1",
    ] {
        assert_refused(&server, sql, 400, "not_read_only", "only a single SELECT");
    }
    let (status, body) = server.sql_raw("SELECT count(*) FROM t");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("query_error")),
        "{body}"
    );
    assert!(
        body["error"]["message"].as_str().unwrap().contains("t"),
        "{body}"
    );
    assert_eq!(refused_count(&server, "not_read_only"), 5);
    for (sql, expect) in [
        (
            "EXPLAIN SELECT name, count(*) FROM spans GROUP BY name",
            "AggregateExec",
        ),
        (
            "EXPLAIN VERBOSE SELECT count(*) FROM spans",
            "initial_logical_plan",
        ),
        (
            "EXPLAIN ANALYZE SELECT count(*) FROM generate_series(1, 1000)",
            "metrics=",
        ),
    ] {
        let (status, body) = server.sql_raw(sql);
        assert_eq!(status, 200, "{sql}: {body}");
        assert_eq!(
            body["columns"],
            serde_json::json!(["plan_type", "plan"]),
            "{sql}"
        );
        let text = body["rows"].to_string();
        assert!(text.contains(expect), "{sql}: {text}");
    }
    // The CLI with the same variables set; a wrong key inside a known section still fails.
    let sql_cli = |extra: &[(&str, &str)]| {
        let mut cmd = Command::new(dyeline_bin());
        cmd.args(["sql", "--data-dir"])
            .arg(&data)
            .args(["--format", "json", "SELECT 40 + 2 AS n"])
            .env("DYELINE_LOG", "warn");
        for (k, v) in UNRELATED_ENV.iter().chain(extra) {
            cmd.env(k, v);
        }
        cmd.output().expect("run dyeline sql")
    };
    let out = sql_cli(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("[[42]]"));
    let out = sql_cli(&[("DYELINE_SQL__TIMEOUTT", "5s")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("timeoutt"), "{err}");
    // `[sql] timeout = "0s"` is refused at load.
    let out = sql_cli(&[("DYELINE_SQL__TIMEOUT", "0s")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("sql.timeout must be between"), "{err}");
}

/// Bound stated for the whole test: the server's peak resident memory stays under 1.5 GB
/// while it refuses a 100 GB `repeat`, a 490 MB-per-batch repeated constant, and sorts and
/// aggregations past a 64 MiB pool.
#[test]
fn memory_bombs_are_refused_naming_their_setting_and_memory_stays_bounded() {
    const MAX_RSS: u64 = 1_500_000_000;
    let dir = temp_dir();
    let mut server = Server::start(
        &dir.path().join("data"),
        &[("DYELINE_SQL__MAX_MEMORY", "64MiB")],
    );
    let watch = HealthWatch::start(&server);
    let took = assert_refused(
        &server,
        "SELECT length(repeat(arrow_cast('x','LargeUtf8'), 100000000000))",
        400,
        "value_too_large",
        "raise [sql] max_value_bytes",
    );
    assert!(took < Duration::from_secs(2), "refused after {took:?}");
    for sql in [
        // 60 KB passes the value limit; copied to 8192 rows it is 490 MB per batch.
        "SELECT max(length(repeat('x', 60000))) FROM generate_series(1, 1000000)",
        "SELECT max(rn) FROM (SELECT row_number() OVER (ORDER BY value DESC) AS rn FROM generate_series(1, 20000000))",
        "SELECT count(*) FROM (SELECT value * 7919 % 16000000 AS k, count(*) FROM generate_series(1, 20000000) GROUP BY k)",
        "SELECT length(string_agg(CAST(value AS VARCHAR), ',')) FROM generate_series(1, 20000000)",
    ] {
        let took = assert_refused(&server, sql, 400, "memory_limit", "raise [sql] max_memory");
        assert!(
            took < Duration::from_secs(25),
            "{sql}: refused after {took:?}"
        );
        let peak = peak_rss_bytes(&server);
        assert!(peak < MAX_RSS, "{sql}: peak RSS {peak} bytes");
    }
    watch.assert_healthy("SQL memory bombs");
    assert_up(&mut server, "SQL memory bombs");
    assert_eq!(refused_count(&server, "value_size"), 1);
    assert_eq!(refused_count(&server, "memory"), 4);
    // The pool was given back: a small query runs.
    assert_eq!(
        server.sql("SELECT count(*) FROM generate_series(1, 1000)"),
        vec![vec![serde_json::json!(1000)]]
    );
    let (now, peak) = (rss_bytes(&server), peak_rss_bytes(&server));
    assert!(peak < MAX_RSS, "peak RSS {peak} bytes");
    assert!(now < MAX_RSS / 2, "RSS after the attack {now} bytes");
}

#[test]
fn queries_past_the_concurrency_limit_get_429_and_health_holds() {
    let dir = temp_dir();
    let mut server = Server::start(
        &dir.path().join("data"),
        &[
            ("DYELINE_SQL__MAX_CONCURRENT_QUERIES", "2"),
            ("DYELINE_SQL__TIMEOUT", "4s"),
        ],
    );
    let watch = HealthWatch::start(&server);
    let url = format!("http://{}/api/v1/sql", server.api);
    let slow: Vec<_> = (0..2)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let resp = reqwest::blocking::Client::new()
                    .post(url)
                    .json(&serde_json::json!({"sql": "SELECT count(*) FROM generate_series(1, 100000000000)"}))
                    .timeout(Duration::from_secs(30))
                    .send()
                    .expect("slow query");
                let status = resp.status().as_u16();
                let body: serde_json::Value = resp.json().expect("json");
                (status, body)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1000));
    for _ in 0..3 {
        let resp = reqwest::blocking::Client::new()
            .post(&url)
            .json(&serde_json::json!({"sql": "SELECT 1"}))
            .send()
            .expect("extra query");
        assert_eq!(resp.status().as_u16(), 429);
        assert_eq!(
            resp.headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()),
            Some("1")
        );
        let body: serde_json::Value = resp.json().expect("json");
        assert_eq!(body["error"]["code"], "too_many_queries", "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("raise [sql] max_concurrent_queries"),
            "{message}"
        );
    }
    for s in slow {
        let (status, body) = s.join().expect("slow thread");
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("timeout")),
            "{body}"
        );
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("raise [sql] timeout")
        );
    }
    watch.assert_healthy("SQL queries past the concurrency limit");
    assert_up(&mut server, "SQL queries past the concurrency limit");
    assert_eq!(
        server.sql("SELECT 1 AS one"),
        vec![vec![serde_json::json!(1)]]
    );
    assert_eq!(refused_count(&server, "concurrency"), 3);
    assert_eq!(refused_count(&server, "timeout"), 2);
}
