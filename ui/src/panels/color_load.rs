//! The channel page's per-colour charts: requests/s, error rate and p99 latency, blue
//! against green, with every operation drawn as a labelled line.

use leptos::prelude::*;

use super::{annotations, step_points};
use crate::chart::{Series, line_chart};
use crate::source::{ColorLoad, OpLine, Step, TimeRange};

/// What a [`ColorLoadChart`] draws of each colour's load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadMetric {
    /// Requests per second of the step.
    RequestsPerSecond,
    /// Errors / requests, as a percentage.
    ErrorRate,
    /// 99th percentile duration, ms.
    P99,
}

impl LoadMetric {
    fn title(self) -> &'static str {
        match self {
            LoadMetric::RequestsPerSecond => "Requests per second by colour",
            LoadMetric::ErrorRate => "Error rate by colour",
            LoadMetric::P99 => "p99 latency by colour",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            LoadMetric::RequestsPerSecond => "/s",
            LoadMetric::ErrorRate => "%",
            LoadMetric::P99 => " ms",
        }
    }

    fn caption(self) -> &'static str {
        match self {
            LoadMetric::RequestsPerSecond => {
                "Requests/s: blue (solid, circles), green (dashed, squares)"
            }
            LoadMetric::ErrorRate => "Error rate: blue (solid, circles), green (dashed, squares)",
            LoadMetric::P99 => "p99 latency: blue (solid, circles), green (dashed, squares)",
        }
    }

    /// The value of `load` over a step of `step_seconds`.
    fn value(self, load: &ColorLoad, step_seconds: f64) -> Option<f64> {
        match self {
            LoadMetric::RequestsPerSecond => Some(load.requests as f64 / step_seconds),
            LoadMetric::ErrorRate => load.error_rate().map(|r| r * 100.0),
            LoadMetric::P99 => load.p99_ms,
        }
    }
}

/// `metric` of blue (solid, circles) and green (dashed, squares) over `range`, one point per
/// step of `step_seconds`, `ops` as annotations.
#[component]
pub fn ColorLoadChart<'a>(
    /// What is drawn of each colour's load.
    metric: LoadMetric,
    /// The time axis.
    range: TimeRange,
    /// The length of one step.
    step_seconds: u64,
    /// One point per step.
    steps: &'a [Step],
    /// The release operations drawn as annotations.
    ops: &'a [OpLine],
) -> impl IntoView + use<> {
    let step_s = step_seconds.max(1) as f64;
    let chart = line_chart(
        metric.title(),
        range.from_unix_nano,
        range.to_unix_nano,
        &[
            Series {
                label: "blue".into(),
                class: "s-blue",
                marker: "circle",
                step: false,
                points: step_points(steps, |s| metric.value(&s.blue, step_s)),
            },
            Series {
                label: "green".into(),
                class: "s-green",
                marker: "square",
                step: false,
                points: step_points(steps, |s| metric.value(&s.green, step_s)),
            },
        ],
        &annotations(ops),
        None,
        metric.unit(),
    );
    view! {
        <figure><figcaption>{metric.caption()}</figcaption><div inner_html=chart></div></figure>
    }
}
