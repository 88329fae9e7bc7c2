//! Property tests: random and mutated bytes never make a parser or the pretty-printer
//! panic, and every getter is safe once `check_len` has passed.

mod common;

use core::fmt::Write as _;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use common::ipv4_frame;
use proptest::prelude::*;
use ulnet_wire::*;

const V4: (IpAddr, IpAddr) = (
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
);
const V6: (IpAddr, IpAddr) = (
    IpAddr::V6(Ipv6Addr::LOCALHOST),
    IpAddr::V6(Ipv6Addr::LOCALHOST),
);

/// Runs every parser and every getter over `data`.
fn exercise(data: &[u8]) {
    if let Ok(f) = EthernetFrame::new_checked(data) {
        let _ = (f.src_addr(), f.dst_addr(), f.ethertype(), f.payload().len());
        let _ = EthernetRepr::parse(&f);
    }
    if let Ok(p) = ArpPacket::new_checked(data) {
        let _ = (p.hardware_type(), p.protocol_type(), p.operation());
        let _ = (p.source_hardware_addr(), p.source_protocol_addr());
        let _ = (p.target_hardware_addr(), p.target_protocol_addr());
        let _ = ArpRepr::parse(&p);
    }
    if let Ok(p) = Ipv4Packet::new_checked(data) {
        let _ = (
            p.version(),
            p.header_len(),
            p.dscp(),
            p.ecn(),
            p.total_len(),
            p.ident(),
        );
        let _ = (
            p.dont_frag(),
            p.more_frags(),
            p.frag_offset(),
            p.ttl(),
            p.protocol(),
        );
        let _ = (
            p.src_addr(),
            p.dst_addr(),
            p.options(),
            p.payload(),
            p.verify_checksum(),
        );
        for mode in [ChecksumMode::Full, ChecksumMode::Offload] {
            let _ = Ipv4Repr::parse(&p, mode);
        }
    }
    if let Ok(p) = Ipv6Packet::new_checked(data) {
        let _ = (
            p.traffic_class(),
            p.flow_label(),
            p.next_header(),
            p.hop_limit(),
        );
        let _ = (p.src_addr(), p.dst_addr(), p.payload());
        let _ = Ipv6Repr::parse(&p);
        if let Ok(chain) = ipv6ext::walk(p.next_header(), p.payload()) {
            assert!(chain.header_len <= p.payload().len());
            assert!(chain.count <= ipv6ext::MAX_EXT_HEADERS);
        }
    }
    // The chain walk, the ND options and every ICMPv6 parser over raw bytes.
    for first in [0u8, 43, 44, 60] {
        let _ = ipv6ext::walk(first.into(), data);
    }
    let _ = Ipv6FragRepr::parse(data);
    if let Ok(o) = NdiscOptions::parse(data) {
        assert!(o.iter().count() <= data.len() / 8);
        let _ = (o.source_lladdr(), o.mtu(), o.prefixes().count());
    }
    for t in 133..=137 {
        let _ = NdiscRepr::parse(t, data);
    }
    if let Ok(p) = Icmpv6Packet::new_checked(data) {
        let _ = (
            p.msg_type(),
            p.msg_code(),
            p.echo_ident(),
            p.echo_seq_no(),
            p.mtu(),
        );
        let (IpAddr::V6(s), IpAddr::V6(d)) = V6 else {
            unreachable!()
        };
        let _ = p.verify_checksum(&s, &d);
        for mode in [ChecksumMode::Full, ChecksumMode::Offload] {
            if let Ok(r) = Icmpv6Repr::parse(&p, &s, &d, mode) {
                let _ = r.quote();
                let _ = r.to_string();
            }
        }
    }
    if let Ok(p) = Icmpv4Packet::new_checked(data) {
        let _ = (
            p.msg_type(),
            p.msg_code(),
            p.echo_ident(),
            p.echo_seq_no(),
            p.next_hop_mtu(),
        );
        let _ = (p.payload(), p.verify_checksum());
        for mode in [ChecksumMode::Full, ChecksumMode::Offload] {
            if let Ok(r) = Icmpv4Repr::parse(&p, mode) {
                let _ = r.quote();
            }
        }
        let _ = IcmpQuote::from_payload(p.payload());
    }
    let _ = IcmpQuote::from_payload(data);
    for (src, dst) in [V4, V6] {
        if let Ok(p) = UdpPacket::new_checked(data) {
            let _ = (p.src_port(), p.dst_port(), p.len(), p.payload());
            let _ = p.verify_checksum(&src, &dst);
            let _ = UdpRepr::parse(&p, &src, &dst, ChecksumMode::Full);
            let _ = UdpRepr::parse(&p, &src, &dst, ChecksumMode::Offload);
        }
        if let Ok(p) = TcpPacket::new_checked(data) {
            let _ = (
                p.seq_number(),
                p.ack_number(),
                p.flags(),
                p.window_len(),
                p.urgent_at(),
            );
            let _ = (
                p.options(),
                p.payload(),
                p.segment_len(),
                p.verify_checksum(&src, &dst),
            );
            let _ = p.options_iter().count();
            let _ = TcpRepr::parse(&p, &src, &dst, ChecksumMode::Full);
            let _ = TcpRepr::parse(&p, &src, &dst, ChecksumMode::Offload);
        }
    }
    let _ = TcpOptions::parse(data);
    let mut s = String::new();
    write!(s, "{}", pretty_print(data)).unwrap();
    write!(s, "{}", pretty_print_ip(data)).unwrap();
    assert!(!s.is_empty());
}

