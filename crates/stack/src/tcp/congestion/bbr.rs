//! BBR congestion control, version 1: Cardwell et al., "BBR: Congestion-Based Congestion
//! Control", ACM Queue 14(5), 2016, and draft-cardwell-iccrg-bbr-congestion-control-00
//! (cited "BBR §"), with the ACK-aggregation allowance Linux added in 2019 (as in Linux's
//! `tcp_bbr.c`, the kernel's default on hosts built with `CONFIG_DEFAULT_BBR`).
//!
//! Loss-based controllers (NewReno, CUBIC) read a lost segment as a full queue and cut the
//! window; under random loss that does not come from a queue (a lossy link, a policer, the
//! nftables drops of `ulnet bench loss`) they keep cutting, and the rate falls with
//! 1/sqrt(p). BBR instead keeps a model of the path, the bottleneck bandwidth (the windowed
//! maximum of delivery-rate samples, `recovery/rate.rs`) and the round-trip propagation
//! time (the windowed minimum RTT), and sends at about their product:
//!
//! - Startup doubles the rate each round trip (gain 2/ln 2) until the bandwidth stops
//!   growing by 25% for three rounds (BBR §4.3.2.2); Drain then empties the queue Startup
//!   built (BBR §4.3.3).
//! - ProbeBW cycles its pacing gain through 5/4, 3/4 and six rounds of 1 to find more
//!   bandwidth and drain what the probe queued (BBR §4.3.4); cwnd is twice the
//!   bandwidth-delay product plus allowances for send bursts and ACK aggregation.
//! - ProbeRTT drops to four segments for 200 ms and a round trip when the minimum RTT was
//!   not refreshed for 10 s (BBR §4.3.5).
//! - Loss: the first round of recovery follows packet conservation, then the window is at
//!   least what is in flight plus what was just delivered, and the end of recovery restores
//!   the window from before it (BBR §4.2.3.4, "Modulating cwnd in Loss Recovery").
//!
//! BBR paces: new data leaves in bursts of at most a send quantum (about a millisecond at
//! the pacing rate, 64 KB at most, as Linux's TSO autosizing), each burst delaying the
//! next by its length at the pacing rate ([`CongestionControl::send_time`]); the output
//! path holds data back and arms a timer until then. Linux's long-term bandwidth sampling
//! for token-bucket policers (`lt_bw`) is not implemented.

use super::{clamp_mss, initial_window, CongestionControl, RateSample};
use crate::time::{Duration, Instant};

/// 2/ln 2: the smallest gain that doubles the delivery rate each round trip (BBR §4.3.2.2).
const HIGH_GAIN: f64 = 2.885;
/// Drain's pacing gain, the inverse of Startup's (BBR §4.3.3).
const DRAIN_GAIN: f64 = 1.0 / HIGH_GAIN;
/// ProbeBW's cwnd gain (BBR §4.3.4.2).
const CWND_GAIN: f64 = 2.0;
/// ProbeBW's pacing gain cycle (BBR §4.3.4.3).
const PACING_GAINS: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// The bandwidth filter's window, round trips (BBR §4.1.1.1, BtlBwFilterLen).
const BW_WINDOW_ROUNDS: u32 = 10;
/// The minimum RTT filter's window (BBR §4.1.2.3, RTpropFilterLen).
const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// How long ProbeRTT holds the window down (BBR §4.3.5, ProbeRTTDuration).
const PROBE_RTT_TIME: Duration = Duration::from_millis(200);
/// Startup ends when the bandwidth grew by less than this for `FULL_BW_ROUNDS` rounds.
const FULL_BW_GROWTH: f64 = 1.25;
const FULL_BW_ROUNDS: u8 = 3;
/// The least window, segments (BBR §4.2.3.1, BBRMinPipeCwnd).
const MIN_CWND_SEGS: usize = 4;
/// Rounds per half of the ACK-aggregation filter (Linux `bbr_extra_acked_win_rtts`).
const EXTRA_ACKED_WIN_ROUNDS: u8 = 5;
/// The aggregation allowance never exceeds this much time at the bottleneck rate (Linux
/// `bbr_extra_acked_max_us`).
const EXTRA_ACKED_MAX: Duration = Duration::from_millis(100);
/// An ACK epoch is restarted past this many bytes (keeps the arithmetic small).
const ACK_EPOCH_RESET: u64 = 1 << 30;
/// Pace 1% below the estimate, so the bottleneck queue drains over time (Linux
/// `bbr_pacing_margin_percent`).
const PACING_MARGIN: f64 = 0.99;
/// The longest a single burst can hold the next one back, µs (a bound for a pacing rate
/// sampled absurdly low).
const MAX_PACE_GAP_US: u64 = 100_000;
/// The initial window when no RTT is known yet, segments (RFC 6928).
const INIT_CWND_SEGS: usize = 10;
/// The largest burst Linux lets a sender hand the device in one go (GSO, 64 KB less
/// headers); the send-quantum allowance is up to three of those.
const MAX_BURST: u64 = 65_536 - 1 - 320;

