//! The release gate and the spike guard of the control API (issue 28 item 4), with a live
//! one-sided error spike on blue (the dashboard tests' [`SpikeSender`]): the gate is called as
//! Flagger's webhook calls it (curl: a POST of its JSON, no token, judged by the status) and as
//! Argo Rollouts' `web` metric does (a GET with a bearer header and `?fail_status=200`, judged
//! by `result.pass`), the request shapes of `deploy/gate/`; a ratio change toward blue is
//! refused with the alert until it is forced, and the forced change is in the op log with its
//! actor.

use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::browser::{api_write, get_json};
use crate::dashboard::{ALICE, SpikeSender, blue_spike_firing, config_with_alice};
use crate::util::*;

/// What Flagger POSTs to a webhook (its payload; `confirm-promotion`).
const FLAGGER_BODY: &str = r#"{"name":"order","namespace":"shop","phase":"Progressing","checksum":"0","metadata":{"channel":"trade"}}"#;

/// curl as Flagger calls a webhook: POST, `Content-Type: application/json`, no token.
/// (status, body).
fn flagger(s: &Server, path: &str) -> (u16, Value) {
    curl(&[
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "-d",
        FLAGGER_BODY,
        &format!("http://{}{path}", s.api),
    ])
}

/// curl as Argo Rollouts' `web` provider calls it: GET with the headers of the template.
fn argo(s: &Server, path: &str) -> (u16, Value) {
    curl(&[
        "-H",
        &format!("Authorization: Bearer {ALICE}"),
        &format!("http://{}{path}", s.api),
    ])
}

