//! The deadlines of one connection ([`Timers`]), owned by the control block and armed
//! by the parts that decide them (loss recovery arms `pto`/`reo` and restarts `rtx`;
//! `socket/timer.rs` runs them when they fire and documents each one). Fields are
//! private; each deadline has named arm / stop / take methods and each flag a request /
//! done pair, so every place that touches one timer can be found by name.
//!
//! The layer files only the earliest of them in its timer queue (one entry per
//! connection, not one per timer), see [`Timers::next`].

use crate::time::Instant;

/// The deadlines of one connection, plus work the timers left for output. Fields are
/// private: each is armed, stopped and taken through a named method, so a reader can
/// find every place that touches one timer by its method's name.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Timers {
    /// Retransmission or (with `persist`) window-probe deadline.
    rtx: Option<Instant>,
    /// `rtx` is the persist timer.
    persist: bool,
    /// Tail loss probe deadline (RFC 8985 §7.2).
    pto: Option<Instant>,
    /// A tail loss probe is due.
    tlp_due: bool,
    /// RACK reordering-window deadline (RFC 8985 §6.3).
    reo: Option<Instant>,
    /// Delayed-ACK deadline.
    delack: Option<Instant>,
    /// Keepalive / FIN-WAIT-2 / TIME-WAIT deadline.
    idle: Option<Instant>,
    /// When to look whether the buffers' storage can be given back (`socket/mem.rs`).
    reclaim: Option<Instant>,
    /// When a pacing congestion controller lets the next burst of new data leave.
    pace: Option<Instant>,
    /// A window probe is due.
    probe_due: bool,
    /// A keepalive probe is due.
    keepalive_due: bool,
    /// Unanswered keepalive probes.
    keepalive_sent: u8,
}

/// Clears `slot` and returns true when its deadline has passed.
#[inline]
fn take_due(slot: &mut Option<Instant>, now: Instant) -> bool {
    if slot.is_some_and(|t| t <= now) {
        *slot = None;
        return true;
    }
    false
}

impl Timers {
    /// The earliest deadline.
    #[inline]
    pub(crate) fn next(&self) -> Option<Instant> {
        // Pairwise, not an iterator over an array of the six: the array was built on the
        // stack with 8-byte stores and read back with 16-byte loads, a store-forwarding
        // stall per element on every segment (~8% of the receiving core at MTU 1500,
        // docs/performance-log.md, "Session 11").
        fn min(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
            match (a, b) {
                (Some(x), Some(y)) => Some(if y < x { y } else { x }),
                (x, None) => x,
                (None, y) => y,
            }
        }
        let a = min(self.rtx, self.pto);
        let b = min(self.reo, self.delack);
        let c = min(self.idle, self.reclaim);
        min(min(a, b), min(c, self.pace))
    }

    // ---- retransmission / persist (`rtx`) ----

    /// The retransmission (or persist) deadline, if running.
    #[inline]
    pub(crate) fn rtx(&self) -> Option<Instant> {
        self.rtx
    }

    /// (Re)starts the retransmission timer to fire at `at`.
    #[inline]
    pub(crate) fn arm_rtx(&mut self, at: Instant) {
        self.rtx = Some(at);
    }

    /// Starts the retransmission timer at `at` unless it is already running (RFC 6298
    /// §5.1).
    #[inline]
    pub(crate) fn arm_rtx_if_stopped(&mut self, at: Instant) {
        self.rtx = self.rtx.or(Some(at));
    }

    /// Stops the retransmission timer.
    #[inline]
    pub(crate) fn stop_rtx(&mut self) {
        self.rtx = None;
    }

    /// Whether `rtx` is the persist timer (RFC 9293 §3.8.6.1).
    #[inline]
    pub(crate) fn persist(&self) -> bool {
        self.persist
    }

    /// `rtx` becomes the persist timer, firing at `at`.
    #[inline]
    pub(crate) fn start_persist(&mut self, at: Instant) {
        self.persist = true;
        self.rtx = Some(at);
    }

    /// `rtx` is the retransmission timer again (its deadline is left as it is).
    #[inline]
    pub(crate) fn stop_persist(&mut self) {
        self.persist = false;
    }

    /// Takes an expired `rtx`: true (and stopped) when it was due at `now`.
    #[inline]
    pub(crate) fn take_rtx(&mut self, now: Instant) -> bool {
        take_due(&mut self.rtx, now)
    }

    // ---- window probe ----

    /// A window probe is due.
    #[inline]
    pub(crate) fn probe_due(&self) -> bool {
        self.probe_due
    }

    /// The persist timer fired: output sends a window probe.
    #[inline]
    pub(crate) fn request_probe(&mut self) {
        self.probe_due = true;
    }

    /// The window probe went out, or is no longer wanted.
    #[inline]
    pub(crate) fn probe_done(&mut self) {
        self.probe_due = false;
    }

    // ---- tail loss probe (`pto`, RFC 8985 §7) ----

    /// Arms the tail loss probe timer at `at`.
    #[inline]
    pub(crate) fn arm_pto(&mut self, at: Instant) {
        self.pto = Some(at);
    }

    /// Stops the tail loss probe timer.
    #[inline]
    pub(crate) fn stop_pto(&mut self) {
        self.pto = None;
    }

    /// Takes an expired `pto`: true (and stopped) when it was due at `now`.
    #[inline]
    pub(crate) fn take_pto(&mut self, now: Instant) -> bool {
        take_due(&mut self.pto, now)
    }

    /// A tail loss probe is due.
    #[inline]
    pub(crate) fn tlp_due(&self) -> bool {
        self.tlp_due
    }

