//! ARP through the interface: resolution, stale entries probed unicast, the bounded queue
//! of packets waiting for an answer, retries and give-up, gratuitous announcements,
//! static entries, and answering (or not) requests from the wire.

mod common;

use common::{collect, eth_frame, inject, ip, ipa, mac, sa, Sim};
use ulnet_channel::sim::{Endpoint, LinkConfig, Wire};
use ulnet_stack::iface::{DropReason, Limits, Lookup, NeighborState};
use ulnet_stack::socket::{UdpConfig, UdpHandle, UdpSocket};
use ulnet_stack::time::Duration;
use ulnet_wire::{ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame};

fn udp(sim: &mut Sim, node: usize, port: u16) -> UdpHandle {
    let mut s = UdpSocket::new(UdpConfig::default());
    s.bind(sa(node as u8 + 1, port)).unwrap();
    sim.iface(node).sockets_mut().add_udp(s).unwrap()
}

/// The ARP packets among `frames`, with the frame's destination MAC.
fn arps(frames: &[Vec<u8>]) -> Vec<(EthernetAddress, ArpRepr)> {
    frames
        .iter()
        .filter_map(|f| {
            let eth = EthernetFrame::new_checked(&f[..]).ok()?;
            if eth.ethertype() != EtherType::Arp {
                return None;
            }
            let repr = ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).ok()?).ok()?;
            Some((eth.dst_addr(), repr))
        })
        .collect()
}

/// Node 0 (198.18.0.1) on a hub with a raw observer endpoint.
fn lone(limits: Limits) -> (Sim, Endpoint) {
    let (wire, mut eps) = Wire::hub(5, 2, LinkConfig::new());
    let raw = eps.pop().unwrap();
    let mut sim = Sim::new(wire);
    sim.add(
        common::config(1).limits(limits),
        Box::new(eps.pop().unwrap()),
    );
    (sim, raw)
}

/// Past its time an entry goes stale, not away (RFC 1122 §2.3.2.1's unicast poll, run
/// as RFC 4861 §7.3's NUD): the next datagram leaves at once to the cached MAC, and after
/// DELAY_FIRST_PROBE_TIME a unicast request, answered, makes the entry reachable again.
/// Only the first datagram waited for a broadcast request.
#[test]
fn stale_entries_are_used_and_probed_unicast() {
    let limits = Limits {
        neighbor_ttl: Duration::from_secs(10),
        ..Limits::default()
    };
    let (wire, a, b) = Wire::pair(1, LinkConfig::new(), LinkConfig::new());
    let mut sim = Sim::new(wire);
    sim.add(common::config(1).limits(limits.clone()), Box::new(a));
    sim.add(common::config(2).limits(limits), Box::new(b));
    let tx = udp(&mut sim, 0, 1000);
    let rx = udp(&mut sim, 1, 2000);
    // Let the announcements pass first (they refresh entries that exist).
    sim.run_for(Duration::from_secs(3));
    let mut buf = [0u8; 64];
    let mut ping = |sim: &mut Sim| {
        sim.iface(0)
            .sockets_mut()
            .udp_mut(tx)
            .unwrap()
            .send_to(b"ping", sa(2, 2000))
            .unwrap();
        sim.run_for(Duration::from_millis(10));
        let got = sim
            .iface(1)
            .sockets_mut()
            .udp_mut(rx)
            .unwrap()
            .recv_from(&mut buf);
        assert_eq!(got.unwrap().0, 4);
    };
    ping(&mut sim);
    assert_eq!(sim.iface(0).stats().arp_requests_sent, 1);
    let now = sim.now();
    assert!(matches!(
        sim.iface(0).neighbors().state(ipa(2)),
        Some(NeighborState::Reachable { mac: m, .. }) if m == mac(2)
    ));
    assert_eq!(
        sim.iface(0).neighbors().lookup(ipa(2), now),
        Lookup::Found(mac(2))
    );
    sim.run_for(Duration::from_secs(11));
    assert_eq!(
        sim.iface(0).neighbors().state(ipa(2)),
        Some(NeighborState::Stale { mac: mac(2) })
    );
    // Sent at once to the cached MAC: no request, nothing parked.
    ping(&mut sim);
    assert_eq!(sim.iface(0).stats().arp_requests_sent, 1);
    assert!(matches!(
        sim.iface(0).neighbors().state(ipa(2)),
        Some(NeighborState::Delay { .. })
    ));
    // DELAY_FIRST_PROBE_TIME (5 s) later: one unicast request, answered.
    sim.run_for(Duration::from_secs(6));
    assert_eq!(sim.iface(0).stats().arp_requests_sent, 2);
    assert_eq!(sim.iface(0).stats().arp_probes_sent, 1);
    assert!(matches!(
        sim.iface(0).neighbors().state(ipa(2)),
        Some(NeighborState::Reachable { mac: m, .. }) if m == mac(2)
    ));
    assert_eq!(sim.iface(1).stats().arp_replies_sent, 2);
}

