//! The deployment environment as a dimension (issue 28, item 9) through the real ingest
//! path: release-small's spans imported twice as OTLP/JSON, once with resource
//! `deployment.environment.name=production` and once (other trace ids) with the older
//! `deployment.environment=staging`. Each environment is judged apart and its findings name
//! it, in `GET /api/v1/findings` and `dyeline analyze`; `environment=` keeps one; the column
//! reads back through SQL.

use serde_json::Value;

use crate::control::TOKEN;
use crate::fixtures::analyze_json;
use crate::support::{Server, run_cli, shared_dir};
use crate::util::temp_dir;

/// release-small's spans with `key=value` added to every resource and each trace id's first
/// digit replaced by `digit`.
fn spans_in(key: &str, value: &str, digit: char) -> String {
    let text =
        std::fs::read_to_string(shared_dir().join("fixtures/analysis/release-small/spans.jsonl"))
            .unwrap();
    let mut out = String::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut v: Value = serde_json::from_str(line).unwrap();
        for rs in v["resourceSpans"].as_array_mut().unwrap() {
            rs["resource"]["attributes"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!({"key": key, "value": {"stringValue": value}}));
            for ss in rs["scopeSpans"].as_array_mut().unwrap() {
                for sp in ss["spans"].as_array_mut().unwrap() {
                    let t = sp["traceId"].as_str().unwrap();
                    sp["traceId"] = format!("{digit}{}", &t[1..]).into();
                }
            }
        }
        out.push_str(&v.to_string());
        out.push('\n');
    }
    out
}

#[test]
fn each_environment_is_judged_apart_and_filtered_by_name() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let fixture = shared_dir().join("fixtures/analysis/release-small");
    let production = dir.path().join("production.jsonl");
    let staging = dir.path().join("staging.jsonl");
    std::fs::write(
        &production,
        spans_in("deployment.environment.name", "production", 'c'),
    )
    .unwrap();
    std::fs::write(&staging, spans_in("deployment.environment", "staging", 'd')).unwrap();
    let (ok, _, err) = run_cli(&[
        "import",
        "--data-dir",
        data.to_str().unwrap(),
        "--timeline",
        fixture.join("timeline.json").to_str().unwrap(),
        production.to_str().unwrap(),
        staging.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");

    // The post-mortem: release-small's six hops and three missing decisions in each.
    let report: Value = serde_json::from_str(&analyze_json(None, &data, &[])).unwrap();
    let envs = |list: &Value| -> Vec<String> {
        let mut e: Vec<String> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["environment"].as_str().unwrap_or("-").to_owned())
            .collect();
        e.sort();
        e.dedup_by(|a, b| a == b);
        e
    };
    assert_eq!(report["cross_color_hops"].as_array().unwrap().len(), 12);
    assert_eq!(report["missing_decisions"].as_array().unwrap().len(), 6);
    assert_eq!(envs(&report["cross_color_hops"]), ["production", "staging"]);
    let staging_report: Value =
        serde_json::from_str(&analyze_json(None, &data, &["--environment", "staging"])).unwrap();
    assert_eq!(
        staging_report["cross_color_hops"].as_array().unwrap().len(),
        6
    );
    assert_eq!(envs(&staging_report["cross_color_hops"]), ["staging"]);
    assert_eq!(
        staging_report["spans"].as_u64().unwrap() * 2,
        report["spans"].as_u64().unwrap()
    );
    // A name no span carries is warned about; an empty one is refused as a usage error.
    let d = data.to_str().unwrap();
    let (ok, _, err) = run_cli(&["analyze", "--data-dir", d, "--environment", "qa"]);
    assert!(ok, "{err}");
    assert!(
        err.contains("no span in the range names the deployment environment \"qa\""),
        "{err}"
    );
    let (ok, _, err) = run_cli(&["analyze", "--data-dir", d, "--environment", ""]);
    assert!(!ok && err.contains("--environment"), "{err}");

    // The findings API, the same way.
    let s = Server::start(&data, &[("DYELINE_API_TOKEN", TOKEN)]);
    let get = |path: &str| -> Value {
        let r = reqwest::blocking::get(format!("http://{}{path}", s.api)).unwrap();
        assert_eq!(r.status().as_u16(), 200);
        r.json().unwrap()
    };
    let range = "from=2025-01-01T00:00:00Z&to=2025-01-02T00:00:00Z";
    let all = get(&format!("/api/v1/findings?{range}"));
    assert_eq!(all["findings"].as_array().unwrap().len(), 18);
    let prod = get(&format!("/api/v1/findings?{range}&environment=production"));
    assert_eq!(prod["findings"].as_array().unwrap().len(), 9);
    assert_eq!(envs(&prod["findings"]), ["production"]);
    let none = get(&format!("/api/v1/findings?{range}&environment=qa"));
    assert!(none["findings"].as_array().unwrap().is_empty());

    // The column, as SQL reads it: each environment's spans, from either key.
    let rows = s.sql("SELECT deployment_environment, count(*) FROM spans GROUP BY 1 ORDER BY 1");
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0][0], "production");
    assert_eq!(rows[1][0], "staging");
    assert_eq!(rows[0][1], rows[1][1]);
}
