//! ICMPv6 (RFC 4443): echo replies, echo replies handed to ping sockets, Neighbor
//! Discovery handed to `nd.rs`, rate-limited errors we send (port unreachable,
//! parameter problem), and errors about our packets handed to the transport that sent
//! them: Packet Too Big lowers TCP's path MTU (RFC 8201 §4, validated by TCP against
//! the quoted 4-tuple and sequence number as for IPv4, RFC 5927 §4.1; never below
//! 1280), the others are soft or hard errors as for ICMPv4 (RFC 4443 §3.1 maps the
//! codes; port unreachable to a connected UDP socket).
//!
//! Not sent, on purpose (RFC 4443 §2.4 e): errors about ICMPv6 errors, about packets to
//! a multicast group (but Packet Too Big, and Parameter Problem code 2 for an option
//! whose action says so), about packets from `::` or a multicast source.

use core::net::{IpAddr, Ipv6Addr, SocketAddr};

use ulnet_wire::{
    ChecksumMode, Icmpv4DstUnreachable, Icmpv6DstUnreachable, Icmpv6Message, Icmpv6Packet,
    Icmpv6ParamProblem, Icmpv6Repr, IpProtocol, Ipv6Repr,
};

use super::ipv6::{Delivery6, HEADER_LEN};
use super::{Core, DropReason, Interface, TxSink};
use crate::socket::UdpError;
use crate::tcp::{IcmpError, IcmpVerdict};
use crate::time::Instant;

/// Room for the quote of an error: RFC 4443 §2.4 (c), the error packet fits 1280 bytes.
const QUOTE_ROOM: usize =
    ulnet_wire::icmpv6::MAX_ERROR_DATAGRAM_LEN - HEADER_LEN - ulnet_wire::icmpv6::HEADER_LEN;

