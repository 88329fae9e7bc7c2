//! Neighbor Discovery for IPv6 (RFC 4861) and Duplicate Address Detection (RFC 4862
//! §5.4): answering solicitations for our addresses, resolving neighbours and probing
//! them (the NUD timers live in `neighbor.rs`), learning the default router, the MTU and
//! on-link prefixes from Router Advertisements, and forming addresses from them (SLAAC,
//! RFC 4862 §5.5.3, when configured).
//!
//! In: ND messages that passed ICMPv6's checksum; timers. Out: Neighbor Solicitations
//! and Advertisements, and the neighbour cache and address states.
//!
//! Validation (each with its own drop counter): every ND message must arrive with hop
//! limit 255, proof that it was not forwarded (RFC 4861 §6.1.1, §6.1.2, §7.1.1, §7.1.2);
//! a Router Advertisement must come from a link-local source (§6.1.2); a solicitation
//! from `::` must go to a solicited-node group and carry no link-layer address (§7.1.1);
//! a solicited advertisement must not go to a multicast group (§7.1.2).

use core::net::{IpAddr, Ipv6Addr};

use ulnet_wire::ndisc::{one_option, NdiscOption, NdiscRepr};
use ulnet_wire::{
    ChecksumMode, EthernetAddress, Icmpv6Packet, Icmpv6Repr, IpProtocol, NaFlags, PrefixInfo,
};

use super::ipv6::{
    multicast_mac, solicited_node, with_interface_id, Addr6, AddrOrigin, AddrState, Delivery6,
    Ipv6AddrInfo, ALL_NODES, ALL_ROUTERS,
};
use super::pending::Ip6Header;
use super::route::{IpCidr, Route};
use super::{Core, DropReason, Interface, TxSink};
use crate::time::{Duration, Instant};

/// The hop limit every ND message is sent with and must arrive with (RFC 4861 §6.1).
const ND_HOP_LIMIT: u8 = 255;

impl Interface {
    pub(super) fn process_ndisc(
        &mut self,
        now: Instant,
        d: &Delivery6<'_>,
        nd: &NdiscRepr<'_>,
        tx: &mut dyn TxSink,
    ) {
        let core = &mut self.core;
        if d.header.hop_limit != ND_HOP_LIMIT {
            return core.stats.drop(DropReason::NdBadHopLimit);
        }
        let (src, dst) = (d.header.src_addr, d.header.dst_addr);
        match *nd {
            NdiscRepr::NeighborSolicit { target, options } => {
                core.stats.nd_solicits_received += 1;
                let slla = options.source_lladdr();
                if src.is_unspecified() && (dst != solicited_node(target) || slla.is_some()) {
                    return core.stats.drop(DropReason::NdMalformed);
                }
                match core.v6.state_of(target) {
                    Some(AddrState::Tentative) => {
                        // RFC 4862 §5.4.3: another node doing DAD for our tentative
                        // address (from ::) makes it a duplicate; a resolution of it
                        // is not answered.
                        if src.is_unspecified() {
                            core.dad_failed(target);
                        } else {
                            core.stats.drop(DropReason::NdNotForUs);
                        }
                    }
                    Some(AddrState::Preferred) => {
                        // §7.2.3: learn the sender (STALE), then answer.
                        if let (Some(mac), false) = (slla, src.is_unspecified()) {
                            if core.neighbors.stale(IpAddr::V6(src), mac, now, true) {
                                core.flush_pending(now, IpAddr::V6(src), mac, tx);
                            }
                        }
                        core.send_na(now, tx, target, src, slla);
                    }
                    _ => core.stats.drop(DropReason::NdNotForUs),
                }
            }
            NdiscRepr::NeighborAdvert {
                flags,
                target,
                options,
            } => {
                core.stats.nd_adverts_received += 1;
                if flags.solicited && dst.is_multicast() {
                    return core.stats.drop(DropReason::NdMalformed);
                }
                match core.v6.state_of(target) {
                    Some(AddrState::Tentative) => return core.dad_failed(target),
                    Some(_) => {
                        // RFC 4862 §5.4.4 only covers tentative addresses; someone else
                        // claiming an address in use is counted as a conflict.
                        return core.stats.drop(DropReason::NdAddressConflict);
                    }
                    None => {}
                }
                core.neighbor_advert(now, target, flags, options.target_lladdr(), tx);
            }
            NdiscRepr::RouterAdvert {
                hop_limit: cur_hop_limit,
                router_lifetime,
                options,
                ..
            } => {
                if !src.is_unicast_link_local() {
                    return core.stats.drop(DropReason::NdBadRaSource);
                }
                if !core.config.accept_ra {
                    return core.stats.drop(DropReason::NdNotForUs);
                }
                core.stats.nd_router_adverts_received += 1;
                // §6.3.4: a non-zero Cur Hop Limit becomes the hop limit of the packets
                // we originate; zero leaves it unspecified by this router.
                if cur_hop_limit != 0 {
                    core.v6.hop_limit = Some(cur_hop_limit);
                }
                // §6.3.7: a host stops soliciting once it has an advertisement.
                core.v6.rs_done = true;
                core.v6.rs_next = None;
                core.router_advert(now, src, router_lifetime, options, tx);
            }
            NdiscRepr::RouterSolicit { .. } => {
                // §6.2.6 is for routers: a host ignores solicitations.
                core.stats.drop(DropReason::NdNotForUs)
            }
            NdiscRepr::Redirect { .. } => {
                // Parsed (so validated) and ignored: the only router we use is the
                // default one, and a redirect would need §8.3's checks to be safe.
                core.stats.drop(DropReason::NdRedirectIgnored)
            }
        }
    }
}

