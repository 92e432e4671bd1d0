//! Each detection on small hand-made inputs, with the edge cases of domain §6 and the
//! analyzer cases 11, 16 and 17 of `../shared/cases`.

use dyeline_model::release::{Channels, Op, Timeline};
use dyeline_model::{ChannelId, Color};

use super::load::{Kind, SpanRec, Spans, Traffic, resolve};
use super::{AnalyzerConfig, Report, report};

/// A minute-aligned base time (Unix ns).
const T0: i64 = 1_700_000_040_000_000_000;
const S: i64 = 1_000_000_000;

struct B {
    spans: Spans,
    initial: Channels,
    ops: Vec<(i64, ChannelId, Op)>,
}

fn id(s: &str) -> ChannelId {
    ChannelId::new(s).unwrap()
}

struct Sp<'a> {
    trace: u128,
    span: u64,
    parent: Option<u64>,
    app: &'a str,
    instance: &'a str,
    color: Color,
    kind: Kind,
    t: f64,
    decisions: &'a [(&'a str, Color)],
    error: bool,
}

impl Default for Sp<'_> {
    fn default() -> Self {
        Sp {
            trace: 1,
            span: 1,
            parent: None,
            app: "order",
            instance: "order-1",
            color: Color::Blue,
            kind: Kind::Server,
            t: 0.0,
            decisions: &[],
            error: false,
        }
    }
}

impl B {
    fn new() -> Self {
        B {
            spans: Spans::default(),
            initial: Channels::new(),
            ops: Vec::new(),
        }
    }

    fn channel(&mut self, ch: &str, apps: &[&str]) -> &mut Self {
        self.initial.apply(
            &id(ch),
            &Op::Apps(apps.iter().map(|a| a.to_string()).collect()),
        );
        self
    }

    fn op(&mut self, t: f64, ch: &str, op: Op) -> &mut Self {
        self.ops.push((T0 + (t * S as f64) as i64, id(ch), op));
        self
    }

    fn span(&mut self, sp: Sp) -> &mut Self {
        let app = self.spans.apps.intern(sp.app);
        let instance = self.spans.instances.intern(sp.instance);
        let decisions = sp
            .decisions
            .iter()
            .map(|(c, col)| (self.spans.channels.intern(c), *col))
            .collect();
        let decision_set = self.spans.decision_sets.intern(decisions);
        let traffic = match sp.kind {
            Kind::Server => Some(Traffic::Rpc),
            Kind::Consumer => Some(Traffic::Mq),
            Kind::Other if sp.parent.is_none() => Some(Traffic::Job),
            Kind::Other => None,
        };
        self.spans.push(SpanRec {
            trace: sp.trace,
            span: sp.span,
            parent: sp.parent.and_then(std::num::NonZeroU64::new),
            app,
            instance,
            color: sp.color,
            kind: sp.kind,
            traffic,
            start: T0 + (sp.t * S as f64) as i64,
            end: T0 + (sp.t * S as f64) as i64 + S / 100,
            is_error: sp.error,
            decision_set,
            channel: None,
            blue_percent: 50,
            interval: 0,
            source: super::load::NO_SOURCE,
        });
        self
    }

    /// `n` requests (root SERVER spans with a decision) on `instance` of `app`, spread over
    /// `[t, t + 50 s)`; the first `errors` are errors.
    fn requests(
        &mut self,
        app: &str,
        instance: &str,
        color: Color,
        t: f64,
        n: usize,
        errors: usize,
    ) -> &mut Self {
        let base = self.spans.len() as u128 + 1_000_000;
        for i in 0..n {
            self.span(Sp {
                trace: base + i as u128,
                span: 1,
                app,
                instance,
                color,
                t: t + 50.0 * i as f64 / n.max(1) as f64,
                decisions: &[],
                error: i < errors,
                ..Sp::default()
            });
        }
        self
    }

    /// The spans added, resolved against the timeline of the channels and operations.
    fn resolved(&mut self) -> Spans {
        let mut ops = self.ops.clone();
        ops.sort_by_key(|o| o.0);
        let timeline = Timeline::from_ops(self.initial.clone(), ops);
        let mut spans = std::mem::take(&mut self.spans);
        resolve(&mut spans, &timeline);
        spans
    }

