//! IPv6 through the interface over the simulated wire, in virtual time: Neighbor
//! Discovery, DAD, ping (global and link-local), UDP, the MSS from the IPv6 MTU, NUD
//! recovering when a neighbour's MAC changes, Router Advertisements, and hostile input
//! (forwarded ND, bad RA sources, zero-length options, long or looping header chains,
//! overlapping fragments) dropped and counted.

mod common;

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use common::{collect, config6, eth_frame, inject, ip6, ip6a, mac, Sim};
use ulnet_channel::sim::{Endpoint, LinkConfig, Wire};
use ulnet_stack::iface::{
    link_local_from_mac, solicited_node, AddrOrigin, AddrState, DropReason, Lookup, NeighborState,
};
use ulnet_stack::socket::{IcmpSocket, UdpConfig, UdpSocket};
use ulnet_stack::tcp::{Tcp, TcpConfig};
use ulnet_stack::time::Duration;
use ulnet_wire::ndisc::{one_option, NdiscOption, NdiscOptions};
use ulnet_wire::{
    ChecksumMode, EtherType, EthernetAddress, EthernetFrame, Icmpv6Packet, Icmpv6Repr, IpProtocol,
    Ipv6FragRepr, Ipv6Packet, Ipv6Repr, NaFlags, NdiscRepr, PrefixInfo, UdpPacket, UdpRepr,
};

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed))
        .collect()
}

fn v6_pair(seed: u64, link: LinkConfig) -> Sim {
    let (wire, a, b) = Wire::pair(seed, link.clone(), link);
    let mut sim = Sim::new(wire);
    sim.family = common::Family::V6;
    sim.add(config6(1), Box::new(a));
    sim.add(config6(2), Box::new(b));
    sim
}

/// Runs past DAD (one solicitation, one second) so every address is usable.
fn settle(sim: &mut Sim) {
    sim.run_for(Duration::from_millis(1500));
}

#[test]
fn dad_then_ping_global_and_link_local_and_udp() {
    let mut sim = v6_pair(
        0x6,
        LinkConfig::new()
            .loss(0.05)
            .delay(std::time::Duration::from_millis(1)),
    );
    // Before DAD ends the addresses are tentative: nothing can be sent from them.
    let addrs: Vec<_> = sim.iface(0).ipv6_addresses().collect();
    assert_eq!(addrs.len(), 2);
    assert!(addrs.iter().all(|a| a.state == AddrState::Tentative));
    assert_eq!(addrs[0].addr, link_local_from_mac(mac(1)));
    assert_eq!(addrs[0].origin, AddrOrigin::LinkLocal);
    settle(&mut sim);
    for i in 0..2 {
        let s = sim.iface(i).stats().clone();
        assert!(
            sim.iface(i)
                .ipv6_addresses()
                .all(|a| a.state == AddrState::Preferred),
            "{s}"
        );
        assert_eq!((s.dad_solicits_sent, s.dad_completed), (2, 2), "{s}");
    }

    let ping = sim
        .iface(0)
        .sockets_mut()
        .add_icmp(IcmpSocket::new(0x66, 16, 16 * 1024))
        .unwrap();
    let echo = {
        let mut s = UdpSocket::new(UdpConfig::default());
        s.bind("[::]:7".parse().unwrap()).unwrap();
        sim.iface(1).sockets_mut().add_udp(s).unwrap()
    };
    let client = {
        let mut s = UdpSocket::new(UdpConfig::default());
        s.bind(SocketAddr::new(ip6a(1), 5000)).unwrap();
        sim.iface(0).sockets_mut().add_udp(s).unwrap()
    };
    let ll2 = IpAddr::V6(link_local_from_mac(mac(2)));
    let mut replies = 0;
    let mut udp_back = 0;
    let mut buf = vec![0u8; 65536];
    let rounds = 40u16;
    for seq in 0..rounds {
        let to = if seq % 2 == 0 { ip6a(2) } else { ll2 };
        sim.iface(0)
            .sockets_mut()
            .icmp_mut(ping)
            .unwrap()
            .send_echo(to, seq, &pattern(seq as u8, 56))
            .unwrap();
        // Every fourth datagram needs fragmenting (1280 + a bit over the 1500 MTU).
        let len = if seq % 4 == 0 { 3000 } else { 100 };
        sim.iface(0)
            .sockets_mut()
            .udp_mut(client)
            .unwrap()
            .send_to(&pattern(seq as u8, len), SocketAddr::new(ip6a(2), 7))
            .unwrap();
        let end = sim.now() + Duration::from_millis(300);
        sim.run_until(end, |sim| {
            let iface = sim.iface(1);
            while let Ok((n, meta)) = iface
                .sockets_mut()
                .udp_mut(echo)
                .unwrap()
                .recv_from(&mut buf)
            {
                let data = buf[..n].to_vec();
                iface
                    .sockets_mut()
                    .udp_mut(echo)
                    .unwrap()
                    .send_to(&data, meta.peer)
                    .unwrap();
            }
            let iface = sim.iface(0);
            let mut rb = [0u8; 128];
            while let Ok(r) = iface
                .sockets_mut()
                .icmp_mut(ping)
                .unwrap()
                .recv_reply(&mut rb)
            {
                assert_eq!(&rb[..r.len], &pattern(r.seq_no as u8, 56)[..]);
                replies += 1;
            }
            while let Ok((n, _)) = iface
                .sockets_mut()
                .udp_mut(client)
                .unwrap()
                .recv_from(&mut buf)
            {
                assert!(n == 3000 || n == 100);
                assert_eq!(&buf[..n], &pattern(buf[0], n)[..]);
                udp_back += 1;
            }
            false
        });
    }
    // 5% loss each way: most, not all, come back; none is corrupted.
    assert!(replies >= 30, "{replies} echo replies");
    assert!(udp_back >= 25, "{udp_back} UDP echoes");
    let a = sim.iface(0).stats().clone();
    let b = sim.iface(1).stats().clone();
    assert!(b.icmp_echo_replies_sent >= 30, "{b}");
    assert!(a.frag_sent > 0 && b.frag_reassembled > 0, "{a}\n{b}");
    assert!(
        b.nd_adverts_sent >= 1 && a.nd_solicits_sent >= 1,
        "{a}\n{b}"
    );
    // Both of node 1's addresses are neighbours of node 0 now.
    let now = sim.now();
    for ip in [ip6a(2), ll2] {
        assert_eq!(
            sim.iface(0).neighbors().lookup(ip, now),
            Lookup::Found(mac(2)),
            "{ip}"
        );
    }
}

