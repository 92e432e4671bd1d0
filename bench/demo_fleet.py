#!/usr/bin/env python3
"""`dyeline demo` fleet benchmark of issue 6: the fleet's sustained spans/s at full speed and
the collector's share of CPU.

For each `--speed` asked, runs `dyeline demo --speed S --faults all --duration W+M` (a fresh
temporary data dir, ports chosen by the OS), lets it warm up W seconds, then over the next M
seconds measures, in the same process:

- spans/s stored: the rise of `dyeline_receiver_spans_accepted_total` on `GET /metrics`;
- requests/s asked of the fleet: `8 × speed` (server/src/demo.rs RATE_PER_SEC);
- whether the fleet kept up: the demo prints "cannot keep up" on stderr when its load
  generator falls behind (the measured window counts only warnings printed inside it);
- CPU seconds per thread, from /proc/<pid>/task/*/stat (utime + stime), grouped by thread
  name. The demo runs the collector on its own runtime (threads `dyeline-serve`), and the
  store's `dyeline-writer` / `dyeline-flusher` and the control plane's `sqlx-sqlite-worker-N`
  threads are the collector's too; everything else (`dyeline-fleet` runtime threads, the
  SDKs' `OpenTelemetry.Traces.BatchProcessor` threads, the main thread) is the fleet's.
  Threads that ended inside the window are not seen (their CPU is lost to both sides);
- the process's resident memory at the end of the window (collector and fleet together).

"Full speed" is the highest speed that kept up; the fleet and the collector share this
machine's cores, so the figure is the whole simulated system's throughput on it.

Usage: python3 bench/demo_fleet.py [--profile bench-fast] [--speeds 10,20,40,80]
       [--warmup 20] [--measure 60]
Writes bench/results/demo-fleet-<date>.json and prints a table.
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import threading
import time
import urllib.request

from proc_cpu import diff_cpu, thread_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTOR_PREFIXES = ("dyeline-serve", "dyeline-writer", "dyeline-flushe", "sqlx-sqlite-wor")
RATE_PER_SEC = 8.0


def accepted(api):
    with urllib.request.urlopen(f"http://{api}/metrics", timeout=30) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("dyeline_receiver_spans_accepted_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def run_speed(exe, speed, warmup, measure):
    proc = subprocess.Popen(
        [exe, "demo", "--speed", str(speed), "--faults", "all",
         "--duration", f"{warmup + measure + 5}s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("DYELINE_")})
    api = None
    for line in proc.stdout:
        m = re.match(r"dashboard: http://([0-9.:]+)/", line)
        if m:
            api = m.group(1)
            break
    if api is None:
        raise SystemExit(f"speed {speed}: the demo did not print its dashboard address")
    warnings = []
    phase = {"measuring": False}

    def read_stderr():
        for line in proc.stderr:
            if "cannot keep up" in line:
                warnings.append((phase["measuring"], line.strip()))

    t = threading.Thread(target=read_stderr, daemon=True)
    t.start()
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    time.sleep(warmup)
    phase["measuring"] = True
    s0, c0, t0 = accepted(api), thread_cpu(proc.pid), time.monotonic()
    time.sleep(measure)
    s1, c1, t1 = accepted(api), thread_cpu(proc.pid), time.monotonic()
    rss_mb = None
    with open(f"/proc/{proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss_mb = round(int(line.split()[1]) / 1024, 1)
    phase["measuring"] = False
    proc.wait(timeout=300)
    elapsed = t1 - t0
    cpu = diff_cpu(c0, c1)
    collector = sum(v for k, v in cpu.items() if k.startswith(COLLECTOR_PREFIXES))
    total = sum(cpu.values())
    by_name = {}
    for k, v in cpu.items():
        key = re.sub(r"-\d+$", "-N", k)
        by_name[key] = round(by_name.get(key, 0.0) + v, 2)
    inside = [w for m, w in warnings if m]
    return {
        "speed": speed,
        "requests_per_s_asked": RATE_PER_SEC * speed,
        "spans_per_s": round((s1 - s0) / elapsed, 1),
        "kept_up": not inside,
        "keep_up_warnings": inside,
        "cpu_cores_used": round(total / elapsed, 3),
        "collector_cpu_cores": round(collector / elapsed, 3),
        "collector_cpu_share": round(collector / total, 3) if total else None,
        "cpu_seconds_by_thread": dict(sorted(by_name.items(), key=lambda kv: -kv[1])),
        "rss_mb_at_end": rss_mb,
        "measure_s": round(elapsed, 1),
        "exit_code": proc.returncode,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="bench-fast")
    ap.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    ap.add_argument("--speeds", default="10,20,40,80")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--measure", type=int, default=60)
    args = ap.parse_args()
    exe = os.path.join(args.target_dir, args.profile, "dyeline")
    results = []
    for s in [float(x) for x in args.speeds.split(",")]:
        r = run_speed(exe, s, args.warmup, args.measure)
        results.append(r)
        print(f"speed {s:>5}: {r['spans_per_s']:>8.1f} spans/s  kept up: {r['kept_up']!s:5}  "
              f"CPU {r['cpu_cores_used']:.2f} cores, collector {r['collector_cpu_cores']:.2f} "
              f"({100 * (r['collector_cpu_share'] or 0):.0f} %)", flush=True)
    kept = [r for r in results if r["kept_up"]]
    best = max(kept, key=lambda r: r["spans_per_s"]) if kept else None
    out = {
        "date": datetime.date.today().isoformat(),
        "profile": args.profile,
        "cores": os.cpu_count(),
        "warmup_s": args.warmup,
        "measure_s": args.measure,
        "full_speed": best and {k: best[k] for k in
                                ("speed", "spans_per_s", "cpu_cores_used", "collector_cpu_share")},
        "runs": results,
    }
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    path = os.path.join(ROOT, "bench", "results", f"demo-fleet-{out['date']}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    print(f"full speed: {out['full_speed']}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
