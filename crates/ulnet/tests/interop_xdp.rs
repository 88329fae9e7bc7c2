//! Kernel interop over the AF_XDP channel: a testbed (namespaces A and B joined by veth),
//! ulnet on a spare address of A behind the steering program, the Linux kernel in B as
//! the peer. One runtime serves every phase in turn, so the test pays for one attach.

mod interop_support;

use std::net::SocketAddr;
use std::time::Duration;

use interop_support::*;
use ulnet::runtime::{self, Backend, NetConfig};
use ulnet::stack::iface::{IpCidr, Lookup};

#[test]
fn xdp_ping_arp_http_udp_tcp_loss_and_detach() {
    let tb = testbed("ixdp");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    let ip = a.spare_ip(0);
    let scratch = Scratch::new();
    let cfg = NetConfig::new(
        Backend::Xdp,
        &a.ifname,
        IpCidr::new(ip, a.prefix_len).unwrap(),
    )
    .netns(&a.ns);
    let mut rt = runtime::open(&cfg).expect("open the xdp runtime");
    assert!(xdp_attached(&a.ns, &a.ifname), "no XDP program after open");
    let mut s = Services::start(&rt, ip);
    let limit = Duration::from_secs(60);

    // The kernel pings ulnet (ARP kernel → ulnet), and the kernel's own address in the
    // same namespace still answers with the steering program attached.
    let (to_ulnet, to_kernel_a) = serve_while(&mut rt, &mut s, limit, || {
        let u = output_in(
            &b.ns,
            "ping",
            &["-c", "3", "-i", "0.2", "-W", "2", &ip.to_string()],
        );
        let k = output_in(
            &b.ns,
            "ping",
            &["-c", "2", "-i", "0.2", "-W", "2", &a.ip.to_string()],
        );
        (u, k)
    });
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
    assert_eq!(
        kernel_neighbor(&b.ns, ip).as_deref(),
        Some(a.mac.to_string().as_str()),
        "the kernel did not learn ulnet's MAC by ARP"
    );

    // ulnet pings the kernel (ARP ulnet → kernel).
    assert_eq!(
        ulnet_ping(&mut rt, &mut s, b.ip, 3),
        3,
        "ulnet → kernel ping"
    );
    {
        let i = rt.iface();
        let now = rt.now();
        assert!(
            matches!(i.neighbors().lookup(b.ip, now), Lookup::Found(m) if m.0 == b.mac.octets()),
            "ulnet did not learn the kernel's MAC"
        );
    }

    // UDP echo with a kernel client.
    let echoed = serve_while(&mut rt, &mut s, limit, || {
        kernel_udp_echo(&b.ns, SocketAddr::new(ip, 7), 200)
    });
    assert_eq!(echoed, 200, "UDP echoes intact");

    // curl downloads 20 MB from ulnet's HTTP server.
    let len = 20_000_000;
    let url = format!("http://{ip}/bytes/{len}");
    let out = scratch.path("body");
    let got = serve_while(&mut rt, &mut s, limit, || curl(&b.ns, &url, &out));
    assert_eq!(got, (len, pattern_sha(len)), "curl body");

    // TCP bulk, kernel → ulnet (socat sends a file to discard).
    let up = 8_000_000;
    let file = scratch.path("up");
    write_pattern(&file, up);
    let src = format!("FILE:{}", file.display());
    let dst = format!("TCP:{ip}:9");
    let sent = serve_until(
        &mut rt,
        &mut s,
        limit,
        &b.ns,
        "socat",
        &["-u", &src, &dst],
        |s| s.discard.tcp_stats().finished >= 1,
    );
    assert!(sent.status.success(), "socat → discard: {}", text(&sent));
    let st = s.discard.stats();
    assert_eq!(
        (st.tcp_bytes, st.tcp_pattern_ok),
        (up, 1),
        "discard saw {st:?}"
    );

    // ulnet as the client: sends to a kernel server, then receives from one.
    let server = kernel_tcp_server(&b.ns, SocketAddr::new(b.ip, 5001), 0);
    let r = ulnet_bulk(&mut rt, &mut s, ip, SocketAddr::new(b.ip, 5001), up);
    assert!(!r.failed && r.sent == up, "ulnet → kernel: {r:?}");
    assert_eq!(
        server.join().unwrap(),
        (up, pattern_sha(up)),
        "kernel received"
    );
    let server = kernel_tcp_server(&b.ns, SocketAddr::new(b.ip, 5002), up);
    let r = ulnet_bulk(&mut rt, &mut s, ip, SocketAddr::new(b.ip, 5002), 0);
    assert!(!r.failed, "kernel → ulnet: {r:?}");
    assert_eq!(
        (r.received, r.received_pattern_ok),
        (up, true),
        "ulnet received"
    );
    assert_eq!(server.join().unwrap().0, 0);

    // 2% random loss each way in the kernel's namespace: TCP recovers.
    tb.b().set_loss(2).expect("nft loss rules");
    let len = 5_000_000;
    let url = format!("http://{ip}/bytes/{len}");
    let got = serve_while(&mut rt, &mut s, Duration::from_secs(90), || {
        curl(&b.ns, &url, &out)
    });
    let drops = ulnet_bench::testbed::loss_drops(&b.ns).unwrap_or(0);
    tb.b().clear_loss().unwrap();
    assert_eq!(got, (len, pattern_sha(len)), "curl body under loss");
    assert!(drops > 0, "the loss rules dropped nothing");

    // Exiting detaches the program.
    drop(rt);
    assert!(
        !xdp_attached(&a.ns, &a.ifname),
        "XDP program left after ulnet exited"
    );
}
