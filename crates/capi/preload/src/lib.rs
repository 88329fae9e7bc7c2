//! libulnet_preload: loaded with LD_PRELOAD (`ulnet run -- PROGRAM`), it puts the
//! program's Internet sockets on ulnet without changing the program.
//!
//! It exports the libc socket functions. Each decides per descriptor: a ulnet socket
//! is served by libulnet's code (`ulnet::api`); any other descriptor goes to libc's
//! function (`dlsym(RTLD_NEXT)`) untouched, at the cost of one atomic load. An
//! AF_INET/AF_INET6 stream or datagram socket starts as a kernel socket and is moved to
//! ulnet (its descriptor number kept) when the program binds it to ulnet's address or
//! the wildcard, listens on it unbound, or connects or sends to an address ulnet
//! serves: its subnet, or with a gateway (`ULNET_GATEWAY`) or `ULNET_SOCKETS=all`
//! every non-loopback IPv4 address. Loopback, IPv6-only destinations, Unix, netlink
//! and packet sockets stay with the kernel. The stack starts at the first such move.
//!
//! Settings come from the environment `ulnet run` sets: `ULNET_BACKEND`,
//! `ULNET_IFACE`, `ULNET_ADDR`, `ULNET_NETNS`, `ULNET_GATEWAY`, `ULNET_BUSY_POLL`,
//! `ULNET_SOCKETS` (`auto` or `all`). See docs/capi.md for what is supported.
#![allow(unsafe_code)]
#![deny(missing_docs)]

use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_ulong, c_void};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use libc::{iovec, msghdr, size_t, sockaddr, socklen_t, ssize_t};
use ulnet::global::{self, KIND_NONE, KIND_PENDING, KIND_ULNET};
use ulnet::sys::{self, real};
use ulnet::{addr, api};

/// A kernel socket that may still move to ulnet.
#[derive(Debug)]
struct Pending {
    domain: c_int,
    ty: c_int,
    proto: c_int,
    /// Options set so far, replayed onto the ulnet socket.
    opts: Vec<(c_int, c_int, Vec<u8>)>,
}

static PENDING: Mutex<Option<HashMap<c_int, Pending>>> = Mutex::new(None);

fn pending() -> MutexGuard<'static, Option<HashMap<c_int, Pending>>> {
    PENDING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the environment says ulnet serves.
#[derive(Debug)]
struct Serves {
    /// The stack's address and prefix length.
    addr: Option<(IpAddr, u8)>,
    /// Every non-loopback IPv4 destination (a gateway, or `ULNET_SOCKETS=all`).
    all: bool,
}

fn serves() -> &'static Serves {
    static S: OnceLock<Serves> = OnceLock::new();
    S.get_or_init(|| {
        let addr = std::env::var("ULNET_ADDR").ok().and_then(|a| {
            let (ip, p) = a.split_once('/')?;
            Some((ip.parse().ok()?, p.parse().ok()?))
        });
        let all = std::env::var("ULNET_SOCKETS").is_ok_and(|v| v == "all")
            || std::env::var_os("ULNET_GATEWAY").is_some();
        Serves { addr, all }
    })
}

fn same_subnet(a: IpAddr, (b, prefix): (IpAddr, u8)) -> bool {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(prefix.min(32)))
                .unwrap_or(0);
            u32::from(a) & mask == u32::from(b) & mask
        }
        _ => false,
    }
}

/// Whether a socket bound to (`bind`) or talking to `a` belongs on ulnet.
fn for_ulnet(a: SocketAddr, bind: bool) -> bool {
    let a = addr::unmap(a);
    let ip = a.ip();
    if !ip.is_ipv4() || ip.is_loopback() || ip.is_multicast() {
        return false;
    }
    let s = serves();
    if bind {
        return ip.is_unspecified() || s.addr.is_some_and(|(x, _)| x == ip);
    }
    !ip.is_unspecified() && (s.all || s.addr.is_some_and(|n| same_subnet(ip, n)))
}

