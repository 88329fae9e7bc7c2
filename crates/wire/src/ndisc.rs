//! Neighbor Discovery (RFC 4861 §4): the bodies of Router Solicitation and
//! Advertisement, Neighbor Solicitation and Advertisement and Redirect, and their
//! options (§4.6: source/target link-layer address, prefix information, MTU).
//!
//! The ICMPv6 layer ([`crate::icmpv6`]) reads the 4-byte ICMPv6 header and hands the rest
//! here. Invariants: every option is checked before a message parses (§4.6: "Nodes MUST
//! silently discard an ND packet that contains an option with length zero"; an option
//! running past the message or a prefix/MTU option of the wrong size is malformed too),
//! so iterating a parsed message's [`NdiscOptions`] never fails or panics.

use core::fmt;
use core::net::Ipv6Addr;

use crate::bytes::{get_u16, get_u32, set_u16, set_u32};
use crate::ethernet::EthernetAddress;
use crate::{Error, Result};

/// Option types (RFC 4861 §4.6).
mod opt {
    pub const SOURCE_LLADDR: u8 = 1;
    pub const TARGET_LLADDR: u8 = 2;
    pub const PREFIX_INFO: u8 = 3;
    pub const MTU: u8 = 5;
}

/// The length of a link-layer address option for Ethernet (RFC 4861 §4.6.1; RFC 2464 §6).
pub const LLADDR_OPTION_LEN: usize = 8;
/// The length of a prefix information option (§4.6.2).
pub const PREFIX_OPTION_LEN: usize = 32;
/// The length of an MTU option (§4.6.4).
pub const MTU_OPTION_LEN: usize = 8;

/// A prefix information option (RFC 4861 §4.6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PrefixInfo {
    /// Prefix length in bits (0..=128).
    pub prefix_len: u8,
    /// The on-link flag (L).
    pub on_link: bool,
    /// The autonomous address-configuration flag (A, RFC 4862 §5.5.3).
    pub autonomous: bool,
    /// Valid lifetime in seconds (0xffffffff: infinite).
    pub valid_lifetime: u32,
    /// Preferred lifetime in seconds.
    pub preferred_lifetime: u32,
    /// The prefix (bits past `prefix_len` should be zero; receivers ignore them).
    pub prefix: Ipv6Addr,
}

/// One ND option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NdiscOption<'a> {
    /// Source link-layer address (§4.6.1).
    SourceLinkLayer(EthernetAddress),
    /// Target link-layer address (§4.6.1).
    TargetLinkLayer(EthernetAddress),
    /// Prefix information (§4.6.2).
    PrefixInfo(PrefixInfo),
    /// MTU (§4.6.4).
    Mtu(u32),
    /// Any other option (or a link-layer option of another size than Ethernet's): its
    /// type and body. RFC 4861 §4.6: "silently ignored".
    Unknown(u8, &'a [u8]),
}

impl NdiscOption<'_> {
    /// Bytes the option takes on the wire.
    pub fn buffer_len(&self) -> usize {
        match self {
            NdiscOption::SourceLinkLayer(_) | NdiscOption::TargetLinkLayer(_) => LLADDR_OPTION_LEN,
            NdiscOption::PrefixInfo(_) => PREFIX_OPTION_LEN,
            NdiscOption::Mtu(_) => MTU_OPTION_LEN,
            NdiscOption::Unknown(_, body) => (2 + body.len()).div_ceil(8) * 8,
        }
    }

    /// Writes the option into the first [`buffer_len`](Self::buffer_len) bytes of `b`.
    ///
    /// # Panics
    /// When `b` is too short, or an unknown option's body is over 2038 bytes.
    pub fn emit(&self, b: &mut [u8]) {
        let len = self.buffer_len();
        let b = &mut b[..len];
        b.fill(0);
        b[1] = (len / 8) as u8;
        match *self {
            NdiscOption::SourceLinkLayer(mac) | NdiscOption::TargetLinkLayer(mac) => {
                b[0] = if matches!(self, NdiscOption::SourceLinkLayer(_)) {
                    opt::SOURCE_LLADDR
                } else {
                    opt::TARGET_LLADDR
                };
                b[2..8].copy_from_slice(&mac.0);
            }
            NdiscOption::PrefixInfo(p) => {
                b[0] = opt::PREFIX_INFO;
                b[2] = p.prefix_len;
                b[3] = (u8::from(p.on_link) << 7) | (u8::from(p.autonomous) << 6);
                set_u32(b, 4, p.valid_lifetime);
                set_u32(b, 8, p.preferred_lifetime);
                b[16..32].copy_from_slice(&p.prefix.octets());
            }
            NdiscOption::Mtu(mtu) => {
                b[0] = opt::MTU;
                set_u32(b, 4, mtu);
            }
            NdiscOption::Unknown(t, body) => {
                assert!(len <= 255 * 8);
                b[0] = t;
                b[2..2 + body.len()].copy_from_slice(body);
            }
        }
    }
}

