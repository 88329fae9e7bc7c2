//! Regression tests for TCP-layer problems found with `ulnet_apps::sim` (findings 7 and 8 of
//! the TCP bug list, fixed in commit 36bf2a8). Each states what RFC behaviour it expects
//! and what happened before the fix.

use std::time::Duration;

use ulnet_apps::sim::{run_tcp, CwndSample, TcpSimOptions};

/// Finding 7, before the fix: segments of a whole window delivered at one instant (no
/// rate limit: the simulator hands the burst to B in one receive batch) were acknowledged
/// by ONE ACK at the next
/// dispatch, not one per second full-sized segment (RFC 5681 §4.2, RFC 1122
/// §4.2.3.2). The sender grows cwnd by at most 2 SMSS per ACK in slow start
/// (RFC 3465 L = 2), so slow start adds 2 segments per RTT instead of doubling:
/// cwnd 10, 12, 14, 16, ... segments at 0, 20, 40, 60 ms on a 20 ms path, and 10 MB
/// take 1.66 s (51 Mb/s) where the 256 KB window allows about 100 Mb/s.
/// Reproduce: `ulnet sim tcp --bytes 10M --rtt 20ms --static-arp --cwnd-trace c.csv
/// --pcap-b b.pcap` (b.pcap: one ACK per burst of 10-16 data segments).
///
/// Since then the receiver acknowledges once per receive batch again, on purpose (as
/// Linux's GRO receiver does per aggregate; it halves the frames a bulk receiver sends),
/// and the fix moved to the sender: slow start counts every byte a stretch ACK covers
/// (no RFC 3465 L limit, as Linux's `tcp_slow_start`), so the window still doubles.
#[test]
fn slow_start_doubles_per_rtt_when_a_window_arrives_in_one_batch() {
    let mut o = TcpSimOptions {
        bytes: 4 << 20,
        static_arp: true,
        cwnd_trace: true,
        send_buffer: Some(4 << 20),
        recv_buffer: Some(4 << 20),
        ..TcpSimOptions::default()
    };
    o.both_ways(|d| d.delay = Duration::from_millis(10));
    let r = run_tcp(&o).unwrap();
    assert!(r.ok, "{:?}", r.failures);
    let at = |t: f64| -> &CwndSample { r.cwnd_trace.iter().rev().find(|s| s.t <= t).unwrap() };
    // IW 10; five round trips of slow start should give about 10 * 2^5 = 320 segments
    // (delayed ACKs every second segment, growth up to 2 SMSS per ACK). Ask for a
    // quarter of that.
    let s = at(0.105);
    let segs = s.cwnd / u32::from(s.mss);
    assert!(
        segs >= 80,
        "cwnd after 5 RTTs of slow start: {segs} segments"
    );
}

/// RFC 6675 §2 counts an ACK carrying new SACK information as a duplicate ACK "even if
/// it ... moves the cumulative acknowledgment point", and §5 step (2) enters loss
/// recovery on it when IsLost(HighACK + 1). Finding 8, before the fix: `input.rs` only
/// called `on_dupack` when the ACK acknowledged nothing new (`acked == 0`), so with one ACK per window (see above)
/// recovery starts a round trip late. On a 200 ms path with segment 100 dropped: the
/// ACK at 1.600 s acknowledges up to the hole and SACKs the 12 segments above it, yet
/// the fast retransmit waits for the next ACK (1.800 s); the retransmission timer
/// (restarted at 1.600 s, RTO about 253 ms) then fires at 1.853 s, before the
/// retransmission can be acknowledged (2.000 s): a spurious timeout, cwnd to 1 SMSS.
/// Reproduce: `ulnet sim tcp --bytes 24M --seed 3 --buffer 4M --drop-segment 100
/// --static-arp --rtt 200ms --cwnd-trace c.csv --pcap a.pcap`.
#[test]
fn one_drop_is_repaired_by_fast_retransmit_without_timeout() {
    let mut o = TcpSimOptions {
        bytes: 24 << 20,
        seed: 3,
        send_buffer: Some(4 << 20),
        recv_buffer: Some(4 << 20),
        drop_segments: vec![100],
        static_arp: true,
        ..TcpSimOptions::default()
    };
    o.both_ways(|d| d.delay = Duration::from_millis(100));
    let r = run_tcp(&o).unwrap();
    assert!(r.ok, "{:?}", r.failures);
    assert_eq!(
        r.retransmissions.fast_retransmits, 1,
        "{:?}",
        r.retransmissions
    );
    assert_eq!(r.retransmissions.rto_expiries, 0, "{:?}", r.retransmissions);
}
