//! Differential test: for a corpus of frames built both by our emitters and by
//! etherparse's `PacketBuilder`, our parser and etherparse agree on every field.

mod common;

use core::net::{IpAddr, Ipv4Addr};

use common::{ipv4_frame, tcp_options};
use etherparse as ep;
use proptest::prelude::*;
use ulnet_wire::icmpv4::Icmpv4Message;
use ulnet_wire::*;

/// Parses `frame` with both parsers and asserts that every field agrees. Returns the
/// number of layers compared, so callers can check the corpus reached the transport.
fn compare(frame: &[u8]) -> usize {
    let (eth, rest) = ep::Ethernet2Header::from_slice(frame).expect("etherparse: ethernet");
    let ours = EthernetFrame::new_checked(frame).expect("ours: ethernet");
    assert_eq!(ours.src_addr().0, eth.source);
    assert_eq!(ours.dst_addr().0, eth.destination);
    assert_eq!(u16::from(ours.ethertype()), eth.ether_type.0);
    assert_eq!(ours.payload(), rest);
    match ours.ethertype() {
        EtherType::Arp => 1 + compare_arp(ours.payload()),
        EtherType::Ipv4 => 1 + compare_ipv4(ours.payload()),
        _ => 1,
    }
}

fn compare_arp(buf: &[u8]) -> usize {
    let theirs = ep::ArpPacket::from_slice(buf).expect("etherparse: arp");
    let p = ArpPacket::new_checked(buf).expect("ours: arp");
    let ours = ArpRepr::parse(&p).expect("ours: arp repr");
    assert_eq!(p.hardware_type(), theirs.hw_addr_type.0);
    assert_eq!(u16::from(p.protocol_type()), theirs.proto_addr_type.0);
    assert_eq!(p.hardware_len(), theirs.hw_addr_size());
    assert_eq!(p.protocol_len(), theirs.protocol_addr_size());
    assert_eq!(u16::from(ours.operation), theirs.operation.0);
    assert_eq!(&ours.source_hardware_addr.0[..], theirs.sender_hw_addr());
    assert_eq!(
        &ours.source_protocol_addr.octets()[..],
        theirs.sender_protocol_addr()
    );
    assert_eq!(&ours.target_hardware_addr.0[..], theirs.target_hw_addr());
    assert_eq!(
        &ours.target_protocol_addr.octets()[..],
        theirs.target_protocol_addr()
    );
    1
}

fn compare_ipv4(buf: &[u8]) -> usize {
    let (ip, _) = ep::Ipv4Header::from_slice(buf).expect("etherparse: ipv4");
    let p = Ipv4Packet::new_checked(buf).expect("ours: ipv4");
    let r = Ipv4Repr::parse(&p, ChecksumMode::Full).expect("ours: ipv4 repr");
    assert_eq!(p.header_len(), ip.header_len());
    assert_eq!(p.dscp(), ip.dscp.value());
    assert_eq!(p.ecn(), ip.ecn.value());
    assert_eq!(p.total_len(), ip.total_len);
    assert_eq!(r.ident, ip.identification);
    assert_eq!(r.dont_frag, ip.dont_fragment);
    assert_eq!(r.more_frags, ip.more_fragments);
    assert_eq!(r.frag_offset, ip.fragment_offset.byte_offset());
    assert_eq!(r.ttl, ip.time_to_live);
    assert_eq!(u8::from(r.protocol), ip.protocol.0);
    assert_eq!(p.checksum(), ip.header_checksum);
    assert_eq!(p.checksum(), ip.calc_header_checksum());
    assert_eq!(r.src_addr.octets(), ip.source);
    assert_eq!(r.dst_addr.octets(), ip.destination);
    assert_eq!(p.options(), ip.options.as_slice());
    assert_eq!(r.payload_len, usize::from(ip.payload_len().unwrap()));
    assert_eq!(r.is_fragment(), ip.is_fragmenting_payload());
    if r.is_fragment() {
        return 1;
    }
    let (src, dst) = (IpAddr::V4(r.src_addr), IpAddr::V4(r.dst_addr));
    let payload = p.payload();
    1 + match r.protocol {
        IpProtocol::Tcp => compare_tcp(&ip, &src, &dst, payload),
        IpProtocol::Udp => compare_udp(&ip, &src, &dst, payload),
        IpProtocol::Icmp => compare_icmp(payload),
        _ => 0,
    }
}

