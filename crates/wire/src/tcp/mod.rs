//! TCP segments (RFC 9293 §3.1): a header view with options, and a representation that
//! borrows the payload.
//!
//! Read first: RFC 9293 §3.1 (header format), §3.4 (sequence numbers); the options are in
//! [`options`]. Any flag combination parses; policy (e.g. dropping SYN|FIN) is the
//! stack's.

pub mod flags;
pub mod options;

use core::fmt;
use core::net::IpAddr;

use crate::bytes::{check_declared, ensure_len, get_u16, get_u32, set_u16, set_u32};
use crate::checksum::{self, ChecksumMode};
use crate::ip::IpProtocol;
use crate::seq::SeqNumber;
use crate::{Error, Result};

pub use flags::TcpFlags;
pub use options::{SackBlocks, TcpOption, TcpOptions, TcpOptionsIter, TcpTimestamp};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    pub const OFF_FLAGS: usize = 12;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
    pub const OPTIONS: usize = 20;
}

/// The length of a TCP header without options.
pub const HEADER_LEN: usize = field::OPTIONS;

/// A view of a TCP segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps a buffer without checking it; getters may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> TcpPacket<T> {
        TcpPacket { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    ///
    /// # Errors
    /// As [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<TcpPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the header with its options fits; afterwards no getter panics. The
    /// whole buffer after the header is the payload (the IP layer trimmed it).
    ///
    /// # Errors
    /// [`Error::Truncated`] when the buffer is too short; [`Error::Malformed`] when the
    /// data offset is below 5 words.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        ensure_len(len, HEADER_LEN)?;
        check_declared(len, HEADER_LEN, self.header_len())
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

    /// The sequence number.
    pub fn seq_number(&self) -> SeqNumber {
        SeqNumber(get_u32(self.buffer.as_ref(), field::SEQ))
    }

    /// The acknowledgment number (meaningful when ACK is set).
    pub fn ack_number(&self) -> SeqNumber {
        SeqNumber(get_u32(self.buffer.as_ref(), field::ACK))
    }

    /// The header length in bytes, options included (data offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::OFF_FLAGS] >> 4) * 4
    }

    /// The control bits (reserved bits dropped).
    pub fn flags(&self) -> TcpFlags {
        TcpFlags::from_bits_truncate(get_u16(self.buffer.as_ref(), field::OFF_FLAGS))
    }

    /// Whether FIN is set.
    pub fn fin(&self) -> bool {
        self.flags().contains(TcpFlags::FIN)
    }

    /// Whether SYN is set.
    pub fn syn(&self) -> bool {
        self.flags().contains(TcpFlags::SYN)
    }

    /// Whether RST is set.
    pub fn rst(&self) -> bool {
        self.flags().contains(TcpFlags::RST)
    }

    /// Whether PSH is set.
    pub fn psh(&self) -> bool {
        self.flags().contains(TcpFlags::PSH)
    }

    /// Whether ACK is set.
    pub fn ack(&self) -> bool {
        self.flags().contains(TcpFlags::ACK)
    }

    /// Whether URG is set.
    pub fn urg(&self) -> bool {
        self.flags().contains(TcpFlags::URG)
    }

    /// The raw (unscaled) window field.
    pub fn window_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::WINDOW)
    }

    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The urgent pointer (meaningful when URG is set).
    pub fn urgent_at(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::URGENT)
    }

    /// The raw option bytes.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// Iterates the options.
    pub fn options_iter(&self) -> TcpOptionsIter<'_> {
        TcpOptionsIter::new(self.options())
    }

    /// The sequence space the segment takes: payload plus one for SYN and one for FIN
    /// (RFC 9293 §3.4).
    pub fn segment_len(&self) -> usize {
        let b = self.buffer.as_ref();
        b.len() - self.header_len() + usize::from(self.syn()) + usize::from(self.fin())
    }

    /// Whether the checksum over the whole buffer (header and payload) is right for the
    /// given IP addresses.
    pub fn verify_checksum(&self, src: &IpAddr, dst: &IpAddr) -> bool {
        self.verify_checksum_parts(src, dst, &[])
    }

    /// [`verify_checksum`](Self::verify_checksum) for a segment whose payload goes on
    /// past this buffer in `rest` (a frame that arrived in several buffers).
    pub fn verify_checksum_parts(&self, src: &IpAddr, dst: &IpAddr, rest: &[&[u8]]) -> bool {
        let b = self.buffer.as_ref();
        let len = b.len() + rest.iter().map(|p| p.len()).sum::<usize>();
        let Ok(len) = u32::try_from(len) else {
            return false;
        };
        checksum::combine(&[
            checksum::pseudo_header(src, dst, IpProtocol::Tcp, len),
            checksum::data_chain(b, rest),
        ]) == 0xffff
    }

    /// Whether the checksum field holds the pseudo-header sum and nothing more: the
    /// value a sender leaves for a device to finish (Linux's `CHECKSUM_PARTIAL`,
    /// `__tcp_v4_send_check`; our own [`ChecksumMode::Partial`]), which no device
    /// finished. Only a link that never leaves memory (veth) delivers such segments;
    /// anywhere else this is an unverified checksum.
    pub fn checksum_is_unfinished(&self, src: &IpAddr, dst: &IpAddr) -> bool {
        self.checksum_is_unfinished_parts(src, dst, 0)
    }

    /// [`checksum_is_unfinished`](Self::checksum_is_unfinished) for a segment whose
    /// payload goes on past this buffer for `rest_len` more bytes.
    pub fn checksum_is_unfinished_parts(
        &self,
        src: &IpAddr,
        dst: &IpAddr,
        rest_len: usize,
    ) -> bool {
        let Ok(len) = u32::try_from(self.buffer.as_ref().len() + rest_len) else {
            return false;
        };
        checksum::same(
            self.checksum(),
            checksum::pseudo_header(src, dst, IpProtocol::Tcp, len),
        )
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> TcpPacket<&'a T> {
    /// The payload: everything after the header, borrowed for the buffer's lifetime.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT, v);
    }

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, v: SeqNumber) {
        set_u32(self.buffer.as_mut(), field::SEQ, v.0);
    }

    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, v: SeqNumber) {
        set_u32(self.buffer.as_mut(), field::ACK, v.0);
    }

    /// Sets the header length in bytes (a multiple of 4, 20 to 60); keeps the flags.
    pub fn set_header_len(&mut self, len: usize) {
        let b = &mut self.buffer.as_mut()[field::OFF_FLAGS];
        *b = (*b & 0x0f) | (((len / 4) as u8) << 4);
    }

    /// Sets the control bits; keeps the header length and clears the reserved bits.
    pub fn set_flags(&mut self, flags: TcpFlags) {
        let b = self.buffer.as_mut();
        let off = u16::from(b[field::OFF_FLAGS] & 0xf0) << 8;
        set_u16(b, field::OFF_FLAGS, off | flags.bits());
    }

    /// Sets the window field.
    pub fn set_window_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::WINDOW, v);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Sets the urgent pointer.
    pub fn set_urgent_at(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::URGENT, v);
    }

    /// The option bytes, mutably.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// The payload, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }

    /// Computes and stores the checksum over the whole buffer, which must hold exactly
    /// this segment. Lets a sender emit the header with an empty payload, write the
    /// payload into [`payload_mut`](Self::payload_mut) itself, then checksum once.
    ///
    /// # Panics
    /// When the buffer is longer than 4 GiB.
    pub fn fill_checksum(&mut self, src: &IpAddr, dst: &IpAddr) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let len = u32::try_from(b.len()).expect("TCP segment over 4 GiB");
        let sum = checksum::combine(&[
            checksum::pseudo_header(src, dst, IpProtocol::Tcp, len),
            checksum::data(b),
        ]);
        self.set_checksum(!sum);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for TcpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The meaning of a TCP segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpRepr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: SeqNumber,
    /// Acknowledgment number (meaningful when `flags` has ACK; carried as is).
    pub ack: SeqNumber,
    /// Control bits.
    pub flags: TcpFlags,
    /// Window field, raw (unscaled).
    pub window: u16,
    /// Urgent pointer (meaningful when `flags` has URG).
    pub urgent: u16,
    /// Options.
    pub options: TcpOptions,
    /// Payload (its first part, when [`payload_rest`](Self::payload_rest) holds more).
    pub payload: &'a [u8],
    /// The rest of a received payload that arrived in several buffers (a multi-buffer
    /// frame taken without gathering it), in order after [`payload`](Self::payload);
    /// empty otherwise. Lengths and [`emit`](Self::emit) count it.
    pub payload_rest: &'a [&'a [u8]],
}

