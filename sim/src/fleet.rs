//! The demo fleet: eight apps, each with blue and green instances, instrumented with the real
//! OpenTelemetry SDK and calling one another over real HTTP on loopback.
//!
//! - Apps: `gateway` → `order` → `inventory` (or, with the legacy-hop fault, `legacy-proxy`
//!   → `inventory`), `order` → `payment` → `risk`, `order` publishes to the topic
//!   `order-events` consumed by `notify` (MQ), and `settle` runs a scheduled JOB. Channel
//!   `trade` = order, inventory, notify, settle; channel `pay` = payment, risk
//!   ([`TRADE_APPS`], [`PAY_APPS`]); the others follow only the global channel.
//! - Each instance (`order-blue-1`, host `order-blue-1.host`) has its own
//!   `SdkTracerProvider` (resource `service.name`, `service.instance.id`, `host.name`,
//!   `service.version`) with a batch processor exporting OTLP/gRPC to the collector, and a
//!   [`DecisionAttributeProcessor`] that copies the baggage decisions into span attributes.
//! - Every instance serves HTTP on `127.0.0.1:0` (axum); calls carry `traceparent` and
//!   `baggage` (W3C), routed by the instance's own [`Router`] (domain §2, §5).
//!   `legacy-proxy` has not adopted the traffic SDK: it propagates `traceparent` only and
//!   balances evenly over every instance.
//! - MQ ([`Topic`]): PRODUCER and CONSUMER spans, consumer groups origin / blue / green
//!   (domain §3). JOBs: a root span with `job.name` every [`JOB_PERIOD_SECS`] / speed on the
//!   instance that owns the job.
//! - Each instance follows its own app's event stream and acts on it: the drained side stops
//!   its MQ consumers and hands its JOB to the other colour — unless a fault says otherwise
//!   ([`Faults`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use dyeline_model::Color;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider,
};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::routing::propagation::{self, Headers};
use crate::routing::{
    Balance, CacheOptions, ConfigCache, ControlClient, DecisionAttributeProcessor, Endpoint,
    Registry, Router, decisions_of, with_decisions,
};

/// Errors while starting the fleet.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Apps of channel `trade`.
pub const TRADE_APPS: [&str; 4] = ["order", "inventory", "notify", "settle"];
/// Apps of channel `pay`.
pub const PAY_APPS: [&str; 2] = ["payment", "risk"];
/// Every app of the fleet.
pub const APPS: [&str; 8] = [
    "gateway",
    "order",
    "inventory",
    "notify",
    "settle",
    "payment",
    "risk",
    "legacy-proxy",
];
/// The app that does not propagate baggage.
pub const LEGACY_PROXY: &str = "legacy-proxy";
/// The MQ topic `order` publishes and `notify` consumes.
pub const TOPIC: &str = "order-events";
/// The scheduled JOB of `settle`.
pub const JOB_NAME: &str = "settle-batch";
/// The JOB runs this often at speed 1, seconds.
pub const JOB_PERIOD_SECS: f64 = 5.0;
/// The version every instance starts with.
pub const V1: &str = "1.0.0";
/// The version a scripted deploy installs.
pub const V2: &str = "2.0.0";

/// The faults the fleet can show, each caught by one detection of domain §6.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Faults {
    /// `legacy-hop`: one order in five reaches inventory through `legacy-proxy`, which drops
    /// the baggage → cross-colour hops and missing decisions (§6.1, §6.2).
    pub legacy_hop: bool,
    /// `error-spike`: inventory at version 2 fails 10 % of requests → a one-sided error
    /// spike while only one colour runs it (§6.6).
    pub error_spike: bool,
    /// `instance-skew`: the first risk instance of each colour is registered at 8× the
    /// factor of its peers → instance skew (§6.5).
    pub instance_skew: bool,
    /// `job-left-running`: settle's JOB is not handed over when its side is drained →
    /// drained-side JOB traffic (§6.3).
    pub job_left_running: bool,
    /// `consumers-not-stopped`: notify's consumers on a drained side keep pulling the topic
    /// → drained-side MQ traffic (§6.3).
    pub consumers_not_stopped: bool,
    /// `unequal-clusters`: order (the entry of `trade`) runs 1 blue and 3 green instances
    /// and callers use the plain weights → a ratio deviation whose cause is unequal cluster
    /// sizes (§6.4).
    pub unequal_clusters: bool,
}

