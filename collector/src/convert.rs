//! OTLP → Arrow: a pure function turning an `ExportTraceServiceRequest` (its borrowed views,
//! [`crate::wire`]: read from protobuf bytes, or from a prost message) into rows of the
//! `spans` table ([`dyeline_model::schema`]), resolving the release fields at ingest.
//!
//! Owns: per-span validation (OTLP: a trace id of 16 bytes and a span id of 8 bytes, not all
//! zero; a parent id empty or of 8 bytes; domain §1's times: a start that is set and, with the
//! end, fits `i64` nanoseconds; an end before the start or of 0 stored as the start; with
//! [`ConvertOptions::retention`], no span older than the store keeps), each span's key
//! ([`SpanKey`]: a SERVER half of a Zipkin/B3 shared span id is its own span), the colour of
//! each resource (domain §1), the decision on each span (domain §2), the traffic kind (domain
//! §3), the error rule (domain §6.6), and the lane of each resource and lane tag of each span
//! (domain §7.1).
//! Invalid spans are rejected one by one and counted by [`RejectReason`]; the rest of the request
//! is kept (OTLP partial success). Does not own transport, limits or storage.
//!
//! Work is linear in the request: a span's attributes are read in one pass
//! ([`attrs::SpanAttrs`]), a decision value is parsed within the W3C baggage limits
//! ([`Decisions::parse`](dyeline_model::Decisions::parse); spans whose value passed them are
//! counted in [`SpanRows::decisions_truncated`]) and each of the first [`decision::MEMO_MAX`]
//! distinct decision texts of a request is parsed once.
//!
//! The face of the conversion; its parts, each below the face:
//! - `convert/columns.rs`: `SpanColumns`, one Arrow builder per `spans` column, finished in
//!   schema order;
//! - `convert/attrs.rs`: the attribute keys promoted to columns (`KEY_*`), `SpanAttrs`,
//!   `ResourceInfo`;
//! - `convert/decision.rs`: `DecisionMemo`, the decision on each span;
//! - `convert/lane.rs`: the lane tag of each span and the lane columns;
//! - `convert/json_out.rs`: the JSON text of the attribute, event and link columns;
//! - [`presence`]: metrics and logs exports → `presence` rows, reading resources as spans do.

mod attrs;
mod columns;
mod decision;
mod json_out;
mod lane;
pub mod presence;

use std::sync::Arc;

use arrow::array::RecordBatch;
use dyeline_model::{
    ColorRules, DecisionSource, LaneCarriers, LaneRules, SpanId, SpanKey, SpanKind, StatusCode,
    TraceId, TrafficKind,
};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use attrs::{SpanAttrs, promoted_span, resource_info, status_code_value};
pub use attrs::{UNKNOWN_INSTANCE, UNKNOWN_SERVICE};
use columns::SpanColumns;
use decision::DecisionMemo;
use json_out::{write_json_object, write_json_str, write_links};

use crate::wire::RequestView;

/// Why one span of an accepted request was rejected (a closed set, used as a metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// Trace id empty, all zero, or not 16 bytes.
    InvalidTraceId,
    /// Span id empty, all zero, or not 8 bytes.
    InvalidSpanId,
    /// Parent span id neither empty nor 8 bytes.
    InvalidParentSpanId,
    /// A start or end time beyond the year 2262 (`i64` nanoseconds): the store cannot hold it.
    InvalidTime,
    /// A start time of 0 (not set).
    MissingStartTime,
    /// A span that ended longer ago than the store keeps spans ([`ConvertOptions::retention`]:
    /// the receivers refuse it rather than store what retention is about to drop).
    OlderThanRetention,
}

