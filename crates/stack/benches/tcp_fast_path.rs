//! The TCP fast path, per segment: an in-order 1460-byte data segment taken through
//! `Tcp::process` into the socket buffer (and read out by the application), a pure ACK
//! that acknowledges one segment of new data, and one end of a 64-byte ping-pong (a
//! request that acknowledges the last answer in, read, the answer written and sent:
//! the engine's share of `ulnet bench latency`'s TCP round trip, per end); and a
//! 65483-byte segment (a veth super-frame at MTU 65535) that arrived in 17 buffers, as
//! AF_XDP multi-buffer hands it over, taken where it lies (`TcpRepr::payload_rest`)
//! against gathered into one buffer first, as the channel did before.

use std::hint::black_box;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration as StdDuration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ulnet_stack::tcp::{SocketHandle, SocketOption, Tcp, TcpConfig};
use ulnet_stack::time::Instant;
use ulnet_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr, TcpTimestamp};

const MSS: usize = 1460;

fn peer_ip() -> IpAddr {
    "198.18.0.2".parse().unwrap()
}

fn our_ip() -> IpAddr {
    "198.18.0.1".parse().unwrap()
}

fn seg(seq: u32, ack: u32, flags: TcpFlags, tsval: u32, payload: &[u8]) -> TcpRepr<'_> {
    let mut options = TcpOptions::none();
    options.timestamp = Some(TcpTimestamp { tsval, tsecr: 0 });
    TcpRepr {
        src_port: 40000,
        dst_port: 80,
        seq: SeqNumber(seq),
        ack: SeqNumber(ack),
        flags,
        window: 65535,
        urgent: 0,
        options,
        payload,
        payload_rest: &[],
    }
}

/// A connection in ESTABLISHED driven by a scripted peer; returns the engine, the socket
/// and our ISS. Timestamps and SACK are on, as with a Linux peer.
fn established(now: Instant) -> (Tcp, SocketHandle, u32) {
    // No interface caps the MTU here: an Ethernet link's.
    let mut cfg = TcpConfig::default();
    cfg.mtu = 1500;
    let mut tcp = Tcp::new(cfg, [9; 16]);
    let l = tcp.listen(SocketAddr::new(our_ip(), 80), 4).unwrap();
    let mut syn = seg(1000, 0, TcpFlags::SYN, 1, &[]);
    syn.options.mss = Some(1460);
    syn.options.sack_permitted = true;
    syn.options.window_scale = Some(7);
    tcp.process(now, peer_ip(), our_ip(), &syn, &mut |_, _, _| {});
    let mut iss = 0;
    tcp.dispatch(now, &mut |_, _, r| {
        iss = r.seq.0;
        true
    });
    tcp.process(
        now,
        peer_ip(),
        our_ip(),
        &seg(1001, iss + 1, TcpFlags::ACK, 2, &[]),
        &mut |_, _, _| {},
    );
    let s = tcp.accept(now, l).unwrap().unwrap();
    (tcp, s, iss)
}

fn data_segment_in_order(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_fast_path");
    g.throughput(Throughput::Bytes(MSS as u64));
    let now = Instant::from_secs(10);
    let (mut tcp, s, iss) = established(now);
    let payload = [0x5au8; MSS];
    let mut buf = [0u8; MSS];
    let mut seq = 1001u32;
    let mut tsval = 3u32;
    g.bench_function("rx_data_1460_in_order", |b| {
        b.iter(|| {
            let d = seg(seq, iss + 1, TcpFlags::ACK | TcpFlags::PSH, tsval, &payload);
            tcp.process(now, peer_ip(), our_ip(), black_box(&d), &mut |_, _, _| {});
            seq = seq.wrapping_add(MSS as u32);
            tsval = tsval.wrapping_add(1);
            let n = tcp.recv(now, s, black_box(&mut buf)).unwrap();
            black_box(n);
            // The ACKs this generates (every second segment) go out, as they would.
            tcp.dispatch(now, &mut |_, _, r| {
                black_box(r);
                true
            });
        })
    });
    g.finish();
}

fn pure_ack(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_fast_path");
    g.throughput(Throughput::Elements(1));
    g.bench_function("rx_pure_ack_new_data", |b| {
        b.iter_custom(|iters| {
            let mut now = Instant::from_secs(10);
            let (mut tcp, s, iss) = established(now);
            let chunk = [7u8; 64 * 1024];
            let mut acked = iss + 1;
            let mut sent_end = iss + 1;
            let mut tsval = 3u32;
            let mut total = StdDuration::ZERO;
            let mut done = 0u64;
            while done < iters {
                // Untimed: queue data and let it go out (up to cwnd / window).
                while tcp.send(now, s, &chunk).unwrap_or(0) > 0 {}
                tcp.dispatch(now, &mut |_, _, r| {
                    let end = r.seq.0.wrapping_add(r.payload.len() as u32);
                    if SeqNumber(end) > SeqNumber(sent_end) {
                        sent_end = end;
                    }
                    true
                });
                // Timed: one pure ACK per segment in flight.
                let start = std::time::Instant::now();
                while SeqNumber(acked) < SeqNumber(sent_end) && done < iters {
                    acked = SeqNumber(acked.wrapping_add(MSS as u32 - 12))
                        .min(SeqNumber(sent_end))
                        .0;
                    tsval = tsval.wrapping_add(1);
                    let a = seg(1001, acked, TcpFlags::ACK, tsval, &[]);
                    tcp.process(now, peer_ip(), our_ip(), black_box(&a), &mut |_, _, _| {});
                    done += 1;
                }
                total += start.elapsed();
                now += ulnet_stack::time::Duration::from_micros(100);
            }
            total
        })
    });
    g.finish();
}

