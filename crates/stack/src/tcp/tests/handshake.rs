//! Opening: passive, active, simultaneous; SYN retransmission; refused connections.

use ulnet_wire::TcpFlags;

use super::harness::*;
use crate::tcp::{ConnError, RecvError, State};
use crate::time::Duration;

#[test]
fn passive_open_and_data_both_ways() {
    let mut h = Harness::new(plain_config());
    let syn = h.peer().mss(1460);
    let (s, iss) = h.passive_open(1000, syn);
    // Peer sends data; we acknowledge at once (quick-ACK mode at a connection's start,
    // as Linux).
    h.send(h.peer().seq(1001).ack(iss + 1).data(b"hello"));
    let ack = h.out1();
    assert_eq!((ack.seq, ack.ack), (iss + 1, 1006));
    assert_eq!(h.read_all(s), b"hello");
    // We send data.
    assert_eq!(h.tcp.send(h.now, s, b"world").unwrap(), 5);
    let d = h.out1();
    assert_eq!(d.payload, b"world");
    assert_eq!((d.seq, d.ack), (iss + 1, 1006));
    assert!(d.has(TcpFlags::ACK | TcpFlags::PSH));
}

#[test]
fn active_open() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.active_open(5000, h.peer().mss(1000));
    assert_eq!(h.tcp.info(s).unwrap().snd_mss, 1000);
    h.tcp.send(h.now, s, &[7u8; 2500]).unwrap();
    let segs = h.out();
    assert_eq!(
        segs.iter().map(|x| x.payload.len()).collect::<Vec<_>>(),
        vec![1000, 1000, 500]
    );
    assert_eq!(segs[0].seq, iss + 1);
    assert_eq!(segs[2].seq, iss + 2001);
}

#[test]
fn syn_retransmission_backs_off_then_times_out() {
    let mut cfg = plain_config();
    cfg.syn_retries = 3;
    let mut h = Harness::new(cfg);
    let s = h.tcp.connect(h.now, h.local, h.remote).unwrap();
    let syn = h.out1();
    for secs in [1, 2, 4] {
        assert!(h.advance(Duration::from_millis(secs * 1000 - 1)).is_empty());
        let got = h.advance(Duration::from_millis(1));
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].seq, syn.seq);
        assert!(got[0].has(TcpFlags::SYN));
    }
    let info = h.tcp.info(s).unwrap();
    assert_eq!(info.backoff, 3);
    assert_eq!(info.rto, Duration::from_secs(8));
    assert_eq!(h.tcp.state(s).unwrap(), State::SynSent);
    let got = h.advance(Duration::from_secs(20));
    assert!(got.is_empty());
    assert_eq!(h.tcp.state(s).unwrap(), State::Closed);
    let mut buf = [0u8; 4];
    assert_eq!(h.tcp.recv(h.now, s, &mut buf), Err(RecvError::TimedOut));
}

#[test]
fn syn_retransmission_intervals_double() {
    let mut h = Harness::new(plain_config());
    h.tcp.connect(h.now, h.local, h.remote).unwrap();
    h.out1();
    let mut last = h.now;
    let mut gaps = Vec::new();
    for _ in 0..3 {
        let t = h.tcp.poll_at().unwrap();
        gaps.push(t - last);
        h.now = t;
        let got = h.out();
        assert_eq!(got.len(), 1);
        last = t;
    }
    assert_eq!(
        gaps,
        vec![
            Duration::from_secs(1),
            Duration::from_secs(2),
            Duration::from_secs(4)
        ]
    );
}

