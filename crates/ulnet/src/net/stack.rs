//! [`Stack`]: one interface with its runtime loop on a thread of its own, built by
//! [`StackBuilder`] (`builder.rs`).
//!
//! The common case is three lines:
//!
//! ```no_run
//! use ulnet::net::{Stack, TcpListener};
//! let stack = Stack::builder().interface("veth1").address("198.18.0.5/24").build()?;
//! let listener = TcpListener::bind(&stack, "0.0.0.0:7")?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Lifetime: a `Stack` is a cheap, cloneable reference; every socket holds one too.
//! When the last reference goes, the loop is given a bounded time
//! ([`StackBuilder::close_linger`]) to finish the connections that are closing
//! (FINs sent and acknowledged), then it stops and its thread is joined.

use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::thread::JoinHandle;
use std::time::Duration;

use ulnet_channel::Channel;
use ulnet_stack::iface::{AddrOrigin, AddrState, Interface, IpCidr};

use super::builder::StackBuilder;
use super::error::{err, stopped};
use super::reactor::{Notify, Reactor, Registry};
use crate::runtime::{App, Engine, Handle, Runtime};

pub(crate) struct StackInner {
    handle: Handle,
    registry: Arc<Registry>,
    local_ip: IpAddr,
    /// Every configured address (the interface's, as built), for source selection.
    addresses: Vec<IpCidr>,
    close_linger: Duration,
    /// The loop, turned by its own thread and by application threads that wait.
    engine: Arc<Engine>,
    /// The channel registered with the reactor of the tokio runtime the first pending
    /// async operation ran on (`tokio_io.rs`).
    #[cfg(feature = "tokio")]
    pub(super) reactor_fd: std::sync::OnceLock<super::tokio_io::ReactorFd>,
    /// [`StackBuilder::drive_from_tasks`].
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(super) drive_from_tasks: bool,
    /// The thread (`tokio_io.rs`'s token, 0 for none) whose runtime holds a turn spawned
    /// to send what tokio tasks wrote, not yet run (`Stack::flush_on_yield`).
    #[cfg(feature = "tokio")]
    pub(super) flush_spawned: std::sync::atomic::AtomicU64,
    thread: Mutex<Option<JoinHandle<io::Result<()>>>>,
}

impl Drop for StackInner {
    fn drop(&mut self) {
        if !self.registry.is_closed() {
            // Let closing connections finish (FIN out and acknowledged), bounded.
            let deadline = std::time::Instant::now() + self.close_linger;
            let mut g = self.handle.lock();
            while g.tcp().is_some_and(|t| t.connection_count() > 0) {
                let now = std::time::Instant::now();
                if now >= deadline {
                    break;
                }
                self.handle.wake();
                g = self
                    .handle
                    .wait_change(g, (deadline - now).min(Duration::from_millis(50)));
            }
        }
        self.handle.stop();
        let t = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}

/// A running user-level stack: an interface driven by a runtime loop on its own
/// thread. Clone it freely (it is a reference); it is `Send + Sync`.
#[derive(Clone)]
pub struct Stack {
    inner: Arc<StackInner>,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("local_ip", &self.inner.local_ip)
            .field("running", &self.is_running())
            .finish()
    }
}

impl Stack {
    /// A builder with the defaults.
    pub fn builder() -> StackBuilder {
        StackBuilder::default()
    }

