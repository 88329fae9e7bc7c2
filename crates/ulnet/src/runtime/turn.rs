//! A loop any thread may turn: the application's own thread drives the stack while it
//! waits, instead of handing every wake-up to the loop's thread (issue 11, seed 000's
//! "run to completion" carried up to the socket API).
//!
//! A [`Runtime`] with its app (for the socket API, the reactor) lives behind a mutex in an
//! [`Engine`]. One iteration of it is a *turn*; whoever holds the mutex may take one:
//!
//! - a thread blocked in a socket call turns the loop itself until its socket is ready
//!   ([`Engine::drive_until`]), spinning for the runtime's spin time and then sleeping in
//!   `poll(2)` on the channel and the eventfd, exactly as the loop's thread would;
//! - a call that queued something (a write, a send) while application threads drive
//!   takes one turn if nobody else is turning ([`Engine::after_call`]), so the data
//!   leaves from the caller's thread with no wake-up of another thread; while the loop's
//!   thread drives, it only wakes it, and the loop batches many calls per doorbell;
//! - an async write (tokio) that finds the send buffer full takes one turn if nobody
//!   else is turning ([`Engine::turn_or_wake`]) before it leaves its waker: the ACKs
//!   that free the buffer may already wait on the ring;
//! - a tokio task whose operation is pending turns the loop when its runtime's reactor
//!   saw the channel readable ([`Engine::async_turn`], `net/tokio_io.rs`): the task's
//!   thread sleeps in the reactor's `epoll_wait` on the channel, as a blocked reader
//!   sleeps in `poll(2)` on it, and takes its frames in itself;
//! - the loop's own thread ([`Engine::run`]) turns whenever no application thread is
//!   driving, and otherwise parks: 20 ms at a time while the drivers are busy (1 ms
//!   while a caller's data waits on the windows or the channel, [`PARK_HELD`]), longer
//!   while they sleep; a leaving driver unparks it after a long park, and so does any
//!   [`Handle::wake`](super::Handle::wake) (a close, a connect). While tasks turn it
//!   parks [`PARK_ASYNC`] at a time, waking for the deadlines their idle turns saw.
//!
//! On two cores with the application and the loop on one (the bench's layout, and what a
//! pinned latency-sensitive service does), the hand-off cost two context switches and a
//! futex wake per batch; now a blocked reader receives its data on its own thread.
//!
//! Invariants: at most one turn at a time (the mutex); the iface mutex is taken inside a
//! turn, never held while waiting for the turn (lock order: turn, then interface); every
//! turn that made progress wakes the threads sleeping in `poll(2)`, so a driver asleep is
//! never left waiting on an event another thread's turn produced.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ulnet_channel::Channel;

use super::{wait, App, Runtime, Shared, WaitMode};

/// How long the loop's thread parks while an application thread is turning the loop. A
/// wake-up from outside a turn ([`Handle::wake`](super::Handle::wake): a close, a
/// connect) unparks it; otherwise this bounds how long frames wait after the last
/// driver leaves without coming back. Each unpark preempts the driver on its core: at
/// 1 ms they made the both-ends-ulnet busy-poll ping-pong's p99 30 µs instead of 8.
const PARK_BUSY: Duration = Duration::from_millis(20);
/// The longest park while the drivers sleep; past [`PARK_BUSY`] a leaving driver unparks
/// the loop's thread, so this bounds nothing but the idle wake-up rate.
const PARK_IDLE_MAX: Duration = Duration::from_millis(200);

/// How long the loop's thread parks while application threads drive and a writer's
/// data waits on the windows or the channel ([`Engine::note_held`]): such data leaves
/// only as ACKs come in, which only a turn takes in. A caller that leaves for work of
/// its own is seen after a park in which it did not turn, and with [`PARK_BUSY`] that
/// was 20-40 ms: a busy-polling writer's 64 MB with nothing called after it arrived 27-34 ms
/// after its last write returned in 3 of 11 runs, against under 1.1 ms otherwise
/// (docs/performance-log.md, "Session 31"). Each park costs the driver's core one
/// wake-up of this thread, a thousand a second at most while the flag holds. In the
/// sleeping mode it also lets this thread take the loop between a blocking writer's
/// writes and send what several queued in one turn: 7,900 flushes per GB of `ulnet
/// bench hurd-tcp`'s tx-1500 instead of 12,900, at 5-7% less of the writer's core.
const PARK_HELD: Duration = Duration::from_millis(1);

