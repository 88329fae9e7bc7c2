//! Round-trip time estimation and the retransmission timeout (RTO).
//!
//! Read first: RFC 6298 (the estimator and timer), RFC 7323 §4 and Appendix G (RTT
//! samples from timestamps), Karn & Partridge 1987 (ambiguous samples).
//!
//! In: RTT samples and back-off/ack events from the sender. Out: the current RTO.
//! Time is a microsecond clock (RFC 6298 §4 recommends fine granularity); everything is
//! integer microseconds with saturating arithmetic.
//!
//! ## Which samples are valid (Karn's rule, RFC 6298 §3)
//! A sample taken by timing a segment and its acknowledgement MUST NOT come from a
//! segment that was retransmitted: the ack is ambiguous. [`RttSampler`] enforces that
//! (any retransmission cancels the measurement). Samples from the timestamp option
//! (RFC 7323 §4.1: `now - TSecr` on an acceptable ACK that advances SND.UNA) are
//! unambiguous and may be taken for retransmitted segments too; feed them to
//! [`RttEstimator::sample`] directly.

use crate::time::{Duration, Instant};
use ulnet_wire::SeqNumber;

/// The RFC 6298 estimator: smoothed RTT, RTT variance, RTO, and the exponential back-off
/// of §5.5.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    /// SRTT in microseconds, `None` before the first sample.
    srtt: Option<u64>,
    /// RTTVAR in microseconds.
    rttvar: u64,
    /// The RTO without back-off, in microseconds.
    base_rto: u64,
    min_rto: u64,
    max_rto: u64,
    /// G, the clock granularity of RFC 6298 §2.
    granularity: u64,
    /// Lower bound on the variance term K*RTTVAR (Linux's use of its minimum RTO); 0 =
    /// plain RFC 6298.
    min_var: u64,
    /// Number of consecutive back-offs (§5.5) since the last reset.
    backoff: u32,
}

