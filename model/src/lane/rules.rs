//! The instance lane (domain §7.1): the configuration form of one lane rule ([`LaneRule`]),
//! the compiled chain ([`LaneRules`], built-in `deploy.lane` first) that the collector and the
//! presence receivers run once per resource, and its outcome ([`InstanceLane`]).

use std::collections::BTreeMap;

use super::LaneId;
use super::error::{LaneRuleError, LaneSetting};
use super::map::{LaneMap, is_blank, read_lane};

/// The resource attribute tried first for the instance lane: its whole value is the lane id.
pub const DEPLOY_LANE: &str = "deploy.lane";

/// The rule recorded when no rule matched (the instance is in the base lane).
pub const DEFAULT_RULE: &str = "default";

/// One user rule of the instance lane chain, as configured (`[[lane_rules]]`), tried after
/// the built-in `deploy.lane`, first match wins:
///
/// ```toml
/// [[lane_rules]]
/// kind = "attribute"
/// key = "nacos.metadata.gray"
/// map = { "true" = "gray", "false" = "base" }
///
/// [[lane_rules]]
/// kind = "pattern"
/// key = "host.name"
/// regex = '^dw[a-z]+-(?P<lane>gray[0-9]*)-v[0-9.]+$'
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum LaneRule {
    /// A resource attribute's whole value: looked up in `map` (trimmed, case-insensitive keys)
    /// when given, else read as the lane id (trimmed, lower-cased), as `deploy.lane` is.
    Attribute {
        /// Resource attribute key; what `lane_rule` records when this rule decides.
        key: String,
        /// Value → lane id (`base` allowed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        map: Option<BTreeMap<String, String>>,
    },
    /// A regex over a resource attribute with a named group `lane`: the captured text is
    /// looked up in `map` when given, else read as the lane id. No match, or a `lane` group
    /// that took no part in it, means the rule does not apply (nothing is counted).
    Pattern {
        /// Resource attribute key; what `lane_rule` records when this rule decides.
        key: String,
        /// Regular expression (Rust `regex` syntax) with a named group `lane`.
        regex: String,
        /// Captured text → lane id (`base` allowed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        map: Option<BTreeMap<String, String>>,
    },
}

impl LaneRule {
    /// The resource attribute key the rule reads (and the name recorded when it decides).
    pub fn key(&self) -> &str {
        match self {
            Self::Attribute { key, .. } | Self::Pattern { key, .. } => key,
        }
    }
}

/// One compiled rule.
#[derive(Debug, Clone)]
enum Compiled {
    Attribute {
        key: String,
        map: Option<LaneMap>,
    },
    Pattern {
        key: String,
        regex: regex::Regex,
        map: Option<LaneMap>,
    },
}

/// The compiled instance lane chain (domain §7.1): resource attribute [`DEPLOY_LANE`], then the
/// user rules in order; the first that gives a lane id wins; else [`LaneId::BASE`] with rule
/// [`DEFAULT_RULE`].
///
/// Build it once (regexes are compiled here) and share it; [`LaneRules::resolve`] is cheap.
#[derive(Debug, Clone)]
pub struct LaneRules {
    compiled: Vec<Compiled>,
}

/// The outcome of [`LaneRules::resolve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceLane {
    /// The instance's lane (`base` when no rule matched, or when a rule says so).
    pub lane: LaneId,
    /// The key of the rule that decided ([`DEPLOY_LANE`] or a user rule's `key`), or
    /// [`DEFAULT_RULE`].
    pub rule: String,
    /// Lane values met on the way that gave no lane id, in chain order, as found: the whole
    /// value of an attribute rule (not a lane id, or missing from its map), the captured text
    /// of a pattern rule. Empty for almost every instance.
    pub invalid_values: Vec<String>,
}

impl LaneRules {
    /// Compiles the built-in [`DEPLOY_LANE`] rule followed by the user `rules`.
    ///
    /// # Errors
    /// [`LaneRuleError::EmptyKey`]; for a pattern [`LaneRuleError::InvalidRegex`] or
    /// [`LaneRuleError::MissingLaneGroup`]; for a map [`LaneRuleError::EmptyMap`],
    /// [`LaneRuleError::BadMapValue`] or [`LaneRuleError::AmbiguousMapKey`].
    pub fn new(rules: &[LaneRule]) -> Result<Self, LaneRuleError> {
        let mut compiled = Vec::with_capacity(rules.len() + 1);
        compiled.push(Compiled::Attribute {
            key: DEPLOY_LANE.to_owned(),
            map: None,
        });
        for (index, rule) in rules.iter().enumerate() {
            compiled.push(compile(index, rule)?);
        }
        Ok(Self { compiled })
    }

    /// Resolves an instance's lane from its resource attributes (`get(key)` gives an
    /// attribute's value as text, `None` when absent): the first rule whose value gives a
    /// lane id decides. A value that gives none (not a lane id, or missing from the rule's
    /// map) does not match: it is kept in [`InstanceLane::invalid_values`] and the chain goes
    /// on. A value of only whitespace is no marker at all (not kept).
    pub fn resolve<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> InstanceLane {
        let mut invalid_values = Vec::new();
        for rule in &self.compiled {
            let (key, text, map) = match rule {
                Compiled::Attribute { key, map } => match get(key) {
                    Some(value) => (key, value, map),
                    None => continue,
                },
                Compiled::Pattern { key, regex, map } => {
                    let captured = get(key)
                        .and_then(|value| regex.captures(value))
                        .and_then(|caps| caps.name("lane"))
                        .map(|m| m.as_str());
                    match captured {
                        Some(text) => (key, text, map),
                        None => continue,
                    }
                }
            };
            if is_blank(text) {
                continue;
            }
            match read_lane(text, map.as_ref()) {
                Some(lane) => {
                    return InstanceLane {
                        lane,
                        rule: key.clone(),
                        invalid_values,
                    };
                }
                None => invalid_values.push(text.to_owned()),
            }
        }
        InstanceLane {
            lane: LaneId::base(),
            rule: DEFAULT_RULE.to_owned(),
            invalid_values,
        }
    }
}

impl Default for LaneRules {
    /// The built-in chain alone ([`DEPLOY_LANE`]).
    fn default() -> Self {
        Self {
            compiled: vec![Compiled::Attribute {
                key: DEPLOY_LANE.to_owned(),
                map: None,
            }],
        }
    }
}

fn compile(index: usize, rule: &LaneRule) -> Result<Compiled, LaneRuleError> {
    let of = LaneSetting::Rule;
    let key = rule.key();
    if key.trim().is_empty() {
        return Err(LaneRuleError::EmptyKey { of, index });
    }
    let map = |map: &Option<BTreeMap<String, String>>| {
        map.as_ref()
            .map(|m| LaneMap::compile(of, index, key, m))
            .transpose()
    };
    Ok(match rule {
        LaneRule::Attribute { key, map: m } => Compiled::Attribute {
            key: key.clone(),
            map: map(m)?,
        },
        LaneRule::Pattern { key, regex, map: m } => {
            let compiled =
                regex::Regex::new(regex).map_err(|source| LaneRuleError::InvalidRegex {
                    of,
                    index,
                    key: key.clone(),
                    source,
                })?;
            if !compiled.capture_names().any(|n| n == Some("lane")) {
                return Err(LaneRuleError::MissingLaneGroup {
                    of,
                    index,
                    key: key.clone(),
                    regex: regex.clone(),
                });
            }
            Compiled::Pattern {
                key: key.clone(),
                regex: compiled,
                map: map(m)?,
            }
        }
    })
}
