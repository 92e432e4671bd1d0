//! Lane groups in the control plane (domain §7.1), through the routes in-process: create,
//! replace, read and delete with `ETag` / `If-Match`; every refusal (400, 404, 409, 412, 401,
//! 403) with its code and nothing changed; the op log with actors and one sequence shared with
//! the channels; restart; the timeline and its import (lanes-small), and a database from
//! before lane groups.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use dyeline_control::api::{ControlApi, router};
use dyeline_control::auth::{ApiToken, Auth, Role};
use dyeline_control::plane::ControlPlane;
use dyeline_model::release::{LaneGroupOp, Op, TimelineDoc};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

mod common;

const WRITE: &str = "write-token-0123456789";
const READ: &str = "read-token-0123456789";
const LANES_SMALL: &str =
    include_str!("../../../shared/fixtures/analysis/lanes-small/timeline.json");
const LANES_WALK: &str = include_str!("../../../shared/fixtures/analysis/lanes-walk/timeline.json");

struct Api {
    plane: Arc<ControlPlane>,
    app: axum::Router,
    _dir: tempfile::TempDir,
}

async fn api() -> Api {
    let dir = tempfile::tempdir().unwrap();
    let plane = Arc::new(ControlPlane::open(dir.path()).await.unwrap());
    let tokens = vec![
        ApiToken {
            name: "release-bot".into(),
            token: WRITE.into(),
            role: Role::Write,
        },
        ApiToken {
            name: "viewer".into(),
            token: READ.into(),
            role: Role::Read,
        },
    ];
    let (_, shutdown) = tokio::sync::watch::channel(false);
    let ctx = Arc::new(ControlApi {
        plane: Arc::clone(&plane),
        auth: Arc::new(Auth::new(tokens, false)),
        apply_spread: Duration::ZERO,
        shutdown,
        gate: Default::default(),
    });
    let (app, _) = router(ctx).split_for_parts();
    Api {
        plane,
        app,
        _dir: dir,
    }
}

/// (status, JSON body, ETag).
async fn call(
    api: &Api,
    method: &str,
    path: &str,
    body: Option<&str>,
    token: Option<&str>,
    if_match: Option<&str>,
) -> (StatusCode, Value, Option<String>) {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    if let Some(m) = if_match {
        req = req.header("if-match", m);
    }
    let req = req
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned())))
        .unwrap();
    let res = api.app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let etag = res
        .headers()
        .get("etag")
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, v, etag)
}

async fn put(
    api: &Api,
    id: &str,
    body: &str,
    if_match: Option<&str>,
) -> (StatusCode, Value, Option<String>) {
    call(
        api,
        "PUT",
        &format!("/api/v1/lane-groups/{id}"),
        Some(body),
        Some(WRITE),
        if_match,
    )
    .await
}

const MALL: &str = r#"{"apps": ["gateway", "order"], "entry_apps": ["gateway"],
    "lanes": {"gray": {"fallback": "base"}, "gray2": {"fallback": "none"}}}"#;

