//! The alert leader cut off from PostgreSQL (issue 27, "Leader cut off"): node `a1` runs in
//! a network namespace of its own with two links to this one, one to PostgreSQL (through a
//! relay on its host end) and one to the bucket and the alert target. It leads and delivers
//! a hop planted on node `b1`; then the test sets its PostgreSQL link down. `a1` keeps running
//! but sends nothing after its own lease deadline; `b1` takes the next epoch (the takeover time
//! is printed) and delivers; with the link back, `a1` sends nothing with its old epoch.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use dyeline_storage::testkit::{postgres::Postgres, seaweed::Seaweed};

use crate::cluster_alerts::{hop, lease, webhook_on};
use crate::control::{TOKEN, write};
use crate::support::Server;
use crate::uploads::{node_env, wait_until};
use crate::util::{post_json, temp_dir};

const LEASE_S: u64 = 3;

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .status()
        .is_ok_and(|s| s.success())
}

/// A network namespace with two veth links to this one (`a`: 10.N.M.1 here ↔ .2 there; `b`:
/// .5 ↔ .6), deleted with its links on drop.
struct Netns {
    name: String,
    links: [String; 2],
    net: [u8; 2],
}

impl Netns {
    fn create() -> Self {
        let pid = std::process::id();
        let name = format!("dyl{pid}");
        let links = [format!("dyh{pid}a"), format!("dyh{pid}b")];
        let net = [213, (pid % 250) as u8];
        let ns = Netns { name, links, net };
        assert!(
            ip(&["netns", "add", &ns.name]),
            "ip netns add (the test runs as root)"
        );
        assert!(ip(&[
            "netns", "exec", &ns.name, "ip", "link", "set", "lo", "up"
        ]));
        for (i, host) in ns.links.iter().enumerate() {
            let inner = format!("{}n", &host[..host.len() - 1]) + &host[host.len() - 1..];
            let base = 4 * i as u8;
            assert!(ip(&[
                "link", "add", host, "type", "veth", "peer", "name", &inner
            ]));
            assert!(ip(&["link", "set", &inner, "netns", &ns.name]));
            let here = format!("{}/30", ns.addr(base + 1));
            let there = format!("{}/30", ns.addr(base + 2));
            assert!(ip(&["addr", "add", &here, "dev", host]));
            assert!(ip(&["link", "set", host, "up"]));
            assert!(ip(&[
                "netns", "exec", &ns.name, "ip", "addr", "add", &there, "dev", &inner
            ]));
            assert!(ip(&[
                "netns", "exec", &ns.name, "ip", "link", "set", &inner, "up"
            ]));
        }
        ns
    }

    fn addr(&self, last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, self.net[0], self.net[1], last))
    }

    /// Sets link `i`'s end here up or down.
    fn link(&self, i: usize, up: bool) {
        assert!(ip(&[
            "link",
            "set",
            &self.links[i],
            if up { "up" } else { "down" }
        ]));
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for l in &self.links {
            let _ = ip(&["link", "del", l]);
        }
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// A TCP relay listening on `ip` that forwards every connection to `to`: its address.
fn relay(ip: IpAddr, to: SocketAddr) -> SocketAddr {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let Ok(server) = TcpStream::connect(to) else {
                continue;
            };
            let pipe = |mut from: TcpStream, mut into: TcpStream| {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16 * 1024];
                    while let Ok(n) = from.read(&mut buf) {
                        if n == 0 || into.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = into.shutdown(std::net::Shutdown::Write);
                });
            };
            pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
            pipe(server, client);
        }
    });
    addr
}

