//! `dyeline demo` (issue 6): runs `serve` in-process with demo defaults, starts the simulated
//! fleet of `dyeline-sim` (real OpenTelemetry SDKs, real HTTP, MQ and JOBs) and walks its
//! scripted release through the control API, at `--speed` times real time.
//!
//! At speed N the fleet sends N times the requests per second and the analyzer's window and
//! grace, the lane window and presence window (and the live alerts' interval, lateness and
//! trace quiet time) are divided by N, so every window holds as many requests as at speed 1;
//! the instances export their metrics N times as often.
//!
//! The gray release beside the blue-green one needs the lane rule and carrier of
//! [`LANES_TOML`] (the Nacos metadata marker, the seed-001 header `gray`): the demo's defaults
//! hold them, under the user's own file, environment and flags. The run ends at the end of the script
//! (or after `--duration`, the fleet then sending steady traffic past the script), or on
//! Ctrl-C / SIGTERM; the store is flushed either way, so `dyeline serve --data-dir` and
//! `dyeline analyze --data-dir` can open the data directory afterwards.

use std::sync::Arc;
use std::time::Duration;

use dyeline_control::{ApiToken, Role};
use dyeline_sim::fleet::{Faults, Fleet, FleetConfig, LANES_TOML};
use dyeline_sim::script::{self, ControlWriter, PLAN_SECS};
use tokio::sync::{oneshot, watch};

use crate::commands::BoxError;
use crate::commands::serve::{self, Bound};
use crate::config::Config;

#[derive(clap::Args, Clone)]
pub struct DemoArgs {
    #[command(flatten)]
    pub serve: crate::commands::serve::ServeArgs,
    /// Run the release this many times faster than real time (0.1..=100): the fleet sends
    /// this many times the requests per second and the analyzer's window and grace are
    /// divided by it. At 1 the release takes about 10 minutes.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Faults to show: all, none, or a comma list of legacy-hop, error-spike, instance-skew,
    /// job-left-running, consumers-not-stopped, unequal-clusters, lane-tag-ignored,
    /// lane-tag-dropped, lane-pollution, lane-mq-leak, lane-instance-killed, lane-error-spike.
    #[arg(long, default_value = "all")]
    pub faults: String,
    /// Stop after this long (e.g. 150s, 10m); default: at the end of the script. Past the
    /// script's end the fleet keeps sending steady traffic.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<std::time::Duration>,
}

/// User requests per second at speed 1: 480 per 60 s window at the entry of each channel,
/// enough for every windowed detection's minimum (domain §6: 200 for ratio, 100 per colour
/// for skew and spikes, which a 50 % split still gives) with room for the moments the fleet
/// pauses around a release step.
pub const RATE_PER_SEC: f64 = 8.0;

/// Requests outstanding at most before the load generator skips (and says the machine cannot
/// keep up).
pub const MAX_INFLIGHT: i64 = 500;

/// Name of the collector's runtime threads in `dyeline demo` (the fleet's are
/// [`FLEET_THREAD_NAME`]); the store adds `dyeline-writer` and `dyeline-flusher`, the control
/// plane's SQLite driver `sqlx-sqlite-worker-N`, the fleet's OpenTelemetry SDKs
/// `OpenTelemetry.Traces.BatchProcessor`.
pub const SERVE_THREAD_NAME: &str = "dyeline-serve";

/// Name of the runtime threads the fleet, the load generator and the script run on in
/// `dyeline demo`.
pub const FLEET_THREAD_NAME: &str = "dyeline-fleet";

/// What `dyeline demo` was asked for.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Time runs this many times faster (0.1..=100).
    pub speed: f64,
    /// The faults on.
    pub faults: Faults,
    /// Stop after this long; `None`: at the end of the script.
    pub duration: Option<Duration>,
    /// The data directory is a temporary one, deleted at exit.
    pub temporary_data_dir: bool,
}

