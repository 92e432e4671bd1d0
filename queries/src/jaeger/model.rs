//! The JSON of Jaeger's query service (the "UI model", Jaeger `model/json/model.go`, and
//! `cmd/query/app/http_handler.go`'s envelope), as Grafana's Jaeger data source and the Jaeger
//! UI read it. Owns the field names and types only; filling them is [`super::convert`]'s.

use std::collections::BTreeMap;

use serde::Serialize;

/// Every answer: `{"data", "total", "limit", "offset", "errors"}` (`errors` null on success).
#[derive(Debug, Serialize)]
pub struct Envelope<T: Serialize> {
    /// The answer (null on an error).
    pub data: Option<T>,
    /// Items in `data` (0 for an error).
    pub total: usize,
    /// Always 0 (Jaeger's query service does not page).
    pub limit: usize,
    /// Always 0.
    pub offset: usize,
    /// What went wrong, or null.
    pub errors: Option<Vec<JaegerError>>,
}

impl<T: Serialize> Envelope<T> {
    /// A success carrying `data`, of `total` items.
    pub fn ok(data: T, total: usize) -> Self {
        Self {
            data: Some(data),
            total,
            limit: 0,
            offset: 0,
            errors: None,
        }
    }
}

/// One error of an answer: `{"code", "msg"}`, with the trace id when it concerns one.
#[derive(Clone, Debug, Serialize)]
pub struct JaegerError {
    /// The HTTP status.
    pub code: u16,
    /// What went wrong.
    pub msg: String,
    /// The trace it concerns.
    #[serde(rename = "traceID", skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

/// One operation of `GET /api/operations`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Operation {
    /// Span name.
    pub name: String,
    /// `server`, `client`, `producer`, `consumer`, `internal`, or empty (unspecified).
    #[serde(rename = "spanKind")]
    pub span_kind: String,
}

/// One edge of `GET /api/dependencies`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct DependencyLink {
    /// The calling app.
    pub parent: String,
    /// The called app.
    pub child: String,
    /// Spans of `child` whose parent span is of `parent`, in the window.
    #[serde(rename = "callCount")]
    pub call_count: u64,
}

/// A tag: `{"key", "type", "value"}`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Tag {
    /// The attribute key.
    pub key: String,
    /// `string`, `bool`, `int64` or `float64`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The value, of that type.
    pub value: serde_json::Value,
}

impl Tag {
    /// A `string` tag.
    pub fn string(key: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            kind: "string",
            value: serde_json::Value::String(value.into()),
        }
    }

    /// A `bool` tag.
    pub fn bool(key: impl Into<String>, value: bool) -> Self {
        Self {
            key: key.into(),
            kind: "bool",
            value: serde_json::Value::Bool(value),
        }
    }

    /// An `int64` tag.
    pub fn int(key: impl Into<String>, value: i64) -> Self {
        Self {
            key: key.into(),
            kind: "int64",
            value: serde_json::Value::from(value),
        }
    }

    /// A tag of an attribute value kept as JSON: strings, bools, integers and floats as
    /// themselves, arrays and objects as their JSON text (a `string`), null as an empty string.
    pub fn of_json(key: impl Into<String>, v: &serde_json::Value) -> Self {
        use serde_json::Value as V;
        match v {
            V::String(s) => Self::string(key, s.as_str()),
            V::Bool(b) => Self::bool(key, *b),
            V::Number(n) => match n.as_i64() {
                Some(i) => Self::int(key, i),
                None => Self {
                    key: key.into(),
                    kind: "float64",
                    value: v.clone(),
                },
            },
            V::Null => Self::string(key, ""),
            V::Array(_) | V::Object(_) => Self::string(key, v.to_string()),
        }
    }
}

/// A reference: `{"refType", "traceID", "spanID"}`.
#[derive(Clone, Debug, Serialize)]
pub struct Reference {
    /// `CHILD_OF` (the parent) or `FOLLOWS_FROM` (a span link).
    #[serde(rename = "refType")]
    pub ref_type: &'static str,
    /// Trace id of the span referred to.
    #[serde(rename = "traceID")]
    pub trace_id: String,
    /// Its span id.
    #[serde(rename = "spanID")]
    pub span_id: String,
}

/// A log (an OpenTelemetry span event): `{"timestamp" (µs), "fields"}`.
#[derive(Clone, Debug, Serialize)]
pub struct Log {
    /// Unix µs.
    pub timestamp: i64,
    /// `event` (the event's name), then its attributes.
    pub fields: Vec<Tag>,
}

/// A span of a trace.
#[derive(Clone, Debug, Serialize)]
pub struct Span {
    /// Trace id, 32 lower-case hex digits.
    #[serde(rename = "traceID")]
    pub trace_id: String,
    /// Span id, 16 lower-case hex digits.
    #[serde(rename = "spanID")]
    pub span_id: String,
    /// Span name.
    #[serde(rename = "operationName")]
    pub operation_name: String,
    /// The parent (`CHILD_OF`), then the links (`FOLLOWS_FROM`).
    pub references: Vec<Reference>,
    /// Start, Unix µs.
    #[serde(rename = "startTime")]
    pub start_time: i64,
    /// Duration, µs.
    pub duration: i64,
    /// The span's tags (see [`super::convert`]).
    pub tags: Vec<Tag>,
    /// Its events.
    pub logs: Vec<Log>,
    /// Key of its process in the trace's `processes`.
    #[serde(rename = "processID")]
    pub process_id: String,
    /// Always null.
    pub warnings: Option<Vec<String>>,
    /// 1: sampled (every stored span was).
    pub flags: u32,
}

/// A process (an OpenTelemetry resource): `{"serviceName", "tags"}`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Process {
    /// `service.name`.
    #[serde(rename = "serviceName")]
    pub service_name: String,
    /// The instance, host, version and other resource attributes.
    pub tags: Vec<Tag>,
}

/// A trace: `{"traceID", "spans", "processes", "warnings"}`.
#[derive(Clone, Debug, Serialize)]
pub struct Trace {
    /// Trace id, 32 lower-case hex digits.
    #[serde(rename = "traceID")]
    pub trace_id: String,
    /// Its spans, by start then span id.
    pub spans: Vec<Span>,
    /// Its processes by key (`p1`, `p2`, … in order of first use).
    pub processes: BTreeMap<String, Process>,
    /// Always null.
    pub warnings: Option<Vec<String>>,
}
