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

#[path = "common/rx_drop.rs"]
mod rx_drop;
#[path = "../tests/support/mod.rs"]
mod support;

use std::net::SocketAddrV4;
use std::time::Duration;

use support::net::VethPair;
use support::udp::{udp_frame, UdpSpec};
use ulnet_channel::packet::{PacketChannel, PacketOptions};
use ulnet_channel::Channel;
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
    let bed = VethPair::new("rxdrop");
    let (if_a, if_b) = (bed.if_a.as_str(), bed.if_b.as_str());
    if ingress_drop {
        let chain = format!("{{ type filter hook ingress device {if_a} priority 0; }}");
        let nft = |args: &[&str]| bed.a.exec("nft", args);
        nft(&["add", "table", "netdev", "ulnet"]);
        nft(&["add", "chain", "netdev", "ulnet", "in", &chain]);
        nft(&["add", "rule", "netdev", "ulnet", "in", "drop"]);
    }
    // 60 bytes on the wire: 18 bytes of UDP payload.
    let frame = udp_frame(
        &UdpSpec {
            src_mac: bed.mac_b,
            dst_mac: bed.mac_a,
            src: SocketAddrV4::new(bed.ip_b, 4000),
            dst: SocketAddrV4::new(bed.ip_a, 9),
        },
        &[0; 18],
    );
    assert_eq!(frame.len(), 60);

    let mut rx = PacketChannel::open(if_a, Some(&bed.a.name), &PacketOptions::default())
        .unwrap_or_else(|e| panic!("receiver: {e}"));
    let tx_cfg = PacketOptions {
        tx_frame_count: 2048,
        ..PacketOptions::default()
    };
    let mut tx = PacketChannel::open(if_b, Some(&bed.b.name), &tx_cfg)
        .unwrap_or_else(|e| panic!("generator: {e}"));
    println!("receiver: {}", rx.capabilities().mode);

    let run = rx_drop::run(&mut rx, &mut tx, &frame, 256, Duration::from_secs(seconds));
    let (rx_stats, tx_stats) = (run.rx, run.tx);
    let secs = run.elapsed.as_secs_f64();
    println!(
        "generated {} frames ({:.0} kpps, {} dropped at a full tx ring)",
        tx_stats.tx_frames,
        tx_stats.tx_frames as f64 / secs / 1e3,
        tx_stats.tx_dropped
    );
    let ns = run.generator_ns_per_frame();
    println!(
        "generator CPU {ns:.0} ns per frame (its send path plus, on veth, the receiver's \
         kernel path and the ring copy): {:.0} kpps per busy core",
        1e6 / ns
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
