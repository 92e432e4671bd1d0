//! OTLP/gRPC receiver: `opentelemetry.proto.collector.trace.v1.TraceService/Export`, and
//! `…metrics.v1.MetricsService/Export` and `…logs.v1.LogsService/Export` ([`Signal`]), one
//! service ([`ExportServer`]) taking the same path for each.
//!
//! The request message is taken as raw bytes (a pass-through codec) and decoded here, by the
//! wire reader of [`crate::wire`] (prost when it refuses), so an undecodable message answers
//! INVALID_ARGUMENT naming the problem (OTLP/gRPC) rather than tonic's generic INTERNAL. gzip
//! request compression is accepted; the message size limit is the receiver's body limit, after
//! decompression, and a message past it answers RESOURCE_EXHAUSTED without `RetryInfo`
//! ([`refusal_before_the_service`]). A full write path answers UNAVAILABLE with a `RetryInfo`
//! detail.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::BufMut;
use bytes::{Buf, Bytes};
use tonic::codec::{
    Codec, CompressionEncoding, DecodeBuf, Decoder, EnabledCompressionEncodings, EncodeBuf, Encoder,
};
use tonic::codegen::{BoxFuture, Service, StdError};
use tonic::server::{Grpc, UnaryService};
use tonic_types::{ErrorDetails, StatusExt};

use crate::error::IngestError;
use crate::receiver::Receiver;
use crate::signal::Signal;

/// The full method path of traces.
pub const EXPORT_PATH: &str = Signal::Traces.grpc_path();

/// A codec that hands the request message over undecoded and writes the response as encoded
/// ([`Signal::response_protobuf`]).
#[derive(Debug, Default, Clone, Copy)]
struct PassThroughCodec;

#[derive(Debug, Default, Clone, Copy)]
struct RawDecoder;

#[derive(Debug, Default, Clone, Copy)]
struct ResponseEncoder;

impl Codec for PassThroughCodec {
    type Encode = Vec<u8>;
    type Decode = Bytes;
    type Encoder = ResponseEncoder;
    type Decoder = RawDecoder;
    fn encoder(&mut self) -> Self::Encoder {
        ResponseEncoder
    }
    fn decoder(&mut self) -> Self::Decoder {
        RawDecoder
    }
}

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = tonic::Status;
    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, tonic::Status> {
        let n = buf.remaining();
        Ok(Some(buf.copy_to_bytes(n)))
    }
}

impl Encoder for ResponseEncoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Self::Item, buf: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        buf.put_slice(&item);
        Ok(())
    }
}

/// Maps a refusal to a gRPC status (with `RetryInfo` when retryable).
pub fn to_status(err: &IngestError) -> tonic::Status {
    match err.retry_after() {
        Some(after) => tonic::Status::with_error_details(
            err.grpc_code(),
            err.to_string(),
            ErrorDetails::with_retry_info(Some(after)),
        ),
        None => tonic::Status::new(err.grpc_code(), err.to_string()),
    }
}

/// The Export method of one signal. `reached` is set when tonic hands it a message, so that a
/// refusal answered without it is known to be tonic's ([`refusal_before_the_service`]).
struct ExportSvc {
    receiver: Arc<Receiver>,
    signal: Signal,
    reached: Arc<AtomicBool>,
}

impl UnaryService<Bytes> for ExportSvc {
    type Response = Vec<u8>;
    type Future = BoxFuture<tonic::Response<Self::Response>, tonic::Status>;

    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        self.reached.store(true, Ordering::Relaxed);
        let receiver = Arc::clone(&self.receiver);
        let signal = self.signal;
        Box::pin(async move {
            let body = request.into_inner();
            let result = receiver.export_protobuf(signal, body, "grpc").await;
            if let Err(e @ IngestError::BadData(_)) = &result {
                receiver.refused(signal, e);
            }
            match result {
                Ok(accepted) => Ok(tonic::Response::new(signal.response_protobuf(&accepted))),
                Err(e) => Err(to_status(&e)),
            }
        })
    }
}

