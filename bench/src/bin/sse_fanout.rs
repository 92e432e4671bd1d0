//! Event fan-out benchmark (issue: control plane, performance): N SSE subscribers on one app
//! of one channel; for each ratio write, the time from sending the write to the last (and to
//! each) subscriber receiving its event. Starts its own `dyeline serve` on a temporary data
//! dir; speaks raw HTTP/1.1 so the client adds as little as possible.
//!
//! `cargo run --profile bench-fast -p dyeline-bench --bin sse_fanout -- \
//!    --dyeline target/bench-fast/dyeline --subscribers 1000 --writes 100`

// The measurement, as JSON on stdout (progress on stderr), is what this benchmark is run for.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader as TokioBufReader};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

#[derive(Parser)]
struct Args {
    /// The dyeline binary.
    #[arg(long)]
    dyeline: PathBuf,
    /// SSE subscribers.
    #[arg(long, default_value_t = 1000)]
    subscribers: usize,
    /// Ratio writes measured.
    #[arg(long, default_value_t = 100)]
    writes: usize,
    /// Pause between writes, ms.
    #[arg(long, default_value_t = 50)]
    pause_ms: u64,
}

const TOKEN: &str = "bench-token-0123456789";

async fn request(addr: &str, method: &str, path: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

/// One subscriber: reads the chunked SSE body and reports (seq, arrival) per event `<seq>.0`.
async fn subscribe(
    addr: String,
    after: u64,
    tx: mpsc::UnboundedSender<(u64, Instant)>,
    ready: mpsc::UnboundedSender<()>,
) {
    let s = TcpStream::connect(&addr).await.expect("connect");
    s.set_nodelay(true).ok();
    let mut r = TokioBufReader::new(s);
    let req = format!(
        "GET /api/v1/apps/order/events/stream?after={after} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    );
    r.get_mut().write_all(req.as_bytes()).await.unwrap();
    // headers
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await.unwrap() == 0 {
            return;
        }
        if line == "\r\n" {
            break;
        }
    }
    let _ = ready.send(());
    // chunked body: size line, data, CRLF
    let mut pending = String::new();
    loop {
        let mut size = String::new();
        if r.read_line(&mut size).await.unwrap_or(0) == 0 {
            return;
        }
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            continue;
        };
        if n == 0 {
            return;
        }
        let mut buf = vec![0u8; n + 2];
        if r.read_exact(&mut buf).await.is_err() {
            return;
        }
        let now = Instant::now();
        pending.push_str(&String::from_utf8_lossy(&buf[..n]));
        while let Some(end) = pending.find("\n\n") {
            let event: String = pending.drain(..end + 2).collect();
            for line in event.lines() {
                if let Some(id) = line.strip_prefix("id:") {
                    let id = id.trim();
                    if let Some(seq) = id.strip_suffix(".0") {
                        let _ = tx.send((seq.parse().unwrap(), now));
                    }
                }
            }
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let dir = std::env::temp_dir().join(format!("dyeline-sse-bench-{}", std::process::id()));
    let mut child = Command::new(&args.dyeline)
        .args([
            "serve",
            "--otlp-grpc-addr",
            "127.0.0.1:0",
            "--otlp-http-addr",
            "127.0.0.1:0",
            "--api-addr",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(&dir)
        .env("DYELINE_API_TOKEN", TOKEN)
        .env("DYELINE_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn dyeline");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let api = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("api="))
        .expect("api address")
        .to_owned();
    tokio::time::sleep(Duration::from_millis(300)).await;
    request(
        &api,
        "PUT",
        "/api/v1/channels/trade",
        r#"{"apps":["order"]}"#,
    )
    .await;
    let start = request(&api, "POST", "/api/v1/channels/trade/start", "").await;
    assert!(start.starts_with("HTTP/1.1 200"), "{start}");
    let after = 2;

    let (tx, mut rx) = mpsc::unbounded_channel();
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel();
    for _ in 0..args.subscribers {
        tokio::spawn(subscribe(api.clone(), after, tx.clone(), ready_tx.clone()));
    }
    for _ in 0..args.subscribers {
        ready_rx.recv().await.unwrap();
    }
    eprintln!("{} subscribers connected", args.subscribers);

    let mut last_ms = Vec::new();
    let mut all_ms = Vec::new();
    for i in 0..args.writes {
        let r = if i % 2 == 0 { 30 } else { 70 };
        let t0 = Instant::now();
        let resp = request(
            &api,
            "POST",
            "/api/v1/channels/trade/ratio",
            &format!("{{\"blue_percent\":{r}}}"),
        )
        .await;
        let seq: u64 = resp
            .split("\"seq\":")
            .nth(1)
            .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no seq in {resp}"));
        let mut got = 0;
        let mut last = t0;
        while got < args.subscribers {
            let (s, at) = tokio::time::timeout(Duration::from_secs(30), rx.recv())
                .await
                .expect("event within 30 s")
                .unwrap();
            if s == seq {
                got += 1;
                last = last.max(at);
                all_ms.push(at.duration_since(t0).as_secs_f64() * 1e3);
            }
        }
        last_ms.push(last.duration_since(t0).as_secs_f64() * 1e3);
        tokio::time::sleep(Duration::from_millis(args.pause_ms)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    last_ms.sort_by(f64::total_cmp);
    all_ms.sort_by(f64::total_cmp);
    let out = serde_json::json!({
        "subscribers": args.subscribers,
        "writes": args.writes,
        "write_to_last_subscriber_ms": {
            "p50": percentile(&last_ms, 0.5), "p99": percentile(&last_ms, 0.99), "max": last_ms[last_ms.len() - 1],
        },
        "write_to_each_subscriber_ms": {
            "p50": percentile(&all_ms, 0.5), "p99": percentile(&all_ms, 0.99),
        },
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}
