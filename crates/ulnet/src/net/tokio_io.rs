//! Async sockets for tokio (feature `tokio`): [`AsyncRead`]/[`AsyncWrite`] for
//! [`TcpStream`], async connect and accept, async UDP send and receive.
//!
//! A pending operation stores the task's waker in the socket's registry entry under
//! the interface lock; whichever thread turns the loop wakes it on the socket's next
//! readiness event (see [`reactor`](super::reactor)). Inside a tokio runtime the task
//! also waits on the loop's channel through the runtime's reactor, and turns the loop
//! itself when frames come ([`Stack::poll_op`]); the loop's thread then stays parked.
//! Nothing polls on a timer. One waker per direction and socket: like tokio's own
//! sockets, concurrent reads of one stream from two tasks wake only the last one to
//! wait.
//!
//! A TCP write inside a runtime copies into the send buffer and returns; what tasks
//! wrote leaves in one turn once the writing task yields to its runtime (or at
//! `flush`), not in each write ([`Stack::flush_on_yield`]).

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

use super::error::stopped;
use super::reactor::{Dir, Key};
use super::stack::{Queued, Stack};
use super::{TcpListener, TcpStream, UdpSocket};
use crate::runtime::AsyncTurn;
use ulnet_stack::iface::Interface;

/// The loop's channel registered with a tokio runtime's reactor, so a task whose
/// operation is pending sleeps in the reactor on the channel and turns the loop itself
/// when frames come ([`Engine::async_turn`](crate::runtime::Engine)).
pub(crate) struct ReactorFd {
    /// `None` when the loop cannot be driven this way (it busy-polls, or its channel
    /// has no descriptor).
    fd: Option<AsyncFd<OwnedFd>>,
    /// The runtime the descriptor was registered with is gone: tasks wait for the
    /// loop's thread instead.
    broken: AtomicBool,
}

impl ReactorFd {
    /// Registers `fd` with the current runtime's reactor for readability.
    ///
    /// # Panics
    /// In tokio, when the current runtime has its IO driver disabled, as tokio's own
    /// sockets do ([`StackBuilder::drive_from_tasks`](super::StackBuilder::drive_from_tasks)).
    // `with_interest` is deprecated for inner types whose descriptor could change or
    // close under the reactor; an `OwnedFd` owns its descriptor for the `AsyncFd`'s
    // whole life, which is what its unsafe successor asks the caller to promise (and
    // this crate has no unsafe code).
    #[allow(deprecated)]
    fn new(fd: Option<BorrowedFd<'_>>) -> ReactorFd {
        let fd = fd
            .and_then(|fd| fd.try_clone_to_owned().ok())
            .and_then(|fd| AsyncFd::with_interest(fd, Interest::READABLE).ok());
        ReactorFd {
            fd,
            broken: AtomicBool::new(false),
        }
    }

    fn get(&self) -> Option<&AsyncFd<OwnedFd>> {
        self.fd
            .as_ref()
            .filter(|_| !self.broken.load(Ordering::Relaxed))
    }
}

/// Turns a task may take in one poll before it yields to its runtime's other tasks.
const TURNS_PER_POLL: u32 = 64;

/// Sends what tokio tasks wrote when dropped: when the task spawned to hold it runs,
/// or, if its runtime shuts down first, when the runtime drops it. `.1` is the token of
/// the thread that spawned it.
struct FlushOnDrop(std::sync::Weak<super::stack::StackInner>, u64);

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        if let Some(stack) = Stack::upgrade(&self.0) {
            // Cleared before the turn, and only if no other thread's spawn replaced it:
            // a write that lands during the turn spawns the next.
            let _ = stack.inner().flush_spawned.compare_exchange(
                self.1,
                0,
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
            stack.engine().after_task_call();
        }
    }
}

/// A nonzero number for the calling thread, distinct from every other thread's.
fn thread_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TOKEN: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TOKEN.with(|t| *t)
}

impl Stack {
    /// After a task's TCP write: the turn that sends it runs once the task yields to its
    /// runtime (a task spawned for it), not in the write. A task writing a stream writes
    /// on until its send buffer is full or it awaits something else, and everything it
    /// wrote meanwhile leaves in one turn: the way io_uring runtimes submit a task's
    /// operations when it yields. Turning in each write flushed every 64 KB write alone,
    /// and each flush that found the receiver asleep paid its wake-up: a tokio sender at
    /// MTU 1500 made 15,200 flushes a GB against the blocking writer's 12,700 and sent at
    /// 0.92x the kernel with offloads off at 1.05x its CPU; now 7,700 flushes, 1.00x at
    /// 0.98x (docs/performance-log.md, "Session 30"). A task that awaits anything yields, so
    /// a request leaves before its reply is awaited; [`AsyncWrite::poll_flush`] sends at
    /// once. Outside a tokio runtime the write turns as before.
    ///
    /// One spawned turn pending per stack and thread: a write on another worker thread
    /// spawns its own rather than wait for a worker whose task may not yield soon (a
    /// task spawned from a worker usually runs there, after the current one).
    fn flush_on_yield(&self) {
        // Task activity at once: the loop's thread stays parked for tasks.
        self.engine().count_task_call();
        let token = thread_token();
        if self.inner().flush_spawned.swap(token, Ordering::SeqCst) == token {
            return;
        }
        let guard = FlushOnDrop(self.downgrade(), token);
        match tokio::runtime::Handle::try_current() {
            // Dropped unpolled if the runtime is shutting down: the guard sends then.
            Ok(rt) => drop(rt.spawn(async move { drop(guard) })),
            Err(_) => drop(guard),
        }
    }

