//! The reader's language and time zone at the routes: read from the cookies, the
//! `Accept-Language` header and the `[ui]` settings for each page's frame, and `GET /prefs`,
//! the header selector's form, which sets the cookies and goes back to the page.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};

use super::{Params, S, Ui, chrome, error_page, param};
use crate::locale::{self, Lang, TimeZoneSetting, Zone};
use crate::session;

/// The reader's language: the `dyeline_lang` cookie, else `Accept-Language`, else
/// `[ui] default_language`, else English. A bad cookie is ignored.
pub(super) fn language(ui: &Ui, headers: &HeaderMap, jar: &CookieJar) -> Lang {
    let cookie = jar
        .get(locale::LANG_COOKIE)
        .and_then(|c| c.value().parse::<Lang>().ok());
    let header = || {
        headers
            .get_all(header::ACCEPT_LANGUAGE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(Lang::from_accept_language)
    };
    cookie
        .or_else(header)
        .or(ui.settings.default_language)
        .unwrap_or_default()
}

/// The reader's zone: the `dyeline_tz` cookie, else `[ui] time_zone` (bad cookies ignored).
pub(super) fn zone(ui: &Ui, jar: &CookieJar) -> Zone {
    Zone::resolve(
        locale::cookie_value(jar, locale::TZ_COOKIE).as_deref(),
        locale::cookie_value(jar, locale::BROWSER_TZ_COOKIE).as_deref(),
        ui.settings.time_zone,
    )
}

/// `path` with the query `p` (sorted), the page the language and zone selector returns to.
pub(super) fn here(path: &str, p: &HashMap<String, String>) -> String {
    let sorted: std::collections::BTreeMap<_, _> = p.iter().collect();
    match serde_urlencoded::to_string(sorted) {
        Ok(q) if !q.is_empty() => format!("{path}?{q}"),
        _ => path.to_owned(),
    }
}

/// A preference cookie: a year, the whole site, sent on top-level navigations (SameSite=Lax).
fn pref_cookie(name: &'static str, value: String) -> Cookie<'static> {
    Cookie::build((name, value))
        .path("/")
        .same_site(SameSite::Lax)
        .max_age(time_year())
        .build()
}

fn time_year() -> cookie::time::Duration {
    cookie::time::Duration::days(365)
}

/// `GET /prefs?lang=zh-CN|en&tz=UTC|browser|<IANA>&next=/path`: the selector's form. Sets
/// `dyeline_lang` and `dyeline_tz` and goes back to `next` (a local path only; anything else
/// goes to `/`). A malformed value is refused with 400 naming its key, and sets nothing.
pub(super) async fn prefs(
    State(ui): S,
    headers: HeaderMap,
    jar: CookieJar,
    Query(p): Params,
) -> Response {
    let lang = param(&p, "lang").map(|v| v.parse::<Lang>().map_err(|e| format!("lang: {e}")));
    let tz = param(&p, "tz").map(|v| v.parse::<TimeZoneSetting>().map_err(|e| format!("tz: {e}")));
    let refusal = match (&lang, &tz) {
        (Some(Err(m)), _) | (_, Some(Err(m))) => Some(m.clone()),
        _ => None,
    };
    if let Some(m) = refusal {
        let none = HashMap::new();
        let (jar, c, _) = chrome(
            &ui,
            &headers,
            jar,
            |l| tr!(l, "title.error"),
            "/prefs".into(),
            &none,
            false,
        )
        .await;
        return error_page(jar, &c, StatusCode::BAD_REQUEST, &m).into_response();
    }
    let mut jar = jar;
    if let Some(Ok(l)) = lang {
        jar = jar.add(pref_cookie(locale::LANG_COOKIE, l.code().to_owned()));
    }
    if let Some(Ok(z)) = tz {
        jar = jar.add(pref_cookie(locale::TZ_COOKIE, z.to_string()));
    }
    let next = session::local_path(param(&p, "next").unwrap_or("/"));
    (jar, Redirect::to(&next)).into_response()
}
