//! A drilldown span as the trace page's row: its marks in words, and its attributes, resource,
//! events and links with their values as text.

use dyeline_queries::panels::{hop_line, lanes};
use dyeline_queries::{drilldown, span_detail};
use dyeline_ui::{LaneMarkLine, TraceEvent, TraceLink, TraceSpan};

/// The page's row of a drilldown span (already flat: the drilldown gives depth-first order).
pub(super) fn trace_span(node: drilldown::SpanNode) -> TraceSpan {
    let texts = |a: &[span_detail::Attribute]| -> Vec<(String, String)> {
        a.iter().map(|a| (a.key.clone(), a.text())).collect()
    };
    TraceSpan {
        status_message: node.status_message.clone(),
        trace_state: node.trace_state.clone(),
        scope: node.scope_name.as_ref().map(|n| match &node.scope_version {
            Some(v) => format!("{n} {v}"),
            None => n.clone(),
        }),
        attributes: texts(&node.attributes),
        resource_attributes: texts(&node.resource_attributes),
        events: node
            .events
            .iter()
            .map(|e| TraceEvent {
                time_unix_nano: e.time_unix_nano.parse().unwrap_or(0),
                name: e.name.clone(),
                attributes: texts(&e.attributes),
            })
            .collect(),
        links: node
            .links
            .iter()
            .map(|l| TraceLink {
                trace_id: l.trace_id.clone(),
                span_id: l.span_id.clone(),
                attributes: texts(&l.attributes),
            })
            .collect(),
        span_id: node.span_id,
        parent_span_id: node.parent_span_id,
        depth: node.depth,
        name: node.name,
        span_kind: node.span_kind,
        traffic_kind: node.traffic_kind,
        app: node.app,
        instance: node.instance,
        host: node.host,
        color: node.color,
        decisions: node
            .decisions
            .iter()
            .map(|(c, v)| format!("{c}={v}"))
            .collect::<Vec<_>>()
            .join("&"),
        start_unix_nano: node.start_time_unix_nano.parse().unwrap_or(0),
        duration_ns: node.duration_ns,
        status_code: node.status_code,
        is_error: node.is_error,
        waiting_for_parent: node.waiting_for_parent,
        hops: node.hops.iter().map(hop_line).collect(),
        missing_decision_channels: node.missing_decision_channels,
        lane: Some(node.lane),
        lane_tag: node.lane_tag,
        intended_lane: node.intended_lane,
        lane_group: node.lane_group,
        lane_marks: node
            .lane_marks
            .iter()
            .map(|m| LaneMarkLine {
                mark: m.as_str().to_owned(),
                text: lanes::lane_mark_line(m),
            })
            .collect(),
    }
}
