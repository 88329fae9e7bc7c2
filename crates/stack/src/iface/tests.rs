//! Interface unit tests: one malformed or foreign frame per drop reason, each counted
//! exactly once and answered with nothing.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};

use ulnet_wire::{
    ArpOperation, ArpPacket, ArpRepr, ChecksumMode, EtherType, EthernetAddress, EthernetFrame,
    EthernetRepr, Icmpv4DstUnreachable, Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Packet, Ipv4Repr,
    UdpPacket, UdpRepr,
};

use super::*;
use crate::socket::{UdpConfig, UdpSocket};

const US: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const PEER: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const OUR_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const PEER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

fn iface() -> Interface {
    let config = InterfaceConfig::new(US).address(IpCidr::new(IpAddr::V4(OUR_IP), 24).unwrap());
    let mut i = Interface::new(config).unwrap();
    let mut s = UdpSocket::new(UdpConfig::default());
    s.bind("0.0.0.0:7".parse().unwrap()).unwrap();
    i.sockets_mut().add_udp(s).unwrap();
    i
}

fn eth(dst: EthernetAddress, ethertype: EtherType, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + payload.len()];
    EthernetRepr {
        src_addr: PEER,
        dst_addr: dst,
        ethertype,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    f[14..].copy_from_slice(payload);
    f
}

fn ip(src: Ipv4Addr, dst: Ipv4Addr, protocol: IpProtocol, payload: &[u8]) -> Vec<u8> {
    let repr = Ipv4Repr::new(src, dst, protocol, payload.len(), 64);
    let mut p = vec![0u8; 20 + payload.len()];
    repr.emit(
        &mut Ipv4Packet::new_unchecked(&mut p[..]),
        ChecksumMode::Full,
    );
    p[20..].copy_from_slice(payload);
    p
}

fn udp(dst_port: u16, data: &[u8]) -> Vec<u8> {
    let mut d = vec![0u8; 8 + data.len()];
    UdpRepr {
        src_port: 5000,
        dst_port,
    }
    .emit(
        &mut UdpPacket::new_unchecked(&mut d[..]),
        &IpAddr::V4(PEER_IP),
        &IpAddr::V4(OUR_IP),
        data.len(),
        |p| p.copy_from_slice(data),
        ChecksumMode::Full,
    );
    d
}

fn good_udp() -> Vec<u8> {
    eth(
        US,
        EtherType::Ipv4,
        &ip(PEER_IP, OUR_IP, IpProtocol::Udp, &udp(7, b"hi")),
    )
}

/// Feeds `frame` and returns the drop reasons counted and the frames sent.
fn run(frame: &[u8]) -> (Vec<(DropReason, u64)>, usize) {
    let mut i = iface();
    i.add_static_neighbor(IpAddr::V4(PEER_IP), PEER).unwrap();
    let mut sent = 0;
    let mut sink = |_len: usize, fill: &mut dyn FnMut(&mut [u8])| {
        let mut b = [0u8; 2048];
        fill(&mut b[.._len]);
        sent += 1;
        true
    };
    i.ingress(Instant::from_secs(1), frame, &mut sink);
    (i.stats().nonzero_drops().collect(), sent)
}

fn expect(frame: &[u8], reason: DropReason) {
    let (drops, _) = run(frame);
    assert_eq!(drops, [(reason, 1)], "expected {reason:?}");
}

#[test]
fn the_good_frame_is_delivered() {
    let (drops, sent) = run(&good_udp());
    assert!(drops.is_empty());
    assert_eq!(sent, 0);
}

#[test]
fn ethernet_drops() {
    expect(&good_udp()[..13], DropReason::EthTruncated);
    let mut f = good_udp();
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
    expect(&f, DropReason::EthNotForUs);
    let mut f = good_udp();
    f[6] = 0x01;
    expect(&f, DropReason::EthBadSource);
    let mut f = good_udp();
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    expect(&f, DropReason::EthUnknownType);
}

#[test]
fn ipv4_drops() {
    let mut f = good_udp();
    f[14] = 0x65;
    expect(&f, DropReason::Ipv4BadVersion);
    expect(&good_udp()[..14 + 19], DropReason::Ipv4Truncated);
    let mut f = good_udp();
    f[14 + 3] += 1; // total length past the frame
    Ipv4Packet::new_unchecked(&mut f[14..]).fill_checksum();
    expect(&f, DropReason::Ipv4Truncated);
    let mut f = good_udp();
    f[14] = 0x44; // IHL 4: shorter than a header
    expect(&f, DropReason::Ipv4Malformed);
    let mut f = good_udp();
    f[14 + 10] ^= 1;
    expect(&f, DropReason::Ipv4BadChecksum);
    let bcast_src = ip(
        Ipv4Addr::new(198, 18, 0, 255),
        OUR_IP,
        IpProtocol::Udp,
        &udp(7, b""),
    );
    expect(
        &eth(US, EtherType::Ipv4, &bcast_src),
        DropReason::Ipv4BadSource,
    );
    let other = ip(
        PEER_IP,
        Ipv4Addr::new(198, 18, 0, 3),
        IpProtocol::Udp,
        &udp(7, b""),
    );
    expect(&eth(US, EtherType::Ipv4, &other), DropReason::Ipv4NotForUs);
    // RFC 1122 §3.3.6: unicast datagram in a link-layer broadcast.
    let ours = ip(PEER_IP, OUR_IP, IpProtocol::Udp, &udp(7, b""));
    expect(
        &eth(EthernetAddress::BROADCAST, EtherType::Ipv4, &ours),
        DropReason::Ipv4NotForUs,
    );
    let mut ttl0 = ours.clone();
    ttl0[8] = 0;
    Ipv4Packet::new_unchecked(&mut ttl0[..]).fill_checksum();
    expect(&eth(US, EtherType::Ipv4, &ttl0), DropReason::Ipv4TtlZero);
    let gre = ip(PEER_IP, OUR_IP, IpProtocol::Unknown(47), b"xxxx");
    expect(
        &eth(US, EtherType::Ipv4, &gre),
        DropReason::Ipv4UnknownProtocol,
    );
}

