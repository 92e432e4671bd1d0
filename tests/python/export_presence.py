"""An idle gray instance (resource `deploy.lane` = gray) kept present by the real
OpenTelemetry Python SDK: its periodic metrics
exporter (PeriodicExportingMetricReader with a short interval) and a few log records, over
OTLP gRPC or HTTP. No spans.

Prints one JSON object per signal time the collector must record: {"signal": "metrics" |
"logs", "time": <Unix ns>}, read from what the exporters actually sent (each data point's
time_unix_nano; each log record's timestamp, else its observed timestamp), exports that
succeeded only.
"""

import argparse
import json
import time

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExportResult, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExportResult, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource


def exporters(protocol, endpoint):
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        return (OTLPMetricExporter(endpoint=endpoint, insecure=True),
                OTLPLogExporter(endpoint=endpoint, insecure=True))
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return (OTLPMetricExporter(endpoint=endpoint + "/v1/metrics"),
            OTLPLogExporter(endpoint=endpoint + "/v1/logs"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protocol", choices=["grpc", "http"], required=True)
    ap.add_argument("--endpoint", required=True, help="http://host:port")
    ap.add_argument("--instance", required=True)
    ap.add_argument("--interval-ms", type=int, default=300)
    ap.add_argument("--run-ms", type=int, default=1500)
    a = ap.parse_args()
    metric_exporter, log_exporter = exporters(a.protocol, a.endpoint)
    sent = []

    real_export = metric_exporter.export

    def export_metrics(metrics_data, *args, **kwargs):
        times = {p.time_unix_nano
                 for rm in metrics_data.resource_metrics
                 for sm in rm.scope_metrics
                 for m in sm.metrics
                 for p in m.data.data_points}
        result = real_export(metrics_data, *args, **kwargs)
        if result == MetricExportResult.SUCCESS:
            sent.extend(("metrics", t) for t in times)
        return result

    metric_exporter.export = export_metrics

    real_log_export = log_exporter.export

    def export_logs(batch, *args, **kwargs):
        times = {r.log_record.timestamp or r.log_record.observed_timestamp for r in batch}
        result = real_log_export(batch, *args, **kwargs)
        if result == LogRecordExportResult.SUCCESS:
            sent.extend(("logs", t) for t in times)
        return result

    log_exporter.export = export_logs

    resource = Resource.create({
        "service.name": "pricing",
        "service.instance.id": a.instance,
        "host.name": a.instance,
        "deploy.lane": "gray",
    })
    reader = PeriodicExportingMetricReader(metric_exporter, export_interval_millis=a.interval_ms)
    meters = MeterProvider(resource=resource, metric_readers=[reader])
    # An idle process still reports its runtime: an observable gauge, a counter touched once.
    meter = meters.get_meter("dyeline-e2e")
    meter.create_observable_gauge("process.idle", callbacks=[lambda _: []])
    meter.create_counter("process.starts").add(1)
    logs = LoggerProvider(resource=resource)
    logs.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    logger = logs.get_logger("dyeline-e2e")
    # One record with its own time, one with only the time it was observed.
    logger.emit(timestamp=time.time_ns() - 5_000_000_000, body="started")
    logger.emit(body="idle")
    time.sleep(a.run_ms / 1000)
    meters.shutdown()
    logs.shutdown()
    for signal, t in sorted(set(sent)):
        print(json.dumps({"signal": signal, "time": t}))


if __name__ == "__main__":
    main()
