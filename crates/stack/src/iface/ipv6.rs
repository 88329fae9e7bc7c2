//! IPv6 (RFC 8200, node requirements RFC 8504): the interface's IPv6 addresses, the
//! validation and delivery of received packets, and the output path.
//!
//! In: the payload of an Ethernet frame of type 0x86dd. Checks, each with its own drop
//! counter: IPv6 on, the version, the lengths, the source (never multicast, RFC 4291
//! §2.7), the destination (one of our usable addresses, all-nodes, or the
//! solicited-node group of one of our addresses, RFC 4291 §2.7.1; a tentative address
//! receives nothing but Neighbor Discovery, RFC 4862 §5.4), then the extension-header
//! chain (bounded walk in `ulnet_wire::ipv6ext`). Fragments go through reassembly, an
//! atomic fragment is the whole packet (RFC 8021 §2, RFC 6946 §4); whole packets go to
//! ICMPv6, UDP or TCP.
//!
//! Out: packets routed to a next hop (link-local destinations are always on-link;
//! otherwise the route table, then the default router learned from Router
//! Advertisements), resolved by Neighbor Discovery (or parked), and written in place;
//! cut into fragments with a fragment header when larger than the link MTU (RFC 8200
//! §4.5; only UDP and ICMP get there, TCP segments fit the MSS).

use alloc::vec::Vec;
use core::net::{IpAddr, Ipv6Addr};

use ulnet_wire::ipv6ext::{self, ChainError, OptionAction};
use ulnet_wire::{
    EtherType, EthernetAddress, Icmpv6ParamProblem, IpProtocol, Ipv6FragRepr, Ipv6Packet, Ipv6Repr,
};

use super::pending::{AnyHeader, Ip6Header};
use super::{Core, DropReason, Interface, TxSink};
use crate::time::{Duration, Instant};
use crate::IpFields;

/// The fixed IPv6 header.
pub(crate) const HEADER_LEN: usize = ulnet_wire::ipv6::HEADER_LEN;

/// IPv6's minimum link MTU (RFC 8200 §5).
pub const MIN_MTU: usize = 1280;

/// The all-nodes link-local multicast group (RFC 4291 §2.7.1).
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// The all-routers link-local multicast group (RFC 4291 §2.7.1).
pub const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);

/// The solicited-node multicast address of `a`: ff02::1:ffXX:XXXX with the low 24 bits
/// of `a` (RFC 4291 §2.7.1).
pub fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The Ethernet address an IPv6 multicast group maps to: 33:33 and the group's low 32
/// bits (RFC 2464 §7).
pub fn multicast_mac(a: Ipv6Addr) -> EthernetAddress {
    let o = a.octets();
    EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// The link-local address of a MAC: fe80::/64 and the modified EUI-64 interface
/// identifier (RFC 4291 §2.5.6 and Appendix A, RFC 2464 §4-5: the universal/local bit
/// inverted, ff:fe in the middle).
pub fn link_local_from_mac(mac: EthernetAddress) -> Ipv6Addr {
    with_interface_id(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), mac)
}

/// `prefix`'s first 64 bits and `mac`'s modified EUI-64 identifier (RFC 4862 §5.5.3).
pub fn with_interface_id(prefix: Ipv6Addr, mac: EthernetAddress) -> Ipv6Addr {
    let m = mac.0;
    let mut o = prefix.octets();
    o[8..16].copy_from_slice(&[m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]);
    Ipv6Addr::from(o)
}

/// Where an IPv6 address is in its life (RFC 4862 §5.4, §5.5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddrState {
    /// Duplicate Address Detection is under way: the address is not used yet.
    Tentative,
    /// Usable.
    Preferred,
    /// DAD found another node using it (RFC 4862 §5.4.5): never used.
    Duplicated,
}

/// Where an IPv6 address came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddrOrigin {
    /// fe80::/64 from the MAC.
    LinkLocal,
    /// The interface configuration.
    Configured,
    /// An advertised prefix (SLAAC, RFC 4862 §5.5.3).
    Slaac,
}

