//! IPv4 (RFC 791, host requirements RFC 1122 §3.2.1): validation and delivery of
//! received datagrams, and the output path every protocol sends through.
//!
//! In: the payload of an Ethernet frame. Checks, each with its own drop counter: the
//! version, the header checksum (unless the channel verified it), the length fields,
//! the source (not broadcast or multicast, RFC 1122 §3.2.1.3), the destination (one of
//! our addresses or a broadcast we hear; hosts do not forward), and the TTL. Fragments
//! go through reassembly; whole datagrams to ICMP, UDP or TCP.
//!
//! Out: datagrams routed to a next hop, resolved to a MAC (or parked until ARP
//! answers), and written in place: Ethernet and IPv4 headers, then the payload the
//! caller fills; cut into fragments when larger than the MTU.

use core::net::{IpAddr, Ipv4Addr};

use ulnet_wire::{ChecksumMode, EtherType, EthernetAddress, IpProtocol, Ipv4Packet, Ipv4Repr};

use super::frag::fragment_payload_len;
use super::pending::IpHeader;
use super::{Core, DropReason, Interface, TxSink};
use crate::time::Instant;
use crate::IpFields;

/// The IPv4 header we emit (no options).
pub(crate) const HEADER_LEN: usize = ulnet_wire::ipv4::HEADER_LEN;

/// How a datagram reached us, for the handlers above IP.
#[derive(Debug, Clone, Copy)]
pub(super) struct Delivery<'a> {
    /// Its header (for reassembled datagrams: the whole datagram's).
    pub header: Ipv4Repr,
    /// Its payload.
    pub payload: &'a [u8],
    /// The rest of a TCP payload that arrived in several buffers, after `payload`
    /// ([`Interface::ingress_parts`]); empty otherwise.
    pub rest: &'a [&'a [u8]],
    /// Sent to a broadcast address: never answered with an error or echo.
    pub broadcast: bool,
    /// Checksums above IP still need verifying (the channel did not, or the datagram
    /// was reassembled, which no device checksums).
    pub verify: bool,
}

impl Interface {
    /// `rest`, when not empty, holds the rest of a datagram that arrived in several
    /// buffers, which [`parts_in_place`](super::parts_in_place) found to be a whole TCP
    /// segment of exactly the length its header says.
    pub(super) fn process_ipv4(
        &mut self,
        now: Instant,
        payload: &[u8],
        rest: &[&[u8]],
        link_broadcast: bool,
        tx: &mut dyn TxSink,
    ) {
        let stats = &mut self.core.stats;
        if payload.len() < HEADER_LEN {
            return stats.drop(DropReason::Ipv4Truncated);
        }
        let packet = Ipv4Packet::new_unchecked(payload);
        if packet.version() != 4 {
            return stats.drop(DropReason::Ipv4BadVersion);
        }
        let more: usize = rest.iter().map(|p| p.len()).sum();
        match packet.check_len_parts(more) {
            Ok(()) => {}
            Err(ulnet_wire::Error::Truncated) => return stats.drop(DropReason::Ipv4Truncated),
            Err(_) => return stats.drop(DropReason::Ipv4Malformed),
        }
        let verify = self.core.rx_checksum.verify_rx();
        if verify && !packet.verify_checksum() {
            return stats.drop(DropReason::Ipv4BadChecksum);
        }
        let Ok(header) = Ipv4Repr::parse_parts(&packet, more, ChecksumMode::Offload) else {
            return stats.drop(DropReason::Ipv4Malformed);
        };
        let (src, dst) = (header.src_addr, header.dst_addr);
        if src.is_broadcast() || src.is_multicast() || self.core.is_broadcast(src) {
            return self.core.stats.drop(DropReason::Ipv4BadSource);
        }
        let broadcast = self.core.is_broadcast(dst);
        // RFC 1122 §3.3.6: a unicast datagram that came as a link-layer broadcast is
        // discarded.
        if !(self.core.is_ours(dst) && !link_broadcast || broadcast) {
            return self.core.stats.drop(DropReason::Ipv4NotForUs);
        }
        if header.ttl == 0 {
            return self.core.stats.drop(DropReason::Ipv4TtlZero);
        }
        // In several buffers the datagram fills them exactly (`parts_in_place`): no
        // link padding to cut from the first.
        let payload = if rest.is_empty() {
            packet.payload()
        } else {
            &payload[packet.header_len()..]
        };
        if !header.is_fragment() {
            // Above the MTU and whole, a datagram can only be a host's segmentation
            // super-frame taken whole: TCP's is one stretch of its byte stream, but a
            // UDP one holds many datagrams and no longer says where each ends.
            if header.protocol == IpProtocol::Udp
                && usize::from(packet.total_len()) > self.core.config.mtu
            {
                return self.core.stats.drop(DropReason::UdpAboveMtu);
            }
            return self.deliver_ipv4(
                now,
                Delivery {
                    header,
                    payload,
                    rest,
                    broadcast,
                    verify,
                },
                tx,
            );
        }
        match self.core.frag.add(now, &header, payload) {
            Ok(None) => {}
            Ok(Some(whole)) => {
                self.core.stats.frag_reassembled += 1;
                self.deliver_ipv4(
                    now,
                    Delivery {
                        header: whole.header,
                        payload: &whole.payload,
                        rest: &[],
                        broadcast,
                        verify: true,
                    },
                    tx,
                );
                self.core.frag.recycle(whole.payload);
            }
            Err(reason) => self.core.stats.drop(reason),
        }
    }

