//! The lanes page's error rate chart of one app: one series per lane (base solid with
//! circles, each other lane with its own dash and marker, each labelled with its name), one
//! point per step.

use leptos::prelude::*;

use crate::chart::{Series, line_chart};
use crate::locale::{Lang, Zone};
use crate::source::{LaneErrorSeries, TimeRange};

/// The CSS class and marker of the `i`-th lane (0: base).
fn style(i: usize) -> (&'static str, &'static str) {
    const STYLES: [(&str, &str); 4] = [
        ("s-base", "circle"),
        ("s-lane1", "square"),
        ("s-lane2", "none"),
        ("s-lane3", "circle"),
    ];
    STYLES[i.min(STYLES.len() - 1)]
}

/// `series.app`'s error rate per lane over `range`.
#[component]
pub fn LaneErrorChart<'a>(
    /// The page's language.
    lang: Lang,
    /// The zone of the time axis.
    zone: Zone,
    /// The time axis.
    range: TimeRange,
    /// The app's points per lane.
    series: &'a LaneErrorSeries,
) -> impl IntoView + use<> {
    let lines: Vec<Series> = series
        .lanes
        .iter()
        .enumerate()
        .map(|(i, (lane, points))| {
            let (class, marker) = style(i);
            Series {
                label: lane.clone(),
                class,
                marker,
                step: false,
                points: points
                    .iter()
                    .map(|&(t, v)| (t, v.map(|r| r * 100.0)))
                    .collect(),
            }
        })
        .collect();
    let l = lang;
    let title = tr!(l, "lane_chart.title", app = series.app);
    let chart = line_chart(
        &title,
        range.from_unix_nano,
        range.to_unix_nano,
        &lines,
        &[],
        None,
        "%",
        &zone,
    );
    let names: Vec<&str> = series.lanes.iter().map(|(l, _)| l.as_str()).collect();
    view! {
        <figure class="lane-errors" data-app=series.app.clone()>
            <figcaption>{tr!(l, "lane_chart.caption", app = series.app, lanes = names.join(", "))}</figcaption>
            <div inner_html=chart></div>
        </figure>
    }
}
