//! Ethernet II frames (IEEE 802.3 with an EtherType, RFC 894): the 14-byte header view and
//! its representation. 802.1Q tags are not parsed: a tagged frame has EtherType 0x8100
//! and reaches the caller as [`EtherType::Unknown`].

use core::fmt;

use crate::bytes::{ensure_len, get_u16, set_u16};
use crate::Result;

/// A 48-bit Ethernet (MAC) address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// Reads an address from the first six bytes of `data`.
    ///
    /// # Panics
    /// When `data` is shorter than six bytes.
    pub fn from_bytes(data: &[u8]) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&data[..6]);
        EthernetAddress(a)
    }

    /// The six bytes of the address.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// Whether this is ff:ff:ff:ff:ff:ff.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Whether the group bit (least significant bit of the first octet) is set; the
    /// broadcast address is a multicast address too (IEEE 802-2014 §8.2).
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Whether the group bit is clear.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// Whether the locally-administered bit (second bit of the first octet) is set.
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// The EtherType field: which protocol the payload carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EtherType {
    /// IPv4 (0x0800).
    Ipv4,
    /// ARP (0x0806).
    Arp,
    /// IPv6 (0x86dd).
    Ipv6,
    /// Any other value (including 802.1Q tags and 802.3 length fields).
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x86dd => EtherType::Ipv6,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(t: EtherType) -> u16 {
        match t {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Unknown(v) => v,
        }
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EtherType::Ipv4 => f.write_str("IPv4"),
            EtherType::Arp => f.write_str("ARP"),
            EtherType::Ipv6 => f.write_str("IPv6"),
            EtherType::Unknown(v) => write!(f, "0x{v:04x}"),
        }
    }
}

mod field {
    pub const DST: usize = 0;
    pub const SRC: usize = 6;
    pub const ETHERTYPE: usize = 12;
    pub const PAYLOAD: usize = 14;
}

/// The length of an Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A view of an Ethernet II frame in a byte buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer without checking its length; getters may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> EthernetFrame<T> {
        EthernetFrame { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    ///
    /// # Errors
    /// [`Error::Truncated`](crate::Error::Truncated) when the buffer cannot hold the header.
    pub fn new_checked(buffer: T) -> Result<EthernetFrame<T>> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Checks that the header fits, after which no getter panics.
    ///
    /// # Errors
    /// [`Error::Truncated`](crate::Error::Truncated) when the buffer is shorter than 14 bytes.
    pub fn check_len(&self) -> Result<()> {
        ensure_len(self.buffer.as_ref().len(), HEADER_LEN)
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The header length (14).
    pub const fn header_len() -> usize {
        HEADER_LEN
    }

    /// The frame length for a payload of `payload_len` bytes.
    pub const fn buffer_len(payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// The destination address.
    pub fn dst_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::DST..])
    }

    /// The source address.
    pub fn src_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::SRC..])
    }

    /// The EtherType.
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(get_u16(self.buffer.as_ref(), field::ETHERTYPE))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> EthernetFrame<&'a T> {
    /// The payload, everything after the header, borrowed for the buffer's lifetime.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::DST..field::DST + 6].copy_from_slice(&addr.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::SRC..field::SRC + 6].copy_from_slice(&addr.0);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, t: EtherType) {
        set_u16(self.buffer.as_mut(), field::ETHERTYPE, t.into());
    }

    /// The payload, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for EthernetFrame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The meaning of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source address.
    pub src_addr: EthernetAddress,
    /// Destination address.
    pub dst_addr: EthernetAddress,
    /// Payload protocol.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Reads the header of a frame.
    ///
    /// # Errors
    /// [`Error::Truncated`](crate::Error::Truncated) when the header does not fit.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &EthernetFrame<&T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// The header length (14).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// The bytes [`emit`](Self::emit) writes (the header only).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into `frame`; the payload is left untouched.
    ///
    /// # Panics
    /// When the buffer is shorter than 14 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_src_addr(self.src_addr);
        frame.set_dst_addr(self.dst_addr);
        frame.set_ethertype(self.ethertype);
    }
}

impl fmt::Display for EthernetRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} > {}, ethertype {}",
            self.src_addr, self.dst_addr, self.ethertype
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    // An ARP request frame header, broadcast from 52:54:00:12:34:56 (hand-built; real
    // captures are in tests/captures.rs).
    const FRAME: [u8; 16] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x06, 0xaa,
        0xbb,
    ];

    fn repr() -> EthernetRepr {
        EthernetRepr {
            src_addr: EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            dst_addr: EthernetAddress::BROADCAST,
            ethertype: EtherType::Arp,
        }
    }

    #[test]
    fn deconstruct() {
        let f = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(f.dst_addr(), EthernetAddress::BROADCAST);
        assert!(f.dst_addr().is_broadcast() && f.dst_addr().is_multicast());
        assert!(f.src_addr().is_unicast() && f.src_addr().is_local());
        assert_eq!(f.ethertype(), EtherType::Arp);
        assert_eq!(f.payload(), &[0xaa, 0xbb]);
        assert_eq!(EthernetRepr::parse(&f).unwrap(), repr());
    }

    #[test]
    fn construct() {
        let mut buf = [0u8; 16];
        let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
        repr().emit(&mut f);
        f.payload_mut().copy_from_slice(&[0xaa, 0xbb]);
        assert_eq!(buf, FRAME);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            EthernetFrame::new_checked(&FRAME[..13]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn address_display() {
        assert_eq!(repr().src_addr.to_string(), "52:54:00:12:34:56");
    }
}