/// BBR's state machine (BBR §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Find the bottleneck bandwidth: the rate doubles each round trip.
    Startup,
    /// Drain the queue Startup built.
    Drain,
    /// Steady state: cycle the pacing gain around the estimate.
    ProbeBw,
    /// Refresh the minimum RTT with an almost empty pipe.
    ProbeRtt,
}

/// A windowed maximum over rounds, Kathleen Nichols' three-sample scheme (the best, second
/// and third best samples of the window, each younger than the one before): O(1) per
/// sample, and an expired best is replaced by a sample of its window rather than lost.
#[derive(Debug, Clone, Copy, Default)]
struct MaxFilter {
    s: [(u32, u64); 3],
}

impl MaxFilter {
    fn get(&self) -> u64 {
        self.s[0].1
    }

    fn reset(&mut self, t: u32, v: u64) -> u64 {
        self.s = [(t, v); 3];
        v
    }

    /// Adds sample `v` at round `t`; `win` is the window in rounds.
    fn update(&mut self, win: u32, t: u32, v: u64) -> u64 {
        let new = (t, v);
        if v >= self.s[0].1 || t.wrapping_sub(self.s[2].0) > win {
            return self.reset(t, v);
        }
        if v >= self.s[1].1 {
            self.s[1] = new;
            self.s[2] = new;
        } else if v >= self.s[2].1 {
            self.s[2] = new;
        }
        let dt = t.wrapping_sub(self.s[0].0);
        if dt > win {
            // The best expired: the second takes its place, then the third.
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = new;
            if t.wrapping_sub(self.s[0].0) > win {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = new;
            }
        } else if self.s[1].0 == self.s[0].0 && dt > win / 4 {
            // A quarter of the window passed with one sample: keep a younger second best.
            self.s[1] = new;
            self.s[2] = new;
        } else if self.s[2].0 == self.s[1].0 && dt > win / 2 {
            self.s[2] = new;
        }
        self.s[0].1
    }
}

/// Where loss recovery stands, as BBR sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loss {
    /// No recovery.
    Open,
    /// Fast recovery began; the next rate sample starts packet conservation.
    Entering,
    /// In fast recovery.
    Recovery,
    /// After a retransmission timeout, until everything outstanding then is acknowledged.
    Timeout,
}

