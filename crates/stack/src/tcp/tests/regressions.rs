//! Regression tests for findings reported by the engine's users (/work/tcp-bugs.md), one
//! per finding, named after it.

use ulnet_wire::TcpFlags;

use super::harness::*;
use crate::tcp::{Shutdown, State, TcpConfig};
use crate::time::Duration;

/// After a dispatch that could send nothing, `poll_at` must name a future deadline.
fn assert_idle_until_timer(h: &mut Harness) {
    let _ = h.out();
    let t = h.tcp.poll_at().expect("a timer is pending");
    assert!(t > h.now, "poll_at {t:?} is not after now {:?}", h.now);
    // A second dispatch at the same instant sends nothing and keeps the deadline.
    h.quiet();
    assert_eq!(h.tcp.poll_at(), Some(t));
}

/// Finding 1: with data queued but the congestion window full, `poll_at` kept returning
/// "now", so a runtime trusting it spun.
#[test]
fn poll_at_is_the_rto_when_cwnd_is_full() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000));
    assert_eq!(h.tcp.send(h.now, s, &[1; 60_000]).unwrap(), 60_000);
    let first = h.out();
    assert_eq!(first.len(), 10, "initial window");
    assert_idle_until_timer(&mut h);
    let rto = h.tcp.info(s).unwrap().rto;
    assert_eq!(h.tcp.poll_at(), Some(h.now + rto));
    // A duplicate ACK (no new data acknowledged, cwnd still full) changes nothing.
    h.send(h.peer().seq(1001).ack(iss + 1));
    assert_idle_until_timer(&mut h);
}

/// Finding 1, the peer's window: full but not zero.
#[test]
fn poll_at_is_the_rto_when_the_peer_window_is_full() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000));
    h.send(h.peer().seq(1001).ack(iss + 1).window(3000));
    h.tcp.send(h.now, s, &[1; 20_000]).unwrap();
    assert_eq!(h.out().len(), 3);
    assert_idle_until_timer(&mut h);
    // Half the window comes back acknowledged: one more segment fits, then idle again.
    h.send(h.peer().seq(1001).ack(iss + 1 + 1000).window(3000));
    assert_eq!(h.out().len(), 1);
    assert_idle_until_timer(&mut h);
}

/// Finding 1, a zero window: the next deadline is the persist timer.
#[test]
fn poll_at_is_the_persist_timer_when_the_window_is_zero() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000));
    h.send(h.peer().seq(1001).ack(iss + 1).window(0));
    h.tcp.send(h.now, s, &[1; 5000]).unwrap();
    assert_idle_until_timer(&mut h);
    let probe = h.wait();
    assert_eq!((probe[0].seq, probe[0].payload.len()), (iss + 1, 1));
    h.send(h.peer().seq(1001).ack(iss + 1).window(0));
    assert_idle_until_timer(&mut h);
}

/// Finding 2: a probe byte the peer did not accept (ACK stays at SND.UNA, window 0) must
/// be sent again as the first byte when the window opens, not left as a hole behind
/// SND.NXT (tests/pkt/zero-window-probe.pkt line 25).
#[test]
fn unaccepted_probe_byte_is_resent_when_the_window_opens() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000));
    let una = iss + 1;
    h.send(h.peer().seq(1001).ack(una).window(0));
    h.tcp.send(h.now, s, &[7; 500]).unwrap();
    h.quiet();
    for _ in 0..3 {
        let p = h.wait();
        assert_eq!((p[0].seq, p[0].payload.len()), (una, 1), "{p:?}");
        h.send(h.peer().seq(1001).ack(una).window(0));
        h.quiet();
    }
    // The last probe is outstanding when the window opens without acknowledging it.
    let p = h.wait();
    assert_eq!((p[0].seq, p[0].payload.len()), (una, 1));
    h.send(h.peer().seq(1001).ack(una).window(1000));
    let d = h.out1();
    assert_eq!((d.seq, d.payload.len()), (una, 500), "{d:?}");
    h.send(h.peer().seq(1001).ack(una + 500).window(1000));
    h.quiet();
    let info = h.tcp.info(s).unwrap();
    assert_eq!((info.bytes_in_flight, info.send_queue_len), (0, 0));
}

