//! Channel summary for the dashboard (issue: analyzer, item 5): per time step and colour, the
//! requests (RPC SERVER spans of apps whose effective channel is the channel at their start),
//! errors, exact p50/p99 latency, the observed blue share against the blue_percent in force,
//! and the cross-colour hops found in the step.

use datafusion::prelude::SessionContext;
use dyeline_model::Color;
use dyeline_model::release::ReleaseState;
use dyeline_model::release::Timeline;
use serde::Serialize;

use crate::analyze::detect::windows::window_start;
use crate::analyze::read::scan::load;
use crate::analyze::spans::Spans;
use crate::analyze::{AnalyzerConfig, Report, report};
use crate::sql::SqlError;

/// One colour within one step.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ColorStep {
    /// Requests.
    pub requests: u64,
    /// Errors among them.
    pub errors: u64,
    /// Median duration, ms (null without requests).
    pub p50_ms: Option<f64>,
    /// 99th percentile duration, ms.
    pub p99_ms: Option<f64>,
}

/// One step of the summary.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Step {
    /// Step start, Unix ns (decimal string).
    pub start_unix_nano: String,
    /// Blue instances' requests.
    pub blue: ColorStep,
    /// Green instances' requests.
    pub green: ColorStep,
    /// Requests on instances of unknown colour.
    pub unknown_requests: u64,
    /// blue / (blue + green); null without requests.
    pub blue_share: Option<f64>,
    /// The channel's blue_percent at the step's end (null while it is idle).
    pub blue_percent: Option<u8>,
    /// Cross-colour hops of the channel in the step.
    pub hops: u64,
}

/// How a summary's p50/p99 were computed.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Percentiles {
    /// Nearest rank over every request's duration.
    Exact,
    /// From the per-minute DDSketches of [`crate::rollup::Rollup`]: within
    /// [`crate::rollup::SKETCH_RELATIVE_ACCURACY`] of a true value at that rank.
    Estimated,
}

/// The summary answer.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Summary {
    /// Channel id.
    pub channel: String,
    /// Step length, seconds.
    pub step_seconds: u64,
    /// Steps in time order (every step of the range, empty ones included).
    pub steps: Vec<Step>,
    /// `exact` (a scan of the spans) or `estimated` (the live per-minute rollups).
    pub percentiles: Percentiles,
}

type StepAcc = (Vec<i64>, Vec<i64>, u64, u64, u64);

/// The nearest-rank percentile `p` (0..=1; rank `round((n - 1) · p)`) of `durations_ns`, in
/// ms, or `None` when empty: the exact percentile of the summary and the dashboard. Reorders
/// the slice (a selection, O(n), not a sort); calling it again on the same slice for another
/// `p` is still exact.
pub fn percentile_ms(durations_ns: &mut [i64], p: f64) -> Option<f64> {
    if durations_ns.is_empty() {
        return None;
    }
    let i = ((durations_ns.len() as f64 - 1.0) * p).round() as usize;
    let (_, v, _) = durations_ns.select_nth_unstable(i);
    Some(*v as f64 / 1e6)
}

/// Summarises channel `channel` over `[from, to)` in steps of `step_ns`.
///
/// # Errors
/// [`SqlError`] when the scan fails; [`SqlError::Syntax`] for a range of more than 10,000
/// steps or a non-positive step.
pub async fn channel_summary(
    ctx: &SessionContext,
    timeline: &Timeline,
    config: &AnalyzerConfig,
    channel: &str,
    from: i64,
    to: i64,
    step_ns: i64,
) -> Result<Summary, SqlError> {
    check_steps(from, to, step_ns)?;
    // One scan serves both the requests and the hops; each span's effective channel is
    // the one `load` resolved from the timeline.
    let spans = load(ctx, timeline, Some(from), Some(to)).await?;
    let report = report(&spans, config, false);
    summarize(&spans, &report, timeline, channel, from, to, step_ns)
}

