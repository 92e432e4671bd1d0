//! OTLP → Arrow: a pure function turning an `ExportTraceServiceRequest` (its borrowed views,
//! [`crate::wire`]: read from protobuf bytes, or from a prost message) into rows of the
//! `spans` table ([`dyeline_model::schema`]), resolving the release fields at ingest.
//!
//! Owns: per-span validation (OTLP: a trace id of 16 bytes and a span id of 8 bytes, not all
//! zero; a parent id empty or of 8 bytes), the colour of each resource (domain §1), the decision
//! on each span (domain §2), the traffic kind (domain §3) and the error rule (domain §6.6).
//! Invalid spans are rejected one by one and counted by [`RejectReason`]; the rest of the request
//! is kept (OTLP partial success). Does not own transport, limits or storage.
//!
//! Work is linear in the request: a span's attributes are read in one pass ([`SpanAttrs`]), a
//! decision value is parsed within the W3C baggage limits ([`Decisions::parse`]; spans whose
//! value passed them are counted in [`SpanRows::decisions_truncated`]) and each of the first
//! [`MEMO_MAX`] distinct decision texts of a request is parsed once.

use std::fmt::Write as _;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Int32Builder, Int64Builder, ListBuilder, MapBuilder, RecordBatch,
    StringBuilder, UInt32Builder,
};
use dyeline_model::decision::{Decisions, ReadDecision, read_decision};
use dyeline_model::schema::spans_schema;
use dyeline_model::{
    ColorRules, DecisionSource, SpanId, SpanKey, SpanKind, StatusCode, TraceId, TrafficKind,
};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use crate::wire::{Kv, RequestView, Val};

/// Why one span of an accepted request was rejected (a closed set, used as a metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// Trace id empty, all zero, or not 16 bytes.
    InvalidTraceId,
    /// Span id empty, all zero, or not 8 bytes.
    InvalidSpanId,
    /// Parent span id neither empty nor 8 bytes.
    InvalidParentSpanId,
    /// A start or end time beyond the year 2262 (`i64` nanoseconds).
    InvalidTime,
}

impl RejectReason {
    /// All reasons, for pre-registering metric labels.
    pub const ALL: [RejectReason; 4] = [
        Self::InvalidTraceId,
        Self::InvalidSpanId,
        Self::InvalidParentSpanId,
        Self::InvalidTime,
    ];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidTraceId => "invalid_trace_id",
            Self::InvalidSpanId => "invalid_span_id",
            Self::InvalidParentSpanId => "invalid_parent_span_id",
            Self::InvalidTime => "invalid_time",
        }
    }
}

/// Spans of one request, converted: `batch` rows and `keys` are parallel (row i has key i).
#[derive(Debug, Clone)]
pub struct SpanRows {
    /// Rows in the `spans` schema; `None` when no span was accepted.
    pub batch: Option<RecordBatch>,
    /// The identity of each row.
    pub keys: Vec<SpanKey>,
    /// Rejected spans by reason.
    pub rejected: Vec<(RejectReason, u64)>,
    /// The first rejection, phrased for the OTLP `partial_success.error_message`.
    pub first_error: Option<String>,
    /// Spans whose decision value went on past the limits of
    /// [`dyeline_model::decision::MAX_PAIRS`] pairs or
    /// [`dyeline_model::decision::MAX_VALUE_BYTES`] bytes: their decisions were read up to the
    /// limits, the rest skipped ([`Decisions::truncated`]).
    pub decisions_truncated: u64,
}

impl SpanRows {
    /// Number of spans rejected.
    pub fn rejected_count(&self) -> u64 {
        self.rejected.iter().map(|(_, n)| n).sum()
    }
}

/// Settings of the conversion.
#[derive(Debug, Clone, Default)]
pub struct ConvertOptions {
    /// The colour rule chain (domain §1).
    pub color_rules: Arc<ColorRules>,
    /// Where decisions are read from, in order (domain §2); empty means the default order.
    pub decision_sources: Vec<DecisionSource>,
}

/// Resource attribute keys promoted to columns (left out of `resource_attributes`).
const PROMOTED_RESOURCE: [&str; 4] = [
    "service.name",
    "service.version",
    "service.instance.id",
    "host.name",
];

