//! The receive half: payload into the receive buffer (in order, or held out of order in
//! the buffer's free space), the ACK policy (delayed ACK, RFC 1122 §4.2.3.2 and RFC 5681
//! §4.2), and the SACK blocks we report (RFC 2018 §4, D-SACK RFC 2883).
//!
//! Two urgencies: `ack_immediate` (out of order, hole filled, duplicate, a quarter window
//! unacknowledged) is answered from `process` for this very segment, so a burst still
//! yields one duplicate ACK per out-of-order segment; `ack_now` (a second full segment)
//! waits for the next dispatch, after the receive batch, where it may ride on data.
//!
//! No allocation: out-of-order bytes go straight into the ring's unallocated space and the
//! assembler's range list is preallocated and bounded.

use ulnet_wire::{SeqNumber, TcpOptions};

use crate::tcp::config::AckPolicy;
use crate::time::{Duration, Instant};

use super::{Cx, Socket};
use crate::tcp::sack::sack_blocks;

/// A segment's text where it lies: one slice, or the first part and the rest of a frame
/// that arrived in several buffers (`TcpRepr::payload_rest`), taken without gathering
/// it. Trimming narrows a window on it; nothing is copied until the bytes go into the
/// receive buffer.
#[derive(Clone, Copy)]
pub(crate) struct Text<'a> {
    head: &'a [u8],
    rest: &'a [&'a [u8]],
    /// Bytes left out at the front.
    skip: usize,
    /// Bytes in the window.
    len: usize,
}

