//! TIME-WAIT as compact records (RFC 9293 §3.10.7.4 TIME-WAIT, §3.6.1).
//!
//! A connection whose application has let go of it and that reaches TIME-WAIT gives up its
//! control block and buffers; what is left is a [`TimeWaitRecord`] of 64 bytes holding what
//! the state still needs: the sequence numbers to acknowledge a retransmitted FIN, the last
//! timestamp for PAWS, and the expiry time. Records live in a ring in expiry order (every
//! record lasts 2*MSL, so insertion order is expiry order) and a hash table finds them by
//! 4-tuple. When `max_time_wait` records exist, the oldest is recycled early (counted).
//!
//! Rules applied to segments for a TIME-WAIT record:
//! - RST is ignored (RFC 1337 "TIME-WAIT assassination" hazard TWA1).
//! - A new SYN may reopen the connection when it is certainly new: its timestamp is above
//!   TS.Recent (RFC 6191) or, without timestamps, its sequence number is above RCV.NXT
//!   (RFC 9293 §3.6.1 note / RFC 1122 §4.2.2.13).
//! - A retransmitted FIN is acknowledged and restarts the 2*MSL timer.
//! - Other segments with data, FIN, or out of window get an ACK; a bare in-window ACK is
//!   dropped.

use alloc::collections::VecDeque;

use hashbrown::HashTable;
use ulnet_wire::{SeqNumber, TcpFlags, TcpRepr};

use crate::time::{Duration, Instant};

use super::table::{FourTuple, KeyedState};

const TS_ON: u8 = 1;
const DEAD: u8 = 2;

/// What remains of a connection in TIME-WAIT: 64 bytes including its 4-tuple.
#[derive(Debug, Clone, Copy)]
pub struct TimeWaitRecord {
    expires: Instant,
    tuple: FourTuple,
    snd_nxt: SeqNumber,
    rcv_nxt: SeqNumber,
    ts_recent: u32,
    /// The window field to send (already scaled down).
    window: u16,
    flags: u8,
}

/// Everything needed to create a record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TimeWaitInit {
    pub tuple: FourTuple,
    pub snd_nxt: SeqNumber,
    pub rcv_nxt: SeqNumber,
    pub ts_recent: Option<u32>,
    pub window: u16,
}

/// What to do with a segment that hit a TIME-WAIT record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TwVerdict {
    /// Drop silently (RST per RFC 1337, bare ACK).
    Drop,
    /// Send this ACK (seq, ack, window, tsecr or None).
    Ack {
        /// Our SND.NXT.
        seq: SeqNumber,
        /// Our RCV.NXT.
        ack: SeqNumber,
        /// Window field.
        window: u16,
        /// TS.Recent to echo, when timestamps are on.
        tsecr: Option<u32>,
    },
    /// The record is gone: treat the SYN as a new connection attempt; the new ISN should
    /// start above this sequence number (RFC 9293 §3.4.1 / RFC 6191).
    Reopen {
        /// The old connection's SND.NXT.
        min_isn: SeqNumber,
    },
}

/// Capacity below which a structure is not worth shrinking.
pub(crate) const MIN_SHRINK: usize = 64;

/// The TIME-WAIT table.
#[derive(Debug)]
pub(crate) struct TimeWaitTable {
    ring: VecDeque<TimeWaitRecord>,
    index: HashTable<u64>,
    /// Id of `ring[0]`; ids only grow.
    head_id: u64,
    hasher: KeyedState,
    limit: usize,
    two_msl: Duration,
    live: usize,
}

impl TimeWaitTable {
    /// An empty table holding at most `limit` records, each lasting `2 * msl`.
    pub(crate) fn new(secret: &[u8; 16], limit: usize, msl: Duration) -> Self {
        TimeWaitTable {
            ring: VecDeque::new(),
            index: HashTable::new(),
            head_id: 0,
            hasher: KeyedState::new(secret, 2),
            limit: limit.max(1),
            two_msl: msl.saturating_mul(2),
            live: 0,
        }
    }