/// K of RFC 6298 §2.
const K: u64 = 4;
/// Enough doublings to reach any `max_rto` from one microsecond; further back-offs are
/// counted but do not change the RTO.
const MAX_SHIFT: u32 = 40;

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl RttEstimator {
    /// Default G: one millisecond, the coarsest timer tick a runtime is expected to have.
    pub const DEFAULT_GRANULARITY: Duration = Duration::from_millis(1);

    /// An estimator with no samples: `rto()` is `initial_rto` (RFC 6298 §2.1 says 1 s),
    /// clamped to `[min_rto, max_rto]`. RFC 6298 §2.4 sets `min_rto` at 1 s; most stacks
    /// use 200 ms. `max_rto` is the §2.5 upper bound (at least 60 s). If `max_rto <
    /// min_rto`, `max_rto` is raised to `min_rto`.
    pub fn new(initial_rto: Duration, min_rto: Duration, max_rto: Duration) -> Self {
        let min_rto = micros(min_rto);
        let max_rto = micros(max_rto).max(min_rto);
        RttEstimator {
            srtt: None,
            rttvar: 0,
            base_rto: micros(initial_rto).clamp(min_rto, max_rto),
            min_rto,
            max_rto,
            granularity: micros(Self::DEFAULT_GRANULARITY),
            min_var: 0,
            backoff: 0,
        }
    }

    /// Sets G, the clock granularity added to the variance term (RFC 6298 §2). Takes
    /// effect at the next sample.
    pub fn set_granularity(&mut self, g: Duration) {
        self.granularity = micros(g);
    }

    /// Sets a lower bound on the variance term: RTO = SRTT + max(G, K*RTTVAR, `floor`),
    /// as Linux applies its minimum RTO (`tcp_set_rto`: RTTVAR is never taken below
    /// `rto_min`), instead of, or besides, the floor on the whole RTO (RFC 6298 §2.4).
    ///
    /// Why: RFC 6298 §2.4 says the RTO SHOULD be rounded up to 1 s and allows a lower
    /// floor; with one sample per round trip on a steady path RTTVAR decays towards
    /// zero, so a floor on the whole RTO leaves it barely above SRTT once SRTT exceeds the
    /// floor (a 200 ms path gets RTO ≈ 1.0-1.3 × RTT) and any queueing spike fires a
    /// spurious timeout. A floor on the variance keeps RTO ≥ SRTT + floor on every path,
    /// which is never less conservative than the whole-RTO floor. Takes effect at the next
    /// sample. Zero gives plain RFC 6298.
    pub fn set_min_variance(&mut self, floor: Duration) {
        self.min_var = micros(floor);
    }

    /// Feeds one RTT measurement (RFC 6298 §2.2 for the first, §2.3 after), recomputes
    /// the RTO, and resets the back-off: a valid sample means the path answers again
    /// (§5.7). The caller is responsible for Karn's rule (module docs).
    pub fn sample(&mut self, rtt: Duration) {
        self.sample_weighted(rtt, 1);
    }

    /// [`RttEstimator::sample`] for a sender that takes many samples per RTT (timestamps
    /// on every ACK): RFC 7323 Appendix G divides alpha and beta by the number of samples
    /// expected per RTT (`expected_samples`, e.g. `max(cwnd / (2 * SMSS), 1)` with
    /// delayed ACKs), so the estimator's memory stays about one RTT's worth of history
    /// as RFC 6298 intended. `expected_samples` of 0 or 1 is the plain update.
    pub fn sample_weighted(&mut self, rtt: Duration, expected_samples: u32) {
        let r = micros(rtt);
        let n = u64::from(expected_samples.max(1));
        match self.srtt {
            None => {
                // §2.2: SRTT <- R, RTTVAR <- R/2.
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                // §2.3 with alpha = 1/8, beta = 1/4 (each divided by n); RTTVAR first,
                // using the old SRTT.
                let err = srtt.abs_diff(r);
                if n == 1 {
                    // The common case (one sample a round trip) by constants: shifts, not
                    // the four divisions of the general form (an ACK's costliest lines).
                    self.rttvar = self.rttvar - self.rttvar / 4 + err / 4;
                    self.srtt = Some(srtt - srtt / 8 + r / 8);
                } else {
                    let var_den = 4 * n;
                    let srtt_den = 8 * n;
                    self.rttvar = self.rttvar - self.rttvar / var_den + err / var_den;
                    self.srtt = Some(srtt - srtt / srtt_den + r / srtt_den);
                }
            }
        }
        let srtt = self.srtt.unwrap_or(r);
        // §2.2/2.3: RTO <- SRTT + max(G, K*RTTVAR); §2.4 floor; §2.5 ceiling.
        let var = self
            .granularity
            .max(self.rttvar.saturating_mul(K))
            .max(self.min_var);
        self.base_rto = srtt.saturating_add(var).clamp(self.min_rto, self.max_rto);
        self.backoff = 0;
    }

    /// The current retransmission timeout, back-off included, never above `max_rto`.
    pub fn rto(&self) -> Duration {
        let shift = self.backoff.min(MAX_SHIFT);
        let rto = if shift > self.base_rto.leading_zeros() {
            u64::MAX
        } else {
            self.base_rto << shift
        };
        Duration::from_micros(rto.min(self.max_rto))
    }

    /// The smoothed RTT, or `None` before the first sample.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt.map(Duration::from_micros)
    }

    /// The RTT variance (zero before the first sample).
    pub fn rttvar(&self) -> Duration {
        Duration::from_micros(self.rttvar)
    }

    /// Doubles the RTO after a retransmission timeout fired (RFC 6298 §5.5), up to
    /// `max_rto`.
    pub fn backoff(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }

    /// Undoes the back-off: call when an ACK acknowledges new data (RFC 6298 §5.7 allows
    /// collapsing the RTO then; the next sample would recompute it anyway).
    pub fn reset_backoff(&mut self) {
        self.backoff = 0;
    }

    /// Consecutive back-offs since the last reset; the sender compares it with its retry
    /// limit (RFC 9293 §3.8.3, R2) to abort the connection.
    pub fn backoff_count(&self) -> u32 {
        self.backoff
    }

    /// Forgets all samples, e.g. after many back-offs (RFC 6298 §5 note: the estimate may
    /// be stale after repeated timeouts). The back-off count is kept.
    pub fn reset_samples(&mut self, initial_rto: Duration) {
        self.srtt = None;
        self.rttvar = 0;
        self.base_rto = micros(initial_rto).clamp(self.min_rto, self.max_rto);
    }
}

