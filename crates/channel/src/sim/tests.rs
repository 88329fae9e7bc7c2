//! Behaviour of the simulated wire, observed through the `Channel` trait as a stack
//! would see it. Statistical checks use bounds of six standard deviations, so a correct
//! simulator fails them with probability below 1e-8 for any seed.

use std::time::Duration;

use super::{Endpoint, LinkConfig, Wire};
use crate::{Channel, TxError};

/// A frame of `len` bytes (at least 18) carrying `seq` after a broadcast Ethernet header.
fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(18)];
    f[..6].fill(0xff);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // IEEE 802 local experimental
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31) ^ seq as u8;
    }
    f
}

fn seq_of(frame: &[u8]) -> u32 {
    u32::from_be_bytes(frame[14..18].try_into().unwrap())
}

fn send(ep: &mut Endpoint, frame: &[u8]) {
    ep.tx()
        .send(frame.len(), &mut |buf| buf.copy_from_slice(frame))
        .unwrap();
}

/// Receives what `ep` gets, advancing virtual time from delivery to delivery, until
/// nothing is due by `until_ns` (then moves time to `until_ns`) or, with `None`, until
/// the wire is idle. Records each frame with its exact virtual delivery time.
fn pump(wire: &Wire, ep: &mut Endpoint, until_ns: Option<u64>, got: &mut Vec<(u64, Vec<u8>)>) {
    loop {
        let now = wire.now_nanos();
        while ep
            .rx_batch(usize::MAX, &mut |f, _| got.push((now, f.to_vec())))
            .unwrap()
            > 0
        {}
        match wire.next_event_nanos() {
            Some(t) if t > now && until_ns.is_none_or(|u| t <= u) => wire.advance_to_nanos(t),
            _ => break,
        }
    }
    if let Some(u) = until_ns {
        wire.advance_to_nanos(u);
    }
}

/// Everything `ep` receives until the wire is idle, with virtual delivery times.
fn drain(wire: &Wire, ep: &mut Endpoint) -> Vec<(u64, Vec<u8>)> {
    let mut got = Vec::new();
    pump(wire, ep, None, &mut got);
    got
}

/// Sends `count` frames of `len` bytes from `a`, `burst` at a time `gap` apart, and
/// collects what `b` receives, with delivery times.
fn run(
    wire: &Wire,
    a: &mut Endpoint,
    b: &mut Endpoint,
    count: u32,
    len: usize,
    burst: u32,
    gap: Duration,
) -> Vec<(u64, Vec<u8>)> {
    let mut got = Vec::new();
    let mut seq = 0;
    while seq < count {
        for _ in 0..burst.min(count - seq) {
            send(a, &frame(seq, len));
            seq += 1;
        }
        a.tx().flush().unwrap();
        let until = wire.now_nanos() + gap.as_nanos() as u64;
        pump(wire, b, Some(until), &mut got);
    }
    pump(wire, b, None, &mut got);
    got
}

fn messy() -> LinkConfig {
    LinkConfig::new()
        .loss(0.05)
        .duplicate(0.05)
        .corrupt(0.05)
        .reorder(0.1)
        .reorder_delay(Duration::from_micros(300))
        .delay(Duration::from_millis(2))
        .jitter(Duration::from_micros(50))
        .rate_bps(50_000_000)
        .queue_limit_frames(20)
}

fn messy_run(seed: u64) -> (Vec<(u64, Vec<u8>)>, super::LinkStats) {
    let (wire, mut a, mut b) = Wire::pair(seed, messy(), LinkConfig::new());
    let got = run(
        &wire,
        &mut a,
        &mut b,
        3000,
        200,
        8,
        Duration::from_micros(200),
    );
    (got, wire.link_stats(0, 1))
}

#[test]
fn same_seed_same_deliveries() {
    let (first, first_stats) = messy_run(7);
    let (second, second_stats) = messy_run(7);
    assert_eq!(first, second);
    assert_eq!(first_stats, second_stats);
    // The run exercised every impairment.
    let s = first_stats;
    assert!(
        s.dropped_loss > 0 && s.duplicated > 0 && s.corrupted > 0,
        "{s:?}"
    );
    assert!(s.reordered > 0 && s.dropped_queue > 0, "{s:?}");
}

