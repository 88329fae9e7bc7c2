//! No heap allocation per segment on the established path: two engines move data in
//! virtual time through a preallocated in-test pipe while a counting global allocator
//! watches. After a warm-up (handshake, slow start, every queue at its working size)
//! the steady bulk transfer must not allocate at all.
//!
//! The allocator is global, so this lives in its own integration-test binary. A global
//! allocator cannot be written without `unsafe`; the stack itself stays
//! `forbid(unsafe_code)`, this test binary only forwards to `System`.
#![allow(unsafe_code)]

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;

use ulnet_stack::tcp::{SocketHandle, Tcp, TcpConfig};
use ulnet_stack::time::{Duration, Instant};
use ulnet_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};

mod counting;
use counting::{ALLOCS, COUNTING};

/// One segment in flight, stored without allocation.
#[derive(Clone, Copy)]
struct Slot {
    at: Instant,
    to_b: bool,
    src_port: u16,
    dst_port: u16,
    seq: u32,
    ack: u32,
    flags: TcpFlags,
    window: u16,
    options: TcpOptions,
    len: usize,
    payload: [u8; 1500],
}

/// A FIFO of fixed slots (constant delay keeps it ordered).
struct Pipe {
    slots: Vec<Slot>,
    head: usize,
    len: usize,
    delay: Duration,
}

impl Pipe {
    fn push(&mut self, now: Instant, to_b: bool, r: &TcpRepr<'_>) {
        assert!(self.len < self.slots.len(), "pipe overflow");
        let i = (self.head + self.len) % self.slots.len();
        let s = &mut self.slots[i];
        s.at = now + self.delay;
        s.to_b = to_b;
        s.src_port = r.src_port;
        s.dst_port = r.dst_port;
        s.seq = r.seq.0;
        s.ack = r.ack.0;
        s.flags = r.flags;
        s.window = r.window;
        s.options = r.options;
        s.len = r.payload.len();
        s.payload[..s.len].copy_from_slice(r.payload);
        self.len += 1;
    }

    /// Queues everything `a` (towards `b`) and `b` (towards `a`) have to send at `now`.
    fn dispatch(&mut self, now: Instant, a: &mut Tcp, b: &mut Tcp) {
        a.dispatch(now, &mut |_, _, r| {
            self.push(now, true, r);
            true
        });
        b.dispatch(now, &mut |_, _, r| {
            self.push(now, false, r);
            true
        });
    }

    fn next_at(&self) -> Option<Instant> {
        (self.len > 0).then(|| self.slots[self.head].at)
    }
}