/// A whole UDP datagram longer than the MTU (1500 here) is a host's UDP segmentation
/// super-frame taken whole: dropped, its datagrams' boundaries being lost. One that fits
/// is delivered.
#[test]
fn a_udp_datagram_above_the_mtu_is_dropped() {
    let big = ip(PEER_IP, OUR_IP, IpProtocol::Udp, &udp(7, &[7u8; 1500]));
    expect(&eth(US, EtherType::Ipv4, &big), DropReason::UdpAboveMtu);
    let fits = ip(PEER_IP, OUR_IP, IpProtocol::Udp, &udp(7, &[7u8; 1472]));
    let (drops, _) = run(&eth(US, EtherType::Ipv4, &fits));
    assert!(drops.is_empty(), "{drops:?}");
}

#[test]
fn transport_drops() {
    let short = ip(PEER_IP, OUR_IP, IpProtocol::Udp, &[0u8; 7]);
    expect(&eth(US, EtherType::Ipv4, &short), DropReason::UdpMalformed);
    let mut bad = udp(7, b"hello");
    bad[6] ^= 0xff;
    let bad = ip(PEER_IP, OUR_IP, IpProtocol::Udp, &bad);
    expect(&eth(US, EtherType::Ipv4, &bad), DropReason::UdpBadChecksum);
    let tcp = ip(PEER_IP, OUR_IP, IpProtocol::Tcp, &[0u8; 20]);
    expect(&eth(US, EtherType::Ipv4, &tcp), DropReason::TcpNoLayer);
    let mut icmp = vec![0u8; 12];
    Icmpv4Repr::EchoRequest {
        ident: 1,
        seq_no: 1,
        data: b"ping",
    }
    .emit(
        &mut Icmpv4Packet::new_unchecked(&mut icmp[..]),
        ChecksumMode::Full,
    );
    let mut bad = icmp.clone();
    bad[2] ^= 1;
    expect(
        &eth(
            US,
            EtherType::Ipv4,
            &ip(PEER_IP, OUR_IP, IpProtocol::Icmp, &bad),
        ),
        DropReason::IcmpBadChecksum,
    );
    expect(
        &eth(
            US,
            EtherType::Ipv4,
            &ip(PEER_IP, OUR_IP, IpProtocol::Icmp, &icmp[..4]),
        ),
        DropReason::IcmpMalformed,
    );
    let mut redirect = icmp.clone();
    redirect[0] = 5;
    Icmpv4Packet::new_unchecked(&mut redirect[..]).fill_checksum();
    expect(
        &eth(
            US,
            EtherType::Ipv4,
            &ip(PEER_IP, OUR_IP, IpProtocol::Icmp, &redirect),
        ),
        DropReason::IcmpUnsupported,
    );
    let to_bcast = ip(
        PEER_IP,
        Ipv4Addr::new(198, 18, 0, 255),
        IpProtocol::Icmp,
        &icmp,
    );
    expect(
        &eth(EthernetAddress::BROADCAST, EtherType::Ipv4, &to_bcast),
        DropReason::IcmpBroadcastEcho,
    );
    // A good echo request is answered.
    let (drops, sent) = run(&eth(
        US,
        EtherType::Ipv4,
        &ip(PEER_IP, OUR_IP, IpProtocol::Icmp, &icmp),
    ));
    assert!(drops.is_empty());
    assert_eq!(sent, 1);
}

#[test]
fn arp_drops() {
    let arp = |op, sha: EthernetAddress, spa: Ipv4Addr, tpa: Ipv4Addr| {
        let mut p = [0u8; 28];
        ArpRepr {
            operation: op,
            source_hardware_addr: sha,
            source_protocol_addr: spa,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: tpa,
        }
        .emit(&mut ArpPacket::new_unchecked(&mut p[..]));
        eth(EthernetAddress::BROADCAST, EtherType::Arp, &p)
    };
    let req = arp(ArpOperation::Request, PEER, PEER_IP, OUR_IP);
    expect(&req[..14 + 27], DropReason::ArpTruncated);
    let mut f = req.clone();
    f[14 + 1] = 6; // hardware type 6
    expect(&f, DropReason::ArpUnsupported);
    expect(
        &arp(ArpOperation::Unknown(9), PEER, PEER_IP, OUR_IP),
        DropReason::ArpUnsupported,
    );
    expect(
        &arp(
            ArpOperation::Request,
            EthernetAddress::BROADCAST,
            PEER_IP,
            OUR_IP,
        ),
        DropReason::ArpBadSource,
    );
    expect(
        &arp(
            ArpOperation::Request,
            EthernetAddress([2, 0, 0, 0, 0, 7]),
            OUR_IP,
            PEER_IP,
        ),
        DropReason::ArpAddressConflict,
    );
    expect(
        &arp(
            ArpOperation::Request,
            EthernetAddress([2, 0, 0, 0, 0, 7]),
            Ipv4Addr::new(198, 18, 0, 7),
            PEER_IP,
        ),
        DropReason::ArpNotForUs,
    );
    let (drops, sent) = run(&req);
    assert!(drops.is_empty());
    assert_eq!(sent, 1, "a reply");
}

