//! The UMEM: one memory region cut into equal frames that the program and the kernel
//! hand back and forth through the rings.
//!
//! Ownership is explicit. Every frame has exactly one [`Frame`] token (not `Clone`)
//! while the program owns it; [`Umem::lend`] gives the token up and returns the address
//! to put on a ring, and [`Umem::reclaim`] turns an address the kernel handed back into
//! a token again, but only if that frame is really on loan (a bitmap records which
//! frames the kernel holds). So safe code can only touch a frame's bytes through its
//! token, never while the kernel may be writing or reading it, and a bogus or repeated
//! address from the kernel is refused rather than creating a second token. The bitmap
//! costs one relaxed atomic operation per frame movement and allocates nothing after
//! construction.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::sys::mmap::{Mmap, Pages};
use crate::{Error, Result};

static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// Exclusive ownership of one UMEM frame.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame {
    umem: u32,
    index: u32,
}

impl Frame {
    /// The frame's number in its UMEM.
    pub fn index(&self) -> u32 {
        self.index
    }
}

/// A registered-with-the-kernel memory region of `count` frames of `size` bytes.
#[derive(Debug)]
pub struct Umem {
    map: Mmap,
    id: u32,
    frame_size: u32,
    frame_count: u32,
    /// Bit `i` set: frame `i` is on loan to the kernel.
    lent: Box<[AtomicU64]>,
    /// Which pages back the region.
    pages: Pages,
}

impl Umem {
    /// Maps `frame_count * frame_size` bytes (pre-faulted, in 2 MiB pages where the
    /// system has them: [`Mmap::anonymous_huge`]) and returns the UMEM with a
    /// token for every frame.
    ///
    /// # Errors
    /// `EINVAL` unless `frame_size` is a power of two ≥ 2048 and `frame_count ≥ 1`;
    /// `mmap(anonymous)` when the memory is not available.
    pub fn new(frame_count: u32, frame_size: u32) -> Result<(Self, Vec<Frame>)> {
        if !frame_size.is_power_of_two() || frame_size < 2048 || frame_count == 0 {
            return Err(Error::new("UMEM layout", std::io::Error::from_raw_os_error(libc::EINVAL))
                .with_hint("frame size must be a power of two from 2048 to the page size, and at least one frame"));
        }
        let len = (frame_count as usize)
            .checked_mul(frame_size as usize)
            .ok_or_else(|| {
                Error::new(
                    "UMEM layout",
                    std::io::Error::from_raw_os_error(libc::EINVAL),
                )
            })?;
        let (map, pages) = Mmap::anonymous_huge(len)?;
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let lent = (0..frame_count.div_ceil(64))
            .map(|_| AtomicU64::new(0))
            .collect();
        let frames = (0..frame_count)
            .map(|index| Frame { umem: id, index })
            .collect();
        Ok((
            Umem {
                map,
                id,
                frame_size,
                frame_count,
                lent,
                pages,
            },
            frames,
        ))
    }

