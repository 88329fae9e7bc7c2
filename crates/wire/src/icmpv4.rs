//! ICMP for IPv4 (RFC 792): echo request/reply, destination unreachable and time
//! exceeded as representations; any message readable through the view. RFC 1122 §3.2.2
//! says which messages a host must handle, RFC 1191 §4 adds the next-hop MTU.

use core::fmt;

use crate::bytes::{ensure_len, get_u16, get_u32, set_u16};
use crate::checksum::{self, ChecksumMode};
use crate::ip::IpProtocol;
use crate::ipv4::{self, Ipv4Packet, Ipv4Repr};
use crate::seq::SeqNumber;
use crate::{Error, Result};
use core::net::Ipv4Addr;

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const ECHO_IDENT: usize = 4;
    pub const ECHO_SEQNO: usize = 6;
    pub const UNUSED: usize = 4;
    pub const MTU: usize = 6;
}

/// The length of the ICMP header (type, code, checksum and the 4-byte rest of header).
pub const HEADER_LEN: usize = 8;

macro_rules! code_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $var:ident = $val:expr,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $var,)*
            /// Any other value.
            Unknown(u8),
        }

        impl From<u8> for $name {
            fn from(v: u8) -> Self {
                match v {
                    $($val => $name::$var,)*
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for u8 {
            fn from(v: $name) -> u8 {
                match v {
                    $($name::$var => $val,)*
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}

code_enum! {
    /// The ICMP message type.
    Icmpv4Message {
        /// Echo reply (0).
        EchoReply = 0,
        /// Destination unreachable (3).
        DstUnreachable = 3,
        /// Redirect (5).
        Redirect = 5,
        /// Echo request (8).
        EchoRequest = 8,
        /// Router advertisement (9).
        RouterAdvert = 9,
        /// Router solicitation (10).
        RouterSolicit = 10,
        /// Time exceeded (11).
        TimeExceeded = 11,
        /// Parameter problem (12).
        ParamProblem = 12,
        /// Timestamp (13).
        Timestamp = 13,
        /// Timestamp reply (14).
        TimestampReply = 14,
    }
}

code_enum! {
    /// The code of a destination unreachable message (RFC 792, RFC 1122 §3.2.2.1,
    /// RFC 1812 §5.2.7.1).
    Icmpv4DstUnreachable {
        /// Net unreachable (0).
        NetUnreachable = 0,
        /// Host unreachable (1).
        HostUnreachable = 1,
        /// Protocol unreachable (2).
        ProtoUnreachable = 2,
        /// Port unreachable (3).
        PortUnreachable = 3,
        /// Fragmentation needed and DF set (4); carries the next-hop MTU (RFC 1191).
        FragRequired = 4,
        /// Source route failed (5).
        SrcRouteFailed = 5,
        /// Destination network unknown (6).
        DstNetUnknown = 6,
        /// Destination host unknown (7).
        DstHostUnknown = 7,
        /// Source host isolated (8).
        SrcHostIsolated = 8,
        /// Network administratively prohibited (9).
        NetProhibited = 9,
        /// Host administratively prohibited (10).
        HostProhibited = 10,
        /// Network unreachable for ToS (11).
        NetUnreachToS = 11,
        /// Host unreachable for ToS (12).
        HostUnreachToS = 12,
        /// Communication administratively prohibited (13).
        CommProhibited = 13,
        /// Host precedence violation (14).
        HostPrecedenceViolation = 14,
        /// Precedence cutoff in effect (15).
        PrecedenceCutoff = 15,
    }
}

code_enum! {
    /// The code of a time exceeded message.
    Icmpv4TimeExceeded {
        /// TTL exceeded in transit (0).
        TtlExpired = 0,
        /// Fragment reassembly time exceeded (1).
        FragExpired = 1,
    }
}

/// A view of an ICMPv4 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wraps a buffer without checking it; getters may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Icmpv4Packet<T> {
        Icmpv4Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    ///
    /// # Errors
    /// As [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Icmpv4Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the 8-byte header fits; afterwards no getter panics. The message is
    /// the whole buffer (the IP layer trimmed it).
    ///
    /// # Errors
    /// [`Error::Truncated`] when it does not.
    pub fn check_len(&self) -> Result<()> {
        ensure_len(self.buffer.as_ref().len(), HEADER_LEN)
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The message type.
    pub fn msg_type(&self) -> Icmpv4Message {
        Icmpv4Message::from(self.buffer.as_ref()[field::TYPE])
    }

    /// The message code.
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The echo identifier (echo messages).
    pub fn echo_ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ECHO_IDENT)
    }

    /// The echo sequence number (echo messages).
    pub fn echo_seq_no(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ECHO_SEQNO)
    }

    /// The next-hop MTU of a "fragmentation needed" message (RFC 1191 §4); zero from
    /// routers that predate RFC 1191.
    pub fn next_hop_mtu(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::MTU)
    }

    /// The header length (8).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Whether the checksum over the whole message is right (RFC 792).
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.buffer.as_ref()) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Icmpv4Packet<&'a T> {
    /// The bytes after the 8-byte header (echo data, or the quoted datagram of an error
    /// message), borrowed for the buffer's lifetime.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Sets the message type.
    pub fn set_msg_type(&mut self, t: Icmpv4Message) {
        self.buffer.as_mut()[field::TYPE] = t.into();
    }

    /// Sets the message code.
    pub fn set_msg_code(&mut self, c: u8) {
        self.buffer.as_mut()[field::CODE] = c;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Sets the echo identifier.
    pub fn set_echo_ident(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::ECHO_IDENT, v);
    }

    /// Sets the echo sequence number.
    pub fn set_echo_seq_no(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::ECHO_SEQNO, v);
    }

    /// Sets the next-hop MTU (and clears the unused word before it).
    pub fn set_next_hop_mtu(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::UNUSED, 0);
        set_u16(self.buffer.as_mut(), field::MTU, v);
    }

    /// Computes and stores the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::data(self.buffer.as_ref());
        self.set_checksum(!sum);
    }

    /// The bytes after the header, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Icmpv4Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The meaning of the ICMPv4 messages the stack sends and handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv4Repr<'a> {
    /// Echo request (ping).
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data, echoed back unchanged.
        data: &'a [u8],
    },
    /// Echo reply.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Destination unreachable.
    DstUnreachable {
        /// The code.
        reason: Icmpv4DstUnreachable,
        /// The IP header of the datagram that failed (its options are not kept).
        header: Ipv4Repr,
        /// The quoted start of that datagram's payload (at least 8 bytes per RFC 792,
        /// more per RFC 1812 §4.3.2.3; whatever the sender included).
        data: &'a [u8],
    },
    /// Time exceeded.
    TimeExceeded {
        /// The code.
        reason: Icmpv4TimeExceeded,
        /// The IP header of the datagram that expired.
        header: Ipv4Repr,
        /// The quoted start of its payload.
        data: &'a [u8],
    },
}

