//! Language and time zone over the fixture: every page in Simplified Chinese (its Chinese
//! title and headers, none of the English labels, `<html lang>`), how the language is chosen
//! (cookie, then `Accept-Language`, then `[ui] default_language`), the `/prefs` form and its
//! refusals, and times shown and read back in the chosen zone.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use chrono::{FixedOffset, TimeZone};

use super::{Fixture, SEC, T0, TRACE, key, send};
use crate::locale::{Lang, TimeZoneSetting, UiSettings, Zone};

fn app_with(settings: UiSettings) -> axum::Router {
    crate::router(crate::Ui::with_settings(
        Arc::<Fixture>::default(),
        Duration::from_millis(50),
        key(),
        settings,
    ))
}

async fn get_with(
    app: &axum::Router,
    uri: &str,
    accept_language: Option<&str>,
    cookie: Option<&str>,
) -> (StatusCode, String, Vec<String>) {
    let mut req = Request::get(uri);
    if let Some(a) = accept_language {
        req = req.header(header::ACCEPT_LANGUAGE, a);
    }
    if let Some(c) = cookie {
        req = req.header(header::COOKIE, c);
    }
    send(app, req.body(Body::empty()).unwrap()).await
}

/// Every page, with its Chinese title (in `<h1>` or `<title>`), Chinese labels it must show
/// and English labels it must not.
fn pages() -> Vec<(String, &'static str, Vec<&'static str>, Vec<&'static str>)> {
    vec![
        (
            "/".into(),
            "发布通道",
            vec!["<th>状态</th>", "触发中的告警", "颜色为", "语言", "时区"],
            vec![
                ">state<",
                ">firing alerts<",
                "Instances of colour",
                ">Sign in<",
                ">Show<",
            ],
        ),
        (
            "/channels/trade".into(),
            "发布通道 trade",
            vec![
                "串色调用",
                "窗口检测结果",
                "操作记录",
                "告警",
                "实例",
                "发布操作",
                "延迟：蓝 对比 绿",
                "蓝：占本色请求的比例",
            ],
            vec![
                "Cross-colour hops",
                "Window findings",
                "Event log",
                ">Alerts<",
                ">Controls<",
                "Missing decisions",
                "Latency, blue against green",
                "share of its requests",
            ],
        ),
        (
            "/channels/trade/confirm?action=ratio&blue_percent=20".into(),
            "确认 · trade",
            vec!["将生效的权重", "登录后确认", "蓝 blue 实例数"],
            vec![
                "Weights that will apply",
                "Sign in to confirm",
                ">blue instances<",
            ],
        ),
        (
            "/lanes".into(),
            "泳道",
            vec!["泳道组", "回退到 base", "未加入泳道组的应用"],
            vec![">lane group<", ">fallback to base<", "apps in no group"],
        ),
        (
            "/lanes/mall".into(),
            "泳道组 mall",
            vec![
                "应用与泳道",
                "泳道检测结果",
                "各泳道错误率",
                "只计数、不告警",
            ],
            vec![
                "Apps and lanes",
                "Lane findings",
                "Error rate per lane",
                "Counted, not alerted",
            ],
        ),
        (
            "/lanes/_ungrouped".into(),
            "未加入泳道组的应用",
            vec!["默认设置"],
            vec!["Defaults: no entry apps", "Apps in no lane group"],
        ),
        (
            "/traces".into(),
            "链路",
            vec!["搜索", "最短耗时（毫秒）", "条链路", "属性"],
            vec![">Search<", "min duration", " trace(s)", " attribute "],
        ),
        (
            format!("/traces/{TRACE}"),
            "链路 ",
            vec![
                "开始于",
                "个串色 span",
                "<th>耗时</th>",
                "2 个属性",
                "1 个事件",
                "1 个链接",
            ],
            vec![
                " hop span(s)",
                ">duration<",
                " started ",
                "attribute(s)",
                "event(s)",
            ],
        ),
        (
            "/login".into(),
            "登录",
            vec!["API 令牌", "HttpOnly cookie"],
            vec!["API token", "The token is kept"],
        ),
    ]
}

