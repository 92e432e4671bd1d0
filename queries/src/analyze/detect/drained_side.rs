//! Domain §6.3, drained-side traffic: spans on the colour a channel has drained (blue_percent
//! 0 or 100), more than the grace period after the app's configuration changed, per window,
//! app, colour and traffic kind, with every trace id. [`super::windows`] counts them; this
//! file judges the counts.

use dyeline_model::Color;

use super::windows::counts::{DrainAcc, DrainKey, FastMap};
use crate::analyze::config::Thresholds;
use crate::analyze::findings::{
    Detection, DrainedSide, Observation, WindowFinding, alert_labels, hex128, time_text,
};
use crate::analyze::spans::Spans;

/// One finding per drained-side key of the counts (the counting kept only the spans past
/// the grace period on the drained colour), named by `names`; `window_of` is each channel's
/// window, ns.
pub(super) fn judge(
    drain: FastMap<DrainKey, DrainAcc>,
    names: &Spans,
    window_of: impl Fn(u32) -> i64,
    drained: &mut Vec<DrainedSide>,
) {
    for ((c, app, color_blue, kind, ws), (count, instances, traces, bp)) in drain {
        let w = window_of(c);
        drained.push(DrainedSide {
            environment: None,
            channel: names.channels.name(c).to_owned(),
            app: names.apps.name(app).to_owned(),
            color: if color_blue {
                Color::Blue
            } else {
                Color::Green
            },
            kind,
            count,
            blue_percent: bp,
            instances: {
                let mut instance_names: Vec<String> = instances
                    .iter()
                    .map(|i| names.instances.name(*i).to_owned())
                    .collect();
                instance_names.sort();
                instance_names
            },
            trace_ids: traces.iter().map(|t| hex128(*t)).collect(),
            window_start_unix_nano: ws,
            window_end_unix_nano: ws + w,
        });
    }
}

impl DrainedSide {
    /// Its line in the text table.
    pub(crate) fn line(&self) -> String {
        format!(
            "  {} {} {} on {} ({}% blue) {}: {} spans on {}",
            time_text(self.window_start_unix_nano),
            self.channel,
            self.app,
            self.color.as_str(),
            self.blue_percent,
            self.kind.as_str(),
            self.count,
            self.instances.join(",")
        )
    }

    /// Its alert: one per (channel, app, colour, kind).
    pub(crate) fn alert(&self, t: &Thresholds) -> Observation {
        Observation {
            labels: alert_labels(
                Detection::DrainedSide,
                &[
                    ("environment", self.environment.as_deref()),
                    ("channel", Some(&self.channel)),
                    ("app", Some(&self.app)),
                    ("color", Some(self.color.as_str())),
                    ("kind", Some(self.kind.as_str())),
                ],
            ),
            summary: format!(
                "{} {} spans on drained {} of {} (blue_percent {}) more than {:?} after the change: observed {} > threshold 0",
                self.count,
                self.kind.as_str(),
                self.color.as_str(),
                self.app,
                self.blue_percent,
                t.grace,
                self.count
            ),
            window_end: self.window_end_unix_nano,
            exemplars: self.trace_ids.iter().take(5).cloned().collect(),
            counted: None,
        }
    }

    /// Its row among the dashboard's window findings.
    pub(crate) fn window_finding(&self) -> WindowFinding {
        WindowFinding {
            finding: Detection::DrainedSide,
            app: Some(self.app.clone()),
            color: self.color,
            kind: self.kind,
            instance: None,
            detail: format!(
                "{} {} span(s) on drained {} at blue_percent {} ({}); threshold 0",
                self.count,
                self.kind.as_str(),
                self.color.as_str(),
                self.blue_percent,
                self.instances.join(", ")
            ),
            window_start_unix_nano: self.window_start_unix_nano,
            trace_ids: self.trace_ids.iter().take(5).cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use dyeline_model::Color;
    use dyeline_model::release::Op;

    use crate::analyze::spans::Kind;
    use crate::analyze::testkit::{B, S, Sp, T0};

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
            (
                d.app.as_str(),
                d.color.as_str(),
                d.kind.as_str(),
                d.count,
                d.blue_percent
            ),
            ("settle", "blue", "JOB", 2, 0)
        );
        assert_eq!(
            d.trace_ids,
            vec![format!("{:032x}", 2), format!("{:032x}", 3)]
        );
        assert_eq!(d.window_start_unix_nano, T0 + 60 * S);
        assert_eq!(d.window_end_unix_nano, T0 + 120 * S);
    }
}