    /// Wraps a runtime (e.g. from [`StackBuilder::build_runtime`], to read its channel's
    /// capabilities first) and starts its loop on a new thread, with `apps` inside it.
    /// IPv6 addresses still in duplicate address detection are not usable yet: call
    /// [`Runtime::settle_addresses`] first (as [`StackBuilder::build`] does).
    ///
    /// # Errors
    /// `InvalidInput` when the interface has no address; the thread could not start.
    pub fn from_runtime<C: Channel + Send + 'static>(
        rt: Runtime<C>,
        apps: Vec<Box<dyn App + Send>>,
    ) -> io::Result<Stack> {
        Stack::start(rt, apps, Duration::from_secs(1), true)
    }

    pub(super) fn start<C: Channel + Send + 'static>(
        rt: Runtime<C>,
        apps: Vec<Box<dyn App + Send>>,
        close_linger: Duration,
        drive_from_tasks: bool,
    ) -> io::Result<Stack> {
        let addresses = rt.iface().config().addresses.clone();
        let local_ip = addresses
            .first()
            .map(IpCidr::address)
            .ok_or_else(|| err(io::ErrorKind::InvalidInput, "the interface has no address"))?;
        let handle = rt.handle();
        let registry = Arc::new(Registry::default());
        let reactor = Reactor {
            registry: Arc::clone(&registry),
            apps,
            socket_events: Vec::with_capacity(128),
            wakers: Vec::with_capacity(16),
        };
        let engine = Arc::new(Engine::new(rt, reactor)?);
        let reg = Arc::clone(&registry);
        let e = Arc::clone(&engine);
        let thread = std::thread::Builder::new()
            .name("ulnet-stack".into())
            .spawn(move || {
                let r = e.run();
                reg.close();
                r
            })?;
        Ok(Stack {
            inner: Arc::new(StackInner {
                handle,
                registry,
                local_ip,
                addresses,
                close_linger,
                engine,
                #[cfg(feature = "tokio")]
                reactor_fd: std::sync::OnceLock::new(),
                drive_from_tasks,
                #[cfg(feature = "tokio")]
                flush_spawned: std::sync::atomic::AtomicU64::new(0),
                thread: Mutex::new(Some(thread)),
            }),
        })
    }

    /// The runtime handle: lock the interface, wake or stop the loop.
    pub fn handle(&self) -> &Handle {
        &self.inner.handle
    }

    /// The stack's own address (the first configured).
    pub fn local_ip(&self) -> IpAddr {
        self.inner.local_ip
    }

    /// The configured addresses with their prefixes (the link-local one not included).
    pub fn addresses(&self) -> &[IpCidr] {
        &self.inner.addresses
    }

    /// The source address for talking to `remote` (a simplified RFC 6724 §5): one of
    /// the same family; for a link-local destination the link-local address (rule 2,
    /// matching scope); for IPv4 one whose prefix holds `remote` (on-link, the longest
    /// match, rule 8), else the first; for IPv6 the usable address (DAD passed,
    /// configured or formed from a router's prefix) sharing the longest prefix with
    /// `remote` (rule 8), else the link-local one. `None` when the stack has no usable
    /// address of `remote`'s family.
    pub fn source_for(&self, remote: IpAddr) -> Option<IpAddr> {
        self.with(|iface| source_for(iface, remote))
    }

    /// Runs `f` on the locked interface with the loop's `now`, then wakes the loop.
    /// Keep `f` short: the loop waits for it.
    pub fn with<R>(&self, f: impl FnOnce(&mut Interface) -> R) -> R {
        self.inner.handle.with(|iface, _| f(iface))
    }

    /// Waits, at most `limit`, until no UDP socket has datagrams queued for sending: what
    /// an exiting process does so that a datagram `send_to` accepted still leaves, as the
    /// kernel's would (a socket's own drop waits for its queue; this is for sockets that
    /// outlive the caller's view of them, e.g. one engine socket shared by several C
    /// sockets). True when everything left.
    pub fn flush_datagrams(&self, limit: Duration) -> bool {
        self.wait_while(limit, |set| {
            set.udp_sockets().any(|(_, s)| s.tx_queued() > 0)
        })
    }

    /// Wakes the loop and waits, at most `limit`, while `pending` holds for the socket
    /// set (re-checked at each change the loop signals); false when time ran out or the
    /// loop stopped first.
    pub(crate) fn wait_while(
        &self,
        limit: Duration,
        pending: impl Fn(&ulnet_stack::socket::SocketSet) -> bool,
    ) -> bool {
        let handle = self.handle();
        let deadline = std::time::Instant::now() + limit;
        let mut g = handle.lock();
        while pending(g.sockets()) {
            let now = std::time::Instant::now();
            if now >= deadline || !self.is_running() {
                return false;
            }
            handle.wake();
            g = handle.wait_change(g, (deadline - now).min(Duration::from_millis(20)));
        }
        true
    }

    /// Whether the loop still runs.
    pub fn is_running(&self) -> bool {
        !self.inner.registry.is_closed()
    }

    /// Stops the loop now (connections are not closed gracefully); every blocked
    /// operation returns `NotConnected`. Waits for the loop's thread.
    ///
    /// # Errors
    /// The loop had failed with this error (a channel system call).
    pub fn stop(&self) -> io::Result<()> {
        self.inner.handle.stop();
        let t = self
            .inner
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match t.map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(err(io::ErrorKind::Other, "the ulnet loop panicked")),
            None => Ok(()),
        }
    }

    /// Turns the loop on the calling thread until `ready()` or `deadline` (false when
    /// it passed first); see `runtime/turn.rs`.
    pub(crate) fn drive_until(
        &self,
        ready: impl FnMut() -> bool,
        deadline: Option<std::time::Instant>,
    ) -> bool {
        self.inner.engine.drive_until(ready, deadline)
    }

    /// Calls `f` from inside the loop, with the interface locked, with `source`'s level
    /// readiness each time it may have changed (the same events that wake blocked calls
    /// and [`Poller`](super::Poller)s: `f`'s second argument is then `true`), and once
    /// now and at each [`refresh`](Self::refresh) (then `false`). `f` must be short and must not call
    /// into this stack (it runs under the interface lock); a readiness event of a socket
    /// that is gone, or of a stack that stopped, has every flag set. Replaces an earlier
    /// watch of the same socket; the watch ends when the socket is dropped. This is what
    /// mirrors readiness onto kernel descriptors (the C library, `crates/capi`).
    ///
    /// # Errors
    /// `InvalidInput` when `source` belongs to another stack.
    pub fn watch(&self, source: &dyn super::Source, f: super::WatchFn) -> io::Result<()> {
        let (key, stack) = source.key();
        if !stack.same(self) {
            return Err(err(io::ErrorKind::InvalidInput, "socket of another stack"));
        }
        let mut g = self.inner.handle.lock();
        self.registry().set_watch(key, Some(f));
        self.registry().refresh(&mut g, key);
        Ok(())
    }

    /// Calls `source`'s watch ([`watch`](Self::watch)) with its readiness now: after an
    /// operation that changed it without an event of the engine (a read that emptied
    /// the buffer). Does nothing for a socket without a watch.
    pub fn refresh(&self, source: &dyn super::Source) {
        let (key, _) = source.key();
        let mut g = self.inner.handle.lock();
        self.registry().refresh(&mut g, key);
    }

    /// The level readiness of `source` now (`None` when it is gone).
    pub fn readiness(&self, source: &dyn super::Source) -> Option<super::Event> {
        let (key, _) = source.key();
        let mut g = self.inner.handle.lock();
        super::poll::level(&mut g, key)
    }

    /// The loop's counters (iterations, frames, flushes, sleeps, wake-ups), over every
    /// thread that turned it; with [`Stack::turns`], the loop's own thread's share.
    pub fn loop_stats(&self) -> crate::runtime::RuntimeStats {
        self.inner.engine.stats()
    }

    /// Where the loop has turned besides its own thread: how much of the stack's work
    /// ran on the application's threads (`runtime/turn.rs`).
    pub fn turns(&self) -> Turns {
        let (blocked_calls, tasks, after_calls) = self.inner.engine.turn_counts();
        Turns {
            blocked_calls,
            tasks,
            after_calls,
        }
    }

    /// Turns the loop's own thread has taken so far: every turn
    /// ([`loop_stats`](Self::loop_stats)' iterations) but those of [`turns`](Self::turns).
    /// Where application threads drive the loop, this stays still; each turn here is a
    /// hand-off, or a turn while no application thread was in a call.
    pub fn loop_thread_turns(&self) -> u64 {
        self.inner.engine.loop_thread_turns()
    }

    /// Times the loop's own thread took the loop over from application threads that
    /// had been driving it: after a park (20 ms in busy-poll, 1 ms while a writer's data
    /// waits on the windows) in which none turned, or
    /// when the last one left its call. Each is one hand-off, however many of
    /// [`loop_thread_turns`](Self::loop_thread_turns) it lasted.
    pub fn loop_thread_takeovers(&self) -> u64 {
        self.inner.engine.loop_thread_takeovers()
    }

    /// Times the loop's own thread parked while application threads drove the loop
    /// (each park ends in a wake-up of that thread, on their cores when they share
    /// one): 20 ms at a time while they are busy, 1 ms while a writer's data waits on
    /// the windows, up to 200 ms while they sleep.
    pub fn loop_thread_parks(&self) -> u64 {
        self.inner.engine.loop_thread_parks()
    }

    #[cfg(feature = "tokio")]
    pub(super) fn inner(&self) -> &StackInner {
        &self.inner
    }

    /// A reference that does not keep the stack alive.
    #[cfg(feature = "tokio")]
    pub(super) fn downgrade(&self) -> std::sync::Weak<StackInner> {
        Arc::downgrade(&self.inner)
    }

    /// The stack `w` refers to, while it lives.
    #[cfg(feature = "tokio")]
    pub(super) fn upgrade(w: &std::sync::Weak<StackInner>) -> Option<Stack> {
        w.upgrade().map(|inner| Stack { inner })
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub(crate) fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    pub(crate) fn same(&self, other: &Stack) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Runs `op` on the locked interface until it is ready: `Poll::Pending` waits for
    /// the socket's next readiness event (`notify`), up to `timeout`. `queued` says,
    /// under the lock, whether the finished call left something for the wire (a
    /// datagram, data, a window update): only then does a turn (or a wake-up of the
    /// loop) follow it.
    ///
    /// # Errors
    /// What `op` returns; `WouldBlock` when `nonblocking` and not ready, or when the
    /// timeout passes (std's read/write timeouts on Unix), `timeout_kind` for the
    /// latter; `NotConnected` once the loop has stopped.
    pub(crate) fn block<T>(
        &self,
        notify: &Notify,
        nonblocking: bool,
        timeout: Option<Duration>,
        timeout_kind: io::ErrorKind,
        mut op: impl FnMut(&mut Interface) -> Poll<io::Result<T>>,
        queued: Queued,
    ) -> io::Result<T> {
        // Read the clock only once the call must wait: most calls do not. A writer of
        // 128-byte messages with a write timeout set (seed 004's case) spent a tenth of
        // its CPU reading the clock, twice a write; this was one of the two.
        let mut deadline = None;
        loop {
            let seen = {
                let mut g = self.inner.handle.lock();
                if let Poll::Ready(r) = op(&mut g) {
                    let turn = queued.check(&g);
                    drop(g);
                    // What `op` queued (data, a window update) leaves from this thread
                    // when application threads drive, else with the loop's next batch.
                    // A call that queued nothing (a datagram read) costs no turn: in a
                    // busy-poll ping-pong that turn was a tenth of the round trip.
                    if turn {
                        self.inner.engine.after_call();
                    }
                    return r;
                }
                if self.registry().is_closed() {
                    return Err(stopped());
                }
                notify.seq()
            };
            if nonblocking {
                self.inner.engine.after_call();
                return Err(io::ErrorKind::WouldBlock.into());
            }
            if deadline.is_none() {
                deadline = timeout.map(|t| std::time::Instant::now() + t);
            }
            // Drive the loop from this thread until the socket's readiness moves,
            // rather than sleep until the loop's thread hands it over.
            if !self
                .inner
                .engine
                .drive_until(|| notify.seq() != seen, deadline)
            {
                return Err(err(timeout_kind, "operation timed out"));
            }
        }
    }
}