/// The demo's defaults under any file, environment and flags: a fresh temporary data
/// directory (`<tmp>/dyeline-demo-<pid>-<ms>`), ports chosen by the OS on 127.0.0.1, no
/// fsync per write (`store.fsync = "never"`), and the fleet's lane rule and carrier
/// ([`LANES_TOML`]).
pub fn defaults() -> Config {
    use figment::Figment;
    use figment::providers::{Format, Serialized, Toml};
    let stamp = dyeline_model::time::now_unix_ms();
    let base = Config {
        data_dir: std::env::temp_dir().join(format!("dyeline-demo-{}-{stamp}", std::process::id())),
        otlp_grpc_addr: ([127, 0, 0, 1], 0).into(),
        otlp_http_addr: ([127, 0, 0, 1], 0).into(),
        api_addr: ([127, 0, 0, 1], 0).into(),
        store: crate::config::StoreSettings {
            // Demo data: the OS writes it back; a clean stop still flushes everything.
            fsync: dyeline_store::FsyncPolicy::Never,
            ..crate::config::StoreSettings::default()
        },
        ..Config::default()
    };
    Figment::from(Serialized::defaults(base))
        .merge(Toml::string(LANES_TOML))
        .extract()
        .expect("the fleet's lane settings are a valid configuration")
}

fn scaled(d: Duration, speed: f64, floor: Duration) -> Duration {
    d.div_f64(speed).max(floor)
}

/// Divides the analyzer's windows and grace periods, the lane window and presence window, and
/// the live alerts' interval, lateness and trace quiet time by `speed` (windows at least 1 s,
/// the interval at least 1 s).
pub fn scale_for_speed(config: &mut Config, speed: f64) {
    let sec = Duration::from_secs(1);
    for t in
        std::iter::once(&mut config.analyzer.defaults).chain(config.analyzer.channels.values_mut())
    {
        t.window = scaled(t.window, speed, sec);
        t.grace = scaled(t.grace, speed, Duration::ZERO);
    }
    let lanes = &mut config.analyzer.lanes;
    lanes.window = scaled(lanes.window, speed, sec);
    lanes.presence_window = scaled(lanes.presence_window, speed, sec);
    let a = &mut config.alerts;
    // Each evaluation reads as many spans whatever the speed; more than one a second would
    // cost the collector its CPU on a small machine.
    a.interval = scaled(a.interval, speed, Duration::from_secs(1));
    a.lateness = scaled(a.lateness, speed, Duration::ZERO);
    a.trace_quiet = scaled(a.trace_quiet, speed, Duration::from_millis(100));
}

/// The write token the demo drives the control API with: the first configured write token,
/// else the one in `<data_dir>/api-token` (created if absent; `serve` then uses the same).
///
/// # Errors
/// The token file cannot be read or created.
fn write_token(config: &Config) -> Result<String, BoxError> {
    if let Some(t) = config
        .configured_tokens()
        .into_iter()
        .find(|t: &ApiToken| t.role == Role::Write)
    {
        return Ok(t.token);
    }
    let (_, token, _) = dyeline_control::auth::ensure_token_file(&config.data_dir)
        .map_err(|e| format!("API token file in {}: {e}", config.data_dir.display()))?;
    Ok(token)
}

/// Findings printed per detection in the demo's closing summary.
const DEMO_FINDING_LINES: usize = 3;

