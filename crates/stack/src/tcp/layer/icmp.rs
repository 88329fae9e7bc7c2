//! ICMP errors about our segments (RFC 5927, RFC 5461, RFC 1122 §4.2.3.9, RFC 1191).
//!
//! Read first: RFC 5927 §4.1 (check that the quoted sequence number is one we have in
//! flight, SND.UNA =< SEG.SEQ < SND.NXT, else drop: a blind attacker would have to guess
//! it), RFC 5461 §4 (hard errors abort only a connection being opened; in synchronized
//! states they are soft), RFC 1122 §4.2.3.9 (soft errors are reported to the application
//! and retransmission goes on), RFC 1191 §6 (fragmentation needed lowers the MSS, never
//! below RFC 1122's 536-byte default).
//!
//! In: the quoted 4-tuple (our end first), the quoted sequence number and what the
//! message says, from the IP layer (`iface/icmp.rs`) or a test. Out: the connection is
//! aborted, carries a soft error, or sends smaller segments; every message is counted in
//! [`TcpStats`](super::TcpStats) under what became of it.

use core::net::SocketAddr;

use ulnet_wire::{Icmpv4DstUnreachable, SeqNumber};

use crate::time::Instant;

use super::super::error::ConnError;
use super::super::state::State;
use super::super::table::FourTuple;
use super::{snapshot, Tcp};

/// The smallest path MTU an ICMP message may set: RFC 1122's 536-byte default MSS plus
/// 40 bytes of headers (RFC 1191 §3 says 68, which would let anyone make a connection
/// send 28-byte segments; Linux floors it too, at 552).
pub const MIN_PATH_MTU: usize = 576;

/// RFC 1191 §7's plateau table: the MTU guessed from a router that predates RFC 1191 and
/// sends no next-hop MTU, the largest plateau below the quoted datagram's length.
const PLATEAUS: [usize; 11] = [
    65535, 32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68,
];

/// What an ICMP error says about a segment we sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IcmpError {
    /// Destination unreachable with this code (other than fragmentation needed).
    Unreachable(Icmpv4DstUnreachable),
    /// Fragmentation needed and DF set (type 3 code 4, RFC 1191 §4).
    FragmentationNeeded {
        /// The next-hop MTU the router reported; 0 from a router predating RFC 1191.
        next_hop_mtu: u16,
        /// The quoted datagram's total length (for the plateau guess when the MTU is 0).
        quoted_len: usize,
    },
    /// Time exceeded (type 11): always soft (RFC 1122 §4.2.3.9).
    TimeExceeded,
    /// ICMPv6 Packet Too Big (RFC 4443 §3.2) with the next-hop MTU. RFC 8201 §4: the
    /// path MTU is never lowered below IPv6's minimum link MTU, 1280.
    PacketTooBig {
        /// The MTU the router reported.
        mtu: u32,
    },
}

/// IPv6's minimum link MTU (RFC 8200 §5).
const IPV6_MIN_MTU: usize = 1280;

impl IcmpError {
    /// RFC 1122 §4.2.3.9 / RFC 5461 §2: protocol and port unreachable are hard errors
    /// (fragmentation needed is PMTUD's business, handled apart).
    fn is_hard(self) -> bool {
        matches!(
            self,
            IcmpError::Unreachable(
                Icmpv4DstUnreachable::ProtoUnreachable | Icmpv4DstUnreachable::PortUnreachable
            )
        )
    }

    /// The error the application sees, as Linux's `icmp_err_convert` maps the codes.
    fn conn_error(self) -> ConnError {
        use Icmpv4DstUnreachable as U;
        match self {
            IcmpError::Unreachable(U::PortUnreachable) => ConnError::Refused,
            IcmpError::Unreachable(U::ProtoUnreachable) => ConnError::ProtocolUnreachable,
            IcmpError::Unreachable(
                U::NetUnreachable | U::DstNetUnknown | U::NetProhibited | U::NetUnreachToS,
            ) => ConnError::NetworkUnreachable,
            _ => ConnError::HostUnreachable,
        }
    }
}

