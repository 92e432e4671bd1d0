//! In-process tests of the listener limits: a tiny router served by [`serve`] on loopback,
//! driven with raw sockets.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::{get, post};
use http::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

fn limits() -> ListenerLimits {
    ListenerLimits {
        max_connections: 8,
        max_concurrent_requests: 8,
        header_read_timeout: Duration::from_secs(5),
        request_read_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        max_buffered_request_bytes: 1 << 20,
        ..ListenerLimits::default()
    }
}

/// Reads the body, answering 200 with its length, or 503 with the listener's refusal.
async fn sink(body: Body) -> (StatusCode, String) {
    let mut n = 0;
    let mut stream = body.into_data_stream();
    while let Some(chunk) = futures::StreamExt::next(&mut stream).await {
        match chunk {
            Ok(c) => n += c.len(),
            Err(e) => {
                let refused = find_listen_error(&e).map(|l| l.to_string());
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    refused.unwrap_or_else(|| format!("other: {e}")),
                );
            }
        }
    }
    (StatusCode::OK, n.to_string())
}

/// A response streamed in 10 chunks, 100 ms apart (a server-sent event stream).
async fn stream() -> Body {
    let chunks = futures::stream::unfold(0, |i| async move {
        if i == 10 {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        Some((
            Ok::<_, std::io::Error>(bytes::Bytes::from("data: x\n\n")),
            i + 1,
        ))
    });
    Body::from_stream(chunks)
}

/// A response that never ends, 64 KiB at a time.
async fn endless() -> Body {
    let chunk = bytes::Bytes::from(vec![b'z'; 64 * 1024]);
    Body::from_stream(futures::stream::repeat_with(move || {
        Ok::<_, std::io::Error>(chunk.clone())
    }))
}

struct Running {
    addr: std::net::SocketAddr,
    metrics: ListenerMetrics,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn start(limits: ListenerLimits) -> Self {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let metrics = ListenerMetrics::default();
        let router = Router::new()
            .route("/sink", post(sink))
            .route("/stream", get(stream))
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_millis(800)).await;
                    "slow"
                }),
            )
            .route("/fast", get(|| async { "fast" }))
            .route("/endless", get(endless));
        let listener = Listener {
            name: "test",
            limits,
            protocols: Protocols::Http1AndH2c,
            metrics: metrics.clone(),
            tls: None,
            refuse: Arc::new(|_, e| {
                Response::builder()
                    .status(503)
                    .body(axum::body::Body::from(e.to_string()))
                    .unwrap()
            }),
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve(tcp, listener, router, async {
            let _ = rx.await;
        }));
        Self {
            addr,
            metrics,
            stop: Some(tx),
            task,
        }
    }

    fn handles(&self) -> metrics::Handles {
        self.metrics.handles("test")
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(5), &mut self.task)
            .await
            .expect("drained within 5 s")
            .unwrap();
    }
}

fn count(
    family: &prometheus_client::metrics::family::Family<
        metrics::ListenerReasonLabel,
        prometheus_client::metrics::counter::Counter,
    >,
    reason: &'static str,
) -> u64 {
    family
        .get_or_create(&metrics::ListenerReasonLabel {
            listener: "test",
            reason,
        })
        .get()
}

