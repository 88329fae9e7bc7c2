//! Our frames, decoded by an independent implementation: a simulated session (ARP,
//! ping including a fragmented echo, UDP including fragmented datagrams both ways,
//! port unreachable, a TCP connection) is captured with `ulnet_channel::pcap::Pcap`
//! and read by tshark with checksum validation on. No frame may be malformed, carry a
//! bad checksum or raise an error-level expert note.
//!
//! tshark is a test dependency (the setup script installs it); without it this test
//! fails and says so.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{sa, Node, Sim};
use ulnet_channel::pcap::{Pcap, PcapWriter, Precision};
use ulnet_channel::sim::{LinkConfig, Wire};
use ulnet_stack::iface::Interface;
use ulnet_stack::socket::{IcmpSocket, UdpConfig, UdpSocket};
use ulnet_stack::tcp::{Tcp, TcpConfig};
use ulnet_stack::time::Duration;

/// Removes the capture file when the test ends, passed or not.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn run_session(path: &Path) {
    let (wire, a, b) = Wire::pair(
        21,
        LinkConfig::new().delay(std::time::Duration::from_micros(200)),
        LinkConfig::new(),
    );
    let clock = {
        let wire = wire.clone();
        move || wire.now()
    };
    let writer = PcapWriter::create(path, Precision::Nanos).expect("create capture");
    let mut sim = Sim::new(wire);
    sim.nodes.push(Node::new(
        Interface::new(common::config(1)).unwrap(),
        Box::new(Pcap::new(a, writer, clock)),
    ));
    sim.add(common::config(2), Box::new(b));
    for (i, key) in [(0, [1u8; 16]), (1, [2; 16])] {
        sim.iface(i).set_tcp(Tcp::new(TcpConfig::default(), key));
    }
    let mut udp = Vec::new();
    for i in 0..2 {
        let mut s = UdpSocket::new(UdpConfig::default());
        s.bind(sa(i as u8 + 1, 7)).unwrap();
        udp.push(sim.iface(i).sockets_mut().add_udp(s).unwrap());
    }
    let ping = sim
        .iface(0)
        .sockets_mut()
        .add_icmp(IcmpSocket::new(0x77, 8, 16 * 1024))
        .unwrap();

    // Ping: small, then large enough to be fragmented both ways.
    for (seq, len) in [(1u16, 56usize), (2, 56), (3, 3000)] {
        let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
        sim.iface(0)
            .sockets_mut()
            .icmp_mut(ping)
            .unwrap()
            .send_echo(common::ipa(2), seq, &data)
            .unwrap();
        sim.run_for(Duration::from_millis(20));
    }
    let mut buf = vec![0u8; 65536];
    let mut replies = 0;
    while sim
        .iface(0)
        .sockets_mut()
        .icmp_mut(ping)
        .unwrap()
        .recv_reply(&mut buf)
        .is_ok()
    {
        replies += 1;
    }
    assert_eq!(replies, 3);

    // UDP: small and 4,000-byte datagrams each way, and one to a closed port.
    for (from, to) in [(0usize, 2u8), (1, 1)] {
        for len in [32usize, 4000] {
            let data = vec![from as u8 ^ 0x5a; len];
            sim.iface(from)
                .sockets_mut()
                .udp_mut(udp[from])
                .unwrap()
                .send_to(&data, sa(to, 7))
                .unwrap();
        }
    }
    sim.iface(0)
        .sockets_mut()
        .udp_mut(udp[0])
        .unwrap()
        .send_to(b"closed?", sa(2, 9))
        .unwrap();
    sim.run_for(Duration::from_millis(20));
    for (i, &h) in udp.iter().enumerate() {
        assert_eq!(sim.iface(i).sockets().udp(h).unwrap().rx_queued(), 2);
    }
    assert_eq!(sim.iface(0).stats().icmp_errors_received, 1);

    // TCP: connect, 64 KiB, graceful close.
    let data: Vec<u8> = (0..65536u32).map(|i| (i * 7) as u8).collect();
    let t = common::tcp::transfer(&mut sim, &data, Duration::from_secs(60));
    assert!(
        t.done && t.received.len() == data.len(),
        "TCP transfer: {} bytes",
        t.received.len()
    );
    sim.run_for(Duration::from_secs(1));
}

fn tshark(args: &[&str]) -> String {
    let out = Command::new("tshark")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("tshark is required for this test (apt-get install tshark): {e}")
        });
    assert!(
        out.status.success(),
        "tshark {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("tshark output is UTF-8")
}

#[test]
fn tshark_finds_no_malformed_or_bad_checksum_frames() {
    let path = std::env::temp_dir().join(format!("ulnet-iface-{}.pcap", std::process::id()));
    let _guard = TempFile(path.clone());
    run_session(&path);
    let file = path.to_str().unwrap();
    let checks = [
        "-o",
        "ip.check_checksum:TRUE",
        "-o",
        "udp.check_checksum:TRUE",
        "-o",
        "tcp.check_checksum:TRUE",
    ];
    let with = |extra: &[&str]| {
        let mut v = vec!["-n", "-r", file];
        v.extend_from_slice(&checks);
        v.extend_from_slice(extra);
        tshark(&v)
    };
    let bad = with(&[
        "-Y",
        "_ws.malformed || _ws.expert.severity == \"Error\" || ip.checksum.status == \"Bad\" \
         || udp.checksum.status == \"Bad\" || tcp.checksum.status == \"Bad\" \
         || icmp.checksum.status == \"Bad\"",
        "-T",
        "fields",
        "-e",
        "frame.number",
        "-e",
        "_ws.col.Info",
    ]);
    assert!(bad.trim().is_empty(), "tshark flags these frames:\n{bad}");

    // The capture holds what the session did, and tshark really checked checksums.
    let count = |filter: &str| {
        with(&["-Y", filter, "-T", "fields", "-e", "frame.number"])
            .lines()
            .count()
    };
    assert!(count("arp") >= 3, "ARP");
    assert!(
        count("icmp.type == 8") >= 3 && count("icmp.type == 0") >= 3,
        "echo"
    );
    assert!(
        count("icmp.type == 3 && icmp.code == 3") == 1,
        "port unreachable"
    );
    assert!(count("ip.flags.mf == 1") >= 4, "fragments");
    assert!(
        count("udp.checksum.status == \"Good\"") >= 4,
        "UDP checksums verified"
    );
    assert!(
        count("tcp.checksum.status == \"Good\"") >= 40,
        "TCP checksums verified"
    );
    assert!(
        count("ip.checksum.status == \"Good\"") >= 60,
        "IP checksums verified"
    );
    assert!(
        count("tcp.flags.syn == 1") >= 2 && count("tcp.flags.fin == 1") >= 2,
        "TCP open/close"
    );
}