/// Every key of the catalog has its English and its Chinese text (a missing Chinese one would
/// fall back to English silently), and every key the code names is in the catalog.
#[test]
fn the_catalog_has_both_languages_for_every_key_the_code_uses() {
    let text = include_str!("../../locales/ui.yml");
    let mut keys = std::collections::BTreeMap::new();
    let mut key = None;
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() || line.starts_with("_version") {
            continue;
        }
        if !line.starts_with(' ') {
            key = Some(line.trim_end_matches(':').to_owned());
            keys.insert(key.clone().unwrap(), (false, false));
        } else if let Some(k) = &key {
            let e = keys.get_mut(k).unwrap();
            let t = line.trim();
            e.0 |= t.starts_with("en: ") && t.len() > "en: ".len();
            e.1 |= t.starts_with("zh-CN: ") && t.len() > "zh-CN: ".len() && !t.is_ascii();
        }
    }
    for (k, (en, zh)) in &keys {
        assert!(*en && *zh, "{k}: English {en}, Chinese {zh}");
    }
    // The keys named in the sources.
    let sources = [
        include_str!("../pages/mod.rs"),
        include_str!("../pages/overview.rs"),
        include_str!("../pages/channel.rs"),
        include_str!("../pages/confirm.rs"),
        include_str!("../pages/login.rs"),
        include_str!("../pages/lanes.rs"),
        include_str!("../pages/trace.rs"),
        include_str!("../routes.rs"),
        include_str!("../routes/prefs.rs"),
        include_str!("../guard.rs"),
        include_str!("../range.rs"),
        include_str!("../panels/alerts.rs"),
        include_str!("../panels/app_table.rs"),
        include_str!("../panels/blue_share_chart.rs"),
        include_str!("../panels/channel_table.rs"),
        include_str!("../panels/color_load.rs"),
        include_str!("../panels/controls.rs"),
        include_str!("../panels/event_log.rs"),
        include_str!("../panels/hop_edges.rs"),
        include_str!("../panels/instances.rs"),
        include_str!("../panels/lane_error_chart.rs"),
        include_str!("../panels/lane_findings.rs"),
        include_str!("../panels/lane_matrix.rs"),
        include_str!("../panels/missing_decisions.rs"),
        include_str!("../panels/unknown_instances.rs"),
        include_str!("../panels/window_findings.rs"),
    ];
    let mut used = 0;
    for src in sources {
        for (at, _) in src.match_indices("tr!(") {
            // Not `include_str!(` and the like.
            if src[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let part = &src[at + 4..];
            let Some(start) = part.find('"') else {
                continue;
            };
            let rest = &part[start + 1..];
            let k = &rest[..rest.find('"').unwrap()];
            assert!(keys.contains_key(k), "{k:?} is used but not in ui.yml");
            used += 1;
        }
    }
    assert!(used > 150, "{used}");
}

