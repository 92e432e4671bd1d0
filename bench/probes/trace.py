"""Trace views (issue 23 item 1): a trace whose spans form a 20,000-deep chain, a trace of one
root and 200,000 children, and attribute values nested 100,000 deep, sent to the OTLP/HTTP
receiver and viewed through GET /api/v1/traces/{id} and the page /traces/{id} (no token:
reads are open by default). Before, opening the deep chain overflowed a worker's stack and
aborted the process, and one view of the wide trace returned 80-92 MB. A held probe saw one
capped page per view that says how many spans it left out, /healthz within 1 s throughout,
and the server up after."""

import json
import random
import threading
import time

from probes.common import Failed

PAGE = 10_000  # [trace_view] max_spans by default


class Watch:
    """Polls /healthz every 100 ms on a thread while an attack runs."""

    def __init__(self, target):
        self.target, self.failures, self.probes, self.slowest = target, [], 0, 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            try:
                self.slowest = max(self.slowest, self.target.healthz_seconds())
            except Failed as e:
                self.failures.append(str(e))
            self.probes += 1
            self.stop.wait(0.1)

    def finish(self):
        self.stop.set()
        self.thread.join()
        if self.failures:
            raise Failed(f"/healthz failed {len(self.failures)} of {self.probes} probes: "
                         f"{self.failures[:3]}")
        return f"healthz slowest {self.slowest * 1000:.0f} ms of {self.probes}"


def trace_id():
    return "%032x" % random.getrandbits(128)


def send_spans(target, spans, app="probe-trace"):
    body = json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": app}}]},
        "scopeSpans": [{"spans": spans}]}]}).encode()
    status, _, out = target.request("POST", f"http://{target.otlp_http}/v1/traces", body,
                                    {"Content-Type": "application/json"}, timeout=120, token=False)
    if status != 200:
        raise Failed(f"export of {len(body)} bytes answered {status}: {out[:200]!r}")


def span(tid, i, parent, t0):
    return {"traceId": tid, "spanId": "%016x" % i, "parentSpanId": "%016x" % parent if parent else "",
            "name": "s", "kind": 2, "startTimeUnixNano": str(t0 + i),
            "endTimeUnixNano": str(t0 + i + 1000)}


def view(target, path):
    """(status, body bytes) of an open read (no token)."""
    status, _, body = target.request("GET", target.url(path), timeout=120, token=False)
    return status, body


def view_json(target, path):
    status, body = view(target, path)
    if status != 200:
        raise Failed(f"GET {path} answered {status}: {body[:300]!r}")
    return json.loads(body), len(body)


def deep_chain(target):
    depth, tid, t0 = 20_000, trace_id(), time.time_ns()
    send_spans(target, [span(tid, i, i - 1, t0) for i in range(depth, 0, -1)])
    watch = Watch(target)
    sizes = []
    for _ in range(2):
        for offset in (0, PAGE):
            v, n = view_json(target, f"/api/v1/traces/{tid}?offset={offset}")
            got = (v["span_count"], v["returned"], v["left_out"], v["max_depth"])
            if got != (depth, PAGE, depth - PAGE, depth - 1):
                raise Failed(f"offset {offset}: span_count, returned, left_out, max_depth = {got}")
            if [s["depth"] for s in v["spans"][:3]] != [offset, offset + 1, offset + 2]:
                raise Failed(f"offset {offset}: depths {[s['depth'] for s in v['spans'][:3]]}")
            sizes.append(n)
        status, html = view(target, f"/traces/{tid}")
        if status != 200 or "spans 1–10,000 of 20,000 shown; ".encode() not in html:
            raise Failed(f"the page answered {status} without saying what it left out")
        sizes.append(len(html))
    health = watch.finish()
    return (f"8 views of a 20,000-deep chain, each one page of {PAGE:,} with depths, "
            f"largest {max(sizes) / 1e6:.1f} MB; {health}; {target.still_up()}")