/// Finding 3, for a connection still held by the application in TIME-WAIT: a
/// retransmitted FIN (SEG.SEQ <= Last.ACK.sent, newer TSval) updates TS.Recent (RFC 7323
/// §4.3), its ACK echoes that TSval, and 2*MSL starts again (RFC 9293 §3.10.7.4).
#[test]
fn time_wait_socket_takes_ts_recent_from_a_retransmitted_fin() {
    let mut h = Harness::new(TcpConfig {
        timestamps: true,
        ..plain_config()
    });
    let (s, iss) = h.passive_open(1000, h.peer().ts(500, 0));
    h.tcp.shutdown(h.now, s, Shutdown::Write).unwrap();
    let fin = h.out1();
    assert!(fin.has(TcpFlags::FIN));
    let ours = fin.tsval().unwrap();
    h.send(h.peer().seq(1001).ack(iss + 2).ts(600, ours));
    h.send(
        h.peer()
            .seq(1001)
            .ack(iss + 2)
            .flags(TcpFlags::FIN | TcpFlags::ACK)
            .ts(700, ours),
    );
    assert_eq!(h.tcp.state(s).unwrap(), State::TimeWait);
    let a = h.out1();
    assert_eq!((a.ack, a.options.timestamp.unwrap().tsecr), (1002, 700));
    h.now += Duration::from_secs(1);
    h.send(
        h.peer()
            .seq(1001)
            .ack(iss + 2)
            .flags(TcpFlags::FIN | TcpFlags::ACK)
            .ts(1700, ours),
    );
    let a = h.out1();
    assert_eq!((a.ack, a.options.timestamp.unwrap().tsecr), (1002, 1700));
    // 2*MSL (60 s by default) counts from the retransmitted FIN.
    h.advance(Duration::from_secs(59) + Duration::from_millis(500));
    assert_eq!(h.tcp.state(s).unwrap(), State::TimeWait);
    h.advance(Duration::from_secs(1));
    assert_eq!(h.tcp.state(s).unwrap(), State::Closed);
}

/// Finding 5: a second FIN at FIN+1 after the first was acknowledged. A window probe may
/// carry the last byte and the FIN; when the peer takes both but keeps its window closed,
/// the persist timer must not probe again with a FIN past the acknowledged one.
#[test]
fn no_second_fin_after_a_probe_carried_the_acknowledged_fin() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000));
    let una = iss + 1;
    h.send(h.peer().seq(1001).ack(una).window(0));
    h.tcp.send(h.now, s, b"x").unwrap();
    h.tcp.close(h.now, s).unwrap();
    let p = h.wait();
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].has(TcpFlags::FIN),
        "the probe carries the last byte and FIN"
    );
    assert_eq!((p[0].seq, p[0].payload.len()), (una, 1));
    // Byte and FIN accepted, window still closed.
    h.send(h.peer().seq(1001).ack(una + 2).window(0));
    let later = h.advance(Duration::from_secs(30));
    assert!(
        later.iter().all(|x| !x.has(TcpFlags::FIN)),
        "a FIN was sent again: {later:?}"
    );
    // The peer's FIN completes the close normally.
    h.send(
        h.peer()
            .seq(1001)
            .ack(una + 2)
            .flags(TcpFlags::FIN | TcpFlags::ACK)
            .window(0),
    );
    let a = h.out1();
    assert_eq!((a.seq, a.ack, a.flags), (una + 2, 1002, TcpFlags::ACK));
    assert_eq!(h.tcp.time_wait_count(), 1);
}

/// Finding 5, simultaneous close: after CLOSING our FIN is acknowledged and nothing
/// else (no FIN at FIN+1) is sent; the connection reaches TIME-WAIT and ends.
#[test]
fn simultaneous_close_sends_one_fin_and_leaves_closing() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer());
    h.tcp.send(h.now, s, &[1; 100]).unwrap();
    assert_eq!(h.out1().payload.len(), 100);
    h.tcp.shutdown(h.now, s, Shutdown::Write).unwrap();
    let fin = h.out1();
    assert_eq!(
        (fin.seq, fin.flags),
        (iss + 101, TcpFlags::FIN | TcpFlags::ACK)
    );
    // The peer's FIN crosses ours and acknowledges only the data.
    h.send(
        h.peer()
            .seq(1001)
            .ack(iss + 101)
            .flags(TcpFlags::FIN | TcpFlags::ACK),
    );
    assert_eq!(h.tcp.state(s).unwrap(), State::Closing);
    let a = h.out1();
    assert_eq!((a.seq, a.ack), (iss + 102, 1002));
    h.send(h.peer().seq(1002).ack(iss + 102));
    assert_eq!(h.tcp.state(s).unwrap(), State::TimeWait);
    let rest = h.advance(Duration::from_secs(120));
    assert!(rest.is_empty(), "{rest:?}");
    assert_eq!(h.tcp.state(s).unwrap(), State::Closed);
}

