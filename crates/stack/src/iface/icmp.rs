//! ICMPv4 (RFC 792, host requirements RFC 1122 §3.2.2): echo replies, echo replies
//! handed to ping sockets, rate-limited destination-unreachable messages, the sending
//! side of echo sockets, and errors about our datagrams handed to the transport that
//! sent them (TCP: RFC 5927, RFC 5461, RFC 1191; UDP: connected sockets, as Linux).
//!
//! Not sent, on purpose: errors about broadcast datagrams or from non-unicast sources
//! (RFC 1122 §3.2.2), echo replies to broadcast requests (§3.2.2.6 allows ignoring them,
//! as Linux does by default), time exceeded (a host forwards nothing).

use core::net::{IpAddr, SocketAddr};

use ulnet_wire::{
    ChecksumMode, Icmpv4DstUnreachable, Icmpv4Message, Icmpv4Packet, Icmpv4Repr, IpProtocol,
};

use super::ipv4::Delivery;
use super::{Core, DropReason, Interface, TxSink};
use crate::socket::UdpError;
use crate::tcp::{IcmpError, IcmpVerdict};
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
                let next_hop_mtu = packet.next_hop_mtu();
                self.icmp_error(now, &repr, next_hop_mtu);
            }
        }
    }

    /// Hands an error message to the transport that sent the quoted datagram (RFC 1122
    /// §3.2.2.1, §4.1.3.3, §4.2.3.9): TCP gets the 4-tuple and sequence number and
    /// validates them itself (RFC 5927); a connected UDP socket gets port unreachable.
    /// The quote must be of a datagram from one of our addresses.
    fn icmp_error(&mut self, now: Instant, repr: &Icmpv4Repr<'_>, next_hop_mtu: u16) {
        let stats = &mut self.core.stats;
        let q = match repr.quote() {
            Some(Ok(q)) => q,
            Some(Err(ulnet_wire::Error::Unsupported)) | None => {
                // About a protocol no socket of ours sends on (or echo): nothing to tell.
                stats.icmp_errors_unclaimed += 1;
                return;
            }
            Some(Err(_)) => {
                stats.icmp_errors_bad_quote += 1;
                return;
            }
        };
        if !self.core.is_ours(q.src_addr) {
            self.core.stats.icmp_errors_bad_quote += 1;
            return;
        }
        let local = SocketAddr::new(IpAddr::V4(q.src_addr), q.src_port);
        let remote = SocketAddr::new(IpAddr::V4(q.dst_addr), q.dst_port);
        let taken = match (q.tcp_seq, *repr) {
            (Some(seq), _) => {
                let err = match *repr {
                    Icmpv4Repr::DstUnreachable {
                        reason: Icmpv4DstUnreachable::FragRequired,
                        ..
                    } => IcmpError::FragmentationNeeded {
                        next_hop_mtu,
                        quoted_len: q.total_len,
                    },
                    Icmpv4Repr::DstUnreachable { reason, .. } => IcmpError::Unreachable(reason),
                    _ => IcmpError::TimeExceeded,
                };
                self.tcp.as_mut().is_some_and(|tcp| {
                    !matches!(
                        tcp.icmp_error(now, local, remote, seq, err),
                        IcmpVerdict::NoConnection | IcmpVerdict::OutOfWindow
                    )
                })
            }
            (
                None,
                Icmpv4Repr::DstUnreachable {
                    reason: Icmpv4DstUnreachable::PortUnreachable,
                    ..
                },
            ) => self
                .sockets
                .udp_icmp_error(local, remote, UdpError::ConnectionRefused),
            (None, _) => false,
        };
        let stats = &mut self.core.stats;
        if taken {
            stats.icmp_errors_delivered += 1;
        } else {
            stats.icmp_errors_unclaimed += 1;
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
                let dst = match dst {
                    IpAddr::V4(d) => d,
                    IpAddr::V6(dst) => {
                        let Some(src) = self.core.v6.source_for(dst) else {
                            self.core.stats.drop(DropReason::NoSourceAddress);
                            s.consume_tx(None);
                            continue;
                        };
                        let ident = s.ident();
                        let h = self.core.ip6_header(src, dst, IpProtocol::Icmpv6);
                        let sock = &*s;
                        let sent = self.core.send_ipv6(
                            now,
                            tx,
                            h,
                            ulnet_wire::icmpv6::HEADER_LEN + len,
                            &mut |buf| {
                                super::icmpv6::emit_echo_request6(
                                    buf,
                                    &src,
                                    &dst,
                                    ident,
                                    seq_no,
                                    &mut |p| {
                                        sock.read_tx(p);
                                    },
                                )
                            },
                        );
                        s.consume_tx(sent.is_ok().then_some(now));
                        continue;
                    }
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
