//! Per-stage cycle accounting of the UDP data path (feature `stage-cycles`; seed 002,
//! Denali's Figure 2: the cost in cycles of each stage a packet crosses).
//!
//! What is measured: the time-stamp counter (TSC) read at each stage boundary of one
//! datagram's trip, receive side (ring pop → Ethernet → IPv4 → UDP demux → socket copy →
//! the application's `recv` return), the application's own time (its `recv` return to its
//! next `send`), and the transmit side (`send` copy → hand-off to the loop → UDP build →
//! IPv4 → Ethernet → channel descriptor → doorbell). A boundary attributes the cycles
//! since the previous boundary to the stage it ends, so the stages of one trace tile its
//! path; the whole path is also timed as one span from reads of its own, so the bench can
//! check that the stages add up to it.
//!
//! How: one datagram at a time is traced per direction. A trace starts when a frame is in
//! hand (receive) or a `send` queued a datagram on an otherwise empty socket (transmit),
//! and is committed to fixed per-stage aggregates (sum, count and a log-linear histogram of
//! 16 sub-buckets per octave, so medians are within 1/16) only when it completed: a frame
//! that is not UDP, a datagram queued behind others (its `recv` would return an older
//! one), or a second trace while one is in flight is not traced and is counted instead.
//! Nothing allocates; the state is static atomics, so hooks in `stack`, `channel` glue
//! and `ulnet` reach it without a handle. The state is process-wide: with several stacks
//! in one process their datagrams share the one trace per direction (still correct
//! figures, of whichever datagram got the trace).
//!
//! Cost: with the feature compiled in and the switch off ([`set_enabled`]), every hook
//! is one relaxed load and a branch never taken. With it on, a boundary is one `rdtsc`
//! and two relaxed stores; the bench measures both (`ulnet bench dispatch`).
//!
//! Concurrency: the receive and transmit traces each move through a small state machine
//! (idle → active → delivered/submitted → committed) with compare-and-swap at the points
//! where another thread may take over (the application's `recv` and `send`), so each
//! aggregate has one writer at a time; readers ([`snapshot`]) may see a sum and count of
//! a stage one update apart.

use core::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

#[cfg(not(target_arch = "x86_64"))]
compile_error!("the `stage-cycles` feature reads the x86-64 time-stamp counter");

/// A stage of the data path (the order is the order a datagram crosses them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Stage {
    /// Receive: the channel's ring pop until the frame is in the stack's hands.
    RxChannel = 0,
    /// Receive: Ethernet parse and checks.
    RxEthernet,
    /// Receive: IPv4 parse, checks and dispatch.
    RxIpv4,
    /// Receive: UDP parse, checksum and socket lookup (demux).
    RxUdp,
    /// Receive: delivery into the socket's buffer (the copy) and its readiness event.
    RxSocket,
    /// Receive: from delivery to the application's `recv` returning with it (the
    /// hand-off or wake-up, the turn ending, and the copy out).
    RxWake,
    /// The application: its `recv` return to its next `send` call.
    App,
    /// Transmit: the `send` call queueing the datagram (the copy into the socket).
    TxSocket,
    /// Transmit: queued until the loop's egress picks it up.
    TxHandoff,
    /// Transmit: UDP header, checksum and payload copy into the frame.
    TxUdp,
    /// Transmit: IPv4 (route, neighbour, identification, header).
    TxIpv4,
    /// Transmit: the Ethernet header.
    TxEthernet,
    /// Transmit: the channel's descriptor (frame allocation and submit).
    TxChannel,
    /// Transmit: the doorbell (flush), per frame of its batch.
    TxDoorbell,
    /// Receive, whole path: before the ring pop until `recv` returns, one span.
    RxWhole,
    /// Transmit, whole path: `send` called until the doorbell returned, one span.
    TxWhole,
}

/// Number of [`Stage`]s.
pub const STAGE_COUNT: usize = 16;

