#!/usr/bin/env bash
# The test suite: formatting, lints, then every crate's unit and integration tests.
# Tests that need root (eBPF, network namespaces) print SKIP with the reason when not root.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
