#!/usr/bin/env python3
"""Span arrival -> alert firing in `dyeline serve`, under a steady background load (issue 4:
target <= 10 s under 5,000 spans/s).

One run, on one server with its default analyzer settings (60 s windows aligned to Unix minutes,
an evaluation every 2 s of the open window and the last closed one):

- background: `loadgen --rate R --present` sends R requests/s of 1,000 spans (the ingest
  benchmark's spans: 40 services x 4 instances, ~12 attributes each), restamped to the present,
  over OTLP/gRPC for the whole run; the analyzer reads all of them in every evaluation;
- trials: each on its own channel `spike-<i>` (one app, blue_percent 50), so one trial's alert
  does not mask the next. Inside one window, 300 OK requests per colour are sent over OTLP/HTTP
  (a baseline with no error), then one export of 80 failing requests on green. Before that
  export no spike condition can hold (no errors at all); right after it the one-sided spike
  condition of domain.md section 6 holds (green 80/380 = 21 % against blue 0/300, z-test
  p << 0.01, >= 100 requests per side). The latency is the time from that export's send to the
  moment `GET /api/v1/alerts?state=firing` (polled every 100 ms) first lists a
  `DyelineErrorSpike` alert of the trial's channel on green.

Trials run first with the background load, then the same number without it (the floor: the
evaluation interval and the analysis of a quiet window).

Usage: python3 bench/alert_latency.py [--rate 5] [--trials 6] [--profile bench-fast]
       [--target-dir DIR]
Needs the `dyeline` binary and `loadgen` (crate dyeline-bench) built with the profile:
  cargo build --profile bench-fast --bin dyeline --bin loadgen
Writes bench/results/alert-latency-<date>.json and prints a summary.
"""

