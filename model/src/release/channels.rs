//! The channel state machine of domain §1 and §4: which channels exist, their apps, state and
//! blue_percent, which operations are valid on them, and the effective channel and
//! blue_percent of any app. Pure and synchronous; persistence and events build on it.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use utoipa::ToSchema;

use super::error::ReleaseError;
use crate::ids::ChannelId;

/// The blue_percent outside a release, and of a channel that has just started (domain §1, §4).
pub const NEUTRAL_BLUE_PERCENT: u8 = 50;

/// Longest app name accepted, in bytes.
pub const MAX_APP_NAME_LEN: usize = 255;

/// Whether a channel is releasing (domain §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReleaseState {
    /// Not releasing: its apps follow global (if releasing) or nothing.
    Idle,
    /// Releasing: its apps follow its blue_percent.
    Releasing,
}

impl ReleaseState {
    /// `idle` or `releasing`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReleaseState::Idle => "idle",
            ReleaseState::Releasing => "releasing",
        }
    }
}

/// One channel as stored and served.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct Channel {
    /// `[a-z0-9][a-z0-9-]{0,62}`; `global` is the implicit channel holding every app.
    #[schema(value_type = String)]
    pub id: ChannelId,
    /// App names (`service.name`), in the order given, without duplicates. Always empty for
    /// `global`, which holds every app not in a releasing local channel.
    pub apps: Vec<String>,
    /// `idle` or `releasing`.
    pub state: ReleaseState,
    /// Share of the channel's traffic sent to blue, 0..=100; 50 while idle.
    pub blue_percent: u8,
    /// Incremented by every accepted write to the channel; the `ETag` / `If-Match` value.
    pub version: u64,
}

impl Channel {
    fn new(id: ChannelId) -> Self {
        Channel {
            id,
            apps: Vec::new(),
            state: ReleaseState::Idle,
            blue_percent: NEUTRAL_BLUE_PERCENT,
            version: 0,
        }
    }
}

/// An operation on one channel (the `op` of a timeline event).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Start releasing at blue_percent 50.
    Start,
    /// Set blue_percent (0..=100) while releasing.
    Ratio(u8),
    /// Stop releasing; blue_percent returns to 50.
    Finish,
    /// Set the app list (creating the channel if needed), while idle.
    Apps(Vec<String>),
    /// Delete the channel, while idle.
    Delete,
}

impl Op {
    /// `start`, `ratio`, `finish`, `apps` or `delete`.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Start => "start",
            Op::Ratio(_) => "ratio",
            Op::Finish => "finish",
            Op::Apps(_) => "apps",
            Op::Delete => "delete",
        }
    }
}

/// The effective release configuration of one app (domain §4's matrix).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct Effective {
    /// The channel the app follows: its local channel while that releases, else `global`
    /// while global releases, else none.
    #[schema(value_type = Option<String>)]
    pub channel: Option<ChannelId>,
    /// That channel's blue_percent, or 50 when the app follows none.
    pub blue_percent: u8,
}

/// Every channel at one moment. `global` always exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Channels {
    map: BTreeMap<ChannelId, Channel>,
    /// app → the local channel that holds it.
    app_index: HashMap<String, ChannelId>,
}

impl Default for Channels {
    fn default() -> Self {
        Self::new()
    }
}

fn global_id() -> ChannelId {
    ChannelId::new(ChannelId::GLOBAL).expect("global is a valid id")
}

/// Validates an app list: non-empty names of at most [`MAX_APP_NAME_LEN`] bytes without
/// control characters; duplicates are dropped, order kept.
///
/// # Errors
/// [`ReleaseError::InvalidApps`] naming the first bad name.
pub fn normalize_apps(apps: Vec<String>) -> Result<Vec<String>, ReleaseError> {
    let mut out: Vec<String> = Vec::with_capacity(apps.len());
    for app in apps {
        if app.trim().is_empty() {
            return Err(ReleaseError::InvalidApps("an app name is empty".into()));
        }
        if app.len() > MAX_APP_NAME_LEN || app.chars().any(char::is_control) {
            return Err(ReleaseError::InvalidApps(format!(
                "app name {app:?} is longer than {MAX_APP_NAME_LEN} bytes or has control characters"
            )));
        }
        if !out.contains(&app) {
            out.push(app);
        }
    }
    Ok(out)
}

