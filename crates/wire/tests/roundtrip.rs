//! Property tests: `parse(emit(r)) == r` for every representation.

mod common;

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use common::tcp_options;
use proptest::prelude::*;
use ulnet_wire::icmpv4::{Icmpv4DstUnreachable, Icmpv4TimeExceeded};
use ulnet_wire::*;

fn ipv4_repr() -> impl Strategy<Value = Ipv4Repr> {
    (
        any::<([u8; 4], [u8; 4])>(),
        any::<u8>(),
        0..1500usize,
        any::<(u8, u8, u16)>(),
        any::<(bool, bool)>(),
        0..8192u16,
    )
        .prop_map(
            |(addrs, proto, payload_len, (ttl, dscp_ecn, ident), (df, mf), off)| Ipv4Repr {
                src_addr: addrs.0.into(),
                dst_addr: addrs.1.into(),
                protocol: proto.into(),
                payload_len,
                ttl,
                dscp_ecn,
                ident,
                dont_frag: df,
                more_frags: mf,
                frag_offset: off * 8,
            },
        )
}

fn addrs() -> impl Strategy<Value = (IpAddr, IpAddr)> {
    prop_oneof![
        any::<([u8; 4], [u8; 4])>()
            .prop_map(|(s, d)| (IpAddr::V4(Ipv4Addr::from(s)), IpAddr::V4(Ipv4Addr::from(d)))),
        any::<([u8; 16], [u8; 16])>()
            .prop_map(|(s, d)| (IpAddr::V6(Ipv6Addr::from(s)), IpAddr::V6(Ipv6Addr::from(d)))),
    ]
}

