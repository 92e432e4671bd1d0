//! OTLP/gRPC load generator: pre-builds `--requests` export requests of `--spans` spans each
//! (see the crate docs for their shape), then sends them with `--concurrency` requests in
//! flight and prints one JSON line: spans sent, wall seconds, spans per second, retries.
//! A request answered UNAVAILABLE / RESOURCE_EXHAUSTED is retried after 20 ms, as an exporter
//! would; every request is eventually accepted or the run fails.
//!
//! `--rate R` paces the run at R requests per second (a steady background load) instead of as
//! fast as the collector takes them; `--present` moves each request's spans to the second
//! before it is sent, so a live analyzer sees them in its open window.

// The measurement, as JSON on stdout, is what this benchmark is run for.
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::Parser;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;

#[derive(Parser)]
struct Args {
    /// Collector endpoint, e.g. http://127.0.0.1:4317.
    #[arg(long)]
    endpoint: String,
    /// Requests to send.
    #[arg(long, default_value_t = 500)]
    requests: u64,
    /// Spans per request.
    #[arg(long, default_value_t = 1000)]
    spans: usize,
    /// Requests in flight.
    #[arg(long, default_value_t = 4)]
    concurrency: u64,
    /// Generator seed (use a new one per run against the same store, or spans are duplicates).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Requests per second to send (0: as fast as they are accepted).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Restamp each request's spans to the second before it is sent.
    #[arg(long)]
    present: bool,
}

fn now_unix_nano() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    // As fast as possible: every request is built before the clock starts. Paced: each is
    // built when its turn comes (an hour of load does not fit in memory).
    let prebuilt: Arc<Vec<_>> = Arc::new(if args.rate > 0.0 {
        Vec::new()
    } else {
        (0..args.requests)
            .map(|i| dyeline_bench::request(args.seed, i, args.spans))
            .collect()
    });
    let (total, seed, spans) = (args.requests, args.seed, args.spans);
    let channel = tonic::transport::Endpoint::from_shared(args.endpoint.clone())?
        .connect()
        .await?;
    let next = Arc::new(AtomicU64::new(0));
    let retries = Arc::new(AtomicU64::new(0));
    let started = tokio::time::Instant::now();
    let (rate, present) = (args.rate, args.present);
    let mut tasks = Vec::new();
    for _ in 0..args.concurrency {
        let mut client =
            TraceServiceClient::new(channel.clone()).max_encoding_message_size(64 << 20);
        let (prebuilt, next, retries) = (
            Arc::clone(&prebuilt),
            Arc::clone(&next),
            Arc::clone(&retries),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return Ok::<(), tonic::Status>(());
                }
                let mut req = if rate > 0.0 {
                    tokio::time::sleep_until(started + Duration::from_secs_f64(i as f64 / rate))
                        .await;
                    dyeline_bench::request(seed, i, spans)
                } else {
                    prebuilt[i as usize].clone()
                };
                if present {
                    let base = dyeline_bench::request_base_unix_nano(i);
                    let now = now_unix_nano() - 1_000_000_000;
                    dyeline_bench::shift_times(&mut req, now as i64 - base as i64);
                }
                loop {
                    match client.export(req.clone()).await {
                        Ok(_) => break,
                        Err(s)
                            if matches!(
                                s.code(),
                                tonic::Code::Unavailable | tonic::Code::ResourceExhausted
                            ) =>
                        {
                            retries.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        Err(s) => return Err(s),
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    let secs = started.elapsed().as_secs_f64();
    let spans = args.requests * args.spans as u64;
    println!(
        "{}",
        serde_json::json!({
            "spans": spans,
            "seconds": secs,
            "spans_per_second": spans as f64 / secs,
            "retries": retries.load(Ordering::Relaxed),
        })
    );
    Ok(())
}