impl Faults {
    /// The names `--faults` accepts, in order.
    pub const NAMES: [&'static str; 6] = [
        "legacy-hop",
        "error-spike",
        "instance-skew",
        "job-left-running",
        "consumers-not-stopped",
        "unequal-clusters",
    ];

    /// Every fault on.
    pub fn all() -> Self {
        Faults {
            legacy_hop: true,
            error_spike: true,
            instance_skew: true,
            job_left_running: true,
            consumers_not_stopped: true,
            unequal_clusters: true,
        }
    }

    fn flag(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "legacy-hop" => &mut self.legacy_hop,
            "error-spike" => &mut self.error_spike,
            "instance-skew" => &mut self.instance_skew,
            "job-left-running" => &mut self.job_left_running,
            "consumers-not-stopped" => &mut self.consumers_not_stopped,
            "unequal-clusters" => &mut self.unequal_clusters,
            _ => return None,
        })
    }

    /// Parses `all`, `none` or a comma-separated list of [`Faults::NAMES`].
    ///
    /// # Errors
    /// A message naming the unknown fault and the accepted names.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "all" => return Ok(Self::all()),
            "none" | "" => return Ok(Self::default()),
            _ => {}
        }
        let mut f = Self::default();
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            *f.flag(name).ok_or_else(|| {
                format!(
                    "unknown fault {name:?}: use all, none or a comma list of {}",
                    Self::NAMES.join(", ")
                )
            })? = true;
        }
        Ok(f)
    }

    /// The names of the faults that are on.
    pub fn enabled(&self) -> Vec<&'static str> {
        let mut me = *self;
        Self::NAMES
            .into_iter()
            .filter(|n| *me.flag(n).expect("known name"))
            .collect()
    }
}

/// How to start a fleet.
#[derive(Clone, Debug)]
pub struct FleetConfig {
    /// The collector's OTLP/gRPC address.
    pub collector_grpc: SocketAddr,
    /// The control API base URL, e.g. `http://127.0.0.1:8080`.
    pub control: String,
    /// A token for the control API (reads may require one).
    pub token: Option<String>,
    /// Time runs this many times faster than real: the request rate is multiplied and the
    /// JOB period divided by it.
    pub speed: f64,
    /// User requests per second at speed 1.
    pub rate: f64,
    /// The faults on.
    pub faults: Faults,
}

/// Instance counts (blue, green) of each app.
pub fn cluster_sizes(faults: &Faults) -> Vec<(&'static str, u32, u32)> {
    APPS.iter()
        .map(|&app| {
            let (b, g) = match app {
                "order" if faults.unequal_clusters => (1, 3),
                "risk" => (3, 3),
                "settle" | LEGACY_PROXY => (1, 1),
                _ => (2, 2),
            };
            (app, b, g)
        })
        .collect()
}

/// State of one MQ consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumerState {
    /// Consuming its group's messages.
    Running,
    /// Stopped (its side is drained).
    Stopped,
    /// Its side is drained but it was not stopped: it keeps pulling the topic's shared
    /// queue, whatever the messages' colour (MQ returns to 50/50, domain §3).
    RunningDrained,
}

struct Message {
    headers: Headers,
    group: String,
}

struct ConsumerSlot {
    instance: String,
    color: Color,
    state: ConsumerState,
    tx: mpsc::UnboundedSender<Message>,
}

/// An in-process topic with consumer groups origin, blue and green (domain §3). A message's
/// colour is its decision for the consumer app's effective channel: tagged messages go to
/// the running consumers of their colour's group (`<app>-blue` / `<app>-green`) plus any
/// consumer left running on a drained side; when that group has none (its side was drained
/// and stopped) the other side takes them over; untagged messages go to the origin group
/// (`<app>-origin`, every running consumer). Within a pool, round robin.
pub struct Topic {
    consumer_app: String,
    cache: Arc<ConfigCache>,
    slots: Mutex<Vec<ConsumerSlot>>,
    next: AtomicU64,
    dropped: AtomicU64,
}