#[tokio::test]
async fn groups_are_created_replaced_read_and_deleted_with_etags() {
    let api = api().await;
    let (status, v, etag) = put(&api, "mall", MALL, Some("\"0\"")).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(etag.as_deref(), Some("\"1\""));
    assert_eq!(v["seq"], 1);
    assert_eq!(v["lane_group"]["version"], 1);
    assert_eq!(v["lane_group"]["id"], "mall");
    assert_eq!(v["lane_group"]["lanes"]["gray2"]["fallback"], "none");
    assert_eq!(v["lane_group"]["reverse_fallback"], false);
    assert!(v["lane_group"].get("thresholds").is_none(), "{v}");

    // replaced wholly: order leaves, thresholds given
    let (status, v, etag) = put(
        &api,
        "mall",
        r#"{"id": "mall", "apps": ["gateway"], "reverse_fallback": true,
            "thresholds": {"spike_min_requests": 50}}"#,
        Some("\"1\""),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(etag.as_deref(), Some("\"2\""));
    assert_eq!(v["lane_group"]["apps"], json!(["gateway"]));
    assert_eq!(v["lane_group"]["entry_apps"], json!([]));
    assert_eq!(v["lane_group"]["lanes"], json!({}));
    assert_eq!(v["lane_group"]["thresholds"]["spike_min_requests"], 50);
    assert_eq!(v["lane_group"]["thresholds"]["spike_factor"], 3.0);
    assert!(api.plane.lane_group_of("order").is_none());

    let (status, v, etag) = call(&api, "GET", "/api/v1/lane-groups/mall", None, None, None).await;
    assert_eq!((status, etag.as_deref()), (StatusCode::OK, Some("\"2\"")));
    assert_eq!(
        (v["version"].as_u64(), v["reverse_fallback"].as_bool()),
        (Some(2), Some(true))
    );
    put(&api, "promo", r#"{"apps": ["coupon", "order"]}"#, None).await;
    let (status, v, _) = call(&api, "GET", "/api/v1/lane-groups", None, None, None).await;
    assert_eq!(status, StatusCode::OK);
    let ids: Vec<&str> = v["lane_groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["mall", "promo"]);

    let (status, v, etag) = call(
        &api,
        "DELETE",
        "/api/v1/lane-groups/promo",
        None,
        Some(WRITE),
        Some("\"1\""),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        (v["seq"].as_u64(), &v["lane_group"], etag),
        (Some(4), &Value::Null, None)
    );
    assert!(api.plane.lane_group_of("coupon").is_none());
    let (status, v, _) = call(&api, "GET", "/api/v1/lane-groups/promo", None, None, None).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("lane_group_not_found"))
    );
    assert_eq!(api.plane.latest_seq(), 4);
}

/// method, path, body, token, If-Match, status, code.
type Case<'a> = (
    &'a str,
    String,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    u16,
    &'a str,
);

