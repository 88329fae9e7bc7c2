//! The deadlines of one connection ([`Timers`]): plain data, owned by the control block
//! and armed by the parts that decide them (loss recovery arms `pto`/`reo` and restarts
//! `rtx`; `socket/timer.rs` runs them when they fire and documents each one).
//!
//! The layer files only the earliest of them in its timer queue (one entry per
//! connection, not one per timer), see [`Timers::next`].

use crate::time::Instant;

/// The deadlines of one connection, plus work the timers left for output.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Timers {
    /// Retransmission or (with `persist`) window-probe deadline.
    pub rtx: Option<Instant>,
    /// `rtx` is the persist timer.
    pub persist: bool,
    /// Tail loss probe deadline (RFC 8985 §7.2).
    pub pto: Option<Instant>,
    /// A tail loss probe is due.
    pub tlp_due: bool,
    /// RACK reordering-window deadline (RFC 8985 §6.3).
    pub reo: Option<Instant>,
    /// Delayed-ACK deadline.
    pub delack: Option<Instant>,
    /// Keepalive / FIN-WAIT-2 / TIME-WAIT deadline.
    pub idle: Option<Instant>,
    /// A window probe is due.
    pub probe_due: bool,
    /// A keepalive probe is due.
    pub keepalive_due: bool,
    /// Unanswered keepalive probes.
    pub keepalive_sent: u8,
}

impl Timers {
    /// The earliest deadline.
    #[inline]
    pub(crate) fn next(&self) -> Option<Instant> {
        [self.rtx, self.pto, self.reo, self.delack, self.idle]
            .into_iter()
            .flatten()
            .min()
    }
}