impl Topic {
    fn new(consumer_app: &str, cache: Arc<ConfigCache>) -> Self {
        Topic {
            consumer_app: consumer_app.to_owned(),
            cache,
            slots: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    fn subscribe(&self, instance: &str, color: Color) -> mpsc::UnboundedReceiver<Message> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.slots.lock().push(ConsumerSlot {
            instance: instance.to_owned(),
            color,
            state: ConsumerState::Running,
            tx,
        });
        rx
    }

    fn set_state(&self, instance: &str, state: ConsumerState) {
        for s in self.slots.lock().iter_mut() {
            if s.instance == instance {
                s.state = state;
            }
        }
    }

    /// The message's colour: its decision for the consumer app's effective channel.
    fn color_of(&self, headers: &Headers) -> Option<Color> {
        let cfg = self.cache.get(&self.consumer_app);
        cfg.channel
            .as_deref()
            .and_then(|c| decisions_of(&propagation::extract(headers, true)).get(c))
    }

    /// Whether a message that reached `instance` should go back to the topic rather than be
    /// consumed there: the consumer was stopped since (its queue is handed back), or the
    /// message is another colour's and that colour's consumers run again (a takeover that
    /// is over).
    fn should_redeliver(&self, instance: &str, headers: &Headers) -> bool {
        let slots = self.slots.lock();
        let Some(me) = slots.iter().find(|s| s.instance == instance) else {
            return false;
        };
        match me.state {
            ConsumerState::Stopped => true,
            ConsumerState::RunningDrained => false,
            ConsumerState::Running => match self.color_of(headers) {
                Some(c) if c != me.color => slots
                    .iter()
                    .any(|s| s.color == c && s.state == ConsumerState::Running),
                _ => false,
            },
        }
    }

    /// Delivers; returns false when no consumer runs (the message is dropped and counted).
    fn publish(&self, headers: Headers) -> bool {
        let color = self.color_of(&headers);
        let slots = self.slots.lock();
        let running = |s: &&ConsumerSlot| s.state != ConsumerState::Stopped;
        let pool: Vec<&ConsumerSlot> = match color {
            Some(c) => {
                let own: Vec<&ConsumerSlot> = slots
                    .iter()
                    .filter(running)
                    .filter(|s| s.color == c || s.state == ConsumerState::RunningDrained)
                    .collect();
                if own.is_empty() {
                    slots.iter().filter(running).collect()
                } else {
                    own
                }
            }
            None => slots.iter().filter(running).collect(),
        };
        if pool.is_empty() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let i = (self.next.fetch_add(1, Ordering::Relaxed) % pool.len() as u64) as usize;
        let s = pool[i];
        let group = match color {
            Some(_) => format!("{}-{}", self.consumer_app, s.color.as_str()),
            None => format!("{}-origin", self.consumer_app),
        };
        s.tx.send(Message { headers, group }).is_ok()
    }
}

struct Telemetry {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    version: String,
}

fn telemetry(
    collector: SocketAddr,
    app: &str,
    instance: &str,
    version: &str,
) -> Result<Telemetry, BoxError> {
    // The tonic exporter must be built inside a tokio runtime (it spawns its connection).
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(format!("http://{collector}"))
        .build()?;
    let batch = BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_max_queue_size(1 << 16)
                .with_max_export_batch_size(1024)
                .with_scheduled_delay(Duration::from_millis(250))
                .build(),
        )
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(DecisionAttributeProcessor)
        .with_span_processor(batch)
        .with_resource(
            Resource::builder_empty()
                .with_service_name(app.to_owned())
                .with_attributes([
                    KeyValue::new("service.instance.id", instance.to_owned()),
                    KeyValue::new("host.name", format!("{instance}.host")),
                    KeyValue::new("service.version", version.to_owned()),
                ])
                .build(),
        )
        .build();
    let tracer = provider.tracer("dyeline-sim");
    Ok(Telemetry {
        provider,
        tracer,
        version: version.to_owned(),
    })
}

