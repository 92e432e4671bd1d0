//! A small colour-sticky routing library: what a traffic SDK does in each service of a
//! blue-green fleet (domain §2 and §5), written so a Rust service can adopt it.
//!
//! For every call into an app the caller asks a [`Router`] for an instance:
//!
//! 1. The app's **effective channel** (domain §4) comes from the control API
//!    (`GET /api/v1/apps/{app}/effective`) and is kept current by following the app's event
//!    stream (`GET /api/v1/apps/{app}/events/stream`, server-sent events); see [`ConfigCache`].
//! 2. The request's decisions are the W3C baggage entry `x-deploy-channel-type`
//!    (`trade=blue&pay=green`), read and written with `dyeline_model`'s codec
//!    ([`Decisions`]). When the target's channel is already decided, that colour is reused
//!    ("one blue to the end"); otherwise a colour is picked by the **instance weights the
//!    control API serves** for the channel (`GET /api/v1/channels/{id}/weights`, count-aware
//!    when [`CacheOptions::count_aware`] is set, so `nB·WB / (nB·WB + nG·WG)` equals
//!    blue_percent/100) and appended to the decisions, which the caller then sends on in its
//!    baggage ([`with_decisions`]).
//! 3. An instance of that colour is chosen ([`Balance`]: smooth weighted round robin, as
//!    Dubbo's `RoundRobinLoadBalance` and nginx do, or weighted random), weighted by each
//!    endpoint's registry factor.
//!
//! When the app follows no channel (no release), no decision is made and every instance takes
//! an even share (the neutral blue_percent 50 gives blue and green weight 100). When only one
//! colour is present, weights are ignored (domain §5).
//!
//! The pure core — [`decide_color`] and [`SmoothWrr`] — does no I/O and is what the tests
//! exercise; [`Router::route`] combines it with the [`Registry`] (service discovery) and the
//! [`ConfigCache`]. [`propagation`] carries the context (W3C `traceparent` + `baggage`) over
//! HTTP headers, and [`DecisionAttributeProcessor`] copies the decisions into span attributes
//! where the collector reads them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use dyeline_model::decision::BAGGAGE_KEY;
use dyeline_model::{Color, Decisions};
use opentelemetry::baggage::{Baggage, BaggageExt};
use opentelemetry::{Context, KeyValue};
use parking_lot::{Mutex, RwLock};
use serde::Deserialize;
use tokio::sync::{broadcast, watch};

/// Errors of the routing library.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// The registry lists no instance of the app.
    #[error("no instance of app {0:?} is registered")]
    NoInstance(String),
    /// Every instance of the app has weight 0.
    #[error("every instance of app {0:?} has weight 0")]
    AllZero(String),
    /// The control API could not be reached or answered an error.
    #[error("control API: {0}")]
    Control(String),
}

/// One instance of an app as service discovery lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The app (`service.name`).
    pub app: String,
    /// The instance id (`service.instance.id`).
    pub instance: String,
    /// Its colour (the cluster it runs in).
    pub color: Color,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its share among the instances of its colour, relative (usually 1). A registry entry
    /// left at a larger factor takes more than its share (domain §6.5 "instance skew").
    pub factor: u32,
}

/// Service discovery: app → its endpoints, in registration order.
#[derive(Default, Debug)]
pub struct Registry {
    apps: RwLock<HashMap<String, Vec<Endpoint>>>,
}

impl Registry {
    /// Adds (or replaces, by instance id) an endpoint.
    pub fn register(&self, e: Endpoint) {
        let mut apps = self.apps.write();
        let list = apps.entry(e.app.clone()).or_default();
        match list.iter_mut().find(|x| x.instance == e.instance) {
            Some(x) => *x = e,
            None => list.push(e),
        }
    }

    /// The endpoints of `app` (empty when none).
    pub fn endpoints(&self, app: &str) -> Vec<Endpoint> {
        self.apps.read().get(app).cloned().unwrap_or_default()
    }

    /// (blue, green) instance counts of `app`.
    pub fn counts(&self, app: &str) -> (u32, u32) {
        let apps = self.apps.read();
        let list = apps.get(app).map_or(&[][..], Vec::as_slice);
        let n = |c: Color| list.iter().filter(|e| e.color == c).count() as u32;
        (n(Color::Blue), n(Color::Green))
    }
}

