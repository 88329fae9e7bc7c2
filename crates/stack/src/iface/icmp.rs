//! ICMPv4 (RFC 792, host requirements RFC 1122 §3.2.2): echo replies, echo replies
//! handed to ping sockets, rate-limited destination-unreachable messages, and the
//! sending side of echo sockets.
//!
//! Not sent, on purpose: errors about broadcast datagrams or from non-unicast sources
//! (RFC 1122 §3.2.2), echo replies to broadcast requests (§3.2.2.6 allows ignoring them,
//! as Linux does by default), time exceeded (a host forwards nothing).

use core::net::IpAddr;

use ulnet_wire::{
    ChecksumMode, Icmpv4DstUnreachable, Icmpv4Message, Icmpv4Packet, Icmpv4Repr, IpProtocol,
};

use super::ipv4::Delivery;
use super::{Core, DropReason, Interface, TxSink};
use crate::time::Instant;

/// The largest error message: RFC 1812 §4.3.2.3 quotes as much of the datagram as fits
/// in 576 bytes.
const ERROR_DATAGRAM_LEN: usize = 576;

/// A token bucket for ICMP errors (RFC 1812 §4.3.2.8). Tokens are kept in millionths so
/// integer arithmetic refills exactly at `rate` per second.
#[derive(Debug, Clone)]
pub(super) struct TokenBucket {
    rate: u64,
    burst: u64,
    tokens: u64,
    last: Option<Instant>,
}

const UNIT: u64 = 1_000_000;

impl TokenBucket {
    pub fn new(rate: u32, burst: u32) -> Self {
        let burst = u64::from(burst) * UNIT;
        TokenBucket {
            rate: u64::from(rate),
            burst,
            tokens: burst,
            last: None,
        }
    }

    /// Takes one token if there is one.
    pub fn take(&mut self, now: Instant) -> bool {
        if let Some(last) = self.last {
            let elapsed = now.saturating_duration_since(last).as_micros();
            let add = u64::try_from(elapsed)
                .unwrap_or(u64::MAX)
                .saturating_mul(self.rate);
            self.tokens = self.tokens.saturating_add(add).min(self.burst);
        }
        self.last = Some(now);
        if self.tokens >= UNIT {
            self.tokens -= UNIT;
            true
        } else {
            false
        }
    }
}

