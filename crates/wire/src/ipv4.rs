//! IPv4 headers (RFC 791): a view that skips options safely and exposes fragment fields
//! so the stack can reassemble (RFC 791 §3.2, RFC 815), and a representation without
//! options (the stack never sends any).

use core::fmt;
use core::net::Ipv4Addr;

use crate::bytes::{check_declared, ensure_len, get_u16, set_u16};
use crate::checksum::{self, ChecksumMode};
use crate::ip::IpProtocol;
use crate::{Error, Result};

mod field {
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
}

/// The length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;

/// The "don't fragment" flag bit of the flags/fragment-offset word.
const DF: u16 = 0x4000;
/// The "more fragments" flag bit.
const MF: u16 = 0x2000;
/// The fragment offset, in units of 8 bytes.
const OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn addr(b: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3])
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps a buffer without checking it; getters may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Ipv4Packet<T> {
        Ipv4Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    ///
    /// # Errors
    /// As [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Ipv4Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the header (with options) and the whole datagram as `total_len`
    /// declares it fit in the buffer; afterwards no getter panics. The buffer may be
    /// longer than `total_len` (Ethernet pads short frames): the extra bytes are ignored.
    ///
    /// # Errors
    /// [`Error::Truncated`] when the buffer is too short; [`Error::Malformed`] when the
    /// header length is below 20 or `total_len` is below the header length.
    pub fn check_len(&self) -> Result<()> {
        self.check_len_parts(0)
    }

    /// [`check_len`](Self::check_len) for a datagram that goes on past this buffer for
    /// `more` bytes (a frame that arrived in several buffers): the header must be in
    /// this buffer, the datagram within it and the `more` bytes after it.
    ///
    /// # Errors
    /// As [`check_len`](Self::check_len).
    pub fn check_len_parts(&self, more: usize) -> Result<()> {
        let len = self.buffer.as_ref().len();
        ensure_len(len, HEADER_LEN)?;
        let header_len = self.header_len();
        check_declared(len, HEADER_LEN, header_len)?;
        check_declared(len + more, header_len, usize::from(self.total_len()))
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The version field (4 for IPv4).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// The header length in bytes, options included (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// The DSCP and ECN byte (former TOS, RFC 2474 and RFC 3168).
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }

    /// The differentiated services code point (upper six bits).
    pub fn dscp(&self) -> u8 {
        self.dscp_ecn() >> 2
    }

    /// The ECN codepoint (lower two bits, RFC 3168 §5).
    pub fn ecn(&self) -> u8 {
        self.dscp_ecn() & 0x03
    }

    /// The total length field: header plus payload, in bytes.
    pub fn total_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// The identification field.
    pub fn ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::IDENT)
    }

    /// Whether "don't fragment" is set.
    pub fn dont_frag(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & DF != 0
    }

    /// Whether "more fragments" is set.
    pub fn more_frags(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & MF != 0
    }

    /// The fragment offset in bytes (the field is in units of 8 bytes).
    pub fn frag_offset(&self) -> u16 {
        (get_u16(self.buffer.as_ref(), field::FLG_OFF) & OFFSET_MASK) << 3
    }

    /// Whether this datagram is a fragment (offset non-zero or more fragments follow).
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }

    /// The time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// The payload protocol.
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// The header checksum field.
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        addr(self.buffer.as_ref(), field::SRC)
    }

    /// The destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        addr(self.buffer.as_ref(), field::DST)
    }

    /// The raw option bytes (between the fixed header and the payload). They are never
    /// interpreted: the stack neither needs nor honours IPv4 options.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// Whether the header checksum is right (RFC 791 §3.1, "Header Checksum").
    pub fn verify_checksum(&self) -> bool {
        checksum::data(&self.buffer.as_ref()[..self.header_len()]) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv4Packet<&'a T> {
    /// The payload: from the end of the header to `total_len`, borrowed for the buffer's
    /// lifetime (link-layer padding excluded).
    pub fn payload(&self) -> &'a [u8] {
        let b = self.buffer.as_ref();
        &b[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the version field.
    pub fn set_version(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (v << 4);
    }

    /// Sets the header length in bytes (a multiple of 4, at most 60).
    pub fn set_header_len(&mut self, len: usize) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) as u8 & 0x0f);
    }

    /// Sets the DSCP/ECN byte.
    pub fn set_dscp_ecn(&mut self, v: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = v;
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::IDENT, v);
    }

    fn set_flag(&mut self, bit: u16, on: bool) {
        let b = self.buffer.as_mut();
        let w = get_u16(b, field::FLG_OFF);
        set_u16(b, field::FLG_OFF, if on { w | bit } else { w & !bit });
    }

    /// Sets "don't fragment".
    pub fn set_dont_frag(&mut self, on: bool) {
        self.set_flag(DF, on);
    }

    /// Sets "more fragments".
    pub fn set_more_frags(&mut self, on: bool) {
        self.set_flag(MF, on);
    }

    /// Clears all three flag bits (reserved, DF, MF).
    pub fn clear_flags(&mut self) {
        let b = self.buffer.as_mut();
        let w = get_u16(b, field::FLG_OFF);
        set_u16(b, field::FLG_OFF, w & OFFSET_MASK);
    }

    /// Sets the fragment offset in bytes (rounded down to a multiple of 8).
    pub fn set_frag_offset(&mut self, bytes: u16) {
        let b = self.buffer.as_mut();
        let w = get_u16(b, field::FLG_OFF);
        set_u16(
            b,
            field::FLG_OFF,
            (w & !OFFSET_MASK) | ((bytes >> 3) & OFFSET_MASK),
        );
    }

    /// Sets the time to live.
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, p: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = p.into();
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC..field::SRC + 4].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST..field::DST + 4].copy_from_slice(&a.octets());
    }

    /// Computes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let len = self.header_len();
        let sum = checksum::data(&self.buffer.as_ref()[..len]);
        self.set_checksum(!sum);
    }

    /// Decrements the TTL and patches the checksum incrementally (RFC 1624 §4), as a
    /// forwarder does. Returns the new TTL; does nothing when it is already zero.
    pub fn decrement_ttl(&mut self) -> u8 {
        let ttl = self.ttl();
        if ttl == 0 {
            return 0;
        }
        let b = self.buffer.as_mut();
        let old = get_u16(b, field::TTL);
        b[field::TTL] = ttl - 1;
        let new = get_u16(b, field::TTL);
        let c = checksum::update(get_u16(b, field::CHECKSUM), old, new);
        set_u16(b, field::CHECKSUM, c);
        ttl - 1
    }

    /// The payload, mutably (from the header end to `total_len`).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.header_len()..usize::from(self.total_len());
        &mut self.buffer.as_mut()[range]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Ipv4Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The meaning of an IPv4 header (options are not represented).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Payload protocol.
    pub protocol: IpProtocol,
    /// Payload length in bytes (`total_len` minus the header length; for a fragment, the
    /// length of this fragment's payload).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// DSCP and ECN byte.
    pub dscp_ecn: u8,
    /// Identification (RFC 6864: only meaningful for fragments).
    pub ident: u16,
    /// "Don't fragment".
    pub dont_frag: bool,
    /// "More fragments".
    pub more_frags: bool,
    /// Fragment offset in bytes (a multiple of 8).
    pub frag_offset: u16,
}

