//! `dyeline serve` (receivers + store + API, graceful shutdown on Ctrl-C / SIGTERM) and
//! `dyeline sql`.

use std::path::PathBuf;
use std::sync::Arc;

use dyeline_collector::listen::{self, ListenError, ListenerLimits, ListenerMetrics};
use dyeline_collector::metrics::ReceiverMetrics;
use dyeline_collector::{ConvertOptions, Limits, Receiver};
use dyeline_control::api::ControlApi;
use dyeline_control::auth::{GENERATED_TOKEN_NAME, ensure_token_file};
use dyeline_control::{ApiToken, Auth, Role};
use dyeline_model::{ColorRules, LaneCarriers, LaneRules};
use dyeline_queries::SqlEngine;
use dyeline_queries::http::{AnalysisApi, ApiError};
use dyeline_store::{Store, StoreConfig};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use super::BoxError;
use crate::config::Config;
use crate::wiring::http::{ApiState, AuthGate};
use crate::wiring::plane::PlaneReleases;
use crate::wiring::sink::StoreSink;
use dyeline_queries::ports::{KeptRowsObserver, Releases};
use dyeline_queries::rollup::{Rollup, RollupObserver, SharedRollup};
use dyeline_queries::span_metrics::{SpanMetrics, SpanMetricsObserver};

#[derive(clap::Args, Clone)]
pub struct ServeArgs {
    /// Data directory.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// OTLP/gRPC listen address.
    #[arg(long)]
    pub otlp_grpc_addr: Option<String>,
    /// OTLP/HTTP listen address.
    #[arg(long)]
    pub otlp_http_addr: Option<String>,
    /// API and dashboard listen address.
    #[arg(long)]
    pub api_addr: Option<String>,
}

/// How far back the live channel rollups reach behind the newest minute they hold; older
/// summary ranges are answered by a scan of the spans.
pub const ROLLUP_RETENTION: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// The store settings of `config`.
pub fn store_config(config: &Config) -> StoreConfig {
    let mut s = StoreConfig::new(&config.data_dir);
    s.fsync = config.store.fsync;
    s.flush_interval = config.store.flush_interval;
    s.flush_max_rows = config.store.flush_max_rows;
    s.retention = config.store.retention;
    s.queue_capacity = config.store.queue_capacity;
    s.max_memory_bytes = bytes(config.store.max_memory);
    s.persist = !config.store.in_memory_only;
    s.trace_index_max_bytes = bytes(config.store.trace_index_max_bytes);
    s.compaction = config.store.compaction;
    s.compaction_lateness = config.store.compaction_lateness;
    s.compaction_target_bytes = config.store.compaction_target_bytes.as_u64();
    s.compaction_grace = config.store.compaction_grace;
    if matches!(config.shared_storage(), Ok(Some(_))) {
        // Objects are compacted in shared storage; local files are uploaded long before an
        // hour closes.
        s.compaction = false;
        s.staging_max_bytes = config.store.staging_max_bytes.as_u64();
    }
    s
}

/// A byte size as `usize` (saturating on a 32-bit target).
fn bytes(size: bytesize::ByteSize) -> usize {
    usize::try_from(size.as_u64()).unwrap_or(usize::MAX)
}

/// The listeners' names, in the order of [`listener_limits`].
const LISTENERS: [&str; 3] = ["otlp_grpc", "otlp_http", "api"];

/// The limits of the OTLP/gRPC, OTLP/HTTP and API listeners, after raising the open-files
/// limit to its hard value: their `max_connections` are lowered (with a warning) when together
/// they would not fit in it, so that a full listener evicts or refuses connections rather
/// than every listener failing its accepts with EMFILE.
pub fn listener_limits(config: &Config) -> [ListenerLimits; 3] {
    let mut limits = [
        config.listen.otlp_grpc.limits(),
        config.listen.otlp_http.limits(),
        config.listen.api.limits(),
    ];
    let open_files = match listen::raise_open_files_limit() {
        Ok((before, after)) if after > before => {
            tracing::info!(
                before,
                after,
                "open-files limit (RLIMIT_NOFILE) raised to its hard limit"
            );
            after
        }
        Ok((_, limit)) => {
            tracing::info!(open_files = limit, "open-files limit (RLIMIT_NOFILE)");
            limit
        }
        Err(e) => {
            let current = listen::open_files_limit();
            tracing::warn!(error = %e, open_files = current, "cannot raise the open-files limit");
            current
        }
    };
    let mut caps = limits.map(|l| l.max_connections);
    if listen::fit_connection_caps(&mut caps, open_files) {
        tracing::warn!(
            open_files,
            otlp_grpc = caps[0],
            otlp_http = caps[1],
            api = caps[2],
            "the listeners' max_connections do not fit in the open-files limit and were lowered (raise the hard limit, ulimit -Hn, or lower [listen.*] max_connections)"
        );
        for (l, cap) in limits.iter_mut().zip(caps) {
            l.max_connections = cap;
        }
    }
    limits
}

