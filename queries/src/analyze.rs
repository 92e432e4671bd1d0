//! The release analyzer (docs/domain.md §6 and §7): the six blue-green detections and the
//! lane rules over the `spans` table and the control plane's timeline. [`analyze`] scans the spans of a time range once with
//! DataFusion ([`read::scan`]), resolves each span's effective channel and blue_percent from
//! the timeline ([`read::resolve`]), then judges traces ([`detect::traces`]: cross-colour
//! hops, missing decisions) and tumbling windows ([`detect::windows`]: drained side, ratio
//! deviation, instance skew, error spikes). The [`Report`] is the JSON read by
//! `../shared/tools/check_findings.py`. [`report_of`] runs some of the [`Detection`]s;
//! [`report_windows`] judges windowed counts taken without loading the spans
//! ([`read::files::count_windows_once`]). [`run`] is the one way to analyse a store's range
//! (`dyeline analyze`, `GET /api/v1/findings`): it chooses between those two paths.
//! [`Report::findings`] reads every finding as a [`FindingRef`], whatever its type; [`text`]
//! writes the report for people.
//!
//! The files, each floor importing only from those below it:
//!
//! ```text
//! analyze.rs (this face: run(), the re-exports)
//!   text.rs                           the text table and the demo's summary
//!   read/files.rs, read/scan.rs       the per-file path (with its cache) and the DataFusion scan
//!   environments.rs                   each deployment environment judged apart, reports merged
//!   report.rs                         Report, report_of, report_windows
//!   detect/traces.rs                  §6.1-2, judged per trace
//!   detect/windows.rs                 §6.3-6: counts per window, then the judges:
//!     detect/{drained_side,ratio_deviation,instance_skew,error_spike}.rs
//!     detect/windows/counter.rs       counts taken batch by batch (WindowCounter)
//!   read/loader.rs, read/merge.rs     record batches → span records; parts merged
//!   read/resolve.rs                   each span's effective channel from the timeline
//!   spans.rs, intern.rs, parents.rs, config.rs, findings.rs, read/columns.rs, error.rs
//!                                     the vocabulary
//! ```
//!
//! # Adding a detection
//!
//! Three places in this folder, and its name in the model (the list the API and the dashboard
//! share):
//! 1. `detect/<name>.rs`: its judge step (called from the judge loop of `detect/windows.rs`
//!    for a windowed detection, or from the walk of each trace in `detect/traces.rs`), and
//!    its finding's `line` (text table), `alert` (labels and summary) and, when windowed,
//!    `window_finding` (the dashboard's row), with its tests in the same file.
//! 2. `findings.rs`: its finding record and one variant in [`FindingRef`]; one variant in
//!    [`Detection`] (`model/src/detection.rs`: name, title, whether windowed).
//! 3. `report.rs`: one `Vec` in [`Report`], with its place in [`Report::findings`],
//!    `ReportJson` and `keep_only`.
//!
//! The exhaustive `match`es of [`Detection`] and [`FindingRef`] then find every reader that
//! must say something about it; the text table, `GET /api/v1/findings`, the alerts and the
//! dashboard need no change. A lane detection (§7) is judged in `detect/lanes/` with the
//! others of its family, its list lives in the report's `LaneReport`, and its `line` and
//! `alert` in `detect/lane_alerts.rs`.

pub mod config;
pub mod detect;
pub mod environments;
pub mod error;
pub mod findings;
pub mod intern;
pub mod parents;
pub mod read;
pub mod report;
pub mod spans;
#[cfg(test)]
pub(crate) mod testkit;
pub mod text;

use dyeline_model::release::Timeline;
use dyeline_store::table::SpansTable;

pub use config::{AnalyzerConfig, Thresholds};
pub use environments::EnvironmentFilter;
pub use error::AnalyzeError;
pub use findings::{
    CrossColorHop, Detection, DrainedSide, ErrorSpike, FindingRef, InstanceSkew, MissingDecision,
    Observation, RatioDeviation, WindowFinding, hex64, hex128,
};
pub use report::{
    ConflictingDecision, InstanceColor, Malformed, MalformedSpan, Report, SpanDecision, report,
    report_of, report_windows,
};

use read::files::{count_windows_once, load_once};
use spans::Signal;

