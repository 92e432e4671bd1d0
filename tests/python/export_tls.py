"""Export spans with the real OpenTelemetry Python SDK over OTLP with TLS and a bearer token,
configured the way users configure it: the standard environment variables
(OTEL_EXPORTER_OTLP_CERTIFICATE for the CA, OTEL_EXPORTER_OTLP_HEADERS for the token), set by
the caller. Prints one JSON object: each export's result and the trace ids sent."""

import argparse
import json

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter


class Recording(SpanExporter):
    """Keeps the result of each export of the real exporter it wraps."""

    def __init__(self, inner):
        self.inner = inner
        self.results = []

    def export(self, spans):
        r = self.inner.export(spans)
        self.results.append(r.name)
        return r

    def shutdown(self):
        self.inner.shutdown()

    def force_flush(self, timeout_millis=30000):
        return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protocol", choices=["grpc", "http"], required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--traces", type=int, default=3)
    a = ap.parse_args()
    if a.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    exporter = Recording(OTLPSpanExporter(endpoint=a.endpoint, timeout=10))
    p = TracerProvider(resource=Resource.create({"service.name": "order", "host.name": "order-blue-1"}))
    p.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = p.get_tracer("dyeline-e2e")
    traces = []
    for i in range(a.traces):
        with tracer.start_as_current_span("GET /order/%d" % i, kind=trace.SpanKind.SERVER,
                                          attributes={"x-deploy-channel-type": "trade=blue"}) as s:
            pass
        traces.append(format(s.get_span_context().trace_id, "032x"))
    p.shutdown()
    print(json.dumps({"results": exporter.results, "traces": traces}))


if __name__ == "__main__":
    main()
