//! Live evaluation in `dyeline serve` (issue: analyzer, item 3): every `alerts.interval` the
//! analyzer judges the open window and the last closed one (spans up to `alerts.lateness`
//! late still count) with every detection, the lane rules included (each span judged by the
//! lane group in force at its start, presence from the spans and the OTLP metrics and logs
//! signals), the alert book fires and resolves alerts, and changes are handed to the
//! delivery queue ([`super::deliver`]). The lane counts (`lane_fallback`, ...) are no
//! findings and never alert. In a cluster each node evaluates its own spans with every
//! node's presence signals and publishes its share; the alert leader feeds the book from the
//! merge of every node's ([`super::share`]).

use std::sync::Arc;
use std::time::Duration;

use dyeline_model::time::now_unix_nano;
use prometheus_client::metrics::counter::Counter;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use dyeline_store::table::SpansTable;

use super::book::{Alert, Change, SharedAlerts};
use super::share;
use crate::analyze::detect::lanes::{LaneReport, LeakReason, PollutionReason};
use crate::analyze::detect::windows::window_start;
use crate::analyze::read::presence::signals;
use crate::analyze::{AnalyzerConfig, Detection, EnvironmentFilter, run, run_share};
use crate::ports::{AlertCluster, Releases};
use crate::rollup::SharedRollup;

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
    /// Every member of an Alertmanager cluster (base URLs): each gets every alert (with
    /// `alertmanager_url`, when both are set).
    pub alertmanager_urls: Vec<String>,
    /// Webhook URLs receiving Alertmanager's webhook JSON.
    pub webhooks: Vec<String>,
    /// Chat robots (`[[alerts.robots]]`: DingTalk, Feishu, WeCom, Slack), each receiving the
    /// alerts its `match` labels select.
    pub robots: Vec<super::robots::Robot>,
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
            alertmanager_urls: Vec::new(),
            webhooks: Vec::new(),
            robots: Vec::new(),
            external_url: None,
            resend_interval: Duration::from_secs(30),
        }
    }
}

impl AlertSettings {
    /// Every Alertmanager to deliver to: `alertmanager_url`, then `alertmanager_urls`, each
    /// once.
    pub fn alertmanagers(&self) -> Vec<String> {
        let mut all: Vec<String> = Vec::new();
        for u in self.alertmanager_url.iter().chain(&self.alertmanager_urls) {
            if !all.contains(u) {
                all.push(u.clone());
            }
        }
        all
    }
}

/// What the live evaluation reads and writes.
pub struct Live {
    /// The store's `spans` (memory ∪ files, with its presence rows) it reads the recent
    /// windows from.
    pub spans: Arc<SpansTable>,
    /// The release state (its timeline places spans in channels).
    pub releases: Arc<dyn Releases>,
    /// The alert book it fires and resolves alerts in.
    pub book: SharedAlerts,
    /// The channel rollups it adds the hops it finds to.
    pub rollup: Option<SharedRollup>,
    /// In a cluster, the alert leader and the stored book ([`super::cluster`]): only the
    /// leader feeds and delivers the book. `None`: a single node, alone.
    pub cluster: Option<Arc<dyn AlertCluster>>,
    /// `dyeline_orphan_spans_total`, counted here ([`register_orphans`]).
    pub orphans: Counter,
}

