//! `dyeline`: the command line. `demo` runs the server with a simulated fleet walking a
//! release; `serve` runs the collector, store, control plane and API; `sql` queries a data
//! directory; `import` loads OTLP/JSON Lines captures and timelines into one; `channel` and
//! `lane-group` drive the control API of a running server.

/// The process allocator: mimalloc instead of glibc malloc. Ingest allocates and frees
/// per span (decoded protobuf, Arrow builders, segments), and glibc's malloc and free took
/// about a quarter of the server's CPU under load (perf, `loadgen` at full rate). It returns
/// freed memory to the kernel 1 s after it was freed (its default; `MIMALLOC_PURGE_DELAY`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod commands;
mod config;
mod gate;
mod private;
mod wiring;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::commands::Command;

/// `dyeline --version`: the version, the commit and the build date (build.rs).
const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("DYELINE_COMMIT"),
    ", built ",
    env!("DYELINE_BUILD_DATE"),
    ")"
);

/// Blue-green release observability: OTLP collector, span store and analyzer.
#[derive(Parser)]
#[command(name = "dyeline", version, long_version = LONG_VERSION, about)]
struct Cli {
    /// TOML configuration file (layered under DYELINE_* variables and flags).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

fn main() -> ExitCode {
    // Before any thread or file: everything Dyeline creates is its owner's only.
    private::restrict_umask();
    no_transparent_huge_pages();
    let cli = Cli::parse();
    commands::run(cli.config.as_deref(), cli.command, Cli::command())
}

/// Turns transparent huge pages off for the process (what `MIMALLOC_ALLOW_THP=0` does). Where
/// the kernel gives them on request (`madvise`, the common default), faults on fresh memory
/// zeroed and compacted 2 MB pages: a third of the CPU of a 10 M span `analyze` was the
/// kernel's page clearing (perf), and the pass's system time halved without them (bench
/// note of issue 25). The allocator's memory is freed and faulted in again all the time, so
/// small pages cost less here. A kernel without the call keeps its setting.
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}
