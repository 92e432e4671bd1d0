//! Instants as Dyeline speaks them: Unix nanoseconds (`i64`, or [`UnixNanos`] in JSON
//! documents), read from the clock ([`now_unix_nano`]), parsed from what people type
//! ([`parse_time`]: RFC 3339 or Unix nanoseconds) and written as RFC 3339 UTC ([`rfc3339`] to
//! the nanosecond, [`rfc3339_secs`] to the second). The one copy every crate uses.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use utoipa::ToSchema;

/// A time in Unix nanoseconds. JSON: a decimal string (as written; exact beyond 2^53) or a
/// number (as read).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, ToSchema)]
#[schema(value_type = String, example = "1735732800000000000")]
pub struct UnixNanos(pub i64);

impl Serialize for UnixNanos {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for UnixNanos {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Int(i64),
            Text(String),
        }
        match Repr::deserialize(d)? {
            Repr::Int(v) => Ok(UnixNanos(v)),
            Repr::Text(s) => s
                .trim()
                .parse()
                .map(UnixNanos)
                .map_err(|_| serde::de::Error::custom(format!("{s:?} is not Unix nanoseconds"))),
        }
    }
}

/// A time that is neither RFC 3339 nor an integer of Unix nanoseconds; holds the text as given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is neither RFC 3339 nor Unix nanoseconds")]
pub struct BadTime(pub String);

/// Current Unix time in nanoseconds.
pub fn now_unix_nano() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Current Unix time in milliseconds ([`now_unix_nano`] truncated): the unit of write times
/// (file names, checkpoints) and heartbeats.
pub fn now_unix_ms() -> i64 {
    now_unix_nano() / 1_000_000
}

/// Parses a time given as RFC 3339 (`2026-11-30T12:00:00Z`) or an integer of Unix
/// nanoseconds, surrounding whitespace ignored.
///
/// # Errors
/// [`BadTime`] naming the text, for anything else.
pub fn parse_time(text: &str) -> Result<i64, BadTime> {
    let t = text.trim();
    if let Ok(n) = t.parse::<i64>() {
        return Ok(n);
    }
    chrono::DateTime::parse_from_rfc3339(t)
        .ok()
        .and_then(|d| d.timestamp_nanos_opt())
        .ok_or_else(|| BadTime(text.to_owned()))
}

/// RFC 3339 UTC text of Unix nanoseconds, with as many fractional digits as needed (none, 3, 6
/// or 9): `2026-11-30T12:00:00.250Z`.
pub fn rfc3339(t_unix_nano: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(t_unix_nano)
        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// RFC 3339 UTC text of Unix nanoseconds, truncated to the second: `2026-11-30T12:00:00Z`.
pub fn rfc3339_secs(t_unix_nano: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(t_unix_nano)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanos_read_from_string_or_number_and_write_as_string() {
        let a: UnixNanos = serde_json::from_str("\"1735732800000000001\"").unwrap();
        let b: UnixNanos = serde_json::from_str("1735732800000000001").unwrap();
        assert_eq!(a, b);
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            "\"1735732800000000001\""
        );
        assert!(serde_json::from_str::<UnixNanos>("\"soon\"").is_err());
    }

    #[test]
    fn times_parse_as_rfc3339_or_nanos() {
        assert_eq!(
            parse_time("1735732800000000000").unwrap(),
            1_735_732_800_000_000_000
        );
        assert_eq!(
            parse_time("2025-01-01T12:00:00Z").unwrap(),
            1_735_732_800_000_000_000
        );
        assert!(parse_time("yesterday").is_err());
        assert_eq!(
            parse_time(" soon ").unwrap_err().to_string(),
            "\" soon \" is neither RFC 3339 nor Unix nanoseconds"
        );
    }

    #[test]
    fn rfc3339_is_exact_and_rfc3339_secs_truncates() {
        let t = 1_735_732_800_250_000_000;
        assert_eq!(rfc3339(t), "2025-01-01T12:00:00.250Z");
        assert_eq!(rfc3339_secs(t), "2025-01-01T12:00:00Z");
        assert_eq!(rfc3339(t - 250_000_000), "2025-01-01T12:00:00Z");
        assert_eq!(rfc3339(t + 1), "2025-01-01T12:00:00.250000001Z");
        assert_eq!(parse_time(&rfc3339(t + 1)).unwrap(), t + 1);
    }
}
