#!/usr/bin/env python3
"""Replays the hardening probes of issue 23 against a running `dyeline serve` and prints one
line per probe: held or failed, with what was seen.

Against a server you run:
    python3 bench/hardening_probe.py --api 127.0.0.1:8080 --otlp-http 127.0.0.1:4318 \
        --otlp-grpc 127.0.0.1:4317 [--token T] [--pid PID]
(--pid lets the probes read the server's resident memory from /proc; --token is sent as the
bearer token where a probe needs to read.)

Or let the script start one (a temporary data directory, ports chosen by the OS) and stop it:
    python3 bench/hardening_probe.py --start [--bin target/debug/dyeline]

--only SUBSTRING runs the probes whose name contains it. Exit status 1 when any probe failed.
Every probe is bounded in count and time; all of them run against loopback only.
"""

import argparse
import importlib
import os
import pkgutil
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from probes.common import Failed, Target  # noqa: E402


def all_probes():
    import probes

    found = []
    for m in sorted(pkgutil.iter_modules(probes.__path__), key=lambda m: m.name):
        if m.name == "common":
            continue
        mod = importlib.import_module(f"probes.{m.name}")
        for name, fn in getattr(mod, "PROBES", []):
            found.append((f"{m.name}: {name}", fn))
    return found


def start_server(binary):
    data = tempfile.mkdtemp(prefix="dyeline-probe-")
    env = dict(os.environ, DYELINE_LOG="warn")
    proc = subprocess.Popen(
        [binary, "serve", "--data-dir", data, "--otlp-grpc-addr", "127.0.0.1:0",
         "--otlp-http-addr", "127.0.0.1:0", "--api-addr", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    line = proc.stdout.readline()
    addrs = dict(w.split("=", 1) for w in line.split() if "=" in w)
    token = None
    path = os.path.join(data, "api-token")
    for _ in range(100):
        if os.path.exists(path):
            token = open(path).read().strip()
            break
        time.sleep(0.05)
    target = Target(addrs["api"], addrs["otlp_http"], addrs["otlp_grpc"], token, proc.pid)
    for _ in range(100):
        try:
            target.healthz_seconds()
            break
        except Failed:
            time.sleep(0.1)
    return proc, data, target


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--api")
    p.add_argument("--otlp-http")
    p.add_argument("--otlp-grpc")
    p.add_argument("--token")
    p.add_argument("--pid", type=int)
    p.add_argument("--start", action="store_true", help="start a dyeline serve of its own")
    p.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "debug", "dyeline"))
    p.add_argument("--only", default="")
    a = p.parse_args()
    proc = data = None
    if a.start:
        proc, data, target = start_server(a.bin)
    else:
        if not (a.api and a.otlp_http and a.otlp_grpc):
            p.error("give --api, --otlp-http and --otlp-grpc, or --start")
        target = Target(a.api, a.otlp_http, a.otlp_grpc, a.token, a.pid)
    failed = 0
    try:
        for name, fn in all_probes():
            if a.only and a.only not in name:
                continue
            t = time.monotonic()
            try:
                detail = fn(target)
                # Whatever the probe did, the server must still answer within a second.
                up = target.still_up()
                print(f"held    {name} ({time.monotonic() - t:.1f} s): {detail}; after: {up}", flush=True)
            except Exception as e:  # noqa: BLE001 - any failure of a probe is reported
                failed += 1
                print(f"FAILED  {name} ({time.monotonic() - t:.1f} s): {type(e).__name__}: {e}", flush=True)
    finally:
        if proc:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            shutil.rmtree(data, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
