//! [`TcpListener`] and [`TcpStream`]: `std::net`'s TCP types over a ulnet [`Stack`].
//!
//! A stream and its [`try_clone`](TcpStream::try_clone)s share one connection (like a
//! duplicated descriptor); the last one dropped closes it: gracefully (FIN after the
//! queued data, RFC 9293 §3.10.4), or with a reset when the linger time is zero
//! (RFC 9293 §3.10.5), or after waiting up to the linger time for the data to be sent.
//! Unread received data at close also makes a reset (RFC 1122 §4.2.2.13), as on Linux.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

use ulnet_stack::iface::Interface;
use ulnet_stack::tcp::{
    self as etcp, Algorithm, Keepalive, ListenerHandle, ListenerLimits, RecvError, SocketError,
    SocketHandle, SocketOption, State, Tcp, TcpInfo,
};

use super::error::{self, err, no_tcp};
use super::poll::Source;
use super::reactor::{Key, Notify};
use super::stack::{Queued, Stack};

/// The accept queue a listener asks for.
const BACKLOG: usize = 1024;

fn one_addr(addr: impl ToSocketAddrs) -> io::Result<SocketAddr> {
    addr.to_socket_addrs()?
        .next()
        .ok_or_else(|| err(io::ErrorKind::InvalidInput, "no address given"))
}

/// The source address for a connection to `remote` ([`Stack::source_for`]), with the
/// interface locked.
fn source_for(iface: &Interface, remote: IpAddr) -> io::Result<IpAddr> {
    super::stack::source_for(iface, remote).ok_or_else(|| {
        err(
            io::ErrorKind::AddrNotAvailable,
            if remote.is_ipv6() {
                "the stack has no usable IPv6 address (StackBuilder::address; duplicate address detection must pass)"
            } else {
                "the stack has no IPv4 address (StackBuilder::address)"
            },
        )
    })
}

fn tcp(iface: &mut Interface) -> io::Result<&mut Tcp> {
    iface.tcp_mut().ok_or_else(no_tcp)
}

/// Options shared by a socket and its clones (like a descriptor's flags).
#[derive(Debug, Default)]
struct Opts {
    nonblocking: AtomicBool,
    read_timeout: Mutex<Option<Duration>>,
    write_timeout: Mutex<Option<Duration>>,
    linger: Mutex<Option<Duration>>,
    nodelay: AtomicBool,
}

fn get<T: Copy>(m: &Mutex<T>) -> T {
    *m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn set<T>(m: &Mutex<T>, v: T) {
    *m.lock().unwrap_or_else(PoisonError::into_inner) = v;
}

fn check_timeout(d: Option<Duration>) -> io::Result<()> {
    if d == Some(Duration::ZERO) {
        return Err(err(io::ErrorKind::InvalidInput, "zero timeout"));
    }
    Ok(())
}

/// How [`TcpStream::connect_with`] opens a connection: the local address, the options
/// the connection gets before its SYN, and whether to wait for the handshake.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    local: Option<SocketAddr>,
    options: Vec<SocketOption>,
    nonblocking: bool,
}

impl ConnectOptions {
    /// The defaults: the stack's source address for the destination, an ephemeral
    /// port (RFC 6056), the engine's option defaults, waiting for the handshake.
    pub fn new() -> Self {
        Self::default()
    }

    /// Connects from `local` (like `bind` before `connect`): an unspecified IP takes
    /// the stack's source address for the destination, port 0 an ephemeral port.
    pub fn local(mut self, local: SocketAddr) -> Self {
        self.local = Some(local);
        self
    }

    /// Applies `opt` to the connection before its SYN is built; a later option of the
    /// same kind replaces an earlier one.
    pub fn option(mut self, opt: SocketOption) -> Self {
        let kind = std::mem::discriminant(&opt);
        self.options.retain(|o| std::mem::discriminant(o) != kind);
        self.options.push(opt);
        self
    }