fn str_value<'a>(v: &Val<'a>) -> Option<&'a str> {
    match v {
        Val::Str(s) => Some(s),
        _ => None,
    }
}

fn int_value(v: &Val<'_>) -> Option<i64> {
    match v {
        Val::Int(i) => Some(*i),
        Val::Str(s) => s.trim().parse().ok(),
        Val::Double(d) if d.fract() == 0.0 && d.abs() < 1e15 => Some(*d as i64),
        _ => None,
    }
}

/// The string values of an attribute as [`read_decision`] takes them: one for a string, the
/// string items of an array, none for another type or no value.
fn string_values<'a>(v: Option<&Val<'a>>) -> Vec<&'a str> {
    match v {
        Some(Val::Str(s)) => vec![*s],
        Some(Val::Array(a)) => a.iter().filter_map(str_value).collect(),
        _ => Vec::new(),
    }
}

/// The value of the first attribute named `key` ([`Val::Empty`] when it has none).
fn find<'v, 'a>(attrs: &'v [Kv<'a>], key: &str) -> Option<&'v Val<'a>> {
    attrs.iter().find(|kv| kv.key == key).map(|kv| &kv.value)
}

fn find_str<'a>(attrs: &[Kv<'a>], key: &str) -> Option<&'a str> {
    find(attrs, key).and_then(str_value)
}

/// True for the span attribute keys promoted to columns (left out of `attributes`).
fn promoted_span(key: &str) -> bool {
    matches!(
        key,
        "messaging.system"
            | "messaging.consumer.group.name"
            | "messaging.rocketmq.client_group"
            | "job.name"
            | "http.response.status_code"
            | "http.status_code"
            | "rpc.grpc.status_code"
    )
}

/// The slot of a decision source in [`SpanAttrs::decision`].
fn source_slot(source: DecisionSource) -> usize {
    match source {
        DecisionSource::Attribute => 0,
        DecisionSource::BaggageAttribute => 1,
        DecisionSource::BaggageHeader => 2,
    }
}

/// One attribute as a lookup by key finds it: `None` when the key is absent, else its first
/// occurrence's value ([`Val::Empty`] when it has none).
type Slot<'v, 'a> = Option<&'v Val<'a>>;

/// The span attributes that conversion reads, found in one pass over the span's attributes
/// instead of one scan per key. Each slot holds the key's first occurrence, as [`find`] would.
#[derive(Default)]
struct SpanAttrs<'v, 'a> {
    job_name: Slot<'v, 'a>,
    http_status: Slot<'v, 'a>,
    http_status_legacy: Slot<'v, 'a>,
    grpc_status: Slot<'v, 'a>,
    messaging_system: Slot<'v, 'a>,
    consumer_group: Slot<'v, 'a>,
    rocketmq_group: Slot<'v, 'a>,
    /// Indexed by [`source_slot`].
    decision: [Slot<'v, 'a>; 3],
}

impl<'v, 'a> SpanAttrs<'v, 'a> {
    fn of(attrs: &'v [Kv<'a>]) -> Self {
        let mut s = Self::default();
        for kv in attrs {
            let slot = match kv.key {
                "job.name" => &mut s.job_name,
                "http.response.status_code" => &mut s.http_status,
                "http.status_code" => &mut s.http_status_legacy,
                "rpc.grpc.status_code" => &mut s.grpc_status,
                "messaging.system" => &mut s.messaging_system,
                "messaging.consumer.group.name" => &mut s.consumer_group,
                "messaging.rocketmq.client_group" => &mut s.rocketmq_group,
                "x-deploy-channel-type" => &mut s.decision[0],
                "baggage.x-deploy-channel-type" => &mut s.decision[1],
                "http.request.header.baggage" => &mut s.decision[2],
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(&kv.value);
            }
        }
        s
    }

    fn get_str(slot: Slot<'v, 'a>) -> Option<&'a str> {
        slot.and_then(str_value)
    }
}

/// Most decisions parsed in one request are kept for reuse.
const MEMO_MAX: usize = 16;

