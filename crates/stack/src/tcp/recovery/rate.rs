//! Delivery rate estimation (draft-cheng-iccrg-delivery-rate-estimation-02, the scheme
//! Linux implements in `tcp_rate.c`): on every ACK, how fast the path delivered data
//! over the last round trip. A model-based congestion controller (BBR, `congestion/bbr.rs`)
//! builds its bottleneck-bandwidth estimate from these samples.
//!
//! The connection keeps running totals (`C.delivered`, `C.delivered_time`,
//! `C.first_sent_time`, `C.app_limited`, draft §3.1); every transmission snapshots them
//! into its segment record (`SegRec`, draft §3.2 "per-packet state"); when a record is
//! delivered (cumulatively acknowledged or SACKed) the totals advance and the newest
//! delivered transmission becomes the sample's reference (§3.3); at the end of the ACK the
//! sample is the data delivered since that transmission over the longer of its send and
//! ACK intervals (§3.4), which keeps an ACK-compressed burst from looking fast.

use crate::tcp::congestion::RateSample;
use crate::time::{Duration, Instant};

use super::segs::SegRec;

/// µs between two instants, saturating to `u32` (about 71 minutes: a record outstanding
/// longer is long dead).
#[inline]
fn micros_u32(later: Instant, earlier: Instant) -> u32 {
    later
        .saturating_duration_since(earlier)
        .as_micros()
        .min(u128::from(u32::MAX)) as u32
}

/// The connection's delivery totals and the sample under construction for one ACK.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rate {
    /// C.delivered: bytes delivered so far.
    delivered: u64,
    /// C.delivered_time: when `delivered` last grew.
    delivered_time: Instant,
    /// C.first_sent_time: the send time of the newest delivered transmission (the start
    /// of the current send interval).
    first_sent: Instant,
    /// C.app_limited: while nonzero, samples taken before `delivered` passes it were
    /// limited by the application, not the network (draft §3.5).
    app_limited: u64,
    /// This ACK delivered a record: the fields below describe the newest one (RS.*).
    have: bool,
    /// RS.prior_delivered: C.delivered when that transmission left.
    prior_delivered: u64,
    /// RS.prior_time: C.delivered_time when it left.
    prior_time: Instant,
    /// RS.send_elapsed, µs.
    send_elapsed: u32,
    /// RS.is_app_limited.
    sample_app_limited: bool,
    /// The newest delivered record's RTT, µs, if it was never retransmitted (Karn: a
    /// retransmitted one's is ambiguous); `u32::MAX`: none. (Not an `Option<Duration>`:
    /// the control block's size is watched, `control_block_sizes`.)
    rtt_us: u32,
    /// C.delivered at the end of the previous ACK: what this one delivered is the
    /// difference (exact, where SND.UNA's advance also counts bytes SACKed before).
    delivered_before: u64,
    /// The latest valid sample, bytes per second (0: none yet).
    last_rate: u64,
}

impl Default for Rate {
    fn default() -> Self {
        Rate {
            delivered: 0,
            delivered_time: Instant::ZERO,
            first_sent: Instant::ZERO,
            app_limited: 0,
            have: false,
            prior_delivered: 0,
            prior_time: Instant::ZERO,
            send_elapsed: 0,
            sample_app_limited: false,
            rtt_us: u32::MAX,
            delivered_before: 0,
            last_rate: 0,
        }
    }
}

impl Rate {
    /// The latest valid sample, bytes per second.
    pub(crate) fn last_rate(&self) -> Option<u64> {
        (self.last_rate > 0).then_some(self.last_rate)
    }

    /// Snapshots the totals into a record sent at `now` (draft §3.2, "upon each packet
    /// transmission"). `idle`: nothing was in flight before it, so a new send interval
    /// starts here (§3.2: "if no packets in flight, C.first_sent_time = C.delivered_time
    /// = Now()").
    #[inline]
    pub(crate) fn on_sent(&mut self, rec: &mut SegRec, now: Instant, idle: bool) {
        if idle {
            self.first_sent = now;
            self.delivered_time = now;
        }
        rec.delivered = self.delivered as u32;
        rec.since_delivered = micros_u32(now, self.delivered_time);
        rec.since_first = micros_u32(now, self.first_sent);
        rec.app_limited = self.app_limited != 0;
    }

