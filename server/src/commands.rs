//! The subcommands of `dyeline`, one file each (its arguments and its `run`): [`serve`],
//! [`sql`], [`analyze`], [`import`], [`compact`], [`demo`], [`channel`], [`lane_group`],
//! [`storage`], [`cluster`] and [`completions`]. This face loads the layered
//! configuration, starts the logs and the runtime, and dispatches ([`run`]).

// The commands' output (tables, JSON, progress, the demo's lines, refusals) is what they print.
#![allow(clippy::print_stdout, clippy::print_stderr)]

pub mod analyze;
pub mod channel;
pub mod cluster;
pub mod compact;
pub mod completions;
pub mod demo;
pub mod import;
pub mod lane_group;
pub mod serve;
pub mod sql;
pub mod storage;
pub mod table;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use figment::Figment;
use figment::providers::Serialized;

use crate::config::{self, Config, LogFormat};
use crate::private;
use analyze::AnalyzeArgs;
use compact::CompactArgs;
use demo::DemoArgs;
use import::ImportArgs;
use serve::ServeArgs;
use sql::SqlArgs;

/// Errors that end a command (every subcommand's `run` returns them).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Subcommand)]
pub enum Command {
    /// Run the server with a simulated fleet (real OpenTelemetry SDKs) walking a scripted
    /// multi-channel blue-green release, with faults the analyzer catches; prints the
    /// dashboard URL and the API token.
    Demo(DemoArgs),
    /// Run the OTLP receivers, the store and the API.
    Serve(ServeArgs),
    /// Run one read-only SQL query on a data directory's `spans` table.
    Sql(SqlArgs),
    /// Load OTLP/JSON Lines files (`.jsonl`, `.jsonl.gz`) and a channel timeline into a data
    /// directory (offline).
    Import(ImportArgs),
    /// Merge a data directory's hour files into few large ones now (offline), printing each
    /// hour's files and bytes before and after.
    Compact(CompactArgs),
    /// Run the six detections of a release over a data directory (offline post-mortem).
    Analyze(AnalyzeArgs),
    /// Manage release channels through a running server's API.
    Channel {
        #[command(flatten)]
        client: channel::ClientArgs,
        #[command(subcommand)]
        command: channel::ChannelCommand,
    },
    /// Manage lane groups (gray lanes) through a running server's API.
    LaneGroup {
        #[command(flatten)]
        client: channel::ClientArgs,
        #[command(subcommand)]
        command: lane_group::LaneGroupCommand,
    },
    /// Shared storage: the object store and its PostgreSQL catalog.
    #[command(subcommand)]
    Storage(storage::StorageCommand),
    /// Several nodes on one catalog and bucket: their state.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Print the shell completion script of `dyeline` for SHELL (e.g. `dyeline completions
    /// bash > /etc/bash_completion.d/dyeline`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// The exit status of `dyeline analyze --fail-on` when the report has a finding of one of the
/// types named (0 when it has none; 1 is a failed run, 2 a usage error).
pub const EXIT_FINDINGS: u8 = 3;

/// `--format` of `cluster status` (a value's doc would change `--help`: none on purpose).
#[derive(Clone, Copy, ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
}

/// `--format` of `sql` and `analyze`, which print rows: also CSV (RFC 4180, one header line).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DataFormat {
    Table,
    Json,
    Csv,
}

fn overrides(data_dir: Option<&PathBuf>, serve: Option<&ServeArgs>) -> Figment {
    let mut f = Figment::new();
    if let Some(d) = data_dir {
        f = f.merge(Serialized::default("data_dir", d));
    }
    if let Some(s) = serve {
        for (key, v) in [
            ("otlp_grpc_addr", &s.otlp_grpc_addr),
            ("otlp_http_addr", &s.otlp_http_addr),
            ("api_addr", &s.api_addr),
        ] {
            if let Some(v) = v {
                f = f.merge(Serialized::default(key, v));
            }
        }
    }
    f
}

