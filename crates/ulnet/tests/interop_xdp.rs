//! Kernel interop over the AF_XDP channel: a testbed (namespaces A and B joined by veth),
//! ulnet on a spare address of A behind the steering program, the Linux kernel in B as
//! the peer. One runtime serves every phase in turn, so the test pays for one attach.

mod interop_support;

use std::net::SocketAddr;

use interop_support::*;
use ulnet::net::Stack;
use ulnet::runtime::Backend;
use ulnet::stack::iface::{IpCidr, Lookup};

#[test]
fn xdp_ping_arp_http_udp_tcp_loss_and_detach() {
    let tb = testbed("ixdp");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    let ip = a.spare_ip(0);
    let scratch = Scratch::new();
    let cfg = Stack::builder()
        .backend(Backend::Xdp)
        .interface(&a.ifname)
        .address_cidr(IpCidr::new(ip, a.prefix_len).unwrap())
        .netns(&a.ns);
    let mut t = Session::open(cfg, &b.ns);
    assert!(xdp_attached(&a.ns, &a.ifname), "no XDP program after open");

    // The kernel pings ulnet (ARP kernel → ulnet), and the kernel's own address in the
    // same namespace still answers with the steering program attached.
    let (to_ulnet, to_kernel_a) =
        t.serve_while(|| (ping_from(&b.ns, ip, 3), ping_from(&b.ns, a.ip, 2)));
    assert!(
        to_ulnet.status.success(),
        "kernel → ulnet ping: {}",
        text(&to_ulnet)
    );
    assert!(
        to_kernel_a.status.success(),
        "kernel A's own address: {}",
        text(&to_kernel_a)
    );
    t.check_kernel_learned(&a.mac.to_string());

    // ulnet pings the kernel (ARP ulnet → kernel).
    t.check_ulnet_pings(b.ip);
    {
        let i = t.rt.iface();
        let now = t.rt.now();
        assert!(
            matches!(i.neighbors().lookup(b.ip, now), Lookup::Found(m) if m.0 == b.mac.octets()),
            "ulnet did not learn the kernel's MAC"
        );
    }

    t.check_udp_echo(200);
    // curl downloads 20 MB from ulnet's HTTP server.
    let out = scratch.path("body");
    t.check_curl(20_000_000, &out);
    // TCP bulk, kernel → ulnet (socat sends a file to discard).
    let up = 8_000_000;
    t.check_socat_to_discard(&scratch, up);
    // ulnet as the client: sends to a kernel server, then receives from one.
    t.check_bulk(SocketAddr::new(b.ip, 5001), up, 0);
    t.check_bulk(SocketAddr::new(b.ip, 5002), 0, up);

    // Issue 13: 431 delivered for a 1 MB request line, no symbolic link out of the
    // root, head and idle timeouts, the per-source limit.
    t.check_http_limits(&scratch);

    // 2% random loss each way in the kernel's namespace: TCP recovers.
    let drops = t.check_curl_under_loss(&b, 5_000_000, &out);
    assert!(drops > 0, "the loss rules dropped nothing");

    // Exiting detaches the program.
    drop(t);
    assert!(
        !xdp_attached(&a.ns, &a.ifname),
        "XDP program left after ulnet exited"
    );
}
