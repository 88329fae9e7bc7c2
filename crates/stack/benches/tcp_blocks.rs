//! Micro-benchmarks of TCP's building blocks: the socket byte ring and the reassembly
//! range tracker, at a 1460-byte segment size.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use ulnet_stack::storage::RingBuffer;

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

criterion_group!(benches, ring_buffer);
criterion_main!(benches);
