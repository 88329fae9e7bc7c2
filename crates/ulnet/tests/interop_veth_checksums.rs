//! The kernel in B sends with its transmit checksum offload on, as a veth end has it by
//! default: its TCP segments and UDP datagrams cross the veth with their checksums
//! unfinished (the pseudo-header sum only, Linux's `CHECKSUM_PARTIAL`), and a raw reader
//! in A sees them so. ulnet's channels on a veth say so
//! (`Capabilities::rx_checksum_unfinished`), and the stack accepts exactly those fields
//! (`ChecksumCaps::rx_unfinished`): UDP echoes and a TCP upload checked byte for byte,
//! over AF_XDP and AF_PACKET. Before, every such frame was a bad checksum: the SYN was
//! dropped and nothing connected unless B's offloads were turned off.

mod interop_support;

use interop_support::*;
use ulnet::channel::Channel;
use ulnet::net::Stack;
use ulnet::runtime::Backend;
use ulnet::stack::iface::IpCidr;

fn unfinished_checksums_are_taken(label: &str, backend: Backend, spare: u8) {
    let tb = testbed(label);
    let (a, b) = (tb.a().clone(), tb.b().clone());
    // Checksums left to the device; segments still cut by B (TSO off), so that every
    // backend takes frames of the link's size.
    let set = b
        .run(
            "ethtool",
            [
                "-K",
                b.ifname.as_str(),
                "tx",
                "on",
                "tso",
                "off",
                "gso",
                "off",
            ],
        )
        .expect("ethtool -K");
    assert!(set.status.success(), "ethtool -K: {}", text(&set));
    let ip = a.spare_ip(spare);
    let scratch = Scratch::new();
    let cfg = Stack::builder()
        .backend(backend)
        .interface(&a.ifname)
        .address_cidr(IpCidr::new(ip, a.prefix_len).unwrap())
        .netns(&a.ns);
    let mut t = Session::open(cfg, &b.ns);
    let caps = t.rt.channel().capabilities();
    assert!(
        caps.rx_checksum_unfinished,
        "{}: not seen as a veth",
        caps.name
    );
    assert!(
        !caps.rx_checksum_verified,
        "{}: trusts every checksum",
        caps.name
    );
    t.check_udp_echo(20);
    t.check_socat_to_discard(&scratch, 4_000_000);
    let stats = t.rt.iface().stats().clone();
    assert!(
        stats.rx_checksum_unfinished > 100,
        "only {} unfinished checksums taken: B finished them after all",
        stats.rx_checksum_unfinished
    );
    assert_eq!(
        stats.drops(ulnet::stack::iface::DropReason::TcpBadChecksum),
        0
    );
    assert_eq!(
        stats.drops(ulnet::stack::iface::DropReason::UdpBadChecksum),
        0
    );
}

#[test]
fn xdp_takes_unfinished_checksums_from_a_veth() {
    unfinished_checksums_are_taken("vck4", Backend::Xdp, 0);
}

#[test]
fn packet_takes_unfinished_checksums_from_a_veth() {
    unfinished_checksums_are_taken("vckp", Backend::Packet, 1);
}
