//! The command line's conventions for scripts and CI (issue 28 item 6): `dyeline completions`
//! prints a script the shell accepts, `analyze --fail-on` gates on finding types by exit
//! status, and `--format csv` of `analyze` and `sql` parses back as CSV. Checked on the
//! release-small fixture, whose expected.json lists 6 cross-colour hops and 3 missing
//! decisions, and no drained-side traffic or error spike.

use std::process::Command;

use crate::support::dyeline_bin;
use crate::util::*;

/// Runs `dyeline args`: exit status, stdout, stderr.
fn status_of(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(dyeline_bin())
        .args(args)
        .env("DYELINE_LOG", "warn")
        .output()
        .expect("run dyeline");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The bash script `dyeline completions bash` prints passes `bash -n` and completes the
/// subcommands (new ones included) and analyze's flags; every other shell gets a script too.
#[test]
fn completions_bash_script_parses_and_names_the_subcommands() {
    let (code, script, err) = status_of(&["completions", "bash"]);
    assert_eq!(code, Some(0), "{err}");
    let dir = temp_dir();
    let path = dir.path().join("dyeline.bash");
    std::fs::write(&path, &script).unwrap();
    let check = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(
        check.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    for word in [
        "serve",
        "analyze",
        "sql",
        "import",
        "channel",
        "lane-group",
        "completions",
        "--fail-on",
    ] {
        assert!(script.contains(word), "{word} missing from the script");
    }
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        let (code, out, err) = status_of(&["completions", shell]);
        assert_eq!(code, Some(0), "{shell}: {err}");
        assert!(out.contains("analyze"), "{shell}");
    }
    let (code, _, err) = status_of(&["completions", "tcsh"]);
    assert_eq!(code, Some(2), "{err}");
}

/// `--fail-on`: exit 3 when a finding of a named type is there (hops: yes), 0 when none is
/// (error spikes, drained side: none), `any` fails on the hops, the output is printed either
/// way; an unknown type or one `--detections` leaves out is a usage error (2) naming the
/// valid types.
#[test]
fn analyze_fail_on_exits_3_on_a_named_finding_type_only() {
    let (_dir, data) = crate::fixtures::import("release-small", "spans.jsonl");
    let data = data.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["analyze", "--data-dir", data, "--format", "json"];
        args.extend_from_slice(extra);
        status_of(&args)
    };
    let (code, out, err) = run(&["--fail-on", "cross_color_hop"]);
    assert_eq!(code, Some(3), "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["cross_color_hops"].as_array().unwrap().len(), 6);
    assert!(err.contains("6 cross_color_hop"), "{err}");
    let (code, _, err) = run(&["--fail-on", "error_spike,drained_side"]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = run(&["--fail-on", "error_spike", "--fail-on", "missing_decision"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("3 missing_decision"), "{err}");
    let (code, _, err) = run(&["--fail-on", "any"]);
    assert_eq!(code, Some(3), "{err}");
    let (code, _, _) = run(&[]);
    assert_eq!(code, Some(0));
    let (code, out, err) = run(&["--fail-on", "cross_color_hop,bogus"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(out.is_empty());
    assert!(
        err.contains("bogus") && err.contains("lane_error_spike") && err.contains("any"),
        "{err}"
    );
    let (code, _, err) = run(&[
        "--detections",
        "error_spike",
        "--fail-on",
        "cross_color_hop",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--detections"), "{err}");
}

/// `analyze --format csv`: one table, `type` first; each finding a row, read back with the
/// csv crate: a hop's row has its channel, apps, colours and reason where the header says,
/// a missing decision leaves the hop-only columns empty. `sql --format csv` too.
#[test]
fn analyze_and_sql_csv_parse_back() {
    let (_dir, data) = crate::fixtures::import("release-small", "spans.jsonl");
    let data = data.to_str().unwrap();
    let (code, json, err) = status_of(&["analyze", "--data-dir", data, "--format", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let (code, out, err) = status_of(&["analyze", "--data-dir", data, "--format", "csv"]);
    assert_eq!(code, Some(0), "{err}");
    let mut reader = csv::Reader::from_reader(out.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header[0], "type");
    assert_eq!(header[1], "channel");
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 6 + 3, "{out}");
    let hops: Vec<&csv::StringRecord> =
        rows.iter().filter(|r| &r[0] == "cross_color_hop").collect();
    assert_eq!(hops.len(), 6);
    let first = &report["cross_color_hops"][0];
    let row = hops
        .iter()
        .find(|r| &r[col("span_id")] == first["span_id"].as_str().unwrap())
        .expect("the first hop's row");
    for field in [
        "channel",
        "trace_id",
        "from_app",
        "to_app",
        "to_color",
        "reason",
        "t_unix_nano",
    ] {
        assert_eq!(&row[col(field)], first[field].as_str().unwrap(), "{field}");
    }
    let via: Vec<&str> = first["via"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(&row[col("via")], via.join(" "));
    let missing = rows.iter().find(|r| &r[0] == "missing_decision").unwrap();
    assert!(!missing[col("caller_app")].is_empty());
    assert!(missing[col("to_app")].is_empty());

    let (code, out, err) = status_of(&[
        "sql",
        "--data-dir",
        data,
        "--format",
        "csv",
        "SELECT service_name, count(*) AS n FROM spans GROUP BY 1 ORDER BY 1",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let mut reader = csv::Reader::from_reader(out.as_bytes());
    assert_eq!(reader.headers().unwrap(), vec!["service_name", "n"]);
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let total: u64 = rows.iter().map(|r| r[1].parse::<u64>().unwrap()).sum();
    assert_eq!(total, 101, "{out}");
}
