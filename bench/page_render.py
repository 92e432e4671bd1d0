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

With --baseline EXE, a second binary (e.g. one built from an older commit) serves its own
import of the same data at the same time, and every request to the measured server is paired
with the same request to the baseline, the order alternating, so a drift of the machine during
the run weighs on both alike; the results carry each page's medians for both and their ratios.
(Two runs one after the other are not comparable to within a few ms: on this machine the same
binary's warm trace search drifted from 2.8 to 4.5 ms over three consecutive runs.)

Usage: python3 bench/page_render.py [--profile bench-fast] [--n 30] [--baseline EXE]
       [--capture ../shared/fixtures/analysis/release-walk | --data-dir DIR [--config-dir C]]
       [--label NAME]
A capture's or --config-dir's dyeline.toml is passed to import and serve (`--config`); when
the server holds lane groups, the lanes pages (`/lanes`, `/lanes/{group}` for each group,
`/lanes/_ungrouped`) are timed too.
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


class Server:
    """`dyeline serve` of one binary on its own data dir (a fresh import of the capture, or a
    copy of --data-dir), on free ports."""

    def __init__(self, exe, args, log_path=None):
        self.exe = exe
        self.data = tempfile.mkdtemp(prefix="dyeline-render-")
        # A capture's dyeline.toml (lane rules and carriers) applies to import and serve alike.
        config = os.path.join(args.config_dir or args.capture, "dyeline.toml")
        config = ["--config", config] if os.path.exists(config) else []
        if args.data_dir:
            shutil.copytree(args.data_dir, self.data, dirs_exist_ok=True)
        else:
            files = sorted(glob.glob(os.path.join(args.capture, "*.jsonl*")))
            subprocess.run([exe, "import", *config, "--data-dir", self.data, "--timeline",
                            os.path.join(args.capture, "timeline.json")] + files,
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        api, grpc, self.http = free_port(), free_port(), free_port()
        self.proc = subprocess.Popen([exe, "serve", *config, "--data-dir", self.data,
                                      "--api-addr", f"127.0.0.1:{api}",
                                      "--otlp-grpc-addr", f"127.0.0.1:{grpc}",
                                      "--otlp-http-addr", f"127.0.0.1:{self.http}"],
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(log_path, "w") if log_path else subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{api}"
        self.seq = 0
        for _ in range(200):
            try:
                get(self.base + "/healthz")
                return
            except OSError:
                time.sleep(0.1)

    def invalidate(self):
        """Sends one new span over OTLP/HTTP (the data version moves)."""
        self.seq += 1
        req = urllib.request.Request(f"http://127.0.0.1:{self.http}/v1/traces", data=span_json(self.seq),
                                     headers={"content-type": "application/json"})
        urllib.request.urlopen(req).read()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)
        shutil.rmtree(self.data, ignore_errors=True)


def stats(first, warm, cold, fresh):
    return {
        "first_ms": first,
        "warm_p50_ms": statistics.median(warm), "warm_p95_ms": p95(warm),
        "changed_p50_ms": statistics.median(cold), "changed_p95_ms": p95(cold),
        "fresh_p50_ms": statistics.median(fresh) if fresh else None,
        "fresh_p95_ms": p95(fresh) if fresh else None,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="bench-fast")
    ap.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    ap.add_argument("--baseline", metavar="EXE", help="also time this dyeline binary (e.g. one "
                    "built from an older commit) on its own import of the same data, its requests "
                    "interleaved with the measured binary's, and report the ratios")
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--capture", default=os.path.join(ROOT, "..", "shared", "fixtures", "analysis", "release-walk"))
    ap.add_argument("--data-dir", help="serve a copy of this data dir instead of importing --capture")
    ap.add_argument("--config-dir", help="serve with DIR/dyeline.toml (default: the capture's, if "
                    "it has one; with --data-dir, e.g. the demo's config dir)")
    ap.add_argument("--label", default="", help="added to the results file name")
    ap.add_argument("--server-log", help="write the server's stderr here (e.g. with "
                    "DYELINE_LOG=dyeline_queries=debug for the analyzer's phase times)")
    args = ap.parse_args()
    exe = os.path.join(args.target_dir, args.profile, "dyeline")
    source = ("data dir " + os.path.basename(os.path.normpath(args.data_dir)) if args.data_dir
              else os.path.basename(os.path.normpath(args.capture)))
    servers = []
    try:
        servers.append(Server(exe, args, args.server_log))
        if args.baseline:
            servers.append(Server(os.path.abspath(args.baseline), args))
        base = servers[0].base
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
        # The lanes pages: the index, each lane group's page and the page of apps in no group.
        groups = [g["id"] for g in json.loads(get(base + "/api/v1/lane-groups")[2]).get("lane_groups", [])]
        lanes = (["/lanes"] + [f"/lanes/{g}" for g in groups] + ["/lanes/_ungrouped"]) if groups else []
        pages = [p + rng for p in ["/", "/channels/trade", "/traces"] + lanes] + (
            [f"/traces/{trace}"] if trace else [])
        fresh_n = [0]

        def each(i, fn):
            """fn(server index) for every server, in turns (the first goes first on even i), so
            a slow drift of the machine weighs on both alike; one time per server."""
            order = list(range(len(servers)))
            if i % 2:
                order.reverse()
            out = [0.0] * len(servers)
            for k in order:
                out[k] = fn(k)
            return out

        def invalidated(k, page):
            servers[k].invalidate()
            return get(servers[k].base + page)[0]

        results = {}
        for pi, page in enumerate(pages):
            # first render (the first page also reads every file)
            first = each(pi, lambda k: get(servers[k].base + page)[0])
            warm = [each(i, lambda k: get(servers[k].base + page)[0]) for i in range(args.n)]
            cold = [each(i, lambda k: invalidated(k, page)) for i in range(args.n)]
            fresh = []
            if "?" in page:
                for i in range(args.n):
                    fresh_n[0] += 1
                    path = page.split("?")[0] + f"?from={frm - fresh_n[0] * 10**9}&to={to}"
                    fresh.append(each(i, lambda k: get(servers[k].base + path)[0]))
            col = lambda xs, k: [x[k] for x in xs]
            per = [stats(first[k], col(warm, k), col(cold, k), col(fresh, k)) for k in range(len(servers))]
            if args.baseline:
                ratio = {key.replace("_ms", "_ratio"): per[0][key] / per[1][key]
                         for key in per[0] if per[0][key] is not None and per[1][key]}
                results[page] = {"measured": per[0], "baseline": per[1], "measured_over_baseline": ratio}
            else:
                results[page] = per[0]
        out = {"date": datetime.date.today().isoformat(), "profile": args.profile,
               "capture": source, "spans": spans,
               "hours_of_data": round((newest - oldest) / 3600e9, 3),
               "requests_per_case": args.n, "target_p95_ms": 200, "pages": results}
        if args.baseline:
            out["binaries"] = {"measured": exe, "baseline": os.path.abspath(args.baseline)}
            out["method"] = ("both servers up at once, each on its own import of the data; every "
                             "request to one is paired with the same request to the other, the "
                             "order alternating")
        label = f"-{args.label}" if args.label else ""
        path = os.path.join(ROOT, "bench", "results", f"page-render{label}-{out['date']}.json")
        with open(path, "w") as f:
            json.dump(out, f, indent=2)
        print(f"{spans} spans ({out['capture']}), {args.n} requests per case, profile {args.profile}")
        fmt = lambda v: f"{v:.1f}" if v is not None else "-"
        cases = ["warm_p50", "warm_p95", "changed_p50", "changed_p95", "fresh_p50", "fresh_p95"]
        print(f"{'page':<18} {'':>9}" + "".join(f" {c.replace('_', ' '):>12}" for c in cases))
        for page, r in results.items():
            rows = ([("", r)] if not args.baseline else
                    [("measured", r["measured"]), ("baseline", r["baseline"])])
            for who, v in rows:
                print(f"{page.split('?')[0][:18]:<18} {who:>9}"
                      + "".join(f" {fmt(v[c + '_ms']):>12}" for c in cases))
            if args.baseline:
                q = r["measured_over_baseline"]
                print(f"{'':<18} {'ratio':>9}" + "".join(
                    f" {q[c + '_ratio']:>12.2f}" if c + "_ratio" in q else f" {'-':>12}" for c in cases))
        print(f"written to {path}")
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main()
