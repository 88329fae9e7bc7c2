//! The C ABI: `ulnet_*` functions with the signatures and errno rules of the libc
//! functions they are named after. A descriptor that is not a ulnet socket is passed to
//! the kernel's function, so a program may call these for every descriptor it has.
//! `poll`, `select` and `epoll_*` are the kernel's own: ulnet descriptors are real ones
//! whose readiness follows the ulnet socket's (`mirror.rs`).

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void, CStr};
use std::net::SocketAddr;
use std::sync::Arc;

use libc::{iovec, msghdr, size_t, sockaddr, socklen_t, ssize_t};
use ulnet_core::net::Stack;
use ulnet_core::runtime::Backend;

use crate::global::{self, KIND_ULNET};
use crate::sock::{unsupported, Sock};
use crate::sys::{self, real};
use crate::{addr, opts};

/// How `ulnet_init` starts the stack. Null pointers and zeros leave a setting to the
/// environment (`ULNET_BACKEND`, `ULNET_IFACE`, `ULNET_ADDR`, `ULNET_NETNS`,
/// `ULNET_GATEWAY`, `ULNET_BUSY_POLL`, `ULNET_GSO`, `ULNET_SYN_POLICER`) and then to the
/// defaults (backend xdp).
#[repr(C)]
#[derive(Debug)]
pub struct UlnetConfig {
    /// "xdp", "packet" or "tap".
    pub backend: *const c_char,
    /// The interface (or TAP device) to attach to.
    pub iface: *const c_char,
    /// The stack's address with its prefix, e.g. "198.18.0.5/24".
    pub addr: *const c_char,
    /// The network namespace the interface is in (`ip netns` name).
    pub netns: *const c_char,
    /// The default gateway.
    pub gateway: *const c_char,
    /// 1: the loop busy-polls; 0: it sleeps on the channel.
    pub busy_poll: c_int,
}

const _: () = assert!(std::mem::size_of::<UlnetConfig>() == 48);

/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn text<'a>(p: *const c_char) -> Result<Option<&'a str>, c_int> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map(Some)
        .map_err(|_| libc::EINVAL)
}

/// Builds the stack from the environment with `cfg`'s settings on top. (An interface
/// still held by the AF_XDP socket of a process that just exited is waited for by the
/// channel itself.)
///
/// # Errors
/// The builder's error, as text.
///
/// # Safety
/// `cfg` is null or points at a valid config whose strings are NUL-terminated.
pub unsafe fn build(cfg: *const UlnetConfig) -> Result<Stack, String> {
    // SAFETY: the caller's contract.
    let b = unsafe { builder(cfg) }?;
    b.build().map_err(|e| e.to_string())
}

/// The builder: the environment, then `cfg`.
///
/// # Safety
/// As [`build`].
unsafe fn builder(cfg: *const UlnetConfig) -> Result<ulnet_core::net::StackBuilder, String> {
    let mut b = Stack::builder().from_env();
    if !cfg.is_null() {
        // SAFETY: the caller's contract.
        let c = unsafe { &*cfg };
        let t = |p| {
            // SAFETY: the caller's contract covers every string field.
            unsafe { text(p) }.map_err(|_| "a setting is not UTF-8".to_string())
        };
        if let Some(s) = t(c.backend)? {
            b = b.backend(s.parse::<Backend>()?);
        }
        if let Some(s) = t(c.iface)? {
            b = b.interface(s);
        }
        if let Some(s) = t(c.addr)? {
            b = b.address(s);
        }
        if let Some(s) = t(c.netns)? {
            b = b.netns(s);
        }
        if let Some(s) = t(c.gateway)? {
            b = b.gateway(s.parse().map_err(|e| format!("gateway {s:?}: {e}"))?);
        }
        if c.busy_poll != 0 {
            b = b.wait(ulnet_core::runtime::WaitMode::BusyPoll);
        }
    }
    Ok(b)
}

fn ret(r: Result<c_int, c_int>) -> c_int {
    r.unwrap_or_else(|e| {
        sys::set_errno(e);
        -1
    })
}

fn ret_len(r: Result<usize, c_int>) -> ssize_t {
    match r {
        Ok(n) => n as ssize_t,
        Err(e) => {
            sys::set_errno(e);
            -1
        }
    }
}

/// The ulnet socket `fd` names, `None` for another descriptor; in a fork child, the
/// fork error.
fn ours(fd: c_int, call: &str) -> Option<Result<Arc<Sock>, c_int>> {
    if global::kind(fd) != KIND_ULNET {
        return None;
    }
    if global::forked() {
        return Some(Err(global::fork_error(call)));
    }
    global::sock(fd).map(Ok)
}