impl Ipv4Repr {
    /// A header for an unfragmented datagram: DF set (path MTU discovery, RFC 1191),
    /// ident 0 (allowed for atomic datagrams, RFC 6864 §4.1), DSCP/ECN 0.
    pub const fn new(
        src_addr: Ipv4Addr,
        dst_addr: Ipv4Addr,
        protocol: IpProtocol,
        payload_len: usize,
        ttl: u8,
    ) -> Ipv4Repr {
        Ipv4Repr {
            src_addr,
            dst_addr,
            protocol,
            payload_len,
            ttl,
            dscp_ecn: 0,
            ident: 0,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        }
    }

    /// Reads an IPv4 header; options are skipped. Fragments parse like any datagram:
    /// check [`is_fragment`](Self::is_fragment) before handing the payload up.
    ///
    /// # Errors
    /// [`Error::Truncated`]/[`Error::Malformed`] from `check_len`;
    /// [`Error::Unsupported`] when the version is not 4; [`Error::Malformed`] when
    /// `checksum` verifies and the header checksum is wrong.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Ipv4Packet<&T>,
        checksum: ChecksumMode,
    ) -> Result<Ipv4Repr> {
        Ipv4Repr::parse_parts(packet, 0, checksum)
    }

    /// [`parse`](Self::parse) for a datagram that goes on past the packet's buffer for
    /// `more` bytes ([`Ipv4Packet::check_len_parts`]).
    ///
    /// # Errors
    /// As [`parse`](Self::parse).
    pub fn parse_parts<T: AsRef<[u8]> + ?Sized>(
        packet: &Ipv4Packet<&T>,
        more: usize,
        checksum: ChecksumMode,
    ) -> Result<Ipv4Repr> {
        packet.check_len_parts(more)?;
        if packet.version() != 4 {
            return Err(Error::Unsupported);
        }
        if checksum.verify_rx() && !packet.verify_checksum() {
            return Err(Error::Malformed);
        }
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()) - packet.header_len(),
            ttl: packet.ttl(),
            dscp_ecn: packet.dscp_ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
        })
    }

    /// Whether the header describes a fragment.
    pub const fn is_fragment(&self) -> bool {
        self.more_frags || self.frag_offset != 0
    }

    /// The header length emitted (20).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the header (no options); the payload is left untouched. The checksum is
    /// computed unless `checksum` is [`ChecksumMode::Offload`] (then zero).
    ///
    /// # Panics
    /// When the buffer is shorter than 20 bytes, or `payload_len + 20` exceeds 65535.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Ipv4Packet<T>,
        checksum: ChecksumMode,
    ) {
        let total = u16::try_from(self.buffer_len()).expect("IPv4 datagram over 65535 bytes");
        packet.set_version(4);
        packet.set_header_len(HEADER_LEN);
        packet.set_dscp_ecn(self.dscp_ecn);
        packet.set_total_len(total);
        packet.set_ident(self.ident);
        packet.clear_flags();
        packet.set_dont_frag(self.dont_frag);
        packet.set_more_frags(self.more_frags);
        packet.set_frag_offset(self.frag_offset);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        match checksum {
            ChecksumMode::Offload => packet.set_checksum(0),
            ChecksumMode::Full | ChecksumMode::Partial => packet.fill_checksum(),
        }
    }
}

