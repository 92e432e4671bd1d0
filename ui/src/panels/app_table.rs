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
        <h2>"Apps"</h2>
        <p class="hint">"Work per app: RPC requests served, MQ messages consumed and JOB runs."</p>
        <form method="get" action=path class="inline">
            {range_fields(chrome)}
            <label>"Filter apps " <input name="app" value=filter_value/></label>
            <button type="submit">"Filter"</button>
        </form>
        <table class="data" id="apps">
            <thead><tr><th>"app"</th><th>"blue work/s"</th><th>"green work/s"</th><th>"blue errors"</th><th>"green errors"</th><th>"blue p99"</th><th>"green p99"</th><th>"unknown-colour requests"</th></tr></thead>
            <tbody>{apps}</tbody>
        </table>
    }
}
