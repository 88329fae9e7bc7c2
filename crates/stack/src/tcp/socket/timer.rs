//! Per-connection timers, kept as a handful of deadlines whose minimum the layer files
//! in its timer queue (one entry per connection, not one per timer).
//!
//! - `rtx`: the retransmission timer (RFC 6298 §5) for SYN, data and FIN, or, while the
//!   peer's window is zero, the persist timer (RFC 9293 §3.8.6.1, RFC 1122 §4.2.2.17)
//!   with the same exponential backoff.
//! - `pto`: the tail loss probe timeout (RFC 8985 §7.2), never later than `rtx`.
//! - `reo`: RACK's reordering window for the segment at SND.UNA (RFC 8985 §6.3).
//! - `delack`: the delayed ACK deadline (RFC 1122 §4.2.3.2).
//! - `idle`: keepalive (RFC 1122 §4.2.3.6), the orphaned FIN-WAIT-2 limit, or the 2*MSL
//!   of TIME-WAIT (RFC 9293 §3.10.7.4), depending on the state.
//!
//! Giving up: SYN after `syn_retries`, data after `max_retransmits` backoffs or when
//! the user timeout (RFC 5482 / RFC 9293 §3.8.3) passes, keepalive after `count` probes.

use crate::time::{Duration, Instant};

use crate::tcp::config::TcpConfig;
use crate::tcp::error::ConnError;
use crate::tcp::state::State;
use crate::tcp::timers::Timers;

use super::{Cx, Socket};

impl Socket {
    /// Restarts the keepalive idle period after hearing from the peer.
    pub(crate) fn rearm_keepalive(&mut self, now: Instant) {
        self.timers.reset_keepalive_count();
        if matches!(self.state, State::Established | State::CloseWait) {
            match self.keepalive {
                Some(k) => self.timers.arm_idle(now + k.idle),
                None => self.timers.stop_idle(),
            }
        }
    }

    /// The peer opened its window: the persist timer yields to the RTO.
    pub(crate) fn leave_persist(&mut self, now: Instant) {
        if self.timers.persist() {
            self.timers.stop_persist();
            self.timers.probe_done();
            self.retries = 0;
            self.rtt.reset_backoff();
            if self.snd.nxt() != self.snd.una() {
                self.timers.arm_rtx(now + self.rtt.rto());
            } else {
                self.timers.stop_rtx();
            }
        }
    }

    /// The peer answered a window probe without accepting its byte (RFC 9293 §3.8.6.1:
    /// a closed window takes no data): SND.NXT goes back to SND.UNA, so the byte is sent
    /// again as ordinary data when the window opens instead of staying a hole behind
    /// SND.NXT until a retransmission timeout. BSD gets the same effect by never advancing
    /// SND.NXT for a probe. Should a late ACK for the retracted byte arrive, it is above
    /// SND.NXT and gets a challenge ACK (RFC 5961 §5.2); the byte is then sent again and
    /// acknowledged as a duplicate, so nothing is lost.
    pub(crate) fn retract_probe(&mut self) {
        self.snd.retract_to_una();
        if self
            .fin_sent_seq
            .is_some_and(|f| f.diff(self.snd.nxt()) >= 0)
        {
            self.fin_sent_seq = None;
        }
        self.sampler.on_retransmit();
        self.unacked_since = None;
        self.flight_at_send = 0;
        self.probe_end = None;
    }

    /// Starts the persist timer (zero window with data waiting, RFC 9293 §3.8.6.1).
    pub(crate) fn enter_persist(&mut self, now: Instant) {
        if !self.timers.persist() || self.timers.rtx().is_none() {
            self.timers.start_persist(now + self.rtt.rto());
        }
    }

    /// An orphaned connection in FIN-WAIT-2 waits only so long for the peer's FIN.
    pub(crate) fn arm_fin_wait2(&mut self, now: Instant, timeout: Duration) {
        self.timers.stop_rtx();
        self.timers.stop_persist();
        if self.orphan {
            self.timers.arm_idle(now + timeout);
        } else {
            self.timers.stop_idle();
        }
    }

    /// Enters (or restarts) TIME-WAIT for 2*MSL, all other timers off.
    pub(crate) fn enter_time_wait(&mut self, now: Instant, cfg: &TcpConfig) {
        self.state = State::TimeWait;
        let acks = self.ack_now;
        self.timers = Timers::default();
        self.timers.arm_idle(now + cfg.msl.saturating_mul(2));
        self.ack_now = acks;
    }

