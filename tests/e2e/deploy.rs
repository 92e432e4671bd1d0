//! deploy/ (issue 27, item 5), checked offline: no image is built and no container or cluster
//! started here (no Docker engine, no cluster). `tests/python/deploy.py` validates the
//! Dockerfile, the compose file (compose-spec schema), the collector configurations (the
//! loadbalancing exporter's documented keys), the Alertmanager file (`amtool`) and every
//! Kubernetes manifest (the Kubernetes schemas, strict) and their wiring; its mutation run
//! breaks each file in known ways and expects the responsible check to fail. The image's
//! HEALTHCHECK command runs here against a real `dyeline serve`. (The configurations themselves
//! are loaded by the binary's own loader in `server/src/config/deploy_tests.rs`.)

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;

use crate::support::{Server, workspace_root};
use crate::util::temp_dir;

/// Runs `tests/python/deploy.py ARGS`: (success, stdout and stderr).
fn deploy_py(args: &[&str]) -> (bool, String) {
    let out = Command::new("python3")
        .arg(workspace_root().join("tests/python/deploy.py"))
        .args(args)
        .output()
        .expect("python3 runs (pip install -r tests/requirements.txt)");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn deploy_files_pass_their_offline_checks() {
    let (ok, out) = deploy_py(&["check"]);
    eprintln!("{out}");
    assert!(ok, "deploy.py check failed:\n{out}");
    assert!(out.contains(" 0 failed"), "{out}");
}

#[test]
fn each_deploy_check_fails_on_a_file_broken_in_a_known_way() {
    let (ok, out) = deploy_py(&["mutants"]);
    assert!(ok, "a broken deploy file passed its check:\n{out}");
    assert!(out.contains(" 0 failed"), "{out}");
}

/// The image's HEALTHCHECK command, with its API port replaced by `port`.
fn healthcheck_on(port: u16) -> Command {
    let (ok, out) = deploy_py(&["healthcheck"]);
    assert!(ok, "{out}");
    let argv: Vec<String> = serde_json::from_str(out.trim()).expect("a JSON list");
    assert!(
        argv.iter().any(|a| a.contains("/8080")),
        "the health check no longer asks port 8080: {argv:?}"
    );
    let argv: Vec<String> = argv
        .iter()
        .map(|a| a.replace("/8080", &format!("/{port}")))
        .collect();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

#[test]
fn the_image_healthcheck_passes_on_a_running_server_and_fails_otherwise() {
    let dir = temp_dir();
    let server = Server::start(&dir.path().join("data"), &[]);
    assert!(
        server.api.ip().is_loopback(),
        "the check asks 127.0.0.1: {}",
        server.api
    );
    let status = healthcheck_on(server.api.port())
        .status()
        .expect("bash runs");
    assert!(
        status.success(),
        "the health check failed on a healthy server"
    );

    // Nothing listening: unhealthy.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    let status = healthcheck_on(closed_port).status().expect("bash runs");
    assert!(
        !status.success(),
        "the health check passed with nothing listening"
    );

    // Something listening that answers 503: unhealthy too (the status is read, not only the
    // connection).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let answer = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        // The whole request head first: closing on unread bytes would reset the connection
        // and fail the check for that reason instead of the status.
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let _ = conn.write_all(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        );
    });
    let status = healthcheck_on(port).status().expect("bash runs");
    answer.join().unwrap();
    assert!(!status.success(), "the health check passed on a 503");
}
