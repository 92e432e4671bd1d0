//! A stored span's detail read back as OpenTelemetry named it: the attributes the collector
//! promoted to columns under their OpenTelemetry keys ([`PROMOTED_SPAN`],
//! [`PROMOTED_RESOURCE`]), and the JSON text of the `attributes`, `resource_attributes`,
//! `events` and `links` columns as [`Attribute`]s, [`SpanEvent`]s and [`SpanLink`]s. The trace
//! view (drilldown), the Jaeger API and the attribute filter of trace search read them here.
//!
//! Owns the JSON shapes the collector writes (`collector/src/convert/json_out.rs`) as the
//! readers see them. Does not own which keys are promoted (the collector does; this mirrors
//! it, and a test in the e2e suite reads them back through an SDK).

use serde::Serialize;
use utoipa::ToSchema;

/// A promoted span attribute: its OpenTelemetry key, its column, and whether the column is
/// an integer (the status codes) rather than text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Promoted {
    /// The OpenTelemetry key (the current name where the collector reads two).
    pub key: &'static str,
    /// The column of `spans` that holds it.
    pub column: &'static str,
    /// An `Int32` column (else `Utf8`).
    pub integer: bool,
}

/// The span attributes stored as columns, left out of the `attributes` column. The legacy
/// `http.status_code` is stored in the column of `http.response.status_code`.
pub const PROMOTED_SPAN: [Promoted; 7] = [
    Promoted {
        key: "http.response.status_code",
        column: "http_status_code",
        integer: true,
    },
    Promoted {
        key: "http.status_code",
        column: "http_status_code",
        integer: true,
    },
    Promoted {
        key: "rpc.grpc.status_code",
        column: "rpc_grpc_status_code",
        integer: true,
    },
    Promoted {
        key: "messaging.system",
        column: "messaging_system",
        integer: false,
    },
    Promoted {
        key: "messaging.consumer.group.name",
        column: "consumer_group",
        integer: false,
    },
    // The legacy key stored in the column of `messaging.consumer.group.name`: a filter on it
    // finds the column (rocketmq's client_group is stored there too).
    Promoted {
        key: "messaging.kafka.consumer.group",
        column: "consumer_group",
        integer: false,
    },
    Promoted {
        key: "job.name",
        column: "job_name",
        integer: false,
    },
];

/// The resource attributes stored as columns, left out of `resource_attributes`.
pub const PROMOTED_RESOURCE: [Promoted; 6] = [
    Promoted {
        key: "service.name",
        column: "service_name",
        integer: false,
    },
    Promoted {
        key: "service.version",
        column: "service_version",
        integer: false,
    },
    Promoted {
        key: "deployment.environment.name",
        column: "deployment_environment",
        integer: false,
    },
    Promoted {
        key: "deployment.environment",
        column: "deployment_environment",
        integer: false,
    },
    Promoted {
        key: "service.instance.id",
        column: "instance_id",
        integer: false,
    },
    Promoted {
        key: "host.name",
        column: "host_name",
        integer: false,
    },
];

/// The promoted span attributes one per column, under the current key (a legacy key shares
/// the column of the current one listed before it), in [`PROMOTED_SPAN`]'s order: what a
/// stored row holds of them.
pub fn promoted_span_columns() -> impl Iterator<Item = Promoted> {
    PROMOTED_SPAN
        .iter()
        .enumerate()
        .filter(|(i, p)| !PROMOTED_SPAN[..*i].iter().any(|q| q.column == p.column))
        .map(|(_, p)| *p)
}

/// The column of a promoted span or resource attribute key.
pub fn promoted(key: &str) -> Option<Promoted> {
    PROMOTED_SPAN
        .iter()
        .chain(PROMOTED_RESOURCE.iter())
        .find(|p| p.key == key)
        .copied()
}

/// One attribute: its key and its value as JSON (strings, numbers, booleans, arrays,
/// objects; bytes as lower-case hex).
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct Attribute {
    /// Key.
    pub key: String,
    /// Value.
    #[schema(value_type = Object)]
    pub value: serde_json::Value,
}

impl Attribute {
    /// The value as text: a string as it is, anything else as JSON.
    pub fn text(&self) -> String {
        value_text(&self.value)
    }
}

/// A JSON value as text: a string as it is, anything else as JSON.
pub fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One span event.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct SpanEvent {
    /// When, Unix ns (decimal string).
    pub time_unix_nano: String,
    /// Its name (`exception`, …).
    pub name: String,
    /// Its attributes.
    pub attributes: Vec<Attribute>,
}

