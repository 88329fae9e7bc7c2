//! Data transfer details: retransmission timer and backoff, fast retransmit and NewReno
//! partial ACKs, SACK recovery, delayed ACK, Nagle, silly window avoidance, zero-window
//! probing, keepalive, user timeout, reassembly with SACK/D-SACK, window scaling, and
//! sequence numbers crossing 2^32.

use ulnet_wire::TcpFlags;

use super::harness::*;
use crate::tcp::{Algorithm, ConnError, Keepalive, SocketOption, State, TcpConfig};
use crate::time::Duration;

fn newreno() -> TcpConfig {
    TcpConfig {
        congestion: Algorithm::NewReno,
        ..plain_config()
    }
}

#[test]
fn rto_retransmits_and_backs_off_then_gives_up() {
    let mut cfg = newreno();
    cfg.max_retransmits = 3;
    let mut h = Harness::new(cfg);
    let (s, iss) = h.passive_open(1000, h.peer());
    h.tcp.send(h.now, s, b"data").unwrap();
    let d = h.out1();
    assert_eq!(d.seq, iss + 1);
    // Initial RTO (no RTT sample from the handshake's... there is one: it is tiny, so
    // min_rto applies): 200 ms, then 400, 800.
    let mut gaps = Vec::new();
    let mut last = h.now;
    for _ in 0..3 {
        let r = h.wait();
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].seq, r[0].payload.as_slice()), (iss + 1, &b"data"[..]));
        gaps.push(h.now - last);
        last = h.now;
    }
    assert_eq!(gaps[1], gaps[0] * 2);
    assert_eq!(gaps[2], gaps[0] * 4);
    assert!(gaps[0] >= Duration::from_millis(200));
    let info = h.tcp.info(s).unwrap();
    assert_eq!(info.retransmits, 3);
    assert_eq!(info.cwnd, u32::from(info.snd_mss));
    h.advance(Duration::from_secs(10));
    assert_eq!(h.tcp.state(s).unwrap(), State::Closed);
    assert_eq!(h.tcp.readiness(s).unwrap().error, Some(ConnError::TimedOut));
}

#[test]
fn ack_after_rto_resets_backoff_and_go_back_n() {
    let mut h = Harness::new(newreno());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000));
    h.tcp.send(h.now, s, &[9; 3000]).unwrap();
    assert_eq!(h.out().len(), 3);
    let r = h.wait();
    assert_eq!(r[0].seq, iss + 1);
    // The first segment is acknowledged: go-back-N resends the rest, cwnd grows.
    h.send(h.peer().seq(1001).ack(iss + 1001));
    let segs = h.out();
    assert_eq!(
        segs.iter().map(|x| x.seq).collect::<Vec<_>>(),
        vec![iss + 1001, iss + 2001]
    );
    assert_eq!(h.tcp.info(s).unwrap().backoff, 0);
}

/// Sends `n` full segments of 1000 bytes; returns their sequence numbers.
fn send_segments(h: &mut Harness, s: crate::tcp::SocketHandle, n: usize) -> Vec<u32> {
    h.tcp.send(h.now, s, &vec![5u8; n * 1000]).unwrap();
    let segs = h.out();
    assert_eq!(segs.len(), n);
    segs.iter().map(|x| x.seq).collect()
}

#[test]
fn fast_retransmit_on_three_dupacks_and_newreno_partial_ack() {
    let mut h = Harness::new(newreno());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000));
    let seqs = send_segments(&mut h, s, 8);
    let una = iss + 1;
    assert_eq!(seqs[0], una);
    // Segments 1 and 4 are lost. The peer acknowledges segment 0 and sends dupacks.
    h.send(h.peer().seq(1001).ack(una + 1000));
    let _new = h.out(); // cwnd grows: new data may go out
    h.send(h.peer().seq(1001).ack(una + 1000));
    let lt1 = h.out();
    h.send(h.peer().seq(1001).ack(una + 1000));
    let lt2 = h.out();
    // RFC 3042 limited transmit: no new data queued, so nothing; nothing retransmitted yet.
    assert!(lt1.iter().chain(&lt2).all(|x| x.seq != una + 1000));
    h.send(h.peer().seq(1001).ack(una + 1000));
    let fr = h.out();
    assert_eq!(
        fr[0].seq,
        una + 1000,
        "fast retransmit of the first hole: {fr:?}"
    );
    let info = h.tcp.info(s).unwrap();
    assert_eq!(info.fast_recoveries, 1);
    assert!(info.ssthresh < u32::MAX);
    // Partial ACK: up to the second hole. NewReno retransmits it at once.
    h.send(h.peer().seq(1001).ack(una + 4000));
    let pr = h.out();
    assert_eq!(pr[0].seq, una + 4000, "{pr:?}");
    // Full ACK ends recovery.
    h.send(h.peer().seq(1001).ack(una + 8000));
    let info = h.tcp.info(s).unwrap();
    assert_eq!(info.cwnd, info.ssthresh);
    assert_eq!(info.bytes_in_flight, 0);
}

