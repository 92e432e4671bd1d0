//! [`DecisionAttributeProcessor`]: the span processor that puts a context's decisions and lane
//! tag where the collector reads them (the span attributes `x-deploy-channel-type`, domain
//! §2, and `x-deploy-lane`, §7.1), as the OpenTelemetry baggage span processors do.

use std::time::Duration;

use dyeline_model::decision::BAGGAGE_KEY;
use dyeline_model::lane::TAG_KEY;
use opentelemetry::baggage::BaggageExt;
use opentelemetry::{Context, KeyValue};

/// A span processor that copies the baggage entries `x-deploy-channel-type` and
/// `x-deploy-lane` of the context a span starts in into the span attributes of the same
/// names, where the collector reads the decisions (domain §2, first source) and the lane tag
/// (§7.1, first carrier).
#[derive(Debug, Default)]
pub struct DecisionAttributeProcessor;

impl opentelemetry_sdk::trace::SpanProcessor for DecisionAttributeProcessor {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &Context) {
        use opentelemetry::trace::Span as _;
        for key in [BAGGAGE_KEY, TAG_KEY] {
            if let Some(v) = cx.baggage().get(key) {
                span.set_attribute(KeyValue::new(key, v.as_str().to_owned()));
            }
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
