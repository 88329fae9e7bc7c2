//! RACK loss detection (RFC 8985 §6), per segment.
//!
//! RACK deems a segment lost once a segment *sent after it* has been delivered and a
//! reordering window has passed since. Duplicate-ACK counting (RFC 5681, RFC 6675
//! IsLost) needs three segments above a hole; RACK does not, so it repairs without a
//! timeout what duplicate ACKs cannot: a lost retransmission (the segments above it were
//! SACKed long ago, and nothing will SACK it again), a loss followed by only one or two
//! segments (the case RFC 5827 early retransmit targets), and, with a tail loss probe
//! (`tlp.rs`), a loss at the tail.
//!
//! The transmission time of every outstanding segment is in the per-segment table
//! (`segs.rs`). On each ACK, every segment the ACK newly delivers (cumulatively or by
//! SACK) updates `RACK.xmit_ts`/`RACK.end_seq`/`RACK.rtt` (§6.2 step 2) and may reveal
//! reordering (step 3); the reordering window adapts (step 4); then every segment sent
//! before the most recently delivered one and outstanding longer than `RACK.rtt +
//! reo_wnd` is marked lost, and the reordering timer is armed for the others (step 5).
//! A retransmission gets a new transmission time, so a lost retransmission is found by
//! the same rule, anywhere in the window, not only at SND.UNA.

use ulnet_wire::SeqNumber;

use crate::time::{Duration, Instant};

use super::segs::{EVER_RTX, LOST, RTX_OUT, SACKED};
use super::{Recovery, Sender, DUP_THRESH};

/// RFC 8985 §6.2 step 4: how many recoveries a widened reordering window persists
/// without a new D-SACK.
const REO_WND_PERSIST: u8 = 16;

/// Most multiples of min_RTT/4 the reordering window grows to (it is capped at SRTT
/// anyway, §6.2 step 4).
const MAX_REO_MULT: u32 = 64;

/// RACK state (RFC 8985 §6.1).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RackState {
    /// RACK.xmit_ts: the latest transmission time of a delivered segment.
    xmit: Option<Instant>,
    /// That transmission's place in the sending order (`SegRec::order`), which stands
    /// for RACK.end_seq as the tie-break (see `sent_after`).
    order: u32,
    /// RACK.rtt: the RTT measured on that segment.
    rtt: Duration,
    /// RACK.min_RTT: the least RTT of never-retransmitted delivered segments.
    min_rtt: Option<Duration>,
    /// RACK.fack: the highest end of a delivered segment.
    fack: SeqNumber,
    /// RACK.reord: reordering was seen (step 3), or a D-SACK reported a needless
    /// retransmission.
    reord: bool,
    /// RACK.reo_wnd_mult.
    reo_mult: u32,
    /// RACK.reo_wnd_persist.
    reo_persist: u8,
    /// RACK.dsack_round: the window widens at most once per round trip.
    dsack_round: Option<SeqNumber>,
    /// D-SACKs counted so far, to notice new ones.
    dsacks_seen: u64,
}

impl RackState {
    pub(crate) fn new(iss: SeqNumber) -> Self {
        RackState {
            xmit: None,
            order: 0,
            rtt: Duration::ZERO,
            min_rtt: None,
            fack: iss,
            reord: false,
            reo_mult: 1,
            reo_persist: 0,
            dsack_round: None,
            dsacks_seen: 0,
        }
    }

    /// RACK.min_RTT: the least RTT of a never-retransmitted delivered segment.
    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// A retransmission timeout: SACK information is forgotten, so RACK.fack restarts
    /// at SND.UNA (else re-delivered segments would look reordered).
    pub(crate) fn on_rto(&mut self, una: SeqNumber) {
        self.fack = una;
    }

    /// A recovery episode ended (RFC 8985 §6.2 step 4: the widened window lasts
    /// `REO_WND_PERSIST` recoveries).
    pub(crate) fn on_recovery_exit(&mut self) {
        if self.reo_persist > 0 {
            self.reo_persist -= 1;
            if self.reo_persist == 0 {
                self.reo_mult = 1;
            }
        }
    }
}