/// Turns of a [`Stack`]'s loop taken on application threads ([`Stack::turns`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Turns {
    /// By threads blocked in a socket call, driving the loop until their socket is
    /// ready.
    pub blocked_calls: u64,
    /// By tokio tasks whose operation was pending, when their runtime's reactor saw
    /// frames on the channel.
    pub tasks: u64,
    /// By calls that queued something (a write, a send) and found nobody else
    /// turning: one turn each, so the data left from the caller's thread.
    pub after_calls: u64,
}

/// Whether a finished socket call may have queued something for the wire
/// ([`Stack::block`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Queued {
    /// It may have (a send, a write, an accept): always turn.
    Maybe,
    /// A tokio task's TCP write: as `Maybe`, but the turn that sends it runs once the
    /// task yields to its runtime (`tokio_io.rs`, `Stack::flush_on_yield`).
    #[cfg(feature = "tokio")]
    OnYield,
    /// It cannot have (a datagram read frees queue space, nothing more).
    Nothing,
    /// Only what the TCP layer now has pending (a read may open the window enough for
    /// a window update, RFC 9293 §3.8.6.2.2).
    TcpOutput,
}

impl Queued {
    pub(super) fn check(self, iface: &Interface) -> bool {
        match self {
            Queued::Maybe => true,
            #[cfg(feature = "tokio")]
            Queued::OnYield => true,
            Queued::Nothing => false,
            Queued::TcpOutput => iface
                .tcp()
                .is_some_and(ulnet_stack::tcp::Tcp::output_pending),
        }
    }
}

/// [`Stack::source_for`] on a locked interface (connect calls it with the lock held).
pub(crate) fn source_for(iface: &Interface, remote: IpAddr) -> Option<IpAddr> {
    match remote {
        IpAddr::V4(_) => {
            let v4 = || {
                iface
                    .config()
                    .addresses
                    .iter()
                    .filter(|a| a.address().is_ipv4())
            };
            v4().filter(|a| a.contains(remote))
                .max_by_key(|a| a.prefix_len())
                .or_else(|| v4().next())
                .map(IpCidr::address)
        }
        IpAddr::V6(r) => {
            let usable = || {
                iface
                    .ipv6_addresses()
                    .filter(|a| a.state == AddrState::Preferred)
            };
            let link_local = || {
                usable()
                    .find(|a| a.origin == AddrOrigin::LinkLocal)
                    .map(|a| a.addr)
            };
            let addr = if r.is_unicast_link_local() {
                link_local()
            } else {
                usable()
                    .filter(|a| a.origin != AddrOrigin::LinkLocal)
                    .max_by_key(|a| (u128::from(a.addr) ^ u128::from(r)).leading_zeros())
                    .map(|a| a.addr)
                    .or_else(link_local)
            };
            addr.map(IpAddr::V6)
        }
    }
}
