//! What the demo fleet runs: its apps and their channels, the versions, the MQ topic and the
//! JOB, how many instances of each colour every app has ([`cluster_sizes`]), the gray release
//! (its lane group [`LANE_GROUP`], lane instances [`LANE_INSTANCES`], how the gateway stains
//! requests, and the lane rule and carrier Dyeline reads them with, [`LANES_TOML`]), and how
//! to start it ([`FleetConfig`]).

use std::net::SocketAddr;

use dyeline_model::LaneCarrier;

use super::faults::Faults;

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

/// The lane group of the gray release (domain §7.1): its apps (the gateway is the entry app,
/// the one that stains requests), lanes `gray` and `gray2`, both falling back to base.
pub const LANE_GROUP: &str = "mall";
/// The apps of [`LANE_GROUP`].
pub const LANE_APPS: [&str; 6] = ["gateway", "order", "inventory", "payment", "risk", "notify"];
/// The entry app of [`LANE_GROUP`].
pub const LANE_ENTRY_APP: &str = "gateway";
/// The lanes of [`LANE_GROUP`].
pub const LANES: [&str; 2] = ["gray", "gray2"];
/// `spike_min_requests` of [`LANE_GROUP`]: the default of domain §7.4, said in the group. The
/// gray share ([`GRAY_PER_20`]) gives about 120 gray requests per window at `order` and
/// `inventory`, so a window is judged; a lower bound let two stray errors among ~96 requests
/// (inventory's 0.1 % background) pass as a spike in a run without faults.
pub const LANE_SPIKE_MIN_REQUESTS: u64 = 100;

/// How a lane instance is marked, the two ways domain §7.1 reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneMarker {
    /// Seed 001: Nacos metadata `gray=true`, exported as the resource attribute
    /// `nacos.metadata.gray = "true"` and mapped to `gray` by the lane rule of [`LANES_TOML`].
    NacosGray,
    /// The built-in resource attribute `deploy.lane` (here `gray2`).
    DeployLane,
}

/// The lane instances (app, lane, marker), one each: `order` runs both lanes; `inventory`'s
/// is the only gray instance the `lane-instance-killed` fault kills; `risk`'s is idle when
/// `lane-tag-ignored` is on (kept present by its metrics); `notify`'s is the gray consumer.
pub const LANE_INSTANCES: [(&str, &str, LaneMarker); 6] = [
    ("order", "gray", LaneMarker::NacosGray),
    ("order", "gray2", LaneMarker::DeployLane),
    ("inventory", "gray", LaneMarker::NacosGray),
    ("payment", "gray", LaneMarker::NacosGray),
    ("risk", "gray", LaneMarker::NacosGray),
    ("notify", "gray", LaneMarker::NacosGray),
];

/// The instance the `lane-instance-killed` fault kills: inventory's only gray one.
pub const KILLED_INSTANCE: &str = "inventory-gray-1";

/// The header seed 001's gateway sets on gray requests (`gray: true`).
pub const GRAY_HEADER: &str = "gray";
/// Of every 20 user requests the gateway stains this many `gray` (the header `gray: true`)…
pub const GRAY_PER_20: u64 = 5;
/// …and this many `gray2` (the baggage member `x-deploy-lane=gray2`).
pub const GRAY2_PER_20: u64 = 1;

/// What Dyeline must be told to read the demo's lanes, as a user writes it in `dyeline.toml`:
/// the Nacos metadata marker of gray instances and the seed-001 header. (`deploy.lane` and the
/// baggage member `x-deploy-lane` are read without configuration.) `dyeline demo` loads it
/// under the user's configuration.
pub const LANES_TOML: &str = r#"
[[lane_rules]]
kind = "attribute"
key = "nacos.metadata.gray"
map = { "true" = "gray", "false" = "base" }

[[lane_carriers]]
key = "http.request.header.gray"
map = { "true" = "gray", "false" = "base" }
"#;

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
    /// The `[[lane_carriers]]` the instances' lane readers use (Dyeline's own, so both read a
    /// request alike).
    pub lane_carriers: Vec<LaneCarrier>,
    /// Every instance exports its metrics this often (what keeps an idle lane instance
    /// present, domain §7.1); shorter than the presence window.
    pub metrics_interval: std::time::Duration,
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