/// The options of an ND message: a validated byte slice, iterated on demand (no
/// allocation, any number of prefixes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NdiscOptions<'a> {
    bytes: &'a [u8],
}

impl<'a> NdiscOptions<'a> {
    /// Checks every option in `bytes` (RFC 4861 §4.6).
    ///
    /// # Errors
    /// [`Error::Malformed`] for an option of length zero, one running past the end,
    /// or a prefix information or MTU option of the wrong length.
    pub fn parse(bytes: &'a [u8]) -> Result<NdiscOptions<'a>> {
        let mut i = 0;
        while i < bytes.len() {
            if bytes.len() - i < 2 {
                return Err(Error::Malformed);
            }
            let len = usize::from(bytes[i + 1]) * 8;
            if len == 0 || i + len > bytes.len() {
                return Err(Error::Malformed);
            }
            let ok = match bytes[i] {
                opt::PREFIX_INFO => len == PREFIX_OPTION_LEN,
                opt::MTU => len == MTU_OPTION_LEN,
                _ => true,
            };
            if !ok {
                return Err(Error::Malformed);
            }
            i += len;
        }
        Ok(NdiscOptions { bytes })
    }

    /// The raw option bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Every option, in order.
    pub fn iter(&self) -> NdiscOptionsIter<'a> {
        NdiscOptionsIter { rest: self.bytes }
    }

    /// The first source link-layer address option's address.
    pub fn source_lladdr(&self) -> Option<EthernetAddress> {
        self.iter().find_map(|o| match o {
            NdiscOption::SourceLinkLayer(m) => Some(m),
            _ => None,
        })
    }

    /// The first target link-layer address option's address.
    pub fn target_lladdr(&self) -> Option<EthernetAddress> {
        self.iter().find_map(|o| match o {
            NdiscOption::TargetLinkLayer(m) => Some(m),
            _ => None,
        })
    }

    /// The first MTU option's value.
    pub fn mtu(&self) -> Option<u32> {
        self.iter().find_map(|o| match o {
            NdiscOption::Mtu(m) => Some(m),
            _ => None,
        })
    }

    /// The prefix information options.
    pub fn prefixes(&self) -> impl Iterator<Item = PrefixInfo> + 'a {
        self.iter().filter_map(|o| match o {
            NdiscOption::PrefixInfo(p) => Some(p),
            _ => None,
        })
    }
}

