//! The attributes conversion reads: the keys promoted to columns (as `KEY_*` consts, one place
//! for each spelling), a span's attributes found in one pass ([`SpanAttrs`]) and a resource's
//! values computed once for all its spans ([`ResourceInfo`]).
//!
//! Owns which keys become columns and the fallbacks between them (`service.instance.id`, else
//! `host.name`, else `k8s.pod.name`; `unknown_service` for a resource with no name). Does not
//! own the decision grammar (`dyeline_model::decision`), the colour rules nor the lane rules
//! and carriers (`dyeline_model::lane`; `convert/lane.rs` runs them).

use dyeline_model::lane::{BAGGAGE_TAG_KEY, TAG_KEY};
use dyeline_model::{ColorRules, DecisionSource, InstanceLane, LaneRules};

use opentelemetry_semantic_conventions::attribute as semconv;

use super::json_out::write_json_object;
use crate::wire::{Kv, Val};

/// Resource `service.name` (column `service_name`).
pub(super) const KEY_SERVICE_NAME: &str = semconv::SERVICE_NAME;
/// Resource `service.version` (column `service_version`).
pub(super) const KEY_SERVICE_VERSION: &str = semconv::SERVICE_VERSION;
/// Resource `deployment.environment.name` (column `deployment_environment`).
pub(super) const KEY_DEPLOYMENT_ENVIRONMENT_NAME: &str = semconv::DEPLOYMENT_ENVIRONMENT_NAME;
/// Resource `deployment.environment`, the older key of `deployment_environment`.
#[allow(deprecated)] // replaced by deployment.environment.name; older SDKs and configs send it
pub(super) const KEY_DEPLOYMENT_ENVIRONMENT: &str = semconv::DEPLOYMENT_ENVIRONMENT;
/// Resource `service.instance.id`, the first choice for column `instance_id`.
pub(super) const KEY_SERVICE_INSTANCE_ID: &str = semconv::SERVICE_INSTANCE_ID;
/// Resource `host.name` (column `host_name`, and the second choice for `instance_id`).
pub(super) const KEY_HOST_NAME: &str = semconv::HOST_NAME;
/// Resource `k8s.pod.name`, the third choice for `instance_id` (not promoted: it stays in
/// `resource_attributes`).
pub(super) const KEY_K8S_POD_NAME: &str = semconv::K8S_POD_NAME;
/// Span `job.name` (column `job_name`; not a semantic convention: the batch-job marker of
/// domain §3).
pub(super) const KEY_JOB_NAME: &str = "job.name";
/// Span `http.response.status_code` (column `http_status_code`).
pub(super) const KEY_HTTP_RESPONSE_STATUS_CODE: &str = semconv::HTTP_RESPONSE_STATUS_CODE;
/// Span `http.status_code`, the legacy key of `http_status_code`.
#[allow(deprecated)] // read beside its replacement, for the SDKs that still send it
pub(super) const KEY_HTTP_STATUS_CODE: &str = semconv::HTTP_STATUS_CODE;
/// Span `rpc.grpc.status_code` (column `rpc_grpc_status_code`).
#[allow(deprecated)] // replaced by rpc.response.status_code; most gRPC instrumentations send it
pub(super) const KEY_RPC_GRPC_STATUS_CODE: &str = semconv::RPC_GRPC_STATUS_CODE;
/// Span `rpc.response.status_code`, the current RPC status (`OK`, `UNAVAILABLE`, `-32602`, …:
/// a string); any value but `OK` or `0` is an error (domain §6.6 as the conventions now name
/// it). Kept in `attributes`: it is text, not the gRPC column's number.
pub(super) const KEY_RPC_RESPONSE_STATUS_CODE: &str = semconv::RPC_RESPONSE_STATUS_CODE;
/// Span `messaging.system` (column `messaging_system`).
pub(super) const KEY_MESSAGING_SYSTEM: &str = semconv::MESSAGING_SYSTEM;
/// Span `messaging.consumer.group.name` (column `consumer_group`).
pub(super) const KEY_MESSAGING_CONSUMER_GROUP_NAME: &str = semconv::MESSAGING_CONSUMER_GROUP_NAME;
/// Span `messaging.rocketmq.client_group`, the first fallback of `consumer_group`.
#[allow(deprecated)] // replaced by messaging.consumer.group.name
pub(super) const KEY_MESSAGING_ROCKETMQ_CLIENT_GROUP: &str =
    semconv::MESSAGING_ROCKETMQ_CLIENT_GROUP;