#[test]
fn limited_transmit_sends_new_data_on_first_dupacks() {
    let mut h = Harness::new(newreno());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000));
    // Fill the initial window (10 segments) and queue more.
    h.tcp.send(h.now, s, &vec![1u8; 14_000]).unwrap();
    assert_eq!(h.out().len(), 10);
    let una = iss + 1;
    h.send(h.peer().seq(1001).ack(una).window(65535));
    // First ACK equal to SND.UNA with the same window: first dupack.
    let lt = h.out();
    assert_eq!(lt.len(), 1, "{lt:?}");
    assert_eq!(lt[0].seq, una + 10_000);
    h.send(h.peer().seq(1001).ack(una));
    let lt = h.out();
    assert_eq!(lt.len(), 1);
    assert_eq!(lt[0].seq, una + 11_000);
}

#[test]
fn sack_recovery_retransmits_only_holes() {
    let mut cfg = newreno();
    cfg.sack = true;
    // RFC 6675 recovery in isolation: with zero RTT in virtual time RACK (RFC 8985 §6)
    // would retransmit the first hole on the first SACK, before the ACKs scripted here.
    cfg.rack = false;
    let mut h = Harness::new(cfg);
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000).sack_ok());
    assert!(h.tcp.info(s).unwrap().sack);
    let una = iss + 1;
    send_segments(&mut h, s, 10);
    // Segments 2 and 5 lost; the peer SACKs what it has.
    let ack =
        |h: &Harness, blocks: &[(u32, u32)]| h.peer().seq(1001).ack(una + 2000).sack_blocks(blocks);
    h.send(ack(&h, &[]));
    let _ = h.out();
    h.send(ack(&h, &[(una + 3000, una + 4000)]));
    let _ = h.out();
    h.send(ack(&h, &[(una + 3000, una + 5000)]));
    let _ = h.out();
    h.send(ack(
        &h,
        &[(una + 6000, una + 7000), (una + 3000, una + 5000)],
    ));
    let r = h.out();
    assert!(!r.is_empty());
    assert_eq!(r[0].seq, una + 2000, "first hole first: {r:?}");
    let info = h.tcp.info(s).unwrap();
    assert_eq!(info.sacked_bytes, 3000);
    assert_eq!(info.fast_recoveries, 1);
    // More SACKs: the second hole (5) is lost too and retransmitted; SACKed data never is.
    h.send(ack(
        &h,
        &[(una + 6000, una + 9000), (una + 3000, una + 5000)],
    ));
    let mut all = r.clone();
    all.extend(h.out());
    h.send(ack(
        &h,
        &[(una + 6000, una + 10000), (una + 3000, una + 5000)],
    ));
    all.extend(h.out());
    let rtx: Vec<u32> = all.iter().map(|x| x.seq).collect();
    assert!(rtx.contains(&(una + 5000)), "{rtx:?}");
    for sacked in [3000, 4000, 6000, 7000, 8000, 9000] {
        assert!(
            !rtx.contains(&(una + sacked)),
            "SACKed {sacked} resent: {rtx:?}"
        );
    }
    h.send(h.peer().seq(1001).ack(una + 10_000));
    assert_eq!(h.tcp.info(s).unwrap().bytes_in_flight, 0);
}

#[test]
fn delayed_ack_every_second_segment_and_timer() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer());
    let nxt = iss + 1;
    // Past the quick ACKs of the connection's start.
    let b = h.end_quick_acks(s, 1001, nxt);
    let seg = vec![3u8; 1460];
    h.send(h.peer().seq(b).ack(nxt).data(&seg));
    h.quiet();
    h.send(h.peer().seq(b + 1460).ack(nxt).data(&seg));
    let a = h.out1();
    assert_eq!(a.ack, b + 2920);
    // A lone segment waits for the delayed-ACK timer (40 ms).
    h.send(h.peer().seq(b + 2920).ack(nxt).data(&seg));
    assert!(h.advance(Duration::from_millis(39)).is_empty());
    let a = h.advance(Duration::from_millis(1));
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].ack, b + 4380);
    // Switching delayed ACK off acknowledges every segment.
    h.tcp
        .set_option(h.now, s, SocketOption::DelayedAck(false))
        .unwrap();
    h.send(h.peer().seq(b + 4380).ack(nxt).data(b"x"));
    assert_eq!(h.out1().ack, b + 4381);
}

