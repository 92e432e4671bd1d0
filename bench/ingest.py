#!/usr/bin/env python3
"""Ingest benchmarks of issue 2, all in one run on this machine, printed as a report.

1. End-to-end OTLP/gRPC ingest throughput of `dyeline serve` (WAL + Parquet on, fsync always)
   and of `dyeline serve` with the store's disk path off (`store.in_memory_only`: no WAL, no
   files, but rows still converted, filtered for duplicates, held and sealed in memory), and
   with nothing stored (`store.discard`: the receivers decode, validate and convert, then
   drop the rows: the work of Rotel's blackhole plus the conversion to Arrow), beside
   Rotel (`rotel-agent start --exporter blackhole`), under the same load generator
   (`loadgen`: 1,000-span requests, ~12 attributes per span, 40 services x 4 instances).
   Runs alternate between the systems; medians of --reps runs are reported.
2. CPU seconds per million spans of the dyeline server process (from /proc, from the start
   of each run above until the server is idle again, so the Parquet flush that the last
   requests trigger is counted) against raw prost decode of the same requests
   (`decode_floor`, one core), split by thread (receivers, WAL writer, Parquet flusher), and
   Rotel's process CPU per million spans on the same load. `decode_floor` also times the
   receivers' stages in process: prost decode, + conversion to Arrow, + WAL record encoding;
   and the flusher thread's: sealing rows as in-memory Parquet, and the flush copying them.
3. Memory per million spans held in memory: server RSS growth while 1M spans sit in memory
   (flush deferred), also for 500k spans sent in 20-span requests, and the Arrow bytes of the
   converted rows. Each is read 1 s after the last request and again after the allocator's
   purge delay (memory freed but not yet returned to the kernel counts in the first).
4. Bytes per span on disk for the release-walk fixture, with a per-column breakdown.

Usage: python3 bench/ingest.py [--requests 500] [--warmup 0] [--reps 3] [--profile bench-fast]
A run of 500 requests is one flush of a new server (its memory all first touched); a run of
2,000 requests (--requests 2000) is four, closer to a collector's steady state. --warmup N
sends N requests (other span ids) to each server first and waits until it is idle again;
throughput and CPU are then measured on the --requests that follow, as a collector that has
been running a while spends them: its allocator's pages already touched, its Parquet
flushes already at their size (a new process pays about 0.55 s per GB it first touches on
this VM, and the flusher's working set is several hundred MB).
Needs: `pip install --pre rotel` (done here if missing).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from proc_cpu import diff_cpu, thread_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


THREAD_GROUPS = {"tokio-rt-worker": "receivers", "dyeline-writer": "wal_writer", "dyeline-flusher": "parquet_flusher"}


def by_group(cpu):
    """Per-thread-name CPU seconds summed by group: the receivers (tokio workers: decode,
    convert, WAL record encoding), the store's WAL writer thread, its flusher thread (seals
    and Parquet files), the rest."""
    out = {}
    for name, seconds in cpu.items():
        group = THREAD_GROUPS.get(name, "other")
        out[group] = out.get(group, 0.0) + seconds
    return out


def settled_cpu_seconds(pid, quiet=0.05, limit=60.0):
    """CPU seconds of `pid` once its work after the load is done: the store flushes the rows
    to Parquet on its own thread after the last request, and that flush is part of the
    ingest's cost. Waits until the process used under `quiet` s of CPU in half a second
    (the live evaluation's tick stays below that), at most `limit` s."""
    c = cpu_seconds(pid)
    deadline = time.time() + limit
    while time.time() < deadline:
        time.sleep(0.5)
        n = cpu_seconds(pid)
        if n - c < quiet:
            return n
        c = n
    return c


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Dyeline:
    def __init__(self, binary, env):
        self.dir = tempfile.mkdtemp(prefix="dyeline-bench-")
        # loadgen's spans start on 2025-11-30 and the receivers refuse spans older than the
        # store's retention (domain §1): keep ten years, so every span is stored as before.
        e = dict(os.environ, DYELINE_LOG="warn", DYELINE_STORE__RETENTION="3650days", **env)
        self.p = subprocess.Popen(
            [binary, "serve", "--data-dir", os.path.join(self.dir, "data"),
             "--otlp-grpc-addr", "127.0.0.1:0", "--otlp-http-addr", "127.0.0.1:0", "--api-addr", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=e, text=True)
        line = self.p.stdout.readline()
        addrs = dict(w.split("=", 1) for w in line.split()[2:])
        self.endpoint = "http://" + addrs["otlp_grpc"]
        self.api = addrs["api"]
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://{self.api}/healthz", timeout=1)
                break
            except Exception:
                time.sleep(0.05)

    def sql(self, q):
        req = urllib.request.Request(f"http://{self.api}/api/v1/sql", data=json.dumps({"sql": q}).encode(),
                                     headers={"content-type": "application/json"})
        return json.load(urllib.request.urlopen(req))["rows"]

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


class Rotel:
    def __init__(self):
        import rotel  # noqa: F401
        agent = os.path.join(os.path.dirname(sys.modules["rotel"].__file__), "rotel-agent")
        grpc, http = free_port(), free_port()
        self.p = subprocess.Popen([agent, "start", "--exporter", "blackhole",
                                   "--otlp-grpc-endpoint", f"127.0.0.1:{grpc}",
                                   "--otlp-http-endpoint", f"127.0.0.1:{http}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.endpoint = f"http://127.0.0.1:{grpc}"
        import socket
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", grpc), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=60)


# Warm-up loads use seeds from here on, so their span ids differ from the measured loads'
# (a span sent again would be dropped as a duplicate, and cost less).
WARMUP_SEED = 1_000_000


def load(bins, endpoint, requests, seed, spans=1000):
    out = sh(os.path.join(bins, "loadgen"), "--endpoint", endpoint, "--requests", str(requests),
             "--seed", str(seed), "--spans", str(spans))
    return json.loads(out)


# The server keeps freed memory this long before its allocator returns it to the kernel
# (mimalloc's default, 1 s, unless MIMALLOC_PURGE_DELAY, in ms, is set; -1 never returns it,
# so the second reading then waits 10 s).
_purge_ms = int(os.environ.get("MIMALLOC_PURGE_DELAY", "1000"))
PURGE_DELAY_S = _purge_ms / 1000 if _purge_ms >= 0 else 10


def memory_mb_per_million(bins, binary, requests, spans):
    """RSS growth of a server holding `requests` x `spans` spans in memory (flush deferred),
    in MB per million spans: 1 s after the last request (counting memory the receivers freed
    but the allocator still keeps), and again once the allocator's purge delay has passed
    (what stays for the spans held)."""
    d = Dyeline(binary, {"DYELINE_STORE__FLUSH_INTERVAL": "1h", "DYELINE_STORE__FLUSH_MAX_ROWS": "100000000"})
    time.sleep(1)
    rss0 = rss_bytes(d.p.pid)
    res = load(bins, d.endpoint, requests, 999, spans)
    time.sleep(1)
    rss1 = rss_bytes(d.p.pid)
    time.sleep(PURGE_DELAY_S + 1)
    rss2 = rss_bytes(d.p.pid)
    d.stop()
    per_million = lambda rss: (rss - rss0) / res["spans"] * 1e6 / 1e6  # noqa: E731
    return per_million(rss1), per_million(rss2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--warmup", type=int, default=0,
                    help="requests sent to each server before the measured ones (not measured)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--profile", default="bench-fast")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--profile", a.profile, "-p", "dyeline", "-p", "dyeline-bench", "--bins"],
                   cwd=ROOT, check=True)
    bins = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), a.profile)
    binary = os.path.join(bins, "dyeline")
    try:
        import rotel  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--pre", "rotel"], check=True)

    systems = [("dyeline_wal_parquet", {}), ("dyeline_no_disk", {"DYELINE_STORE__IN_MEMORY_ONLY": "true"}),
               ("dyeline_discard", {"DYELINE_STORE__IN_MEMORY_ONLY": "true", "DYELINE_STORE__DISCARD": "true"}),
               ("rotel_blackhole", None)]
    results = {name: [] for name, _ in systems}
    cpu = {name: [] for name, _ in systems}
    by_thread = {name: [] for name, env in systems if env is not None}
    seed = 1
    for rep in range(a.reps):
        for name, env in systems:
            seed += 1
            if env is None:
                r = Rotel()
                if a.warmup:
                    load(bins, r.endpoint, a.warmup, WARMUP_SEED + seed)
                    settled_cpu_seconds(r.p.pid)
                c0 = cpu_seconds(r.p.pid)
                res = load(bins, r.endpoint, a.requests, seed)
                c1 = settled_cpu_seconds(r.p.pid)
                r.stop()
                cpu[name].append((c1 - c0) / res["spans"] * 1e6)
            else:
                d = Dyeline(binary, env)
                warm = load(bins, d.endpoint, a.warmup, WARMUP_SEED + seed)["spans"] if a.warmup else 0
                if a.warmup:
                    settled_cpu_seconds(d.p.pid)
                c0 = cpu_seconds(d.p.pid)
                t0 = thread_cpu(d.p.pid)
                res = load(bins, d.endpoint, a.requests, seed)
                c1 = settled_cpu_seconds(d.p.pid)
                spent = by_group(diff_cpu(t0, thread_cpu(d.p.pid)))
                by_thread[name].append({k: v / res["spans"] * 1e6 for k, v in spent.items()})
                stored = d.sql("SELECT count(*) FROM spans")[0][0] if name == "dyeline_wal_parquet" else None
                d.stop()
                cpu[name].append((c1 - c0) / res["spans"] * 1e6)
                if stored is not None and stored != warm + res["spans"]:
                    raise SystemExit(f"{name}: stored {stored} of {warm + res['spans']} spans")
            results[name].append(res["spans_per_second"])
            print(name, rep, json.dumps(res), file=sys.stderr)

    floor = json.loads(sh(os.path.join(bins, "decode_floor"), "--requests", str(a.requests)))

    # Memory: 1M spans held in memory (no flush), RSS growth of the server; and 500k spans
    # sent as the small requests of SDKs at low traffic (20 spans each).
    mem_mb_per_million = memory_mb_per_million(bins, binary, 1000, 1000)
    mem_small_requests = memory_mb_per_million(bins, binary, 25000, 20)

    # Disk: release-walk imported, per-column breakdown.
    tmp = tempfile.mkdtemp(prefix="dyeline-bench-disk-")
    fixture = os.path.join(ROOT, "..", "shared", "fixtures", "analysis", "release-walk", "spans.jsonl.gz")
    subprocess.run([binary, "import", "--data-dir", os.path.join(tmp, "data"), fixture], check=True,
                   env=dict(os.environ, DYELINE_LOG="warn"), capture_output=True)
    disk = json.loads(sh(os.path.join(bins, "parquet_breakdown"), os.path.join(tmp, "data")))
    shutil.rmtree(tmp, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in results.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    report = {
        "profile": a.profile,
        "requests_per_run": a.requests,
        "warmup_requests_per_run": a.warmup,
        "spans_per_request": 1000,
        "reps": a.reps,
        "throughput_spans_per_second_median": med,
        "throughput_runs": results,
        "ratio_dyeline_wal_parquet_to_rotel": med["dyeline_wal_parquet"] / med["rotel_blackhole"],
        "ratio_dyeline_no_disk_to_rotel": med["dyeline_no_disk"] / med["rotel_blackhole"],
        "ratio_dyeline_discard_to_rotel": med["dyeline_discard"] / med["rotel_blackhole"],
        "server_cpu_s_per_million_spans_median": cpu_med,
        "server_cpu_s_per_million_spans_by_thread_median": {
            name: {k: statistics.median(r.get(k, 0.0) for r in runs) for k in sorted({k for r in runs for k in r})}
            for name, runs in by_thread.items()},
        "decode_floor": floor,
        "cpu_ratio_full_path_to_prost_decode": cpu_med["dyeline_wal_parquet"] / floor["prost_decode_cpu_s_per_million"],
        "cpu_ratio_discard_to_prost_decode": cpu_med["dyeline_discard"] / floor["prost_decode_cpu_s_per_million"],
        "cpu_ratio_rotel_to_prost_decode": cpu_med["rotel_blackhole"] / floor["prost_decode_cpu_s_per_million"],
        "memory_rss_mb_per_million_spans_in_memory": mem_mb_per_million[0],
        "memory_rss_mb_per_million_spans_in_memory_after_purge_delay": mem_mb_per_million[1],
        "memory_rss_mb_per_million_spans_in_memory_20_span_requests": mem_small_requests[0],
        "memory_rss_mb_per_million_spans_in_memory_20_span_requests_after_purge_delay": mem_small_requests[1],
        "disk_release_walk": disk,
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