/// Sends `request` and reads until the server closes: (status, whole response text).
async fn exchange(addr: std::net::SocketAddr, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// True when the server closes `s` within `within` (EOF or reset on read).
async fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(within, s.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[test]
fn connection_caps_fit_the_open_files_limit() {
    let mut caps = [1024, 1024, 4096];
    assert!(!fit_connection_caps(&mut caps, 20_000));
    assert_eq!(caps, [1024, 1024, 4096]);
    assert!(fit_connection_caps(&mut caps, 4096));
    assert_eq!(caps, [597, 597, 2389]);
    assert!(caps.iter().sum::<usize>() <= 4096 - nofile::RESERVED_FDS as usize);
    let mut tiny = [1024, 1024, 4096];
    assert!(fit_connection_caps(&mut tiny, 64));
    assert!(tiny.iter().all(|&c| c >= 1) && tiny.iter().sum::<usize>() <= 34);
}

#[test]
fn the_refusal_goaway_is_a_settings_frame_and_a_goaway_with_the_message() {
    let bytes = conn::goaway("raise it");
    assert_eq!(&bytes[..9], &[0, 0, 0, 4, 0, 0, 0, 0, 0], "empty SETTINGS");
    let frame = &bytes[9..];
    let len = (frame[0] as usize) << 16 | (frame[1] as usize) << 8 | frame[2] as usize;
    assert_eq!((frame[3], len, frame.len()), (7, 16, 9 + 16), "GOAWAY");
    assert_eq!(&frame[13..17], &[0, 0, 0, 0xb], "ENHANCE_YOUR_CALM");
    assert_eq!(&frame[17..], b"raise it");
}

#[tokio::test]
async fn idle_connections_are_closed_and_the_longest_idle_evicted_at_the_cap() {
    let server = Running::start(ListenerLimits {
        max_connections: 4,
        idle_timeout: Duration::from_millis(600),
        ..limits()
    })
    .await;
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(TcpStream::connect(server.addr).await.unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    // A fifth connection is admitted in place of the oldest idle one.
    let (status, _) = exchange(
        server.addr,
        "GET /fast HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 200);
    assert!(closed_within(&mut idle[0], Duration::from_millis(300)).await);
    assert_eq!(count(&server.metrics.closed, "evicted"), 1);
    // The others are closed by the idle timeout.
    for s in &mut idle[1..] {
        assert!(closed_within(s, Duration::from_secs(2)).await);
    }
    assert_eq!(count(&server.metrics.closed, "idle_timeout"), 3);
    server.stop().await;
}

#[tokio::test]
async fn a_full_listener_of_busy_connections_refuses_naming_the_setting() {
    let server = Running::start(ListenerLimits {
        max_connections: 1,
        ..limits()
    })
    .await;
    let mut busy = TcpStream::connect(server.addr).await.unwrap();
    busy.write_all(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, text) = exchange(server.addr, "GET /fast HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert_eq!(status, 503, "{text}");
    assert!(
        text.contains("(raise [listen.test] max_connections)"),
        "{text}"
    );
    assert_eq!(count(&server.metrics.refused, "max_connections"), 1);
    let mut out = vec![0u8; 256];
    let n = busy.read(&mut out).await.unwrap();
    assert!(String::from_utf8_lossy(&out[..n]).ends_with("slow"));
    server.stop().await;
}

#[tokio::test]
async fn requests_past_max_concurrent_requests_are_refused() {
    let server = Running::start(ListenerLimits {
        max_concurrent_requests: 1,
        ..limits()
    })
    .await;
    let slow = tokio::spawn(exchange(
        server.addr,
        "GET /slow HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    ));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, text) = exchange(
        server.addr,
        "GET /fast HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 503);
    assert!(text.contains("max_concurrent_requests"), "{text}");
    assert_eq!(slow.await.unwrap().0, 200);
    assert_eq!(
        count(&server.metrics.requests_refused, "max_concurrent_requests"),
        1
    );
    assert_eq!(server.handles().in_flight.get(), 0);
    server.stop().await;
}

#[tokio::test]
async fn a_stalled_body_is_cut_after_the_read_timeout_and_its_bytes_freed() {
    let server = Running::start(ListenerLimits {
        request_read_timeout: Duration::from_millis(400),
        ..limits()
    })
    .await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    s.write_all(b"POST /sink HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\n\r\n")
        .await
        .unwrap();
    s.write_all(&[b'x'; 30_000]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(server.handles().buffered_bytes.get(), 30_000, "charged");
    let t = std::time::Instant::now();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(3), s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(
        text.contains("did not arrive within 400ms (raise [listen.test] request_read_timeout)"),
        "{text}"
    );
    assert!(t.elapsed() < Duration::from_secs(1));
    assert_eq!(server.handles().buffered_bytes.get(), 0, "freed");
    assert_eq!(
        count(&server.metrics.requests_refused, "request_read_timeout"),
        1
    );
    server.stop().await;
}

#[tokio::test]
async fn buffered_request_bytes_are_bounded_across_requests() {
    let server = Running::start(ListenerLimits {
        max_buffered_request_bytes: 64 * 1024,
        request_read_timeout: Duration::from_millis(800),
        ..limits()
    })
    .await;
    let head = b"POST /sink HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\n\r\n";
    let mut first = TcpStream::connect(server.addr).await.unwrap();
    first.write_all(head).await.unwrap();
    first.write_all(&[b'x'; 40_000]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut second = TcpStream::connect(server.addr).await.unwrap();
    second.write_all(head).await.unwrap();
    second.write_all(&[b'x'; 40_000]).await.unwrap();
    let mut out = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_millis(500), second.read(&mut out))
        .await
        .expect("refused at once")
        .unwrap();
    let text = String::from_utf8_lossy(&out[..n]);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(
        text.contains("(raise [listen.test] max_buffered_request_bytes)"),
        "{text}"
    );
    assert!(server.handles().buffered_bytes.get() <= 64 * 1024);
    // The first is cut by its read timeout; then nothing is held.
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(2), first.read_to_end(&mut out))
        .await
        .expect("closed after the read timeout")
        .unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("request_read_timeout"), "{text}");
    assert_eq!(server.handles().buffered_bytes.get(), 0);
    // A body that fits is read in full.
    let body = "y".repeat(50_000);
    let (status, text) = exchange(
        server.addr,
        &format!(
            "POST /sink HTTP/1.1\r\nhost: x\r\ncontent-length: 50000\r\nconnection: close\r\n\r\n{body}"
        ),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.ends_with("50000"));
    server.stop().await;
}

#[tokio::test]
async fn a_long_response_is_not_idle_and_not_cut() {
    let server = Running::start(ListenerLimits {
        idle_timeout: Duration::from_millis(200),
        request_read_timeout: Duration::from_millis(200),
        header_read_timeout: Duration::from_millis(200),
        write_timeout: Duration::from_millis(200),
        ..limits()
    })
    .await;
    let (status, text) = exchange(
        server.addr,
        "GET /stream HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(text.matches("data: x").count(), 10, "{text}");
    assert_eq!(count(&server.metrics.closed, "idle_timeout"), 0);
    assert_eq!(count(&server.metrics.closed, "write_timeout"), 0);
    server.stop().await;
}

#[tokio::test]
async fn a_slow_request_head_is_cut_by_the_header_read_timeout() {
    let server = Running::start(ListenerLimits {
        header_read_timeout: Duration::from_millis(300),
        ..limits()
    })
    .await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    s.write_all(b"GET /fast HTTP/1.1\r\n").await.unwrap();
    let t = std::time::Instant::now();
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if s.write_all(b"x").await.is_err() {
            break;
        }
    }
    assert!(closed_within(&mut s, Duration::from_secs(1)).await);
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    // hyper answers a head timeout with 408 and closes; the close is counted.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(count(&server.metrics.closed, "header_read_timeout"), 1);
    server.stop().await;
}

#[tokio::test]
async fn a_response_nobody_reads_is_cut_by_the_write_timeout() {
    let server = Running::start(ListenerLimits {
        write_timeout: Duration::from_millis(300),
        ..limits()
    })
    .await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    s.write_all(b"GET /endless HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    // Read nothing until the server gives up on the socket (its buffers fill in a few MB).
    let t = std::time::Instant::now();
    while count(&server.metrics.closed, "write_timeout") == 0 {
        assert!(t.elapsed() < Duration::from_secs(5), "not cut after 5 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.handles().in_flight.get(), 0);
    assert_eq!(server.handles().connections.get(), 0);
    server.stop().await;
}
