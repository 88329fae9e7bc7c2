//! The interface layer: one Ethernet interface with its IPv4 and IPv6 addresses, routes,
//! neighbour cache (ARP and Neighbor Discovery), fragment reassembly, ICMP and ICMPv6, and
//! the sockets it serves (docs/ipv6.md for the IPv6 side).
//!
//! In: received frames and `now` ([`Interface::ingress`]), and `now` alone for timers
//! and application sends ([`Interface::egress`]). Out: frames, written in place into the
//! buffers a [`TxSink`] hands out, and the next deadline ([`Interface::poll_at`]).
//!
//! Run to completion (docs/ARCHITECTURE.md, docs/STYLE.md §4.2): `ingress` carries a frame through
//! Ethernet → ARP, IPv4 or IPv6 → reassembly → ICMP/ICMPv6(ND)/UDP/TCP in one call, and answers it
//! (ARP reply, echo reply, TCP ACK) straight into the sink it was given; nothing is
//! queued in between except datagrams in reassembly, packets waiting for ARP, and
//! payloads in socket buffers, all bounded.
//!
//! Invariants: hostile input never panics; every frame refused is counted in
//! [`Stats`] under a [`DropReason`]; memory is bounded by [`Limits`] and the socket
//! configurations, allocated up front where the steady data path is concerned.
//!
//! Files: `ethernet` (frame in/out), `arp`, `nd` and `neighbor` (resolution, NUD, DAD,
//! router advertisements), `pending` (packets waiting for it), `ipv4` and `ipv6`
//! (validation, delivery, output), `route`, `frag`, `icmp`, `icmpv6`, `udp`, `tcp` (glue
//! to the TCP layer), `stats`, `config`.

mod arp;
mod config;
mod ethernet;
mod frag;
mod icmp;
mod icmpv6;
mod ident;
mod ipv4;
mod ipv6;
mod nd;
mod neighbor;
mod pending;
mod route;
mod stats;
mod tcp;
mod udp;

#[cfg(test)]
mod tests;

use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr};

use ulnet_wire::{ChecksumMode, EthernetAddress};

pub use config::{ChecksumCaps, ConfigError, InterfaceConfig, Limits};
pub use frag::{fragment_payload_len, Reassembled, Reassembled6, Reassembler};
pub use ipv6::{
    link_local_from_mac, multicast_mac, solicited_node, with_interface_id, AddrOrigin, AddrState,
    Ipv6AddrInfo, ALL_NODES,
};
pub use neighbor::{Lookup, NeighborCache, NeighborError, NeighborState};
pub use route::{IpCidr, Route, RouteError, RouteTable};
pub use stats::{DropReason, Stats};
pub use tcp::ListenTcpError;

use crate::socket::SocketSet;
use crate::tcp::Tcp;
use crate::time::Instant;
use icmp::TokenBucket;
use pending::PendingQueue;

/// Where the interface writes frames: a channel's transmit half, adapted.
///
/// `send` reserves a `len`-byte buffer, lets `fill` write the whole frame into it in
/// place (`fill` is given exactly `len` bytes) and queues it. It returns false when
/// there is no room (the ring is full); the interface then drops the frame and counts
/// it as [`DropReason::TxFull`]. A channel's `Tx` adapts in one line:
///
/// ```
/// # use ulnet_stack::iface::TxSink;
/// struct Sink<'a>(&'a mut dyn ulnet_channel::Tx);
/// impl TxSink for Sink<'_> {
///     fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
///         self.0.send(len, fill).is_ok()
///     }
/// }
/// ```
pub trait TxSink {
    /// Writes one `len`-byte frame with `fill`; false when it was not queued.
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool;

    /// Writes one TCP burst frame for the channel to cut into segments (see
    /// `ulnet_channel::Gso`). Only called when the interface was configured with
    /// [`InterfaceConfig::gso_max_len`].
    fn send_gso(&mut self, len: usize, gso: Gso, fill: &mut dyn FnMut(&mut [u8])) -> GsoSent {
        let _ = (len, gso, fill);
        GsoSent::Unsupported
    }

    /// [`TxSink::send_gso`] for a burst given as its headers and its payload, where the
    /// stack keeps them (the payload is the connection's send buffer): a sink that can
    /// hand both to the kernel as they are saves copying the payload into a frame. The
    /// default copies them into the frame `send_gso` gives.
    fn send_gso_parts(&mut self, head: &[u8], payload: &[u8], gso: Gso) -> GsoSent {
        let h = head.len();
        self.send_gso(h + payload.len(), gso, &mut |buf| {
            buf[..h].copy_from_slice(head);
            buf[h..].copy_from_slice(payload);
        })
    }
}

