//! A TCP server skeleton for the apps: one listener, one session per accepted
//! connection, driven by the TCP layer's readiness events (no polling of idle
//! connections), and the [`Limits`] that keep one host from locking everyone else out.
//!
//! Limits (issue 13): a total session limit, a per-source-address limit, an idle timeout
//! (no event on a connection for that long closes it) and each session's own deadline
//! ([`Session::deadline`]: HTTP's request-head timeout against slowloris, the bound of a
//! lingering close). When the server is full, the session idle the longest is closed to
//! make room before a new connection is refused.
//!
//! Timeouts cost no scan per packet: driving a session only lowers the next sweep instant
//! to that session's deadline, and a sweep over all sessions runs at that instant, at most
//! once per [`SWEEP_INTERVAL`]; a deadline therefore fires up to that late. Choosing an
//! eviction victim when full is one scan of the sessions per accepted connection.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use ulnet_stack::tcp::{Event, ListenError, ListenerHandle, SocketHandle, Tcp};
use ulnet_stack::time::{Duration, Instant};

/// Sweeps for expired sessions run at most this often.
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(100);

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

/// What a deadline was for (see [`Session::deadline`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    /// No readiness event for [`Limits::idle_timeout`].
    Idle,
    /// A request head did not complete in time (slowloris).
    Head,
    /// A lingering close (RFC 9112 §9.6) did not see the peer's FIN in time.
    Linger,
}

/// One connection's application state.
pub trait Session {
    /// Does what the socket's readiness allows: read, write, or decide to close.
    fn drive(&mut self, tcp: &mut Tcp, now: Instant, h: SocketHandle) -> Next;

    /// The session's own deadline beside the server's idle timeout, and what it is for;
    /// the server closes the connection once it passes. Asked after every drive.
    fn deadline(&self) -> Option<(Instant, Timeout)> {
        None
    }

    /// Its deadline passed, for `why`. `None` (the default) lets the server end the
    /// connection; a session may instead answer first (HTTP's 408 for a request head that
    /// did not complete) and say what comes next, like [`Session::drive`]: with
    /// [`Next::Open`] the session stays, under the deadline it sets now.
    fn timed_out(
        &mut self,
        _tcp: &mut Tcp,
        _now: Instant,
        _h: SocketHandle,
        _why: Timeout,
    ) -> Option<Next> {
        None
    }

    /// Whether the session may be closed to make room for a new connection: it waits on
    /// its peer with no answer in progress.
    fn is_idle(&self) -> bool {
        true
    }
}

/// How many connections a server holds and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most connections at once.
    pub max_sessions: usize,
    /// Most connections at once from one remote address.
    pub max_per_source: usize,
    /// A connection without any readiness event for this long is closed; `None` never.
    pub idle_timeout: Option<Duration>,
}

impl Default for Limits {
    /// 4,096 sessions, 256 from one address, closed after 60 s without an event.
    fn default() -> Self {
        Limits {
            max_sessions: 4096,
            max_per_source: 256,
            idle_timeout: Some(Duration::from_secs(60)),
        }
    }
}

/// Counters of a [`TcpServer`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections that ended (closed, reset, failed or timed out).
    pub finished: u64,
    /// Connections refused (reset at once): full with no idle session to close, or over
    /// the per-source limit.
    pub refused: u64,
    /// Of `refused`: over [`Limits::max_per_source`].
    pub per_source_refused: u64,
    /// Idle sessions closed to make room for a new connection.
    pub evicted: u64,
    /// Sessions closed by [`Limits::idle_timeout`].
    pub idle_closed: u64,
    /// Sessions closed because a request head did not complete in time.
    pub head_timeouts: u64,
    /// Lingering closes cut short by their time bound.
    pub linger_timeouts: u64,
}

/// A session and what the server keeps about it.
#[derive(Debug)]
struct Entry<S> {
    s: S,
    /// The connection's last readiness event (or its accept).
    last: Instant,
    src: IpAddr,
}

impl<S: Session> Entry<S> {
    /// The earliest of the idle deadline and the session's own.
    fn deadline(&self, idle: Option<Duration>) -> Option<(Instant, Timeout)> {
        let idle = idle.map(|d| (self.last + d, Timeout::Idle));
        match (idle, self.s.deadline()) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        }
    }
}

