//! Process-wide state: the one stack, the table from descriptor numbers to ulnet
//! sockets, and what fork and exit do to them.
//!
//! Lock order: the table, then a socket's own locks, then the stack's interface.
//! Nothing that can call back into the interposer (a libc function, `eprintln!`) runs
//! while the table is locked; descriptors that are not ulnet's are told apart with one
//! atomic load, without the lock.

use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ulnet_core::net::Stack;

use crate::sock::Sock;
use crate::sys;

/// Descriptors below this are told apart without a lock; a ulnet socket never gets a
/// number at or above it (`EMFILE`).
pub const FD_LIMIT: usize = 65536;

/// Not a descriptor this library knows.
pub const KIND_NONE: u8 = 0;
/// A ulnet socket.
pub const KIND_ULNET: u8 = 1;
/// A kernel AF_INET/AF_INET6 socket the interposer may still move to ulnet (at bind,
/// connect or the first send).
pub const KIND_PENDING: u8 = 2;

static KIND: [AtomicU8; FD_LIMIT] = [const { AtomicU8::new(KIND_NONE) }; FD_LIMIT];

/// Whether the program asked for close-on-exec on each ulnet descriptor (the kernel's
/// flag is always set: see `mirror.rs`).
static CLOEXEC: [AtomicBool; FD_LIMIT] = [const { AtomicBool::new(false) }; FD_LIMIT];

static SOCKS: Mutex<Option<HashMap<c_int, Arc<Sock>>>> = Mutex::new(None);

static STACK: Mutex<Option<Stack>> = Mutex::new(None);

/// The stack was started in this process before a fork and this is the child.
static FORKED: AtomicBool = AtomicBool::new(false);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What kind of descriptor `fd` is.
pub fn kind(fd: c_int) -> u8 {
    usize::try_from(fd)
        .ok()
        .and_then(|i| KIND.get(i))
        .map_or(KIND_NONE, |k| k.load(Ordering::Acquire))
}

/// Marks `fd` (which must be below [`FD_LIMIT`]).
pub fn set_kind(fd: c_int, k: u8) {
    if let Some(slot) = usize::try_from(fd).ok().and_then(|i| KIND.get(i)) {
        slot.store(k, Ordering::Release);
    }
}

/// The ulnet socket `fd` names.
pub fn sock(fd: c_int) -> Option<Arc<Sock>> {
    if kind(fd) != KIND_ULNET {
        return None;
    }
    lock(&SOCKS).as_ref()?.get(&fd).cloned()
}

/// The close-on-exec flag the program set on `fd` (F_GETFD).
pub fn cloexec(fd: c_int) -> bool {
    usize::try_from(fd)
        .ok()
        .and_then(|i| CLOEXEC.get(i))
        .is_some_and(|c| c.load(Ordering::Relaxed))
}

/// Records the close-on-exec flag the program set on `fd`.
pub fn set_cloexec(fd: c_int, on: bool) {
    if let Some(c) = usize::try_from(fd).ok().and_then(|i| CLOEXEC.get(i)) {
        c.store(on, Ordering::Relaxed);
    }
}

/// Enters `fd` as a name of `s`, with the close-on-exec flag the program asked for.
///
/// # Errors
/// `EMFILE` when `fd` is past [`FD_LIMIT`].
pub fn insert(fd: c_int, s: Arc<Sock>, cloexec: bool) -> Result<(), c_int> {
    if usize::try_from(fd).map_or(true, |i| i >= FD_LIMIT) {
        return Err(libc::EMFILE);
    }
    set_cloexec(fd, cloexec);
    let old = lock(&SOCKS).get_or_insert_with(HashMap::new).insert(fd, s);
    set_kind(fd, KIND_ULNET);
    // Dropping the socket this number named (if any) may close a connection: outside
    // the table's lock.
    release(old);
    Ok(())
}

/// Forgets `fd` as a name of a ulnet socket; returns the socket.
pub fn remove(fd: c_int) -> Option<Arc<Sock>> {
    if kind(fd) == KIND_NONE {
        return None;
    }
    set_kind(fd, KIND_NONE);
    lock(&SOCKS).as_mut()?.remove(&fd)
}

/// Drops a socket reference taken out of the table. In the child of a fork the stack
/// is the parent's: its memory is forgotten, never touched (its threads are gone and
/// its locks may be held forever).
pub fn release(s: Option<Arc<Sock>>) {
    if let Some(s) = s {
        if forked() {
            std::mem::forget(s);
        } else {
            drop(s);
        }
    }
}

/// Whether this is the child of a fork of a process whose stack was running.
pub fn forked() -> bool {
    FORKED.load(Ordering::Relaxed)
}