/// Registers `orphans` in `registry` as `dyeline_orphan_spans_total`: the orphan spans the
/// live evaluation finds, each counted once, `trace_quiet` after its start (when the rest of
/// its trace has arrived).
pub fn register_orphans(orphans: &Counter, registry: &mut prometheus_client::registry::Registry) {
    registry.register(
        "dyeline_orphan_spans",
        "Spans of traces in a channel whose parent span this node never received, counted \
         trace_quiet after their start (with trace-id routing: a parent sent to another node; \
         else one the sender dropped, or that started over a window before its child)",
        orphans.clone(),
    );
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
        spans,
        releases,
        book,
        rollup,
        cluster,
        orphans,
    } = live;
    let mut cluster_book = cluster.map(|c| {
        super::cluster::ClusterBook::start(
            c,
            Arc::clone(&book),
            &settings.alertmanagers(),
            &settings.webhooks,
            &settings.robots,
            external_url.clone(),
            settings.resend_interval,
        )
    });
    let tx = cluster_book.is_none().then(|| {
        super::deliver::start(
            settings.alertmanagers(),
            settings.webhooks.clone(),
            settings.robots.clone(),
            external_url,
        )
    });
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(settings.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let lateness = settings.lateness.as_nanos() as i64;
        let quiet = settings.trace_quiet.as_nanos() as i64;
        let presence = analyzer.lanes.presence_window.as_nanos() as i64;
        let window = analyzer
            .channels
            .values()
            .map(|t| t.window)
            .chain([analyzer.defaults.window, analyzer.lanes.window])
            .max()
            .unwrap_or(Duration::from_secs(60))
            .as_nanos()
            .max(1) as i64;
        let mut last_resend = now_unix_nano();
        // In a cluster: this node's own spans, and the nodes the last merge missed.
        let own = cluster_book.as_ref().map(|cb| spans.own(&cb.port().node()));
        let mut missing: Vec<String> = Vec::new();
        // Orphans are counted for spans started in (counted_to, now - quiet]: each once.
        let mut counted_to: Option<i64> = None;
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
            let range = (Some(from - window), Some(now));
            // In a cluster a node judges its own spans (their windows only counted) with every
            // node's presence signals; the leader merges the shares.
            let evaluated = match (&cluster_book, &own) {
                (Some(cb), Some(own)) => {
                    let signals = share::other_signals(cb.port()).await;
                    run_share(own, &timeline, &analyzer, range, signals)
                        .await
                        .map(|(r, c)| (r, Some(c)))
                }
                _ => run(
                    &spans,
                    &timeline,
                    &analyzer,
                    range,
                    &Detection::ALL,
                    false,
                    &EnvironmentFilter::All,
                )
                .await
                .map(|r| (r, None)),
            };
            let (mut report, counts) = match evaluated {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "live evaluation failed");
                    continue;
                }
            };
            let settled = now - quiet;
            let since = counted_to.unwrap_or(settled).max(from);
            orphans.inc_by(
                report
                    .orphan_starts
                    .iter()
                    .filter(|&&t| t > since && t <= settled)
                    .count() as u64,
            );
            counted_to = Some(settled);
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
            if let Some(l) = &mut report.lane {
                settled_lanes(l, from, now - quiet, presence);
            }
            if let (Some(cb), Some(own)) = (&mut cluster_book, &own) {
                let share =
                    share::Share::new(report, counts.unwrap_or_default(), &analyzer, from, now);
                let signals = signals(own, from - window, now, presence).unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "presence signals not read");
                    Vec::new()
                });
                share::publish(cb.port(), &share, &signals).await;
                let merged = if cb.port().leading().is_some() {
                    share::gather(cb.port(), &analyzer, from).await
                } else {
                    None
                };
                if let Some((_, m)) = &merged
                    && *m != missing
                {
                    if !m.is_empty() {
                        tracing::warn!(nodes = ?m, "alert leader: live nodes without a fresh share; the evaluation is partial, no alert resolves");
                    }
                    missing.clone_from(m);
                }
                cb.step(|b| match merged {
                    Some((observed, missing)) => share::apply(b, observed, &missing, lateness, now),
                    None => Vec::new(),
                })
                .await;
                continue;
            }
            let Some(tx) = &tx else { continue };
            let (mut changes, firing) = {
                let mut b = book.lock();
                let mut c = b.observe(&report, &analyzer, now);
                c.extend(b.sweep(lateness, now));
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

/// Keeps of the lane findings `l` of one live evaluation those that are settled: per-span
/// findings of spans started in `[from, settled]` (the rest of their trace has arrived), and
/// of those, the ones that rest on an app's *absence* from a lane (a strict-lane or
/// wrong-fallback leak, base traffic in a lane for want of a base instance) only once the
/// presence window `w` has passed after the span too (a signal up to `w` later would make the
/// app present: judged earlier, a request served by its fallback would alert falsely). Lane
/// error spikes are kept from the windows starting at `from` on.
fn settled_lanes(l: &mut LaneReport, from: i64, settled: i64, w: i64) {
    let by_presence = settled.saturating_sub(w);
    let keep =
        |t: i64, absence: bool| (from..=if absence { by_presence } else { settled }).contains(&t);
    l.leaks.retain(|f| {
        let absence = matches!(f.reason, LeakReason::StrictLane | LeakReason::WrongFallback);
        keep(f.t_unix_nano, absence)
    });
    l.tags_dropped.retain(|f| keep(f.t_unix_nano, false));
    l.pollution
        .retain(|f| keep(f.t_unix_nano, f.reason == PollutionReason::NoBaseInstance));
    l.tags_changed.retain(|f| keep(f.t_unix_nano, false));
    l.error_spikes.retain(|f| f.window_start_unix_nano >= from);
}

#[cfg(test)]
mod tests {
    use dyeline_model::TrafficKind;

    use super::*;
    use crate::analyze::detect::lanes::{LaneLeak, LanePollution};

    const S: i64 = 1_000_000_000;

    fn leak(t: i64, reason: LeakReason) -> LaneLeak {
        LaneLeak {
            environment: None,
            trace_id: format!("{t:032x}"),
            span_id: "01".repeat(8),
            t_unix_nano: t,
            group: None,
            lane: "gray".into(),
            kind: TrafficKind::Rpc,
            reason,
            from_app: "(none)".into(),
            from_lane: None,
            to_app: "order".into(),
            to_lane: "base".into(),
            via: Vec::new(),
        }
    }

    fn pollution(t: i64, reason: PollutionReason) -> LanePollution {
        LanePollution {
            environment: None,
            trace_id: format!("{t:032x}"),
            span_id: "02".repeat(8),
            t_unix_nano: t,
            group: None,
            app: "order".into(),
            lane: "gray".into(),
            kind: TrafficKind::Rpc,
            reason,
            from_app: "(none)".into(),
        }
    }

    /// A finding resting on a lane's presence is kept once its trace settled; one resting on
    /// an absence only once the presence window passed too.
    #[test]
    fn absence_findings_wait_for_the_presence_window() {
        let (from, settled, w) = (100 * S, 200 * S, 30 * S);
        let mut l = LaneReport {
            leaks: vec![
                leak(99 * S, LeakReason::TagIgnored),
                leak(160 * S, LeakReason::TagIgnored),
                leak(199 * S, LeakReason::TagDropped),
                leak(201 * S, LeakReason::TagIgnored),
                leak(160 * S, LeakReason::StrictLane),
                leak(180 * S, LeakReason::WrongFallback),
            ],
            pollution: vec![
                pollution(190 * S, PollutionReason::Untagged),
                pollution(170 * S, PollutionReason::NoBaseInstance),
                pollution(171 * S, PollutionReason::NoBaseInstance),
            ],
            ..LaneReport::default()
        };
        settled_lanes(&mut l, from, settled, w);
        let leaks: Vec<(i64, LeakReason)> = l
            .leaks
            .iter()
            .map(|f| (f.t_unix_nano / S, f.reason))
            .collect();
        assert_eq!(
            leaks,
            [
                (160, LeakReason::TagIgnored),
                (199, LeakReason::TagDropped),
                (160, LeakReason::StrictLane)
            ]
        );
        let polluted: Vec<i64> = l.pollution.iter().map(|f| f.t_unix_nano / S).collect();
        assert_eq!(polluted, [190, 170]);
    }
}