impl<'a> TcpRepr<'a> {
    /// Reads a segment, verifying the checksum when `checksum` says so.
    ///
    /// # Errors
    /// [`Error::Truncated`]/[`Error::Malformed`] from `check_len`; [`Error::Malformed`]
    /// for a wrong checksum or an impossible option length.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &TcpPacket<&'a T>,
        src: &IpAddr,
        dst: &IpAddr,
        checksum: ChecksumMode,
    ) -> Result<TcpRepr<'a>> {
        packet.check_len()?;
        if checksum.verify_rx() && !packet.verify_checksum(src, dst) {
            return Err(Error::Malformed);
        }
        Ok(TcpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq: packet.seq_number(),
            ack: packet.ack_number(),
            flags: packet.flags(),
            window: packet.window_len(),
            urgent: packet.urgent_at(),
            options: TcpOptions::parse(packet.options())?,
            payload: packet.payload(),
            payload_rest: &[],
        })
    }

    /// The payload's length, [`payload_rest`](Self::payload_rest) included.
    pub fn payload_len(&self) -> usize {
        self.payload.len() + self.payload_rest.iter().map(|p| p.len()).sum::<usize>()
    }

    /// The header length emitted: 20 plus the options, a multiple of 4.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options.buffer_len()
    }

    /// Header plus payload length.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len()
    }

    /// The sequence space taken: payload plus SYN and FIN (RFC 9293 §3.4).
    pub fn segment_len(&self) -> usize {
        self.payload_len()
            + usize::from(self.flags.contains(TcpFlags::SYN))
            + usize::from(self.flags.contains(TcpFlags::FIN))
    }

    /// Writes the header, options and payload into the first
    /// [`buffer_len`](Self::buffer_len) bytes of `packet`, then the checksum as
    /// `checksum` says. To write the payload in place instead, emit a repr with an empty
    /// payload into a buffer of the full segment length, fill
    /// [`TcpPacket::payload_mut`] and call [`TcpPacket::fill_checksum`].
    ///
    /// # Panics
    /// When the buffer is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut TcpPacket<T>,
        src: &IpAddr,
        dst: &IpAddr,
        checksum: ChecksumMode,
    ) {
        let header_len = self.header_len();
        let len = header_len + self.payload_len();
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq);
        packet.set_ack_number(self.ack);
        packet.set_header_len(header_len);
        packet.set_flags(self.flags);
        packet.set_window_len(self.window);
        packet.set_checksum(0);
        packet.set_urgent_at(self.urgent);
        let b = packet.buffer.as_mut();
        self.options.emit(&mut b[HEADER_LEN..header_len]);
        let mut at = header_len;
        for part in core::iter::once(&self.payload).chain(self.payload_rest) {
            b[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        let len32 = len as u32;
        let value = match checksum {
            ChecksumMode::Full => !checksum::combine(&[
                checksum::pseudo_header(src, dst, IpProtocol::Tcp, len32),
                checksum::data(&b[..len]),
            ]),
            ChecksumMode::Offload => 0,
            ChecksumMode::Partial => checksum::pseudo_header(src, dst, IpProtocol::Tcp, len32),
        };
        packet.set_checksum(value);
    }
}

