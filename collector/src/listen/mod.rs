//! Listener limits at the edge: every TCP listener of the server (OTLP/gRPC, OTLP/HTTP, the API
//! and dashboard) is served by [`serve`], which owns its accept loop, its connections and the
//! limits on both.
//!
//! ```text
//!  accept ─ EMFILE: evict + back off ─┐
//!         ─ at max_connections: evict the longest-idle connection, or refuse (all busy)
//!         ─ TCP_NODELAY ─ conn::run ─ hyper (HTTP/1.1 + h2c, or h2 only for gRPC)
//!                          │  header_read_timeout (h1), http2_max_concurrent_streams,
//!                          │  max_header_bytes, http2 keep-alive pings
//!                          │  idle_timeout: no request in flight for that long → closed
//!                          │  write_timeout: a response write blocked that long → closed
//!                          └─ request::ConnService ─ max_concurrent_requests (listener-wide)
//!                               └─ LimitedBody: request_read_timeout, max_buffered_request_bytes
//! ```
//!
//! Every refusal is counted ([`ListenerMetrics`]) and its message names the setting that raises
//! it (`[listen.<listener>] <setting>`). Owns: the accept loop, the connection cap and eviction
//! policy, per-connection timeouts, the listener-wide bounds on requests in flight and on
//! buffered request bytes, and the process's open-files limit ([`raise_open_files_limit`]).
//! Does not own what a request means: the services (tonic, axum routers) are given to it.

mod conn;
mod conn_state;
mod metrics;
mod nofile;
mod request;
mod tls;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

pub use conn::set_nodelay;
pub use metrics::ListenerMetrics;
pub use nofile::{fit_connection_caps, open_files_limit, raise_open_files_limit};
pub use request::{BodyBudget, LimitedBody, ListenError, RefusalReason, find_listen_error};
pub use tls::{Tls, TlsError, TlsFiles};

/// Boxed error of a body or service.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long an idle or evicted connection is given to close itself (an HTTP/2 GOAWAY, an
/// HTTP/1.1 close) before its socket is closed under it.
pub const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// How long the connections of a stopping server are given to finish their requests before
/// they are closed.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The accept queue asked of the kernel (capped by `net.core.somaxconn`, 4096 by default on
/// Linux): with the 128 of `TcpListener::bind`, a burst of connections faster than the accept
/// loop overflowed the queue and the kernel dropped the SYNs of everyone, the health check's
/// included, for a second (the SYN retry) at a time.
pub const ACCEPT_BACKLOG: u32 = 4096;

/// Binds a listening socket on `addr` (`SO_REUSEADDR`, an accept queue of [`ACCEPT_BACKLOG`]).
///
/// # Errors
/// The address cannot be bound.
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(ACCEPT_BACKLOG)
}

/// The limits of one listener (the `[listen.<listener>]` settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerLimits {
    /// Connections open at most; past it the longest-idle one is closed for the new one, or
    /// the new one refused when every connection has a request in flight.
    pub max_connections: usize,
    /// Requests in flight at most across the listener's connections (HTTP/2 streams count one
    /// each); past it a request is answered 503 / UNAVAILABLE with a retry delay.
    pub max_concurrent_requests: usize,
    /// An HTTP/1.1 request head must arrive within this (also the longest an HTTP/1.1
    /// keep-alive connection waits for its next request: hyper runs the same timer).
    pub header_read_timeout: Duration,
    /// A request body must arrive in full within this of its head.
    pub request_read_timeout: Duration,
    /// A connection without a request in flight for this long is closed.
    pub idle_timeout: Duration,
    /// A connection whose writes have been blocked this long (the peer reads nothing of a
    /// response) is closed.
    pub write_timeout: Duration,
    /// HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS` advertised and enforced per connection.
    pub http2_max_concurrent_streams: u32,
    /// HTTP/2 keep-alive ping interval (a peer that does not answer is dropped).
    pub http2_keepalive_interval: Duration,
    /// HTTP/2 keep-alive ping timeout.
    pub http2_keepalive_timeout: Duration,
    /// Largest request head: HTTP/2 `SETTINGS_MAX_HEADER_LIST_SIZE`, HTTP/1.1 read buffer.
    pub max_header_bytes: usize,
    /// Request body bytes held at most across the listener's requests in flight (from the
    /// first byte read until the response is sent).
    pub max_buffered_request_bytes: usize,
}

impl Default for ListenerLimits {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            max_concurrent_requests: 1024,
            header_read_timeout: Duration::from_secs(10),
            request_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
            write_timeout: Duration::from_secs(30),
            http2_max_concurrent_streams: 100,
            http2_keepalive_interval: Duration::from_secs(60),
            http2_keepalive_timeout: Duration::from_secs(20),
            max_header_bytes: 64 * 1024,
            max_buffered_request_bytes: 256 * 1024 * 1024,
        }
    }
}

