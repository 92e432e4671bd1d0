//! Borrowed views of an OTLP trace export request: the fields conversion reads
//! ([`crate::convert`]), as slices of the request's bytes or of a decoded prost message.
//!
//! Owns two ways to get a [`RequestView`]:
//! - [`RequestView::decode`] reads the protobuf wire format of `ExportTraceServiceRequest`
//!   (OTLP `opentelemetry/proto/collector/trace/v1`, the opentelemetry-proto 0.33 messages)
//!   straight into views: strings and ids are slices of the body, so a span costs about one
//!   allocation (its attribute list) instead of one per string and per list as with prost;
//! - [`RequestView::from_prost`] borrows from a prost message (the OTLP/JSON path, and the
//!   fallback below).
//!
//! The wire reader is never more lenient than prost: it refuses everything prost refuses
//! (truncated or overlong fields, a wrong wire type on a known field, field number 0, invalid
//! UTF-8 in any string field, including the fields conversion does not read, such as
//! entity refs). It also refuses, for simplicity, a few inputs prost accepts:
//! a singular message field or an `AnyValue` value given twice (prost merges them), groups,
//! and values nested deeper than [`MAX_DEPTH`]. [`decode_request`] therefore falls back to
//! prost whenever the wire reader refuses, so prost alone decides what is invalid and what
//! its error message says.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use prost::Message;

/// An attribute value (`AnyValue`). `Empty` stands for a missing value, an unset `oneof` and
/// a string-table index (meaningful only in profiles).
#[derive(Debug, Clone, PartialEq)]
pub enum Val<'a> {
    /// No value.
    Empty,
    /// `string_value`.
    Str(&'a str),
    /// `bool_value`.
    Bool(bool),
    /// `int_value`.
    Int(i64),
    /// `double_value`.
    Double(f64),
    /// `bytes_value`.
    Bytes(&'a [u8]),
    /// `array_value`.
    Array(Vec<Val<'a>>),
    /// `kvlist_value`.
    Kvlist(Vec<Kv<'a>>),
}

/// A `KeyValue`.
#[derive(Debug, Clone, PartialEq)]
pub struct Kv<'a> {
    /// The key.
    pub key: &'a str,
    /// The value ([`Val::Empty`] when absent).
    pub value: Val<'a>,
}

/// A span event.
#[derive(Debug, Default, PartialEq)]
pub struct EventView<'a> {
    /// `time_unix_nano`.
    pub time_unix_nano: u64,
    /// `name`.
    pub name: &'a str,
    /// `attributes`.
    pub attributes: Vec<Kv<'a>>,
}

/// A span link (`Span.Link`).
#[derive(Debug, Default, PartialEq)]
pub struct LinkView<'a> {
    /// `trace_id` bytes as sent.
    pub trace_id: &'a [u8],
    /// `span_id` bytes as sent.
    pub span_id: &'a [u8],
    /// `trace_state`.
    pub trace_state: &'a str,
    /// `attributes`.
    pub attributes: Vec<Kv<'a>>,
}

/// A span's status.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct StatusView<'a> {
    /// `code` (`StatusCode` as sent).
    pub code: i32,
    /// `message`.
    pub message: &'a str,
}

/// A span: the fields conversion reads.
#[derive(Debug, Default, PartialEq)]
pub struct SpanView<'a> {
    /// `trace_id` bytes as sent (any length; conversion checks it).
    pub trace_id: &'a [u8],
    /// `span_id` bytes as sent.
    pub span_id: &'a [u8],
    /// `trace_state`.
    pub trace_state: &'a str,
    /// `parent_span_id` bytes as sent.
    pub parent_span_id: &'a [u8],
    /// `name`.
    pub name: &'a str,
    /// `kind` (`SpanKind` as sent).
    pub kind: i32,
    /// `start_time_unix_nano`.
    pub start_time_unix_nano: u64,
    /// `end_time_unix_nano`.
    pub end_time_unix_nano: u64,
    /// `attributes`.
    pub attributes: Vec<Kv<'a>>,
    /// `events`.
    pub events: Vec<EventView<'a>>,
    /// `links`.
    pub links: Vec<LinkView<'a>>,
    /// `status`.
    pub status: Option<StatusView<'a>>,
}

