//! The lane group routes (domain §7.1): `GET /api/v1/lane-groups`,
//! `GET|PUT|DELETE /api/v1/lane-groups/{id}`, with the channels' tokens, `ETag` / `If-Match`
//! (412 when stale) and errors. A PUT body is a [`LaneGroupSpec`]: unknown fields, a bad lane
//! id, `base` as a lane, an entry app outside the apps or a bad fallback are 400, an app
//! another group holds is 409; every refusal changes nothing.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use dyeline_model::release::{LaneGroup, LaneGroupId, LaneGroupOp, LaneGroupSpec, ReleaseError};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::{Ctx, ErrorBody, json_object, with_etag, writer};
use crate::auth::Access;
use crate::error::ControlError;
use crate::plane::{LaneGroupState, LaneGroupWrite};

/// `{"lane_groups": [...]}`.
#[derive(Serialize, ToSchema)]
pub struct LaneGroupList {
    /// Every lane group, by id.
    pub lane_groups: Vec<LaneGroupState>,
}

/// Lists the lane groups.
#[utoipa::path(get, path = "/api/v1/lane-groups", tag = "lane-groups",
    responses((status = 200, body = LaneGroupList), (status = 401, body = ErrorBody)))]
pub(super) async fn list_lane_groups(
    State(ctx): Ctx,
    headers: HeaderMap,
) -> Result<Response, ControlError> {
    ctx.auth.authorize(&headers, Access::Read)?;
    Ok(Json(LaneGroupList {
        lane_groups: ctx.plane.lane_groups(),
    })
    .into_response())
}

/// One lane group; its `ETag` is `"<version>"`.
#[utoipa::path(get, path = "/api/v1/lane-groups/{id}", tag = "lane-groups",
    params(("id" = String, Path, description = "Lane group id")),
    responses((status = 200, body = LaneGroupState), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub(super) async fn get_lane_group(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ControlError> {
    ctx.auth.authorize(&headers, Access::Read)?;
    let g = ctx.plane.lane_group(&id)?;
    let version = g.version;
    Ok(with_etag(Json(g).into_response(), Some(version)))
}

/// Reads the body of `PUT /api/v1/lane-groups/{id}` as group `id`: a JSON object with the
/// fields of [`LaneGroupSpec`] (its `id`, when given, equal to the path's), validated by
/// [`LaneGroup::from_spec`].
///
/// # Errors
/// [`ControlError::InvalidBody`] for a missing body or one that is not a JSON object;
/// [`ReleaseError::InvalidLaneGroup`] for an unknown field, a value of the wrong type, a bad
/// fallback, a bad or `base` lane key, an entry app outside the apps, thresholds out of range,
/// a body id other than the path's; [`ReleaseError::InvalidLaneGroupId`];
/// [`ReleaseError::InvalidApps`].
pub fn parse_lane_group_body(body: &[u8], id: &str) -> Result<LaneGroup, ControlError> {
    let shape = "{\"apps\": [...], \"entry_apps\": [...], \"lanes\": {\"<lane>\": {\"fallback\": \
                 \"base\"|\"none\"}}, \"reverse_fallback\": false}";
    let id = LaneGroupId::new(id)?;
    let m = json_object(body, shape)?;
    let spec: LaneGroupSpec = serde_json::from_value(Value::Object(m))
        .map_err(|e| ReleaseError::InvalidLaneGroup(format!("lane group {id:?}: {e}")))?;
    Ok(LaneGroup::from_spec(spec, Some(id.as_str()))?)
}

/// Answers an accepted write with its outcome and the group's `ETag`.
fn written(out: LaneGroupWrite, status: StatusCode) -> Response {
    let version = out.lane_group.as_ref().map(|g| g.version);
    with_etag((status, Json(out)).into_response(), version)
}

/// Creates a lane group or wholly replaces it (201 when created). 409 when one of its apps is
/// in another group; 400 for a bad id, unknown fields, `base` or a bad id as a lane, a bad
/// fallback, an entry app outside the apps.
#[utoipa::path(put, path = "/api/v1/lane-groups/{id}", tag = "lane-groups",
    request_body = LaneGroupSpec,
    params(("id" = String, Path, description = "Lane group id, [a-z0-9][a-z0-9-]{0,62}"),
           ("If-Match" = Option<String>, Header, description = "\"<version>\" (\"0\": only if it does not exist); 412 if stale")),
    security(("bearer" = [])),
    responses((status = 200, body = LaneGroupWrite), (status = 201, body = LaneGroupWrite),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 409, body = ErrorBody), (status = 412, body = ErrorBody)))]
