//! Domain §6.4, ratio deviation: in a window that no configuration change straddles, the
//! observed blue share of an app's requests is off blue_percent by more than max(the
//! minimum gap, a number of binomial standard errors); when the domain §5 weights explain
//! it by unequal cluster sizes, that is named as the cause. [`super::windows`] counts the
//! requests; this file judges them.

use dyeline_model::weights::weights;

use super::windows::counts::{Group, GroupAt, hexes};
use crate::analyze::config::Thresholds;
use crate::analyze::findings::RatioDeviation;

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
        exemplar_trace_ids: hexes(&over.exemplars),
        channel: at.channel.to_owned(),
        app: app.to_owned(),
        color: if observed > r { "blue" } else { "green" },
        kind: "RPC",
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

#[cfg(test)]
mod tests {
    use dyeline_control::Op;
    use dyeline_model::Color;

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
}
