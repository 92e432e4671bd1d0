#!/usr/bin/env python3
"""The lane detections at 10 million spans (issue 25's target: the full pass with all detections
within 1.3x of the pass with only the six blue-green detections of domain section 6).

(a) Generator: K copies of the lanes-walk capture (its spans and its OTLP metrics export, the
    presence signals of idle instances), K chosen so the spans total at least --spans. Copy i
    has every *UnixNano time shifted by i x the capture's length and every trace id made unique
    (analyzer_10m.py's generator; the metrics lines get the same time shift); the timeline's
    lane group ops repeat per copy. Imported with the real binary and the capture's
    `dyeline.toml` (its lane rules and carriers): `dyeline import --config C --data-dir D
    --timeline T spans... metrics...` (timed).
(b) Paired full passes, each in a new process: `dyeline analyze --config C --data-dir D
    --format json` (all detections: the six of section 6 and the lane rules of section 7) and
    the same with `--detections` of the six section-6 types; each run of one followed by a run
    of the other, the order alternating, so a drift of the machine weighs on both alike. Medians
    and their ratio (target <= 1.3).
(c) The lane finding counts of the full pass against K x those of one copy (the capture alone,
    imported and analysed the same way). A copy's first minute sees the previous copy's last
    signals within the presence window, so counts may differ slightly at the seams: the
    difference is reported, not asserted.

Usage: python3 bench/lanes_10m.py [--spans 10000000] [--work-dir DIR [--reuse]] [--runs 5]
       [--label NAME] [--profile bench-fast] [--target-dir DIR]
The binary is <target-dir>/<profile>/dyeline, built beforehand
(`cargo build --profile bench-fast --bin dyeline`); a copy of it is run.
Writes bench/results/lanes-10m[-<label>]-<date>.json and prints a summary.
"""

import argparse
import datetime
import glob
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import analyzer_10m as a10m  # noqa: E402  (the generator, run helpers and machine info)

ROOT = a10m.ROOT
CAPTURE = os.path.join(ROOT, "..", "shared", "fixtures", "analysis", "lanes-walk")
SIX = ["cross_color_hop", "missing_decision", "drained_side", "ratio_deviation",
       "instance_skew", "error_spike"]
LANE_LISTS = ["lane_leaks", "lane_tags_dropped", "lane_pollution", "lane_tags_changed",
              "lane_error_spike"]
TARGET_RATIO = 1.3


def copy_metrics(capture, gen_dir, copies, period):
    """Writes the capture's metrics lines once per copy, times shifted as the spans'."""
    with open(os.path.join(capture, "metrics.jsonl")) as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    files = []
    for i in range(copies):
        off = i * period

        def sub(m, off=off):
            key, val = m.group(1), m.group(2)
            return '"%s":"%d"' % (key, int(val) + off) if val and key != "traceId" else m.group(0)

        path = os.path.join(gen_dir, "metrics-%04d.jsonl.gz" % i)
        with gzip.open(path, "wt", compresslevel=1) as out:
            for line in lines:
                out.write(a10m.TOKEN.sub(sub, line))
                out.write("\n")
        files.append(path)
    return files


def lane_counts(report):
    counts = {k: len(report.get(k) or []) for k in LANE_LISTS}
    for k, v in (report.get("lane_counts") or {}).items():
        counts["count." + k] = v
    return counts