/// The MSS follows the IPv6 MTU: MTU - 60 (1440 on 1500, 1220 on the 1280 minimum),
/// and a stream crosses byte-exact with it.
#[test]
fn mss_from_the_ipv6_mtu() {
    for (mtu, mss) in [(1500usize, 1440u16), (1280, 1220)] {
        let (wire, a, b) = Wire::pair(7, LinkConfig::new(), LinkConfig::new());
        let mut sim = Sim::new(wire);
        sim.family = common::Family::V6;
        sim.add(config6(1).mtu(mtu), Box::new(a));
        sim.add(config6(2).mtu(mtu), Box::new(b));
        sim.iface(0)
            .set_tcp(Tcp::new(TcpConfig::default(), [1; 16]));
        sim.iface(1)
            .set_tcp(Tcp::new(TcpConfig::default(), [2; 16]));
        settle(&mut sim);
        let l = sim
            .iface(1)
            .tcp_mut()
            .unwrap()
            .listen(SocketAddr::new(ip6a(2), 81), 1)
            .unwrap();
        let now = sim.now();
        let c = sim
            .iface(0)
            .tcp_mut()
            .unwrap()
            .connect(
                now,
                SocketAddr::new(ip6a(1), 0),
                SocketAddr::new(ip6a(2), 81),
            )
            .unwrap();
        let end = sim.now() + Duration::from_secs(5);
        assert!(sim.run_until(end, |sim| {
            sim.iface(0).tcp().unwrap().state(c) == Ok(ulnet_stack::tcp::State::Established)
        }));
        // The MSS option both sides offered is MTU - 60; the data a segment carries is
        // that less the 12-byte timestamp option (RFC 7323 §3), as Linux reports it.
        let ts = |i: &ulnet_stack::tcp::TcpInfo| if i.timestamps { 12 } else { 0 };
        let info = sim.iface(0).tcp().unwrap().info(c).unwrap();
        assert_eq!(info.snd_mss + ts(&info), mss, "mtu {mtu}");
        let now = sim.now();
        let s = sim
            .iface(1)
            .tcp_mut()
            .unwrap()
            .accept(now, l)
            .unwrap()
            .unwrap();
        let info = sim.iface(1).tcp().unwrap().info(s).unwrap();
        assert_eq!(info.snd_mss + ts(&info), mss, "mtu {mtu}");
        let data = pattern(3, 50_000);
        let t = common::tcp::transfer(&mut sim, &data, Duration::from_secs(60));
        assert!(t.done && t.received == data, "mtu {mtu}");
    }
}

// ------------------------------------------------------------------ raw frames

/// Node 0 is an IPv6 interface (2001:2::1, DAD off); the endpoint is a raw host on the
/// same hub that the test speaks for.
fn raw_setup(configure: impl FnOnce(&mut ulnet_stack::iface::InterfaceConfig)) -> (Sim, Endpoint) {
    let (wire, mut eps) = Wire::hub(0x66, 2, LinkConfig::new());
    let raw = eps.pop().unwrap();
    let mut sim = Sim::new(wire);
    let mut c = config6(1);
    c.limits.dad_transmits = 0;
    configure(&mut c);
    sim.add(c, Box::new(eps.pop().unwrap()));
    sim.step();
    (sim, raw)
}

const RAW_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 9]);

fn raw_ll() -> Ipv6Addr {
    link_local_from_mac(RAW_MAC)
}

/// An IPv6 packet in an Ethernet frame from the raw host.
fn v6_frame(dst_mac: EthernetAddress, mut h: Ipv6Repr, payload: &[u8]) -> Vec<u8> {
    h.payload_len = payload.len();
    let mut p = vec![0u8; 40 + payload.len()];
    h.emit(&mut Ipv6Packet::new_unchecked(&mut p[..]));
    p[40..].copy_from_slice(payload);
    eth_frame(RAW_MAC, dst_mac, EtherType::Ipv6, &p)
}

fn header(src: Ipv6Addr, dst: Ipv6Addr, next: IpProtocol, hop_limit: u8) -> Ipv6Repr {
    Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: next,
        payload_len: 0,
        hop_limit,
        traffic_class: 0,
        flow_label: 0,
    }
}

fn icmp(src: Ipv6Addr, dst: Ipv6Addr, r: &Icmpv6Repr<'_>) -> Vec<u8> {
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(
        &mut Icmpv6Packet::new_unchecked(&mut b[..]),
        &src,
        &dst,
        ChecksumMode::Full,
    );
    b
}

fn icmp_frame(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    dst_mac: EthernetAddress,
    hop_limit: u8,
    r: &Icmpv6Repr<'_>,
) -> Vec<u8> {
    v6_frame(
        dst_mac,
        header(src, dst, IpProtocol::Icmpv6, hop_limit),
        &icmp(src, dst, r),
    )
}

/// What came out of node 0 as parsed IPv6 packets (header, bytes after it), without
/// the Router Solicitations of its start-up (`router_solicitations_at_start_up`).
fn sent_v6(raw: &mut Endpoint) -> Vec<(Ipv6Repr, Vec<u8>)> {
    sent_v6_all(raw)
        .into_iter()
        .filter(|(h, b)| !is_rs(h, b))
        .collect()
}

fn is_rs(h: &Ipv6Repr, b: &[u8]) -> bool {
    h.next_header == IpProtocol::Icmpv6 && b.first() == Some(&133)
}

fn sent_v6_all(raw: &mut Endpoint) -> Vec<(Ipv6Repr, Vec<u8>)> {
    collect(raw)
        .into_iter()
        .filter_map(|f| {
            let eth = EthernetFrame::new_checked(&f[..]).ok()?;
            if eth.ethertype() != EtherType::Ipv6 {
                return None;
            }
            let p = Ipv6Packet::new_checked(eth.payload()).ok()?;
            let h = Ipv6Repr::parse(&p).ok()?;
            Some((h, p.payload().to_vec()))
        })
        .collect()
}

fn ns(target: Ipv6Addr, slla: Option<EthernetAddress>, ob: &mut [u8; 8]) -> Icmpv6Repr<'_> {
    let options = match slla {
        Some(m) => one_option(ob, &NdiscOption::SourceLinkLayer(m)),
        None => NdiscOptions::default(),
    };
    Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target, options })
}