impl Stage {
    /// Every stage, in order.
    pub const ALL: [Stage; STAGE_COUNT] = [
        Stage::RxChannel,
        Stage::RxEthernet,
        Stage::RxIpv4,
        Stage::RxUdp,
        Stage::RxSocket,
        Stage::RxWake,
        Stage::App,
        Stage::TxSocket,
        Stage::TxHandoff,
        Stage::TxUdp,
        Stage::TxIpv4,
        Stage::TxEthernet,
        Stage::TxChannel,
        Stage::TxDoorbell,
        Stage::RxWhole,
        Stage::TxWhole,
    ];
    /// The receive stages (they tile [`Stage::RxWhole`]).
    pub const RX: [Stage; 6] = [
        Stage::RxChannel,
        Stage::RxEthernet,
        Stage::RxIpv4,
        Stage::RxUdp,
        Stage::RxSocket,
        Stage::RxWake,
    ];
    /// The transmit stages (they tile [`Stage::TxWhole`]).
    pub const TX: [Stage; 7] = [
        Stage::TxSocket,
        Stage::TxHandoff,
        Stage::TxUdp,
        Stage::TxIpv4,
        Stage::TxEthernet,
        Stage::TxChannel,
        Stage::TxDoorbell,
    ];

    /// A short name (used as a key in reports).
    pub fn name(self) -> &'static str {
        match self {
            Stage::RxChannel => "rx_channel",
            Stage::RxEthernet => "rx_ethernet",
            Stage::RxIpv4 => "rx_ipv4",
            Stage::RxUdp => "rx_udp",
            Stage::RxSocket => "rx_socket",
            Stage::RxWake => "rx_wake",
            Stage::App => "app",
            Stage::TxSocket => "tx_socket",
            Stage::TxHandoff => "tx_handoff",
            Stage::TxUdp => "tx_udp",
            Stage::TxIpv4 => "tx_ipv4",
            Stage::TxEthernet => "tx_ethernet",
            Stage::TxChannel => "tx_channel",
            Stage::TxDoorbell => "tx_doorbell",
            Stage::RxWhole => "rx_whole",
            Stage::TxWhole => "tx_whole",
        }
    }

    /// What the stage covers, for tables.
    pub fn label(self) -> &'static str {
        match self {
            Stage::RxChannel => "channel rx (ring pop → frame in hand)",
            Stage::RxEthernet => "Ethernet",
            Stage::RxIpv4 => "IPv4",
            Stage::RxUdp => "UDP checksum + demux",
            Stage::RxSocket => "socket delivery (copy in)",
            Stage::RxWake => "hand-off to the app + copy out (recv returns)",
            Stage::App => "application (recv return → next send)",
            Stage::TxSocket => "send: copy into the socket",
            Stage::TxHandoff => "hand-off to the loop (queued → egress)",
            Stage::TxUdp => "UDP build + payload copy",
            Stage::TxIpv4 => "IPv4 (route, neighbour, header)",
            Stage::TxEthernet => "Ethernet header",
            Stage::TxChannel => "channel tx (descriptor alloc + submit)",
            Stage::TxDoorbell => "doorbell (flush)",
            Stage::RxWhole => "receive, whole path (one span)",
            Stage::TxWhole => "transmit, whole path (one span)",
        }
    }
}

mod tsc {
    //! The one `unsafe` of the stack: reading the time-stamp counter.
    #![allow(unsafe_code)]

    /// The time-stamp counter.
    #[inline(always)]
    pub(super) fn read() -> u64 {
        // SAFETY: `rdtsc` has no preconditions: it reads a counter every x86-64 CPU has
        // (the module is compiled for x86-64 only), touches no memory, and user mode may
        // execute it unless the OS sets CR4.TSD, which Linux does not by default (a
        // process that asked for PR_SET_TSC/SIGSEGV would get a signal, not UB).
        unsafe { core::arch::x86_64::_rdtsc() }
    }
}

/// The time-stamp counter now (cycles).
#[inline(always)]
pub fn now() -> u64 {
    tsc::read()
}

/// Histogram buckets per stage: 16 exact values, then 16 sub-buckets per octave up to
/// 2^40 cycles (minutes), past which values go to the last bucket.
const BUCKETS: usize = 16 * 38;

fn bucket(v: u64) -> usize {
    if v < 16 {
        return v as usize;
    }
    let octave = 63 - v.leading_zeros() as usize; // >= 4
    let sub = ((v >> (octave - 4)) & 15) as usize;
    ((octave - 3) * 16 + sub).min(BUCKETS - 1)
}

/// The lowest value of bucket `i` and its width.
fn bucket_range(i: usize) -> (u64, u64) {
    if i < 16 {
        return (i as u64, 1);
    }
    let octave = i / 16 + 3;
    let sub = (i % 16) as u64;
    let width = 1u64 << (octave - 4);
    ((16 + sub) * width, width)
}

struct Agg {
    sum: AtomicU64,
    count: AtomicU64,
    hist: [AtomicU32; BUCKETS],
}