/// Span `messaging.kafka.consumer.group`, the second fallback of `consumer_group`.
#[allow(deprecated)] // replaced by messaging.consumer.group.name
pub(super) const KEY_MESSAGING_KAFKA_CONSUMER_GROUP: &str = semconv::MESSAGING_KAFKA_CONSUMER_GROUP;
/// The span attribute of [`DecisionSource::Attribute`].
const KEY_DECISION_ATTRIBUTE: &str = DecisionSource::Attribute.as_str();
/// The span attribute of [`DecisionSource::BaggageAttribute`].
const KEY_DECISION_BAGGAGE_ATTRIBUTE: &str = DecisionSource::BaggageAttribute.as_str();
/// The span attribute of [`DecisionSource::BaggageHeader`] (also the third built-in lane
/// carrier, domain §7.1).
const KEY_DECISION_BAGGAGE_HEADER: &str = DecisionSource::BaggageHeader.as_str();
/// Span `x-deploy-lane`, the first built-in lane carrier (domain §7.1).
const KEY_LANE_TAG: &str = TAG_KEY;
/// Span `baggage.x-deploy-lane`, the second built-in lane carrier.
const KEY_LANE_BAGGAGE_TAG: &str = BAGGAGE_TAG_KEY;

/// Resource attribute keys promoted to columns (left out of `resource_attributes`).
const PROMOTED_RESOURCE: [&str; 6] = [
    KEY_SERVICE_NAME,
    KEY_SERVICE_VERSION,
    KEY_DEPLOYMENT_ENVIRONMENT_NAME,
    KEY_DEPLOYMENT_ENVIRONMENT,
    KEY_SERVICE_INSTANCE_ID,
    KEY_HOST_NAME,
];

pub(super) fn str_value<'a>(v: &Val<'a>) -> Option<&'a str> {
    match v {
        Val::Str(s) => Some(s),
        _ => None,
    }
}

/// A status code attribute's value as a number (domain §1): an integer, a decimal string
/// (`"503"`, optional sign, whitespace around it ignored) or a double with no fraction, within
/// `i32`. Anything else (`"5xx"`, `"503.0"`, a boolean, no value) is `None`: the attribute
/// counts as absent.
pub(super) fn status_code_value(v: &Val<'_>) -> Option<i32> {
    let wide = match v {
        Val::Int(i) => Some(*i),
        Val::Str(s) => s.trim().parse::<i64>().ok(),
        Val::Double(d) if d.fract() == 0.0 && d.abs() < 1e15 => Some(*d as i64),
        _ => None,
    };
    wide.and_then(|n| i32::try_from(n).ok())
}

/// The string values of an attribute as [`read_decision`] takes them: one for a string, the
/// string items of an array, none for another type or no value.
///
/// [`read_decision`]: dyeline_model::decision::read_decision
pub(super) fn string_values<'a>(v: Option<&Val<'a>>) -> Vec<&'a str> {
    match v {
        Some(Val::Str(s)) => vec![*s],
        Some(Val::Array(a)) => a.iter().filter_map(str_value).collect(),
        _ => Vec::new(),
    }
}

/// The value of the first attribute named `key` ([`Val::Empty`] when it has none).
pub(super) fn find<'v, 'a>(attrs: &'v [Kv<'a>], key: &str) -> Option<&'v Val<'a>> {
    attrs.iter().find(|kv| kv.key == key).map(|kv| &kv.value)
}

