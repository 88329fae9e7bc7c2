//! The bridge from the runtime loop to waiting threads, tasks and pollers.
//!
//! The [`Registry`] holds one [`Entry`] per socket object of the API. The [`Reactor`]
//! runs inside the loop as an [`App`]: for every readiness event of a registered socket
//! (TCP's, and the socket set's for UDP) it bumps the entry's [`Notify`] cell (blocked
//! threads), wakes its stored wakers (tokio tasks) and queues its token on every
//! [`Poller`](super::Poller) that registered it. Sockets without an event are not
//! looked at: the cost of an iteration does not grow with the number of waiters.
//!
//! Lost wake-ups are impossible because both sides hold the interface lock: a waiter
//! checks its condition and reads the cell's sequence number under it, and the reactor
//! bumps the cell under it (the loop calls apps with the interface locked); the waiter
//! then turns the loop itself until the number moves, and a turn by another thread that
//! moved it wakes every thread asleep in `poll(2)` (`runtime/turn.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::Waker;

use ulnet_stack::iface::Interface;
use ulnet_stack::socket::{Event as SocketEvent, UdpHandle};
use ulnet_stack::tcp::{Event, ListenerHandle, SocketHandle};
use ulnet_stack::time::Instant;

use super::poll::{Interest, PollShared, Token};
use crate::runtime::App;

/// Which engine object an entry stands for (public only so the sealed
/// [`Source`](super::Source) trait can name it; not reachable from outside).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    /// A TCP connection.
    Tcp(SocketHandle),
    /// A TCP listener.
    Listener(ListenerHandle),
    /// A UDP socket.
    Udp(UdpHandle),
}

/// The registry's hasher. Its keys are handles the stack hands out (slot indices and
/// generations), never bytes a peer chose, so the keyed SipHash of std's default
/// (a fifth of a TCP round trip's readiness hand-off) buys nothing here: a multiply and
/// rotate per word, as FxHash does, spreads them well enough.
#[derive(Debug, Default, Clone, Copy)]
struct HandleHasher(u64);

