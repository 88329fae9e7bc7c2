//! Hostile input: random and mutated frames fed to `Interface::ingress` (the mutated
//! ones cut into buffers for `Interface::ingress_parts`, as a multi-buffer channel hands
//! a frame over), with egress runs and time passing in between, never panic, every frame
//! sent in answer is a well-formed Ethernet frame, and every bounded structure stays
//! within its limit.
//! The interface is dual-stack: the corpus holds IPv4 and IPv6 frames (ND, RA with
//! SLAAC, extension headers, fragments), so the IPv6 ingress path is fuzzed too.

mod common;

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use common::{eth_frame, ip, ip6, ip6a, ipa, mac, sa, udp_datagram, udp_fragments};
use proptest::prelude::*;
use ulnet_stack::iface::{
    link_local_from_mac, multicast_mac, solicited_node, AddrOrigin, Interface, IpCidr, Limits,
    TxSink, ALL_NODES,
};
use ulnet_stack::socket::{IcmpSocket, UdpConfig, UdpSocket};
use ulnet_stack::tcp::{Tcp, TcpConfig};
use ulnet_stack::time::{Duration, Instant};
use ulnet_wire::{
    ArpOperation, ArpPacket, ArpRepr, ChecksumMode, EtherType, EthernetAddress, Icmpv4Packet,
    Icmpv4Repr, Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv4Repr, Ipv6FragRepr, Ipv6Packet, Ipv6Repr,
    NaFlags, NdiscOption, NdiscOptions, NdiscRepr, PrefixInfo, SeqNumber, TcpFlags, TcpOptions,
    TcpPacket, TcpRepr,
};

const LIMITS: Limits = Limits {
    route_count: 4,
    neighbor_count: 8,
    neighbor_ttl: Duration::from_secs(30),
    arp_retry_interval: Duration::from_secs(1),
    arp_max_requests: 3,
    pending_per_neighbor: 2,
    pending_count: 6,
    pending_len: 16 * 1024,
    announce_count: 2,
    announce_interval: Duration::from_secs(2),
    frag_datagram_count: 3,
    frag_buffer_len: 20_000,
    frag_per_datagram: 8,
    frag_timeout: Duration::from_secs(5),
    icmp_error_rate: 100,
    icmp_error_burst: 10,
    udp_socket_count: 4,
    icmp_socket_count: 2,
    dad_transmits: 1,
    dad_retrans_interval: Duration::from_secs(1),
    delay_first_probe: Duration::from_secs(5),
    slaac_address_count: 2,
    ra_prefix_count: 1,
};

/// Accepts every frame and checks it parses as Ethernet.
struct CheckingSink {
    frames: usize,
}

impl TxSink for CheckingSink {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        let mut buf = vec![0xa5u8; len];
        fill(&mut buf);
        assert!(ulnet_wire::EthernetFrame::new_checked(&buf[..]).is_ok());
        assert_eq!(&buf[6..12], &mac(1).0, "we only send from our own MAC");
        self.frames += 1;
        // Refuse some to exercise the ring-full path.
        !self.frames.is_multiple_of(7)
    }
}

fn iface() -> Interface {
    let config = common::config(1)
        .address(IpCidr::new(ip6a(1), 64).unwrap())
        .gateway(ipa(254))
        .slaac(true)
        .limits(LIMITS);
    let mut i = Interface::new(config).unwrap();
    let mut u = UdpSocket::new(UdpConfig {
        rx_datagram_count: 4,
        rx_len: 4096,
        tx_datagram_count: 4,
        tx_len: 4096,
    });
    u.bind(sa(1, 7)).unwrap();
    i.sockets_mut().add_udp(u).unwrap();
    let mut u6 = UdpSocket::new(UdpConfig {
        rx_datagram_count: 4,
        rx_len: 4096,
        tx_datagram_count: 4,
        tx_len: 4096,
    });
    u6.bind(SocketAddr::new(ip6a(1), 7)).unwrap();
    i.sockets_mut().add_udp(u6).unwrap();
    i.sockets_mut()
        .add_icmp(IcmpSocket::new(1, 4, 4096))
        .unwrap();
    let mut tcp = Tcp::new(TcpConfig::default(), [7; 16]);
    tcp.listen(sa(1, 80), 4).unwrap();
    tcp.listen(SocketAddr::new(ip6a(1), 80), 4).unwrap();
    i.set_tcp(tcp);
    i
}

