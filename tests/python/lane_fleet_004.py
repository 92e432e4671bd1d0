"""A seed-004 style gray release run by the real OpenTelemetry Python SDK (domain 7): several
gray environments, MQ, fallback and failover. Calls are RPC spans made as an RPC
instrumentation makes them (a CLIENT span, the context injected into the call's attachments, a
SERVER span under the extracted context), messages as a messaging instrumentation makes them
(a PRODUCER span, the context injected into the message's properties, a CONSUMER span under
it). Every instance has its own TracerProvider and resource, and a BaggageSpanProcessor.

- union-proxy `proxy-1` (base): the access layer; it picks each request's environment and puts
  it in the baggage as `x-deploy-lane` before calling on (its own SERVER span is untagged);
- union-user `user-1` (base) and `user-g1` (Dubbo tag `gray1`);
- union-order `order-g1` (`gray1`) only: no base instance;
- union-notify: consumer `notify-1` (base) and `notify-g1` (`gray1`), idle: present only by its
  PeriodicExportingMetricReader's exports, which start after request ma.

Requests: r (base, to order-g1), ma (a gray1 message consumed by notify-1 before notify-g1
exists), then with notify-g1 exporting: mb (the same message), f (gray1: user-g1 fails, the
proxy retries on user-1), w (gray2, served by user-g1).

Prints one JSON object: per request id and role the span ({"trace_id", "span_id"}), and
"metrics": the data point times notify-g1 exported.
"""

import argparse
import json
import time

from opentelemetry import baggage, context, propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.processor.baggage import ALLOW_ALL_BAGGAGE_KEYS, BaggageSpanProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

from idle_metrics import IdleMetrics

ids = {}


def resource(app, instance, tag):
    attrs = {"service.name": app, "service.instance.id": instance}
    if tag:
        attrs["dubbo.tag"] = tag  # exported where the instance joins its gray environment
    return Resource.create(attrs)


class Instance:
    def __init__(self, endpoint, app, instance, tag=None):
        self.provider = TracerProvider(resource=resource(app, instance, tag))
        self.provider.add_span_processor(BaggageSpanProcessor(ALLOW_ALL_BAGGAGE_KEYS))
        self.provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint + "/v1/traces")))
        self.tracer = self.provider.get_tracer("dyeline-e2e")


def record(rid, role, span):
    c = span.get_span_context()
    ids.setdefault(rid, {})[role] = {"trace_id": format(c.trace_id, "032x"), "span_id": format(c.span_id, "016x")}


def rpc(caller, callee, rid, role, fail=False):
    """A call from the current context: CLIENT span, attachments, SERVER span."""
    with caller.tracer.start_as_current_span("UserService/query", kind=SpanKind.CLIENT,
                                             attributes={"rpc.system": "apache_dubbo"}):
        attachments = {}
        propagate.inject(attachments)
    with callee.tracer.start_as_current_span("UserService/query", context=propagate.extract(attachments),
                                             kind=SpanKind.SERVER,
                                             attributes={"rpc.system": "apache_dubbo"}) as s:
        if fail:
            s.set_status(Status(StatusCode.ERROR, "gray version failed"))
        record(rid, role, s)


def publish_and_consume(producer, consumer, rid):
    with producer.tracer.start_as_current_span("orders send", kind=SpanKind.PRODUCER,
                                               attributes={"messaging.system": "rocketmq"}):
        properties = {}
        propagate.inject(properties)
    with consumer.tracer.start_as_current_span(
            "orders process", context=propagate.extract(properties), kind=SpanKind.CONSUMER,
            attributes={"messaging.system": "rocketmq", "messaging.consumer.group.name": "notify-base"}) as s:
        record(rid, "consumer", s)


def request(proxy, rid, lane, then):
    """The access layer: a root SERVER span; the chosen environment goes into the baggage."""
    with proxy.tracer.start_as_current_span("GET /union", kind=SpanKind.SERVER) as root:
        record(rid, "proxy", root)
        token = context.attach(baggage.set_baggage("x-deploy-lane", lane)) if lane else None
        try:
            then()
        finally:
            if token is not None:
                context.detach(token)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True, help="http://host:port of the OTLP/HTTP receiver")
    e = ap.parse_args().endpoint
    proxy = Instance(e, "union-proxy", "proxy-1")
    user, user_g1 = Instance(e, "union-user", "user-1"), Instance(e, "union-user", "user-g1", "gray1")
    order_g1 = Instance(e, "union-order", "order-g1", "gray1")
    notify = Instance(e, "union-notify", "notify-1")

    request(proxy, "r", None, lambda: rpc(proxy, order_g1, "r", "order"))
    request(proxy, "ma", "gray1", lambda: publish_and_consume(proxy, notify, "ma"))

    idle = IdleMetrics(e, resource("union-notify", "notify-g1", "gray1"))
    idle.wait_for_export_after(0)

    request(proxy, "mb", "gray1", lambda: publish_and_consume(proxy, notify, "mb"))

    def failover():
        rpc(proxy, user_g1, "f", "gray", fail=True)
        rpc(proxy, user, "f", "retry")

    request(proxy, "f", "gray1", failover)
    request(proxy, "w", "gray2", lambda: rpc(proxy, user_g1, "w", "user"))
    idle.wait_for_export_after(time.time_ns())

    exported = idle.shutdown()
    for i in [proxy, user, user_g1, order_g1, notify]:
        i.provider.shutdown()
    print(json.dumps({"requests": ids, "metrics": exported}))


if __name__ == "__main__":
    main()
