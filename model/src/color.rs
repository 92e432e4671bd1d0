//! Instance colours and the configurable rule chain that resolves them (domain §1).
//!
//! This module owns [`Color`], the configuration form of one colour rule ([`ColorRule`]), the
//! compiled chain ([`ColorRules`]) that the collector runs once per resource on the ingest hot
//! path, and the errors a bad configuration gives ([`ColorRuleError`]).

use std::collections::HashMap;
use std::fmt;

/// The cluster an instance belongs to (domain §1). `Unknown` is counted and shown, never guessed.
///
/// Serialises as its lower-case text (`"blue"`, `"green"`, `"unknown"`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Color {
    /// The blue cluster.
    Blue,
    /// The green cluster.
    Green,
    /// No rule matched.
    Unknown,
}

impl Color {
    /// `blue`, `green` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Blue => "blue",
            Self::Green => "green",
            Self::Unknown => "unknown",
        }
    }

    /// Reads `blue` / `green`, case-insensitive, surrounding whitespace ignored; anything else
    /// (including `unknown`) is `None`.
    pub fn parse(text: &str) -> Option<Self> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("blue") {
            Some(Self::Blue)
        } else if t.eq_ignore_ascii_case("green") {
            Some(Self::Green)
        } else {
            None
        }
    }
}

impl fmt::Display for Color {
    /// Writes [`Color::as_str`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One rule of the colour chain, as configured (TOML / env), e.g.
/// `{ kind = "pattern", key = "host.name", regex = "-(?P<color>[bg])\\d+$", map = { b = "blue", g = "green" } }`.
///
/// Rules are compiled into a [`ColorRules`] chain; see there for how they are applied.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ColorRule {
    /// The attribute's whole value is `blue` or `green` (case-insensitive, surrounding
    /// whitespace ignored), e.g. `deploy.color`.
    Attribute {
        /// Resource attribute key.
        key: String,
    },
    /// A `blue` / `green` token inside the value (case-insensitive), delimited by `-`, `_`, `.`
    /// or the ends: `order-blue-7d9f-x2k`, `inventory.blue.1` and `order_green_01` match,
    /// `bluebird-1` does not. A value holding both a `blue` and a `green` token is ambiguous and
    /// does not match (the chain goes on: a colour is never guessed).
    Token {
        /// Resource attribute key.
        key: String,
    },
    /// A regex with a named group `color`; the captured text is looked up in `map`
    /// (case-insensitive keys), whose values are `blue` or `green`. No match, a group that did
    /// not take part in the match, or a capture missing from `map` means the rule does not match.
    Pattern {
        /// Resource attribute key.
        key: String,
        /// Regular expression (Rust `regex` syntax) with a named group `color`.
        regex: String,
        /// Captured text → colour name (`blue` / `green`, case-insensitive).
        map: HashMap<String, String>,
        /// Rule name recorded in `color_rule`; defaults to `key`.
        #[serde(default)]
        name: Option<String>,
    },
}

impl ColorRule {
    /// The name recorded in `color_rule` when this rule decides: the attribute key, or for a
    /// [`ColorRule::Pattern`] its `name` when given.
    pub fn name(&self) -> &str {
        match self {
            Self::Attribute { key } | Self::Token { key } => key,
            Self::Pattern { key, name, .. } => name.as_deref().unwrap_or(key),
        }
    }
}

