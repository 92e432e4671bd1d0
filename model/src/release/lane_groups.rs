//! Lane groups (domain §7.1): what a lane group is ([`LaneGroup`]: its apps, entry apps, lanes
//! with their fallback, reverse fallback and lane error spike thresholds), how a group given by
//! a person is read and validated ([`LaneGroupSpec`] → [`LaneGroup`]), the two operations on
//! groups ([`LaneGroupOp`]: put, which creates or wholly replaces, and delete), and every group
//! at one moment ([`LaneGroups`], where an app is in at most one group). Pure and synchronous;
//! the timeline of groups is `lane_group_timeline.rs`, persistence is the control plane's.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::channels::normalize_apps;
use super::error::ReleaseError;
use crate::ids::is_id;
use crate::lane::LaneId;

/// A lane group id: `[a-z0-9][a-z0-9-]{0,62}`, the channel id grammar (domain §1, §7.1).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, ToSchema)]
#[serde(transparent)]
#[schema(value_type = String)]
pub struct LaneGroupId(String);

impl LaneGroupId {
    /// Validates `id` as given (no trimming or case folding).
    ///
    /// # Errors
    /// [`ReleaseError::InvalidLaneGroupId`] when `id` breaks the grammar.
    pub fn new(id: &str) -> Result<Self, ReleaseError> {
        if is_id(id) {
            Ok(Self(id.to_owned()))
        } else {
            Err(ReleaseError::InvalidLaneGroupId(id.to_owned()))
        }
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LaneGroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Borrow<str> for LaneGroupId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for LaneGroupId {
    /// Deserialises strictly ([`LaneGroupId::new`]).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::new(&s).map_err(serde::de::Error::custom)
    }
}

/// Where a request marked for a lane goes in an app that has no instance of that lane
/// (domain §7.1, §7.3.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Fallback {
    /// To the base (production) instances: the default, and what every router does.
    #[default]
    Base,
    /// Nowhere: a strict lane, whose requests must fail rather than be served elsewhere (a
    /// base-served one is a `lane_leak` with reason `strict_lane`).
    None,
}

/// The settings of one lane of a group: `{"fallback": "base" | "none"}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LaneSettings {
    /// `base` (default) or `none` (a strict lane).
    #[serde(default)]
    pub fallback: Fallback,
}

/// The thresholds of a lane group's lane error spike (domain §7.4): the test of §6.6 with the
/// same fields, defaults and meaning as the channels' error spike thresholds
/// (`spike_*` of `[analyzer.defaults]`), the lane served in against base instead of one colour
/// against the other.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SpikeThresholds {
    /// Error rate of the worse side at least this, 0..=1. Default 0.02.
    pub spike_min_error_rate: f64,
    /// At least this many times the other side's rate, at least 1. Default 3.
    pub spike_factor: f64,
    /// Two-sided two-proportion z-test p below this, in (0, 1]. Default 0.01.
    pub spike_p_value: f64,
    /// At least this many requests on each side. Default 100.
    pub spike_min_requests: u64,
}

impl Default for SpikeThresholds {
    fn default() -> Self {
        SpikeThresholds {
            spike_min_error_rate: 0.02,
            spike_factor: 3.0,
            spike_p_value: 0.01,
            spike_min_requests: 100,
        }
    }
}

impl SpikeThresholds {
    /// Checks the ranges: a rate in 0..=1, a factor of at least 1, a p-value in (0, 1].
    ///
    /// # Errors
    /// A message naming the first field out of range.
    pub fn validate(&self) -> Result<(), String> {
        let t = self;
        if !(0.0..=1.0).contains(&t.spike_min_error_rate) {
            return Err(format!(
                "thresholds.spike_min_error_rate {} is outside 0..=1",
                t.spike_min_error_rate
            ));
        }
        if !(t.spike_factor.is_finite() && t.spike_factor >= 1.0) {
            return Err(format!(
                "thresholds.spike_factor {} is below 1",
                t.spike_factor
            ));
        }
        if !(t.spike_p_value > 0.0 && t.spike_p_value <= 1.0) {
            return Err(format!(
                "thresholds.spike_p_value {} is outside (0, 1]",
                t.spike_p_value
            ));
        }
        Ok(())
    }
}