proptest! {
    #[test]
    fn ethernet(src in any::<[u8; 6]>(), dst in any::<[u8; 6]>(), t in any::<u16>()) {
        let r = EthernetRepr {
            src_addr: EthernetAddress(src),
            dst_addr: EthernetAddress(dst),
            ethertype: t.into(),
        };
        let mut b = [0u8; 14];
        r.emit(&mut EthernetFrame::new_unchecked(&mut b[..]));
        prop_assert_eq!(EthernetRepr::parse(&EthernetFrame::new_checked(&b[..]).unwrap()), Ok(r));
    }

    #[test]
    fn arp(op in any::<u16>(), m in any::<([u8; 6], [u8; 6])>(), a in any::<([u8; 4], [u8; 4])>()) {
        let r = ArpRepr {
            operation: op.into(),
            source_hardware_addr: EthernetAddress(m.0),
            source_protocol_addr: a.0.into(),
            target_hardware_addr: EthernetAddress(m.1),
            target_protocol_addr: a.1.into(),
        };
        let mut b = [0u8; 28];
        r.emit(&mut ArpPacket::new_unchecked(&mut b[..]));
        prop_assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&b[..]).unwrap()), Ok(r));
    }

    #[test]
    fn ipv4(r in ipv4_repr()) {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Ipv4Packet::new_unchecked(&mut b[..]), ChecksumMode::Full);
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        prop_assert_eq!(Ipv4Repr::parse(&p, ChecksumMode::Full), Ok(r));
    }

    #[test]
    fn ipv6(a in any::<([u8; 16], [u8; 16])>(), nh in any::<u8>(), len in 0..1500usize,
            hl in any::<u8>(), tc in any::<u8>(), flow in 0..(1u32 << 20)) {
        let r = Ipv6Repr {
            src_addr: a.0.into(),
            dst_addr: a.1.into(),
            next_header: nh.into(),
            payload_len: len,
            hop_limit: hl,
            traffic_class: tc,
            flow_label: flow,
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Ipv6Packet::new_unchecked(&mut b[..]));
        prop_assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&b[..]).unwrap()), Ok(r));
    }

    #[test]
    fn icmpv4(ids in any::<(u16, u16)>(), code in any::<u8>(), header in ipv4_repr(),
              data in proptest::collection::vec(any::<u8>(), 0..600), which in 0..4u8) {
        let r = match which {
            0 => Icmpv4Repr::EchoRequest { ident: ids.0, seq_no: ids.1, data: &data },
            1 => Icmpv4Repr::EchoReply { ident: ids.0, seq_no: ids.1, data: &data },
            2 => Icmpv4Repr::DstUnreachable {
                reason: Icmpv4DstUnreachable::from(code),
                header,
                data: &data,
            },
            _ => Icmpv4Repr::TimeExceeded {
                reason: Icmpv4TimeExceeded::from(code),
                header,
                data: &data,
            },
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Icmpv4Packet::new_unchecked(&mut b[..]), ChecksumMode::Full);
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        prop_assert_eq!(Icmpv4Repr::parse(&p, ChecksumMode::Full), Ok(r));
    }

    /// The quote parser reads back the endpoints of any TCP or UDP datagram an error
    /// quotes, and every cut of the quote is an error, never a panic or a wrong answer.
    #[test]
    fn icmp_quote(mut header in ipv4_repr(), tcp in any::<bool>(), ports in (1..=65535u16, 1..=65535u16),
                  seq in any::<u32>(), extra in proptest::collection::vec(any::<u8>(), 0..64),
                  code in any::<u8>(), cut in any::<usize>()) {
        header.protocol = if tcp { IpProtocol::Tcp } else { IpProtocol::Udp };
        header.frag_offset = 0;
        let mut data = vec![0u8; 8];
        data[0..2].copy_from_slice(&ports.0.to_be_bytes());
        data[2..4].copy_from_slice(&ports.1.to_be_bytes());
        data[4..8].copy_from_slice(&seq.to_be_bytes());
        data.extend_from_slice(&extra);
        let r = Icmpv4Repr::DstUnreachable {
            reason: Icmpv4DstUnreachable::from(code),
            header,
            data: &data,
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Icmpv4Packet::new_unchecked(&mut b[..]), ChecksumMode::Full);
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        let q = Icmpv4Repr::parse(&p, ChecksumMode::Full).unwrap().quote().unwrap().unwrap();
        prop_assert_eq!(q, IcmpQuote::from_payload(p.payload()).unwrap());
        prop_assert_eq!((q.src_addr, q.dst_addr), (header.src_addr, header.dst_addr));
        prop_assert_eq!((q.src_port, q.dst_port), ports);
        prop_assert_eq!(q.tcp_seq, tcp.then_some(SeqNumber(seq)));
        // Cut anywhere before the 8 transport bytes end: refused.
        let short = cut % (icmpv4::HEADER_LEN + ipv4::HEADER_LEN + 8);
        prop_assert!(IcmpQuote::from_payload(&b[icmpv4::HEADER_LEN..short.max(icmpv4::HEADER_LEN)]).is_err());
    }

    #[test]
    fn udp((src, dst) in addrs(), ports in any::<(u16, u16)>(),
           payload in proptest::collection::vec(any::<u8>(), 0..1500)) {
        let r = UdpRepr { src_port: ports.0, dst_port: ports.1 };
        let mut b = vec![0u8; r.buffer_len(payload.len())];
        r.emit(&mut UdpPacket::new_unchecked(&mut b[..]), &src, &dst, payload.len(),
               |p| p.copy_from_slice(&payload), ChecksumMode::Full);
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        prop_assert_ne!(p.checksum(), 0);
        prop_assert_eq!(UdpRepr::parse(&p, &src, &dst, ChecksumMode::Full), Ok(r));
        prop_assert_eq!(p.payload(), &payload[..]);
    }

    #[test]
    fn tcp((src, dst) in addrs(), ports in any::<(u16, u16)>(), sa in any::<(u32, u32)>(),
           flags in any::<u16>(), window in any::<u16>(), urgent in any::<u16>(),
           options in tcp_options(any::<u8>()), payload in proptest::collection::vec(any::<u8>(), 0..1500)) {
        let r = TcpRepr {
            src_port: ports.0,
            dst_port: ports.1,
            seq: SeqNumber(sa.0),
            ack: SeqNumber(sa.1),
            flags: TcpFlags::from_bits_truncate(flags),
            window,
            urgent,
            options,
            payload: &payload, payload_rest: &[],
        };
        prop_assert_eq!(r.header_len() % 4, 0);
        prop_assert!(r.header_len() <= 60);
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut TcpPacket::new_unchecked(&mut b[..]), &src, &dst, ChecksumMode::Full);
        let p = TcpPacket::new_checked(&b[..]).unwrap();
        let back = TcpRepr::parse(&p, &src, &dst, ChecksumMode::Full).unwrap();
        // SACK blocks are clamped to the option space left (RFC 2018 §3); at least two
        // always fit, and the ones sent are the first ones.
        let sent = back.options.sack_blocks.len();
        prop_assert!(sent >= r.options.sack_blocks.len().min(2));
        let first = &r.options.sack_blocks.as_slice()[..sent];
        prop_assert_eq!(back.options.sack_blocks.as_slice(), first);
        let mut expected = r;
        expected.options.sack_blocks.truncate(sent);
        prop_assert_eq!(back, expected);
    }

    #[test]
    fn incremental_checksum_on_emitted_ipv4(r in ipv4_repr(), new_dst in any::<[u8; 4]>()) {
        // A NAT-style rewrite of the destination patched with RFC 1624 stays valid.
        let mut b = vec![0u8; r.buffer_len()];
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        r.emit(&mut p, ChecksumMode::Full);
        let old = u32::from(r.dst_addr);
        let new = u32::from_be_bytes(new_dst);
        let c = checksum::update_u32(p.checksum(), old, new);
        p.set_dst_addr(new_dst.into());
        p.set_checksum(c);
        prop_assert!(p.verify_checksum());
    }
}

fn ipv6_repr() -> impl Strategy<Value = Ipv6Repr> {
    (
        any::<([u8; 16], [u8; 16])>(),
        any::<u8>(),
        0..1500usize,
        any::<u8>(),
    )
        .prop_map(|(a, nh, len, hl)| Ipv6Repr {
            src_addr: a.0.into(),
            dst_addr: a.1.into(),
            next_header: nh.into(),
            payload_len: len,
            hop_limit: hl,
            traffic_class: 0,
            flow_label: 0,
        })
}

