//! Each instance's OpenTelemetry SDK: a tracer provider (resource `service.name`,
//! `service.instance.id`, `host.name`, `service.version`) with a batch processor exporting
//! OTLP/gRPC to the collector, after the [`DecisionAttributeProcessor`].

use std::net::SocketAddr;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider,
};

use super::error::FleetError;
use crate::routing::DecisionAttributeProcessor;

/// One instance's tracer provider, its tracer and the `service.version` its resource says.
pub(super) struct Telemetry {
    pub(super) provider: SdkTracerProvider,
    pub(super) tracer: SdkTracer,
    pub(super) version: String,
}

/// A tracer provider for `instance` of `app` at `version`, exporting OTLP/gRPC to
/// `collector` in batches, after the [`DecisionAttributeProcessor`].
pub(super) fn telemetry(
    collector: SocketAddr,
    app: &str,
    instance: &str,
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
        .with_resource(
            Resource::builder_empty()
                .with_service_name(app.to_owned())
                .with_attributes([
                    KeyValue::new("service.instance.id", instance.to_owned()),
                    KeyValue::new("host.name", format!("{instance}.host")),
                    KeyValue::new("service.version", version.to_owned()),
                ])
                .build(),
        )
        .build();
    let tracer = provider.tracer("dyeline-sim");
    Ok(Telemetry {
        provider,
        tracer,
        version: version.to_owned(),
    })
}