/// Parks in a row without a driver's turn after which a `held` flag is taken for stale:
/// about [`PARK_BUSY`]'s 20 ms at [`PARK_HELD`].
const HELD_STALE: u32 = 20;

/// How long the loop's thread parks while tokio tasks turn the loop. A task cannot
/// say it stopped waiting (its future may be dropped while pending), so after a park
/// in which no task turned, the loop's thread takes the channel back: this bounds how
/// long frames wait for a task that is gone. Each park costs one wake-up of this
/// thread, 500 a second at most.
const PARK_ASYNC: Duration = Duration::from_millis(2);

/// No deadline ([`Engine::async_deadline`]).
const NO_DEADLINE: u64 = u64::MAX;

/// What a tokio task's turn did ([`Engine::async_turn`]).
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AsyncTurn {
    /// The loop stopped (or a turn failed and stops it): its last act wakes every
    /// socket's waker.
    Stopped,
    /// Another thread holds the turn (it wakes the task's socket if it has news).
    Busy,
    /// Frames moved or events came: look at the socket and turn again.
    Progress,
    /// Nothing came, but the loop is within its spin time (data or a send a moment
    /// ago): the task should yield and turn again rather than sleep, as a blocked
    /// reader spins (a sleeping vCPU takes tens of µs to wake).
    Spin,
    /// Nothing came; the channel is readied for a sleep: the task may wait for its
    /// reactor to see the channel readable.
    Idle,
}

/// What one turn did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Turned {
    /// Frames received.
    pub received: usize,
    /// Frames moved or events produced: the caller should turn again before waiting.
    pub progressed: bool,
}

/// One runtime with its app, as the engine turns it.
pub(crate) trait Turn: Send {
    /// One iteration of the loop.
    fn turn(&mut self) -> io::Result<Turned>;
    /// Whether a busy-polling driver may skip the next turn (`Runtime::quiet`).
    fn quiet(&mut self) -> bool;
    /// Whether the loop is within its spin time after it last sent or took data in.
    fn spinning(&self) -> bool;
    /// The same for the loop's own thread turning alone: not after a send nothing
    /// arriving prompted (`Runtime::spin_alone`), unless something waits for events
    /// without driving the loop (`App::waits_outside_calls`: a tokio task, a program in
    /// the kernel's `poll(2)` through the C library), which the spin then serves.
    fn spin_alone(&self) -> bool;
    /// Instead of the next spin, a coalescing sleep (how long, and the wake-up count it
    /// must see unchanged), when the loop is receiving a stream.
    fn coalescing(&mut self) -> Option<(Duration, u64)>;
    /// How the loop waits.
    fn mode(&self) -> WaitMode;
    /// Readies a sleep: `None` when the loop must not sleep now (a deadline passed,
    /// events are pending), else the timeout (`None`: no deadline).
    fn sleep_plan(&mut self) -> io::Result<Option<Option<Duration>>>;
    /// The last flush before the loop ends.
    fn finish(&mut self) -> io::Result<()>;
    /// The loop's counters.
    fn stats(&self) -> super::RuntimeStats;
    /// How long the last sleep lasted (the spin adapts to it).
    fn slept(&mut self, d: Duration);
}

impl<C: Channel + Send, A: App + Send> Turn for (Runtime<C>, A) {
    fn turn(&mut self) -> io::Result<Turned> {
        let (rt, app) = self;
        let received = rt.poll_once(app)?;
        Ok(Turned {
            received,
            progressed: rt.progressed,
        })
    }
    fn quiet(&mut self) -> bool {
        self.0.quiet()
    }
    fn spinning(&self) -> bool {
        self.0.spinning()
    }
    fn spin_alone(&self) -> bool {
        if self.1.waits_outside_calls() {
            self.0.spinning()
        } else {
            self.0.spin_alone()
        }
    }
    fn coalescing(&mut self) -> Option<(Duration, u64)> {
        self.0.coalescing().then(|| self.0.coalesce_plan())
    }
    fn mode(&self) -> WaitMode {
        self.0.mode
    }
    fn sleep_plan(&mut self) -> io::Result<Option<Option<Duration>>> {
        let (rt, app) = self;
        rt.sleep_plan(&*app)
    }
    fn finish(&mut self) -> io::Result<()> {
        self.0.flush_all()
    }
    fn stats(&self) -> super::RuntimeStats {
        self.0.stats()
    }
    fn slept(&mut self, d: Duration) {
        self.0.slept(d);
    }
}

