//! A node's share of the cluster's live evaluation, and the alert leader's merge of every
//! node's (issue 27, item 3). With trace-id routing each node holds whole traces but only
//! part of each window's requests. After every evaluation a node publishes its [`Share`],
//! which replaces its previous one: the per-window counts of its own spans, not judged
//! ([`WindowCounts`]), and its settled findings judged per span as the alerts see them
//! (labels, counts and exemplar trace ids), and its requests per (window, lane, app) for the
//! lane error spike. It also publishes its presence signals, which
//! every node adds to its own before judging lanes: an instance's metrics may reach any node.
//!
//! The leader merges the fresh shares ([`merge`]): the counts added up and judged by the
//! windowed detections and the lane error spike, as one node judges its own; the per-span observations united, each
//! count the sum over the nodes. A live node without a fresh share makes the evaluation
//! partial: alerts may fire, none resolves (`live`).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::book::{AlertBook, Change, observations};
use crate::analyze::detect::lanes::{LaneReport, SpikeCell, judge_spike_cells};
use crate::analyze::detect::windows::WindowCounts;
use crate::analyze::findings::{AlertLabels, Observation};
use crate::analyze::spans::Signal;
use crate::analyze::{AnalyzerConfig, Detection, Report, report_windows};
use crate::ports::{AlertCluster, ClusterError};

/// What one node publishes of one evaluation.
#[derive(Serialize, Deserialize)]
pub struct Share {
    /// When it evaluated, Unix ns (its clock).
    pub evaluated_at_unix_nano: i64,
    /// The first window start its counts cover (Unix ns); its observations are of spans
    /// started from there.
    pub from_unix_nano: i64,
    /// The per-window counts of its spans, windows starting at `from_unix_nano` or later.
    pub counts: WindowCounts,
    /// Its findings judged per span, as the alerts see them, each with its window (ns).
    pub observations: Vec<(Observation, i64)>,
    /// Its requests per (window, lane, app) for the lane error spike, windows starting at
    /// `from_unix_nano` or later.
    #[serde(default)]
    pub lane_cells: Vec<SpikeCell>,
}

impl Share {
    /// The share of an evaluation at `now` from `from` on: `report`'s findings judged per
    /// span (settled; its windowed lists empty) and its lane spike cells, and `counts`. The
    /// lane error spikes judged on this node's spans alone are left to the leader's merge.
    pub fn new(
        mut report: Report,
        mut counts: WindowCounts,
        config: &AnalyzerConfig,
        from: i64,
        now: i64,
    ) -> Share {
        counts.retain_from(from);
        let mut lane_cells = Vec::new();
        if let Some(l) = &mut report.lane {
            l.error_spikes.clear();
            lane_cells = std::mem::take(&mut l.spike_cells);
            lane_cells.retain(|c| c.window_start_unix_nano >= from);
        }
        Share {
            evaluated_at_unix_nano: now,
            from_unix_nano: from,
            counts,
            observations: observations(&report, config),
            lane_cells,
        }
    }