/// Runs the demo.
///
/// # Errors
/// The server cannot start (a port in use, a data directory that cannot be opened), the
/// fleet cannot start, or a scripted control write fails.
pub async fn run(mut config: Config, opts: DemoOptions) -> Result<(), BoxError> {
    // Ctrl-C / SIGTERM from here on stop the demo cleanly, even while it is starting.
    let signal = serve::shutdown_signal();
    scale_for_speed(&mut config, opts.speed);
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| format!("creating {}: {e}", config.data_dir.display()))?;
    let data_dir = config.data_dir.clone();
    let token = write_token(&config)?;
    let window = config.analyzer.defaults.window;
    let grace = config.analyzer.defaults.grace;
    let lanes = config.analyzer.lanes.clone();
    let fleet = FleetSettings {
        lane_carriers: config.lane_carriers.clone(),
        // A quarter of the presence window: an idle instance stays present between exports.
        metrics_interval: lanes.presence_window / 4,
    };
    // The same settings (the window and grace scaled for the speed) analyse the run at the end.
    let analysis_config = config.clone();
    let (bound_tx, bound_rx) = oneshot::channel::<Bound>();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    // The collector runs on its own runtime, threads named `dyeline-serve`, so its share of
    // the process's CPU can be told from the fleet's (`bench/demo_fleet.py` reads
    // /proc/<pid>/task/*/stat by thread name).
    let serve_runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_name(SERVE_THREAD_NAME)
        .enable_all()
        .build()
        .map_err(|e| format!("starting the collector's runtime: {e}"))?;
    let server = serve_runtime.spawn(serve::serve(
        config,
        async {
            let _ = stop_rx.await;
        },
        move |b| {
            let _ = bound_tx.send(*b);
        },
    ));
    let Ok(bound) = bound_rx.await else {
        // `serve` failed at start (a data dir in use, a port taken). Dropping a runtime here,
        // in an async context, would panic.
        let served = server.await;
        serve_runtime.shutdown_background();
        return match served? {
            Err(e) => Err(e),
            Ok(()) => Err("the server stopped before binding its ports".into()),
        };
    };
    println!("{bound}");
    println!("dashboard: http://{}/", bound.api);
    println!("API token: {token}");
    let temporary = if opts.temporary_data_dir {
        " (temporary: removed when the demo stops; --data-dir D keeps the data)"
    } else {
        ""
    };
    println!("data dir: {}{temporary}", data_dir.display());
    let run_started = dyeline_model::time::now_unix_nano();
    let result = drive(&bound, &token, &opts, window, fleet, signal).await;
    let _ = stop_tx.send(());
    let served = server.await;
    // `serve` returned: what is left are idle tasks; do not block the async caller on them.
    serve_runtime.shutdown_background();
    let served = served?;
    if result.is_ok() && served.is_ok() {
        // What the release walk left in the data: the post-mortem a release owner would run
        // next, in short (a temporary data dir is gone after this).
        match crate::commands::analyze::analyze_dir(
            &analysis_config,
            Some(run_started),
            None,
            false,
            &dyeline_queries::analyze::Detection::ALL,
            &dyeline_queries::analyze::EnvironmentFilter::All,
        )
        .await
        {
            Ok(r) => print!(
                "demo: findings over the run (dyeline analyze, at most {DEMO_FINDING_LINES} per detection):\n{}",
                dyeline_queries::analyze::text::summary(&r, DEMO_FINDING_LINES)
            ),
            Err(e) => eprintln!("demo: the closing analysis failed: {e}"),
        }
    }
    if opts.temporary_data_dir {
        match std::fs::remove_dir_all(&data_dir) {
            Ok(()) => println!(
                "demo: stopped; removed the temporary data dir {} (run with --data-dir D to keep the data for `dyeline analyze` and `dyeline serve`)",
                data_dir.display()
            ),
            Err(e) => eprintln!(
                "demo: stopped; cannot remove the temporary data dir {}: {e}",
                data_dir.display()
            ),
        }
    } else {
        let env = if opts.speed == 1.0 {
            String::new()
        } else {
            format!(
                "DYELINE_ANALYZER__DEFAULTS__WINDOW={}ms DYELINE_ANALYZER__DEFAULTS__GRACE={}ms DYELINE_ANALYZER__LANES__WINDOW={}ms DYELINE_ANALYZER__LANES__PRESENCE_WINDOW={}ms ",
                window.as_millis(),
                grace.as_millis(),
                lanes.window.as_millis(),
                lanes.presence_window.as_millis()
            )
        };
        // The binary as run (`cargo run` users have no `dyeline` on their PATH).
        let exe = std::env::current_exe()
            .ok()
            .and_then(|p| {
                let cwd = std::env::current_dir().ok()?;
                Some(match p.strip_prefix(&cwd) {
                    Ok(rel) => std::path::Path::new(".").join(rel),
                    Err(_) => p,
                })
            })
            .map_or_else(|| "dyeline".to_owned(), |p| p.display().to_string());
        println!(
            "demo: stopped; post-mortem with the same windows: {env}{exe} analyze --data-dir {0}  (or {env}{exe} serve --data-dir {0})",
            data_dir.display()
        );
    }
    served?;
    result
}