#[test]
fn different_seed_different_deliveries() {
    let (first, first_stats) = messy_run(7);
    let (other, other_stats) = messy_run(8);
    assert_ne!(first, other);
    assert_ne!(first_stats, other_stats);
}

#[test]
fn counters_add_up() {
    let (got, s) = messy_run(11);
    assert_eq!(s.sent, 3000);
    assert_eq!(s.delivered, got.len() as u64);
    assert_eq!(
        s.sent - s.dropped_loss + s.duplicated,
        s.delivered + s.dropped_queue
    );
    assert_eq!(s.delivered_bytes, 200 * s.delivered);
}

#[test]
fn one_direction_does_not_perturb_the_other() {
    // The b->a link's draws must not depend on traffic from a to b.
    let lossy = LinkConfig::new().loss(0.3);
    let back = |with_forward_traffic: bool| {
        let (wire, mut a, mut b) = Wire::pair(3, lossy.clone(), lossy.clone());
        if with_forward_traffic {
            run(
                &wire,
                &mut a,
                &mut b,
                500,
                64,
                10,
                Duration::from_micros(10),
            );
        }
        run(
            &wire,
            &mut b,
            &mut a,
            500,
            64,
            10,
            Duration::from_micros(10),
        )
        .into_iter()
        .map(|(_, f)| seq_of(&f))
        .collect::<Vec<_>>()
    };
    assert_eq!(back(false), back(true));
}

#[test]
fn loss_rate_within_statistical_bounds() {
    const N: u32 = 100_000;
    let (wire, mut a, mut b) = Wire::pair(1, LinkConfig::new().loss(0.1), LinkConfig::new());
    let got = run(&wire, &mut a, &mut b, N, 60, 1000, Duration::from_micros(1));
    let s = wire.link_stats(0, 1);
    // Binomial(100000, 0.1): mean 10000, standard deviation about 95.
    assert!((9_430..=10_570).contains(&s.dropped_loss), "{s:?}");
    assert_eq!(got.len() as u64, u64::from(N) - s.dropped_loss);
    // Nothing else was dropped, and survivors arrive intact and in order.
    assert!(got.windows(2).all(|w| seq_of(&w[0].1) < seq_of(&w[1].1)));
    assert!(got.iter().all(|(_, f)| *f == frame(seq_of(f), 60)));
}

#[test]
fn extreme_loss_probabilities() {
    let (wire, mut a, mut b) = Wire::pair(1, LinkConfig::new().loss(1.0), LinkConfig::new());
    assert!(run(&wire, &mut a, &mut b, 100, 60, 10, Duration::ZERO).is_empty());
    let (wire, mut a, mut b) = Wire::pair(1, LinkConfig::new().loss(0.0), LinkConfig::new());
    assert_eq!(
        run(&wire, &mut a, &mut b, 100, 60, 10, Duration::ZERO).len(),
        100
    );
}

#[test]
fn reordering_reorders() {
    let cfg = LinkConfig::new()
        .reorder(0.2)
        .reorder_delay(Duration::from_millis(1))
        .delay(Duration::from_micros(100));
    let (wire, mut a, mut b) = Wire::pair(5, cfg, LinkConfig::new());
    let got = run(
        &wire,
        &mut a,
        &mut b,
        2000,
        60,
        1,
        Duration::from_micros(10),
    );
    assert_eq!(got.len(), 2000, "reordering must not lose frames");
    let mut newest = 0;
    let mut late = 0;
    for (_, f) in &got {
        let seq = seq_of(f);
        if seq < newest {
            late += 1;
        }
        newest = newest.max(seq);
    }
    let s = wire.link_stats(0, 1);
    assert_eq!(s.reordered, late);
    // About 400 held back; each is overtaken by the ~100 frames of the next millisecond.
    assert!((250..=550).contains(&late), "{late}");
    let mut seqs: Vec<u32> = got.iter().map(|(_, f)| seq_of(f)).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..2000).collect::<Vec<_>>());
}

#[test]
fn jitter_stays_within_bounds_and_reorders() {
    let cfg = LinkConfig::new()
        .delay(Duration::from_millis(1))
        .jitter(Duration::from_micros(500));
    let (wire, mut a, mut b) = Wire::pair(9, cfg, LinkConfig::new());
    // One frame every 10 us: frame `seq` leaves at `seq * 10 us`.
    let got = run(
        &wire,
        &mut a,
        &mut b,
        1000,
        60,
        1,
        Duration::from_micros(10),
    );
    assert_eq!(got.len(), 1000);
    for (at, f) in &got {
        let flight = at - u64::from(seq_of(f)) * 10_000;
        assert!((1_000_000..=1_500_000).contains(&flight), "{flight}");
    }
    assert!(wire.link_stats(0, 1).reordered > 100);
}

