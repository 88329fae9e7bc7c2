//! Micro-benchmarks of TCP's building blocks: the socket byte ring and the reassembly
//! range tracker, at a 1460-byte segment size.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use ulnet_stack::storage::RingBuffer;
use ulnet_stack::tcp::reassembly::Assembler;
use ulnet_stack::tcp::sack::Scoreboard;
use ulnet_wire::SeqNumber;

const MSS: usize = 1460;

fn ring_buffer(c: &mut Criterion) {
    let mut g = c.benchmark_group("ring_buffer");
    g.throughput(Throughput::Bytes(MSS as u64));
    let seg = [0xa5u8; MSS];
    let mut out = [0u8; MSS];
    // 64 KiB + a little, so segments straddle the wrap point as often as in real use.
    let mut r = RingBuffer::new(65_536 + 7);
    g.bench_function("enqueue_dequeue_1460", |b| {
        b.iter(|| {
            let n = r.enqueue_slice(black_box(&seg));
            let m = r.dequeue_slice(black_box(&mut out));
            black_box((n, m))
        })
    });
    let mut r = RingBuffer::new(65_536 + 7);
    r.enqueue_slice(&[1u8; 32_768]);
    g.bench_function("read_allocated_1460", |b| {
        let mut off = 0usize;
        b.iter(|| {
            off = (off + MSS) % (32_768 - MSS);
            black_box(r.read_allocated(black_box(off), &mut out))
        })
    });
    g.finish();
}

fn assembler(c: &mut Criterion) {
    let mut g = c.benchmark_group("assembler");
    // In order: each segment lands at offset 0 and is drained at once.
    g.bench_function("in_order_add_remove", |b| {
        let mut a = Assembler::new(32);
        b.iter(|| {
            a.add(0, black_box(MSS)).unwrap();
            black_box(a.remove_front())
        })
    });
    // One hole: 16 segments arrive past it (ascending), then the hole fills.
    g.bench_function("hole_then_fill_16", |b| {
        let mut a = Assembler::new(32);
        b.iter(|| {
            for i in 1..=16 {
                a.add(black_box(i * MSS), MSS).unwrap();
            }
            a.add(0, MSS).unwrap();
            black_box(a.remove_front())
        })
    });
    // Worst case for the sorted insert: many separate ranges, arriving out of order.
    g.bench_function("scattered_16_ranges", |b| {
        let mut a = Assembler::new(32);
        b.iter(|| {
            for i in (0..16).rev() {
                a.add(black_box((2 * i + 1) * MSS), MSS).unwrap();
            }
            a.clear();
        })
    });
    g.finish();
}

fn scoreboard(c: &mut Criterion) {
    c.bench_function("scoreboard_update_3_blocks", |b| {
        let mut sb = Scoreboard::new(32);
        let una = SeqNumber(u32::MAX - 10_000);
        let m = MSS as u32;
        let blocks = [
            (una + 5 * m, una + 9 * m),
            (una + 2 * m, una + 3 * m),
            (una + 11 * m, una + 12 * m),
        ];
        b.iter(|| {
            let u = sb.update(una, black_box(&blocks));
            let p = sb.pipe(una, una + 20 * m, una, MSS);
            sb.clear();
            black_box((u, p))
        })
    });
}

criterion_group!(benches, ring_buffer, assembler, scoreboard);
criterion_main!(benches);
