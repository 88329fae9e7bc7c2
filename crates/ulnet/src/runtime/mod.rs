//! The runtime: the loop that drives one [`Interface`] over one [`Channel`], run to
//! completion (docs/ARCHITECTURE.md, seed 000).
//!
//! Each iteration reads the clock once, takes a batch of received frames and carries
//! every frame through [`Interface::ingress`] with the channel's transmit half as the
//! sink (answers go out in the same batch), lets the [`App`] react, runs
//! [`Interface::egress`] for timers and queued sends, and flushes the transmit half once
//! for the whole batch (the channel rings the doorbell only when the device sleeps).
//! That iteration is the plain [`Driver`] (`driver.rs`: no thread, no lock, `now`
//! passed in), which the simulator and the tests use directly in virtual time; the
//! [`Runtime`] wraps it with the clock, the lock, the counters and the waiting below.
//!
//! Waiting ([`WaitMode`]): busy-polling spins on the ring; sleeping blocks in `poll(2)` on
//! the channel's wait descriptor and an eventfd, with a timeout reaching to the
//! interface's next deadline, so an idle runtime costs no CPU. A sleeping loop first
//! keeps polling for a short while after it last sent a frame or took data in
//! ([`Runtime::set_spin`]; a frame that did neither, such as an ACK with nothing more to
//! send, leaves nothing to wait for): under load the next batch is usually microseconds
//! away, while a wake-up from `poll(2)` costs tens of microseconds in a VM
//! (docs/LINUX-NOTES.md) and a context switch each way.
//! While it only receives a TCP stream (many segments, none of its own data going out
//! or being acknowledged), it does not chase each frame but sleeps a short time and
//! takes what arrived in one batch ([`Runtime::set_coalesce`]: a NIC's adaptive receive
//! interrupt moderation, done by the consumer).
//!
//! Sharing: the interface lives in a mutex inside `Shared`; the loop holds it for one
//! iteration at a time. Other threads reach it through a [`Handle`]: lock, change
//! something (connect, send), then [`Handle::wake`] the loop, and sleep on
//! [`Handle::wait_change`] until the loop reports progress. That is enough to build
//! blocking, std::net-like sockets on top.
//!
//! Invariants: no heap allocation per packet in the loop (checked by
//! `tests/no_alloc_runtime.rs`); the eventfd is written only while the loop sleeps.

mod backend;
mod clock;
mod driver;
mod settle;
mod trim;
mod turn;
mod wait;

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use ulnet_channel::Channel;
use ulnet_stack::iface::Interface;
use ulnet_stack::time::Instant;

pub use backend::{interface_mac, local_mac, parse_mac, AnyChannel, Backend, PcapChannel};
pub(crate) use backend::{open, Link, NetConfig};
pub use clock::{Clock, Epoch};
pub use driver::{App, Driver, Flushed, Iteration};
#[cfg(feature = "tokio")]
pub(crate) use turn::AsyncTurn;
pub(crate) use turn::Engine;

/// The default of [`Runtime::set_spin`]: about two vCPU wake-ups (docs/LINUX-NOTES.md: 20-25 µs
/// each), so a loop that sleeps at once costs more than one that waits this long.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// The longest the spin grows to. The spin adapts as the KVM guest's halt-polling does
/// (Linux `cpuidle-haltpoll`, `guest_halt_poll_ns` grow/shrink): a sleep that ended
/// within this long would have been caught by spinning, so the spin doubles; a longer
/// one halves it back towards the configured spin. A flow whose next frame is often
/// 50-400 µs away (a kernel sender refilling its socket buffer on the other core)
/// otherwise pays a wake-up each time: measured here, TCP receive through the socket
/// API fell from 7.2 to 4.0 Gb/s when the application thread drove the loop with a
/// fixed 50 µs spin, and recovered at 200 µs.
pub const MAX_SPIN: Duration = Duration::from_micros(400);

/// The default of [`Runtime::set_coalesce`]: the first coalescing sleep of a stream.
/// The kernel adds up to its timer slack (50 µs for a normal thread) to a `poll(2)`
/// timeout this short, so the sleep lasts 10-60 µs; bulk receive stays near it.
pub const DEFAULT_COALESCE: Duration = Duration::from_micros(10);

/// The longest coalescing sleep. A sleep that brought fewer than [`COALESCE_BATCH`]
/// frames doubles the next one, up to half of this on frame counts alone and up to this
/// only while the batches are also smaller than [`COALESCE_BYTES`] (a slow stream of
/// small segments); a batch of four times [`COALESCE_BATCH`] halves it. A NIC's adaptive
/// interrupt moderation does the same. Measured (`ulnet bench netchannel-cpu`, receive
/// at 100 Mb/s in 128-byte writes, seed 004): 0.55 cores with the spin, 0.21 with a
/// fixed 50 µs sleep, 0.15 with 200 µs, 0.09-0.11 with 400 µs. Bulk receive
/// (`ulnet bench hurd-tcp`) wants the middle: at MTU 1500 it fell from 9 to 6.7 Gb/s
/// when every small batch could grow the sleep to 400 µs, and at MTU 9000 from 17.5 to
/// 11-14 Gb/s when batches over 16 KiB kept it at the shortest.
pub const MAX_COALESCE: Duration = Duration::from_micros(400);