/// `AckPolicy::Linux`: an ACK for every second full segment as it arrives (not one per
/// batch), and for out-of-order data three duplicate ACKs at once, then one compressed
/// ACK after at most 1.1 ms carrying the SACK blocks of all that arrived.
#[test]
fn linux_ack_policy_acks_every_second_segment_and_compresses_sacks() {
    let mut cfg = plain_config();
    cfg.sack = true;
    cfg.ack_policy = crate::tcp::AckPolicy::Linux;
    let mut h = Harness::new(cfg);
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000).sack_ok());
    let nxt = iss + 1;
    let b = h.end_quick_acks(s, 1001, nxt);
    let seg = vec![5u8; 1000];
    // Four full segments in one batch: two ACKs, answered from `process` itself.
    for i in 0..4 {
        h.send(h.peer().seq(b + i * 1000).ack(nxt).data(&seg));
    }
    let acks: Vec<u32> = h.pending.iter().map(|a| a.ack).collect();
    assert_eq!(acks, vec![b + 2000, b + 4000]);
    h.quiet_after_pending();
    // A hole at b+4000; six segments above it.
    let base = b + 5000;
    for i in 0..6 {
        h.send(h.peer().seq(base + i * 1000).ack(nxt).data(&seg));
    }
    let dups = h.out();
    assert_eq!(dups.len(), 3, "three duplicate ACKs at once: {dups:#?}");
    assert!(dups.iter().all(|a| a.ack == b + 4000));
    // The other three wait (SACK compression), then one ACK reports all six.
    let later = h.advance(Duration::from_micros(1100));
    assert_eq!(later.len(), 1, "{later:#?}");
    assert_eq!(later[0].sack(), vec![(base, base + 6000)]);
    // The hole filled: acknowledged at once.
    h.send(h.peer().seq(b + 4000).ack(nxt).data(&seg));
    assert_eq!(h.out1().ack, base + 6000);
}

/// Quick-ACK mode (Linux's `tcp_incr_quickack`, `TCP_MAX_QUICKACKS` 16): the first
/// segments of a connection are acknowledged at once, so a Nagle sender writing a
/// request in pieces is not held 40 ms per piece; then the delayed ACK; after a silence
/// longer than the RTO the quick ACKs start again; a reply within the delay (an
/// interactive exchange) turns them off, and a delayed ACK that no reply carried turns
/// them back on.
#[test]
fn quick_acks_at_start_and_after_a_silence() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1460));
    let nxt = iss + 1;
    let mut seq = 1001;
    let mut quick = 0;
    loop {
        h.send(h.peer().seq(seq).ack(nxt).data(b"piece"));
        seq += 5;
        let a = h.out();
        if a.is_empty() {
            break;
        }
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].ack, seq);
        quick += 1;
        assert!(quick <= 16, "more quick ACKs than Linux's 16");
    }
    // A 65,535-byte window holds 16 pairs of 5-byte segments many times over: Linux's cap.
    assert_eq!(quick, 16);
    let a = h.advance(Duration::from_millis(40));
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].ack, seq);
    // A silence longer than the RTO (1 s initial, no sample yet): quick ACKs again.
    h.advance(Duration::from_secs(2));
    h.send(h.peer().seq(seq).ack(nxt).data(b"again"));
    seq += 5;
    assert_eq!(h.out1().ack, seq);
    // Interactive: we answer at once with data; the next request's ACK waits for a reply.
    h.read_all(s);
    h.tcp.send(h.now, s, b"reply").unwrap();
    assert_eq!(h.out1().payload, b"reply");
    h.send(h.peer().seq(seq).ack(nxt + 5).data(b"request"));
    seq += 7;
    h.quiet();
    // No reply: the delayed ACK goes out and ends interactive mode, so quick ACKs are
    // back for the rest of the 16.
    let a = h.advance(Duration::from_millis(40));
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].ack, seq);
    h.send(h.peer().seq(seq).ack(nxt + 5).data(b"more"));
    seq += 4;
    assert_eq!(h.out1().ack, seq);
}

/// Issue 12, defect 6 (RFC 2883 §4.2): a duplicate of out-of-order data above RCV.NXT
/// gets a D-SACK: the duplicate first, then the block that holds it, then the others.
#[test]
fn duplicate_above_rcv_nxt_gets_dsack() {
    let mut cfg = plain_config();
    cfg.sack = true;
    let mut h = Harness::new(cfg);
    let (_s, iss) = h.passive_open(1000, h.peer().sack_ok());
    let nxt = iss + 1;
    h.send(h.peer().seq(1101).ack(nxt).data(&[2; 100]));
    assert_eq!(h.out1().sack(), vec![(1101, 1201)]);
    h.send(h.peer().seq(1301).ack(nxt).data(&[4; 100]));
    assert_eq!(h.out1().sack(), vec![(1301, 1401), (1101, 1201)]);
    // The lower out-of-order segment again.
    h.send(h.peer().seq(1101).ack(nxt).data(&[2; 100]));
    let a = h.out1();
    assert_eq!(a.ack, 1001);
    assert_eq!(a.sack(), vec![(1101, 1201), (1101, 1201), (1301, 1401)]);
    // Partly a duplicate (RFC 2883 §4.2 reports the duplicated part): 1351..1451 overlaps
    // 1351..1401; the block holding it now runs to 1451. Past three duplicate ACKs for
    // one RCV.NXT the ACK is compressed (Linux's tcp_sack_compress): it comes at most
    // 1 ms (plus slack) later, still with the D-SACK first.
    h.send(h.peer().seq(1351).ack(nxt).data(&[4; 100]));
    assert!(h.out().is_empty(), "a fourth duplicate ACK is compressed");
    let a = h.advance(Duration::from_millis(2));
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].sack(), vec![(1351, 1401), (1301, 1451), (1101, 1201)]);
    // New out-of-order data reports no D-SACK.
    h.send(h.peer().seq(1501).ack(nxt).data(&[6; 100]));
    let a = h.advance(Duration::from_millis(2));
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].sack(), vec![(1501, 1601), (1301, 1451), (1101, 1201)]);
}

