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
//!
//! Its parts, each below this face (which holds the [`Router`] that combines them):
//! - `routing/client.rs`: the control API client and its answer types;
//! - `routing/cache.rs`: the configuration cache fed by the apps' event streams (SSE);
//! - `routing/balance.rs`: smooth weighted round robin and the picker;
//! - `routing/decide.rs`: the colour decision, the pure core;
//! - `routing/propagation.rs`: W3C context and the decisions over HTTP headers;
//! - `routing/processor.rs`: the span processor copying decisions into span attributes;
//! - `routing/registry.rs`: service discovery; `routing/error.rs`: [`RouteError`].

mod balance;
mod cache;
mod client;
mod decide;
mod error;
mod processor;
pub mod propagation;
mod registry;

use std::collections::HashMap;
use std::sync::Arc;

use dyeline_model::{Color, Decisions};
use parking_lot::Mutex;

pub use balance::{Balance, Picker, SmoothWrr};
pub use cache::{CacheOptions, ConfigCache};
pub use client::{AppConfig, AppEvent, ControlClient};
pub use decide::decide_color;
pub use error::RouteError;
pub use processor::DecisionAttributeProcessor;
pub use propagation::{decisions_of, with_decisions};
pub use registry::{Endpoint, Registry};

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
