//! Loss detection and recovery on the sender: duplicate-ACK counting and fast
//! retransmit (RFC 5681 §3.2), NewReno partial ACKs (RFC 6582), limited transmit
//! (RFC 3042), SACK-based recovery (RFC 6675), and go-back-N after a timeout.
//!
//! The congestion controller (`congestion/`) owns cwnd and ssthresh; this module decides
//! *what* to retransmit and tells the controller about events. The SACK scoreboard
//! (`sack.rs`) remembers which bytes the peer holds.
//!
//! With RACK on and SACK in use, loss is decided per segment (`segs.rs`, `rack.rs`, RFC
//! 8985 §6) and `pipe` (RFC 6675 §4 SetPipe) is counted over the segment records: every
//! segment neither SACKed nor marked lost, plus every retransmission in flight. Without
//! RACK, `pipe` is computed as in FACK: during SACK recovery every unSACKed byte below
//! the highest SACKed byte counts as lost (so it leaves the pipe) until it is
//! retransmitted (then it counts again). Outside SACK recovery the pipe is all
//! outstanding data; after a timeout, data past the go-back-N pointer is presumed lost.
//!
//! During SACK-based recovery the sending rate follows Proportional Rate Reduction
//! (RFC 6937, PRR-SSRB; `prr.rs`) instead of `cwnd`.

use ulnet_wire::SeqNumber;

use crate::time::Instant;

use super::congestion::{CongestionControl, Controller};
use super::rtt::RttEstimator;
use super::sack::{NextSeg, Scoreboard};
use super::seq::SendSeq;
use super::stats::{CaState, ConnCounters};
use super::timers::Timers;

mod prr;
mod rack;
mod rate;
mod segs;
mod tlp;

pub(crate) use rack::Echo;
pub(crate) use segs::SentSegs;

/// The parts of a connection loss recovery reads and steers: the send sequence space,
/// the congestion controller it tells about losses, the RTT estimate its timers derive
/// from, the deadlines it arms (`pto`, `reo`, and `rtx` around a probe), and the
/// counters it reports to.
pub(crate) struct Sender<'a> {
    pub(crate) seq: &'a SendSeq,
    pub(crate) cc: &'a mut Controller,
    pub(crate) rtt: &'a RttEstimator,
    pub(crate) timers: &'a mut Timers,
    pub(crate) counters: &'a mut ConnCounters,
}

/// RFC 5681 §3.2 / RFC 6675 DupThresh.
pub(crate) const DUP_THRESH: u8 = 3;

/// Recovery state of one connection: what the sender believes lost, the SACK
/// scoreboard, RACK and TLP.
#[derive(Debug)]
pub(crate) struct Recovery {
    /// SACK is in use on this connection (RFC 2018, negotiated).
    sack: bool,
    /// RACK loss detection on (RFC 8985 §6; [`TcpConfig::rack`]).
    ///
    /// [`TcpConfig::rack`]: super::TcpConfig::rack
    rack_on: bool,
    /// Tail loss probes on (RFC 8985 §7; [`TcpConfig::tail_loss_probe`]).
    ///
    /// [`TcpConfig::tail_loss_probe`]: super::TcpConfig::tail_loss_probe
    tlp_on: bool,
    dupacks: u8,
    in_recovery: bool,
    /// This episode uses SACK (RFC 6675) rather than NewReno inflation.
    sack_recovery: bool,
    /// RFC 6582 "recover": the highest sequence sent when recovery (or a timeout) began.
    recover: SeqNumber,
    /// The segment at SND.UNA must be retransmitted now (fast retransmit, partial ACK).
    fast_rtx: bool,
    /// RFC 6675 HighRxt: the highest byte retransmitted in this episode.
    high_rxt: SeqNumber,
    /// After a timeout: the next byte to retransmit, go-back-N.
    rtx_nxt: Option<SeqNumber>,
    /// D-SACK blocks received (RFC 2883): spurious retransmissions the peer reported.
    dsacks: u64,
    sb: Scoreboard,
    /// Tail loss probe episode (RFC 8985 §7).
    tlp: tlp::TlpState,
    /// RACK state (RFC 8985 §6).
    rack: rack::RackState,
    /// Per-segment transmission records (RFC 8985 §6.1), used when `table_on`.
    segs: SentSegs,
    /// Proportional rate reduction during SACK recovery (RFC 6937).
    prr: prr::Prr,
    /// Delivery rate estimation over the segment records (`rate.rs`).
    rate: rate::Rate,
    /// Bytes marked lost while processing the current ACK (for its rate sample).
    newly_lost: u32,
    /// This recovery episode did not reduce the window (a loss found within the window
    /// of the previous reduction, RFC 6582 §3.2): its end restores nothing.
    no_reduction: bool,
}

