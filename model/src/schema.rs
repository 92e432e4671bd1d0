//! The Arrow schema of the `spans` table: one row per span, identified by (trace_id, span_id,
//! whether it is a SERVER span): [`crate::SpanKey`], domain §1 (Zipkin/B3 CLIENT and SERVER
//! halves that share a span id are two rows).
//!
//! `docs/schema.md` of the repository describes every column; this module is the single
//! definition the collector (which builds rows), the store (which persists them) and the queries
//! (which read them) share. Ids are lower-case hex text so SQL shows and compares them as users
//! write them; enums are their upper-case OTLP short names; times are `Int64` Unix nanoseconds.

use std::sync::{Arc, OnceLock};

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

/// The version of the `spans` layout below, for the Parquet key-value metadata of each file
/// (under [`SCHEMA_VERSION_KEY`], written as decimal text) so a reader can tell which layout a
/// file was written with. Raise it when a column is added, removed, renamed, or changes type,
/// nullability or meaning.
///
/// Versions: 1, the first; 2 adds the nullable `links` column and the lane columns (`lane`,
/// `lane_rule`, `lane_invalid_values`, `lane_tag`, `lane_tag_source`, `malformed_lane_tags`),
/// all null in the files of version 1; 3 adds the nullable `deployment_environment` column,
/// null in the files of versions 1 and 2.
pub const SCHEMA_VERSION: u32 = 3;

/// The Parquet key-value metadata key holding [`SCHEMA_VERSION`].
pub const SCHEMA_VERSION_KEY: &str = "dyeline.spans.schema_version";

