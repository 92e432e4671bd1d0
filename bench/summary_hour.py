#!/usr/bin/env python3
"""Channel summary over one hour of live data at 3,000 spans/s (issue 4: target <= 300 ms).

`dyeline serve` (default settings, live evaluation on) receives `loadgen --rate 3 --present`
(3 requests/s of 1,000 spans: 40 services x 4 instances, ~12 attributes per span, times moved
to the present) for --minutes whole minutes plus the minute it starts in. Channel `trade` holds
half the services (svc00..svc19) and is releasing at blue_percent 50 the whole time. Then:

- `GET /api/v1/channels/trade/summary?from=F&to=T&step=60s` over the --minutes whole minutes
  (F = the first whole minute after the server started), --n times: answered from the
  per-minute rollups kept as spans arrive (the answer says `"percentiles": "estimated"`);
- the same with `exact=true`, --exact-runs times: a scan of every span of the hour (the path
  every range took before the rollups, and still takes for ranges older than the server);
- the two answers' requests, errors, unknown requests and blue shares are compared step by
  step (they must be equal), and their p50/p99 (the rollup's within 1 % of a sample at the
  rank);
- trace lookup by id over the same store (`GET /api/v1/traces/{id}`): --lookups ids of stored
  traces (one from a random second of the hour each, picked by SQL beforehand) and as many
  random ids that are not stored, in random order; p50/p95/max per group (issue 4's other
  target: <= 20 ms).

Wall time is about --minutes + 2 minutes (an hour by default: the rollups only count spans
that arrive while the server runs, so the hour has to be lived).

Usage: python3 bench/summary_hour.py [--minutes 60] [--rate 3] [--n 30] [--exact-runs 3]
       [--profile bench-fast] [--target-dir DIR] [--label NAME]
Needs `cargo build --profile bench-fast --bin dyeline --bin loadgen`.
Writes bench/results/summary-hour[-<label>]-<date>.json and prints a summary.
"""

