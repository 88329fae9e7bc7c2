//! Kernel interop over the AF_PACKET channel, with a capture of the whole run that
//! tshark must find free of malformed frames and checksum errors.

mod interop_support;

use std::net::SocketAddr;

use interop_support::*;
use ulnet::net::Stack;
use ulnet::runtime::Backend;
use ulnet::stack::iface::IpCidr;

#[test]
fn packet_ping_http_udp_tcp_loss_and_clean_capture() {
    let tb = testbed("ipkt");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    let ip = a.spare_ip(1);
    let scratch = Scratch::new();
    let pcap = scratch.path("run.pcap");
    let cfg = Stack::builder()
        .backend(Backend::Packet)
        .interface(&a.ifname)
        .address_cidr(IpCidr::new(ip, a.prefix_len).unwrap())
        .netns(&a.ns)
        .pcap(&pcap)
        // Segment by segment, as the wire carries them: a capture of bursts holds 64 KB
        // frames with their checksums left to the kernel (interop_xdp_gso tests them).
        .gso(false);
    let mut t = Session::open(cfg, &b.ns);

    t.check_pings_both_ways(&a.mac.to_string(), b.ip);
    t.check_udp_echo(100);
    let out = scratch.path("body");
    t.check_curl(4_000_000, &out);
    let up = 2_000_000;
    t.check_socat_to_discard(&scratch, up);
    t.check_bulk(SocketAddr::new(b.ip, 5001), up, up);
    t.check_curl_under_loss(&b, 2_000_000, &out);

    drop(t);
    tshark_clean(&pcap, 5_000);
    // The lossy download retransmitted (2% random drop each way over ~1,400 segments),
    // so the byte-for-byte comparison of retransmissions had something to compare.
    assert!(
        retransmissions_match(&pcap) > 0,
        "no retransmitted bytes in the capture"
    );
}

#[test]
fn packet_http_limits_431_and_root() {
    let tb = testbed("ihtl");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    let ip = a.spare_ip(1);
    let scratch = Scratch::new();
    let cfg = Stack::builder()
        .backend(Backend::Packet)
        .interface(&a.ifname)
        .address_cidr(IpCidr::new(ip, a.prefix_len).unwrap())
        .netns(&a.ns);
    let mut t = Session::open(cfg, &b.ns);
    t.check_http_limits(&scratch);
}
