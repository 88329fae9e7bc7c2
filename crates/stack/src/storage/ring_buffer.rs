//! A bounded byte ring: the TCP send and receive buffers.
//!
//! Bytes are *allocated* (written and committed, waiting to be read) from the read pointer
//! for `len()` bytes; the rest of the ring is *unallocated* (free, the `window()`).
//!
//! The two sides of TCP use it differently:
//! - the sender enqueues application data, reads it at an offset past the read pointer
//!   for (re)transmission ([`RingBuffer::read_allocated`]) and drops it once acknowledged
//!   ([`RingBuffer::dequeue_allocated`]);
//! - the receiver writes out-of-order segments past the write pointer
//!   ([`RingBuffer::write_unallocated`]), commits them once contiguous
//!   ([`RingBuffer::enqueue_unallocated`]), and the application dequeues.
//!
//! Two sizes: the *capacity* is what the ring promises (the receive window is computed
//! from it, RFC 9293 §3.8.6), the *storage* is what is allocated now. A ring made with
//! [`RingBuffer::new`] allocates its whole capacity at once and never again. One made with
//! [`RingBuffer::lazy`] allocates nothing until [`RingBuffer::reserve`] asks for room,
//! then grows its storage by doubling (amortised, never per packet) up to the capacity,
//! charging every byte to a [`MemBudget`]; [`RingBuffer::release`] gives an empty ring's
//! storage back. Growing keeps every byte at its offset from the read pointer, out-of-order
//! bytes past the write pointer included.
//!
//! Every operation clamps to what fits in the storage and returns how many bytes it
//! moved, so no combination of arguments panics.

use alloc::vec;
use alloc::vec::Vec;

use super::MemBudget;

/// The smallest storage a lazy ring allocates: a page, so a one-line request does not
/// cost a doubling series of tiny allocations.
pub const MIN_STORAGE: usize = 4096;

/// A circular byte buffer with a fixed or growing storage. See the module docs for the
/// allocated / unallocated split and the two sizes.
#[derive(Clone)]
pub struct RingBuffer {
    /// The bytes allocated now; its length is at most `cap`.
    storage: Vec<u8>,
    /// The promised size: `window()` is computed from it.
    cap: usize,
    /// Index of the first allocated byte; always `< storage.len()` (or 0 when empty storage).
    read_at: usize,
    /// Number of allocated bytes; always `<= storage.len()`.
    length: usize,
}

impl core::fmt::Debug for RingBuffer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RingBuffer")
            .field("capacity", &self.capacity())
            .field("storage", &self.storage.len())
            .field("read_at", &self.read_at)
            .field("len", &self.length)
            .finish()
    }
}

impl RingBuffer {
    /// A ring of `capacity` bytes, allocated now and never again. A zero capacity is
    /// allowed; such a ring accepts nothing.
    pub fn new(capacity: usize) -> Self {
        RingBuffer {
            storage: vec![0; capacity],
            cap: capacity,
            read_at: 0,
            length: 0,
        }
    }

    /// A ring that promises `capacity` bytes and allocates none yet: writes take nothing
    /// until [`RingBuffer::reserve`] found room.
    pub const fn lazy(capacity: usize) -> Self {
        RingBuffer {
            storage: Vec::new(),
            cap: capacity,
            read_at: 0,
            length: 0,
        }
    }

    /// The promised size in bytes.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// The bytes of storage allocated now (what the ring costs).
    #[inline]
    pub fn storage_len(&self) -> usize {
        self.storage.len()
    }

    /// Changes the promised size. It never falls below the storage already allocated
    /// (nor, so, below `len()`); returns the size in force. Shrinking is the caller's
    /// decision: a receive buffer must not take back a window it offered (RFC 9293
    /// §3.8.6).
    pub fn set_capacity(&mut self, capacity: usize) -> usize {
        self.cap = capacity.max(self.storage.len());
        self.cap
    }