fn ndisc_option() -> impl Strategy<Value = (u8, [u8; 6], u32, u8, bool, [u8; 16])> {
    (
        0..4u8,
        any::<[u8; 6]>(),
        any::<u32>(),
        0..=128u8,
        any::<bool>(),
        any::<[u8; 16]>(),
    )
}

proptest! {
    #[test]
    fn icmpv6(ids in any::<(u16, u16)>(), code in any::<u8>(), word in any::<u32>(),
              header in ipv6_repr(), a in any::<([u8; 16], [u8; 16])>(),
              data in proptest::collection::vec(any::<u8>(), 0..600), which in 0..6u8) {
        let (src, dst): (Ipv6Addr, Ipv6Addr) = (a.0.into(), a.1.into());
        let r = match which {
            0 => Icmpv6Repr::EchoRequest { ident: ids.0, seq_no: ids.1, data: &data },
            1 => Icmpv6Repr::EchoReply { ident: ids.0, seq_no: ids.1, data: &data },
            2 => Icmpv6Repr::DstUnreachable { reason: code.into(), header, data: &data },
            3 => Icmpv6Repr::PktTooBig { mtu: word, header, data: &data },
            4 => Icmpv6Repr::TimeExceeded { reason: code.into(), header, data: &data },
            _ => Icmpv6Repr::ParamProblem { reason: code.into(), pointer: word, header, data: &data },
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Icmpv6Packet::new_unchecked(&mut b[..]), &src, &dst, ChecksumMode::Full);
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        prop_assert!(p.verify_checksum(&src, &dst));
        prop_assert_eq!(Icmpv6Repr::parse(&p, &src, &dst, ChecksumMode::Full), Ok(r));
    }

    #[test]
    fn ndisc(kind in 133..=137u8, flags in any::<u8>(), nums in any::<(u16, u32, u32)>(),
             targets in any::<([u8; 16], [u8; 16])>(),
             opts in proptest::collection::vec(ndisc_option(), 0..4)) {
        let mut ob = Vec::new();
        for (k, mac, n, plen, f, prefix) in opts {
            let o = match k {
                0 => NdiscOption::SourceLinkLayer(EthernetAddress(mac)),
                1 => NdiscOption::TargetLinkLayer(EthernetAddress(mac)),
                2 => NdiscOption::Mtu(n),
                _ => NdiscOption::PrefixInfo(PrefixInfo {
                    prefix_len: plen, on_link: f, autonomous: !f, valid_lifetime: n,
                    preferred_lifetime: n / 2, prefix: prefix.into(),
                }),
            };
            let at = ob.len();
            ob.resize(at + o.buffer_len(), 0);
            o.emit(&mut ob[at..]);
            // Each option reads back as written.
            prop_assert_eq!(NdiscOptions::parse(&ob[at..]).unwrap().iter().next(), Some(o));
        }
        let options = NdiscOptions::parse(&ob).unwrap();
        let mut target: Ipv6Addr = targets.0.into();
        if target.is_multicast() {
            target = Ipv6Addr::LOCALHOST;
        }
        let nd = match kind {
            133 => NdiscRepr::RouterSolicit { options },
            134 => NdiscRepr::RouterAdvert { hop_limit: flags, flags, router_lifetime: nums.0,
                reachable_time: nums.1, retrans_time: nums.2, options },
            135 => NdiscRepr::NeighborSolicit { target, options },
            136 => NdiscRepr::NeighborAdvert {
                flags: NaFlags { router: flags & 1 != 0, solicited: flags & 2 != 0,
                    override_: flags & 4 != 0 },
                target, options },
            _ => NdiscRepr::Redirect { target, dst: targets.1.into(), options },
        };
        let r = Icmpv6Repr::Ndisc(nd);
        let (src, dst) = (Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST);
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Icmpv6Packet::new_unchecked(&mut b[..]), &src, &dst, ChecksumMode::Full);
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        prop_assert_eq!(Icmpv6Repr::parse(&p, &src, &dst, ChecksumMode::Full), Ok(r));
    }

    #[test]
    fn ipv6_fragment_header(nh in any::<u8>(), offset in 0..8192u16, more in any::<bool>(),
                            ident in any::<u32>()) {
        let f = Ipv6FragRepr { next_header: nh.into(), offset: offset * 8, more_frags: more, ident };
        let mut b = [0u8; 8];
        f.emit(&mut b);
        prop_assert_eq!(Ipv6FragRepr::parse(&b), Ok(f));
        // As the only header of a chain.
        let mut c = vec![0u8; 8 + 20];
        f.emit(&mut c);
        let chain = ulnet_wire::ipv6ext::walk(IpProtocol::Ipv6Frag, &c).unwrap();
        prop_assert_eq!(chain.fragment, Some(f));
        prop_assert_eq!(chain.header_len, 8);
    }
}
