//! OTLP/HTTP receiver: `POST /v1/traces`, `/v1/metrics` and `/v1/logs` with
//! `application/x-protobuf` or `application/json` bodies, optionally `Content-Encoding: gzip`
//! (also `x-gzip`, multi-member) or `deflate`. Every signal takes the same path (body limit,
//! decompression, refusals); only decoding and what is stored differ ([`Signal`]).
//!
//! Per the OTLP specification (OTLP/HTTP): the response uses the request's encoding; success is
//! 200 with the signal's `Export*ServiceResponse` (`partial_success` when items were rejected); errors
//! carry a `google.rpc.Status` body (protobuf or JSON, like the request) with status 400 (bad
//! data), 413 (too large), 415 (unsupported type), 429 / 503 with `Retry-After` (retryable).

use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, DefaultBodyLimit, Extension, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

use crate::convert::presence::PresenceRows;
use crate::error::IngestError;
use crate::listen::{BodyBudget, ListenError};
use crate::receiver::{Accepted, Receiver, presence_rows};
pub use crate::signal::Format;
use crate::signal::Signal;
use dyeline_model::PresenceSignal;

/// `google.rpc.Status`, the error body of OTLP/HTTP.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// Reads the media type of a `Content-Type` value, ignoring parameters and case.
///
/// # Errors
/// [`IngestError::UnsupportedMediaType`] for anything but the two OTLP types.
pub fn parse_content_type(value: Option<&str>) -> Result<Format, IngestError> {
    let media = value
        .and_then(|v| v.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase())
        .unwrap_or_default();
    match media.as_str() {
        "application/x-protobuf" | "application/protobuf" => Ok(Format::Protobuf),
        "application/json" => Ok(Format::Json),
        _ => Err(IngestError::UnsupportedMediaType(format!(
            "unsupported Content-Type {:?}; OTLP/HTTP accepts application/x-protobuf or application/json",
            value.unwrap_or("")
        ))),
    }
}

/// Inflates `body` according to `Content-Encoding`, never past `limit` bytes.
///
/// # Errors
/// [`IngestError::BadData`] for a body that is not valid in the declared encoding,
/// [`IngestError::TooLarge`] when the inflated body passes `limit`,
/// [`IngestError::UnsupportedMediaType`] for an unknown encoding.
pub fn decompress(encoding: Option<&str>, body: Bytes, limit: usize) -> Result<Bytes, IngestError> {
    let enc = encoding
        .map(|e| e.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let mut out = Vec::new();
    let read = match enc.as_str() {
        "" | "identity" => return Ok(body),
        "gzip" | "x-gzip" => flate2::read::MultiGzDecoder::new(&body[..])
            .take(limit as u64 + 1)
            .read_to_end(&mut out),
        "deflate" => flate2::read::ZlibDecoder::new(&body[..])
            .take(limit as u64 + 1)
            .read_to_end(&mut out),
        other => {
            return Err(IngestError::UnsupportedMediaType(format!(
                "unsupported Content-Encoding {other:?}; accepted: gzip, deflate, identity"
            )));
        }
    };
    match read {
        Ok(_) if out.len() > limit => Err(IngestError::TooLarge { limit }),
        Ok(_) => Ok(Bytes::from(out)),
        Err(e) => Err(IngestError::BadData(format!(
            "Content-Encoding {enc} declared but the body is not valid {enc}: {e}"
        ))),
    }
}

/// Decodes an OTLP/JSON export request (protobuf bodies go to
/// [`Receiver::export_protobuf`]).
///
/// # Errors
/// [`IngestError::BadData`] naming the problem.
fn decode_json(body: &[u8]) -> Result<ExportTraceServiceRequest, IngestError> {
    crate::json::decode_export_request(body)
        .map_err(|e| IngestError::BadData(format!("invalid OTLP/JSON: {e}")))
}

/// CORS for exporters running in browsers (`[otlp.cors] allowed_origins`; `*`: any origin):
/// preflights from those origins are answered for `POST` with the headers they ask for
/// (content type and encoding, `authorization`), cached an hour; answers to them carry
/// `Access-Control-Allow-Origin`. Other origins get no CORS headers, so browsers refuse to
/// send. `None` (no origins): no CORS at all. Origins are checked at config load.
pub fn cors(allowed_origins: &[String]) -> Option<CorsLayer> {
    if allowed_origins.is_empty() {
        return None;
    }
    let origin = if allowed_origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            allowed_origins
                .iter()
                .filter_map(|o| HeaderValue::from_str(o).ok()),
        )
    };
    Some(
        CorsLayer::new()
            .allow_origin(origin)
            .allow_methods([http::Method::POST])
            .allow_headers(AllowHeaders::mirror_request())
            .max_age(std::time::Duration::from_secs(3600)),
    )
}

