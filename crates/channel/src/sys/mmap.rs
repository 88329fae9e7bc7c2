//! An owned `mmap(2)` region: the memory shared with the kernel by AF_XDP (UMEM, rings)
//! and AF_PACKET (TPACKET_V3 blocks).
//!
//! The kernel may write this memory at any time, so the region never hands out `&`/`&mut`
//! to plain bytes from safe code (docs/STYLE.md 4.6): ring indices are read through
//! [`Mmap::atomic_u32`] (acquire/release), descriptors through [`Mmap::read`] /
//! [`Mmap::write`] (volatile), and byte slices only through the `unsafe`
//! [`Mmap::slice`] / [`Mmap::slice_mut`], whose callers prove from the ring protocol that
//! the kernel does not touch those bytes while the slice lives.
//!
//! Invariant: `ptr .. ptr + len` is mapped for as long as the `Mmap` lives; `Drop`
//! unmaps it.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

use crate::{Error, Result};

/// Plain data that may be read from and written to shared memory by value.
///
/// # Safety
/// Every bit pattern of `size_of::<Self>()` bytes must be a valid `Self` (no `bool`,
/// no enums, no references, no padding that matters), because the kernel writes these
/// bytes without knowing about Rust's validity rules.
pub unsafe trait Pod: Copy {}

// SAFETY: integers accept every bit pattern.
unsafe impl Pod for u8 {}
// SAFETY: as above.
unsafe impl Pod for u16 {}
// SAFETY: as above.
unsafe impl Pod for u32 {}
// SAFETY: as above.
unsafe impl Pod for u64 {}
// SAFETY: as above.
unsafe impl Pod for i32 {}
// SAFETY: as above.
unsafe impl Pod for i64 {}

/// The size of an x86-64 (and most arm64) huge page.
pub const HUGE_PAGE: usize = 2 << 20;

/// Which pages back a mapping made by [`Mmap::anonymous_huge`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// Reserved huge pages (`MAP_HUGETLB`, `vm.nr_hugepages`).
    HugeTlb,
    /// Transparent huge pages: `huge` of the `total` bytes are in 2 MiB pages.
    Transparent {
        /// Bytes in huge pages (`AnonHugePages` in `/proc/self/smaps`).
        huge: usize,
        /// The mapping's length.
        total: usize,
    },
    /// 4 KiB pages only (THP off or none free).
    Small,
}

impl std::fmt::Display for Pages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Pages::HugeTlb => f.write_str("2 MiB pages (hugetlb)"),
            Pages::Transparent { huge, total } if huge >= total => f.write_str("2 MiB pages (THP)"),
            Pages::Transparent { huge, total } => write!(
                f,
                "{} of {} MiB in 2 MiB pages (THP)",
                huge >> 20,
                total >> 20
            ),
            Pages::Small => f.write_str("4 KiB pages"),
        }
    }
}

/// `AnonHugePages` of the mapping starting at `start`, from `/proc/self/smaps`.
fn anon_huge_bytes(start: usize) -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/smaps").ok()?;
    parse_anon_huge(&text, start)
}

/// The `AnonHugePages` line (kB) of the smaps entry whose range starts at `start`.
fn parse_anon_huge(smaps: &str, start: usize) -> Option<usize> {
    let head = format!("{start:x}-");
    let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&head));
    lines.next()?;
    // Every entry lists `AnonHugePages`, so the first one after the header is its own.
    lines
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .map(|kb| kb * 1024)
}

