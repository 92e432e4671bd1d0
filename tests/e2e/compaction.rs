//! `dyeline compact --all` on release-walk imported with a small flush (several files an
//! hour): each hour ends with one file (the default target is far above an hour's bytes), no
//! span is lost or doubled, and `dyeline analyze --format json` still passes
//! `check_findings.py`. Prints the files per hour and bytes per span before and after.

use std::collections::BTreeMap;
use std::path::Path;

use crate::fixtures::{analyze_checked, sql_json};
use crate::util::*;

/// The `part-*.parquet` files of each hour directory of `data`, and their bytes.
fn files_per_hour(data: &Path) -> BTreeMap<String, (usize, u64)> {
    let mut out = BTreeMap::new();
    for hour in std::fs::read_dir(data.join("spans")).unwrap() {
        let hour = hour.unwrap();
        let entry: &mut (usize, u64) = out
            .entry(hour.file_name().to_string_lossy().into_owned())
            .or_default();
        for f in std::fs::read_dir(hour.path()).unwrap() {
            let f = f.unwrap();
            let name = f.file_name().to_string_lossy().into_owned();
            assert!(
                !name.ends_with(".tmp") && !name.ends_with(".journal"),
                "{name}"
            );
            entry.0 += 1;
            entry.1 += f.metadata().unwrap().len();
        }
    }
    out
}

fn count_spans(data: &Path) -> u64 {
    let rows = sql_json(
        data,
        "SELECT count(*) AS n, count(DISTINCT trace_id || span_id) AS d FROM spans",
    );
    let n = rows[0][0].as_u64().unwrap();
    assert_eq!(rows[0][1].as_u64(), Some(n), "a span twice");
    n
}

#[test]
fn release_walk_compacted_keeps_its_findings_in_fewer_files() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let config = dir.path().join("dyeline.toml");
    std::fs::write(&config, "[store]\nflush_max_rows = 20000\n").unwrap();
    let fixture = shared_dir().join("fixtures/analysis/release-walk");
    let (ok, _, err) = run_cli(&[
        "import",
        "--config",
        config.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
        "--timeline",
        fixture.join("timeline.json").to_str().unwrap(),
        fixture.join("spans.jsonl.gz").to_str().unwrap(),
    ]);
    assert!(ok, "import: {err}");
    let before = files_per_hour(&data);
    let spans = count_spans(&data);
    assert!(
        before.values().any(|(files, _)| *files >= 3),
        "a small flush writes several files an hour: {before:?}"
    );
    let (ok, out, err) = run_cli(&["compact", "--all", "--data-dir", data.to_str().unwrap()]);
    assert!(ok, "compact: {err}");
    let compacted = before.values().filter(|(files, _)| *files > 1).count();
    let hours = if compacted == 1 { "hour" } else { "hours" };
    assert!(
        out.contains(&format!("compacted {compacted} {hours}:")),
        "{out}"
    );
    let after = files_per_hour(&data);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>()
    );
    for (hour, (files, _)) in &after {
        assert_eq!(*files, 1, "{hour}: {after:?}");
    }
    assert_eq!(count_spans(&data), spans);
    // Nothing left to do.
    let (ok, out, _) = run_cli(&["compact", "--all", "--data-dir", data.to_str().unwrap()]);
    assert!(ok && out.starts_with("nothing to compact"), "{out}");

    analyze_checked(&data, "release-walk");

    let bytes = |m: &BTreeMap<String, (usize, u64)>| m.values().map(|v| v.1).sum::<u64>();
    let files = |m: &BTreeMap<String, (usize, u64)>| m.values().map(|v| v.0).sum::<usize>();
    eprintln!(
        "release-walk, {spans} spans, {} hours: files {} → {} (per hour at most {} → {}), \
         bytes per span {:.2} → {:.2}",
        before.len(),
        files(&before),
        files(&after),
        before.values().map(|v| v.0).max().unwrap_or(0),
        after.values().map(|v| v.0).max().unwrap_or(0),
        bytes(&before) as f64 / spans as f64,
        bytes(&after) as f64 / spans as f64,
    );
}
