//! The kernel descriptor that stands for a ulnet socket, and how its readiness follows
//! the ulnet socket's.
//!
//! A ulnet socket is handed to the program as one end (A) of an AF_UNIX datagram
//! socket pair; this crate keeps a private duplicate of A and the other end (B). The
//! kernel's poll, select and epoll then work on A like on any descriptor, mixed freely
//! with the program's other descriptors, and `fstat` says it is a socket. A's readiness
//! is set, never computed, by the loop (`Stack::watch`) and after each call here:
//!
//! - readable: B has sent A one byte (taken back when the socket stops being readable);
//! - not writable: A has sent B one datagram larger than a quarter of A's small send
//!   buffer (a unix socket is writable while its queued bytes are at most a quarter of
//!   its send buffer, `unix_writable` in net/unix/af_unix.c); B reads it back to make A
//!   writable again, which wakes A's waiters like a freed send buffer does;
//! - end of input (EPOLLRDHUP) and hang-up (EPOLLHUP): A shut down for reading, or both
//!   ways; they never go back, like the TCP states they stand for.
//!
//! - a new edge while readable: on each readiness event of the engine that finds the
//!   socket readable still (more data arrived), B sends A another byte, which wakes A's
//!   waiters as a new segment wakes a kernel socket's, so edge-triggered epoll reports
//!   it again (at most [`MAX_PULSES`] bytes wait; the next read takes them all).
//!
//! So every combination exists, including "neither readable nor writable" (a
//! connection in its handshake), which an eventfd cannot express. Each change costs one
//! system call; a change to the state it is in costs none.

use std::ffi::c_int;
use std::sync::atomic::{AtomicU8, Ordering};

use ulnet_core::net::Event;

use crate::sys;

const READABLE: u8 = 1;
const UNWRITABLE: u8 = 2;
const RDHUP: u8 = 4;
const HUP: u8 = 8;

/// Bytes of the datagram that makes A unwritable: more than a quarter of A's send
/// buffer (8 KiB once set to 4 KiB: the kernel doubles it) and less than all of it.
const FILL_LEN: usize = 4096;

/// Bytes at most waiting in A for one readable socket (its first and its re-edges).
const MAX_PULSES: u8 = 32;

/// A socket pair whose A end the program holds.
#[derive(Debug)]
pub struct Mirror {
    /// Our duplicate of A (the program may close or duplicate its numbers freely).
    a: c_int,
    /// The other end.
    b: c_int,
    state: AtomicU8,
    /// Bytes waiting in A (0 when not readable).
    pulses: AtomicU8,
}

/// Readiness as the mirror shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Level {
    /// A read, accept or receive will not block.
    pub readable: bool,
    /// A write or send will not block.
    pub writable: bool,
    /// The peer will send no more.
    pub read_closed: bool,
    /// Neither direction can move data any more: both shut down (the peer's FIN and
    /// ours, or shutdown(SHUT_RDWR)), reset, error, closed.
    pub hangup: bool,
}

impl Level {
    /// What the kernel would show for a TCP or UDP socket with the engine's readiness
    /// `ev` (an error makes it readable and writable, so the call that reports it runs).
    /// As Linux's `tcp_poll`: writable once our sending side is shut (the write fails
    /// at once with EPIPE), and a hang-up when both directions are shut, which also
    /// ends input (`POLLIN`, `POLLRDHUP`).
    pub fn of(ev: &Event, listener: bool) -> Level {
        Level {
            readable: ev.readable || ev.read_closed || ev.error || ev.hangup,
            writable: !listener && (ev.writable || ev.error || ev.write_closed),
            read_closed: ev.read_closed || ev.hangup,
            hangup: ev.error || ev.hangup,
        }
    }
}

impl Mirror {
    /// A new pair; returns it and the program's descriptor for A, or the errno. The
    /// new mirror is neither readable nor writable. Every descriptor of it is
    /// close-on-exec in the kernel: a ulnet socket cannot outlive the image whose memory
    /// holds the stack (what the program asked for is kept in `global`, for F_GETFD).
    pub fn new() -> Result<(Mirror, c_int), c_int> {
        let (a, b) = sys::socketpair_dgram()?;
        let m = Mirror {
            a,
            b,
            state: AtomicU8::new(0),
            pulses: AtomicU8::new(0),
        };
        // A small send buffer makes one datagram enough to fill it.
        sys::setsockopt_int(a, libc::SOL_SOCKET, libc::SO_SNDBUF, FILL_LEN as c_int)?;
        m.set(Level::default(), false);
        let app = sys::fcntl(a, libc::F_DUPFD_CLOEXEC, 0)?;
        Ok((m, app))
    }

    /// Whether `fd` refers to this mirror's A (the same open socket).
    pub fn fd(&self) -> c_int {
        self.a
    }

