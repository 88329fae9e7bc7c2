//! Async sockets for tokio (feature `tokio`): [`AsyncRead`]/[`AsyncWrite`] for
//! [`TcpStream`], async connect and accept, async UDP send and receive.
//!
//! A pending operation stores the task's waker in the socket's registry entry under
//! the interface lock; the runtime loop wakes it on the socket's next readiness event
//! (see [`reactor`](super::reactor)). Nothing polls on a timer. One waker per direction
//! and socket: like tokio's own sockets, concurrent reads of one stream from two tasks
//! wake only the last one to wait.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::error::stopped;
use super::reactor::{Dir, Key};
use super::stack::Stack;
use super::{TcpListener, TcpStream, UdpSocket};
use ulnet_stack::iface::Interface;

impl Stack {
    /// One try at `op` with the interface locked; when pending, the task's waker is
    /// registered (and `arm` run) under the same lock, so no readiness is missed.
    ///
    /// A write that finds the send buffer full first turns the loop once on the task's
    /// own thread when no one else is turning (the ACKs that free the buffer may wait
    /// on the ring), as a blocked `write` does (`runtime/turn.rs`), rather than wait for
    /// the loop's thread to take them in and hand the task a wake-up: `ulnet bench
    /// hurd-tcp --case tx-1500`, tokio sending at MTU 1500, 7.20-7.27 → 7.55-7.76 Gb/s
    /// (docs/performance.md, "Session 17"). Reads do not: at MTU 9000 the same turn cut
    /// a tokio reader's stream from 20 to 15 Gb/s.
    pub(crate) fn poll_op<T>(
        &self,
        key: Key,
        dir: Dir,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&mut Interface) -> Poll<io::Result<T>>,
        arm: &dyn Fn(),
    ) -> Poll<io::Result<T>> {
        let mut turn = matches!(dir, Dir::Write);
        let r = loop {
            let mut g = self.handle().lock();
            match op(&mut g) {
                Poll::Ready(r) => break Poll::Ready(r),
                Poll::Pending if self.registry().is_closed() => break Poll::Ready(Err(stopped())),
                Poll::Pending if turn => {
                    drop(g);
                    turn = false;
                    self.engine().turn_or_wake();
                }
                Poll::Pending => {
                    self.registry().set_waker(key, dir, cx.waker());
                    arm();
                    break Poll::Pending;
                }
            }
        };
        self.handle().wake();
        r
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
                &|| {},
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
            &|| {},
        )
    }

    fn poll_write_slice(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.stack().poll_op(
            Key::Tcp(self.handle()),
            Dir::Write,
            cx,
            |iface| self.try_write(iface, buf),
            &|| {},
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

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stack().handle().wake();
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
                &|| {},
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
                &|| {},
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
                &|| {},
            )
        })
        .await
    }
}