    /// Returns as soon as the SYN is queued (`true`) and leaves the stream in
    /// non-blocking mode, as [`TcpStream::connect_nonblocking`] does.
    pub fn nonblocking(mut self, on: bool) -> Self {
        self.nonblocking = on;
        self
    }
}

#[derive(Debug)]
struct StreamInner {
    stack: Stack,
    h: SocketHandle,
    local: SocketAddr,
    peer: SocketAddr,
    notify: Arc<Notify>,
    opts: Opts,
    /// `take_error` reported the connection's hard error already (SO_ERROR clears
    /// `sk_err` once read).
    error_taken: AtomicBool,
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        let h = self.h;
        let stack = &self.stack;
        let linger = get(&self.opts.linger);
        if let Some(d) = linger.filter(|d| !d.is_zero()) {
            // SO_LINGER with a time: send what is queued and the FIN, wait (bounded)
            // for them to be acknowledged, then close.
            let _ = self.stack.block(
                &self.notify,
                false,
                Some(d),
                io::ErrorKind::TimedOut,
                |iface| {
                    let Some(t) = iface.tcp_mut() else {
                        return Poll::Ready(Ok(()));
                    };
                    let _ = t.shutdown(stack.handle().now(), h, etcp::Shutdown::Write);
                    match t.state(h) {
                        Ok(State::SynSent | State::SynReceived | State::Established)
                        | Ok(
                            State::FinWait1 | State::CloseWait | State::LastAck | State::Closing,
                        ) => Poll::Pending,
                        _ => Poll::Ready(Ok(())),
                    }
                },
                Queued::Maybe,
            );
        }
        self.stack.handle().with(|iface, now| {
            if let Some(t) = iface.tcp_mut() {
                let _ = if linger == Some(Duration::ZERO) {
                    t.abort(now, h)
                } else {
                    t.close(now, h)
                };
            }
        });
        self.stack.registry().remove(Key::Tcp(h));
    }
}

/// A TCP connection, like [`std::net::TcpStream`]. `Send + Sync`; reads and writes
/// may come from different threads (through clones or `&TcpStream`).
#[derive(Debug)]
pub struct TcpStream {
    inner: Arc<StreamInner>,
}

impl TcpStream {
    fn adopt(stack: &Stack, iface: &mut Interface, h: SocketHandle) -> io::Result<TcpStream> {
        let (local, peer) = tcp(iface)?.addresses(h).map_err(error::socket)?;
        let notify = stack.registry().notify(Key::Tcp(h));
        Ok(TcpStream {
            inner: Arc::new(StreamInner {
                stack: stack.clone(),
                h,
                local,
                peer,
                notify,
                opts: Opts::default(),
                error_taken: AtomicBool::new(false),
            }),
        })
    }

    /// Opens a connection to `addr` (the first address it resolves to) and waits for
    /// the handshake.
    ///
    /// # Errors
    /// `ConnectionRefused` (RST in reply), `TimedOut` (no answer after the SYN
    /// retries), `InvalidInput` (unspecified or port 0), `AddrNotAvailable` (no free
    /// port), `NotConnected` (stack stopped).
    pub fn connect(stack: &Stack, addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        Self::connect_inner(stack, one_addr(addr)?, None)
    }

    /// Like [`connect`](Self::connect) but gives up after `timeout` (the attempt is
    /// aborted).
    ///
    /// # Errors
    /// As [`connect`](Self::connect); `TimedOut` when `timeout` passes; `InvalidInput`
    /// for a zero timeout.
    pub fn connect_timeout(
        stack: &Stack,
        addr: &SocketAddr,
        timeout: Duration,
    ) -> io::Result<TcpStream> {
        check_timeout(Some(timeout))?;
        Self::connect_inner(stack, *addr, Some(timeout))
    }

    fn connect_inner(
        stack: &Stack,
        remote: SocketAddr,
        timeout: Option<Duration>,
    ) -> io::Result<TcpStream> {
        let remote_ip = remote.ip();
        let stream = stack.handle().with(|iface, now| {
            let local = SocketAddr::new(source_for(iface, remote_ip)?, 0);
            let h = tcp(iface)?
                .connect(now, local, remote)
                .map_err(error::connect)?;
            Self::adopt(stack, iface, h)
        })?;
        stream.wait_established(timeout)?;
        Ok(stream)
    }

