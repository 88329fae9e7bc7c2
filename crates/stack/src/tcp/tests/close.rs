//! Closing: active, passive, simultaneous, half-close, TIME-WAIT (records, reuse,
//! RFC 1337), data after close.

use ulnet_wire::TcpFlags;

use super::harness::*;
use crate::tcp::{SendError, Shutdown, SocketError, State};
use crate::time::Duration;

/// ESTABLISHED with peer ISN 1000 (next peer seq 1001). Returns (h, socket, our next seq).
fn established() -> (Harness, crate::tcp::SocketHandle, u32) {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer());
    (h, s, iss + 1)
}

#[test]
fn active_close_through_time_wait() {
    let (mut h, s, nxt) = established();
    h.tcp.shutdown(h.now, s, Shutdown::Write).unwrap();
    let fin = h.out1();
    assert_eq!(fin.flags, TcpFlags::FIN | TcpFlags::ACK);
    assert_eq!((fin.seq, fin.ack), (nxt, 1001));
    assert_eq!(h.tcp.state(s).unwrap(), State::FinWait1);
    assert_eq!(h.tcp.send(h.now, s, b"x"), Err(SendError::Closed));
    h.send(h.peer().seq(1001).ack(nxt + 1));
    assert_eq!(h.tcp.state(s).unwrap(), State::FinWait2);
    h.quiet();
    // Half-closed: the peer may still send.
    h.send(h.peer().seq(1001).ack(nxt + 1).data(b"late"));
    let _ = h.advance(Duration::from_millis(50));
    assert_eq!(h.read_all(s), b"late");
    h.send(
        h.peer()
            .seq(1005)
            .ack(nxt + 1)
            .flags(TcpFlags::FIN | TcpFlags::ACK),
    );
    let ack = h.out1();
    assert_eq!((ack.flags, ack.ack), (TcpFlags::ACK, 1006));
    assert_eq!(h.tcp.state(s).unwrap(), State::TimeWait);
    let mut buf = [0u8; 8];
    assert_eq!(h.tcp.recv(h.now, s, &mut buf), Ok(0));
    // The FIN again (our ACK was lost): acknowledged again.
    h.send(
        h.peer()
            .seq(1005)
            .ack(nxt + 1)
            .flags(TcpFlags::FIN | TcpFlags::ACK),
    );
    assert_eq!(h.out1().ack, 1006);
    // Closing the handle in TIME-WAIT leaves a compact record.
    h.tcp.close(h.now, s).unwrap();
    assert_eq!(h.tcp.state(s), Err(SocketError::InvalidHandle));
    assert_eq!(h.tcp.connection_count(), 0);
    assert_eq!(h.tcp.time_wait_count(), 1);
    h.send(
        h.peer()
            .seq(1005)
            .ack(nxt + 1)
            .flags(TcpFlags::FIN | TcpFlags::ACK),
    );
    assert_eq!(h.out1().ack, 1006);
    // 2*MSL later it is gone and the port answers RST again.
    h.advance(Duration::from_secs(61));
    assert_eq!(h.tcp.time_wait_count(), 0);
    h.send(h.peer().seq(1006).ack(nxt + 1));
    assert!(h.out1().has(TcpFlags::RST));
}

#[test]
fn full_socket_time_wait_expires_after_2msl() {
    let mut cfg = plain_config();
    cfg.msl = Duration::from_secs(2);
    let mut h = Harness::new(cfg);
    let (s, iss) = h.passive_open(1000, h.peer());
    h.tcp.shutdown(h.now, s, Shutdown::Write).unwrap();
    h.out1();
    h.send(
        h.peer()
            .seq(1001)
            .ack(iss + 2)
            .flags(TcpFlags::FIN | TcpFlags::ACK),
    );
    h.out1();
    assert_eq!(h.tcp.state(s).unwrap(), State::TimeWait);
    h.advance(Duration::from_millis(3999));
    assert_eq!(h.tcp.state(s).unwrap(), State::TimeWait);
    h.advance(Duration::from_millis(2));
    assert_eq!(h.tcp.state(s).unwrap(), State::Closed);
}

#[test]
fn passive_close() {
    let (mut h, s, nxt) = established();
    h.send(
        h.peer()
            .seq(1001)
            .ack(nxt)
            .flags(TcpFlags::FIN | TcpFlags::ACK),
    );
    let ack = h.out1();
    assert_eq!(ack.ack, 1002);
    assert_eq!(h.tcp.state(s).unwrap(), State::CloseWait);
    let mut buf = [0u8; 4];
    assert_eq!(h.tcp.recv(h.now, s, &mut buf), Ok(0));
    assert!(h.tcp.readiness(s).unwrap().read_closed);
    // We can still send in CLOSE-WAIT.
    h.tcp.send(h.now, s, b"bye").unwrap();
    assert_eq!(h.out1().payload, b"bye");
    h.tcp.close(h.now, s).unwrap();
    let fin = h.out1();
    assert_eq!(fin.flags, TcpFlags::FIN | TcpFlags::ACK);
    assert_eq!(fin.seq, nxt + 3);
    assert_eq!(h.tcp.connection_count(), 1);
    h.send(h.peer().seq(1002).ack(nxt + 4));
    // LAST-ACK → CLOSED, and the orphan is freed.
    assert_eq!(h.tcp.connection_count(), 0);
    assert_eq!(h.tcp.time_wait_count(), 0);
}

