//! The glue between the interface and the TCP layer ([`crate::tcp::Tcp`]): segments
//! in, checked and parsed once, handed to `Tcp::process`; segments out of
//! `Tcp::process` (immediate answers) and `Tcp::dispatch` (everything else) written in
//! place behind Ethernet and IPv4 headers.
//!
//! A segment whose next hop is unresolved is parked like any datagram (bounded) while
//! ARP asks; if the queue is full it is dropped and TCP's retransmission recovers.

use core::fmt;
use core::net::{IpAddr, SocketAddr};

use ulnet_wire::{
    checksum, ChecksumMode, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol,
    Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, TcpFlags, TcpPacket, TcpRepr,
};

use super::ethernet::HEADER_LEN as ETH_HEADER_LEN;
use super::ipv4::{Delivery, HEADER_LEN as IPV4_HEADER_LEN};
use super::ipv6::{Delivery6, HEADER_LEN as IPV6_HEADER_LEN};

/// The longest headers of a burst frame: Ethernet, IPv6, TCP with 40 bytes of options.
const BURST_HEAD_MAX: usize = ETH_HEADER_LEN + IPV6_HEADER_LEN + 60;

/// The smallest single segment sent through the channel's offload (when it has one)
/// rather than written into a frame here: only jumbo links (MTU above 16 KB) have such
/// segments. There the copy into the channel's buffer and the checksum summed in software
/// cost more than the offload's system call per frame; at MTU 9000 and below, segments
/// travel in bursts or share the channel's one doorbell per batch.
const WHOLE_OFFLOAD_MIN: usize = 16 * 1024;

/// The IP header of a burst frame.
enum BurstHead {
    V4(Ipv4Repr),
    V6(Ipv6Repr),
}
use super::{Core, DropReason, Gso, GsoSent, Interface, TxSink};
use crate::tcp::{ListenError, ListenerHandle, Tcp};
use crate::time::Instant;
use crate::IpFields;

/// Why [`Interface::listen_tcp`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListenTcpError {
    /// No TCP layer is attached.
    NoTcp,
    /// The TCP layer refused.
    Listen(ListenError),
    /// Port 0 was asked for and no ephemeral port is free.
    NoPorts,
}

impl fmt::Display for ListenTcpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenTcpError::NoTcp => f.write_str("no TCP layer"),
            ListenTcpError::Listen(e) => e.fmt(f),
            ListenTcpError::NoPorts => f.write_str("no ephemeral port free"),
        }
    }
}

impl core::error::Error for ListenTcpError {}

impl Interface {
    /// Listens on `local` with `backlog`, returning the handle and the address listened
    /// on. Port 0 takes an ephemeral port from the same RFC 6056 allocator as UDP's
    /// `bind(:0)`, so the engine, not the socket API, chooses it.
    ///
    /// # Errors
    /// [`ListenTcpError::NoTcp`] without TCP; [`ListenTcpError::NoPorts`] when every
    /// port of the ephemeral range has a listener; what `Tcp::listen` refuses.
    pub fn listen_tcp(
        &mut self,
        local: SocketAddr,
        backlog: usize,
    ) -> Result<(ListenerHandle, SocketAddr), ListenTcpError> {
        let tcp = self.tcp.as_mut().ok_or(ListenTcpError::NoTcp)?;
        if local.port() != 0 {
            let l = tcp.listen(local, backlog).map_err(ListenTcpError::Listen)?;
            return Ok((l, local));
        }
        // The allocator walks the whole range once; each try that finds a listener
        // moves on, so this ends after at most `range_len` tries.
        let mut tried = 0;
        let range_len = self.sockets.ephemeral_range_len();
        while tried < range_len {
            tried += 1;
            let port = self
                .sockets
                .ephemeral_port(local.ip(), |_| false)
                .ok_or(ListenTcpError::NoPorts)?;
            let a = SocketAddr::new(local.ip(), port);
            match tcp.listen(a, backlog) {
                Ok(l) => return Ok((l, a)),
                Err(ListenError::AddressInUse) => continue,
                Err(e) => return Err(ListenTcpError::Listen(e)),
            }
        }
        Err(ListenTcpError::NoPorts)
    }

