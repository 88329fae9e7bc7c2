#!/usr/bin/env bash
# shellcheck disable=SC2317 # functions run through `step` look unreachable to it
# The README's test command (and what CI runs): set-up, then formatting, lints, every test
# of the workspace (unit, simulation and kernel-interop; the last need root) with
# cargo-nextest (or cargo test where it is missing), the doctests, and a short fuzz smoke
# run. Every step runs even if an earlier one failed; a summary closes the output, its
# last line adding up the test counts.
#
# Usage: scripts/test.sh [extra arguments for the test runner, e.g. a test name filter]
# Environment: ULNET_TEST_RUNNER=nextest|cargo, ULNET_TEST_TIMEOUT (s), ULNET_FUZZ_SECONDS.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
scripts/setup.sh || exit 1
export PATH=${HOME:-/root}/.cargo/bin:$PATH

# Bounds, so a hung test cannot eat CI's budget (the whole run normally takes minutes).
TEST_TIMEOUT=${ULNET_TEST_TIMEOUT:-1500}
FUZZ_SECONDS=${ULNET_FUZZ_SECONDS:-30}

log=$(mktemp -t ulnet-test.XXXXXX)

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

workspace_packages() {
    cargo metadata --no-deps --format-version 1 |
        python3 -c 'import json, sys; print("\n".join(p["name"] for p in json.load(sys.stdin)["packages"]))'
}

# cargo-nextest runs each test in its own process with a per-test time bound
# (scripts/nextest.toml), so one hung test is ended and reported while the rest still run;
# plain `cargo test` is the fallback where nextest is not installed.
if [[ ${ULNET_TEST_RUNNER:-auto} == auto ]]; then
    if cargo nextest --version >/dev/null 2>&1; then RUNNER=nextest; else RUNNER=cargo; fi
else
    RUNNER=$ULNET_TEST_RUNNER
fi

test_command() {
    if [[ $RUNNER == nextest ]]; then
        echo cargo nextest run --config-file scripts/nextest.toml --no-fail-fast --no-tests=warn
    else
        echo cargo test --no-fail-fast
    fi
}

# Runs a command with a time bound, its output shown and kept in $part (and added to $log).
logged() {
    local limit=$1
    shift
    echo "$*"
    timeout -k 30 "$limit" "$@" 2>&1 | tee "$part"
    local rc=${PIPESTATUS[0]}
    cat "$part" >>"$log"
    ((rc == 124)) && echo "test.sh: '$*' did not finish within $limit s and was stopped"
    return "$rc"
}

run_tests() {
    local start=$SECONDS rc
    local -a cmd
    read -r -a cmd <<<"$(test_command)"
    logged "$TEST_TIMEOUT" "${cmd[@]}" --workspace "$@"
    rc=$?
    # A crate that does not compile stops the whole workspace run before any test: then
    # test each package on its own, so the summary shows which ones build and pass.
    if ((rc != 0 && rc != 124)) && ! grep -qE '^test result: |^ *Summary \[' "$part"; then
        echo "test.sh: the workspace does not build; testing each package on its own"
        local pkg left
        for pkg in $(workspace_packages); do
            left=$((TEST_TIMEOUT - (SECONDS - start)))
            ((left > 0)) || break
            printf '\n--> package %s\n' "$pkg"
            if logged "$left" "${cmd[@]}" -p "$pkg" "$@"; then
                package_summary+=("ok    $pkg")
            else
                package_summary+=("FAIL  $pkg")
            fi
        done
    fi
    return "$rc"
}

package_summary=()
part=$(mktemp -t ulnet-test-part.XXXXXX)
trap 'rm -f "$log" "$part"' EXIT
step fmt cargo fmt --all --check
step clippy cargo clippy --workspace --all-targets -- -D warnings
# Broken or ambiguous intra-doc links fail the run like a clippy warning does.
step doc env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --all-features
# The engine is no_std + alloc (embeddable). No other target's std can be fetched here,
# so both checks run on the host: the stack alone without its `std` feature (a `std::`
# path in it does not compile), then a `#![no_std]` crate with its own panic handler that
# links it, which stops with E0152 (duplicate `panic_impl`) if std enters the graph.
step no-std cargo build -p ulnet-stack --no-default-features
step no-std-link cargo build --manifest-path crates/stack/nostd-check/Cargo.toml \
    --target-dir target/nostd-check
# The C library's tests link libulnet.so and load libulnet_preload.so from target/debug,
# and `ulnet run` finds the interposer beside its own binary: test builds do not put
# cdylibs there (the interposer has no test target at all), so build the workspace first.
# With the test targets in the same build: dev-dependencies add features to shared crates
# (tokio's macros, syn's), and a build without them compiled every library a second
# time for the tests (883 s of compiling on 2 cores from a clean target, against 685 s
# for this one build; the runner then finds everything built).
step build cargo build --workspace --lib --bins --tests --examples
step test run_tests "$@"
if [[ $RUNNER == nextest ]]; then
    # nextest does not run doctests.
    step doctest logged "$TEST_TIMEOUT" cargo test --workspace --doc "$@"
fi

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

# Add up what the runners reported: cargo test's "test result: ok. 12 passed; 0 failed;
# 1 ignored; ..." and nextest's "Summary [ 3.2s] 40 tests run: 39 passed, 1 timed out,
# 2 skipped" (anything that is neither passed nor skipped counts as failed).
read -r passed failed ignored < <(awk '
    /^test result: / {
        for (i = 1; i < NF; i++) {
            if ($(i + 1) ~ /^passed/) p += $i
            if ($(i + 1) ~ /^failed/) f += $i
            if ($(i + 1) ~ /^ignored/) s += $i
        }
    }
    /^ *Summary \[/ {
        sub(/.*tests? run: /, "")
        for (i = 1; i < NF; i++) {
            if ($i !~ /^[0-9]+$/) continue
            if ($(i + 1) ~ /^passed/) p += $i
            else if ($(i + 1) ~ /^skipped/) s += $i
            else f += $i
        }
    }
    END { printf "%d %d %d\n", p, f, s }' "$log")

leftover=$(find /var/run/netns -maxdepth 1 -name 'ulnet-*' -printf '%f\n' 2>/dev/null | wc -l)

printf '\n==> summary\n'
printf '  %s\n' "${summary[@]}"
((${#package_summary[@]})) && printf '    %s\n' "${package_summary[@]}"
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
