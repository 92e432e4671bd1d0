//! The decision codec and the colour chain against fixture `release-small`
//! (`shared/fixtures/analysis/release-small`): every span that carries a decision source, its
//! malformed pairs and conflicts, and every instance's colour and rule, exactly as expected.

use std::collections::{BTreeMap, BTreeSet};

use dyeline_model::decision::read_decision;
use dyeline_model::{ColorRules, DecisionSource};
use serde_json::{Value, json};

const DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/fixtures/analysis/release-small"
);

fn read_json(name: &str) -> String {
    let path = format!("{DIR}/{name}");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The string values of an OTLP/JSON attribute list entry `key`: one for a `stringValue`,
/// each string of an `arrayValue`.
fn values<'a>(attributes: &'a Value, key: &str) -> Option<Vec<&'a str>> {
    let attr = attributes.as_array()?.iter().find(|a| a["key"] == key)?;
    let value = &attr["value"];
    if let Some(s) = value["stringValue"].as_str() {
        return Some(vec![s]);
    }
    let array = value["arrayValue"]["values"].as_array()?;
    Some(
        array
            .iter()
            .filter_map(|v| v["stringValue"].as_str())
            .collect(),
    )
}

fn string<'a>(attributes: &'a Value, key: &str) -> Option<&'a str> {
    values(attributes, key).and_then(|v| v.first().copied())
}

/// Every (resource, span) of the fixture, deduplicated by (trace_id, span_id).
fn spans(requests: &[Value]) -> BTreeMap<(String, String), (&Value, &Value)> {
    let mut out = BTreeMap::new();
    for request in requests {
        for rs in request["resourceSpans"].as_array().unwrap() {
            let resource = &rs["resource"]["attributes"];
            for ss in rs["scopeSpans"].as_array().unwrap() {
                for span in ss["spans"].as_array().unwrap() {
                    let id = (
                        span["traceId"].as_str().unwrap().to_ascii_lowercase(),
                        span["spanId"].as_str().unwrap().to_ascii_lowercase(),
                    );
                    out.insert(id, (resource, &span["attributes"]));
                }
            }
        }
    }
    out
}

fn requests() -> Vec<Value> {
    read_json("spans.jsonl")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("one ExportTraceServiceRequest per line"))
        .collect()
}

fn sorted(mut items: Vec<Value>) -> Vec<Value> {
    items.sort_by_key(|v| v.to_string());
    items
}

#[test]
fn decisions_malformed_pairs_and_conflicts_match_expected() {
    let expected: Value = serde_json::from_str(&read_json("expected.json")).unwrap();
    let requests = requests();
    let (mut decisions, mut malformed, mut conflicts) = (Vec::new(), Vec::new(), Vec::new());
    let mut malformed_total = 0;
    for ((trace_id, span_id), (resource, attributes)) in spans(&requests) {
        let Some(read) = read_decision(&DecisionSource::DEFAULT_ORDER, |k| values(attributes, k))
        else {
            continue;
        };
        let app = string(resource, "service.name").unwrap_or("unknown_service");
        let map: serde_json::Map<String, Value> = read
            .decisions
            .iter()
            .map(|(c, col)| (c.to_owned(), json!(col.as_str())))
            .collect();
        let d = &read.decisions;
        decisions.push(json!({
            "trace_id": trace_id, "span_id": span_id, "app": app,
            "source": read.source.as_str(), "decisions": map,
            "malformed_pairs": d.malformed_pairs(), "conflicting": d.conflicting(),
        }));
        malformed_total += d.malformed_pairs();
        if d.malformed_pairs() > 0 {
            malformed.push(json!({
                "trace_id": trace_id, "span_id": span_id, "app": app,
                "count": d.malformed_pairs(),
            }));
        }
        for channel in d.conflicting() {
            conflicts.push(json!({
                "trace_id": trace_id, "span_id": span_id, "app": app,
                "channel": channel, "kept": d.get(channel).unwrap().as_str(),
            }));
        }
    }
    let want = |v: &Value| sorted(v.as_array().unwrap().clone());
    assert_eq!(sorted(decisions), want(&expected["decisions"]));
    assert_eq!(malformed_total, expected["malformed_pairs"]["total"]);
    assert_eq!(
        sorted(malformed),
        want(&expected["malformed_pairs"]["spans"])
    );
    assert_eq!(sorted(conflicts), want(&expected["conflicting_decisions"]));
}

#[test]
fn instance_colours_and_rules_match_expected() {
    let expected: Value = serde_json::from_str(&read_json("expected.json")).unwrap();
    let rules = ColorRules::default();
    let requests = requests();
    let mut got = BTreeSet::new();
    for request in &requests {
        for rs in request["resourceSpans"].as_array().unwrap() {
            let attrs = &rs["resource"]["attributes"];
            let instance = ["service.instance.id", "host.name", "k8s.pod.name"]
                .into_iter()
                .find_map(|k| string(attrs, k))
                .expect("every fixture resource names its instance");
            let app = string(attrs, "service.name").unwrap_or("unknown_service");
            let resolved = rules.resolve(|k| string(attrs, k));
            got.insert(
                json!({
                    "instance": instance, "app": app,
                    "color": resolved.color.as_str(), "rule": resolved.rule,
                })
                .to_string(),
            );
        }
    }
    let want: BTreeSet<String> = expected["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(Value::to_string)
        .collect();
    assert_eq!(got, want);
}