impl Core {
    /// RFC 4861 §7.2.5: an advertisement for a neighbour we may track.
    fn neighbor_advert(
        &mut self,
        now: Instant,
        target: Ipv6Addr,
        flags: NaFlags,
        tlla: Option<EthernetAddress>,
        tx: &mut dyn TxSink,
    ) {
        let ip = IpAddr::V6(target);
        let Some(state) = self.neighbors.state(ip) else {
            // No entry: "the advertisement SHOULD be silently discarded".
            return self.stats.drop(DropReason::NdNotForUs);
        };
        use super::neighbor::NeighborState as S;
        let cached = match state {
            S::Static(_) => return,
            S::Incomplete { .. } => {
                // Without the target's link-layer address the NA resolves nothing.
                let Some(mac) = tlla else {
                    return self.stats.drop(DropReason::NdMalformed);
                };
                let resolved = if flags.solicited {
                    self.neighbors.confirm(ip, Some(mac), now)
                } else {
                    self.neighbors.stale(ip, mac, now, false)
                };
                if resolved {
                    self.flush_pending(now, ip, mac, tx);
                }
                return;
            }
            S::Reachable { mac, .. }
            | S::Stale { mac }
            | S::Delay { mac, .. }
            | S::Probe { mac, .. } => mac,
        };
        let changed = tlla.is_some_and(|m| m != cached);
        if !flags.override_ && changed {
            // §7.2.5: a non-override NA with another address leaves the cached one,
            // but a REACHABLE entry becomes STALE.
            if matches!(state, S::Reachable { .. }) {
                self.neighbors.demote(ip);
            }
            return;
        }
        if flags.solicited {
            self.neighbors.confirm(ip, tlla, now);
        } else if let (true, Some(mac)) = (changed, tlla) {
            self.neighbors.stale(ip, mac, now, false);
        }
    }

    /// RFC 4861 §6.3.4: learns the default router, the MTU, on-link prefixes and
    /// (with SLAAC) addresses.
    fn router_advert(
        &mut self,
        now: Instant,
        src: Ipv6Addr,
        router_lifetime: u16,
        options: ulnet_wire::NdiscOptions<'_>,
        tx: &mut dyn TxSink,
    ) {
        if let Some(mac) = options.source_lladdr() {
            if self.neighbors.stale(IpAddr::V6(src), mac, now, true) {
                self.flush_pending(now, IpAddr::V6(src), mac, tx);
            }
        }
        self.v6.router = match router_lifetime {
            0 => match self.v6.router {
                Some((r, _)) if r == src => None,
                other => other,
            },
            s => Some((src, now + Duration::from_secs(u64::from(s)))),
        };
        if let Some(mtu) = options.mtu() {
            // §6.3.4: an MTU option outside [1280, link MTU] is ignored.
            let mtu = mtu as usize;
            if (super::ipv6::MIN_MTU..=self.config.mtu).contains(&mtu) {
                self.v6.mtu = mtu;
            } else {
                self.stats.nd_bad_mtu_options += 1;
            }
        }
        for p in options.prefixes() {
            self.prefix_info(now, p);
        }
    }

