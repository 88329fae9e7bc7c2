//! Routing through the interface: on-link destinations go straight to their MAC, others
//! to the gateway's, the most specific route wins, and no route is a counted drop.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use common::{collect, ipa, mac, Sim};
use ulnet_channel::sim::{Endpoint, LinkConfig, Wire};
use ulnet_stack::iface::{DropReason, IpCidr, Route};
use ulnet_stack::socket::{UdpConfig, UdpHandle, UdpSocket};
use ulnet_stack::time::Duration;
use ulnet_wire::{EtherType, EthernetFrame, Ipv4Packet};

const FAR: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 5);

/// Node 0 = host 198.18.0.1 (gateway .254), node 1 = gateway 198.18.0.254, node 2 =
/// a host 198.18.0.2, all on a hub with a raw observer.
fn network() -> (Sim, Endpoint, UdpHandle) {
    let (wire, mut eps) = Wire::hub(9, 4, LinkConfig::new());
    let raw = eps.pop().unwrap();
    let mut sim = Sim::new(wire);
    let mut eps = eps.into_iter();
    sim.add(
        common::config(1).gateway(ipa(254)),
        Box::new(eps.next().unwrap()),
    );
    sim.add(common::config(254), Box::new(eps.next().unwrap()));
    sim.add(common::config(2), Box::new(eps.next().unwrap()));
    let mut s = UdpSocket::new(UdpConfig::default());
    s.bind(common::sa(1, 4000)).unwrap();
    let h = sim.iface(0).sockets_mut().add_udp(s).unwrap();
    (sim, raw, h)
}

/// The destination MAC of every IPv4 frame to `dst` the observer saw.
fn next_hops(raw: &mut Endpoint, dst: Ipv4Addr) -> Vec<[u8; 6]> {
    collect(raw)
        .iter()
        .filter_map(|f| {
            let eth = EthernetFrame::new_checked(&f[..]).ok()?;
            if eth.ethertype() != EtherType::Ipv4 {
                return None;
            }
            let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
            (ip.dst_addr() == dst).then_some(eth.dst_addr().0)
        })
        .collect()
}

fn send(sim: &mut Sim, h: UdpHandle, dst: Ipv4Addr) {
    let to = SocketAddr::new(IpAddr::V4(dst), 9);
    sim.iface(0)
        .sockets_mut()
        .udp_mut(h)
        .unwrap()
        .send_to(b"hello", to)
        .unwrap();
    sim.run_for(Duration::from_millis(10));
}

#[test]
fn off_link_goes_to_the_gateway() {
    let (mut sim, mut raw, h) = network();
    send(&mut sim, h, FAR);
    assert_eq!(next_hops(&mut raw, FAR), [mac(254).0]);
    // The gateway got a datagram not addressed to it: a host does not forward.
    assert_eq!(sim.iface(1).stats().drops(DropReason::Ipv4NotForUs), 1);
    // On-link destinations skip the gateway.
    send(&mut sim, h, common::ip(2));
    assert_eq!(next_hops(&mut raw, common::ip(2)), [mac(2).0]);
}

#[test]
fn longest_prefix_wins() {
    let (mut sim, mut raw, h) = network();
    sim.iface(0)
        .routes_mut()
        .add(Route {
            dst: IpCidr::new(IpAddr::V4(Ipv4Addr::new(198, 19, 0, 0)), 24).unwrap(),
            via: Some(ipa(2)),
        })
        .unwrap();
    send(&mut sim, h, FAR);
    assert_eq!(next_hops(&mut raw, FAR), [mac(2).0]);
    let other = Ipv4Addr::new(198, 19, 1, 5);
    send(&mut sim, h, other);
    assert_eq!(next_hops(&mut raw, other), [mac(254).0]);
}

#[test]
fn no_route_is_counted() {
    let (mut sim, _raw, h) = network();
    sim.iface(0)
        .routes_mut()
        .remove(IpCidr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0).unwrap())
        .unwrap();
    send(&mut sim, h, FAR);
    assert_eq!(sim.iface(0).stats().drops(DropReason::NoRoute), 1);
    assert_eq!(sim.iface(0).sockets().udp(h).unwrap().tx_queued(), 0);
}

#[test]
fn broadcast_needs_no_resolution() {
    let (mut sim, mut raw, h) = network();
    let bcast = Ipv4Addr::new(198, 18, 0, 255);
    let mut rx = UdpSocket::new(UdpConfig::default());
    rx.bind("0.0.0.0:9".parse().unwrap()).unwrap();
    let rx = sim.iface(2).sockets_mut().add_udp(rx).unwrap();
    send(&mut sim, h, bcast);
    assert_eq!(next_hops(&mut raw, bcast), [[0xff; 6]]);
    let (n, meta) = sim
        .iface(2)
        .sockets_mut()
        .udp_mut(rx)
        .unwrap()
        .recv_from(&mut [0; 16])
        .unwrap();
    assert_eq!((n, meta.local_addr), (5, IpAddr::V4(bcast)));
    assert_eq!(sim.iface(0).stats().arp_requests_sent, 0);
}