def wide_trace(target):
    children, tid, t0 = 200_000, trace_id(), time.time_ns()
    send_spans(target, [span(tid, 1, 0, t0)])
    for part in range(5):
        send_spans(target, [span(tid, i + 2, 1, t0)
                            for i in range(part * 40_000, (part + 1) * 40_000)])
    watch = Watch(target)
    v, n = view_json(target, f"/api/v1/traces/{tid}")
    got = (v["span_count"], v["returned"], v["left_out"], v["next_offset"])
    if got != (children + 1, PAGE, children + 1 - PAGE, PAGE):
        raise Failed(f"span_count, returned, left_out, next_offset = {got}")
    if n > 16_000_000:
        raise Failed(f"one view is {n / 1e6:.1f} MB of JSON")
    v2, _ = view_json(target, f"/api/v1/traces/{tid}?offset={PAGE}")
    # Children by start then id: position 10,000 is the child with id 10,001.
    if v2["spans"][0]["span_id"] != "%016x" % (PAGE + 1):
        raise Failed(f"the second page starts at {v2['spans'][0]['span_id']}")
    status, html = view(target, f"/traces/{tid}")
    if status != 200 or b"190,001</span> left out" not in html:
        raise Failed(f"the page answered {status} without saying 190,001 were left out")
    status, _ = view(target, f"/api/v1/traces/{tid}?limit=20000")
    if status != 400:
        raise Failed(f"a limit over [trace_view] max_spans answered {status}")
    health = watch.finish()
    return (f"200,001 spans: a view is {n / 1e6:.1f} MB JSON / {len(html) / 1e6:.1f} MB HTML, "
            f"190,001 left out, page 2 by offset; {health}; {target.still_up()}")


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, payload):
    return bytes([num << 3 | 2]) + varint(len(payload)) + payload


def nested_protobuf(depth):
    """An export request with one span whose attribute is an AnyValue `depth` arrays deep,
    built from the inside out with per-level headers (linear time)."""
    leaf = bytes([3 << 3]) + varint(7)  # AnyValue.int_value = 7
    headers, length = [], len(leaf)
    for _ in range(depth):
        inner = bytes([1 << 3 | 2]) + varint(length)  # ArrayValue.values
        h = bytes([5 << 3 | 2]) + varint(len(inner) + length) + inner  # AnyValue.array_value
        length += len(h)
        headers.append(h)
    value = b"".join(reversed(headers)) + leaf
    kv = field(1, b"deep") + field(2, value)
    t = time.time_ns()
    sp = (field(1, bytes.fromhex(trace_id())) + field(2, bytes.fromhex("%016x" % 1))
          + field(5, b"deep") + bytes([7 << 3 | 1]) + t.to_bytes(8, "little")
          + bytes([8 << 3 | 1]) + (t + 1000).to_bytes(8, "little") + field(9, kv))
    return field(1, field(2, field(2, sp)))


def deep_any_value(target):
    body = nested_protobuf(100_000)
    watch = Watch(target)
    status, _, out = target.request("POST", f"http://{target.otlp_http}/v1/traces", body,
                                    {"Content-Type": "application/x-protobuf"}, timeout=60,
                                    token=False)
    if status != 400 or b"nested too deep" not in out:
        raise Failed(f"a 100,000-deep AnyValue over protobuf answered {status}: {out[:200]!r}")
    deep = '{"intValue":7}'
    deep = '{"arrayValue":{"values":[' * 100_000 + deep + "]}}" * 100_000
    js = ('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"%s","spanId":"0000000000000001",'
          '"name":"deep","attributes":[{"key":"deep","value":%s}]}]}]}]}' % (trace_id(), deep))
    status, _, out2 = target.request("POST", f"http://{target.otlp_http}/v1/traces", js.encode(),
                                     {"Content-Type": "application/json"}, timeout=60, token=False)
    if status != 400 or b"recursion limit exceeded" not in out2:
        raise Failed(f"a 100,000-deep AnyValue over JSON answered {status}: {out2[:200]!r}")
    health = watch.finish()
    return (f"{len(body) / 1e6:.1f} MB protobuf and {len(js) / 1e6:.1f} MB JSON refused with 400 "
            f"naming the fixed limit; {health}; {target.still_up()}")


PROBES = [
    ("a 20,000-deep chain viewed by API and page", deep_chain),
    ("a trace of 200,001 spans capped and paged", wide_trace),
    ("an AnyValue nested 100,000 deep over OTLP/HTTP", deep_any_value),
]