#[test]
fn out_of_order_gets_immediate_ack_with_sack_and_dsack() {
    let mut cfg = plain_config();
    cfg.sack = true;
    let mut h = Harness::new(cfg);
    let (s, iss) = h.passive_open(1000, h.peer().sack_ok());
    let nxt = iss + 1;
    h.send(h.peer().seq(1101).ack(nxt).data(&[2; 100]));
    let a = h.out1();
    assert_eq!(a.ack, 1001);
    assert_eq!(a.sack(), vec![(1101, 1201)]);
    h.send(h.peer().seq(1301).ack(nxt).data(&[4; 100]));
    let a = h.out1();
    assert_eq!(
        a.sack(),
        vec![(1301, 1401), (1101, 1201)],
        "latest block first"
    );
    // Filling the first hole: immediate ACK, remaining block reported.
    h.send(h.peer().seq(1001).ack(nxt).data(&[1; 100]));
    let a = h.out1();
    assert_eq!(a.ack, 1201);
    assert_eq!(a.sack(), vec![(1301, 1401)]);
    // A duplicate of acknowledged data: D-SACK (RFC 2883) first.
    h.send(h.peer().seq(1001).ack(nxt).data(&[1; 100]));
    let a = h.out1();
    assert_eq!(a.sack()[0], (1001, 1101));
    h.send(h.peer().seq(1201).ack(nxt).data(&[3; 100]));
    assert_eq!(h.out1().ack, 1401);
    let got = h.read_all(s);
    assert_eq!(got.len(), 400);
    assert!(got[..100].iter().all(|&b| b == 1) && got[300..].iter().all(|&b| b == 4));
}

#[test]
fn nagle_holds_small_segments_while_data_in_flight() {
    let mut cfg = plain_config();
    cfg.nagle = true;
    let mut h = Harness::new(cfg);
    let (s, iss) = h.passive_open(1000, h.peer());
    h.tcp.send(h.now, s, b"a").unwrap();
    assert_eq!(h.out1().payload, b"a");
    h.tcp.send(h.now, s, b"b").unwrap();
    h.tcp.send(h.now, s, b"c").unwrap();
    h.quiet();
    h.send(h.peer().seq(1001).ack(iss + 2));
    assert_eq!(h.out1().payload, b"bc");
    // With NODELAY every write goes at once.
    h.tcp
        .set_option(h.now, s, SocketOption::NoDelay(true))
        .unwrap();
    h.tcp.send(h.now, s, b"d").unwrap();
    assert_eq!(h.out1().payload, b"d");
    h.tcp.send(h.now, s, b"e").unwrap();
    assert_eq!(h.out1().payload, b"e");
}

#[test]
fn nagle_off_by_default() {
    let mut h = Harness::new(plain_config());
    let (s, _) = h.passive_open(1000, h.peer());
    h.tcp.send(h.now, s, b"a").unwrap();
    h.out1();
    h.tcp.send(h.now, s, b"b").unwrap();
    assert_eq!(h.out1().payload, b"b");
}

#[test]
fn sender_sws_avoidance_waits_for_useful_window() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000));
    h.send(h.peer().seq(1001).ack(iss + 1).window(10_000));
    h.tcp.send(h.now, s, &[1; 20_000]).unwrap();
    let segs = h.out();
    let sent: usize = segs.iter().map(|x| x.payload.len()).sum();
    assert_eq!(sent, 10_000);
    // The peer acknowledges everything but opens only 100 bytes: a silly window.
    h.send(h.peer().seq(1001).ack(iss + 1 + 10_000).window(100));
    h.quiet();
    // A usable window (at least half the largest seen) gets data.
    h.send(h.peer().seq(1001).ack(iss + 1 + 10_000).window(6000));
    let segs = h.out();
    assert_eq!(segs.iter().map(|x| x.payload.len()).sum::<usize>(), 6000);
    // 600 bytes is below one MSS and below half the largest window: held back.
    h.send(h.peer().seq(1001).ack(iss + 1 + 16_000).window(600));
    h.quiet();
}

