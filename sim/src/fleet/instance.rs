//! [`Instance`]: one running instance of the demo fleet (its HTTP server, tracer and meter
//! providers, own [`Router`], calls, MQ publishing and consuming, JOB, its reactions to its
//! app's events: the drained side stops its consumers and hands its JOB over unless a fault
//! says otherwise, and its death when killed), and the state all instances share. Requests
//! carry their lane: the gateway stains them, every instance reads the tag from the headers
//! ([`LaneReader`]) and calls on in it ([`Router::route_lane`]), unless a `lane-*` fault says
//! otherwise.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use dyeline_model::{Color, LaneId};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::SdkTracer;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, watch};

use super::config::{
    FleetConfig, GRAY_HEADER, GRAY_PER_20, GRAY2_PER_20, JOB_NAME, JOB_PERIOD_SECS, LEGACY_PROXY,
    LaneMarker, TOPIC, V2,
};
use super::mq::{ConsumerState, Message, Topic};
use super::telemetry::{Identity, Metrics, Telemetry};
use crate::routing::lane::HEADER_PREFIX;
use crate::routing::propagation::{self, Headers};
use crate::routing::{
    ConfigCache, Endpoint, LaneReader, Registry, Router, decisions_of, lane_of, with_decisions,
    with_lane,
};

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
    /// User requests the gateway took (its staining counts them).
    pub(super) requests: AtomicU64,
    /// Order events published.
    pub(super) publishes: AtomicU64,
    pub(super) lanes: Arc<LaneReader>,
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
    /// Colour (`unknown` for a lane instance: it is in neither cluster).
    pub color: Color,
    /// Lane (`base` for a production instance).
    pub lane: LaneId,
    /// Listening address.
    pub addr: SocketAddr,
    pub(super) marker: Option<LaneMarker>,
    pub(super) telemetry: RwLock<Telemetry>,
    pub(super) metrics: Mutex<Option<Metrics>>,
    pub(super) drained: AtomicBool,
    /// Killed: answers nothing, sends nothing.
    pub(super) killed: AtomicBool,
    pub(super) router: Router,
    pub(super) shared: Arc<Shared>,
}

fn attr(k: &'static str, v: impl Into<opentelemetry::Value>) -> KeyValue {
    KeyValue::new(k, v)
}

/// A captured HTTP request header as the OpenTelemetry conventions record it: attribute
/// `http.request.header.<name>`, an array of strings.
fn captured_header(name: &str, value: &str) -> KeyValue {
    KeyValue::new(
        format!("{HEADER_PREFIX}{name}"),
        Value::Array(Array::String(vec![StringValue::from(value.to_owned())])),
    )
}

impl Instance {
    fn tracer(&self) -> SdkTracer {
        self.telemetry.read().tracer.clone()
    }