/// The error of every ulnet call in the child of a fork (see docs/capi.md): once a
/// message naming the call and the program, then `ENOTSUP` each time.
pub fn fork_error(call: &str) -> c_int {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        sys::stderr(&format!(
            "ulnet: {}: {call}() on a ulnet socket in the child of fork(): ulnet sockets and \
             the stack stay with the parent (ENOTSUP)\n",
            sys::program()
        ));
    }
    libc::ENOTSUP
}

/// The running stack, if any.
pub fn stack() -> Option<Stack> {
    lock(&STACK).clone()
}

/// The running stack, started with `build` when there is none yet.
///
/// # Errors
/// `ENOTSUP` in the child of a fork; the errno of `build`'s failure (after a message).
pub fn stack_or_init(build: impl FnOnce() -> Result<Stack, String>) -> Result<Stack, c_int> {
    if forked() {
        return Err(fork_error("socket"));
    }
    let mut g = lock(&STACK);
    if let Some(s) = &*g {
        return Ok(s.clone());
    }
    match build() {
        Ok(s) => {
            *g = Some(s.clone());
            drop(g);
            register_process_hooks();
            Ok(s)
        }
        Err(e) => {
            drop(g);
            sys::stderr(&format!(
                "ulnet: {}: cannot start the ulnet stack: {e}\n",
                sys::program()
            ));
            Err(libc::ENETDOWN)
        }
    }
}

/// Installs `s` as the stack (the C API's `ulnet_init`).
///
/// # Errors
/// `EALREADY` when a stack runs already.
pub fn set_stack(s: Stack) -> Result<(), c_int> {
    let mut g = lock(&STACK);
    if g.is_some() {
        return Err(libc::EALREADY);
    }
    *g = Some(s);
    drop(g);
    register_process_hooks();
    Ok(())
}

extern "C" fn after_fork_child() {
    FORKED.store(true, Ordering::Relaxed);
}

extern "C" fn at_exit() {
    shutdown_all();
}

/// Closes every ulnet socket and stops the stack, letting closing connections finish
/// (bounded by the stack's close linger): what a clean exit does. Nothing in the child
/// of a fork.
pub fn shutdown_all() {
    if forked() {
        return;
    }
    let socks = lock(&SOCKS).take();
    if let Some(m) = socks {
        for fd in m.keys() {
            set_kind(*fd, KIND_NONE);
        }
        drop(m);
    }
    let s = lock(&STACK).take();
    if let Some(stack) = &s {
        if std::env::var_os("ULNET_STATS").is_some_and(|v| v == "1") {
            sys::stderr(&stats_report(stack));
        }
    }
    // Datagrams a program sent just before exiting still leave (a shared UDP port's
    // engine socket is held by the demultiplexer, so no socket's drop waits for it).
    if let Some(stack) = &s {
        let _ = stack.flush_datagrams(std::time::Duration::from_secs(1));
    }
    drop(s);
}

/// The counters `ULNET_STATS=1` prints at exit, one `ulnet-stats NAME VALUE` line
/// each: the interface's (frames, drops by reason), the TCP engine's, and the library's
/// own (datagrams of shared UDP ports nobody took).
fn stats_report(stack: &Stack) -> String {
    use std::fmt::Write;
    let mut out = format!("ulnet: {}: statistics at exit\n", sys::program());
    let (iface, tcp) = stack.with(|i| (i.stats().to_string(), i.tcp().map(|t| t.stats())));
    for l in iface.lines() {
        let _ = writeln!(out, "ulnet-stats {l}");
    }
    if let Some(t) = tcp {
        for (k, v) in [
            ("tcp_established", t.established),
            ("tcp_segs_in", t.segs_in),
            ("tcp_segs_out", t.segs_out),
            ("tcp_retransmitted_segments", t.retransmitted_segments),
            ("tcp_resets_sent", t.resets_sent),
            ("tcp_resets_received", t.resets_received),
            ("tcp_timeouts", t.timeouts),
            ("tcp_accept_queue_overflows", t.accept_queue_overflows),
            ("tcp_syn_cookies_sent", t.syn_cookies_sent),
            ("tcp_dropped_malformed", t.dropped_malformed),
            ("tcp_dropped_out_of_window", t.dropped_out_of_window),
            ("tcp_ooo_dropped", t.ooo_dropped),
        ] {
            let _ = writeln!(out, "ulnet-stats {k} {v}");
        }
    }
    let _ = writeln!(
        out,
        "ulnet-stats udp_shared_port_dropped {}",
        crate::udpshare::dropped()
    );
    out
}

fn register_process_hooks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: both handlers are plain functions that live as long as the process.
        unsafe {
            libc::pthread_atfork(None, None, Some(after_fork_child));
            libc::atexit(at_exit);
        }
    });
}
