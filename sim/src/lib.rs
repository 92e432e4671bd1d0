//! The demo of `dyeline demo` (issue 6): a fleet instrumented with the real OpenTelemetry SDK
//! walks a scripted multi-channel blue-green release against a running Dyeline.
//!
//! - [`routing`]: the colour-sticky routing library a traffic SDK implements (domain §2, §5),
//!   reusable by any Rust service.

pub mod routing;