/// A lane group as a person writes it: the body of `PUT /api/v1/lane-groups/{id}` and the
/// `lane_group` of a timeline's `lane_group_put`. Unknown fields are refused; everything but
/// `apps` may be left out. [`LaneGroup::from_spec`] validates it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LaneGroupSpec {
    /// The group's id; in a PUT body optional (the path names it), and equal to the path's
    /// when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// App names (`service.name`); an app is in at most one group.
    pub apps: Vec<String>,
    /// The apps allowed to set or change a request's lane tag; each one of `apps`.
    #[serde(default)]
    pub entry_apps: Vec<String>,
    /// Lane id → settings; a lane not listed falls back to base. `base` is not a key.
    #[serde(default)]
    pub lanes: BTreeMap<String, LaneSettings>,
    /// When true, base traffic may be served by a lane while the app has no base instance.
    /// Default false.
    #[serde(default)]
    pub reverse_fallback: bool,
    /// The lane error spike thresholds; absent: the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<SpikeThresholds>,
}

/// A validated lane group (domain §7.1). Its JSON is the fixtures' `lane_group` object:
/// `{"id", "apps", "entry_apps", "lanes": {"<lane>": {"fallback"}}, "reverse_fallback"}`, plus
/// `thresholds` when they were given. Deserialising validates ([`LaneGroup::from_spec`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(try_from = "LaneGroupSpec")]
pub struct LaneGroup {
    /// The group's id.
    id: LaneGroupId,
    /// App names, in the order given, without duplicates.
    apps: Vec<String>,
    /// Entry apps, in the order given, without duplicates; each one of `apps`.
    entry_apps: Vec<String>,
    /// Lane id → settings.
    #[schema(value_type = BTreeMap<String, LaneSettings>)]
    lanes: BTreeMap<LaneId, LaneSettings>,
    /// Base traffic may be served by a lane while the app has no base instance.
    reverse_fallback: bool,
    /// The lane error spike thresholds as given; absent: the defaults.
    #[serde(skip_serializing_if = "Option::is_none")]
    thresholds: Option<SpikeThresholds>,
}

impl TryFrom<LaneGroupSpec> for LaneGroup {
    type Error = ReleaseError;
    fn try_from(spec: LaneGroupSpec) -> Result<Self, ReleaseError> {
        LaneGroup::from_spec(spec, None)
    }
}

impl LaneGroup {
    /// Validates `spec` as group `id` (the path's, in a PUT), or as the group its own `id`
    /// names when `id` is `None`: the id by the channel id grammar, app names as channels'
    /// ([`normalize_apps`]: duplicates dropped, order kept), every entry app one of the apps,
    /// every lane key a lane id other than `base`, the thresholds in range.
    ///
    /// # Errors
    /// [`ReleaseError::InvalidLaneGroupId`] for a bad id; [`ReleaseError::InvalidApps`] for a
    /// bad app name; [`ReleaseError::InvalidLaneGroup`] for a missing id, an id in the body
    /// other than `id`, an entry app outside the apps, a bad or `base` lane key, thresholds out
    /// of range.
    pub fn from_spec(spec: LaneGroupSpec, id: Option<&str>) -> Result<Self, ReleaseError> {
        let id = match (id, spec.id.as_deref()) {
            (Some(path), Some(body)) if path != body => {
                return Err(ReleaseError::InvalidLaneGroup(format!(
                    "the body's id {body:?} is not the lane group {path:?} it is put to"
                )));
            }
            (Some(id), _) | (None, Some(id)) => LaneGroupId::new(id)?,
            (None, None) => {
                return Err(ReleaseError::InvalidLaneGroup(
                    "a lane group needs an id".into(),
                ));
            }
        };
        let apps = normalize_apps(spec.apps)?;
        let entry_apps = normalize_apps(spec.entry_apps)?;
        if let Some(outside) = entry_apps.iter().find(|a| !apps.contains(a)) {
            return Err(ReleaseError::InvalidLaneGroup(format!(
                "entry app {outside:?} is not one of lane group {id:?}'s apps"
            )));
        }
        let mut lanes = BTreeMap::new();
        for (key, settings) in spec.lanes {
            let lane = LaneId::new(&key).map_err(|_| {
                ReleaseError::InvalidLaneGroup(format!(
                    "lane id {key:?} must match [a-z0-9][a-z0-9-]{{0,62}}"
                ))
            })?;
            if lane.is_base() {
                return Err(ReleaseError::InvalidLaneGroup(
                    "`base` is not a lane of a group: it is the lane of unmarked instances, \
                     where the group's lanes fall back"
                        .into(),
                ));
            }
            lanes.insert(lane, settings);
        }
        if let Some(t) = &spec.thresholds {
            t.validate().map_err(ReleaseError::InvalidLaneGroup)?;
        }
        Ok(LaneGroup {
            id,
            apps,
            entry_apps,
            lanes,
            reverse_fallback: spec.reverse_fallback,
            thresholds: spec.thresholds,
        })
    }

