//! Tail loss probes (RFC 8985 §7, the TLP half of RACK-TLP).
//!
//! Without them, a loss near the end of a flight (or of the last few segments before the
//! sender runs out of window or data) draws too few duplicate ACKs for fast retransmit,
//! and only the retransmission timeout, at least 200 ms, repairs it: on a sub-millisecond
//! path that is thousands of round trips of silence. Instead, when no ACK has arrived for
//! a probe timeout (PTO, about 2*SRTT) the sender transmits one segment, new data if it
//! may, else the highest-sequence segment again. The ACK for the probe carries SACK
//! information that lets fast recovery or RACK (`rack.rs`) repair the loss, or, for a lost
//! last segment, acknowledges everything.
//!
//! The timer lives in `timer.rs` (`pto`, `tlp_due`); the probe itself is built by
//! `output.rs`. One probe per episode: no other is armed until the probe is acknowledged
//! or a retransmission timeout ends the episode.

use ulnet_wire::SeqNumber;

use crate::time::{Duration, Instant};

use super::congestion::CongestionControl;
use super::recovery;
use super::socket::Socket;
use super::state::State;

/// RFC 8985 §7.2 WCDelAckT: the worst-case delayed-ACK timer of the receiver, added to
/// the PTO when only one segment is in flight (the receiver may hold its ACK that long).
pub(crate) const WORST_CASE_DELACK: Duration = Duration::from_millis(200);

/// Floor on the PTO. RFC 8985 §7.2 sets none, but a PTO of 2*SRTT on a path of a few
/// microseconds would fire on scheduling jitter alone; Linux adds `TCP_TIMEOUT_MIN`
/// (2 ms) to its PTO for the same reason.
const PTO_MIN: Duration = Duration::from_millis(2);

/// RFC 8985 §7.2: the PTO before any RTT sample.
const PTO_NO_RTT: Duration = Duration::from_secs(1);

/// The state of one loss-probe episode (RFC 8985 §7.3-§7.4).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TlpState {
    /// TLP.end_seq: SND.NXT right after the probe, while its episode lasts.
    pub end: Option<SeqNumber>,
    /// TLP.is_retrans: the probe repeated data rather than sending new data.
    pub is_rtx: bool,
    /// A D-SACK arrived during the episode: the probe's copy was not needed.
    pub dsack: bool,
}

impl TlpState {
    /// A D-SACK block arrived.
    pub(crate) fn on_dsack(&mut self) {
        if self.end.is_some() {
            self.dsack = true;
        }
    }
}

/// Whether a probe may be scheduled (RFC 8985 §7.2): SACK in use, data outstanding, not
/// in fast or RTO recovery, no probe already outstanding, no zero window.
pub(crate) fn may_probe(s: &Socket) -> bool {
    s.tlp_on
        && s.sack_on
        && matches!(
            s.state,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        )
        && s.snd.una() != s.snd.nxt()
        && !s.rec.in_recovery
        && s.rec.rtx_nxt.is_none()
        && s.rec.tlp.end.is_none()
        && !s.timers.persist
        && s.probe_end.is_none()
}

/// (Re)starts the PTO after new data was sent or new data was acknowledged (RFC 8985
/// §7.2), or stops it when no probe may be sent.
pub(crate) fn arm(s: &mut Socket, now: Instant) {
    if !may_probe(s) {
        s.timers.pto = None;
        return;
    }
    let pto = match s.rtt.srtt() {
        Some(srtt) => {
            let flight = s.snd.in_flight();
            let extra = if flight <= u32::from(s.data_mss()) {
                WORST_CASE_DELACK
            } else {
                Duration::ZERO
            };
            srtt.saturating_mul(2).max(PTO_MIN).saturating_add(extra)
        }
        None => PTO_NO_RTT,
    };
    let mut at = now + pto;
    // Never later than the RTO would fire.
    if let Some(rto) = s.timers.rtx {
        at = at.min(rto);
    }
    s.timers.pto = Some(at);
}

/// The PTO fired: a probe is due, and the RTO restarts from now (RFC 8985 §7.3).
pub(crate) fn pto_expired(s: &mut Socket, now: Instant) {
    if may_probe(s) {
        s.timers.tlp_due = true;
        s.timers.rtx = Some(now + s.rtt.rto());
    }
}

/// The probe `[.., end)` went out (`is_rtx`: it repeated data).
pub(crate) fn on_probe_sent(s: &mut Socket, now: Instant, is_rtx: bool) {
    s.rec.tlp = TlpState {
        end: Some(s.snd.nxt()),
        is_rtx,
        dsack: false,
    };
    s.timers.tlp_due = false;
    s.timers.pto = None;
    s.timers.rtx = Some(now + s.rtt.rto());
}

/// A cumulative ACK arrived (SND.UNA already advanced): end the episode once the probe is
/// acknowledged, and (RFC 8985 §7.4) when its retransmission repaired a loss, with no
/// D-SACK saying the original arrived, react as to any loss, once per window.
pub(crate) fn on_ack(s: &mut Socket, now: Instant) {
    let Some(end) = s.rec.tlp.end else { return };
    if s.snd.una().diff(end) < 0 {
        return;
    }
    let repaired = s.rec.tlp.is_rtx && !s.rec.tlp.dsack;
    s.rec.tlp = TlpState::default();
    if repaired && !s.rec.in_recovery && recovery::fresh_episode(s) {
        let cwnd = s.cc.cwnd();
        s.cc.on_congestion_event(now, cwnd);
        s.cc.on_recovery_exit(now);
        s.rec.recover = s.snd.nxt();
    }
}
