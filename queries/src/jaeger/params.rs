//! The query parameters of the Jaeger HTTP API as Jaeger's query service reads them
//! (`cmd/query/app/query_parser.go`): durations like `1.2s`, `100ms`, `5us` (Go's
//! `time.ParseDuration`), times in Unix µs (traces) or ms (dependencies), the `tags` JSON object
//! and the `tag=key:value` pairs, and trace ids of 1 to 32 hex digits. Owns the parsing and
//! the refusal messages (each names the parameter); not the SQL the filters become
//! ([`super::reads`]).

use dyeline_model::Color;

/// A parameter the API refuses: the message of its 400.
pub type BadParam = String;

/// A Go duration (`time.ParseDuration`): a sequence of decimal numbers, each with an optional
/// fraction and a unit (`ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`), e.g. `1.2s`, `1h30m`;
/// `0` alone is allowed. In nanoseconds. A sign is refused (a negative span duration cannot
/// be asked for), as is a value past `i64::MAX` ns.
///
/// # Errors
/// The text of the 400, naming `param`.
pub fn parse_duration(param: &str, text: &str) -> Result<i64, BadParam> {
    let bad = |why: &str| format!("unable to parse param '{param}': {why} in duration {text:?}");
    let t = text.trim();
    if t == "0" {
        return Ok(0);
    }
    if t.is_empty() {
        return Err(bad("empty"));
    }
    let mut rest = t;
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .char_indices()
            .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
            .map_or(rest.len(), |(i, _)| i);
        let (num, after) = rest.split_at(num_len);
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(bad("a number is missing"));
        }
        let value: f64 = num.parse().map_err(|_| bad("a number is malformed"))?;
        let unit_len = after
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(after.len(), |(i, _)| i);
        let (unit, next) = after.split_at(unit_len);
        let scale = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(bad("a unit is missing (ns, us, ms, s, m, h)")),
            _ => return Err(bad("unknown unit (ns, us, ms, s, m, h)")),
        };
        total += value * scale;
        rest = next;
    }
    if !total.is_finite() || total >= i64::MAX as f64 {
        return Err(bad("too long"));
    }
    Ok(total.round() as i64)
}

/// A whole number of `unit_ns` since the Unix epoch (`start`, `end` in µs; `endTs` in ms), in
/// nanoseconds.
///
/// # Errors
/// The text of the 400, naming `param`.
pub fn parse_unix(param: &str, text: &str, unit_ns: i64) -> Result<i64, BadParam> {
    let v: i64 = text.trim().parse().map_err(|_| {
        format!("unable to parse param '{param}': {text:?} is not a whole number of Unix time")
    })?;
    v.checked_mul(unit_ns)
        .filter(|ns| *ns >= 0)
        .ok_or_else(|| format!("unable to parse param '{param}': {text:?} is out of range"))
}

/// A trace id as Jaeger takes it: 1 to 32 hex digits (a shorter one is left-padded with
/// zeros), any case; lower-case, 32 digits.
///
/// # Errors
/// The text of the 400.
pub fn parse_trace_id(text: &str) -> Result<String, BadParam> {
    let t = text.trim();
    if t.is_empty() || t.len() > 32 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "cannot parse traceID param: {text:?} is not 1 to 32 hex digits"
        ));
    }
    Ok(format!("{:0>32}", t.to_ascii_lowercase()))
}

/// A span kind as Jaeger writes it (`server`, `client`, `producer`, `consumer`, `internal`),
/// or OTLP's (`SPAN_KIND_SERVER`, any case): the stored upper-case short name.
pub fn span_kind(text: &str) -> Option<&'static str> {
    let t = text.trim().to_ascii_uppercase();
    let t = t.strip_prefix("SPAN_KIND_").unwrap_or(&t);
    ["SERVER", "CLIENT", "PRODUCER", "CONSUMER", "INTERNAL"]
        .into_iter()
        .find(|k| *k == t)
}

/// The stored span kind as Jaeger writes it: lower case, empty for `UNSPECIFIED`.
pub fn jaeger_kind(stored: &str) -> String {
    if stored == "UNSPECIFIED" {
        String::new()
    } else {
        stored.to_ascii_lowercase()
    }
}

