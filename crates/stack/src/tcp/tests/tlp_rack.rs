//! Tail loss probes and RACK loss detection (RFC 8985) against a scripted peer: a tail
//! loss is repaired after a probe at about 2*SRTT, a lost retransmission is repaired
//! without a retransmission timeout, and with the features off both need the timeout.

use ulnet_wire::TcpFlags;

use super::harness::*;
use crate::tcp::{SocketHandle, TcpConfig};
use crate::time::Duration;

const RTT: Duration = Duration::from_millis(10);

fn config(tlp: bool, rack: bool) -> TcpConfig {
    TcpConfig {
        sack: true,
        tail_loss_probe: tlp,
        rack,
        ..plain_config()
    }
}

/// Passive open whose handshake takes `RTT`, so SRTT = `RTT`. Returns (handle, SND.UNA).
fn open(h: &mut Harness) -> (SocketHandle, u32) {
    let l = h.listen();
    h.send(h.peer().seq(1000).flags(TcpFlags::SYN).mss(1000).sack_ok());
    let synack = h.out1();
    h.advance(RTT);
    h.send(h.peer().seq(1001).ack(synack.seq + 1));
    h.quiet();
    let s = h.tcp.accept(h.now, l).unwrap().expect("accept");
    assert_eq!(h.tcp.info(s).unwrap().srtt, Some(RTT));
    (s, synack.seq + 1)
}

fn ack(h: &Harness, ack: u32, blocks: &[(u32, u32)]) -> Seg {
    h.peer().seq(1001).ack(ack).sack_blocks(blocks)
}

/// Advances in 1 ms steps until something is sent; returns it and the time taken.
fn next_output(h: &mut Harness, limit: Duration) -> (Vec<Seg>, Duration) {
    let start = h.now;
    while h.now - start < limit {
        let got = h.advance(Duration::from_millis(1));
        if !got.is_empty() {
            return (got, h.now - start);
        }
    }
    (Vec::new(), h.now - start)
}

#[test]
fn tail_loss_is_repaired_after_a_probe_not_a_timeout() {
    let mut h = Harness::new(config(true, true));
    let (s, una) = open(&mut h);
    h.tcp.send(h.now, s, &[7; 4000]).unwrap();
    assert_eq!(h.out().len(), 4);
    // Segments 3 and 4 are lost: two segments cannot produce three duplicate ACKs.
    h.advance(RTT);
    h.send(ack(&h, una + 2000, &[]));
    let _ = h.out();
    let (probe, waited) = next_output(&mut h, Duration::from_secs(1));
    assert_eq!(probe.len(), 1, "{probe:?}");
    // RFC 8985 §7.3: no new data, so the last segment again, at PTO = 2*SRTT plus the
    // 2 ms slack (whole ms steps here), long before the 200 ms minimum RTO.
    assert_eq!((probe[0].seq, probe[0].len()), (una + 3000, 1000));
    assert!(waited <= RTT * 2 + Duration::from_millis(3), "{waited:?}");
    assert!(waited >= RTT * 2 + Duration::from_millis(2), "{waited:?}");
    assert_eq!(h.tcp.stats().loss_probes, 1);
    // The probe's SACK shows segment 3 lost (RACK): it is retransmitted within SRTT.
    h.advance(RTT);
    h.send(ack(&h, una + 2000, &[(una + 3000, una + 4000)]));
    let mut got = h.out();
    if got.is_empty() {
        got = next_output(&mut h, RTT).0;
    }
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].seq, got[0].len()), (una + 2000, 1000));
    h.send(ack(&h, una + 4000, &[]));
    let info = h.tcp.info(s).unwrap();
    assert_eq!((info.timeouts, info.retransmits), (0, 2));
    // Nothing outstanding: no probe, no timer.
    h.quiet();
    assert!(h.advance(Duration::from_secs(5)).is_empty());
}

