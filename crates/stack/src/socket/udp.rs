//! UDP sockets (RFC 768): bind, `send_to`, `recv_from`, with bounded per-socket
//! buffers.
//!
//! In (from the interface): datagrams addressed to the bound endpoint. Out: datagrams
//! the application queued, taken by the interface's egress. Invariants: buffers never
//! hold more than their configured datagrams and bytes; a datagram that does not fit
//! the receive buffer is dropped and counted; payloads are copied once in each
//! direction (frame ⇄ socket buffer ⇄ application).

use core::net::{IpAddr, SocketAddr};

use super::{BindError, PacketBuffer, RecvError, SendError};
use crate::IpFields;

/// The largest UDP payload over IPv4: 65535 less the IPv4 and UDP headers.
pub const MAX_PAYLOAD_LEN: usize = 65535 - 20 - 8;

/// Buffer sizes of a UDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpConfig {
    /// Datagrams the receive buffer holds.
    pub rx_datagram_count: usize,
    /// Payload bytes the receive buffer holds.
    pub rx_len: usize,
    /// Datagrams the transmit buffer holds.
    pub tx_datagram_count: usize,
    /// Payload bytes the transmit buffer holds.
    pub tx_len: usize,
}

impl Default for UdpConfig {
    /// 64 datagrams and 64 KiB each way: room for one datagram of the largest size.
    fn default() -> Self {
        UdpConfig {
            rx_datagram_count: 64,
            rx_len: 64 * 1024,
            tx_datagram_count: 64,
            tx_len: 64 * 1024,
        }
    }
}

/// Where a received datagram came from and was sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpMetadata {
    /// The sender.
    pub peer: SocketAddr,
    /// The local address it was sent to (ours, or a broadcast address).
    pub local_addr: IpAddr,
}

/// Counters of one socket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpSocketStats {
    /// Datagrams queued for the application.
    pub rx_datagrams: u64,
    /// Datagrams dropped because the receive buffer was full.
    pub rx_dropped: u64,
    /// Datagrams handed to the interface for sending.
    pub tx_datagrams: u64,
}

/// A UDP socket. Create it, [`bind`](UdpSocket::bind) it (or let the socket set pick an
/// ephemeral port) and add it to a [`SocketSet`](super::SocketSet).
#[derive(Debug, Clone)]
pub struct UdpSocket {
    local: Option<SocketAddr>,
    /// The peer of a connected socket (`connect(2)` on UDP): ICMP errors about its
    /// datagrams are reported (Linux reports them on connected sockets only).
    peer: Option<SocketAddr>,
    /// An ICMP error waiting to fail the next send or receive (Linux's `sk_err`).
    error: Option<UdpError>,
    /// Bound to `[::]`: IPv6 only (`IPV6_V6ONLY`, RFC 3493 §5.3), or IPv4 too.
    v6only: bool,
    /// TOS and TTL of the datagrams it sends (`IP_TOS`, `IP_TTL`).
    ip: IpFields,
    rx: PacketBuffer<UdpMetadata>,
    tx: PacketBuffer<SocketAddr>,
    stats: UdpSocketStats,
}

/// An ICMP error reported on a connected UDP socket (RFC 1122 §4.1.3.3: UDP passes ICMP
/// errors up to the application).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UdpError {
    /// Port unreachable: nothing listens at the peer (Linux's `ECONNREFUSED`).
    ConnectionRefused,
}

impl UdpSocket {
    /// An unbound socket with buffers sized by `config` (allocated now).
    pub fn new(config: UdpConfig) -> UdpSocket {
        UdpSocket {
            local: None,
            peer: None,
            error: None,
            v6only: false,
            ip: IpFields::default(),
            rx: PacketBuffer::new(config.rx_datagram_count, config.rx_len),
            tx: PacketBuffer::new(config.tx_datagram_count, config.tx_len),
            stats: UdpSocketStats::default(),
        }
    }

    /// The IPv4 TOS byte / IPv6 Traffic Class and the TTL / Hop Limit of the datagrams
    /// this socket sends from now on, like `IP_TOS` and `IP_TTL` on a UDP socket: the
    /// whole byte, ECN bits included (UDP has no ECN of its own; Linux passes them).
    pub fn set_ip_fields(&mut self, ip: IpFields) {
        self.ip = ip;
    }

    /// What [`set_ip_fields`](Self::set_ip_fields) set.
    pub fn ip_fields(&self) -> IpFields {
        self.ip
    }

    /// Binds to `local`. An unspecified address receives on every address of the
    /// interface; port 0 asks the socket set for an ephemeral port when the socket is
    /// added.
    ///
    /// # Errors
    /// [`BindError::AlreadyBound`] if bound.
    pub fn bind(&mut self, local: SocketAddr) -> Result<(), BindError> {
        if self.local.is_some() {
            return Err(BindError::AlreadyBound);
        }
        self.local = Some(local);
        Ok(())
    }

