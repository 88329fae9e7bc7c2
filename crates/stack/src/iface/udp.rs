//! UDP (RFC 768) between the interface and its sockets: delivery of received
//! datagrams, port unreachable for closed ports (RFC 1122 §4.1.3.1), and sending what
//! sockets queued.

use core::net::{IpAddr, SocketAddr};

use ulnet_wire::{
    ChecksumMode, Icmpv4DstUnreachable, Icmpv6DstUnreachable, IpProtocol, UdpPacket, UdpRepr,
};

use super::ipv4::{Delivery, HEADER_LEN as IPV4_HEADER_LEN};
use super::ipv6::Delivery6;
use super::{DropReason, Interface, TxSink};
use crate::socket::UdpMetadata;
use crate::time::Instant;

const UDP_HEADER_LEN: usize = ulnet_wire::udp::HEADER_LEN;

impl Interface {
    pub(super) fn process_udp(&mut self, now: Instant, d: Delivery<'_>, tx: &mut dyn TxSink) {
        stage_hook!(rx_mark RxIpv4);
        let (src, dst) = (IpAddr::V4(d.header.src_addr), IpAddr::V4(d.header.dst_addr));
        if self.udp_input(src, dst, d.payload, d.verify) {
            self.core
                .send_unreachable(now, tx, Icmpv4DstUnreachable::PortUnreachable, &d);
        }
    }

    pub(super) fn process_udp6(&mut self, now: Instant, d: Delivery6<'_>, tx: &mut dyn TxSink) {
        let (src, dst) = (IpAddr::V6(d.header.src_addr), IpAddr::V6(d.header.dst_addr));
        // RFC 8200 §8.1: a zero UDP checksum is invalid over IPv6 (RFC 6935's tunnel
        // exception aside); the wire parser accepts zero for IPv4's sake. Part of the
        // checksum check: a channel that verified checksums (`rx_verified`, e.g. the
        // in-memory pipe, whose peer leaves the field to an offload that never runs)
        // vouches for the datagram.
        if d.verify && d.payload.len() >= UDP_HEADER_LEN && d.payload[6..8] == [0, 0] {
            return self.core.stats.drop(DropReason::UdpBadChecksum);
        }
        if self.udp_input(src, dst, d.payload, d.verify) {
            self.core
                .send_unreachable6(now, tx, Icmpv6DstUnreachable::PortUnreachable, &d);
        }
    }

    /// Delivers a datagram to its socket. True when no socket has the port (the
    /// caller answers with its family's port unreachable, RFC 1122 §4.1.3.1,
    /// RFC 4443 §3.1).
    fn udp_input(&mut self, src: IpAddr, dst: IpAddr, payload: &[u8], verify: bool) -> bool {
        let unfinished_ok = self.core.rx_unfinished;
        let stats = &mut self.core.stats;
        let packet = match UdpPacket::new_checked(payload) {
            Ok(p) => p,
            Err(_) => {
                stats.drop(DropReason::UdpMalformed);
                return false;
            }
        };
        if verify
            && !super::transport_checksum_ok(
                stats,
                unfinished_ok,
                || packet.checksum_is_unfinished(&src, &dst),
                || packet.verify_checksum(&src, &dst),
            )
        {
            stats.drop(DropReason::UdpBadChecksum);
            return false;
        }
        let local = SocketAddr::new(dst, packet.dst_port());
        let meta = UdpMetadata {
            peer: SocketAddr::new(src, packet.src_port()),
            local_addr: dst,
        };
        match self.sockets.deliver_udp(local, meta, packet.payload()) {
            Some(true) => stats.udp_delivered += 1,
            Some(false) => stats.drop(DropReason::UdpSocketFull),
            None => {
                stats.drop(DropReason::UdpNoSocket);
                return true;
            }
        }
        false
    }

    /// Sends what the UDP sockets queued. A datagram that cannot go now (no route,
    /// transmit ring full) is dropped and counted: UDP promises no delivery, and
    /// keeping it would stall the socket. A socket that had no room for the largest
    /// datagram before gets a writable event (no one can be waiting on one that had).
    pub(super) fn egress_udp(&mut self, now: Instant, tx: &mut dyn TxSink) {
        let mtu = self.core.config.mtu;
        let tx_mode = self.core.config.checksum.tx;
        for i in 0..self.sockets.udp_slot_count() {
            let Some(s) = self.sockets.udp_at_mut(i) else {
                continue;
            };
            let Some(local) = s.local_endpoint() else {
                continue;
            };
            if s.tx_queued() == 0 {
                continue;
            }
            let had_room = s.has_room_for_any();
            while let Some((dst, len)) = s.peek_tx() {
                stage_hook!(tx_pick(local.port()));
                let src_ip = match (local.ip(), dst.ip()) {
                    (IpAddr::V4(a), IpAddr::V4(_)) if !a.is_unspecified() => Some(IpAddr::V4(a)),
                    (IpAddr::V6(a), IpAddr::V6(_)) if !a.is_unspecified() => Some(IpAddr::V6(a)),
                    (_, IpAddr::V4(d)) => self.core.source_for(d).map(IpAddr::V4),
                    (_, IpAddr::V6(d)) => self.core.v6.source_for(d).map(IpAddr::V6),
                };
                let Some(src) = src_ip else {
                    self.core.stats.drop(DropReason::NoSourceAddress);
                    s.consume_tx();
                    continue;
                };
                let repr = UdpRepr {
                    src_port: local.port(),
                    dst_port: dst.port(),
                };
                let datagram_len = UDP_HEADER_LEN + len;
                let dst_addr = dst.ip();
                let (ip_len, link_mtu) = match dst_addr {
                    IpAddr::V4(_) => (IPV4_HEADER_LEN, mtu),
                    IpAddr::V6(_) => (super::ipv6::HEADER_LEN, self.core.v6.mtu),
                };
                // A device cannot checksum a datagram spread over fragments.
                let mode = if ip_len + datagram_len > link_mtu {
                    ChecksumMode::Full
                } else {
                    tx_mode
                };
                let ip = s.ip_fields();
                let sock = &*s;
                stage_hook!(tx_mark TxUdp);
                let mut fill = |buf: &mut [u8]| {
                    stage_hook!(tx_mark TxIpv4);
                    repr.emit(
                        &mut UdpPacket::new_unchecked(buf),
                        &src,
                        &dst_addr,
                        len,
                        |payload| {
                            sock.read_tx(payload);
                        },
                        mode,
                    );
                    stage_hook!(tx_mark TxUdp);
                };
                let sent = match (src, dst_addr) {
                    (IpAddr::V4(s4), IpAddr::V4(d4)) => {
                        let h = self.core.ip_header_with(s4, d4, IpProtocol::Udp, ip);
                        self.core.send_ipv4(now, tx, h, datagram_len, &mut fill)
                    }
                    (IpAddr::V6(s6), IpAddr::V6(d6)) => {
                        let h = self.core.ip6_header_with(s6, d6, IpProtocol::Udp, ip);
                        self.core.send_ipv6(now, tx, h, datagram_len, &mut fill)
                    }
                    _ => Err(DropReason::NoSourceAddress),
                };
                stage_hook!(tx_emitted());
                s.consume_tx();
                if sent.is_ok() {
                    self.core.stats.udp_sent += 1;
                }
            }
            if !had_room {
                self.sockets.udp_sent(i);
            }
        }
    }
}
