//! [`SpanColumns`]: one Arrow builder per column of the `spans` table
//! ([`dyeline_model::schema::col`]), each field named as its column.
//!
//! Built from [`spans_schema`] (the map and list builders take their item fields from it) and
//! finished by iterating the schema's fields and taking the builder of each by name, so the
//! order of the batch's columns is the schema's and cannot drift from it: a column without a
//! builder is an error, a builder without a column an unused variable. Does not own what is
//! appended (the conversion does, one `append` per column and span).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Int32Builder, Int64Builder, ListBuilder, MapBuilder, RecordBatch,
    StringBuilder, UInt32Builder,
};
use arrow::datatypes::{DataType, FieldRef, Schema};
use arrow::error::ArrowError;
use dyeline_model::schema::{col, spans_schema};

/// The builders of one batch of `spans` rows, one per column, each named as its column.
pub(super) struct SpanColumns {
    pub(super) trace_id: StringBuilder,
    pub(super) span_id: StringBuilder,
    pub(super) parent_span_id: StringBuilder,
    pub(super) trace_state: StringBuilder,
    pub(super) name: StringBuilder,
    pub(super) span_kind: StringBuilder,
    pub(super) traffic_kind: StringBuilder,
    pub(super) start_time_unix_nano: Int64Builder,
    pub(super) end_time_unix_nano: Int64Builder,
    pub(super) duration_ns: Int64Builder,
    pub(super) status_code: StringBuilder,
    pub(super) status_message: StringBuilder,
    pub(super) is_error: BooleanBuilder,
    pub(super) service_name: StringBuilder,
    pub(super) service_version: StringBuilder,
    pub(super) deployment_environment: StringBuilder,
    pub(super) instance_id: StringBuilder,
    pub(super) host_name: StringBuilder,
    pub(super) color: StringBuilder,
    pub(super) color_rule: StringBuilder,
    pub(super) lane: StringBuilder,
    pub(super) lane_rule: StringBuilder,
    pub(super) lane_invalid_values: ListBuilder<StringBuilder>,
    pub(super) decisions: MapBuilder<StringBuilder, StringBuilder>,
    pub(super) decision_source: StringBuilder,
    pub(super) decision_text: StringBuilder,
    pub(super) malformed_pairs: UInt32Builder,
    pub(super) conflicting_channels: ListBuilder<StringBuilder>,
    pub(super) lane_tag: StringBuilder,
    pub(super) lane_tag_source: StringBuilder,
    pub(super) malformed_lane_tags: UInt32Builder,
    pub(super) messaging_system: StringBuilder,
    pub(super) consumer_group: StringBuilder,
    pub(super) job_name: StringBuilder,
    pub(super) http_status_code: Int32Builder,
    pub(super) rpc_grpc_status_code: Int32Builder,
    pub(super) scope_name: StringBuilder,
    pub(super) scope_version: StringBuilder,
    pub(super) resource_attributes: StringBuilder,
    pub(super) attributes: StringBuilder,
    pub(super) events: StringBuilder,
    pub(super) links: StringBuilder,
}

/// The key and value fields of map column `name` of `schema`.
fn map_fields(schema: &Schema, name: &str) -> (FieldRef, FieldRef) {
    match schema.field_with_name(name).map(|f| f.data_type().clone()) {
        Ok(DataType::Map(entries, _)) => match entries.data_type() {
            DataType::Struct(fields) => (fields[0].clone(), fields[1].clone()),
            _ => unreachable!("map entries are a struct"),
        },
        _ => unreachable!("{name} is a map"),
    }
}

/// The item field of list column `name` of `schema`.
fn list_item(schema: &Schema, name: &str) -> FieldRef {
    match schema.field_with_name(name).map(|f| f.data_type().clone()) {
        Ok(DataType::List(item)) => item,
        _ => unreachable!("{name} is a list"),
    }
}

impl SpanColumns {
    /// Empty builders with room for `cap` rows.
    pub(super) fn new(cap: usize) -> Self {
        let s = || StringBuilder::with_capacity(cap, cap * 8);
        let schema = spans_schema();
        let (key_field, value_field) = map_fields(&schema, col::DECISIONS);
        let invalid_item = list_item(&schema, col::LANE_INVALID_VALUES);
        let list_item = list_item(&schema, col::CONFLICTING_CHANNELS);
        Self {
            trace_id: StringBuilder::with_capacity(cap, cap * 32),
            span_id: StringBuilder::with_capacity(cap, cap * 16),
            parent_span_id: StringBuilder::with_capacity(cap, cap * 16),
            trace_state: s(),
            name: s(),
            span_kind: s(),
            traffic_kind: s(),
            start_time_unix_nano: Int64Builder::with_capacity(cap),
            end_time_unix_nano: Int64Builder::with_capacity(cap),
            duration_ns: Int64Builder::with_capacity(cap),
            status_code: s(),
            status_message: s(),
            is_error: BooleanBuilder::with_capacity(cap),
            service_name: s(),
            service_version: s(),
            deployment_environment: s(),
            instance_id: s(),
            host_name: s(),
            color: s(),
            color_rule: s(),
            lane: s(),
            lane_rule: s(),
            lane_invalid_values: ListBuilder::new(StringBuilder::new()).with_field(invalid_item),
            decisions: MapBuilder::new(None, StringBuilder::new(), StringBuilder::new())
                .with_keys_field(key_field)
                .with_values_field(value_field),
            decision_source: s(),
            decision_text: s(),
            malformed_pairs: UInt32Builder::with_capacity(cap),
            conflicting_channels: ListBuilder::new(StringBuilder::new()).with_field(list_item),
            lane_tag: s(),
            lane_tag_source: s(),
            malformed_lane_tags: UInt32Builder::with_capacity(cap),
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
            links: s(),
        }
    }

