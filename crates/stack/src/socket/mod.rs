//! Sockets: the application's end of the stack. UDP sockets ([`udp`]), ICMP echo
//! sockets for ping ([`icmp`]) and the [`SocketSet`] the interface delivers to and
//! sends from. TCP sockets live in [`crate::tcp`].
//!
//! One model for every socket kind: a generation-checked handle (a stale one is an
//! error, never a panic or another socket), O(1) demultiplexing through a keyed map,
//! readiness [`Event`]s the runtime drains once per iteration (as it drains TCP's), and
//! ephemeral ports chosen by the engine ([`crate::ports`], RFC 6056).
//!
//! Every socket buffer is bounded in datagrams and bytes and allocated when the socket
//! is created: a full buffer drops (receive) or refuses (send), never grows.

mod buffer;
pub mod icmp;
mod set;
mod slots;
pub mod udp;

use core::fmt;

pub use buffer::PacketBuffer;
pub use icmp::{EchoReply, IcmpSocket};
pub use set::{AddError, Event, IcmpHandle, InvalidHandle, SocketSet, UdpHandle, V6OnlyError};
pub use udp::{UdpConfig, UdpError, UdpMetadata, UdpSocket};

/// Why a datagram could not be queued for sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// The transmit buffer has no room now; try again after the interface sent some.
    BufferFull,
    /// The datagram is larger than the protocol allows or the buffer could ever hold.
    TooLarge,
    /// The destination address or port is unspecified, or of an unsupported family.
    Unaddressable,
    /// An ICMP port unreachable came back for an earlier datagram of this connected
    /// socket (Linux's `ECONNREFUSED`).
    ConnectionRefused,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendError::BufferFull => "transmit buffer full",
            SendError::TooLarge => "datagram too large",
            SendError::Unaddressable => "destination unaddressable",
            SendError::ConnectionRefused => "connection refused",
        })
    }
}

impl core::error::Error for SendError {}

/// Why nothing was received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecvError {
    /// No datagram is waiting.
    Exhausted,
    /// An ICMP port unreachable came back for an earlier datagram of this connected
    /// socket (Linux's `ECONNREFUSED`).
    ConnectionRefused,
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RecvError::Exhausted => "no datagram waiting",
            RecvError::ConnectionRefused => "connection refused",
        })
    }
}

impl core::error::Error for RecvError {}

/// Why a socket could not be bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BindError {
    /// The socket is bound already.
    AlreadyBound,
    /// The address family is not supported yet.
    Unaddressable,
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BindError::AlreadyBound => "socket already bound",
            BindError::Unaddressable => "address family not supported",
        })
    }
}

impl core::error::Error for BindError {}