import argparse
import datetime
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "bench-token-0123456789"
M = 60 * 10**9


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(method, url, body=None, timeout=600):
    req = urllib.request.Request(url, method=method, data=body,
                                 headers={"content-type": "application/json",
                                          "authorization": f"Bearer {TOKEN}"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        out = r.read()
    return (time.perf_counter() - t) * 1000.0, out


def p95(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="bench-fast")
    ap.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    ap.add_argument("--minutes", type=int, default=60)
    ap.add_argument("--rate", type=float, default=3.0, help="requests/s of 1,000 spans")
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--exact-runs", type=int, default=3)
    ap.add_argument("--lookups", type=int, default=40)
    ap.add_argument("--label", default="", help="added to the result file's name")
    args = ap.parse_args()
    exe = os.path.join(args.target_dir, args.profile, "dyeline")
    loadgen = os.path.join(args.target_dir, args.profile, "loadgen")
    data = tempfile.mkdtemp(prefix="dyeline-summary-hour-")
    api, grpc, http = free_port(), free_port(), free_port()
    server = subprocess.Popen([exe, "serve", "--data-dir", data,
                               "--api-addr", f"127.0.0.1:{api}",
                               "--otlp-grpc-addr", f"127.0.0.1:{grpc}",
                               "--otlp-http-addr", f"127.0.0.1:{http}"],
                              env=dict(os.environ, DYELINE_API_TOKEN=TOKEN),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started_ns = time.time_ns()
    base = f"http://127.0.0.1:{api}"
    load = None
    try:
        for _ in range(200):
            try:
                call("GET", base + "/healthz")
                break
            except OSError:
                time.sleep(0.1)
        apps = [f"svc{i:02}" for i in range(20)]
        call("PUT", base + "/api/v1/channels/trade", json.dumps({"apps": apps}).encode())
        call("POST", base + "/api/v1/channels/trade/start", b"")
        call("POST", base + "/api/v1/channels/trade/ratio", json.dumps({"blue_percent": 50}).encode())
        frm = (started_ns // M + 1) * M
        to = frm + args.minutes * M
        secs = (to - time.time_ns()) / 1e9 + 5
        load = subprocess.Popen([loadgen, "--endpoint", f"http://127.0.0.1:{grpc}",
                                 "--rate", str(args.rate), "--present", "--concurrency", "2",
                                 "--requests", str(int(args.rate * (secs + 10)))],
                                stdout=subprocess.PIPE, text=True)
        print(f"loading {args.rate * 1000:.0f} spans/s until {datetime.datetime.fromtimestamp(to / 1e9)} "
              f"(+10 s for the last traces to be judged)", flush=True)
        while time.time_ns() < to + 10 * 10**9:
            time.sleep(5)
        load.kill()
        load.communicate()
        # Let the live evaluation judge the last traces of the hour (quiet 5 s, every 2 s).
        time.sleep(10)
        q = f"/api/v1/channels/trade/summary?from={frm}&to={to}&step=60s"
        spans = json.loads(call("POST", base + "/api/v1/sql", json.dumps(
            {"sql": f"SELECT count(*) FROM spans WHERE start_time_unix_nano >= {frm} "
                    f"AND start_time_unix_nano < {to}"}).encode())[1])["rows"][0][0]
        rng = random.Random(7)
        present = []
        for _ in range(args.lookups):
            t = frm + rng.randrange(args.minutes * 60) * 10**9
            rows = json.loads(call("POST", base + "/api/v1/sql", json.dumps(
                {"sql": f"SELECT trace_id FROM spans WHERE start_time_unix_nano >= {t} "
                        f"AND start_time_unix_nano < {t + 10**9} LIMIT 1"}).encode())[1])["rows"]
            if rows:
                present.append(rows[0][0])
        absent = [f"{rng.getrandbits(128):032x}" for _ in range(args.lookups)]
        order = [(True, t) for t in present] + [(False, t) for t in absent]
        rng.shuffle(order)
        call("GET", base + f"/api/v1/traces/{present[0]}")  # warm-up
        lookup = {True: [], False: []}
        for stored, tid in order:
            t0 = time.perf_counter()
            try:
                body = call("GET", base + f"/api/v1/traces/{tid}")[1]
                ok = stored and len(json.loads(body).get("spans", [])) > 0
            except urllib.error.HTTPError as e:
                ok = not stored and e.code == 404
            lookup[stored].append((time.perf_counter() - t0) * 1000.0)
            assert ok, (stored, tid)
        rolled_ms, rolled = [], None
        for _ in range(args.n):
            ms, body = call("GET", base + q)
            rolled_ms.append(ms)
            rolled = json.loads(body)
        exact_ms, exact = [], None
        for _ in range(args.exact_runs):
            ms, body = call("GET", base + q + "&exact=true")
            exact_ms.append(ms)
            exact = json.loads(body)
        assert rolled["percentiles"] == "estimated", rolled.get("percentiles")
        assert exact["percentiles"] == "exact"
        mismatches, worst_p = [], 0.0
        for r, x in zip(rolled["steps"], exact["steps"]):
            for c in ("blue", "green"):
                for k in ("requests", "errors"):
                    if r[c][k] != x[c][k]:
                        mismatches.append((r["start_unix_nano"], c, k, r[c][k], x[c][k]))
                for k in ("p50_ms", "p99_ms"):
                    if r[c][k] and x[c][k]:
                        worst_p = max(worst_p, abs(r[c][k] - x[c][k]) / x[c][k])
            for k in ("unknown_requests", "blue_share", "blue_percent"):
                if r[k] != x[k]:
                    mismatches.append((r["start_unix_nano"], k, r[k], x[k]))
        requests = sum(s[c]["requests"] for s in exact["steps"] for c in ("blue", "green"))
        hops = (sum(s["hops"] for s in rolled["steps"]), sum(s["hops"] for s in exact["steps"]))
        out = {"date": datetime.date.today().isoformat(), "profile": args.profile,
               "minutes": args.minutes, "spans_in_range": spans,
               "spans_per_second": spans / (args.minutes * 60),
               "channel_requests_in_range": requests, "target_ms": 300,
               "rollup_ms": {"p50": statistics.median(rolled_ms), "p95": p95(rolled_ms),
                             "max": max(rolled_ms), "runs": len(rolled_ms)},
               "exact_scan_ms": {"median": statistics.median(exact_ms), "runs": exact_ms},
               "count_mismatches": mismatches,
               "worst_relative_percentile_gap": worst_p,
               "hops_rollup_vs_scan": hops,
               "trace_lookup_ms": {
                   group: {"n": len(xs), "p50": statistics.median(xs), "p95": p95(xs), "max": max(xs)}
                   for group, xs in (("stored", lookup[True]), ("absent", lookup[False]))},
               "trace_lookup_target_ms": 20}
        label = f"-{args.label}" if args.label else ""
        path = os.path.join(ROOT, "bench", "results", f"summary-hour{label}-{out['date']}.json")
        with open(path, "w") as f:
            json.dump(out, f, indent=2)
        print(f"{spans} spans in {args.minutes} min ({out['spans_per_second']:.0f}/s), "
              f"{requests} channel requests")
        print(f"summary from rollups: p50 {out['rollup_ms']['p50']:.1f} ms, p95 {out['rollup_ms']['p95']:.1f} ms "
              f"({args.n} runs); exact scan: median {out['exact_scan_ms']['median']:.0f} ms "
              f"({args.exact_runs} runs)")
        print(f"count mismatches: {len(mismatches)}; worst p50/p99 gap {worst_p * 100:.2f} %; "
              f"hops rollup/scan {hops[0]}/{hops[1]}")
        tl = out["trace_lookup_ms"]
        print(f"trace lookup: stored p50 {tl['stored']['p50']:.1f} / p95 {tl['stored']['p95']:.1f} ms, "
              f"absent p50 {tl['absent']['p50']:.1f} / p95 {tl['absent']['p95']:.1f} ms")
        print(f"written to {path}")
    finally:
        if load and load.poll() is None:
            load.kill()
        server.terminate()
        server.wait(timeout=120)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
