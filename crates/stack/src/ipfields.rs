//! The IP header fields a socket chooses for what it sends (Linux `IP_TOS`/`IP_TTL`,
//! `IPV6_TCLASS`/`IPV6_UNICAST_HOPS`): carried from a TCP connection or a UDP socket to
//! the IPv4 or IPv6 header of every segment or datagram it sends.

/// Per-socket IP header fields. The default (TOS 0, the interface's TTL) is what the
/// stack sends without them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct IpFields {
    /// The IPv4 TOS byte or IPv6 Traffic Class: DSCP in the upper six bits, ECN in the
    /// lower two (RFC 2474 §3, RFC 3168 §5). For TCP the ECN bits are always 0 here:
    /// ECN belongs to the transport (RFC 3168 §6.1.1), as Linux keeps it out of
    /// `IP_TOS` for TCP sockets.
    pub tos: u8,
    /// The IPv4 TTL or IPv6 Hop Limit; `None` takes the interface's (its configured TTL,
    /// or an IPv6 router's Cur Hop Limit, RFC 4861 §6.3.4).
    pub hop_limit: Option<u8>,
}

/// The ECN field of a TOS/Traffic Class byte (RFC 3168 §5).
pub const ECN_MASK: u8 = 0b11;
