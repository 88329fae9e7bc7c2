//! Segment generation for one connection: SYN / SYN-ACK, retransmissions, new data with
//! sender-side silly window avoidance and Nagle (RFC 1122 §4.2.3.4, RFC 9293 §3.8.6.2.1),
//! window probes (RFC 9293 §3.8.6.1), keepalive probes (RFC 1122 §4.2.3.6), FIN, and
//! pure ACKs / window updates.
//!
//! One call produces at most one segment. Its payload is lent straight from the send
//! buffer when contiguous there, else copied into the caller's scratch buffer (no
//! allocation); the emitter copies it into the frame once. Socket state is changed only after
//! `emit` accepted the segment, so a full transmit ring loses nothing.

use ulnet_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};

use crate::time::Instant;

use super::{Cx, Socket};
use crate::tcp::congestion::CongestionControl;
use crate::tcp::state::State;

/// Emits one segment, or a burst of segments of the given payload size (0: one
/// segment); false when the transmit ring is full.
pub(crate) type Emit<'a> = dyn FnMut(&TcpRepr<'_>, u16) -> bool + 'a;

/// What one output step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// A segment went out; call again for more.
    Sent,
    /// Nothing to send now.
    Idle,
    /// `emit` refused the segment (transmit ring full); try later.
    Blocked,
}

/// Which kind of segment a plan builds; decides the bookkeeping after emission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Retransmit,
    Probe,
    New,
}

/// Tries to send one segment.
pub(crate) fn output(
    s: &mut Socket,
    now: Instant,
    cx: &mut Cx<'_>,
    scratch: &mut [u8],
    emit: &mut Emit<'_>,
) -> Output {
    match s.state {
        State::Closed | State::Listen => return Output::Idle,
        State::SynSent | State::SynReceived if s.syn_pending => {
            return syn(s, now, emit);
        }
        State::SynSent => return Output::Idle,
        _ => {}
    }
    if s.state == State::SynReceived {
        // Nothing but the SYN-ACK until the handshake completes.
        return Output::Idle;
    }
    if s.state == State::TimeWait {
        return ack_only(s, now, emit);
    }

    // Retransmissions first.
    if let Some((seq, max)) = s.rec.next_retransmission(&s.snd, &s.cc, s.tx.len()) {
        let r = data(s, now, cx, seq, max, Kind::Retransmit, scratch, emit);
        if r != Output::Idle {
            return r;
        }
    }
    if s.timers.probe_due() {
        return probe(s, now, cx, scratch, emit);
    }
    if s.timers.tlp_due() {
        let r = loss_probe(s, now, cx, scratch, emit);
        if r != Output::Idle {
            return r;
        }
    }
    if s.timers.keepalive_due() {
        return keepalive(s, now, emit);
    }
    let gso_max = s.burst_max(now, cx.cfg.gso_max);
    if let Some((seq, len)) = new_data_plan(s, now, gso_max) {
        return data(s, now, cx, seq, len, Kind::New, scratch, emit);
    }
    ack_only(s, now, emit)
}

fn ack_only(s: &mut Socket, now: Instant, emit: &mut Emit<'_>) -> Output {
    if !s.ack_now {
        return Output::Idle;
    }
    let saved = s.rcv.mark();
    let a = s.ack_segment(now);
    if !emit(&a, 0) {
        s.rcv.unsend(saved);
        s.ack_now = true;
        return Output::Blocked;
    }
    s.counters.segs_out += 1;
    Output::Sent
}

