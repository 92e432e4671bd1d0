"""The OpenTelemetry Python SDK set up as the end-to-end scripts use it: a tracer provider per
service and host, exporting each span as it ends over OTLP gRPC or HTTP."""

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor


def exporter(protocol, endpoint):
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=endpoint, insecure=True)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoint)


def provider(protocol, endpoint, service, host):
    p = TracerProvider(
        resource=Resource.create({"service.name": service, "host.name": host, "service.instance.id": host})
    )
    p.add_span_processor(SimpleSpanProcessor(exporter(protocol, endpoint)))
    return p
