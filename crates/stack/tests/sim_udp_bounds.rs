//! UDP socket bounds through the interface, and ICMP port unreachable with its rate
//! limit.

mod common;

use common::{ipa, mac, sa, Sim};

/// Static neighbours both ways, so nothing waits for ARP (whose queue would otherwise
/// hold only `Limits::pending_per_neighbor` datagrams of a burst).
fn know_each_other(sim: &mut Sim) {
    sim.iface(0).add_static_neighbor(ipa(2), mac(2)).unwrap();
    sim.iface(1).add_static_neighbor(ipa(1), mac(1)).unwrap();
}
use ulnet_channel::sim::LinkConfig;
use ulnet_stack::iface::{DropReason, Limits};
use ulnet_stack::socket::{SendError, UdpConfig, UdpSocket};
use ulnet_stack::time::Duration;

#[test]
fn receive_buffer_drops_what_does_not_fit() {
    let mut sim = Sim::pair(2, LinkConfig::new());
    know_each_other(&mut sim);
    let mut rx = UdpSocket::new(UdpConfig {
        rx_datagram_count: 4,
        rx_len: 1000,
        ..UdpConfig::default()
    });
    rx.bind(sa(2, 7)).unwrap();
    let rx = sim.iface(1).sockets_mut().add_udp(rx).unwrap();
    let mut tx = UdpSocket::new(UdpConfig::default());
    tx.bind(sa(1, 7)).unwrap();
    let tx = sim.iface(0).sockets_mut().add_udp(tx).unwrap();
    for k in 0..10u8 {
        sim.iface(0)
            .sockets_mut()
            .udp_mut(tx)
            .unwrap()
            .send_to(&[k; 100], sa(2, 7))
            .unwrap();
    }
    // One larger than the whole buffer.
    sim.iface(0)
        .sockets_mut()
        .udp_mut(tx)
        .unwrap()
        .send_to(&[0xee; 1001], sa(2, 7))
        .unwrap();
    sim.run_for(Duration::from_millis(10));
    let s = sim.iface(1).sockets().udp(rx).unwrap();
    assert_eq!(
        (s.rx_queued(), s.stats().rx_datagrams, s.stats().rx_dropped),
        (4, 4, 7)
    );
    assert_eq!(sim.iface(1).stats().drops(DropReason::UdpSocketFull), 7);
    let mut buf = [0u8; 200];
    for k in 0..4u8 {
        let (n, meta) = sim
            .iface(1)
            .sockets_mut()
            .udp_mut(rx)
            .unwrap()
            .recv_from(&mut buf)
            .unwrap();
        assert_eq!((n, buf[0], meta.peer), (100, k, sa(1, 7)));
    }
}

#[test]
fn send_buffer_refuses_what_does_not_fit() {
    let mut s = UdpSocket::new(UdpConfig {
        tx_datagram_count: 3,
        tx_len: 250,
        ..UdpConfig::default()
    });
    s.bind(sa(1, 7)).unwrap();
    assert_eq!(s.send_to(&[0; 251], sa(2, 7)), Err(SendError::TooLarge));
    for _ in 0..2 {
        s.send_to(&[0; 100], sa(2, 7)).unwrap();
    }
    assert_eq!(s.send_to(&[0; 100], sa(2, 7)), Err(SendError::BufferFull));
    s.send_to(&[0; 50], sa(2, 7)).unwrap();
    assert_eq!(s.send_to(&[], sa(2, 7)), Err(SendError::BufferFull));
}

#[test]
fn closed_port_answers_unreachable_within_rate_limit() {
    let limits = Limits {
        icmp_error_rate: 10,
        icmp_error_burst: 5,
        ..Limits::default()
    };
    let (wire, a, b) = ulnet_channel::sim::Wire::pair(4, LinkConfig::new(), LinkConfig::new());
    let mut sim = Sim::new(wire);
    sim.add(common::config(1), Box::new(a));
    sim.add(common::config(2).limits(limits), Box::new(b));
    know_each_other(&mut sim);
    let mut tx = UdpSocket::new(UdpConfig::default());
    tx.bind(sa(1, 7)).unwrap();
    let tx = sim.iface(0).sockets_mut().add_udp(tx).unwrap();
    for _ in 0..20 {
        sim.iface(0)
            .sockets_mut()
            .udp_mut(tx)
            .unwrap()
            .send_to(b"anyone?", sa(2, 9))
            .unwrap();
    }
    sim.run_for(Duration::from_millis(10));
    let b = sim.iface(1).stats().clone();
    assert_eq!(b.drops(DropReason::UdpNoSocket), 20);
    assert_eq!((b.icmp_unreachables_sent, b.icmp_rate_limited), (5, 15));
    assert_eq!(sim.iface(0).stats().icmp_errors_received, 5);
    // A second later the bucket has refilled.
    sim.run_for(Duration::from_secs(1));
    sim.iface(0)
        .sockets_mut()
        .udp_mut(tx)
        .unwrap()
        .send_to(b"anyone?", sa(2, 9))
        .unwrap();
    sim.run_for(Duration::from_millis(10));
    assert_eq!(sim.iface(1).stats().icmp_unreachables_sent, 6);
}

/// Egress raises a writable event only for a socket that had no room for the largest
/// datagram it accepts: a blocked sender needs it, and every other reader of the
/// socket would only be woken for nothing.
#[test]
fn writable_event_only_after_a_full_send_buffer() {
    use ulnet_stack::socket::Event;
    let mut sim = Sim::pair(2, LinkConfig::new());
    know_each_other(&mut sim);
    let roomy = {
        let mut s = UdpSocket::new(UdpConfig::default());
        s.bind(sa(1, 7)).unwrap();
        sim.iface(0).sockets_mut().add_udp(s).unwrap()
    };
    let tight = {
        let mut s = UdpSocket::new(UdpConfig {
            tx_datagram_count: 1,
            tx_len: 64,
            ..UdpConfig::default()
        });
        s.bind(sa(1, 8)).unwrap();
        sim.iface(0).sockets_mut().add_udp(s).unwrap()
    };
    for h in [roomy, tight] {
        let s = sim.iface(0).sockets_mut().udp_mut(h).unwrap();
        s.send_to(&[1; 10], sa(2, 9)).unwrap();
    }
    sim.run_for(Duration::from_millis(10));
    let mut events = Vec::new();
    while let Some(ev) = sim.iface(0).sockets_mut().poll_event() {
        events.push(ev);
    }
    assert_eq!(events, [Event::Udp(tight)]);
    assert_eq!(
        sim.iface(0).sockets().udp(tight).unwrap().tx_queued(),
        0,
        "the datagram went out"
    );
}