/// The OTLP/HTTP router: `POST /v1/traces`, `/v1/metrics`, `/v1/logs`, with `cors` when
/// given ([`cors`]). Body size is enforced by the handler, so axum's own default limit is
/// lifted.
pub fn router(receiver: Arc<Receiver>, cors: Option<CorsLayer>) -> Router {
    let mut router = Router::new();
    for signal in Signal::ALL {
        router = router.route(
            signal.http_path(),
            post(
                move |state: State<Arc<Receiver>>,
                      headers: HeaderMap,
                      budget: Option<Extension<BodyBudget>>,
                      peer: Option<Extension<ConnectInfo<SocketAddr>>>,
                      body: Body| {
                    let source = peer.map(|Extension(ConnectInfo(a))| a.ip());
                    export(state, signal, headers, source, budget, body)
                },
            ),
        );
    }
    let router = router.layer(DefaultBodyLimit::disable());
    let router = match cors {
        Some(cors) => router.layer(cors),
        None => router,
    };
    router.with_state(receiver)
}

/// Serves OTLP/HTTP (HTTP/1.1 and h2c) on `tcp` under the listener limits `limits` (the
/// `[listen.otlp_http]` settings, see [`crate::listen`]), over `tls` and with `cors` when
/// given, until `shutdown` resolves.
pub async fn serve(
    tcp: tokio::net::TcpListener,
    receiver: Arc<Receiver>,
    limits: crate::listen::ListenerLimits,
    metrics: crate::listen::ListenerMetrics,
    tls: Option<Arc<crate::listen::Tls>>,
    cors: Option<CorsLayer>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let listener = crate::listen::Listener {
        name: "otlp_http",
        limits,
        protocols: crate::listen::Protocols::Http1AndH2c,
        metrics,
        refuse: Arc::new(refusal),
        tls,
    };
    crate::listen::serve(tcp, listener, router(receiver, cors), shutdown).await;
}

/// The answer to a request the listener refused (503 with `Retry-After`, a `google.rpc.Status`
/// in the request's encoding, JSON when it has none).
pub fn refusal(headers: &HeaderMap, err: &ListenError) -> Response {
    let format = parse_content_type(
        headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    )
    .unwrap_or(Format::Json);
    error_response(format, &listen_refusal(err))
}

/// A listener refusal as the receivers' error: retryable, 503 / UNAVAILABLE, its message
/// naming the setting.
fn listen_refusal(err: &ListenError) -> IngestError {
    IngestError::Unavailable(err.to_string())
}

async fn export(
    State(receiver): State<Arc<Receiver>>,
    signal: Signal,
    headers: HeaderMap,
    source: Option<IpAddr>,
    budget: Option<Extension<BodyBudget>>,
    body: Body,
) -> Response {
    let header = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let format = parse_content_type(header(header::CONTENT_TYPE));
    // First, and from the head alone: a refused export's body is never read, and nothing
    // else about it is answered.
    if let Err(e) = receiver.admit(signal, &headers, source) {
        return error_response(format.as_ref().map_or(Format::Json, |f| *f), &e);
    }
    let format = match format {
        Ok(f) => f,
        Err(e) => {
            receiver.refused(signal, &e);
            return error_response(Format::Json, &e);
        }
    };
    match handle(
        &receiver,
        signal,
        format,
        header(header::CONTENT_LENGTH),
        header(header::CONTENT_ENCODING),
        body,
        budget.as_ref().map(|Extension(b)| b),
    )
    .await
    {
        Ok(accepted) => success_response(signal, format, &accepted),
        Err(e) => {
            if !matches!(
                e,
                IngestError::Saturated { .. } | IngestError::Unavailable(_)
            ) {
                receiver.refused(signal, &e);
            }
            tracing::debug!(error = %e, status = e.http_status().as_u16(), "otlp/http export refused");
            error_response(format, &e)
        }
    }
}

