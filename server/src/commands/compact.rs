//! `dyeline compact`: compacts a data directory's hour files now, offline (it takes the
//! directory's lock, as `import` does), and prints what it did: each hour, its files and bytes
//! before → after. The work is the store's (`Store::compact_now`).

use std::path::PathBuf;
use std::time::Duration;

use bytesize::ByteSize;
use dyeline_store::Store;
use dyeline_store::layout::hour_dir_name;

use super::BoxError;
use super::serve::store_config;
use crate::config::Config;

#[derive(clap::Args)]
pub struct CompactArgs {
    /// Data directory.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Compact every hour holding more files than its bytes need, however recent (ignores
    /// store.compaction_lateness).
    #[arg(long)]
    pub all: bool,
}

/// Compacts the hours of `config.data_dir` that are due (every one with `all`).
///
/// # Errors
/// The directory is missing or in use; an hour's compaction failed (the others are done).
pub async fn run(config: Config, all: bool) -> Result<(), BoxError> {
    if config.shared_storage()?.is_some() {
        // A local merge could fold files the catalog already covers into a file it does not,
        // which would then be uploaded twice.
        return Err(
            "shared storage is on: its objects are compacted by `dyeline serve` (any \
                    node), and local files are uploaded as they are; dyeline compact works on \
                    the single-node store only"
                .into(),
        );
    }
    if !config.data_dir.exists() {
        return Err(format!(
            "data directory {} does not exist",
            config.data_dir.display()
        )
        .into());
    }
    let mut sc = store_config(&config);
    // This pass only, and no query of this process holds the files it replaces.
    sc.compaction = false;
    sc.compaction_grace = Duration::ZERO;
    let report = tokio::task::spawn_blocking(move || -> Result<_, BoxError> {
        let store = Store::open(sc)?;
        let report = store.compact_now(all);
        store.close();
        Ok(report?)
    })
    .await??;
    let (mut before, mut after, mut bytes_before, mut bytes_after) = (0, 0, 0, 0);
    for h in &report.hours {
        println!(
            "{}: {} files → {}, {} → {}, {} rows, {} duplicates dropped",
            hour_dir_name(h.hour_start_unix_nano),
            h.files_before,
            h.files_after,
            ByteSize::b(h.bytes_before),
            ByteSize::b(h.bytes_after),
            h.rows,
            h.duplicates
        );
        before += h.files_before;
        after += h.files_after;
        bytes_before += h.bytes_before;
        bytes_after += h.bytes_after;
    }
    if report.hours.is_empty() {
        println!("nothing to compact: no hour holds more files than its bytes need");
    } else {
        println!(
            "compacted {} hour{}: {before} files → {after}, {} → {}",
            report.hours.len(),
            if report.hours.len() == 1 { "" } else { "s" },
            ByteSize::b(bytes_before),
            ByteSize::b(bytes_after)
        );
    }
    if let Some((hour, e)) = report.failures.first() {
        return Err(format!(
            "{} of {} hours failed; {}: {e}",
            report.failures.len(),
            report.failures.len() + report.hours.len(),
            hour_dir_name(*hour)
        )
        .into());
    }
    Ok(())
}
