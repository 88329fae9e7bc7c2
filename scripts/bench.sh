#!/usr/bin/env bash
# The README's main command: set-up, a release build, then `ulnet bench` (extra arguments
# are passed to it: experiment names, --quick, --full, --rounds N, --out DIR, --backend B).
# Needs root: the experiments build their own test hosts (network namespaces in
# 198.18.0.0/15) and remove them when they end. The report goes to
# bench-results/<timestamp>/ (report.md, report.html, results.json, results.csv, plots/).
set -euo pipefail

cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH=${HOME:-/root}/.cargo/bin:$PATH
# The preload library too: `same-binary` runs unmodified programs under `ulnet run`, which
# looks for libulnet_preload.so beside the binary.
cargo build --release -p ulnet-cli -p ulnet-preload
exec target/release/ulnet bench "$@"
