//! The control plane through the real server's HTTP API: the domain §4 test vector, invalid
//! input, weights (weights.json, case 13), optimistic concurrency, SSE resumption, restart,
//! the OpenAPI document, the generated token, the `channel` CLI, `import --timeline` and
//! operation notes.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::time::Duration;

use reqwest::blocking::{Client, Response};
use serde_json::{Value, json};

use crate::util::{Server, run_cli, shared_dir, temp_dir};

pub(crate) const TOKEN: &str = "e2e-write-token-0123";

pub(crate) fn start(data: &std::path::Path) -> Server {
    Server::start(data, &[("DYELINE_API_TOKEN", TOKEN)])
}

fn client() -> Client {
    Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// A request to the API: (status, JSON body, ETag).
pub(crate) fn call(
    s: &Server,
    method: &str,
    path: &str,
    body: Option<&str>,
    token: Option<&str>,
    if_match: Option<&str>,
) -> (u16, Value, Option<String>) {
    let url = format!("http://{}{path}", s.api);
    let mut rb = client().request(method.parse().unwrap(), url);
    if let Some(b) = body {
        rb = rb
            .header("content-type", "application/json")
            .body(b.to_owned());
    }
    if let Some(t) = token {
        rb = rb.bearer_auth(t);
    }
    if let Some(m) = if_match {
        rb = rb.header("if-match", m);
    }
    let resp = rb.send().unwrap();
    let status = resp.status().as_u16();
    let etag = resp
        .headers()
        .get("etag")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = resp.text().unwrap();
    let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, v, etag)
}

pub(crate) fn write(s: &Server, method: &str, path: &str, body: Option<&str>) -> Value {
    let (status, v, _) = call(s, method, path, body, Some(TOKEN), None);
    assert!(
        (200..300).contains(&status),
        "{method} {path}: {status} {v}"
    );
    v
}

pub(crate) fn get(s: &Server, path: &str) -> Value {
    let (status, v, _) = call(s, "GET", path, None, None, None);
    assert_eq!(status, 200, "GET {path}: {v}");
    v
}

fn ratio(s: &Server, ch: &str, r: i64) -> Value {
    write(
        s,
        "POST",
        &format!("/api/v1/channels/{ch}/ratio"),
        Some(&format!("{{\"blue_percent\": {r}}}")),
    )
}

pub(crate) fn timeline_seqs(s: &Server) -> Vec<u64> {
    get(s, "/api/v1/timeline")["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect()
}

#[test]
fn domain_4_test_vector_over_http_gives_the_expected_streams() {
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(shared_dir().join("fixtures/events/expected-app-streams.json"))
            .unwrap(),
    )
    .unwrap();
    let dir = temp_dir();
    let s = start(&dir.path().join("data"));
    for ch in v["channels"].as_array().unwrap() {
        if ch["apps"].is_array() {
            let body = json!({"apps": ch["apps"]}).to_string();
            write(
                &s,
                "PUT",
                &format!("/api/v1/channels/{}", ch["id"].as_str().unwrap()),
                Some(&body),
            );
        }
    }
    let mut step_of_seq = std::collections::HashMap::new();
    for step in v["channel_events"].as_array().unwrap() {
        let ch = step["channel"].as_str().unwrap();
        let out = match step["op"].as_str().unwrap() {
            "ratio" => ratio(&s, ch, step["blue_percent"].as_i64().unwrap()),
            op => write(&s, "POST", &format!("/api/v1/channels/{ch}/{op}"), None),
        };
        step_of_seq.insert(out["seq"].as_u64().unwrap(), step["step"].as_u64().unwrap());
    }
    for (app, expected) in v["apps"].as_object().unwrap() {
        let got = get(&s, &format!("/api/v1/apps/{app}/events"));
        let got: Vec<Value> = got["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let mut row = json!({
                    "step": step_of_seq[&e["seq"].as_u64().unwrap()],
                    "event": e["event"],
                    "channel": e["channel"],
                });
                if e["event"] == "flow_change" {
                    row["from"] = e["from"].clone();
                    row["to"] = e["to"].clone();
                    row["replay"] = e["replay"].clone();
                }
                row
            })
            .collect();
        assert_eq!(&Value::Array(got), expected, "stream of {app}");
    }
    // Effective now: every channel finished.
    let eff = get(&s, "/api/v1/apps/order/effective");
    assert_eq!(
        (eff["channel"].clone(), eff["blue_percent"].as_u64()),
        (Value::Null, Some(50))
    );
    // The timeline lists every op in order with its actor.
    let tl = get(&s, "/api/v1/timeline");
    let events = tl["events"].as_array().unwrap();
    assert_eq!(
        events.len(),
        1 + v["channel_events"].as_array().unwrap().len()
    );
    assert!(events.iter().all(|e| e["actor"] == "env"));
    assert_eq!(events[0]["op"], "apps");
    assert_eq!(events[2]["op"], "ratio");
    assert_eq!(events[2]["blue_percent"], 0);
}

