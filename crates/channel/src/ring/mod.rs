//! Single-producer/single-consumer descriptor rings shared with the kernel (AF_XDP's
//! fill, completion, rx and tx rings).
//!
//! Layout (Documentation/networking/af_xdp.rst): a `u32` producer index, a `u32`
//! consumer index, a `u32` flags word and an array of `size` descriptors, `size` a power
//! of two; the byte offsets come from `XDP_MMAP_OFFSETS`. Indices run freely and wrap at
//! 2^32; slot `i` is `desc[i & (size - 1)]`, and `producer - consumer` (wrapping) is the
//! number of filled slots, always `<= size`.
//!
//! Memory ordering mirrors the kernel's `xsk_queue.h`: the producer writes descriptors,
//! then publishes the producer index with a release store; the consumer reads the
//! producer index with an acquire load before reading descriptors, and publishes its
//! consumer index with a release store after it has finished reading them. Each side
//! caches the other side's index and only re-reads it when the cached value says the
//! ring is full (producer) or empty (consumer), which keeps shared cache lines quiet.
//!
//! The ring is generic over a [`Region`], so the index arithmetic is unit-tested against
//! an in-memory [`HeapRegion`] (and can run under Miri) as well as used over an `Mmap`.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::mem::size_of;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::sys::mmap::{Mmap, Pod};

pub mod umem;

/// Memory holding a ring: atomic access to the index words, volatile access to
/// descriptors.
pub trait Region {
    /// The `u32` at `offset` as an atomic.
    ///
    /// # Panics
    /// If `offset` is out of bounds or misaligned.
    fn atomic_u32(&self, offset: usize) -> &AtomicU32;
    /// Reads a `T` at `offset`.
    ///
    /// # Panics
    /// If `offset` is out of bounds or misaligned.
    fn read<T: Pod>(&self, offset: usize) -> T;
    /// Writes a `T` at `offset`.
    ///
    /// # Panics
    /// If `offset` is out of bounds or misaligned.
    fn write<T: Pod>(&self, offset: usize, value: T);
}

impl Region for Mmap {
    fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        Mmap::atomic_u32(self, offset)
    }
    fn read<T: Pod>(&self, offset: usize) -> T {
        Mmap::read(self, offset)
    }
    fn write<T: Pod>(&self, offset: usize, value: T) {
        Mmap::write(self, offset, value)
    }
}

impl<R: Region + ?Sized> Region for Arc<R> {
    fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        (**self).atomic_u32(offset)
    }
    fn read<T: Pod>(&self, offset: usize) -> T {
        (**self).read(offset)
    }
    fn write<T: Pod>(&self, offset: usize, value: T) {
        (**self).write(offset, value)
    }
}

/// A heap-backed [`Region`] standing in for kernel memory in tests and fuzzing: both
/// sides of a ring can share it through an `Arc`.
#[derive(Debug)]
pub struct HeapRegion {
    words: Box<[UnsafeCell<u64>]>,
}

// SAFETY: every access goes through atomics or volatile reads/writes of `Pod` values,
// the same discipline as kernel-shared memory; concurrent descriptor accesses are ruled
// out by the ring protocol just as with the kernel.
unsafe impl Sync for HeapRegion {}
// SAFETY: plain owned memory.
unsafe impl Send for HeapRegion {}

impl HeapRegion {
    /// A zeroed region of at least `len` bytes, 8-byte aligned.
    pub fn new(len: usize) -> Self {
        let words = (0..len.div_ceil(8)).map(|_| UnsafeCell::new(0)).collect();
        HeapRegion { words }
    }

    fn ptr<T>(&self, offset: usize) -> *mut T {
        let len = self.words.len() * 8;
        let end = offset.checked_add(size_of::<T>());
        assert!(
            end.is_some_and(|e| e <= len),
            "heap region access {offset} outside {len} bytes"
        );
        // `UnsafeCell<u64>` is `repr(transparent)`, so the cells form one contiguous
        // allocation; deriving the pointer from the slice's base keeps its provenance
        // over the whole region.
        let base = UnsafeCell::raw_get(self.words.as_ptr()).cast::<u8>();
        // SAFETY: `offset + size_of::<T>() <= len` was checked.
        let p = unsafe { base.add(offset) }.cast::<T>();
        assert!(p.is_aligned(), "misaligned heap region access at {offset}");
        p
    }
}

