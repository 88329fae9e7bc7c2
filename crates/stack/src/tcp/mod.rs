//! TCP: a complete RFC 9293 engine, sans-I/O.
//!
//! Read first: RFC 9293 (the protocol), RFC 7323 (window scale, timestamps, PAWS),
//! RFC 2018 and 2883 (SACK, D-SACK), RFC 6298 (retransmission timer), RFC 5681 and 6582
//! (congestion control, NewReno), RFC 6675 (SACK loss recovery), RFC 9438 (CUBIC),
//! RFC 5961 (blind in-window attacks), RFC 6528 (ISNs), RFC 1122 §4.2 (host requirements).
//!
//! Where things live: [`Tcp`] (`layer.rs`) is the whole engine and the only thing the IP
//! layer and the socket API call. Per connection: `socket.rs` (control block and user
//! calls), `input.rs` (segment arrival), `recv.rs` (receive buffer, delayed ACK, SACK
//! blocks), `output.rs` (segment generation), `recovery.rs` (loss recovery), `timer.rs`
//! (all timers), `options.rs` (negotiation). Around them: `listen.rs`, `timewait.rs`,
//! `table.rs`, `challenge.rs` (RFC 5961 rate limit), `stats.rs`, `config.rs`.

pub mod congestion;
pub mod isn;
pub mod ports;
pub mod reassembly;
pub mod rtt;
pub mod sack;

mod challenge;
mod config;
mod error;
mod input;
mod layer;
mod listen;
mod options;
mod output;
mod recovery;
mod recv;
mod socket;
mod state;
mod stats;
mod table;
mod timer;
mod timewait;

pub use config::{Keepalive, SocketOption, TcpConfig};
pub use congestion::Algorithm;
pub use error::{
    AcceptError, ConnError, ConnectError, ListenError, RecvError, SendError, SocketError,
};
pub use layer::{Event, ListenerHandle, Readiness, SocketHandle, Tcp};
pub use socket::Shutdown;
pub use state::State;
pub use stats::{TcpInfo, TcpStats};
pub use timewait::TimeWaitRecord;

#[cfg(test)]
mod tests;
