//! The connections of one listener: admission under `max_connections` (evicting the
//! longest-idle connection, or refusing when every one has a request in flight), the
//! connection task (hyper, plus the idle timeout, eviction and shutdown), and the accept
//! loop's error back-off.
//!
//! Idle means no request in flight: a connection's idle clock starts when it is accepted and
//! again whenever its last request in flight ends. Bytes do not reset it, so a client cannot
//! keep an idle connection alive by dribbling a request head or HTTP/2 control frames, and a
//! long response still being written (server-sent events) is never idle. A response the peer
//! does not read is caught by the write timeout instead: a connection whose socket has refused
//! writes for `write_timeout` is closed.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

use super::conn_state::{ConnState, NOT_BLOCKED};
use super::request::{ConnService, LimitedBody};
use super::{BoxError, CLOSE_GRACE, Protocols, Shared};

/// The accepted socket, noting in its [`ConnState`] since when a write has found it full.
struct Tracked<IO> {
    inner: IO,
    state: Arc<ConnState>,
    epoch: std::time::Instant,
}

impl<IO> Tracked<IO> {
    fn note<T>(&self, poll: Poll<T>) -> Poll<T> {
        let blocked = &self.state.write_blocked_since_ms;
        match poll {
            Poll::Pending => {
                if blocked.load(Ordering::Relaxed) == NOT_BLOCKED {
                    blocked.store(self.epoch.elapsed().as_millis() as u64, Ordering::Release);
                }
            }
            Poll::Ready(_) => blocked.store(NOT_BLOCKED, Ordering::Release),
        }
        poll
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Tracked<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Tracked<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.note(poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.note(poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The open connections of a listener.
#[derive(Default)]
pub(crate) struct Connections {
    open: Mutex<HashMap<u64, Arc<ConnState>>>,
    /// Open and not closing: what `max_connections` bounds.
    active: AtomicUsize,
    next_id: AtomicU64,
}

impl Connections {
    fn insert(&self, now_ms: u64) -> Arc<ConnState> {
        let state = Arc::new(ConnState::new(
            self.next_id.fetch_add(1, Ordering::Relaxed),
            now_ms,
        ));
        self.active.fetch_add(1, Ordering::AcqRel);
        self.open
            .lock()
            .expect("connections lock")
            .insert(state.id, Arc::clone(&state));
        state
    }

    /// Marks `c` closing; true the first time.
    fn mark_closing(&self, c: &ConnState) -> bool {
        let first = !c.closing.swap(true, Ordering::AcqRel);
        if first {
            self.active.fetch_sub(1, Ordering::AcqRel);
        }
        first
    }

    fn remove(&self, c: &ConnState) {
        self.mark_closing(c);
        self.open.lock().expect("connections lock").remove(&c.id);
    }

    /// Open connections not closing.
    pub(crate) fn active(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }

    /// Picks the connection idle the longest (no request in flight, not closing), marks it
    /// closing and wakes its task to close it. False when every connection is busy.
    pub(crate) fn evict_longest_idle(&self) -> bool {
        let victim = {
            let open = self.open.lock().expect("connections lock");
            open.values()
                .filter(|c| !c.closing.load(Ordering::Acquire) && c.idle())
                .min_by_key(|c| c.idle_since_ms.load(Ordering::Acquire))
                .cloned()
        };
        match victim {
            Some(c) if self.mark_closing(&c) => {
                c.evict.notify_one();
                true
            }
            _ => false,
        }
    }
}

/// Admits an accepted connection: sets `TCP_NODELAY`, makes room under `max_connections` by
/// evicting the longest-idle connection, or refuses it (counted, with a last word naming the
/// setting) when every connection has a request in flight.
pub(crate) fn admit(shared: &Shared, stream: &TcpStream) -> Option<Arc<ConnState>> {
    set_nodelay(stream);
    if shared.conns.active() >= shared.limits.max_connections {
        if shared.conns.evict_longest_idle() {
            shared.metrics.connection_closed("evicted");
        } else {
            shared.metrics.connection_refused("max_connections");
            refuse(shared, stream);
            return None;
        }
    }
    shared.metrics.accepted.inc();
    shared.metrics.connections.inc();
    Some(shared.conns.insert(shared.now_ms()))
}

/// Sets `TCP_NODELAY` on an accepted connection (best effort: a failure is logged at debug
/// and the connection kept), so a response's last small segment is sent at once instead of
/// waiting for the client's delayed ACK (up to 40 ms: an exporter with a few requests in
/// flight waited on that instead of on the server).
pub fn set_nodelay(stream: &TcpStream) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY on an accepted connection");
    }
}

/// Writes a best-effort last word to a refused connection (it is closed right after): an
/// HTTP/1.1 503, or for an HTTP/2-only listener the server preface and a GOAWAY whose debug
/// data says why.
fn refuse(shared: &Shared, stream: &TcpStream) {
    let message = format!(
        "the {} listener is at its bound of {} connections, all with requests in flight {}",
        shared.name,
        shared.limits.max_connections,
        shared.raise("max_connections")
    );
    tracing::debug!(listener = shared.name, "{message}");
    if shared.tls.is_some() {
        // Plain bytes would be garbage to a TLS client; the close alone says it.
        return;
    }
    let bytes = match shared.protocols {
        Protocols::Http2Only => goaway(&message),
        Protocols::Http1AndH2c => {
            let body = serde_json::json!({"error": {"code": "unavailable", "message": message}})
                .to_string();
            format!(
                "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        }
    };
    let _ = stream.try_write(&bytes);
}

/// An empty SETTINGS frame (the server preface) and a GOAWAY (last stream 0,
/// ENHANCE_YOUR_CALM) carrying `message` as its debug data.
pub(crate) fn goaway(message: &str) -> Vec<u8> {
    let debug = message.as_bytes();
    let len = 8 + debug.len();
    let mut out = vec![0, 0, 0, 0x4, 0, 0, 0, 0, 0];
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, 0x7, 0]);
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&[0, 0, 0, 0xb]);
    out.extend_from_slice(debug);
    out
}

/// Serves one connection until it ends, closing it when idle for `idle_timeout`, when its
/// writes have been blocked for `write_timeout`, when evicted, or when the server stops.
pub(crate) async fn run<S, B>(
    shared: Arc<Shared>,
    state: Arc<ConnState>,
    stream: TcpStream,
    service: S,
    stop: watch::Receiver<bool>,
) where
    S: tower_service::Service<
            Request<LimitedBody>,
            Response = Response<B>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let svc = ConnService {
        inner: service,
        shared: Arc::clone(&shared),
        conn: Arc::clone(&state),
        peer: stream.peer_addr().ok(),
    };
    match shared.tls.as_ref().map(|t| t.acceptor()) {
        None => drive(&shared, &state, stream, svc, stop).await,
        Some(acceptor) => {
            // The handshake is bounded like a request head; a failed one closes the
            // connection (counted), without a word: there is no channel to say it on.
            let handshake =
                tokio::time::timeout(shared.limits.header_read_timeout, acceptor.accept(stream))
                    .await;
            match handshake {
                Ok(Ok(tls)) => drive(&shared, &state, tls, svc, stop).await,
                failed => {
                    let why = match failed {
                        Ok(Err(e)) => e.to_string(),
                        _ => "timed out".to_owned(),
                    };
                    tracing::debug!(listener = shared.name, error = %why, "tls handshake failed");
                    shared.metrics.connection_closed("tls_handshake");
                }
            }
        }
    }
    shared.conns.remove(&state);
    shared.metrics.connections.dec();
}

