//! The runtime's rx/tx loop allocates nothing per packet in steady state: two runtimes
//! over the simulated wire, one serving UDP echo and TCP discard, the other pinging it
//! with UDP and streaming TCP into it; after a warm-up, a counting global allocator
//! must see no allocation across thousands of packets.
//!
//! A global allocator is an `unsafe impl`; this test file is the only place in the
//! crate allowed one (it forwards to `System` and only counts).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use ulnet::channel::sim::{Endpoint, LinkConfig, Wire};
use ulnet::runtime::{App, Clock, Runtime, WaitMode};
use ulnet::stack::iface::{Interface, InterfaceConfig, IpCidr};
use ulnet::stack::socket::{UdpConfig, UdpHandle, UdpSocket};
use ulnet::stack::tcp::{Event, Tcp, TcpConfig};
use ulnet::stack::time::{Duration, Instant};
use ulnet::wire::EthernetAddress;
use ulnet_apps::bulk::BulkClient;
use ulnet_apps::discard::Discard;
use ulnet_apps::echo::Echo;

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn iface(last: u8) -> Interface {
    let cfg = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, last]))
        .address(IpCidr::new([198, 18, 0, last].into(), 24).unwrap());
    let mut i = Interface::new(cfg).unwrap();
    i.set_tcp(Tcp::new(TcpConfig::default(), [last; 16]));
    i
}

/// Keeps one UDP datagram in flight to the echo server.
struct UdpPinger {
    socket: UdpHandle,
    server: SocketAddr,
    outstanding: bool,
    replies: u64,
    buf: [u8; 256],
}

impl App for UdpPinger {
    fn poll(&mut self, _now: Instant, iface: &mut Interface, _events: &[Event]) {
        let s = iface.sockets_mut().udp_mut(self.socket).unwrap();
        while s.recv_from(&mut self.buf).is_ok() {
            self.replies += 1;
            self.outstanding = false;
        }
        if !self.outstanding && s.send_to(&self.buf[..100], self.server).is_ok() {
            self.outstanding = true;
        }
    }
}

struct Pair {
    wire: Wire,
    time: Arc<AtomicU64>,
    a: Runtime<Endpoint>,
    b: Runtime<Endpoint>,
}

impl Pair {
    fn step(&mut self, app_a: &mut dyn App, app_b: &mut dyn App) {
        self.a.poll_once(app_a).unwrap();
        self.b.poll_once(app_b).unwrap();
        let t = self.wire.now_micros() + 20;
        self.wire.advance_to_micros(t);
        self.time.store(t, Ordering::Relaxed);
    }
}

#[test]
fn steady_state_udp_and_tcp_allocate_nothing_per_packet() {
    let (wire, ea, eb) = Wire::pair(3, LinkConfig::new(), LinkConfig::new());
    let (clock, time) = Clock::manual();
    let a = Runtime::new(ea, iface(1), WaitMode::BusyPoll, clock.clone()).unwrap();
    let b = Runtime::new(eb, iface(2), WaitMode::BusyPoll, clock).unwrap();
    let mut p = Pair { wire, time, a, b };

    let server: SocketAddr = "198.18.0.2:7".parse().unwrap();
    let mut echo = Echo::new(&mut p.b.iface(), server).unwrap();
    let sink: SocketAddr = "198.18.0.2:9".parse().unwrap();
    let mut discard = Discard::new(&mut p.b.iface(), sink).unwrap();
    let socket = {
        let mut s = UdpSocket::new(UdpConfig::default());
        s.bind("198.18.0.1:5000".parse().unwrap()).unwrap();
        p.a.iface().sockets_mut().add_udp(s).unwrap()
    };
    let bulk = {
        let mut i = p.a.iface();
        BulkClient::connect(
            &mut i,
            Instant::ZERO,
            "198.18.0.1:0".parse().unwrap(),
            sink,
            u64::MAX / 2,
            Duration::from_secs(3600),
        )
        .unwrap()
    };
    let mut client = (
        UdpPinger {
            socket,
            server,
            outstanding: false,
            replies: 0,
            buf: [7; 256],
        },
        bulk,
    );
    let mut servers = (echo, discard);

    // Warm-up: ARP, handshake, slow start, buffers reaching their working sizes. Buffers
    // grow by doubling with use (docs/memory.md) up to 4 and 6 MiB, a bounded number of
    // growths: warm up until the peak buffer memory of both ends has stood still for
    // 10,000 steps (bounded at 400,000 steps).
    let peak = |p: &Pair| {
        let m = |r: &Runtime<Endpoint>| r.iface().tcp().map_or(0, |t| t.stats().mem_peak_bytes);
        (m(&p.a), m(&p.b))
    };
    let (mut last, mut still) = (peak(&p), 0u32);
    for _ in 0..400_000 {
        p.step(&mut client, &mut servers);
        let now = peak(&p);
        if now == last {
            still += 1;
            if still >= 10_000 {
                break;
            }
        } else {
            (last, still) = (now, 0);
        }
    }
    assert!(
        still >= 10_000,
        "buffers still growing after the warm-up: {last:?}"
    );
    let replies0 = client.0.replies;
    let bytes0 = client.1.result().sent;
    let frames0 = p.a.stats().rx_frames + p.b.stats().rx_frames;
    assert!(replies0 > 100, "UDP echo did not run: {replies0} replies");
    assert!(bytes0 > 1_000_000, "TCP did not run: {bytes0} bytes");

    ALLOCS.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    for _ in 0..5_000 {
        p.step(&mut client, &mut servers);
    }
    COUNTING.store(false, Ordering::Relaxed);
    let allocs = ALLOCS.load(Ordering::Relaxed);

    let frames = p.a.stats().rx_frames + p.b.stats().rx_frames - frames0;
    let replies = client.0.replies - replies0;
    let bytes = client.1.result().sent - bytes0;
    assert!(replies > 500, "UDP echo stalled: {replies} replies");
    assert!(bytes > 1_000_000, "TCP stalled: {bytes} bytes");
    assert!(!client.1.result().failed);
    assert!(frames > 10_000, "only {frames} frames");
    assert_eq!(
        allocs, 0,
        "{allocs} allocations over {frames} frames ({replies} UDP round trips, {bytes} TCP bytes)"
    );
    (echo, discard) = (servers.0, servers.1);
    assert!(echo.udp_stats().echoed > 1000);
    assert!(discard.stats().tcp_bytes > 1_000_000);
}