impl Agg {
    const fn new() -> Agg {
        Agg {
            sum: AtomicU64::new(0),
            count: AtomicU64::new(0),
            hist: [const { AtomicU32::new(0) }; BUCKETS],
        }
    }

    /// Adds `n` samples of `v` (one writer at a time: plain load and store, no locked
    /// read-modify-write on the data path).
    fn add(&self, v: u64, n: u64) {
        let r = Ordering::Relaxed;
        self.sum
            .store(self.sum.load(r).wrapping_add(v.wrapping_mul(n)), r);
        self.count.store(self.count.load(r) + n, r);
        let h = &self.hist[bucket(v)];
        h.store(h.load(r).saturating_add(n as u32), r);
    }

    fn clear(&self) {
        self.sum.store(0, Ordering::Relaxed);
        self.count.store(0, Ordering::Relaxed);
        for h in &self.hist {
            h.store(0, Ordering::Relaxed);
        }
    }
}

static AGG: [Agg; STAGE_COUNT] = [const { Agg::new() }; STAGE_COUNT];
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Trace states.
const IDLE: u8 = 0;
/// Receive: a frame is crossing the stack; transmit: the egress is emitting it.
const ACTIVE: u8 = 1;
/// Receive: in the socket, waiting for `recv`; transmit: queued, waiting for egress.
const PARKED: u8 = 2;
/// Someone is moving the trace between threads (exclusive).
const BUSY: u8 = 3;
/// Transmit: submitted to the channel, waiting for the doorbell.
const SUBMITTED: u8 = 4;

const RX_N: usize = Stage::RX.len();
const TX_N: usize = Stage::TX.len();

/// The receive trace.
struct Rx {
    state: AtomicU8,
    /// The last boundary's TSC.
    last: AtomicU64,
    /// The whole span's start (its own read, before the ring pop).
    whole_start: AtomicU64,
    /// Candidate start of the whole span for the next frame of the batch.
    poll_start: AtomicU64,
    /// The socket's local port, once delivered.
    port: AtomicU16,
    /// The TSC at delivery (the start of [`Stage::RxWake`]).
    delivered: AtomicU64,
    acc: [AtomicU64; RX_N],
}

/// The transmit trace.
struct Tx {
    state: AtomicU8,
    last: AtomicU64,
    whole_start: AtomicU64,
    port: AtomicU16,
    /// The application stage of this datagram's `send` (0: none).
    app: AtomicU64,
    acc: [AtomicU64; TX_N],
}

static RX: Rx = Rx {
    state: AtomicU8::new(IDLE),
    last: AtomicU64::new(0),
    whole_start: AtomicU64::new(0),
    poll_start: AtomicU64::new(0),
    port: AtomicU16::new(0),
    delivered: AtomicU64::new(0),
    acc: [const { AtomicU64::new(0) }; RX_N],
};
static TX: Tx = Tx {
    state: AtomicU8::new(IDLE),
    last: AtomicU64::new(0),
    whole_start: AtomicU64::new(0),
    port: AtomicU16::new(0),
    app: AtomicU64::new(0),
    acc: [const { AtomicU64::new(0) }; TX_N],
};
/// The TSC when the application's last traced `recv` returned, and on which port (the
/// start of its [`Stage::App`]).
static APP_START: AtomicU64 = AtomicU64::new(0);
static APP_PORT: AtomicU16 = AtomicU16::new(0);
/// Frames or datagrams that were not traced (not UDP, queued behind others, a trace in
/// flight), per direction.
static RX_UNTRACED: AtomicU64 = AtomicU64::new(0);
static TX_UNTRACED: AtomicU64 = AtomicU64::new(0);

fn rx_index(s: Stage) -> usize {
    s as usize - Stage::RxChannel as usize
}
fn tx_index(s: Stage) -> usize {
    s as usize - Stage::TxSocket as usize
}

/// Turns the accounting on or off (off: every hook is a branch not taken).
pub fn set_enabled(on: bool) {
    if on {
        RX.state.store(IDLE, Ordering::SeqCst);
        TX.state.store(IDLE, Ordering::SeqCst);
        APP_START.store(0, Ordering::SeqCst);
    }
    ENABLED.store(on, Ordering::SeqCst);
}

/// Whether the accounting is on.
#[inline(always)]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Clears every aggregate (call with the data path quiet: a trace in flight may land
/// half in the old figures).
pub fn reset() {
    for a in &AGG {
        a.clear();
    }
    RX_UNTRACED.store(0, Ordering::Relaxed);
    TX_UNTRACED.store(0, Ordering::Relaxed);
}