/// The step `[start, end)` (`end`: the step's end, or the summary's if earlier), from its
/// blue and green requests: the blue share of blue + green (null without requests) and the
/// channel's blue_percent in force at its last nanosecond (null while the channel is idle).
/// Both the scan and the rollups ([`crate::rollup::Rollup::summary`]) build their steps here.
pub(crate) fn make_step(
    timeline: &Timeline,
    channel: &str,
    start: i64,
    end: i64,
    [blue, green]: [ColorStep; 2],
    unknown_requests: u64,
    hops: u64,
) -> Step {
    let total = (blue.requests + green.requests) as f64;
    Step {
        start_unix_nano: start.to_string(),
        blue_share: (total > 0.0).then(|| blue.requests as f64 / total),
        blue_percent: timeline
            .channel_at(channel, end - 1)
            .filter(|c| c.state == ReleaseState::Releasing)
            .map(|c| c.blue_percent),
        blue,
        green,
        unknown_requests,
        hops,
    }
}

pub(crate) fn check_steps(from: i64, to: i64, step_ns: i64) -> Result<(), SqlError> {
    if step_ns <= 0 || to <= from || (to - from) / step_ns > 10_000 {
        return Err(SqlError::Syntax(
            "give from < to and a positive step, at most 10000 steps".into(),
        ));
    }
    Ok(())
}

/// As [`channel_summary`], over spans already loaded for `[from, to)` and their report (the
/// dashboard reuses one load for all its panels).
///
/// # Errors
/// [`SqlError::Syntax`] for a range of more than 10,000 steps or a non-positive step.
pub fn summarize(
    spans: &Spans,
    report: &Report,
    timeline: &Timeline,
    channel: &str,
    from: i64,
    to: i64,
    step_ns: i64,
) -> Result<Summary, SqlError> {
    check_steps(from, to, step_ns)?;
    let first = window_start(from, step_ns);
    let n = ((to - first) + step_ns - 1) / step_ns;
    // per step: (blue durations, green durations, blue errors, green errors, unknown requests)
    let mut per: Vec<StepAcc> = vec![(Vec::new(), Vec::new(), 0, 0, 0); n as usize];
    let channel_id = spans.channels.get(channel);
    for s in spans
        .iter()
        .filter(|s| s.is_request() && s.channel.get().is_some() && s.channel.get() == channel_id)
    {
        let Some(slot) = per.get_mut(((s.start - first) / step_ns) as usize) else {
            continue;
        };
        let duration = s.end.saturating_sub(s.start).max(0);
        match s.color {
            Color::Blue => {
                slot.0.push(duration);
                slot.2 += u64::from(s.is_error);
            }
            Color::Green => {
                slot.1.push(duration);
                slot.3 += u64::from(s.is_error);
            }
            Color::Unknown => slot.4 += 1,
        }
    }
    let mut hops = vec![0u64; n as usize];
    for h in report
        .cross_color_hops
        .iter()
        .filter(|h| h.channel == channel)
    {
        if let Some(slot) = hops.get_mut(((h.t_unix_nano - first) / step_ns) as usize) {
            *slot += 1;
        }
    }
    let steps = per
        .into_iter()
        .enumerate()
        .map(|(i, (mut b, mut g, be, ge, unknown))| {
            let color = |d: &mut [i64], errors| ColorStep {
                requests: d.len() as u64,
                errors,
                p50_ms: percentile_ms(d, 0.5),
                p99_ms: percentile_ms(d, 0.99),
            };
            let start = first + i as i64 * step_ns;
            make_step(
                timeline,
                channel,
                start,
                (start + step_ns).min(to),
                [color(&mut b, be), color(&mut g, ge)],
                unknown,
                hops[i],
            )
        })
        .collect();
    Ok(Summary {
        channel: channel.to_owned(),
        step_seconds: (step_ns / 1_000_000_000) as u64,
        steps,
        percentiles: Percentiles::Exact,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::percentile_ms;

    proptest! {
        /// The selection gives the nearest-rank value of the sorted durations, for p50 then
        /// p99 on the same (reordered) slice.
        #[test]
        fn percentiles_are_the_sorted_ranks(mut d in prop::collection::vec(0i64..5_000_000_000, 0..300)) {
            let mut sorted = d.clone();
            sorted.sort_unstable();
            let rank = |p: f64| {
                (!sorted.is_empty())
                    .then(|| sorted[((sorted.len() as f64 - 1.0) * p).round() as usize] as f64 / 1e6)
            };
            prop_assert_eq!(percentile_ms(&mut d, 0.5), rank(0.5));
            prop_assert_eq!(percentile_ms(&mut d, 0.99), rank(0.99));
        }
    }
}
