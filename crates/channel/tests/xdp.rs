//! Kernel interop for the AF_XDP channel: a namespace pair joined by veth, the channel
//! on one end, the Linux kernel on the other. Runs as root in the normal test command.

mod support;

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::net::{Testbed, KERNEL_A, PEER, STEERED};
use support::udp::{parse_udp, udp_frame, UdpSpec};
use ulnet_channel::sys::netns;
use ulnet_channel::xdp::{FlowRule, XdpChannel, XdpMode, XdpOptions, ZeroCopy};
use ulnet_channel::Channel;

fn options() -> XdpOptions {
    XdpOptions {
        addresses: vec![Ipv4Addr::from(STEERED).into()],
        frame_count: 512,
        rx_ring_size: 256,
        tx_ring_size: 256,
        ..XdpOptions::default()
    }
}

/// Sends `count` datagrams of `payload` from the peer's kernel to `dst`.
fn peer_send(tb: &Testbed, dst: [u8; 4], port: u16, payload: &[u8], count: usize) {
    netns::run_in(&tb.peer.name, || {
        let s = UdpSocket::bind(SocketAddrV4::new(PEER.into(), 0)).expect("bind in peer namespace");
        for _ in 0..count {
            s.send_to(payload, SocketAddrV4::new(dst.into(), port))
                .expect("send from peer");
        }
    })
    .expect("enter peer namespace");
}

/// A datagram from the steered address, port 4000, to the peer's port 6000.
fn steered_to_peer(xdp_mac: [u8; 6], peer_mac: [u8; 6]) -> UdpSpec {
    UdpSpec {
        src_mac: xdp_mac,
        dst_mac: peer_mac,
        src: SocketAddrV4::new(STEERED.into(), 4000),
        dst: SocketAddrV4::new(PEER.into(), 6000),
    }
}

