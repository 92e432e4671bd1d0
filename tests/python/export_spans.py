"""Export spans with the real OpenTelemetry Python SDK to a Dyeline collector.

Each trace: order (host order-blue-1) SERVER span carrying x-deploy-channel-type, its CLIENT
child, and an inventory (host inventory-green-1) SERVER grandchild. Prints one JSON object per
span with what the collector must store (ids, parent, service, colour, decisions).
"""

import argparse
import json

from opentelemetry import trace

from sdk import provider


def hexid(v, n):
    return format(v, "0%dx" % n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protocol", choices=["grpc", "http"], required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--traces", type=int, default=10)
    a = ap.parse_args()
    order = provider(a.protocol, a.endpoint, "order", "order-blue-1")
    inventory = provider(a.protocol, a.endpoint, "inventory", "inventory-green-1")
    ot, it = order.get_tracer("dyeline-e2e"), inventory.get_tracer("dyeline-e2e")
    out = []
    for i in range(a.traces):
        decision = "trade=blue&pay=green" if i % 2 == 0 else "trade=green"
        parsed = dict(p.split("=") for p in decision.split("&"))
        with ot.start_as_current_span("GET /order/%d" % i, kind=trace.SpanKind.SERVER,
                                      attributes={"x-deploy-channel-type": decision}) as server:
            with ot.start_as_current_span("call inventory", kind=trace.SpanKind.CLIENT) as client:
                with it.start_as_current_span("reserve", kind=trace.SpanKind.SERVER,
                                              attributes={"x-deploy-channel-type": decision}) as inv:
                    pass
        t = hexid(server.get_span_context().trace_id, 32)
        sid = hexid(server.get_span_context().span_id, 16)
        cid = hexid(client.get_span_context().span_id, 16)
        iid = hexid(inv.get_span_context().span_id, 16)
        out.append(dict(trace_id=t, span_id=sid, parent_span_id="", service="order", color="blue", decisions=parsed))
        out.append(dict(trace_id=t, span_id=cid, parent_span_id=sid, service="order", color="blue", decisions={}))
        out.append(dict(trace_id=t, span_id=iid, parent_span_id=cid, service="inventory", color="green", decisions=parsed))
    order.shutdown()
    inventory.shutdown()
    for o in out:
        print(json.dumps(o))


if __name__ == "__main__":
    main()
