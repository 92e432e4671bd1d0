//! The channel page's per-app table: work per app and colour (RPC requests served, MQ
//! messages consumed, JOB runs), error rates, p99 and unknown-colour requests, with a filter.

use leptos::prelude::*;

use super::range_fields;
use crate::pages::{Chrome, error_rate, millis, per_second};
use crate::source::AppRow;

/// The apps of `rows` whose name contains `filter` (case-insensitive; all without one), rates
/// over `seconds`, and the filter form (which keeps a fixed range).
#[component]
pub fn AppTable<'a>(
    /// The page's frame (its path, range and links that keep it).
    chrome: &'a Chrome,
    /// Every app of the channel.
    rows: &'a [AppRow],
    /// The text an app's name must contain (case-insensitive); all apps without one.
    filter: Option<&'a str>,
    /// The length of the range, the denominator of the rates.
    seconds: f64,
) -> impl IntoView + use<> {
    let secs = seconds;
    let l = chrome.lang;
    let needle = filter.unwrap_or("").to_lowercase();
    let apps = rows
        .iter()
        .filter(|a| needle.is_empty() || a.app.to_lowercase().contains(&needle))
        .map(|a| {
            view! {
                <tr>
                    <td>{a.app.clone()}</td>
                    <td class="num">{per_second(a.blue.requests, secs)}</td>
                    <td class="num">{per_second(a.green.requests, secs)}</td>
                    <td class="num">{error_rate(&a.blue)}</td>
                    <td class="num">{error_rate(&a.green)}</td>
                    <td class="num">{millis(a.blue.p99_ms)}</td>
                    <td class="num">{millis(a.green.p99_ms)}</td>
                    <td class="num">{a.unknown_requests}</td>
                </tr>
            }
        })
        .collect_view();
    let path = chrome.path.clone();
    let filter_value = filter.unwrap_or("").to_owned();
    view! {
        <h2>{tr!(l, "apps.title")}</h2>
        <p class="hint">{tr!(l, "apps.hint")}</p>
        <form method="get" action=path class="inline">
            {range_fields(chrome)}
            <label>{tr!(l, "apps.filter_label")} " " <input name="app" value=filter_value/></label>
            <button type="submit">{tr!(l, "apps.filter")}</button>
        </form>
        <table class="data" id="apps">
            <thead><tr><th>{tr!(l, "col.app")}</th><th>{tr!(l, "col.blue_work")}</th><th>{tr!(l, "col.green_work")}</th><th>{tr!(l, "col.blue_errors")}</th><th>{tr!(l, "col.green_errors")}</th><th>{tr!(l, "col.blue_p99")}</th><th>{tr!(l, "col.green_p99")}</th><th>{tr!(l, "col.unknown_requests")}</th></tr></thead>
            <tbody>{apps}</tbody>
        </table>
    }
}
