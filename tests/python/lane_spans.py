"""Export spans carrying lane tags with the real OpenTelemetry Python SDK (domain 7.1).

A seed-001 style gray request: the gateway (a base instance) receives the header `gray: true`
(captured as `http.request.header.gray`, a string array, mapped by the user carrier of
`--config`), puts `x-deploy-lane=gray` in the W3C baggage and calls order; order (host
`dworder-gray-v1.0.2`: gray by the host-name pattern rule) extracts it, and the
`BaggageSpanProcessor` copies the member onto its spans as `x-deploy-lane`; inventory
(`deploy.lane = Gray2`) has no baggage processor and captures the whole baggage header as
`http.request.header.baggage` (the SDK's own encoding, other members percent-encoded). Then a
request with `gray: maybe` (a malformed carrier) and one with no carrier.

Prints one JSON object per span with what the collector must store.
"""

import argparse
import json

from opentelemetry import baggage, context, propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.processor.baggage import ALLOW_ALL_BAGGAGE_KEYS, BaggageSpanProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

SERVER, CLIENT = trace.SpanKind.SERVER, trace.SpanKind.CLIENT


def provider(endpoint, attrs, copy_baggage):
    p = TracerProvider(resource=Resource.create(attrs))
    if copy_baggage:
        # Before the exporter: it sets the attributes when a span starts.
        p.add_span_processor(BaggageSpanProcessor(ALLOW_ALL_BAGGAGE_KEYS))
    p.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    a = ap.parse_args()
    gateway = provider(a.endpoint, {"service.name": "gateway", "service.instance.id": "gw-py-1"}, True)
    order = provider(
        a.endpoint,
        {"service.name": "order", "service.instance.id": "order-py-gray", "host.name": "dworder-gray-v1.0.2"},
        True,
    )
    inventory = provider(
        a.endpoint,
        {"service.name": "inventory", "service.instance.id": "inventory-py-1", "deploy.lane": "Gray2"},
        False,
    )
    gt, ot, it = (p.get_tracer("dyeline-e2e") for p in (gateway, order, inventory))
    lanes = {
        "gateway": ("gw-py-1", "base", "default"),
        "order": ("order-py-gray", "gray", "host.name"),
        "inventory": ("inventory-py-1", "gray2", "deploy.lane"),
    }
    out = []

    def record(span, app, tag, source, malformed):
        c = span.get_span_context()
        instance, lane, rule = lanes[app]
        out.append(dict(trace_id=format(c.trace_id, "032x"), span_id=format(c.span_id, "016x"), app=app,
                        instance=instance, lane=lane, rule=rule, tag=tag, source=source, malformed=malformed))

    # The gray request.
    with gt.start_as_current_span("GET /api/order", kind=SERVER,
                                  attributes={"http.request.header.gray": ("true",)}) as entry:
        token = context.attach(baggage.set_baggage("user.id", "alice@example.com"))
        token2 = context.attach(baggage.set_baggage("x-deploy-lane", "gray"))
        with gt.start_as_current_span("POST order", kind=CLIENT) as call:
            headers = {}
            propagate.inject(headers)
        context.detach(token2)
        context.detach(token)
    # order: the baggage processor copies x-deploy-lane from the extracted baggage.
    with ot.start_as_current_span("POST /order", context=propagate.extract(headers), kind=SERVER) as o:
        pass
    # inventory: no baggage processor; the whole header captured.
    with it.start_as_current_span("reserve", context=propagate.extract(headers), kind=SERVER,
                                  attributes={"http.request.header.baggage": (headers["baggage"],)}) as inv:
        pass
    record(entry, "gateway", "gray", "http.request.header.gray", 0)
    record(call, "gateway", "gray", "x-deploy-lane", 0)
    record(o, "order", "gray", "x-deploy-lane", 0)
    record(inv, "inventory", "gray", "http.request.header.baggage", 0)

    # A header value the carrier's map does not know: counted, no tag.
    with gt.start_as_current_span("GET /api/order", kind=SERVER,
                                  attributes={"http.request.header.gray": ("maybe",)}) as bad:
        pass
    record(bad, "gateway", None, None, 1)
    # A lane id that breaks the grammar in baggage, then the header maps to base.
    token = context.attach(baggage.set_baggage("x-deploy-lane", "gray_v2"))
    with ot.start_as_current_span("POST /order", kind=SERVER,
                                  attributes={"http.request.header.gray": ("false",)}) as base:
        pass
    context.detach(token)
    record(base, "order", "base", "http.request.header.gray", 1)
    # No carrier at all.
    with ot.start_as_current_span("GET /health", kind=SERVER) as plain:
        pass
    record(plain, "order", None, None, 0)

    for p in (gateway, order, inventory):
        p.shutdown()
    for o in out:
        print(json.dumps(o))


if __name__ == "__main__":
    main()