/// BBR v1. See the module docs.
#[derive(Debug, Clone)]
pub struct Bbr {
    mss: usize,
    cwnd: usize,
    /// The window before recovery or ProbeRTT, restored after them.
    prior_cwnd: usize,
    /// Reported as ssthresh: the estimated BDP once Startup is over (as Linux does).
    ssthresh: usize,
    mode: Mode,
    loss: Loss,
    /// The first round of recovery: cwnd follows packet conservation.
    conservation: bool,
    /// Bottleneck bandwidth filter, bytes per second, over `BW_WINDOW_ROUNDS` rounds.
    bw: MaxFilter,
    /// Round-trip propagation time: the least RTT seen in `MIN_RTT_WINDOW`.
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    /// Rounds counted so far; a round ends when a segment sent after its start is
    /// delivered (BBR §4.1.1.3).
    rounds: u32,
    /// The delivered total that ends the current round.
    next_round_delivered: u64,
    /// This ACK ended a round.
    round_start: bool,
    /// Startup's plateau detector.
    full_bw: u64,
    full_bw_rounds: u8,
    full_bw_reached: bool,
    /// ProbeBW: the phase of the gain cycle and when it began.
    cycle_idx: u8,
    cycle_stamp: Instant,
    /// ProbeRTT: when it may end, and whether a round passed at the low window.
    probe_rtt_done: Option<Instant>,
    probe_rtt_round_done: bool,
    /// Restarting after idle (the minimum-RTT filter must not send it to ProbeRTT).
    idle_restart: bool,
    pacing_gain: f64,
    cwnd_gain: f64,
    /// Bytes per second.
    pacing_rate: u64,
    /// ACK aggregation: the most data acknowledged beyond what the bandwidth estimate
    /// explains, in two halves of a sliding window of rounds.
    extra_acked: [u64; 2],
    extra_acked_idx: u8,
    extra_acked_rounds: u8,
    ack_epoch_stamp: Instant,
    ack_epoch_acked: u64,
    /// The last time the controller heard of the connection.
    last_event: Option<Instant>,
    /// The pacer's clock: the earliest departure time of the next burst (the
    /// "earliest departure time" model of Linux's internal pacing).
    pace_next: Instant,
}

impl Bbr {
    /// A controller with SMSS `mss` and an initial window of `iw_segments` (0: RFC 5681
    /// §3.1 eq. 1).
    pub fn new(mss: usize, iw_segments: usize) -> Self {
        let mss = clamp_mss(mss);
        let cwnd = initial_window(mss, iw_segments);
        Bbr {
            mss,
            cwnd,
            prior_cwnd: cwnd,
            ssthresh: usize::MAX,
            mode: Mode::Startup,
            loss: Loss::Open,
            conservation: false,
            bw: MaxFilter::default(),
            min_rtt: None,
            min_rtt_stamp: Instant::ZERO,
            rounds: 0,
            next_round_delivered: 0,
            round_start: false,
            full_bw: 0,
            full_bw_rounds: 0,
            full_bw_reached: false,
            cycle_idx: 0,
            cycle_stamp: Instant::ZERO,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            idle_restart: false,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            pacing_rate: 0,
            extra_acked: [0; 2],
            extra_acked_idx: 0,
            extra_acked_rounds: 0,
            ack_epoch_stamp: Instant::ZERO,
            ack_epoch_acked: 0,
            last_event: None,
            pace_next: Instant::ZERO,
        }
    }

    /// The state machine's mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The bottleneck bandwidth estimate, bytes per second.
    pub fn bandwidth(&self) -> u64 {
        self.bw.get()
    }

    /// The round-trip propagation time estimate.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// Startup found the pipe full.
    pub fn full_bw_reached(&self) -> bool {
        self.full_bw_reached
    }

    fn touch(&mut self, now: Instant) {
        self.last_event = Some(self.last_event.map_or(now, |t| t.max(now)));
    }

    /// `gain` times the bandwidth-delay product, bytes (BBR §4.2.3.2, BBRInflight before
    /// the quantum).
    fn bdp(&self, bw: u64, gain: f64) -> usize {
        let Some(rtt) = self.min_rtt else {
            return INIT_CWND_SEGS * self.mss;
        };
        let bytes = bw as f64 * rtt.as_secs_f64() * gain;
        (bytes as usize).saturating_add(1)
    }

    /// The send quantum: the burst the sender hands the device at this rate, about a
    /// millisecond's worth (Linux `bbr_tso_segs_goal`), at least two segments.
    fn quantum(&self) -> usize {
        let bytes = (self.pacing_rate >> 10).min(MAX_BURST) as usize;
        (bytes / self.mss).max(2) * self.mss
    }