/// The iterator of [`NdiscOptions::iter`].
#[derive(Debug, Clone)]
pub struct NdiscOptionsIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for NdiscOptionsIter<'a> {
    type Item = NdiscOption<'a>;

    fn next(&mut self) -> Option<NdiscOption<'a>> {
        if self.rest.len() < 2 {
            return None;
        }
        let len = usize::from(self.rest[1]) * 8;
        if len == 0 || len > self.rest.len() {
            // Not reachable for a parsed `NdiscOptions`; stop rather than loop.
            self.rest = &[];
            return None;
        }
        let (b, rest) = self.rest.split_at(len);
        self.rest = rest;
        Some(match (b[0], len) {
            (opt::SOURCE_LLADDR, LLADDR_OPTION_LEN) => {
                NdiscOption::SourceLinkLayer(EthernetAddress::from_bytes(&b[2..8]))
            }
            (opt::TARGET_LLADDR, LLADDR_OPTION_LEN) => {
                NdiscOption::TargetLinkLayer(EthernetAddress::from_bytes(&b[2..8]))
            }
            (opt::PREFIX_INFO, PREFIX_OPTION_LEN) => {
                let mut a = [0u8; 16];
                a.copy_from_slice(&b[16..32]);
                NdiscOption::PrefixInfo(PrefixInfo {
                    prefix_len: b[2],
                    on_link: b[3] & 0x80 != 0,
                    autonomous: b[3] & 0x40 != 0,
                    valid_lifetime: get_u32(b, 4),
                    preferred_lifetime: get_u32(b, 8),
                    prefix: Ipv6Addr::from(a),
                })
            }
            (opt::MTU, MTU_OPTION_LEN) => NdiscOption::Mtu(get_u32(b, 4)),
            (t, _) => NdiscOption::Unknown(t, &b[2..]),
        })
    }
}

/// Neighbor Advertisement flags (RFC 4861 §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NaFlags {
    /// R: the sender is a router.
    pub router: bool,
    /// S: sent in response to a solicitation.
    pub solicited: bool,
    /// O: override an existing cache entry.
    pub override_: bool,
}

/// The meaning of an ND message (the ICMPv6 body after type, code and checksum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NdiscRepr<'a> {
    /// Router Solicitation (§4.1).
    RouterSolicit {
        /// The options (a source link-layer address, unless sent from `::`).
        options: NdiscOptions<'a>,
    },
    /// Router Advertisement (§4.2).
    RouterAdvert {
        /// Cur Hop Limit (0: unspecified).
        hop_limit: u8,
        /// The M and O flags and the rest of that byte (RFC 4861, RFC 4191, RFC 8425).
        flags: u8,
        /// Router lifetime in seconds; 0: not a default router.
        router_lifetime: u16,
        /// Reachable Time in milliseconds (0: unspecified).
        reachable_time: u32,
        /// Retrans Timer in milliseconds (0: unspecified).
        retrans_time: u32,
        /// The options (source link-layer address, MTU, prefixes).
        options: NdiscOptions<'a>,
    },
    /// Neighbor Solicitation (§4.3).
    NeighborSolicit {
        /// The address being resolved (or checked by DAD).
        target: Ipv6Addr,
        /// The options (source link-layer address).
        options: NdiscOptions<'a>,
    },
    /// Neighbor Advertisement (§4.4).
    NeighborAdvert {
        /// R, S and O.
        flags: NaFlags,
        /// The address advertised.
        target: Ipv6Addr,
        /// The options (target link-layer address).
        options: NdiscOptions<'a>,
    },
    /// Redirect (§4.5): parsed so it is validated and counted, then ignored (a host
    /// with one default router has nothing to redirect).
    Redirect {
        /// The better first hop.
        target: Ipv6Addr,
        /// The destination redirected.
        dst: Ipv6Addr,
        /// The options.
        options: NdiscOptions<'a>,
    },
}

/// The fixed body length of each message after the 4-byte ICMPv6 header.
const RS_LEN: usize = 4;
const RA_LEN: usize = 12;
const NS_LEN: usize = 20;
const REDIRECT_LEN: usize = 36;

fn addr_at(b: &[u8], at: usize) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    Ipv6Addr::from(a)
}