/// Counts a request tonic refused before the Export method saw a message, and answers a size
/// refusal the way OTLP/gRPC says.
///
/// tonic refuses a message longer than the decoding limit with OUT_OF_RANGE, which OTLP lists
/// as retryable, and one that gzip inflates past it with RESOURCE_EXHAUSTED and a message of
/// its own; neither names the setting nor is counted. OTLP (opentelemetry-proto
/// `docs/specification.md`, "OTLP/gRPC Request"): "The server MUST enforce a message size limit
/// when receiving the request [...] If the limit is exceeded, the client MUST treat the error as
/// not-retryable. Note that in such a scenario, the gRPC server implementations return a
/// `RESOURCE_EXHAUSTED` status code to the caller." and ("Failures"): "The client SHOULD
/// interpret `RESOURCE_EXHAUSTED` code as retryable only if the server signals that the recovery
/// from resource exhaustion is possible. This is signaled by the server by returning a status
/// containing RetryInfo." So both answer [`IngestError::TooLarge`]: RESOURCE_EXHAUSTED, no
/// `RetryInfo` detail, a message naming `receiver.max_body_size`, counted as `too_large`.
///
/// tonic's other refusals before the method (an unsupported `grpc-encoding`: UNIMPLEMENTED; a
/// body that is not valid gzip, a bad compressed flag or no message: INTERNAL, as the gRPC
/// compression spec asks) keep tonic's status and are counted as `unsupported_media_type` and
/// `bad_data`.
fn refusal_before_the_service(
    receiver: &Receiver,
    signal: Signal,
    response: http::Response<tonic::body::Body>,
) -> http::Response<tonic::body::Body> {
    let Some(code) = response
        .extensions()
        .get::<tonic::Status>()
        .map(tonic::Status::code)
    else {
        return response;
    };
    match code {
        tonic::Code::OutOfRange | tonic::Code::ResourceExhausted => {
            let err = IngestError::TooLarge {
                limit: receiver.limits().max_body_bytes,
            };
            receiver.refused(signal, &err);
            tracing::debug!(error = %err, tonic = ?code, "otlp/grpc export refused");
            to_status(&err).into_http()
        }
        tonic::Code::Unimplemented => {
            receiver.refused(signal, &IngestError::UnsupportedMediaType(String::new()));
            response
        }
        _ => {
            receiver.refused(signal, &IngestError::BadData(String::new()));
            response
        }
    }
}

/// The OTLP services (`TraceService`, `MetricsService`, `LogsService`, each its `Export`) as
/// one tower service, routing by method path; another path answers UNIMPLEMENTED.
#[derive(Clone)]
pub struct ExportServer {
    receiver: Arc<Receiver>,
}

impl ExportServer {
    /// A server exporting through `receiver`.
    pub fn new(receiver: Arc<Receiver>) -> Self {
        Self { receiver }
    }
}

impl<B> Service<http::Request<B>> for ExportServer
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let Some(signal) = Signal::of_grpc_path(req.uri().path()) else {
            return Box::pin(async move {
                Ok(tonic::Status::unimplemented(
                    "only TraceService/Export, MetricsService/Export and LogsService/Export are served",
                )
                .into_http())
            });
        };
        let source = req
            .extensions()
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip());
        if let Err(e) = self.receiver.admit(signal, req.headers(), source) {
            // From the head alone: a refused export's message is never read.
            return Box::pin(async move { Ok(to_status(&e).into_http()) });
        }
        let receiver = Arc::clone(&self.receiver);
        Box::pin(async move {
            let limit = receiver.limits().max_body_bytes;
            let mut accept = EnabledCompressionEncodings::default();
            accept.enable(CompressionEncoding::Gzip);
            let mut grpc = Grpc::new(PassThroughCodec)
                .apply_compression_config(accept, EnabledCompressionEncodings::default())
                .apply_max_message_size_config(Some(limit), None);
            let reached = Arc::new(AtomicBool::new(false));
            let method = ExportSvc {
                receiver: Arc::clone(&receiver),
                signal,
                reached: Arc::clone(&reached),
            };
            let response = grpc.unary(method, req).await;
            if reached.load(Ordering::Relaxed) {
                Ok(response)
            } else {
                Ok(refusal_before_the_service(&receiver, signal, response))
            }
        })
    }
}

