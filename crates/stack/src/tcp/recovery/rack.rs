//! RACK-style loss detection for the segment at SND.UNA (RFC 8985 §6).
//!
//! RACK deems a segment lost once a segment *sent after it* has been delivered and a
//! reordering window has passed since. Duplicate-ACK counting (RFC 5681, RFC 6675
//! IsLost) needs three segments above a hole; RACK does not, so it repairs without a
//! timeout what duplicate ACKs cannot: a lost retransmission (the segments above it were
//! SACKed long ago, and nothing will SACK it again), a loss followed by only one or two
//! segments (the case RFC 5827 early retransmit targets), and, with a tail loss probe
//! (`tlp.rs`), a loss at the tail.
//!
//! This engine keeps no per-segment send times (the send buffer is a byte ring), so RACK
//! is applied where a missed loss costs a timeout: the segment at SND.UNA. For it we keep
//! `mark`, a sequence number such that every byte at or above it was first sent after the
//! segment's latest transmission: just above it for an original transmission (new data
//! goes out in sequence order), SND.NXT at the moment it was retransmitted, and, when
//! SND.UNA moves onto a hole retransmitted at an unknown moment, SND.NXT then (a later,
//! so safe, bound). A SACK at or above `mark` is RACK's "a segment sent later was
//! delivered"; the reordering timer then starts from the ACK's arrival, which is no
//! earlier than RFC 8985's deadline `xmit_ts + RACK.rtt + reo_wnd` (the delivered
//! segment's send time plus its RTT is the ACK's arrival, and our segment was sent before
//! it), so detection may be slightly later than RACK's, never earlier.
//!
//! The reordering window (§6.2 step 4) is SRTT/4, scaled up after D-SACKs reveal
//! spurious retransmissions, at most SRTT; zero during recovery while no reordering has
//! been seen.

use ulnet_wire::SeqNumber;

use crate::time::{Duration, Instant};

use super::{Recovery, Sender};

/// Most multiples of SRTT/4 the reordering window grows to (RFC 8985 §6.2: up to SRTT).
const MAX_REO_MULT: u32 = 4;

/// RACK state for the segment at SND.UNA.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RackState {
    /// The SND.UNA `mark` belongs to.
    una: SeqNumber,
    /// Bytes at or above this were first sent after the latest transmission at `una`.
    mark: SeqNumber,
    /// Reordering window in quarters of SRTT (RFC 8985 §6.2 RACK.reo_wnd_mult).
    reo_mult: u32,
    /// Reordering was seen (a D-SACK): keep a window even in recovery.
    reordering_seen: bool,
    /// D-SACKs counted so far, to notice new ones.
    dsacks_seen: u64,
}

impl RackState {
    pub(crate) fn new(iss: SeqNumber) -> Self {
        RackState {
            una: iss,
            mark: iss + 1,
            reo_mult: 1,
            reordering_seen: false,
            dsacks_seen: 0,
        }
    }

    /// The segment at `una` was (re)sent now; `mark` is SND.NXT after it.
    pub(crate) fn reset(&mut self, una: SeqNumber, mark: SeqNumber) {
        self.una = una;
        self.mark = mark;
    }
}

impl Recovery {
    fn reo_wnd(&mut self, srtt: Option<Duration>) -> Option<Duration> {
        let srtt = srtt?;
        let r = &mut self.rack;
        if self.dsacks != r.dsacks_seen {
            // RFC 8985 §6.2 step 4: a D-SACK means we retransmitted needlessly; widen.
            r.dsacks_seen = self.dsacks;
            r.reordering_seen = true;
            r.reo_mult = (r.reo_mult + 1).min(MAX_REO_MULT);
        }
        let in_recovery = self.in_recovery || self.rtx_nxt.is_some();
        if in_recovery && !r.reordering_seen {
            return Some(Duration::ZERO);
        }
        Some((srtt / 4).saturating_mul(r.reo_mult).min(srtt))
    }

    /// Runs RACK for the segment at SND.UNA after an ACK was processed or the reordering
    /// timer fired: arms the timer, or marks the segment lost (fast retransmit, entering
    /// recovery when this loss starts a new episode). Returns true when it declared a loss.
    pub(crate) fn rack_detect(&mut self, p: &mut Sender<'_>, now: Instant) -> bool {
        if !self.rack_on || !self.sack || p.seq.una() == p.seq.nxt() || p.timers.persist() {
            p.timers.stop_reo();
            return false;
        }
        if self.rack.una != p.seq.una() {
            let una = p.seq.una();
            let mark = if una.diff(self.high_rxt) < 0 {
                p.seq.nxt()
            } else {
                una + 1
            };
            self.rack.reset(una, mark);
            p.timers.stop_reo();
        }
        let sent_later_delivered = self
            .sb
            .highest_sacked()
            .is_some_and(|h| h.diff(self.rack.mark) > 0);
        if !sent_later_delivered || self.fast_rtx {
            p.timers.stop_reo();
            return false;
        }
        let Some(wnd) = self.reo_wnd(p.rtt.srtt()) else {
            p.timers.stop_reo();
            return false;
        };
        let due = p.timers.arm_reo_if_stopped(now + wnd);
        if due > now {
            return false;
        }
        p.timers.stop_reo();
        if !self.in_recovery && self.rtx_nxt.is_none() && self.fresh_episode(p.seq) {
            self.enter_recovery(p, now);
        } else {
            self.fast_rtx = true;
        }
        // Not again for this transmission: the retransmission sets a new mark.
        let nxt = p.seq.nxt();
        self.rack.reset(p.seq.una(), nxt);
        true
    }
}
