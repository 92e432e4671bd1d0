//! Lanes read at ingest (domain §7.1), end to end: lanes-small's spans imported with the
//! fixture's `dyeline.toml` (`--config`, its lane rules and carrier) store exactly the lane
//! tags and instance lanes of its expected.json; a bad lane rule is refused at load by every
//! command; and the real Python SDK's `BaggageSpanProcessor` and a captured `gray` header,
//! mapped by a user carrier, give the stored tags.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::fixtures::{expected, sql_json};
use crate::util::*;

fn fixture(file: &str) -> PathBuf {
    shared_dir()
        .join("fixtures/analysis/lanes-small")
        .join(file)
}

/// `dyeline [--config F] import` of lanes-small's spans (its metrics file is not spans).
fn import_spans(config: Option<&Path>) -> (tempfile::TempDir, PathBuf) {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let mut args = Vec::new();
    if let Some(c) = config {
        args.extend(["--config", c.to_str().unwrap()]);
    }
    let spans = fixture("spans.jsonl");
    args.extend([
        "import",
        "--data-dir",
        data.to_str().unwrap(),
        spans.to_str().unwrap(),
    ]);
    let (ok, _out, err) = run_cli(&args);
    assert!(ok, "import failed: {err}");
    (dir, data)
}

fn sorted(mut v: Vec<Value>) -> Vec<Value> {
    v.sort_by_key(Value::to_string);
    v
}

/// (instance, app, lane, rule) of every instance in the spans.
fn stored_lanes(data: &Path) -> Vec<Value> {
    sql_json(
        data,
        "SELECT DISTINCT instance_id, service_name, lane, lane_rule FROM spans",
    )
    .into_iter()
    .map(|r| json!({"instance": r[0], "app": r[1], "lane": r[2], "rule": r[3]}))
    .collect()
}