fn compare_tcp(ip: &ep::Ipv4Header, src: &IpAddr, dst: &IpAddr, buf: &[u8]) -> usize {
    let (tcp, data) = ep::TcpHeader::from_slice(buf).expect("etherparse: tcp");
    let p = TcpPacket::new_checked(buf).expect("ours: tcp");
    let r = TcpRepr::parse(&p, src, dst, ChecksumMode::Full).expect("ours: tcp repr");
    assert_eq!(r.src_port, tcp.source_port);
    assert_eq!(r.dst_port, tcp.destination_port);
    assert_eq!(r.seq.0, tcp.sequence_number);
    assert_eq!(r.ack.0, tcp.acknowledgment_number);
    assert_eq!(p.header_len(), tcp.header_len());
    for (flag, theirs) in [
        (TcpFlags::FIN, tcp.fin),
        (TcpFlags::SYN, tcp.syn),
        (TcpFlags::RST, tcp.rst),
        (TcpFlags::PSH, tcp.psh),
        (TcpFlags::ACK, tcp.ack),
        (TcpFlags::URG, tcp.urg),
        (TcpFlags::ECE, tcp.ece),
        (TcpFlags::CWR, tcp.cwr),
        (TcpFlags::AE, tcp.ns),
    ] {
        assert_eq!(r.flags.contains(flag), theirs, "flag {flag}");
    }
    assert_eq!(r.window, tcp.window_size);
    assert_eq!(r.urgent, tcp.urgent_pointer);
    assert_eq!(p.checksum(), tcp.checksum);
    assert_eq!(p.checksum(), tcp.calc_checksum_ipv4(ip, data).unwrap());
    assert_eq!(r.payload, data);
    assert_eq!(p.options(), tcp.options.as_slice());

    // Option by option (our iterator also yields EOL, where etherparse stops).
    let theirs: Vec<_> = tcp
        .options_iterator()
        .map(|o| o.expect("etherparse: option"))
        .collect();
    let ours: Vec<_> = p
        .options_iter()
        .map(|o| o.expect("ours: option"))
        .filter(|o| *o != TcpOption::EndOfList)
        .collect();
    assert_eq!(ours.len(), theirs.len());
    for (o, t) in ours.iter().zip(&theirs) {
        use ep::TcpOptionElement as E;
        match (o, t) {
            (TcpOption::NoOperation, E::Noop)
            | (TcpOption::SackPermitted, E::SelectiveAcknowledgementPermitted) => {}
            (TcpOption::MaxSegmentSize(a), E::MaximumSegmentSize(b)) => assert_eq!(a, b),
            (TcpOption::WindowScale(a), E::WindowScale(b)) => assert_eq!(a, b),
            (TcpOption::Timestamp(a), E::Timestamp(v, e)) => {
                assert_eq!((a.tsval, a.tsecr), (*v, *e))
            }
            (TcpOption::Sack(a), E::SelectiveAcknowledgement(first, more)) => {
                let theirs: Vec<(u32, u32)> = core::iter::once(*first)
                    .chain(more.iter().flatten().copied())
                    .collect();
                let ours: Vec<(u32, u32)> = a.iter().map(|(l, r)| (l.0, r.0)).collect();
                assert_eq!(ours, theirs);
            }
            _ => panic!("option mismatch: {o:?} vs {t:?}"),
        }
    }
    1
}