/// One of the interface's IPv6 addresses, as [`Interface::ipv6_addresses`] shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6AddrInfo {
    /// The address.
    pub addr: Ipv6Addr,
    /// Its prefix length.
    pub prefix_len: u8,
    /// Its state.
    pub state: AddrState,
    /// Its origin.
    pub origin: AddrOrigin,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Addr6 {
    pub info: Ipv6AddrInfo,
    /// DAD solicitations sent.
    pub probes: u8,
    /// When the next DAD step is due.
    pub next_at: Option<Instant>,
    /// For SLAAC addresses: when the valid lifetime ends (RFC 4862 §5.5.3 e).
    pub valid_until: Option<Instant>,
}

/// The interface's IPv6 state.
#[derive(Debug)]
pub(super) struct V6 {
    pub enabled: bool,
    pub addrs: Vec<Addr6>,
    /// The default router from Router Advertisements and when its lifetime ends.
    pub router: Option<(Ipv6Addr, Instant)>,
    /// On-link prefixes learned from Router Advertisements (routes in the table) and
    /// when their valid lifetimes end (`None`: infinite).
    pub prefixes: Vec<(super::route::IpCidr, Option<Instant>)>,
    /// The link MTU for IPv6: the interface's, lowered by an RA's MTU option.
    pub mtu: usize,
    /// The next fragment identification (RFC 7739: started from the secret).
    pub frag_ident: u32,
    /// The hop limit of the packets we originate, when a Router Advertisement set one
    /// (RFC 4861 §6.3.4, CurHopLimit); else the configured `ttl`.
    pub hop_limit: Option<u8>,
    /// Router Solicitations sent so far (RFC 4861 §6.3.7).
    pub rs_sent: u8,
    /// When the next solicitation step is due (`None`: not scheduled yet).
    pub rs_next: Option<Instant>,
    /// No more solicitations: an advertisement arrived, or all were sent.
    pub rs_done: bool,
    /// The start-up delay before the first solicitation, from the interface's secret.
    pub rs_delay: Duration,
}

impl V6 {
    pub fn new(enabled: bool, mtu: usize) -> V6 {
        V6 {
            enabled,
            addrs: Vec::new(),
            router: None,
            prefixes: Vec::new(),
            mtu,
            frag_ident: 1,
            hop_limit: None,
            rs_sent: 0,
            rs_next: None,
            rs_done: false,
            rs_delay: Duration::ZERO,
        }
    }

    /// Whether `a` is one of our usable unicast addresses.
    pub fn is_ours(&self, a: Ipv6Addr) -> bool {
        self.addrs
            .iter()
            .any(|x| x.info.addr == a && x.info.state == AddrState::Preferred)
    }

    /// The state of our address `a`, if it is one.
    pub fn state_of(&self, a: Ipv6Addr) -> Option<AddrState> {
        self.addrs
            .iter()
            .find(|x| x.info.addr == a)
            .map(|x| x.info.state)
    }

    /// Whether we listen to multicast group `g`: all-nodes, or the solicited-node group
    /// of an address we hold or are checking (RFC 4862 §5.4.2 joins it before DAD).
    pub fn listens(&self, g: Ipv6Addr) -> bool {
        g == ALL_NODES
            || self
                .addrs
                .iter()
                .any(|x| x.info.state != AddrState::Duplicated && solicited_node(x.info.addr) == g)
    }

    /// The link-local address, if usable.
    pub fn link_local(&self) -> Option<Ipv6Addr> {
        self.addrs
            .iter()
            .find(|x| {
                x.info.origin == AddrOrigin::LinkLocal && x.info.state == AddrState::Preferred
            })
            .map(|x| x.info.addr)
    }

    /// Source address selection, simplified from RFC 6724 §5: the same scope as the
    /// destination (link-local for link-local and link-scope multicast), then the
    /// longest matching prefix, among usable addresses only.
    pub fn source_for(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        let link_scope =
            dst.is_unicast_link_local() || (dst.is_multicast() && dst.segments()[0] & 0x000f <= 2);
        if link_scope {
            return self.link_local();
        }
        let usable = self.addrs.iter().filter(|x| {
            x.info.state == AddrState::Preferred && x.info.origin != AddrOrigin::LinkLocal
        });
        usable
            .max_by_key(|x| common_prefix(x.info.addr, dst))
            .map(|x| x.info.addr)
            .or_else(|| self.link_local())
    }
}

