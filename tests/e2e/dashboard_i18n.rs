//! The dashboard's language and time zone (issue 28, item 7) in real headless Chromium: a
//! browser asking for zh-CN gets the Chinese pages; switching to English with the header's
//! form sticks across pages; with `[ui] time_zone = "Asia/Shanghai"` a trace's start shows
//! 8 h ahead of its UTC time; the "browser" choice in a Chromium running in Asia/Tokyo shows
//! +09:00 (live.js reports the zone, one reload). Screenshots as in [`crate::dashboard`].

use chrono::DateTime;
use serde_json::json;

use crate::browser::*;
use crate::fixtures;
use crate::util::*;

/// The trace search's rows as (trace id cell, start cell).
fn starts(b: &Browser) -> Vec<(String, String)> {
    b.rows("#traces tbody tr")
        .into_iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect()
}

#[test]
fn chinese_pages_then_english_by_the_form_and_shanghai_time() {
    let (_dir, data) = fixtures::import("release-walk", "spans.jsonl.gz");
    let s = Server::start(&data, &[("DYELINE_UI__TIME_ZONE", "Asia/Shanghai")]);
    let mut b = Browser::start_with("i18n-zh", base(&s), Some("zh-CN"), None);

    b.goto("/");
    b.wait_for("table#channels tr[data-channel=trade]");
    b.shot("overview-zh");
    assert_eq!(
        b.js("return document.documentElement.lang;", vec![]),
        json!("zh-CN")
    );
    assert_eq!(b.text("main h1"), "发布通道");
    assert!(b.text("table#channels thead").contains("触发中的告警"));
    b.click_to("tr[data-channel=trade] a", "#channel-id");
    b.shot("channel-zh");
    assert_eq!(b.text("main h1"), "发布通道 trade");
    let headings = b.js(
        "return Array.from(document.querySelectorAll('main h2')).map(h => h.textContent);",
        vec![],
    );
    for h in [
        "发布操作",
        "应用",
        "串色调用",
        "窗口检测结果",
        "实例",
        "告警",
        "操作记录",
    ] {
        assert!(
            headings.as_array().unwrap().iter().any(|x| x == h),
            "{h}: {headings}"
        );
    }
    assert!(!b.text("main").contains("Window findings"));

    b.goto("/traces");
    b.wait_for("table#traces tbody tr");
    b.shot("traces-shanghai");
    assert!(
        b.text("#zone").contains("Asia/Shanghai"),
        "{}",
        b.text("#zone")
    );
    let shanghai = starts(&b);
    assert!(!shanghai.is_empty());

    // English and UTC through the header's form; it comes back to the same page.
    b.js(
        "document.getElementById('lang').value = 'en';\
         document.getElementById('tz').value = 'UTC';",
        vec![],
    );
    b.click_to("#prefs-apply", "html[lang=en] table#traces tbody tr");
    assert!(b.current_url().ends_with("/traces"), "{}", b.current_url());
    b.shot("traces-utc-en");
    assert_eq!(b.text("main h1"), "Traces");
    let utc = starts(&b);
    let (id, sh) = &shanghai[0];
    let (_, u) = utc.iter().find(|(i, _)| i == id).expect("the same trace");
    let sh = DateTime::parse_from_rfc3339(sh).unwrap();
    let u = DateTime::parse_from_rfc3339(u).unwrap();
    assert!(u.to_rfc3339().ends_with("+00:00"), "{u}");
    assert_eq!(sh, u, "the same instant");
    assert_eq!(
        sh.naive_local() - u.naive_local(),
        chrono::Duration::hours(8),
        "Shanghai shows 8 h ahead of UTC: {sh} vs {u}"
    );

    // The choice sticks across pages.
    for (path, h1) in [("/lanes", "Lanes"), ("/", "Channels")] {
        b.goto(path);
        b.wait_for("main h1");
        assert_eq!(
            b.js("return document.documentElement.lang;", vec![]),
            json!("en")
        );
        assert_eq!(b.text("main h1"), h1, "{path}");
    }
    b.shot("overview-en");
}

#[test]
fn the_browser_zone_choice_shows_chromiums_tokyo_offset() {
    let (_dir, data) = fixtures::import("release-walk", "spans.jsonl.gz");
    let s = Server::start(&data, &[]);
    let mut b = Browser::start_with("i18n-tokyo", base(&s), None, Some("Asia/Tokyo"));
    b.goto("/traces");
    b.wait_for("#zone[data-offset='+00:00']");
    b.js("document.getElementById('tz').value = 'browser';", vec![]);
    b.click("#prefs-apply");
    // live.js reports the browser's zone and reloads once.
    b.wait_for("#zone[data-offset='+09:00']");
    b.wait_for("table#traces tbody tr");
    b.shot("traces-tokyo");
    assert!(
        b.text("#zone").contains("Asia/Tokyo"),
        "{}",
        b.text("#zone")
    );
    let rows = starts(&b);
    assert!(rows.iter().all(|(_, t)| t.ends_with("+09:00")), "{rows:?}");
}

/// A bad `[ui]` value stops `dyeline serve` at start with its key named, from the file or
/// the environment; nothing is served.
#[test]
fn bad_ui_settings_stop_the_start_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    for (lines, key, value) in [
        ("time_zone = \"Mars/Base\"", "ui.time_zone", "Mars/Base"),
        ("default_language = \"xx\"", "ui.default_language", "\"xx\""),
    ] {
        let file = dir.path().join("dyeline.toml");
        std::fs::write(&file, format!("[ui]\n{lines}\n")).unwrap();
        let args = [
            &[
                "--config",
                file.to_str().unwrap(),
                "serve",
                "--data-dir",
                data,
            ][..],
            &EPHEMERAL_PORTS[..],
        ]
        .concat();
        let (ok, _, err) = run_cli(&args);
        assert!(!ok, "{lines}: started");
        assert!(err.contains(key) && err.contains(value), "{lines}: {err}");
    }
    let out = std::process::Command::new(crate::support::dyeline_bin())
        .args([&["serve", "--data-dir", data][..], &EPHEMERAL_PORTS[..]].concat())
        .env("DYELINE_UI__TIME_ZONE", "Mars/Base")
        .env("DYELINE_LOG", "warn")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("ui.time_zone"),
        "{err}"
    );
}