fn deliver(pipe: &mut Pipe, now: Instant, a: &mut Tcp, b: &mut Tcp, aip: IpAddr, bip: IpAddr) {
    while pipe.len > 0 && pipe.slots[pipe.head].at <= now {
        let s = pipe.slots[pipe.head];
        pipe.head = (pipe.head + 1) % pipe.slots.len();
        pipe.len -= 1;
        let repr = TcpRepr {
            src_port: s.src_port,
            dst_port: s.dst_port,
            seq: SeqNumber(s.seq),
            ack: SeqNumber(s.ack),
            flags: s.flags,
            window: s.window,
            urgent: 0,
            options: s.options,
            payload: &s.payload[..s.len],
            payload_rest: &[],
        };
        // Replies from `process` (ACKs for every second segment) go straight back.
        if s.to_b {
            b.process(now, aip, bip, &repr, &mut |_, _, r| {
                pipe.push(now, false, r)
            });
        } else {
            a.process(now, bip, aip, &repr, &mut |_, _, r| pipe.push(now, true, r));
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn step(
    now: &mut Instant,
    pipe: &mut Pipe,
    a: &mut Tcp,
    b: &mut Tcp,
    c: SocketHandle,
    s: SocketHandle,
    buf: &mut [u8],
    chunk: &[u8],
    moved: &mut u64,
) {
    let (aip, bip): (IpAddr, IpAddr) =
        ("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap());
    deliver(pipe, *now, a, b, aip, bip);
    while let Ok(n) = b.recv(*now, s, buf) {
        if n == 0 {
            break;
        }
        *moved += n as u64;
    }
    while a.send(*now, c, chunk).unwrap_or(0) > 0 {}
    pipe.dispatch(*now, a, b);
    let next = [pipe.next_at(), a.poll_at(), b.poll_at()]
        .into_iter()
        .flatten()
        .min();
    *now = match next {
        Some(x) if x > *now => x,
        _ => *now + Duration::from_micros(1),
    };
}

#[test]
fn steady_bulk_transfer_does_not_allocate() {
    // No interface caps the MTU here: say the Ethernet one the pipe's slots hold.
    let mut cfg = TcpConfig::default();
    cfg.mtu = 1500;
    let mut a = Tcp::new(cfg.clone(), [1; 16]);
    let mut b = Tcp::new(cfg, [2; 16]);
    let bsa: SocketAddr = "198.18.0.2:80".parse().unwrap();
    let l = b.listen(bsa, 4).unwrap();
    let mut now = Instant::from_secs(1);
    let c = a
        .connect(now, "198.18.0.1:0".parse().unwrap(), bsa)
        .unwrap();
    let empty = Slot {
        at: Instant::ZERO,
        to_b: false,
        src_port: 0,
        dst_port: 0,
        seq: 0,
        ack: 0,
        flags: TcpFlags::empty(),
        window: 0,
        options: TcpOptions::none(),
        len: 0,
        payload: [0; 1500],
    };
    let mut pipe = Pipe {
        slots: vec![empty; 4096],
        head: 0,
        len: 0,
        delay: Duration::from_micros(500),
    };
    let mut buf = vec![0u8; 65536];
    let chunk = vec![0x42u8; 16384];
    let mut moved = 0u64;
    let mut server = None;
    // Handshake and warm-up: a few megabytes, so every queue reaches its working size.
    for _ in 0..200_000 {
        if server.is_none() {
            server = b.accept(now, l).unwrap();
        }
        if let Some(s) = server {
            step(
                &mut now, &mut pipe, &mut a, &mut b, c, s, &mut buf, &chunk, &mut moved,
            );
            if moved > 4 << 20 {
                break;
            }
        } else {
            let t = now;
            deliver(
                &mut pipe,
                t,
                &mut a,
                &mut b,
                "198.18.0.1".parse().unwrap(),
                "198.18.0.2".parse().unwrap(),
            );
            pipe.dispatch(t, &mut a, &mut b);
            now += Duration::from_micros(100);
        }
    }
    let s = server.expect("handshake");
    assert!(moved > 4 << 20, "warm-up moved only {moved} bytes");
    let before = moved;
    let segs_before = a.info(c).unwrap().segs_out;
    // The counter itself works: one allocation is seen.
    COUNTING.with(|c| c.set(true));
    drop(std::hint::black_box(Vec::<u8>::with_capacity(64)));
    COUNTING.with(|c| c.set(false));
    assert_eq!(ALLOCS.swap(0, Ordering::Relaxed), 1);
    COUNTING.with(|c| c.set(true));
    for _ in 0..200_000 {
        step(
            &mut now, &mut pipe, &mut a, &mut b, c, s, &mut buf, &chunk, &mut moved,
        );
        if moved - before > 16 << 20 {
            break;
        }
    }
    COUNTING.with(|c| c.set(false));
    let allocs = ALLOCS.load(Ordering::Relaxed);
    let segs = a.info(c).unwrap().segs_out - segs_before;
    println!(
        "measured {} bytes in {segs} segments: {allocs} allocations",
        moved - before
    );
    assert!(moved - before > 16 << 20);
    assert_eq!(allocs, 0, "heap allocations during steady transfer");
}