/// Well-formed frames of every kind the interface handles.
fn corpus() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let arp = |op, tpa| {
        let r = ArpRepr {
            operation: op,
            source_hardware_addr: mac(2),
            source_protocol_addr: ip(2),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: tpa,
        };
        let mut p = [0u8; 28];
        r.emit(&mut ArpPacket::new_unchecked(&mut p[..]));
        eth_frame(mac(2), EthernetAddress::BROADCAST, EtherType::Arp, &p)
    };
    v.push(arp(ArpOperation::Request, ip(1)));
    v.push(arp(ArpOperation::Reply, ip(1)));
    let ipv4 = |proto, payload: &[u8]| {
        let repr = Ipv4Repr::new(ip(2), ip(1), proto, payload.len(), 64);
        eth_frame(
            mac(2),
            mac(1),
            EtherType::Ipv4,
            &common::ipv4_packet(repr, payload),
        )
    };
    v.push(ipv4(
        IpProtocol::Udp,
        &udp_datagram(sa(2, 5), sa(1, 7), b"hello"),
    ));
    v.push(ipv4(
        IpProtocol::Udp,
        &udp_datagram(sa(2, 5), sa(1, 8), b"closed"),
    ));
    let echo = Icmpv4Repr::EchoRequest {
        ident: 1,
        seq_no: 2,
        data: b"ping",
    };
    let mut icmp = vec![0u8; echo.buffer_len()];
    echo.emit(
        &mut Icmpv4Packet::new_unchecked(&mut icmp[..]),
        ChecksumMode::Full,
    );
    v.push(ipv4(IpProtocol::Icmp, &icmp));
    icmp[0] = 0; // an echo reply
    Icmpv4Packet::new_unchecked(&mut icmp[..]).fill_checksum();
    v.push(ipv4(IpProtocol::Icmp, &icmp));
    let syn = TcpRepr {
        src_port: 40000,
        dst_port: 80,
        seq: SeqNumber(1000),
        ack: SeqNumber(0),
        flags: TcpFlags::SYN,
        window: 65535,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1460),
            ..TcpOptions::default()
        },
        payload: &[],
        payload_rest: &[],
    };
    let mut tcp = vec![0u8; syn.buffer_len()];
    syn.emit(
        &mut TcpPacket::new_unchecked(&mut tcp[..]),
        &ipa(2),
        &ipa(1),
        ChecksumMode::Full,
    );
    v.push(ipv4(IpProtocol::Tcp, &tcp));
    let big = udp_datagram(sa(2, 5), sa(1, 7), &[3u8; 2000]);
    v.extend(udp_fragments(2, 1, 9, &big, 512));
    v.extend(corpus6());
    v
}

