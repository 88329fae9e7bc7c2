//! A TCP server skeleton for the apps: one listener, one session per accepted
//! connection, driven by the TCP layer's readiness events (no polling of idle
//! connections).

use std::collections::HashMap;
use std::net::SocketAddr;

use ulnet_stack::tcp::{Event, ListenError, ListenerHandle, SocketHandle, Tcp};
use ulnet_stack::time::Instant;

/// What a session wants after being driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Keep the connection; drive again on its next readiness event.
    Open,
    /// Close gracefully (FIN after what is queued) and forget it.
    Close,
    /// Reset it (RST) and forget it.
    Abort,
}

/// One connection's application state.
pub trait Session {
    /// Does what the socket's readiness allows: read, write, or decide to close.
    fn drive(&mut self, tcp: &mut Tcp, now: Instant, h: SocketHandle) -> Next;
}

/// Counters of a [`TcpServer`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections that ended (closed, reset or failed).
    pub finished: u64,
    /// Connections refused because `max_sessions` were open (reset at once).
    pub refused: u64,
}

/// A listener and its sessions.
#[derive(Debug)]
pub struct TcpServer<S> {
    listener: Option<ListenerHandle>,
    local: SocketAddr,
    sessions: HashMap<SocketHandle, S>,
    max_sessions: usize,
    stats: ServerStats,
}

impl<S: Session> TcpServer<S> {
    /// A server that will listen on `local` (started by the first [`TcpServer::poll`])
    /// with at most `max_sessions` connections at once.
    pub fn new(local: SocketAddr, max_sessions: usize) -> Self {
        TcpServer {
            listener: None,
            local,
            sessions: HashMap::new(),
            max_sessions,
            stats: ServerStats::default(),
        }
    }

    /// Starts listening now.
    ///
    /// # Errors
    /// As [`Tcp::listen`].
    pub fn listen(&mut self, tcp: &mut Tcp) -> Result<(), ListenError> {
        if self.listener.is_none() {
            self.listener = Some(tcp.listen(self.local, 1024)?);
        }
        Ok(())
    }

    /// The counters.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// Open sessions.
    pub fn sessions(&self) -> impl Iterator<Item = &S> {
        self.sessions.values()
    }

    /// Handles this iteration's TCP events: accepts, drives its sessions (events of other
    /// sockets are ignored). `new` makes the
    /// session of a freshly accepted connection; `done` gets each session that ended.
    pub fn poll(
        &mut self,
        tcp: &mut Tcp,
        now: Instant,
        events: &[Event],
        new: &mut dyn FnMut() -> S,
        done: &mut dyn FnMut(S),
    ) {
        for &ev in events {
            match ev {
                Event::Listener(l) if Some(l) == self.listener => {
                    while let Ok(Some(h)) = tcp.accept(now, l) {
                        if self.sessions.len() >= self.max_sessions {
                            self.stats.refused += 1;
                            let _ = tcp.abort(now, h);
                            continue;
                        }
                        self.stats.accepted += 1;
                        self.sessions.insert(h, new());
                        self.drive(tcp, now, h, done);
                    }
                }
                Event::Socket(h) => self.drive(tcp, now, h, done),
                Event::Listener(_) => {}
            }
        }
    }

    fn drive(&mut self, tcp: &mut Tcp, now: Instant, h: SocketHandle, done: &mut dyn FnMut(S)) {
        let Some(s) = self.sessions.get_mut(&h) else {
            return;
        };
        let next = match tcp.readiness(h) {
            Err(_) => Next::Abort,
            Ok(r) if r.error.is_some() || r.closed => Next::Abort,
            Ok(_) => s.drive(tcp, now, h),
        };
        match next {
            Next::Open => {}
            Next::Close => {
                let _ = tcp.close(now, h);
                self.finish(h, done);
            }
            Next::Abort => {
                let _ = tcp.abort(now, h);
                self.finish(h, done);
            }
        }
    }

    fn finish(&mut self, h: SocketHandle, done: &mut dyn FnMut(S)) {
        if let Some(s) = self.sessions.remove(&h) {
            self.stats.finished += 1;
            done(s);
        }
    }
}
