//! Lane groups (domain §7.1) through the real binary: `import --timeline` of lanes-small (its
//! channel and lane group ops), the groups and `GET /api/v1/timeline` read back (the lane
//! group ops equal the file's), the API's refusals of bad groups each changing nothing, the
//! OpenAPI document, and the `lane-group` CLI.

use serde_json::{Value, json};

use crate::control::{Case, TOKEN, assert_refused, call, get, start, timeline_seqs, write};
use crate::util::{run_cli, shared_dir, temp_dir};

/// (t_unix_nano, op, lane_group) of every lane group event of a timeline document.
fn lane_group_ops(doc: &Value) -> Vec<Value> {
    doc["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["op"].as_str().unwrap().starts_with("lane_group_"))
        .map(|e| json!([e["t_unix_nano"], e["op"], e["lane_group"]]))
        .collect()
}

#[test]
fn lanes_small_timeline_imports_and_reads_back_through_the_api() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let timeline = shared_dir().join("fixtures/analysis/lanes-small/timeline.json");
    let import = || {
        run_cli(&[
            "import",
            "--data-dir",
            data.to_str().unwrap(),
            "--timeline",
            timeline.to_str().unwrap(),
        ])
    };
    let (ok, _, err) = import();
    assert!(ok, "{err}");
    assert!(
        err.contains("recorded 1 channel operations and 4 lane group operations"),
        "{err}"
    );
    let (ok, _, err) = import();
    assert!(ok, "{err}");
    assert!(err.contains("and 0 lane group operations") && err.contains("5 already present"));

    let s = start(&data);
    // promo was deleted at 3285 s; mall was put twice, gray2 strict the second time
    let groups = get(&s, "/api/v1/lane-groups");
    let list = groups["lane_groups"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{groups}");
    let (status, mall, etag) = call(&s, "GET", "/api/v1/lane-groups/mall", None, None, None);
    assert_eq!((status, etag.as_deref()), (200, Some("\"2\"")));
    assert_eq!(mall, list[0]);
    assert_eq!(mall["entry_apps"], json!(["gateway"]));
    assert_eq!(mall["lanes"]["gray2"]["fallback"], "none");
    assert_eq!(mall["apps"].as_array().unwrap().len(), 7);
    let (status, v, _) = call(&s, "GET", "/api/v1/lane-groups/promo", None, None, None);
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (404, Some("lane_group_not_found"))
    );

    // the timeline's lane group ops are the file's, as JSON values, with their actor
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&timeline).unwrap()).unwrap();
    let served = get(&s, "/api/v1/timeline");
    assert_eq!(lane_group_ops(&served), lane_group_ops(&file));
    assert_eq!(lane_group_ops(&served).len(), 4);
    assert!(
        served["events"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["actor"] == "import")
    );

    // the OpenAPI document describes the routes
    let doc = get(&s, "/api/v1/openapi.json");
    for (path, methods) in [
        ("/api/v1/lane-groups", &["get"][..]),
        ("/api/v1/lane-groups/{id}", &["get", "put", "delete"]),
    ] {
        for m in methods {
            assert!(doc["paths"][path][m].is_object(), "{m} {path}");
        }
    }
    assert!(doc["components"]["schemas"]["LaneGroupSpec"].is_object());
}

