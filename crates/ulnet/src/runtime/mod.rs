//! The runtime: the loop that drives one [`Interface`] over one [`Channel`], run to
//! completion (docs/ARCHITECTURE.md, seed 000).
//!
//! Each iteration reads the clock once, takes a batch of received frames and carries
//! every frame through [`Interface::ingress`] with the channel's transmit half as the
//! sink (answers go out in the same batch), lets the [`App`] react, runs
//! [`Interface::egress`] for timers and queued sends, and flushes the transmit half once
//! for the whole batch (the channel rings the doorbell only when the device sleeps).
//!
//! Waiting ([`WaitMode`]): busy-polling spins on the ring; sleeping blocks in `poll(2)` on
//! the channel's wait descriptor and an eventfd, with a timeout reaching to the
//! interface's next deadline, so an idle runtime costs no CPU. A sleeping loop first
//! keeps polling for a short while after its last frame ([`Runtime::set_spin`]): under
//! load the next batch is usually microseconds away, while a wake-up from `poll(2)`
//! costs tens of microseconds in a VM (docs/LINUX-NOTES.md) and a context switch each way.
//!
//! Sharing: the interface lives in a mutex inside [`Shared`]; the loop holds it for one
//! iteration at a time. Other threads reach it through a [`Handle`]: lock, change
//! something (connect, send), then [`Handle::wake`] the loop, and sleep on
//! [`Handle::wait_change`] until the loop reports progress. That is enough to build
//! blocking, std::net-like sockets on top.
//!
//! Invariants: no heap allocation per packet in the loop (checked by
//! `tests/no_alloc_runtime.rs`); the eventfd is written only while the loop sleeps.

mod backend;
mod clock;
mod wait;

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use ulnet_channel::{Channel, Tx};
use ulnet_stack::iface::{Interface, TxSink};
use ulnet_stack::socket::Event as SocketEvent;
use ulnet_stack::tcp::Event;
use ulnet_stack::time::Instant;

pub use backend::{
    build_interface, interface_mac, local_mac, open, parse_mac, AnyChannel, Backend, NetConfig,
    PcapChannel,
};
pub use clock::Clock;

/// The default of [`Runtime::set_spin`]: about two vCPU wake-ups (docs/LINUX-NOTES.md: 20-25 µs
/// each), so a loop that sleeps at once costs more than one that waits this long.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// How the loop waits when there is nothing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WaitMode {
    /// Sleep in `poll(2)` until a frame arrives, a deadline passes or a [`Handle`] wakes
    /// the loop: ~0 CPU when idle, a wake-up (tens of µs in a VM) per idle→busy edge.
    #[default]
    Sleep,
    /// Spin on the rings: one core at 100%, the lowest latency.
    BusyPoll,
}

/// Application logic run inside the loop, between ingress and egress, on the loop's
/// thread (the cheapest place for a server: no locks handed over, no wake-ups).
///
/// The loop drains the TCP layer's readiness events, and the socket set's UDP and ICMP
/// ones, once per iteration and shows them to every app, so several apps can share one
/// stack (each ignores handles it does not own). An app must not call
/// `Tcp::poll_event` or `SocketSet::poll_event` itself.
pub trait App {
    /// The UDP and ICMP readiness events of this iteration (a datagram or reply
    /// arrived, room was freed), shown just before [`poll`](Self::poll). Apps that
    /// read their sockets in `poll` anyway can ignore them (the default).
    fn socket_events(&mut self, _iface: &mut Interface, _events: &[SocketEvent]) {}

    /// Reacts to what the received batch changed (`events`, UDP datagrams, ICMP replies)
    /// and queues sends; called once per iteration with the iteration's `now`.
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]);

    /// The app's own next deadline (e.g. the next ping), so a sleeping loop wakes for it.
    fn poll_at(&self) -> Option<Instant> {
        None
    }

    /// True once the app is finished; [`Runtime::run`] then returns.
    fn is_done(&self) -> bool {
        false
    }
}

/// An app that does nothing: the loop then only serves the stack (ARP, ping) and
/// whatever other threads queue through a [`Handle`].
impl App for () {
    fn poll(&mut self, _now: Instant, _iface: &mut Interface, _events: &[Event]) {}
}

