//! Alerts from findings (issue: analyzer, item 3): every finding type raises an alert named
//! `Dyeline` + the type in CamelCase, keyed by its labels (type, channel, app, color, kind;
//! plus instance for skew and from/to app for hops). An alert fires as soon as a window's
//! condition holds and resolves once the condition has not held for one whole window (plus
//! the lateness allowed for spans); repeated findings update it, never duplicate it. Pure
//! state; delivery (Alertmanager, webhooks) is the server's.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::analyze::detect::windows::window_start;
use crate::analyze::{AnalyzerConfig, Report};

/// Firing or resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AlertState {
    /// The condition holds (or held within the last window).
    Firing,
    /// It has not held for a whole window.
    Resolved,
}

/// One alert.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Alert {
    /// Labels: `alertname`, `type`, `channel`, and where they apply `app`, `color`, `kind`,
    /// `instance`, `from_app`, `to_app`.
    pub labels: BTreeMap<String, String>,
    /// `summary` (observed value, comparator, threshold), `description`, `exemplar_trace_ids`.
    pub annotations: BTreeMap<String, String>,
    /// Firing or resolved.
    pub state: AlertState,
    /// When it (last) started firing, Unix ns.
    pub starts_at_unix_nano: i64,
    /// When it resolved, Unix ns.
    pub ends_at_unix_nano: Option<i64>,
    /// End of the newest window in which the condition held, Unix ns.
    pub last_window_end_unix_nano: i64,
    /// Up to 5 trace ids for drilldown.
    pub exemplar_trace_ids: Vec<String>,
}

/// A state change to deliver.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Began (or began again) firing.
    Fired(Alert),
    /// Resolved.
    Resolved(Alert),
}

/// Every alert, keyed by its labels.
#[derive(Debug, Default)]
pub struct AlertBook {
    alerts: HashMap<Vec<(String, String)>, Alert>,
    version: u64,
}

