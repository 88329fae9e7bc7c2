//! ARP (RFC 826) for IPv4 over Ethernet: answering requests for our addresses,
//! learning neighbours, asking for unknown ones, and announcing ourselves on start
//! (RFC 5227 §2.3).
//!
//! In: ARP packets and neighbour timers; out: replies, requests and announcements, and
//! packets released from the pending queue once their next hop answers.

use core::net::{IpAddr, Ipv4Addr};

use ulnet_wire::{ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress};

use super::neighbor::{Lookup, Timer};
use super::pending::AnyHeader;
use super::{Core, DropReason, TxSink};
use crate::time::Instant;

impl Core {
    pub(super) fn process_arp(&mut self, now: Instant, payload: &[u8], tx: &mut dyn TxSink) {
        let repr = match ArpPacket::new_checked(payload).and_then(|p| ArpRepr::parse(&p)) {
            Ok(r) => r,
            Err(ulnet_wire::Error::Truncated) => return self.stats.drop(DropReason::ArpTruncated),
            Err(_) => return self.stats.drop(DropReason::ArpUnsupported),
        };
        if !matches!(repr.operation, ArpOperation::Request | ArpOperation::Reply) {
            return self.stats.drop(DropReason::ArpUnsupported);
        }
        let (sha, spa, tpa) = (
            repr.source_hardware_addr,
            repr.source_protocol_addr,
            repr.target_protocol_addr,
        );
        if !sha.is_unicast() || spa.is_broadcast() || spa.is_multicast() {
            return self.stats.drop(DropReason::ArpBadSource);
        }
        if self.is_ours(spa) {
            // RFC 5227 §2.4: another host using our address is a conflict to report;
            // our own frames reflected back are merely not for us.
            let reason = if sha == self.config.mac {
                DropReason::ArpNotForUs
            } else {
                DropReason::ArpAddressConflict
            };
            return self.stats.drop(reason);
        }
        let for_us = self.is_ours(tpa);
        if spa.is_unspecified() {
            // An RFC 5227 probe: answer it to defend our address, learn nothing.
            if for_us && repr.operation == ArpOperation::Request {
                self.send_arp_reply(tx, sha, tpa, Ipv4Addr::UNSPECIFIED);
            } else {
                self.stats.drop(DropReason::ArpNotForUs);
            }
            return;
        }
        // RFC 826 "Packet reception": update the sender if we track it; add it if the
        // packet is for us.
        let known = self.neighbors.state(IpAddr::V4(spa)).is_some();
        if self.neighbors.fill(IpAddr::V4(spa), sha, now, for_us) {
            self.flush_pending(now, IpAddr::V4(spa), sha, tx);
        }
        if for_us && repr.operation == ArpOperation::Request {
            self.send_arp_reply(tx, sha, tpa, spa);
        } else if !for_us && !known {
            self.stats.drop(DropReason::ArpNotForUs);
        }
    }

    fn send_arp_reply(
        &mut self,
        tx: &mut dyn TxSink,
        to_mac: EthernetAddress,
        ours: Ipv4Addr,
        to_ip: Ipv4Addr,
    ) {
        let reply = ArpRepr {
            operation: ArpOperation::Reply,
            source_hardware_addr: self.config.mac,
            source_protocol_addr: ours,
            target_hardware_addr: to_mac,
            target_protocol_addr: to_ip,
        };
        if self.send_arp(tx, to_mac, &reply) {
            self.stats.arp_replies_sent += 1;
        }
    }

    fn send_arp(&mut self, tx: &mut dyn TxSink, dst: EthernetAddress, repr: &ArpRepr) -> bool {
        self.send_frame(tx, dst, EtherType::Arp, repr.buffer_len(), &mut |buf| {
            repr.emit(&mut ArpPacket::new_unchecked(buf));
        })
    }

    /// Broadcasts a request for `target`, or sends it to `mac` alone (a NUD probe of a
    /// stale entry, RFC 1122 §2.3.2.1's "unicast poll"; the target hardware field stays
    /// zero, as in any request).
    fn send_arp_request(
        &mut self,
        tx: &mut dyn TxSink,
        target: Ipv4Addr,
        mac: Option<EthernetAddress>,
    ) {
        let Some(src) = self.source_for(target) else {
            return self.stats.drop(DropReason::NoSourceAddress);
        };
        let req = ArpRepr {
            operation: ArpOperation::Request,
            source_hardware_addr: self.config.mac,
            source_protocol_addr: src,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: target,
        };
        if self.send_arp(tx, mac.unwrap_or(EthernetAddress::BROADCAST), &req) {
            self.stats.arp_requests_sent += 1;
            self.stats.arp_probes_sent += u64::from(mac.is_some());
        }
    }

