//! The control plane's errors: each has a status [`Category`] (its HTTP status comes from the
//! one table, `dyeline_model::status`) and a stable `code`, and is rendered as
//! `{"error": {"code", "message"}}` by the API (issue: control plane, item 4).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use dyeline_model::release::ReleaseError;
use dyeline_model::time::BadTime;
use dyeline_model::{Category, HasCategory};

use crate::alerts::SpikeRefusal;
use serde_json::json;

/// Why a control-plane request was refused. Every refused request changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// A channel id that is not `[a-z0-9][a-z0-9-]{0,62}` (domain §1). 400 `invalid_channel_id`.
    #[error("channel id {0:?} is invalid: it must match [a-z0-9][a-z0-9-]{{0,62}}")]
    InvalidChannelId(String),
    /// A body that is missing or not the JSON object the route takes. 400 `invalid_body`.
    #[error("{0}")]
    InvalidBody(String),
    /// An operation's note that is not a JSON string or is longer than
    /// [`crate::plane::NOTE_MAX_CHARS`] characters after trimming. 400 `invalid_note`.
    #[error("{0}")]
    InvalidNote(String),
    /// A query parameter that does not parse. 400 `invalid_query`.
    #[error("{0}")]
    InvalidQuery(String),
    /// An `If-Match` header that is not `"<version>"` or `*`. 400 `invalid_if_match`.
    #[error("If-Match {0:?} is not a quoted version like \"3\" or *")]
    InvalidIfMatch(String),
    /// `If-Match` named a version other than the channel's. 412 `version_mismatch`.
    #[error("channel {channel:?} is at version {actual}, not {expected}")]
    VersionMismatch {
        /// The channel.
        channel: String,
        /// The version the request named.
        expected: u64,
        /// The channel's version (0 when it does not exist).
        actual: u64,
    },
    /// `If-Match` named a version other than the lane group's. 412 `version_mismatch`.
    #[error("lane group {lane_group:?} is at version {actual}, not {expected}")]
    LaneGroupVersionMismatch {
        /// The lane group.
        lane_group: String,
        /// The version the request named.
        expected: u64,
        /// The group's version (0 when it does not exist).
        actual: u64,
    },
    /// No token, or a token that is not configured. 401 `unauthorized`.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// A valid token whose role does not allow the request. 403 `forbidden`.
    #[error("token {0:?} may only read")]
    Forbidden(String),
    /// The control database failed. 500 `storage`.
    #[error("control database: {0}")]
    Storage(String),
    /// An operation or timeline the release rules refuse (its message and code as is): 400
    /// for `invalid_blue_percent`, `invalid_apps`, `global_channel`, `invalid_timeline`,
    /// `invalid_lane_group_id` and `invalid_lane_group`, 404 for `channel_not_found` and
    /// `lane_group_not_found`, 409 for `already_releasing`, `not_releasing`,
    /// `channel_releasing`, `app_in_other_channel` and `app_in_other_lane_group`.
    #[error(transparent)]
    Release(#[from] ReleaseError),
    /// The spike guard (domain §4): the write moves traffic toward a colour whose one-sided
    /// error spike fires; the answer carries the alert.
    #[error("{0}")]
    SpikeGuard(Box<SpikeRefusal>),
}

impl ControlError {
    /// The HTTP status of this error: its category's
    /// ([`Category::http_status`](dyeline_model::Category::http_status)).
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.category().http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The stable machine-readable code of this error.
    pub fn code(&self) -> &'static str {
        use ControlError::*;
        match self {
            InvalidChannelId(_) => "invalid_channel_id",
            InvalidBody(_) => "invalid_body",
            InvalidNote(_) => "invalid_note",
            InvalidQuery(_) => "invalid_query",
            InvalidIfMatch(_) => "invalid_if_match",
            VersionMismatch { .. } | LaneGroupVersionMismatch { .. } => "version_mismatch",
            Unauthorized(_) => "unauthorized",
            Forbidden(_) => "forbidden",
            Storage(_) => "storage",
            SpikeGuard(_) => "spike_guard",
            Release(e) => e.code(),
        }
    }
}