    fn report(&mut self) -> Report {
        report(&self.resolved(), &AnalyzerConfig::default(), false)
    }
}

fn releasing(b: &mut B, ch: &str, apps: &[&str], r: u8) {
    b.channel(ch, apps)
        .op(-100.0, ch, Op::Start)
        .op(-100.0, ch, Op::Ratio(r));
}

#[test]
fn hop_is_found_once_whatever_the_arrival_order_and_clock_skew() {
    // Case 11's shape: order (blue, decided blue) → stock on green. The stock span starts
    // before its parent (clock skew) and is listed first (it arrived first).
    let mut b = B::new();
    releasing(&mut b, "ch1", &["order", "stock"], 50);
    let blue = [("ch1", Color::Blue)];
    b.span(Sp {
        trace: 7,
        span: 3,
        parent: Some(2),
        app: "stock",
        instance: "stock-g1",
        color: Color::Green,
        t: 9.9,
        decisions: &blue,
        ..Sp::default()
    })
    .span(Sp {
        trace: 7,
        span: 1,
        app: "order",
        instance: "order-b1",
        t: 10.0,
        decisions: &blue,
        ..Sp::default()
    })
    .span(Sp {
        trace: 7,
        span: 2,
        parent: Some(1),
        app: "order",
        instance: "order-b1",
        kind: Kind::Other,
        t: 10.1,
        decisions: &blue,
        ..Sp::default()
    })
    // the same span resent is one row in the store; here a second trace checks independence
    .span(Sp {
        trace: 8,
        span: 1,
        app: "order",
        instance: "order-b1",
        t: 11.0,
        decisions: &blue,
        ..Sp::default()
    });
    let r = b.report();
    assert_eq!(r.cross_color_hops.len(), 1, "{:?}", r.cross_color_hops);
    let h = &r.cross_color_hops[0];
    assert_eq!(
        (
            h.span_id.as_str(),
            h.from_app.as_str(),
            h.from_color,
            h.to_app.as_str(),
            h.to_color,
            h.reason,
            h.kind
        ),
        (
            "0000000000000003",
            "order",
            Some("blue"),
            "stock",
            "green",
            "decision_mismatch",
            "RPC"
        )
    );
    assert!(h.via.is_empty());
    assert!(r.missing_decisions.is_empty());
}

