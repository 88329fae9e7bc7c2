//! Values shared by IPv4 and IPv6: the protocol / next-header number (IANA registry
//! "Assigned Internet Protocol Numbers").

use core::fmt;

/// An IP protocol number (IPv4 "protocol", IPv6 "next header").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpProtocol {
    /// IPv6 hop-by-hop options (0).
    HopByHop,
    /// ICMP for IPv4 (1).
    Icmp,
    /// TCP (6).
    Tcp,
    /// UDP (17).
    Udp,
    /// IPv6 routing header (43).
    Ipv6Route,
    /// IPv6 fragment header (44).
    Ipv6Frag,
    /// ICMP for IPv6 (58).
    Icmpv6,
    /// IPv6 "no next header" (59).
    Ipv6NoNxt,
    /// IPv6 destination options (60).
    Ipv6Opts,
    /// Any other number.
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> Self {
        match v {
            0 => IpProtocol::HopByHop,
            1 => IpProtocol::Icmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            43 => IpProtocol::Ipv6Route,
            44 => IpProtocol::Ipv6Frag,
            58 => IpProtocol::Icmpv6,
            59 => IpProtocol::Ipv6NoNxt,
            60 => IpProtocol::Ipv6Opts,
            other => IpProtocol::Unknown(other),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(p: IpProtocol) -> u8 {
        match p {
            IpProtocol::HopByHop => 0,
            IpProtocol::Icmp => 1,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Ipv6Route => 43,
            IpProtocol::Ipv6Frag => 44,
            IpProtocol::Icmpv6 => 58,
            IpProtocol::Ipv6NoNxt => 59,
            IpProtocol::Ipv6Opts => 60,
            IpProtocol::Unknown(v) => v,
        }
    }
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpProtocol::HopByHop => f.write_str("hop-by-hop"),
            IpProtocol::Icmp => f.write_str("ICMP"),
            IpProtocol::Tcp => f.write_str("TCP"),
            IpProtocol::Udp => f.write_str("UDP"),
            IpProtocol::Ipv6Route => f.write_str("IPv6-route"),
            IpProtocol::Ipv6Frag => f.write_str("IPv6-frag"),
            IpProtocol::Icmpv6 => f.write_str("ICMPv6"),
            IpProtocol::Ipv6NoNxt => f.write_str("IPv6-nonxt"),
            IpProtocol::Ipv6Opts => f.write_str("IPv6-opts"),
            IpProtocol::Unknown(v) => write!(f, "ip-proto-{v}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_round_trips() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(IpProtocol::from(v)), v);
        }
    }
}
