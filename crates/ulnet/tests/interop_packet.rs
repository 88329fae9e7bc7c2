//! Kernel interop over the AF_PACKET channel, with a capture of the whole run that
//! tshark must find free of malformed frames and checksum errors.

mod interop_support;

use std::net::SocketAddr;
use std::time::Duration;

use interop_support::*;
use ulnet::runtime::{self, Backend, NetConfig};
use ulnet::stack::iface::IpCidr;

#[test]
fn packet_ping_http_udp_tcp_loss_and_clean_capture() {
    let tb = testbed("ipkt");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    let ip = a.spare_ip(1);
    let scratch = Scratch::new();
    let pcap = scratch.path("run.pcap");
    let cfg = NetConfig::new(
        Backend::Packet,
        &a.ifname,
        IpCidr::new(ip, a.prefix_len).unwrap(),
    )
    .netns(&a.ns)
    .pcap(&pcap);
    let mut rt = runtime::open(&cfg).expect("open the packet runtime");
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
    assert_eq!(
        kernel_neighbor(&b.ns, ip).as_deref(),
        Some(a.mac.to_string().as_str()),
        "ARP kernel → ulnet"
    );
    assert_eq!(
        ulnet_ping(&mut rt, &mut s, b.ip, 3),
        3,
        "ulnet → kernel ping"
    );

    let echoed = serve_while(&mut rt, &mut s, limit, || {
        kernel_udp_echo(&b.ns, SocketAddr::new(ip, 7), 100)
    });
    assert_eq!(echoed, 100, "UDP echoes intact");

    let len = 4_000_000;
    let out = scratch.path("body");
    let url = format!("http://{ip}/bytes/{len}");
    let got = serve_while(&mut rt, &mut s, limit, || curl(&b.ns, &url, &out));
    assert_eq!(got, (len, pattern_sha(len)), "curl body");

    let up = 2_000_000;
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

    let server = kernel_tcp_server(&b.ns, SocketAddr::new(b.ip, 5001), up);
    let r = ulnet_bulk(&mut rt, &mut s, ip, SocketAddr::new(b.ip, 5001), up);
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

    tb.b().set_loss(2).expect("nft loss rules");
    let len = 2_000_000;
    let url = format!("http://{ip}/bytes/{len}");
    let got = serve_while(&mut rt, &mut s, Duration::from_secs(90), || {
        curl(&b.ns, &url, &out)
    });
    tb.b().clear_loss().unwrap();
    assert_eq!(got, (len, pattern_sha(len)), "curl body under loss");

    drop(rt);
    tshark_clean(&pcap, 5_000);
}