/// An app's effective configuration as the SDK holds it (domain §4, §5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppConfig {
    /// The channel the app follows now; `None` outside a release.
    pub channel: Option<String>,
    /// That channel's blue_percent (50 when none).
    pub blue_percent: u8,
    /// Weight of each blue instance, as served by the control API.
    pub blue_weight: u32,
    /// Weight of each green instance.
    pub green_weight: u32,
    /// Sequence number of the newest control operation this reflects.
    pub seq: u64,
}

impl Default for AppConfig {
    fn default() -> Self {
        AppConfig {
            channel: None,
            blue_percent: 50,
            blue_weight: 100,
            green_weight: 100,
            seq: 0,
        }
    }
}

/// One event of an app's stream (domain §4), as the control API sends it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct AppEvent {
    /// `"<seq>.<n>"`.
    pub id: String,
    /// Operation sequence number.
    pub seq: u64,
    /// `start`, `finish`, `flow_change`, `enter_all_blue`, `exit_all_blue`,
    /// `enter_all_green`, `exit_all_green`.
    pub event: String,
    /// The channel it comes from.
    pub channel: String,
    /// Flow changes: blue_percent before.
    #[serde(default)]
    pub from: Option<u8>,
    /// Flow changes: blue_percent after.
    #[serde(default)]
    pub to: Option<u8>,
}

/// A client of the control API (read routes; the token is sent when given).
#[derive(Clone, Debug)]
pub struct ControlClient {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

#[derive(Deserialize)]
struct EffectiveBody {
    channel: Option<String>,
    blue_percent: u8,
    blue_weight: u32,
    green_weight: u32,
    seq: u64,
}

#[derive(Deserialize)]
struct WeightsBody {
    blue_weight: u32,
    green_weight: u32,
}

impl ControlClient {
    /// A client of the API at `base` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base: &str, token: Option<String>) -> Self {
        ControlClient {
            base: base.trim_end_matches('/').to_owned(),
            token,
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .unwrap_or_default(),
        }
    }