    /// `len` bytes of `rec` were delivered at `now` (draft §3.3, UpdateRateSample).
    #[inline]
    pub(crate) fn on_delivered(&mut self, rec: &SegRec, len: u32, now: Instant, rtx: bool) {
        self.delivered += u64::from(len);
        self.delivered_time = now;
        // The record holds C.delivered's low 32 bits; the full value is the total less
        // what was delivered since (under 4 GiB in flight: always).
        let since = (self.delivered as u32).wrapping_sub(rec.delivered);
        let rec_delivered = self.delivered.wrapping_sub(u64::from(since));
        // Of the records this ACK delivers, the most recently sent one defines the sample.
        if !self.have || rec_delivered >= self.prior_delivered {
            self.have = true;
            self.prior_delivered = rec_delivered;
            self.prior_time = rec.xmit - Duration::from_micros(u64::from(rec.since_delivered));
            self.send_elapsed = rec.since_first;
            self.sample_app_limited = rec.app_limited;
            self.first_sent = rec.xmit;
            self.rtt_us = if rtx {
                u32::MAX
            } else {
                micros_u32(now, rec.xmit).min(u32::MAX - 1)
            };
        }
    }

    /// The sender has nothing more to send and room in its window: samples until what is
    /// in flight now has been delivered measure the application, not the path (draft
    /// §3.5, "C.app_limited = (C.delivered + C.inflight) or 1").
    pub(crate) fn mark_app_limited(&mut self, inflight: u32) {
        self.app_limited = (self.delivered + u64::from(inflight)).max(1);
    }

