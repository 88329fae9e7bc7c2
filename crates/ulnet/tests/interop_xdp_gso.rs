//! TCP bursts cut by the kernel (`StackBuilder::gso`, on by default): ulnet on AF_XDP
//! (and on AF_PACKET, whose bursts go the same way) sends new data as frames of up to 64 KB through an AF_PACKET socket with a
//! virtio-net header. Checked
//! against the Linux kernel in B, byte for byte, both ways the kernel can cut them: by
//! veth's TSO (A's offloads on: B receives the burst whole, as from a TSO sender) and in
//! software at A's device (offloads off: `validate_xmit_skb` segments it), with and
//! without loss (every 50th packet dropped each way), over IPv4 and IPv6. Every case also
//! checks that bursts were really sent, so a build that quietly fell back to one frame
//! per segment fails; and with bursts turned off, a transfer goes segment by segment.
//! At MTU 65535 a segment is as large as a burst: it goes through the same socket whole,
//! its checksum finished by the kernel (veth's checksum offload, or in software at A's
//! device with offloads off), checked the same ways.

mod interop_support;

use std::net::SocketAddr;

use interop_support::*;
use ulnet::net::Stack;
use ulnet::runtime::Backend;
use ulnet::stack::iface::IpCidr;

fn bursts_cut_by_the_kernel(label: &str, a_offloads: bool, ipv6: bool) {
    offloaded_by_the_kernel(label, a_offloads, ipv6, 1500, Backend::Xdp);
}

/// The checks of the burst tests on a link of `mtu`: above 16 KB (jumbo segments, each
/// a frame of its own) the offload counted is the single segments', else the bursts'.
fn offloaded_by_the_kernel(label: &str, a_offloads: bool, ipv6: bool, mtu: u32, backend: Backend) {
    let tb = if ipv6 {
        testbed6(label, mtu)
    } else {
        testbed_mtu(label, mtu)
    };
    let offloaded = |t: &Session| {
        let iface = t.rt.iface();
        if mtu > 16 * 1024 {
            iface.stats().tcp_csum_offloaded
        } else {
            iface.stats().gso_bursts
        }
    };
    let (a, b) = (tb.a().clone(), tb.b().clone());
    let v = if a_offloads { "on" } else { "off" };
    let set = a
        .run(
            "ethtool",
            ["-K", a.ifname.as_str(), "tx", v, "tso", v, "gso", v],
        )
        .expect("ethtool -K on A");
    assert!(set.status.success(), "ethtool -K: {}", text(&set));
    let (ip, prefix, server) = if ipv6 {
        (a.spare_ip6(0), 64, b.ip6())
    } else {
        (a.spare_ip(0), a.prefix_len, b.ip)
    };
    let scratch = Scratch::new();
    // Bursts are the default: the builder is not asked for them.
    let cfg = Stack::builder()
        .backend(backend)
        .interface(&a.ifname)
        .address_cidr(IpCidr::new(ip, prefix).unwrap())
        .netns(&a.ns);
    let mut t = Session::open(cfg, &b.ns);
    assert!(
        t.rt.iface().config().gso_max_len > 0,
        "the channel offers no bursts"
    );

    let out = scratch.path("body");
    t.check_curl(20_000_000, &out);
    let after_curl = offloaded(&t);
    assert!(after_curl > 0, "curl's download went without an offload");
    // ulnet as the client, sending to a kernel server.
    t.check_bulk(SocketAddr::new(server, 5001), 8_000_000, 0);
    assert!(
        offloaded(&t) > after_curl,
        "the client's upload went without an offload"
    );
    // Every 50th packet dropped each way in B (not a random 2%: through TSO a 5 MB
    // download is a few hundred packets, and a random share of them was sometimes none);
    // a lost 64 KB burst is repaired segment by segment. A jumbo link carries 5 MB in
    // fewer than a hundred frames: every 10th.
    let every = if mtu > 16 * 1024 { 10 } else { 50 };
    let drops = t.check_curl_dropping_every(&b, every, 5_000_000, &out);
    assert!(drops >= 2, "the loss rules dropped {drops} packets");
    assert!(
        t.rt.iface().config().gso_max_len > 0,
        "the kernel refused a burst and bursts were turned off"
    );
}

