//! ICMP echo sockets: what `ulnet ping` uses. The application queues echo requests
//! (RFC 792) with its identifier; the interface sends them and hands back the matching
//! echo replies, stamped with the instant they arrived and, when the request is still
//! remembered, the round-trip time.
//!
//! Invariants: bounded request and reply buffers, and a bounded record of requests in
//! flight (the oldest is forgotten first).

use core::net::IpAddr;

use super::{PacketBuffer, RecvError, SendError};
use crate::storage::Ring;
use crate::time::{Duration, Instant};

/// The largest echo payload over IPv4: 65535 less the IPv4 and ICMP headers.
pub const MAX_PAYLOAD_LEN: usize = 65535 - 20 - 8;

/// One echo reply received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoReply {
    /// Who answered.
    pub src: IpAddr,
    /// The sequence number echoed.
    pub seq_no: u16,
    /// The payload length.
    pub len: usize,
    /// When the interface received it.
    pub received_at: Instant,
    /// The time since the matching request left, if that request is remembered.
    pub rtt: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InFlight {
    dst: IpAddr,
    seq_no: u16,
    sent_at: Instant,
}

/// An ICMP echo socket bound to one identifier.
#[derive(Debug, Clone)]
pub struct IcmpSocket {
    ident: u16,
    tx: PacketBuffer<(IpAddr, u16)>,
    rx: PacketBuffer<EchoReply>,
    in_flight: Ring<InFlight>,
    dropped: u64,
}

impl IcmpSocket {
    /// A socket for echo identifier `ident`, holding `datagram_count` requests and
    /// replies and `len` payload bytes each way.
    pub fn new(ident: u16, datagram_count: usize, len: usize) -> IcmpSocket {
        IcmpSocket {
            ident,
            tx: PacketBuffer::new(datagram_count, len),
            rx: PacketBuffer::new(datagram_count, len),
            in_flight: Ring::new(datagram_count.max(1) * 4),
            dropped: 0,
        }
    }

    /// The echo identifier.
    pub fn ident(&self) -> u16 {
        self.ident
    }

    /// Queues an echo request to `dst` with `seq_no` and payload `data`.
    ///
    /// # Errors
    /// [`SendError::Unaddressable`] for an unspecified destination;
    /// [`SendError::TooLarge`] above the protocol or buffer maximum;
    /// [`SendError::BufferFull`] when the buffer has no room now.
    pub fn send_echo(&mut self, dst: IpAddr, seq_no: u16, data: &[u8]) -> Result<(), SendError> {
        if dst.is_unspecified() {
            return Err(SendError::Unaddressable);
        }
        if data.len() > MAX_PAYLOAD_LEN || data.len() > self.tx.capacity() {
            return Err(SendError::TooLarge);
        }
        if !self.tx.push((dst, seq_no), data) {
            return Err(SendError::BufferFull);
        }
        Ok(())
    }

    /// Takes the oldest reply, copying as much of its payload as fits into `buf`.
    ///
    /// # Errors
    /// [`RecvError::Exhausted`] when none is waiting.
    pub fn recv_reply(&mut self, buf: &mut [u8]) -> Result<EchoReply, RecvError> {
        let (reply, _, _) = self.rx.pop(buf).ok_or(RecvError::Exhausted)?;
        Ok(reply)
    }

    /// Whether a reply is waiting.
    pub fn can_recv(&self) -> bool {
        !self.rx.is_empty()
    }

    /// Requests waiting to be sent.
    pub fn tx_queued(&self) -> usize {
        self.tx.datagram_count()
    }

    /// Whether the largest datagram a send may offer fits now, so no send can be waiting
    /// for room. Egress raises a writable event only when this was false: an event on
    /// every transmission would wake every blocked reader of the socket for nothing.
    pub(crate) fn has_room_for_any(&self) -> bool {
        self.tx.fits(MAX_PAYLOAD_LEN.min(self.tx.capacity()))
    }

    /// Replies dropped because the receive buffer was full.
    pub fn rx_dropped(&self) -> u64 {
        self.dropped
    }

    pub(crate) fn peek_tx(&self) -> Option<(IpAddr, u16, usize)> {
        self.tx.peek().map(|(&(d, s), n)| (d, s, n))
    }

    pub(crate) fn read_tx(&self, buf: &mut [u8]) -> usize {
        self.tx.peek_payload(buf)
    }

    /// Drops the next request; `sent_at` records it for the round-trip time.
    pub(crate) fn consume_tx(&mut self, sent_at: Option<Instant>) {
        if let Some((dst, seq_no)) = self.tx.discard() {
            if let Some(sent_at) = sent_at {
                if self.in_flight.is_full() {
                    self.in_flight.pop();
                }
                let _ = self.in_flight.push(InFlight {
                    dst,
                    seq_no,
                    sent_at,
                });
            }
        }
    }

    /// Queues a reply from `src`; false (and counted) when the buffer is full.
    pub(crate) fn deliver(&mut self, now: Instant, src: IpAddr, seq_no: u16, data: &[u8]) -> bool {
        let mut rtt = None;
        let found = self
            .in_flight
            .iter()
            .find(|f| f.seq_no == seq_no && f.dst == src)
            .copied();
        if let Some(f) = found {
            rtt = Some(now.saturating_duration_since(f.sent_at));
            self.in_flight.retain(|g| *g != f);
        }
        let reply = EchoReply {
            src,
            seq_no,
            len: data.len(),
            received_at: now,
            rtt,
        };
        if self.rx.push(reply, data) {
            true
        } else {
            self.dropped += 1;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtt_from_remembered_request() {
        let dst: IpAddr = "198.18.0.2".parse().unwrap();
        let mut s = IcmpSocket::new(7, 4, 1024);
        assert_eq!(
            s.send_echo("0.0.0.0".parse().unwrap(), 1, b""),
            Err(SendError::Unaddressable)
        );
        s.send_echo(dst, 1, b"abc").unwrap();
        assert_eq!(s.peek_tx(), Some((dst, 1, 3)));
        s.consume_tx(Some(Instant::from_millis(10)));
        assert!(s.deliver(Instant::from_millis(25), dst, 1, b"abc"));
        assert!(s.deliver(Instant::from_millis(26), dst, 1, b"abc"));
        let mut buf = [0u8; 8];
        let r = s.recv_reply(&mut buf).unwrap();
        assert_eq!(r.rtt, Some(Duration::from_millis(15)));
        assert_eq!((r.seq_no, r.len, &buf[..3]), (1, 3, &b"abc"[..]));
        // A duplicate reply finds no request left.
        assert_eq!(s.recv_reply(&mut buf).unwrap().rtt, None);
    }
}
