//! [`Instance`]: one running instance of the demo fleet (its HTTP server, tracer provider,
//! own [`Router`], calls, MQ publishing and consuming, JOB, and its reactions to its app's
//! events: the drained side stops its consumers and hands its JOB over unless a fault says
//! otherwise), and the state all instances share.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use dyeline_model::Color;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracer;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, watch};

use super::config::{FleetConfig, JOB_NAME, JOB_PERIOD_SECS, LEGACY_PROXY, TOPIC, V2};
use super::mq::{ConsumerState, Message, Topic};
use super::telemetry::Telemetry;
use crate::routing::propagation::{self, Headers};
use crate::routing::{ConfigCache, Endpoint, Registry, Router, decisions_of, with_decisions};

/// What the instances and the fleet share: the configuration, service discovery, the
/// configuration cache, the HTTP client, the topic, the JOB's owner and the load's counters.
pub(super) struct Shared {
    pub(super) config: FleetConfig,
    pub(super) registry: Arc<Registry>,
    pub(super) cache: Arc<ConfigCache>,
    pub(super) http: reqwest::Client,
    pub(super) topic: Topic,
    pub(super) job_owner: Mutex<String>,
    pub(super) inflight: AtomicI64,
    pub(super) paused: AtomicBool,
    pub(super) orders: AtomicU64,
    pub(super) stop: watch::Receiver<bool>,
}

impl Shared {
    pub(super) async fn post(&self, addr: SocketAddr, path: &str, headers: &Headers) -> u16 {
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
    pub(super) telemetry: RwLock<Telemetry>,
    pub(super) drained: AtomicBool,
    pub(super) router: Router,
    pub(super) shared: Arc<Shared>,
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

    pub(super) async fn consume(self: Arc<Self>, mut rx: mpsc::UnboundedReceiver<Message>) {
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

    pub(super) async fn run_job(self: Arc<Self>) {
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
    pub(super) async fn follow(self: Arc<Self>) {
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

/// Serves `inst`'s HTTP routes on `listener` until `stop` becomes true.
pub(super) async fn serve_instance(
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