impl RejectReason {
    /// All reasons, for pre-registering metric labels.
    pub const ALL: [RejectReason; 6] = [
        Self::InvalidTraceId,
        Self::InvalidSpanId,
        Self::InvalidParentSpanId,
        Self::InvalidTime,
        Self::MissingStartTime,
        Self::OlderThanRetention,
    ];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidTraceId => "invalid_trace_id",
            Self::InvalidSpanId => "invalid_span_id",
            Self::InvalidParentSpanId => "invalid_parent_span_id",
            Self::InvalidTime => "invalid_time",
            Self::MissingStartTime => "missing_start_time",
            Self::OlderThanRetention => "older_than_retention",
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
    /// limits, the rest skipped ([`dyeline_model::Decisions::truncated`]).
    pub decisions_truncated: u64,
    /// Lane carriers, over the stored spans, whose value gave no lane id (the sum of the
    /// `malformed_lane_tags` column, domain §7.1).
    pub malformed_lane_tags: u64,
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
    /// The store's retention (`[store] retention`), for the receivers: a span that ended
    /// longer ago than this before the request is converted is refused
    /// ([`RejectReason::OlderThanRetention`], domain §1). `None` keeps spans whatever their
    /// age (`dyeline import`: a recorded capture is kept).
    pub retention: Option<std::time::Duration>,
    /// The instance lane chain (domain §7.1; default: `deploy.lane` alone).
    pub lane_rules: Arc<LaneRules>,
    /// The lane tag carriers (domain §7.1; default: the built-in ones).
    pub lane_carriers: Arc<LaneCarriers>,
    /// Skips lane resolution: the six lane columns are null. For the ingest benchmark's
    /// comparison only (`bench/`); the product never sets it.
    pub skip_lanes_bench_only: bool,
}

/// Lower-case hex of `bytes` (at most 16) in `buf`, without allocating.
fn hex_str<'a>(bytes: &[u8], buf: &'a mut [u8; 32]) -> &'a str {
    let out = &mut buf[..bytes.len() * 2];
    // Cannot fail: the output slice is exactly twice the input.
    let _ = hex::encode_to_slice(bytes, out);
    std::str::from_utf8(out).unwrap_or_default()
}

fn time(v: u64) -> Option<i64> {
    i64::try_from(v).ok()
}