/// A valid Ethernet/IPv4/TCP frame with options, to mutate.
fn seed_frame() -> Vec<u8> {
    let (src, dst) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
    let mut options = TcpOptions::none();
    options.mss = Some(1460);
    options.window_scale = Some(7);
    options.timestamp = Some(TcpTimestamp { tsval: 1, tsecr: 2 });
    options.sack_blocks.push((SeqNumber(5), SeqNumber(9)));
    let tcp = TcpRepr {
        src_port: 1,
        dst_port: 2,
        seq: SeqNumber(3),
        ack: SeqNumber(4),
        flags: TcpFlags::ACK | TcpFlags::SYN,
        window: 100,
        urgent: 0,
        options,
        payload: b"payload",
        payload_rest: &[],
    };
    let mut seg = vec![0u8; tcp.buffer_len()];
    tcp.emit(
        &mut TcpPacket::new_unchecked(&mut seg[..]),
        &src.into(),
        &dst.into(),
        ChecksumMode::Full,
    );
    ipv4_frame(
        Ipv4Repr::new(src, dst, IpProtocol::Tcp, seg.len(), 64),
        &seg,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Extension-header chains of random kinds, lengths and counts (hundreds of headers
    /// included): the walk ends within its bounds and never panics.
    #[test]
    fn random_chains(kinds in proptest::collection::vec((prop_oneof![Just(0u8), Just(43), Just(44), Just(60), any::<u8>()], 0..4u8), 0..300),
                     cut in any::<usize>()) {
        let mut b = Vec::new();
        for (k, len) in &kinds {
            b.push(*k);
            b.push(*len);
            b.extend(std::iter::repeat_n(0u8, 6 + usize::from(*len) * 8));
        }
        let cut = cut % (b.len() + 1);
        for first in [0u8, 43, 44, 60] {
            if let Ok(c) = ipv6ext::walk(first.into(), &b[..cut]) {
                prop_assert!(c.count <= ipv6ext::MAX_EXT_HEADERS);
                prop_assert!(c.header_len <= cut);
            }
        }
    }

    #[test]
    fn random_bytes(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        exercise(&data);
    }

    #[test]
    fn mutated_frames(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
                      cut in any::<usize>()) {
        let mut f = seed_frame();
        for (at, v) in flips {
            let i = at % f.len();
            f[i] = v;
        }
        let cut = cut % (f.len() + 1);
        exercise(&f[..cut]);
        exercise(&f);
        exercise(&f[14..]);
        exercise(&f[34..]);
    }
}