    /// Start of the region, for `XDP_UMEM_REG`.
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.as_ptr()
    }

    /// Length of the region in bytes.
    pub fn len(&self) -> usize {
        // The mapping may be longer (rounded up to a huge page); the frames end here.
        self.frame_count as usize * self.frame_size as usize
    }

    /// Always false: a UMEM has at least one frame.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Which pages back the region (huge pages where the system has them).
    pub fn pages(&self) -> Pages {
        self.pages
    }

    /// Bytes per frame.
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// Number of frames.
    pub fn frame_count(&self) -> u32 {
        self.frame_count
    }

    fn check(&self, f: &Frame) {
        assert_eq!(f.umem, self.id, "frame token from another UMEM");
    }

    /// Lends `frame` to the kernel: returns its address (start of the frame) to put on
    /// the fill or tx ring. The caller must put it on a ring (check for room first),
    /// or the frame is lost until the channel is dropped.
    ///
    /// # Panics
    /// If `frame` belongs to another UMEM.
    pub fn lend(&self, frame: Frame) -> u64 {
        self.check(&frame);
        let (w, b) = (frame.index as usize / 64, frame.index % 64);
        self.lent[w].fetch_or(1 << b, Ordering::Relaxed);
        u64::from(frame.index) * u64::from(self.frame_size)
    }

    /// Takes back the frame containing `addr`, which the kernel returned on the rx or
    /// completion ring. Returns the token and `addr`'s offset inside the frame, or
    /// `None` when `addr` is outside the UMEM or its frame is not on loan (a kernel
    /// bug; the caller drops and counts).
    pub fn reclaim(&self, addr: u64) -> Option<(Frame, u32)> {
        let index = u32::try_from(addr / u64::from(self.frame_size)).ok()?;
        if index >= self.frame_count {
            return None;
        }
        let offset = (addr % u64::from(self.frame_size)) as u32;
        let (w, b) = (index as usize / 64, index % 64);
        let was = self.lent[w].fetch_and(!(1 << b), Ordering::Relaxed);
        if was & (1 << b) == 0 {
            return None;
        }
        Some((
            Frame {
                umem: self.id,
                index,
            },
            offset,
        ))
    }

    /// Asks the CPU to start loading `len` bytes at `addr` (an address the kernel put on
    /// the rx ring, not yet reclaimed) into its cache, so the next frame's payload is on
    /// its way while this one is processed. A hint only: it reads nothing the program can
    /// see, never faults, and an address outside the UMEM is ignored.
    ///
    /// Why: on veth the peer's core copies each frame into the UMEM, so the receiving
    /// core's first touch of the payload (the checksum) misses all the way to the other
    /// core's cache, line after line (docs/performance-log.md, "Session 11").
    #[inline]
    pub fn prefetch(&self, addr: u64, len: u32) {
        #[cfg(target_arch = "x86_64")]
        {
            let Ok(start) = usize::try_from(addr) else {
                return;
            };
            let end = start.saturating_add(len as usize).min(self.len());
            let base = self.map.as_ptr();
            let mut off = start & !63;
            while off < end {
                // SAFETY: `off` is inside the mapping (`off < end <= len`); a prefetch
                // is a hint that neither reads into the program nor faults, so it is
                // sound even while the kernel owns the frame.
                unsafe {
                    core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                        base.add(off).cast_const().cast(),
                    );
                }
                off += 64;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (addr, len);
    }

    /// The frame's bytes, readable while the token is borrowed.
    ///
    /// # Panics
    /// If `frame` belongs to another UMEM.
    pub fn bytes(&self, frame: &Frame) -> &[u8] {
        self.check(frame);
        let off = frame.index as usize * self.frame_size as usize;
        // SAFETY: the token is unique (never cloned, created once per frame, recreated
        // by `reclaim` only after the frame's lent bit was cleared, i.e. from a frame the
        // kernel had and has given back), so while it is borrowed no `&mut` to this frame
        // exists and the kernel does not own it. The range is inside the map because
        // `index < frame_count`.
        unsafe { self.map.slice(off, self.frame_size as usize) }
    }

    /// The frame's bytes, writable while the token is mutably borrowed.
    ///
    /// # Panics
    /// If `frame` belongs to another UMEM.
    #[allow(clippy::mut_from_ref)]
    pub fn bytes_mut(&self, frame: &mut Frame) -> &mut [u8] {
        self.check(frame);
        let off = frame.index as usize * self.frame_size as usize;
        // SAFETY: as in `bytes`, and the token is mutably borrowed, so this is the only
        // reference to the frame; frames do not overlap.
        unsafe { self.map.slice_mut(off, self.frame_size as usize) }
    }
    /// The bytes of consecutive frames as one slice, writable while their tokens are
    /// mutably borrowed: a frame larger than one UMEM frame can then be written in place
    /// and sent as one descriptor per frame (multi-buffer transmit), without a copy
    /// through a scratch buffer. `None` unless the tokens are in ascending order with
    /// consecutive indices.
    ///
    /// # Panics
    /// If a frame belongs to another UMEM.
    #[allow(clippy::mut_from_ref)]
    pub fn run_mut(&self, frames: &mut [Frame]) -> Option<&mut [u8]> {
        let first = frames.first()?.index;
        for (i, f) in frames.iter().enumerate() {
            self.check(f);
            if f.index != first.checked_add(i as u32)? {
                return None;
            }
        }
        let fs = self.frame_size as usize;
        let off = first as usize * fs;
        // SAFETY: every token of the run is mutably borrowed (see `bytes_mut`), the
        // indices are consecutive, so the byte range is exactly those frames' bytes and
        // no other reference to any of them exists; the last index is below
        // `frame_count`, so the range is inside the map.
        Some(unsafe { self.map.slice_mut(off, fs * frames.len()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_consecutive_frames_are_one_slice() {
        let (u, mut frames) = Umem::new(8, 2048).unwrap();
        let run = u.run_mut(&mut frames[2..5]).unwrap();
        assert_eq!(run.len(), 3 * 2048);
        run[2048] = 7;
        assert_eq!(u.bytes(&frames[3])[0], 7);
        frames.swap(2, 3);
        assert!(u.run_mut(&mut frames[2..5]).is_none(), "out of order");
        assert!(u.run_mut(&mut []).is_none());
    }

    #[test]
    fn prefetch_is_only_a_hint() {
        let (u, frames) = Umem::new(4, 2048).unwrap();
        // Inside, straddling the end, past it and at the largest addresses: nothing
        // happens, nothing faults, no frame changes hands.
        u.prefetch(256, 1514);
        u.prefetch(3 * 2048 + 2000, 4096);
        u.prefetch(4 * 2048, 64);
        u.prefetch(u64::MAX - 10, u32::MAX);
        assert!(frames.iter().all(|f| u.bytes(f).iter().all(|&b| b == 0)));
        assert!(u.reclaim(0).is_none(), "a prefetch lends nothing");
    }

    #[test]
    fn lend_and_reclaim() {
        let (u, mut frames) = Umem::new(4, 2048).unwrap();
        assert_eq!(frames.len(), 4);
        let mut f = frames.pop().unwrap();
        assert_eq!(f.index(), 3);
        u.bytes_mut(&mut f)[..3].copy_from_slice(b"abc");
        let addr = u.lend(f);
        assert_eq!(addr, 3 * 2048);
        // The kernel hands it back with the data 256 bytes in.
        let (f, off) = u.reclaim(addr + 256).unwrap();
        assert_eq!((f.index(), off), (3, 256));
        assert_eq!(&u.bytes(&f)[..3], b"abc");
    }

    #[test]
    fn refuses_addresses_not_on_loan() {
        let (u, mut frames) = Umem::new(130, 2048).unwrap();
        assert!(u.reclaim(0).is_none(), "never lent");
        assert!(u.reclaim(130 * 2048).is_none(), "past the end");
        assert!(u.reclaim(u64::MAX).is_none());
        let f = frames.pop().unwrap();
        let addr = u.lend(f);
        assert!(u.reclaim(addr).is_some());
        assert!(u.reclaim(addr).is_none(), "returned twice");
    }

    #[test]
    fn bad_layouts_are_refused() {
        assert!(Umem::new(4, 3000).is_err());
        assert!(Umem::new(4, 1024).is_err());
        assert!(Umem::new(0, 4096).is_err());
    }

    #[test]
    #[should_panic(expected = "another UMEM")]
    fn foreign_tokens_panic() {
        let (a, _) = Umem::new(1, 2048).unwrap();
        let (_b, mut fb) = Umem::new(1, 2048).unwrap();
        let _ = a.bytes(&fb.pop().unwrap());
    }
}
