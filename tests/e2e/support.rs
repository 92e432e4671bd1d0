//! Support for the end-to-end tests: start the real `dyeline` binary on ports chosen at
//! run time, query it, stop or kill it; paths to the shared fixtures and cases.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("server/ has a parent")
        .to_path_buf()
}

/// `../shared` beside the repository.
pub fn shared_dir() -> PathBuf {
    workspace_root().join("../shared")
}

/// The `dyeline` binary cargo built for this test target.
pub fn dyeline_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_dyeline"))
}

/// Taken by the tests that load both cores for minutes (the multi-node cluster tests) and by
/// the ones that time the server's answers under an attack ([`crate::hardening::HealthWatch`]):
/// side by side on 2 cores, a health probe of the second missed its second. They take turns.
static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Waits for the [`HEAVY`] turn and holds it until the guard drops.
pub fn heavy_turn() -> std::sync::MutexGuard<'static, ()> {
    HEAVY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running `dyeline serve`.
pub struct Server {
    child: Option<Child>,
    /// OTLP/gRPC address.
    pub grpc: SocketAddr,
    /// OTLP/HTTP address.
    pub http: SocketAddr,
    /// API address.
    pub api: SocketAddr,
}

/// `serve`'s address flags with every port chosen by the OS.
pub const EPHEMERAL_PORTS: [&str; 6] = [
    "--otlp-grpc-addr",
    "127.0.0.1:0",
    "--otlp-http-addr",
    "127.0.0.1:0",
    "--api-addr",
    "127.0.0.1:0",
];

impl Server {
    /// Starts `dyeline serve` on `data_dir` with ports chosen by the OS and extra environment
    /// variables (e.g. `DYELINE_STORE__FLUSH_INTERVAL`).
    pub fn start(data_dir: &Path, env: &[(&str, &str)]) -> Self {
        Self::start_with(data_dir, env, &[])
    }

    /// As [`Server::start`], with extra global arguments before `serve` (e.g. `--config F`).
    pub fn start_with(data_dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Self {
        Self::start_in(None, data_dir, env, args)
    }

    /// As [`Server::start_with`], in the network namespace `ns` (`ip netns exec`) with every
    /// port bound on all of its addresses, reached at `ip` (its address on a link to this
    /// namespace).
    pub fn start_in_netns(
        ns: &str,
        ip: std::net::IpAddr,
        data_dir: &Path,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Self {
        Self::start_in(Some((ns, ip)), data_dir, env, args)
    }

    fn start_in(
        netns: Option<(&str, std::net::IpAddr)>,
        data_dir: &Path,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Self {
        let mut cmd = match netns {
            Some((ns, _)) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(dyeline_bin());
                c
            }
            None => Command::new(dyeline_bin()),
        };
        let ports: Vec<&str> = match netns {
            Some(_) => EPHEMERAL_PORTS
                .iter()
                .map(|a| if *a == "127.0.0.1:0" { "0.0.0.0:0" } else { *a })
                .collect(),
            None => EPHEMERAL_PORTS.to_vec(),
        };
        cmd.args(args)
            .arg("serve")
            .args(ports)
            .arg("--data-dir")
            .arg(data_dir)
            .env("DYELINE_LOG", "warn")
            // The tests send spans recorded in 2024 and 2025, and the receivers refuse spans
            // older than the retention (domain §1): the test servers keep ten years unless a
            // test says otherwise.
            .env("DYELINE_STORE__RETENTION", "3650days")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn dyeline serve");
        let stdout = child.stdout.take().expect("stdout piped");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the listening line");
        let addr = |key: &str| -> SocketAddr {
            let mut a: SocketAddr = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{key}=")))
                .unwrap_or_else(|| panic!("no {key} in {line:?}"))
                .parse()
                .expect("socket address");
            if let Some((_, ip)) = netns {
                a.set_ip(ip);
            }
            a
        };
        let server = Self {
            grpc: addr("otlp_grpc"),
            http: addr("otlp_http"),
            api: addr("api"),
            child: Some(child),
        };
        server.wait_healthy();
        server
    }

    fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = reqwest::blocking::Client::new();
        while Instant::now() < deadline {
            if client
                .get(format!("http://{}/healthz", self.api))
                .send()
                .is_ok_and(|r| r.status().is_success())
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("dyeline did not become healthy");
    }

    /// `POST /api/v1/sql`; returns (status, body).
    pub fn sql_raw(&self, sql: &str) -> (u16, serde_json::Value) {
        let resp = reqwest::blocking::Client::new()
            .post(format!("http://{}/api/v1/sql", self.api))
            .json(&serde_json::json!({ "sql": sql }))
            .send()
            .expect("sql request");
        let status = resp.status().as_u16();
        (status, resp.json().expect("json body"))
    }

    /// Runs a query that must succeed; returns its rows.
    pub fn sql(&self, sql: &str) -> Vec<Vec<serde_json::Value>> {
        let (status, body) = self.sql_raw(sql);
        assert_eq!(status, 200, "{sql}: {body}");
        serde_json::from_value(body["rows"].clone()).expect("rows")
    }

    /// The `/metrics` text.
    pub fn metrics(&self) -> String {
        reqwest::blocking::get(format!("http://{}/metrics", self.api))
            .and_then(|r| r.text())
            .expect("metrics")
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// SIGKILL, no chance to flush.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for a clean exit; returns whether it exited successfully.
    pub fn stop(&mut self) -> bool {
        let Some(mut c) = self.child.take() else {
            return false;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = c.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let _ = c.wait();
        false
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `dyeline` with `args`; returns (success, stdout, stderr).
pub fn run_cli(args: &[&str]) -> (bool, String, String) {
    run_cli_in(&std::env::temp_dir(), args)
}

/// Runs `dyeline` with `args` in the working directory `cwd`.
pub fn run_cli_in(cwd: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(dyeline_bin())
        .current_dir(cwd)
        .args(args)
        .env("DYELINE_LOG", "warn")
        .output()
        .expect("run dyeline");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