    /// Shows `l`; `event` says an event of the engine brought it (a new edge when
    /// readable already). Serialised by the caller (under the stack's interface lock, or
    /// before the socket is watched).
    pub fn set(&self, l: Level, event: bool) {
        let old = self.state.load(Ordering::Acquire);
        let mut new = old;
        let was = old & READABLE != 0;
        if l.readable && (!was || (event && old & RDHUP == 0)) {
            let n = self.pulses.load(Ordering::Relaxed);
            if n < MAX_PULSES && sys::send(self.b, &[1], libc::MSG_DONTWAIT).is_ok() {
                self.pulses.store(n + 1, Ordering::Relaxed);
                new |= READABLE;
            }
        } else if !l.readable && was {
            let mut b = [0u8; 64];
            while sys::recv(self.a, &mut b, libc::MSG_DONTWAIT).is_ok() {}
            self.pulses.store(0, Ordering::Relaxed);
            new &= !READABLE;
        }
        if l.writable == (old & UNWRITABLE != 0) {
            let r = if l.writable {
                let mut b = [0u8; 8];
                sys::recv(self.b, &mut b, libc::MSG_DONTWAIT | libc::MSG_TRUNC)
            } else {
                sys::send(self.a, &[0; FILL_LEN], libc::MSG_DONTWAIT)
            };
            if r.is_ok() || l.writable {
                new ^= UNWRITABLE;
            }
        }
        if l.read_closed && old & RDHUP == 0 {
            let _ = sys::shutdown(self.a, libc::SHUT_RD);
            new |= RDHUP;
        }
        if l.hangup && old & HUP == 0 {
            let _ = sys::shutdown(self.a, libc::SHUT_RDWR);
            new |= HUP | RDHUP;
        }
        if new != old {
            self.state.store(new, Ordering::Release);
        }
    }

    /// What the mirror shows now.
    pub fn level(&self) -> Level {
        let s = self.state.load(Ordering::Acquire);
        Level {
            readable: s & READABLE != 0,
            writable: s & UNWRITABLE == 0,
            read_closed: s & RDHUP != 0,
            hangup: s & HUP != 0,
        }
    }

    /// Waits on A for `events` (POLLIN, POLLOUT), up to `timeout`.
    ///
    /// # Errors
    /// `EINTR` when a signal handler ran; `EAGAIN` when the time passed.
    pub fn wait(&self, events: i16, timeout: Option<std::time::Duration>) -> Result<(), c_int> {
        match sys::wait(self.a, events, timeout)? {
            true => Ok(()),
            false => Err(libc::EAGAIN),
        }
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        let _ = sys::close(self.a);
        let _ = sys::close(self.b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the kernel's poll says about the mirror's descriptor now.
    fn polled(m: &Mirror) -> i16 {
        let mut p = libc::pollfd {
            fd: m.fd(),
            events: libc::POLLIN | libc::POLLOUT | libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one live pollfd, no waiting.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        assert!(n >= 0);
        p.revents
    }

    fn lv(readable: bool, writable: bool) -> Level {
        Level {
            readable,
            writable,
            ..Level::default()
        }
    }

    #[test]
    fn every_combination_of_readable_and_writable_shows() {
        let (m, app) = Mirror::new().unwrap();
        let in_out = |m: &Mirror| {
            let r = polled(m);
            (r & libc::POLLIN != 0, r & libc::POLLOUT != 0)
        };
        assert_eq!(in_out(&m), (false, false), "a new mirror is neither");
        for (r, w) in [
            (true, false),
            (true, true),
            (false, true),
            (false, false),
            (true, true),
        ] {
            m.set(lv(r, w), false);
            assert_eq!(in_out(&m), (r, w), "set readable {r} writable {w}");
            assert_eq!(m.level(), lv(r, w));
        }
        sys::close(app).unwrap();
    }

    #[test]
    fn events_while_readable_queue_new_edges_and_one_read_clears_them() {
        let (m, app) = Mirror::new().unwrap();
        // SAFETY: no pointers.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: 7,
        };
        // SAFETY: valid descriptors and event.
        let added = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, m.fd(), &mut ev) };
        assert_eq!(added, 0);
        let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
        // SAFETY: `out` holds 4 events.
        let wait = |out: &mut [libc::epoll_event; 4]| unsafe {
            libc::epoll_wait(ep, out.as_mut_ptr(), 4, 0)
        };
        m.set(lv(true, true), true);
        assert_eq!(wait(&mut out), 1, "first edge");
        assert_eq!(wait(&mut out), 0, "no edge without a change");
        m.set(lv(true, true), false);
        assert_eq!(wait(&mut out), 0, "a refresh is no new edge");
        m.set(lv(true, true), true);
        assert_eq!(
            wait(&mut out),
            1,
            "an engine event while readable is a new edge"
        );
        for _ in 0..100 {
            m.set(lv(true, true), true);
        }
        m.set(lv(false, true), false);
        assert_eq!(
            polled(&m) & libc::POLLIN,
            0,
            "all queued bytes are taken back"
        );
        sys::close(ep).unwrap();
        sys::close(app).unwrap();
    }

    #[test]
    fn end_of_input_and_hangup_stick() {
        let (m, app) = Mirror::new().unwrap();
        m.set(
            Level {
                read_closed: true,
                readable: true,
                writable: true,
                hangup: false,
            },
            true,
        );
        let r = polled(&m);
        assert!(r & libc::POLLRDHUP != 0 && r & libc::POLLIN != 0, "{r:x}");
        assert_eq!(r & libc::POLLHUP, 0);
        m.set(
            Level::of(
                &ulnet_core::net::Event {
                    token: ulnet_core::net::Token(0),
                    readable: true,
                    writable: true,
                    read_closed: true,
                    error: true,
                    write_closed: false,
                    hangup: false,
                },
                false,
            ),
            true,
        );
        let r = polled(&m);
        assert!(r & libc::POLLHUP != 0 && r & libc::POLLOUT != 0, "{r:x}");
        sys::close(app).unwrap();
    }
}
