//! Real IPv6 frames captured with tcpdump on a veth pair between two network namespaces
//! (2001:2::1 and 2001:2::2, Linux 6.18, transmit checksum offload off): an MLDv2 report
//! behind a hop-by-hop header (router alert), a DAD solicitation from `::`, a router
//! solicitation, neighbour solicitation and advertisement, ping, UDP to a closed port and
//! the port unreachable it drew.
//!
//! Each frame must parse through every layer with checksums verified (ICMPv6 over its
//! pseudo-header), the extension-header chain must walk, ICMPv6 must re-emit to the same
//! bytes, and each line must pretty-print as `tcpdump -nn -S -t` printed it (its "IP6 "
//! prefix dropped; MLD, which we do not parse, printed only as unsupported).

use core::net::IpAddr;

use ulnet_wire::*;

/// (frame as hex, `tcpdump -nn -S -t` line without "IP6 ")
const CAPTURE: &[(&str, &str)] = &[
    (
        "333300000016de423758401986dd600000000038000100000000000000000000000000000000ff0200000000000000000000000000163a000502000001008f002cfd0000000204000000ff0200000000000000000001ff58401904000000ff0200000000000000000001ff000002",
        ":: > ff02::16: HBH ICMP6, multicast listener report v2, 2 group record(s), length 48",
    ),
    (
        "3333ff584019de423758401986dd6000000000203aff00000000000000000000000000000000ff0200000000000000000001ff58401987008ce100000000fe80000000000000dc4237fffe5840190e014bd85323af1b",
        ":: > ff02::1:ff58:4019: ICMP6, neighbor solicitation, who has fe80::dc42:37ff:fe58:4019, length 32",
    ),
    (
        "333300000002c299b00c1b1086dd6000000000103afffe80000000000000c099b0fffe0c1b10ff020000000000000000000000000002850063c1000000000101c299b00c1b10",
        "fe80::c099:b0ff:fe0c:1b10 > ff02::2: ICMP6, router solicitation, length 16",
    ),
    (
        "3333ff000002c299b00c1b1086dd6000000000203aff20010002000000000000000000000001ff0200000000000000000001ff0000028700abdd00000000200100020000000000000000000000020101c299b00c1b10",
        "2001:2::1 > ff02::1:ff00:2: ICMP6, neighbor solicitation, who has 2001:2::2, length 32",
    ),
    (
        "c299b00c1b10de423758401986dd6000000000203aff200100020000000000000000000000022001000200000000000000000000000188005fe160000000200100020000000000000000000000020201de4237584019",
        "2001:2::2 > 2001:2::1: ICMP6, neighbor advertisement, tgt is 2001:2::2, length 32",
    ),
    (
        "de4237584019c299b00c1b1086dd6002972200183a4020010002000000000000000000000001200100020000000000000000000000028000f83d09ff00018d93056b00000000a767030000000000",
        "2001:2::1 > 2001:2::2: ICMP6, echo request, id 2559, seq 1, length 24",
    ),
    (
        "c299b00c1b10de423758401986dd6009270100183a4020010002000000000000000000000002200100020000000000000000000000018100f73d09ff00018d93056b00000000a767030000000000",
        "2001:2::2 > 2001:2::1: ICMP6, echo reply, id 2559, seq 1, length 24",
    ),
    (
        "de4237584019c299b00c1b1086dd600c641a000b11402001000200000000000000000000000120010002000000000000000000000002bab80009000b7ba4686921",
        "2001:2::1.47800 > 2001:2::2.9: UDP, length 3",
    ),
    (
        "c299b00c1b10de423758401986dd6002e597003b3a4020010002000000000000000000000002200100020000000000000000000000010104e92700000000600c641a000b11402001000200000000000000000000000120010002000000000000000000000002bab80009000b7ba4686921",
        "2001:2::2 > 2001:2::1: ICMP6, destination unreachable, unreachable port, 2001:2::2 udp port 9, length 59",
    ),
];

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn every_layer_parses_verifies_and_re_emits() {
    let mut icmp_seen = 0;
    for (hex, line) in CAPTURE {
        let frame = unhex(hex);
        let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
        assert_eq!(eth.ethertype(), EtherType::Ipv6, "{line}");
        let ip = Ipv6Packet::new_checked(eth.payload()).unwrap();
        let h = Ipv6Repr::parse(&ip).unwrap();
        let chain = ipv6ext::walk(h.next_header, ip.payload()).unwrap();
        let upper = &ip.payload()[chain.header_len..];
        let (src, dst) = (h.src_addr, h.dst_addr);
        match chain.upper {
            IpProtocol::Icmpv6 => {
                let p = Icmpv6Packet::new_checked(upper).unwrap();
                assert!(p.verify_checksum(&src, &dst), "{line}");
                match Icmpv6Repr::parse(&p, &src, &dst, ChecksumMode::Full) {
                    Ok(r) => {
                        let mut out = vec![0u8; r.buffer_len()];
                        r.emit(
                            &mut Icmpv6Packet::new_unchecked(&mut out[..]),
                            &src,
                            &dst,
                            ChecksumMode::Full,
                        );
                        assert_eq!(out, upper, "{line}");
                        icmp_seen += 1;
                    }
                    // MLD (RFC 3810) is not ours to parse; it sits behind a hop-by-hop
                    // header with a router alert option (type 5, action "skip").
                    Err(Error::Unsupported) => {
                        assert_eq!(chain.count, 1);
                        assert_eq!(p.msg_type(), Icmpv6Message::MldV2Report);
                    }
                    Err(e) => panic!("{line}: {e}"),
                }
            }
            IpProtocol::Udp => {
                let p = UdpPacket::new_checked(upper).unwrap();
                let (s, d) = (IpAddr::V6(src), IpAddr::V6(dst));
                UdpRepr::parse(&p, &s, &d, ChecksumMode::Full).unwrap();
            }
            other => panic!("{line}: {other}"),
        }
        let printed = pretty_print(&frame).to_string();
        if line.contains("multicast listener") {
            assert!(printed.contains("ICMP6 unsupported packet"), "{printed}");
        } else {
            assert_eq!(printed, *line);
        }
    }
    assert_eq!(icmp_seen, 7);
}

/// The quoted datagram of the port unreachable names the UDP flow that drew it.
#[test]
fn port_unreachable_quotes_the_datagram() {
    let (hex, _) = CAPTURE.last().unwrap();
    let frame = unhex(hex);
    let ip = Ipv6Packet::new_checked(&frame[14..]).unwrap();
    let p = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    let r = Icmpv6Repr::parse(&p, &ip.src_addr(), &ip.dst_addr(), ChecksumMode::Full).unwrap();
    let q = r.quote().unwrap().unwrap();
    assert_eq!(
        (q.src_port, q.dst_port, q.protocol),
        (47800, 9, IpProtocol::Udp)
    );
    assert_eq!(
        q.src_addr,
        "2001:2::1".parse::<core::net::Ipv6Addr>().unwrap()
    );
}