#[test]
fn receiver_sws_avoidance_and_window_update() {
    let mut cfg = plain_config();
    cfg.recv_buffer_len = 8192;
    let mut h = Harness::new(cfg);
    let (s, iss) = h.passive_open(1000, h.peer());
    let nxt = iss + 1;
    // Fill the window completely.
    for i in 0..8 {
        h.send(h.peer().seq(1001 + i * 1024).ack(nxt).data(&[0; 1024]));
    }
    let acks = h.advance(Duration::from_millis(50));
    let last = acks.last().unwrap();
    assert_eq!((last.ack, last.window), (1001 + 8192, 0));
    // Reading a little does not reopen the window (no update, nothing advertised).
    let mut buf = [0u8; 100];
    assert_eq!(h.tcp.recv(h.now, s, &mut buf).unwrap(), 100);
    h.quiet();
    // Reading enough sends a window update.
    let mut big = [0u8; 4000];
    h.tcp.recv(h.now, s, &mut big).unwrap();
    let upd = h.out1();
    assert_eq!(upd.ack, 1001 + 8192);
    assert!(upd.window >= 4000, "{upd:?}");
}

#[test]
fn zero_window_probing_then_peer_opens() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000));
    let nxt = iss + 1;
    h.send(h.peer().seq(1001).ack(nxt).window(1000));
    h.tcp.send(h.now, s, &[7; 3000]).unwrap();
    let d = h.out1();
    assert_eq!(d.payload.len(), 1000);
    h.send(h.peer().seq(1001).ack(nxt + 1000).window(0));
    h.quiet();
    // The persist timer sends one-byte probes with backoff.
    let t0 = h.now;
    let p1 = h.wait();
    assert_eq!((p1[0].seq, p1[0].payload.len()), (nxt + 1000, 1), "{p1:?}");
    let gap1 = h.now - t0;
    h.send(h.peer().seq(1001).ack(nxt + 1000).window(0));
    let t1 = h.now;
    let p2 = h.wait();
    assert_eq!((p2[0].seq, p2[0].payload.len()), (nxt + 1000, 1));
    assert_eq!(h.now - t1, gap1 * 2);
    // Answered probes never kill the connection.
    for _ in 0..20 {
        h.send(h.peer().seq(1001).ack(nxt + 1000).window(0));
        assert_eq!(h.wait().len(), 1);
    }
    assert_eq!(h.tcp.state(s).unwrap(), State::Established);
    // The window opens: data flows again.
    h.send(h.peer().seq(1001).ack(nxt + 1001).window(5000));
    let segs = h.out();
    assert_eq!(segs.iter().map(|x| x.payload.len()).sum::<usize>(), 1999);
    let info = h.tcp.info(s).unwrap();
    assert_eq!(
        (info.fast_recoveries, info.retransmits),
        (0, 0),
        "probes are not losses"
    );
}

#[test]
fn keepalive_probes_and_timeout() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer());
    let ka = Keepalive {
        idle: Duration::from_secs(10),
        interval: Duration::from_secs(2),
        count: 3,
    };
    h.tcp
        .set_option(h.now, s, SocketOption::Keepalive(Some(ka)))
        .unwrap();
    assert!(h.advance(Duration::from_millis(9999)).is_empty());
    let p = h.advance(Duration::from_millis(1));
    assert_eq!(p.len(), 1);
    assert_eq!((p[0].seq, p[0].ack, p[0].payload.len()), (iss, 1001, 0));
    // An answer resets the count and the idle period.
    h.send(h.peer().seq(1001).ack(iss + 1));
    assert!(h.advance(Duration::from_millis(9999)).is_empty());
    assert_eq!(h.advance(Duration::from_millis(1)).len(), 1);
    // Silence: probes every 2 s, then the connection dies.
    let probes = h.advance(Duration::from_secs(7));
    assert_eq!(probes.len(), 2, "{probes:?}");
    assert_eq!(h.tcp.state(s).unwrap(), State::Closed);
    assert_eq!(h.tcp.readiness(s).unwrap().error, Some(ConnError::TimedOut));
}

#[test]
fn user_timeout_aborts_before_retries_run_out() {
    let mut h = Harness::new(plain_config());
    let (s, _) = h.passive_open(1000, h.peer());
    h.tcp
        .set_option(
            h.now,
            s,
            SocketOption::UserTimeout(Some(Duration::from_secs(1))),
        )
        .unwrap();
    h.tcp.send(h.now, s, b"x").unwrap();
    h.out1();
    h.advance(Duration::from_secs(3));
    assert_eq!(h.tcp.state(s).unwrap(), State::Closed);
    assert_eq!(h.tcp.readiness(s).unwrap().error, Some(ConnError::TimedOut));
    assert!(h.tcp.info(s).unwrap().retransmits < 5);
}