/// The batch a coalescing sleep aims for, in frames (see [`MAX_COALESCE`]).
pub const COALESCE_BATCH: usize = 32;

/// The batch a coalescing sleep aims for, in bytes (see [`MAX_COALESCE`]).
pub const COALESCE_BYTES: u64 = 16 * 1024;

/// Frames at least this large on average (over the stream, since the loop last sent)
/// stop the coalescing: the loop spins instead. Coalescing amortises per-frame work (a
/// wake-up, a turn, an ACK) over a batch; a jumbo frame carries six times the bytes of a
/// 1500-byte one for the same work, and there the sleeps cost more stream than they
/// saved CPU: `ulnet bench hurd-tcp --case rx-9000`, a tokio reader turning the loop
/// itself, 16.5-17.7 Gb/s coalescing against 20.3-22.6 spinning; a blocking reader
/// 17.1-18.0 against 21.2-21.4, at 0.73-0.76 s/GB of machine CPU instead of 0.62. At
/// MTU 65535 spinning costs some (29-33 → 27-29 Gb/s, still 1.8x the kernel with its
/// offloads); docs/performance-log.md, "Session 18".
pub const COALESCE_FRAME_LIMIT: u64 = 4096;

/// Frames a loop must have received since it last sent data (a TCP peer acknowledged
/// some of ours, or a datagram left) or delivered a datagram before it coalesces. A
/// request/response exchange resets the count every round and never reaches it, nor
/// does a short response to a request of ours; a TCP stream reaches it within a few
/// hundred microseconds. Datagram receive is never coalesced: a UDP socket's queue
/// (64 datagrams by default) has no flow control to hold back a sender while the loop
/// sleeps, and a batch larger than the queue is lost (measured: `ulnet bench hurd-udp`
/// at 500 kpps delivered 94-97% with coalescing, 99.6% without). TCP's receive window
/// holds a sender to what the buffer takes.
pub const COALESCE_AFTER: usize = 32;

/// A sleep on the channel this long ends a stream (the count towards
/// [`COALESCE_AFTER`] starts again). Shorter pauses do not: a sender that writes every
/// millisecond (seed 004's paced 100 Mb/s) pauses between its bursts, and counting
/// afresh after each would chase the first 32 frames of every burst one by one.
pub const STREAM_GAP: Duration = Duration::from_millis(10);

/// The most iterations a busy-polling loop skips in a row while it looks quiet
/// (`Runtime::quiet`): every this many it takes one anyway, for what the cheap look
/// cannot see (a timer coming due, a change to a socket that rang no bell): timers are
/// looked at within a few microseconds of coming due.
pub const QUIET_SKIPS: u32 = 64;

/// Frames this long after the previous ones start a burst of a paced stream (see
/// `Runtime::coalesce_idle`): twice the longest coalescing sleep, so the gap a sleep of
/// a continuous stream leaves between two batches never counts. Seed 004's paced sender
/// writes every millisecond.
pub const BURST_GAP: Duration = Duration::from_micros(800);

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
    /// Times a loop receiving a stream slept its coalescing time instead of polling
    /// for the next frame ([`Runtime::set_coalesce`]).
    pub coalesced_sleeps: u64,
    /// Times a [`Handle`] had to write the eventfd to wake the loop.
    pub wakeups: u64,
    /// Times the loop asked the allocator to return freed TCP buffer memory to the
    /// system (`runtime/trim.rs`).
    pub heap_trims: u64,
}

/// The state shared between the loop and the [`Handle`]s.
#[derive(Debug)]
struct Shared {
    net: Mutex<Interface>,
    changed: Condvar,
    waiters: AtomicUsize,
    /// The loop's latest `now`, in microseconds.
    now: AtomicU64,
    /// Threads asleep in `poll(2)` on the eventfd (the loop's, and application threads
    /// that turn the loop while they wait: `turn.rs`).
    sleepers: AtomicUsize,
    /// The eventfd was written since the last sleeper woke.
    signalled: AtomicBool,
    /// Wake-ups so far: a thread about to sleep that sees it moved since its last
    /// look skips the sleep (no wake-up is lost, none is consumed for another thread).
    kicks: AtomicU64,
    stop: AtomicBool,
    /// The thread of a shared loop (`turn.rs`) while it parks because application
    /// threads drive: a [`Handle::wake`] from outside a turn (a close, a connect) unparks
    /// it so that what was queued leaves now.
    loop_parked: AtomicBool,
    /// The last turn left TCP segments that could not leave then (the channel was
    /// full): they wait for the next turn (`turn.rs`, `Engine::after_call`).
    output_left: AtomicBool,
    /// That thread (set once it runs).
    loop_thread: std::sync::OnceLock<std::thread::Thread>,
    wakeups: AtomicU64,
    eventfd: OwnedFd,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Interface> {
        // A panic in an app leaves the interface consistent enough to tear down.
        self.net.lock().unwrap_or_else(PoisonError::into_inner)
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
        self.shared.unpark_loop();
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
        self.shared.unpark_loop();
    }