/// Two apps on one stack, polled in order; done when both are.
impl<A: App, B: App> App for (A, B) {
    fn socket_events(&mut self, iface: &mut Interface, events: &[SocketEvent]) {
        self.0.socket_events(iface, events);
        self.1.socket_events(iface, events);
    }
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        self.0.poll(now, iface, events);
        self.1.poll(now, iface, events);
    }
    fn poll_at(&self) -> Option<Instant> {
        match (self.0.poll_at(), self.1.poll_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
    fn is_done(&self) -> bool {
        self.0.is_done() && self.1.is_done()
    }
}

/// Any number of apps on one stack; done when all are.
impl App for Vec<Box<dyn App + Send>> {
    fn socket_events(&mut self, iface: &mut Interface, events: &[SocketEvent]) {
        for a in self.iter_mut() {
            a.socket_events(iface, events);
        }
    }
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        for a in self.iter_mut() {
            a.poll(now, iface, events);
        }
    }
    fn poll_at(&self) -> Option<Instant> {
        self.iter().filter_map(|a| a.poll_at()).min()
    }
    fn is_done(&self) -> bool {
        self.iter().all(|a| a.is_done())
    }
}

/// Moves the TCP layer's and the socket set's pending readiness events into `out` and
/// `sockets`.
fn drain_events(iface: &mut Interface, out: &mut Vec<Event>, sockets: &mut Vec<SocketEvent>) {
    if let Some(tcp) = iface.tcp_mut() {
        while let Some(e) = tcp.poll_event() {
            out.push(e);
        }
    }
    while let Some(e) = iface.sockets_mut().poll_event() {
        sockets.push(e);
    }
}

/// Counters of the loop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Loop iterations.
    pub iterations: u64,
    /// Frames received and carried through the stack.
    pub rx_frames: u64,
    /// Frames the stack queued on the channel.
    pub tx_frames: u64,
    /// Transmit flushes (at most one per iteration).
    pub flushes: u64,
    /// Times the loop went to sleep in `poll(2)`.
    pub sleeps: u64,
    /// Times a [`Handle`] had to write the eventfd to wake the loop.
    pub wakeups: u64,
}

/// The state shared between the loop and the [`Handle`]s.
#[derive(Debug)]
struct Shared {
    net: Mutex<Interface>,
    changed: Condvar,
    waiters: AtomicUsize,
    /// The loop's latest `now`, in microseconds.
    now: AtomicU64,
    sleeping: AtomicBool,
    kicked: AtomicBool,
    stop: AtomicBool,
    wakeups: AtomicU64,
    eventfd: OwnedFd,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Interface> {
        // A panic in an app leaves the interface consistent enough to tear down.
        self.net.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wake(&self) {
        self.kicked.store(true, Ordering::SeqCst);
        if self.sleeping.swap(false, Ordering::SeqCst) {
            self.wakeups.fetch_add(1, Ordering::Relaxed);
            wait::signal(&self.eventfd);
        }
    }
}

/// A cloneable, thread-safe way into a running [`Runtime`]: the interface (behind a
/// mutex), the loop's clock, a wake-up and a stop switch.
#[derive(Debug, Clone)]
pub struct Handle {
    shared: Arc<Shared>,
}

impl Handle {
    /// The loop's latest `now` (what an app thread passes to e.g. `Tcp::connect`).
    pub fn now(&self) -> Instant {
        Instant::from_micros(self.shared.now.load(Ordering::Relaxed))
    }

    /// Locks the interface. Keep the guard briefly: the loop waits for it. Call
    /// [`Handle::wake`] after queuing something so a sleeping loop sends it.
    pub fn lock(&self) -> MutexGuard<'_, Interface> {
        self.shared.lock()
    }

    /// Runs `f` on the locked interface with the loop's `now`, then wakes the loop.
    pub fn with<R>(&self, f: impl FnOnce(&mut Interface, Instant) -> R) -> R {
        let r = {
            let mut g = self.shared.lock();
            f(&mut g, self.now())
        };
        self.wake();
        r
    }

    /// Makes a sleeping loop run an iteration now (a no-op while it is busy).
    pub fn wake(&self) {
        self.shared.wake();
    }

    /// Releases `guard` and blocks until the loop has made progress (frames processed or
    /// a deadline handled) or `timeout` passes; returns the re-taken guard. Spurious
    /// returns happen: re-check the condition.
    pub fn wait_change<'a>(
        &'a self,
        guard: MutexGuard<'a, Interface>,
        timeout: Duration,
    ) -> MutexGuard<'a, Interface> {
        self.shared.waiters.fetch_add(1, Ordering::SeqCst);
        let (g, _) = self
            .shared
            .changed
            .wait_timeout(guard, timeout)
            .unwrap_or_else(PoisonError::into_inner);
        self.shared.waiters.fetch_sub(1, Ordering::SeqCst);
        g
    }

    /// Asks the loop to return from [`Runtime::run`] (safe from a signal-handling
    /// thread).
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.wake();
    }

    /// Whether [`Handle::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.shared.stop.load(Ordering::SeqCst)
    }
}