impl Recovery {
    /// `segs` is the per-segment table, sized by the caller for its send buffer (all
    /// memory reserved now).
    pub(crate) fn new(
        iss: SeqNumber,
        max_blocks: usize,
        rack_on: bool,
        tlp_on: bool,
        segs: SentSegs,
    ) -> Self {
        Recovery {
            sack: false,
            rack_on,
            tlp_on,
            dupacks: 0,
            in_recovery: false,
            sack_recovery: false,
            recover: iss,
            fast_rtx: false,
            high_rxt: iss,
            rtx_nxt: None,
            dsacks: 0,
            sb: Scoreboard::new(max_blocks),
            tlp: tlp::TlpState::default(),
            rack: rack::RackState::new(iss),
            segs,
            prr: prr::Prr::default(),
            rate: rate::Rate::default(),
            newly_lost: 0,
            no_reduction: false,
        }
    }

    /// Per-segment loss detection is in use: RACK on and SACK negotiated (without SACK
    /// nothing but SND.UNA is ever known delivered).
    #[inline]
    pub(crate) fn table_on(&self) -> bool {
        self.rack_on && self.sack
    }

    /// The latest delivery-rate sample, bytes per second.
    pub(crate) fn delivery_rate(&self) -> Option<u64> {
        self.rate.last_rate()
    }

    /// RACK is on (the segment table records transmissions).
    #[inline]
    pub(crate) fn rack_on(&self) -> bool {
        self.rack_on
    }

    /// The handshake settled whether SACK is in use.
    pub(crate) fn set_sack(&mut self, on: bool) {
        self.sack = on;
    }

    /// D-SACK blocks received so far (RFC 2883).
    #[inline]
    pub(crate) fn dsacks(&self) -> u64 {
        self.dsacks
    }

    /// A retransmission is due or may be (fast retransmit, go-back-N after a timeout, or
    /// SACK recovery looking for holes).
    #[inline]
    pub(crate) fn retransmission_pending(&self) -> bool {
        self.fast_rtx
            || self.rtx_nxt.is_some()
            || (self.in_recovery && self.sack_recovery)
            || (self.table_on() && self.segs.first_lost().is_some())
    }

    /// Bytes the peer SACKed above SND.UNA.
    pub(crate) fn sacked_bytes(&self) -> u32 {
        self.sb.sacked_bytes().min(u32::MAX as usize) as u32
    }

