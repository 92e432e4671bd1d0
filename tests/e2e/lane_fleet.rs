//! Gray releases run by the real Python OpenTelemetry SDK against the real binary (domain §7),
//! each with its docs/lanes.md recipe's configuration as a user copies it, the lane group put
//! with `dyeline lane-group put`, and `dyeline analyze --format json` over the server's data
//! giving exactly the findings, counts and coverage §7.3–7.4 derive.
//!
//! Seed 001 (`tests/python/lane_fleet.py`): instances each with its own `TracerProvider` and
//! resource behind the real WSGI instrumentation; the gateway's captured `gray` header mapped by
//! a `[[lane_carriers]]` entry, `x-deploy-lane` in the baggage copied onto spans by
//! `BaggageSpanProcessor`, gray instances marked by Nacos metadata and a host name, and an idle
//! gray instance present only through its `PeriodicExportingMetricReader`: the same gray
//! request served by base is a fallback before that instance exists and a leak after.
//!
//! Seed 004 (`tests/python/lane_fleet_004.py`): Dubbo-tagged instances, two gray
//! environments, MQ, failover, wrong and reverse fallback.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::util::*;

const TOKEN: &str = "e2e-lane-fleet-token-1";

/// The text between `start` and `end` after `heading` in docs/lanes.md: a recipe's TOML
/// block (as a user would copy it) or its lane group's JSON.
fn from_doc(heading: &str, start: &str, end: &str) -> String {
    let doc =
        std::fs::read_to_string(crate::support::workspace_root().join("docs/lanes.md")).unwrap();
    let section = &doc[doc.find(heading).expect(heading)..];
    let body = &section[section.find(start).expect(start) + start.len()..];
    body[..body.find(end).expect(end)].to_owned()
}

/// The seed-001 lane group of the Python fleet: the gateway stains, gray falls back to base.
const GROUP_001: &str = r#"{"apps": ["gateway", "order", "pricing"], "entry_apps": ["gateway"],
    "lanes": {"gray": {"fallback": "base"}}}"#;

/// `dyeline serve` with `config`, and lane group `id` put from `group` with `dyeline lane-group
/// put`; the server and its data dir (`dir/data`).
fn serve(dir: &Path, config: &str, id: &str, group: &str) -> Server {
    let file = dir.join("dyeline.toml");
    std::fs::write(&file, config).unwrap();
    let s = Server::start_with(
        &dir.join("data"),
        &[("DYELINE_API_TOKEN", TOKEN)],
        &["--config", file.to_str().unwrap()],
    );
    let body = dir.join("group.json");
    std::fs::write(&body, group).unwrap();
    let server = format!("http://{}", s.api);
    let (ok, _, err) = run_cli(&[
        "lane-group",
        "--server",
        &server,
        "--token",
        TOKEN,
        "put",
        id,
        body.to_str().unwrap(),
    ]);
    assert!(ok, "lane-group put: {err}");
    s
}

/// The findings of `key` in analyze's JSON, without their times.
fn findings(v: &Value, key: &str) -> Vec<Value> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key}: {v}"))
        .iter()
        .map(|f| {
            let mut f = f.clone();
            f.as_object_mut().unwrap().remove("t_unix_nano");
            f
        })
        .collect()
}

/// `lane_coverage` summed over the windows per (lane, app): served in lane, lane fallback,
/// failover, leaked, requests, errors.
fn coverage(v: &Value) -> BTreeMap<(String, String), [i64; 6]> {
    let mut out: BTreeMap<(String, String), [i64; 6]> = BTreeMap::new();
    for c in v["lane_coverage"].as_array().unwrap() {
        let key = (
            c["lane"].as_str().unwrap().to_owned(),
            c["app"].as_str().unwrap().to_owned(),
        );
        let sum = out.entry(key).or_default();
        let fields = [
            "served_in_lane",
            "lane_fallback",
            "failover",
            "leaked",
            "requests",
            "errors",
        ];
        for (i, f) in fields.iter().enumerate() {
            sum[i] += c[f].as_i64().unwrap();
        }
    }
    out
}