/// Why a colour rule chain could not be built ([`ColorRules::new`]). `rule` is the rule's name
/// (see [`ColorRule::name`]).
#[derive(Debug, thiserror::Error)]
pub enum ColorRuleError {
    /// A rule with an empty attribute key.
    #[error("colour rule #{index}: the attribute key is empty")]
    EmptyKey {
        /// Position of the rule in the chain, from 0.
        index: usize,
    },
    /// A pattern whose regex does not compile.
    #[error("colour rule `{rule}`: invalid regex: {source}")]
    InvalidRegex {
        /// Rule name.
        rule: String,
        /// The compiler's complaint.
        #[source]
        source: regex::Error,
    },
    /// A pattern whose regex has no named group `color`.
    #[error(
        "colour rule `{rule}`: regex `{regex}` has no named group `color` (write `(?P<color>...)`)"
    )]
    MissingColorGroup {
        /// Rule name.
        rule: String,
        /// The regex as configured.
        regex: String,
    },
    /// A pattern with an empty `map`: it could never decide a colour.
    #[error("colour rule `{rule}`: `map` is empty; map captured text to `blue` or `green`")]
    EmptyMap {
        /// Rule name.
        rule: String,
    },
    /// A `map` value other than `blue` / `green`.
    #[error(
        "colour rule `{rule}`: map entry `{key}` = `{value}`: the value must be `blue` or `green`"
    )]
    BadMapValue {
        /// Rule name.
        rule: String,
        /// The map key.
        key: String,
        /// The value given.
        value: String,
    },
    /// Two `map` keys equal up to case that name different colours.
    #[error(
        "colour rule `{rule}`: map key `{key}` is given twice (keys are case-insensitive) with different colours"
    )]
    AmbiguousMapKey {
        /// Rule name.
        rule: String,
        /// The key, lower-cased.
        key: String,
    },
}

/// One compiled rule.
#[derive(Debug, Clone)]
enum Compiled {
    Attribute {
        key: String,
    },
    Token {
        key: String,
    },
    Pattern {
        key: String,
        name: String,
        regex: regex::Regex,
        /// Lower-cased capture → colour.
        map: Vec<(String, Color)>,
    },
}

/// The compiled chain (domain §1): first matching rule wins; else `unknown` with rule `none`.
///
/// Build it once (regexes are compiled here) and share it; [`ColorRules::resolve`] is cheap.
#[derive(Debug, Clone)]
pub struct ColorRules {
    rules: Vec<ColorRule>,
    compiled: Vec<Compiled>,
}

/// The outcome of [`ColorRules::resolve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedColor<'a> {
    /// The colour.
    pub color: Color,
    /// The name of the rule that decided it (the attribute key by default), or `none`.
    pub rule: &'a str,
}

/// The rule name recorded when no rule matched.
pub const NO_RULE: &str = "none";

impl ColorRules {
    /// Compiles `rules` in order (exactly these rules, no defaults).
    ///
    /// # Errors
    /// [`ColorRuleError::EmptyKey`] for an empty key; for a pattern,
    /// [`ColorRuleError::InvalidRegex`], [`ColorRuleError::MissingColorGroup`],
    /// [`ColorRuleError::EmptyMap`], [`ColorRuleError::BadMapValue`] (a map value not
    /// blue/green) or [`ColorRuleError::AmbiguousMapKey`].
    pub fn new(rules: Vec<ColorRule>) -> Result<Self, ColorRuleError> {
        let compiled = rules
            .iter()
            .enumerate()
            .map(|(index, rule)| compile(index, rule))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { rules, compiled })
    }

    /// The default chain of domain §1: attribute `deploy.color`, then a token in `host.name`,
    /// `k8s.pod.name`, `k8s.deployment.name`.
    pub fn default_rules() -> Vec<ColorRule> {
        let attribute = |key: &str| ColorRule::Attribute {
            key: key.to_owned(),
        };
        let token = |key: &str| ColorRule::Token {
            key: key.to_owned(),
        };
        vec![
            attribute("deploy.color"),
            token("host.name"),
            token("k8s.pod.name"),
            token("k8s.deployment.name"),
        ]
    }

    /// The default chain ([`ColorRules::default_rules`]) followed by `extra` user rules
    /// (domain §1 order: user patterns come after the built-in rules).
    ///
    /// # Errors
    /// As [`ColorRules::new`], for a bad rule in `extra`.
    pub fn with_user_rules(extra: Vec<ColorRule>) -> Result<Self, ColorRuleError> {
        let mut rules = Self::default_rules();
        rules.extend(extra);
        Self::new(rules)
    }

    /// The rules as configured, in chain order.
    pub fn rules(&self) -> &[ColorRule] {
        &self.rules
    }

    /// Resolves an instance's colour from its resource attributes (`get(key)` gives a string
    /// attribute's value, `None` when absent): the first rule that matches gives the colour and
    /// its name; when none does, [`Color::Unknown`] with rule [`NO_RULE`] (`none`).
    ///
    /// Attribute and token rules do not allocate; a pattern rule runs its regex.
    pub fn resolve<'a>(&'a self, get: impl Fn(&str) -> Option<&'a str>) -> ResolvedColor<'a> {
        for rule in &self.compiled {
            let found = match rule {
                Compiled::Attribute { key } => get(key)
                    .and_then(Color::parse)
                    .map(|color| (color, key.as_str())),
                Compiled::Token { key } => get(key)
                    .and_then(token_color)
                    .map(|color| (color, key.as_str())),
                Compiled::Pattern {
                    key,
                    name,
                    regex,
                    map,
                } => get(key)
                    .and_then(|value| pattern_color(regex, map, value))
                    .map(|color| (color, name.as_str())),
            };
            if let Some((color, rule)) = found {
                return ResolvedColor { color, rule };
            }
        }
        ResolvedColor {
            color: Color::Unknown,
            rule: NO_RULE,
        }
    }
}