#[test]
fn simultaneous_close_goes_through_closing() {
    let (mut h, s, nxt) = established();
    h.tcp.shutdown(h.now, s, Shutdown::Write).unwrap();
    let fin = h.out1();
    // The peer's FIN crosses ours: it does not acknowledge our FIN.
    h.send(
        h.peer()
            .seq(1001)
            .ack(nxt)
            .flags(TcpFlags::FIN | TcpFlags::ACK),
    );
    assert_eq!(h.tcp.state(s).unwrap(), State::Closing);
    assert_eq!(h.out1().ack, 1002);
    h.send(h.peer().seq(1002).ack(fin.seq + 1));
    assert_eq!(h.tcp.state(s).unwrap(), State::TimeWait);
}

#[test]
fn fin_with_data_and_out_of_order_fin() {
    let (mut h, s, nxt) = established();
    // FIN arrives first, beyond a hole; nothing is closed until the hole fills.
    h.send(
        h.peer()
            .seq(1004)
            .ack(nxt)
            .data(b"def")
            .flags(TcpFlags::FIN | TcpFlags::ACK),
    );
    let dup = h.out1();
    assert_eq!(dup.ack, 1001);
    assert_eq!(h.tcp.state(s).unwrap(), State::Established);
    h.send(h.peer().seq(1001).ack(nxt).data(b"abc"));
    let ack = h.out1();
    assert_eq!(ack.ack, 1008);
    assert_eq!(h.tcp.state(s).unwrap(), State::CloseWait);
    assert_eq!(h.read_all(s), b"abcdef");
}

#[test]
fn shutdown_read_discards_and_acks() {
    let (mut h, s, nxt) = established();
    h.tcp.shutdown(h.now, s, Shutdown::Read).unwrap();
    h.send(h.peer().seq(1001).ack(nxt).data(&[1; 100]));
    let _ = h.advance(Duration::from_millis(50));
    let mut buf = [0u8; 10];
    assert_eq!(h.tcp.recv(h.now, s, &mut buf), Ok(0));
    assert!(h.tcp.readiness(s).unwrap().readable);
    assert_eq!(h.tcp.info(s).unwrap().recv_queue_len, 0);
}

#[test]
fn close_with_unread_data_resets() {
    let (mut h, s, nxt) = established();
    h.send(h.peer().seq(1001).ack(nxt).data(b"unread"));
    let _ = h.out();
    h.tcp.close(h.now, s).unwrap();
    let rst = h.out1();
    assert!(rst.has(TcpFlags::RST));
    assert_eq!(rst.seq, nxt);
    assert_eq!(h.tcp.connection_count(), 0);
}

#[test]
fn data_after_close_gets_rst() {
    let (mut h, s, nxt) = established();
    h.tcp.close(h.now, s).unwrap();
    let fin = h.out1();
    assert!(fin.has(TcpFlags::FIN));
    h.send(h.peer().seq(1001).ack(nxt + 1).data(b"too late"));
    let rst = h.out1();
    assert!(rst.has(TcpFlags::RST));
    assert_eq!(h.tcp.connection_count(), 0);
}

#[test]
fn orphaned_fin_wait2_times_out() {
    let (mut h, s, nxt) = established();
    h.tcp.close(h.now, s).unwrap();
    h.out1();
    h.send(h.peer().seq(1001).ack(nxt + 1));
    assert_eq!(h.tcp.connection_count(), 1);
    h.advance(Duration::from_secs(61));
    assert_eq!(h.tcp.connection_count(), 0);
}

#[test]
fn abort_sends_rst_and_invalidates() {
    let (mut h, s, nxt) = established();
    h.tcp.abort(h.now, s).unwrap();
    let rst = h.out1();
    assert!(rst.has(TcpFlags::RST));
    assert_eq!(rst.seq, nxt);
    assert_eq!(h.tcp.abort(h.now, s), Err(SocketError::InvalidHandle));
    assert_eq!(h.tcp.send(h.now, s, b"x"), Err(SendError::InvalidHandle));
}

