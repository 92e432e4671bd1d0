//! What the lane findings (domain §7.3–7.4, judged in [`super::lanes`]) tell the readers of
//! findings: each one's line in the text table and its alert. A lane alert is labelled with
//! its `lane_group` (absent for an app in no group), its `lane` and its apps where the
//! channel alerts have `channel`; the per-span findings count their key's findings seen so far
//! in one evaluation, as cross-colour hops do. Counts (`lane_fallback`, `failover`, ...) are
//! no findings and never alert.

use super::lanes::{LaneErrorSpike, LaneLeak, LanePollution, LaneTagChanged, LaneTagDropped};
use super::windows::window_start;
use crate::analyze::findings::{
    AlertCounts, AlertLabels, Detection, Observation, alert_labels, counted_summary, time_text,
};

/// `group` as written for people: the group's id, or `(no group)`.
fn group_text(group: Option<&str>) -> &str {
    group.unwrap_or("(no group)")
}

/// ` via a → b`, or nothing.
fn via_text(via: &[String]) -> String {
    if via.is_empty() {
        String::new()
    } else {
        format!(" via {}", via.join(" → "))
    }
}

/// The labels of a lane alert: `type`, `lane_group` (when there is one), then `pairs`.
fn lane_labels(d: Detection, group: Option<&str>, pairs: &[(&str, Option<&str>)]) -> AlertLabels {
    let mut all = vec![("lane_group", group)];
    all.extend_from_slice(pairs);
    alert_labels(d, &all)
}

/// An observation of a finding judged per span (started at `t`), with `n` the findings of
/// its key seen so far in this evaluation and `what` they are: its window is the lane window
/// `window` (ns) the span started in.
fn per_span(
    labels: AlertLabels,
    n: usize,
    what: &str,
    t: i64,
    window: i64,
    trace: &str,
) -> Observation {
    let window = window.max(1);
    Observation {
        labels,
        summary: counted_summary(n, what),
        window_end: window_start(t, window) + window,
        exemplars: vec![trace.to_owned()],
        counted: Some((n, what.to_owned())),
    }
}

/// Counts one more finding of `labels` in `seen`; returns the count so far.
fn count(seen: &mut AlertCounts, labels: &AlertLabels) -> usize {
    let n = seen.entry(labels.clone()).or_default();
    *n += 1;
    *n
}

impl LaneLeak {
    /// `from(lane) → to(lane) via …`.
    fn path_text(&self) -> String {
        format!(
            "{}({}) → {}({}){}",
            self.from_app,
            self.from_lane.as_deref().unwrap_or("-"),
            self.to_app,
            self.to_lane,
            via_text(&self.via)
        )
    }

    /// Its line in the text table.
    pub(crate) fn line(&self) -> String {
        format!(
            "  {} {} lane {}: {} {} {} trace {}",
            time_text(self.t_unix_nano),
            group_text(self.group.as_deref()),
            self.lane,
            self.path_text(),
            self.kind.as_str(),
            self.reason.as_str(),
            self.trace_id
        )
    }

    /// Its alert: one per (group, lane, from app, app and the lane that served it, kind,
    /// reason).
    pub(crate) fn alert(&self, window: i64, seen: &mut AlertCounts) -> Observation {
        let l = lane_labels(
            Detection::LaneLeak,
            self.group.as_deref(),
            &[
                ("environment", self.environment.as_deref()),
                ("lane", Some(&self.lane)),
                ("app", Some(&self.to_app)),
                ("to_lane", Some(&self.to_lane)),
                ("from_app", Some(&self.from_app)),
                ("kind", Some(self.kind.as_str())),
                ("reason", Some(self.reason.as_str())),
            ],
        );
        let n = count(seen, &l);
        let what = format!(
            "request(s) for lane {} left it: {} [{}]",
            self.lane,
            self.path_text(),
            self.reason.as_str()
        );
        per_span(l, n, &what, self.t_unix_nano, window, &self.trace_id)
    }
}

impl LaneTagDropped {
    /// Its line in the text table.
    pub(crate) fn line(&self) -> String {
        format!(
            "  {} {} lane {}: {} → {} lost the tag ({}) {} trace {}",
            time_text(self.t_unix_nano),
            group_text(self.group.as_deref()),
            self.lane,
            self.dropped_by,
            self.app,
            self.where_.as_str(),
            self.kind.as_str(),
            self.trace_id
        )
    }