impl Region for HeapRegion {
    fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        let p = self.ptr::<u32>(offset);
        // SAFETY: in bounds, aligned, inside `UnsafeCell`s, alive as long as `self`; all
        // accesses to index words go through atomics.
        unsafe { AtomicU32::from_ptr(p) }
    }
    fn read<T: Pod>(&self, offset: usize) -> T {
        // SAFETY: in bounds and aligned (checked); `T: Pod` accepts any bits.
        unsafe { std::ptr::read_volatile(self.ptr::<T>(offset)) }
    }
    fn write<T: Pod>(&self, offset: usize, value: T) {
        // SAFETY: in bounds and aligned (checked); the memory is inside `UnsafeCell`s.
        unsafe { std::ptr::write_volatile(self.ptr::<T>(offset), value) }
    }
}

/// Where the parts of one ring sit inside its region (from `XDP_MMAP_OFFSETS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Byte offset of the producer index.
    pub producer: usize,
    /// Byte offset of the consumer index.
    pub consumer: usize,
    /// Byte offset of the flags word.
    pub flags: usize,
    /// Byte offset of the descriptor array.
    pub desc: usize,
    /// Number of descriptors: a power of two.
    pub size: u32,
}

impl Layout {
    /// Bytes the region must hold for `size` descriptors of type `D`.
    pub fn region_len<D>(&self) -> usize {
        self.desc + self.size as usize * size_of::<D>()
    }

    /// A compact layout for tests: indices and flags on their own words, then the
    /// descriptors.
    pub fn compact(size: u32) -> Self {
        Layout {
            producer: 0,
            consumer: 4,
            flags: 8,
            desc: 16,
            size,
        }
    }
}

/// Shared by both ends: the region, the layout and the slot arithmetic.
#[derive(Debug)]
struct Shared<R, D> {
    region: R,
    layout: Layout,
    mask: u32,
    _desc: PhantomData<D>,
}

impl<R: Region, D: Pod> Shared<R, D> {
    fn new(region: R, layout: Layout) -> Self {
        assert!(
            layout.size.is_power_of_two(),
            "ring size {} is not a power of two",
            layout.size
        );
        // Touch the last slot once so a too-small region fails here, not on the data path.
        let _ = region.read::<D>(layout.desc + (layout.size as usize - 1) * size_of::<D>());
        Shared {
            region,
            layout,
            mask: layout.size - 1,
            _desc: PhantomData,
        }
    }

    fn slot(&self, index: u32) -> usize {
        self.layout.desc + (index & self.mask) as usize * size_of::<D>()
    }

    fn producer(&self) -> &AtomicU32 {
        self.region.atomic_u32(self.layout.producer)
    }

    fn consumer(&self) -> &AtomicU32 {
        self.region.atomic_u32(self.layout.consumer)
    }

    fn needs_wakeup(&self) -> bool {
        // The kernel sets and clears the flag with plain stores (READ_ONCE/WRITE_ONCE);
        // acquire orders our later reads after observing it. A stale "clear" costs at
        // most one extra round trip: the kernel re-checks the ring before sleeping.
        self.region
            .atomic_u32(self.layout.flags)
            .load(Ordering::Acquire)
            & crate::sys::xsk::XDP_RING_NEED_WAKEUP
            != 0
    }
}

/// Our producing end of a ring (fill and tx rings).
#[derive(Debug)]
pub struct Producer<R, D> {
    shared: Shared<R, D>,
    /// Next index we will write (published on `submit`).
    local: u32,
    /// The consumer index plus `size`: we may write while `local != limit`.
    limit: u32,
}

impl<R: Region, D: Pod> Producer<R, D> {
    /// Takes the producing end of the ring at `layout` in `region`, picking up the
    /// indices already there.
    ///
    /// # Panics
    /// If `layout.size` is not a power of two or the region is too small for it.
    pub fn new(region: R, layout: Layout) -> Self {
        let shared = Shared::new(region, layout);
        let local = shared.producer().load(Ordering::Relaxed);
        let limit = shared
            .consumer()
            .load(Ordering::Acquire)
            .wrapping_add(layout.size);
        Producer {
            shared,
            local,
            limit,
        }
    }

    /// Ring capacity in descriptors.
    pub fn size(&self) -> u32 {
        self.shared.layout.size
    }

    /// How many descriptors can be pushed now; re-reads the consumer index only when
    /// the cached one shows fewer than `want` free.
    pub fn free(&mut self, want: u32) -> u32 {
        let free = self.limit.wrapping_sub(self.local);
        if free >= want {
            return free;
        }
        // Acquire: the consumer's reads of those slots are done before we overwrite them.
        self.limit = self
            .shared
            .consumer()
            .load(Ordering::Acquire)
            .wrapping_add(self.size());
        self.limit.wrapping_sub(self.local)
    }