#[test]
fn time_wait_rst_ignored_rfc1337() {
    let (mut h, s, nxt) = established();
    h.tcp.close(h.now, s).unwrap();
    h.out1();
    h.send(
        h.peer()
            .seq(1001)
            .ack(nxt + 1)
            .flags(TcpFlags::FIN | TcpFlags::ACK),
    );
    h.out1();
    assert_eq!(h.tcp.time_wait_count(), 1);
    h.send(h.peer().seq(1002).flags(TcpFlags::RST));
    h.quiet();
    assert_eq!(h.tcp.time_wait_count(), 1);
    h.send(
        h.peer()
            .seq(1002)
            .flags(TcpFlags::RST | TcpFlags::ACK)
            .ack(nxt + 1),
    );
    h.quiet();
    assert_eq!(h.tcp.time_wait_count(), 1);
}

#[test]
fn time_wait_full_socket_ignores_rst() {
    let (mut h, s, nxt) = established();
    h.tcp.shutdown(h.now, s, Shutdown::Write).unwrap();
    h.out1();
    h.send(
        h.peer()
            .seq(1001)
            .ack(nxt + 1)
            .flags(TcpFlags::FIN | TcpFlags::ACK),
    );
    h.out1();
    h.send(h.peer().seq(1002).flags(TcpFlags::RST));
    assert_eq!(h.tcp.state(s).unwrap(), State::TimeWait);
}