    /// The window to aim for at `gain`: the BDP, plus room for three send quanta to be in
    /// flight at once (BBR §4.2.3.2; Linux `bbr_quantization_budget`), plus a little
    /// more while probing.
    fn inflight(&self, bw: u64, gain: f64) -> usize {
        let mut w = self.bdp(bw, gain).saturating_add(3 * self.quantum());
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            w = w.saturating_add(2 * self.mss);
        }
        w
    }

    /// The ACK-aggregation allowance: data the peer acknowledges in bursts beyond what the
    /// bandwidth explains would otherwise stall the sender between them.
    fn aggregation_cwnd(&self, bw: u64) -> usize {
        if !self.full_bw_reached {
            return 0;
        }
        let cap = (bw as f64 * EXTRA_ACKED_MAX.as_secs_f64()) as u64;
        self.extra_acked[0].max(self.extra_acked[1]).min(cap) as usize
    }

    fn set_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (HIGH_GAIN, HIGH_GAIN),
            Mode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            Mode::ProbeBw => (PACING_GAINS[usize::from(self.cycle_idx)], CWND_GAIN),
            Mode::ProbeRtt => (1.0, 1.0),
        };
    }

    fn save_cwnd(&mut self) {
        self.prior_cwnd = if self.loss == Loss::Open && self.mode != Mode::ProbeRtt {
            self.cwnd
        } else {
            self.prior_cwnd.max(self.cwnd)
        };
    }

    fn update_bw(&mut self, rs: &RateSample) {
        self.round_start = false;
        let Some(interval) = rs.interval else {
            return;
        };
        if rs.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = rs.total_delivered;
            self.rounds = self.rounds.wrapping_add(1);
            self.round_start = true;
            self.conservation = false;
        }
        let us = interval.as_micros().max(1);
        let bw = (u128::from(rs.delivered) * 1_000_000 / us).min(u128::from(u64::MAX)) as u64;
        // An application-limited sample says only that the path can do at least this
        // much: it may raise the estimate, never hold it up (BBR §4.1.1.5).
        if !rs.is_app_limited || bw >= self.bw.get() {
            self.bw.update(BW_WINDOW_ROUNDS, self.rounds, bw);
        }
    }

    fn update_ack_aggregation(&mut self, now: Instant, rs: &RateSample) {
        if rs.acked_sacked == 0 || rs.interval.is_none() {
            return;
        }
        if self.round_start {
            self.extra_acked_rounds = self.extra_acked_rounds.saturating_add(1);
            if self.extra_acked_rounds >= EXTRA_ACKED_WIN_ROUNDS {
                self.extra_acked_rounds = 0;
                self.extra_acked_idx ^= 1;
                self.extra_acked[usize::from(self.extra_acked_idx)] = 0;
            }
        }
        let elapsed = now.saturating_duration_since(self.ack_epoch_stamp);
        let mut expected = (self.bw.get() as f64 * elapsed.as_secs_f64()) as u64;
        let acked = u64::from(rs.acked_sacked);
        // An epoch where ACKs came no faster than the estimate explains starts anew.
        if self.ack_epoch_acked <= expected || self.ack_epoch_acked + acked >= ACK_EPOCH_RESET {
            self.ack_epoch_acked = 0;
            self.ack_epoch_stamp = now;
            expected = 0;
        }
        self.ack_epoch_acked += acked;
        let extra = (self.ack_epoch_acked - expected).min(self.cwnd as u64);
        let slot = &mut self.extra_acked[usize::from(self.extra_acked_idx)];
        *slot = (*slot).max(extra);
    }

    /// BBR §4.3.4.4: ProbeBW moves to the next phase after a min RTT; a probing phase
    /// lasts until it put its extra data in flight or saw loss, a draining phase ends
    /// early once the queue is gone.
    fn update_cycle_phase(&mut self, now: Instant, rs: &RateSample) {
        if self.mode != Mode::ProbeBw {
            return;
        }
        let full = self
            .min_rtt
            .is_some_and(|m| now.saturating_duration_since(self.cycle_stamp) > m);
        let prior_inflight = rs.inflight.saturating_add(rs.acked_sacked) as usize;
        let bw = self.bw.get();
        let next = if self.pacing_gain == 1.0 {
            full
        } else if self.pacing_gain > 1.0 {
            full && (rs.lost > 0 || prior_inflight >= self.inflight(bw, self.pacing_gain))
        } else {
            full || prior_inflight <= self.inflight(bw, 1.0)
        };
        if next {
            self.cycle_idx = (self.cycle_idx + 1) % PACING_GAINS.len() as u8;
            self.cycle_stamp = now;
        }
    }

    /// BBR §4.3.2.2: the pipe is full once three rounds in a row failed to raise the
    /// bandwidth by a quarter (application-limited rounds do not count).
    fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.full_bw_reached || !self.round_start || rs.is_app_limited {
            return;
        }
        let bw = self.bw.get();
        if bw as f64 >= self.full_bw as f64 * FULL_BW_GROWTH {
            self.full_bw = bw;
            self.full_bw_rounds = 0;
            return;
        }
        self.full_bw_rounds += 1;
        self.full_bw_reached = self.full_bw_rounds >= FULL_BW_ROUNDS;
    }

    fn enter_probe_bw(&mut self, now: Instant, salt: u64) {
        self.mode = Mode::ProbeBw;
        // A random phase other than the draining 3/4 one (BBR §4.3.4.5), so flows that
        // start together do not probe together. The engine has no randomness of its own;
        // the clock and the delivered count stand in for it.
        let r = ((now.total_micros() ^ salt) % 7) as u8;
        self.cycle_idx = (PACING_GAINS.len() as u8 - 1 - r + 1) % PACING_GAINS.len() as u8;
        self.cycle_stamp = now;
    }

    fn check_drain(&mut self, now: Instant, rs: &RateSample) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            self.ssthresh = self.inflight(self.bw.get(), 1.0).max(2 * self.mss);
        }
        if self.mode == Mode::Drain && rs.inflight as usize <= self.inflight(self.bw.get(), 1.0) {
            self.enter_probe_bw(now, rs.total_delivered);
        }
    }

    fn update_min_rtt(&mut self, now: Instant, rs: &RateSample) {
        // The window runs from the first sample: before it there is nothing to expire
        // (the clock's epoch is the caller's, and may be long past).
        let expired = self.min_rtt.is_some()
            && now.saturating_duration_since(self.min_rtt_stamp) > MIN_RTT_WINDOW;
        if let Some(rtt) = rs.rtt {
            if self.min_rtt.is_none_or(|m| rtt < m) || expired {
                self.min_rtt = Some(rtt);
                self.min_rtt_stamp = now;
            }
        }
        if expired && !self.idle_restart && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt;
            self.save_cwnd();
            self.probe_rtt_done = None;
        }
        if self.mode == Mode::ProbeRtt {
            match self.probe_rtt_done {
                None if rs.inflight as usize <= MIN_CWND_SEGS * self.mss => {
                    self.probe_rtt_done = Some(now + PROBE_RTT_TIME);
                    self.probe_rtt_round_done = false;
                    self.next_round_delivered = rs.total_delivered;
                }
                None => {}
                Some(done) => {
                    if self.round_start {
                        self.probe_rtt_round_done = true;
                    }
                    if self.probe_rtt_round_done && now >= done {
                        self.min_rtt_stamp = now;
                        self.cwnd = self.cwnd.max(self.prior_cwnd);
                        if self.full_bw_reached {
                            self.enter_probe_bw(now, rs.total_delivered);
                        } else {
                            self.mode = Mode::Startup;
                        }
                    }
                }
            }
        }
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    fn set_pacing_rate(&mut self, bw: u64, gain: f64) {
        let rate = (bw as f64 * gain * PACING_MARGIN) as u64;
        if self.full_bw_reached || rate > self.pacing_rate {
            self.pacing_rate = rate;
        }
    }

    /// BBR §4.2.3: the window for this ACK.
    fn set_cwnd(&mut self, rs: &RateSample, bw: u64) {
        let acked = rs.acked_sacked as usize;
        let inflight = rs.inflight as usize;
        // Segments this ACK found lost leave the window (Linux's packet conservation
        // counts them out before it adds what was delivered).
        if rs.lost > 0 {
            self.cwnd = self.cwnd.saturating_sub(rs.lost as usize).max(self.mss);
        }
        if self.loss == Loss::Entering {
            // BBR §4.2.3.4: the first round of recovery sends one segment per segment
            // delivered; the round is counted from here.
            self.loss = Loss::Recovery;
            self.conservation = true;
            self.next_round_delivered = rs.total_delivered;
            self.cwnd = inflight.saturating_add(acked);
        }
        if self.conservation {
            self.cwnd = self.cwnd.max(inflight.saturating_add(acked));
        } else {
            let target = self
                .inflight(bw, self.cwnd_gain)
                .saturating_add(self.aggregation_cwnd(bw));
            if self.full_bw_reached {
                self.cwnd = self.cwnd.saturating_add(acked).min(target);
            } else if self.cwnd < target || rs.total_delivered < (INIT_CWND_SEGS * self.mss) as u64
            {
                self.cwnd = self.cwnd.saturating_add(acked);
            }
            self.cwnd = self.cwnd.max(MIN_CWND_SEGS * self.mss);
        }
        if self.mode == Mode::ProbeRtt {
            self.cwnd = self.cwnd.min(MIN_CWND_SEGS * self.mss);
        }
        self.cwnd = self.cwnd.max(self.mss);
    }
}

