//! Lenient OTLP/JSON decoding of export requests (`POST /v1/traces`, and in `json/signals.rs`
//! `/v1/metrics`, `/v1/logs` and import lines of any signal) into the `opentelemetry-proto` types.
//!
//! This module owns the JSON body → [`ExportTraceServiceRequest`] step of the HTTP receiver and
//! nothing else: validating ids for emptiness, masking flags and turning spans into rows happen
//! later. It implements the OTLP specification's "JSON Protobuf Encoding" (proto3 JSON mapping
//! with the OTLP deviations) and the tolerances of the reference collector:
//!
//! - field names in lowerCamelCase **and** in the original snake_case; unknown fields are ignored
//!   at every level; `null` means "field absent";
//! - `traceId` / `spanId` / `parentSpanId` (also in links) are hex, either case, of exact length
//!   (32 / 16 digits); `""` means empty bytes; base64 ids are refused;
//! - 64-bit integers as JSON numbers or decimal strings, parsed exactly (never through `f64`);
//! - enums (`kind`, `status.code`) as integers or full enum names (`SPAN_KIND_SERVER`);
//! - `doubleValue` as a number, a numeric string or `"NaN"` / `"Infinity"` / `"-Infinity"`;
//!   `bytesValue` as base64 (standard or URL-safe alphabet, padding optional).
//!
//! The body must be UTF-8 as a whole (checked up front, so also inside ignored fields).
//! A repeated key overwrites the earlier value; in an `AnyValue` the last non-null value field
//! wins.
//!
//! The decoder is hand-written serde visitors deserializing directly from the body (no
//! intermediate `serde_json::Value`), so it costs about what a derived typed decode costs. Any
//! error refuses the whole request and names the JSON path of the offending field. Nesting is
//! bounded by serde_json's recursion limit (128), so hostile depth yields an error, not a stack
//! overflow.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, ArrayValue, EntityRef, InstrumentationScope, KeyValue, KeyValueList, any_value::Value,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::{Event, Link, SpanKind};
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Why an OTLP/JSON trace export body was refused. Every variant means HTTP 400 (bad data, not
/// retryable) for the whole request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonDecodeError {
    /// The body has zero bytes; OTLP/JSON needs at least `{}`.
    #[error("empty body is not a JSON object")]
    EmptyBody,
    /// The body is not UTF-8 (RFC 8259 requires UTF-8 JSON).
    #[error("invalid UTF-8 at byte {offset} (line {line}, column {column}): JSON must be UTF-8")]
    InvalidUtf8 {
        /// Byte offset of the first invalid byte.
        offset: usize,
        /// 1-based line of that byte.
        line: usize,
        /// 1-based column (in bytes) of that byte.
        column: usize,
    },
    /// JSON syntax error, top level not an object, or a field whose value breaks the OTLP/JSON
    /// rules. Displayed as `path: message at line L column C`, for example
    /// `resourceSpans[0].scopeSpans[0].spans[1].traceId: expected 32 hex digits, got 24
    /// characters (base64 is not OTLP/JSON) at line 1 column 180`.
    #[error("{}", render_invalid(.path, .message, *.line, *.column))]
    Invalid {
        /// JSON path of the field with keys spelled as sent, such as
        /// `resource_spans[0].scope_spans[2].spans[1].span_id`; empty at the top level.
        path: String,
        /// What is wrong (without the position).
        message: String,
        /// 1-based line of the error (0 if unknown).
        line: usize,
        /// 1-based column of the error (0 if unknown).
        column: usize,
    },
}

fn render_invalid(path: &str, message: &str, line: usize, column: usize) -> String {
    let mut s = String::with_capacity(path.len() + message.len() + 32);
    if !path.is_empty() {
        s.push_str(path);
        s.push_str(": ");
    }
    s.push_str(message);
    if line > 0 {
        s.push_str(&format!(" at line {line} column {column}"));
    }
    s
}

