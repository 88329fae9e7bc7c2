//! The application's side of [`Tcp`]: listening, accepting, connecting, sending,
//! receiving, shutting down, closing, aborting, options, status and readiness. Every call
//! takes a small generation-checked handle; a stale handle is an error, never a panic.
//! Every call that can change a connection takes `now`, as segment arrival and dispatch
//! do: the engine reads no clock of its own, so timers armed by a user call start at the
//! caller's time, not at whatever the engine saw last.
//! The engine-facing side (segments in and out, timers) is in `layer/`, which also owns
//! the slab of connections: this file reaches a connection only through the layer's
//! methods (`user_sock`, `with_user_sock`, ...) and the control block's user calls, never
//! through slots or fields.

use core::net::SocketAddr;

use crate::time::Instant;

use super::config::SocketOption;
use super::error::{
    AcceptError, ConnError, ConnectError, ListenError, RecvError, SendError, SocketError,
};
use super::handle::{Event, ListenerHandle, SocketHandle};
use super::layer::Tcp;
use super::listen::{Listener, ListenerLimits};
use super::socket::{Readiness, Shutdown, Socket};
use super::state::State;
use super::stats::TcpInfo;
use super::table::FourTuple;

impl Tcp {
    // ---------------------------------------------------------------- user API

    /// Starts listening on `local` (an unspecified address listens on all) with an accept
    /// queue of `backlog` (capped at `max_backlog`).
    ///
    /// # Errors
    /// [`ListenError::AddressInUse`] when a listener owns `local`;
    /// [`ListenError::InvalidPort`] for port 0; [`ListenError::InvalidBacklog`] for 0.
    pub fn listen(
        &mut self,
        local: SocketAddr,
        backlog: usize,
    ) -> Result<ListenerHandle, ListenError> {
        if local.port() == 0 {
            return Err(ListenError::InvalidPort);
        }
        if backlog == 0 {
            return Err(ListenError::InvalidBacklog);
        }
        let l = Listener::new(local, backlog.min(self.config().max_backlog));
        self.add_listener(l).ok_or(ListenError::AddressInUse)
    }

    /// Takes the oldest established connection from the accept queue, if any.
    ///
    /// # Errors
    /// [`AcceptError::InvalidHandle`] for a stale listener handle.
    pub fn accept(
        &mut self,
        now: Instant,
        l: ListenerHandle,
    ) -> Result<Option<SocketHandle>, AcceptError> {
        self.saw(now);
        self.pop_accepted(l, now)
            .map_err(|()| AcceptError::InvalidHandle)
    }

    /// Whether [`accept`](Self::accept) has a connection to take (it may still find
    /// only connections that closed meanwhile, which it skips): what makes a listening
    /// socket readable.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale listener handle.
    pub fn accept_ready(&self, l: ListenerHandle) -> Result<bool, SocketError> {
        self.listener_ref(l)
            .map(|x| !x.accept_queue.is_empty())
            .ok_or(SocketError::InvalidHandle)
    }