/// RFC 4861 §7.2.3: an NS for our address to its solicited-node group is answered with
/// a solicited NA carrying our MAC; the same NS forwarded (hop limit 254) is dropped
/// and counted (§7.1.1).
#[test]
fn answers_solicitations_and_refuses_forwarded_ones() {
    let (mut sim, mut raw) = raw_setup(|_| {});
    let group = solicited_node(ip6(1));
    let mut ob = [0u8; 8];
    let req = ns(ip6(1), Some(RAW_MAC), &mut ob);
    let mcast = ulnet_stack::iface::multicast_mac(group);
    inject(&mut raw, &[icmp_frame(raw_ll(), group, mcast, 254, &req)]);
    sim.run_for(Duration::from_millis(10));
    assert!(sent_v6(&mut raw).is_empty());
    assert_eq!(sim.iface(0).stats().drops(DropReason::NdBadHopLimit), 1);
    inject(&mut raw, &[icmp_frame(raw_ll(), group, mcast, 255, &req)]);
    sim.run_for(Duration::from_millis(10));
    let out = sent_v6(&mut raw);
    assert_eq!(out.len(), 1, "{out:?}");
    let (h, body) = &out[0];
    assert_eq!(
        (h.src_addr, h.dst_addr, h.hop_limit),
        (ip6(1), raw_ll(), 255)
    );
    let p = Icmpv6Packet::new_checked(&body[..]).unwrap();
    match Icmpv6Repr::parse(&p, &h.src_addr, &h.dst_addr, ChecksumMode::Full).unwrap() {
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
            flags,
            target,
            options,
        }) => {
            assert!(flags.solicited && flags.override_ && !flags.router);
            assert_eq!(target, ip6(1));
            assert_eq!(options.target_lladdr(), Some(mac(1)));
        }
        other => panic!("{other:?}"),
    }
    // The solicitor was learned (STALE, RFC 4861 §7.2.3).
    assert_eq!(
        sim.iface(0).neighbors().state(IpAddr::V6(raw_ll())),
        Some(NeighborState::Stale { mac: RAW_MAC })
    );
}

/// A zero-length ND option makes the message invalid (RFC 4861 §4.6): dropped, counted,
/// unanswered.
#[test]
fn zero_length_nd_option_is_dropped() {
    let (mut sim, mut raw) = raw_setup(|_| {});
    let group = solicited_node(ip6(1));
    let mut ob = [0u8; 8];
    let mut msg = icmp(raw_ll(), group, &ns(ip6(1), Some(RAW_MAC), &mut ob));
    msg[24 + 1] = 0; // the option's length
    let mut p = Icmpv6Packet::new_unchecked(&mut msg[..]);
    p.fill_checksum(&raw_ll(), &group);
    let f = v6_frame(
        ulnet_stack::iface::multicast_mac(group),
        header(raw_ll(), group, IpProtocol::Icmpv6, 255),
        &msg,
    );
    inject(&mut raw, &[f]);
    sim.run_for(Duration::from_millis(10));
    assert!(sent_v6(&mut raw).is_empty());
    assert_eq!(sim.iface(0).stats().drops(DropReason::NdMalformed), 1);
}

fn ra<'a>(lifetime: u16, options: NdiscOptions<'a>) -> Icmpv6Repr<'a> {
    Icmpv6Repr::Ndisc(NdiscRepr::RouterAdvert {
        hop_limit: 64,
        flags: 0,
        router_lifetime: lifetime,
        reachable_time: 0,
        retrans_time: 0,
        options,
    })
}

/// RFC 4861 §6.1.2: an RA must come from a link-local source with hop limit 255;
/// otherwise it changes nothing. A valid one sets the default router, the MTU (within
/// [1280, link MTU]) and, with SLAAC on, an address from its prefix after DAD.
#[test]
fn router_advertisements() {
    let (mut sim, mut raw) = raw_setup(|c| {
        c.slaac = true;
        c.limits.dad_transmits = 1;
    });
    sim.run_for(Duration::from_secs(2));
    let _ = collect(&mut raw);
    let mut ob = vec![0u8; 8 + 8 + 32];
    NdiscOption::SourceLinkLayer(RAW_MAC).emit(&mut ob[..8]);
    NdiscOption::Mtu(1400).emit(&mut ob[8..16]);
    NdiscOption::PrefixInfo(PrefixInfo {
        prefix_len: 64,
        on_link: true,
        autonomous: true,
        valid_lifetime: 3600,
        preferred_lifetime: 1800,
        prefix: "2001:2:0:1::".parse().unwrap(),
    })
    .emit(&mut ob[16..]);
    let options = NdiscOptions::parse(&ob).unwrap();
    let all = ulnet_stack::iface::ALL_NODES;
    let all_mac = ulnet_stack::iface::multicast_mac(all);
    let global: Ipv6Addr = "2001:2::9".parse().unwrap();
    inject(
        &mut raw,
        &[
            icmp_frame(global, all, all_mac, 255, &ra(1800, options)),
            icmp_frame(raw_ll(), all, all_mac, 254, &ra(1800, options)),
        ],
    );
    sim.run_for(Duration::from_millis(10));
    let s = sim.iface(0).stats().clone();
    assert_eq!(s.drops(DropReason::NdBadRaSource), 1, "{s}");
    assert_eq!(s.drops(DropReason::NdBadHopLimit), 1, "{s}");
    assert_eq!(sim.iface(0).ipv6_router(), None);
    assert_eq!(sim.iface(0).ipv6_mtu(), 1500);
    inject(
        &mut raw,
        &[icmp_frame(raw_ll(), all, all_mac, 255, &ra(1800, options))],
    );
    sim.run_for(Duration::from_secs(2));
    assert_eq!(sim.iface(0).ipv6_router(), Some(raw_ll()));
    assert_eq!(sim.iface(0).ipv6_mtu(), 1400);
    let slaac: Vec<_> = sim
        .iface(0)
        .ipv6_addresses()
        .filter(|a| a.origin == AddrOrigin::Slaac)
        .collect();
    assert_eq!(slaac.len(), 1);
    assert_eq!(
        slaac[0].addr,
        "2001:2:0:1:0:ff:fe00:1".parse::<Ipv6Addr>().unwrap()
    );
    assert_eq!(slaac[0].state, AddrState::Preferred);
    // The on-link prefix is a route until its valid lifetime (3600 s) ends; so is the
    // SLAAC address.
    let prefix = ulnet_stack::iface::IpCidr::new("2001:2:0:1::".parse().unwrap(), 64).unwrap();
    let routed = |sim: &mut Sim| sim.iface(0).routes().iter().any(|r| r.dst == prefix);
    assert!(routed(&mut sim));
    let mut small = [0u8; 8];
    let options = one_option(&mut small, &NdiscOption::Mtu(1000));
    inject(
        &mut raw,
        &[icmp_frame(raw_ll(), all, all_mac, 255, &ra(1800, options))],
    );
    sim.run_for(Duration::from_millis(10));
    assert_eq!(sim.iface(0).ipv6_mtu(), 1400);
    assert_eq!(sim.iface(0).stats().nd_bad_mtu_options, 1);
    sim.run_for(Duration::from_secs(3600));
    assert!(!routed(&mut sim));
    assert!(sim
        .iface(0)
        .ipv6_addresses()
        .all(|a| a.origin != AddrOrigin::Slaac));
    // The router's lifetime (1800 s) ended before.
    assert_eq!(sim.iface(0).ipv6_router(), None);
}

