//! Loss detection and recovery on the sender: duplicate-ACK counting and fast
//! retransmit (RFC 5681 §3.2), NewReno partial ACKs (RFC 6582), limited transmit
//! (RFC 3042), SACK-based recovery (RFC 6675), and go-back-N after a timeout.
//!
//! The congestion controller (`congestion/`) owns cwnd and ssthresh; this module decides
//! *what* to retransmit and tells the controller about events. The SACK scoreboard
//! (`sack.rs`) remembers which bytes the peer holds.
//!
//! `pipe` (RFC 6675 §4 SetPipe) is computed as in FACK: during SACK recovery every
//! unSACKed byte below the highest SACKed byte counts as lost (so it leaves the pipe)
//! until it is retransmitted (then it counts again). Outside SACK recovery the pipe is
//! all outstanding data; after a timeout, data past the go-back-N pointer is presumed
//! lost.

use ulnet_wire::SeqNumber;

use crate::time::Instant;

use super::congestion::CongestionControl;
use super::sack::{NextSeg, Scoreboard};
use super::socket::Socket;
use super::stats::CaState;

/// RFC 5681 §3.2 / RFC 6675 DupThresh.
pub(crate) const DUP_THRESH: u8 = 3;

/// Recovery state of one connection.
#[derive(Debug)]
pub(crate) struct Recovery {
    pub dupacks: u8,
    pub in_recovery: bool,
    /// This episode uses SACK (RFC 6675) rather than NewReno inflation.
    pub sack_recovery: bool,
    /// RFC 6582 "recover": the highest sequence sent when recovery (or a timeout) began.
    pub recover: SeqNumber,
    /// The segment at SND.UNA must be retransmitted now (fast retransmit, partial ACK).
    pub fast_rtx: bool,
    /// RFC 6675 HighRxt: the highest byte retransmitted in this episode.
    pub high_rxt: SeqNumber,
    /// After a timeout: the next byte to retransmit, go-back-N.
    pub rtx_nxt: Option<SeqNumber>,
    /// D-SACK blocks received (RFC 2883): spurious retransmissions the peer reported.
    pub dsacks: u64,
    pub sb: Scoreboard,
    /// Tail loss probe episode (RFC 8985 §7).
    pub tlp: super::tlp::TlpState,
    /// RACK-style time-based loss detection for the segment at SND.UNA (RFC 8985 §6).
    pub rack: super::rack::RackState,
}

impl Recovery {
    pub(crate) fn new(iss: SeqNumber, max_blocks: usize) -> Self {
        Recovery {
            dupacks: 0,
            in_recovery: false,
            sack_recovery: false,
            recover: iss,
            fast_rtx: false,
            high_rxt: iss,
            rtx_nxt: None,
            dsacks: 0,
            sb: Scoreboard::new(max_blocks),
            tlp: super::tlp::TlpState::default(),
            rack: super::rack::RackState::new(iss),
        }
    }

    /// Bytes the peer SACKed above SND.UNA.
    pub(crate) fn sacked_bytes(&self) -> u32 {
        self.sb.sacked_bytes().min(u32::MAX as usize) as u32
    }

    /// The loss-recovery state, as `tcp_info` reports it.
    pub(crate) fn ca_state(&self) -> CaState {
        if self.rtx_nxt.is_some() {
            CaState::Loss
        } else if self.in_recovery {
            CaState::Recovery
        } else if self.dupacks > 0 || !self.sb.is_empty() {
            CaState::Disorder
        } else {
            CaState::Open
        }
    }

    /// Bytes presumed lost and not yet acknowledged (see [`TcpInfo::lost`]).
    ///
    /// [`TcpInfo::lost`]: super::TcpInfo::lost
    pub(crate) fn lost_bytes(&self, s: &Socket) -> u32 {
        let out = s.snd.in_flight();
        if self.rtx_nxt.is_some() {
            return out;
        }
        if !self.in_recovery {
            return 0;
        }
        if !self.sack_recovery {
            return out.min(u32::from(s.data_mss()));
        }
        let Some(high) = self.sb.highest_sacked() else {
            return 0;
        };
        let below = high.distance_from(s.snd.una()).min(out);
        below.saturating_sub(self.sacked_bytes())
    }

    /// Bytes presumed in the network (RFC 6675 pipe; see the module docs).
    pub(crate) fn pipe(&self, s: &Socket) -> u32 {
        let out = s.snd.in_flight();
        if let Some(p) = self.rtx_nxt {
            return p.distance_from(s.snd.una());
        }
        if !(self.in_recovery && self.sack_recovery) {
            return out;
        }
        let mss = usize::from(s.data_mss());
        let p = self.sb.pipe(
            s.snd.una(),
            s.snd.nxt(),
            self.high_rxt.max(s.snd.una()),
            mss,
        );
        p.min(out as usize) as u32
    }
}