#[test]
fn window_scaling_negotiated_and_applied() {
    let mut cfg = plain_config();
    cfg.window_scaling = true;
    cfg.recv_buffer_len = 1 << 20;
    cfg.recv_buffer_initial = 1 << 20;
    let mut h = Harness::new(cfg);
    let (s, iss) = h.passive_open(1000, h.peer().wscale(2).window(1000));
    let info = h.tcp.info(s).unwrap();
    assert_eq!(info.window_scale, Some((2, 5)));
    // Our advertised window is scaled down by 5 bits.
    h.send(h.peer().seq(1001).ack(iss + 1).data(b"x").window(1000));
    let a = h.advance(Duration::from_millis(50));
    // Rounded down to the scale unit, never above the free space (2^20 - 1 with the one
    // byte unread): the peer may fill what we offer, so we offer only what fits.
    let offered = u32::from(a[0].window) << 5;
    assert!(((1 << 20) - 32..(1 << 20)).contains(&offered), "{offered}");
    // The peer's window is scaled up by 2 bits.
    assert_eq!(h.tcp.info(s).unwrap().snd_wnd, 4000);
    // Without the option from the peer, no scaling at all.
    let mut h2 = Harness::new(TcpConfig {
        window_scaling: true,
        ..plain_config()
    });
    let (s2, _) = h2.passive_open(1000, h2.peer());
    assert_eq!(h2.tcp.info(s2).unwrap().window_scale, None);
}

#[test]
fn mss_clamped_to_path_mtu() {
    let mut h = Harness::new(plain_config());
    h.tcp.set_path_mtu(h.remote.ip(), 1000);
    let l = h.listen();
    h.send(h.peer().seq(1).flags(TcpFlags::SYN).mss(9000));
    let sa = h.out1();
    assert_eq!(sa.options.mss, Some(960));
    h.send(h.peer().seq(2).ack(sa.seq + 1));
    let s = h.tcp.accept(h.now, l).unwrap().unwrap();
    assert_eq!(h.tcp.info(s).unwrap().snd_mss, 960);
}

#[test]
fn sequence_numbers_cross_2_pow_32_both_ways() {
    let mut h = Harness::new(plain_config());
    h.tcp.force_next_iss(u32::MAX - 1000);
    let (s, iss) = h.passive_open(u32::MAX - 500, h.peer().mss(1000));
    assert_eq!(iss, u32::MAX - 1000);
    // Receive 2000 bytes crossing 2^32.
    let mut peer_seq = (u32::MAX - 500).wrapping_add(1);
    for i in 0..4u8 {
        h.send(
            h.peer()
                .seq(peer_seq)
                .ack(iss.wrapping_add(1))
                .data(&[i; 500]),
        );
        peer_seq = peer_seq.wrapping_add(500);
    }
    let acks = h.advance(Duration::from_millis(50));
    assert_eq!(acks.last().unwrap().ack, peer_seq);
    assert_eq!(h.read_all(s).len(), 2000);
    // Send 3000 bytes crossing 2^32, with a loss across the wrap.
    h.tcp.send(h.now, s, &[9; 3000]).unwrap();
    let segs = h.out();
    assert_eq!(segs.len(), 3);
    assert_eq!(segs[1].seq, iss.wrapping_add(1001));
    assert!(segs[1].seq < 1000 || segs[1].seq > u32::MAX - 100);
    h.send(h.peer().seq(peer_seq).ack(iss.wrapping_add(1001)));
    let r = h.wait();
    assert_eq!(r[0].seq, iss.wrapping_add(1001));
    h.send(h.peer().seq(peer_seq).ack(iss.wrapping_add(3001)));
    let info = h.tcp.info(s).unwrap();
    assert_eq!(info.bytes_in_flight, 0);
    assert_eq!(info.bytes_acked, 3000);
}

#[test]
fn dsack_received_is_counted_not_treated_as_loss() {
    let mut cfg = newreno();
    cfg.sack = true;
    let mut h = Harness::new(cfg);
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000).sack_ok());
    send_segments(&mut h, s, 2);
    let una = iss + 1;
    h.send(h.peer().seq(1001).ack(una + 2000));
    // The peer reports receiving the first segment twice.
    h.send(
        h.peer()
            .seq(1001)
            .ack(una + 2000)
            .sack_blocks(&[(una, una + 1000)]),
    );
    let info = h.tcp.info(s).unwrap();
    assert_eq!(info.dsacks_received, 1);
    assert_eq!((info.fast_recoveries, info.sacked_bytes), (0, 0));
}

#[test]
fn reassembly_is_bounded() {
    let mut cfg = plain_config();
    cfg.max_ooo_ranges = 4;
    let mut h = Harness::new(cfg);
    let (s, iss) = h.passive_open(1000, h.peer());
    // Eight separate holes: only four ranges are kept, the rest dropped and counted.
    for i in 0..8u32 {
        h.send(
            h.peer()
                .seq(1001 + 100 + i * 200)
                .ack(iss + 1)
                .data(&[1; 100]),
        );
    }
    let _ = h.out();
    assert_eq!(h.tcp.stats().ooo_dropped, 4);
    // Filling the first hole delivers the first range only.
    h.send(h.peer().seq(1001).ack(iss + 1).data(&[0; 100]));
    assert_eq!(h.out().last().unwrap().ack, 1201);
    assert_eq!(h.read_all(s).len(), 200);
}

