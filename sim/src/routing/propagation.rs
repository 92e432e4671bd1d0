//! W3C context over HTTP headers: `traceparent`/`tracestate` ([`TraceContextPropagator`]) and
//! `baggage` ([`BaggagePropagator`]); and the decisions a context carries, its baggage entry
//! `x-deploy-channel-type` ([`decisions_of`], [`with_decisions`]).
//!
//! [`TraceContextPropagator`]: opentelemetry_sdk::propagation::TraceContextPropagator
//! [`BaggagePropagator`]: opentelemetry_sdk::propagation::BaggagePropagator

use std::collections::HashMap;

use dyeline_model::Decisions;
use dyeline_model::decision::BAGGAGE_KEY;
use opentelemetry::Context;
use opentelemetry::baggage::{Baggage, BaggageExt};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};

/// Headers as lower-case name → value.
pub type Headers = HashMap<String, String>;

struct Map<'a>(&'a mut Headers);
impl Injector for Map<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_ascii_lowercase(), value);
    }
}
struct Read<'a>(&'a Headers);
impl Extractor for Read<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(&key.to_ascii_lowercase()).map(String::as_str)
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// The headers carrying `cx`: `traceparent` (and `tracestate`), plus `baggage` when
/// `with_baggage` (a node that does not propagate baggage passes false).
pub fn inject(cx: &Context, with_baggage: bool) -> Headers {
    let mut h = Headers::new();
    TraceContextPropagator::new().inject_context(cx, &mut Map(&mut h));
    if with_baggage {
        BaggagePropagator::new().inject_context(cx, &mut Map(&mut h));
    }
    h
}

/// The context in `headers`: the remote parent span and, when `with_baggage`, the
/// baggage.
pub fn extract(headers: &Headers, with_baggage: bool) -> Context {
    let cx = TraceContextPropagator::new().extract(&Read(headers));
    if with_baggage {
        BaggagePropagator::new().extract_with_context(&cx, &Read(headers))
    } else {
        cx
    }
}

/// Lower-cased copy of an HTTP header map (non-text values skipped).
pub fn from_http(map: &http::HeaderMap) -> Headers {
    map.iter()
        .filter_map(|(k, v)| Some((k.as_str().to_ascii_lowercase(), v.to_str().ok()?.to_owned())))
        .collect()
}

/// The decisions in `cx`'s baggage (empty when it carries none).
pub fn decisions_of(cx: &Context) -> Decisions {
    cx.baggage()
        .get(BAGGAGE_KEY)
        .map(|v| Decisions::parse(v.as_str()))
        .unwrap_or_default()
}

/// `cx` with its baggage entry `x-deploy-channel-type` set to `decisions` (other baggage
/// kept; the entry removed when there is no decision).
pub fn with_decisions(cx: &Context, decisions: &Decisions) -> Context {
    let mut b: Baggage = cx
        .baggage()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if decisions.is_empty() {
        b.remove(BAGGAGE_KEY);
    } else {
        b.insert(BAGGAGE_KEY, decisions.encode());
    }
    cx.with_baggage(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::propagation;
    use dyeline_model::Color;

    #[test]
    fn baggage_round_trip_through_headers() {
        let mut d = Decisions::default();
        d.insert("trade", Color::Blue);
        d.insert("pay", Color::Green);
        let cx = with_decisions(&Context::new(), &d);
        let h = propagation::inject(&cx, true);
        let back = propagation::extract(&h, true);
        assert_eq!(decisions_of(&back).encode(), "trade=blue&pay=green");
        let dropped = propagation::extract(&propagation::inject(&cx, false), true);
        assert!(decisions_of(&dropped).is_empty());
    }
}