/// Starts the stack. Call once, before `ulnet_socket`.
///
/// Returns 0, or -1 with errno: `EALREADY` when started already, `ENETDOWN` when the
/// stack could not start (a message on standard error says why).
///
/// # Safety
/// `cfg` is null (settings from the environment) or points at a valid config whose
/// non-null strings are NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn ulnet_init(cfg: *const UlnetConfig) -> c_int {
    if global::stack().is_some() {
        sys::set_errno(libc::EALREADY);
        return -1;
    }
    // SAFETY: the caller's contract.
    let r = global::stack_or_init(|| unsafe { build(cfg) });
    ret(r.map(|_| 0))
}

/// Closes every ulnet socket and stops the stack, letting closing connections finish
/// (about a second at most). Also runs at exit.
#[no_mangle]
pub extern "C" fn ulnet_fini() {
    global::shutdown_all();
}

/// Makes a new ulnet socket and enters its descriptor.
pub fn new_socket(
    stack: &Stack,
    domain: c_int,
    ty: c_int,
    proto: c_int,
) -> Result<(Arc<Sock>, c_int), c_int> {
    if domain != libc::AF_INET && domain != libc::AF_INET6 {
        return Err(libc::EAFNOSUPPORT);
    }
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let stream = match (base, proto) {
        (libc::SOCK_STREAM, 0 | libc::IPPROTO_TCP) => true,
        (libc::SOCK_DGRAM, 0 | libc::IPPROTO_UDP) => false,
        (libc::SOCK_STREAM | libc::SOCK_DGRAM, _) => return Err(libc::EPROTONOSUPPORT),
        _ => return Err(libc::ESOCKTNOSUPPORT),
    };
    let (s, fd) = Sock::new(stack, domain, stream, ty & libc::SOCK_NONBLOCK != 0)?;
    if let Err(e) = global::insert(fd, Arc::clone(&s), ty & libc::SOCK_CLOEXEC != 0) {
        let _ = sys::close(fd);
        return Err(e);
    }
    Ok((s, fd))
}

/// Puts a new ulnet socket behind descriptor `fd` (a kernel socket the program made,
/// which this closes), keeping its O_NONBLOCK and close-on-exec flags: how the
/// interposer moves a socket to ulnet at bind, connect or first send.
///
/// # Errors
/// As `socket(2)`; the errno of the descriptor calls.
pub fn adopt_number(
    stack: &Stack,
    domain: c_int,
    ty: c_int,
    proto: c_int,
    fd: c_int,
) -> Result<Arc<Sock>, c_int> {
    let fl = sys::fcntl(fd, libc::F_GETFL, 0)?;
    let fdfl = sys::fcntl(fd, libc::F_GETFD, 0)?;
    let flags = if fl & libc::O_NONBLOCK != 0 {
        libc::SOCK_NONBLOCK
    } else {
        0
    };
    let (s, tmp) = new_socket(
        stack,
        domain,
        (ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)) | flags,
        proto,
    )?;
    let moved = sys::dup3(tmp, fd, libc::O_CLOEXEC);
    global::release(global::remove(tmp));
    let _ = sys::close(tmp);
    moved?;
    global::insert(fd, Arc::clone(&s), fdfl & libc::FD_CLOEXEC != 0)?;
    Ok(s)
}

/// socket(2) on ulnet: AF_INET or AF_INET6 (IPv4 traffic, addresses shown
/// IPv4-mapped), SOCK_STREAM (TCP) or SOCK_DGRAM (UDP), with SOCK_NONBLOCK and
/// SOCK_CLOEXEC.
///
/// Returns the descriptor, or -1 with errno (`ENETDOWN` before `ulnet_init`).
#[no_mangle]
pub extern "C" fn ulnet_socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    if global::forked() {
        return ret(Err(global::fork_error("socket")));
    }
    let Some(stack) = global::stack() else {
        return ret(Err(libc::ENETDOWN));
    };
    ret(new_socket(&stack, domain, ty, protocol).map(|(_, fd)| fd))
}

/// bind(2).
///
/// # Safety
/// `addr` is valid for reads of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ulnet_bind(fd: c_int, a: *const sockaddr, len: socklen_t) -> c_int {
    match ours(fd, "bind") {
        // SAFETY: the caller's contract.
        Some(s) => ret(s.and_then(|s| s.bind(unsafe { addr::read(a, len) }?).map(|()| 0))),
        // SAFETY: the caller's contract.
        None => unsafe { real::bind(fd, a, len) },
    }
}

/// listen(2).
#[no_mangle]
pub extern "C" fn ulnet_listen(fd: c_int, backlog: c_int) -> c_int {
    match ours(fd, "listen") {
        Some(s) => ret(s.and_then(|s| s.listen(backlog).map(|()| 0))),
        // SAFETY: no pointers.
        None => unsafe { real::listen(fd, backlog) },
    }
}