/// Decodes an OTLP/JSON `ExportTraceServiceRequest` body (OTLP spec, "JSON Protobuf Encoding").
///
/// Accepts `{"resourceSpans":[{"resource":{...},"scopeSpans":[{"scope":{...},"spans":[...]}]}]}`
/// with the tolerances listed in the module documentation; `{}`, `{"resourceSpans":[]}` and
/// `{"resourceSpans":null}` give an empty request. Ids are decoded to bytes but not validated
/// beyond their form: empty or all-zero ids are left for the receiver to reject per span, and
/// `flags` are kept as sent.
///
/// # Errors
/// [`JsonDecodeError::EmptyBody`] for a 0-byte body, [`JsonDecodeError::InvalidUtf8`] for a
/// non-UTF-8 body, and [`JsonDecodeError::Invalid`] (with the JSON path) for a syntax error, a
/// top level that is not an object, nesting deeper than 128, an id that is not hex of the exact
/// length (base64, wrong length, non-hex), an integer that is not an exact integer in range (or is
/// text such as an RFC 3339 time), an unknown or short enum name (`"SERVER"`), bad base64 in
/// `bytesValue`, or a value of the wrong JSON type.
pub fn decode_export_request(body: &[u8]) -> Result<ExportTraceServiceRequest, JsonDecodeError> {
    decode::<Request>(body).map(|r| r.0)
}

/// Decodes a whole body as the message `T` (a top-level `null` gives `T`'s default): the UTF-8
/// check, the error path and the end-of-input check every request decoder shares.
fn decode<T: Message>(body: &[u8]) -> Result<T, JsonDecodeError> {
    if body.is_empty() {
        return Err(JsonDecodeError::EmptyBody);
    }
    let text = std::str::from_utf8(body).map_err(|e| {
        let offset = e.valid_up_to();
        let before = &body[..offset];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = offset
            - before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1)
            + 1;
        JsonDecodeError::InvalidUtf8 {
            offset,
            line,
            column,
        }
    })?;
    PATH.with(|p| p.borrow_mut().clear());
    let mut de = serde_json::Deserializer::from_str(text);
    let result = de
        .deserialize_map(MsgV::<T>(PhantomData))
        .and_then(|r| de.end().map(|()| r));
    match result {
        Ok(message) => Ok(message.unwrap_or_default()),
        Err(e) => Err(invalid(e)),
    }
}

/// What a body nested deeper than serde_json's recursion limit (128, on by default) is told.
pub const RECURSION_MESSAGE: &str = "recursion limit exceeded: JSON nests at most 128 levels \
     (an arrayValue takes 3, so about 40 levels of attribute values); this limit is fixed";

/// Turns a serde_json error plus the path recorded while it propagated into the public error.
fn invalid(e: serde_json::Error) -> JsonDecodeError {
    let (line, column) = (e.line(), e.column());
    let mut message = e.to_string();
    if message.starts_with("recursion limit exceeded") {
        // serde_json's own words do not say where the limit is.
        message = message.replacen("recursion limit exceeded", RECURSION_MESSAGE, 1);
    }
    if line > 0 {
        let suffix = format!(" at line {line} column {column}");
        if message.ends_with(&suffix) {
            message.truncate(message.len() - suffix.len());
        }
    }
    let path = PATH.with(|p| {
        let mut segs = p.borrow_mut();
        let mut path = String::new();
        for seg in segs.drain(..).rev() {
            match seg {
                Seg::Key(k) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(&k);
                }
                Seg::Index(i) => path.push_str(&format!("[{i}]")),
            }
        }
        path
    });
    JsonDecodeError::Invalid {
        path,
        message,
        line,
        column,
    }
}

// ---------------------------------------------------------------------------------------------
// Error path: recorded innermost first while an error propagates up (zero cost on success).

enum Seg {
    Key(String),
    Index(usize),
}

thread_local! {
    static PATH: RefCell<Vec<Seg>> = const { RefCell::new(Vec::new()) };
}

#[cold]
fn push_path(seg: Seg) {
    PATH.with(|p| p.borrow_mut().push(seg));
}

// ---------------------------------------------------------------------------------------------
// Generic machinery: every value is read through a visitor whose output is `Option<T>`
// (`None` for JSON null, i.e. "absent"), fed by `deserialize_any`.

/// Feeds a visitor through `deserialize_any`, so each visitor sees the JSON type as sent.
struct Any<V>(V);

impl<'de, V: Visitor<'de>> DeserializeSeed<'de> for Any<V> {
    type Value = V::Value;
    #[inline]
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        d.deserialize_any(self.0)
    }
}

