//! Listener limits (issue 23, defects 7 and 8) against a real `dyeline serve`: an HTTP/2 stream
//! flood on gRPC connections, idle-socket floods on all three listeners, slow request heads
//! and stalled uploads on OTLP/HTTP. Short timeouts come from `DYELINE_LISTEN__*` variables.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;

use super::{HealthWatch, assert_up, peak_rss_bytes, rss_bytes};
use crate::util::*;

const MB: u64 = 1024 * 1024;

/// `DYELINE_LISTEN__<LISTENER>__<KEY>=<value>` for each listener and setting.
fn listen_env(listeners: &[&str], settings: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for l in listeners {
        for (k, v) in settings {
            env.push((
                format!("DYELINE_LISTEN__{}__{}", l.to_uppercase(), k.to_uppercase()),
                (*v).to_owned(),
            ));
        }
    }
    env
}

fn start(env: &[(String, String)]) -> (tempfile::TempDir, Server) {
    let dir = temp_dir();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let server = Server::start(&dir.path().join("data"), &env);
    (dir, server)
}

/// Raises this process's soft open-files limit to its hard limit; returns it.
fn raise_nofile() -> u64 {
    let _ = dyeline_collector::listen::raise_open_files_limit();
    dyeline_collector::listen::open_files_limit()
}

