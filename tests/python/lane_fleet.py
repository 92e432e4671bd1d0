"""A seed-001 style gray release run by the real OpenTelemetry Python SDK (domain 7).

A small fleet in one process, each instance its own TracerProvider and resource and its own HTTP
server (wsgiref) wrapped by the real WSGI instrumentation, which captures the request header
`gray` as `http.request.header.gray` (OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SERVER_REQUEST):

- gateway `gw-1` (base): the gateway receives `gray: true` from the client; it stains the
  request with `x-deploy-lane=gray` in the W3C baggage and calls order;
- order `order-1` (base) and `order-gray-1` (gray: Nacos metadata `nacos.metadata.gray=true`
  exported as a resource attribute); their BaggageSpanProcessor copies `x-deploy-lane` from the
  extracted baggage onto their spans; both call pricing-1;
- pricing `pricing-1` (base), with a BaggageSpanProcessor too;
- pricing `pricing-gray-1` (gray by its host name `dwpricing-gray-v2.1.0`): idle, it serves
  nothing and sends no spans; only its PeriodicExportingMetricReader's OTLP metrics exports make
  it present. It starts after phase A.

Phase A (no gray pricing yet): a base request, then a gray request (served by order-gray-1,
then by pricing-1: no gray pricing exists, a fallback). Phase B (pricing-gray-1 exporting): the
same gray request (pricing-1 serves it while a gray pricing is present: a leak), a base request
the gateway sends to order-gray-1 (base traffic in a lane), and a base request. The script waits
for a metrics export before phase B and another after it.

Prints one JSON object: per request (a1, a2, b1, b2, b3) and app, the SERVER span that served
it ({"trace_id", "span_id", "instance"}); and "metrics": the data point times pricing-gray-1
exported.
"""

import argparse
import json
import os
import threading
import time
import urllib.parse
import urllib.request
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

# What the deployment sets: capture the gateway's `gray` header (before the instrumentation loads).
os.environ["OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SERVER_REQUEST"] = "gray"

from opentelemetry import baggage, context, propagate, trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware  # noqa: E402
from opentelemetry.processor.baggage import ALLOW_ALL_BAGGAGE_KEYS, BaggageSpanProcessor  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

from idle_metrics import IdleMetrics  # noqa: E402

CLIENT = trace.SpanKind.CLIENT
served = {}  # request id -> app -> the SERVER span that served it


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def resource(app, instance, **attrs):
    return Resource.create({"service.name": app, "service.instance.id": instance, **attrs})


def tracer_provider(endpoint, res):
    p = TracerProvider(resource=res)
    # Before the exporter: it sets the attributes when a span starts.
    p.add_span_processor(BaggageSpanProcessor(ALLOW_ALL_BAGGAGE_KEYS))
    p.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint + "/v1/traces")))
    return p


class Instance:
    """One instance: an HTTP server whose handler `handle(instance, query)` may call others."""

    def __init__(self, endpoint, app, instance, handle, **attrs):
        self.app, self.instance = app, instance
        self.provider = tracer_provider(endpoint, resource(app, instance, **attrs))
        self.tracer = self.provider.get_tracer("dyeline-e2e")

        def wsgi(environ, start_response):
            query = dict(urllib.parse.parse_qsl(environ.get("QUERY_STRING", "")))
            ctx = trace.get_current_span().get_span_context()
            served.setdefault(query["rid"], {})[app] = {
                "trace_id": format(ctx.trace_id, "032x"),
                "span_id": format(ctx.span_id, "016x"),
                "instance": instance,
            }
            handle(self, environ, query)
            start_response("200 OK", [("content-type", "text/plain")])
            return [b"ok"]

        app_with_otel = OpenTelemetryMiddleware(wsgi, tracer_provider=self.provider)
        self.server = make_server("127.0.0.1", 0, app_with_otel, WSGIServer, Quiet)
        self.url = "http://127.0.0.1:%d" % self.server.server_port
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def call(self, target, query):
        """A CLIENT span calling `target`, the context (trace and baggage) injected."""
        with self.tracer.start_as_current_span("GET " + target.app, kind=CLIENT):
            headers = {}
            propagate.inject(headers)
            url = target.url + "/?" + urllib.parse.urlencode(query)
            urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10).read()

    def close(self):
        self.server.shutdown()
        self.provider.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True, help="http://host:port of the OTLP/HTTP receiver")
    a = ap.parse_args()
    e = a.endpoint

    pricing = Instance(e, "pricing", "pricing-1", lambda me, env, q: None)
    order_handler = lambda me, env, q: me.call(pricing, q)  # noqa: E731
    orders = {
        "base": Instance(e, "order", "order-1", order_handler),
        "gray": Instance(e, "order", "order-gray-1", order_handler, **{"nacos.metadata.gray": "true"}),
    }

    def gateway_handler(me, environ, q):
        # Seed 001's gateway: `gray: true` makes a gray request, stained in the baggage.
        ctx = context.get_current()
        if environ.get("HTTP_GRAY") == "true":
            ctx = baggage.set_baggage("x-deploy-lane", "gray", ctx)
        token = context.attach(ctx)
        try:
            me.call(orders[q["order"]], q)
        finally:
            context.detach(token)

    gateway = Instance(e, "gateway", "gw-1", gateway_handler)

    def request(rid, gray, order):
        headers = {"gray": "true"} if gray else {}
        url = gateway.url + "/api/price?" + urllib.parse.urlencode({"rid": rid, "order": order})
        urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10).read()

    request("a1", False, "base")
    request("a2", True, "gray")

    # The idle gray pricing instance: metrics only, exported every 200 ms.
    idle = IdleMetrics(e, resource("pricing", "pricing-gray-1", **{"host.name": "dwpricing-gray-v2.1.0"}))
    idle.wait_for_export_after(0)

    request("b1", True, "gray")
    request("b2", False, "gray")
    request("b3", False, "base")
    idle.wait_for_export_after(time.time_ns())

    exported = idle.shutdown()
    for i in [gateway, pricing, *orders.values()]:
        i.close()
    print(json.dumps({"requests": served, "metrics": exported}))


if __name__ == "__main__":
    main()
