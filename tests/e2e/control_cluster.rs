//! The control plane on PostgreSQL (issue 27, "Control fan-out"): three `dyeline serve`
//! processes on one real PostgreSQL (`[control] postgres_url`, no bucket), SSE subscribers
//! on every node, 1,000 operations written to random nodes by concurrent clients (some with
//! a stale `If-Match`, which must get 412) while every node's listener connection is killed
//! again and again with `pg_terminate_backend`. Afterwards every subscriber has seen its
//! stream whole and in order, the same on every node, the nodes' timelines are what
//! PostgreSQL holds, gap-free, and every node's `GET` of each channel agrees with it. Also:
//! `dyeline import --timeline` writes to PostgreSQL when it is set, and a node warns of the
//! operations its local `control.db` has and PostgreSQL lacks.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dyeline_storage::testkit::postgres::Postgres;
use serde_json::Value;

use crate::control::{TOKEN, call, get, write};
use crate::support::{EPHEMERAL_PORTS, dyeline_bin};
use crate::util::{Server, shared_dir, temp_dir};

const PASSWORD: &str = "hunter2-fan-out";
/// The operations the clients get accepted.
const OPERATIONS: usize = 1000;
const CLIENTS: usize = 8;
/// The streams every node serves to a subscriber: apps (`order` in `trade`, `inventory` in
/// `stock`, `other` in no local channel) and channels.
const STREAMS: [&str; 6] = [
    "/api/v1/apps/order/events/stream",
    "/api/v1/apps/inventory/events/stream",
    "/api/v1/apps/other/events/stream",
    "/api/v1/channels/trade/events/stream",
    "/api/v1/channels/stock/events/stream",
    "/api/v1/channels/global/events/stream",
];
const CHANNELS: [&str; 3] = ["trade", "stock", "global"];

/// A small xorshift: each client's choices, reproducible from its number.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Reads one SSE stream into `seen` (the events' JSON, in order) until it ends.
fn subscribe(server: &Server, path: &str, seen: Arc<Mutex<Vec<Value>>>) {
    let url = format!("http://{}{path}", server.api);
    std::thread::spawn(move || {
        let client = reqwest::blocking::Client::builder()
            .timeout(None)
            .build()
            .unwrap();
        let Ok(resp) = client.get(&url).send() else {
            return;
        };
        assert_eq!(resp.status().as_u16(), 200, "{url}");
        let mut data = String::new();
        for line in BufReader::new(resp).lines() {
            let Ok(line) = line else { return };
            if line.is_empty() {
                if !data.is_empty() {
                    seen.lock()
                        .unwrap()
                        .push(serde_json::from_str(&data).unwrap());
                }
                data.clear();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim());
            }
        }
    });
}

/// The newest sequence number `server` holds.
fn latest(server: &Server) -> u64 {
    get(server, "/api/v1/apps/order/effective")["seq"]
        .as_u64()
        .unwrap()
}