/// RFC 4862 §5.4.4: an NA for the address under DAD marks it duplicated: never used,
/// counted, visible.
#[test]
fn dad_detects_a_duplicate() {
    let (wire, a, b) = Wire::pair(9, LinkConfig::new(), LinkConfig::new());
    let mut sim = Sim::new(wire);
    // Node 0 holds 2001:2::5 already (no DAD); node 1 then tries the same address.
    let taken = IpAddr::V6("2001:2::5".parse().unwrap());
    let cidr = ulnet_stack::iface::IpCidr::new(taken, 64).unwrap();
    let mut c0 = config6(1).address(cidr);
    c0.limits.dad_transmits = 0;
    sim.add(c0, Box::new(a));
    sim.add(config6(2).address(cidr), Box::new(b));
    sim.run_for(Duration::from_secs(3));
    let states: Vec<_> = sim
        .iface(1)
        .ipv6_addresses()
        .map(|a| (a.addr, a.state))
        .collect();
    let dup = states
        .iter()
        .find(|(a, _)| IpAddr::V6(*a) == taken)
        .unwrap();
    assert_eq!(dup.1, AddrState::Duplicated, "{states:?}");
    assert_eq!(sim.iface(1).stats().dad_duplicates, 1);
    // Its other addresses passed.
    assert!(states
        .iter()
        .filter(|(a, _)| IpAddr::V6(*a) != taken)
        .all(|(_, s)| *s == AddrState::Preferred));
    // Node 0 still has it.
    assert!(sim
        .iface(0)
        .ipv6_addresses()
        .any(|a| IpAddr::V6(a.addr) == taken && a.state == AddrState::Preferred));
}

/// NUD (RFC 4861 §7.3): the neighbour's MAC changes; once the entry goes stale and is
/// probed, or an overriding NA arrives, traffic reaches the new MAC.
#[test]
fn nud_recovers_when_the_neighbour_mac_changes() {
    let (mut sim, mut raw) = raw_setup(|c| {
        c.limits.neighbor_ttl = Duration::from_secs(2);
    });
    let ping = sim
        .iface(0)
        .sockets_mut()
        .add_icmp(IcmpSocket::new(1, 16, 16 * 1024))
        .unwrap();
    let peer = IpAddr::V6(raw_ll());
    let answer =
        |sim: &mut Sim, raw: &mut Endpoint, my_mac: EthernetAddress| -> Vec<EthernetAddress> {
            // Answer solicitations as the raw host at `my_mac`, and echo requests; report
            // the destination MACs of the echo requests seen.
            let mut seen = Vec::new();
            for f in collect(raw) {
                let eth = EthernetFrame::new_checked(&f[..]).unwrap();
                let Ok(p) = Ipv6Packet::new_checked(eth.payload()) else {
                    continue;
                };
                let h = Ipv6Repr::parse(&p).unwrap();
                let Ok(ip) = Icmpv6Packet::new_checked(p.payload()) else {
                    continue;
                };
                match Icmpv6Repr::parse(&ip, &h.src_addr, &h.dst_addr, ChecksumMode::Full) {
                    Ok(Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target, .. }))
                        if target == raw_ll() =>
                    {
                        let mut ob = [0u8; 8];
                        let na = Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
                            flags: NaFlags {
                                router: false,
                                solicited: true,
                                override_: true,
                            },
                            target,
                            options: one_option(&mut ob, &NdiscOption::TargetLinkLayer(my_mac)),
                        });
                        let mut frame = icmp_frame(raw_ll(), h.src_addr, mac(1), 255, &na);
                        frame[6..12].copy_from_slice(&my_mac.0);
                        inject(raw, &[frame]);
                    }
                    Ok(Icmpv6Repr::EchoRequest { .. }) => seen.push(eth.dst_addr()),
                    _ => {}
                }
            }
            let _ = sim;
            seen
        };
    let new_mac = EthernetAddress([2, 0, 0, 0, 0, 0x0a]);
    let mut to_old = 0;
    let mut to_new = 0;
    for round in 0..30u16 {
        // The host "moves" to a new MAC at round 10 (and stops answering at the old).
        let my_mac = if round < 10 { RAW_MAC } else { new_mac };
        sim.iface(0)
            .sockets_mut()
            .icmp_mut(ping)
            .unwrap()
            .send_echo(peer, round, b"nud")
            .unwrap();
        for _ in 0..10 {
            sim.run_for(Duration::from_millis(100));
            for m in answer(&mut sim, &mut raw, my_mac) {
                if m == RAW_MAC {
                    to_old += 1;
                } else if m == new_mac {
                    to_new += 1;
                }
            }
        }
    }
    assert!(to_old >= 10, "{to_old}");
    // Within REACHABLE (2 s) + DELAY (5 s) + probes the entry moves to the new MAC and
    // later requests go there.
    assert!(
        to_new >= 10,
        "old {to_old} new {to_new}: {}",
        sim.iface(0).stats()
    );
    let now = sim.now();
    assert_eq!(
        sim.iface(0).neighbors().lookup(peer, now),
        Lookup::Found(new_mac)
    );
}