#[test]
fn hop_reasons_via_and_the_root_most_span() {
    let mut b = B::new();
    releasing(&mut b, "trade", &["order", "inventory"], 50);
    // order(green, decided green) → proxy (not in trade, drops) → gateway (decides blue again)
    // → inventory on blue with trade=blue: decision_changed via [proxy, gateway].
    let green = [("trade", Color::Green)];
    let blue = [("trade", Color::Blue)];
    b.span(Sp {
        trace: 1,
        span: 1,
        instance: "order-g",
        color: Color::Green,
        decisions: &green,
        t: 1.0,
        ..Sp::default()
    })
    .span(Sp {
        trace: 1,
        span: 2,
        parent: Some(1),
        instance: "order-g",
        color: Color::Green,
        kind: Kind::Other,
        t: 1.1,
        ..Sp::default()
    })
    .span(Sp {
        trace: 1,
        span: 3,
        parent: Some(2),
        app: "proxy",
        instance: "proxy-1",
        t: 1.2,
        ..Sp::default()
    })
    .span(Sp {
        trace: 1,
        span: 4,
        parent: Some(3),
        app: "gateway",
        instance: "gw-1",
        kind: Kind::Other,
        t: 1.3,
        ..Sp::default()
    })
    .span(Sp {
        trace: 1,
        span: 5,
        parent: Some(4),
        app: "inventory",
        instance: "inv-b",
        decisions: &blue,
        t: 1.4,
        ..Sp::default()
    })
    // a root-most span whose decision is not its colour is itself the hop
    .span(Sp {
        trace: 2,
        span: 1,
        app: "gateway",
        instance: "gw-1",
        kind: Kind::Other,
        t: 2.0,
        ..Sp::default()
    })
    .span(Sp {
        trace: 2,
        span: 2,
        parent: Some(1),
        instance: "order-g",
        color: Color::Green,
        decisions: &blue,
        t: 2.1,
        ..Sp::default()
    })
    .span(Sp {
        trace: 2,
        span: 3,
        parent: Some(2),
        app: "inventory",
        instance: "inv-b",
        decisions: &blue,
        t: 2.2,
        ..Sp::default()
    })
    // no decision anywhere: trace colour is the root's instance colour; the child on the
    // other colour is a no_decision hop and both are missing decisions
    .span(Sp {
        trace: 3,
        span: 1,
        instance: "order-g",
        color: Color::Green,
        t: 3.0,
        ..Sp::default()
    })
    .span(Sp {
        trace: 3,
        span: 2,
        parent: Some(1),
        app: "inventory",
        instance: "inv-b",
        t: 3.1,
        ..Sp::default()
    });
    let r = b.report();
    let mut hops: Vec<(String, &str, String, Vec<String>)> = r
        .cross_color_hops
        .iter()
        .map(|h| {
            (
                h.trace_id[30..].to_owned(),
                h.reason,
                h.from_app.clone(),
                h.via.clone(),
            )
        })
        .collect();
    hops.sort();
    assert_eq!(
        hops,
        vec![
            (
                "01".into(),
                "decision_changed",
                "order".into(),
                vec!["proxy".into(), "gateway".into()]
            ),
            (
                "02".into(),
                "decision_mismatch",
                "(none)".into(),
                vec!["gateway".into()]
            ),
            ("03".into(), "no_decision", "order".into(), vec![]),
        ]
    );
    let missing: Vec<(String, String)> = r
        .missing_decisions
        .iter()
        .map(|m| (m.app.clone(), m.caller_app.clone()))
        .collect();
    assert_eq!(
        missing,
        vec![
            ("order".into(), "(none)".into()),
            ("inventory".into(), "order".into())
        ]
    );
}

#[test]
fn unknown_colours_and_consumers_of_the_drained_side_are_never_hops() {
    let mut b = B::new();
    releasing(&mut b, "trade", &["order", "notify", "stock"], 100); // green drained
    let green = [("trade", Color::Green)];
    let blue = [("trade", Color::Blue)];
    b.span(Sp {
        trace: 1,
        span: 1,
        decisions: &blue,
        t: 1.0,
        ..Sp::default()
    })
    .span(Sp {
        trace: 1,
        span: 2,
        parent: Some(1),
        app: "stock",
        instance: "stock-x",
        color: Color::Unknown,
        decisions: &blue,
        t: 1.1,
        ..Sp::default()
    })
    // a green-decided message consumed on blue while green is drained: meant to be
    .span(Sp {
        trace: 2,
        span: 1,
        instance: "order-g",
        color: Color::Green,
        kind: Kind::Other,
        decisions: &green,
        t: 2.0,
        ..Sp::default()
    })
    .span(Sp {
        trace: 2,
        span: 2,
        parent: Some(1),
        app: "notify",
        instance: "notify-b",
        kind: Kind::Consumer,
        decisions: &green,
        t: 2.1,
        ..Sp::default()
    });
    let r = b.report();
    assert!(r.cross_color_hops.is_empty(), "{:?}", r.cross_color_hops);

    // The same message consumed on blue while nothing is drained is an MQ hop.
    let mut b = B::new();
    releasing(&mut b, "trade", &["order", "notify"], 50);
    b.span(Sp {
        trace: 2,
        span: 1,
        instance: "order-g",
        color: Color::Green,
        kind: Kind::Other,
        decisions: &green,
        t: 2.0,
        ..Sp::default()
    })
    .span(Sp {
        trace: 2,
        span: 2,
        parent: Some(1),
        app: "notify",
        instance: "notify-b",
        kind: Kind::Consumer,
        decisions: &green,
        t: 2.1,
        ..Sp::default()
    });
    let r = b.report();
    assert_eq!(r.cross_color_hops.len(), 1);
    assert_eq!(
        (
            r.cross_color_hops[0].kind,
            r.cross_color_hops[0].from_app.as_str()
        ),
        ("MQ", "order")
    );
}