    /// Its bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A share from its bytes.
    ///
    /// # Errors
    /// Bytes that are not a share.
    pub fn decode(bytes: &[u8]) -> Result<Share, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

/// Presence signals as bytes.
pub fn encode_signals(signals: &[Signal]) -> Vec<u8> {
    serde_json::to_vec(signals).unwrap_or_default()
}

/// Presence signals from their bytes.
///
/// # Errors
/// Bytes that are not signals.
pub fn decode_signals(bytes: &[u8]) -> Result<Vec<Signal>, serde_json::Error> {
    serde_json::from_slice(bytes)
}

/// What every node's `shares` tell the alerts, with `config`'s thresholds, of the windows
/// starting at `from` or later (and at every share's own start or later: a window a share
/// did not count whole is not judged). The windowed detections judge the added counts; a
/// count of per-span findings is the sum of the nodes' counts of its alert.
pub fn merge(shares: Vec<Share>, config: &AnalyzerConfig, from: i64) -> Vec<(Observation, i64)> {
    let from = shares.iter().map(|s| s.from_unix_nano).fold(from, i64::max);
    let mut per_span = Vec::new();
    let mut lane_cells = Vec::new();
    let mut parts = Vec::with_capacity(shares.len());
    let mut totals: HashMap<AlertLabels, usize> = HashMap::new();
    for s in shares {
        let mut mine: HashMap<&AlertLabels, usize> = HashMap::new();
        for (o, _) in &s.observations {
            if let Some((n, _)) = &o.counted {
                let m = mine.entry(&o.labels).or_default();
                *m = (*m).max(*n);
            }
        }
        for (labels, n) in mine {
            *totals.entry(labels.clone()).or_default() += n;
        }
        per_span.extend(s.observations);
        lane_cells.extend(s.lane_cells);
        parts.push(s.counts);
    }
    let mut counts = WindowCounts::merge(parts);
    counts.retain_from(from);
    let counted: Vec<Detection> = Detection::ALL
        .iter()
        .copied()
        .filter(|d| d.is_counted())
        .collect();
    let mut windowed = report_windows(counts, config, &counted);
    lane_cells.retain(|c| c.window_start_unix_nano >= from);
    windowed.lane = Some(LaneReport {
        error_spikes: judge_spike_cells(lane_cells),
        ..LaneReport::default()
    });
    let mut out = observations(&windowed, config);
    for (mut o, window) in per_span {
        if let Some(&n) = totals.get(&o.labels) {
            o.recount(n);
        }
        out.push((o, window));
    }
    out
}

/// How long a call to the catalog may take here: the live evaluation goes on without it (a
/// node cut off from PostgreSQL would otherwise wait for TCP to give up).
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

async fn within<T>(
    call: impl std::future::Future<Output = Result<T, ClusterError>>,
) -> Result<T, ClusterError> {
    tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .unwrap_or_else(|_| {
            Err(ClusterError::Unavailable(format!(
                "no answer within {CALL_TIMEOUT:?}"
            )))
        })
}

/// The other nodes' fresh presence signals; none (logged) when the catalog cannot be read
/// or a node's are unreadable.
pub async fn other_signals(cluster: &dyn AlertCluster) -> Vec<Signal> {
    let rows = match within(cluster.other_signals()).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "the other nodes' presence signals not read; judging lanes by this node's");
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for r in rows {
        match decode_signals(&r) {
            Ok(s) => out.extend(s),
            Err(e) => tracing::warn!(error = %e, "a node's presence signals are unreadable"),
        }
    }
    out
}

/// Publishes this node's `share` and `signals` (logged when it fails: the leader then counts
/// this node missing).
pub async fn publish(cluster: &dyn AlertCluster, share: &Share, signals: &[Signal]) {
    if let Err(e) = within(cluster.publish(share.encode(), encode_signals(signals))).await {
        tracing::warn!(error = %e, "this node's share of the evaluation not published");
    }
}

/// For the leader: every fresh share merged ([`merge`]) and the live nodes that have none
/// (an unreadable share counts its node as missing); `None` when the shares cannot be read.
pub async fn gather(
    cluster: &dyn AlertCluster,
    config: &AnalyzerConfig,
    from: i64,
) -> Option<(Vec<(Observation, i64)>, Vec<String>)> {
    let (rows, mut missing) = match within(cluster.shares()).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "the nodes' shares not read; not evaluating");
            return None;
        }
    };
    let mut shares = Vec::with_capacity(rows.len());
    for (node, bytes) in rows {
        match Share::decode(&bytes) {
            Ok(s) => shares.push(s),
            Err(e) => {
                tracing::warn!(node, error = %e, "a node's share is unreadable");
                missing.push(node);
            }
        }
    }
    Some((merge(shares, config, from), missing))
}

/// The leader's round on `book` at `now`: records the merged `observed`; resolves what has
/// not held for a window plus `lateness` only when no live node is `missing` a share (a
/// window without some node's share may lack the very spans that still hold the condition).
pub fn apply(
    book: &mut AlertBook,
    observed: Vec<(Observation, i64)>,
    missing: &[String],
    lateness: i64,
    now: i64,
) -> Vec<Change> {
    let mut c = book.observe_all(observed, now);
    if missing.is_empty() {
        c.extend(book.sweep(lateness, now));
    }
    c
}

#[cfg(test)]
mod tests {
    use dyeline_model::Color;
    use dyeline_model::release::Op;

    use super::*;
    use crate::analyze::detect::windows;
    use crate::analyze::report;
    use crate::analyze::testkit::B;

    const S: i64 = 1_000_000_000;

