//! Durability: steady traffic, SIGKILL, restart: every span whose request was acknowledged is
//! there, once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::util::*;

fn request(batch: u64) -> String {
    let spans: Vec<String> = (0..50u64)
        .map(|i| {
            format!(
                r#"{{"traceId":"{:032x}","spanId":"{:016x}","name":"op","kind":2,
                "startTimeUnixNano":"{}","endTimeUnixNano":"{}"}}"#,
                0x1000_0000_u128 + u128::from(batch),
                batch * 1000 + i + 1,
                1_718_000_000_000_000_000 + batch * 1_000_000,
                1_718_000_000_000_500_000 + batch * 1_000_000
            )
        })
        .collect();
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"steady"}}}}]}},
        "scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
        spans.join(",")
    )
}

#[test]
fn acknowledged_spans_survive_sigkill() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    // Flush to Parquet often so the kill can land between Parquet and WAL truncation too.
    let env = [("DYELINE_STORE__FLUSH_INTERVAL", "300ms")];
    let mut s = Server::start(&data, &env);
    let acked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let http = s.http;
    let senders: Vec<_> = (0..2u64)
        .map(|t| {
            let acked = Arc::clone(&acked);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let client = reqwest::blocking::Client::new();
                let mut b = t;
                while !stop.load(Ordering::Relaxed) && b < 4000 {
                    let r = client
                        .post(format!("http://{http}/v1/traces"))
                        .header("content-type", "application/json")
                        .body(request(b))
                        .send();
                    if r.is_ok_and(|r| r.status().as_u16() == 200) {
                        acked.lock().unwrap().push(b);
                    }
                    b += 2;
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    s.kill();
    stop.store(true, Ordering::Relaxed);
    for t in senders {
        t.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 20,
        "traffic was acknowledged before the kill: {}",
        acked.len()
    );
    let s = Server::start(&data, &env);
    let stored = count_all(&s);
    let max_possible = acked.len() as i64 * 50 + 2 * 50; // in-flight requests may have landed too
    assert!(
        stored >= acked.len() as i64 * 50,
        "stored {stored} < acknowledged {}",
        acked.len() * 50
    );
    assert!(stored <= max_possible);
    let missing = s.sql(&format!(
        "SELECT count(DISTINCT trace_id) FROM spans WHERE trace_id IN ({})",
        acked
            .iter()
            .map(|b| format!("'{:032x}'", 0x1000_0000_u128 + u128::from(*b)))
            .collect::<Vec<_>>()
            .join(",")
    ));
    assert_eq!(missing[0][0], serde_json::json!(acked.len()));
    assert_eq!(
        scalar(
            &s,
            "SELECT count(*) - count(DISTINCT trace_id || span_id) FROM spans"
        ),
        0,
        "no span twice after replay"
    );
}

#[test]
fn a_second_writer_on_a_data_dir_stops_at_start_and_readers_still_read() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap();
    let lines = dir.path().join("spans.jsonl");
    std::fs::write(&lines, request(1).replace('\n', " ") + "\n").unwrap();
    let lines_arg = lines.to_str().unwrap();

    let mut s = Server::start(&data, &[]);
    assert_eq!(post_json(&s, &request(0)).status, 200);
    let in_use = format!("is in use by another process (pid {})", s.pid().unwrap());

    // A second server and an import on the same directory both stop before reading it.
    let (ok, _, err) =
        run_cli(&[&["serve", "--data-dir", data_arg], &EPHEMERAL_PORTS[..]].concat());
    assert!(!ok && err.contains(&in_use), "second serve: {err}");
    let (ok, _, err) = run_cli(&["import", "--data-dir", data_arg, lines_arg]);
    assert!(!ok && err.contains(&in_use), "import beside serve: {err}");
    let (ok, _, err) = run_cli(&["demo", "--data-dir", data_arg]);
    assert!(!ok && err.contains(&in_use), "demo beside serve: {err}");
    assert!(!err.contains("panicked"), "{err}");
    // A reader needs no lock.
    let (ok, out, err) = run_cli(&[
        "sql",
        "--data-dir",
        data_arg,
        "--format",
        "json",
        "SELECT count(*) AS n FROM spans",
    ]);
    assert!(ok, "sql beside serve: {err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        v["rows"],
        serde_json::json!([[50]]),
        "the acknowledged request, from the WAL"
    );
    assert!(s.is_running());
    assert_eq!(post_json(&s, &request(2)).status, 200);

    // SIGKILL: the kernel drops the lock with the process; the import now runs.
    s.kill();
    let (ok, _, err) = run_cli(&["import", "--data-dir", data_arg, lines_arg]);
    assert!(ok, "import after the server died: {err}");
    let s = Server::start(&data, &[]);
    assert_eq!(
        count_all(&s),
        150,
        "both acknowledged requests and the import, once each"
    );
}