/// A listener and its sessions.
#[derive(Debug)]
pub struct TcpServer<S> {
    listener: Option<ListenerHandle>,
    local: SocketAddr,
    sessions: HashMap<SocketHandle, Entry<S>>,
    /// Open sessions per remote address; an address leaves the map with its last one.
    per_source: HashMap<IpAddr, usize>,
    limits: Limits,
    stats: ServerStats,
    /// When the next sweep for expired sessions is due.
    next_sweep: Option<Instant>,
    last_sweep: Option<Instant>,
    /// Scratch of one sweep, kept to reuse its allocation.
    expired: Vec<(SocketHandle, Timeout)>,
}

impl<S: Session> TcpServer<S> {
    /// A server that will listen on `local` (started by [`TcpServer::listen`]) within
    /// `limits`.
    pub fn new(local: SocketAddr, limits: Limits) -> Self {
        TcpServer {
            listener: None,
            local,
            sessions: HashMap::new(),
            per_source: HashMap::new(),
            limits,
            stats: ServerStats::default(),
            next_sweep: None,
            last_sweep: None,
            expired: Vec::new(),
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

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Changes the limits; open sessions over a new limit are kept, later accepts obey it.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Open sessions.
    pub fn sessions(&self) -> impl Iterator<Item = &S> {
        self.sessions.values().map(|e| &e.s)
    }

    /// How many sessions are open.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// When the server next needs a [`poll`](Self::poll) without any event (a deadline).
    pub fn poll_at(&self) -> Option<Instant> {
        self.next_sweep
    }

    /// Handles this iteration's TCP events: accepts, drives its sessions (events of other
    /// sockets are ignored), closes the sessions whose deadline passed. `new` makes the
    /// session of a freshly accepted connection; `done` gets each session that ended.
    pub fn poll(
        &mut self,
        tcp: &mut Tcp,
        now: Instant,
        events: &[Event],
        new: &mut dyn FnMut() -> S,
        done: &mut dyn FnMut(S),
    ) {
        if self.next_sweep.is_some_and(|t| t <= now) {
            self.sweep(tcp, now, done);
        }
        for &ev in events {
            match ev {
                Event::Listener(l) if Some(l) == self.listener => {
                    while let Ok(Some(h)) = tcp.accept(now, l) {
                        self.admit(tcp, now, h, new, done);
                    }
                }
                Event::Socket(h) => self.drive(tcp, now, h, done),
                Event::Listener(_) => {}
            }
        }
    }

    /// Takes the accepted connection `h` on, or refuses it (RST).
    fn admit(
        &mut self,
        tcp: &mut Tcp,
        now: Instant,
        h: SocketHandle,
        new: &mut dyn FnMut() -> S,
        done: &mut dyn FnMut(S),
    ) {
        let Ok((_, remote)) = tcp.addresses(h) else {
            return;
        };
        let src = remote.ip();
        if self.per_source.get(&src).copied().unwrap_or(0) >= self.limits.max_per_source {
            self.stats.refused += 1;
            self.stats.per_source_refused += 1;
            let _ = tcp.abort(now, h);
            return;
        }
        if self.sessions.len() >= self.limits.max_sessions {
            // Full: the session idle the longest makes room, so that connections which
            // only hold a slot cannot keep a working client out (issue 13).
            let victim = self
                .sessions
                .iter()
                .filter(|(_, e)| e.s.is_idle())
                .min_by_key(|(_, e)| e.last)
                .map(|(&v, _)| v);
            match victim {
                Some(v) => {
                    self.stats.evicted += 1;
                    let _ = tcp.close(now, v);
                    self.finish(v, done);
                }
                None => {
                    self.stats.refused += 1;
                    let _ = tcp.abort(now, h);
                    return;
                }
            }
        }
        self.stats.accepted += 1;
        *self.per_source.entry(src).or_insert(0) += 1;
        self.sessions.insert(
            h,
            Entry {
                s: new(),
                last: now,
                src,
            },
        );
        self.drive(tcp, now, h, done);
    }

    fn drive(&mut self, tcp: &mut Tcp, now: Instant, h: SocketHandle, done: &mut dyn FnMut(S)) {
        let Some(e) = self.sessions.get_mut(&h) else {
            return;
        };
        e.last = now;
        let next = match tcp.readiness(h) {
            Err(_) => Next::Abort,
            Ok(r) if r.error.is_some() => Next::Abort,
            // Both directions finished (e.g. after a half-close): nothing to reset.
            Ok(r) if r.closed => Next::Close,
            Ok(_) => e.s.drive(tcp, now, h),
        };
        match next {
            Next::Open => {
                if let Some((at, _)) = e.deadline(self.limits.idle_timeout) {
                    // Never sooner than SWEEP_INTERVAL after the last sweep, so a stream
                    // of deadlines cannot make sweeps (a scan each) run per packet.
                    let at = match self.last_sweep {
                        Some(last) => at.max(last + SWEEP_INTERVAL),
                        None => at,
                    };
                    if self.next_sweep.is_none_or(|t| at < t) {
                        self.next_sweep = Some(at);
                    }
                }
            }
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

    /// Closes every session whose deadline passed and schedules the next sweep.
    fn sweep(&mut self, tcp: &mut Tcp, now: Instant, done: &mut dyn FnMut(S)) {
        self.last_sweep = Some(now);
        let mut next: Option<Instant> = None;
        let mut expired = std::mem::take(&mut self.expired);
        for (&h, e) in &self.sessions {
            match e.deadline(self.limits.idle_timeout) {
                Some((at, why)) if at <= now => expired.push((h, why)),
                Some((at, _)) => next = Some(next.map_or(at, |n| n.min(at))),
                None => {}
            }
        }
        self.next_sweep = next.map(|t| t.max(now + SWEEP_INTERVAL));
        for (h, why) in expired.drain(..) {
            match why {
                Timeout::Idle => self.stats.idle_closed += 1,
                Timeout::Head => self.stats.head_timeouts += 1,
                Timeout::Linger => self.stats.linger_timeouts += 1,
            }
            let answer = match self.sessions.get_mut(&h) {
                Some(e) => e.s.timed_out(tcp, now, h, why),
                None => continue,
            };
            match answer {
                Some(Next::Open) => {
                    // It answered and carries on under a new deadline (a lingering
                    // close): the next sweep comes for it.
                    if let Some((at, _)) = self
                        .sessions
                        .get(&h)
                        .and_then(|e| e.deadline(self.limits.idle_timeout))
                    {
                        let at = at.max(now + SWEEP_INTERVAL);
                        if self.next_sweep.is_none_or(|t| at < t) {
                            self.next_sweep = Some(at);
                        }
                    }
                    continue;
                }
                Some(Next::Close) => {
                    let _ = tcp.close(now, h);
                    self.finish(h, done);
                    continue;
                }
                Some(Next::Abort) => {
                    let _ = tcp.abort(now, h);
                    self.finish(h, done);
                    continue;
                }
                None => {}
            }
            if self.sessions.get(&h).is_some_and(|e| e.s.is_idle()) {
                // Unread input makes this a reset (RFC 1122 §4.2.2.13): after a timeout
                // that is the right end for a peer that neither finished nor went away.
                let _ = tcp.close(now, h);
            } else {
                // Stuck mid-answer (a peer that stopped reading): a FIN would queue behind
                // data that cannot leave, and the connection would outlive its session.
                let _ = tcp.abort(now, h);
            }
            self.finish(h, done);
        }
        self.expired = expired;
    }

    fn finish(&mut self, h: SocketHandle, done: &mut dyn FnMut(S)) {
        if let Some(e) = self.sessions.remove(&h) {
            if let Some(n) = self.per_source.get_mut(&e.src) {
                *n -= 1;
                if *n == 0 {
                    self.per_source.remove(&e.src);
                }
            }
            self.stats.finished += 1;
            done(e.s);
        }
        // Give back what a peak of sessions left (issue 13: RSS after many connections
        // close): below a quarter of their capacity the maps shrink to twice their length
        // (amortised: each shrink follows at least half as many closes as it frees).
        if self.sessions.capacity() > 64 && self.sessions.len() < self.sessions.capacity() / 4 {
            self.sessions.shrink_to(2 * self.sessions.len());
        }
        if self.per_source.capacity() > 64 && self.per_source.len() < self.per_source.capacity() / 4
        {
            self.per_source.shrink_to(2 * self.per_source.len());
        }
    }
}
