//! End-to-end tests against the real `dyeline` binary: real OpenTelemetry exporters (Rust and
//! Python), the field cases of `../shared/cases`, bad input, durability, the fixtures, SQL,
//! and the dashboard in headless Chromium.

mod alerts;
mod analyze;
mod bad_input;
mod cases;
mod control;
mod dashboard;
mod demo;
mod durability;
mod fixtures;
mod hardening;
mod otlp_python;
mod otlp_rust;
mod sql;
mod support;
mod util;