    /// Its alert: one per (group, lane, app, upstream app, where, kind).
    pub(crate) fn alert(&self, window: i64, seen: &mut AlertCounts) -> Observation {
        let l = lane_labels(
            Detection::LaneTagDropped,
            self.group.as_deref(),
            &[
                ("environment", self.environment.as_deref()),
                ("lane", Some(&self.lane)),
                ("app", Some(&self.app)),
                ("dropped_by", Some(&self.dropped_by)),
                ("where", Some(self.where_.as_str())),
                ("kind", Some(self.kind.as_str())),
            ],
        );
        let n = count(seen, &l);
        let what = format!(
            "request(s) of {} lost lane tag {} ({})",
            self.dropped_by,
            self.lane,
            self.where_.as_str()
        );
        per_span(l, n, &what, self.t_unix_nano, window, &self.trace_id)
    }
}

impl LanePollution {
    /// Its line in the text table.
    pub(crate) fn line(&self) -> String {
        format!(
            "  {} {} lane {}: base traffic from {} served by {} {} {} trace {}",
            time_text(self.t_unix_nano),
            group_text(self.group.as_deref()),
            self.lane,
            self.from_app,
            self.app,
            self.kind.as_str(),
            self.reason.as_str(),
            self.trace_id
        )
    }

    /// Its alert: one per (group, lane, app, upstream app, kind, reason).
    pub(crate) fn alert(&self, window: i64, seen: &mut AlertCounts) -> Observation {
        let l = lane_labels(
            Detection::LanePollution,
            self.group.as_deref(),
            &[
                ("environment", self.environment.as_deref()),
                ("lane", Some(&self.lane)),
                ("app", Some(&self.app)),
                ("from_app", Some(&self.from_app)),
                ("kind", Some(self.kind.as_str())),
                ("reason", Some(self.reason.as_str())),
            ],
        );
        let n = count(seen, &l);
        let what = format!(
            "base request(s) from {} served by {} in lane {} [{}]",
            self.from_app,
            self.app,
            self.lane,
            self.reason.as_str()
        );
        per_span(l, n, &what, self.t_unix_nano, window, &self.trace_id)
    }
}

impl LaneTagChanged {
    /// Its line in the text table.
    pub(crate) fn line(&self) -> String {
        format!(
            "  {} {} {}({}) → {}({}) {} {} trace {}",
            time_text(self.t_unix_nano),
            group_text(self.group.as_deref()),
            self.from_app,
            self.from_lane,
            self.to_app,
            self.to_lane,
            self.kind.as_str(),
            self.reason.as_str(),
            self.trace_id
        )
    }

    /// Its alert: one per (group, tag, app, upstream app and its lane, kind, reason).
    pub(crate) fn alert(&self, window: i64, seen: &mut AlertCounts) -> Observation {
        let l = lane_labels(
            Detection::LaneTagChanged,
            self.group.as_deref(),
            &[
                ("environment", self.environment.as_deref()),
                ("lane", Some(&self.to_lane)),
                ("app", Some(&self.to_app)),
                ("from_app", Some(&self.from_app)),
                ("from_lane", Some(&self.from_lane)),
                ("kind", Some(self.kind.as_str())),
                ("reason", Some(self.reason.as_str())),
            ],
        );
        let n = count(seen, &l);
        let what = format!(
            "request(s) re-tagged mid-trace: {}({}) → {}({}) [{}]",
            self.from_app,
            self.from_lane,
            self.to_app,
            self.to_lane,
            self.reason.as_str()
        );
        per_span(l, n, &what, self.t_unix_nano, window, &self.trace_id)
    }
}

impl LaneErrorSpike {
    /// Its line in the text table.
    pub(crate) fn line(&self) -> String {
        format!(
            "  {} {} {} {}: {:.2}% errors ({} of {}) vs {:.2}% on {}, p = {:.2e}",
            time_text(self.window_start_unix_nano),
            group_text(self.group.as_deref()),
            self.app,
            self.lane,
            self.error_rate * 100.0,
            self.errors,
            self.requests,
            self.other_error_rate * 100.0,
            self.other_lane,
            self.p_value
        )
    }

