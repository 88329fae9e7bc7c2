//! Kernel interop over a TAP device: ulnet creates the device in namespace B and the
//! kernel there, with an address on the device, is the peer.

mod interop_support;

use std::net::{IpAddr, SocketAddr};

use interop_support::*;
use ulnet::net::Stack;
use ulnet::runtime::Backend;
use ulnet::stack::iface::IpCidr;

#[test]
fn tap_ping_arp_http_udp_tcp() {
    let tb = testbed("itap");
    let b = tb.b().clone();
    // A subnet of its own inside B (the veth subnet is 198.18.x.0/24).
    let kernel: IpAddr = "198.19.77.1".parse().unwrap();
    let ip: IpAddr = "198.19.77.2".parse().unwrap();
    let dev = format!("ult{}", std::process::id() % 100_000);
    let scratch = Scratch::new();
    let cfg = Stack::builder()
        .backend(Backend::Tap)
        .interface(&dev)
        .address_cidr(IpCidr::new(ip, 24).unwrap())
        .netns(&b.ns);
    let mut t = Session::open(cfg, &b.ns);
    let o = output_in(&b.ns, "ip", &["addr", "add", "198.19.77.1/24", "dev", &dev]);
    assert!(o.status.success(), "ip addr add: {}", text(&o));

    let mac = t.rt.iface().mac().to_string();
    t.check_pings_both_ways(&mac, kernel);
    t.check_udp_echo(100);
    t.check_curl(10_000_000, &scratch.path("body"));

    // Keep-alive (the second request reuses the connection), HEAD, 404.
    let base = format!("http://{ip}");
    let o = t.serve_while(|| {
        output_in(
            &b.ns,
            "curl",
            &[
                "-sS",
                "--max-time",
                "10",
                "-o",
                "/dev/null",
                "-o",
                "/dev/null",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code} %{num_connects} %{size_download}\\n",
                &format!("{base}/bytes/1000"),
                &format!("{base}/bytes/1000"),
                &format!("{base}/missing"),
            ],
        )
    });
    assert_eq!(
        text(&o),
        "200 1 1000\n200 0 1000\n404 0 14\n",
        "keep-alive and 404"
    );
    let o = t.serve_while(|| {
        output_in(
            &b.ns,
            "curl",
            &["-sS", "--max-time", "10", "-I", &format!("{base}/bytes/77")],
        )
    });
    let head = text(&o);
    assert!(
        head.starts_with("HTTP/1.1 200 OK") && head.contains("Content-Length: 77"),
        "HEAD: {head}"
    );

    let up = 4_000_000;
    t.check_bulk(SocketAddr::new(kernel, 5001), up, up);

    drop(t);
    let gone = output_in(&b.ns, "ip", &["link", "show", "dev", &dev]);
    assert!(
        !gone.status.success(),
        "the TAP device outlived the runtime"
    );
}
