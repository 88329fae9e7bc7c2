//! The acceptance scenario: two interfaces on a simulated wire with 10% loss
//! ping each other and exchange UDP datagrams; ARP resolves; 4,000-byte datagrams
//! cross as fragments and reassemble, also when the wire reorders them.

mod common;

use common::{ipa, mac, sa, Sim};
use ulnet_channel::sim::LinkConfig;
use ulnet_stack::iface::{DropReason, Lookup};
use ulnet_stack::socket::{IcmpSocket, UdpConfig, UdpSocket};
use ulnet_stack::time::Duration;

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn ping_and_udp_over_lossy_wire() {
    let mut sim = Sim::pair(
        0x5eed,
        LinkConfig::new()
            .loss(0.10)
            .delay(std::time::Duration::from_millis(1)),
    );
    let pings: Vec<_> = (0..2)
        .map(|i| {
            sim.iface(i)
                .sockets_mut()
                .add_icmp(IcmpSocket::new(0x100 + i as u16, 16, 16 * 1024))
                .unwrap()
        })
        .collect();
    let echo = {
        let mut s = UdpSocket::new(UdpConfig::default());
        s.bind("0.0.0.0:7".parse().unwrap()).unwrap();
        sim.iface(1).sockets_mut().add_udp(s).unwrap()
    };
    let client = {
        let mut s = UdpSocket::new(UdpConfig::default());
        s.bind(sa(1, 5000)).unwrap();
        sim.iface(0).sockets_mut().add_udp(s).unwrap()
    };

    let rounds = 50u16;
    let mut replies = [0usize; 2];
    let mut udp_back = 0usize;
    let mut buf = vec![0u8; 65536];
    for seq in 0..rounds {
        // Each node pings the other; the client sends one datagram to the echo port.
        for (i, &h) in pings.iter().enumerate() {
            let peer = if i == 0 { ipa(2) } else { ipa(1) };
            sim.iface(i)
                .sockets_mut()
                .icmp_mut(h)
                .unwrap()
                .send_echo(peer, seq, &pattern(seq as u8, 56))
                .unwrap();
        }
        let msg = pattern(seq as u8 ^ 0x55, 100 + usize::from(seq));
        sim.iface(0)
            .sockets_mut()
            .udp_mut(client)
            .unwrap()
            .send_to(&msg, sa(2, 7))
            .unwrap();
        let end = sim.now() + Duration::from_millis(200);
        sim.run_until(end, |sim| {
            // The echo server answers what it got.
            let iface = sim.iface(1);
            while let Ok((n, meta)) = iface
                .sockets_mut()
                .udp_mut(echo)
                .unwrap()
                .recv_from(&mut buf)
            {
                let data = buf[..n].to_vec();
                iface
                    .sockets_mut()
                    .udp_mut(echo)
                    .unwrap()
                    .send_to(&data, meta.peer)
                    .unwrap();
            }
            false
        });
        for (i, &h) in pings.iter().enumerate() {
            while let Ok(r) = sim
                .iface(i)
                .sockets_mut()
                .icmp_mut(h)
                .unwrap()
                .recv_reply(&mut buf)
            {
                assert_eq!(&buf[..r.len], &pattern(r.seq_no as u8, 56)[..]);
                assert!(
                    r.rtt.is_some_and(|d| d >= Duration::from_millis(2)),
                    "{r:?}"
                );
                replies[i] += 1;
            }
        }
        while let Ok((n, meta)) = sim
            .iface(0)
            .sockets_mut()
            .udp_mut(client)
            .unwrap()
            .recv_from(&mut buf)
        {
            assert_eq!(meta.peer, sa(2, 7));
            assert!((100..100 + usize::from(rounds)).contains(&n));
            let seq = (n - 100) as u8;
            assert_eq!(&buf[..n], &pattern(seq ^ 0x55, n)[..]);
            udp_back += 1;
        }
    }
    // A round trip survives 10% loss each way with probability 0.81; ARP costs a few
    // more frames at the start. Expect well over half, and fewer than all.
    for (i, &n) in replies.iter().enumerate() {
        assert!(
            n >= 30 && n <= usize::from(rounds),
            "node {i}: {n} replies of {rounds}"
        );
    }
    assert!(udp_back >= 30, "{udp_back} UDP echoes of {rounds}");
    for (i, peer) in [(0usize, 2u8), (1, 1)] {
        let now = sim.now();
        assert_eq!(
            sim.iface(i).neighbors().lookup(ipa(peer), now),
            Lookup::Found(mac(peer))
        );
        assert!(sim.iface(i).stats().icmp_echo_replies_sent > 0);
    }
}

