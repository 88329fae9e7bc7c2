//! The glue between the interface and the TCP layer ([`crate::tcp::Tcp`]): segments
//! in, checked and parsed once, handed to `Tcp::process`; segments out of
//! `Tcp::process` (immediate answers) and `Tcp::dispatch` (everything else) written in
//! place behind Ethernet and IPv4 headers.
//!
//! A segment whose next hop is unresolved is parked like any datagram (bounded) while
//! ARP asks; if the queue is full it is dropped and TCP's retransmission recovers.

use core::fmt;
use core::net::{IpAddr, SocketAddr};

use ulnet_wire::{ChecksumMode, IpProtocol, TcpPacket, TcpRepr};

use super::ipv4::{Delivery, HEADER_LEN as IPV4_HEADER_LEN};
use super::{Core, DropReason, Interface, TxSink};
use crate::tcp::{ListenError, ListenerHandle, Tcp};
use crate::time::Instant;

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
        let stats = &mut self.core.stats;
        let Some(tcp) = self.tcp.as_mut() else {
            return stats.drop(DropReason::TcpNoLayer);
        };
        // RFC 1122 §4.2.3.10: segments to broadcast addresses are discarded.
        if d.broadcast {
            return stats.drop(DropReason::Ipv4NotForUs);
        }
        let Ok(packet) = TcpPacket::new_checked(d.payload) else {
            return stats.drop(DropReason::TcpMalformed);
        };
        let (src, dst) = (IpAddr::V4(d.header.src_addr), IpAddr::V4(d.header.dst_addr));
        if d.verify && !packet.verify_checksum(&src, &dst) {
            return stats.drop(DropReason::TcpBadChecksum);
        }
        let Ok(seg) = TcpRepr::parse(&packet, &src, &dst, ChecksumMode::Offload) else {
            return stats.drop(DropReason::TcpMalformed);
        };
        stats.tcp_delivered += 1;
        let core = &mut self.core;
        tcp.process(now, src, dst, &seg, &mut |s, d, seg| {
            core.send_tcp(now, tx, s, d, seg);
        });
    }

    pub(super) fn egress_tcp(&mut self, now: Instant, tx: &mut dyn TxSink) {
        let Some(tcp) = self.tcp.as_mut() else {
            return;
        };
        let core = &mut self.core;
        tcp.dispatch(now, &mut |s, d, seg| core.send_tcp(now, tx, s, d, seg));
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
        seg: &TcpRepr<'_>,
    ) -> bool {
        let (IpAddr::V4(src4), IpAddr::V4(dst4)) = (src, dst) else {
            self.stats.drop(DropReason::NoRoute);
            return true;
        };
        let len = seg.buffer_len();
        let mode = if IPV4_HEADER_LEN + len > self.config.mtu {
            ChecksumMode::Full
        } else {
            self.config.checksum.tx
        };
        let h = self.ip_header(src4, dst4, IpProtocol::Tcp);
        match self.send_ipv4(now, tx, h, len, &mut |buf| {
            seg.emit(&mut TcpPacket::new_unchecked(buf), &src, &dst, mode);
        }) {
            Ok(()) => {
                self.stats.tcp_sent += 1;
                true
            }
            Err(DropReason::TxFull) => false,
            Err(_) => true,
        }
    }
}
