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
//! The timer lives in `timers.rs` (`pto`, `tlp_due`); the probe itself is built by
//! `socket/output.rs`. One probe per episode: no other is armed until the probe is acknowledged
//! or a retransmission timeout ends the episode.

use ulnet_wire::SeqNumber;

use crate::time::{Duration, Instant};

use crate::tcp::congestion::CongestionControl;
use crate::tcp::seq::SendSeq;
use crate::tcp::timers::Timers;

use super::{Recovery, Sender};

/// RFC 8985 §7.2 WCDelAckT: the worst-case delayed-ACK timer of the receiver, added to
/// the PTO when only one segment is in flight (the receiver may hold its ACK that long).
pub(crate) const WORST_CASE_DELACK: Duration = Duration::from_millis(200);

/// Slack added to 2*SRTT. RFC 8985 §7.2 sets none, but a PTO of 2*SRTT on a path of a
/// few microseconds fires on scheduling jitter alone: a receiver whose application holds
/// the socket lock ACKs in bursts milliseconds apart (seen on veth: a probe every 2 ms,
/// each one answered by a D-SACK). Linux adds `TCP_TIMEOUT_MIN` (2 jiffies) to 2*SRTT
/// for the same reason; this adds 2 ms.
const PTO_SLACK: Duration = Duration::from_millis(2);

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

impl Recovery {
    /// Whether a probe may be scheduled (RFC 8985 §7.2): SACK in use, data outstanding, no
    /// retransmission waiting to go out, no probe already outstanding, no zero window.
    /// `open` is the connection's part of the answer: a state that sends data and no
    /// window probe out.
    ///
    /// Also during fast recovery: a retransmission that is lost again, with nothing sent
    /// after it, leaves RACK (`rack.rs`) nothing to infer from, and only the RTO (200 ms)
    /// repaired it. A probe of new data after it draws the SACK that shows it lost.
    /// Measured: 2% random drop each way against a Linux receiver (which compresses its
    /// SACKs), 21 RTOs in 5 s and 239 Mb/s before.
    pub(crate) fn may_probe(&self, seq: &SendSeq, timers: &Timers, open: bool) -> bool {
        self.tlp_on
            && self.sack
            && open
            && seq.una() != seq.nxt()
            && self.rtx_nxt.is_none()
            && self.tlp.end.is_none()
            && !timers.persist()
    }

    /// (Re)starts the PTO after new data was sent or new data was acknowledged (RFC 8985
    /// §7.2), or stops it when no probe may be sent.
    pub(crate) fn tlp_arm(&mut self, p: &mut Sender<'_>, now: Instant, open: bool) {
        if !self.may_probe(p.seq, p.timers, open) {
            p.timers.stop_pto();
            return;
        }
        let pto = match p.rtt.srtt() {
            Some(srtt) => {
                let flight = p.seq.in_flight();
                let extra = if flight <= u32::from(p.seq.data_mss()) {
                    WORST_CASE_DELACK
                } else {
                    Duration::ZERO
                };
                srtt.saturating_mul(2)
                    .saturating_add(PTO_SLACK)
                    .saturating_add(extra)
            }
            None => PTO_NO_RTT,
        };
        let mut at = now + pto;
        // Never later than the RTO would fire.
        if let Some(rto) = p.timers.rtx() {
            at = at.min(rto);
        }
        p.timers.arm_pto(at);
    }

    /// The PTO fired: a probe is due, and the RTO restarts from now (RFC 8985 §7.3).
    pub(crate) fn pto_expired(&mut self, p: &mut Sender<'_>, now: Instant, open: bool) {
        if self.may_probe(p.seq, p.timers, open) {
            p.timers.request_tlp();
            p.timers.arm_rtx(now + p.rtt.rto());
        }
    }

    /// The probe `[.., end)` went out (`is_rtx`: it repeated data).
    pub(crate) fn on_probe_sent(&mut self, p: &mut Sender<'_>, now: Instant, is_rtx: bool) {
        self.tlp = TlpState {
            end: Some(p.seq.nxt()),
            is_rtx,
            dsack: false,
        };
        p.timers.tlp_done();
        p.timers.stop_pto();
        p.timers.arm_rtx(now + p.rtt.rto());
    }

    /// A cumulative ACK arrived (SND.UNA already advanced): end the episode once the probe is
    /// acknowledged, and (RFC 8985 §7.4) when its retransmission repaired a loss, with no
    /// D-SACK saying the original arrived, react as to any loss, once per window.
    pub(crate) fn tlp_on_ack(&mut self, p: &mut Sender<'_>, now: Instant) {
        let Some(end) = self.tlp.end else { return };
        if p.seq.una().diff(end) < 0 {
            return;
        }
        let repaired = self.tlp.is_rtx && !self.tlp.dsack;
        self.tlp = TlpState::default();
        if repaired && !self.in_recovery && self.fresh_episode(p.seq) {
            let cwnd = p.cc.cwnd();
            p.cc.on_congestion_event(now, cwnd);
            p.cc.on_recovery_exit(now);
            self.recover = p.seq.nxt();
        }
    }
}
