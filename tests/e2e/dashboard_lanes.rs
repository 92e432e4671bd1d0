//! The lanes pages and a trace's lane marks (issue 25, domain §7) in real headless Chromium,
//! over lanes-small imported with its `dyeline.toml`, timeline, spans and metrics: the
//! overview leads to `/lanes`, the index to a group's page, whose leak links to its trace; the
//! trace page marks the span where the tag was dropped and the request left its lane, its
//! lane links back to the group's page; `/lanes/_ungrouped` shows the apps in no group. The
//! same pages without JavaScript carry the same rows. The drilldown's marks of every trace of
//! the fixture are exactly its expected lane findings and counts (the analyzer's judgement of
//! one trace at a time). Every page visited is written as a PNG (see [`crate::browser`]).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::browser::*;
use crate::fixtures;
use crate::util::*;

/// The fixture's finding lists and the mark type each is shown as.
const FINDINGS: [(&str, &str); 4] = [
    ("lane_leaks", "lane_leak"),
    ("lane_tags_dropped", "lane_tag_dropped"),
    ("lane_pollution", "lane_pollution"),
    ("lane_tags_changed", "lane_tag_changed"),
];

/// A mark as the fixture's item of its list names it: the item's keys only, as JSON text.
fn projected(mark: &Value, keys: &[String]) -> String {
    let m: BTreeMap<&str, &Value> = keys
        .iter()
        .map(|k| (k.as_str(), mark.get(k).unwrap_or(&Value::Null)))
        .collect();
    serde_json::to_string(&m).unwrap()
}