    /// Makes the storage hold at least `total` bytes from the read pointer (clamped to
    /// the capacity), growing it to the next power of two (at least [`MIN_STORAGE`], at
    /// most the capacity) and charging the growth to `budget`. Returns false when
    /// `budget` or the allocator refused; the ring is then unchanged.
    pub fn reserve(&mut self, total: usize, budget: &mut MemBudget) -> bool {
        let want = total.min(self.cap);
        let old = self.storage.len();
        if old >= want {
            return true;
        }
        let new_len = want
            .checked_next_power_of_two()
            .unwrap_or(want)
            .max(MIN_STORAGE)
            .min(self.cap);
        let add = new_len - old;
        if !budget.try_charge(add) {
            return false;
        }
        let mut fresh: Vec<u8> = Vec::new();
        if fresh.try_reserve_exact(new_len).is_err() {
            budget.release(add);
            return false;
        }
        // Keep every byte at its offset from the read pointer: the allocated ones and
        // the out-of-order ones written past the write pointer alike.
        fresh.extend_from_slice(&self.storage[self.read_at..]);
        fresh.extend_from_slice(&self.storage[..self.read_at]);
        fresh.resize(new_len, 0);
        self.storage = fresh;
        self.read_at = 0;
        true
    }

    /// Gives the storage of an empty ring back to `budget` (and the allocator); returns
    /// the bytes freed. A ring holding bytes keeps its storage and returns 0. The caller
    /// makes sure no out-of-order bytes past the write pointer are still wanted.
    pub fn release(&mut self, budget: &mut MemBudget) -> usize {
        if self.length != 0 || self.storage.is_empty() {
            return 0;
        }
        let n = self.storage.len();
        self.storage = Vec::new();
        self.read_at = 0;
        budget.release(n);
        n
    }