/// What the fleet takes from the configuration.
struct FleetSettings {
    lane_carriers: Vec<dyeline_model::LaneCarrier>,
    metrics_interval: Duration,
}

/// Starts the fleet and the script; returns when the run is over, after the fleet's spans
/// were flushed to the collector.
async fn drive(
    bound: &Bound,
    token: &str,
    opts: &DemoOptions,
    window: Duration,
    fleet: FleetSettings,
    signal: impl std::future::Future<Output = ()>,
) -> Result<(), BoxError> {
    let base = format!("http://{}", bound.api);
    let writer = ControlWriter::new(&base, token);
    writer.setup().await?;
    let fleet = Arc::new(
        Fleet::start(FleetConfig {
            collector_grpc: bound.otlp_grpc,
            control: base.clone(),
            token: Some(token.to_owned()),
            speed: opts.speed,
            rate: RATE_PER_SEC,
            faults: opts.faults,
            lane_carriers: fleet.lane_carriers,
            metrics_interval: fleet.metrics_interval,
        })
        .await?,
    );
    let faults = opts.faults.enabled();
    println!("demo: fleet up: {}", fleet.summary());
    println!(
        "demo: faults: {}; speed {}: {:.0} requests/s, analyzer window {:?}; the script takes {:.0} s",
        if faults.is_empty() {
            "none".to_owned()
        } else {
            faults.join(", ")
        },
        opts.speed,
        RATE_PER_SEC * opts.speed,
        window,
        PLAN_SECS / opts.speed
    );
    fleet.spawn_load(MAX_INFLIGHT);
    let (script_stop_tx, script_stop_rx) = watch::channel(false);
    let script_run = script::run(&fleet, &writer, opts.speed, script_stop_rx);
    tokio::pin!(script_run);
    tokio::pin!(signal);
    let deadline = opts.duration.map(|d| tokio::time::Instant::now() + d);
    let never = tokio::time::Instant::now() + Duration::from_secs(100 * 365 * 86_400);
    let mut script_done = false;
    let mut result = Ok(());
    loop {
        tokio::select! {
            r = &mut script_run, if !script_done => {
                script_done = true;
                match r {
                    Ok(_) => println!("demo: script finished"),
                    Err(e) => {
                        result = Err(e.into());
                        break;
                    }
                }
                if deadline.is_none() {
                    break;
                }
            }
            _ = &mut signal => {
                println!("demo: interrupted; flushing");
                break;
            }
            _ = tokio::time::sleep_until(deadline.unwrap_or(never)), if deadline.is_some() => {
                println!("demo: --duration reached; flushing");
                break;
            }
        }
    }
    let _ = script_stop_tx.send(true);
    fleet.shutdown().await;
    let dropped = fleet.dropped_messages();
    if dropped > 0 {
        println!("demo: {dropped} MQ messages found no running consumer");
    }
    result
}

/// `--data-dir` given (flag, file or environment) or a temporary one.
pub fn is_temporary(config: &Config, defaults: &Config) -> bool {
    config.data_dir == defaults.data_dir
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo's defaults carry the fleet's lane rule and carrier, and pass the checks a
    /// user's file gets; the lane windows scale with the speed like the others.
    #[test]
    fn the_defaults_read_the_fleets_lanes_and_scale_with_speed() {
        let mut c = Config::load_over(defaults(), None, figment::Figment::new()).unwrap();
        assert_eq!(
            c.lane_rules.iter().map(|r| r.key()).collect::<Vec<_>>(),
            vec!["nacos.metadata.gray"]
        );
        assert_eq!(c.lane_carriers[0].key, "http.request.header.gray");
        let (w, p) = (c.analyzer.lanes.window, c.analyzer.lanes.presence_window);
        scale_for_speed(&mut c, 5.0);
        assert_eq!(c.analyzer.lanes.window, w / 5);
        assert_eq!(c.analyzer.lanes.presence_window, p / 5);
        assert_eq!(c.analyzer.defaults.window, Duration::from_secs(12));
    }
}