    /// The bound endpoint (`None` before binding).
    pub fn local_endpoint(&self) -> Option<SocketAddr> {
        self.local
    }

    /// Whether a socket on `[::]` takes IPv6 only ([`set_v6only`](Self::set_v6only)).
    pub fn v6only(&self) -> bool {
        self.v6only
    }

    /// Before the socket joins a set: on `[::]`, take IPv6 datagrams only (`true`, like
    /// `IPV6_V6ONLY`) or IPv4 ones too that no IPv4 socket claims (`false`, the
    /// default, as Linux with `bindv6only=0`). Meaningless on other addresses. Once the
    /// socket is in a set, [`SocketSet::set_udp_v6only`](super::SocketSet::set_udp_v6only)
    /// changes it, checking that no other socket then overlaps.
    pub fn set_v6only(&mut self, on: bool) {
        self.v6only = on;
    }

    /// Connects to `peer` (or disconnects with `None`): ICMP port-unreachable messages
    /// about datagrams to it then fail the next [`send_to`](Self::send_to) or
    /// [`recv_from`](Self::recv_from) with [`SendError::ConnectionRefused`] /
    /// [`RecvError::ConnectionRefused`]. Datagrams from other peers are not filtered here.
    pub fn connect(&mut self, peer: Option<SocketAddr>) {
        self.peer = peer;
        self.error = None;
    }

    /// The connected peer.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// Takes the pending ICMP error, if any.
    pub fn take_error(&mut self) -> Option<UdpError> {
        self.error.take()
    }

    /// An ICMP error quoted a datagram from `local` to `remote`: recorded when the socket
    /// is connected to `remote` (an unconnected socket ignores it, as Linux's does
    /// without IP_RECVERR). Returns whether it was recorded.
    pub(crate) fn icmp_error(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        e: UdpError,
    ) -> bool {
        if self.peer != Some(remote) || !self.accepts(local) {
            return false;
        }
        self.error = Some(e);
        true
    }

    pub(crate) fn set_local(&mut self, local: SocketAddr) {
        self.local = Some(local);
    }

    /// Queues `data` for `dst`; the interface sends it on its next egress.
    ///
    /// # Errors
    /// [`SendError::Unaddressable`] for an unspecified destination or port 0;
    /// [`SendError::TooLarge`] above 65507 bytes or the buffer's capacity;
    /// [`SendError::BufferFull`] when the buffer has no room now;
    /// [`SendError::ConnectionRefused`] once after an ICMP port unreachable on a connected
    /// socket (the datagram is not queued).
    pub fn send_to(&mut self, data: &[u8], dst: SocketAddr) -> Result<(), SendError> {
        #[cfg(feature = "stage-cycles")]
        let entry = crate::stage::tx_enter();
        if let Some(UdpError::ConnectionRefused) = self.error.take() {
            return Err(SendError::ConnectionRefused);
        }
        if dst.port() == 0 || dst.ip().is_unspecified() {
            return Err(SendError::Unaddressable);
        }
        if data.len() > MAX_PAYLOAD_LEN || data.len() > self.tx.capacity() {
            return Err(SendError::TooLarge);
        }
        if !self.tx.push(dst, data) {
            return Err(SendError::BufferFull);
        }
        #[cfg(feature = "stage-cycles")]
        if let Some(l) = self.local {
            crate::stage::tx_queued(l.port(), self.tx.datagram_count() == 1, entry);
        }
        Ok(())
    }

    /// Whether [`send_to`](Self::send_to) of `len` bytes would be accepted now.
    pub fn can_send(&self, len: usize) -> bool {
        self.tx.fits(len)
    }

    /// Takes the oldest received datagram, copying as much as fits into `buf` (the rest
    /// is discarded, as `recvfrom(2)` does); returns the bytes copied and where it came
    /// from. [`peek_len`](Self::peek_len) tells the full length first.
    ///
    /// # Errors
    /// [`RecvError::Exhausted`] when nothing is waiting; [`RecvError::ConnectionRefused`]
    /// once after an ICMP port unreachable on a connected socket.
    pub fn recv_from(&mut self, buf: &mut [u8]) -> Result<(usize, UdpMetadata), RecvError> {
        if let Some(UdpError::ConnectionRefused) = self.error.take() {
            return Err(RecvError::ConnectionRefused);
        }
        let (meta, _, copied) = self.rx.pop(buf).ok_or(RecvError::Exhausted)?;
        #[cfg(feature = "stage-cycles")]
        if let Some(l) = self.local {
            crate::stage::rx_received(l.port());
        }
        Ok((copied, meta))
    }

