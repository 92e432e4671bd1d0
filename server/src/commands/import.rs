//! `dyeline import`: loads OTLP/JSON Lines files (the OpenTelemetry Collector file exporter's
//! format: one `ExportTraceServiceRequest` per line; `.gz` files are inflated) into a data
//! directory through the same conversion and duplicate filter as the receivers, then flushes
//! them to Parquet. Progress goes to stderr. `--timeline FILE` records a timeline (channel and
//! lane group operations) into the data dir's control database as history
//! (`ControlPlane::import`).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dyeline_collector::convert_request;
use dyeline_control::ControlPlane;
use dyeline_model::release::TimelineDoc;
use dyeline_store::{FsyncPolicy, Store};
use indicatif::{ProgressBar, ProgressStyle};

use crate::commands::serve::{BoxError, convert_options, store_config};
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
    /// Files to load: one OTLP/JSON ExportTraceServiceRequest per line; `.gz` is inflated.
    #[arg(required_unless_present = "timeline")]
    pub files: Vec<PathBuf>,
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
        let plane = ControlPlane::open(&config.data_dir).await?;
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
    let (mut stored, mut duplicates, mut rejected) = (0u64, 0u64, 0u64);
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
            let request = dyeline_collector::json::decode_export_request(line.as_bytes())
                .map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
            let rows = convert_request(&request, &options)?;
            rejected += rows.rejected_count();
            if let Some(batch) = rows.batch {
                let r = store.write_waiting(batch, rows.keys).await?;
                stored += r.stored;
                duplicates += r.duplicates;
            }
        }
    }
    bar.finish_and_clear();
    store.flush().await?;
    let s = Arc::clone(&store);
    tokio::task::spawn_blocking(move || s.close()).await?;
    eprintln!(
        "imported {stored} spans into {} ({duplicates} duplicates skipped, {rejected} invalid spans rejected)",
        config.data_dir.display()
    );
    Ok(())
}
