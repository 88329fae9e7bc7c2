//! Packet formats as zero-copy typed views over byte buffers, and their emitters.
//!
//! Owns: Ethernet II, ARP, IPv4 (options skipped, fragments recognised), IPv6 with a
//! bounded walk of its extension headers (`ipv6ext`), ICMPv4, ICMPv6 and Neighbor
//! Discovery (`icmpv6`, `ndisc`), UDP, TCP with every option the stack uses, the Internet checksum
//! (with pseudo-headers and RFC 1624 incremental update) and a tcpdump-like
//! [`pretty_print`]er. In: byte slices from a channel. Out: typed views (`*Packet<T>`,
//! checked once with `new_checked`) and representations (`*Repr`) that `parse` from a
//! view and `emit` into one. Transport checksums follow a [`ChecksumMode`], so a channel
//! whose device verifies or fills checksums does not pay for them twice.
//!
//! Invariants: nothing panics after `check_len` (or `new_checked`) returns `Ok`; every
//! `Repr::parse` checks lengths itself and returns a typed [`Error`] for truncated,
//! malformed or unsupported input; `emit` panics only when handed a buffer shorter than
//! the `buffer_len` it was told to fill (a caller bug, documented per function).
//!
//! Deliberately not here: IPv4 options on emit, IPv6 options we would act on (all are
//! unrecognised, RFC 8200 §4.2), 802.1Q tags,
//! IPv4 reassembly (the stack does it from the fragment fields).
//!
//! ```
//! use core::net::{IpAddr, Ipv4Addr};
//! use ulnet_wire::{ChecksumMode, IpProtocol, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr};
//!
//! let (src, dst) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
//! let udp = UdpRepr { src_port: 5000, dst_port: 7 };
//! let ip = Ipv4Repr::new(src, dst, IpProtocol::Udp, udp.buffer_len(4), 64);
//! let mut buf = vec![0u8; ip.buffer_len()];
//! let mut packet = Ipv4Packet::new_unchecked(&mut buf[..]);
//! ip.emit(&mut packet, ChecksumMode::Full);
//! udp.emit(
//!     &mut UdpPacket::new_unchecked(packet.payload_mut()),
//!     &IpAddr::V4(src),
//!     &IpAddr::V4(dst),
//!     4,
//!     |p| p.copy_from_slice(b"ping"),
//!     ChecksumMode::Full,
//! );
//!
//! let packet = Ipv4Packet::new_checked(&buf[..])?;
//! let ip = Ipv4Repr::parse(&packet, ChecksumMode::Full)?;
//! let datagram = UdpPacket::new_checked(packet.payload())?;
//! let (src, dst) = (IpAddr::V4(ip.src_addr), IpAddr::V4(ip.dst_addr));
//! let udp = UdpRepr::parse(&datagram, &src, &dst, ChecksumMode::Full)?;
//! assert_eq!((udp.dst_port, datagram.payload()), (7, &b"ping"[..]));
//! assert_eq!(
//!     ulnet_wire::pretty::pretty_print_ip(&buf).to_string(),
//!     "198.18.0.1.5000 > 198.18.0.2.7: UDP, length 4"
//! );
//! # Ok::<(), ulnet_wire::Error>(())
//! ```
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![doc(test(attr(deny(warnings))))]

mod bytes;

pub mod arp;
pub mod checksum;
pub mod error;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod ipv6ext;
pub mod ndisc;
pub mod pretty;
pub mod seq;
pub mod tcp;
pub mod udp;

pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use checksum::ChecksumMode;
pub use error::{Error, Result};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
pub use icmpv4::{
    IcmpQuote, Icmpv4DstUnreachable, Icmpv4Message, Icmpv4Packet, Icmpv4Repr, Icmpv4TimeExceeded,
};
pub use icmpv6::{
    Icmpv6DstUnreachable, Icmpv6Message, Icmpv6Packet, Icmpv6ParamProblem, Icmpv6Quote, Icmpv6Repr,
    Icmpv6TimeExceeded,
};
pub use ip::IpProtocol;
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use ipv6ext::{ChainError, Ipv6Chain, Ipv6FragRepr};
pub use ndisc::{NaFlags, NdiscOption, NdiscOptions, NdiscRepr, PrefixInfo};
pub use pretty::{pretty_print, pretty_print_ip};
pub use seq::SeqNumber;
pub use tcp::{
    SackBlocks, TcpFlags, TcpOption, TcpOptions, TcpOptionsIter, TcpPacket, TcpRepr, TcpTimestamp,
};
pub use udp::{UdpPacket, UdpRepr};