pub(super) async fn put_lane_group(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ControlError> {
    let (actor, if_match) = writer(&ctx, &headers)?;
    let group = parse_lane_group_body(&body, &id)?;
    let status = match ctx.plane.lane_group(&id) {
        Ok(_) => StatusCode::OK,
        Err(_) => StatusCode::CREATED,
    };
    let out = ctx
        .plane
        .write_lane_group(LaneGroupOp::Put(group), &actor, if_match)
        .await?;
    Ok(written(out, status))
}

/// Deletes a lane group; its apps are in no group from then on.
#[utoipa::path(delete, path = "/api/v1/lane-groups/{id}", tag = "lane-groups",
    params(("id" = String, Path, description = "Lane group id"),
           ("If-Match" = Option<String>, Header, description = "\"<version>\"; 412 if stale")),
    security(("bearer" = [])),
    responses((status = 200, body = LaneGroupWrite), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 412, body = ErrorBody)))]
pub(super) async fn delete_lane_group(
    State(ctx): Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ControlError> {
    let (actor, if_match) = writer(&ctx, &headers)?;
    let id = LaneGroupId::new(&id)?;
    let out = ctx
        .plane
        .write_lane_group(LaneGroupOp::Delete(id), &actor, if_match)
        .await?;
    Ok(written(out, StatusCode::OK))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_read_as_the_group_of_the_path() {
        let g = parse_lane_group_body(
            br#"{"apps": ["gateway", "order"], "entry_apps": ["gateway"],
                "lanes": {"gray": {"fallback": "none"}}}"#,
            "mall",
        )
        .unwrap();
        assert_eq!(g.id().as_str(), "mall");
        assert_eq!(g.entry_apps(), ["gateway"]);
        let code = |b: &str, id: &str| parse_lane_group_body(b.as_bytes(), id).unwrap_err().code();
        assert_eq!(code(r#"{"apps": []}"#, "Mall"), "invalid_lane_group_id");
        assert_eq!(code("", "mall"), "invalid_body");
        assert_eq!(code("[1]", "mall"), "invalid_body");
        assert_eq!(code("{", "mall"), "invalid_body");
        for (body, why) in [
            (r#"{"apps": [], "owner": "x"}"#, "unknown field `owner`"),
            (
                r#"{"apps": [], "lanes": {"gray": {"fallback": "strict"}}}"#,
                "unknown variant `strict`",
            ),
            (
                r#"{"apps": [], "lanes": {"base": {}}}"#,
                "`base` is not a lane",
            ),
            (r#"{"apps": [], "lanes": {"Gray": {}}}"#, "lane id \"Gray\""),
            (r#"{"apps": ["a"], "entry_apps": ["b"]}"#, "entry app \"b\""),
            (r#"{"id": "promo", "apps": []}"#, "\"promo\""),
            (r#"{"apps": "order"}"#, "invalid type"),
            (r#"{"entry_apps": []}"#, "missing field `apps`"),
        ] {
            let e = parse_lane_group_body(body.as_bytes(), "mall").unwrap_err();
            assert_eq!(e.code(), "invalid_lane_group", "{body}");
            assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{body}");
            assert!(e.to_string().contains(why), "{body}: {e}");
        }
    }
}