/// SYN (SYN-SENT) or SYN-ACK (SYN-RECEIVED) from ISS.
fn syn(s: &mut Socket, now: Instant, emit: &mut Emit<'_>) -> Output {
    let synack = s.state == State::SynReceived;
    let mut options = TcpOptions::none();
    options.mss = Some(s.offer.mss);
    if synack {
        options.window_scale = s.ws_on.then_some(s.rcv.wscale());
        options.sack_permitted = s.sack_on;
        if s.ts_on {
            options.timestamp = Some(ulnet_wire::TcpTimestamp {
                tsval: s.tsval(now),
                tsecr: s.ts_recent,
            });
        }
    } else {
        options = s.offer.syn_options(s.tsval(now), None);
    }
    let saved = s.rcv.mark();
    let window = s.take_window_field(true);
    let repr = TcpRepr {
        src_port: s.tuple.local().port(),
        dst_port: s.tuple.remote().port(),
        seq: s.snd.iss(),
        ack: if synack { s.rcv.nxt() } else { SeqNumber(0) },
        flags: if synack {
            TcpFlags::SYN | TcpFlags::ACK
        } else {
            TcpFlags::SYN
        },
        window,
        urgent: 0,
        options,
        payload: &[],
        payload_rest: &[],
    };
    if !emit(&repr, 0) {
        s.rcv.unsend(saved);
        return Output::Blocked;
    }
    s.counters.segs_out += 1;
    s.syn_pending = false;
    if synack {
        s.note_ack_sent();
    }
    // The SYN takes one sequence number.
    s.snd.sent_to(s.snd.iss() + 1);
    if !s.syn_retransmitted {
        s.sampler.start(s.snd.iss() + 1, now);
    }
    s.timers.arm_rtx_if_stopped(now + s.rtt.rto());
    Output::Sent
}

/// The next new-data segment allowed by the windows, SWS avoidance and Nagle:
/// (first sequence number, length). A zero length means "FIN only".
///
/// With `gso_max` above one segment the plan may cover a burst of up to `gso_max` bytes
/// of full-sized segments (the last may be short only where the queued data ends), and
/// the channel cuts it. The windows alone size it; Linux also caps a TSO burst at about
/// a millisecond of its pacing rate (`tcp_tso_autosize`), which this does not do.
fn new_data_plan(s: &mut Socket, now: Instant, gso_max: u32) -> Option<(SeqNumber, u32)> {
    if !matches!(
        s.state,
        State::Established | State::CloseWait | State::FinWait1 | State::Closing | State::LastAck
    ) || s.fin_sent()
    {
        return None;
    }
    let unsent = s.unsent_len() as u32;
    if unsent == 0 {
        if s.cc.model_based() && s.rec.pipe(&s.snd) < s.cc.cwnd().min(u32::MAX as usize) as u32 {
            // Nothing to send and room to send it: what the ACKs measure until this
            // flight is delivered is the application's rate, not the path's (only a
            // model-based controller reads the mark).
            s.rec.mark_app_limited(&s.snd);
        }
        // Only a FIN may be left to send; it takes no window (like every stack).
        return s.fin_queued.then_some((s.snd.nxt(), 0));
    }
    let mss = u32::from(s.data_mss());
    let outstanding = s.snd.in_flight();
    if outstanding == 0 && s.cc.on_idle_restart(now, s.rtt.rto()) {
        // RFC 5681 §4.1: cwnd was reset to the restart window after idling.
    }
    if let Some(at) = s.cc.send_time().filter(|&t| t > now) {
        // A pacing controller (BBR) holds the next burst until its departure time.
        s.timers.arm_pace(at);
        return None;
    }
    let gso_max = s.cc.send_quantum().map_or(gso_max, |q| gso_max.min(q));
    let wnd_room = s.snd.wnd_room();
    let cc_room = s.rec.send_allowance(&s.snd, &s.cc);
    let mut len = unsent.min(wnd_room).min(cc_room).min(gso_max.max(mss));
    if len > mss && len < unsent {
        len -= len % mss;
    }
    if len == 0 {
        if wnd_room == 0 && outstanding == 0 {
            // RFC 9293 §3.8.6.1: zero window with data waiting: probe.
            s.enter_persist(now);
        }
        return None;
    }
    if len < mss {
        let all = len == unsent;
        // RFC 1122 §4.2.3.4: send a short segment only if it is all we have and Nagle
        // allows, or it is at least half the largest window the peer offered.
        let nagle_ok = s.nodelay || outstanding == 0;
        let half_window = s.snd.max_wnd() > 0 && len >= s.snd.max_wnd() / 2;
        if !((all && nagle_ok) || half_window) {
            if outstanding == 0 && len < unsent && wnd_room < mss {
                // Held back by the peer's small window with nothing in flight: the
                // persist timer overrides SWS avoidance so we cannot deadlock.
                s.enter_persist(now);
            }
            return None;
        }
    }
    Some((s.snd.nxt(), len))
}

