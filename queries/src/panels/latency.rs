//! The channel page's blue-vs-green latency comparison: one histogram of request durations
//! per colour over the range (the channel's requests: SERVER spans, by their instance's
//! colour), in the same buckets, with each colour's p50, p90 and p99. Shares are per colour,
//! so a canary taking 5 % of the traffic compares shape for shape with the side taking 95 %.

use dyeline_model::Color;

use crate::analyze::spans::SpanRec;
use crate::summary;

/// Upper bounds of the buckets, ms (a 1-2-5 series); the last bucket holds what is slower
/// than the last bound.
pub const BOUNDS_MS: [f64; 13] = [
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1_000.0, 2_000.0, 5_000.0, 10_000.0,
];

/// One colour's histogram and percentiles.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ColorLatency {
    /// Requests in each bucket: `counts[i]` took at most `BOUNDS_MS[i]` and more than the
    /// bound before; the last (`BOUNDS_MS.len()`) more than the last bound.
    pub counts: Vec<u64>,
    /// Requests.
    pub requests: u64,
    /// Median duration, ms (none without requests).
    pub p50_ms: Option<f64>,
    /// 90th percentile, ms.
    pub p90_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
}

/// Blue's and green's latency over the same buckets.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencyComparison {
    /// The buckets' upper bounds, ms ([`BOUNDS_MS`]).
    pub bounds_ms: Vec<f64>,
    /// Blue.
    pub blue: ColorLatency,
    /// Green.
    pub green: ColorLatency,
}

/// Durations (ns) of each colour's requests, finished into a [`LatencyComparison`].
#[derive(Clone, Default)]
pub struct LatencyAcc {
    blue: Vec<i64>,
    green: Vec<i64>,
}

impl LatencyAcc {
    /// Counts `s` when it is a request of a known colour.
    pub fn add(&mut self, s: &SpanRec) {
        if !s.is_request() {
            return;
        }
        let d = s.end.saturating_sub(s.start).max(0);
        match s.color {
            Color::Blue => self.blue.push(d),
            Color::Green => self.green.push(d),
            Color::Unknown => {}
        }
    }

    /// The histograms and percentiles.
    pub fn finish(mut self) -> LatencyComparison {
        LatencyComparison {
            bounds_ms: BOUNDS_MS.to_vec(),
            blue: color(&mut self.blue),
            green: color(&mut self.green),
        }
    }
}

/// The bucket of a duration in ns.
fn bucket(d_ns: i64) -> usize {
    let ms = d_ns as f64 / 1e6;
    BOUNDS_MS
        .iter()
        .position(|b| ms <= *b)
        .unwrap_or(BOUNDS_MS.len())
}

fn color(durations: &mut [i64]) -> ColorLatency {
    let mut counts = vec![0u64; BOUNDS_MS.len() + 1];
    for d in durations.iter() {
        counts[bucket(*d)] += 1;
    }
    ColorLatency {
        counts,
        requests: durations.len() as u64,
        p50_ms: summary::percentile_ms(durations, 0.50),
        p90_ms: summary::percentile_ms(durations, 0.90),
        p99_ms: summary::percentile_ms(durations, 0.99),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_their_upper_bound_and_the_last_holds_the_rest() {
        let ms = 1_000_000;
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(ms), 0);
        assert_eq!(bucket(ms + 1), 1);
        assert_eq!(bucket(7 * ms), 3);
        assert_eq!(bucket(10_000 * ms), 12);
        assert_eq!(bucket(10_000 * ms + 1), 13);
        let mut d: Vec<i64> = (1..=100).map(|k| k * ms).collect();
        let c = color(&mut d);
        assert_eq!(c.requests, 100);
        assert_eq!(c.counts.iter().sum::<u64>(), 100);
        // ≤1, (1,2], (2,5], (5,10], (10,20], (20,50], (50,100]
        assert_eq!(&c.counts[..7], &[1, 1, 3, 5, 10, 30, 50]);
        // The nearest rank: index round(99 × 0.5) = 50 of 0..100.
        assert_eq!(c.p50_ms, Some(51.0));
        assert_eq!(c.p99_ms, Some(99.0));
        assert_eq!(color(&mut []).p50_ms, None);
    }
}