    /// Its alert: one per (group, app, worse lane, other lane, kind).
    pub(crate) fn alert(&self) -> Observation {
        Observation {
            labels: lane_labels(
                Detection::LaneErrorSpike,
                self.group.as_deref(),
                &[
                    ("environment", self.environment.as_deref()),
                    ("lane", Some(&self.lane)),
                    ("app", Some(&self.app)),
                    ("other_lane", Some(&self.other_lane)),
                    ("kind", Some(self.kind.as_str())),
                ],
            ),
            summary: format!(
                "{} error rate {:.2}% ({} of {}) above {}'s {:.2}% ({} of {}) by the lane group's \
                 thresholds; z-test p = {:.1e}",
                self.lane,
                self.error_rate * 100.0,
                self.errors,
                self.requests,
                self.other_lane,
                self.other_error_rate * 100.0,
                self.other_errors,
                self.other_requests,
                self.p_value
            ),
            window_end: self.window_end_unix_nano,
            exemplars: self.exemplar_trace_ids.clone(),
            counted: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use dyeline_model::TrafficKind;

    use super::*;
    use crate::analyze::detect::lanes::{DropWhere, LeakReason};

    const S: i64 = 1_000_000_000;

    fn leak(t: i64, group: Option<&str>) -> LaneLeak {
        LaneLeak {
            environment: None,
            trace_id: "ab".repeat(16),
            span_id: "cd".repeat(8),
            t_unix_nano: t,
            group: group.map(str::to_owned),
            lane: "gray".into(),
            kind: TrafficKind::Rpc,
            reason: LeakReason::TagIgnored,
            from_app: "gateway".into(),
            from_lane: Some("gray".into()),
            to_app: "order".into(),
            to_lane: "base".into(),
            via: vec!["cart".into()],
        }
    }

    #[test]
    fn a_leak_alerts_by_group_lane_and_apps_and_counts_its_key() {
        let mut seen = AlertCounts::new();
        let t = 1_700_000_005 * S;
        let o = leak(t, Some("mall")).alert(60 * S, &mut seen);
        let pairs: Vec<(&str, &str)> = o
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("alertname", "DyelineLaneLeak"),
                ("app", "order"),
                ("from_app", "gateway"),
                ("kind", "RPC"),
                ("lane", "gray"),
                ("lane_group", "mall"),
                ("reason", "tag_ignored"),
                ("to_lane", "base"),
                ("type", "lane_leak"),
            ]
        );
        // window [1_699_999_980, 1_700_000_040) s
        assert_eq!(o.window_end, 1_700_000_040 * S);
        assert_eq!(o.exemplars, vec!["ab".repeat(16)]);
        let again = leak(t + S, Some("mall")).alert(60 * S, &mut seen);
        assert!(
            again
                .summary
                .starts_with("2 request(s) for lane gray left it: gateway(gray) → order(base) via cart [tag_ignored]"),
            "{}",
            again.summary
        );
        // an app in no group has no lane_group label
        let ungrouped = leak(t, None).alert(60 * S, &mut seen);
        assert!(!ungrouped.labels.contains_key("lane_group"));
        assert!(ungrouped.summary.starts_with("1 request(s)"));
    }

    #[test]
    fn lines_name_the_group_lane_apps_and_trace() {
        let t = 1_700_000_000 * S;
        assert_eq!(
            leak(t, None).line(),
            format!(
                "  2023-11-14T22:13:20Z (no group) lane gray: gateway(gray) → order(base) via cart RPC tag_ignored trace {}",
                "ab".repeat(16)
            )
        );
        let dropped = LaneTagDropped {
            environment: None,
            trace_id: "01".repeat(16),
            span_id: "02".repeat(8),
            t_unix_nano: t,
            group: Some("mall".into()),
            app: "stock".into(),
            lane: "gray".into(),
            kind: TrafficKind::Mq,
            dropped_by: "order".into(),
            where_: DropWhere::InProcess,
        };
        assert_eq!(
            dropped.line(),
            format!(
                "  2023-11-14T22:13:20Z mall lane gray: order → stock lost the tag (in_process) MQ trace {}",
                "01".repeat(16)
            )
        );
        let o = dropped.alert(10 * S, &mut AlertCounts::new());
        assert_eq!(o.labels["where"], "in_process");
        assert_eq!(o.labels["dropped_by"], "order");
        assert_eq!(o.window_end, t + 10 * S);
    }
}
