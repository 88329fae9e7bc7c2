//! Readiness over many sockets at once, in the spirit of epoll and mio: register
//! sockets with a [`Token`] and an [`Interest`], then [`Poller::poll`] for [`Event`]s.
//!
//! Notification is edge-triggered like mio's: a socket is reported when its readiness
//! may have changed (data arrived, room freed, state changed, a connection is waiting),
//! and when it is registered already ready. After an event, do the operation until it
//! returns `WouldBlock`; then the next change is reported. Events can be spurious:
//! an operation may still return `WouldBlock`. Use non-blocking sockets with a poller
//! ([`TcpStream::set_nonblocking`](super::TcpStream::set_nonblocking)).

use std::collections::HashSet;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ulnet_stack::iface::Interface;

use super::error::err;
use super::reactor::Key;
use super::stack::Stack;

/// Names a registered socket in the events a [`Poller`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token(pub usize);

/// What a registration waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interest {
    readable: bool,
    writable: bool,
}

impl Interest {
    /// Data to read, a connection to accept, EOF or an error.
    pub const READABLE: Interest = Interest {
        readable: true,
        writable: false,
    };
    /// Room to write, or an error.
    pub const WRITABLE: Interest = Interest {
        readable: false,
        writable: true,
    };
    /// Both.
    pub const BOTH: Interest = Interest {
        readable: true,
        writable: true,
    };

    /// Whether reading is of interest.
    pub fn is_readable(self) -> bool {
        self.readable
    }

    /// Whether writing is of interest.
    pub fn is_writable(self) -> bool {
        self.writable
    }
}

/// One socket's readiness, as [`Poller::poll`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The token the socket was registered with.
    pub token: Token,
    /// A read (or accept) will not block.
    pub readable: bool,
    /// A write will not block.
    pub writable: bool,
    /// No more input: the peer closed its sending side or reading was shut down (reads
    /// return EOF after the buffered data).
    pub read_closed: bool,
    /// The connection failed (a read or write returns the error).
    pub error: bool,
    /// Our sending side is shut (a FIN queued or sent, or the connection closed): a
    /// write fails at once.
    pub write_closed: bool,
    /// Both directions are shut: the peer's FIN came (or reading was shut down) and our
    /// sending side is shut, or the connection closed (Linux's `EPOLLHUP`).
    pub hangup: bool,
}

/// A socket a [`Poller`] can watch: [`TcpStream`](super::TcpStream),
/// [`TcpListener`](super::TcpListener), [`UdpSocket`](super::UdpSocket).
pub trait Source: sealed::Sealed {}

pub(super) mod sealed {
    /// Keeps [`Source`](super::Source) closed to this crate's sockets.
    pub trait Sealed {
        /// The engine object and the stack it lives in.
        fn key(&self) -> (super::Key, &super::Stack);
    }
}

#[derive(Debug, Default)]
struct PollState {
    pending: Vec<(Token, Key, Interest)>,
    queued: HashSet<Token>,
}

/// The part of a poller the reactor holds (weakly).
#[derive(Debug, Default)]
pub(crate) struct PollShared {
    state: Mutex<PollState>,
    /// Moves with every token queued, so a waiting poll can watch it without the lock
    /// while it turns the loop (`runtime/turn.rs`).
    seq: AtomicU64,
}