impl fmt::Display for TcpRepr<'_> {
    /// tcpdump style, with ports but no addresses: `5000 > 80: Flags [S.], seq 1, ack 2,
    /// win 64240, options [mss 1460], length 0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} > {}: ", self.src_port, self.dst_port)?;
        let summary = SegmentSummary {
            flags: self.flags,
            seq: self.seq,
            ack: self.ack,
            window: self.window,
            urgent: self.urgent,
            payload_len: self.payload_len(),
        };
        summary.write(f, |w| {
            let mut first = true;
            let mut r = Ok(());
            self.options.for_each_emitted(|o| {
                if r.is_ok() {
                    r = if first {
                        write!(w, "{o}")
                    } else {
                        write!(w, ",{o}")
                    };
                    first = false;
                }
            });
            r
        })
    }
}

/// The fields of a tcpdump line after the ports.
pub(crate) struct SegmentSummary {
    pub(crate) flags: TcpFlags,
    pub(crate) seq: SeqNumber,
    pub(crate) ack: SeqNumber,
    pub(crate) window: u16,
    pub(crate) urgent: u16,
    pub(crate) payload_len: usize,
}

impl SegmentSummary {
    /// Writes `Flags [..], seq .., ack .., win .., options [..], length ..`; `options`
    /// writes the comma-separated option list, and the brackets appear only when it
    /// wrote something.
    pub(crate) fn write(
        &self,
        f: &mut dyn fmt::Write,
        options: impl FnOnce(&mut dyn fmt::Write) -> fmt::Result,
    ) -> fmt::Result {
        write!(f, "Flags [{}]", self.flags)?;
        // Like tcpdump, a bare ACK shows no sequence number.
        if self.payload_len > 0 {
            write!(
                f,
                ", seq {}:{}",
                self.seq,
                self.seq + self.payload_len as u32
            )?;
        } else if self
            .flags
            .intersects(TcpFlags::SYN | TcpFlags::FIN | TcpFlags::RST)
        {
            write!(f, ", seq {}", self.seq)?;
        }
        if self.flags.contains(TcpFlags::ACK) {
            write!(f, ", ack {}", self.ack)?;
        }
        write!(f, ", win {}", self.window)?;
        if self.flags.contains(TcpFlags::URG) {
            write!(f, ", urg {}", self.urgent)?;
        }
        let mut started = false;
        options(&mut LazyPrefix {
            inner: f,
            prefix: ", options [",
            started: &mut started,
        })?;
        if started {
            f.write_str("]")?;
        }
        write!(f, ", length {}", self.payload_len)
    }
}

/// Writes `prefix` before the first byte that passes through.
struct LazyPrefix<'f> {
    inner: &'f mut dyn fmt::Write,
    prefix: &'static str,
    started: &'f mut bool,
}

impl fmt::Write for LazyPrefix<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if s.is_empty() {
            return Ok(());
        }
        if !*self.started {
            *self.started = true;
            self.inner.write_str(self.prefix)?;
        }
        self.inner.write_str(s)
    }
}

#[cfg(test)]
mod tests;