/// One client: operations on random nodes until `accepted` reaches [`OPERATIONS`]. Returns
/// how many stale `If-Match` writes it sent (each got 412).
fn client(nodes: &[Server], n: u64, accepted: &AtomicUsize) -> usize {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (n + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let mut stale = 0;
    while accepted.load(Ordering::SeqCst) < OPERATIONS {
        let node = &nodes[rng.below(nodes.len() as u64) as usize];
        let channel = CHANNELS[rng.below(3) as usize];
        let path = format!("/api/v1/channels/{channel}");
        let choice = rng.below(20);
        let (status, body) = if choice < 2 {
            // A version the channel has left behind (versions only grow): 412 on any node,
            // however far behind that node's listener is.
            let version = get(node, &path)["version"].as_u64().unwrap();
            let target = &nodes[rng.below(nodes.len() as u64) as usize];
            let old = format!("\"{}\"", version.saturating_sub(1 + rng.below(3)));
            let (status, body, _) = call(
                target,
                "POST",
                &format!("{path}/ratio"),
                Some(&format!("{{\"blue_percent\": {}}}", rng.below(101))),
                Some(TOKEN),
                Some(&old),
            );
            assert_eq!(status, 412, "stale If-Match {old} on {channel}: {body}");
            stale += 1;
            continue;
        } else if choice < 3 && channel != "global" {
            // The release ends and starts again (its apps' streams get finish and start);
            // clients racing on it get 409.
            let releasing = get(node, &path)["state"] == "releasing";
            let op = if releasing { "finish" } else { "start" };
            let (status, body, _) = call(
                node,
                "POST",
                &format!("{path}/{op}"),
                None,
                Some(TOKEN),
                None,
            );
            (status, body)
        } else if choice < 8 {
            // If-Match with the version just read (possibly on another node): applied, or
            // 412 when another client got there first.
            let (_, _, etag) = call(node, "GET", &path, None, None, None);
            let target = &nodes[rng.below(nodes.len() as u64) as usize];
            let (status, body, _) = call(
                target,
                "POST",
                &format!("{path}/ratio"),
                Some(&format!("{{\"blue_percent\": {}}}", rng.below(101))),
                Some(TOKEN),
                etag.as_deref(),
            );
            assert!(
                matches!(status, 200 | 409 | 412),
                "If-Match ratio on {channel}: {status} {body}"
            );
            (status, body)
        } else {
            let (status, body, _) = call(
                node,
                "POST",
                &format!("{path}/ratio"),
                Some(&format!("{{\"blue_percent\": {}}}", rng.below(101))),
                Some(TOKEN),
                None,
            );
            (status, body)
        };
        match status {
            200 => {
                accepted.fetch_add(1, Ordering::SeqCst);
            }
            // A ratio or finish on a channel another client just finished; a start on one
            // just started; a version another client just moved.
            409 | 412 => {}
            other => panic!("{channel}: {other} {body}"),
        }
    }
    stale
}

/// Sets its flag when dropped (also while a panic unwinds).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Every row of `control_ops` as (seq, subject, op, blue_percent), in sequence order.
fn ops_in_postgres(pg: &Postgres) -> Vec<(u64, String, String, Option<u64>)> {
    pg.psql(
        "SELECT seq, subject, op, coalesce(blue_percent::text, '') \
         FROM dyeline_control.control_ops ORDER BY seq",
    )
    .expect("psql")
    .lines()
    .map(|l| {
        let f: Vec<&str> = l.split('|').collect();
        (
            f[0].parse().unwrap(),
            f[1].to_owned(),
            f[2].to_owned(),
            f[3].parse().ok(),
        )
    })
    .collect()
}

/// The node's timeline as (seq, channel, op, blue_percent), in sequence order.
fn ops_served(server: &Server) -> Vec<(u64, String, String, Option<u64>)> {
    let mut ops: Vec<_> = get(server, "/api/v1/timeline")["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["seq"].as_u64().unwrap(),
                e["channel"].as_str().unwrap().to_owned(),
                e["op"].as_str().unwrap().to_owned(),
                e["blue_percent"].as_u64(),
            )
        })
        .collect();
    ops.sort_by_key(|o| o.0);
    ops
}

