//! The detections by name: the six of domain §6 (blue-green) and the five lane findings of
//! §7.3–7.4, the one list the analyzer (which runs them), the API (which names its findings'
//! `type` with them), the alerts and the dashboard (which show their findings) share. What
//! each detection judges lives in `dyeline_queries::analyze::detect`. The lane counts
//! (`lane_fallback`, `failover`, ...) are counts, not findings: no detection names them.

use serde::{Deserialize, Serialize};

/// One detection (domain §6 or §7), named as its findings' `type` in `GET /api/v1/findings`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Detection {
    /// §6.1, `cross_color_hop`.
    CrossColorHop,
    /// §6.2, `missing_decision`.
    MissingDecision,
    /// §6.3, `drained_side`.
    DrainedSide,
    /// §6.4, `ratio_deviation`.
    RatioDeviation,
    /// §6.5, `instance_skew`.
    InstanceSkew,
    /// §6.6, `error_spike`.
    ErrorSpike,
    /// §7.3.1, `lane_leak`.
    LaneLeak,
    /// §7.3.2, `lane_tag_dropped`.
    LaneTagDropped,
    /// §7.3.3, `lane_pollution`.
    LanePollution,
    /// §7.3.4, `lane_tag_changed`.
    LaneTagChanged,
    /// §7.4, `lane_error_spike`.
    LaneErrorSpike,
}

impl Detection {
    /// Every detection: the six of §6, then the five of §7, in the domain's order.
    pub const ALL: [Detection; 11] = {
        let mut all = [Detection::CrossColorHop; 11];
        let mut i = 0;
        while i < all.len() {
            all[i] = if i < 6 {
                Detection::BLUE_GREEN[i]
            } else {
                Detection::LANE[i - 6]
            };
            i += 1;
        }
        all
    };

    /// The six blue-green detections of domain §6, in its order.
    pub const BLUE_GREEN: [Detection; 6] = [
        Detection::CrossColorHop,
        Detection::MissingDecision,
        Detection::DrainedSide,
        Detection::RatioDeviation,
        Detection::InstanceSkew,
        Detection::ErrorSpike,
    ];

    /// The five lane detections of domain §7.3–7.4, in its order.
    pub const LANE: [Detection; 5] = [
        Detection::LaneLeak,
        Detection::LaneTagDropped,
        Detection::LanePollution,
        Detection::LaneTagChanged,
        Detection::LaneErrorSpike,
    ];

    /// The four lane findings judged one span at a time (§7.3), the ones a trace carries:
    /// [`Detection::LANE`] without the windowed lane error spike (§7.4).
    pub const LANE_PER_SPAN: [Detection; 4] = [
        Detection::LaneLeak,
        Detection::LaneTagDropped,
        Detection::LanePollution,
        Detection::LaneTagChanged,
    ];

    /// The title of its section in the text table (`cross-colour hops`, ...).
    pub fn title(self) -> &'static str {
        match self {
            Detection::CrossColorHop => "cross-colour hops",
            Detection::MissingDecision => "missing decisions",
            Detection::DrainedSide => "drained-side traffic",
            Detection::RatioDeviation => "ratio deviations",
            Detection::InstanceSkew => "instance skew",
            Detection::ErrorSpike => "one-sided error spikes",
            Detection::LaneLeak => "lane leaks",
            Detection::LaneTagDropped => "dropped lane tags",
            Detection::LanePollution => "base traffic in a lane",
            Detection::LaneTagChanged => "lane tags set or changed mid-trace",
            Detection::LaneErrorSpike => "lane error spikes",
        }
    }

    /// The finding type's name (`cross_color_hop`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Detection::CrossColorHop => "cross_color_hop",
            Detection::MissingDecision => "missing_decision",
            Detection::DrainedSide => "drained_side",
            Detection::RatioDeviation => "ratio_deviation",
            Detection::InstanceSkew => "instance_skew",
            Detection::ErrorSpike => "error_spike",
            Detection::LaneLeak => "lane_leak",
            Detection::LaneTagDropped => "lane_tag_dropped",
            Detection::LanePollution => "lane_pollution",
            Detection::LaneTagChanged => "lane_tag_changed",
            Detection::LaneErrorSpike => "lane_error_spike",
        }
    }

    /// True for the tumbling-window detections (§6.3–6 and the lane error spike of §7.4),
    /// false for those judged per trace (§6.1–2, §7.3).
    pub fn is_windowed(self) -> bool {
        matches!(
            self,
            Detection::DrainedSide
                | Detection::RatioDeviation
                | Detection::InstanceSkew
                | Detection::ErrorSpike
                | Detection::LaneErrorSpike
        )
    }

    /// True for the lane detections (§7), judged by lane groups rather than channels.
    pub fn is_lane(self) -> bool {
        Detection::LANE.contains(&self)
    }

    /// True for the four windowed blue-green detections (§6.3–6): they can be judged from
    /// per-window counts taken as the spans are read, without loading them.
    pub fn is_counted(self) -> bool {
        self.is_windowed() && !self.is_lane()
    }
}

impl std::str::FromStr for Detection {
    type Err = String;

    /// Parses a finding type's name.
    ///
    /// # Errors
    /// A name that is none of them, listing them.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Detection::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Detection::ALL.iter().map(|d| d.as_str()).collect();
                format!("unknown detection {s:?}: one of {}", names.join(", "))
            })
    }
}

impl std::fmt::Display for Detection {
    /// Its finding type's name, as serde writes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Detection;

    #[test]
    fn a_detection_has_the_analyzers_name_in_serde_display_and_from_str() {
        let names = Detection::ALL.map(|d| d.to_string());
        assert_eq!(
            names,
            [
                "cross_color_hop",
                "missing_decision",
                "drained_side",
                "ratio_deviation",
                "instance_skew",
                "error_spike",
                "lane_leak",
                "lane_tag_dropped",
                "lane_pollution",
                "lane_tag_changed",
                "lane_error_spike"
            ]
        );
        assert!(Detection::BLUE_GREEN.iter().all(|d| !d.is_lane()));
        assert!(Detection::LANE.iter().all(|d| d.is_lane()));
        let counted: Vec<&str> = Detection::ALL
            .iter()
            .filter(|d| d.is_counted())
            .map(|d| d.as_str())
            .collect();
        assert_eq!(
            counted,
            [
                "drained_side",
                "ratio_deviation",
                "instance_skew",
                "error_spike"
            ]
        );
        assert!(Detection::LaneErrorSpike.is_windowed() && !Detection::LaneLeak.is_windowed());
        // The per-span lane findings are the lane ones that are not windowed.
        let per_span: Vec<Detection> = Detection::LANE
            .into_iter()
            .filter(|d| !d.is_windowed())
            .collect();
        assert_eq!(per_span, Detection::LANE_PER_SPAN);
        for d in Detection::ALL {
            let json = format!("\"{d}\"");
            assert_eq!(serde_json::to_string(&d).unwrap(), json);
            assert_eq!(serde_json::from_str::<Detection>(&json).unwrap(), d);
            assert_eq!(d.as_str().parse::<Detection>(), Ok(d));
        }
        assert!(
            "hop"
                .parse::<Detection>()
                .unwrap_err()
                .contains("cross_color_hop")
        );
        assert!(
            "lane_fallback"
                .parse::<Detection>()
                .unwrap_err()
                .contains("lane_tag_changed, lane_error_spike"),
            "a count is no detection"
        );
    }
}