#[test]
fn nothing_is_found_outside_a_release() {
    let mut b = B::new();
    b.channel("trade", &["order", "inventory"]);
    b.op(100.0, "trade", Op::Start);
    // before the start: no decision, crossing colours, all fine
    b.span(Sp {
        trace: 1,
        span: 1,
        instance: "order-g",
        color: Color::Green,
        t: 10.0,
        ..Sp::default()
    })
    .span(Sp {
        trace: 1,
        span: 2,
        parent: Some(1),
        app: "inventory",
        instance: "inv-b",
        t: 10.1,
        ..Sp::default()
    });
    let r = b.report();
    assert!(r.cross_color_hops.is_empty() && r.missing_decisions.is_empty());
}

#[test]
fn drained_side_counts_after_the_grace_period_with_every_trace() {
    let mut b = B::new();
    b.channel("trade", &["settle", "order"])
        .op(0.0, "trade", Op::Start)
        .op(60.0, "trade", Op::Ratio(0));
    // JOB root spans on blue: inside the 10 s grace (65 s), after it (75 s, 80 s)
    for (tr, t) in [(1u128, 65.0), (2, 75.0), (3, 80.0)] {
        b.span(Sp {
            trace: tr,
            span: 1,
            app: "settle",
            instance: "settle-b1",
            kind: Kind::Other,
            t,
            ..Sp::default()
        });
    }
    // green is not drained
    b.span(Sp {
        trace: 4,
        span: 1,
        app: "settle",
        instance: "settle-g1",
        color: Color::Green,
        kind: Kind::Other,
        t: 90.0,
        ..Sp::default()
    });
    let r = b.report();
    assert_eq!(r.drained_side.len(), 1, "{:?}", r.drained_side);
    let d = &r.drained_side[0];
    assert_eq!(
        (d.app.as_str(), d.color, d.kind, d.count, d.blue_percent),
        ("settle", "blue", "JOB", 2, 0)
    );
    assert_eq!(
        d.trace_ids,
        vec![format!("{:032x}", 2), format!("{:032x}", 3)]
    );
    assert_eq!(d.window_start_unix_nano, T0 + 60 * S);
    assert_eq!(d.window_end_unix_nano, T0 + 120 * S);
}

#[test]
fn ratio_deviation_case_16_a_and_c_and_straddling_windows() {
    // Case 16 A: ratio 20, but the balancer splits 500/500 in every minute.
    let mut b = B::new();
    releasing(&mut b, "ch2", &["pay"], 20);
    for m in 0..3 {
        let t = 60.0 * m as f64;
        b.requests("pay", "pay-b1", Color::Blue, t, 500, 0)
            .requests("pay", "pay-g1", Color::Green, t, 500, 0);
    }
    let r = b.report();
    assert_eq!(r.ratio_deviation.len(), 3, "{:?}", r.ratio_deviation);
    for d in &r.ratio_deviation {
        assert_eq!((d.color, d.blue_percent, d.requests), ("blue", 20, 1000));
        assert!((d.blue_share - 0.5).abs() < 1e-9);
        assert_eq!(
            d.cause, None,
            "equal cluster sizes: the weights do not explain it"
        );
    }
    assert!(r.instance_skew.is_empty());

    // Case 16 C: 10 requests are too few to judge.
    let mut b = B::new();
    releasing(&mut b, "ch3", &["cart"], 50);
    b.requests("cart", "cart-b1", Color::Blue, 0.0, 4, 0)
        .requests("cart", "cart-g1", Color::Green, 0.0, 6, 0);
    let r = b.report();
    assert!(r.ratio_deviation.is_empty() && r.instance_skew.is_empty());

    // A window straddling a ratio change is skipped; the next whole one is judged.
    let mut b = B::new();
    releasing(&mut b, "ch2", &["pay"], 20);
    b.op(30.0, "ch2", Op::Ratio(30));
    for m in 0..2 {
        let t = 60.0 * m as f64;
        b.requests("pay", "pay-b1", Color::Blue, t, 500, 0)
            .requests("pay", "pay-g1", Color::Green, t, 500, 0);
    }
    let r = b.report();
    assert_eq!(r.ratio_deviation.len(), 1);
    assert_eq!(
        (
            r.ratio_deviation[0].window_start_unix_nano,
            r.ratio_deviation[0].blue_percent
        ),
        (T0 + 60 * S, 30)
    );
}

