//! Segment arrival for a connection that exists (RFC 9293 §3.10.7.3 SYN-SENT and
//! §3.10.7.4 the synchronized states), with the RFC 5961 hardening (RST and SYN
//! challenge ACKs, ACK validity) and RFC 7323 PAWS.
//!
//! Replies that must answer this very segment (RST, challenge ACK, the ACK for an
//! unacceptable segment) go out through `reply` at once; everything else (data ACKs,
//! SYN-ACKs, retransmissions) is flagged on the socket and emitted by `output.rs` on the
//! next dispatch. The layer inspects `state` afterwards (CLOSED → free or report;
//! TIME-WAIT → compact record; ESTABLISHED → accept queue).

use ulnet_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};

use crate::time::{Duration, Instant};

use super::recv;
use super::{Cx, Socket};
use crate::tcp::error::ConnError;
use crate::tcp::options::ts_before;
use crate::tcp::state::State;

/// RFC 7323 §5.5: TS.Recent older than 24 days is no longer a PAWS reference.
const PAWS_IDLE_LIMIT: Duration = Duration::from_secs(24 * 24 * 3600);

/// A RST answering `seg` when it does not belong to any acceptable state (RFC 9293
/// §3.10.7.1): <SEQ=SEG.ACK><CTL=RST> if it had ACK, else
/// <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
pub(crate) fn rst_for(seg: &TcpRepr<'_>) -> TcpRepr<'static> {
    let (seq, ack, flags) = if seg.flags.contains(TcpFlags::ACK) {
        (seg.ack, SeqNumber(0), TcpFlags::RST)
    } else {
        (
            SeqNumber(0),
            seg.seq + seg.segment_len() as u32,
            TcpFlags::RST | TcpFlags::ACK,
        )
    };
    TcpRepr {
        src_port: seg.dst_port,
        dst_port: seg.src_port,
        seq,
        ack,
        flags,
        window: 0,
        urgent: 0,
        options: TcpOptions::none(),
        payload: &[],
        payload_rest: &[],
    }
}

/// Sends an ACK as the RFC 5961 §7 rate limit allows.
fn challenge_ack(
    s: &mut Socket,
    now: Instant,
    cx: &mut Cx<'_>,
    reply: &mut dyn FnMut(&TcpRepr<'_>),
) {
    if cx.challenge.allow(now) {
        cx.stats.challenge_acks += 1;
        let a = s.ack_segment(now);
        s.counters.segs_out += 1;
        reply(&a);
    } else {
        cx.stats.challenge_acks_suppressed += 1;
    }
}

fn send_ack(s: &mut Socket, now: Instant, reply: &mut dyn FnMut(&TcpRepr<'_>)) {
    let a = s.ack_segment(now);
    s.counters.segs_out += 1;
    reply(&a);
}

/// Processes one segment for this connection.
pub(crate) fn input(
    s: &mut Socket,
    now: Instant,
    seg: &TcpRepr<'_>,
    cx: &mut Cx<'_>,
    reply: &mut dyn FnMut(&TcpRepr<'_>),
) {
    match s.state {
        State::Closed | State::Listen => {
            if !seg.flags.contains(TcpFlags::RST) {
                reply(&rst_for(seg));
                cx.stats.resets_sent += 1;
            }
        }
        State::SynSent => syn_sent(s, now, seg, cx, reply),
        _ => synchronized(s, now, seg, cx, reply),
    }
    if s.ack_immediate && s.state.is_synchronized() {
        send_ack(s, now, reply);
    }
    s.ack_immediate = false;
}

/// RFC 9293 §3.10.7.3.
fn syn_sent(
    s: &mut Socket,
    now: Instant,
    seg: &TcpRepr<'_>,
    cx: &mut Cx<'_>,
    reply: &mut dyn FnMut(&TcpRepr<'_>),
) {
    let f = seg.flags;
    let has_ack = f.contains(TcpFlags::ACK);
    if has_ack && (seg.ack.diff(s.snd.iss()) <= 0 || seg.ack.diff(s.snd.nxt()) > 0) {
        if !f.contains(TcpFlags::RST) {
            reply(&rst_for(seg));
            cx.stats.resets_sent += 1;
        }
        cx.stats.dropped_bad_ack += 1;
        return;
    }
    if f.contains(TcpFlags::RST) {
        // RFC 5961 §3.2: in SYN-SENT a RST is valid only when it acknowledges our SYN.
        if has_ack {
            cx.stats.resets_received += 1;
            s.set_closed(Some(ConnError::Refused));
        } else {
            cx.stats.dropped_rst += 1;
        }
        return;
    }
    if !f.contains(TcpFlags::SYN) {
        cx.stats.dropped_other += 1;
        return;
    }
    s.counters.segs_in += 1;
    s.rcv.sync(seg.seq);
    let n = s.offer.negotiate(&seg.options, s.tuple.local().is_ipv6());
    s.apply_negotiated(n);
    if let Some(ts) = seg.options.timestamp.filter(|_| s.ts_on) {
        s.ts_recent = ts.tsval;
        s.ts_recent_age = now;
    }
    // RFC 7323 §2.2: the window of a SYN segment is never scaled.
    s.snd.init_window(u32::from(seg.window), seg.seq, seg.ack);
    s.last_rcv = now;
    if has_ack {
        s.snd.ack_to(seg.ack);
        syn_acked(s, now, seg, cx);
        s.state = State::Established;
        cx.stats.established += 1;
        s.ack_now = true;
        s.rearm_keepalive(now);
        text_and_fin(s, now, seg.seq + 1, seg, cx, reply);
    } else {
        // Simultaneous open (RFC 9293 §3.5 figure 7): answer with SYN,ACK from our ISS.
        s.state = State::SynReceived;
        s.syn_pending = true;
        s.retries = 0;
    }
}

/// Our SYN was acknowledged: stop its timer, take the RTT sample (Karn: only if it was
/// never retransmitted), and apply RFC 6298 §5.7.
fn syn_acked(s: &mut Socket, now: Instant, seg: &TcpRepr<'_>, _cx: &mut Cx<'_>) {
    s.timers.stop_rtx();
    s.timers.stop_persist();
    s.retries = 0;
    s.syn_pending = false;
    if let Some(rtt) = s.sampler.on_ack(seg.ack, now) {
        s.rtt.sample(rtt);
    } else if let Some(rtt) = ts_rtt(s, now, seg) {
        s.rtt.sample(rtt);
    }
    s.rtt.reset_backoff();
    if s.syn_retransmitted && s.rtt.srtt().is_none() {
        // RFC 6298 §5.7: after a lost SYN, start data transfer with an RTO of 3 s.
        s.rtt.reset_samples(Duration::from_secs(3));
    }
}

/// An RTT sample from the echoed timestamp (RFC 7323 §4, RTTM).
fn ts_rtt(s: &Socket, now: Instant, seg: &TcpRepr<'_>) -> Option<Duration> {
    if !s.ts_on {
        return None;
    }
    let ts = seg.options.timestamp?;
    if ts.tsecr == 0 {
        return None;
    }
    let ticks = s.tsval(now).wrapping_sub(ts.tsecr);
    if ticks > 1 << 30 {
        return None;
    }
    Some(Duration::from_millis(u64::from(ticks)))
}

/// RFC 9293 §3.10.7.4 for SYN-RECEIVED through TIME-WAIT.
fn synchronized(
    s: &mut Socket,
    now: Instant,
    seg: &TcpRepr<'_>,
    cx: &mut Cx<'_>,
    reply: &mut dyn FnMut(&TcpRepr<'_>),
) {
    let f = seg.flags;
    let rst = f.contains(TcpFlags::RST);
    let syn = f.contains(TcpFlags::SYN);

    // Simultaneous open (RFC 9293 §3.5 figure 8): the peer's SYN,ACK repeats its SYN and
    // acknowledges ours; it completes the handshake here.
    if s.state == State::SynReceived
        && syn
        && !rst
        && f.contains(TcpFlags::ACK)
        && seg.seq == s.rcv.irs()
        && seg.ack.diff(s.snd.una()) > 0
        && seg.ack.diff(s.snd.nxt()) <= 0
    {
        s.snd.ack_to(seg.ack);
        syn_acked(s, now, seg, cx);
        s.snd.init_window(u32::from(seg.window), seg.seq, seg.ack);
        s.state = if s.fin_queued {
            State::FinWait1
        } else {
            State::Established
        };
        cx.stats.established += 1;
        s.counters.segs_in += 1;
        s.ack_now = true;
        s.rearm_keepalive(now);
        return;
    }

    // A retransmitted SYN in SYN-RECEIVED: our SYN-ACK was lost, send it again.
    if s.state == State::SynReceived
        && syn
        && !rst
        && !f.contains(TcpFlags::ACK)
        && seg.seq == s.rcv.irs()
    {
        s.syn_pending = true;
        return;
    }

    // RFC 7323 §5.3 R1 (PAWS), before the window check.
    if s.ts_on && !rst {
        match seg.options.timestamp {
            None => {
                // RFC 7323 §3.2: non-RST segments without timestamps are dropped once
                // timestamps are in force.
                cx.stats.dropped_paws += 1;
                return;
            }
            Some(ts) if ts_before(ts.tsval, s.ts_recent) => {
                if now.saturating_duration_since(s.ts_recent_age) > PAWS_IDLE_LIMIT {
                    s.ts_recent = ts.tsval;
                    s.ts_recent_age = now;
                } else {
                    cx.stats.dropped_paws += 1;
                    send_ack(s, now, reply);
                    return;
                }
            }
            Some(_) => {}
        }
    }

    // §3.10.7.4 first: sequence number acceptability.
    let seg_len = seg.segment_len() as u32;
    // A RST is judged against the window actually advertised (RCV.NXT up to the right
    // edge we sent, RFC 9293 §3.10.7.4, RFC 5961 §3.2): one beyond it is dropped
    // silently, however much room the buffer has. Data may still land in free buffer
    // beyond the edge (a window update the peer has not seen yet costs nothing to honour).
    let wnd = if rst {
        s.rcv_wnd()
    } else {
        s.rcv_wnd().max(s.rcv_space())
    };
    // A bare FIN at RCV.NXT is taken even when the window is zero: it needs no buffer
    // space. RFC 9293 §3.10.7.4 makes this allowance for ACKs, URGs and RSTs; Linux
    // (tcp_data_queue) makes it for a bare FIN too, to break FIN/ACK loops with peers
    // that resend it against a closed window. A FIN behind data still waits for room.
    let zero_window_fin = wnd == 0
        && f.contains(TcpFlags::FIN)
        && !rst
        && !syn
        && seg.payload_len() == 0
        && seg.seq == s.rcv.nxt();
    if !zero_window_fin && !s.rcv.acceptable(seg.seq, seg_len, wnd) {
        if rst {
            cx.stats.dropped_rst += 1;
        } else if s.state == State::TimeWait && syn {
            // Handled by the layer (reuse check) before it gets here; a SYN that is
            // not reopening the connection gets the duplicate ACK.
            cx.stats.dropped_out_of_window += 1;
            send_ack(s, now, reply);
        } else if s.state == State::TimeWait
            && f.contains(TcpFlags::FIN)
            && seg.seq + seg_len == s.rcv.nxt()
        {
            // The peer's FIN again: our ACK was lost. RFC 7323 §4.3: SEG.SEQ <=
            // Last.ACK.sent and PAWS passed, so its TSval becomes TS.Recent and the ACK
            // echoes it (as the compact TIME-WAIT record does); 2*MSL restarts (RFC 9293
            // §3.10.7.4).
            if let Some(ts) = seg.options.timestamp.filter(|_| s.ts_on) {
                s.ts_recent = ts.tsval;
                s.ts_recent_age = now;
            }
            s.enter_time_wait(now, cx.cfg);
            send_ack(s, now, reply);
        } else {
            cx.stats.dropped_out_of_window += 1;
            let end = seg.seq + seg.payload_len() as u32;
            if s.sack_on && seg.payload_len() != 0 && end.diff(s.rcv.nxt()) <= 0 {
                // RFC 2883 §4: report the duplicate so the sender can detect spurious
                // retransmissions.
                s.dsack = Some((seg.seq, end));
            }
            send_ack(s, now, reply);
        }
        return;
    }

    // RFC 7323 §4.3 R3: the timestamp to echo from now on, if this segment may set it.
    // It is taken only once the segment has passed every check below, the ACK's among
    // them (RFC 5961 §5, RFC 7323 §4.3 and Linux's FLAG_UPDATE_TS_RECENT): a blind
    // segment with an unacceptable ACK and a huge TSval would otherwise move TS.Recent
    // ahead of the peer's clock, and PAWS would drop every later valid segment.
    let new_ts_recent = seg
        .options
        .timestamp
        .filter(|ts| {
            s.ts_on
                && !rst
                && seg.seq.diff(s.rcv.last_ack_sent()) <= 0
                && !ts_before(ts.tsval, s.ts_recent)
        })
        .map(|ts| ts.tsval);

    // Second: RST (RFC 5961 §3.2: only an exact match resets; in-window gets a challenge).
    if rst {
        if seg.seq != s.rcv.nxt() {
            challenge_ack(s, now, cx, reply);
            return;
        }
        cx.stats.resets_received += 1;
        match s.state {
            State::SynReceived if s.passive => s.set_closed(None),
            State::SynReceived => s.set_closed(Some(ConnError::Refused)),
            State::Established | State::FinWait1 | State::FinWait2 | State::CloseWait => {
                s.tx.clear();
                s.rx.clear();
                s.set_closed(Some(ConnError::Reset));
            }
            State::TimeWait => {
                // RFC 1337: ignore RST in TIME-WAIT.
                cx.stats.resets_received -= 1;
                cx.stats.dropped_rst += 1;
            }
            _ => s.set_closed(None),
        }
        return;
    }

    // Fourth: SYN in a synchronized state (RFC 5961 §4.2, RFC 9293 §3.10.7.4).
    if syn {
        challenge_ack(s, now, cx, reply);
        return;
    }

    // Fifth: ACK.
    if !f.contains(TcpFlags::ACK) {
        cx.stats.dropped_other += 1;
        return;
    }
    s.counters.segs_in += 1;
    s.last_rcv = now;

    if s.state == State::SynReceived {
        if seg.ack.diff(s.snd.una()) > 0 && seg.ack.diff(s.snd.nxt()) <= 0 {
            s.snd.ack_to(seg.ack);
            syn_acked(s, now, seg, cx);
            let wnd = u32::from(seg.window) << s.snd.wscale();
            s.snd.init_window(wnd, seg.seq, seg.ack);
            s.state = if s.fin_queued {
                State::FinWait1
            } else {
                State::Established
            };
            cx.stats.established += 1;
        } else {
            reply(&rst_for(seg));
            cx.stats.resets_sent += 1;
            cx.stats.dropped_bad_ack += 1;
            return;
        }
    }

    if !ack(s, now, seg, cx, reply) {
        return;
    }
    if let Some(tsval) = new_ts_recent {
        s.ts_recent = tsval;
        s.ts_recent_age = now;
    }
    if s.state == State::Closed {
        return;
    }
    s.rearm_keepalive(now);

    text_and_fin(s, now, seg.seq, seg, cx, reply);
}

/// §3.10.7.4 fifth, for states past SYN-RECEIVED. Returns false when the segment must
/// be dropped now.
fn ack(
    s: &mut Socket,
    now: Instant,
    seg: &TcpRepr<'_>,
    cx: &mut Cx<'_>,
    reply: &mut dyn FnMut(&TcpRepr<'_>),
) -> bool {
    let ack = seg.ack;
    // RFC 5961 §5.2: acceptable iff SND.UNA - MAX.SND.WND <= SEG.ACK <= SND.NXT.
    if ack.diff(s.snd.nxt()) > 0 {
        cx.stats.dropped_bad_ack += 1;
        challenge_ack(s, now, cx, reply);
        return false;
    }
    let oldest = s.snd.una() - s.snd.max_wnd().min(1 << 30);
    if ack.diff(oldest) < 0 {
        cx.stats.dropped_bad_ack += 1;
        challenge_ack(s, now, cx, reply);
        return false;
    }

    let window = u32::from(seg.window) << s.snd.wscale();
    let acked = ack.distance_from(s.snd.una());
    let fin = seg.flags.contains(TcpFlags::FIN);
    // RFC 5681 §2 "duplicate acknowledgment".
    let is_dup = acked == 0
        && ack == s.snd.una()
        && seg.payload_len() == 0
        && !fin
        && window == s.snd.wnd()
        && window > 0
        && !s.timers.persist()
        && s.snd.nxt() != s.snd.una();

    let newly_sacked = if s.sack_on && !seg.options.sack_blocks.is_empty() {
        s.rec
            .on_sack_blocks(&s.snd, ack, seg.options.sack_blocks.as_slice())
    } else {
        0
    };

    if acked > 0 {
        new_ack(s, now, seg, acked);
        if !s.tx_room() {
            // A writer may be waiting for room (Linux `tcp_new_space` on
            // `SOCK_NOSPACE`): the buffer keeps up with the window while it waits.
            s.expand_tx(cx);
        }
    }
    if s.probe_end == Some(s.snd.nxt()) && s.snd.nxt() != s.snd.una() {
        // Nothing but a window probe is outstanding, and this ACK did not take it.
        s.retract_probe();
    }

    // RFC 9293 §3.10.7.4: update the send window from the newest segment only.
    if s.snd.window_update_allowed(seg.seq, ack) {
        let was_zero = s.snd.wnd() == 0;
        s.snd.update_window(window, seg.seq, ack);
        if was_zero && window > 0 {
            s.leave_persist(now);
        }
    }
    if s.timers.persist() {
        // RFC 1122 §4.2.2.17: an answered probe is progress, however small the window.
        s.retries = 0;
    }

    // RFC 6675 §2: an ACK with new SACK information counts as a duplicate even when it
    // also moves SND.UNA, so recovery starts on the first ACK that reveals a loss
    // (§5 step 2, IsLost). A zero window explains the silence; its repeated ACKs are
    // not loss signals.
    if s.snd.nxt() != s.snd.una() && !s.timers.persist() && (is_dup || newly_sacked > 0) {
        let (rec, mut p) = s.loss();
        rec.on_dupack(&mut p, now);
    }
    let tsecr = seg.options.timestamp.map(|t| t.tsecr);
    s.after_ack(now, acked.saturating_add(newly_sacked), tsecr, cx.stats);

    if s.fin_queued && s.fin_acked() {
        match s.state {
            State::FinWait1 => {
                s.state = State::FinWait2;
                s.arm_fin_wait2(now, cx.cfg.fin_wait2_timeout);
            }
            State::Closing => s.enter_time_wait(now, cx.cfg),
            State::LastAck => {
                s.set_closed(None);
                return false;
            }
            _ => {}
        }
    }
    true
}

/// A cumulative ACK that acknowledges `acked` new bytes of sequence space.
fn new_ack(s: &mut Socket, now: Instant, seg: &TcpRepr<'_>, acked: u32) {
    let seq0 = s.tx_seq0();
    let data = (seg.ack.distance_from(seq0) as usize).min(s.tx.len());
    s.tx.dequeue_allocated(data);
    // Everything written was acknowledged: the next writes start where the cache is warm.
    s.tx.rewind();
    // Acknowledged bytes made room in the storage SEND could not grow (`mem.rs`).
    s.tx_starved &= data == 0;
    let prior_una = s.snd.una();
    s.snd.ack_to(seg.ack);
    s.counters.bytes_acked += data as u64;

    // RTT: the µs sampler (Karn's rule applies), else RTTM when a retransmission made
    // the sampler unusable (RFC 7323 §4.1 makes echoed timestamps unambiguous).
    if let Some(rtt) = s.sampler.on_ack(seg.ack, now) {
        s.rtt.sample(rtt);
        s.rtt_ambiguous = false;
    } else if s.rtt_ambiguous {
        if let Some(rtt) = ts_rtt(s, now, seg) {
            s.rtt.sample(rtt);
            s.rtt_ambiguous = false;
        }
    }
    s.retries = 0;
    s.rtt.reset_backoff();

    let flight_at_send = s.flight_at_send;
    let (rec, mut p) = s.loss();
    rec.on_new_ack(&mut p, now, prior_una, acked, flight_at_send);

    // RFC 6298 §5.2 and §5.3: stop the timer when all is acknowledged, else restart it.
    if s.snd.una() == s.snd.nxt() {
        s.unacked_since = None;
        if !s.timers.persist() {
            s.timers.stop_rtx();
        }
    } else {
        s.unacked_since = Some(now);
        if !s.timers.persist() {
            s.timers.arm_rtx(now + s.rtt.rto());
        }
    }
    let (rec, mut p) = s.loss();
    rec.tlp_on_ack(&mut p, now);
    s.arm_tlp(now);
}

/// §3.10.7.4 seventh and eighth: segment text and FIN. `seq` is the sequence number of
/// the first payload byte.
fn text_and_fin(
    s: &mut Socket,
    now: Instant,
    seq: SeqNumber,
    seg: &TcpRepr<'_>,
    cx: &mut Cx<'_>,
    reply: &mut dyn FnMut(&TcpRepr<'_>),
) {
    if seg.payload_len() != 0 {
        if matches!(
            s.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) {
            if s.orphan && seq.add(seg.payload_len() as u32).diff(s.rcv.nxt()) > 0 {
                // New data for a connection the application closed: nobody will ever
                // read it; tell the peer (RFC 1122 §4.2.2.13, RFC 2525 §2.17).
                let rst = s.rst_segment(now);
                reply(&rst);
                cx.stats.resets_sent += 1;
                s.set_closed(Some(ConnError::Aborted));
                return;
            }
            recv::deliver(
                s,
                now,
                seq,
                recv::Text::new(seg.payload, seg.payload_rest),
                cx,
            );
        } else {
            // Data after the peer's FIN cannot be new; acknowledge what we have.
            s.ack_now = true;
        }
    }
    if seg.flags.contains(TcpFlags::FIN) && s.state.is_synchronized() {
        let at = seq + seg.payload_len() as u32;
        if s.state.may_receive() && at.diff(s.rcv.nxt()) >= 0 {
            s.rcv.note_fin(at);
        } else {
            // The peer's FIN was taken already, so this one (wherever it sits: behind
            // RCV.NXT as a retransmission, or at RCV.NXT) is not new: acknowledge it
            // again, and in TIME-WAIT restart the 2 MSL timeout (RFC 9293 §3.10.7.4,
            // eighth, TIME-WAIT STATE).
            s.ack_now = true;
            if s.state == State::TimeWait {
                s.enter_time_wait(now, cx.cfg);
            }
        }
    }
    if s.rcv.fin_reached() && s.state.may_receive() {
        fin(s, now, cx);
    }
}

/// The peer's FIN is reached in sequence (§3.10.7.4 eighth).
fn fin(s: &mut Socket, now: Instant, cx: &mut Cx<'_>) {
    s.rcv.take_fin();
    s.ack_now = true;
    match s.state {
        State::SynReceived | State::Established => s.state = State::CloseWait,
        State::FinWait1 => {
            if s.fin_acked() {
                s.enter_time_wait(now, cx.cfg);
            } else {
                s.state = State::Closing;
            }
        }
        State::FinWait2 => s.enter_time_wait(now, cx.cfg),
        _ => {}
    }
    // Keepalive has nothing to probe once the peer is done sending.
    if s.state != State::TimeWait {
        s.timers.stop_idle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rst_for_follows_rfc_9293() {
        let seg = TcpRepr {
            src_port: 1,
            dst_port: 2,
            seq: SeqNumber(100),
            ack: SeqNumber(7),
            flags: TcpFlags::SYN,
            window: 0,
            urgent: 0,
            options: TcpOptions::none(),
            payload: b"ab",
            payload_rest: &[],
        };
        let r = rst_for(&seg);
        assert_eq!((r.seq, r.ack), (SeqNumber(0), SeqNumber(103)));
        assert_eq!(r.flags, TcpFlags::RST | TcpFlags::ACK);
        let mut a = seg;
        a.flags = TcpFlags::ACK;
        let r = rst_for(&a);
        assert_eq!((r.seq, r.flags), (SeqNumber(7), TcpFlags::RST));
        assert_eq!((r.src_port, r.dst_port), (2, 1));
    }
}