/// Decision texts already parsed in this request: the spans of a trace, and of many traces,
/// repeat a handful of texts, so each is parsed once.
#[derive(Default)]
struct DecisionMemo {
    entries: Vec<(String, Decisions)>,
}

/// Where a span's decision is: parsed in the memo (by index), or read the general way.
enum Found<'a> {
    Memo(DecisionSource, &'a str, usize),
    Read(ReadDecision),
}

impl DecisionMemo {
    /// The index of `text`'s parse, parsing it on a miss; `None` when the memo is full and
    /// `text` is new (the caller then parses it itself).
    fn index(&mut self, text: &str) -> Option<usize> {
        if let Some(i) = self.entries.iter().position(|(t, _)| t == text) {
            return Some(i);
        }
        if self.entries.len() >= MEMO_MAX {
            return None;
        }
        self.entries.push((text.to_owned(), Decisions::parse(text)));
        Some(self.entries.len() - 1)
    }

    /// The decision on a span, exactly as [`read_decision`] finds it: the first source of
    /// `sources` that is present. A single string value of a span attribute source (the usual
    /// case) is parsed through the memo; other shapes go through [`read_decision`].
    fn find<'a>(
        &mut self,
        sources: &[DecisionSource],
        attrs: &SpanAttrs<'_, 'a>,
    ) -> Option<Found<'a>> {
        for &source in sources {
            let Some(value) = attrs.decision[source_slot(source)] else {
                continue;
            };
            if source != DecisionSource::BaggageHeader
                && let Val::Str(text) = value
            {
                match self.index(text) {
                    Some(i) if self.entries[i].1.is_blank() => continue,
                    Some(i) => return Some(Found::Memo(source, text, i)),
                    None => {}
                }
            }
            let read = read_decision(&[source], |_| Some(string_values(Some(value))));
            if let Some(read) = read {
                return Some(Found::Read(read));
            }
        }
        None
    }

    /// Source, raw text and decisions of a [`Found`].
    fn resolve<'s>(&'s self, found: &'s Found<'_>) -> (DecisionSource, &'s str, &'s Decisions) {
        match found {
            Found::Memo(source, text, i) => (*source, text, &self.entries[*i].1),
            Found::Read(r) => (r.source, r.text.as_str(), &r.decisions),
        }
    }
}

/// Writes an AnyValue as JSON: strings, numbers, booleans, arrays, objects (kvlist), and bytes
/// as lower-case hex. It recurses once per level of nesting, which decoding bounds: the wire
/// reader reads [`crate::wire::MAX_DEPTH`] levels, prost [`crate::wire::MAX_ARRAY_DEPTH`], the
/// OTLP/JSON decoder about 40 ([`crate::json::RECURSION_MESSAGE`]); deeper is refused.
fn write_json_value(out: &mut String, v: &Val<'_>) {
    match v {
        Val::Empty => out.push_str("null"),
        Val::Str(s) => write_json_str(out, s),
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Int(i) => out.push_str(itoa::Buffer::new().format(*i)),
        Val::Double(d) => {
            if d.is_finite() {
                let _ = write!(out, "{d:?}");
            } else {
                write_json_str(out, &d.to_string());
            }
        }
        Val::Bytes(b) => write_json_str(out, &hex::encode(b)),
        Val::Array(a) => {
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_value(out, item);
            }
            out.push(']');
        }
        Val::Kvlist(kv) => write_json_object(out, kv, |_| false),
    }
}

fn write_json_object(out: &mut String, attrs: &[Kv<'_>], skip: impl Fn(&str) -> bool) {
    out.push('{');
    let mut first = true;
    for kv in attrs {
        if skip(kv.key) {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        write_json_str(out, kv.key);
        out.push(':');
        write_json_value(out, &kv.value);
    }
    out.push('}');
}

/// Writes `s` as a JSON string (RFC 8259 escaping: quote, backslash, control characters).
/// Text that needs no escape (nearly all) is copied whole.
fn write_json_str(out: &mut String, s: &str) {
    out.push('"');
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        write_escaped(out, s);
    } else {
        out.push_str(s);
    }
    out.push('"');
}

fn write_escaped(out: &mut String, s: &str) {
    let mut plain_from = 0;
    for (i, c) in s.char_indices() {
        let esc = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            '\u{8}' => "\\b",
            '\u{c}' => "\\f",
            c if (c as u32) < 0x20 => "",
            _ => continue,
        };
        out.push_str(&s[plain_from..i]);
        if esc.is_empty() {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push_str(esc);
        }
        plain_from = i + c.len_utf8();
    }
    out.push_str(&s[plain_from..]);
}

