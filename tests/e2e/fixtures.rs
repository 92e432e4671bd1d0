//! Both fixtures of `../shared/fixtures/analysis` import with `dyeline import`; the resolved
//! per-instance colours and rules equal `instances` of their expected.json, and the per-span
//! decisions of release-small equal its `decisions` list. With their timelines imported too
//! (`--timeline`), `dyeline analyze --format json --with-decisions` passes
//! `../shared/tools/check_findings.py` on both, and the windowed-only run
//! (`--detections`) finds the same windowed findings as the full pass. The lane fixtures
//! (lanes-small, lanes-walk), imported with their `dyeline.toml`, timeline, spans and metrics,
//! pass the checker too (domain §7).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::util::*;

pub(crate) fn import(fixture: &str, file: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let path = shared_dir()
        .join("fixtures/analysis")
        .join(fixture)
        .join(file);
    let timeline = path.with_file_name("timeline.json");
    let (ok, _out, err) = run_cli(&[
        "import",
        "--data-dir",
        data.to_str().unwrap(),
        "--timeline",
        timeline.to_str().unwrap(),
        path.to_str().unwrap(),
    ]);
    assert!(ok, "import failed: {err}");
    assert!(err.contains("imported"), "{err}");
    (dir, data)
}

/// Writes `findings` (analyze's JSON) to `path` and asserts `check_findings.py` passes it for
/// the fixture in `fixture_dir`.
pub(crate) fn check_findings(
    findings: &str,
    path: &std::path::Path,
    fixture_dir: &std::path::Path,
) {
    std::fs::write(path, findings).unwrap();
    let check = std::process::Command::new("python3")
        .arg(shared_dir().join("tools/check_findings.py"))
        .arg(path)
        .arg(fixture_dir)
        .output()
        .expect("python3 runs");
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "check_findings.py: {report}");
    assert!(report.trim_end().ends_with("OK"), "{report}");
}

/// `dyeline analyze --format json --with-decisions` on `data` (a `data` directory beside
/// which `findings.json` is written), passed by the checker of `fixture`; its output.
pub(crate) fn analyze_checked(data: &std::path::Path, fixture: &str) -> String {
    let (ok, out, err) = run_cli(&[
        "analyze",
        "--data-dir",
        data.to_str().unwrap(),
        "--format",
        "json",
        "--with-decisions",
    ]);
    assert!(ok, "analyze failed: {err}");
    check_findings(
        &out,
        &data.with_file_name("findings.json"),
        &shared_dir().join("fixtures/analysis").join(fixture),
    );
    out
}