impl HasCategory for ControlError {
    fn category(&self) -> Category {
        use ControlError::*;
        match self {
            InvalidChannelId(_) | InvalidBody(_) | InvalidNote(_) | InvalidQuery(_)
            | InvalidIfMatch(_) => Category::InvalidArgument,
            VersionMismatch { .. } | LaneGroupVersionMismatch { .. } => {
                Category::PreconditionFailed
            }
            Unauthorized(_) => Category::Unauthenticated,
            Forbidden(_) => Category::PermissionDenied,
            Storage(_) => Category::Internal,
            SpikeGuard(_) => Category::Conflict,
            Release(e) => e.category(),
        }
    }
}

impl From<BadTime> for ControlError {
    fn from(e: BadTime) -> Self {
        ControlError::InvalidQuery(e.to_string())
    }
}

impl From<sqlx::Error> for ControlError {
    fn from(e: sqlx::Error) -> Self {
        ControlError::Storage(e.to_string())
    }
}

impl From<sqlx::migrate::MigrateError> for ControlError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        ControlError::Storage(e.to_string())
    }
}

impl IntoResponse for ControlError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut body = json!({"error": {"code": self.code(), "message": self.to_string()}});
        if let ControlError::SpikeGuard(r) = &self {
            body["error"]["alert"] = serde_json::to_value(&r.alert).unwrap_or_default();
        }
        let mut response = (status, Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_its_status_and_code() {
        let s = || String::from("x");
        let release = ControlError::Release;
        let cases = [
            (
                ControlError::InvalidChannelId(s()),
                400,
                "invalid_channel_id",
            ),
            (
                release(ReleaseError::InvalidBluePercent(s())),
                400,
                "invalid_blue_percent",
            ),
            (release(ReleaseError::InvalidApps(s())), 400, "invalid_apps"),
            (ControlError::InvalidBody(s()), 400, "invalid_body"),
            (ControlError::InvalidNote(s()), 400, "invalid_note"),
            (ControlError::InvalidQuery(s()), 400, "invalid_query"),
            (ControlError::InvalidIfMatch(s()), 400, "invalid_if_match"),
            (
                release(ReleaseError::GlobalChannel("deleted")),
                400,
                "global_channel",
            ),
            (
                release(ReleaseError::InvalidTimeline(s())),
                400,
                "invalid_timeline",
            ),
            (
                release(ReleaseError::ChannelNotFound(s())),
                404,
                "channel_not_found",
            ),
            (
                release(ReleaseError::AlreadyReleasing(s())),
                409,
                "already_releasing",
            ),
            (
                release(ReleaseError::NotReleasing(s())),
                409,
                "not_releasing",
            ),
            (
                release(ReleaseError::ChannelReleasing(s())),
                409,
                "channel_releasing",
            ),
            (
                release(ReleaseError::AppInOtherChannel {
                    app: s(),
                    channel: s(),
                }),
                409,
                "app_in_other_channel",
            ),
            (
                ControlError::VersionMismatch {
                    channel: s(),
                    expected: 1,
                    actual: 2,
                },
                412,
                "version_mismatch",
            ),
            (
                ControlError::LaneGroupVersionMismatch {
                    lane_group: s(),
                    expected: 1,
                    actual: 2,
                },
                412,
                "version_mismatch",
            ),
            (
                release(ReleaseError::InvalidLaneGroupId(s())),
                400,
                "invalid_lane_group_id",
            ),
            (
                release(ReleaseError::InvalidLaneGroup(s())),
                400,
                "invalid_lane_group",
            ),
            (
                release(ReleaseError::LaneGroupNotFound(s())),
                404,
                "lane_group_not_found",
            ),
            (
                release(ReleaseError::AppInOtherLaneGroup {
                    app: s(),
                    lane_group: s(),
                }),
                409,
                "app_in_other_lane_group",
            ),
            (ControlError::Unauthorized("no token"), 401, "unauthorized"),
            (ControlError::Forbidden(s()), 403, "forbidden"),
            (ControlError::Storage(s()), 500, "storage"),
        ];
        for (e, status, code) in cases {
            assert_eq!((e.status().as_u16(), e.code()), (status, code), "{e:?}");
            let r = e.into_response();
            assert_eq!(r.status().as_u16(), status);
        }
    }
}