/// Extension-header chains that loop (a header kind repeated), run past the packet,
/// or are hundreds long: dropped and counted, never a panic; a valid chain and an atomic
/// fragment (RFC 8021) reach UDP.
#[test]
fn hostile_header_chains_and_atomic_fragments() {
    let (mut sim, mut raw) = raw_setup(|_| {});
    let mut s = UdpSocket::new(UdpConfig::default());
    s.bind("[::]:9000".parse().unwrap()).unwrap();
    let h = sim.iface(0).sockets_mut().add_udp(s).unwrap();
    let src: Ipv6Addr = "2001:2::9".parse().unwrap();
    let udp = {
        let mut d = vec![0u8; 8 + 5];
        UdpRepr {
            src_port: 4000,
            dst_port: 9000,
        }
        .emit(
            &mut UdpPacket::new_unchecked(&mut d[..]),
            &IpAddr::V6(src),
            &ip6a(1),
            5,
            |p| p.copy_from_slice(b"hello"),
            ChecksumMode::Full,
        );
        d
    };
    let opts = |next: IpProtocol| {
        let mut b = vec![0u8; 8];
        ulnet_wire::ipv6ext::emit_padding_header(&mut b, next, 8);
        b
    };
    let frame =
        |first: IpProtocol, body: Vec<u8>| v6_frame(mac(1), header(src, ip6(1), first, 64), &body);
    // Valid: hop-by-hop, destination options, UDP.
    let mut good = opts(IpProtocol::Ipv6Opts);
    good.extend(opts(IpProtocol::Udp));
    good.extend(&udp);
    // Atomic fragment.
    let mut atomic = vec![0u8; 8];
    Ipv6FragRepr {
        next_header: IpProtocol::Udp,
        offset: 0,
        more_frags: false,
        ident: 1,
    }
    .emit(&mut atomic);
    atomic.extend(&udp);
    // Looping: destination options naming destination options, three times.
    let mut looping = Vec::new();
    for _ in 0..3 {
        looping.extend(opts(IpProtocol::Ipv6Opts));
    }
    looping.extend(&udp);
    // Hundreds long: 180 destination options headers (what a 1500-byte frame holds).
    let mut long = Vec::new();
    for _ in 0..180 {
        long.extend(opts(IpProtocol::Ipv6Opts));
    }
    // One header longer than the walk reads (1608 bytes declared).
    let mut huge = opts(IpProtocol::Udp);
    huge[1] = 200;
    // Overrunning: a header declaring 64 bytes in a 16-byte packet.
    let mut over = opts(IpProtocol::Udp);
    over[1] = 7;
    over.extend([0u8; 8]);
    inject(
        &mut raw,
        &[
            frame(IpProtocol::HopByHop, good),
            frame(IpProtocol::Ipv6Frag, atomic),
            frame(IpProtocol::Ipv6Opts, looping),
            frame(IpProtocol::Ipv6Opts, long),
            frame(IpProtocol::Ipv6Opts, over),
            frame(IpProtocol::HopByHop, huge),
        ],
    );
    sim.run_for(Duration::from_millis(10));
    let mut got = 0;
    let mut buf = [0u8; 64];
    while let Ok((n, _)) = sim
        .iface(0)
        .sockets_mut()
        .udp_mut(h)
        .unwrap()
        .recv_from(&mut buf)
    {
        assert_eq!(&buf[..n], b"hello");
        got += 1;
    }
    let s = sim.iface(0).stats().clone();
    assert_eq!(got, 2, "{s}");
    assert_eq!(s.ipv6_atomic_fragments, 1);
    assert_eq!(s.drops(DropReason::Ipv6BadExtHeader), 2, "{s}");
    assert_eq!(s.drops(DropReason::Ipv6Truncated), 1, "{s}");
    assert_eq!(s.drops(DropReason::Ipv6ExtChainTooLong), 1, "{s}");
}

/// RFC 5722 §4: overlapping IPv6 fragments drop the whole packet (and the fragments
/// already held), counted; memory stays within the reassembly bounds.
#[test]
fn overlapping_fragments_drop_the_packet() {
    let (mut sim, mut raw) = raw_setup(|_| {});
    let mut s = UdpSocket::new(UdpConfig::default());
    s.bind("[::]:9000".parse().unwrap()).unwrap();
    let h = sim.iface(0).sockets_mut().add_udp(s).unwrap();
    let src: Ipv6Addr = "2001:2::9".parse().unwrap();
    let payload = pattern(1, 3000);
    let mut udp = vec![0u8; 8 + payload.len()];
    UdpRepr {
        src_port: 4000,
        dst_port: 9000,
    }
    .emit(
        &mut UdpPacket::new_unchecked(&mut udp[..]),
        &IpAddr::V6(src),
        &ip6a(1),
        payload.len(),
        |p| p.copy_from_slice(&payload),
        ChecksumMode::Full,
    );
    let frag = |ident: u32, offset: usize, len: usize| {
        let end = (offset + len).min(udp.len());
        let mut b = vec![0u8; 8];
        Ipv6FragRepr {
            next_header: IpProtocol::Udp,
            offset: offset as u16,
            more_frags: end < udp.len(),
            ident,
        }
        .emit(&mut b);
        b.extend(&udp[offset..end]);
        v6_frame(mac(1), header(src, ip6(1), IpProtocol::Ipv6Frag, 64), &b)
    };
    // Packet 1: 0..1232, then 1224..2456 (overlaps by 8), then the rest: dropped.
    // Packet 2: clean, out of order: delivered.
    inject(
        &mut raw,
        &[
            frag(1, 0, 1232),
            frag(1, 1224, 1232),
            frag(1, 2456, 1232),
            frag(2, 2464, 1232),
            frag(2, 0, 1232),
            frag(2, 1232, 1232),
        ],
    );
    sim.run_for(Duration::from_millis(10));
    let mut buf = vec![0u8; 4000];
    let mut got = Vec::new();
    while let Ok((n, _)) = sim
        .iface(0)
        .sockets_mut()
        .udp_mut(h)
        .unwrap()
        .recv_from(&mut buf)
    {
        got.push(buf[..n].to_vec());
    }
    assert_eq!(got, vec![payload]);
    let s = sim.iface(0).stats().clone();
    assert_eq!(s.drops(DropReason::FragOverlap), 1, "{s}");
    // The fragment after the overlap started a new, incomplete packet: timed out later.
    sim.run_for(Duration::from_secs(31));
    assert_eq!(sim.iface(0).reassembly().buffered_len(), 0);
    assert_eq!(sim.iface(0).stats().drops(DropReason::FragTimeout), 1);
}