fn common_prefix(a: Ipv6Addr, b: Ipv6Addr) -> u32 {
    (u128::from(a) ^ u128::from(b)).leading_zeros()
}

/// How a packet reached us, for the handlers above IPv6.
#[derive(Debug, Clone, Copy)]
pub(super) struct Delivery6<'a> {
    /// The fixed header (for reassembled packets: with the whole payload length).
    pub header: Ipv6Repr,
    /// The upper-layer bytes.
    pub payload: &'a [u8],
    /// The rest of a TCP payload that arrived in several buffers, after `payload`
    /// ([`Interface::ingress_parts`]); empty otherwise.
    pub rest: &'a [&'a [u8]],
    /// The bytes after the fixed header (extension headers on), for quoting in ICMPv6
    /// errors; for a reassembled packet, its fragmentable part.
    pub after_header: &'a [u8],
    /// Sent to a multicast group: never answered with most errors (RFC 4443 §2.4 e).
    pub multicast: bool,
    /// Transport checksums still need verifying.
    pub verify: bool,
}

impl Interface {
    /// `rest`, when not empty, holds the rest of a packet that arrived in several
    /// buffers, which [`parts_in_place`](super::parts_in_place) found to be a TCP
    /// segment right after the fixed header, of exactly the length the header says.
    pub(super) fn process_ipv6(
        &mut self,
        now: Instant,
        payload: &[u8],
        rest: &[&[u8]],
        link_multicast: bool,
        tx: &mut dyn TxSink,
    ) {
        let stats = &mut self.core.stats;
        if !self.core.v6.enabled {
            return stats.drop(DropReason::Ipv6Disabled);
        }
        if payload.len() < HEADER_LEN {
            return stats.drop(DropReason::Ipv6Truncated);
        }
        let packet = Ipv6Packet::new_unchecked(payload);
        if packet.version() != 6 {
            return stats.drop(DropReason::Ipv6BadVersion);
        }
        let more: usize = rest.iter().map(|p| p.len()).sum();
        let Ok(header) = Ipv6Repr::parse_parts(&packet, more) else {
            return stats.drop(DropReason::Ipv6Truncated);
        };
        let (src, dst) = (header.src_addr, header.dst_addr);
        if src.is_multicast() {
            return stats.drop(DropReason::Ipv6BadSource);
        }
        let v6 = &self.core.v6;
        let multicast = dst.is_multicast();
        // RFC 4862 §5.4: a tentative address takes only ND messages for DAD, which are
        // multicast; a unicast packet to it is discarded, as is a unicast destination
        // that came as a link-layer multicast.
        let for_us = if multicast {
            v6.listens(dst)
        } else {
            v6.is_ours(dst) && !link_multicast
        };
        if !for_us {
            return stats.drop(DropReason::Ipv6NotForUs);
        }
        // Only the declared payload: link-layer padding is cut off (in several buffers
        // the packet fills them exactly, `parts_in_place`).
        let packet_bytes = if rest.is_empty() {
            &payload[..HEADER_LEN + header.payload_len]
        } else {
            payload
        };
        let body = &packet_bytes[HEADER_LEN..];
        let chain = match ipv6ext::walk(header.next_header, body) {
            Ok(c) => c,
            Err(e) => return self.bad_chain(now, e, &header, body, multicast, tx),
        };
        self.core.stats.ipv6_ext_headers += chain.count as u64;
        let verify = self.core.rx_checksum.verify_rx();
        let d = Delivery6 {
            header,
            payload: &body[chain.header_len..],
            rest,
            after_header: body,
            multicast,
            verify,
        };
        // As over IPv4 (`process_ipv4`): a whole UDP datagram above the MTU is a host's
        // segmentation super-frame, its datagram boundaries lost.
        if chain.fragment.is_none_or(|f| f.is_atomic())
            && chain.upper == IpProtocol::Udp
            && HEADER_LEN + body.len() > self.core.config.mtu
        {
            return self.core.stats.drop(DropReason::UdpAboveMtu);
        }
        match chain.fragment {
            None => self.deliver_ipv6(now, chain.upper, chain.next_header_at, d, tx),
            // RFC 8021 §2 / RFC 6946 §4: an atomic fragment is processed as a whole
            // packet, independent of any reassembly of the same identification.
            Some(f) if f.is_atomic() => {
                self.core.stats.ipv6_atomic_fragments += 1;
                self.deliver_ipv6(now, chain.upper, chain.next_header_at, d, tx)
            }
            Some(f) => self.reassemble_ipv6(now, header, f, d.payload, multicast, tx),
        }
    }

