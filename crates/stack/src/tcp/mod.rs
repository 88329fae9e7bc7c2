//! TCP: a complete RFC 9293 engine, sans-I/O.
//!
//! Read first: RFC 9293 (the protocol), RFC 7323 (window scale, timestamps, PAWS),
//! RFC 2018 and 2883 (SACK, D-SACK), RFC 6298 (retransmission timer), RFC 5681 and 6582
//! (congestion control, NewReno), RFC 6675 (SACK loss recovery), RFC 9438 (CUBIC),
//! RFC 5961 (blind in-window attacks), RFC 6528 (ISNs), RFC 1122 §4.2 (host requirements),
//! RFC 5927 / RFC 5461 (ICMP errors, `layer/icmp.rs`).
//!
//! Where things live: [`Tcp`] is the whole engine and the only thing the IP layer and the
//! socket API call: `layer/` (segments in, segments out, timers, tables; `layer/user.rs` the slab as the user calls see it) and `api.rs`
//! (the application's calls), naming connections by the handles of `handle.rs`. Per
//! connection: `socket/` (the control block, its fields private to that module:
//! `socket/mod.rs` the block and user calls, `socket/input.rs` segment arrival,
//! `socket/recv.rs` receive buffer, delayed ACK and SACK blocks, `socket/output.rs`
//! segment generation, `socket/timer.rs` what each timer does when it fires), built from
//! parts that own their fields and do not know `Socket`: `seq.rs` (send sequence
//! space), `rseq.rs` (receive sequence space and the window we offer), `recovery/`
//! (loss recovery with the SACK scoreboard, `recovery/rack.rs` and `recovery/tlp.rs`), `congestion/`, `rtt.rs`, `timers.rs` (the deadlines), `options.rs`
//! (negotiation). Around them: `listen.rs`, `cookie.rs` (SYN cookies), `timewait.rs`,
//! `table.rs`, `challenge.rs` (RFC 5961 rate limit), `stats.rs`, `config.rs`.
//!
//! Supported: all eleven states with active, passive and simultaneous open and close,
//! half-close, RST generation and RFC 5961 checks (challenge ACKs, rate limit, ACK
//! validity), RFC 1337 TIME-WAIT protection and RFC 6191 reuse, MSS (clamped to the path),
//! window scaling, timestamps with PAWS and RTTM, SACK and D-SACK both ways, RFC 6298
//! retransmission with Karn and backoff, SYN retransmission, zero-window probes,
//! keepalive, user timeout, NewReno / SACK recovery / CUBIC per socket, tail loss probes
//! and RACK-style loss detection at SND.UNA (RFC 8985, `recovery/tlp.rs` and `recovery/rack.rs`), limited
//! transmit, delayed ACK, Nagle, SWS avoidance on both sides, bounded SYN and accept
//! queues with SYN-flood defences (RFC 4987: early eviction of half-open connections and
//! SYN cookies with Linux's option encoding, `cookie.rs`, `layer/syn.rs`), RFC 6528 ISNs
//! and RFC 6056 ephemeral ports; a configurable initial window and
//! RTO floors (whole RTO and, like Linux, its variance term); per-socket receive / send
//! buffer sizes and MSS, set before the SYN (`connect_with`, listener options) or after.
//!
//! Regression tests for findings reported by the engine's users are in
//! `tests/regressions.rs`, named after the finding.
//!
//! Deliberately not supported: urgent data (URG is ignored and data stays inline, as
//! RFC 6093 recommends for new code), ECN, TCP Fast Open, path MTU discovery beyond ICMP "fragmentation needed" (the IP layer
//! hands ICMP errors to [`Tcp::icmp_error`] and may report MTUs through [`Tcp::set_path_mtu`];
//! no RFC 4821/8899 black-hole probing), data carried on a SYN (it is not acknowledged; the peer sends
//! it again).

pub mod congestion;
pub mod isn;
pub mod reassembly;
pub mod rtt;
pub mod sack;

mod api;
mod challenge;
mod config;
mod cookie;
mod error;
mod handle;
mod layer;
mod listen;
mod options;
mod recovery;
mod rseq;
mod seq;
mod socket;
mod state;
mod stats;
mod table;
mod timers;
mod timewait;

pub use config::{AckPolicy, Keepalive, MemLimits, SocketOption, SynCookies, TcpConfig};
pub use congestion::Algorithm;
pub use error::{
    AcceptError, ConnError, ConnectError, ListenError, RecvError, SendError, SocketError,
};
pub use handle::{Event, ListenerHandle, SocketHandle};
pub use layer::icmp::{IcmpError, IcmpVerdict, MIN_PATH_MTU};
pub use layer::Tcp;
pub use listen::ListenerLimits;
pub use socket::{Readiness, Shutdown};
pub use state::State;
pub use stats::{CaState, TcpInfo, TcpStats};
pub use timewait::TimeWaitRecord;

#[cfg(test)]
mod tests;
