#!/usr/bin/env bash
# Runs every test of the workspace (unit, property, end-to-end with real OpenTelemetry SDKs).
# Needs: mold (apt), the pip packages of tests/requirements.txt — `.ci/run` installs both.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --locked --workspace --no-fail-fast