#[test]
fn time_wait_reuse_by_newer_syn() {
    let (mut h, s, nxt) = established();
    h.tcp.close(h.now, s).unwrap();
    h.out1();
    h.send(
        h.peer()
            .seq(1001)
            .ack(nxt + 1)
            .flags(TcpFlags::FIN | TcpFlags::ACK),
    );
    h.out1();
    assert_eq!(h.tcp.time_wait_count(), 1);
    // An old SYN (below RCV.NXT) gets the TIME-WAIT ACK, not a new connection.
    h.send(h.peer().seq(500).flags(TcpFlags::SYN));
    let a = h.out1();
    assert_eq!(a.flags, TcpFlags::ACK);
    assert_eq!(a.ack, 1002);
    // A SYN above RCV.NXT opens a new incarnation, whose ISS is above the old SND.NXT.
    h.send(h.peer().seq(90_000).flags(TcpFlags::SYN));
    let sa = h.out1();
    assert_eq!(sa.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(sa.ack, 90_001);
    assert!(ulnet_wire::SeqNumber(sa.seq) > ulnet_wire::SeqNumber(nxt + 1));
    assert_eq!(h.tcp.time_wait_count(), 0);
    assert_eq!(h.tcp.stats().time_wait_reused, 1);
}

#[test]
fn time_wait_reuse_with_timestamps() {
    let mut cfg = plain_config();
    cfg.timestamps = true;
    let mut h = Harness::new(cfg);
    let (s, iss) = h.passive_open(1000, h.peer().ts(100, 0));
    h.tcp.close(h.now, s).unwrap();
    let fin = h.out1();
    let tsecr = fin.tsval().unwrap();
    h.send(
        h.peer()
            .seq(1001)
            .ack(iss + 2)
            .flags(TcpFlags::FIN | TcpFlags::ACK)
            .ts(200, tsecr),
    );
    h.out1();
    assert_eq!(h.tcp.time_wait_count(), 1);
    // Lower sequence number but a newer timestamp: accepted (RFC 6191).
    h.send(h.peer().seq(10).flags(TcpFlags::SYN).ts(300, 0));
    let sa = h.out1();
    assert_eq!(sa.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(sa.ack, 11);
}

#[test]
fn time_wait_full_socket_reused_by_newer_syn() {
    let (mut h, s, nxt) = established();
    h.tcp.shutdown(h.now, s, Shutdown::Write).unwrap();
    h.out1();
    h.send(
        h.peer()
            .seq(1001)
            .ack(nxt + 1)
            .flags(TcpFlags::FIN | TcpFlags::ACK),
    );
    h.out1();
    assert_eq!(h.tcp.state(s).unwrap(), State::TimeWait);
    h.send(h.peer().seq(50_000).flags(TcpFlags::SYN));
    let sa = h.out1();
    assert_eq!(sa.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(sa.ack, 50_001);
    // The application's old handle now reports the old connection as closed.
    assert_eq!(h.tcp.state(s).unwrap(), State::Closed);
}

/// Issue 12, defect 3 (RFC 9293 §3.10.7.4, eighth, TIME-WAIT STATE): a FIN at RCV.NXT
/// in TIME-WAIT is acknowledged and restarts the 2 MSL timeout, for the full socket and
/// for the compact record alike.
#[test]
fn time_wait_fin_at_rcv_nxt_acked_and_restarts_2msl() {
    let mut cfg = plain_config();
    cfg.msl = Duration::from_secs(2);
    for compact in [false, true] {
        let mut h = Harness::new(cfg.clone());
        let (s, iss) = h.passive_open(1000, h.peer());
        let nxt = iss + 1;
        h.tcp.shutdown(h.now, s, Shutdown::Write).unwrap();
        h.out1();
        let fin = |h: &Harness, seq: u32| {
            h.peer()
                .seq(seq)
                .ack(nxt + 1)
                .flags(TcpFlags::FIN | TcpFlags::ACK)
        };
        h.send(fin(&h, 1001));
        assert_eq!(h.out1().ack, 1002);
        assert_eq!(h.tcp.state(s).unwrap(), State::TimeWait);
        if compact {
            h.tcp.close(h.now, s).unwrap();
            assert_eq!(h.tcp.time_wait_count(), 1);
        }
        h.advance(Duration::from_secs(3));
        h.send(fin(&h, 1002));
        let a = h.out1();
        assert_eq!(
            (a.flags, a.seq, a.ack),
            (TcpFlags::ACK, nxt + 1, 1002),
            "{compact}"
        );
        // 2*MSL after entering TIME-WAIT, but not after the restart: still there.
        h.advance(Duration::from_secs(3));
        if compact {
            assert_eq!(h.tcp.time_wait_count(), 1);
        } else {
            assert_eq!(h.tcp.state(s).unwrap(), State::TimeWait);
        }
        h.advance(Duration::from_millis(1001));
        if compact {
            assert_eq!(h.tcp.time_wait_count(), 0);
        } else {
            assert_eq!(h.tcp.state(s).unwrap(), State::Closed);
        }
    }
}

/// Issue 12, defect 5: a bare FIN at RCV.NXT is taken with a zero receive window (it needs
/// no buffer; RFC 9293 §3.10.7.4's zero-window allowance, as Linux extends it); data, or
/// a FIN behind data, is still refused while the window is closed.
#[test]
fn fin_at_rcv_nxt_taken_with_zero_window() {
    let mut cfg = plain_config();
    cfg.recv_buffer_len = 1000;
    let mut h = Harness::new(cfg);
    let (s, iss) = h.passive_open(1000, h.peer());
    let nxt = iss + 1;
    h.send(h.peer().seq(1001).ack(nxt).data(&[7; 1000]));
    let _ = h.advance(Duration::from_millis(500));
    assert_eq!(h.tcp.info(s).unwrap().recv_queue_len, 1000);
    // A FIN behind data at zero window: refused (ACK of what we have).
    h.send(
        h.peer()
            .seq(2001)
            .ack(nxt)
            .data(b"x")
            .flags(TcpFlags::FIN | TcpFlags::ACK),
    );
    let a = h.out1();
    assert_eq!((a.ack, a.window), (2001, 0));
    assert_eq!(h.tcp.state(s).unwrap(), State::Established);
    // The bare FIN: taken.
    h.send(
        h.peer()
            .seq(2001)
            .ack(nxt)
            .flags(TcpFlags::FIN | TcpFlags::ACK),
    );
    let a = h.out1();
    assert_eq!((a.flags, a.ack, a.window), (TcpFlags::ACK, 2002, 0));
    assert_eq!(h.tcp.state(s).unwrap(), State::CloseWait);
    assert_eq!(h.read_all(s).len(), 1000);
}

/// Readiness as Linux's `tcp_poll` reports it: the peer's FIN is end of input
/// (`read_closed`) but no hang-up; once our side is shut too, both directions are
/// (`hung_up`, EPOLLHUP); a read shutdown counts as end of input.
#[test]
fn hang_up_needs_both_directions_shut() {
    let (mut h, s, nxt) = established();
    let r = h.tcp.readiness(s).unwrap();
    assert!(!r.read_closed && !r.write_closed && !r.hung_up);
    h.send(
        h.peer()
            .seq(1001)
            .ack(nxt)
            .flags(TcpFlags::FIN | TcpFlags::ACK),
    );
    let _ = h.out();
    let r = h.tcp.readiness(s).unwrap();
    assert!(r.read_closed && !r.write_closed && !r.hung_up, "{r:?}");
    h.tcp.shutdown(h.now, s, Shutdown::Write).unwrap();
    let r = h.tcp.readiness(s).unwrap();
    assert!(r.read_closed && r.write_closed && r.hung_up, "{r:?}");

    // Both ways shut by the application, with the peer still open.
    let (mut h, s, _) = established();
    h.tcp.shutdown(h.now, s, Shutdown::Read).unwrap();
    let r = h.tcp.readiness(s).unwrap();
    assert!(r.read_closed && !r.hung_up, "{r:?}");
    h.tcp.shutdown(h.now, s, Shutdown::Both).unwrap();
    let r = h.tcp.readiness(s).unwrap();
    assert!(r.write_closed && r.hung_up, "{r:?}");
}