struct Shared {
    config: FleetConfig,
    registry: Arc<Registry>,
    cache: Arc<ConfigCache>,
    http: reqwest::Client,
    topic: Topic,
    job_owner: Mutex<String>,
    inflight: AtomicI64,
    paused: AtomicBool,
    orders: AtomicU64,
    stop: watch::Receiver<bool>,
}

impl Shared {
    async fn post(&self, addr: SocketAddr, path: &str, headers: &Headers) -> u16 {
        let mut req = self
            .http
            .post(format!("http://{addr}/{path}"))
            .timeout(Duration::from_secs(10));
        for (k, v) in headers {
            req = req.header(k.as_str(), v.as_str());
        }
        match req.send().await {
            Ok(r) => r.status().as_u16(),
            Err(_) => 502,
        }
    }
}

/// One running instance: an HTTP server, its tracer provider, its router, its reactions to
/// its app's events.
pub struct Instance {
    /// App name.
    pub app: String,
    /// Instance id, e.g. `order-blue-1`.
    pub id: String,
    /// Colour.
    pub color: Color,
    /// Listening address.
    pub addr: SocketAddr,
    telemetry: RwLock<Telemetry>,
    drained: AtomicBool,
    router: Router,
    shared: Arc<Shared>,
}

fn attr(k: &'static str, v: impl Into<opentelemetry::Value>) -> KeyValue {
    KeyValue::new(k, v)
}

impl Instance {
    fn tracer(&self) -> SdkTracer {
        self.telemetry.read().tracer.clone()
    }

    /// The version it runs.
    pub fn version(&self) -> String {
        self.telemetry.read().version.clone()
    }

    async fn handle(self: Arc<Self>, path: String, headers: Headers) -> u16 {
        let legacy = self.app == LEGACY_PROXY;
        let parent = propagation::extract(&headers, !legacy);
        let tracer = self.tracer();
        let span = tracer
            .span_builder(format!("POST /{path}"))
            .with_kind(SpanKind::Server)
            .with_attributes([
                attr("http.request.method", "POST"),
                attr("http.route", format!("/{path}")),
                attr("url.path", format!("/{path}")),
            ])
            .start_with_context(&tracer, &parent);
        let cx = parent.with_span(span);
        tokio::time::sleep(Duration::from_micros(300)).await;
        let status = match (self.app.as_str(), path.as_str()) {
            ("gateway", "checkout") => self.call(&cx, "order", "checkout").await,
            ("order", "checkout") => {
                let n = self.shared.orders.fetch_add(1, Ordering::Relaxed);
                if self.shared.config.faults.legacy_hop && n.is_multiple_of(5) {
                    self.call(&cx, LEGACY_PROXY, "reserve").await;
                } else {
                    self.call(&cx, "inventory", "reserve").await;
                }
                self.call(&cx, "payment", "pay").await;
                self.publish(&cx);
                200
            }
            ("inventory", "reserve") => {
                let failing = self.shared.config.faults.error_spike && self.version() == V2;
                let p = if failing { 0.10 } else { 0.001 };
                if fastrand::f64() < p { 500 } else { 200 }
            }
            ("payment", "pay") => {
                self.call(&cx, "risk", "check").await;
                200
            }
            ("risk", "check") => 200,
            (LEGACY_PROXY, "reserve") => self.legacy_call(&cx, "inventory", "reserve").await,
            _ => 404,
        };
        let span = cx.span();
        span.set_attribute(attr("http.response.status_code", i64::from(status)));
        if status >= 500 {
            span.set_status(Status::error(format!("HTTP {status}")));
        }
        span.end();
        status
    }