    /// The PTO fired: output sends a tail loss probe.
    #[inline]
    pub(crate) fn request_tlp(&mut self) {
        self.tlp_due = true;
    }

    /// The tail loss probe went out, or may not be sent.
    #[inline]
    pub(crate) fn tlp_done(&mut self) {
        self.tlp_due = false;
    }

    // ---- RACK reordering window (`reo`, RFC 8985 §6.3) ----

    /// Whether the reordering window has passed at `now` (RACK clears it).
    #[inline]
    pub(crate) fn reo_due(&self, now: Instant) -> bool {
        self.reo.is_some_and(|t| t <= now)
    }

    /// (Re)arms the reordering timer for `at` (RFC 8985 §6.2 step 5: the timer is set to
    /// the latest pending deadline on every run of RACK).
    #[inline]
    pub(crate) fn arm_reo(&mut self, at: Instant) {
        self.reo = Some(at);
    }

    /// Stops the reordering-window timer.
    #[inline]
    pub(crate) fn stop_reo(&mut self) {
        self.reo = None;
    }

    // ---- pacing ----

    /// The pacer holds new data until `at` (an output pass follows the timer).
    #[inline]
    pub(crate) fn arm_pace(&mut self, at: Instant) {
        self.pace = Some(at);
    }

    /// Takes an expired pacing deadline: true (and stopped) when it was due at `now`.
    #[inline]
    pub(crate) fn take_pace(&mut self, now: Instant) -> bool {
        take_due(&mut self.pace, now)
    }

    // ---- delayed ACK (RFC 1122 §4.2.3.2) ----

    /// Whether an ACK is being delayed.
    #[inline]
    pub(crate) fn delack_pending(&self) -> bool {
        self.delack.is_some()
    }

    /// Delays the ACK until `at`.
    #[inline]
    pub(crate) fn arm_delack(&mut self, at: Instant) {
        self.delack = Some(at);
    }

    /// Delays the ACK until `at` at the latest: an earlier deadline already set stands.
    #[inline]
    pub(crate) fn arm_delack_by(&mut self, at: Instant) {
        if self.delack.is_none_or(|t| t > at) {
            self.delack = Some(at);
        }
    }

    /// An ACK went out: nothing is delayed any more.
    #[inline]
    pub(crate) fn stop_delack(&mut self) {
        self.delack = None;
    }

    /// Takes an expired delayed ACK: true (and stopped) when it was due at `now`.
    #[inline]
    pub(crate) fn take_delack(&mut self, now: Instant) -> bool {
        take_due(&mut self.delack, now)
    }

    // ---- keepalive / FIN-WAIT-2 / TIME-WAIT (`idle`) ----

    /// Arms the idle deadline at `at`.
    #[inline]
    pub(crate) fn arm_idle(&mut self, at: Instant) {
        self.idle = Some(at);
    }

    /// Stops the idle deadline.
    #[inline]
    pub(crate) fn stop_idle(&mut self) {
        self.idle = None;
    }

    /// Takes an expired idle deadline: true (and stopped) when it was due at `now`.
    #[inline]
    pub(crate) fn take_idle(&mut self, now: Instant) -> bool {
        take_due(&mut self.idle, now)
    }

    /// A keepalive probe is due.
    #[inline]
    pub(crate) fn keepalive_due(&self) -> bool {
        self.keepalive_due
    }

    /// Unanswered keepalive probes so far.
    #[inline]
    pub(crate) fn keepalive_sent(&self) -> u8 {
        self.keepalive_sent
    }

    /// The keepalive timer fired: output sends one more probe.
    #[inline]
    pub(crate) fn request_keepalive(&mut self) {
        self.keepalive_sent += 1;
        self.keepalive_due = true;
    }

    /// The keepalive probe went out.
    #[inline]
    pub(crate) fn keepalive_done(&mut self) {
        self.keepalive_due = false;
    }

    /// The peer was heard from: no keepalive probe is unanswered.
    #[inline]
    pub(crate) fn reset_keepalive_count(&mut self) {
        self.keepalive_sent = 0;
    }

    // ---- buffer storage reclaim (`socket/mem.rs`) ----

    /// Whether a reclaim check is scheduled.
    #[inline]
    pub(crate) fn reclaim_armed(&self) -> bool {
        self.reclaim.is_some()
    }

    /// The reclaim check's deadline, if scheduled.
    #[inline]
    pub(crate) fn reclaim(&self) -> Option<Instant> {
        self.reclaim
    }

    /// Schedules a reclaim check at `at`.
    #[inline]
    pub(crate) fn arm_reclaim(&mut self, at: Instant) {
        self.reclaim = Some(at);
    }

    /// Takes an expired reclaim check: true (and stopped) when it was due at `now`.
    #[inline]
    pub(crate) fn take_reclaim(&mut self, now: Instant) -> bool {
        take_due(&mut self.reclaim, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// `next` is the earliest armed deadline, whichever subset is armed.
        #[test]
        fn next_is_the_earliest_armed(at in proptest::collection::vec(proptest::option::of(0u64..1_000), 6)) {
            let mut t = Timers::default();
            let arms: [fn(&mut Timers, Instant); 6] = [
                Timers::arm_rtx,
                Timers::arm_pto,
                Timers::arm_reo,
                Timers::arm_delack,
                Timers::arm_idle,
                Timers::arm_reclaim,
            ];
            for (arm, a) in arms.iter().zip(&at) {
                if let Some(us) = a {
                    arm(&mut t, Instant::from_micros(*us));
                }
            }
            let want = at.iter().flatten().min().map(|us| Instant::from_micros(*us));
            prop_assert_eq!(t.next(), want);
        }
    }
}
