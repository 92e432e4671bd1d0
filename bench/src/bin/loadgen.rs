//! OTLP/gRPC load generator: pre-builds `--requests` export requests of `--spans` spans each
//! (see the crate docs for their shape), then sends them with `--concurrency` requests in
//! flight and prints one JSON line: spans sent, wall seconds, spans per second, retries.
//! A request answered UNAVAILABLE / RESOURCE_EXHAUSTED is retried after 20 ms, as an exporter
//! would; every request is eventually accepted or the run fails.
//!
//! `--rate R` paces the run at R requests per second (a steady background load) instead of as
//! fast as the collector takes them; `--present` moves each request's spans to the second
//! before it is sent, so a live analyzer sees them in its open window.
//!
//! Several endpoints (`--endpoint A,B,C`): loadgen is then a **bench-only stand-in for the
//! OpenTelemetry Collector's `loadbalancing` exporter with `routing_key: traceID`** (the
//! Collector cannot be installed here; in production the Collector routes, see deploy/), never
//! the product's path. Each request is split by trace id over a consistent-hash ring of the
//! backends `node-0`.. (100 points each, FNV-1a, so the split is the same on every run and every
//! span of a trace goes to one node), and each backend has its own `--concurrency` requests in
//! flight, as the exporter has one queue per backend. `--duration S` stops taking new requests
//! after S seconds (the pre-built `--requests` must last that long, else the run fails), and the
//! JSON line then also counts the spans each endpoint acknowledged.
//!
//! `--ca FILE` sends over TLS (`https://` endpoints), trusting the PEM certificates in FILE
//! and checking the server's certificate against `--tls-server-name` (default `localhost`);
//! `--token T` sends `authorization: Bearer T` with every request, as an exporter with
//! `OTEL_EXPORTER_OTLP_HEADERS` does.

// The measurement, as JSON on stdout, is what this benchmark is run for.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::Parser;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};

#[derive(Parser)]
struct Args {
    /// Collector endpoint, e.g. http://127.0.0.1:4317; several, comma-separated, are routed
    /// by trace id (see the crate docs above).
    #[arg(long, value_delimiter = ',', required = true)]
    endpoint: Vec<String>,
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
    /// Stop taking new requests after this many seconds (0: send all `--requests`).
    #[arg(long, default_value_t = 0.0)]
    duration: f64,
    /// Send over TLS, trusting the PEM certificate(s) in this file.
    #[arg(long)]
    ca: Option<std::path::PathBuf>,
    /// The name the server's certificate must carry (with `--ca`).
    #[arg(long, default_value = "localhost")]
    tls_server_name: String,
    /// Bearer token sent with every request.
    #[arg(long)]
    token: Option<String>,
}

/// FNV-1a 64: stable across runs and Rust versions (unlike the std hasher's contract).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The exporter's ring: 100 points per backend `node-<b>`, sorted.
fn ring(backends: usize) -> Vec<(u64, usize)> {
    let mut ring: Vec<(u64, usize)> = (0..backends)
        .flat_map(|b| (0..100).map(move |p| (fnv1a(format!("node-{b}#{p}").as_bytes()), b)))
        .collect();
    ring.sort_unstable();
    ring
}

/// The backend of a trace id: the first ring point at or after its hash.
fn backend_of(ring: &[(u64, usize)], trace_id: &[u8]) -> usize {
    let h = fnv1a(trace_id);
    let i = ring.partition_point(|&(p, _)| p < h);
    ring[i % ring.len()].1
}

/// `req` split by backend: one request per backend (resources and scopes kept, each with the
/// spans of the traces routed there; empty ones dropped).
fn split(
    req: &ExportTraceServiceRequest,
    ring: &[(u64, usize)],
    n: usize,
) -> Vec<ExportTraceServiceRequest> {
    let mut out: Vec<ExportTraceServiceRequest> = vec![ExportTraceServiceRequest::default(); n];
    for rs in &req.resource_spans {
        let mut parts: Vec<ResourceSpans> = (0..n)
            .map(|_| ResourceSpans {
                resource: rs.resource.clone(),
                scope_spans: Vec::new(),
                schema_url: rs.schema_url.clone(),
            })
            .collect();
        for ss in &rs.scope_spans {
            let mut scoped: Vec<ScopeSpans> = (0..n)
                .map(|_| ScopeSpans {
                    scope: ss.scope.clone(),
                    spans: Vec::new(),
                    schema_url: ss.schema_url.clone(),
                })
                .collect();
            for span in &ss.spans {
                scoped[backend_of(ring, &span.trace_id)]
                    .spans
                    .push(span.clone());
            }
            for (b, sc) in scoped.into_iter().enumerate() {
                if !sc.spans.is_empty() {
                    parts[b].scope_spans.push(sc);
                }
            }
        }
        for (b, part) in parts.into_iter().enumerate() {
            if !part.scope_spans.is_empty() {
                out[b].resource_spans.push(part);
            }
        }
    }
    out
}

fn span_count(req: &ExportTraceServiceRequest) -> u64 {
    req.resource_spans
        .iter()
        .flat_map(|r| r.scope_spans.iter())
        .map(|s| s.spans.len() as u64)
        .sum()
}

