//! Proportional Rate Reduction (RFC 6937), the PRR-SSRB variant (§3.1, the one Linux
//! uses), for the sending rate during SACK-based fast recovery.
//!
//! Setting `cwnd = ssthresh` at the start of recovery (RFC 6675) makes the sender fall
//! silent until the pipe drains below the new window, then send in a burst; with many
//! losses the pipe can fall far below `ssthresh` and slow start is needed afterwards.
//! PRR instead spreads the reduction over the recovery round trip: for every byte the
//! receiver reports delivered it sends `ssthresh / RecoverFS` bytes while the pipe is
//! above `ssthresh` (proportional part), and once the pipe is below it, grows it back
//! towards `ssthresh` by at most one segment more than was delivered (slow-start
//! reduction bound, SSRB). At the end of recovery `cwnd = ssthresh` (the controller's
//! `on_recovery_exit`).
//!
//! As in Linux, the result is a window, `pipe + sndcnt` at the last ACK: a segment may
//! be sent while the pipe is below it. So a segment that RACK's timer marks lost between
//! ACKs (it leaves the pipe) may be retransmitted at once.

/// PRR state of one recovery episode (RFC 6937 §3 variables).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Prr {
    /// prr_delivered: bytes the receiver reported delivered since recovery began.
    delivered: u64,
    /// prr_out: bytes sent (new data and retransmissions) since recovery began.
    out: u64,
    /// RecoverFS: the flight size when recovery began (a flight is below 2^31).
    recover_fs: u32,
    /// `pipe + sndcnt` at the last ACK: the window in force during recovery.
    cwnd: u32,
}

impl Prr {
    /// Recovery begins with `flight` bytes outstanding (RecoverFS) and the new
    /// `ssthresh`. Until the first ACK is accounted, one segment may go (the fast
    /// retransmit, RFC 5681 §3.2 step 2).
    pub(crate) fn start(&mut self, flight: usize, _ssthresh: usize) {
        *self = Prr {
            delivered: 0,
            out: 0,
            recover_fs: flight.clamp(1, u32::MAX as usize) as u32,
            cwnd: 0,
        };
    }

    /// A transmission of `n` bytes during recovery.
    pub(crate) fn on_sent(&mut self, n: u32) {
        self.out = self.out.saturating_add(u64::from(n));
    }

    /// RFC 6937 §3, on every ACK during recovery: `delivered` is this ACK's DeliveredData
    /// (bytes newly acknowledged cumulatively or by SACK), `pipe` the pipe after it.
    /// Returns sndcnt.
    pub(crate) fn on_ack(&mut self, delivered: u32, pipe: u32, ssthresh: usize, mss: u32) -> u32 {
        self.delivered = self.delivered.saturating_add(u64::from(delivered));
        let ssthresh = ssthresh.min(u32::MAX as usize) as u64;
        let pipe64 = u64::from(pipe);
        let sndcnt = if pipe64 > ssthresh {
            // Proportional: CEIL(prr_delivered * ssthresh / RecoverFS) - prr_out.
            let target =
                (self.delivered.saturating_mul(ssthresh)).div_ceil(u64::from(self.recover_fs));
            target.saturating_sub(self.out)
        } else {
            // PRR-SSRB: MIN(ssthresh - pipe, MAX(prr_delivered - prr_out, DeliveredData)
            // + MSS).
            let limit = self
                .delivered
                .saturating_sub(self.out)
                .max(u64::from(delivered))
                .saturating_add(u64::from(mss));
            (ssthresh - pipe64).min(limit)
        };
        // The fast retransmit goes out whatever the arithmetic says (Linux does the same:
        // at least one segment while nothing was sent in this recovery).
        let sndcnt = if self.out == 0 {
            sndcnt.max(u64::from(mss))
        } else {
            sndcnt
        };
        let sndcnt = sndcnt.min(u64::from(u32::MAX)) as u32;
        self.cwnd = pipe.saturating_add(sndcnt);
        sndcnt
    }

