//! Why the release core refuses something: an operation the channel rules of domain §1 and §4
//! do not allow, an app list or blue_percent out of bounds, a timeline document that does not
//! parse. Each has a stable `code` and a status [`Category`] (invalid argument, not found or
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
        }
    }
}

impl HasCategory for ReleaseError {
    fn category(&self) -> Category {
        use ReleaseError::*;
        match self {
            InvalidBluePercent(_) | InvalidApps(_) | GlobalChannel(_) | InvalidTimeline(_) => {
                Category::InvalidArgument
            }
            ChannelNotFound(_) => Category::NotFound,
            AlreadyReleasing(_)
            | NotReleasing(_)
            | ChannelReleasing(_)
            | AppInOtherChannel { .. } => Category::Conflict,
        }
    }
}
