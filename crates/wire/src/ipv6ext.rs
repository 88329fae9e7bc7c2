//! IPv6 extension headers (RFC 8200 §4): a bounded walk of the header chain between the
//! fixed header and the upper-layer header, the fragment header (§4.5) and the option
//! TLVs of hop-by-hop and destination options headers (§4.2).
//!
//! In: the next-header value of the fixed header and the bytes after it. Out: an
//! [`Ipv6Chain`] saying where the upper-layer header starts, what it is, and the fragment
//! header if there was one; or a [`ChainError`] saying why the packet must be dropped
//! (and, for RFC 8200's "send a Parameter Problem" cases, the code and pointer to send).
//!
//! Invariants: the walk reads at most [`MAX_EXT_HEADERS`] headers and
//! [`MAX_CHAIN_LEN`] bytes, never loops (each header moves forward by at least 8 bytes)
//! and never reads past the slice; a chain that breaks RFC 8200 §4.1's order (hop-by-hop
//! not first, a header kind repeated, more than two destination options headers) is
//! refused, as hundreds of headers would otherwise cost per-packet work an attacker
//! chooses (RFC 7045 §2.2 lets a node refuse such chains; RFC 8504 §5.3 recommends a
//! bound).

use core::fmt;

use crate::bytes::{get_u16, get_u32, set_u16, set_u32};
use crate::ip::IpProtocol;
use crate::{Error, Result};

/// Extension headers the walk reads at most before giving up. RFC 8200 §4.1 names six
/// kinds, destination options twice: a conforming chain has at most seven.
pub const MAX_EXT_HEADERS: usize = 8;

/// Bytes of extension headers the walk reads at most. RFC 7112 §5 asks the whole chain
/// to fit the first fragment, and 1280 - 40 bytes (the minimum MTU, RFC 8200 §5, less the
/// fixed header) is what the smallest link guarantees of it.
pub const MAX_CHAIN_LEN: usize = 1240;

/// The fragment header's length (RFC 8200 §4.5).
pub const FRAG_HEADER_LEN: usize = 8;

/// Whether an IPv6 next-header value names an extension header this module walks.
pub fn is_extension(p: IpProtocol) -> bool {
    matches!(
        p,
        IpProtocol::HopByHop | IpProtocol::Ipv6Route | IpProtocol::Ipv6Frag | IpProtocol::Ipv6Opts
    )
}

/// The fragment header (RFC 8200 §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6FragRepr {
    /// The header after the fragment header (of the first fragment's fragmentable part).
    pub next_header: IpProtocol,
    /// The offset of this fragment's data in the original fragmentable part, in bytes
    /// (a multiple of 8).
    pub offset: u16,
    /// More fragments follow.
    pub more_frags: bool,
    /// The identification shared by the fragments of one packet.
    pub ident: u32,
}

impl Ipv6FragRepr {
    /// Reads a fragment header from the start of `b`.
    ///
    /// # Errors
    /// [`Error::Truncated`] when fewer than 8 bytes are given.
    pub fn parse(b: &[u8]) -> Result<Ipv6FragRepr> {
        if b.len() < FRAG_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let off_flags = get_u16(b, 2);
        Ok(Ipv6FragRepr {
            next_header: IpProtocol::from(b[0]),
            offset: off_flags & !0x7,
            more_frags: off_flags & 1 != 0,
            ident: get_u32(b, 4),
        })
    }

    /// Whether this is an atomic fragment (RFC 8021 §2, RFC 6946): offset 0 and no more
    /// fragments, i.e. the whole packet.
    pub fn is_atomic(&self) -> bool {
        self.offset == 0 && !self.more_frags
    }

    /// Writes the header into the first 8 bytes of `b`; reserved bits are zero.
    ///
    /// # Panics
    /// When `b` is shorter than 8 bytes.
    pub fn emit(&self, b: &mut [u8]) {
        b[0] = self.next_header.into();
        b[1] = 0;
        set_u16(b, 2, (self.offset & !0x7) | u16::from(self.more_frags));
        set_u32(b, 4, self.ident);
    }
}

impl fmt::Display for Ipv6FragRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "frag (0x{:08x}:{}|{})",
            self.ident,
            self.offset,
            if self.more_frags { "M" } else { "" }
        )
    }
}

/// What an unrecognised option asks of us (RFC 8200 §4.2, the two high-order bits of its
/// type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OptionAction {
    /// 00: skip it and go on.
    Skip,
    /// 01: discard the packet silently.
    Discard,
    /// 10: discard and send a Parameter Problem, code 2, whatever the destination.
    DiscardSendIcmp,
    /// 11: discard and send a Parameter Problem, code 2, unless the destination was
    /// multicast.
    DiscardSendIcmpUnicast,
}

