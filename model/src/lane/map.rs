//! How a marker or tag value becomes a lane (domain §7.1), shared by the lane rules and the
//! lane carriers: through a configured value map ([`LaneMap`]) or, without one, as the lane id
//! itself ([`LaneId::read`]).

use std::collections::BTreeMap;

use super::LaneId;
use super::error::{LaneRuleError, LaneSetting};

/// A compiled value map: trimmed, lower-cased text → lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LaneMap {
    entries: Vec<(String, LaneId)>,
}

/// Trimmed and lower-cased (`to_lowercase` only for non-ASCII text).
fn fold(text: &str) -> String {
    let t = text.trim();
    if t.is_ascii() {
        t.to_ascii_lowercase()
    } else {
        t.to_lowercase()
    }
}

impl LaneMap {
    /// Compiles the `map` of entry `index` (attribute `key`) of list `of`.
    ///
    /// # Errors
    /// [`LaneRuleError::EmptyMap`], [`LaneRuleError::BadMapValue`] (a value that is not a lane
    /// id, as written: no trimming or case folding in config) or
    /// [`LaneRuleError::AmbiguousMapKey`].
    pub(super) fn compile(
        of: LaneSetting,
        index: usize,
        key: &str,
        map: &BTreeMap<String, String>,
    ) -> Result<Self, LaneRuleError> {
        if map.is_empty() {
            return Err(LaneRuleError::EmptyMap {
                of,
                index,
                key: key.to_owned(),
            });
        }
        let mut entries: Vec<(String, LaneId)> = Vec::with_capacity(map.len());
        for (entry, value) in map {
            let lane = LaneId::new(value).map_err(|_| LaneRuleError::BadMapValue {
                of,
                index,
                key: key.to_owned(),
                entry: entry.clone(),
                value: value.clone(),
            })?;
            let folded = fold(entry);
            match entries.iter().find(|(e, _)| *e == folded) {
                Some((_, l)) if *l != lane => {
                    return Err(LaneRuleError::AmbiguousMapKey {
                        of,
                        index,
                        key: key.to_owned(),
                        entry: folded,
                    });
                }
                Some(_) => {}
                None => entries.push((folded, lane)),
            }
        }
        Ok(Self { entries })
    }

    /// The lane `text` (trimmed, compared case-insensitively) maps to.
    fn get(&self, text: &str) -> Option<&LaneId> {
        let t = text.trim();
        if t.is_ascii() {
            self.entries
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(t))
                .map(|(_, l)| l)
        } else {
            let folded = t.to_lowercase();
            self.entries
                .iter()
                .find(|(k, _)| *k == folded)
                .map(|(_, l)| l)
        }
    }
}

/// The lane a marker or tag value gives: looked up in `map` when there is one, else read as a
/// lane id (trimmed, lower-cased). `None` when it gives none (the caller counts it and goes
/// on).
pub(super) fn read_lane(text: &str, map: Option<&LaneMap>) -> Option<LaneId> {
    match map {
        Some(map) => map.get(text).cloned(),
        None => LaneId::read(text),
    }
}

/// True for a value that is nothing but whitespace: no marker, no tag (an absent value, never
/// counted).
pub(super) fn is_blank(text: &str) -> bool {
    text.trim().is_empty()
}