/// Serves OTLP/gRPC (HTTP/2 only) on `tcp` under the listener limits `limits` (the
/// `[listen.otlp_grpc]` settings, see [`crate::listen`]), over `tls` when given, until
/// `shutdown` resolves. A request
/// refused by the listener is answered UNAVAILABLE with `RetryInfo`.
pub async fn serve(
    tcp: tokio::net::TcpListener,
    receiver: Arc<Receiver>,
    limits: crate::listen::ListenerLimits,
    metrics: crate::listen::ListenerMetrics,
    tls: Option<Arc<crate::listen::Tls>>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let listener = crate::listen::Listener {
        name: "otlp_grpc",
        limits,
        protocols: crate::listen::Protocols::Http2Only,
        metrics,
        refuse: Arc::new(|_, e| e.to_status().into_http::<axum::body::Body>()),
        tls,
    };
    crate::listen::serve(tcp, listener, ExportServer::new(receiver), shutdown).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::ConvertOptions;
    use crate::metrics::{ReasonLabel, ReceiverMetrics};
    use crate::receiver::Limits;
    use crate::sink::DiscardSink;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    use tonic_types::StatusExt;

    const LIMIT: usize = 64 * 1024;

    fn receiver() -> Arc<Receiver> {
        Arc::new(Receiver::new(
            Arc::new(DiscardSink),
            Arc::new(DiscardSink),
            ConvertOptions::default(),
            ReceiverMetrics::default(),
            Limits {
                max_body_bytes: LIMIT,
            },
        ))
    }

    fn refused(receiver: &Receiver, reason: &'static str) -> u64 {
        receiver
            .metrics()
            .requests_refused
            .get_or_create(&ReasonLabel { reason })
            .get()
    }

    #[test]
    fn tonic_refusals_before_the_method_are_mapped_and_counted() {
        let r = receiver();
        for status in [
            tonic::Status::out_of_range("Error, decoded message length too large"),
            tonic::Status::resource_exhausted("Error decompressing: size limit"),
        ] {
            let response = refusal_before_the_service(&r, Signal::Traces, status.into_http());
            let status = response.extensions().get::<tonic::Status>().unwrap();
            assert_eq!(status.code(), tonic::Code::ResourceExhausted);
            assert!(
                status.message().contains("[receiver] max_body_size"),
                "{}",
                status.message()
            );
            assert!(status.get_details_retry_info().is_none(), "not retryable");
            assert_eq!(
                response.headers()["grpc-status"],
                (tonic::Code::ResourceExhausted as i32).to_string()
            );
        }
        assert_eq!(refused(&r, "too_large"), 2);
        let response = refusal_before_the_service(
            &r,
            Signal::Traces,
            tonic::Status::unimplemented("Content is compressed with `zstd`").into_http(),
        );
        let code = response.extensions().get::<tonic::Status>().unwrap().code();
        assert_eq!(code, tonic::Code::Unimplemented, "tonic's status is kept");
        refusal_before_the_service(
            &r,
            Signal::Traces,
            tonic::Status::internal("Missing request message.").into_http(),
        );
        assert_eq!(refused(&r, "unsupported_media_type"), 1);
        assert_eq!(refused(&r, "bad_data"), 1);
        assert_eq!(refused(&r, "too_large"), 2);
    }

    fn request(attribute_bytes: usize) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![Span {
                        trace_id: vec![1; 16],
                        span_id: vec![2; 8],
                        start_time_unix_nano: 1_700_000_000_000_000_000,
                        attributes: vec![KeyValue {
                            key: "padding".into(),
                            value: Some(AnyValue {
                                value: Some(Value::StringValue("a".repeat(attribute_bytes))),
                            }),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    /// Serves `r` on a free port with the listener of [`serve`].
    async fn start(r: &Arc<Receiver>) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(
            listener,
            Arc::clone(r),
            crate::listen::ListenerLimits::default(),
            crate::listen::ListenerMetrics::default(),
            None,
            std::future::pending(),
        ));
        (addr, server)
    }

    /// A real tonic client against the service: a message past the limit, plain or gzip (a
    /// small compressed message inflating past it), answers RESOURCE_EXHAUSTED without
    /// `RetryInfo`, naming the setting, counted; one under it is stored.
    #[tokio::test]
    async fn oversized_messages_answer_resource_exhausted() {
        let r = receiver();
        let (addr, server) = start(&r).await;
        let client = TraceServiceClient::connect(format!("http://{addr}"))
            .await
            .unwrap();
        let mut gzip = client
            .clone()
            .send_compressed(tonic::codec::CompressionEncoding::Gzip);
        let mut plain = client;

        let ok = plain.export(request(LIMIT / 2)).await;
        assert!(ok.is_ok(), "{ok:?}");
        let plain_big = plain.export(request(LIMIT * 2)).await.unwrap_err();
        let gzip_big = gzip.export(request(LIMIT * 16)).await.unwrap_err();
        for status in [&plain_big, &gzip_big] {
            assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
            assert!(
                status.message().contains("[receiver] max_body_size"),
                "{status:?}"
            );
            assert!(status.get_details_retry_info().is_none(), "{status:?}");
        }
        // Under the limit compressed and inflated alike: accepted.
        assert!(gzip.export(request(LIMIT / 2)).await.is_ok());
        assert_eq!(refused(&r, "too_large"), 2);
        let accepted = r
            .metrics()
            .spans_accepted
            .get_or_create(&crate::metrics::TransportLabel { transport: "grpc" })
            .get();
        assert_eq!(accepted, 2);
        server.abort();
    }

    /// With a token configured, an export without it or with another is UNAUTHENTICATED and
    /// counted, before its message is read (a message past the size limit is refused for the
    /// token, not its size); with the token it is stored.
    #[tokio::test]
    async fn exports_need_the_token_once_one_is_configured() {
        let r = Arc::new(
            Arc::into_inner(receiver())
                .unwrap()
                .with_auth(crate::auth::OtlpAuth::new(["s3cret-token"])),
        );
        let (addr, server) = start(&r).await;
        let mut client = TraceServiceClient::connect(format!("http://{addr}"))
            .await
            .unwrap();
        let with = |token: Option<&str>, size: usize| {
            let mut req = tonic::Request::new(request(size));
            if let Some(t) = token {
                req.metadata_mut()
                    .insert("authorization", format!("Bearer {t}").parse().unwrap());
            }
            req
        };
        for (token, size) in [
            (None, LIMIT / 2),
            (Some("other"), LIMIT / 2),
            (None, LIMIT * 2),
        ] {
            let status = client.export(with(token, size)).await.unwrap_err();
            assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
        }
        assert_eq!(refused(&r, "unauthenticated"), 3);
        assert_eq!(refused(&r, "too_large"), 0);
        assert!(
            client
                .export(with(Some("s3cret-token"), LIMIT / 2))
                .await
                .is_ok()
        );
        let accepted = r
            .metrics()
            .spans_accepted
            .get_or_create(&crate::metrics::TransportLabel { transport: "grpc" })
            .get();
        assert_eq!(accepted, 1);
        server.abort();
    }

    /// Real tonic clients of MetricsService and LogsService: partial success counts the data
    /// points and log records without a time; a message past the limit answers as for traces,
    /// counted for its signal; another service is unimplemented.
    #[tokio::test]
    async fn metrics_and_logs_exports_share_the_trace_path() {
        use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
        use opentelemetry_proto::tonic::collector::logs::v1::logs_service_client::LogsServiceClient;
        use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
        use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
        use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
        use opentelemetry_proto::tonic::metrics::v1::{
            Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum, metric::Data,
        };
        let r = receiver();
        let (addr, server) = start(&r).await;
        let url = format!("http://{addr}");
        let metrics = |times: Vec<u64>, name: String| ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![Metric {
                        name,
                        data: Some(Data::Sum(Sum {
                            data_points: times
                                .into_iter()
                                .map(|t| NumberDataPoint {
                                    start_time_unix_nano: 1,
                                    time_unix_nano: t,
                                    ..Default::default()
                                })
                                .collect(),
                            ..Default::default()
                        })),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let mut m = MetricsServiceClient::connect(url.clone()).await.unwrap();
        let ok = m
            .export(metrics(vec![7, 0, 8], "up".into()))
            .await
            .unwrap()
            .into_inner();
        let partial = ok.partial_success.unwrap();
        assert_eq!(
            (partial.rejected_data_points, partial.error_message.as_str()),
            (
                1,
                "resource_metrics[0].scope_metrics[0].metrics[0] (\"up\").data_points[1]: \
                 time_unix_nano: no time (0)"
            )
        );
        let big = m
            .export(metrics(vec![9], "x".repeat(LIMIT * 2)))
            .await
            .unwrap_err();
        assert_eq!(big.code(), tonic::Code::ResourceExhausted, "{big:?}");
        assert!(big.get_details_retry_info().is_none());
        let presence_refused = |signal, reason| {
            r.metrics()
                .presence_refused
                .get_or_create(&crate::metrics::SignalReasonLabel { signal, reason })
                .get()
        };
        assert_eq!(presence_refused("metrics", "too_large"), 1);
        assert_eq!(
            refused(&r, "too_large"),
            0,
            "not counted as a trace refusal"
        );

        let mut l = LogsServiceClient::connect(url.clone()).await.unwrap();
        let logs = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                scope_logs: vec![ScopeLogs {
                    log_records: vec![
                        LogRecord {
                            observed_time_unix_nano: 5,
                            ..Default::default()
                        },
                        LogRecord::default(),
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let ok = l.export(logs).await.unwrap().into_inner();
        assert_eq!(ok.partial_success.unwrap().rejected_log_records, 1);
        let stored = |signal| {
            r.metrics()
                .presence_accepted
                .get_or_create(&crate::metrics::SignalTransportLabel {
                    signal,
                    transport: "grpc",
                })
                .get()
        };
        assert_eq!((stored("metrics"), stored("logs")), (2, 1));

        // A path of no OTLP signal.
        let mut grpc = tonic::client::Grpc::new(
            tonic::transport::Endpoint::from_shared(url)
                .unwrap()
                .connect()
                .await
                .unwrap(),
        );
        grpc.ready().await.unwrap();
        let e = grpc
            .unary(
                tonic::Request::new(Vec::<u8>::new()),
                http::uri::PathAndQuery::from_static(
                    "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export",
                ),
                PassThroughCodec,
            )
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unimplemented, "{e:?}");
        server.abort();
    }
}