    fn prefix_info(&mut self, now: Instant, p: PrefixInfo) {
        // RFC 4861 §6.3.4 / RFC 4862 §5.5.3 b: the link-local prefix is never taken.
        if p.prefix.is_unicast_link_local() || p.prefix_len > 128 {
            return;
        }
        if p.on_link {
            self.on_link_prefix(now, &p);
        }
        // RFC 4862 §5.5.3: SLAAC needs the A flag, a 64-bit prefix (the interface
        // identifier is 64 bits, RFC 4291 §2.5.1) and preferred ≤ valid lifetime.
        if !self.config.slaac
            || !p.autonomous
            || p.prefix_len != 64
            || p.preferred_lifetime > p.valid_lifetime
        {
            return;
        }
        let addr = with_interface_id(p.prefix, self.config.mac);
        let valid_until = (p.valid_lifetime != u32::MAX)
            .then(|| now + Duration::from_secs(u64::from(p.valid_lifetime)));
        if let Some(a) = self.v6.addrs.iter_mut().find(|a| a.info.addr == addr) {
            // §5.5.3 e, simplified: refresh the lifetime (the two-hour rule guards
            // against shortening by an unauthenticated RA).
            if a.info.origin == AddrOrigin::Slaac {
                let two_hours = now + Duration::from_secs(7200);
                a.valid_until = match (valid_until, a.valid_until) {
                    (None, _) => None,
                    (Some(v), Some(old)) if v < two_hours && old > two_hours => Some(two_hours),
                    (Some(v), _) => Some(v),
                };
            }
            return;
        }
        if p.valid_lifetime == 0 {
            return;
        }
        let slaac = self
            .v6
            .addrs
            .iter()
            .filter(|a| a.info.origin == AddrOrigin::Slaac)
            .count();
        if slaac >= self.config.limits.slaac_address_count {
            self.stats.nd_prefixes_refused += 1;
            return;
        }
        self.add_v6_address(
            Ipv6AddrInfo {
                addr,
                prefix_len: 64,
                state: AddrState::Tentative,
                origin: AddrOrigin::Slaac,
            },
            valid_until,
            now,
        );
    }

    /// RFC 4861 §6.3.4: an on-link prefix becomes a route for its valid lifetime; a
    /// known one is refreshed (a zero lifetime removes it). At most `ra_prefix_count`
    /// are kept, so Router Advertisements cannot fill the route table.
    fn on_link_prefix(&mut self, now: Instant, p: &PrefixInfo) {
        let Some(cidr) = IpCidr::new(IpAddr::V6(p.prefix), p.prefix_len) else {
            return;
        };
        let until = (p.valid_lifetime != u32::MAX)
            .then(|| now + Duration::from_secs(u64::from(p.valid_lifetime)));
        let same =
            |c: &IpCidr| c.network() == cidr.network() && c.prefix_len() == cidr.prefix_len();
        if let Some(i) = self.v6.prefixes.iter().position(|(c, _)| same(c)) {
            if p.valid_lifetime == 0 {
                let (c, _) = self.v6.prefixes.swap_remove(i);
                self.routes.remove(c);
            } else {
                self.v6.prefixes[i].1 = until;
            }
            return;
        }
        // A prefix the configuration already routes stays the configuration's.
        if p.valid_lifetime == 0 || self.routes.iter().any(|r| same(&r.dst)) {
            return;
        }
        if self.v6.prefixes.len() >= self.config.limits.ra_prefix_count
            || self
                .routes
                .add(Route {
                    dst: cidr,
                    via: None,
                })
                .is_err()
        {
            self.stats.nd_prefixes_refused += 1;
            return;
        }
        self.v6.prefixes.push((cidr, until));
    }

    /// Adds an address, tentative until DAD passes (or at once with DAD off).
    pub(super) fn add_v6_address(
        &mut self,
        mut info: Ipv6AddrInfo,
        valid_until: Option<Instant>,
        now: Instant,
    ) {
        let dad = self.config.limits.dad_transmits > 0;
        info.state = if dad {
            AddrState::Tentative
        } else {
            AddrState::Preferred
        };
        self.v6.addrs.push(Addr6 {
            info,
            probes: 0,
            next_at: dad.then_some(now),
            valid_until,
        });
    }

