#!/usr/bin/env bash
# The flake finder: runs the test suite's tests N times over and prints every test that failed
# at least once, how often, and its messages. Run it before submitting a change that touches
# timing, traffic or a test helper (a test that passes alone and fails beside others is a defect
# of the suite), and whenever CI went red on a test that passes alone.
#
#   scripts/flakes.sh N                    # the whole workspace's tests (cargo test), N times
#   scripts/flakes.sh N -p netblast --test integration limits::   # one binary, one filter
#   scripts/test.sh --repeat N             # the same as the first form
#
# Each run's output is kept in $FLAKES_DIR (default target/flakes/DATE). Exits 1 when any test
# failed in any run.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
n=${1:?usage: scripts/flakes.sh N [cargo test arguments]}
shift
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "flakes.sh: N must be a whole number >= 1, not '$n'" >&2; exit 2; }
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--workspace)
dir=${FLAKES_DIR:-target/flakes/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$dir"
# Build once, so the runs' times are the tests' own.
cargo test --locked --no-run "${args[@]}" >"$dir/build.log" 2>&1 || { cat "$dir/build.log" >&2; exit 2; }
for i in $(seq 1 "$n"); do
  start=$(date +%s)
  cargo test --locked --no-fail-fast "${args[@]}" >"$dir/run-$i.log" 2>&1
  rc=$?
  echo "flakes.sh: run $i of $n: exit $rc in $(( $(date +%s) - start )) s ($dir/run-$i.log)"
done
python3 - "$dir" "$n" <<'EOF'
import pathlib, re, sys
d, n = pathlib.Path(sys.argv[1]), int(sys.argv[2])
seen = {}
passed_runs = 0
for i in range(1, n + 1):
    text = (d / f"run-{i}.log").read_text(errors="replace")
    # A test's captured output: "---- NAME stdout ----" up to the next such header or the list.
    blocks = re.split(r"^---- (\S+) stdout ----$", text, flags=re.M)
    failed_here = set()
    for name, body in zip(blocks[1::2], blocks[2::2]):
        body = body.split("\nfailures:\n")[0]
        msg = [l for l in body.splitlines() if l.strip() and not l.startswith("note: run with")]
        seen.setdefault(name, []).append((i, "\n      ".join(msg[-12:])))
        failed_here.add(name)
    # Binaries that failed without a test's output (a crash, a build error).
    for m in re.finditer(r"^error: test failed, to rerun pass `([^`]*)`", text, flags=re.M):
        if not failed_here:
            seen.setdefault(f"({m.group(1)})", []).append((i, "the binary failed without a test's output"))
    if not failed_here and "test result: FAILED" not in text and "error:" not in text:
        passed_runs += 1
print(f"flakes.sh: {passed_runs} of {n} runs passed")
for name, fails in sorted(seen.items(), key=lambda kv: -len(kv[1])):
    print(f"\nFAILED {len(fails)} of {n}: {name}")
    for run, msg in fails:
        print(f"  run {run}:\n      {msg}")
sys.exit(1 if seen else 0)
EOF