/// Node 0 takes what reached it, without transmitting.
fn rx0(sim: &mut Sim) {
    let now = sim.now();
    let n = &mut sim.nodes[0];
    while n.driver.receive(now, &mut n.iface).unwrap() > 0 {}
}

/// RFC 8201 §4 with RFC 5927 §4.1's validation: a Packet Too Big quoting one of our
/// segments (its 4-tuple, a sequence number in flight) lowers the path MTU, never
/// below 1280; one quoting a sequence number out of the window, or another 4-tuple,
/// changes nothing.
#[test]
fn packet_too_big_lowers_the_path_mtu_when_it_quotes_our_segment() {
    let (wire, mut eps) = Wire::hub(0x77, 3, LinkConfig::new());
    let mut raw = eps.pop().unwrap();
    let mut sim = Sim::new(wire);
    sim.family = common::Family::V6;
    for i in (1..=2u8).rev() {
        let mut c = config6(3 - i);
        c.limits.dad_transmits = 0;
        sim.add(c, Box::new(eps.remove(0)));
    }
    sim.iface(0)
        .set_tcp(Tcp::new(TcpConfig::default(), [1; 16]));
    sim.iface(1)
        .set_tcp(Tcp::new(TcpConfig::default(), [2; 16]));
    let (a, b) = (
        SocketAddr::new(ip6a(1), 40000),
        SocketAddr::new(ip6a(2), 80),
    );
    sim.iface(1).tcp_mut().unwrap().listen(b, 1).unwrap();
    let now = sim.now();
    let c = sim.iface(0).tcp_mut().unwrap().connect(now, a, b).unwrap();
    let end = sim.now() + Duration::from_secs(2);
    assert!(sim.run_until(end, |sim| {
        sim.iface(0).tcp().unwrap().state(c) == Ok(ulnet_stack::tcp::State::Established)
    }));
    // Data in flight: queue some and let it leave, but hold node 1's ACKs by not
    // stepping it (the PTB arrives while the segment is unacknowledged).
    let now = sim.now();
    sim.iface(0)
        .tcp_mut()
        .unwrap()
        .send(now, c, &pattern(1, 4000))
        .unwrap();
    let sent = |sim: &mut Sim| {
        let mut tx = Vec::new();
        let now = sim.now();
        let iface = &mut sim.nodes[0].iface;
        iface.egress(now, &mut |len: usize, fill: &mut dyn FnMut(&mut [u8])| {
            let mut b = vec![0u8; len];
            fill(&mut b);
            tx.push(b);
            true
        });
        tx
    };
    let segs = sent(&mut sim);
    let seg = segs
        .iter()
        .find(|f| f.len() > 1000)
        .expect("a full-sized segment")
        .clone();
    let quoted = &seg[14..14 + 1232];
    let mss = |sim: &Sim| sim.nodes[0].iface.tcp().unwrap().info(c).unwrap().snd_mss;
    let before = mss(&sim);
    let ptb = |mtu: u32, quote: &[u8]| {
        let p = Ipv6Packet::new_unchecked(quote);
        let mut h = header(p.src_addr(), p.dst_addr(), p.next_header(), p.hop_limit());
        h.payload_len = usize::from(p.payload_len());
        let r = Icmpv6Repr::PktTooBig {
            mtu,
            header: h,
            data: &quote[40..],
        };
        let router: Ipv6Addr = "2001:2::fe".parse().unwrap();
        icmp_frame(router, ip6(1), mac(1), 64, &r)
    };
    // A sequence number far outside the window: ignored.
    let mut bad = quoted.to_vec();
    bad[40 + 4] ^= 0x80;
    inject(&mut raw, &[ptb(1300, &bad)]);
    rx0(&mut sim);
    assert_eq!(mss(&sim), before);
    let s = sim.nodes[0].iface.tcp().unwrap().stats();
    assert_eq!(s.icmp_out_of_window, 1);
    // In the window: MTU 1300 → MSS 1240 (less options).
    inject(&mut raw, &[ptb(1300, quoted)]);
    rx0(&mut sim);
    assert_eq!(before - mss(&sim), 1440 - 1240);
    // Below the IPv6 minimum: clamped to 1280 (MSS 1220).
    inject(&mut raw, &[ptb(600, quoted)]);
    rx0(&mut sim);
    assert_eq!(before - mss(&sim), 1440 - 1220);
    assert_eq!(sim.nodes[0].iface.stats().icmp_errors_delivered, 2);
}

/// RFC 8200 §4: an unrecognised next header is answered with a Parameter Problem
/// (code 1, pointing at the field naming it); a UDP datagram to a closed port with a
/// port unreachable (RFC 4443 §3.1) quoting it; neither to a multicast destination.
#[test]
fn parameter_problem_and_port_unreachable() {
    let (mut sim, mut raw) = raw_setup(|_| {});
    let src: Ipv6Addr = "2001:2::9".parse().unwrap();
    let mut unknown = vec![0u8; 8];
    ulnet_wire::ipv6ext::emit_padding_header(&mut unknown, IpProtocol::Unknown(253), 8);
    let udp = {
        let mut d = vec![0u8; 12];
        UdpRepr {
            src_port: 4000,
            dst_port: 9999,
        }
        .emit(
            &mut UdpPacket::new_unchecked(&mut d[..]),
            &IpAddr::V6(src),
            &ip6a(1),
            4,
            |p| p.copy_from_slice(b"ping"),
            ChecksumMode::Full,
        );
        d
    };
    // The neighbour is known, so the answers need no resolution.
    sim.iface(0)
        .add_static_neighbor(IpAddr::V6(src), RAW_MAC)
        .unwrap();
    let all = ulnet_stack::iface::ALL_NODES;
    inject(
        &mut raw,
        &[
            v6_frame(
                mac(1),
                header(src, ip6(1), IpProtocol::Ipv6Opts, 64),
                &unknown,
            ),
            v6_frame(mac(1), header(src, ip6(1), IpProtocol::Udp, 64), &udp),
            v6_frame(
                ulnet_stack::iface::multicast_mac(all),
                header(src, all, IpProtocol::Udp, 64),
                &udp,
            ),
        ],
    );
    sim.run_for(Duration::from_millis(10));
    let out = sent_v6(&mut raw);
    assert_eq!(out.len(), 2, "{out:?}");
    let parse = |(h, b): &(Ipv6Repr, Vec<u8>)| {
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        let r = Icmpv6Repr::parse(&p, &h.src_addr, &h.dst_addr, ChecksumMode::Full).unwrap();
        format!("{r:?}")
    };
    let (pp, pu) = (parse(&out[0]), parse(&out[1]));
    assert!(
        pp.contains("ParamProblem")
            && pp.contains("UnrecognizedNextHeader")
            && pp.contains("pointer: 40"),
        "{pp}"
    );
    assert!(
        pu.contains("DstUnreachable") && pu.contains("PortUnreachable"),
        "{pu}"
    );
    let s = sim.iface(0).stats().clone();
    assert_eq!(
        (s.icmp_param_problems_sent, s.icmp_unreachables_sent),
        (1, 1),
        "{s}"
    );
}

