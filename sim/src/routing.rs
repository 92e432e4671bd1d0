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
//! Lanes (domain §7) come before colours: [`Router::route_lane`] first keeps the instances
//! of the request's lane (or base, falling back to base when the lane has none:
//! [`lane_candidates`]), then the colour's among them. Lane instances are usually in neither
//! colour cluster (`unknown`): the colour filter keeps them, so a gray request is served by
//! its lane whatever colour was decided, and the decision still travels on for the next
//! channel. [`lane`] reads the tag ([`LaneReader`]), carries it on ([`with_lane`]) and picks
//! MQ consumer groups per lane ([`consumer_lane`]).
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
//! - `routing/lane.rs`: lanes: the tag's carriers, the lane's instances, MQ groups per lane;
//! - `routing/propagation.rs`: W3C context and the decisions over HTTP headers;
//! - `routing/processor.rs`: the span processor copying decisions into span attributes;
//! - `routing/registry.rs`: service discovery; `routing/error.rs`: [`RouteError`].

mod balance;
mod cache;
mod client;
mod decide;
mod error;
pub mod lane;
mod processor;
pub mod propagation;
mod registry;

use std::collections::HashMap;
use std::sync::Arc;

use dyeline_model::{Color, Decisions, LaneId};
use parking_lot::Mutex;

pub use balance::{Balance, Picker, SmoothWrr};
pub use cache::{CacheOptions, ConfigCache};
pub use client::{AppConfig, AppEvent, ControlClient};
pub use decide::decide_color;
pub use error::RouteError;
pub use lane::{
    LaneOutcome, LanePolicies, LanePolicy, LaneReader, consumer_group, consumer_lane,
    lane_candidates, lane_of, with_lane,
};
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
    /// How the request's lane was served.
    pub lane: LaneOutcome,
}

/// Which instances the lane stage keeps.
#[derive(Clone, Copy, Debug)]
enum LaneSelect<'a> {
    /// The request's lane, with the fallbacks of [`lane_candidates`].
    Tag(Option<&'a LaneId>),
    /// Every instance whatever its lane.
    Any,
}

/// A caller's router: [`decide_color`] over the [`ConfigCache`], then an instance of that
/// colour from the [`Registry`]. Each calling process holds its own (its balancing state is
/// its own, as with a real client-side load balancer).
pub struct Router {
    cache: Arc<ConfigCache>,
    registry: Arc<Registry>,
    balance: Balance,
    lanes: LanePolicies,
    pickers: Mutex<HashMap<(String, String, u8), Picker>>,
}

impl Router {
    /// A router over `cache` and `registry`.
    pub fn new(cache: Arc<ConfigCache>, registry: Arc<Registry>, balance: Balance) -> Self {
        Router {
            cache,
            registry,
            balance,
            lanes: LanePolicies::default(),
            pickers: Mutex::new(HashMap::new()),
        }
    }

    /// The same router with each app's lane fallbacks of `policies` (default: every lane
    /// falls back to base, no reverse fallback; [`ControlClient::lane_policies`] reads the
    /// lane groups' own).
    #[must_use]
    pub fn with_lane_policies(mut self, policies: LanePolicies) -> Self {
        self.lanes = policies;
        self
    }

    /// The configuration cache.
    pub fn cache(&self) -> &Arc<ConfigCache> {
        &self.cache
    }

    /// Routes an untagged call into `app` (to base instances): [`Router::route_lane`] with
    /// no tag.
    ///
    /// # Errors
    /// As [`Router::route_lane`].
    pub fn route(&self, app: &str, decisions: &mut Decisions) -> Result<Route, RouteError> {
        self.route_among(app, decisions, LaneSelect::Tag(None))
    }

    /// Routes a call into `app` for a request tagged `lane` (`None`: untagged): keeps the
    /// instances of the lane, or of base when the app has none of it ([`lane_candidates`]);
    /// decides (or reuses) the colour for the app's effective channel, appending a new
    /// decision to `decisions`; and picks an instance of that colour among them (any of them
    /// outside a release, or when the colour has none; instances of no colour are kept).
    ///
    /// # Errors
    /// [`RouteError::NoInstance`] when the registry lists none; [`RouteError::NoLaneInstance`]
    /// when the lane stage leaves none (a strict lane without an instance, or base traffic
    /// with only lane instances and no reverse fallback); [`RouteError::AllZero`] when every
    /// candidate has factor 0.
    pub fn route_lane(
        &self,
        app: &str,
        decisions: &mut Decisions,
        lane: Option<&LaneId>,
    ) -> Result<Route, RouteError> {
        self.route_among(app, decisions, LaneSelect::Tag(lane))
    }

    /// Routes a call into `app` over every instance whatever its lane, as a balancer that
    /// filters nothing does (seed 001's `GrayNacosLoadBalancer` with a blank cluster name):
    /// base traffic reaches lane instances and tagged traffic leaves its lane. What the demo's
    /// `lane-pollution` fault runs; no adopter should.
    ///
    /// # Errors
    /// As [`Router::route_lane`].
    pub fn route_unfiltered(
        &self,
        app: &str,
        decisions: &mut Decisions,
    ) -> Result<Route, RouteError> {
        self.route_among(app, decisions, LaneSelect::Any)
    }

