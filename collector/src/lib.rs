//! OTLP receivers (traces, and metrics and logs for presence) and the OTLP → Arrow conversion.
//!
//! ```text
//!  gRPC :4317 ─ grpc ─┐                    ┌─ convert (pure: validate, colour, decision) ─┐
//!                     ├─ receiver::export ─┤                                               ├─ SpanSink (store)
//!  HTTP :4318 ─ http ─┘   (json | prost)   └─ metrics (accepted / discarded by reason) ───┘
//!        metrics, logs ─▶ receiver::store_presence ─ convert::presence ─────────────────▶ PresenceSink (store)
//! ```
//!
//! Owns decoding (protobuf via prost, OTLP/JSON via [`json`]), limits at the edge (the
//! listeners' connections, timeouts and buffered bytes in [`listen`]; body sizes), the OTLP
//! status mapping ([`error`]), the three signals' paths and responses ([`signal`]), the
//! conversion into `spans` and `presence` rows ([`convert`], [`convert::presence`]) and the
//! [`sink::SpanSink`] and [`sink::PresenceSink`] ports. Does not own storage: the server wires
//! the store in as both sinks.
//!
//! # Adding an OTLP field
//!
//! A new column of `spans`, read from a field of the OTLP span (or its resource or scope):
//! 1. `model/src/schema.rs`: the `col::` const and its `Field` in `spans_schema()` (in the
//!    place the column should have), [`dyeline_model::schema::SCHEMA_VERSION`] raised by one;
//!    its row in `docs/schema.md`.
//! 2. [`wire`]: the field on the view (`SpanView`, `ScopeView`, …), its tag in the `span()`
//!    (or `scope_spans()`, …) match of the wire reader, and its copy in
//!    `RequestView::from_prost`.
//! 3. `convert/columns.rs`: the builder, named as the column, in `SpanColumns`, `new` and the
//!    `finish` match (`finish` takes the builders in the schema's order; its test fails for a
//!    column without one).
//! 4. `convert.rs`: one `append` line in [`convert_view`]. A value taken from an attribute
//!    instead has its key as a `KEY_*` const in `convert/attrs.rs`, a slot in `SpanAttrs` (or a
//!    field of `ResourceInfo`) and a place in `promoted_span` (or `PROMOTED_RESOURCE`), so it
//!    leaves the `attributes` JSON.

pub mod auth;
pub mod convert;
pub mod error;
pub mod grpc;
pub mod http;
pub mod json;
pub mod listen;
pub mod metrics;
pub mod rate_limit;
pub mod receiver;
pub mod signal;
pub mod sink;
pub mod wire;

pub use auth::OtlpAuth;
pub use convert::presence::{PresenceRows, logs_presence, metrics_presence};
pub use convert::{ConvertOptions, RejectReason, SpanRows, convert_request, convert_view};
pub use error::IngestError;
pub use receiver::{Accepted, Limits, Receiver};
pub use signal::{Format, Signal};
pub use sink::{DiscardSink, PresenceSink, SinkError, SpanSink, WriteReport};
