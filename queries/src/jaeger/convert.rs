//! Stored span rows → Jaeger traces ([`super::model`]): one process per distinct resource
//! (app, instance, host, version, other resource attributes), the parent as a `CHILD_OF`
//! reference and span links as `FOLLOWS_FROM`, times in µs, span events as logs, and the tags:
//! `span.kind`, `otel.status_code` / `otel.status_description`, `error=true` on error spans
//! (domain §6.6), Dyeline's own (`dyeline.color`, one `dyeline.decision.<channel>` per
//! decision in the span's baggage, `dyeline.lane`, `dyeline.lane_tag`,
//! `dyeline.traffic_kind`), the attributes the store promoted to columns under their
//! OpenTelemetry keys, then every other span attribute the store keeps.

use std::collections::{BTreeMap, HashMap};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Int64Type};

use super::model::{Log, Process, Reference, Span, Tag, Trace};
use super::params::jaeger_kind;
use crate::span_detail;
use crate::sql::SqlError;

/// The columns [`traces`] reads, for the SELECT.
pub const COLUMNS: &str = "trace_id, span_id, parent_span_id, name, span_kind, traffic_kind, \
     start_time_unix_nano, duration_ns, status_code, status_message, is_error, service_name, \
     service_version, deployment_environment, instance_id, host_name, color, lane, lane_tag, \
     decisions, \
     messaging_system, consumer_group, job_name, http_status_code, rpc_grpc_status_code, \
     resource_attributes, attributes, events, links";

fn internal(e: impl std::fmt::Display) -> SqlError {
    SqlError::Internal(e.to_string())
}

/// A column of `b` cast to `to` (dictionary-encoded or narrower columns are cast).
fn column(b: &RecordBatch, name: &str, to: &DataType) -> Result<ArrayRef, SqlError> {
    let c = b
        .column_by_name(name)
        .ok_or_else(|| internal(format!("no column {name}")))?;
    if c.data_type() == to {
        Ok(c.clone())
    } else {
        arrow::compute::cast(c, to).map_err(internal)
    }
}

/// The string columns of [`COLUMNS`], in this order.
const TEXT: [&str; 22] = [
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "span_kind",
    "traffic_kind",
    "status_code",
    "status_message",
    "service_name",
    "service_version",
    "deployment_environment",
    "instance_id",
    "host_name",
    "color",
    "lane",
    "lane_tag",
    "messaging_system",
    "consumer_group",
    "job_name",
    "resource_attributes",
    "attributes",
    "events",
];

/// One stored span, as read.
struct Row {
    text: [Option<String>; 22],
    links: Option<String>,
    start: i64,
    duration: i64,
    is_error: bool,
    http_status: Option<i64>,
    grpc_status: Option<i64>,
    decisions: BTreeMap<String, String>,
}

impl Row {
    fn get(&self, name: &str) -> Option<&str> {
        let i = TEXT.iter().position(|n| *n == name)?;
        self.text[i].as_deref()
    }
}

fn rows_of(b: &RecordBatch, out: &mut Vec<Row>) -> Result<(), SqlError> {
    let texts: Vec<ArrayRef> = TEXT
        .iter()
        .map(|n| column(b, n, &DataType::Utf8))
        .collect::<Result<_, _>>()?;
    let texts: Vec<&StringArray> = texts.iter().map(|c| c.as_string::<i32>()).collect();
    let links = column(b, "links", &DataType::Utf8)?;
    let links = links.as_string::<i32>();
    let int = |n: &str| column(b, n, &DataType::Int64);
    let (start, duration, http, grpc) = (
        int("start_time_unix_nano")?,
        int("duration_ns")?,
        int("http_status_code")?,
        int("rpc_grpc_status_code")?,
    );
    let [start, duration, http, grpc] =
        [&start, &duration, &http, &grpc].map(|c| c.as_primitive::<Int64Type>());
    let is_error = column(b, "is_error", &DataType::Boolean)?;
    let is_error = is_error.as_boolean();
    let decisions = b
        .column_by_name("decisions")
        .and_then(|c| c.as_map_opt())
        .ok_or_else(|| internal("unexpected type of column decisions"))?;
    let utf8 = |a: &ArrayRef| arrow::compute::cast(a, &DataType::Utf8).map_err(internal);
    let (keys, vals) = (utf8(decisions.keys())?, utf8(decisions.values())?);
    let (keys, vals) = (keys.as_string::<i32>(), vals.as_string::<i32>());
    let offsets = decisions.value_offsets();
    let opt_int = |a: &arrow::array::Int64Array, r: usize| (!a.is_null(r)).then(|| a.value(r));
    for r in 0..b.num_rows() {
        let mut d = BTreeMap::new();
        if !decisions.is_null(r) {
            for j in offsets[r] as usize..offsets[r + 1] as usize {
                if !keys.is_null(j) && !vals.is_null(j) {
                    d.insert(keys.value(j).to_owned(), vals.value(j).to_owned());
                }
            }
        }
        out.push(Row {
            text: std::array::from_fn(|i| {
                (!texts[i].is_null(r)).then(|| texts[i].value(r).to_owned())
            }),
            links: (!links.is_null(r)).then(|| links.value(r).to_owned()),
            start: opt_int(start, r).unwrap_or(0),
            duration: opt_int(duration, r).unwrap_or(0),
            is_error: !is_error.is_null(r) && is_error.value(r),
            http_status: opt_int(http, r),
            grpc_status: opt_int(grpc, r),
            decisions: d,
        });
    }
    Ok(())
}