    /// Stops listening: connections not yet accepted are reset.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn close_listener(&mut self, now: Instant, l: ListenerHandle) -> Result<(), SocketError> {
        self.saw(now);
        self.remove_listener(l, now)
            .ok_or(SocketError::InvalidHandle)
    }

    /// Sets an option every connection accepted from this listener gets before its
    /// SYN-ACK (like options set on a listening socket, which accepted sockets inherit).
    /// Connections already in the queues keep theirs.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn set_listener_option(
        &mut self,
        l: ListenerHandle,
        opt: SocketOption,
    ) -> Result<(), SocketError> {
        self.listener_mut(l)
            .ok_or(SocketError::InvalidHandle)?
            .set_option(opt);
        Ok(())
    }

    /// Makes a listener on `[::]` refuse IPv4 connections (`true`, Linux
    /// `IPV6_V6ONLY`) or take those no IPv4 listener claims (`false`, the default, as
    /// Linux's `bindv6only=0`). No effect on other listeners.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn set_listener_v6only(&mut self, l: ListenerHandle, on: bool) -> Result<(), SocketError> {
        let local = self
            .listener_ref(l)
            .ok_or(SocketError::InvalidHandle)?
            .local;
        if !on && self.v4_wildcard_listening(local) {
            return Err(SocketError::AddressInUse);
        }
        self.listener_mut(l)
            .ok_or(SocketError::InvalidHandle)?
            .v6only = on;
        Ok(())
    }

    /// Bounds the connections of listener `l` that are not accepted yet, in all and per
    /// remote address (see [`ListenerLimits`]); checked when a SYN arrives. Connections
    /// already queued stay.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn set_listener_limits(
        &mut self,
        l: ListenerHandle,
        limits: ListenerLimits,
    ) -> Result<(), SocketError> {
        self.listener_mut(l)
            .ok_or(SocketError::InvalidHandle)?
            .limits = limits;
        Ok(())
    }

    /// Opens a connection from `local` (port 0 picks an ephemeral port, RFC 6056) to
    /// `remote`. The SYN goes out on the next dispatch.
    ///
    /// # Errors
    /// See [`ConnectError`].
    pub fn connect(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Result<SocketHandle, ConnectError> {
        self.connect_with(now, local, remote, &[])
    }

    /// [`Tcp::connect`] with `options` applied before the SYN is built (buffer sizes and
    /// MSS then shape what it announces, like `setsockopt` before `connect`).
    ///
    /// # Errors
    /// See [`ConnectError`].
    pub fn connect_with(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        options: &[SocketOption],
    ) -> Result<SocketHandle, ConnectError> {
        self.saw(now);
        if remote.port() == 0
            || remote.ip().is_unspecified()
            || remote.ip().is_multicast()
            || local.ip().is_unspecified()
            || local.is_ipv4() != remote.is_ipv4()
        {
            return Err(ConnectError::InvalidAddress);
        }
        if self.table_full() || self.mem_exhausted() {
            return Err(ConnectError::TooManyConnections);
        }
        let local = if local.port() == 0 {
            let port = self
                .ephemeral_port(local.ip(), remote)
                .ok_or(ConnectError::NoPortsAvailable)?;
            SocketAddr::new(local.ip(), port)
        } else {
            if self.tuple_in_use(&FourTuple::new(local, remote)) {
                return Err(ConnectError::AddressInUse);
            }
            local
        };
        let mut sock = self.new_socket(FourTuple::new(local, remote), now);
        for &o in options {
            // Nothing is buffered before the SYN: every option applies.
            let _ = sock.set_option(o, now, &mut self.mem);
        }
        sock.open_active();
        Ok(self.add_socket(sock, now))
    }

    /// Queues data; returns how much fit (`Ok(0)` when the send buffer is full). Data
    /// queued during SYN-SENT goes out once the connection is established.
    ///
    /// # Errors
    /// [`SendError`]: stale handle, send side closed, or the connection's error.
    pub fn send(&mut self, now: Instant, h: SocketHandle, data: &[u8]) -> Result<usize, SendError> {
        self.saw(now);
        self.with_user_sock_cx(h, now, |s, cx| {
            let r = s.send(data, now, cx);
            let queued = r.as_ref().is_ok_and(|&n| n > 0);
            (r, queued)
        })
        .ok_or(SendError::InvalidHandle)?
    }

    /// Reads in-order data. `Ok(0)` means end of stream (the peer sent FIN).
    ///
    /// # Errors
    /// [`RecvError::WouldBlock`] when nothing is buffered yet; the connection's error
    /// once the buffer is drained; [`RecvError::InvalidHandle`] for a stale handle.
    pub fn recv(
        &mut self,
        now: Instant,
        h: SocketHandle,
        buf: &mut [u8],
    ) -> Result<usize, RecvError> {
        self.saw(now);
        self.with_user_sock(h, now, |s| s.recv(buf))
            .ok_or(RecvError::InvalidHandle)?
    }

    /// Like [`Tcp::recv`] but leaves the data in the buffer.
    ///
    /// # Errors
    /// As [`Tcp::recv`].
    pub fn peek(&mut self, h: SocketHandle, buf: &mut [u8]) -> Result<usize, RecvError> {
        self.user_sock(h).ok_or(RecvError::InvalidHandle)?.peek(buf)
    }

    /// Shuts down one or both directions (half-close). The handle stays valid.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn shutdown(
        &mut self,
        now: Instant,
        h: SocketHandle,
        how: Shutdown,
    ) -> Result<(), SocketError> {
        self.saw(now);
        self.with_user_sock(h, now, |s| s.shutdown(how))
            .ok_or(SocketError::InvalidHandle)
    }

    /// Graceful close (RFC 9293 §3.10.4): the handle becomes invalid at once; the
    /// connection finishes sending, then FIN, and lingers in TIME-WAIT as a compact
    /// record. Unread received data makes it a reset instead (RFC 1122 §4.2.2.13).
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn close(&mut self, now: Instant, h: SocketHandle) -> Result<(), SocketError> {
        self.saw(now);
        self.close_user(h, now).ok_or(SocketError::InvalidHandle)
    }

    /// ABORT (RFC 9293 §3.10.5): sends RST if synchronized and frees the connection.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn abort(&mut self, now: Instant, h: SocketHandle) -> Result<(), SocketError> {
        self.saw(now);
        self.abort_user(h, now).ok_or(SocketError::InvalidHandle)
    }

    /// The connection's state.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn state(&self, h: SocketHandle) -> Result<State, SocketError> {
        Ok(self.user_sock(h).ok_or(SocketError::InvalidHandle)?.state())
    }

    /// Statistics of one connection (like Linux `tcp_info`).
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn info(&self, h: SocketHandle) -> Result<TcpInfo, SocketError> {
        Ok(self.user_sock(h).ok_or(SocketError::InvalidHandle)?.info())
    }

    /// Local and remote address of a connection.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn addresses(&self, h: SocketHandle) -> Result<(SocketAddr, SocketAddr), SocketError> {
        let t = self.user_sock(h).ok_or(SocketError::InvalidHandle)?.tuple();
        Ok((t.local(), t.remote()))
    }

    /// Changes a per-socket option (see [`SocketOption`] for when each may change).
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle; [`SocketError::InvalidState`]
    /// for a buffer size the socket cannot take now.
    pub fn set_option(
        &mut self,
        now: Instant,
        h: SocketHandle,
        opt: SocketOption,
    ) -> Result<(), SocketError> {
        self.saw(now);
        self.with_user_sock_cx(h, now, |s, cx| (s.set_option(opt, now, cx.mem), true))
            .ok_or(SocketError::InvalidHandle)?
    }

    /// What the application can do with the socket now.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn readiness(&self, h: SocketHandle) -> Result<Readiness, SocketError> {
        Ok(self
            .user_sock(h)
            .ok_or(SocketError::InvalidHandle)?
            .readiness())
    }

    /// Takes the connection's ICMP soft error (RFC 1122 §4.2.3.9), as reading SO_ERROR
    /// does on Linux: the connection goes on, the error is reported once.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn take_soft_error(&mut self, h: SocketHandle) -> Result<Option<ConnError>, SocketError> {
        let now = self.last_now;
        self.with_user_sock_if(h, now, |s| (s.set_soft_error(None), false))
            .ok_or(SocketError::InvalidHandle)
    }

    /// Readable now (data, EOF or error).
    pub fn can_recv(&self, h: SocketHandle) -> bool {
        self.user_sock(h).is_some_and(Socket::can_recv)
    }

    /// Writable now.
    pub fn can_send(&self, h: SocketHandle) -> bool {
        self.user_sock(h).is_some_and(Socket::can_send)
    }

    /// Whether data the application queued waits on the windows: more is unsent than
    /// the congestion and peer windows leave room for now, so it leaves only as ACKs
    /// arrive (false for a handle that is gone). A runtime whose application drives
    /// the loop reads it to know that the loop must keep turning after the caller
    /// leaves.
    pub fn held_by_windows(&self, h: SocketHandle) -> bool {
        self.user_sock(h).is_some_and(Socket::held_by_windows)
    }

    /// The next readiness change, oldest first (each source at most once until taken).
    pub fn poll_event(&mut self) -> Option<Event> {
        self.take_event()
    }

    /// Whether [`poll_event`](Self::poll_event) may have a change to give (a cheap look
    /// for a loop that asks every iteration; an event of a socket closed since it was
    /// queued still counts).
    #[inline]
    pub fn has_events(&self) -> bool {
        self.has_queued_events()
    }
}
