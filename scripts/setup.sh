#!/usr/bin/env bash
# Prepares a Debian machine (we are root) to build ulnet and run its tests and benchmarks.
# Idempotent and non-interactive: installs only what is missing, runs `apt-get update` only
# when something is, and is quiet and quick when everything is already there. Every other
# script calls it first.
#
# It touches nothing in the root network namespace: it only makes sure /var/run/netns
# exists (where `ip netns add` mounts namespaces; ip does its own mounting).
set -euo pipefail

log() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# Debian packages the project needs, each with a command that proves it is usable.
# iproute2/ethtool/nftables/procps build and configure testbeds; iputils-ping, iperf3,
# socat, netcat-openbsd and curl are the kernel peers in interop tests and baselines;
# nginx, wrk and apache2-utils (ab) are the server and load of `ulnet run`'s test;
# tshark/tcpdump check what ulnet puts on the wire; gcc/pkg-config link Rust crates;
# redis-server/redis-tools (redis-benchmark, redis-cli) are another unmodified program and its load;
# sockperf cross-checks the bench's latency figures and UDP echo knee and is `ulnet run`'s latency peer,
# fio its disk figures, taskset pins its peers, and
# fonts-dejavu-core is the font the bench's plots are drawn with.
PACKAGES=(
    "iproute2:ip"
    "iputils-ping:ping"
    "ethtool:ethtool"
    "nftables:nft"
    "iperf3:iperf3"
    "socat:socat"
    "netcat-openbsd:nc"
    "curl:curl"
    "nginx:nginx"
    "wrk:wrk"
    "apache2-utils:ab"
    "tshark:tshark"
    "tcpdump:tcpdump"
    "procps:sysctl"
    "python3:python3"
    "gcc:gcc"
    "pkg-config:pkg-config"
    "linux-perf:perf"
    "sockperf:sockperf"
    "redis-server:redis-server"
    "redis-tools:redis-benchmark"
    "fio:fio"
    "bpftrace:bpftrace"
    "util-linux:taskset"
    "fonts-dejavu-core:"
    "ca-certificates:"
)

is_installed() {
    local pkg=$1 cmd=$2
    if command -v dpkg-query >/dev/null 2>&1; then
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' && return 0
        # A command from elsewhere (python3 from pyenv, say) serves as well.
        [[ -n $cmd ]] && command -v "$cmd" >/dev/null 2>&1 && return 0
        return 1
    fi
    [[ -z $cmd ]] || command -v "$cmd" >/dev/null 2>&1
}

missing=()
for entry in "${PACKAGES[@]}"; do
    pkg=${entry%%:*}
    cmd=${entry#*:}
    is_installed "$pkg" "$cmd" || missing+=("$pkg")
done

if ((${#missing[@]})); then
    [[ $(id -u) -eq 0 ]] || die "missing packages (${missing[*]}) and not root: install them or rerun as root"
    command -v apt-get >/dev/null 2>&1 || die "missing packages (${missing[*]}) and no apt-get: install them by hand"
    export DEBIAN_FRONTEND=noninteractive
    log "installing: ${missing[*]}"
    apt_opts=(-y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
    # Update the package lists only when they are needed (and retry once on a flaky mirror).
    apt-get update -q || { sleep 5; apt-get update -q; }
    apt-get install "${apt_opts[@]}" --no-install-recommends "${missing[@]}" \
        || { sleep 5; apt-get install "${apt_opts[@]}" --no-install-recommends "${missing[@]}"; }
fi

# The Rust toolchain cannot be fetched here (only crates.io, PyPI, Debian and npm are
# reachable), so it must already be installed; rustfmt and clippy are added when rustup can
# reach its server, and only their absence is an error.
if [[ -d ${HOME:-/root}/.cargo/bin && :$PATH: != *:${HOME:-/root}/.cargo/bin:* ]]; then
    export PATH=${HOME:-/root}/.cargo/bin:$PATH
fi
command -v cargo >/dev/null 2>&1 || die "cargo not found: install a stable Rust toolchain (rustup) first"
for component in rustfmt clippy; do
    sub=${component/rustfmt/fmt}
    if ! cargo "$sub" --version >/dev/null 2>&1; then
        log "adding Rust component $component"
        if command -v rustup >/dev/null 2>&1; then
            rustup component add "$component" >/dev/null 2>&1 || true
        fi
        cargo "$sub" --version >/dev/null 2>&1 || die "Rust component $component is missing and rustup could not add it"
    fi
done

# Where `ip netns add` bind-mounts named namespaces (ip creates and mounts it itself too;
# having the directory keeps `ip netns list` quiet on a machine that never made one).
mkdir -p /var/run/netns 2>/dev/null || [[ -d /var/run/netns ]] || die "cannot create /var/run/netns (not root?)"

if ((${#missing[@]})); then
    log "ready (installed ${#missing[@]} package(s))"
else
    log "ready (all ${#PACKAGES[@]} packages present; $(cargo --version))"
fi
