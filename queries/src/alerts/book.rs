//! The alert book: every finding type raises an alert named `Dyeline` + the type in
//! CamelCase, keyed by its labels (type, channel, app, color, kind; plus instance for skew
//! and from/to app for hops; a lane finding has lane_group and lane instead of channel and
//! colour, see `crate::analyze::detect::lane_alerts`). An alert fires as soon as a window's condition holds and
//! resolves once the condition has not held for one whole window (plus the lateness allowed
//! for spans); repeated findings update it, never duplicate it. Pure state.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;
use serde::Serialize;

use crate::analyze::findings::{AlertCounts, Observation};
use crate::analyze::{AnalyzerConfig, Report};

/// The alert book shared by the live evaluation, the alerts route and the dashboard.
pub type SharedAlerts = std::sync::Arc<Mutex<AlertBook>>;

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
    /// Labels: `alertname`, `type`, `channel` (or `lane_group` and `lane`), and where they
    /// apply `app`, `color`, `kind`, `instance`, `from_app`, `to_app`, `reason`, ....
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
    /// The tumbling window of its findings, ns: it resolves once a whole one (plus the
    /// lateness) passed without them.
    #[serde(skip)]
    pub window_ns: i64,
}

impl Alert {
    /// Alertmanager's fingerprint of its labels: FNV-1a (64 bits) over each label's name and
    /// value in name order, each followed by the byte 0xff; 16 hex digits. Labels keep an
    /// alert's identity, so this names it across nodes and restarts.
    pub fn fingerprint(&self) -> String {
        use std::hash::Hasher;
        let mut h = fnv::FnvHasher::default();
        for (k, v) in &self.labels {
            h.write(k.as_bytes());
            h.write(&[0xff]);
            h.write(v.as_bytes());
            h.write(&[0xff]);
        }
        format!("{:016x}", h.finish())
    }

    /// The idempotency key of its latest transition: fingerprint, start and `firing` or
    /// `resolved`. Every delivery of that transition carries it, whichever node sends it.
    pub fn delivery_key(&self) -> String {
        let transition = match self.state {
            AlertState::Firing => "firing",
            AlertState::Resolved => "resolved",
        };
        format!(
            "{}-{}-{transition}",
            self.fingerprint(),
            self.starts_at_unix_nano
        )
    }
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

/// What the findings of `report` tell the alerts, in the report's order (a hop's summary
/// counts the hops of its alert seen so far), each with its window's length (ns).
pub(super) fn observations(report: &Report, config: &AnalyzerConfig) -> Vec<(Observation, i64)> {
    let mut seen = AlertCounts::new();
    report
        .findings()
        .map(|f| {
            let window = f.window(config).as_nanos().max(1) as i64;
            (f.alert(config, &mut seen), window)
        })
        .collect()
}

impl AlertBook {
    /// Records the findings of one evaluation at `now`; returns alerts that began firing.
    pub fn observe(&mut self, report: &Report, config: &AnalyzerConfig, now: i64) -> Vec<Change> {
        self.observe_all(observations(report, config), now)
    }