/// One span link (to a span of this trace or another: a batch consumer's producers).
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct SpanLink {
    /// Trace id, lower-case hex.
    pub trace_id: String,
    /// Span id, lower-case hex.
    pub span_id: String,
    /// Its W3C trace state, when it had one.
    pub trace_state: Option<String>,
    /// Its attributes.
    pub attributes: Vec<Attribute>,
}

/// The members of a stored attributes object (`attributes`, `resource_attributes`, an
/// event's or a link's), in key order, one per key; none when `text` is absent or not an
/// object.
pub fn attributes(text: Option<&str>) -> Vec<Attribute> {
    match text.map(serde_json::from_str::<serde_json::Value>) {
        Some(Ok(serde_json::Value::Object(m))) => members(m),
        _ => Vec::new(),
    }
}

fn members(m: serde_json::Map<String, serde_json::Value>) -> Vec<Attribute> {
    m.into_iter()
        .map(|(key, value)| Attribute { key, value })
        .collect()
}

fn object_of(v: &mut serde_json::Value, key: &str) -> Vec<Attribute> {
    match v.get_mut(key).map(serde_json::Value::take) {
        Some(serde_json::Value::Object(m)) => members(m),
        _ => Vec::new(),
    }
}

fn text_of(v: &serde_json::Value, key: &str) -> Option<String> {
    v.get(key).and_then(|s| s.as_str()).map(str::to_owned)
}

/// A time stored in JSON as a number or a decimal string, ns (0 when neither).
fn ns_of(v: Option<&serde_json::Value>) -> i64 {
    match v {
        Some(serde_json::Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(serde_json::Value::String(s)) => s.parse().unwrap_or(0),
        _ => 0,
    }
}

fn array(text: Option<&str>) -> Vec<serde_json::Value> {
    match text.map(serde_json::from_str::<serde_json::Value>) {
        Some(Ok(serde_json::Value::Array(a))) => a,
        _ => Vec::new(),
    }
}

/// The events of a stored `events` value (a JSON array of `{time_unix_nano, name,
/// attributes}`), in order; none when absent or not an array.
pub fn events(text: Option<&str>) -> Vec<SpanEvent> {
    array(text)
        .into_iter()
        .map(|mut e| SpanEvent {
            time_unix_nano: ns_of(e.get("time_unix_nano")).to_string(),
            name: text_of(&e, "name").unwrap_or_default(),
            attributes: object_of(&mut e, "attributes"),
        })
        .collect()
}

/// The links of a stored `links` value (a JSON array of `{trace_id, span_id, trace_state,
/// attributes}`), in order, ids lower case; entries without both ids are left out.
pub fn links(text: Option<&str>) -> Vec<SpanLink> {
    array(text)
        .into_iter()
        .filter_map(|mut l| {
            Some(SpanLink {
                trace_id: text_of(&l, "trace_id")?.to_ascii_lowercase(),
                span_id: text_of(&l, "span_id")?.to_ascii_lowercase(),
                trace_state: text_of(&l, "trace_state"),
                attributes: object_of(&mut l, "attributes"),
            })
        })
        .collect()
}

/// An attribute filter of trace search: `key=value` (the first `=` splits; the value may
/// hold more). A span matches when its attribute, resource attribute or promoted column of
/// that key reads as the value: a string attribute by its text, a number or boolean by its
/// JSON (`retries=2`, `cached=true`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttributeFilter {
    /// The key, as sent.
    pub key: String,
    /// The value, as sent.
    pub value: String,
}