/// The probe goes to the cached MAC alone; a neighbour that no longer answers there is
/// dropped after three probes, and the next packet resolves it afresh by broadcast.
#[test]
fn unanswered_probes_end_in_a_broadcast_request() {
    let limits = Limits {
        neighbor_ttl: Duration::from_secs(10),
        ..Limits::default()
    };
    let (mut sim, mut raw) = lone(limits);
    let tx = udp(&mut sim, 0, 1000);
    sim.run_for(Duration::from_secs(3));
    collect(&mut raw);
    // The raw host announces itself: 198.18.0.9 at mac(9).
    let announce = ArpRepr {
        operation: ArpOperation::Reply,
        source_hardware_addr: mac(9),
        source_protocol_addr: ip(9),
        target_hardware_addr: mac(1),
        target_protocol_addr: ip(1),
    };
    let mut arp = vec![0u8; announce.buffer_len()];
    announce.emit(&mut ArpPacket::new_unchecked(&mut arp[..]));
    inject(&mut raw, &[eth_frame(mac(9), mac(1), EtherType::Arp, &arp)]);
    sim.run_for(Duration::from_millis(10));
    assert!(matches!(
        sim.iface(0).neighbors().state(ipa(9)),
        Some(NeighborState::Reachable { .. })
    ));
    let send = |sim: &mut Sim| {
        sim.iface(0)
            .sockets_mut()
            .udp_mut(tx)
            .unwrap()
            .send_to(b"ping", sa(9, 9))
            .unwrap();
        sim.run_for(Duration::from_millis(10));
    };
    sim.run_for(Duration::from_secs(11));
    send(&mut sim);
    // Delay (5 s), then three probes a second apart, then the entry goes.
    sim.run_for(Duration::from_secs(9));
    let requests: Vec<_> = arps(&collect(&mut raw))
        .into_iter()
        .filter(|(_, r)| r.operation == ArpOperation::Request)
        .collect();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert!(requests
        .iter()
        .all(|(dst, r)| *dst == mac(9) && r.target_protocol_addr == ip(9)));
    assert_eq!(sim.iface(0).neighbors().state(ipa(9)), None);
    send(&mut sim);
    let again = arps(&collect(&mut raw));
    assert!(
        again
            .iter()
            .any(|(dst, r)| dst.is_broadcast() && r.target_protocol_addr == ip(9)),
        "{again:?}"
    );
}

#[test]
fn pending_queue_is_bounded_and_dropped_on_failure() {
    let (mut sim, mut raw) = lone(Limits::default());
    collect(&mut raw);
    let tx = udp(&mut sim, 0, 1000);
    let mut sent = 0;
    for k in 0..20u8 {
        // The socket buffer holds 64 datagrams: all accepted; egress parks 8.
        sim.iface(0)
            .sockets_mut()
            .udp_mut(tx)
            .unwrap()
            .send_to(&[k; 100], sa(99, 9))
            .unwrap();
        sent += 1;
    }
    sim.step();
    assert_eq!(sim.iface(0).pending(), (8, 8 * 108));
    assert_eq!(
        sim.iface(0).stats().drops(DropReason::NeighborQueueFull),
        sent - 8
    );
    // RFC 1122 §2.3.2.1: one request per second, three in all, then give up.
    let mut requests = Vec::new();
    for _ in 0..5 {
        sim.run_for(Duration::from_millis(999));
        requests.extend(arps(&collect(&mut raw)).into_iter().filter(|(_, r)| {
            r.operation == ArpOperation::Request && r.target_protocol_addr == ip(99)
        }));
    }
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert!(requests
        .iter()
        .all(|(dst, r)| dst.is_broadcast() && r.source_protocol_addr == ip(1)));
    assert_eq!(sim.iface(0).pending(), (0, 0));
    assert_eq!(
        sim.iface(0).stats().drops(DropReason::NeighborUnreachable),
        8
    );
    assert_eq!(sim.iface(0).neighbors().state(ipa(99)), None);
}

