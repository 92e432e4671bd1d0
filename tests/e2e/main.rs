//! End-to-end tests against the real `dyeline` binary: real OpenTelemetry exporters (Rust and
//! Python; spans, and metrics and logs for presence), the field cases of `../shared/cases`, bad input, durability, the fixtures, SQL,
//! the dashboard in headless Chromium, and deploy/ checked offline.

// The tests' measured figures and the demo's log go to stderr, which libtest shows on failure
// or with --nocapture.
#![allow(clippy::print_stderr)]

mod alerts;
mod analyze;
mod architecture;
mod bad_input;
mod browser;
mod cases;
mod cli;
mod cluster_alerts;
mod cluster_cutoff;
mod cluster_ingest;
mod cluster_shares;
mod compaction;
mod control;
mod control_cluster;
mod dashboard;
mod dashboard_i18n;
mod dashboard_lanes;
mod demo;
mod deploy;
mod durability;
mod environments;
mod fixtures;
mod hardening;
mod ingest_rules;
mod jaeger;
mod lane_fleet;
mod lane_groups;
mod lanes_ingest;
mod live_lanes;
mod otlp_python;
mod otlp_rust;
mod otlp_tls;
mod presence;
mod probes;
mod prometheus;
mod release_gate;
mod robots;
mod routing;
mod shared_reads;
mod sql;
mod storage;
mod support;
mod trace_detail;
mod uploads;
mod util;