impl AttributeFilter {
    /// Parses `key=value`.
    ///
    /// # Errors
    /// A message for text with no `=` or an empty key, and for a promoted integer key
    /// (`http.response.status_code`, …) whose value is not an integer.
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some((key, value)) = text.split_once('=') else {
            return Err(format!("attribute {text:?} is not key=value"));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(format!("attribute {text:?} has an empty key"));
        }
        if let Some(p) = promoted(key)
            && p.integer
            && value.trim().parse::<i32>().is_err()
        {
            return Err(format!(
                "attribute {key} is an integer; {value:?} is not one"
            ));
        }
        Ok(Self {
            key: key.to_owned(),
            value: value.to_owned(),
        })
    }

    /// True when a stored attributes object's text holds the key with the value.
    pub fn matches_json(&self, text: &str) -> bool {
        attributes(Some(text))
            .iter()
            .any(|a| a.key == self.key && a.text() == self.value)
    }

    /// A SQL condition on `spans` that keeps at least every matching row (exact for a
    /// promoted key; for the JSON columns a `LIKE` on the key, checked exactly by
    /// [`AttributeFilter::matches_json`] after).
    pub fn sql_condition(&self) -> String {
        if let Some(p) = promoted(&self.key) {
            return if p.integer {
                // `parse` checked it.
                let n: i32 = self.value.trim().parse().unwrap_or(i32::MIN);
                format!("{} = {n}", p.column)
            } else {
                format!("{} = '{}'", p.column, self.value.replace('\'', "''"))
            };
        }
        // The key as the collector writes it in JSON, then ':'; LIKE's own characters escaped
        // with a backslash (DataFusion's LIKE escape) and SQL quotes doubled.
        let json_key = serde_json::Value::String(self.key.clone()).to_string();
        let needle = format!("{json_key}:")
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_")
            .replace('\'', "''");
        format!("(attributes LIKE '%{needle}%' OR resource_attributes LIKE '%{needle}%')")
    }

    /// True for a promoted key (the SQL condition is exact).
    pub fn is_promoted(&self) -> bool {
        promoted(&self.key).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_and_links_read_back_as_the_collector_writes_them() {
        let e = events(Some(
            r#"[{"time_unix_nano":"1700000000000000123","name":"exception","attributes":{"exception.type":"Boom","n":2}},{"time_unix_nano":5,"name":"retry"}]"#,
        ));
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].time_unix_nano, "1700000000000000123");
        assert_eq!(e[0].name, "exception");
        assert_eq!(
            e[0].attributes
                .iter()
                .map(|a| (a.key.as_str(), a.text()))
                .collect::<Vec<_>>(),
            vec![("exception.type", "Boom".to_owned()), ("n", "2".to_owned())]
        );
        assert_eq!(
            (e[1].time_unix_nano.as_str(), e[1].attributes.len()),
            ("5", 0)
        );
        let l = links(Some(
            r#"[{"trace_id":"0AF7651916CD43DD8448EB211C80319C","span_id":"b7ad6b7169203331","trace_state":"k=v","attributes":{"messaging.batch":true}},{"span_id":"x"}]"#,
        ));
        assert_eq!(l.len(), 1, "a link without a trace id is left out");
        assert_eq!(l[0].trace_id, "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(l[0].trace_state.as_deref(), Some("k=v"));
        assert_eq!(l[0].attributes[0].text(), "true");
        assert!(events(Some("not json")).is_empty() && links(None).is_empty());
        assert!(attributes(Some("[1]")).is_empty());
    }

    #[test]
    fn each_promoted_column_is_read_once_under_its_current_key() {
        let keys: Vec<&str> = promoted_span_columns().map(|p| p.key).collect();
        assert_eq!(
            keys,
            [
                "http.response.status_code",
                "rpc.grpc.status_code",
                "messaging.system",
                "messaging.consumer.group.name",
                "job.name"
            ]
        );
    }

    #[test]
    fn attribute_filters_parse_match_and_escape() {
        assert!(AttributeFilter::parse("novalue").is_err());
        assert!(AttributeFilter::parse("=x").is_err());
        assert!(AttributeFilter::parse("http.response.status_code=5xx").is_err());
        let f = AttributeFilter::parse("db.statement=a=b").unwrap();
        assert_eq!((f.key.as_str(), f.value.as_str()), ("db.statement", "a=b"));
        assert!(f.matches_json(r#"{"db.statement":"a=b"}"#));
        assert!(!f.matches_json(r#"{"db.statement":"a=bc"}"#));
        let n = AttributeFilter::parse("retries=2").unwrap();
        assert!(n.matches_json(r#"{"retries":2}"#));
        assert!(n.matches_json(r#"{"retries":"2"}"#));
        assert!(!n.matches_json(r#"{"other":2}"#));
        let s = AttributeFilter::parse("http.response.status_code= 503").unwrap();
        assert!(s.is_promoted());
        assert_eq!(s.sql_condition(), "http_status_code = 503");
        let q = AttributeFilter::parse("host.name=o'brien").unwrap();
        assert_eq!(q.sql_condition(), "host_name = 'o''brien'");
        let like = AttributeFilter::parse("a_b%'c=1").unwrap();
        let cond = like.sql_condition();
        assert!(cond.contains(r#"%"a\_b\%''c":%"#), "{cond}");
    }
}
