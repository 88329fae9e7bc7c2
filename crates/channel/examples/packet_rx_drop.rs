//! Raw receive rate of the `packet` channel: frames counted and dropped, no protocol
//! work. Needs root.
//!
//! Builds two namespaces joined by a veth pair; a second `packet` channel in the far
//! namespace generates 60-byte UDP frames from its transmit ring (qdisc bypass, 256
//! frames per flush) while the channel under test busy-polls its TPACKET_V3 ring on the
//! near end. On veth the sending core also runs the receiver's kernel path, so the
//! receive rate is bounded by the generator; the kernel of the near namespace still
//! processes (and discards) each frame, as AF_PACKET only copies.
//!
//! ```text
//! cargo run --release -p ulnet-channel --example packet_rx_drop -- [SECONDS] [--ingress-drop]
//! ```
//!
//! `--ingress-drop` adds an nftables `netdev` ingress chain that drops everything on the
//! near end: the ring still captures every frame (packet taps run before the ingress
//! hooks), the kernel's own processing of the copies stops.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ulnet_channel::packet::{PacketChannel, PacketConfig};
use ulnet_channel::{Channel, Stats};

const MAC_A: [u8; 6] = [0x02, 0x00, 0x5e, 0x30, 0x00, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0x00, 0x5e, 0x30, 0x00, 0x0b];

fn run(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `ip` ({e}): install iproute2"));
    assert!(
        out.status.success(),
        "`ip {}` failed: {} (this example needs root)",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

fn nft(ns: &str, args: &[&str]) {
    let mut all = vec!["netns", "exec", ns, "nft"];
    all.extend_from_slice(args);
    run(&all);
}

/// The two namespaces, deleted (with the veth pair) on drop.
struct Testbed {
    a: String,
    b: String,
}

impl Drop for Testbed {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

fn mac(m: [u8; 6]) -> String {
    m.map(|b| format!("{b:02x}")).join(":")
}

fn checksum(data: &[u8]) -> u16 {
    let mut acc: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// A 60-byte Ethernet/IPv4/UDP frame from 198.18.0.1 to 198.18.0.2 (UDP checksum 0,
/// which IPv4 allows: RFC 768).
fn frame() -> [u8; 60] {
    let mut f = [0u8; 60];
    f[0..6].copy_from_slice(&MAC_A);
    f[6..12].copy_from_slice(&MAC_B);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = 60 - 14;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&(ip_len as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[198, 18, 0, 1]);
    f[30..34].copy_from_slice(&[198, 18, 0, 2]);
    let c = checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f[34..36].copy_from_slice(&4000u16.to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&((ip_len - 20) as u16).to_be_bytes());
    f
}

/// CPU time the calling thread has used, in ns (first field of
/// `/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("reading /proc/thread-self/schedstat")
}

fn main() {
    let mut seconds = 3u64;
    let mut ingress_drop = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--ingress-drop" => ingress_drop = true,
            s => {
                seconds = s
                    .parse()
                    .expect("usage: packet_rx_drop [SECONDS] [--ingress-drop]")
            }
        }
    }
    let pid = std::process::id();
    let bed = Testbed {
        a: format!("ulnet-rxdrop-{pid}-a"),
        b: format!("ulnet-rxdrop-{pid}-b"),
    };
    run(&["netns", "add", &bed.a]);
    run(&["netns", "add", &bed.b]);
    let (if_a, if_b) = ("rxdrop-a", "rxdrop-b");
    run(&[
        "link",
        "add",
        if_a,
        "netns",
        &bed.a,
        "address",
        &mac(MAC_A),
        "type",
        "veth",
        "peer",
        "name",
        if_b,
        "netns",
        &bed.b,
        "address",
        &mac(MAC_B),
    ]);
    run(&["-n", &bed.a, "link", "set", if_a, "up"]);
    run(&["-n", &bed.b, "link", "set", if_b, "up"]);
    if ingress_drop {
        let chain = format!("{{ type filter hook ingress device {if_a} priority 0; }}");
        nft(&bed.a, &["add", "table", "netdev", "ulnet"]);
        nft(&bed.a, &["add", "chain", "netdev", "ulnet", "in", &chain]);
        nft(&bed.a, &["add", "rule", "netdev", "ulnet", "in", "drop"]);
    }

    let mut rx = PacketChannel::open(&PacketConfig::new(if_a).in_netns(&bed.a))
        .unwrap_or_else(|e| panic!("receiver: {e}"));
    let mut tx_cfg = PacketConfig::new(if_b).in_netns(&bed.b);
    tx_cfg.tx_frame_count = 2048;
    let mut tx = PacketChannel::open(&tx_cfg).unwrap_or_else(|e| panic!("generator: {e}"));
    println!("receiver: {}", rx.capabilities().mode);

    let stop = AtomicBool::new(false);
    let duration = Duration::from_secs(seconds);
    let (rx_stats, (tx_stats, gen_cpu_ns), elapsed) = std::thread::scope(|s| {
        let gen = s.spawn(|| {
            let f = frame();
            let cpu0 = thread_cpu_ns();
            let start = Instant::now();
            while start.elapsed() < duration {
                for _ in 0..256 {
                    if tx
                        .tx()
                        .send(f.len(), &mut |b| b.copy_from_slice(&f))
                        .is_err()
                    {
                        break;
                    }
                }
                tx.tx().flush().expect("generator flush");
            }
            stop.store(true, Ordering::Release);
            (tx.stats(), thread_cpu_ns() - cpu0)
        });
        let start = Instant::now();
        let mut count = 0u64;
        while !stop.load(Ordering::Acquire) {
            count += rx.rx_batch(64, &mut |_, _| {}).expect("rx_batch") as u64;
        }
        let elapsed = start.elapsed();
        // Drain what is still in the ring so the drop count is final.
        let drain_until = Instant::now() + Duration::from_millis(20);
        while Instant::now() < drain_until {
            count += rx.rx_batch(64, &mut |_, _| {}).expect("rx_batch") as u64;
        }
        let st: Stats = rx.stats();
        assert_eq!(count, st.rx_frames);
        (st, gen.join().expect("generator panicked"), elapsed)
    });
    let secs = elapsed.as_secs_f64();
    println!(
        "generated {} frames ({:.0} kpps, {} dropped at a full tx ring)",
        tx_stats.tx_frames,
        tx_stats.tx_frames as f64 / secs / 1e3,
        tx_stats.tx_dropped
    );
    println!(
        "generator CPU {:.0} ns per frame (its send path plus, on veth, the receiver's \
         kernel path and the ring copy): {:.0} kpps per busy core",
        gen_cpu_ns as f64 / tx_stats.tx_frames as f64,
        tx_stats.tx_frames as f64 / gen_cpu_ns as f64 * 1e6
    );
    println!(
        "received  {} frames ({:.0} kpps), ring drops {}, empty polls {}{}",
        rx_stats.rx_frames,
        rx_stats.rx_frames as f64 / secs / 1e3,
        rx_stats.rx_dropped,
        rx_stats.empty_polls,
        if ingress_drop {
            " [nft ingress drop]"
        } else {
            ""
        }
    );
}