    /// Attaches the TCP layer; segments to us go to it from now on, and
    /// [`egress`](Self::egress) runs its `dispatch`. Returns the previous one.
    ///
    /// The layer's MTU ([`TcpConfig::mtu`](crate::tcp::TcpConfig::mtu)) is lowered to this
    /// interface's, so the MSS we offer is what the link carries (RFC 9293 §3.7.1) and a
    /// jumbo link gets jumbo segments without a second setting.
    pub fn set_tcp(&mut self, mut tcp: Tcp) -> Option<Tcp> {
        tcp.cap_mtu(self.core.config.mtu);
        let gso = self.core.config.gso_max_len;
        if gso > 0 {
            // Payload room in the largest burst frame: Ethernet, an IPv6 header (the
            // larger) and the largest TCP header (60 bytes) off, never past 64 KB.
            let room = gso.min(65535 + ETH_HEADER_LEN) - ETH_HEADER_LEN - IPV6_HEADER_LEN - 60;
            tcp.offer_gso(room as u32);
        }
        tcp.set_v6_link_mtu(self.core.v6.mtu);
        self.tcp.replace(tcp)
    }

    /// The TCP layer, if attached.
    pub fn tcp(&self) -> Option<&Tcp> {
        self.tcp.as_ref()
    }

    /// The TCP layer, to listen, connect, send and receive.
    pub fn tcp_mut(&mut self) -> Option<&mut Tcp> {
        self.tcp.as_mut()
    }

    pub(super) fn process_tcp(&mut self, now: Instant, d: Delivery<'_>, tx: &mut dyn TxSink) {
        // RFC 1122 §4.2.3.10: segments to broadcast addresses are discarded.
        if d.broadcast {
            return self.core.stats.drop(DropReason::Ipv4NotForUs);
        }
        let (src, dst) = (IpAddr::V4(d.header.src_addr), IpAddr::V4(d.header.dst_addr));
        if self.tcp_input(now, src, dst, d.payload, d.rest, d.verify, tx) {
            self.confirm_progress(now, src);
        }
    }

    pub(super) fn process_tcp6(&mut self, now: Instant, d: Delivery6<'_>, tx: &mut dyn TxSink) {
        // RFC 9293 §3.9.1: TCP is unicast only.
        if d.multicast {
            return self.core.stats.drop(DropReason::Ipv6NotForUs);
        }
        let (src, dst) = (IpAddr::V6(d.header.src_addr), IpAddr::V6(d.header.dst_addr));
        if self.tcp_input(now, src, dst, d.payload, d.rest, d.verify, tx) {
            self.confirm_progress(now, src);
        }
    }

    /// An ACK of new data from `src` is a hint of forward progress that confirms the
    /// neighbour's reachability, the sender's when it is on-link (RFC 4861 §7.3.1; for
    /// IPv4 RFC 1122 §2.3.2.1's "higher-layer advice"), so a stream never stops to probe
    /// a neighbour that is plainly there. Once per eighth of the reachable time per
    /// sender: every ACK of a ping-pong comes here, and the route and cache lookups were
    /// 1% of its round trip (`turns/tcp_ping_pong_64`: 1.224-1.231 µs without them,
    /// 1.239-1.245 at every ACK, 1.208-1.210 with this skip).
    fn confirm_progress(&mut self, now: Instant, src: IpAddr) {
        if self.core.neighbors.confirmed_lately(src, now) {
            return;
        }
        let on_link = match src {
            IpAddr::V6(a) if a.is_unicast_link_local() => true,
            _ => self.core.routes.next_hop(src) == Some(src),
        };
        if on_link {
            self.core.neighbors.confirm(src, None, now);
        }
    }

