//! RST and SYN handling in every state with the RFC 5961 hardening, ACK validity, the
//! challenge-ACK rate limit, and PAWS (RFC 7323 §5).

use ulnet_wire::TcpFlags;

use super::harness::*;
use crate::tcp::{ConnError, Shutdown, State, TcpConfig};
use crate::time::Duration;

fn established_with(cfg: TcpConfig) -> (Harness, crate::tcp::SocketHandle, u32) {
    let mut h = Harness::new(cfg);
    let (s, iss) = h.passive_open(1000, h.peer());
    (h, s, iss + 1)
}

fn established() -> (Harness, crate::tcp::SocketHandle, u32) {
    established_with(plain_config())
}

/// Drives the connection into `state` (via the peer's and our FINs).
fn into_state(state: State) -> (Harness, crate::tcp::SocketHandle, u32, u32) {
    let (mut h, s, nxt) = established();
    let mut peer_nxt = 1001;
    match state {
        State::Established => {}
        State::FinWait1 => {
            h.tcp.shutdown(h.now, s, Shutdown::Write).unwrap();
            h.out1();
        }
        State::FinWait2 => {
            h.tcp.shutdown(h.now, s, Shutdown::Write).unwrap();
            h.out1();
            h.send(h.peer().seq(1001).ack(nxt + 1));
        }
        State::CloseWait => {
            h.send(
                h.peer()
                    .seq(1001)
                    .ack(nxt)
                    .flags(TcpFlags::FIN | TcpFlags::ACK),
            );
            h.out1();
            peer_nxt = 1002;
        }
        State::Closing => {
            h.tcp.shutdown(h.now, s, Shutdown::Write).unwrap();
            h.out1();
            h.send(
                h.peer()
                    .seq(1001)
                    .ack(nxt)
                    .flags(TcpFlags::FIN | TcpFlags::ACK),
            );
            h.out1();
            peer_nxt = 1002;
        }
        State::LastAck => {
            h.send(
                h.peer()
                    .seq(1001)
                    .ack(nxt)
                    .flags(TcpFlags::FIN | TcpFlags::ACK),
            );
            h.out1();
            h.tcp.shutdown(h.now, s, Shutdown::Write).unwrap();
            h.out1();
            peer_nxt = 1002;
        }
        _ => unreachable!(),
    }
    assert_eq!(h.tcp.state(s).unwrap(), state);
    (h, s, nxt, peer_nxt)
}

const STATES: [State; 6] = [
    State::Established,
    State::FinWait1,
    State::FinWait2,
    State::CloseWait,
    State::Closing,
    State::LastAck,
];

#[test]
fn exact_rst_resets_in_every_synchronized_state() {
    for st in STATES {
        let (mut h, s, _, peer_nxt) = into_state(st);
        h.send(h.peer().seq(peer_nxt).flags(TcpFlags::RST));
        h.quiet();
        assert_eq!(h.tcp.state(s).unwrap(), State::Closed, "{st}");
        let want = match st {
            State::Closing | State::LastAck => None,
            _ => Some(ConnError::Reset),
        };
        assert_eq!(h.tcp.readiness(s).unwrap().error, want, "{st}");
    }
}

#[test]
fn in_window_rst_gets_challenge_ack_in_every_state() {
    for st in STATES {
        let (mut h, s, nxt, peer_nxt) = into_state(st);
        h.send(h.peer().seq(peer_nxt + 100).flags(TcpFlags::RST));
        let c = h.out1();
        assert_eq!(c.flags, TcpFlags::ACK, "{st}");
        assert_eq!(c.ack, peer_nxt, "{st}");
        let _ = nxt;
        assert_eq!(h.tcp.state(s).unwrap(), st);
        // Out of window: silently dropped.
        h.send(
            h.peer()
                .seq(peer_nxt.wrapping_add(1 << 20))
                .flags(TcpFlags::RST),
        );
        h.quiet();
        assert_eq!(h.tcp.state(s).unwrap(), st);
    }
}

#[test]
fn syn_in_synchronized_state_gets_challenge_ack() {
    for st in STATES {
        let (mut h, s, _, peer_nxt) = into_state(st);
        // In window and out of window alike (RFC 5961 §4.2).
        for seq in [peer_nxt + 5, peer_nxt.wrapping_sub(50_000)] {
            h.send(h.peer().seq(seq).flags(TcpFlags::SYN));
            let c = h.out1();
            assert_eq!(c.flags, TcpFlags::ACK, "{st}");
            assert_eq!(c.ack, peer_nxt, "{st}");
            assert_eq!(h.tcp.state(s).unwrap(), st);
        }
    }
}

#[test]
fn rst_in_syn_received_returns_to_listen() {
    let mut h = Harness::new(plain_config());
    let l = h.listen();
    h.send(h.peer().seq(7).flags(TcpFlags::SYN));
    h.out1();
    assert_eq!(h.tcp.connection_count(), 1);
    h.send(h.peer().seq(8).flags(TcpFlags::RST));
    assert_eq!(h.tcp.connection_count(), 0);
    assert_eq!(h.tcp.accept(h.now, l).unwrap(), None);
    // The listener still works.
    h.send(h.peer().seq(70).flags(TcpFlags::SYN));
    assert!(h.out1().has(TcpFlags::SYN));
}

