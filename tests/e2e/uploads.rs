//! Shared storage (issue 26), the upload commit and reads from the catalog, with a real
//! SeaweedFS and a real PostgreSQL: a node's local files move to the bucket and the catalog
//! and are read from there (SQL, trace lookup, `dyeline sql` beside it); a second node with an
//! empty data directory answers for them; `kill -9` at each step of the commit (the
//! `fault_for_tests` setting aborts the process there) loses no acknowledged span and shows
//! none twice, and the catalog lists only objects that exist.

use std::time::{Duration, Instant};

use dyeline_storage::testkit::{postgres::Postgres, seaweed::Seaweed};

use crate::support::Server;
use crate::util::*;

const PASSWORD: &str = "hunter2-uploads";

/// `n` spans from `first` on, in traces of four, starting in one hour of 2024.
fn spans(first: u64, n: u64) -> String {
    let spans: Vec<String> = (first..first + n)
        .map(|i| {
            let start = 1_718_000_600_000_000_000u64 + i * 1_000_000;
            format!(
                r#"{{"traceId":"{:032x}","spanId":"{:016x}","name":"op","kind":2,"startTimeUnixNano":"{start}","endTimeUnixNano":"{}"}}"#,
                0xabc0_0000 + i / 4,
                0x5000 + i,
                start + 1_000_000
            )
        })
        .collect();
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"order"}}}}]}},"scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
        spans.join(",")
    )
}

/// The environment of a node on `weed` and `pg`: uploads every second, files flushed every
/// second, uploaded local files deleted 2 s after the swap.
pub(crate) fn node_env(weed: &Seaweed, pg: &Postgres, node: &str) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = weed
        .aws_env()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    for (k, v) in [
        (
            "DYELINE_STORAGE__OBJECT_STORE_URL",
            "s3://dyeline/e2e".to_owned(),
        ),
        ("DYELINE_CATALOG__POSTGRES_URL", pg.url(PASSWORD)),
        ("DYELINE_CLUSTER__NODE_ID", node.to_owned()),
        ("DYELINE_STORAGE__UPLOAD_INTERVAL", "1s".to_owned()),
        ("DYELINE_STORAGE__CATALOG_REFRESH", "1s".to_owned()),
        ("DYELINE_STORE__FLUSH_INTERVAL", "1s".to_owned()),
        ("DYELINE_SQL__TIMEOUT", "2s".to_owned()),
        ("DYELINE_STORE__COMPACTION_GRACE", "2s".to_owned()),
        ("DYELINE_STORAGE__MAINTENANCE_INTERVAL", "1s".to_owned()),
        ("DYELINE_STORAGE__JANITOR_GRACE", "4s".to_owned()),
        ("DYELINE_CLUSTER__HEARTBEAT_INTERVAL", "1s".to_owned()),
    ] {
        env.push((k.to_owned(), v));
    }
    env
}

pub(crate) fn start(
    data: &std::path::Path,
    env: &[(String, String)],
    extra: &[(&str, &str)],
) -> Server {
    let mut all: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    all.extend_from_slice(extra);
    Server::start(data, &all)
}

/// Runs `dyeline` with `args` in a node's environment `env`; its stdout, failing on error.
pub(crate) fn cli(env: &[(String, String)], args: &[&str]) -> String {
    let out = std::process::Command::new(crate::support::dyeline_bin())
        .args(args)
        .env("DYELINE_LOG", "warn")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run dyeline");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "dyeline {args:?}: {err}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The local Parquet files under a data directory.
pub(crate) fn local_files(data: &std::path::Path) -> usize {
    parquet_files_under(&data.join("spans"))
}

/// The Parquet files under `dir`, at any depth.
pub(crate) fn parquet_files_under(dir: &std::path::Path) -> usize {
    let mut n = 0;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                todo.push(e.path());
            } else if e.file_name().to_string_lossy().ends_with(".parquet") {
                n += 1;
            }
        }
    }
    n
}

/// `dyeline_storage_uploaded_files_total` of a node.
pub(crate) fn uploaded_files(server: &Server) -> f64 {
    server
        .metrics()
        .lines()
        .find_map(|l| l.strip_prefix("dyeline_storage_uploaded_files_total "))
        .and_then(|v| v.parse().ok())
        .expect("dyeline_storage_uploaded_files_total in /metrics")
}