    /// The API base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        let r = self.http.get(format!("{}{path}", self.base));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    async fn json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, RouteError> {
        let resp = self
            .get(path)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| RouteError::Control(format!("GET {path}: {e}")))?;
        if !resp.status().is_success() {
            return Err(RouteError::Control(format!(
                "GET {path}: {}",
                resp.status()
            )));
        }
        resp.json()
            .await
            .map_err(|e| RouteError::Control(format!("GET {path}: {e}")))
    }

    /// The app's effective configuration now, with the weights the API serves for its
    /// channel: count-aware for `counts` = (blue, green) instances when given, else plain.
    ///
    /// # Errors
    /// [`RouteError::Control`] when the API cannot be reached or refuses.
    pub async fn app_config(
        &self,
        app: &str,
        counts: Option<(u32, u32)>,
    ) -> Result<AppConfig, RouteError> {
        let e: EffectiveBody = self.json(&format!("/api/v1/apps/{app}/effective")).await?;
        let mut cfg = AppConfig {
            channel: e.channel,
            blue_percent: e.blue_percent,
            blue_weight: e.blue_weight,
            green_weight: e.green_weight,
            seq: e.seq,
        };
        if let (Some(ch), Some((b, g))) = (&cfg.channel, counts) {
            let w: WeightsBody = self
                .json(&format!(
                    "/api/v1/channels/{ch}/weights?blue_instances={b}&green_instances={g}"
                ))
                .await?;
            cfg.blue_weight = w.blue_weight;
            cfg.green_weight = w.green_weight;
        }
        Ok(cfg)
    }

    /// Follows the app's event stream (SSE) after operation `after`, sending each event to
    /// `tx` until `stop` becomes true; reconnects with `Last-Event-ID` when the connection
    /// drops.
    pub async fn follow_events(
        &self,
        app: &str,
        after: u64,
        tx: tokio::sync::mpsc::UnboundedSender<AppEvent>,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut last_id = format!("{after}.{}", u32::MAX);
        loop {
            if *stop.borrow() {
                return;
            }
            let req = self
                .get(&format!("/api/v1/apps/{app}/events/stream"))
                .header("last-event-id", &last_id)
                .send();
            let resp = tokio::select! {
                r = req => r,
                _ = stop.changed() => return,
            };
            if let Ok(mut resp) = resp.and_then(|r| r.error_for_status()) {
                let mut buf = String::new();
                loop {
                    let chunk = tokio::select! {
                        c = resp.chunk() => c,
                        _ = stop.changed() => return,
                    };
                    let Ok(Some(bytes)) = chunk else { break };
                    buf.push_str(&String::from_utf8_lossy(&bytes));
                    while let Some(end) = buf.find("\n\n") {
                        let block: String = buf.drain(..end + 2).collect();
                        for line in block.lines() {
                            if let Some(data) = line.strip_prefix("data:")
                                && let Ok(ev) = serde_json::from_str::<AppEvent>(data.trim())
                            {
                                last_id = ev.id.clone();
                                if tx.send(ev).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = stop.changed() => return,
            }
        }
    }
}

/// Options of a [`ConfigCache`].
#[derive(Clone, Copy, Debug)]
pub struct CacheOptions {
    /// Ask the control API for count-aware weights (domain §5: `WB/WG = r/(100−r) · nG/nB`)
    /// using the registry's instance counts, so the blue share is exactly r whatever the
    /// cluster sizes. Without it the plain weights are used, and unequal cluster sizes skew
    /// the share to `nB·WB / (nB·WB + nG·WG)`.
    pub count_aware: bool,
}

struct Watched {
    config: watch::Sender<AppConfig>,
    events: broadcast::Sender<AppEvent>,
}

/// The effective configuration of the apps a process calls, kept current from the control
/// API: one watcher per app reads `GET …/effective` (and the channel's weights), then follows
/// the app's event stream and reads them again after each event. Subscribers get the events
/// too ([`ConfigCache::subscribe`]).
pub struct ConfigCache {
    control: ControlClient,
    registry: Arc<Registry>,
    options: CacheOptions,
    apps: Mutex<HashMap<String, Arc<Watched>>>,
    stop: watch::Receiver<bool>,
}

impl ConfigCache {
    /// A cache reading from `control`, instance counts from `registry`; its watchers end when
    /// `stop` becomes true.
    pub fn new(
        control: ControlClient,
        registry: Arc<Registry>,
        options: CacheOptions,
        stop: watch::Receiver<bool>,
    ) -> Arc<Self> {
        Arc::new(ConfigCache {
            control,
            registry,
            options,
            apps: Mutex::new(HashMap::new()),
            stop,
        })
    }

    /// The control API client.
    pub fn control(&self) -> &ControlClient {
        &self.control
    }

    /// Starts following `app` (once; later calls do nothing) and waits for its first
    /// configuration. Must run inside a tokio runtime.
    ///
    /// # Errors
    /// [`RouteError::Control`] when the first read fails.
    pub async fn watch(self: &Arc<Self>, app: &str) -> Result<(), RouteError> {
        if self.apps.lock().contains_key(app) {
            return Ok(());
        }
        let first = self.control.app_config(app, self.counts(app)).await?;
        let seq = first.seq;
        let (config, _) = watch::channel(first);
        let (events, _) = broadcast::channel(256);
        let w = Arc::new(Watched { config, events });
        {
            let mut apps = self.apps.lock();
            if apps.contains_key(app) {
                return Ok(());
            }
            apps.insert(app.to_owned(), Arc::clone(&w));
        }
        let me = Arc::clone(self);
        let app = app.to_owned();
        tokio::spawn(async move {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let follower = {
                let me = Arc::clone(&me);
                let app = app.clone();
                let stop = me.stop.clone();
                tokio::spawn(async move { me.control.follow_events(&app, seq, tx, stop).await })
            };
            while let Some(ev) = rx.recv().await {
                // Read the whole configuration again rather than folding events: the answer
                // also carries the weights, and a missed event cannot leave it stale.
                let mut tries = 0;
                loop {
                    match me.control.app_config(&app, me.counts(&app)).await {
                        Ok(c) => {
                            w.config.send_replace(c);
                            break;
                        }
                        Err(e) if tries < 20 => {
                            tries += 1;
                            tracing::debug!(app, error = %e, "re-reading the effective config");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        Err(e) => {
                            tracing::warn!(app, error = %e, "effective config not refreshed");
                            break;
                        }
                    }
                }
                let _ = w.events.send(ev);
            }
            follower.abort();
        });
        Ok(())
    }

    fn counts(&self, app: &str) -> Option<(u32, u32)> {
        self.options.count_aware.then(|| self.registry.counts(app))
    }

    /// The app's configuration now (the neutral default when it is not watched).
    pub fn get(&self, app: &str) -> AppConfig {
        self.apps
            .lock()
            .get(app)
            .map(|w| w.config.borrow().clone())
            .unwrap_or_default()
    }

    /// The app's events from now on (after its configuration was refreshed for each); `None`
    /// when the app is not watched.
    pub fn subscribe(&self, app: &str) -> Option<broadcast::Receiver<AppEvent>> {
        self.apps.lock().get(app).map(|w| w.events.subscribe())
    }

    /// Reads every watched app's configuration from the API now and replaces the cached
    /// one; returns whether all of them were already current.
    ///
    /// # Errors
    /// [`RouteError::Control`].
    pub async fn is_current(&self) -> Result<bool, RouteError> {
        let apps: Vec<(String, Arc<Watched>)> = self
            .apps
            .lock()
            .iter()
            .map(|(a, w)| (a.clone(), Arc::clone(w)))
            .collect();
        let mut current = true;
        for (app, w) in apps {
            let fresh = self.control.app_config(&app, self.counts(&app)).await?;
            let held = w.config.borrow().clone();
            if (held.channel.as_deref(), held.blue_percent)
                != (fresh.channel.as_deref(), fresh.blue_percent)
            {
                current = false;
            }
        }
        Ok(current)
    }
}

/// How an instance is picked among candidates of equal standing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Balance {
    /// Smooth weighted round robin (nginx, Dubbo `RoundRobinLoadBalance`): over any run of
    /// picks each candidate's share is within one pick of its weight's share.
    #[default]
    RoundRobin,
    /// Weighted random (Dubbo `RandomLoadBalance`).
    Random,
}

/// Smooth weighted round robin over a list of weights: each pick adds every weight to its
/// running value, picks the largest, and subtracts the total from it. Deterministic; a weight
/// of 0 is never picked. The state resets when the number of candidates changes.
#[derive(Clone, Debug, Default)]
pub struct SmoothWrr {
    current: Vec<i64>,
}

impl SmoothWrr {
    /// The index picked for `weights`, `None` when every weight is 0.
    pub fn pick(&mut self, weights: &[u64]) -> Option<usize> {
        let total: i64 = weights.iter().map(|&w| w as i64).sum();
        if total == 0 {
            return None;
        }
        if self.current.len() != weights.len() {
            self.current = vec![0; weights.len()];
        }
        let mut best = None::<usize>;
        for (i, &w) in weights.iter().enumerate() {
            if w == 0 {
                continue;
            }
            self.current[i] += w as i64;
            if best.is_none_or(|b| self.current[i] > self.current[b]) {
                best = Some(i);
            }
        }
        let b = best?;
        self.current[b] -= total;
        Some(b)
    }
}

/// A picker: [`Balance`] with its state.
#[derive(Clone, Debug, Default)]
pub struct Picker {
    balance: Balance,
    wrr: SmoothWrr,
}

impl Picker {
    /// A picker using `balance`.
    pub fn new(balance: Balance) -> Self {
        Picker {
            balance,
            wrr: SmoothWrr::default(),
        }
    }

    /// An index in `weights` chosen with probability (or, round robin, share) proportional to
    /// its weight; `None` when all are 0.
    pub fn pick(&mut self, weights: &[u64]) -> Option<usize> {
        match self.balance {
            Balance::RoundRobin => self.wrr.pick(weights),
            Balance::Random => {
                let total: u64 = weights.iter().sum();
                if total == 0 {
                    return None;
                }
                let mut x = fastrand::u64(0..total);
                weights.iter().position(|&w| {
                    if x < w {
                        true
                    } else {
                        x -= w;
                        false
                    }
                })
            }
        }
    }
}

/// The colour a call into an app goes to (domain §2, §5), recording a new decision in
/// `decisions`:
///
/// - the app follows no channel: `None` (no decision; any instance);
/// - `decisions` already holds one for the channel: that colour (sticky);
/// - only one colour has instances: that colour (weights ignored), recorded;
/// - otherwise blue with share `nB·WB / (nB·WB + nG·WG)` (WB, WG from `config`, nB, nG =
///   `counts`), picked by `picker`, recorded.
///
/// Returns `None` also when the app has no instance at all.
pub fn decide_color(
    config: &AppConfig,
    counts: (u32, u32),
    decisions: &mut Decisions,
    picker: &mut Picker,
) -> Option<Color> {
    let channel = config.channel.as_deref()?;
    if let Some(c) = decisions.get(channel) {
        return Some(c);
    }
    let (nb, ng) = counts;
    let color = match (nb, ng) {
        (0, 0) => return None,
        (_, 0) => Color::Blue,
        (0, _) => Color::Green,
        _ => {
            let w = [
                u64::from(nb) * u64::from(config.blue_weight),
                u64::from(ng) * u64::from(config.green_weight),
            ];
            // Both weights 0 cannot be served (domain §5 keeps one side at 100); fall back
            // to the count split rather than fail the request.
            let i = picker
                .pick(&w)
                .or_else(|| picker.pick(&[u64::from(nb), u64::from(ng)]))?;
            if i == 0 { Color::Blue } else { Color::Green }
        }
    };
    decisions.insert(channel, color);
    Some(color)
}

/// Where a call goes and what was decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The chosen instance.
    pub endpoint: Endpoint,
    /// The target app's effective channel.
    pub channel: Option<String>,
    /// The colour chosen for it (`None` outside a release).
    pub color: Option<Color>,
}

/// A caller's router: [`decide_color`] over the [`ConfigCache`], then an instance of that
/// colour from the [`Registry`]. Each calling process holds its own (its balancing state is
/// its own, as with a real client-side load balancer).
pub struct Router {
    cache: Arc<ConfigCache>,
    registry: Arc<Registry>,
    balance: Balance,
    pickers: Mutex<HashMap<(String, u8), Picker>>,
}

impl Router {
    /// A router over `cache` and `registry`.
    pub fn new(cache: Arc<ConfigCache>, registry: Arc<Registry>, balance: Balance) -> Self {
        Router {
            cache,
            registry,
            balance,
            pickers: Mutex::new(HashMap::new()),
        }
    }

    /// The configuration cache.
    pub fn cache(&self) -> &Arc<ConfigCache> {
        &self.cache
    }

    /// Routes a call into `app`: decides (or reuses) the colour for the app's effective
    /// channel, appending a new decision to `decisions`, and picks an instance of that colour
    /// (any instance outside a release, or when the colour has none).
    ///
    /// # Errors
    /// [`RouteError::NoInstance`] when the registry lists none; [`RouteError::AllZero`] when
    /// every candidate has factor 0.
    pub fn route(&self, app: &str, decisions: &mut Decisions) -> Result<Route, RouteError> {
        let endpoints = self.registry.endpoints(app);
        if endpoints.is_empty() {
            return Err(RouteError::NoInstance(app.to_owned()));
        }
        let config = self.cache.get(app);
        let counts = self.registry.counts(app);
        let mut pickers = self.pickers.lock();
        let color = {
            let p = pickers
                .entry((app.to_owned(), 255))
                .or_insert_with(|| Picker::new(self.balance));
            decide_color(&config, counts, decisions, p)
        };
        let candidates: Vec<&Endpoint> = match color {
            Some(c) if endpoints.iter().any(|e| e.color == c) => {
                endpoints.iter().filter(|e| e.color == c).collect()
            }
            _ => endpoints.iter().collect(),
        };
        let key = (app.to_owned(), color.map_or(254, |c| c as u8));
        let p = pickers
            .entry(key)
            .or_insert_with(|| Picker::new(self.balance));
        let weights: Vec<u64> = candidates.iter().map(|e| u64::from(e.factor)).collect();
        let i = p
            .pick(&weights)
            .ok_or_else(|| RouteError::AllZero(app.to_owned()))?;
        Ok(Route {
            endpoint: candidates[i].clone(),
            channel: config.channel,
            color,
        })
    }
}

/// The decisions in `cx`'s baggage (empty when it carries none).
pub fn decisions_of(cx: &Context) -> Decisions {
    cx.baggage()
        .get(BAGGAGE_KEY)
        .map(|v| Decisions::parse(v.as_str()))
        .unwrap_or_default()
}

/// `cx` with its baggage entry `x-deploy-channel-type` set to `decisions` (other baggage
/// kept; the entry removed when there is no decision).
pub fn with_decisions(cx: &Context, decisions: &Decisions) -> Context {
    let mut b: Baggage = cx
        .baggage()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if decisions.is_empty() {
        b.remove(BAGGAGE_KEY);
    } else {
        b.insert(BAGGAGE_KEY, decisions.encode());
    }
    cx.with_baggage(b)
}

/// W3C context over HTTP headers: `traceparent`/`tracestate` ([`TraceContextPropagator`]) and
/// `baggage` ([`BaggagePropagator`]).
///
/// [`TraceContextPropagator`]: opentelemetry_sdk::propagation::TraceContextPropagator
/// [`BaggagePropagator`]: opentelemetry_sdk::propagation::BaggagePropagator
pub mod propagation {
    use std::collections::HashMap;

    use opentelemetry::Context;
    use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
    use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};

    /// Headers as lower-case name → value.
    pub type Headers = HashMap<String, String>;

    struct Map<'a>(&'a mut Headers);
    impl Injector for Map<'_> {
        fn set(&mut self, key: &str, value: String) {
            self.0.insert(key.to_ascii_lowercase(), value);
        }
    }
    struct Read<'a>(&'a Headers);
    impl Extractor for Read<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            self.0.get(&key.to_ascii_lowercase()).map(String::as_str)
        }
        fn keys(&self) -> Vec<&str> {
            self.0.keys().map(String::as_str).collect()
        }
    }

    /// The headers carrying `cx`: `traceparent` (and `tracestate`), plus `baggage` when
    /// `with_baggage` (a node that does not propagate baggage passes false).
    pub fn inject(cx: &Context, with_baggage: bool) -> Headers {
        let mut h = Headers::new();
        TraceContextPropagator::new().inject_context(cx, &mut Map(&mut h));
        if with_baggage {
            BaggagePropagator::new().inject_context(cx, &mut Map(&mut h));
        }
        h
    }

    /// The context in `headers`: the remote parent span and, when `with_baggage`, the
    /// baggage.
    pub fn extract(headers: &Headers, with_baggage: bool) -> Context {
        let cx = TraceContextPropagator::new().extract(&Read(headers));
        if with_baggage {
            BaggagePropagator::new().extract_with_context(&cx, &Read(headers))
        } else {
            cx
        }
    }

    /// Lower-cased copy of an HTTP header map (non-text values skipped).
    pub fn from_http(map: &http::HeaderMap) -> Headers {
        map.iter()
            .filter_map(|(k, v)| {
                Some((k.as_str().to_ascii_lowercase(), v.to_str().ok()?.to_owned()))
            })
            .collect()
    }
}

