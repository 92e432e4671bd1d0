//! A seed-001 style gray release run by the real Python OpenTelemetry SDK against the real
//! binary (domain §7): a fleet of instances, each its own `TracerProvider` and resource, behind
//! the real WSGI instrumentation (`tests/python/lane_fleet.py`). The gateway's captured `gray`
//! header is mapped by a `[[lane_carriers]]` entry, `x-deploy-lane` travels in the baggage and
//! is copied onto spans by `BaggageSpanProcessor`, gray instances are marked by Nacos metadata
//! and by a host name (`[[lane_rules]]`; the server runs the configuration of docs/lanes.md's
//! seed-001 recipe), and an idle gray instance is present only through its
//! `PeriodicExportingMetricReader`. The lane group is put with `dyeline lane-group put`;
//! `dyeline analyze --format json` over the server's data gives exactly the findings, counts
//! and coverage domain §7.3–7.4 derive.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::util::*;

const TOKEN: &str = "e2e-lane-fleet-token-1";

/// The server's configuration: the seed-001 recipe's TOML block of docs/lanes.md, as a user
/// would copy it.
fn seed_001_config() -> String {
    let doc =
        std::fs::read_to_string(crate::support::workspace_root().join("docs/lanes.md")).unwrap();
    let recipe = &doc[doc
        .find("## Recipe: seed-001")
        .expect("the seed-001 recipe")..];
    let block = &recipe[recipe.find("```toml\n").expect("its TOML block") + 8..];
    block[..block.find("```").unwrap()].to_owned()
}

/// The lane group: the gateway stains, gray falls back to base.
const GROUP: &str = r#"{"apps": ["gateway", "order", "pricing"], "entry_apps": ["gateway"],
    "lanes": {"gray": {"fallback": "base"}}}"#;

/// Sorted by their JSON text, for comparing lists whose order is not the point.
fn sorted(mut v: Vec<Value>) -> Vec<Value> {
    v.sort_by_key(Value::to_string);
    v
}

#[test]
fn python_fleet_idle_gray_instance_present_by_its_metrics_makes_a_leak_not_a_fallback() {
    let dir = temp_dir();
    let config = dir.path().join("dyeline.toml");
    std::fs::write(&config, seed_001_config()).unwrap();
    let data = dir.path().join("data");
    let mut s = Server::start_with(
        &data,
        &[("DYELINE_API_TOKEN", TOKEN)],
        &["--config", config.to_str().unwrap()],
    );
    let group = dir.path().join("mall.json");
    std::fs::write(&group, GROUP).unwrap();
    let server = format!("http://{}", s.api);
    let (ok, _, err) = run_cli(&[
        "lane-group",
        "--server",
        &server,
        "--token",
        TOKEN,
        "put",
        "mall",
        group.to_str().unwrap(),
    ]);
    assert!(ok, "lane-group put: {err}");

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
    let without_time = |key: &str| -> Vec<Value> {
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
    };

    // §7.3.1: b1's pricing span carries gray, is served in base while pricing has gray
    // capacity (its idle instance): a leak whose tag was ignored. a2's same span, before the
    // gray pricing existed, is a fallback.
    let (t, sp) = ids("b1", "pricing");
    assert_eq!(
        without_time("lane_leaks"),
        [
            json!({"trace_id": t, "span_id": sp, "group": "mall", "kind": "RPC", "lane": "gray",
                "reason": "tag_ignored", "from_app": "order", "from_lane": "gray",
                "to_app": "pricing", "to_lane": "base", "via": []})
        ]
    );
    // §7.3.3: b2, a base request the gateway sent to the gray order while order-1 is present.
    let (t, sp) = ids("b2", "order");
    assert_eq!(
        without_time("lane_pollution"),
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
    // Coverage summed over the windows, per app of lane gray.
    let mut coverage: BTreeMap<String, [i64; 6]> = BTreeMap::new();
    for c in v["lane_coverage"].as_array().unwrap() {
        assert_eq!(c["lane"], "gray", "{c}");
        let sum = coverage
            .entry(c["app"].as_str().unwrap().to_owned())
            .or_default();
        for (i, f) in [
            "served_in_lane",
            "lane_fallback",
            "failover",
            "leaked",
            "requests",
            "errors",
        ]
        .iter()
        .enumerate()
        {
            sum[i] += c[f].as_i64().unwrap();
        }
    }
    assert_eq!(
        coverage,
        BTreeMap::from([
            ("gateway".to_owned(), [0, 2, 0, 0, 0, 0]),
            ("order".to_owned(), [2, 0, 0, 0, 3, 0]),
            ("pricing".to_owned(), [0, 1, 0, 1, 0, 0]),
        ])
    );
    // The instances and what marked them; the idle one is known from its metrics alone.
    let lanes: Vec<Value> = v["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| json!([l["instance"], l["app"], l["lane"], l["rule"]]))
        .collect();
    assert_eq!(
        sorted(lanes),
        sorted(vec![
            json!(["gw-1", "gateway", "base", "default"]),
            json!(["order-1", "order", "base", "default"]),
            json!(["order-gray-1", "order", "gray", "nacos.metadata.gray"]),
            json!(["pricing-1", "pricing", "base", "default"]),
            json!(["pricing-gray-1", "pricing", "gray", "host.name"]),
        ])
    );
}