#[test]
fn config_is_validated() {
    let base = || InterfaceConfig::new(US).address(IpCidr::new(IpAddr::V4(OUR_IP), 24).unwrap());
    assert_eq!(
        Interface::new(base().mtu(67)).unwrap_err(),
        ConfigError::MtuTooSmall
    );
    assert_eq!(
        Interface::new(InterfaceConfig::new(EthernetAddress::BROADCAST)).unwrap_err(),
        ConfigError::BadMac
    );
    assert_eq!(
        Interface::new(base().gateway(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)))).unwrap_err(),
        ConfigError::GatewayNotOnLink
    );
    assert_eq!(
        Interface::new(base().address(IpCidr::new("::1".parse().unwrap(), 128).unwrap()))
            .unwrap_err(),
        ConfigError::BadAddress
    );
    assert_eq!(
        Interface::new(
            base()
                .address(IpCidr::new("2001:2::1".parse().unwrap(), 64).unwrap())
                .mtu(1279)
        )
        .unwrap_err(),
        ConfigError::MtuTooSmall
    );
    assert_eq!(
        Interface::new(base().address(IpCidr::new(IpAddr::V4(Ipv4Addr::BROADCAST), 32).unwrap()))
            .unwrap_err(),
        ConfigError::BadAddress
    );
}

#[test]
fn static_entry_releases_parked_packets() {
    let mut i = iface();
    let mut frames = Vec::new();
    let mut sink = |len: usize, fill: &mut dyn FnMut(&mut [u8])| {
        let mut b = vec![0u8; len];
        fill(&mut b);
        frames.push(b);
        true
    };
    let t = Instant::from_secs(1);
    let h = i
        .sockets_mut()
        .add_udp(UdpSocket::new(UdpConfig::default()))
        .unwrap();
    i.sockets_mut()
        .udp_mut(h)
        .unwrap()
        .send_to(b"x", "198.18.0.2:9".parse().unwrap())
        .unwrap();
    i.egress(t, &mut sink);
    assert_eq!(i.pending().0, 1);
    i.add_static_neighbor(IpAddr::V4(PEER_IP), PEER).unwrap();
    assert_eq!(i.poll_at(), Some(Instant::ZERO));
    i.egress(t, &mut sink);
    assert_eq!(i.pending().0, 0);
    let last = frames.last().unwrap();
    assert_eq!(&last[0..6], &PEER.0);
    assert_eq!(last.len(), 14 + 20 + 8 + 1);
}

/// An ICMP error from the peer quoting `quoted` (a transport header and payload we
/// sent from OUR_IP to PEER_IP).
fn icmp_error(reason: Icmpv4DstUnreachable, proto: IpProtocol, quoted: &[u8]) -> Vec<u8> {
    let msg = Icmpv4Repr::DstUnreachable {
        reason,
        header: Ipv4Repr::new(OUR_IP, PEER_IP, proto, quoted.len(), 64),
        data: quoted,
    };
    let mut b = vec![0u8; msg.buffer_len()];
    msg.emit(
        &mut Icmpv4Packet::new_unchecked(&mut b[..]),
        ChecksumMode::Full,
    );
    eth(
        US,
        EtherType::Ipv4,
        &ip(PEER_IP, OUR_IP, IpProtocol::Icmp, &b),
    )
}

/// The frame carrying TCP segment `seg` from the peer to us, checksums done.
fn peer_tcp_frame(seg: &ulnet_wire::TcpRepr<'_>) -> Vec<u8> {
    let mut b = vec![0u8; seg.buffer_len()];
    seg.emit(
        &mut ulnet_wire::TcpPacket::new_unchecked(&mut b[..]),
        &IpAddr::V4(PEER_IP),
        &IpAddr::V4(OUR_IP),
        ChecksumMode::Full,
    );
    eth(
        US,
        EtherType::Ipv4,
        &ip(PEER_IP, OUR_IP, IpProtocol::Tcp, &b),
    )
}

/// A bare SYN from the peer's port 5555 to our port 80.
fn peer_syn() -> ulnet_wire::TcpRepr<'static> {
    ulnet_wire::TcpRepr {
        src_port: 5555,
        dst_port: 80,
        seq: ulnet_wire::SeqNumber(1000),
        ack: ulnet_wire::SeqNumber(0),
        flags: ulnet_wire::TcpFlags::SYN,
        window: 65535,
        urgent: 0,
        options: ulnet_wire::TcpOptions::none(),
        payload: &[],
        payload_rest: &[],
    }
}

fn feed(i: &mut Interface, now: Instant, frame: &[u8]) {
    let mut sink = |len: usize, fill: &mut dyn FnMut(&mut [u8])| {
        let mut b = [0u8; 2048];
        fill(&mut b[..len]);
        true
    };
    i.ingress(now, frame, &mut sink);
}

/// Issue 12 defect 8: a port unreachable about a datagram of a *connected* UDP socket
/// fails its next receive (and only that one) with ConnectionRefused, as Linux's
/// ECONNREFUSED; an unconnected socket, or one connected elsewhere, ignores it.
#[test]
fn port_unreachable_refuses_a_connected_udp_socket_only() {
    let mut quoted = vec![0u8; 8];
    quoted[0..2].copy_from_slice(&7u16.to_be_bytes());
    quoted[2..4].copy_from_slice(&5000u16.to_be_bytes());
    let frame = icmp_error(
        Icmpv4DstUnreachable::PortUnreachable,
        IpProtocol::Udp,
        &quoted,
    );
    let peer = SocketAddr::new(IpAddr::V4(PEER_IP), 5000);
    let now = Instant::from_secs(1);
    for connect in [
        None,
        Some(SocketAddr::new(IpAddr::V4(PEER_IP), 5001)),
        Some(peer),
    ] {
        let mut i = iface();
        let h = i.sockets().udp_sockets().next().unwrap().0;
        i.sockets_mut().udp_mut(h).unwrap().connect(connect);
        feed(&mut i, now, &frame);
        let s = i.sockets_mut().udp_mut(h).unwrap();
        let mut buf = [0u8; 8];
        let got = s.recv_from(&mut buf);
        let st = i.stats().clone();
        assert_eq!(st.icmp_errors_received, 1);
        if connect == Some(peer) {
            assert_eq!(got, Err(crate::socket::RecvError::ConnectionRefused));
            assert_eq!(st.icmp_errors_delivered, 1);
            let s = i.sockets_mut().udp_mut(h).unwrap();
            assert_eq!(
                s.recv_from(&mut buf),
                Err(crate::socket::RecvError::Exhausted)
            );
        } else {
            assert_eq!(got, Err(crate::socket::RecvError::Exhausted));
            assert_eq!(st.icmp_errors_unclaimed, 1);
        }
        assert_eq!(st.total_drops(), 0);
    }
    // A quote cut short of the 8 transport bytes: counted as a bad quote.
    let mut i = iface();
    feed(
        &mut i,
        now,
        &icmp_error(
            Icmpv4DstUnreachable::PortUnreachable,
            IpProtocol::Udp,
            &quoted[..6],
        ),
    );
    assert_eq!(i.stats().icmp_errors_bad_quote, 1);
}

