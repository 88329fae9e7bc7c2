//! UDP datagrams (RFC 768), with the pseudo-header checksum. Over IPv4 a zero checksum
//! means "none" (RFC 768); over IPv6 it is invalid (RFC 8200 §8.1), and a computed zero
//! is sent as 0xffff in both.

use core::fmt;
use core::net::IpAddr;

use crate::bytes::{check_declared, ensure_len, get_u16, set_u16};
use crate::checksum::{self, ChecksumMode};
use crate::ip::IpProtocol;
use crate::{Error, Result};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

/// The length of a UDP header.
pub const HEADER_LEN: usize = 8;

/// A view of a UDP datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps a buffer without checking it; getters may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> UdpPacket<T> {
        UdpPacket { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    ///
    /// # Errors
    /// As [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<UdpPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the header and the datagram length the header declares fit. Bytes
    /// past the declared length are ignored.
    ///
    /// # Errors
    /// [`Error::Truncated`] when the buffer is too short; [`Error::Malformed`] when the
    /// length field is below 8.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        ensure_len(len, HEADER_LEN)?;
        check_declared(len, HEADER_LEN, usize::from(self.len()))
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The source port.
    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// The destination port.
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// The length field: header plus payload in bytes.
    pub fn len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Whether the payload is empty (length field 8).
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }

    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Whether the checksum is right for the given IP addresses. A zero checksum over
    /// IPv4 means the sender did not compute one and verifies (RFC 768); over IPv6 it
    /// does not (RFC 8200 §8.1).
    pub fn verify_checksum(&self, src: &IpAddr, dst: &IpAddr) -> bool {
        if self.checksum() == 0 {
            return src.is_ipv4();
        }
        let len = self.len();
        let sum = checksum::combine(&[
            checksum::pseudo_header(src, dst, IpProtocol::Udp, u32::from(len)),
            checksum::data(&self.buffer.as_ref()[..usize::from(len)]),
        ]);
        sum == 0xffff
    }

    /// Whether the checksum field holds the pseudo-header sum and nothing more, as a
    /// sender leaves it for a device to finish (Linux's `CHECKSUM_PARTIAL`,
    /// `udp4_hwcsum`); see [`TcpPacket::checksum_is_unfinished`](crate::TcpPacket::checksum_is_unfinished).
    pub fn checksum_is_unfinished(&self, src: &IpAddr, dst: &IpAddr) -> bool {
        checksum::same(
            self.checksum(),
            checksum::pseudo_header(src, dst, IpProtocol::Udp, u32::from(self.len())),
        )
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> UdpPacket<&'a T> {
    /// The payload (up to the declared length), borrowed for the buffer's lifetime.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT, v);
    }

    /// Sets the length field.
    pub fn set_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Computes the checksum over the header and the payload up to the length field and
    /// stores it (0xffff in place of a computed zero, RFC 768).
    pub fn fill_checksum(&mut self, src: &IpAddr, dst: &IpAddr) {
        self.set_checksum(0);
        let len = self.len();
        let sum = checksum::combine(&[
            checksum::pseudo_header(src, dst, IpProtocol::Udp, u32::from(len)),
            checksum::data(&self.buffer.as_ref()[..usize::from(len)]),
        ]);
        let c = !sum;
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }

    /// The payload (up to the declared length), mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for UdpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The meaning of a UDP header. The payload stays in the packet