/// Moves pending socket `fd` to ulnet, starting the stack if needed.
fn adopt(fd: c_int) -> Result<(), c_int> {
    let Some(p) = pending().as_mut().and_then(|m| m.remove(&fd)) else {
        return Ok(());
    };
    let done = global::stack_or_init(|| {
        // SAFETY: a null config: every setting from the environment.
        unsafe { api::build(std::ptr::null()) }
    })
    .and_then(|stack| api::adopt_number(&stack, p.domain, p.ty, p.proto, fd));
    match done {
        Ok(s) => {
            for (level, opt, v) in &p.opts {
                // SAFETY: `v` holds the bytes the program passed.
                let _ = unsafe {
                    ulnet::opts::set(&s, *level, *opt, v.as_ptr().cast(), v.len() as socklen_t)
                };
            }
            Ok(())
        }
        Err(e) => {
            global::set_kind(fd, KIND_NONE);
            Err(e)
        }
    }
}

/// The kernel keeps `fd`.
fn keep_kernel(fd: c_int) {
    if let Some(m) = pending().as_mut() {
        m.remove(&fd);
    }
    global::set_kind(fd, KIND_NONE);
}

fn fail<T: From<i8>>(e: c_int) -> T {
    sys::set_errno(e);
    T::from(-1)
}

/// socket(2): Internet stream and datagram sockets are made by the kernel and marked
/// pending (see the crate's doc); everything else is the kernel's.
#[no_mangle]
pub extern "C" fn socket(domain: c_int, ty: c_int, proto: c_int) -> c_int {
    // SAFETY: no pointers.
    let fd = unsafe { real::socket(domain, ty, proto) };
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let inet = domain == libc::AF_INET || domain == libc::AF_INET6;
    let kind = (base == libc::SOCK_STREAM && matches!(proto, 0 | libc::IPPROTO_TCP))
        || (base == libc::SOCK_DGRAM && matches!(proto, 0 | libc::IPPROTO_UDP));
    if fd >= 0 && inet && kind && (fd as usize) < global::FD_LIMIT {
        pending().get_or_insert_with(HashMap::new).insert(
            fd,
            Pending {
                domain,
                ty,
                proto,
                opts: Vec::new(),
            },
        );
        global::set_kind(fd, KIND_PENDING);
    }
    fd
}

/// bind(2).
///
/// # Safety
/// As bind(2).
#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, a: *const sockaddr, len: socklen_t) -> c_int {
    if global::kind(fd) == KIND_PENDING {
        // SAFETY: the caller's contract.
        match unsafe { addr::read(a, len) } {
            Ok(sa) if for_ulnet(sa, true) => {
                if let Err(e) = adopt(fd) {
                    return fail(e);
                }
            }
            _ => keep_kernel(fd),
        }
    }
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_bind(fd, a, len) }
}

/// listen(2): an unbound pending socket listens on ulnet (the wildcard address).
#[no_mangle]
pub extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    if global::kind(fd) == KIND_PENDING {
        if let Err(e) = adopt(fd) {
            return fail(e);
        }
    }
    api::ulnet_listen(fd, backlog)
}

/// connect(2).
///
/// # Safety
/// As connect(2).
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, a: *const sockaddr, len: socklen_t) -> c_int {
    if global::kind(fd) == KIND_PENDING {
        // SAFETY: the caller's contract.
        match unsafe { addr::read(a, len) } {
            Ok(sa) if for_ulnet(sa, false) => {
                if let Err(e) = adopt(fd) {
                    return fail(e);
                }
            }
            _ => keep_kernel(fd),
        }
    }
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_connect(fd, a, len) }
}

/// Moves a pending datagram socket to ulnet when its first datagram goes where ulnet
/// serves.
///
/// # Safety
/// `a` null or valid for reads of `len` bytes.
unsafe fn first_send(fd: c_int, a: *const sockaddr, len: socklen_t) -> Result<(), c_int> {
    if global::kind(fd) != KIND_PENDING || a.is_null() {
        return Ok(());
    }
    // SAFETY: the caller's contract.
    match unsafe { addr::read(a, len) } {
        Ok(sa) if for_ulnet(sa, false) => adopt(fd),
        _ => {
            keep_kernel(fd);
            Ok(())
        }
    }
}