    /// Records in TIME-WAIT now.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    fn find_id(&self, t: &FourTuple) -> Option<u64> {
        let h = self.hasher.hash(t);
        let head = self.head_id;
        let ring = &self.ring;
        self.index
            .find(h, |&id| ring[(id - head) as usize].tuple == *t)
            .copied()
    }

    fn unindex(&mut self, id: u64) {
        let rec = self.ring[(id - self.head_id) as usize];
        let h = self.hasher.hash(&rec.tuple);
        if let Ok(e) = self.index.find_entry(h, |&x| x == id) {
            e.remove();
        }
    }

    /// True when a record holds this tuple.
    pub(crate) fn contains(&self, t: &FourTuple) -> bool {
        self.find_id(t).is_some()
    }

    /// Creates a record lasting 2*MSL from `now`, replacing any record of the same tuple.
    /// Returns true when the oldest record had to be recycled to make room.
    pub(crate) fn insert(&mut self, now: Instant, init: TimeWaitInit) -> bool {
        if let Some(id) = self.find_id(&init.tuple) {
            self.kill(id);
        }
        let mut recycled = false;
        while self.ring.len() >= self.limit {
            recycled |= self.pop_front();
        }
        let rec = TimeWaitRecord {
            expires: now + self.two_msl,
            tuple: init.tuple,
            snd_nxt: init.snd_nxt,
            rcv_nxt: init.rcv_nxt,
            ts_recent: init.ts_recent.unwrap_or(0),
            window: init.window,
            flags: if init.ts_recent.is_some() { TS_ON } else { 0 },
        };
        self.push(rec);
        recycled
    }

    fn push(&mut self, rec: TimeWaitRecord) {
        let id = self.head_id + self.ring.len() as u64;
        let h = self.hasher.hash(&rec.tuple);
        self.ring.push_back(rec);
        let head = self.head_id;
        let ring = &self.ring;
        let hasher = self.hasher;
        self.index
            .insert_unique(h, id, |&x| hasher.hash(&ring[(x - head) as usize].tuple));
        self.live += 1;
    }

    /// Marks a record dead and unindexes it; its ring slot is reclaimed when it reaches
    /// the front.
    fn kill(&mut self, id: u64) {
        self.unindex(id);
        let pos = (id - self.head_id) as usize;
        self.ring[pos].flags |= DEAD;
        self.live -= 1;
    }

    /// Pops the front slot; true when it held a live record (recycled early).
    fn pop_front(&mut self) -> bool {
        let Some(front) = self.ring.front().copied() else {
            return false;
        };
        let live = front.flags & DEAD == 0;
        if live {
            self.unindex(self.head_id);
            self.live -= 1;
        }
        self.ring.pop_front();
        self.head_id += 1;
        live
    }

    /// Drops expired records.
    pub(crate) fn expire(&mut self, now: Instant) {
        while let Some(front) = self.ring.front() {
            if front.flags & DEAD == 0 && front.expires > now {
                break;
            }
            self.pop_front();
        }
    }

    /// Gives back capacity a peak left behind: the ring and its index shrink to twice
    /// what they hold when they hold less than a quarter of their capacity (amortised:
    /// a refill pays one regrowth). Ids are unchanged.
    pub(crate) fn shrink(&mut self) {
        let n = self.ring.len();
        if self.ring.capacity() > MIN_SHRINK && n < self.ring.capacity() / 4 {
            self.ring.shrink_to(2 * n);
        }
        let m = self.index.len();
        if self.index.capacity() > MIN_SHRINK && m < self.index.capacity() / 4 {
            let (ring, head, hasher) = (&self.ring, self.head_id, &self.hasher);
            self.index
                .shrink_to(2 * m, |&id| hasher.hash(&ring[(id - head) as usize].tuple));
        }
    }

    /// When the next record expires (a dead front slot reports its stale time, which only
    /// makes the caller reclaim it sooner).
    pub(crate) fn poll_at(&self) -> Option<Instant> {
        self.ring.front().map(|r| r.expires)
    }

    /// Applies the TIME-WAIT rules to a segment for `t`; `None` when no record exists.
    pub(crate) fn process(
        &mut self,
        now: Instant,
        t: &FourTuple,
        seg: &TcpRepr<'_>,
    ) -> Option<TwVerdict> {
        let id = self.find_id(t)?;
        let pos = (id - self.head_id) as usize;
        let rec = self.ring[pos];
        let ts_on = rec.flags & TS_ON != 0;
        let ack = TwVerdict::Ack {
            seq: rec.snd_nxt,
            ack: rec.rcv_nxt,
            window: rec.window,
            tsecr: ts_on.then_some(rec.ts_recent),
        };
        let f = seg.flags;
        if f.contains(TcpFlags::RST) {
            // RFC 1337: a RST must not cut TIME-WAIT short.
            return Some(TwVerdict::Drop);
        }
        let seg_ts = seg.options.timestamp.map(|t| t.tsval);
        if f.contains(TcpFlags::SYN) && !f.contains(TcpFlags::ACK) {
            let newer = match (ts_on, seg_ts) {
                (true, Some(tsval)) => (tsval.wrapping_sub(rec.ts_recent) as i32) > 0,
                _ => seg.seq > rec.rcv_nxt,
            };
            if newer {
                self.kill(id);
                return Some(TwVerdict::Reopen {
                    min_isn: rec.snd_nxt,
                });
            }
            return Some(ack);
        }
        // PAWS (RFC 7323 §5.3) in TIME-WAIT too.
        if let (true, Some(tsval)) = (ts_on, seg_ts) {
            if (tsval.wrapping_sub(rec.ts_recent) as i32) < 0 {
                return Some(ack);
            }
        }
        // The sequence number the segment's FIN occupies.
        let fin_at = seg.seq + seg.payload_len() as u32;
        if f.contains(TcpFlags::FIN) && (fin_at + 1 == rec.rcv_nxt || fin_at == rec.rcv_nxt) {
            // A retransmitted FIN (our ACK was lost), or a FIN at RCV.NXT, which is in the
            // window: acknowledge it and restart 2*MSL (RFC 9293 §3.10.7.4, eighth,
            // TIME-WAIT STATE). RFC 7323 §4.3: SEG.SEQ <= Last.ACK.sent (= RCV.NXT here)
            // and PAWS passed, so its TSval becomes TS.Recent and the ACK echoes that.
            let mut moved = rec;
            if let (true, Some(tsval)) = (ts_on, seg_ts) {
                moved.ts_recent = tsval;
            }
            moved.expires = now + self.two_msl;
            self.kill(id);
            self.push(moved);
            return Some(TwVerdict::Ack {
                seq: moved.snd_nxt,
                ack: moved.rcv_nxt,
                window: moved.window,
                tsecr: ts_on.then_some(moved.ts_recent),
            });
        }
        if seg.payload_len() == 0 && !f.contains(TcpFlags::FIN) && seg.seq == rec.rcv_nxt {
            return Some(TwVerdict::Drop);
        }
        Some(ack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ulnet_wire::{TcpOptions, TcpTimestamp};

    fn tuple(port: u16) -> FourTuple {
        FourTuple::new(
            "198.18.0.1:80".parse().unwrap(),
            format!("198.18.0.2:{port}").parse().unwrap(),
        )
    }

    fn seg(flags: TcpFlags, seq: u32, ts: Option<u32>) -> TcpRepr<'static> {
        let mut options = TcpOptions::none();
        options.timestamp = ts.map(|tsval| TcpTimestamp { tsval, tsecr: 0 });
        TcpRepr {
            src_port: 1000,
            dst_port: 80,
            seq: SeqNumber(seq),
            ack: SeqNumber(0),
            flags,
            window: 100,
            urgent: 0,
            options,
            payload: &[],
            payload_rest: &[],
        }
    }

    fn init(port: u16, ts: Option<u32>) -> TimeWaitInit {
        TimeWaitInit {
            tuple: tuple(port),
            snd_nxt: SeqNumber(500),
            rcv_nxt: SeqNumber(1000),
            ts_recent: ts,
            window: 64,
        }
    }

    #[test]
    fn record_is_64_bytes() {
        assert!(core::mem::size_of::<TimeWaitRecord>() <= 64);
    }

    #[test]
    fn rst_ignored_fin_acked_and_expiry() {
        let mut tw = TimeWaitTable::new(&[3; 16], 10, Duration::from_secs(1));
        let t0 = Instant::from_secs(10);
        tw.insert(t0, init(1, None));
        assert_eq!(tw.len(), 1);
        let v = tw.process(t0, &tuple(1), &seg(TcpFlags::RST, 1000, None));
        assert_eq!(v, Some(TwVerdict::Drop));
        let fin = seg(TcpFlags::FIN | TcpFlags::ACK, 999, None);
        let t1 = t0 + Duration::from_millis(1500);
        match tw.process(t1, &tuple(1), &fin) {
            Some(TwVerdict::Ack { seq, ack, .. }) => {
                assert_eq!(seq, SeqNumber(500));
                assert_eq!(ack, SeqNumber(1000));
            }
            v => panic!("{v:?}"),
        }
        // The FIN restarted the timer: still alive at t0 + 2 s.
        tw.expire(t0 + Duration::from_secs(2));
        assert!(tw.contains(&tuple(1)));
        tw.expire(t1 + Duration::from_secs(2));
        assert!(!tw.contains(&tuple(1)));
        assert_eq!(tw.len(), 0);
        assert!(tw.process(t1, &tuple(1), &fin).is_none());
    }

    #[test]
    fn syn_reopens_only_when_newer() {
        let mut tw = TimeWaitTable::new(&[3; 16], 10, Duration::from_secs(1));
        let t0 = Instant::from_secs(1);
        tw.insert(t0, init(1, Some(100)));
        let old = tw.process(t0, &tuple(1), &seg(TcpFlags::SYN, 5000, Some(99)));
        assert!(matches!(old, Some(TwVerdict::Ack { .. })));
        let new = tw.process(t0, &tuple(1), &seg(TcpFlags::SYN, 5, Some(101)));
        assert_eq!(
            new,
            Some(TwVerdict::Reopen {
                min_isn: SeqNumber(500)
            })
        );
        assert!(!tw.contains(&tuple(1)));
        tw.insert(t0, init(2, None));
        let low = tw.process(t0, &tuple(2), &seg(TcpFlags::SYN, 900, None));
        assert!(matches!(low, Some(TwVerdict::Ack { .. })));
        let high = tw.process(t0, &tuple(2), &seg(TcpFlags::SYN, 2000, None));
        assert!(matches!(high, Some(TwVerdict::Reopen { .. })));
    }

    /// Finding 3: RFC 7323 §4.3 in TIME-WAIT, the retransmitted FIN (SEG.SEQ <=
    /// Last.ACK.sent, newer TSval) updates TS.Recent and its ACK echoes it.
    #[test]
    fn retransmitted_fin_updates_ts_recent() {
        let mut tw = TimeWaitTable::new(&[3; 16], 10, Duration::from_secs(30));
        let t0 = Instant::from_secs(1);
        tw.insert(t0, init(1, Some(700)));
        let fin = seg(TcpFlags::FIN | TcpFlags::ACK, 999, Some(1700));
        match tw.process(t0, &tuple(1), &fin) {
            Some(TwVerdict::Ack { tsecr, .. }) => assert_eq!(tsecr, Some(1700)),
            v => panic!("{v:?}"),
        }
        // An older timestamp is PAWS-rejected and leaves TS.Recent alone.
        let old = seg(TcpFlags::FIN | TcpFlags::ACK, 999, Some(1500));
        match tw.process(t0, &tuple(1), &old) {
            Some(TwVerdict::Ack { tsecr, .. }) => assert_eq!(tsecr, Some(1700)),
            v => panic!("{v:?}"),
        }
    }

    /// Issue 12, defect 3 (RFC 9293 §3.10.7.4, TIME-WAIT): a FIN at RCV.NXT is in the
    /// window; it is acknowledged and restarts 2*MSL like a retransmitted one.
    #[test]
    fn fin_at_rcv_nxt_acked_and_restarts() {
        let mut tw = TimeWaitTable::new(&[3; 16], 10, Duration::from_secs(1));
        let t0 = Instant::from_secs(10);
        tw.insert(t0, init(1, Some(700)));
        let t1 = t0 + Duration::from_millis(1500);
        let fin = seg(TcpFlags::FIN | TcpFlags::ACK, 1000, Some(1700));
        match tw.process(t1, &tuple(1), &fin) {
            Some(TwVerdict::Ack {
                seq, ack, tsecr, ..
            }) => {
                assert_eq!((seq, ack), (SeqNumber(500), SeqNumber(1000)));
                assert_eq!(tsecr, Some(1700));
            }
            v => panic!("{v:?}"),
        }
        tw.expire(t0 + Duration::from_secs(3));
        assert!(tw.contains(&tuple(1)));
        tw.expire(t1 + Duration::from_secs(2));
        assert!(!tw.contains(&tuple(1)));
    }

    #[test]
    fn full_table_recycles_oldest() {
        let mut tw = TimeWaitTable::new(&[3; 16], 3, Duration::from_secs(1));
        let t0 = Instant::from_secs(1);
        for p in 1..=3 {
            assert!(!tw.insert(t0, init(p, None)));
        }
        assert!(tw.insert(t0, init(4, None)));
        assert!(!tw.contains(&tuple(1)));
        assert!(tw.contains(&tuple(4)));
        assert_eq!(tw.len(), 3);
        // Bare in-window ACK is dropped; out-of-window segment gets an ACK.
        let bare = seg(TcpFlags::ACK, 1000, None);
        assert_eq!(tw.process(t0, &tuple(4), &bare), Some(TwVerdict::Drop));
        let stray = seg(TcpFlags::ACK, 7, None);
        assert!(matches!(
            tw.process(t0, &tuple(4), &stray),
            Some(TwVerdict::Ack { .. })
        ));
    }
}