impl CongestionControl for Bbr {
    fn cwnd(&self) -> usize {
        self.cwnd
    }

    fn ssthresh(&self) -> usize {
        self.ssthresh
    }

    fn mss(&self) -> usize {
        self.mss
    }

    /// BBR grows its window from rate samples ([`CongestionControl::on_rate_sample`]),
    /// not here.
    fn on_ack(&mut self, now: Instant, _: usize, _: usize, _: Option<Duration>) {
        self.touch(now);
    }

    fn on_congestion_event(&mut self, now: Instant, _flight_size: usize) {
        self.touch(now);
        if self.loss == Loss::Open {
            self.save_cwnd();
            self.loss = Loss::Entering;
        }
    }

    /// Non-SACK recovery's inflation does not apply: the window during recovery comes
    /// from packet conservation.
    fn on_dup_ack(&mut self) {}

    fn on_partial_ack(&mut self, _: usize) {}

    fn on_recovery_exit(&mut self, now: Instant) {
        self.touch(now);
        if matches!(self.loss, Loss::Entering | Loss::Recovery) {
            self.cwnd = self.cwnd.max(self.prior_cwnd);
        }
        self.loss = Loss::Open;
        self.conservation = false;
    }

    /// The loss window, as every controller (RFC 5681 §3.1); the window from before the
    /// timeout comes back once what was outstanding then is acknowledged
    /// ([`CongestionControl::on_loss_recovered`]). The plateau detector starts over.
    fn on_rto(&mut self, now: Instant, _flight_size: usize) {
        self.touch(now);
        self.save_cwnd();
        self.loss = Loss::Timeout;
        self.conservation = false;
        self.cwnd = self.mss;
        self.full_bw = 0;
        self.full_bw_rounds = 0;
    }