/// An instrumentation scope's name and version.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct ScopeView<'a> {
    /// `name`.
    pub name: &'a str,
    /// `version`.
    pub version: &'a str,
}

/// A `ScopeSpans`.
#[derive(Debug, Default, PartialEq)]
pub struct ScopeSpansView<'a> {
    /// `scope`.
    pub scope: Option<ScopeView<'a>>,
    /// `spans`.
    pub spans: Vec<SpanView<'a>>,
}

/// A `ResourceSpans`.
#[derive(Debug, Default, PartialEq)]
pub struct ResourceSpansView<'a> {
    /// `resource.attributes` (empty without a resource).
    pub resource_attributes: Vec<Kv<'a>>,
    /// `scope_spans`.
    pub scope_spans: Vec<ScopeSpansView<'a>>,
}

/// An `ExportTraceServiceRequest`.
#[derive(Debug, Default, PartialEq)]
pub struct RequestView<'a> {
    /// `resource_spans`.
    pub resource_spans: Vec<ResourceSpansView<'a>>,
}

/// Why the wire reader refused a body (then prost decides, see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("protobuf wire reader: {0}")]
pub struct WireError(&'static str);

/// Deepest nesting of array and kvlist values the wire reader takes (prost takes up to its
/// recursion limit of 100 messages; deeper values fall back to it).
pub const MAX_DEPTH: usize = 32;

/// prost's fixed recursion limit: messages nested deeper are refused (its
/// `no-recursion-limit` feature, which would lift it, is off; a test checks it).
pub const PROST_RECURSION_LIMIT: usize = 100;

/// Deepest arrays of an attribute value prost reads within [`PROST_RECURSION_LIMIT`] (kvlists
/// take more messages per level, so fewer).
pub const MAX_ARRAY_DEPTH: usize = 47;

/// Why a protobuf body was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProtobufError {
    /// Not a valid message: prost's own error.
    #[error("{0}")]
    Invalid(prost::DecodeError),
    /// Attribute values (arrays, kvlists) nested deeper than protobuf decoding goes.
    #[error(
        "attribute value nested too deep: protobuf decoding stops at {PROST_RECURSION_LIMIT} \
         nested messages, which is {MAX_ARRAY_DEPTH} levels of arrayValue (fewer of \
         kvlistValue). This limit is fixed: no setting raises it"
    )]
    TooDeep,
}

/// A decoded request: borrowed from the body, or decoded by prost (the fallback).
pub enum Decoded<'a> {
    /// Read by the wire reader.
    View(RequestView<'a>),
    /// Decoded by prost.
    Prost(Box<ExportTraceServiceRequest>),
}

/// Decodes a protobuf `ExportTraceServiceRequest`: with the wire reader, or with prost when the
/// wire reader refuses the body.
///
/// # Errors
/// prost's error when prost cannot decode the body either ([`ProtobufError::Invalid`]), or
/// [`ProtobufError::TooDeep`] when that is because messages nest past prost's recursion
/// limit (prost's own message would list every level it went through).
pub fn decode_request(body: &[u8]) -> Result<Decoded<'_>, ProtobufError> {
    match RequestView::decode(body) {
        Ok(v) => Ok(Decoded::View(v)),
        Err(_) => ExportTraceServiceRequest::decode(body)
            .map(|r| Decoded::Prost(Box::new(r)))
            .map_err(|e| {
                if e.to_string().ends_with("recursion limit reached") {
                    ProtobufError::TooDeep
                } else {
                    ProtobufError::Invalid(e)
                }
            }),
    }
}