/// method, path, body, token, If-Match, status, code.
pub(crate) type Case<'a> = (
    &'a str,
    String,
    Option<String>,
    Option<&'a str>,
    Option<&'a str>,
    u16,
    &'a str,
);

#[test]
fn invalid_input_gets_its_status_and_code_and_changes_nothing() {
    let dir = temp_dir();
    let s = start(&dir.path().join("data"));
    write(
        &s,
        "PUT",
        "/api/v1/channels/trade",
        Some(r#"{"apps": ["order"]}"#),
    );
    write(
        &s,
        "PUT",
        "/api/v1/channels/pay",
        Some(r#"{"apps": ["payment"]}"#),
    );
    write(&s, "POST", "/api/v1/channels/pay/start", None);
    let snapshot = || (get(&s, "/api/v1/channels"), timeline_seqs(&s));
    let before = snapshot();
    let ratio_body = |b: &str| format!("{{\"blue_percent\": {b}}}");
    let cases: Vec<Case> = vec![
        (
            "POST",
            "/api/v1/channels/pay/ratio".into(),
            Some(ratio_body("101")),
            Some(TOKEN),
            None,
            400,
            "invalid_blue_percent",
        ),
        (
            "POST",
            "/api/v1/channels/pay/ratio".into(),
            Some(ratio_body("-1")),
            Some(TOKEN),
            None,
            400,
            "invalid_blue_percent",
        ),
        (
            "POST",
            "/api/v1/channels/pay/ratio".into(),
            Some(ratio_body("50.5")),
            Some(TOKEN),
            None,
            400,
            "invalid_blue_percent",
        ),
        (
            "POST",
            "/api/v1/channels/pay/ratio".into(),
            Some(ratio_body("\"50\"")),
            Some(TOKEN),
            None,
            400,
            "invalid_blue_percent",
        ),
        (
            "POST",
            "/api/v1/channels/pay/ratio".into(),
            None,
            Some(TOKEN),
            None,
            400,
            "invalid_body",
        ),
        (
            "POST",
            "/api/v1/channels/nope/start".into(),
            None,
            Some(TOKEN),
            None,
            404,
            "channel_not_found",
        ),
        (
            "POST",
            "/api/v1/channels/nope/ratio".into(),
            Some(ratio_body("10")),
            Some(TOKEN),
            None,
            404,
            "channel_not_found",
        ),
        (
            "PUT",
            "/api/v1/channels/cart".into(),
            Some(r#"{"apps": ["order"]}"#.into()),
            Some(TOKEN),
            None,
            409,
            "app_in_other_channel",
        ),
        (
            "POST",
            "/api/v1/channels/pay/start".into(),
            None,
            Some(TOKEN),
            None,
            409,
            "already_releasing",
        ),
        (
            "POST",
            "/api/v1/channels/trade/ratio".into(),
            Some(ratio_body("10")),
            Some(TOKEN),
            None,
            409,
            "not_releasing",
        ),
        (
            "POST",
            "/api/v1/channels/trade/finish".into(),
            None,
            Some(TOKEN),
            None,
            409,
            "not_releasing",
        ),
        (
            "POST",
            "/api/v1/channels/pay/ratio".into(),
            Some(ratio_body("10")),
            None,
            None,
            401,
            "unauthorized",
        ),
        (
            "POST",
            "/api/v1/channels/pay/ratio".into(),
            Some(ratio_body("10")),
            Some("wrong-token"),
            None,
            401,
            "unauthorized",
        ),
        (
            "POST",
            "/api/v1/channels/pay/ratio".into(),
            Some(ratio_body("10")),
            Some(TOKEN),
            Some("\"1\""),
            412,
            "version_mismatch",
        ),
        (
            "PUT",
            "/api/v1/channels/pay".into(),
            Some(r#"{"apps": ["x"]}"#.into()),
            Some(TOKEN),
            None,
            409,
            "channel_releasing",
        ),
        (
            "DELETE",
            "/api/v1/channels/global".into(),
            None,
            Some(TOKEN),
            None,
            400,
            "global_channel",
        ),
        (
            "PUT",
            "/api/v1/channels/Bad_Id".into(),
            Some(r#"{"apps": []}"#.into()),
            Some(TOKEN),
            None,
            400,
            "invalid_channel_id",
        ),
        (
            "GET",
            "/api/v1/channels/nope".into(),
            None,
            None,
            None,
            404,
            "channel_not_found",
        ),
    ];
    assert_refused(&s, cases, snapshot, before);
}

/// Sends each case: it gets its status and code with a message, and `snapshot` stays
/// `before` (the refusal changed nothing).
pub(crate) fn assert_refused<T: PartialEq + std::fmt::Debug>(
    s: &Server,
    cases: Vec<Case>,
    snapshot: impl Fn() -> T,
    before: T,
) {
    for (method, path, body, token, if_match, status, code) in cases {
        let (got, v, _) = call(s, method, &path, body.as_deref(), token, if_match);
        assert_eq!(
            (got, v["error"]["code"].as_str()),
            (status, Some(code)),
            "{method} {path} {body:?}: {v}"
        );
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
        assert_eq!(
            snapshot(),
            before,
            "{method} {path} {body:?} changed something"
        );
    }
}

#[test]
fn weights_reproduce_weights_json_and_case_13() {
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(shared_dir().join("fixtures/weights.json")).unwrap(),
    )
    .unwrap();
    let dir = temp_dir();
    let s = start(&dir.path().join("data"));
    write(
        &s,
        "PUT",
        "/api/v1/channels/ch1",
        Some(r#"{"apps": ["a1"]}"#),
    );
    write(
        &s,
        "PUT",
        "/api/v1/channels/ch2",
        Some(r#"{"apps": ["a2"]}"#),
    );
    write(&s, "POST", "/api/v1/channels/ch1/start", None);
    write(&s, "POST", "/api/v1/channels/ch2/start", None);
    let weights = |q: &str| get(&s, &format!("/api/v1/channels/ch1/weights{q}"));
    for row in fixture["rows"].as_array().unwrap() {
        let r = row["blue_percent"].as_i64().unwrap();
        ratio(&s, "ch1", r);
        let w = weights("");
        for k in ["blue_percent", "blue_weight", "green_weight"] {
            assert_eq!(w[k], row[k], "r={r} {k}");
        }
        for k in ["blue_weight_exact", "green_weight_exact"] {
            let (a, b) = (w[k].as_f64().unwrap(), row[k].as_f64().unwrap());
            assert!((a - b).abs() < 1e-9, "r={r} {k}: {a} vs {b}");
        }
    }
    for case in fixture["count_aware"].as_array().unwrap() {
        ratio(&s, "ch1", case["blue_percent"].as_i64().unwrap());
        let w = weights(&format!(
            "?blue_instances={}&green_instances={}",
            case["blue_instances"], case["green_instances"]
        ));
        for k in [
            "blue_percent",
            "blue_instances",
            "green_instances",
            "blue_weight",
            "green_weight",
        ] {
            assert_eq!(w[k], case[k], "{case} {k}");
        }
        let (a, b) = (
            w["plain_weights_implied_blue_share"].as_f64().unwrap(),
            case["plain_weights_implied_blue_share"].as_f64().unwrap(),
        );
        assert!((a - b).abs() <= 5e-5, "{case}: implied {a}");
    }

    // Case 13: the ratio sequence, then invalid values that change nothing.
    for r in [50, 20, 25, 33, 75, 99, 1, 0, 100] {
        ratio(&s, "ch1", r);
        let c = get(&s, "/api/v1/channels/ch1");
        assert_eq!(
            c["blue_percent"], r,
            "reading the config back returns the rate"
        );
        let w = weights("");
        let (b, g) = (
            w["blue_weight"].as_f64().unwrap(),
            w["green_weight"].as_f64().unwrap(),
        );
        assert!(b.is_finite() && g.is_finite() && b >= 0.0 && g >= 0.0);
        let share = b / (b + g);
        assert!(
            (share - r as f64 / 100.0).abs() <= 0.005,
            "r={r}: share {share}"
        );
        if r == 0 {
            assert_eq!(b, 0.0, "a drained blue side stays exactly 0");
        }
        if r == 100 {
            assert_eq!(g, 0.0);
        }
        let ch2 = get(&s, "/api/v1/channels/ch2/weights");
        assert_eq!(
            (ch2["blue_percent"].as_u64(), ch2["blue_weight"].as_u64()),
            (Some(50), Some(100))
        );
    }
    let last = weights("");
    for bad in ["-1", "101", "50.5", "\"abc\""] {
        let (status, v, _) = call(
            &s,
            "POST",
            "/api/v1/channels/ch1/ratio",
            Some(&format!("{{\"blue_percent\": {bad}}}")),
            Some(TOKEN),
            None,
        );
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (400, Some("invalid_blue_percent")),
            "{bad}"
        );
    }
    let (status, _, _) = call(
        &s,
        "POST",
        "/api/v1/channels/ch1/ratio",
        Some("{}"),
        Some(TOKEN),
        None,
    );
    assert_eq!(status, 400);
    assert_eq!(get(&s, "/api/v1/channels/ch1")["blue_percent"], 100);
    assert_eq!(weights(""), last);
    // every rate 1..99 gives a share within 0.005
    for r in 1..=99 {
        ratio(&s, "ch1", r);
        let w = weights("");
        let (b, g) = (
            w["blue_weight"].as_f64().unwrap(),
            w["green_weight"].as_f64().unwrap(),
        );
        assert!((b / (b + g) - r as f64 / 100.0).abs() <= 0.005, "r={r}");
    }
    // apply delay: stable per instance, inside the default 10 s spread
    let d1 = weights("?instance=order-blue-1")["apply_delay_ms"]
        .as_u64()
        .unwrap();
    assert_eq!(
        d1,
        weights("?instance=order-blue-1")["apply_delay_ms"]
            .as_u64()
            .unwrap()
    );
    assert!(d1 < 10_000);
}

#[test]
fn concurrent_if_match_writes_apply_once_or_get_412_without_sequence_gaps() {
    let dir = temp_dir();
    let s = start(&dir.path().join("data"));
    write(
        &s,
        "PUT",
        "/api/v1/channels/trade",
        Some(r#"{"apps": ["order"]}"#),
    );
    write(&s, "POST", "/api/v1/channels/trade/start", None);
    let (_, _, etag) = call(&s, "GET", "/api/v1/channels/trade", None, None, None);
    let etag = etag.expect("ETag");
    // 50 writers holding the same version: exactly one wins.
    let barrier = std::sync::Barrier::new(50);
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..50)
            .map(|i| {
                let (s, etag, barrier) = (&s, &etag, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    let body = format!("{{\"blue_percent\": {}}}", i * 2);
                    call(
                        s,
                        "POST",
                        "/api/v1/channels/trade/ratio",
                        Some(&body),
                        Some(TOKEN),
                        Some(etag),
                    )
                    .0
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        statuses.iter().filter(|&&c| c == 200).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|&&c| c == 412).count(),
        49,
        "{statuses:?}"
    );
    // 50 writers that re-read the version on 412 until they win: each applied exactly once.
    let applied: Vec<u64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..50)
            .map(|i| {
                let s = &s;
                scope.spawn(move || {
                    loop {
                        let (_, _, etag) =
                            call(s, "GET", "/api/v1/channels/trade", None, None, None);
                        let body = format!("{{\"blue_percent\": {}}}", (i * 7) % 101);
                        let (st, v, _) = call(
                            s,
                            "POST",
                            "/api/v1/channels/trade/ratio",
                            Some(&body),
                            Some(TOKEN),
                            etag.as_deref(),
                        );
                        match st {
                            200 => return v["seq"].as_u64().unwrap(),
                            412 => continue,
                            other => panic!("{other}: {v}"),
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let distinct: BTreeSet<u64> = applied.iter().copied().collect();
    assert_eq!(distinct.len(), 50, "each writer applied exactly once");
    let mut seqs = timeline_seqs(&s);
    seqs.sort_unstable();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "the sequence has no gap or duplicate");
    assert_eq!(seqs.len(), 2 + 1 + 50);
    assert_eq!(get(&s, "/api/v1/channels/trade")["version"], 2 + 1 + 50);
}

/// Reads `n` SSE events (id, event, data) from a streaming response.
fn read_sse(resp: Response, n: usize) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    let mut reader = BufReader::new(resp);
    let (mut id, mut event, mut data) = (String::new(), String::new(), String::new());
    while out.len() < n {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "stream ended early"
        );
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            if !data.is_empty() {
                out.push((
                    id.clone(),
                    event.clone(),
                    serde_json::from_str(&data).unwrap(),
                ));
            }
            data.clear();
            event.clear();
        } else if let Some(v) = line.strip_prefix("id:") {
            id = v.trim().to_owned();
        } else if let Some(v) = line.strip_prefix("event:") {
            event = v.trim().to_owned();
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.trim());
        }
    }
    out
}

#[test]
fn sse_client_resuming_with_last_event_id_gets_every_missed_event_once_in_order() {
    let dir = temp_dir();
    let s = start(&dir.path().join("data"));
    write(
        &s,
        "PUT",
        "/api/v1/channels/trade",
        Some(r#"{"apps": ["order"]}"#),
    );
    let url = format!("http://{}/api/v1/apps/order/events/stream", s.api);
    let stream = client().get(&url).send().unwrap();
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    write(&s, "POST", "/api/v1/channels/trade/start", None);
    ratio(&s, "trade", 0);
    // start; flow_change 50->0; enter_all_green
    let first = read_sse(stream, 3);
    let kinds: Vec<&str> = first.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(kinds, ["start", "flow_change", "enter_all_green"]);
    assert_eq!(first[2].0, first[2].2["id"].as_str().unwrap());
    let resume_after = first[1].0.clone(); // drop after the flow change, before its derived event
    // disconnected: more happens
    ratio(&s, "trade", 100);
    write(&s, "POST", "/api/v1/channels/global/start", None); // not order's source: not delivered
    write(&s, "POST", "/api/v1/channels/trade/finish", None); // order rejoins global
    let all = get(&s, "/api/v1/apps/order/events")["events"]
        .as_array()
        .unwrap()
        .clone();
    let pos = all
        .iter()
        .position(|e| e["id"] == resume_after.as_str())
        .unwrap();
    let missed: Vec<Value> = all[pos + 1..].to_vec();
    assert!(missed.len() >= 6, "{missed:?}");
    let resumed = client()
        .get(&url)
        .header("Last-Event-ID", &resume_after)
        .send()
        .unwrap();
    let got = read_sse(resumed, missed.len());
    let got: Vec<Value> = got.into_iter().map(|e| e.2).collect();
    assert_eq!(got, missed);
    let kinds: Vec<&str> = got.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "enter_all_green",
            "flow_change",
            "exit_all_green",
            "enter_all_blue",
            "finish",
            "start",
            "flow_change"
        ]
    );
    assert_eq!(got.last().unwrap()["replay"], true);
    // the channel's own stream
    let ch = get(&s, "/api/v1/channels/trade/events")["events"]
        .as_array()
        .unwrap()
        .clone();
    let kinds: Vec<&str> = ch.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "start",
            "flow_change",
            "enter_all_green",
            "flow_change",
            "exit_all_green",
            "enter_all_blue",
            "finish"
        ]
    );
}

#[test]
fn restart_continues_channels_states_ratios_and_the_sequence() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let mut s = start(&data);
    write(
        &s,
        "PUT",
        "/api/v1/channels/trade",
        Some(r#"{"apps": ["order", "cart"]}"#),
    );
    write(&s, "POST", "/api/v1/channels/trade/start", None);
    ratio(&s, "trade", 30);
    write(&s, "POST", "/api/v1/channels/global/start", None);
    let channels = get(&s, "/api/v1/channels");
    let events = get(&s, "/api/v1/apps/order/events");
    assert!(s.stop(), "clean shutdown");
    let s = start(&data);
    assert_eq!(get(&s, "/api/v1/channels"), channels);
    assert_eq!(get(&s, "/api/v1/apps/order/events"), events);
    let out = ratio(&s, "trade", 60);
    assert_eq!(out["seq"], 5);
    assert_eq!(out["channel"]["version"], 4);
    let eff = get(&s, "/api/v1/apps/cart/effective");
    assert_eq!(
        (eff["channel"].as_str(), eff["blue_percent"].as_u64()),
        (Some("trade"), Some(60))
    );
    let eff = get(&s, "/api/v1/apps/search/effective");
    assert_eq!(
        (eff["channel"].as_str(), eff["blue_percent"].as_u64()),
        (Some("global"), Some(50))
    );
}

#[test]
fn notes_given_with_ratio_start_and_finish_show_on_the_channel_events() {
    let dir = temp_dir();
    let s = start(&dir.path().join("data"));
    write(
        &s,
        "PUT",
        "/api/v1/channels/trade",
        Some(r#"{"apps": ["order"]}"#),
    );
    write(&s, "POST", "/api/v1/channels/trade/start", None);
    let out = write(
        &s,
        "POST",
        "/api/v1/channels/trade/ratio",
        Some(r#"{"blue_percent":10,"note":"override: test"}"#),
    );
    write(
        &s,
        "POST",
        "/api/v1/channels/trade/finish",
        Some(r#"{"note": "done"}"#),
    );
    let events = get(&s, "/api/v1/channels/trade/events");
    let rows: Vec<(&str, Option<&str>)> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["event"].as_str().unwrap(), e["note"].as_str()))
        .collect();
    assert_eq!(
        rows,
        [
            ("start", None),
            ("flow_change", Some("override: test")),
            ("finish", Some("done")),
        ],
        "{events}"
    );
    assert_eq!(events["events"][1]["seq"], out["seq"]);
    assert!(events["events"][0].get("note").is_none(), "{events}");
}

#[test]
fn openapi_document_matches_the_served_routes() {
    let dir = temp_dir();
    let s = start(&dir.path().join("data"));
    write(
        &s,
        "PUT",
        "/api/v1/channels/trade",
        Some(r#"{"apps": ["order"]}"#),
    );
    let doc = get(&s, "/api/v1/openapi.json");
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    let documented: BTreeSet<&str> = paths.keys().map(String::as_str).collect();
    for p in [
        "/api/v1/channels",
        "/api/v1/channels/{id}",
        "/api/v1/channels/{id}/start",
        "/api/v1/channels/{id}/ratio",
        "/api/v1/channels/{id}/finish",
        "/api/v1/channels/{id}/weights",
        "/api/v1/channels/{id}/events",
        "/api/v1/channels/{id}/events/stream",
        "/api/v1/apps/{app}/effective",
        "/api/v1/apps/{app}/events",
        "/api/v1/apps/{app}/events/stream",
        "/api/v1/timeline",
        "/api/v1/sql",
        "/metrics",
        "/healthz",
    ] {
        assert!(documented.contains(p), "{p} is not documented");
    }
    // Every documented operation is served (no 404 from the fallback, no 405).
    for (path, item) in paths {
        let concrete = path.replace("{id}", "trade").replace("{app}", "order");
        for method in item.as_object().unwrap().keys() {
            if !["get", "put", "post", "delete"].contains(&method.as_str()) {
                continue;
            }
            let resp = client()
                .request(
                    method.to_uppercase().parse().unwrap(),
                    format!("http://{}{concrete}", s.api),
                )
                .send()
                .unwrap();
            let status = resp.status().as_u16();
            assert_ne!(status, 405, "{method} {path}");
            if status == 404 {
                let v: Value = resp.json().unwrap();
                assert_ne!(
                    v["error"]["code"], "not_found",
                    "{method} {path} is documented but not served"
                );
            }
        }
    }
    // An undocumented route is not served.
    let (status, v, _) = call(&s, "GET", "/api/v1/nothing-here", None, None, None);
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
}

#[test]
fn without_a_configured_token_serve_generates_a_private_one() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let s = Server::start(&data, &[]);
    let path = data.join("api-token");
    let token = std::fs::read_to_string(&path).unwrap().trim().to_owned();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let (status, _, _) = call(
        &s,
        "PUT",
        "/api/v1/channels/trade",
        Some(r#"{"apps": []}"#),
        Some(TOKEN),
        None,
    );
    assert_eq!(status, 401, "only the generated token is valid");
    let (status, v, _) = call(
        &s,
        "PUT",
        "/api/v1/channels/trade",
        Some(r#"{"apps": []}"#),
        Some(&token),
        None,
    );
    assert_eq!(status, 201, "{v}");
    assert_eq!(get(&s, "/api/v1/timeline")["events"][0]["actor"], "admin");
}

#[test]
fn channel_cli_drives_the_api() {
    let dir = temp_dir();
    let s = start(&dir.path().join("data"));
    let server = format!("http://{}", s.api);
    let cli = |args: &[&str]| {
        let mut all = vec!["channel", "--server", &server, "--token", TOKEN];
        all.extend_from_slice(args);
        run_cli(&all)
    };
    let (ok, out, err) = cli(&["put", "trade", "--apps", "order,cart"]);
    assert!(ok, "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["channel"]["apps"],
        json!(["order", "cart"])
    );
    assert!(cli(&["start", "trade"]).0);
    let (ok, out, _) = cli(&["ratio", "trade", "30"]);
    assert!(ok);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["channel"]["blue_percent"],
        30
    );
    let (ok, out, _) = cli(&["list"]);
    assert!(ok);
    let line = out.lines().find(|l| l.starts_with("trade")).unwrap();
    assert!(
        line.contains("releasing") && line.contains("30") && line.contains("order,cart"),
        "{line}"
    );
    let (ok, out, _) = cli(&[
        "weights",
        "trade",
        "--blue-instances",
        "2",
        "--green-instances",
        "6",
    ]);
    assert!(ok);
    let w: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (w["blue_weight"].as_u64(), w["green_weight"].as_u64()),
        (Some(100), Some(78))
    );
    let (ok, _, err) = cli(&["ratio", "trade", "abc"]);
    assert!(!ok);
    assert!(err.contains("400 invalid_blue_percent"), "{err}");
    let (ok, _, err) = cli(&["--if-match", "1", "finish", "trade"]);
    assert!(!ok);
    assert!(err.contains("412 version_mismatch"), "{err}");
    let (ok, _, err) = run_cli(&["channel", "--server", &server, "start", "global"]);
    assert!(!ok);
    assert!(err.contains("401 unauthorized"), "{err}");
    let (ok, out, _) = cli(&["show", "trade"]);
    assert!(ok);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["state"],
        "releasing"
    );
}

#[test]
fn import_timeline_records_history_the_server_then_serves() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let fixture = shared_dir().join("fixtures/analysis/release-small");
    let timeline = fixture.join("timeline.json");
    let data_s = data.to_str().unwrap();
    let (ok, _, err) = run_cli(&[
        "import",
        "--data-dir",
        data_s,
        "--timeline",
        timeline.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(err.contains("recorded 5 channel operations"), "{err}");
    let (ok, _, err) = run_cli(&[
        "import",
        "--data-dir",
        data_s,
        "--timeline",
        timeline.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains("recorded 0 channel operations") && err.contains("5 already present"),
        "{err}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&timeline).unwrap()).unwrap();
    let s = start(&data);
    let tl = get(&s, "/api/v1/timeline");
    let events = tl["events"].as_array().unwrap();
    assert!(events.iter().all(|e| e["actor"] == "import"));
    let ops: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["op"] != "apps")
        .map(|e| (e["channel"].as_str().unwrap(), e["op"].as_str().unwrap()))
        .collect();
    let want: Vec<(&str, &str)> = doc["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["channel"].as_str().unwrap(), e["op"].as_str().unwrap()))
        .collect();
    assert_eq!(ops, want);
    let first_t = doc["events"][0]["t_unix_nano"].as_str().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["t_unix_nano"] == first_t && e["op"] == "start")
    );
    // each channel is left in the state of its last op
    let trade = get(&s, "/api/v1/channels/trade");
    assert_eq!(
        (trade["state"].as_str(), trade["blue_percent"].as_u64()),
        (Some("releasing"), Some(30))
    );
    // timeline range in RFC 3339 keeps only the ops inside it
    let (status, v, _) = call(
        &s,
        "GET",
        "/api/v1/timeline?from=2025-01-01T12:00:01Z&to=2025-01-01T12:00:01Z",
        None,
        None,
        None,
    );
    assert_eq!(status, 200);
    assert_eq!(v["events"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["events"][0]["op"], "ratio");
    let (status, v, _) = call(
        &s,
        "GET",
        "/api/v1/timeline?from=yesterday",
        None,
        None,
        None,
    );
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (400, Some("invalid_query"))
    );
}

#[test]
fn reads_can_require_a_token() {
    let dir = temp_dir();
    let s = Server::start(
        &dir.path().join("data"),
        &[
            ("DYELINE_API_TOKEN", TOKEN),
            ("DYELINE_API__READ_REQUIRES_TOKEN", "true"),
        ],
    );
    let (status, v, _) = call(&s, "GET", "/api/v1/channels", None, None, None);
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (401, Some("unauthorized"))
    );
    let (status, _, _) = call(&s, "GET", "/api/v1/channels", None, Some(TOKEN), None);
    assert_eq!(status, 200);
    let (status, _, _) = call(
        &s,
        "POST",
        "/api/v1/sql",
        Some(r#"{"sql": "SELECT 1"}"#),
        None,
        None,
    );
    assert_eq!(status, 401);
    let (status, v, _) = call(
        &s,
        "POST",
        "/api/v1/sql",
        Some(r#"{"sql": "SELECT 1"}"#),
        Some(TOKEN),
        None,
    );
    assert_eq!(status, 200, "{v}");
    let (status, _, _) = call(
        &s,
        "GET",
        "/api/v1/apps/order/events",
        None,
        Some("wrong"),
        None,
    );
    assert_eq!(status, 401);
}
