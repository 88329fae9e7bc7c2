//! Issue 13, by hand: what 20,000 idle established connections cost in resident memory,
//! read from /proc/self/status (VmRSS). Two engines in this process exchange segments
//! directly (no delay, virtual time). Each connection carries a 100-byte request and a
//! 1,000-byte answer, then sits idle until its buffer storage is released, then closes.
//!
//! Run with `cargo test --release -p ulnet-stack --test mem_rss -- --ignored --nocapture`;
//! the figures are in docs/memory.md. It asserts only what the engine accounts (storage
//! back to zero), never RSS: the allocator's own caching makes RSS a measurement, not a
//! rule.

#![allow(unsafe_code)]

use std::net::{IpAddr, SocketAddr};

use ulnet_stack::tcp::{SocketHandle, Tcp, TcpConfig};
use ulnet_stack::time::{Duration, Instant};
use ulnet_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};

struct Seg {
    to_b: bool,
    src: IpAddr,
    dst: IpAddr,
    src_port: u16,
    dst_port: u16,
    seq: u32,
    ack: u32,
    flags: TcpFlags,
    window: u16,
    options: TcpOptions,
    payload: Vec<u8>,
}

impl Seg {
    fn new(to_b: bool, src: IpAddr, dst: IpAddr, r: &TcpRepr<'_>) -> Seg {
        Seg {
            to_b,
            src,
            dst,
            src_port: r.src_port,
            dst_port: r.dst_port,
            seq: r.seq.0,
            ack: r.ack.0,
            flags: r.flags,
            window: r.window,
            options: r.options,
            payload: r.payload.to_vec(),
        }
    }
}

extern "C" {
    /// glibc: give free heap pages back to the system (what the ulnet runtime does once
    /// the engine's buffer memory has fallen, see docs/memory.md).
    fn malloc_trim(pad: usize) -> i32;
}

fn trim() {
    // SAFETY: malloc_trim takes no pointers and is safe to call at any time.
    unsafe {
        malloc_trim(0);
    }
}

fn vm_rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Moves segments between the engines until both are quiet at `now`.
fn settle(now: Instant, a: &mut Tcp, b: &mut Tcp) {
    let mut q: Vec<Seg> = Vec::new();
    loop {
        a.dispatch(now, &mut |s, d, r| {
            q.push(Seg::new(true, s, d, r));
            true
        });
        b.dispatch(now, &mut |s, d, r| {
            q.push(Seg::new(false, s, d, r));
            true
        });
        if q.is_empty() {
            return;
        }
        for s in std::mem::take(&mut q) {
            let repr = TcpRepr {
                src_port: s.src_port,
                dst_port: s.dst_port,
                seq: SeqNumber(s.seq),
                ack: SeqNumber(s.ack),
                flags: s.flags,
                window: s.window,
                urgent: 0,
                options: s.options,
                payload: &s.payload,
                payload_rest: &[],
            };
            let to = if s.to_b { &mut *b } else { &mut *a };
            let back = !s.to_b;
            to.process(now, s.src, s.dst, &repr, &mut |x, y, r| {
                q.push(Seg::new(back, x, y, r))
            });
        }
    }
}