    /// Writes `desc` into the next slot. Not visible to the consumer before
    /// [`Producer::submit`]. Returns `false` (and writes nothing) when the ring is full.
    pub fn push(&mut self, desc: D) -> bool {
        if self.free(1) == 0 {
            return false;
        }
        self.shared.region.write(self.shared.slot(self.local), desc);
        self.local = self.local.wrapping_add(1);
        true
    }

    /// Descriptors pushed but not yet submitted.
    pub fn pending(&self) -> u32 {
        self.local
            .wrapping_sub(self.shared.producer().load(Ordering::Relaxed))
    }

    /// Publishes every pushed descriptor (one release store for the batch).
    pub fn submit(&mut self) {
        self.shared.producer().store(self.local, Ordering::Release);
    }

    /// Descriptors submitted but not yet consumed by the other side.
    pub fn in_flight(&self) -> u32 {
        let cons = self.shared.consumer().load(Ordering::Acquire);
        self.shared
            .producer()
            .load(Ordering::Relaxed)
            .wrapping_sub(cons)
    }

    /// Whether the consumer asked for a wake-up (`XDP_RING_NEED_WAKEUP`).
    pub fn needs_wakeup(&self) -> bool {
        self.shared.needs_wakeup()
    }
}

/// Our consuming end of a ring (rx and completion rings).
#[derive(Debug)]
pub struct Consumer<R, D> {
    shared: Shared<R, D>,
    /// Next index we will read (published on `release`).
    local: u32,
    /// The producer index as last read.
    cached_prod: u32,
}

impl<R: Region, D: Pod> Consumer<R, D> {
    /// Takes the consuming end of the ring at `layout` in `region`.
    ///
    /// # Panics
    /// If `layout.size` is not a power of two or the region is too small for it.
    pub fn new(region: R, layout: Layout) -> Self {
        let shared = Shared::new(region, layout);
        let local = shared.consumer().load(Ordering::Relaxed);
        let cached_prod = shared.producer().load(Ordering::Acquire);
        Consumer {
            shared,
            local,
            cached_prod,
        }
    }

    /// Ring capacity in descriptors.
    pub fn size(&self) -> u32 {
        self.shared.layout.size
    }

    /// How many descriptors are ready; re-reads the producer index only when the cached
    /// one shows fewer than `want`. A producer index that claims more than `size` filled
    /// slots (a broken peer) is clamped, never trusted.
    pub fn available(&mut self, want: u32) -> u32 {
        let avail = self.cached_prod.wrapping_sub(self.local);
        if avail >= want {
            return avail.min(self.size());
        }
        // Acquire: the producer's descriptor writes are visible before we read them.
        self.cached_prod = self.shared.producer().load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.local).min(self.size())
    }

    /// Reads the next descriptor, or `None` when the ring is empty. The slot stays ours
    /// (the producer cannot reuse it) until [`Consumer::release`].
    pub fn pop(&mut self) -> Option<D> {
        if self.available(1) == 0 {
            return None;
        }
        let d = self.shared.region.read(self.shared.slot(self.local));
        self.local = self.local.wrapping_add(1);
        Some(d)
    }

    /// Reads the descriptor `i` places after the next one without consuming it, or
    /// `None` when fewer than `i + 1` are ready (multi-buffer frames are inspected whole
    /// before any part of them is taken).
    pub fn peek(&mut self, i: u32) -> Option<D> {
        if self.available(i.saturating_add(1)) <= i {
            return None;
        }
        Some(
            self.shared
                .region
                .read(self.shared.slot(self.local.wrapping_add(i))),
        )
    }

    /// Consumes `n` descriptors already inspected with [`Consumer::peek`].
    ///
    /// # Panics
    /// If fewer than `n` are ready (a caller bug).
    pub fn advance(&mut self, n: u32) {
        assert!(self.available(n) >= n, "advance({n}) past the producer");
        self.local = self.local.wrapping_add(n);
    }

    /// Descriptors popped but not yet released.
    pub fn unreleased(&self) -> u32 {
        self.local
            .wrapping_sub(self.shared.consumer().load(Ordering::Relaxed))
    }

    /// Hands every popped slot back to the producer (one release store for the batch).
    pub fn release(&mut self) {
        self.shared.consumer().store(self.local, Ordering::Release);
    }

    /// Whether the producer asked for a wake-up (`XDP_RING_NEED_WAKEUP`).
    pub fn needs_wakeup(&self) -> bool {
        self.shared.needs_wakeup()
    }
}

#[cfg(test)]
mod tests;
