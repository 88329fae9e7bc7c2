//! Per-segment transmission records for RACK (RFC 8985 §6.1: "the sender stores the most
//! recent transmission time of every outstanding segment") and the SACK scoreboard's
//! segment view (RFC 6675 §3 keeps the same per-segment state as "SACKed", "lost" and
//! "retransmitted").
//!
//! The send buffer is a byte ring; this table says, for the sequence space
//! `[SND.UNA, SND.NXT)`, which run of bytes went out when, whether it was retransmitted,
//! SACKed, or is believed lost. Records are kept in sequence order, disjoint.
//!
//! Memory is fixed when the connection is made (`capacity` records, reserved up front
//! and never grown: no allocation per segment). When the table is full, new data extends
//! the newest record rather than opening one, and a retransmission that would need a
//! split updates the whole record. Both make a record coarser, with its transmission time
//! the *latest* of its bytes' times: RACK then declares such a record lost no earlier
//! than it would each of its parts, and a fully SACKed record's time is that of a byte
//! that really was delivered. The price of a full table is only later detection.

use alloc::collections::VecDeque;
use ulnet_wire::SeqNumber;

use crate::time::Instant;

use super::rate::Rate;

/// The peer SACKed (or cumulatively acknowledged) every byte of the record.
pub(crate) const SACKED: u8 = 1;
/// Believed lost (RACK, or the classic fast retransmit at SND.UNA, or a timeout): it does
/// not count in the pipe unless a retransmission is in flight.
pub(crate) const LOST: u8 = 2;
/// A retransmission of it is in flight (counts in the pipe, RFC 6675 §4 SetPipe (b)).
pub(crate) const RTX_OUT: u8 = 4;
/// It was retransmitted at least once (RFC 8985 §6.2 steps 2 and 3).
pub(crate) const EVER_RTX: u8 = 8;

/// Records kept free for splitting when new data arrives: a retransmission of part of
/// a record needs up to two more.
const SPLIT_SLACK: usize = 8;

/// One run of bytes sent together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegRec {
    /// First sequence number.
    pub start: SeqNumber,
    /// One past the last (a FIN included).
    pub end: SeqNumber,
    /// The latest transmission of any of its bytes (RFC 8985 "xmit_ts").
    pub xmit: Instant,
    /// The number of that transmission in the connection's sending order (wrapping).
    /// RFC 8985 §6.2 orders segments sent at the same timestamp by sequence number,
    /// which takes a retransmission for sent before the higher segments that really
    /// went out just before it in the same instant; the order is exact.
    pub order: u32,
    /// `SACKED`, `LOST`, `RTX_OUT`, `EVER_RTX`.
    pub flags: u8,
    /// Delivery-rate state at the latest transmission (`rate.rs`, draft §3.2
    /// P.is_app_limited); kept out of `flags`, which count "marked" records.
    pub app_limited: bool,
    /// P.delivered: the low 32 bits of C.delivered when it left.
    pub delivered: u32,
    /// µs from C.delivered_time to that transmission (P.delivered_time, relative).
    pub since_delivered: u32,
    /// µs from C.first_sent_time to that transmission (P.first_sent_time, relative).
    pub since_first: u32,
}

impl SegRec {
    #[inline]
    pub(crate) fn len(&self) -> u32 {
        self.end.distance_from(self.start)
    }

    #[inline]
    pub(crate) fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }

    /// Counted in the pipe (RFC 6675 §4 SetPipe): not SACKed, and either not lost or
    /// lost with its retransmission in flight. Returns the bytes it counts.
    #[inline]
    pub(crate) fn in_pipe(&self) -> u32 {
        if self.has(SACKED) {
            return 0;
        }
        let mut n = 0;
        if !self.has(LOST) {
            n += self.len();
        }
        if self.has(RTX_OUT) {
            n += self.len();
        }
        n
    }
}

