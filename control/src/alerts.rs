//! The alerts the control plane reads (issue 28 item 4): the firing ones, through the
//! [`FiringAlerts`] port this crate defines and the server wires to the analyzer's alert book
//! (this crate does not depend on the queries that raise them). Two rules read them:
//!
//! - the spike guard (domain §4, [`spike_guard`]): a write that moves traffic toward the
//!   colour whose one-sided error spike fires for the channel is refused (409 `spike_guard`,
//!   the alert in the body) unless forced; the rule itself is
//!   `dyeline_model::release::spike_guard`'s, which the dashboard shows too;
//! - the release gate ([`crate::api::gate`]): a channel or lane group fails while an alert of
//!   a type in `[gate] fail_on` fires for it.

use std::collections::BTreeMap;
use std::sync::Arc;

use dyeline_model::release::spike_guard;
use serde::Serialize;
use utoipa::ToSchema;

/// One firing alert as the control plane sees it: the alert book's labels (`alertname`,
/// `type`, `channel` or `lane_group` and `lane`, and where they apply `app`, `color`, `kind`,
/// ...), its summary and when it started firing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct FiringAlert {
    /// Labels: `alertname`, `type` (the finding type), `channel` or `lane_group`, ....
    pub labels: BTreeMap<String, String>,
    /// Observed value, comparator and threshold, e.g. `error rate blue 12.0% vs green 0.5%`.
    pub summary: String,
    /// When it (last) started firing, Unix ns.
    pub starts_at_unix_nano: i64,
}

impl FiringAlert {
    /// Its label `name`, if it has one.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.get(name).map(String::as_str)
    }

    /// Its finding type (the `type` label, e.g. `error_spike`), or "" without one.
    pub fn detection(&self) -> &str {
        self.label("type").unwrap_or("")
    }
}

/// The port: the alerts firing now. The server implements it over its alert book; on a
/// cluster, this node's book, which on a follower holds the alerts the leader stored.
pub trait FiringAlerts: Send + Sync {
    /// Every alert firing now (resolved ones left out).
    fn firing(&self) -> Vec<FiringAlert>;
}

/// No alerts (a plane with nothing wired: `dyeline import`, tests).
pub struct NoAlerts;

impl FiringAlerts for NoAlerts {
    fn firing(&self) -> Vec<FiringAlert> {
        Vec::new()
    }
}

/// A shared [`FiringAlerts`].
pub type SharedFiringAlerts = Arc<dyn FiringAlerts>;

/// The firing alert that forbids moving channel `channel`'s blue_percent from `from` to
/// `to`, if any: a one-sided error spike of that channel on the colour that would gain
/// traffic ([`spike_guard::blocks`]); the earliest started when several fire.
pub fn spike_guard(alerts: &[FiringAlert], channel: &str, from: u8, to: u8) -> Option<FiringAlert> {
    alerts
        .iter()
        .filter(|a| a.label("channel") == Some(channel))
        .filter(|a| spike_guard::blocks(from, to, a.detection(), a.label("color")))
        .min_by_key(|a| a.starts_at_unix_nano)
        .cloned()
}

/// What a refused (or forced) write was up against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpikeRefusal {
    /// The channel.
    pub channel: String,
    /// Its blue_percent now.
    pub from: u8,
    /// The blue_percent asked for.
    pub to: u8,
    /// The alert that blocks it.
    pub alert: FiringAlert,
}

impl SpikeRefusal {
    /// The colour that would gain traffic.
    pub fn gaining(&self) -> &'static str {
        spike_guard::gaining_color(self.from, self.to).map_or("", |c| c.as_str())
    }

    /// The note recorded with a forced write: the request's `note` (cut to leave room),
    /// then a line naming the alert; at most [`NOTE_MAX_CHARS`](crate::plane::NOTE_MAX_CHARS)
    /// characters.
    pub fn forced_note(&self, note: Option<&str>) -> String {
        let max = crate::plane::NOTE_MAX_CHARS;
        let cut = |s: &str, n: usize| -> String {
            if s.chars().count() <= n {
                s.to_owned()
            } else {
                s.chars().take(n.saturating_sub(3)).collect::<String>() + "..."
            }
        };
        let tail = cut(
            &format!(
                "forced past the spike guard: {} on {} ({})",
                self.alert.label("alertname").unwrap_or("DyelineErrorSpike"),
                self.gaining(),
                self.alert.summary
            ),
            max / 2,
        );
        match note {
            Some(n) => format!("{}; {tail}", cut(n, max - tail.chars().count() - 2)),
            None => tail,
        }
    }
}

impl std::fmt::Display for SpikeRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "blue_percent {} → {} of channel {:?} moves traffic to {}, where a one-sided error \
             spike is firing ({}); send \"force\": true to go ahead anyway (recorded)",
            self.from,
            self.to,
            self.channel,
            self.gaining(),
            self.alert.summary
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(kind: &str, channel: &str, color: &str, start: i64) -> FiringAlert {
        FiringAlert {
            labels: [
                ("alertname", "DyelineErrorSpike"),
                ("type", kind),
                ("channel", channel),
                ("color", color),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
            summary: "s".into(),
            starts_at_unix_nano: start,
        }
    }

    #[test]
    fn the_guard_reads_the_channel_s_spike_on_the_gaining_colour() {
        let alerts = [
            alert("error_spike", "pay", "blue", 1),
            alert("error_spike", "trade", "blue", 3),
            alert("error_spike", "trade", "blue", 2),
            alert("cross_color_hop", "trade", "green", 1),
        ];
        assert_eq!(
            spike_guard(&alerts, "trade", 10, 50)
                .unwrap()
                .starts_at_unix_nano,
            2
        );
        assert!(
            spike_guard(&alerts, "trade", 50, 10).is_none(),
            "toward green"
        );
        assert!(spike_guard(&alerts, "trade", 50, 50).is_none());
        assert!(spike_guard(&alerts, "other", 10, 50).is_none());
        let r = SpikeRefusal {
            channel: "trade".into(),
            from: 10,
            to: 50,
            alert: alerts[1].clone(),
        };
        assert_eq!(r.gaining(), "blue");
        assert_eq!(
            r.forced_note(Some("hotfix")),
            "hotfix; forced past the spike guard: DyelineErrorSpike on blue (s)"
        );
        let long = r.forced_note(Some(&"x".repeat(600)));
        assert_eq!(long.chars().count(), crate::plane::NOTE_MAX_CHARS);
        assert!(long.ends_with("on blue (s)"));
    }
}