    /// Ends the ACK (draft §3.4, GenerateRateSample): the sample, with the bytes this ACK
    /// delivered (acknowledged for the first time, cumulatively or by SACK), those it marked
    /// lost, and what is in flight after it. `min_rtt`: an interval shorter than the least
    /// RTT seen cannot be a real round trip (an ACK of a retransmission of old data, or a
    /// clock step): no rate then.
    pub(crate) fn take_sample(
        &mut self,
        now: Instant,
        min_rtt: Option<Duration>,
        lost: u32,
        inflight: u32,
    ) -> RateSample {
        if self.app_limited != 0 && self.delivered > self.app_limited {
            self.app_limited = 0;
        }
        let acked_sacked = (self.delivered - self.delivered_before).min(u64::from(u32::MAX)) as u32;
        self.delivered_before = self.delivered;
        let mut rs = RateSample {
            total_delivered: self.delivered,
            acked_sacked,
            lost,
            inflight,
            ..RateSample::default()
        };
        if !core::mem::take(&mut self.have) {
            return rs;
        }
        rs.prior_delivered = self.prior_delivered;
        rs.delivered = self.delivered - self.prior_delivered;
        rs.is_app_limited = self.sample_app_limited;
        rs.rtt = (self.rtt_us != u32::MAX).then(|| Duration::from_micros(u64::from(self.rtt_us)));
        let ack_elapsed = now.saturating_duration_since(self.prior_time);
        let send_elapsed = Duration::from_micros(u64::from(self.send_elapsed));
        let interval = ack_elapsed.max(send_elapsed);
        if rs.delivered > 0 && min_rtt.is_none_or(|m| interval >= m) && !interval.is_zero() {
            rs.interval = Some(interval);
            let r = u128::from(rs.delivered) * 1_000_000 / interval.as_micros().max(1);
            self.last_rate = r.min(u128::from(u64::MAX)) as u64;
        }
        rs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ulnet_wire::SeqNumber;

    fn rec(start: u32, len: u32) -> SegRec {
        SegRec {
            start: SeqNumber(start),
            end: SeqNumber(start + len),
            xmit: Instant::ZERO,
            order: 0,
            flags: 0,
            app_limited: false,
            delivered: 0,
            since_delivered: 0,
            since_first: 0,
        }
    }

    fn us(n: u64) -> Instant {
        Instant::from_micros(n)
    }

    /// A steady flow: 1000-byte segments sent 10 µs apart, each delivered 100 µs after it
    /// left. Once segments sent after the first delivery come back (a round trip in),
    /// each sample is 1000 bytes per 10 µs: the rate the path delivered, 100 MB/s.
    /// Before that, the first round's samples are lower (the pipe was filling).
    #[test]
    fn a_steady_flow_samples_its_rate() {
        let mut r = Rate::default();
        let mut recs = Vec::new();
        for k in 0..40u64 {
            let mut g = rec(k as u32 * 1000, 1000);
            g.xmit = us(1000 + k * 10);
            let at = g.xmit;
            r.on_sent(&mut g, at, k == 0);
            recs.push(g);
            // Deliveries of earlier records happen between the sends.
            if k >= 10 {
                let d = recs[(k - 10) as usize];
                r.on_delivered(&d, 1000, us(1000 + k * 10 + 5), false);
                let rs = r.take_sample(
                    us(1000 + k * 10 + 5),
                    Some(Duration::from_micros(50)),
                    0,
                    9000,
                );
                let i = rs.interval.expect("valid sample");
                let rate = rs.delivered as f64 / i.as_secs_f64();
                if k >= 21 {
                    assert!((rate - 100e6).abs() < 1e6, "k={k}: {rate}");
                } else {
                    assert!(rate < 100e6, "k={k}: {rate}");
                }
            }
        }
    }

    /// An ACK that arrives in a compressed burst does not inflate the rate: the send
    /// interval bounds it.
    #[test]
    fn ack_compression_is_bounded_by_the_send_interval() {
        let mut r = Rate::default();
        let mut recs = Vec::new();
        for k in 0..10u64 {
            let mut g = rec(k as u32 * 1000, 1000);
            g.xmit = us(k * 100);
            let at = g.xmit;
            r.on_sent(&mut g, at, k == 0);
            recs.push(g);
        }
        // All ten ACKed in one burst 50 µs after the last left.
        for g in &recs {
            r.on_delivered(g, 1000, us(950), false);
        }
        let rs = r.take_sample(us(950), None, 0, 0);
        let i = rs.interval.unwrap();
        assert_eq!(i, Duration::from_micros(950));
        assert_eq!(rs.delivered, 10_000);
    }

    #[test]
    fn app_limited_marks_samples_until_the_flight_is_delivered() {
        let mut r = Rate::default();
        r.mark_app_limited(2000);
        let mut a = rec(0, 1000);
        r.on_sent(&mut a, us(0), true);
        assert!(a.app_limited);
        r.on_delivered(&a, 1000, us(100), false);
        assert!(r.take_sample(us(100), None, 0, 1000).is_app_limited);
        let mut b = rec(1000, 1000);
        r.on_sent(&mut b, us(100), false);
        r.on_delivered(&b, 1000, us(200), false);
        r.take_sample(us(200), None, 0, 0);
        // 2000 delivered is not past the mark of 2000; one more byte is.
        let mut c = rec(2000, 1000);
        r.on_sent(&mut c, us(200), true);
        assert!(c.app_limited);
        r.on_delivered(&c, 1000, us(300), false);
        r.take_sample(us(300), None, 0, 0);
        let mut d = rec(3000, 1000);
        r.on_sent(&mut d, us(300), true);
        assert!(!d.app_limited);
    }

    #[test]
    fn no_delivery_no_rate() {
        let mut r = Rate::default();
        let rs = r.take_sample(us(5), None, 0, 0);
        assert!(rs.interval.is_none());
        assert_eq!(rs.delivered, 0);
    }
}
