#!/usr/bin/env python3
"""Local compaction on release-walk (issue 26): bytes per span, files per hour and the files an
hour query opens, before and after `dyeline compact --all`.

release-walk (`../shared/fixtures/analysis/release-walk/`) is imported with `[store]
flush_max_rows = --flush-rows` (so each hour is several files, as a server's once-a-minute
flush leaves it), then compacted. Bytes per span are the span files' bytes over `count(*)`
(issue target after compaction: <= 29.3); a query over one hour opens every file of the hour
(the `spans` table prunes files by hour), so files per hour is the files an hour query opens.
The run also checks that `count(*)` is unchanged and equals `count(DISTINCT trace_id ||
span_id)`.

Usage: python3 bench/compaction.py [--flush-rows 20000] [--profile debug] [--target-dir DIR]
       [--label NAME]
Needs `cargo build --bin dyeline` (or the given profile). Writes
bench/results/compaction[-<label>]-<date>.json and prints it.
"""

import argparse
import datetime
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "..", "shared", "fixtures", "analysis", "release-walk")


def files_per_hour(data):
    spans = os.path.join(data, "spans")
    out = {}
    for hour in sorted(os.listdir(spans)):
        d = os.path.join(spans, hour)
        names = [n for n in os.listdir(d) if n.endswith(".parquet")]
        out[hour] = {
            "files": len(names),
            "bytes": sum(os.path.getsize(os.path.join(d, n)) for n in names),
        }
    return out


def count(dyeline, data):
    out = subprocess.run(
        [dyeline, "sql", "--data-dir", data, "--format", "json",
         "SELECT count(*) AS n, count(DISTINCT trace_id || span_id) AS d FROM spans"],
        check=True, capture_output=True, text=True).stdout
    n, distinct = json.loads(out)["rows"][0]
    assert n == distinct, (n, distinct)
    return n


def figures(hours, spans):
    files = [h["files"] for h in hours.values()]
    total = sum(h["bytes"] for h in hours.values())
    return {
        "hours": len(hours),
        "files": sum(files),
        "files_per_hour_max": max(files),
        "files_per_hour_mean": round(sum(files) / len(files), 2),
        "bytes": total,
        "bytes_per_span": round(total / spans, 2),
        "per_hour": hours,
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--flush-rows", type=int, default=20000)
    p.add_argument("--profile", default="debug")
    p.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    p.add_argument("--label", default="")
    a = p.parse_args()
    dyeline = os.path.join(a.target_dir, a.profile, "dyeline")
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        config = os.path.join(tmp, "dyeline.toml")
        with open(config, "w") as f:
            f.write(f"[store]\nflush_max_rows = {a.flush_rows}\n")
        subprocess.run(
            [dyeline, "import", "--config", config, "--data-dir", data,
             "--timeline", os.path.join(FIXTURE, "timeline.json"),
             os.path.join(FIXTURE, "spans.jsonl.gz")],
            check=True, capture_output=True)
        spans = count(dyeline, data)
        before = figures(files_per_hour(data), spans)
        compact = subprocess.run([dyeline, "compact", "--all", "--data-dir", data],
                                 check=True, capture_output=True, text=True).stdout
        assert count(dyeline, data) == spans
        after = figures(files_per_hour(data), spans)
    result = {
        "date": datetime.date.today().isoformat(),
        "fixture": "release-walk",
        "flush_max_rows": a.flush_rows,
        "profile": a.profile,
        "spans": spans,
        "before": before,
        "after": after,
        "compact_output": compact.strip().splitlines(),
    }
    name = "compaction" + (f"-{a.label}" if a.label else "") + f"-{result['date']}.json"
    with open(os.path.join(ROOT, "bench", "results", name), "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