/// A span processor that copies the baggage entry `x-deploy-channel-type` of the context a
/// span starts in into the span attribute of the same name, where the collector reads the
/// decisions (domain §2, first source).
#[derive(Debug, Default)]
pub struct DecisionAttributeProcessor;

impl opentelemetry_sdk::trace::SpanProcessor for DecisionAttributeProcessor {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &Context) {
        use opentelemetry::trace::Span as _;
        if let Some(v) = cx.baggage().get(BAGGAGE_KEY) {
            span.set_attribute(KeyValue::new(BAGGAGE_KEY, v.as_str().to_owned()));
        }
    }

    fn on_end(&self, _span: opentelemetry_sdk::trace::SpanData) {}

    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> opentelemetry_sdk::error::OTelSdkResult {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cfg(channel: Option<&str>, r: u8, counts: (u32, u32)) -> AppConfig {
        let w = dyeline_model::weights::count_aware_weights(r, counts.0, counts.1).unwrap();
        AppConfig {
            channel: channel.map(str::to_owned),
            blue_percent: r,
            blue_weight: w.blue_weight,
            green_weight: w.green_weight,
            seq: 1,
        }
    }

    #[test]
    fn no_channel_no_decision() {
        let mut d = Decisions::default();
        let c = decide_color(
            &cfg(None, 50, (2, 2)),
            (2, 2),
            &mut d,
            &mut Picker::default(),
        );
        assert_eq!(c, None);
        assert!(d.is_empty());
    }

    #[test]
    fn one_colour_present_ignores_weights() {
        let mut d = Decisions::default();
        let c = decide_color(
            &cfg(Some("t"), 0, (3, 0)),
            (3, 0),
            &mut d,
            &mut Picker::default(),
        );
        assert_eq!(c, Some(Color::Blue));
        assert_eq!(d.encode(), "t=blue");
    }

    #[test]
    fn drained_side_is_never_chosen_for_new_requests() {
        let mut p = Picker::default();
        for _ in 0..1000 {
            let mut d = Decisions::default();
            let c = decide_color(&cfg(Some("t"), 0, (2, 2)), (2, 2), &mut d, &mut p);
            assert_eq!(c, Some(Color::Green));
        }
    }

    #[test]
    fn plain_weights_with_unequal_clusters_miss_r_and_count_aware_hit_it() {
        // r = 50 with 1 blue and 3 green: plain weights give 1·100 / (1·100 + 3·100) = 25 %.
        let plain = AppConfig {
            channel: Some("t".into()),
            blue_percent: 50,
            blue_weight: 100,
            green_weight: 100,
            seq: 1,
        };
        let share = |c: &AppConfig| {
            let mut p = Picker::default();
            let blue = (0..4000)
                .filter(|_| {
                    let mut d = Decisions::default();
                    decide_color(c, (1, 3), &mut d, &mut p) == Some(Color::Blue)
                })
                .count();
            blue as f64 / 4000.0
        };
        assert!((share(&plain) - 0.25).abs() < 0.001);
        assert!((share(&cfg(Some("t"), 50, (1, 3))) - 0.5).abs() < 0.01);
    }

    #[test]
    fn smooth_wrr_interleaves() {
        let mut w = SmoothWrr::default();
        let picks: Vec<usize> = (0..7).map(|_| w.pick(&[5, 1, 1]).unwrap()).collect();
        assert_eq!(picks, [0, 0, 1, 0, 2, 0, 0]);
        assert_eq!(w.pick(&[0, 0]), None);
    }

    #[test]
    fn baggage_round_trip_through_headers() {
        let mut d = Decisions::default();
        d.insert("trade", Color::Blue);
        d.insert("pay", Color::Green);
        let cx = with_decisions(&Context::new(), &d);
        let h = propagation::inject(&cx, true);
        let back = propagation::extract(&h, true);
        assert_eq!(decisions_of(&back).encode(), "trade=blue&pay=green");
        let dropped = propagation::extract(&propagation::inject(&cx, false), true);
        assert!(decisions_of(&dropped).is_empty());
    }

    proptest! {
        /// Once a channel is decided, every later call into it (through any other channels,
        /// at any ratio) reuses the first colour, and other decisions are kept.
        #[test]
        fn decisions_are_sticky(
            calls in proptest::collection::vec((0usize..3, 0u8..=100, 0u32..4, 0u32..4), 1..40),
            random in any::<bool>(),
        ) {
            let channels = ["trade", "pay", "global"];
            let mut p = Picker::new(if random { Balance::Random } else { Balance::RoundRobin });
            let mut d = Decisions::default();
            let mut first: HashMap<&str, Color> = HashMap::new();
            for (ch, r, nb, ng) in calls {
                let c = cfg(Some(channels[ch]), r, (nb, ng));
                let got = decide_color(&c, (nb, ng), &mut d, &mut p);
                if let Some(col) = got {
                    let kept = *first.entry(channels[ch]).or_insert(col);
                    prop_assert_eq!(col, kept);
                }
                for (k, v) in &first {
                    prop_assert_eq!(d.get(k), Some(*v));
                }
            }
        }

        /// Fresh requests go blue with share r (count-aware weights, any cluster sizes):
        /// round robin within one pick's granularity per 100, random within 5 standard errors.
        #[test]
        fn weights_are_respected(r in 0u8..=100, nb in 1u32..5, ng in 1u32..5, random in any::<bool>()) {
            let c = cfg(Some("trade"), r, (nb, ng));
            let mut p = Picker::new(if random { Balance::Random } else { Balance::RoundRobin });
            let n = 4000u32;
            let blue = (0..n).filter(|_| {
                let mut d = Decisions::default();
                decide_color(&c, (nb, ng), &mut d, &mut p) == Some(Color::Blue)
            }).count() as f64 / f64::from(n);
            // The share the served integer weights imply (domain §5 rounds them; r itself
            // is the API's concern and tested there).
            let wb = f64::from(nb) * f64::from(c.blue_weight);
            let wg = f64::from(ng) * f64::from(c.green_weight);
            let implied = wb / (wb + wg);
            let tol = if random {
                5.0 * (implied * (1.0 - implied) / f64::from(n)).sqrt() + 1e-9
            } else {
                2.0 / f64::from(n)
            };
            prop_assert!((blue - implied).abs() <= tol, "share {blue} implied {implied}");
        }
    }
}