    /// `op` with the interface locked until it is ready or must wait; a pending
    /// operation registers the task's waker (under the same lock, so no readiness is
    /// missed) and, where the loop sleeps on a channel descriptor, the descriptor with
    /// the task's reactor.
    ///
    /// While it is the only operation waiting, the task's own thread then drives the
    /// loop, as a blocked call does (`runtime/turn.rs`): woken by its reactor when
    /// frames arrive, it turns the loop ([`Engine::async_turn`](crate::runtime::Engine))
    /// and looks at its socket again, while the loop's thread stays parked. Before, the
    /// loop's thread took every batch in and woke the task: two context switches per
    /// batch on a shared core (46,000 context switches and 54,000 `futex` calls per GB
    /// received at MTU 1500, against 2,100 and 415 now; docs/performance-log.md, "Session
    /// 18"). Where the loop cannot be driven this way, or other operations wait too (the
    /// reactor wakes one task per readiness, the last to register), a write that finds
    /// the send buffer full turns the loop once (the ACKs that free it may wait on the
    /// ring) and every pending operation wakes the loop's thread.
    ///
    /// `queued` says, under the lock, whether the finished operation left something for
    /// the wire; only then does a turn (or a wake-up of the loop's thread) follow it.
    pub(crate) fn poll_op<T>(
        &self,
        key: Key,
        dir: Dir,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&mut Interface) -> Poll<io::Result<T>>,
        queued: Queued,
    ) -> Poll<io::Result<T>> {
        let reactor = self.reactor_fd();
        // A writer the reactor will not serve turns the loop once before it waits.
        let mut turn_once = matches!(dir, Dir::Write);
        let mut turns = 0;
        loop {
            let mut g = self.handle().lock();
            let r = match op(&mut g) {
                Poll::Ready(r) => {
                    let leaves = queued.check(&g);
                    drop(g);
                    if reactor.is_none() {
                        self.handle().wake();
                        return Poll::Ready(r);
                    }
                    if self.registry().waiting() > 0 {
                        // This task may have been the one watching the channel, and
                        // others still wait: the loop's thread takes the channel back
                        // (its waker left with the socket, woken through the reactor,
                        // is not one of them).
                        self.registry().forget_waker(key, dir, cx.waker());
                        if self.registry().waiting() > 0 {
                            self.engine().watch_from_task(false);
                        }
                    }
                    if leaves {
                        match queued {
                            Queued::OnYield => self.flush_on_yield(),
                            _ => self.engine().after_task_call(),
                        }
                    }
                    return Poll::Ready(r);
                }
                Poll::Pending if self.registry().is_closed() => Poll::Ready(Err(stopped())),
                Poll::Pending => {
                    self.registry().set_waker(key, dir, cx.waker());
                    Poll::Pending
                }
            };
            drop(g);
            if r.is_ready() {
                self.handle().wake();
                return r;
            }
            // Other operations waiting too: the reactor wakes one task per readiness (the
            // last to register), which may be gone or waiting for something else by
            // then, so the loop's thread keeps the channel and wakes each task through
            // its socket.
            let fd = match reactor {
                Some(fd) if self.registry().waiting() <= 1 => fd,
                _ => {
                    if reactor.is_some() {
                        self.engine().watch_from_task(false);
                    }
                    if turn_once {
                        // The ACKs that free the send buffer may wait on the ring.
                        turn_once = false;
                        self.engine().turn_or_wake();
                        continue;
                    }
                    self.handle().wake();
                    return Poll::Pending;
                }
            };
            self.engine().watch_from_task(true);
            if turns == TURNS_PER_POLL {
                // Cooperative: other tasks of this runtime get a turn too.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            turns += 1;
            match fd.poll_read_ready(cx) {
                // The reactor wakes the task when frames come; its socket's waker when
                // another thread's turn brings its news.
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(_)) => {
                    // The runtime the descriptor was registered with is gone.
                    self.reactor_fd_broken();
                    self.engine().watch_from_task(false);
                    self.handle().wake();
                    return Poll::Pending;
                }
                Poll::Ready(Ok(mut ready)) => match self.engine().async_turn() {
                    AsyncTurn::Stopped => {
                        ready.retain_ready();
                        return Poll::Pending;
                    }
                    AsyncTurn::Busy => {
                        // Whoever turns wakes the socket if its news came; if they
                        // come after that turn, nobody may be waiting on the reactor
                        // (the turner's own operation may have finished): look again
                        // after the runtime's other tasks, readiness kept.
                        ready.retain_ready();
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    AsyncTurn::Progress => ready.retain_ready(),
                    AsyncTurn::Spin => {
                        // Polled again after the runtime's other tasks (and a look
                        // at its reactor), the readiness kept so it turns at once.
                        ready.retain_ready();
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    // Cleared with the readiness event's own tick: a frame that came
                    // after the turn looked at the ring has moved it, and stays.
                    AsyncTurn::Idle => ready.clear_ready(),
                },
            }
        }
    }

    /// This stack's channel registered with the current runtime's reactor (on first
    /// use), when tasks can drive the loop. Outside a tokio runtime (another executor
    /// polling the future) there is no reactor: the loop's thread hands over, as with
    /// [`drive_from_tasks(false)`](super::StackBuilder::drive_from_tasks), and a later
    /// operation inside a runtime registers.
    fn reactor_fd(&self) -> Option<&AsyncFd<OwnedFd>> {
        let inner = self.inner();
        if let Some(r) = inner.reactor_fd.get() {
            return r.get();
        }
        let fd = self.engine().async_fd().filter(|_| inner.drive_from_tasks);
        if fd.is_some() && tokio::runtime::Handle::try_current().is_err() {
            return None;
        }
        inner.reactor_fd.get_or_init(|| ReactorFd::new(fd)).get()
    }

    fn reactor_fd_broken(&self) {
        if let Some(r) = self.inner().reactor_fd.get() {
            r.broken.store(true, Ordering::Relaxed);
        }
    }
}

impl TcpStream {
    /// Opens a connection to `addr` without blocking the task's thread.
    ///
    /// # Errors
    /// As [`TcpStream::connect`].
    pub async fn connect_async(stack: &Stack, addr: SocketAddr) -> io::Result<TcpStream> {
        let s = TcpStream::connect_nonblocking(stack, addr)?;
        poll_fn(|cx| {
            let h = s.handle();
            s.stack().poll_op(
                Key::Tcp(h),
                Dir::Write,
                cx,
                |iface| s.poll_established(iface),
                Queued::Nothing,
            )
        })
        .await?;
        s.set_nonblocking(false)?;
        Ok(s)
    }

    /// Reads into `buf` without blocking the task's thread.
    ///
    /// # Errors
    /// As [`std::io::Read::read`] on the stream.
    pub async fn read_async(&self, buf: &mut [u8]) -> io::Result<usize> {
        poll_fn(|cx| self.poll_read_slice(cx, buf)).await
    }

    /// Writes from `buf` without blocking the task's thread.
    ///
    /// # Errors
    /// As [`std::io::Write::write`] on the stream.
    pub async fn write_async(&self, buf: &[u8]) -> io::Result<usize> {
        poll_fn(|cx| self.poll_write_slice(cx, buf)).await
    }

    fn poll_read_slice(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.stack().poll_op(
            Key::Tcp(self.handle()),
            Dir::Read,
            cx,
            |iface| self.try_read(iface, buf, false),
            Queued::TcpOutput,
        )
    }

    fn poll_write_slice(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.stack().poll_op(
            Key::Tcp(self.handle()),
            Dir::Write,
            cx,
            |iface| self.try_write(iface, buf),
            Queued::OnYield,
        )
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let dst = buf.initialize_unfilled();
        match self.poll_read_slice(cx, dst) {
            Poll::Ready(Ok(n)) => {
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_slice(cx, buf)
    }

    /// Sends what the task wrote now, rather than when it yields (a write's data
    /// otherwise leaves in one turn once the writing task yields to its runtime).
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stack().engine().after_task_call();
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.shutdown(std::net::Shutdown::Write))
    }
}

impl TcpListener {
    /// Waits for a connection without blocking the task's thread.
    ///
    /// # Errors
    /// `NotConnected` when the stack stopped.
    pub async fn accept_async(&self) -> io::Result<(TcpStream, SocketAddr)> {
        poll_fn(|cx| {
            self.stack().poll_op(
                Key::Listener(self.handle()),
                Dir::Read,
                cx,
                |iface| self.try_accept(iface),
                Queued::Maybe,
            )
        })
        .await
    }
}

impl UdpSocket {
    /// Sends one datagram to `addr` without blocking the task's thread.
    ///
    /// # Errors
    /// As [`UdpSocket::send_to`].
    pub async fn send_to_async(&self, buf: &[u8], addr: SocketAddr) -> io::Result<usize> {
        let start = crate::stage::send_start();
        poll_fn(|cx| {
            self.stack().poll_op(
                self.key(),
                Dir::Write,
                cx,
                |iface| self.try_send_to(iface, buf, addr, start),
                Queued::Maybe,
            )
        })
        .await
    }

    /// Receives one datagram without blocking the task's thread.
    ///
    /// # Errors
    /// As [`UdpSocket::recv_from`].
    pub async fn recv_from_async(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        poll_fn(|cx| {
            self.stack().poll_op(
                self.key(),
                Dir::Read,
                cx,
                |iface| self.try_recv_from(iface, buf),
                Queued::Nothing,
            )
        })
        .await
    }
}