fn curl(args: &[&str]) -> (u16, Value) {
    let out = Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (
        code.trim().parse().unwrap(),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

/// POST `body` with alice's token: (status, body).
fn write(s: &Server, path: &str, body: &str) -> (u16, Value) {
    let r = reqwest::blocking::Client::new()
        .post(format!("http://{}{path}", s.api))
        .bearer_auth(ALICE)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

#[test]
fn gate_and_spike_guard_follow_a_live_error_spike() {
    let dir = temp_dir();
    let cfg = config_with_alice(
        dir.path(),
        "[analyzer.defaults]\nwindow = \"10s\"\ngrace = \"1s\"\nspike_min_requests = 20\n\
         [alerts]\ninterval = \"500ms\"\nlateness = \"2s\"\ntrace_quiet = \"1s\"\n",
    );
    let s = Server::start_with(
        &dir.path().join("data"),
        &[],
        &["--config", cfg.to_str().unwrap()],
    );
    api_write(
        &s,
        ALICE,
        "PUT",
        "/api/v1/channels/trade",
        r#"{"apps": ["order"]}"#,
    );
    api_write(&s, ALICE, "POST", "/api/v1/channels/trade/start", "");
    api_write(
        &s,
        ALICE,
        "POST",
        "/api/v1/channels/trade/ratio",
        r#"{"blue_percent": 10}"#,
    );
    api_write(
        &s,
        ALICE,
        "PUT",
        "/api/v1/lane-groups/mall",
        r#"{"apps": ["gateway"], "lanes": {"gray": {}}}"#,
    );

    // Nothing fires: both callers pass.
    let (status, v) = flagger(&s, "/api/v1/channels/trade/gate");
    assert_eq!((status, v["pass"].as_bool()), (200, Some(true)), "{v}");
    assert_eq!(v["reasons"], serde_json::json!([]));
    assert_eq!(v["fail_on"][0], "error_spike");
    let (status, v) = argo(&s, "/api/v1/channels/trade/gate?fail_status=200");
    assert_eq!((status, v["pass"].as_bool()), (200, Some(true)), "{v}");
    let (status, v) = flagger(&s, "/api/v1/lane-groups/mall/gate");
    assert_eq!((status, v["pass"].as_bool()), (200, Some(true)), "{v}");
    // Unknown ids: 404 in the API's error shape; a bad fail_status: 400.
    let (status, v) = argo(&s, "/api/v1/channels/nope/gate");
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (404, Some("channel_not_found"))
    );
    let (status, v) = flagger(&s, "/api/v1/lane-groups/nope/gate");
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (404, Some("lane_group_not_found"))
    );
    let (status, v) = argo(&s, "/api/v1/channels/trade/gate?fail_status=abc");
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (400, Some("invalid_query"))
    );
    // The gate's POST only reads: no token needed with open reads, but a write token's
    // routes still need one.
    let (status, _) = curl(&[
        "-X",
        "POST",
        "-d",
        r#"{"blue_percent": 50}"#,
        &format!("http://{}/api/v1/channels/trade/ratio", s.api),
    ]);
    assert_eq!(status, 401);

    // A live spike on blue.
    let sender = SpikeSender::start(&s);
    let deadline = Instant::now() + Duration::from_secs(60);
    let alert = loop {
        if let Some(a) = blue_spike_firing(&s) {
            break a;
        }
        assert!(
            Instant::now() < deadline,
            "no error_spike on blue after {} spans",
            sender.sent.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(250));
    };

    // Flagger: a non-2xx status (409) fails the webhook; the body says why.
    let (status, v) = flagger(&s, "/api/v1/channels/trade/gate");
    assert_eq!((status, v["pass"].as_bool()), (409, Some(false)), "{v}");
    let spike = v["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["type"] == "error_spike")
        .expect("the spike is a reason")
        .clone();
    assert_eq!(spike["alert"]["labels"], alert["labels"]);
    assert!(
        spike["message"].as_str().unwrap().contains("color=blue"),
        "{spike}"
    );
    // Argo Rollouts: 200 with `pass: false`, which `successCondition: result.pass == true`
    // judges a failed measurement (a non-2xx would be an error of the measurement).
    let (status, v) = argo(&s, "/api/v1/channels/trade/gate?fail_status=200");
    assert_eq!((status, v["pass"].as_bool()), (200, Some(false)), "{v}");
    // Another channel and the lane group still pass.
    let (status, _) = flagger(&s, "/api/v1/lane-groups/mall/gate");
    assert_eq!(status, 200);

    // The spike guard: toward blue is refused with the alert, nothing changes.
    let (status, v) = write(
        &s,
        "/api/v1/channels/trade/ratio",
        r#"{"blue_percent": 50}"#,
    );
    assert_eq!(status, 409, "{v}");
    assert_eq!(v["error"]["code"], "spike_guard");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("10 → 50"),
        "{v}"
    );
    assert_eq!(v["error"]["alert"]["labels"]["color"], "blue");
    assert_eq!(v["error"]["alert"]["labels"]["channel"], "trade");
    assert_eq!(get_json(&s, "/api/v1/channels/trade")["blue_percent"], 10);
    // The CLI client says why.
    let server = format!("http://{}", s.api);
    let (ok, _, err) = run_cli(&[
        "channel", "--server", &server, "--token", ALICE, "ratio", "trade", "60",
    ]);
    assert!(
        !ok && err.contains("409 spike_guard") && err.contains("force"),
        "{err}"
    );
    let (status, v) = write(
        &s,
        "/api/v1/channels/trade/ratio",
        r#"{"blue_percent": 50, "force": "yes"}"#,
    );
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (400, Some("invalid_body"))
    );
    // Away from blue: allowed.
    let (status, v) = write(&s, "/api/v1/channels/trade/ratio", r#"{"blue_percent": 5}"#);
    assert_eq!(status, 200, "{v}");
    assert!(v.get("forced_past").is_none(), "{v}");
    // Forced: written, the alert in the answer, the note and the actor in the op log.
    let (status, v) = write(
        &s,
        "/api/v1/channels/trade/ratio",
        r#"{"blue_percent": 50, "force": true, "note": "hotfix deployed to blue"}"#,
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["channel"]["blue_percent"], 50);
    assert_eq!(v["forced_past"]["labels"]["color"], "blue");
    drop(sender);
    let timeline = get_json(&s, "/api/v1/timeline");
    let forced = timeline["events"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|e| e["channel"] == "trade" && e["op"] == "ratio")
        .unwrap()
        .clone();
    assert_eq!(forced["blue_percent"], 50, "{forced}");
    assert_eq!(forced["actor"], "alice", "{forced}");
    let note = forced["note"].as_str().unwrap();
    assert!(
        note.starts_with(
            "hotfix deployed to blue; forced past the spike guard: DyelineErrorSpike on blue"
        ),
        "{note}"
    );
}