/// The per-segment table.
#[derive(Debug)]
pub(crate) struct SentSegs {
    q: VecDeque<SegRec>,
    /// Records with any flag set. While it is zero (a flight with no loss, SACK or
    /// retransmission: the common case), the pipe is every recorded byte and nothing is
    /// lost, so `pipe`, `first_lost` and `lost_bytes` answer without a walk of the flight
    /// (thousands of records at a 4 MiB window, asked for on every output decision).
    marked: u32,
    /// The sum of the records' lengths.
    bytes: u32,
    /// Most records (u32: the control block is kept small).
    cap: u32,
    /// The next transmission's `order`.
    next_order: u32,
}

impl SentSegs {
    /// A table for a send buffer of up to `send_buffer_len` bytes: about one record per
    /// 1 KB of buffer (a full-sized Ethernet segment is 1448 bytes), at least 32, at most
    /// 4096, plus slack for splits.
    ///
    /// Nothing is reserved now: storage grows by doubling as records are added, up to that
    /// bound, as the send buffer's own storage does (docs/memory.md), so an idle or
    /// embryonic connection holds none (at 4096 records the table is about 100 KB) and a
    /// busy one stops allocating once it has reached its flight's high-water mark.
    /// [`SentSegs::release`] gives it back when the connection goes idle.
    pub(crate) fn for_buffer(send_buffer_len: usize) -> Self {
        let cap = (send_buffer_len / 1024).clamp(32, 4096) + SPLIT_SLACK;
        SentSegs {
            q: VecDeque::new(),
            marked: 0,
            bytes: 0,
            cap: cap as u32,
            next_order: 0,
        }
    }

    /// Room for one more record: storage doubles (from 16) towards the bound, never past it.
    #[inline]
    fn room_for_one(&mut self) {
        let (len, have) = (self.q.len(), self.q.capacity());
        if len == have {
            let want = have.max(16).min(self.cap as usize - len);
            self.q.reserve_exact(want);
        }
    }

    /// Frees the storage of an empty table (the connection is idle or closed).
    pub(crate) fn release(&mut self) {
        if self.q.is_empty() {
            self.q = VecDeque::new();
            debug_assert!(self.marked == 0 && self.bytes == 0);
        }
    }