    /// The rows as a batch of [`spans_schema`], its columns in the schema's order.
    ///
    /// # Errors
    /// A column of the schema without a builder here, or builders of unequal lengths (bugs).
    pub(super) fn finish(self) -> Result<RecordBatch, ArrowError> {
        // Every builder is named here (no `..`): one the schema does not take is unused.
        let Self {
            mut trace_id,
            mut span_id,
            mut parent_span_id,
            mut trace_state,
            mut name,
            mut span_kind,
            mut traffic_kind,
            mut start_time_unix_nano,
            mut end_time_unix_nano,
            mut duration_ns,
            mut status_code,
            mut status_message,
            mut is_error,
            mut service_name,
            mut service_version,
            mut deployment_environment,
            mut instance_id,
            mut host_name,
            mut color,
            mut color_rule,
            mut lane,
            mut lane_rule,
            mut lane_invalid_values,
            mut decisions,
            mut decision_source,
            mut decision_text,
            mut malformed_pairs,
            mut conflicting_channels,
            mut lane_tag,
            mut lane_tag_source,
            mut malformed_lane_tags,
            mut messaging_system,
            mut consumer_group,
            mut job_name,
            mut http_status_code,
            mut rpc_grpc_status_code,
            mut scope_name,
            mut scope_version,
            mut resource_attributes,
            mut attributes,
            mut events,
            mut links,
        } = self;
        let schema = spans_schema();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for field in schema.fields() {
            let column: ArrayRef = match field.name().as_str() {
                col::TRACE_ID => Arc::new(trace_id.finish()),
                col::SPAN_ID => Arc::new(span_id.finish()),
                col::PARENT_SPAN_ID => Arc::new(parent_span_id.finish()),
                col::TRACE_STATE => Arc::new(trace_state.finish()),
                col::NAME => Arc::new(name.finish()),
                col::SPAN_KIND => Arc::new(span_kind.finish()),
                col::TRAFFIC_KIND => Arc::new(traffic_kind.finish()),
                col::START_TIME_UNIX_NANO => Arc::new(start_time_unix_nano.finish()),
                col::END_TIME_UNIX_NANO => Arc::new(end_time_unix_nano.finish()),
                col::DURATION_NS => Arc::new(duration_ns.finish()),
                col::STATUS_CODE => Arc::new(status_code.finish()),
                col::STATUS_MESSAGE => Arc::new(status_message.finish()),
                col::IS_ERROR => Arc::new(is_error.finish()),
                col::SERVICE_NAME => Arc::new(service_name.finish()),
                col::SERVICE_VERSION => Arc::new(service_version.finish()),
                col::DEPLOYMENT_ENVIRONMENT => Arc::new(deployment_environment.finish()),
                col::INSTANCE_ID => Arc::new(instance_id.finish()),
                col::HOST_NAME => Arc::new(host_name.finish()),
                col::COLOR => Arc::new(color.finish()),
                col::COLOR_RULE => Arc::new(color_rule.finish()),
                col::LANE => Arc::new(lane.finish()),
                col::LANE_RULE => Arc::new(lane_rule.finish()),
                col::LANE_INVALID_VALUES => Arc::new(lane_invalid_values.finish()),
                col::DECISIONS => Arc::new(decisions.finish()),
                col::DECISION_SOURCE => Arc::new(decision_source.finish()),
                col::DECISION_TEXT => Arc::new(decision_text.finish()),
                col::MALFORMED_PAIRS => Arc::new(malformed_pairs.finish()),
                col::CONFLICTING_CHANNELS => Arc::new(conflicting_channels.finish()),
                col::LANE_TAG => Arc::new(lane_tag.finish()),
                col::LANE_TAG_SOURCE => Arc::new(lane_tag_source.finish()),
                col::MALFORMED_LANE_TAGS => Arc::new(malformed_lane_tags.finish()),
                col::MESSAGING_SYSTEM => Arc::new(messaging_system.finish()),
                col::CONSUMER_GROUP => Arc::new(consumer_group.finish()),
                col::JOB_NAME => Arc::new(job_name.finish()),
                col::HTTP_STATUS_CODE => Arc::new(http_status_code.finish()),
                col::RPC_GRPC_STATUS_CODE => Arc::new(rpc_grpc_status_code.finish()),
                col::SCOPE_NAME => Arc::new(scope_name.finish()),
                col::SCOPE_VERSION => Arc::new(scope_version.finish()),
                col::RESOURCE_ATTRIBUTES => Arc::new(resource_attributes.finish()),
                col::ATTRIBUTES => Arc::new(attributes.finish()),
                col::EVENTS => Arc::new(events.finish()),
                col::LINKS => Arc::new(links.finish()),
                other => {
                    return Err(ArrowError::SchemaError(format!(
                        "spans column {other} has no builder in the collector"
                    )));
                }
            };
            columns.push(column);
        }
        RecordBatch::try_new(schema, columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every column of the schema has a builder of its type, and the batch's columns come in
    /// the schema's order (what `RecordBatch::try_new` checks, here with no rows).
    #[test]
    fn every_schema_column_has_a_builder_in_schema_order() {
        let batch = SpanColumns::new(0).finish().unwrap();
        assert_eq!(batch.schema(), spans_schema());
        assert_eq!(batch.num_columns(), spans_schema().fields().len());
    }
}