#[test]
fn without_tlp_a_tail_loss_waits_for_the_timeout() {
    let mut h = Harness::new(config(false, false));
    let (s, una) = open(&mut h);
    h.tcp.send(h.now, s, &[7; 4000]).unwrap();
    assert_eq!(h.out().len(), 4);
    h.advance(RTT);
    h.send(ack(&h, una + 2000, &[]));
    let _ = h.out();
    let (rtx, waited) = next_output(&mut h, Duration::from_secs(1));
    assert_eq!(rtx[0].seq, una + 2000);
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    assert_eq!(h.tcp.info(s).unwrap().timeouts, 1);
    assert_eq!(h.tcp.stats().loss_probes, 0);
}

/// Segment 1 of 10 is lost, fast retransmit resends it, and that copy is lost too.
/// Returns (handle, SND.UNA) once data sent after the retransmission has been SACKed.
fn lose_a_retransmission(h: &mut Harness) -> (SocketHandle, u32) {
    let (s, una) = open(h);
    h.tcp.send(h.now, s, &[9; 30_000]).unwrap();
    assert_eq!(h.out().len(), 10);
    h.advance(RTT);
    let mut rtx = Vec::new();
    for k in 2..=4u32 {
        h.send(ack(h, una, &[(una + 1000, una + k * 1000)]));
        rtx.extend(h.out());
    }
    assert_eq!(rtx.iter().filter(|x| x.seq == una).count(), 1, "{rtx:?}");
    // The rest of the flight is SACKed; recovery sends new data as the pipe drains.
    let mut sent = Vec::new();
    for k in 5..=10u32 {
        h.send(ack(h, una, &[(una + 1000, una + k * 1000)]));
        sent.extend(h.out());
    }
    let new: Vec<u32> = sent
        .iter()
        .filter(|x| x.seq >= una + 10_000)
        .map(|x| x.seq)
        .collect();
    assert!(!new.is_empty(), "{sent:?}");
    assert!(sent.iter().all(|x| x.seq != una), "{sent:?}");
    // The retransmission of segment 1 is lost; the first new segment arrives.
    h.advance(RTT);
    h.send(ack(h, una, &[(una + 1000, new[0] + 1000)]));
    (s, una)
}

#[test]
fn lost_retransmission_is_repaired_without_a_timeout() {
    let mut h = Harness::new(config(true, true));
    let (s, una) = lose_a_retransmission(&mut h);
    // RACK: a segment sent after the retransmission was delivered, and during recovery
    // without reordering the window is zero: the segment is resent at once.
    let got = h.out();
    assert_eq!(got.first().map(|x| x.seq), Some(una), "{got:?}");
    assert!(h.tcp.stats().rack_losses >= 1);
    h.send(ack(&h, una + 11_000, &[]));
    let info = h.tcp.info(s).unwrap();
    assert_eq!(info.timeouts, 0);
    assert_eq!(info.fast_recoveries, 1);
}

#[test]
fn without_rack_a_lost_retransmission_waits_for_the_timeout() {
    let mut h = Harness::new(config(true, false));
    let (s, una) = lose_a_retransmission(&mut h);
    let got = h.out();
    assert!(got.iter().all(|x| x.seq != una), "{got:?}");
    // A tail loss probe may go out first (TLP runs in recovery too); without RACK its
    // SACK repairs nothing, and the next copy of segment 1 is the RTO's.
    let start = h.now;
    let mut rtx = Vec::new();
    while h.now - start < Duration::from_secs(1) {
        let (got, _) = next_output(&mut h, Duration::from_secs(1));
        if got.iter().any(|x| x.seq == una) {
            rtx = got;
            break;
        }
    }
    let waited = h.now - start;
    assert_eq!(rtx.first().map(|x| x.seq), Some(una), "{rtx:?}");
    // The RTO (≥ 200 ms) runs from the retransmission, one RTT before this point.
    assert!(waited >= Duration::from_millis(190), "{waited:?}");
    assert_eq!(h.tcp.info(s).unwrap().timeouts, 1);
}

