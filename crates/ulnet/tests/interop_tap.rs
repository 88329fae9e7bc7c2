//! Kernel interop over a TAP device: ulnet creates the device in namespace B and the
//! kernel there, with an address on the device, is the peer.

mod interop_support;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use interop_support::*;
use ulnet::runtime::{self, Backend, NetConfig};
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
    let cfg = NetConfig::new(Backend::Tap, &dev, IpCidr::new(ip, 24).unwrap()).netns(&b.ns);
    let mut rt = runtime::open(&cfg).expect("open the tap runtime");
    let o = output_in(&b.ns, "ip", &["addr", "add", "198.19.77.1/24", "dev", &dev]);
    assert!(o.status.success(), "ip addr add: {}", text(&o));
    let mut s = Services::start(&rt, ip);
    let limit = Duration::from_secs(60);

    let ping = serve_while(&mut rt, &mut s, limit, || {
        output_in(
            &b.ns,
            "ping",
            &["-c", "3", "-i", "0.2", "-W", "2", &ip.to_string()],
        )
    });
    assert!(
        ping.status.success(),
        "kernel → ulnet ping: {}",
        text(&ping)
    );
    let mac = rt.iface().mac().to_string();
    assert_eq!(kernel_neighbor(&b.ns, ip), Some(mac), "ARP kernel → ulnet");
    assert_eq!(
        ulnet_ping(&mut rt, &mut s, kernel, 3),
        3,
        "ulnet → kernel ping"
    );

    let echoed = serve_while(&mut rt, &mut s, limit, || {
        kernel_udp_echo(&b.ns, SocketAddr::new(ip, 7), 100)
    });
    assert_eq!(echoed, 100, "UDP echoes intact");

    let len = 10_000_000;
    let out = scratch.path("body");
    let url = format!("http://{ip}/bytes/{len}");
    let got = serve_while(&mut rt, &mut s, limit, || curl(&b.ns, &url, &out));
    assert_eq!(got, (len, pattern_sha(len)), "curl body");

    // Keep-alive (the second request reuses the connection), HEAD, 404.
    let base = format!("http://{ip}");
    let o = serve_while(&mut rt, &mut s, limit, || {
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
    let o = serve_while(&mut rt, &mut s, limit, || {
        output_in(
            &b.ns,
            "curl",
            &["-sS", "--max-time", "10", "-I", &format!("{base}/bytes/77")],
        )
    });
    let t = text(&o);
    assert!(
        t.starts_with("HTTP/1.1 200 OK") && t.contains("Content-Length: 77"),
        "HEAD: {t}"
    );

    let up = 4_000_000;
    let server = kernel_tcp_server(&b.ns, SocketAddr::new(kernel, 5001), up);
    let r = ulnet_bulk(&mut rt, &mut s, ip, SocketAddr::new(kernel, 5001), up);
    assert!(!r.failed && r.sent == up, "ulnet ⇄ kernel: {r:?}");
    assert_eq!(
        (r.received, r.received_pattern_ok),
        (up, true),
        "ulnet received"
    );
    assert_eq!(
        server.join().unwrap(),
        (up, pattern_sha(up)),
        "kernel received"
    );

    drop(rt);
    let gone = output_in(&b.ns, "ip", &["link", "show", "dev", &dev]);
    assert!(
        !gone.status.success(),
        "the TAP device outlived the runtime"
    );
}
