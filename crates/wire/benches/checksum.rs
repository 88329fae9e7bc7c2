//! Per-packet costs on the data path: the Internet checksum of a full-MSS payload, and
//! parsing / emitting a TCP data segment.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ulnet_wire::{
    checksum, ChecksumMode, SeqNumber, TcpFlags, TcpOptions, TcpPacket, TcpRepr, TcpTimestamp,
};

const SRC: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const DST: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));

fn payload() -> Vec<u8> {
    (0..1460u32)
        .map(|i| (i.wrapping_mul(31) >> 3) as u8)
        .collect()
}

fn data_segment(payload: &[u8]) -> Vec<u8> {
    let mut options = TcpOptions::none();
    options.timestamp = Some(TcpTimestamp {
        tsval: 123,
        tsecr: 456,
    });
    let repr = TcpRepr {
        src_port: 5000,
        dst_port: 80,
        seq: SeqNumber(1),
        ack: SeqNumber(1),
        flags: TcpFlags::PSH | TcpFlags::ACK,
        window: 502,
        urgent: 0,
        options,
        payload,
        payload_rest: &[],
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        &SRC,
        &DST,
        ChecksumMode::Full,
    );
    buf
}

fn bench(c: &mut Criterion) {
    let data = payload();
    let mut g = c.benchmark_group("checksum");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("data_1460", |b| b.iter(|| checksum::data(black_box(&data))));
    // What a small segment costs: an IPv4 header, a TCP header with timestamps and 64
    // bytes, an odd length.
    for n in [20usize, 96, 75] {
        let d = &data[..n];
        g.bench_function(format!("data_{n}"), |b| {
            b.iter(|| checksum::data(black_box(d)))
        });
    }
    g.finish();

    let segment = data_segment(&data);
    let mut g = c.benchmark_group("tcp");
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse_data_segment_verify", |b| {
        b.iter(|| {
            let p = TcpPacket::new_checked(black_box(&segment[..])).unwrap();
            TcpRepr::parse(&p, &SRC, &DST, ChecksumMode::Full)
                .unwrap()
                .payload
                .len()
        })
    });
    g.bench_function("parse_data_segment_offload", |b| {
        b.iter(|| {
            let p = TcpPacket::new_checked(black_box(&segment[..])).unwrap();
            TcpRepr::parse(&p, &SRC, &DST, ChecksumMode::Offload)
                .unwrap()
                .payload
                .len()
        })
    });
    let p = TcpPacket::new_checked(&segment[..]).unwrap();
    let repr = TcpRepr::parse(&p, &SRC, &DST, ChecksumMode::Full).unwrap();
    let mut out = vec![0u8; segment.len()];
    g.bench_function("emit_data_segment", |b| {
        b.iter(|| {
            black_box(&repr).emit(
                &mut TcpPacket::new_unchecked(&mut out[..]),
                &SRC,
                &DST,
                ChecksumMode::Full,
            );
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