/// What [`TxSink::send_gso`] did with a burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GsoSent {
    /// Queued.
    Sent,
    /// No room now; try again later.
    Full,
    /// The channel does not (or no longer) take bursts: the interface stops offering
    /// them and cuts bursts itself.
    Unsupported,
}

/// How the channel is to cut a TCP burst frame: `ulnet_channel::Gso`'s fields (the
/// stack does not depend on the channel crate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gso {
    /// Payload bytes per segment; 0 for a frame that is one segment, only its checksum
    /// left to the channel.
    pub segment_size: u16,
    /// Where the TCP header starts (Ethernet plus IP header).
    pub l4_offset: u16,
    /// Ethernet, IP and TCP headers together.
    pub header_len: u16,
    /// IPv6 (else IPv4).
    pub ipv6: bool,
}

impl<F: FnMut(usize, &mut dyn FnMut(&mut [u8])) -> bool> TxSink for F {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        self(len, fill)
    }
}

/// RFC 5227 announcements still to send.
#[derive(Debug, Clone, Copy)]
struct Announce {
    remaining: u8,
    next_at: Option<Instant>,
}

/// Everything but the sockets: split out so the output path can borrow it while a
/// socket writes its payload into the frame.
#[derive(Debug)]
pub(crate) struct Core {
    config: InterfaceConfig,
    /// The IPv4 addresses with their networks, from `config.addresses`.
    v4: Vec<(Ipv4Addr, IpCidr)>,
    stats: Stats,
    routes: RouteTable,
    neighbors: NeighborCache,
    pending: PendingQueue,
    frag: Reassembler,
    icmp_limit: TokenBucket,
    /// IPv4 identification counters per destination (RFC 6864, RFC 7739).
    idents: ident::IpIdents,
    announce: Announce,
    /// IPv6: addresses and their DAD states, the default router, the link MTU.
    v6: ipv6::V6,
    /// A whole datagram being cut into fragments (allocated on first use).
    scratch: Vec<u8>,
    /// Parked packets may have become sendable without an ARP answer (a static entry
    /// was added): the next egress looks.
    pending_recheck: bool,
    rx_checksum: ChecksumMode,
    /// [`ChecksumCaps::rx_unfinished`].
    rx_unfinished: bool,
}

/// An Ethernet interface with IPv4, ARP, ICMP, UDP sockets and (once attached with
/// [`set_tcp`](Self::set_tcp)) TCP.
///
/// # Driving it
///
/// A runtime (or a test) loops: hand received frames to [`ingress`](Self::ingress),
/// let [`egress`](Self::egress) send what timers and sockets want, flush the channel,
/// then sleep until [`poll_at`](Self::poll_at) or the next frame. That loop is written
/// once, as `ulnet::runtime::Driver` (one iteration, `now` passed in, so it runs in
/// virtual time over the simulated wire too; its documentation has the example): the
/// engine knows no channel, and the driver is where the two meet.
#[derive(Debug)]
pub struct Interface {
    core: Core,
    sockets: SocketSet,
    tcp: Option<Tcp>,
    /// Where [`ingress_parts`](Self::ingress_parts) gathers a frame in several buffers
    /// that it cannot take where it lies; kept, so gathering allocates once.
    gather: Vec<u8>,
}