    /// Whether [`Handle::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.shared.stop.load(Ordering::SeqCst)
    }
}

/// The loop: one interface, one channel, one clock.
#[derive(Debug)]
pub struct Runtime<C> {
    /// The channel, the event buffers and the flush debt: the iteration itself.
    driver: Driver<C>,
    shared: Arc<Shared>,
    mode: WaitMode,
    clock: Clock,
    /// How long a sleeping loop keeps polling after it last sent or took data in.
    spin: Duration,
    /// The configured spin (the floor the adaptive spin shrinks back to; zero: none).
    spin_base: Duration,
    /// How long a loop receiving a stream sleeps instead of spinning (zero: never): the
    /// configured time, the floor of the adaptive one.
    coalesce: Duration,
    /// The next coalescing sleep (adapts between `coalesce` and [`MAX_COALESCE`]).
    coalesce_now: Duration,
    /// The last wait was a coalescing sleep: the batch it brought adapts the next one,
    /// counted in `sleep_batch` over the iterations that take it in.
    coalesced: bool,
    /// Frames and bytes the last coalescing sleep brought so far. One iteration takes at
    /// most the driver's batch (64 frames on AF_XDP): judged by its first iteration
    /// alone, no sleep ever brought the `4 * COALESCE_BATCH` frames that shorten the
    /// next, and a stream's sleeps only ever grew.
    sleep_batch: (usize, u64),
    /// The last coalescing sleep brought nothing after a batch that came [`BURST_GAP`] or
    /// more after the one before: the stream is paced and its bursts arrive whole (the
    /// sender wrote each in one go and the kernel put it in the ring before this thread
    /// ran), so a coalescing sleep, or a spin, after a burst only costs the loop a
    /// wake-up more. Cleared by a batch that comes soon after the last (frames trickle
    /// again). Measured (`ulnet bench netchannel-cpu --case recv-4096 --system
    /// ulnet-sleep`, two pairs, SUT core): 0.042-0.053 and 0.040-0.062 cores against
    /// 0.059-0.072 and 0.055-0.058 before, at 4.4-4.8 µs a segment against 6.0-7.9.
    coalesce_idle: bool,
    /// The last frames came [`BURST_GAP`] or more after the ones before: they start a
    /// burst of a paced stream (see `coalesce_idle`), not the next frames of a
    /// continuous one, whose coalescing sleeps may come back empty now and then without
    /// its bursts being whole.
    after_gap: bool,
    /// When the loop last took frames in (every driver turns through `poll_once`, so
    /// this sees a tokio task's turns as well as the loop's and a blocked caller's).
    last_rx: Instant,
    /// The last turn took frames in (the next one continues its batch).
    rx_last_turn: bool,
    /// Frames received since the loop last sent data, delivered a datagram or slept
    /// long on the channel.
    rx_run: usize,
    /// The bytes of those frames (their average against [`COALESCE_FRAME_LIMIT`]).
    rx_run_bytes: u64,
    /// Our TCP bytes acknowledged plus UDP datagrams sent and delivered, at the last
    /// iteration.
    sent_seen: u64,
    /// TCP bytes received in order plus UDP datagrams delivered, at the last iteration.
    data_seen: u64,
    /// The `now` of the last iteration that sent a frame or brought data in (see
    /// `poll_once`: what the spin waits for).
    last_active: Instant,
    /// That iteration sent frames but nothing had arrived: the application's own write
    /// (or a timer) started the send, not an ACK or data (see [`Runtime::spin_alone`]).
    unprompted: bool,
    /// The `now` of the last iteration.
    last_now: Instant,
    /// The wake-up count when the last iteration began (see `Shared::kicks`).
    kicks_seen: u64,
    /// The last iteration moved frames or produced events.
    progressed: bool,
    /// Iterations [`Runtime::quiet`] has let a busy-polling driver skip since the last
    /// one taken.
    skipped: u32,
    /// When to give freed buffer memory back to the system.
    trim: trim::HeapTrim,
    stats: RuntimeStats,
}

