//! The process heap: giving freed memory back to the system.
//!
//! glibc's allocator keeps freed small blocks in its arenas; a heap that once held
//! 400 MB of TCP buffers stays 400 MB resident after they are freed unless asked to
//! trim (measured in docs/memory.md). `malloc_trim` returns every whole free page of
//! every arena (it `madvise`s the middle of the heap too, not only its top).
//!
//! Not the top of a thread's arena, though: `malloc_trim` shrinks only the main arena's
//! top, and a thread arena's top is given back only when a free leaves it larger than
//! the trim threshold, which glibc raises to twice the largest mmapped block freed so far
//! (up to 64 MiB). After a connection table of a few MiB was reallocated once, the
//! runtime thread's arena kept ~7 MiB of freed top resident for good (`ulnet bench
//! attack`: RSS 1.20-1.24x its start after 20,000 idle connections closed, measured from
//! /proc/self/smaps and `malloc_info`). [`bound_retention`] fixes the thresholds.

/// What a thread arena may keep of freed memory at its top, and the size from which a
/// block gets its own mapping (returned to the system when freed): [`bound_retention`].
pub const RETENTION: usize = 1 << 20;

/// Fixes glibc's trim and mmap thresholds at [`RETENTION`] (`mallopt`), which turns off
/// their dynamic growth: the top of any arena then holds at most that much freed memory,
/// and blocks from 1 MiB up are mapped on their own and unmapped when freed. Process-wide;
/// it changes only how much freed memory the allocator keeps, never what a program may
/// allocate. True when both were set; elsewhere than glibc it does nothing and returns
/// false.
pub fn bound_retention() -> bool {
    #[cfg(target_env = "gnu")]
    {
        // 1 MiB fits in a c_int on every target.
        #[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
        let v = RETENTION as libc::c_int;
        // SAFETY: mallopt takes no pointers and may be called at any time from any
        // thread (it takes the main arena's lock itself).
        unsafe {
            libc::mallopt(libc::M_TRIM_THRESHOLD, v) == 1
                && libc::mallopt(libc::M_MMAP_THRESHOLD, v) == 1
        }
    }
    #[cfg(not(target_env = "gnu"))]
    {
        false
    }
}

/// Returns whole free pages of the heap to the system; true when some were released.
/// Elsewhere than glibc it does nothing and returns false.
#[must_use]
pub fn trim() -> bool {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: malloc_trim takes no pointers and may be called at any time from any
        // thread (it takes the arenas' locks itself).
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(target_env = "gnu"))]
    {
        false
    }
}
