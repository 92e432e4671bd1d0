//! The time range every page takes (`?from=&to=`, RFC 3339 or Unix ns): parsing, bounds,
//! and the default — the last 5 minutes, or, when the newest span is older than that (an
//! imported capture), the hour that ends at the newest span.

use dyeline_model::time::{now_unix_nano, parse_time};

use crate::locale::{Lang, Zone};
use crate::source::TimeRange;

/// The default range's length when data is live, ns (5 minutes).
pub const LIVE_RANGE_NS: i64 = 5 * 60 * 1_000_000_000;
/// The default range's length for a capture whose newest span is older, ns (1 hour).
pub const CAPTURE_RANGE_NS: i64 = 60 * 60 * 1_000_000_000;
/// The longest range a page reads, ns (24 hours).
pub const MAX_RANGE_NS: i64 = 24 * 60 * 60 * 1_000_000_000;

/// Why a page's `?from=&to=` was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RangeError {
    /// A bound that is no time: the text, and the zone a time without offset is read in.
    Unparsable(String, &'static str),
    /// `from` not before `to` (both as the page shows them).
    Order(String, String),
    /// Longer than [`MAX_RANGE_NS`].
    TooLong,
}

impl RangeError {
    /// The message in `lang`.
    pub fn message(&self, lang: Lang) -> String {
        match self {
            Self::Unparsable(text, zone) => {
                tr!(
                    lang,
                    "range.unparsable",
                    text = format!("{text:?}"),
                    zone = zone
                )
            }
            Self::Order(from, to) => tr!(lang, "range.order", from = from, to = to),
            Self::TooLong => tr!(lang, "range.too_long"),
        }
    }
}

impl std::fmt::Display for RangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message(Lang::En))
    }
}

/// [`parse_time`] (RFC 3339 with its offset, or Unix ns), or a time typed without an offset
/// read in `zone` (the zone the page shows).
fn parse(text: &str, zone: &Zone) -> Result<i64, RangeError> {
    parse_time(text)
        .ok()
        .or_else(|| zone.parse_local(text))
        .ok_or_else(|| RangeError::Unparsable(text.to_owned(), zone.name()))
}

/// Now in Unix ns, in whole seconds, so viewers of a live range within one second share the
/// source's cached load (the pages and the server's warm-up both start from it).
pub fn now_whole_seconds() -> i64 {
    now_unix_nano() / 1_000_000_000 * 1_000_000_000
}

/// The range of a page given its `from`/`to` parameters (empty = absent; read in `zone` when
/// typed without an offset), the time `now` and
/// the newest stored span's start. Without `to`: now, or the newest span + 1 ns when that is
/// older than the live range. Without `from`: 5 minutes before `to`, or 1 hour when the
/// capture fallback applied.
///
/// # Errors
/// An unparsable time, `from >= to`, or a range longer than 24 h.
pub fn resolve(
    from: Option<&str>,
    to: Option<&str>,
    now: i64,
    newest_span: Option<i64>,
    zone: &Zone,
) -> Result<TimeRange, RangeError> {
    let read = |s: &str| parse(s, zone);
    let from = from
        .filter(|s| !s.trim().is_empty())
        .map(read)
        .transpose()?;
    let to = to.filter(|s| !s.trim().is_empty()).map(read).transpose()?;
    let stale = newest_span.filter(|&n| n < now - LIVE_RANGE_NS);
    let (to, len) = match (to, stale) {
        (Some(t), _) => (t, LIVE_RANGE_NS),
        (None, Some(newest)) if from.is_none() => (newest + 1, CAPTURE_RANGE_NS),
        (None, _) => (now, LIVE_RANGE_NS),
    };
    let from = from.unwrap_or(to - len);
    if from >= to {
        return Err(RangeError::Order(zone.stamp(from), zone.stamp(to)));
    }
    if to - from > MAX_RANGE_NS {
        return Err(RangeError::TooLong);
    }
    Ok(TimeRange {
        from_unix_nano: from,
        to_unix_nano: to,
    })
}

