//! Each instance's OpenTelemetry SDK: a tracer provider (resource `service.name`,
//! `service.instance.id`, `host.name`, `service.version`, and a lane instance's marker) with
//! a batch processor exporting OTLP/gRPC to the collector, after the
//! [`DecisionAttributeProcessor`]; and a meter provider exporting one gauge periodically, as a
//! real service's SDK exports its metrics, which keeps an idle instance present (domain §7.1).

use std::net::SocketAddr;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{MeterProvider as _, ObservableGauge};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider,
};

use super::config::LaneMarker;
use super::error::FleetError;
use crate::routing::DecisionAttributeProcessor;

/// One instance's tracer provider, its tracer and the `service.version` its resource says.
pub(super) struct Telemetry {
    pub(super) provider: SdkTracerProvider,
    pub(super) tracer: SdkTracer,
    pub(super) version: String,
}

/// Who an instance is, as its resource says.
#[derive(Clone, Copy, Debug)]
pub(super) struct Identity<'a> {
    pub(super) app: &'a str,
    pub(super) instance: &'a str,
    /// The lane and how it is marked; `None` for a base instance (no marker).
    pub(super) lane: Option<(&'a str, LaneMarker)>,
}

impl Identity<'_> {
    fn resource(&self, version: &str) -> Resource {
        let mut attrs = vec![
            KeyValue::new("service.instance.id", self.instance.to_owned()),
            KeyValue::new("host.name", format!("{}.host", self.instance)),
            KeyValue::new("service.version", version.to_owned()),
        ];
        match self.lane {
            Some((_, LaneMarker::NacosGray)) => {
                attrs.push(KeyValue::new("nacos.metadata.gray", "true"));
            }
            Some((lane, LaneMarker::DeployLane)) => {
                attrs.push(KeyValue::new("deploy.lane", lane.to_owned()));
            }
            None => {}
        }
        Resource::builder_empty()
            .with_service_name(self.app.to_owned())
            .with_attributes(attrs)
            .build()
    }
}

/// An instance's metrics: a meter provider exporting the gauge `dyeline.demo.up` (always 1)
/// every interval, and at its shutdown (the instance's last signal).
pub(super) struct Metrics {
    pub(super) provider: SdkMeterProvider,
    _up: ObservableGauge<u64>,
}

/// The metrics of `who`, exported OTLP/gRPC to `collector` every `interval`.
pub(super) fn metrics(
    collector: SocketAddr,
    who: Identity<'_>,
    interval: Duration,
) -> Result<Metrics, FleetError> {
    let exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_tonic()
        .with_endpoint(format!("http://{collector}"))
        .build()?;
    let reader = PeriodicReader::builder(exporter)
        .with_interval(interval)
        .build();
    let provider = SdkMeterProvider::builder()
        .with_reader(reader)
        .with_resource(who.resource(super::config::V1))
        .build();
    let up = provider
        .meter("dyeline-sim")
        .u64_observable_gauge("dyeline.demo.up")
        .with_description("1 while the instance runs")
        .with_callback(|o| o.observe(1, &[]))
        .build();
    Ok(Metrics { provider, _up: up })
}

/// A tracer provider for `who` at `version`, exporting OTLP/gRPC to `collector` in batches,
/// after the [`DecisionAttributeProcessor`].
pub(super) fn telemetry(
    collector: SocketAddr,
    who: Identity<'_>,
    version: &str,
) -> Result<Telemetry, FleetError> {
    // The tonic exporter must be built inside a tokio runtime (it spawns its connection).
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(format!("http://{collector}"))
        .build()?;
    let batch = BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_max_queue_size(1 << 16)
                .with_max_export_batch_size(1024)
                .with_scheduled_delay(Duration::from_millis(250))
                .build(),
        )
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(DecisionAttributeProcessor)
        .with_span_processor(batch)
        .with_resource(who.resource(version))
        .build();
    let tracer = provider.tracer("dyeline-sim");
    Ok(Telemetry {
        provider,
        tracer,
        version: version.to_owned(),
    })
}
