//! SQL: `POST /api/v1/sql` answers `{"columns", "rows"}`, refuses anything but reads with a
//! clear 400, cuts at the row limit; spans are queryable within a second of acknowledgement and
//! after a flush to Parquet; time filters prune without changing answers; `dyeline sql` prints a
//! table or JSON.

use std::time::{Duration, Instant};

use crate::util::*;

fn request(trace: u128, start: u64, n: u64) -> String {
    let spans: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"traceId":"{trace:032x}","spanId":"{:016x}","name":"op{i}","kind":2,
                "startTimeUnixNano":"{}","endTimeUnixNano":"{}"}}"#,
                (trace as u64) * 1000 + i + 1,
                start + i * 1_000_000_000,
                start + i * 1_000_000_000 + 1000
            )
        })
        .collect();
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"svc"}}}},
        {{"key":"host.name","value":{{"stringValue":"svc-green-1"}}}}]}},
        "scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
        spans.join(",")
    )
}

const HOUR: u64 = 3_600_000_000_000;
const T0: u64 = 1_735_732_800_000_000_000; // 2025-01-01T12:00:00Z

#[test]
fn sql_api_reads_memory_and_parquet_and_refuses_writes() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let env = [
        ("DYELINE_STORE__FLUSH_INTERVAL", "500ms"),
        ("DYELINE_SQL__MAX_ROWS", "5"),
        // Each file below holds one trace: 8 bytes of index. Room for the two newest.
        ("DYELINE_STORE__TRACE_INDEX_MAX_BYTES", "16 B"),
    ];
    let mut s = Server::start(&data, &env);
    // Queryable within 1 s of the acknowledgement.
    assert_eq!(post_json(&s, &request(1, T0, 3)).status, 200);
    let acked = Instant::now();
    assert_eq!(count_all(&s), 3);
    assert!(acked.elapsed() < Duration::from_secs(1));
    // Three hours of data, then wait for Parquet files.
    assert_eq!(post_json(&s, &request(2, T0 + HOUR, 3)).status, 200);
    assert_eq!(post_json(&s, &request(3, T0 + 2 * HOUR, 3)).status, 200);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !s.metrics().contains("dyeline_store_parquet_files 3") {
        assert!(Instant::now() < deadline, "no flush: {}", s.metrics());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(count_all(&s), 9);
    // The duplicate filter still holds the nine keys after the flush (their hours are live).
    let metrics = s.metrics();
    assert!(
        metrics.contains("dyeline_store_duplicate_filter_keys 9\n"),
        "{metrics}"
    );
    // The oldest hour's file lost its trace index to the budget; a lookup still finds the
    // trace there (the file is read instead of skipped).
    assert!(
        metrics.contains("dyeline_store_trace_index_bytes 16\n"),
        "{metrics}"
    );
    for trace in 1..=3u128 {
        let q = format!("SELECT count(*) FROM spans WHERE trace_id = '{trace:032x}'");
        assert_eq!(scalar(&s, &q), 3, "trace {trace}");
    }
    // Time pruning keeps answers exact at partition edges.
    let q = format!(
        "SELECT count(*) FROM spans WHERE start_time_unix_nano >= {} AND start_time_unix_nano < {}",
        T0 + HOUR + 1_000_000_000,
        T0 + 2 * HOUR + 1_000_000_000
    );
    assert_eq!(scalar(&s, &q), 3);
    let (status, body) = s.sql_raw("SELECT name FROM spans ORDER BY name");
    assert_eq!(status, 200);
    assert_eq!(body["columns"], serde_json::json!(["name"]));
    assert_eq!(body["rows"].as_array().unwrap().len(), 5);
    assert_eq!(body["truncated"], true);
    for bad in [
        "DROP TABLE spans",
        "INSERT INTO spans SELECT * FROM spans",
        "SELECT 1; SELECT 2",
        "SELEC",
    ] {
        let (status, body) = s.sql_raw(bad);
        assert_eq!(status, 400, "{bad}");
        assert!(
            body["error"]["code"].is_string() && body["error"]["message"].is_string(),
            "{body}"
        );
    }
    let (status, body) = s.sql_raw("SELECT nope FROM spans");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("query_error"))
    );
    // The functions people reach for over ids, names and times (substr and strpos need
    // DataFusion's unicode functions).
    let (status, body) = s.sql_raw(&format!(
        "SELECT substr(trace_id, 25, 8) AS tail, upper(service_name) AS app, \
         strpos(name, 'p0') AS at, \
         date_trunc('hour', to_timestamp_nanos(start_time_unix_nano)) AS hour \
         FROM spans WHERE trace_id = '{:032x}' ORDER BY name LIMIT 1",
        2
    ));
    assert_eq!(status, 200, "{body}");
    let row = &body["rows"][0];
    assert_eq!(
        (&row[0], &row[1], &row[2]),
        (
            &serde_json::json!("00000002"),
            &serde_json::json!("SVC"),
            &serde_json::json!(2)
        ),
        "{body}"
    );
    assert!(
        row[3]
            .as_str()
            .is_some_and(|h| h.starts_with("2025-01-01T13:00:00")),
        "{body}"
    );
    // A clean stop flushes; `dyeline sql` reads the data dir as a table and as JSON.
    assert!(s.stop());
    let d = data.to_str().unwrap();
    let (ok, out, err) = run_cli(&[
        "sql",
        "--data-dir",
        d,
        "SELECT service_name, color, count(*) AS n FROM spans GROUP BY 1, 2",
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("| svc") && out.contains("green") && out.contains("| 9"),
        "{out}"
    );
    let (ok, out, _) = run_cli(&[
        "sql",
        "--data-dir",
        d,
        "--format",
        "json",
        "SELECT count(*) AS n FROM spans",
    ]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["rows"], serde_json::json!([[9]]));
    let (ok, _, err) = run_cli(&["sql", "--data-dir", d, "DELETE FROM spans"]);
    assert!(!ok && err.contains("only a single SELECT"), "{err}");
}

/// `store.discard` (the benchmark's blackhole mode): requests are still decoded and
/// validated, acknowledged and counted, but no row is kept.
#[test]
fn discard_mode_acknowledges_and_counts_spans_but_keeps_none() {
    let dir = temp_dir();
    let s = Server::start(
        &dir.path().join("data"),
        &[("DYELINE_STORE__DISCARD", "true")],
    );
    assert_eq!(post_json(&s, &request(7, T0, 5)).status, 200);
    // Validation still runs: a bad id is still refused (case 01).
    let bad = request(8, T0, 1).replace(&format!("{:032x}", 8), "AAAAAAAAAAAAAAAAAAAAAA==");
    assert_eq!(post_json(&s, &bad).status, 400);
    let metrics = s.metrics();
    assert!(
        metrics.contains("dyeline_receiver_spans_accepted_total{transport=\"http_json\"} 5"),
        "{metrics}"
    );
    assert_eq!(count_all(&s), 0);
}