/// The TCP path through the interface: a port unreachable quoting our SYN aborts the
/// connection; one quoting another sequence number is dropped by TCP (RFC 5927 §4.1).
#[test]
fn port_unreachable_reaches_tcp_through_the_interface() {
    use crate::tcp::{ConnError, State, Tcp, TcpConfig};
    let mut i = iface();
    i.add_static_neighbor(IpAddr::V4(PEER_IP), PEER).unwrap();
    i.set_tcp(Tcp::new(TcpConfig::default(), [7; 16]));
    let now = Instant::from_secs(1);
    let local = SocketAddr::new(IpAddr::V4(OUR_IP), 40000);
    let remote = SocketAddr::new(IpAddr::V4(PEER_IP), 80);
    let s = i.tcp_mut().unwrap().connect(now, local, remote).unwrap();
    let mut syn = Vec::new();
    let mut sink = |len: usize, fill: &mut dyn FnMut(&mut [u8])| {
        let mut b = vec![0u8; len];
        fill(&mut b);
        syn = b;
        true
    };
    i.egress(now, &mut sink);
    // Ethernet 14 + IPv4 20, then the TCP header: its first 8 bytes are the quote.
    let tcp_hdr = &syn[34..42];
    let mut forged = tcp_hdr.to_vec();
    forged[4] ^= 0x80;
    for (quote, state) in [(&forged[..], State::SynSent), (tcp_hdr, State::Closed)] {
        let f = icmp_error(
            Icmpv4DstUnreachable::PortUnreachable,
            IpProtocol::Tcp,
            quote,
        );
        feed(&mut i, now, &f);
        assert_eq!(i.tcp().unwrap().state(s).unwrap(), state);
    }
    let tcp = i.tcp().unwrap();
    assert_eq!(tcp.readiness(s).unwrap().error, Some(ConnError::Refused));
    assert_eq!(tcp.stats().icmp_out_of_window, 1);
    assert_eq!(tcp.stats().icmp_aborts, 1);
    assert_eq!(i.stats().icmp_errors_delivered, 1);
    assert_eq!(i.stats().icmp_errors_unclaimed, 1);
}

/// The MSS we offer follows the link: a default `TcpConfig` on a 9000-byte interface
/// offers 8960 (RFC 9293 §3.7.1: MTU less 40), on 1500 it offers 1460, and a lower
/// `TcpConfig::mtu` still caps it. (A default of 1500 once kept jumbo links at 1460.)
#[test]
fn syn_mss_follows_the_interface_mtu() {
    use crate::tcp::{Tcp, TcpConfig};
    use ulnet_wire::{TcpOptions, TcpPacket};
    let offered = |link_mtu: usize, cap: Option<usize>| -> u16 {
        let config = InterfaceConfig::new(US)
            .address(IpCidr::new(IpAddr::V4(OUR_IP), 24).unwrap())
            .mtu(link_mtu);
        let mut i = Interface::new(config).unwrap();
        i.add_static_neighbor(IpAddr::V4(PEER_IP), PEER).unwrap();
        let mut cfg = TcpConfig::default();
        if let Some(c) = cap {
            cfg.mtu = c;
        }
        i.set_tcp(Tcp::new(cfg, [7; 16]));
        let now = Instant::from_secs(1);
        let local = SocketAddr::new(IpAddr::V4(OUR_IP), 40000);
        let remote = SocketAddr::new(IpAddr::V4(PEER_IP), 80);
        i.tcp_mut().unwrap().connect(now, local, remote).unwrap();
        let mut syn = Vec::new();
        i.egress(now, &mut |len: usize, fill: &mut dyn FnMut(&mut [u8])| {
            let mut b = vec![0u8; len];
            fill(&mut b);
            syn = b;
            true
        });
        let seg = TcpPacket::new_checked(&syn[34..]).unwrap();
        TcpOptions::parse(seg.options())
            .unwrap()
            .mss
            .expect("the SYN carries an MSS option")
    };
    assert_eq!(offered(1500, None), 1460);
    assert_eq!(offered(9000, None), 8960);
    assert_eq!(offered(9000, Some(4000)), 3960);
}

/// Frames the interface sends for UDP datagrams from a fresh socket to `dsts` (in
/// order, all at one instant): the IPv4 identification of each.
fn udp_idents(i: &mut Interface, dsts: &[Ipv4Addr]) -> Vec<u16> {
    let t = Instant::from_secs(1);
    let h = i
        .sockets_mut()
        .add_udp(UdpSocket::new(UdpConfig::default()))
        .unwrap();
    let mut ids = Vec::new();
    for &d in dsts {
        i.sockets_mut()
            .udp_mut(h)
            .unwrap()
            .send_to(b"x", SocketAddr::new(IpAddr::V4(d), 9))
            .unwrap();
        let mut sink = |len: usize, fill: &mut dyn FnMut(&mut [u8])| {
            let mut b = vec![0u8; len];
            fill(&mut b);
            // IPv4 only (the first egress also announces our address by ARP).
            if b[12..14] == [0x08, 0x00] {
                ids.push(Ipv4Packet::new_unchecked(&b[14..]).ident());
            }
            true
        };
        i.egress(t, &mut sink);
    }
    ids
}