/// The timestamp an ACK echoes (RFC 7323 TSecr) and the connection's timestamp clock
/// offset, to tell which transmission of a segment drew the ACK (RFC 8985 §6.2 step 2).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Echo {
    /// TSecr.
    pub tsecr: u32,
    /// The offset of our TSval clock (`options::ts_clock`).
    pub offset: u32,
}

impl Echo {
    /// The echoed TSval was sent before `xmit` (in the clock's millisecond ticks, so
    /// only a copy at least a tick older is told apart).
    fn before(&self, xmit: Instant) -> bool {
        crate::tcp::options::ts_before(self.tsecr, crate::tcp::options::ts_clock(xmit, self.offset))
    }
}

/// RFC 8985 §6.2 RACK_sent_after: transmission `o1` came after `o2`. The RFC compares
/// (xmit_ts, end_seq); the transmission order (`SegRec::order`) is what that pair
/// approximates, exact also for a retransmission sent in the same clock tick as higher
/// segments before it. Orders are within 2^31 of each other (a table holds far fewer).
#[inline]
fn sent_after(o1: u32, o2: u32) -> bool {
    (o1.wrapping_sub(o2) as i32) > 0
}

impl Recovery {
    /// RFC 8985 §6.2 steps 1 to 3 for one ACK: every record the ACK newly delivers
    /// (below SND.UNA, or covered by a SACKed range) is marked SACKED and updates RACK;
    /// then the table forgets what SND.UNA covers.
    pub(crate) fn rack_on_delivered(&mut self, una: SeqNumber, now: Instant, echo: Option<Echo>) {
        let mut ranges = self.sb.ranges().peekable();
        let highest = self.sb.highest_sacked();
        let r = &mut self.rack;
        let rate = &mut self.rate;
        let prior_fack = r.fack;
        self.segs.update(|seg| {
            if seg.end.diff(una) > 0 && highest.is_none_or(|h| seg.start.diff(h) >= 0) {
                // Records are in sequence order: nothing from here on is covered by the
                // cumulative ACK or a SACK block (no need to walk the whole flight).
                return false;
            }
            if seg.has(SACKED) {
                return true;
            }
            let delivered = if seg.end.diff(una) <= 0 {
                true
            } else {
                while ranges.peek().is_some_and(|&(_, e)| e.diff(seg.start) <= 0) {
                    ranges.next();
                }
                ranges
                    .peek()
                    .is_some_and(|&(s, e)| s.diff(seg.start) <= 0 && e.diff(seg.end) >= 0)
            };
            if !delivered {
                return true;
            }
            let rtx = seg.has(EVER_RTX);
            rate.on_delivered(seg, seg.len(), now, rtx);
            seg.flags = (seg.flags | SACKED) & !RTX_OUT;
            let rtt = now.saturating_duration_since(seg.xmit);
            // Step 2: the delivery of a retransmitted segment is ambiguous. When the ACK
            // echoes a timestamp older than the latest transmission, an earlier copy
            // drew it; so it is when it came faster than any RTT seen. No update then:
            // taking the latest copy's send time for RACK.xmit_ts would make every
            // segment sent before it look overdue (a cascade of spurious
            // retransmissions, seen on the simulated wire with a deep queue).
            if rtx
                && (r.min_rtt.is_some_and(|m| rtt < m) || echo.is_some_and(|e| e.before(seg.xmit)))
            {
                return true;
            }
            // Step 3: a never-retransmitted segment delivered below one delivered before
            // arrived out of order.
            if !rtx && seg.end.diff(prior_fack) < 0 {
                r.reord = true;
            }
            if !rtx {
                r.min_rtt = Some(r.min_rtt.map_or(rtt, |m| m.min(rtt)));
            }
            if r.fack.diff(seg.end) < 0 {
                r.fack = seg.end;
            }
            let newer = r.xmit.is_none() || sent_after(seg.order, r.order);
            if newer {
                r.rtt = rtt;
                r.xmit = Some(seg.xmit);
                r.order = seg.order;
            }
            true
        });
        self.segs.advance(una, &mut self.rate, now);
    }

