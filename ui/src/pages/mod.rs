//! The pages, rendered to HTML strings with Leptos (`view!` → `to_html`, no hydration): the
//! shared layout (navigation, range picker, language and time zone selector, live-update
//! hook) and small formatting helpers.
//! Every number a page shows is in its HTML, so pages read the same with JavaScript off.

pub mod channel;
pub mod confirm;
pub mod lanes;
pub mod login;
pub mod overview;
pub mod trace;

use leptos::prelude::*;

use crate::locale::{Lang, TimeZoneSetting, Zone, ZoneSource};
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
    /// The language the page is written in.
    pub lang: Lang,
    /// The zone the page shows its times in.
    pub zone: Zone,
    /// The server's `[ui] time_zone` (the selector offers its zone).
    pub tz_setting: TimeZoneSetting,
    /// This page's local URL (path and query), where the language and zone selector returns.
    pub here: String,
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

/// A colour chip: the word, a CSS class and a pattern, never colour alone. In Chinese the
/// word is 蓝/绿 beside the value `blue`/`green` (the identifier stays).
pub fn chip(lang: Lang, color: &str) -> impl IntoView + use<> {
    let (class, label) = match color {
        "blue" => ("chip c-blue", tr!(lang, "color.blue")),
        "green" => ("chip c-green", tr!(lang, "color.green")),
        "unknown" => ("chip c-unknown", tr!(lang, "color.unknown")),
        other => ("chip c-unknown", other.to_owned()),
    };
    view! { <span class=class data-color=color.to_owned()>{label}</span> }
}

/// A finding type's label (`drained_side` → "drained side", 已切空一侧流量); the code itself
/// for a type this table does not know.
pub fn finding_label(lang: Lang, code: &str) -> String {
    match code {
        "cross_color_hop" => tr!(lang, "finding.cross_color_hop"),
        "missing_decision" => tr!(lang, "finding.missing_decision"),
        "drained_side" => tr!(lang, "finding.drained_side"),
        "ratio_deviation" => tr!(lang, "finding.ratio_deviation"),
        "instance_skew" => tr!(lang, "finding.instance_skew"),
        "error_spike" => tr!(lang, "finding.error_spike"),
        "lane_leak" => tr!(lang, "finding.lane_leak"),
        "lane_tag_dropped" => tr!(lang, "finding.lane_tag_dropped"),
        "lane_pollution" => tr!(lang, "finding.lane_pollution"),
        "lane_tag_changed" => tr!(lang, "finding.lane_tag_changed"),
        "lane_error_spike" => tr!(lang, "finding.lane_error_spike"),
        other => other.to_owned(),
    }
}