fn compare_udp(ip: &ep::Ipv4Header, src: &IpAddr, dst: &IpAddr, buf: &[u8]) -> usize {
    let (udp, data) = ep::UdpHeader::from_slice(buf).expect("etherparse: udp");
    let p = UdpPacket::new_checked(buf).expect("ours: udp");
    let r = UdpRepr::parse(&p, src, dst, ChecksumMode::Full).expect("ours: udp repr");
    assert_eq!(r.src_port, udp.source_port);
    assert_eq!(r.dst_port, udp.destination_port);
    assert_eq!(p.len(), udp.length);
    assert_eq!(p.checksum(), udp.checksum);
    let payload = &data[..usize::from(udp.length) - 8];
    assert_eq!(p.payload(), payload);
    assert_eq!(p.checksum(), udp.calc_checksum_ipv4(ip, payload).unwrap());
    1
}

fn compare_icmp(buf: &[u8]) -> usize {
    let (icmp, data) = ep::Icmpv4Header::from_slice(buf).expect("etherparse: icmp");
    let p = Icmpv4Packet::new_checked(buf).expect("ours: icmp");
    assert_eq!(p.checksum(), icmp.checksum);
    assert_eq!(p.checksum(), icmp.icmp_type.calc_checksum(data));
    let r = Icmpv4Repr::parse(&p, ChecksumMode::Full).expect("ours: icmp repr");
    use ep::Icmpv4Type as T;
    match (r, &icmp.icmp_type) {
        (
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data: d,
            },
            T::EchoRequest(h),
        )
        | (
            Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data: d,
            },
            T::EchoReply(h),
        ) => {
            assert_eq!((ident, seq_no, d), (h.id, h.seq, data));
        }
        (
            Icmpv4Repr::DstUnreachable {
                reason,
                header,
                data: d,
            },
            T::DestinationUnreachable(h),
        ) => {
            assert_eq!(u8::from(reason), h.code_u8());
            assert_eq!(p.msg_type(), Icmpv4Message::DstUnreachable);
            let (quoted, rest) = ep::Ipv4Header::from_slice(data).expect("etherparse: quote");
            assert_eq!(header.src_addr.octets(), quoted.source);
            assert_eq!(header.dst_addr.octets(), quoted.destination);
            assert_eq!(u8::from(header.protocol), quoted.protocol.0);
            assert_eq!(d, rest);
        }
        (
            Icmpv4Repr::TimeExceeded {
                reason,
                header,
                data: d,
            },
            T::TimeExceeded(c),
        ) => {
            assert_eq!(u8::from(reason), c.code_u8());
            let (quoted, rest) = ep::Ipv4Header::from_slice(data).expect("etherparse: quote");
            assert_eq!(header.src_addr.octets(), quoted.source);
            assert_eq!(d, rest);
        }
        (r, t) => panic!("icmp mismatch: {r:?} vs {t:?}"),
    }
    1
}

// ---- Corpus built by our emitters ----

fn ip_strategy() -> impl Strategy<Value = (Ipv4Addr, Ipv4Addr, u8, u8, u16, bool)> {
    (
        any::<[u8; 4]>(),
        any::<[u8; 4]>(),
        1..=255u8,
        any::<u8>(),
        any::<u16>(),
        any::<bool>(),
    )
        .prop_map(|(s, d, ttl, dscp_ecn, ident, df)| {
            (
                Ipv4Addr::from(s),
                Ipv4Addr::from(d),
                ttl,
                dscp_ecn,
                ident,
                df,
            )
        })
}

