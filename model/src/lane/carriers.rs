//! The lane tag of a span (domain §7.1): the configuration form of one user carrier
//! ([`LaneCarrier`]), the compiled chain ([`LaneCarriers`], the built-in carriers first) the
//! collector runs on every span that holds a carrier, and its outcome ([`LaneTag`]).
//!
//! Nothing here fails: a carrier whose value gives no lane id is counted as malformed and the
//! next one is tried. Work is linear in the values read: a value is percent-decoded once, a
//! captured baggage header is read member by member only up to the `x-deploy-lane` member
//! ([`crate::decision::baggage_members`], the house's one baggage reader).

use std::borrow::Cow;
use std::collections::BTreeMap;

use percent_encoding::percent_decode_str;

use super::LaneId;
use super::error::{LaneRuleError, LaneSetting};
use super::map::{LaneMap, is_blank, read_lane};
use crate::decision::{DecisionSource, baggage_members};

/// The span attribute a baggage span processor copies the lane tag to, and the W3C baggage
/// member that carries it: the first built-in carrier.
pub const TAG_KEY: &str = "x-deploy-lane";
/// The span attribute `baggage.x-deploy-lane`: the second built-in carrier.
pub const BAGGAGE_TAG_KEY: &str = "baggage.x-deploy-lane";
/// A whole captured W3C baggage header (string or array of strings), searched for its
/// [`TAG_KEY`] member: the third built-in carrier. The decision's header too (domain §2).
pub const BAGGAGE_HEADER_KEY: &str = DecisionSource::BaggageHeader.as_str();

/// The built-in carriers in the order they are tried, before the user carriers.
pub const BUILT_IN_CARRIERS: [&str; 3] = [TAG_KEY, BAGGAGE_TAG_KEY, BAGGAGE_HEADER_KEY];

/// One user carrier of the lane tag, as configured (`[[lane_carriers]]`), tried after the
/// built-in carriers, first present wins:
///
/// ```toml
/// [[lane_carriers]]
/// key = "http.request.header.gray"
/// map = { "true" = "gray", "false" = "base" }
/// ```
///
/// The span attribute's value (a captured header is an array of strings: its first element)
/// is percent-decoded, trimmed and lower-cased, then looked up in `map` when given, else read
/// as the lane id.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct LaneCarrier {
    /// Span attribute key; what `lane_tag_source` records when this carrier gives the tag.
    pub key: String,
    /// Value → lane id (`base` allowed: an explicit base tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<BTreeMap<String, String>>,
}

/// How a carrier's attribute is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    /// Its first string value is the tag (through the map, if any).
    Value,
    /// Every string value is a W3C baggage header; the first [`TAG_KEY`] member is the tag.
    BaggageHeader,
}

#[derive(Debug, Clone)]
struct Carrier {
    key: String,
    read: Read,
    map: Option<LaneMap>,
}

/// The compiled lane tag chain (domain §7.1): span attribute [`TAG_KEY`], span attribute
/// [`BAGGAGE_TAG_KEY`], the [`TAG_KEY`] member of [`BAGGAGE_HEADER_KEY`], then the user
/// carriers in order. Build it once and share it.
#[derive(Debug, Clone)]
pub struct LaneCarriers {
    carriers: Vec<Carrier>,
}

/// The outcome of [`LaneCarriers::resolve`]: the tag, the carrier that gave it and how many
/// carriers tried before it gave no lane id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneTag<'c> {
    /// The lane the request asks for (`base`: an explicit base tag); `None` when no carrier
    /// gave a lane id.
    pub tag: Option<LaneId>,
    /// The key of the carrier that gave [`LaneTag::tag`]; `None` with it.
    pub source: Option<&'c str>,
    /// Carriers present on the span whose value gave no lane id (not a lane id, or missing
    /// from the carrier's map), each counted once.
    pub malformed: u32,
}