/// Issue 13 item 6: the IPv4 identification is not one global counter. Traffic to one
/// destination does not advance another's sequence (no idle scan, no rate leak), and
/// sequences start at secret points (RFC 6864, RFC 7739).
#[test]
fn issue_13_ipv4_ids_are_per_destination() {
    const OTHER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 3);
    let mut i = iface();
    i.set_secret([0x42; 16]);
    i.add_static_neighbor(IpAddr::V4(PEER_IP), PEER).unwrap();
    i.add_static_neighbor(IpAddr::V4(OTHER), PEER).unwrap();
    let mut dsts = vec![PEER_IP; 5];
    dsts.extend([OTHER; 50]);
    dsts.extend([PEER_IP; 5]);
    let ids = udp_idents(&mut i, &dsts);
    assert_eq!(ids.len(), 60);
    let to_peer: Vec<u16> = ids[..5].iter().chain(&ids[55..]).copied().collect();
    let to_other = &ids[5..55];
    // 50 datagrams to OTHER in between did not move PEER's sequence.
    for (k, &id) in to_peer.iter().enumerate() {
        assert_eq!(id, to_peer[0].wrapping_add(k as u16), "{to_peer:?}");
    }
    for (k, &id) in to_other.iter().enumerate() {
        assert_eq!(id, to_other[0].wrapping_add(k as u16));
    }
    // Unrelated starting points, and not the old counter's 1, 2, 3...
    assert_ne!(to_other[0], to_peer[0].wrapping_add(5));
    assert_ne!(to_peer[0], 1);
    // Another secret, another sequence.
    let mut j = iface();
    j.set_secret([0x43; 16]);
    j.add_static_neighbor(IpAddr::V4(PEER_IP), PEER).unwrap();
    assert_ne!(udp_idents(&mut j, &[PEER_IP])[0], to_peer[0]);
}

/// Issue 13 item 8: a datagram to us with a protocol we do not serve gets an ICMP
/// protocol unreachable (RFC 1122 §3.2.2.1), quoting it; never when it was broadcast;
/// rate-limited like every ICMP error.
#[test]
fn issue_13_unknown_protocol_gets_protocol_unreachable() {
    let mut i = iface();
    i.add_static_neighbor(IpAddr::V4(PEER_IP), PEER).unwrap();
    let gre = ip(PEER_IP, OUR_IP, IpProtocol::Unknown(47), b"tunnel");
    let frame = eth(US, EtherType::Ipv4, &gre);
    let mut out = Vec::new();
    let mut sink = |len: usize, fill: &mut dyn FnMut(&mut [u8])| {
        let mut b = vec![0u8; len];
        fill(&mut b);
        out.push(b);
        true
    };
    let now = Instant::from_secs(1);
    i.ingress(now, &frame, &mut sink);
    assert_eq!(out.len(), 1);
    let ipp = Ipv4Packet::new_checked(&out[0][14..]).unwrap();
    assert_eq!(ipp.dst_addr(), PEER_IP);
    assert_eq!(ipp.protocol(), IpProtocol::Icmp);
    let icmp = Icmpv4Packet::new_checked(ipp.payload()).unwrap();
    let repr = Icmpv4Repr::parse(&icmp, ChecksumMode::Full).unwrap();
    match repr {
        Icmpv4Repr::DstUnreachable {
            reason,
            header,
            data,
        } => {
            assert_eq!(reason, Icmpv4DstUnreachable::ProtoUnreachable);
            assert_eq!(header.protocol, IpProtocol::Unknown(47));
            assert_eq!(data, b"tunnel");
        }
        other => panic!("expected protocol unreachable, got {other:?}"),
    }
    assert_eq!(i.stats().icmp_unreachables_sent, 1);

    // Broadcast: dropped and counted, never answered.
    out.clear();
    let bcast = ip(
        PEER_IP,
        Ipv4Addr::new(198, 18, 0, 255),
        IpProtocol::Unknown(47),
        b"x",
    );
    i.ingress(
        now,
        &eth(EthernetAddress::BROADCAST, EtherType::Ipv4, &bcast),
        &mut |len: usize, fill: &mut dyn FnMut(&mut [u8])| {
            let mut b = vec![0u8; len];
            fill(&mut b);
            out.push(b);
            true
        },
    );
    assert!(out.is_empty());
    assert_eq!(i.stats().icmp_unreachables_sent, 1);

    // A flood is answered only up to the burst, then rate-limited and counted.
    let mut sent = 0;
    for _ in 0..200 {
        i.ingress(
            now,
            &frame,
            &mut |len: usize, fill: &mut dyn FnMut(&mut [u8])| {
                let mut b = vec![0u8; len];
                fill(&mut b);
                sent += 1;
                true
            },
        );
    }
    let burst = Limits::default().icmp_error_burst as u64;
    assert_eq!(sent, burst - 1);
    assert_eq!(i.stats().icmp_rate_limited, 200 - (burst - 1));
}

/// The (TOS, TTL) of every IPv4 frame `i` sends now, after ARP.
fn tos_ttl_out(i: &mut Interface, now: Instant) -> Vec<(u8, u8)> {
    let mut v = Vec::new();
    let mut sink = |len: usize, fill: &mut dyn FnMut(&mut [u8])| {
        let mut b = vec![0u8; len];
        fill(&mut b);
        if b[12..14] == [0x08, 0x00] {
            let p = Ipv4Packet::new_unchecked(&b[14..]);
            v.push((p.dscp_ecn(), p.ttl()));
        }
        true
    };
    i.egress(now, &mut sink);
    v
}

