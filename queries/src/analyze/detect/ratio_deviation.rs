//! Domain §6.4, ratio deviation: in a window that no configuration change straddles, the
//! observed blue share of an app's requests is off blue_percent by more than max(the
//! minimum gap, a number of binomial standard errors); when the domain §5 weights explain
//! it by unequal cluster sizes, that is named as the cause. [`super::windows`] counts the
//! requests; this file judges them.

use dyeline_model::weights::weights;
use dyeline_model::{Color, TrafficKind};

use super::windows::counts::{Group, GroupAt, hexes};
use crate::analyze::config::Thresholds;
use crate::analyze::findings::{
    Detection, Observation, RatioDeviation, WindowFinding, alert_labels, time_text,
};

/// The deviation of one app's window (`at.app` set), if any.
pub(super) fn judge(g: &Group, t: &Thresholds, at: &GroupAt<'_>, ratio: &mut Vec<RatioDeviation>) {
    let Some(app) = at.app else { return };
    let n = g.blue.requests + g.green.requests;
    if g.straddles || n < t.ratio_min_requests || n == 0 {
        return;
    }
    let r = f64::from(g.blue_percent) / 100.0;
    let observed = g.blue.requests as f64 / n as f64;
    let tolerance =
        (t.ratio_min_gap_pp / 100.0).max(t.ratio_std_errors * (r * (1.0 - r) / n as f64).sqrt());
    if (observed - r).abs() <= tolerance {
        return;
    }
    let (nb, ng) = (
        g.blue.instances.len() as u32,
        g.green.instances.len() as u32,
    );
    let implied = weights(g.blue_percent)
        .map(|w| w.implied_blue_share(nb, ng))
        .unwrap_or(r);
    let cause =
        (nb != ng && (implied - observed).abs() <= tolerance).then_some("unequal_cluster_sizes");
    let over = if observed > r { &g.blue } else { &g.green };
    ratio.push(RatioDeviation {
        environment: None,
        exemplar_trace_ids: hexes(&over.exemplars),
        channel: at.channel.to_owned(),
        app: app.to_owned(),
        color: if observed > r {
            Color::Blue
        } else {
            Color::Green
        },
        kind: TrafficKind::Rpc,
        requests: n,
        blue_share: observed,
        blue_percent: g.blue_percent,
        tolerance,
        weight_implied_share: implied,
        blue_instances: nb,
        green_instances: ng,
        cause,
        window_start_unix_nano: at.start,
        window_end_unix_nano: at.end,
    });
}

impl RatioDeviation {
    /// One line: observed blue share, requests, blue_percent, the gap against the tolerance
    /// in percentage points, and the cause when one is known. The alert's `summary` and the
    /// dashboard's finding row both use it.
    pub fn summary(&self) -> String {
        format!(
            "blue share {:.1}% of {} requests vs blue_percent {}: gap {:.1} pp > tolerance {:.1} pp{}",
            self.blue_share * 100.0,
            self.requests,
            self.blue_percent,
            (self.blue_share * 100.0 - f64::from(self.blue_percent)).abs(),
            self.tolerance * 100.0,
            self.cause
                .map(|c| format!(" (cause: {c})"))
                .unwrap_or_default()
        )
    }

    /// Its line in the text table.
    pub(crate) fn line(&self) -> String {
        format!(
            "  {} {} {}: blue share {:.1}% of {} requests vs blue_percent {} (weights imply {:.1}%, {}B/{}G instances){}",
            time_text(self.window_start_unix_nano),
            self.channel,
            self.app,
            self.blue_share * 100.0,
            self.requests,
            self.blue_percent,
            self.weight_implied_share * 100.0,
            self.blue_instances,
            self.green_instances,
            self.cause
                .map(|c| format!(" cause {c}"))
                .unwrap_or_default()
        )
    }

    /// Its alert: one per (channel, app, colour, kind).
    pub(crate) fn alert(&self) -> Observation {
        Observation {
            labels: alert_labels(
                Detection::RatioDeviation,
                &[
                    ("environment", self.environment.as_deref()),
                    ("channel", Some(&self.channel)),
                    ("app", Some(&self.app)),
                    ("color", Some(self.color.as_str())),
                    ("kind", Some(self.kind.as_str())),
                ],
            ),
            summary: self.summary(),
            window_end: self.window_end_unix_nano,
            exemplars: self.exemplar_trace_ids.clone(),
            counted: None,
        }
    }

    /// Its row among the dashboard's window findings.
    pub(crate) fn window_finding(&self) -> WindowFinding {
        WindowFinding {
            finding: Detection::RatioDeviation,
            app: Some(self.app.clone()),
            color: self.color,
            kind: self.kind,
            instance: None,
            detail: self.summary(),
            window_start_unix_nano: self.window_start_unix_nano,
            trace_ids: self.exemplar_trace_ids.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use dyeline_model::Color;
    use dyeline_model::release::Op;

    use crate::analyze::testkit::{B, S, T0, releasing};

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
            assert_eq!(
                (d.color.as_str(), d.blue_percent, d.requests),
                ("blue", 20, 1000)
            );
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
            (
                d.color.as_str(),
                d.requests,
                d.blue_instances,
                d.green_instances
            ),
            ("green", 1000, 1, 3)
        );
        assert!((d.weight_implied_share - 0.25).abs() < 1e-9);
        assert_eq!(d.cause, Some("unequal_cluster_sizes"));
    }
}