/// accept4(2).
///
/// # Safety
/// `addr` is null, or `len` is valid for reads and writes and `addr` for writes of
/// `*len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ulnet_accept4(
    fd: c_int,
    a: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    match ours(fd, "accept") {
        Some(s) => ret(s.and_then(|s| {
            if flags & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) != 0 {
                return Err(libc::EINVAL);
            }
            let (ns, nfd, peer) = s.accept(flags)?;
            if let Err(e) = global::insert(nfd, ns, flags & libc::SOCK_CLOEXEC != 0) {
                let _ = sys::close(nfd);
                return Err(e);
            }
            // SAFETY: the caller's contract.
            unsafe { addr::write(peer, s.family, a, len) };
            Ok(nfd)
        })),
        // SAFETY: the caller's contract.
        None => unsafe { real::accept4(fd, a, len, flags) },
    }
}

/// accept(2).
///
/// # Safety
/// As `ulnet_accept4`.
#[no_mangle]
pub unsafe extern "C" fn ulnet_accept(fd: c_int, a: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { ulnet_accept4(fd, a, len, 0) }
}

/// connect(2).
///
/// # Safety
/// `addr` is valid for reads of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ulnet_connect(fd: c_int, a: *const sockaddr, len: socklen_t) -> c_int {
    match ours(fd, "connect") {
        Some(s) => ret(s.and_then(|s| {
            // SAFETY: the caller's contract.
            let dst = unsafe { addr::read(a, len) };
            match dst {
                Err(libc::EAFNOSUPPORT) if !a.is_null() => Err(unsupported(
                    "connect",
                    "AF_UNSPEC (dissolving an association)",
                )),
                d => s.connect(d?).map(|()| 0),
            }
        })),
        // SAFETY: the caller's contract.
        None => unsafe { real::connect(fd, a, len) },
    }
}

/// # Safety
/// `buf` is valid for writes of `n` bytes.
unsafe fn slice_mut<'a>(buf: *mut c_void, n: size_t) -> Result<&'a mut [u8], c_int> {
    if n == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), n) })
}

/// # Safety
/// `buf` is valid for reads of `n` bytes.
unsafe fn slice<'a>(buf: *const c_void, n: size_t) -> Result<&'a [u8], c_int> {
    if n == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), n) })
}

/// recvfrom(2).
///
/// # Safety
/// `buf` is valid for writes of `n` bytes; `addr`/`len` as for `ulnet_accept4`.
#[no_mangle]
pub unsafe extern "C" fn ulnet_recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    a: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    match ours(fd, "recv") {
        Some(s) => ret_len(s.and_then(|s| {
            // SAFETY: the caller's contract.
            let b = unsafe { slice_mut(buf, n) }?;
            let (got, from) = s.recv(b, flags)?;
            if let Some(from) = from {
                // SAFETY: the caller's contract.
                unsafe { addr::write(from, s.family, a, len) };
            } else if !len.is_null() {
                // SAFETY: the caller's contract: `len` is writable. A stream socket
                // reports no address.
                unsafe { *len = 0 };
            }
            Ok(got)
        })),
        // SAFETY: the caller's contract.
        None => unsafe { real::recvfrom(fd, buf, n, flags, a, len) },
    }
}

/// recv(2).
///
/// # Safety
/// `buf` is valid for writes of `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn ulnet_recv(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe {
        ulnet_recvfrom(
            fd,
            buf,
            n,
            flags,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    }
}

/// read(2).
///
/// # Safety
/// `buf` is valid for writes of `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn ulnet_read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    if global::kind(fd) != KIND_ULNET {
        // SAFETY: the caller's contract.
        return unsafe { real::read(fd, buf, n) };
    }
    // SAFETY: the caller's contract.
    unsafe { ulnet_recvfrom(fd, buf, n, 0, std::ptr::null_mut(), std::ptr::null_mut()) }
}

/// sendto(2).
///
/// # Safety
/// `buf` is valid for reads of `n` bytes; `addr` null or valid for reads of `len`.
#[no_mangle]
pub unsafe extern "C" fn ulnet_sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    a: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    match ours(fd, "send") {
        Some(s) => ret_len(s.and_then(|s| {
            // SAFETY: the caller's contract.
            let b = unsafe { slice(buf, n) }?;
            let dst = if a.is_null() || s.stream {
                None
            } else {
                // SAFETY: the caller's contract.
                Some(unsafe { addr::read(a, len) }?)
            };
            s.send(b, flags, dst)
        })),
        // SAFETY: the caller's contract.
        None => unsafe { real::sendto(fd, buf, n, flags, a, len) },
    }
}

/// send(2).
///
/// # Safety
/// `buf` is valid for reads of `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn ulnet_send(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { ulnet_sendto(fd, buf, n, flags, std::ptr::null(), 0) }
}