/// Segment 1 of 4 is lost, fast retransmit resends it and that copy is lost too, and no
/// ACK comes back for anything sent after it (a receiver that compresses its SACKs, and
/// one of them lost). Nothing sent after the retransmission is SACKed, so RACK has no
/// evidence; a probe in recovery draws the SACK that gives it, well before the RTO.
#[test]
fn lost_retransmission_with_a_silent_peer_is_repaired_by_a_probe_in_recovery() {
    let mut h = Harness::new(config(true, true));
    let (s, una) = open(&mut h);
    h.tcp.send(h.now, s, &[9; 30_000]).unwrap();
    assert_eq!(h.out().len(), 10);
    h.advance(RTT);
    let mut rtx = Vec::new();
    for k in 2..=4u32 {
        h.send(ack(&h, una, &[(una + 1000, una + k * 1000)]));
        rtx.extend(h.out());
    }
    assert_eq!(rtx.iter().filter(|x| x.seq == una).count(), 1, "{rtx:?}");
    let highest = rtx.iter().map(|x| x.seq).max().unwrap();
    // Silence: the probe comes at about 2*SRTT, new data above everything sent, with a
    // second full segment so that the receiver ACKs at once.
    let (probe, waited) = next_output(&mut h, Duration::from_secs(1));
    assert_eq!(probe.len(), 2, "{probe:?}");
    assert!(probe.iter().all(|x| x.seq > highest), "{probe:?}");
    assert!(waited < Duration::from_millis(100), "{waited:?}");
    // Its SACK shows a segment sent after the retransmission delivered: RACK resends 1.
    h.advance(RTT);
    let end = probe[1].seq + probe[1].payload.len() as u32;
    h.send(ack(
        &h,
        una,
        &[(una + 1000, una + 4000), (probe[0].seq, end)],
    ));
    let got = h.out();
    assert_eq!(got.first().map(|x| x.seq), Some(una), "{got:?}");
    assert_eq!(h.tcp.info(s).unwrap().timeouts, 0);
    assert_eq!(h.tcp.stats().loss_probes, 1);
}

/// Segments 1 and 5 of 10 are lost; recovery resends both, and both copies are lost
/// too. Data sent after the two retransmissions is then SACKed. RACK keeps a
/// transmission time per segment (RFC 8985 §6.1), so both are found lost again from that
/// SACK, the one above SND.UNA included; RACK only at SND.UNA resent segment 1 and left
/// segment 5 to a later round trip or the retransmission timeout.
#[test]
fn lost_retransmission_above_snd_una_is_repaired_per_segment() {
    let mut h = Harness::new(config(true, true));
    let (s, una) = open(&mut h);
    h.tcp.send(h.now, s, &[9; 40_000]).unwrap();
    assert_eq!(h.out().len(), 10);
    h.advance(RTT);
    let mut sent = Vec::new();
    // Segments 2-4 arrive, 5 is lost, 6-10 arrive.
    for k in 2..=4u32 {
        h.send(ack(&h, una, &[(una + 1000, una + k * 1000)]));
        sent.extend(h.out());
    }
    for k in 6..=10u32 {
        h.send(ack(
            &h,
            una,
            &[(una + 5000, una + k * 1000), (una + 1000, una + 4000)],
        ));
        sent.extend(h.out());
    }
    let first_rtx: Vec<u32> = sent
        .iter()
        .map(|x| x.seq)
        .filter(|&q| q < una + 10_000)
        .collect();
    assert_eq!(first_rtx, vec![una, una + 4000], "{sent:?}");
    // New data sent after both retransmissions (RACK's evidence must be sent later).
    let last_rtx = sent.iter().rposition(|x| x.seq == una + 4000).unwrap();
    let new: Vec<u32> = sent[last_rtx..]
        .iter()
        .map(|x| x.seq)
        .filter(|&q| q >= una + 10_000)
        .collect();
    assert!(!new.is_empty(), "{sent:?}");
    let earlier_new: Vec<(u32, u32)> = sent[..last_rtx]
        .iter()
        .filter(|x| x.seq >= una + 10_000)
        .map(|x| (x.seq, x.seq + 1000))
        .collect();
    // Both retransmissions are lost; the first new segment sent after them arrives (and
    // whatever new data went before them).
    h.advance(RTT);
    h.send(ack(
        &h,
        una,
        &[
            (new[0], new[0] + 1000),
            (una + 5000, una + 10_000 + 1000 * earlier_new.len() as u32),
            (una + 1000, una + 4000),
        ],
    ));
    let mut again = h.out();
    if new.len() > 1 {
        // A second SACK, in case the rate reduction let only one go on the first.
        h.send(ack(
            &h,
            una,
            &[
                (new[0], new[1] + 1000),
                (una + 5000, una + 10_000 + 1000 * earlier_new.len() as u32),
                (una + 1000, una + 4000),
            ],
        ));
        again.extend(h.out());
    }
    let resent: Vec<u32> = again
        .iter()
        .map(|x| x.seq)
        .filter(|&q| q < una + 10_000)
        .collect();
    assert_eq!(resent, vec![una, una + 4000], "{again:?}");
    assert!(h.tcp.stats().rack_losses >= 2);
    let info = h.tcp.info(s).unwrap();
    assert_eq!((info.timeouts, info.retransmits), (0, 4));
}

