#!/usr/bin/env python3
"""Full analyzer pass of two dyeline binaries on one data dir, paired: each run of one is
followed by a run of the other, the order alternating, so a drift of the machine during the
run (builds, other load) weighs on both alike. Checks the two JSON outputs are identical.

Usage: python3 bench/analyze_ab.py --baseline OLD_EXE --measured NEW_EXE --data-dir DIR [--runs 6]
       [--label NAME]
DIR is a data dir both can read, e.g. the `data` folder analyzer_10m.py leaves in its
--work-dir (10 M spans). Writes bench/results/analyze-ab[-<label>]-<date>.json.
"""

import argparse
import datetime
import hashlib
import json
import os
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(exe, data):
    t = time.perf_counter()
    out = subprocess.run([exe, "analyze", "--data-dir", data, "--format", "json"],
                         capture_output=True, check=True).stdout
    return time.perf_counter() - t, hashlib.sha256(out).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--measured", required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    exes = {"baseline": os.path.abspath(args.baseline), "measured": os.path.abspath(args.measured)}
    walls = {k: [] for k in exes}
    digests = {k: set() for k in exes}
    for i in range(args.runs):
        order = ["baseline", "measured"] if i % 2 == 0 else ["measured", "baseline"]
        for k in order:
            wall, digest = run(exes[k], args.data_dir)
            walls[k].append(wall)
            digests[k].add(digest)
        print(f"pair {i + 1}: baseline {walls['baseline'][-1]:.2f} s, "
              f"measured {walls['measured'][-1]:.2f} s", flush=True)
    med = {k: statistics.median(v) for k, v in walls.items()}
    identical = len(digests["baseline"] | digests["measured"]) == 1
    out = {"date": datetime.date.today().isoformat(), "binaries": exes, "data_dir": args.data_dir,
           "command": "dyeline analyze --data-dir DIR --format json",
           "wall_s": walls, "median_s": med, "measured_over_baseline": med["measured"] / med["baseline"],
           "outputs_identical": identical, "load_average": os.getloadavg()}
    label = f"-{args.label}" if args.label else ""
    path = os.path.join(ROOT, "bench", "results", f"analyze-ab{label}-{out['date']}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    print(f"median: baseline {med['baseline']:.2f} s, measured {med['measured']:.2f} s, "
          f"ratio {out['measured_over_baseline']:.3f}; outputs identical: {identical}")
    print(f"written to {path}")


if __name__ == "__main__":
    main()