/// (instance, app, lane, rule) of analyze's `lanes`, sorted.
fn lanes(v: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = v["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| json!([l["instance"], l["app"], l["lane"], l["rule"]]))
        .collect();
    out.sort_by_key(Value::to_string);
    out
}

/// The lane rows of `rows` ((lane, app), the six coverage sums), as [`coverage`] gives them.
fn sums<const N: usize>(rows: [(&str, &str, [i64; 6]); N]) -> BTreeMap<(String, String), [i64; 6]> {
    rows.into_iter()
        .map(|(lane, app, sums)| ((lane.to_owned(), app.to_owned()), sums))
        .collect()
}

#[test]
fn python_fleet_idle_gray_instance_present_by_its_metrics_makes_a_leak_not_a_fallback() {
    let dir = temp_dir();
    let config = from_doc("## Recipe: seed-001", "```toml\n", "```");
    let mut s = serve(dir.path(), &config, "mall", GROUP_001);
    let out: Value = serde_json::from_str(&crate::otlp_python::run_script(
        "lane_fleet.py",
        &["--endpoint", &format!("http://{}", s.http)],
    ))
    .unwrap();
    let req = |rid: &str, app: &str| -> &Value { &out["requests"][rid][app] };

    // What each SERVER span stored: its instance's lane and rule, its tag and the carrier.
    let server_span = |rid: &str, app: &str| -> Vec<Value> {
        let r = req(rid, app);
        let rows = s.sql(&format!(
            "SELECT instance_id, lane, lane_rule, lane_tag, lane_tag_source, malformed_lane_tags \
             FROM spans WHERE trace_id = '{}' AND span_id = '{}' AND span_kind = 'SERVER'",
            r["trace_id"].as_str().unwrap(),
            r["span_id"].as_str().unwrap()
        ));
        assert_eq!(rows.len(), 1, "{rid} {app}");
        rows[0].clone()
    };
    let header = json!("http.request.header.gray");
    let baggage = json!("x-deploy-lane");
    let untagged = [Value::Null, Value::Null];
    for rid in ["a2", "b1"] {
        assert_eq!(
            server_span(rid, "gateway"),
            [
                &[json!("gw-1"), json!("base"), json!("default")][..],
                &[json!("gray"), header.clone(), json!(0)]
            ]
            .concat(),
            "{rid}: the captured header, mapped by the carrier"
        );
        assert_eq!(
            server_span(rid, "order"),
            [
                json!("order-gray-1"),
                json!("gray"),
                json!("nacos.metadata.gray"),
                json!("gray"),
                baggage.clone(),
                json!(0)
            ],
            "{rid}: the baggage member, copied by BaggageSpanProcessor"
        );
        assert_eq!(
            server_span(rid, "pricing"),
            [
                json!("pricing-1"),
                json!("base"),
                json!("default"),
                json!("gray"),
                baggage.clone(),
                json!(0)
            ],
            "{rid}"
        );
    }
    for (rid, order) in [("a1", "order-1"), ("b2", "order-gray-1"), ("b3", "order-1")] {
        for (app, instance) in [
            ("gateway", "gw-1"),
            ("order", order),
            ("pricing", "pricing-1"),
        ] {
            let row = server_span(rid, app);
            assert_eq!(row[0], instance, "{rid} {app}");
            assert_eq!(row[3..5], untagged, "{rid} {app}: no carrier");
        }
    }
    // Every span a carrier was on: the gray requests' SERVER spans above, and the calls the
    // gateway and order made for them (their baggage member, copied); nothing malformed.
    assert_eq!(
        s.sql(
            "SELECT service_name, span_kind, lane_tag, lane_tag_source, count(*) FROM spans \
             WHERE lane_tag IS NOT NULL OR malformed_lane_tags > 0 GROUP BY 1, 2, 3, 4 ORDER BY 1, 2"
        ),
        [
            vec![json!("gateway"), json!("CLIENT"), json!("gray"), baggage.clone(), json!(2)],
            vec![json!("gateway"), json!("SERVER"), json!("gray"), header.clone(), json!(2)],
            vec![json!("order"), json!("CLIENT"), json!("gray"), baggage.clone(), json!(2)],
            vec![json!("order"), json!("SERVER"), json!("gray"), baggage.clone(), json!(2)],
            vec![json!("pricing"), json!("SERVER"), json!("gray"), baggage.clone(), json!(2)],
        ]
    );
    assert_eq!(count_all(&s), 25, "five requests of five spans");

    // The idle gray pricing instance: present at exactly its export times, gray by its host
    // name, and no span of it.
    let rows = s.sql(
        "SELECT DISTINCT service_name, lane, lane_rule, signal FROM presence \
         WHERE instance_id = 'pricing-gray-1'",
    );
    assert_eq!(
        rows,
        [vec![
            json!("pricing"),
            json!("gray"),
            json!("host.name"),
            json!("metrics")
        ]]
    );
    let times: Vec<i64> = s
        .sql("SELECT time_unix_nano FROM presence WHERE instance_id = 'pricing-gray-1' ORDER BY 1")
        .iter()
        .map(|r| r[0].as_i64().unwrap())
        .collect();
    let sent: Vec<i64> = out["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_i64().unwrap())
        .collect();
    assert_eq!(times, sent);
    assert_eq!(
        scalar(
            &s,
            "SELECT count(*) FROM spans WHERE instance_id = 'pricing-gray-1'"
        ),
        0
    );
    // The fallback request started before the instance's first export, the leaked one
    // between two of them.
    let start = |rid: &str| -> i64 {
        scalar(
            &s,
            &format!(
                "SELECT start_time_unix_nano FROM spans WHERE span_id = '{}'",
                req(rid, "pricing")["span_id"].as_str().unwrap()
            ),
        )
        .as_i64()
        .unwrap()
    };
    let (first, last) = (sent[0], *sent.last().unwrap());
    assert!(start("a2") < first, "{} {first}", start("a2"));
    assert!(
        first < start("b1") && start("b1") < last,
        "{first} {} {last}",
        start("b1")
    );
    assert!(s.stop());

    let v = crate::analyze::analyze(dir.path());
    let ids = |rid: &str, app: &str| {
        let r = req(rid, app);
        (r["trace_id"].clone(), r["span_id"].clone())
    };

    // §7.3.1: b1's pricing span carries gray, is served in base while pricing has gray
    // capacity (its idle instance): a leak whose tag was ignored. a2's same span, before the
    // gray pricing existed, is a fallback.
    let (t, sp) = ids("b1", "pricing");
    assert_eq!(
        findings(&v, "lane_leaks"),
        [
            json!({"trace_id": t, "span_id": sp, "group": "mall", "kind": "RPC", "lane": "gray",
                "reason": "tag_ignored", "from_app": "order", "from_lane": "gray",
                "to_app": "pricing", "to_lane": "base", "via": []})
        ]
    );
    // §7.3.3: b2, a base request the gateway sent to the gray order while order-1 is present.
    let (t, sp) = ids("b2", "order");
    assert_eq!(
        findings(&v, "lane_pollution"),
        [
            json!({"trace_id": t, "span_id": sp, "group": "mall", "kind": "RPC", "app": "order",
                "lane": "gray", "reason": "untagged", "from_app": "gateway"})
        ]
    );
    for key in ["lane_tags_dropped", "lane_tags_changed", "lane_error_spike"] {
        assert_eq!(v[key], json!([]), "{key}");
    }
    // The fallbacks: the gateway (no gray instance) for a2 and b1, pricing for a2.
    assert_eq!(
        v["lane_counts"],
        json!({"lane_fallback": 3, "failover": 0, "tag_not_recorded": 0, "reverse_fallback": 0,
               "undetermined": 0, "malformed_lane_tags": 0, "invalid_instance_lanes": 0})
    );
    // Coverage summed over the windows.
    assert_eq!(
        coverage(&v),
        sums([
            ("gray", "gateway", [0, 2, 0, 0, 0, 0]),
            ("gray", "order", [2, 0, 0, 0, 3, 0]),
            ("gray", "pricing", [0, 1, 0, 1, 0, 0]),
        ])
    );
    // The instances and what marked them; the idle one is known from its metrics alone.
    assert_eq!(
        lanes(&v),
        [
            json!(["gw-1", "gateway", "base", "default"]),
            json!(["order-1", "order", "base", "default"]),
            json!(["order-gray-1", "order", "gray", "nacos.metadata.gray"]),
            json!(["pricing-1", "pricing", "base", "default"]),
            json!(["pricing-gray-1", "pricing", "gray", "host.name"]),
        ]
    );
}

/// Seed 004 by the real Python SDK, with docs/lanes.md's seed-004 recipe as the user copies it
/// (its config: instances marked by their Dubbo tag; its lane group: two gray environments,
/// reverse fallback allowed). RPC and MQ spans made as their instrumentations make them, the
/// environment chosen by the access layer carried in the baggage; an idle gray consumer present
/// only by its metrics. Each case is what §7.3 derives: a gray message consumed on base is a
/// fallback before the gray consumer exists and an MQ leak while it is present; a retry on base
/// after the gray instance failed is a failover; a gray2 request served by gray1 is a
/// wrong fallback; base traffic served by gray1 where the app has no base instance is a reverse
/// fallback.
#[test]
fn python_fleet_seed_004_mq_leak_failover_wrong_and_reverse_fallback() {
    let dir = temp_dir();
    let config = from_doc("## Recipe: seed-004", "```toml\n", "```");
    let group = from_doc("## Recipe: seed-004", "<<'JSON'\n", "\nJSON");
    let mut s = serve(dir.path(), &config, "union", &group);
    let out: Value = serde_json::from_str(&crate::otlp_python::run_script(
        "lane_fleet_004.py",
        &["--endpoint", &format!("http://{}", s.http)],
    ))
    .unwrap();
    let span = |rid: &str, role: &str| -> (Value, Value) {
        let r = &out["requests"][rid][role];
        assert!(r.is_object(), "{rid} {role}: {out}");
        (r["trace_id"].clone(), r["span_id"].clone())
    };
    // The idle consumer: present at its export times, gray1 by its Dubbo tag.
    let sent = out["metrics"].as_array().unwrap().len();
    assert!(sent >= 2, "{out}");
    assert_eq!(
        s.sql(
            "SELECT lane, lane_rule, count(*) FROM presence WHERE instance_id = 'notify-g1' \
             GROUP BY 1, 2"
        ),
        [vec![json!("gray1"), json!("dubbo.tag"), json!(sent)]]
    );
    assert!(s.stop());

    let v = crate::analyze::analyze(dir.path());
    let (mb_trace, mb_span) = span("mb", "consumer");
    let (w_trace, w_span) = span("w", "user");
    let mut leaks = findings(&v, "lane_leaks");
    leaks.sort_by_key(|l| l["kind"].to_string());
    assert_eq!(
        leaks,
        [
            json!({"trace_id": mb_trace, "span_id": mb_span, "group": "union", "kind": "MQ",
                   "lane": "gray1", "reason": "tag_ignored", "from_app": "(none)",
                   "from_lane": null, "to_app": "union-notify", "to_lane": "base",
                   "via": ["union-proxy"]}),
            json!({"trace_id": w_trace, "span_id": w_span, "group": "union", "kind": "RPC",
                   "lane": "gray2", "reason": "wrong_fallback", "from_app": "(none)",
                   "from_lane": null, "to_app": "union-user", "to_lane": "gray1",
                   "via": ["union-proxy"]}),
        ]
    );
    for key in [
        "lane_pollution",
        "lane_tags_dropped",
        "lane_tags_changed",
        "lane_error_spike",
    ] {
        assert_eq!(v[key], json!([]), "{key}");
    }
    // ma: the fallback; f: the failover; r: the reverse fallback.
    assert_eq!(
        v["lane_counts"],
        json!({"lane_fallback": 1, "failover": 1, "tag_not_recorded": 0, "reverse_fallback": 1,
               "undetermined": 0, "malformed_lane_tags": 0, "invalid_instance_lanes": 0})
    );
    assert_eq!(
        coverage(&v),
        sums([
            ("gray1", "union-notify", [0, 1, 0, 1, 0, 0]),
            ("gray1", "union-order", [0, 0, 0, 0, 1, 0]),
            ("gray1", "union-user", [1, 0, 1, 0, 2, 1]),
            ("gray2", "union-user", [0, 0, 0, 1, 0, 0]),
        ])
    );
    assert_eq!(
        lanes(&v),
        [
            json!(["notify-1", "union-notify", "base", "default"]),
            json!(["notify-g1", "union-notify", "gray1", "dubbo.tag"]),
            json!(["order-g1", "union-order", "gray1", "dubbo.tag"]),
            json!(["proxy-1", "union-proxy", "base", "default"]),
            json!(["user-1", "union-user", "base", "default"]),
            json!(["user-g1", "union-user", "gray1", "dubbo.tag"]),
        ]
    );
}