/// A channel's state (`idle`, `releasing`) as the reader's language says it.
pub fn state_label(lang: Lang, state: &str) -> String {
    match state {
        "idle" => tr!(lang, "state.idle"),
        "releasing" => tr!(lang, "state.releasing"),
        other => other.to_owned(),
    }
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

/// The language and time zone selector (a plain GET form to `/prefs`, which sets the
/// cookies and comes back here) and the line that says which zone the times are in.
fn prefs(chrome: &Chrome) -> impl IntoView + use<> {
    let l = chrome.lang;
    let langs = Lang::ALL
        .into_iter()
        .map(|x| view! { <option value=x.code() selected=x == l>{x.native_name()}</option> })
        .collect_view();
    let mut zones = vec![(TimeZoneSetting::Utc, "UTC".to_owned())];
    for z in [chrome.tz_setting, chrome.zone.choice] {
        if let TimeZoneSetting::Named(tz) = z
            && !zones.iter().any(|(s, _)| *s == z)
        {
            zones.push((z, tz.name().to_owned()));
        }
    }
    zones.push((TimeZoneSetting::Browser, tr!(l, "prefs.browser_zone")));
    let zones = zones
        .into_iter()
        .map(|(z, label)| {
            view! { <option value=z.to_string() selected=z == chrome.zone.choice>{label}</option> }
        })
        .collect_view();
    let at = chrome.range.to_unix_nano;
    let zone_line = match chrome.zone.source {
        ZoneSource::BrowserUnknown => tr!(
            l,
            "prefs.zone_browser_unknown",
            zone = chrome.zone.name(),
            offset = chrome.zone.offset(at)
        ),
        ZoneSource::Browser => tr!(
            l,
            "prefs.zone_browser",
            zone = chrome.zone.name(),
            offset = chrome.zone.offset(at)
        ),
        ZoneSource::Setting => tr!(
            l,
            "prefs.zone",
            zone = chrome.zone.name(),
            offset = chrome.zone.offset(at)
        ),
    };
    view! {
        <form class="prefs" id="prefs" method="get" action="/prefs">
            <input type="hidden" name="next" value=chrome.here.clone()/>
            <label>{tr!(l, "prefs.language")} " " <select name="lang" id="lang">{langs}</select></label>
            " "
            <label>{tr!(l, "prefs.time_zone")} " " <select name="tz" id="tz">{zones}</select></label>
            " "
            <button type="submit" id="prefs-apply">{tr!(l, "prefs.apply")}</button>
            " "
            <span class="hint" id="zone" data-zone=chrome.zone.name() data-offset=chrome.zone.offset(at)>{zone_line}</span>
        </form>
    }
}

/// Renders a whole HTML document around `body`.
pub fn document(chrome: &Chrome, body: AnyView) -> String {
    let l = chrome.lang;
    let who = match &chrome.identity {
        Some(id) => view! {
            <form class="inline" method="post" action="/logout">
                <input type="hidden" name="csrf" value=chrome.csrf.clone()/>
                <span class="who">{tr!(l, "nav.signed_in_as")} " " {id.name.clone()}</span>
                <button type="submit">{tr!(l, "nav.sign_out")}</button>
            </form>
        }
        .into_any(),
        None => view! { <a href=format!("/login?next={}", encode(&chrome.path))>{tr!(l, "nav.sign_in")}</a> }
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
        tr!(l, "nav.fixed_range")
    } else {
        tr!(l, "nav.live")
    };
    let zone = chrome.zone;
    let html = view! {
        <header>
            <nav>
                <a class="brand" href="/">"Dyeline"</a>
                <a href=chrome.link("/")>{tr!(l, "nav.channels")}</a>
                <a href=chrome.link("/lanes")>{tr!(l, "nav.lanes")}</a>
                <a href=chrome.link("/traces")>{tr!(l, "nav.traces")}</a>
                <span class="spacer"></span>
                {who}
            </nav>
            <form class="range" method="get" action=chrome.path.clone()>
                <label>{tr!(l, "nav.from")} " " <input name="from" size="25" value=zone.stamp(chrome.range.from_unix_nano)/></label>
                <label>" " {tr!(l, "nav.to")} " " <input name="to" size="25" value=zone.stamp(chrome.range.to_unix_nano)/></label>
                <button type="submit">{tr!(l, "nav.show")}</button>
                <span class="presets">" " {presets} <a href=chrome.path.clone()>{tr!(l, "nav.live")}</a></span>
                <span class="mode" id="mode">{mode}</span>
            </form>
            {prefs(chrome)}
        </header>
        <main id="main" data-live=if chrome.live { "1" } else { "0" }>{body}</main>
    }
    .to_html();
    // `data-tz="browser"` asks live.js to report the browser's zone (one reload).
    let tz_attr = if chrome.zone.choice == TimeZoneSetting::Browser {
        " data-tz=\"browser\""
    } else {
        ""
    };
    format!(
        "<!DOCTYPE html><html lang=\"{}\"{tz_attr}><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width, initial-scale=1\"><title>{} · Dyeline</title>\
         <link rel=\"stylesheet\" href=\"/assets/style.css\"></head><body>{html}\
         <script src=\"/assets/live.js\" defer></script></body></html>",
        l.code(),
        crate::chart::esc(&chrome.title)
    )
}

/// Percent-encodes a query value.
pub fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The "older analysis" note of a page answered from a snapshot that ends before the range.
pub fn staleness(chrome: &Chrome, analysed_to: Option<i64>) -> Option<impl IntoView + use<>> {
    let (l, zone) = (chrome.lang, chrome.zone);
    analysed_to.map(|t| {
        view! {
            <p class="hint" id="analysed-to">
                {tr!(l, "page.analysed_to", time = zone.clock_offset(t))}
            </p>
        }
    })
}

/// An error page body (the message stays as the server wrote it: it names keys and values).
pub fn error_body(lang: Lang, status: u16, message: &str) -> AnyView {
    view! {
        <h1>{tr!(lang, "page.error")} " " {status}</h1>
        <p class="error" role="alert">{message.to_owned()}</p>
    }
    .into_any()
}