    /// BBR keeps its window after idle (its pacing spreads the restart; Linux skips the
    /// RFC 5681 §4.1 restart for it): the minimum-RTT filter is told not to take the
    /// idle period for a reason to probe, and a new ACK epoch starts.
    fn on_idle_restart(&mut self, now: Instant, _rto: Duration) -> bool {
        let idle = self.last_event.is_some_and(|t| now > t);
        self.touch(now);
        if idle {
            self.idle_restart = true;
            self.ack_epoch_stamp = now;
            self.ack_epoch_acked = 0;
            if self.mode == Mode::ProbeBw {
                self.set_pacing_rate(self.bw.get(), 1.0);
            }
        }
        false
    }

    fn set_mss(&mut self, mss: usize) {
        self.mss = clamp_mss(mss);
        self.cwnd = self.cwnd.max(self.mss);
        self.ssthresh = self.ssthresh.max(2 * self.mss);
    }

    fn on_rate_sample(&mut self, now: Instant, rs: &RateSample) {
        self.touch(now);
        self.update_bw(rs);
        self.update_ack_aggregation(now, rs);
        self.update_cycle_phase(now, rs);
        self.check_full_bw_reached(rs);
        self.check_drain(now, rs);
        self.update_min_rtt(now, rs);
        self.set_gains();
        let bw = self.bw.get();
        if bw > 0 {
            self.set_pacing_rate(bw, self.pacing_gain);
        } else if let Some(rtt) = rs.rtt.filter(|r| !r.is_zero()) {
            // No bandwidth sample yet: the initial window per RTT, at Startup's gain.
            let rate = self.cwnd as f64 / rtt.as_secs_f64() * HIGH_GAIN;
            self.pacing_rate = self.pacing_rate.max(rate as u64);
        }
        self.set_cwnd(rs, bw);
    }