#[tokio::test]
async fn every_page_in_zh_cn_is_chinese_with_no_english_label_left() {
    let app = app_with(UiSettings::default());
    for (path, title, zh, en) in pages() {
        let (status, html, _) = get_with(&app, &path, Some("zh-CN,zh;q=0.9,en;q=0.8"), None).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(html.contains("<html lang=\"zh-CN\""), "{path}: <html lang>");
        assert!(html.contains(title), "{path}: title {title:?}");
        for w in zh {
            assert!(html.contains(w), "{path}: no {w:?}");
        }
        for w in en {
            assert!(!html.contains(w), "{path}: English {w:?} left");
        }
        // The same page in English is English (the words above are really the page's).
        let (_, html, _) = get_with(&app, &path, Some("en-US"), None).await;
        assert!(html.contains("<html lang=\"en\""), "{path}");
        assert!(!html.contains("<html lang=\"zh-CN\""), "{path}");
    }
    // An error page too.
    let (status, html, _) = get_with(&app, "/channels/nope", Some("zh"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(html.contains("<h1>错误 404</h1>"), "{html}");
    // Identifiers stay: blue_percent and the colour values beside their Chinese labels.
    let (_, html, _) = get_with(&app, "/channels/trade", Some("zh-CN"), None).await;
    assert!(html.contains("blue_percent") && html.contains("data-color=\"blue\""));
    assert!(html.contains(">蓝 blue<"), "蓝 beside blue");
}

#[tokio::test]
async fn the_cookie_beats_the_header_which_beats_the_configured_default() {
    let app = app_with(UiSettings {
        default_language: Some(Lang::ZhCn),
        ..UiSettings::default()
    });
    let lang_of = |html: &str| {
        if html.contains("<html lang=\"zh-CN\"") {
            "zh-CN"
        } else if html.contains("<html lang=\"en\"") {
            "en"
        } else {
            "?"
        }
    };
    for (header, cookie, want) in [
        (None, None, "zh-CN"),                                // nothing: the default
        (Some("fr-FR, de;q=0.5"), None, "zh-CN"),             // nothing usable: the default
        (Some("%%garbage;;q=x"), None, "zh-CN"),              // garbage: the default
        (Some("en-GB"), None, "en"),                          // the header
        (Some("en-GB"), Some("dyeline_lang=zh-CN"), "zh-CN"), // the cookie beats it
        (Some("zh-CN"), Some("dyeline_lang=en"), "en"),
        (Some("en"), Some("dyeline_lang=xx"), "en"), // a bad cookie is ignored
    ] {
        let (status, html, _) = get_with(&app, "/", header, cookie).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(lang_of(&html), want, "{header:?} {cookie:?}");
    }
    // Without a configured default, English.
    let (_, html, _) = get_with(&app_with(UiSettings::default()), "/", Some("fr"), None).await;
    assert_eq!(lang_of(&html), "en");
}

#[tokio::test]
async fn prefs_sets_lax_cookies_and_goes_back_to_a_local_page_only() {
    let app = app_with(UiSettings::default());
    let (status, _, headers) = get_with(
        &app,
        "/prefs?lang=zh-CN&tz=Asia%2FShanghai&next=%2Fchannels%2Ftrade%3Ffrom%3D1%26to%3D2",
        None,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let lang = headers
        .iter()
        .find(|h| h.starts_with("dyeline_lang="))
        .unwrap();
    assert!(lang.starts_with("dyeline_lang=zh-CN;"), "{lang}");
    assert!(
        lang.contains("SameSite=Lax") && lang.contains("Path=/"),
        "{lang}"
    );
    let tz = headers
        .iter()
        .find(|h| h.starts_with("dyeline_tz="))
        .unwrap();
    assert!(tz.starts_with("dyeline_tz=Asia%2FShanghai;"), "{tz}");
    assert!(
        headers.contains(&"location: /channels/trade?from=1&to=2".to_owned()),
        "{headers:?}"
    );
    for next in ["https%3A%2F%2Fevil.example%2F", "%2F%2Fevil.example"] {
        let (_, _, headers) =
            get_with(&app, &format!("/prefs?lang=en&next={next}"), None, None).await;
        assert!(
            headers.contains(&"location: /".to_owned()),
            "{next}: {headers:?}"
        );
    }
    // Malformed values: 400 naming the key, and no preference cookie set.
    for (q, key) in [
        ("lang=xx", "lang:"),
        ("tz=Mars%2FBase", "tz:"),
        ("lang=en&tz=%3Cscript%3E", "tz:"),
    ] {
        let (status, html, headers) =
            get_with(&app, &format!("/prefs?{q}&next=/"), None, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{q}");
        assert!(html.contains(key), "{q}: {html}");
        assert!(
            !headers
                .iter()
                .any(|h| h.starts_with("dyeline_lang") || h.starts_with("dyeline_tz")),
            "{q}: {headers:?}"
        );
    }
}

/// The Shanghai clock of `t` (UTC+8, no daylight saving).
fn shanghai(t: i64, format: &str) -> String {
    FixedOffset::east_opt(8 * 3600)
        .unwrap()
        .timestamp_nanos(t)
        .format(format)
        .to_string()
}

#[tokio::test]
async fn times_are_shown_and_read_back_in_the_chosen_zone() {
    let sh = "Asia/Shanghai".parse().unwrap();
    let app = app_with(UiSettings {
        time_zone: TimeZoneSetting::Named(sh),
        ..UiSettings::default()
    });
    let op = T0 - 600 * SEC; // the fixture's event
    let (_, html, _) = get_with(&app, "/channels/trade", None, None).await;
    let want = shanghai(op, "%Y-%m-%dT%H:%M:%S+08:00");
    assert!(
        html.contains(&format!("<td>{want}</td>")),
        "event log in +08:00: {want}"
    );
    assert!(html.contains("data-zone=\"Asia/Shanghai\" data-offset=\"+08:00\""));
    assert!(html.contains("Times in Asia/Shanghai (UTC+08:00)"));
    // The reader's UTC cookie wins; a bad zone cookie is ignored (never an error page).
    let (_, html, _) = get_with(&app, "/channels/trade", None, Some("dyeline_tz=UTC")).await;
    assert!(html.contains(&format!(
        "<td>{}</td>",
        dyeline_model::time::rfc3339_secs(op)
    )));
    let (status, html, _) =
        get_with(&app, "/channels/trade", None, Some("dyeline_tz=Mars/Base")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(&format!("<td>{want}</td>")));
    // "browser" with the browser's zone reported: Tokyo; not yet reported: the setting, said.
    let (_, html, _) = get_with(
        &app,
        "/",
        None,
        Some("dyeline_tz=browser; dyeline_browser_tz=Asia%2FTokyo"),
    )
    .await;
    assert!(html.contains("data-offset=\"+09:00\"") && html.contains("data-tz=\"browser\""));
    let (_, html, _) = get_with(&app, "/", None, Some("dyeline_tz=browser")).await;
    assert!(
        html.contains("Your browser's zone is not known yet"),
        "{html}"
    );
    assert!(html.contains("data-offset=\"+08:00\""));
    // A range typed in Shanghai time reads back to the same instants, shown in Shanghai time.
    let from = T0 - 3600 * SEC;
    let typed = shanghai(from, "%Y-%m-%d %H:%M:%S");
    let uri = format!("/?from={}&to={}", typed.replace(' ', "%20"), T0);
    let (status, html, _) = get_with(&app, &uri, None, None).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    let shown = Zone::named(sh).stamp(from);
    assert_eq!(shown, shanghai(from, "%Y-%m-%dT%H:%M:%S+08:00"));
    assert!(
        html.contains(&format!("name=\"from\" size=\"25\" value=\"{shown}\"")),
        "{html}"
    );
    // The chart axis is in Shanghai time too.
    let (_, html, _) = get_with(&app, &uri.replace("/?", "/channels/trade?"), None, None).await;
    assert!(html.contains(&format!(">{}</text>", shanghai(from, "%H:%M:%S"))));
}