#[test]
fn control_fan_out_every_subscriber_sees_the_same_gap_free_sequence() {
    let started = Instant::now();
    let pg = Postgres::start();
    let url = pg.url(PASSWORD);
    let dirs: Vec<_> = (0..3).map(|_| temp_dir()).collect();
    let nodes: Vec<Server> = dirs
        .iter()
        .map(|d| {
            Server::start(
                &d.path().join("data"),
                &[
                    ("DYELINE_API_TOKEN", TOKEN),
                    ("DYELINE_CONTROL__POSTGRES_URL", url.as_str()),
                ],
            )
        })
        .collect();
    // The channels, made on one node, are on the others once they follow.
    write(
        &nodes[0],
        "PUT",
        "/api/v1/channels/trade",
        Some(r#"{"apps": ["order"]}"#),
    );
    write(
        &nodes[1],
        "PUT",
        "/api/v1/channels/stock",
        Some(r#"{"apps": ["inventory"]}"#),
    );
    for (node, ch) in [(2, "trade"), (0, "stock"), (1, "global")] {
        write(
            &nodes[node],
            "POST",
            &format!("/api/v1/channels/{ch}/start"),
            None,
        );
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while nodes.iter().any(|n| latest(n) < 5) {
        assert!(
            Instant::now() < deadline,
            "the nodes did not follow the setup"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let seen: Vec<Vec<Arc<Mutex<Vec<Value>>>>> = nodes
        .iter()
        .map(|node| {
            STREAMS
                .iter()
                .map(|path| {
                    let s = Arc::new(Mutex::new(Vec::new()));
                    subscribe(node, path, Arc::clone(&s));
                    s
                })
                .collect()
        })
        .collect();

    // The clients write while every node's listener connection is killed again and again.
    let accepted = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let (stale, kills) = std::thread::scope(|scope| {
        let killer = scope.spawn(|| {
            let mut kills = 0;
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(150));
                kills += pg
                    .psql(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                         WHERE application_name = 'dyeline-control-listen'",
                    )
                    .and_then(|n| n.parse::<usize>().ok())
                    .unwrap_or(0);
            }
            kills
        });
        let clients: Vec<_> = (0..CLIENTS as u64)
            .map(|n| {
                let (nodes, accepted) = (&nodes, &accepted);
                scope.spawn(move || client(nodes, n, accepted))
            })
            .collect();
        let stale: usize = {
            // The killer stops also when a client fails.
            let _stop = StopOnDrop(&done);
            clients.into_iter().map(|c| c.join().unwrap()).sum()
        };
        (stale, killer.join().unwrap())
    });
    let written = started.elapsed();
    assert!(stale > 0, "no stale If-Match was sent");
    assert!(kills >= 6, "only {kills} listener connections were killed");

    // PostgreSQL holds a gap-free log; every node serves exactly it.
    let in_pg = ops_in_postgres(&pg);
    let n = in_pg.len() as u64;
    assert_eq!(
        in_pg.iter().map(|o| o.0).collect::<Vec<_>>(),
        (1..=n).collect::<Vec<_>>(),
        "the log has a gap"
    );
    assert!(n >= 5 + OPERATIONS as u64, "{n} operations");
    assert_eq!(
        pg.psql("SELECT seq FROM dyeline_control.control_seq")
            .as_deref(),
        Some(n.to_string().as_str())
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while nodes.iter().any(|node| latest(node) < n) {
        assert!(
            Instant::now() < deadline,
            "the nodes stay at {:?}, PostgreSQL at {n}",
            nodes.iter().map(latest).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for (i, node) in nodes.iter().enumerate() {
        assert_eq!(ops_served(node), in_pg, "node {i}'s timeline");
    }
    // Every node's GET of each channel agrees, with PostgreSQL's row too.
    for ch in CHANNELS {
        let path = format!("/api/v1/channels/{ch}");
        let first = get(&nodes[0], &path);
        for node in &nodes[1..] {
            assert_eq!(get(node, &path), first, "{ch}");
        }
        let row = pg
            .psql(&format!(
                "SELECT state || '|' || blue_percent || '|' || version \
                 FROM dyeline_control.control_channels WHERE id = '{ch}'"
            ))
            .unwrap();
        assert_eq!(
            row,
            format!(
                "{}|{}|{}",
                first["state"].as_str().unwrap(),
                first["blue_percent"],
                first["version"]
            ),
            "{ch}"
        );
    }

    // Every subscriber saw its stream whole, in order, the same on every node.
    let reference: Vec<Vec<Value>> = STREAMS
        .iter()
        .map(|path| {
            get(&nodes[0], path.trim_end_matches("/stream"))["events"]
                .as_array()
                .unwrap()
                .clone()
        })
        .collect();
    for (i, node) in nodes.iter().enumerate() {
        for (s, path) in STREAMS.iter().enumerate() {
            assert_eq!(
                get(node, path.trim_end_matches("/stream"))["events"]
                    .as_array()
                    .unwrap(),
                &reference[s],
                "node {i}: {path}"
            );
        }
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    for (i, streams) in seen.iter().enumerate() {
        for (s, got) in streams.iter().enumerate() {
            while got.lock().unwrap().len() < reference[s].len() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let got = got.lock().unwrap();
            assert_eq!(got.len(), reference[s].len(), "node {i}: {}", STREAMS[s]);
            assert!(*got == reference[s], "node {i}: {} differs", STREAMS[s]);
        }
    }
    let ids: BTreeMap<&str, usize> = STREAMS
        .iter()
        .zip(&reference)
        .map(|(p, r)| (*p, r.len()))
        .collect();
    eprintln!(
        "control fan-out: {n} operations ({stale} stale If-Match refused), {kills} listener \
         connections killed, written in {:.1}s, all checked in {:.1}s; events per stream: {ids:?}",
        written.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// Starts `dyeline serve` on `data` with the control plane in `url`, waits for its listening
/// line, kills it and returns what it logged (warnings and errors).
fn serve_log(data: &Path, url: &str) -> String {
    let mut child = Command::new(dyeline_bin())
        .arg("serve")
        .args(EPHEMERAL_PORTS)
        .arg("--data-dir")
        .arg(data)
        .env("DYELINE_LOG", "warn")
        .env("DYELINE_CONTROL__POSTGRES_URL", url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dyeline serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(line.starts_with("dyeline listening"), "{line}{log}");
    log
}

#[test]
fn import_timeline_writes_to_postgres_and_a_node_warns_of_local_operations_it_lacks() {
    let pg = Postgres::start();
    let url = pg.url(PASSWORD);
    let dir = temp_dir();
    let data = dir.path().join("data");
    let timeline = shared_dir().join("fixtures/analysis/release-small/timeline.json");
    let import = |env: &[(&str, &str)]| {
        let out = Command::new(dyeline_bin())
            .args(["import", "--data-dir"])
            .arg(&data)
            .arg("--timeline")
            .arg(&timeline)
            .env("DYELINE_LOG", "warn")
            .envs(env.iter().copied())
            .output()
            .expect("run dyeline import");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        err
    };
    // Into the local control.db (no setting): PostgreSQL has nothing.
    let err = import(&[]);
    assert!(err.contains("recorded 5 channel operations"), "{err}");
    let log = serve_log(&data, &url);
    assert!(
        log.contains("operations=5") && log.contains("dyeline import --timeline"),
        "{log}"
    );
    assert!(!log.contains(PASSWORD), "{log}");
    assert_eq!(
        pg.psql("SELECT count(*) FROM dyeline_control.control_ops")
            .as_deref(),
        Some("0")
    );
    // With the setting, the import writes to PostgreSQL, and the warning is gone.
    let err = import(&[("DYELINE_CONTROL__POSTGRES_URL", url.as_str())]);
    assert!(err.contains("recorded 5 channel operations"), "{err}");
    assert!(!err.contains(PASSWORD), "{err}");
    assert_eq!(
        pg.psql("SELECT count(*), min(seq), max(seq) FROM dyeline_control.control_ops WHERE actor = 'import'")
            .as_deref(),
        Some("5|1|5")
    );
    let log = serve_log(&data, &url);
    assert!(!log.contains("dyeline import --timeline"), "{log}");
    // Again: nothing new.
    let err = import(&[("DYELINE_CONTROL__POSTGRES_URL", url.as_str())]);
    assert!(err.contains("5 already present"), "{err}");
}