impl Interface {
    pub(super) fn process_icmpv6(&mut self, now: Instant, d: Delivery6<'_>, tx: &mut dyn TxSink) {
        let stats = &mut self.core.stats;
        let (src, dst) = (d.header.src_addr, d.header.dst_addr);
        let Ok(packet) = Icmpv6Packet::new_checked(d.payload) else {
            return stats.drop(DropReason::IcmpMalformed);
        };
        // Devices verify TCP and UDP checksums at most; ICMPv6 is always checked here.
        if !packet.verify_checksum(&src, &dst) {
            return stats.drop(DropReason::IcmpBadChecksum);
        }
        let repr = match Icmpv6Repr::parse(&packet, &src, &dst, ChecksumMode::Offload) {
            Ok(r) => r,
            Err(ulnet_wire::Error::Unsupported) => return stats.drop(DropReason::IcmpUnsupported),
            Err(_) if is_nd(packet.msg_type()) => return stats.drop(DropReason::NdMalformed),
            Err(_) => return stats.drop(DropReason::IcmpMalformed),
        };
        // Only ND and DAD may come from `::` (RFC 4861 §7.1.1, RFC 4862 §5.4).
        if src.is_unspecified() && !matches!(repr, Icmpv6Repr::Ndisc(_)) {
            return stats.drop(DropReason::Ipv6BadSource);
        }
        match repr {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                // RFC 4443 §4.2: a reply to a multicast request comes from one of our
                // unicast addresses.
                let from = if d.multicast {
                    match self.core.v6.source_for(src) {
                        Some(a) => a,
                        None => return self.core.stats.drop(DropReason::NoSourceAddress),
                    }
                } else {
                    dst
                };
                let reply = Icmpv6Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                let h = self.core.ip6_header(from, src, IpProtocol::Icmpv6);
                let sent = self
                    .core
                    .send_ipv6(now, tx, h, reply.buffer_len(), &mut |buf| {
                        reply.emit(
                            &mut Icmpv6Packet::new_unchecked(buf),
                            &from,
                            &src,
                            ChecksumMode::Full,
                        );
                    });
                if sent.is_ok() {
                    self.core.stats.icmp_echo_replies_sent += 1;
                }
            }
            Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                if self
                    .sockets
                    .deliver_icmp(now, ident, IpAddr::V6(src), seq_no, data)
                    .is_none()
                {
                    stats.drop(DropReason::IcmpNoSocket);
                }
            }
            Icmpv6Repr::Ndisc(nd) => self.process_ndisc(now, &d, &nd, tx),
            _ => {
                stats.icmp_errors_received += 1;
                self.icmpv6_error(now, &repr);
            }
        }
    }

    /// Hands an error to the transport that sent the quoted packet (as `icmp_error`
    /// does for ICMPv4). The quote must be of a packet from one of our addresses.
    fn icmpv6_error(&mut self, now: Instant, repr: &Icmpv6Repr<'_>) {
        let q = match repr.quote() {
            Some(Ok(q)) => q,
            Some(Err(ulnet_wire::Error::Unsupported)) | None => {
                self.core.stats.icmp_errors_unclaimed += 1;
                return;
            }
            Some(Err(_)) => {
                self.core.stats.icmp_errors_bad_quote += 1;
                return;
            }
        };
        if !self.core.v6.is_ours(q.src_addr) {
            self.core.stats.icmp_errors_bad_quote += 1;
            return;
        }
        let local = SocketAddr::new(IpAddr::V6(q.src_addr), q.src_port);
        let remote = SocketAddr::new(IpAddr::V6(q.dst_addr), q.dst_port);
        let taken = match (q.tcp_seq, *repr) {
            (Some(seq), _) => {
                let err = match *repr {
                    Icmpv6Repr::PktTooBig { mtu, .. } => IcmpError::PacketTooBig { mtu },
                    Icmpv6Repr::DstUnreachable { reason, .. } => {
                        IcmpError::Unreachable(as_v4_code(reason))
                    }
                    // RFC 4443 §3.4: a parameter problem about our segment; as Linux
                    // (icmpv6_err_convert), a protocol error: hard.
                    Icmpv6Repr::ParamProblem { .. } => {
                        IcmpError::Unreachable(Icmpv4DstUnreachable::ProtoUnreachable)
                    }
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
                Icmpv6Repr::DstUnreachable {
                    reason: Icmpv6DstUnreachable::PortUnreachable,
                    ..
                },
            ) => self
                .sockets
                .udp_icmp_error(local, remote, UdpError::ConnectionRefused),
            (None, _) => false,
        };
        if taken {
            self.core.stats.icmp_errors_delivered += 1;
        } else {
            self.core.stats.icmp_errors_unclaimed += 1;
        }
    }
}

fn is_nd(t: Icmpv6Message) -> bool {
    matches!(u8::from(t), 133..=137)
}

/// The ICMPv4 code with the same meaning to a transport (RFC 4443 §3.1; Linux's
/// `icmpv6_err_convert`: port unreachable refuses, the rest is "host unreachable" but
/// for no route, which is the network's).
fn as_v4_code(c: Icmpv6DstUnreachable) -> Icmpv4DstUnreachable {
    match c {
        Icmpv6DstUnreachable::PortUnreachable => Icmpv4DstUnreachable::PortUnreachable,
        Icmpv6DstUnreachable::NoRoute | Icmpv6DstUnreachable::RejectRoute => {
            Icmpv4DstUnreachable::NetUnreachable
        }
        Icmpv6DstUnreachable::AdminProhibited | Icmpv6DstUnreachable::FailedPolicy => {
            Icmpv4DstUnreachable::CommProhibited
        }
        _ => Icmpv4DstUnreachable::HostUnreachable,
    }
}

impl Core {
    /// Whether RFC 4443 §2.4 (e) lets us answer a packet from `src` with an error, and
    /// the rate limit (§2.4 f, shared with ICMPv4's) has a token.
    fn may_send_error6(&mut self, now: Instant, src: Ipv6Addr) -> bool {
        if src.is_unspecified() || src.is_multicast() {
            return false;
        }
        if !self.icmp_limit.take(now) {
            self.stats.icmp_rate_limited += 1;
            return false;
        }
        true
    }