/// A socket's TOS and TTL (`IP_TOS`, `IP_TTL`) reach the IPv4 header of what it sends:
/// the whole byte for UDP; for TCP the DSCP bits only (ECN is the transport's, RFC 3168
/// §6.1.1), on a connection and on those a listener accepts. Other sockets keep the
/// defaults (TOS 0, the interface's TTL).
#[test]
fn socket_tos_and_ttl_reach_the_ip_header() {
    use crate::tcp::{SocketOption, Tcp, TcpConfig};
    use crate::IpFields;
    let mut i = iface();
    i.add_static_neighbor(IpAddr::V4(PEER_IP), PEER).unwrap();
    i.set_tcp(Tcp::new(TcpConfig::default(), [7; 16]));
    let now = Instant::from_secs(1);
    let dst = SocketAddr::new(IpAddr::V4(PEER_IP), 9);
    let marked = i
        .sockets_mut()
        .add_udp(UdpSocket::new(UdpConfig::default()))
        .unwrap();
    let plain = i
        .sockets_mut()
        .add_udp(UdpSocket::new(UdpConfig::default()))
        .unwrap();
    let fields = IpFields {
        tos: 0xb9,
        hop_limit: Some(33),
    };
    let s = i.sockets_mut().udp_mut(marked).unwrap();
    s.set_ip_fields(fields);
    s.send_to(b"x", dst).unwrap();
    assert_eq!(tos_ttl_out(&mut i, now), [(0xb9, 33)]);
    i.sockets_mut()
        .udp_mut(plain)
        .unwrap()
        .send_to(b"x", dst)
        .unwrap();
    assert_eq!(tos_ttl_out(&mut i, now), [(0, 64)]);

    let local = SocketAddr::new(IpAddr::V4(OUR_IP), 40000);
    let remote = SocketAddr::new(IpAddr::V4(PEER_IP), 80);
    let opts = [SocketOption::Tos(0xb9), SocketOption::HopLimit(Some(33))];
    let tcp = i.tcp_mut().unwrap();
    let c = tcp.connect_with(now, local, remote, &opts).unwrap();
    assert_eq!(tos_ttl_out(&mut i, now), [(0xb8, 33)], "the SYN");
    // Changed on the connection: the next segment (a retransmitted SYN) follows.
    let tcp = i.tcp_mut().unwrap();
    tcp.set_option(now, c, SocketOption::HopLimit(None))
        .unwrap();
    tcp.set_option(now, c, SocketOption::Tos(0x20)).unwrap();
    let later = now + crate::time::Duration::from_secs(2);
    assert_eq!(tos_ttl_out(&mut i, later), [(0x20, 64)]);

    // A listener's options reach its SYN-ACK.
    let tcp = i.tcp_mut().unwrap();
    let l = tcp
        .listen(SocketAddr::new(IpAddr::V4(OUR_IP), 80), 4)
        .unwrap();
    tcp.set_listener_option(l, SocketOption::Tos(0x48)).unwrap();
    tcp.set_listener_option(l, SocketOption::HopLimit(Some(5)))
        .unwrap();
    let syn = peer_syn();
    let frame = peer_tcp_frame(&syn);
    let mut out = Vec::new();
    let mut sink = |len: usize, fill: &mut dyn FnMut(&mut [u8])| {
        let mut b = vec![0u8; len];
        fill(&mut b);
        out.push(b);
        true
    };
    let later = later + crate::time::Duration::from_millis(10);
    i.ingress(later, &frame, &mut sink);
    let mut got = tos_ttl_out(&mut i, later);
    for b in &out {
        let p = Ipv4Packet::new_unchecked(&b[14..]);
        got.push((p.dscp_ecn(), p.ttl()));
    }
    assert_eq!(got, [(0x48, 5)], "the SYN-ACK");
}

/// A sink that takes bursts through `send_gso` only, as a channel without gathering does.
struct BurstRecorder(Vec<(Vec<u8>, Gso)>);

impl TxSink for BurstRecorder {
    fn send(&mut self, _len: usize, _fill: &mut dyn FnMut(&mut [u8])) -> bool {
        false
    }

    fn send_gso(&mut self, len: usize, gso: Gso, fill: &mut dyn FnMut(&mut [u8])) -> GsoSent {
        let mut frame = vec![0xee; len];
        fill(&mut frame);
        self.0.push((frame, gso));
        GsoSent::Sent
    }
}

#[test]
fn a_burst_given_in_parts_reaches_a_plain_sink_as_one_frame() {
    let mut sink = BurstRecorder(Vec::new());
    let gso = Gso {
        segment_size: 1448,
        l4_offset: 34,
        header_len: 66,
        ipv6: false,
    };
    let head: Vec<u8> = (0..66u8).collect();
    let payload: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(sink.send_gso_parts(&head, &payload, gso), GsoSent::Sent);
    let (frame, g) = &sink.0[0];
    assert_eq!(*g, gso);
    assert_eq!(frame.len(), 66 + 3000);
    assert_eq!(&frame[..66], &head[..]);
    assert_eq!(&frame[66..], &payload[..]);
}

/// A sink that records every frame, those sent with an offload apart.
#[derive(Default)]
struct OffloadSink {
    frames: Vec<Vec<u8>>,
    offloaded: Vec<(Vec<u8>, Gso)>,
}

impl TxSink for OffloadSink {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        let mut b = vec![0u8; len];
        fill(&mut b);
        self.frames.push(b);
        true
    }

    fn send_gso(&mut self, len: usize, gso: Gso, fill: &mut dyn FnMut(&mut [u8])) -> GsoSent {
        let mut b = vec![0u8; len];
        fill(&mut b);
        self.offloaded.push((b, gso));
        GsoSent::Sent
    }
}