/// The transmit half as the stack's sink, counting what it accepted.
struct Sink<'a> {
    tx: &'a mut dyn Tx,
    sent: &'a mut u64,
}

impl TxSink for Sink<'_> {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        let ok = self.tx.send(len, fill).is_ok();
        *self.sent += u64::from(ok);
        ok
    }
}

/// The loop: one interface, one channel, one clock.
#[derive(Debug)]
pub struct Runtime<C> {
    channel: C,
    shared: Arc<Shared>,
    mode: WaitMode,
    clock: Clock,
    batch_count: usize,
    /// Frames may still be in the transmit ring from the last flush: flush once more.
    flush_debt: bool,
    /// How long a sleeping loop keeps polling after the last frame it moved.
    spin: Duration,
    /// The `now` of the last iteration that received or sent a frame.
    last_active: Instant,
    /// The `now` of the last iteration.
    last_now: Instant,
    /// TCP events for the app (reused: no allocation once it has grown).
    events: Vec<Event>,
    /// UDP and ICMP events for the app (at most one per socket; reused likewise).
    socket_events: Vec<SocketEvent>,
    stats: RuntimeStats,
}

impl<C: Channel> Runtime<C> {
    /// A runtime driving `iface` over `channel`, waiting as `mode` says, with time from
    /// `clock`.
    ///
    /// # Errors
    /// Creating the eventfd failed.
    pub fn new(channel: C, iface: Interface, mode: WaitMode, clock: Clock) -> io::Result<Self> {
        let batch_count = channel.capabilities().batch_count.max(1);
        let now = clock.now();
        // A manual clock does not move while the loop spins: it would never sleep.
        let spin = match clock {
            Clock::Monotonic(_) => DEFAULT_SPIN,
            Clock::Manual(_) => Duration::ZERO,
        };
        Ok(Runtime {
            channel,
            shared: Arc::new(Shared {
                net: Mutex::new(iface),
                changed: Condvar::new(),
                waiters: AtomicUsize::new(0),
                now: AtomicU64::new(now.total_micros()),
                sleeping: AtomicBool::new(false),
                kicked: AtomicBool::new(false),
                stop: AtomicBool::new(false),
                wakeups: AtomicU64::new(0),
                eventfd: wait::eventfd()?,
            }),
            mode,
            clock,
            batch_count,
            flush_debt: false,
            spin,
            last_active: now,
            last_now: now,
            events: Vec::with_capacity(256),
            socket_events: Vec::with_capacity(128),
            stats: RuntimeStats::default(),
        })
    }

    /// A handle for other threads (and signal handlers).
    pub fn handle(&self) -> Handle {
        Handle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// How long a sleeping loop keeps polling after the last frame it received or sent
    /// before it sleeps in `poll(2)` (default [`DEFAULT_SPIN`] on the monotonic clock,
    /// zero on a manual one; zero sleeps at once). It
    /// trades that much CPU after each burst for not paying a wake-up on every batch
    /// under load; an idle loop still sleeps. Busy-polling loops ignore it.
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    /// The channel.
    pub fn channel(&self) -> &C {
        &self.channel
    }

    /// The channel, mutably.
    pub fn channel_mut(&mut self) -> &mut C {
        &mut self.channel
    }

    /// Locks the interface (from the loop's own thread, between iterations).
    pub fn iface(&self) -> MutexGuard<'_, Interface> {
        self.shared.lock()
    }

    /// The current time on the runtime's clock.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// The loop's counters.
    pub fn stats(&self) -> RuntimeStats {
        RuntimeStats {
            wakeups: self.shared.wakeups.load(Ordering::Relaxed),
            ..self.stats
        }
    }

