"""An idle instance kept present by its metrics alone (domain 7.1, Presence): the real SDK's
PeriodicExportingMetricReader with an OTLP/HTTP exporter and an observable gauge, recording the
data point times of each export that succeeded."""

import threading

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.metrics import Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExportResult, PeriodicExportingMetricReader


class IdleMetrics:
    def __init__(self, endpoint, resource, interval_ms=200):
        """Starts exporting `resource`'s metrics to `endpoint` (http://host:port) every
        `interval_ms`."""
        self._exported = []
        self._exports = threading.Condition()
        exporter = OTLPMetricExporter(endpoint=endpoint + "/v1/metrics")
        real_export = exporter.export

        def export(data, *args, **kwargs):
            times = {p.time_unix_nano for rm in data.resource_metrics for sm in rm.scope_metrics
                     for m in sm.metrics for p in m.data.data_points}
            result = real_export(data, *args, **kwargs)
            if result == MetricExportResult.SUCCESS:
                with self._exports:
                    self._exported.extend(times)
                    self._exports.notify_all()
            return result

        exporter.export = export
        reader = PeriodicExportingMetricReader(exporter, export_interval_millis=interval_ms)
        self._meters = MeterProvider(resource=resource, metric_readers=[reader])
        # An idle process still reports its runtime.
        self._meters.get_meter("dyeline-e2e").create_observable_gauge(
            "process.idle", callbacks=[lambda _options: [Observation(1)]])

    def wait_for_export_after(self, t):
        """Waits until an export with a data point later than `t` (Unix ns) succeeded."""
        with self._exports:
            assert self._exports.wait_for(lambda: any(x > t for x in self._exported), timeout=10), "no export"

    def shutdown(self):
        """Stops exporting; the data point times exported, sorted."""
        self._meters.shutdown()
        return sorted(set(self._exported))
