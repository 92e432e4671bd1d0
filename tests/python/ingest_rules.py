"""Export the cases of domain §1-3's ingest rules that the real OpenTelemetry Python SDK makes.

- A batch consumer: `order` (host order-b1) sends a PRODUCER span; `notify` (host notify-b1)
  starts a CONSUMER span with no parent that names the producer by a span link
  (`tracer.start_span(..., links=[trace.Link(ctx)])`), and a second one linking to a span that
  was never exported.
- The member `x-deploy-channel-type` given more than once: an `order` SERVER span capturing two
  baggage header values (`http.request.header.baggage` as a list), one SERVER span capturing
  one header that carries the member twice.

Prints one JSON object: each case's trace and span ids, lower-case hex.
"""

import argparse
import json

from opentelemetry import trace
from opentelemetry.trace import SpanContext, TraceFlags

from sdk import provider


def ids(span):
    c = span.get_span_context()
    return {"trace_id": format(c.trace_id, "032x"), "span_id": format(c.span_id, "016x")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protocol", choices=["grpc", "http"], required=True)
    ap.add_argument("--endpoint", required=True)
    a = ap.parse_args()
    order = provider(a.protocol, a.endpoint, "order", "order-b1")
    notify = provider(a.protocol, a.endpoint, "notify", "notify-b1")
    ot, nt = order.get_tracer("dyeline-e2e"), notify.get_tracer("dyeline-e2e")
    out = {}

    producer = ot.start_span(
        "publish orders",
        kind=trace.SpanKind.PRODUCER,
        attributes={"messaging.system": "rocketmq", "x-deploy-channel-type": "trade=blue"},
    )
    producer.end()
    out["producer"] = ids(producer)
    consumer = nt.start_span(
        "consume orders",
        kind=trace.SpanKind.CONSUMER,
        attributes={"messaging.system": "rocketmq", "messaging.consumer.group.name": "notify-blue"},
        links=[trace.Link(producer.get_span_context(), {"messaging.batch.index": 0})],
    )
    consumer.end()
    out["consumer"] = ids(consumer)
    never_sent = SpanContext(
        trace_id=0x0DEAD0000000000000000000000000FF,
        span_id=0x0DEAD000000000FF,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    orphan = nt.start_span(
        "consume lost",
        kind=trace.SpanKind.CONSUMER,
        attributes={"messaging.system": "rocketmq"},
        links=[trace.Link(never_sent)],
    )
    orphan.end()
    out["orphan"] = ids(orphan)

    # The captured baggage header: two values (a list), then one value carrying the member twice.
    for case, baggage in [
        ("two_headers", ["x-deploy-channel-type=trade%3Dblue", "u=1,x-deploy-channel-type=trade%3Dgreen%26pay%3Dblue"]),
        ("one_header", "x-deploy-channel-type=pay%3Dgreen, x-deploy-channel-type=pay%3Dblue%26trade%3Dblue"),
    ]:
        span = ot.start_span("GET /" + case, kind=trace.SpanKind.SERVER,
                             attributes={"http.request.header.baggage": baggage})
        span.end()
        out[case] = ids(span)

    order.shutdown()
    notify.shutdown()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
