//! Proportional rate reduction (RFC 6937) in a fast recovery against a scripted peer:
//! the sender keeps sending during recovery, about ssthresh/RecoverFS of a segment for
//! every segment delivered while the pipe is above ssthresh, instead of falling silent
//! until the pipe drains to the reduced window and then sending one per ACK.

use ulnet_wire::TcpFlags;

use super::harness::*;
use crate::tcp::congestion::Algorithm;
use crate::tcp::TcpConfig;
use crate::time::Duration;

const RTT: Duration = Duration::from_millis(10);

#[test]
fn recovery_sends_in_proportion_to_what_is_delivered() {
    let mut h = Harness::new(TcpConfig {
        sack: true,
        rack: true,
        tail_loss_probe: false,
        congestion: Algorithm::NewReno,
        ..plain_config()
    });
    let l = h.listen();
    h.send(h.peer().seq(1000).flags(TcpFlags::SYN).mss(1000).sack_ok());
    let synack = h.out1();
    h.advance(RTT);
    h.send(h.peer().seq(1001).ack(synack.seq + 1));
    h.quiet();
    let s = h.tcp.accept(h.now, l).unwrap().expect("accept");
    let una = synack.seq + 1;
    h.tcp.send(h.now, s, &[5; 40_000]).unwrap();
    assert_eq!(h.out().len(), 10);
    h.advance(RTT);
    // Segment 1 is lost; the others arrive one by one, each drawing a SACK.
    let mut per_ack = Vec::new();
    // Up to segment 12: the last one sent before the fast retransmit (SACKs for data
    // sent after it would show the retransmission lost, RACK).
    for k in 2..=12u32 {
        h.send(
            h.peer()
                .seq(1001)
                .ack(una)
                .sack_blocks(&[(una + 1000, una + k * 1000)]),
        );
        let got = h.out();
        per_ack.push(
            got.iter()
                .map(|g| if g.seq == una { 'R' } else { 'N' })
                .collect::<String>(),
        );
    }
    // SACKs 1 and 2: SACKed data left the pipe, a new segment each (RFC 3042's effect).
    // SACK 3: recovery (DupThresh); RecoverFS 12 segments, NewReno ssthresh 5 (half the
    // window); the fast retransmit goes. While the pipe is above ssthresh, PRR sends
    // CEIL(prr_delivered * 5 / 12) - prr_out: a new segment on SACKs 5 and 7 (pipe 7,
    // then 6); at SACKs 8 and 9 the pipe reaches ssthresh, and below it (SSRB) one
    // segment per SACK. The old rule (cwnd = ssthresh, send while pipe < cwnd) sent
    // nothing from the fast retransmit until the pipe fell below 5 segments.
    assert_eq!(
        per_ack,
        ["N", "N", "R", "", "N", "", "N", "", "", "N", "N"],
        "{per_ack:?}"
    );
    let info = h.tcp.info(s).unwrap();
    assert_eq!((info.timeouts, info.fast_recoveries), (0, 1));
}