    #[cfg(test)]
    pub(crate) fn with_capacity(cap: usize) -> Self {
        SentSegs {
            q: VecDeque::with_capacity(cap),
            marked: 0,
            bytes: 0,
            cap: cap as u32,
            next_order: 0,
        }
    }

    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = &SegRec> + '_ {
        self.q.iter()
    }

    /// Calls `f` on each record in sequence order until it returns false; flag changes
    /// are counted (`marked`). Lengths must not change.
    pub(crate) fn update(&mut self, mut f: impl FnMut(&mut SegRec) -> bool) {
        for r in self.q.iter_mut() {
            let was = r.flags != 0;
            let go_on = f(r);
            self.marked = self.marked + u32::from(r.flags != 0) - u32::from(was);
            if !go_on {
                break;
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.q.len()
    }

    /// Drops what the cumulative ACK `una` covers; bytes not SACKed before are
    /// delivered now (`rate`).
    pub(crate) fn advance(&mut self, una: SeqNumber, rate: &mut Rate, now: Instant) {
        while self.q.front().is_some_and(|r| r.end.diff(una) <= 0) {
            if let Some(r) = self.q.pop_front() {
                if !r.has(SACKED) {
                    rate.on_delivered(&r, r.len(), now, r.has(EVER_RTX));
                }
                self.forget(&r);
            }
        }
        if let Some(f) = self.q.front_mut() {
            if f.start.diff(una) < 0 {
                let n = una.distance_from(f.start);
                if !f.has(SACKED) {
                    rate.on_delivered(f, n, now, f.has(EVER_RTX));
                }
                self.bytes -= n;
                f.start = una;
            }
        }
    }

    fn forget(&mut self, r: &SegRec) {
        self.bytes -= r.len();
        self.marked -= u32::from(r.flags != 0);
    }

    /// `[start, end)` went out at `now`: new data past the newest record, or a
    /// retransmission of recorded bytes (or both, when a probe straddles SND.NXT).
    /// Each transmission takes a snapshot of the delivery totals (`rate`).
    pub(crate) fn on_sent(
        &mut self,
        start: SeqNumber,
        end: SeqNumber,
        now: Instant,
        rate: &mut Rate,
    ) {
        if end.diff(start) <= 0 {
            return;
        }
        let idle = self.q.is_empty();
        let order = self.next_order;
        self.next_order = order.wrapping_add(1);
        let last_end = self.q.back().map(|r| r.end);
        let new_from = match last_end {
            Some(e) if e.diff(start) > 0 => {
                // Some of it is a retransmission.
                let rtx_end = if end.diff(e) < 0 { end } else { e };
                self.on_retransmitted(start, rtx_end, now, order, rate);
                e
            }
            _ => start,
        };
        if end.diff(new_from) <= 0 {
            return;
        }
        if self.q.len() + SPLIT_SLACK >= self.cap as usize {
            if let Some(last) = self.q.back_mut() {
                if last.end == new_from && !last.has(EVER_RTX) {
                    // Full: coarsen the newest record (see the module docs).
                    let was = last.flags != 0;
                    self.bytes += end.distance_from(last.end);
                    last.end = end;
                    last.xmit = now;
                    last.order = order;
                    last.flags &= !(SACKED | LOST);
                    rate.on_sent(last, now, false);
                    self.marked = self.marked + u32::from(last.flags != 0) - u32::from(was);
                    return;
                }
            }
            if self.q.len() >= self.cap as usize {
                return;
            }
        }
        self.room_for_one();
        self.bytes += end.distance_from(new_from);
        let mut rec = SegRec {
            start: new_from,
            end,
            xmit: now,
            order,
            flags: 0,
            app_limited: false,
            delivered: 0,
            since_delivered: 0,
            since_first: 0,
        };
        rate.on_sent(&mut rec, now, idle);
        self.q.push_back(rec);
    }

    /// Splits the record holding `at` so that one starts at `at`, when there is room.
    fn split_at(&mut self, at: SeqNumber) {
        if self.q.len() >= self.cap as usize {
            return;
        }
        let i = self.q.partition_point(|r| r.end.diff(at) <= 0);
        let Some(r) = self.q.get(i).copied() else {
            return;
        };
        if r.start.diff(at) < 0 && r.end.diff(at) > 0 {
            let mut hi = r;
            hi.start = at;
            self.q[i].end = at;
            self.room_for_one();
            self.marked += u32::from(hi.flags != 0);
            self.q.insert(i + 1, hi);
        }
    }

    /// `[start, end)`, already recorded, was sent again at `now`.
    fn on_retransmitted(
        &mut self,
        start: SeqNumber,
        end: SeqNumber,
        now: Instant,
        order: u32,
        rate: &mut Rate,
    ) {
        self.split_at(start);
        self.split_at(end);
        let i = self.q.partition_point(|r| r.end.diff(start) <= 0);
        for r in self.q.range_mut(i..) {
            if r.start.diff(end) >= 0 {
                break;
            }
            r.xmit = now;
            r.order = order;
            rate.on_sent(r, now, false);
            // A lost segment stays "lost" (RFC 6675 counts it once, through its
            // retransmission); its copy is now in flight.
            self.marked += u32::from(r.flags == 0);
            r.flags |= RTX_OUT | EVER_RTX;
            r.flags &= !SACKED;
        }
    }

    /// After a retransmission timeout: everything outstanding is presumed lost, no
    /// retransmission is in flight, and SACK information is forgotten (RFC 2018 §8,
    /// RFC 6675 §5.1, RFC 8985 §6.3).
    pub(crate) fn mark_all_lost(&mut self) {
        for r in self.q.iter_mut() {
            r.flags = (r.flags | LOST) & !(RTX_OUT | SACKED);
        }
        self.marked = self.q.len() as u32;
    }

    /// The lowest record believed lost with no retransmission in flight.
    pub(crate) fn first_lost(&self) -> Option<&SegRec> {
        if self.marked == 0 {
            return None;
        }
        self.q
            .iter()
            .find(|r| r.has(LOST) && !r.has(RTX_OUT) && !r.has(SACKED))
    }

    /// RFC 6675 §4 SetPipe over the records.
    pub(crate) fn pipe(&self) -> u32 {
        debug_assert_eq!(
            self.marked as usize,
            self.q.iter().filter(|r| r.flags != 0).count()
        );
        debug_assert_eq!(self.bytes, self.q.iter().map(SegRec::len).sum::<u32>());
        if self.marked == 0 {
            return self.bytes;
        }
        self.q
            .iter()
            .fold(0u32, |a, r| a.saturating_add(r.in_pipe()))
    }

    /// Records the peer SACKed.
    pub(crate) fn sacked_count(&self) -> usize {
        if self.marked == 0 {
            return 0;
        }
        self.q.iter().filter(|r| r.has(SACKED)).count()
    }

    /// Bytes believed lost and not yet retransmitted.
    pub(crate) fn lost_bytes(&self) -> u32 {
        if self.marked == 0 {
            return 0;
        }
        self.q
            .iter()
            .filter(|r| r.has(LOST) && !r.has(SACKED))
            .fold(0u32, |a, r| a.saturating_add(r.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn s(n: u32) -> SeqNumber {
        SeqNumber(n)
    }

    #[test]
    fn records_new_data_and_splits_retransmissions() {
        let mut rate = Rate::default();
        let mut g = SentSegs::with_capacity(64);
        for k in 0..4u32 {
            g.on_sent(s(k * 100), s(k * 100 + 100), t(u64::from(k)), &mut rate);
        }
        assert_eq!(g.len(), 4);
        // Part of the second record again.
        g.on_sent(s(150), s(200), t(10), &mut rate);
        assert_eq!(g.len(), 5);
        let v: Vec<_> = g.iter().map(|r| (r.start.0, r.end.0, r.flags)).collect();
        assert_eq!(v[1], (100, 150, 0));
        assert_eq!(v[2], (150, 200, RTX_OUT | EVER_RTX));
        assert_eq!(g.iter().nth(2).unwrap().xmit, t(10));
        g.advance(s(170), &mut rate, t(20));
        assert_eq!(g.iter().next().unwrap().start, s(170));
        assert_eq!(g.len(), 3);
        assert_eq!(g.pipe(), 30 * 2 + 200);
    }

    #[test]
    fn a_full_table_coarsens_and_never_grows() {
        let mut rate = Rate::default();
        let mut g = SentSegs::with_capacity(SPLIT_SLACK + 4);
        for k in 0..100u32 {
            g.on_sent(s(k * 10), s(k * 10 + 10), t(u64::from(k)), &mut rate);
        }
        assert!(g.len() <= SPLIT_SLACK + 4);
        let last = g.iter().last().unwrap();
        assert_eq!((last.end, last.xmit), (s(1000), t(99)));
        // Contiguous cover of everything sent.
        let mut at = s(0);
        for r in g.iter() {
            assert_eq!(r.start, at);
            at = r.end;
        }
        // Retransmissions split while there is room, then update whole records.
        for k in 0..50u32 {
            g.on_sent(s(k * 10 + 3), s(k * 10 + 5), t(200), &mut rate);
        }
        assert!(g.len() <= SPLIT_SLACK + 4);
    }

    #[test]
    fn lost_and_pipe_accounting() {
        let mut rate = Rate::default();
        let mut g = SentSegs::with_capacity(64);
        for k in 0..4u32 {
            g.on_sent(s(k * 100), s(k * 100 + 100), t(0), &mut rate);
        }
        assert_eq!(g.pipe(), 400, "no marks: every recorded byte");
        let mut i = 0;
        g.update(|r| {
            if i == 1 {
                r.flags |= SACKED;
            }
            i += 1;
            true
        });
        g.update(|r| {
            r.flags |= LOST;
            false
        });
        assert_eq!(g.pipe(), 200);
        assert_eq!(g.lost_bytes(), 100);
        assert_eq!(g.first_lost().map(|r| r.start), Some(s(0)));
        g.on_sent(s(0), s(100), t(5), &mut rate);
        assert_eq!(g.pipe(), 300);
        assert!(g.first_lost().is_none());
        g.mark_all_lost();
        assert_eq!(g.pipe(), 0);
        assert_eq!(g.first_lost().map(|r| r.start), Some(s(0)));
    }
}
