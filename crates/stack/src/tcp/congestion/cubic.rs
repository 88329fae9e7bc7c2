//! CUBIC congestion control (RFC 9438).
//!
//! Windows in the RFC's formulas are in segments and time in seconds; the controller
//! converts at the edges and keeps `cwnd` in bytes. Slow start, the loss window and the
//! restart window are RFC 5681's (RFC 9438 §4.10, §4.8).

use super::{Common, CongestionControl};
use crate::time::{Duration, Instant};

/// C of RFC 9438 §5.1 (segments / s^3).
const C: f64 = 0.4;
/// β_cubic of RFC 9438 §4.6.
const BETA: f64 = 0.7;
/// α_cubic of RFC 9438 §4.3: 3 * (1 - β) / (1 + β).
const ALPHA: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);

/// The cubic window function W_cubic(t) = C*(t-K)^3 + W_max (RFC 9438 §4.2, Figure 1),
/// in segments; `t` and `k` in seconds.
pub fn w_cubic(t: f64, k: f64, w_max: f64) -> f64 {
    let d = t - k;
    C * d * d * d + w_max
}

/// K of RFC 9438 §4.2 (Figure 2): the time the cubic function takes to climb from
/// `cwnd_epoch` back to `w_max`, in seconds; zero when already there.
pub fn cubic_k(w_max: f64, cwnd_epoch: f64) -> f64 {
    if w_max <= cwnd_epoch {
        0.0
    } else {
        cbrt((w_max - cwnd_epoch) / C)
    }
}