    /// Hands a segment to the TCP layer; true when it acknowledged new data (forward
    /// progress). `rest` holds the rest of a segment that arrived in several buffers,
    /// after `payload`: summed and stored where it lies.
    #[allow(clippy::too_many_arguments)]
    fn tcp_input(
        &mut self,
        now: Instant,
        src: IpAddr,
        dst: IpAddr,
        payload: &[u8],
        rest: &[&[u8]],
        verify: bool,
        tx: &mut dyn TxSink,
    ) -> bool {
        let unfinished_ok = self.core.rx_unfinished;
        let stats = &mut self.core.stats;
        let Some(tcp) = self.tcp.as_mut() else {
            stats.drop(DropReason::TcpNoLayer);
            return false;
        };
        let Ok(packet) = TcpPacket::new_checked(payload) else {
            stats.drop(DropReason::TcpMalformed);
            return false;
        };
        if verify
            && !super::transport_checksum_ok(
                stats,
                unfinished_ok,
                || {
                    let more = rest.iter().map(|p| p.len()).sum();
                    packet.checksum_is_unfinished_parts(&src, &dst, more)
                },
                || packet.verify_checksum_parts(&src, &dst, rest),
            )
        {
            stats.drop(DropReason::TcpBadChecksum);
            return false;
        }
        let Ok(mut seg) = TcpRepr::parse(&packet, &src, &dst, ChecksumMode::Offload) else {
            stats.drop(DropReason::TcpMalformed);
            return false;
        };
        seg.payload_rest = rest;
        stats.tcp_delivered += 1;
        let core = &mut self.core;
        let acked = tcp.bytes_acked();
        tcp.process_ip(now, src, dst, &seg, &mut |s, d, ip, seg| {
            core.send_tcp(now, tx, s, d, ip, seg);
        });
        tcp.bytes_acked() != acked
    }

    pub(super) fn egress_tcp(&mut self, now: Instant, tx: &mut dyn TxSink) {
        let Some(tcp) = self.tcp.as_mut() else {
            return;
        };
        let core = &mut self.core;
        tcp.dispatch_ip(now, &mut |s, d, ip, seg, segment_size| {
            if segment_size > 0 && seg.payload.len() > usize::from(segment_size) {
                core.send_tcp_burst(now, tx, s, d, ip, seg, segment_size)
            } else if seg.payload.len() >= WHOLE_OFFLOAD_MIN {
                // One segment of a jumbo link, as large as a burst: through the same
                // offload, so it is neither copied into a frame nor summed here.
                core.offload_tcp(now, tx, s, d, ip, seg, 0)
                    .unwrap_or_else(|| core.send_tcp(now, tx, s, d, ip, seg))
            } else {
                core.send_tcp(now, tx, s, d, ip, seg)
            }
        });
    }
}

impl Core {
    /// Sends one segment. False only when the transmit ring is full, so TCP stops
    /// and tries again later; a segment parked or dropped for another reason counts as
    /// handled (TCP retransmits what is lost).
    fn send_tcp(
        &mut self,
        now: Instant,
        tx: &mut dyn TxSink,
        src: IpAddr,
        dst: IpAddr,
        ip: IpFields,
        seg: &TcpRepr<'_>,
    ) -> bool {
        let len = seg.buffer_len();
        let (ip_len, mtu) = match dst {
            IpAddr::V4(_) => (IPV4_HEADER_LEN, self.config.mtu),
            IpAddr::V6(_) => (super::ipv6::HEADER_LEN, self.v6.mtu),
        };
        let mode = if ip_len + len > mtu {
            ChecksumMode::Full
        } else {
            self.config.checksum.tx
        };
        let mut fill = |buf: &mut [u8]| {
            seg.emit(&mut TcpPacket::new_unchecked(buf), &src, &dst, mode);
        };
        let sent = match (src, dst) {
            (IpAddr::V4(s4), IpAddr::V4(d4)) => {
                let h = self.ip_header_with(s4, d4, IpProtocol::Tcp, ip);
                self.send_ipv4(now, tx, h, len, &mut fill)
            }
            (IpAddr::V6(s6), IpAddr::V6(d6)) => {
                let h = self.ip6_header_with(s6, d6, IpProtocol::Tcp, ip);
                self.send_ipv6(now, tx, h, len, &mut fill)
            }
            _ => {
                self.stats.drop(DropReason::NoRoute);
                return true;
            }
        };
        match sent {
            Ok(()) => {
                self.stats.tcp_sent += 1;
                true
            }
            Err(DropReason::TxFull) => false,
            Err(_) => true,
        }
    }

