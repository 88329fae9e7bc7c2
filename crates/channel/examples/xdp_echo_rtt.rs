//! The floor of a busy-polled round trip over the `xdp` channel: two AF_XDP channels, one
//! on each end of a veth pair, bounce one 64-byte UDP frame back and forth with no protocol
//! work at all (the echo side swaps nothing: it sends a prepared reply frame when a frame
//! arrives). Both ends busy-poll their rx rings on a core of their own. Needs root.
//!
//! Any stack on this channel pays at least this per round trip: each direction is one
//! transmit doorbell (`sendto` on the AF_XDP socket; in copy mode it builds an skb, and on
//! veth it runs the peer's XDP program and the copy into the peer's UMEM on the sending
//! core) and one busy-polled receive. Compare with the kernel's UDP sockets spinning
//! (`ulnet bench latency`, "kernel, spinning") to see what share of the round trip a
//! user-level stack can win back on this machine (docs/performance.md, "Session 11").
//!
//! ```text
//! cargo run --release -p ulnet-channel --example xdp_echo_rtt -- [ROUND_TRIPS]
//! ```

#[path = "../tests/support/mod.rs"]
mod support;

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use support::net::{Testbed, PEER, STEERED};
use support::udp::{udp_frame, UdpSpec};
use ulnet_channel::xdp::{XdpChannel, XdpOptions};
use ulnet_channel::Channel;

/// Both ends give up when a frame has not come back in this long (a lost frame).
const TIMEOUT: Duration = Duration::from_millis(200);

fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).expect("sched_setaffinity");
}

/// Sends `frame` and flushes (one doorbell).
fn send(ch: &mut XdpChannel, frame: &[u8]) {
    ch.tx()
        .send(frame.len(), &mut |b| b.copy_from_slice(frame))
        .expect("tx ring full");
    ch.tx().flush().expect("flush");
}

/// Busy-polls until one frame arrives; false on timeout or stop.
fn wait_one(ch: &mut XdpChannel, stop: &AtomicBool) -> bool {
    let start = Instant::now();
    loop {
        if ch.rx_batch(1, &mut |_, _| {}).expect("rx_batch") > 0 {
            return true;
        }
        if stop.load(Ordering::Relaxed) || start.elapsed() > TIMEOUT {
            return false;
        }
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("usage: xdp_echo_rtt [ROUND_TRIPS]"))
        .unwrap_or(50_000);
    let tb = Testbed::new(1500);
    let near = XdpOptions {
        addresses: vec![std::net::Ipv4Addr::from(STEERED).into()],
        ..XdpOptions::default()
    };
    let far = XdpOptions {
        addresses: vec![std::net::Ipv4Addr::from(PEER).into()],
        ..XdpOptions::default()
    };
    let mut a = XdpChannel::open(&tb.xdp_dev, Some(&tb.xdp.name), &near)
        .unwrap_or_else(|e| panic!("near end: {e}"));
    let mut b = XdpChannel::open(&tb.peer_dev, Some(&tb.peer.name), &far)
        .unwrap_or_else(|e| panic!("far end: {e}"));
    println!(
        "near: {}; far: {}",
        a.capabilities().mode,
        b.capabilities().mode
    );
    let ping = udp_frame(
        &UdpSpec {
            src_mac: tb.xdp_mac(),
            dst_mac: tb.peer_mac(),
            src: SocketAddrV4::new(STEERED.into(), 4000),
            dst: SocketAddrV4::new(PEER.into(), 7),
        },
        &[0u8; 22],
    );
    let pong = udp_frame(
        &UdpSpec {
            src_mac: tb.peer_mac(),
            dst_mac: tb.xdp_mac(),
            src: SocketAddrV4::new(PEER.into(), 7),
            dst: SocketAddrV4::new(STEERED.into(), 4000),
        },
        &[0u8; 22],
    );
    assert_eq!(ping.len(), 64);

    let stop = AtomicBool::new(false);
    let mut rtts: Vec<u32> = Vec::with_capacity(rounds);
    let mut lost = 0usize;
    std::thread::scope(|s| {
        s.spawn(|| {
            pin(0);
            while !stop.load(Ordering::Relaxed) {
                if wait_one(&mut b, &stop) {
                    send(&mut b, &pong);
                }
            }
        });
        pin(1);
        // Warm-up: the first round trips fault in pages and fill the caches.
        for _ in 0..1_000 {
            send(&mut a, &ping);
            wait_one(&mut a, &stop);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while rtts.len() < rounds && Instant::now() < deadline {
            let t = Instant::now();
            send(&mut a, &ping);
            if wait_one(&mut a, &stop) {
                rtts.push(t.elapsed().as_nanos() as u32);
            } else {
                lost += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    rtts.sort_unstable();
    let q = |p: f64| rtts[((rtts.len() - 1) as f64 * p) as usize] as f64 / 1e3;
    println!(
        "{} round trips ({lost} lost): p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us",
        rtts.len(),
        q(0.5),
        q(0.99),
        q(0.999)
    );
}
