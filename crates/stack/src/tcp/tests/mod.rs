//! Segment-level tests of the TCP engine, one fixture per state, with a scripted peer
//! (`harness.rs`); regression tests named after the findings they fix
//! (`regressions.rs`); and two-engine loopback tests in virtual time (`loopback.rs`).

mod close;
mod engine;
mod handshake;
mod harness;
mod icmp;
mod loopback;
mod memory;
mod options;
mod prr;
mod regressions;
mod rfc5961;
mod synflood;
mod tlp_rack;
mod transfer;