#[test]
#[ignore = "by hand: measures RSS (docs/memory.md)"]
fn issue13_rss_of_20000_idle_connections() {
    const N: usize = 20_000;
    let mut cfg = TcpConfig::default();
    cfg.max_connections = 2 * N + 16;
    cfg.syn_queue_len = N;
    cfg.max_backlog = N;
    let mut a = Tcp::new(cfg.clone(), [1; 16]);
    let mut b = Tcp::new(cfg, [2; 16]);
    let server: SocketAddr = "198.18.0.2:80".parse().unwrap();
    let l = b.listen(server, N).unwrap();
    let mut now = Instant::from_secs(1);
    let rss0 = vm_rss_kib();

    // Embryonic: SYNs received by B, SYN-ACKs not yet answered.
    let mut clients: Vec<SocketHandle> = Vec::with_capacity(N);
    for i in 0..N {
        // 16,384 ephemeral ports per address: spread the clients over four addresses.
        let ip = format!("198.18.1.{}:0", 1 + i % 4);
        clients.push(a.connect(now, ip.parse().unwrap(), server).unwrap());
    }
    let mut syns = Vec::new();
    // One dispatch sends a bounded batch: call until everything is out.
    loop {
        let before = syns.len();
        a.dispatch(now, &mut |s, d, r| {
            syns.push(Seg::new(true, s, d, r));
            true
        });
        if syns.len() == before {
            break;
        }
    }
    for s in &syns {
        let repr = TcpRepr {
            src_port: s.src_port,
            dst_port: s.dst_port,
            seq: SeqNumber(s.seq),
            ack: SeqNumber(s.ack),
            flags: s.flags,
            window: s.window,
            urgent: 0,
            options: s.options,
            payload: &s.payload,
            payload_rest: &[],
        };
        b.process(now, s.src, s.dst, &repr, &mut |_, _, _| {});
    }
    drop(syns);
    let rss_embryonic = vm_rss_kib();
    assert_eq!(b.connection_count(), N);
    assert_eq!(b.stats().mem_bytes, 0);

    settle(now, &mut a, &mut b);
    let mut accepted = Vec::with_capacity(N);
    while let Some(h) = b.accept(now, l).unwrap() {
        accepted.push(h);
    }
    assert_eq!(accepted.len(), N);
    let rss_established = vm_rss_kib();

    // One request and one answer each.
    for &c in &clients {
        assert_eq!(a.send(now, c, &[b'q'; 100]).unwrap(), 100);
    }
    settle(now, &mut a, &mut b);
    let mut buf = [0u8; 2048];
    for &s in &accepted {
        assert_eq!(b.recv(now, s, &mut buf).unwrap(), 100);
        assert_eq!(b.send(now, s, &[b'a'; 1000]).unwrap(), 1000);
    }
    settle(now, &mut a, &mut b);
    for &c in &clients {
        assert_eq!(a.recv(now, c, &mut buf).unwrap(), 1000);
    }
    settle(now, &mut a, &mut b);
    let used_busy = (a.stats().mem_bytes, b.stats().mem_bytes);
    let rss_used = vm_rss_kib();

    // The delayed ACKs for the answers go out.
    now += Duration::from_millis(100);
    settle(now, &mut a, &mut b);
    // Idle: past `buffer_idle` every connection gives its storage back.
    now += Duration::from_secs(2);
    settle(now, &mut a, &mut b);
    assert_eq!(a.stats().mem_bytes, 0);
    assert_eq!(b.stats().mem_bytes, 0);
    let rss_idle = vm_rss_kib();
    trim();
    let rss_idle_trimmed = vm_rss_kib();

    for (&c, &s) in clients.iter().zip(&accepted) {
        a.close(now, c).unwrap();
        b.close(now, s).unwrap();
    }
    settle(now, &mut a, &mut b);
    now += Duration::from_secs(120);
    settle(now, &mut a, &mut b);
    assert_eq!(a.connection_count() + b.connection_count(), 0);
    let rss_closed = vm_rss_kib();
    trim();
    let rss_closed_trimmed = vm_rss_kib();

    let per = |kib: u64| (kib.saturating_sub(rss0)) * 1024 / (2 * N as u64);
    println!("VmRSS at start: {rss0} KiB");
    println!(
        "{N} embryonic pairs (A in SYN-SENT, B in SYN-RECEIVED): {rss_embryonic} KiB, {} B \
         per endpoint",
        per(rss_embryonic)
    );
    println!(
        "{N} established pairs, no data: {rss_established} KiB, {} B per endpoint",
        per(rss_established)
    );
    println!(
        "after one request/answer each: {rss_used} KiB, {} B per endpoint; storage \
         accounted A {} KiB, B {} KiB",
        per(rss_used),
        used_busy.0 / 1024,
        used_busy.1 / 1024
    );
    println!(
        "idle, storage released: {rss_idle} KiB, {} B per endpoint; after malloc_trim \
         {rss_idle_trimmed} KiB, {} B per endpoint",
        per(rss_idle),
        per(rss_idle_trimmed)
    );
    println!("all closed: {rss_closed} KiB; after malloc_trim {rss_closed_trimmed} KiB");
}
