//! What the demo fleet runs: its apps and their channels, the versions, the MQ topic and the
//! JOB, how many instances of each colour every app has ([`cluster_sizes`]), and how to start
//! it ([`FleetConfig`]).

use std::net::SocketAddr;

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