/// Records one sample of `cycles` for `stage` outside a trace (tests, and callers with
/// their own spans). One writer per stage at a time.
pub fn record(stage: Stage, cycles: u64) {
    AGG[stage as usize].add(cycles, 1);
}

// ---------------------------------------------------------------------------------------
// Receive hooks

/// The loop is about to pop the channel's receive ring (the whole span's start).
#[inline]
pub fn rx_poll() {
    if enabled() {
        let t = now();
        RX.poll_start.store(t, Ordering::Relaxed);
        RX.last.store(now(), Ordering::Relaxed);
    }
}

/// A received frame is in hand (the end of [`Stage::RxChannel`]); starts its trace unless
/// one is waiting for its `recv`.
#[inline]
pub fn rx_frame() {
    if !enabled() {
        return;
    }
    let r = Ordering::Relaxed;
    let s = RX.state.load(Ordering::Acquire);
    if s != IDLE && s != ACTIVE {
        RX_UNTRACED.fetch_add(1, r);
        return;
    }
    let t = now();
    for a in &RX.acc {
        a.store(0, r);
    }
    RX.acc[0].store(t.wrapping_sub(RX.last.load(r)), r);
    RX.whole_start.store(RX.poll_start.load(r), r);
    RX.last.store(t, r);
    RX.state.store(ACTIVE, r);
}

/// The stack finished with a frame: the next frame of the batch starts here.
#[inline]
pub fn rx_frame_done() {
    if !enabled() {
        return;
    }
    let r = Ordering::Relaxed;
    if RX.state.load(r) == ACTIVE {
        // Not a delivered datagram (ARP, TCP, dropped...).
        RX.state.store(IDLE, r);
    }
    let t = now();
    RX.poll_start.store(t, r);
    RX.last.store(now(), r);
}

/// A receive boundary: the cycles since the last one go to `stage`.
#[inline]
pub fn rx_mark(stage: Stage) {
    if !enabled() || RX.state.load(Ordering::Relaxed) != ACTIVE {
        return;
    }
    let r = Ordering::Relaxed;
    let t = now();
    let a = &RX.acc[rx_index(stage)];
    a.store(a.load(r) + t.wrapping_sub(RX.last.load(r)), r);
    RX.last.store(t, r);
}