    /// Starts a connection without waiting (for non-blocking use with a
    /// [`Poller`](super::Poller): writable means established; an error event means it
    /// failed, and [`take_error`](Self::take_error) says why).
    ///
    /// # Errors
    /// As [`connect`](Self::connect) for the immediate failures.
    pub fn connect_nonblocking(stack: &Stack, addr: SocketAddr) -> io::Result<TcpStream> {
        Self::connect_with(stack, addr, &ConnectOptions::new().nonblocking(true))
    }

    /// Opens a connection to `remote` as `opts` says: from a chosen local address or
    /// port, with socket options applied before the SYN is built (what `setsockopt` and
    /// `bind` before `connect` do on Linux: the receive buffer then also picks the window
    /// scale the SYN offers, RFC 7323 §2.3, and the MSS option follows
    /// [`SocketOption::MaxSegment`]), waiting for the handshake unless
    /// [`ConnectOptions::nonblocking`].
    ///
    /// # Errors
    /// As [`connect`](Self::connect); `AddrInUse` when the chosen local port already
    /// has a connection to `remote`; `AddrNotAvailable` for a local address of another
    /// family.
    pub fn connect_with(
        stack: &Stack,
        remote: SocketAddr,
        opts: &ConnectOptions,
    ) -> io::Result<TcpStream> {
        let s = stack.handle().with(|iface, now| {
            let local = match opts.local {
                Some(l) if l.is_ipv4() != remote.is_ipv4() => {
                    return Err(err(
                        io::ErrorKind::AddrNotAvailable,
                        "the local address is of another family than the remote one",
                    ))
                }
                Some(l) if !l.ip().is_unspecified() => l,
                l => SocketAddr::new(source_for(iface, remote.ip())?, l.map_or(0, |l| l.port())),
            };
            let h = tcp(iface)?
                .connect_with(now, local, remote, &opts.options)
                .map_err(error::connect)?;
            Self::adopt(stack, iface, h)
        })?;
        if opts.nonblocking {
            s.inner.opts.nonblocking.store(true, Ordering::Relaxed);
        } else {
            s.wait_established(None)?;
        }
        Ok(s)
    }

    /// Whether the handshake finished (ready `Ok`), failed, or is still running.
    pub(crate) fn poll_established(&self, iface: &mut Interface) -> Poll<io::Result<()>> {
        let h = self.inner.h;
        let t = match tcp(iface) {
            Ok(t) => t,
            Err(e) => return Poll::Ready(Err(e)),
        };
        match t.readiness(h) {
            Err(e) => Poll::Ready(Err(error::socket(e))),
            Ok(r) => match r.error {
                Some(e) => Poll::Ready(Err(error::conn(e))),
                None => match t.state(h) {
                    Ok(State::SynSent) => Poll::Pending,
                    Ok(State::Closed) => Poll::Ready(Err(err(
                        io::ErrorKind::ConnectionAborted,
                        "connection closed during the handshake",
                    ))),
                    _ => Poll::Ready(Ok(())),
                },
            },
        }
    }

    fn wait_established(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.inner.stack.block(
            &self.inner.notify,
            false,
            timeout,
            io::ErrorKind::TimedOut,
            |iface| self.poll_established(iface),
            Queued::Maybe,
        )
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn handle(&self) -> SocketHandle {
        self.inner.h
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn stack(&self) -> &Stack {
        &self.inner.stack
    }

    /// The local address.
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.inner.local)
    }

