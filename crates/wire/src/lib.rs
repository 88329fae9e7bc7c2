//! Packet formats as zero-copy typed views over byte buffers, and their emitters.
//!
//! Owns: Ethernet II, ARP, IPv4, ICMPv4, UDP, TCP (with options), the Internet checksum
//! and a tcpdump-like pretty-printer. In: byte slices from a channel. Out: typed views
//! (`*Packet<T>`, checked once with `new_checked`) and representations (`*Repr`) that
//! `parse` from a view and `emit` into one.
//!
//! Invariants: nothing panics after `check_len` (or `new_checked`) returns `Ok`; every
//! `Repr::parse` checks lengths itself and returns a typed [`Error`] for truncated,
//! malformed or unsupported input; `emit` panics only when handed a buffer shorter than
//! the `buffer_len` it was told to fill (a caller bug, documented per function).
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod bytes;

pub mod arp;
pub mod checksum;
pub mod error;
pub mod ethernet;
pub mod icmpv4;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod pretty;
pub mod seq;
pub mod tcp;
pub mod udp;

pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use checksum::ChecksumMode;
pub use error::{Error, Result};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
pub use icmpv4::{
    Icmpv4DstUnreachable, Icmpv4Message, Icmpv4Packet, Icmpv4Repr, Icmpv4TimeExceeded,
};
pub use ip::IpProtocol;
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use pretty::{pretty_print, pretty_print_ip};
pub use seq::SeqNumber;
pub use tcp::{
    SackBlocks, TcpFlags, TcpOption, TcpOptions, TcpOptionsIter, TcpPacket, TcpRepr, TcpTimestamp,
};
pub use udp::{UdpPacket, UdpRepr};
