//! Domain §6.5, instance skew: in a window, one instance of an app takes more than a factor
//! times its colour's mean requests per instance. [`super::windows`] counts the requests
//! per instance; this file judges them.

use super::windows::counts::{Group, GroupAt, hexes};
use crate::analyze::config::Thresholds;
use crate::analyze::findings::InstanceSkew;
use crate::analyze::intern::Interner;

/// The skewed instances of one app's window (`at.app` set), named by `instances`.
pub(super) fn judge(
    g: &Group,
    t: &Thresholds,
    at: &GroupAt<'_>,
    instances: &Interner,
    skew: &mut Vec<InstanceSkew>,
) {
    let Some(app) = at.app else { return };
    for (side, color) in [(&g.blue, "blue"), (&g.green, "green")] {
        if side.requests < t.skew_min_requests || side.instances.is_empty() {
            continue;
        }
        let mean = side.requests as f64 / side.instances.len() as f64;
        let mut over: Vec<(&u32, &(u64, Vec<u128>))> = side
            .instances
            .iter()
            .filter(|(_, (n, _))| *n as f64 > t.skew_factor * mean)
            .collect();
        over.sort_by_key(|(inst, _)| **inst);
        for (inst, (n, exemplars)) in over {
            skew.push(InstanceSkew {
                channel: at.channel.to_owned(),
                app: app.to_owned(),
                color,
                instance: instances.name(*inst).to_owned(),
                kind: "RPC",
                requests: *n,
                color_requests: side.requests,
                instances_seen: side.instances.len() as u64,
                mean_requests: mean,
                exemplar_trace_ids: hexes(exemplars),
                window_start_unix_nano: at.start,
                window_end_unix_nano: at.end,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use dyeline_model::Color;

    use crate::analyze::testkit::{B, releasing};

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
}