    /// The peer's address.
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.inner.peer)
    }

    /// Another handle to the same connection (options are shared, as with `dup`).
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        Ok(TcpStream {
            inner: Arc::clone(&self.inner),
        })
    }

    /// One try at reading, with the interface locked.
    pub(crate) fn try_read(
        &self,
        iface: &mut Interface,
        buf: &mut [u8],
        peek: bool,
    ) -> Poll<io::Result<usize>> {
        let t = match tcp(iface) {
            Ok(t) => t,
            Err(e) => return Poll::Ready(Err(e)),
        };
        let r = if peek {
            t.peek(self.inner.h, buf)
        } else {
            t.recv(self.inner.stack.handle().now(), self.inner.h, buf)
        };
        match r {
            Ok(n) => Poll::Ready(Ok(n)),
            Err(RecvError::WouldBlock) if buf.is_empty() => Poll::Ready(Ok(0)),
            Err(RecvError::WouldBlock) => Poll::Pending,
            // std: reads after `shutdown(Read)` return EOF.
            Err(RecvError::Closed) => Poll::Ready(Ok(0)),
            Err(e) => Poll::Ready(Err(error::recv(e))),
        }
    }

    /// One try at writing, with the interface locked.
    pub(crate) fn try_write(&self, iface: &mut Interface, buf: &[u8]) -> Poll<io::Result<usize>> {
        let t = match tcp(iface) {
            Ok(t) => t,
            Err(e) => return Poll::Ready(Err(e)),
        };
        match t.send(self.inner.stack.handle().now(), self.inner.h, buf) {
            Ok(0) if !buf.is_empty() => Poll::Pending,
            Ok(n) => {
                self.inner
                    .stack
                    .engine()
                    .note_write(t.held_by_windows(self.inner.h));
                Poll::Ready(Ok(n))
            }
            Err(e) => Poll::Ready(Err(error::send(e))),
        }
    }

    fn read_impl(&self, buf: &mut [u8], peek: bool) -> io::Result<usize> {
        let o = &self.inner.opts;
        self.inner.stack.block(
            &self.inner.notify,
            o.nonblocking.load(Ordering::Relaxed),
            get(&o.read_timeout),
            io::ErrorKind::WouldBlock,
            |iface| self.try_read(iface, buf, peek),
            Queued::TcpOutput,
        )
    }

    fn write_impl(&self, buf: &[u8]) -> io::Result<usize> {
        let o = &self.inner.opts;
        self.inner.stack.block(
            &self.inner.notify,
            o.nonblocking.load(Ordering::Relaxed),
            get(&o.write_timeout),
            io::ErrorKind::WouldBlock,
            |iface| self.try_write(iface, buf),
            Queued::Maybe,
        )
    }

    /// Reads without removing the data from the receive buffer.
    ///
    /// # Errors
    /// As [`Read::read`].
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_impl(buf, true)
    }

    /// Shuts down reading (later reads return EOF, arriving data is discarded),
    /// writing (a FIN follows the queued data; later writes fail with `BrokenPipe`)
    /// or both.
    ///
    /// # Errors
    /// `NotConnected` when the connection is already gone.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        let how = match how {
            Shutdown::Read => etcp::Shutdown::Read,
            Shutdown::Write => etcp::Shutdown::Write,
            Shutdown::Both => etcp::Shutdown::Both,
        };
        let h = self.inner.h;
        self.inner
            .stack
            .handle()
            .with(|iface, now| tcp(iface)?.shutdown(now, h, how).map_err(error::socket))
    }

    /// Changes one of the engine's per-connection options (see [`SocketOption`] for
    /// when each may change: a buffer size only while nothing is held, a receive buffer
    /// only growing once a window was offered).
    ///
    /// # Errors
    /// `InvalidInput` for a buffer size the connection cannot take now; `NotConnected`
    /// when the connection is gone.
    pub fn set_option(&self, opt: SocketOption) -> io::Result<()> {
        let h = self.inner.h;
        self.inner
            .stack
            .handle()
            .with(|iface, now| tcp(iface)?.set_option(now, h, opt).map_err(error::socket))
    }

    /// Turns Nagle's algorithm off (`true`) or on (RFC 1122 §4.2.3.4).
    ///
    /// # Errors
    /// `NotConnected` when the connection is gone.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.set_option(SocketOption::NoDelay(nodelay))?;
        self.inner.opts.nodelay.store(nodelay, Ordering::Relaxed);
        Ok(())
    }

    /// Whether Nagle's algorithm is off (as last set through this API; the stack's
    /// default is off).
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn nodelay(&self) -> io::Result<bool> {
        let on = self
            .inner
            .stack
            .with(|iface| iface.tcp().map(|t| !t.config().nagle).unwrap_or(true));
        Ok(on || self.inner.opts.nodelay.load(Ordering::Relaxed))
    }

    /// Keepalive probes (RFC 1122 §4.2.3.6) on with this timing, or off.
    ///
    /// # Errors
    /// `NotConnected` when the connection is gone.
    pub fn set_keepalive(&self, keepalive: Option<Keepalive>) -> io::Result<()> {
        self.set_option(SocketOption::Keepalive(keepalive))
    }

    /// Switches the congestion control algorithm of this connection.
    ///
    /// # Errors
    /// `NotConnected` when the connection is gone.
    pub fn set_congestion(&self, alg: Algorithm) -> io::Result<()> {
        self.set_option(SocketOption::Congestion(alg))
    }

    /// Acknowledge every segment at once (`false`, like `TCP_QUICKACK`) or delay
    /// ACKs (`true`, the default).
    ///
    /// # Errors
    /// `NotConnected` when the connection is gone.
    pub fn set_delayed_ack(&self, on: bool) -> io::Result<()> {
        self.set_option(SocketOption::DelayedAck(on))
    }

    /// Aborts the connection when sent data stays unacknowledged this long
    /// (RFC 5482 user timeout), or leaves it to the retransmission count.
    ///
    /// # Errors
    /// `NotConnected` when the connection is gone.
    pub fn set_user_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.set_option(SocketOption::UserTimeout(t.map(|d| {
            ulnet_stack::time::Duration::from_micros(d.as_micros().min(u64::MAX.into()) as u64)
        })))
    }

    /// What the last drop does: `None` closes gracefully in the background; `Some(0)`
    /// resets the connection; `Some(d)` waits up to `d` for the queued data and the FIN
    /// to be acknowledged, then closes.
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn set_linger(&self, linger: Option<Duration>) -> io::Result<()> {
        set(&self.inner.opts.linger, linger);
        Ok(())
    }

    /// The linger setting.
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn linger(&self) -> io::Result<Option<Duration>> {
        Ok(get(&self.inner.opts.linger))
    }

    /// Timeout of blocking reads (`None`: wait forever); a read that times out fails
    /// with `WouldBlock`, as std's does on Unix.
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        check_timeout(t)?;
        set(&self.inner.opts.read_timeout, t);
        Ok(())
    }

    /// Timeout of blocking writes (`None`: wait forever).
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        check_timeout(t)?;
        set(&self.inner.opts.write_timeout, t);
        Ok(())
    }

    /// The read timeout.
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(get(&self.inner.opts.read_timeout))
    }

    /// The write timeout.
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(get(&self.inner.opts.write_timeout))
    }

    /// Non-blocking mode: operations that would wait fail with `WouldBlock`.
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.inner
            .opts
            .nonblocking
            .store(nonblocking, Ordering::Relaxed);
        Ok(())
    }

    /// The error the connection ended with, reported once like Linux's SO_ERROR, which
    /// clears `sk_err` when it reads it (reads and writes go on failing with it);
    /// otherwise the latest ICMP soft error (host or network unreachable, RFC 1122
    /// §4.2.3.9) while the connection goes on retrying, taken once as SO_ERROR takes
    /// `sk_err_soft`.
    ///
    /// # Errors
    /// `NotConnected` when the connection is gone.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        let h = self.inner.h;
        self.inner.stack.with(|iface| {
            let tcp = tcp(iface)?;
            let r = tcp.readiness(h).map_err(error::socket)?;
            if let Some(e) = r.error {
                if self.inner.error_taken.swap(true, Ordering::Relaxed) {
                    return Ok(None);
                }
                return Ok(Some(error::conn(e)));
            }
            Ok(tcp
                .take_soft_error(h)
                .map_err(error::socket)?
                .map(error::conn))
        })
    }

    /// Statistics of the connection, like Linux `tcp_info`: state, congestion window,
    /// RTT, retransmissions, bytes acknowledged and received, negotiated options.
    ///
    /// # Errors
    /// `NotConnected` when the connection is gone.
    pub fn info(&self) -> io::Result<TcpInfo> {
        let h = self.inner.h;
        self.inner
            .stack
            .with(|iface| tcp(iface)?.info(h).map_err(error::socket))
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_impl(buf, false)
    }
}

