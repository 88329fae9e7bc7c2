//! ARP (RFC 826) for IPv4 over Ethernet. The view reads any hardware/protocol address
//! length; the representation only covers Ethernet + IPv4, the only pairing the stack
//! resolves.

use core::fmt;
use core::net::Ipv4Addr;

use crate::bytes::{ensure_len, get_u16, set_u16};
use crate::ethernet::{EtherType, EthernetAddress};
use crate::{Error, Result};

/// The ARP hardware type for Ethernet (RFC 826, IANA "Hardware Types").
pub const HARDWARE_ETHERNET: u16 = 1;

/// The ARP operation field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOperation {
    /// Request (1).
    Request,
    /// Reply (2).
    Reply,
    /// Any other value.
    Unknown(u16),
}

impl From<u16> for ArpOperation {
    fn from(v: u16) -> Self {
        match v {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            other => ArpOperation::Unknown(other),
        }
    }
}

impl From<ArpOperation> for u16 {
    fn from(op: ArpOperation) -> u16 {
        match op {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
            ArpOperation::Unknown(v) => v,
        }
    }
}

mod field {
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const SHA: usize = 8;
}

/// The length of an Ethernet/IPv4 ARP packet.
pub const ETHERNET_IPV4_LEN: usize = 28;

/// A view of an ARP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps a buffer without checking it; getters may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> ArpPacket<T> {
        ArpPacket { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    ///
    /// # Errors
    /// As [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<ArpPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the fixed part and the four addresses (of the lengths the packet
    /// declares) fit, after which no getter panics.
    ///
    /// # Errors
    /// [`Error::Truncated`] when they do not.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        ensure_len(len, field::SHA)?;
        let addrs = usize::from(self.hardware_len()) + usize::from(self.protocol_len());
        ensure_len(len, field::SHA + 2 * addrs)
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The hardware type (1 for Ethernet).
    pub fn hardware_type(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::HTYPE)
    }

    /// The protocol type (an EtherType; IPv4 for us).
    pub fn protocol_type(&self) -> EtherType {
        EtherType::from(get_u16(self.buffer.as_ref(), field::PTYPE))
    }

    /// The hardware address length in bytes.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// The protocol address length in bytes.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// The operation.
    pub fn operation(&self) -> ArpOperation {
        ArpOperation::from(get_u16(self.buffer.as_ref(), field::OPER))
    }

    fn sha(&self) -> usize {
        field::SHA
    }
    fn spa(&self) -> usize {
        self.sha() + usize::from(self.hardware_len())
    }
    fn tha(&self) -> usize {
        self.spa() + usize::from(self.protocol_len())
    }
    fn tpa(&self) -> usize {
        self.tha() + usize::from(self.hardware_len())
    }

    /// The sender hardware address bytes.
    pub fn source_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.sha()..self.spa()]
    }

    /// The sender protocol address bytes.
    pub fn source_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.spa()..self.tha()]
    }

    /// The target hardware address bytes.
    pub fn target_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.tha()..self.tpa()]
    }

    /// The target protocol address bytes.
    pub fn target_protocol_addr(&self) -> &[u8] {
        let end = self.tpa() + usize::from(self.protocol_len());
        &self.buffer.as_ref()[self.tpa()..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Sets the hardware type.
    pub fn set_hardware_type(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::HTYPE, v);
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, v: EtherType) {
        set_u16(self.buffer.as_mut(), field::PTYPE, v.into());
    }

    /// Sets the hardware address length; set it before any address.
    pub fn set_hardware_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::HLEN] = v;
    }

    /// Sets the protocol address length; set it before any address.
    pub fn set_protocol_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::PLEN] = v;
    }

    /// Sets the operation.
    pub fn set_operation(&mut self, op: ArpOperation) {
        set_u16(self.buffer.as_mut(), field::OPER, op.into());
    }

    /// Sets the sender hardware address; its length must equal `hardware_len`.
    pub fn set_source_hardware_addr(&mut self, a: &[u8]) {
        let (s, e) = (self.sha(), self.spa());
        self.buffer.as_mut()[s..e].copy_from_slice(a);
    }

    /// Sets the sender protocol address; its length must equal `protocol_len`.
    pub fn set_source_protocol_addr(&mut self, a: &[u8]) {
        let (s, e) = (self.spa(), self.tha());
        self.buffer.as_mut()[s..e].copy_from_slice(a);
    }

    /// Sets the target hardware address; its length must equal `hardware_len`.
    pub fn set_target_hardware_addr(&mut self, a: &[u8]) {
        let (s, e) = (self.tha(), self.tpa());
        self.buffer.as_mut()[s..e].copy_from_slice(a);
    }

    /// Sets the target protocol address; its length must equal `protocol_len`.
    pub fn set_target_protocol_addr(&mut self, a: &[u8]) {
        let s = self.tpa();
        let e = s + usize::from(self.protocol_len());
        self.buffer.as_mut()[s..e].copy_from_slice(a);
    }
}

