//! `dyeline demo` end to end (issue 6): the real binary runs the server, the simulated fleet
//! (real OpenTelemetry SDKs exporting OTLP/gRPC, real HTTP between instances) and the
//! scripted release at `--speed 5` (the ten-minute release in two minutes). With every fault on,
//! each fault must produce its finding (`GET /api/v1/findings`) and its live alert
//! (`GET /api/v1/alerts`); with `--faults none`, none of the six detections may fire, nor any
//! lane rule (the gray release runs clean). After a clean stop, `dyeline analyze` on the data
//! directory finds the same (the store was flushed). The six lane faults get one short run of
//! their own (issue 25): each is found by `dyeline analyze --format json` and on the lanes
//! page, and the killed gray instance gives only fallbacks.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::dyeline_bin;
use crate::util::*;

const SPEED: &str = "5";
/// The script takes 600 s / speed; the run may last longer so the API can be read after
/// the script's last step, and so a busy machine (the script then runs behind its schedule
/// rather than shortening a step) still reaches it. The test stops the demo itself once it
/// has read what it needs.
const DURATION: &str = "240s";
/// The analyzer window and grace at that speed, for the offline post-mortem.
const WINDOW: &str = "12s";
const GRACE: &str = "2s";
/// The lane window and presence window at that speed (60 s / 5).
const LANE_WINDOW: &str = "12s";

/// The settings the demo scaled for `SPEED`, for a post-mortem on its data dir.
const SCALED: [(&str, &str); 4] = [
    ("DYELINE_ANALYZER__DEFAULTS__WINDOW", WINDOW),
    ("DYELINE_ANALYZER__DEFAULTS__GRACE", GRACE),
    ("DYELINE_ANALYZER__LANES__WINDOW", LANE_WINDOW),
    ("DYELINE_ANALYZER__LANES__PRESENCE_WINDOW", LANE_WINDOW),
];

