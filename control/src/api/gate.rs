//! The release gate (issue 28 item 4): `GET|POST /api/v1/channels/{id}/gate` and
//! `GET|POST /api/v1/lane-groups/{id}/gate` answer whether a release may go on:
//! `{"pass": bool, "reasons": [...]}`, failing while an alert of a type in `[gate] fail_on`
//! ([`GateSettings`]) fires for that channel (its `channel` label) or lane group (its
//! `lane_group` label), one reason per alert.
//!
//! Two callers read it differently, and the status fits both:
//! - a Flagger webhook (`confirm-promotion`, `pre-rollout`, `rollout`, ...) POSTs its JSON and
//!   judges by the status alone (2xx passes): a failing gate answers **409**, a 4xx that its
//!   retrying client does not retry;
//! - an Argo Rollouts `web` metric GETs it and evaluates the JSON (`successCondition:
//!   result.pass == true`), but counts a non-2xx answer as an error of the measurement, not a
//!   failure: `?fail_status=200` makes a failing gate answer 200 with `"pass": false`.
//!
//! Reads: the token a read needs (none when `api.read_requires_token` is off); a POST here
//! only reads too. Unknown channel or group: 404 in the API's error shape.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use dyeline_model::Detection;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Ctx, ErrorBody};
use crate::alerts::FiringAlert;
use crate::auth::Access;
use crate::error::ControlError;

/// `[gate]`: which firing alerts fail the gate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GateSettings {
    /// The finding types whose firing alerts fail a channel's or lane group's gate (names as
    /// in `/api/v1/findings`; an unknown one is refused when the configuration loads).
    pub fail_on: Vec<Detection>,
}

impl Default for GateSettings {
    fn default() -> Self {
        GateSettings {
            fail_on: vec![
                Detection::ErrorSpike,
                Detection::CrossColorHop,
                Detection::DrainedSide,
                Detection::LaneLeak,
                Detection::LaneErrorSpike,
            ],
        }
    }
}

/// The gate's answer.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct GateAnswer {
    /// True when no alert of a `fail_on` type fires for the channel or group.
    pub pass: bool,
    /// One per failing alert, the earliest started first; empty when passing.
    pub reasons: Vec<GateReason>,
    /// The finding types that fail the gate (`[gate] fail_on`).
    pub fail_on: Vec<String>,
}

/// Why the gate fails: one firing alert.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct GateReason {
    /// The finding type, e.g. `error_spike`.
    #[serde(rename = "type")]
    pub kind: String,
    /// For people: the alert, its labels and summary.
    pub message: String,
    /// The alert.
    pub alert: FiringAlert,
}

/// The answer for the alerts whose label `label` is `id` among `firing`.
pub fn judge(settings: &GateSettings, firing: &[FiringAlert], label: &str, id: &str) -> GateAnswer {
    let mut failing: Vec<&FiringAlert> = firing
        .iter()
        .filter(|a| a.label(label) == Some(id))
        .filter(|a| settings.fail_on.iter().any(|d| d.as_str() == a.detection()))
        .collect();
    failing.sort_by_key(|a| a.starts_at_unix_nano);
    let reasons: Vec<GateReason> = failing
        .into_iter()
        .map(|a| {
            let labels: Vec<String> = a
                .labels
                .iter()
                .filter(|(k, _)| *k != "alertname")
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            GateReason {
                kind: a.detection().to_owned(),
                message: format!(
                    "{} firing ({}): {}",
                    a.label("alertname").unwrap_or("alert"),
                    labels.join(" "),
                    a.summary
                ),
                alert: a.clone(),
            }
        })
        .collect();
    GateAnswer {
        pass: reasons.is_empty(),
        reasons,
        fail_on: settings
            .fail_on
            .iter()
            .map(|d| d.as_str().to_owned())
            .collect(),
    }
}

/// The status of a failing answer: `fail_status` of the query (200..=599), else 409.
fn fail_status(query: &HashMap<String, String>) -> Result<StatusCode, ControlError> {
    let Some(v) = query.get("fail_status") else {
        return Ok(StatusCode::CONFLICT);
    };
    v.trim()
        .parse::<u16>()
        .ok()
        .filter(|s| (200..=599).contains(s))
        .and_then(|s| StatusCode::from_u16(s).ok())
        .ok_or_else(|| {
            ControlError::InvalidQuery(format!("fail_status {v:?} is not an HTTP status 200..=599"))
        })
}

fn answer(
    ctx: &super::ControlApi,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
    label: &str,
    id: &str,
) -> Result<Response, ControlError> {
    ctx.auth.authorize(headers, Access::Read)?;
    let failing = fail_status(query)?;
    if label == "channel" {
        ctx.plane.channel(id)?;
    } else {
        ctx.plane.lane_group(id)?;
    }
    let a = judge(&ctx.gate, &ctx.plane.firing_alerts(), label, id);
    let status = if a.pass { StatusCode::OK } else { failing };
    Ok((status, Json(a)).into_response())
}