/// An Ethernet/IPv4 ARP message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Request, reply, or another operation (passed through, the stack ignores it).
    pub operation: ArpOperation,
    /// Sender MAC.
    pub source_hardware_addr: EthernetAddress,
    /// Sender IPv4 address.
    pub source_protocol_addr: Ipv4Addr,
    /// Target MAC (zero in a request).
    pub target_hardware_addr: EthernetAddress,
    /// Target IPv4 address.
    pub target_protocol_addr: Ipv4Addr,
}

fn ipv4(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

impl ArpRepr {
    /// Reads an Ethernet/IPv4 ARP packet.
    ///
    /// # Errors
    /// [`Error::Truncated`] for a short buffer; [`Error::Unsupported`] for another
    /// hardware or protocol type or address length.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &ArpPacket<&T>) -> Result<ArpRepr> {
        packet.check_len()?;
        if packet.hardware_type() != HARDWARE_ETHERNET
            || packet.protocol_type() != EtherType::Ipv4
            || packet.hardware_len() != 6
            || packet.protocol_len() != 4
        {
            return Err(Error::Unsupported);
        }
        Ok(ArpRepr {
            operation: packet.operation(),
            source_hardware_addr: EthernetAddress::from_bytes(packet.source_hardware_addr()),
            source_protocol_addr: ipv4(packet.source_protocol_addr()),
            target_hardware_addr: EthernetAddress::from_bytes(packet.target_hardware_addr()),
            target_protocol_addr: ipv4(packet.target_protocol_addr()),
        })
    }

    /// The length of the packet (28).
    pub const fn buffer_len(&self) -> usize {
        ETHERNET_IPV4_LEN
    }

    /// Writes the packet.
    ///
    /// # Panics
    /// When the buffer is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) {
        packet.set_hardware_type(HARDWARE_ETHERNET);
        packet.set_protocol_type(EtherType::Ipv4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.operation);
        packet.set_source_hardware_addr(&self.source_hardware_addr.0);
        packet.set_source_protocol_addr(&self.source_protocol_addr.octets());
        packet.set_target_hardware_addr(&self.target_hardware_addr.0);
        packet.set_target_protocol_addr(&self.target_protocol_addr.octets());
    }
}

impl fmt::Display for ArpRepr {
    /// tcpdump style: `Request who-has A tell B` / `Reply A is-at M`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.operation {
            ArpOperation::Request => write!(
                f,
                "Request who-has {} tell {}",
                self.target_protocol_addr, self.source_protocol_addr
            ),
            ArpOperation::Reply => write!(
                f,
                "Reply {} is-at {}",
                self.source_protocol_addr, self.source_hardware_addr
            ),
            ArpOperation::Unknown(op) => write!(
                f,
                "op {op} {} ({}) > {} ({})",
                self.source_protocol_addr,
                self.source_hardware_addr,
                self.target_protocol_addr,
                self.target_hardware_addr
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // An ARP request in the layout of RFC 826 (real captures: tests/captures.rs):
    // who-has 10.0.0.2 tell 10.0.0.1 from 52:54:00:12:34:56.
    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x0a,
        0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x02,
    ];

    fn repr() -> ArpRepr {
        ArpRepr {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            source_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Addr::new(10, 0, 0, 2),
        }
    }

    #[test]
    fn deconstruct() {
        let p = ArpPacket::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(p.hardware_type(), 1);
        assert_eq!(p.operation(), ArpOperation::Request);
        assert_eq!(ArpRepr::parse(&p).unwrap(), repr());
        assert_eq!(repr().to_string(), "Request who-has 10.0.0.2 tell 10.0.0.1");
    }

    #[test]
    fn construct() {
        let mut buf = [0xffu8; 28];
        repr().emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
        assert_eq!(buf, REQUEST);
    }

    #[test]
    fn errors() {
        assert_eq!(
            ArpPacket::new_checked(&REQUEST[..27]).unwrap_err(),
            Error::Truncated
        );
        let mut other = REQUEST;
        other[1] = 6; // IEEE 802 hardware type
        let p = ArpPacket::new_checked(&other[..]).unwrap();
        assert_eq!(ArpRepr::parse(&p).unwrap_err(), Error::Unsupported);
        let mut long = REQUEST;
        long[4] = 200; // declared hardware length larger than the buffer
        assert_eq!(
            ArpPacket::new_checked(&long[..]).unwrap_err(),
            Error::Truncated
        );
    }
}