/// Reads the next map value with `v`; null gives the default.
#[inline]
fn val<'de, A, V, T>(map: &mut A, v: V) -> Result<T, A::Error>
where
    A: MapAccess<'de>,
    V: Visitor<'de, Value = Option<T>>,
    T: Default,
{
    Ok(map.next_value_seed(Any(v))?.unwrap_or_default())
}

/// A protobuf message read from a JSON object, field by field.
trait Message: Default {
    /// What the visitor expects, for type errors ("a Span object").
    const WHAT: &'static str;
    /// Reads the value of `key` (either spelling; unknown keys skipped) into `self`.
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error>;
}

/// Visitor of a message: object → `Some(message)`, null → `None`.
struct MsgV<T>(PhantomData<T>);

impl<'de, T: Message> Visitor<'de> for MsgV<T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(T::WHAT)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut msg = T::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            if let Err(e) = msg.read(&key, &mut map) {
                push_path(Seg::Key(key.into_owned()));
                return Err(e);
            }
        }
        Ok(Some(msg))
    }
}

/// An object key, borrowed from the body unless it had escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;
    #[inline]
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
}

/// Visitor of a repeated field: array of elements read by `V` (null element → default),
/// null → `None` (empty).
struct ListV<V>(V);

impl<'de, V, T> Visitor<'de> for ListV<V>
where
    V: Visitor<'de, Value = Option<T>> + Copy,
    T: Default,
{
    type Value = Option<Vec<T>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of ")?;
        self.0.expecting(f)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        loop {
            match seq.next_element_seed(Any(self.0)) {
                Ok(Some(v)) => out.push(v.unwrap_or_default()),
                Ok(None) => return Ok(Some(out)),
                Err(e) => {
                    push_path(Seg::Index(out.len()));
                    return Err(e);
                }
            }
        }
    }
}

fn msg<'de, T: Message, A: MapAccess<'de>>(map: &mut A) -> Result<Option<T>, A::Error> {
    map.next_value_seed(Any(MsgV::<T>(PhantomData)))
}

fn int<'de, T: Int, A: MapAccess<'de>>(map: &mut A) -> Result<T, A::Error> {
    val(map, IntV(PhantomData))
}

fn list<'de, T: Message, A: MapAccess<'de>>(map: &mut A) -> Result<Vec<T>, A::Error> {
    val(map, ListV(MsgV::<T>(PhantomData)))
}

impl<T> Clone for MsgV<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for MsgV<T> {}

// ---------------------------------------------------------------------------------------------
// Scalars.

/// A string; null → absent.
#[derive(Clone, Copy)]
struct StrV;

impl<'de> Visitor<'de> for StrV {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
}

/// A JSON boolean; null → absent.
#[derive(Clone, Copy)]
struct BoolV;

impl<'de> Visitor<'de> for BoolV {
    type Value = Option<bool>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a boolean")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
}

/// A trace id (16 bytes) or span id (8 bytes) as hex of exact length, either case (OTLP/JSON
/// deviation from proto3's base64). `""` and null → empty bytes.
#[derive(Clone, Copy)]
struct IdV(usize);

impl<'de> Visitor<'de> for IdV {
    type Value = Option<Vec<u8>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a string of {} hex digits", self.0 * 2)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        if v.is_empty() {
            return Ok(None);
        }
        let digits = self.0 * 2;
        if v.len() != digits {
            let hint = match base64_decode(v) {
                Some(b) if b.len() == self.0 => " (base64 is not OTLP/JSON)",
                _ => "",
            };
            let got = v.chars().count();
            return Err(E::custom(format_args!(
                "expected {digits} hex digits, got {got} characters{hint}"
            )));
        }
        let mut out = vec![0u8; self.0];
        if hex::decode_to_slice(v, &mut out).is_err() {
            let (i, c) = v
                .char_indices()
                .find(|(_, c)| !c.is_ascii_hexdigit())
                .unwrap_or((0, '?'));
            return Err(E::custom(format_args!(
                "expected {digits} hex digits, got non-hex character {c:?} at index {i}"
            )));
        }
        Ok(Some(out))
    }
}