impl<'a> NdiscRepr<'a> {
    /// Reads the body (`body` starts after the ICMPv6 checksum) of message type
    /// `msg_type` (133..=137).
    ///
    /// # Errors
    /// [`Error::Truncated`] for a body shorter than its fixed part; [`Error::Malformed`]
    /// for bad options (see [`NdiscOptions::parse`]) or a multicast NS/NA target
    /// (RFC 4861 §7.1.1, §7.1.2); [`Error::Unsupported`] for another type.
    pub fn parse(msg_type: u8, body: &'a [u8]) -> Result<NdiscRepr<'a>> {
        let need = |n: usize| {
            if body.len() < n {
                Err(Error::Truncated)
            } else {
                Ok(())
            }
        };
        match msg_type {
            133 => {
                need(RS_LEN)?;
                Ok(NdiscRepr::RouterSolicit {
                    options: NdiscOptions::parse(&body[RS_LEN..])?,
                })
            }
            134 => {
                need(RA_LEN)?;
                Ok(NdiscRepr::RouterAdvert {
                    hop_limit: body[0],
                    flags: body[1],
                    router_lifetime: get_u16(body, 2),
                    reachable_time: get_u32(body, 4),
                    retrans_time: get_u32(body, 8),
                    options: NdiscOptions::parse(&body[RA_LEN..])?,
                })
            }
            135 | 136 => {
                need(NS_LEN)?;
                let target = addr_at(body, 4);
                if target.is_multicast() {
                    return Err(Error::Malformed);
                }
                let options = NdiscOptions::parse(&body[NS_LEN..])?;
                if msg_type == 135 {
                    Ok(NdiscRepr::NeighborSolicit { target, options })
                } else {
                    let f = body[0];
                    Ok(NdiscRepr::NeighborAdvert {
                        flags: NaFlags {
                            router: f & 0x80 != 0,
                            solicited: f & 0x40 != 0,
                            override_: f & 0x20 != 0,
                        },
                        target,
                        options,
                    })
                }
            }
            137 => {
                need(REDIRECT_LEN)?;
                Ok(NdiscRepr::Redirect {
                    target: addr_at(body, 4),
                    dst: addr_at(body, 20),
                    options: NdiscOptions::parse(&body[REDIRECT_LEN..])?,
                })
            }
            _ => Err(Error::Unsupported),
        }
    }

    /// The ICMPv6 type of the message.
    pub fn msg_type(&self) -> u8 {
        match self {
            NdiscRepr::RouterSolicit { .. } => 133,
            NdiscRepr::RouterAdvert { .. } => 134,
            NdiscRepr::NeighborSolicit { .. } => 135,
            NdiscRepr::NeighborAdvert { .. } => 136,
            NdiscRepr::Redirect { .. } => 137,
        }
    }

    /// The options.
    pub fn options(&self) -> NdiscOptions<'a> {
        match *self {
            NdiscRepr::RouterSolicit { options }
            | NdiscRepr::RouterAdvert { options, .. }
            | NdiscRepr::NeighborSolicit { options, .. }
            | NdiscRepr::NeighborAdvert { options, .. }
            | NdiscRepr::Redirect { options, .. } => options,
        }
    }

    /// The body length emitted (after the ICMPv6 checksum).
    pub fn buffer_len(&self) -> usize {
        let fixed = match self {
            NdiscRepr::RouterSolicit { .. } => RS_LEN,
            NdiscRepr::RouterAdvert { .. } => RA_LEN,
            NdiscRepr::NeighborSolicit { .. } | NdiscRepr::NeighborAdvert { .. } => NS_LEN,
            NdiscRepr::Redirect { .. } => REDIRECT_LEN,
        };
        fixed + self.options().as_bytes().len()
    }

    /// Writes the body into the first [`buffer_len`](Self::buffer_len) bytes of `b`.
    ///
    /// # Panics
    /// When `b` is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit(&self, b: &mut [u8]) {
        let b = &mut b[..self.buffer_len()];
        b.fill(0);
        let fixed = match *self {
            NdiscRepr::RouterSolicit { .. } => RS_LEN,
            NdiscRepr::RouterAdvert {
                hop_limit,
                flags,
                router_lifetime,
                reachable_time,
                retrans_time,
                ..
            } => {
                b[0] = hop_limit;
                b[1] = flags;
                set_u16(b, 2, router_lifetime);
                set_u32(b, 4, reachable_time);
                set_u32(b, 8, retrans_time);
                RA_LEN
            }
            NdiscRepr::NeighborSolicit { target, .. } => {
                b[4..20].copy_from_slice(&target.octets());
                NS_LEN
            }
            NdiscRepr::NeighborAdvert { flags, target, .. } => {
                b[0] = (u8::from(flags.router) << 7)
                    | (u8::from(flags.solicited) << 6)
                    | (u8::from(flags.override_) << 5);
                b[4..20].copy_from_slice(&target.octets());
                NS_LEN
            }
            NdiscRepr::Redirect { target, dst, .. } => {
                b[4..20].copy_from_slice(&target.octets());
                b[20..36].copy_from_slice(&dst.octets());
                REDIRECT_LEN
            }
        };
        b[fixed..].copy_from_slice(self.options().as_bytes());
    }
}