    /// In fast recovery (RFC 6675), not RTO recovery.
    pub(crate) fn in_fast_recovery(&self) -> bool {
        self.in_recovery && self.rtx_nxt.is_none()
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
    pub(crate) fn lost_bytes(&self, s: &SendSeq) -> u32 {
        if self.table_on() {
            return self.segs.lost_bytes().min(s.in_flight());
        }
        let out = s.in_flight();
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
        let below = high.distance_from(s.una()).min(out);
        below.saturating_sub(self.sacked_bytes())
    }

    /// Bytes presumed in the network (RFC 6675 pipe; see the module docs).
    pub(crate) fn pipe(&self, s: &SendSeq) -> u32 {
        let out = s.in_flight();
        if self.table_on() {
            return self.segs.pipe().min(out.saturating_mul(2));
        }
        if let Some(p) = self.rtx_nxt {
            return p.distance_from(s.una());
        }
        if !(self.in_recovery && self.sack_recovery) {
            return out;
        }
        let mss = usize::from(s.data_mss());
        let p = self
            .sb
            .pipe(s.una(), s.nxt(), self.high_rxt.max(s.una()), mss);
        p.min(out as usize) as u32
    }
}

impl Recovery {
    /// Frees the per-segment table's storage when nothing is in flight (the connection
    /// is idle or closed; see `Socket::release_storage`).
    pub(crate) fn release_storage(&mut self) {
        self.segs.release();
    }
}

impl Recovery {
    /// Records the SACK blocks of an ACK (`ack` is its cumulative ACK, already validated
    /// against SND.NXT); returns the bytes newly SACKed. D-SACK blocks (RFC 2883) are counted
    /// and otherwise ignored.
    pub(crate) fn on_sack_blocks(
        &mut self,
        seq: &SendSeq,
        ack: SeqNumber,
        blocks: &[(SeqNumber, SeqNumber)],
    ) -> u32 {
        let una = ack.max(seq.una());
        let u = self.sb.update_checked(una, seq.nxt(), blocks);
        if u.dsack {
            self.dsacks += 1;
            self.tlp.on_dsack();
        }
        u.newly_sacked_bytes.min(u32::MAX as usize) as u32
    }

    /// New data was cumulatively acknowledged (`acked` bytes of sequence space past
    /// `prior_una`); SND.UNA is already advanced.
    pub(crate) fn on_new_ack(
        &mut self,
        p: &mut Sender<'_>,
        now: Instant,
        prior_una: SeqNumber,
        acked: u32,
        flight_at_send: u32,
    ) {
        let una = p.seq.una();
        self.sb.update(una, &[]);
        if let Some(r) = self.rtx_nxt {
            let r = r.max(una);
            self.rtx_nxt = (r.diff(p.seq.nxt()) < 0).then_some(r);
            if self.rtx_nxt.is_none() {
                self.rack.on_recovery_exit();
                p.cc.on_loss_recovered(now);
            }
        }
        self.high_rxt = self.high_rxt.max(una);
        let flight_before = p.seq.nxt().distance_from(prior_una).max(flight_at_send) as usize;
        if self.in_recovery {
            if una.diff(self.recover) >= 0 {
                // RFC 6582 §3.2 step 3: the full ACK ends recovery.
                self.in_recovery = false;
                self.dupacks = 0;
                self.rack.on_recovery_exit();
                if !core::mem::take(&mut self.no_reduction) {
                    p.cc.on_recovery_exit(now);
                }
            } else if !self.sack_recovery {
                // RFC 6582 §3.2 step 4: a partial ACK; retransmit the next hole at once.
                p.cc.on_partial_ack(acked as usize);
                self.fast_rtx = true;
            }
        } else {
            self.dupacks = 0;
            let rtt = p.rtt.srtt();
            p.cc.on_ack(now, acked as usize, flight_before, rtt);
        }
    }

    /// A duplicate ACK (or an ACK with new SACK information at SND.UNA) arrived.
    pub(crate) fn on_dupack(&mut self, p: &mut Sender<'_>, now: Instant) {
        self.dupacks = self.dupacks.saturating_add(1);
        if self.in_recovery {
            if !self.sack_recovery {
                p.cc.on_dup_ack();
            }
            return;
        }
        if self.rtx_nxt.is_some() {
            // Still retransmitting after a timeout: go-back-N owns the sequence space.
            return;
        }
        let mss = u32::from(p.seq.data_mss());
        let lost = self.dupacks >= DUP_THRESH
            || (self.sack
                && self
                    .sb
                    .is_lost(p.seq.una(), mss as usize, usize::from(DUP_THRESH)));
        // RFC 6582 §3.2 step 2: only when the ACK covers more than `recover`, so one window
        // of losses causes one reduction.
        if lost && self.fresh_episode(p.seq) {
            self.enter_recovery(p, now);
        }
    }

    /// RFC 6582 §3.2 step 2: a loss starts a new recovery (and a window reduction) only when
    /// the cumulative ACK has passed `recover`, so one window of losses causes one reduction.
    pub(crate) fn fresh_episode(&self, seq: &SendSeq) -> bool {
        seq.una().diff(self.recover) > 0 || self.recover == seq.iss()
    }