impl Interface {
    /// An interface configured by `config`: on-link routes for its addresses, the
    /// default route through the gateway, empty caches, and gratuitous ARP due on the
    /// first [`egress`](Self::egress).
    ///
    /// # Errors
    /// The [`ConfigError`] of [`InterfaceConfig::validate`].
    pub fn new(config: InterfaceConfig) -> Result<Interface, ConfigError> {
        config.validate()?;
        let l = &config.limits;
        let mut routes = RouteTable::new(l.route_count);
        let mut v4 = Vec::with_capacity(config.addresses.len());
        for cidr in &config.addresses {
            if let IpAddr::V4(a) = cidr.address() {
                v4.push((a, *cidr));
            }
            routes
                .add(Route {
                    dst: *cidr,
                    via: None,
                })
                .map_err(|_| ConfigError::TooManyRoutes)?;
        }
        if let Some(gw) = config.gateway {
            routes
                .set_default_gateway(gw)
                .map_err(|_| ConfigError::TooManyRoutes)?;
        }
        let v6_on = config.ipv6_enabled();
        let mut v6 = ipv6::V6::new(v6_on, config.mtu);
        if v6_on {
            // RFC 4291 §2.5.6: fe80::/64 is on-link.
            let ll = ipv6::link_local_from_mac(config.mac);
            routes
                .add(Route {
                    dst: IpCidr::new(IpAddr::V6(ll), 64).expect("64 is a valid IPv6 prefix"),
                    via: None,
                })
                .map_err(|_| ConfigError::TooManyRoutes)?;
            let infos = core::iter::once((ll, 64, AddrOrigin::LinkLocal)).chain(
                config.addresses.iter().filter_map(|c| match c.address() {
                    IpAddr::V6(a) => Some((a, c.prefix_len(), AddrOrigin::Configured)),
                    IpAddr::V4(_) => None,
                }),
            );
            let dad = l.dad_transmits > 0;
            for (addr, prefix_len, origin) in infos {
                if v6.addrs.iter().any(|a| a.info.addr == addr) {
                    continue;
                }
                v6.addrs.push(ipv6::Addr6 {
                    info: Ipv6AddrInfo {
                        addr,
                        prefix_len,
                        state: if dad {
                            AddrState::Tentative
                        } else {
                            AddrState::Preferred
                        },
                        origin,
                    },
                    probes: 0,
                    next_at: dad.then_some(Instant::ZERO),
                    valid_until: None,
                });
            }
        }
        let mut neighbors = NeighborCache::new(
            l.neighbor_count,
            l.neighbor_ttl,
            l.arp_retry_interval,
            l.arp_max_requests,
        );
        neighbors.set_delay_first_probe(l.delay_first_probe);
        let core = Core {
            v6,
            neighbors,
            pending: PendingQueue::new(l.pending_per_neighbor, l.pending_count, l.pending_len),
            frag: Reassembler::new(
                l.frag_datagram_count,
                l.frag_buffer_len,
                l.frag_per_datagram,
                l.frag_timeout,
            ),
            icmp_limit: TokenBucket::new(l.icmp_error_rate, l.icmp_error_burst),
            idents: ident::IpIdents::new(&[0; 16]),
            announce: Announce {
                remaining: if v4.is_empty() { 0 } else { l.announce_count },
                next_at: None,
            },
            scratch: Vec::new(),
            pending_recheck: false,
            rx_checksum: if config.checksum.rx_verified {
                ChecksumMode::Offload
            } else {
                ChecksumMode::Full
            },
            rx_unfinished: config.checksum.rx_unfinished,
            stats: Stats::default(),
            routes,
            v4,
            config,
        };
        let sockets = SocketSet::new(
            core.config.limits.udp_socket_count,
            core.config.limits.icmp_socket_count,
        );
        Ok(Interface {
            core,
            sockets,
            tcp: None,
            gather: Vec::new(),
        })
    }

    /// The configuration the interface was built from.
    pub fn config(&self) -> &InterfaceConfig {
        &self.core.config
    }

    /// The interface's MAC address.
    pub fn mac(&self) -> EthernetAddress {
        self.core.config.mac
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.core.stats
    }

    /// The route table.
    pub fn routes(&self) -> &RouteTable {
        &self.core.routes
    }

    /// The route table, to add or remove routes.
    pub fn routes_mut(&mut self) -> &mut RouteTable {
        &mut self.core.routes
    }

    /// The neighbour cache.
    pub fn neighbors(&self) -> &NeighborCache {
        &self.core.neighbors
    }

    /// Adds a static neighbour: `ip` is at `mac`, never expiring, never asked for.
    /// Packets already waiting for `ip` leave on the next [`egress`](Self::egress).
    ///
    /// # Errors
    /// As [`NeighborCache::add_static`].
    pub fn add_static_neighbor(
        &mut self,
        ip: IpAddr,
        mac: EthernetAddress,
    ) -> Result<(), NeighborError> {
        self.core.neighbors.add_static(ip, mac)?;
        self.core.pending_recheck = self.core.pending.count() > 0;
        Ok(())
    }

