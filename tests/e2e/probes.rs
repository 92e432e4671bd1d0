//! What operators and Kubernetes read of a running binary: `--version` with the commit and
//! build date, `dyeline_build_info` on `/metrics`, and `/livez` / `/readyz` on a fresh node
//! (readiness refused for a full staging: `uploads::a_full_staging_refuses_writes_…`).

use std::process::Command;

use crate::support::{Server, dyeline_bin, workspace_root};
use crate::util::*;

/// The commit the repository is at, as `git rev-parse --short=12 HEAD` says.
fn head() -> String {
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(workspace_root())
        .output()
        .expect("git");
    assert!(out.status.success(), "not a git checkout");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn the_version_names_the_commit_and_the_build_date_and_metrics_say_the_same() {
    let out = Command::new(dyeline_bin())
        .arg("--version")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let commit = head();
    let today = chrono::Utc::now().date_naive();
    // `dyeline 0.1.0 (commit 0123456789ab, built YYYY-MM-DD)`, built at most a week ago.
    let built = version
        .rsplit("built ")
        .next()
        .and_then(|d| d.strip_suffix(')'))
        .and_then(|d| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
        .unwrap_or_else(|| panic!("no build date in {version:?}"));
    assert!(
        version.starts_with(&format!(
            "dyeline {} (commit {commit}, built ",
            env!("CARGO_PKG_VERSION")
        )),
        "{version}"
    );
    assert!((today - built).num_days().abs() <= 7, "{version}");
    let dir = temp_dir();
    let s = Server::start(&dir.path().join("data"), &[]);
    let metrics = s.metrics();
    let info = metrics
        .lines()
        .find(|l| l.starts_with("dyeline_build_info{"))
        .unwrap_or_else(|| panic!("no dyeline_build_info in /metrics"));
    for label in [
        format!("version=\"{}\"", env!("CARGO_PKG_VERSION")),
        format!("commit=\"{commit}\""),
        format!("build_date=\"{built}\""),
    ] {
        assert!(info.contains(&label), "{info}: {label}");
    }
    assert!(info.ends_with(" 1"), "{info}");
    for path in ["/livez", "/readyz"] {
        let r = reqwest::blocking::get(format!("http://{}{path}", s.api)).unwrap();
        assert_eq!(
            (r.status().as_u16(), r.text().unwrap()),
            (200, "ok".to_owned()),
            "{path}"
        );
    }
}
