//! One request on a limited listener: admitted under `max_concurrent_requests`, its body read
//! through [`LimitedBody`] (whole within `request_read_timeout`, every byte charged to the
//! listener's `max_buffered_request_bytes`), its bytes and its slot given back when the
//! response has been sent (or the request dropped).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use dyeline_model::Category;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tonic_types::{ErrorDetails, StatusExt};

use super::conn_state::ConnState;
use super::{BoxError, Shared};

/// The delay a refused client is asked to wait before retrying.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Which listener limit refused a request (the metric `reason`, and the setting's name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    /// Too many requests in flight on the listener.
    MaxConcurrentRequests,
    /// The listener holds as many request body bytes as it may.
    MaxBufferedRequestBytes,
    /// The request body did not arrive in time.
    RequestReadTimeout,
}

impl RefusalReason {
    /// The setting's name, also the metric `reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MaxConcurrentRequests => "max_concurrent_requests",
            Self::MaxBufferedRequestBytes => "max_buffered_request_bytes",
            Self::RequestReadTimeout => "request_read_timeout",
        }
    }
}

/// A request refused by a listener limit. Retryable: the gRPC status (its `source`, which
/// tonic finds when the error comes out of a request body) is UNAVAILABLE with `RetryInfo`;
/// HTTP answers 503 with `Retry-After`. The message names the setting that raises the limit.
#[derive(Debug)]
pub struct ListenError {
    reason: RefusalReason,
    message: String,
    status: tonic::Status,
}

impl ListenError {
    fn new(reason: RefusalReason, message: String) -> Self {
        let status = tonic::Status::with_error_details(
            tonic::Code::from(Category::Unavailable.grpc_code()),
            message.clone(),
            ErrorDetails::with_retry_info(Some(RETRY_AFTER)),
        );
        Self {
            reason,
            message,
            status,
        }
    }

    /// The limit that refused.
    pub fn reason(&self) -> RefusalReason {
        self.reason
    }

    /// How long the client should wait before retrying.
    pub fn retry_after(&self) -> Duration {
        RETRY_AFTER
    }

    /// The gRPC status (UNAVAILABLE with `RetryInfo`).
    pub fn to_status(&self) -> tonic::Status {
        tonic::Status::with_error_details(
            self.status.code(),
            self.message.clone(),
            ErrorDetails::with_retry_info(Some(RETRY_AFTER)),
        )
    }
}

impl std::fmt::Display for ListenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ListenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.status)
    }
}

/// The [`ListenError`] in `err` or its sources (a request body's error as a handler sees it,
/// e.g. wrapped in `axum::Error`).
pub fn find_listen_error<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a ListenError> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(found) = e.downcast_ref::<ListenError>() {
            return Some(found);
        }
        next = e.source();
    }
    None
}

/// A request in flight: holds its slot under `max_concurrent_requests` and the body bytes it
/// was charged; both are given back when the last of its request body, response body and
/// service future is dropped.
pub(crate) struct RequestState {
    shared: Arc<Shared>,
    conn: Arc<ConnState>,
    charged: AtomicUsize,
    charging: AtomicBool,
}

impl RequestState {
    /// A slot for a new request, or `None` at `max_concurrent_requests`.
    pub(crate) fn admit(shared: &Arc<Shared>, conn: &Arc<ConnState>) -> Option<Self> {
        let before = shared.metrics.in_flight.inc();
        if before >= shared.limits.max_concurrent_requests as i64 {
            shared.metrics.in_flight.dec();
            return None;
        }
        conn.request_started();
        Some(Self {
            shared: Arc::clone(shared),
            conn: Arc::clone(conn),
            charged: AtomicUsize::new(0),
            charging: AtomicBool::new(true),
        })
    }