    /// Sends the RFC 5227 §2.3 announcements that are due: an ARP request whose sender
    /// and target are our address, so neighbours update stale entries.
    pub(super) fn announce(&mut self, now: Instant, tx: &mut dyn TxSink) {
        if self.announce.remaining == 0 || self.announce.next_at.is_some_and(|t| t > now) {
            return;
        }
        for i in 0..self.v4.len() {
            let addr = self.v4[i].0;
            let req = ArpRepr {
                operation: ArpOperation::Request,
                source_hardware_addr: self.config.mac,
                source_protocol_addr: addr,
                target_hardware_addr: EthernetAddress([0; 6]),
                target_protocol_addr: addr,
            };
            if self.send_arp(tx, EthernetAddress::BROADCAST, &req) {
                self.stats.arp_announcements_sent += 1;
            }
        }
        self.announce.remaining -= 1;
        self.announce.next_at = Some(now + self.config.limits.announce_interval);
    }

    /// Runs the neighbour timers: requests due, and packets dropped for neighbours that
    /// never answered.
    pub(super) fn poll_neighbors(&mut self, now: Instant, tx: &mut dyn TxSink) {
        // Every iteration of a busy-polling loop comes here: with no timer due and
        // nothing parked, a look at the deadlines is all (the batch below starts by
        // writing eight timers).
        if self.pending.count() == 0
            && !self.pending_recheck
            && self.neighbors.poll_at().is_none_or(|t| t > now)
        {
            return;
        }
        let mut due = [None::<Timer>; 8];
        // Collect in small batches: the cache cannot be borrowed while sending.
        loop {
            let mut n = 0;
            self.neighbors.poll_limited(now, &mut |t| {
                due[n] = Some(t);
                n += 1;
                n < due.len()
            });
            for t in due.iter_mut().take(n) {
                match t.take() {
                    Some(Timer::Request(IpAddr::V4(ip))) => self.send_arp_request(tx, ip, None),
                    Some(Timer::Probe(IpAddr::V4(ip), mac)) => {
                        self.send_arp_request(tx, ip, Some(mac));
                    }
                    Some(Timer::Request(IpAddr::V6(ip))) => self.send_ns(now, tx, ip, None),
                    Some(Timer::Probe(IpAddr::V6(ip), mac)) => self.send_ns(now, tx, ip, Some(mac)),
                    Some(Timer::Failed(ip)) => {
                        let dropped = self.pending.drop_for(ip);
                        self.stats.drop_n(DropReason::NeighborUnreachable, dropped);
                    }
                    _ => {}
                }
            }
            if n < due.len() {
                break;
            }
        }
        self.service_pending(now, tx);
    }

    /// Sends parked packets whose next hop became known by other means (a static
    /// entry) and drops those whose next hop has no entry left.
    fn service_pending(&mut self, now: Instant, tx: &mut dyn TxSink) {
        self.pending_recheck = false;
        let mut i = 0;
        while let Some(hop) = self.pending.next_hop_at(i) {
            match self.neighbors.lookup(hop, now) {
                Lookup::Found(mac) => self.flush_pending(now, hop, mac, tx),
                Lookup::Missing => {
                    let dropped = self.pending.drop_for(hop);
                    self.stats.drop_n(DropReason::NeighborUnreachable, dropped);
                }
                Lookup::Pending => i += 1,
            }
        }
    }

    /// Finds the MAC for `next_hop`, or parks the packet and starts resolution.
    /// Returns `None` when the packet was parked (or dropped and counted).
    pub(super) fn resolve(
        &mut self,
        now: Instant,
        tx: &mut dyn TxSink,
        hop: IpAddr,
        park: &mut dyn FnMut(&mut Self) -> Result<(), DropReason>,
    ) -> Option<EthernetAddress> {
        match self.neighbors.lookup_for_send(hop, now) {
            Lookup::Found(mac) => return Some(mac),
            Lookup::Pending => {}
            Lookup::Missing => {
                if !self.neighbors.start(hop, now) {
                    self.stats.drop(DropReason::NeighborCacheFull);
                    return None;
                }
            }
        }
        if let Err(reason) = park(self) {
            self.stats.drop(reason);
        }
        self.poll_neighbors(now, tx);
        None
    }

    /// Sends every packet parked for `hop`, now at `mac`.
    pub(super) fn flush_pending(
        &mut self,
        now: Instant,
        hop: IpAddr,
        mac: EthernetAddress,
        tx: &mut dyn TxSink,
    ) {
        while let Some(p) = self.pending.pop_for(hop) {
            let payload = &p.payload;
            let mut fill = |buf: &mut [u8]| buf.copy_from_slice(payload);
            let _ = match p.header {
                AnyHeader::V4(h) => self.emit_ipv4(now, tx, mac, h, payload.len(), &mut fill),
                AnyHeader::V6(h) => self.emit_ipv6(tx, mac, h, payload.len(), &mut fill),
            };
            self.pending.recycle(p.payload);
        }
    }
}