impl Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_impl(buf)
    }

    /// Data is handed to the loop by every write; nothing is held back here.
    fn flush(&mut self) -> io::Result<()> {
        self.inner.stack.handle().wake();
        Ok(())
    }
}

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_impl(buf, false)
    }
}

impl Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_impl(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&*self).flush()
    }
}

impl super::poll::sealed::Sealed for TcpStream {
    fn key(&self) -> (Key, &Stack) {
        (Key::Tcp(self.inner.h), &self.inner.stack)
    }
}

impl Source for TcpStream {}

#[derive(Debug)]
struct ListenerInner {
    stack: Stack,
    l: ListenerHandle,
    local: SocketAddr,
    notify: Arc<Notify>,
    nonblocking: AtomicBool,
}

impl Drop for ListenerInner {
    fn drop(&mut self) {
        let l = self.l;
        self.stack.handle().with(|iface, now| {
            if let Some(t) = iface.tcp_mut() {
                let _ = t.close_listener(now, l);
            }
        });
        self.stack.registry().remove(Key::Listener(l));
    }
}

/// A listening TCP socket, like [`std::net::TcpListener`]. `Send + Sync`.
#[derive(Debug)]
pub struct TcpListener {
    inner: Arc<ListenerInner>,
}

impl TcpListener {
    /// Listens on `addr` (an unspecified IP listens on every address of the stack of
    /// its family, and `[::]` also on the IPv4 ones unless
    /// [`set_only_v6`](Self::set_only_v6); port 0 picks a free port).
    ///
    /// # Errors
    /// `AddrInUse` when another listener has the address; `AddrNotAvailable` when no
    /// port is free; `Unsupported` without TCP.
    pub fn bind(stack: &Stack, addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        let addr = one_addr(addr)?;
        stack.with(|iface| {
            tcp(iface)?;
            // Port 0: the engine picks an ephemeral port (RFC 6056).
            let (l, local) = iface.listen_tcp(addr, BACKLOG).map_err(error::listen_tcp)?;
            let notify = stack.registry().notify(Key::Listener(l));
            Ok(TcpListener {
                inner: Arc::new(ListenerInner {
                    stack: stack.clone(),
                    l,
                    local,
                    notify,
                    nonblocking: AtomicBool::new(false),
                }),
            })
        })
    }

