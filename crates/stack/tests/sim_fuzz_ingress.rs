//! Hostile input: random and mutated frames fed to `Interface::ingress` (with egress
//! runs and time passing in between) never panic, every frame sent in answer is a
//! well-formed Ethernet frame, and every bounded structure stays within its limit.

mod common;

use common::{eth_frame, ip, ipa, mac, sa, udp_datagram, udp_fragments};
use proptest::prelude::*;
use ulnet_stack::iface::{Interface, Limits, TxSink};
use ulnet_stack::socket::{IcmpSocket, UdpConfig, UdpSocket};
use ulnet_stack::tcp::{Tcp, TcpConfig};
use ulnet_stack::time::{Duration, Instant};
use ulnet_wire::{
    ArpOperation, ArpPacket, ArpRepr, ChecksumMode, EtherType, EthernetAddress, Icmpv4Packet,
    Icmpv4Repr, IpProtocol, Ipv4Repr, SeqNumber, TcpFlags, TcpOptions, TcpPacket, TcpRepr,
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
    let mut i = Interface::new(common::config(1).gateway(ipa(254)).limits(LIMITS)).unwrap();
    let mut u = UdpSocket::new(UdpConfig {
        rx_datagram_count: 4,
        rx_len: 4096,
        tx_datagram_count: 4,
        tx_len: 4096,
    });
    u.bind(sa(1, 7)).unwrap();
    i.sockets_mut().add_udp(u).unwrap();
    i.sockets_mut()
        .add_icmp(IcmpSocket::new(1, 4, 4096))
        .unwrap();
    let mut tcp = Tcp::new(TcpConfig::default(), [7; 16]);
    tcp.listen(sa(1, 80), 4).unwrap();
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
    v
}

#[derive(Debug, Clone)]
enum Input {
    Random(Vec<u8>),
    Mutated {
        base: usize,
        flips: Vec<(usize, u8)>,
        cut: Option<usize>,
    },
    Pass(u16),
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..1600).prop_map(Input::Random),
        (
            any::<usize>(),
            prop::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            prop::option::of(any::<usize>())
        )
            .prop_map(|(base, flips, cut)| Input::Mutated { base, flips, cut }),
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
                Input::Mutated { base, flips, cut } => {
                    let mut f = corpus[base % corpus.len()].clone();
                    for (at, x) in flips {
                        let at = at % f.len();
                        f[at] ^= x;
                    }
                    if let Some(c) = cut {
                        f.truncate(c % (f.len() + 1));
                    }
                    i.ingress(now, &f, &mut sink);
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
    for f in corpus() {
        i.ingress(Instant::from_secs(1), &f, &mut sink);
    }
    let s = i.stats();
    use ulnet_stack::iface::DropReason;
    // The closed-port datagram is the only frame refused (the sink refusing a reply
    // aside).
    let refused = s.total_drops() - s.drops(DropReason::TxFull);
    assert_eq!((refused, s.drops(DropReason::UdpNoSocket)), (1, 1), "{s}");
    assert_eq!(s.udp_delivered, 2);
    assert_eq!(s.frag_reassembled, 1);
    assert_eq!(s.tcp_delivered, 1);
    assert!(s.icmp_unreachables_sent + s.icmp_echo_replies_sent >= 1);
}
