//! Domain §6.5, instance skew: in a window, one instance of an app takes more than a factor
//! times its colour's mean requests per instance. [`super::windows`] counts the requests
//! per instance; this file judges them.

use dyeline_model::{Color, TrafficKind};

use super::windows::counts::{Group, GroupAt, hexes};
use crate::analyze::config::Thresholds;
use crate::analyze::findings::{
    Detection, InstanceSkew, Observation, WindowFinding, alert_labels, time_text,
};
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
    for (side, color) in [(&g.blue, Color::Blue), (&g.green, Color::Green)] {
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
                environment: None,
                channel: at.channel.to_owned(),
                app: app.to_owned(),
                color,
                instance: instances.name(*inst).to_owned(),
                kind: TrafficKind::Rpc,
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

impl InstanceSkew {
    /// Its line in the text table.
    pub(crate) fn line(&self) -> String {
        format!(
            "  {} {} {} {} {}: {} requests, {:.1}× the mean of {} instances",
            time_text(self.window_start_unix_nano),
            self.channel,
            self.app,
            self.color.as_str(),
            self.instance,
            self.requests,
            self.requests as f64 / self.mean_requests,
            self.instances_seen
        )
    }

    /// Its alert: one per (channel, app, colour, kind, instance).
    pub(crate) fn alert(&self, t: &Thresholds) -> Observation {
        Observation {
            labels: alert_labels(
                Detection::InstanceSkew,
                &[
                    ("environment", self.environment.as_deref()),
                    ("channel", Some(&self.channel)),
                    ("app", Some(&self.app)),
                    ("color", Some(self.color.as_str())),
                    ("kind", Some(self.kind.as_str())),
                    ("instance", Some(&self.instance)),
                ],
            ),
            summary: format!(
                "{} took {} of {} {} requests: {:.1}× the mean {:.1} > threshold {}×",
                self.instance,
                self.requests,
                self.color_requests,
                self.color.as_str(),
                self.requests as f64 / self.mean_requests,
                self.mean_requests,
                t.skew_factor
            ),
            window_end: self.window_end_unix_nano,
            exemplars: self.exemplar_trace_ids.clone(),
            counted: None,
        }
    }

    /// Its row among the dashboard's window findings.
    pub(crate) fn window_finding(&self, t: &Thresholds) -> WindowFinding {
        WindowFinding {
            finding: Detection::InstanceSkew,
            app: Some(self.app.clone()),
            color: self.color,
            kind: self.kind,
            instance: Some(self.instance.clone()),
            detail: format!(
                "{} of {} {} requests: {:.1}× the mean {:.1} > {}×",
                self.requests,
                self.color_requests,
                self.color.as_str(),
                self.requests as f64 / self.mean_requests.max(1e-9),
                self.mean_requests,
                t.skew_factor
            ),
            window_start_unix_nano: self.window_start_unix_nano,
            trace_ids: self.exemplar_trace_ids.clone(),
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
            (
                s.instance.as_str(),
                s.color.as_str(),
                s.requests,
                s.color_requests
            ),
            ("cart-g1", "green", 350, 500)
        );
    }
}
