//! UDP readiness reaches waiting sockets through the engine's socket events (issue 10,
//! "one socket model"): a blocked `recv_from` wakes when a datagram arrives, a blocked
//! `send_to` wakes when egress frees room, many waiting sockets on one stack each wake
//! for their own datagram, and port 0 is chosen by the engine (RFC 6056) for UDP and
//! TCP listeners alike.

use std::net::{IpAddr, SocketAddr};
use std::thread;
use std::time::Duration;

use ulnet::channel::pipe;
use ulnet::net::{Stack, TcpListener, UdpSocket};
use ulnet::wire::EthernetAddress;
use ulnet_stack::socket::UdpConfig;

/// Two stacks joined by a pipe, each knowing the other's MAC statically: with ARP, the
/// datagrams sent before the reply came back would wait in the neighbour's pending queue
/// (8 frames by default) and the rest be dropped, so a burst of 32 would lose some
/// (how many depends on how fast the reply comes: a flaky test).
fn stacks() -> (Stack, Stack) {
    let (a, b) = pipe::pair().unwrap();
    let (mac_a, mac_b) = (
        EthernetAddress([0x02, 0, 0, 0, 0, 1]),
        EthernetAddress([0x02, 0, 0, 0, 0, 2]),
    );
    let sa = Stack::builder()
        .address("198.18.0.1/24")
        .mac(mac_a)
        .neighbor(IpAddr::from([198, 18, 0, 2]), mac_b)
        .channel(a)
        .build()
        .unwrap();
    let sb = Stack::builder()
        .address("198.18.0.2/24")
        .mac(mac_b)
        .neighbor(IpAddr::from([198, 18, 0, 1]), mac_a)
        .channel(b)
        .build()
        .unwrap();
    (sa, sb)
}

#[test]
fn events_wake_many_blocked_receivers() {
    let (a, b) = stacks();
    const N: u16 = 32;
    let mut waiting = Vec::new();
    for i in 0..N {
        let s = UdpSocket::bind(&b, ("0.0.0.0", 7000 + i)).unwrap();
        // Well beyond the test's length: a wake-up must come from an event.
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        waiting.push(thread::spawn(move || {
            let mut buf = [0u8; 64];
            let (n, from) = s.recv_from(&mut buf).unwrap();
            (buf[..n].to_vec(), from)
        }));
    }
    // Let every receiver block before anything arrives.
    thread::sleep(Duration::from_millis(100));
    let c = UdpSocket::bind(&a, "0.0.0.0:0").unwrap();
    let me = c.local_addr().unwrap();
    for i in (0..N).rev() {
        let dst = SocketAddr::from(([198, 18, 0, 2], 7000 + i));
        c.send_to(&i.to_be_bytes(), dst).unwrap();
    }
    for (i, t) in waiting.into_iter().enumerate() {
        let (data, from) = t.join().unwrap();
        assert_eq!(data, (i as u16).to_be_bytes());
        assert_eq!(from.port(), me.port());
    }
}

#[test]
fn writable_event_wakes_a_blocked_sender() {
    let (a, _b) = stacks();
    let tiny = UdpConfig {
        rx_datagram_count: 1,
        rx_len: 64,
        tx_datagram_count: 1,
        tx_len: 64,
    };
    let s = UdpSocket::bind_with(&a, "0.0.0.0:0", tiny).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    // Each send fills the one-datagram buffer; the next must wait for egress to take
    // it, and only the writable event can wake it.
    for i in 0..200u32 {
        s.send_to(&i.to_be_bytes(), "198.18.0.2:9").unwrap();
    }
}

#[test]
fn port_zero_is_chosen_by_the_engine() {
    let (a, _b) = stacks();
    let mut udp = Vec::new();
    for _ in 0..16 {
        let s = UdpSocket::bind(&a, "0.0.0.0:0").unwrap();
        let p = s.local_addr().unwrap().port();
        assert!((49152..=65535).contains(&p), "{p}");
        udp.push(s);
    }
    let mut ports: Vec<u16> = udp.iter().map(|s| s.local_addr().unwrap().port()).collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 16);
    let l1 = TcpListener::bind(&a, "0.0.0.0:0").unwrap();
    let l2 = TcpListener::bind(&a, "0.0.0.0:0").unwrap();
    let (p1, p2) = (
        l1.local_addr().unwrap().port(),
        l2.local_addr().unwrap().port(),
    );
    assert!((49152..=65535).contains(&p1) && (49152..=65535).contains(&p2));
    assert_ne!(p1, p2);
}
