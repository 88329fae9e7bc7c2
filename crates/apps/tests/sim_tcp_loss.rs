//! Random loss on a low-RTT path: 2% of frames dropped each way at 100 µs RTT. Without
//! tail loss probes and RACK (RFC 8985) most of the transfer time went to retransmission
//! timeouts (at least 200 ms each, 2,000 round trips); with them, losses are repaired by
//! fast recovery and timeouts are rare. Checked as counts, not timing: byte-exact
//! delivery, clean close, and RTO expiries a small fraction of the loss repairs.
//!
//! Sized for CI (debug test profile); `ulnet sim tcp --bytes 20M --loss 0.02 --rtt
//! 100us --static-arp` shows the goodput on the release binary.

use std::time::Duration;

use ulnet_apps::sim::{run_tcp, TcpSimOptions, TcpSimReport};
use ulnet_stack::tcp::AckPolicy;

fn run(seed: u64, ipv6: bool, receiver_acks: AckPolicy, gso_max: u32) -> TcpSimReport {
    let mut o = TcpSimOptions {
        gso_max,
        bytes: 4 << 20,
        seed,
        ipv6,
        receiver_acks,
        static_arp: true,
        time_limit: Duration::from_secs(600),
        wall_limit: Duration::from_secs(120),
        ..TcpSimOptions::default()
    };
    o.both_ways(|d| {
        d.loss = 0.02;
        d.delay = Duration::from_micros(50);
    });
    run_tcp(&o).expect("simulation set-up")
}

/// Both receivers: ulnet's own (one ACK per batch) and the Linux-like one (an ACK every
/// second segment, three immediate duplicate ACKs then SACK compression), which is what
/// ulnet's sender meets on a real path to Linux.
#[test]
fn random_loss_is_repaired_without_timeouts() {
    check(false, AckPolicy::PerBatch, 0);
}

#[test]
fn random_loss_is_repaired_without_timeouts_with_a_linux_receiver() {
    check(false, AckPolicy::Linux, 0);
}

/// The same scenario over IPv6.
#[test]
fn random_loss_is_repaired_without_timeouts_over_ipv6() {
    check(true, AckPolicy::PerBatch, 0);
}

/// New data sent as bursts of up to 64 KB (`TcpConfig::gso_max`, cut into segments by
/// the interface here): each burst is recorded as the segments it becomes, so losses
/// inside one are detected and repaired segment by segment, as without bursts.
#[test]
fn random_loss_is_repaired_without_timeouts_with_bursts() {
    check(false, AckPolicy::Linux, 65_000);
}

fn check(ipv6: bool, receiver_acks: AckPolicy, gso_max: u32) {
    let (mut rtos, mut fast) = (0, 0);
    for seed in 1..=4 {
        let r = run(seed, ipv6, receiver_acks, gso_max);
        let retx = &r.retransmissions;
        let what = format!(
            "{receiver_acks:?} receiver, ipv6 {ipv6}, seed {seed}: {:?}; retx {retx:?}; wire {:?}",
            r.failures, r.wire
        );
        assert!(r.ok && r.hashes_equal && r.all_closed_cleanly, "{what}");
        assert_eq!(r.bytes_received, r.bytes_sent, "{what}");
        // The wire dropped data: the run did exercise loss recovery.
        assert!(r.wire.a_to_b.dropped_loss > 20, "{what}");
        assert!(retx.fast_retransmits >= 10, "{what}");
        assert!(retx.rto_expiries <= retx.fast_retransmits / 10, "{what}");
        eprintln!(
            "{receiver_acks:?} seed {seed}: B sent {} frames, A {}; virtual {:?}",
            r.wire.b_to_a.sent, r.wire.a_to_b.sent, r.transfer_duration_s
        );
        rtos += retx.rto_expiries;
        fast += retx.fast_retransmits;
    }
    // Before RFC 8985 the engine took one timeout per 20-40 fast recoveries here.
    assert!(
        rtos * 50 <= fast,
        "{receiver_acks:?} receiver: {rtos} RTO expiries, {fast} fast recoveries"
    );
    eprintln!("{receiver_acks:?} receiver: {rtos} RTO expiries, {fast} fast recoveries");
}