impl OptionAction {
    fn of(option_type: u8) -> OptionAction {
        match option_type >> 6 {
            0 => OptionAction::Skip,
            1 => OptionAction::Discard,
            2 => OptionAction::DiscardSendIcmp,
            _ => OptionAction::DiscardSendIcmpUnicast,
        }
    }
}

/// Why a header chain was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChainError {
    /// A header runs past the end of the packet.
    Truncated,
    /// A header breaks RFC 8200: hop-by-hop not first (§4.3), a header kind repeated
    /// (§4.1), an option running past its header (§4.2).
    Malformed,
    /// More than [`MAX_EXT_HEADERS`] headers or [`MAX_CHAIN_LEN`] bytes.
    TooLong,
    /// An unrecognised option whose action is not "skip" (RFC 8200 §4.2). `pointer` is
    /// the offset of its type byte from the start of the fixed header, for the
    /// Parameter Problem (code 2) the action may ask for.
    UnknownOption {
        /// What the option's type asks.
        action: OptionAction,
        /// Offset of the option type from the start of the IPv6 header.
        pointer: u32,
    },
    /// A routing header with segments left that we, a host, would have to forward
    /// (RFC 8200 §4.4: an unrecognised routing type with segments left is answered with
    /// a Parameter Problem, code 0, pointing at the type; type 0 is deprecated by
    /// RFC 5095 and treated as unrecognised).
    Routing {
        /// Offset of the routing type from the start of the IPv6 header.
        pointer: u32,
    },
}

impl From<ChainError> for Error {
    fn from(e: ChainError) -> Error {
        match e {
            ChainError::Truncated => Error::Truncated,
            ChainError::Malformed | ChainError::TooLong => Error::Malformed,
            ChainError::UnknownOption { .. } | ChainError::Routing { .. } => Error::Unsupported,
        }
    }
}

impl fmt::Display for ChainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChainError::Truncated => f.write_str("extension header chain truncated"),
            ChainError::Malformed => f.write_str("malformed extension header chain"),
            ChainError::TooLong => f.write_str("extension header chain too long"),
            ChainError::UnknownOption { pointer, .. } => {
                write!(f, "unrecognised option at {pointer}")
            }
            ChainError::Routing { pointer } => write!(f, "routing header at {pointer}"),
        }
    }
}

impl core::error::Error for ChainError {}

/// Where the walk of a header chain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Chain {
    /// The header after the last extension header: TCP, UDP, ICMPv6, "no next header"
    /// or anything else (not walked further).
    pub upper: IpProtocol,
    /// Bytes of extension headers, from the end of the fixed header to the upper
    /// header (or, in a fragment, to the fragment's data).
    pub header_len: usize,
    /// The fragment header, if the chain had one. Headers after it are not walked
    /// (they are part of the fragmented data): `upper` is then the fragment header's
    /// next header and `header_len` ends after it.
    pub fragment: Option<Ipv6FragRepr>,
    /// Extension headers read.
    pub count: usize,
    /// The offset (from the end of the fixed header) of the byte that names `upper`:
    /// the last extension header's first byte; `None` when there is none (the fixed
    /// header's next-header field names it). For a Parameter Problem's pointer.
    pub next_header_at: Option<usize>,
}

