//! Per-trace detections (domain §6.1–2): cross-colour hops and missing decisions. Each trace is
//! judged as a whole (its spans may have arrived in any batch and order); the root-most span
//! of a channel is chosen by ancestor count, then start, then span id, so clock skew cannot
//! reorder it.

use std::collections::HashMap;

use dyeline_model::Color;

use super::load::{Kind, SpanRec, Spans};
use super::{CrossColorHop, MissingDecision, hex64, hex128};

/// App name used when no ancestor (or parent) exists.
pub const NONE_APP: &str = "(none)";
/// Caller app when the parent span is referenced but not in the data.
pub const UNKNOWN_APP: &str = "(unknown)";

/// Span id → its place in the trace (foldhash: the map is filled and read for every span of
/// every trace in a channel, and SipHash showed in the pass's time).
type SpanIndex = HashMap<u64, usize, foldhash::fast::RandomState>;

fn color_str(c: Color) -> &'static str {
    c.as_str()
}

/// Runs both per-trace detections over every trace of `spans` (sorted by trace).
pub fn find(spans: &Spans, hops: &mut Vec<CrossColorHop>, missing: &mut Vec<MissingDecision>) {
    let mut index = SpanIndex::default();
    for trace in spans.traces() {
        if trace
            .iter()
            .any(|s| s.channel.is_some() && s.kind != Kind::Other)
        {
            one_trace(spans, trace, &mut index, hops, missing);
        }
    }
}

fn one_trace(
    spans: &Spans,
    ss: &[SpanRec],
    index: &mut SpanIndex,
    hops: &mut Vec<CrossColorHop>,
    missing: &mut Vec<MissingDecision>,
) {
    index.clear();
    for (k, s) in ss.iter().enumerate() {
        index.entry(s.span).or_insert(k);
    }
    let parent: Vec<Option<usize>> = ss
        .iter()
        .map(|s| s.parent.and_then(|p| index.get(&p.get()).copied()))
        .collect();
    // Ancestors present in the trace (bounded walk: a cycle cannot loop forever).
    let depth: Vec<usize> = (0..ss.len())
        .map(|k| {
            let mut d = 0;
            let mut p = parent[k];
            while let Some(q) = p {
                d += 1;
                if d > ss.len() {
                    break;
                }
                p = parent[q];
            }
            d
        })
        .collect();
    let mut channels: Vec<u32> = ss
        .iter()
        .filter(|s| s.kind != Kind::Other)
        .filter_map(|s| s.channel)
        .collect();
    channels.sort_unstable();
    channels.dedup();
    for c in channels {
        let cands: Vec<usize> = (0..ss.len())
            .filter(|&k| ss[k].kind != Kind::Other && ss[k].channel == Some(c))
            .collect();
        let Some(&root) = cands
            .iter()
            .min_by_key(|&&k| (depth[k], ss[k].start, ss[k].span))
        else {
            continue;
        };
        let trace_color = spans.decision(&ss[root], c).unwrap_or(ss[root].color);
        let channel = spans.channels.name(c);
        for &k in &cands {
            let s = &ss[k];
            let kind = if s.kind == Kind::Server { "RPC" } else { "MQ" };
            let dec = spans.decision(s, c);
            if dec.is_none() {
                let caller = match (s.parent, parent[k]) {
                    (None, _) => NONE_APP.to_owned(),
                    (Some(_), Some(p)) => spans.apps.name(ss[p].app).to_owned(),
                    (Some(_), None) => UNKNOWN_APP.to_owned(),
                };
                missing.push(MissingDecision {
                    trace_id: hex128(s.trace),
                    span_id: hex64(s.span),
                    channel: channel.to_owned(),
                    app: spans.apps.name(s.app).to_owned(),
                    caller_app: caller,
                    kind,
                    t_unix_nano: s.start,
                });
            }
            if trace_color == Color::Unknown || s.color == Color::Unknown {
                continue;
            }
            let hop = if k == root {
                dec.is_some_and(|d| d != s.color)
            } else {
                s.color != trace_color
            };
            if !hop {
                continue;
            }
            if s.kind == Kind::Consumer {
                let message = dec.unwrap_or(trace_color);
                let drained = match s.blue_percent {
                    0 => Some(Color::Blue),
                    100 => Some(Color::Green),
                    _ => None,
                };
                if drained == Some(message) {
                    continue; // the other side is meant to consume it
                }
            }
            let reason = match dec {
                Some(d) if d != s.color => "decision_mismatch",
                Some(_) => "decision_changed",
                None => "no_decision",
            };
            let mut via_rev: Vec<u32> = Vec::new();
            let mut from = None;
            let mut p = parent[k];
            let mut steps = 0;
            while let Some(q) = p {
                steps += 1;
                if steps > ss.len() {
                    break;
                }
                if ss[q].channel == Some(c) {
                    from = Some(q);
                    break;
                }
                via_rev.push(ss[q].app);
                p = parent[q];
            }
            let mut via: Vec<String> = Vec::new();
            for a in via_rev.into_iter().rev() {
                let name = spans.apps.name(a);
                if !via.iter().any(|v| v == name) {
                    via.push(name.to_owned());
                }
            }
            hops.push(CrossColorHop {
                trace_id: hex128(s.trace),
                span_id: hex64(s.span),
                channel: channel.to_owned(),
                from_app: from.map_or(NONE_APP.to_owned(), |q| {
                    spans.apps.name(ss[q].app).to_owned()
                }),
                from_color: from.map(|q| color_str(ss[q].color)),
                to_app: spans.apps.name(s.app).to_owned(),
                to_color: color_str(s.color),
                kind,
                reason,
                via,
                t_unix_nano: s.start,
            });
        }
    }
}