/// Times one segment at a time for RTT samples when timestamps are not in use
/// (RFC 6298 §3, RFC 9293 §3.8.1). A retransmission cancels the measurement (Karn).
#[derive(Debug, Clone, Default)]
pub struct RttSampler {
    /// The sequence number an ACK must reach, and when the timed segment was sent.
    timing: Option<(SeqNumber, Instant)>,
}

impl RttSampler {
    /// An idle sampler.
    pub fn new() -> Self {
        RttSampler { timing: None }
    }

    /// Starts timing a segment sent at `now` whose last byte is just before `seq` (its
    /// end: `seq_start + len`), unless a measurement is already running. Returns whether
    /// timing started.
    pub fn start(&mut self, seq: SeqNumber, now: Instant) -> bool {
        if self.timing.is_some() {
            return false;
        }
        self.timing = Some((seq, now));
        true
    }

    /// Feeds a cumulative ACK. When it covers the timed segment (`ack >= seq`), returns the
    /// elapsed time and goes idle; otherwise keeps waiting.
    pub fn on_ack(&mut self, ack: SeqNumber, now: Instant) -> Option<Duration> {
        let (seq, sent) = self.timing?;
        if ack >= seq {
            self.timing = None;
            Some(now.saturating_duration_since(sent))
        } else {
            None
        }
    }

    /// Cancels the measurement: some data was retransmitted, so the ACK that would end it
    /// could be for either copy (Karn's rule, RFC 6298 §3).
    pub fn on_retransmit(&mut self) {
        self.timing = None;
    }