/// An owned memory mapping, unmapped on drop.
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory not tied to a thread; shared access from several
// threads goes through atomics, volatile accesses, or the `unsafe` slice accessors whose
// callers take on the aliasing proof.
unsafe impl Send for Mmap {}
// SAFETY: see `Send`; no safe method hands out a plain reference to the bytes.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Maps `len` bytes of private anonymous memory, readable and writable (an AF_XDP
    /// UMEM). With `populate`, the pages are faulted in now (`MAP_POPULATE`) so the data
    /// path takes no page faults.
    ///
    /// # Errors
    /// `mmap(anonymous)` with the OS error (`ENOMEM` when the memory is not available).
    pub fn anonymous(len: usize, populate: bool) -> Result<Self> {
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        if populate {
            flags |= libc::MAP_POPULATE;
        }
        Self::map(
            "mmap(anonymous)",
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            -1,
            0,
        )
    }

    /// Maps at least `len` bytes of private anonymous memory, pre-faulted, in 2 MiB pages
    /// where the system gives them: reserved huge pages (`MAP_HUGETLB`) first, else a
    /// 2 MiB-aligned region with `MADV_HUGEPAGE` (transparent huge pages in `madvise`
    /// mode), else plain 4 KiB pages. The length is rounded up to 2 MiB. Returns the
    /// mapping and which pages back it.
    ///
    /// Why: a UMEM of 4096 frames of 4 KiB spans 4096 pages, more than the TLB holds, so
    /// every received frame's first touch was a TLB miss as well as a cache miss; under
    /// KVM a miss walks the guest's and the host's page tables.
    ///
    /// # Errors
    /// `mmap(anonymous)` with the OS error when not even 4 KiB pages are available.
    pub fn anonymous_huge(len: usize) -> Result<(Self, Pages)> {
        let len = len.checked_next_multiple_of(HUGE_PAGE).ok_or_else(|| {
            Error::new(
                "mmap(anonymous)",
                std::io::Error::from_raw_os_error(libc::EINVAL),
            )
        })?;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        if let Ok(m) = Self::map(
            "mmap(hugetlb)",
            len,
            rw,
            flags | libc::MAP_HUGETLB | libc::MAP_POPULATE,
            -1,
            0,
        ) {
            return Ok((m, Pages::HugeTlb));
        }
        // Over-map by one huge page, then trim head and tail to a 2 MiB-aligned region:
        // the kernel backs an aligned 2 MiB range with one huge page.
        let wide = Self::map("mmap(anonymous)", len + HUGE_PAGE, rw, flags, -1, 0)?;
        let base = wide.ptr.as_ptr() as usize;
        let start = base.next_multiple_of(HUGE_PAGE);
        let head = start - base;
        let tail = HUGE_PAGE - head;
        std::mem::forget(wide);
        // SAFETY: both ranges lie inside the mapping just made, which nothing else refers
        // to (it was forgotten above); what is left is `start .. start + len`.
        unsafe {
            if head > 0 {
                libc::munmap(base as *mut libc::c_void, head);
            }
            if tail > 0 {
                libc::munmap((start + len) as *mut libc::c_void, tail);
            }
        }
        let m = Mmap {
            // SAFETY: `start` is inside a successful mapping, hence not null.
            ptr: unsafe { NonNull::new_unchecked(start as *mut u8) },
            len,
        };
        // SAFETY: `m` owns the range; advice and prefaulting change no contents a
        // reference could observe (the memory is fresh and zero either way).
        let advised =
            unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE) == 0 };
        m.prefault();
        let pages = match (advised, anon_huge_bytes(start)) {
            (true, Some(b)) if b > 0 => Pages::Transparent {
                huge: b,
                total: len,
            },
            _ => Pages::Small,
        };
        Ok((m, pages))
    }

    /// Faults every page in now, so the data path takes no page faults
    /// (`MADV_POPULATE_WRITE`, Linux 5.14; before it, one write per 4 KiB page).
    fn prefault(&self) {
        // SAFETY: the range is this mapping's own.
        let ok = unsafe {
            libc::madvise(
                self.ptr.as_ptr().cast(),
                self.len,
                libc::MADV_POPULATE_WRITE,
            ) == 0
        };
        if !ok {
            for off in (0..self.len).step_by(4096) {
                // SAFETY: in bounds; nothing else refers to the fresh mapping yet.
                unsafe { self.ptr.as_ptr().add(off).write_volatile(0) };
            }
        }
    }

    /// Maps `len` bytes of `fd` at `offset`, shared with the kernel and readable and
    /// writable (an AF_XDP ring at `XDP_PGOFF_*`, or an AF_PACKET ring at offset 0), and
    /// pre-faulted (`MAP_POPULATE`).
    ///
    /// # Errors
    /// `mmap(shared)` with the OS error, e.g. `EINVAL` when the socket has no ring of
    /// that size at that offset.
    pub fn shared(fd: BorrowedFd<'_>, len: usize, offset: i64) -> Result<Self> {
        Self::map(
            "mmap(shared)",
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd.as_raw_fd(),
            offset,
        )
    }

    /// Maps with explicit `prot` and `flags` (any `MAP_*`/`PROT_*` combination the
    /// caller needs, e.g. `MAP_LOCKED`). `fd` is `None` for anonymous memory.
    ///
    /// # Errors
    /// `mmap` with the OS error; `EINVAL` for `len == 0`.
    pub fn with_flags(
        len: usize,
        prot: i32,
        flags: i32,
        fd: Option<BorrowedFd<'_>>,
        offset: i64,
    ) -> Result<Self> {
        let raw = fd.map_or(-1, |f| f.as_raw_fd());
        Self::map("mmap", len, prot, flags, raw, offset)
    }

    fn map(
        op: &'static str,
        len: usize,
        prot: i32,
        flags: i32,
        fd: i32,
        offset: i64,
    ) -> Result<Self> {
        if len == 0 {
            return Err(Error::new(
                op,
                std::io::Error::from_raw_os_error(libc::EINVAL),
            ));
        }
        // SAFETY: a fresh mapping at an address of the kernel's choosing (no MAP_FIXED)
        // cannot alias any existing Rust object; `fd`, if any, is open for the call.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, offset) };
        if ptr == libc::MAP_FAILED {
            return Err(Error::last_os_error(op));
        }
        let ptr = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| Error::new(op, std::io::Error::from_raw_os_error(libc::ENOMEM)))?;
        Ok(Mmap { ptr, len })
    }

    /// The region's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: empty mappings cannot be created.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The start of the region. Dereferencing it is the caller's responsibility.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// A pointer to `len` bytes at `offset`, or `None` when that range leaves the region.
    pub fn ptr_at(&self, offset: usize, len: usize) -> Option<*mut u8> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: `offset <= self.len`, so the result stays inside (or one past) the
        // mapping.
        Some(unsafe { self.ptr.as_ptr().add(offset) })
    }

    fn checked<T>(&self, offset: usize) -> *mut T {
        let size = std::mem::size_of::<T>();
        let p = self
            .ptr_at(offset, size)
            .unwrap_or_else(|| panic!("mmap access {offset}+{size} outside {} bytes", self.len));
        assert!(
            p.cast::<T>().is_aligned(),
            "misaligned mmap access at offset {offset}"
        );
        p.cast::<T>()
    }

    /// The `u32` at `offset` as an atomic, for ring indices and flags shared with the
    /// kernel (the kernel's side uses `smp_load_acquire`/`smp_store_release`).
    ///
    /// # Panics
    /// If `offset` is out of bounds or not 4-byte aligned: offsets come from the kernel's
    /// `XDP_MMAP_OFFSETS` or from constants, so this is a broken invariant.
    pub fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        let p = self.checked::<u32>(offset);
        // SAFETY: `p` is in bounds and aligned (checked above) and lives as long as
        // `self`. `AtomicU32` has interior mutability, so a shared reference to memory
        // that the kernel also updates is sound as long as every Rust access is atomic,
        // which this type enforces.
        unsafe { AtomicU32::from_ptr(p.cast()) }
    }

    /// Reads a `T` at `offset` with a volatile load (a descriptor or header the kernel
    /// wrote).
    ///
    /// # Panics
    /// If `offset` is out of bounds or misaligned for `T` (a broken invariant).
    pub fn read<T: Pod>(&self, offset: usize) -> T {
        let p = self.checked::<T>(offset);
        // SAFETY: in bounds and aligned (checked), `T: Pod` accepts any bit pattern, and a
        // volatile read tolerates concurrent writes by the kernel to other fields.
        unsafe { std::ptr::read_volatile(p) }
    }

    /// Writes `value` at `offset` with a volatile store (a descriptor for the kernel).
    ///
    /// # Panics
    /// If `offset` is out of bounds or misaligned for `T` (a broken invariant).
    pub fn write<T: Pod>(&self, offset: usize, value: T) {
        let p = self.checked::<T>(offset);
        // SAFETY: in bounds and aligned (checked); the memory is writable (every
        // constructor maps PROT_WRITE unless the caller chose otherwise in
        // `with_flags`, in which case writing is their documented error).
        unsafe { std::ptr::write_volatile(p, value) }
    }

    /// The bytes `offset .. offset + len` as a shared slice.
    ///
    /// # Safety
    /// For the slice's lifetime nobody (not the kernel, not another thread) may write
    /// those bytes: e.g. the frame's descriptor has been consumed from the rx ring and not
    /// yet returned to the fill ring.
    ///
    /// # Panics
    /// If the range leaves the region.
    pub unsafe fn slice(&self, offset: usize, len: usize) -> &[u8] {
        let p = self.ptr_at(offset, len).expect("mmap slice out of bounds");
        // SAFETY: in bounds; the caller guarantees no concurrent writer.
        unsafe { std::slice::from_raw_parts(p, len) }
    }

    /// The bytes `offset .. offset + len` as a mutable slice.
    ///
    /// # Safety
    /// For the slice's lifetime nobody else (not the kernel, not another slice from this
    /// region) may read or write those bytes: e.g. a UMEM frame taken from the transmit
    /// free list that has not been queued on the tx ring yet.
    ///
    /// # Panics
    /// If the range leaves the region.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut(&self, offset: usize, len: usize) -> &mut [u8] {
        let p = self.ptr_at(offset, len).expect("mmap slice out of bounds");
        // SAFETY: in bounds; the caller guarantees exclusive access for the lifetime.
        unsafe { std::slice::from_raw_parts_mut(p, len) }
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr/len` describe a mapping this value created and owns; no reference
        // into it can outlive `self` (all accessors borrow `self`).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_huge_mapping_is_aligned_rounded_and_usable() {
        let (m, pages) = Mmap::anonymous_huge(3 << 20).unwrap();
        assert_eq!(m.len(), 4 << 20);
        if pages != Pages::Small {
            assert_eq!(m.as_ptr() as usize % HUGE_PAGE, 0, "{pages}");
        }
        m.write::<u64>(m.len() - 8, 7);
        assert_eq!(m.read::<u64>(m.len() - 8), 7);
        assert_eq!(m.read::<u64>(0), 0);
    }

    #[test]
    fn smaps_anon_huge_is_read_for_the_right_mapping() {
        let text = "7f0000000000-7f0000400000 rw-p 00000000 00:00 0 \nSize:               4096 kB\nAnonHugePages:      2048 kB\n7f0000400000-7f0000600000 rw-p 00000000 00:00 0 \nAnonHugePages:      0 kB\n";
        assert_eq!(parse_anon_huge(text, 0x7f00_0000_0000), Some(2 << 20));
        assert_eq!(parse_anon_huge(text, 0x7f00_0040_0000), Some(0));
        assert_eq!(parse_anon_huge(text, 0x7f00_0080_0000), None);
    }

    #[test]
    fn anonymous_read_write_roundtrip() {
        let m = Mmap::anonymous(8192, true).unwrap();
        assert_eq!(m.len(), 8192);
        m.write::<u64>(16, 0x1122_3344_5566_7788);
        assert_eq!(m.read::<u64>(16), 0x1122_3344_5566_7788);
        assert_eq!(m.read::<u32>(16), 0x5566_7788);
        m.atomic_u32(4).store(7, Ordering::Release);
        assert_eq!(m.read::<u32>(4), 7);
        // SAFETY: no other accessor of this private mapping exists in the test.
        let s = unsafe { m.slice_mut(100, 3) };
        s.copy_from_slice(b"abc");
        // SAFETY: as above.
        assert_eq!(unsafe { m.slice(100, 3) }, b"abc");
    }

    #[test]
    fn ptr_at_bounds() {
        let m = Mmap::anonymous(4096, false).unwrap();
        assert!(m.ptr_at(4096, 0).is_some());
        assert!(m.ptr_at(4090, 6).is_some());
        assert!(m.ptr_at(4090, 7).is_none());
        assert!(m.ptr_at(usize::MAX, 2).is_none());
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn out_of_bounds_read_panics() {
        let m = Mmap::anonymous(4096, false).unwrap();
        let _ = m.read::<u32>(4094);
    }

    #[test]
    #[should_panic(expected = "misaligned")]
    fn misaligned_atomic_panics() {
        let m = Mmap::anonymous(4096, false).unwrap();
        let _ = m.atomic_u32(2);
    }

    #[test]
    fn zero_length_is_einval() {
        let e = Mmap::anonymous(0, false).unwrap_err();
        assert_eq!(e.source.raw_os_error(), Some(libc::EINVAL));
    }
}