/// RFC 4861 §7.3.1: TCP forward progress (our data acknowledged) confirms the
/// neighbour, so a sender trickling data for longer than the reachable time never has
/// to probe; the receiver, whose own data nobody acknowledges (it sends none), goes
/// through STALE, DELAY and PROBE and solicits again.
#[test]
fn tcp_forward_progress_confirms_the_neighbour() {
    let (wire, a, b) = Wire::pair(
        0x71,
        LinkConfig::new().delay(std::time::Duration::from_millis(5)),
        LinkConfig::new().delay(std::time::Duration::from_millis(5)),
    );
    let mut sim = Sim::new(wire);
    for (i, ep) in [(1u8, a), (2, b)] {
        let mut c = config6(i);
        c.limits.dad_transmits = 0;
        c.limits.neighbor_ttl = Duration::from_secs(1);
        c.limits.delay_first_probe = Duration::from_secs(1);
        sim.add(c, Box::new(ep));
    }
    sim.iface(0)
        .set_tcp(Tcp::new(TcpConfig::default(), [1; 16]));
    sim.iface(1)
        .set_tcp(Tcp::new(TcpConfig::default(), [2; 16]));
    let (from, to) = (SocketAddr::new(ip6a(1), 0), SocketAddr::new(ip6a(2), 80));
    let l = sim.iface(1).tcp_mut().unwrap().listen(to, 1).unwrap();
    let now = sim.now();
    let c = sim
        .iface(0)
        .tcp_mut()
        .unwrap()
        .connect(now, from, to)
        .unwrap();
    let mut server = None;
    let mut got = 0;
    let mut buf = [0u8; 4096];
    for _ in 0..40 {
        let now = sim.now();
        if sim.iface(0).tcp().unwrap().state(c) == Ok(ulnet_stack::tcp::State::Established) {
            sim.iface(0)
                .tcp_mut()
                .unwrap()
                .send(now, c, &[7u8; 100])
                .unwrap();
        }
        sim.run_for(Duration::from_millis(250));
        let now = sim.now();
        let tcp = sim.iface(1).tcp_mut().unwrap();
        if server.is_none() {
            server = tcp.accept(now, l).unwrap();
        }
        if let Some(s) = server {
            while let Ok(n) = tcp.recv(now, s, &mut buf) {
                if n == 0 {
                    break;
                }
                got += n;
            }
        }
    }
    assert!(got >= 3800, "{got} bytes");
    let (sa, sb) = (sim.iface(0).stats().clone(), sim.iface(1).stats().clone());
    // The sender resolved once and was kept REACHABLE by the ACKs of its data.
    assert_eq!(sa.nd_solicits_sent, 1, "{sa}");
    // The receiver learned the sender from its solicitation, then had to probe.
    assert!(sb.nd_solicits_sent >= 2, "{sb}");
}

/// RFC 4861 §6.3.4: a Router Advertisement's non-zero Cur Hop Limit becomes the hop
/// limit of the packets we originate; zero ("unspecified by this router") leaves it.
#[test]
fn router_advertisement_cur_hop_limit_sets_our_hop_limit() {
    let (mut sim, mut raw) = raw_setup(|_| {});
    let all = ulnet_stack::iface::ALL_NODES;
    let all_mac = ulnet_stack::iface::multicast_mac(all);
    // Pings from the raw host to node 0's global address; the hop limits of the replies.
    let mut seq = 0;
    let mut reply_hop_limits = |sim: &mut Sim, raw: &mut Endpoint| -> Vec<u8> {
        seq += 1;
        let req = Icmpv6Repr::EchoRequest {
            ident: 7,
            seq_no: seq,
            data: b"hop",
        };
        inject(raw, &[icmp_frame(raw_ll(), ip6(1), mac(1), 64, &req)]);
        sim.run_for(Duration::from_millis(10));
        sent_v6(raw)
            .into_iter()
            .filter(|(h, p)| h.next_header == IpProtocol::Icmpv6 && p.first() == Some(&129))
            .map(|(h, _)| h.hop_limit)
            .collect()
    };
    // First an RA with Cur Hop Limit 0: it teaches the raw host's MAC (so replies go
    // out at once) and leaves the configured hop limit.
    let mut ob = [0u8; 8];
    inject(
        &mut raw,
        &[icmp_frame(
            raw_ll(),
            all,
            all_mac,
            255,
            &ra_hop_limit(0, &mut ob),
        )],
    );
    sim.run_for(Duration::from_millis(10));
    assert_eq!(
        reply_hop_limits(&mut sim, &mut raw),
        vec![64],
        "the configured ttl"
    );
    let mut ob = [0u8; 8];
    inject(
        &mut raw,
        &[icmp_frame(
            raw_ll(),
            all,
            all_mac,
            255,
            &ra_hop_limit(37, &mut ob),
        )],
    );
    sim.run_for(Duration::from_millis(10));
    assert_eq!(reply_hop_limits(&mut sim, &mut raw), vec![37]);
    let mut ob = [0u8; 8];
    inject(
        &mut raw,
        &[icmp_frame(
            raw_ll(),
            all,
            all_mac,
            255,
            &ra_hop_limit(0, &mut ob),
        )],
    );
    sim.run_for(Duration::from_millis(10));
    assert_eq!(
        reply_hop_limits(&mut sim, &mut raw),
        vec![37],
        "zero: unchanged"
    );
    // A forwarded RA (hop limit 254) changes nothing (§6.1.2).
    let mut ob = [0u8; 8];
    inject(
        &mut raw,
        &[icmp_frame(
            raw_ll(),
            all,
            all_mac,
            254,
            &ra_hop_limit(9, &mut ob),
        )],
    );
    sim.run_for(Duration::from_millis(10));
    assert_eq!(reply_hop_limits(&mut sim, &mut raw), vec![37]);
}

