#!/usr/bin/env bash
# The README's main command: set-up, a release build, then `ulnet demo` (extra arguments
# are passed to it). Needs root: the demo builds its own test hosts (network namespaces in
# 198.18.0.0/15) and removes them when it ends.
set -euo pipefail

cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH=${HOME:-/root}/.cargo/bin:$PATH
cargo build --release -p ulnet-cli
exec target/release/ulnet demo "$@"