/// write(2).
///
/// # Safety
/// `buf` is valid for reads of `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn ulnet_write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    if global::kind(fd) != KIND_ULNET {
        // SAFETY: the caller's contract.
        return unsafe { real::write(fd, buf, n) };
    }
    // SAFETY: the caller's contract.
    unsafe { ulnet_sendto(fd, buf, n, 0, std::ptr::null(), 0) }
}

thread_local! {
    /// One datagram, gathered or to be scattered (no allocation per call once grown).
    static DGRAM: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The iovecs of `iov`/`n`.
///
/// # Safety
/// `iov` is valid for reads of `n` iovecs.
unsafe fn iovs<'a>(iov: *const iovec, n: usize) -> Result<&'a [iovec], c_int> {
    if n == 0 {
        return Ok(&[]);
    }
    if iov.is_null() {
        return Err(libc::EFAULT);
    }
    if n > libc::UIO_MAXIOV as usize {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(iov, n) })
}

/// sendmsg on a ulnet socket (no ancillary data).
///
/// # Safety
/// `msg` is a valid msghdr whose buffers are readable.
unsafe fn send_msg(s: &Sock, msg: *const msghdr, flags: c_int) -> Result<usize, c_int> {
    if msg.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's contract.
    let m = unsafe { &*msg };
    if m.msg_controllen > 0 {
        return Err(unsupported("sendmsg", "ancillary data"));
    }
    // SAFETY: the caller's contract.
    let v = unsafe { iovs(m.msg_iov, m.msg_iovlen) }?;
    let dst = if m.msg_name.is_null() || s.stream {
        None
    } else {
        // SAFETY: the caller's contract.
        Some(unsafe { addr::read(m.msg_name.cast(), m.msg_namelen) }?)
    };
    if s.stream {
        let mut total = 0;
        for (i, io) in v.iter().enumerate() {
            // SAFETY: the caller's contract.
            let b = unsafe { slice(io.iov_base, io.iov_len) }?;
            let f = if i > 0 {
                flags | libc::MSG_DONTWAIT
            } else {
                flags
            };
            match s.send(b, f, None) {
                Ok(n) => {
                    total += n;
                    if n < b.len() {
                        break;
                    }
                }
                Err(e) if total == 0 => return Err(e),
                Err(_) => break,
            }
        }
        return Ok(total);
    }
    DGRAM.with(|d| {
        let mut d = d.borrow_mut();
        d.clear();
        for io in v {
            // SAFETY: the caller's contract.
            d.extend_from_slice(unsafe { slice(io.iov_base, io.iov_len) }?);
        }
        s.send(&d, flags, dst)
    })
}

/// recvmsg on a ulnet socket (no ancillary data; MSG_TRUNC reported for UDP).
///
/// # Safety
/// `msg` is a valid msghdr whose buffers are writable.
unsafe fn recv_msg(s: &Sock, msg: *mut msghdr, flags: c_int) -> Result<usize, c_int> {
    if msg.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's contract.
    let m = unsafe { &mut *msg };
    // SAFETY: the caller's contract.
    let v = unsafe { iovs(m.msg_iov, m.msg_iovlen) }?;
    m.msg_controllen = 0;
    m.msg_flags = 0;
    if s.stream {
        let mut total = 0;
        for (i, io) in v.iter().enumerate() {
            // SAFETY: the caller's contract.
            let b = unsafe { slice_mut(io.iov_base, io.iov_len) }?;
            if b.is_empty() {
                continue;
            }
            let f = if total > 0 {
                flags | libc::MSG_DONTWAIT
            } else {
                flags
            };
            match s.recv(b, f) {
                Ok((n, _)) => {
                    total += n;
                    if n < b.len() {
                        break;
                    }
                }
                Err(e) if total == 0 && i == 0 => return Err(e),
                Err(e) if total == 0 => return Err(e),
                Err(_) => break,
            }
        }
        m.msg_namelen = 0;
        return Ok(total);
    }
    DGRAM.with(|d| {
        let mut d = d.borrow_mut();
        d.resize(65536, 0);
        let (n, from) = s.recv(&mut d, flags)?;
        let mut off = 0;
        for io in v {
            // SAFETY: the caller's contract.
            let b = unsafe { slice_mut(io.iov_base, io.iov_len) }?;
            let k = b.len().min(n - off);
            b[..k].copy_from_slice(&d[off..off + k]);
            off += k;
        }
        if off < n {
            m.msg_flags |= libc::MSG_TRUNC;
        }
        if let Some(from) = from {
            // SAFETY: the caller's contract.
            unsafe { addr::write(from, s.family, m.msg_name.cast(), &mut m.msg_namelen) };
        }
        Ok(if flags & libc::MSG_TRUNC != 0 { n } else { off })
    })
}