    /// A channel releasing at 50 % blue, `n` requests per colour in one window, of which
    /// `errors` green ones fail; `times` such batches.
    fn node(n: usize, errors: usize, times: usize) -> B {
        let mut b = B::new();
        b.channel("trade", &["order"])
            .op(-100.0, "trade", Op::Start)
            .op(-100.0, "trade", Op::Ratio(50));
        for _ in 0..times {
            b.requests("order", "order-b1", Color::Blue, 0.0, n, 0)
                .requests("order", "order-g1", Color::Green, 0.0, n, errors);
        }
        b
    }

    fn said(obs: &[(Observation, i64)]) -> Vec<(AlertLabels, String)> {
        let mut v: Vec<(AlertLabels, String)> = obs
            .iter()
            .map(|(o, _)| (o.labels.clone(), o.summary.clone()))
            .collect();
        v.sort();
        v
    }

    /// Neither node's share alone shows the one-sided spike (too few requests) that the
    /// merged counts do; the merge judges the sum as one node holding every span would.
    #[test]
    fn the_merged_counts_judge_as_one_node_with_every_span() {
        let config = AnalyzerConfig::default();
        let spans = [node(60, 6, 1).resolved(), node(60, 6, 1).resolved()];
        for s in &spans {
            assert!(report(s, &config, false).error_spike.is_empty());
        }
        let shares: Vec<Share> = spans
            .iter()
            .map(|s| {
                let bytes = Share::new(
                    Report::default(),
                    windows::count(s, &config),
                    &config,
                    i64::MIN,
                    0,
                )
                .encode();
                Share::decode(&bytes).unwrap()
            })
            .collect();
        let merged = merge(shares, &config, i64::MIN);
        let one = report(&node(60, 6, 2).resolved(), &config, false);
        assert!(!one.error_spike.is_empty(), "the whole spikes");
        assert!(
            merged
                .iter()
                .any(|(o, _)| o.labels["alertname"] == "DyelineErrorSpike"),
            "{:?}",
            said(&merged)
        );
        // The windowed alerts of one node holding both (its per-span findings are no
        // share's here).
        let mut windowed = observations(&one, &config);
        windowed.retain(|(o, _)| {
            o.labels["type"]
                .parse::<Detection>()
                .is_ok_and(Detection::is_counted)
        });
        assert_eq!(said(&merged), said(&windowed));
    }

    /// A per-span count is the sum of the nodes' counts of the alert.
    #[test]
    fn a_count_of_findings_is_summed_over_the_nodes() {
        let config = AnalyzerConfig::default();
        let obs = |n: usize| {
            let mut labels = AlertLabels::new();
            labels.insert("alertname".into(), "DyelineCrossColorHop".into());
            (
                Observation {
                    labels,
                    summary: String::new(),
                    window_end: 60 * S,
                    exemplars: vec![format!("{n:032x}")],
                    counted: Some((n, "cross-colour hop(s) in trade".into())),
                },
                60 * S,
            )
        };
        let share = |ns: &[usize]| Share {
            evaluated_at_unix_nano: 0,
            from_unix_nano: 0,
            counts: WindowCounts::default(),
            observations: ns.iter().map(|&n| obs(n)).collect(),
            lane_cells: Vec::new(),
        };
        let merged = merge(vec![share(&[1, 2]), share(&[1, 2, 3])], &config, 0);
        assert_eq!(merged.len(), 5);
        assert!(
            merged
                .iter()
                .all(|(o, _)| o.summary
                    == "5 cross-colour hop(s) in trade; observed 5 > threshold 0"),
            "{:?}",
            merged[0].0.summary
        );
    }

    /// A firing alert past its window resolves only in a round that misses no node's share.
    #[test]
    fn a_round_missing_a_share_resolves_nothing() {
        let mut labels = AlertLabels::new();
        labels.insert("alertname".into(), "DyelineErrorSpike".into());
        let seen = Observation {
            labels,
            summary: "spike".into(),
            window_end: 60 * S,
            exemplars: Vec::new(),
            counted: None,
        };
        let mut book = AlertBook::default();
        let fired = apply(&mut book, vec![(seen, 60 * S)], &[], 0, 61 * S);
        assert!(matches!(fired[..], [Change::Fired(_)]));
        // Long past its window and lateness: held while a node's share is missing...
        let late = 500 * S;
        assert!(apply(&mut book, Vec::new(), &["n2".into()], 10 * S, late).is_empty());
        assert_eq!(book.firing().len(), 1);
        // ...and resolved once every live node's share is in.
        let resolved = apply(&mut book, Vec::new(), &[], 10 * S, late);
        assert!(matches!(resolved[..], [Change::Resolved(_)]));
    }
}