/// The TCP frames among `s`'s plain ones (the interface announces its address first).
fn tcp_frames(s: &OffloadSink) -> Vec<Vec<u8>> {
    s.frames
        .iter()
        .filter(|f| f[12..14] == [8, 0] && f[23] == 6)
        .cloned()
        .collect()
}

/// An interface on a 65535-byte link, with the channel's offload (`gso_max_len`) or
/// without, and a connection to the peer established by a SYN-ACK offering MSS 65495
/// and a large window: the interface, the connection, its ISS and the SYN-ACK sent.
fn jumbo_link(
    offload: bool,
) -> (
    Interface,
    crate::tcp::SocketHandle,
    ulnet_wire::SeqNumber,
    ulnet_wire::TcpRepr<'static>,
) {
    use crate::tcp::{Tcp, TcpConfig};
    use ulnet_wire::{SeqNumber, TcpFlags, TcpOptions, TcpPacket, TcpRepr};
    let mut config = InterfaceConfig::new(US)
        .address(IpCidr::new(IpAddr::V4(OUR_IP), 24).unwrap())
        .mtu(65535);
    if offload {
        config = config.gso_max_len(65535 + 14);
    }
    let mut i = Interface::new(config).unwrap();
    i.add_static_neighbor(IpAddr::V4(PEER_IP), PEER).unwrap();
    i.set_tcp(Tcp::new(TcpConfig::default(), [7; 16]));
    let now = Instant::from_secs(1);
    let local = SocketAddr::new(IpAddr::V4(OUR_IP), 40000);
    let remote = SocketAddr::new(IpAddr::V4(PEER_IP), 80);
    let c = i.tcp_mut().unwrap().connect(now, local, remote).unwrap();
    let mut sink = OffloadSink::default();
    i.egress(now, &mut sink);
    let syn = tcp_frames(&sink).remove(0);
    let iss = TcpPacket::new_checked(&syn[34..]).unwrap().seq_number();
    let mut options = TcpOptions::none();
    options.mss = Some(65495);
    options.window_scale = Some(7);
    let syn_ack = TcpRepr {
        src_port: 80,
        dst_port: 40000,
        seq: SeqNumber(5000),
        ack: iss + 1,
        flags: TcpFlags::SYN | TcpFlags::ACK,
        window: 65535,
        urgent: 0,
        options,
        payload: &[],
        payload_rest: &[],
    };
    i.ingress(now, &peer_tcp_frame(&syn_ack), &mut sink);
    (i, c, iss, syn_ack)
}

/// Finishes the TCP checksum of an offloaded IPv4 frame as a device does: the sum from
/// the TCP header to the end (the field holding the pseudo-header sum), complemented.
fn finish_checksum(frame: &mut [u8]) {
    let sum = !ulnet_wire::checksum::data(&frame[34..]);
    frame[34 + 16..34 + 18].copy_from_slice(&sum.to_be_bytes());
}

/// On a 65535-byte link with the channel's offload, a full-sized segment (one per frame,
/// nothing to cut) goes to the channel whole with its checksum to finish: the TCP
/// checksum field holds the pseudo-header sum, and finished as a device does it, the
/// segment verifies and carries the bytes written. A segment under 16 KB (the tail of
/// the write) is written into a frame and summed here as before.
#[test]
fn jumbo_segments_leave_their_checksum_to_the_channel() {
    use ulnet_wire::{checksum, SeqNumber, TcpFlags, TcpOptions, TcpPacket, TcpRepr};
    let (mut i, c, iss, syn_ack) = jumbo_link(true);
    let now = Instant::from_secs(1);
    let mut sink = OffloadSink::default();
    let data: Vec<u8> = (0..65483u32 + 1000).map(|n| (n % 251) as u8).collect();
    let n = i.tcp_mut().unwrap().send(now, c, &data).unwrap();
    assert_eq!(n, data.len());
    i.egress(now, &mut sink);

    assert_eq!(sink.offloaded.len(), 1, "one jumbo segment offloaded");
    let (mut frame, gso) = sink.offloaded.pop().unwrap();
    assert_eq!((gso.segment_size, gso.l4_offset, gso.ipv6), (0, 34, false));
    let tcp_len = frame.len() - 34;
    let payload_len = tcp_len - (usize::from(gso.header_len) - 34);
    assert!(payload_len >= 16 * 1024, "a {payload_len}-byte segment");
    let (us, peer) = (IpAddr::V4(OUR_IP), IpAddr::V4(PEER_IP));
    let field = u16::from_be_bytes([frame[34 + 16], frame[34 + 17]]);
    assert_eq!(
        field,
        checksum::pseudo_header(&us, &peer, IpProtocol::Tcp, tcp_len as u32),
        "the pseudo-header sum, for the device to finish"
    );
    finish_checksum(&mut frame);
    let tcp = TcpPacket::new_checked(&frame[34..]).unwrap();
    assert!(tcp.verify_checksum(&us, &peer));
    assert_eq!(tcp.seq_number(), iss + 1);
    assert_eq!(tcp.payload(), &data[..payload_len]);
    assert!(Ipv4Packet::new_checked(&frame[14..])
        .unwrap()
        .verify_checksum());
    assert_eq!(i.stats().tcp_csum_offloaded, 1);
    assert_eq!(i.stats().gso_bursts, 0);

    // The rest, under 16 KB (held back by Nagle's rule until the peer's ACK), in a
    // frame of its own with its checksum done.
    let ack = TcpRepr {
        seq: SeqNumber(5001),
        ack: iss + 1 + payload_len as u32,
        flags: TcpFlags::ACK,
        window: 2048,
        options: TcpOptions::none(),
        ..syn_ack
    };
    let frame = peer_tcp_frame(&ack);
    let mut sink = OffloadSink::default();
    i.ingress(now, &frame, &mut sink);
    i.egress(now, &mut sink);
    assert!(sink.offloaded.is_empty());
    let frames = tcp_frames(&sink);
    assert_eq!(frames.len(), 1, "{} frames", frames.len());
    let tail = TcpPacket::new_checked(&frames[0][34..]).unwrap();
    assert!(tail.verify_checksum(&us, &peer));
    assert_eq!(tail.payload(), &data[payload_len..]);
}

