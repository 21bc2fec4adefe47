#!/usr/bin/env bash
# The test suite: formatting, the code's shape, the deployment files against their tools, lints
# and docs, then every crate's unit and integration tests, then the
# `azure` feature (Azure discovery against a fake Resource Manager on loopback), then the truth
# checks and fleet figures of `cargo bench` (short runs). Every command README.md and docs/*.md
# show runs in `cargo test` (crates/netblast/tests/doc_commands.rs).
# Tests that need root (eBPF, network namespaces) cannot run elsewhere: each is listed with its
# reason in target/tmp/skipped-tests.txt, counted after the tests; NETBLAST_NO_SKIP=1 makes a
# skip fail instead.
set -euo pipefail
cd "$(dirname "$0")/.."
# `--repeat N`: the flake finder (scripts/flakes.sh): the tests N times, each failure listed.
if [ "${1:-}" = "--repeat" ]; then
  exec scripts/flakes.sh "${2:?usage: scripts/test.sh --repeat N}"
fi
cargo fmt --all -- --check
# No two files of a crate import each other; no function outside tests over 150 lines.
scripts/check-structure.py
scripts/check-deploy.sh
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy -p netblast --features azure --all-targets --locked -- -D warnings
# Public items are documented, and their docs' links resolve.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked -q
# The default build has no Azure SDK in it.
if cargo tree -p netblast --locked -e normal | grep -q 'azure_'; then
  echo "test.sh: the default build of netblast depends on the Azure SDK" >&2
  exit 1
fi
# `cargo bench` reuses setup.sh's release build only when it resolves every crate it shares with
# the binary with the same features (benches/Cargo.toml says how): otherwise minutes of CI.
features() {
  cargo tree -p "$1" -e normal,build --locked -f '{p} {f}' --no-dedupe |
    sed 's/^[│├└─ ]*//; s/ (\*)//; s/ (proc-macro)//' | sort -u
}
# Only crates both build count: the benches' own (netblast-benches, netblast-testkit) are theirs.
binary=$(features netblast)
apart=$(comm -13 <(echo "$binary") <(features netblast-benches) |
  awk 'NR == FNR { built[$1] = 1; next } built[$1]' <(echo "$binary") - || true)
if [ -n "$apart" ]; then
  printf 'test.sh: the benches build these with features the binary does not (benches/Cargo.toml):\n%s\n' "$apart" >&2
  exit 1
fi
rm -f target/tmp/skipped-tests.txt
cargo test --workspace --locked
if [ -s target/tmp/skipped-tests.txt ]; then
  echo "test.sh: $(wc -l <target/tmp/skipped-tests.txt) tests passed without running (cannot run here):"
  sed 's/^/  SKIPPED /' target/tmp/skipped-tests.txt
fi
cargo test -p netblast --features azure --locked --test fleet azure
# The truth checks of `cargo bench`: a change that breaks a measurement fails here; and the
# fleet coordinator against 240 and 1 000 simulated agents (`cargo bench -- fleet`, as README
# shows it), whose figures are printed and whose failure to run fails the suite.
NETBLAST_BENCH_SECS=1 cargo bench -p netblast-benches --locked --bench selfcheck -- truth. fleet