    /// Sends a burst of `segment_size`-byte segments ([`TcpConfig::gso_max`]): as one
    /// frame for the channel to cut when it can ([`Core::offload_tcp`]), else segment by
    /// segment here, as the channel would have cut it. False only when the transmit ring
    /// is full; then nothing of the burst counts as sent, and what did go out is sent
    /// again (duplicates the receiver discards, not losses it must wait for).
    ///
    /// [`TcpConfig::gso_max`]: crate::tcp::TcpConfig::gso_max
    #[allow(clippy::too_many_arguments)] // send_tcp's context and the burst's size
    fn send_tcp_burst(
        &mut self,
        now: Instant,
        tx: &mut dyn TxSink,
        src: IpAddr,
        dst: IpAddr,
        ip: IpFields,
        seg: &TcpRepr<'_>,
        segment_size: u16,
    ) -> bool {
        if let Some(sent) = self.offload_tcp(now, tx, src, dst, ip, seg, segment_size) {
            return sent;
        }
        let size = usize::from(segment_size);
        let mut off = 0;
        while off < seg.payload.len() {
            let end = (off + size).min(seg.payload.len());
            let mut part = *seg;
            part.seq = seg.seq + off as u32;
            part.payload = &seg.payload[off..end];
            if end < seg.payload.len() {
                // FIN and PSH belong to the last segment only.
                part.flags = part.flags - (TcpFlags::FIN | TcpFlags::PSH);
            }
            if !self.send_tcp(now, tx, src, dst, ip, &part) {
                return false;
            }
            off = end;
        }
        true
    }

