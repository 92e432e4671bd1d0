//! One fenced alert leader (issue 27, item 3, "No alert doubled"): three `dyeline serve` nodes
//! on one real PostgreSQL (catalog and control plane) and SeaweedFS, a two-member Alertmanager
//! cluster and a webhook that records every request. A cross-colour hop is planted on a
//! follower and the leader is killed (`SIGKILL`) before it can deliver; the next leader takes
//! epoch 2 and delivers it. That leader is then paused (`SIGSTOP`) past its lease while a
//! second hop is planted: the third node takes epoch 3, continues the first alert (same start)
//! and delivers the second; resumed, the paused node sends nothing. Afterwards: each
//! Alertmanager member holds one alert per fingerprint, every idempotency key reached the
//! webhook once, epochs only grew, and every live node's `/api/v1/alerts` is the same. The
//! takeover times are printed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dyeline_storage::testkit::{postgres::Postgres, seaweed::Seaweed};
use serde_json::{Value, json};

use crate::alerts::{free_port, now_ns};
use crate::control::{TOKEN, write};
use crate::support::Server;
use crate::uploads::{node_env, wait_until};
use crate::util::{post_json, temp_dir};

const LEASE_S: u64 = 3;
const HOP: &str = "DyelineCrossColorHop";

/// A member of the cluster: the single-Alertmanager tests' guard, killed on drop.
type Member = crate::alerts::Alertmanager;

/// Two Alertmanagers gossiping as one cluster.
fn alertmanager_cluster(dir: &std::path::Path) -> [Member; 2] {
    let cfg = dir.join("alertmanager.yml");
    std::fs::write(
        &cfg,
        "route:\n  receiver: blackhole\n  group_wait: 1s\nreceivers:\n  - name: blackhole\n",
    )
    .unwrap();
    let gossip = [free_port(), free_port()];
    let start = |i: usize| {
        let port = free_port();
        let child = Command::new("prometheus-alertmanager")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.path={}",
                dir.join(format!("am{i}")).display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg(format!("--cluster.listen-address=127.0.0.1:{}", gossip[i]))
            .arg(format!("--cluster.peer=127.0.0.1:{}", gossip[1 - i]))
            .arg("--cluster.settle-timeout=2s")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus-alertmanager runs (apt-get install prometheus-alertmanager)");
        Member {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    };
    let members = [start(0), start(1)];
    for m in &members {
        wait_until("an Alertmanager member is ready", 30, || {
            reqwest::blocking::get(format!("{}/-/ready", m.url))
                .is_ok_and(|r| r.status().is_success())
        });
    }
    members
}

/// One request the webhook received: when, its epoch and idempotency key headers, its body.
#[derive(Debug, Clone)]
pub(crate) struct Hook {
    pub(crate) at: Instant,
    pub(crate) epoch: i64,
    pub(crate) key: String,
    pub(crate) body: Value,
}

/// A webhook that answers 200 to every POST and keeps what it got.
fn webhook() -> (String, Arc<Mutex<Vec<Hook>>>) {
    let (port, got) = webhook_on("127.0.0.1".parse().unwrap());
    (format!("http://127.0.0.1:{port}/hook"), got)
}

/// [`webhook`] listening on `ip`: its port.
pub(crate) fn webhook_on(ip: std::net::IpAddr) -> (u16, Arc<Mutex<Vec<Hook>>>) {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&got);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut headers = BTreeMap::new();
            let mut line = String::new();
            let _ = reader.read_line(&mut line); // request line
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    headers.insert(k.trim().to_lowercase(), v.trim().to_owned());
                }
            }
            let len: usize = headers
                .get("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0; len];
            let _ = reader.read_exact(&mut body);
            keep.lock().unwrap().push(Hook {
                at: Instant::now(),
                epoch: headers
                    .get("x-dyeline-epoch")
                    .and_then(|e| e.parse().ok())
                    .unwrap_or(-1),
                key: headers.get("idempotency-key").cloned().unwrap_or_default(),
                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            });
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (port, got)
}

/// A trace whose root `from` (blue) calls `to` on a green instance that carries the
/// decision `trade=blue`: one cross-colour hop `from` → `to`.
pub(crate) fn hop(trace: u64, from: &str, to: &str) -> String {
    let now = now_ns();
    let span = |app: &str, color: &str, id: u64, parent: Option<u64>, start: i64| {
        json!({
            "resource": {"attributes": [
                {"key": "service.name", "value": {"stringValue": app}},
                {"key": "host.name", "value": {"stringValue": format!("{app}-{color}-1")}},
            ]},
            "scopeSpans": [{"spans": [{
                "traceId": format!("{trace:032x}"),
                "spanId": format!("{id:016x}"),
                "parentSpanId": parent.map_or(String::new(), |p| format!("{p:016x}")),
                "name": "call",
                "kind": 2,
                "startTimeUnixNano": start.to_string(),
                "endTimeUnixNano": (start + 5_000_000).to_string(),
                "attributes": [{"key": "x-deploy-channel-type", "value": {"stringValue": "trade=blue"}}],
            }]}],
        })
    };
    let start = now - 1_000_000_000;
    json!({"resourceSpans": [
        span(from, "blue", 1, None, start),
        span(to, "green", 2, Some(1), start + 1_000_000),
    ]})
    .to_string()
}

