//! The demo fleet: eight apps, each with blue and green instances, and a gray release beside
//! the blue-green one, instrumented with the real OpenTelemetry SDK and calling one another
//! over real HTTP on loopback.
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
//! - The gray release (domain §7): lane instances ([`LANE_INSTANCES`], of no colour, marked
//!   by Nacos metadata or `deploy.lane`) in lane group [`LANE_GROUP`]; the gateway stains a
//!   share of the user requests (`gray: true`, or `x-deploy-lane=gray2` in baggage); every
//!   hop routes in the request's lane with the fallbacks of the lane groups the control API
//!   holds at start ([`Router::route_lane`]); notify
//!   has a gray consumer group. Every instance also exports metrics every
//!   [`FleetConfig::metrics_interval`], which keeps idle instances present; a killed instance
//!   ([`Fleet::kill`]) stops both.
//!
//! The face of the fleet ([`Fleet`]: start, load, quiet steps, deploys, shutdown) over its
//! parts: `fleet/config.rs` (apps, channels, versions, cluster sizes, [`FleetConfig`]),
//! `fleet/faults.rs`, `fleet/mq.rs` ([`Topic`]), `fleet/telemetry.rs` (each instance's SDK),
//! `fleet/instance.rs` ([`Instance`]) and `fleet/error.rs` ([`FleetError`]).
//!
//! [`DecisionAttributeProcessor`]: crate::routing::DecisionAttributeProcessor
//! [`Router`]: crate::routing::Router
//! [`Router::route_lane`]: crate::routing::Router::route_lane

// The demo tells its user on stderr when the machine cannot keep up with --speed.
#![allow(clippy::print_stderr)]

mod config;
mod error;
mod faults;
mod instance;
mod mq;
mod telemetry;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dyeline_model::{Color, LaneId};
use opentelemetry::Context;
use opentelemetry_sdk::trace::SdkTracerProvider;
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use config::{
    APPS, FleetConfig, GRAY_HEADER, GRAY_PER_20, GRAY2_PER_20, JOB_NAME, JOB_PERIOD_SECS,
    KILLED_INSTANCE, LANE_APPS, LANE_ENTRY_APP, LANE_GROUP, LANE_INSTANCES,
    LANE_SPIKE_MIN_REQUESTS, LANES, LANES_TOML, LEGACY_PROXY, LaneMarker, PAY_APPS, TOPIC,
    TRADE_APPS, V1, V2, cluster_sizes,
};
pub use error::FleetError;
pub use faults::Faults;
pub use instance::Instance;
pub use mq::{ConsumerState, Topic};

use instance::{Shared, serve_instance};
use telemetry::{Identity, metrics, telemetry};

use crate::routing::propagation;
use crate::routing::{
    Balance, CacheOptions, ConfigCache, ControlClient, Endpoint, LaneReader, Registry, Router,
    with_decisions,
};

/// The running fleet.
pub struct Fleet {
    shared: Arc<Shared>,
    instances: Vec<Arc<Instance>>,
    edge: Router,
    stop_tx: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    retired: Mutex<Vec<SdkTracerProvider>>,
}