    /// Keys the socket set's demux maps and ephemeral port sequence (RFC 6056) with
    /// `secret`: 16 random bytes the caller draws (the engine reads no OS randomness).
    pub fn set_secret(&mut self, secret: [u8; 16]) {
        self.sockets.set_secret(secret);
        // RFC 7739 §5: fragment identifications not predictable from outside.
        self.core.v6.frag_ident =
            u32::from_le_bytes([secret[4], secret[5], secret[6], secret[7]]) | 1;
        self.core.idents = ident::IpIdents::new(&secret);
        // RFC 4861 §6.3.7: the first Router Solicitation waits a random time up to
        // MAX_RTR_SOLICITATION_DELAY (1 s), so hosts starting together do not all ask at once.
        self.core.v6.rs_delay = crate::time::Duration::from_millis(
            u64::from(u16::from_le_bytes([secret[8], secret[9]])) % 1000,
        );
    }

    /// The sockets.
    pub fn sockets(&self) -> &SocketSet {
        &self.sockets
    }

    /// The sockets, to add, use and remove them.
    pub fn sockets_mut(&mut self) -> &mut SocketSet {
        &mut self.sockets
    }

    /// Datagrams in reassembly and the bytes they hold.
    pub fn reassembly(&self) -> &Reassembler {
        &self.core.frag
    }

    /// Packets waiting for neighbour resolution, and their payload bytes.
    pub fn pending(&self) -> (usize, usize) {
        (self.core.pending.count(), self.core.pending.len())
    }

    /// Carries one received frame through the stack, answering it into `tx` where the
    /// protocol asks for an immediate answer. Malformed or foreign frames are dropped
    /// and counted.
    pub fn ingress(&mut self, now: Instant, frame: &[u8], tx: &mut dyn TxSink) {
        self.process_ethernet(now, frame, &[], tx);
    }

    /// [`ingress`](Self::ingress) for a frame that arrived in several buffers (a
    /// multi-buffer AF_XDP frame): `head`, then each of `rest`, in order. A TCP segment
    /// whose IP and TCP headers are all in `head` (over IPv4, or IPv6 without extension
    /// headers) is taken where it lies: its checksum is summed over the parts and its
    /// payload copied from them straight into the receive buffer, so a 64 KB frame in
    /// 17 parts is not first gathered into one (a copy of every byte, 8% of the
    /// receiving core at MTU 65535, docs/performance-log.md "Session 27"). Anything else is
    /// gathered first, into a buffer the interface keeps, and goes through `ingress`.
    pub fn ingress_parts(
        &mut self,
        now: Instant,
        head: &[u8],
        rest: &[&[u8]],
        tx: &mut dyn TxSink,
    ) {
        let more: usize = rest.iter().map(|p| p.len()).sum();
        if more == 0 {
            return self.process_ethernet(now, head, &[], tx);
        }
        if parts_in_place(head, more) {
            self.core.stats.rx_parts_in_place += 1;
            return self.process_ethernet(now, head, rest, tx);
        }
        self.core.stats.rx_parts_gathered += 1;
        let mut buf = core::mem::take(&mut self.gather);
        buf.clear();
        buf.extend_from_slice(head);
        for p in rest {
            buf.extend_from_slice(p);
        }
        self.process_ethernet(now, &buf, &[], tx);
        self.gather = buf;
    }

    /// Runs the timers (announcements, ARP retries and give-ups, reassembly timeouts)
    /// and sends what the sockets queued.
    pub fn egress(&mut self, now: Instant, tx: &mut dyn TxSink) {
        self.core.announce(now, tx);
        self.core.poll_v6(now, tx);
        self.core.poll_neighbors(now, tx);
        let expired = self.core.frag.expire(now);
        self.core.stats.drop_n(DropReason::FragTimeout, expired);
        self.egress_icmp(now, tx);
        self.egress_udp(now, tx);
        self.egress_tcp(now, tx);
    }