/// A step that gives 20..=120 points over `range`, rounded to a whole number of seconds
/// from a fixed ladder (1 s … 1 h).
pub fn step_ns(range: &TimeRange) -> i64 {
    const LADDER: [i64; 12] = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600];
    let len = range.to_unix_nano - range.from_unix_nano;
    LADDER
        .iter()
        .map(|s| s * 1_000_000_000)
        .find(|s| len / s <= 120)
        .unwrap_or(3600 * 1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dyeline_model::time::rfc3339_secs;

    #[test]
    fn rates_divide_from_the_first_span_in_the_range() {
        let r = TimeRange {
            from_unix_nano: 0,
            to_unix_nano: 300 * 1_000_000_000,
        };
        assert_eq!(r.rate_seconds(None), 300.0, "no span: the whole range");
        assert_eq!(
            r.rate_seconds(Some(240 * 1_000_000_000)),
            60.0,
            "data for the last minute"
        );
        assert_eq!(r.rate_seconds(Some(-5)), 300.0, "data older than the range");
        assert_eq!(
            r.rate_seconds(Some(400 * 1_000_000_000)),
            1e-9,
            "never divides by zero"
        );
    }

    const NOW: i64 = 1_800_000_000_000_000_000;
    const MIN: i64 = 60_000_000_000;

    #[test]
    fn live_data_opens_on_the_last_five_minutes() {
        let r = resolve(None, None, NOW, Some(NOW - MIN), &Zone::utc()).unwrap();
        assert_eq!((r.from_unix_nano, r.to_unix_nano), (NOW - 5 * MIN, NOW));
        let r = resolve(None, None, NOW, None, &Zone::utc()).unwrap();
        assert_eq!(r.to_unix_nano, NOW);
    }

    #[test]
    fn a_capture_opens_on_the_hour_ending_at_its_newest_span() {
        let newest = NOW - 30 * 24 * 60 * MIN;
        let r = resolve(None, None, NOW, Some(newest), &Zone::utc()).unwrap();
        assert_eq!(
            (r.from_unix_nano, r.to_unix_nano),
            (newest + 1 - 60 * MIN, newest + 1)
        );
    }

    #[test]
    fn explicit_bounds_win_and_are_checked() {
        let r = resolve(
            Some("2026-11-30T12:00:00Z"),
            Some("2026-11-30T13:00:00Z"),
            NOW,
            None,
            &Zone::utc(),
        )
        .unwrap();
        assert_eq!(r.to_unix_nano - r.from_unix_nano, 60 * MIN);
        assert_eq!(rfc3339_secs(r.from_unix_nano), "2026-11-30T12:00:00Z");
        // A range typed in the zone the page shows reads back to the instants it showed.
        let sh = Zone::named("Asia/Shanghai".parse().unwrap());
        let r = resolve(
            Some("2026-11-30 20:00:00"),
            Some(&sh.stamp(r.to_unix_nano)),
            NOW,
            None,
            &sh,
        )
        .unwrap();
        assert_eq!(rfc3339_secs(r.from_unix_nano), "2026-11-30T12:00:00Z");
        assert_eq!(rfc3339_secs(r.to_unix_nano), "2026-11-30T13:00:00Z");
        assert_eq!(sh.stamp(r.from_unix_nano), "2026-11-30T20:00:00+08:00");
        let r = resolve(None, Some("1000000000000"), NOW, None, &Zone::utc()).unwrap();
        assert_eq!(r.from_unix_nano, 1_000_000_000_000 - 5 * MIN);
        assert!(
            resolve(Some("x"), None, NOW, None, &Zone::utc())
                .unwrap_err()
                .to_string()
                .contains("\"x\"")
        );
        let e = resolve(Some("10"), Some("5"), NOW, None, &Zone::utc()).unwrap_err();
        assert!(e.to_string().starts_with("from ("), "{e}");
        assert!(e.message(Lang::ZhCn).contains("必须早于"), "{e:?}");
        assert!(
            resolve(
                Some("0"),
                Some(&(25 * 60 * MIN).to_string()),
                NOW,
                None,
                &Zone::utc()
            )
            .is_err()
        );
    }

    #[test]
    fn steps_give_at_most_120_points() {
        for len in [MIN, 5 * MIN, 60 * MIN, 24 * 60 * MIN] {
            let r = TimeRange {
                from_unix_nano: 0,
                to_unix_nano: len,
            };
            let s = step_ns(&r);
            assert!(len / s <= 120 && len / s >= 20, "{len} {s}");
        }
    }
}