/// Builds and emits a segment of up to `max` payload bytes starting at `seq` (FIN
/// attached when it reaches the end of the queued data).
#[allow(clippy::too_many_arguments)] // one segment's whole context; a struct would only rename it
fn data(
    s: &mut Socket,
    now: Instant,
    cx: &mut Cx<'_>,
    seq: SeqNumber,
    max: u32,
    kind: Kind,
    scratch: &mut [u8],
    emit: &mut Emit<'_>,
) -> Output {
    let seq0 = s.tx_seq0();
    let offset = seq.distance_from(seq0) as usize;
    let options = s.segment_options(now);
    // Room for SACK blocks beyond the timestamps (RFC 6691).
    let opt_extra = options
        .buffer_len()
        .saturating_sub(if s.ts_on { 12 } else { 0 });
    let cap = usize::from(s.data_mss()).saturating_sub(opt_extra).max(1);
    let avail = s.tx.len().saturating_sub(offset);
    // New data may go as a burst of `cap`-sized segments that the channel cuts
    // (`TcpConfig::gso_max`); all full-sized but the one that ends the queued data.
    let gso_max = if kind == Kind::New {
        s.burst_max(now, cx.cfg.gso_max)
    } else {
        0
    };
    let burst = gso_max as usize > cap;
    let limit = if burst {
        (max as usize).min(gso_max as usize)
    } else {
        (max as usize).min(cap)
    };
    let mut want = limit.min(avail).min(scratch.len());
    if want > cap && want < avail {
        want -= want % cap;
    }
    // The payload comes straight from the send buffer when it is contiguous there (all
    // but the segment that straddles the ring's end): one copy, into the frame.
    let contiguous = s.tx.get_allocated(offset, want).len() == want;
    let n = if contiguous {
        want
    } else {
        s.tx.read_allocated(offset, &mut scratch[..want])
    };
    let end_data = seq + n as u32;
    // The FIN sits right after the last buffered byte; once sent, only its own sequence
    // number may carry it again (never FIN+1 after it was acknowledged and the buffer
    // emptied).
    let fin = s.fin_queued
        && offset + n == s.tx.len()
        && s.state != State::SynReceived
        && s.fin_sent_seq.is_none_or(|f| f == end_data);
    if n == 0 && !fin {
        return Output::Idle;
    }
    let mut flags = TcpFlags::ACK;
    if fin {
        flags |= TcpFlags::FIN;
    }
    let push = n > 0
        && match kind {
            // Linux sets PSH on a window probe carrying data (tcp_write_wakeup).
            Kind::Probe => true,
            Kind::New => offset + n == s.tx.len() || forced_push(s, n as u32),
            Kind::Retransmit => offset + n == s.tx.len(),
        };
    if push {
        flags |= TcpFlags::PSH;
    }
    let saved = s.rcv.mark();
    let window = s.take_window_field(false);
    let repr = TcpRepr {
        src_port: s.tuple.local().port(),
        dst_port: s.tuple.remote().port(),
        seq,
        ack: s.rcv.nxt(),
        flags,
        window,
        urgent: 0,
        options,
        payload: if contiguous {
            s.tx.get_allocated(offset, n)
        } else {
            &scratch[..n]
        },
        payload_rest: &[],
    };
    let segments = n.div_ceil(cap).max(1);
    let segment_size = if segments > 1 { cap as u16 } else { 0 };
    if !emit(&repr, segment_size) {
        s.rcv.unsend(saved);
        return Output::Blocked;
    }
    s.counters.segs_out += segments as u64;
    s.note_ack_sent();
    if n > 0 && kind == Kind::New {
        // Data answering the peer's data within the delayed-ACK time: an interactive
        // exchange, whose ACKs ride on the replies (Linux's tcp_event_data_sent, with
        // TCP_PINGPONG_THRESH 1).
        if s.data_rcvd_at
            .is_some_and(|t| now.saturating_duration_since(t) < cx.cfg.delayed_ack)
        {
            s.pingpong = true;
        }
    }
    if kind == Kind::New {
        s.unpushed = if push {
            0
        } else {
            s.unpushed.saturating_add(n as u32)
        };
    }
    let end = end_data + u32::from(fin);
    if fin && s.fin_sent_seq.is_none() {
        s.fin_sent_seq = Some(end_data);
    }
    if n > 0 {
        // Every byte sent, retransmissions too, spends the pacer's budget.
        s.cc.on_send(now, n);
    }
    if kind == Kind::Retransmit {
        let (rec, mut p) = s.loss();
        rec.on_retransmitted(&mut p, now, seq, end);
        // Karn's rule (RFC 6298 §3): no RTT sample from a retransmitted segment.
        s.sampler.on_retransmit();
        s.rtt_ambiguous = true;
        s.counters.bytes_retrans += n as u64;
        cx.stats.retransmitted_segments += 1;
        cx.stats.retransmitted_bytes += n as u64;
    }
    if kind != Kind::Retransmit {
        // RFC 8985 §6.1: every transmission's time is recorded (retransmissions above);
        // a burst as the segments it is cut into, so that loss detection and
        // retransmission work on the segments the peer sees.
        let mut from = seq;
        for i in 1..segments {
            let to = seq + (i * cap) as u32;
            s.rec.on_sent(from, to, now);
            from = to;
        }
        s.rec.on_sent(from, end, now);
    }
    let only_probe = kind == Kind::Probe && seq == s.snd.una() && end.diff(s.snd.nxt()) >= 0;
    after_send(s, now, seq, end);
    s.probe_end = only_probe.then_some(s.snd.nxt());
    let repair = kind == Kind::Retransmit && s.rec.in_fast_recovery();
    if (kind == Kind::New || repair) && end != seq {
        // RFC 8985 §7.2: new data (re)starts the loss probe timer; so does a fast
        // recovery retransmission, so that a probe, if one is needed, follows it (after
        // an RTO the timeout's own backoff governs, RFC 6298 §5.5).
        s.arm_tlp(now);
    }
    Output::Sent
}