/// A runtime shared by the loop's thread and the application's threads.
pub(crate) struct Engine {
    turn: Mutex<Box<dyn Turn>>,
    shared: Arc<Shared>,
    /// A duplicate of the channel's wait descriptor, so a thread can sleep on it
    /// without holding the turn.
    wait_fd: Option<OwnedFd>,
    /// Application threads inside [`drive_until`](Self::drive_until).
    drivers: AtomicUsize,
    /// Turns taken by application threads (the loop's thread reads it to tell busy
    /// drivers from sleeping ones).
    app_turns: AtomicU64,
    /// Turns taken by a call that queued something, on its own thread
    /// ([`turn_or_wake`](Self::turn_or_wake)); counted apart from `app_turns`, which
    /// the loop's thread reads as "drivers are busy".
    call_turns: AtomicU64,
    /// The loop's thread is in a long park: a leaving driver must unpark it.
    deep_parked: AtomicBool,
    /// Data a caller left waits for later turns ([`note_held`](Self::note_held)): the
    /// loop's thread parks [`PARK_HELD`] at a time.
    held: AtomicBool,
    /// The last TCP write's data waits on the windows ([`note_write`](Self::note_write)).
    write_held: AtomicBool,
    /// Times the loop's thread went from parking (application threads driving) to
    /// turning the loop itself ([`loop_thread_takeovers`](Self::loop_thread_takeovers)).
    takeovers: AtomicU64,
    /// Parks of the loop's thread while application threads drive
    /// ([`loop_thread_parks`](Self::loop_thread_parks)).
    parks: AtomicU64,
    /// A turn failed on an application thread (a channel system call): the loop ends
    /// with this error.
    failed: Mutex<Option<io::Error>>,
    /// How the loop waits (tasks drive it only when it sleeps; the loop's thread leaves
    /// busy-polling callers their gaps between calls).
    mode: WaitMode,
    /// Turns taken by tokio tasks ([`async_turn`](Self::async_turn)): while they
    /// move, and a task watches the channel, the loop's thread parks.
    async_turns: AtomicU64,
    /// Calls by tokio tasks that queued something ([`after_task_call`](Self::after_task_call)):
    /// task activity as much as their turns are.
    task_calls: AtomicU64,
    /// A lone waiting task watches the channel through its reactor
    /// ([`watch_from_task`](Self::watch_from_task)).
    task_watch: AtomicBool,
    /// The next deadline a task's idle turn found, in nanoseconds since `epoch`
    /// ([`NO_DEADLINE`]: none); the parked loop's thread wakes for it.
    async_deadline: AtomicU64,
    /// When the loop's thread parked for tasks is due back, in nanoseconds since
    /// `epoch`: a task that finds an earlier deadline unparks it.
    park_until: AtomicU64,
    epoch: std::time::Instant,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("drivers", &self.drivers.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

fn relock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Engine {
    /// Shares `rt` with `app` inside it.
    ///
    /// # Errors
    /// The channel's wait descriptor could not be duplicated.
    pub(crate) fn new<C, A>(rt: Runtime<C>, app: A) -> io::Result<Engine>
    where
        C: Channel + Send + 'static,
        A: App + Send + 'static,
    {
        let shared = Arc::clone(&rt.shared);
        let mode = rt.mode;
        let wait_fd = rt
            .channel()
            .wait_fd()
            .map(|fd| fd.try_clone_to_owned())
            .transpose()?;
        Ok(Engine {
            turn: Mutex::new(Box::new((rt, app))),
            shared,
            wait_fd,
            drivers: AtomicUsize::new(0),
            app_turns: AtomicU64::new(0),
            call_turns: AtomicU64::new(0),
            deep_parked: AtomicBool::new(false),
            held: AtomicBool::new(false),
            write_held: AtomicBool::new(false),
            takeovers: AtomicU64::new(0),
            parks: AtomicU64::new(0),
            failed: Mutex::new(None),
            mode,
            async_turns: AtomicU64::new(0),
            task_calls: AtomicU64::new(0),
            task_watch: AtomicBool::new(false),
            async_deadline: AtomicU64::new(NO_DEADLINE),
            park_until: AtomicU64::new(NO_DEADLINE),
            epoch: std::time::Instant::now(),
        })
    }

    /// The loop's counters, every thread's turns together (waits for a turn in
    /// progress).
    pub(crate) fn stats(&self) -> super::RuntimeStats {
        relock(&self.turn).stats()
    }

    /// Turns the loop's own thread has taken so far. Read with the turn held: every
    /// thread counts its turn before it lets the turn go, so the loop's iterations and
    /// the application threads' counts agree.
    pub(crate) fn loop_thread_turns(&self) -> u64 {
        let t = relock(&self.turn);
        let (blocked, tasks, calls) = self.turn_counts();
        // Saturating: a failed turn (which stops the loop) may count a call's turn
        // without an iteration.
        t.stats().iterations.saturating_sub(blocked + tasks + calls)
    }

    /// Times the loop's own thread took the loop over from application threads that
    /// had been driving it (after a park in which none turned, or when the last one
    /// left): each is a hand-off, however many turns it lasted.
    pub(crate) fn loop_thread_takeovers(&self) -> u64 {
        self.takeovers.load(Ordering::Relaxed)
    }

    /// Times the loop's own thread parked while application threads drove the loop:
    /// each is one wake-up of that thread on their cores.
    pub(crate) fn loop_thread_parks(&self) -> u64 {
        self.parks.load(Ordering::Relaxed)
    }

    /// Turns taken so far by application threads inside blocked calls, by tokio
    /// tasks, and by calls that queued something.
    pub(crate) fn turn_counts(&self) -> (u64, u64, u64) {
        (
            self.app_turns.load(Ordering::Relaxed),
            self.async_turns.load(Ordering::Relaxed),
            self.call_turns.load(Ordering::Relaxed),
        )
    }

    /// The descriptor a tokio task's reactor may watch for the loop's frames: the
    /// channel's wait descriptor when the loop sleeps (a busy-polled loop's thread
    /// spins for them, and a channel without one, the simulator's, has nothing to
    /// watch).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn async_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        match self.mode {
            WaitMode::Sleep => self.wait_fd.as_ref().map(AsFd::as_fd),
            WaitMode::BusyPoll => None,
        }
    }