fn now_unix_nano() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let backends = args.endpoint.len();
    if backends > 1 && args.rate > 0.0 {
        return Err("--rate takes one endpoint".into());
    }
    let ring = ring(backends);
    // As fast as possible: every request is built (and split by backend) before the clock
    // starts. Paced: each is built when its turn comes (an hour of load does not fit in memory).
    let mut prebuilt: Vec<Vec<(u64, ExportTraceServiceRequest)>> = vec![Vec::new(); backends];
    if args.rate <= 0.0 {
        for i in 0..args.requests {
            let req = dyeline_bench::request(args.seed, i, args.spans);
            if backends == 1 {
                prebuilt[0].push((i, req));
            } else {
                for (b, part) in split(&req, &ring, backends).into_iter().enumerate() {
                    if !part.resource_spans.is_empty() {
                        prebuilt[b].push((i, part));
                    }
                }
            }
        }
    }
    let (total, seed, spans) = (args.requests, args.seed, args.spans);
    let tls = match &args.ca {
        Some(path) => Some(
            tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(std::fs::read(
                    path,
                )?))
                .domain_name(args.tls_server_name.clone()),
        ),
        None => None,
    };
    let mut channels = Vec::new();
    for e in &args.endpoint {
        let mut endpoint = tonic::transport::Endpoint::from_shared(e.clone())?;
        if let Some(tls) = &tls {
            endpoint = endpoint.tls_config(tls.clone())?;
        }
        channels.push(endpoint.connect().await?);
    }
    let authorization: Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>> = args
        .token
        .as_ref()
        .map(|t| format!("Bearer {t}").parse())
        .transpose()?;
    let retries = Arc::new(AtomicU64::new(0));
    let exhausted = Arc::new(AtomicU64::new(0));
    let acked: Vec<Arc<AtomicU64>> = (0..backends).map(|_| Arc::new(AtomicU64::new(0))).collect();
    // Every request is built and every connection up: a harness may start its clock now.
    eprintln!("loadgen: sending");
    let started = tokio::time::Instant::now();
    let stop_at = (args.duration > 0.0).then(|| started + Duration::from_secs_f64(args.duration));
    let (rate, present) = (args.rate, args.present);
    let mut tasks = Vec::new();
    // Held here until the end: the last task to finish would otherwise free the pre-built
    // requests inside the timed run (about 2.5 s for 3,000 of them).
    let mut queues = Vec::new();
    for (b, channel) in channels.into_iter().enumerate() {
        let queue = Arc::new(std::mem::take(&mut prebuilt[b]));
        queues.push(Arc::clone(&queue));
        let next = Arc::new(AtomicU64::new(0));
        let limit = if rate > 0.0 {
            total
        } else {
            queue.len() as u64
        };
        for _ in 0..args.concurrency {
            let mut client =
                TraceServiceClient::new(channel.clone()).max_encoding_message_size(64 << 20);
            let authorization = authorization.clone();
            let (queue, next, retries, exhausted, acked) = (
                Arc::clone(&queue),
                Arc::clone(&next),
                Arc::clone(&retries),
                Arc::clone(&exhausted),
                Arc::clone(&acked[b]),
            );
            tasks.push(tokio::spawn(async move {
                loop {
                    if stop_at.is_some_and(|t| tokio::time::Instant::now() >= t) {
                        return Ok::<(), tonic::Status>(());
                    }
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= limit {
                        if stop_at.is_some() {
                            exhausted.fetch_add(1, Ordering::Relaxed);
                        }
                        return Ok(());
                    }
                    let (i, mut req) = if rate > 0.0 {
                        tokio::time::sleep_until(
                            started + Duration::from_secs_f64(k as f64 / rate),
                        )
                        .await;
                        (k, dyeline_bench::request(seed, k, spans))
                    } else {
                        queue[k as usize].clone()
                    };
                    if present {
                        let base = dyeline_bench::request_base_unix_nano(i);
                        let now = now_unix_nano() - 1_000_000_000;
                        dyeline_bench::shift_times(&mut req, now as i64 - base as i64);
                    }
                    let n = span_count(&req);
                    loop {
                        let mut request = tonic::Request::new(req.clone());
                        if let Some(a) = &authorization {
                            request.metadata_mut().insert("authorization", a.clone());
                        }
                        match client.export(request).await {
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
                    acked.fetch_add(n, Ordering::Relaxed);
                }
            }));
        }
    }
    for t in tasks {
        t.await??;
    }
    let secs = started.elapsed().as_secs_f64();
    let per_endpoint: Vec<u64> = acked.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    let spans: u64 = per_endpoint.iter().sum();
    if exhausted.load(Ordering::Relaxed) > 0 {
        return Err(format!(
            "the {} pre-built requests ran out before --duration {}s: give more --requests",
            args.requests, args.duration
        )
        .into());
    }
    println!(
        "{}",
        serde_json::json!({
            "spans": spans,
            "seconds": secs,
            "spans_per_second": spans as f64 / secs,
            "retries": retries.load(Ordering::Relaxed),
            "endpoints": backends,
            "spans_per_endpoint": per_endpoint,
        })
    );
    // Freeing millions of spans is no part of the measurement, nor of loadgen's CPU time.
    std::mem::forget(queues);
    Ok(())
}