#[test]
fn congestion_algorithm_per_socket() {
    let mut h = Harness::new(plain_config());
    let (s, _) = h.passive_open(1000, h.peer());
    assert_eq!(h.tcp.info(s).unwrap().congestion, Algorithm::Cubic);
    h.tcp
        .set_option(h.now, s, SocketOption::Congestion(Algorithm::NewReno))
        .unwrap();
    assert_eq!(h.tcp.info(s).unwrap().congestion, Algorithm::NewReno);
}

#[test]
fn rttm_measures_retransmitted_segments_with_timestamps() {
    let mut cfg = newreno();
    cfg.timestamps = true;
    let mut h = Harness::new(cfg);
    let (s, iss) = h.passive_open(1000, h.peer().ts(10, 0));
    h.tcp.send(h.now, s, b"abc").unwrap();
    let first = h.out1();
    // Lost; the retransmission goes out after the RTO.
    let rtx = h.wait();
    assert_eq!(rtx[0].seq, first.seq);
    let echoed = rtx[0].tsval().unwrap();
    assert_ne!(echoed, first.tsval().unwrap());
    // The ACK comes 30 ms after the retransmission and echoes its timestamp: Karn's rule
    // forbids a plain sample, RTTM gives an unambiguous one.
    h.now += Duration::from_millis(30);
    h.send(h.peer().seq(1001).ack(iss + 4).ts(20, echoed));
    let srtt = h.tcp.info(s).unwrap().srtt.unwrap();
    assert!(srtt >= Duration::from_millis(1), "{srtt:?}");
}

#[test]
fn burst_of_segments_gets_an_ack_per_batch_and_slow_start_doubles() {
    // Receiver: segments arriving in one batch (no dispatch in between) get one cumulative
    // ACK at the end of the batch, as Linux's GRO receiver ACKs an aggregate ...
    let mut h = Harness::new(plain_config());
    let (_, iss) = h.passive_open(1000, h.peer().mss(1460));
    let seg = vec![3u8; 1460];
    let mut acks = Vec::new();
    for i in 0..10u32 {
        h.send(h.peer().seq(1001 + i * 1460).ack(iss + 1).data(&seg));
        acks.append(&mut h.pending);
    }
    assert!(acks.is_empty(), "{acks:?}");
    let after = h.out();
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0].ack - 1001, 14_600);
    // ... unless the batch has taken a quarter of the window unacknowledged: then the ACK
    // goes out from `process` at once (the largest window offered is 65535 here: no
    // window scaling).
    let quarter: u32 = 65_535 / 4;
    let n = quarter.div_ceil(1460) + 1;
    let base = 1001 + 10 * 1460;
    for i in 0..n {
        h.send(h.peer().seq(base + i * 1460).ack(iss + 1).data(&seg));
        acks.append(&mut h.pending);
    }
    assert!(!acks.is_empty(), "no ACK within a quarter window");
    assert!(acks[0].ack - base >= quarter, "{:?}", acks[0]);
    // Sender: five such ACKs processed back to back (the window not yet refilled) grow
    // cwnd by 2 SMSS each (RFC 3465 L = 2): slow start doubles per round trip.
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000));
    h.tcp.send(h.now, s, &[1u8; 60_000]).unwrap();
    assert_eq!(h.out().len(), 10);
    for k in 1..=5u32 {
        h.send(h.peer().seq(1001).ack(iss + 1 + k * 2000));
    }
    assert_eq!(h.tcp.info(s).unwrap().cwnd, 20_000);
    assert_eq!(h.out().len(), 20);
}

#[test]
fn sws_override_timer_sends_into_a_small_window() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000));
    h.send(h.peer().seq(1001).ack(iss + 1).window(8000));
    h.tcp.send(h.now, s, &[1; 20_000]).unwrap();
    assert_eq!(h.out().len(), 8);
    // Everything acknowledged, but only 300 bytes of window: held back (SWS) ...
    h.send(h.peer().seq(1001).ack(iss + 8001).window(300));
    h.quiet();
    // ... until the override (persist) timer sends what fits.
    let got = h.wait();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].seq, got[0].payload.len()), (iss + 8001, 300));
}

