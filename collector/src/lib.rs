//! OTLP trace receivers and the OTLP → Arrow conversion.
//!
//! ```text
//!  gRPC :4317 ─ grpc ─┐                    ┌─ convert (pure: validate, colour, decision) ─┐
//!                     ├─ receiver::export ─┤                                               ├─ SpanSink (store)
//!  HTTP :4318 ─ http ─┘   (json | prost)   └─ metrics (accepted / discarded by reason) ───┘
//! ```
//!
//! Owns decoding (protobuf via prost, OTLP/JSON via [`json`]), limits at the edge (the
//! listeners' connections, timeouts and buffered bytes in [`listen`]; body sizes), the OTLP
//! status mapping ([`error`]), the conversion into `spans` rows ([`convert`]) and the
//! [`sink::SpanSink`] port. Does not own storage: the server wires the store in as the sink.

pub mod convert;
pub mod error;
pub mod grpc;
pub mod http;
pub mod json;
pub mod listen;
pub mod metrics;
pub mod receiver;
pub mod sink;
pub mod wire;

pub use convert::{ConvertOptions, RejectReason, SpanRows, convert_request, convert_view};
pub use error::IngestError;
pub use receiver::{Accepted, Limits, Receiver};
pub use sink::{SinkError, SpanSink, WriteReport};