/// Finding 4: after a passive open the SYN-ACK offered at most 65535 bytes (its window is
/// never scaled); reading a little must not send a pure window update just because the
/// scaled window could now be larger (Linux does not, __tcp_cleanup_rbuf): the next ACK
/// carries it.
#[test]
fn no_window_update_after_passive_open_and_a_small_read() {
    let mut h = Harness::new(TcpConfig {
        window_scaling: true,
        recv_buffer_len: 1 << 20,
        recv_buffer_initial: 1 << 20,
        ..plain_config()
    });
    let (s, iss) = h.passive_open(1000, h.peer().wscale(7));
    h.send(h.peer().seq(1001).ack(iss + 1).data(&[1; 1000]));
    // The quick ACK of the connection's first data (Linux's quick-ACK mode) carries the
    // scaled window: the buffer less the 1000 bytes unread, to the scale's granularity.
    let a = h.out1();
    assert_eq!(a.ack, 2001);
    let shift = h.tcp.info(s).unwrap().window_scale.unwrap().1;
    let offered = u32::from(a.window) << shift;
    assert!(offered > 65535, "{a:?}");
    assert!((1 << 20) - offered <= 1000 + (1 << shift), "{a:?}");
    let mut buf = [0u8; 1000];
    assert_eq!(h.tcp.recv(h.now, s, &mut buf).unwrap(), 1000);
    // The small read sends no pure window update, now or later.
    h.quiet();
    let later = h.advance(Duration::from_secs(1));
    assert!(later.is_empty(), "{later:?}");
}

/// Finding 4: a read that frees less than half the window does not send a pure window
/// update (it would only repeat the ACK with a larger window, Linux waits until the
/// offered window fell to half and can at least double).
#[test]
fn no_window_update_while_most_of_the_window_is_still_offered() {
    let mut h = Harness::new(TcpConfig {
        recv_buffer_len: 64 * 1024,
        ..plain_config()
    });
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000));
    for i in 0..4u32 {
        h.send(h.peer().seq(1001 + i * 1000).ack(iss + 1).data(&[2; 1000]));
    }
    let acks = h.out();
    assert_eq!(acks.last().unwrap().ack, 5001, "{acks:?}");
    let mut buf = [0u8; 4000];
    assert_eq!(h.tcp.recv(h.now, s, &mut buf).unwrap(), 4000);
    h.quiet();
}

/// Finding 4: the receiver's silly window avoidance is exact (RFC 1122 §4.2.3.3, RFC 9293
/// §3.8.6.2.2): the right edge moves only by at least min(RCV.BUFF/2, Eff.snd.MSS), even
/// when the buffer is empty again.
#[test]
fn right_edge_moves_only_by_a_full_segment() {
    let mut h = Harness::new(TcpConfig {
        recv_buffer_len: 8192,
        ..plain_config()
    });
    let (s, iss) = h.passive_open(1000, h.peer().mss(1460));
    h.send(h.peer().seq(1001).ack(iss + 1).data(&[3; 1000]));
    let a = h.wait();
    assert_eq!((a[0].ack, a[0].window), (2001, 7192));
    let mut buf = [0u8; 1000];
    assert_eq!(h.tcp.recv(h.now, s, &mut buf).unwrap(), 1000);
    // The next segment we send still offers the old right edge: 1000 < 1460.
    h.tcp.send(h.now, s, b"reply").unwrap();
    let d = h.out1();
    assert_eq!((d.ack, d.window), (2001, 7192), "{d:?}");
}