#[test]
fn bursts_cut_by_veth_tso_arrive_byte_exact() {
    bursts_cut_by_the_kernel("gsot", true, false);
}

#[test]
fn bursts_cut_in_software_at_the_device_arrive_byte_exact() {
    bursts_cut_by_the_kernel("gsos", false, false);
}

#[test]
fn ipv6_bursts_cut_by_veth_tso_arrive_byte_exact() {
    bursts_cut_by_the_kernel("gso6t", true, true);
}

#[test]
fn ipv6_bursts_cut_in_software_arrive_byte_exact() {
    bursts_cut_by_the_kernel("gso6s", false, true);
}

#[test]
fn jumbo_segments_checksummed_by_veth_arrive_byte_exact() {
    offloaded_by_the_kernel("jcsum", true, false, 65535, Backend::Xdp);
}

#[test]
fn jumbo_segments_checksummed_in_software_at_the_device_arrive_byte_exact() {
    offloaded_by_the_kernel("jcsums", false, false, 65535, Backend::Xdp);
}

#[test]
fn ipv6_jumbo_segments_checksummed_by_veth_arrive_byte_exact() {
    offloaded_by_the_kernel("jcsum6", true, true, 65535, Backend::Xdp);
}

/// AF_PACKET sends its bursts through the same kind of socket (`PacketOptions::gso`, on
/// by default), after what its ring holds.
#[test]
fn packet_bursts_cut_by_veth_tso_arrive_byte_exact() {
    offloaded_by_the_kernel("pgsot", true, false, 1500, Backend::Packet);
}

#[test]
fn packet_bursts_cut_in_software_arrive_byte_exact() {
    offloaded_by_the_kernel("pgsos", false, false, 1500, Backend::Packet);
}

#[test]
fn packet_ipv6_bursts_cut_by_veth_tso_arrive_byte_exact() {
    offloaded_by_the_kernel("pgso6", true, true, 1500, Backend::Packet);
}

/// `gso(false)`: every segment its own AF_XDP frame, no burst, byte-exact both ways.
#[test]
fn without_bursts_every_segment_is_a_frame_of_its_own() {
    let tb = testbed("nogso");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    let scratch = Scratch::new();
    let cfg = Stack::builder()
        .backend(Backend::Xdp)
        .interface(&a.ifname)
        .address_cidr(IpCidr::new(a.spare_ip(0), a.prefix_len).unwrap())
        .netns(&a.ns)
        .gso(false);
    let mut t = Session::open(cfg, &b.ns);
    assert_eq!(t.rt.iface().config().gso_max_len, 0, "bursts offered");
    let out = scratch.path("body");
    t.check_curl(5_000_000, &out);
    t.check_bulk(SocketAddr::new(b.ip, 5001), 2_000_000, 0);
    assert_eq!(t.rt.iface().stats().gso_bursts, 0, "a burst went out");
    assert_eq!(t.rt.iface().stats().tcp_csum_offloaded, 0, "an offload");
}

/// BBR (`TcpConfig::congestion`) against the kernel: its pacer holds bursts back on the
/// runtime's timer and lets them out a send quantum at a time. A download to curl, an
/// upload to a kernel server, and a download with every 50th packet dropped each way
/// (BBR's recovery: packet conservation, then the window it had), all byte-exact.
#[test]
fn bbr_paced_bursts_arrive_byte_exact() {
    let tb = testbed("bbr");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    let scratch = Scratch::new();
    let mut tcp = ulnet::stack::tcp::TcpConfig::default();
    tcp.congestion = ulnet::stack::tcp::Algorithm::Bbr;
    let cfg = Stack::builder()
        .backend(Backend::Xdp)
        .interface(&a.ifname)
        .address_cidr(IpCidr::new(a.spare_ip(0), a.prefix_len).unwrap())
        .netns(&a.ns)
        .tcp_config(tcp);
    let mut t = Session::open(cfg, &b.ns);
    let out = scratch.path("body");
    t.check_curl(20_000_000, &out);
    t.check_bulk(SocketAddr::new(b.ip, 5001), 8_000_000, 0);
    let drops = t.check_curl_dropping_every(&b, 50, 5_000_000, &out);
    assert!(drops >= 2, "the loss rules dropped {drops} packets");
    assert!(t.rt.iface().stats().gso_bursts > 0, "no burst went out");
}