#[test]
fn connection_refused_by_rst() {
    let mut h = Harness::new(plain_config());
    let s = h.tcp.connect(h.now, h.local, h.remote).unwrap();
    let syn = h.out1();
    // RST without ACK in SYN-SENT is ignored (RFC 5961 §3.2 / RFC 9293).
    h.send(h.peer().seq(0).flags(TcpFlags::RST));
    h.quiet();
    assert_eq!(h.tcp.state(s).unwrap(), State::SynSent);
    // RST with a wrong ACK: answered by nothing (RST is never answered), ignored.
    h.send(h.peer().seq(0).flags(TcpFlags::RST).ack(syn.seq + 5));
    h.quiet();
    assert_eq!(h.tcp.state(s).unwrap(), State::SynSent);
    h.send(h.peer().seq(0).flags(TcpFlags::RST).ack(syn.seq + 1));
    assert_eq!(h.tcp.state(s).unwrap(), State::Closed);
    assert_eq!(h.tcp.readiness(s).unwrap().error, Some(ConnError::Refused));
}

#[test]
fn bad_ack_in_syn_sent_gets_rst() {
    let mut h = Harness::new(plain_config());
    let s = h.tcp.connect(h.now, h.local, h.remote).unwrap();
    let syn = h.out1();
    h.send(h.peer().seq(77).flags(TcpFlags::SYN).ack(syn.seq + 100));
    let r = h.out1();
    assert_eq!(r.flags, TcpFlags::RST);
    assert_eq!(r.seq, syn.seq + 100);
    assert_eq!(h.tcp.state(s).unwrap(), State::SynSent);
}

#[test]
fn simultaneous_open() {
    let mut h = Harness::new(plain_config());
    let s = h.tcp.connect(h.now, h.local, h.remote).unwrap();
    let syn = h.out1();
    // The peer's own SYN crosses ours.
    h.send(h.peer().seq(9000).flags(TcpFlags::SYN).mss(1200));
    assert_eq!(h.tcp.state(s).unwrap(), State::SynReceived);
    let synack = h.out1();
    assert_eq!(synack.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!((synack.seq, synack.ack), (syn.seq, 9001));
    // The peer's SYN-ACK for our SYN completes the handshake (RFC 9293 figure 8).
    h.send(h.peer().seq(9000).flags(TcpFlags::SYN).ack(syn.seq + 1));
    assert_eq!(h.tcp.state(s).unwrap(), State::Established);
    let ack = h.out1();
    assert_eq!(
        (ack.flags, ack.seq, ack.ack),
        (TcpFlags::ACK, syn.seq + 1, 9001)
    );
    assert_eq!(h.tcp.info(s).unwrap().snd_mss, 1200);
}

#[test]
fn closed_port_gets_rst() {
    let mut h = Harness::new(plain_config());
    h.send(h.peer().seq(100).flags(TcpFlags::SYN));
    let r = h.out1();
    assert_eq!(r.flags, TcpFlags::RST | TcpFlags::ACK);
    assert_eq!((r.seq, r.ack), (0, 101));
    h.send(h.peer().seq(100).ack(555));
    let r = h.out1();
    assert_eq!((r.flags, r.seq), (TcpFlags::RST, 555));
    h.send(h.peer().seq(100).flags(TcpFlags::RST));
    h.quiet();
}

#[test]
fn syn_ack_retransmitted_on_duplicate_syn_and_timer() {
    let mut h = Harness::new(plain_config());
    let l = h.listen();
    h.send(h.peer().seq(500).flags(TcpFlags::SYN));
    let sa = h.out1();
    h.send(h.peer().seq(500).flags(TcpFlags::SYN));
    let again = h.out1();
    assert_eq!(again, sa);
    let got = h.advance(Duration::from_millis(1100));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(h.tcp.accept(h.now, l).unwrap(), None);
    h.send(h.peer().seq(501).ack(sa.seq + 1));
    assert!(h.tcp.accept(h.now, l).unwrap().is_some());
}

#[test]
fn listener_ignores_rst_and_resets_ack() {
    let mut h = Harness::new(plain_config());
    h.listen();
    h.send(h.peer().seq(1).flags(TcpFlags::RST));
    h.quiet();
    h.send(h.peer().seq(1).ack(42));
    let r = h.out1();
    assert_eq!((r.flags, r.seq), (TcpFlags::RST, 42));
    // A bare FIN (no SYN, no ACK) is dropped.
    h.send(h.peer().seq(1).flags(TcpFlags::FIN));
    h.quiet();
}