/// Reads the IPv4 header quoted in an error message. Its `total_len` describes the
/// original datagram, of which only the start is quoted, so only the header must fit.
fn parse_quoted(quote: &[u8]) -> Result<(Ipv4Repr, &[u8])> {
    if quote.len() < ipv4::HEADER_LEN {
        return Err(Error::Truncated);
    }
    let p = Ipv4Packet::new_unchecked(quote);
    let header_len = p.header_len();
    if p.version() != 4 || header_len < ipv4::HEADER_LEN {
        return Err(Error::Malformed);
    }
    if quote.len() < header_len {
        return Err(Error::Truncated);
    }
    let payload_len = usize::from(p.total_len())
        .checked_sub(header_len)
        .ok_or(Error::Malformed)?;
    let header = Ipv4Repr {
        src_addr: p.src_addr(),
        dst_addr: p.dst_addr(),
        protocol: p.protocol(),
        payload_len,
        ttl: p.ttl(),
        dscp_ecn: p.dscp_ecn(),
        ident: p.ident(),
        dont_frag: p.dont_frag(),
        more_frags: p.more_frags(),
        frag_offset: p.frag_offset(),
    };
    Ok((header, &quote[header_len..]))
}

/// The transport endpoints of the datagram an ICMP error quotes: the quoted IPv4 header
/// and the first 8 bytes of its TCP or UDP header (RFC 792 guarantees those 8 bytes;
/// RFC 5927 §4.1 and RFC 1122 §4.2.3.9 use them to find the connection: both ports and,
/// for TCP, the sequence number of the segment that failed).
///
/// The quoted datagram is one *we* sent: `src_*` is our end, `dst_*` the peer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IcmpQuote {
    /// Source address of the quoted datagram (ours).
    pub src_addr: Ipv4Addr,
    /// Destination address of the quoted datagram (the peer's).
    pub dst_addr: Ipv4Addr,
    /// The quoted datagram's protocol: [`IpProtocol::Tcp`] or [`IpProtocol::Udp`].
    pub protocol: IpProtocol,
    /// Source port of the quoted transport header.
    pub src_port: u16,
    /// Destination port of the quoted transport header.
    pub dst_port: u16,
    /// The quoted TCP sequence number (`None` for UDP).
    pub tcp_seq: Option<SeqNumber>,
    /// The quoted datagram's total length (header and payload), for RFC 1191 §5's
    /// plateau estimate when a router sends no next-hop MTU.
    pub total_len: usize,
}