/// Linux's forced push (`forced_push` in tcp.c): PSH once more than half the largest
/// window the peer offered has gone out since the last PSH. Otherwise PSH marks only the
/// segment that empties the send queue (the end of what the application wrote, RFC 9293
/// §3.9.1), not every segment the windows happen to cut short: a window- or
/// congestion-limited tail is mid-flight, and PSH there tells the receiver nothing.
///
/// This replaces `last_of_burst` (PSH on the last segment the windows let out), which
/// was added so a Linux receiver would ACK a window-limited flight at once. A Linux
/// receiver takes its "pushed" hint for delayed ACKs (`ICSK_ACK_PUSHED`,
/// tcp_measure_rcv_mss) from segments shorter than its MSS estimate, not from PSH on a
/// full-sized segment; the tails this rule leaves unmarked are full-sized (a short
/// segment goes out only when it empties the queue, and then it carries PSH), and an
/// unread-buffer receiver still ACKs every second full segment. A peer that does wait
/// for PSH still sees one at least every half window.
fn forced_push(s: &Socket, n: u32) -> bool {
    let half = s.snd.max_wnd() / 2;
    s.unpushed.saturating_add(n) > half
}

/// A tail loss probe (RFC 8985 §7.3): one segment of new data if there is any and the
/// peer's window takes it (congestion control does not limit the probe), else the last
/// segment sent, again (with the FIN if that was sent).
fn loss_probe(
    s: &mut Socket,
    now: Instant,
    cx: &mut Cx<'_>,
    scratch: &mut [u8],
    emit: &mut Emit<'_>,
) -> Output {
    if !s.rec.may_probe(&s.snd, &s.timers, s.probe_open()) {
        s.timers.tlp_done();
        return Output::Idle;
    }
    let mss = u32::from(s.data_mss());
    let seq0 = s.tx_seq0();
    let unsent = s.unsent_len() as u32;
    let wnd_room = s.snd.wnd_room();
    let (seq, len, kind) = if unsent > 0 && wnd_room > 0 && !s.fin_sent() {
        (s.snd.nxt(), unsent.min(wnd_room).min(mss), Kind::New)
    } else {
        let data_end = s.snd.nxt() - u32::from(s.fin_sent());
        let back = data_end.distance_from(seq0).min(mss);
        (data_end - back, back, Kind::Retransmit)
    };
    let r = data(s, now, cx, seq, len, kind, scratch, emit);
    if r == Output::Sent && kind == Kind::New && len == mss {
        // A second full segment with a probe of new data, when there is one: a receiver
        // ACKs at once only from the second full-sized segment on (RFC 5681 §4.2), and
        // Linux may hold the ACK of a lone one up to 200 ms (its delayed-ACK maximum),
        // as long as our RTO. Measured against Linux with 2% loss each way: the ACK
        // that the probe exists to draw came too late to prevent the timeout.
        let room = s.snd.wnd_room();
        let left = s.unsent_len() as u32;
        if room > 0 && left > 0 && !s.fin_sent() {
            let _ = data(
                s,
                now,
                cx,
                s.snd.nxt(),
                left.min(room).min(mss),
                Kind::New,
                scratch,
                emit,
            );
        }
    }
    if r == Output::Sent {
        cx.stats.loss_probes += 1;
        let (rec, mut p) = s.loss();
        rec.on_probe_sent(&mut p, now, kind == Kind::Retransmit);
    } else if r == Output::Idle {
        s.timers.tlp_done();
    }
    r
}

