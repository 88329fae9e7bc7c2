//! The fenced system-call layer: every `unsafe` call into the kernel lives here or in
//! `ring/`, each with a `SAFETY:` note (docs/STYLE.md 4.6). Everything above it is safe code.
//!
//! The fence is closed from outside too: the `syscall!` helper below is not exported, so
//! no other crate can expand an `unsafe` block through it.
//!
//! ```compile_fail
//! // Fails to compile: `syscall!` is private to `sys/`.
//! let pid: ulnet_channel::Result<libc::pid_t> = ulnet_channel::syscall!("getpid", getpid());
//! ```
#![allow(unsafe_code)]

/// Calls a libc function and turns `-1` into a channel [`Error`](crate::Error) naming
/// the call (mio's `syscall!`).
///
/// The expansion contains an `unsafe` block: callers are themselves inside `sys/` and
/// must write a `// SAFETY:` comment before each use. The macro is private to `sys/`
/// (textually scoped: defined before the modules below, never exported), so no code
/// outside the fence, in this crate or another, can expand an `unsafe` block through it.
macro_rules! syscall {
    ($op:literal, $fn:ident ( $($arg:expr),* $(,)? )) => {{
        #[allow(unused_unsafe, clippy::undocumented_unsafe_blocks)]
        let res = unsafe { ::libc::$fn($($arg),*) };
        if res == -1 {
            Err($crate::Error::last_os_error($op))
        } else {
            Ok(res)
        }
    }};
}

#[cfg(target_os = "linux")]
pub mod bpf;
pub mod heap;
#[cfg(target_os = "linux")]
pub mod mmap;
#[cfg(target_os = "linux")]
pub mod mmsg;
#[cfg(target_os = "linux")]
pub mod netns;
#[cfg(target_os = "linux")]
pub mod packet;
#[cfg(target_os = "linux")]
pub mod tap;
#[cfg(target_os = "linux")]
pub mod xsk;
