//! Every system call this crate makes, in one place.
//!
//! Two kinds: raw calls (`libc::syscall`) on the descriptors ulnet owns, which must
//! never come back into the interposer (`ulnet_preload` exports `send`, `close`, ... and
//! a call through libc's symbol would find ours first); and the kernel's own socket
//! functions for descriptors that are not ulnet's, found with `dlsym(RTLD_NEXT)` so
//! that from inside the interposer they are libc's, not ours.

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The calling thread's errno.
pub fn errno() -> c_int {
    // SAFETY: __errno_location returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's errno.
pub fn set_errno(e: c_int) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = e }
}

/// The result of a raw system call: the value, or the errno it failed with.
fn check(r: libc::c_long) -> Result<libc::c_long, c_int> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

/// A connected pair of AF_UNIX datagram sockets, both close-on-exec.
pub fn socketpair_dgram() -> Result<(c_int, c_int), c_int> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` is a writable array of two ints, as socketpair(2) needs.
    check(unsafe {
        libc::syscall(
            libc::SYS_socketpair,
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    Ok((fds[0], fds[1]))
}

/// close(2).
pub fn close(fd: c_int) -> Result<(), c_int> {
    // SAFETY: closing a descriptor has no memory effects.
    check(unsafe { libc::syscall(libc::SYS_close, fd) }).map(drop)
}

/// send(2) of `buf` with `flags`.
pub fn send(fd: c_int, buf: &[u8], flags: c_int) -> Result<usize, c_int> {
    // SAFETY: `buf` is valid for reads of its length; no address is passed.
    check(unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd,
            buf.as_ptr(),
            buf.len(),
            flags,
            std::ptr::null::<c_void>(),
            0,
        )
    })
    .map(|n| n as usize)
}

/// recv(2) into `buf` with `flags`.
pub fn recv(fd: c_int, buf: &mut [u8], flags: c_int) -> Result<usize, c_int> {
    // SAFETY: `buf` is valid for writes of its length; no address is asked for.
    check(unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd,
            buf.as_mut_ptr(),
            buf.len(),
            flags,
            std::ptr::null_mut::<c_void>(),
            std::ptr::null_mut::<c_void>(),
        )
    })
    .map(|n| n as usize)
}

/// shutdown(2).
pub fn shutdown(fd: c_int, how: c_int) -> Result<(), c_int> {
    // SAFETY: no memory is passed.
    check(unsafe { libc::syscall(libc::SYS_shutdown, fd, how) }).map(drop)
}

/// setsockopt(2) with an int value.
pub fn setsockopt_int(fd: c_int, level: c_int, opt: c_int, v: c_int) -> Result<(), c_int> {
    // SAFETY: the value points at a live int of the size given.
    check(unsafe {
        libc::syscall(
            libc::SYS_setsockopt,
            fd,
            level,
            opt,
            &v as *const c_int,
            std::mem::size_of::<c_int>(),
        )
    })
    .map(drop)
}

/// fcntl(2) with an integer argument.
pub fn fcntl(fd: c_int, cmd: c_int, arg: libc::c_long) -> Result<c_int, c_int> {
    // SAFETY: the commands used here take an integer, not a pointer.
    check(unsafe { libc::syscall(libc::SYS_fcntl, fd, cmd, arg) }).map(|r| r as c_int)
}

/// dup3(2).
pub fn dup3(old: c_int, new: c_int, flags: c_int) -> Result<c_int, c_int> {
    // SAFETY: no memory is passed.
    check(unsafe { libc::syscall(libc::SYS_dup3, old, new, flags) }).map(|r| r as c_int)
}

/// Waits until `fd` has one of `events` (or an error or hang-up), up to `timeout`
/// (`None`: forever). `Ok(false)` when the time passed; `Err(EINTR)` when a signal
/// handler ran, as blocking socket calls do.
pub fn wait(fd: c_int, events: i16, timeout: Option<std::time::Duration>) -> Result<bool, c_int> {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(d.subsec_nanos() as i32),
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `p` is one live pollfd, `tsp` null or a live timespec; no signal mask.
    let n = check(unsafe {
        libc::syscall(
            libc::SYS_ppoll,
            &mut p as *mut libc::pollfd,
            1,
            tsp,
            std::ptr::null::<c_void>(),
            0,
        )
    })?;
    Ok(n > 0)
}

/// Writes `msg` to standard error in one write(2), bypassing std's locks (which a
/// signal or a fork child may not take).
pub fn stderr(msg: &str) {
    // SAFETY: `msg` is valid for reads of its length.
    unsafe {
        libc::syscall(libc::SYS_write, 2, msg.as_ptr(), msg.len());
    }
}

/// The program's name, for messages (from /proc/self/comm).
pub fn program() -> String {
    std::fs::read_to_string("/proc/self/comm")
        .map(|s| s.trim_end().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A libc function found with `dlsym(RTLD_NEXT)` once, then cached.
#[derive(Debug)]
pub struct Next {
    name: &'static CStr,
    addr: AtomicUsize,
}

impl Next {
    /// The symbol `name` (NUL-terminated).
    pub const fn new(name: &'static CStr) -> Next {
        Next {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    /// The function's address; aborts the process when libc has none (every symbol
    /// asked for here is part of glibc's ABI).
    pub fn get(&self) -> usize {
        let a = self.addr.load(Ordering::Acquire);
        if a != 0 {
            return a;
        }
        // SAFETY: `name` is NUL-terminated; RTLD_NEXT looks in the objects after this one.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) } as usize;
        if p == 0 {
            stderr(&format!("ulnet: libc has no {:?}\n", self.name));
            std::process::abort();
        }
        self.addr.store(p, Ordering::Release);
        p
    }
}

/// Declares the kernel's (libc's) version of socket functions, called as `real::name(..)`.
macro_rules! next_fns {
    ($( fn $name:ident ( $($arg:ident : $t:ty),* ) -> $ret:ty; )*) => {
        /// libc's own socket functions (`dlsym(RTLD_NEXT)`), for descriptors that are not
        /// ulnet's.
        #[allow(clippy::missing_safety_doc)]
        pub mod real {
            use super::*;
            $(
                #[doc = concat!("libc's `", stringify!($name), "`.")]
                ///
                /// # Safety
                /// As the libc function: pointers valid for what it reads and writes.
                pub unsafe fn $name($($arg: $t),*) -> $ret {
                    static F: Next = Next::new(
                        // SAFETY: the literal ends with the NUL it needs.
                        unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) }
                    );
                    // SAFETY: the address is libc's function of this exact C signature.
                    let f: unsafe extern "C" fn($($t),*) -> $ret = unsafe { std::mem::transmute(F.get()) };
                    // SAFETY: the caller upholds the function's contract.
                    unsafe { f($($arg),*) }
                }
            )*
        }
    };
}

use libc::{iovec, msghdr, size_t, sockaddr, socklen_t, ssize_t};

next_fns! {
    fn socket(domain: c_int, ty: c_int, proto: c_int) -> c_int;
    fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    fn listen(fd: c_int, backlog: c_int) -> c_int;
    fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int;
    fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t;
    fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t;
    fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
    fn writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
    fn sendto(fd: c_int, buf: *const c_void, n: size_t, flags: c_int, addr: *const sockaddr, len: socklen_t) -> ssize_t;
    fn recvfrom(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> ssize_t;
    fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t;
    fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t;
    fn sendmmsg(fd: c_int, msg: *mut libc::mmsghdr, n: libc::c_uint, flags: c_int) -> c_int;
    fn recvmmsg(fd: c_int, msg: *mut libc::mmsghdr, n: libc::c_uint, flags: c_int, t: *mut libc::timespec) -> c_int;
    fn shutdown(fd: c_int, how: c_int) -> c_int;
    fn close(fd: c_int) -> c_int;
    fn dup(fd: c_int) -> c_int;
    fn dup2(old: c_int, new: c_int) -> c_int;
    fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int;
    fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    fn setsockopt(fd: c_int, level: c_int, opt: c_int, v: *const c_void, len: socklen_t) -> c_int;
    fn getsockopt(fd: c_int, level: c_int, opt: c_int, v: *mut c_void, len: *mut socklen_t) -> c_int;
    fn fcntl(fd: c_int, cmd: c_int, arg: libc::c_ulong) -> c_int;
    fn ioctl(fd: c_int, req: libc::c_ulong, arg: libc::c_ulong) -> c_int;
    fn sendfile(out: c_int, inp: c_int, off: *mut libc::off_t, n: size_t) -> ssize_t;
    fn poll(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int) -> c_int;
    fn select(n: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, e: *mut libc::fd_set, t: *mut libc::timeval) -> c_int;
    fn epoll_create1(flags: c_int) -> c_int;
    fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut libc::epoll_event) -> c_int;
    fn epoll_wait(epfd: c_int, evs: *mut libc::epoll_event, n: c_int, timeout: c_int) -> c_int;
    fn epoll_pwait(epfd: c_int, evs: *mut libc::epoll_event, n: c_int, timeout: c_int, mask: *const libc::sigset_t) -> c_int;
}