/// sendmsg(2) (ancillary data: `EOPNOTSUPP` on ulnet sockets).
///
/// # Safety
/// `msg` is a valid msghdr whose buffers are readable.
#[no_mangle]
pub unsafe extern "C" fn ulnet_sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    match ours(fd, "sendmsg") {
        // SAFETY: the caller's contract.
        Some(s) => ret_len(s.and_then(|s| unsafe { send_msg(&s, msg, flags) })),
        // SAFETY: the caller's contract.
        None => unsafe { real::sendmsg(fd, msg, flags) },
    }
}

/// recvmsg(2) (no ancillary data on ulnet sockets: `msg_controllen` comes back 0).
///
/// # Safety
/// `msg` is a valid msghdr whose buffers are writable.
#[no_mangle]
pub unsafe extern "C" fn ulnet_recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    match ours(fd, "recvmsg") {
        // SAFETY: the caller's contract.
        Some(s) => ret_len(s.and_then(|s| unsafe { recv_msg(&s, msg, flags) })),
        // SAFETY: the caller's contract.
        None => unsafe { real::recvmsg(fd, msg, flags) },
    }
}

/// sendmmsg(2): each message in turn; stops at the first error after one was sent.
///
/// # Safety
/// `msgs` is valid for `n` mmsghdrs whose buffers are readable.
#[no_mangle]
pub unsafe extern "C" fn ulnet_sendmmsg(
    fd: c_int,
    msgs: *mut libc::mmsghdr,
    n: c_uint,
    flags: c_int,
) -> c_int {
    match ours(fd, "sendmmsg") {
        Some(s) => ret(s.and_then(|s| {
            let mut done = 0;
            for i in 0..n as usize {
                // SAFETY: the caller's contract.
                let m = unsafe { &mut *msgs.add(i) };
                // SAFETY: the caller's contract.
                match unsafe { send_msg(&s, &m.msg_hdr, flags) } {
                    Ok(k) => m.msg_len = k as c_uint,
                    Err(e) if done == 0 => return Err(e),
                    Err(_) => break,
                }
                done += 1;
            }
            Ok(done)
        })),
        // SAFETY: the caller's contract.
        None => unsafe { real::sendmmsg(fd, msgs, n, flags) },
    }
}

/// recvmmsg(2): the first message as the flags say, the rest only if waiting (as with
/// MSG_WAITFORONE);
/// `timeout` must be null on ulnet sockets.
///
/// # Safety
/// `msgs` is valid for `n` mmsghdrs whose buffers are writable.
#[no_mangle]
pub unsafe extern "C" fn ulnet_recvmmsg(
    fd: c_int,
    msgs: *mut libc::mmsghdr,
    n: c_uint,
    flags: c_int,
    timeout: *mut libc::timespec,
) -> c_int {
    match ours(fd, "recvmmsg") {
        Some(s) => ret(s.and_then(|s| {
            if !timeout.is_null() {
                return Err(unsupported("recvmmsg", "a timeout"));
            }
            let mut done = 0;
            for i in 0..n as usize {
                // SAFETY: the caller's contract.
                let m = unsafe { &mut *msgs.add(i) };
                // After the first message only what is waiting (as MSG_WAITFORONE).
                let f = if done > 0 {
                    (flags & !libc::MSG_WAITFORONE) | libc::MSG_DONTWAIT
                } else {
                    flags & !libc::MSG_WAITFORONE
                };
                // SAFETY: the caller's contract.
                match unsafe { recv_msg(&s, &mut m.msg_hdr, f) } {
                    Ok(k) => m.msg_len = k as c_uint,
                    Err(e) if done == 0 => return Err(e),
                    Err(_) => break,
                }
                done += 1;
            }
            Ok(done)
        })),
        // SAFETY: the caller's contract.
        None => unsafe { real::recvmmsg(fd, msgs, n, flags, timeout) },
    }
}

/// readv(2).
///
/// # Safety
/// `iov` is valid for `n` iovecs whose buffers are writable.
#[no_mangle]
pub unsafe extern "C" fn ulnet_readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    if global::kind(fd) != KIND_ULNET {
        // SAFETY: the caller's contract.
        return unsafe { real::readv(fd, iov, n) };
    }
    // SAFETY: msghdr is plain old data; all zeros is valid.
    let mut m: msghdr = unsafe { std::mem::zeroed() };
    m.msg_iov = iov.cast_mut();
    m.msg_iovlen = usize::try_from(n).unwrap_or(usize::MAX);
    // SAFETY: the caller's contract.
    unsafe { ulnet_recvmsg(fd, &mut m, 0) }
}