    /// Drops a packet whose chain was refused, answering with a Parameter Problem where
    /// RFC 8200 §4.2 and §4.4 ask for one (RFC 4443 §2.4 e: code 2 may go to a multicast
    /// destination only for action 10; code 0 never does).
    fn bad_chain(
        &mut self,
        now: Instant,
        e: ChainError,
        header: &Ipv6Repr,
        after_header: &[u8],
        multicast: bool,
        tx: &mut dyn TxSink,
    ) {
        let (reason, answer) = match e {
            ChainError::Truncated => (DropReason::Ipv6Truncated, None),
            ChainError::Malformed => (DropReason::Ipv6BadExtHeader, None),
            ChainError::TooLong => (DropReason::Ipv6ExtChainTooLong, None),
            ChainError::UnknownOption { action, pointer } => (
                DropReason::Ipv6UnknownOption,
                match action {
                    OptionAction::DiscardSendIcmp => {
                        Some((Icmpv6ParamProblem::UnrecognizedOption, pointer))
                    }
                    OptionAction::DiscardSendIcmpUnicast if !multicast => {
                        Some((Icmpv6ParamProblem::UnrecognizedOption, pointer))
                    }
                    _ => None,
                },
            ),
            ChainError::Routing { pointer } => (
                DropReason::Ipv6RoutingHeader,
                (!multicast).then_some((Icmpv6ParamProblem::ErroneousHeaderField, pointer)),
            ),
        };
        self.core.stats.drop(reason);
        if let Some((code, pointer)) = answer {
            self.core
                .send_param_problem(now, tx, code, pointer, header, after_header);
        }
    }

    /// Hands a whole packet to its upper layer. `next_header_at` is the offset (from the
    /// fixed header's end) of the byte naming `upper`, for a Parameter Problem.
    pub(super) fn deliver_ipv6(
        &mut self,
        now: Instant,
        upper: IpProtocol,
        next_header_at: Option<usize>,
        d: Delivery6<'_>,
        tx: &mut dyn TxSink,
    ) {
        match upper {
            IpProtocol::Icmpv6 => {
                self.process_icmpv6(now, d, tx);
                // A Router Advertisement may have changed the IPv6 link MTU.
                if let Some(tcp) = self.tcp.as_mut() {
                    tcp.set_v6_link_mtu(self.core.v6.mtu);
                }
            }
            IpProtocol::Udp => self.process_udp6(now, d, tx),
            IpProtocol::Tcp => self.process_tcp6(now, d, tx),
            IpProtocol::Ipv6NoNxt => {
                // RFC 8200 §4.7: nothing follows; nothing to deliver.
                return self.core.stats.drop(DropReason::Ipv6NoNextHeader);
            }
            _ => {
                // RFC 8200 §4 (and §4.1): an unrecognised next header is discarded with
                // a Parameter Problem, code 1, pointing at the field that names it.
                self.core.stats.drop(DropReason::Ipv6UnknownProtocol);
                if !d.multicast {
                    let pointer = next_header_at.map_or(6, |at| HEADER_LEN + at) as u32;
                    self.core.send_param_problem(
                        now,
                        tx,
                        Icmpv6ParamProblem::UnrecognizedNextHeader,
                        pointer,
                        &d.header,
                        d.after_header,
                    );
                }
                return;
            }
        }
        self.core.stats.ipv6_delivered += 1;
    }