    /// Enters fast recovery (RFC 5681 §3.2 step 2-4, RFC 6675 §5 step 4): retransmit the
    /// segment at SND.UNA and reduce the window once.
    pub(crate) fn enter_recovery(&mut self, p: &mut Sender<'_>, now: Instant) {
        let flight = p.seq.in_flight() as usize;
        self.in_recovery = true;
        self.sack_recovery = self.sack;
        self.recover = p.seq.nxt();
        self.high_rxt = p.seq.una();
        self.no_reduction = false;
        self.mark_head_lost(p.seq);
        p.counters.fast_recoveries += 1;
        p.cc.on_congestion_event(now, flight);
        self.prr.start(flight, p.cc.ssthresh());
        // RFC 8985 §7.2: no loss probe while in recovery; the recovery's reduction answers
        // for a loss an outstanding probe repairs (§7.4).
        p.timers.stop_pto();
        self.tlp.is_rtx = false;
    }

    /// Recovery for a loss found within the window of the previous reduction (RFC 6582
    /// §3.2 step 2: no second reduction): the lost segments are repaired as in fast
    /// recovery, at the current window.
    pub(crate) fn enter_recovery_no_reduction(&mut self, p: &mut Sender<'_>) {
        self.in_recovery = true;
        self.sack_recovery = self.sack;
        self.recover = p.seq.nxt();
        self.high_rxt = p.seq.una();
        self.no_reduction = true;
        self.mark_head_lost(p.seq);
        let flight = p.seq.in_flight() as usize;
        self.prr.start(flight, p.cc.cwnd());
        p.timers.stop_pto();
        self.tlp.is_rtx = false;
    }

    /// The fast retransmit of RFC 5681 §3.2 step 2: the segment at SND.UNA is lost. With
    /// the segment table it is marked lost there (its copy then counts in the pipe once,
    /// RFC 6675 §4); without, the retransmission is flagged.
    fn mark_head_lost(&mut self, seq: &SendSeq) {
        if !self.table_on() {
            self.fast_rtx = true;
            return;
        }
        let mut recorded = false;
        let newly_lost = &mut self.newly_lost;
        let una = seq.una();
        // The table may still hold records this ACK covers (it forgets them at the end
        // of the ACK, `after_ack`): the one at SND.UNA is the first not below it.
        self.segs.update(|first| {
            if first.end.diff(una) <= 0 {
                return true;
            }
            if first.start.diff(una) > 0 {
                return false;
            }
            recorded = true;
            // A copy already in flight (a retransmission from the episode before, still
            // on its way) is not lost again: RACK decides about it by its own send
            // time. Resending it here was a spurious retransmission whenever an episode
            // ended with a retransmission at the new SND.UNA outstanding.
            if first.flags & (segs::SACKED | segs::RTX_OUT) == 0 {
                if !first.has(segs::LOST) {
                    *newly_lost = newly_lost.saturating_add(first.len());
                }
                first.flags |= segs::LOST;
            }
            false
        });
        // No record of it (never expected): retransmit it anyway.
        if !recorded && self.segs.first_lost().is_none() {
            self.fast_rtx = true;
        }
    }

    /// The path MTU fell (an ICMP "fragmentation needed" validated against our segments,
    /// RFC 1191 §6, RFC 5927 §7): every segment in flight larger than the new MSS was
    /// dropped on the way and is lost. They are marked so and resent at once in the new
    /// size, without a window reduction (the loss says nothing about congestion): Linux's
    /// `tcp_simple_retransmit`. Without per-segment records, go back to SND.UNA. Returns
    /// true when something is to be resent.
    pub(crate) fn on_mss_drop(&mut self, seq: &SendSeq) -> bool {
        if seq.una() == seq.nxt() {
            return false;
        }
        let mss = u32::from(seq.data_mss());
        if self.table_on() {
            let mut any = false;
            self.segs.update(|r| {
                if !r.has(segs::SACKED) && r.len() > mss {
                    r.flags = (r.flags | segs::LOST) & !segs::RTX_OUT;
                    any = true;
                }
                true
            });
            return any;
        }
        if self.rtx_nxt.is_none() {
            self.rtx_nxt = Some(seq.una());
            self.recover = seq.nxt();
            self.high_rxt = seq.una();
        }
        true
    }