/// The traces of `batches` (rows of [`COLUMNS`]), in the order of `order` (trace ids; a
/// trace not in it goes after, by id). A row without a trace id is skipped.
///
/// # Errors
/// [`SqlError::Internal`] when a column is missing or of another type.
pub fn traces(batches: &[RecordBatch], order: &[String]) -> Result<Vec<Trace>, SqlError> {
    let mut rows = Vec::new();
    for b in batches {
        rows_of(b, &mut rows)?;
    }
    let mut by_trace: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for r in rows {
        if let Some(t) = r.get("trace_id") {
            by_trace.entry(t.to_owned()).or_default().push(r);
        }
    }
    let mut out = Vec::with_capacity(by_trace.len());
    for id in order {
        if let Some(rows) = by_trace.remove(id) {
            out.push(trace(id.clone(), rows));
        }
    }
    out.extend(by_trace.into_iter().map(|(id, rows)| trace(id, rows)));
    Ok(out)
}

/// One trace of its rows.
fn trace(trace_id: String, mut rows: Vec<Row>) -> Trace {
    rows.sort_by(|a, b| {
        a.start
            .cmp(&b.start)
            .then_with(|| a.get("span_id").cmp(&b.get("span_id")))
    });
    let mut processes: BTreeMap<String, Process> = BTreeMap::new();
    // A process by its JSON text: the same resource is the same process.
    let mut process_keys: HashMap<String, String> = HashMap::new();
    let mut spans = Vec::with_capacity(rows.len());
    for r in &rows {
        let process = process_of(r);
        let key = serde_json::to_string(&process).unwrap_or_default();
        let next = process_keys.len() + 1;
        let process_id = process_keys
            .entry(key)
            .or_insert_with(|| {
                let id = format!("p{next}");
                processes.insert(id.clone(), process);
                id
            })
            .clone();
        spans.push(span(&trace_id, r, process_id));
    }
    Trace {
        trace_id,
        spans,
        processes,
        warnings: None,
    }
}

/// The process of a row: `service.instance.id`, `host.name`, `service.version`, then the
/// other resource attributes.
fn process_of(r: &Row) -> Process {
    let mut tags = Vec::new();
    for (key, col) in [
        ("service.instance.id", "instance_id"),
        ("host.name", "host_name"),
        ("service.version", "service_version"),
        ("deployment.environment.name", "deployment_environment"),
    ] {
        if let Some(v) = r.get(col) {
            tags.push(Tag::string(key, v));
        }
    }
    for a in span_detail::attributes(r.get("resource_attributes")) {
        tags.push(Tag::of_json(&a.key, &a.value));
    }
    Process {
        service_name: r
            .get("service_name")
            .unwrap_or("unknown_service")
            .to_owned(),
        tags,
    }
}

fn span(trace_id: &str, r: &Row, process_id: String) -> Span {
    let mut references = Vec::new();
    if let Some(p) = r.get("parent_span_id") {
        references.push(Reference {
            ref_type: "CHILD_OF",
            trace_id: trace_id.to_owned(),
            span_id: p.to_owned(),
        });
    }
    for l in span_detail::links(r.links.as_deref()) {
        references.push(Reference {
            ref_type: "FOLLOWS_FROM",
            trace_id: l.trace_id,
            span_id: l.span_id,
        });
    }
    let logs = span_detail::events(r.get("events"))
        .into_iter()
        .map(|e| {
            let mut fields = vec![Tag::string("event", &e.name)];
            fields.extend(e.attributes.iter().map(|a| Tag::of_json(&a.key, &a.value)));
            Log {
                timestamp: e.time_unix_nano.parse::<i64>().unwrap_or(0) / 1_000,
                fields,
            }
        })
        .collect();
    Span {
        trace_id: trace_id.to_owned(),
        span_id: r.get("span_id").unwrap_or_default().to_owned(),
        operation_name: r.get("name").unwrap_or_default().to_owned(),
        references,
        start_time: r.start / 1_000,
        duration: r.duration / 1_000,
        tags: tags(r),
        logs,
        process_id,
        warnings: None,
        flags: 1,
    }
}

/// The span tags, in the order of the module doc.
fn tags(r: &Row) -> Vec<Tag> {
    let mut t = Vec::new();
    if let Some(k) = r
        .get("span_kind")
        .map(jaeger_kind)
        .filter(|k| !k.is_empty())
    {
        t.push(Tag::string("span.kind", k));
    }
    if let Some(s) = r.get("status_code").filter(|s| *s != "UNSET") {
        t.push(Tag::string("otel.status_code", s));
    }
    if let Some(m) = r.get("status_message") {
        t.push(Tag::string("otel.status_description", m));
    }
    if r.is_error {
        t.push(Tag::bool("error", true));
    }
    if let Some(c) = r.get("color") {
        t.push(Tag::string("dyeline.color", c));
    }
    for (channel, color) in &r.decisions {
        t.push(Tag::string(
            format!("dyeline.decision.{channel}"),
            color.as_str(),
        ));
    }
    // Spans stored before lanes were read have none: their instances were base.
    t.push(Tag::string("dyeline.lane", r.get("lane").unwrap_or("base")));
    if let Some(l) = r.get("lane_tag") {
        t.push(Tag::string("dyeline.lane_tag", l));
    }
    if let Some(k) = r.get("traffic_kind") {
        t.push(Tag::string("dyeline.traffic_kind", k));
    }
    if let Some(s) = r.http_status {
        t.push(Tag::int("http.response.status_code", s));
    }
    if let Some(s) = r.grpc_status {
        t.push(Tag::int("rpc.grpc.status_code", s));
    }
    for p in span_detail::promoted_span_columns().filter(|p| !p.integer) {
        if let Some(v) = r.get(p.column) {
            t.push(Tag::string(p.key, v));
        }
    }
    for a in span_detail::attributes(r.get("attributes")) {
        t.push(Tag::of_json(&a.key, &a.value));
    }
    t
}