/// The API's answer to a request its listener refused: 503 with `Retry-After` and the API's
/// JSON error, code `unavailable`.
fn api_refusal(_: &axum::http::HeaderMap, e: &ListenError) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut response = ApiError::new(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        e.to_string(),
    )
    .into_response();
    response.headers_mut().insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from(e.retry_after().as_secs().max(1)),
    );
    response
}

/// The conversion settings of `config`, keeping spans whatever their age (`dyeline import`;
/// the receivers add the store's retention: [`receiver_convert_options`]).
///
/// # Errors
/// Invalid colour rules, lane rules or lane carriers.
pub fn convert_options(config: &Config) -> Result<ConvertOptions, BoxError> {
    Ok(ConvertOptions {
        color_rules: Arc::new(ColorRules::with_user_rules(config.color_rules.clone())?),
        decision_sources: Vec::new(),
        lane_rules: Arc::new(LaneRules::new(&config.lane_rules)?),
        lane_carriers: Arc::new(LaneCarriers::new(&config.lane_carriers)?),
        skip_lanes_bench_only: false,
        retention: None,
    })
}

/// The receivers' conversion settings: [`convert_options`], refusing spans older than
/// `[store] retention` (domain §1: refused through partial success, never dropped silently).
///
/// # Errors
/// Invalid colour or lane rules.
pub fn receiver_convert_options(config: &Config) -> Result<ConvertOptions, BoxError> {
    Ok(ConvertOptions {
        retention: Some(config.store.retention),
        ..convert_options(config)?
    })
}

