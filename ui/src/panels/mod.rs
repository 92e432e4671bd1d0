//! The dashboard's panels, one Leptos `#[component]` per file (server-side rendered, no
//! hydration), each drawing one chart, table or form from the view models of
//! [`crate::source`]; the page bodies in [`crate::pages`] place them. Also here: what
//! several panels share (an operation's label, the charts' points and annotations, example
//! trace links, the hidden range fields of a form).

pub mod alerts;
pub mod app_table;
pub mod blue_share_chart;
pub mod channel_table;
pub mod color_load;
pub mod controls;
pub mod event_log;
pub mod hop_edges;
pub mod instances;
pub mod lane_error_chart;
pub mod lane_findings;
pub mod lane_matrix;
pub mod latency_histogram;
pub mod missing_decisions;
pub mod unknown_instances;
pub mod window_findings;

pub use alerts::Alerts;
pub use app_table::AppTable;
pub use blue_share_chart::BlueShareChart;
pub use channel_table::ChannelTable;
pub use color_load::{ColorLoadChart, LoadMetric};
pub use controls::Controls;
pub use event_log::EventLog;
pub use hop_edges::HopEdges;
pub use instances::Instances;
pub use lane_error_chart::LaneErrorChart;
pub use lane_findings::LaneFindings;
pub use lane_matrix::LaneMatrix;
pub use latency_histogram::LatencyHistogram;
pub use missing_decisions::MissingDecisions;
pub use unknown_instances::UnknownInstances;
pub use window_findings::{DrainedByKind, WindowFindings};

use leptos::prelude::*;

use crate::chart::Annotation;
use crate::pages::{Chrome, trace_link};
use crate::source::{OpLine, Step};
use dyeline_model::time::rfc3339_secs;

/// An operation as the chart and the event log name it: `→ 10%` for a ratio, else its name.
pub fn op_label(op: &OpLine) -> String {
    match (op.op.as_str(), op.blue_percent) {
        ("ratio", Some(p)) => format!("→ {p}%"),
        (name, _) => name.to_owned(),
    }
}

/// The charts' vertical lines: one per operation.
pub fn annotations(ops: &[OpLine]) -> Vec<Annotation> {
    ops.iter()
        .map(|o| Annotation {
            t_unix_nano: o.t_unix_nano,
            label: op_label(o),
        })
        .collect()
}

/// A chart series' points: `value` of each step at its start.
pub fn step_points(
    steps: &[Step],
    value: impl Fn(&Step) -> Option<f64>,
) -> Vec<(i64, Option<f64>)> {
    steps
        .iter()
        .map(|s| (s.start_unix_nano, value(s)))
        .collect()
}

/// Links to the first three of a row's example traces.
pub fn example_traces(trace_ids: &[String]) -> impl IntoView + use<> {
    trace_ids
        .iter()
        .take(3)
        .map(|t| view! { {trace_link(t)} " " })
        .collect_view()
}

/// Hidden `from`/`to` fields that keep a fixed range through a form; none for a live range.
pub fn range_fields(chrome: &Chrome) -> Option<impl IntoView + use<>> {
    (!chrome.range_query().is_empty()).then(|| {
        view! {
            <input type="hidden" name="from" value=rfc3339_secs(chrome.range.from_unix_nano)/>
            <input type="hidden" name="to" value=rfc3339_secs(chrome.range.to_unix_nano)/>
        }
    })
}