#[test]
fn bad_groups_get_their_status_and_change_nothing_and_the_cli_drives_the_api() {
    let dir = temp_dir();
    let s = start(&dir.path().join("data"));
    let mall = r#"{"apps": ["gateway", "order"], "entry_apps": ["gateway"],
        "lanes": {"gray": {}, "gray2": {"fallback": "none"}}}"#;
    let v = write(&s, "PUT", "/api/v1/lane-groups/mall", Some(mall));
    assert_eq!(v["lane_group"]["version"], 1);
    assert_eq!(v["lane_group"]["lanes"]["gray"]["fallback"], "base");
    let snapshot = || (get(&s, "/api/v1/lane-groups"), timeline_seqs(&s));
    let before = snapshot();
    let g = "/api/v1/lane-groups";
    // PUTs with the write token: (id, body, If-Match, status, code)
    let puts = [
        (
            "promo",
            r#"{"apps": ["coupon", "order"]}"#,
            None,
            409,
            "app_in_other_lane_group",
        ),
        (
            "Promo",
            r#"{"apps": []}"#,
            None,
            400,
            "invalid_lane_group_id",
        ),
        (
            "promo",
            r#"{"apps": ["coupon"], "lanes": {"base": {}}}"#,
            None,
            400,
            "invalid_lane_group",
        ),
        (
            "promo",
            r#"{"apps": ["coupon"], "entry_apps": ["gateway"]}"#,
            None,
            400,
            "invalid_lane_group",
        ),
        (
            "promo",
            r#"{"apps": ["coupon"], "strict": true}"#,
            None,
            400,
            "invalid_lane_group",
        ),
        (
            "promo",
            r#"{"apps": ["coupon"], "lanes": {"gray": {"fallback": "gray2"}}}"#,
            None,
            400,
            "invalid_lane_group",
        ),
        (
            "promo",
            r#"{"apps": ["coupon"], "lanes": {"gray_2": {}}}"#,
            None,
            400,
            "invalid_lane_group",
        ),
        (
            "promo",
            r#"{"id": "mall", "apps": ["coupon"]}"#,
            None,
            400,
            "invalid_lane_group",
        ),
        (
            "promo",
            r#"{"apps": ["coupon"], "lanes": {"gray": {"fallback": "base", "weight": 5}}}"#,
            None,
            400,
            "invalid_lane_group",
        ),
        (
            "promo",
            r#"{"apps": ["coupon"], "thresholds": {"spike_factor": 0.5}}"#,
            None,
            400,
            "invalid_lane_group",
        ),
        (
            "promo",
            r#"{"apps": ["coupon"], "thresholds": {"min_error_rate": 0.1}}"#,
            None,
            400,
            "invalid_lane_group",
        ),
        ("promo", r#"{"apps": [""]}"#, None, 400, "invalid_apps"),
        ("promo", r#"["coupon"]"#, None, 400, "invalid_body"),
        ("promo", r#"{"apps": ["coupon""#, None, 400, "invalid_body"),
        ("mall", mall, Some("\"3\""), 412, "version_mismatch"),
        ("mall", mall, Some("\"0\""), 412, "version_mismatch"),
        ("mall", mall, Some("soon"), 400, "invalid_if_match"),
    ];
    let mut cases: Vec<Case> = puts
        .into_iter()
        .map(|(id, body, if_match, status, code)| {
            (
                "PUT",
                format!("{g}/{id}"),
                Some(body.to_owned()),
                Some(TOKEN),
                if_match,
                status,
                code,
            )
        })
        .collect();
    cases.push((
        "PUT",
        format!("{g}/promo"),
        Some(r#"{"apps": []}"#.into()),
        None,
        None,
        401,
        "unauthorized",
    ));
    cases.push((
        "DELETE",
        format!("{g}/promo"),
        None,
        Some(TOKEN),
        None,
        404,
        "lane_group_not_found",
    ));
    cases.push((
        "DELETE",
        format!("{g}/mall"),
        None,
        Some(TOKEN),
        Some("\"2\""),
        412,
        "version_mismatch",
    ));
    assert_refused(&s, cases, snapshot, before);
    let (_, v, _) = call(
        &s,
        "PUT",
        "/api/v1/lane-groups/promo",
        Some(r#"{"apps": ["coupon", "order"]}"#),
        Some(TOKEN),
        None,
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("lane group \"mall\""),
        "{v}"
    );

    // the CLI: put from a file, list, show, a refusal with its status, delete
    let server = format!("http://{}", s.api);
    let cli = |args: &[&str]| {
        let mut all = vec!["lane-group", "--server", &server, "--token", TOKEN];
        all.extend_from_slice(args);
        run_cli(&all)
    };
    let file = dir.path().join("promo.json");
    std::fs::write(
        &file,
        r#"{"id": "promo", "apps": ["coupon"], "reverse_fallback": true}"#,
    )
    .unwrap();
    let (ok, out, err) = cli(&["put", "promo", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    let out: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out["lane_group"]["reverse_fallback"], true);
    let (ok, out, _) = cli(&["list"]);
    assert!(ok);
    let line = out.lines().find(|l| l.starts_with("mall")).unwrap();
    assert!(
        line.contains("gray,gray2(strict)") && line.contains("gateway,order"),
        "{line}"
    );
    let (ok, out, _) = cli(&["show", "promo"]);
    assert!(ok);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["apps"],
        json!(["coupon"])
    );
    let (ok, _, err) = cli(&["put", "mall", file.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("400 invalid_lane_group"), "{err}");
    let (ok, _, err) = cli(&["--if-match", "5", "delete", "promo"]);
    assert!(!ok);
    assert!(err.contains("412 version_mismatch"), "{err}");
    let (ok, _, err) = cli(&["delete", "promo"]);
    assert!(ok, "{err}");
    assert_eq!(
        get(&s, "/api/v1/lane-groups")["lane_groups"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // every change, refused ones excepted, is on the timeline with its actor
    let ops: Vec<(String, String)> = get(&s, "/api/v1/timeline")["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["op"].as_str().unwrap().to_owned(),
                e["actor"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(ops.len(), 3, "{ops:?}");
    assert_eq!(ops[2].0, "lane_group_delete");
    assert!(ops.iter().all(|(_, a)| a == &ops[0].1));
}
