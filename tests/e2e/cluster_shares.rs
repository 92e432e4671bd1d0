//! Each node's share of the live evaluation (issue 27, item 3): two `dyeline serve` nodes on
//! one real PostgreSQL and SeaweedFS, uploading only once an hour, so no span of theirs
//! reaches the bucket during the test. A one-sided error spike is split between them: half of
//! a window's requests on each node, too few on either for the spike test. With one half in,
//! no spike alert fires; with both, the leader's merge of the two shares fires it with the
//! whole window's counts, and both nodes' `/api/v1/alerts` show it. Then presence is merged:
//! an idle gray instance kept present by metrics exports that reach one node makes a
//! gray-tagged request served by base on the other node a lane leak (judged alone, that node
//! would see no gray instance and count a fallback). A trace held by one node, not uploaded,
//! is found from the other (cluster-wide trace lookup).

use std::time::{Duration, Instant};

use dyeline_storage::testkit::{postgres::Postgres, seaweed::Seaweed};
use serde_json::{Value, json};

use crate::alerts::now_ns;
use crate::control::{TOKEN, write};
use crate::live_lanes::{Exporter, request};
use crate::support::Server;
use crate::uploads::{node_env, wait_until};
use crate::util::{post_json, temp_dir};

const WINDOW_S: i64 = 10;
const SPIKE: &str = "DyelineErrorSpike";

/// `n` SERVER root spans of `order` on its `color` instance, the first `errors` failing,
/// starting from `t0` (Unix ns), trace ids from `first`.
fn requests(color: &str, n: u64, errors: u64, t0: i64, first: u64) -> Value {
    let spans: Vec<Value> = (0..n)
        .map(|i| {
            let start = t0 + i as i64 * 1_000_000;
            json!({
                "traceId": format!("{:032x}", first + i),
                "spanId": format!("{:016x}", first + i),
                "name": "order",
                "kind": 2,
                "startTimeUnixNano": start.to_string(),
                "endTimeUnixNano": (start + 500_000).to_string(),
                "attributes": [{"key": "x-deploy-channel-type",
                                "value": {"stringValue": format!("trade={color}")}}],
                "status": {"code": if i < errors { 2 } else { 1 }},
            })
        })
        .collect();
    json!({
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "order"}},
            {"key": "host.name", "value": {"stringValue": format!("order-{color}-1")}},
        ]},
        "scopeSpans": [{"spans": spans}],
    })
}

/// Half of the window's requests: 60 blue (no error) and 60 green (6 errors).
fn half(t0: i64, first: u64) -> String {
    json!({"resourceSpans": [
        requests("blue", 60, 0, t0, first),
        requests("green", 60, 6, t0, first + 1_000),
    ]})
    .to_string()
}