#[test]
fn unequal_cluster_sizes_are_named_as_the_cause() {
    // r = 50 with plain weights 100/100, 1 blue and 3 green instances: blue gets 25 %.
    let mut b = B::new();
    releasing(&mut b, "trade", &["order"], 50);
    b.requests("order", "b1", Color::Blue, 0.0, 250, 0);
    for g in ["g1", "g2", "g3"] {
        b.requests("order", g, Color::Green, 0.0, 250, 0);
    }
    // unknown-colour requests are left out of the share
    b.requests("order", "x1", Color::Unknown, 0.0, 500, 0);
    let r = b.report();
    assert_eq!(r.ratio_deviation.len(), 1);
    let d = &r.ratio_deviation[0];
    assert_eq!(
        (d.color, d.requests, d.blue_instances, d.green_instances),
        ("green", 1000, 1, 3)
    );
    assert!((d.weight_implied_share - 0.25).abs() < 1e-9);
    assert_eq!(d.cause, Some("unequal_cluster_sizes"));
}

#[test]
fn instance_skew_case_16_b() {
    let mut b = B::new();
    releasing(&mut b, "ch3", &["cart"], 50);
    for i in 1..=4 {
        b.requests("cart", &format!("cart-b{i}"), Color::Blue, 0.0, 125, 0);
    }
    for (i, n) in [(1, 350), (2, 50), (3, 50), (4, 50)] {
        b.requests("cart", &format!("cart-g{i}"), Color::Green, 0.0, n, 0);
    }
    let r = b.report();
    assert!(r.ratio_deviation.is_empty(), "{:?}", r.ratio_deviation);
    assert_eq!(r.instance_skew.len(), 1);
    let s = &r.instance_skew[0];
    assert_eq!(
        (s.instance.as_str(), s.color, s.requests, s.color_requests),
        ("cart-g1", "green", 350, 500)
    );
}

#[test]
fn error_spike_is_one_sided_and_needs_both_sides() {
    // Case 17's counts (the 404s are not errors: is_error is resolved at ingest).
    let mut b = B::new();
    releasing(&mut b, "ch1", &["order"], 50);
    b.requests("order", "order-b1", Color::Blue, 0.0, 200, 0)
        .requests("order", "order-g1", Color::Green, 0.0, 200, 30);
    let r = b.report();
    let spikes: Vec<(Option<&str>, &str)> = r
        .error_spike
        .iter()
        .map(|e| (e.app.as_deref(), e.color))
        .collect();
    assert_eq!(spikes, vec![(None, "green"), (Some("order"), "green")]);
    let e = &r.error_spike[0];
    assert!((e.error_rate - 0.15).abs() < 1e-9 && e.other_error_rate == 0.0 && e.p_value < 0.01);

    // Variant: 10 more blue errors (4.8 %): still green only.
    let mut b = B::new();
    releasing(&mut b, "ch1", &["order"], 50);
    b.requests("order", "order-b1", Color::Blue, 0.0, 210, 10)
        .requests("order", "order-g1", Color::Green, 0.0, 200, 30);
    let r = b.report();
    assert!(r.error_spike.iter().all(|e| e.color == "green") && r.error_spike.len() == 2);

    // A colour with no traffic (drained) or too few requests: no spike, no division by zero.
    let mut b = B::new();
    releasing(&mut b, "ch1", &["order"], 100);
    b.requests("order", "order-b1", Color::Blue, 0.0, 300, 60);
    b.requests("order", "order-g1", Color::Green, 0.0, 99, 0);
    let r = b.report();
    assert!(r.error_spike.is_empty());
}