/// What [`Tcp::icmp_error`] did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IcmpVerdict {
    /// No connection has that 4-tuple: ignored.
    NoConnection,
    /// The quoted sequence number is not in SND.UNA..SND.NXT (RFC 5927 §4.1): dropped.
    OutOfWindow,
    /// A hard error for our SYN: the connection was aborted.
    Aborted,
    /// Recorded as the connection's soft error; retransmission goes on.
    SoftError,
    /// The path MTU and the connection's MSS were lowered.
    MtuLowered,
    /// Fragmentation needed with an MTU no lower than the one in force: ignored
    /// (RFC 1191 §6.1: the PMTU only decreases on these messages).
    MtuNotLower,
}

impl Tcp {
    /// Handles an ICMP error quoting a segment from `local` to `remote` with sequence
    /// number `seq` (the IP layer parsed the quote; the connection is found by the
    /// quoted 4-tuple). See the module docs for the rules.
    pub fn icmp_error(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        seq: SeqNumber,
        err: IcmpError,
    ) -> IcmpVerdict {
        self.saw(now);
        self.stats.icmp_received += 1;
        let Some(idx) = self.table.get(&FourTuple::new(local, remote)) else {
            self.stats.icmp_no_connection += 1;
            return IcmpVerdict::NoConnection;
        };
        let Some(sock) = self.slots[idx as usize].sock.as_mut() else {
            self.stats.icmp_no_connection += 1;
            return IcmpVerdict::NoConnection;
        };
        // RFC 5927 §4.1: only a segment we sent and still wait on can have failed.
        let (una, nxt) = sock.unacked_range();
        if seq.diff(una) < 0 || seq.diff(nxt) >= 0 {
            self.stats.icmp_out_of_window += 1;
            return IcmpVerdict::OutOfWindow;
        }
        let before = snapshot(sock);
        let verdict = match err {
            IcmpError::FragmentationNeeded {
                next_hop_mtu,
                quoted_len,
            } => {
                let mtu = match usize::from(next_hop_mtu) {
                    0 => PLATEAUS
                        .iter()
                        .copied()
                        .find(|&p| p < quoted_len)
                        .unwrap_or(MIN_PATH_MTU),
                    m => m,
                }
                .max(MIN_PATH_MTU);
                if mtu >= self.mtu_for(remote.ip()) {
                    self.stats.icmp_mtu_not_lower += 1;
                    return IcmpVerdict::MtuNotLower;
                }
                self.stats.icmp_mtu_lowered += 1;
                self.set_path_mtu(remote.ip(), mtu);
                IcmpVerdict::MtuLowered
            }
            IcmpError::PacketTooBig { mtu } => {
                let mtu = usize::try_from(mtu).unwrap_or(usize::MAX).max(IPV6_MIN_MTU);
                if mtu >= self.mtu_for(remote.ip()) {
                    self.stats.icmp_mtu_not_lower += 1;
                    return IcmpVerdict::MtuNotLower;
                }
                self.stats.icmp_mtu_lowered += 1;
                self.set_path_mtu(remote.ip(), mtu);
                IcmpVerdict::MtuLowered
            }
            // RFC 5461 §4.1 / RFC 1122 §4.2.3.9: a hard error aborts only an opening
            // connection (SYN-SENT); everywhere else it is soft.
            e if e.is_hard() && sock.state() == State::SynSent => {
                self.stats.icmp_aborts += 1;
                sock.set_closed(Some(e.conn_error()));
                IcmpVerdict::Aborted
            }
            e => {
                self.stats.icmp_soft_errors += 1;
                sock.set_soft_error(Some(e.conn_error()));
                IcmpVerdict::SoftError
            }
        };
        self.settle(idx, now, Some(before));
        verdict
    }
}