    /// RFC 8200 §4.5: a fragment joins its packet; a complete packet's fragmentable
    /// part is walked (the headers after the fragment header) and delivered.
    /// Overlapping fragments drop the whole packet (RFC 5722 §4); the bounds and the
    /// timeout are the IPv4 reassembler's, shared.
    fn reassemble_ipv6(
        &mut self,
        now: Instant,
        header: Ipv6Repr,
        frag: Ipv6FragRepr,
        data: &[u8],
        multicast: bool,
        tx: &mut dyn TxSink,
    ) {
        let whole = match self.core.frag.add_v6(now, &header, &frag, data) {
            Ok(None) => return,
            Ok(Some(w)) => w,
            Err(reason) => return self.core.stats.drop(reason),
        };
        self.core.stats.frag_reassembled += 1;
        // §4.1: hop-by-hop only right after the fixed header; one fragment header.
        let chain = match ipv6ext::walk(whole.header.next_header, &whole.payload) {
            Ok(c) if c.fragment.is_none() && whole.header.next_header != IpProtocol::HopByHop => c,
            Ok(_) | Err(ChainError::Malformed) => {
                self.core.stats.drop(DropReason::Ipv6BadExtHeader);
                return self.core.frag.recycle(whole.payload);
            }
            Err(ChainError::TooLong) => {
                self.core.stats.drop(DropReason::Ipv6ExtChainTooLong);
                return self.core.frag.recycle(whole.payload);
            }
            Err(ChainError::Truncated) => {
                self.core.stats.drop(DropReason::Ipv6Truncated);
                return self.core.frag.recycle(whole.payload);
            }
            Err(ChainError::UnknownOption { .. }) => {
                self.core.stats.drop(DropReason::Ipv6UnknownOption);
                return self.core.frag.recycle(whole.payload);
            }
            Err(ChainError::Routing { .. }) => {
                self.core.stats.drop(DropReason::Ipv6RoutingHeader);
                return self.core.frag.recycle(whole.payload);
            }
        };
        let d = Delivery6 {
            header: whole.header,
            payload: &whole.payload[chain.header_len..],
            rest: &[],
            after_header: &whole.payload,
            multicast,
            // No device checksums a reassembled packet.
            verify: true,
        };
        // Pointers into a reassembled packet would not match what the sender sent:
        // no Parameter Problem for an unknown next header here, just the drop.
        let upper = chain.upper;
        if matches!(
            upper,
            IpProtocol::Icmpv6 | IpProtocol::Udp | IpProtocol::Tcp
        ) {
            self.deliver_ipv6(now, upper, chain.next_header_at, d, tx);
        } else {
            self.core.stats.drop(DropReason::Ipv6UnknownProtocol);
        }
        self.core.frag.recycle(whole.payload);
    }

    /// The interface's IPv6 addresses with their states (DAD results included).
    pub fn ipv6_addresses(&self) -> impl Iterator<Item = Ipv6AddrInfo> + '_ {
        self.core.v6.addrs.iter().map(|a| a.info)
    }

    /// The default IPv6 router learned from Router Advertisements, if its lifetime runs.
    pub fn ipv6_router(&self) -> Option<Ipv6Addr> {
        self.core.v6.router.map(|(r, _)| r)
    }

    /// The IPv6 link MTU in force (the interface's, or lower from an RA's MTU option).
    pub fn ipv6_mtu(&self) -> usize {
        self.core.v6.mtu
    }
}

impl Core {
    /// The header of a packet we originate.
    pub(super) fn ip6_header(
        &self,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        next_header: IpProtocol,
    ) -> Ip6Header {
        Ip6Header {
            src,
            dst,
            next_header,
            hop_limit: self.v6.hop_limit.unwrap_or(self.config.ttl),
            traffic_class: 0,
        }
    }

    /// [`Core::ip6_header`] with a socket's Traffic Class and Hop Limit.
    pub(super) fn ip6_header_with(
        &self,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        next_header: IpProtocol,
        ip: IpFields,
    ) -> Ip6Header {
        let mut h = self.ip6_header(src, dst, next_header);
        h.hop_limit = ip.hop_limit.unwrap_or(h.hop_limit);
        h.traffic_class = ip.tos;
        h
    }

    /// The neighbour a packet to `dst` goes to: `dst` itself when it is link-local or
    /// on an on-link prefix, else the route's gateway, else the default router.
    pub(super) fn next_hop6(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        if dst.is_unicast_link_local() {
            return Some(dst);
        }
        match self.routes.next_hop(IpAddr::V6(dst)) {
            Some(IpAddr::V6(hop)) => Some(hop),
            _ => self.v6.router.map(|(r, _)| r),
        }
    }

