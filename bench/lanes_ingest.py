#!/usr/bin/env python3
"""The cost of lane resolution at ingest (issue 25's target: within 5 %).

Runs `decode_floor` (one core: OTLP protobuf decode and conversion to Arrow rows, the receivers'
wire path and its WAL record encoding; no network, no disk) on the same requests with lane
resolution on (the product's path) and with the bench-only switch that skips it
(`--skip-lanes`, `ConvertOptions::skip_lanes_bench_only`: the six lane columns null), each
pair of runs alternating its order so a drift of the machine weighs on both alike. Two inputs:

- plain: loadgen's requests (40 services x 4 instances, 1,000 spans each, no lane marks) with
  the default chains (`deploy.lane`, the three built-in carriers);
- lanes: the same requests marked by `dyeline_bench::stain_lanes` (a quarter of the instances
  gray through Nacos metadata, 5/8 of the spans with a lane tag from a captured `gray`
  header or baggage) with the lane rules and carriers of the lanes-walk fixture's
  `dyeline.toml` (an attribute rule, a host-name regex rule, a mapped header carrier).

Per input: the medians of CPU s per million spans of the receivers' decode + convert
(`wire_decode_and_convert`), of that + the WAL record encoding, and of the whole ingest (that +
the flusher's seal into Parquet parts + the file write: `ingest_total`), on and off, their
ratios, and the throughput of one core (spans/s) the whole ingest implies.

Usage: python3 bench/lanes_ingest.py [--pairs 5] [--requests 300] [--profile bench-fast]
       [--target-dir DIR] [--label NAME]
Needs `cargo build --profile bench-fast -p dyeline-bench --bin decode_floor`.
Writes bench/results/lanes-ingest[-<label>]-<date>.json and prints a table.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "..", "shared", "fixtures", "analysis", "lanes-walk", "dyeline.toml")
KEYS = ["wire_decode_and_convert_cpu_s_per_million",
        "wire_decode_convert_and_record_encode_cpu_s_per_million",
        "ingest_total_cpu_s_per_million"]
TARGET = 1.05


def floor(exe, requests, lanes, skip):
    cmd = [exe, "--requests", str(requests), "--reps", "3"]
    if lanes:
        cmd += ["--lane-config", CONFIG]
    if skip:
        cmd.append("--skip-lanes")
    out = subprocess.run(cmd, capture_output=True, check=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    # A span's whole ingest: the receiver's decode, conversion and WAL record, then the
    # flusher's seal into Parquet parts and the file write.
    r["ingest_total_cpu_s_per_million"] = (r[KEYS[1]] + r["seal_cpu_s_per_million"]
                                           + r["flush_cpu_s_per_million"])
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="bench-fast")
    ap.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    exe = os.path.join(args.target_dir, args.profile, "decode_floor")
    results = {}
    for name, lanes in (("plain", False), ("lanes", True)):
        runs = {"on": [], "off": []}
        for i in range(args.pairs):
            order = ["on", "off"] if i % 2 == 0 else ["off", "on"]
            for k in order:
                runs[k].append(floor(exe, args.requests, lanes, k == "off"))
            print(f"{name} pair {i + 1}: on {runs['on'][-1][KEYS[2]]:.3f}, "
                  f"off {runs['off'][-1][KEYS[2]]:.3f} CPU s per million spans, whole ingest", flush=True)
        med = {k: {key: statistics.median(r[key] for r in v) for key in KEYS} for k, v in runs.items()}
        results[name] = {
            "medians_cpu_s_per_million": med,
            "on_over_off": {key: med["on"][key] / med["off"][key] for key in KEYS},
            "one_core_spans_per_s": {k: 1e6 / med[k][KEYS[2]] for k in med},
            "runs": runs,
        }
    out = {"date": datetime.date.today().isoformat(), "profile": args.profile,
           "requests": args.requests, "spans_per_request": 1000, "target_on_over_off": TARGET,
           "lane_config": os.path.relpath(CONFIG, ROOT), "load_average": os.getloadavg(),
           "results": results}
    label = f"-{args.label}" if args.label else ""
    path = os.path.join(ROOT, "bench", "results", f"lanes-ingest{label}-{out['date']}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    print(f"\n{'input':<7} {'stage':<44} {'on':>8} {'off':>8} {'on/off':>7}")
    for name, r in results.items():
        for key in KEYS:
            m = r["medians_cpu_s_per_million"]
            print(f"{name:<7} {key:<44} {m['on'][key]:8.3f} {m['off'][key]:8.3f} "
                  f"{r['on_over_off'][key]:7.3f}")
    print(f"(CPU s per million spans, one core; target on/off <= {TARGET})\nwritten to {path}")


if __name__ == "__main__":
    main()