    /// The group's id.
    pub fn id(&self) -> &LaneGroupId {
        &self.id
    }

    /// Its apps, in the order given.
    pub fn apps(&self) -> &[String] {
        &self.apps
    }

    /// Its entry apps (allowed to set or change a lane tag), in the order given.
    pub fn entry_apps(&self) -> &[String] {
        &self.entry_apps
    }

    /// True when `app` is one of its apps.
    pub fn contains(&self, app: &str) -> bool {
        self.apps.iter().any(|a| a == app)
    }

    /// True when `app` is one of its entry apps.
    pub fn is_entry_app(&self, app: &str) -> bool {
        self.entry_apps.iter().any(|a| a == app)
    }

    /// The lanes it lists, with their settings.
    pub fn lanes(&self) -> &BTreeMap<LaneId, LaneSettings> {
        &self.lanes
    }

    /// The fallback of `lane` in this group: as listed, else `base` (domain §7.1: a lane not
    /// listed falls back to base).
    pub fn fallback(&self, lane: &LaneId) -> Fallback {
        self.lanes.get(lane).map_or(Fallback::Base, |s| s.fallback)
    }

    /// Whether base traffic may be served by a lane while the app has no base instance.
    pub fn reverse_fallback(&self) -> bool {
        self.reverse_fallback
    }

    /// The lane error spike thresholds in force: as given, else the defaults.
    pub fn thresholds(&self) -> SpikeThresholds {
        self.thresholds.unwrap_or_default()
    }

    /// The thresholds as given (`None`: not given, the defaults apply).
    pub fn thresholds_given(&self) -> Option<&SpikeThresholds> {
        self.thresholds.as_ref()
    }

    /// This group without `app` (in its apps and entry apps).
    fn without_app(&self, app: &str) -> LaneGroup {
        let mut g = self.clone();
        g.apps.retain(|a| a != app);
        g.entry_apps.retain(|a| a != app);
        g
    }
}

/// An operation on lane groups (a timeline's `lane_group_put` / `lane_group_delete`).
#[derive(Clone, Debug, PartialEq)]
pub enum LaneGroupOp {
    /// Create the group, or wholly replace it.
    Put(LaneGroup),
    /// Delete the group.
    Delete(LaneGroupId),
}

impl LaneGroupOp {
    /// `lane_group_put` or `lane_group_delete`: the `op` of a timeline event.
    pub fn name(&self) -> &'static str {
        match self {
            LaneGroupOp::Put(_) => "lane_group_put",
            LaneGroupOp::Delete(_) => "lane_group_delete",
        }
    }

    /// The group it acts on.
    pub fn id(&self) -> &LaneGroupId {
        match self {
            LaneGroupOp::Put(g) => g.id(),
            LaneGroupOp::Delete(id) => id,
        }
    }
}

