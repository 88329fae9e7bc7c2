//! The process heap: giving freed memory back to the system.
//!
//! glibc's allocator keeps freed small blocks in its arenas; a heap that once held
//! 400 MB of TCP buffers stays 400 MB resident after they are freed unless asked to
//! trim (measured in docs/memory.md). `malloc_trim` returns every whole free page of
//! every arena (it `madvise`s the middle of the heap too, not only its top).

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