    /// Hands `seg` to the channel as one frame with its TCP checksum left to finish:
    /// cut into `segment_size`-byte segments, or with 0 sent as the one segment it is.
    /// The channel gets the headers and the payload where the connection keeps it (see
    /// [`TxSink::send_gso_parts`]). `None` when the channel cannot take it (no offload,
    /// the frame too long, the next hop's MAC not known yet): the caller sends it itself.
    /// Otherwise whether it was queued, false only when the transmit ring is full.
    #[allow(clippy::too_many_arguments)] // send_tcp's context and the burst's size
    fn offload_tcp(
        &mut self,
        now: Instant,
        tx: &mut dyn TxSink,
        src: IpAddr,
        dst: IpAddr,
        ip: IpFields,
        seg: &TcpRepr<'_>,
        segment_size: u16,
    ) -> Option<bool> {
        // 0: one segment, not cut (only its checksum is left to the channel).
        let segments = match usize::from(segment_size) {
            0 => 1,
            size => seg.payload.len().div_ceil(size) as u64,
        };
        let tcp_len = seg.buffer_len();
        let ip_len = match dst {
            IpAddr::V4(_) => IPV4_HEADER_LEN,
            IpAddr::V6(_) => IPV6_HEADER_LEN,
        };
        let frame_len = ETH_HEADER_LEN + ip_len + tcp_len;
        // IPv4's total length and IPv6's payload length are 16 bits (no jumbograms).
        let fits = match dst {
            IpAddr::V4(_) => ip_len + tcp_len <= 65535,
            IpAddr::V6(_) => tcp_len <= 65535,
        };
        if frame_len <= self.config.gso_max_len && fits {
            if let Some(mac) = self.known_next_hop(now, dst) {
                let head = match (src, dst) {
                    (IpAddr::V4(s4), IpAddr::V4(d4)) => {
                        let h = self.ip_header_with(s4, d4, IpProtocol::Tcp, ip);
                        let mut repr = Ipv4Repr::new(h.src, h.dst, h.protocol, tcp_len, h.ttl);
                        repr.dscp_ecn = h.tos;
                        // The channel numbers the segments from this ID on; the flow's
                        // next datagram continues after them (RFC 6864 §4.1 gives the ID
                        // of an atomic datagram no meaning, but a GRO receiver merges
                        // only runs of incrementing or equal IDs).
                        repr.ident = self.next_ident_run(
                            now,
                            &h,
                            u16::try_from(segments).unwrap_or(u16::MAX),
                        );
                        BurstHead::V4(repr)
                    }
                    (IpAddr::V6(s6), IpAddr::V6(d6)) => {
                        let h = self.ip6_header_with(s6, d6, IpProtocol::Tcp, ip);
                        BurstHead::V6(Ipv6Repr {
                            src_addr: h.src,
                            dst_addr: h.dst,
                            next_header: h.next_header,
                            payload_len: tcp_len,
                            hop_limit: h.hop_limit,
                            traffic_class: h.traffic_class,
                            flow_label: 0,
                        })
                    }
                    _ => {
                        self.stats.drop(DropReason::NoRoute);
                        return Some(true);
                    }
                };
                let gso = Gso {
                    segment_size,
                    l4_offset: (ETH_HEADER_LEN + ip_len) as u16,
                    header_len: (ETH_HEADER_LEN + ip_len + tcp_len - seg.payload.len()) as u16,
                    ipv6: matches!(head, BurstHead::V6(_)),
                };
                let eth = EthernetRepr {
                    src_addr: self.config.mac,
                    dst_addr: mac,
                    ethertype: match head {
                        BurstHead::V4(_) => EtherType::Ipv4,
                        BurstHead::V6(_) => EtherType::Ipv6,
                    },
                };
                // The headers here, the payload where the connection keeps it: the sink
                // may pass both to the kernel without gathering them into one frame.
                let head_len = usize::from(gso.header_len);
                let mut hdr = [0u8; BURST_HEAD_MAX];
                {
                    let (l2, rest) = hdr[..head_len].split_at_mut(ETH_HEADER_LEN);
                    eth.emit(&mut EthernetFrame::new_unchecked(l2));
                    let (l3, tcp) = rest.split_at_mut(ip_len);
                    match &head {
                        BurstHead::V4(r) => {
                            r.emit(&mut Ipv4Packet::new_unchecked(l3), ChecksumMode::Full);
                        }
                        BurstHead::V6(r) => r.emit(&mut Ipv6Packet::new_unchecked(l3)),
                    }
                    let mut header_only = *seg;
                    header_only.payload = &[];
                    let mut packet = TcpPacket::new_unchecked(tcp);
                    header_only.emit(&mut packet, &src, &dst, ChecksumMode::Offload);
                    // The pseudo-header sum over the whole segment's length only: the
                    // channel completes each segment's checksum after cutting.
                    packet.set_checksum(checksum::pseudo_header(
                        &src,
                        &dst,
                        IpProtocol::Tcp,
                        tcp_len as u32,
                    ));
                }
                let sent = tx.send_gso_parts(&hdr[..head_len], seg.payload, gso);
                match sent {
                    GsoSent::Sent => {
                        self.stats.tx_frames += 1;
                        self.stats.tx_bytes += frame_len as u64;
                        self.stats.tcp_sent += segments;
                        if segment_size == 0 {
                            self.stats.tcp_csum_offloaded += 1;
                        } else {
                            self.stats.gso_bursts += 1;
                        }
                        return Some(true);
                    }
                    GsoSent::Full => {
                        self.stats.drop(DropReason::TxFull);
                        return Some(false);
                    }
                    // The channel has no offload after all: the callers cut and sum
                    // from now on.
                    GsoSent::Unsupported => self.config.gso_max_len = 0,
                }
            }
        }
        None
    }

    /// The MAC of `dst`'s next hop when the neighbour cache already has it (a burst is
    /// never parked: it would wait for resolution as one oversized datagram).
    fn known_next_hop(&mut self, now: Instant, dst: IpAddr) -> Option<EthernetAddress> {
        let hop = match dst {
            IpAddr::V4(_) => self.routes.next_hop(dst)?,
            IpAddr::V6(d6) => IpAddr::V6(self.next_hop6(d6)?),
        };
        match self.neighbors.lookup_for_send(hop, now) {
            super::neighbor::Lookup::Found(mac) => Some(mac),
            _ => None,
        }
    }
}