    /// Sends `msg` about `invoking` (a packet from `to`); the source is the address it
    /// was sent to when that is ours, else one we select.
    fn send_error6(
        &mut self,
        now: Instant,
        tx: &mut dyn TxSink,
        to: &Ipv6Repr,
        msg: &Icmpv6Repr<'_>,
    ) -> bool {
        let from = if self.v6.is_ours(to.dst_addr) {
            to.dst_addr
        } else {
            match self.v6.source_for(to.src_addr) {
                Some(a) => a,
                None => {
                    self.stats.drop(DropReason::NoSourceAddress);
                    return false;
                }
            }
        };
        let dst = to.src_addr;
        let h = self.ip6_header(from, dst, IpProtocol::Icmpv6);
        self.send_ipv6(now, tx, h, msg.buffer_len(), &mut |buf| {
            msg.emit(
                &mut Icmpv6Packet::new_unchecked(buf),
                &from,
                &dst,
                ChecksumMode::Full,
            );
        })
        .is_ok()
    }

    /// Answers a UDP datagram to a closed port (RFC 4443 §3.1 code 4), never one sent
    /// to a multicast group.
    pub(super) fn send_unreachable6(
        &mut self,
        now: Instant,
        tx: &mut dyn TxSink,
        reason: Icmpv6DstUnreachable,
        d: &Delivery6<'_>,
    ) {
        if d.multicast || !self.may_send_error6(now, d.header.src_addr) {
            return;
        }
        let quoted = d.after_header;
        let msg = Icmpv6Repr::DstUnreachable {
            reason,
            header: d.header,
            data: &quoted[..quoted.len().min(QUOTE_ROOM - HEADER_LEN)],
        };
        if self.send_error6(now, tx, &d.header, &msg) {
            self.stats.icmp_unreachables_sent += 1;
        }
    }

    /// Sends a Parameter Problem about `packet` (RFC 4443 §3.4). The caller decided
    /// that the destination allows it.
    pub(super) fn send_param_problem(
        &mut self,
        now: Instant,
        tx: &mut dyn TxSink,
        reason: Icmpv6ParamProblem,
        pointer: u32,
        header: &Ipv6Repr,
        after_header: &[u8],
    ) {
        // §2.4 (e.1): never about an ICMPv6 error (a chain we could not walk may hide
        // one, so only a plain ICMPv6 error header is recognised here).
        if header.next_header == IpProtocol::Icmpv6
            && after_header.first().is_some_and(|&t| t < 128)
        {
            return;
        }
        if !self.may_send_error6(now, header.src_addr) {
            return;
        }
        let quoted = after_header;
        let msg = Icmpv6Repr::ParamProblem {
            reason,
            pointer,
            header: *header,
            data: &quoted[..quoted.len().min(QUOTE_ROOM - HEADER_LEN)],
        };
        if self.send_error6(now, tx, header, &msg) {
            self.stats.icmp_param_problems_sent += 1;
        }
    }
}

/// Writes an echo request from an echo socket's queue: the `ident`, `seq_no` and the
/// payload `read` writes, with the checksum over `src` and `dst`.
pub(super) fn emit_echo_request6(
    buf: &mut [u8],
    src: &Ipv6Addr,
    dst: &Ipv6Addr,
    ident: u16,
    seq_no: u16,
    read: &mut dyn FnMut(&mut [u8]),
) {
    let mut p = Icmpv6Packet::new_unchecked(buf);
    p.set_msg_type(Icmpv6Message::EchoRequest);
    p.set_msg_code(0);
    p.set_echo_ident(ident);
    p.set_echo_seq_no(seq_no);
    read(p.payload_mut());
    p.fill_checksum(src, dst);
}