/// Column names, in schema order.
pub mod col {
    /// Lower-case hex, 32 characters.
    pub const TRACE_ID: &str = "trace_id";
    /// Lower-case hex, 16 characters.
    pub const SPAN_ID: &str = "span_id";
    /// Lower-case hex, 16 characters; null for a root span.
    pub const PARENT_SPAN_ID: &str = "parent_span_id";
    /// W3C tracestate, null when empty.
    pub const TRACE_STATE: &str = "trace_state";
    /// Span name.
    pub const NAME: &str = "name";
    /// `SERVER`, `CLIENT`, `PRODUCER`, `CONSUMER`, `INTERNAL`, `UNSPECIFIED`.
    pub const SPAN_KIND: &str = "span_kind";
    /// `RPC`, `MQ`, `JOB` or null (domain §3).
    pub const TRAFFIC_KIND: &str = "traffic_kind";
    /// Unix nanoseconds.
    pub const START_TIME_UNIX_NANO: &str = "start_time_unix_nano";
    /// Unix nanoseconds; equal to the start when the span's end preceded its start or was 0
    /// (domain §1: kept with duration 0).
    pub const END_TIME_UNIX_NANO: &str = "end_time_unix_nano";
    /// end − start in nanoseconds (0 when end precedes start or is 0).
    pub const DURATION_NS: &str = "duration_ns";
    /// `UNSET`, `OK`, `ERROR`.
    pub const STATUS_CODE: &str = "status_code";
    /// Status message, null when empty.
    pub const STATUS_MESSAGE: &str = "status_message";
    /// True when the span is an error by domain §6.6.
    pub const IS_ERROR: &str = "is_error";
    /// Resource `service.name` (`unknown_service` when absent).
    pub const SERVICE_NAME: &str = "service_name";
    /// Resource `service.version`.
    pub const SERVICE_VERSION: &str = "service_version";
    /// Resource `deployment.environment.name`, else the older `deployment.environment` (e.g.
    /// `production`, `staging`): a dimension every detection and view keeps apart. Null when
    /// the resource names none (and in files written before schema version 3).
    pub const DEPLOYMENT_ENVIRONMENT: &str = "deployment_environment";
    /// First present of `service.instance.id`, `host.name`, `k8s.pod.name` (domain §1).
    pub const INSTANCE_ID: &str = "instance_id";
    /// Resource `host.name`.
    pub const HOST_NAME: &str = "host_name";
    /// `blue`, `green`, `unknown`.
    pub const COLOR: &str = "color";
    /// The rule that decided `color`, or `none`.
    pub const COLOR_RULE: &str = "color_rule";
    /// The instance's lane id (domain §7.1), `base` when unmarked; null in files written
    /// before it (schema version 1).
    pub const LANE: &str = "lane";
    /// The key of the lane rule that decided `lane` (`deploy.lane`, a user rule's key), or
    /// `default`.
    pub const LANE_RULE: &str = "lane_rule";
    /// Lane values met while resolving `lane` that are not lane ids; null when none.
    pub const LANE_INVALID_VALUES: &str = "lane_invalid_values";
    /// Map channel → `blue`/`green` (domain §2); null when no source attribute.
    pub const DECISIONS: &str = "decisions";
    /// The attribute the decision was read from.
    pub const DECISION_SOURCE: &str = "decision_source";
    /// The raw decision text.
    pub const DECISION_TEXT: &str = "decision_text";
    /// Pairs skipped as malformed.
    pub const MALFORMED_PAIRS: &str = "malformed_pairs";
    /// Channels decided twice with different colours.
    pub const CONFLICTING_CHANNELS: &str = "conflicting_channels";
    /// The lane the span's request asks for (domain §7.1), `base` for an explicit base tag;
    /// null when no carrier gave a lane id.
    pub const LANE_TAG: &str = "lane_tag";
    /// The key of the carrier that gave `lane_tag`; null with it.
    pub const LANE_TAG_SOURCE: &str = "lane_tag_source";
    /// Lane carriers on the span that gave no lane id.
    pub const MALFORMED_LANE_TAGS: &str = "malformed_lane_tags";
    /// `messaging.system`.
    pub const MESSAGING_SYSTEM: &str = "messaging_system";
    /// `messaging.consumer.group.name`, else `messaging.rocketmq.client_group`.
    pub const CONSUMER_GROUP: &str = "consumer_group";
    /// `job.name`.
    pub const JOB_NAME: &str = "job_name";
    /// `http.response.status_code`, else `http.status_code` (an integer, or a decimal string).
    pub const HTTP_STATUS_CODE: &str = "http_status_code";
    /// `rpc.grpc.status_code` (an integer, or a decimal string).
    pub const RPC_GRPC_STATUS_CODE: &str = "rpc_grpc_status_code";
    /// Instrumentation scope name.
    pub const SCOPE_NAME: &str = "scope_name";
    /// Instrumentation scope version.
    pub const SCOPE_VERSION: &str = "scope_version";
    /// The resource attributes not promoted to columns, as a JSON object.
    pub const RESOURCE_ATTRIBUTES: &str = "resource_attributes";
    /// The span attributes not promoted to columns, as a JSON object.
    pub const ATTRIBUTES: &str = "attributes";
    /// Span events as a JSON array of `{time_unix_nano, name, attributes}`; null when none.
    pub const EVENTS: &str = "events";
    /// Span links as a JSON array of `{trace_id, span_id, trace_state?, attributes}`; null
    /// when none (and in files written before schema version 2).
    pub const LINKS: &str = "links";
}

/// The columns schema version 2 added (domain §7.1), all nullable: null in files of version 1.
pub const LANE_COLUMNS: [&str; 6] = [
    col::LANE,
    col::LANE_RULE,
    col::LANE_INVALID_VALUES,
    col::LANE_TAG,
    col::LANE_TAG_SOURCE,
    col::MALFORMED_LANE_TAGS,
];

/// The column schema version 3 added, nullable: null in files of versions 1 and 2.
pub const ENVIRONMENT_COLUMNS: [&str; 1] = [col::DEPLOYMENT_ENVIRONMENT];