impl Channels {
    /// Only `global`, idle at 50, version 0.
    pub fn new() -> Self {
        let mut map = BTreeMap::new();
        map.insert(global_id(), Channel::new(global_id()));
        Channels {
            map,
            app_index: HashMap::new(),
        }
    }

    /// A channel by id.
    pub fn get(&self, id: &str) -> Option<&Channel> {
        self.map
            .iter()
            .find(|(k, _)| k.as_str() == id)
            .map(|(_, c)| c)
    }

    /// Every channel, `global` included, in id order.
    pub fn iter(&self) -> impl Iterator<Item = &Channel> {
        self.map.values()
    }

    /// The local channel holding `app`, if any.
    pub fn local_channel_of(&self, app: &str) -> Option<&Channel> {
        self.app_index.get(app).and_then(|id| self.map.get(id))
    }

    /// The effective channel and blue_percent of `app` (domain §4):
    ///
    /// | | global releasing | global not releasing |
    /// |---|---|---|
    /// | local releasing | local | local |
    /// | local idle / no local | global | none (50) |
    pub fn effective(&self, app: &str) -> Effective {
        if let Some(local) = self.local_channel_of(app)
            && local.state == ReleaseState::Releasing
        {
            return Effective {
                channel: Some(local.id.clone()),
                blue_percent: local.blue_percent,
            };
        }
        let global = self.get(ChannelId::GLOBAL).expect("global always exists");
        if global.state == ReleaseState::Releasing {
            Effective {
                channel: Some(global.id.clone()),
                blue_percent: global.blue_percent,
            }
        } else {
            Effective {
                channel: None,
                blue_percent: NEUTRAL_BLUE_PERCENT,
            }
        }
    }

    /// Checks `op` on channel `id` against the rules of domain §1 and §4 without changing
    /// anything.
    ///
    /// # Errors
    /// - [`ReleaseError::ChannelNotFound`]: start/ratio/finish/delete of a channel that does
    ///   not exist (`global` always exists);
    /// - [`ReleaseError::InvalidBluePercent`]: ratio above 100;
    /// - [`ReleaseError::AlreadyReleasing`]: start while releasing;
    /// - [`ReleaseError::NotReleasing`]: ratio or finish while idle;
    /// - [`ReleaseError::GlobalChannel`]: apps or delete on `global`;
    /// - [`ReleaseError::ChannelReleasing`]: apps or delete while releasing;
    /// - [`ReleaseError::AppInOtherChannel`]: an app already in another local channel;
    /// - [`ReleaseError::InvalidApps`]: see [`normalize_apps`].
    pub fn check(&self, id: &ChannelId, op: &Op) -> Result<(), ReleaseError> {
        let channel = self.map.get(id);
        let missing = || ReleaseError::ChannelNotFound(id.to_string());
        match op {
            Op::Start => match channel {
                None => Err(missing()),
                Some(c) if c.state == ReleaseState::Releasing => {
                    Err(ReleaseError::AlreadyReleasing(id.to_string()))
                }
                Some(_) => Ok(()),
            },
            Op::Ratio(r) => {
                if *r > 100 {
                    return Err(ReleaseError::InvalidBluePercent(format!(
                        "blue_percent {r} is outside 0..=100"
                    )));
                }
                match channel {
                    None => Err(missing()),
                    Some(c) if c.state == ReleaseState::Idle => {
                        Err(ReleaseError::NotReleasing(id.to_string()))
                    }
                    Some(_) => Ok(()),
                }
            }
            Op::Finish => match channel {
                None => Err(missing()),
                Some(c) if c.state == ReleaseState::Idle => {
                    Err(ReleaseError::NotReleasing(id.to_string()))
                }
                Some(_) => Ok(()),
            },
            Op::Apps(apps) => {
                if id.is_global() {
                    return Err(ReleaseError::GlobalChannel("given an app list"));
                }
                if let Some(c) = channel
                    && c.state == ReleaseState::Releasing
                {
                    return Err(ReleaseError::ChannelReleasing(id.to_string()));
                }
                let apps = normalize_apps(apps.clone())?;
                for app in &apps {
                    if let Some(other) = self.app_index.get(app)
                        && other != id
                    {
                        return Err(ReleaseError::AppInOtherChannel {
                            app: app.clone(),
                            channel: other.to_string(),
                        });
                    }
                }
                Ok(())
            }
            Op::Delete => {
                if id.is_global() {
                    return Err(ReleaseError::GlobalChannel("deleted"));
                }
                match channel {
                    None => Err(missing()),
                    Some(c) if c.state == ReleaseState::Releasing => {
                        Err(ReleaseError::ChannelReleasing(id.to_string()))
                    }
                    Some(_) => Ok(()),
                }
            }
        }
    }