/// The release gate of a channel: 200 `{"pass": true, ...}`, or 409 (`?fail_status=` another
/// status, e.g. 200 for Argo Rollouts) `{"pass": false, "reasons": [...]}` while an alert of
/// a `[gate] fail_on` type fires for it.
#[utoipa::path(get, path = "/api/v1/channels/{id}/gate", tag = "gate",
    params(("id" = String, Path, description = "Channel id"),
           ("fail_status" = Option<u16>, Query, description = "Status of a failing answer (default 409; 200 for Argo Rollouts' web metric)")),
    responses((status = 200, body = GateAnswer), (status = 409, body = GateAnswer),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn channel_gate(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, ControlError> {
    answer(&ctx, &headers, &q, "channel", &id)
}

/// The channel's gate for a Flagger webhook (which POSTs its JSON; the body is not read).
#[utoipa::path(post, path = "/api/v1/channels/{id}/gate", tag = "gate",
    params(("id" = String, Path, description = "Channel id"),
           ("fail_status" = Option<u16>, Query, description = "Status of a failing answer (default 409)")),
    responses((status = 200, body = GateAnswer), (status = 409, body = GateAnswer),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn channel_gate_post(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, ControlError> {
    answer(&ctx, &headers, &q, "channel", &id)
}

/// The release gate of a lane group: as a channel's, over the alerts labelled with the group.
#[utoipa::path(get, path = "/api/v1/lane-groups/{id}/gate", tag = "gate",
    params(("id" = String, Path, description = "Lane group id"),
           ("fail_status" = Option<u16>, Query, description = "Status of a failing answer (default 409; 200 for Argo Rollouts' web metric)")),
    responses((status = 200, body = GateAnswer), (status = 409, body = GateAnswer),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn lane_group_gate(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, ControlError> {
    answer(&ctx, &headers, &q, "lane_group", &id)
}

/// The lane group's gate for a Flagger webhook (the body is not read).
#[utoipa::path(post, path = "/api/v1/lane-groups/{id}/gate", tag = "gate",
    params(("id" = String, Path, description = "Lane group id"),
           ("fail_status" = Option<u16>, Query, description = "Status of a failing answer (default 409)")),
    responses((status = 200, body = GateAnswer), (status = 409, body = GateAnswer),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn lane_group_gate_post(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, ControlError> {
    answer(&ctx, &headers, &q, "lane_group", &id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(kind: &str, label: &str, id: &str, start: i64) -> FiringAlert {
        FiringAlert {
            labels: [("alertname", "DyelineX"), ("type", kind), (label, id)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            summary: "sum".into(),
            starts_at_unix_nano: start,
        }
    }

    #[test]
    fn the_gate_fails_on_its_types_for_its_channel_or_group_only() {
        let s = GateSettings::default();
        let firing = [
            alert("error_spike", "channel", "trade", 5),
            alert("cross_color_hop", "channel", "trade", 2),
            alert("ratio_deviation", "channel", "trade", 1),
            alert("error_spike", "channel", "pay", 1),
            alert("lane_leak", "lane_group", "gray", 1),
            alert("lane_tag_dropped", "lane_group", "gray", 1),
        ];
        let a = judge(&s, &firing, "channel", "trade");
        assert!(!a.pass);
        let kinds: Vec<&str> = a.reasons.iter().map(|r| r.kind.as_str()).collect();
        assert_eq!(kinds, ["cross_color_hop", "error_spike"], "earliest first");
        assert!(
            a.reasons[0].message.contains("channel=trade"),
            "{}",
            a.reasons[0].message
        );
        assert!(judge(&s, &firing, "channel", "idle").pass);
        let g = judge(&s, &firing, "lane_group", "gray");
        assert_eq!(g.reasons.len(), 1);
        let only_spikes = GateSettings {
            fail_on: vec![Detection::ErrorSpike],
        };
        assert!(judge(&only_spikes, &firing[1..3], "channel", "trade").pass);
        assert_eq!(
            serde_json::to_value(judge(&s, &[], "channel", "x")).unwrap()["fail_on"][0],
            "error_spike"
        );
    }

    #[test]
    fn fail_status_is_409_or_a_status_given() {
        let q = |v: &str| HashMap::from([("fail_status".to_owned(), v.to_owned())]);
        assert_eq!(fail_status(&HashMap::new()).unwrap(), StatusCode::CONFLICT);
        assert_eq!(fail_status(&q("200")).unwrap(), StatusCode::OK);
        assert_eq!(
            fail_status(&q("503")).unwrap(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        for bad in ["", "abc", "99", "600", "-1"] {
            assert_eq!(
                fail_status(&q(bad)).unwrap_err().code(),
                "invalid_query",
                "{bad}"
            );
        }
    }
}
