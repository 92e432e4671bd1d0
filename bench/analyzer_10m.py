#!/usr/bin/env python3
"""Analyzer at 10 million spans: the performance targets of issue 4 in one run.

(a) Generator: writes K copies of the release-walk capture (K chosen so the total is at least
    --spans, default 10,000,000) as OTLP/JSON Lines (.jsonl.gz). Copy i has every *UnixNano
    time shifted by i x the capture's length (timeline end - t0, 600 s) and every trace id
    made unique by replacing its last 8 hex digits with i (the leading 24 stay random, as in
    real data, so file and row-group min/max statistics on trace_id prune no better than
    they would in production); span and parent ids are unchanged. The timeline repeats its
    events per copy, shifted the same way. Standard library only. The copies are imported
    with the real binary (`dyeline import --data-dir D --timeline T files...`), which writes
    the Parquet files Dyeline itself writes; the import is timed (spans/s). The .jsonl.gz
    copies are deleted after the import unless --keep.
(b) Full detection pass: `dyeline analyze --data-dir D --format json` (all spans, all six
    detections, one new process per run: startup, the scan of every Parquet file, JSON
    output), --runs times; median and min (target <= 3 s). The output must parse; findings
    are counted per type and compared with K x the counts of one copy (the capture alone,
    imported and analysed the same way). Every run has DYELINE_LOG=dyeline_queries=debug,
    whose four debug lines give the analyzer's own phase times (scan, convert, resolve and
    sort, trace detections, window detections): where the time goes.
(c) DuckDB: the per-window group-bys of the windowed detections (queries/src/analyze/
    detect/windows.rs: SERVER requests and errors per channel, app, 60 s window, colour and
    instance, rolled up per app and per channel, with the window's blue_percent and whether
    it straddles a configuration change; drained-side spans per channel, app, colour,
    traffic kind and window, with distinct instances and traces) as one SQL statement over
    the same Parquet files, in-process (a new connection per run, so DuckDB's own caches
    start empty; the OS page cache is warm for both sides). Each span's effective channel
    and blue_percent come from the timeline: this script replays it (domain section 4) into
    per-app intervals that the query joins on (app, window). The same statement is run by
    `dyeline sql` (DataFusion, one process per run) for an apples-to-apples SQL comparison.
    The ratio reported against the target (<= 1.3) is Dyeline computing the same thing,
    the four windowed detections only (b2), over DuckDB's group-bys; the full pass (all six
    detections, including the per-trace hop analysis that needs every span grouped by
    trace) over DuckDB's is reported beside it. The finding counts the aggregates give
    (thresholds of domain section 6 applied in Python to the few thousand result rows) are
    checked against the analyzer's for the four windowed detections.
(b2) Windowed detections only: `dyeline analyze --data-dir D --format json --detections
    drained_side,ratio_deviation,instance_skew,error_spike`, --runs times (the files are
    counted as they are read: no record per span); its four lists, spans and instances must
    equal the full pass's.
(d) Trace lookup: `dyeline serve` on the data dir; GET /api/v1/traces/{id} for 50 random
    trace ids of the generated data (each must return its number of spans) and 20 ids not
    stored (leading digits random, last 8 a copy index in range, so they look like stored
    ones), in random order after one warm-up request and after the server's own start-up
    work has settled (recorded); p50/p95/max per group (target <= 20 ms).

Usage: python3 bench/analyzer_10m.py [--spans 10000000] [--work-dir DIR [--reuse]] [--keep]
       [--runs 3] [--label NAME] [--profile bench-fast] [--target-dir DIR]
--work-dir DIR keeps the generated data dir there (default: a temporary dir under
../a10m, removed at the end unless --keep); --reuse skips generation and import when DIR
holds a finished import of an earlier run (DIR/meta.json). The binary is
<target-dir>/<profile>/dyeline (target dir: $CARGO_TARGET_DIR, else target/); it is not
built here (`cargo build --profile bench-fast --bin dyeline`). If it is missing, was
modified in the last minute or a cargo/rustc process runs, the script waits (up to
--wait-binary s), then runs a copy of it, so a rebuild cannot swap it mid-run; before each
timed phase it also waits while a build runs, and records the load average.
Bench requirements (not in tests/requirements.txt): `pip install duckdb`.
Writes bench/results/analyzer-10m[-<label>]-<date>.json and prints a table.
"""

import argparse
import datetime
import glob
import gzip
import json
import math
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CAPTURE = os.path.join(ROOT, "..", "shared", "fixtures", "analysis", "release-walk")
FINDING_TYPES = ["cross_color_hops", "missing_decisions", "drained_side",
                 "ratio_deviation", "instance_skew", "error_spike"]
WINDOWED = ["drained_side", "ratio_deviation", "instance_skew", "error_spike"]
# Domain section 6 defaults (queries/src/analyze/config.rs Thresholds::default).
WINDOW_NS = 60 * 10**9
GRACE_NS = 10 * 10**9
RATIO_MIN_REQUESTS, RATIO_MIN_GAP_PP, RATIO_STD_ERRORS = 200, 5.0, 3.0
SKEW_FACTOR, SKEW_MIN_REQUESTS = 2.0, 100
SPIKE_MIN_RATE, SPIKE_FACTOR, SPIKE_P, SPIKE_MIN_REQUESTS = 0.02, 3.0, 0.01, 100
TARGETS = {"analyze_s": 3.0, "ratio_vs_duckdb": 1.3, "trace_lookup_ms": 20.0}


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else None


def summary(xs):
    return {"runs": xs, "median": statistics.median(xs), "min": min(xs)} if xs else None


def builds_running():
    """Pids of cargo and rustc processes on this machine (a build competes for the CPUs and
    may be about to replace the binary)."""
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            name, state = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:][:1]
            if name in ("cargo", "rustc") and state != "Z":  # not a zombie waiting to be reaped
                pids.append(int(pid))
    return pids


def wait_quiet(phase, max_wait, out):
    """Before a timed phase: waits (up to max_wait s) while a build runs; records what it saw."""
    started = time.time()
    while builds_running() and time.time() - started < max_wait:
        log(f"a cargo build is running; waiting before {phase}")
        time.sleep(30)
    out["before_phase"][phase] = {"loadavg": os.getloadavg(), "waited_for_build_s": round(time.time() - started),
                                  "build_still_running": bool(builds_running())}