/// The `spans` schema (see [`col`] for each column's meaning).
pub fn spans_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            use DataType::*;
            let s = |n: &str, null: bool| Field::new(n, Utf8, null);
            let fields = [
                s(col::TRACE_ID, false),
                s(col::SPAN_ID, false),
                s(col::PARENT_SPAN_ID, true),
                s(col::TRACE_STATE, true),
                s(col::NAME, false),
                s(col::SPAN_KIND, false),
                s(col::TRAFFIC_KIND, true),
                Field::new(col::START_TIME_UNIX_NANO, Int64, false),
                Field::new(col::END_TIME_UNIX_NANO, Int64, false),
                Field::new(col::DURATION_NS, Int64, false),
                s(col::STATUS_CODE, false),
                s(col::STATUS_MESSAGE, true),
                Field::new(col::IS_ERROR, Boolean, false),
                s(col::SERVICE_NAME, false),
                s(col::SERVICE_VERSION, true),
                s(col::DEPLOYMENT_ENVIRONMENT, true),
                s(col::INSTANCE_ID, false),
                s(col::HOST_NAME, true),
            ]
            .into_iter()
            .chain(instance_resolution_fields())
            .chain([
                Field::new_map(
                    col::DECISIONS,
                    "entries",
                    Arc::new(Field::new("keys", Utf8, false)),
                    Arc::new(Field::new("values", Utf8, true)),
                    false,
                    true,
                ),
                s(col::DECISION_SOURCE, true),
                s(col::DECISION_TEXT, true),
                Field::new(col::MALFORMED_PAIRS, UInt32, false),
                Field::new(
                    col::CONFLICTING_CHANNELS,
                    List(Arc::new(Field::new("item", Utf8, true))),
                    true,
                ),
                s(col::LANE_TAG, true),
                s(col::LANE_TAG_SOURCE, true),
                Field::new(col::MALFORMED_LANE_TAGS, UInt32, true),
                s(col::MESSAGING_SYSTEM, true),
                s(col::CONSUMER_GROUP, true),
                s(col::JOB_NAME, true),
                Field::new(col::HTTP_STATUS_CODE, Int32, true),
                Field::new(col::RPC_GRPC_STATUS_CODE, Int32, true),
                s(col::SCOPE_NAME, true),
                s(col::SCOPE_VERSION, true),
                s(col::RESOURCE_ATTRIBUTES, false),
                s(col::ATTRIBUTES, false),
                s(col::EVENTS, true),
                s(col::LINKS, true),
            ])
            .collect::<Vec<_>>();
            Arc::new(Schema::new(fields))
        })
        .clone()
}

/// What ingest resolves of an instance, in this order: `color`, `color_rule`, `lane`,
/// `lane_rule`, `lane_invalid_values`; `spans` and `presence`
/// ([`crate::presence::presence_schema`]) hold them alike. The lane columns are nullable:
/// files of `spans` schema version 1 lack them.
pub fn instance_resolution_fields() -> [Field; 5] {
    let s = |n: &str, null: bool| Field::new(n, DataType::Utf8, null);
    [
        s(col::COLOR, false),
        s(col::COLOR_RULE, false),
        s(col::LANE, true),
        s(col::LANE_RULE, true),
        Field::new(
            col::LANE_INVALID_VALUES,
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            true,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_has_the_issue_columns_with_their_names() {
        let schema = spans_schema();
        for name in [
            "trace_id",
            "span_id",
            "parent_span_id",
            "name",
            "span_kind",
            "traffic_kind",
            "start_time_unix_nano",
            "end_time_unix_nano",
            "duration_ns",
            "status_code",
            "service_name",
            "instance_id",
            "host_name",
            "color",
            "color_rule",
            "decisions",
            "decision_source",
            "decision_text",
            "malformed_pairs",
            "conflicting_channels",
            "messaging_system",
            "consumer_group",
            "job_name",
            "http_status_code",
            "rpc_grpc_status_code",
            "resource_attributes",
            "attributes",
            "events",
            "links",
            "lane",
            "lane_rule",
            "lane_invalid_values",
            "lane_tag",
            "lane_tag_source",
            "malformed_lane_tags",
            "deployment_environment",
        ] {
            assert!(
                schema.field_with_name(name).is_ok(),
                "missing column {name}"
            );
        }
        assert_eq!(schema.fields().len(), 42);
        for lane_column in std::iter::once(col::LINKS)
            .chain(LANE_COLUMNS)
            .chain(ENVIRONMENT_COLUMNS)
        {
            let field = schema.field_with_name(lane_column).unwrap();
            assert!(
                field.is_nullable(),
                "{lane_column}: files of earlier versions lack it"
            );
        }
    }
}