/// Bytes of the quoted transport header an error must carry (RFC 792).
pub const QUOTED_TRANSPORT_LEN: usize = 8;

impl IcmpQuote {
    /// Reads the endpoints from a quoted header and the quoted bytes after it (as
    /// [`Icmpv4Repr::DstUnreachable`] and [`Icmpv4Repr::TimeExceeded`] hold them).
    ///
    /// # Errors
    /// [`Error::Truncated`] when fewer than 8 transport bytes are quoted;
    /// [`Error::Unsupported`] when the quoted protocol is neither TCP nor UDP;
    /// [`Error::Malformed`] when the quoted datagram is a non-first fragment (its
    /// payload does not start with a transport header) or a port is zero.
    pub fn parse(header: &Ipv4Repr, data: &[u8]) -> Result<IcmpQuote> {
        if !matches!(header.protocol, IpProtocol::Tcp | IpProtocol::Udp) {
            return Err(Error::Unsupported);
        }
        if header.frag_offset != 0 {
            return Err(Error::Malformed);
        }
        if data.len() < QUOTED_TRANSPORT_LEN {
            return Err(Error::Truncated);
        }
        let (src_port, dst_port) = (get_u16(data, 0), get_u16(data, 2));
        if src_port == 0 || dst_port == 0 {
            return Err(Error::Malformed);
        }
        let tcp_seq = (header.protocol == IpProtocol::Tcp).then(|| SeqNumber(get_u32(data, 4)));
        Ok(IcmpQuote {
            src_addr: header.src_addr,
            dst_addr: header.dst_addr,
            protocol: header.protocol,
            src_port,
            dst_port,
            tcp_seq,
            total_len: header.payload_len.saturating_add(ipv4::HEADER_LEN),
        })
    }

    /// Reads the endpoints from the bytes after an error message's 8-byte ICMP header
    /// (the quoted IPv4 header, options included, then the transport bytes).
    ///
    /// # Errors
    /// As [`IcmpQuote::parse`], and [`Error::Truncated`] / [`Error::Malformed`] for a
    /// quoted IPv4 header that is cut short or broken.
    pub fn from_payload(payload: &[u8]) -> Result<IcmpQuote> {
        let (header, data) = parse_quoted(payload)?;
        IcmpQuote::parse(&header, data)
    }
}

