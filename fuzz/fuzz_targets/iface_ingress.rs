//! libFuzzer target: a whole interface (ARP, IPv4, reassembly, ICMP, UDP and TCP
//! attached) fed a sequence of frames and clock ticks decoded from the input. It must
//! never panic, every frame it sends must be an Ethernet frame from its own MAC, and
//! every bounded structure must stay within its limit; at the end, long after every
//! timeout, reassembly and the ARP queue must be empty.
//!
//! Input format, repeated: one control byte `c`; if `c < 0xf0` a frame of
//! `(c as usize) * 8 + next byte % 8` bytes follows (cut at the end of the input);
//! otherwise `c & 0x0f` selects a clock jump of `2^(c & 0x0f)` ms followed by egress.
//! So that the fuzzer spends its time past the MAC filter, a frame whose first byte is
//! below 0xc0 gets our MAC as destination, one below 0xe0 the broadcast address; the
//! rest go in unchanged. The first input byte's low bit says whether the channel
//! "verified checksums" (so IPv4/UDP/TCP checksums are not checked and the fuzzer gets
//! past them without computing any).
#![no_main]

use std::net::SocketAddr;

use ulnet_stack::iface::{ChecksumCaps, Interface, InterfaceConfig, IpCidr, Limits, TxSink};
use ulnet_stack::socket::{IcmpSocket, UdpConfig, UdpSocket};
use ulnet_stack::tcp::{Tcp, TcpConfig};
use ulnet_stack::time::{Duration, Instant};
use ulnet_wire::EthernetAddress;

const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);

fn limits() -> Limits {
    Limits {
        neighbor_count: 8,
        pending_per_neighbor: 2,
        pending_count: 6,
        pending_len: 16 * 1024,
        frag_datagram_count: 3,
        frag_buffer_len: 20_000,
        frag_per_datagram: 8,
        frag_timeout: Duration::from_secs(5),
        ..Limits::default()
    }
}

struct Sink;

impl TxSink for Sink {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        let mut buf = vec![0u8; len];
        fill(&mut buf);
        assert!(len >= 14 && buf[6..12] == MAC.0, "frame not from our MAC");
        true
    }
}

fn interface(rx_verified: bool) -> Interface {
    let addr = "198.18.0.1".parse().unwrap();
    let config = InterfaceConfig::new(MAC)
        .address(IpCidr::new(addr, 24).unwrap())
        .gateway("198.18.0.254".parse().unwrap())
        .checksum(ChecksumCaps {
            rx_verified,
            ..ChecksumCaps::default()
        })
        .limits(limits());
    let mut iface = Interface::new(config).unwrap();
    let mut udp = UdpSocket::new(UdpConfig {
        rx_datagram_count: 4,
        rx_len: 4096,
        tx_datagram_count: 4,
        tx_len: 4096,
    });
    udp.bind("0.0.0.0:7".parse().unwrap()).unwrap();
    iface.sockets_mut().add_udp(udp).unwrap();
    iface
        .sockets_mut()
        .add_icmp(IcmpSocket::new(1, 4, 4096))
        .unwrap();
    let mut tcp = Tcp::new(TcpConfig::default(), [7; 16]);
    tcp.listen(SocketAddr::new(addr, 80), 4).unwrap();
    iface.set_tcp(tcp);
    iface
}

fn check(iface: &Interface) {
    let l = limits();
    let r = iface.reassembly();
    assert!(r.datagram_count() <= l.frag_datagram_count && r.buffered_len() <= l.frag_buffer_len);
    let (count, len) = iface.pending();
    assert!(count <= l.pending_count && len <= l.pending_len);
    assert!(iface.neighbors().len() <= l.neighbor_count);
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut iface = interface(data.first().is_some_and(|b| b & 1 == 1));
    let mut now = Instant::from_secs(1);
    let mut rest = data;
    while let Some((&c, tail)) = rest.split_first() {
        if c < 0xf0 {
            let extra = tail.first().map_or(0, |b| usize::from(b % 8));
            let len = (usize::from(c) * 8 + extra).min(tail.len());
            let (frame, tail) = tail.split_at(len);
            let mut frame = frame.to_vec();
            if frame.len() >= 6 && frame[0] < 0xe0 {
                let dst = if frame[0] < 0xc0 {
                    MAC
                } else {
                    EthernetAddress::BROADCAST
                };
                frame[..6].copy_from_slice(&dst.0);
            }
            iface.ingress(now, &frame, &mut Sink);
            rest = tail;
        } else {
            now += Duration::from_millis(1 << (c & 0x0f));
            iface.egress(now, &mut Sink);
            rest = tail;
        }
        check(&iface);
    }
    let end = now + Duration::from_secs(120);
    for _ in 0..1000 {
        match iface.poll_at() {
            Some(t) if t <= end => {
                now = now.max(t);
                iface.egress(now, &mut Sink);
            }
            _ => break,
        }
    }
    assert_eq!(iface.reassembly().buffered_len(), 0);
    assert_eq!(iface.pending(), (0, 0));
});
