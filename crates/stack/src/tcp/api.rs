//! The application's side of [`Tcp`]: listening, accepting, connecting, sending,
//! receiving, shutting down, closing, aborting, options, status and readiness. Every call
//! takes a small generation-checked handle; a stale handle is an error, never a panic.
//! The engine-facing side (segments in and out, timers) is in `layer.rs`.

use alloc::vec::Vec;
use core::net::{IpAddr, SocketAddr};

use crate::time::Instant;

use super::config::SocketOption;
use super::error::{AcceptError, ConnectError, ListenError, RecvError, SendError, SocketError};
use super::layer::{
    snapshot, Event, ListenerHandle, ListenerSlot, Readiness, Snapshot, SocketHandle, Tcp,
    MAX_PENDING_RST,
};
use super::listen::Listener;
use super::socket::{Origin, Shutdown, Socket};
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
        if self.listen_map.contains_key(&local) {
            return Err(ListenError::AddressInUse);
        }
        let l = Listener::new(local, backlog.min(self.cfg.max_backlog));
        let index = match self.listeners.iter().position(|s| s.listener.is_none()) {
            Some(i) => {
                self.listeners[i].listener = Some(l);
                i
            }
            None => {
                self.listeners.push(ListenerSlot {
                    generation: 0,
                    listener: Some(l),
                    in_events: false,
                });
                self.listeners.len() - 1
            }
        };
        self.listen_map.insert(local, index as u32);
        Ok(ListenerHandle {
            index: index as u32,
            generation: self.listeners[index].generation,
        })
    }

    fn listener_mut(&mut self, l: ListenerHandle) -> Option<&mut ListenerSlot> {
        self.listeners
            .get_mut(l.index as usize)
            .filter(|s| s.generation == l.generation && s.listener.is_some())
    }

    /// Takes the oldest established connection from the accept queue, if any.
    ///
    /// # Errors
    /// [`AcceptError::InvalidHandle`] for a stale listener handle.
    pub fn accept(&mut self, l: ListenerHandle) -> Result<Option<SocketHandle>, AcceptError> {
        loop {
            let ls = self.listener_mut(l).ok_or(AcceptError::InvalidHandle)?;
            ls.in_events = false;
            let Some(h) = ls
                .listener
                .as_mut()
                .and_then(|x| x.accept_queue.pop_front())
            else {
                return Ok(None);
            };
            let slot = &mut self.slots[h.index as usize];
            if slot.generation != h.generation {
                continue;
            }
            let Some(sock) = slot.sock.as_mut() else {
                continue;
            };
            sock.origin = None;
            let now = self.last_now;
            // The application may want to hear about data that arrived before accept.
            self.settle(h.index, now, None);
            return Ok(Some(h));
        }
    }

    /// Stops listening: connections not yet accepted are reset.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn close_listener(&mut self, l: ListenerHandle) -> Result<(), SocketError> {
        let ls = self.listener_mut(l).ok_or(SocketError::InvalidHandle)?;
        let Some(listener) = ls.listener.take() else {
            return Err(SocketError::InvalidHandle);
        };
        ls.generation = ls.generation.wrapping_add(1);
        self.listen_map.remove(&listener.local);
        let children: Vec<u32> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.sock.as_ref().is_some_and(|k| {
                    k.origin
                        == Some(Origin {
                            index: l.index,
                            generation: l.generation,
                        })
                })
            })
            .map(|(i, _)| i as u32)
            .collect();
        for idx in children {
            self.abort_idx(idx);
        }
        Ok(())
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
        let ls = self.listener_mut(l).ok_or(SocketError::InvalidHandle)?;
        ls.listener
            .as_mut()
            .ok_or(SocketError::InvalidHandle)?
            .set_option(opt);
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
        self.last_now = now;
        if remote.port() == 0
            || remote.ip().is_unspecified()
            || remote.ip().is_multicast()
            || local.ip().is_unspecified()
            || local.is_ipv4() != remote.is_ipv4()
        {
            return Err(ConnectError::InvalidAddress);
        }
        if self.table.is_full() {
            return Err(ConnectError::TooManyConnections);
        }
        let local = if local.port() == 0 {
            self.ephemeral(local.ip(), remote)?
        } else {
            let t = FourTuple::new(local, remote);
            if self.table.contains(&t) || self.tw.contains(&t) {
                return Err(ConnectError::AddressInUse);
            }
            local
        };
        let tuple = FourTuple::new(local, remote);
        let iss = self.isn(&tuple, now);
        let mtu = self.mtu_for(remote.ip());
        let mut sock = Socket::new(&self.cfg, tuple, iss, self.ts_offset(&tuple), mtu, now);
        for &o in options {
            // Nothing is buffered before the SYN: every option applies.
            let _ = sock.set_option(o, now);
        }
        sock.open_active();
        let idx = self.insert_socket(sock);
        self.settle(idx, now, None);
        Ok(self.handle_of(idx))
    }

    /// RFC 6056 port selection: the first port whose 4-tuple is free (no connection, no
    /// TIME-WAIT record, no listener on it).
    fn ephemeral(&mut self, ip: IpAddr, remote: SocketAddr) -> Result<SocketAddr, ConnectError> {
        let (table, tw, listen_map) = (&self.table, &self.tw, &self.listen_map);
        let port = self
            .ports
            .next(ip, remote, |port| {
                let local = SocketAddr::new(ip, port);
                let t = FourTuple::new(local, remote);
                table.contains(&t) || tw.contains(&t) || listen_map.contains_key(&local)
            })
            .ok_or(ConnectError::NoPortsAvailable)?;
        Ok(SocketAddr::new(ip, port))
    }

    fn sock(&self, h: SocketHandle) -> Option<&Socket> {
        let slot = self.slots.get(h.index as usize)?;
        if slot.generation != h.generation {
            return None;
        }
        slot.sock
            .as_deref()
            .filter(|s| !s.orphan && s.origin.is_none())
    }

    fn sock_mut(&mut self, h: SocketHandle) -> Option<(&mut Socket, Snapshot)> {
        let slot = self.slots.get_mut(h.index as usize)?;
        if slot.generation != h.generation {
            return None;
        }
        let s = slot
            .sock
            .as_deref_mut()
            .filter(|s| !s.orphan && s.origin.is_none())?;
        let snap = snapshot(s);
        Some((s, snap))
    }

    /// Queues data; returns how much fit (`Ok(0)` when the send buffer is full). Data
    /// queued during SYN-SENT goes out once the connection is established.
    ///
    /// # Errors
    /// [`SendError`]: stale handle, send side closed, or the connection's error.
    pub fn send(&mut self, h: SocketHandle, data: &[u8]) -> Result<usize, SendError> {
        let now = self.last_now;
        let (s, snap) = self.sock_mut(h).ok_or(SendError::InvalidHandle)?;
        let n = s.send(data)?;
        if n > 0 {
            self.settle(h.index, now, Some(snap));
        }
        Ok(n)
    }

    /// Reads in-order data. `Ok(0)` means end of stream (the peer sent FIN).
    ///
    /// # Errors
    /// [`RecvError::WouldBlock`] when nothing is buffered yet; the connection's error
    /// once the buffer is drained; [`RecvError::InvalidHandle`] for a stale handle.
    pub fn recv(&mut self, h: SocketHandle, buf: &mut [u8]) -> Result<usize, RecvError> {
        let now = self.last_now;
        let (s, snap) = self.sock_mut(h).ok_or(RecvError::InvalidHandle)?;
        let n = s.recv(buf, true)?;
        self.settle(h.index, now, Some(snap));
        Ok(n)
    }

    /// Like [`Tcp::recv`] but leaves the data in the buffer.
    ///
    /// # Errors
    /// As [`Tcp::recv`].
    pub fn peek(&mut self, h: SocketHandle, buf: &mut [u8]) -> Result<usize, RecvError> {
        let (s, _) = self.sock_mut(h).ok_or(RecvError::InvalidHandle)?;
        s.recv(buf, false)
    }

    /// Shuts down one or both directions (half-close). The handle stays valid.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn shutdown(&mut self, h: SocketHandle, how: Shutdown) -> Result<(), SocketError> {
        let now = self.last_now;
        let (s, snap) = self.sock_mut(h).ok_or(SocketError::InvalidHandle)?;
        if matches!(how, Shutdown::Read | Shutdown::Both) {
            s.shutdown_read();
        }
        if matches!(how, Shutdown::Write | Shutdown::Both) {
            s.shutdown_write();
        }
        self.settle(h.index, now, Some(snap));
        Ok(())
    }

    /// Graceful close (RFC 9293 §3.10.4): the handle becomes invalid at once; the
    /// connection finishes sending, then FIN, and lingers in TIME-WAIT as a compact
    /// record. Unread received data makes it a reset instead (RFC 1122 §4.2.2.13).
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn close(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        let now = self.last_now;
        let fin_wait2_timeout = self.cfg.fin_wait2_timeout;
        let (s, _) = self.sock_mut(h).ok_or(SocketError::InvalidHandle)?;
        if !s.rx.is_empty() && s.state.is_synchronized() {
            self.abort_idx(h.index);
            return Ok(());
        }
        s.orphan = true;
        let freed = s.shutdown_write();
        if freed || s.state == State::Closed {
            s.set_closed(None);
        } else if s.state == State::FinWait2 {
            s.arm_fin_wait2(now, fin_wait2_timeout);
        }
        self.settle(h.index, now, None);
        Ok(())
    }

    /// ABORT (RFC 9293 §3.10.5): sends RST if synchronized and frees the connection.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn abort(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        self.sock(h).ok_or(SocketError::InvalidHandle)?;
        self.abort_idx(h.index);
        Ok(())
    }

    fn abort_idx(&mut self, idx: u32) {
        let now = self.last_now;
        let Some(s) = self.slots[idx as usize].sock.as_mut() else {
            return;
        };
        let (local, remote) = (s.tuple.local().ip(), s.tuple.remote().ip());
        if let Some(rst) = s.abort() {
            if self.pending_rst.len() < MAX_PENDING_RST {
                self.pending_rst.push_back((local, remote, rst));
                self.stats.resets_sent += 1;
            }
        }
        s.orphan = true;
        self.settle(idx, now, None);
    }

    /// The connection's state.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn state(&self, h: SocketHandle) -> Result<State, SocketError> {
        Ok(self.sock(h).ok_or(SocketError::InvalidHandle)?.state)
    }

    /// Statistics of one connection (like Linux `tcp_info`).
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn info(&self, h: SocketHandle) -> Result<TcpInfo, SocketError> {
        Ok(self.sock(h).ok_or(SocketError::InvalidHandle)?.info())
    }

    /// Local and remote address of a connection.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn addresses(&self, h: SocketHandle) -> Result<(SocketAddr, SocketAddr), SocketError> {
        let s = self.sock(h).ok_or(SocketError::InvalidHandle)?;
        Ok((s.tuple.local(), s.tuple.remote()))
    }

    /// Changes a per-socket option (see [`SocketOption`] for when each may change).
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle; [`SocketError::InvalidState`]
    /// for a buffer size the socket cannot take now.
    pub fn set_option(&mut self, h: SocketHandle, opt: SocketOption) -> Result<(), SocketError> {
        let now = self.last_now;
        let (s, snap) = self.sock_mut(h).ok_or(SocketError::InvalidHandle)?;
        let r = s.set_option(opt, now);
        self.settle(h.index, now, Some(snap));
        r
    }

    /// What the application can do with the socket now.
    ///
    /// # Errors
    /// [`SocketError::InvalidHandle`] for a stale handle.
    pub fn readiness(&self, h: SocketHandle) -> Result<Readiness, SocketError> {
        let s = self.sock(h).ok_or(SocketError::InvalidHandle)?;
        Ok(Readiness {
            readable: s.can_recv(),
            writable: s.can_send(),
            read_closed: s.state.fin_received() || s.state == State::Closed,
            closed: s.state == State::Closed,
            error: s.error,
        })
    }

    /// Readable now (data, EOF or error).
    pub fn can_recv(&self, h: SocketHandle) -> bool {
        self.sock(h).is_some_and(Socket::can_recv)
    }

    /// Writable now.
    pub fn can_send(&self, h: SocketHandle) -> bool {
        self.sock(h).is_some_and(Socket::can_send)
    }

    /// The next readiness change, oldest first (each source at most once until taken).
    pub fn poll_event(&mut self) -> Option<Event> {
        while let Some(e) = self.events.pop_front() {
            match e {
                Event::Socket(h) => {
                    if let Some(slot) = self.slots.get_mut(h.index as usize) {
                        if slot.generation == h.generation && slot.in_events {
                            slot.in_events = false;
                            return Some(e);
                        }
                    }
                }
                Event::Listener(l) => {
                    if let Some(ls) = self.listeners.get_mut(l.index as usize) {
                        if ls.generation == l.generation && ls.in_events {
                            ls.in_events = false;
                            return Some(e);
                        }
                    }
                }
            }
        }
        None
    }
}
