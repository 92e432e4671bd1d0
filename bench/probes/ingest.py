"""Ingest probes (issue 23, defects 5 and 9): spans whose baggage holds 100,000 decision pairs,
sent at once, must not freeze the receivers and are stored with at most 180 decisions; a gRPC
message past the body limit (plain, or gzip inflating past it) must answer RESOURCE_EXHAUSTED
without RetryInfo, and be counted."""

import json
import os
import threading
import time

from probes.common import Failed

PAIRS = 100_000
MAX_PAIRS = 180  # W3C baggage's member limit, as Decisions::parse applies it
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _metric(target, series):
    status, _, body = target.request("GET", target.url("/metrics"), timeout=10)
    if status != 200:
        raise Failed(f"/metrics answered {status}")
    for line in body.decode().splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0


def _span_json(trace_id, span_id, value):
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "probe-ingest"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": trace_id, "spanId": span_id, "name": "huge baggage",
            "startTimeUnixNano": str(time.time_ns() - 1_000_000),
            "endTimeUnixNano": str(time.time_ns()),
            "attributes": [{"key": "baggage.x-deploy-channel-type",
                            "value": {"stringValue": value}}],
        }]}],
    }]}).encode()


def _watch_health(target, stop, seen):
    while not stop.is_set():
        try:
            seen.append(target.healthz_seconds())
        except Failed as e:
            seen.append(e)
        time.sleep(0.1)


def huge_decision_values(target):
    """Two spans of 100,000 `cN=blue` pairs (1.1 MB each) over OTLP/JSON at once, /healthz polled
    every 100 ms meanwhile."""
    value = "&".join(f"c{i}=blue" for i in range(PAIRS))
    trace_id = os.urandom(16).hex()
    truncated_before = _metric(target, "dyeline_receiver_decisions_truncated_total")
    stop, seen = threading.Event(), []
    watch = threading.Thread(target=_watch_health, args=(target, stop, seen))
    watch.start()
    statuses = [None, None]

    def send(i):
        body = _span_json(trace_id, f"{i + 1:016x}", value)
        statuses[i] = target.request(
            "POST", f"http://{target.otlp_http}/v1/traces", body,
            {"Content-Type": "application/json"}, timeout=60, token=False)[0]

    started = time.monotonic()
    senders = [threading.Thread(target=send, args=(i,)) for i in range(2)]
    for t in senders:
        t.start()
    for t in senders:
        t.join()
    took = time.monotonic() - started
    time.sleep(0.3)
    stop.set()
    watch.join()
    slow = [s for s in seen if isinstance(s, Failed)]
    if slow:
        raise Failed(f"/healthz failed {len(slow)} of {len(seen)} probes during the exports: {slow[0]}")
    if statuses != [200, 200]:
        raise Failed(f"exports answered {statuses}")
    truncated = _metric(target, "dyeline_receiver_decisions_truncated_total") - truncated_before
    if truncated != 2:
        raise Failed(f"dyeline_receiver_decisions_truncated_total grew by {truncated}, not 2")
    status, _, body = target.request(
        "POST", target.url("/api/v1/sql"),
        json.dumps({"sql": f"SELECT decisions FROM spans WHERE trace_id = '{trace_id}'"}).encode(),
        {"Content-Type": "application/json"})
    if status != 200:
        raise Failed(f"SQL answered {status}: {body[:200]!r}")
    sizes = sorted(len(r[0] or {}) for r in json.loads(body)["rows"])
    if sizes != [MAX_PAIRS, MAX_PAIRS]:
        raise Failed(f"stored decisions per span: {sizes}, not [{MAX_PAIRS}, {MAX_PAIRS}]")
    worst = max(seen) * 1000 if seen else 0
    return (f"2 x {PAIRS} pairs in {took:.2f} s, {MAX_PAIRS} decisions kept each, "
            f"healthz worst {worst:.0f} ms over {len(seen)} probes; {target.still_up(max_rss_mb=1024)}")


def _oversized_grpc(target, compression):
    """One raw gRPC Export of a span with a 20 MiB attribute (past the default 16 MiB)."""
    try:
        import grpc
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError as e:
        raise Failed(f"grpcio / opentelemetry-proto not installed (tests/requirements.txt): {e}") from e
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = os.urandom(16), os.urandom(8), "oversized"
    attribute = span.attributes.add()
    attribute.key, attribute.value.string_value = "padding", "a" * (20 * 1024 * 1024)
    body = request.SerializeToString()
    refused_before = _metric(target, 'dyeline_receiver_requests_refused_total{reason="too_large"}')
    with grpc.insecure_channel(target.otlp_grpc, options=[("grpc.max_send_message_length", -1)]) as ch:
        export = ch.unary_unary(EXPORT)
        try:
            export(body, timeout=30, compression=compression)
        except grpc.RpcError as e:
            code, details, trailers = e.code(), e.details(), dict(e.trailing_metadata() or ())
        else:
            raise Failed("a 20 MiB message was accepted")
    if code != grpc.StatusCode.RESOURCE_EXHAUSTED:
        raise Failed(f"answered {code.name} ({details}), not RESOURCE_EXHAUSTED")
    if "grpc-status-details-bin" in trailers or "google.rpc.retryinfo-bin" in trailers:
        raise Failed("the size refusal carries status details (RetryInfo would make it retryable)")
    if "max_body_size" not in (details or ""):
        raise Failed(f"the message does not name the setting: {details!r}")
    refused = _metric(target, 'dyeline_receiver_requests_refused_total{reason="too_large"}') - refused_before
    if refused != 1:
        raise Failed(f"requests_refused{{too_large}} grew by {refused}, not 1")
    return f"RESOURCE_EXHAUSTED, no RetryInfo, counted once: {details!r}; {target.still_up(max_rss_mb=1024)}"


def oversized_grpc_message(target):
    return _oversized_grpc(target, None)


def oversized_grpc_gzip_message(target):
    import grpc

    return _oversized_grpc(target, grpc.Compression.Gzip)


PROBES = [
    ("two spans of 100,000 decision pairs at once", huge_decision_values),
    ("oversized gRPC message", oversized_grpc_message),
    ("gzip gRPC message inflating past the limit", oversized_grpc_gzip_message),
]
