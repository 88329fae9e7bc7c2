//! Entering a named network namespace (`ip netns add NAME`) for the calling thread.
//!
//! A network namespace is a per-thread attribute in Linux (`setns(2)` with
//! `CLONE_NEWNET` is allowed in multithreaded processes), so entering one affects only
//! the calling thread. Sockets, interface indexes and XDP attachments made while inside
//! belong to that namespace and keep working after the thread leaves it: a channel can
//! be opened inside a namespace and then used from anywhere.
//!
//! [`enter`] returns a [`NetnsGuard`] that puts the thread back into its original
//! namespace when dropped; the guard is `!Send` because it must be dropped on the thread
//! that entered.

use std::ffi::CString;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use crate::{Error, Result};

/// Where `ip netns add` puts the namespace handles.
pub const NETNS_RUN_DIR: &str = "/var/run/netns";

/// Puts the calling thread back into the network namespace it was in before
/// [`enter`], on drop.
#[derive(Debug)]
pub struct NetnsGuard {
    original: OwnedFd,
    /// `!Send`/`!Sync`: namespaces are per thread.
    _not_send: PhantomData<*const ()>,
}

fn open_ro(op: &'static str, path: &Path) -> Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::invalid(op))?;
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    let fd = syscall!(
        "open(netns)",
        open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC)
    )
    .map_err(|e| Error { op, ..e })?;
    // SAFETY: `open` returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setns(fd: &OwnedFd) -> Result<()> {
    // SAFETY: `fd` is an open namespace descriptor; setns only changes this thread's
    // namespace membership.
    syscall!(
        "setns(CLONE_NEWNET)",
        setns(fd.as_raw_fd(), libc::CLONE_NEWNET)
    )?;
    Ok(())
}

/// Moves the calling thread into the network namespace `name` (as created by
/// `ip netns add NAME`, i.e. `/var/run/netns/NAME`).
///
/// # Errors
/// - `netns name` (`EINVAL`) when `name` is empty, `.`/`..` or contains `/` or NUL;
/// - `open(netns)` (`ENOENT`) when no such namespace exists, with a hint;
/// - `setns(CLONE_NEWNET)` (`EPERM`) without `CAP_SYS_ADMIN`, with a hint.
pub fn enter(name: &str) -> Result<NetnsGuard> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(Error::invalid("netns name")
            .with_hint("a namespace name is a single path component, as in `ip netns add NAME`"));
    }
    enter_path(&Path::new(NETNS_RUN_DIR).join(name))
}

/// Moves the calling thread into the network namespace whose handle is at `path` (e.g.
/// `/proc/PID/ns/net` or a bind mount under `/var/run/netns`).
///
/// # Errors
/// As [`enter`].
pub fn enter_path(path: &Path) -> Result<NetnsGuard> {
    let original = open_ro(
        "open(/proc/thread-self/ns/net)",
        Path::new("/proc/thread-self/ns/net"),
    )?;
    let target = open_ro("open(netns)", path).map_err(|e| {
        if e.source.raw_os_error() == Some(libc::ENOENT) {
            e.with_hint("no such network namespace; create it with `ip netns add NAME`")
        } else {
            e
        }
    })?;
    setns(&target).map_err(|e| {
        if e.source.raw_os_error() == Some(libc::EPERM) {
            e.with_hint("entering a network namespace needs root or CAP_SYS_ADMIN")
        } else {
            e
        }
    })?;
    Ok(NetnsGuard {
        original,
        _not_send: PhantomData,
    })
}

/// Runs `f` on a new thread that has entered the namespace `name`, and returns its
/// result. The calling thread's namespace is untouched.
///
/// # Errors
/// As [`enter`].
///
/// # Panics
/// Re-raises a panic from `f`.
pub fn run_in<T, F>(name: &str, f: F) -> Result<T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    std::thread::scope(|s| {
        let handle = s.spawn(|| {
            let _guard = enter(name)?;
            Ok(f())
        });
        match handle.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // Returning to a namespace we were already in cannot fail for lack of privilege
        // (we held it a moment ago); if it fails anyway the thread stays where it is,
        // which a caller notices at its next socket call. Nothing better to do in drop.
        let _ = setns(&self.original);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_names() {
        for name in ["", ".", "..", "a/b", "x\0y"] {
            let e = enter(name).unwrap_err();
            assert_eq!(e.source.raw_os_error(), Some(libc::EINVAL), "{name:?}");
        }
    }

    #[test]
    fn missing_namespace_names_the_cause() {
        let e = enter("ulnet-no-such-namespace-for-sure").unwrap_err();
        assert_eq!(e.source.raw_os_error(), Some(libc::ENOENT));
        assert!(e.to_string().contains("ip netns add"), "{e}");
    }

    #[test]
    fn enter_own_namespace_and_return() {
        // Entering the namespace we are already in exercises the whole path without
        // needing a second namespace.
        let before = std::fs::read_link("/proc/thread-self/ns/net").unwrap();
        let r = std::thread::spawn(|| {
            let g = enter_path(Path::new("/proc/self/ns/net")).unwrap();
            let inside = std::fs::read_link("/proc/thread-self/ns/net").unwrap();
            drop(g);
            inside
        })
        .join()
        .unwrap();
        assert_eq!(before, r);
    }
}