/// Integer types of OTLP fields, read through `i128` so that every u64 and i64 is exact.
trait Int: TryFrom<i128> + Copy + Default {
    /// For messages: "an unsigned 64-bit integer".
    const WHAT: &'static str;
}
impl Int for u64 {
    const WHAT: &'static str = "an unsigned 64-bit integer";
}
impl Int for i64 {
    const WHAT: &'static str = "a signed 64-bit integer";
}
impl Int for u32 {
    const WHAT: &'static str = "an unsigned 32-bit integer";
}

/// An integer as a JSON number or a decimal string (proto3 JSON for int64/uint64/fixed64, also
/// accepted for 32-bit fields); exact, range-checked. A float number is accepted only when it is
/// integral and exactly representable (|v| ≤ 2^53). null → absent.
struct IntV<T>(PhantomData<T>);

impl<T> Clone for IntV<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for IntV<T> {}

impl<T: Int> IntV<T> {
    fn fit<E: de::Error>(v: i128, shown: &dyn fmt::Display) -> Result<Option<T>, E> {
        T::try_from(v).map(Some).map_err(|_| {
            E::custom(format_args!(
                "expected {}, got {shown} (out of range)",
                T::WHAT
            ))
        })
    }
}

impl<'de, T: Int> Visitor<'de> for IntV<T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} (JSON number or decimal string)", T::WHAT)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Self::fit(i128::from(v), &v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Self::fit(i128::from(v), &v)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
        if v.fract() == 0.0 && v.abs() <= EXACT {
            Self::fit(v as i128, &v)
        } else {
            Err(E::custom(format_args!(
                "expected {}, got {v} (not an exact integer)",
                T::WHAT
            )))
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        let digits = v.strip_prefix('-').unwrap_or(v);
        if !digits.is_empty()
            && digits.len() <= 39
            && digits.bytes().all(|b| b.is_ascii_digit())
            && let Ok(n) = v.parse::<i128>()
        {
            return Self::fit(n, &format_args!("{v:?}"));
        }
        let hint = if v.contains(':') || v.contains('T') {
            " (times are Unix epoch nanoseconds, not RFC 3339 text)"
        } else {
            ""
        };
        Err(E::custom(format_args!(
            "expected {} (JSON number or decimal string), got {v:?}{hint}",
            T::WHAT
        )))
    }
}

/// An enum as an integer (unknown values kept) or its full proto name (`SPAN_KIND_SERVER`);
/// short (`SERVER`) or unknown names are refused. null → absent.
#[derive(Clone, Copy)]
struct EnumV {
    /// The proto enum's name, for messages.
    name: &'static str,
    /// Full name → value.
    from_name: fn(&str) -> Option<i32>,
    /// One full name, for messages.
    example: &'static str,
}

const SPAN_KIND: EnumV = EnumV {
    name: "SpanKind",
    from_name: |s| SpanKind::from_str_name(s).map(|k| k as i32),
    example: "SPAN_KIND_SERVER",
};

const STATUS_CODE: EnumV = EnumV {
    name: "StatusCode",
    from_name: |s| StatusCode::from_str_name(s).map(|k| k as i32),
    example: "STATUS_CODE_ERROR",
};

impl<'de> Visitor<'de> for EnumV {
    type Value = Option<i32>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "a {} integer or full enum name such as {:?}",
            self.name, self.example
        )
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        i32::try_from(v).map(Some).map_err(|_| {
            E::custom(format_args!(
                "{} value {v} is out of the int32 range",
                self.name
            ))
        })
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        i32::try_from(v).map(Some).map_err(|_| {
            E::custom(format_args!(
                "{} value {v} is out of the int32 range",
                self.name
            ))
        })
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        (self.from_name)(v).map(Some).ok_or_else(|| {
            E::custom(format_args!(
                "unknown {} name {v:?}: expected an integer or a full enum name such as {:?}",
                self.name, self.example
            ))
        })
    }
}

/// A double as a JSON number, a numeric string, or `"NaN"`, `"Infinity"`, `"-Infinity"`.
#[derive(Clone, Copy)]
struct DoubleV;

