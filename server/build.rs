//! Stamps the binary with the commit it was built from and the build date, for `--version`
//! and `dyeline_build_info`: `DYELINE_COMMIT` / `DYELINE_BUILD_DATE` from the environment when
//! set (an image build without `.git`), else `git rev-parse` and the date of `SOURCE_DATE_EPOCH`
//! (reproducible builds) or of today. Re-runs when HEAD moves, not on every build.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

fn main() {
    for var in ["DYELINE_COMMIT", "DYELINE_BUILD_DATE", "SOURCE_DATE_EPOCH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    // HEAD, the branch it names and the packed refs: a commit moves one of them.
    for path in ["HEAD", "packed-refs"]
        .into_iter()
        .filter_map(|p| git(&["rev-parse", "--git-path", p]))
        .chain(
            git(&["symbolic-ref", "-q", "HEAD"])
                .and_then(|r| git(&["rev-parse", "--git-path", &r])),
        )
    {
        println!("cargo:rerun-if-changed={path}");
    }
    let commit = std::env::var("DYELINE_COMMIT")
        .ok()
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    let date = std::env::var("DYELINE_BUILD_DATE").ok().unwrap_or_else(|| {
        let secs = std::env::var("SOURCE_DATE_EPOCH")
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64)
            });
        chrono::DateTime::from_timestamp(secs, 0).map_or_else(
            || "unknown".to_owned(),
            |t| t.format("%Y-%m-%d").to_string(),
        )
    });
    println!("cargo:rustc-env=DYELINE_COMMIT={commit}");
    println!("cargo:rustc-env=DYELINE_BUILD_DATE={date}");
}