/// The stored end of a span that started at `start` and ended at `end` (domain §1): a span
/// whose end precedes its start, or whose end is 0, is kept with duration 0 (its end is its
/// start, so every reader sees a zero-length span).
fn stored_end(start: i64, end: i64) -> i64 {
    if end < start { start } else { end }
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
    let mut b = SpanColumns::new(total);
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
    // The oldest end a receiver keeps, with the retention as configured (for the message).
    let oldest = options.retention.map(|r| {
        let r_ns = i64::try_from(r.as_nanos()).unwrap_or(i64::MAX);
        (
            dyeline_model::time::now_unix_nano().saturating_sub(r_ns),
            humantime::format_duration(r),
        )
    });
    let mut json_buf = String::new();
    let mut memo = DecisionMemo::default();
    let mut decisions_truncated = 0u64;
    let mut malformed_lane_tags = 0u64;
    let lanes_on = !options.skip_lanes_bench_only;
    let lane_user_keys: Vec<&str> = if lanes_on {
        options.lane_carriers.user_keys().collect()
    } else {
        Vec::new()
    };
    for (ri, rs) in request.resource_spans.iter().enumerate() {
        let res = resource_info(
            &rs.resource_attributes,
            &options.color_rules,
            lanes_on.then_some(&*options.lane_rules),
        );
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
                        format!(
                            "{}: time beyond the year 2262 (start_time_unix_nano {}, \
                             end_time_unix_nano {}): the store holds i64 nanoseconds",
                            at(),
                            span.start_time_unix_nano,
                            span.end_time_unix_nano
                        ),
                    );
                    continue;
                };
                if start == 0 {
                    reject(
                        RejectReason::MissingStartTime,
                        format!("{}: start_time_unix_nano is 0 (not set)", at()),
                    );
                    continue;
                }
                let end = stored_end(start, end);
                if let Some((cutoff, retention)) = &oldest
                    && end < *cutoff
                {
                    reject(
                        RejectReason::OlderThanRetention,
                        format!(
                            "{}: the span ended at {}, longer ago than the store keeps spans \
                             ([store] retention = {retention}); `dyeline import` keeps old captures",
                            at(),
                            dyeline_model::time::rfc3339(end),
                        ),
                    );
                    continue;
                }
                let kind = SpanKind::from_i32(span.kind).unwrap_or(SpanKind::Unspecified);
                keys.push(SpanKey::of_kind(trace_id, span_id, kind));
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
                b.span_kind.append_value(kind.as_str());
                let attrs = &span.attributes;
                let found = SpanAttrs::of(attrs, &lane_user_keys);
                let job_name = SpanAttrs::get_str(found.job_name);
                let traffic = TrafficKind::classify(kind, parent.is_some(), job_name.is_some());
                b.traffic_kind
                    .append_option(traffic.map(TrafficKind::as_str));
                b.start_time_unix_nano.append_value(start);
                b.end_time_unix_nano.append_value(end);
                b.duration_ns.append_value(end - start);
                let status = span.status.as_ref();
                let code = status
                    .and_then(|s| StatusCode::from_i32(s.code))
                    .unwrap_or(StatusCode::Unset);
                b.status_code.append_value(code.as_str());
                b.status_message
                    .append_option(status.map(|s| s.message).filter(|m| !m.is_empty()));
                // A current key without a usable value (none, or not an integer nor a decimal
                // string) is absent: the legacy one is read.
                let http_status = found
                    .http_status
                    .and_then(status_code_value)
                    .or_else(|| found.http_status_legacy.and_then(status_code_value));
                let grpc_status = found.grpc_status.and_then(status_code_value);
                b.http_status_code.append_option(http_status);
                b.rpc_grpc_status_code.append_option(grpc_status);
                b.is_error.append_value(
                    code == StatusCode::Error
                        || http_status.is_some_and(|c| c >= 500)
                        || grpc_status.is_some_and(|c| c != 0)
                        || found.rpc_status.is_some_and(attrs::rpc_status_is_error),
                );
                b.service_name.append_value(&res.service_name);
                b.service_version
                    .append_option(res.service_version.as_deref());
                b.deployment_environment
                    .append_option(res.environment.as_deref());
                b.instance_id.append_value(&res.instance_id);
                b.host_name.append_option(res.host_name.as_deref());
                b.color.append_value(res.color);
                b.color_rule.append_value(&res.color_rule);
                lane::append_instance_lane(
                    &mut b.lane,
                    &mut b.lane_rule,
                    &mut b.lane_invalid_values,
                    res.lane.as_ref(),
                );
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
                            b.conflicting_channels.values().append_value(c);
                        }
                        b.conflicting_channels.append(true);
                    }
                    None => {
                        b.decisions.append(false)?;
                        b.decision_source.append_null();
                        b.decision_text.append_null();
                        b.malformed_pairs.append_value(0);
                        b.conflicting_channels.append(false);
                    }
                }
                let tag = lanes_on.then(|| lane::lane_tag(&found, &options.lane_carriers));
                if let Some(t) = &tag {
                    malformed_lane_tags += u64::from(t.malformed);
                }
                lane::append_lane_tag(&mut b, tag.as_ref());
                b.messaging_system
                    .append_option(SpanAttrs::get_str(found.messaging_system));
                b.consumer_group.append_option(
                    SpanAttrs::get_str(found.consumer_group)
                        .or_else(|| SpanAttrs::get_str(found.rocketmq_group))
                        .or_else(|| SpanAttrs::get_str(found.kafka_group)),
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
                if span.links.is_empty() {
                    b.links.append_null();
                } else {
                    json_buf.clear();
                    write_links(&mut json_buf, &span.links);
                    b.links.append_value(&json_buf);
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
        malformed_lane_tags,
    })
}

#[cfg(test)]
mod lane_tests;
#[cfg(test)]
mod tests;
