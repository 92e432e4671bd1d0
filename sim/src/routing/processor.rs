//! [`DecisionAttributeProcessor`]: the span processor that puts a context's decisions where
//! the collector reads them (the span attribute `x-deploy-channel-type`, domain §2).

use std::time::Duration;

use dyeline_model::decision::BAGGAGE_KEY;
use opentelemetry::baggage::BaggageExt;
use opentelemetry::{Context, KeyValue};

/// A span processor that copies the baggage entry `x-deploy-channel-type` of the context a
/// span starts in into the span attribute of the same name, where the collector reads the
/// decisions (domain §2, first source).
#[derive(Debug, Default)]
pub struct DecisionAttributeProcessor;

impl opentelemetry_sdk::trace::SpanProcessor for DecisionAttributeProcessor {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &Context) {
        use opentelemetry::trace::Span as _;
        if let Some(v) = cx.baggage().get(BAGGAGE_KEY) {
            span.set_attribute(KeyValue::new(BAGGAGE_KEY, v.as_str().to_owned()));
        }
    }

    fn on_end(&self, _span: opentelemetry_sdk::trace::SpanData) {}

    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> opentelemetry_sdk::error::OTelSdkResult {
        Ok(())
    }
}