/// A Router Advertisement with Cur Hop Limit `cur`, the raw host's MAC as its source
/// link-layer option (written into `ob`), a router lifetime of 1800 s.
fn ra_hop_limit(cur: u8, ob: &mut [u8; 8]) -> Icmpv6Repr<'_> {
    let options = one_option(ob, &NdiscOption::SourceLinkLayer(RAW_MAC));
    Icmpv6Repr::Ndisc(NdiscRepr::RouterAdvert {
        hop_limit: cur,
        flags: 0,
        router_lifetime: 1800,
        reachable_time: 0,
        retrans_time: 0,
        options,
    })
}

/// RFC 4861 §6.3.4: a Router Advertisement's MTU option (1400 here, below the link's
/// 1500) is the IPv6 link MTU, and new TCP connections over IPv6 take their MSS from it
/// (1400 - 60 = 1340), as from a path MTU; without it the SYN offered 1440 and every
/// full-sized segment would have been fragmented by its sender.
#[test]
fn router_advertisement_mtu_sets_the_mss_of_new_connections() {
    let (mut sim, mut raw) = raw_setup(|_| {});
    sim.iface(0)
        .set_tcp(Tcp::new(TcpConfig::default(), [1; 16]));
    let peer: Ipv6Addr = "2001:2::9".parse().unwrap();
    sim.iface(0)
        .add_static_neighbor(IpAddr::V6(peer), RAW_MAC)
        .unwrap();
    let syn_mss = |sim: &mut Sim, raw: &mut Endpoint, port: u16| -> u16 {
        let now = sim.now();
        let a = SocketAddr::new(ip6a(1), port);
        sim.iface(0)
            .tcp_mut()
            .unwrap()
            .connect(now, a, SocketAddr::new(IpAddr::V6(peer), 80))
            .unwrap();
        sim.run_for(Duration::from_millis(10));
        let syn = sent_v6(raw)
            .into_iter()
            .find(|(h, p)| h.next_header == IpProtocol::Tcp && p.len() >= 20 && p[13] & 0x02 != 0)
            .expect("a SYN");
        let tcp = syn.1;
        let opts = &tcp[20..usize::from(tcp[12] >> 4) * 4];
        let mut i = 0;
        while i + 1 < opts.len() {
            match opts[i] {
                0 => break,
                1 => i += 1,
                2 => return u16::from_be_bytes([opts[i + 2], opts[i + 3]]),
                _ => i += usize::from(opts[i + 1]).max(2),
            }
        }
        panic!("no MSS option in {tcp:?}");
    };
    let _ = collect(&mut raw);
    assert_eq!(syn_mss(&mut sim, &mut raw, 40000), 1440);
    let mut ob = [0u8; 8];
    let options = one_option(&mut ob, &NdiscOption::Mtu(1400));
    let all = ulnet_stack::iface::ALL_NODES;
    let all_mac = ulnet_stack::iface::multicast_mac(all);
    inject(
        &mut raw,
        &[icmp_frame(raw_ll(), all, all_mac, 255, &ra(1800, options))],
    );
    sim.run_for(Duration::from_millis(10));
    assert_eq!(sim.iface(0).ipv6_mtu(), 1400);
    let _ = collect(&mut raw);
    assert_eq!(syn_mss(&mut sim, &mut raw, 40001), 1340);
}

/// RFC 4861 §6.3.7: once its link-local address is usable, a host sends Router
/// Solicitations to all-routers (from that address, with its link-layer address, hop
/// limit 255), at most three, four seconds apart, and stops when an advertisement
/// arrives; with `accept_ra` off it sends none.
#[test]
fn router_solicitations_at_start_up() {
    let rs_sent = |raw: &mut Endpoint| -> Vec<Ipv6Repr> {
        sent_v6_all(raw)
            .into_iter()
            .filter(|(h, b)| is_rs(h, b))
            .map(|(h, _)| h)
            .collect()
    };
    // No router answers: three solicitations, then silence.
    let (mut sim, mut raw) = raw_setup(|_| {});
    sim.run_for(Duration::from_millis(100));
    let first = rs_sent(&mut raw);
    assert_eq!(first.len(), 1, "{first:?}");
    let all_routers: Ipv6Addr = "ff02::2".parse().unwrap();
    assert_eq!(first[0].dst_addr, all_routers);
    assert!(first[0].src_addr.is_unicast_link_local());
    assert_eq!(first[0].hop_limit, 255);
    sim.run_for(Duration::from_secs(3));
    assert!(rs_sent(&mut raw).is_empty(), "the next one waits 4 s");
    sim.run_for(Duration::from_secs(30));
    assert_eq!(rs_sent(&mut raw).len(), 2, "two more, then no more");
    assert_eq!(sim.iface(0).stats().nd_router_solicits_sent, 3);

    // A router answers the first: no second solicitation.
    let (mut sim, mut raw) = raw_setup(|_| {});
    sim.run_for(Duration::from_millis(100));
    assert_eq!(rs_sent(&mut raw).len(), 1);
    let mut ob = [0u8; 8];
    let options = one_option(&mut ob, &NdiscOption::SourceLinkLayer(RAW_MAC));
    let all = ulnet_stack::iface::ALL_NODES;
    let all_mac = ulnet_stack::iface::multicast_mac(all);
    inject(
        &mut raw,
        &[icmp_frame(raw_ll(), all, all_mac, 255, &ra(1800, options))],
    );
    sim.run_for(Duration::from_secs(30));
    assert!(rs_sent(&mut raw).is_empty());
    assert_eq!(sim.iface(0).ipv6_router(), Some(raw_ll()));

    // Not accepting advertisements: not soliciting them either.
    let (mut sim, mut raw) = raw_setup(|c| c.accept_ra = false);
    sim.run_for(Duration::from_secs(30));
    assert!(rs_sent(&mut raw).is_empty());
}
