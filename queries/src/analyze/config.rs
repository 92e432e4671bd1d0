//! The analyzer's settings: the detections' thresholds ([`Thresholds`], domain §6), their
//! per-channel replacements ([`AnalyzerConfig`], `[analyzer]` in the server's configuration)
//! and the lane rules' windows ([`LaneWindows`], domain §7).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Thresholds of the detections; the defaults are those of domain §6.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// Tumbling window. Default 60 s.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// Drained-side traffic counts only this long after the app's effective blue_percent
    /// changed. Default 10 s.
    #[serde(with = "humantime_serde")]
    pub grace: Duration,
    /// Ratio deviation: at least this many requests in the window. Default 200.
    pub ratio_min_requests: u64,
    /// Ratio deviation: the gap must exceed this many percentage points... Default 5.
    pub ratio_min_gap_pp: f64,
    /// ...and this many binomial standard errors of r. Default 3.
    pub ratio_std_errors: f64,
    /// Instance skew: over this many times the colour's mean. Default 2.
    pub skew_factor: f64,
    /// Instance skew: at least this many requests on the colour. Default 100.
    pub skew_min_requests: u64,
    /// Error spike: error rate at least this. Default 0.02.
    pub spike_min_error_rate: f64,
    /// Error spike: at least this many times the other colour's rate. Default 3.
    pub spike_factor: f64,
    /// Error spike: two-sided two-proportion z-test p below this. Default 0.01.
    pub spike_p_value: f64,
    /// Error spike: at least this many requests on each colour. Default 100.
    pub spike_min_requests: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            window: Duration::from_secs(60),
            grace: Duration::from_secs(10),
            ratio_min_requests: 200,
            ratio_min_gap_pp: 5.0,
            ratio_std_errors: 3.0,
            skew_factor: 2.0,
            skew_min_requests: 100,
            spike_min_error_rate: 0.02,
            spike_factor: 3.0,
            spike_p_value: 0.01,
            spike_min_requests: 100,
        }
    }
}

/// Analyzer settings: default thresholds (`[analyzer.defaults]`) and per-channel
/// replacements (`[analyzer.channels.<id>]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AnalyzerConfig {
    /// Thresholds for every channel.
    pub defaults: Thresholds,
    /// Thresholds of named channels (each a whole set; unspecified keys take the defaults
    /// of domain §6).
    pub channels: BTreeMap<String, Thresholds>,
    /// The lane rules' windows (domain §7.1, §7.4; `[analyzer.lanes]`); the lane error
    /// spike's thresholds are each lane group's.
    pub lanes: LaneWindows,
}

/// The windows of the lane rules.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LaneWindows {
    /// W of domain §7.1: an instance is present at t when it sent a signal within W before t
    /// and another within W after t. Default 60 s.
    #[serde(with = "humantime_serde")]
    pub presence_window: Duration,
    /// Tumbling window of lane coverage and the lane error spike (§7.4). Default 60 s.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
}

impl Default for LaneWindows {
    fn default() -> Self {
        Self {
            presence_window: Duration::from_secs(60),
            window: Duration::from_secs(60),
        }
    }
}

impl AnalyzerConfig {
    /// The thresholds of `channel`.
    pub fn for_channel(&self, channel: &str) -> &Thresholds {
        self.channels.get(channel).unwrap_or(&self.defaults)
    }
}