import argparse
import datetime
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
TOKEN = "bench-token-0123456789"
S = 10**9


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(method, url, body=None):
    req = urllib.request.Request(url, method=method, data=body,
                                 headers={"content-type": "application/json",
                                          "authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, r.read()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


class Trial:
    """Requests of one trial's app: one SERVER span per request, its own trace."""

    def __init__(self, i):
        self.channel = f"spike-{i}"
        self.app = f"spike-app-{i}"
        self.seq = 0
        self.i = i

    def export(self, color, n, error):
        now = time.time_ns()
        spans = []
        for _ in range(n):
            self.seq += 1
            trace = (0xA1E7 << 112) | (self.i << 64) | self.seq
            spans.append({
                "traceId": f"{trace:032x}", "spanId": f"{self.seq:016x}",
                "name": "GET /checkout", "kind": 2,
                "startTimeUnixNano": str(now - 20_000_000), "endTimeUnixNano": str(now),
                "attributes": [
                    {"key": "x-deploy-channel-type",
                     "value": {"stringValue": f"{self.channel}={color}"}},
                    {"key": "http.response.status_code",
                     "value": {"intValue": "503" if error else "200"}}],
                "status": {"code": 2 if error else 0}})
        return json.dumps({"resourceSpans": [{
            "resource": {"attributes": [
                {"key": "service.name", "value": {"stringValue": self.app}},
                {"key": "host.name", "value": {"stringValue": f"{self.app}-{color}-1"}}]},
            "scopeSpans": [{"spans": spans}]}]}).encode()


def run_trial(base, otlp_http, trial):
    # Baseline and spike must share a window: start in the first 30 s of a minute.
    while time.time() % 60 > 30:
        time.sleep(0.2)
    for _ in range(10):
        for color in ("blue", "green"):
            call("POST", otlp_http, trial.export(color, 30, False))
        time.sleep(0.4)
    spike = trial.export("green", 80, True)
    sent = time.monotonic()
    call("POST", otlp_http, spike)
    while time.monotonic() - sent < 120:
        firing = json.loads(call("GET", base + "/api/v1/alerts?state=firing")[1])["alerts"]
        if any(a["labels"].get("alertname") == "DyelineErrorSpike"
               and a["labels"].get("channel") == trial.channel
               and a["labels"].get("color") == "green" for a in firing):
            return time.monotonic() - sent
        time.sleep(0.1)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="bench-fast")
    ap.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    ap.add_argument("--rate", type=float, default=5.0, help="background requests/s of 1,000 spans")
    ap.add_argument("--trials", type=int, default=6)
    args = ap.parse_args()
    exe = os.path.join(args.target_dir, args.profile, "dyeline")
    loadgen = os.path.join(args.target_dir, args.profile, "loadgen")
    data = tempfile.mkdtemp(prefix="dyeline-alert-latency-")
    api, grpc, http = free_port(), free_port(), free_port()
    env = dict(os.environ, DYELINE_API_TOKEN=TOKEN)
    server = subprocess.Popen([exe, "serve", "--data-dir", data,
                               "--api-addr", f"127.0.0.1:{api}",
                               "--otlp-grpc-addr", f"127.0.0.1:{grpc}",
                               "--otlp-http-addr", f"127.0.0.1:{http}"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{api}"
    otlp_http = f"http://127.0.0.1:{http}/v1/traces"
    load = None
    try:
        for _ in range(200):
            try:
                call("GET", base + "/healthz")
                break
            except OSError:
                time.sleep(0.1)
        trials = [Trial(i) for i in range(2 * args.trials)]
        for t in trials:
            call("PUT", f"{base}/api/v1/channels/{t.channel}",
                 json.dumps({"apps": [t.app]}).encode())
            call("POST", f"{base}/api/v1/channels/{t.channel}/start", b"")
            call("POST", f"{base}/api/v1/channels/{t.channel}/ratio",
                 json.dumps({"blue_percent": 50}).encode())
        # Background load for the loaded trials (plus margin), started 20 s ahead so every
        # window the trials use already holds it.
        loaded_secs = 20 + 60 * args.trials
        load = subprocess.Popen([loadgen, "--endpoint", f"http://127.0.0.1:{grpc}",
                                 "--rate", str(args.rate), "--present", "--concurrency", "2",
                                 "--requests", str(int(args.rate * (loaded_secs + 60)))],
                                stdout=subprocess.PIPE, text=True)
        time.sleep(20)
        cpu0, t0 = cpu_seconds(server.pid), time.monotonic()
        loaded = [run_trial(base, otlp_http, t) for t in trials[:args.trials]]
        cpu1, t1 = cpu_seconds(server.pid), time.monotonic()
        load.kill()
        load_out = load.communicate()[0]
        time.sleep(5)
        quiet = [run_trial(base, otlp_http, t) for t in trials[args.trials:]]
        bg_spans = json.loads(call("POST", base + "/api/v1/sql", json.dumps(
            {"sql": "SELECT count(*) FROM spans WHERE service_name LIKE 'svc%'"}).encode())[1])["rows"][0][0]

        def stats(xs):
            ok = [x for x in xs if x is not None]
            return {"trials": len(xs), "fired": len(ok),
                    "median_s": statistics.median(ok) if ok else None,
                    "max_s": max(ok) if ok else None, "runs_s": xs}

        out = {"date": datetime.date.today().isoformat(), "profile": args.profile,
               "background_spans_per_second_asked": args.rate * 1000,
               "background_spans_received": bg_spans,
               "server_cpu_share_during_loaded_trials": (cpu1 - cpu0) / (t1 - t0),
               "target_s": 10,
               "with_background_load": stats(loaded),
               "without_background_load": stats(quiet),
               "loadgen": load_out.strip()}
        path = os.path.join(ROOT, "bench", "results", f"alert-latency-{out['date']}.json")
        with open(path, "w") as f:
            json.dump(out, f, indent=2)
        w, q = out["with_background_load"], out["without_background_load"]
        fmt = lambda v: f"{v:.2f}" if v is not None else "-"
        print(f"span arrival -> DyelineErrorSpike firing, {args.trials} trials each, profile {args.profile}")
        print(f"  under {args.rate * 1000:.0f} spans/s: median {fmt(w['median_s'])} s, max {fmt(w['max_s'])} s, "
              f"fired {w['fired']}/{w['trials']}; server CPU {out['server_cpu_share_during_loaded_trials']:.2f} cores")
        print(f"  without load:   median {fmt(q['median_s'])} s, max {fmt(q['max_s'])} s, fired {q['fired']}/{q['trials']}")
        print(f"written to {path}")
    finally:
        if load and load.poll() is None:
            load.kill()
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
