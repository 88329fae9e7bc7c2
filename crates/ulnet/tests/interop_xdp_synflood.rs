//! The steering program's SYN policer on a real AF_XDP channel (the logic itself is
//! checked instruction by instruction through `BPF_PROG_TEST_RUN` in
//! `channel/src/xdp/program/tests.rs`): SYNs flooded from one spoofed address in B are
//! dropped in the XDP program and counted in the channel's `rx_policed`, within what the
//! rates allow for the time the flood took, and the kernel in B is served byte-exact by
//! curl before and after it.

mod interop_support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use interop_support::*;
use ulnet::channel::packet::{PacketChannel, PacketOptions};
use ulnet::channel::xdp::{SynPolicer, XdpOptions};
use ulnet::channel::Channel;
use ulnet::net::Stack;
use ulnet::runtime::Backend;
use ulnet::stack::iface::IpCidr;
use ulnet::wire::{
    ChecksumMode, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet,
    Ipv4Repr, SeqNumber, TcpFlags, TcpOptions, TcpPacket, TcpRepr,
};

/// SYNs flooded.
const FLOOD: u64 = 5_000;

/// Rates low enough that any flood outruns them: 1,000 SYNs/s (burst 100) for all, then
/// 100/s (burst 10) per source.
const POLICER: SynPolicer = SynPolicer {
    rate: 1_000,
    burst: 100,
    per_source_rate: 100,
    per_source_burst: 10,
    sources: 1_024,
};

/// An Ethernet/IPv4/TCP SYN from `src` to `dst`, checksums filled in.
fn syn(macs: (EthernetAddress, EthernetAddress), src: (Ipv4Addr, u16), dst: SocketAddr) -> Vec<u8> {
    let IpAddr::V4(dip) = dst.ip() else {
        panic!("IPv4 only")
    };
    let tcp = TcpRepr {
        src_port: src.1,
        dst_port: dst.port(),
        seq: SeqNumber(u32::from(src.1) * 7919),
        ack: SeqNumber(0),
        flags: TcpFlags::SYN,
        window: 64_240,
        urgent: 0,
        options: TcpOptions::default(),
        payload: &[],
        payload_rest: &[],
    };
    let ip = Ipv4Repr::new(src.0, dip, IpProtocol::Tcp, tcp.buffer_len(), 64);
    let mut f = vec![0u8; 14 + ip.buffer_len()];
    EthernetRepr {
        src_addr: macs.0,
        dst_addr: macs.1,
        ethertype: EtherType::Ipv4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    ip.emit(
        &mut Ipv4Packet::new_unchecked(&mut f[14..]),
        ChecksumMode::Full,
    );
    tcp.emit(
        &mut TcpPacket::new_unchecked(&mut f[34..]),
        &IpAddr::V4(src.0),
        &dst.ip(),
        ChecksumMode::Full,
    );
    f
}

#[test]
fn a_syn_flood_from_one_host_is_dropped_in_the_xdp_program_and_counted() {
    let tb = testbed("synp");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    let ip = a.spare_ip(0);
    // Nobody holds this address: the spoofed source. ulnet's SYN-ACKs for it go to B's
    // MAC, where B's kernel drops them.
    let IpAddr::V4(spoofed) = b.spare_ip(7) else {
        panic!("IPv4 testbed")
    };
    let bmac = EthernetAddress(b.mac.octets());
    let cfg = Stack::builder()
        .backend(Backend::Xdp)
        .interface(&a.ifname)
        .address_cidr(IpCidr::new(ip, a.prefix_len).unwrap())
        .netns(&a.ns)
        .neighbor(IpAddr::V4(spoofed), bmac)
        .xdp(XdpOptions {
            syn_policer: Some(POLICER),
            ..XdpOptions::default()
        });
    let mut t = Session::open(cfg, &b.ns);
    let scratch = Scratch::new();
    let out = scratch.path("body");
    t.check_curl(1_000_000, &out);
    let before = Channel::stats(t.rt.channel()).rx_policed;
    assert_eq!(before, 0, "curl's one SYN was policed");

    let macs = (bmac, EthernetAddress(a.mac.octets()));
    let to = SocketAddr::new(ip, 80);
    let (ns, ifname) = (b.ns.clone(), b.ifname.clone());
    let (sent, took) = t.serve_while(move || {
        let mut ch = PacketChannel::open(&ifname, Some(&ns), &PacketOptions::default())
            .expect("AF_PACKET socket in B");
        let start = Instant::now();
        let mut sent = 0u64;
        while sent < FLOOD && start.elapsed() < Duration::from_secs(10) {
            let f = syn(macs, (spoofed, 1024 + (sent % 60_000) as u16), to);
            if ch
                .tx()
                .send(f.len(), &mut |buf| buf.copy_from_slice(&f))
                .is_ok()
            {
                sent += 1;
            } else {
                ch.tx().flush().expect("flush the flood");
            }
        }
        ch.tx().flush().expect("flush the flood");
        // What the last SYNs cost reaches the counter within this (veth runs the
        // program in the sender's softirq).
        std::thread::sleep(Duration::from_millis(200));
        (sent, start.elapsed())
    });
    assert_eq!(sent, FLOOD, "the flood was cut short after {took:?}");

    let policed = Channel::stats(t.rt.channel()).rx_policed;
    eprintln!("{policed} of {FLOOD} SYNs policed, the flood took {took:?}");
    // At most this many SYNs could pass in `took`: each bucket's burst and first SYN,
    // and its rate for the time. Two CPUs racing on a bucket may pass a few more.
    let secs = took.as_secs_f64();
    let may_pass = (101.0 + 11.0 + 1_100.0 * secs) as u64 + 16;
    assert!(
        policed <= FLOOD && policed + may_pass >= FLOOD,
        "{policed} of {FLOOD} SYNs policed in {took:?} (at most {may_pass} may pass)"
    );
    // A host that did not flood is still served, byte-exact.
    t.check_curl(1_000_000, &out);
    assert_eq!(
        Channel::stats(t.rt.channel()).rx_policed,
        policed,
        "a SYN of the quiet host was policed"
    );
}