impl<C: Channel> Runtime<C> {
    /// A runtime driving `iface` over `channel`, waiting as `mode` says, with time from
    /// `clock`.
    ///
    /// The first runtime of a process also fixes the allocator's trim and mmap thresholds
    /// (`ulnet_channel::sys::heap::bound_retention`), so that the memory it gives back
    /// after a peak leaves the process (docs/memory.md).
    ///
    /// # Errors
    /// Creating the eventfd failed.
    pub fn new(channel: C, iface: Interface, mode: WaitMode, clock: Clock) -> io::Result<Self> {
        static RETENTION: std::sync::Once = std::sync::Once::new();
        RETENTION.call_once(|| {
            let _ = ulnet_channel::sys::heap::bound_retention();
        });
        let now = clock.now();
        // A manual clock does not move while the loop spins: it would never sleep.
        let (spin, coalesce) = match clock {
            Clock::Monotonic(_) => (DEFAULT_SPIN, DEFAULT_COALESCE),
            Clock::Manual(_) => (Duration::ZERO, Duration::ZERO),
        };
        Ok(Runtime {
            driver: Driver::new(channel),
            shared: Arc::new(Shared {
                net: Mutex::new(iface),
                changed: Condvar::new(),
                waiters: AtomicUsize::new(0),
                now: AtomicU64::new(now.total_micros()),
                sleepers: AtomicUsize::new(0),
                signalled: AtomicBool::new(false),
                kicks: AtomicU64::new(0),
                stop: AtomicBool::new(false),
                loop_parked: AtomicBool::new(false),
                output_left: AtomicBool::new(false),
                loop_thread: std::sync::OnceLock::new(),
                wakeups: AtomicU64::new(0),
                eventfd: wait::eventfd()?,
            }),
            mode,
            clock,
            spin,
            spin_base: spin,
            coalesce,
            coalesce_now: coalesce,
            coalesced: false,
            sleep_batch: (0, 0),
            coalesce_idle: false,
            after_gap: false,
            last_rx: now,
            rx_last_turn: false,
            rx_run: 0,
            rx_run_bytes: 0,
            sent_seen: 0,
            data_seen: 0,
            last_active: now,
            unprompted: false,
            last_now: now,
            kicks_seen: 0,
            progressed: false,
            skipped: 0,
            trim: trim::HeapTrim::default(),
            stats: RuntimeStats::default(),
        })
    }

    /// A handle for other threads (and signal handlers).
    pub fn handle(&self) -> Handle {
        Handle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// How long a sleeping loop keeps polling after it last sent a frame or took data in
    /// (TCP bytes in order, a datagram) before it sleeps in `poll(2)` (default
    /// [`DEFAULT_SPIN`] on the monotonic clock, zero on a manual one; zero sleeps at
    /// once). It
    /// trades that much CPU after each burst for not paying a wake-up on every batch
    /// under load; an idle loop still sleeps. Busy-polling loops ignore it.
    ///
    /// The spin adapts between this and [`MAX_SPIN`] (see there); zero stays zero.
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
        self.spin_base = spin;
    }

    /// How long a sleeping loop that is receiving a stream sleeps, where it would
    /// otherwise spin, before it takes what arrived (default [`DEFAULT_COALESCE`] on the
    /// monotonic clock, zero on a manual one; zero: never). A stream is
    /// [`COALESCE_AFTER`] frames received since the loop last sent data or delivered a
    /// datagram (or paused for [`STREAM_GAP`]), so TCP only. The loop coalesces only
    /// within its spin time, so a sparse flow still wakes on each frame, and a call
    /// from another thread (a write, a close) still wakes it at once. The cost is up to this long (plus the kernel's timer
    /// slack) on a stream's frames, which a NIC's interrupt moderation also adds; the
    /// gain, seed 004's small-write receive at a fraction of the CPU. Busy-polling
    /// loops ignore it.
    ///
    /// The sleep adapts between this and [`MAX_COALESCE`] (see there); zero stays zero.
    pub fn set_coalesce(&mut self, coalesce: Duration) {
        self.coalesce = coalesce;
        self.coalesce_now = coalesce;
    }

    /// Adapts the coalescing sleep to the batch (frames, bytes) the last one brought
    /// (see [`MAX_COALESCE`]).
    fn coalesced(&mut self, frames: usize, bytes: u64) {
        self.coalesce_idle = frames == 0 && self.after_gap;
        let max = if bytes < COALESCE_BYTES {
            MAX_COALESCE
        } else {
            MAX_COALESCE / 2
        };
        if frames >= 4 * COALESCE_BATCH {
            self.coalesce_now = (self.coalesce_now / 2).max(self.coalesce);
        } else if frames < COALESCE_BATCH {
            self.coalesce_now = (self.coalesce_now * 2).min(max.max(self.coalesce));
        }
    }

    /// Whether the next spin is replaced by a coalescing sleep: the loop is receiving a
    /// stream.
    fn coalescing(&self) -> bool {
        // (Not while a paced stream's bursts arrive whole: `spinning` says no then.)
        !self.coalesce.is_zero()
            && self.rx_run >= COALESCE_AFTER
            && self.rx_run_bytes < COALESCE_FRAME_LIMIT * self.rx_run as u64
            && self.spinning()
    }

    /// A batch of frames began at `now` (the turn before took none in): after a gap it
    /// starts a burst; soon after the last batch the frames trickle, and a loop that
    /// stopped coalescing for whole bursts coalesces again.
    fn frames_at(&mut self, now: Instant) {
        self.after_gap = now - self.last_rx >= BURST_GAP;
        if !self.after_gap {
            self.coalesce_idle = false;
        }
        self.last_rx = now;
    }

    /// A coalescing sleep, counted: how long, and the wake-up count it must see
    /// unchanged (see `Shared::sleep`). The eventfd still ends it; the channel does not.
    fn coalesce_plan(&mut self) -> (Duration, u64) {
        self.stats.coalesced_sleeps += 1;
        self.coalesced = true;
        self.sleep_batch = (0, 0);
        (self.coalesce_now, self.kicks_seen)
    }

