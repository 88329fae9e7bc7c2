//! NewReno congestion control: RFC 5681 slow start and congestion avoidance with RFC 3465
//! byte counting, RFC 5681 §3.2 / RFC 6582 window changes around fast recovery.

use super::{Common, CongestionControl};
use crate::time::{Duration, Instant};

/// RFC 5681 / RFC 6582 NewReno. See [`CongestionControl`] for the events.
#[derive(Debug, Clone)]
pub struct NewReno {
    common: Common,
    /// Bytes acknowledged in congestion avoidance not yet turned into window growth
    /// (RFC 3465 §2.1 "bytes_acked").
    bytes_acked: usize,
}

impl NewReno {
    /// A controller with SMSS `mss` and an initial window of `iw_segments` (0: RFC 5681
    /// §3.1 eq. 1).
    pub fn new(mss: usize, iw_segments: usize) -> Self {
        NewReno {
            common: Common::new(mss, iw_segments),
            bytes_acked: 0,
        }
    }
}

impl CongestionControl for NewReno {
    fn cwnd(&self) -> usize {
        self.common.cwnd
    }

    fn ssthresh(&self) -> usize {
        self.common.ssthresh
    }

    fn mss(&self) -> usize {
        self.common.mss
    }

    fn on_ack(
        &mut self,
        now: Instant,
        newly_acked: usize,
        flight_size: usize,
        _rtt: Option<Duration>,
    ) {
        let c = &mut self.common;
        c.touch(now);
        c.after_rto = false;
        if c.in_recovery || newly_acked == 0 || !c.cwnd_limited(flight_size) {
            return;
        }
        let mut acked = newly_acked;
        if c.cwnd < c.ssthresh {
            acked = c.slow_start(acked);
        }
        if acked == 0 || c.cwnd < c.ssthresh {
            return;
        }
        // RFC 5681 §3.1 (eq. 3's byte-counting alternative, RFC 3465 §2.1): one SMSS per
        // cwnd of acknowledged bytes, i.e. one SMSS per RTT.
        self.bytes_acked = self.bytes_acked.saturating_add(acked);
        if self.bytes_acked >= c.cwnd {
            self.bytes_acked -= c.cwnd;
            c.cwnd = c.cwnd.saturating_add(c.mss);
            // A huge ACK must not bank growth for many RTTs.
            self.bytes_acked = self.bytes_acked.min(c.cwnd);
        }
    }

    fn on_congestion_event(&mut self, now: Instant, flight_size: usize) {
        let c = &mut self.common;
        c.touch(now);
        if c.in_recovery {
            return;
        }
        c.in_recovery = true;
        // RFC 5681 §3.2 step 2 (eq. 4). cwnd = ssthresh as in RFC 6675 §5 step (4.2); a
        // non-SACK sender adds 3*SMSS through three `on_dup_ack` calls (RFC 5681 §3.2
        // step 3 / RFC 6582 §3.2 step 2 "ssthresh + 3*SMSS").
        c.ssthresh = c.half_flight(flight_size);
        c.cwnd = c.ssthresh;
        self.bytes_acked = 0;
    }

    fn on_dup_ack(&mut self) {
        self.common.on_dup_ack();
    }

    fn on_partial_ack(&mut self, newly_acked: usize) {
        self.common.on_partial_ack(newly_acked);
    }

    fn on_recovery_exit(&mut self, now: Instant) {
        let c = &mut self.common;
        c.touch(now);
        if c.in_recovery {
            c.in_recovery = false;
            // RFC 6582 §3.2 step 3, option 2.
            c.cwnd = c.ssthresh.max(c.mss);
        }
    }

    fn on_rto(&mut self, now: Instant, flight_size: usize) {
        let c = &mut self.common;
        c.touch(now);
        if !c.after_rto {
            // RFC 5681 §3.1 eq. 4; held constant on a repeated timeout.
            c.ssthresh = c.half_flight(flight_size);
        }
        c.after_rto = true;
        c.in_recovery = false;
        // RFC 5681 §3.1: the loss window is one SMSS.
        c.cwnd = c.mss;
        self.bytes_acked = 0;
    }

    fn on_idle_restart(&mut self, now: Instant, rto: Duration) -> bool {
        self.common.idle_restart(now, rto)
    }