/// Serves one connection's bytes (`io`: the socket, or its TLS stream) through hyper until it
/// ends or is closed; [`run`] then forgets the connection.
async fn drive<IO, S, B>(
    shared: &Shared,
    state: &Arc<ConnState>,
    stream: IO,
    svc: ConnService<S>,
    mut stop: watch::Receiver<bool>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: tower_service::Service<
            Request<LimitedBody>,
            Response = Response<B>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let io = Tracked {
        inner: stream,
        state: Arc::clone(state),
        epoch: shared.epoch,
    };
    let conn = shared.builder.serve_connection(TokioIo::new(io), svc);
    let mut conn = std::pin::pin!(conn);
    let idle_timeout = shared.limits.idle_timeout;
    let write_timeout = shared.limits.write_timeout;
    // When the server began closing the connection (idle, evicted while busy, stopping): it
    // is then closed under its peer once idle for CLOSE_GRACE, since a graceful HTTP/2 close
    // waits on a ping the peer may never answer. Requests in flight are waited for; on
    // shutdown the listener's drain bounds that.
    let mut closing: Option<Instant> = None;
    let mut draining = false;
    loop {
        let now = Instant::now();
        let wake = match closing {
            Some(since) => since + CLOSE_GRACE,
            None if state.idle() => {
                let since = state.idle_since_ms.load(Ordering::Acquire);
                let idle_for = Duration::from_millis(shared.now_ms().saturating_sub(since));
                now + idle_timeout.saturating_sub(idle_for)
            }
            None => now + idle_timeout,
        };
        // A blocked write is noticed within a write timeout, and acted on at its end.
        let wake = wake.min(match state.write_blocked_for(shared.now_ms()) {
            Some(blocked) => now + write_timeout.saturating_sub(blocked),
            None => now + write_timeout,
        });
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    count_error(shared, &e);
                }
                break;
            }
            // Evicted (the listener is at max_connections): closed at once when still idle,
            // so that its descriptor is free for the connection that evicted it (a graceful
            // HTTP/2 close waits on a ping the peer may never answer).
            () = state.evict.notified(), if closing.is_none() => {
                if state.idle() {
                    break;
                }
                conn.as_mut().graceful_shutdown();
                closing = Some(Instant::now());
            }
            _ = stop.wait_for(|s| *s), if !draining => {
                draining = true;
                shared.conns.mark_closing(state);
                if closing.is_none() {
                    conn.as_mut().graceful_shutdown();
                    closing = Some(Instant::now());
                }
            }
            () = tokio::time::sleep_until(wake) => match closing {
                // The peer has read nothing for write_timeout: closed under it (a graceful
                // close would wait on writes that cannot happen).
                _ if state
                    .write_blocked_for(shared.now_ms())
                    .is_some_and(|blocked| blocked >= write_timeout) =>
                {
                    shared.metrics.connection_closed("write_timeout");
                    break;
                }
                Some(_) if state.idle() => break,
                Some(_) => closing = Some(Instant::now()),
                None => {
                    let since = state.idle_since_ms.load(Ordering::Acquire);
                    let idle_for = shared.now_ms().saturating_sub(since);
                    if state.idle() && idle_for >= idle_timeout.as_millis() as u64
                        && shared.conns.mark_closing(state)
                    {
                        shared.metrics.connection_closed("idle_timeout");
                        conn.as_mut().graceful_shutdown();
                        closing = Some(Instant::now());
                    }
                }
            },
        }
    }
}