    /// Applies `op` to channel `id` without checking it: start sets releasing at 50, ratio
    /// sets blue_percent (clamped to 100), finish sets idle at 50, apps sets the list
    /// (creating the channel; an app taken from another channel leaves it), delete removes a
    /// local channel. Every op on an existing or created channel increments its version. Use
    /// [`Channels::check`] first for live writes; replays of recorded history apply leniently.
    pub fn apply(&mut self, id: &ChannelId, op: &Op) {
        match op {
            Op::Delete => {
                if id.is_global() {
                    return;
                }
                if let Some(c) = self.map.remove(id) {
                    for app in &c.apps {
                        self.app_index.remove(app);
                    }
                }
                return;
            }
            Op::Apps(apps) => {
                if id.is_global() {
                    return;
                }
                let apps = normalize_apps(apps.clone()).unwrap_or_default();
                let old = self.map.get(id).map(|c| c.apps.clone()).unwrap_or_default();
                for app in &old {
                    self.app_index.remove(app);
                }
                for app in &apps {
                    if let Some(other) = self.app_index.insert(app.clone(), id.clone())
                        && &other != id
                        && let Some(o) = self.map.get_mut(&other)
                    {
                        o.apps.retain(|a| a != app);
                    }
                }
                let c = self
                    .map
                    .entry(id.clone())
                    .or_insert_with(|| Channel::new(id.clone()));
                c.apps = apps;
                c.version += 1;
                return;
            }
            _ => {}
        }
        let c = self
            .map
            .entry(id.clone())
            .or_insert_with(|| Channel::new(id.clone()));
        match op {
            Op::Start => {
                c.state = ReleaseState::Releasing;
                c.blue_percent = NEUTRAL_BLUE_PERCENT;
            }
            Op::Ratio(r) => c.blue_percent = (*r).min(100),
            Op::Finish => {
                c.state = ReleaseState::Idle;
                c.blue_percent = NEUTRAL_BLUE_PERCENT;
            }
            Op::Apps(_) | Op::Delete => unreachable!("handled above"),
        }
        c.version += 1;
    }