proptest! {
    #[test]
    fn our_tcp_frames_agree(
        (src, dst, ttl, dscp_ecn, ident, df) in ip_strategy(),
        ports in any::<(u16, u16)>(),
        seq_ack in any::<(u32, u32)>(),
        flags in 0..0x200u16,
        window in any::<u16>(),
        urgent in any::<u16>(),
        options in tcp_options(0..=14u8),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let tcp = TcpRepr {
            src_port: ports.0,
            dst_port: ports.1,
            seq: SeqNumber(seq_ack.0),
            ack: SeqNumber(seq_ack.1),
            flags: TcpFlags::from_bits_truncate(flags),
            window,
            urgent,
            options,
            payload: &payload, payload_rest: &[],
        };
        let mut seg = vec![0u8; tcp.buffer_len()];
        let (s, d) = (IpAddr::V4(src), IpAddr::V4(dst));
        tcp.emit(&mut TcpPacket::new_unchecked(&mut seg[..]), &s, &d, ChecksumMode::Full);
        let mut ip = Ipv4Repr::new(src, dst, IpProtocol::Tcp, seg.len(), ttl);
        ip.dscp_ecn = dscp_ecn;
        ip.ident = ident;
        ip.dont_frag = df;
        prop_assert_eq!(compare(&ipv4_frame(ip, &seg)), 3);
    }

    #[test]
    fn our_udp_and_icmp_frames_agree(
        (src, dst, ttl, dscp_ecn, ident, df) in ip_strategy(),
        ports in any::<(u16, u16)>(),
        ids in any::<(u16, u16)>(),
        code in 0..16u8,
        payload in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let udp = UdpRepr { src_port: ports.0, dst_port: ports.1 };
        let mut dgram = vec![0u8; udp.buffer_len(payload.len())];
        udp.emit(
            &mut UdpPacket::new_unchecked(&mut dgram[..]),
            &src.into(),
            &dst.into(),
            payload.len(),
            |b| b.copy_from_slice(&payload),
            ChecksumMode::Full,
        );
        let mut ip = Ipv4Repr::new(src, dst, IpProtocol::Udp, dgram.len(), ttl);
        ip.dscp_ecn = dscp_ecn;
        ip.ident = ident;
        ip.dont_frag = df;
        prop_assert_eq!(compare(&ipv4_frame(ip, &dgram)), 3);

        let quote = &dgram[..dgram.len().min(8)];
        for icmp in [
            Icmpv4Repr::EchoRequest { ident: ids.0, seq_no: ids.1, data: &payload },
            Icmpv4Repr::EchoReply { ident: ids.0, seq_no: ids.1, data: &payload },
            Icmpv4Repr::DstUnreachable { reason: code.into(), header: ip, data: quote },
            Icmpv4Repr::TimeExceeded { reason: (code % 2).into(), header: ip, data: quote },
        ] {
            let mut msg = vec![0u8; icmp.buffer_len()];
            icmp.emit(&mut Icmpv4Packet::new_unchecked(&mut msg[..]), ChecksumMode::Full);
            let outer = Ipv4Repr::new(dst, src, IpProtocol::Icmp, msg.len(), ttl);
            prop_assert_eq!(compare(&ipv4_frame(outer, &msg)), 3);
        }
    }

    #[test]
    fn our_arp_frames_agree(
        op in 1..=2u16,
        macs in any::<([u8; 6], [u8; 6])>(),
        ips in any::<([u8; 4], [u8; 4])>(),
    ) {
        let arp = ArpRepr {
            operation: op.into(),
            source_hardware_addr: EthernetAddress(macs.0),
            source_protocol_addr: ips.0.into(),
            target_hardware_addr: EthernetAddress(macs.1),
            target_protocol_addr: ips.1.into(),
        };
        let mut f = vec![0u8; 14 + arp.buffer_len()];
        EthernetRepr {
            src_addr: EthernetAddress(macs.0),
            dst_addr: EthernetAddress::BROADCAST,
            ethertype: EtherType::Arp,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        arp.emit(&mut ArpPacket::new_unchecked(&mut f[14..]));
        prop_assert_eq!(compare(&f), 2);
    }
}

// ---- Corpus built by etherparse ----

#[allow(clippy::too_many_arguments)] // one argument per header field under test
fn their_ipv4(
    src: [u8; 4],
    dst: [u8; 4],
    ttl: u8,
    proto: ep::IpNumber,
    ident: u16,
    dscp: u8,
    ecn: u8,
    options: &[u8],
) -> ep::IpHeaders {
    let mut ip = ep::Ipv4Header::new(0, ttl, proto, src, dst).unwrap();
    ip.identification = ident;
    ip.dscp = ep::IpDscp::try_new(dscp).unwrap();
    ip.ecn = ep::IpEcn::try_new(ecn).unwrap();
    ip.options = ep::Ipv4Options::try_from(options).unwrap();
    ep::IpHeaders::Ipv4(ip, Default::default())
}

fn their_tcp_options() -> impl Strategy<Value = Vec<ep::TcpOptionElement>> {
    use ep::TcpOptionElement as E;
    let one = prop_oneof![
        Just(E::Noop),
        any::<u16>().prop_map(E::MaximumSegmentSize),
        any::<u8>().prop_map(E::WindowScale),
        Just(E::SelectiveAcknowledgementPermitted),
        any::<(u32, u32)>().prop_map(|(a, b)| E::Timestamp(a, b)),
        (
            any::<(u32, u32)>(),
            proptest::option::of(any::<(u32, u32)>())
        )
            .prop_map(|(a, b)| E::SelectiveAcknowledgement(a, [b, None, None])),
    ];
    // At most 40 option bytes, padding included.
    proptest::collection::vec(one, 0..=6).prop_filter("options fit in 40 bytes", |opts| {
        let len: usize = opts
            .iter()
            .map(|o| match o {
                E::Noop => 1,
                E::MaximumSegmentSize(_) => 4,
                E::WindowScale(_) => 3,
                E::SelectiveAcknowledgementPermitted => 2,
                E::Timestamp(..) => 10,
                E::SelectiveAcknowledgement(_, more) => 10 + 8 * more.iter().flatten().count(),
            })
            .sum();
        len <= 40
    })
}

proptest! {
    #[test]
    fn their_tcp_frames_agree(
        addrs in any::<([u8; 4], [u8; 4])>(),
        ttl in 1..=255u8,
        ident in any::<u16>(),
        dscp in 0..64u8,
        ecn in 0..4u8,
        ip_opt_words in 0..=10usize,
        ports in any::<(u16, u16)>(),
        seq_ack in any::<(u32, u32)>(),
        bits in any::<[bool; 9]>(),
        window in any::<u16>(),
        urgent in any::<u16>(),
        options in their_tcp_options(),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        // IPv4 options: NOPs ending in EOL, so our parser must skip `ip_opt_words` words.
        let mut ip_opts = vec![1u8; ip_opt_words * 4];
        if let Some(last) = ip_opts.last_mut() { *last = 0; }
        let mut tcp = ep::TcpHeader::new(ports.0, ports.1, seq_ack.0, window);
        tcp.acknowledgment_number = seq_ack.1;
        [tcp.fin, tcp.syn, tcp.rst, tcp.psh, tcp.ack, tcp.urg, tcp.ece, tcp.cwr, tcp.ns] = bits;
        tcp.urgent_pointer = urgent;
        tcp.set_options(&options).unwrap();
        let builder = ep::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ip(their_ipv4(addrs.0, addrs.1, ttl, ep::IpNumber::TCP, ident, dscp, ecn, &ip_opts))
            .tcp_header(tcp);
        let mut frame = Vec::new();
        builder.write(&mut frame, &payload).unwrap();
        prop_assert_eq!(compare(&frame), 3);
    }

    #[test]
    fn their_udp_icmp_arp_frames_agree(
        addrs in any::<([u8; 4], [u8; 4])>(),
        ttl in 1..=255u8,
        ident in any::<u16>(),
        ports in any::<(u16, u16)>(),
        ids in any::<(u16, u16)>(),
        code in 0..16u8,
        op in 1..=2u16,
        macs in any::<([u8; 6], [u8; 6])>(),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let eth = || ep::PacketBuilder::ethernet2(macs.0, macs.1);
        let mut frame = Vec::new();
        eth().ip(their_ipv4(addrs.0, addrs.1, ttl, ep::IpNumber::UDP, ident, 0, 0, &[]))
            .udp(ports.0, ports.1)
            .write(&mut frame, &payload)
            .unwrap();
        prop_assert_eq!(compare(&frame), 3);

        frame.clear();
        eth().ip(their_ipv4(addrs.0, addrs.1, ttl, ep::IpNumber::ICMP, ident, 0, 0, &[]))
            .icmpv4_echo_request(ids.0, ids.1)
            .write(&mut frame, &payload)
            .unwrap();
        prop_assert_eq!(compare(&frame), 3);

        // Destination unreachable quoting a UDP header.
        let quoted_len = 8 + payload.len() as u16;
        let quoted =
            ep::Ipv4Header::new(quoted_len, ttl, ep::IpNumber::UDP, addrs.1, addrs.0).unwrap();
        let mut quote = quoted.to_bytes().to_vec();
        quote.extend_from_slice(&ports.1.to_be_bytes());
        quote.extend_from_slice(&ports.0.to_be_bytes());
        quote.extend_from_slice(&[0, 8, 0, 0]);
        let unreach = ep::icmpv4::DestUnreachableHeader::from_values(code, 1400).unwrap();
        frame.clear();
        eth().ip(their_ipv4(addrs.0, addrs.1, ttl, ep::IpNumber::ICMP, ident, 0, 0, &[]))
            .icmpv4(ep::Icmpv4Type::DestinationUnreachable(unreach))
            .write(&mut frame, &quote)
            .unwrap();
        prop_assert_eq!(compare(&frame), 3);

        let arp = ep::ArpPacket::new(
            ep::ArpHardwareId::ETHERNET,
            ep::EtherType::IPV4,
            ep::ArpOperation(op),
            &macs.0,
            &addrs.0,
            &macs.1,
            &addrs.1,
        )
        .unwrap();
        frame.clear();
        eth().arp(arp).write(&mut frame).unwrap();
        prop_assert_eq!(compare(&frame), 2);
    }

    #[test]
    fn their_fragments_agree(
        addrs in any::<([u8; 4], [u8; 4])>(),
        ident in any::<u16>(),
        offset in 0..8192u16,
        more in any::<bool>(),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut ip = ep::Ipv4Header::new(0, 64, ep::IpNumber::UDP, addrs.0, addrs.1).unwrap();
        ip.identification = ident;
        ip.dont_fragment = false;
        ip.more_fragments = more;
        ip.fragment_offset = ep::IpFragOffset::try_new(offset).unwrap();
        let mut frame = Vec::new();
        ep::PacketBuilder::ethernet2([2; 6], [4; 6])
            .ip(ep::IpHeaders::Ipv4(ip, Default::default()))
            .udp(1, 2)
            .write(&mut frame, &payload)
            .unwrap();
        let layers = compare(&frame);
        prop_assert_eq!(layers, if more || offset != 0 { 2 } else { 3 });
    }
}

proptest! {
    /// Our ICMPv6 checksum (RFC 4443 §2.3: over the IPv6 pseudo-header) agrees with
    /// etherparse's, for echo requests and packet too big messages.
    #[test]
    fn icmpv6_checksum_agrees(
        addrs in any::<([u8; 16], [u8; 16])>(),
        ids in any::<(u16, u16)>(),
        mtu in any::<u32>(),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        echo in any::<bool>(),
    ) {
        let (src, dst): (core::net::Ipv6Addr, core::net::Ipv6Addr) = (addrs.0.into(), addrs.1.into());
        let (their_type, mut b) = if echo {
            (ep::Icmpv6Type::EchoRequest(ep::IcmpEchoHeader { id: ids.0, seq: ids.1 }),
             vec![128, 0, 0, 0, (ids.0 >> 8) as u8, ids.0 as u8, (ids.1 >> 8) as u8, ids.1 as u8])
        } else {
            let mut h = vec![2, 0, 0, 0];
            h.extend_from_slice(&mtu.to_be_bytes());
            (ep::Icmpv6Type::PacketTooBig { mtu }, h)
        };
        b.extend_from_slice(&payload);
        let theirs = ep::Icmpv6Header::with_checksum(their_type, addrs.0, addrs.1, &payload).unwrap();
        let mut p = Icmpv6Packet::new_unchecked(&mut b[..]);
        p.fill_checksum(&src, &dst);
        prop_assert_eq!(p.checksum(), theirs.checksum);
        prop_assert!(Icmpv6Packet::new_checked(&b[..]).unwrap().verify_checksum(&src, &dst));
    }
}