/// RFC 8985 §6.2 step 4: a D-SACK (the retransmission was needless: the segment was
/// only reordered) widens the reordering window, so the next reordering of the same
/// depth is waited out instead of retransmitted.
#[test]
fn dsack_widens_the_reordering_window() {
    let mut h = Harness::new(config(false, true));
    let (s, una) = open(&mut h);
    h.tcp.send(h.now, s, &[9; 10_000]).unwrap();
    assert_eq!(h.out().len(), 10);
    h.advance(RTT);
    // Segment 1 is late: 2 is SACKed; after min_RTT/4 (2.5 ms) RACK resends 1.
    h.send(ack(&h, una, &[(una + 1000, una + 2000)]));
    let (got, waited) = next_output(&mut h, RTT);
    assert_eq!(got.first().map(|x| x.seq), Some(una), "{got:?}");
    assert_eq!(waited, Duration::from_millis(3));
    // The original arrives after all, then the copy: a D-SACK for it.
    h.send(ack(&h, una + 10_000, &[]));
    h.send(ack(&h, una + 10_000, &[(una, una + 1000)]));
    assert_eq!(h.tcp.stats().rack_losses, 1);
    let rtx_before = h.tcp.info(s).unwrap().retransmits;
    // The next flight sees the same reordering.
    h.tcp.send(h.now, s, &[9; 10_000]).unwrap();
    let flight = h.out();
    assert!(flight.len() >= 2, "{flight:?}");
    h.advance(RTT);
    let a = flight[0].seq;
    h.send(ack(&h, a, &[(a + 1000, a + 2000)]));
    // With the window doubled (2 * min_RTT/4 = 5 ms), 3 ms of reordering is waited out.
    let mut got = h.out();
    for _ in 0..3 {
        got.extend(h.advance(Duration::from_millis(1)));
    }
    h.send(ack(&h, a + 2000, &[]));
    assert!(got.iter().all(|x| x.seq != a), "{got:?}");
    assert_eq!(h.tcp.info(s).unwrap().retransmits, rtx_before);
}