impl<'de> Visitor<'de> for DoubleV {
    type Value = Option<f64>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number, a numeric string, \"NaN\", \"Infinity\" or \"-Infinity\"")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v as f64))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v as f64))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v {
            "NaN" => Ok(Some(f64::NAN)),
            "Infinity" => Ok(Some(f64::INFINITY)),
            "-Infinity" => Ok(Some(f64::NEG_INFINITY)),
            _ => match v.parse::<f64>() {
                // Rust also parses "inf"/"nan": only finite results count as numeric strings.
                Ok(d) if d.is_finite() => Ok(Some(d)),
                _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
            },
        }
    }
}

/// Bytes as base64 (proto3 JSON): standard or URL-safe alphabet, padding optional.
#[derive(Clone, Copy)]
struct BytesV;

impl<'de> Visitor<'de> for BytesV {
    type Value = Option<Vec<u8>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a base64 string")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        base64_decode(v)
            .map(Some)
            .ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
    }
}

/// Decodes base64 (standard `+/` or URL-safe `-_` alphabet, `=` padding optional but, when
/// present, to a multiple of 4). `None` on any other character or an impossible length.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let data = b
        .strip_suffix(b"==")
        .or_else(|| b.strip_suffix(b"="))
        .unwrap_or(b);
    if data.len() != b.len() && !b.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    let (mut acc, mut n) = (0u32, 0u8);
    for &c in data {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        n += 1;
        if n == 4 {
            out.extend_from_slice(&[(acc >> 16) as u8, (acc >> 8) as u8, acc as u8]);
            (acc, n) = (0, 0);
        }
    }
    match n {
        0 => {}
        2 => out.push((acc >> 4) as u8),
        3 => out.extend_from_slice(&[(acc >> 10) as u8, (acc >> 2) as u8]),
        _ => return None,
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------------
// The messages. Each arm lists the lowerCamelCase name and the original snake_case name.

/// Implements [`Message`] for a type from `key => body` arms; other keys are skipped.
macro_rules! message {
    ($ty:ty, $what:literal, |$m:ident, $map:ident| { $($($key:literal)|+ => $body:expr,)* }) => {
        impl Message for $ty {
            const WHAT: &'static str = $what;
            #[inline]
            fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, $map: &mut A)
                -> Result<(), A::Error> {
                let $m = self;
                match key {
                    $($($key)|+ => $body,)*
                    _ => {
                        $map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(())
            }
        }
    };
}

/// The top level, a local newtype so that it can implement [`Message`] like the others.
#[derive(Default)]
struct Request(ExportTraceServiceRequest);

message!(Request, "an ExportTraceServiceRequest JSON object", |m, map| {
    "resourceSpans" | "resource_spans" => m.0.resource_spans = list(map)?,
});

message!(ResourceSpans, "a ResourceSpans object", |m, map| {
    "resource" => m.resource = msg(map)?,
    "scopeSpans" | "scope_spans" => m.scope_spans = list(map)?,
    "schemaUrl" | "schema_url" => m.schema_url = val(map, StrV)?,
});

message!(Resource, "a Resource object", |m, map| {
    "attributes" => m.attributes = list(map)?,
    "droppedAttributesCount" | "dropped_attributes_count" => m.dropped_attributes_count = int(map)?,
    "entityRefs" | "entity_refs" => m.entity_refs = list(map)?,
});

message!(EntityRef, "an EntityRef object", |m, map| {
    "schemaUrl" | "schema_url" => m.schema_url = val(map, StrV)?,
    "type" => m.r#type = val(map, StrV)?,
    "idKeys" | "id_keys" => m.id_keys = val(map, ListV(StrV))?,
    "descriptionKeys" | "description_keys" => m.description_keys = val(map, ListV(StrV))?,
});

message!(ScopeSpans, "a ScopeSpans object", |m, map| {
    "scope" => m.scope = msg(map)?,
    "spans" => m.spans = list(map)?,
    "schemaUrl" | "schema_url" => m.schema_url = val(map, StrV)?,
});

message!(InstrumentationScope, "an InstrumentationScope object", |m, map| {
    "name" => m.name = val(map, StrV)?,
    "version" => m.version = val(map, StrV)?,
    "attributes" => m.attributes = list(map)?,
    "droppedAttributesCount" | "dropped_attributes_count" => m.dropped_attributes_count = int(map)?,
});

message!(Span, "a Span object", |m, map| {
    "traceId" | "trace_id" => m.trace_id = val(map, IdV(16))?,
    "spanId" | "span_id" => m.span_id = val(map, IdV(8))?,
    "traceState" | "trace_state" => m.trace_state = val(map, StrV)?,
    "parentSpanId" | "parent_span_id" => m.parent_span_id = val(map, IdV(8))?,
    "flags" => m.flags = int(map)?,
    "name" => m.name = val(map, StrV)?,
    "kind" => m.kind = val(map, SPAN_KIND)?,
    "startTimeUnixNano" | "start_time_unix_nano" => m.start_time_unix_nano = int(map)?,
    "endTimeUnixNano" | "end_time_unix_nano" => m.end_time_unix_nano = int(map)?,
    "attributes" => m.attributes = list(map)?,
    "droppedAttributesCount" | "dropped_attributes_count" => m.dropped_attributes_count = int(map)?,
    "events" => m.events = list(map)?,
    "droppedEventsCount" | "dropped_events_count" => m.dropped_events_count = int(map)?,
    "links" => m.links = list(map)?,
    "droppedLinksCount" | "dropped_links_count" => m.dropped_links_count = int(map)?,
    "status" => m.status = msg(map)?,
});

message!(Event, "a Span.Event object", |m, map| {
    "timeUnixNano" | "time_unix_nano" => m.time_unix_nano = int(map)?,
    "name" => m.name = val(map, StrV)?,
    "attributes" => m.attributes = list(map)?,
    "droppedAttributesCount" | "dropped_attributes_count" => m.dropped_attributes_count = int(map)?,
});

message!(Link, "a Span.Link object", |m, map| {
    "traceId" | "trace_id" => m.trace_id = val(map, IdV(16))?,
    "spanId" | "span_id" => m.span_id = val(map, IdV(8))?,
    "traceState" | "trace_state" => m.trace_state = val(map, StrV)?,
    "attributes" => m.attributes = list(map)?,
    "droppedAttributesCount" | "dropped_attributes_count" => m.dropped_attributes_count = int(map)?,
    "flags" => m.flags = int(map)?,
});

message!(Status, "a Status object", |m, map| {
    "message" => m.message = val(map, StrV)?,
    "code" => m.code = val(map, STATUS_CODE)?,
});

message!(KeyValue, "a KeyValue object", |m, map| {
    "key" => m.key = val(map, StrV)?,
    "value" => m.value = msg(map)?,
});

message!(ArrayValue, "an ArrayValue object", |m, map| {
    "values" => m.values = list(map)?,
});

message!(KeyValueList, "a KeyValueList object", |m, map| {
    "values" => m.values = list(map)?,
});

/// Sets a oneof (`AnyValue`'s value, `Metric`'s data) when the field was not null (the last
/// non-null field wins).
#[inline]
fn one_of<T, U>(slot: &mut Option<U>, v: Option<T>, f: fn(T) -> U) {
    if let Some(v) = v {
        *slot = Some(f(v));
    }
}

message!(AnyValue, "an AnyValue object", |m, map| {
    "stringValue" | "string_value" => one_of(&mut m.value, map.next_value_seed(Any(StrV))?, Value::StringValue),
    "boolValue" | "bool_value" => one_of(&mut m.value, map.next_value_seed(Any(BoolV))?, Value::BoolValue),
    "intValue" | "int_value" => one_of(&mut m.value, map.next_value_seed(Any(IntV(PhantomData)))?, Value::IntValue),
    "doubleValue" | "double_value" => one_of(&mut m.value, map.next_value_seed(Any(DoubleV))?, Value::DoubleValue),
    "arrayValue" | "array_value" => one_of(&mut m.value, msg(map)?, Value::ArrayValue),
    "kvlistValue" | "kvlist_value" => one_of(&mut m.value, msg(map)?, Value::KvlistValue),
    "bytesValue" | "bytes_value" => one_of(&mut m.value, map.next_value_seed(Any(BytesV))?, Value::BytesValue),
});

mod signals;
pub use signals::{AnyExport, decode_any_export, decode_logs_request, decode_metrics_request};

#[cfg(test)]
mod tests;