impl<'a> RequestView<'a> {
    /// Views of a prost message.
    pub fn from_prost(r: &'a ExportTraceServiceRequest) -> Self {
        Self {
            resource_spans: r
                .resource_spans
                .iter()
                .map(|rs| ResourceSpansView {
                    resource_attributes: rs
                        .resource
                        .as_ref()
                        .map_or_else(Vec::new, |r| kvs(&r.attributes)),
                    scope_spans: rs
                        .scope_spans
                        .iter()
                        .map(|ss| ScopeSpansView {
                            scope: ss.scope.as_ref().map(|s| ScopeView {
                                name: &s.name,
                                version: &s.version,
                            }),
                            spans: ss
                                .spans
                                .iter()
                                .map(|s| SpanView {
                                    trace_id: &s.trace_id,
                                    span_id: &s.span_id,
                                    trace_state: &s.trace_state,
                                    parent_span_id: &s.parent_span_id,
                                    name: &s.name,
                                    kind: s.kind,
                                    start_time_unix_nano: s.start_time_unix_nano,
                                    end_time_unix_nano: s.end_time_unix_nano,
                                    attributes: kvs(&s.attributes),
                                    events: s
                                        .events
                                        .iter()
                                        .map(|e| EventView {
                                            time_unix_nano: e.time_unix_nano,
                                            name: &e.name,
                                            attributes: kvs(&e.attributes),
                                        })
                                        .collect(),
                                    links: s
                                        .links
                                        .iter()
                                        .map(|l| LinkView {
                                            trace_id: &l.trace_id,
                                            span_id: &l.span_id,
                                            trace_state: &l.trace_state,
                                            attributes: kvs(&l.attributes),
                                        })
                                        .collect(),
                                    status: s.status.as_ref().map(|st| StatusView {
                                        code: st.code,
                                        message: &st.message,
                                    }),
                                })
                                .collect(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    /// Reads the protobuf wire format of an `ExportTraceServiceRequest`.
    ///
    /// # Errors
    /// [`WireError`] for every body prost refuses, and for the few it takes that this reader
    /// leaves to it (module doc).
    pub fn decode(body: &'a [u8]) -> Result<Self, WireError> {
        let mut out = Self::default();
        let mut r = Reader::new(body);
        while let Some((field, wire)) = r.key()? {
            match field {
                1 => out.resource_spans.push(resource_spans(r.len_field(wire)?)?),
                _ => r.skip(wire)?,
            }
        }
        Ok(out)
    }
}

/// Views of prost key-values.
pub fn kvs(attrs: &[KeyValue]) -> Vec<Kv<'_>> {
    attrs.iter().map(kv).collect()
}

fn kv(k: &KeyValue) -> Kv<'_> {
    Kv {
        key: &k.key,
        value: k.value.as_ref().map_or(Val::Empty, val),
    }
}

fn val(v: &AnyValue) -> Val<'_> {
    match &v.value {
        None | Some(Value::StringValueStrindex(_)) => Val::Empty,
        Some(Value::StringValue(s)) => Val::Str(s),
        Some(Value::BoolValue(b)) => Val::Bool(*b),
        Some(Value::IntValue(i)) => Val::Int(*i),
        Some(Value::DoubleValue(d)) => Val::Double(*d),
        Some(Value::BytesValue(b)) => Val::Bytes(b),
        Some(Value::ArrayValue(a)) => Val::Array(a.values.iter().map(val).collect()),
        Some(Value::KvlistValue(l)) => Val::Kvlist(kvs(&l.values)),
    }
}

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// A cursor over one message's bytes.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    /// A base-128 varint of at most 10 bytes, as prost reads it (a 10th byte above 1 is an
    /// overflow).
    fn varint(&mut self) -> Result<u64, WireError> {
        let mut value = 0u64;
        for i in 0..10 {
            let &b = self.buf.get(i).ok_or(WireError("truncated varint"))?;
            if i == 9 && b > 1 {
                return Err(WireError("varint overflow"));
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                self.buf = &self.buf[i + 1..];
                return Ok(value);
            }
        }
        Err(WireError("varint overflow"))
    }

    /// The next field's number and wire type; `None` at the end of the message.
    fn key(&mut self) -> Result<Option<(u32, u8)>, WireError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let key = u32::try_from(key).map_err(|_| WireError("invalid key"))?;
        let field = key >> 3;
        if field == 0 {
            return Err(WireError("field number 0"));
        }
        Ok(Some((field, (key & 7) as u8)))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if n > self.buf.len() {
            return Err(WireError("truncated field"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn len_field(&mut self, wire: u8) -> Result<&'a [u8], WireError> {
        expect(wire, LEN)?;
        let n = self.varint()?;
        self.take(usize::try_from(n).map_err(|_| WireError("truncated field"))?)
    }

    fn str_field(&mut self, wire: u8) -> Result<&'a str, WireError> {
        std::str::from_utf8(self.len_field(wire)?).map_err(|_| WireError("invalid UTF-8"))
    }

    fn varint_field(&mut self, wire: u8) -> Result<u64, WireError> {
        expect(wire, VARINT)?;
        self.varint()
    }

    fn fixed64_field(&mut self, wire: u8) -> Result<u64, WireError> {
        expect(wire, FIXED64)?;
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn fixed32_field(&mut self, wire: u8) -> Result<u32, WireError> {
        expect(wire, FIXED32)?;
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    /// Skips an unknown field (groups are left to prost).
    fn skip(&mut self, wire: u8) -> Result<(), WireError> {
        match wire {
            VARINT => self.varint().map(drop),
            FIXED64 => self.take(8).map(drop),
            LEN => self.len_field(wire).map(drop),
            FIXED32 => self.take(4).map(drop),
            _ => Err(WireError("group or invalid wire type")),
        }
    }
}

fn expect(wire: u8, want: u8) -> Result<(), WireError> {
    if wire == want {
        Ok(())
    } else {
        Err(WireError("wrong wire type"))
    }
}

/// Sets a singular message field once (a repeated one is left to prost, which merges).
fn once<T>(slot: &mut Option<T>, value: T) -> Result<(), WireError> {
    if slot.is_some() {
        return Err(WireError("singular message field repeated"));
    }
    *slot = Some(value);
    Ok(())
}

fn resource_spans(buf: &[u8]) -> Result<ResourceSpansView<'_>, WireError> {
    let mut out = ResourceSpansView::default();
    let mut resource = None;
    let mut r = Reader::new(buf);
    while let Some((field, wire)) = r.key()? {
        match field {
            1 => once(&mut resource, r.len_field(wire)?)?,
            2 => out.scope_spans.push(scope_spans(r.len_field(wire)?)?),
            3 => drop(r.str_field(wire)?),
            _ => r.skip(wire)?,
        }
    }
    if let Some(buf) = resource {
        let mut r = Reader::new(buf);
        while let Some((field, wire)) = r.key()? {
            match field {
                1 => out
                    .resource_attributes
                    .push(key_value(r.len_field(wire)?, 0)?),
                2 => drop(r.varint_field(wire)?),
                3 => entity_ref(r.len_field(wire)?)?,
                _ => r.skip(wire)?,
            }
        }
    }
    Ok(out)
}

fn entity_ref(buf: &[u8]) -> Result<(), WireError> {
    let mut r = Reader::new(buf);
    while let Some((field, wire)) = r.key()? {
        match field {
            1..=4 => drop(r.str_field(wire)?),
            _ => r.skip(wire)?,
        }
    }
    Ok(())
}

fn scope_spans(buf: &[u8]) -> Result<ScopeSpansView<'_>, WireError> {
    let mut out = ScopeSpansView::default();
    let mut scope = None;
    let mut r = Reader::new(buf);
    while let Some((field, wire)) = r.key()? {
        match field {
            1 => once(&mut scope, r.len_field(wire)?)?,
            2 => out.spans.push(span(r.len_field(wire)?)?),
            3 => drop(r.str_field(wire)?),
            _ => r.skip(wire)?,
        }
    }
    if let Some(buf) = scope {
        let mut s = ScopeView::default();
        let mut r = Reader::new(buf);
        while let Some((field, wire)) = r.key()? {
            match field {
                1 => s.name = r.str_field(wire)?,
                2 => s.version = r.str_field(wire)?,
                3 => drop(key_value(r.len_field(wire)?, 0)?),
                4 => drop(r.varint_field(wire)?),
                _ => r.skip(wire)?,
            }
        }
        out.scope = Some(s);
    }
    Ok(out)
}

fn span(buf: &[u8]) -> Result<SpanView<'_>, WireError> {
    let mut s = SpanView::default();
    let mut status = None;
    let mut r = Reader::new(buf);
    while let Some((field, wire)) = r.key()? {
        match field {
            1 => s.trace_id = r.len_field(wire)?,
            2 => s.span_id = r.len_field(wire)?,
            3 => s.trace_state = r.str_field(wire)?,
            4 => s.parent_span_id = r.len_field(wire)?,
            5 => s.name = r.str_field(wire)?,
            6 => s.kind = r.varint_field(wire)? as i32,
            7 => s.start_time_unix_nano = r.fixed64_field(wire)?,
            8 => s.end_time_unix_nano = r.fixed64_field(wire)?,
            9 => s.attributes.push(key_value(r.len_field(wire)?, 0)?),
            10 | 12 | 14 => drop(r.varint_field(wire)?),
            11 => s.events.push(event(r.len_field(wire)?)?),
            13 => s.links.push(link(r.len_field(wire)?)?),
            15 => once(&mut status, r.len_field(wire)?)?,
            16 => drop(r.fixed32_field(wire)?),
            _ => r.skip(wire)?,
        }
    }
    if let Some(buf) = status {
        let mut st = StatusView::default();
        let mut r = Reader::new(buf);
        while let Some((field, wire)) = r.key()? {
            match field {
                2 => st.message = r.str_field(wire)?,
                3 => st.code = r.varint_field(wire)? as i32,
                _ => r.skip(wire)?,
            }
        }
        s.status = Some(st);
    }
    Ok(s)
}

fn event(buf: &[u8]) -> Result<EventView<'_>, WireError> {
    let mut e = EventView::default();
    let mut r = Reader::new(buf);
    while let Some((field, wire)) = r.key()? {
        match field {
            1 => e.time_unix_nano = r.fixed64_field(wire)?,
            2 => e.name = r.str_field(wire)?,
            3 => e.attributes.push(key_value(r.len_field(wire)?, 0)?),
            4 => drop(r.varint_field(wire)?),
            _ => r.skip(wire)?,
        }
    }
    Ok(e)
}

/// A link (its flags and dropped attribute count are checked, not kept).
fn link(buf: &[u8]) -> Result<LinkView<'_>, WireError> {
    let mut l = LinkView::default();
    let mut r = Reader::new(buf);
    while let Some((field, wire)) = r.key()? {
        match field {
            1 => l.trace_id = r.len_field(wire)?,
            2 => l.span_id = r.len_field(wire)?,
            3 => l.trace_state = r.str_field(wire)?,
            4 => l.attributes.push(key_value(r.len_field(wire)?, 0)?),
            5 => drop(r.varint_field(wire)?),
            6 => drop(r.fixed32_field(wire)?),
            _ => r.skip(wire)?,
        }
    }
    Ok(l)
}

fn key_value(buf: &[u8], depth: usize) -> Result<Kv<'_>, WireError> {
    let mut key = "";
    let mut value = None;
    let mut r = Reader::new(buf);
    while let Some((field, wire)) = r.key()? {
        match field {
            1 => key = r.str_field(wire)?,
            2 => once(&mut value, r.len_field(wire)?)?,
            3 => drop(r.varint_field(wire)?),
            _ => r.skip(wire)?,
        }
    }
    Ok(Kv {
        key,
        value: match value {
            Some(buf) => any_value(buf, depth)?,
            None => Val::Empty,
        },
    })
}