/// The lease as the catalog holds it: (holder, epoch).
pub(crate) fn lease(pg: &Postgres) -> (String, i64) {
    let text = pg
        .psql("SELECT coalesce(holder, '') || ' ' || epoch FROM alert_lease")
        .unwrap_or_default();
    let (h, e) = text.split_once(' ').unwrap_or(("", "0"));
    (h.to_owned(), e.parse().unwrap_or(0))
}

/// The hop alerts Alertmanager member `m` holds, by `to_app`: their fingerprints.
fn am_hops(m: &Member) -> BTreeMap<String, Vec<String>> {
    let v: Value = reqwest::blocking::get(format!("{}/api/v2/alerts", m.url))
        .unwrap()
        .json()
        .unwrap();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for a in v.as_array().unwrap() {
        if a["labels"]["alertname"] == HOP {
            out.entry(a["labels"]["to_app"].as_str().unwrap_or("").to_owned())
                .or_default()
                .push(a["fingerprint"].as_str().unwrap().to_owned());
        }
    }
    out
}

/// A node's alerts: (labels, state, starts_at) sorted.
fn node_alerts(s: &Server) -> Vec<Value> {
    let v: Value = reqwest::blocking::get(format!("http://{}/api/v1/alerts", s.api))
        .unwrap()
        .json()
        .unwrap();
    let mut all: Vec<Value> = v["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| json!([a["labels"], a["state"], a["starts_at_unix_nano"]]))
        .collect();
    all.sort_by_key(Value::to_string);
    all
}

fn signal(s: &Server, sig: &str) {
    let pid = s.pid().unwrap().to_string();
    assert!(
        Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
            .success()
    );
}

#[test]
fn one_leader_delivers_each_alert_once_across_a_kill_and_a_pause() {
    let _turn = crate::support::heavy_turn();
    let began = Instant::now();
    let dir = temp_dir();
    let pg = Postgres::start();
    let weed = Seaweed::start();
    let ams = alertmanager_cluster(dir.path());
    let (hook_url, hooks) = webhook();
    let cfg = dir.path().join("dyeline.toml");
    std::fs::write(
        &cfg,
        format!(
            "[alerts]\ninterval = \"500ms\"\nlateness = \"5s\"\ntrace_quiet = \"2s\"\n\
             resend_interval = \"1h\"\nalertmanager_url = \"{}\"\nalertmanager_urls = [\"{}\"]\n\
             webhooks = [\"{hook_url}\"]\n[cluster]\nleader_lease = \"{LEASE_S}s\"\n",
            ams[0].url, ams[1].url
        ),
    )
    .unwrap();
    let url = pg.url("hunter2-cluster-alerts");
    let mut nodes: Vec<Option<Server>> = ["n1", "n2", "n3"]
        .iter()
        .map(|id| {
            let mut env = node_env(&weed, &pg, id);
            env.push(("DYELINE_API_TOKEN".into(), TOKEN.into()));
            env.push(("DYELINE_CONTROL__POSTGRES_URL".into(), url.clone()));
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let data = dir.path().join(id);
            Some(Server::start_with(
                &data,
                &env,
                &["--config", cfg.to_str().unwrap()],
            ))
        })
        .collect();
    let index = |id: &str| ["n1", "n2", "n3"].iter().position(|n| *n == id).unwrap();
    wait_until("a leader is elected", 20, || lease(&pg).1 == 1);
    let (first, _) = lease(&pg);
    let first = index(&first);
    let any = |nodes: &[Option<Server>], not: &[usize]| -> usize {
        (0..3)
            .find(|i| !not.contains(i) && nodes[*i].is_some())
            .unwrap()
    };
    let follower = any(&nodes, &[first]);
    let f = nodes[follower].as_ref().unwrap();
    write(
        f,
        "PUT",
        "/api/v1/channels/trade",
        Some(r#"{"apps": ["order", "pay", "settle"]}"#),
    );
    write(f, "POST", "/api/v1/channels/trade/start", None);
    std::thread::sleep(Duration::from_secs(1)); // every node's plane has the release

    // 1. A hop on a follower; the leader is killed before it can judge it.
    assert_eq!(post_json(f, &hop(0xa1, "order", "pay")).status, 200);
    nodes[first].take().unwrap().kill();
    let killed = Instant::now();
    wait_until("another node takes epoch 2", 30, || lease(&pg).1 == 2);
    let takeover_kill = killed.elapsed();
    let (second, _) = lease(&pg);
    let second = index(&second);
    wait_until(
        "the first hop reaches both Alertmanagers and the webhook",
        40,
        || {
            ams.iter().all(|m| am_hops(m).contains_key("pay"))
                && hooks.lock().unwrap().iter().any(|h| h.epoch == 2)
        },
    );
    let pay_start = hooks.lock().unwrap()[0].body["alerts"][0]["startsAt"].clone();

    // 2. The new leader is paused past its lease while a second hop arrives elsewhere.
    let third = any(&nodes, &[first, second]);
    signal(nodes[second].as_ref().unwrap(), "-STOP");
    let paused = Instant::now();
    assert_eq!(
        post_json(nodes[third].as_ref().unwrap(), &hop(0xa2, "pay", "settle")).status,
        200
    );
    wait_until("the third node takes epoch 3", 30, || lease(&pg).1 == 3);
    let takeover_pause = paused.elapsed();
    assert_eq!(lease(&pg).0, ["n1", "n2", "n3"][third]);
    wait_until(
        "the second hop reaches both Alertmanagers and the webhook",
        40,
        || {
            ams.iter().all(|m| am_hops(m).contains_key("settle"))
                && hooks.lock().unwrap().iter().any(|h| h.epoch == 3)
        },
    );
    std::thread::sleep(Duration::from_secs(LEASE_S));
    signal(nodes[second].as_ref().unwrap(), "-CONT");
    let resumed = Instant::now();
    std::thread::sleep(Duration::from_secs(2 * LEASE_S));
    eprintln!(
        "alert leader takeover: {:.2}s after SIGKILL, {:.2}s after SIGSTOP (lease {LEASE_S}s)",
        takeover_kill.as_secs_f64(),
        takeover_pause.as_secs_f64()
    );

    // One alert per fingerprint on each member, both hops on both.
    for m in &ams {
        let hops = am_hops(m);
        assert_eq!(hops.len(), 2, "{hops:?}");
        for fps in hops.values() {
            assert_eq!(fps.len(), 1, "{hops:?}");
        }
        assert_eq!(am_hops(m), am_hops(&ams[0]));
    }
    // Every key once (no leader died between a POST and its record here), epochs never going
    // back, nothing from epoch 2 once it was paused, nothing from the resumed node at all.
    let got = hooks.lock().unwrap().clone();
    let keys: Vec<&str> = got.iter().map(|h| h.key.as_str()).collect();
    let unique: BTreeSet<&str> = keys.iter().copied().collect();
    assert_eq!(keys.len(), unique.len(), "a key repeated: {keys:?}");
    assert_eq!(unique.len(), 2, "{keys:?}");
    assert!(got.windows(2).all(|w| w[0].epoch <= w[1].epoch), "{got:?}");
    assert!(
        got.iter().all(|h| h.epoch >= 2),
        "the killed leader sent: {got:?}"
    );
    assert!(
        got.iter().all(|h| h.epoch != 2 || h.at < paused),
        "epoch 2 sent after its pause: {got:?}"
    );
    assert!(
        got.iter().all(|h| h.at < resumed),
        "sent after the resume: {got:?}"
    );
    // Every live node's book is the same, the first hop with the start epoch 2 gave it.
    let live: Vec<&Server> = nodes.iter().flatten().collect();
    assert_eq!(live.len(), 2);
    wait_until("every node's /api/v1/alerts agrees", 10, || {
        node_alerts(live[0]) == node_alerts(live[1])
    });
    let book = node_alerts(live[0]);
    assert_eq!(book.len(), 2, "{book:?}");
    let pay = book.iter().find(|a| a[0]["to_app"] == "pay").unwrap();
    assert_eq!(pay[1], "firing");
    let start_ns = pay[2].as_i64().unwrap();
    let delivered = chrono::DateTime::parse_from_rfc3339(pay_start.as_str().unwrap())
        .unwrap()
        .timestamp_nanos_opt()
        .unwrap();
    assert_eq!(
        start_ns / 1_000_000,
        delivered / 1_000_000,
        "the start moved"
    );

    // 3. A leader stopping cleanly (SIGTERM) gives its lease up: it has ended when the
    // process has (or the other node already holds the next epoch), not a lease later.
    let stopping = Instant::now();
    assert!(nodes[third].take().unwrap().stop());
    assert_eq!(
        pg.psql("SELECT epoch = 4 OR deadline <= now() FROM alert_lease")
            .as_deref(),
        Some("t"),
        "the stopped leader's lease still runs"
    );
    wait_until("the resumed node takes epoch 4", 10, || lease(&pg).1 == 4);
    eprintln!(
        "alert leader handover after SIGTERM: {:.2}s",
        stopping.elapsed().as_secs_f64()
    );
    eprintln!("cluster alerts test: {:.1}s", began.elapsed().as_secs_f64());
}
