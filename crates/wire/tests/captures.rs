//! Real frames captured with tcpdump on a veth pair between two network namespaces
//! (198.18.0.1 and 198.18.0.2, Linux 6.18, transmit checksum offload off so the
//! checksums on the wire are final): ARP, ping, UDP to a closed port and the ICMP port
//! unreachable it drew, a TCP handshake, data, FIN and RST.
//!
//! Each frame must parse through every layer with checksums verified, re-emit to the
//! same bytes, and pretty-print to exactly the line `tcpdump -nn -S -t` printed (with
//! tcpdump's "IP " prefix and application guess dropped).

use core::net::IpAddr;

use ulnet_wire::*;

/// (frame as hex, `tcpdump -nn -S -t` line)
const CAPTURE: &[(&str, &str)] = &[
    (
        "ffffffffffff4a6be278bf1b080600010800060400014a6be278bf1bc6120001000000000000c6120002",
        "ARP, Request who-has 198.18.0.2 tell 198.18.0.1, length 28",
    ),
    (
        "4a6be278bf1b7e65ec594cf6080600010800060400027e65ec594cf6c61200024a6be278bf1bc6120001",
        "ARP, Reply 198.18.0.2 is-at 7e:65:ec:59:4c:f6, length 28",
    ),
    (
        "7e65ec594cf64a6be278bf1b08004500002c5866400040015643c6120001c61200020800aa4d0d9d000106ac016b0000000037fd000000000000",
        "198.18.0.1 > 198.18.0.2: ICMP echo request, id 3485, seq 1, length 24",
    ),
    (
        "4a6be278bf1b7e65ec594cf608004500002ca9c80000400144e1c6120002c61200010000b24d0d9d000106ac016b0000000037fd000000000000",
        "198.18.0.2 > 198.18.0.1: ICMP echo reply, id 3485, seq 1, length 24",
    ),
    (
        "7e65ec594cf64a6be278bf1b08004500001f3c66400040117240c6120001c6120002a7010009000b5a3c68690a",
        "198.18.0.1.42753 > 198.18.0.2.9: UDP, length 3",
    ),
    (
        "4a6be278bf1b7e65ec594cf6080045c0003ba9cb00004001440fc6120002c612000103038941000000004500001f3c66400040117240c6120001c6120002a7010009000b5a3c68690a",
        "198.18.0.2 > 198.18.0.1: ICMP 198.18.0.2 udp port 9 unreachable, length 39",
    ),
    (
        "7e65ec594cf64a6be278bf1b08004500003c6522400040064972c6120001c61200029d420051f43c6bf400000000a002faf0f19d0000020405b40402080aa6f62a8b000000000103030a",
        "198.18.0.1.40258 > 198.18.0.2.81: Flags [S], seq 4097600500, win 64240, options [mss 1460,sackOK,TS val 2801150603 ecr 0,nop,wscale 10], length 0",
    ),
    (
        "4a6be278bf1b7e65ec594cf6080045000028000040004006aea8c6120002c612000100519d4200000000f43c6bf55014000025e30000",
        "198.18.0.2.81 > 198.18.0.1.40258: Flags [R.], seq 0, ack 4097600501, win 0, length 0",
    ),
    (
        "7e65ec594cf64a6be278bf1b08004500003cf9c140004006b4d2c6120001c6120002c10a1f9001a8157b00000000a002faf0b7d80000020405b40402080aab7f65ce000000000103030a",
        "198.18.0.1.49418 > 198.18.0.2.8080: Flags [S], seq 27792763, win 64240, options [mss 1460,sackOK,TS val 2877253070 ecr 0,nop,wscale 10], length 0",
    ),
    (
        "4a6be278bf1b7e65ec594cf608004500003c000040004006ae94c6120002c61200011f90c10a54ebf8d801a8157ca012fe88a0fc0000020405b40402080a09bfbbafab7f65ce0103030a",
        "198.18.0.2.8080 > 198.18.0.1.49418: Flags [S.], seq 1424750808, ack 27792764, win 65160, options [mss 1460,sackOK,TS val 163560367 ecr 2877253070,nop,wscale 10], length 0",
    ),
    (
        "7e65ec594cf64a6be278bf1b080045000034f9c240004006b4d9c6120001c6120002c10a1f9001a8157c54ebf8d98010003fce1500000101080aab7f65ce09bfbbaf",
        "198.18.0.1.49418 > 198.18.0.2.8080: Flags [.], ack 1424750809, win 63, options [nop,nop,TS val 2877253070 ecr 163560367], length 0",
    ),
    (
        "4a6be278bf1b7e65ec594cf6080045000034474b400040066751c6120002c61200011f90c10a54ebf8d901a8157c80110040ce1300000101080a09bfbbafab7f65ce",
        "198.18.0.2.8080 > 198.18.0.1.49418: Flags [F.], seq 1424750809, ack 27792764, win 64, options [nop,nop,TS val 163560367 ecr 2877253070], length 0",
    ),
    (
        "7e65ec594cf64a6be278bf1b08004500003af9c340004006b4d2c6120001c6120002c10a1f9001a8157c54ebf8da8018003f8a2a00000101080aab7f65ce09bfbbaf68656c6c6f0a",
        "198.18.0.1.49418 > 198.18.0.2.8080: Flags [P.], seq 27792764:27792770, ack 1424750810, win 63, options [nop,nop,TS val 2877253070 ecr 163560367], length 6",
    ),
    (
        "4a6be278bf1b7e65ec594cf6080045000028000040004006aea8c6120002c61200011f90c10a54ebf8da0000000050040000f5570000",
        "198.18.0.2.8080 > 198.18.0.1.49418: Flags [R], seq 1424750810, win 0, length 0",
    ),
];

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Parses every layer (checksums verified) and emits the representations into a new
/// frame.
fn reemit(frame: &[u8]) -> Vec<u8> {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    let eth_repr = EthernetRepr::parse(&eth).unwrap();
    let mut out = vec![0u8; frame.len()];
    eth_repr.emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
    match eth_repr.ethertype {
        EtherType::Arp => {
            let arp = ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).unwrap()).unwrap();
            arp.emit(&mut ArpPacket::new_unchecked(&mut out[14..]));
        }
        EtherType::Ipv4 => {
            let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
            let ip_repr = Ipv4Repr::parse(&ip, ChecksumMode::Full).unwrap();
            assert!(!ip_repr.is_fragment());
            ip_repr.emit(
                &mut Ipv4Packet::new_unchecked(&mut out[14..]),
                ChecksumMode::Full,
            );
            let (src, dst) = (IpAddr::V4(ip_repr.src_addr), IpAddr::V4(ip_repr.dst_addr));
            let body = &mut out[14 + ip_repr.header_len()..][..ip_repr.payload_len];
            match ip_repr.protocol {
                IpProtocol::Tcp => {
                    let seg = TcpPacket::new_checked(ip.payload()).unwrap();
                    let r = TcpRepr::parse(&seg, &src, &dst, ChecksumMode::Full).unwrap();
                    r.emit(
                        &mut TcpPacket::new_unchecked(body),
                        &src,
                        &dst,
                        ChecksumMode::Full,
                    );
                }
                IpProtocol::Udp => {
                    let dgram = UdpPacket::new_checked(ip.payload()).unwrap();
                    let r = UdpRepr::parse(&dgram, &src, &dst, ChecksumMode::Full).unwrap();
                    let payload = dgram.payload();
                    r.emit(
                        &mut UdpPacket::new_unchecked(body),
                        &src,
                        &dst,
                        payload.len(),
                        |b| b.copy_from_slice(payload),
                        ChecksumMode::Full,
                    );
                }
                IpProtocol::Icmp => {
                    let msg = Icmpv4Packet::new_checked(ip.payload()).unwrap();
                    let r = Icmpv4Repr::parse(&msg, ChecksumMode::Full).unwrap();
                    r.emit(&mut Icmpv4Packet::new_unchecked(body), ChecksumMode::Full);
                }
                other => panic!("unexpected protocol {other}"),
            }
        }
        other => panic!("unexpected ethertype {other}"),
    }
    out
}

#[test]
fn captured_frames_parse_and_reemit_byte_for_byte() {
    for (hex, line) in CAPTURE {
        let frame = unhex(hex);
        assert_eq!(reemit(&frame), frame, "{line}");
    }
}

#[test]
fn pretty_print_matches_tcpdump() {
    for (hex, line) in CAPTURE {
        assert_eq!(pretty_print(&unhex(hex)).to_string(), *line);
    }
}

#[test]
fn captured_checksums_fail_when_corrupted() {
    for (hex, line) in CAPTURE {
        let mut frame = unhex(hex);
        let last = frame.len() - 1;
        frame[last] ^= 0x10;
        let printed = pretty_print(&frame).to_string();
        if !line.starts_with("ARP") {
            assert!(printed.contains("bad"), "{printed}");
        }
    }
}