    /// When [`egress`](Self::egress) next has work: `None` when idle; an instant at or
    /// before the current time (possibly [`Instant::ZERO`]) means "now".
    pub fn poll_at(&self) -> Option<Instant> {
        let c = &self.core;
        [
            if c.announce.remaining > 0 {
                Some(c.announce.next_at.unwrap_or(Instant::ZERO))
            } else {
                None
            },
            c.neighbors.poll_at(),
            c.v6_poll_at(),
            c.frag.poll_at(),
            (self.sockets.has_tx() || c.pending_recheck).then_some(Instant::ZERO),
            self.tcp.as_ref().and_then(Tcp::poll_at),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

/// Whether a frame that goes on past `head` for `more` bytes can be taken where it lies
/// ([`Interface::ingress_parts`]): an Ethernet II frame with a whole IPv4 datagram (not
/// a fragment) or an IPv6 packet without extension headers, carrying TCP, the IP and
/// TCP headers all in `head`, and an IP length that is exactly what the parts hold (no
/// link padding to cut). Only lengths are checked here; every other check is the usual
/// path's.
fn parts_in_place(head: &[u8], more: usize) -> bool {
    use ulnet_wire::{EtherType, EthernetFrame, IpProtocol, Ipv4Packet, Ipv6Packet};
    let Ok(eth) = EthernetFrame::new_checked(head) else {
        return false;
    };
    let ip = eth.payload();
    let header_len = match eth.ethertype() {
        EtherType::Ipv4 if ip.len() >= ipv4::HEADER_LEN => {
            let packet = Ipv4Packet::new_unchecked(ip);
            let header_len = packet.header_len();
            if packet.version() != 4
                || packet.protocol() != IpProtocol::Tcp
                || packet.is_fragment()
                || header_len < ipv4::HEADER_LEN
                || usize::from(packet.total_len()) != ip.len() + more
            {
                return false;
            }
            header_len
        }
        EtherType::Ipv6 if ip.len() >= ipv6::HEADER_LEN => {
            let packet = Ipv6Packet::new_unchecked(ip);
            if packet.version() != 6
                || packet.next_header() != IpProtocol::Tcp
                || ipv6::HEADER_LEN + usize::from(packet.payload_len()) != ip.len() + more
            {
                return false;
            }
            ipv6::HEADER_LEN
        }
        _ => return false,
    };
    // The TCP header, options included (data offset, RFC 9293 §3.1), all in `head`.
    ip.get(header_len..).is_some_and(|tcp| {
        tcp.len() >= ulnet_wire::tcp::HEADER_LEN && tcp.len() >= usize::from(tcp[12] >> 4) * 4
    })
}

/// The checksum check of a received TCP segment or UDP datagram: a field that is
/// exactly the pseudo-header sum passes where the link delivers such checksums
/// unfinished (`unfinished_ok`, [`ChecksumCaps::rx_unfinished`]; counted), looked at
/// first since it costs the pseudo-header's sum, not the data's; every other field must
/// verify in full.
fn transport_checksum_ok(
    stats: &mut Stats,
    unfinished_ok: bool,
    unfinished: impl FnOnce() -> bool,
    full: impl FnOnce() -> bool,
) -> bool {
    if unfinished_ok && unfinished() {
        stats.rx_checksum_unfinished += 1;
        return true;
    }
    full()
}

impl Core {
    /// Whether `a` is one of our IPv4 addresses.
    fn is_ours(&self, a: Ipv4Addr) -> bool {
        self.v4.iter().any(|(ours, _)| *ours == a)
    }

    /// Whether `a` is the limited broadcast or one of our networks' broadcast.
    fn is_broadcast(&self, a: Ipv4Addr) -> bool {
        a.is_broadcast() || self.v4.iter().any(|(_, c)| c.broadcast() == Some(a))
    }

    /// The address to send to `dst` from: the one on `dst`'s network, else the one on
    /// the next hop's network, else the first.
    fn source_for(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        let on = |ip: Ipv4Addr| {
            self.v4
                .iter()
                .find(|(_, c)| c.contains(IpAddr::V4(ip)))
                .map(|(a, _)| *a)
        };
        on(dst)
            .or_else(|| match self.routes.next_hop(IpAddr::V4(dst)) {
                Some(IpAddr::V4(hop)) => on(hop),
                _ => None,
            })
            .or_else(|| self.v4.first().map(|(a, _)| *a))
    }

    /// RFC 6864 / RFC 7739: per (source, destination, protocol), never one global
    /// counter (see `ident.rs`).
    fn next_ident(&mut self, now: Instant, h: &pending::IpHeader) -> u16 {
        self.idents.next(now, h.src, h.dst, u8::from(h.protocol))
    }

    /// The first of `n` IDs for a burst the channel cuts into `n` datagrams.
    fn next_ident_run(&mut self, now: Instant, h: &pending::IpHeader, n: u16) -> u16 {
        self.idents
            .next_run(now, h.src, h.dst, u8::from(h.protocol), n)
    }
}