/// Bookkeeping common to every segment that takes sequence space.
fn after_send(s: &mut Socket, now: Instant, seq: SeqNumber, end: SeqNumber) {
    if end.diff(s.snd.nxt()) > 0 {
        if seq.diff(s.snd.nxt()) >= 0 {
            s.sampler.start(end, now);
        }
        s.snd.sent_to(end);
    }
    s.flight_at_send = s.snd.in_flight();
    if s.unacked_since.is_none() && end != seq {
        s.unacked_since = Some(now);
    }
    // RFC 6298 §5.1: start the timer if it is not running.
    if s.snd.nxt() != s.snd.una() {
        s.timers.arm_rtx_if_stopped(now + s.rtt.rto());
    }
}

/// A zero-window probe (RFC 9293 §3.8.6.1): one byte, the oldest unacknowledged if any,
/// else the next new one.
fn probe(
    s: &mut Socket,
    now: Instant,
    cx: &mut Cx<'_>,
    scratch: &mut [u8],
    emit: &mut Emit<'_>,
) -> Output {
    let room = s.snd.wnd_room();
    if room > 0 {
        // The window is open but too small for SWS avoidance: the override timeout of
        // RFC 1122 §4.2.3.4 (4) sends what fits, and the RTO takes over.
        let r = data(s, now, cx, s.snd.nxt(), room, Kind::New, scratch, emit);
        if r != Output::Blocked {
            s.timers.probe_done();
            s.timers.stop_persist();
            if s.snd.nxt() != s.snd.una() {
                s.timers.arm_rtx(now + s.rtt.rto());
            } else {
                s.timers.stop_rtx();
            }
        }
        return r;
    }
    let seq = if s.snd.nxt() != s.snd.una() {
        s.snd.una()
    } else {
        s.snd.nxt()
    };
    let r = data(s, now, cx, seq, 1, Kind::Probe, scratch, emit);
    if r != Output::Blocked {
        s.timers.probe_done();
    }
    if r == Output::Sent && s.timers.persist() {
        // The persist timer, not the RTO, watches the probe byte.
        s.timers.arm_rtx_if_stopped(now + s.rtt.rto());
    }
    r
}