async fn handle(
    receiver: &Receiver,
    signal: Signal,
    format: Format,
    content_length: Option<&str>,
    encoding: Option<&str>,
    body: Body,
    budget: Option<&BodyBudget>,
) -> Result<Accepted, IngestError> {
    let limit = receiver.limits().max_body_bytes;
    let declared = content_length.and_then(|l| l.trim().parse::<u64>().ok());
    let raw = read_limited(body, declared, limit, budget).await?;
    let encoding = encoding.map(str::to_owned);
    let options = receiver.options();
    let decode = move || {
        let body = decompress(encoding.as_deref(), raw, limit)?;
        if format == Format::Json && body.is_empty() {
            return Err(IngestError::BadData(
                "empty body: an OTLP/JSON request is a JSON object (send {} for an empty request)"
                    .into(),
            ));
        }
        match (signal.presence(), format) {
            (Some(p), _) => {
                presence_rows(p, format, &body, &options).map(|r| Payload::Presence(p, r))
            }
            // Read by the wire reader below, without a prost message.
            (None, Format::Protobuf) => Ok(Payload::Protobuf(body)),
            (None, Format::Json) => decode_json(&body).map(Payload::Request),
        }
    };
    // CPU-bound: on the blocking pool, within the receiver's slots.
    let decoded = receiver.blocking(decode).await??;
    let transport = format.transport();
    match decoded {
        Payload::Request(request) => receiver.export(request, transport).await,
        Payload::Protobuf(body) => {
            receiver
                .export_protobuf(Signal::Traces, body, transport)
                .await
        }
        Payload::Presence(p, rows) => receiver.store_presence(p, rows, transport).await,
    }
}

/// A request body after decompression: a decoded trace request (OTLP/JSON), trace protobuf
/// bytes still to read, or the presence rows of a metrics or logs export.
enum Payload {
    Request(ExportTraceServiceRequest),
    Protobuf(Bytes),
    Presence(PresenceSignal, PresenceRows),
}

/// Reads a request body of at most `limit` bytes. A body past the limit (declared by
/// `Content-Length`, or found while reading a chunked body) is not buffered: it is read and
/// discarded up to a bound (8× the limit, at least 128 MiB) so that a client still writing gets
/// the 413 rather than a broken pipe; past the bound the connection is simply dropped. The
/// listener charges every byte read to its `max_buffered_request_bytes`; a discarded body is
/// given back to it (`budget`).
///
/// # Errors
/// [`IngestError::TooLarge`] past the limit; [`IngestError::BadData`] when the body stream fails;
/// [`IngestError::Unavailable`] (retryable) when the listener refused the body: its bytes
/// would pass `max_buffered_request_bytes`, or it did not arrive within
/// `request_read_timeout`.
async fn read_limited(
    body: Body,
    declared: Option<u64>,
    limit: usize,
    budget: Option<&BodyBudget>,
) -> Result<Bytes, IngestError> {
    let bound = (limit as u64).saturating_mul(8).max(128 * 1024 * 1024);
    let mut too_large = declared.is_some_and(|l| l > limit as u64);
    let release = |too_large: bool| {
        if let (true, Some(b)) = (too_large, budget) {
            b.release();
        }
    };
    release(too_large);
    let mut chunks = Chunks::default();
    let mut seen = 0u64;
    let mut stream = body.into_data_stream();
    while let Some(chunk) = futures::StreamExt::next(&mut stream).await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(_) if too_large => break,
            Err(e) => {
                if let Some(refused) = crate::listen::find_listen_error(&e) {
                    return Err(listen_refusal(refused));
                }
                return Err(IngestError::BadData(format!(
                    "could not read the request body: {e}"
                )));
            }
        };
        seen += chunk.len() as u64;
        if !too_large && chunks.len + chunk.len() > limit {
            too_large = true;
            chunks = Chunks::default();
            release(true);
        }
        if too_large {
            if seen > bound {
                break;
            }
        } else {
            chunks.push(chunk);
        }
    }
    if too_large {
        Err(IngestError::TooLarge { limit })
    } else {
        Ok(chunks.join())
    }
}

/// A body as it is read: chunks kept as they came and joined once at the end. Growing one
/// buffer instead held up to twice the body (about four times in the allocator, with the
/// buffers freed at each doubling) for every upload still arriving. Small chunks are copied
/// into a shared tail so that a body sent a few bytes at a time costs no more than its bytes.
#[derive(Default)]
struct Chunks {
    parts: Vec<Bytes>,
    tail: bytes::BytesMut,
    len: usize,
}

impl Chunks {
    /// Chunks under this are copied into the tail, which is sealed at [`Chunks::TAIL`].
    const SMALL: usize = 4096;
    const TAIL: usize = 64 * 1024;

    fn push(&mut self, chunk: Bytes) {
        self.len += chunk.len();
        if chunk.len() < Self::SMALL {
            self.tail.extend_from_slice(&chunk);
            if self.tail.len() >= Self::TAIL {
                self.seal();
            }
        } else {
            self.seal();
            self.parts.push(chunk);
        }
    }