def analyze(exe, config, data, detections, out_path):
    cmd = [exe, "analyze", "--config", config, "--data-dir", data, "--format", "json"]
    if detections:
        cmd += ["--detections", ",".join(detections)]
    with open(out_path, "wb") as f:
        return a10m.run(cmd, stdout=f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="bench-fast")
    ap.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    ap.add_argument("--spans", type=int, default=10_000_000)
    ap.add_argument("--work-dir")
    ap.add_argument("--reuse", action="store_true", help="reuse the import in --work-dir")
    ap.add_argument("--runs", type=int, default=5, help="pairs of runs")
    ap.add_argument("--capture", default=CAPTURE)
    ap.add_argument("--wait-binary", type=int, default=3600)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    if args.reuse and not args.work_dir:
        raise SystemExit("--reuse needs --work-dir")
    work = os.path.abspath(args.work_dir) if args.work_dir else tempfile.mkdtemp(
        prefix="lanes-10m-", dir=os.path.join(os.path.dirname(ROOT), "a10m"))
    os.makedirs(work, exist_ok=True)
    data, meta_path = os.path.join(work, "data"), os.path.join(work, "meta.json")
    config = os.path.join(args.capture, "dyeline.toml")
    src_exe = os.path.join(args.target_dir, args.profile, "dyeline")
    out = {"date": datetime.date.today().isoformat(), "profile": args.profile,
           "git": a10m.git_info(), "machine": a10m.machine(),
           "target_ratio": TARGET_RATIO, "before_phase": {}}
    if args.reuse:
        with open(meta_path) as f:
            meta = json.load(f)
        exe, out["binary"] = a10m.ready_binary(src_exe, args.wait_binary, work)
    else:
        shutil.rmtree(data, ignore_errors=True)
        gen = os.path.join(work, "gen")
        os.makedirs(gen, exist_ok=True)
        meta = a10m.generate(args.capture, gen, args.spans, 0, 1, 1)
        metrics = copy_metrics(args.capture, gen, meta["copies"], meta["period_s"] * 10**9)
        exe, out["binary"] = a10m.ready_binary(src_exe, args.wait_binary, work)
        a10m.wait_quiet("import", args.wait_binary, out)
        a10m.log(f"importing {meta['spans']:,} spans and {len(metrics)} metrics files ...")
        with open(os.path.join(work, "import.log"), "w") as f:
            wall, cpu, rss = a10m.run([exe, "import", "--config", config, "--data-dir", data,
                                       "--timeline", meta["timeline"]] + meta["files"] + metrics,
                                      stdout=f, stderr=subprocess.STDOUT)
        meta["import"] = {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": rss,
                          "spans_per_s": meta["spans"] / wall}
        a10m.log(f"imported in {wall:.1f} s ({meta['spans'] / wall:,.0f} spans/s, CPU {cpu:.0f} s)")
        for p in meta["files"] + metrics:
            os.remove(p)
        one = os.path.join(work, "one-copy")
        shutil.rmtree(one, ignore_errors=True)
        a10m.run([exe, "import", "--config", config, "--data-dir", one, "--timeline",
                  os.path.join(args.capture, "timeline.json"),
                  os.path.join(args.capture, "spans.jsonl.gz"),
                  os.path.join(args.capture, "metrics.jsonl")])
        analyze(exe, config, one, None, os.path.join(work, "one-copy.json"))
        with open(os.path.join(work, "one-copy.json")) as f:
            meta["one_copy"] = lane_counts(json.load(f))
        shutil.rmtree(one, ignore_errors=True)
        meta.pop("files", None)
        with open(meta_path, "w") as f:
            json.dump(meta, f, indent=1)
    parquet = glob.glob(os.path.join(data, "spans", "**", "*.parquet"), recursive=True)
    out["generation"] = {k: meta.get(k) for k in ("copies", "spans", "spans_per_copy", "traces",
                                                  "period_s")}
    out["import"] = meta.get("import")
    out["parquet"] = {"files": len(parquet), "bytes": sum(os.path.getsize(p) for p in parquet)}

    a10m.wait_quiet("analyze", args.wait_binary, out)
    walls = {"all": [], "six": []}
    for i in range(args.runs):
        order = ["all", "six"] if i % 2 == 0 else ["six", "all"]
        for k in order:
            wall, _, _ = analyze(exe, config, data, SIX if k == "six" else None,
                                 os.path.join(work, f"analyze-{k}.json"))
            walls[k].append(wall)
        a10m.note_build(out, "analyze")
        a10m.log(f"pair {i + 1}/{args.runs}: all {walls['all'][-1]:.2f} s, six {walls['six'][-1]:.2f} s")
    med = {k: statistics.median(v) for k, v in walls.items()}
    with open(os.path.join(work, "analyze-all.json")) as f:
        counts = lane_counts(json.load(f))
    expected = {k: v * meta["copies"] for k, v in meta["one_copy"].items() if isinstance(v, int)}
    out["analyze"] = {
        "all": "dyeline analyze --config C --data-dir D --format json",
        "six": "... --detections " + ",".join(SIX),
        "wall_s": walls, "median_s": med, "all_over_six": med["all"] / med["six"],
        "lane_counts": counts, "k_times_one_copy": expected,
        "load_average_after": os.getloadavg(),
    }
    label = f"-{args.label}" if args.label else ""
    path = os.path.join(ROOT, "bench", "results", f"lanes-10m{label}-{out['date']}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    print(f"\n{meta['spans']:,} spans ({meta['copies']} copies of lanes-walk)")
    print(f"full pass, all detections: median {med['all']:.2f} s; six section-6 types: "
          f"{med['six']:.2f} s; ratio {med['all'] / med['six']:.3f} (target <= {TARGET_RATIO})")
    for k in sorted(set(counts) | set(expected)):
        print(f"  {k:34} {counts.get(k)!s:>10} (K x one copy: {expected.get(k)})")
    print(f"written to {path}")


if __name__ == "__main__":
    main()
