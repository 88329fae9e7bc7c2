//! The stage accounting's traces, alone in their own process (the state is global: the
//! stack's other tests deliver datagrams, which would take the trace).
#![cfg(feature = "stage-cycles")]

use ulnet_stack::stage::*;

/// Cycles the application takes to call `recv` in the test.
const WAIT: u64 = 1_000_000;

/// One thread: a whole receive, application and transmit trace, then a frame that is
/// not UDP (not committed). The stages of each trace add up to its whole span.
#[test]
fn traces_commit_and_tile_the_whole_span() {
    set_enabled(true);
    reset();
    rx_poll();
    rx_frame();
    rx_mark(Stage::RxEthernet);
    rx_mark(Stage::RxIpv4);
    rx_mark(Stage::RxUdp);
    rx_delivered(7, true);
    rx_frame_done();
    // The loop keeps polling while the datagram waits for `recv`: the wait is still the
    // datagram's (its hand-off stage), whatever the polls do.
    let parked = now();
    while now().wrapping_sub(parked) < WAIT {
        rx_poll();
        rx_frame_done();
    }
    rx_received(7);
    let start = tx_enter();
    tx_queued(7, true, start);
    tx_pick(7);
    tx_mark(Stage::TxUdp);
    tx_mark(Stage::TxIpv4);
    tx_mark(Stage::TxEthernet);
    tx_submitted();
    tx_emitted();
    let f = tx_flush_start();
    tx_flushed(f, 1);
    // Not UDP: no commit.
    rx_poll();
    rx_frame();
    rx_mark(Stage::RxEthernet);
    rx_frame_done();
    rx_received(7);
    let s = snapshot();
    set_enabled(false);
    for st in Stage::ALL {
        assert_eq!(s.get(st).count, 1, "{}", st.name());
    }
    assert!(s.get(Stage::RxWake).mean >= WAIT as f64);
    let sum = |set: &[Stage]| set.iter().map(|x| s.get(*x).mean).sum::<f64>();
    let (rx, rxw) = (sum(&Stage::RX), s.get(Stage::RxWhole).mean);
    let (tx, txw) = (sum(&Stage::TX), s.get(Stage::TxWhole).mean);
    // The whole spans come from reads of their own around the stages' boundaries.
    assert!(rx > 0.0 && rx <= rxw, "rx {rx} vs {rxw}");
    assert!(tx > 0.0 && tx <= txw, "tx {tx} vs {txw}");
}