/// A keepalive probe (RFC 1122 §4.2.3.6): <SEQ=SND.NXT-1><ACK=RCV.NXT>, no data, which
/// an alive peer must answer with an ACK.
fn keepalive(s: &mut Socket, now: Instant, emit: &mut Emit<'_>) -> Output {
    let saved = s.rcv.mark();
    let mut a = s.ack_segment(now);
    a.seq = s.snd.nxt() - 1;
    if !emit(&a, 0) {
        s.rcv.unsend(saved);
        return Output::Blocked;
    }
    s.counters.segs_out += 1;
    s.timers.keepalive_done();
    Output::Sent
}

impl Socket {
    /// Base options of a non-SYN segment: timestamps when in force, then SACK blocks.
    pub(crate) fn segment_options(&self, now: Instant) -> TcpOptions {
        let mut o = TcpOptions::none();
        if self.ts_on {
            o.timestamp = Some(ulnet_wire::TcpTimestamp {
                tsval: self.tsval(now),
                tsecr: self.ts_recent,
            });
        }
        if self.sack_on {
            super::recv::fill_sack_blocks(self, &mut o);
        }
        o
    }

    /// A bare ACK <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK> with current options.
    pub(crate) fn ack_segment(&mut self, now: Instant) -> TcpRepr<'static> {
        let options = self.segment_options(now);
        let window = self.take_window_field(false);
        self.note_ack_sent();
        TcpRepr {
            src_port: self.tuple.local().port(),
            dst_port: self.tuple.remote().port(),
            seq: self.snd.acceptable_seq(),
            ack: self.rcv.nxt(),
            flags: TcpFlags::ACK,
            window,
            urgent: 0,
            options,
            payload: &[],
            payload_rest: &[],
        }
    }

    /// A RST for this connection: <SEQ=SND.NXT><CTL=RST> (RFC 9293 §3.10.5 ABORT), or
    /// the edge of a window the peer shrank (see `SendSeq::acceptable_seq`). It
    /// carries the timestamp option when timestamps were negotiated (RFC 7323 §3.2: it
    /// SHOULD be sent in a RST too; Linux's active resets do, and a peer that checks
    /// PAWS on RSTs (§5.2) needs it). No SACK blocks: nothing will be retransmitted.
    pub(crate) fn rst_segment(&self, now: Instant) -> TcpRepr<'static> {
        let mut options = TcpOptions::none();
        if self.ts_on {
            options.timestamp = Some(ulnet_wire::TcpTimestamp {
                tsval: self.tsval(now),
                tsecr: self.ts_recent,
            });
        }
        TcpRepr {
            src_port: self.tuple.local().port(),
            dst_port: self.tuple.remote().port(),
            seq: self.snd.acceptable_seq(),
            ack: self.rcv.nxt(),
            flags: TcpFlags::RST | TcpFlags::ACK,
            window: 0,
            urgent: 0,
            options,
            payload: &[],
            payload_rest: &[],
        }
    }

    /// Bookkeeping for any segment that carries ACK=RCV.NXT.
    pub(crate) fn note_ack_sent(&mut self) {
        self.rcv.note_ack_sent();
        // Every segment that acknowledges RCV.NXT uses up one quick ACK (Linux's
        // tcp_event_ack_sent → tcp_dec_quickack_mode).
        self.quick_acks = self.quick_acks.saturating_sub(1);
        self.compressed_acks = 0;
        self.ack_now = false;
        self.ack_immediate = false;
        self.timers.stop_delack();
        self.dsack = None;
    }
}