/// The protocols a listener speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocols {
    /// HTTP/2 only (gRPC).
    Http2Only,
    /// HTTP/1.1 and HTTP/2 with prior knowledge (h2c), told apart by the connection preface.
    Http1AndH2c,
}

/// The answer to a request refused before its service saw it (at
/// `max_concurrent_requests`), in the listener's own error format: a gRPC status, an OTLP/HTTP
/// `google.rpc.Status`, the API's JSON error.
pub type Refuse = Arc<dyn Fn(&HeaderMap, &ListenError) -> Response<axum::body::Body> + Send + Sync>;

/// One listener: its name (the `[listen.<name>]` section, the `listener` metric label), its
/// limits, protocols, counters and refusal format.
#[derive(Clone)]
pub struct Listener {
    /// `otlp_grpc`, `otlp_http` or `api`.
    pub name: &'static str,
    /// The limits.
    pub limits: ListenerLimits,
    /// HTTP/2 only, or HTTP/1.1 and h2c.
    pub protocols: Protocols,
    /// The counters (shared by every listener; labelled by name).
    pub metrics: ListenerMetrics,
    /// How a request refused at the listener is answered.
    pub refuse: Refuse,
    /// TLS (`[otlp.tls]`); none: plain TCP.
    pub tls: Option<Arc<Tls>>,
}

/// What the accept loop, connections and requests of one listener share.
pub(crate) struct Shared {
    pub(crate) name: &'static str,
    pub(crate) limits: ListenerLimits,
    pub(crate) protocols: Protocols,
    pub(crate) metrics: metrics::Handles,
    pub(crate) refuse: Refuse,
    pub(crate) tls: Option<Arc<Tls>>,
    pub(crate) builder: auto::Builder<TokioExecutor>,
    pub(crate) conns: conn::Connections,
    /// Time zero of the connections' activity clocks.
    pub(crate) epoch: Instant,
}

impl Shared {
    fn new(l: Listener) -> Self {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(l.limits.header_read_timeout)
            .max_buf_size(l.limits.max_header_bytes.max(8192))
            .keep_alive(true);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(l.limits.http2_max_concurrent_streams)
            .max_header_list_size(u32::try_from(l.limits.max_header_bytes).unwrap_or(u32::MAX))
            .keep_alive_interval(l.limits.http2_keepalive_interval)
            .keep_alive_timeout(l.limits.http2_keepalive_timeout);
        let builder = match l.protocols {
            Protocols::Http2Only => builder.http2_only(),
            Protocols::Http1AndH2c => builder,
        };
        Self {
            name: l.name,
            metrics: l.metrics.handles(l.name),
            limits: l.limits,
            protocols: l.protocols,
            refuse: l.refuse,
            tls: l.tls,
            builder,
            conns: conn::Connections::default(),
            epoch: Instant::now(),
        }
    }

    /// Milliseconds since [`Shared::epoch`].
    pub(crate) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// `(raise [listen.<name>] <setting>)`, the end of every refusal message.
    pub(crate) fn raise(&self, setting: &str) -> String {
        format!("(raise [listen.{}] {setting})", self.name)
    }
}

/// Serves `service` on `tcp` under the limits of `listener` until `shutdown` resolves, then
/// stops accepting, asks every connection to finish (HTTP/2 GOAWAY, HTTP/1.1 close after the
/// response in flight) and waits for them up to [`DRAIN_TIMEOUT`].
pub async fn serve<S, B>(
    tcp: TcpListener,
    listener: Listener,
    service: S,
    shutdown: impl Future<Output = ()>,
) where
    S: tower_service::Service<Request<LimitedBody>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let shared = Arc::new(Shared::new(listener));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut accept_errors = conn::AcceptBackoff::default();
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            accepted = tcp.accept() => match accepted {
                Ok((stream, _)) => {
                    accept_errors.reset();
                    if let Some(state) = conn::admit(&shared, &stream) {
                        tasks.spawn(conn::run(
                            Arc::clone(&shared),
                            state,
                            stream,
                            service.clone(),
                            stop_rx.clone(),
                        ));
                    }
                }
                Err(e) => accept_errors.handle(&shared, e).await,
            },
        }
    }
    drop(tcp);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            listener = shared.name,
            connections = tasks.len(),
            "connections still open {DRAIN_TIMEOUT:?} after shutdown began; closing them"
        );
        tasks.shutdown().await;
    }
}

#[cfg(test)]
mod tests;