impl fmt::Display for Ipv4Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} > {}: {} ttl {} len {}",
            self.src_addr, self.dst_addr, self.protocol, self.ttl, self.payload_len
        )?;
        if self.is_fragment() {
            write!(
                f,
                " frag id {} off {}{}",
                self.ident,
                self.frag_offset,
                if self.more_frags { "+" } else { "" }
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The IPv4/UDP header widely used as the checksum example (from a real capture):
    // 192.168.0.1 > 192.168.0.199, DF, TTL 64, total 115,
    // checksum b861, followed by its 95-byte payload (zeros here).
    fn captured() -> [u8; 115] {
        let mut b = [0u8; 115];
        b[..20].copy_from_slice(&[
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ]);
        b
    }

    fn repr() -> Ipv4Repr {
        Ipv4Repr::new(
            Ipv4Addr::new(192, 168, 0, 1),
            Ipv4Addr::new(192, 168, 0, 199),
            IpProtocol::Udp,
            95,
            64,
        )
    }

    #[test]
    fn deconstruct() {
        let b = captured();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 115);
        assert!(p.dont_frag() && !p.more_frags() && p.frag_offset() == 0);
        assert_eq!(p.checksum(), 0xb861);
        assert!(p.verify_checksum());
        assert_eq!(p.payload().len(), 95);
        assert_eq!(Ipv4Repr::parse(&p, ChecksumMode::Full).unwrap(), repr());
    }

    #[test]
    fn construct() {
        let mut b = [0xaau8; 115];
        repr().emit(
            &mut Ipv4Packet::new_unchecked(&mut b[..]),
            ChecksumMode::Full,
        );
        assert_eq!(b[..20], captured()[..20]);
    }

    #[test]
    fn options_are_skipped() {
        // IHL 6: one option word (NOP NOP NOP EOL), then 4 payload bytes.
        let mut b = [0u8; 28];
        b[0] = 0x46;
        b[2..4].copy_from_slice(&28u16.to_be_bytes());
        b[8] = 64;
        b[9] = 6;
        b[20..24].copy_from_slice(&[1, 1, 1, 0]);
        b[24..28].copy_from_slice(&[9, 8, 7, 6]);
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        p.fill_checksum();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload(), &[9, 8, 7, 6]);
        let r = Ipv4Repr::parse(&p, ChecksumMode::Full).unwrap();
        assert_eq!(r.payload_len, 4);
    }

    #[test]
    fn fragment_fields() {
        let mut b = [0u8; 40];
        let mut r = repr();
        r.payload_len = 20;
        r.dont_frag = false;
        r.more_frags = true;
        r.frag_offset = 1480;
        r.ident = 0x1234;
        r.emit(
            &mut Ipv4Packet::new_unchecked(&mut b[..]),
            ChecksumMode::Full,
        );
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert!(p.is_fragment());
        assert_eq!(p.frag_offset(), 1480);
        let parsed = Ipv4Repr::parse(&p, ChecksumMode::Full).unwrap();
        assert_eq!(parsed, r);
        assert!(parsed.is_fragment());
    }

    #[test]
    fn errors() {
        let b = captured();
        assert_eq!(
            Ipv4Packet::new_checked(&b[..19]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Ipv4Packet::new_checked(&b[..114]).unwrap_err(),
            Error::Truncated
        );
        let mut bad = b;
        bad[0] = 0x44; // IHL 4
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            Error::Malformed
        );
        let mut bad = b;
        bad[3] = 10; // total length below header length
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            Error::Malformed
        );
        let mut bad = b;
        bad[0] = 0x4f; // IHL 15: 60-byte header fits the buffer
        let p = Ipv4Packet::new_checked(&bad[..]).unwrap();
        assert_eq!(p.header_len(), 60);
        let mut bad = b;
        bad[11] ^= 1;
        let p = Ipv4Packet::new_checked(&bad[..]).unwrap();
        assert_eq!(
            Ipv4Repr::parse(&p, ChecksumMode::Full).unwrap_err(),
            Error::Malformed
        );
        assert!(Ipv4Repr::parse(&p, ChecksumMode::Offload).is_ok());
        let mut v6 = b;
        v6[0] = 0x65;
        let p = Ipv4Packet::new_checked(&v6[..]).unwrap();
        assert_eq!(
            Ipv4Repr::parse(&p, ChecksumMode::Offload).unwrap_err(),
            Error::Unsupported
        );
    }

    #[test]
    fn ttl_decrement_keeps_checksum_valid() {
        let mut b = captured();
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        assert_eq!(p.decrement_ttl(), 63);
        assert!(p.verify_checksum());
    }
}