pub(crate) fn wait_until(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: not within {secs} s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Spans and distinct span keys a node's SQL sees.
pub(crate) fn counts(server: &Server) -> (i64, i64) {
    let rows = server.sql("SELECT count(*), count(DISTINCT trace_id || span_id) FROM spans");
    (rows[0][0].as_i64().unwrap(), rows[0][1].as_i64().unwrap())
}

/// The objects in the bucket under the node's prefix that the catalog does not know.
fn unknown_objects(weed: &Seaweed, pg: &Postgres) -> Vec<String> {
    let known = pg
        .psql("SELECT string_agg(key || ' ' || coalesce(trace_index_key, ''), ' ') FROM span_files")
        .unwrap_or_default();
    let known: std::collections::HashSet<&str> = known.split_whitespace().collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listed: Vec<object_store::ObjectMeta> = rt
        .block_on(futures::TryStreamExt::try_collect(
            weed.store()
                .list(Some(&object_store::path::Path::from("e2e/spans"))),
        ))
        .unwrap();
    listed
        .into_iter()
        .map(|m| m.location.to_string()["e2e/".len()..].to_owned())
        .filter(|k| !known.contains(k.as_str()))
        .collect()
}

/// Every object the catalog lists exists in the bucket.
fn catalog_objects_exist(weed: &Seaweed, pg: &Postgres) -> usize {
    let keys = pg
        .psql("SELECT string_agg(key || ' ' || coalesce(trace_index_key, ''), ' ') FROM span_files WHERE deleted_at IS NULL")
        .unwrap_or_default();
    let store = weed.store();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut n = 0;
    for key in keys.split_whitespace() {
        let path = object_store::path::Path::from(format!("e2e/{key}"));
        rt.block_on(object_store::ObjectStoreExt::head(store.as_ref(), &path))
            .unwrap_or_else(|e| panic!("catalog lists {key}, the bucket lacks it: {e}"));
        n += 1;
    }
    n
}

#[test]
fn uploaded_spans_are_read_from_the_bucket_here_beside_and_on_a_second_node() {
    let weed = Seaweed::start();
    let pg = Postgres::start();
    let dir = temp_dir();
    let (a_data, b_data) = (dir.path().join("a"), dir.path().join("b"));
    let env_a = node_env(&weed, &pg, "node-a");
    let a = start(&a_data, &env_a, &[]);
    for batch in 0..4 {
        let r = post_json(&a, &spans(batch * 250, 250));
        assert_eq!(r.status, 200, "{}", r.text());
        std::thread::sleep(Duration::from_millis(600));
    }
    wait_until("every local file uploaded and deleted", 30, || {
        local_files(&a_data) == 0 && uploaded_files(&a) >= 1.0
    });
    assert_eq!(counts(&a), (1000, 1000));
    assert_eq!(
        count_trace(&a, &format!("{:032x}", 0xabc0_0000u64 + 100)),
        4
    );
    assert!(catalog_objects_exist(&weed, &pg) >= 2);
    // `dyeline sql` beside the running node reads the catalog's objects too.
    let a_dir = a_data.to_string_lossy().into_owned();
    let out = cli(
        &env_a,
        &[
            "sql",
            "--format",
            "json",
            "--data-dir",
            &a_dir,
            "SELECT count(*) AS n FROM spans",
        ],
    );
    assert!(out.contains("[[1000]]"), "{out}");
    // A second node that wrote nothing answers for everything in the catalog.
    let b = start(&b_data, &node_env(&weed, &pg, "node-b"), &[]);
    wait_until("node-b lists node-a's objects", 20, || {
        counts(&b) == (1000, 1000)
    });
    assert_eq!(count_trace(&b, &format!("{:032x}", 0xabc0_0000u64 + 7)), 4);
    // New spans on node-a reach node-b through the bucket.
    let r = post_json(&a, &spans(1000, 100));
    assert_eq!(r.status, 200, "{}", r.text());
    wait_until("node-b sees node-a's new upload", 30, || {
        counts(&b) == (1100, 1100)
    });
    // Presence records (a metrics export: one row per point) are uploaded and read alike.
    let points = [1_718_000_600u64, 1_718_000_630, 1_718_000_660].map(|s| s * 1_000_000_000);
    for inst in ["cart-1", "cart-2"] {
        let body = format!(
            r#"{{"resourceMetrics":[{{"resource":{{"attributes":[{{"key":"host.name","value":{{"stringValue":"{inst}"}}}}]}},"scopeMetrics":[{{"metrics":[{{"name":"up","gauge":{{"dataPoints":[{}]}}}}]}}]}}]}}"#,
            points
                .iter()
                .map(|t| format!(r#"{{"timeUnixNano":"{t}","asInt":"1"}}"#))
                .collect::<Vec<_>>()
                .join(",")
        );
        let r = post_otlp(
            &a,
            "/v1/metrics",
            &[("content-type", "application/json")],
            body.into_bytes(),
        );
        assert_eq!(r.status, 200, "{}", r.text());
    }
    wait_until("node-a's presence files uploaded", 30, || {
        parquet_files_under(&a_data.join("presence")) == 0
            && pg
                .psql("SELECT count(*) FROM span_files WHERE kind = 'presence'")
                .is_some_and(|n| n != "0")
    });
    wait_until("node-b reads node-a's presence", 20, || {
        scalar(&b, "SELECT count(*) FROM presence") == 6
    });
    assert_eq!(
        scalar(&a, "SELECT count(DISTINCT instance_id) FROM presence"),
        2
    );
    // A local merge on a node's data directory would fold files the catalog covers into one
    // it does not: `dyeline compact` refuses with shared storage on.
    let out = std::process::Command::new(crate::support::dyeline_bin())
        .args(["compact", "--data-dir"])
        .arg(&b_data)
        .envs(env_a.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("shared storage is on"),
        "{err}"
    );
    // `dyeline cluster status`: both nodes alive by their heartbeats, with what they report.
    let status = |format: &str| cli(&env_a, &["cluster", "status", "--format", format]);
    let json: serde_json::Value = serde_json::from_str(&status("json")).unwrap();
    let nodes = json["nodes"].as_array().unwrap();
    let ids: Vec<&str> = nodes
        .iter()
        .map(|n| n["node_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["node-a", "node-b"], "{json}");
    for n in nodes {
        assert_eq!(n["state"], "alive", "{json}");
        assert_eq!(n["version"], env!("CARGO_PKG_VERSION"), "{json}");
        assert!(
            n["staging_bytes"].is_u64() && n["upload_lag_ms"].is_u64(),
            "{json}"
        );
        assert!(n["heartbeat_age_s"].as_f64().unwrap() < 3.0, "{json}");
    }
    // Each heartbeat says where that node's API answers (bound on 127.0.0.1, a port the OS
    // chose).
    for (n, server) in nodes.iter().zip([&a, &b]) {
        assert_eq!(n["api_url"], format!("http://{}", server.api), "{json}");
    }
    assert!(nodes[0]["live_span_files"].as_u64().unwrap() >= 1, "{json}");
    assert!(nodes[0]["live_span_bytes"].as_u64().unwrap() > 0, "{json}");
    // One of them is the alert leader, with the first epoch.
    let leader = &json["alert_leader"];
    assert!(
        ["node-a", "node-b"].contains(&leader["holder"].as_str().unwrap_or("")),
        "{json}"
    );
    assert_eq!(leader["epoch"], 1, "{json}");
    assert!(
        status("table").contains(&format!(
            "alert leader: {} (epoch 1, lease",
            leader["holder"].as_str().unwrap()
        )),
        "{json}"
    );
    // node-b stops: three missed heartbeats later it shows as stale.
    drop(b);
    wait_until("node-b shows as stale", 15, || {
        status("table").contains("1 of 2 nodes alive")
    });
    let table = status("table");
    let b_line = table.lines().find(|l| l.contains("node-b")).unwrap();
    assert!(b_line.contains("stale"), "{table}");
}

/// `kill -9` (an abort at the step) after the put, after the catalog commit and before the
/// local delete, then PostgreSQL restarted and the bucket stopped for 30 s under a running
/// node: afterwards every acknowledged span is read exactly once, and every object the catalog
/// lists exists.
#[test]
fn a_crash_at_each_step_of_the_upload_commit_loses_nothing_and_doubles_nothing() {
    let mut weed = Seaweed::start();
    let pg = Postgres::start();
    let dir = temp_dir();
    let data = dir.path().join("n");
    let env = node_env(&weed, &pg, "node-c");
    let mut sent = 0u64;
    for fault in ["after_put", "after_commit", "before_delete"] {
        let mut s = start(&data, &env, &[("DYELINE_STORAGE__FAULT_FOR_TESTS", fault)]);
        let r = post_json(&s, &spans(sent, 200));
        assert_eq!(r.status, 200, "{fault}: {}", r.text());
        sent += 200;
        wait_until(&format!("the process aborts {fault}"), 30, || {
            !s.is_running()
        });
        s.kill();
        if fault == "after_commit" {
            // The uploaded files are still local and registered: `dyeline sql` on the data
            // directory, without the node-id setting, still reads each span once (the node id
            // is kept in the data directory, so the checkpoint covering them is found).
            let no_id: Vec<(String, String)> = env
                .iter()
                .filter(|(k, _)| k != "DYELINE_CLUSTER__NODE_ID")
                .cloned()
                .collect();
            assert!(local_files(&data) >= 1);
            let dir = data.to_string_lossy().into_owned();
            let q = "SELECT count(*), count(DISTINCT trace_id || span_id) FROM spans";
            let out = cli(&no_id, &["sql", "--format", "json", "--data-dir", &dir, q]);
            assert!(out.contains(&format!("[[{sent},{sent}]]")), "{out}");
        }
        let mut s = start(&data, &env, &[]);
        wait_until(
            &format!("{fault}: every local file uploaded after the restart"),
            30,
            || local_files(&data) == 0,
        );
        let expected = i64::try_from(sent).unwrap();
        assert_eq!(counts(&s), (expected, expected), "after {fault}");
        catalog_objects_exist(&weed, &pg);
        assert!(s.stop(), "{fault}: clean stop");
    }
    // PostgreSQL restarted under a running node: uploads pause and resume, nothing lost.
    // (A node reads the uploaded rows once it has read the catalog's listing.)
    let s = start(&data, &env, &[]);
    let before = i64::try_from(sent).unwrap();
    wait_until("the restarted node lists the catalog", 20, || {
        counts(&s) == (before, before)
    });
    pg.crash();
    let r = post_json(&s, &spans(sent, 200));
    assert_eq!(r.status, 200, "{}", r.text());
    sent += 200;
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        local_files(&data) >= 1,
        "nothing can be uploaded while the catalog is down"
    );
    let expected = i64::try_from(sent).unwrap();
    assert_eq!(counts(&s), (expected, expected), "the catalog down");
    pg.restart();
    wait_until("uploads resume once the catalog is back", 60, || {
        local_files(&data) == 0
    });
    assert_eq!(
        counts(&s),
        (expected, expected),
        "after the catalog's return"
    );
    catalog_objects_exist(&weed, &pg);
    // The bucket stopped for 30 s: ingest goes on into staging, uploads resume after.
    weed.stop();
    let r = post_json(&s, &spans(sent, 200));
    assert_eq!(r.status, 200, "the bucket down: {}", r.text());
    sent += 200;
    std::thread::sleep(Duration::from_secs(30));
    assert!(
        local_files(&data) >= 1,
        "nothing can be uploaded while the bucket is down"
    );
    weed.restart();
    wait_until("uploads resume once the bucket is back", 240, || {
        local_files(&data) == 0
    });
    let expected = i64::try_from(sent).unwrap();
    assert_eq!(
        counts(&s),
        (expected, expected),
        "after the bucket's return"
    );
    catalog_objects_exist(&weed, &pg);
    // The crash after the put left objects the catalog never knew: the janitor deletes them
    // once older than its grace (4 s here).
    wait_until(
        "no object older than the janitor's grace is unknown",
        30,
        || unknown_objects(&weed, &pg).is_empty(),
    );
}

/// Shared compaction: node-a (compaction off) uploads an hour in several objects; node-b
/// (compaction on) merges them into one while node-a answers SQL in a loop: no answer ever
/// misses a row or shows one twice, and the hour ends with `ceil(bytes / target)` files.
#[test]
fn shared_compaction_merges_an_hour_while_queries_see_every_row_once() {
    let weed = Seaweed::start();
    let pg = Postgres::start();
    let dir = temp_dir();
    let a_data = dir.path().join("a");
    let a = start(
        &a_data,
        &node_env(&weed, &pg, "node-a"),
        &[("DYELINE_STORE__COMPACTION", "false")],
    );
    for batch in 0..4 {
        let r = post_json(&a, &spans(batch * 100, 100));
        assert_eq!(r.status, 200, "{}", r.text());
        std::thread::sleep(Duration::from_millis(1100));
    }
    wait_until("every local file uploaded", 30, || {
        local_files(&a_data) == 0
    });
    let live = "SELECT count(*) FROM span_files WHERE deleted_at IS NULL";
    let before: usize = pg.psql(live).unwrap().parse().unwrap();
    assert!(
        before >= 3,
        "{before} objects: the hour must start in several"
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let looping = {
        let stop = std::sync::Arc::clone(&stop);
        let api = a.api;
        std::thread::spawn(move || {
            let client = reqwest::blocking::Client::new();
            let mut answers = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let body: serde_json::Value = client
                    .post(format!("http://{api}/api/v1/sql"))
                    .json(&serde_json::json!({
                        "sql": "SELECT count(*), count(DISTINCT trace_id || span_id) FROM spans"
                    }))
                    .send()
                    .unwrap()
                    .json()
                    .unwrap();
                assert_eq!(body["rows"], serde_json::json!([[400, 400]]), "{body}");
                answers += 1;
            }
            answers
        })
    };
    let b = start(&dir.path().join("b"), &node_env(&weed, &pg, "node-b"), &[]);
    wait_until("node-b compacts the hour", 30, || {
        pg.psql("SELECT count(*) FROM span_files WHERE deleted_at IS NULL AND compacted")
            .as_deref()
            == Some("1")
    });
    // node-a's next listing shows the compacted object; the loop goes on across it.
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let answers = looping.join().expect("every answer held each row once");
    assert!(answers >= 5, "{answers} answers during the compaction");
    assert_eq!(
        pg.psql(live).as_deref(),
        Some("1"),
        "ceil(bytes / 512 MiB) = 1 file"
    );
    assert_eq!(counts(&a), (400, 400));
    assert_eq!(counts(&b), (400, 400));
    // The inputs' objects are deleted once no reader can hold them (grace 2 s + refresh 1 s).
    wait_until("the inputs' objects deleted", 30, || {
        pg.psql("SELECT count(*) FROM span_files").as_deref() == Some("1")
    });
    catalog_objects_exist(&weed, &pg);
    wait_until("no unknown objects left", 30, || {
        unknown_objects(&weed, &pg).is_empty()
    });
}

/// The staging bound and the probes: with the bucket down, a node's local files grow past
/// `[store] staging_max_bytes`; then OTLP writes are refused with Retry-After (never dropped)
/// and `/readyz` answers 503 `staging_full` while `/livez` stays `ok`; once the bucket is back
/// and the files are uploaded, the node is ready and takes writes again.
#[test]
fn a_full_staging_refuses_writes_and_readiness_until_the_bucket_takes_it() {
    let mut weed = Seaweed::start();
    let pg = Postgres::start();
    let dir = temp_dir();
    let data = dir.path().join("n");
    let env = node_env(&weed, &pg, "node-s");
    let s = start(&data, &env, &[("DYELINE_STORE__STAGING_MAX_BYTES", "1KiB")]);
    let probe = |path: &str| {
        let r = reqwest::blocking::get(format!("http://{}{path}", s.api)).unwrap();
        (r.status().as_u16(), r.text().unwrap())
    };
    assert_eq!(probe("/readyz"), (200, "ok".to_owned()));
    weed.stop();
    let r = post_json(&s, &spans(0, 200));
    assert_eq!(r.status, 200, "{}", r.text());
    wait_until("the spans flushed into a local file", 20, || {
        local_files(&data) >= 1
    });
    let (status, body) = probe("/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("not_ready") && body.contains("staging_full"),
        "{body}"
    );
    assert_eq!(probe("/livez"), (200, "ok".to_owned()));
    let refused = reqwest::blocking::Client::new()
        .post(format!("http://{}/v1/traces", s.http))
        .header("content-type", "application/json")
        .body(spans(200, 10))
        .send()
        .unwrap();
    assert!(
        [429, 503].contains(&refused.status().as_u16()),
        "{}",
        refused.status()
    );
    assert!(refused.headers().contains_key("retry-after"));
    weed.restart();
    wait_until("the staging uploaded once the bucket is back", 120, || {
        probe("/readyz").0 == 200
    });
    let r = post_json(&s, &spans(200, 10));
    assert_eq!(r.status, 200, "{}", r.text());
    wait_until("every accepted span read once", 30, || {
        counts(&s) == (210, 210)
    });
}