/// A protobuf export request of one span of trace `trace`.
fn one_span(trace: u128) -> Vec<u8> {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id: trace.to_be_bytes().to_vec(),
                    span_id: 7u64.to_be_bytes().to_vec(),
                    name: "during-attack".into(),
                    kind: 2,
                    start_time_unix_nano: 1_718_000_600_000_000_000,
                    end_time_unix_nano: 1_718_000_600_001_000_000,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

/// One OTLP/gRPC export of one span over a fresh HTTP/2 connection (the `h2` client); returns
/// the `grpc-status` and the `SETTINGS_MAX_CONCURRENT_STREAMS` the server advertised.
fn grpc_export(addr: SocketAddr, trace: u128) -> Result<(String, usize), String> {
    grpc_unary_raw(
        addr,
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        &one_span(trace),
    )
}

/// An HTTP/2 frame.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The HPACK block of an Export request head: indexed `:method POST`, `:scheme http`, then
/// literals without indexing.
fn export_head(authority: &str) -> Vec<u8> {
    let mut block = vec![0x83, 0x86];
    let mut literal_indexed_name = |index: u8, value: &str| {
        block.push(index);
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    };
    literal_indexed_name(
        0x04,
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    );
    literal_indexed_name(0x01, authority);
    for (name, value) in [("content-type", "application/grpc"), ("te", "trailers")] {
        block.push(0x00);
        block.push(name.len() as u8);
        block.extend_from_slice(name.as_bytes());
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    }
    block
}

/// What the server said to a stream flood.
#[derive(Debug, Default)]
struct FloodSeen {
    max_concurrent_streams: Option<u32>,
    refused_streams: usize,
    responses: usize,
    goaway_code: Option<u32>,
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<(u8, u8, Vec<u8>)> {
    let mut head = [0u8; 9];
    s.read_exact(&mut head)?;
    let len = (head[0] as usize) << 16 | (head[1] as usize) << 8 | head[2] as usize;
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload)?;
    Ok((head[3], head[4], payload))
}

/// Opens one raw HTTP/2 connection to gRPC, takes the server's SETTINGS, then sends `streams`
/// header-only Export requests (HEADERS without END_STREAM, never a body) as fast as it can,
/// and reads what comes back until the server closes, every stream is answered or refused, or
/// 8 s pass.
fn stream_flood(addr: SocketAddr, streams: u32) -> FloodSeen {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(frame(0x4, 0, 0, &[]));
    s.write_all(&hello).expect("preface");
    let mut seen = FloodSeen::default();
    loop {
        let (kind, flags, payload) = read_frame(&mut s).expect("server SETTINGS");
        if kind == 0x4 && flags & 1 == 0 {
            for entry in payload.chunks(6) {
                if u16::from_be_bytes([entry[0], entry[1]]) == 0x3 {
                    seen.max_concurrent_streams =
                        Some(u32::from_be_bytes([entry[2], entry[3], entry[4], entry[5]]));
                }
            }
            break;
        }
    }
    s.write_all(&frame(0x4, 0x1, 0, &[])).expect("SETTINGS ACK");
    let mut reader = s.try_clone().expect("clone");
    let read = std::thread::spawn(move || {
        let mut seen = seen;
        let deadline = Instant::now() + Duration::from_secs(8);
        while Instant::now() < deadline && seen.responses + seen.refused_streams < streams as usize
        {
            match read_frame(&mut reader) {
                Ok((0x3, _, p)) if p == [0, 0, 0, 7] => seen.refused_streams += 1,
                // A response head; a trailers-only response (a refusal) ends the stream.
                Ok((0x1, flags, _)) if flags & 0x1 != 0 => seen.responses += 1,
                Ok((0x1, _, _)) => {}
                Ok((0x7, _, p)) if p.len() >= 8 => {
                    seen.goaway_code = Some(u32::from_be_bytes([p[4], p[5], p[6], p[7]]));
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        seen
    });
    let block = export_head(&addr.to_string());
    let mut flood = Vec::with_capacity(streams as usize * (block.len() + 9));
    for i in 0..streams {
        flood.extend(frame(0x1, 0x4, 2 * i + 1, &block));
    }
    let _ = s.write_all(&flood);
    read.join().expect("reader")
}

#[test]
fn an_http2_stream_flood_on_grpc_is_held_to_the_stream_and_request_limits() {
    let env = listen_env(
        &["otlp_grpc"],
        &[
            ("request_read_timeout", "3s"),
            ("max_concurrent_requests", "250"),
        ],
    );
    let (_dir, mut server) = start(&env);
    let (status, advertised) = grpc_export(server.grpc, 0xa1).expect("export before");
    assert_eq!((status.as_str(), advertised), ("0", 100));
    let base = rss_bytes(&server);
    let watch = HealthWatch::start(&server);
    let grpc = server.grpc;
    // One connection of 20,000 header-only streams: 100 open at most, the rest refused, the
    // connection told to calm down. Four of 100 each: at most 250 requests in flight on the
    // listener, the rest answered UNAVAILABLE at once, the admitted ones cut after 3 s.
    let flood = std::thread::spawn(move || stream_flood(grpc, 20_000));
    let fills: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(move || stream_flood(grpc, 100)))
        .collect();
    let mut most_in_flight = 0.0f64;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(2) {
        most_in_flight = most_in_flight.max(metric(
            &server.metrics(),
            "dyeline_listener_requests_in_flight",
            &[("listener", "otlp_grpc")],
        ));
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, _) = grpc_export(grpc, 0xa2).expect("export during the flood");
    let flood = flood.join().unwrap();
    let fills: Vec<FloodSeen> = fills.into_iter().map(|f| f.join().unwrap()).collect();
    let health = watch.assert_healthy("HTTP/2 stream flood");
    let peak = peak_rss_bytes(&server);
    assert_eq!(flood.max_concurrent_streams, Some(100), "{flood:?}");
    assert!(
        flood.refused_streams >= 1000,
        "streams past 100 refused: {flood:?}"
    );
    assert_eq!(
        flood.goaway_code,
        Some(0xb),
        "ENHANCE_YOUR_CALM at last: {flood:?}"
    );
    // The flood's own admitted streams take slots until its connection is closed, so the
    // four hold 150 to 250 between them.
    assert!(
        (100.0..=250.0).contains(&most_in_flight),
        "requests in flight {most_in_flight} (bound 250)"
    );
    let answered: usize = fills.iter().map(|s| s.responses).sum();
    assert_eq!(
        answered, 400,
        "every stream of the four answered: {fills:?}"
    );
    let m = server.metrics();
    let refused = metric(
        &m,
        "dyeline_listener_requests_refused_total",
        &[
            ("listener", "otlp_grpc"),
            ("reason", "max_concurrent_requests"),
        ],
    );
    assert!(refused >= 150.0, "{refused} refused at the request bound");
    assert!(
        metric(
            &m,
            "dyeline_listener_requests_refused_total",
            &[
                ("listener", "otlp_grpc"),
                ("reason", "request_read_timeout")
            ],
        ) >= 150.0
    );
    assert_eq!(
        metric(
            &m,
            "dyeline_listener_connections_closed_total",
            &[
                ("listener", "otlp_grpc"),
                ("reason", "http2_enhance_your_calm")
            ],
        ),
        1.0
    );
    // A real export gets through between the refusals (it may itself be refused, retryably,
    // while 250 requests are in flight).
    assert!(status == "0" || status == "14", "grpc-status {status}");
    let (status, _) = grpc_export(grpc, 0xa3).expect("export after");
    assert_eq!(status, "0");
    assert_eq!(count_trace(&server, &format!("{:032x}", 0xa3)), 1);
    for series in [
        "dyeline_listener_requests_in_flight",
        "dyeline_listener_buffered_request_bytes",
    ] {
        assert_eq!(
            metric(&m, series, &[("listener", "otlp_grpc")]),
            0.0,
            "{series}"
        );
    }
    // 20,400 streams at the 13 KB each they cost when unlimited: 260 MB.
    assert!(
        peak - base < 64 * MB,
        "peak RSS grew {} MB (bound 64 MB)",
        (peak - base) / MB
    );
    assert_up(&mut server, "after the stream flood");
    eprintln!(
        "stream flood: {flood:?}; most in flight {most_in_flight}; {refused} refused at the request bound; peak RSS +{} MB; healthz slowest {:?} of {}",
        (peak - base) / MB,
        health.slowest,
        health.probes
    );
}

/// True when the server has closed `s` (EOF or reset), without waiting.
fn closed_by_server(mut s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

#[test]
fn idle_socket_floods_are_evicted_and_timed_out_while_the_server_answers() {
    let per_listener: usize = 1_500;
    let nofile = raise_nofile();
    assert!(
        nofile >= 3 * per_listener as u64 + 200,
        "this test needs {} open files; the hard limit is {nofile}",
        3 * per_listener + 200
    );
    let env = listen_env(
        &["otlp_grpc", "otlp_http", "api"],
        &[("max_connections", "1000"), ("idle_timeout", "4s")],
    );
    let (_dir, mut server) = start(&env);
    let base = rss_bytes(&server);
    let watch = HealthWatch::start(&server);
    let t = Instant::now();
    let mut sockets = Vec::new();
    for addr in [server.grpc, server.http, server.api] {
        for _ in 0..per_listener {
            sockets.push(TcpStream::connect(addr).expect("connect"));
        }
    }
    let opened = t.elapsed();
    // Each listener holds 1,000 connections (and the probes' own); the 500 it evicted are
    // closed as their tasks run.
    let most_open = |m: &str| {
        ["otlp_grpc", "otlp_http", "api"]
            .map(|l| metric(m, "dyeline_listener_connections", &[("listener", l)]))
    };
    let mut m = server.metrics();
    while most_open(&m).iter().any(|&open| open > 1002.0)
        && t.elapsed() < opened + Duration::from_secs(2)
    {
        std::thread::sleep(Duration::from_millis(100));
        m = server.metrics();
    }
    for (listener, open) in ["otlp_grpc", "otlp_http", "api"]
        .into_iter()
        .zip(most_open(&m))
    {
        let evicted = metric(
            &m,
            "dyeline_listener_connections_closed_total",
            &[("listener", listener), ("reason", "evicted")],
        );
        assert!(open <= 1002.0, "{listener}: {open} connections open");
        assert!(evicted >= 500.0, "{listener}: {evicted} evicted");
    }
    // Real exports during the flood, on both OTLP listeners.
    let r = post_traces(
        &server,
        &[("content-type", "application/x-protobuf")],
        one_span(0xb1),
    );
    assert_eq!(r.status, 200, "OTLP/HTTP export during the flood");
    let (status, _) = grpc_export(server.grpc, 0xb2).expect("gRPC export during the flood");
    assert_eq!(status, "0");
    // Every socket is closed by the server once its idle timeout (4 s) and the close grace
    // (1 s) have passed.
    std::thread::sleep(
        (t + opened + Duration::from_secs(6)).saturating_duration_since(Instant::now()),
    );
    let still_open = sockets.iter().filter(|s| !closed_by_server(s)).count();
    assert_eq!(
        still_open, 0,
        "sockets the server kept past its idle timeout"
    );
    let health = watch.assert_healthy("idle-socket flood");
    let m = server.metrics();
    for listener in ["otlp_grpc", "otlp_http", "api"] {
        let idle = metric(
            &m,
            "dyeline_listener_connections_closed_total",
            &[("listener", listener), ("reason", "idle_timeout")],
        );
        assert!(idle >= 900.0, "{listener}: {idle} closed idle");
    }
    let grew = rss_bytes(&server).saturating_sub(base);
    assert!(grew < 100 * MB, "RSS grew {} MB (bound 100 MB)", grew / MB);
    assert_eq!(count_trace(&server, &format!("{:032x}", 0xb1)), 1);
    assert_eq!(count_trace(&server, &format!("{:032x}", 0xb2)), 1);
    assert_up(&mut server, "after the idle-socket flood");
    eprintln!(
        "idle flood: {} sockets opened in {opened:?}; RSS +{} MB; healthz slowest {:?} of {}",
        sockets.len(),
        grew / MB,
        health.slowest,
        health.probes
    );
}

/// Sends the head of an upload declaring `declared` bytes and `send` bytes of it, then reads
/// the answer: the status line and body, or what went wrong.
fn stalled_upload(addr: SocketAddr, declared: usize, send: usize) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!(
        "POST /v1/traces HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {declared}\r\n\r\n"
    );
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(&vec![b' '; send]);
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) => String::from_utf8_lossy(&out).into_owned(),
        Err(e) if !out.is_empty() => {
            String::from_utf8_lossy(&out).into_owned() + &format!(" ({e})")
        }
        Err(e) => format!("no answer: {e}"),
    }
}

#[test]
fn slow_heads_and_stalled_uploads_are_cut_and_their_bytes_freed() {
    let env = listen_env(
        &["otlp_http"],
        &[
            ("header_read_timeout", "2s"),
            ("request_read_timeout", "3s"),
            ("max_buffered_request_bytes", "16MiB"),
        ],
    );
    let (_dir, mut server) = start(&env);
    let base = rss_bytes(&server);
    let watch = HealthWatch::start(&server);
    let http = server.http;
    // 20 request heads sent one byte a second.
    let slow_heads = std::thread::spawn(move || {
        let socks: Vec<TcpStream> = (0..20)
            .map(|_| TcpStream::connect(http).expect("connect"))
            .collect();
        let head = b"POST /v1/traces HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n";
        let t = Instant::now();
        let mut open = socks.len();
        for byte in head.iter().take(10) {
            for mut s in &socks {
                let _ = s.write_all(&[*byte]);
            }
            std::thread::sleep(Duration::from_secs(1));
            open = socks.iter().filter(|s| !closed_by_server(s)).count();
            if open == 0 {
                break;
            }
        }
        (open, t.elapsed())
    });
    // 100 uploads declaring 15 MiB, stalled after 1 MiB: 100 MiB offered, 16 MiB may be held.
    let t = Instant::now();
    let answers: Vec<String> = std::thread::scope(|scope| {
        let uploads: Vec<_> = (0..100)
            .map(|_| scope.spawn(move || stalled_upload(http, 15 * MB as usize, MB as usize)))
            .collect();
        let mut most_held = 0.0f64;
        while t.elapsed() < Duration::from_secs(2) {
            most_held = most_held.max(metric(
                &server.metrics(),
                "dyeline_listener_buffered_request_bytes",
                &[("listener", "otlp_http")],
            ));
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(
            most_held > 0.0 && most_held <= 16.0 * MB as f64,
            "buffered bytes {most_held}"
        );
        uploads.into_iter().map(|u| u.join().unwrap()).collect()
    });
    let cut_after = t.elapsed();
    let (still_open, heads_for) = slow_heads.join().unwrap();
    let health = watch.assert_healthy("slow heads and stalled uploads");
    let peak = peak_rss_bytes(&server);
    assert_eq!(still_open, 0, "slow heads cut after {heads_for:?}");
    // The head timer starts once the first bytes tell HTTP/1.1 from HTTP/2 (the second byte).
    assert!(
        heads_for < Duration::from_secs(6),
        "slow heads cut after {heads_for:?}"
    );
    let by_buffer = answers
        .iter()
        .filter(|a| {
            a.starts_with("HTTP/1.1 503")
                && a.contains("(raise [listen.otlp_http] max_buffered_request_bytes)")
        })
        .count();
    let by_timeout = answers
        .iter()
        .filter(|a| {
            a.starts_with("HTTP/1.1 503")
                && a.contains("(raise [listen.otlp_http] request_read_timeout)")
        })
        .count();
    // Those refused at the byte bound had more bytes on the way: their answer may be lost to
    // the reset of a socket closed with unread data. Those cut by the timeout read theirs.
    assert!(
        by_timeout >= 10,
        "{by_buffer} refused at the byte bound, {by_timeout} cut by the timeout; answers: {:?}",
        &answers[..5]
    );
    for a in answers.iter().filter(|a| a.starts_with("HTTP/1.1 ")) {
        assert!(
            a.starts_with("HTTP/1.1 503") && a.contains("retry-after: 1"),
            "{a}"
        );
    }
    assert!(
        cut_after < Duration::from_secs(8),
        "uploads cut after {cut_after:?}"
    );
    let m = server.metrics();
    let counted = |reason| {
        metric(
            &m,
            "dyeline_listener_requests_refused_total",
            &[("listener", "otlp_http"), ("reason", reason)],
        )
    };
    assert!(counted("max_buffered_request_bytes") >= 50.0);
    assert_eq!(
        counted("max_buffered_request_bytes") + counted("request_read_timeout"),
        100.0,
        "every upload refused once and counted"
    );
    assert!(
        metric(
            &m,
            "dyeline_listener_connections_closed_total",
            &[("listener", "otlp_http"), ("reason", "header_read_timeout")],
        ) >= 20.0
    );
    for series in [
        "dyeline_listener_requests_in_flight",
        "dyeline_listener_buffered_request_bytes",
    ] {
        assert_eq!(
            metric(&m, series, &[("listener", "otlp_http")]),
            0.0,
            "{series}"
        );
    }
    // The 16 MiB held, and the connections of 120 clients. Unbounded, the 100 uploads held
    // 100 MiB here (1.8 GB when sent to 15 MiB).
    assert!(
        peak - base < 60 * MB,
        "peak RSS grew {} MB (bound 60 MB)",
        (peak - base) / MB
    );
    assert_eq!(post_json(&server, "{}").status, 200);
    assert_up(&mut server, "after slow heads and stalled uploads");
    eprintln!(
        "stalled uploads: {by_buffer} refused at the byte bound, {by_timeout} cut at the timeout, all answered in {cut_after:?}; slow heads cut after {heads_for:?}; peak RSS +{} MB; healthz slowest {:?} of {}",
        (peak - base) / MB,
        health.slowest,
        health.probes
    );
}