    /// Bytes that may be sent now with `pipe` in the network (0: none). Before the first
    /// ACK of the episode is accounted, the fast retransmit's segment.
    pub(crate) fn room(&self, pipe: u32) -> u32 {
        if self.out == 0 && self.cwnd == 0 {
            return u32::MAX;
        }
        self.cwnd.saturating_sub(pipe)
    }

    /// The PRR window, for tests.
    #[cfg(test)]
    pub(crate) fn cwnd(&self) -> u32 {
        self.cwnd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    /// RFC 6937 §4 (the example of Figure 1's shape): 20 segments in flight, one lost,
    /// ssthresh = 10 segments (Reno's half). Each ACK delivers one segment; PRR sends one
    /// segment for every second ACK while the pipe is above ssthresh, so after 18 ACKs
    /// it has sent 9 (prr_out = ceil(18 * 10 / 20) = 9), and the pipe ends at ssthresh.
    #[test]
    fn proportional_part_sends_ssthresh_over_recoverfs() {
        let mut p = Prr::default();
        p.start(20 * MSS as usize, 10 * MSS as usize);
        let mut pipe = 19 * MSS; // the lost one left the pipe
        let mut sent = Vec::new();
        // The fast retransmit may go before the first ACK's accounting.
        assert!(p.room(pipe) >= MSS);
        p.on_sent(MSS);
        pipe += MSS;
        for ack in 1..=18u32 {
            pipe -= MSS;
            p.on_ack(MSS, pipe, 10 * MSS as usize, MSS);
            while p.room(pipe) > 0 {
                p.on_sent(MSS);
                pipe += MSS;
                sent.push(ack);
            }
        }
        // prr_out = 1 (fast retransmit) + new data: ceil(18 * 10000 / 20000) = 9 in all.
        assert_eq!(p.out, 9 * u64::from(MSS));
        // One segment per two ACKs, never a burst (the fast retransmit took the first
        // two ACKs' share); at ACK 17 the pipe is down to ssthresh and SSRB takes over,
        // sending what ACK 18 delivers.
        assert_eq!(sent, vec![3, 5, 7, 9, 11, 13, 15, 18], "{sent:?}");
        assert_eq!(pipe, 10 * MSS);
    }

    /// Below ssthresh (heavy loss), SSRB grows the pipe by at most one segment more
    /// than was delivered on each ACK: slow start, not a burst to ssthresh.
    #[test]
    fn ssrb_bounds_the_growth_below_ssthresh() {
        let mut p = Prr::default();
        p.start(20 * MSS as usize, 10 * MSS as usize);
        // 15 of 20 lost: the pipe is 5 segments after the first ACK.
        let pipe = 5 * MSS;
        let sndcnt = p.on_ack(MSS, pipe, 10 * MSS as usize, MSS);
        // MIN(ssthresh - pipe, MAX(prr_delivered - prr_out, DeliveredData) + MSS).
        assert_eq!(sndcnt, 2 * MSS);
        p.on_sent(2 * MSS);
        let sndcnt = p.on_ack(3 * MSS, pipe + 2 * MSS - 3 * MSS, 10 * MSS as usize, MSS);
        // prr_delivered - prr_out = 2 segments, DeliveredData = 3: 3 + 1 = 4.
        assert_eq!(sndcnt, 4 * MSS);
        // Never above ssthresh.
        let sndcnt = p.on_ack(MSS, 9 * MSS, 10 * MSS as usize, MSS);
        assert_eq!(sndcnt, MSS);
        assert_eq!(p.cwnd(), 10 * MSS);
    }

    /// No delivery reported and the pipe above ssthresh: nothing may be sent, except
    /// that the first segment of the episode (the fast retransmit) always may.
    #[test]
    fn nothing_delivered_nothing_sent_but_the_fast_retransmit() {
        let mut p = Prr::default();
        p.start(10 * MSS as usize, 5 * MSS as usize);
        assert_eq!(p.on_ack(0, 9 * MSS, 5 * MSS as usize, MSS), MSS);
        p.on_sent(MSS);
        assert_eq!(p.on_ack(0, 10 * MSS, 5 * MSS as usize, MSS), 0);
        assert_eq!(p.room(10 * MSS), 0);
    }
}