impl<'a> Icmpv4Repr<'a> {
    /// Reads a message, verifying its checksum when `checksum` says so. Echo messages
    /// are accepted with any code (as Linux does).
    ///
    /// # Errors
    /// [`Error::Truncated`] for a short buffer or quote; [`Error::Malformed`] for a bad
    /// checksum or a broken quoted header; [`Error::Unsupported`] for other types.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv4Packet<&'a T>,
        checksum: ChecksumMode,
    ) -> Result<Icmpv4Repr<'a>> {
        packet.check_len()?;
        if checksum.verify_rx() && !packet.verify_checksum() {
            return Err(Error::Malformed);
        }
        match packet.msg_type() {
            Icmpv4Message::EchoRequest => Ok(Icmpv4Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data: packet.payload(),
            }),
            Icmpv4Message::EchoReply => Ok(Icmpv4Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data: packet.payload(),
            }),
            Icmpv4Message::DstUnreachable => {
                let (header, data) = parse_quoted(packet.payload())?;
                Ok(Icmpv4Repr::DstUnreachable {
                    reason: Icmpv4DstUnreachable::from(packet.msg_code()),
                    header,
                    data,
                })
            }
            Icmpv4Message::TimeExceeded => {
                let (header, data) = parse_quoted(packet.payload())?;
                Ok(Icmpv4Repr::TimeExceeded {
                    reason: Icmpv4TimeExceeded::from(packet.msg_code()),
                    header,
                    data,
                })
            }
            _ => Err(Error::Unsupported),
        }
    }

    /// For an error message, the endpoints of the datagram it quotes; `None` for echo
    /// messages.
    ///
    /// # Errors
    /// As [`IcmpQuote::parse`].
    pub fn quote(&self) -> Option<Result<IcmpQuote>> {
        match self {
            Icmpv4Repr::DstUnreachable { header, data, .. }
            | Icmpv4Repr::TimeExceeded { header, data, .. } => Some(IcmpQuote::parse(header, data)),
            _ => None,
        }
    }

    /// The message length emitted: header, quoted IPv4 header (errors) and data.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv4Repr::EchoRequest { data, .. } | Icmpv4Repr::EchoReply { data, .. } => {
                HEADER_LEN + data.len()
            }
            Icmpv4Repr::DstUnreachable { data, .. } | Icmpv4Repr::TimeExceeded { data, .. } => {
                HEADER_LEN + ipv4::HEADER_LEN + data.len()
            }
        }
    }

    /// The header length (8).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the message into the first [`buffer_len`](Self::buffer_len) bytes of
    /// `packet`; the checksum is computed unless `checksum` is
    /// [`ChecksumMode::Offload`] (ICMP has no pseudo-header, so `Partial` computes it).
    ///
    /// # Panics
    /// When the buffer is shorter than [`buffer_len`](Self::buffer_len), or a quoted
    /// header's `payload_len` exceeds 65515.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Icmpv4Packet<T>,
        checksum: ChecksumMode,
    ) {
        let len = self.buffer_len();
        let mut p = Icmpv4Packet::new_unchecked(&mut packet.buffer.as_mut()[..len]);
        match *self {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }
            | Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                let t = if matches!(self, Icmpv4Repr::EchoRequest { .. }) {
                    Icmpv4Message::EchoRequest
                } else {
                    Icmpv4Message::EchoReply
                };
                p.set_msg_type(t);
                p.set_msg_code(0);
                p.set_echo_ident(ident);
                p.set_echo_seq_no(seq_no);
                p.payload_mut().copy_from_slice(data);
            }
            Icmpv4Repr::DstUnreachable {
                reason,
                header,
                data,
            } => {
                p.set_msg_type(Icmpv4Message::DstUnreachable);
                p.set_msg_code(reason.into());
                p.set_next_hop_mtu(0);
                emit_quote(p.payload_mut(), &header, data);
            }
            Icmpv4Repr::TimeExceeded {
                reason,
                header,
                data,
            } => {
                p.set_msg_type(Icmpv4Message::TimeExceeded);
                p.set_msg_code(reason.into());
                p.set_next_hop_mtu(0);
                emit_quote(p.payload_mut(), &header, data);
            }
        }
        match checksum {
            ChecksumMode::Offload => p.set_checksum(0),
            ChecksumMode::Full | ChecksumMode::Partial => p.fill_checksum(),
        }
    }
}

fn emit_quote(buf: &mut [u8], header: &Ipv4Repr, data: &[u8]) {
    let (hdr, rest) = buf.split_at_mut(ipv4::HEADER_LEN);
    header.emit(&mut Ipv4Packet::new_unchecked(hdr), ChecksumMode::Full);
    rest.copy_from_slice(data);
}

