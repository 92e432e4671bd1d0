//! Lanes (domain §7): the [`LaneId`] every lane marker, lane tag and lane group speaks, and the
//! reserved [`LaneId::BASE`] lane of unmarked instances.
//!
//! Owns the lane id grammar (the channel id grammar, domain §1), how a marker or tag value
//! is read into an id (trimmed, lower-cased), and where markers and tags are found at ingest
//! (§7.1), each in its file below this one:
//! - `lane/rules.rs`: the instance lane, [`LaneRule`] (config) → [`LaneRules`] →
//!   [`InstanceLane`] (built-in `deploy.lane` first);
//! - `lane/carriers.rs`: the lane tag of a span, [`LaneCarrier`] (config) →
//!   [`LaneCarriers`] → [`LaneTag`] (built-in `x-deploy-lane` carriers first);
//! - `lane/map.rs`: how a value becomes a lane (a value map, or the value as the id);
//! - `lane/error.rs`: [`LaneRuleError`], a bad rule or carrier of the configuration.
//!
//! Does not own lane groups.

use std::fmt;

use crate::ids::{IdError, is_id};

mod carriers;
mod error;
mod map;
mod rules;

pub use carriers::{
    BAGGAGE_HEADER_KEY, BAGGAGE_TAG_KEY, BUILT_IN_CARRIERS, LaneCarrier, LaneCarriers, LaneTag,
    TAG_KEY,
};
pub use error::{LaneRuleError, LaneSetting};
pub use rules::{DEFAULT_RULE, DEPLOY_LANE, InstanceLane, LaneRule, LaneRules};

/// A lane id: `[a-z0-9][a-z0-9-]{0,62}`, the channel id grammar; `base` is the lane of
/// unmarked (production) instances.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct LaneId(String);

impl LaneId {
    /// The reserved lane of unmarked instances and requests.
    pub const BASE: &'static str = "base";

    /// Validates `id` as given (no trimming or case folding: API bodies and config).
    ///
    /// # Errors
    /// [`IdError::Lane`] when `id` does not match `[a-z0-9][a-z0-9-]{0,62}`.
    pub fn new(id: &str) -> Result<Self, IdError> {
        if is_id(id) {
            Ok(Self(id.to_owned()))
        } else {
            Err(IdError::Lane)
        }
    }

    /// Reads a marker or tag value (domain §7.1): trimmed and lower-cased, then validated.
    /// `None` when the result is not a lane id (the caller counts it and goes on).
    pub fn read(text: &str) -> Option<Self> {
        let t = text.trim();
        if t.bytes().any(|b| b.is_ascii_uppercase()) {
            let lower = t.to_ascii_lowercase();
            is_id(&lower).then_some(Self(lower))
        } else {
            is_id(t).then(|| Self(t.to_owned()))
        }
    }

    /// The base lane.
    pub fn base() -> Self {
        Self(Self::BASE.to_owned())
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True for the base lane.
    pub fn is_base(&self) -> bool {
        self.0 == Self::BASE
    }
}

impl fmt::Display for LaneId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for LaneId {
    /// Deserialises strictly ([`LaneId::new`]): a bad id in a body or config is refused.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::new(&s).map_err(|_| {
            serde::de::Error::custom(format!(
                "lane id {s:?} must match [a-z0-9][a-z0-9-]{{0,62}}"
            ))
        })
    }
}

#[cfg(test)]
mod resolution_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_the_channel_grammar() {
        assert_eq!(LaneId::new("gray2").unwrap().as_str(), "gray2");
        assert!(LaneId::new("gray-2").is_ok());
        assert!(LaneId::new(&"a".repeat(63)).is_ok());
        assert_eq!(LaneId::new(&"a".repeat(64)), Err(IdError::Lane));
        assert_eq!(LaneId::new("Gray"), Err(IdError::Lane));
        assert_eq!(LaneId::new(" gray"), Err(IdError::Lane));
        assert_eq!(LaneId::new("-gray"), Err(IdError::Lane));
        assert_eq!(LaneId::new(""), Err(IdError::Lane));
        assert_eq!(LaneId::new("gray_1"), Err(IdError::Lane));
    }

    #[test]
    fn markers_and_tags_are_trimmed_and_lower_cased() {
        assert_eq!(LaneId::read("  Gray2 ").unwrap().as_str(), "gray2");
        assert_eq!(LaneId::read("BASE").unwrap(), LaneId::base());
        assert!(LaneId::read("BASE").unwrap().is_base());
        assert_eq!(LaneId::read("true"), LaneId::new("true").ok());
        assert_eq!(LaneId::read("gray lane"), None);
        assert_eq!(LaneId::read("  "), None);
        assert_eq!(LaneId::read("grün"), None);
    }

    #[test]
    fn deserialising_is_strict() {
        let ok: LaneId = serde_json::from_str("\"gray\"").unwrap();
        assert_eq!(ok.as_str(), "gray");
        let err = serde_json::from_str::<LaneId>("\"Gray\"").unwrap_err();
        assert!(err.to_string().contains("lane id \"Gray\""), "{err}");
    }
}