    async fn call(&self, cx: &Context, app: &str, path: &str) -> u16 {
        let mut decisions = decisions_of(cx);
        let route = match self.router.route(app, &mut decisions) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(from = %self.id, error = %e, "no route");
                return 503;
            }
        };
        self.send(cx, &route.endpoint, path, Some(&decisions)).await
    }

    /// A node without the traffic SDK: any instance, evenly; no baggage.
    async fn legacy_call(&self, cx: &Context, app: &str, path: &str) -> u16 {
        let eps = self.shared.registry.endpoints(app);
        if eps.is_empty() {
            return 503;
        }
        let e = eps[fastrand::usize(..eps.len())].clone();
        self.send(cx, &e, path, None).await
    }

    async fn send(
        &self,
        cx: &Context,
        to: &Endpoint,
        path: &str,
        decisions: Option<&dyeline_model::Decisions>,
    ) -> u16 {
        let tracer = self.tracer();
        let span = tracer
            .span_builder(format!("POST /{path}"))
            .with_kind(SpanKind::Client)
            .with_attributes([
                attr("http.request.method", "POST"),
                attr("server.address", to.addr.ip().to_string()),
                attr("server.port", i64::from(to.addr.port())),
                attr("peer.service", to.app.clone()),
            ])
            .start_with_context(&tracer, cx);
        let ccx = cx.with_span(span);
        let headers = match decisions {
            Some(d) => propagation::inject(&with_decisions(&ccx, d), true),
            None => propagation::inject(&ccx, false),
        };
        let status = self.shared.post(to.addr, path, &headers).await;
        let span = ccx.span();
        span.set_attribute(attr("http.response.status_code", i64::from(status)));
        if status >= 500 {
            span.set_status(Status::error(format!("HTTP {status}")));
        }
        span.end();
        status
    }

    fn publish(&self, cx: &Context) {
        let tracer = self.tracer();
        let span = tracer
            .span_builder(format!("{TOPIC} publish"))
            .with_kind(SpanKind::Producer)
            .with_attributes([
                attr("messaging.system", "rocketmq"),
                attr("messaging.destination.name", TOPIC),
                attr("messaging.operation.type", "publish"),
            ])
            .start_with_context(&tracer, cx);
        let pcx = cx.with_span(span);
        let headers = propagation::inject(&pcx, true);
        self.shared.inflight.fetch_add(1, Ordering::SeqCst);
        if !self.shared.topic.publish(headers) {
            self.shared.inflight.fetch_sub(1, Ordering::SeqCst);
        }
        pcx.span().end();
    }

    async fn consume(self: Arc<Self>, mut rx: mpsc::UnboundedReceiver<Message>) {
        while let Some(m) = rx.recv().await {
            if self.shared.topic.should_redeliver(&self.id, &m.headers) {
                if !self.shared.topic.publish(m.headers) {
                    self.shared.inflight.fetch_sub(1, Ordering::SeqCst);
                }
                continue;
            }
            let parent = propagation::extract(&m.headers, true);
            let tracer = self.tracer();
            let span = tracer
                .span_builder(format!("{TOPIC} process"))
                .with_kind(SpanKind::Consumer)
                .with_attributes([
                    attr("messaging.system", "rocketmq"),
                    attr("messaging.destination.name", TOPIC),
                    attr("messaging.operation.type", "process"),
                    attr("messaging.consumer.group.name", m.group),
                ])
                .start_with_context(&tracer, &parent);
            let cx = parent.with_span(span);
            tokio::time::sleep(Duration::from_micros(200)).await;
            cx.span().end();
            self.shared.inflight.fetch_sub(1, Ordering::SeqCst);
        }
    }

    async fn run_job(self: Arc<Self>) {
        let period = Duration::from_secs_f64(JOB_PERIOD_SECS / self.shared.config.speed);
        let mut tick = tokio::time::interval(period);
        let mut stop = self.shared.stop.clone();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            if *self.shared.job_owner.lock() != self.id {
                continue;
            }
            let tracer = self.tracer();
            let root = tracer
                .span_builder(JOB_NAME)
                .with_kind(SpanKind::Internal)
                .with_attributes([attr("job.name", JOB_NAME)])
                .start_with_context(&tracer, &Context::new());
            let cx = Context::new().with_span(root);
            let child = tracer
                .span_builder("settle ledger")
                .with_kind(SpanKind::Internal)
                .start_with_context(&tracer, &cx);
            tokio::time::sleep(Duration::from_millis(2)).await;
            drop(child);
            cx.span().end();
        }
    }

    /// Follows its app's event stream (domain §4) and reacts: on its side drained (a flow
    /// change to 0 for blue, 100 for green) MQ consumers stop and the JOB moves to the other
    /// colour; on leaving the drained state, or on start/finish, consumers run again.
    async fn follow(self: Arc<Self>) {
        let control = self.shared.cache.control().clone();
        let seq = match control.app_config(&self.app, None).await {
            Ok(c) => c.seq,
            Err(e) => {
                tracing::warn!(instance = %self.id, error = %e, "cannot follow events");
                return;
            }
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let follower = {
            let control = control.clone();
            let app = self.app.clone();
            let stop = self.shared.stop.clone();
            tokio::spawn(async move { control.follow_events(&app, seq, tx, stop).await })
        };
        while let Some(ev) = rx.recv().await {
            match ev.event.as_str() {
                "flow_change" => {
                    let to = ev.to.unwrap_or(50);
                    let drained = match self.color {
                        Color::Blue => to == 0,
                        Color::Green => to == 100,
                        Color::Unknown => false,
                    };
                    self.set_drained(drained);
                }
                "start" | "finish" => self.set_drained(false),
                _ => {}
            }
        }
        follower.abort();
    }

    fn set_drained(&self, drained: bool) {
        if self.drained.swap(drained, Ordering::SeqCst) == drained {
            return;
        }
        let faults = self.shared.config.faults;
        if self.app == "notify" {
            let state = match (drained, faults.consumers_not_stopped) {
                (false, _) => ConsumerState::Running,
                (true, false) => ConsumerState::Stopped,
                (true, true) => ConsumerState::RunningDrained,
            };
            self.shared.topic.set_state(&self.id, state);
        }
        if self.app == "settle" && drained && !faults.job_left_running {
            let mut owner = self.shared.job_owner.lock();
            if *owner == self.id
                && let Some(e) = self
                    .shared
                    .registry
                    .endpoints(&self.app)
                    .into_iter()
                    .find(|e| e.color != self.color)
            {
                tracing::info!(from = %self.id, to = %e.instance, "JOB handed over");
                *owner = e.instance;
            }
        }
    }
}

