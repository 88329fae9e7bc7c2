//! Ring index arithmetic against an in-memory fake peer (no kernel; Miri-friendly).

use super::*;
use crate::sys::xsk::{XdpDesc, XDP_RING_NEED_WAKEUP};

fn pair(
    size: u32,
    start: u32,
) -> (
    Producer<Arc<HeapRegion>, u64>,
    Consumer<Arc<HeapRegion>, u64>,
) {
    let layout = Layout::compact(size);
    let region = Arc::new(HeapRegion::new(layout.region_len::<u64>()));
    region
        .atomic_u32(layout.producer)
        .store(start, Ordering::Relaxed);
    region
        .atomic_u32(layout.consumer)
        .store(start, Ordering::Relaxed);
    (
        Producer::new(region.clone(), layout),
        Consumer::new(region, layout),
    )
}

#[test]
fn empty_ring_has_full_capacity() {
    let (mut p, mut c) = pair(8, 0);
    assert_eq!(p.free(1), 8);
    assert_eq!(c.available(1), 0);
    assert_eq!(c.pop(), None);
}

#[test]
fn nothing_visible_before_submit() {
    let (mut p, mut c) = pair(8, 0);
    assert!(p.push(11));
    assert!(p.push(12));
    assert_eq!(p.pending(), 2);
    assert_eq!(c.available(1), 0);
    p.submit();
    assert_eq!(p.pending(), 0);
    assert_eq!(c.available(1), 2);
    assert_eq!(c.pop(), Some(11));
    assert_eq!(c.pop(), Some(12));
    assert_eq!(c.pop(), None);
}

#[test]
fn full_ring_refuses_until_release() {
    let (mut p, mut c) = pair(4, 0);
    for i in 0..4 {
        assert!(p.push(i));
    }
    assert!(!p.push(99), "a full ring must refuse");
    p.submit();
    assert_eq!(p.in_flight(), 4);
    assert_eq!(c.pop(), Some(0));
    assert_eq!(c.pop(), Some(1));
    // Popped but not released: the slots still belong to the consumer.
    assert_eq!(c.unreleased(), 2);
    assert_eq!(p.free(1), 0);
    c.release();
    assert_eq!(p.free(1), 2);
    assert!(p.push(4));
    assert!(p.push(5));
    assert!(!p.push(6));
    p.submit();
    let got: Vec<u64> = std::iter::from_fn(|| c.pop()).collect();
    assert_eq!(got, [2, 3, 4, 5]);
}

#[test]
fn indices_wrap_at_u32_max() {
    // Start three slots before the wrap so the batch straddles 2^32.
    let (mut p, mut c) = pair(8, u32::MAX - 2);
    for round in 0..5u64 {
        for i in 0..6 {
            assert!(p.push(round * 10 + i), "round {round} slot {i}");
        }
        p.submit();
        assert_eq!(c.available(6), 6);
        for i in 0..6 {
            assert_eq!(c.pop(), Some(round * 10 + i));
        }
        c.release();
        assert_eq!(p.free(8), 8);
    }
}

#[test]
fn cached_limit_is_refreshed_only_when_needed() {
    let (mut p, mut c) = pair(4, 0);
    p.push(1);
    p.submit();
    c.pop();
    c.release();
    // The cached limit still says 3 free, which satisfies want = 3 without a re-read...
    assert_eq!(p.free(3), 3);
    // ...and asking for more re-reads the consumer index and finds the released slot.
    assert_eq!(p.free(4), 4);
}

#[test]
fn lying_producer_is_clamped() {
    let layout = Layout::compact(4);
    let region = Arc::new(HeapRegion::new(layout.region_len::<u64>()));
    let mut c: Consumer<_, u64> = Consumer::new(region.clone(), layout);
    // A broken peer claims 1000 descriptors in a 4-slot ring.
    region
        .atomic_u32(layout.producer)
        .store(1000, Ordering::Release);
    assert_eq!(c.available(1), 4);
}

#[test]
fn need_wakeup_flag_is_seen_by_both_ends() {
    let (p, c) = pair(4, 0);
    assert!(!p.needs_wakeup() && !c.needs_wakeup());
    p.shared
        .region
        .atomic_u32(8)
        .store(XDP_RING_NEED_WAKEUP, Ordering::Release);
    assert!(p.needs_wakeup() && c.needs_wakeup());
}

#[test]
fn xdp_descriptors_roundtrip() {
    let layout = Layout {
        producer: 0,
        consumer: 64,
        flags: 128,
        desc: 192,
        size: 16,
    };
    let region = Arc::new(HeapRegion::new(layout.region_len::<XdpDesc>()));
    let mut p: Producer<_, XdpDesc> = Producer::new(region.clone(), layout);
    let mut c: Consumer<_, XdpDesc> = Consumer::new(region, layout);
    let d = XdpDesc {
        addr: 0x1000,
        len: 1514,
        options: 1,
    };
    assert!(p.push(d));
    p.submit();
    assert_eq!(c.pop(), Some(d));
}

#[test]
#[should_panic(expected = "power of two")]
fn non_power_of_two_size_panics() {
    let layout = Layout::compact(6);
    let _ = Producer::<_, u64>::new(HeapRegion::new(256), layout);
}

#[test]
#[should_panic(expected = "outside")]
fn too_small_region_panics_at_construction() {
    let layout = Layout::compact(64);
    let _ = Consumer::<_, u64>::new(HeapRegion::new(64), layout);
}

#[test]
fn concurrent_peer_sees_every_descriptor_in_order() {
    // A producer thread and a consumer thread share the ring, as the kernel and we do.
    let layout = Layout::compact(16);
    let region = Arc::new(HeapRegion::new(layout.region_len::<u64>()));
    let mut p: Producer<_, u64> = Producer::new(region.clone(), layout);
    let mut c: Consumer<_, u64> = Consumer::new(region, layout);
    let n: u64 = if cfg!(miri) { 200 } else { 20_000 };
    let t = std::thread::spawn(move || {
        let mut next = 0;
        while next < n {
            while next < n && p.push(next) {
                next += 1;
            }
            p.submit();
            std::thread::yield_now();
        }
    });
    let mut expect = 0;
    while expect < n {
        while let Some(v) = c.pop() {
            assert_eq!(v, expect);
            expect += 1;
        }
        c.release();
        std::thread::yield_now();
    }
    t.join().unwrap();
}

#[test]
fn peek_then_advance() {
    let (mut p, mut c) = pair(8, u32::MAX);
    for i in 0..3 {
        p.push(i);
    }
    p.submit();
    assert_eq!(c.peek(0), Some(0));
    assert_eq!(c.peek(2), Some(2));
    assert_eq!(c.peek(3), None);
    c.advance(2);
    assert_eq!(c.pop(), Some(2));
    assert_eq!(c.pop(), None);
    c.release();
    assert_eq!(p.free(8), 8);
}

#[test]
#[should_panic(expected = "past the producer")]
fn advance_past_producer_panics() {
    let (_p, mut c) = pair(8, 0);
    c.advance(1);
}
