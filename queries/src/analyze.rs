//! The release analyzer (docs/domain.md §6): the six detections over the `spans` table and
//! the control plane's timeline. [`analyze`] scans the spans of a time range once with
//! DataFusion ([`read::scan`]), resolves each span's effective channel and blue_percent from
//! the timeline ([`read::resolve`]), then judges traces ([`detect::traces`]: cross-colour
//! hops, missing decisions) and tumbling windows ([`detect::windows`]: drained side, ratio
//! deviation, instance skew, error spikes). The [`Report`] is the JSON read by
//! `../shared/tools/check_findings.py`. [`report_of`] runs some of the [`Detection`]s;
//! [`report_windows`] judges windowed counts taken without loading the spans
//! ([`read::files::count_windows_once`]).
//!
//! The files, each floor importing only from those below it:
//!
//! ```text
//! analyze.rs (this face: analyze(), the re-exports)
//!   read/files.rs, read/scan.rs       the per-file path (with its cache) and the DataFusion scan
//!   report.rs                         Report, report_of, report_windows
//!   detect/traces.rs                  §6.1-2, judged per trace
//!   detect/windows.rs                 §6.3-6: counts per window, then the judges:
//!     detect/{drained_side,ratio_deviation,instance_skew,error_spike}.rs
//!     detect/windows/counter.rs       counts taken batch by batch (WindowCounter)
//!   read/loader.rs, read/merge.rs     record batches → span records; parts merged
//!   read/resolve.rs                   each span's effective channel from the timeline
//!   spans.rs, intern.rs, config.rs, findings.rs, read/columns.rs, error.rs   the vocabulary
//! ```

pub mod config;
pub mod detect;
pub mod error;
pub mod findings;
pub mod intern;
pub mod read;
pub mod report;
pub mod spans;
#[cfg(test)]
mod testkit;

use datafusion::prelude::SessionContext;
use dyeline_control::Timeline;

pub use config::{AnalyzerConfig, Thresholds};
pub use error::AnalyzeError;
pub use findings::{
    CrossColorHop, Detection, DrainedSide, ErrorSpike, InstanceSkew, MissingDecision,
    RatioDeviation, hex64, hex128,
};
pub use report::{
    ConflictingDecision, InstanceColor, Malformed, MalformedSpan, Report, SpanDecision, report,
    report_of, report_windows,
};

use crate::sql::SqlError;

/// Analyses the spans starting in `[from, to)` (all when absent) of the `spans` table in
/// `ctx` against `timeline`.
///
/// # Errors
/// [`SqlError`] when the scan fails.
pub async fn analyze(
    ctx: &SessionContext,
    timeline: &Timeline,
    config: &AnalyzerConfig,
    from: Option<i64>,
    to: Option<i64>,
    with_decisions: bool,
) -> Result<Report, SqlError> {
    let started = std::time::Instant::now();
    let spans = read::scan::load(ctx, timeline, from, to).await?;
    let loaded = started.elapsed();
    let r = report(&spans, config, with_decisions);
    tracing::debug!(
        spans = spans.len(),
        load_ms = loaded.as_secs_f64() * 1e3,
        report_ms = (started.elapsed() - loaded).as_secs_f64() * 1e3,
        "analysis"
    );
    Ok(r)
}