/// Lower-case hex of `bytes` (at most 16) in `buf`, without allocating.
fn hex_str<'a>(bytes: &[u8], buf: &'a mut [u8; 32]) -> &'a str {
    let out = &mut buf[..bytes.len() * 2];
    // Cannot fail: the output slice is exactly twice the input.
    let _ = hex::encode_to_slice(bytes, out);
    std::str::from_utf8(out).unwrap_or_default()
}

struct Builders {
    trace_id: StringBuilder,
    span_id: StringBuilder,
    parent_span_id: StringBuilder,
    trace_state: StringBuilder,
    name: StringBuilder,
    span_kind: StringBuilder,
    traffic_kind: StringBuilder,
    start: Int64Builder,
    end: Int64Builder,
    duration: Int64Builder,
    status_code: StringBuilder,
    status_message: StringBuilder,
    is_error: BooleanBuilder,
    service_name: StringBuilder,
    service_version: StringBuilder,
    instance_id: StringBuilder,
    host_name: StringBuilder,
    color: StringBuilder,
    color_rule: StringBuilder,
    decisions: MapBuilder<StringBuilder, StringBuilder>,
    decision_source: StringBuilder,
    decision_text: StringBuilder,
    malformed_pairs: UInt32Builder,
    conflicting: ListBuilder<StringBuilder>,
    messaging_system: StringBuilder,
    consumer_group: StringBuilder,
    job_name: StringBuilder,
    http_status_code: Int32Builder,
    rpc_grpc_status_code: Int32Builder,
    scope_name: StringBuilder,
    scope_version: StringBuilder,
    resource_attributes: StringBuilder,
    attributes: StringBuilder,
    events: StringBuilder,
}

impl Builders {
    fn new(cap: usize) -> Self {
        let s = || StringBuilder::with_capacity(cap, cap * 8);
        let schema = spans_schema();
        let (key_field, value_field) = match schema
            .field_with_name(dyeline_model::schema::col::DECISIONS)
            .map(|f| f.data_type().clone())
        {
            Ok(arrow::datatypes::DataType::Map(entries, _)) => match entries.data_type() {
                arrow::datatypes::DataType::Struct(fields) => {
                    (fields[0].clone(), fields[1].clone())
                }
                _ => unreachable!("map entries are a struct"),
            },
            _ => unreachable!("decisions is a map"),
        };
        let list_item = match schema
            .field_with_name(dyeline_model::schema::col::CONFLICTING_CHANNELS)
            .map(|f| f.data_type().clone())
        {
            Ok(arrow::datatypes::DataType::List(item)) => item,
            _ => unreachable!("conflicting_channels is a list"),
        };
        Self {
            trace_id: StringBuilder::with_capacity(cap, cap * 32),
            span_id: StringBuilder::with_capacity(cap, cap * 16),
            parent_span_id: StringBuilder::with_capacity(cap, cap * 16),
            trace_state: s(),
            name: s(),
            span_kind: s(),
            traffic_kind: s(),
            start: Int64Builder::with_capacity(cap),
            end: Int64Builder::with_capacity(cap),
            duration: Int64Builder::with_capacity(cap),
            status_code: s(),
            status_message: s(),
            is_error: BooleanBuilder::with_capacity(cap),
            service_name: s(),
            service_version: s(),
            instance_id: s(),
            host_name: s(),
            color: s(),
            color_rule: s(),
            decisions: MapBuilder::new(None, StringBuilder::new(), StringBuilder::new())
                .with_keys_field(key_field)
                .with_values_field(value_field),
            decision_source: s(),
            decision_text: s(),
            malformed_pairs: UInt32Builder::with_capacity(cap),
            conflicting: ListBuilder::new(StringBuilder::new()).with_field(list_item),
            messaging_system: s(),
            consumer_group: s(),
            job_name: s(),
            http_status_code: Int32Builder::with_capacity(cap),
            rpc_grpc_status_code: Int32Builder::with_capacity(cap),
            scope_name: s(),
            scope_version: s(),
            resource_attributes: s(),
            attributes: s(),
            events: s(),
        }
    }