/// Delivery-rate samples over the segment records, and BBR's pacing: TcpInfo reports the
/// latest sample and the pacing rate, and the sender holds new data back until the
/// pacer's departure time.
#[test]
fn rate_samples_and_bbr_pacing_are_reported() {
    let mut cfg = config(true, true);
    cfg.congestion = crate::tcp::Algorithm::Bbr;
    let mut h = Harness::new(cfg);
    let (s, una) = open(&mut h);
    let info = h.tcp.info(s).unwrap();
    assert_eq!(info.congestion, crate::tcp::Algorithm::Bbr);
    assert_eq!((info.pacing_rate, info.delivery_rate), (None, None));
    h.tcp.send(h.now, s, &[5; 100_000]).unwrap();
    let first = h.out();
    assert_eq!(
        first.len(),
        10,
        "the initial window, unpaced before any RTT sample"
    );
    h.advance(RTT);
    h.send(ack(&h, una + 10_000, &[]));
    let info = h.tcp.info(s).unwrap();
    // 10,000 bytes delivered over the 10 ms since the flight began: 1 MB/s.
    assert_eq!(info.delivery_rate, Some(1_000_000));
    let rate = info.pacing_rate.expect("BBR paces");
    assert!(
        rate > 1_000_000,
        "Startup paces above the measured rate: {rate}"
    );
    // The window opened (Startup grows it by what was delivered), but the pacer lets
    // the data out over time, in bursts, not at once.
    let now_out = h.out();
    let mut later = Vec::new();
    for _ in 0..20 {
        later.extend(h.advance(Duration::from_millis(1)));
    }
    assert!(
        !now_out.is_empty() && !later.is_empty(),
        "{now_out:?} / {later:?}"
    );
    let sent = |v: &[Seg]| v.iter().map(|x| x.len()).sum::<u32>();
    assert!(
        sent(&now_out) < 20_000,
        "the first burst is bounded by the pacer: {}",
        sent(&now_out)
    );
}

/// A recovery that starts on an ACK which also moved SND.UNA must not resend the segment
/// now at SND.UNA when its retransmission is already in flight. (The fast retransmit
/// looked at the segment table's first record, which during that ACK still lay below the
/// new SND.UNA, and forced a retransmission.)
#[test]
fn a_recovery_starting_at_a_segment_being_retransmitted_does_not_resend_it() {
    let mut h = Harness::new(config(false, true));
    let (s, una) = open(&mut h);
    let k = |n: u32| una + n * 1000;
    let show = |v: &[Seg]| {
        v.iter()
            .map(|x| (x.seq.wrapping_sub(una) / 1000, x.len()))
            .collect::<Vec<_>>()
    };
    h.tcp.send(h.now, s, &[1; 10_000]).unwrap();
    assert_eq!(h.out().len(), 10);
    // S0 and S1 lost.
    h.advance(RTT);
    h.send(ack(&h, una, &[(k(2), k(10))]));
    assert_eq!(show(&h.out()), [(0, 1000), (1, 1000)]);
    h.advance(Duration::from_millis(1));
    h.tcp.send(h.now, s, &[2; 6_000]).unwrap();
    assert_eq!(h.out().len(), 5, "S10..S14");
    // S0's copy arrived, S1's did not; S10 arrived, S11 is lost; S12, S13 arrive, S14 is
    // late. RACK finds S1's copy and S11 lost: both go again.
    h.advance(RTT);
    h.send(ack(&h, k(1), &[(k(2), k(11)), (k(12), k(14))]));
    let mut r3 = h.out();
    r3.extend(h.advance(Duration::from_millis(1)));
    assert!(
        r3.iter().any(|x| x.seq == k(11)),
        "S11 resent: {:?}",
        show(&r3)
    );
    let rtx_before = h.tcp.info(s).unwrap().retransmits;
    // S1's second copy arrives: SND.UNA moves past `recover` (S10) to S11. S14 arrives
    // with it, sent before S11's copy (so RACK has no reason to think that copy lost),
    // and a new recovery begins at S11, whose retransmission is on its way.
    h.advance(RTT);
    h.send(ack(&h, k(11), &[(k(12), k(15))]));
    let mut r4 = h.out();
    r4.extend(h.advance(Duration::from_millis(1)));
    assert!(
        r4.iter().all(|x| x.seq != k(11)),
        "S11 resent: {:?}",
        show(&r4)
    );
    assert_eq!(h.tcp.info(s).unwrap().retransmits, rtx_before);
}
