#!/usr/bin/env bash
# The README's test command (and what CI runs): set-up, then formatting, lints, every test
# of the workspace (unit, simulation and kernel-interop; the last need root), and a short
# fuzz smoke run where fuzz/ provides one. Every step runs even if an earlier one failed;
# a summary closes the output, its last line being the test counts.
#
# Usage: scripts/test.sh [extra arguments for `cargo test`, e.g. a test name filter]
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
scripts/setup.sh || exit 1
export PATH=${HOME:-/root}/.cargo/bin:$PATH

# Bounds, so a hung test cannot eat CI's budget (the whole run normally takes minutes).
TEST_TIMEOUT=${ULNET_TEST_TIMEOUT:-1500}
FUZZ_SECONDS=${ULNET_FUZZ_SECONDS:-30}

log=$(mktemp -t ulnet-test.XXXXXX)
trap 'rm -f "$log"' EXIT

summary=()
status=0

step() {
    local name=$1
    shift
    printf '\n==> %s: %s\n' "$name" "$*"
    local start=$SECONDS
    if "$@"; then
        summary+=("ok    $name ($((SECONDS - start)) s)")
    else
        summary+=("FAIL  $name ($((SECONDS - start)) s)")
        status=1
    fi
}

skip() {
    summary+=("skip  $1 ($2)")
}

# shellcheck disable=SC2317 # called through `step`
run_tests() {
    echo "cargo test --workspace --no-fail-fast $*"
    # --no-fail-fast: one failing test binary must not hide the results of the others.
    timeout -k 30 "$TEST_TIMEOUT" cargo test --workspace --no-fail-fast "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    ((rc == 124)) && echo "test.sh: cargo test did not finish within ${TEST_TIMEOUT} s and was stopped"
    return "$rc"
}

step fmt cargo fmt --all --check
step clippy cargo clippy --workspace --all-targets -- -D warnings
step test run_tests "$@"

# Fuzzing: fuzz/ is its own workspace (cargo-fuzz layout, docs/fuzzing.md). Its stable
# toolchain smoke runner drives every target for a bounded time; run it when it is there.
fuzz_timeout=$((FUZZ_SECONDS + 900)) # the run plus a release build of wire and the runner
if [[ -x fuzz/smoke.sh ]]; then
    step fuzz-smoke timeout -k 30 "$fuzz_timeout" fuzz/smoke.sh "$FUZZ_SECONDS"
elif [[ -f fuzz/Cargo.toml && -f fuzz/src/bin/smoke.rs ]]; then
    step fuzz-smoke timeout -k 30 "$fuzz_timeout" cargo run --release --manifest-path fuzz/Cargo.toml \
        --no-default-features --bin smoke -- --seconds "$FUZZ_SECONDS"
else
    skip fuzz-smoke "fuzz/ has no smoke runner"
fi

# Count what the test runner reported ("test result: ok. 12 passed; 0 failed; 1 ignored; ...").
read -r passed failed ignored < <(awk '
    /^test result: / {
        for (i = 1; i <= NF; i++) {
            if ($(i + 1) ~ /^passed/) p += $i
            if ($(i + 1) ~ /^failed/) f += $i
            if ($(i + 1) ~ /^ignored/) s += $i
        }
    }
    END { printf "%d %d %d\n", p, f, s }' "$log")

leftover=$(find /var/run/netns -maxdepth 1 -name 'ulnet-*' -printf '%f\n' 2>/dev/null | wc -l)

printf '\n==> summary\n'
printf '  %s\n' "${summary[@]}"
if ((leftover)); then
    printf '  note: %d ulnet-* namespace(s) exist now (another run, or a leak: see ulnet testbed list)\n' "$leftover"
fi
if ((status)); then
    printf '  result: FAILED\n'
else
    printf '  result: ok\n'
fi
printf 'tests: %d passed, %d failed, %d skipped\n' "$passed" "$failed" "$ignored"
exit "$status"