/// Records the SACK blocks of an ACK (`ack` is its cumulative ACK, already validated
/// against SND.NXT); returns the bytes newly SACKed. D-SACK blocks (RFC 2883) are counted
/// and otherwise ignored.
pub(crate) fn on_sack_blocks(
    s: &mut Socket,
    ack: SeqNumber,
    blocks: &[(SeqNumber, SeqNumber)],
) -> u32 {
    let una = ack.max(s.snd.una());
    let u = s.rec.sb.update_checked(una, s.snd.nxt(), blocks);
    if u.dsack {
        s.rec.dsacks += 1;
        s.rec.tlp.on_dsack();
    }
    u.newly_sacked_bytes.min(u32::MAX as usize) as u32
}

/// New data was cumulatively acknowledged (`acked` bytes of sequence space past
/// `prior_una`); SND.UNA is already advanced.
pub(crate) fn on_new_ack(s: &mut Socket, now: Instant, prior_una: SeqNumber, acked: u32) {
    let una = s.snd.una();
    s.rec.sb.update(una, &[]);
    if let Some(p) = s.rec.rtx_nxt {
        let p = p.max(una);
        s.rec.rtx_nxt = (p.diff(s.snd.nxt()) < 0).then_some(p);
    }
    s.rec.high_rxt = s.rec.high_rxt.max(una);
    let flight_before = s.snd.nxt().distance_from(prior_una).max(s.flight_at_send) as usize;
    if s.rec.in_recovery {
        if una.diff(s.rec.recover) >= 0 {
            // RFC 6582 §3.2 step 3: the full ACK ends recovery.
            s.rec.in_recovery = false;
            s.rec.dupacks = 0;
            s.cc.on_recovery_exit(now);
        } else if !s.rec.sack_recovery {
            // RFC 6582 §3.2 step 4: a partial ACK; retransmit the next hole at once.
            s.cc.on_partial_ack(acked as usize);
            s.rec.fast_rtx = true;
        }
    } else {
        s.rec.dupacks = 0;
        let rtt = s.rtt.srtt();
        s.cc.on_ack(now, acked as usize, flight_before, rtt);
    }
}

/// A duplicate ACK (or an ACK with new SACK information at SND.UNA) arrived.
pub(crate) fn on_dupack(s: &mut Socket, now: Instant) {
    s.rec.dupacks = s.rec.dupacks.saturating_add(1);
    if s.rec.in_recovery {
        if !s.rec.sack_recovery {
            s.cc.on_dup_ack();
        }
        return;
    }
    if s.rec.rtx_nxt.is_some() {
        // Still retransmitting after a timeout: go-back-N owns the sequence space.
        return;
    }
    let mss = u32::from(s.data_mss());
    let lost = s.rec.dupacks >= DUP_THRESH
        || (s.sack_on
            && s.rec
                .sb
                .is_lost(s.snd.una(), mss as usize, usize::from(DUP_THRESH)));
    // RFC 6582 §3.2 step 2: only when the ACK covers more than `recover`, so one window
    // of losses causes one reduction.
    if lost && fresh_episode(s) {
        enter_recovery(s, now);
    }
}

/// RFC 6582 §3.2 step 2: a loss starts a new recovery (and a window reduction) only when
/// the cumulative ACK has passed `recover`, so one window of losses causes one reduction.
pub(crate) fn fresh_episode(s: &Socket) -> bool {
    s.snd.una().diff(s.rec.recover) > 0 || s.rec.recover == s.snd.iss()
}

/// Enters fast recovery (RFC 5681 §3.2 step 2-4, RFC 6675 §5 step 4): retransmit the
/// segment at SND.UNA and reduce the window once.
pub(crate) fn enter_recovery(s: &mut Socket, now: Instant) {
    let flight = s.snd.in_flight() as usize;
    s.rec.in_recovery = true;
    s.rec.sack_recovery = s.sack_on;
    s.rec.recover = s.snd.nxt();
    s.rec.high_rxt = s.snd.una();
    s.rec.fast_rtx = true;
    s.counters.fast_recoveries += 1;
    s.cc.on_congestion_event(now, flight);
    // RFC 8985 §7.2: no loss probe while in recovery; the recovery's reduction answers
    // for a loss an outstanding probe repairs (§7.4).
    s.timers.pto = None;
    s.rec.tlp.is_rtx = false;
}