    /// Charges `n` body bytes to the listener's bound.
    fn charge(&self, n: usize) -> Result<(), ListenError> {
        if n == 0 || !self.charging.load(Ordering::Relaxed) {
            return Ok(());
        }
        let max = self.shared.limits.max_buffered_request_bytes as i64;
        let before = self.shared.metrics.buffered_bytes.inc_by(n as i64);
        if before + n as i64 > max {
            self.shared.metrics.buffered_bytes.dec_by(n as i64);
            self.shared
                .metrics
                .request_refused(RefusalReason::MaxBufferedRequestBytes.as_str());
            return Err(ListenError::new(
                RefusalReason::MaxBufferedRequestBytes,
                format!(
                    "the {} listener holds {} bytes of request bodies, its bound; retry later {}",
                    self.shared.name,
                    max,
                    self.shared.raise("max_buffered_request_bytes")
                ),
            ));
        }
        self.charged.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    /// Stops charging and gives back what was charged.
    fn release(&self) {
        self.charging.store(false, Ordering::Relaxed);
        let n = self.charged.swap(0, Ordering::Relaxed);
        if n > 0 {
            self.shared.metrics.buffered_bytes.dec_by(n as i64);
        }
    }
}

impl Drop for RequestState {
    fn drop(&mut self) {
        self.release();
        self.shared.metrics.in_flight.dec();
        self.conn.request_ended(self.shared.now_ms());
    }
}

/// A handle on the request's charge against `max_buffered_request_bytes`, in the request's
/// extensions, for a handler that discards a body instead of buffering it.
#[derive(Clone)]
pub struct BodyBudget(Arc<RequestState>);

impl BodyBudget {
    /// Stops charging this request's body bytes to the listener's bound and gives back what it
    /// was charged (the handler drops the rest of an over-size body unread).
    pub fn release(&self) {
        self.0.release();
    }
}

/// The request body a limited listener hands its service: the body must end within
/// `request_read_timeout` of the request head, and every data byte is charged to the
/// listener's `max_buffered_request_bytes` until the request is over. Either refusal comes out
/// as the body's error (a [`ListenError`]), after which the body ends.
pub struct LimitedBody {
    inner: Incoming,
    request: Arc<RequestState>,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    failed: bool,
}

impl LimitedBody {
    fn new(inner: Incoming, request: Arc<RequestState>) -> Self {
        let deadline = (!inner.is_end_stream()).then(|| {
            Box::pin(tokio::time::sleep(
                request.shared.limits.request_read_timeout,
            ))
        });
        Self {
            inner,
            request,
            deadline,
            failed: false,
        }
    }

    fn timed_out(&self) -> ListenError {
        let shared = &self.request.shared;
        shared
            .metrics
            .request_refused(RefusalReason::RequestReadTimeout.as_str());
        ListenError::new(
            RefusalReason::RequestReadTimeout,
            format!(
                "the request body did not arrive within {:?} {}",
                shared.limits.request_read_timeout,
                shared.raise("request_read_timeout")
            ),
        )
    }
}

impl Body for LimitedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.failed {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && let Err(e) = self.request.charge(data.len())
                {
                    self.failed = true;
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
                if self.inner.is_end_stream() {
                    self.deadline = None;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Box::new(e)))),
            Poll::Ready(None) => {
                self.deadline = None;
                Poll::Ready(None)
            }
            Poll::Pending => {
                if let Some(deadline) = self.deadline.as_mut()
                    && deadline.as_mut().poll(cx).is_ready()
                {
                    self.failed = true;
                    self.deadline = None;
                    return Poll::Ready(Some(Err(Box::new(self.timed_out()))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that keeps its request in flight until it is sent or dropped.
struct GuardedBody<B> {
    inner: Pin<Box<B>>,
    _request: Arc<RequestState>,
}

impl<B> Body for GuardedBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.inner.as_mut().poll_frame(cx).map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The service hyper calls for each request of one connection: admits the request, wraps its
/// body and response, calls the listener's service.
pub(crate) struct ConnService<S> {
    pub(crate) inner: S,
    pub(crate) shared: Arc<Shared>,
    pub(crate) conn: Arc<ConnState>,
    /// The peer's address, given to handlers as axum's `ConnectInfo` (per-client throttles).
    pub(crate) peer: Option<std::net::SocketAddr>,
}

impl<S, B> hyper::service::Service<Request<Incoming>> for ConnService<S>
where
    S: tower_service::Service<Request<LimitedBody>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<axum::body::Body>;
    type Error = Infallible;
    type Future =
        Pin<Box<dyn Future<Output = Result<Response<axum::body::Body>, Infallible>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let Some(state) = RequestState::admit(&self.shared, &self.conn) else {
            let shared = &self.shared;
            shared
                .metrics
                .request_refused(RefusalReason::MaxConcurrentRequests.as_str());
            let e = ListenError::new(
                RefusalReason::MaxConcurrentRequests,
                format!(
                    "the {} listener has {} requests in flight, its bound; retry later {}",
                    shared.name,
                    shared.limits.max_concurrent_requests,
                    shared.raise("max_concurrent_requests")
                ),
            );
            let response = (shared.refuse)(req.headers(), &e);
            return Box::pin(async move { Ok(response) });
        };
        let state = Arc::new(state);
        let mut inner = self.inner.clone();
        let peer = self.peer;
        Box::pin(async move {
            let (mut parts, body) = req.into_parts();
            parts.extensions.insert(BodyBudget(Arc::clone(&state)));
            if let Some(peer) = peer {
                parts.extensions.insert(axum::extract::ConnectInfo(peer));
            }
            let body = LimitedBody::new(body, Arc::clone(&state));
            std::future::poll_fn(|cx| inner.poll_ready(cx))
                .await
                .unwrap_or_else(|e| match e {});
            let response = inner
                .call(Request::from_parts(parts, body))
                .await
                .unwrap_or_else(|e| match e {});
            Ok(response.map(|b| {
                axum::body::Body::new(GuardedBody {
                    inner: Box::pin(b),
                    _request: state,
                })
            }))
        })
    }
}