def note_build(out, phase):
    """After each timed run: was a cargo build running then (it competed for the CPUs)?"""
    out["before_phase"][phase].setdefault("build_running_after_each_run", []).append(bool(builds_running()))


def ready_binary(exe, max_wait, work):
    """Waits until `exe` exists, was not modified in the last minute, no build runs and it
    answers --version; copies it into the work dir (a rebuild during the run cannot swap it)."""
    deadline = time.time() + max_wait
    while True:
        try:
            st = os.stat(exe)
            if time.time() - st.st_mtime > 60 and (not builds_running() or time.time() > deadline):
                out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
                if out.returncode == 0:
                    os.makedirs(os.path.join(work, "bin"), exist_ok=True)
                    copy = os.path.join(work, "bin", "dyeline")
                    shutil.copy2(exe, copy)
                    return copy, {"path": exe, "version": out.stdout.strip(), "size": st.st_size,
                                  "mtime": datetime.datetime.fromtimestamp(st.st_mtime).isoformat(timespec="seconds")}
        except (OSError, subprocess.SubprocessError):
            pass
        if time.time() > deadline:
            raise SystemExit(f"{exe} is missing or still being rebuilt after {max_wait} s")
        log(f"waiting for {exe} (missing, modified in the last minute, or a build is running)")
        time.sleep(30)