    /// The length of the oldest received datagram.
    pub fn peek_len(&self) -> Option<usize> {
        self.rx.peek().map(|(_, n)| n)
    }

    /// Whether a datagram or an error is waiting.
    pub fn can_recv(&self) -> bool {
        !self.rx.is_empty() || self.error.is_some()
    }

    /// Datagrams waiting to be sent.
    pub fn tx_queued(&self) -> usize {
        self.tx.datagram_count()
    }

    /// Whether the largest datagram a send may offer fits now, so no send can be waiting
    /// for room. Egress raises a writable event only when this was false: an event on
    /// every transmission would wake every blocked reader of the socket for nothing.
    pub(crate) fn has_room_for_any(&self) -> bool {
        self.tx.fits(MAX_PAYLOAD_LEN.min(self.tx.capacity()))
    }

    /// Datagrams waiting to be received.
    pub fn rx_queued(&self) -> usize {
        self.rx.datagram_count()
    }

    /// The socket's counters.
    pub fn stats(&self) -> &UdpSocketStats {
        &self.stats
    }

    /// Whether a datagram to `dst` belongs to this socket.
    pub(crate) fn accepts(&self, dst: SocketAddr) -> bool {
        match self.local {
            Some(l) => l.port() == dst.port() && (l.ip().is_unspecified() || l.ip() == dst.ip()),
            None => false,
        }
    }

    /// Queues a received datagram; false (and counted) when the buffer is full.
    pub(crate) fn deliver(&mut self, meta: UdpMetadata, payload: &[u8]) -> bool {
        if self.rx.push(meta, payload) {
            self.stats.rx_datagrams += 1;
            true
        } else {
            self.stats.rx_dropped += 1;
            false
        }
    }

    /// The next datagram to send: destination and length.
    pub(crate) fn peek_tx(&self) -> Option<(SocketAddr, usize)> {
        self.tx.peek().map(|(d, n)| (*d, n))
    }

    /// Copies the next datagram's payload into `buf`.
    pub(crate) fn read_tx(&self, buf: &mut [u8]) -> usize {
        self.tx.peek_payload(buf)
    }

    /// Drops the next datagram (sent, or dropped by the interface).
    pub(crate) fn consume_tx(&mut self) {
        if self.tx.discard().is_some() {
            self.stats.tx_datagrams += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn send_checks_and_bounds() {
        let mut s = UdpSocket::new(UdpConfig {
            rx_datagram_count: 2,
            rx_len: 8,
            tx_datagram_count: 2,
            tx_len: 8,
        });
        assert_eq!(
            s.send_to(b"x", sa("0.0.0.0:9")),
            Err(SendError::Unaddressable)
        );
        assert_eq!(
            s.send_to(b"x", sa("198.18.0.1:0")),
            Err(SendError::Unaddressable)
        );
        assert_eq!(
            s.send_to(&[0; 9], sa("198.18.0.1:9")),
            Err(SendError::TooLarge)
        );
        assert_eq!(s.send_to(&[0; 6], sa("198.18.0.1:9")), Ok(()));
        assert_eq!(
            s.send_to(&[0; 3], sa("198.18.0.1:9")),
            Err(SendError::BufferFull)
        );
        assert_eq!(s.peek_tx(), Some((sa("198.18.0.1:9"), 6)));
        s.consume_tx();
        assert_eq!(s.stats().tx_datagrams, 1);
    }

    #[test]
    fn receive_bounded_and_truncating() {
        let mut s = UdpSocket::new(UdpConfig {
            rx_datagram_count: 2,
            rx_len: 8,
            tx_datagram_count: 1,
            tx_len: 1,
        });
        s.bind(sa("0.0.0.0:7")).unwrap();
        assert!(s.accepts(sa("198.18.0.1:7")));
        assert!(!s.accepts(sa("198.18.0.1:8")));
        let meta = UdpMetadata {
            peer: sa("198.18.0.2:5000"),
            local_addr: "198.18.0.1".parse().unwrap(),
        };
        assert!(s.deliver(meta, b"hello"));
        assert!(!s.deliver(meta, b"world"));
        assert_eq!(s.stats().rx_dropped, 1);
        assert_eq!(s.peek_len(), Some(5));
        let mut buf = [0u8; 3];
        assert_eq!(s.recv_from(&mut buf), Ok((3, meta)));
        assert_eq!(&buf, b"hel");
        assert_eq!(s.recv_from(&mut buf), Err(RecvError::Exhausted));
        assert_eq!(s.bind(sa("0.0.0.0:8")), Err(BindError::AlreadyBound));
    }
}