/// Polls the channel until `want` UDP frames to `port` arrived or 5 s passed; returns
/// their payloads.
fn collect_udp(ch: &mut XdpChannel, port: u16, want: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < want && Instant::now() < deadline {
        let n = ch
            .rx_batch(64, &mut |frame, _tx| {
                if let Some(u) = parse_udp(frame) {
                    if u.dst == SocketAddrV4::new(STEERED.into(), port) {
                        got.push(u.payload.to_vec());
                    }
                }
            })
            .unwrap();
        if n == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    got
}

#[test]
fn steered_udp_arrives_and_other_traffic_stays_with_the_kernel() {
    let tb = Testbed::new(1500);
    let mut ch =
        XdpChannel::open(&tb.xdp_dev, Some(&tb.xdp.name), &options()).expect("open XDP channel");
    let caps = ch.capabilities();
    assert!(
        caps.mode.contains("copy") || caps.mode.contains("zero-copy"),
        "{}",
        caps.mode
    );
    assert!(
        tb.xdp_link_show().contains("xdp"),
        "program attached:\n{}",
        tb.xdp_link_show()
    );

    // Without a neighbour entry the peer's kernel first asks for the steered address:
    // that ARP request must reach the channel (nobody answers it, so the datagram
    // waits in the peer's neighbour queue and is dropped).
    peer_send(&tb, STEERED, 5999, b"who", 1);
    let mut saw_arp = false;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !saw_arp && Instant::now() < deadline {
        ch.rx_batch(64, &mut |f, _| {
            saw_arp |= f.len() >= 42 && f[12..14] == [0x08, 0x06] && f[38..42] == STEERED;
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(
        saw_arp,
        "ARP request for the steered address reached the channel"
    );

    tb.static_neighbour();
    peer_send(&tb, STEERED, 5000, b"hello ulnet", 20);
    let got = collect_udp(&mut ch, 5000, 20);
    assert_eq!(
        got.len(),
        20,
        "datagrams seen on the channel; stats {:?}",
        ch.stats()
    );
    assert!(got.iter().all(|p| p == b"hello ulnet"));
    let st = ch.stats();
    assert!(st.rx_frames >= 21 && st.rx_bytes > 0, "{st:?}");

    // (b) The kernel address on the XDP side still works: the steering program passes
    // its ARP and ICMP to the kernel.
    let ping = Command::new("ip")
        .args([
            "netns",
            "exec",
            &tb.peer.name,
            "ping",
            "-c",
            "2",
            "-i",
            "0.2",
            "-W",
            "2",
            "198.18.0.2",
        ])
        .output()
        .expect("ping (iputils-ping) is needed");
    assert!(
        ping.status.success(),
        "ping to the kernel's address: {}",
        String::from_utf8_lossy(&ping.stdout)
    );
    let _ = KERNEL_A;
}

#[test]
fn channel_transmits_to_the_peer_kernel() {
    let tb = Testbed::new(1500);
    let mut ch =
        XdpChannel::open(&tb.xdp_dev, Some(&tb.xdp.name), &options()).expect("open XDP channel");
    let (xdp_mac, peer_mac) = (tb.xdp_mac(), tb.peer_mac());
    let frame = udp_frame(&steered_to_peer(xdp_mac, peer_mac), b"from ulnet");
    netns::run_in(&tb.peer.name, || {
        let s = UdpSocket::bind(SocketAddrV4::new(PEER.into(), 6000)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // Send a batch with one flush: more than the kernel's 32-per-kick copy-mode limit.
        for _ in 0..100 {
            ch.tx()
                .send(frame.len(), &mut |buf| buf.copy_from_slice(&frame))
                .unwrap();
        }
        ch.tx().flush().unwrap();
        let mut buf = [0u8; 2048];
        for i in 0..100 {
            let (n, from) = s
                .recv_from(&mut buf)
                .unwrap_or_else(|e| panic!("datagram {i}: {e}"));
            assert_eq!(&buf[..n], b"from ulnet");
            assert_eq!(from, SocketAddrV4::new(STEERED.into(), 4000).into());
        }
    })
    .unwrap();
    let st = ch.stats();
    assert_eq!(st.tx_frames, 100);
    assert_eq!(st.tx_dropped, 0);
}

#[test]
fn flow_rules_limit_what_is_steered() {
    let tb = Testbed::new(1500);
    let mut o = options();
    o.rules = vec![FlowRule::udp(5000)];
    let mut ch = XdpChannel::open(&tb.xdp_dev, Some(&tb.xdp.name), &o).expect("open XDP channel");
    tb.static_neighbour();
    peer_send(&tb, STEERED, 5001, b"not for ulnet", 5);
    peer_send(&tb, STEERED, 5000, b"for ulnet", 5);
    let mut other = 0;
    let got = {
        let mut got = 0;
        let deadline = Instant::now() + Duration::from_secs(5);
        while got < 5 && Instant::now() < deadline {
            ch.rx_batch(64, &mut |f, _| match parse_udp(f).map(|u| u.dst.port()) {
                Some(5000) => got += 1,
                Some(5001) => other += 1,
                _ => {}
            })
            .unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        got
    };
    assert_eq!(got, 5);
    assert_eq!(
        other, 0,
        "port 5001 has no rule and must stay with the kernel"
    );
}

/// `ip link show` once no program is attached, or after 5 s. The link is released when
/// its last file reference goes; besides a dead process's files closing, a child that
/// another test thread is spawning holds a copy of our descriptor table until its
/// `exec` (close-on-exec), so the detach can trail the drop by a moment.
fn wait_detached(tb: &Testbed) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let show = tb.xdp_link_show();
        if !show.contains("xdp") || Instant::now() > deadline {
            return show;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn program_is_gone_after_drop() {
    let tb = Testbed::new(1500);
    let ch =
        XdpChannel::open(&tb.xdp_dev, Some(&tb.xdp.name), &options()).expect("open XDP channel");
    assert!(tb.xdp_link_show().contains("xdp"));
    drop(ch);
    let show = wait_detached(&tb);
    assert!(!show.contains("xdp"), "no XDP program after drop:\n{show}");
}

#[test]
fn program_is_gone_after_kill_9() {
    let tb = Testbed::new(1500);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ULNET_XDP_CRASH_NETNS", &tb.xdp.name)
        .env("ULNET_XDP_CRASH_DEV", &tb.xdp_dev)
        .stdout(Stdio::piped())
        .spawn()
        .expect("re-run this test binary as the child");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines
        .by_ref()
        .map_while(|l| l.ok())
        .any(|l| l.contains("ULNET-CHILD-READY"));
    if !ready {
        let _ = child.kill();
        let _ = child.wait();
        panic!("child did not open the channel");
    }
    assert!(
        tb.xdp_link_show().contains("xdp"),
        "child attached the program"
    );
    child.kill().unwrap(); // SIGKILL: no destructor runs.
    child.wait().unwrap();
    let show = wait_detached(&tb);
    assert!(
        !show.contains("xdp"),
        "no XDP program after kill -9:\n{show}"
    );
}

/// The child half of `program_is_gone_after_kill_9`: does nothing unless started by it.
#[test]
#[ignore = "child process of program_is_gone_after_kill_9"]
fn crash_child() {
    let (Ok(ns), Ok(dev)) = (
        std::env::var("ULNET_XDP_CRASH_NETNS"),
        std::env::var("ULNET_XDP_CRASH_DEV"),
    ) else {
        return;
    };
    let o = XdpOptions {
        frame_count: 64,
        rx_ring_size: 64,
        tx_ring_size: 64,
        ..XdpOptions::default()
    };
    let _ch = XdpChannel::open(&dev, Some(&ns), &o).expect("child opens the channel");
    println!("ULNET-CHILD-READY");
    // Bounded: the parent kills us long before this.
    std::thread::sleep(Duration::from_secs(30));
}

#[test]
fn jumbo_frames_use_multi_buffer() {
    let tb = Testbed::new(9000);
    let mut ch = XdpChannel::open(&tb.xdp_dev, Some(&tb.xdp.name), &options())
        .expect("open XDP channel at MTU 9000");
    assert!(
        ch.capabilities().mode.contains("multi-buffer"),
        "{}",
        ch.capabilities().mode
    );
    tb.static_neighbour();
    let payload: Vec<u8> = (0..8000u32).map(|i| i as u8).collect();
    peer_send(&tb, STEERED, 5000, &payload, 3);
    let got = collect_udp(&mut ch, 5000, 3);
    assert_eq!(
        got.len(),
        3,
        "jumbo datagrams; stats {:?} {:?}",
        ch.stats(),
        ch.xdp_statistics()
    );
    assert!(got.iter().all(|p| *p == payload));

    let frame = udp_frame(&steered_to_peer(tb.xdp_mac(), tb.peer_mac()), &payload);
    netns::run_in(&tb.peer.name, || {
        let s = UdpSocket::bind(SocketAddrV4::new(PEER.into(), 6000)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        ch.tx()
            .send(frame.len(), &mut |b| b.copy_from_slice(&frame))
            .unwrap();
        ch.tx().flush().unwrap();
        let mut buf = vec![0u8; 9000];
        let (n, _) = s
            .recv_from(&mut buf)
            .expect("jumbo datagram from the channel");
        assert_eq!(&buf[..n], &payload[..]);
    })
    .unwrap();
}

/// veth's largest MTU: a frame of up to 17 descriptors each way. The transmit side
/// writes such a frame across consecutive UMEM frames in place; several in a row check
/// that the free list keeps handing out runs that reassemble byte-exact at the peer.
#[test]
fn largest_veth_mtu_frames_cross_both_ways() {
    let tb = Testbed::new(65535);
    let mut ch = XdpChannel::open(&tb.xdp_dev, Some(&tb.xdp.name), &options())
        .expect("open XDP channel at MTU 65535");
    assert!(ch.capabilities().max_frame_len >= 65535 + 14);
    tb.static_neighbour();
    let payload: Vec<u8> = (0..60000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    peer_send(&tb, STEERED, 5000, &payload, 3);
    let got = collect_udp(&mut ch, 5000, 3);
    assert_eq!(
        got.len(),
        3,
        "stats {:?} {:?}",
        ch.stats(),
        ch.xdp_statistics()
    );
    assert!(got.iter().all(|p| *p == payload));

    let frame = udp_frame(&steered_to_peer(tb.xdp_mac(), tb.peer_mac()), &payload);
    netns::run_in(&tb.peer.name, || {
        let s = UdpSocket::bind(SocketAddrV4::new(PEER.into(), 6000)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = vec![0u8; 65536];
        for _ in 0..8 {
            ch.tx()
                .send(frame.len(), &mut |b| b.copy_from_slice(&frame))
                .unwrap();
            ch.tx().flush().unwrap();
            let (n, _) = s
                .recv_from(&mut buf)
                .expect("64 KB datagram from the channel");
            assert_eq!(&buf[..n], &payload[..]);
        }
    })
    .unwrap();
}

#[test]
fn missing_interface_is_named() {
    let tb = Testbed::new(1500);
    let e = XdpChannel::open("ulnet-nope0", Some(&tb.xdp.name), &options()).unwrap_err();
    assert!(e.to_string().contains("no such interface"), "{e}");
}

#[test]
fn second_channel_on_the_same_queue_is_refused_with_a_reason() {
    let tb = Testbed::new(1500);
    let _a = XdpChannel::open(&tb.xdp_dev, Some(&tb.xdp.name), &options()).expect("first channel");
    let e = XdpChannel::open(&tb.xdp_dev, Some(&tb.xdp.name), &options()).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("another"), "{text}");
}

#[test]
fn generic_mode_is_reported_and_works() {
    let tb = Testbed::new(1500);
    let mut o = options();
    o.mode = XdpMode::Generic;
    let mut ch = XdpChannel::open(&tb.xdp_dev, Some(&tb.xdp.name), &o)
        .expect("open XDP channel in generic mode");
    assert!(
        ch.capabilities().mode.starts_with("generic, copy"),
        "{}",
        ch.capabilities().mode
    );
    assert!(!ch.is_native());
    tb.static_neighbour();
    peer_send(&tb, STEERED, 5000, b"generic", 5);
    assert_eq!(collect_udp(&mut ch, 5000, 5).len(), 5);
}

#[test]
fn forced_zero_copy_on_veth_is_refused_with_a_reason() {
    // veth has no zero-copy AF_XDP (docs/LINUX-NOTES.md): forcing it must fail and say why.
    let tb = Testbed::new(1500);
    let mut o = options();
    o.zero_copy = ZeroCopy::On;
    let e = XdpChannel::open(&tb.xdp_dev, Some(&tb.xdp.name), &o).unwrap_err();
    assert_eq!(e.source.raw_os_error(), Some(libc::EOPNOTSUPP), "{e}");
    assert!(e.to_string().contains("copy mode"), "{e}");
}

/// Whether `f` is an ICMPv6 neighbour solicitation (RFC 4861 §4.3) for `target`.
fn is_ns_for(f: &[u8], target: std::net::Ipv6Addr) -> bool {
    f.len() >= 14 + 40 + 24
        && f[12..14] == [0x86, 0xdd]
        && f[14 + 6] == 58
        && f[54] == 135
        && f[54 + 8..54 + 24] == target.octets()
}

#[test]
fn ipv6_solicitations_for_steered_addresses_arrive_and_the_kernels_stay_with_it() {
    // Issue 15: the peer kernel's neighbour solicitation for ulnet's IPv6 address goes to
    // its solicited-node group (multicast MAC 33:33:ff:..): it reaches the channel. The
    // kernel's own IPv6 address on the XDP side keeps working (its group is not steered).
    let tb = Testbed::new(1500);
    let ours: std::net::Ipv6Addr = "2001:2:0:ee::10".parse().unwrap();
    let kernel: std::net::Ipv6Addr = "2001:2:0:ee::2".parse().unwrap();
    tb.peer.ip(&[
        "addr",
        "add",
        "2001:2:0:ee::1/64",
        "dev",
        &tb.peer_dev,
        "nodad",
    ]);
    tb.xdp.ip(&[
        "addr",
        "add",
        "2001:2:0:ee::2/64",
        "dev",
        &tb.xdp_dev,
        "nodad",
    ]);
    let mut o = options();
    o.addresses.push(ours.into());
    let mut ch = XdpChannel::open(&tb.xdp_dev, Some(&tb.xdp.name), &o).expect("open XDP channel");
    let ping = |dst: std::net::Ipv6Addr, count: &str| {
        Command::new("ip")
            .args(["netns", "exec", &tb.peer.name, "ping", "-6", "-c", count])
            .args(["-i", "0.2", "-W", "1", &dst.to_string()])
            .output()
            .expect("ping (iputils-ping) is needed")
    };
    // Nobody answers for `ours`: the kernel solicits up to three times, then gives up.
    let _ = ping(ours, "1");
    let own = ping(kernel, "2");
    assert!(
        own.status.success(),
        "the XDP side's own IPv6 address: {}",
        String::from_utf8_lossy(&own.stdout)
    );
    let (mut ns_ours, mut for_kernel) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        ch.rx_batch(64, &mut |f, _| {
            if is_ns_for(f, ours) {
                ns_ours += 1;
                // Sent to the solicited-node group's MAC (RFC 2464 §7).
                assert_eq!(f[..6], [0x33, 0x33, 0xff, 0, 0, 0x10], "{f:02x?}");
            }
            let to_kernel = f.len() >= 54
                && f[12..14] == [0x86, 0xdd]
                && (f[38..54] == kernel.octets() || is_ns_for(f, kernel));
            for_kernel += usize::from(to_kernel);
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        ns_ours >= 1,
        "no solicitation for the steered address arrived"
    );
    assert_eq!(for_kernel, 0, "the kernel's IPv6 traffic was steered");
}