/// The retransmission timer fired (RFC 6298 §5.4-5.6, RFC 5681 §3.1): loss window,
/// forget SACK information (RFC 2018 §8), and go back to SND.UNA.
pub(crate) fn on_rto(s: &mut Socket, now: Instant) {
    let flight = s.snd.in_flight() as usize;
    s.cc.on_rto(now, flight);
    s.rec.in_recovery = false;
    s.rec.dupacks = 0;
    s.rec.fast_rtx = false;
    s.rec.recover = s.snd.nxt();
    s.rec.high_rxt = s.snd.una();
    s.rec.sb.clear();
    s.rec.rtx_nxt = (s.snd.nxt() != s.snd.una()).then_some(s.snd.una());
    s.rec.tlp = super::tlp::TlpState::default();
    s.rec.rack.reset(s.snd.una(), s.snd.nxt());
    s.timers.pto = None;
    s.timers.tlp_due = false;
    s.timers.reo = None;
}

/// What may be sent next as a retransmission: (first sequence number, longest length).
pub(crate) fn next_retransmission(s: &Socket) -> Option<(SeqNumber, u32)> {
    let mss = u32::from(s.data_mss());
    if s.snd.una() == s.snd.nxt() {
        return None;
    }
    if s.rec.fast_rtx {
        return Some((s.snd.una(), mss));
    }
    let cwnd = s.cc.cwnd().min(u32::MAX as usize) as u32;
    let pipe = s.rec.pipe(s);
    if s.rec.in_recovery && s.rec.sack_recovery {
        if pipe.saturating_add(mss) > cwnd.max(mss) {
            return None;
        }
        // RFC 6675 §4 NextSeg: rule 1 (a lost hole), rule 2 (new data: left to the
        // new-data path), rule 3 (any hole, when no new data can go).
        let seq0 = s.tx_seq0();
        let sent = s.snd.nxt().distance_from(seq0) as usize;
        let unsent = s.tx.len().saturating_sub(sent);
        let wnd_room = s.snd.wnd_room() as usize;
        let high_rxt = s.rec.high_rxt.max(s.snd.una());
        return match s.rec.sb.next_seg(
            s.snd.una(),
            s.snd.nxt(),
            high_rxt,
            mss as usize,
            unsent.min(wnd_room),
        ) {
            Some(NextSeg::Retransmit { start, end }) => Some((start, end.distance_from(start))),
            _ => None,
        };
    }
    if let Some(p) = s.rec.rtx_nxt {
        if pipe.saturating_add(mss) > cwnd.max(mss) && pipe > 0 {
            return None;
        }
        let len = s.snd.nxt().distance_from(p).min(mss);
        return Some((p, len));
    }
    None
}

/// A retransmission of `[seq, end)` was sent.
pub(crate) fn on_retransmitted(s: &mut Socket, seq: SeqNumber, end: SeqNumber) {
    s.counters.retransmits += 1;
    if seq == s.snd.una() {
        s.rec.fast_rtx = false;
        // RACK (RFC 8985 §6.2): only data sent after this copy can show it lost.
        s.rec.rack.reset(s.snd.una(), s.snd.nxt());
        s.timers.reo = None;
    }
    s.rec.high_rxt = s.rec.high_rxt.max(end);
    if let Some(p) = s.rec.rtx_nxt {
        if seq.diff(p) <= 0 && end.diff(p) > 0 {
            s.rec.rtx_nxt = (end.diff(s.snd.nxt()) < 0).then_some(end);
        }
    }
    // Karn's rule (RFC 6298 §3): no RTT sample from a retransmitted segment.
    s.sampler.on_retransmit();
    s.rtt_ambiguous = true;
}

/// How many new bytes congestion control lets us send now, limited transmit included.
pub(crate) fn send_allowance(s: &Socket) -> u32 {
    let cwnd = s.cc.cwnd().min(u32::MAX as usize) as u32;
    let pipe = s.rec.pipe(s);
    let mut allow = cwnd.saturating_sub(pipe);
    if !s.rec.in_recovery && s.rec.rtx_nxt.is_none() && (1..DUP_THRESH).contains(&s.rec.dupacks) {
        // RFC 3042: one new segment per each of the first two duplicate ACKs.
        let mss = u32::from(s.data_mss());
        allow = allow.max(
            cwnd.saturating_add(u32::from(s.rec.dupacks) * mss)
                .saturating_sub(s.snd.in_flight()),
        );
    }
    allow
}
