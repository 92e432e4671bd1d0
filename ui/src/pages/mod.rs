//! The pages, rendered to HTML strings with Leptos (`view!` → `to_html`, no hydration): the
//! shared layout (navigation, range picker, live-update hook) and small formatting helpers.
//! Every number a page shows is in its HTML, so pages read the same with JavaScript off.

pub mod channel;
pub mod confirm;
pub mod lanes;
pub mod login;
pub mod overview;
pub mod trace;

use leptos::prelude::*;

use crate::source::{ColorLoad, Identity, TimeRange};
use dyeline_model::time::rfc3339_secs;

/// What every page's frame needs.
#[derive(Clone, Debug)]
pub struct Chrome {
    /// Page title.
    pub title: String,
    /// The request path (the range picker submits to it).
    pub path: String,
    /// The range shown.
    pub range: TimeRange,
    /// True when the range came from `?from=&to=`, false for the default (live) range.
    pub explicit_range: bool,
    /// The signed-in token's owner.
    pub identity: Option<Identity>,
    /// This browser's CSRF secret, for the forms.
    pub csrf: String,
    /// The page refreshes its `<main>` when the server reports new data.
    pub live: bool,
}

impl Chrome {
    /// `from=…&to=…` of the range (RFC 3339), for links that keep it; empty for a live range.
    pub fn range_query(&self) -> String {
        if self.explicit_range {
            format!(
                "from={}&to={}",
                rfc3339_secs(self.range.from_unix_nano),
                rfc3339_secs(self.range.to_unix_nano)
            )
        } else {
            String::new()
        }
    }

    /// `path` with the range kept.
    pub fn link(&self, path: &str) -> String {
        let q = self.range_query();
        if q.is_empty() {
            path.to_owned()
        } else if path.contains('?') {
            format!("{path}&{q}")
        } else {
            format!("{path}?{q}")
        }
    }
}

/// Requests per second of `load` over `seconds`, one decimal.
pub fn per_second(requests: u64, seconds: f64) -> String {
    format!("{:.1}/s", requests as f64 / seconds.max(1e-9))
}

/// A fraction as a percentage with two decimals, `–` for none.
pub fn percent(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{:.2}%", v * 100.0))
}

/// Milliseconds with one decimal, `–` for none.
pub fn millis(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.1} ms"))
}

/// A colour chip: the word, a CSS class and a pattern, never colour alone.
pub fn chip(color: &str) -> impl IntoView + use<> {
    let class = match color {
        "blue" => "chip c-blue",
        "green" => "chip c-green",
        _ => "chip c-unknown",
    };
    view! { <span class=class>{color.to_owned()}</span> }
}

/// Error rate cell of a load.
pub fn error_rate(load: &ColorLoad) -> String {
    percent(load.error_rate())
}

/// Link to a trace page.
pub fn trace_link(id: &str) -> impl IntoView + use<> {
    let short: String = id.chars().take(12).collect();
    view! { <a class="trace" href=format!("/traces/{id}")>{short}"…"</a> }
}

/// Renders a whole HTML document around `body`.
pub fn document(chrome: &Chrome, body: AnyView) -> String {
    let who = match &chrome.identity {
        Some(id) => view! {
            <form class="inline" method="post" action="/logout">
                <input type="hidden" name="csrf" value=chrome.csrf.clone()/>
                <span class="who">"signed in as " {id.name.clone()}</span>
                <button type="submit">"Sign out"</button>
            </form>
        }
        .into_any(),
        None => view! { <a href=format!("/login?next={}", encode(&chrome.path))>"Sign in"</a> }
            .into_any(),
    };
    let to = chrome.range.to_unix_nano;
    let presets = [
        ("5 m", 5 * 60),
        ("1 h", 3600),
        ("6 h", 6 * 3600),
        ("24 h", 24 * 3600),
    ]
    .into_iter()
    .map(|(label, secs)| {
        let href = format!(
            "{}?from={}&to={}",
            chrome.path,
            rfc3339_secs(to - secs * 1_000_000_000),
            rfc3339_secs(to)
        );
        view! { <a href=href>{label}</a> " " }
    })
    .collect_view();
    let mode = if chrome.explicit_range {
        "fixed range"
    } else {
        "live"
    };
    let html = view! {
        <header>
            <nav>
                <a class="brand" href="/">"Dyeline"</a>
                <a href=chrome.link("/")>"Channels"</a>
                <a href=chrome.link("/lanes")>"Lanes"</a>
                <a href=chrome.link("/traces")>"Traces"</a>
                <span class="spacer"></span>
                {who}
            </nav>
            <form class="range" method="get" action=chrome.path.clone()>
                <label>"From " <input name="from" size="20" value=rfc3339_secs(chrome.range.from_unix_nano)/></label>
                <label>" to " <input name="to" size="20" value=rfc3339_secs(chrome.range.to_unix_nano)/></label>
                <button type="submit">"Show"</button>
                <span class="presets">" " {presets} <a href=chrome.path.clone()>"live"</a></span>
                <span class="mode" id="mode">{mode}</span>
            </form>
        </header>
        <main id="main" data-live=if chrome.live { "1" } else { "0" }>{body}</main>
    }
    .to_html();
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width, initial-scale=1\"><title>{} · Dyeline</title>\
         <link rel=\"stylesheet\" href=\"/assets/style.css\"></head><body>{html}\
         <script src=\"/assets/live.js\" defer></script></body></html>",
        crate::chart::esc(&chrome.title)
    )
}

/// Percent-encodes a query value.
pub fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The "older analysis" note of a page answered from a snapshot that ends before the range.
pub fn staleness(analysed_to: Option<i64>) -> Option<impl IntoView + use<>> {
    analysed_to.map(|t| {
        view! {
            <p class="hint" id="analysed-to">
                {format!("Spans analysed up to {}; a newer analysis is being made and the page refreshes when it is ready.", crate::range::clock(t))}
            </p>
        }
    })
}

/// An error page body.
pub fn error_body(status: u16, message: &str) -> AnyView {
    view! {
        <h1>"Error " {status}</h1>
        <p class="error" role="alert">{message.to_owned()}</p>
    }
    .into_any()
}