/// One tag condition of a trace search: a span of the trace carries it (with the service,
/// operation and durations, on the same span, as in Jaeger). Only tags the store keeps in a
/// column can be searched; any other key is refused ([`parse_tags`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TagFilter {
    /// `error`: `true` for an error span (domain §6.6), `false` for another.
    Error(bool),
    /// `dyeline.color`: the span's instance colour.
    Color(Color),
    /// `dyeline.lane`: the lane of the span's instance (domain §7.1).
    Lane(String),
    /// `dyeline.lane_tag`: the lane tag the span carries.
    LaneTag(String),
    /// `dyeline.decision.<channel>`: the colour decided for the channel in the span's baggage.
    Decision {
        /// Channel id.
        channel: String,
        /// Colour decided.
        color: Color,
    },
    /// `span.kind`: the stored upper-case kind.
    SpanKind(&'static str),
    /// `otel.status_code`: `OK`, `ERROR` or `UNSET`.
    StatusCode(&'static str),
    /// `http.response.status_code` (or the older `http.status_code`).
    HttpStatus(i32),
    /// `rpc.grpc.status_code`.
    GrpcStatus(i32),
    /// A text column by its OpenTelemetry attribute key: (column, value).
    Text(&'static str, String),
}

/// The tag keys a search can filter on, for the refusal of any other.
pub const SEARCHABLE_TAGS: &str = "error, dyeline.color, dyeline.lane, dyeline.lane_tag, \
     dyeline.decision.<channel>, span.kind, otel.status_code, http.response.status_code, \
     http.status_code, rpc.grpc.status_code, messaging.system, \
     messaging.consumer.group.name, job.name, service.instance.id, host.name, service.version";

/// A channel or lane id (domain §1: `[a-z0-9][a-z0-9-]{0,62}`), trimmed and lower-cased.
fn id_of(text: &str) -> Option<String> {
    let t = text.trim().to_ascii_lowercase();
    let mut b = t.bytes();
    let first_ok = b
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok = b.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
    (first_ok && rest_ok && t.len() <= 63).then_some(t)
}

/// One `key` = `value` tag as a filter.
///
/// # Errors
/// The text of the 400: an unknown key (named), or a value the key cannot have.
pub fn tag_filter(key: &str, value: &str) -> Result<TagFilter, BadParam> {
    let bad_value =
        |what: &str| format!("malformed 'tags' parameter: tag {key:?} = {value:?}: {what}");
    let v = value.trim();
    let color = || Color::parse(v).ok_or_else(|| bad_value("the colour is blue or green"));
    let int = || v.parse::<i32>().map_err(|_| bad_value("a whole number"));
    Ok(match key {
        "error" => match v.to_ascii_lowercase().as_str() {
            "true" => TagFilter::Error(true),
            "false" => TagFilter::Error(false),
            _ => return Err(bad_value("true or false")),
        },
        "dyeline.color" => TagFilter::Color(if v.eq_ignore_ascii_case("unknown") {
            Color::Unknown
        } else {
            Color::parse(v).ok_or_else(|| bad_value("blue, green or unknown"))?
        }),
        "dyeline.lane" => TagFilter::Lane(id_of(v).ok_or_else(|| bad_value("not a lane id"))?),
        "dyeline.lane_tag" => {
            TagFilter::LaneTag(id_of(v).ok_or_else(|| bad_value("not a lane id"))?)
        }
        "span.kind" => TagFilter::SpanKind(
            span_kind(v)
                .ok_or_else(|| bad_value("server, client, producer, consumer or internal"))?,
        ),
        "otel.status_code" => TagFilter::StatusCode(
            ["OK", "ERROR", "UNSET"]
                .into_iter()
                .find(|s| s.eq_ignore_ascii_case(v))
                .ok_or_else(|| bad_value("OK, ERROR or UNSET"))?,
        ),
        "http.response.status_code" | "http.status_code" => TagFilter::HttpStatus(int()?),
        "rpc.grpc.status_code" => TagFilter::GrpcStatus(int()?),
        "messaging.system" => TagFilter::Text("messaging_system", value.to_owned()),
        "messaging.consumer.group.name" => TagFilter::Text("consumer_group", value.to_owned()),
        "job.name" => TagFilter::Text("job_name", value.to_owned()),
        "service.instance.id" => TagFilter::Text("instance_id", value.to_owned()),
        "host.name" => TagFilter::Text("host_name", value.to_owned()),
        "service.version" => TagFilter::Text("service_version", value.to_owned()),
        k => match k.strip_prefix("dyeline.decision.") {
            Some(channel) => TagFilter::Decision {
                channel: id_of(channel)
                    .filter(|c| c == channel)
                    .ok_or_else(|| bad_value("the channel is not a channel id"))?,
                color: color()?,
            },
            None => {
                return Err(format!(
                    "malformed 'tags' parameter: the store cannot search tag {key:?}; \
                     searchable tags: {SEARCHABLE_TAGS}"
                ));
            }
        },
    })
}

/// The tag filters of a search: each `tags` value a JSON object of strings (Jaeger's
/// `map[string]string`), each `tag` value a `key:value` pair; a key given twice keeps its
/// last value, as in Jaeger. Sorted by key.
///
/// # Errors
/// The text of the 400: malformed JSON or pair, or a tag [`tag_filter`] refuses.
pub fn parse_tags(json_tags: &[&str], simple_tags: &[&str]) -> Result<Vec<TagFilter>, BadParam> {
    let mut pairs: std::collections::BTreeMap<String, String> = Default::default();
    for tag in simple_tags {
        let Some((k, v)) = tag.split_once(':') else {
            return Err(format!(
                "malformed 'tag' parameter, expecting key:value, received: {tag}"
            ));
        };
        pairs.insert(k.to_owned(), v.to_owned());
    }
    for text in json_tags {
        let map: std::collections::BTreeMap<String, String> = serde_json::from_str(text)
            .map_err(|e| format!("malformed 'tags' parameter, cannot unmarshal JSON: {e}"))?;
        pairs.extend(map);
    }
    pairs.iter().map(|(k, v)| tag_filter(k, v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaeger_durations_as_go_parses_them() {
        let ok = |t: &str| parse_duration("minDuration", t).unwrap();
        assert_eq!(ok("0"), 0);
        assert_eq!(ok("5us"), 5_000);
        assert_eq!(ok("5µs"), 5_000);
        assert_eq!(ok("5μs"), 5_000);
        assert_eq!(ok("100ms"), 100_000_000);
        assert_eq!(ok("1.2s"), 1_200_000_000);
        assert_eq!(ok(".5s"), 500_000_000);
        assert_eq!(ok("1h30m"), 5_400_000_000_000);
        assert_eq!(ok("250ns"), 250);
        for bad in [
            "", "1", "ms", "1.2.3s", "-1s", "+1s", "1d", "1 s", "abc", "1e3ms", ".",
        ] {
            let e = parse_duration("maxDuration", bad).unwrap_err();
            assert!(e.contains("'maxDuration'"), "{bad:?}: {e}");
        }
        assert!(parse_duration("minDuration", "9999999999h").is_err());
    }

    #[test]
    fn jaeger_times_and_trace_ids() {
        assert_eq!(
            parse_unix("start", "1700000000000000", 1_000),
            Ok(1_700_000_000_000_000_000)
        );
        assert!(
            parse_unix("start", "17e5", 1_000)
                .unwrap_err()
                .contains("'start'")
        );
        assert!(parse_unix("end", "-5", 1_000).is_err());
        assert!(parse_unix("endTs", &i64::MAX.to_string(), 1_000_000).is_err());
        assert_eq!(
            parse_trace_id("ABC").unwrap(),
            "00000000000000000000000000000abc"
        );
        let full = "0123456789abcdef0123456789ABCDEF";
        assert_eq!(parse_trace_id(full).unwrap(), full.to_ascii_lowercase());
        for bad in ["", "xyz", "0123456789abcdef0123456789abcdef0", "12-34"] {
            assert!(parse_trace_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn jaeger_tags_become_filters_and_unknown_keys_are_refused() {
        let f = parse_tags(
            &[r#"{"error":"true","dyeline.color":"Green","dyeline.decision.trade":"blue"}"#],
            &["dyeline.lane:Gray", "span.kind:server"],
        )
        .unwrap();
        assert_eq!(
            f,
            vec![
                TagFilter::Color(Color::Green),
                TagFilter::Decision {
                    channel: "trade".into(),
                    color: Color::Blue
                },
                TagFilter::Lane("gray".into()),
                TagFilter::Error(true),
                TagFilter::SpanKind("SERVER"),
            ]
        );
        let e = parse_tags(&[r#"{"http.method":"GET"}"#], &[]).unwrap_err();
        assert!(e.contains("\"http.method\""), "{e}");
        assert!(
            parse_tags(&["{not json"], &[])
                .unwrap_err()
                .contains("cannot unmarshal JSON")
        );
        assert!(
            parse_tags(&[r#"{"error":true}"#], &[]).is_err(),
            "values are strings"
        );
        assert!(
            parse_tags(&[], &["error"])
                .unwrap_err()
                .contains("key:value")
        );
        assert!(parse_tags(&[r#"{"error":"maybe"}"#], &[]).is_err());
        assert!(parse_tags(&[r#"{"dyeline.color":"red"}"#], &[]).is_err());
        assert!(parse_tags(&[r#"{"dyeline.decision.Trade x":"blue"}"#], &[]).is_err());
        assert!(parse_tags(&[r#"{"dyeline.decision.trade":"unknown"}"#], &[]).is_err());
        assert!(parse_tags(&[r#"{"dyeline.lane":"a'b"}"#], &[]).is_err());
        assert_eq!(parse_tags(&["{}"], &[]).unwrap(), vec![]);
    }

    proptest::proptest! {
        #[test]
        fn jaeger_param_parsers_never_panic(key in "\\PC{0,40}", value in "\\PC{0,40}", json in "\\PC{0,80}") {
            let _ = parse_tags(&[json.as_str()], &[key.as_str()]);
            let _ = tag_filter(&key, &value);
            let _ = parse_duration("minDuration", &value);
            let _ = parse_trace_id(&value);
            let _ = parse_unix("start", &value, 1_000);
        }

        #[test]
        fn jaeger_tags_json_of_any_strings_never_panics(pairs in proptest::collection::btree_map("\\PC{0,20}", "\\PC{0,20}", 0..5)) {
            let json = serde_json::to_string(&pairs).unwrap();
            if let Ok(filters) = parse_tags(&[json.as_str()], &[]) {
                proptest::prop_assert_eq!(filters.len(), pairs.len());
            }
        }
    }
}