    /// One iteration: a batch in, the app, egress, one flush. Returns how many frames
    /// were received.
    ///
    /// # Errors
    /// A channel system call failed.
    pub fn poll_once(&mut self, app: &mut dyn App) -> io::Result<usize> {
        let now = self.clock.now();
        self.last_now = now;
        self.shared.now.store(now.total_micros(), Ordering::Relaxed);
        self.shared.kicked.store(false, Ordering::Relaxed);
        let mut sent = 0u64;
        let received;
        let mut progressed;
        {
            let mut guard = self.shared.lock();
            let iface = &mut *guard;
            received = self.channel.rx_batch(self.batch_count, &mut |frame, tx| {
                iface.ingress(
                    now,
                    frame,
                    &mut Sink {
                        tx,
                        sent: &mut sent,
                    },
                );
            })?;
            progressed = received > 0;
            drain_events(iface, &mut self.events, &mut self.socket_events);
            progressed |= !self.events.is_empty() || !self.socket_events.is_empty();
            app.socket_events(iface, &self.socket_events);
            app.poll(now, iface, &self.events);
            self.events.clear();
            self.socket_events.clear();
            // Only waiters care, and walking the timers on every spin of an idle loop
            // is not free.
            if !progressed && self.shared.waiters.load(Ordering::Relaxed) > 0 {
                progressed = iface.poll_at().is_some_and(|t| t <= now);
            }
            iface.egress(
                now,
                &mut Sink {
                    tx: self.channel.tx(),
                    sent: &mut sent,
                },
            );
            // Timers may have changed sockets (an RTO gave up): the app hears it next
            // iteration, and the loop does not sleep before that. Egress freed room in
            // UDP and ICMP sockets likewise (writable events).
            drain_events(iface, &mut self.events, &mut self.socket_events);
        }
        if sent > 0 || self.flush_debt {
            self.channel.tx().flush()?;
            self.stats.flushes += 1;
            // Copy-mode AF_XDP completes asynchronously: one more flush reclaims.
            self.flush_debt = sent > 0;
        }
        if received > 0 || sent > 0 {
            self.last_active = now;
        }
        self.stats.iterations += 1;
        self.stats.rx_frames += received as u64;
        self.stats.tx_frames += sent;
        if (progressed || sent > 0) && self.shared.waiters.load(Ordering::SeqCst) > 0 {
            self.shared.changed.notify_all();
        }
        Ok(received)
    }

    /// Runs until `app` is done or [`Handle::stop`] is called. A stop ends this run
    /// only: the switch is reset on return, so the runtime can run again (with the same
    /// or another app).
    ///
    /// # Errors
    /// A channel or `poll(2)` system call failed.
    pub fn run(&mut self, app: &mut dyn App) -> io::Result<()> {
        let r = self.run_until_stopped(app);
        self.shared.stop.store(false, Ordering::SeqCst);
        r
    }

    fn run_until_stopped(&mut self, app: &mut dyn App) -> io::Result<()> {
        while !self.shared.stop.load(Ordering::Relaxed) && !app.is_done() {
            let received = self.poll_once(app)?;
            if received > 0 {
                continue;
            }
            match self.mode {
                WaitMode::BusyPoll => std::hint::spin_loop(),
                // Yield rather than spin: the kernel work our transmissions cause may
                // have been deferred to ksoftirqd on this CPU, and spinning past it
                // would starve the very work we are waiting for.
                WaitMode::Sleep if self.last_now - self.last_active < self.spin => {
                    std::thread::yield_now();
                }
                WaitMode::Sleep => self.sleep(app)?,
            }
        }
        // Whatever the last iteration queued (a FIN, an RST) still goes out.
        self.channel.tx().flush()?;
        Ok(())
    }

    /// Sleeps until a frame arrives, the next deadline (interface or app) or a wake-up.
    fn sleep(&mut self, app: &dyn App) -> io::Result<()> {
        let deadline = {
            let iface = self.shared.lock();
            match (iface.poll_at(), app.poll_at()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        };
        if !self.events.is_empty() || !self.socket_events.is_empty() {
            return Ok(());
        }
        let now = self.clock.now();
        let timeout = match deadline {
            Some(t) if t <= now => return Ok(()),
            Some(t) => Some(t - now),
            None => None,
        };
        self.channel.prepare_wait()?;
        self.flush_debt = false;
        self.shared.sleeping.store(true, Ordering::SeqCst);
        if self.shared.kicked.swap(false, Ordering::SeqCst)
            || self.shared.stop.load(Ordering::SeqCst)
        {
            self.shared.sleeping.store(false, Ordering::SeqCst);
            return Ok(());
        }
        self.stats.sleeps += 1;
        let r = wait::sleep(self.channel.wait_fd(), &self.shared.eventfd, timeout);
        self.shared.sleeping.store(false, Ordering::SeqCst);
        r
    }

    /// Runs the loop on a new thread until [`Handle::stop`] or the app finishes;
    /// join the returned thread to get the runtime back.
    ///
    /// # Errors
    /// The thread could not be started.
    pub fn spawn<A>(mut self, mut app: A) -> io::Result<JoinHandle<io::Result<(Self, A)>>>
    where
        C: Send + 'static,
        A: App + Send + 'static,
    {
        std::thread::Builder::new()
            .name("ulnet-runtime".into())
            .spawn(move || {
                self.run(&mut app)?;
                Ok((self, app))
            })
    }
}