/// The frame the offload sends, finished as a device finishes it, is the frame the
/// interface builds without the offload, byte for byte (addresses, IPv4 ID and header
/// checksum, TCP header and options, payload, checksum), at the threshold and above.
#[test]
fn an_offloaded_jumbo_segment_finished_by_the_device_is_the_frame_built_here() {
    let now = Instant::from_secs(1);
    for len in [16 * 1024, 16 * 1024 + 1, 40_001, 65_483] {
        let data: Vec<u8> = (0..len as u32).map(|n| (n % 253) as u8).collect();
        let mut got = Vec::new();
        for offload in [true, false] {
            let (mut i, c, _, _) = jumbo_link(offload);
            let mut sink = OffloadSink::default();
            assert_eq!(i.tcp_mut().unwrap().send(now, c, &data).unwrap(), len);
            i.egress(now, &mut sink);
            let frame = if offload {
                assert!(tcp_frames(&sink).is_empty(), "{len}: a plain frame");
                let (mut f, gso) = sink.offloaded.pop().expect("an offloaded frame");
                assert_eq!(gso.segment_size, 0);
                finish_checksum(&mut f);
                f
            } else {
                assert!(sink.offloaded.is_empty());
                tcp_frames(&sink).pop().expect("a plain frame")
            };
            got.push(frame);
        }
        assert_eq!(got[0].len(), 14 + 20 + 20 + len, "{len}");
        assert!(got[0] == got[1], "{len}: the frames differ");
    }
    // Below the threshold the offload is not used: the frame is built and summed here.
    let (mut i, c, _, _) = jumbo_link(true);
    let mut sink = OffloadSink::default();
    let data = vec![5u8; 16 * 1024 - 1];
    i.tcp_mut().unwrap().send(now, c, &data).unwrap();
    i.egress(now, &mut sink);
    assert!(sink.offloaded.is_empty());
    assert_eq!(tcp_frames(&sink).len(), 1);
}

/// A veth whose other end offloads transmit checksums hands over Linux's
/// `CHECKSUM_PARTIAL` packets as they are: the transport checksum field holds the
/// pseudo-header sum only. An interface told its link does that (`rx_unfinished`)
/// accepts such a TCP segment or UDP datagram and counts it; any other interface drops
/// it as a bad checksum, and a field one bit off is a bad checksum everywhere.
#[test]
fn unfinished_checksums_pass_only_where_the_link_delivers_them() {
    use crate::tcp::{Tcp, TcpConfig};
    let syn = peer_syn();
    let (src, dst) = (IpAddr::V4(PEER_IP), IpAddr::V4(OUR_IP));
    let mut tcp = vec![0u8; syn.buffer_len()];
    syn.emit(
        &mut ulnet_wire::TcpPacket::new_unchecked(&mut tcp[..]),
        &src,
        &dst,
        ChecksumMode::Partial,
    );
    let mut udp = vec![0u8; 8 + 5];
    UdpRepr {
        src_port: 5000,
        dst_port: 7,
    }
    .emit(
        &mut UdpPacket::new_unchecked(&mut udp[..]),
        &src,
        &dst,
        5,
        |p| p.copy_from_slice(b"hello"),
        ChecksumMode::Partial,
    );
    for unfinished_ok in [false, true] {
        for (proto, seg, bad) in [
            (IpProtocol::Tcp, &tcp, DropReason::TcpBadChecksum),
            (IpProtocol::Udp, &udp, DropReason::UdpBadChecksum),
        ] {
            for flip in [false, true] {
                let mut seg = seg.clone();
                if flip {
                    // The checksum field's last bit: TCP's at 16..18, UDP's at 6..8.
                    let at = if proto == IpProtocol::Tcp { 17 } else { 7 };
                    seg[at] ^= 1;
                }
                let caps = ChecksumCaps {
                    rx_unfinished: unfinished_ok,
                    ..ChecksumCaps::default()
                };
                let config = InterfaceConfig::new(US)
                    .address(IpCidr::new(IpAddr::V4(OUR_IP), 24).unwrap())
                    .checksum(caps);
                let mut i = Interface::new(config).unwrap();
                i.add_static_neighbor(src, PEER).unwrap();
                i.set_tcp(Tcp::new(TcpConfig::default(), [7; 16]));
                let mut s = UdpSocket::new(UdpConfig::default());
                s.bind("0.0.0.0:7".parse().unwrap()).unwrap();
                i.sockets_mut().add_udp(s).unwrap();
                let frame = eth(US, EtherType::Ipv4, &ip(PEER_IP, OUR_IP, proto, &seg));
                feed(&mut i, Instant::from_secs(1), &frame);
                let st = i.stats();
                let drops: Vec<_> = st.nonzero_drops().collect();
                let what = format!("{proto:?}, unfinished_ok {unfinished_ok}, flipped {flip}");
                if unfinished_ok && !flip {
                    assert!(drops.is_empty(), "{what}: {drops:?}");
                    assert_eq!(st.rx_checksum_unfinished, 1, "{what}");
                    assert_eq!(st.tcp_delivered + st.udp_delivered, 1, "{what}");
                } else {
                    assert_eq!(drops, [(bad, 1)], "{what}");
                    assert_eq!(st.rx_checksum_unfinished, 0, "{what}");
                }
            }
        }
    }
}