    /// The retransmission timer fired (RFC 6298 §5.4-5.6, RFC 5681 §3.1): loss window,
    /// forget SACK information (RFC 2018 §8), and go back to SND.UNA.
    pub(crate) fn on_rto(&mut self, p: &mut Sender<'_>, now: Instant) {
        let flight = p.seq.in_flight() as usize;
        p.cc.on_rto(now, flight);
        self.in_recovery = false;
        self.dupacks = 0;
        self.fast_rtx = false;
        self.recover = p.seq.nxt();
        self.high_rxt = p.seq.una();
        self.sb.clear();
        self.rtx_nxt = (p.seq.nxt() != p.seq.una()).then_some(p.seq.una());
        self.no_reduction = false;
        self.tlp = tlp::TlpState::default();
        // RFC 8985 §6.3 / RFC 6675 §5.1: everything outstanding is presumed lost.
        self.segs.mark_all_lost();
        self.rack.on_rto(p.seq.una());
        p.timers.stop_pto();
        p.timers.tlp_done();
        p.timers.stop_reo();
    }

    /// What may be sent next as a retransmission: (first sequence number, longest length).
    pub(crate) fn next_retransmission(
        &self,
        seq: &SendSeq,
        cc: &Controller,
        tx_len: usize,
    ) -> Option<(SeqNumber, u32)> {
        let mss = u32::from(seq.data_mss());
        if seq.una() == seq.nxt() {
            return None;
        }
        if self.fast_rtx {
            return Some((seq.una(), mss));
        }
        let cwnd = cc.cwnd().min(u32::MAX as usize) as u32;
        let pipe = self.pipe(seq);
        if self.table_on() {
            // Per-segment: the lowest segment marked lost with no copy in flight.
            let r = self.segs.first_lost()?;
            let room = if self.prr_paced(cc) {
                // RFC 6937: the rate during recovery is PRR's.
                self.prr.room(pipe)
            } else {
                cwnd.max(mss).saturating_sub(pipe)
            };
            if room == 0 && pipe > 0 {
                return None;
            }
            return Some((r.start, r.len().min(mss)));
        }
        if self.in_recovery && self.sack_recovery {
            let room = if cc.model_based() {
                cwnd.saturating_sub(pipe)
            } else {
                self.prr.room(pipe)
            };
            if room == 0 {
                return None;
            }
            // RFC 6675 §4 NextSeg: rule 1 (a lost hole), rule 2 (new data: left to the
            // new-data path), rule 3 (any hole, when no new data can go).
            let seq0 = seq.buf_start();
            let sent = seq.nxt().distance_from(seq0) as usize;
            let unsent = tx_len.saturating_sub(sent);
            let wnd_room = seq.wnd_room() as usize;
            let high_rxt = self.high_rxt.max(seq.una());
            return match self.sb.next_seg(
                seq.una(),
                seq.nxt(),
                high_rxt,
                mss as usize,
                unsent.min(wnd_room),
            ) {
                Some(NextSeg::Retransmit { start, end }) => Some((start, end.distance_from(start))),
                _ => None,
            };
        }
        if let Some(p) = self.rtx_nxt {
            if pipe.saturating_add(mss) > cwnd.max(mss) && pipe > 0 {
                return None;
            }
            let len = seq.nxt().distance_from(p).min(mss);
            return Some((p, len));
        }
        None
    }

    /// A retransmission of `[start, end)` was sent. (Karn's rule, RFC 6298 §3, is the
    /// caller's: the RTT sampler is not loss recovery's part.)
    pub(crate) fn on_retransmitted(
        &mut self,
        p: &mut Sender<'_>,
        now: Instant,
        start: SeqNumber,
        end: SeqNumber,
    ) {
        p.counters.retransmits += 1;
        if start == p.seq.una() {
            self.fast_rtx = false;
        }
        self.on_sent(start, end, now);
        self.high_rxt = self.high_rxt.max(end);
        if let Some(r) = self.rtx_nxt {
            if start.diff(r) <= 0 && end.diff(r) > 0 {
                self.rtx_nxt = (end.diff(p.seq.nxt()) < 0).then_some(end);
            }
        }
    }