impl Fleet {
    /// Starts every instance (servers, tracer providers, event followers, consumers, the
    /// JOB) and the caches' watchers. Must run inside a tokio runtime.
    ///
    /// # Errors
    /// A port that cannot be bound, an exporter that cannot be built, a control API that
    /// cannot be read, a lane carrier Dyeline would refuse.
    pub async fn start(config: FleetConfig) -> Result<Self, FleetError> {
        let lanes = Arc::new(
            LaneReader::new(&config.lane_carriers).map_err(|e| FleetError::Lanes(e.to_string()))?,
        );
        let (stop_tx, stop) = watch::channel(false);
        let registry = Arc::new(Registry::default());
        let control = ControlClient::new(&config.control, config.token.clone());
        let lane_policies = control.lane_policies().await?;
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
            topic: Topic::new(
                "notify",
                Arc::clone(&cache),
                Arc::clone(&lanes),
                config.faults.lane_mq_leak,
            ),
            job_owner: Mutex::new("settle-blue-1".into()),
            inflight: AtomicI64::new(0),
            paused: AtomicBool::new(false),
            orders: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            publishes: AtomicU64::new(0),
            lanes,
            stop: stop.clone(),
            registry: Arc::clone(&registry),
            cache: Arc::clone(&cache),
            config,
        });
        // (app, colour, lane, marker, instance id, registry factor)
        type Member = (&'static str, Color, LaneId, Option<LaneMarker>, String, u32);
        let mut members: Vec<Member> = Vec::new();
        for (app, nb, ng) in cluster_sizes(&shared.config.faults) {
            for (color, n) in [(Color::Blue, nb), (Color::Green, ng)] {
                for k in 1..=n {
                    let skewed = shared.config.faults.instance_skew && app == "risk" && k == 1;
                    let id = format!("{app}-{}-{k}", color.as_str());
                    members.push((
                        app,
                        color,
                        LaneId::base(),
                        None,
                        id,
                        if skewed { 8 } else { 1 },
                    ));
                }
            }
        }
        for (app, lane, marker) in LANE_INSTANCES {
            let lane = LaneId::new(lane).expect("a lane id");
            let id = format!("{app}-{}-1", lane.as_str());
            members.push((app, Color::Unknown, lane, Some(marker), id, 1));
        }
        let mut instances = Vec::new();
        let mut listeners = Vec::new();
        for (app, color, lane, marker, id, factor) in members {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?;
            registry.register(Endpoint {
                app: app.to_owned(),
                instance: id.clone(),
                color,
                lane: lane.clone(),
                addr,
                factor,
            });
            let who = Identity {
                app,
                instance: &id,
                lane: marker.map(|m| (lane.as_str(), m)),
            };
            let collector = shared.config.collector_grpc;
            let inst = Arc::new(Instance {
                app: app.to_owned(),
                color,
                addr,
                telemetry: RwLock::new(telemetry(collector, who, V1)?),
                metrics: Mutex::new(Some(metrics(
                    collector,
                    who,
                    shared.config.metrics_interval,
                )?)),
                marker,
                lane,
                id,
                drained: AtomicBool::new(false),
                killed: AtomicBool::new(false),
                router: Router::new(
                    Arc::clone(&cache),
                    Arc::clone(&registry),
                    Balance::RoundRobin,
                )
                .with_lane_policies(lane_policies.clone()),
                shared: Arc::clone(&shared),
            });
            listeners.push((Arc::clone(&inst), listener));
            instances.push(inst);
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
                let rx = shared
                    .topic
                    .subscribe(&inst.id, inst.color, inst.lane.clone());
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
    pub async fn deploy(
        &self,
        apps: &[&str],
        color: Color,
        version: &str,
    ) -> Result<(), FleetError> {
        for inst in self
            .instances
            .iter()
            .filter(|i| i.color == color && apps.contains(&i.app.as_str()))
        {
            let new = telemetry(self.shared.config.collector_grpc, inst.identity(), version)?;
            let old = std::mem::replace(&mut *inst.telemetry.write(), new);
            // The old provider keeps exporting what it still holds (spans in flight end on
            // it) and is shut down with the fleet: shutting it down now would block on a
            // loaded collector.
            self.retired.lock().push(old.provider);
        }
        Ok(())
    }

    /// The faults on.
    pub fn faults(&self) -> Faults {
        self.shared.config.faults
    }

    /// Kills `instance` with the fleet quiet ([`Fleet::quiesce`]): no request is in flight
    /// when it leaves service discovery and sends its last spans and metrics, so every later
    /// request finds it gone. False when no such live instance exists.
    pub async fn kill(&self, instance: &str) -> bool {
        let Some(inst) = self
            .instances
            .iter()
            .find(|i| i.id == instance && !i.killed.load(Ordering::SeqCst))
        else {
            return false;
        };
        self.quiesce(inst.kill()).await;
        true
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
        let live = self
            .instances
            .iter()
            .filter(|i| !i.killed.load(Ordering::SeqCst));
        let mut providers: Vec<SdkTracerProvider> = live
            .clone()
            .map(|i| i.telemetry.read().provider.clone())
            .collect();
        providers.append(&mut self.retired.lock());
        let meters: Vec<_> = live.filter_map(|i| i.metrics.lock().take()).collect();
        let _ = tokio::task::spawn_blocking(move || {
            for p in providers {
                let _ = p.shutdown();
            }
            for m in meters {
                let _ = m.provider.shutdown();
            }
        })
        .await;
    }

    /// Instances per app and colour, and the lane instances, for the start-up message
    /// (`order 2b/2g+gray+gray2`).
    pub fn summary(&self) -> String {
        let mut per: HashMap<&str, (u32, u32, Vec<&str>)> = HashMap::new();
        for i in &self.instances {
            let e = per.entry(i.app.as_str()).or_default();
            match (i.lane.is_base(), i.color) {
                (false, _) => e.2.push(i.lane.as_str()),
                (true, Color::Blue) => e.0 += 1,
                (true, _) => e.1 += 1,
            }
        }
        APPS.iter()
            .map(|a| {
                let (b, g, lanes) = per.get(a).cloned().unwrap_or_default();
                let lanes: String = lanes.iter().map(|l| format!("+{l}")).collect();
                format!("{a} {b}b/{g}g{lanes}")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}
