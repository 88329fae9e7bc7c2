//! ICMP errors about our segments (issue 12 defect 8): RFC 5927 §4.1 sequence-number
//! validation, RFC 5461 / RFC 1122 §4.2.3.9 hard and soft errors, RFC 1191 fragmentation
//! needed.

use ulnet_wire::{Icmpv4DstUnreachable as U, SeqNumber, TcpFlags};

use super::harness::*;
use crate::tcp::{ConnError, IcmpError, IcmpVerdict, RecvError, State, TcpConfig};
use crate::time::Duration;

const PORT_UNREACHABLE: IcmpError = IcmpError::Unreachable(U::PortUnreachable);
const HOST_UNREACHABLE: IcmpError = IcmpError::Unreachable(U::HostUnreachable);

fn icmp(h: &mut Harness, seq: u32, e: IcmpError) -> IcmpVerdict {
    let (local, remote) = (h.local, h.remote);
    h.tcp.icmp_error(h.now, local, remote, SeqNumber(seq), e)
}

/// A blind port unreachable quoting anything but our SYN is dropped and counted; the
/// one quoting the SYN aborts the connection in SYN-SENT with ECONNREFUSED.
#[test]
fn hard_error_in_syn_sent_aborts_only_when_it_quotes_the_syn() {
    let mut h = Harness::new(plain_config());
    let s = h.tcp.connect(h.now, h.local, h.remote).unwrap();
    let syn = h.out1();
    assert_eq!(syn.flags, TcpFlags::SYN);
    for forged in [syn.seq.wrapping_sub(1), syn.seq.wrapping_add(1), 12345] {
        assert_eq!(
            icmp(&mut h, forged, PORT_UNREACHABLE),
            IcmpVerdict::OutOfWindow
        );
    }
    assert_eq!(h.tcp.stats().icmp_out_of_window, 3);
    assert_eq!(h.tcp.state(s).unwrap(), State::SynSent);
    assert_eq!(h.tcp.readiness(s).unwrap().error, None);
    // Another 4-tuple: no connection.
    let (local, mut other) = (h.local, h.remote);
    other.set_port(other.port() + 1);
    assert_eq!(
        h.tcp
            .icmp_error(h.now, local, other, SeqNumber(syn.seq), PORT_UNREACHABLE),
        IcmpVerdict::NoConnection
    );
    assert_eq!(h.tcp.stats().icmp_no_connection, 1);

    assert_eq!(
        icmp(&mut h, syn.seq, PORT_UNREACHABLE),
        IcmpVerdict::Aborted
    );
    assert_eq!(h.tcp.state(s).unwrap(), State::Closed);
    assert_eq!(h.tcp.readiness(s).unwrap().error, Some(ConnError::Refused));
    let mut buf = [0u8; 8];
    assert_eq!(
        h.tcp.recv(h.now, s, &mut buf),
        Err(RecvError::ConnectionRefused)
    );
    assert_eq!(h.tcp.stats().icmp_aborts, 1);
    // No RST, no SYN retransmission afterwards.
    assert!(h.advance(Duration::from_secs(10)).is_empty());
}

/// A soft error in SYN-SENT does not abort (RFC 1122 §4.2.3.9); if the SYNs then time
/// out, the connection reports the soft error, not "timed out" (as Linux does).
#[test]
fn soft_error_in_syn_sent_is_what_the_timeout_reports() {
    let mut h = Harness::new(TcpConfig {
        syn_retries: 2,
        ..plain_config()
    });
    let s = h.tcp.connect(h.now, h.local, h.remote).unwrap();
    let syn = h.out1();
    assert_eq!(
        icmp(&mut h, syn.seq, HOST_UNREACHABLE),
        IcmpVerdict::SoftError
    );
    assert_eq!(h.tcp.state(s).unwrap(), State::SynSent);
    let again = h.wait();
    assert_eq!(again[0].flags, TcpFlags::SYN);
    h.advance(Duration::from_secs(60));
    assert_eq!(h.tcp.state(s).unwrap(), State::Closed);
    assert_eq!(
        h.tcp.readiness(s).unwrap().error,
        Some(ConnError::HostUnreachable)
    );
}

/// In ESTABLISHED every unreachable is soft, port unreachable included (RFC 5461 §4.1):
/// recorded, taken once through `take_soft_error` (SO_ERROR), retransmission goes on;
/// an error quoting data already acknowledged or not yet sent is dropped.
#[test]
fn errors_in_established_are_soft_and_validated() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer());
    h.tcp.send(h.now, s, &[7u8; 100]).unwrap();
    let d = h.out1();
    assert_eq!(d.seq, iss + 1);
    // Beyond SND.NXT, and below SND.UNA: dropped.
    assert_eq!(
        icmp(&mut h, iss + 101, HOST_UNREACHABLE),
        IcmpVerdict::OutOfWindow
    );
    assert_eq!(
        icmp(&mut h, iss, HOST_UNREACHABLE),
        IcmpVerdict::OutOfWindow
    );
    assert_eq!(h.tcp.take_soft_error(s), Ok(None));
    // In window, even in the middle of the segment: soft.
    for e in [
        PORT_UNREACHABLE,
        IcmpError::TimeExceeded,
        IcmpError::Unreachable(U::NetUnreachable),
    ] {
        assert_eq!(icmp(&mut h, iss + 50, e), IcmpVerdict::SoftError);
    }
    assert_eq!(h.tcp.state(s).unwrap(), State::Established);
    assert_eq!(h.tcp.readiness(s).unwrap().error, None);
    assert_eq!(
        h.tcp.take_soft_error(s),
        Ok(Some(ConnError::NetworkUnreachable))
    );
    assert_eq!(h.tcp.take_soft_error(s), Ok(None));
    assert_eq!(h.tcp.stats().icmp_soft_errors, 3);
    assert_eq!(h.tcp.stats().icmp_out_of_window, 2);
    // Retransmission goes on.
    let r = h.wait();
    assert_eq!((r[0].seq, r[0].len()), (iss + 1, 100));
}

