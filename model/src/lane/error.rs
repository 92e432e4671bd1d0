//! [`LaneRuleError`]: why a lane rule or lane carrier of the configuration was refused, each
//! message naming the entry's attribute key.

use std::fmt;

/// Which list of the configuration an entry belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneSetting {
    /// A `[[lane_rules]]` entry (instance lane).
    Rule,
    /// A `[[lane_carriers]]` entry (lane tag).
    Carrier,
}

impl fmt::Display for LaneSetting {
    /// `lane rule` or `lane carrier`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Rule => "lane rule",
            Self::Carrier => "lane carrier",
        })
    }
}

/// Why lane rules ([`super::LaneRules::new`]) or lane carriers ([`super::LaneCarriers::new`])
/// could not be built. Every message names the entry by its position (from 0) and its `key`.
#[derive(Debug, thiserror::Error)]
pub enum LaneRuleError {
    /// An entry whose attribute key is empty (or only whitespace).
    #[error("{of} #{index}: the attribute key is empty")]
    EmptyKey {
        /// Rule or carrier.
        of: LaneSetting,
        /// Position in its list, from 0.
        index: usize,
    },
    /// A pattern whose regex does not compile.
    #[error("{of} #{index} `{key}`: invalid regex: {source}")]
    InvalidRegex {
        /// Rule or carrier.
        of: LaneSetting,
        /// Position in its list, from 0.
        index: usize,
        /// The entry's attribute key.
        key: String,
        /// The compiler's complaint.
        #[source]
        source: regex::Error,
    },
    /// A pattern whose regex has no named group `lane`.
    #[error(
        "{of} #{index} `{key}`: regex `{regex}` has no named group `lane` (write `(?P<lane>...)`)"
    )]
    MissingLaneGroup {
        /// Rule or carrier.
        of: LaneSetting,
        /// Position in its list, from 0.
        index: usize,
        /// The entry's attribute key.
        key: String,
        /// The regex as configured.
        regex: String,
    },
    /// A `map` given with no entry: it could never give a lane.
    #[error("{of} #{index} `{key}`: `map` is empty; leave it out to read the value as the lane id")]
    EmptyMap {
        /// Rule or carrier.
        of: LaneSetting,
        /// Position in its list, from 0.
        index: usize,
        /// The entry's attribute key.
        key: String,
    },
    /// A `map` value that is not a lane id.
    #[error(
        "{of} #{index} `{key}`: map entry `{entry}` = `{value}`: the value must be a lane id \
         ([a-z0-9][a-z0-9-]{{0,62}}, `base` for the base lane)"
    )]
    BadMapValue {
        /// Rule or carrier.
        of: LaneSetting,
        /// Position in its list, from 0.
        index: usize,
        /// The entry's attribute key.
        key: String,
        /// The map key.
        entry: String,
        /// The value given.
        value: String,
    },
    /// Two `map` keys equal up to case and surrounding whitespace that name different lanes.
    #[error(
        "{of} #{index} `{key}`: map key `{entry}` is given twice (keys are trimmed and \
         case-insensitive) with different lanes"
    )]
    AmbiguousMapKey {
        /// Rule or carrier.
        of: LaneSetting,
        /// Position in its list, from 0.
        index: usize,
        /// The entry's attribute key.
        key: String,
        /// The map key, trimmed and lower-cased.
        entry: String,
    },
    /// A carrier whose key is a built-in carrier's or an earlier carrier's: it would never be
    /// the one that decides.
    #[error(
        "{of} #{index} `{key}`: the key is {why}; each carrier key is tried once, the \
         built-in ones (`x-deploy-lane`, `baggage.x-deploy-lane`, `http.request.header.baggage`) first"
    )]
    DuplicateCarrier {
        /// Always [`LaneSetting::Carrier`].
        of: LaneSetting,
        /// Position in its list, from 0.
        index: usize,
        /// The entry's attribute key.
        key: String,
        /// `a built-in carrier` or `given twice`.
        why: &'static str,
    },
}
