//! The lanes pages over fixture data: the index links each group, a group's page shows its
//! matrix, findings with trace links, counts and one chart per app, the ungrouped page its
//! defaults, an unknown group is a 404, and the trace page shows each span's lane.

use std::sync::Arc;

use axum::http::StatusCode;

use super::{T0, TRACE, app, get};
use crate::source::*;

const SEC: i64 = 1_000_000_000;

/// The index: group mall, then the apps in no group.
pub(super) fn index() -> LanesIndex {
    LanesIndex {
        groups: vec![
            LaneGroupLine {
                group: Some("mall".into()),
                apps: vec!["gateway".into(), "order".into(), "inventory".into()],
                lanes: vec!["gray".into(), "gray2".into()],
                findings: 3,
                lane_fallback: 19,
                firing_alerts: 1,
            },
            LaneGroupLine {
                group: None,
                apps: vec!["bff".into()],
                lanes: vec![],
                findings: 0,
                lane_fallback: 2,
                firing_alerts: 0,
            },
        ],
        analysed_to_unix_nano: None,
    }
}

fn cell(instances: &[(&str, &str, bool)]) -> LaneCell {
    LaneCell {
        instances: instances
            .iter()
            .map(|&(i, s, present)| LaneInstance {
                instance: i.into(),
                signals: s.into(),
                present_at_end: present,
            })
            .collect(),
        ..LaneCell::default()
    }
}

/// Group mall's page (lanes base and gray; order and inventory), or the ungrouped apps'.
pub(super) fn page(scope: LaneScope<'_>) -> Option<LanesPage> {
    let group = match scope {
        LaneScope::Group("mall") => Some(LaneGroupView {
            id: "mall".into(),
            entry_apps: vec!["gateway".into()],
            strict_lanes: vec!["gray2".into()],
            reverse_fallback: false,
        }),
        LaneScope::Group(_) => return None,
        LaneScope::Ungrouped => None,
    };
    let order_gray = LaneCell {
        served_in_lane: 20,
        leaked: 1,
        requests: 23,
        errors: 2,
        p99_ms: Some(12.5),
        ..cell(&[("order-green-7", "spans, metrics", true)])
    };
    let inventory_gray = LaneCell {
        served_in_lane: 10,
        lane_fallback: 3,
        failover: 1,
        leaked: 3,
        requests: 11,
        errors: 1,
        ..cell(&[("inventory-blue-9", "metrics", false)])
    };
    let order_base = LaneCell {
        pollution: 0,
        requests: 400,
        errors: 1,
        ..cell(&[("order-blue-1", "spans, metrics", true)])
    };
    Some(LanesPage {
        group,
        lanes: vec!["base".into(), "gray".into()],
        apps: vec![
            LaneAppRow {
                app: "order".into(),
                cells: vec![order_base, order_gray],
            },
            LaneAppRow {
                app: "inventory".into(),
                cells: vec![cell(&[("inventory-1", "spans", true)]), inventory_gray],
            },
        ],
        findings: vec![LaneFindingRow {
            finding: "lane_leak".into(),
            place: "order (gray) → inventory (base) via payment".into(),
            lane: "gray".into(),
            kind: "RPC".into(),
            reason: "tag_ignored".into(),
            count: 3,
            first_unix_nano: T0 + 90 * SEC,
            trace_ids: vec![TRACE.into()],
        }],
        alerts: vec![AlertLine {
            name: "DyelineLaneLeak".into(),
            state: "firing".into(),
            labels: "app=inventory lane=gray reason=tag_ignored type=lane_leak".into(),
            summary: "3 request(s) for lane gray left it".into(),
            color: None,
            kind: "lane_leak".into(),
            starts_at_unix_nano: T0 + 95 * SEC,
            ends_at_unix_nano: None,
            trace_ids: vec![TRACE.into()],
        }],
        counts: LaneCountsView {
            lane_fallback: 36,
            failover: 1,
            tag_not_recorded: 2,
            reverse_fallback: 1,
            undetermined: 3,
            malformed_lane_tags: 2,
        },
        step_seconds: 60,
        error_rates: vec![LaneErrorSeries {
            app: "order".into(),
            lanes: vec![
                (
                    "base".into(),
                    vec![(T0, Some(0.0025)), (T0 + 60 * SEC, None)],
                ),
                (
                    "gray".into(),
                    vec![(T0, Some(0.1)), (T0 + 60 * SEC, Some(0.05))],
                ),
            ],
        }],
        analysed_to_unix_nano: None,
    })
}