    fn on_loss_recovered(&mut self, now: Instant) {
        self.touch(now);
        if self.loss == Loss::Timeout {
            self.cwnd = self.cwnd.max(self.prior_cwnd);
            self.loss = Loss::Open;
        }
    }

    fn model_based(&self) -> bool {
        true
    }

    fn send_time(&self) -> Option<Instant> {
        (self.pacing_rate > 0).then_some(self.pace_next)
    }

    fn send_quantum(&self) -> Option<u32> {
        (self.pacing_rate > 0).then(|| self.quantum().min(u32::MAX as usize) as u32)
    }

    /// Each burst pushes the departure time on by its length at the pacing rate. A late
    /// wake-up may catch up by one quantum, no more: the pacer's budget does not pile up
    /// while the sender has nothing to send.
    fn on_send(&mut self, now: Instant, bytes: usize) {
        if self.pacing_rate == 0 {
            return;
        }
        let rate = u128::from(self.pacing_rate);
        let us = |b: usize| {
            let d = (b as u128 * 1_000_000 / rate).min(u128::from(MAX_PACE_GAP_US));
            Duration::from_micros(d as u64)
        };
        let floor = now - us(self.quantum());
        self.pace_next = self.pace_next.max(floor) + us(bytes);
    }

    fn pacing_rate(&self) -> Option<u64> {
        (self.pacing_rate > 0).then_some(self.pacing_rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1000;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    #[test]
    fn max_filter_keeps_the_best_of_its_window() {
        let mut f = MaxFilter::default();
        f.update(10, 1, 100);
        f.update(10, 2, 50);
        f.update(10, 5, 70);
        assert_eq!(f.get(), 100);
        // Round 12: the 100 of round 1 expired; the best younger sample takes over.
        assert_eq!(f.update(10, 12, 10), 70);
        assert_eq!(f.update(10, 30, 5), 5);
        assert_eq!(f.update(10, 31, 500), 500);
    }

    /// Feeds a path of `rate` bytes/s and RTT `rtt` (one ACK per `MSS` delivered,
    /// everything in flight delivered one RTT later) for `rounds` round trips.
    fn drive(b: &mut Bbr, t0: u64, rounds: u64, rate: u64, rtt: Duration, loss_every: u64) -> u64 {
        let mut delivered = 0u64;
        let mut t = Instant::from_micros(t0);
        let per_ack = Duration::from_micros((MSS as u64 * 1_000_000 / rate).max(1));
        let mut n = 0u64;
        let end = t + rtt * rounds as u32;
        let mut round_start_delivered = 0u64;
        let mut round_end = t + rtt;
        while t < end {
            t += per_ack;
            n += 1;
            if t >= round_end {
                round_start_delivered = delivered;
                round_end = t + rtt;
            }
            delivered += MSS as u64;
            let lost = if loss_every > 0 && n.is_multiple_of(loss_every) {
                MSS as u32
            } else {
                0
            };
            if lost > 0 {
                b.on_congestion_event(t, b.cwnd());
            }
            let inflight =
                (b.cwnd() as u64).min(rate * rtt.as_micros() as u64 / 1_000_000 + MSS as u64);
            let rs = RateSample {
                delivered: delivered - round_start_delivered.min(delivered - MSS as u64),
                interval: Some(rtt.max(t.saturating_duration_since(round_end - rtt))),
                prior_delivered: round_start_delivered,
                total_delivered: delivered,
                is_app_limited: false,
                acked_sacked: MSS as u32,
                lost,
                inflight: inflight as u32,
                rtt: Some(rtt),
            };
            b.on_rate_sample(t, &rs);
            if lost > 0 && n.is_multiple_of(loss_every * 4) {
                b.on_recovery_exit(t);
            }
        }
        t.total_micros()
    }

    const RTT: Duration = Duration::from_millis(10);

    /// A controller after 60 round trips of a 10 MB/s, 10 ms path from t = 1 s, and the
    /// time (µs) it ended at.
    fn settled() -> (Bbr, u64) {
        let mut b = Bbr::new(MSS, 10);
        let t = drive(&mut b, 1_000_000, 60, 10_000_000, RTT, 0);
        (b, t)
    }

    #[test]
    fn startup_finds_the_bandwidth_and_settles_in_probe_bw() {
        let (b, _) = settled();
        let rtt = RTT;
        assert!(b.full_bw_reached());
        assert_eq!(b.mode(), Mode::ProbeBw);
        let bw = b.bandwidth();
        assert!((8_000_000..=12_000_000).contains(&bw), "{bw}");
        assert_eq!(b.min_rtt(), Some(rtt));
        // cwnd: about twice the BDP (100 KB) plus the quantum allowance, bounded.
        assert!(b.cwnd() >= 200_000 && b.cwnd() < 400_000, "{}", b.cwnd());
        assert!(b.pacing_rate().unwrap() > 7_000_000);
    }

    /// Random loss that does not come from a queue does not shrink the model: after
    /// recovery the window is back where it was.
    #[test]
    fn random_loss_keeps_the_window() {
        let (mut b, t) = settled();
        let rtt = RTT;
        let before = b.cwnd();
        drive(&mut b, t, 40, 10_000_000, rtt, 50);
        b.on_recovery_exit(Instant::from_micros(t) + rtt * 41);
        assert!(b.cwnd() >= before * 9 / 10, "{} -> {}", before, b.cwnd());
        let bw = b.bandwidth();
        assert!(bw >= 8_000_000, "{bw}");
    }

    #[test]
    fn recovery_starts_with_packet_conservation() {
        let (mut b, t) = settled();
        let rtt = RTT;
        let before = b.cwnd();
        let now = Instant::from_micros(t + 100);
        b.on_congestion_event(now, before);
        let rs = RateSample {
            delivered: MSS as u64,
            interval: None,
            prior_delivered: 0,
            total_delivered: 10_000_000,
            is_app_limited: false,
            acked_sacked: MSS as u32,
            lost: MSS as u32,
            inflight: 50_000,
            rtt: None,
        };
        b.on_rate_sample(now, &rs);
        assert_eq!(b.cwnd(), 51_000);
        b.on_recovery_exit(now + rtt);
        assert_eq!(b.cwnd(), before);
    }

    #[test]
    fn a_timeout_takes_the_loss_window_and_restores_after() {
        let (mut b, t) = settled();
        let before = b.cwnd();
        b.on_rto(ms(t / 1000 + 300), before);
        assert_eq!(b.cwnd(), MSS);
        b.on_loss_recovered(ms(t / 1000 + 301));
        assert_eq!(b.cwnd(), before);
    }

    /// The clock's epoch is the caller's: a first sample an hour into it is not an
    /// expired minimum (which would send a new connection to ProbeRTT at once).
    #[test]
    fn a_late_first_sample_does_not_start_probe_rtt() {
        let mut b = Bbr::new(MSS, 10);
        let rtt = Duration::from_millis(10);
        drive(&mut b, 3_600_000_000, 3, 10_000_000, rtt, 0);
        assert_eq!(b.mode(), Mode::Startup);
        assert!(b.cwnd() > 10 * MSS);
    }

    #[test]
    fn probe_rtt_after_ten_seconds_without_a_new_minimum() {
        let (mut b, t) = settled();
        let rtt = RTT;
        // RTT samples now all above the minimum: 10 s later ProbeRTT drains to 4 segments.
        drive(
            &mut b,
            t,
            1100,
            10_000_000,
            rtt + Duration::from_millis(1),
            0,
        );
        // The filter expired once in that time: ProbeRTT ran and ended.
        assert_ne!(b.mode(), Mode::Startup);
        assert!(b.cwnd() > MIN_CWND_SEGS * MSS);
    }
}
