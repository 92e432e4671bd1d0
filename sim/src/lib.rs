//! The demo of `dyeline demo` (issues 6, 25): a fleet instrumented with the real OpenTelemetry
//! SDK walks a scripted multi-channel blue-green release, with a gray release beside it,
//! against a running Dyeline.
//!
//! - [`routing`]: the colour-sticky, lane-aware routing library a traffic SDK implements
//!   (domain §2, §5, §7), reusable by any Rust service;
//! - [`fleet`]: the apps and instances, their HTTP servers, tracer providers, MQ topic and
//!   JOB, and the faults they can show;
//! - [`script`]: the release, driven through the control API at a chosen speed.

pub mod fleet;
pub mod routing;
pub mod script;