    /// A measurement is running.
    pub fn is_running(&self) -> bool {
        self.timing.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn est() -> RttEstimator {
        RttEstimator::new(Duration::from_secs(1), ms(200), Duration::from_secs(60))
    }

    #[test]
    fn initial_rto() {
        let e = est();
        assert_eq!(e.rto(), Duration::from_secs(1));
        assert_eq!(e.srtt(), None);
        assert_eq!(e.rttvar(), Duration::ZERO);
    }

    /// Finding 8 (secondary): on a steady 200 ms path RTTVAR decays, and a floor on the
    /// whole RTO leaves it barely above SRTT; a floor on the variance term keeps SRTT +
    /// 200 ms.
    #[test]
    fn variance_floor_keeps_rto_above_srtt() {
        let mut rfc = est();
        let mut linux = est();
        linux.set_min_variance(ms(200));
        for _ in 0..100 {
            rfc.sample(ms(200));
            linux.sample(ms(200));
        }
        assert!(rfc.rto() < ms(210), "{:?}", rfc.rto());
        assert_eq!(linux.rto(), ms(400));
        // Short paths: the floor dominates as well (RTO = SRTT + 200 ms).
        let mut lan = est();
        lan.set_min_variance(ms(200));
        lan.sample(ms(1));
        assert_eq!(lan.rto(), ms(201));
    }

    #[test]
    fn first_sample_rfc6298_2_2() {
        let mut e = est();
        e.sample(ms(100));
        assert_eq!(e.srtt(), Some(ms(100)));
        assert_eq!(e.rttvar(), ms(50));
        // 100 + 4*50 = 300 ms.
        assert_eq!(e.rto(), ms(300));
    }

    #[test]
    fn subsequent_sample_rfc6298_2_3() {
        let mut e = est();
        e.sample(ms(100));
        e.sample(ms(180));
        // RTTVAR = 3/4*50 + 1/4*|100-180| = 37.5 + 20 = 57.5 ms
        // SRTT = 7/8*100 + 1/8*180 = 87.5 + 22.5 = 110 ms
        assert_eq!(e.rttvar(), Duration::from_micros(57_500));
        assert_eq!(e.srtt(), Some(ms(110)));
        assert_eq!(e.rto(), ms(110 + 230));
    }

    #[test]
    fn weighted_samples_rfc7323_appendix_g() {
        let mut a = est();
        let mut b = est();
        a.sample(ms(100));
        b.sample(ms(100));
        a.sample_weighted(ms(180), 1);
        b.sample(ms(180));
        assert_eq!(a.srtt(), b.srtt());
        assert_eq!(a.rttvar(), b.rttvar());
        // With 10 samples per RTT each moves SRTT by 1/80 of the error.
        a.sample_weighted(ms(270), 10);
        assert_eq!(a.srtt(), Some(ms(110) - ms(110) / 80 + ms(270) / 80));
        assert_eq!(a.srtt(), Some(ms(112)));
    }

    #[test]
    fn min_rto_floor_and_granularity() {
        let mut e = est();
        for _ in 0..50 {
            e.sample(ms(1));
        }
        assert_eq!(e.rto(), ms(200));
        let mut e = RttEstimator::new(ms(1), Duration::ZERO, ms(1000));
        e.set_granularity(ms(5));
        for _ in 0..100 {
            e.sample(ms(10));
        }
        // RTTVAR decays toward 0, so G dominates: 10 + 5.
        assert_eq!(e.rto(), ms(15));
    }

    #[test]
    fn backoff_doubles_and_clamps() {
        let mut e = est();
        e.sample(ms(100));
        e.backoff();
        assert_eq!(e.rto(), ms(600));
        e.backoff();
        assert_eq!(e.rto(), ms(1200));
        for _ in 0..100 {
            e.backoff();
        }
        assert_eq!(e.rto(), Duration::from_secs(60));
        assert_eq!(e.backoff_count(), 102);
        e.reset_backoff();
        assert_eq!(e.rto(), ms(300));
        e.backoff();
        e.sample(ms(100));
        assert_eq!(e.backoff_count(), 0);
    }

    #[test]
    fn sampler_karn() {
        let mut s = RttSampler::new();
        let t0 = Instant::from_millis(10);
        let seq = SeqNumber(u32::MAX - 100);
        assert!(s.start(seq + 1000, t0));
        assert!(!s.start(seq + 2000, t0));
        assert_eq!(s.on_ack(seq + 500, t0 + ms(5)), None);
        assert_eq!(s.on_ack(seq + 1000, t0 + ms(40)), Some(ms(40)));
        assert!(!s.is_running());
        assert!(s.start(seq + 2000, t0));
        s.on_retransmit();
        assert_eq!(s.on_ack(seq + 3000, t0 + ms(40)), None);
    }

    proptest! {
        #[test]
        fn never_panics_and_stays_in_bounds(
            samples in proptest::collection::vec(any::<u64>(), 0..50),
            backoffs in 0u32..200,
            init in any::<u64>(), lo in any::<u64>(), hi in any::<u64>(),
        ) {
            let mut e = RttEstimator::new(
                Duration::from_micros(init), Duration::from_micros(lo), Duration::from_micros(hi));
            for (i, s) in samples.into_iter().enumerate() {
                e.sample_weighted(Duration::from_micros(s), i as u32 % 5);
                let rto = micros(e.rto());
                prop_assert!(rto >= lo.min(hi.max(lo)) && rto <= hi.max(lo));
            }
            let before = e.rto();
            for _ in 0..backoffs {
                e.backoff();
                prop_assert!(e.rto() >= before);
                prop_assert!(micros(e.rto()) <= hi.max(lo));
            }
        }
    }
}