/// ([`UdpPacket::payload`]); emit writes it through a closure so it is copied once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port (0: none, RFC 768).
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl UdpRepr {
    /// Reads a UDP header, verifying the checksum when `checksum` says so.
    ///
    /// # Errors
    /// [`Error::Truncated`]/[`Error::Malformed`] from `check_len`; [`Error::Malformed`]
    /// for a wrong checksum.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &UdpPacket<&T>,
        src: &IpAddr,
        dst: &IpAddr,
        checksum: ChecksumMode,
    ) -> Result<UdpRepr> {
        packet.check_len()?;
        if checksum.verify_rx() && !packet.verify_checksum(src, dst) {
            return Err(Error::Malformed);
        }
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
        })
    }

    /// The header length (8).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus `payload_len`.
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Writes the header, lets `emit_payload` fill the `payload_len`-byte payload, then
    /// the checksum as `checksum` says ([`ChecksumMode::Offload`] writes zero, which over
    /// IPv4 also means "no checksum").
    ///
    /// # Panics
    /// When the buffer is shorter than `buffer_len(payload_len)` or that exceeds 65535.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut UdpPacket<T>,
        src: &IpAddr,
        dst: &IpAddr,
        payload_len: usize,
        emit_payload: impl FnOnce(&mut [u8]),
        checksum: ChecksumMode,
    ) {
        let len = u16::try_from(self.buffer_len(payload_len)).expect("UDP datagram over 65535");
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(len);
        emit_payload(packet.payload_mut());
        match checksum {
            ChecksumMode::Full => packet.fill_checksum(src, dst),
            ChecksumMode::Offload => packet.set_checksum(0),
            ChecksumMode::Partial => packet.set_checksum(checksum::pseudo_header(
                src,
                dst,
                IpProtocol::Udp,
                u32::from(len),
            )),
        }
    }
}

impl fmt::Display for UdpRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UDP {} > {}", self.src_port, self.dst_port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    const SRC: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 168, 1, 1));
    const DST: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 168, 1, 2));

    // A DNS-like datagram 53 > 1234 with payload "hello" and its computed checksum.
    fn datagram() -> [u8; 13] {
        let mut b = [0u8; 13];
        b[..8].copy_from_slice(&[0x00, 0x35, 0x04, 0xd2, 0x00, 0x0d, 0x00, 0x00]);
        b[8..].copy_from_slice(b"hello");
        // Checksum computed independently (a plain Python RFC 1071 sum): 0x33a7.
        b[6..8].copy_from_slice(&[0x33, 0xa7]);
        b
    }

    #[test]
    fn deconstruct() {
        let b = datagram();
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.len()), (53, 1234, 13));
        assert_eq!(p.payload(), b"hello");
        assert!(p.verify_checksum(&SRC, &DST));
        let r = UdpRepr::parse(&p, &SRC, &DST, ChecksumMode::Full).unwrap();
        assert_eq!(
            r,
            UdpRepr {
                src_port: 53,
                dst_port: 1234
            }
        );
    }

    #[test]
    fn construct() {
        let mut b = [0u8; 13];
        let r = UdpRepr {
            src_port: 53,
            dst_port: 1234,
        };
        r.emit(
            &mut UdpPacket::new_unchecked(&mut b[..]),
            &SRC,
            &DST,
            5,
            |p| p.copy_from_slice(b"hello"),
            ChecksumMode::Full,
        );
        assert_eq!(b, datagram());
    }

    #[test]
    fn zero_checksum() {
        let mut b = datagram();
        b[6] = 0;
        b[7] = 0;
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum(&SRC, &DST));
        let s6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert!(!p.verify_checksum(&s6, &s6));
    }

    #[test]
    fn errors() {
        let b = datagram();
        assert_eq!(
            UdpPacket::new_checked(&b[..7]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            UdpPacket::new_checked(&b[..12]).unwrap_err(),
            Error::Truncated
        );
        let mut bad = b;
        bad[5] = 7;
        assert_eq!(
            UdpPacket::new_checked(&bad[..]).unwrap_err(),
            Error::Malformed
        );
        let mut bad = b;
        bad[12] ^= 0x40;
        let p = UdpPacket::new_checked(&bad[..]).unwrap();
        assert_eq!(
            UdpRepr::parse(&p, &SRC, &DST, ChecksumMode::Full).unwrap_err(),
            Error::Malformed
        );
        assert!(UdpRepr::parse(&p, &SRC, &DST, ChecksumMode::Offload).is_ok());
    }
}