    fn finish(mut self) -> Result<RecordBatch, arrow::error::ArrowError> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.trace_id.finish()),
            Arc::new(self.span_id.finish()),
            Arc::new(self.parent_span_id.finish()),
            Arc::new(self.trace_state.finish()),
            Arc::new(self.name.finish()),
            Arc::new(self.span_kind.finish()),
            Arc::new(self.traffic_kind.finish()),
            Arc::new(self.start.finish()),
            Arc::new(self.end.finish()),
            Arc::new(self.duration.finish()),
            Arc::new(self.status_code.finish()),
            Arc::new(self.status_message.finish()),
            Arc::new(self.is_error.finish()),
            Arc::new(self.service_name.finish()),
            Arc::new(self.service_version.finish()),
            Arc::new(self.instance_id.finish()),
            Arc::new(self.host_name.finish()),
            Arc::new(self.color.finish()),
            Arc::new(self.color_rule.finish()),
            Arc::new(self.decisions.finish()),
            Arc::new(self.decision_source.finish()),
            Arc::new(self.decision_text.finish()),
            Arc::new(self.malformed_pairs.finish()),
            Arc::new(self.conflicting.finish()),
            Arc::new(self.messaging_system.finish()),
            Arc::new(self.consumer_group.finish()),
            Arc::new(self.job_name.finish()),
            Arc::new(self.http_status_code.finish()),
            Arc::new(self.rpc_grpc_status_code.finish()),
            Arc::new(self.scope_name.finish()),
            Arc::new(self.scope_version.finish()),
            Arc::new(self.resource_attributes.finish()),
            Arc::new(self.attributes.finish()),
            Arc::new(self.events.finish()),
        ];
        RecordBatch::try_new(spans_schema(), columns)
    }
}

/// Per-resource values, computed once and repeated on each of its spans.
struct ResourceInfo {
    service_name: String,
    service_version: Option<String>,
    instance_id: String,
    host_name: Option<String>,
    color: &'static str,
    color_rule: String,
    attributes_json: String,
}

/// The value of `service.name` when the resource has none (the SDKs' default prefix).
pub const UNKNOWN_SERVICE: &str = "unknown_service";
/// The value of `instance_id` when the resource names no instance.
pub const UNKNOWN_INSTANCE: &str = "unknown_instance";