impl LaneTag<'_> {
    /// No tag, nothing malformed: a span without a carrier.
    pub const NONE: LaneTag<'static> = LaneTag {
        tag: None,
        source: None,
        malformed: 0,
    };
}

impl LaneCarriers {
    /// Compiles the built-in carriers followed by the user `carriers`.
    ///
    /// # Errors
    /// [`LaneRuleError::EmptyKey`], [`LaneRuleError::DuplicateCarrier`] (a built-in key, or a
    /// key given twice), and for a map [`LaneRuleError::EmptyMap`],
    /// [`LaneRuleError::BadMapValue`] or [`LaneRuleError::AmbiguousMapKey`].
    pub fn new(carriers: &[LaneCarrier]) -> Result<Self, LaneRuleError> {
        let of = LaneSetting::Carrier;
        let mut compiled: Vec<Carrier> = BUILT_IN_CARRIERS
            .iter()
            .map(|&key| Carrier {
                key: key.to_owned(),
                read: if key == BAGGAGE_HEADER_KEY {
                    Read::BaggageHeader
                } else {
                    Read::Value
                },
                map: None,
            })
            .collect();
        for (index, LaneCarrier { key, map }) in carriers.iter().enumerate() {
            if key.trim().is_empty() {
                return Err(LaneRuleError::EmptyKey { of, index });
            }
            if let Some(earlier) = compiled.iter().position(|c| c.key == *key) {
                return Err(LaneRuleError::DuplicateCarrier {
                    of,
                    index,
                    key: key.clone(),
                    why: if earlier < BUILT_IN_CARRIERS.len() {
                        "a built-in carrier"
                    } else {
                        "given twice"
                    },
                });
            }
            let map = map
                .as_ref()
                .map(|m| LaneMap::compile(of, index, key, m))
                .transpose()?;
            compiled.push(Carrier {
                key: key.clone(),
                read: Read::Value,
                map,
            });
        }
        Ok(Self { carriers: compiled })
    }

    /// The keys of the user carriers, in order (the built-in ones are [`BUILT_IN_CARRIERS`]).
    pub fn user_keys(&self) -> impl ExactSizeIterator<Item = &str> {
        self.carriers[BUILT_IN_CARRIERS.len()..]
            .iter()
            .map(|c| c.key.as_str())
    }

    /// Resolves a span's lane tag: `get(key)` gives the string values of a span attribute
    /// (one for a string, each string item of an array; `None` when absent). The first carrier
    /// present gives the tag; one present whose value gives no lane id is counted in
    /// [`LaneTag::malformed`] and the next is tried. A carrier whose value is blank (or has no
    /// string value), and a baggage header without an `x-deploy-lane` member, are absent
    /// (neither a tag nor counted).
    pub fn resolve<'c, 'v, I>(&'c self, get: impl Fn(&str) -> Option<I>) -> LaneTag<'c>
    where
        I: IntoIterator<Item = &'v str>,
    {
        let mut malformed = 0u32;
        for carrier in &self.carriers {
            let Some(values) = get(&carrier.key) else {
                continue;
            };
            let text: Option<Cow<'v, str>> = match carrier.read {
                Read::Value => values
                    .into_iter()
                    .next()
                    .map(|v| percent_decode_str(v).decode_utf8_lossy()),
                Read::BaggageHeader => values
                    .into_iter()
                    .find_map(|header| baggage_members(header, TAG_KEY).next()),
            };
            let Some(text) = text.filter(|t| !is_blank(t)) else {
                continue;
            };
            match read_lane(&text, carrier.map.as_ref()) {
                Some(tag) => {
                    return LaneTag {
                        tag: Some(tag),
                        source: Some(&carrier.key),
                        malformed,
                    };
                }
                None => malformed += 1,
            }
        }
        LaneTag {
            tag: None,
            source: None,
            malformed,
        }
    }
}

impl Default for LaneCarriers {
    /// The built-in carriers alone.
    fn default() -> Self {
        Self::new(&[]).expect("the built-in carriers compile")
    }
}