/// Every refusal: its status and code, and nothing changed (groups, versions, sequence, op
/// log).
#[tokio::test]
async fn refusals_get_their_status_and_change_nothing() {
    let api = api().await;
    put(&api, "mall", MALL, None).await;
    let snapshot = |api: &Api| {
        (
            api.plane.latest_seq(),
            api.plane.lane_groups(),
            api.plane.lane_group_records(None).len(),
        )
    };
    let before = snapshot(&api);
    let g = "/api/v1/lane-groups";
    // PUTs with the write token: (id, body, If-Match, status, code)
    let puts = [
        // an app already in another group: 409 naming the group
        (
            "promo",
            Some(r#"{"apps": ["coupon", "order"]}"#),
            None,
            409,
            "app_in_other_lane_group",
        ),
        (
            "Mall",
            Some(r#"{"apps": []}"#),
            None,
            400,
            "invalid_lane_group_id",
        ),
        (
            "promo",
            Some(r#"{"apps": ["coupon"], "lanes": {"base": {}}}"#),
            None,
            400,
            "invalid_lane_group",
        ),
        (
            "promo",
            Some(r#"{"apps": ["coupon"], "lanes": {"gray lane": {}}}"#),
            None,
            400,
            "invalid_lane_group",
        ),
        (
            "promo",
            Some(r#"{"apps": ["coupon"], "entry_apps": ["gateway"]}"#),
            None,
            400,
            "invalid_lane_group",
        ),
        (
            "promo",
            Some(r#"{"apps": ["coupon"], "colour": "blue"}"#),
            None,
            400,
            "invalid_lane_group",
        ),
        (
            "promo",
            Some(r#"{"apps": ["coupon"], "lanes": {"gray": {"fallback": "green"}}}"#),
            None,
            400,
            "invalid_lane_group",
        ),
        (
            "promo",
            Some(r#"{"id": "mall", "apps": ["coupon"]}"#),
            None,
            400,
            "invalid_lane_group",
        ),
        ("promo", Some("not json"), None, 400, "invalid_body"),
        ("promo", None, None, 400, "invalid_body"),
        ("mall", Some(MALL), Some("soon"), 400, "invalid_if_match"),
        // 412: stale, or "0" for a group that exists
        ("mall", Some(MALL), Some("\"7\""), 412, "version_mismatch"),
        ("mall", Some(MALL), Some("\"0\""), 412, "version_mismatch"),
    ];
    let mut cases: Vec<Case> = puts
        .into_iter()
        .map(|(id, body, if_match, status, code)| {
            (
                "PUT",
                format!("{g}/{id}"),
                body,
                Some(WRITE),
                if_match,
                status,
                code,
            )
        })
        .collect();
    let others: [Case; 7] = [
        (
            "DELETE",
            format!("{g}/mall"),
            None,
            Some(WRITE),
            Some("\"2\""),
            412,
            "version_mismatch",
        ),
        (
            "DELETE",
            format!("{g}/promo"),
            None,
            Some(WRITE),
            None,
            404,
            "lane_group_not_found",
        ),
        (
            "GET",
            format!("{g}/promo"),
            None,
            None,
            None,
            404,
            "lane_group_not_found",
        ),
        (
            "GET",
            format!("{g}/No"),
            None,
            None,
            None,
            400,
            "invalid_lane_group_id",
        ),
        (
            "PUT",
            format!("{g}/promo"),
            Some(r#"{"apps": []}"#),
            None,
            None,
            401,
            "unauthorized",
        ),
        (
            "PUT",
            format!("{g}/promo"),
            Some(r#"{"apps": []}"#),
            Some("wrong-token-0123456789"),
            None,
            401,
            "unauthorized",
        ),
        (
            "DELETE",
            format!("{g}/mall"),
            None,
            Some(READ),
            None,
            403,
            "forbidden",
        ),
    ];
    cases.extend(others);
    for (method, path, body, token, if_match, status, code) in cases {
        let (got, v, _) = call(&api, method, &path, body, token, if_match).await;
        assert_eq!(
            (got.as_u16(), v["error"]["code"].as_str()),
            (status, Some(code)),
            "{method} {path} {body:?}: {v}"
        );
        assert!(!v["error"]["message"].as_str().unwrap().is_empty());
        assert_eq!(
            snapshot(&api),
            before,
            "{method} {path} {body:?} changed something"
        );
    }
    let (_, v, _) = put(&api, "promo", r#"{"apps": ["coupon", "order"]}"#, None).await;
    assert_eq!(
        v["error"]["message"],
        "app \"order\" is already in lane group \"mall\""
    );
    // the lane group still reads as it was
    let (_, v, etag) = call(
        &api,
        "GET",
        "/api/v1/lane-groups/mall",
        None,
        Some(READ),
        None,
    )
    .await;
    assert_eq!(
        (v["version"].as_u64(), etag.as_deref()),
        (Some(1), Some("\"1\""))
    );
}

#[tokio::test]
async fn every_change_is_in_the_op_log_and_the_timeline_in_one_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let plane = ControlPlane::open(dir.path()).await.unwrap();
    let mall = |apps: &str| {
        LaneGroupOp::Put(
            serde_json::from_str(&format!(r#"{{"id": "mall", "apps": {apps}}}"#)).unwrap(),
        )
    };
    plane
        .write("trade", Op::Apps(vec!["order".into()]), "alice", None, None)
        .await
        .unwrap();
    let w = plane
        .write_lane_group(mall(r#"["order"]"#), "bob", None)
        .await
        .unwrap();
    assert_eq!(w.seq, 2);
    assert_eq!(
        plane.latest_seq(),
        2,
        "a group change moves the data version"
    );
    plane
        .write("trade", Op::Start, "alice", None, None)
        .await
        .unwrap();
    plane
        .write_lane_group(mall(r#"["order", "cart"]"#), "carol", Some(1))
        .await
        .unwrap();
    let del = LaneGroupOp::Delete(dyeline_model::release::LaneGroupId::new("mall").unwrap());
    plane.write_lane_group(del, "dave", Some(2)).await.unwrap();
    let log: Vec<(u64, &str, String)> = plane
        .lane_group_records(None)
        .into_iter()
        .map(|r| (r.seq, r.op.name(), r.actor))
        .collect();
    assert_eq!(
        log,
        [
            (2, "lane_group_put", "bob".to_owned()),
            (4, "lane_group_put", "carol".to_owned()),
            (5, "lane_group_delete", "dave".to_owned()),
        ]
    );
    assert_eq!(
        plane
            .op_records(None)
            .iter()
            .map(|r| r.seq)
            .collect::<Vec<_>>(),
        [1, 3]
    );
    assert!(plane.lane_group_records(Some("promo")).is_empty());
    // the timeline: both kinds of op in sequence order; the group at each op's time
    let doc = plane.timeline_doc(None, None);
    let ops: Vec<(Option<u64>, &str)> = doc.events.iter().map(|e| (e.seq, e.op.as_str())).collect();
    assert_eq!(
        ops,
        [
            (Some(1), "apps"),
            (Some(2), "lane_group_put"),
            (Some(3), "start"),
            (Some(4), "lane_group_put"),
            (Some(5), "lane_group_delete"),
        ]
    );
    let tl = plane.timeline();
    let t = |i: usize| doc.events[i].t_unix_nano.0;
    assert_eq!(
        tl.lane_group_at("cart", t(3) - 1).map(|g| g.apps().len()),
        None
    );
    assert_eq!(
        tl.lane_group_at("cart", t(3)).map(|g| g.id().as_str()),
        Some("mall")
    );
    assert!(tl.lane_group_at("order", t(4)).is_none());
    // a ranged document lists the groups in force before its start
    let ranged = plane.timeline_doc(Some(t(3)), None);
    assert_eq!(ranged.lane_groups.len(), 1);
    assert_eq!(ranged.lane_groups[0].apps(), ["order"]);
    assert_eq!(ranged.events.len(), 2);
    // restart: the log, the sequence and the versions come back
    plane.close().await;
    drop(plane);
    let plane = ControlPlane::open(dir.path()).await.unwrap();
    assert_eq!(plane.latest_seq(), 5);
    assert_eq!(plane.lane_group_records(None).len(), 3);
    assert!(plane.lane_groups().is_empty());
    let w = plane
        .write_lane_group(mall(r#"["order"]"#), "erin", Some(0))
        .await
        .unwrap();
    assert_eq!((w.seq, w.lane_group.unwrap().version), (6, 1));
}

#[tokio::test]
async fn lanes_small_timeline_imports_once_and_exports_its_lane_group_ops() {
    let dir = tempfile::tempdir().unwrap();
    let plane = ControlPlane::open(dir.path()).await.unwrap();
    let doc: TimelineDoc = serde_json::from_str(LANES_SMALL).unwrap();
    let report = plane.import(&doc).await.unwrap();
    // trade's app list, and four lane group ops
    assert_eq!(
        (report.recorded, report.lane_group_recorded, report.skipped),
        (1, 4, 0)
    );
    let again = plane.import(&doc).await.unwrap();
    assert_eq!(
        (again.recorded, again.lane_group_recorded, again.skipped),
        (0, 0, 5)
    );
    let ids: Vec<String> = plane
        .lane_groups()
        .iter()
        .map(|g| g.group.id().to_string())
        .collect();
    assert_eq!(ids, ["mall"]);
    assert_eq!(plane.lane_group("mall").unwrap().version, 2);
    assert!(
        plane
            .lane_group_records(None)
            .iter()
            .all(|r| r.imported && r.actor == "import")
    );
    // the exported lane group events equal the file's, as JSON values
    let file: Value = serde_json::from_str(LANES_SMALL).unwrap();
    let strip = |e: &Value| json!({"t_unix_nano": e["t_unix_nano"], "op": e["op"], "lane_group": e["lane_group"]});
    let want: Vec<Value> = file["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(strip)
        .collect();
    let exported = serde_json::to_value(plane.timeline_doc(None, None)).unwrap();
    let got: Vec<Value> = exported["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["op"].as_str().unwrap().starts_with("lane_group_"))
        .map(strip)
        .collect();
    assert_eq!(got, want);
    // and imported back into a fresh plane, the same groups at every time
    let copy_dir = tempfile::tempdir().unwrap();
    let copy = ControlPlane::open(copy_dir.path()).await.unwrap();
    copy.import(&plane.timeline_doc(None, None)).await.unwrap();
    let t0 = doc.t0_unix_nano.unwrap().0;
    for s in [0i64, 2084, 2085, 3284, 3285, 5000] {
        let t = t0 + s * 1_000_000_000;
        for app in ["order", "coupon", "gateway", "search"] {
            assert_eq!(
                copy.timeline().lane_group_at(app, t),
                plane.timeline().lane_group_at(app, t),
                "{app} at {s} s"
            );
        }
    }
}

#[tokio::test]
async fn lanes_walk_timeline_imports_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let plane = ControlPlane::open(dir.path()).await.unwrap();
    let doc: TimelineDoc = serde_json::from_str(LANES_WALK).unwrap();
    let report = plane.import(&doc).await.unwrap();
    assert_eq!((report.recorded, report.lane_group_recorded), (1, 1));
    let mall = plane.lane_group("mall").unwrap();
    assert_eq!(
        mall.group.apps(),
        ["gateway", "order", "inventory", "notify"]
    );
    let t0 = doc.t0_unix_nano.unwrap().0;
    let tl = plane.timeline();
    assert_eq!(
        tl.lane_group_at("notify", t0).map(|g| g.id().as_str()),
        Some("mall")
    );
    assert!(tl.lane_group_at("notify", t0 - 1).is_none());
}

#[tokio::test]
async fn an_import_that_breaks_the_group_rules_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let plane = ControlPlane::open(dir.path()).await.unwrap();
    for (events, why) in [
        (
            json!([
                {"t_unix_nano": "10", "op": "lane_group_put", "lane_group": {"id": "a", "apps": ["order"]}},
                {"t_unix_nano": "20", "op": "lane_group_put", "lane_group": {"id": "b", "apps": ["order"]}}
            ]),
            "app \"order\" is already in lane group \"a\"",
        ),
        (
            json!([{"t_unix_nano": "10", "op": "lane_group_delete", "lane_group": "a"}]),
            "lane group \"a\" does not exist",
        ),
    ] {
        let doc: TimelineDoc = serde_json::from_value(
            json!({"channels": [{"id": "trade", "apps": ["x"]}], "events": events}),
        )
        .unwrap();
        let e = plane.import(&doc).await.unwrap_err();
        assert_eq!(e.code(), "invalid_timeline");
        assert!(e.to_string().contains(why), "{e}");
        assert_eq!(plane.latest_seq(), 0);
        assert!(plane.lane_groups().is_empty() && plane.channel("trade").is_err());
    }
}

#[tokio::test]
async fn a_database_from_before_lane_groups_reads_and_upgrades() {
    let dir = tempfile::tempdir().unwrap();
    common::database_before(dir.path(), &["0001_init.sql", "0002_op_note.sql"]).await;
    let ro = ControlPlane::open_read_only(dir.path()).await.unwrap();
    assert_eq!(ro.latest_seq(), 1);
    assert!(ro.lane_groups().is_empty());
    ro.close().await;
    drop(ro);
    let plane = ControlPlane::open(dir.path()).await.unwrap();
    let g = serde_json::from_str(r#"{"id": "mall", "apps": ["order"]}"#).unwrap();
    let w = plane
        .write_lane_group(LaneGroupOp::Put(g), "a", None)
        .await
        .unwrap();
    assert_eq!(w.seq, 2);
    plane.close().await;
    drop(plane);
    let ro = ControlPlane::open_read_only(dir.path()).await.unwrap();
    assert_eq!(ro.lane_group("mall").unwrap().group.apps(), ["order"]);
    assert_eq!(ro.channel("trade").unwrap().apps, ["order"]);
}
