//! `dyeline import`: loads OTLP/JSON Lines files (the OpenTelemetry Collector file exporter's
//! format: one export request per line; `.gz` files are inflated) into a data directory
//! through the same conversion and duplicate filters as the receivers, then flushes them to
//! Parquet. Traces, metrics and logs files are taken alike, each line told apart by its
//! top-level key (`resourceSpans`, `resourceMetrics`, `resourceLogs`): spans are stored,
//! metrics and logs record presence as the receivers do (`dyeline_collector::convert::presence`).
//! Progress goes to stderr. `--timeline FILE` records a timeline (channel and lane group
//! operations) into the control database as history (`ControlPlane::import`): the data dir's,
//! or PostgreSQL's with `[control] postgres_url`.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dyeline_collector::{PresenceRows, convert_request, logs_presence, metrics_presence};
use dyeline_model::release::TimelineDoc;
use dyeline_store::{FsyncPolicy, Store};
use indicatif::{ProgressBar, ProgressStyle};

use crate::commands::BoxError;
use crate::commands::serve::{convert_options, store_config};
use crate::config::Config;

#[derive(clap::Args)]
pub struct ImportArgs {
    /// Data directory.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// A timeline (`{"channels": [...], "events": [...]}`, the format of GET /api/v1/timeline:
    /// channel ops and lane group ops) to record as the control plane's history.
    #[arg(long)]
    pub timeline: Option<PathBuf>,
    /// Files to load: one OTLP/JSON export request per line (traces, metrics or logs, told
    /// apart by content: spans are stored, metrics and logs record presence); `.gz` is inflated.
    #[arg(required_unless_present = "timeline")]
    pub files: Vec<PathBuf>,
}

/// What an import stored and skipped.
#[derive(Debug, Default)]
struct Counts {
    spans: u64,
    duplicates: u64,
    rejected: u64,
    /// Presence rows stored from metrics lines, from logs lines.
    metrics: u64,
    logs: u64,
    presence_duplicates: u64,
    /// Data points and log records without a usable time.
    presence_rejected: u64,
}

/// Imports `files` into `config.data_dir`.
///
/// # Errors
/// A file that cannot be read, a line that is not an OTLP/JSON request (named by file and
/// line), a store failure.
pub async fn run(
    config: Config,
    files: &[PathBuf],
    timeline: Option<&Path>,
) -> Result<(), BoxError> {
    if let Some(path) = timeline {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let doc: TimelineDoc = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a timeline document: {e}", path.display()))?;
        let plane = crate::wiring::plane::open(&config).await?;
        let report = plane
            .import(&doc)
            .await
            .map_err(|e| format!("{}: {e}", path.display()))?;
        plane.close().await;
        eprintln!(
            "recorded {} channel operations and {} lane group operations from {} ({} already present)",
            report.recorded,
            report.lane_group_recorded,
            path.display(),
            report.skipped
        );
    }
    if files.is_empty() {
        return Ok(());
    }
    let options = convert_options(&config)?;
    let mut sc = store_config(&config);
    sc.fsync = FsyncPolicy::Never;
    sc.flush_interval = std::time::Duration::from_secs(3600);
    // Offline: `dyeline compact` (or the server) compacts what was imported.
    sc.compaction = false;
    let store = Arc::new(tokio::task::spawn_blocking(move || Store::open(sc)).await??);
    let total: u64 = files
        .iter()
        .map(|f| {
            std::fs::metadata(f)
                .map(|m| m.len())
                .map_err(|e| format!("{}: {e}", f.display()))
        })
        .sum::<Result<u64, String>>()?;
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {bytes}/{total_bytes} ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut n = Counts::default();
    for path in files {
        bar.set_message(path.display().to_string());
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let counted = bar.wrap_read(file);
        let reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
            Box::new(flate2::read::MultiGzDecoder::new(counted))
        } else {
            Box::new(counted)
        };
        for (i, line) in BufReader::with_capacity(1 << 20, reader)
            .lines()
            .enumerate()
        {
            let line = line.map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
            if line.trim().is_empty() {
                continue;
            }
            let export = dyeline_collector::json::decode_any_export(line.as_bytes())
                .map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
            if !export.traces.resource_spans.is_empty() {
                let rows = convert_request(&export.traces, &options)?;
                n.rejected += rows.rejected_count();
                if let Some(batch) = rows.batch {
                    let r = store.write_waiting(batch, rows.keys).await?;
                    n.spans += r.stored;
                    n.duplicates += r.duplicates;
                }
            }
            if !export.metrics.resource_metrics.is_empty() {
                let rows = metrics_presence(&export.metrics, &options)?;
                n.metrics += record_presence(&store, rows, &mut n).await?;
            }
            if !export.logs.resource_logs.is_empty() {
                let rows = logs_presence(&export.logs, &options)?;
                n.logs += record_presence(&store, rows, &mut n).await?;
            }
        }
    }
    bar.finish_and_clear();
    store.flush().await?;
    let s = Arc::clone(&store);
    tokio::task::spawn_blocking(move || s.close()).await?;
    eprintln!(
        "imported {} spans into {} ({} duplicates skipped, {} invalid spans rejected)",
        n.spans,
        config.data_dir.display(),
        n.duplicates,
        n.rejected
    );
    if n.metrics + n.logs + n.presence_duplicates + n.presence_rejected > 0 {
        eprintln!(
            "recorded {} presence signals ({} from metrics, {} from logs; {} duplicates skipped, \
             {} data points or log records without a usable time rejected)",
            n.metrics + n.logs,
            n.metrics,
            n.logs,
            n.presence_duplicates,
            n.presence_rejected
        );
    }
    Ok(())
}

/// Writes the presence rows of one line, counting what was skipped; returns the rows stored.
async fn record_presence(
    store: &Store,
    rows: PresenceRows,
    n: &mut Counts,
) -> Result<u64, BoxError> {
    n.presence_rejected += rows.rejected;
    let Some(batch) = rows.batch else {
        return Ok(0);
    };
    let w = store.presence().write_waiting(batch).await?;
    n.presence_duplicates += w.duplicates;
    Ok(w.stored)
}
