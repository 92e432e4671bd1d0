//! The six detections of domain §6 by name: the one list the analyzer (which runs them), the
//! API (which names its findings' `type` with them) and the dashboard (which shows their
//! findings) share. What each detection judges lives in `dyeline_queries::analyze::detect`.

use serde::{Deserialize, Serialize};

/// One of the six detections of domain §6, named as its findings' `type` in
/// `GET /api/v1/findings`.
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
}

impl Detection {
    /// The six, in the order of domain §6.
    pub const ALL: [Detection; 6] = [
        Detection::CrossColorHop,
        Detection::MissingDecision,
        Detection::DrainedSide,
        Detection::RatioDeviation,
        Detection::InstanceSkew,
        Detection::ErrorSpike,
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
        }
    }

    /// True for the four tumbling-window detections (§6.3–6), false for the two judged per
    /// trace (§6.1–2).
    pub fn is_windowed(self) -> bool {
        !matches!(self, Detection::CrossColorHop | Detection::MissingDecision)
    }
}

impl std::str::FromStr for Detection {
    type Err = String;

    /// Parses a finding type's name.
    ///
    /// # Errors
    /// A name that is none of the six, listing them.
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
                "error_spike"
            ]
        );
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
    }
}