impl<'a> Text<'a> {
    pub(crate) fn new(head: &'a [u8], rest: &'a [&'a [u8]]) -> Text<'a> {
        let len = head.len() + rest.iter().map(|p| p.len()).sum::<usize>();
        Text {
            head,
            rest,
            skip: 0,
            len,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Without its first `n` bytes.
    fn after(self, n: usize) -> Text<'a> {
        let n = n.min(self.len);
        Text {
            skip: self.skip + n,
            len: self.len - n,
            ..self
        }
    }

    /// Its first `n` bytes.
    fn first(self, n: usize) -> Text<'a> {
        Text {
            len: self.len.min(n),
            ..self
        }
    }

    /// The window's bytes as slices, in order, none empty.
    fn pieces(self) -> impl Iterator<Item = &'a [u8]> {
        let (mut skip, mut left) = (self.skip, self.len);
        core::iter::once(self.head)
            .chain(self.rest.iter().copied())
            .filter_map(move |p| {
                if left == 0 || skip >= p.len() {
                    skip = skip.saturating_sub(p.len());
                    return None;
                }
                let p = &p[skip..];
                skip = 0;
                let p = &p[..p.len().min(left)];
                left -= p.len();
                Some(p)
            })
    }

    /// Hands the window's bytes to `put` piece by piece with each piece's offset in the
    /// window, until `put` takes less than a whole piece; returns how many it took. A
    /// text in one slice (every frame that came in one buffer) is one call, without
    /// walking pieces.
    fn copy(self, mut put: impl FnMut(usize, &[u8]) -> usize) -> usize {
        if self.rest.is_empty() {
            return put(0, &self.head[self.skip..self.skip + self.len]);
        }
        let mut n = 0;
        for p in self.pieces() {
            let k = put(n, p);
            n += k;
            if k < p.len() {
                break;
            }
        }
        n
    }

    /// Appends the bytes to `rx` as far as they fit; returns how many went in.
    fn enqueue(self, rx: &mut crate::storage::RingBuffer) -> usize {
        self.copy(|_, p| rx.enqueue_slice(p))
    }

    /// Writes the bytes into `rx`'s free storage `offset` past its write pointer, as far
    /// as they fit; returns how many were written.
    fn write_unallocated(self, rx: &mut crate::storage::RingBuffer, offset: usize) -> usize {
        self.copy(|at, p| rx.write_unallocated(offset + at, p))
    }
}

/// Stores the payload of an acceptable segment whose first byte is `seq`. Updates
/// RCV.NXT, the ACK policy and SACK state. Returns the bytes newly delivered in order.
pub(crate) fn deliver(
    s: &mut Socket,
    now: Instant,
    mut seq: SeqNumber,
    mut payload: Text<'_>,
    cx: &mut Cx<'_>,
) -> usize {
    if payload.is_empty() {
        return 0;
    }
    s.rcv.note_segment_len(payload.len());
    // Anything before RCV.NXT is a duplicate: report it as a D-SACK (RFC 2883 §4) and
    // acknowledge at once so the sender learns the retransmission was spurious.
    if seq < s.rcv.nxt() {
        let dup = s.rcv.nxt().distance_from(seq) as usize;
        let dup_len = dup.min(payload.len());
        if s.sack_on {
            s.dsack = Some((seq, seq + dup_len as u32));
        }
        s.ack_immediate = true;
        // A retransmission we already had: the sender timed out or is probing, so ACK
        // the next segments at once too (Linux's tcp_data_queue → tcp_enter_quickack_mode).
        enter_quickack_mode(s);
        if dup >= payload.len() {
            return 0;
        }
        payload = payload.after(dup);
        seq = s.rcv.nxt();
    }
    let offset = seq.distance_from(s.rcv.nxt()) as usize;

    if s.rd_shut {
        // Reading is shut down: acknowledge in-order data and discard it.
        if offset == 0 && s.asm.is_empty() {
            s.rcv.advance(payload.len() as u32);
            s.counters.bytes_received += payload.len() as u64;
            note_data_received(s, now);
            schedule_ack(s, now, cx);
        } else {
            s.ack_immediate = true;
        }
        return 0;
    }

    let space = s.rx.window();
    if offset >= space {
        cx.stats.ooo_dropped += 1;
        s.ack_immediate = true;
        // Out of the window (a zero-window probe, say): Linux's tcp_data_queue enters
        // quick-ACK mode here too, so the window's reopening is acknowledged at once.
        enter_quickack_mode(s);
        return 0;
    }
    let len = payload.len().min(space - offset);
    let data = payload.first(len);
    if offset == 0 {
        s.rcv_rtt_measure(now);
    }
    s.rcv_space_adjust(now, cx);
    if !s.reserve_rx(s.rx.len() + offset + len, now, cx) {
        // No storage within the memory budget: drop the data (the sender retransmits
        // it); the window already offered stands (RFC 9293 §3.8.6).
        cx.stats.mem_dropped += 1;
        s.ack_immediate = true;
        return 0;
    }

    if offset == 0 && s.asm.is_empty() {
        // The fast path: in order, no holes.
        let n = data.enqueue(&mut s.rx);
        s.rcv.advance(n as u32);
        s.counters.bytes_received += n as u64;
        note_data_received(s, now);
        schedule_ack(s, now, cx);
        return n;
    }

    if offset > 0 && s.sack_on {
        // RFC 2883 §4.2: a duplicate of out-of-order data above RCV.NXT is reported too,
        // as the first SACK block, followed by the block that holds it (`sack_blocks`
        // orders them). Only the first held part is reported, as Linux does.
        if let Some((a, b)) = s.asm.first_overlap(offset, len) {
            let nxt = s.rcv.nxt();
            s.dsack = Some((nxt + a as u32, nxt + b as u32));
        }
    }
    let written = data.write_unallocated(&mut s.rx, offset);
    if s.asm.add(offset, written).is_err() {
        if offset == 0 {
            // In-order data that would need a range of its own while all are in use: it
            // needs none, it is delivered at once. Refusing it would refuse every
            // retransmission of the first hole, a deadlock.
            let n = s.rx.enqueue_unallocated(written);
            s.asm.advance(n);
            s.rcv.advance(n as u32);
            s.counters.bytes_received += n as u64;
            s.ack_immediate = true;
            return n;
        }
        cx.stats.ooo_dropped += 1;
        s.ack_immediate = true;
        return 0;
    }
    if offset == 0 {
        let n = s.asm.remove_front();
        let n = s.rx.enqueue_unallocated(n);
        s.rcv.advance(n as u32);
        s.counters.bytes_received += n as u64;
        note_data_received(s, now);
        // RFC 5681 §4.2: ACK at once when a segment fills (part of) a hole.
        s.ack_immediate = true;
        s.last_ooo = None;
        n
    } else {
        // RFC 5681 §4.2 / RFC 9293 §3.10.7.4: out-of-order data gets an immediate
        // duplicate ACK, which carries the SACK blocks.
        if let Some((a, b)) = s.asm.range_containing(offset) {
            let nxt = s.rcv.nxt();
            s.last_ooo = Some((nxt + a as u32, nxt + b as u32));
        }
        out_of_order_ack(s, now);
        0
    }
}

/// Linux's cap on quick ACKs (`TCP_MAX_QUICKACKS`).
const MAX_QUICK_ACKS: u32 = 16;

/// Grants up to `MAX_QUICK_ACKS` quick ACKs, fewer when the window holds fewer than that
/// many pairs of segments (Linux's `tcp_incr_quickack`: `rcv_wnd / (2 * rcv_mss)`, at
/// least 2): the ACKs of a connection's first round trips go out at once, so a sender
/// in slow start (RFC 5681 §3.1) or one whose Nagle algorithm (RFC 896, RFC 1122
/// §4.2.3.4) holds a small write until the previous one is acknowledged is not held up
/// by the delayed-ACK timer (RFC 1122 §4.2.3.2 allows the delay, it does not require it).
fn incr_quickack(s: &mut Socket) {
    let mss = u32::from(s.rcv.mss()).max(1);
    let q = (s.rcv.wnd() / (2 * mss)).clamp(2, MAX_QUICK_ACKS) as u8;
    s.quick_acks = s.quick_acks.max(q);
}

/// Quick-ACK mode proper (Linux's `tcp_enter_quickack_mode`): the quick ACKs, and out
/// of interactive mode.
fn enter_quickack_mode(s: &mut Socket) {
    incr_quickack(s);
    s.pingpong = false;
}

/// In-order data arrived (Linux's `tcp_event_data_recv`): the first data of a
/// connection, and the first after a silence longer than the retransmission timeout
/// (the sender has been idle or timed out and restarts from a small window, RFC 5681
/// §4.1), start quick-ACK mode.
fn note_data_received(s: &mut Socket, now: Instant) {
    let restart = match s.data_rcvd_at {
        None => true,
        Some(t) => now.saturating_duration_since(t) > s.rtt.rto(),
    };
    if restart {
        incr_quickack(s);
    }
    s.data_rcvd_at = Some(now);
}

/// The delayed-ACK rule: when more than one full-sized segment is unacknowledged (RFC 5681
/// §4.2: ACK at least every second one), acknowledge at the end of this receive batch,
/// else within the delay. In quick-ACK mode (see [`incr_quickack`]) every segment is
/// acknowledged at the end of its batch.
///
/// One cumulative ACK per connection per receive batch, not one per two segments: each
/// ACK we send costs a frame through the channel and, on veth, the peer's whole receive
/// path run on our core (a third of the receiver's CPU at MTU 1500 in docs/performance-log.md).
/// Linux's receiver does the same with GRO, one ACK per aggregate of up to 64 KB; its
/// senders count the segments an ACK covers (RFC 3465 byte counting), so slow start still
/// doubles per RTT. A batch that has taken a quarter of the window unacknowledged is
/// answered from `process` at once, so a large batch never leaves the sender without an
/// ACK for long.
fn schedule_ack(s: &mut Socket, now: Instant, cx: &Cx<'_>) {
    if !s.delack_on || cx.cfg.delayed_ack.is_zero() {
        s.ack_immediate = true;
        return;
    }
    if s.rcv.unacked_over_stretch() {
        s.ack_immediate = true;
    } else if s.rcv.unacked_over_mss() || (s.quick_acks > 0 && !s.pingpong) {
        // A second full segment, or quick-ACK mode (not while interactive, where the
        // ACK rides on the reply: Linux's tcp_in_quickack_mode). Linux's receiver
        // answers this very segment; ours by default the whole batch.
        if cx.cfg.ack_policy == AckPolicy::Linux {
            s.ack_immediate = true;
        } else {
            s.ack_now = true;
        }
    } else if !s.timers.delack_pending() {
        s.timers.arm_delack(now + cx.cfg.delayed_ack);
    }
}

/// Linux's cap on SACK-compressed segments before an ACK goes out (`tcp_comp_sack_nr`).
const COMP_SACK_NR: u8 = 44;

/// Linux's ceiling on the SACK compression delay (`tcp_comp_sack_delay_ns`).
const COMP_SACK_DELAY: Duration = Duration::from_millis(1);

/// Linux's slack on that timer (`tcp_comp_sack_slack_ns`): it fires up to this much
/// after the delay. We take the latest, which also keeps a zero RTT estimate from
/// turning compression off.
const COMP_SACK_SLACK: Duration = Duration::from_micros(100);

/// The ACK for out-of-order data. RFC 5681 §4.2 / RFC 9293 §3.10.7.4 ask for an
/// immediate duplicate ACK, which carries the SACK blocks; with SACK on, only the first
/// three per RCV.NXT go at once (enough for the sender's duplicate-ACK threshold, RFC
/// 5681 §3.2), then Linux's SACK compression (`__tcp_ack_snd_check`,
/// `tcp_sack_compress`): one ACK reporting all that arrived after min(1 ms, SRTT/20)
/// (plus the timer's slack), or at once after 44 such segments. Under both ACK policies:
/// with a duplicate ACK for every out-of-order segment, a Linux sender through 1-2%
/// random drop each way moved 0.3-0.8 Gb/s into ulnet against 1.0-2.0 Gb/s with the
/// compression (`ulnet bench loss`, the two builds alternated twice): every ACK costs
/// the sender (and, on veth, our core) a receive path, and more of them were dropped.
fn out_of_order_ack(s: &mut Socket, now: Instant) {
    if !s.sack_on {
        s.ack_immediate = true;
        return;
    }
    if s.comp_rcv_nxt != s.rcv.nxt() {
        s.comp_rcv_nxt = s.rcv.nxt();
        s.dup_acks_sent = 0;
    }
    if s.dup_acks_sent < 3 || s.compressed_acks >= COMP_SACK_NR {
        s.dup_acks_sent = s.dup_acks_sent.saturating_add(1);
        s.ack_immediate = true;
        return;
    }
    s.compressed_acks += 1;
    let delay = s
        .rtt
        .srtt()
        .map_or(COMP_SACK_DELAY, |r| (r / 20).min(COMP_SACK_DELAY));
    s.timers.arm_delack_by(now + delay + COMP_SACK_SLACK);
}

/// Writes the SACK blocks to report: a D-SACK block first (RFC 2883), then the block
/// holding the latest out-of-order segment (RFC 2018 §4), then the other held ranges;
/// three fit beside timestamps, four without.
pub(crate) fn fill_sack_blocks(s: &Socket, o: &mut TcpOptions) {
    if s.dsack.is_none() && s.asm.is_empty() {
        return;
    }
    let room = if o.timestamp.is_some() { 3 } else { 4 };
    // The assembler's iterator is not `Clone`; a fixed copy of its ranges is (no
    // allocation). Ranges past the copy are simply not reported this time.
    let mut ranges = [(0usize, 0usize); 64];
    let mut count = 0;
    for (slot, r) in ranges.iter_mut().zip(s.asm.ranges()) {
        *slot = r;
        count += 1;
    }
    let mut out = [(SeqNumber(0), SeqNumber(0)); 4];
    let held = ranges[..count].iter().copied();
    let n = sack_blocks(held, s.rcv.nxt(), s.last_ooo, s.dsack, room, &mut out);
    for &b in &out[..n] {
        o.sack_blocks.push(b);
    }
}

#[cfg(test)]
mod tests {
    use super::Text;
    use crate::storage::RingBuffer;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    proptest! {
        /// A text in pieces, trimmed at both ends, reads and stores as the same window
        /// of its concatenation.
        #[test]
        fn a_trimmed_text_in_pieces_is_its_concatenations_window(
            parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6),
            skip in 0usize..200,
            len in 0usize..200,
            room in 0usize..200,
            offset in 0usize..50,
        ) {
            let whole: Vec<u8> = parts.concat();
            let rest: Vec<&[u8]> = parts[1..].iter().map(Vec::as_slice).collect();
            let t = Text::new(&parts[0], &rest).after(skip).first(len);
            let lo = skip.min(whole.len());
            let want = &whole[lo..(lo + len).min(whole.len())];
            prop_assert_eq!(t.len(), want.len());
            prop_assert!(t.pieces().all(|p| !p.is_empty()));
            prop_assert_eq!(t.pieces().collect::<Vec<_>>().concat(), want);
            let mut rx = RingBuffer::new(room.max(1));
            let n = t.enqueue(&mut rx);
            prop_assert_eq!(n, want.len().min(room.max(1)));
            let mut out = vec![0; n];
            rx.dequeue_slice(&mut out);
            prop_assert_eq!(&out[..], &want[..n]);
            // Out of order: written past the write pointer, then committed.
            let cap = room.max(1);
            let mut rx = RingBuffer::new(cap);
            let w = t.write_unallocated(&mut rx, offset);
            prop_assert_eq!(w, want.len().min(cap.saturating_sub(offset)));
            rx.enqueue_unallocated(offset + w);
            let mut out = vec![0; offset + w];
            rx.dequeue_slice(&mut out);
            prop_assert_eq!(&out[offset..], &want[..w]);
        }
    }
}