/// The destination port of the quoted transport header, when it is TCP or UDP.
fn quoted_port(header: &Ipv4Repr, data: &[u8]) -> Option<u16> {
    match header.protocol {
        IpProtocol::Tcp | IpProtocol::Udp if data.len() >= 4 => Some(get_u16(data, 2)),
        _ => None,
    }
}

impl fmt::Display for Icmpv4Repr<'_> {
    /// tcpdump style: `ICMP echo request, id 1, seq 2, length 64`, `ICMP 198.18.0.2 udp
    /// port 53 unreachable, length 36`, `ICMP time exceeded in-transit, length 36`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let len = self.buffer_len();
        match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no, .. } => {
                write!(
                    f,
                    "ICMP echo request, id {ident}, seq {seq_no}, length {len}"
                )
            }
            Icmpv4Repr::EchoReply { ident, seq_no, .. } => {
                write!(f, "ICMP echo reply, id {ident}, seq {seq_no}, length {len}")
            }
            Icmpv4Repr::DstUnreachable {
                reason,
                header,
                data,
            } => {
                let dst = header.dst_addr;
                match (reason, quoted_port(&header, data)) {
                    (Icmpv4DstUnreachable::PortUnreachable, Some(port)) => {
                        let proto = if header.protocol == IpProtocol::Tcp {
                            "tcp"
                        } else {
                            "udp"
                        };
                        write!(f, "ICMP {dst} {proto} port {port} unreachable")?;
                    }
                    (Icmpv4DstUnreachable::ProtoUnreachable, _) => {
                        write!(
                            f,
                            "ICMP {dst} protocol {} unreachable",
                            u8::from(header.protocol)
                        )?;
                    }
                    (Icmpv4DstUnreachable::HostUnreachable, _) => {
                        write!(f, "ICMP host {dst} unreachable")?;
                    }
                    (Icmpv4DstUnreachable::NetUnreachable, _) => {
                        write!(f, "ICMP net {dst} unreachable")?;
                    }
                    (Icmpv4DstUnreachable::FragRequired, _) => {
                        write!(f, "ICMP {dst} unreachable - need to frag")?;
                    }
                    (other, _) => {
                        write!(f, "ICMP {dst} unreachable, code {}", u8::from(other))?;
                    }
                }
                write!(f, ", length {len}")
            }
            Icmpv4Repr::TimeExceeded { reason, .. } => {
                let what = match reason {
                    Icmpv4TimeExceeded::TtlExpired => "in-transit",
                    Icmpv4TimeExceeded::FragExpired => "reassembly",
                    Icmpv4TimeExceeded::Unknown(_) => "unknown code",
                };
                write!(f, "ICMP time exceeded {what}, length {len}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    // Echo request as sent by Linux ping (id 0x1234, seq 1) with 8 data bytes; the
    // checksum was computed independently with a plain RFC 1071 sum.
    fn echo() -> [u8; 16] {
        let mut b = [
            0x08, 0x00, 0x00, 0x00, 0x12, 0x34, 0x00, 0x01, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66,
            0x67, 0x68,
        ];
        b[2..4].copy_from_slice(&ECHO_CSUM.to_be_bytes());
        b
    }
    const ECHO_CSUM: u16 = 0x5435;

    #[test]
    fn echo_round_trip() {
        let b = echo();
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        let r = Icmpv4Repr::parse(&p, ChecksumMode::Full).unwrap();
        assert_eq!(
            r,
            Icmpv4Repr::EchoRequest {
                ident: 0x1234,
                seq_no: 1,
                data: b"abcdefgh"
            }
        );
        let mut out = [0u8; 16];
        r.emit(
            &mut Icmpv4Packet::new_unchecked(&mut out[..]),
            ChecksumMode::Full,
        );
        assert_eq!(out, b);
        assert_eq!(
            r.to_string(),
            "ICMP echo request, id 4660, seq 1, length 16"
        );
    }

    #[test]
    fn port_unreachable_round_trip() {
        let header = Ipv4Repr::new(
            Ipv4Addr::new(198, 18, 0, 1),
            Ipv4Addr::new(198, 18, 0, 2),
            IpProtocol::Udp,
            12,
            64,
        );
        let quoted = [0x13, 0x88, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00];
        let r = Icmpv4Repr::DstUnreachable {
            reason: Icmpv4DstUnreachable::PortUnreachable,
            header,
            data: &quoted,
        };
        let mut out = [0u8; 36];
        assert_eq!(r.buffer_len(), 36);
        r.emit(
            &mut Icmpv4Packet::new_unchecked(&mut out[..]),
            ChecksumMode::Full,
        );
        let p = Icmpv4Packet::new_checked(&out[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, ChecksumMode::Full).unwrap(), r);
        assert_eq!(
            r.to_string(),
            "ICMP 198.18.0.2 udp port 53 unreachable, length 36"
        );
    }

    /// RFC 792's quote: IPv4 header (here with 4 bytes of options) and 8 bytes of TCP.
    #[test]
    fn quote_of_a_tcp_segment() {
        let mut q = [0u8; 24 + 8];
        q[0] = 0x46; // version 4, IHL 6
        q[2..4].copy_from_slice(&60u16.to_be_bytes());
        q[8] = 64;
        q[9] = 6;
        q[12..16].copy_from_slice(&[198, 18, 0, 1]);
        q[16..20].copy_from_slice(&[198, 18, 0, 2]);
        q[24..26].copy_from_slice(&49152u16.to_be_bytes());
        q[26..28].copy_from_slice(&80u16.to_be_bytes());
        q[28..32].copy_from_slice(&0xdead_beefu32.to_be_bytes());
        let quote = IcmpQuote::from_payload(&q).unwrap();
        assert_eq!(quote.src_addr, Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(quote.dst_addr, Ipv4Addr::new(198, 18, 0, 2));
        assert_eq!((quote.src_port, quote.dst_port), (49152, 80));
        assert_eq!(quote.tcp_seq, Some(SeqNumber(0xdead_beef)));
        assert_eq!(quote.total_len, 60 - 24 + 20);
        // Fewer than 8 transport bytes, a non-first fragment, another protocol, a zero
        // port: refused.
        assert_eq!(
            IcmpQuote::from_payload(&q[..31]).unwrap_err(),
            Error::Truncated
        );
        let mut frag = q;
        frag[7] = 1;
        assert_eq!(
            IcmpQuote::from_payload(&frag).unwrap_err(),
            Error::Malformed
        );
        let mut icmp = q;
        icmp[9] = 1;
        assert_eq!(
            IcmpQuote::from_payload(&icmp).unwrap_err(),
            Error::Unsupported
        );
        let mut zero = q;
        zero[26..28].fill(0);
        assert_eq!(
            IcmpQuote::from_payload(&zero).unwrap_err(),
            Error::Malformed
        );
    }

    #[test]
    fn errors() {
        let b = echo();
        assert_eq!(
            Icmpv4Packet::new_checked(&b[..7]).unwrap_err(),
            Error::Truncated
        );
        let mut bad = b;
        bad[15] ^= 1;
        let p = Icmpv4Packet::new_checked(&bad[..]).unwrap();
        assert_eq!(
            Icmpv4Repr::parse(&p, ChecksumMode::Full).unwrap_err(),
            Error::Malformed
        );
        let mut redirect = b;
        redirect[0] = 5;
        let p = Icmpv4Packet::new_checked(&redirect[..]).unwrap();
        assert_eq!(
            Icmpv4Repr::parse(&p, ChecksumMode::Offload).unwrap_err(),
            Error::Unsupported
        );
        let mut unreach = b;
        unreach[0] = 3;
        let p = Icmpv4Packet::new_checked(&unreach[..]).unwrap();
        // Eight bytes cannot hold the quoted IPv4 header.
        assert_eq!(
            Icmpv4Repr::parse(&p, ChecksumMode::Offload).unwrap_err(),
            Error::Truncated
        );
    }
}