    /// Allocated (readable) bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.length
    }

    /// No allocated bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// No free bytes.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.length == self.capacity()
    }

    /// Free (unallocated) bytes of the promised size: what can still be enqueued once
    /// the storage grew to it. For a receive buffer this is the window to advertise (RFC
    /// 9293 §3.8.6).
    #[inline]
    pub fn window(&self) -> usize {
        self.cap - self.length
    }

    /// Free bytes of the storage allocated now: what a write can take without
    /// [`RingBuffer::reserve`].
    #[inline]
    fn room(&self) -> usize {
        self.storage.len() - self.length
    }

    /// Drops all bytes; the storage is kept.
    pub fn clear(&mut self) {
        self.read_at = 0;
        self.length = 0;
    }

    /// Storage index `offset` bytes past `base`, wrapping. `offset` may be any value.
    #[inline]
    fn index(&self, base: usize, offset: usize) -> usize {
        let cap = self.storage.len();
        if cap == 0 {
            return 0;
        }
        // base < cap, so (offset % cap) + base < 2 * cap cannot overflow for real sizes.
        let i = base + offset % cap;
        if i >= cap {
            i - cap
        } else {
            i
        }
    }

    #[inline]
    fn write_at(&self) -> usize {
        self.index(self.read_at, self.length)
    }

    /// Copies `data` into storage starting at index `at`, wrapping once. The caller
    /// guarantees `data.len() <= storage.len()`.
    fn copy_in(&mut self, at: usize, data: &[u8]) {
        let cap = self.storage.len();
        let first = data.len().min(cap - at);
        self.storage[at..at + first].copy_from_slice(&data[..first]);
        let rest = data.len() - first;
        self.storage[..rest].copy_from_slice(&data[first..]);
    }

    /// Copies `buf.len()` bytes out of storage starting at index `at`, wrapping once.
    /// The caller guarantees `buf.len() <= storage.len()`.
    fn copy_out(&self, at: usize, buf: &mut [u8]) {
        let cap = self.storage.len();
        let first = buf.len().min(cap - at);
        buf[..first].copy_from_slice(&self.storage[at..at + first]);
        let rest = buf.len() - first;
        buf[first..].copy_from_slice(&self.storage[..rest]);
    }

    /// Appends as much of `data` as fits in the storage; returns how many bytes were
    /// taken.
    pub fn enqueue_slice(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.room());
        if n == 0 {
            return 0;
        }
        let at = self.write_at();
        self.copy_in(at, &data[..n]);
        self.length += n;
        n
    }

    /// Moves up to `buf.len()` bytes from the front into `buf`; returns how many.
    pub fn dequeue_slice(&mut self, buf: &mut [u8]) -> usize {
        let n = self.read_allocated(0, buf);
        self.dequeue_allocated(n)
    }

    /// Copies allocated bytes starting `offset` bytes past the read pointer into `buf`,
    /// without consuming them; returns how many (zero when `offset >= len()`). The sender
    /// uses it to build (re)transmitted segments from unacknowledged data.
    pub fn read_allocated(&self, offset: usize, buf: &mut [u8]) -> usize {
        if offset >= self.length {
            return 0;
        }
        let n = buf.len().min(self.length - offset);
        let at = self.index(self.read_at, offset);
        self.copy_out(at, &mut buf[..n]);
        n
    }

    /// The allocated bytes starting `offset` past the read pointer, at most `max_len`,
    /// stopping at the end of the storage (the contiguous part only; call again with a
    /// larger offset for the wrapped remainder). Empty when `offset >= len()`.
    pub fn get_allocated(&self, offset: usize, max_len: usize) -> &[u8] {
        if offset >= self.length {
            return &[];
        }
        let at = self.index(self.read_at, offset);
        let n = max_len
            .min(self.length - offset)
            .min(self.storage.len() - at);
        &self.storage[at..at + n]
    }

    /// Drops up to `n` bytes from the front (acknowledged data); returns how many.
    pub fn dequeue_allocated(&mut self, n: usize) -> usize {
        let n = n.min(self.length);
        self.read_at = self.index(self.read_at, n);
        // The read pointer is not rewound when the ring empties: bytes written past the
        // write pointer (out-of-order data) must stay where they are.
        self.length -= n;
        n
    }

    /// Moves an empty ring's read (and so write) pointer back to the start of the storage.
    /// The caller knows that nothing is stored past the write pointer either (no
    /// out-of-order bytes): those would be lost. Why: a reader that keeps up empties the
    /// ring after every few segments, and without this the next segments are written
    /// wherever the pointer stopped, so a ring of megabytes is walked end to end and every
    /// write misses the cache; rewound, the same first kilobytes are reused and stay hot.
    pub fn rewind(&mut self) {
        if self.length == 0 {
            self.read_at = 0;
        }
    }

    /// Writes `data` into free storage starting `offset` bytes past the write pointer,
    /// without committing it; returns how many bytes were written (clipped to the free
    /// storage, zero when `offset` is past it). The receiver stores out-of-order segments
    /// with it and commits them with [`RingBuffer::enqueue_unallocated`] once the gap
    /// before them is filled.
    pub fn write_unallocated(&mut self, offset: usize, data: &[u8]) -> usize {
        let room = self.room();
        if offset >= room {
            return 0;
        }
        let n = data.len().min(room - offset);
        let at = self.index(self.write_at(), offset);
        self.copy_in(at, &data[..n]);
        n
    }

    /// The free storage starting `offset` past the write pointer, at most `max_len`,
    /// stopping at the end of the storage: a zero-copy target for writes that are then
    /// committed with [`RingBuffer::enqueue_unallocated`].
    pub fn get_unallocated(&mut self, offset: usize, max_len: usize) -> &mut [u8] {
        let room = self.room();
        if offset >= room {
            return &mut [];
        }
        let at = self.index(self.write_at(), offset);
        let n = max_len.min(room - offset).min(self.storage.len() - at);
        &mut self.storage[at..at + n]
    }

    /// Commits up to `n` bytes after the write pointer (written earlier with
    /// [`RingBuffer::write_unallocated`]) as allocated; returns how many.
    pub fn enqueue_unallocated(&mut self, n: usize) -> usize {
        let n = n.min(self.room());
        self.length += n;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn enqueue_dequeue_wraps() {
        let mut r = RingBuffer::new(8);
        assert_eq!(r.enqueue_slice(b"abcdef"), 6);
        let mut out = [0u8; 4];
        assert_eq!(r.dequeue_slice(&mut out), 4);
        assert_eq!(&out, b"abcd");
        assert_eq!(r.enqueue_slice(b"ghijklmn"), 6);
        assert!(r.is_full());
        assert_eq!(r.window(), 0);
        assert_eq!(r.enqueue_slice(b"z"), 0);
        let mut all = [0u8; 16];
        assert_eq!(r.dequeue_slice(&mut all), 8);
        assert_eq!(&all[..8], b"efghijkl");
        assert!(r.is_empty());
    }

    #[test]
    fn read_allocated_across_wrap() {
        let mut r = RingBuffer::new(8);
        r.enqueue_slice(b"012345");
        r.dequeue_allocated(5);
        r.enqueue_slice(b"6789abc");
        // Storage now wraps: "5" at index 5 (read_at), data "56789abc".
        let mut buf = [0u8; 8];
        assert_eq!(r.read_allocated(0, &mut buf), 8);
        assert_eq!(&buf, b"56789abc");
        assert_eq!(r.read_allocated(2, &mut buf[..3]), 3);
        assert_eq!(&buf[..3], b"789");
        assert_eq!(r.read_allocated(8, &mut buf), 0);
        assert_eq!(r.read_allocated(usize::MAX, &mut buf), 0);
        // Contiguous part only.
        assert_eq!(r.get_allocated(0, 100), b"567");
        assert_eq!(r.get_allocated(3, 100), b"89abc");
        assert_eq!(r.get_allocated(4, 2), b"9a");
        assert_eq!(r.get_allocated(8, 2), b"");
    }

    #[test]
    fn out_of_order_receive() {
        let mut r = RingBuffer::new(10);
        r.enqueue_slice(b"xx");
        r.dequeue_allocated(2);
        // A segment at offset 4 arrives first, then the gap 0..4.
        assert_eq!(r.write_unallocated(4, b"efgh"), 4);
        assert_eq!(r.len(), 0);
        assert_eq!(r.write_unallocated(0, b"abcd"), 4);
        assert_eq!(r.enqueue_unallocated(8), 8);
        let mut out = [0u8; 8];
        assert_eq!(r.dequeue_slice(&mut out), 8);
        assert_eq!(&out, b"abcdefgh");
        // Writes past the window are clipped, never panic.
        assert_eq!(r.write_unallocated(8, b"0123"), 2);
        assert_eq!(r.write_unallocated(10, b"0"), 0);
        assert_eq!(r.write_unallocated(usize::MAX, b"0"), 0);
        assert_eq!(r.enqueue_unallocated(usize::MAX), 10);
    }

    #[test]
    fn out_of_order_data_survives_emptying() {
        let mut r = RingBuffer::new(8);
        r.enqueue_slice(b"ab");
        assert_eq!(r.write_unallocated(2, b"XY"), 2);
        let mut out = [0u8; 2];
        r.dequeue_slice(&mut out);
        assert!(r.is_empty());
        r.write_unallocated(0, b"cd");
        r.enqueue_unallocated(4);
        let mut out = [0u8; 4];
        r.dequeue_slice(&mut out);
        assert_eq!(&out, b"cdXY");
    }

    #[test]
    fn rewind_reuses_the_start_of_an_empty_ring() {
        let mut r = RingBuffer::new(8);
        r.enqueue_slice(b"abcde");
        let mut out = [0u8; 3];
        r.dequeue_slice(&mut out);
        r.rewind();
        // Not empty: nothing moves.
        assert_eq!(r.get_allocated(0, 8), b"de");
        r.dequeue_slice(&mut out);
        r.rewind();
        assert_eq!(r.enqueue_slice(b"01234567"), 8);
        // Written from index 0: the whole ring is one contiguous run.
        assert_eq!(r.get_allocated(0, 8), b"01234567");
        assert_eq!(r.get_unallocated(0, 8).len(), 0);
    }

    #[test]
    fn zero_capacity_accepts_nothing() {
        let mut r = RingBuffer::new(0);
        assert!(r.is_empty() && r.is_full());
        assert_eq!(r.enqueue_slice(b"a"), 0);
        assert_eq!(r.write_unallocated(0, b"a"), 0);
        assert_eq!(r.enqueue_unallocated(1), 0);
        assert_eq!(r.dequeue_allocated(1), 0);
        assert!(r.get_unallocated(0, 1).is_empty());
        assert!(r.get_allocated(0, 1).is_empty());
    }

    #[test]
    fn get_unallocated_is_zero_copy_target() {
        let mut r = RingBuffer::new(6);
        r.enqueue_slice(b"abcd");
        r.dequeue_allocated(4);
        let s = r.get_unallocated(0, 10);
        assert_eq!(s.len(), 2);
        s.copy_from_slice(b"ef");
        let s = r.get_unallocated(2, 10);
        assert_eq!(s.len(), 4);
        s.copy_from_slice(b"ghij");
        assert_eq!(r.enqueue_unallocated(6), 6);
        let mut out = [0u8; 6];
        r.dequeue_slice(&mut out);
        assert_eq!(&out, b"efghij");
    }

    #[test]
    fn lazy_ring_allocates_on_reserve_and_charges_the_budget() {
        let mut b = MemBudget::new(crate::storage::MemLimits::from_hard(1 << 20));
        let mut r = RingBuffer::lazy(64 * 1024);
        assert_eq!(r.storage_len(), 0);
        assert_eq!(r.window(), 64 * 1024, "the promise stands without storage");
        assert_eq!(r.enqueue_slice(b"abc"), 0, "no storage, no bytes");
        assert!(r.reserve(3, &mut b));
        assert_eq!(r.storage_len(), MIN_STORAGE);
        assert_eq!(b.used(), MIN_STORAGE);
        assert_eq!(r.enqueue_slice(b"abc"), 3);
        // Doubling: room for 5,000 bytes gives 8 KiB, not 5,000.
        assert!(r.reserve(5000, &mut b));
        assert_eq!(r.storage_len(), 8192);
        assert_eq!(b.used(), 8192);
        // Never past the capacity.
        assert!(r.reserve(usize::MAX, &mut b));
        assert_eq!(r.storage_len(), 64 * 1024);
        let mut out = [0u8; 3];
        assert_eq!(r.dequeue_slice(&mut out), 3);
        assert_eq!(&out, b"abc");
        assert_eq!(r.release(&mut b), 64 * 1024);
        assert_eq!(b.used(), 0);
        assert_eq!(r.storage_len(), 0);
        assert_eq!(r.capacity(), 64 * 1024);
    }

    #[test]
    fn growth_keeps_bytes_at_their_offsets() {
        let mut b = MemBudget::new(crate::storage::MemLimits::from_hard(1 << 20));
        let mut r = RingBuffer::lazy(1 << 16);
        assert!(r.reserve(1, &mut b));
        let n = r.storage_len();
        // Wrap the read pointer, then hold in-order bytes and an out-of-order block.
        let fill = vec![7u8; n - 10];
        assert_eq!(r.enqueue_slice(&fill), n - 10);
        assert_eq!(r.dequeue_allocated(n - 10), n - 10);
        assert_eq!(r.enqueue_slice(b"0123456789abcdef"), 16);
        assert_eq!(r.write_unallocated(4, b"XYZ"), 3);
        assert!(r.reserve(n + 1, &mut b));
        assert_eq!(r.storage_len(), 2 * n);
        assert_eq!(r.write_unallocated(0, b"abcd"), 4);
        assert_eq!(r.enqueue_unallocated(7), 7);
        let mut out = [0u8; 23];
        assert_eq!(r.dequeue_slice(&mut out), 23);
        assert_eq!(&out, b"0123456789abcdefabcdXYZ");
    }

    #[test]
    fn refused_growth_leaves_the_ring_alone() {
        let mut b = MemBudget::new(crate::storage::MemLimits::from_hard(MIN_STORAGE));
        let mut r = RingBuffer::lazy(1 << 16);
        assert!(r.reserve(10, &mut b));
        assert_eq!(r.enqueue_slice(b"kept"), 4);
        assert!(!r.reserve(MIN_STORAGE + 1, &mut b));
        assert_eq!(r.storage_len(), MIN_STORAGE);
        assert_eq!(b.refused(), 1);
        let mut out = [0u8; 4];
        assert_eq!(r.dequeue_slice(&mut out), 4);
        assert_eq!(&out, b"kept");
        assert_eq!(r.release(&mut b), MIN_STORAGE);
        assert_eq!(
            r.set_capacity(100),
            100,
            "shrinks freely once nothing is stored"
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Enqueue(Vec<u8>),
        Dequeue(usize),
        DropAcked(usize),
        Peek(usize, usize),
        WriteUnalloc(usize, Vec<u8>),
        Commit(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Op::Enqueue),
            (0usize..40).prop_map(Op::Dequeue),
            (0usize..40).prop_map(Op::DropAcked),
            (0usize..40, 0usize..40).prop_map(|(o, l)| Op::Peek(o, l)),
            (0usize..40, proptest::collection::vec(any::<u8>(), 0..20))
                .prop_map(|(o, d)| Op::WriteUnalloc(o, d)),
            (0usize..40).prop_map(Op::Commit),
        ]
    }

    proptest! {
        /// The ring behaves like an unbounded deque clipped to the capacity, with a
        /// model of the free space for unallocated writes.
        #[test]
        fn matches_deque_model(cap in 0usize..33, ops in proptest::collection::vec(op(), 0..80)) {
            let mut r = RingBuffer::new(cap);
            let mut model: VecDeque<u8> = VecDeque::new();
            // Bytes written past the write pointer, by offset.
            let mut unalloc: Vec<Option<u8>> = vec![None; cap];
            for op in ops {
                match op {
                    Op::Enqueue(d) => {
                        let n = r.enqueue_slice(&d);
                        prop_assert_eq!(n, d.len().min(cap - model.len()));
                        model.extend(&d[..n]);
                        unalloc.drain(..n);
                        unalloc.resize(cap, None);
                    }
                    Op::Dequeue(k) => {
                        let mut buf = vec![0u8; k];
                        let n = r.dequeue_slice(&mut buf);
                        prop_assert_eq!(n, k.min(model.len()));
                        let want: Vec<u8> = model.drain(..n).collect();
                        prop_assert_eq!(&buf[..n], &want[..]);
                    }
                    Op::DropAcked(k) => {
                        let n = r.dequeue_allocated(k);
                        prop_assert_eq!(n, k.min(model.len()));
                        model.drain(..n);
                    }
                    Op::Peek(o, l) => {
                        let mut buf = vec![0u8; l];
                        let n = r.read_allocated(o, &mut buf);
                        let want: Vec<u8> = model.iter().skip(o).take(l).copied().collect();
                        prop_assert_eq!(&buf[..n], &want[..]);
                        let c = r.get_allocated(o, l);
                        prop_assert!(c.len() <= want.len());
                        prop_assert_eq!(c, &want[..c.len()]);
                        if !want.is_empty() {
                            prop_assert!(!c.is_empty());
                        }
                    }
                    Op::WriteUnalloc(o, d) => {
                        let free = cap - model.len();
                        let n = r.write_unallocated(o, &d);
                        let want = if o >= free { 0 } else { d.len().min(free - o) };
                        prop_assert_eq!(n, want);
                        for (i, b) in d[..n].iter().enumerate() {
                            unalloc[o + i] = Some(*b);
                        }
                    }
                    Op::Commit(k) => {
                        let free = cap - model.len();
                        let n = r.enqueue_unallocated(k);
                        prop_assert_eq!(n, k.min(free));
                        let mut check = vec![0u8; n];
                        r.read_allocated(model.len(), &mut check);
                        // Only bytes the model knows were written are compared; the
                        // others are whatever the storage held.
                        for (got, want) in check.iter().zip(&unalloc) {
                            if let Some(b) = want {
                                prop_assert_eq!(got, b);
                            }
                        }
                        model.extend(&check);
                        unalloc.drain(..n);
                        unalloc.resize(cap, None);
                    }
                }
                prop_assert_eq!(r.len(), model.len());
                prop_assert_eq!(r.window(), cap - model.len());
                prop_assert_eq!(r.capacity(), cap);
            }
        }
    }
}