/// Logs go to stderr; `DYELINE_LOG` (an env-filter, e.g. `debug`) overrides `default_level`.
fn init_logs(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DYELINE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

/// Runs `command` with the configuration file `config_file` (layered under `DYELINE_*`
/// variables and the command's flags); the process's exit status.
pub fn run(config_file: Option<&Path>, command: Command, cli: clap::Command) -> ExitCode {
    if let Command::Completions { shell } = command {
        return completions::run(shell, cli);
    }
    if let Command::Analyze(a) = &command
        && let Err(e) = analyze::check_fail_on(a)
    {
        eprintln!("dyeline: {e}");
        return ExitCode::from(2);
    }
    let client_command = match &command {
        Command::Channel { client, command } => Some(channel::run(client, command)),
        Command::LaneGroup { client, command } => Some(lane_group::run(client, command)),
        _ => None,
    };
    if let Some(result) = client_command {
        return match result {
            Ok(out) => {
                println!("{out}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("dyeline: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let (data_dir, serve_args) = match &command {
        Command::Demo(a) => (a.serve.data_dir.as_ref(), Some(&a.serve)),
        Command::Serve(a) => (a.data_dir.as_ref(), Some(a)),
        Command::Sql(a) => (a.data_dir.as_ref(), None),
        Command::Import(a) => (a.data_dir.as_ref(), None),
        Command::Compact(a) => (a.data_dir.as_ref(), None),
        Command::Analyze(a) => (a.data_dir.as_ref(), None),
        Command::Storage(c) => (c.data_dir(), None),
        Command::Cluster(c) => (c.data_dir(), None),
        Command::Channel { .. } | Command::LaneGroup { .. } | Command::Completions { .. } => {
            unreachable!("handled above")
        }
    };
    let demo_defaults = matches!(command, Command::Demo(_)).then(demo::defaults);
    let loaded = match &demo_defaults {
        Some(d) => Config::load_over(d.clone(), config_file, overrides(data_dir, serve_args)),
        None => Config::load(config_file, overrides(data_dir, serve_args)),
    };
    let config = match loaded {
        Ok(c) => c,
        Err(e) => {
            eprintln!("dyeline: {e}");
            return ExitCode::from(2);
        }
    };
    // A query's output should not drown in the store's start-up logs, nor the demo's lines
    // (URL, token, each step) in the server's (DYELINE_LOG=info shows them).
    let level = if matches!(
        command,
        Command::Sql(_)
            | Command::Analyze(_)
            | Command::Demo(_)
            | Command::Compact(_)
            | Command::Storage(_)
            | Command::Cluster(_)
    ) {
        "warn"
    } else {
        "info"
    };
    init_logs(config.log_format, level);
    for name in config::ignored_env_vars() {
        tracing::debug!(variable = %name, "ignored: not a Dyeline setting");
    }
    if matches!(
        command,
        Command::Serve(_) | Command::Import(_) | Command::Demo(_)
    ) && let Err(e) = private::secure_data_dir(&config.data_dir)
    {
        eprintln!("dyeline: data directory {}: {e}", config.data_dir.display());
        return ExitCode::FAILURE;
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if matches!(command, Command::Demo(_)) {
        builder.thread_name(demo::FLEET_THREAD_NAME);
    }
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("dyeline: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let demo_options = match &command {
        Command::Demo(a) => {
            let faults = match dyeline_sim::fleet::Faults::parse(&a.faults) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("dyeline: --faults: {e}");
                    return ExitCode::from(2);
                }
            };
            if !(0.1..=100.0).contains(&a.speed) {
                eprintln!("dyeline: --speed must be between 0.1 and 100");
                return ExitCode::from(2);
            }
            Some(demo::DemoOptions {
                speed: a.speed,
                faults,
                duration: a.duration,
                temporary_data_dir: demo_defaults
                    .as_ref()
                    .is_some_and(|d| demo::is_temporary(&config, d)),
            })
        }
        _ => None,
    };
    // Ok(status): 0, or EXIT_FINDINGS for `analyze --fail-on`.
    let result = runtime.block_on(async {
        let done = match command {
            Command::Demo(_) => demo::run(config, demo_options.expect("set for demo")).await,
            Command::Serve(_) => serve::run(config).await,
            Command::Sql(a) => sql::run(config, &a.query, a.format).await,
            Command::Import(a) => import::run(config, &a.files, a.timeline.as_deref()).await,
            Command::Compact(a) => compact::run(config, a.all).await,
            Command::Analyze(a) => return analyze::run(config, &a).await,
            Command::Storage(c) => storage::run(config, &c).await,
            Command::Cluster(c) => cluster::run(config, &c).await,
            Command::Channel { .. } | Command::LaneGroup { .. } | Command::Completions { .. } => {
                unreachable!("handled above")
            }
        };
        done.map(|()| 0)
    });
    match result {
        Ok(status) => ExitCode::from(status),
        Err(e) => {
            eprintln!("dyeline: {e}");
            ExitCode::FAILURE
        }
    }
}
