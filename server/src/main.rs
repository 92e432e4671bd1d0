//! `dyeline`: the command line. `demo` runs the server with a simulated fleet walking a
//! release; `serve` runs the collector, store, control plane and API; `sql` queries a data
//! directory; `import` loads OTLP/JSON Lines captures and timelines into one; `channel` drives
//! the control API of a running server.

// The CLI's output (tables, JSON, progress) is printed by its commands; to be narrowed to those
// files once the commands have their own modules.
#![allow(clippy::print_stdout, clippy::print_stderr)]

/// The process allocator: mimalloc instead of glibc malloc. Ingest allocates and frees
/// per span (decoded protobuf, Arrow builders, segments), and glibc's malloc and free took
/// about a quarter of the server's CPU under load (perf, `loadgen` at full rate). It returns
/// freed memory to the kernel 1 s after it was freed (its default; `MIMALLOC_PURGE_DELAY`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod analyze;
mod client;
mod config;
mod demo;
mod gate;
mod import;
mod private;
mod serve;
mod wiring;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use figment::Figment;
use figment::providers::Serialized;

use crate::config::{Config, LogFormat};

/// Blue-green release observability: OTLP collector, span store and analyzer.
#[derive(Parser)]
#[command(name = "dyeline", version, about)]
struct Cli {
    /// TOML configuration file (layered under DYELINE_* variables and flags).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
    /// Run the six detections of a release over a data directory (offline post-mortem).
    Analyze(AnalyzeArgs),
    /// Manage release channels through a running server's API.
    Channel {
        #[command(flatten)]
        client: client::ClientArgs,
        #[command(subcommand)]
        command: client::ChannelCommand,
    },
}

#[derive(clap::Args, Clone)]
struct ServeArgs {
    /// Data directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// OTLP/gRPC listen address.
    #[arg(long)]
    otlp_grpc_addr: Option<String>,
    /// OTLP/HTTP listen address.
    #[arg(long)]
    otlp_http_addr: Option<String>,
    /// API and dashboard listen address.
    #[arg(long)]
    api_addr: Option<String>,
}

#[derive(clap::Args, Clone)]
struct DemoArgs {
    #[command(flatten)]
    serve: ServeArgs,
    /// Run the release this many times faster than real time (0.1..=100): the fleet sends
    /// this many times the requests per second and the analyzer's window and grace are
    /// divided by it. At 1 the release takes about 10 minutes.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// Faults to show: all, none, or a comma list of legacy-hop, error-spike, instance-skew,
    /// job-left-running, consumers-not-stopped, unequal-clusters.
    #[arg(long, default_value = "all")]
    faults: String,
    /// Stop after this long (e.g. 150s, 10m); default: at the end of the script. Past the
    /// script's end the fleet keeps sending steady traffic.
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<std::time::Duration>,
}

#[derive(Clone, Copy, ValueEnum)]
enum OutputFormat {
    Table,
    Json,
}

#[derive(clap::Args)]
struct SqlArgs {
    /// Data directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: OutputFormat,
    /// The query, e.g. "SELECT service_name, count(*) FROM spans GROUP BY 1".
    query: String,
}

#[derive(clap::Args)]
struct ImportArgs {
    /// Data directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// A timeline (`{"channels": [...], "events": [...]}`, the format of GET /api/v1/timeline)
    /// to record as the control plane's history.
    #[arg(long)]
    timeline: Option<PathBuf>,
    /// Files to load: one OTLP/JSON ExportTraceServiceRequest per line; `.gz` is inflated.
    #[arg(required_unless_present = "timeline")]
    files: Vec<PathBuf>,
}

#[derive(clap::Args)]
struct AnalyzeArgs {
    /// Data directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Spans starting at or after this time (RFC 3339 or Unix nanoseconds).
    #[arg(long)]
    from: Option<String>,
    /// Spans starting before this time.
    #[arg(long)]
    to: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: OutputFormat,
    /// Findings listed per detection in the table (the count heads each section); 0 lists
    /// all. JSON always has every finding.
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// Also list every span's parsed decisions.
    #[arg(long)]
    with_decisions: bool,
    /// Run only these detections (comma-separated finding types: cross_color_hop,
    /// missing_decision, drained_side, ratio_deviation, instance_skew, error_spike).
    /// Default: all six. With only windowed ones (the last four) and no --with-decisions,
    /// the span ids, decisions and ends are not read, which makes the run faster.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    detections: Vec<dyeline_queries::analyze::Detection>,
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

fn main() -> ExitCode {
    // Before any thread or file: everything Dyeline creates is its owner's only.
    private::restrict_umask();
    let cli = Cli::parse();
    if let Command::Channel { client, command } = &cli.command {
        return match client::run(client, command) {
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
    let (data_dir, serve_args) = match &cli.command {
        Command::Demo(a) => (a.serve.data_dir.as_ref(), Some(&a.serve)),
        Command::Serve(a) => (a.data_dir.as_ref(), Some(a)),
        Command::Sql(a) => (a.data_dir.as_ref(), None),
        Command::Import(a) => (a.data_dir.as_ref(), None),
        Command::Analyze(a) => (a.data_dir.as_ref(), None),
        Command::Channel { .. } => unreachable!("handled above"),
    };
    let demo_defaults = matches!(cli.command, Command::Demo(_)).then(demo::defaults);
    let loaded = match &demo_defaults {
        Some(d) => Config::load_over(
            d.clone(),
            cli.config.as_deref(),
            overrides(data_dir, serve_args),
        ),
        None => Config::load(cli.config.as_deref(), overrides(data_dir, serve_args)),
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
        cli.command,
        Command::Sql(_) | Command::Analyze(_) | Command::Demo(_)
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
        cli.command,
        Command::Serve(_) | Command::Import(_) | Command::Demo(_)
    ) && let Err(e) = private::secure_data_dir(&config.data_dir)
    {
        eprintln!("dyeline: data directory {}: {e}", config.data_dir.display());
        return ExitCode::FAILURE;
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if matches!(cli.command, Command::Demo(_)) {
        builder.thread_name(demo::FLEET_THREAD_NAME);
    }
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("dyeline: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let demo_options = match &cli.command {
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
    let result = runtime.block_on(async {
        match cli.command {
            Command::Demo(_) => demo::run(config, demo_options.expect("set for demo")).await,
            Command::Serve(_) => serve::run(config).await,
            Command::Sql(a) => {
                serve::sql(config, &a.query, matches!(a.format, OutputFormat::Json)).await
            }
            Command::Import(a) => import::run(config, &a.files, a.timeline.as_deref()).await,
            Command::Analyze(a) => {
                analyze::run(
                    config,
                    a.from.as_deref(),
                    a.to.as_deref(),
                    matches!(a.format, OutputFormat::Json),
                    a.limit,
                    a.with_decisions,
                    &a.detections,
                )
                .await
            }
            Command::Channel { .. } => unreachable!("handled above"),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dyeline: {e}");
            ExitCode::FAILURE
        }
    }
}