/// Runs `detections` (all when empty) over the spans of `table` starting in `range`
/// (`[from, to)`, Unix ns; unbounded where `None`) against `timeline`, with `config`'s
/// thresholds, listing every span's decisions when `with_decisions`: `dyeline analyze`,
/// `GET /api/v1/findings` and the live evaluation. When every detection is counted
/// ([`Detection::is_counted`], §6.3–6) and `with_decisions` is off, the
/// spans are counted as the files are read ([`count_windows_once`]: fewer columns, no record
/// per span, no trace analysis); otherwise each Parquet file is read and converted on its own
/// core and the sorted parts taken into the result ([`load_once`], the dashboard's path
/// without its cache), rather than one DataFusion scan converted on one thread and sorted
/// whole: over 10M spans, 3.9-8.4 s became 1.1-1.3 s (2.2 s the first time), with the same
/// answer.
///
/// # Errors
/// [`AnalyzeError`] when a file or a memory segment cannot be read (a file deleted by
/// retention meanwhile is skipped).
pub async fn run(
    table: &SpansTable,
    timeline: &Timeline,
    config: &AnalyzerConfig,
    range: (Option<i64>, Option<i64>),
    detections: &[Detection],
    with_decisions: bool,
    environment: &EnvironmentFilter,
) -> Result<Report, AnalyzeError> {
    let (from, to) = range;
    let detections = if detections.is_empty() {
        &Detection::ALL[..]
    } else {
        detections
    };
    let started = std::time::Instant::now();
    if !with_decisions && detections.iter().all(|d| d.is_counted()) {
        let counts = count_windows_once(table, timeline, config, from, to, environment).await?;
        // Counts of several environments mix them: those are judged from the spans below.
        if counts.environments.len() <= 1 {
            let env = counts.environments.first().cloned().flatten();
            let mut report = report_windows(counts, config, detections);
            environments::tag(&mut report, env.as_deref());
            tracing::debug!(
                spans = report.spans,
                took_ms = started.elapsed().as_secs_f64() * 1e3,
                "window analysis"
            );
            return Ok(report);
        }
    }
    let mut spans = load_once(table, timeline, from, to).await?;
    // The presence signals are read for the lane rules only.
    if detections.iter().any(|d| d.is_lane()) {
        let w = i64::try_from(config.lanes.presence_window.as_nanos()).unwrap_or(i64::MAX);
        read::presence::attach(&mut spans, table, from, to, w)?;
    }
    let loaded = started.elapsed();
    let count = spans.len();
    let report =
        environments::report_by_environment(spans, config, with_decisions, detections, environment);
    tracing::debug!(
        spans = count,
        load_ms = loaded.as_secs_f64() * 1e3,
        report_ms = (started.elapsed() - loaded).as_secs_f64() * 1e3,
        "analysis"
    );
    Ok(report)
}

/// A cluster node's share of the live evaluation (issue 27, item 3) over `table`'s spans
/// starting in `range`: the findings judged per trace (its traces are whole on it: trace-id
/// routing) and per span of a lane, with the presence signals of the other nodes
/// (`signals`) beside its own, so an instance whose metrics reached another node counts as
/// present; and the windowed detections' counts (§6.3–6), not judged: those need every
/// node's spans, merged by the alert leader ([`detect::windows::WindowCounts::merge`]).
/// The report's windowed lists are empty; its lane error spikes are judged on this node's
/// spans alone.
///
/// # Errors
/// As [`run`].
pub async fn run_share(
    table: &SpansTable,
    timeline: &Timeline,
    config: &AnalyzerConfig,
    range: (Option<i64>, Option<i64>),
    signals: Vec<Signal>,
) -> Result<(Report, detect::windows::WindowCounts), AnalyzeError> {
    let (from, to) = range;
    let mut spans = load_once(table, timeline, from, to).await?;
    let w = i64::try_from(config.lanes.presence_window.as_nanos()).unwrap_or(i64::MAX);
    read::presence::attach(&mut spans, table, from, to, w)?;
    spans.signals.extend(signals);
    let per_span: Vec<Detection> = Detection::ALL
        .iter()
        .copied()
        .filter(|d| !d.is_counted())
        .collect();
    let report = report_of(&spans, config, false, &per_span);
    let counts = detect::windows::count(&spans, config);
    Ok((report, counts))
}