/// Issue 12, defect 7: PSH on the segment that empties the send queue and on Linux's
/// forced push (more than half the largest window offered unpushed), not on the last
/// segment the windows let out.
#[test]
fn psh_only_at_end_of_queue_or_forced_push() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.active_open(1000, h.peer().mss(1000).window(8000));
    let nxt = iss + 1;
    h.tcp.send(h.now, s, &[5; 12_500]).unwrap();
    let out = h.out();
    assert_eq!(out.len(), 8, "the window lets 8 segments out");
    let pushed: Vec<bool> = out.iter().map(|g| g.has(TcpFlags::PSH)).collect();
    // 5000 bytes > 8000 / 2 on the fifth; the window-limited eighth is mid-write.
    assert_eq!(
        pushed,
        [false, false, false, false, true, false, false, false]
    );
    // Everything acknowledged: the rest. The second is pushed (3000 unpushed from the
    // first flight + 2000 > 4000), and the one that empties the queue.
    h.send(h.peer().seq(1001).ack(nxt + 8000).window(8000));
    let out = h.out();
    let pushed: Vec<bool> = out.iter().map(|g| g.has(TcpFlags::PSH)).collect();
    assert_eq!(pushed, [false, true, false, false, true]);
    assert_eq!(out[4].len(), 500);
}

/// With bursts on (`TcpConfig::gso_max`), new data goes as bursts on a clean path, one
/// segment at a time for `BURST_HOLD` after a retransmission (a receiver held its ACKs
/// after cut bursts under loss: RTOs), and as bursts again once the hold has passed.
#[test]
fn bursts_pause_after_a_retransmission_and_resume_after_the_hold() {
    use crate::tcp::socket::BURST_HOLD;
    let cfg = TcpConfig {
        gso_max: 64 * 1024,
        ..plain_config()
    };
    let mut h = Harness::new(cfg);
    let (s, iss) = h.active_open(1000, h.peer().mss(1000));
    let mss = 1000usize;
    let is_burst = |g: &Seg| g.payload.len() > mss;
    h.tcp.send(h.now, s, &[7; 60_000]).unwrap();
    // A clean path: the initial window (10 segments) leaves as one burst.
    let first = h.out();
    assert_eq!(first.len(), 1, "{first:#?}");
    assert_eq!(first[0].payload.len(), 10 * mss);
    // Nothing acknowledged: the RTO retransmits the first segment alone.
    let rtx = h.wait();
    assert!(!rtx.is_empty());
    assert_eq!(rtx[0].seq, iss + 1);
    assert!(!rtx.iter().any(is_burst), "{rtx:#?}");
    // Everything acknowledged: new data goes segment by segment during the hold.
    h.send(h.peer().seq(1001).ack(iss + 1 + 10 * mss as u32));
    let held = h.out();
    assert!(!held.is_empty());
    assert!(
        !held.iter().any(is_burst),
        "a burst during the hold: {held:#?}"
    );
    let mut acked = iss + 1 + 10 * mss as u32;
    acked += held.iter().map(Seg::len).sum::<u32>();
    // Past the hold, with the data so far acknowledged: bursts again.
    h.now += BURST_HOLD;
    h.send(h.peer().seq(1001).ack(acked));
    let after = h.out();
    assert!(
        after.iter().any(is_burst),
        "no burst after the hold: {after:#?}"
    );
}

/// `Tcp::held_by_windows`: what a runtime whose callers drive the loop reads to know
/// that queued data needs further turns (the ACKs that open the windows) after the
/// caller leaves.
#[test]
fn data_beyond_the_windows_is_held_until_acks_let_it_go() {
    let mut h = Harness::new(newreno());
    let (s, iss) = h.passive_open(1000, h.peer());
    assert!(!h.tcp.held_by_windows(s), "nothing queued");
    assert_eq!(h.tcp.send(h.now, s, &[7; 1000]).unwrap(), 1000);
    assert!(
        !h.tcp.held_by_windows(s),
        "1000 bytes fit the initial window"
    );
    let first = h.out();
    assert_eq!(first.iter().map(Seg::len).sum::<u32>(), 1000);
    assert!(!h.tcp.held_by_windows(s), "in flight, nothing unsent");
    // Well past the initial congestion window (RFC 6928: ten segments).
    assert_eq!(h.tcp.send(h.now, s, &[7; 40_000]).unwrap(), 40_000);
    assert!(
        h.tcp.held_by_windows(s),
        "more queued than the windows take"
    );
    let mut sent = iss + 1 + 1000;
    let mut flight = h.out();
    assert!(!flight.is_empty());
    assert!(
        h.tcp.held_by_windows(s),
        "the first flight leaves the rest queued"
    );
    // ACK each flight whole until everything has left and been acknowledged.
    for _ in 0..20 {
        if flight.is_empty() {
            break;
        }
        for seg in &flight {
            sent = sent.max(seg.seq + seg.len());
        }
        h.send(h.peer().seq(1001).ack(sent).flags(TcpFlags::ACK));
        flight = h.out();
    }
    assert_eq!(sent, iss + 1 + 41_000, "all sent");
    assert!(
        !h.tcp.held_by_windows(s),
        "nothing left once all is acknowledged"
    );
}