#[test]
fn a_leader_cut_off_from_postgresql_stops_at_its_deadline_and_another_takes_over() {
    let _turn = crate::support::heavy_turn();
    let dir = temp_dir();
    let pg = Postgres::start();
    let weed = Seaweed::start();
    let ns = Netns::create();
    let (hook_port, hooks) = webhook_on(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let target = format!("http://{}:{hook_port}", ns.addr(5));
    let cfg = dir.path().join("dyeline.toml");
    std::fs::write(
        &cfg,
        format!(
            "[alerts]\ninterval = \"500ms\"\nlateness = \"5s\"\ntrace_quiet = \"2s\"\n\
             resend_interval = \"1s\"\nalertmanager_url = \"{target}\"\n\
             [cluster]\nleader_lease = \"{LEASE_S}s\"\n"
        ),
    )
    .unwrap();
    let password = "hunter2-cutoff";
    // a1 reaches PostgreSQL over link a, the bucket over link b.
    let pg_relay = relay(
        ns.addr(1),
        format!("127.0.0.1:{}", pg.port()).parse().unwrap(),
    );
    let s3 = weed.endpoint();
    let s3_relay = relay(
        ns.addr(5),
        s3.trim_start_matches("http://").parse().unwrap(),
    );
    let a_pg = format!("postgres://postgres:{password}@{pg_relay}/postgres");
    let start = |id: &str, netns: bool| {
        let mut env = node_env(&weed, &pg, id);
        env.push(("DYELINE_API_TOKEN".into(), TOKEN.into()));
        env.push(("DYELINE_CONTROL__POSTGRES_URL".into(), pg.url(password)));
        if netns {
            env.push(("AWS_ENDPOINT_URL".into(), format!("http://{s3_relay}")));
            env.push(("DYELINE_CATALOG__POSTGRES_URL".into(), a_pg.clone()));
            env.push(("DYELINE_CONTROL__POSTGRES_URL".into(), a_pg.clone()));
        }
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let data = dir.path().join(id);
        let args = ["--config", cfg.to_str().unwrap()];
        if netns {
            Server::start_in_netns(&ns.name, ns.addr(6), &data, &env, &args)
        } else {
            Server::start_with(&data, &env, &args)
        }
    };
    let a = start("a1", true);
    wait_until("a1 leads", 20, || lease(&pg) == ("a1".to_owned(), 1));
    let b = start("b1", false);
    write(
        &b,
        "PUT",
        "/api/v1/channels/trade",
        Some(r#"{"apps": ["order", "pay"]}"#),
    );
    write(&b, "POST", "/api/v1/channels/trade/start", None);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(post_json(&b, &hop(0xc1, "order", "pay")).status, 200);
    wait_until("a1 delivers b1's hop, and again", 30, || {
        hooks
            .lock()
            .unwrap()
            .iter()
            .filter(|h| h.epoch == 1)
            .count()
            >= 2
    });

    // Cut a1 off from PostgreSQL: it keeps running.
    ns.link(0, false);
    let cut = Instant::now();
    wait_until("b1 takes epoch 2", 40, || {
        lease(&pg) == ("b1".to_owned(), 2)
    });
    let takeover = cut.elapsed();
    wait_until("b1 delivers", 20, || {
        hooks.lock().unwrap().iter().any(|h| h.epoch == 2)
    });
    let deadline = cut + Duration::from_secs(LEASE_S);
    let got = hooks.lock().unwrap().clone();
    let last_old = got
        .iter()
        .filter(|h| h.epoch == 1)
        .map(|h| h.at)
        .max()
        .unwrap();
    assert!(
        last_old <= deadline + Duration::from_millis(500),
        "a1 sent {:.2}s after the cut, past its lease of {LEASE_S}s",
        last_old.duration_since(cut).as_secs_f64()
    );
    let first_new = got.iter().find(|h| h.epoch == 2).unwrap().at;
    assert!(last_old < first_new, "epochs overlapped");

    // The link back: a1 follows; nothing more from epoch 1.
    ns.link(0, true);
    let back = Instant::now();
    std::thread::sleep(Duration::from_secs(2 * LEASE_S));
    let got = hooks.lock().unwrap().clone();
    assert!(
        got.iter().all(|h| h.epoch != 1 || h.at < back),
        "a1 sent with epoch 1 after the link came back"
    );
    assert_eq!(lease(&pg), ("b1".to_owned(), 2));
    eprintln!(
        "leader cut off: takeover {:.2}s after the link went down (lease {LEASE_S}s); \
         a1's last delivery {:.2}s after the cut",
        takeover.as_secs_f64(),
        last_old
            .checked_duration_since(cut)
            .map_or(0.0, |d| d.as_secs_f64())
    );
    drop(a);
}