/// accept(2).
///
/// # Safety
/// As accept(2).
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, a: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_accept4(fd, a, len, 0) }
}

/// accept4(2).
///
/// # Safety
/// As accept4(2).
#[no_mangle]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    a: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_accept4(fd, a, len, flags) }
}

/// read(2).
///
/// # Safety
/// As read(2).
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_read(fd, buf, n) }
}

extern "C" {
    fn __chk_fail() -> !;
}

/// glibc's fortified read (`_FORTIFY_SOURCE`).
///
/// # Safety
/// As read(2); `buflen` is the size of `buf`.
#[no_mangle]
pub unsafe extern "C" fn __read_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
) -> ssize_t {
    if n > buflen {
        // SAFETY: glibc's report of a buffer overflow; it does not return.
        unsafe { __chk_fail() }
    }
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_read(fd, buf, n) }
}

/// write(2).
///
/// # Safety
/// As write(2).
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_write(fd, buf, n) }
}

/// readv(2).
///
/// # Safety
/// As readv(2).
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_readv(fd, iov, n) }
}

/// writev(2).
///
/// # Safety
/// As writev(2).
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_writev(fd, iov, n) }
}

/// recv(2).
///
/// # Safety
/// As recv(2).
#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_recv(fd, buf, n, flags) }
}

/// glibc's fortified recv.
///
/// # Safety
/// As recv(2); `buflen` is the size of `buf`.
#[no_mangle]
pub unsafe extern "C" fn __recv_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
) -> ssize_t {
    if n > buflen {
        // SAFETY: glibc's report of a buffer overflow; it does not return.
        unsafe { __chk_fail() }
    }
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_recv(fd, buf, n, flags) }
}

/// recvfrom(2).
///
/// # Safety
/// As recvfrom(2).
#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    a: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_recvfrom(fd, buf, n, flags, a, len) }
}

/// glibc's fortified recvfrom.
///
/// # Safety
/// As recvfrom(2); `buflen` is the size of `buf`.
#[no_mangle]
pub unsafe extern "C" fn __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
    a: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    if n > buflen {
        // SAFETY: glibc's report of a buffer overflow; it does not return.
        unsafe { __chk_fail() }
    }
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_recvfrom(fd, buf, n, flags, a, len) }
}

/// send(2).
///
/// # Safety
/// As send(2).
#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_send(fd, buf, n, flags) }
}

/// sendto(2).
///
/// # Safety
/// As sendto(2).
#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    a: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    // SAFETY: the caller's contract.
    if let Err(e) = unsafe { first_send(fd, a, len) } {
        return fail(e);
    }
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_sendto(fd, buf, n, flags, a, len) }
}

/// sendmsg(2).
///
/// # Safety
/// As sendmsg(2).
#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    if !msg.is_null() {
        // SAFETY: the caller's contract.
        let m = unsafe { &*msg };
        // SAFETY: the caller's contract.
        if let Err(e) = unsafe { first_send(fd, m.msg_name.cast(), m.msg_namelen) } {
            return fail(e);
        }
    }
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_sendmsg(fd, msg, flags) }
}

/// recvmsg(2).
///
/// # Safety
/// As recvmsg(2).
#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_recvmsg(fd, msg, flags) }
}

/// sendmmsg(2).
///
/// # Safety
/// As sendmmsg(2).
#[no_mangle]
pub unsafe extern "C" fn sendmmsg(
    fd: c_int,
    msgs: *mut libc::mmsghdr,
    n: c_uint,
    flags: c_int,
) -> c_int {
    if !msgs.is_null() && n > 0 {
        // SAFETY: the caller's contract.
        let m = unsafe { &(*msgs).msg_hdr };
        // SAFETY: the caller's contract.
        if let Err(e) = unsafe { first_send(fd, m.msg_name.cast(), m.msg_namelen) } {
            return fail(e);
        }
    }
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_sendmmsg(fd, msgs, n, flags) }
}

/// recvmmsg(2).
///
/// # Safety
/// As recvmmsg(2).
#[no_mangle]
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    msgs: *mut libc::mmsghdr,
    n: c_uint,
    flags: c_int,
    t: *mut libc::timespec,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_recvmmsg(fd, msgs, n, flags, t) }
}