/// Walks the chain that starts with `first` (the fixed header's next header) over
/// `payload` (the bytes after the fixed header).
///
/// # Errors
/// A [`ChainError`]; the packet must then be dropped (and, for
/// [`ChainError::UnknownOption`] and [`ChainError::Routing`], possibly answered).
pub fn walk(first: IpProtocol, payload: &[u8]) -> core::result::Result<Ipv6Chain, ChainError> {
    let mut next = first;
    let mut at = 0usize;
    let mut count = 0usize;
    let mut seen_dst_opts = 0u8;
    let mut seen_route = false;
    let mut last_at = None;
    while is_extension(next) {
        if count >= MAX_EXT_HEADERS {
            return Err(ChainError::TooLong);
        }
        // RFC 8200 §4.3: hop-by-hop options only immediately after the fixed header.
        if next == IpProtocol::HopByHop && count != 0 {
            return Err(ChainError::Malformed);
        }
        let rest = &payload[at..];
        if rest.len() < 8 {
            return Err(ChainError::Truncated);
        }
        let this = next;
        next = IpProtocol::from(rest[0]);
        count += 1;
        if this == IpProtocol::Ipv6Frag {
            // §4.5: the headers after it belong to the fragmentable part.
            let frag = Ipv6FragRepr::parse(rest).map_err(|_| ChainError::Truncated)?;
            return Ok(Ipv6Chain {
                upper: frag.next_header,
                header_len: at + FRAG_HEADER_LEN,
                fragment: Some(frag),
                count,
                next_header_at: Some(at),
            });
        }
        // Hop-by-hop, routing and destination options share the length format: in
        // 8-octet units, not counting the first 8 (§4.3, §4.4, §4.6).
        let len = (usize::from(rest[1]) + 1) * 8;
        if at + len > MAX_CHAIN_LEN {
            return Err(ChainError::TooLong);
        }
        if rest.len() < len {
            return Err(ChainError::Truncated);
        }
        let header = &rest[..len];
        match this {
            IpProtocol::HopByHop => check_options(header, 40 + at)?,
            IpProtocol::Ipv6Opts => {
                // §4.1: at most twice (before a routing header and before the upper one).
                seen_dst_opts += 1;
                if seen_dst_opts > 2 {
                    return Err(ChainError::Malformed);
                }
                check_options(header, 40 + at)?;
            }
            _ => {
                if seen_route {
                    return Err(ChainError::Malformed);
                }
                seen_route = true;
                // §4.4: segments left 0 means the header is ours to ignore; otherwise a
                // host has nowhere to forward to (RFC 5095 for type 0).
                if header[3] != 0 {
                    return Err(ChainError::Routing {
                        pointer: (40 + at + 2) as u32,
                    });
                }
            }
        }
        last_at = Some(at);
        at += len;
    }
    Ok(Ipv6Chain {
        upper: next,
        header_len: at,
        fragment: None,
        count,
        next_header_at: last_at,
    })
}

/// Walks the option TLVs of a hop-by-hop or destination options header (RFC 8200 §4.2):
/// Pad1 and PadN are skipped, other options are unrecognised (we implement none) and
/// their action applies. `base` is the header's offset from the start of the IPv6
/// header, for the pointer.
fn check_options(header: &[u8], base: usize) -> core::result::Result<(), ChainError> {
    let mut i = 2;
    while i < header.len() {
        let t = header[i];
        if t == 0 {
            // Pad1: a single byte.
            i += 1;
            continue;
        }
        let Some(&len) = header.get(i + 1) else {
            return Err(ChainError::Malformed);
        };
        let end = i + 2 + usize::from(len);
        if end > header.len() {
            return Err(ChainError::Malformed);
        }
        if t != 1 {
            match OptionAction::of(t) {
                OptionAction::Skip => {}
                action => {
                    return Err(ChainError::UnknownOption {
                        action,
                        pointer: (base + i) as u32,
                    })
                }
            }
        }
        i = end;
    }
    Ok(())
}