    fn set_mss(&mut self, mss: usize) {
        self.common.set_mss(mss);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1000;
    const RTT: Duration = Duration::from_millis(50);

    /// One ack-clocked round: every segment of the window is acknowledged by its own ACK.
    fn round(c: &mut NewReno, now: &mut Instant) {
        let segs = c.cwnd() / MSS;
        let flight = c.cwnd();
        for _ in 0..segs {
            c.on_ack(*now, MSS, flight, Some(RTT));
        }
        *now += RTT;
    }

    #[test]
    fn slow_start_doubles_per_rtt() {
        let mut c = NewReno::new(MSS, 10);
        let mut now = Instant::from_secs(1);
        for r in 0..6 {
            assert_eq!(c.cwnd(), (10 * MSS) << r);
            round(&mut c, &mut now);
        }
    }

    #[test]
    fn stretch_acks_count_in_full_in_slow_start() {
        let mut c = NewReno::new(MSS, 10);
        // One ACK for 8 segments (a GRO or per-batch receiver) grows cwnd by 8 SMSS, as
        // eight ACKs of one would: slow start still doubles per round trip.
        c.on_ack(Instant::ZERO, 8 * MSS, 10 * MSS, None);
        assert_eq!(c.cwnd(), 18 * MSS);
        // Never past ssthresh in slow start.
        let mut d = NewReno::new(MSS, 10);
        d.on_rto(Instant::ZERO, 10 * MSS);
        d.on_ack(Instant::ZERO, 100 * MSS, MSS, None);
        assert!(d.cwnd() <= d.ssthresh() + MSS, "{}", d.cwnd());
    }

    #[test]
    fn congestion_avoidance_is_linear() {
        let mut c = NewReno::new(MSS, 40);
        let mut now = Instant::from_secs(1);
        c.on_congestion_event(now, 40 * MSS);
        c.on_recovery_exit(now);
        assert_eq!(c.ssthresh(), 20 * MSS);
        assert_eq!(c.cwnd(), 20 * MSS);
        assert!(!c.in_slow_start());
        for r in 0..10 {
            assert_eq!(c.cwnd(), (20 + r) * MSS);
            round(&mut c, &mut now);
        }
    }

    #[test]
    fn slow_start_hands_over_at_ssthresh() {
        let mut c = NewReno::new(MSS, 11);
        c.on_rto(Instant::ZERO, 11 * MSS);
        assert_eq!(c.ssthresh(), 5500);
        assert_eq!(c.cwnd(), MSS);
        let mut now = Instant::ZERO;
        for _ in 0..3 {
            round(&mut c, &mut now);
        }
        // 1 -> 2 -> 4 -> 5.5 (stopped at ssthresh) + CA leftovers, never 8.
        assert!(c.cwnd() >= 5500 && c.cwnd() < 7000, "{}", c.cwnd());
    }

    #[test]
    fn congestion_event_halves() {
        let mut c = NewReno::new(MSS, 64);
        let now = Instant::from_secs(1);
        c.on_congestion_event(now, 64 * MSS);
        assert_eq!(c.ssthresh(), 32 * MSS);
        assert_eq!(c.cwnd(), 32 * MSS);
        // Once per recovery.
        c.on_congestion_event(now, 30 * MSS);
        assert_eq!(c.ssthresh(), 32 * MSS);
        // No growth during recovery.
        c.on_ack(now, MSS, 32 * MSS, None);
        assert_eq!(c.cwnd(), 32 * MSS);
        // Floor of 2*SMSS.
        let mut d = NewReno::new(MSS, 10);
        d.on_congestion_event(now, MSS);
        assert_eq!(d.ssthresh(), 2 * MSS);
        // FlightSize above cwnd (the window was just cut) cannot raise the window.
        let mut e = NewReno::new(MSS, 10);
        e.on_congestion_event(now, 64 * MSS);
        assert_eq!(e.ssthresh(), 5 * MSS);
    }

    #[test]
    fn non_sack_recovery_inflate_deflate_rfc6582() {
        let mut c = NewReno::new(MSS, 20);
        let now = Instant::from_secs(1);
        c.on_congestion_event(now, 20 * MSS);
        for _ in 0..3 {
            c.on_dup_ack();
        }
        assert_eq!(c.cwnd(), 13 * MSS);
        c.on_dup_ack();
        assert_eq!(c.cwnd(), 14 * MSS);
        c.on_partial_ack(3 * MSS);
        assert_eq!(c.cwnd(), 12 * MSS);
        c.on_partial_ack(500);
        assert_eq!(c.cwnd(), 11_500);
        c.on_recovery_exit(now);
        assert_eq!(c.cwnd(), 10 * MSS);
        // Outside recovery these do nothing.
        c.on_dup_ack();
        c.on_partial_ack(MSS);
        assert_eq!(c.cwnd(), 10 * MSS);
    }

    #[test]
    fn rto_gives_one_segment_and_holds_ssthresh_on_repeat() {
        let mut c = NewReno::new(MSS, 30);
        let now = Instant::from_secs(1);
        c.on_rto(now, 30 * MSS);
        assert_eq!(c.cwnd(), MSS);
        assert_eq!(c.ssthresh(), 15 * MSS);
        c.on_rto(now, MSS);
        assert_eq!(c.ssthresh(), 15 * MSS);
        assert_eq!(c.cwnd(), MSS);
        c.on_ack(now, MSS, MSS, None);
        assert_eq!(c.cwnd(), 2 * MSS);
        c.on_rto(now, 2 * MSS);
        assert_eq!(c.ssthresh(), 2 * MSS);
    }
}