    /// Records `observations` (each with its window's length, ns) of one evaluation at `now`
    /// (the alert leader's merge of every node's share); returns alerts that began firing.
    pub fn observe_all(&mut self, observations: Vec<(Observation, i64)>, now: i64) -> Vec<Change> {
        let mut changes = Vec::new();
        for (o, window_ns) in observations {
            let key: Vec<(String, String)> = o.labels.clone().into_iter().collect();
            let alert = self.alerts.entry(key).or_insert_with(|| Alert {
                labels: o.labels.clone(),
                annotations: BTreeMap::new(),
                state: AlertState::Resolved,
                starts_at_unix_nano: now,
                ends_at_unix_nano: None,
                last_window_end_unix_nano: i64::MIN,
                exemplar_trace_ids: Vec::new(),
                window_ns,
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
    pub fn sweep(&mut self, lateness: i64, now: i64) -> Vec<Change> {
        let mut changes = Vec::new();
        for alert in self.alerts.values_mut() {
            if alert.state != AlertState::Firing {
                continue;
            }
            if now
                >= alert
                    .last_window_end_unix_nano
                    .saturating_add(alert.window_ns)
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

    /// Replaces every alert with `alerts` (the book as the alert leader stored it); the
    /// version moves when an alert appears, goes or changes state.
    pub fn replace(&mut self, alerts: Vec<Alert>) {
        let next: HashMap<Vec<(String, String)>, Alert> = alerts
            .into_iter()
            .map(|a| (a.labels.clone().into_iter().collect(), a))
            .collect();
        let moved = next.len() != self.alerts.len()
            || next.iter().any(|(k, a)| {
                self.alerts.get(k).is_none_or(|b| {
                    (b.state, b.starts_at_unix_nano) != (a.state, a.starts_at_unix_nano)
                })
            });
        self.alerts = next;
        if moved {
            self.version += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use dyeline_model::{Color, TrafficKind};

    use super::*;
    use crate::analyze::ErrorSpike;

    fn spike(window_start: i64) -> Report {
        Report {
            error_spike: vec![ErrorSpike {
                environment: None,
                channel: "trade".into(),
                app: Some("order".into()),
                color: Color::Blue,
                kind: TrafficKind::Rpc,
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

    /// A lane leak fires an alert labelled by lane group and lane, without a channel, and
    /// resolves by the lane window, not the channels'.
    #[test]
    fn a_lane_alert_resolves_by_the_lane_window() {
        use crate::analyze::detect::lanes::{LaneLeak, LaneReport, LeakReason};
        let mut cfg = AnalyzerConfig::default();
        cfg.lanes.window = std::time::Duration::from_secs(10);
        let t = 1_000 * S + 3 * S;
        let report = Report {
            lane: Some(LaneReport {
                leaks: vec![LaneLeak {
                    environment: None,
                    trace_id: "ef".repeat(16),
                    span_id: "01".repeat(8),
                    t_unix_nano: t,
                    group: Some("mall".into()),
                    lane: "gray".into(),
                    kind: TrafficKind::Rpc,
                    reason: LeakReason::TagIgnored,
                    from_app: "(none)".into(),
                    from_lane: None,
                    to_app: "order".into(),
                    to_lane: "base".into(),
                    via: Vec::new(),
                }],
                ..LaneReport::default()
            }),
            ..Report::default()
        };
        let mut book = AlertBook::default();
        let fired = book.observe(&report, &cfg, t + S);
        let [Change::Fired(a)] = &fired[..] else {
            panic!("{fired:?}")
        };
        assert_eq!(a.labels["alertname"], "DyelineLaneLeak");
        assert_eq!(
            (a.labels["lane_group"].as_str(), a.labels["lane"].as_str()),
            ("mall", "gray")
        );
        assert!(!a.labels.contains_key("channel"));
        assert_eq!(a.exemplar_trace_ids, vec!["ef".repeat(16)]);
        // window [1000, 1010) s: resolved at 1010 + 10 + lateness 5, not a minute later
        assert!(book.sweep(5 * S, 1_024 * S).is_empty());
        assert_eq!(book.sweep(5 * S, 1_025 * S).len(), 1);
    }

    /// The fingerprint is Alertmanager's (a hash of the sorted labels): the same for the same
    /// labels in any insertion order, another for other labels; the key names the transition.
    #[test]
    fn fingerprints_follow_the_labels_and_keys_the_transition() {
        let cfg = AnalyzerConfig::default();
        let mut book = AlertBook::default();
        let w0 = 600 * S;
        let [Change::Fired(a)] = &book.observe(&spike(w0), &cfg, w0 + S)[..] else {
            panic!()
        };
        // FNV-1a 64 of "a\xffb\xff": computed independently of the code above
        let mut one = a.clone();
        one.labels = [("a".to_owned(), "b".to_owned())].into();
        assert_eq!(one.fingerprint(), "d2b371819297f98a");
        let mut reordered = a.clone();
        reordered.labels = a
            .labels
            .iter()
            .rev()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(reordered.fingerprint(), a.fingerprint());
        let mut other = a.clone();
        other.labels.insert("app".into(), "pay".into());
        assert_ne!(other.fingerprint(), a.fingerprint());
        assert_eq!(
            a.delivery_key(),
            format!("{}-{}-firing", a.fingerprint(), w0 + S)
        );
        let resolved = book.sweep(0, w0 + 600 * S);
        let [Change::Resolved(r)] = &resolved[..] else {
            panic!()
        };
        assert_eq!(
            r.delivery_key(),
            format!("{}-{}-resolved", a.fingerprint(), w0 + S)
        );
    }

    /// A book replaced by the stored one continues its alerts: the same start, no re-fire.
    #[test]
    fn a_replaced_book_continues_its_alerts() {
        let cfg = AnalyzerConfig::default();
        let w0 = 600 * S;
        let mut first = AlertBook::default();
        assert_eq!(first.observe(&spike(w0), &cfg, w0 + S).len(), 1);
        let mut next = AlertBook::default();
        next.replace(first.list(None));
        assert_eq!(next.version(), 1);
        next.replace(first.list(None));
        assert_eq!(next.version(), 1, "the same alerts again move nothing");
        assert!(
            next.observe(&spike(w0 + 60 * S), &cfg, w0 + 70 * S)
                .is_empty()
        );
        assert_eq!(next.firing()[0].starts_at_unix_nano, w0 + S);
    }

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
        assert!(book.sweep(30 * S, w0 + 150 * S).is_empty());
        // resolved once a whole window (+ lateness) passed without it
        let r = book.sweep(30 * S, w0 + 210 * S);
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
