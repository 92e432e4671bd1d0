//! The channel page's per-colour charts: requests/s, error rate and p99 latency, blue
//! against green, with every operation drawn as a labelled line.

use leptos::prelude::*;

use super::{annotations, step_points};
use crate::chart::{Series, line_chart};
use crate::locale::{Lang, Zone};
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
    fn title(self, l: Lang) -> String {
        match self {
            LoadMetric::RequestsPerSecond => tr!(l, "charts.rps_title"),
            LoadMetric::ErrorRate => tr!(l, "charts.error_title"),
            LoadMetric::P99 => tr!(l, "charts.p99_title"),
        }
    }

    fn unit(self) -> &'static str {
        match self {
            LoadMetric::RequestsPerSecond => "/s",
            LoadMetric::ErrorRate => "%",
            LoadMetric::P99 => " ms",
        }
    }

    fn caption(self, l: Lang) -> String {
        match self {
            LoadMetric::RequestsPerSecond => tr!(l, "charts.rps_caption"),
            LoadMetric::ErrorRate => tr!(l, "charts.error_caption"),
            LoadMetric::P99 => tr!(l, "charts.p99_caption"),
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
    /// The page's language.
    lang: Lang,
    /// The zone of the time axis.
    zone: Zone,
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
    let l = lang;
    let chart = line_chart(
        &metric.title(l),
        range.from_unix_nano,
        range.to_unix_nano,
        &[
            Series {
                label: tr!(l, "color.blue"),
                class: "s-blue",
                marker: "circle",
                step: false,
                points: step_points(steps, |s| metric.value(&s.blue, step_s)),
            },
            Series {
                label: tr!(l, "color.green"),
                class: "s-green",
                marker: "square",
                step: false,
                points: step_points(steps, |s| metric.value(&s.green, step_s)),
            },
        ],
        &annotations(ops),
        None,
        metric.unit(),
        &zone,
    );
    view! {
        <figure><figcaption>{metric.caption(l)}</figcaption><div inner_html=chart></div></figure>
    }
}