#[test]
fn lanes_small_lanes_pages_and_a_trace_with_its_lane_marks() {
    let (_dir, data, config) = fixtures::lanes_import("lanes-small", "spans.jsonl");
    let s = Server::start_with(&data, &[], &["--config", config.to_str().unwrap()]);
    let exp = fixtures::expected("lanes-small");
    let (timeline, range) = fixtures::capture_range("lanes-small");

    // Every trace's marks through the API: the fixture's exact lists, and its counts.
    let traces = get_json(&s, &format!("/api/v1/traces{range}&limit=1000"));
    let traces = traces["traces"].as_array().unwrap();
    assert_eq!(
        traces.len() as u64,
        exp["counts"]["traces"].as_u64().unwrap()
    );
    let mut marks: Vec<Value> = Vec::new();
    for t in traces {
        let id = t["trace_id"].as_str().unwrap();
        let view = get_json(&s, &format!("/api/v1/traces/{id}"));
        for span in view["spans"].as_array().unwrap() {
            for m in span["lane_marks"].as_array().unwrap() {
                // A mark is on the span it names.
                if let Some(named) = m.get("span_id") {
                    assert_eq!(named, &span["span_id"], "{m}");
                }
                marks.push(m.clone());
            }
        }
    }
    for (list, ty) in FINDINGS {
        let want = exp[list].as_array().unwrap();
        let keys: Vec<String> = want
            .first()
            .map(|w| w.as_object().unwrap().keys().cloned().collect())
            .unwrap_or_default();
        let mut got: Vec<String> = marks
            .iter()
            .filter(|m| m["type"] == ty)
            .map(|m| projected(m, &keys))
            .collect();
        let mut want: Vec<String> = want.iter().map(|w| projected(w, &keys)).collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{ty}");
    }
    for counted in [
        "lane_fallback",
        "failover",
        "tag_not_recorded",
        "reverse_fallback",
    ] {
        let n = marks.iter().filter(|m| m["type"] == counted).count() as u64;
        assert_eq!(json!(n), exp["lane_counts"][counted], "{counted}");
    }

    // Search by lane, tag and group (API and page), against the stored columns in SQL and
    // the groups' history (promo, coupon's group, was deleted at 3285 s).
    let t0: i64 = timeline["t0_unix_nano"].as_str().unwrap().parse().unwrap();
    let mall_apps = "'gateway', 'order', 'inventory', 'payment', 'pricing', 'notify', 'settle'";
    for (filter, sql) in [
        ("lane=gray2", "lane = 'gray2'".to_owned()),
        ("lane_tag=%20Gray%20", "lane_tag = 'gray'".to_owned()),
        ("lane_group=mall", format!("service_name IN ({mall_apps})")),
        (
            "lane_group=promo",
            format!(
                "service_name = 'coupon' AND start_time_unix_nano < {}",
                t0 + 3285 * 1_000_000_000
            ),
        ),
        (
            "lane=gray&lane_group=promo",
            format!(
                "service_name = 'coupon' AND start_time_unix_nano < {} AND trace_id IN \
                 (SELECT trace_id FROM spans WHERE lane = 'gray')",
                t0 + 3285 * 1_000_000_000
            ),
        ),
    ] {
        let hits = get_json(&s, &format!("/api/v1/traces{range}&limit=1000&{filter}"));
        let mut got: Vec<String> = hits["traces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["trace_id"].as_str().unwrap().to_owned())
            .collect();
        got.sort();
        let mut want: Vec<String> = s
            .sql(&format!("SELECT DISTINCT trace_id FROM spans WHERE {sql}"))
            .iter()
            .map(|r| r[0].as_str().unwrap().to_owned())
            .collect();
        want.sort();
        assert!(
            !want.is_empty() || filter.contains('&'),
            "{filter}: nothing to find"
        );
        assert_eq!(got, want, "{filter}");
        // (Leptos separates adjacent text nodes with empty comments.)
        let page =
            fetch_html(&s, &format!("/traces{range}&limit=1000&{filter}")).replace("<!>", "");
        assert!(
            page.contains(&format!("{} trace(s)", want.len())),
            "{filter}: {page}"
        );
    }

    // Search by lane finding: the traces of the fixture's lists.
    let lists: Vec<(&str, Vec<&str>)> = FINDINGS
        .iter()
        .map(|(list, ty)| (*ty, vec![*list]))
        .chain([("any", FINDINGS.iter().map(|(l, _)| *l).collect())])
        .collect();
    for (ty, lists) in lists {
        let mut want: Vec<&str> = lists
            .iter()
            .flat_map(|l| exp[*l].as_array().unwrap())
            .map(|f| f["trace_id"].as_str().unwrap())
            .collect();
        want.sort();
        want.dedup();
        let hits = get_json(
            &s,
            &format!("/api/v1/traces{range}&limit=1000&lane_finding={ty}"),
        );
        let mut got: Vec<&str> = hits["traces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["trace_id"].as_str().unwrap())
            .collect();
        got.sort();
        assert_eq!(got, want, "{ty}");
        let page = fetch_html(&s, &format!("/traces{range}&limit=1000&lane_finding={ty}"))
            .replace("<!>", "");
        assert!(
            page.contains(&format!("{} trace(s)", want.len())),
            "{ty}: {page}"
        );
    }
    let r = reqwest::blocking::get(format!(
        "{}/api/v1/traces{range}&lane_finding=leak",
        base(&s)
    ))
    .unwrap();
    assert_eq!(r.status().as_u16(), 400);

    // The leak whose tag was dropped: its trace and span.
    let leak = exp["lane_leaks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| {
            l["reason"] == "tag_dropped"
                && exp["lane_tags_dropped"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|d| d["span_id"] == l["span_id"])
        })
        .expect("lanes-small has a leak whose tag was dropped on the same span");
    let (trace_id, span_id) = (
        leak["trace_id"].as_str().unwrap(),
        leak["span_id"].as_str().unwrap(),
    );
    let group = leak["group"].as_str().unwrap();

    // The overview leads to the lanes index.
    let mut b = Browser::start("lanes-small", base(&s));
    b.goto(&format!("/{range}"));
    b.wait_for("table#channels");
    b.click_to("nav a[href^='/lanes']", "table#lane-groups");
    b.shot("lanes-index");
    let index = b.rows("#lane-groups tbody tr");
    let groups: Vec<&str> = index.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(groups, [group, "apps in no group"], "{index:?}");
    assert_eq!(
        html_rows(&fetch_html(&s, &format!("/lanes{range}")), "lane-groups"),
        index
    );

    // The group's page, by its link: the leak's row links to its trace.
    b.click_to(&format!("tr[data-group={group}] a"), "table#lane-matrix");
    b.shot("lanes-group");
    let findings = b.rows("#lane-findings tbody tr");
    // The index counts the group's finding rows.
    assert_eq!(index[0][3], findings.len().to_string(), "{index:?}");
    let leak_place = format!(
        "{} ({}) → {} ({})",
        leak["from_app"].as_str().unwrap(),
        leak["from_lane"].as_str().unwrap(),
        leak["to_app"].as_str().unwrap(),
        leak["to_lane"].as_str().unwrap()
    );
    let row = find_row(
        &findings,
        &[(0, "lane_leak"), (1, &leak_place), (4, "tag_dropped")],
    )
    .unwrap_or_else(|| panic!("no leak row {leak_place}: {findings:?}"));
    assert_eq!(row[2], leak["lane"].as_str().unwrap());
    let html = fetch_html(&s, &format!("/lanes/{group}{range}"));
    assert_eq!(html_rows(&html, "lane-findings"), findings);
    // (The matrix's app is a row header: the page's cells are the rest.)
    let cells: Vec<Vec<String>> = b
        .rows("#lane-matrix tbody tr")
        .into_iter()
        .map(|r| r[1..].to_vec())
        .collect();
    assert_eq!(html_rows(&html, "lane-matrix"), cells);

    // The apps in no group: the pollution of an app whose group was deleted.
    b.goto(&format!("/lanes/_ungrouped{range}"));
    b.wait_for("table#lane-matrix");
    b.shot("lanes-ungrouped");
    let ungrouped = b.rows("#lane-findings tbody tr");
    let pollution = exp["lane_pollution"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["group"].is_null())
        .expect("lanes-small has pollution outside any group");
    let place = format!(
        "{} → {}",
        pollution["from_app"].as_str().unwrap(),
        pollution["app"].as_str().unwrap()
    );
    assert!(
        find_row(
            &ungrouped,
            &[
                (0, "lane_pollution"),
                (1, &place),
                (4, pollution["reason"].as_str().unwrap())
            ]
        )
        .is_some(),
        "{ungrouped:?}"
    );
    assert_eq!(
        html_rows(
            &fetch_html(&s, &format!("/lanes/_ungrouped{range}")),
            "lane-findings"
        ),
        ungrouped
    );

    // The leak's trace, by the group page's link: the mark is on the span that lost the tag.
    b.goto(&format!("/lanes/{group}{range}"));
    b.wait_for("table#lane-findings");
    b.click_to(
        &format!("#lane-findings a[href='/traces/{trace_id}']"),
        "table#waterfall",
    );
    b.shot("trace-lane-marks");
    assert_eq!(b.text("#trace-id"), trace_id);
    // columns: span, kind, app, instance, host, colour, decisions, lane, status, duration,
    // bar, marks
    let marked = b.rows("#waterfall tr.lane-mark");
    assert_eq!(marked.len(), 1, "{marked:?}");
    let row = b.rows(&format!("#waterfall tr[data-span-id='{span_id}']"));
    assert_eq!(row, marked, "the marked row is the leak's span {span_id}");
    let row = &row[0];
    assert_eq!(row[2], leak["to_app"].as_str().unwrap(), "{row:?}");
    assert_eq!(
        row[7],
        format!(
            "{} · for {}",
            leak["to_lane"].as_str().unwrap(),
            leak["lane"].as_str().unwrap()
        ),
        "{row:?}"
    );
    assert!(
        row[11].contains(&format!(
            "LANE LEAK {}: {leak_place}, tag_dropped",
            leak["lane"].as_str().unwrap(),
        )),
        "{row:?}"
    );
    let dropped = exp["lane_tags_dropped"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["span_id"] == span_id)
        .unwrap();
    assert!(
        row[11].contains(&format!(
            "TAG DROPPED {}: {} → {}, {}",
            dropped["lane"].as_str().unwrap(),
            dropped["dropped_by"].as_str().unwrap(),
            dropped["app"].as_str().unwrap(),
            dropped["where"].as_str().unwrap()
        )),
        "{row:?}"
    );
    // Explained: each mark's title, and the legend.
    let title = b.js(
        "return document.querySelector(arguments[0]).title;",
        vec![json!(format!(
            "tr[data-span-id='{span_id}'] [data-mark=lane_leak]"
        ))],
    );
    assert!(
        title.as_str().unwrap().starts_with("LANE LEAK: "),
        "{title}"
    );
    let legend = b.text("#lane-legend");
    assert!(
        legend.contains("LANE LEAK") && legend.contains("TAG DROPPED"),
        "{legend}"
    );
    // The same page without JavaScript: the same rows.
    let html = fetch_html(&s, &format!("/traces/{trace_id}"));
    assert_eq!(html_span_rows(&html), b.rows(SPAN_ROWS));

    // The span's lane leads to its group's page over the minutes around the trace (read
    // without the browser: leaving a live page in headless Chromium can stall for a minute).
    let href = b.js(
        "return document.querySelector(arguments[0]).getAttribute('href');",
        vec![json!(format!("tr[data-span-id='{span_id}'] td.lane a"))],
    );
    let href = href.as_str().unwrap();
    assert!(href.starts_with(&format!("/lanes/{group}?from=")), "{href}");
    let html = fetch_html(&s, href);
    assert!(html.contains("id=\"lane-matrix\""), "{html}");
}