/// writev(2).
///
/// # Safety
/// `iov` is valid for `n` iovecs whose buffers are readable.
#[no_mangle]
pub unsafe extern "C" fn ulnet_writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    if global::kind(fd) != KIND_ULNET {
        // SAFETY: the caller's contract.
        return unsafe { real::writev(fd, iov, n) };
    }
    // SAFETY: msghdr is plain old data; all zeros is valid.
    let mut m: msghdr = unsafe { std::mem::zeroed() };
    m.msg_iov = iov.cast_mut();
    m.msg_iovlen = usize::try_from(n).unwrap_or(usize::MAX);
    // SAFETY: the caller's contract.
    unsafe { ulnet_sendmsg(fd, &m, 0) }
}

/// shutdown(2).
#[no_mangle]
pub extern "C" fn ulnet_shutdown(fd: c_int, how: c_int) -> c_int {
    match ours(fd, "shutdown") {
        Some(s) => ret(s.and_then(|s| s.shutdown(how).map(|()| 0))),
        // SAFETY: no pointers.
        None => unsafe { real::shutdown(fd, how) },
    }
}

/// close(2). The last descriptor of a ulnet socket closes it (gracefully: the data
/// queued is sent, then a FIN; SO_LINGER as on Linux).
#[no_mangle]
pub extern "C" fn ulnet_close(fd: c_int) -> c_int {
    if global::kind(fd) == global::KIND_NONE {
        // SAFETY: no pointers.
        return unsafe { real::close(fd) };
    }
    let s = global::remove(fd);
    let r = sys::close(fd);
    global::release(s);
    ret(r.map(|()| 0))
}

/// Enters `new` (just made by the kernel as a copy of `old`) as another name of the
/// socket `old` names, with the program's close-on-exec flag `cloexec`.
fn dup_enter(old: c_int, new: c_int, cloexec: bool) -> Result<c_int, c_int> {
    match global::sock(old) {
        Some(s) => {
            if let Err(e) = global::insert(new, s, cloexec) {
                let _ = sys::close(new);
                return Err(e);
            }
            Ok(new)
        }
        None => Ok(new),
    }
}

/// dup(2).
#[no_mangle]
pub extern "C" fn ulnet_dup(fd: c_int) -> c_int {
    if global::kind(fd) != KIND_ULNET {
        // SAFETY: no pointers.
        return unsafe { real::dup(fd) };
    }
    ret(sys::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0).and_then(|n| dup_enter(fd, n, false)))
}

/// dup3(2) (`flags` 0 or O_CLOEXEC); `new` stops naming what it named before.
#[no_mangle]
pub extern "C" fn ulnet_dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if global::kind(old) != KIND_ULNET && global::kind(new) == global::KIND_NONE {
        // SAFETY: no pointers.
        return unsafe { real::dup3(old, new, flags) };
    }
    if old == new {
        return ret(Err(libc::EINVAL));
    }
    if flags & !libc::O_CLOEXEC != 0 {
        return ret(Err(libc::EINVAL));
    }
    let kernel_flags = if global::kind(old) == KIND_ULNET {
        libc::O_CLOEXEC
    } else {
        flags
    };
    let r = sys::dup3(old, new, kernel_flags);
    if r.is_ok() {
        global::release(global::remove(new));
    }
    ret(r.and_then(|n| dup_enter(old, n, flags & libc::O_CLOEXEC != 0)))
}

/// dup2(2).
#[no_mangle]
pub extern "C" fn ulnet_dup2(old: c_int, new: c_int) -> c_int {
    if old == new {
        // dup2 of a descriptor onto itself checks it and does nothing.
        return ret(sys::fcntl(old, libc::F_GETFD, 0).map(|_| new));
    }
    ulnet_dup3(old, new, 0)
}

/// fcntl(2) with its third argument always passed (0 when the command takes none).
/// On ulnet sockets: F_GETFL/F_SETFL (O_NONBLOCK), F_GETFD/F_SETFD, F_DUPFD,
/// F_DUPFD_CLOEXEC; other commands fail with `EOPNOTSUPP` and a message.
#[no_mangle]
pub extern "C" fn ulnet_fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    let s = match ours(fd, "fcntl") {
        // SAFETY: the caller passes what `cmd` takes.
        None => return unsafe { real::fcntl(fd, cmd, arg) },
        Some(Err(e)) if cmd != libc::F_GETFD && cmd != libc::F_SETFD => return ret(Err(e)),
        Some(s) => s,
    };
    let r = match cmd {
        libc::F_GETFD => Ok(if global::cloexec(fd) {
            libc::FD_CLOEXEC
        } else {
            0
        }),
        libc::F_SETFD => {
            let on = arg as c_int & libc::FD_CLOEXEC != 0;
            if !on {
                // The kernel's flag stays set: after exec the stack is gone.
                let _ = unsupported(
                    "fcntl",
                    "keeping a ulnet socket open across exec (F_SETFD 0)",
                );
            }
            global::set_cloexec(fd, on);
            Ok(0)
        }
        libc::F_GETFL => sys::fcntl(fd, cmd, arg as libc::c_long),
        libc::F_SETFL => s.and_then(|s| {
            let r = sys::fcntl(fd, cmd, arg as libc::c_long)?;
            s.note_flags(arg as c_int);
            Ok(r)
        }),
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
            sys::fcntl(fd, libc::F_DUPFD_CLOEXEC, arg as libc::c_long)
                .and_then(|n| dup_enter(fd, n, cmd == libc::F_DUPFD_CLOEXEC))
        }
        _ => Err(unsupported(
            "fcntl",
            "this command (F_SETOWN, F_SETSIG, locks, leases)",
        )),
    };
    ret(r)
}