/// The running fleet.
pub struct Fleet {
    shared: Arc<Shared>,
    instances: Vec<Arc<Instance>>,
    edge: Router,
    stop_tx: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    retired: Mutex<Vec<SdkTracerProvider>>,
}

async fn serve_instance(
    inst: Arc<Instance>,
    listener: tokio::net::TcpListener,
    stop: watch::Receiver<bool>,
) {
    let app = axum::Router::new()
        .route(
            "/{*path}",
            axum::routing::post(
                |State(inst): State<Arc<Instance>>,
                 Path(path): Path<String>,
                 headers: HeaderMap| async move {
                    let status = inst.handle(path, propagation::from_http(&headers)).await;
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
                },
            ),
        )
        .with_state(inst);
    let mut stop = stop;
    let _ = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await;
}

impl Fleet {
    /// Starts every instance (servers, tracer providers, event followers, consumers, the
    /// JOB) and the caches' watchers. Must run inside a tokio runtime.
    ///
    /// # Errors
    /// A port that cannot be bound, an exporter that cannot be built, a control API that
    /// cannot be read.
    pub async fn start(config: FleetConfig) -> Result<Self, BoxError> {
        let (stop_tx, stop) = watch::channel(false);
        let registry = Arc::new(Registry::default());
        let control = ControlClient::new(&config.control, config.token.clone());
        let cache = ConfigCache::new(
            control,
            Arc::clone(&registry),
            CacheOptions {
                count_aware: !config.faults.unequal_clusters,
            },
            stop.clone(),
        );
        let shared = Arc::new(Shared {
            http: reqwest::Client::builder()
                .no_proxy()
                .pool_max_idle_per_host(64)
                .build()?,
            topic: Topic::new("notify", Arc::clone(&cache)),
            job_owner: Mutex::new("settle-blue-1".into()),
            inflight: AtomicI64::new(0),
            paused: AtomicBool::new(false),
            orders: AtomicU64::new(0),
            stop: stop.clone(),
            registry: Arc::clone(&registry),
            cache: Arc::clone(&cache),
            config,
        });
        let mut instances = Vec::new();
        let mut listeners = Vec::new();
        for (app, nb, ng) in cluster_sizes(&shared.config.faults) {
            for (color, n) in [(Color::Blue, nb), (Color::Green, ng)] {
                for k in 1..=n {
                    let id = format!("{app}-{}-{k}", color.as_str());
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                    let addr = listener.local_addr()?;
                    let factor = if shared.config.faults.instance_skew && app == "risk" && k == 1 {
                        8
                    } else {
                        1
                    };
                    registry.register(Endpoint {
                        app: app.to_owned(),
                        instance: id.clone(),
                        color,
                        addr,
                        factor,
                    });
                    let inst = Arc::new(Instance {
                        app: app.to_owned(),
                        color,
                        addr,
                        telemetry: RwLock::new(telemetry(
                            shared.config.collector_grpc,
                            app,
                            &id,
                            V1,
                        )?),
                        id,
                        drained: AtomicBool::new(false),
                        router: Router::new(
                            Arc::clone(&cache),
                            Arc::clone(&registry),
                            Balance::RoundRobin,
                        ),
                        shared: Arc::clone(&shared),
                    });
                    listeners.push((Arc::clone(&inst), listener));
                    instances.push(inst);
                }
            }
        }
        for app in APPS {
            cache.watch(app).await?;
        }
        let mut tasks = Vec::new();
        for (inst, listener) in listeners {
            tasks.push(tokio::spawn(serve_instance(
                Arc::clone(&inst),
                listener,
                stop.clone(),
            )));
            tasks.push(tokio::spawn(Arc::clone(&inst).follow()));
            if inst.app == "notify" {
                let rx = shared.topic.subscribe(&inst.id, inst.color);
                tasks.push(tokio::spawn(Arc::clone(&inst).consume(rx)));
            }
            if inst.app == "settle" {
                tasks.push(tokio::spawn(Arc::clone(&inst).run_job()));
            }
        }
        Ok(Fleet {
            edge: Router::new(
                Arc::clone(&cache),
                Arc::clone(&registry),
                Balance::RoundRobin,
            ),
            shared,
            instances,
            stop_tx,
            tasks: Mutex::new(tasks),
            retired: Mutex::new(Vec::new()),
        })
    }

