//! Domain §6.6, one-sided error spikes: in a window, one colour's error rate is at least the
//! threshold, a factor above the other colour's, and significantly so (a two-proportion
//! z-test, [`two_proportion_p`]), per app and for the channel as a whole. [`super::windows`]
//! counts the requests and errors; this file judges them.

use dyeline_model::{Color, TrafficKind};

use super::windows::counts::{Group, GroupAt, hexes};
use crate::analyze::config::Thresholds;
use crate::analyze::findings::{
    Detection, ErrorSpike, Observation, WindowFinding, alert_labels, time_text,
};

/// Two-sided p-value of the two-proportion z-test of `e1/n1` against `e2/n2` (pooled
/// variance). 1.0 when it is undefined (no errors at all, or every request failed).
pub fn two_proportion_p(e1: u64, n1: u64, e2: u64, n2: u64) -> f64 {
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let pooled = (e1 + e2) as f64 / (n1f + n2f);
    let var = pooled * (1.0 - pooled) * (1.0 / n1f + 1.0 / n2f);
    if var <= 0.0 {
        return 1.0;
    }
    let z = (e1 as f64 / n1f - e2 as f64 / n2f) / var.sqrt();
    libm::erfc(z.abs() / std::f64::consts::SQRT_2)
}

/// The spikes of one group's window (none, or one colour's).
pub(super) fn judge(g: &Group, t: &Thresholds, at: &GroupAt<'_>, spikes: &mut Vec<ErrorSpike>) {
    for (x, y, color) in [
        (&g.blue, &g.green, Color::Blue),
        (&g.green, &g.blue, Color::Green),
    ] {
        if x.requests < t.spike_min_requests || y.requests < t.spike_min_requests {
            continue;
        }
        let rx = x.errors as f64 / x.requests as f64;
        let ry = y.errors as f64 / y.requests as f64;
        let p = two_proportion_p(x.errors, x.requests, y.errors, y.requests);
        if rx >= t.spike_min_error_rate && rx >= t.spike_factor * ry && p < t.spike_p_value {
            spikes.push(ErrorSpike {
                environment: None,
                channel: at.channel.to_owned(),
                app: at.app.map(str::to_owned),
                color,
                kind: TrafficKind::Rpc,
                requests: x.requests,
                errors: x.errors,
                error_rate: rx,
                other_requests: y.requests,
                other_errors: y.errors,
                other_error_rate: ry,
                p_value: p,
                exemplar_trace_ids: hexes(&x.error_exemplars),
                window_start_unix_nano: at.start,
                window_end_unix_nano: at.end,
            });
        }
    }
}

impl ErrorSpike {
    /// Its line in the text table.
    pub(crate) fn line(&self) -> String {
        format!(
            "  {} {} {} {}: {:.2}% errors ({} of {}) vs {:.2}% on the other side, p = {:.2e}",
            time_text(self.window_start_unix_nano),
            self.channel,
            self.app.as_deref().unwrap_or("(channel)"),
            self.color.as_str(),
            self.error_rate * 100.0,
            self.errors,
            self.requests,
            self.other_error_rate * 100.0,
            self.p_value
        )
    }

    /// Its alert: one per (channel, app or none, colour, kind).
    pub(crate) fn alert(&self, t: &Thresholds) -> Observation {
        Observation {
            labels: alert_labels(
                Detection::ErrorSpike,
                &[
                    ("environment", self.environment.as_deref()),
                    ("channel", Some(&self.channel)),
                    ("app", self.app.as_deref()),
                    ("color", Some(self.color.as_str())),
                    ("kind", Some(self.kind.as_str())),
                ],
            ),
            summary: format!(
                "{} error rate {:.2}% ({} of {}) ≥ {:.0}% and ≥ {}× the other side's {:.2}%; z-test p = {:.1e} < {}",
                self.color.as_str(),
                self.error_rate * 100.0,
                self.errors,
                self.requests,
                t.spike_min_error_rate * 100.0,
                t.spike_factor,
                self.other_error_rate * 100.0,
                self.p_value,
                t.spike_p_value
            ),
            window_end: self.window_end_unix_nano,
            exemplars: self.exemplar_trace_ids.clone(),
            counted: None,
        }
    }

    /// Its row among the dashboard's window findings.
    pub(crate) fn window_finding(&self, t: &Thresholds) -> WindowFinding {
        WindowFinding {
            finding: Detection::ErrorSpike,
            app: self.app.clone(),
            color: self.color,
            kind: self.kind,
            instance: None,
            detail: format!(
                "error rate {:.2}% ({} of {}) vs other side {:.2}% ({} of {}): ≥ {:.0}% and ≥ {}×, p = {:.1e} < {}",
                self.error_rate * 100.0,
                self.errors,
                self.requests,
                self.other_error_rate * 100.0,
                self.other_errors,
                self.other_requests,
                t.spike_min_error_rate * 100.0,
                t.spike_factor,
                self.p_value,
                t.spike_p_value
            ),
            window_start_unix_nano: self.window_start_unix_nano,
            trace_ids: self.exemplar_trace_ids.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use dyeline_model::Color;

    use super::*;
    use crate::analyze::testkit::{B, releasing};

    #[test]
    fn z_test_matches_known_values() {
        // 8% of 1000 against 0.5% of 1000: overwhelming.
        assert!(two_proportion_p(80, 1000, 5, 1000) < 1e-10);
        // equal rates: p = 1
        assert!((two_proportion_p(10, 1000, 10, 1000) - 1.0).abs() < 1e-12);
        // z = 1.96 → p ≈ 0.05: 60/500 vs 40/500, pooled 0.1, se = sqrt(.09*.004)=0.018974, z=2.108
        let p = two_proportion_p(60, 500, 40, 500);
        assert!((p - 0.03504).abs() < 1e-3, "{p}");
        // no errors at all: undefined, never a spike
        assert_eq!(two_proportion_p(0, 100, 0, 100), 1.0);
        assert_eq!(two_proportion_p(1, 0, 0, 100), 1.0);
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
            .map(|e| (e.app.as_deref(), e.color.as_str()))
            .collect();
        assert_eq!(spikes, vec![(None, "green"), (Some("order"), "green")]);
        let e = &r.error_spike[0];
        assert!(
            (e.error_rate - 0.15).abs() < 1e-9 && e.other_error_rate == 0.0 && e.p_value < 0.01
        );

        // Variant: 10 more blue errors (4.8 %): still green only.
        let mut b = B::new();
        releasing(&mut b, "ch1", &["order"], 50);
        b.requests("order", "order-b1", Color::Blue, 0.0, 210, 10)
            .requests("order", "order-g1", Color::Green, 0.0, 200, 30);
        let r = b.report();
        assert!(
            r.error_spike.iter().all(|e| e.color.as_str() == "green") && r.error_spike.len() == 2
        );

        // A colour with no traffic (drained) or too few requests: no spike, no division by zero.
        let mut b = B::new();
        releasing(&mut b, "ch1", &["order"], 100);
        b.requests("order", "order-b1", Color::Blue, 0.0, 300, 60);
        b.requests("order", "order-g1", Color::Green, 0.0, 99, 0);
        let r = b.report();
        assert!(r.error_spike.is_empty());
    }
}