/// shutdown(2).
#[no_mangle]
pub extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    api::ulnet_shutdown(fd, how)
}

/// close(2).
#[no_mangle]
pub extern "C" fn close(fd: c_int) -> c_int {
    if global::kind(fd) == KIND_PENDING {
        keep_kernel(fd);
    }
    api::ulnet_close(fd)
}

/// close_range(2): ulnet descriptors in the range are closed as by close(2) first.
#[no_mangle]
pub extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    if flags & libc::CLOSE_RANGE_CLOEXEC as c_int == 0 {
        let end = (last as usize).min(global::FD_LIMIT - 1);
        for fd in first as usize..=end {
            let fd = fd as c_int;
            match global::kind(fd) {
                KIND_ULNET => {
                    api::ulnet_close(fd);
                }
                KIND_PENDING => keep_kernel(fd),
                _ => {}
            }
        }
    }
    // SAFETY: no pointers.
    let r = unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) };
    if r < 0 {
        -1
    } else {
        0
    }
}

/// dup(2).
#[no_mangle]
pub extern "C" fn dup(fd: c_int) -> c_int {
    api::ulnet_dup(fd)
}

/// dup2(2).
#[no_mangle]
pub extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if global::kind(new) == KIND_PENDING && old != new {
        keep_kernel(new);
    }
    api::ulnet_dup2(old, new)
}

/// dup3(2).
#[no_mangle]
pub extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if global::kind(new) == KIND_PENDING && old != new {
        keep_kernel(new);
    }
    api::ulnet_dup3(old, new, flags)
}

/// fcntl(2). Its third argument is variadic in C; on the System V x86-64 and AArch64
/// Linux ABIs an integer or pointer there travels in the same register as a declared
/// one, so it is read as an unsigned long and passed on unchanged.
#[no_mangle]
pub extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    api::ulnet_fcntl(fd, cmd, arg)
}

/// fcntl64: glibc's name for fcntl in programs built with 64-bit file offsets.
#[no_mangle]
pub extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    api::ulnet_fcntl(fd, cmd, arg)
}

/// ioctl(2) (variadic third argument as for `fcntl`).
///
/// # Safety
/// As ioctl(2).
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_ioctl(fd, req, arg) }
}

/// getsockname(2).
///
/// # Safety
/// As getsockname(2).
#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, a: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_getsockname(fd, a, len) }
}

/// getpeername(2).
///
/// # Safety
/// As getpeername(2).
#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, a: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_getpeername(fd, a, len) }
}

/// setsockopt(2): on a pending socket, set on the kernel socket and kept to be set
/// again on the ulnet socket if it moves.
///
/// # Safety
/// As setsockopt(2).
#[no_mangle]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    opt: c_int,
    v: *const c_void,
    len: socklen_t,
) -> c_int {
    if global::kind(fd) == KIND_PENDING && !v.is_null() {
        // SAFETY: the caller's contract: `v` is readable for `len` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(v.cast::<u8>(), len as usize) }.to_vec();
        if let Some(p) = pending().as_mut().and_then(|m| m.get_mut(&fd)) {
            p.opts.push((level, opt, bytes));
        }
    }
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_setsockopt(fd, level, opt, v, len) }
}

/// getsockopt(2).
///
/// # Safety
/// As getsockopt(2).
#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    opt: c_int,
    v: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_getsockopt(fd, level, opt, v, len) }
}

/// sendfile(2).
///
/// # Safety
/// As sendfile(2).
#[no_mangle]
pub unsafe extern "C" fn sendfile(
    out: c_int,
    inp: c_int,
    off: *mut libc::off_t,
    n: size_t,
) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_sendfile(out, inp, off, n) }
}

/// sendfile64: the same on 64-bit Linux.
///
/// # Safety
/// As sendfile(2).
#[no_mangle]
pub unsafe extern "C" fn sendfile64(
    out: c_int,
    inp: c_int,
    off: *mut libc::off_t,
    n: size_t,
) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { api::ulnet_sendfile(out, inp, off, n) }
}