/// Sends `count` datagrams of `len` bytes from node 0 to node 1 and returns the
/// payloads received intact, with the receiver's stats.
fn send_big(seed: u64, link: LinkConfig, count: usize, len: usize) -> (usize, Sim) {
    let mut sim = Sim::pair(seed, link);
    let mut rx = UdpSocket::new(UdpConfig::default());
    rx.bind(sa(2, 9000)).unwrap();
    let rx = sim.iface(1).sockets_mut().add_udp(rx).unwrap();
    let mut tx = UdpSocket::new(UdpConfig::default());
    tx.bind(sa(1, 9001)).unwrap();
    let tx = sim.iface(0).sockets_mut().add_udp(tx).unwrap();
    let mut good = 0;
    let mut buf = vec![0u8; 65536];
    for k in 0..count {
        let data = pattern(k as u8, len);
        sim.iface(0)
            .sockets_mut()
            .udp_mut(tx)
            .unwrap()
            .send_to(&data, sa(2, 9000))
            .unwrap();
        let end = sim.now() + Duration::from_millis(100);
        sim.run_until(end, |_| false);
        while let Ok((n, meta)) = sim
            .iface(1)
            .sockets_mut()
            .udp_mut(rx)
            .unwrap()
            .recv_from(&mut buf)
        {
            assert_eq!(meta.peer, sa(1, 9001));
            assert_eq!(&buf[..n], &data[..], "datagram {k} corrupted");
            good += 1;
        }
    }
    (good, sim)
}

#[test]
fn fragments_of_4000_byte_datagrams_reassemble_despite_loss() {
    let (good, sim) = send_big(11, LinkConfig::new().loss(0.10), 30, 4000);
    // Three fragments each: 0.9^3 ≈ 73% arrive whole.
    assert!((12..30).contains(&good), "{good} of 30");
    let s = sim.nodes[0].iface.stats();
    assert!(s.frag_sent >= 90 - 3, "{}", s.frag_sent);
    let r = sim.nodes[1].iface.stats();
    assert_eq!(r.frag_reassembled, good as u64);
    // The incomplete ones time out and free their memory.
    let mut sim = sim;
    sim.run_for(Duration::from_secs(31));
    assert_eq!(sim.iface(1).reassembly().buffered_len(), 0);
    assert_eq!(
        sim.iface(1).stats().drops(DropReason::FragTimeout),
        30 - good as u64
    );
}

#[test]
fn fragments_reassemble_out_of_order() {
    let link = LinkConfig::new()
        .reorder(0.5)
        .reorder_delay(std::time::Duration::from_millis(2))
        .delay(std::time::Duration::from_micros(100));
    let (good, sim) = send_big(12, link, 20, 4000);
    assert_eq!(good, 20);
    let reordered = sim.wire.link_stats(0, 1).reordered;
    assert!(reordered > 5, "the wire reordered only {reordered} frames");
    // Only the peer's gratuitous ARP (about a host we did not know yet) is refused.
    let stats = sim.nodes[1].iface.stats();
    let drops: Vec<_> = stats
        .nonzero_drops()
        .filter(|(r, _)| *r != DropReason::ArpNotForUs)
        .collect();
    assert!(drops.is_empty(), "{stats}");
}