fn find_str<'a>(attrs: &[Kv<'a>], key: &str) -> Option<&'a str> {
    find(attrs, key).and_then(str_value)
}

/// True for the span attribute keys promoted to columns (left out of `attributes`).
pub(super) fn promoted_span(key: &str) -> bool {
    matches!(
        key,
        KEY_MESSAGING_SYSTEM
            | KEY_MESSAGING_CONSUMER_GROUP_NAME
            | KEY_MESSAGING_ROCKETMQ_CLIENT_GROUP
            | KEY_MESSAGING_KAFKA_CONSUMER_GROUP
            | KEY_JOB_NAME
            | KEY_HTTP_RESPONSE_STATUS_CODE
            | KEY_HTTP_STATUS_CODE
            | KEY_RPC_GRPC_STATUS_CODE
    )
}

/// The slot of a decision source in [`SpanAttrs::decision`].
pub(super) fn source_slot(source: DecisionSource) -> usize {
    match source {
        DecisionSource::Attribute => 0,
        DecisionSource::BaggageAttribute => 1,
        DecisionSource::BaggageHeader => 2,
    }
}

/// True when an `rpc.response.status_code` value says the call failed: any value but `OK`
/// (any case) or 0, as text or a number; an empty string or no value says nothing.
pub(super) fn rpc_status_is_error(v: &Val<'_>) -> bool {
    match v {
        Val::Str(s) => {
            let s = s.trim();
            !s.is_empty() && !s.eq_ignore_ascii_case("OK") && s != "0"
        }
        Val::Int(i) => *i != 0,
        Val::Double(d) => *d != 0.0,
        _ => false,
    }
}

/// One attribute as a lookup by key finds it: `None` when the key is absent, else its first
/// occurrence's value ([`Val::Empty`] when it has none).
type Slot<'v, 'a> = Option<&'v Val<'a>>;

/// The span attributes that conversion reads, found in one pass over the span's attributes
/// instead of one scan per key. Each slot holds the key's first occurrence, as [`find`] would.
#[derive(Default)]
pub(super) struct SpanAttrs<'v, 'a> {
    /// The built-in lane carriers `x-deploy-lane`, `baggage.x-deploy-lane` (the third, the
    /// baggage header, is `decision[2]`).
    pub(super) lane: [Slot<'v, 'a>; 2],
    /// The user lane carriers present, each key's first occurrence, in attribute order
    /// (empty, and not allocated, on almost every span).
    pub(super) lane_user: Vec<(&'a str, &'v Val<'a>)>,
    pub(super) job_name: Slot<'v, 'a>,
    pub(super) http_status: Slot<'v, 'a>,
    pub(super) http_status_legacy: Slot<'v, 'a>,
    pub(super) grpc_status: Slot<'v, 'a>,
    pub(super) rpc_status: Slot<'v, 'a>,
    pub(super) messaging_system: Slot<'v, 'a>,
    pub(super) consumer_group: Slot<'v, 'a>,
    pub(super) rocketmq_group: Slot<'v, 'a>,
    pub(super) kafka_group: Slot<'v, 'a>,
    /// Indexed by [`source_slot`].
    pub(super) decision: [Slot<'v, 'a>; 3],
}

impl<'v, 'a> SpanAttrs<'v, 'a> {
    /// The slots of `attrs`, with the user lane carriers whose keys are `lane_user_keys`
    /// (with none configured, nothing more is compared).
    pub(super) fn of(attrs: &'v [Kv<'a>], lane_user_keys: &[&str]) -> Self {
        let mut s = Self::default();
        for kv in attrs {
            if !lane_user_keys.is_empty()
                && lane_user_keys.contains(&kv.key)
                && !s.lane_user.iter().any(|(k, _)| *k == kv.key)
            {
                s.lane_user.push((kv.key, &kv.value));
            }
            let slot = match kv.key {
                KEY_JOB_NAME => &mut s.job_name,
                KEY_HTTP_RESPONSE_STATUS_CODE => &mut s.http_status,
                KEY_HTTP_STATUS_CODE => &mut s.http_status_legacy,
                KEY_RPC_GRPC_STATUS_CODE => &mut s.grpc_status,
                KEY_RPC_RESPONSE_STATUS_CODE => &mut s.rpc_status,
                KEY_MESSAGING_SYSTEM => &mut s.messaging_system,
                KEY_MESSAGING_CONSUMER_GROUP_NAME => &mut s.consumer_group,
                KEY_MESSAGING_ROCKETMQ_CLIENT_GROUP => &mut s.rocketmq_group,
                KEY_MESSAGING_KAFKA_CONSUMER_GROUP => &mut s.kafka_group,
                KEY_DECISION_ATTRIBUTE => &mut s.decision[0],
                KEY_DECISION_BAGGAGE_ATTRIBUTE => &mut s.decision[1],
                KEY_DECISION_BAGGAGE_HEADER => &mut s.decision[2],
                KEY_LANE_TAG => &mut s.lane[0],
                KEY_LANE_BAGGAGE_TAG => &mut s.lane[1],
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(&kv.value);
            }
        }
        s
    }