fn camel(t: &str) -> String {
    t.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

struct Observation {
    labels: BTreeMap<String, String>,
    summary: String,
    window_end: i64,
    exemplars: Vec<String>,
}

fn labels(kind: &str, pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    l.insert("alertname".into(), format!("Dyeline{}", camel(kind)));
    l.insert("type".into(), kind.into());
    for (k, v) in pairs {
        if let Some(v) = v {
            l.insert((*k).into(), (*v).into());
        }
    }
    l
}

/// One line for a ratio deviation (domain §6.4): observed blue share, requests, blue_percent,
/// the gap against the tolerance in percentage points, and the cause when one is known. The
/// alert's `summary` and the dashboard's finding row both use it.
pub fn ratio_deviation_summary(d: &crate::analyze::RatioDeviation) -> String {
    format!(
        "blue share {:.1}% of {} requests vs blue_percent {}: gap {:.1} pp > tolerance {:.1} pp{}",
        d.blue_share * 100.0,
        d.requests,
        d.blue_percent,
        (d.blue_share * 100.0 - f64::from(d.blue_percent)).abs(),
        d.tolerance * 100.0,
        d.cause
            .map(|c| format!(" (cause: {c})"))
            .unwrap_or_default()
    )
}

fn observations(report: &Report, config: &AnalyzerConfig) -> Vec<Observation> {
    let window = |ch: &str| config.for_channel(ch).window.as_nanos().max(1) as i64;
    let mut out: Vec<Observation> = Vec::new();
    let mut hop_counts: HashMap<BTreeMap<String, String>, usize> = HashMap::new();
    for h in &report.cross_color_hops {
        let l = labels(
            "cross_color_hop",
            &[
                ("channel", Some(&h.channel)),
                ("app", Some(&h.to_app)),
                ("color", Some(h.to_color)),
                ("kind", Some(h.kind)),
                ("from_app", Some(&h.from_app)),
                ("to_app", Some(&h.to_app)),
            ],
        );
        *hop_counts.entry(l.clone()).or_default() += 1;
        let n = hop_counts[&l];
        out.push(Observation {
            summary: format!(
                "{n} cross-colour hop(s) in {}: {}({}) → {}({}){} [{}]; observed {n} > threshold 0",
                h.channel,
                h.from_app,
                h.from_color.unwrap_or("-"),
                h.to_app,
                h.to_color,
                if h.via.is_empty() {
                    String::new()
                } else {
                    format!(" via {}", h.via.join(" → "))
                },
                h.reason
            ),
            labels: l,
            window_end: window_start(h.t_unix_nano, window(&h.channel)) + window(&h.channel),
            exemplars: vec![h.trace_id.clone()],
        });
    }
    for m in &report.missing_decisions {
        out.push(Observation {
            labels: labels(
                "missing_decision",
                &[
                    ("channel", Some(&m.channel)),
                    ("app", Some(&m.app)),
                    ("kind", Some(m.kind)),
                ],
            ),
            summary: format!(
                "{} {} spans carry no decision for {} (caller {}); observed > threshold 0",
                m.app, m.kind, m.channel, m.caller_app
            ),
            window_end: window_start(m.t_unix_nano, window(&m.channel)) + window(&m.channel),
            exemplars: vec![m.trace_id.clone()],
        });
    }
    for d in &report.drained_side {
        let grace = config.for_channel(&d.channel).grace;
        out.push(Observation {
            labels: labels(
                "drained_side",
                &[("channel", Some(&d.channel)), ("app", Some(&d.app)), ("color", Some(d.color)), ("kind", Some(d.kind))],
            ),
            summary: format!(
                "{} {} spans on drained {} of {} (blue_percent {}) more than {:?} after the change: observed {} > threshold 0",
                d.count, d.kind, d.color, d.app, d.blue_percent, grace, d.count
            ),
            window_end: d.window_end_unix_nano,
            exemplars: d.trace_ids.iter().take(5).cloned().collect(),
        });
    }
    for d in &report.ratio_deviation {
        out.push(Observation {
            labels: labels(
                "ratio_deviation",
                &[
                    ("channel", Some(&d.channel)),
                    ("app", Some(&d.app)),
                    ("color", Some(d.color)),
                    ("kind", Some(d.kind)),
                ],
            ),
            summary: ratio_deviation_summary(d),
            window_end: d.window_end_unix_nano,
            exemplars: d.exemplar_trace_ids.clone(),
        });
    }
    for s in &report.instance_skew {
        let t = config.for_channel(&s.channel);
        out.push(Observation {
            labels: labels(
                "instance_skew",
                &[
                    ("channel", Some(&s.channel)),
                    ("app", Some(&s.app)),
                    ("color", Some(s.color)),
                    ("kind", Some(s.kind)),
                    ("instance", Some(&s.instance)),
                ],
            ),
            summary: format!(
                "{} took {} of {} {} requests: {:.1}× the mean {:.1} > threshold {}×",
                s.instance,
                s.requests,
                s.color_requests,
                s.color,
                s.requests as f64 / s.mean_requests,
                s.mean_requests,
                t.skew_factor
            ),
            window_end: s.window_end_unix_nano,
            exemplars: s.exemplar_trace_ids.clone(),
        });
    }
    for e in &report.error_spike {
        let t = config.for_channel(&e.channel);
        out.push(Observation {
            labels: labels(
                "error_spike",
                &[("channel", Some(&e.channel)), ("app", e.app.as_deref()), ("color", Some(e.color)), ("kind", Some(e.kind))],
            ),
            summary: format!(
                "{} error rate {:.2}% ({} of {}) ≥ {:.0}% and ≥ {}× the other side's {:.2}%; z-test p = {:.1e} < {}",
                e.color,
                e.error_rate * 100.0,
                e.errors,
                e.requests,
                t.spike_min_error_rate * 100.0,
                t.spike_factor,
                e.other_error_rate * 100.0,
                e.p_value,
                t.spike_p_value
            ),
            window_end: e.window_end_unix_nano,
            exemplars: e.exemplar_trace_ids.clone(),
        });
    }
    out
}

impl AlertBook {
    /// Records the findings of one evaluation at `now`; returns alerts that began firing.
    pub fn observe(&mut self, report: &Report, config: &AnalyzerConfig, now: i64) -> Vec<Change> {
        let mut changes = Vec::new();
        for o in observations(report, config) {
            let key: Vec<(String, String)> = o.labels.clone().into_iter().collect();
            let alert = self.alerts.entry(key).or_insert_with(|| Alert {
                labels: o.labels.clone(),
                annotations: BTreeMap::new(),
                state: AlertState::Resolved,
                starts_at_unix_nano: now,
                ends_at_unix_nano: None,
                last_window_end_unix_nano: i64::MIN,
                exemplar_trace_ids: Vec::new(),
            });
            // New, or resolved before this window ended: (re)fire. A finding of a window that
            // ended before the alert resolved is old news.
            let fired = alert.state == AlertState::Resolved
                && o.window_end > alert.ends_at_unix_nano.unwrap_or(i64::MIN);
            if alert.state == AlertState::Resolved && !fired {
                continue; // an old window's finding after the alert resolved
            }
            alert.last_window_end_unix_nano = alert.last_window_end_unix_nano.max(o.window_end);
            for t in o.exemplars {
                if alert.exemplar_trace_ids.len() < 5 && !alert.exemplar_trace_ids.contains(&t) {
                    alert.exemplar_trace_ids.push(t);
                }
            }
            alert.annotations.insert("summary".into(), o.summary);
            alert.annotations.insert(
                "exemplar_trace_ids".into(),
                alert.exemplar_trace_ids.join(","),
            );
            if fired {
                alert.state = AlertState::Firing;
                alert.starts_at_unix_nano = now;
                alert.ends_at_unix_nano = None;
                changes.push(Change::Fired(alert.clone()));
            }
        }
        self.version += changes.len() as u64;
        changes
    }

    /// A count of state changes (fired or resolved) so far: it moves whenever the list of
    /// firing alerts does (the dashboard's live updates watch it).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Resolves firing alerts whose condition last held more than one window (plus
    /// `lateness`) ago.
    pub fn sweep(&mut self, config: &AnalyzerConfig, lateness: i64, now: i64) -> Vec<Change> {
        let mut changes = Vec::new();
        for alert in self.alerts.values_mut() {
            if alert.state != AlertState::Firing {
                continue;
            }
            let channel = alert.labels.get("channel").map_or("", String::as_str);
            let window = config.for_channel(channel).window.as_nanos() as i64;
            if now
                >= alert
                    .last_window_end_unix_nano
                    .saturating_add(window)
                    .saturating_add(lateness)
            {
                alert.state = AlertState::Resolved;
                alert.ends_at_unix_nano = Some(now);
                changes.push(Change::Resolved(alert.clone()));
            }
        }
        self.version += changes.len() as u64;
        changes
    }

    /// Every alert, optionally only those in `state`, newest first.
    pub fn list(&self, state: Option<AlertState>) -> Vec<Alert> {
        let mut v: Vec<Alert> = self
            .alerts
            .values()
            .filter(|a| state.is_none_or(|s| a.state == s))
            .cloned()
            .collect();
        v.sort_by(|a, b| {
            b.starts_at_unix_nano
                .cmp(&a.starts_at_unix_nano)
                .then(a.labels.cmp(&b.labels))
        });
        v
    }

    /// Firing alerts.
    pub fn firing(&self) -> Vec<Alert> {
        self.list(Some(AlertState::Firing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::ErrorSpike;

    fn spike(window_start: i64) -> Report {
        Report {
            error_spike: vec![ErrorSpike {
                channel: "trade".into(),
                app: Some("order".into()),
                color: "blue",
                kind: "RPC",
                requests: 1000,
                errors: 80,
                error_rate: 0.08,
                other_requests: 1000,
                other_errors: 5,
                other_error_rate: 0.005,
                p_value: 1e-12,
                exemplar_trace_ids: vec!["ab".repeat(16)],
                window_start_unix_nano: window_start,
                window_end_unix_nano: window_start + 60 * S,
            }],
            ..Report::default()
        }
    }

    const S: i64 = 1_000_000_000;

    #[test]
    fn fires_once_dedupes_and_resolves_after_a_quiet_window() {
        let cfg = AnalyzerConfig::default();
        let mut book = AlertBook::default();
        let w0 = 600 * S;
        let fired = book.observe(&spike(w0), &cfg, w0 + 20 * S);
        assert_eq!(fired.len(), 1);
        let Change::Fired(a) = &fired[0] else {
            panic!()
        };
        assert_eq!(a.labels["alertname"], "DyelineErrorSpike");
        assert_eq!(
            (
                a.labels["channel"].as_str(),
                a.labels["app"].as_str(),
                a.labels["color"].as_str(),
                a.labels["kind"].as_str()
            ),
            ("trade", "order", "blue", "RPC")
        );
        assert!(
            a.annotations["summary"].contains("8.00%")
                && a.annotations["summary"].contains("< 0.01")
        );
        // the same finding again, and in the next window: no new alert
        assert!(book.observe(&spike(w0), &cfg, w0 + 22 * S).is_empty());
        assert!(
            book.observe(&spike(w0 + 60 * S), &cfg, w0 + 70 * S)
                .is_empty()
        );
        assert_eq!(book.list(None).len(), 1);
        // not resolved while the condition held within the last window
        assert!(book.sweep(&cfg, 30 * S, w0 + 150 * S).is_empty());
        // resolved once a whole window (+ lateness) passed without it
        let r = book.sweep(&cfg, 30 * S, w0 + 210 * S);
        assert_eq!(r.len(), 1);
        assert_eq!(book.list(Some(AlertState::Resolved)).len(), 1);
        assert!(book.firing().is_empty());
        // a finding of an old window (late report) does not re-fire it
        assert!(
            book.observe(&spike(w0 + 60 * S), &cfg, w0 + 212 * S)
                .is_empty()
        );
        // a closed window's finding fires a new alert
        let mut other = spike(w0);
        other.error_spike[0].app = None;
        assert_eq!(book.observe(&other, &cfg, w0 + 65 * S).len(), 1);
        // a new window's finding fires it again
        assert_eq!(
            book.observe(&spike(w0 + 240 * S), &cfg, w0 + 250 * S).len(),
            1
        );
    }
}
