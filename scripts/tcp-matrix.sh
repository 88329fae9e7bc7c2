#!/usr/bin/env bash
# The TCP issue's simulation checks at full size, on the release binary (the CI tests in
# crates/apps/tests/sim_tcp.rs run the same scenarios smaller):
#
#   1. impaired matrix: 5% loss, 5% reordering, 1% duplication, 0.1% corruption both ways,
#      1 ms one-way delay, SEEDS seeds x {newreno, cubic} x {SACK on, off}, BYTES each;
#   2. 1,000 concurrent connections to one listener, 1 MB each;
#   3. BYTES on a perfect wire (how fast the simulator moves data);
#   4. BYTES through a 100 Mb/s bottleneck with a 10 ms RTT (steady goodput vs capacity).
#
# Prints one table row per run and a summary; exits non-zero if any run fails (corrupted
# data, a connection that did not close cleanly, an RST on a live connection, a limit hit).
#
# Environment: BYTES (default 100M), SEEDS (default 20), ULNET (a prebuilt binary; by
# default target/release/ulnet is built first). Runs in virtual time: needs no root and
# touches no network.
set -euo pipefail

cd "$(dirname "$0")/.."
BYTES=${BYTES:-100M}
SEEDS=${SEEDS:-20}
if [[ -z ${ULNET:-} ]]; then
    export PATH=${HOME:-/root}/.cargo/bin:$PATH
    cargo build --release -q -p ulnet-cli
    ULNET=target/release/ulnet
fi

# The first value of a top-level JSON field in a compact report.
field() { grep -o "\"$2\":[^,}]*" <<<"$1" | head -n 1 | cut -d: -f2-; }

failed=0
matrix_walls=()
printf '%-28s %5s %-5s %8s %10s %12s %8s %6s %6s\n' \
    scenario seed ok wall_s virtual_s goodput_Mb/s retx rto fast_rx
row() {
    local name=$1 seed=$2 report=$3 ok=$4
    local goodput
    goodput=$(field "$report" goodput_bps)
    if [[ $goodput == null || -z $goodput ]]; then
        goodput=-
    else
        goodput=$(awk -v g="$goodput" 'BEGIN { printf "%.2f", g / 1e6 }')
    fi
    printf '%-28s %5s %-5s %8.3f %10.3f %12s %8s %6s %6s\n' "$name" "$seed" "$ok" \
        "$(field "$report" wall_s)" "$(field "$report" virtual_duration_s)" "$goodput" \
        "$(field "$report" segments)" "$(field "$report" rto_expiries)" \
        "$(field "$report" fast_retransmits)"
}

# run NAME SEED ARGS...: one simulation; prints its row, records failures.
run() {
    local name=$1 seed=$2
    shift 2
    local report ok=yes
    if ! report=$("$ULNET" sim tcp --compact --seed "$seed" "$@" 2>/tmp/tcp-matrix.$$.err); then
        ok=FAIL
        failed=$((failed + 1))
    fi
    if [[ -z $report ]]; then
        printf '%-28s %5s FAIL  %s\n' "$name" "$seed" "$(head -c 300 /tmp/tcp-matrix.$$.err)"
        return
    fi
    row "$name" "$seed" "$report" "$ok"
    if [[ $ok == FAIL ]]; then
        grep -o '"failures":\[[^]]*\]' <<<"$report" | head -c 600
        echo
    fi
    LAST_REPORT=$report
}
trap 'rm -f /tmp/tcp-matrix.$$.err' EXIT

start=$(date +%s.%N)
for cc in newreno cubic; do
    for sack in on off; do
        for seed in $(seq 1 "$SEEDS"); do
            run "impaired $cc sack=$sack" "$seed" --bytes "$BYTES" --cc "$cc" --sack "$sack" \
                --loss 5% --reorder 5% --duplicate 1% --corrupt 0.1% --delay 1ms
            matrix_walls+=("$(field "$LAST_REPORT" wall_s)")
        done
    done
done
matrix_end=$(date +%s.%N)

run "1000 conns x 1M" 1000 --connections 1000 --bytes 1M --buffer 64K --delay 1ms
run "perfect wire $BYTES" 1 --bytes "$BYTES"
run "100Mb/s 10ms RTT $BYTES" 7 --bytes "$BYTES" --bandwidth 100M,0 --queue 200 --rtt 10ms \
    --buffer 2M
steady=$(field "$LAST_REPORT" goodput_steady_bps)
end=$(date +%s.%N)

echo
printf '%s\n' "${matrix_walls[@]}" | sort -g | awk -v n="${#matrix_walls[@]}" '
    { w[NR] = $1; s += $1 }
    END { printf "matrix: %d runs of %s, wall per run min %.3f s, median %.3f s, max %.3f s, sum %.1f s\n",
          n, "'"$BYTES"'", w[1], w[int((n + 1) / 2)], w[n], s }'
awk -v s="$steady" 'BEGIN {
    cap = 100e6 * 1448 / 1514
    printf "bottleneck: steady goodput %.2f Mb/s = %.1f%% of the payload capacity %.2f Mb/s\n",
        s / 1e6, 100 * s / cap, cap / 1e6 }'
awk -v a="$start" -v m="$matrix_end" -v e="$end" \
    'BEGIN { printf "elapsed: matrix %.1f s, total %.1f s\n", m - a, e - a }'
if ((failed > 0)); then
    echo "FAILED: $failed run(s)"
    exit 1
fi
echo "all runs passed"