/// IPv6 frames from node 2 (link-local and 2001:2::2) to node 1.
fn corpus6() -> Vec<Vec<u8>> {
    let ll2 = link_local_from_mac(mac(2));
    let v6 = |src: Ipv6Addr, dst: Ipv6Addr, next, hop_limit, payload: &[u8]| {
        let h = Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: next,
            payload_len: payload.len(),
            hop_limit,
            traffic_class: 0,
            flow_label: 0,
        };
        let mut p = vec![0u8; 40 + payload.len()];
        h.emit(&mut Ipv6Packet::new_unchecked(&mut p[..]));
        p[40..].copy_from_slice(payload);
        let dst_mac = if dst.is_multicast() {
            multicast_mac(dst)
        } else {
            mac(1)
        };
        eth_frame(mac(2), dst_mac, EtherType::Ipv6, &p)
    };
    let icmp = |src: Ipv6Addr, dst: Ipv6Addr, r: Icmpv6Repr<'_>| {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(
            &mut Icmpv6Packet::new_unchecked(&mut b[..]),
            &src,
            &dst,
            ChecksumMode::Full,
        );
        v6(src, dst, IpProtocol::Icmpv6, 255, &b)
    };
    let mut ob = vec![0u8; 8 + 8 + 32];
    NdiscOption::SourceLinkLayer(mac(2)).emit(&mut ob[..8]);
    NdiscOption::Mtu(1400).emit(&mut ob[8..16]);
    NdiscOption::PrefixInfo(PrefixInfo {
        prefix_len: 64,
        on_link: true,
        autonomous: true,
        valid_lifetime: 600,
        preferred_lifetime: 300,
        prefix: "2001:2:0:7::".parse().unwrap(),
    })
    .emit(&mut ob[16..]);
    let slla = NdiscOptions::parse(&ob[..8]).unwrap();
    let mut tb = [0u8; 8];
    NdiscOption::TargetLinkLayer(mac(2)).emit(&mut tb);
    let tlla = NdiscOptions::parse(&tb).unwrap();
    let mut v = vec![
        icmp(
            ll2,
            solicited_node(ip6(1)),
            Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
                target: ip6(1),
                options: slla,
            }),
        ),
        icmp(
            ll2,
            ALL_NODES,
            Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
                flags: NaFlags {
                    router: true,
                    solicited: false,
                    override_: true,
                },
                target: ll2,
                options: tlla,
            }),
        ),
        icmp(
            ll2,
            ALL_NODES,
            Icmpv6Repr::Ndisc(NdiscRepr::RouterAdvert {
                hop_limit: 64,
                flags: 0,
                router_lifetime: 1800,
                reachable_time: 0,
                retrans_time: 0,
                options: NdiscOptions::parse(&ob).unwrap(),
            }),
        ),
        icmp(
            ll2,
            link_local_from_mac(mac(1)),
            Icmpv6Repr::EchoRequest {
                ident: 3,
                seq_no: 4,
                data: b"ping6",
            },
        ),
    ];
    let (a2, a1) = (ip6a(2), ip6a(1));
    let udp = udp_datagram(SocketAddr::new(a2, 5), SocketAddr::new(a1, 7), b"hello6");
    // Behind a hop-by-hop header.
    let mut hbh = vec![0u8; 8];
    ulnet_wire::ipv6ext::emit_padding_header(&mut hbh, IpProtocol::Udp, 8);
    hbh.extend(&udp);
    v.push(v6(ip6(2), ip6(1), IpProtocol::HopByHop, 64, &hbh));
    let syn = TcpRepr {
        src_port: 40001,
        dst_port: 80,
        seq: SeqNumber(7),
        ack: SeqNumber(0),
        flags: TcpFlags::SYN,
        window: 65535,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1440),
            ..TcpOptions::default()
        },
        payload: &[],
        payload_rest: &[],
    };
    let mut tcp = vec![0u8; syn.buffer_len()];
    syn.emit(
        &mut TcpPacket::new_unchecked(&mut tcp[..]),
        &a2,
        &a1,
        ChecksumMode::Full,
    );
    v.push(v6(ip6(2), ip6(1), IpProtocol::Tcp, 64, &tcp));
    // A UDP datagram in two fragments.
    let big = udp_datagram(SocketAddr::new(a2, 5), SocketAddr::new(a1, 7), &[6u8; 1500]);
    for (off, more) in [(0usize, true), (1024, false)] {
        let end = if more { 1024 } else { big.len() };
        let mut b = vec![0u8; 8];
        Ipv6FragRepr {
            next_header: IpProtocol::Udp,
            offset: off as u16,
            more_frags: more,
            ident: 0x66,
        }
        .emit(&mut b);
        b.extend(&big[off..end]);
        v.push(v6(ip6(2), ip6(1), IpProtocol::Ipv6Frag, 64, &b));
    }
    let _ = IpAddr::V6(ll2);
    v
}

#[derive(Debug, Clone)]
enum Input {
    Random(Vec<u8>),
    Mutated {
        base: usize,
        flips: Vec<(usize, u8)>,
        cut: Option<usize>,
        /// Where the frame is cut into buffers for `Interface::ingress_parts`.
        split: Vec<usize>,
    },
    Pass(u16),
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..1600).prop_map(Input::Random),
        (
            any::<usize>(),
            prop::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            prop::option::of(any::<usize>()),
            prop::collection::vec(any::<usize>(), 0..4),
        )
            .prop_map(|(base, flips, cut, split)| Input::Mutated {
                base,
                flips,
                cut,
                split
            }),
        any::<u16>().prop_map(Input::Pass),
    ]
}