#[test]
fn bad_ack_in_syn_received_gets_rst() {
    let mut h = Harness::new(plain_config());
    h.listen();
    h.send(h.peer().seq(7).flags(TcpFlags::SYN));
    let sa = h.out1();
    h.send(h.peer().seq(8).ack(sa.seq + 10));
    let r = h.out1();
    assert_eq!((r.flags, r.seq), (TcpFlags::RST, sa.seq + 10));
}

#[test]
fn ack_validity_rfc5961_section5() {
    let (mut h, s, nxt) = established();
    h.tcp.send(h.now, s, &[1; 100]).unwrap();
    h.out1();
    // ACK of data never sent: challenge ACK, segment (and its data) dropped.
    h.send(h.peer().seq(1001).ack(nxt + 5000).data(b"zz"));
    let c = h.out1();
    assert_eq!((c.seq, c.ack), (nxt + 100, 1001));
    assert_eq!(h.tcp.info(s).unwrap().recv_queue_len, 0);
    // An ACK far below SND.UNA - MAX.SND.WND: also challenged.
    h.send(
        h.peer()
            .seq(1001)
            .ack(nxt.wrapping_sub(200_000))
            .data(b"zz"),
    );
    assert_eq!(h.out1().ack, 1001);
    assert_eq!(h.tcp.info(s).unwrap().recv_queue_len, 0);
    // A merely old ACK (within the window) is fine: data accepted.
    h.send(h.peer().seq(1001).ack(nxt).data(b"ok"));
    let _ = h.advance(Duration::from_millis(50));
    assert_eq!(h.read_all(s), b"ok");
    assert!(h.tcp.stats().dropped_bad_ack >= 2);
}

#[test]
fn challenge_acks_are_rate_limited() {
    let mut cfg = plain_config();
    cfg.challenge_ack_limit = 3;
    let (mut h, _s, _) = established_with(cfg);
    for _ in 0..10 {
        h.send(h.peer().seq(1500).flags(TcpFlags::RST));
    }
    assert_eq!(h.out().len(), 3);
    assert_eq!(h.tcp.stats().challenge_acks_suppressed, 7);
    h.advance(Duration::from_secs(1));
    h.send(h.peer().seq(1500).flags(TcpFlags::RST));
    assert_eq!(h.out().len(), 1);
}

#[test]
fn out_of_window_segment_gets_ack() {
    let (mut h, s, nxt) = established();
    h.send(h.peer().seq(1001 + 100_000).ack(nxt).data(b"far"));
    let a = h.out1();
    assert_eq!((a.seq, a.ack), (nxt, 1001));
    // An old duplicate, too.
    h.send(h.peer().seq(900).ack(nxt).data(b"old"));
    assert_eq!(h.out1().ack, 1001);
    assert_eq!(h.tcp.info(s).unwrap().recv_queue_len, 0);
}

#[test]
fn segment_without_ack_dropped() {
    let (mut h, s, _) = established();
    h.send(h.peer().seq(1001).data(b"noack"));
    h.quiet();
    assert_eq!(h.tcp.info(s).unwrap().recv_queue_len, 0);
}

fn ts_config() -> TcpConfig {
    TcpConfig {
        timestamps: true,
        ..plain_config()
    }
}

#[test]
fn paws_rejects_old_timestamps() {
    let mut h = Harness::new(ts_config());
    let (s, iss) = h.passive_open(1000, h.peer().ts(1000, 0));
    assert!(h.tcp.info(s).unwrap().timestamps);
    let nxt = iss + 1;
    h.send(h.peer().seq(1001).ack(nxt).data(b"new").ts(2000, 0));
    let _ = h.advance(Duration::from_millis(50));
    assert_eq!(h.read_all(s), b"new");
    // An old duplicate with an older timestamp but a valid sequence number: PAWS drops it
    // and acknowledges.
    h.send(h.peer().seq(1004).ack(nxt).data(b"old").ts(1500, 0));
    let a = h.out1();
    assert_eq!(a.ack, 1004);
    assert_eq!(a.options.timestamp.unwrap().tsecr, 2000);
    assert_eq!(h.tcp.info(s).unwrap().recv_queue_len, 0);
    assert_eq!(h.tcp.stats().dropped_paws, 1);
    // Timestamps wrap: 2^32 - 10 is before 5.
    h.send(h.peer().seq(1004).ack(nxt).data(b"x").ts(u32::MAX - 10, 0));
    h.out1();
    assert_eq!(h.tcp.stats().dropped_paws, 2);
    // A segment without timestamps on a timestamped connection is dropped silently.
    h.send(h.peer().seq(1004).ack(nxt).data(b"y"));
    h.quiet();
    // A RST is exempt from PAWS (and exact → reset).
    h.send(h.peer().seq(1004).flags(TcpFlags::RST).ts(1, 0));
    assert_eq!(h.tcp.state(s).unwrap(), State::Closed);
}

