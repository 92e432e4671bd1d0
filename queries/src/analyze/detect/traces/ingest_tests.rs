//! The trace walk under the ingest rules of domain §1 and §3: Zipkin/B3 shared span ids (the
//! SERVER half under the CLIENT half, the callee's spans under the SERVER half) and a batch
//! consumer's caller named through its span links.

use dyeline_model::Color;

use crate::analyze::spans::Kind;
use crate::analyze::testkit::{B, S, Sp, T0, releasing};

/// (app, caller app) of each missing decision, sorted.
fn callers(b: &mut B) -> Vec<(String, String)> {
    let mut m: Vec<(String, String)> = b
        .report()
        .missing_decisions
        .iter()
        .map(|m| (m.app.clone(), m.caller_app.clone()))
        .collect();
    m.sort();
    m
}

/// gateway SERVER 1 → gateway CLIENT 2 → order SERVER 2 (the shared id, reported without a
/// parent) → stock SERVER 5, called with the shared id 2 as its parent. Only the gateway
/// carries the decision; stock's instance colour is `stock_color`.
fn zipkin_trace(b: &mut B, stock_color: Color) {
    let blue = [("trade", Color::Blue)];
    let spans = [
        (1, None, "gateway", Kind::Server, 0.0),
        (2, Some(1), "gateway", Kind::Other, 0.1),
        (2, None, "order", Kind::Server, 0.2),
        (5, Some(2), "stock", Kind::Server, 0.3),
    ];
    for (span, parent, app, kind, t) in spans {
        b.span(Sp {
            trace: 7,
            span,
            parent,
            app,
            instance: app,
            color: if app == "stock" {
                stock_color
            } else {
                Color::Blue
            },
            kind,
            t,
            decisions: if span == 1 { &blue } else { &[] },
            ..Sp::default()
        });
    }
}

#[test]
fn a_server_half_of_a_shared_id_is_called_by_its_client_half_and_calls_from_under_it() {
    let mut b = B::new();
    releasing(&mut b, "trade", &["gateway", "order", "stock"], 50);
    zipkin_trace(&mut b, Color::Blue);
    // By span ids alone, order's SERVER half would be a root (caller "(none)") and stock's
    // parent the first span of id 2, the gateway's CLIENT half.
    assert_eq!(
        callers(&mut b),
        [
            ("order".to_owned(), "gateway".to_owned()),
            ("stock".to_owned(), "order".to_owned())
        ]
    );
}

#[test]
fn a_hop_below_a_shared_id_names_the_apps_between_it_and_its_nearest_ancestor() {
    let mut b = B::new();
    releasing(&mut b, "trade", &["gateway", "stock"], 50);
    zipkin_trace(&mut b, Color::Green);
    let r = b.report();
    let hops: Vec<(&str, &str, Vec<String>, &str)> = r
        .cross_color_hops
        .iter()
        .map(|h| {
            (
                h.from_app.as_str(),
                h.to_app.as_str(),
                h.via.clone(),
                h.reason,
            )
        })
        .collect();
    // stock hangs under order's SERVER half, itself under the gateway's CLIENT half.
    assert_eq!(
        hops,
        [("gateway", "stock", vec!["order".to_owned()], "no_decision")]
    );
    // The root-most span of the channel is the gateway's (the trace's colour is blue).
    let mut b = B::new();
    releasing(&mut b, "trade", &["gateway", "stock"], 50);
    zipkin_trace(&mut b, Color::Blue);
    assert!(b.report().cross_color_hops.is_empty());
}

#[test]
fn a_batch_consumer_is_called_by_the_app_of_the_producer_it_links_to() {
    let mut b = B::new();
    releasing(&mut b, "trade", &["order", "notify"], 50);
    // The producer, in its own trace (a PRODUCER span: not SERVER nor CONSUMER).
    b.span(Sp {
        trace: 10,
        span: 5,
        parent: Some(4),
        app: "order",
        kind: Kind::Other,
        decisions: &[("trade", Color::Blue)],
        ..Sp::default()
    });
    // Two batch consumers with no parent: one links to the producer (after a link to a span
    // that is not loaded), one only to spans not loaded; a consumer with a parent keeps it.
    for (trace, parent) in [(20, None), (21, None), (22, Some(9))] {
        b.span(Sp {
            trace,
            span: 1,
            parent,
            app: "notify",
            instance: "notify-1",
            kind: Kind::Consumer,
            t: 1.0,
            ..Sp::default()
        });
    }
    b.links((20, 1), &[(99, 1), (10, 5)])
        .links((21, 1), &[(99, 1)]);
    assert_eq!(
        callers(&mut b),
        [
            ("notify".to_owned(), "(none)".to_owned()),
            ("notify".to_owned(), "(unknown)".to_owned()),
            ("notify".to_owned(), "order".to_owned()),
        ]
    );
}

/// A span whose parent id names no span of the data is an orphan (counted by the live
/// evaluation); a SERVER half reported without a parent, or a child of a shared id, is not.
#[test]
fn a_span_whose_parent_is_not_in_the_data_is_an_orphan_and_only_it() {
    let mut b = B::new();
    releasing(&mut b, "trade", &["gateway", "order", "stock"], 50);
    zipkin_trace(&mut b, Color::Blue);
    assert_eq!(b.report().orphan_starts, Vec::<i64>::new());
    b.span(Sp {
        trace: 7,
        span: 9,
        parent: Some(42),
        app: "stock",
        instance: "stock",
        kind: Kind::Server,
        t: 0.5,
        ..Sp::default()
    });
    assert_eq!(b.report().orphan_starts, [T0 + S / 2]);
}