    /// After a sleep on the channel: a long one ends a stream (see [`STREAM_GAP`]). Adapts
    /// the spin to how long the sleep lasted (see [`MAX_SPIN`]).
    fn slept(&mut self, d: Duration) {
        if d >= STREAM_GAP {
            self.rx_run = 0;
            self.rx_run_bytes = 0;
            self.coalesce_now = self.coalesce;
        }
        if self.spin_base.is_zero() {
            return;
        }
        let max = MAX_SPIN.max(self.spin_base);
        self.spin = if d < max {
            (self.spin * 2).min(max)
        } else {
            (self.spin / 2).max(self.spin_base)
        };
    }

    /// The channel.
    pub fn channel(&self) -> &C {
        self.driver.channel()
    }

    /// The channel, mutably.
    pub fn channel_mut(&mut self) -> &mut C {
        self.driver.channel_mut()
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
        self.skipped = 0;
        self.shared.now.store(now.total_micros(), Ordering::Relaxed);
        self.kicks_seen = self.shared.kicks();
        let received;
        let received_bytes;
        let data_in;
        let mut progressed;
        let mut trim_heap = false;
        {
            let mut guard = self.shared.lock();
            let iface = &mut *guard;
            let rx_bytes = iface.stats().rx_bytes;
            received = self.driver.receive(now, iface)?;
            received_bytes = iface.stats().rx_bytes - rx_bytes;
            progressed = received > 0;
            progressed |= self.driver.serve(now, iface, app);
            // Only waiters care, and walking the timers on every spin of an idle loop
            // is not free.
            if !progressed && self.shared.waiters.load(Ordering::Relaxed) > 0 {
                progressed = iface.poll_at().is_some_and(|t| t <= now);
            }
            self.driver.transmit(now, iface);
            self.shared.output_left.store(
                iface
                    .tcp()
                    .is_some_and(ulnet_stack::tcp::Tcp::output_pending),
                Ordering::Relaxed,
            );
            let st = iface.stats();
            let sent = st.udp_sent + st.udp_delivered + iface.tcp().map_or(0, |t| t.bytes_acked());
            let data = st.udp_delivered + iface.tcp().map_or(0, |t| t.bytes_received());
            data_in = data != self.data_seen;
            self.data_seen = data;
            if sent == self.sent_seen {
                self.rx_run = self.rx_run.saturating_add(received);
                self.rx_run_bytes = self.rx_run_bytes.saturating_add(received_bytes);
            } else {
                self.sent_seen = sent;
                self.rx_run = 0;
                self.rx_run_bytes = 0;
                self.coalesce_now = self.coalesce;
            }
            // Timers may have changed sockets: the app hears it next iteration, and
            // the loop does not sleep before that (`sleep` checks).
            self.driver.drain_events(iface);
            if self.trim.due(now) {
                trim_heap = self.trim.look(now, trim::engine_mem(iface));
                if trim_heap {
                    // First let the engine give back what a peak of connections left
                    // (its slab and tables), so the trim can return those pages too.
                    if let Some(t) = iface.tcp_mut() {
                        t.shrink();
                    }
                }
            }
        }
        // The first turn of a batch (the one before took nothing in) says how long
        // after the last batch it came.
        if received > 0 && !self.rx_last_turn {
            self.frames_at(now);
        }
        self.rx_last_turn = received > 0;
        if self.coalesced {
            self.sleep_batch.0 += received;
            self.sleep_batch.1 += received_bytes;
            // The batch ends with the first iteration the channel did not fill.
            if received < self.driver.batch_count() {
                self.coalesced = false;
                let (frames, bytes) = std::mem::take(&mut self.sleep_batch);
                self.coalesced(frames, bytes);
            }
        }
        if trim_heap {
            // Outside the lock: trimming a large heap takes a while.
            let _ = ulnet_channel::sys::heap::trim();
            self.stats.heap_trims += 1;
        }
        // Outside the lock: the doorbell may be a system call.
        let Flushed { sent, flushed } = self.driver.flush()?;
        self.stats.flushes += u64::from(flushed);
        // The spin after activity waits for what that activity makes likely soon: after
        // a send, its ACK or answer; after data or a datagram came in, more of it, or the
        // application's reply. Frames that brought neither and made us send nothing (an
        // ACK for everything we had sent, with nothing more to send) leave nothing to
        // wait for but the application, which wakes the loop when it writes: spinning
        // after them was a pure cost (an application writing small messages every
        // millisecond paid a 50 µs spin after each ACK, a quarter of its CPU;
        // docs/performance-log.md, "Session 12").
        if sent > 0 || data_in {
            self.last_active = now;
            self.unprompted = received == 0 && !data_in;
        }
        self.stats.iterations += 1;
        self.stats.rx_frames += received as u64;
        self.stats.tx_frames += sent;
        self.progressed = progressed || sent > 0 || self.driver.has_events();
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
                WaitMode::Sleep if self.coalescing() => {
                    let (d, kicks) = self.coalesce_plan();
                    self.shared.sleep(None, Some(d), kicks)?;
                }
                // Yield rather than spin: the kernel work our transmissions cause may
                // have been deferred to ksoftirqd on this CPU, and spinning past it
                // would starve the very work we are waiting for.
                WaitMode::Sleep if self.spinning() => {
                    std::thread::yield_now();
                }
                WaitMode::Sleep => {
                    if let Some(timeout) = self.sleep_plan(app)? {
                        let fd = self.driver.channel().wait_fd();
                        let t0 = std::time::Instant::now();
                        self.shared.sleep(fd, timeout, self.kicks_seen)?;
                        self.slept(t0.elapsed());
                    }
                }
            }
        }
        self.flush_all()
    }

    /// Whatever the last iteration queued (a FIN, an RST) still goes out.
    fn flush_all(&mut self) -> io::Result<()> {
        self.driver.channel_mut().tx().flush()?;
        Ok(())
    }

    /// Whether a busy-polling loop may skip its next iteration, from a look that takes no
    /// lock and no clock: the last iteration moved nothing, left nothing to flush and no
    /// event to show, no [`Handle`] has woken the loop since it began (every socket call
    /// that queues something does), and the channel has no frame waiting
    /// ([`Channel::rx_ready`]). At most [`QUIET_SKIPS`] in a row.
    ///
    /// Why: a full iteration of an idle loop costs 57 ns with a TCP connection open
    /// (`cargo bench -p ulnet --bench idle_turn`; the clock is 24 of them) and more with
    /// the socket API's reactor, and a frame that lands during one waits for the rest
    /// of it.
    pub(crate) fn quiet(&mut self) -> bool {
        if self.mode != WaitMode::BusyPoll
            || self.progressed
            || !self.driver.settled()
            || self.skipped >= QUIET_SKIPS
            || self.shared.kicks() != self.kicks_seen
            || self.driver.channel_mut().rx_ready()
        {
            return false;
        }
        self.skipped += 1;
        true
    }

    /// Whether a sleeping loop is still within its spin time after it last sent a frame
    /// or took data in. Not while receiving a stream whose bursts arrive whole (see
    /// `coalesce_idle`): nothing follows a burst soon, and the loop sleeps on the channel
    /// at once.
    fn spinning(&self) -> bool {
        self.mode == WaitMode::Sleep
            && self.last_now - self.last_active < self.spin
            && !(self.coalesce_idle && self.rx_run >= COALESCE_AFTER)
    }

    /// Whether the loop's own thread, with no application thread driving, spins: as
    /// [`spinning`](Self::spinning), but not after a send that nothing arriving
    /// prompted. Such a send came from an application write (or a timer); what it makes
    /// likely next is its ACK, which only frees buffer space, or an answer. A thread
    /// that waits for either (a writer on a full buffer, a reader) drives the loop
    /// itself and spins there; no one else needs it caught early, unless the app says
    /// something waits outside socket calls ([`App::waits_outside_calls`], checked by
    /// the engine). Spinning for it cost more than the wake-up it saved: an application
    /// writing 128 bytes 98 times a millisecond (seed 004) had the loop spin after each
    /// burst and then sleep anyway, its ACK coming 50-100 µs later, a fifth of the
    /// loop's CPU (docs/performance-log.md, "Session 14"). Sends the peer's frames clock
    /// (ACKs opening the window, data answered) keep the spin.
    fn spin_alone(&self) -> bool {
        self.spinning() && !self.unprompted
    }

    /// Readies the channel for a sleep until a frame arrives, the next deadline
    /// (interface or app) or a wake-up: `None` when the loop must not sleep now,
    /// else the timeout (`None`: none).
    fn sleep_plan(&mut self, app: &dyn App) -> io::Result<Option<Option<Duration>>> {
        let deadline = {
            let iface = self.shared.lock();
            // The heap trim's next look, while one may come due (the tail of a mass
            // close leaves no other reason to wake).
            let look = self.trim.wake_at(trim::engine_mem(&iface));
            [iface.poll_at(), app.poll_at(), look]
                .into_iter()
                .flatten()
                .min()
        };
        if self.driver.has_events() {
            return Ok(None);
        }
        let now = self.clock.now();
        let timeout = match deadline {
            Some(t) if t <= now => return Ok(None),
            Some(t) => Some(t - now),
            None => None,
        };
        self.driver.channel_mut().prepare_wait()?;
        self.driver.forgive_flush_debt();
        self.stats.sleeps += 1;
        Ok(Some(timeout))
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

#[cfg(test)]
mod tests {
    use super::*;
    use ulnet_stack::iface::{InterfaceConfig, IpCidr};
    use ulnet_wire::EthernetAddress;

    fn runtime() -> Runtime<ulnet_channel::pipe::PipeChannel> {
        let (a, _b) = ulnet_channel::pipe::pair().unwrap();
        let cfg = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]))
            .address(IpCidr::new([198, 18, 0, 1].into(), 24).unwrap());
        let iface = Interface::new(cfg).unwrap();
        Runtime::new(a, iface, WaitMode::Sleep, Clock::monotonic()).unwrap()
    }

    #[test]
    fn a_sleep_batch_is_counted_over_every_iteration_that_takes_it_in() {
        let (a, mut b) = ulnet_channel::pipe::pair().unwrap();
        let cfg = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]))
            .address(IpCidr::new([198, 18, 0, 1].into(), 24).unwrap());
        let iface = Interface::new(cfg).unwrap();
        let mut rt = Runtime::new(a, iface, WaitMode::Sleep, Clock::monotonic()).unwrap();
        rt.coalesce_now = MAX_COALESCE;
        let _ = rt.coalesce_plan();
        // More frames than one iteration takes (64 on the pipe): 64 + 64 + 10.
        for _ in 0..4 * COALESCE_BATCH + 10 {
            b.tx().send(60, &mut |f| f.fill(0)).unwrap();
        }
        b.tx().flush().unwrap();
        for _ in 0..3 {
            rt.poll_once(&mut ()).unwrap();
        }
        assert_eq!(rt.stats().rx_frames, 4 * COALESCE_BATCH as u64 + 10);
        assert_eq!(rt.coalesce_now, MAX_COALESCE / 2, "a batch of 138 frames");
    }

    #[test]
    fn the_coalescing_sleep_grows_on_small_batches_and_shrinks_on_large_ones() {
        let mut rt = runtime();
        assert_eq!(rt.coalesce_now, DEFAULT_COALESCE);
        // Few frames of few bytes (a slow stream of small segments): up to the longest.
        rt.coalesced(COALESCE_BATCH - 1, 128 * (COALESCE_BATCH as u64 - 1));
        assert_eq!(rt.coalesce_now, DEFAULT_COALESCE * 2);
        for _ in 0..20 {
            rt.coalesced(1, 100);
        }
        assert_eq!(rt.coalesce_now, MAX_COALESCE);
        // In the aimed-for range it stays.
        rt.coalesced(2 * COALESCE_BATCH, 2 * COALESCE_BATCH as u64 * 128);
        assert_eq!(rt.coalesce_now, MAX_COALESCE);
        // Many frames halve it, down to the configured time.
        for _ in 0..20 {
            rt.coalesced(4 * COALESCE_BATCH, 0);
        }
        assert_eq!(rt.coalesce_now, DEFAULT_COALESCE);
        // Few frames of many bytes (jumbo frames in bulk): up to half the longest only.
        for _ in 0..20 {
            rt.coalesced(8, 8 * 9000);
        }
        assert_eq!(rt.coalesce_now, MAX_COALESCE / 2);
        rt.coalesce_now = DEFAULT_COALESCE;
        // A long pause ends the stream: the count and the sleep start again.
        rt.rx_run = COALESCE_AFTER;
        rt.coalesced(1, 0);
        rt.slept(STREAM_GAP);
        assert_eq!((rt.rx_run, rt.coalesce_now), (0, DEFAULT_COALESCE));
        // A short one does not.
        rt.rx_run = COALESCE_AFTER;
        rt.slept(STREAM_GAP / 2);
        assert_eq!(rt.rx_run, COALESCE_AFTER);
    }

    /// A paced stream whose bursts arrive whole (seed 004's 4 KiB writes: nine segments a
    /// millisecond, all in the ring when the loop wakes): once a coalescing sleep after
    /// such a burst came back empty, the loop neither coalesces nor spins after the next
    /// bursts, and sleeps on the channel at once (one wake-up a burst, not two). An empty
    /// coalescing sleep in a continuous stream (no long sleep before it) changes nothing,
    /// and frames that end a channel sleep soon bring the coalescing back.
    #[test]
    fn a_paced_stream_of_whole_bursts_sleeps_once_a_burst() {
        let mut rt = runtime();
        rt.rx_run = COALESCE_AFTER;
        let t0 = rt.last_now;
        let at = |rt: &mut Runtime<_>, us: u64| {
            let now = t0 + Duration::from_micros(us);
            rt.last_now = now;
            rt.last_active = now;
            rt.frames_at(now);
        };
        at(&mut rt, 0);
        assert!(rt.coalescing() && rt.spinning());
        // A continuous stream's empty sleep (frames 300 µs apart).
        at(&mut rt, 300);
        rt.coalesced(0, 0);
        assert!(rt.coalescing() && rt.spinning());
        // A burst after a gap, then an empty coalescing sleep.
        at(&mut rt, 1_300);
        rt.coalesced(0, 0);
        assert!(!rt.coalescing() && !rt.spinning());
        // Bursts keep coming after gaps: it stays so.
        at(&mut rt, 2_300);
        assert!(!rt.coalescing() && !rt.spinning());
        // Frames 10 µs after a batch (a sleep between them): they trickle, coalescing
        // again.
        at(&mut rt, 2_310);
        assert!(rt.coalescing() && rt.spinning());
    }

    /// A frame from the peer at `b`: Ethernet to `dst`, IPv4/UDP from 198.18.0.2:5000 to
    /// 198.18.0.1:7 carrying "hi".
    fn udp_frame(dst: EthernetAddress) -> Vec<u8> {
        use ulnet_wire::{
            ChecksumMode, EtherType, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet, Ipv4Repr,
            UdpPacket, UdpRepr,
        };
        let (src_ip, dst_ip) = ([198, 18, 0, 2].into(), [198, 18, 0, 1].into());
        let mut f = vec![0u8; 14 + 20 + 8 + 2];
        EthernetRepr {
            src_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            dst_addr: dst,
            ethertype: EtherType::Ipv4,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..14]));
        Ipv4Repr::new(src_ip, dst_ip, IpProtocol::Udp, 10, 64).emit(
            &mut Ipv4Packet::new_unchecked(&mut f[14..34]),
            ChecksumMode::Full,
        );
        UdpRepr {
            src_port: 5000,
            dst_port: 7,
        }
        .emit(
            &mut UdpPacket::new_unchecked(&mut f[34..]),
            &core::net::IpAddr::V4(src_ip),
            &core::net::IpAddr::V4(dst_ip),
            2,
            |p| p.copy_from_slice(b"hi"),
            ChecksumMode::Full,
        );
        f
    }

    #[test]
    fn the_spin_follows_data_in_or_a_send_not_any_frame() {
        use ulnet_channel::Channel as _;
        use ulnet_stack::socket::{UdpConfig, UdpSocket};
        let us = EthernetAddress([2, 0, 0, 0, 0, 1]);
        let (a, mut b) = ulnet_channel::pipe::pair().unwrap();
        let cfg =
            InterfaceConfig::new(us).address(IpCidr::new([198, 18, 0, 1].into(), 24).unwrap());
        let mut iface = Interface::new(cfg).unwrap();
        let mut udp = UdpSocket::new(UdpConfig::default());
        udp.bind("0.0.0.0:7".parse().unwrap()).unwrap();
        let h = iface.sockets_mut().add_udp(udp).unwrap();
        let (clock, time) = Clock::manual();
        let mut rt = Runtime::new(a, iface, WaitMode::Sleep, clock).unwrap();
        rt.set_spin(Duration::from_micros(50));
        let mut inject = |frame: Vec<u8>| {
            b.tx()
                .send(frame.len(), &mut |buf| buf.copy_from_slice(&frame))
                .unwrap();
            b.tx().flush().unwrap();
        };
        // Whatever the interface sends when it starts (an announcement) goes first.
        time.store(500, Ordering::Relaxed);
        rt.poll_once(&mut ()).unwrap();
        let start = rt.last_active;
        // A frame that brings no data and makes the loop send nothing (here: one for
        // another host) is not a reason to keep polling.
        time.store(1_000, Ordering::Relaxed);
        inject(udp_frame(EthernetAddress([2, 0, 0, 0, 0, 9])));
        assert_eq!(rt.poll_once(&mut ()).unwrap(), 1);
        assert_eq!(rt.last_active, start);
        // A datagram delivered is.
        time.store(2_000, Ordering::Relaxed);
        inject(udp_frame(us));
        assert_eq!(rt.poll_once(&mut ()).unwrap(), 1);
        assert_eq!(rt.last_active, Instant::from_micros(2_000));
        assert!(rt.spinning() && rt.spin_alone());
        // A send the application started, nothing arriving: an application thread
        // waiting for its answer would spin; the loop's own thread alone does not.
        time.store(3_000, Ordering::Relaxed);
        rt.iface()
            .sockets_mut()
            .udp_mut(h)
            .unwrap()
            .send_to(b"ho", "198.18.0.2:5000".parse().unwrap())
            .unwrap();
        assert_eq!(rt.poll_once(&mut ()).unwrap(), 0);
        assert_eq!(rt.last_active, Instant::from_micros(3_000));
        assert!(rt.spinning() && !rt.spin_alone());
        // Data arriving is worth the spin again.
        time.store(3_010, Ordering::Relaxed);
        inject(udp_frame(us));
        assert_eq!(rt.poll_once(&mut ()).unwrap(), 1);
        assert!(rt.spinning() && rt.spin_alone());
    }

    #[test]
    fn only_a_spinning_loop_with_a_stream_behind_it_coalesces_and_zero_turns_it_off() {
        let mut rt = runtime();
        rt.last_active = rt.last_now;
        rt.rx_run = COALESCE_AFTER - 1;
        assert!(!rt.coalescing(), "too few frames for a stream");
        rt.rx_run = COALESCE_AFTER;
        assert!(rt.coalescing());
        // A stream of jumbo frames spins instead.
        rt.rx_run_bytes = COALESCE_AFTER as u64 * 9014;
        assert!(!rt.coalescing(), "frames of 9014 bytes");
        rt.rx_run_bytes = COALESCE_AFTER as u64 * 1514;
        assert!(rt.coalescing());
        // Past the spin time the loop sleeps on the channel instead.
        rt.last_now = rt.last_active + rt.spin;
        assert!(!rt.coalescing());
        rt.last_now = rt.last_active;
        rt.set_coalesce(Duration::ZERO);
        assert!(!rt.coalescing());
        rt.set_coalesce(MAX_COALESCE * 2);
        rt.coalesced(1, 0);
        assert_eq!(
            rt.coalesce_now,
            MAX_COALESCE * 2,
            "the configured time is the floor"
        );
        // A manual clock neither spins nor coalesces.
        let (a, _b) = ulnet_channel::pipe::pair().unwrap();
        let iface =
            Interface::new(InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]))).unwrap();
        let manual = Runtime::new(a, iface, WaitMode::Sleep, Clock::manual().0).unwrap();
        assert!(manual.coalesce.is_zero() && manual.spin.is_zero());
    }
}