fn check_bounds(i: &Interface) {
    let r = i.reassembly();
    assert!(r.datagram_count() <= LIMITS.frag_datagram_count);
    assert!(r.buffered_len() <= LIMITS.frag_buffer_len);
    let (count, len) = i.pending();
    assert!(count <= LIMITS.pending_count && len <= LIMITS.pending_len);
    assert!(i.neighbors().len() <= LIMITS.neighbor_count);
    let slaac = i
        .ipv6_addresses()
        .filter(|a| a.origin == AddrOrigin::Slaac)
        .count();
    assert!(slaac <= LIMITS.slaac_address_count);
    assert!(i.ipv6_mtu() >= 1280 && i.ipv6_mtu() <= 1500);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn ingress_never_panics_and_stays_bounded(inputs in prop::collection::vec(input(), 1..64)) {
        let corpus = corpus();
        let mut i = iface();
        let mut sink = CheckingSink { frames: 0 };
        let mut now = Instant::from_secs(1);
        for inp in inputs {
            match inp {
                Input::Random(bytes) => i.ingress(now, &bytes, &mut sink),
                Input::Mutated { base, flips, cut, split } => {
                    let mut f = corpus[base % corpus.len()].clone();
                    for (at, x) in flips {
                        let at = at % f.len();
                        f[at] ^= x;
                    }
                    if let Some(c) = cut {
                        f.truncate(c % (f.len() + 1));
                    }
                    // In buffers, as a multi-buffer channel hands a frame over.
                    let mut cuts: Vec<usize> = split.iter().map(|c| c % (f.len() + 1)).collect();
                    cuts.sort_unstable();
                    let mut pieces = Vec::new();
                    let mut at = 0;
                    for c in cuts {
                        pieces.push(&f[at..c]);
                        at = c;
                    }
                    pieces.push(&f[at..]);
                    i.ingress_parts(now, pieces[0], &pieces[1..], &mut sink);
                }
                Input::Pass(ms) => {
                    now += Duration::from_millis(u64::from(ms % 4000));
                    i.egress(now, &mut sink);
                }
            }
            check_bounds(&i);
        }
        // Long after, everything timed out and memory is back to idle.
        // Drive the timers as a runtime would, by poll_at.
        let end = now + Duration::from_secs(120);
        for _ in 0..1000 {
            match i.poll_at() {
                Some(t) if t <= end => {
                    now = now.max(t);
                    i.egress(now, &mut sink);
                }
                _ => break,
            }
        }
        prop_assert_eq!(i.reassembly().buffered_len(), 0);
        prop_assert_eq!(i.pending(), (0, 0));
    }
}

#[test]
fn corpus_frames_are_accepted() {
    // The mutation base must be valid, or the property above tests only parsers.
    let mut i = iface();
    let mut sink = CheckingSink { frames: 0 };
    // Past DAD for the IPv6 addresses.
    i.egress(Instant::ZERO, &mut sink);
    i.egress(Instant::from_secs(1), &mut sink);
    assert!(i
        .ipv6_addresses()
        .all(|a| a.state == ulnet_stack::iface::AddrState::Preferred));
    for f in corpus() {
        i.ingress(Instant::from_secs(1), &f, &mut sink);
    }
    let s = i.stats();
    use ulnet_stack::iface::DropReason;
    // The closed-port datagram is the only frame refused (the sink refusing a reply
    // aside).
    let refused = s.total_drops() - s.drops(DropReason::TxFull);
    assert_eq!((refused, s.drops(DropReason::UdpNoSocket)), (1, 1), "{s}");
    assert_eq!(s.udp_delivered, 4);
    assert_eq!(s.frag_reassembled, 2);
    assert_eq!(s.tcp_delivered, 2);
    assert_eq!(
        (
            s.nd_solicits_received,
            s.nd_adverts_received,
            s.nd_router_adverts_received
        ),
        (1, 1, 1)
    );
    assert_eq!(i.ipv6_router(), Some(link_local_from_mac(mac(2))));
    assert!(s.icmp_unreachables_sent + s.icmp_echo_replies_sent >= 1);
}
