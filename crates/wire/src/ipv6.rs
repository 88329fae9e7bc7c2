//! IPv6 fixed headers (RFC 8200 §3). Extension headers are walked by [`crate::ipv6ext`]: the view
//! exposes `next_header` and the payload after the fixed header, and the stack decides.
//! Jumbograms (RFC 2675) are not supported: a zero payload length means an empty payload.

use core::fmt;
use core::net::Ipv6Addr;

use crate::bytes::{ensure_len, get_u16, get_u32, set_u16, set_u32};
use crate::ip::IpProtocol;
use crate::{Error, Result};

mod field {
    pub const VER_TC_FLOW: usize = 0;
    pub const LENGTH: usize = 4;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: usize = 8;
    pub const DST: usize = 24;
}

/// The length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;

/// A view of an IPv6 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn addr(b: &[u8], at: usize) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    Ipv6Addr::from(a)
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps a buffer without checking it; getters may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Ipv6Packet<T> {
        Ipv6Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    ///
    /// # Errors
    /// As [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Ipv6Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the fixed header and the declared payload fit; bytes past them
    /// (link-layer padding) are ignored.
    ///
    /// # Errors
    /// [`Error::Truncated`] when they do not.
    pub fn check_len(&self) -> Result<()> {
        self.check_len_parts(0)
    }

    /// [`check_len`](Self::check_len) for a packet that goes on past this buffer for
    /// `more` bytes (a frame that arrived in several buffers): the fixed header must be
    /// in this buffer, the payload within it and the `more` bytes after it.
    ///
    /// # Errors
    /// As [`check_len`](Self::check_len).
    pub fn check_len_parts(&self, more: usize) -> Result<()> {
        let len = self.buffer.as_ref().len();
        ensure_len(len, HEADER_LEN)?;
        ensure_len(len + more, HEADER_LEN + usize::from(self.payload_len()))
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The version field (6).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TC_FLOW] >> 4
    }

    /// The traffic class (DSCP and ECN).
    pub fn traffic_class(&self) -> u8 {
        (get_u16(self.buffer.as_ref(), field::VER_TC_FLOW) >> 4) as u8
    }

    /// The 20-bit flow label (RFC 6437).
    pub fn flow_label(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VER_TC_FLOW) & 0x000f_ffff
    }

    /// The payload length (extension headers included).
    pub fn payload_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// The type of the header after the fixed header.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// The hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// The source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        addr(self.buffer.as_ref(), field::SRC)
    }

    /// The destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        addr(self.buffer.as_ref(), field::DST)
    }

    /// The header length (40).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6Packet<&'a T> {
    /// The payload as declared by `payload_len`, borrowed for the buffer's lifetime.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets version, traffic class and flow label together.
    pub fn set_version_tc_flow(&mut self, version: u8, traffic_class: u8, flow_label: u32) {
        let w = (u32::from(version) << 28)
            | (u32::from(traffic_class) << 20)
            | (flow_label & 0x000f_ffff);
        set_u32(self.buffer.as_mut(), field::VER_TC_FLOW, w);
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, p: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = p.into();
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC..field::SRC + 16].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::DST..field::DST + 16].copy_from_slice(&a.octets());
    }

    /// The payload as declared by `payload_len`, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Ipv6Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The meaning of a fixed IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// The header after this one.
    pub next_header: IpProtocol,
    /// Payload length in bytes.
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Reads a fixed header.
    ///
    /// # Errors
    /// [`Error::Truncated`] from `check_len`; [`Error::Unsupported`] when the version
    /// is not 6.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Ipv6Packet<&T>) -> Result<Ipv6Repr> {
        Ipv6Repr::parse_parts(packet, 0)
    }

    /// [`parse`](Self::parse) for a packet that goes on past the packet's buffer for
    /// `more` bytes ([`Ipv6Packet::check_len_parts`]).
    ///
    /// # Errors
    /// As [`parse`](Self::parse).
    pub fn parse_parts<T: AsRef<[u8]> + ?Sized>(
        packet: &Ipv6Packet<&T>,
        more: usize,
    ) -> Result<Ipv6Repr> {
        packet.check_len_parts(more)?;
        if packet.version() != 6 {
            return Err(Error::Unsupported);
        }
        Ok(Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    /// The header length (40).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the fixed header; the payload is left untouched.
    ///
    /// # Panics
    /// When the buffer is shorter than 40 bytes or `payload_len` exceeds 65535.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) {
        let len = u16::try_from(self.payload_len).expect("IPv6 payload over 65535 bytes");
        packet.set_version_tc_flow(6, self.traffic_class, self.flow_label);
        packet.set_payload_len(len);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

impl fmt::Display for Ipv6Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IP6 {} > {}: {} hlim {} len {}",
            self.src_addr, self.dst_addr, self.next_header, self.hop_limit, self.payload_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Header of an ICMPv6 neighbour solicitation (hand-built): fe80::1 > ff02::1:ff00:2,
    // payload 32, next header 58, hop limit 255, traffic class 0, flow 0.
    const NS: [u8; 40] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0x01, 0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0x00, 0x00, 0x02,
    ];

    fn repr() -> Ipv6Repr {
        Ipv6Repr {
            src_addr: "fe80::1".parse().unwrap(),
            dst_addr: "ff02::1:ff00:2".parse().unwrap(),
            next_header: IpProtocol::Icmpv6,
            payload_len: 32,
            hop_limit: 255,
            traffic_class: 0,
            flow_label: 0,
        }
    }

    #[test]
    fn deconstruct_and_construct() {
        let mut b = [0u8; 72];
        b[..40].copy_from_slice(&NS);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Ipv6Repr::parse(&p).unwrap(), repr());
        assert_eq!(p.payload().len(), 32);
        let mut out = [0u8; 40];
        repr().emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, NS);
    }

    #[test]
    fn tc_and_flow_label() {
        let mut r = repr();
        r.traffic_class = 0xb8;
        r.flow_label = 0xabcde;
        let mut b = [0u8; 72];
        r.emit(&mut Ipv6Packet::new_unchecked(&mut b[..]));
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Ipv6Repr::parse(&p).unwrap(), r);
    }

    #[test]
    fn errors() {
        assert_eq!(
            Ipv6Packet::new_checked(&NS[..39]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Ipv6Packet::new_checked(&NS[..]).unwrap_err(),
            Error::Truncated
        );
        let mut b = [0u8; 72];
        b[..40].copy_from_slice(&NS);
        b[0] = 0x40;
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Ipv6Repr::parse(&p).unwrap_err(), Error::Unsupported);
    }
}