impl std::hash::Hasher for HandleHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.add(u64::from(b));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    fn write_isize(&mut self, n: isize) {
        self.add(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl HandleHasher {
    fn add(&mut self, w: u64) {
        // FxHash's constant and step (rustc's hasher).
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type HandleMap<V> = HashMap<Key, V, std::hash::BuildHasherDefault<HandleHasher>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A sequence number that moves with every readiness event of one socket. A blocked
/// thread reads it (under the interface lock, with its condition) and then turns the
/// loop until it moves (`runtime/turn.rs`): no condition variable, so an event costs
/// no system call when no one waits.
#[derive(Debug, Default)]
pub(crate) struct Notify {
    seq: AtomicU64,
}

impl Notify {
    /// The current sequence number (read it under the interface lock).
    pub(crate) fn seq(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    fn bump(&self) {
        self.seq.fetch_add(1, Ordering::SeqCst);
    }
}

#[derive(Debug)]
struct PollReg {
    poller: Weak<PollShared>,
    token: Token,
    interest: Interest,
}

/// A level-readiness callback ([`Stack::watch`](super::Stack::watch)): the socket's
/// readiness, and whether an event of the engine (rather than a refresh) brought it.
pub type WatchFn = Arc<dyn Fn(&super::Event, bool) + Send + Sync>;

#[derive(Default)]
struct Entry {
    notify: Arc<Notify>,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
    polls: Vec<PollReg>,
    /// Called with the socket's level readiness on each of its events, inside the loop.
    watch: Option<WatchFn>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("notify", &self.notify)
            .field("polls", &self.polls)
            .field("watch", &self.watch.is_some())
            .finish_non_exhaustive()
    }
}

impl Entry {
    /// The waker stored for `dir`.
    fn waker_slot(&mut self, dir: Dir) -> &mut Option<Waker> {
        match dir {
            Dir::Read => &mut self.read_waker,
            Dir::Write => &mut self.write_waker,
        }
    }

    /// Bumps the notify cell, moves the stored wakers to `wakers` (counted off
    /// `waiting`) and tells the pollers.
    fn fire(&mut self, key: Key, wakers: &mut Vec<Waker>, waiting: &AtomicUsize) {
        self.notify.bump();
        let before = wakers.len();
        wakers.extend(self.read_waker.take());
        wakers.extend(self.write_waker.take());
        let taken = wakers.len() - before;
        if taken > 0 {
            waiting.fetch_sub(taken, Ordering::Relaxed);
        }
        self.polls.retain(|p| match p.poller.upgrade() {
            Some(s) => {
                s.push(p.token, key, p.interest);
                true
            }
            None => false,
        });
    }
}

/// Per-socket wait state of one stack.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    entries: Mutex<HandleMap<Entry>>,
    /// The runtime loop has ended: every wait returns.
    closed: AtomicBool,
    /// A waker, a poller registration or a watch was ever stored: something may wait
    /// for events without turning the loop (see `App::waits_outside_calls`). It stays
    /// set: a stack used that way once is likely used that way again.
    outside: AtomicBool,
    /// Task wakers stored and not yet fired: operations waiting on a socket event
    /// (those of futures dropped while pending count until their socket's next event
    /// or its end).
    waiting: AtomicUsize,
}

/// Which direction a task waits for.
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
}

impl Registry {
    /// The notify cell of `key`, creating the entry.
    pub(crate) fn notify(&self, key: Key) -> Arc<Notify> {
        Arc::clone(&lock(&self.entries).entry(key).or_default().notify)
    }

    /// Forgets `key` (its socket is gone); its waiters are woken.
    pub(crate) fn remove(&self, key: Key) {
        let mut wakers = Vec::new();
        let mut m = lock(&self.entries);
        if let Some(mut e) = m.remove(&key) {
            e.fire(key, &mut wakers, &self.waiting);
        }
        // Give back what a peak of sockets left (issue 13): below a quarter of its
        // capacity the map shrinks to twice its length (amortised over the removals).
        if m.capacity() > 64 && m.len() < m.capacity() / 4 {
            let len = m.len();
            m.shrink_to(2 * len);
        }
        drop(m);
        wakers.into_iter().for_each(Waker::wake);
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    /// Stores the waker of the task waiting on `key` in direction `dir`.
    pub(crate) fn set_waker(&self, key: Key, dir: Dir, waker: &Waker) {
        self.outside.store(true, Ordering::Relaxed);
        let mut m = lock(&self.entries);
        let slot = m.entry(key).or_default().waker_slot(dir);
        match slot {
            Some(w) if w.will_wake(waker) => {}
            Some(_) => *slot = Some(waker.clone()),
            None => {
                *slot = Some(waker.clone());
                self.waiting.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Drops the waker stored for `key` in `dir` if it is `waker` (an operation that
    /// finished without its socket's event: another wake-up brought it back).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn forget_waker(&self, key: Key, dir: Dir, waker: &Waker) {
        let mut m = lock(&self.entries);
        let Some(e) = m.get_mut(&key) else {
            return;
        };
        let slot = e.waker_slot(dir);
        if slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = None;
            self.waiting.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Task wakers stored and not yet fired (see the field).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Adds a poller registration for `key`.
    pub(crate) fn add_poll(&self, key: Key, poller: &Arc<PollShared>, token: Token, i: Interest) {
        self.outside.store(true, Ordering::Relaxed);
        let mut m = lock(&self.entries);
        let e = m.entry(key).or_default();
        e.polls
            .retain(|p| !std::ptr::eq(p.poller.as_ptr(), Arc::as_ptr(poller)));
        e.polls.push(PollReg {
            poller: Arc::downgrade(poller),
            token,
            interest: i,
        });
    }

    /// Removes `poller`'s registration of `key`; false if there was none.
    pub(crate) fn remove_poll(&self, key: Key, poller: &Arc<PollShared>) -> bool {
        let mut m = lock(&self.entries);
        let Some(e) = m.get_mut(&key) else {
            return false;
        };
        let before = e.polls.len();
        e.polls
            .retain(|p| !std::ptr::eq(p.poller.as_ptr(), Arc::as_ptr(poller)));
        before != e.polls.len()
    }

    /// Sets (or with `None` clears) the level-readiness callback of `key`.
    pub(crate) fn set_watch(&self, key: Key, f: Option<WatchFn>) {
        if f.is_some() {
            self.outside.store(true, Ordering::Relaxed);
        }
        lock(&self.entries).entry(key).or_default().watch = f;
    }

    /// Whether anything ever waited through a waker, a poller or a watch.
    pub(crate) fn waits_outside_calls(&self) -> bool {
        self.outside.load(Ordering::Relaxed)
    }

    /// Calls `key`'s watch, if any, with its readiness now (`iface` is locked).
    pub(crate) fn refresh(&self, iface: &mut Interface, key: Key) {
        let f = lock(&self.entries).get(&key).and_then(|e| e.watch.clone());
        if let Some(f) = f {
            f(
                &super::poll::level(iface, key).unwrap_or(super::poll::GONE),
                false,
            );
        }
    }

    /// Whether the loop has ended.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The loop ended: wake everyone, for good.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let mut wakers = Vec::new();
        for (k, e) in lock(&self.entries).iter_mut() {
            e.fire(*k, &mut wakers, &self.waiting);
            if let Some(f) = &e.watch {
                f(&super::poll::GONE, true);
            }
        }
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Fires the entries this iteration's events concern, then wakes their tasks
    /// (`wakers`: the caller's, reused, so a batch that wakes a task allocates nothing).
    fn dispatch(
        &self,
        iface: &mut Interface,
        events: &[Event],
        socket_events: &[SocketEvent],
        wakers: &mut Vec<Waker>,
    ) {
        if events.is_empty() && socket_events.is_empty() {
            return;
        }
        {
            let mut m = lock(&self.entries);
            if m.is_empty() {
                return;
            }
            let tcp = events.iter().map(|ev| match *ev {
                Event::Socket(h) => Some(Key::Tcp(h)),
                Event::Listener(l) => Some(Key::Listener(l)),
            });
            let sockets = socket_events.iter().map(|ev| match *ev {
                SocketEvent::Udp(h) => Some(Key::Udp(h)),
                // The socket API has no ICMP sockets (ping runs as an app).
                SocketEvent::Icmp(_) => None,
            });
            for key in tcp.chain(sockets).flatten() {
                if let Some(e) = m.get_mut(&key) {
                    e.fire(key, wakers, &self.waiting);
                    if let Some(f) = &e.watch {
                        f(
                            &super::poll::level(iface, key).unwrap_or(super::poll::GONE),
                            true,
                        );
                    }
                }
            }
        }
        // Here, inside the iteration: waking them once the interface is unlocked and
        // the doorbell rung cut a tokio reader's MTU 9000 stream from 20 to 16 Gb/s
        // (docs/performance-log.md, "Session 17").
        wakers.drain(..).for_each(Waker::wake);
    }
}

/// The app the [`Stack`](super::Stack) runs in its loop: dispatches readiness to the
/// API's waiters, then runs the user's own apps.
pub(crate) struct Reactor {
    pub(crate) registry: Arc<Registry>,
    pub(crate) apps: Vec<Box<dyn App + Send>>,
    /// This iteration's UDP and ICMP events, until `poll` dispatches them with TCP's
    /// (reused: no allocation once it has grown).
    pub(crate) socket_events: Vec<SocketEvent>,
    /// The wakers an iteration's events fire (reused likewise).
    pub(crate) wakers: Vec<Waker>,
}

impl App for Reactor {
    fn socket_events(&mut self, iface: &mut Interface, events: &[SocketEvent]) {
        self.socket_events.clear();
        self.socket_events.extend_from_slice(events);
        for a in &mut self.apps {
            a.socket_events(iface, events);
        }
    }

    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        self.registry
            .dispatch(iface, events, &self.socket_events, &mut self.wakers);
        self.socket_events.clear();
        for a in &mut self.apps {
            a.poll(now, iface, events);
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        self.apps.iter().filter_map(|a| a.poll_at()).min()
    }

    fn waits_outside_calls(&self) -> bool {
        self.registry.waits_outside_calls() || self.apps.iter().any(|a| a.waits_outside_calls())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_moves_on_bump() {
        let n = Notify::default();
        let seen = n.seq();
        n.bump();
        assert_eq!(n.seq(), seen + 1);
    }

    #[test]
    fn close_fires_every_entry_and_sticks() {
        let r = Registry::default();
        let n = r.notify(Key::Udp(ulnet_stack_test_handle()));
        let seen = n.seq();
        r.close();
        assert!(r.is_closed());
        assert_ne!(n.seq(), seen);
    }

    #[test]
    fn a_watch_or_a_waker_means_waiting_outside_calls() {
        let key = Key::Udp(ulnet_stack_test_handle());
        let r = Registry::default();
        r.notify(key);
        r.set_watch(key, None);
        assert!(!r.waits_outside_calls(), "blocking calls only");
        r.set_watch(key, Some(Arc::new(|_: &super::super::Event, _| {})));
        assert!(r.waits_outside_calls());
        let r = Registry::default();
        r.set_waker(key, Dir::Read, Waker::noop());
        assert!(r.waits_outside_calls());
    }

    /// `waiting` counts stored task wakers: once per slot however often a task waits
    /// again, off when fired (an event, the socket's end, the loop's) or forgotten by
    /// the task it belongs to.
    #[test]
    fn waiting_counts_stored_wakers() {
        struct Nop;
        impl std::task::Wake for Nop {
            fn wake(self: Arc<Self>) {}
        }
        let key = Key::Udp(ulnet_stack_test_handle());
        let (a, b) = (Waker::from(Arc::new(Nop)), Waker::from(Arc::new(Nop)));
        let r = Registry::default();
        r.set_waker(key, Dir::Read, &a);
        r.set_waker(key, Dir::Read, &a);
        r.set_waker(key, Dir::Read, &b);
        assert_eq!(r.waiting(), 1, "one slot");
        r.set_waker(key, Dir::Write, &a);
        assert_eq!(r.waiting(), 2);
        r.forget_waker(key, Dir::Write, &b);
        assert_eq!(r.waiting(), 2, "not b's");
        r.forget_waker(key, Dir::Write, &a);
        assert_eq!(r.waiting(), 1);
        r.remove(key);
        assert_eq!(r.waiting(), 0, "fired at the socket's end");
        r.set_waker(key, Dir::Write, &a);
        r.close();
        assert_eq!(r.waiting(), 0, "fired at the loop's end");
    }

    fn ulnet_stack_test_handle() -> UdpHandle {
        use ulnet_stack::socket::{SocketSet, UdpConfig, UdpSocket};
        let mut set = SocketSet::new(1, 0);
        set.add_udp(UdpSocket::new(UdpConfig::default())).unwrap()
    }
}