#[test]
fn queued_packets_leave_in_order_once_answered() {
    let (mut sim, mut raw) = lone(Limits::default());
    let tx = udp(&mut sim, 0, 1000);
    for k in 0..3u8 {
        sim.iface(0)
            .sockets_mut()
            .udp_mut(tx)
            .unwrap()
            .send_to(&[k; 10], sa(2, 9))
            .unwrap();
    }
    sim.run_for(Duration::from_millis(1));
    let req = arps(&collect(&mut raw))
        .into_iter()
        .find(|(_, r)| r.operation == ArpOperation::Request && r.target_protocol_addr == ip(2))
        .expect("an ARP request");
    let reply = ArpRepr {
        operation: ArpOperation::Reply,
        source_hardware_addr: mac(2),
        source_protocol_addr: ip(2),
        target_hardware_addr: req.1.source_hardware_addr,
        target_protocol_addr: req.1.source_protocol_addr,
    };
    let mut p = [0u8; 28];
    reply.emit(&mut ArpPacket::new_unchecked(&mut p[..]));
    inject(&mut raw, &[eth_frame(mac(2), mac(1), EtherType::Arp, &p)]);
    sim.run_for(Duration::from_millis(1));
    let got: Vec<u8> = collect(&mut raw)
        .iter()
        .filter(|f| f.len() == 14 + 20 + 8 + 10)
        .map(|f| {
            assert_eq!(&f[0..6], &mac(2).0);
            f[42]
        })
        .collect();
    assert_eq!(got, [0, 1, 2]);
    assert_eq!(sim.iface(0).pending(), (0, 0));
}

#[test]
fn announces_on_start() {
    let (mut sim, mut raw) = lone(Limits::default());
    sim.run_for(Duration::from_secs(5));
    let ann: Vec<_> = arps(&collect(&mut raw));
    assert_eq!(ann.len(), 2, "RFC 5227 ANNOUNCE_NUM");
    for (dst, r) in ann {
        assert!(dst.is_broadcast());
        assert_eq!(r.operation, ArpOperation::Request);
        assert_eq!(
            (r.source_protocol_addr, r.target_protocol_addr),
            (ip(1), ip(1))
        );
        assert_eq!(r.source_hardware_addr, mac(1));
    }
    assert_eq!(sim.iface(0).stats().arp_announcements_sent, 2);
    assert_eq!(sim.iface(0).poll_at(), None, "idle afterwards");
}

#[test]
fn static_entries_skip_arp() {
    let (mut sim, mut raw) = lone(Limits {
        announce_count: 0,
        ..Limits::default()
    });
    let other = EthernetAddress([2, 0, 0, 0, 0, 0x42]);
    sim.iface(0).add_static_neighbor(ipa(2), other).unwrap();
    let tx = udp(&mut sim, 0, 1000);
    sim.iface(0)
        .sockets_mut()
        .udp_mut(tx)
        .unwrap()
        .send_to(b"x", sa(2, 9))
        .unwrap();
    sim.run_for(Duration::from_secs(100));
    let frames = collect(&mut raw);
    assert_eq!(frames.len(), 1);
    assert_eq!(&frames[0][0..6], &other.0);
    assert_eq!(
        sim.iface(0).neighbors().state(ipa(2)),
        Some(NeighborState::Static(other))
    );
}

#[test]
fn answers_requests_for_us_only() {
    let (mut sim, mut raw) = lone(Limits::default());
    sim.run_for(Duration::from_millis(1));
    collect(&mut raw);
    let request = |target| {
        let r = ArpRepr {
            operation: ArpOperation::Request,
            source_hardware_addr: mac(7),
            source_protocol_addr: ip(7),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: target,
        };
        let mut p = [0u8; 28];
        r.emit(&mut ArpPacket::new_unchecked(&mut p[..]));
        eth_frame(mac(7), EthernetAddress::BROADCAST, EtherType::Arp, &p)
    };
    inject(&mut raw, &[request(ip(3)), request(ip(1))]);
    sim.run_for(Duration::from_millis(1));
    let replies = arps(&collect(&mut raw));
    assert_eq!(replies.len(), 1);
    let (dst, r) = replies[0];
    assert_eq!(dst, mac(7));
    assert_eq!(r.operation, ArpOperation::Reply);
    assert_eq!(
        (r.source_hardware_addr, r.source_protocol_addr),
        (mac(1), ip(1))
    );
    assert_eq!(
        (r.target_hardware_addr, r.target_protocol_addr),
        (mac(7), ip(7))
    );
    // The requester was learned (RFC 826), the bystander request was not.
    let now = sim.now();
    assert_eq!(
        sim.iface(0).neighbors().lookup(ipa(7), now),
        Lookup::Found(mac(7))
    );
    assert_eq!(sim.iface(0).stats().drops(DropReason::ArpNotForUs), 1);
    // Someone else claiming our address is a conflict, counted.
    let mut claim = request(ip(9));
    claim[14 + 14..14 + 18].copy_from_slice(&ip(1).octets());
    inject(&mut raw, &[claim]);
    sim.run_for(Duration::from_millis(1));
    assert_eq!(
        sim.iface(0).stats().drops(DropReason::ArpAddressConflict),
        1
    );
}