fn ping_pong_end(c: &mut Criterion) {
    const MSG: usize = 64;
    let mut g = c.benchmark_group("tcp_fast_path");
    g.throughput(Throughput::Elements(1));
    g.bench_function("ping_pong_64_one_end", |b| {
        let mut now = Instant::from_secs(10);
        let (mut tcp, s, iss) = established(now);
        tcp.set_option(now, s, SocketOption::NoDelay(true)).unwrap();
        let request = [0x5au8; MSG];
        let mut buf = [0u8; MSG];
        let mut seq = 1001u32;
        // What the peer acknowledges: our answers so far.
        let mut our_nxt = iss + 1;
        let mut tsval = 3u32;
        let (peer, us) = (peer_ip(), our_ip());
        b.iter(|| {
            // The clock moves as a round trip of a few microseconds would.
            now += ulnet_stack::time::Duration::from_micros(7);
            let d = seg(seq, our_nxt, TcpFlags::ACK | TcpFlags::PSH, tsval, &request);
            tcp.process(now, peer, us, black_box(&d), &mut |_, _, _| {});
            seq = seq.wrapping_add(MSG as u32);
            tsval = tsval.wrapping_add(1);
            let n = tcp.recv(now, s, black_box(&mut buf)).unwrap();
            assert_eq!(tcp.send(now, s, &buf[..n]).unwrap(), MSG);
            let mut out = 0;
            tcp.dispatch(now, &mut |_, _, r| {
                out += r.payload.len();
                black_box(r);
                true
            });
            assert_eq!(out, MSG, "one answer per request, the ACK on it");
            our_nxt = our_nxt.wrapping_add(MSG as u32);
        })
    });
    g.finish();
}

/// A super-frame's segment in 17 buffers, as AF_XDP hands it over from 4 KiB UMEM
/// frames: the first 3840 bytes (the frame less its headroom) with 66 bytes of headers,
/// then 4096 bytes each: in place against gathered.
fn jumbo_segment_in_parts(c: &mut Criterion) {
    const LEN: usize = 65483;
    const PART: usize = 4096;
    const FIRST: usize = 3840 - 66;
    let mut g = c.benchmark_group("tcp_fast_path");
    g.throughput(Throughput::Bytes(LEN as u64));
    let payload: Vec<u8> = (0..LEN).map(|i| i as u8).collect();
    let parts: Vec<&[u8]> = core::iter::once(&payload[..FIRST])
        .chain(payload[FIRST..].chunks(PART))
        .collect();
    assert_eq!(parts.len(), 17);
    for gather in [true, false] {
        let name = if gather {
            "rx_data_65483_in_17_parts_gathered"
        } else {
            "rx_data_65483_in_17_parts_in_place"
        };
        let now = Instant::from_secs(10);
        let (mut tcp, s, iss) = established(now);
        tcp.set_option(now, s, SocketOption::RecvBuffer(1 << 20))
            .unwrap();
        let mut scratch = vec![0u8; LEN];
        let mut buf = vec![0u8; LEN];
        let mut seq = 1001u32;
        let mut tsval = 3u32;
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut d = seg(seq, iss + 1, TcpFlags::ACK | TcpFlags::PSH, tsval, &[]);
                if gather {
                    let mut at = 0;
                    for p in &parts {
                        scratch[at..at + p.len()].copy_from_slice(p);
                        at += p.len();
                    }
                    d.payload = &scratch;
                } else {
                    d.payload = parts[0];
                    d.payload_rest = &parts[1..];
                }
                tcp.process(now, peer_ip(), our_ip(), black_box(&d), &mut |_, _, _| {});
                seq = seq.wrapping_add(LEN as u32);
                tsval = tsval.wrapping_add(1);
                let n = tcp.recv(now, s, black_box(&mut buf)).unwrap();
                assert_eq!(n, LEN);
                tcp.dispatch(now, &mut |_, _, r| {
                    black_box(r);
                    true
                });
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    data_segment_in_order,
    pure_ack,
    ping_pong_end,
    jumbo_segment_in_parts
);
criterion_main!(benches);