/// Found while checking finding 4 against crates/apps/tests/sim_tcp.rs (a 100 Mb/s
/// bottleneck dropping bursts): with every out-of-order range in use, the in-order
/// segment at RCV.NXT was refused too, because it would have needed one more range, so
/// the retransmission of the first hole could never be accepted and the sender timed out.
/// In-order data needs no range.
#[test]
fn in_order_data_is_accepted_when_every_ooo_range_is_in_use() {
    let mut h = Harness::new(TcpConfig {
        max_ooo_ranges: 2,
        delayed_ack: Duration::ZERO,
        ..plain_config()
    });
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000));
    // Holes at 1001.., 3001.., 5001..: ranges 2001..3001 and 4001..5001 are held.
    for seq in [2001u32, 4001] {
        h.send(h.peer().seq(seq).ack(iss + 1).data(&[9; 1000]));
    }
    let _ = h.out();
    // A third range does not fit: dropped (counted), the peer will send it again.
    h.send(h.peer().seq(6001).ack(iss + 1).data(&[9; 1000]));
    let _ = h.out();
    assert_eq!(h.tcp.stats().ooo_dropped, 1);
    // The first byte of the first hole, not reaching the held range: accepted.
    h.send(h.peer().seq(1001).ack(iss + 1).data(&[9; 500]));
    let a = h.out();
    assert_eq!(a.last().unwrap().ack, 1501, "{a:?}");
    h.send(h.peer().seq(1501).ack(iss + 1).data(&[9; 500]));
    let a = h.out();
    assert_eq!(a.last().unwrap().ack, 3001, "{a:?}");
    h.send(h.peer().seq(3001).ack(iss + 1).data(&[9; 1000]));
    let a = h.out();
    assert_eq!(a.last().unwrap().ack, 5001, "{a:?}");
    assert_eq!(h.read_all(s).len(), 4000);
}

/// Finding 2's fix must retract only a probe: the persist timer armed by a small window
/// (SWS avoidance) stays armed when the window widens without first closing, and the
/// ordinary data then in flight is not pulled back by a partial ACK.
#[test]
fn persist_armed_by_a_small_window_does_not_retract_ordinary_data() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000));
    let una = iss + 1;
    h.send(h.peer().seq(1001).ack(una).window(500));
    h.tcp.send(h.now, s, &[4; 3000]).unwrap();
    h.quiet();
    h.send(h.peer().seq(1001).ack(una).window(5000));
    let segs = h.out();
    assert_eq!(segs.len(), 3, "{segs:?}");
    h.send(h.peer().seq(1001).ack(una + 1000).window(5000));
    h.quiet();
    let info = h.tcp.info(s).unwrap();
    assert_eq!(info.bytes_in_flight, 2000);
}

/// Found by the C library's thread test against a slow kernel echo: the peer shrank its
/// window below SND.NXT, and every ACK we sent carried SEQ=SND.NXT, beyond the peer's
/// window, so the peer dropped them (RFC 9293 §3.10.7.4) and kept retransmitting a
/// segment whose ACK never counted: a stall. An ACK must carry a sequence number the
/// peer accepts: the window's right edge (Linux's `tcp_acceptable_seq`).
#[test]
fn acks_stay_inside_a_window_the_peer_shrank() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000).window(10_000));
    h.tcp.send(h.now, s, &[1; 5000]).unwrap();
    assert_eq!(h.out().len(), 5);
    let una = iss + 1;
    // The peer takes the first 1000 bytes and shrinks its window to 1000 more: its
    // right edge (una + 2000) is now below our SND.NXT (una + 5000).
    h.send(h.peer().seq(1001).ack(una + 1000).window(1000));
    let _ = h.out();
    // The peer sends data; our ACK of it must sit at the edge, not at SND.NXT.
    h.send(
        h.peer()
            .seq(1001)
            .ack(una + 1000)
            .window(1000)
            .data(&[7; 100]),
    );
    let ack = h
        .wait()
        .into_iter()
        .find(|g| g.len() == 0 && g.has(TcpFlags::ACK))
        .expect("an ACK of the peer's data");
    assert_eq!(ack.repr().ack.0, 1101);
    assert_eq!(ack.repr().seq.0, una + 2000, "SEQ at the peer's right edge");
}