#[tokio::test]
async fn the_index_links_every_group_and_the_apps_in_no_group() {
    let (status, html, _) = get(&app(Arc::default()), "/lanes", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(r#"<a href="/lanes/mall">mall</a>"#), "{html}");
    assert!(
        html.contains(r#"<a href="/lanes/_ungrouped">apps in no group</a>"#),
        "{html}"
    );
    // A fixed range is kept by the links.
    let (_, fixed, _) = get(
        &app(Arc::default()),
        "/lanes?from=2025-11-24T15:00:00Z&to=2025-11-24T16:00:00Z",
        None,
    )
    .await;
    assert!(
        fixed.contains(
            r#"href="/lanes/mall?from=2025-11-24T15:00:00Z&amp;to=2025-11-24T16:00:00Z""#
        ),
        "{fixed}"
    );
    assert!(html.contains("apps in no group"));
    let mall = &html[html.find(r#"data-group="mall""#).unwrap()..];
    let mall = &mall[..mall.find("</tr>").unwrap()];
    assert!(mall.contains("gateway, order, inventory"), "{mall}");
    assert!(mall.contains("gray, gray2"), "{mall}");
    assert!(
        mall.contains(r#"<td class="num alerting">1</td>"#),
        "{mall}"
    );
    // Every page's navigation reaches the index.
    let (_, overview, _) = get(&app(Arc::default()), "/", None).await;
    assert!(overview.contains(">Lanes</a>"), "{overview}");
}

#[tokio::test]
async fn a_group_page_shows_its_matrix_findings_counts_and_charts() {
    let (status, html, _) = get(&app(Arc::default()), "/lanes/mall", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("Lane group mall"));
    assert!(
        html.contains("Entry apps (may set or change a tag): gateway · strict lanes (no fallback): gray2 · reverse fallback: not allowed"),
        "{html}"
    );
    let order_gray = &html[html.find(r#"data-app="order" data-lane="gray""#).unwrap()..];
    let order_gray = &order_gray[..order_gray.find("</td>").unwrap()];
    assert!(
        order_gray.contains("order-green-7 (spans, metrics)"),
        "{order_gray}"
    );
    assert!(
        order_gray.contains("in lane 20 · fallback 0 · failover 0"),
        "{order_gray}"
    );
    assert!(order_gray.contains("leaked 1"), "{order_gray}");
    assert!(
        order_gray.contains("23 req · 2 err (8.7%) · p99 12.5 ms"),
        "{order_gray}"
    );
    let inventory_gray = &html[html
        .find(r#"data-app="inventory" data-lane="gray""#)
        .unwrap()..];
    let inventory_gray = &inventory_gray[..inventory_gray.find("</td>").unwrap()];
    assert!(
        inventory_gray.contains("inventory-blue-9 (metrics) <span class=\"warn\">absent</span>"),
        "{inventory_gray}"
    );
    // The base column says what base instances served, not lane outcomes.
    let order_base = &html[html.find(r#"data-app="order" data-lane="base""#).unwrap()..];
    let order_base = &order_base[..order_base.find("</td>").unwrap()];
    assert!(!order_base.contains("in lane"), "{order_base}");
    assert!(
        order_base.contains("400 req · 1 err (0.2%)"),
        "{order_base}"
    );
    // The finding, with a link to its trace.
    let leak = &html[html.find(r#"data-finding="lane_leak""#).unwrap()..];
    let leak = &leak[..leak.find("</tr>").unwrap()];
    assert!(
        leak.contains("order (gray) → inventory (base) via payment"),
        "{leak}"
    );
    assert!(leak.contains("tag_ignored"), "{leak}");
    assert!(
        leak.contains(&format!(r#"href="/traces/{TRACE}""#)),
        "{leak}"
    );
    assert!(
        html.contains(r#"<span id="count-lane-fallback">36</span>"#),
        "{html}"
    );
    // Its live alert.
    let alert = &html[html.find(r#"data-alert="lane_leak""#).unwrap()..];
    let alert = &alert[..alert.find("</tr>").unwrap()];
    assert!(
        alert.contains("DyelineLaneLeak") && alert.contains("firing"),
        "{alert}"
    );
    assert!(alert.contains("app=inventory lane=gray"), "{alert}");
    assert!(
        html.contains(r#"<span id="count-undetermined">3</span>"#),
        "{html}"
    );
    // One chart for order, a series per lane, each labelled.
    assert!(
        html.contains(r#"<figure data-app="order" class="lane-errors">"#),
        "{html}"
    );
    assert!(html.contains("Error rate of order by lane"), "{html}");
    assert!(
        html.contains("s-base") && html.contains("s-lane1"),
        "{html}"
    );
}

#[tokio::test]
async fn the_ungrouped_page_says_its_defaults_and_an_unknown_group_is_404() {
    let (status, html, _) = get(&app(Arc::default()), "/lanes/_ungrouped", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("Apps in no lane group"));
    assert!(html.contains("Defaults: no entry apps, every lane falls back to base"));
    let (status, html, _) = get(&app(Arc::default()), "/lanes/promo", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(html.contains("no lane group \"promo\""), "{html}");
}

#[tokio::test]
async fn the_trace_page_shows_each_spans_lane_and_its_lane_marks() {
    let (status, html, _) = get(&app(Arc::default()), &format!("/traces/{TRACE}"), None).await;
    assert_eq!(status, StatusCode::OK);
    // Each lane links to its group's lanes page over the minutes around the trace.
    let link = r#"href="/lanes/mall?from=2025-11-24T15:55:00Z&amp;to=2025-11-24T16:06:00Z" title="lane group mall" class="lane">"#;
    assert!(
        html.contains(&format!(
            r#"<td class="lane"><a {link}gray</a> · tag gray · for gray</td>"#
        )),
        "{html}"
    );
    assert!(
        html.contains(&format!(
            r#"<td class="lane"><a {link}base</a> · for gray</td>"#
        )),
        "{html}"
    );
    // The marks are on the inventory span's row, each explained in its title and in the
    // legend below the waterfall.
    let row = &html[html.find(r#"data-span-id="bbbbbbbbbbbbbbbb""#).unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains(r#"data-mark="lane_leak" title="LANE LEAK: the request was meant for a lane"#),
        "{row}"
    );
    assert!(
        row.contains("LANE LEAK gray: order (gray) → inventory (base), tag_dropped"),
        "{row}"
    );
    assert!(
        row.contains("TAG DROPPED gray by order, in_process"),
        "{row}"
    );
    let order = &html[html.find(r#"data-span-id="aaaaaaaaaaaaaaaa""#).unwrap()..];
    assert!(!order[..order.find("</tr>").unwrap()].contains("data-mark"));
    let legend = &html[html.find(r#"id="lane-legend""#).unwrap()..];
    let legend = &legend[..legend.find("</dl>").unwrap()];
    assert!(
        legend.contains(r#"<dt data-mark="lane_leak">LANE LEAK</dt>"#),
        "{legend}"
    );
    assert!(
        legend.contains(r#"<dt data-mark="lane_tag_dropped">TAG DROPPED</dt>"#),
        "{legend}"
    );
    // Only the types on the page are explained.
    assert!(!legend.contains("FALLBACK"), "{legend}");
    assert!(
        html.contains(r#"<span id="lane-mark-count">1</span>"#),
        "{html}"
    );
}

#[tokio::test]
async fn trace_search_takes_lane_tag_group_and_finding_from_its_form() {
    let app = app(Arc::default());
    let (status, html, _) = get(
        &app,
        "/traces?lane=gray&lane_tag=gray2&lane_group=mall",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // The form (no JavaScript) keeps what was asked.
    for (name, value) in [
        ("lane", "gray"),
        ("lane_tag", "gray2"),
        ("lane_group", "mall"),
    ] {
        assert!(
            html.contains(&format!(r#"name="{name}" value="{value}""#)),
            "{name}: {html}"
        );
    }
    assert!(html.contains("1 trace(s)"), "{html}");
    // The source is asked for the group given: another group has none.
    let (_, html, _) = get(&app, "/traces?lane_group=promo", None).await;
    assert!(html.contains("0 trace(s)"), "{html}");
    let (status, html, _) = get(&app, "/traces?lane_finding=lane_leak", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        html.contains(r#"<option value="lane_leak" selected>"#),
        "{html}"
    );
    let (status, html, _) = get(&app, "/traces?lane_finding=leak", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        html.contains("any or one of lane_leak, lane_tag_dropped"),
        "{html}"
    );
    // Empty fields, as a form sends them, filter nothing.
    let (_, html, _) = get(&app, "/traces?lane=&lane_tag=&lane_group=", None).await;
    assert!(html.contains("1 trace(s)"), "{html}");
}