/// The spike alerts of a node's book: their summaries.
fn spikes(s: &Server) -> Vec<String> {
    let v: Value = reqwest::blocking::get(format!("http://{}/api/v1/alerts", s.api))
        .unwrap()
        .json()
        .unwrap();
    v["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["labels"]["alertname"] == SPIKE && a["state"] == "firing")
        .map(|a| {
            a["annotations"]["summary"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

/// The firing lane leak alerts of a node's book: their exemplar trace ids.
fn leaks(s: &Server) -> Vec<String> {
    let v: Value = reqwest::blocking::get(format!("http://{}/api/v1/alerts", s.api))
        .unwrap()
        .json()
        .unwrap();
    v["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["labels"]["alertname"] == "DyelineLaneLeak" && a["state"] == "firing")
        .flat_map(|a| {
            a["exemplar_trace_ids"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|t| t.as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn a_spike_split_between_two_nodes_fires_from_their_merged_shares() {
    let _turn = crate::support::heavy_turn();
    let began = Instant::now();
    let dir = temp_dir();
    let pg = Postgres::start();
    let weed = Seaweed::start();
    let cfg = dir.path().join("dyeline.toml");
    std::fs::write(
        &cfg,
        format!(
            "[alerts]\ninterval = \"500ms\"\nlateness = \"10s\"\ntrace_quiet = \"2s\"\n\
             [analyzer.defaults]\nwindow = \"{WINDOW_S}s\"\n\
             [analyzer.lanes]\npresence_window = \"3s\"\nwindow = \"5s\"\n\
             [cluster]\nleader_lease = \"3s\"\n"
        ),
    )
    .unwrap();
    let url = pg.url("hunter2-cluster-shares");
    let nodes: Vec<Server> = ["s1", "s2"]
        .iter()
        .map(|id| {
            let mut env = node_env(&weed, &pg, id);
            env.push(("DYELINE_STORAGE__UPLOAD_INTERVAL".into(), "1h".into()));
            env.push(("DYELINE_API_TOKEN".into(), TOKEN.into()));
            env.push(("DYELINE_CONTROL__POSTGRES_URL".into(), url.clone()));
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            Server::start_with(
                &dir.path().join(id),
                &env,
                &["--config", cfg.to_str().unwrap()],
            )
        })
        .collect();
    write(
        &nodes[0],
        "PUT",
        "/api/v1/channels/trade",
        Some(r#"{"apps": ["order"]}"#),
    );
    write(&nodes[0], "POST", "/api/v1/channels/trade/start", None);
    write(
        &nodes[0],
        "POST",
        "/api/v1/channels/trade/ratio",
        Some(r#"{"blue_percent": 50}"#),
    );
    wait_until("a leader is elected", 20, || {
        pg.psql("SELECT epoch FROM alert_lease").as_deref() == Some("1")
    });
    wait_until("both nodes publish a share", 20, || {
        pg.psql("SELECT count(*) FROM alert_shares").as_deref() == Some("2")
    });

    // Both halves in one window that starts after the release steps (a window holding the
    // ratio change would count requests from before it), planted early in that window.
    let released = now_ns();
    let window = WINDOW_S * 1_000_000_000;
    let t0 = loop {
        let now = now_ns();
        let start = now - now.rem_euclid(window);
        if start > released && now - start <= 3_000_000_000 {
            break start + 100_000_000;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(post_json(&nodes[0], &half(t0, 0x1_0000)).status, 200);
    // One half alone is under the spike test's 100 requests a side: nothing fires.
    std::thread::sleep(Duration::from_secs(4));
    for n in &nodes {
        assert_eq!(spikes(n), Vec::<String>::new(), "one node's half fired");
    }

    assert_eq!(post_json(&nodes[1], &half(t0, 0x2_0000)).status, 200);
    wait_until("the merged spike fires on both nodes' books", 30, || {
        nodes.iter().all(|n| !spikes(n).is_empty())
    });
    let summaries = spikes(&nodes[0]);
    assert!(
        summaries.iter().all(|s| s.contains("(12 of 120)")),
        "the whole window's counts: {summaries:?}"
    );
    // A trace held by the second node, not uploaded, is found from the first (it asks the
    // other nodes for their rows), once; and the first node's own rows stay its own.
    for (asked, trace, app_count) in [(0, 0x2_0000u64, 1), (1, 0x1_0000u64, 1)] {
        let v: Value = reqwest::blocking::get(format!(
            "http://{}/api/v1/traces/{trace:032x}",
            nodes[asked].api
        ))
        .unwrap()
        .json()
        .unwrap();
        assert_eq!(v["span_count"], app_count, "{v}");
        assert_eq!(v["spans"][0]["app"], "order", "{v}");
        assert!(v.get("nodes_unheard").is_none(), "{v}");
    }
    // The internal route answers with the node's own rows only.
    let rows = |n: &Server, trace: u64| {
        reqwest::blocking::get(format!(
            "http://{}/api/v1/cluster/traces/{trace:032x}/rows",
            n.api
        ))
        .unwrap()
        .bytes()
        .unwrap()
        .len()
    };
    assert!(rows(&nodes[1], 0x2_0000) > rows(&nodes[0], 0x2_0000));
    // None of it came through the bucket.
    assert_eq!(
        pg.psql("SELECT count(*) FROM span_files").as_deref(),
        Some("0"),
        "a span file was uploaded"
    );

    // Presence merged: order's gray instance exports its metrics to the first node only; a
    // request tagged gray and served by order's base instance reaches the second.
    write(
        &nodes[0],
        "PUT",
        "/api/v1/lane-groups/mall",
        Some(r#"{"apps": ["order"], "lanes": {"gray": {}}}"#),
    );
    let _gray = Exporter::start(&nodes[0], "order", "order-gray-1", "gray");
    std::thread::sleep(Duration::from_secs(2));
    request(&nodes[1], 0xa11, "order", "order-base-1", None);
    wait_until("the lane leak fires on both nodes' books", 30, || {
        nodes.iter().all(|n| !leaks(n).is_empty())
    });
    assert_eq!(
        leaks(&nodes[1]),
        vec![format!("{:032x}", 0xa11)],
        "the leak's exemplar"
    );
    eprintln!("cluster shares test: {:.1}s", began.elapsed().as_secs_f64());
}