    /// Who it is, as its resource says.
    pub(super) fn identity(&self) -> Identity<'_> {
        Identity {
            app: &self.app,
            instance: &self.id,
            lane: self.marker.map(|m| (self.lane.as_str(), m)),
        }
    }

    /// The version it runs.
    pub fn version(&self) -> String {
        self.telemetry.read().version.clone()
    }

    async fn handle(self: Arc<Self>, path: String, headers: Headers) -> u16 {
        if self.killed.load(Ordering::SeqCst) {
            return 503;
        }
        let legacy = self.app == LEGACY_PROXY;
        let parent = propagation::extract(&headers, !legacy);
        let tracer = self.tracer();
        let mut attrs = vec![
            attr("http.request.method", "POST"),
            attr("http.route", format!("/{path}")),
            attr("url.path", format!("/{path}")),
        ];
        if let Some(v) = headers.get(GRAY_HEADER) {
            attrs.push(captured_header(GRAY_HEADER, v));
        }
        let span = tracer
            .span_builder(format!("POST /{path}"))
            .with_kind(SpanKind::Server)
            .with_attributes(attrs)
            .start_with_context(&tracer, &parent);
        let cx = parent.with_span(span);
        // The tag travels on in baggage whatever carried it in (legacy-proxy has no lanes).
        let cx = if legacy {
            cx
        } else {
            with_lane(&cx, self.shared.lanes.read(&headers).as_ref())
        };
        tokio::time::sleep(Duration::from_micros(300)).await;
        let faults = self.shared.config.faults;
        let status = match (self.app.as_str(), path.as_str()) {
            ("gateway", "checkout") => self.stain_and_call(&cx).await,
            ("order", "checkout")
                if faults.lane_error_spike && !self.lane.is_base() && fastrand::f64() < 0.20 =>
            {
                500
            }
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

    /// The gateway (the lane group's entry app, APISIX in seed 001) stains a share of the
    /// user requests: `gray` by the header `gray: true`, `gray2` by the baggage member
    /// `x-deploy-lane`.
    async fn stain_and_call(&self, cx: &Context) -> u16 {
        let n = self.shared.requests.fetch_add(1, Ordering::Relaxed) % 20;
        if n < GRAY_PER_20 {
            self.call_with(cx, "order", "checkout", Some((GRAY_HEADER, "true")))
                .await
        } else if n < GRAY_PER_20 + GRAY2_PER_20 {
            let gray2 = LaneId::new("gray2").expect("a lane id");
            self.call(&with_lane(cx, Some(&gray2)), "order", "checkout")
                .await
        } else {
            self.call(cx, "order", "checkout").await
        }
    }

    async fn call(&self, cx: &Context, app: &str, path: &str) -> u16 {
        self.call_with(cx, app, path, None).await
    }

    /// Calls `app` in the request's lane (its baggage tag, else what `header` says) with its
    /// decisions, sending `header` too. Faults: `lane-tag-ignored` (payment → risk routes
    /// as untagged), `lane-pollution` (order → payment filters no lane).
    async fn call_with(
        &self,
        cx: &Context,
        app: &str,
        path: &str,
        header: Option<(&str, &str)>,
    ) -> u16 {
        let faults = self.shared.config.faults;
        let mut decisions = decisions_of(cx);
        let lane = lane_of(cx).or_else(|| {
            let (k, v) = header?;
            self.shared
                .lanes
                .read(&Headers::from([(k.to_owned(), v.to_owned())]))
        });
        let routed = if faults.lane_pollution && self.app == "order" && app == "payment" {
            self.router.route_unfiltered(app, &mut decisions)
        } else if faults.lane_tag_ignored && self.app == "payment" && app == "risk" {
            self.router.route(app, &mut decisions)
        } else {
            self.router.route_lane(app, &mut decisions, lane.as_ref())
        };
        let route = match routed {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(from = %self.id, error = %e, "no route");
                return 503;
            }
        };
        self.send(cx, &route.endpoint, path, Some(&decisions), header)
            .await
    }

    /// A node without the traffic SDK: any instance, evenly; no baggage.
    async fn legacy_call(&self, cx: &Context, app: &str, path: &str) -> u16 {
        let eps = self.shared.registry.endpoints(app);
        if eps.is_empty() {
            return 503;
        }
        let e = eps[fastrand::usize(..eps.len())].clone();
        self.send(cx, &e, path, None, None).await
    }

    async fn send(
        &self,
        cx: &Context,
        to: &Endpoint,
        path: &str,
        decisions: Option<&dyeline_model::Decisions>,
        header: Option<(&str, &str)>,
    ) -> u16 {
        let tracer = self.tracer();
        let mut attrs = vec![
            attr("http.request.method", "POST"),
            attr("server.address", to.addr.ip().to_string()),
            attr("server.port", i64::from(to.addr.port())),
            attr("peer.service", to.app.clone()),
        ];
        if let Some((k, v)) = header {
            attrs.push(captured_header(k, v));
        }
        let span = tracer
            .span_builder(format!("POST /{path}"))
            .with_kind(SpanKind::Client)
            .with_attributes(attrs)
            .start_with_context(&tracer, cx);
        let ccx = cx.with_span(span);
        let mut headers = match decisions {
            Some(d) => propagation::inject(&with_decisions(&ccx, d), true),
            None => propagation::inject(&ccx, false),
        };
        if let Some((k, v)) = header {
            headers.insert(k.to_owned(), v.to_owned());
        }
        let status = self.shared.post(to.addr, path, &headers).await;
        let span = ccx.span();
        span.set_attribute(attr("http.response.status_code", i64::from(status)));
        if status >= 500 {
            span.set_status(Status::error(format!("HTTP {status}")));
        }
        span.end();
        status
    }

    /// Publishes the order event. `lane-tag-dropped`: every other event is published from a
    /// thread pool that loses the lane context (the trace and the decisions survive).
    fn publish(&self, cx: &Context) {
        let n = self.shared.publishes.fetch_add(1, Ordering::Relaxed);
        let pooled;
        let cx = if self.shared.config.faults.lane_tag_dropped && n.is_multiple_of(2) {
            pooled = with_lane(cx, None);
            &pooled
        } else {
            cx
        };
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

    /// Kills it: out of service discovery, its consumer stopped, its server answering
    /// nothing, its SDKs flushed and shut down (their last export is its last signal).
    pub(super) async fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.shared.registry.deregister(&self.app, &self.id);
        self.shared
            .topic
            .set_state(&self.id, ConsumerState::Stopped);
        let provider = self.telemetry.read().provider.clone();
        let metrics = self.metrics.lock().take();
        let _ = tokio::task::spawn_blocking(move || {
            let _ = provider.shutdown();
            if let Some(m) = metrics {
                let _ = m.provider.shutdown();
            }
        })
        .await;
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