fn resource_info(attrs: &[Kv<'_>], rules: &ColorRules) -> ResourceInfo {
    let host_name = find_str(attrs, "host.name").map(str::to_owned);
    let instance_id = ["service.instance.id", "host.name", "k8s.pod.name"]
        .iter()
        .find_map(|k| find_str(attrs, k).filter(|s| !s.is_empty()))
        .unwrap_or(UNKNOWN_INSTANCE)
        .to_owned();
    let resolved = rules.resolve(|k| find_str(attrs, k));
    let mut attributes_json = String::new();
    write_json_object(&mut attributes_json, attrs, |k| {
        PROMOTED_RESOURCE.contains(&k)
    });
    ResourceInfo {
        service_name: find_str(attrs, "service.name")
            .filter(|s| !s.is_empty())
            .unwrap_or(UNKNOWN_SERVICE)
            .to_owned(),
        service_version: find_str(attrs, "service.version").map(str::to_owned),
        instance_id,
        host_name,
        color: resolved.color.as_str(),
        color_rule: resolved.rule.to_owned(),
        attributes_json,
    }
}

fn time(v: u64) -> Option<i64> {
    i64::try_from(v).ok()
}

/// Converts one decoded request (the OTLP/JSON path). Never fails on span content: invalid
/// spans are rejected one by one.
///
/// # Errors
/// Only an internal Arrow error (a schema mismatch, a bug) is returned.
pub fn convert_request(
    request: &ExportTraceServiceRequest,
    options: &ConvertOptions,
) -> Result<SpanRows, arrow::error::ArrowError> {
    convert_view(&RequestView::from_prost(request), options)
}

/// Converts one request's views ([`crate::wire`]); what [`convert_request`] does.
///
/// # Errors
/// Only an internal Arrow error (a schema mismatch, a bug) is returned.
pub fn convert_view(
    request: &RequestView<'_>,
    options: &ConvertOptions,
) -> Result<SpanRows, arrow::error::ArrowError> {
    let total: usize = request
        .resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .map(|s| s.spans.len())
        .sum();
    let mut b = Builders::new(total);
    let mut keys = Vec::with_capacity(total);
    let mut rejected: Vec<(RejectReason, u64)> = Vec::new();
    let mut first_error: Option<String> = None;
    let mut reject = |reason: RejectReason, msg: String| {
        match rejected.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => rejected.push((reason, 1)),
        }
        first_error.get_or_insert(msg);
    };
    let sources: &[DecisionSource] = if options.decision_sources.is_empty() {
        &DecisionSource::DEFAULT_ORDER
    } else {
        &options.decision_sources
    };
    let mut json_buf = String::new();
    let mut memo = DecisionMemo::default();
    let mut decisions_truncated = 0u64;
    for (ri, rs) in request.resource_spans.iter().enumerate() {
        let res = resource_info(&rs.resource_attributes, &options.color_rules);
        for (si, ss) in rs.scope_spans.iter().enumerate() {
            let scope = ss.scope.as_ref();
            for (pi, span) in ss.spans.iter().enumerate() {
                let at = || format!("resource_spans[{ri}].scope_spans[{si}].spans[{pi}]");
                let trace_id = match TraceId::from_bytes(span.trace_id) {
                    Ok(t) => t,
                    Err(e) => {
                        reject(
                            RejectReason::InvalidTraceId,
                            format!("{}: trace_id: {e}", at()),
                        );
                        continue;
                    }
                };
                let span_id = match SpanId::from_bytes(span.span_id) {
                    Ok(s) => s,
                    Err(e) => {
                        reject(
                            RejectReason::InvalidSpanId,
                            format!("{}: span_id: {e}", at()),
                        );
                        continue;
                    }
                };
                let parent = if span.parent_span_id.is_empty() {
                    None
                } else {
                    match SpanId::from_bytes(span.parent_span_id) {
                        Ok(p) => Some(p),
                        // An all-zero parent is how some SDKs write "no parent".
                        Err(dyeline_model::IdError::Zero) => None,
                        Err(e) => {
                            reject(
                                RejectReason::InvalidParentSpanId,
                                format!("{}: parent_span_id: {e}", at()),
                            );
                            continue;
                        }
                    }
                };
                let (Some(start), Some(end)) = (
                    time(span.start_time_unix_nano),
                    time(span.end_time_unix_nano),
                ) else {
                    reject(
                        RejectReason::InvalidTime,
                        format!("{}: time beyond the year 2262", at()),
                    );
                    continue;
                };
                keys.push(SpanKey { trace_id, span_id });
                let mut hex_buf = [0u8; 32];
                b.trace_id
                    .append_value(hex_str(&trace_id.to_bytes(), &mut hex_buf));
                b.span_id
                    .append_value(hex_str(&span_id.to_bytes(), &mut hex_buf));
                match parent {
                    Some(p) => b
                        .parent_span_id
                        .append_value(hex_str(&p.to_bytes(), &mut hex_buf)),
                    None => b.parent_span_id.append_null(),
                }
                b.trace_state
                    .append_option(Some(span.trace_state).filter(|s| !s.is_empty()));
                b.name.append_value(span.name);
                let kind = SpanKind::from_i32(span.kind).unwrap_or(SpanKind::Unspecified);
                b.span_kind.append_value(kind.as_str());
                let attrs = &span.attributes;
                let found = SpanAttrs::of(attrs);
                let job_name = SpanAttrs::get_str(found.job_name);
                let traffic = TrafficKind::classify(kind, parent.is_some(), job_name.is_some());
                b.traffic_kind
                    .append_option(traffic.map(TrafficKind::as_str));
                b.start.append_value(start);
                b.end.append_value(end);
                b.duration.append_value(end.saturating_sub(start).max(0));
                let status = span.status.as_ref();
                let code = status
                    .and_then(|s| StatusCode::from_i32(s.code))
                    .unwrap_or(StatusCode::Unset);
                b.status_code.append_value(code.as_str());
                b.status_message
                    .append_option(status.map(|s| s.message).filter(|m| !m.is_empty()));
                // A current key without a value falls back to the legacy one.
                let http_status = found
                    .http_status
                    .filter(|v| !matches!(v, Val::Empty))
                    .or(found.http_status_legacy)
                    .and_then(int_value)
                    .and_then(|v| i32::try_from(v).ok());
                let grpc_status = found
                    .grpc_status
                    .and_then(int_value)
                    .and_then(|v| i32::try_from(v).ok());
                b.http_status_code.append_option(http_status);
                b.rpc_grpc_status_code.append_option(grpc_status);
                b.is_error.append_value(
                    code == StatusCode::Error
                        || http_status.is_some_and(|c| c >= 500)
                        || grpc_status.is_some_and(|c| c != 0),
                );
                b.service_name.append_value(&res.service_name);
                b.service_version
                    .append_option(res.service_version.as_deref());
                b.instance_id.append_value(&res.instance_id);
                b.host_name.append_option(res.host_name.as_deref());
                b.color.append_value(res.color);
                b.color_rule.append_value(&res.color_rule);
                let decision = memo.find(sources, &found);
                let decision = decision.as_ref().map(|f| memo.resolve(f));
                match decision {
                    Some((source, text, decisions)) => {
                        decisions_truncated += u64::from(decisions.truncated());
                        for (channel, color) in decisions.iter() {
                            b.decisions.keys().append_value(channel);
                            b.decisions.values().append_value(color.as_str());
                        }
                        b.decisions.append(true)?;
                        b.decision_source.append_value(source.as_str());
                        b.decision_text.append_value(text);
                        b.malformed_pairs.append_value(decisions.malformed_pairs());
                        for c in decisions.conflicting() {
                            b.conflicting.values().append_value(c);
                        }
                        b.conflicting.append(true);
                    }
                    None => {
                        b.decisions.append(false)?;
                        b.decision_source.append_null();
                        b.decision_text.append_null();
                        b.malformed_pairs.append_value(0);
                        b.conflicting.append(false);
                    }
                }
                b.messaging_system
                    .append_option(SpanAttrs::get_str(found.messaging_system));
                b.consumer_group.append_option(
                    SpanAttrs::get_str(found.consumer_group)
                        .or_else(|| SpanAttrs::get_str(found.rocketmq_group)),
                );
                b.job_name.append_option(job_name);
                b.scope_name
                    .append_option(scope.map(|s| s.name).filter(|s| !s.is_empty()));
                b.scope_version
                    .append_option(scope.map(|s| s.version).filter(|s| !s.is_empty()));
                b.resource_attributes.append_value(&res.attributes_json);
                json_buf.clear();
                let source = decision.map(|(source, _, _)| source.as_str());
                write_json_object(&mut json_buf, attrs, |k| {
                    promoted_span(k) || source == Some(k)
                });
                b.attributes.append_value(&json_buf);
                if span.events.is_empty() {
                    b.events.append_null();
                } else {
                    json_buf.clear();
                    json_buf.push('[');
                    for (i, ev) in span.events.iter().enumerate() {
                        if i > 0 {
                            json_buf.push(',');
                        }
                        json_buf.push_str("{\"time_unix_nano\":");
                        json_buf.push_str(itoa::Buffer::new().format(ev.time_unix_nano));
                        json_buf.push_str(",\"name\":");
                        write_json_str(&mut json_buf, ev.name);
                        json_buf.push_str(",\"attributes\":");
                        write_json_object(&mut json_buf, &ev.attributes, |_| false);
                        json_buf.push('}');
                    }
                    json_buf.push(']');
                    b.events.append_value(&json_buf);
                }
            }
        }
    }
    let batch = if keys.is_empty() {
        None
    } else {
        Some(b.finish()?)
    };
    Ok(SpanRows {
        batch,
        keys,
        rejected,
        first_error,
        decisions_truncated,
    })
}

#[cfg(test)]
mod tests;