    /// One turn on a tokio task's thread, after its reactor saw the channel readable
    /// (or before its first wait): the task's own thread takes the frames in, as a
    /// blocked reader's does ([`drive_until`](Self::drive_until)), instead of the loop's
    /// thread taking them and waking the task (two context switches per batch on a
    /// shared core). An idle turn readies the channel for a sleep and records the
    /// loop's next deadline for the parked loop's thread.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn async_turn(&self) -> AsyncTurn {
        if self.stopped() {
            return AsyncTurn::Stopped;
        }
        let Ok(mut t) = self.turn.try_lock() else {
            return AsyncTurn::Busy;
        };
        let Some(turned) = self.turn_locked(&mut **t) else {
            return AsyncTurn::Stopped;
        };
        self.async_turns.fetch_add(1, Ordering::Relaxed);
        if turned.progressed || turned.received > 0 {
            return AsyncTurn::Progress;
        }
        if t.spinning() {
            // During a stream, the coalescing sleep a blocked reader takes (at most
            // `MAX_COALESCE`), here on the task's thread: its runtime runs nothing else
            // meanwhile, as it would not while that thread waited for a batch anyway.
            if let Some((d, kicks)) = t.coalescing() {
                drop(t);
                if let Err(e) = self.shared.sleep(None, Some(d), kicks) {
                    self.fail(e);
                }
            }
            return AsyncTurn::Spin;
        }
        match t.sleep_plan() {
            Ok(Some(timeout)) => {
                drop(t);
                let at = timeout.map_or(NO_DEADLINE, |d| self.nanos(self.epoch.elapsed() + d));
                self.async_deadline.store(at, Ordering::SeqCst);
                if at < self.park_until.load(Ordering::SeqCst) {
                    self.shared.unpark_loop();
                }
                AsyncTurn::Idle
            }
            Ok(None) => AsyncTurn::Progress,
            Err(e) => {
                drop(t);
                self.fail(e);
                AsyncTurn::Stopped
            }
        }
    }

    /// A turn or a wait failed on some thread: the loop stops with `e` (the first such
    /// error), and every thread that waits for it is woken.
    fn fail(&self, e: io::Error) {
        relock(&self.failed).get_or_insert(e);
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.wake();
        if let Some(t) = self.shared.loop_thread.get() {
            t.unpark();
        }
    }

    /// `d` since `epoch` in nanoseconds, short of [`NO_DEADLINE`].
    fn nanos(&self, d: Duration) -> u64 {
        u64::try_from(d.as_nanos()).map_or(NO_DEADLINE - 1, |n| n.min(NO_DEADLINE - 1))
    }

    /// Whether a tokio task watches the channel through its runtime's reactor (the only
    /// operation waiting) or not (several wait, or the watcher's finished while others
    /// wait): when not, the loop's thread keeps the channel, and is unparked for it.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn watch_from_task(&self, on: bool) {
        if self.task_watch.load(Ordering::Relaxed) == on {
            return;
        }
        if self.task_watch.swap(on, Ordering::SeqCst) && !on {
            self.shared.unpark_loop();
        }
    }

    /// The loop's thread while tokio tasks turn the loop: parks until the deadline the
    /// tasks' idle turns found or [`PARK_ASYNC`], then takes that deadline if no one
    /// else is turning.
    fn park_for_tasks(&self) {
        let now = self.epoch.elapsed();
        let deadline = self.async_deadline.load(Ordering::SeqCst);
        let park = if deadline == NO_DEADLINE {
            PARK_ASYNC
        } else {
            Duration::from_nanos(deadline.saturating_sub(self.nanos(now))).min(PARK_ASYNC)
        };
        if !park.is_zero() {
            self.park_until
                .store(self.nanos(now + park), Ordering::SeqCst);
            // Published before the park, as in `run_inner`.
            self.shared.loop_parked.store(true, Ordering::SeqCst);
            std::thread::park_timeout(park);
            self.shared.loop_parked.store(false, Ordering::SeqCst);
            self.park_until.store(NO_DEADLINE, Ordering::SeqCst);
        }
        let due = self.async_deadline.load(Ordering::SeqCst);
        if due != NO_DEADLINE && self.nanos(self.epoch.elapsed()) >= due {
            if let Ok(mut t) = self.turn.try_lock() {
                // Taken: the next idle turn records the next one.
                self.async_deadline.store(NO_DEADLINE, Ordering::SeqCst);
                self.turn_locked(&mut **t);
            }
        }
    }

    fn stopped(&self) -> bool {
        self.shared.stop.load(Ordering::SeqCst)
    }

    /// One turn with the turn held; wakes sleepers when it made progress.
    fn turn_locked(&self, t: &mut dyn Turn) -> Option<Turned> {
        match t.turn() {
            Ok(turned) => {
                if turned.progressed {
                    // Whoever sleeps may be waiting for what this turn produced.
                    self.shared.wake();
                }
                Some(turned)
            }
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }

    /// [`after_call`](Self::after_call) for a tokio task that may drive the loop. A
    /// writer whose send buffer has room never waits on its reactor, so it never takes
    /// the turns that keep the loop's thread parked for tasks; counting its calls as
    /// task activity keeps the loop's thread parked while it writes, and the write
    /// then turns the loop on the task's thread. Without it the loop's thread, once
    /// back, took every write over through a wake-up: a tokio sender at MTU 1500 had
    /// the loop's thread take 14-51% of the turns (a blocking one 2-3%), and in the
    /// rounds where it took more it sent slower (docs/performance-log.md, "Session 22").
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn after_task_call(&self) {
        self.count_task_call();
        self.after_call();
    }

    /// Counts a tokio task's call as task activity (see
    /// [`after_task_call`](Self::after_task_call)) without turning the loop: for a write
    /// whose turn runs once the task yields (`net/tokio_io.rs`).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn count_task_call(&self) {
        self.task_calls.fetch_add(1, Ordering::Relaxed);
    }

    /// After a socket call: while application threads drive (the loop's thread is
    /// parked), one turn on the caller's thread so what the call queued leaves now;
    /// otherwise a wake-up of the loop's thread, which batches what many calls queued
    /// into one doorbell. A turn per call would ring one per call: 128-byte writes at
    /// 100 Mb/s cost ulnet more CPU than the kernel that way (`netchannel-cpu`), where
    /// the loop's batching made them cost about 0.4x.
    /// Records whether the data a TCP write just queued waits on the windows
    /// (`Tcp::held_by_windows`): the turn after the call cannot send it all, and what
    /// is left leaves only as ACKs come in ([`after_call`](Self::after_call)). One flag
    /// for the stack: the last writer's word holds.
    pub(crate) fn note_write(&self, held: bool) {
        self.write_held.store(held, Ordering::Relaxed);
    }

    /// Records whether a caller leaves data for later turns (held by the windows, or
    /// segments the channel had no room for): while it does, the loop's thread parks
    /// [`PARK_HELD`] at a time, so it takes the loop back soon after a caller that
    /// leaves for work of its own. Setting it unparks the thread from a longer park.
    fn note_held(&self, held: bool) {
        if self.held.load(Ordering::Relaxed) == held {
            return;
        }
        self.held.store(held, Ordering::SeqCst);
        if held && self.shared.loop_parked.load(Ordering::SeqCst) {
            if let Some(t) = self.shared.loop_thread.get() {
                t.unpark();
            }
        }
    }

    pub(crate) fn after_call(&self) {
        if self.shared.loop_parked.load(Ordering::SeqCst) {
            if self.turn_or_wake() {
                self.note_held(
                    self.write_held.load(Ordering::Relaxed)
                        || self.shared.output_left.load(Ordering::Relaxed),
                );
            }
        } else {
            self.shared.wake();
        }
    }

    /// One turn on the caller's thread when nobody else is turning (the data leaves
    /// now, no thread is woken), else a wake-up of whoever is (it may be asleep in
    /// `poll(2)`). True when it turned.
    pub(crate) fn turn_or_wake(&self) -> bool {
        // A stopped loop has had its last flush: nothing turns it again.
        if self.stopped() {
            self.shared.wake();
            return false;
        }
        match self.turn.try_lock() {
            Ok(mut t) => {
                self.turn_locked(&mut **t);
                self.call_turns.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(_) => {
                self.shared.wake();
                false
            }
        }
    }

    /// Turns the loop on the caller's thread until `ready()` (checked after every turn
    /// and wake-up), `deadline` passes (false) or the loop stops (true).
    pub(crate) fn drive_until(
        &self,
        mut ready: impl FnMut() -> bool,
        deadline: Option<std::time::Instant>,
    ) -> bool {
        self.drivers.fetch_add(1, Ordering::SeqCst);
        let r = self.drive(&mut ready, deadline);
        if self.drivers.fetch_sub(1, Ordering::SeqCst) == 1
            && self.deep_parked.swap(false, Ordering::SeqCst)
        {
            if let Some(t) = self.shared.loop_thread.get() {
                t.unpark();
            }
        }
        r
    }

    fn drive(&self, ready: &mut dyn FnMut() -> bool, deadline: Option<std::time::Instant>) -> bool {
        let mut slept = None;
        // Turns a busy-polling driver skipped in a row (`Turn::quiet`).
        let mut skips = 0u32;
        loop {
            if ready() || self.stopped() {
                return true;
            }
            // The clock only when there is a deadline, and only every 32nd skipped turn
            // (a deadline is a call's timeout, milliseconds at least): a busy-polling
            // driver turns this loop millions of times a second, and the read was 6% of
            // its time.
            let left = match deadline {
                Some(d) if skips.is_multiple_of(32) => {
                    match d.checked_duration_since(std::time::Instant::now()) {
                        Some(l) if !l.is_zero() => Some(l),
                        _ => return false,
                    }
                }
                _ => None,
            };
            let mut t = relock(&self.turn);
            if t.quiet() {
                drop(t);
                skips = skips.wrapping_add(1);
                std::hint::spin_loop();
                continue;
            }
            skips = 0;
            if let Some(d) = slept.take() {
                t.slept(d);
            }
            let Some(turned) = self.turn_locked(&mut **t) else {
                return true;
            };
            self.app_turns.fetch_add(1, Ordering::Relaxed);
            if turned.progressed {
                continue;
            }
            match t.mode() {
                WaitMode::BusyPoll => {
                    drop(t);
                    std::hint::spin_loop();
                    continue;
                }
                WaitMode::Sleep if t.spinning() => {
                    if let Some((d, kicks)) = t.coalescing() {
                        drop(t);
                        if let Err(e) = self.shared.sleep(None, Some(d), kicks) {
                            self.fail(e);
                            return true;
                        }
                        continue;
                    }
                    drop(t);
                    // As the loop's thread does: yield, so kernel work our sends caused
                    // (deferred to ksoftirqd on this CPU) can run.
                    std::thread::yield_now();
                    continue;
                }
                WaitMode::Sleep => {}
            }
            let plan = match t.sleep_plan() {
                Ok(p) => p,
                Err(e) => {
                    drop(t);
                    self.fail(e);
                    return true;
                }
            };
            drop(t);
            let Some(timeout) = plan else {
                continue;
            };
            // Read the wake-up count before the last look at `ready`: an event another
            // thread produces after that look also moves the count, and the sleep is
            // skipped.
            let kicks = self.shared.kicks();
            if ready() {
                return true;
            }
            let timeout = match (timeout, left) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let fd = self.wait_fd.as_ref().map(AsFd::as_fd);
            let t0 = std::time::Instant::now();
            if let Err(e) = self.shared.sleep(fd, timeout, kicks) {
                self.fail(e);
                return true;
            }
            slept = Some(t0.elapsed());
        }
    }

    /// The loop's own thread: turns while no application thread drives, parks while
    /// one does. Returns when [`Handle::stop`](super::Handle::stop) is called, with the
    /// error of a failed turn if there was one.
    ///
    /// # Errors
    /// A channel or `poll(2)` system call failed (on any thread).
    pub(crate) fn run(&self) -> io::Result<()> {
        let _ = self.shared.loop_thread.set(std::thread::current());
        let r = self.run_inner();
        // The stop stays set (unlike `Runtime::run`'s): an engine is not run again, and
        // application threads must not turn a stopped loop.
        let last = relock(&self.turn).finish();
        match relock(&self.failed).take() {
            Some(e) => Err(e),
            None => r.and(last),
        }
    }

    fn run_inner(&self) -> io::Result<()> {
        let mut park = PARK_BUSY;
        let mut slept = None;
        // Application threads have driven this loop: they may share this thread's
        // core, so a busy-polling turn here yields instead of spinning (below).
        let mut shared = false;
        // Tokio tasks' turns and calls seen so far: while the count moves, tasks watch
        // the channel through their reactor and this thread stays out of their way.
        let mut async_seen = 0;
        // Busy-polling application threads turned the loop during the last park: one
        // that is out of its call now (sending what it received) is coming straight
        // back, and this thread stays parked rather than take the loop over in the gap.
        let mut between_calls = false;
        // Parked since the last turn of this thread's: the next turn is a takeover.
        let mut parked = false;
        // Application threads' turns as of this thread's last look: a busy-polling
        // caller that turned since is between two calls, as `between_calls` says after a
        // park. Without it, a thread that had never parked (the loop's first moments,
        // callers starting to drive while it spun) took a caller's gap between calls
        // for a free loop, spun on in it until a tick preempted it, and counted no
        // takeover: 16,572 turns once in CI (`api_wait_modes`).
        //
        // It starts at none, not at the count when this thread first runs: a thread
        // spawned onto the core of a caller that busy-polls may first run milliseconds
        // later, after the caller has driven thousands of turns, and the caller cannot
        // turn again while this thread holds its core. Counting from its first look,
        // the thread saw no caller move, spun through its first slice (37,466 turns
        // without a takeover, in 1 of 60 runs of `api_wait_modes`), and only then
        // parked. Turns it never saw are callers driving.
        let mut app_seen = 0;
        // Parks in a row in which no driver turned (for the stale `held` flag).
        let mut idle_parks = 0u32;
        while !self.stopped() {
            let turns =
                self.async_turns.load(Ordering::Relaxed) + self.task_calls.load(Ordering::Relaxed);
            if turns != async_seen {
                async_seen = turns;
                if self.task_watch.load(Ordering::SeqCst) {
                    self.park_for_tasks();
                    continue;
                }
            }
            // Taking the loop over from a busy-polling caller between two calls held its
            // core: this thread spun and yielded, and a yield does not hand the core to
            // a thread that has had more than its share (EEVDF picks the yielder again
            // while it is owed time), so the caller, preempted outside its call, could
            // wait until a tick preempted this thread. In `ulnet bench latency`'s
            // busy-poll ping-pong the loops' threads took 78-143 turns per 50,000 round
            // trips this way, none since (docs/performance-log.md, "Session 23").
            let app_now = self.app_turns.load(Ordering::Relaxed);
            let drove = std::mem::replace(&mut app_seen, app_now) != app_now;
            if self.drivers.load(Ordering::SeqCst) > 0
                || between_calls
                || (drove && self.mode == WaitMode::BusyPoll)
            {
                shared = true;
                let seen = self.app_turns.load(Ordering::Relaxed);
                if park > PARK_BUSY {
                    self.deep_parked.store(true, Ordering::SeqCst);
                    // The last driver may have left between the check and the flag.
                    if self.drivers.load(Ordering::SeqCst) == 0 {
                        self.deep_parked.store(false, Ordering::SeqCst);
                        continue;
                    }
                }
                // Published before the park: an unpark that comes first leaves the
                // token, and the park returns at once.
                self.shared.loop_parked.store(true, Ordering::SeqCst);
                let this_park = if self.held.load(Ordering::SeqCst) {
                    park.min(PARK_HELD)
                } else {
                    park
                };
                std::thread::park_timeout(this_park);
                self.parks.fetch_add(1, Ordering::Relaxed);
                self.shared.loop_parked.store(false, Ordering::SeqCst);
                self.deep_parked.store(false, Ordering::SeqCst);
                // Drivers that turned are busy: look again soon. Drivers asleep in
                // `poll(2)` need nothing from this thread: back off.
                let moved = self.app_turns.load(Ordering::Relaxed) != seen;
                // A flag left over from a writer long done would keep this thread
                // waking every millisecond while drivers sleep in `poll(2)`: after
                // [`HELD_STALE`] parks in which no driver turned, it goes. Not after
                // one: a blocking writer that waits for room sleeps through some, and
                // clearing the flag then cost the 1 ms parks' batching its gain
                // (tx-1500 paired 0.98x against 0.95x, two series).
                idle_parks = if moved { 0 } else { idle_parks + 1 };
                if idle_parks >= HELD_STALE {
                    self.held.store(false, Ordering::Relaxed);
                }
                park = if moved {
                    PARK_BUSY
                } else {
                    (park * 2).min(PARK_IDLE_MAX)
                };
                // Past a park in which no driver turned, the loop is this thread's
                // again: frames wait at most two parks for a caller that left.
                between_calls = moved && self.mode == WaitMode::BusyPoll;
                parked = true;
                continue;
            }
            if std::mem::take(&mut parked) {
                self.takeovers.fetch_add(1, Ordering::Relaxed);
            }
            park = PARK_BUSY;
            let kicks = self.shared.kicks();
            let mut t = relock(&self.turn);
            if let Some(d) = slept.take() {
                t.slept(d);
            }
            let Some(turned) = self.turn_locked(&mut **t) else {
                break;
            };
            if turned.received > 0 {
                continue;
            }
            match t.mode() {
                // Between two blocking calls of an application thread on this core (a
                // write after a read), a spin here held the core for the rest of the
                // scheduler's slice: the application could not make its next call,
                // which would have parked this thread, and its round trips stalled
                // for that slice (`perf` on a busy-polled TCP echo server: this
                // thread ran 4 ms of every ~24, 8.9% of the core; 0.1% yielding).
                WaitMode::BusyPoll if shared => {
                    drop(t);
                    std::thread::yield_now();
                }
                WaitMode::BusyPoll => {
                    drop(t);
                    std::hint::spin_loop();
                }
                WaitMode::Sleep if t.spin_alone() => {
                    let coalesce = t.coalescing();
                    drop(t);
                    match coalesce {
                        Some((d, kicks)) => self.shared.sleep(None, Some(d), kicks)?,
                        None => std::thread::yield_now(),
                    }
                }
                WaitMode::Sleep => {
                    let plan = t.sleep_plan()?;
                    drop(t);
                    if let Some(timeout) = plan {
                        let fd = self.wait_fd.as_ref().map(AsFd::as_fd);
                        let t0 = std::time::Instant::now();
                        self.shared.sleep(fd, timeout, kicks)?;
                        slept = Some(t0.elapsed());
                    }
                }
            }
        }
        Ok(())
    }
}