/// A future that completes on Ctrl-C (SIGINT) or, on Unix, SIGTERM.
///
/// The handlers are installed when this is called, not when the future is first polled: a
/// signal that comes while the caller is still starting up (the demo's fleet takes seconds)
/// is kept for the future instead of killing the process before it can flush and clean up.
/// Must be called within the Tokio runtime.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let handlers = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        );
        async move {
            match handlers {
                (Ok(mut interrupt), Ok(mut terminate)) => {
                    tokio::select! {
                        _ = interrupt.recv() => {},
                        _ = terminate.recv() => {},
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The API tokens: those configured, else the one in `<data_dir>/api-token` (generated at
/// first start, mode 0600), whose location is printed on stderr; its value never is.
///
/// # Errors
/// The token file cannot be read or created.
fn api_tokens(config: &Config) -> Result<Vec<ApiToken>, BoxError> {
    let configured = config.configured_tokens();
    if !configured.is_empty() {
        return Ok(configured);
    }
    let (path, token, created) = ensure_token_file(&config.data_dir)
        .map_err(|e| format!("API token file in {}: {e}", config.data_dir.display()))?;
    let path = path.canonicalize().unwrap_or(path);
    if created {
        eprintln!(
            "dyeline: no API token configured; generated one (name {GENERATED_TOKEN_NAME:?}) in {} (owner-only)",
            path.display()
        );
    } else {
        eprintln!(
            "dyeline: no API token configured; using the one (name {GENERATED_TOKEN_NAME:?}) in {}",
            path.display()
        );
    }
    Ok(vec![ApiToken {
        name: GENERATED_TOKEN_NAME.into(),
        token,
        role: Role::Write,
    }])
}

/// The addresses a running server bound (ports given as 0 are the ones the OS chose).
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// OTLP/gRPC.
    pub otlp_grpc: std::net::SocketAddr,
    /// OTLP/HTTP.
    pub otlp_http: std::net::SocketAddr,
    /// API and dashboard.
    pub api: std::net::SocketAddr,
}

impl std::fmt::Display for Bound {
    /// The machine-readable listening line scripts and tests read:
    /// `dyeline listening otlp_grpc=A otlp_http=A api=A`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dyeline listening otlp_grpc={} otlp_http={} api={}",
            self.otlp_grpc, self.otlp_http, self.api
        )
    }
}

/// `dyeline serve`: runs the server until Ctrl-C or SIGTERM, then flushes the store. Prints
/// the listening line ([`Bound`]) on stdout once every port is bound.
///
/// # Errors
/// A port that cannot be bound, a data directory that cannot be opened.
pub async fn run(config: Config) -> Result<(), BoxError> {
    serve(config, shutdown_signal(), |b| println!("{b}")).await
}

/// Runs the receivers, store, control plane, live alerts, API and dashboard of `config`
/// until `shutdown` completes, then drains requests, flushes the store and closes the control
/// database. `on_bound` is called once every port is bound, before any request is served.
///
/// # Errors
/// A port that cannot be bound, a data directory that cannot be opened.
pub async fn serve(
    config: Config,
    shutdown: impl std::future::Future<Output = ()>,
    on_bound: impl FnOnce(&Bound),
) -> Result<(), BoxError> {
    let store = Arc::new(
        tokio::task::spawn_blocking({
            let c = store_config(&config);
            move || Store::open(c)
        })
        .await??,
    );
    let plane = crate::wiring::plane::open(&config)
        .await
        .map_err(|e| format!("opening the control database: {e}"))?;
    crate::wiring::plane::warn_of_local_ops(&config, &plane).await;
    let mut registry = Registry::default();
    registry.register(
        "dyeline_build",
        "The running binary: version, commit and build date (always 1)",
        prometheus_client::metrics::info::Info::new(vec![
            ("version", env!("CARGO_PKG_VERSION")),
            ("commit", env!("DYELINE_COMMIT")),
            ("build_date", env!("DYELINE_BUILD_DATE")),
        ]),
    );
    let receiver_metrics = ReceiverMetrics::default();
    receiver_metrics.register(&mut registry);
    let listener_metrics = ListenerMetrics::default();
    listener_metrics.register(&mut registry, &LISTENERS);
    let [grpc_limits, http_limits, api_limits] = listener_limits(&config);
    store.metrics().register(&mut registry);
    let span_metrics = Arc::new(SpanMetrics::new(config.metrics.max_series));
    // Per-minute channel rollups answer the summary API over live ranges; their hop counts
    // come from the live evaluation, so without it there are none (the API scans instead).
    let rollup: Option<SharedRollup> = config.alerts.enabled.then(|| {
        Arc::new(Mutex::new(Rollup::new(
            dyeline_model::time::now_unix_nano(),
            ROLLUP_RETENTION.as_nanos() as i64,
        )))
    });
    span_metrics.register(&mut registry);
    let (sink, presence): (
        Arc<dyn dyeline_collector::SpanSink>,
        Arc<dyn dyeline_collector::PresenceSink>,
    ) = if config.store.discard {
        tracing::warn!("store.discard is on: spans are acknowledged and dropped, nothing is kept");
        let discard = Arc::new(dyeline_collector::DiscardSink);
        (discard.clone(), discard)
    } else {
        let releases: Arc<dyn Releases> = Arc::new(PlaneReleases(Arc::clone(&plane)));
        let mut observers: Vec<Arc<dyn KeptRowsObserver>> = vec![Arc::new(SpanMetricsObserver {
            metrics: span_metrics,
            releases: Arc::clone(&releases),
        })];
        if let Some(r) = &rollup {
            observers.push(Arc::new(RollupObserver {
                rollup: Arc::clone(r),
                releases,
            }));
        }
        let store_sink = Arc::new(StoreSink {
            store: Arc::clone(&store),
            observers: observers.into(),
        });
        (store_sink.clone(), store_sink)
    };
    let rate = &config.otlp.rate_limit;
    let source_limiter = dyeline_collector::rate_limit::SourceLimiter::new(
        rate.requests_per_second_per_source,
        rate.burst,
    )
    .map(Arc::new);
    let receiver = Arc::new(
        Receiver::new(
            sink,
            presence,
            receiver_convert_options(&config)?,
            receiver_metrics,
            Limits {
                max_body_bytes: bytes(config.receiver.max_body_size),
            },
        )
        .with_auth(dyeline_collector::OtlpAuth::new(
            config.otlp.all_tokens(config.otlp_token.as_ref()),
        ))
        .with_rate_limit(source_limiter.clone()),
    );
    let sql = SqlEngine::bounded(store.table(), config.sql.bounds())?;
    sql.register_table("presence", store.presence_table())?;
    sql.metrics().register(&mut registry);
    let auth = Arc::new(Auth::new(
        api_tokens(&config)?,
        config.api.read_requires_token,
    ));
    let gate = crate::gate::Gate::new(Arc::clone(&auth), config.api.throttle.limits());
    gate.register(&mut registry);
    let (stop_tx, stop_rx) = watch::channel(false);
    let api_url = Arc::new(std::sync::OnceLock::new());
    let storage_check = super::storage::spawn_shared_storage(
        &config,
        &store,
        &mut registry,
        stop_rx.clone(),
        Arc::clone(&api_url),
    )?;
    let control = Arc::new(ControlApi {
        plane: Arc::clone(&plane),
        auth: Arc::clone(&auth),
        apply_spread: config.api.weights_apply_spread,
        shutdown: stop_rx.clone(),
        gate: config.gate.clone(),
    });
    let alert_book: dyeline_queries::alerts::SharedAlerts = Default::default();
    // The spike guard and the release gate read the firing alerts through the control
    // plane's port (the control crate does not know the alert book).
    plane.set_firing_alerts(Arc::new(crate::wiring::plane::BookAlerts(Arc::clone(
        &alert_book,
    ))));
    registry.register_collector(Box::new(crate::wiring::release_metrics::ReleaseMetrics {
        plane: Arc::clone(&plane),
        book: Arc::clone(&alert_book),
    }));
    let orphans = prometheus_client::metrics::counter::Counter::default();
    dyeline_queries::alerts::live::register_orphans(&orphans, &mut registry);
    let trace_views = dyeline_queries::trace_view::TraceViews::new(config.trace_view.max_spans);
    trace_views.register(&mut registry);
    let api_state = Arc::new(ApiState {
        analysis: Arc::new(AnalysisApi {
            sql,
            sql_limits: config.sql.limits(),
            gate: Arc::new(AuthGate(Arc::clone(&auth))),
            releases: Arc::new(PlaneReleases(Arc::clone(&plane))),
            analyzer: config.analyzer.clone(),
            alerts: Arc::clone(&alert_book),
            rollup: rollup.clone(),
            spans: store.table(),
            trace_views,
            cluster: super::storage::cluster_reads(&config, &store)?,
        }),
        auth,
        plane: Arc::clone(&plane),
        registry: Mutex::new(registry),
        store: Arc::clone(&store),
    });

    let grpc_listener = listen::bind(config.otlp_grpc_addr)
        .map_err(|e| format!("binding OTLP/gRPC {}: {e}", config.otlp_grpc_addr))?;
    let http_listener = listen::bind(config.otlp_http_addr)
        .map_err(|e| format!("binding OTLP/HTTP {}: {e}", config.otlp_http_addr))?;
    let api_listener = listen::bind(config.api_addr)
        .map_err(|e| format!("binding API {}: {e}", config.api_addr))?;
    // TLS on both receivers (`[otlp.tls]`), each offering its own protocols, each file checked
    // for a change every reload_interval.
    let otlp_tls = |name: &'static str, protocols| {
        config
            .otlp
            .tls
            .files()
            .map(|files| listen::Tls::load(files, name, protocols, &listener_metrics))
            .transpose()
            .map_err(|e| format!("otlp.tls: {e}"))
    };
    let grpc_tls = otlp_tls(LISTENERS[0], listen::Protocols::Http2Only)?;
    let http_tls = otlp_tls(LISTENERS[1], listen::Protocols::Http1AndH2c)?;
    for tls in grpc_tls.iter().chain(&http_tls) {
        Arc::clone(tls).watch(config.otlp.tls.reload_interval, stop_rx.clone());
    }
    // The rate limit's buckets of sources gone quiet are dropped once a minute.
    if let Some(limiter) = source_limiter {
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
            loop {
                tokio::select! {
                    _ = tick.tick() => limiter.forget_idle(),
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
        });
    }
    // The bound addresses (ports may be 0 = chosen by the OS), for scripts and tests.
    let bound = Bound {
        otlp_grpc: grpc_listener.local_addr()?,
        otlp_http: http_listener.local_addr()?,
        api: api_listener.local_addr()?,
    };
    on_bound(&bound);
    let advertised = config.shared_storage()?.and_then(|s| s.advertise_url);
    let _ = api_url.set(dyeline_storage::node::api_url(
        advertised.as_deref(),
        bound.api,
    ));
    crate::private::warn_open_reads(bound.api, config.api.read_requires_token);
    tracing::info!(
        otlp_grpc = %grpc_listener.local_addr()?,
        otlp_http = %http_listener.local_addr()?,
        api = %api_listener.local_addr()?,
        otlp_tls = grpc_tls.is_some(),
        otlp_tokens = receiver.auth_required(),
        data_dir = %config.data_dir.display(),
        "dyeline serving"
    );

    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let (alert_cluster, election) = match super::storage::alert_cluster(&config, stop_rx.clone())? {
        Some((port, task)) => (Some(port), Some(task)),
        None => (None, None),
    };
    let evaluator = config.alerts.enabled.then(|| {
        let external = config
            .alerts
            .external_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", bound.api));
        dyeline_queries::alerts::spawn(
            config.alerts.clone(),
            config.analyzer.clone(),
            dyeline_queries::alerts::Live {
                spans: store.table(),
                releases: Arc::new(PlaneReleases(Arc::clone(&plane))),
                book: alert_book,
                rollup,
                cluster: alert_cluster,
                orphans,
            },
            external,
            stop_rx.clone(),
        )
    });
    let grpc = tokio::spawn(dyeline_collector::grpc::serve(
        grpc_listener,
        Arc::clone(&receiver),
        grpc_limits,
        listener_metrics.clone(),
        grpc_tls,
        stopped(stop_rx.clone()),
    ));
    let http = tokio::spawn(dyeline_collector::http::serve(
        http_listener,
        Arc::clone(&receiver),
        http_limits,
        listener_metrics.clone(),
        http_tls,
        dyeline_collector::http::cors(&config.otlp.cors.allowed_origins),
        stopped(stop_rx.clone()),
    ));
    let adapter = crate::wiring::dashboard::DashboardAdapter::new(
        Arc::clone(&api_state),
        store.metrics().rows_written.clone(),
        store.table(),
    );
    adapter.warm();
    let dashboard = dyeline_ui::Ui::with_settings(
        Arc::new(adapter),
        std::time::Duration::from_secs(1),
        dyeline_ui::session::CsrfKey::random(),
        config.ui.settings()?,
    );
    // Every route of the API port, merged first, then the one token check around all of them.
    let app = gate.wrap(crate::wiring::http::router(
        api_state,
        control,
        dyeline_ui::router(dashboard),
    ));
    let api = tokio::spawn(listen::serve(
        api_listener,
        listen::Listener {
            name: LISTENERS[2],
            limits: api_limits,
            protocols: listen::Protocols::Http1AndH2c,
            metrics: listener_metrics,
            refuse: Arc::new(api_refusal),
            tls: None,
        },
        app,
        stopped(stop_rx.clone()),
    ));
    let fatal = tokio::select! {
        () = shutdown => None,
        message = super::storage::fatal_start_check(storage_check) => {
            tracing::error!("{message}");
            Some(message)
        }
    };
    tracing::info!("shutting down: draining requests and flushing the store");
    let _ = stop_tx.send(true);
    let _ = tokio::join!(grpc, http, api);
    if let Some(e) = evaluator {
        let _ = e.await;
    }
    if let Some(e) = election {
        // The lease is given up, so another node takes over at once rather than a lease
        // later; a catalog that does not answer does not hold the shutdown up.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(3), e).await;
    }
    tokio::task::spawn_blocking(move || store.close()).await?;
    plane.close().await;
    tracing::info!("stopped");
    match fatal {
        Some(message) => Err(message.into()),
        None => Ok(()),
    }
}