def run(cmd, env=None, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True):
    """Runs `cmd`; returns (wall s, CPU s of the process, its peak RSS in MB)."""
    full_env = dict(os.environ, **(env or {}))
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=full_env, stdout=stdout, stderr=stderr)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if check and p.returncode != 0:
        raise RuntimeError(f"{cmd[:2]} exited with {p.returncode}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0


def machine():
    info = {"nproc": os.cpu_count(), "loadavg_at_start": os.getloadavg()}
    try:
        with open("/proc/cpuinfo") as f:
            models = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        info["cpu"] = models[0] if models else None
        with open("/proc/meminfo") as f:
            info["mem_total_gb"] = round(int(f.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    return info


def git_info():
    def g(*a):
        return subprocess.run(["git", "-C", ROOT, *a], capture_output=True, text=True).stdout
    return {"head": g("rev-parse", "--short", "HEAD").strip(),
            "dirty_files": [line[3:] for line in g("status", "--porcelain").splitlines() if line]}


# ---------------------------------------------------------------------------------------------
# (a) generation and import

TOKEN = re.compile(r'"(traceId|[A-Za-z]*UnixNano)":"([0-9a-fA-F]*)"')


def generate(capture, out_dir, target_spans, samples, seed, gz_level):
    """Writes K shifted copies of the capture and their timeline; returns the metadata."""
    with open(os.path.join(capture, "timeline.json")) as f:
        tl = json.load(f)
    t0, end = int(tl["t0_unix_nano"]), int(tl["end_unix_nano"])
    period = end - t0
    assert period % WINDOW_NS == 0, "copies must keep windows aligned"
    with gzip.open(os.path.join(capture, "spans.jsonl.gz"), "rt") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    per_trace = {}
    for line in lines:
        for tid in re.findall(r'"traceId":"([0-9a-fA-F]{32})"', line):
            per_trace[tid] = per_trace.get(tid, 0) + 1
    per_copy = sum(per_trace.values())
    assert len({t[:24] for t in per_trace}) == len(per_trace), "leading 24 digits must be unique"
    k = max(1, math.ceil(target_spans / per_copy))
    log(f"capture: {per_copy} spans, {len(per_trace)} traces, {len(lines)} requests; "
        f"writing {k} copies ({k * per_copy} spans) to {out_dir}")
    rng = random.Random(seed)
    tids = sorted(per_trace)
    picked = [(rng.randrange(k), rng.choice(tids)) for _ in range(samples)]
    files, spans, started = [], 0, time.perf_counter()
    for i in range(k):
        off = i * period
        suffix = "%08x" % i

        def sub(m, off=off, suffix=suffix):
            key, val = m.group(1), m.group(2)
            if key == "traceId":
                return '"traceId":"%s%s"' % (val[:24], suffix) if len(val) == 32 else m.group(0)
            return '"%s":"%d"' % (key, int(val) + off) if val else m.group(0)

        path = os.path.join(out_dir, "copy-%04d.jsonl.gz" % i)
        with gzip.open(path, "wt", compresslevel=gz_level) as out:
            for line in lines:
                out.write(TOKEN.sub(sub, line))
                out.write("\n")
                spans += line.count('"traceId"')
        files.append(path)
        if (i + 1) % 5 == 0 or i + 1 == k:
            el = time.perf_counter() - started
            log(f"  copy {i + 1}/{k}: {spans} spans, {el:.0f} s ({spans / el:,.0f} spans/s)")
    events = []
    for i in range(k):
        for ev in tl["events"]:
            e = dict(ev)
            e["t_unix_nano"] = str(int(ev["t_unix_nano"]) + i * period)
            if "t_s" in e:
                e["t_s"] = ev["t_s"] + i * period // 10**9
            events.append(e)
    doc = dict(tl, events=events, end_unix_nano=str(t0 + k * period),
               description=f"{k} copies of release-walk, copy i shifted by i x {period // 10**9} s "
                           "(bench/analyzer_10m.py). " + tl.get("description", ""))
    timeline = os.path.join(out_dir, "timeline.json")
    with open(timeline, "w") as f:
        json.dump(doc, f, indent=1)
    return {"copies": k, "spans": spans, "spans_per_copy": per_copy, "traces": k * len(per_trace),
            "period_s": period // 10**9, "t0_unix_nano": t0, "timeline": timeline, "files": files,
            "generate_s": time.perf_counter() - started,
            "gz_bytes": sum(os.path.getsize(p) for p in files),
            "sample_traces": [{"trace_id": t[:24] + "%08x" % c, "spans": per_trace[t]} for c, t in picked]}


def count_findings(report):
    return {t: len(report.get(t) or []) for t in FINDING_TYPES}


def baseline(exe, capture, work):
    """Finding counts of one copy: the capture alone, imported and analysed."""
    d = os.path.join(work, "baseline-data")
    shutil.rmtree(d, ignore_errors=True)
    run([exe, "import", "--data-dir", d, "--timeline", os.path.join(capture, "timeline.json"),
         os.path.join(capture, "spans.jsonl.gz")])
    out = subprocess.run([exe, "analyze", "--data-dir", d, "--format", "json"],
                         capture_output=True, check=True).stdout
    shutil.rmtree(d, ignore_errors=True)
    return count_findings(json.loads(out))


# ---------------------------------------------------------------------------------------------
# (c) the window group-bys as SQL


def effective_intervals(timeline_path):
    """Per app, [since, until) intervals with its effective channel and blue_percent (domain
    section 4), replayed like model/src/release/timeline.rs: ops in time order (ties in document
    order), a change only where the effective configuration differs, empty intervals dropped."""
    with open(timeline_path) as f:
        doc = json.load(f)
    chans = {c["id"]: {"apps": list(c.get("apps") or []), "releasing": False, "bp": 50}
             for c in doc["channels"] if c["id"] != "global"}
    glob_ch = {"releasing": False, "bp": 50}
    apps = sorted({a for c in chans.values() for a in c["apps"]})

    def effective(app):
        for c_id, c in chans.items():
            if app in c["apps"] and c["releasing"]:
                return (c_id, c["bp"])
        return ("global", glob_ch["bp"]) if glob_ch["releasing"] else (None, 50)

    ops = sorted(enumerate(doc["events"]), key=lambda e: (int(e[1]["t_unix_nano"]), e[0]))
    changes = {a: [(-(2**63), effective(a))] for a in apps}
    for _, ev in ops:
        t, op = int(ev["t_unix_nano"]), ev["op"]
        c = glob_ch if ev["channel"] == "global" else chans.setdefault(
            ev["channel"], {"apps": [], "releasing": False, "bp": 50})
        if op == "start":
            c["releasing"], c["bp"] = True, 50
        elif op == "finish":
            c["releasing"], c["bp"] = False, 50
        elif op == "ratio":
            c["bp"] = int(ev["blue_percent"])
        elif op == "apps":
            c["apps"] = list(ev.get("apps") or [])
            apps = sorted(set(apps) | set(c["apps"]))
            for a in c["apps"]:
                changes.setdefault(a, [(-(2**63), (None, 50))])
        if glob_ch["releasing"]:
            raise SystemExit("a releasing global channel covers apps the timeline does not "
                             "list; this script's SQL does not model it")
        for a in apps:
            e = effective(a)
            if changes[a][-1][1] != e:
                changes[a].append((t, e))
    out = []
    for a, ch in changes.items():
        for j, (since, (channel, bp)) in enumerate(ch):
            until = ch[j + 1][0] if j + 1 < len(ch) else 2**63 - 1
            if channel is not None and until > since:
                out.append((a, channel, bp, since, until))
    return out


def window_sql(intervals, spans_table):
    """The windowed detections' group-bys as one statement (DuckDB and DataFusion alike)."""
    values = ",".join(f"('{a}','{c}',{bp},{s},{u})" for a, c, bp, s, u in intervals)
    w = WINDOW_NS
    return f"""
WITH eff(app, channel, bp, since, until) AS (VALUES {values}),
em AS (
  SELECT app, channel, bp, since, until, unnest(range(since - since % {w}, until, {w})) AS ws
  FROM eff),
s AS (
  SELECT sp.service_name AS app, sp.instance_id AS instance, sp.color AS color,
         sp.span_kind AS span_kind, sp.traffic_kind AS traffic_kind, sp.is_error AS is_error,
         sp.trace_id AS trace_id, sp.start_time_unix_nano AS st,
         em.channel AS channel, em.bp AS bp, em.since AS since, em.until AS until, em.ws AS ws
  FROM {spans_table} sp
  JOIN em ON sp.service_name = em.app
         AND sp.start_time_unix_nano - sp.start_time_unix_nano % {w} = em.ws
  WHERE sp.start_time_unix_nano >= em.since AND sp.start_time_unix_nano < em.until)
SELECT 'requests' AS part, channel, app, ws, color, instance,
       CAST(NULL AS VARCHAR) AS traffic_kind,
       grouping(app) AS g_app, grouping(instance) AS g_inst,
       count(*) AS n, sum(CASE WHEN is_error THEN 1 ELSE 0 END) AS errors,
       bool_or(since > ws OR until < ws + {w}) AS straddles, max(bp) AS bp,
       CAST(0 AS BIGINT) AS n_instances, CAST(0 AS BIGINT) AS n_traces
FROM s WHERE span_kind = 'SERVER'
GROUP BY GROUPING SETS ((channel, app, ws, color, instance), (channel, app, ws, color),
                        (channel, ws, color))
UNION ALL
SELECT 'drained' AS part, channel, app, ws, color, CAST(NULL AS VARCHAR) AS instance,
       traffic_kind, 0 AS g_app, 0 AS g_inst, count(*) AS n, 0 AS errors,
       false AS straddles, max(bp) AS bp,
       count(DISTINCT instance) AS n_instances, count(DISTINCT trace_id) AS n_traces
FROM s
WHERE traffic_kind IS NOT NULL AND st - since > {GRACE_NS}
  AND ((bp = 0 AND color = 'blue') OR (bp = 100 AND color = 'green'))
GROUP BY channel, app, ws, color, traffic_kind
"""


def two_proportion_p(e1, n1, e2, n2):
    if n1 == 0 or n2 == 0:
        return 1.0
    pooled = (e1 + e2) / (n1 + n2)
    var = pooled * (1 - pooled) * (1 / n1 + 1 / n2)
    if var <= 0:
        return 1.0
    z = (e1 / n1 - e2 / n2) / math.sqrt(var)
    return math.erfc(abs(z) / math.sqrt(2))


def findings_from_rows(rows):
    """Windowed finding counts from the group-by rows (queries/src/analyze/detect/windows.rs)."""
    groups, inst = {}, {}
    drained = 0
    for part, channel, app, ws, color, instance, _tk, g_app, g_inst, n, errors, straddles, bp, _ni, _nt in rows:
        if part == "drained":
            drained += 1
            continue
        if int(g_inst) == 0:
            if color in ("blue", "green"):
                inst.setdefault((channel, app, ws, color), {})[instance] = int(n)
            continue
        key = (channel, None if int(g_app) else app, ws)
        g = groups.setdefault(key, {"straddles": False, "bp": 0})
        g["straddles"] |= bool(straddles)
        g["bp"] = max(g["bp"], int(bp))
        if color in ("blue", "green"):
            g[color] = (int(n), int(errors or 0))
    spikes = skew = ratio = 0
    for (channel, app, ws), g in groups.items():
        b, gr = g.get("blue", (0, 0)), g.get("green", (0, 0))
        for (nx, ex), (ny, ey) in [(b, gr), (gr, b)]:
            if nx < SPIKE_MIN_REQUESTS or ny < SPIKE_MIN_REQUESTS:
                continue
            rx, ry = ex / nx, ey / ny
            if rx >= SPIKE_MIN_RATE and rx >= SPIKE_FACTOR * ry and two_proportion_p(ex, nx, ey, ny) < SPIKE_P:
                spikes += 1
        if app is None:
            continue
        for color, (n, _) in (("blue", b), ("green", gr)):
            per = inst.get((channel, app, ws, color), {})
            if n < SKEW_MIN_REQUESTS or not per:
                continue
            mean = n / len(per)
            skew += sum(1 for v in per.values() if v > SKEW_FACTOR * mean)
        n = b[0] + gr[0]
        if g["straddles"] or n < RATIO_MIN_REQUESTS or n == 0:
            continue
        r = g["bp"] / 100.0
        tol = max(RATIO_MIN_GAP_PP / 100.0, RATIO_STD_ERRORS * math.sqrt(r * (1 - r) / n))
        if abs(b[0] / n - r) > tol:
            ratio += 1
    return {"drained_side": drained, "ratio_deviation": ratio, "instance_skew": skew, "error_spike": spikes}


# ---------------------------------------------------------------------------------------------
# (b) analyzer debug log


def parse_debug(text):
    """{message: {field: value}} of the analyzer's debug lines (values summed if repeated)."""
    out = {}
    for line in text.splitlines():
        m = re.search(r"DEBUG (\S+): (.*?) (\w+=.*)$", line)
        if not m:
            continue
        fields = out.setdefault(m.group(2), {"target": m.group(1).rstrip(":"), "lines": 0})
        fields["lines"] += 1
        for k, v in re.findall(r"(\w+)=([0-9.eE+-]+)(?=\s|$)", m.group(3)):
            try:
                fields[k] = fields.get(k, 0) + float(v)
            except ValueError:
                pass
    return out


def phase_times(debug, wall):
    """The analyzer's phase times (ms) from one run's debug lines (queries/src/analyze). Three
    layouts are understood: one DataFusion scan (`load`: scan, convert, resolve; `analysis`:
    load, report), the per-file cache of earlier versions (`cached load`: gather = read and
    convert every file, merge = merge the files' spans in trace order, finish) and the
    one-off load of `dyeline analyze` now (`load once`: gather, then merge = plan (names,
    rules, split traces), copy (each file's records resolved where they lie), named (the
    split traces' spans and the result assembled))."""
    load, fin = debug.get("load", {}), debug.get("finish", {})
    cached = debug.get("load once") or debug.get("cached load", {})
    merge, merge_keys = debug.get("merge", {}), debug.get("merge keys", {})
    det, analysis = debug.get("detections", {}), debug.get("analysis", {})
    b = {"wall_ms": wall * 1e3,
         "scan_ms": load.get("scan_ms"), "convert_ms": load.get("convert_ms"),
         "gather_ms": cached.get("gather_ms"),
         # `merge_ms`: since this session the keys (gathered and sorted, the `merge keys`
         # line) and the copy that resolves each span; before, a separate `finish_ms` followed
         "merge_ms": cached.get("merge_ms"),
         "merge_keys_ms": (merge_keys["keys_ms"] + merge_keys["sort_ms"]
                           if "keys_ms" in merge_keys else None),
         "merge_copy_ms": merge.get("copy_ms"), "merge_rules_ms": merge.get("rules_ms"),
         "merge_plan_ms": merge.get("plan_ms"), "merge_assemble_ms": merge.get("named_ms"),
         # all of Loader::finish (load's resolve_ms, or the cached load's finish_ms)
         "finish_ms": cached.get("finish_ms", load.get("resolve_ms")),
         "finish_rules_ms": fin.get("rules_ms"), "finish_resolve_and_sort_ms": fin.get("resolve_ms"),
         "traces_ms": det.get("traces_ms"), "windows_ms": det.get("windows_ms"),
         # wall time of both (they run on two threads on large inputs)
         "detections_ms": det.get("detections_ms")}
    phases = ("scan_ms", "convert_ms", "gather_ms", "merge_ms", "finish_ms") + (
        ("detections_ms",) if b["detections_ms"] is not None else ("traces_ms", "windows_ms"))
    top = [b[k] for k in phases if b[k] is not None]
    b["logged_phases_ms"] = sum(top)
    if analysis.get("load_ms") is not None and analysis.get("report_ms") is not None:
        b["in_analyzer_ms"] = analysis["load_ms"] + analysis["report_ms"]
    else:  # no `analysis` line: the logged phases are what the analyzer itself accounts for
        b["in_analyzer_ms"] = b["logged_phases_ms"]
    b["rest_ms"] = b["wall_ms"] - b["logged_phases_ms"]
    return b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="bench-fast")
    ap.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    ap.add_argument("--spans", type=int, default=10_000_000)
    ap.add_argument("--work-dir", help="generate and import here (kept; default: a temporary "
                    "dir under ../a10m, removed at the end unless --keep)")
    ap.add_argument("--reuse", action="store_true", help="reuse the import in --work-dir")
    ap.add_argument("--keep", action="store_true", help="keep the .jsonl.gz copies and the temporary work dir")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lookups", type=int, default=50, help="present trace ids looked up")
    ap.add_argument("--absent", type=int, default=20, help="absent trace ids looked up")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gz-level", type=int, default=1)
    ap.add_argument("--capture", default=CAPTURE)
    ap.add_argument("--wait-binary", type=int, default=3600, help="seconds to wait for the binary")
    ap.add_argument("--label", default="", help="added to the results file name")
    args = ap.parse_args()
    import duckdb  # bench requirement: pip install duckdb

    src_exe = os.path.join(args.target_dir, args.profile, "dyeline")
    info = machine()
    log(f"{info['nproc']} CPUs, load average {info['loadavg_at_start']}")
    if args.reuse and not args.work_dir:
        raise SystemExit("--reuse needs --work-dir")
    temp = not args.work_dir
    if temp:
        base = os.path.join(os.path.dirname(ROOT), "a10m")
        os.makedirs(base, exist_ok=True)
        work = tempfile.mkdtemp(prefix="analyzer-10m-", dir=base)
    else:
        work = os.path.abspath(args.work_dir)
        os.makedirs(work, exist_ok=True)
    data = os.path.join(work, "data")
    meta_path = os.path.join(work, "meta.json")
    out = {"date": datetime.date.today().isoformat(), "profile": args.profile,
           "git": git_info(), "machine": info, "targets": TARGETS, "work_dir": work,
           "before_phase": {}}
    server = None
    try:
        # (a) generate and import
        if args.reuse:
            with open(meta_path) as f:
                meta = json.load(f)
            log(f"reusing {data}: {meta['spans']} spans in {meta['copies']} copies")
            out["reused_work_dir"] = True
            exe, out["binary"] = ready_binary(src_exe, args.wait_binary, work)
        else:
            free = shutil.disk_usage(work).free
            need = (args.spans / 185_538) * (20 + 8) * 2**20  # gz copies + Parquet, rough
            log(f"free disk {free / 2**30:.1f} GB, need about {need / 2**30:.1f} GB")
            if free < 1.5 * need:
                raise SystemExit("not enough free disk")
            shutil.rmtree(data, ignore_errors=True)
            gen_dir = os.path.join(work, "gen")
            os.makedirs(gen_dir, exist_ok=True)
            out["before_phase"]["generate"] = {"loadavg": os.getloadavg()}
            # one more than looked up: the warm-up request's
            meta = generate(args.capture, gen_dir, args.spans, args.lookups + 1, args.seed, args.gz_level)
            log(f"generated {meta['spans']} spans in {meta['generate_s']:.1f} s "
                f"({meta['gz_bytes'] / 2**20:.0f} MB gz)")
            exe, out["binary"] = ready_binary(src_exe, args.wait_binary, work)
            wait_quiet("import", args.wait_binary, out)
            log("importing ...")
            with open(os.path.join(work, "import.log"), "w") as f:
                wall, cpu, rss = run([exe, "import", "--data-dir", data, "--timeline", meta["timeline"]]
                                     + meta["files"], stdout=f, stderr=subprocess.STDOUT)
            with open(os.path.join(work, "import.log")) as f:
                tail = f.read().strip().splitlines()[-1:]
            m = re.search(r"imported (\d+) spans", tail[0] if tail else "")
            meta["import"] = {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": rss,
                              "spans_imported": int(m.group(1)) if m else None,
                              "spans_per_s": (int(m.group(1)) if m else meta["spans"]) / wall,
                              "last_line": tail[0] if tail else None}
            log(f"imported in {wall:.1f} s ({meta['import']['spans_per_s']:,.0f} spans/s, "
                f"CPU {cpu:.0f} s, peak RSS {rss:.0f} MB): {meta['import']['last_line']}")
            if not args.keep:
                for p in meta["files"]:
                    os.remove(p)
                log("deleted the .jsonl.gz copies")
            meta["baseline_findings_one_copy"] = baseline(exe, args.capture, work)
            with open(meta_path, "w") as f:
                json.dump(meta, f, indent=1)
        parquet = sorted(glob.glob(os.path.join(data, "spans", "**", "*.parquet"), recursive=True))
        out["generation"] = {k: meta.get(k) for k in ("copies", "spans", "spans_per_copy", "traces",
                                                      "period_s", "generate_s", "gz_bytes")}
        out["import"] = meta.get("import")
        out["parquet"] = {"files": len(parquet), "bytes": sum(os.path.getsize(p) for p in parquet),
                          "hour_partitions": len({os.path.dirname(p) for p in parquet})}
        spans = meta["spans"]

        # (b) full detection pass
        wait_quiet("analyze", args.wait_binary, out)
        report_path = os.path.join(work, "analyze.json")
        walls, cpus, rsss, breakdowns, debugs = [], [], [], [], []
        for i in range(args.runs):
            # Every run logs the analyzer's phase times (four debug lines: no measurable cost).
            err_path = os.path.join(work, f"analyze-debug-{i + 1}.log")
            with open(report_path, "wb") as f, open(err_path, "w") as err:
                wall, cpu, rss = run([exe, "analyze", "--data-dir", data, "--format", "json"],
                                     env={"DYELINE_LOG": "dyeline_queries=debug"}, stdout=f, stderr=err)
            walls.append(wall)
            note_build(out, "analyze")
            cpus.append(cpu)
            rsss.append(rss)
            with open(err_path) as f:
                debug = parse_debug(f.read())
            debugs.append(debug)
            breakdowns.append(phase_times(debug, wall))
            log(f"analyze run {i + 1}/{args.runs}: {wall:.2f} s (CPU {cpu:.2f} s, peak RSS {rss:.0f} MB)")
        with open(report_path) as f:
            report = json.load(f)
        counts = count_findings(report)
        base = meta.get("baseline_findings_one_copy") or {}
        expected = {t: base[t] * meta["copies"] for t in base}
        # per phase, the median over the runs (the phases' medians need not add up exactly)
        breakdown = {k: statistics.median(b[k] for b in breakdowns)
                     for k in breakdowns[0] if all(b.get(k) is not None for b in breakdowns)}
        breakdown["note"] = ("medians over the runs, ms; finish = Loader::finish (instance colour "
                             "rules, then each span's effective channel and the sort of all spans "
                             "by trace); rest = wall minus the logged phases: process start, "
                             "opening the data dir and control database, the unlogged parts of "
                             "the report, JSON rendering and writing, exit")
        out["analyze"] = {
            "command": f"dyeline analyze --data-dir D --format json",
            "computes": "all six detections over every span (trace-level hop and missing-decision "
                        "analysis after sorting all spans by trace, plus the four windowed "
                        "detections), one new process per run, report written as JSON",
            "wall_s": summary(walls), "cpu_s": summary(cpus), "peak_rss_mb": max(rsss),
            "spans_in_report": report.get("spans"), "findings": counts,
            "findings_expected_k_times_one_copy": expected,
            "findings_match_expected": counts == expected if expected else None,
            "report_bytes": os.path.getsize(report_path),
            "breakdown": breakdown, "breakdown_per_run": breakdowns, "debug_lines_per_run": debugs,
        }
        log(f"analyze: median {statistics.median(walls):.2f} s; findings {counts}")
        if expected and counts != expected:
            log(f"  NOTE: K x one copy would be {expected}")

        # (b2) the windowed detections only: what DuckDB's statement computes, plus the
        # exemplar trace ids and every drained-side trace id
        wait_quiet("analyze_windowed", args.wait_binary, out)
        win_path = os.path.join(work, "analyze-windowed.json")
        wwalls, wcpus, wrsss, wdebugs = [], [], [], []
        for i in range(args.runs):
            err_path = os.path.join(work, f"analyze-windowed-debug-{i + 1}.log")
            with open(win_path, "wb") as f, open(err_path, "w") as err:
                wall, cpu, rss = run([exe, "analyze", "--data-dir", data, "--format", "json",
                                      "--detections", ",".join(WINDOWED)],
                                     env={"DYELINE_LOG": "dyeline_queries=debug"}, stdout=f, stderr=err)
            note_build(out, "analyze_windowed")
            wwalls.append(wall)
            wcpus.append(cpu)
            wrsss.append(rss)
            with open(err_path) as f:
                wdebugs.append(parse_debug(f.read()))
            log(f"analyze windowed-only run {i + 1}/{args.runs}: {wall:.2f} s (CPU {cpu:.2f} s, "
                f"peak RSS {rss:.0f} MB)")
        with open(win_path) as f:
            wreport = json.load(f)
        counted = [d.get("window counts", {}) for d in wdebugs]
        out["analyze_windowed"] = {
            "command": "dyeline analyze --data-dir D --format json --detections "
                       + ",".join(WINDOWED),
            "computes": "the four windowed detections only (no trace-level analysis): each file "
                        "read on its own core with the 9 columns they use and counted as it is "
                        "read (no record per span), the counts merged and judged; exemplar trace "
                        "ids and every drained-side trace id included; one new process per run",
            "wall_s": summary(wwalls), "cpu_s": summary(wcpus), "peak_rss_mb": max(wrsss),
            "read_and_count_ms_per_run": [c.get("gather_ms") for c in counted],
            "merge_counts_ms_per_run": [c.get("merge_ms") for c in counted],
            "spans_in_report": wreport.get("spans"),
            "same_windowed_findings_as_full_pass": {t: wreport.get(t) == report.get(t)
                                                    for t in ("drained_side", "ratio_deviation",
                                                              "instance_skew", "error_spike")},
            "same_spans_and_instances_as_full_pass":
                wreport.get("spans") == report.get("spans")
                and wreport.get("instances") == report.get("instances"),
        }
        log(f"analyze windowed-only: median {statistics.median(wwalls):.2f} s")

        # (c) DuckDB and dyeline sql over the same files
        intervals = effective_intervals(meta["timeline"])
        duck_table = "read_parquet(%s, hive_partitioning=false)" % (
            "'" + os.path.join(data, "spans", "**", "*.parquet").replace("'", "''") + "'")
        duck_sql = window_sql(intervals, duck_table)
        dy_sql = window_sql(intervals, "spans")
        wait_quiet("duckdb", args.wait_binary, out)
        con = duckdb.connect()
        duck_count = con.execute(f"SELECT count(*) FROM {duck_table}").fetchone()[0]
        duck_threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
        con.close()
        # DuckDB reading the 16 columns the analyzer loads (queries/src/analyze/read/
        # columns.rs LOAD_COLUMN_NAMES), each folded into an aggregate: what the same scan costs it.
        scan_sql = (f"SELECT max(trace_id), max(span_id), max(parent_span_id), max(service_name), "
                    f"max(instance_id), max(color), max(color_rule), max(span_kind), "
                    f"max(traffic_kind), max(start_time_unix_nano), bool_or(is_error), "
                    f"max(cardinality(decisions)), max(decision_source), max(malformed_pairs), "
                    f"max(len(conflicting_channels)), max(end_time_unix_nano) FROM {duck_table}")
        dwalls, scans, rows = [], [], None
        for i in range(args.runs):
            t = time.perf_counter()
            con = duckdb.connect()
            rows = con.execute(duck_sql).fetchall()
            dwalls.append(time.perf_counter() - t)
            con.close()
            t = time.perf_counter()
            con = duckdb.connect()
            con.execute(scan_sql).fetchall()
            scans.append(time.perf_counter() - t)
            note_build(out, "duckdb")
            con.close()
            log(f"duckdb run {i + 1}/{args.runs}: {dwalls[-1]:.2f} s ({len(rows)} rows); "
                f"scan of the analyzer's 16 columns {scans[-1]:.2f} s")
        t = time.perf_counter()
        duck_findings = findings_from_rows(rows)
        post_s = time.perf_counter() - t
        out["duckdb"] = {
            "version": duckdb.__version__, "threads": duck_threads, "rows_in_files": duck_count,
            "computes": "the windowed detections' group-bys only (requests/errors per channel, "
                        "app, 60 s window, colour and instance with per-app and per-channel "
                        "roll-ups, straddle flag and blue_percent; drained-side counts with "
                        "distinct instances and traces), each span's effective channel joined "
                        "from per-app timeline intervals on (app, window); no trace-level "
                        "analysis, no exemplar trace ids",
            "wall_s": summary(dwalls), "result_rows": len(rows),
            "scan_of_analyzer_columns_s": summary(scans),
            "scan_of_analyzer_columns_note": "the 16 columns the analyzer loads, each folded into "
                                             "max/bool_or: compare with the analyzer's scan_ms",
            "findings_from_rows": duck_findings, "findings_post_processing_s": post_s,
            "windowed_findings_match_analyzer": {t: duck_findings[t] == counts[t] for t in WINDOWED},
            "timeline_intervals": len(intervals), "sql_chars": len(duck_sql),
        }
        log(f"duckdb: median {statistics.median(dwalls):.2f} s; findings from rows {duck_findings}")
        sql_env = {"DYELINE_SQL__MAX_ROWS": "100000000", "DYELINE_SQL__TIMEOUT": "3600s"}
        wait_quiet("dyeline_sql", args.wait_binary, out)
        swalls, scpus, startup = [], [], []
        try:
            cnt = subprocess.run([exe, "sql", "--data-dir", data, "--format", "json",
                                  "SELECT count(*) AS n FROM spans"], capture_output=True,
                                 check=True, env=dict(os.environ, **sql_env)).stdout
            dy_count = json.loads(cnt)["rows"][0][0]
            for _ in range(args.runs):  # process start (and config), no table read
                startup.append(run([exe, "sql", "--data-dir", data, "SELECT 1"], env=sql_env)[0])
            sql_out = os.path.join(work, "sql.json")
            for i in range(args.runs):
                with open(sql_out, "wb") as f:
                    wall, cpu, _ = run([exe, "sql", "--data-dir", data, "--format", "json", dy_sql],
                                       env=sql_env, stdout=f)
                swalls.append(wall)
                note_build(out, "dyeline_sql")
                scpus.append(cpu)
                log(f"dyeline sql run {i + 1}/{args.runs}: {wall:.2f} s")
            with open(sql_out) as f:
                res = json.load(f)
            sql_findings = findings_from_rows(res["rows"])
            out["dyeline_sql"] = {
                "command": "dyeline sql --data-dir D --format json '<the same statement, FROM spans>'",
                "rows_in_table": dy_count, "wall_s": summary(swalls), "cpu_s": summary(scpus),
                "process_start_select_1_s": summary(startup), "result_rows": len(res["rows"]),
                "truncated": res.get("truncated"), "findings_from_rows": sql_findings,
                "same_findings_as_duckdb": sql_findings == duck_findings,
            }
            log(f"dyeline sql: median {statistics.median(swalls):.2f} s; findings {sql_findings}")
        except (subprocess.CalledProcessError, RuntimeError, OSError, ValueError, KeyError) as e:
            out["dyeline_sql"] = {"error": str(e)[:2000]}
            log(f"dyeline sql failed: {e}")
        dmed = statistics.median(dwalls)
        out["ratios"] = {
            "analyze_windowed_only_over_duckdb_groupbys": statistics.median(wwalls) / dmed,
            "analyze_full_pass_over_duckdb_groupbys": statistics.median(walls) / dmed,
            "analyze_in_process_load_plus_report_over_duckdb":
                breakdown["in_analyzer_ms"] / 1e3 / dmed if "in_analyzer_ms" in breakdown else None,
            "dyeline_sql_over_duckdb_same_query": statistics.median(swalls) / dmed if swalls else None,
            "note": "the first is the issue's target ratio (<= 1.3): Dyeline computing the same "
                    "per-window group-bys (the four windowed detections, a new process, JSON "
                    "written) over DuckDB's statement (in-process); the second is Dyeline's whole "
                    "pass (all six detections, including the per-trace analysis DuckDB does not "
                    "do) over the same; the third leaves out Dyeline's process start and JSON "
                    "output (the analyzer's own phases); the fourth is the same SQL on both",
        }

        # (d) trace lookup by id
        wait_quiet("serve", args.wait_binary, out)
        api, grpc, http = free_port(), free_port(), free_port()
        serve_log = open(os.path.join(work, "serve.log"), "w")
        t_start = time.perf_counter()
        server = subprocess.Popen([exe, "serve", "--data-dir", data,
                                   "--api-addr", f"127.0.0.1:{api}",
                                   "--otlp-grpc-addr", f"127.0.0.1:{grpc}",
                                   "--otlp-http-addr", f"127.0.0.1:{http}"],
                                  stdout=subprocess.DEVNULL, stderr=serve_log)
        base_url = f"http://127.0.0.1:{api}"
        for _ in range(3000):
            try:
                urllib.request.urlopen(base_url + "/healthz", timeout=5).read()
                break
            except OSError:
                if server.poll() is not None:
                    raise RuntimeError("dyeline serve exited; see serve.log")
                time.sleep(0.1)
        ready_s = time.perf_counter() - t_start
        token_path = os.path.join(data, "api-token")
        headers = {}
        if os.path.exists(token_path):
            with open(token_path) as f:
                headers["authorization"] = "Bearer " + f.read().strip()

        def server_cpu():
            with open(f"/proc/{server.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        # Work the server does on its own after start (e.g. warming caches) competes with the
        # lookups on this machine's cores: wait (up to 300 s) until a 2 s interval costs it
        # under 0.1 CPU s, and record how long that took and what it cost.
        cpu0, settle_started, idle_cpu = server_cpu(), time.perf_counter(), None
        while time.perf_counter() - settle_started < 300:
            c = server_cpu()
            time.sleep(2)
            if server_cpu() - c < 0.1:
                idle_cpu = server_cpu() - cpu0
                break
        settle_s, bg_cpu = time.perf_counter() - settle_started, server_cpu() - cpu0
        log(f"server settled after {settle_s:.0f} s ({bg_cpu:.1f} CPU s of background work)")

        def lookup(tid):
            req = urllib.request.Request(f"{base_url}/api/v1/traces/{tid}", headers=headers)
            t = time.perf_counter()
            try:
                with urllib.request.urlopen(req, timeout=300) as r:
                    body, status = r.read(), r.status
            except urllib.error.HTTPError as e:
                body, status = e.read(), e.code
            return (time.perf_counter() - t) * 1000.0, status, body

        rng = random.Random(args.seed + 1)
        present = meta["sample_traces"][: args.lookups]
        absent = []
        for _ in range(args.absent):  # look like stored ids: random 24 digits, a copy in range
            absent.append("%024x%08x" % (rng.getrandbits(96), rng.randrange(meta["copies"])))
        warm = lookup(meta["sample_traces"][-1]["trace_id"])
        order = [("present", p["trace_id"], p["spans"]) for p in present] + \
                [("absent", a, 0) for a in absent]
        rng.shuffle(order)
        times = {"present": [], "absent": []}
        errors = []
        cpu1 = server_cpu()
        for kind, tid, n in order:
            ms, status, body = lookup(tid)
            times[kind].append(ms)
            if kind == "present":
                got = json.loads(body).get("span_count") if status == 200 else None
                if got != n:
                    errors.append(f"{tid}: status {status}, span_count {got}, expected {n}")
            elif status != 404:
                errors.append(f"{tid} (absent): status {status}")
        lookup_cpu = server_cpu() - cpu1
        note_build(out, "serve")
        out["trace_lookup"] = {
            "server_ready_s": ready_s, "server_settle_s": settle_s,
            "server_background_cpu_s_before_lookups": bg_cpu,
            "server_settled": idle_cpu is not None,
            "warmup_ms": warm[0], "warmup_status": warm[1],
            "server_cpu_s_during_lookups": lookup_cpu,
            "errors": errors,
        }
        for kind in ("present", "absent"):
            xs = times[kind]
            out["trace_lookup"][kind] = {"n": len(xs), "p50_ms": pct(xs, 0.5), "p95_ms": pct(xs, 0.95),
                                         "max_ms": max(xs) if xs else None, "all_ms": xs}
        log(f"trace lookup: present p50 {pct(times['present'], .5):.1f} ms p95 "
            f"{pct(times['present'], .95):.1f} ms; absent p50 {pct(times['absent'], .5):.1f} ms; "
            f"{len(errors)} errors")
        server.terminate()
        server.wait(timeout=120)
        server = None
        serve_log.close()
        out["loadavg_at_end"] = os.getloadavg()

        label = f"-{args.label}" if args.label else ""
        path = os.path.join(ROOT, "bench", "results", f"analyzer-10m{label}-{out['date']}.json")
        with open(path, "w") as f:
            json.dump(out, f, indent=2)
        print_table(out, spans, path)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=120)
        if temp and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            shutil.rmtree(os.path.join(work, "bin"), ignore_errors=True)


def print_table(out, spans, path):
    fmt = lambda v, d=2: "-" if v is None else f"{v:.{d}f}"
    g, imp, a, d, s = out["generation"], out.get("import") or {}, out["analyze"], out["duckdb"], out.get("dyeline_sql", {})
    tl, r, b = out["trace_lookup"], out["ratios"], out["analyze"]["breakdown"]
    print(f"\n{spans:,} spans ({g['copies']} copies of release-walk), {out['parquet']['files']} Parquet "
          f"files ({out['parquet']['bytes'] / 2**20:.0f} MB), {out['machine']['nproc']} CPUs, "
          f"load {out['machine']['loadavg_at_start'][0]:.2f} at start, profile {out['profile']}")
    rows = [
        ("generate (python, gz)", fmt(g.get("generate_s"), 1) + " s", ""),
        ("import", fmt(imp.get("wall_s"), 1) + " s", f"{imp.get('spans_per_s', 0):,.0f} spans/s"),
        ("analyze full pass median/min", f"{fmt(a['wall_s']['median'])} / {fmt(a['wall_s']['min'])} s",
         f"target <= {TARGETS['analyze_s']} s"),
        ("duckdb group-bys median/min", f"{fmt(d['wall_s']['median'])} / {fmt(d['wall_s']['min'])} s", ""),
        ("dyeline sql same query median", (fmt(s['wall_s']['median']) + " s") if s.get("wall_s") else "error",
         (f"`SELECT 1`: {fmt(s['process_start_select_1_s']['median'])} s") if s.get("process_start_select_1_s") else ""),
        ("duckdb scan of analyzer's columns", f"{fmt(d['scan_of_analyzer_columns_s']['median'])} s",
         "analyzer's " + (f"gather (read+convert) {fmt((b.get('gather_ms') or 0) / 1e3)} s" if b.get("gather_ms") is not None
                          else f"scan+convert {fmt((b.get('scan_ms') or 0) / 1e3)} + {fmt((b.get('convert_ms') or 0) / 1e3)} s")),
        ("analyze windowed-only median/min", f"{fmt(out['analyze_windowed']['wall_s']['median'])} / "
         f"{fmt(out['analyze_windowed']['wall_s']['min'])} s", "the same group-bys as duckdb's"),
        ("ratio windowed-only / duckdb", fmt(r["analyze_windowed_only_over_duckdb_groupbys"]),
         f"target <= {TARGETS['ratio_vs_duckdb']}"),
        ("ratio full pass / duckdb", fmt(r["analyze_full_pass_over_duckdb_groupbys"]), "six detections vs duckdb's four"),
        ("ratio analyzer in-process / duckdb", fmt(r["analyze_in_process_load_plus_report_over_duckdb"]), "analyzer's own phases only"),
        ("ratio dyeline sql / duckdb", fmt(r["dyeline_sql_over_duckdb_same_query"]), "same SQL"),
        ("trace lookup present p50/p95/max", f"{fmt(tl['present']['p50_ms'], 1)} / {fmt(tl['present']['p95_ms'], 1)} / "
         f"{fmt(tl['present']['max_ms'], 1)} ms", f"target <= {TARGETS['trace_lookup_ms']:.0f} ms"),
        ("trace lookup absent p50/p95/max", f"{fmt(tl['absent']['p50_ms'], 1)} / {fmt(tl['absent']['p95_ms'], 1)} / "
         f"{fmt(tl['absent']['max_ms'], 1)} ms", f"{len(tl['errors'])} errors"),
    ]
    for name, v, note in rows:
        print(f"{name:<36} {v:>24}  {note}")
    parts = [(label, b.get(k)) for label, k in (
        ("scan", "scan_ms"), ("convert", "convert_ms"), ("gather (read+convert files)", "gather_ms"),
        ("merge", "merge_ms"), ("of which keys (gather+sort)", "merge_keys_ms"),
        ("of which plan (names, rules, split traces)", "merge_plan_ms"),
        ("of which copy+resolve", "merge_copy_ms"), ("of which rules", "merge_rules_ms"),
        ("of which assembly", "merge_assemble_ms"),
        ("finish", "finish_ms"), ("of which rules", "finish_rules_ms"),
        ("of which resolve+sort", "finish_resolve_and_sort_ms"), ("trace detections", "traces_ms"),
        ("window detections", "windows_ms"), ("rest (process, report, JSON)", "rest_ms"))]
    print(f"where the analyzer's time goes (ms, medians over the runs; wall {fmt(b.get('wall_ms'), 0)}): "
          + ", ".join(f"{label} {fmt(v, 0)}" for label, v in parts if v is not None))
    print(f"findings: {a['findings']}" + ("" if a["findings_match_expected"] else
                                          f" (K x one copy: {a['findings_expected_k_times_one_copy']})"))
    print(f"windowed findings from DuckDB's rows match the analyzer: {d['windowed_findings_match_analyzer']}")
    print(f"written to {path}")


if __name__ == "__main__":
    main()