impl Shared {
    /// Unparks a shared loop's thread parked while application threads drive.
    pub(super) fn unpark_loop(&self) {
        if self.loop_parked.load(Ordering::SeqCst) {
            if let Some(t) = self.loop_thread.get() {
                t.unpark();
            }
        }
    }

    /// The wake-up count, to pass to [`sleep`](Self::sleep) later.
    pub(super) fn kicks(&self) -> u64 {
        self.kicks.load(Ordering::SeqCst)
    }

    /// Sleeps in `poll(2)` on `channel` and the eventfd unless a wake-up came since the
    /// count was `kicks`. Any number of threads may sleep at once; one signal wakes
    /// them all, and no thread consumes another's wake-up.
    pub(super) fn sleep(
        &self,
        channel: Option<std::os::fd::BorrowedFd<'_>>,
        timeout: Option<Duration>,
        kicks: u64,
    ) -> io::Result<()> {
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        if self.kicks.load(Ordering::SeqCst) != kicks || self.stop.load(Ordering::SeqCst) {
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
            return Ok(());
        }
        let r = wait::sleep(channel, &self.eventfd, timeout);
        self.signalled.store(false, Ordering::SeqCst);
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        r
    }

    /// Counts a wake-up and wakes the threads asleep in `poll(2)` (one eventfd write
    /// per sleep, however many wake-ups; nothing when no one sleeps).
    pub(super) fn wake(&self) {
        self.kicks.fetch_add(1, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 && !self.signalled.swap(true, Ordering::SeqCst)
        {
            self.wakeups.fetch_add(1, Ordering::Relaxed);
            wait::signal(&self.eventfd);
        }
    }
}
