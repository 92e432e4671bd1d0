//! `dyeline cluster status`: the nodes sharing this configuration's catalog, from the
//! catalog (heartbeats, owner epochs, staging bytes, upload lag, live objects) and the alert
//! leader. The reading and the text are `dyeline_storage::status`'s; here are the arguments.

use std::path::PathBuf;

use clap::Subcommand;

use super::{BoxError, OutputFormat};
use crate::config::Config;

/// `dyeline cluster …`.
#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Every node of the catalog: alive or stale (a heartbeat within three
    /// `[cluster] heartbeat_interval`s), owner epoch, version, staging bytes, upload lag and
    /// live objects; and the alert leader.
    Status {
        /// Data directory (its configuration names the catalog).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
}

impl ClusterCommand {
    /// The `--data-dir` given.
    pub fn data_dir(&self) -> Option<&PathBuf> {
        match self {
            Self::Status { data_dir, .. } => data_dir.as_ref(),
        }
    }
}

/// Runs `command`, printing the status.
///
/// # Errors
/// Shared storage not configured; the catalog cannot be read.
pub async fn run(config: Config, command: &ClusterCommand) -> Result<(), BoxError> {
    match command {
        ClusterCommand::Status { format, .. } => {
            let shared = config.shared_storage()?.ok_or(
                "no cluster: shared storage is off (set [storage] object_store_url and \
                 [catalog] postgres_url)",
            )?;
            let catalog = dyeline_storage::Catalog::connect(&shared.postgres_url, 1).await?;
            let status = dyeline_storage::status::read(&catalog, shared.heartbeat_interval).await;
            catalog.close().await;
            let status = status?;
            match format {
                OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&status)?),
                OutputFormat::Table => println!("{status}"),
            }
            Ok(())
        }
    }
}
