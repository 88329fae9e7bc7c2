//! UDP (RFC 768) between the interface and its sockets: delivery of received
//! datagrams, port unreachable for closed ports (RFC 1122 §4.1.3.1), and sending what
//! sockets queued.

use core::net::{IpAddr, SocketAddr};

use ulnet_wire::{ChecksumMode, Icmpv4DstUnreachable, IpProtocol, UdpPacket, UdpRepr};

use super::ipv4::{Delivery, HEADER_LEN as IPV4_HEADER_LEN};
use super::{DropReason, Interface, TxSink};
use crate::socket::UdpMetadata;
use crate::time::Instant;

const UDP_HEADER_LEN: usize = ulnet_wire::udp::HEADER_LEN;

impl Interface {
    pub(super) fn process_udp(&mut self, now: Instant, d: Delivery<'_>, tx: &mut dyn TxSink) {
        stage_hook!(rx_mark RxIpv4);
        let stats = &mut self.core.stats;
        let packet = match UdpPacket::new_checked(d.payload) {
            Ok(p) => p,
            Err(_) => return stats.drop(DropReason::UdpMalformed),
        };
        let (src, dst) = (IpAddr::V4(d.header.src_addr), IpAddr::V4(d.header.dst_addr));
        if d.verify && !packet.verify_checksum(&src, &dst) {
            return stats.drop(DropReason::UdpBadChecksum);
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
                self.core
                    .send_unreachable(now, tx, Icmpv4DstUnreachable::PortUnreachable, &d);
            }
        }
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
                let IpAddr::V4(dst_ip) = dst.ip() else {
                    s.consume_tx();
                    continue;
                };
                let src_ip = match local.ip() {
                    IpAddr::V4(a) if !a.is_unspecified() => Some(a),
                    _ => self.core.source_for(dst_ip),
                };
                let Some(src_ip) = src_ip else {
                    self.core.stats.drop(DropReason::NoSourceAddress);
                    s.consume_tx();
                    continue;
                };
                let repr = UdpRepr {
                    src_port: local.port(),
                    dst_port: dst.port(),
                };
                let datagram_len = UDP_HEADER_LEN + len;
                // A device cannot checksum a datagram spread over fragments.
                let mode = if IPV4_HEADER_LEN + datagram_len > mtu {
                    ChecksumMode::Full
                } else {
                    tx_mode
                };
                let (src, dst_addr) = (IpAddr::V4(src_ip), IpAddr::V4(dst_ip));
                let h = self.core.ip_header(src_ip, dst_ip, IpProtocol::Udp);
                let sock = &*s;
                stage_hook!(tx_mark TxUdp);
                let sent = self.core.send_ipv4(now, tx, h, datagram_len, &mut |buf| {
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
                });
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