    /// RFC 8985 §6.2 step 4, RACK_update_reo_wnd: the reordering window now.
    fn reo_wnd(&mut self, una: SeqNumber, nxt: SeqNumber, srtt: Option<Duration>) -> Duration {
        let r = &mut self.rack;
        if r.dsack_round.is_some_and(|d| una.diff(d) >= 0) {
            r.dsack_round = None;
        }
        if self.dsacks != r.dsacks_seen {
            r.dsacks_seen = self.dsacks;
            // A D-SACK: a retransmission was needless, so the window was too small
            // (Linux also takes it as a sign of reordering).
            r.reord = true;
            if r.dsack_round.is_none() {
                r.dsack_round = Some(nxt);
                r.reo_mult = (r.reo_mult + 1).min(MAX_REO_MULT);
                r.reo_persist = REO_WND_PERSIST;
            }
        }
        if !r.reord {
            let in_recovery = self.in_recovery || self.rtx_nxt.is_some();
            let sacked = self.segs.sacked_count();
            if in_recovery || sacked >= usize::from(DUP_THRESH) {
                return Duration::ZERO;
            }
        }
        let Some(base) = r.min_rtt.or(srtt) else {
            return Duration::ZERO;
        };
        let w = (base / 4).saturating_mul(r.reo_mult);
        match srtt {
            Some(s) => w.min(s),
            None => w,
        }
    }

    /// RFC 8985 §6.2 step 5 (RACK_detect_loss), after an ACK was processed or when the
    /// reordering timer fired: marks lost every segment sent before the most recently
    /// delivered one whose deadline passed, arms the timer for the latest of the
    /// others' deadlines, and starts recovery when a loss is found outside it. Returns
    /// true when it marked a segment lost.
    pub(crate) fn rack_detect(&mut self, p: &mut Sender<'_>, now: Instant) -> bool {
        if !self.table_on() || p.seq.una() == p.seq.nxt() || p.timers.persist() {
            p.timers.stop_reo();
            return false;
        }
        let reo = self.reo_wnd(p.seq.una(), p.seq.nxt(), p.rtt.srtt());
        if self.rack.xmit.is_none() {
            p.timers.stop_reo();
            return false;
        }
        let (rack_order, rack_rtt) = (self.rack.order, self.rack.rtt);
        let mut lost = false;
        let mut timeout: Option<Instant> = None;
        let newly_lost = &mut self.newly_lost;
        self.segs.update(|seg| {
            // Only segments believed in flight: not delivered, not already lost with no
            // copy out.
            if seg.has(SACKED) || (seg.has(LOST) && !seg.has(RTX_OUT)) {
                return true;
            }
            if !sent_after(rack_order, seg.order) {
                return true;
            }
            let deadline = seg.xmit + rack_rtt + reo;
            if deadline <= now {
                seg.flags = (seg.flags | LOST) & !RTX_OUT;
                lost = true;
                *newly_lost = newly_lost.saturating_add(seg.len());
            } else {
                timeout = Some(timeout.map_or(deadline, |t| t.max(deadline)));
            }
            true
        });
        match timeout {
            Some(t) => p.timers.arm_reo(t),
            None => p.timers.stop_reo(),
        }
        if lost && !self.in_recovery && self.rtx_nxt.is_none() {
            if self.fresh_episode(p.seq) {
                self.enter_recovery(p, now);
            } else {
                // Within the window of the last reduction (RFC 6582 §3.2 step 2): repair
                // without reducing again.
                self.enter_recovery_no_reduction(p);
            }
        }
        lost
    }
}
