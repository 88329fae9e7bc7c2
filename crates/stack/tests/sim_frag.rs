//! Fragment reassembly through the interface: fragments injected raw onto the wire in
//! any order, overlapping, incomplete or in floods.

mod common;

use common::{collect, config, inject, sa, udp_datagram, udp_fragments, Sim};
use ulnet_channel::sim::{Endpoint, LinkConfig, Wire};
use ulnet_stack::iface::{DropReason, Limits};
use ulnet_stack::socket::{UdpConfig, UdpHandle, UdpSocket};
use ulnet_stack::time::Duration;

/// Node 0 is an interface (198.18.0.1) with a UDP socket on port 9000; the returned
/// endpoint is a raw host (posing as 198.18.0.2) on the same hub.
fn setup(limits: Limits) -> (Sim, Endpoint, UdpHandle) {
    let (wire, mut eps) = Wire::hub(3, 2, LinkConfig::new());
    let raw = eps.pop().unwrap();
    let mut sim = Sim::new(wire);
    sim.add(
        common::config(1).limits(limits),
        Box::new(eps.pop().unwrap()),
    );
    let mut s = UdpSocket::new(UdpConfig::default());
    s.bind(sa(1, 9000)).unwrap();
    let h = sim.iface(0).sockets_mut().add_udp(s).unwrap();
    let _ = config;
    (sim, raw, h)
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 253) as u8).collect()
}

fn recv_all(sim: &mut Sim, h: UdpHandle) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Ok((n, _)) = sim
        .iface(0)
        .sockets_mut()
        .udp_mut(h)
        .unwrap()
        .recv_from(&mut buf)
    {
        out.push(buf[..n].to_vec());
    }
    out
}

#[test]
fn any_order_reassembles() {
    let payload = data(4000);
    let datagram = udp_datagram(sa(2, 5000), sa(1, 9000), &payload);
    let frags = udp_fragments(2, 1, 77, &datagram, 1480);
    assert_eq!(frags.len(), 3);
    for (k, order) in [[2usize, 1, 0], [1, 0, 2], [0, 2, 1], [0, 1, 2]]
        .iter()
        .enumerate()
    {
        let (mut sim, mut raw, h) = setup(Limits::default());
        let frames: Vec<_> = order.iter().map(|&i| frags[i].clone()).collect();
        inject(&mut raw, &frames);
        sim.run_for(Duration::from_millis(10));
        assert_eq!(
            recv_all(&mut sim, h),
            vec![payload.clone()],
            "order {k}: {order:?}"
        );
        assert_eq!(sim.iface(0).reassembly().buffered_len(), 0);
        collect(&mut raw);
    }
}

#[test]
fn overlapping_fragments_drop_the_datagram() {
    let (mut sim, mut raw, h) = setup(Limits::default());
    let datagram = udp_datagram(sa(2, 5000), sa(1, 9000), &data(4000));
    let a = udp_fragments(2, 1, 5, &datagram, 1480);
    // The same datagram cut differently: its second fragment starts inside the first.
    let b = udp_fragments(2, 1, 5, &datagram[1000..], 1480);
    let mut overlapping = b[0].clone();
    // Rewrite the fragment offset to 1000 bytes (125 units) and fix the header checksum.
    let ip = &mut overlapping[14..34];
    let mut p = ulnet_wire::Ipv4Packet::new_unchecked(&mut ip[..]);
    p.set_frag_offset(1000);
    p.fill_checksum();
    inject(
        &mut raw,
        &[a[0].clone(), overlapping, a[1].clone(), a[2].clone()],
    );
    sim.run_for(Duration::from_millis(10));
    assert!(recv_all(&mut sim, h).is_empty());
    let s = sim.iface(0).stats();
    assert_eq!(s.drops(DropReason::FragOverlap), 1, "{s}");
    // The fragments after the overlap started a new datagram that cannot complete.
    sim.run_for(Duration::from_secs(31));
    assert_eq!(sim.iface(0).reassembly().buffered_len(), 0);
    assert_eq!(sim.iface(0).reassembly().datagram_count(), 0);
}

#[test]
fn duplicates_are_tolerated() {
    let (mut sim, mut raw, h) = setup(Limits::default());
    let payload = data(3000);
    let frags = udp_fragments(
        2,
        1,
        6,
        &udp_datagram(sa(2, 5000), sa(1, 9000), &payload),
        1480,
    );
    inject(
        &mut raw,
        &[
            frags[0].clone(),
            frags[0].clone(),
            frags[1].clone(),
            frags[2].clone(),
        ],
    );
    sim.run_for(Duration::from_millis(10));
    assert_eq!(recv_all(&mut sim, h), vec![payload]);
    assert_eq!(sim.iface(0).stats().drops(DropReason::FragDuplicate), 1);
}

#[test]
fn timeout_is_configurable_and_frees_memory() {
    let limits = Limits {
        frag_timeout: Duration::from_secs(60),
        ..Limits::default()
    };
    let (mut sim, mut raw, h) = setup(limits);
    let frags = udp_fragments(
        2,
        1,
        8,
        &udp_datagram(sa(2, 5000), sa(1, 9000), &data(4000)),
        1480,
    );
    inject(&mut raw, &frags[..2]);
    sim.run_for(Duration::from_secs(59));
    assert_eq!(sim.iface(0).reassembly().datagram_count(), 1);
    assert_eq!(sim.iface(0).reassembly().buffered_len(), 2960);
    sim.run_for(Duration::from_secs(2));
    assert_eq!(sim.iface(0).reassembly().buffered_len(), 0);
    assert_eq!(sim.iface(0).stats().drops(DropReason::FragTimeout), 1);
    // The last fragment, late, cannot complete anything.
    inject(&mut raw, &frags[2..]);
    sim.run_for(Duration::from_millis(10));
    assert!(recv_all(&mut sim, h).is_empty());
}

#[test]
fn floods_stay_within_limits() {
    let limits = Limits {
        frag_datagram_count: 4,
        frag_buffer_len: 16 * 1024,
        frag_per_datagram: 8,
        ..Limits::default()
    };
    let (mut sim, mut raw, _h) = setup(limits);
    let mut frames = Vec::new();
    // Many datagrams, each a first fragment far into the 64 KiB space.
    for ident in 0..50u16 {
        let big = udp_datagram(sa(2, 5000), sa(1, 9000), &data(12_000));
        let mut f = udp_fragments(2, 1, ident, &big, 1480);
        frames.push(f.remove(5));
    }
    // One datagram cut into 8-byte pieces.
    let small = udp_datagram(sa(2, 5000), sa(1, 9000), &data(200));
    frames.extend(udp_fragments(2, 1, 999, &small, 8).into_iter().take(20));
    for chunk in frames.chunks(16) {
        inject(&mut raw, chunk);
        sim.run_for(Duration::from_millis(1));
        let r = sim.iface(0).reassembly();
        assert!(r.datagram_count() <= 4 && r.buffered_len() <= 16 * 1024);
    }
    let s = sim.iface(0).stats();
    assert!(s.drops(DropReason::FragNoRoom) > 0, "{s}");
    assert!(s.drops(DropReason::FragTooManyFragments) + s.drops(DropReason::FragNoRoom) > 0);
}