    /// The address listened on (with the unspecified IP if bound so).
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.inner.local)
    }

    /// For a listener on `[::]`: refuse IPv4 connections (`true`, like `IPV6_V6ONLY`)
    /// or take those no IPv4 listener on the port claims (`false`, the default, as
    /// Linux with `net.ipv6.bindv6only=0`; accepted IPv4 peers are reported as IPv4
    /// addresses, not v4-mapped `::ffff:a.b.c.d`). No effect on other listeners. Linux
    /// sets `IPV6_V6ONLY` before `bind(2)`; here it may change later, within the same
    /// rule: a `0.0.0.0` listener on the port and a `[::]` one that is not v6-only
    /// overlap.
    ///
    /// # Errors
    /// `AddrInUse` turning it off while a `0.0.0.0` listener holds the port;
    /// `NotConnected` when the stack stopped.
    pub fn set_only_v6(&self, on: bool) -> io::Result<()> {
        let l = self.inner.l;
        self.inner.stack.with(|iface| {
            tcp(iface)?.set_listener_v6only(l, on).map_err(|e| match e {
                SocketError::AddressInUse => err(io::ErrorKind::AddrInUse, e),
                _ => err(io::ErrorKind::NotConnected, e),
            })
        })
    }

    /// Another handle to the same listener.
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn try_clone(&self) -> io::Result<TcpListener> {
        Ok(TcpListener {
            inner: Arc::clone(&self.inner),
        })
    }

    /// Non-blocking mode: `accept` fails with `WouldBlock` when nothing is waiting.
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.inner.nonblocking.store(nonblocking, Ordering::Relaxed);
        Ok(())
    }

    /// Bounds the connections this listener holds that are not accepted yet: in all, and
    /// from one remote address (the protection the apps' servers have, issue 13). Both
    /// are checked when a SYN arrives, so a host over its share is refused before the
    /// handshake: its connect fails with `ConnectionRefused` at once (a RST); beyond the
    /// total bound a SYN is dropped and the peer retries, as with a full backlog. See
    /// [`ListenerLimits`]. Connections already queued stay.
    ///
    /// # Errors
    /// `NotConnected` when the stack stopped; `Unsupported` without TCP.
    pub fn set_limits(&self, limits: ListenerLimits) -> io::Result<()> {
        let l = self.inner.l;
        self.inner.stack.with(|iface| {
            tcp(iface)?
                .set_listener_limits(l, limits)
                .map_err(|e| err(io::ErrorKind::InvalidInput, e))
        })
    }

    /// Sets an option every connection accepted from now on gets before its SYN-ACK, as
    /// options set on a listening socket are inherited by accepted ones on Linux (a
    /// [`SocketOption::RecvBuffer`] then also picks the window scale the SYN-ACK
    /// offers, RFC 7323 §2.3). Connections already in the queues keep theirs.
    ///
    /// # Errors
    /// `NotConnected` when the stack stopped; `Unsupported` without TCP.
    pub fn set_option(&self, opt: SocketOption) -> io::Result<()> {
        let l = self.inner.l;
        self.inner.stack.with(|iface| {
            tcp(iface)?
                .set_listener_option(l, opt)
                .map_err(|e| err(io::ErrorKind::NotConnected, e))
        })
    }

    /// One try at accepting, with the interface locked.
    pub(crate) fn try_accept(
        &self,
        iface: &mut Interface,
    ) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let stack = &self.inner.stack;
        let t = match tcp(iface) {
            Ok(t) => t,
            Err(e) => return Poll::Ready(Err(e)),
        };
        match t.accept(stack.handle().now(), self.inner.l) {
            Ok(Some(h)) => Poll::Ready(TcpStream::adopt(stack, iface, h).map(|s| {
                let peer = s.inner.peer;
                (s, peer)
            })),
            Ok(None) => Poll::Pending,
            Err(e) => Poll::Ready(Err(err(io::ErrorKind::InvalidInput, e))),
        }
    }

    /// Waits for a connection and returns it with the peer's address.
    ///
    /// # Errors
    /// `WouldBlock` in non-blocking mode; `NotConnected` when the stack stopped.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        self.inner.stack.block(
            &self.inner.notify,
            self.inner.nonblocking.load(Ordering::Relaxed),
            None,
            io::ErrorKind::WouldBlock,
            |iface| self.try_accept(iface),
            Queued::Maybe,
        )
    }

    /// An endless iterator of [`accept`](Self::accept) results.
    pub fn incoming(&self) -> impl Iterator<Item = io::Result<TcpStream>> + '_ {
        std::iter::repeat_with(move || self.accept().map(|(s, _)| s))
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn stack(&self) -> &Stack {
        &self.inner.stack
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn handle(&self) -> ListenerHandle {
        self.inner.l
    }
}

impl super::poll::sealed::Sealed for TcpListener {
    fn key(&self) -> (Key, &Stack) {
        (Key::Listener(self.inner.l), &self.inner.stack)
    }
}

impl Source for TcpListener {}