    /// `[start, end)` went out at `now` (new data, a retransmission, or a probe): the
    /// segment table records it (RFC 8985 §6.1) and PRR counts it (RFC 6937 prr_out).
    pub(crate) fn on_sent(&mut self, start: SeqNumber, end: SeqNumber, now: Instant) {
        if self.rack_on {
            self.segs.on_sent(start, end, now, &mut self.rate);
        }
        if self.in_recovery && self.sack_recovery {
            self.prr.on_sent(end.distance_from(start));
        }
    }

    /// The end of an ACK's processing (after the cumulative ACK, the SACK blocks and the
    /// duplicate-ACK logic): RACK's per-segment delivery, loss marking and timer (RFC 8985
    /// §6.2), then PRR's share for the data this ACK reported delivered (`delivered`, RFC
    /// 6937 DeliveredData), then the congestion controller's rate sample. `echo`: the
    /// ACK's echoed timestamp, when timestamps are on. Returns true when RACK marked a
    /// segment lost.
    pub(crate) fn after_ack(
        &mut self,
        p: &mut Sender<'_>,
        now: Instant,
        delivered: u32,
        echo: Option<Echo>,
    ) -> bool {
        if self.table_on() {
            self.rack_on_delivered(p.seq.una(), now, echo);
        } else if self.rack_on {
            self.segs.advance(p.seq.una(), &mut self.rate, now);
        }
        let lost = self.rack_detect(p, now);
        if self.in_recovery && self.sack_recovery {
            let pipe = self.pipe(p.seq);
            self.prr.on_ack(
                delivered,
                pipe,
                p.cc.ssthresh(),
                u32::from(p.seq.data_mss()),
            );
        }
        let newly_lost = core::mem::take(&mut self.newly_lost);
        // The sample is taken on every ACK (it keeps the totals and `TcpInfo`'s rate);
        // only a model-based controller reads the flight in it, which with losses marked
        // costs a walk of the segment table.
        let model = p.cc.model_based();
        let inflight = if model { self.pipe(p.seq) } else { 0 };
        let rs = self
            .rate
            .take_sample(now, self.rack.min_rtt(), newly_lost, inflight);
        if model {
            p.cc.on_rate_sample(now, &rs);
        }
        lost
    }

    /// The sender ran out of data to send with room left in its window: the delivery-rate
    /// samples until what is in flight now is delivered measure the application.
    pub(crate) fn mark_app_limited(&mut self, seq: &SendSeq) {
        let pipe = self.pipe(seq);
        self.rate.mark_app_limited(pipe);
    }

    /// PRR paces this recovery (SACK recovery under a loss-based controller).
    #[inline]
    fn prr_paced(&self, cc: &Controller) -> bool {
        self.in_recovery && self.sack_recovery && !cc.model_based()
    }

    /// How many new bytes congestion control lets us send now, limited transmit included.
    pub(crate) fn send_allowance(&self, seq: &SendSeq, cc: &Controller) -> u32 {
        let cwnd = cc.cwnd().min(u32::MAX as usize) as u32;
        let pipe = self.pipe(seq);
        if self.prr_paced(cc) {
            // RFC 6937: during recovery PRR decides; a whole segment once it allows any.
            let room = self.prr.room(pipe);
            return if room > 0 {
                room.max(u32::from(seq.data_mss()))
            } else {
                0
            };
        }
        let mut allow = cwnd.saturating_sub(pipe);
        if !self.in_recovery && self.rtx_nxt.is_none() && (1..DUP_THRESH).contains(&self.dupacks) {
            // RFC 3042: one new segment per each of the first two duplicate ACKs.
            let mss = u32::from(seq.data_mss());
            allow = allow.max(
                cwnd.saturating_add(u32::from(self.dupacks) * mss)
                    .saturating_sub(seq.in_flight()),
            );
        }
        allow
    }
}