fn any_value(buf: &[u8], depth: usize) -> Result<Val<'_>, WireError> {
    if depth >= MAX_DEPTH {
        return Err(WireError("values nested too deep"));
    }
    let mut value = None;
    let mut r = Reader::new(buf);
    while let Some((field, wire)) = r.key()? {
        let v = match field {
            1 => Val::Str(r.str_field(wire)?),
            2 => Val::Bool(r.varint_field(wire)? != 0),
            3 => Val::Int(r.varint_field(wire)? as i64),
            4 => Val::Double(f64::from_bits(r.fixed64_field(wire)?)),
            5 => {
                let mut items = Vec::new();
                let mut a = Reader::new(r.len_field(wire)?);
                while let Some((field, wire)) = a.key()? {
                    match field {
                        1 => items.push(any_value(a.len_field(wire)?, depth + 1)?),
                        _ => a.skip(wire)?,
                    }
                }
                Val::Array(items)
            }
            6 => {
                let mut items = Vec::new();
                let mut l = Reader::new(r.len_field(wire)?);
                while let Some((field, wire)) = l.key()? {
                    match field {
                        1 => items.push(key_value(l.len_field(wire)?, depth + 1)?),
                        _ => l.skip(wire)?,
                    }
                }
                Val::Kvlist(items)
            }
            7 => Val::Bytes(r.len_field(wire)?),
            8 => {
                r.varint_field(wire)?;
                Val::Empty
            }
            _ => {
                r.skip(wire)?;
                continue;
            }
        };
        once(&mut value, v)?;
    }
    Ok(value.unwrap_or(Val::Empty))
}

#[cfg(test)]
mod tests;