/// The datagram was copied into the socket bound to `port` (the end of
/// [`Stage::RxSocket`]); `head` says it is the only datagram queued there, so the next
/// `recv` on that socket returns it. Otherwise the trace is dropped.
#[inline]
pub fn rx_delivered(port: u16, head: bool) {
    if !enabled() || RX.state.load(Ordering::Relaxed) != ACTIVE {
        return;
    }
    if !head {
        RX.state.store(IDLE, Ordering::Relaxed);
        RX_UNTRACED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    rx_mark(Stage::RxSocket);
    // The loop goes on polling (and moving `last`) while the datagram waits for `recv`.
    RX.delivered
        .store(RX.last.load(Ordering::Relaxed), Ordering::Relaxed);
    RX.port.store(port, Ordering::Relaxed);
    RX.state.store(PARKED, Ordering::Release);
}

/// The application's `recv` on the socket bound to `port` returned a datagram; commits
/// the receive trace if it is that datagram's.
#[inline]
pub fn rx_received(port: u16) {
    if !enabled() {
        return;
    }
    let end = now();
    if RX
        .state
        .compare_exchange(PARKED, BUSY, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    let r = Ordering::Relaxed;
    if RX.port.load(r) != port {
        RX.state.store(PARKED, Ordering::Release);
        return;
    }
    let wake = end.wrapping_sub(RX.delivered.load(r));
    RX.acc[rx_index(Stage::RxWake)].store(wake, r);
    for (i, s) in Stage::RX.iter().enumerate() {
        AGG[*s as usize].add(RX.acc[i].load(r), 1);
    }
    let whole_end = now();
    AGG[Stage::RxWhole as usize].add(whole_end.wrapping_sub(RX.whole_start.load(r)), 1);
    APP_PORT.store(port, r);
    APP_START.store(now(), r);
    RX.state.store(IDLE, Ordering::Release);
}

// ---------------------------------------------------------------------------------------
// Transmit hooks

/// The application called `send`: the whole transmit span's start (0 when off), for
/// [`tx_queued`].
#[inline]
pub fn tx_enter() -> u64 {
    if enabled() {
        now()
    } else {
        0
    }
}

/// The socket API's `send` began at `start` (its [`tx_enter`]) before it took the
/// interface's lock: the next [`tx_queued`] (under that lock) starts its trace there
/// rather than at the stack socket's own entry. 0 clears it.
#[inline]
pub fn tx_origin(start: u64) {
    if enabled() {
        TX_ORIGIN.store(start, Ordering::Relaxed);
    }
}

static TX_ORIGIN: AtomicU64 = AtomicU64::new(0);

/// `send` queued the datagram on the socket bound to `port` (the end of
/// [`Stage::TxSocket`], and of the application's [`Stage::App`] when its last `recv` on
/// that socket was traced); `head` says it is the only one queued there, so the socket's
/// next datagram out is this one. `entry` is [`tx_enter`]'s answer at the socket's
/// entry; a [`tx_origin`] set before (by the socket API) starts the trace earlier.
#[inline]
pub fn tx_queued(port: u16, head: bool, entry: u64) {
    if !enabled() || entry == 0 {
        return;
    }
    let t = now();
    let origin = TX_ORIGIN.swap(0, Ordering::Relaxed);
    let start = if origin != 0 && origin <= entry {
        origin
    } else {
        entry
    };
    if !head
        || TX
            .state
            .compare_exchange(IDLE, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
    {
        TX_UNTRACED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let r = Ordering::Relaxed;
    for a in &TX.acc {
        a.store(0, r);
    }
    TX.acc[tx_index(Stage::TxSocket)].store(t.wrapping_sub(start), r);
    // The application's stage: from its last traced `recv` return on this socket.
    let app = APP_START.swap(0, r);
    let app = if app != 0 && app < start && APP_PORT.load(r) == port {
        start - app
    } else {
        0
    };
    TX.app.store(app, r);
    TX.whole_start.store(start, r);
    TX.port.store(port, r);
    TX.last.store(t, r);
    TX.state.store(PARKED, Ordering::Release);
}

/// The egress picked the next datagram of the socket bound to `port`: if it is the
/// traced one, its [`Stage::TxHandoff`] ends and the emission is traced.
#[inline]
pub fn tx_pick(port: u16) {
    if !enabled() {
        return;
    }
    let r = Ordering::Relaxed;
    if TX.state.load(Ordering::Acquire) == PARKED && TX.port.load(r) == port {
        TX.state.store(ACTIVE, r);
        tx_mark(Stage::TxHandoff);
    }
}

/// A transmit boundary: the cycles since the last one go to `stage`.
#[inline]
pub fn tx_mark(stage: Stage) {
    if !enabled() || TX.state.load(Ordering::Relaxed) != ACTIVE {
        return;
    }
    let r = Ordering::Relaxed;
    let t = now();
    let a = &TX.acc[tx_index(stage)];
    a.store(a.load(r) + t.wrapping_sub(TX.last.load(r)), r);
    TX.last.store(t, r);
}

/// The traced frame was submitted to the channel (the end of its [`Stage::TxChannel`]).
#[inline]
pub fn tx_submitted() {
    if !enabled() || TX.state.load(Ordering::Relaxed) != ACTIVE {
        return;
    }
    tx_mark(Stage::TxChannel);
    TX.state.store(SUBMITTED, Ordering::Relaxed);
}

/// The egress is done with the traced datagram: if it was not submitted (parked for
/// ARP, dropped), the trace ends uncommitted.
#[inline]
pub fn tx_emitted() {
    if enabled() && TX.state.load(Ordering::Relaxed) == ACTIVE {
        TX.state.store(IDLE, Ordering::Release);
        TX_UNTRACED.fetch_add(1, Ordering::Relaxed);
    }
}

/// The loop is about to ring the doorbell for `frames` frames; returns the TSC (0 when
/// no trace is waiting for it), for [`tx_flushed`].
#[inline]
pub fn tx_flush_start() -> u64 {
    if !enabled() || TX.state.load(Ordering::Relaxed) != SUBMITTED {
        return 0;
    }
    let t = now();
    let r = Ordering::Relaxed;
    // Between submit and flush: the rest of the loop's iteration (other sockets' egress,
    // events), part of this datagram's hand-over to the doorbell.
    let a = &TX.acc[tx_index(Stage::TxDoorbell)];
    a.store(t.wrapping_sub(TX.last.load(r)), r);
    t
}

/// The doorbell returned; `frames` frames went out with it (its cost is shared among
/// them). Commits the transmit trace.
#[inline]
pub fn tx_flushed(start: u64, frames: u64) {
    if start == 0 || !enabled() || TX.state.load(Ordering::Relaxed) != SUBMITTED {
        return;
    }
    let r = Ordering::Relaxed;
    let end = now();
    let bell = end.wrapping_sub(start) / frames.max(1);
    let d = &TX.acc[tx_index(Stage::TxDoorbell)];
    d.store(d.load(r) + bell, r);
    for (i, s) in Stage::TX.iter().enumerate() {
        AGG[*s as usize].add(TX.acc[i].load(r), 1);
    }
    let app = TX.app.load(r);
    if app != 0 {
        AGG[Stage::App as usize].add(app, 1);
    }
    let whole_end = now();
    // The whole span charges this frame its share of the doorbell, as the stage does.
    let whole = start.wrapping_sub(TX.whole_start.load(r)) + (whole_end - start) / frames.max(1);
    AGG[Stage::TxWhole as usize].add(whole, 1);
    TX.state.store(IDLE, Ordering::Release);
}

// ---------------------------------------------------------------------------------------
// Reading

/// One stage's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageFigures {
    /// Samples.
    pub count: u64,
    /// Mean cycles.
    pub mean: f64,
    /// Median cycles (within 1/16, from the histogram).
    pub median: f64,
}

/// Every stage's figures so far, indexed like [`Stage::ALL`], and the untraced counts
/// (receive, transmit).
#[derive(Debug, Clone, Copy)]
pub struct Snapshot {
    /// Per stage, in [`Stage::ALL`] order.
    pub stages: [StageFigures; STAGE_COUNT],
    /// Received frames not traced.
    pub rx_untraced: u64,
    /// Sent datagrams not traced.
    pub tx_untraced: u64,
}

impl Snapshot {
    /// The figures of `s`.
    pub fn get(&self, s: Stage) -> StageFigures {
        self.stages[s as usize]
    }
}

/// Reads the aggregates (no allocation).
pub fn snapshot() -> Snapshot {
    let mut stages = [StageFigures::default(); STAGE_COUNT];
    for (i, a) in AGG.iter().enumerate() {
        let count = a.count.load(Ordering::Relaxed);
        let sum = a.sum.load(Ordering::Relaxed);
        let median = median(&a.hist);
        stages[i] = StageFigures {
            count,
            mean: if count == 0 {
                0.0
            } else {
                sum as f64 / count as f64
            },
            median,
        };
    }
    Snapshot {
        stages,
        rx_untraced: RX_UNTRACED.load(Ordering::Relaxed),
        tx_untraced: TX_UNTRACED.load(Ordering::Relaxed),
    }
}

/// The median of a histogram: the middle of the bucket holding the middle sample,
/// interpolated within the bucket by rank.
fn median(hist: &[AtomicU32; BUCKETS]) -> f64 {
    let total: u64 = hist
        .iter()
        .map(|h| u64::from(h.load(Ordering::Relaxed)))
        .sum();
    if total == 0 {
        return 0.0;
    }
    let half = total.div_ceil(2);
    let mut seen = 0u64;
    for (i, h) in hist.iter().enumerate() {
        let n = u64::from(h.load(Ordering::Relaxed));
        if n == 0 {
            continue;
        }
        if seen + n >= half {
            let (lo, w) = bucket_range(i);
            let frac = (half - seen) as f64 / n as f64;
            return lo as f64 + frac * w as f64 - if w > 1 { 0.0 } else { 1.0 - frac };
        }
        seen += n;
    }
    0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_in_order() {
        let mut last = 0;
        for v in [
            0u64,
            1,
            15,
            16,
            17,
            31,
            32,
            100,
            1000,
            65_535,
            1 << 30,
            1 << 39,
        ] {
            let b = bucket(v);
            assert!(b >= last, "{v}");
            last = b;
            let (lo, w) = bucket_range(b);
            assert!(lo <= v && v < lo + w, "{v} in [{lo}, {})", lo + w);
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn median_within_a_sixteenth() {
        let h: [AtomicU32; BUCKETS] = [const { AtomicU32::new(0) }; BUCKETS];
        for v in [100u64, 200, 300, 1000, 5000] {
            h[bucket(v)].fetch_add(1, Ordering::Relaxed);
        }
        let m = median(&h);
        assert!((m - 300.0).abs() <= 300.0 / 16.0, "{m}");
    }
}
