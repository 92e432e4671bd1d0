//! Hand-made spans for the detections' tests (each detection's file tests it on them, with
//! the edge cases of domain §6 and the analyzer cases 11, 16 and 17 of `../shared/cases`):
//! [`B`] adds spans and channel operations and resolves them.

use dyeline_model::release::{Channels, Op, Timeline};
use dyeline_model::{ChannelId, Color, TrafficKind};

use super::config::AnalyzerConfig;
use super::read::resolve::resolve;
use super::report::{Report, report};
use super::spans::{Kind, LaneFact, NO_SOURCE, SpanRec, Spans, env_id};

/// A minute-aligned base time (Unix ns).
/// A minute-aligned base time (Unix ns).
pub(crate) const T0: i64 = 1_700_000_040_000_000_000;
/// A second, ns.
pub(crate) const S: i64 = 1_000_000_000;

/// Spans and the channel history they are resolved against.
pub(crate) struct B {
    spans: Spans,
    initial: Channels,
    ops: Vec<(i64, ChannelId, Op)>,
}

fn id(s: &str) -> ChannelId {
    ChannelId::new(s).unwrap()
}

/// One span: its start `t` in seconds after [`T0`].
pub(crate) struct Sp<'a> {
    pub trace: u128,
    pub span: u64,
    pub parent: Option<u64>,
    pub app: &'a str,
    pub instance: &'a str,
    pub color: Color,
    pub kind: Kind,
    pub t: f64,
    pub decisions: &'a [(&'a str, Color)],
    pub error: bool,
    /// Its instance's lane (`base` by default, else decided by `deploy.lane`).
    pub lane: &'a str,
    /// The lane tag it carries.
    pub tag: Option<&'a str>,
    /// Its deployment environment.
    pub env: Option<&'a str>,
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
            lane: "base",
            tag: None,
            env: None,
        }
    }
}

impl B {
    pub(crate) fn new() -> Self {
        B {
            spans: Spans::default(),
            initial: Channels::new(),
            ops: Vec::new(),
        }
    }

    pub(crate) fn channel(&mut self, ch: &str, apps: &[&str]) -> &mut Self {
        self.initial.apply(
            &id(ch),
            &Op::Apps(apps.iter().map(|a| a.to_string()).collect()),
        );
        self
    }

    pub(crate) fn op(&mut self, t: f64, ch: &str, op: Op) -> &mut Self {
        self.ops.push((T0 + (t * S as f64) as i64, id(ch), op));
        self
    }

    pub(crate) fn span(&mut self, sp: Sp) -> &mut Self {
        let app = self.spans.apps.intern(sp.app);
        let instance = self.spans.instances.intern(sp.instance);
        let decisions = sp
            .decisions
            .iter()
            .map(|(c, col)| (self.spans.channels.intern(c), *col))
            .collect();
        let decision_set = self.spans.decision_sets.intern(decisions);
        let lanes = &mut self.spans.lanes;
        let fact = LaneFact {
            lane: lanes.names.intern(sp.lane),
            rule: if sp.lane == "base" {
                0
            } else {
                lanes.rules.intern("deploy.lane")
            },
            tag: sp.tag.map(|t| lanes.names.intern(t)),
        };
        let lane = lanes.intern(fact);
        let env = sp
            .env
            .map_or(0, |e| env_id(self.spans.environments.intern(e)));
        let traffic = match sp.kind {
            Kind::Server => Some(TrafficKind::Rpc),
            Kind::Consumer => Some(TrafficKind::Mq),
            _ if sp.parent.is_none() => Some(TrafficKind::Job),
            _ => None,
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
            channel: crate::analyze::spans::ChannelRef::NONE,
            blue_percent: 50,
            interval: 0,
            source: NO_SOURCE,
            lane,
            env,
        });
        self
    }

    /// `n` requests (root SERVER spans with a decision) on `instance` of `app`, spread over
    /// `[t, t + 50 s)`; the first `errors` are errors.
    pub(crate) fn requests(
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

    /// Span `(trace, span)` (a parentless CONSUMER span) links to the spans `to`.
    pub(crate) fn links(&mut self, consumer: (u128, u64), to: &[(u128, u64)]) -> &mut Self {
        self.spans
            .consumer_links
            .insert(consumer, to.iter().copied().collect());
        self
    }

    /// The spans added, resolved against the timeline of the channels and operations.
    pub(crate) fn resolved(&mut self) -> Spans {
        let mut ops = self.ops.clone();
        ops.sort_by_key(|o| o.0);
        let timeline = Timeline::from_ops(self.initial.clone(), ops);
        let mut spans = std::mem::take(&mut self.spans);
        resolve(&mut spans, &timeline);
        spans
    }

    pub(crate) fn report(&mut self) -> Report {
        report(&self.resolved(), &AnalyzerConfig::default(), false)
    }
}

/// `ch` holding `apps`, releasing at blue_percent `r` since well before [`T0`].
pub(crate) fn releasing(b: &mut B, ch: &str, apps: &[&str], r: u8) {
    b.channel(ch, apps)
        .op(-100.0, ch, Op::Start)
        .op(-100.0, ch, Op::Ratio(r));
}

/// A request for lane gray served by order's base instance while its gray instance
/// serves requests 10 s before and after (present): one lane leak; and a blue-green
/// spike of case 17.
pub(crate) fn leak_and_spike() -> Spans {
    let mut b = B::new();
    releasing(&mut b, "ch1", &["order"], 50);
    b.requests("order", "order-b1", Color::Blue, 0.0, 200, 0)
        .requests("order", "order-g1", Color::Green, 0.0, 200, 30);
    for (trace, t, instance, lane) in [
        (7, 10.0, "order-gray1", "gray"),
        (8, 20.0, "order-b1", "base"),
        (9, 30.0, "order-gray1", "gray"),
    ] {
        b.span(Sp {
            trace,
            instance,
            lane,
            tag: Some("gray"),
            t,
            ..Sp::default()
        });
    }
    b.resolved()
}
