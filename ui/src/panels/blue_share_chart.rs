//! The channel page's first chart: blue share observed against blue_percent in force, with
//! every operation drawn as a labelled line.

use leptos::prelude::*;

use super::{annotations, step_points};
use crate::chart::{Series, line_chart};
use crate::locale::{Lang, Zone};
use crate::source::{OpLine, Step, TimeRange};

/// Observed blue share (solid, circles) against blue_percent in force (dashed steps) over
/// `range`, one point per step, `ops` as annotations.
#[component]
pub fn BlueShareChart<'a>(
    /// The page's language.
    lang: Lang,
    /// The zone of the time axis.
    zone: Zone,
    /// The time axis.
    range: TimeRange,
    /// One point per step: the observed share and blue_percent in force.
    steps: &'a [Step],
    /// The release operations drawn as annotations.
    ops: &'a [OpLine],
) -> impl IntoView + use<> {
    let l = lang;
    let share = line_chart(
        &tr!(l, "charts.share_title"),
        range.from_unix_nano,
        range.to_unix_nano,
        &[
            Series {
                label: tr!(l, "charts.blue_percent_in_force"),
                class: "s-target",
                marker: "none",
                step: true,
                points: step_points(steps, |s| s.blue_percent.map(f64::from)),
            },
            Series {
                label: tr!(l, "charts.observed_share"),
                class: "s-blue",
                marker: "circle",
                step: false,
                points: step_points(steps, |s| s.blue_share.map(|v| v * 100.0)),
            },
        ],
        &annotations(ops),
        Some(100.0),
        "%",
        &zone,
    );
    view! {
        <figure><figcaption>{tr!(l, "charts.share_caption")}</figcaption><div inner_html=share></div></figure>
    }
}
