//! The presence signals of OTLP metrics and logs exports (domain §7.1) the lane rules read
//! beside the spans ([`Spans::signals`]): the store's presence rows of a range widened by the
//! presence window on each side (an instance is present at t by signals up to W before and
//! after it).

use dyeline_store::table::SpansTable;

use crate::analyze::error::AnalyzeError;
use crate::analyze::spans::{Signal, Spans};

/// The signals around `[lo, hi]` (Unix ns, inclusive), widened by `window_ns` on each side;
/// none when the table's store keeps no presence rows.
///
/// # Errors
/// [`AnalyzeError::Internal`] when the rows cannot be read.
pub fn signals(
    table: &SpansTable,
    lo: i64,
    hi: i64,
    window_ns: i64,
) -> Result<Vec<Signal>, AnalyzeError> {
    let Some(presence) = table.presence() else {
        return Ok(Vec::new());
    };
    let instances = presence
        .instances_in(lo.saturating_sub(window_ns), hi.saturating_add(window_ns))
        .map_err(|e| AnalyzeError::Internal(format!("reading presence: {e}")))?;
    let mut out = Vec::new();
    for i in instances {
        let lane = i
            .lane
            .unwrap_or_else(|| dyeline_model::LaneId::BASE.to_owned());
        let rule = i
            .lane_rule
            .unwrap_or_else(|| dyeline_model::lane::DEFAULT_RULE.to_owned());
        out.extend(i.times.iter().map(|&t| Signal {
            app: i.service_name.clone(),
            instance: i.instance_id.clone(),
            lane: lane.clone(),
            lane_rule: rule.clone(),
            t_unix_nano: t,
        }));
    }
    Ok(out)
}

/// Sets `spans`' signals to those around `[from, to)` (see [`signals`]).
///
/// # Errors
/// As [`signals`].
pub fn attach(
    spans: &mut Spans,
    table: &SpansTable,
    from: Option<i64>,
    to: Option<i64>,
    window_ns: i64,
) -> Result<(), AnalyzeError> {
    let lo = from.unwrap_or(i64::MIN);
    let hi = to.map_or(i64::MAX, |t| t.saturating_sub(1));
    spans.signals = signals(table, lo, hi, window_ns)?;
    Ok(())
}