/// Fragmentation needed lowers the MSS only when it quotes an in-window sequence
/// number; the retransmission is cut at the new size; the floor is 536 (RFC 1122, RFC
/// 1191); a larger MTU than in force is ignored.
#[test]
fn frag_needed_shrinks_the_mss_when_validated() {
    let mut h = Harness::new(TcpConfig {
        mtu: 1500,
        ..plain_config()
    });
    let (s, iss) = h.passive_open(1000, h.peer().mss(1460));
    assert_eq!(h.tcp.info(s).unwrap().snd_mss, 1460);
    h.tcp.send(h.now, s, &[1u8; 1460]).unwrap();
    let d = h.out1();
    assert_eq!(d.len(), 1460);
    let frag = |mtu| IcmpError::FragmentationNeeded {
        next_hop_mtu: mtu,
        quoted_len: 1500,
    };
    // Blind: quotes the next, unsent, byte. Ignored.
    assert_eq!(
        icmp(&mut h, iss + 1461, frag(600)),
        IcmpVerdict::OutOfWindow
    );
    assert_eq!(h.tcp.info(s).unwrap().snd_mss, 1460);
    // Valid: 1000 - 40.
    assert_eq!(icmp(&mut h, iss + 1, frag(1000)), IcmpVerdict::MtuLowered);
    assert_eq!(h.tcp.info(s).unwrap().snd_mss, 960);
    assert_eq!(h.tcp.stats().icmp_mtu_lowered, 1);
    // Not lower than in force: ignored.
    assert_eq!(icmp(&mut h, iss + 1, frag(1200)), IcmpVerdict::MtuNotLower);
    // Below the floor: clamped to 576 (MSS 536).
    assert_eq!(icmp(&mut h, iss + 1, frag(100)), IcmpVerdict::MtuLowered);
    assert_eq!(h.tcp.info(s).unwrap().snd_mss, 536);
    // The retransmission takes the new size.
    let r = h.wait();
    assert_eq!((r[0].seq, r[0].len()), (iss + 1, 536));
    // A router predating RFC 1191 (MTU 0): RFC 1191 §7's plateau below the quoted length.
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer().mss(1460));
    h.tcp.send(h.now, s, &[1u8; 1460]).unwrap();
    h.out1();
    let v = icmp(
        &mut h,
        iss + 1,
        IcmpError::FragmentationNeeded {
            next_hop_mtu: 0,
            quoted_len: 1500,
        },
    );
    assert_eq!(v, IcmpVerdict::MtuLowered);
    assert_eq!(h.tcp.info(s).unwrap().snd_mss, 1492 - 40);
}

/// After a validated "fragmentation needed", the segments in flight that were too large
/// are resent at once in the new size (Linux's tcp_simple_retransmit), with SACK (per
/// segment) and without (from SND.UNA): no waiting for a loss probe or the
/// retransmission timeout, and no window reduction.
#[test]
fn frag_needed_resends_the_too_large_segments_at_once() {
    for sack in [true, false] {
        let mut h = Harness::new(TcpConfig {
            mtu: 1500,
            sack: true,
            rack: true,
            ..plain_config()
        });
        let syn = if sack {
            h.peer().mss(1460).sack_ok()
        } else {
            h.peer().mss(1460)
        };
        let (s, iss) = h.passive_open(1000, syn);
        h.tcp.send(h.now, s, &[1u8; 2920]).unwrap();
        assert_eq!(h.out().len(), 2);
        let cwnd = h.tcp.info(s).unwrap().cwnd;
        h.advance(Duration::from_millis(1));
        let e = IcmpError::FragmentationNeeded {
            next_hop_mtu: 1000,
            quoted_len: 1500,
        };
        assert_eq!(icmp(&mut h, iss + 1, e), IcmpVerdict::MtuLowered);
        let got: Vec<(u32, u32)> = h.out().iter().map(|x| (x.seq - iss, x.len())).collect();
        // Per segment with SACK: each 1460-byte segment in two pieces; without, go-back-N
        // from SND.UNA in full new-sized segments.
        let want: &[(u32, u32)] = if sack {
            &[(1, 960), (961, 500), (1461, 960), (2421, 500)]
        } else {
            &[(1, 960), (961, 960), (1921, 960), (2881, 40)]
        };
        assert_eq!(got, want, "sack {sack}");
        let info = h.tcp.info(s).unwrap();
        assert_eq!((info.timeouts, info.cwnd), (0, cwnd), "sack {sack}");
    }
}