#[test]
fn duplication_duplicates() {
    let (wire, mut a, mut b) = Wire::pair(2, LinkConfig::new().duplicate(0.25), LinkConfig::new());
    let got = run(
        &wire,
        &mut a,
        &mut b,
        10_000,
        60,
        100,
        Duration::from_micros(100),
    );
    let s = wire.link_stats(0, 1);
    // Binomial(10000, 0.25): mean 2500, standard deviation about 43.
    assert!((2_240..=2_760).contains(&s.duplicated), "{s:?}");
    assert_eq!(got.len() as u64, 10_000 + s.duplicated);
    let mut seen = vec![0u32; 10_000];
    for (_, f) in &got {
        assert_eq!(*f, frame(seq_of(f), 60), "duplicates are exact copies");
        seen[seq_of(f) as usize] += 1;
    }
    assert!(seen.iter().all(|&n| n == 1 || n == 2));
    assert_eq!(
        seen.iter().filter(|&&n| n == 2).count() as u64,
        s.duplicated
    );
}

fn bits_differing(a: &[u8], b: &[u8]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

#[test]
fn corruption_flips_one_bit() {
    let (wire, mut a, mut b) = Wire::pair(4, LinkConfig::new().corrupt(1.0), LinkConfig::new());
    let got = run(&wire, &mut a, &mut b, 500, 100, 10, Duration::ZERO);
    assert_eq!(got.len(), 500);
    let mut positions = std::collections::HashSet::new();
    for (i, (_, f)) in got.iter().enumerate() {
        let sent = frame(i as u32, 100);
        assert_eq!(f.len(), sent.len());
        assert_eq!(bits_differing(f, &sent), 1, "frame {i}");
        positions.insert(f.iter().zip(&sent).position(|(x, y)| x != y).unwrap());
    }
    // Flips land all over the frame, header included.
    assert!(
        positions.len() > 50 && positions.iter().any(|&p| p < 14),
        "{positions:?}"
    );
    assert_eq!(wire.link_stats(0, 1).corrupted, 500);
}

#[test]
fn partial_corruption_is_counted() {
    let (wire, mut a, mut b) = Wire::pair(4, LinkConfig::new().corrupt(0.1), LinkConfig::new());
    // One frame per step, so the arrival order is the sending order.
    let got = run(
        &wire,
        &mut a,
        &mut b,
        5000,
        100,
        1,
        Duration::from_micros(1),
    );
    let damaged = got
        .iter()
        .enumerate()
        .filter(|(i, (_, f))| *f != frame(*i as u32, 100))
        .count() as u64;
    let s = wire.link_stats(0, 1);
    assert_eq!(damaged, s.corrupted);
    // Binomial(5000, 0.1): mean 500, standard deviation about 21.
    assert!((370..=630).contains(&damaged), "{damaged}");
}

#[test]
fn rate_limit_serialises_in_virtual_time() {
    // 1000-byte frames at 8 Mbit/s take exactly 1 ms each; plus 250 us propagation.
    let cfg = LinkConfig::new()
        .rate_bps(8_000_000)
        .delay(Duration::from_micros(250));
    let (wire, mut a, mut b) = Wire::pair(1, cfg, LinkConfig::new());
    for seq in 0..10 {
        send(&mut a, &frame(seq, 1000));
    }
    a.tx().flush().unwrap();
    let got = drain(&wire, &mut b);
    let times: Vec<u64> = got.iter().map(|&(t, _)| t).collect();
    let expect: Vec<u64> = (1..=10).map(|k| k * 1_000_000 + 250_000).collect();
    assert_eq!(times, expect);

    // With Ethernet's 24 bytes of overhead: 1024 * 8 bits / 8 Mbit/s = 1.024 ms.
    let cfg = LinkConfig::new().rate_bps(8_000_000).overhead_len(24);
    let (wire, mut a, mut b) = Wire::pair(1, cfg, LinkConfig::new());
    send(&mut a, &frame(0, 1000));
    a.tx().flush().unwrap();
    assert_eq!(wire.next_event(), Some(Duration::from_micros(1024)));
    assert_eq!(drain(&wire, &mut b).len(), 1);
}

#[test]
fn goodput_matches_rate() {
    // 10 virtual seconds at 10 Mbit/s: a sender that keeps the queue full moves
    // 10 Mbit/s * 10 s / (1250 B * 8) = 10000 frames, minus the one in service.
    let cfg = LinkConfig::new()
        .rate_bps(10_000_000)
        .queue_limit_frames(10);
    let (wire, mut a, mut b) = Wire::pair(1, cfg, LinkConfig::new());
    let mut delivered = 0u64;
    let mut seq = 0;
    while wire.now() < Duration::from_secs(10) {
        send(&mut a, &frame(seq, 1250));
        seq += 1;
        a.tx().flush().unwrap();
        delivered += b.rx_batch(usize::MAX, &mut |_, _| {}).unwrap() as u64;
        wire.advance_by(Duration::from_micros(500));
    }
    assert!((9_998..=10_000).contains(&delivered), "{delivered}");
    let queued = wire.link_in_flight(0, 1) as u64;
    assert!(queued <= 10);
    assert_eq!(
        wire.link_stats(0, 1).dropped_queue,
        u64::from(seq) - delivered - queued
    );
}

#[test]
fn queue_limit_drops_tail() {
    let cfg = LinkConfig::new().rate_bps(8_000_000).queue_limit_frames(5);
    let (wire, mut a, mut b) = Wire::pair(1, cfg, LinkConfig::new());
    for seq in 0..20 {
        send(&mut a, &frame(seq, 1000));
    }
    a.tx().flush().unwrap();
    let got = drain(&wire, &mut b);
    assert_eq!(
        got.iter().map(|(_, f)| seq_of(f)).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
    assert_eq!(wire.link_stats(0, 1).dropped_queue, 15);

    // Byte limit: 3000 bytes hold three 1000-byte frames. Once drained, it accepts again.
    let cfg = LinkConfig::new()
        .rate_bps(8_000_000)
        .queue_limit_bytes(3000);
    let (wire, mut a, mut b) = Wire::pair(1, cfg, LinkConfig::new());
    for round in 0..2 {
        for seq in 0..5 {
            send(&mut a, &frame(seq, 1000));
        }
        a.tx().flush().unwrap();
        assert_eq!(drain(&wire, &mut b).len(), 3, "round {round}");
    }
    assert_eq!(wire.link_stats(0, 1).dropped_queue, 4);
}

#[test]
fn in_flight_limit_bounds_memory() {
    let cfg = LinkConfig::new()
        .delay(Duration::from_millis(1))
        .in_flight_limit(10);
    let (wire, mut a, mut b) = Wire::pair(1, cfg, LinkConfig::new());
    for seq in 0..100 {
        send(&mut a, &frame(seq, 60));
    }
    a.tx().flush().unwrap();
    assert_eq!(wire.in_flight(), 10);
    assert_eq!(wire.link_in_flight(0, 1), 10);
    assert_eq!(drain(&wire, &mut b).len(), 10);
    assert_eq!(wire.link_stats(0, 1).dropped_overflow, 90);
    assert_eq!(b.stats().rx_dropped, 90);
    assert_eq!(wire.in_flight(), 0);
}

#[test]
fn hub_floods_every_other_endpoint() {
    let (wire, mut eps) = Wire::hub(1, 4, LinkConfig::new().delay(Duration::from_micros(5)));
    send(&mut eps[2], &frame(42, 60));
    eps[2].tx().flush().unwrap();
    assert_eq!(wire.in_flight(), 3);
    assert_eq!(eps[1].next_arrival(), Some(Duration::from_micros(5)));
    assert_eq!(eps[2].next_arrival(), None);
    for (i, ep) in eps.iter_mut().enumerate() {
        let got = drain(&wire, ep);
        if i == 2 {
            assert!(got.is_empty(), "a hub does not echo to the sender");
        } else {
            assert_eq!(got, vec![(5_000, frame(42, 60))], "endpoint {i}");
            assert_eq!(wire.link_stats(2, i).delivered, 1);
        }
    }
    // Per-link configuration: cut one port off.
    wire.set_link(0, 1, LinkConfig::new().loss(1.0));
    send(&mut eps[0], &frame(1, 60));
    eps[0].tx().flush().unwrap();
    let counts: Vec<usize> = (0..4).map(|i| drain(&wire, &mut eps[i]).len()).collect();
    assert_eq!(counts, vec![0, 0, 1, 1]);
}

#[test]
fn perfect_wire_delivers_at_once() {
    let (wire, mut a, mut b) = Wire::pair(1, LinkConfig::new(), LinkConfig::new());
    send(&mut a, &frame(1, 60));
    assert_eq!(wire.in_flight(), 0, "nothing leaves before flush");
    assert_eq!(a.pending_count(), 1);
    a.tx().flush().unwrap();
    assert_eq!(wire.next_event(), Some(Duration::ZERO));
    let mut got = Vec::new();
    assert_eq!(b.rx_batch(8, &mut |f, _| got.push(f.to_vec())).unwrap(), 1);
    assert_eq!(got, vec![frame(1, 60)]);
    assert_eq!(wire.now(), Duration::ZERO);
    assert_eq!(wire.next_event(), None);
}

#[test]
fn answers_from_the_receive_callback() {
    // b echoes every frame through the transmit half it is handed, run to completion.
    let cfg = LinkConfig::new().delay(Duration::from_millis(1));
    let (wire, mut a, mut b) = Wire::pair(1, cfg.clone(), cfg);
    for seq in 0..3 {
        send(&mut a, &frame(seq, 60));
    }
    a.tx().flush().unwrap();
    wire.advance_to(Duration::from_millis(1));
    let n = b
        .rx_batch(8, &mut |f, tx| {
            tx.send(f.len(), &mut |buf| buf.copy_from_slice(f)).unwrap()
        })
        .unwrap();
    assert_eq!(n, 3);
    b.tx().flush().unwrap();
    let back = drain(&wire, &mut a);
    assert_eq!(back.len(), 3);
    assert!(back.iter().all(|(t, _)| *t == 2_000_000));
    let st = b.stats();
    assert_eq!((st.rx_frames, st.tx_frames, st.rx_bytes), (3, 3, 180));
}

#[test]
fn batch_count_caps_rx_batch() {
    let (wire, mut a, mut b) = Wire::pair(1, LinkConfig::new(), LinkConfig::new());
    wire.set_batch_count(4);
    for seq in 0..10 {
        send(&mut a, &frame(seq, 60));
    }
    a.tx().flush().unwrap();
    assert_eq!(b.rx_batch(usize::MAX, &mut |_, _| {}).unwrap(), 4);
    assert_eq!(b.rx_batch(2, &mut |_, _| {}).unwrap(), 2);
    assert_eq!(b.rx_batch(100, &mut |_, _| {}).unwrap(), 4);
    assert_eq!(b.rx_batch(100, &mut |_, _| {}).unwrap(), 0);
    assert_eq!(b.stats().empty_polls, 1);
    assert_eq!(b.capabilities().batch_count, 4);
}

#[test]
fn transmit_errors_are_counted() {
    let (wire, mut a, _b) = Wire::pair(1, LinkConfig::new(), LinkConfig::new());
    wire.set_mtu(500);
    let caps = a.capabilities();
    assert_eq!((caps.name, caps.mtu, caps.max_frame_len), ("sim", 500, 514));
    assert_eq!(
        a.tx().send(515, &mut |_| panic!("must not fill")),
        Err(TxError::TooLarge)
    );
    wire.set_tx_queue_count(2);
    send(&mut a, &frame(0, 514));
    send(&mut a, &frame(1, 60));
    assert_eq!(a.tx().send(60, &mut |_| {}), Err(TxError::Full));
    let st = a.stats();
    assert_eq!((st.tx_frames, st.tx_bytes, st.tx_dropped), (2, 574, 2));
    a.tx().flush().unwrap();
    send(&mut a, &frame(2, 60));
}

#[test]
fn dropped_endpoint_is_detached() {
    let cfg = LinkConfig::new().delay(Duration::from_millis(1));
    let (wire, mut eps) = Wire::hub(1, 3, cfg);
    send(&mut eps[0], &frame(0, 60));
    eps[0].tx().flush().unwrap();
    assert_eq!(wire.in_flight(), 2);
    let c = eps.pop().unwrap();
    drop(c);
    assert_eq!(wire.in_flight(), 1);
    assert_eq!(wire.link_in_flight(0, 2), 0);
    send(&mut eps[0], &frame(1, 60));
    eps[0].tx().flush().unwrap();
    assert_eq!(
        wire.link_stats(0, 2).sent,
        1,
        "nothing is sent to a detached endpoint"
    );
    assert_eq!(drain(&wire, &mut eps[1]).len(), 2);
}

#[test]
fn time_moves_forward_only() {
    let wire = Wire::new(0);
    wire.advance_to_micros(10);
    wire.advance_to(Duration::from_micros(5));
    assert_eq!(wire.now_micros(), 10);
    wire.advance_by(Duration::from_nanos(1500));
    assert_eq!((wire.now_nanos(), wire.now_micros()), (11_500, 11));
}

#[test]
fn next_event_micros_rounds_up() {
    // 100 bytes at 1 Gbit/s = 800 ns: a microsecond clock must advance to 1 us.
    let cfg = LinkConfig::new().rate_bps(1_000_000_000);
    let (wire, mut a, mut b) = Wire::pair(1, cfg, LinkConfig::new());
    send(&mut a, &frame(0, 100));
    a.tx().flush().unwrap();
    assert_eq!(wire.next_event_nanos(), Some(800));
    assert_eq!(wire.next_event_micros(), Some(1));
    wire.advance_to_micros(wire.next_event_micros().unwrap());
    assert_eq!(b.rx_batch(8, &mut |_, _| {}).unwrap(), 1);
}

#[test]
fn endpoints_added_later_get_the_default_link() {
    let wire = Wire::new(1);
    let mut a = wire.endpoint();
    wire.set_default_link(LinkConfig::new().delay(Duration::from_millis(3)));
    let mut b = wire.endpoint();
    assert_eq!((a.id(), b.id(), wire.endpoint_count()), (0, 1, 2));
    assert_eq!(
        wire.link_config(0, 1).delay_duration(),
        Duration::from_millis(3)
    );
    send(&mut a, &frame(0, 60));
    a.tx().flush().unwrap();
    assert_eq!(drain(&wire, &mut b)[0].0, 3_000_000);
    assert_eq!(b.now(), Duration::from_millis(3));
    assert_eq!(b.wire().now(), Duration::from_millis(3));
}

#[test]
#[should_panic(expected = "no simulated link from 0 to 0")]
fn no_link_to_self() {
    let (wire, _a, _b) = Wire::pair(1, LinkConfig::new(), LinkConfig::new());
    wire.link_stats(0, 0);
}

#[test]
fn burst_loss_loses_in_bursts() {
    const N: u32 = 100_000;
    let cfg = LinkConfig::new().burst_loss(0.01, 0.25);
    let (wire, mut a, mut b) = Wire::pair(6, cfg, LinkConfig::new());
    let got = run(&wire, &mut a, &mut b, N, 60, 1000, Duration::from_micros(1));
    let mut present = vec![false; N as usize];
    for (_, f) in &got {
        present[seq_of(f) as usize] = true;
    }
    let mut bursts = Vec::new();
    let mut run_len = 0u32;
    for &p in &present {
        if p {
            if run_len > 0 {
                bursts.push(run_len);
            }
            run_len = 0;
        } else {
            run_len += 1;
        }
    }
    let lost: u32 = bursts.iter().sum::<u32>() + run_len;
    assert_eq!(u64::from(lost), wire.link_stats(0, 1).dropped_loss);
    // Long-run rate 0.01 / 0.26 = 3.85% (about 3846 frames); bursts are correlated,
    // so the bound is wide (about six standard deviations of the burst process).
    assert!((2_800..=4_900).contains(&lost), "{lost}");
    // Mean burst length 1 / 0.25 = 4 frames (about 960 bursts).
    let mean = f64::from(lost) / bursts.len() as f64;
    assert!((3.3..=4.7).contains(&mean), "{mean}");
    assert!(bursts.iter().any(|&len| len >= 10));
}

#[test]
fn debug_output_is_a_summary() {
    let (wire, mut a, b) = Wire::pair(1, LinkConfig::new(), LinkConfig::new());
    send(&mut a, &frame(0, 1000));
    a.tx().flush().unwrap();
    let text = format!("{wire:?} {b:?}");
    assert!(text.starts_with("Wire { now_ns: 0, endpoints: 2, in_flight: 1 } Endpoint { id: 1"));
    assert!(text.len() < 400, "{text}");
}