    fn deliver_ipv4(&mut self, now: Instant, d: Delivery<'_>, tx: &mut dyn TxSink) {
        match d.header.protocol {
            IpProtocol::Icmp => self.process_icmp(now, d, tx),
            IpProtocol::Udp => self.process_udp(now, d, tx),
            IpProtocol::Tcp => self.process_tcp(now, d, tx),
            _ => {
                // RFC 1122 §3.2.2.1: a protocol we do not serve SHOULD get a protocol
                // unreachable; `send_unreachable` keeps §3.2.2's exceptions (broadcast,
                // non-unicast source) and the rate limit. ICMP errors never get here
                // (ICMP is served), and only whole datagrams do (so never a non-first
                // fragment).
                self.core.stats.drop(DropReason::Ipv4UnknownProtocol);
                self.core.send_unreachable(
                    now,
                    tx,
                    ulnet_wire::Icmpv4DstUnreachable::ProtoUnreachable,
                    &d,
                );
                return;
            }
        }
        self.core.stats.ipv4_delivered += 1;
    }
}

impl Core {
    /// The header of a datagram we originate from `src` to `dst`.
    pub(super) fn ip_header(&self, src: Ipv4Addr, dst: Ipv4Addr, protocol: IpProtocol) -> IpHeader {
        IpHeader {
            src,
            dst,
            protocol,
            ttl: self.config.ttl,
            tos: 0,
        }
    }

    /// [`Core::ip_header`] with a socket's TOS and TTL.
    pub(super) fn ip_header_with(
        &self,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
        ip: IpFields,
    ) -> IpHeader {
        IpHeader {
            src,
            dst,
            protocol,
            ttl: ip.hop_limit.unwrap_or(self.config.ttl),
            tos: ip.tos,
        }
    }

    /// Sends a datagram: routes it, resolves the next hop (parking the datagram while
    /// ARP asks), and emits it. `fill` writes the `payload_len`-byte payload in place
    /// (or into the parking buffer). Drops are counted here.
    pub(super) fn send_ipv4(
        &mut self,
        now: Instant,
        tx: &mut dyn TxSink,
        h: IpHeader,
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), DropReason> {
        if HEADER_LEN + payload_len > 65535 {
            self.stats.drop(DropReason::TooLarge);
            return Err(DropReason::TooLarge);
        }
        let mac = if self.is_broadcast(h.dst) {
            EthernetAddress::BROADCAST
        } else {
            let hop = match self.routes.next_hop(IpAddr::V4(h.dst)) {
                Some(IpAddr::V4(hop)) => hop,
                _ => {
                    self.stats.drop(DropReason::NoRoute);
                    return Err(DropReason::NoRoute);
                }
            };
            let mut park = |core: &mut Core| {
                core.pending.push(
                    IpAddr::V4(hop),
                    super::pending::AnyHeader::V4(h),
                    payload_len,
                    &mut *fill,
                )
            };
            match self.resolve(now, tx, IpAddr::V4(hop), &mut park) {
                Some(mac) => mac,
                // Parked (or dropped and counted): nothing more to do now.
                None => return Ok(()),
            }
        };
        self.emit_ipv4(now, tx, mac, h, payload_len, fill)
    }

    /// Emits a datagram to `mac`, in fragments when it exceeds the MTU (RFC 791 §3.2).
    pub(super) fn emit_ipv4(
        &mut self,
        now: Instant,
        tx: &mut dyn TxSink,
        mac: EthernetAddress,
        h: IpHeader,
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), DropReason> {
        let mut repr = Ipv4Repr::new(h.src, h.dst, h.protocol, payload_len, h.ttl);
        repr.dscp_ecn = h.tos;
        repr.ident = self.next_ident(now, &h);
        if HEADER_LEN + payload_len <= self.config.mtu {
            stage_hook!(tx_mark TxIpv4);
            let sent = self.send_frame(
                tx,
                mac,
                EtherType::Ipv4,
                HEADER_LEN + payload_len,
                &mut |buf| {
                    let (head, payload) = buf.split_at_mut(HEADER_LEN);
                    repr.emit(&mut Ipv4Packet::new_unchecked(head), ChecksumMode::Full);
                    fill(payload);
                },
            );
            return if sent {
                Ok(())
            } else {
                Err(DropReason::TxFull)
            };
        }
        // Fragmenting needs the whole payload first (its checksum covers all of it):
        // build it in the scratch buffer, then copy one slice into each fragment.
        let mut scratch = core::mem::take(&mut self.scratch);
        scratch.clear();
        scratch.resize(payload_len, 0);
        fill(&mut scratch);
        repr.dont_frag = false;
        let chunk = fragment_payload_len(self.config.mtu);
        let mut result = Ok(());
        let mut offset = 0;
        while offset < payload_len {
            let len = chunk.min(payload_len - offset);
            let mut frag = repr;
            frag.payload_len = len;
            frag.frag_offset = offset as u16;
            frag.more_frags = offset + len < payload_len;
            let piece = &scratch[offset..offset + len];
            let sent = self.send_frame(tx, mac, EtherType::Ipv4, HEADER_LEN + len, &mut |buf| {
                let (head, payload) = buf.split_at_mut(HEADER_LEN);
                frag.emit(&mut Ipv4Packet::new_unchecked(head), ChecksumMode::Full);
                payload.copy_from_slice(piece);
            });
            if !sent {
                // The rest is useless without this fragment.
                result = Err(DropReason::TxFull);
                break;
            }
            self.stats.frag_sent += 1;
            offset += len;
        }
        self.scratch = scratch;
        result
    }
}
