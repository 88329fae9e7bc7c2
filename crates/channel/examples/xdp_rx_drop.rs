//! Raw receive rate of the `xdp` channel: frames counted and dropped, no protocol work.
//! Needs root.
//!
//! Builds two namespaces joined by a veth pair. A second `xdp` channel in the peer
//! namespace generates 60-byte UDP frames to the steered address from its AF_XDP
//! transmit ring (batches of 64, one flush each), while the channel under test
//! busy-polls its rx ring on the near end. On veth the sending core also runs the
//! receiver's XDP program, so the receive rate is bounded by the generator
//! (docs/LINUX-NOTES.md): compare it with the generated rate.
//!
//! ```text
//! cargo run --release -p ulnet-channel --example xdp_rx_drop -- [SECONDS] [--generic]
//! ```

#[path = "common/rx_drop.rs"]
mod rx_drop;
#[path = "../tests/support/mod.rs"]
mod support;

use std::net::SocketAddrV4;
use std::time::Duration;

use support::net::{Testbed, PEER, STEERED};
use support::udp::{udp_frame, UdpSpec};
use ulnet_channel::xdp::{XdpChannel, XdpMode, XdpOptions};
use ulnet_channel::Channel;

fn main() {
    let mut seconds = 3u64;
    let mut mode = XdpMode::Auto;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--generic" => mode = XdpMode::Generic,
            s => seconds = s.parse().expect("usage: xdp_rx_drop [SECONDS] [--generic]"),
        }
    }
    let tb = Testbed::new(1500);
    let o = XdpOptions {
        addresses: vec![std::net::Ipv4Addr::from(STEERED).into()],
        mode,
        ..XdpOptions::default()
    };
    let mut rx = XdpChannel::open(&tb.xdp_dev, Some(&tb.xdp.name), &o)
        .unwrap_or_else(|e| panic!("receiver: {e}"));
    let g = XdpOptions::default();
    let mut tx = XdpChannel::open(&tb.peer_dev, Some(&tb.peer.name), &g)
        .unwrap_or_else(|e| panic!("generator: {e}"));
    println!(
        "receiver: {}; generator: {}",
        rx.capabilities().mode,
        tx.capabilities().mode
    );

    let spec = UdpSpec {
        src_mac: tb.peer_mac(),
        dst_mac: tb.xdp_mac(),
        src: SocketAddrV4::new(PEER.into(), 4000),
        dst: SocketAddrV4::new(STEERED.into(), 9),
    };
    let frame = udp_frame(&spec, &[0u8; 18]);
    assert_eq!(frame.len(), 60);
    let run = rx_drop::run(&mut rx, &mut tx, &frame, 64, Duration::from_secs(seconds));
    let (rx_stats, tx_stats) = (run.rx, run.tx);
    let secs = run.elapsed.as_secs_f64();
    println!(
        "generated {} frames ({:.0} kpps), {} kicks, {} refused at a full ring",
        tx_stats.tx_frames,
        tx_stats.tx_frames as f64 / secs / 1e3,
        tx_stats.kicks,
        tx_stats.tx_dropped
    );
    println!(
        "generator CPU {:.0} ns per frame (its send path plus, on veth, the receiver's \
         XDP program and copy)",
        run.generator_ns_per_frame()
    );
    println!(
        "received  {} frames ({:.0} kpps), drops {}, kicks {}, empty polls {}",
        rx_stats.rx_frames,
        rx_stats.rx_frames as f64 / secs / 1e3,
        rx_stats.rx_dropped,
        rx_stats.kicks,
        rx_stats.empty_polls
    );
    if let Ok(k) = rx.xdp_statistics() {
        println!("kernel: {k:?}");
    }
}