impl Default for ColorRules {
    /// [`ColorRules::with_user_rules`] with no user rules.
    fn default() -> Self {
        Self::with_user_rules(Vec::new()).expect("default rules compile")
    }
}

fn compile(index: usize, rule: &ColorRule) -> Result<Compiled, ColorRuleError> {
    let key = match rule {
        ColorRule::Attribute { key }
        | ColorRule::Token { key }
        | ColorRule::Pattern { key, .. } => key,
    };
    if key.is_empty() {
        return Err(ColorRuleError::EmptyKey { index });
    }
    Ok(match rule {
        ColorRule::Attribute { key } => Compiled::Attribute { key: key.clone() },
        ColorRule::Token { key } => Compiled::Token { key: key.clone() },
        ColorRule::Pattern {
            key, regex, map, ..
        } => {
            let name = rule.name().to_owned();
            let compiled =
                regex::Regex::new(regex).map_err(|source| ColorRuleError::InvalidRegex {
                    rule: name.clone(),
                    source,
                })?;
            if !compiled.capture_names().any(|n| n == Some("color")) {
                return Err(ColorRuleError::MissingColorGroup {
                    rule: name,
                    regex: regex.clone(),
                });
            }
            if map.is_empty() {
                return Err(ColorRuleError::EmptyMap { rule: name });
            }
            let mut entries: Vec<(String, Color)> = Vec::with_capacity(map.len());
            for (k, v) in map {
                let color = Color::parse(v).ok_or_else(|| ColorRuleError::BadMapValue {
                    rule: name.clone(),
                    key: k.clone(),
                    value: v.clone(),
                })?;
                let lower = k.to_lowercase();
                match entries.iter().find(|(e, _)| *e == lower) {
                    Some((_, c)) if *c != color => {
                        return Err(ColorRuleError::AmbiguousMapKey {
                            rule: name,
                            key: lower,
                        });
                    }
                    Some(_) => {}
                    None => entries.push((lower, color)),
                }
            }
            Compiled::Pattern {
                key: key.clone(),
                name,
                regex: compiled,
                map: entries,
            }
        }
    })
}

/// The colour named by a `blue` / `green` token of `value`; `None` when there is none or both.
fn token_color(value: &str) -> Option<Color> {
    let mut found = None;
    for token in value.split(['-', '_', '.']) {
        let color = if token.eq_ignore_ascii_case("blue") {
            Color::Blue
        } else if token.eq_ignore_ascii_case("green") {
            Color::Green
        } else {
            continue;
        };
        match found {
            Some(c) if c != color => return None,
            _ => found = Some(color),
        }
    }
    found
}

/// The colour the `color` capture of `regex` over `value` maps to.
fn pattern_color(regex: &regex::Regex, map: &[(String, Color)], value: &str) -> Option<Color> {
    let caps = regex.captures(value)?;
    let text = caps.name("color")?.as_str();
    if text.is_ascii() {
        map.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(text))
            .map(|(_, c)| *c)
    } else {
        let lower = text.to_lowercase();
        map.iter().find(|(k, _)| *k == lower).map(|(_, c)| *c)
    }
}

#[cfg(test)]
mod tests;