/// Writes a hop-by-hop or destination options header of `len` bytes (a multiple of 8,
/// at least 8) holding only padding, with next header `next`: what a test or fuzz seed
/// needs to build a chain.
///
/// # Panics
/// When `len` is not a multiple of 8 in 8..=2048 or `b` is shorter than `len`.
pub fn emit_padding_header(b: &mut [u8], next: IpProtocol, len: usize) {
    assert!(len >= 8 && len.is_multiple_of(8) && len <= 2048);
    b[0] = next.into();
    b[1] = (len / 8 - 1) as u8;
    // One PadN option covering the rest (RFC 8200 §4.2).
    b[2] = 1;
    b[3] = (len - 4) as u8;
    b[4..len].fill(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(next: IpProtocol, len: usize) -> alloc_free::Buf {
        let mut b = alloc_free::Buf::default();
        emit_padding_header(&mut b.0[..len], next, len);
        b.1 = len;
        b
    }

    // A tiny fixed buffer so the tests need no allocator in no_std builds.
    mod alloc_free {
        pub struct Buf(pub [u8; 256], pub usize);
        impl Default for Buf {
            fn default() -> Self {
                Buf([0; 256], 0)
            }
        }
    }

    #[test]
    fn no_extension_headers() {
        let c = walk(IpProtocol::Tcp, &[0u8; 20]).unwrap();
        assert_eq!((c.upper, c.header_len, c.count), (IpProtocol::Tcp, 0, 0));
        assert!(c.fragment.is_none());
    }

    #[test]
    fn hop_by_hop_dst_opts_then_fragment() {
        let mut p = [0u8; 64];
        emit_padding_header(&mut p[..8], IpProtocol::Ipv6Opts, 8);
        emit_padding_header(&mut p[8..24], IpProtocol::Ipv6Frag, 16);
        let frag = Ipv6FragRepr {
            next_header: IpProtocol::Udp,
            offset: 1232,
            more_frags: true,
            ident: 0xdead_beef,
        };
        frag.emit(&mut p[24..32]);
        let c = walk(IpProtocol::HopByHop, &p).unwrap();
        assert_eq!(c.upper, IpProtocol::Udp);
        assert_eq!(c.header_len, 32);
        assert_eq!(c.fragment, Some(frag));
        assert_eq!(c.count, 3);
        assert_eq!(Ipv6FragRepr::parse(&p[24..]).unwrap(), frag);
        assert!(!frag.is_atomic());
    }

    #[test]
    fn hop_by_hop_must_be_first() {
        let mut p = [0u8; 16];
        emit_padding_header(&mut p[..8], IpProtocol::HopByHop, 8);
        emit_padding_header(&mut p[8..], IpProtocol::Tcp, 8);
        assert_eq!(
            walk(IpProtocol::Ipv6Opts, &p).unwrap_err(),
            ChainError::Malformed
        );
    }

    /// A chain that "loops": destination options after destination options after
    /// destination options (each names the next the same kind).
    #[test]
    fn repeated_headers_refused() {
        let mut p = [0u8; 64];
        for i in 0..8 {
            emit_padding_header(&mut p[i * 8..i * 8 + 8], IpProtocol::Ipv6Opts, 8);
        }
        assert_eq!(
            walk(IpProtocol::Ipv6Opts, &p).unwrap_err(),
            ChainError::Malformed
        );
        // Two routing headers.
        let mut r = [0u8; 16];
        r[0] = 43;
        assert_eq!(
            walk(IpProtocol::Ipv6Route, &r).unwrap_err(),
            ChainError::Malformed
        );
    }

    #[test]
    fn overrun_and_too_long() {
        let b = opts(IpProtocol::Tcp, 16);
        assert_eq!(
            walk(IpProtocol::HopByHop, &b.0[..b.1 - 1]).unwrap_err(),
            ChainError::Truncated
        );
        assert_eq!(
            walk(IpProtocol::HopByHop, &b.0[..7]).unwrap_err(),
            ChainError::Truncated
        );
        // A header declaring 2048 bytes: refused by the byte bound before reading.
        let mut big = [0u8; 16];
        big[0] = 6;
        big[1] = 255;
        assert_eq!(
            walk(IpProtocol::HopByHop, &big).unwrap_err(),
            ChainError::TooLong
        );
        // An option that runs past its header.
        let mut o = [0u8; 8];
        o[0] = 6;
        o[2] = 1;
        o[3] = 9;
        assert_eq!(
            walk(IpProtocol::HopByHop, &o).unwrap_err(),
            ChainError::Malformed
        );
    }

    #[test]
    fn unknown_options_follow_their_action() {
        let mut o = [0u8; 8];
        o[0] = 6;
        // Type 0x1e (action 00): skipped.
        o[2] = 0x1e;
        o[3] = 4;
        assert!(walk(IpProtocol::HopByHop, &o).is_ok());
        o[2] = 0x9e; // action 10
        assert_eq!(
            walk(IpProtocol::HopByHop, &o).unwrap_err(),
            ChainError::UnknownOption {
                action: OptionAction::DiscardSendIcmp,
                pointer: 42
            }
        );
        o[2] = 0x5e; // action 01
        assert!(matches!(
            walk(IpProtocol::HopByHop, &o),
            Err(ChainError::UnknownOption {
                action: OptionAction::Discard,
                ..
            })
        ));
    }

    #[test]
    fn routing_header() {
        let mut r = [0u8; 24];
        r[0] = 6;
        r[1] = 2;
        // Segments left 0: ignored (RFC 8200 §4.4).
        assert_eq!(
            walk(IpProtocol::Ipv6Route, &r).unwrap().upper,
            IpProtocol::Tcp
        );
        r[3] = 1;
        assert_eq!(
            walk(IpProtocol::Ipv6Route, &r).unwrap_err(),
            ChainError::Routing { pointer: 42 }
        );
    }

    #[test]
    fn atomic_fragment() {
        let f = Ipv6FragRepr {
            next_header: IpProtocol::Tcp,
            offset: 0,
            more_frags: false,
            ident: 7,
        };
        let mut b = [0u8; 8];
        f.emit(&mut b);
        assert!(Ipv6FragRepr::parse(&b).unwrap().is_atomic());
        assert_eq!(Ipv6FragRepr::parse(&b[..7]), Err(Error::Truncated));
    }
}