impl fmt::Display for NdiscRepr<'_> {
    /// tcpdump style: `neighbor solicitation, who has fe80::1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NdiscRepr::RouterSolicit { .. } => f.write_str("router solicitation"),
            NdiscRepr::RouterAdvert {
                router_lifetime, ..
            } => write!(f, "router advertisement, lifetime {router_lifetime}s"),
            NdiscRepr::NeighborSolicit { target, .. } => {
                write!(f, "neighbor solicitation, who has {target}")
            }
            NdiscRepr::NeighborAdvert { target, .. } => {
                write!(f, "neighbor advertisement, tgt is {target}")
            }
            NdiscRepr::Redirect { target, dst, .. } => {
                write!(f, "redirect, {dst} to {target}")
            }
        }
    }
}

/// Writes `option` into `buf` and returns the options view of those bytes: how a sender
/// builds the single link-layer option of an NS, NA or RS without allocating.
///
/// # Panics
/// When `buf` is shorter than the option.
pub fn one_option<'b>(buf: &'b mut [u8], option: &NdiscOption<'_>) -> NdiscOptions<'b> {
    let len = option.buffer_len();
    option.emit(&mut buf[..len]);
    NdiscOptions { bytes: &buf[..len] }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);

    #[test]
    fn options_round_trip() {
        let mut b = [0u8; 48];
        let p = PrefixInfo {
            prefix_len: 64,
            on_link: true,
            autonomous: true,
            valid_lifetime: 86400,
            preferred_lifetime: 14400,
            prefix: "2001:2::".parse().unwrap(),
        };
        NdiscOption::SourceLinkLayer(MAC).emit(&mut b[..8]);
        NdiscOption::PrefixInfo(p).emit(&mut b[8..40]);
        NdiscOption::Mtu(1280).emit(&mut b[40..48]);
        let o = NdiscOptions::parse(&b).unwrap();
        assert_eq!(o.source_lladdr(), Some(MAC));
        assert_eq!(o.target_lladdr(), None);
        assert_eq!(o.mtu(), Some(1280));
        assert_eq!(o.prefixes().next(), Some(p));
        assert_eq!(o.iter().count(), 3);
    }

    #[test]
    fn zero_length_option_is_malformed() {
        let mut b = [0u8; 16];
        NdiscOption::SourceLinkLayer(MAC).emit(&mut b[..8]);
        b[8] = 1; // type 1, length 0
        assert_eq!(NdiscOptions::parse(&b), Err(Error::Malformed));
        // Past the end, odd tail, wrong prefix length.
        b[9] = 2;
        assert_eq!(NdiscOptions::parse(&b), Err(Error::Malformed));
        assert_eq!(NdiscOptions::parse(&b[..9]), Err(Error::Malformed));
        let mut p = [0u8; 8];
        p[0] = 3;
        p[1] = 1;
        assert_eq!(NdiscOptions::parse(&p), Err(Error::Malformed));
    }

    #[test]
    fn ns_na_round_trip() {
        let mut ob = [0u8; 8];
        let options = one_option(&mut ob, &NdiscOption::TargetLinkLayer(MAC));
        let na = NdiscRepr::NeighborAdvert {
            flags: NaFlags {
                router: false,
                solicited: true,
                override_: true,
            },
            target: "fe80::1".parse().unwrap(),
            options,
        };
        let mut b = [0u8; 28];
        na.emit(&mut b);
        assert_eq!(b[0], 0x60);
        assert_eq!(NdiscRepr::parse(136, &b).unwrap(), na);
        // A multicast target is malformed (RFC 4861 §7.1.1).
        b[4] = 0xff;
        assert_eq!(NdiscRepr::parse(136, &b), Err(Error::Malformed));
        assert_eq!(NdiscRepr::parse(135, &b[..19]), Err(Error::Truncated));
    }
}