    /// Sends a packet: routes it, resolves the next hop by Neighbor Discovery (parking
    /// the packet meanwhile), and emits it. Drops are counted here.
    pub(super) fn send_ipv6(
        &mut self,
        now: Instant,
        tx: &mut dyn TxSink,
        h: Ip6Header,
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), DropReason> {
        if payload_len > 65535 {
            self.stats.drop(DropReason::TooLarge);
            return Err(DropReason::TooLarge);
        }
        let mac = if h.dst.is_multicast() {
            multicast_mac(h.dst)
        } else {
            let Some(hop) = self.next_hop6(h.dst) else {
                self.stats.drop(DropReason::NoRoute);
                return Err(DropReason::NoRoute);
            };
            let hop = IpAddr::V6(hop);
            let mut park = |core: &mut Core| {
                core.pending
                    .push(hop, AnyHeader::V6(h), payload_len, &mut *fill)
            };
            match self.resolve(now, tx, hop, &mut park) {
                Some(mac) => mac,
                None => return Ok(()),
            }
        };
        self.emit_ipv6(tx, mac, h, payload_len, fill)
    }

    /// Emits a packet to `mac`, in fragments when it exceeds the link MTU (RFC 8200
    /// §4.5: the fragmentable part cut into multiples of 8 bytes, each behind a copy of
    /// the fixed header and a fragment header).
    pub(super) fn emit_ipv6(
        &mut self,
        tx: &mut dyn TxSink,
        mac: EthernetAddress,
        h: Ip6Header,
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), DropReason> {
        let mut repr = Ipv6Repr {
            src_addr: h.src,
            dst_addr: h.dst,
            next_header: h.next_header,
            payload_len,
            hop_limit: h.hop_limit,
            traffic_class: h.traffic_class,
            flow_label: 0,
        };
        if HEADER_LEN + payload_len <= self.v6.mtu {
            let sent = self.send_frame(
                tx,
                mac,
                EtherType::Ipv6,
                HEADER_LEN + payload_len,
                &mut |buf| {
                    let (head, payload) = buf.split_at_mut(HEADER_LEN);
                    repr.emit(&mut Ipv6Packet::new_unchecked(head));
                    fill(payload);
                },
            );
            return if sent {
                Ok(())
            } else {
                Err(DropReason::TxFull)
            };
        }
        let mut scratch = core::mem::take(&mut self.scratch);
        scratch.clear();
        scratch.resize(payload_len, 0);
        fill(&mut scratch);
        let chunk = (self.v6.mtu - HEADER_LEN - ipv6ext::FRAG_HEADER_LEN) & !7;
        let ident = self.v6.frag_ident;
        self.v6.frag_ident = self.v6.frag_ident.wrapping_add(1);
        let mut result = Ok(());
        let mut offset = 0;
        while offset < payload_len {
            let len = chunk.min(payload_len - offset);
            let frag = Ipv6FragRepr {
                next_header: h.next_header,
                offset: offset as u16,
                more_frags: offset + len < payload_len,
                ident,
            };
            repr.next_header = IpProtocol::Ipv6Frag;
            repr.payload_len = ipv6ext::FRAG_HEADER_LEN + len;
            let piece = &scratch[offset..offset + len];
            let total = HEADER_LEN + repr.payload_len;
            let sent = self.send_frame(tx, mac, EtherType::Ipv6, total, &mut |buf| {
                let (head, rest) = buf.split_at_mut(HEADER_LEN);
                repr.emit(&mut Ipv6Packet::new_unchecked(head));
                let (fh, data) = rest.split_at_mut(ipv6ext::FRAG_HEADER_LEN);
                frag.emit(fh);
                data.copy_from_slice(piece);
            });
            if !sent {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_from_mac() {
        let mac = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
        // RFC 4291 App. A: 02:00:00:00:00:01 → interface id 0000:00ff:fe00:0001.
        assert_eq!(
            link_local_from_mac(mac),
            "fe80::ff:fe00:1".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            with_interface_id(
                "2001:2::".parse().unwrap(),
                EthernetAddress([0x52, 0x54, 0, 0x12, 0x34, 0x56])
            ),
            "2001:2::5054:ff:fe12:3456".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            solicited_node("2001:2::ab:cdef".parse().unwrap()),
            "ff02::1:ffab:cdef".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            multicast_mac("ff02::1:ffab:cdef".parse().unwrap()),
            EthernetAddress([0x33, 0x33, 0xff, 0xab, 0xcd, 0xef])
        );
    }
}