/// `dyeline analyze` on `data`, checked by the fixture's own checker; the full report
/// without `--with-decisions` is returned.
fn analyze_and_check(data: &std::path::Path, fixture: &str) -> Value {
    let out = analyze_checked(data, fixture);
    // The table form names the same counts.
    let (ok, table, err) = run_cli(&["analyze", "--data-dir", data.to_str().unwrap()]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let hops = v["cross_color_hops"].as_array().unwrap().len();
    assert!(
        table.contains(&format!("cross-colour hops: {hops}")),
        "{table}"
    );
    // Each section lists at most --limit findings (default 20, 0: all) and counts the rest.
    for (limit, args) in [
        (20, vec![]),
        (2, vec!["--limit", "2"]),
        (0, vec!["--limit", "0"]),
    ] {
        let mut all = vec!["analyze", "--data-dir", data.to_str().unwrap()];
        all.extend(args);
        let (ok, table, err) = run_cli(&all);
        assert!(ok, "{err}");
        let sections = table_sections(&table);
        assert_eq!(sections.len(), 11, "{table}");
        for (title, count, listed, more) in sections {
            let shown = if limit == 0 { count } else { count.min(limit) };
            assert_eq!(
                (listed, more),
                (shown, count - shown),
                "{title}, limit {limit}"
            );
            if title == "cross-colour hops" {
                assert_eq!(count, hops);
            }
        }
    }
    windowed_only_equals_the_full_pass(data, &[])
}

/// The detection sections of an `analyze` table: (title, the count in its heading, finding
/// lines listed, the count of its `… and N more` line or 0); the lane counts' block, which
/// closes the table, is no detection's.
fn table_sections(table: &str) -> Vec<(String, usize, usize, usize)> {
    table
        .split("\n\n")
        .skip(1)
        .filter(|block| !block.starts_with("lane counts: "))
        .map(|block| {
            let mut lines = block.lines();
            let heading = lines.next().unwrap();
            let (title, count) = heading.rsplit_once(": ").unwrap();
            let (mut listed, mut more) = (0, 0);
            for l in lines {
                if let Some(rest) = l.strip_prefix("  … and ") {
                    more = rest.split(' ').next().unwrap().parse().unwrap();
                } else {
                    listed += 1;
                }
            }
            (title.to_owned(), count.parse().unwrap(), listed, more)
        })
        .collect()
}

const WINDOWED: [&str; 4] = [
    "drained_side",
    "ratio_deviation",
    "instance_skew",
    "error_spike",
];

/// `dyeline analyze --detections` with the four windowed detections (counted as the files
/// are read, without span records) finds what the full pass finds, over the same spans and
/// instances, and says which detections ran; `extra` narrows both runs alike.
fn windowed_only_equals_the_full_pass(data: &std::path::Path, extra: &[&str]) -> Value {
    let json = |more: &[&str]| -> Value {
        let mut args = vec![
            "analyze",
            "--data-dir",
            data.to_str().unwrap(),
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(more);
        let (ok, out, err) = run_cli(&args);
        assert!(ok, "analyze {more:?} failed: {err}");
        serde_json::from_str(&out).unwrap()
    };
    let full = json(&[]);
    let windowed = json(&["--detections", &WINDOWED.join(",")]);
    for key in ["spans", "instances"].into_iter().chain(WINDOWED) {
        assert_eq!(windowed[key], full[key], "{key}");
    }
    assert_eq!(windowed["detections"], serde_json::json!(WINDOWED));
    assert!(full.get("detections").is_none());
    // What was not looked for is left out, not written empty: the trace detections, and
    // the baggage faults (the windowed-only run does not read the decisions).
    for key in [
        "cross_color_hops",
        "missing_decisions",
        "malformed_pairs",
        "conflicting_decisions",
    ] {
        assert!(
            full.get(key).is_some() && windowed.get(key).is_none(),
            "{key}"
        );
    }
    // One detection: its findings only, and the table shows its section only. With
    // --with-decisions the spans are loaded whole, and the baggage faults are reported.
    let spikes = json(&["--detections", "error_spike"]);
    assert_eq!(spikes["error_spike"], full["error_spike"]);
    assert!(spikes.get("ratio_deviation").is_none());
    let with_decisions = json(&["--detections", "error_spike", "--with-decisions"]);
    assert_eq!(with_decisions["error_spike"], full["error_spike"]);
    assert_eq!(with_decisions["malformed_pairs"], full["malformed_pairs"]);
    assert_eq!(
        with_decisions["conflicting_decisions"],
        full["conflicting_decisions"]
    );
    let mut args = vec!["analyze", "--data-dir", data.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--detections", "error_spike"]);
    let (ok, table, err) = run_cli(&args);
    assert!(ok, "{err}");
    let n = full["error_spike"].as_array().unwrap().len();
    assert!(
        table.contains(&format!("one-sided error spikes: {n}")),
        "{table}"
    );
    assert!(table.contains("detections run: error_spike"), "{table}");
    assert!(!table.contains("cross-colour hops"), "{table}");
    full
}

pub(crate) fn expected(fixture: &str) -> Value {
    let p = shared_dir()
        .join("fixtures/analysis")
        .join(fixture)
        .join("expected.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

pub(crate) fn sql_json(data: &std::path::Path, q: &str) -> Vec<Vec<Value>> {
    let (ok, out, err) = run_cli(&[
        "sql",
        "--data-dir",
        data.to_str().unwrap(),
        "--format",
        "json",
        q,
    ]);
    assert!(ok, "{q}: {err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    serde_json::from_value(v["rows"].clone()).unwrap()
}

fn instances(data: &std::path::Path) -> Vec<Value> {
    sql_json(
        data,
        "SELECT DISTINCT instance_id, service_name, color, color_rule FROM spans ORDER BY instance_id",
    )
    .into_iter()
    .map(|r| serde_json::json!({"instance": r[0], "app": r[1], "color": r[2], "rule": r[3]}))
    .collect()
}

fn sorted(mut v: Vec<Value>) -> Vec<Value> {
    v.sort_by_key(|x| x.to_string());
    v
}

#[test]
fn release_small_imports_with_exact_instances_and_decisions() {
    let (_dir, data) = import("release-small", "spans.jsonl");
    analyze_and_check(&data, "release-small");
    let exp = expected("release-small");
    assert_eq!(
        sql_json(
            &data,
            "SELECT count(*), count(DISTINCT trace_id) FROM spans"
        )[0],
        vec![
            exp["counts"]["spans"].clone(),
            exp["counts"]["traces"].clone()
        ]
    );
    assert_eq!(
        sorted(instances(&data)),
        sorted(exp["instances"].as_array().unwrap().clone())
    );
    let rows = sql_json(
        &data,
        "SELECT trace_id, span_id, service_name, decision_source, decisions, malformed_pairs, conflicting_channels \
         FROM spans WHERE decision_source IS NOT NULL",
    );
    let got: Vec<Value> = rows
        .into_iter()
        .map(|r| {
            let decisions: BTreeMap<String, Value> = serde_json::from_value(if r[4].is_null() {
                serde_json::json!({})
            } else {
                r[4].clone()
            })
            .unwrap();
            serde_json::json!({
                "trace_id": r[0], "span_id": r[1], "app": r[2], "source": r[3],
                "decisions": decisions, "malformed_pairs": r[5],
                "conflicting": if r[6].is_null() { serde_json::json!([]) } else { r[6].clone() },
            })
        })
        .collect();
    assert_eq!(
        sorted(got),
        sorted(exp["decisions"].as_array().unwrap().clone())
    );
}

#[test]
fn release_walk_imports_with_exact_instances_and_stays_queryable() {
    let (_dir, data) = import("release-walk", "spans.jsonl.gz");
    let v = analyze_and_check(&data, "release-walk");
    // Narrowed to the window of the first spike (RFC 3339 and Unix ns bounds), the windowed
    // run and the full pass still agree, and find that spike.
    let spike = &v["error_spike"][0];
    // Unix ns are JSON strings (beyond a double's integers).
    let ns = |v: &Value| -> i64 { v.as_str().unwrap().parse().unwrap() };
    let (ws, we) = (
        ns(&spike["window_start_unix_nano"]),
        ns(&spike["window_end_unix_nano"]),
    );
    let from = chrono::DateTime::from_timestamp_nanos(ws).to_rfc3339();
    let to = we.to_string();
    let narrowed = windowed_only_equals_the_full_pass(&data, &["--from", &from, "--to", &to]);
    assert!(
        narrowed["error_spike"].as_array().unwrap().contains(spike),
        "{narrowed}"
    );
    assert!(narrowed["spans"].as_u64().unwrap() < v["spans"].as_u64().unwrap());
    // An unknown detection is refused, naming the six.
    let (ok, _, err) = run_cli(&[
        "analyze",
        "--data-dir",
        data.to_str().unwrap(),
        "--detections",
        "spike",
    ]);
    assert!(!ok);
    assert!(err.contains("unknown detection \"spike\""), "{err}");
    assert!(err.contains("cross_color_hop, missing_decision"), "{err}");
    let exp = expected("release-walk");
    let counts = sql_json(
        &data,
        "SELECT count(*), count(DISTINCT trace_id) FROM spans",
    );
    assert_eq!(counts[0][0], exp["counts"]["spans"]);
    assert_eq!(counts[0][1], exp["counts"]["traces"]);
    assert_eq!(
        sorted(instances(&data)),
        sorted(exp["instances"].as_array().unwrap().clone())
    );
    // Importing the same capture again adds nothing (one row per span).
    let path = shared_dir().join("fixtures/analysis/release-walk/spans.jsonl.gz");
    let (ok, _, err) = run_cli(&[
        "import",
        "--data-dir",
        data.to_str().unwrap(),
        path.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!("{} duplicates", exp["counts"]["spans"])),
        "{err}"
    );
    assert_eq!(
        sql_json(&data, "SELECT count(*) FROM spans")[0][0],
        exp["counts"]["spans"]
    );
}

#[test]
fn a_relative_data_dir_works_for_import_and_sql() {
    let dir = temp_dir();
    let path = shared_dir().join("fixtures/analysis/release-small/spans.jsonl");
    let (ok, _, err) = run_cli_in(
        dir.path(),
        &["import", "--data-dir", "./data", path.to_str().unwrap()],
    );
    assert!(ok, "{err}");
    let (ok, out, err) = run_cli_in(
        dir.path(),
        &[
            "sql",
            "--data-dir",
            "./data",
            "--format",
            "json",
            "SELECT count(*) FROM spans",
        ],
    );
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        v["rows"][0][0],
        expected("release-small")["counts"]["spans"]
    );
}

/// A lane fixture imported with its `dyeline.toml` (the config returned), timeline, spans and
/// metrics into a data dir in the temporary dir returned.
pub(crate) fn lanes_import(
    fixture: &str,
    spans: &str,
) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let root = shared_dir().join("fixtures/analysis").join(fixture);
    let config = root.join("dyeline.toml");
    let path = |f: &str| root.join(f).to_str().unwrap().to_owned();
    let (ok, _out, err) = run_cli(&[
        "--config",
        config.to_str().unwrap(),
        "import",
        "--data-dir",
        data.to_str().unwrap(),
        "--timeline",
        &path("timeline.json"),
        &path(spans),
        &path("metrics.jsonl"),
    ]);
    assert!(ok, "import failed: {err}");
    assert!(err.contains("presence signals"), "{err}");
    (dir, data, config)
}

/// A fixture's timeline and the page query `?from=…&to=…` of its whole capture.
pub(crate) fn capture_range(fixture: &str) -> (Value, String) {
    let path = shared_dir()
        .join("fixtures/analysis")
        .join(fixture)
        .join("timeline.json");
    let timeline: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let range = format!(
        "?from={}&to={}",
        timeline["t0_unix_nano"].as_str().unwrap(),
        timeline["end_unix_nano"].as_str().unwrap()
    );
    (timeline, range)
}

/// A lane fixture imported ([`lanes_import`]), then analysed with the same config:
/// `check_findings.py` passes it; the data dir (in the temporary dir returned) and the report.
fn lanes_fixture(fixture: &str, spans: &str) -> (tempfile::TempDir, std::path::PathBuf, Value) {
    let (dir, data, config) = lanes_import(fixture, spans);
    let root = shared_dir().join("fixtures/analysis").join(fixture);
    let out = analyze_json(Some(&config), &data, &["--with-decisions"]);
    check_findings(&out, &dir.path().join("findings.json"), &root);
    let v = serde_json::from_str(&out).unwrap();
    (dir, data, v)
}

/// `dyeline [--config CONFIG] analyze --data-dir DATA --format json EXTRA...`'s output.
pub(crate) fn analyze_json(
    config: Option<&std::path::Path>,
    data: &std::path::Path,
    extra: &[&str],
) -> String {
    let mut args = match config {
        Some(c) => vec!["--config", c.to_str().unwrap()],
        None => Vec::new(),
    };
    args.extend([
        "analyze",
        "--data-dir",
        data.to_str().unwrap(),
        "--format",
        "json",
    ]);
    args.extend_from_slice(extra);
    let (ok, out, err) = run_cli(&args);
    assert!(ok, "analyze {extra:?} failed: {err}");
    out
}

#[test]
fn lanes_small_passes_its_exact_lists_and_shows_on_the_lanes_pages() {
    let (_dir, data, v) = lanes_fixture("lanes-small", "spans.jsonl");
    let exp = expected("lanes-small");
    // The checker compares these; the counts are the fixture's, not zeros.
    assert_eq!(v["lane_counts"], exp["lane_counts"]);
    assert_eq!(
        v["lane_leaks"].as_array().unwrap().len(),
        exp["lane_leaks"].as_array().unwrap().len()
    );
    // The lanes pages over the whole capture, without JavaScript.
    let (_, range) = capture_range("lanes-small");
    let s = crate::support::Server::start(&data, &[]);
    let get = |path: &str| {
        let r = reqwest::blocking::get(format!("http://{}{path}{range}", s.api)).unwrap();
        // Leptos separates adjacent text nodes with empty comments; they are not content.
        (r.status().as_u16(), r.text().unwrap().replace("<!>", ""))
    };
    let (status, index) = get("/lanes");
    assert_eq!(status, 200, "{index}");
    // promo was deleted at 3285 s: the index lists mall, then the apps in no group.
    assert!(index.contains(r#"data-group="mall""#), "{index}");
    assert!(!index.contains(r#"data-group="promo""#), "{index}");
    // The apps in no group are those of the spans and signals outside mall (no name of a
    // file's dictionary that no span of the range has, such as an empty one).
    assert!(
        index.contains(r#"<td class="apps">bff, coupon, legacy-proxy</td>"#),
        "{index}"
    );
    let (status, mall) = get("/lanes/mall");
    assert_eq!(status, 200, "{mall}");
    // Every leak reason of the group is a row, with a link to its trace.
    for reason in [
        "tag_ignored",
        "tag_dropped",
        "wrong_fallback",
        "strict_lane",
    ] {
        assert!(
            mall.contains(&format!("<td>{reason}</td>")),
            "{reason}: {mall}"
        );
    }
    assert!(
        mall.contains(r#"data-finding="lane_tag_dropped""#),
        "{mall}"
    );
    assert!(
        mall.contains(r#"href="/traces/b7000000000000000000000000000002"#),
        "{mall}"
    );
    let cell = &mall[mall.find(r#"data-app="order" data-lane="gray""#).unwrap()..];
    let cell = &cell[..cell.find("</td>").unwrap()];
    assert!(cell.contains("order-green-7 (metrics, spans)"), "{cell}");
    assert!(
        mall.contains(&format!(
            r#"<span id="count-lane-fallback">{}</span>"#,
            exp["lane_counts"]["lane_fallback"]
        )),
        "{mall}"
    );
    assert_eq!(get("/lanes/promo").0, 404);
}

#[test]
fn lanes_walk_finds_every_planted_lane_fault_and_nothing_else() {
    let (_dir, data, v) = lanes_fixture("lanes-walk", "spans.jsonl.gz");
    assert!(!v["lane_error_spike"].as_array().unwrap().is_empty());
    assert!(!v["lane_leaks"].as_array().unwrap().is_empty());
    // --detections splits the run: the six of §6 alone run no lane rule, the lane types
    // alone none of the six, and each finds what the full run finds.
    let config = shared_dir().join("fixtures/analysis/lanes-walk/dyeline.toml");
    let json = |types: &str| -> Value {
        serde_json::from_str(&analyze_json(
            Some(&config),
            &data,
            &["--detections", types],
        ))
        .unwrap()
    };
    let six = json(
        "cross_color_hop,missing_decision,drained_side,ratio_deviation,instance_skew,error_spike",
    );
    let lane = json("lane_leak,lane_tag_dropped,lane_pollution,lane_tag_changed,lane_error_spike");
    const LANE_KEYS: [&str; 8] = [
        "lanes",
        "lane_leaks",
        "lane_tags_dropped",
        "lane_pollution",
        "lane_tags_changed",
        "lane_error_spike",
        "lane_counts",
        "lane_coverage",
    ];
    const SIX_KEYS: [&str; 6] = [
        "cross_color_hops",
        "missing_decisions",
        "drained_side",
        "ratio_deviation",
        "instance_skew",
        "error_spike",
    ];
    for key in LANE_KEYS {
        assert!(six.get(key).is_none(), "{key} with the six only");
        assert_eq!(lane[key], v[key], "{key}");
    }
    for key in SIX_KEYS {
        assert!(lane.get(key).is_none(), "{key} with the lane types only");
        assert_eq!(six[key], v[key], "{key}");
    }
}