#[test]
fn window_counts_on_two_threads_find_what_one_pass_finds() {
    // Ratio deviation (20 % set, an even split served), instance skew, a one-sided spike and
    // drained-side JOBs, over three windows; the spans of each window's groups fall in both
    // halves of the list, so the halves' counts and exemplars must be added up.
    let mut b = B::new();
    b.channel("trade", &["order", "settle"])
        .op(-100.0, "trade", Op::Start)
        .op(-100.0, "trade", Op::Ratio(20))
        .op(125.0, "trade", Op::Ratio(0));
    for w in [0.0, 60.0] {
        b.requests("order", "order-b1", Color::Blue, w, 200, 0)
            .requests("order", "order-b2", Color::Blue, w, 20, 1)
            .requests("order", "order-b3", Color::Blue, w, 20, 0)
            .requests("order", "order-g1", Color::Green, w, 120, 25)
            .requests("order", "order-g2", Color::Green, w, 110, 20);
    }
    for (i, t) in [140.0, 150.0, 160.0, 170.0].into_iter().enumerate() {
        b.span(Sp {
            trace: 9_000 + i as u128,
            app: "settle",
            instance: if i % 2 == 0 { "settle-b1" } else { "settle-b2" },
            kind: Kind::Other,
            t,
            ..Sp::default()
        });
    }
    let spans = b.resolved();
    let config = AnalyzerConfig::default();
    // Under PARALLEL_DETECTIONS_MIN spans: one pass.
    let one = report(&spans, &config, false);
    assert!(
        !one.ratio_deviation.is_empty()
            && !one.instance_skew.is_empty()
            && !one.error_spike.is_empty()
            && !one.drained_side.is_empty(),
        "every windowed detection finds something: {} {} {} {}",
        one.ratio_deviation.len(),
        one.instance_skew.len(),
        one.error_spike.len(),
        one.drained_side.len()
    );
    let (mut drained, mut ratio, mut skew, mut spikes) = Default::default();
    super::windows::find(
        &spans,
        &config,
        true,
        &mut drained,
        &mut ratio,
        &mut skew,
        &mut spikes,
    );
    fn sorted<T: serde::Serialize>(v: &[T]) -> Vec<String> {
        let mut s: Vec<String> = v
            .iter()
            .map(|x| serde_json::to_string(x).unwrap())
            .collect();
        s.sort();
        s
    }
    assert_eq!(sorted(&drained), sorted(&one.drained_side));
    assert_eq!(sorted(&ratio), sorted(&one.ratio_deviation));
    assert_eq!(sorted(&skew), sorted(&one.instance_skew));
    assert_eq!(sorted(&spikes), sorted(&one.error_spike));
}

#[test]
fn a_report_of_some_detections_names_them_and_drops_the_others() {
    let mut b = B::new();
    releasing(&mut b, "ch1", &["order"], 50);
    b.requests("order", "order-b1", Color::Blue, 0.0, 200, 0)
        .requests("order", "order-g1", Color::Green, 0.0, 200, 30);
    let spans = b.resolved();
    let config = AnalyzerConfig::default();
    let all = report(&spans, &config, false);
    assert_eq!(all.error_spike.len(), 2);
    assert!(all.detections.is_none());
    let only = super::report_of(
        &spans,
        &config,
        false,
        &[super::Detection::InstanceSkew, super::Detection::ErrorSpike],
    );
    assert_eq!(only.error_spike.len(), 2);
    assert_eq!(only.detections, Some(vec!["instance_skew", "error_spike"]));
    let none_of_them =
        super::report_of(&spans, &config, false, &[super::Detection::RatioDeviation]);
    assert!(none_of_them.error_spike.is_empty());
    assert_eq!("error_spike".parse(), Ok(super::Detection::ErrorSpike));
    assert!(
        "spike"
            .parse::<super::Detection>()
            .unwrap_err()
            .contains("cross_color_hop, missing_decision, drained_side")
    );
}