/// One demo at a time: two fleets at once on a small machine would not keep up, and the
/// windows would hold fewer requests than the detections need.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Demo {
    child: Child,
    lines: mpsc::Receiver<String>,
    api: String,
    token: String,
    /// Unix ns shortly before the start.
    started: u128,
    /// What the demo printed after `data dir: `.
    data_dir_line: String,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Demo {
    /// Starts a demo keeping its data in `data_dir`, or in a temporary one when `None`.
    fn start(data_dir: Option<&std::path::Path>, faults: &str) -> Demo {
        Self::start_for(data_dir, faults, DURATION)
    }

    /// As [`Demo::start`], running for `duration`.
    fn start_for(data_dir: Option<&std::path::Path>, faults: &str, duration: &str) -> Demo {
        let mut command = Command::new(dyeline_bin());
        command.args([
            "demo",
            "--speed",
            SPEED,
            "--duration",
            duration,
            "--faults",
            faults,
        ]);
        if let Some(dir) = data_dir {
            command.arg("--data-dir").arg(dir);
        }
        let mut child = command
            .env("DYELINE_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn dyeline demo");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                eprintln!("[demo {}] {line}", std::process::id());
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut demo = Demo {
            child,
            lines,
            api: String::new(),
            token: String::new(),
            data_dir_line: String::new(),
            started: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .as_nanos()
                - 10_000_000_000,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while demo.api.is_empty() || demo.token.is_empty() || demo.data_dir_line.is_empty() {
            let line = demo
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("the demo prints its addresses and token");
            if let Some(a) = line.split_whitespace().find_map(|w| w.strip_prefix("api=")) {
                demo.api = a.to_owned();
            }
            if let Some(t) = line.strip_prefix("API token: ") {
                demo.token = t.trim().to_owned();
            }
            if let Some(d) = line.strip_prefix("data dir: ") {
                demo.data_dir_line = d.to_owned();
            }
        }
        demo
    }

    fn get(&self, path: &str) -> Value {
        reqwest::blocking::Client::new()
            .get(format!("http://{}{path}", self.api))
            .bearer_auth(&self.token)
            .timeout(Duration::from_secs(60))
            .send()
            .and_then(|r| r.error_for_status())
            .and_then(|r| r.json())
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// Waits for the end of the script, collecting the `type` of every live alert seen.
    fn wait_script(&mut self) -> BTreeSet<(String, String)> {
        let mut alerts = BTreeSet::new();
        let deadline = Instant::now() + Duration::from_secs(400);
        loop {
            match self.lines.recv_timeout(Duration::from_secs(2)) {
                Ok(l) if l == "demo: script finished" => break,
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the demo exited early"),
            }
            assert!(Instant::now() < deadline, "the script did not finish");
            let v = self.get("/api/v1/alerts");
            for a in v["alerts"].as_array().into_iter().flatten() {
                let l = &a["labels"];
                alerts.insert((
                    l["type"].as_str().unwrap_or_default().to_owned(),
                    l["kind"].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
        alerts
    }

    /// SIGTERM; the demo must flush and exit 0.
    fn stop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(status.success(), "demo exited with {status}");
                return;
            }
            assert!(Instant::now() < deadline, "the demo did not stop");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The six detections' titles in the demo's closing summary (`dyeline analyze`'s table).
const SUMMARY_TITLES: [&str; 6] = [
    "cross-colour hops",
    "missing decisions",
    "drained-side traffic",
    "ratio deviations",
    "instance skew",
    "one-sided error spikes",
];

impl Demo {
    /// The demo's lines after a stop, until its stdout closes: the closing summary's count
    /// per detection title (`title: N` lines after `demo: findings over the run`).
    fn closing_counts(&self) -> Vec<(String, u64)> {
        let mut after = false;
        let mut counts = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(30)) {
            if line.starts_with("demo: findings over the run") {
                after = true;
                continue;
            }
            if !after {
                continue;
            }
            if let Some((title, n)) = line.rsplit_once(": ")
                && let (true, Ok(n)) = (SUMMARY_TITLES.contains(&title), n.parse::<u64>())
            {
                counts.push((title.to_owned(), n));
            }
        }
        assert!(after, "the demo printed no closing summary");
        counts
    }
}

/// (type, kind, cause) of each finding.
fn kinds(findings: &[Value]) -> BTreeSet<(String, String, String)> {
    findings
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
            (s("type"), s("kind"), s("cause"))
        })
        .collect()
}

fn has(
    set: &BTreeSet<(String, String, String)>,
    ty: &str,
    kind: Option<&str>,
    cause: Option<&str>,
) -> bool {
    set.iter()
        .any(|(t, k, c)| t == ty && kind.is_none_or(|x| x == k) && cause.is_none_or(|x| x == c))
}

/// The findings over the whole run, live.
fn findings(demo: &Demo) -> Vec<Value> {
    let v = demo.get(&format!("/api/v1/findings?from={}", demo.started));
    v["findings"].as_array().cloned().unwrap_or_default()
}

/// From a server on the stopped demo's data dir (no new spans between the requests): each
/// windowed finding type asked for alone (`type=`, counted as the files are read) gives
/// what the unfiltered list holds of that type, and the run had each of them.
fn windowed_types_alone_match_the_whole_list(data: &std::path::Path, started: u128) {
    let s = crate::support::Server::start(data, &SCALED);
    let get = |query: &str| -> Vec<Value> {
        let url = format!("http://{}/api/v1/findings?from={started}{query}", s.api);
        let v: Value = reqwest::blocking::get(url).unwrap().json().unwrap();
        v["findings"].as_array().cloned().unwrap()
    };
    let all = get("");
    for ty in [
        "drained_side",
        "ratio_deviation",
        "instance_skew",
        "error_spike",
    ] {
        let of_type: Vec<Value> = all.iter().filter(|f| f["type"] == ty).cloned().collect();
        assert!(!of_type.is_empty(), "no {ty} in {all:?}");
        assert_eq!(get(&format!("&type={ty}")), of_type, "{ty}");
    }
}

/// `dyeline analyze --format json` on the stopped demo's data dir, with the windows the demo
/// used.
fn analyze_json(data_dir: &std::path::Path) -> Value {
    let out = Command::new(dyeline_bin())
        .args(["analyze", "--format", "json", "--data-dir"])
        .arg(data_dir)
        .env("DYELINE_LOG", "warn")
        .envs(SCALED)
        .output()
        .expect("run dyeline analyze");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// `dyeline analyze --format json` on the stopped demo's data dir, as a list of findings
/// typed like the API's.
fn offline(data_dir: &std::path::Path) -> BTreeSet<(String, String, String)> {
    let report = analyze_json(data_dir);
    let mut items = Vec::new();
    for (list, ty) in [
        ("cross_color_hops", "cross_color_hop"),
        ("missing_decisions", "missing_decision"),
        ("drained_side", "drained_side"),
        ("ratio_deviation", "ratio_deviation"),
        ("instance_skew", "instance_skew"),
        ("error_spike", "error_spike"),
    ] {
        for i in report[list].as_array().into_iter().flatten() {
            let mut i = i.clone();
            i["type"] = Value::from(ty);
            items.push(i);
        }
    }
    kinds(&items)
}

#[test]
fn demo_with_every_fault_finds_each_one() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir();
    let data = dir.path().join("data");
    let mut demo = Demo::start(Some(&data), "all");
    assert_eq!(demo.data_dir_line, data.display().to_string());
    let alerts = demo.wait_script();
    let live = kinds(&findings(&demo));
    demo.stop();
    let closing = demo.closing_counts();
    eprintln!("findings: {live:?}\nalerts: {alerts:?}\nclosing summary: {closing:?}");
    // The closing summary analysed the run: every fault's detection is counted there too.
    assert_eq!(closing.len(), SUMMARY_TITLES.len(), "{closing:?}");
    for (title, n) in &closing {
        assert!(*n > 0, "the closing summary counts no {title}: {closing:?}");
    }
    // fault → the finding it must produce: (type, kind, cause).
    let expected: [(&str, &str, Option<&str>, Option<&str>); 7] = [
        ("legacy-hop", "cross_color_hop", None, None),
        ("legacy-hop", "missing_decision", None, None),
        ("error-spike", "error_spike", Some("RPC"), None),
        ("instance-skew", "instance_skew", Some("RPC"), None),
        ("job-left-running", "drained_side", Some("JOB"), None),
        ("consumers-not-stopped", "drained_side", Some("MQ"), None),
        (
            "unequal-clusters",
            "ratio_deviation",
            Some("RPC"),
            Some("unequal_cluster_sizes"),
        ),
    ];
    let post_mortem = offline(&data);
    windowed_types_alone_match_the_whole_list(&data, demo.started);
    for (fault, ty, kind, cause) in expected {
        assert!(
            has(&live, ty, kind, cause),
            "{fault}: no {ty} {kind:?} {cause:?} in {live:?}"
        );
        assert!(
            alerts
                .iter()
                .any(|(t, k)| t == ty && kind.is_none_or(|x| x == k)),
            "{fault}: no {ty} {kind:?} alert in {alerts:?}"
        );
        assert!(
            has(&post_mortem, ty, kind, cause),
            "{fault}: the post-mortem on the data dir lost {ty} {kind:?}: {post_mortem:?}"
        );
    }
}

#[test]
fn demo_without_faults_finds_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir();
    let data = dir.path().join("data");
    let mut demo = Demo::start(Some(&data), "none");
    let alerts = demo.wait_script();
    let live = findings(&demo);
    demo.stop();
    let closing = demo.closing_counts();
    assert!(live.is_empty(), "findings without faults: {live:#?}");
    // The gray release ran clean: every lane instance served its lane, nothing left it.
    let report = analyze_json(&data);
    for list in LANE_FINDING_LISTS {
        assert_eq!(
            report[list],
            Value::Array(Vec::new()),
            "{list} without faults"
        );
    }
    let coverage = lane_coverage(&report);
    for app in ["order", "inventory", "payment", "risk", "notify"] {
        let c = coverage
            .get(&("gray".to_owned(), app.to_owned()))
            .unwrap_or_else(|| panic!("no gray coverage at {app}: {coverage:?}"));
        assert!(c.served_in_lane > 0, "gray at {app}: {c:?}");
        assert_eq!((c.lane_fallback, c.leaked), (0, 0), "gray at {app}: {c:?}");
    }
    assert_eq!(
        closing,
        SUMMARY_TITLES.map(|t| (t.to_owned(), 0)).to_vec(),
        "the closing summary of a run without faults"
    );
    assert!(alerts.is_empty(), "alerts without faults: {alerts:?}");
}

#[test]
fn a_demo_without_a_data_dir_says_it_is_temporary_and_removes_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut demo = Demo::start(None, "none");
    let (path, note) = demo
        .data_dir_line
        .split_once(" (")
        .expect("a note after the temporary data dir");
    assert!(note.starts_with("temporary"), "{}", demo.data_dir_line);
    let path = std::path::PathBuf::from(path);
    assert!(
        path.is_dir(),
        "{} does not exist while the demo runs",
        path.display()
    );
    demo.stop();
    // The demo has exited: its stdout is closed, so the reader thread ends the line stream.
    let rest: Vec<String> = demo.lines.iter().collect();
    assert!(!path.exists(), "{} is left after the demo", path.display());
    assert!(
        rest.iter()
            .any(|l| l.contains("removed the temporary data dir")
                && l.contains(&path.display().to_string())),
        "no line says the data dir was removed: {rest:?}"
    );
}

/// The lane finding lists of `dyeline analyze --format json`.
const LANE_FINDING_LISTS: [&str; 5] = [
    "lane_leaks",
    "lane_tags_dropped",
    "lane_pollution",
    "lane_tags_changed",
    "lane_error_spike",
];

/// One lane and app's coverage summed over the windows, and the window starts where its
/// requests were served in the lane and where they fell back.
#[derive(Debug, Default)]
struct Coverage {
    served_in_lane: u64,
    lane_fallback: u64,
    leaked: u64,
    in_lane_windows: Vec<u64>,
    fallback_windows: Vec<u64>,
}

fn lane_coverage(report: &Value) -> std::collections::BTreeMap<(String, String), Coverage> {
    let mut m = std::collections::BTreeMap::<(String, String), Coverage>::new();
    for w in report["lane_coverage"].as_array().into_iter().flatten() {
        let s = |k: &str| w[k].as_str().unwrap_or_default().to_owned();
        let n = |k: &str| w[k].as_u64().unwrap_or_default();
        let start = w["window_start_unix_nano"]
            .as_u64()
            .or_else(|| w["window_start_unix_nano"].as_str()?.parse().ok())
            .expect("a window start");
        let c = m.entry((s("lane"), s("app"))).or_default();
        c.served_in_lane += n("served_in_lane");
        c.lane_fallback += n("lane_fallback");
        c.leaked += n("leaked");
        if n("served_in_lane") > 0 {
            c.in_lane_windows.push(start);
        }
        if n("lane_fallback") > 0 {
            c.fallback_windows.push(start);
        }
    }
    m
}

/// The lane faults, each a switch of its own.
const LANE_FAULTS: &str = "lane-tag-ignored,lane-tag-dropped,lane-pollution,lane-mq-leak,lane-instance-killed,lane-error-spike";

/// Whether `list` of `report` holds an item with every (key, value) of `want`.
fn holds(report: &Value, list: &str, want: &[(&str, &str)]) -> bool {
    report[list]
        .as_array()
        .into_iter()
        .flatten()
        .any(|i| want.iter().all(|(k, v)| i[*k] == *v))
}

/// The six lane faults in one short run (40 s at speed 5: the kill comes at 24 s, speed-1
/// 120 s): `dyeline analyze --format json` over the data dir finds each, the lanes page of
/// group `mall` shows them, and inventory's killed gray instance gives fallbacks only, from
/// the window of its last signal on, and no lane finding.
#[test]
fn demo_lane_faults_are_each_found_in_the_post_mortem() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir();
    let data = dir.path().join("data");
    let mut demo = Demo::start_for(Some(&data), LANE_FAULTS, "40s");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Ok(Some(status)) = demo.child.try_wait() {
            break status;
        }
        assert!(Instant::now() < deadline, "the demo did not stop");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(status.success(), "demo exited with {status}");
    // Its stdout is closed: the reader thread ends the line stream.
    let lines: Vec<String> = demo.lines.iter().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("kill inventory-gray-1 (lane-instance-killed)")),
        "{lines:?}"
    );
    let report = analyze_json(&data);
    let gray = ("lane", "gray");
    // fault → the list of its finding and the (key, value) pairs it must hold.
    type Expected<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>);
    let expected: [Expected; 5] = [
        (
            "lane-tag-ignored",
            "lane_leaks",
            vec![
                gray,
                ("kind", "RPC"),
                ("reason", "tag_ignored"),
                ("to_app", "risk"),
                ("to_lane", "base"),
            ],
        ),
        (
            "lane-tag-dropped",
            "lane_tags_dropped",
            vec![
                gray,
                ("kind", "MQ"),
                ("app", "notify"),
                ("dropped_by", "order"),
                ("where", "in_process"),
            ],
        ),
        (
            "lane-pollution",
            "lane_pollution",
            vec![
                ("lane", "gray"),
                ("kind", "RPC"),
                ("app", "payment"),
                ("reason", "untagged"),
                ("from_app", "order"),
            ],
        ),
        (
            "lane-mq-leak",
            "lane_leaks",
            vec![
                gray,
                ("kind", "MQ"),
                ("reason", "tag_ignored"),
                ("to_app", "notify"),
                ("to_lane", "base"),
            ],
        ),
        (
            "lane-error-spike",
            "lane_error_spike",
            vec![
                gray,
                ("app", "order"),
                ("other_lane", "base"),
                ("kind", "RPC"),
            ],
        ),
    ];
    for (fault, list, want) in &expected {
        assert!(
            holds(&report, list, want),
            "{fault}: no {want:?} in {list}: {:#}",
            report[list]
        );
    }
    // Every lane finding is of group mall.
    for list in LANE_FINDING_LISTS {
        for i in report[list].as_array().into_iter().flatten() {
            assert_eq!(i["group"], "mall", "{list}: {i}");
        }
    }
    // lane-instance-killed: inventory's gray requests were served in the lane, then fell back
    // (counted, never a finding), from the window of the kill on.
    for list in LANE_FINDING_LISTS {
        for i in report[list].as_array().into_iter().flatten() {
            let judged = i.get("to_app").or_else(|| i.get("app"));
            assert!(
                !(judged == Some(&Value::from("inventory")) && i["lane"] == "gray"),
                "the killed instance raised {list}: {i}"
            );
        }
    }
    let coverage = lane_coverage(&report);
    let inv = coverage
        .get(&("gray".to_owned(), "inventory".to_owned()))
        .unwrap_or_else(|| panic!("no gray coverage at inventory: {coverage:?}"));
    assert!(inv.served_in_lane > 0 && inv.lane_fallback > 0, "{inv:?}");
    assert_eq!(inv.leaked, 0, "{inv:?}");
    assert!(
        inv.in_lane_windows.iter().max() <= inv.fallback_windows.iter().min(),
        "fallbacks before the kill: {inv:?}"
    );
    assert!(
        report["lane_counts"]["lane_fallback"].as_u64() >= Some(inv.lane_fallback),
        "{}",
        report["lane_counts"]
    );
    // The lanes page of the group shows them, without JavaScript.
    let s = crate::support::Server::start(&data, &SCALED);
    let page = reqwest::blocking::get(format!("http://{}/lanes/mall?from={}", s.api, demo.started))
        .unwrap()
        .text()
        .unwrap()
        .replace("<!>", "");
    for finding in [
        "lane_leak",
        "lane_tag_dropped",
        "lane_pollution",
        "lane_error_spike",
    ] {
        assert!(
            page.contains(&format!(r#"data-finding="{finding}""#)),
            "{finding} not on /lanes/mall: {page}"
        );
    }
    let cell = &page[page
        .find(r#"data-app="inventory" data-lane="gray""#)
        .expect("inventory's gray cell")..];
    let cell = &cell[..cell.find("</td>").unwrap()];
    assert!(
        cell.contains("inventory-gray-1") && cell.contains("absent"),
        "{cell}"
    );
}