/// Counts a connection that ended on an error the server raised: a request head not read in
/// time, an HTTP/2 peer told to calm down (too many refused or reset streams). Errors of the
/// peer (resets, bad bytes) are not counted.
fn count_error(shared: &Shared, e: &BoxError) {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(&**e);
    while let Some(err) = next {
        if let Some(h) = err.downcast_ref::<hyper::Error>()
            && h.is_timeout()
        {
            shared.metrics.connection_closed("header_read_timeout");
            return;
        }
        if let Some(h2) = err.downcast_ref::<h2::Error>()
            && h2.reason() == Some(h2::Reason::ENHANCE_YOUR_CALM)
        {
            shared.metrics.connection_closed("http2_enhance_your_calm");
            return;
        }
        next = err.source();
    }
    tracing::trace!(listener = shared.name, error = %e, "connection ended with an error");
}

/// The accept loop's handling of failed accepts: connection errors are skipped; running out
/// of file descriptors (EMFILE, ENFILE) evicts the longest-idle connection and backs off
/// (10 ms doubling to 1 s) instead of spinning; each is counted, and logged at most once a
/// second.
#[derive(Default)]
pub(crate) struct AcceptBackoff {
    delay: Duration,
    last_log: Option<Instant>,
}

impl AcceptBackoff {
    pub(crate) fn reset(&mut self) {
        self.delay = Duration::ZERO;
    }

    pub(crate) async fn handle(&mut self, shared: &Shared, e: std::io::Error) {
        use std::io::ErrorKind as K;
        if matches!(
            e.kind(),
            K::ConnectionAborted | K::ConnectionReset | K::ConnectionRefused | K::Interrupted
        ) {
            return;
        }
        shared.metrics.accept_errors.inc();
        use rustix::io::Errno;
        let errno = Errno::from_io_error(&e);
        let out_of_fds = errno == Some(Errno::MFILE) || errno == Some(Errno::NFILE);
        let evicted = out_of_fds && shared.conns.evict_longest_idle();
        if evicted {
            shared.metrics.connection_closed("evicted");
        }
        if self
            .last_log
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            self.last_log = Some(Instant::now());
            tracing::warn!(
                listener = shared.name,
                error = %e,
                evicted_an_idle_connection = evicted,
                "accept failed; backing off (out of file descriptors: raise the open-files limit, ulimit -n, or lower [listen.{}] max_connections)",
                shared.name
            );
        }
        self.delay = (self.delay * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
        tokio::time::sleep(self.delay).await;
    }
}