    /// Runs every timer that is due at `now`.
    pub(crate) fn on_timer(&mut self, now: Instant, cx: &mut Cx<'_>) {
        if self.timers.take_delack(now) {
            self.ack_now = true;
            // The delayed ACK was not carried by a reply: the exchange is not
            // interactive after all (Linux's tcp_delack_timer_handler leaves ping-pong
            // mode here). A compressed SACK's deadline (Linux's own timer) says nothing
            // of that.
            if self.compressed_acks == 0 {
                self.pingpong = false;
            }
        }
        if self.timers.reo_due(now) {
            self.rack_detect(now, cx.stats);
        }
        // The probe goes first: RFC 8985 §7.2 arms it in place of the RTO, so when both are
        // due the probe is sent and the RTO restarts.
        if self.timers.take_pto(now) {
            let open = self.probe_open();
            let (rec, mut p) = self.loss();
            rec.pto_expired(&mut p, now, open);
        }
        if self.timers.take_rtx(now) {
            if self.timers.persist() {
                self.persist_expired(now, cx);
            } else {
                self.rtx_expired(now, cx);
            }
        }
        if self.timers.take_idle(now) {
            self.idle_expired(now, cx);
        }
        if self.timers.take_reclaim(now) {
            self.reclaim_expired(now, cx);
        }
        // The pacer's deadline needs no work here: the output pass that follows every
        // timer sends what it held back.
        self.timers.take_pace(now);
    }

    fn give_up(&mut self, cx: &mut Cx<'_>) {
        cx.stats.timeouts += 1;
        self.tx.clear();
        self.set_closed(Some(ConnError::TimedOut));
    }

    fn rtx_expired(&mut self, now: Instant, cx: &mut Cx<'_>) {
        match self.state {
            State::SynSent | State::SynReceived if self.snd.una() == self.snd.iss() => {
                if self.retries >= cx.cfg.syn_retries {
                    self.give_up(cx);
                    return;
                }
                self.retries += 1;
                self.rtt.backoff();
                self.syn_pending = true;
                self.syn_retransmitted = true;
                self.sampler.on_retransmit();
                self.counters.timeouts += 1;
            }
            _ => {
                if self.snd.una() == self.snd.nxt() {
                    return;
                }
                let user_expired = match (self.user_timeout, self.unacked_since) {
                    (Some(limit), Some(since)) => now.saturating_duration_since(since) >= limit,
                    _ => false,
                };
                if self.retries >= cx.cfg.max_retransmits || user_expired {
                    self.give_up(cx);
                    return;
                }
                self.retries += 1;
                self.counters.timeouts += 1;
                self.rtt.backoff();
                self.sampler.on_retransmit();
                self.rtt_ambiguous = true;
                let (rec, mut p) = self.loss();
                rec.on_rto(&mut p, now);
                self.timers.arm_rtx(now + self.rtt.rto());
            }
        }
    }

    fn persist_expired(&mut self, now: Instant, cx: &mut Cx<'_>) {
        if self.snd.wnd() > 0 && self.snd.una() == self.snd.nxt() && self.tx.is_empty() {
            self.timers.stop_persist();
            return;
        }
        // RFC 1122 §4.2.2.17: probing goes on while the peer answers; `retries` is reset by
        // every ACK, so only silence counts towards giving up.
        if self.retries >= cx.cfg.max_retransmits {
            self.give_up(cx);
            return;
        }
        self.retries += 1;
        self.rtt.backoff();
        self.timers.request_probe();
        self.timers.arm_rtx(now + self.rtt.rto());
    }

    fn idle_expired(&mut self, now: Instant, cx: &mut Cx<'_>) {
        match self.state {
            State::TimeWait => self.set_closed(None),
            State::FinWait2 => self.give_up(cx),
            State::Established | State::CloseWait => {
                let Some(k) = self.keepalive else { return };
                if self.snd.una() != self.snd.nxt() || !self.tx.is_empty() {
                    // Data is in flight: the RTO watches the peer, not keepalive.
                    self.timers.arm_idle(now + k.interval);
                    return;
                }
                if self.timers.keepalive_sent() >= k.count {
                    self.give_up(cx);
                    return;
                }
                self.timers.request_keepalive();
                self.timers.arm_idle(now + k.interval);
            }
            _ => {}
        }
    }
}
