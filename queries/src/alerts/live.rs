//! Live evaluation in `dyeline serve` (issue: analyzer, item 3): every `alerts.interval` the
//! analyzer judges the open window and the last closed one (spans up to `alerts.lateness`
//! late still count), the alert book fires and resolves alerts, and changes are handed to
//! the delivery queue ([`super::deliver`]).

use std::sync::Arc;
use std::time::Duration;

use dyeline_model::time::now_unix_nano;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::book::{Alert, Change, SharedAlerts};
use crate::analyze::detect::windows::window_start;
use crate::analyze::{AnalyzerConfig, analyze};
use crate::ports::Releases;
use crate::rollup::SharedRollup;
use crate::sql::SqlEngine;

/// `[alerts]` settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AlertSettings {
    /// Evaluate live findings at all. Default true.
    pub enabled: bool,
    /// How often. Default `2s`.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Spans this late still count; an alert resolves one window plus this after its
    /// condition last held. Default `30s`.
    #[serde(with = "humantime_serde")]
    pub lateness: Duration,
    /// Hops and missing decisions are judged on spans that started at least this long ago
    /// (so the rest of their trace has arrived). Default `5s`.
    #[serde(with = "humantime_serde")]
    pub trace_quiet: Duration,
    /// Alertmanager base URL, e.g. `http://127.0.0.1:9093`.
    pub alertmanager_url: Option<String>,
    /// Webhook URLs receiving Alertmanager's webhook JSON.
    pub webhooks: Vec<String>,
    /// Base URL of the dashboard for `generatorURL`. Default `http://<api_addr>`.
    pub external_url: Option<String>,
    /// Firing alerts are re-sent this often (Alertmanager forgets silent ones). Default `30s`.
    #[serde(with = "humantime_serde")]
    pub resend_interval: Duration,
}

impl Default for AlertSettings {
    fn default() -> Self {
        AlertSettings {
            enabled: true,
            interval: Duration::from_secs(2),
            lateness: Duration::from_secs(30),
            trace_quiet: Duration::from_secs(5),
            alertmanager_url: None,
            webhooks: Vec::new(),
            external_url: None,
            resend_interval: Duration::from_secs(30),
        }
    }
}

/// What the live evaluation reads and writes.
pub struct Live {
    /// The SQL session it scans the recent windows with.
    pub engine: Arc<SqlEngine>,
    /// The release state (its timeline places spans in channels).
    pub releases: Arc<dyn Releases>,
    /// The alert book it fires and resolves alerts in.
    pub book: SharedAlerts,
    /// The channel rollups it adds the hops it finds to.
    pub rollup: Option<SharedRollup>,
}

/// Starts the evaluator and the delivery worker; both stop when `stop` becomes true.
pub fn spawn(
    settings: AlertSettings,
    analyzer: AnalyzerConfig,
    live: Live,
    external_url: String,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let Live {
        engine,
        releases,
        book,
        rollup,
    } = live;
    let tx = super::deliver::start(
        settings.alertmanager_url.clone(),
        settings.webhooks.clone(),
        external_url,
    );
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(settings.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let lateness = settings.lateness.as_nanos() as i64;
        let quiet = settings.trace_quiet.as_nanos() as i64;
        let window = analyzer
            .channels
            .values()
            .map(|t| t.window)
            .chain(std::iter::once(analyzer.defaults.window))
            .max()
            .unwrap_or(Duration::from_secs(60))
            .as_nanos()
            .max(1) as i64;
        let mut last_resend = now_unix_nano();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            let now = now_unix_nano();
            let from = window_start(now - lateness, window) - window;
            let timeline = releases.timeline();
            // One more window is read so that traces starting before `from` keep their
            // root: a trace cut at the range's edge would be judged without it (a hop missed,
            // or reported again from "(none)"). Findings of that extra window are dropped.
            let mut report = match analyze(
                engine.context(),
                &timeline,
                &analyzer,
                Some(from - window),
                Some(now),
                false,
            )
            .await
            {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "live evaluation failed");
                    continue;
                }
            };
            report
                .cross_color_hops
                .retain(|h| (from..=now - quiet).contains(&h.t_unix_nano));
            if let Some(r) = &rollup {
                r.lock().record_hops(
                    report.cross_color_hops.iter().map(|h| {
                        (
                            h.channel.as_str(),
                            h.trace_id.as_str(),
                            h.span_id.as_str(),
                            h.t_unix_nano,
                        )
                    }),
                    now,
                );
            }
            report
                .missing_decisions
                .retain(|m| (from..=now - quiet).contains(&m.t_unix_nano));
            report
                .drained_side
                .retain(|d| d.window_start_unix_nano >= from);
            report
                .ratio_deviation
                .retain(|d| d.window_start_unix_nano >= from);
            report
                .instance_skew
                .retain(|d| d.window_start_unix_nano >= from);
            report
                .error_spike
                .retain(|d| d.window_start_unix_nano >= from);
            let (mut changes, firing) = {
                let mut b = book.lock();
                let mut c = b.observe(&report, &analyzer, now);
                c.extend(b.sweep(&analyzer, lateness, now));
                (c, b.firing())
            };
            let resend = now - last_resend >= settings.resend_interval.as_nanos() as i64;
            if resend {
                last_resend = now;
            }
            let mut batch: Vec<Alert> = changes
                .drain(..)
                .map(|c| match c {
                    Change::Fired(a) | Change::Resolved(a) => a,
                })
                .collect();
            for c in &batch {
                tracing::info!(alert = %c.labels["alertname"], state = ?c.state, labels = ?c.labels, "alert");
            }
            if resend {
                for a in firing {
                    if !batch.iter().any(|b| b.labels == a.labels) {
                        batch.push(a);
                    }
                }
            }
            if !batch.is_empty() && tx.try_send(batch).is_err() {
                tracing::warn!("alert delivery queue full: batch dropped");
            }
        }
    })
}