/// Every lane group at one moment, with each one's version, and which group holds each app
/// (at most one).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaneGroups {
    map: BTreeMap<LaneGroupId, (Arc<LaneGroup>, u64)>,
    app_index: HashMap<String, LaneGroupId>,
}

impl LaneGroups {
    /// No groups.
    pub fn new() -> Self {
        Self::default()
    }

    /// A group by id.
    pub fn get(&self, id: &str) -> Option<&Arc<LaneGroup>> {
        self.map.get(id).map(|(g, _)| g)
    }

    /// A group's version: incremented by every put since it was created (the `ETag` /
    /// `If-Match` value); 0 when it does not exist.
    pub fn version(&self, id: &str) -> u64 {
        self.map.get(id).map_or(0, |(_, v)| *v)
    }

    /// Every group with its version, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<LaneGroup>, u64)> {
        self.map.values().map(|(g, v)| (g, *v))
    }

    /// The number of groups.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when there are no groups.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The group holding `app`, if any.
    pub fn group_of(&self, app: &str) -> Option<&Arc<LaneGroup>> {
        self.app_index.get(app).and_then(|id| self.get(id.as_str()))
    }

    /// Checks `op` without changing anything.
    ///
    /// # Errors
    /// [`ReleaseError::AppInOtherLaneGroup`] when a put lists an app another group holds;
    /// [`ReleaseError::LaneGroupNotFound`] for a delete of a group that does not exist.
    pub fn check(&self, op: &LaneGroupOp) -> Result<(), ReleaseError> {
        match op {
            LaneGroupOp::Put(g) => {
                for app in g.apps() {
                    if let Some(other) = self.app_index.get(app)
                        && other != g.id()
                    {
                        return Err(ReleaseError::AppInOtherLaneGroup {
                            app: app.clone(),
                            lane_group: other.to_string(),
                        });
                    }
                }
                Ok(())
            }
            LaneGroupOp::Delete(id) => match self.map.contains_key(id) {
                true => Ok(()),
                false => Err(ReleaseError::LaneGroupNotFound(id.to_string())),
            },
        }
    }

    /// Applies `op` without checking it: a put creates or replaces the group (version + 1;
    /// an app another group held leaves that group, whose version stays), a delete removes
    /// it (nothing for a group that does not exist). Use [`LaneGroups::check`] first for live
    /// writes; replays of recorded history apply leniently.
    pub fn apply(&mut self, op: &LaneGroupOp) {
        let id = op.id().clone();
        let old = self.map.remove(&id);
        if let Some((g, _)) = &old {
            for app in g.apps() {
                self.app_index.remove(app);
            }
        }
        let LaneGroupOp::Put(group) = op else {
            return;
        };
        for app in group.apps() {
            if let Some(other) = self.app_index.insert(app.clone(), id.clone())
                && let Some((g, _)) = self.map.get_mut(&other)
            {
                *g = Arc::new(g.without_app(app));
            }
        }
        let version = old.map_or(0, |(_, v)| v) + 1;
        self.map.insert(id, (Arc::new(group.clone()), version));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: &str) -> LaneGroupSpec {
        serde_json::from_str(json).unwrap()
    }

    fn group(json: &str) -> LaneGroup {
        serde_json::from_str(json).unwrap()
    }

    fn code(json: &str) -> &'static str {
        match serde_json::from_str::<LaneGroupSpec>(json) {
            Ok(s) => LaneGroup::from_spec(s, None).unwrap_err().code(),
            Err(_) => "spec",
        }
    }

    const MALL: &str = r#"{"id": "mall", "apps": ["gateway", "order", "order"],
        "entry_apps": ["gateway"], "lanes": {"gray": {"fallback": "base"},
        "gray2": {"fallback": "none"}, "gray3": {}}, "reverse_fallback": false}"#;

    #[test]
    fn a_fixture_group_reads_with_its_fallbacks_and_defaults() {
        let g = group(MALL);
        assert_eq!(g.id().as_str(), "mall");
        assert_eq!(g.apps(), ["gateway", "order"]);
        assert!(g.is_entry_app("gateway") && !g.is_entry_app("order"));
        assert!(g.contains("order") && !g.contains("coupon"));
        let lane = |s: &str| LaneId::new(s).unwrap();
        assert_eq!(g.fallback(&lane("gray")), Fallback::Base);
        assert_eq!(g.fallback(&lane("gray2")), Fallback::None);
        assert_eq!(g.fallback(&lane("gray3")), Fallback::Base);
        // a lane the group does not list falls back to base
        assert_eq!(g.fallback(&lane("blue-team")), Fallback::Base);
        assert!(!g.reverse_fallback());
        assert_eq!(g.thresholds(), SpikeThresholds::default());
        assert_eq!(g.thresholds().spike_min_requests, 100);
        assert_eq!(g.thresholds_given(), None);
        // serialised back: the fixture's shape, thresholds absent, lanes' fallbacks written
        let v = serde_json::to_value(&g).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"id": "mall", "apps": ["gateway", "order"],
                "entry_apps": ["gateway"], "lanes": {"gray": {"fallback": "base"},
                "gray2": {"fallback": "none"}, "gray3": {"fallback": "base"}},
                "reverse_fallback": false})
        );
        assert_eq!(serde_json::from_value::<LaneGroup>(v).unwrap(), g);
    }

    #[test]
    fn thresholds_given_in_part_take_the_defaults_for_the_rest() {
        let g = group(r#"{"id": "promo", "apps": ["coupon"], "thresholds": {"spike_factor": 4}}"#);
        let t = g.thresholds();
        assert_eq!((t.spike_factor, t.spike_min_error_rate), (4.0, 0.02));
        assert_eq!((t.spike_p_value, t.spike_min_requests), (0.01, 100));
        assert!(g.lanes().is_empty() && g.entry_apps().is_empty());
        let v = serde_json::to_value(&g).unwrap();
        assert_eq!(v["thresholds"]["spike_factor"], 4.0);
        assert_eq!(v["thresholds"]["spike_min_requests"], 100);
    }

    #[test]
    fn bad_groups_are_refused_with_their_reason() {
        // id grammar
        assert_eq!(
            code(r#"{"id": "Mall", "apps": []}"#),
            "invalid_lane_group_id"
        );
        assert_eq!(code(r#"{"id": "", "apps": []}"#), "invalid_lane_group_id");
        assert_eq!(code(r#"{"apps": []}"#), "invalid_lane_group");
        // base as a lane key, a lane key off the grammar
        assert_eq!(
            code(r#"{"id": "m", "apps": [], "lanes": {"base": {}}}"#),
            "invalid_lane_group"
        );
        assert_eq!(
            code(r#"{"id": "m", "apps": [], "lanes": {"Gray": {}}}"#),
            "invalid_lane_group"
        );
        // an entry app outside the apps
        let e = LaneGroup::from_spec(
            spec(r#"{"id": "m", "apps": ["order"], "entry_apps": ["gateway"]}"#),
            None,
        )
        .unwrap_err();
        assert_eq!(e.code(), "invalid_lane_group");
        assert!(e.to_string().contains("\"gateway\""), "{e}");
        // bad app names
        assert_eq!(code(r#"{"id": "m", "apps": [" "]}"#), "invalid_apps");
        // thresholds out of range
        for t in [
            r#"{"spike_min_error_rate": 1.5}"#,
            r#"{"spike_factor": 0.5}"#,
            r#"{"spike_p_value": 0}"#,
        ] {
            let j = format!(r#"{{"id": "m", "apps": [], "thresholds": {t}}}"#);
            assert_eq!(code(&j), "invalid_lane_group", "{t}");
        }
        // unknown fields, a bad fallback, a missing apps list: refused by the spec's reader
        for bad in [
            r#"{"id": "m", "apps": [], "color": "blue"}"#,
            r#"{"id": "m", "apps": [], "lanes": {"gray": {"fallback": "strict"}}}"#,
            r#"{"id": "m", "apps": [], "lanes": {"gray": {"fallbak": "none"}}}"#,
            r#"{"id": "m", "apps": [], "thresholds": {"min_requests": 5}}"#,
            r#"{"id": "m"}"#,
        ] {
            assert_eq!(code(bad), "spec", "{bad}");
            let err = serde_json::from_str::<LaneGroup>(bad).unwrap_err();
            assert!(err.is_data(), "{bad}: {err}");
        }
        let err =
            serde_json::from_str::<LaneGroup>(r#"{"id": "m", "apps": [], "lanes": {"base": {}}}"#)
                .unwrap_err();
        assert!(err.to_string().contains("`base` is not a lane"), "{err}");
    }

    #[test]
    fn the_path_names_the_group_and_a_body_id_must_agree() {
        let g = LaneGroup::from_spec(spec(r#"{"apps": ["a"]}"#), Some("mall")).unwrap();
        assert_eq!(g.id().as_str(), "mall");
        let same = LaneGroup::from_spec(spec(r#"{"id": "mall", "apps": []}"#), Some("mall"));
        assert!(same.is_ok());
        let other = LaneGroup::from_spec(spec(r#"{"id": "promo", "apps": []}"#), Some("mall"));
        assert_eq!(other.unwrap_err().code(), "invalid_lane_group");
        let bad_path = LaneGroup::from_spec(spec(r#"{"apps": []}"#), Some("no_such"));
        assert_eq!(bad_path.unwrap_err().code(), "invalid_lane_group_id");
    }

    #[test]
    fn an_app_is_in_at_most_one_group() {
        let mut gs = LaneGroups::new();
        let mall = group(MALL);
        let put = |j: &str| LaneGroupOp::Put(group(j));
        gs.check(&LaneGroupOp::Put(mall.clone())).unwrap();
        gs.apply(&LaneGroupOp::Put(mall.clone()));
        assert_eq!(gs.version("mall"), 1);
        assert_eq!(gs.group_of("order").unwrap().id().as_str(), "mall");
        // another group may not take order…
        let promo = put(r#"{"id": "promo", "apps": ["coupon", "order"]}"#);
        let e = gs.check(&promo).unwrap_err();
        assert_eq!(e.code(), "app_in_other_lane_group");
        assert_eq!(
            e.to_string(),
            "app \"order\" is already in lane group \"mall\""
        );
        // …but mall may list it again, and a group of other apps is fine
        gs.check(&LaneGroupOp::Put(mall.clone())).unwrap();
        gs.check(&put(r#"{"id": "promo", "apps": ["coupon"]}"#))
            .unwrap();
        // once mall lets order go (replaced without it), promo may take it
        let smaller = put(r#"{"id": "mall", "apps": ["gateway"], "entry_apps": ["gateway"]}"#);
        gs.apply(&smaller);
        assert_eq!(gs.version("mall"), 2);
        assert!(gs.group_of("order").is_none());
        gs.check(&promo).unwrap();
        gs.apply(&promo);
        assert_eq!(gs.group_of("order").unwrap().id().as_str(), "promo");
        // delete frees its apps; deleting a missing group is refused
        let del = LaneGroupOp::Delete(LaneGroupId::new("promo").unwrap());
        gs.check(&del).unwrap();
        gs.apply(&del);
        assert!(gs.group_of("order").is_none() && gs.get("promo").is_none());
        assert_eq!(gs.version("promo"), 0);
        assert_eq!(gs.check(&del).unwrap_err().code(), "lane_group_not_found");
        assert_eq!(gs.len(), 1);
    }

    #[test]
    fn replaying_history_leniently_moves_an_app_out_of_its_old_group() {
        let mut gs = LaneGroups::new();
        gs.apply(&LaneGroupOp::Put(group(MALL)));
        gs.apply(&LaneGroupOp::Put(group(
            r#"{"id": "edge", "apps": ["gateway"], "entry_apps": ["gateway"]}"#,
        )));
        let mall = gs.get("mall").unwrap();
        assert_eq!(mall.apps(), ["order"]);
        assert!(mall.entry_apps().is_empty());
        assert_eq!(gs.version("mall"), 1);
        assert_eq!(gs.group_of("gateway").unwrap().id().as_str(), "edge");
    }
}