#[test]
fn timestamps_echo_ts_recent() {
    let mut h = Harness::new(ts_config());
    let (s, iss) = h.passive_open(1000, h.peer().ts(50, 0));
    h.tcp.send(h.now, s, b"abc").unwrap();
    let d = h.out1();
    assert_eq!(d.options.timestamp.unwrap().tsecr, 50);
    h.send(h.peer().seq(1001).ack(iss + 4).ts(60, d.tsval().unwrap()));
    h.tcp.send(h.now, s, b"def").unwrap();
    assert_eq!(h.out1().options.timestamp.unwrap().tsecr, 60);
}

/// Issue 12, defect 1 (RFC 5961 §5, RFC 7323 §4.3): a blind segment with an unacceptable
/// ACK and a TSval far ahead gets a challenge ACK and cannot move TS.Recent; the real peer,
/// whose clock is far behind the attacker's value, is still accepted afterwards.
#[test]
fn unacceptable_ack_leaves_ts_recent_alone() {
    let mut h = Harness::new(ts_config());
    let (s, iss) = h.passive_open(1000, h.peer().ts(1000, 0));
    let nxt = iss + 1;
    h.send(h.peer().seq(1001).ack(nxt + 100_000).ts(2_000_000_000, 0));
    let c = h.out1();
    assert_eq!(c.ack, 1001);
    assert_eq!(
        c.options.timestamp.unwrap().tsecr,
        1000,
        "challenge ACK echoes the real peer"
    );
    assert_eq!(h.tcp.stats().dropped_bad_ack, 1);
    h.send(h.peer().seq(1001).ack(nxt).data(b"real").ts(1010, 0));
    let _ = h.advance(Duration::from_millis(50));
    assert_eq!(h.read_all(s), b"real");
    assert_eq!(h.tcp.stats().dropped_paws, 0);
    assert_eq!(h.tcp.state(s).unwrap(), State::Established);
}

/// Issue 12, defect 2 (RFC 9293 §3.10.7.4, RFC 5961 §3.2): a RST beyond the right edge
/// of the window actually advertised is dropped silently, even where the receive buffer
/// has room (after a passive open the SYN-ACK offered at most 65535 bytes, unscaled).
#[test]
fn rst_beyond_advertised_edge_dropped_silently() {
    let mut cfg = plain_config();
    cfg.window_scaling = true;
    cfg.recv_buffer_len = 256 * 1024;
    let mut h = Harness::new(cfg);
    let (s, _) = h.passive_open(1000, h.peer().wscale(7));
    let edge = 1001 + 65535;
    for seq in [edge, edge + 50_000] {
        h.send(h.peer().seq(seq).flags(TcpFlags::RST));
        h.quiet();
        assert_eq!(h.tcp.state(s).unwrap(), State::Established);
    }
    assert_eq!(h.tcp.stats().dropped_rst, 2);
    assert_eq!(h.tcp.stats().challenge_acks, 0);
    // Just inside the edge: a challenge ACK as before.
    h.send(h.peer().seq(edge - 1).flags(TcpFlags::RST));
    assert_eq!(h.out1().ack, 1001);
    assert_eq!(h.tcp.state(s).unwrap(), State::Established);
}

/// Issue 12, defect 4 (RFC 7323 §3.2): with timestamps negotiated, the RSTs a connection
/// sends carry the option (TS val from our clock, TS ecr = TS.Recent): on abort, and on
/// data arriving after close. Without timestamps they carry none.
#[test]
fn connection_rsts_carry_timestamps() {
    // Abort.
    let mut h = Harness::new(ts_config());
    let (s, _) = h.passive_open(1000, h.peer().ts(1000, 0));
    h.tcp.abort(h.now, s).unwrap();
    let r = h.out1();
    assert!(r.has(TcpFlags::RST));
    let ts = r.options.timestamp.expect("RST carries TS");
    assert_eq!(ts.tsecr, 1000);
    // Data after close (RFC 1122 §4.2.2.13).
    let mut h = Harness::new(ts_config());
    let (s, iss) = h.passive_open(1000, h.peer().ts(1000, 0));
    h.tcp.close(h.now, s).unwrap();
    assert!(h.out1().has(TcpFlags::FIN));
    h.send(h.peer().seq(1001).ack(iss + 2).data(b"late").ts(1100, 0));
    let r = h.out1();
    assert!(r.has(TcpFlags::RST));
    assert_eq!(r.options.timestamp.map(|t| t.tsecr), Some(1100));
    // No timestamps negotiated: none on the RST.
    let (mut h, s, _) = established();
    h.tcp.abort(h.now, s).unwrap();
    let r = h.out1();
    assert!(r.has(TcpFlags::RST));
    assert_eq!(r.options.timestamp, None);
}