/// ioctl(2) with its third argument: on ulnet sockets FIONBIO and FIONREAD (SIOCINQ);
/// interface requests (SIOCGIF*) go to the kernel; others fail with `EOPNOTSUPP` and
/// a message.
///
/// # Safety
/// `arg` is what `req` takes (a pointer to an int for FIONBIO and FIONREAD).
#[no_mangle]
pub unsafe extern "C" fn ulnet_ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    let s = match ours(fd, "ioctl") {
        // SAFETY: the caller's contract.
        None => return unsafe { real::ioctl(fd, req, arg as c_ulong) },
        Some(s) => s,
    };
    let r = s.and_then(|s| match req {
        libc::FIONBIO => {
            if arg.is_null() {
                return Err(libc::EFAULT);
            }
            // SAFETY: FIONBIO takes a pointer to an int.
            let on = unsafe { *arg.cast::<c_int>() } != 0;
            s.set_nonblocking(fd, on).map(|()| 0)
        }
        libc::FIONREAD => {
            if arg.is_null() {
                return Err(libc::EFAULT);
            }
            let n = s.readable_len()?;
            // SAFETY: FIONREAD takes a pointer to an int.
            unsafe { *arg.cast::<c_int>() = n };
            Ok(0)
        }
        // Interface requests (0x89xx) are about the host, not the socket.
        r if (0x8900..0x8a00).contains(&r) => {
            // SAFETY: the caller's contract.
            let k = unsafe { real::ioctl(fd, req, arg as c_ulong) };
            if k < 0 {
                Err(sys::errno())
            } else {
                Ok(k)
            }
        }
        _ => Err(unsupported("ioctl", "this request")),
    });
    ret(r)
}

/// getsockname(2).
///
/// # Safety
/// `len` is valid for reads and writes and `addr` for writes of `*len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ulnet_getsockname(
    fd: c_int,
    a: *mut sockaddr,
    len: *mut socklen_t,
) -> c_int {
    match ours(fd, "getsockname") {
        Some(s) => ret(s.and_then(|s| {
            if a.is_null() || len.is_null() {
                return Err(libc::EFAULT);
            }
            // SAFETY: the caller's contract.
            unsafe { addr::write(s.local_addr(), s.family, a, len) };
            Ok(0)
        })),
        // SAFETY: the caller's contract.
        None => unsafe { real::getsockname(fd, a, len) },
    }
}

/// getpeername(2).
///
/// # Safety
/// As `ulnet_getsockname`.
#[no_mangle]
pub unsafe extern "C" fn ulnet_getpeername(
    fd: c_int,
    a: *mut sockaddr,
    len: *mut socklen_t,
) -> c_int {
    match ours(fd, "getpeername") {
        Some(s) => ret(s.and_then(|s| {
            if a.is_null() || len.is_null() {
                return Err(libc::EFAULT);
            }
            let p = s.peer_addr()?;
            // SAFETY: the caller's contract.
            unsafe { addr::write(p, s.family, a, len) };
            Ok(0)
        })),
        // SAFETY: the caller's contract.
        None => unsafe { real::getpeername(fd, a, len) },
    }
}

/// setsockopt(2): see docs/capi.md for the options ulnet sockets take; others fail
/// with `ENOPROTOOPT`.
///
/// # Safety
/// `v` is valid for reads of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ulnet_setsockopt(
    fd: c_int,
    level: c_int,
    opt: c_int,
    v: *const c_void,
    len: socklen_t,
) -> c_int {
    match ours(fd, "setsockopt") {
        // SAFETY: the caller's contract.
        Some(s) => ret(s.and_then(|s| unsafe { opts::set(&s, level, opt, v, len) }.map(|()| 0))),
        // SAFETY: the caller's contract.
        None => unsafe { real::setsockopt(fd, level, opt, v, len) },
    }
}

/// getsockopt(2).
///
/// # Safety
/// `len` is valid for reads and writes and `v` for writes of `*len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ulnet_getsockopt(
    fd: c_int,
    level: c_int,
    opt: c_int,
    v: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    match ours(fd, "getsockopt") {
        // SAFETY: the caller's contract.
        Some(s) => ret(s.and_then(|s| unsafe { opts::get(&s, level, opt, v, len) }.map(|()| 0))),
        // SAFETY: the caller's contract.
        None => unsafe { real::getsockopt(fd, level, opt, v, len) },
    }
}