impl Interface {
    pub(super) fn process_icmp(&mut self, now: Instant, d: Delivery<'_>, tx: &mut dyn TxSink) {
        let stats = &mut self.core.stats;
        let Ok(packet) = Icmpv4Packet::new_checked(d.payload) else {
            return stats.drop(DropReason::IcmpMalformed);
        };
        // Devices verify TCP and UDP checksums at most; ICMP is always checked here.
        if !packet.verify_checksum() {
            return stats.drop(DropReason::IcmpBadChecksum);
        }
        let repr = match Icmpv4Repr::parse(&packet, ChecksumMode::Offload) {
            Ok(r) => r,
            Err(ulnet_wire::Error::Unsupported) => return stats.drop(DropReason::IcmpUnsupported),
            Err(_) => return stats.drop(DropReason::IcmpMalformed),
        };
        match repr {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                if d.broadcast {
                    return stats.drop(DropReason::IcmpBroadcastEcho);
                }
                let reply = Icmpv4Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                let h = self
                    .core
                    .ip_header(d.header.dst_addr, d.header.src_addr, IpProtocol::Icmp);
                let sent = self
                    .core
                    .send_ipv4(now, tx, h, reply.buffer_len(), &mut |buf| {
                        reply.emit(&mut Icmpv4Packet::new_unchecked(buf), ChecksumMode::Full);
                    });
                if sent.is_ok() {
                    self.core.stats.icmp_echo_replies_sent += 1;
                }
            }
            Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                let src = IpAddr::V4(d.header.src_addr);
                if self
                    .sockets
                    .deliver_icmp(now, ident, src, seq_no, data)
                    .is_none()
                {
                    stats.drop(DropReason::IcmpNoSocket);
                }
            }
            Icmpv4Repr::DstUnreachable { .. } | Icmpv4Repr::TimeExceeded { .. } => {
                stats.icmp_errors_received += 1;
            }
        }
    }

    /// Sends what the echo sockets queued; a socket that had no room for the largest
    /// request before gets a writable event.
    pub(super) fn egress_icmp(&mut self, now: Instant, tx: &mut dyn TxSink) {
        for i in 0..self.sockets.icmp_slot_count() {
            let Some(s) = self.sockets.icmp_at_mut(i) else {
                continue;
            };
            if s.tx_queued() == 0 {
                continue;
            }
            let had_room = s.has_room_for_any();
            while let Some((dst, seq_no, len)) = s.peek_tx() {
                let IpAddr::V4(dst) = dst else {
                    s.consume_tx(None);
                    continue;
                };
                let Some(src) = self.core.source_for(dst) else {
                    self.core.stats.drop(DropReason::NoSourceAddress);
                    s.consume_tx(None);
                    continue;
                };
                let ident = s.ident();
                let h = self.core.ip_header(src, dst, IpProtocol::Icmp);
                let sock = &*s;
                let sent = self.core.send_ipv4(
                    now,
                    tx,
                    h,
                    ulnet_wire::icmpv4::HEADER_LEN + len,
                    &mut |buf| {
                        let mut p = Icmpv4Packet::new_unchecked(buf);
                        p.set_msg_type(Icmpv4Message::EchoRequest);
                        p.set_msg_code(0);
                        p.set_echo_ident(ident);
                        p.set_echo_seq_no(seq_no);
                        sock.read_tx(p.payload_mut());
                        p.fill_checksum();
                    },
                );
                s.consume_tx(sent.is_ok().then_some(now));
            }
            if !had_room {
                self.sockets.icmp_sent(i);
            }
        }
    }
}

impl Core {
    /// Answers a datagram with destination unreachable, unless RFC 1122 §3.2.2 forbids
    /// it or the rate limit says no.
    pub(super) fn send_unreachable(
        &mut self,
        now: Instant,
        tx: &mut dyn TxSink,
        reason: Icmpv4DstUnreachable,
        d: &Delivery<'_>,
    ) {
        let src = d.header.src_addr;
        if d.broadcast || src.is_unspecified() || src.is_multicast() || self.is_broadcast(src) {
            return;
        }
        if !self.icmp_limit.take(now) {
            self.stats.icmp_rate_limited += 1;
            return;
        }
        let room = ERROR_DATAGRAM_LEN - super::ipv4::HEADER_LEN - 8 - super::ipv4::HEADER_LEN;
        let msg = Icmpv4Repr::DstUnreachable {
            reason,
            header: d.header,
            data: &d.payload[..d.payload.len().min(room)],
        };
        let h = self.ip_header(d.header.dst_addr, src, IpProtocol::Icmp);
        let sent = self.send_ipv4(now, tx, h, msg.buffer_len(), &mut |buf| {
            msg.emit(&mut Icmpv4Packet::new_unchecked(buf), ChecksumMode::Full);
        });
        if sent.is_ok() {
            self.stats.icmp_unreachables_sent += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_refills_at_rate_up_to_burst() {
        let mut b = TokenBucket::new(10, 2);
        let t0 = Instant::from_secs(1);
        assert!(b.take(t0));
        assert!(b.take(t0));
        assert!(!b.take(t0));
        assert!(!b.take(t0 + crate::time::Duration::from_millis(99)));
        assert!(b.take(t0 + crate::time::Duration::from_millis(100)));
        assert!(b.take(Instant::from_secs(100)));
        assert!(b.take(Instant::from_secs(100)));
        assert!(!b.take(Instant::from_secs(100)));
    }
}
