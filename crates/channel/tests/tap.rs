//! Kernel interop tests of the `tap` channel: a TAP device in a namespace this test
//! creates, the kernel on its far side (needs root; fails naming what is missing).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::Command;

mod support;

use support::net::{short_id, Netns};
use support::udp::{assert_all_once, collect_udp, kernel_send, send_udp, UdpSpec};
use ulnet_channel::tap::{TapChannel, TapOptions};
use ulnet_channel::{Channel, TxError};

const ULNET_MAC: [u8; 6] = [0x02, 0x00, 0x5e, 0x20, 0x00, 0x02];
const KERNEL_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 200, 1);
const ULNET_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 200, 2);

fn link_exists(ns: &Netns, name: &str) -> bool {
    Command::new("ip")
        .args(["-n", &ns.name, "link", "show", "dev", name])
        .output()
        .map(|o| o.status.success())
        .unwrap_or_else(|e| panic!("cannot run `ip` ({e}): this test needs iproute2"))
}

fn open(ns: &Netns, tweak: impl FnOnce(&mut TapOptions)) -> TapChannel {
    let mut cfg = TapOptions::default();
    tweak(&mut cfg);
    TapChannel::open(&format!("t{}", short_id()), Some(&ns.name), &cfg)
        .unwrap_or_else(|e| panic!("opening the tap channel: {e}"))
}

#[test]
fn frames_flow_both_ways_with_the_kernel() {
    let ns = Netns::new("taprw");
    let mut ch = open(&ns, |_| {});
    let caps = ch.capabilities();
    assert_eq!(
        (caps.name, caps.mtu, caps.max_frame_len),
        ("tap", 1500, 1514)
    );
    assert!(ch.wait_fd().is_some());
    let name = ch.name().to_owned();
    ns.ip(&["addr", "add", &format!("{KERNEL_IP}/24"), "dev", &name]);
    ns.static_neighbour(&name, ULNET_IP, ULNET_MAC);
    let kernel_mac = ns.mac(&name);

    // Kernel → channel.
    let to_ulnet = SocketAddrV4::new(ULNET_IP, 9999);
    let sock = ns.udp_socket(SocketAddrV4::new(KERNEL_IP, 7777));
    kernel_send(&sock, to_ulnet, 300);
    let (seqs, _) = collect_udp(&mut ch, to_ulnet, 300, ULNET_MAC, None);
    assert_all_once(seqs, 300, "kernel → tap channel");

    // Channel → kernel.
    let spec = UdpSpec {
        src_mac: ULNET_MAC,
        dst_mac: kernel_mac,
        src: SocketAddrV4::new(ULNET_IP, 5555),
        dst: SocketAddrV4::new(KERNEL_IP, 7777),
    };
    let (got, own) = send_udp(&mut ch, &spec, 200, &sock);
    assert_all_once(got, 200, "tap channel → kernel");
    assert_eq!(own, 0, "a TAP reader never sees its own writes");
    let st = ch.stats();
    assert!(st.rx_frames >= 300, "{st:?}");
    assert_eq!((st.tx_frames, st.tx_dropped), (200, 0), "{st:?}");
    assert!(st.kicks >= 200, "one write per frame: {st:?}");
}

#[test]
fn mtu_is_set_and_enforced() {
    let ns = Netns::new("tapmtu");
    let mut ch = open(&ns, |c| {
        c.mtu = Some(1400);
        c.tx_frame_count = 3;
    });
    let caps = ch.capabilities();
    assert_eq!((caps.mtu, caps.max_frame_len), (1400, 1414));
    let out = ns.ip(&["link", "show", "dev", ch.name()]);
    assert!(out.contains("mtu 1400") && out.contains(",UP"), "{out}");
    assert_eq!(
        ch.tx().send(1415, &mut |_| panic!("filled")),
        Err(TxError::TooLarge)
    );
    for _ in 0..3 {
        ch.tx().send(1414, &mut |b| b.fill(0)).unwrap();
    }
    assert_eq!(ch.tx().send(60, &mut |_| {}), Err(TxError::Full));
    let st = ch.stats();
    assert_eq!((st.tx_frames, st.tx_dropped), (3, 2), "{st:?}");
    // Frames of zeros are not valid IP, but the device takes them; the slots free up.
    ch.tx().flush().unwrap();
    ch.tx().send(60, &mut |b| b.fill(0)).unwrap();
}

#[test]
fn device_goes_with_the_channel_unless_persistent() {
    let ns = Netns::new("tappers");
    let ch = open(&ns, |_| {});
    let name = ch.name().to_owned();
    assert!(link_exists(&ns, &name));
    drop(ch);
    assert!(
        !link_exists(&ns, &name),
        "non-persistent TAP outlived its channel"
    );

    let ch = open(&ns, |c| c.persist = true);
    let name = ch.name().to_owned();
    assert!(ch.capabilities().mode.contains("persistent"));
    drop(ch);
    assert!(link_exists(&ns, &name), "persistent TAP vanished");
    // Attaching to the existing device by name works, and it is still a TAP.
    let ch = TapChannel::open(&name, Some(&ns.name), &TapOptions::default()).unwrap();
    assert_eq!(ch.name(), name);
    drop(ch);
    ns.ip(&["link", "del", "dev", &name]);
}

#[test]
fn kernel_chosen_name() {
    let ns = Netns::new("tapname");
    let ch = TapChannel::open("", Some(&ns.name), &TapOptions::default()).unwrap();
    assert!(ch.name().starts_with("tap"), "{}", ch.name());
    assert!(link_exists(&ns, ch.name()));
}

#[test]
fn open_errors_name_the_cause_and_fix() {
    let ns = Netns::new("taperr");
    // `lo` exists and is not a TAP device.
    let e = TapChannel::open("lo", Some(&ns.name), &TapOptions::default()).unwrap_err();
    assert_eq!(e.op, "ioctl(TUNSETIFF)", "{e}");
    assert!(e.to_string().contains("not a TAP device"), "{e}");

    let e = TapChannel::open("x", Some("ulnet-no-such-ns"), &TapOptions::default()).unwrap_err();
    assert_eq!(e.source.raw_os_error(), Some(libc::ENOENT), "{e}");

    let e =
        TapChannel::open("much-too-long-name", Some(&ns.name), &TapOptions::default()).unwrap_err();
    assert_eq!(e.source.raw_os_error(), Some(libc::EINVAL), "{e}");

    let e = TapChannel::open(
        "tmtu",
        Some(&ns.name),
        &TapOptions {
            mtu: Some(10),
            ..TapOptions::default()
        },
    )
    .unwrap_err();
    assert_eq!(e.op, "ioctl(SIOCSIFMTU)", "{e}");
}