/// sendfile(2) to a ulnet socket: the file is read with pread(2) and sent, so the file
/// offset moves by what was sent, as on Linux.
///
/// # Safety
/// `offset` is null or valid for reads and writes.
#[no_mangle]
pub unsafe extern "C" fn ulnet_sendfile(
    out: c_int,
    inp: c_int,
    offset: *mut libc::off_t,
    count: size_t,
) -> ssize_t {
    let s = match ours(out, "sendfile") {
        // SAFETY: the caller's contract.
        None => return unsafe { real::sendfile(out, inp, offset, count) },
        Some(s) => s,
    };
    ret_len(s.and_then(|s| {
        let mut pos = if offset.is_null() {
            // SAFETY: lseek has no memory effects.
            let p = unsafe { libc::syscall(libc::SYS_lseek, inp, 0, libc::SEEK_CUR) };
            if p < 0 {
                return Err(sys::errno());
            }
            p as libc::off_t
        } else {
            // SAFETY: the caller's contract.
            unsafe { *offset }
        };
        let mut buf = vec![0u8; count.min(256 * 1024)];
        let mut sent = 0usize;
        while sent < count {
            let want = buf.len().min(count - sent);
            // SAFETY: `buf` is writable for `want` bytes.
            let n = unsafe { libc::syscall(libc::SYS_pread64, inp, buf.as_mut_ptr(), want, pos) };
            if n < 0 {
                if sent == 0 {
                    return Err(sys::errno());
                }
                break;
            }
            if n == 0 {
                break;
            }
            let n = n as usize;
            let f = if sent > 0 { libc::MSG_DONTWAIT } else { 0 };
            let k = match s.send(&buf[..n], f, None) {
                Ok(k) => k,
                Err(e) if sent == 0 => return Err(e),
                Err(_) => 0,
            };
            sent += k;
            pos += k as libc::off_t;
            if k < n {
                break;
            }
        }
        if offset.is_null() {
            // SAFETY: lseek has no memory effects.
            unsafe { libc::syscall(libc::SYS_lseek, inp, pos, libc::SEEK_SET) };
        } else {
            // SAFETY: the caller's contract.
            unsafe { *offset = pos };
        }
        Ok(sent)
    }))
}

/// poll(2): the kernel's (ulnet descriptors are real descriptors).
///
/// # Safety
/// `fds` is valid for reads and writes of `n` pollfds.
#[no_mangle]
pub unsafe extern "C" fn ulnet_poll(
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    timeout: c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { real::poll(fds, n, timeout) }
}

/// select(2): the kernel's.
///
/// # Safety
/// As select(2).
#[no_mangle]
pub unsafe extern "C" fn ulnet_select(
    n: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    t: *mut libc::timeval,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { real::select(n, r, w, e, t) }
}

/// epoll_create1(2): the kernel's.
#[no_mangle]
pub extern "C" fn ulnet_epoll_create1(flags: c_int) -> c_int {
    // SAFETY: no pointers.
    unsafe { real::epoll_create1(flags) }
}

/// epoll_ctl(2): the kernel's (EPOLLET, EPOLLONESHOT, EPOLLRDHUP work on ulnet
/// descriptors as on any).
///
/// # Safety
/// `ev` is valid for reads (or null for EPOLL_CTL_DEL).
#[no_mangle]
pub unsafe extern "C" fn ulnet_epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    ev: *mut libc::epoll_event,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { real::epoll_ctl(epfd, op, fd, ev) }
}

/// epoll_wait(2): the kernel's.
///
/// # Safety
/// `evs` is valid for writes of `n` events.
#[no_mangle]
pub unsafe extern "C" fn ulnet_epoll_wait(
    epfd: c_int,
    evs: *mut libc::epoll_event,
    n: c_int,
    timeout: c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { real::epoll_wait(epfd, evs, n, timeout) }
}

/// epoll_pwait(2): the kernel's.
///
/// # Safety
/// `evs` is valid for writes of `n` events; `mask` null or a valid signal set.
#[no_mangle]
pub unsafe extern "C" fn ulnet_epoll_pwait(
    epfd: c_int,
    evs: *mut libc::epoll_event,
    n: c_int,
    timeout: c_int,
    mask: *const libc::sigset_t,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { real::epoll_pwait(epfd, evs, n, timeout, mask) }
}

/// Whether `fd` is a ulnet socket (1) or not (0).
#[no_mangle]
pub extern "C" fn ulnet_is_socket(fd: c_int) -> c_int {
    c_int::from(global::kind(fd) == KIND_ULNET)
}

#[allow(dead_code)]
fn _addr_type_check(_: SocketAddr) {}
