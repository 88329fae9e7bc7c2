//! Proportional rate reduction (RFC 6937) on the simulated wire: a burst of losses in
//! one window is repaired in one fast recovery, without a timeout, and without a burst
//! at either end of recovery. PRR keeps the sender's rate tied to what the receiver
//! reports delivered, so a bottleneck queue that the flight fitted in before the loss is
//! not overrun by the repair: the only losses are the ones the test causes, and every
//! retransmission repairs one of them.

use std::time::Duration;

use ulnet_apps::sim::{run_tcp, TcpSimOptions};
use ulnet_stack::tcp::AckPolicy;

#[test]
fn burst_loss_is_repaired_in_one_recovery_at_a_reduced_rate() {
    check(AckPolicy::PerBatch);
}

/// The same against the Linux-like receiver (an ACK every second segment, SACK
/// compression after three duplicate ACKs): what ulnet's sender meets on a real path.
#[test]
fn burst_loss_is_repaired_in_one_recovery_with_a_linux_receiver() {
    check(AckPolicy::Linux);
}

fn check(receiver_acks: AckPolicy) {
    let mut o = TcpSimOptions {
        receiver_acks,
        bytes: 3 << 20,
        static_arp: true,
        cwnd_trace: true,
        // Ten consecutive data segments of one window, well after slow start.
        drop_segments: (600..610).collect(),
        time_limit: Duration::from_secs(600),
        wall_limit: Duration::from_secs(120),
        ..TcpSimOptions::default()
    };
    o.both_ways(|d| d.delay = Duration::from_millis(5));
    // A 100 Mb/s bottleneck whose queue (1000 frames) holds more than the 256 KB window.
    o.a_to_b.rate_bps = Some(100_000_000);
    o.a_to_b.queue_frames = Some(1000);
    let r = run_tcp(&o).expect("simulation set-up");
    let retx = &r.retransmissions;
    let what = format!(
        "{receiver_acks:?} receiver: {:?}; retx {retx:?}; wire {:?}",
        r.failures, r.wire
    );
    assert!(r.ok && r.hashes_equal, "{what}");
    assert_eq!(retx.rto_expiries, 0, "{what}");
    assert_eq!(retx.fast_retransmits, 1, "{what}");
    // Each dropped segment is retransmitted once; no queue overflow adds more.
    assert_eq!(r.wire.a_to_b.link.dropped_queue, 0, "{what}");
    assert_eq!(retx.segments, 10, "{what}");
    // The window after recovery is ssthresh (RFC 6937: cwnd = ssthresh on exit), not
    // the loss window of a timeout.
    let last = r.cwnd_trace.last().expect("trace");
    assert!(last.ssthresh < u32::MAX, "{last:?}");
    assert!(last.cwnd >= last.ssthresh, "{last:?}");
}
