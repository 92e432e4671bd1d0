//! Shared storage (issue 26) over the release-walk fixture, with a real SeaweedFS and a real
//! PostgreSQL: the capture imported into a node's data directory is uploaded by `dyeline
//! serve` until no local file is left; `dyeline analyze` beside it, reading the catalog's
//! objects, still passes `check_findings.py`; a second node with an empty data directory
//! answers `dyeline sql` and the trace page for those spans, and, once the first node's
//! timeline (`GET /api/v1/timeline`) is imported into it, the same `GET /api/v1/findings`.

use serde_json::Value;

use crate::browser::{fetch_html, get_json};
use crate::fixtures::{capture_range, check_findings, expected};
use crate::uploads::{
    cli, counts, local_files, node_env, parquet_files_under, start, uploaded_files, wait_until,
};
use crate::util::*;
use dyeline_storage::testkit::{postgres::Postgres, seaweed::Seaweed};

/// The trace page of `trace_id` on `s`, without the empty comments Leptos puts between
/// adjacent text nodes.
fn trace_page(s: &Server, trace_id: &str) -> String {
    fetch_html(s, &format!("/traces/{trace_id}")).replace("<!>", "")
}

#[test]
fn release_walk_uploaded_is_analysed_from_the_bucket_and_answered_by_a_second_node() {
    let weed = Seaweed::start();
    let pg = Postgres::start();
    let dir = temp_dir();
    let (a_data, b_data) = (dir.path().join("a"), dir.path().join("b"));
    let (a_dir, b_dir) = (a_data.to_str().unwrap(), b_data.to_str().unwrap());
    let fixture = shared_dir().join("fixtures/analysis/release-walk");
    let exp = expected("release-walk");
    let (spans, traces) = (
        exp["counts"]["spans"].as_i64().unwrap(),
        exp["counts"]["traces"].as_i64().unwrap(),
    );
    // Counting release-walk's objects from the bucket takes the debug binary more than
    // node_env's 2 s SQL timeout when the other e2e tests load both cores (the grace must be
    // at least the timeout).
    let slow = |mut env: Vec<(String, String)>| {
        for (k, v) in [
            ("DYELINE_SQL__TIMEOUT", "20s"),
            ("DYELINE_STORE__COMPACTION_GRACE", "20s"),
        ] {
            env.push((k.to_owned(), v.to_owned()));
        }
        env
    };
    let env_a = slow(node_env(&weed, &pg, "node-a"));
    let env_b = slow(node_env(&weed, &pg, "node-b"));

    // Node A: the capture and its timeline imported, then uploaded by the server.
    cli(
        &env_a,
        &[
            "import",
            "--data-dir",
            a_dir,
            "--timeline",
            fixture.join("timeline.json").to_str().unwrap(),
            fixture.join("spans.jsonl.gz").to_str().unwrap(),
        ],
    );
    assert!(local_files(&a_data) >= 1);
    let a = start(&a_data, &env_a, &[]);
    wait_until("every imported file uploaded and deleted", 60, || {
        local_files(&a_data) == 0 && uploaded_files(&a) >= 1.0
    });
    let distinct = |s: &Server| {
        s.sql("SELECT count(*), count(DISTINCT trace_id) FROM spans")[0]
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(distinct(&a), [spans, traces]);

    // `dyeline analyze` beside node A reads the catalog's objects (there is no local file
    // left) and finds the fixture's findings.
    let report = cli(
        &env_a,
        &[
            "analyze",
            "--data-dir",
            a_dir,
            "--format",
            "json",
            "--with-decisions",
        ],
    );
    check_findings(&report, &dir.path().join("findings.json"), &fixture);
    // It read every object the catalog lists, each fetched whole into the node's cache.
    let listed: usize = pg
        .psql("SELECT count(*) FROM span_files WHERE deleted_at IS NULL")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(listed >= 1);
    assert_eq!(parquet_files_under(&a_data.join("cache/objects")), listed);
    let report: Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["spans"].as_i64(), Some(spans));

    // Node B, empty data directory, same bucket and catalog: SQL over HTTP and beside it.
    let mut b = start(&b_data, &env_b, &[]);
    wait_until("node B lists node A's objects", 30, || {
        counts(&b).0 == spans
    });
    assert_eq!(distinct(&b), [spans, traces]);
    assert_eq!(local_files(&b_data), 0, "node B wrote nothing");
    let out = cli(
        &env_b,
        &[
            "sql",
            "--data-dir",
            b_dir,
            "--format",
            "json",
            "SELECT count(*), count(DISTINCT trace_id) FROM spans",
        ],
    );
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["rows"], serde_json::json!([[spans, traces]]), "{out}");

    // The trace page of a planted hop on node B: every span of the trace, by id and name.
    let hop = exp["planted"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "legacy-hop")
        .unwrap();
    let trace_id = hop["trace_ids"][0].as_str().unwrap();
    let trace_spans = a.sql(&format!(
        "SELECT span_id, name FROM spans WHERE trace_id = '{trace_id}' ORDER BY span_id"
    ));
    assert!(trace_spans.len() >= 3, "{trace_spans:?}");
    let html = trace_page(&b, trace_id);
    for row in &trace_spans {
        let (id, name) = (row[0].as_str().unwrap(), row[1].as_str().unwrap());
        let at = html
            .find(&format!("data-span-id=\"{id}\""))
            .unwrap_or_else(|| panic!("span {id} not on node B's trace page: {html}"));
        let tr = &html[at..];
        let tr = &tr[..tr.find("</tr>").unwrap()];
        assert!(tr.contains(&format!(">{name}</td>")), "{name}: {tr}");
    }
    assert_eq!(html.matches("data-span-id=").count(), trace_spans.len());

    // Node A's timeline into node B (the control plane is per node): `dyeline import
    // --timeline` writes B's control database, which B reads at start, so B is stopped for it.
    let (_, range) = capture_range("release-walk");
    let before = get_json(&b, &format!("/api/v1/findings{range}"));
    assert_eq!(
        before["findings"],
        serde_json::json!([]),
        "without a channel history no app is releasing"
    );
    let timeline = get_json(&a, "/api/v1/timeline");
    assert!(!timeline["events"].as_array().unwrap().is_empty());
    let timeline_file = dir.path().join("timeline-a.json");
    std::fs::write(&timeline_file, timeline.to_string()).unwrap();
    assert!(b.stop(), "node B stops cleanly");
    cli(
        &env_b,
        &[
            "import",
            "--data-dir",
            b_dir,
            "--timeline",
            timeline_file.to_str().unwrap(),
        ],
    );
    let b = start(&b_data, &env_b, &[]);
    wait_until("node B lists node A's objects again", 30, || {
        counts(&b).0 == spans
    });
    assert_eq!(get_json(&b, "/api/v1/timeline"), timeline);

    // The same findings on both nodes, those `dyeline analyze` found over the capture.
    let findings_a = get_json(&a, &format!("/api/v1/findings{range}"));
    let findings_b = get_json(&b, &format!("/api/v1/findings{range}"));
    assert_eq!(findings_a, findings_b);
    let items = findings_a["findings"].as_array().unwrap();
    for (kind, key) in [
        ("cross_color_hop", "cross_color_hops"),
        ("missing_decision", "missing_decisions"),
        ("drained_side", "drained_side"),
        ("ratio_deviation", "ratio_deviation"),
        ("instance_skew", "instance_skew"),
        ("error_spike", "error_spike"),
    ] {
        let listed = report[key].as_array().unwrap();
        let api: Vec<Value> = items
            .iter()
            .filter(|i| i["type"] == kind)
            .map(|i| {
                let mut i = i.clone();
                i.as_object_mut().unwrap().remove("type");
                i
            })
            .collect();
        assert!(!listed.is_empty(), "{kind}: the fixture plants some");
        assert_eq!(&api, listed, "{kind}");
    }
    // The hop is marked on node B's trace page now that B knows the channel.
    assert!(trace_page(&b, trace_id).contains("HOP "));
}