impl PollShared {
    /// Queues `token` for the next poll (at most once).
    pub(crate) fn push(&self, token: Token, key: Key, interest: Interest) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.queued.insert(token) {
            s.pending.push((token, key, interest));
            self.seq.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Waits for readiness of many sockets of one [`Stack`]. `Send + Sync`; one thread at a
/// time should call [`Poller::poll`].
#[derive(Debug)]
pub struct Poller {
    stack: Stack,
    shared: Arc<PollShared>,
    batch: Mutex<Vec<(Token, Key, Interest)>>,
}

/// What a watch is told when its socket is gone or the stack stopped: every operation
/// returns at once (with an error or EOF), as a closed kernel socket polls.
pub(crate) const GONE: Event = Event {
    token: Token(0),
    readable: true,
    writable: true,
    read_closed: true,
    error: true,
    write_closed: true,
    hangup: true,
};

/// The level readiness of `key` now; `None` for a stale handle.
pub(crate) fn level(iface: &mut Interface, key: Key) -> Option<Event> {
    let mut ev = Event {
        token: Token(0),
        readable: false,
        writable: false,
        read_closed: false,
        error: false,
        write_closed: false,
        hangup: false,
    };
    match key {
        Key::Tcp(h) => {
            let r = iface.tcp()?.readiness(h).ok()?;
            ev.readable = r.readable;
            ev.writable = r.writable;
            ev.read_closed = r.read_closed;
            ev.error = r.error.is_some();
            ev.write_closed = r.write_closed;
            ev.hangup = r.hung_up;
        }
        Key::Listener(l) => ev.readable = iface.tcp()?.accept_ready(l).ok()?,
        Key::Udp(h) => {
            // A dropped socket's handle is stale: nothing to report.
            let s = iface.sockets().udp(h).ok()?;
            ev.readable = s.can_recv();
            ev.writable = s.can_send(1);
        }
    }
    Some(ev)
}

/// Readiness of `key` now, filtered by `interest`; `None` when nothing of interest.
fn readiness(iface: &mut Interface, key: Key, token: Token, i: Interest) -> Option<Event> {
    let mut ev = level(iface, key)?;
    ev.token = token;
    // A listener is reported on its events even when the queue looks empty (accept
    // until `WouldBlock`).
    if matches!(key, Key::Listener(_)) {
        ev.readable = true;
    }
    let hit = (i.readable && (ev.readable || ev.read_closed)) || (i.writable && ev.writable);
    (hit || ev.error).then_some(ev)
}

impl Poller {
    /// A poller for sockets of `stack`.
    pub fn new(stack: &Stack) -> Poller {
        Poller {
            stack: stack.clone(),
            shared: Arc::new(PollShared::default()),
            batch: Mutex::new(Vec::new()),
        }
    }

    /// Watches `source` for `interest`, reporting it as `token`. Registering again
    /// replaces the earlier registration. A source that is ready now is reported by the
    /// next poll.
    ///
    /// # Errors
    /// `InvalidInput` when `source` belongs to another stack.
    pub fn register(
        &self,
        source: &dyn Source,
        token: Token,
        interest: Interest,
    ) -> io::Result<()> {
        let (key, stack) = source.key();
        if !stack.same(&self.stack) {
            return Err(err(io::ErrorKind::InvalidInput, "socket of another stack"));
        }
        let mut g = self.stack.handle().lock();
        self.stack
            .registry()
            .add_poll(key, &self.shared, token, interest);
        if readiness(&mut g, key, token, interest).is_some() || matches!(key, Key::Listener(_)) {
            self.shared.push(token, key, interest);
        }
        Ok(())
    }

    /// Stops watching `source`.
    ///
    /// # Errors
    /// `NotFound` when it was not registered with this poller.
    pub fn deregister(&self, source: &dyn Source) -> io::Result<()> {
        let (key, _) = source.key();
        if self.stack.registry().remove_poll(key, &self.shared) {
            let mut s = self
                .shared
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let st = &mut *s;
            st.pending.retain(|(t, k, _)| {
                let keep = *k != key;
                if !keep {
                    st.queued.remove(t);
                }
                keep
            });
            Ok(())
        } else {
            Err(err(io::ErrorKind::NotFound, "not registered"))
        }
    }

    /// Waits up to `timeout` (`None`: forever) for registered sockets to become ready,
    /// and replaces the contents of `events` with them. Returns how many there are
    /// (0 on timeout).
    ///
    /// # Errors
    /// `NotConnected` when the stack has stopped.
    pub fn poll(&self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<usize> {
        events.clear();
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        let mut batch = self.batch.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            {
                let mut s = self
                    .shared
                    .state
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                while s.pending.is_empty() {
                    if self.stack.registry().is_closed() {
                        return Err(super::error::stopped());
                    }
                    if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                        return Ok(0);
                    }
                    // Turn the loop on this thread until a token is queued (or the
                    // deadline passes), as a blocked socket call does.
                    let seen = self.shared.seq.load(Ordering::SeqCst);
                    drop(s);
                    self.stack
                        .drive_until(|| self.shared.seq.load(Ordering::SeqCst) != seen, deadline);
                    s = self
                        .shared
                        .state
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                }
                std::mem::swap(&mut s.pending, &mut *batch);
                s.queued.clear();
            }
            {
                let mut g = self.stack.handle().lock();
                for (token, key, i) in batch.drain(..) {
                    events.extend(readiness(&mut g, key, token, i));
                }
            }
            if !events.is_empty() {
                return Ok(events.len());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interests_combine_as_named() {
        assert!(Interest::BOTH.is_readable() && Interest::BOTH.is_writable());
        assert!(!Interest::READABLE.is_writable());
        assert!(!Interest::WRITABLE.is_readable());
    }

    #[test]
    fn a_token_is_queued_once_until_taken() {
        let s = PollShared::default();
        let key = Key::Listener(dummy_listener());
        s.push(Token(1), key, Interest::READABLE);
        s.push(Token(1), key, Interest::READABLE);
        assert_eq!(s.state.lock().unwrap().pending.len(), 1);
    }

    fn dummy_listener() -> ulnet_stack::tcp::ListenerHandle {
        let mut t = ulnet_stack::tcp::Tcp::new(Default::default(), [0; 16]);
        t.listen("198.18.0.1:1".parse().unwrap(), 1).unwrap()
    }
}