    fn seal(&mut self) {
        if !self.tail.is_empty() {
            self.parts.push(std::mem::take(&mut self.tail).freeze());
        }
    }

    /// The body as one buffer, copied only when it came in more than one piece.
    fn join(mut self) -> Bytes {
        self.seal();
        if self.parts.len() <= 1 {
            return self.parts.pop().unwrap_or_default();
        }
        let mut out = bytes::BytesMut::with_capacity(self.len);
        for c in self.parts {
            out.extend_from_slice(&c);
        }
        out.freeze()
    }
}

fn success_response(signal: Signal, format: Format, accepted: &Accepted) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, format.content_type())],
        signal.response(format, accepted),
    )
        .into_response()
}

fn error_response(format: Format, err: &IngestError) -> Response {
    let status = RpcStatus {
        code: err.grpc_code() as i32,
        message: err.to_string(),
    };
    let body = match format {
        Format::Protobuf => status.encode_to_vec(),
        Format::Json => serde_json::json!({"code": status.code, "message": status.message})
            .to_string()
            .into_bytes(),
    };
    let mut resp = (
        err.http_status(),
        [(header::CONTENT_TYPE, format.content_type())],
        body,
    )
        .into_response();
    if let Some(v) = err
        .retry_after()
        .and_then(|after| HeaderValue::from_str(&after.as_secs().max(1).to_string()).ok())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    if matches!(err, IngestError::Unauthenticated(_)) {
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"otlp\""),
        );
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_compare_media_type_only() {
        assert_eq!(
            parse_content_type(Some("application/json; charset=utf-8")).unwrap(),
            Format::Json
        );
        assert_eq!(
            parse_content_type(Some("Application/X-Protobuf")).unwrap(),
            Format::Protobuf
        );
        let e = parse_content_type(Some("text/plain")).unwrap_err();
        assert_eq!(e.http_status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(e.to_string().contains("application/x-protobuf"));
        assert!(parse_content_type(None).is_err());
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn gzip_bodies_inflate_with_members_and_limits() {
        let mut two = gzip(b"{\"resourceSpans\":");
        two.extend(gzip(b"[]}"));
        let out = decompress(Some("gzip"), Bytes::from(two), 1024).unwrap();
        assert_eq!(&out[..], b"{\"resourceSpans\":[]}");
        let lie = decompress(Some("gzip"), Bytes::from_static(b"{}"), 1024).unwrap_err();
        assert_eq!(lie.http_status(), StatusCode::BAD_REQUEST);
        let bomb = gzip(&vec![0u8; 10 * 1024 * 1024]);
        assert!(bomb.len() < 100 * 1024);
        let e = decompress(Some("x-gzip"), Bytes::from(bomb), 1024 * 1024).unwrap_err();
        assert_eq!(e.http_status(), StatusCode::PAYLOAD_TOO_LARGE);
        let e = decompress(Some("br"), Bytes::from_static(b"x"), 10).unwrap_err();
        assert_eq!(e.http_status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }

    #[tokio::test]
    async fn bodies_are_read_up_to_the_limit_whether_declared_or_chunked() {
        let chunked = || {
            let chunks = (0..3).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 600])));
            Body::from_stream(futures::stream::iter(chunks))
        };
        let ok = read_limited(chunked(), None, 4096, None).await.unwrap();
        assert_eq!(ok.len(), 1800);
        let e = read_limited(chunked(), None, 1024, None).await.unwrap_err();
        assert_eq!(e.http_status(), StatusCode::PAYLOAD_TOO_LARGE);
        let e = read_limited(chunked(), Some(1_000_000), 4096, None)
            .await
            .unwrap_err();
        assert_eq!(e.http_status(), StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn chunks_join_to_the_body_small_or_large() {
        let mut c = Chunks::default();
        let mut want = Vec::new();
        for i in 0..3000u32 {
            let piece = if i % 1000 == 999 {
                vec![(i % 251) as u8; 70_000]
            } else {
                vec![(i % 251) as u8; (i % 7) as usize + 1]
            };
            want.extend_from_slice(&piece);
            c.push(Bytes::from(piece));
        }
        assert!(
            c.parts.len() < 20,
            "small chunks are coalesced: {}",
            c.parts.len()
        );
        assert_eq!(c.len, want.len());
        assert_eq!(&c.join()[..], &want[..]);
        let mut one = Chunks::default();
        one.push(Bytes::from_static(b"whole"));
        assert_eq!(&one.join()[..], b"whole");
        assert!(Chunks::default().join().is_empty());
    }
}
