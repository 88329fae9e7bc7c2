//! The steady receive and transmit path allocates nothing per packet: once ARP (or
//! Neighbor Discovery, over IPv6) has resolved and the buffers exist, a UDP echo exchange (egress → frame → ingress →
//! socket → application → socket → egress → frame → ingress → socket) runs with zero
//! heap allocations, counted by a global allocator.

// Implementing `GlobalAlloc` is unsafe by definition; the allocator only forwards to
// `System` and counts.
#![allow(unsafe_code)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};

use common::Family;
use ulnet_stack::iface::{Interface, TxSink};
use ulnet_stack::socket::{UdpConfig, UdpSocket};
use ulnet_stack::time::{Duration, Instant};

struct Counting;

/// Kept per thread: the tests of this file run in parallel, each counting its own.
fn allocs() -> u64 {
    THREAD_ALLOCS.with(std::cell::Cell::get)
}

thread_local! {
    /// Only the test's own thread counts: the counter is process-wide, and the test
    /// harness's other threads allocate when they please (under load this made the test
    /// fail now and then with a few allocations none of which was the data path's).
    static ON_TEST_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static THREAD_ALLOCS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn count() {
    let _ = THREAD_ALLOCS.try_with(|c| c.set(c.get() + 1));
}

fn counted() -> bool {
    ON_TEST_THREAD
        .try_with(std::cell::Cell::get)
        .unwrap_or(false)
}

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counted() {
            count();
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if counted() {
            count();
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A preallocated in-memory link: frames written in place into fixed buffers.
struct Link {
    bufs: Vec<Vec<u8>>,
    lens: Vec<usize>,
}

impl Link {
    fn new() -> Link {
        Link {
            bufs: (0..16).map(|_| vec![0u8; 2048]).collect(),
            lens: Vec::with_capacity(16),
        }
    }
}

impl TxSink for Link {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        let i = self.lens.len();
        if i == self.bufs.len() || len > 2048 {
            return false;
        }
        fill(&mut self.bufs[i][..len]);
        self.lens.push(len);
        true
    }
}

/// Delivers what `link` holds to `to`, whose answers go into `back`.
fn deliver(now: Instant, link: &mut Link, to: &mut Interface, back: &mut Link) {
    for i in 0..link.lens.len() {
        to.ingress(now, &link.bufs[i][..link.lens[i]], back);
    }
    link.lens.clear();
}

#[test]
fn steady_udp_echo_allocates_nothing() {
    echo_allocates_nothing(Family::V4);
}

#[test]
fn steady_udp_echo_over_ipv6_allocates_nothing() {
    echo_allocates_nothing(Family::V6);
}

fn echo_allocates_nothing(family: Family) {
    ON_TEST_THREAD.with(|c| c.set(true));
    // The counter counts.
    let before = allocs();
    drop(std::hint::black_box(vec![1u8; 10]));
    assert!(allocs() > before);

    let mut a = Interface::new(family.config(1)).unwrap();
    let mut b = Interface::new(family.config(2)).unwrap();
    let sock = |iface: &mut Interface, node: u8| {
        let mut s = UdpSocket::new(UdpConfig::default());
        s.bind(family.sa(node, 7)).unwrap();
        iface.sockets_mut().add_udp(s).unwrap()
    };
    let (ha, hb) = (sock(&mut a, 1), sock(&mut b, 2));
    let (mut ab, mut ba) = (Link::new(), Link::new());
    let mut buf = vec![0u8; 2048];
    let msg = vec![0x42u8; 1000];
    let mut now = Instant::from_secs(1);
    let mut round =
        |now: Instant, a: &mut Interface, b: &mut Interface, ab: &mut Link, ba: &mut Link| {
            a.sockets_mut()
                .udp_mut(ha)
                .unwrap()
                .send_to(&msg, family.sa(2, 7))
                .unwrap();
            a.egress(now, ab);
            // Enough passes for ARP both ways during warm-up.
            for _ in 0..3 {
                deliver(now, ab, b, ba);
                while let Ok((n, meta)) = b.sockets_mut().udp_mut(hb).unwrap().recv_from(&mut buf) {
                    b.sockets_mut()
                        .udp_mut(hb)
                        .unwrap()
                        .send_to(&buf[..n], meta.peer)
                        .unwrap();
                }
                b.egress(now, ba);
                deliver(now, ba, a, ab);
                a.egress(now, ab);
            }
            let mut echoed = 0;
            while let Ok((n, _)) = a.sockets_mut().udp_mut(ha).unwrap().recv_from(&mut buf) {
                assert_eq!(n, 1000);
                echoed += 1;
            }
            let _ = a.poll_at();
            let _ = b.poll_at();
            echoed
        };
    // Warm-up: announcements, ARP both ways, first datagrams.
    for _ in 0..5 {
        now += Duration::from_millis(1);
        round(now, &mut a, &mut b, &mut ab, &mut ba);
    }
    // Past the announcements (RFC 5227: 2 s apart) so only the data path runs.
    now += Duration::from_secs(3);
    round(now, &mut a, &mut b, &mut ab, &mut ba);
    let before = allocs();
    let mut echoed = 0;
    for _ in 0..1000 {
        now += Duration::from_millis(1);
        echoed += round(now, &mut a, &mut b, &mut ab, &mut ba);
    }
    let allocs = allocs() - before;
    assert_eq!(echoed, 1000);
    assert_eq!(allocs, 0, "{allocs} allocations in 1000 echo round trips");
    assert_eq!(a.stats().udp_delivered, 1006);
    match family {
        Family::V4 => assert_eq!(a.stats().ipv6_delivered, 0),
        Family::V6 => assert_eq!(a.stats().ipv4_delivered, 0),
    }
}