#[test]
fn lanes_small_spans_store_the_expected_lane_tags_and_instance_lanes() {
    let config = fixture("dyeline.toml");
    let (_dir, data) = import_spans(Some(&config));
    let exp = expected("lanes-small");

    // Every span on which a carrier is present: its tag, the carrier that gave it, and the
    // carriers that gave no lane id.
    let tags: Vec<Value> = sql_json(
        &data,
        "SELECT trace_id, span_id, service_name, lane_tag_source, lane_tag, malformed_lane_tags \
         FROM spans WHERE lane_tag IS NOT NULL OR malformed_lane_tags > 0",
    )
    .into_iter()
    .map(|r| {
        json!({"trace_id": r[0], "span_id": r[1], "app": r[2], "source": r[3], "tag": r[4],
               "malformed": r[5]})
    })
    .collect();
    let want = exp["lane_tags"].as_array().unwrap().clone();
    assert_eq!(tags.len(), want.len());
    assert_eq!(sorted(tags), sorted(want));
    assert_eq!(
        sql_json(&data, "SELECT sum(malformed_lane_tags) FROM spans")[0][0],
        exp["lane_counts"]["malformed_lane_tags"]
    );

    // The instances seen in spans; the others of `lanes` only send metrics (the presence
    // receivers' part).
    let stored = stored_lanes(&data);
    let in_spans: BTreeSet<String> = stored
        .iter()
        .map(|l| l["instance"].as_str().unwrap().to_owned())
        .collect();
    let want: Vec<Value> = exp["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| in_spans.contains(l["instance"].as_str().unwrap()))
        .map(|l| json!({"instance": l["instance"], "app": l["app"], "lane": l["lane"], "rule": l["rule"]}))
        .collect();
    let skipped = exp["lanes"].as_array().unwrap().len() - want.len();
    eprintln!(
        "lanes-small: {} instances in spans compared, {skipped} seen only in metrics.jsonl skipped",
        want.len()
    );
    assert_eq!(skipped, 4, "the fixture's metrics-only instances");
    assert_eq!(stored.len(), want.len(), "one lane per instance");
    assert_eq!(sorted(stored), sorted(want));
    // The instance whose `deploy.lane` is not a lane id keeps the value; lanes-small's one
    // such instance sends spans.
    let invalid = sql_json(
        &data,
        "SELECT DISTINCT instance_id, lane_invalid_values FROM spans WHERE lane_invalid_values IS NOT NULL",
    );
    assert_eq!(invalid, [vec![json!("settle-g-1"), json!(["gray_2"])]]);
    assert_eq!(
        json!(invalid.len()),
        exp["lane_counts"]["invalid_instance_lanes"]
    );

    // Without --config only the built-ins apply: the Nacos flag and host names mark nothing,
    // the gray header is no carrier.
    let (_dir2, plain) = import_spans(None);
    let by_instance = |data: &Path, instance: &str| -> Value {
        stored_lanes(data)
            .into_iter()
            .find(|l| l["instance"] == instance)
            .unwrap()
    };
    assert_eq!(
        by_instance(&plain, "inventory-blue-9"),
        json!({"instance": "inventory-blue-9", "app": "inventory", "lane": "base", "rule": "default"})
    );
    assert_eq!(by_instance(&plain, "order-green-7")["rule"], "deploy.lane");
    assert_eq!(
        sql_json(
            &plain,
            "SELECT count(*) FROM spans WHERE lane_tag_source = 'http.request.header.gray'"
        )[0][0],
        json!(0)
    );
}

/// A bad lane rule or carrier stops `serve`, `import` and `analyze` alike at load, naming it.
#[test]
fn a_bad_lane_rule_is_refused_at_load_by_every_command() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[lane_rules]]\nkind = \"pattern\"\nkey = \"host.name\"\nregex = '-(gray)-'\n",
    )
    .unwrap();
    let spans = fixture("spans.jsonl");
    for command in [
        vec![
            "import",
            "--data-dir",
            data.to_str().unwrap(),
            spans.to_str().unwrap(),
        ],
        vec!["analyze", "--data-dir", data.to_str().unwrap()],
        vec!["serve", "--data-dir", data.to_str().unwrap()],
    ] {
        let mut args = vec!["--config", bad.to_str().unwrap()];
        args.extend(command.iter().copied());
        let (ok, _out, err) = run_cli(&args);
        assert!(!ok, "{command:?} started");
        assert!(
            err.contains(
                "lane_rules: lane rule #0 `host.name`: regex `-(gray)-` has no named group `lane`"
            ),
            "{command:?}: {err}"
        );
    }
    assert!(!data.join("spans").exists(), "nothing was imported");
    std::fs::write(
        &bad,
        "[[lane_carriers]]\nkey = \"http.request.header.gray\"\nmap = { \"true\" = \"Gray\" }\n",
    )
    .unwrap();
    let (ok, _out, err) = run_cli(&[
        "--config",
        bad.to_str().unwrap(),
        "analyze",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        err.contains(
            "lane_carriers: lane carrier #0 `http.request.header.gray`: map entry `true` = `Gray`"
        ),
        "{err}"
    );
}

/// The real Python SDK: `x-deploy-lane` copied from baggage by `BaggageSpanProcessor`, the
/// captured `gray` header mapped by the fixture's user carrier, a whole captured baggage
/// header, a malformed carrier and none; each span's stored lane tag, its source, the
/// malformed count and its instance's lane.
#[test]
fn python_sdk_baggage_processor_and_captured_header_give_the_stored_lane_tags() {
    let dir = temp_dir();
    let config = fixture("dyeline.toml");
    let s = Server::start_with(
        &dir.path().join("data"),
        &[],
        &["--config", config.to_str().unwrap()],
    );
    let endpoint = format!("http://{}/v1/traces", s.http);
    let expected = python_json_lines("lane_spans.py", &["--endpoint", &endpoint]);
    assert_eq!(expected.len(), 7);
    assert_eq!(count_all(&s), 7);
    for e in &expected {
        let rows = s.sql(&format!(
            "SELECT service_name, instance_id, lane, lane_rule, lane_tag, lane_tag_source, \
             malformed_lane_tags FROM spans WHERE trace_id = '{}' AND span_id = '{}'",
            e["trace_id"].as_str().unwrap(),
            e["span_id"].as_str().unwrap()
        ));
        assert_eq!(rows.len(), 1, "{e}");
        assert_eq!(
            rows[0],
            vec![
                e["app"].clone(),
                e["instance"].clone(),
                e["lane"].clone(),
                e["rule"].clone(),
                e["tag"].clone(),
                e["source"].clone(),
                e["malformed"].clone(),
            ],
            "{e}"
        );
    }
    // The malformed carriers are counted by the receiver too.
    assert!(
        s.metrics()
            .contains("dyeline_receiver_malformed_lane_tags_total 2"),
        "{}",
        s.metrics()
    );
}