    fn route_among(
        &self,
        app: &str,
        decisions: &mut Decisions,
        select: LaneSelect<'_>,
    ) -> Result<Route, RouteError> {
        let endpoints = self.registry.endpoints(app);
        if endpoints.is_empty() {
            return Err(RouteError::NoInstance(app.to_owned()));
        }
        let (outcome, in_lane) = match select {
            LaneSelect::Tag(tag) => lane_candidates(tag, &endpoints, self.lanes.of(app))
                .ok_or_else(|| RouteError::NoLaneInstance {
                    app: app.to_owned(),
                    lane: tag.map_or_else(|| LaneId::BASE.to_owned(), |l| l.as_str().to_owned()),
                })?,
            LaneSelect::Any => (LaneOutcome::Unfiltered, endpoints.iter().collect()),
        };
        let config = self.cache.get(app);
        let counts = self.registry.counts(app);
        let mut pickers = self.pickers.lock();
        let color = {
            let p = pickers
                .entry((app.to_owned(), String::new(), 255))
                .or_insert_with(|| Picker::new(self.balance));
            decide_color(&config, counts, decisions, p)
        };
        let candidates: Vec<&Endpoint> = match color {
            Some(c) if in_lane.iter().any(|e| e.color == c) => in_lane
                .into_iter()
                .filter(|e| e.color == c || e.color == Color::Unknown)
                .collect(),
            _ => in_lane,
        };
        let lane_key = candidates
            .first()
            .map_or_else(String::new, |e| e.lane.as_str().to_owned());
        let key = (
            app.to_owned(),
            if matches!(outcome, LaneOutcome::Unfiltered) {
                "*".to_owned()
            } else {
                lane_key
            },
            color.map_or(254, |c| c as u8),
        );
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
            lane: outcome,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use tokio::sync::watch;

    fn lane(s: &str) -> LaneId {
        LaneId::new(s).unwrap()
    }

    /// A router over `order`: blue-1, green-1 (base) and gray-1 (no colour), outside any
    /// release (an unwatched cache answers the neutral configuration).
    fn router() -> (Router, Arc<Registry>) {
        let registry = Arc::new(Registry::default());
        for (instance, color, l) in [
            ("order-blue-1", Color::Blue, "base"),
            ("order-green-1", Color::Green, "base"),
            ("order-gray-1", Color::Unknown, "gray"),
        ] {
            registry.register(Endpoint {
                app: "order".into(),
                instance: instance.into(),
                color,
                lane: lane(l),
                addr: ([127, 0, 0, 1], 1).into(),
                factor: 1,
            });
        }
        let (_tx, stop) = watch::channel(false);
        let cache = ConfigCache::new(
            ControlClient::new("http://127.0.0.1:9", None),
            Arc::clone(&registry),
            CacheOptions { count_aware: true },
            stop,
        );
        (
            Router::new(cache, Arc::clone(&registry), Balance::RoundRobin),
            registry,
        )
    }

    fn served(
        r: &Router,
        n: usize,
        mut f: impl FnMut(&Router) -> Route,
    ) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for _ in 0..n {
            *m.entry(f(r).endpoint.instance).or_default() += 1;
        }
        m
    }

    #[test]
    fn lanes_keep_their_traffic_and_fall_back_when_the_lane_instance_is_gone() {
        let (r, registry) = router();
        let gray = lane("gray");
        let mut d = Decisions::default();
        let tagged = served(&r, 10, |r| {
            r.route_lane("order", &mut d, Some(&gray)).unwrap()
        });
        assert_eq!(tagged, BTreeMap::from([("order-gray-1".into(), 10)]));
        let base = served(&r, 10, |r| r.route("order", &mut d).unwrap());
        assert_eq!(
            base,
            BTreeMap::from([("order-blue-1".into(), 5), ("order-green-1".into(), 5)])
        );
        let other = r.route_lane("order", &mut d, Some(&lane("gray2"))).unwrap();
        assert_eq!(other.lane, LaneOutcome::Fallback);
        assert!(registry.deregister("order", "order-gray-1"));
        let fallen = r.route_lane("order", &mut d, Some(&gray)).unwrap();
        assert_eq!(fallen.lane, LaneOutcome::Fallback);
        assert_ne!(fallen.endpoint.instance, "order-gray-1");
    }

    #[test]
    fn a_balancer_without_lanes_sends_base_traffic_to_the_lane() {
        let (r, _) = router();
        let mut d = Decisions::default();
        let all = served(&r, 30, |r| r.route_unfiltered("order", &mut d).unwrap());
        assert_eq!(all.get("order-gray-1"), Some(&10), "{all:?}");
    }

    #[test]
    fn a_strict_lane_without_an_instance_is_refused() {
        let (r, _) = router();
        let r = r.with_lane_policies(LanePolicies::default().with(
            "order",
            LanePolicy {
                strict: [lane("gray2")].into(),
                reverse_fallback: false,
            },
        ));
        let err = r
            .route_lane("order", &mut Decisions::default(), Some(&lane("gray2")))
            .unwrap_err();
        assert!(matches!(err, RouteError::NoLaneInstance { ref lane, .. } if lane == "gray2"));
    }
}
