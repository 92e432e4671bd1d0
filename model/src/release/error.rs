//! Why the release core refuses something: an operation the channel rules of domain §1 and §4
//! or the lane group rules of §7.1 do not allow, an app list, blue_percent or lane group out of
//! bounds, a timeline document that does not parse. Each has a stable `code` and a status [`Category`] (invalid argument, not found or
//! conflict); `dyeline-control` answers them with the category's HTTP status.

use crate::status::{Category, HasCategory};

/// Why an operation or a timeline was refused. A refusal changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseError {
    /// blue_percent missing, not an integer, or outside 0..=100 (domain §4).
    /// `invalid_blue_percent`.
    #[error("{0}")]
    InvalidBluePercent(String),
    /// An app list that is not a list of non-empty names. `invalid_apps`.
    #[error("{0}")]
    InvalidApps(String),
    /// Setting the apps of, or deleting, the implicit `global` channel. `global_channel`.
    #[error("the global channel holds every app implicitly; it cannot be {0}")]
    GlobalChannel(&'static str),
    /// A timeline that cannot be read or imported. `invalid_timeline`.
    #[error("invalid timeline: {0}")]
    InvalidTimeline(String),
    /// No such channel. `channel_not_found`.
    #[error("channel {0:?} does not exist")]
    ChannelNotFound(String),
    /// `start` on a releasing channel (domain §4). `already_releasing`.
    #[error("channel {0:?} is already releasing")]
    AlreadyReleasing(String),
    /// `ratio` or `finish` on an idle channel (domain §4). `not_releasing`.
    #[error("channel {0:?} is not releasing")]
    NotReleasing(String),
    /// Changing the apps of, or deleting, a releasing channel. `channel_releasing`.
    #[error("channel {0:?} is releasing: its apps change only while it is idle")]
    ChannelReleasing(String),
    /// An app already in another local channel (domain §1). `app_in_other_channel`.
    #[error("app {app:?} is already in channel {channel:?}")]
    AppInOtherChannel {
        /// The app.
        app: String,
        /// The local channel that holds it.
        channel: String,
    },
    /// A lane group id outside `[a-z0-9][a-z0-9-]{0,62}`. `invalid_lane_group_id`.
    #[error("lane group id {0:?} is invalid: it must match [a-z0-9][a-z0-9-]{{0,62}}")]
    InvalidLaneGroupId(String),
    /// A lane group that breaks the rules of domain §7.1 (an entry app outside its apps,
    /// `base` or a bad id as a lane, thresholds out of range, an unknown field).
    /// `invalid_lane_group`.
    #[error("{0}")]
    InvalidLaneGroup(String),
    /// No such lane group. `lane_group_not_found`.
    #[error("lane group {0:?} does not exist")]
    LaneGroupNotFound(String),
    /// An app already in another lane group (domain §7.1). `app_in_other_lane_group`.
    #[error("app {app:?} is already in lane group {lane_group:?}")]
    AppInOtherLaneGroup {
        /// The app.
        app: String,
        /// The lane group that holds it.
        lane_group: String,
    },
}

impl ReleaseError {
    /// The stable machine-readable code of this error.
    pub fn code(&self) -> &'static str {
        use ReleaseError::*;
        match self {
            InvalidBluePercent(_) => "invalid_blue_percent",
            InvalidApps(_) => "invalid_apps",
            GlobalChannel(_) => "global_channel",
            InvalidTimeline(_) => "invalid_timeline",
            ChannelNotFound(_) => "channel_not_found",
            AlreadyReleasing(_) => "already_releasing",
            NotReleasing(_) => "not_releasing",
            ChannelReleasing(_) => "channel_releasing",
            AppInOtherChannel { .. } => "app_in_other_channel",
            InvalidLaneGroupId(_) => "invalid_lane_group_id",
            InvalidLaneGroup(_) => "invalid_lane_group",
            LaneGroupNotFound(_) => "lane_group_not_found",
            AppInOtherLaneGroup { .. } => "app_in_other_lane_group",
        }
    }
}

impl HasCategory for ReleaseError {
    fn category(&self) -> Category {
        use ReleaseError::*;
        match self {
            InvalidBluePercent(_)
            | InvalidApps(_)
            | GlobalChannel(_)
            | InvalidTimeline(_)
            | InvalidLaneGroupId(_)
            | InvalidLaneGroup(_) => Category::InvalidArgument,
            ChannelNotFound(_) | LaneGroupNotFound(_) => Category::NotFound,
            AlreadyReleasing(_)
            | NotReleasing(_)
            | ChannelReleasing(_)
            | AppInOtherChannel { .. }
            | AppInOtherLaneGroup { .. } => Category::Conflict,
        }
    }
}