    /// Sets a channel's version (restoring a stored state).
    pub fn set_version(&mut self, id: &ChannelId, version: u64) {
        if let Some(c) = self.map.get_mut(id) {
            c.version = version;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> ChannelId {
        ChannelId::new(s).unwrap()
    }

    #[test]
    fn effective_follows_the_matrix_of_domain_4() {
        let mut c = Channels::new();
        let (g, l) = (id("global"), id("trade"));
        c.apply(&l, &Op::Apps(vec!["order".into()]));
        let eff = |c: &Channels, app| {
            let e = c.effective(app);
            (e.channel.map(|c| c.to_string()), e.blue_percent)
        };
        // neither releasing: none at 50
        assert_eq!(eff(&c, "order"), (None, 50));
        assert_eq!(eff(&c, "search"), (None, 50));
        // global releasing, local idle: global for both
        c.apply(&g, &Op::Start);
        c.apply(&g, &Op::Ratio(20));
        assert_eq!(eff(&c, "order"), (Some("global".into()), 20));
        assert_eq!(eff(&c, "search"), (Some("global".into()), 20));
        // both releasing: local for its app
        c.apply(&l, &Op::Start);
        c.apply(&l, &Op::Ratio(90));
        assert_eq!(eff(&c, "order"), (Some("trade".into()), 90));
        assert_eq!(eff(&c, "search"), (Some("global".into()), 20));
        // local releasing, global not
        c.apply(&g, &Op::Finish);
        assert_eq!(eff(&c, "order"), (Some("trade".into()), 90));
        assert_eq!(eff(&c, "search"), (None, 50));
    }

    #[test]
    fn check_refuses_what_domain_4_refuses_and_changes_nothing() {
        let mut c = Channels::new();
        let (g, l, m) = (id("global"), id("trade"), id("pay"));
        c.apply(&l, &Op::Apps(vec!["order".into()]));
        let before = c.clone();
        assert_eq!(
            c.check(&g, &Op::Finish).unwrap_err().code(),
            "not_releasing"
        );
        assert_eq!(
            c.check(&g, &Op::Ratio(10)).unwrap_err().code(),
            "not_releasing"
        );
        assert_eq!(
            c.check(&m, &Op::Start).unwrap_err().code(),
            "channel_not_found"
        );
        assert_eq!(
            c.check(&m, &Op::Apps(vec!["order".into()]))
                .unwrap_err()
                .code(),
            "app_in_other_channel"
        );
        assert_eq!(
            c.check(&g, &Op::Apps(vec![])).unwrap_err().code(),
            "global_channel"
        );
        assert_eq!(
            c.check(&g, &Op::Delete).unwrap_err().code(),
            "global_channel"
        );
        c.apply(&l, &Op::Start);
        assert_eq!(
            c.check(&l, &Op::Start).unwrap_err().code(),
            "already_releasing"
        );
        assert_eq!(
            c.check(&l, &Op::Ratio(101)).unwrap_err().code(),
            "invalid_blue_percent"
        );
        assert_eq!(
            c.check(&l, &Op::Apps(vec!["x".into()])).unwrap_err().code(),
            "channel_releasing"
        );
        assert_eq!(
            c.check(&l, &Op::Delete).unwrap_err().code(),
            "channel_releasing"
        );
        assert!(c.check(&l, &Op::Ratio(100)).is_ok());
        assert!(c.check(&l, &Op::Ratio(0)).is_ok());
        // re-listing the same app in its own channel is fine
        let mut idle = before.clone();
        assert!(
            idle.check(&l, &Op::Apps(vec!["order".into(), "order".into()]))
                .is_ok()
        );
        idle.apply(&l, &Op::Apps(vec!["order".into(), "order".into()]));
        assert_eq!(idle.get("trade").unwrap().apps, vec!["order".to_string()]);
        assert_eq!(before.get("trade").unwrap().version, 1);
    }

    #[test]
    fn delete_frees_the_apps_and_finish_returns_to_neutral() {
        let mut c = Channels::new();
        let (l, m) = (id("trade"), id("pay"));
        c.apply(&l, &Op::Apps(vec!["order".into()]));
        c.apply(&l, &Op::Start);
        c.apply(&l, &Op::Ratio(0));
        c.apply(&l, &Op::Finish);
        let t = c.get("trade").unwrap();
        assert_eq!(
            (t.state, t.blue_percent, t.version),
            (ReleaseState::Idle, 50, 4)
        );
        c.apply(&l, &Op::Delete);
        assert!(c.get("trade").is_none());
        assert!(c.check(&m, &Op::Apps(vec!["order".into()])).is_ok());
    }

    #[test]
    fn app_names_are_validated() {
        assert!(normalize_apps(vec!["".into()]).is_err());
        assert!(normalize_apps(vec!["a\nb".into()]).is_err());
        assert!(normalize_apps(vec!["x".repeat(256)]).is_err());
        assert_eq!(
            normalize_apps(vec!["b".into(), "a".into(), "b".into()]).unwrap(),
            vec!["b".to_string(), "a".to_string()]
        );
    }
}
