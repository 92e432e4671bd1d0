#!/usr/bin/env python3
"""Dashboard page render benchmark of issue 5 (target: p95 <= 200 ms).

Imports a capture with its timeline into a fresh data dir, starts `dyeline serve` on it,
and times whole-page GETs (server render + transfer on loopback) of the overview, the
channel page, a trace page and trace search, each over the hour that ends at the newest
span of the capture (the pages' default for a capture), given explicitly. Per page, in the
same run:

- first: the page's first render (for the first page after the server starts this includes
  reading every Parquet file of the hour into the analyzer's per-file cache);
- warm: the data did not change since the previous request (the adapter's cached load of
  the range is reused; what a viewer sees between data changes);
- changed: one new span is sent over OTLP/HTTP before each request, so the data version
  moves: the page is answered from the range's previous snapshot while a new analysis runs
  in the background (what viewers see while data arrives);
- fresh: each request asks for a range never seen before (its start one second earlier than
  the last), so the page waits for an analysis of the range: the files come from the
  per-file cache, the memory segments and the detections are computed (what the first viewer
  of a range pays; trace pages read their trace directly and have no such case).

Usage: python3 bench/page_render.py [--profile bench-fast] [--n 30]
       [--capture ../shared/fixtures/analysis/release-walk | --data-dir DIR] [--label NAME]
       [--server-log FILE]
--data-dir serves a copy of an existing data dir (e.g. one hour of `dyeline demo --speed 1
--duration 60m --data-dir DIR`) instead of importing a capture.
Writes bench/results/page-render[-<label>]-<date>.json and prints a table.
"""

import argparse
import datetime
import glob
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url):
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as r:
        body = r.read()
        status = r.status
    return (time.perf_counter() - t) * 1000.0, status, body


def span_json(i):
    now = time.time_ns()
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "bench-probe"}},
            {"key": "service.instance.id", "value": {"stringValue": "bench-probe-1"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": "%032x" % (0xBE4C0000000000000000000000000000 + i),
            "spanId": "%016x" % (0xBE4C000000000000 + i),
            "name": "probe", "kind": 2,
            "startTimeUnixNano": str(now), "endTimeUnixNano": str(now + 1000)}]}]}]}).encode()


def p95(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="bench-fast")
    ap.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--capture", default=os.path.join(ROOT, "..", "shared", "fixtures", "analysis", "release-walk"))
    ap.add_argument("--data-dir", help="serve a copy of this data dir instead of importing --capture")
    ap.add_argument("--label", default="", help="added to the results file name")
    ap.add_argument("--server-log", help="write the server's stderr here (e.g. with "
                    "DYELINE_LOG=dyeline_queries=debug for the analyzer's phase times)")
    args = ap.parse_args()
    exe = os.path.join(args.target_dir, args.profile, "dyeline")
    data = tempfile.mkdtemp(prefix="dyeline-render-")
    if args.data_dir:
        shutil.copytree(args.data_dir, data, dirs_exist_ok=True)
        source = "data dir " + os.path.basename(os.path.normpath(args.data_dir))
    else:
        files = sorted(glob.glob(os.path.join(args.capture, "*.jsonl*")))
        subprocess.run([exe, "import", "--data-dir", data, "--timeline",
                        os.path.join(args.capture, "timeline.json")] + files,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        source = os.path.basename(os.path.normpath(args.capture))
    api, grpc, http = free_port(), free_port(), free_port()
    server = subprocess.Popen([exe, "serve", "--data-dir", data,
                               "--api-addr", f"127.0.0.1:{api}",
                               "--otlp-grpc-addr", f"127.0.0.1:{grpc}",
                               "--otlp-http-addr", f"127.0.0.1:{http}"],
                              stdout=subprocess.DEVNULL,
                              stderr=open(args.server_log, "w") if args.server_log else subprocess.DEVNULL)
    base = f"http://127.0.0.1:{api}"
    try:
        for _ in range(200):
            try:
                get(base + "/healthz")
                break
            except OSError:
                time.sleep(0.1)
        row = json.loads(urllib.request.urlopen(urllib.request.Request(
            base + "/api/v1/sql",
            data=json.dumps({"sql": "SELECT count(*) AS n, max(start_time_unix_nano) AS newest, min(start_time_unix_nano) AS oldest FROM spans"}).encode(),
            headers={"content-type": "application/json"})).read())["rows"][0]
        spans, newest, oldest = row[0], int(row[1]), int(row[2])
        hits = json.loads(get(base + f"/api/v1/traces?hop=true&limit=1&from={newest - 3600 * 10**9}&to={newest + 1}")[2])
        trace = (hits.get("traces") or [{}])[0].get("trace_id")
        # An explicit range (the hour that ends at the capture's newest span, the pages'
        # default for a capture), so the probe spans sent "now" stay outside it.
        frm, to = newest + 1 - 3600 * 10**9, newest + 1
        rng = f"?from={frm}&to={to}"
        pages = [p + rng for p in ["/", "/channels/trade", "/traces"]] + (
            [f"/traces/{trace}"] if trace else [])
        fresh_n = [0]
        seq = [0]

        def invalidate():
            seq[0] += 1
            req = urllib.request.Request(f"http://127.0.0.1:{http}/v1/traces", data=span_json(seq[0]),
                                         headers={"content-type": "application/json"})
            urllib.request.urlopen(req).read()

        results = {}
        for page in pages:
            first = get(base + page)[0]  # first render (the first page also reads every file)
            warm = [get(base + page)[0] for _ in range(args.n)]
            cold = []
            for _ in range(args.n):
                invalidate()
                cold.append(get(base + page)[0])
            fresh = []
            if "?" in page:
                for _ in range(args.n):
                    fresh_n[0] += 1
                    path = page.split("?")[0] + f"?from={frm - fresh_n[0] * 10**9}&to={to}"
                    fresh.append(get(base + path)[0])
            results[page] = {
                "first_ms": first,
                "warm_p50_ms": statistics.median(warm), "warm_p95_ms": p95(warm),
                "changed_p50_ms": statistics.median(cold), "changed_p95_ms": p95(cold),
                "fresh_p50_ms": statistics.median(fresh) if fresh else None,
                "fresh_p95_ms": p95(fresh) if fresh else None,
            }
        out = {"date": datetime.date.today().isoformat(), "profile": args.profile,
               "capture": source, "spans": spans,
               "hours_of_data": round((newest - oldest) / 3600e9, 3),
               "requests_per_case": args.n, "target_p95_ms": 200, "pages": results}
        label = f"-{args.label}" if args.label else ""
        path = os.path.join(ROOT, "bench", "results", f"page-render{label}-{out['date']}.json")
        with open(path, "w") as f:
            json.dump(out, f, indent=2)
        print(f"{spans} spans ({out['capture']}), {args.n} requests per case, profile {args.profile}")
        print(f"{'page':<18} {'warm p50':>9} {'warm p95':>9} {'changed p50':>12} "
              f"{'changed p95':>12} {'fresh p50':>10} {'fresh p95':>10}")
        fmt = lambda v: f"{v:.1f}" if v is not None else "-"
        for page, r in results.items():
            print(f"{page.split('?')[0][:18]:<18} {fmt(r['warm_p50_ms']):>9} {fmt(r['warm_p95_ms']):>9} "
                  f"{fmt(r['changed_p50_ms']):>12} {fmt(r['changed_p95_ms']):>12} "
                  f"{fmt(r['fresh_p50_ms']):>10} {fmt(r['fresh_p95_ms']):>10}")
        print(f"written to {path}")
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