    /// RFC 4862 §5.4.5: DAD failed: the address is never used.
    fn dad_failed(&mut self, target: Ipv6Addr) {
        if let Some(a) = self.v6.addrs.iter_mut().find(|a| a.info.addr == target) {
            a.info.state = AddrState::Duplicated;
            a.next_at = None;
        }
        self.stats.dad_duplicates += 1;
    }

    /// Runs DAD (RFC 4862 §5.4.2: DupAddrDetectTransmits solicitations from `::` to
    /// the solicited-node group, RetransTimer apart; no answer by the last timer: the
    /// address is ours), the lifetimes of SLAAC addresses and of the default router.
    pub(super) fn poll_v6(&mut self, now: Instant, tx: &mut dyn TxSink) {
        if !self.v6.enabled {
            return;
        }
        if self.v6.router.is_some_and(|(_, until)| until <= now) {
            self.v6.router = None;
        }
        self.v6
            .addrs
            .retain(|a| a.valid_until.is_none_or(|t| t > now));
        let mut i = 0;
        while i < self.v6.prefixes.len() {
            if self.v6.prefixes[i].1.is_some_and(|t| t <= now) {
                let (c, _) = self.v6.prefixes.swap_remove(i);
                self.routes.remove(c);
            } else {
                i += 1;
            }
        }
        let transmits = self.config.limits.dad_transmits;
        let retrans = self.config.limits.dad_retrans_interval;
        for i in 0..self.v6.addrs.len() {
            let a = self.v6.addrs[i];
            if a.info.state != AddrState::Tentative || a.next_at.is_none_or(|t| t > now) {
                continue;
            }
            if a.probes >= transmits {
                self.v6.addrs[i].info.state = AddrState::Preferred;
                self.v6.addrs[i].next_at = None;
                self.stats.dad_completed += 1;
                continue;
            }
            self.v6.addrs[i].probes += 1;
            self.v6.addrs[i].next_at = Some(now + retrans);
            let target = a.info.addr;
            let ns = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
                target,
                options: Default::default(),
            });
            let group = solicited_node(target);
            let h = Ip6Header {
                src: Ipv6Addr::UNSPECIFIED,
                dst: group,
                next_header: IpProtocol::Icmpv6,
                hop_limit: ND_HOP_LIMIT,
                traffic_class: 0,
            };
            if self.send_icmpv6_to(tx, multicast_mac(group), h, &ns) {
                self.stats.dad_solicits_sent += 1;
            }
        }
        self.poll_router_solicit(now, tx);
    }

    /// RFC 4861 §6.3.7: once the link-local address is usable (after DAD), a host
    /// accepting Router Advertisements sends up to MAX_RTR_SOLICITATIONS (3) Router
    /// Solicitations to all-routers, RTR_SOLICITATION_INTERVAL (4 s) apart, the first
    /// after a random delay of up to 1 s, and stops when an advertisement arrives; so a
    /// router's prefix, MTU and default route come at once rather than with its next
    /// unsolicited advertisement (up to 600 s later, §6.2.1).
    fn poll_router_solicit(&mut self, now: Instant, tx: &mut dyn TxSink) {
        const MAX_RTR_SOLICITATIONS: u8 = 3;
        const RTR_SOLICITATION_INTERVAL: Duration = Duration::from_secs(4);
        if !self.config.accept_ra || self.v6.rs_done {
            return;
        }
        let Some(ll) = self
            .v6
            .addrs
            .iter()
            .find(|a| a.info.addr.is_unicast_link_local() && a.info.state == AddrState::Preferred)
            .map(|a| a.info.addr)
        else {
            return;
        };
        match self.v6.rs_next {
            None => {
                self.v6.rs_next = Some(now + self.v6.rs_delay);
                if !self.v6.rs_delay.is_zero() {
                    return;
                }
            }
            Some(t) if t > now => return,
            Some(_) => {}
        }
        if self.v6.rs_sent >= MAX_RTR_SOLICITATIONS {
            self.v6.rs_done = true;
            self.v6.rs_next = None;
            return;
        }
        self.v6.rs_sent += 1;
        self.v6.rs_next = Some(now + RTR_SOLICITATION_INTERVAL);
        let mut ob = [0u8; 8];
        let options = one_option(&mut ob, &NdiscOption::SourceLinkLayer(self.config.mac));
        let rs = Icmpv6Repr::Ndisc(NdiscRepr::RouterSolicit { options });
        let h = Ip6Header {
            src: ll,
            dst: ALL_ROUTERS,
            next_header: IpProtocol::Icmpv6,
            hop_limit: ND_HOP_LIMIT,
            traffic_class: 0,
        };
        if self.send_icmpv6_to(tx, multicast_mac(ALL_ROUTERS), h, &rs) {
            self.stats.nd_router_solicits_sent += 1;
        }
    }

    /// When DAD or a lifetime next needs [`poll_v6`](Self::poll_v6).
    pub(super) fn v6_poll_at(&self) -> Option<Instant> {
        if !self.v6.enabled {
            return None;
        }
        self.v6
            .addrs
            .iter()
            .flat_map(|a| [a.next_at, a.valid_until])
            .chain(self.v6.prefixes.iter().map(|(_, t)| *t))
            .chain([self.v6.router.map(|(_, t)| t)])
            .chain([self.v6.rs_next.filter(|_| !self.v6.rs_done)])
            .flatten()
            .min()
    }

    /// Sends a Neighbor Solicitation for `target`: multicast to its solicited-node
    /// group to resolve it, or unicast to `mac` to probe it (RFC 4861 §7.2.2, §7.3.3).
    pub(super) fn send_ns(
        &mut self,
        _now: Instant,
        tx: &mut dyn TxSink,
        target: Ipv6Addr,
        unicast: Option<EthernetAddress>,
    ) {
        let Some(src) = self.v6.source_for(target) else {
            return self.stats.drop(DropReason::NoSourceAddress);
        };
        let mut ob = [0u8; 8];
        let options = one_option(&mut ob, &NdiscOption::SourceLinkLayer(self.config.mac));
        let ns = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target, options });
        let (dst, mac) = match unicast {
            Some(mac) => (target, mac),
            None => (
                solicited_node(target),
                multicast_mac(solicited_node(target)),
            ),
        };
        let h = Ip6Header {
            src,
            dst,
            next_header: IpProtocol::Icmpv6,
            hop_limit: ND_HOP_LIMIT,
            traffic_class: 0,
        };
        if self.send_icmpv6_to(tx, mac, h, &ns) {
            self.stats.nd_solicits_sent += 1;
        }
    }

    /// Answers a solicitation for our `target` from `to` (RFC 4861 §7.2.4): solicited
    /// and override set; to all-nodes when the solicitation came from `::`.
    fn send_na(
        &mut self,
        _now: Instant,
        tx: &mut dyn TxSink,
        target: Ipv6Addr,
        to: Ipv6Addr,
        to_mac: Option<EthernetAddress>,
    ) {
        let mut ob = [0u8; 8];
        let options = one_option(&mut ob, &NdiscOption::TargetLinkLayer(self.config.mac));
        let unspecified = to.is_unspecified();
        let na = Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
            flags: NaFlags {
                router: false,
                solicited: !unspecified,
                override_: true,
            },
            target,
            options,
        });
        let (dst, mac) = match (unspecified, to_mac) {
            (true, _) => (ALL_NODES, multicast_mac(ALL_NODES)),
            (false, Some(mac)) => (to, mac),
            (false, None) => match self.neighbors.lookup(IpAddr::V6(to), Instant::ZERO) {
                super::neighbor::Lookup::Found(mac) => (to, mac),
                // §7.2.4: without the solicitor's link-layer address we would have to
                // resolve it first; the solicitor will ask again.
                _ => return self.stats.drop(DropReason::NdNotForUs),
            },
        };
        let h = Ip6Header {
            src: target,
            dst,
            next_header: IpProtocol::Icmpv6,
            hop_limit: ND_HOP_LIMIT,
            traffic_class: 0,
        };
        if self.send_icmpv6_to(tx, mac, h, &na) {
            self.stats.nd_adverts_sent += 1;
        }
    }

    /// Emits one ICMPv6 message straight to `mac` (no resolution): for ND itself.
    fn send_icmpv6_to(
        &mut self,
        tx: &mut dyn TxSink,
        mac: EthernetAddress,
        h: Ip6Header,
        msg: &Icmpv6Repr<'_>,
    ) -> bool {
        self.emit_ipv6(tx, mac, h, msg.buffer_len(), &mut |buf| {
            msg.emit(
                &mut Icmpv6Packet::new_unchecked(buf),
                &h.src,
                &h.dst,
                ChecksumMode::Full,
            );
        })
        .is_ok()
    }
}
