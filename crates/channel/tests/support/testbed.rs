//! Test-only testbed for the XDP channel: two fresh network namespaces joined by a veth
//! pair, addresses from 198.18.0.0/15, torn down by `Drop` even when a test fails.
//! Missing tools or privileges fail loudly with what is missing; nothing is skipped.
#![allow(dead_code)]

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// The XDP side's steered address (owned by ulnet, not by the kernel there).
pub const STEERED: [u8; 4] = [198, 18, 0, 1];
/// A kernel address on the XDP side (not steered).
pub const KERNEL_A: [u8; 4] = [198, 18, 0, 2];
/// The peer's kernel address.
pub const PEER: [u8; 4] = [198, 18, 0, 3];

pub fn run(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{}` ({e}): this test needs iproute2 and ethtool installed",
                args[0]
            )
        });
    assert!(
        out.status.success(),
        "`{}` failed: {}{} (these tests need root: CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_BPF)",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Namespace `xdp` holds `xdp_dev` (where the channel attaches, kernel address
/// KERNEL_A); namespace `peer` holds `peer_dev` (PEER), offloads off so raw readers see
/// real frames (LINUX-NOTES).
#[derive(Debug)]
pub struct Testbed {
    pub xdp: String,
    pub peer: String,
    pub xdp_dev: String,
    pub peer_dev: String,
}

fn ip4(a: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

impl Testbed {
    pub fn new(mtu: u32) -> Self {
        let id = format!(
            "{}x{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let tb = Testbed {
            xdp: format!("ulx-{id}"),
            peer: format!("ulp-{id}"),
            xdp_dev: format!("ux{id}"),
            peer_dev: format!("up{id}"),
        };
        assert!(
            tb.xdp_dev.len() < 16,
            "interface name too long: {}",
            tb.xdp_dev
        );
        run(&["ip", "netns", "add", &tb.xdp]);
        // From here on Drop cleans up whatever was created.
        run(&["ip", "netns", "add", &tb.peer]);
        run(&[
            "ip",
            "link",
            "add",
            &tb.xdp_dev,
            "netns",
            &tb.xdp,
            "type",
            "veth",
            "peer",
            "name",
            &tb.peer_dev,
            "netns",
            &tb.peer,
        ]);
        let mtu = mtu.to_string();
        for (ns, dev, addr) in [
            (&tb.xdp, &tb.xdp_dev, KERNEL_A),
            (&tb.peer, &tb.peer_dev, PEER),
        ] {
            run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
            run(&["ip", "-n", ns, "link", "set", dev, "mtu", &mtu, "up"]);
            run(&[
                "ip",
                "-n",
                ns,
                "addr",
                "add",
                &format!("{}/24", ip4(addr)),
                "dev",
                dev,
            ]);
        }
        run(&[
            "ip",
            "netns",
            "exec",
            &tb.peer,
            "ethtool",
            "-K",
            &tb.peer_dev,
            "tx",
            "off",
            "tso",
            "off",
            "gso",
            "off",
        ]);
        tb
    }

    pub fn mac(ns: &str, dev: &str) -> [u8; 6] {
        let out = run(&["ip", "-n", ns, "-br", "link", "show", dev]);
        let text = out.split_whitespace().nth(2).expect("ip -br link output");
        let mut mac = [0u8; 6];
        for (m, h) in mac.iter_mut().zip(text.split(':')) {
            *m = u8::from_str_radix(h, 16).expect("mac");
        }
        mac
    }

    pub fn xdp_mac(&self) -> [u8; 6] {
        Self::mac(&self.xdp, &self.xdp_dev)
    }

    pub fn peer_mac(&self) -> [u8; 6] {
        Self::mac(&self.peer, &self.peer_dev)
    }

    /// Lets the peer reach the steered address without ARP.
    pub fn static_neighbour(&self) {
        let m = self.xdp_mac();
        let mac = m
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        run(&[
            "ip",
            "-n",
            &self.peer,
            "neigh",
            "replace",
            &ip4(STEERED),
            "lladdr",
            &mac,
            "dev",
            &self.peer_dev,
        ]);
    }

    /// `ip link show` of the XDP-side device.
    pub fn xdp_link_show(&self) -> String {
        run(&["ip", "-n", &self.xdp, "link", "show", &self.xdp_dev])
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        // Deleting a namespace destroys the veth end in it, and with it the pair.
        for ns in [&self.xdp, &self.peer] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// A UDP/IPv4/Ethernet frame with a correct IPv4 header checksum (UDP checksum 0,
/// allowed for IPv4, RFC 768).
pub fn udp_frame(
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    src: ([u8; 4], u16),
    dst: ([u8; 4], u16),
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::with_capacity(42 + payload.len());
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (28 + payload.len()) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.0);
    ip[16..20].copy_from_slice(&dst.0);
    let mut sum: u32 = ip
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&src.1.to_be_bytes());
    f.extend_from_slice(&dst.1.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// (dst address, dst port, payload) when `frame` is UDP/IPv4 over Ethernet.
pub fn parse_udp(frame: &[u8]) -> Option<([u8; 4], u16, &[u8])> {
    if frame.len() < 42 || frame[12..14] != [0x08, 0x00] || frame[23] != 17 {
        return None;
    }
    let ihl = usize::from(frame[14] & 0xf) * 4;
    let l4 = 14 + ihl;
    let dst = [frame[30], frame[31], frame[32], frame[33]];
    let port = u16::from_be_bytes([frame[l4 + 2], frame[l4 + 3]]);
    let len = usize::from(u16::from_be_bytes([frame[l4 + 4], frame[l4 + 5]]));
    Some((dst, port, frame.get(l4 + 8..l4 + len)?))
}
