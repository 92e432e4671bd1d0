"""SQL endpoint probes (issue 23, items 2 and 3 and the EXPLAIN low): SELECT INTO must not
create a table, a 100 GB `repeat` must be refused at once with memory unchanged, queries past
[sql] max_concurrent_queries must get 429 + Retry-After while /healthz stays under a second,
and EXPLAIN / EXPLAIN ANALYZE must answer plan rows."""

import json
import threading
import time

from probes.common import Failed

# Resident memory the server may reach during these probes (MB).
MAX_RSS_MB = 1500


def sql(target, text, timeout=60):
    """(status, headers, JSON body) of POST /api/v1/sql."""
    status, headers, body = target.request(
        "POST", target.url("/api/v1/sql"), json.dumps({"sql": text}).encode(),
        {"content-type": "application/json"}, timeout=timeout)
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise Failed(f"{text[:40]}: answered {status} with no JSON: {body[:200]!r}") from e
    return status, headers, doc


def short(doc):
    text = json.dumps(doc)
    return text if len(text) <= 300 else text[:300] + f"… ({len(text)} characters)"


def error_of(doc):
    e = doc.get("error") or {}
    return e.get("code"), e.get("message", "")


def select_into(target):
    status, _, doc = sql(target, "SELECT * INTO dyeline_probe_t FROM generate_series(1, 100000000)")
    if status != 400 or error_of(doc)[0] != "not_read_only":
        raise Failed(f"SELECT INTO answered {status} {short(doc)}")
    status, _, doc = sql(target, "SELECT count(*) FROM dyeline_probe_t")
    if status == 200:
        raise Failed(f"the table exists after SELECT INTO: {short(doc)}")
    for stmt in ["CREATE VIEW dyeline_probe_v AS SELECT 1", "SET datafusion.execution.batch_size = 1",
                 "COPY (SELECT 1) TO '/tmp/dyeline-probe.csv'"]:
        status, _, doc = sql(target, stmt)
        if status != 400:
            raise Failed(f"{stmt}: answered {status} {short(doc)}")
    return "SELECT INTO, CREATE VIEW, SET, COPY refused (400 not_read_only); no table; " + target.still_up(MAX_RSS_MB)


def repeat_bomb(target):
    before = target.rss_mb()
    t = time.monotonic()
    status, _, doc = sql(target, "SELECT length(repeat(arrow_cast('x','LargeUtf8'), 100000000000))")
    took = time.monotonic() - t
    code, message = error_of(doc)
    if status != 400 or "[sql] max_value_bytes" not in message:
        raise Failed(f"repeat bomb answered {status} {short(doc)} after {took:.1f} s")
    if took > 2:
        raise Failed(f"repeat bomb refused only after {took:.1f} s")
    # A value under the limit copied to every row of a batch and returned: 490 MB a batch.
    status, _, doc = sql(target, "SELECT repeat('x', 60000) AS v FROM generate_series(1, 10000000)")
    code2, message2 = error_of(doc)
    if status != 400 or "[sql]" not in message2:
        raise Failed(f"repeated constant answered {status} {short(doc)}")
    after = target.rss_mb()
    grew = "" if before is None else f", rss {before:.0f} -> {after:.0f} MB"
    return f"refused in {took * 1000:.0f} ms ({code}); repeated constant refused ({code2}){grew}; " + target.still_up(MAX_RSS_MB)


def concurrent_queries(target):
    slow_sql = "SELECT count(*) FROM generate_series(1, 100000000000)"
    results = []

    def run():
        try:
            results.append(sql(target, slow_sql, timeout=90)[0])
        except Exception as e:  # noqa: BLE001 - reported below
            results.append(repr(e))

    threads = [threading.Thread(target=run) for _ in range(12)]
    for th in threads:
        th.start()
    slowest = 0.0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        slowest = max(slowest, target.healthz_seconds())
        time.sleep(0.2)
    status, headers, doc = sql(target, "SELECT 1")
    retry = {k.lower(): v for k, v in headers.items()}.get("retry-after")
    for th in threads:
        th.join(timeout=90)
    busy = results.count(429)
    if busy == 0 or status != 429 or retry is None:
        raise Failed(f"12 slow queries at once: statuses {sorted(map(str, results))}; one more: {status} {short(doc)}")
    if "[sql] max_concurrent_queries" not in error_of(doc)[1]:
        raise Failed(f"429 without the setting: {short(doc)}")
    others = sorted(str(r) for r in results if r != 429)
    return (f"12 slow queries: {busy} refused 429 (Retry-After {retry}), others {others}; "
            f"healthz slowest {slowest * 1000:.0f} ms; " + target.still_up(MAX_RSS_MB))


def explain(target):
    seen = []
    for stmt in ["EXPLAIN SELECT name, count(*) FROM spans GROUP BY name",
                 "EXPLAIN ANALYZE SELECT count(*) FROM generate_series(1, 1000)"]:
        status, _, doc = sql(target, stmt)
        if status != 200 or not doc.get("rows"):
            raise Failed(f"{stmt}: answered {status} {short(doc)}")
        seen.append(str(len(doc["rows"])))
    return f"EXPLAIN / EXPLAIN ANALYZE answered {' / '.join(seen)} plan rows; " + target.still_up(MAX_RSS_MB)


PROBES = [
    ("SELECT INTO creates no table", select_into),
    ("repeat bomb refused at once", repeat_bomb),
    ("concurrent slow queries get 429", concurrent_queries),
    ("EXPLAIN and EXPLAIN ANALYZE", explain),
]