// Float functions that `core` lacks: std's where there is std (so a std build computes
// exactly what it always did), libm's in a `no_std` build.
#[cfg(feature = "std")]
fn cbrt(x: f64) -> f64 {
    x.cbrt()
}
#[cfg(not(feature = "std"))]
fn cbrt(x: f64) -> f64 {
    libm::cbrt(x)
}
#[cfg(feature = "std")]
fn floor(x: f64) -> f64 {
    x.floor()
}
#[cfg(not(feature = "std"))]
fn floor(x: f64) -> f64 {
    libm::floor(x)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The current congestion avoidance stage (RFC 9438 §4.2).
#[derive(Debug, Clone, Copy)]
struct Epoch {
    /// t_epoch.
    start: Instant,
    /// K, seconds.
    k: f64,
    /// W_max for this stage, segments.
    w_max: f64,
    /// W_est of the Reno-friendly region (§4.3), segments.
    w_est: f64,
}

/// RFC 9438 CUBIC. See [`CongestionControl`] for the events.
#[derive(Debug, Clone)]
pub struct Cubic {
    common: Common,
    /// W_max: the window before the last reduction, after fast convergence (§4.7);
    /// `None` before the first congestion event and after a timeout (§4.8).
    w_max: Option<f64>,
    /// cwnd_prior: the window before the last reduction (§4.3 switches α to 1 once
    /// W_est reaches it), segments.
    cwnd_prior: f64,
    epoch: Option<Epoch>,
    /// The RTT to look ahead by (§4.4: target = W_cubic(t + RTT)).
    rtt: Option<Duration>,
    /// Fractional bytes of window growth not yet added to `cwnd`.
    frac: f64,
}

impl Cubic {
    /// A controller with SMSS `mss` and an initial window of `iw_segments` (0: RFC 5681
    /// §3.1 eq. 1).
    pub fn new(mss: usize, iw_segments: usize) -> Self {
        Cubic {
            common: Common::new(mss, iw_segments),
            w_max: None,
            cwnd_prior: 0.0,
            epoch: None,
            rtt: None,
            frac: 0.0,
        }
    }

    /// W_max in segments, if a congestion event set it.
    pub fn w_max(&self) -> Option<f64> {
        self.w_max
    }

    /// K of the current congestion avoidance stage, seconds.
    pub fn k(&self) -> Option<f64> {
        self.epoch.map(|e| e.k)
    }

    fn segments(&self, bytes: usize) -> f64 {
        bytes as f64 / self.common.mss as f64
    }

    /// Starts a congestion avoidance stage at `now` (RFC 9438 §4.2, §4.8, §4.10: with no
    /// W_max, or a window already above it, K = 0 and W_max = the current window).
    fn start_epoch(&mut self, now: Instant) -> Epoch {
        let cwnd_epoch = self.segments(self.common.cwnd);
        let w_max = match self.w_max {
            Some(w) if w > cwnd_epoch => w,
            _ => cwnd_epoch,
        };
        let e = Epoch {
            start: now,
            k: cubic_k(w_max, cwnd_epoch),
            w_max,
            w_est: cwnd_epoch,
        };
        self.epoch = Some(e);
        self.frac = 0.0;
        e
    }

    /// Congestion avoidance for `acked` bytes (RFC 9438 §4.3-4.5).
    fn avoid(&mut self, now: Instant, acked: usize) {
        let mut e = match self.epoch {
            Some(e) => e,
            None => self.start_epoch(now),
        };
        let mss = self.common.mss as f64;
        let cwnd = self.segments(self.common.cwnd).max(1.0);
        // One ACK cannot stand for more than a window of growth (stretch ACKs, or an
        // ACK after the window was cut with more outstanding).
        let acked_segs = (acked as f64 / mss).min(cwnd);
        let t = secs(now.saturating_duration_since(e.start));
        // §4.3: W_est grows like Reno with α_cubic, and like Reno itself (α = 1) once it
        // has reached the window before the last reduction.
        let alpha = if e.w_est >= self.cwnd_prior {
            1.0
        } else {
            ALPHA
        };
        e.w_est += alpha * acked_segs / cwnd;
        self.epoch = Some(e);
        let target = if w_cubic(t, e.k, e.w_max) < e.w_est {
            // §4.3 Reno-friendly region: cwnd = W_est.
            e.w_est
        } else {
            // §4.4 concave / §4.5 convex: aim at W_cubic one RTT ahead, within
            // [cwnd, 1.5 cwnd], and move (target - cwnd) / cwnd per acknowledged segment.
            let rtt = self.rtt.map_or(0.0, secs);
            let w = w_cubic(t + rtt, e.k, e.w_max).clamp(cwnd, 1.5 * cwnd);
            cwnd + ((w - cwnd) / cwnd * acked_segs).min(w - cwnd)
        };
        if target > cwnd {
            self.frac += (target - cwnd) * mss;
            // Bounded: the window cannot exceed what a usize counts.
            let whole = floor(self.frac).min(usize::MAX as f64 / 2.0);
            self.frac -= whole;
            self.common.cwnd = self.common.cwnd.saturating_add(whole as usize);
        }
    }

    /// RFC 9438 §4.6 and §4.7: the multiplicative decrease, shared by fast retransmit
    /// and timeouts. Returns the new ssthresh.
    fn reduce(&mut self) -> usize {
        let cwnd = self.segments(self.common.cwnd);
        // §4.7 fast convergence: a flow that lost ground releases more.
        self.w_max = Some(match self.w_max {
            Some(w) if cwnd < w => cwnd * (1.0 + BETA) / 2.0,
            _ => cwnd,
        });
        self.cwnd_prior = cwnd;
        self.epoch = None;
        self.frac = 0.0;
        // §4.6: ssthresh = cwnd * β_cubic, at least 2 segments. Using cwnd (not
        // FlightSize) is safe because `on_ack` stops growth while the sender is
        // rate-limited (RFC 7661 §4.3).
        let ss = (self.common.cwnd as f64 * BETA) as usize;
        ss.max(2 * self.common.mss)
    }
}

impl CongestionControl for Cubic {
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
        rtt: Option<Duration>,
    ) {
        self.common.touch(now);
        self.common.after_rto = false;
        if let Some(r) = rtt {
            self.rtt = Some(r);
        }
        if self.common.in_recovery || newly_acked == 0 || !self.common.cwnd_limited(flight_size) {
            return;
        }
        let mut acked = newly_acked;
        if self.common.cwnd < self.common.ssthresh {
            acked = self.common.slow_start(acked);
        }
        if acked > 0 && self.common.cwnd >= self.common.ssthresh {
            self.avoid(now, acked);
        }
    }

    fn on_congestion_event(&mut self, now: Instant, _flight_size: usize) {
        self.common.touch(now);
        if self.common.in_recovery {
            return;
        }
        self.common.in_recovery = true;
        let ss = self.reduce();
        self.common.ssthresh = ss;
        // §4.6: cwnd = max(ssthresh, 2 segments) on loss.
        self.common.cwnd = ss;
    }

    fn on_dup_ack(&mut self) {
        self.common.on_dup_ack();
    }

    fn on_partial_ack(&mut self, newly_acked: usize) {
        self.common.on_partial_ack(newly_acked);
    }

    fn on_recovery_exit(&mut self, now: Instant) {
        self.common.touch(now);
        if self.common.in_recovery {
            self.common.in_recovery = false;
            // RFC 6582 §3.2 step 3, option 2; the next ACK starts the new stage.
            self.common.cwnd = self.common.ssthresh.max(self.common.mss);
            self.epoch = None;
        }
    }

    fn on_rto(&mut self, now: Instant, _flight_size: usize) {
        self.common.touch(now);
        if !self.common.after_rto {
            // §4.8: ssthresh by β_cubic as in §4.6, and the first stage after the
            // timeout starts with K = 0 and W_max = the window at its start.
            self.common.ssthresh = self.reduce();
            self.w_max = None;
        }
        self.common.after_rto = true;
        self.common.in_recovery = false;
        self.epoch = None;
        // RFC 5681 §3.1 loss window.
        self.common.cwnd = self.common.mss;
    }

    fn on_idle_restart(&mut self, now: Instant, rto: Duration) -> bool {
        let restarted = self.common.idle_restart(now, rto);
        if restarted {
            // The cubic function measures time since the stage began; an idle period is
            // not growth time, so a new stage begins at the next ACK.
            self.epoch = None;
        }
        restarted
    }

    fn set_mss(&mut self, mss: usize) {
        self.common.set_mss(mss);
        self.epoch = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1000;

    #[test]
    fn k_matches_rfc_formula() {
        // W_max = 100, cwnd_epoch = 70 (β = 0.7): K = cbrt(100 * 0.3 / 0.4).
        let k = cubic_k(100.0, 70.0);
        assert!((k - 75f64.cbrt()).abs() < 1e-12);
        assert!((w_cubic(k, k, 100.0) - 100.0).abs() < 1e-12);
        assert!((w_cubic(0.0, k, 100.0) - 70.0).abs() < 1e-9);
        assert_eq!(cubic_k(50.0, 70.0), 0.0);
    }

    #[test]
    fn congestion_event_beta_and_fast_convergence() {
        let mut c = Cubic::new(MSS, 100);
        let now = Instant::from_secs(1);
        c.on_congestion_event(now, 100 * MSS);
        assert_eq!(c.cwnd(), 70 * MSS);
        assert_eq!(c.ssthresh(), 70 * MSS);
        assert_eq!(c.w_max(), Some(100.0));
        c.on_recovery_exit(now);
        // A second loss below the old W_max: fast convergence (§4.7).
        c.on_congestion_event(now, 70 * MSS);
        assert_eq!(c.w_max(), Some(70.0 * 1.7 / 2.0));
        assert_eq!(c.cwnd(), 49 * MSS);
        // Floor of 2 segments.
        let mut d = Cubic::new(MSS, 2);
        d.on_congestion_event(now, 2 * MSS);
        assert_eq!(d.cwnd(), 2 * MSS);
    }

    #[test]
    fn rto_loss_window_then_k_zero() {
        let mut c = Cubic::new(MSS, 100);
        let now = Instant::from_secs(1);
        c.on_rto(now, 100 * MSS);
        assert_eq!(c.cwnd(), MSS);
        assert_eq!(c.ssthresh(), 70 * MSS);
        c.on_rto(now, MSS);
        assert_eq!(c.ssthresh(), 70 * MSS);
        // Slow start back to ssthresh, then the first stage has K = 0 (§4.8).
        let mut t = now;
        while c.in_slow_start() {
            t += Duration::from_millis(1);
            c.on_ack(t, MSS, c.cwnd(), Some(Duration::from_millis(10)));
        }
        c.on_ack(t, MSS, c.cwnd(), Some(Duration::from_millis(10)));
        assert_eq!(c.k(), Some(0.0));
    }

    #[test]
    fn rate_limited_sender_does_not_grow() {
        let mut c = Cubic::new(MSS, 10);
        for i in 0..100 {
            c.on_ack(Instant::from_millis(i), MSS, 2 * MSS, None);
        }
        assert_eq!(c.cwnd(), 10 * MSS);
    }

    /// An ack-clocked flow over a path with a fixed RTT and no losses after one
    /// congestion event at W_max = 200 segments: cwnd follows the RFC 9438 curve
    /// W_cubic(t) = C*(t-K)^3 + W_max through the concave and the convex region.
    #[test]
    fn follows_cubic_curve_in_simulation() {
        let rtt = Duration::from_millis(100);
        let mut c = Cubic::new(MSS, 200);
        let t0 = Instant::from_secs(10);
        c.on_congestion_event(t0, 200 * MSS);
        c.on_recovery_exit(t0);
        let k = 150f64.cbrt();
        let mut now = t0;
        let mut epoch_start = None;
        let mut checked = 0;
        for _round in 0..110 {
            // One window of segments leaves at `now`; their ACKs come back spread over
            // the next RTT, each acknowledging one segment.
            let segs = c.cwnd() / MSS;
            let flight = c.cwnd();
            let round_start = now;
            for j in 0..segs {
                let at = round_start + rtt.mul_f64((j + 1) as f64 / segs as f64);
                epoch_start.get_or_insert(at);
                c.on_ack(at, MSS, flight, Some(rtt));
            }
            now = round_start + rtt;
            let t = secs(now - epoch_start.unwrap());
            let want = w_cubic(t, k, 200.0);
            let got = c.cwnd() as f64 / MSS as f64;
            // The window chases the curve one RTT ahead, in whole-segment rounds: allow
            // 3% or 2 segments.
            let tol = (want * 0.03).max(2.0);
            eprintln!("ERR {:.3} {:.2}", t, got - want);
            assert!(
                (got - want).abs() <= tol,
                "t={t:.2}s cwnd={got:.1} W_cubic={want:.1}"
            );
            checked += 1;
        }
        assert_eq!(checked, 110);
        // The run crossed W_max (at t = K = 5.3 s) deep into the convex region.
        assert!(c.cwnd() > 260 * MSS, "{}", c.cwnd());
        assert!((c.k().unwrap() - k).abs() < 1e-9);
    }

    /// With a short RTT the cubic curve is slower than Reno; W_est takes over (§4.3).
    #[test]
    fn reno_friendly_region() {
        let rtt = Duration::from_millis(1);
        let mut c = Cubic::new(MSS, 20);
        let t0 = Instant::from_secs(1);
        c.on_congestion_event(t0, 20 * MSS);
        c.on_recovery_exit(t0);
        assert_eq!(c.cwnd(), 14 * MSS);
        let mut now = t0;
        for _ in 0..40 {
            let segs = c.cwnd() / MSS;
            let flight = c.cwnd();
            for _ in 0..segs {
                c.on_ack(now, MSS, flight, Some(rtt));
            }
            now += rtt;
        }
        // 40 ms of cubic growth from 14 toward 20 segments is a fraction of a segment.
        // W_est grows by α = 3(1-β)/(1+β) per RTT up to cwnd_prior = 20 (about 11.3
        // RTTs), then by 1 per RTT: about 48.7 after 40 RTTs, less the per-ACK lag.
        let got = c.cwnd() / MSS;
        assert!((45..=49).contains(&got), "{got}");
    }
}