    /// The instances.
    pub fn instances(&self) -> &[Arc<Instance>] {
        &self.instances
    }

    /// Sends user requests to `gateway` at `rate × speed` per second until the fleet stops,
    /// pausing while [`Fleet::quiesce`] runs. The edge (like an ingress with the traffic
    /// SDK) decides the colour of the first channel entered. When more than `max_inflight`
    /// requests are outstanding it skips sending and, every 10 s of real time, says that the
    /// machine cannot keep up.
    pub fn spawn_load(self: &Arc<Self>, max_inflight: i64) {
        let me = Arc::clone(self);
        let task = tokio::spawn(async move {
            let rate = me.shared.config.rate * me.shared.config.speed;
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut stop = me.shared.stop.clone();
            let mut owed = 0.0f64;
            let mut last = Instant::now();
            let (mut sent, mut skipped) = (0u64, 0u64);
            let mut report_at = Instant::now() + Duration::from_secs(10);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.changed() => return,
                }
                let now = Instant::now();
                let dt = now.duration_since(last).as_secs_f64();
                last = now;
                if me.shared.paused.load(Ordering::SeqCst) {
                    owed = 0.0;
                    continue;
                }
                owed += dt * rate;
                while owed >= 1.0 {
                    owed -= 1.0;
                    if me.shared.inflight.load(Ordering::SeqCst) >= max_inflight {
                        skipped += 1;
                        continue;
                    }
                    sent += 1;
                    me.shared.inflight.fetch_add(1, Ordering::SeqCst);
                    let me2 = Arc::clone(&me);
                    tokio::spawn(async move {
                        me2.user_request().await;
                        me2.shared.inflight.fetch_sub(1, Ordering::SeqCst);
                    });
                }
                if now >= report_at {
                    if skipped > 0 {
                        eprintln!(
                            "dyeline demo: this machine cannot keep up at --speed {}: sent {sent} of {} requests in the last 10 s; windows hold fewer requests than at speed 1 (try a lower --speed)",
                            me.shared.config.speed,
                            sent + skipped
                        );
                    }
                    sent = 0;
                    skipped = 0;
                    report_at = now + Duration::from_secs(10);
                }
            }
        });
        self.tasks.lock().push(task);
    }

    async fn user_request(&self) {
        let mut decisions = dyeline_model::Decisions::default();
        let Ok(route) = self.edge.route("gateway", &mut decisions) else {
            return;
        };
        let cx = with_decisions(&Context::new(), &decisions);
        let headers = propagation::inject(&cx, true);
        self.shared
            .post(route.endpoint.addr, "checkout", &headers)
            .await;
    }

    /// Runs `op` with the fleet quiet: user requests pause, in-flight requests and messages
    /// finish, `op` runs, and requests resume once every app's cached configuration matches
    /// the control API (at most 10 s each wait). The script runs each release step inside it
    /// (see [`crate::script`] for why).
    pub async fn quiesce<T, F: Future<Output = T>>(&self, op: F) -> T {
        let t0 = Instant::now();
        self.shared.paused.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.shared.inflight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let drained_in = t0.elapsed();
        let out = op.await;
        let op_in = t0.elapsed();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.shared.cache.is_current().await.unwrap_or(false) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Instances learn from their own streams too; give them the same moment.
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.shared.paused.store(false, Ordering::SeqCst);
        tracing::info!(
            in_flight_done_ms = drained_in.as_millis() as u64,
            op_done_ms = op_in.as_millis() as u64,
            resumed_ms = t0.elapsed().as_millis() as u64,
            left_in_flight = self.shared.inflight.load(Ordering::SeqCst),
            "quiet step"
        );
        out
    }

    /// "Deploys" `version` to every `color` instance of `apps`: each gets a new tracer
    /// provider whose resource says the new `service.version` (the old one is flushed and
    /// shut down).
    ///
    /// # Errors
    /// An exporter that cannot be built.
    pub async fn deploy(&self, apps: &[&str], color: Color, version: &str) -> Result<(), BoxError> {
        for inst in self
            .instances
            .iter()
            .filter(|i| i.color == color && apps.contains(&i.app.as_str()))
        {
            let new = telemetry(
                self.shared.config.collector_grpc,
                &inst.app,
                &inst.id,
                version,
            )?;
            let old = std::mem::replace(&mut *inst.telemetry.write(), new);
            // The old provider keeps exporting what it still holds (spans in flight end on
            // it) and is shut down with the fleet: shutting it down now would block on a
            // loaded collector.
            self.retired.lock().push(old.provider);
        }
        Ok(())
    }

    /// MQ messages dropped because no consumer ran.
    pub fn dropped_messages(&self) -> u64 {
        self.shared.topic.dropped.load(Ordering::Relaxed)
    }

    /// Stops sending, stops every server and task, and flushes every tracer provider (their
    /// spans reach the collector before this returns).
    pub async fn shutdown(&self) {
        self.shared.paused.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.shared.inflight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = self.stop_tx.send(true);
        let tasks: Vec<JoinHandle<()>> = std::mem::take(&mut *self.tasks.lock());
        for t in tasks {
            t.abort();
            let _ = t.await;
        }
        let mut providers: Vec<SdkTracerProvider> = self
            .instances
            .iter()
            .map(|i| i.telemetry.read().provider.clone())
            .collect();
        providers.append(&mut self.retired.lock());
        let _ = tokio::task::spawn_blocking(move || {
            for p in providers {
                let _ = p.shutdown();
            }
        })
        .await;
    }

    /// Instances per app and colour, for the start-up message.
    pub fn summary(&self) -> String {
        let mut per: HashMap<&str, (u32, u32)> = HashMap::new();
        for i in &self.instances {
            let e = per.entry(i.app.as_str()).or_default();
            match i.color {
                Color::Blue => e.0 += 1,
                _ => e.1 += 1,
            }
        }
        APPS.iter()
            .map(|a| {
                let (b, g) = per.get(a).copied().unwrap_or_default();
                format!("{a} {b}b/{g}g")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}
