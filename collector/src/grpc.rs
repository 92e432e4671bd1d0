//! OTLP/gRPC receiver: `opentelemetry.proto.collector.trace.v1.TraceService/Export`.
//!
//! The request message is taken as raw bytes (a pass-through codec) and decoded here, by the
//! wire reader of [`crate::view`] (prost when it refuses), so an undecodable message answers
//! INVALID_ARGUMENT naming the problem (OTLP/gRPC) rather than tonic's generic INTERNAL. gzip
//! request compression is accepted; the message size limit is the receiver's body limit. A
//! full write path answers UNAVAILABLE with a `RetryInfo` detail.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceResponse,
};
use prost::Message;
use tonic::codec::{
    Codec, CompressionEncoding, DecodeBuf, Decoder, EnabledCompressionEncodings, EncodeBuf, Encoder,
};
use tonic::codegen::{BoxFuture, Service, StdError};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic_types::{ErrorDetails, StatusExt};

use crate::error::IngestError;
use crate::receiver::Receiver;

/// The full method path.
pub const EXPORT_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// A codec that hands the request message over undecoded and encodes the response with prost.
#[derive(Debug, Default, Clone, Copy)]
struct PassThroughCodec;

#[derive(Debug, Default, Clone, Copy)]
struct RawDecoder;

#[derive(Debug, Default, Clone, Copy)]
struct ResponseEncoder;

impl Codec for PassThroughCodec {
    type Encode = ExportTraceServiceResponse;
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
    type Item = ExportTraceServiceResponse;
    type Error = tonic::Status;
    fn encode(&mut self, item: Self::Item, buf: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        item.encode(buf)
            .map_err(|e| tonic::Status::internal(format!("encoding the response: {e}")))
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

struct ExportSvc(Arc<Receiver>);

impl UnaryService<Bytes> for ExportSvc {
    type Response = ExportTraceServiceResponse;
    type Future = BoxFuture<tonic::Response<Self::Response>, tonic::Status>;

    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        let receiver = Arc::clone(&self.0);
        Box::pin(async move {
            let body = request.into_inner();
            let result = receiver.export_protobuf(&body, "grpc").await;
            if let Err(e @ IngestError::BadData(_)) = &result {
                receiver.refused(e);
            }
            match result {
                Ok(accepted) => Ok(tonic::Response::new(ExportTraceServiceResponse {
                    partial_success: (accepted.rejected_spans > 0).then_some(
                        ExportTracePartialSuccess {
                            rejected_spans: accepted.rejected_spans as i64,
                            error_message: accepted.error_message,
                        },
                    ),
                })),
                Err(e) => Err(to_status(&e)),
            }
        })
    }
}

/// The TraceService as a tower service, to add to a `tonic::transport::Server`.
#[derive(Clone)]
pub struct TraceServiceServer {
    receiver: Arc<Receiver>,
}

impl TraceServiceServer {
    /// A server exporting through `receiver`.
    pub fn new(receiver: Arc<Receiver>) -> Self {
        Self { receiver }
    }
}

impl NamedService for TraceServiceServer {
    const NAME: &'static str = "opentelemetry.proto.collector.trace.v1.TraceService";
}

impl<B> Service<http::Request<B>> for TraceServiceServer
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
        if req.uri().path() != EXPORT_PATH {
            return Box::pin(async move {
                Ok(tonic::Status::unimplemented("only TraceService/Export is served").into_http())
            });
        }
        let receiver = Arc::clone(&self.receiver);
        Box::pin(async move {
            let limit = receiver.limits().max_body_bytes;
            let mut accept = EnabledCompressionEncodings::default();
            accept.enable(CompressionEncoding::Gzip);
            let mut grpc = Grpc::new(PassThroughCodec)
                .apply_compression_config(accept, EnabledCompressionEncodings::default())
                .apply_max_message_size_config(Some(limit), None);
            Ok(grpc.unary(ExportSvc(receiver), req).await)
        })
    }
}

/// Serves OTLP/gRPC (HTTP/2 only) on `tcp` under the listener limits `limits` (the
/// `[listen.otlp_grpc]` settings, see [`crate::listen`]) until `shutdown` resolves. A request
/// refused by the listener is answered UNAVAILABLE with `RetryInfo`.
pub async fn serve(
    tcp: tokio::net::TcpListener,
    receiver: Arc<Receiver>,
    limits: crate::listen::ListenerLimits,
    metrics: crate::listen::ListenerMetrics,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let listener = crate::listen::Listener {
        name: "otlp_grpc",
        limits,
        protocols: crate::listen::Protocols::Http2Only,
        metrics,
        refuse: Arc::new(|_, e| e.to_status().into_http::<axum::body::Body>()),
    };
    crate::listen::serve(tcp, listener, TraceServiceServer::new(receiver), shutdown).await;
}
