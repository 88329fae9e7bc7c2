//! libFuzzer target: a whole interface (ARP, IPv4, IPv6 with ND, reassembly, ICMP, UDP and TCP
//! attached) fed a sequence of frames and clock ticks decoded from the input, driven by
//! the runtime's plain driver (`ulnet::runtime::Driver`, one iteration per frame or
//! tick, over an in-memory channel that checks what is sent). It must
//! never panic, every frame it sends must be an Ethernet frame from its own MAC, and
//! every bounded structure must stay within its limit; at the end, long after every
//! timeout, reassembly and the ARP queue must be empty.
//!
//! Input format, repeated: one control byte `c`; if `c < 0xf0` a frame of
//! `(c as usize) * 8 + next byte % 8` bytes follows (cut at the end of the input),
//! handed over in `(next byte >> 3) % 4 + 1` buffers of about equal length;
//! otherwise `c & 0x0f` selects a clock jump of `2^(c & 0x0f)` ms followed by an
//! iteration with no frame (egress only).
//! So that the fuzzer spends its time past the MAC filter, a frame whose first byte is
//! below 0xc0 gets our MAC as destination, one below 0xd0 the broadcast address, one
//! below 0xe0 the IPv6 all-nodes MAC (33:33:00:00:00:01); the rest go in unchanged.
//! The interface is dual-stack (198.18.0.1 and 2001:2::1, SLAAC on). The first input byte's low bit says whether the channel
//! "verified checksums" (so IPv4/UDP/TCP checksums are not checked and the fuzzer gets
//! past them without computing any).
#![no_main]

use std::net::SocketAddr;
use std::os::fd::BorrowedFd;

use ulnet::runtime::Driver;
use ulnet_channel::{Capabilities, Channel, RxParts, Stats, Tx, TxError};
use ulnet_stack::iface::{ChecksumCaps, Interface, InterfaceConfig, IpCidr, Limits};
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
        // IPv6 addresses usable at once, so unicast frames get past the address check.
        dad_transmits: 0,
        slaac_address_count: 2,
        ..Limits::default()
    }
}

/// The transmit half: every frame must be an Ethernet frame from our MAC.
#[derive(Default)]
struct Check;

impl Tx for Check {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), TxError> {
        let mut buf = vec![0u8; len];
        fill(&mut buf);
        assert!(len >= 14 && buf[6..12] == MAC.0, "frame not from our MAC");
        Ok(())
    }

    fn flush(&mut self) -> ulnet_channel::Result<()> {
        Ok(())
    }
}

/// An in-memory channel: receives the one frame put in `next`, cut into `pieces`
/// buffers of about equal length (as a multi-buffer channel hands a frame over), and
/// sends into [`Check`].
#[derive(Default)]
struct Feed {
    next: Option<Vec<u8>>,
    pieces: usize,
    tx: Check,
}

impl Channel for Feed {
    fn rx_batch(
        &mut self,
        _max_count: usize,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> ulnet_channel::Result<usize> {
        Ok(match self.next.take() {
            Some(frame) => {
                f(&frame, &mut self.tx);
                1
            }
            None => 0,
        })
    }

    fn rx_batch_parts(
        &mut self,
        _max_count: usize,
        f: &mut RxParts<'_>,
    ) -> ulnet_channel::Result<usize> {
        Ok(match self.next.take() {
            Some(frame) => {
                let n = self.pieces.max(1);
                let cuts: Vec<usize> = (0..=n).map(|k| k * frame.len() / n).collect();
                let pieces: Vec<&[u8]> = cuts.windows(2).map(|w| &frame[w[0]..w[1]]).collect();
                f(pieces[0], &pieces[1..], &mut self.tx);
                1
            }
            None => 0,
        })
    }

    fn tx(&mut self) -> &mut dyn Tx {
        &mut self.tx
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            name: "fuzz",
            mtu: 1500,
            max_frame_len: 1514,
            rx_checksum_verified: false,
            rx_checksum_unfinished: false,
            tx_checksum_offload: false,
            batch_count: 1,
            gso_max_len: 0,
            mode: String::new(),
        }
    }

    fn stats(&self) -> Stats {
        Stats::default()
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

fn interface(rx_verified: bool) -> Interface {
    let addr = "198.18.0.1".parse().unwrap();
    let config = InterfaceConfig::new(MAC)
        .address(IpCidr::new(addr, 24).unwrap())
        .address(IpCidr::new("2001:2::1".parse().unwrap(), 64).unwrap())
        .slaac(true)
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
    tcp.listen("[2001:2::1]:80".parse().unwrap(), 4).unwrap();
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
    // Link-local, the configured address, and SLAAC's.
    assert!(iface.ipv6_addresses().count() <= 2 + l.slaac_address_count);
    assert!((1280..=1500).contains(&iface.ipv6_mtu()));
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut iface = interface(data.first().is_some_and(|b| b & 1 == 1));
    let mut driver = Driver::new(Feed::default());
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
                } else if frame[0] < 0xd0 {
                    EthernetAddress::BROADCAST
                } else {
                    // The all-nodes group's MAC (RFC 2464 §7): IPv6 multicast.
                    EthernetAddress([0x33, 0x33, 0, 0, 0, 1])
                };
                frame[..6].copy_from_slice(&dst.0);
            }
            // The length byte's high bits: how many buffers the frame comes in.
            driver.channel_mut().pieces = tail.first().map_or(1, |b| usize::from(b >> 3) % 4 + 1);
            driver.channel_mut().next = Some(frame);
            driver.poll(now, &mut iface, &mut ()).unwrap();
            rest = tail;
        } else {
            now += Duration::from_millis(1 << (c & 0x0f));
            driver.poll(now, &mut iface, &mut ()).unwrap();
            rest = tail;
        }
        check(&iface);
    }
    let end = now + Duration::from_secs(120);
    for _ in 0..1000 {
        match iface.poll_at() {
            Some(t) if t <= end => {
                now = now.max(t);
                driver.poll(now, &mut iface, &mut ()).unwrap();
            }
            _ => break,
        }
    }
    assert_eq!(iface.reassembly().buffered_len(), 0);
    assert_eq!(iface.pending(), (0, 0));
});
