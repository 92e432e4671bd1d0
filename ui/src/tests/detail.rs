//! The trace page's folded span detail (attributes, resource and scope, events, links, trace
//! state, status message) and the channel page's blue-against-green latency comparison, over
//! the fixture.

use std::sync::Arc;

use axum::http::StatusCode;

use super::{TRACE, app, get};

/// The folded detail under a span: its status message, attributes, resource and scope, events
/// at their offset from the span's start, links to the linked span, trace state.
#[tokio::test]
async fn trace_page_unfolds_attributes_resource_events_and_links() {
    let (status, html, _) = get(&app(Arc::default()), &format!("/traces/{TRACE}"), None).await;
    assert_eq!(status, StatusCode::OK);
    let at = html
        .find("data-detail-for=\"bbbbbbbbbbbbbbbb\"")
        .expect("a detail row for the error span");
    let detail = &html[at..html[at..].find("</details>").map_or(html.len(), |e| at + e)];
    assert!(
        detail.contains("2 attribute(s) · resource · 1 event(s) · 1 link(s) · trace state"),
        "{detail}"
    );
    assert!(
        detail.contains("<th>rpc.grpc.status_code</th><td>4</td>"),
        "{detail}"
    );
    assert!(
        detail.contains("<th>k8s.pod.name</th><td>inv-blue-1-7f</td>"),
        "{detail}"
    );
    assert!(
        detail.contains("<th>otel.scope</th><td>io.opentelemetry.grpc 2.1</td>"),
        "{detail}"
    );
    // The event 1.5 ms after the span's start (T0 + 2 ms).
    assert!(detail.contains("+1.50 ms"), "{detail}");
    assert!(detail.contains("exception.type=Timeout"), "{detail}");
    assert!(
        detail.contains("href=\"/traces/0123456789abcdef0123456789abcdef#span-00000000000000ff\""),
        "{detail}"
    );
    assert!(detail.contains("vendor=x1"), "{detail}");
    assert!(html.contains("<small class=\"status-message\">stock service timed out</small>"));
    // The span with none of them has no detail row.
    assert!(
        !html.contains("data-detail-for=\"aaaaaaaaaaaaaaaa\""),
        "{html}"
    );
    // Rows are anchors for links from other traces.
    assert!(html.contains("id=\"span-bbbbbbbbbbbbbbbb\""));
}

/// Blue's and green's latency side by side: each colour's share of its own requests per
/// bucket (10 blue requests against 90 green ones), its percentiles, and only the buckets
/// from the first to the last used.
#[tokio::test]
async fn channel_page_compares_blue_and_green_latency() {
    let (status, html, _) = get(&app(Arc::default()), "/channels/trade", None).await;
    assert_eq!(status, StatusCode::OK);
    let at = html
        .find("id=\"latency-histogram\"")
        .expect("the histogram");
    let table = &html[at..at + html[at..].find("</table>").unwrap()];
    // Buckets 1..=3 (≤ 5 ms, ≤ 10 ms, ≤ 50 ms): none ≤ 1 ms and none above 50 ms.
    assert_eq!(table.matches("<tr data-bucket=").count(), 3, "{table}");
    assert!(
        !table.contains("≤ 1 ms") && !table.contains("&gt; 50 ms"),
        "{table}"
    );
    assert!(table.contains("≤ 50 ms"), "{table}");
    // ≤ 10 ms: 4 of blue's 10 (40 %) and 45 of green's 90 (50 %).
    let row = &table[table.find("data-bucket=\"2\"").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains("width:40.0%") && row.contains("40.0% (4)"),
        "{row}"
    );
    assert!(
        row.contains("width:50.0%") && row.contains("50.0% (45)"),
        "{row}"
    );
    let summary = &html[html.find("id=\"latency-summary\"").unwrap()..];
    let blue = &summary[summary.find("data-color=\"blue\"").unwrap()..];
    let blue = &blue[..blue.find("</tr>").unwrap()];
    assert!(
        blue.contains(">10<") && blue.contains("9.5 ms") && blue.contains("48.0 ms"),
        "{blue}"
    );
}