    pub(super) fn get_str(slot: Slot<'v, 'a>) -> Option<&'a str> {
        slot.and_then(str_value)
    }
}

/// Per-resource values, computed once and repeated on each of its spans.
pub(super) struct ResourceInfo {
    pub(super) service_name: String,
    pub(super) service_version: Option<String>,
    /// `deployment.environment.name`, else `deployment.environment`; empty is none.
    pub(super) environment: Option<String>,
    pub(super) instance_id: String,
    pub(super) host_name: Option<String>,
    pub(super) color: &'static str,
    pub(super) color_rule: String,
    /// `None` when lane resolution is skipped (bench only).
    pub(super) lane: Option<InstanceLane>,
    pub(super) attributes_json: String,
}

/// The value of `service.name` when the resource has none (the SDKs' default prefix).
pub const UNKNOWN_SERVICE: &str = "unknown_service";
/// The value of `instance_id` when the resource names no instance.
pub const UNKNOWN_INSTANCE: &str = "unknown_instance";

/// The text of a resource attribute as the lane rules read it: a string, or a boolean as
/// `true` / `false` (Nacos metadata such as `gray=true` may be sent as either).
fn lane_text<'a>(v: &Val<'a>) -> Option<&'a str> {
    match v {
        Val::Str(s) => Some(s),
        Val::Bool(true) => Some("true"),
        Val::Bool(false) => Some("false"),
        _ => None,
    }
}

pub(super) fn resource_info(
    attrs: &[Kv<'_>],
    rules: &ColorRules,
    lane_rules: Option<&LaneRules>,
) -> ResourceInfo {
    let host_name = find_str(attrs, KEY_HOST_NAME).map(str::to_owned);
    let instance_id = [KEY_SERVICE_INSTANCE_ID, KEY_HOST_NAME, KEY_K8S_POD_NAME]
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
        service_name: find_str(attrs, KEY_SERVICE_NAME)
            .filter(|s| !s.is_empty())
            .unwrap_or(UNKNOWN_SERVICE)
            .to_owned(),
        service_version: find_str(attrs, KEY_SERVICE_VERSION).map(str::to_owned),
        environment: [KEY_DEPLOYMENT_ENVIRONMENT_NAME, KEY_DEPLOYMENT_ENVIRONMENT]
            .iter()
            .find_map(|k| find_str(attrs, k).filter(|s| !s.is_empty()))
            .map(str::to_owned),
        instance_id,
        host_name,
        color: resolved.color.as_str(),
        color_rule: resolved.rule.to_owned(),
        lane: lane_rules.map(|r| r.resolve(|k| find(attrs, k).and_then(lane_text))),
        attributes_json,
    }
}
