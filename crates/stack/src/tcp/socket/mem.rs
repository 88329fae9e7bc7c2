//! The memory of one connection: buffers that cost nothing until data comes, grow with
//! use, and are given back when idle.
//!
//! Read first: RFC 9293 §3.8.6 (the window's right edge never moves left), RFC 7323 §2
//! (window scaling, offered for the largest buffer so the window can grow), Linux
//! `tcp_rcv_space_adjust` (dynamic right-sizing, DRS) and `tcp_sndbuf_expand`.
//!
//! Two sizes per buffer (see `storage::RingBuffer`): the *capacity* is the promise (the
//! receive window is computed from it), the *storage* follows the bytes actually held,
//! doubling when a write needs more, each byte charged to the engine's
//! [`MemBudget`](crate::storage::MemBudget). So:
//! - an embryonic or idle connection holds no storage at all;
//! - the receive capacity starts at `recv_buffer_initial` and grows (doubling, at most
//!   once per round trip) to twice what the application read in the last round trip, up
//!   to `recv_buffer_len`, like Linux's DRS: enough for the sender's window to double
//!   again in slow start;
//! - the send capacity starts at `send_buffer_initial` and grows to three congestion
//!   windows when the application finds it full, and at each ACK while it stays short
//!   of room, up to `send_buffer_len` (Linux `tcp_sndbuf_expand`); it is writable again
//!   once a third has drained (`Socket::can_send`, Linux's threshold);
//! - under memory pressure capacities stop growing; past the hard limit storage is not
//!   allocated: arriving data is dropped and counted (the sender retransmits it; the
//!   window offered stays, RFC 9293 §3.8.6) and SEND takes only what fits;
//! - after `buffer_idle` with both buffers empty and nothing heard from the peer, the
//!   storage is freed. The receive capacity, and so every window already offered, is
//!   kept: only storage is released, never the promise.
//!
//! Per segment this costs a comparison or two (is the storage large enough, has a round
//! trip passed); growth itself is amortised.

use ulnet_wire::SeqNumber;

use crate::storage::MemBudget;
use crate::time::{Duration, Instant};

use super::{Cx, Socket};
use crate::tcp::congestion::CongestionControl;

/// The round trip DRS measures over when no RTT sample exists yet (Linux starts
/// `rcv_rtt_est` empty and waits; a handshake almost always gives a sample).
const DRS_DEFAULT_RTT: Duration = Duration::from_millis(200);

/// How soon a connection whose SEND the budget refused looks again (when no ACK frees
/// room first).
const STARVED_RETRY: Duration = Duration::from_millis(200);

/// Dynamic right-sizing state: what the application had read at the start of the
/// current measurement, and when it started (Linux `rcvq_space`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Drs {
    since: Option<Instant>,
    read_mark: u64,
    /// Bytes read in the last round trip that grew (Linux `rcvq_space.space`).
    space: u64,
    /// The receiver's own round-trip estimate in µs, 0 for none yet (Linux
    /// `rcv_rtt_est`), see [`Socket::rcv_rtt_measure`]. Plain words rather than
    /// `Option`s: the control block stays within its size (`control_block_sizes`).
    rcv_rtt_us: u32,
    /// The sequence number (RCV.NXT plus the window offered) whose arrival ends the
    /// measurement under way.
    rcv_rtt_edge: SeqNumber,
    /// When that measurement began; zero when none is under way (no clock reads zero
    /// once data flows, and a mark at zero only loses one sample).
    rcv_rtt_since: Instant,
}

impl Socket {
    /// Bytes of buffer storage this connection holds (what it costs the budget).
    #[inline]
    pub(crate) fn buffer_storage(&self) -> usize {
        self.tx.storage_len() + self.rx.storage_len()
    }

    /// The receive buffer's promised size.
    #[cfg(test)]
    pub(crate) fn rx_capacity(&self) -> usize {
        self.rx.capacity()
    }

    /// Makes room in the receive storage for bytes up to `end` past the read pointer
    /// (clamped to the capacity). False when the budget refused: the caller drops the
    /// segment and counts it.
    pub(crate) fn reserve_rx(&mut self, end: usize, now: Instant, cx: &mut Cx<'_>) -> bool {
        if self.rx.storage_len() >= end.min(self.rx.capacity()) {
            return true;
        }
        let ok = self.rx.reserve(end, cx.mem);
        self.arm_reclaim(now, cx.cfg.buffer_idle);
        ok
    }

    /// SEND's side of the budget: grow the capacity with the congestion window when the
    /// application wants more room than there is (Linux `tcp_sndbuf_expand`), then make
    /// storage for what it queues. Returns false when the budget refused storage.
    pub(crate) fn reserve_tx(&mut self, want: usize, now: Instant, cx: &mut Cx<'_>) -> bool {
        if want > self.tx.window() {
            self.expand_tx(cx);
        }
        let end = self.tx.len().saturating_add(want);
        if self.tx.storage_len() >= end.min(self.tx.capacity()) {
            return true;
        }
        let ok = self.tx.reserve(end, cx.mem);
        self.arm_reclaim(now, cx.cfg.buffer_idle);
        ok
    }

    /// Grows the send capacity to three congestion windows (Linux `tcp_sndbuf_expand`,
    /// which sizes it at twice the window in memory, skb overhead included): a writer
    /// blocked on a full buffer comes back once a third has drained (`Socket::can_send`),
    /// so the buffer holds at least two windows, one in flight and one queued behind it,
    /// and the sender never waits on the application for a round trip. Called when the
    /// application wants more room than there is, at its SEND, and at every ACK while
    /// the buffer is short of room, where a writer may wait for it (Linux
    /// `tcp_new_space`, on `SOCK_NOSPACE`): the buffer keeps up with a window that
    /// doubles every round trip in slow start.
    pub(crate) fn expand_tx(&mut self, cx: &mut Cx<'_>) {
        if self.tx_locked || cx.mem.under_pressure() {
            return;
        }
        let target = self.cc.cwnd().saturating_mul(3);
        let cap = self.tx.capacity();
        if target > cap && cap < cx.cfg.send_buffer_len {
            let grown = target
                .checked_next_power_of_two()
                .unwrap_or(target)
                .max(cap.saturating_mul(2))
                .min(cx.cfg.send_buffer_len);
            self.tx.set_capacity(grown);
        }
    }

    /// The receiver's round-trip estimate (Linux `tcp_rcv_rtt_measure`), called for every
    /// in-order data segment: the time RCV.NXT takes to pass the right edge of the window
    /// offered when the measurement began. Receiving a whole window takes about a round
    /// trip when the sender is window-limited and longer when it is not; the estimate
    /// keeps the smallest. DRS paces itself by this, not by SRTT: a receiver that sends no data
    /// keeps the SRTT of its handshake, and a SYN-ACK that waited for the neighbour's
    /// address (a proxy ARP answers after up to 0.8 s) left one of 160 ms on a path of
    /// 100 µs, so DRS looked once per 160 ms and a 100 MB transfer never grew its window
    /// (`ulnet bench loss`, rx at 0% drop: 3 Gb/s against the kernel's 7).
    pub(crate) fn rcv_rtt_measure(&mut self, now: Instant) {
        let nxt = self.rcv.nxt();
        let d = &mut self.drs;
        if d.rcv_rtt_since != Instant::default() {
            if nxt.diff(d.rcv_rtt_edge) < 0 {
                return;
            }
            let us = now.saturating_duration_since(d.rcv_rtt_since).as_micros();
            let sample = u32::try_from(us).unwrap_or(u32::MAX).max(1);
            // The minimum, as Linux keeps these samples: an estimate that rose with the
            // queue the window itself builds would grow the window further (letting larger
            // samples in by an eighth made the bulk flow in `no_alloc_runtime`'s shared pipe
            // starve the ping-pong beside it).
            d.rcv_rtt_us = match d.rcv_rtt_us {
                0 => sample,
                e => e.min(sample),
            };
        }
        d.rcv_rtt_since = now;
        d.rcv_rtt_edge = nxt.add(self.rcv.wnd());
    }

    /// The round trip DRS measures over: the receiver's own estimate, else the SRTT.
    #[inline]
    fn drs_rtt(&self) -> Duration {
        match self.drs.rcv_rtt_us {
            0 => self.rtt.srtt().unwrap_or(DRS_DEFAULT_RTT),
            us => Duration::from_micros(u64::from(us)),
        }
    }

    /// Dynamic right-sizing (Linux `tcp_rcv_space_adjust`), called for every data
    /// segment: once per round trip, when the application read more than in the round
    /// trip before, the receive capacity grows to Linux's estimate of the window the
    /// sender needs next, `2 * copied + 16 * MSS`, plus twice the growth rate of what was
    /// read (so slow start, which doubles per round trip, is not held back). Growth is
    /// to a power of two and at least doubles, up to `recv_buffer_len`. Not when the
    /// application fixed the size, nor under memory pressure.
    pub(crate) fn rcv_space_adjust(&mut self, now: Instant, cx: &mut Cx<'_>) {
        let read = self
            .counters
            .bytes_received
            .saturating_sub(self.rx.len() as u64);
        let mss = u64::from(self.peer_eff_mss());
        let Some(since) = self.drs.since else {
            // Linux starts from the initial window's worth (TCP_INIT_CWND segments), but
            // never above the window it first offers (`tcp_init_buffer_space`: the min of
            // rcv_ssthresh, rcv_wnd and 10 * advmss), which is about half the initial
            // buffer (`tcp_win_from_space` at the default scaling ratio). Without that cap
            // a 64 KB MSS (MTU 65535) started at 640 KB while a 128 KiB buffer let at most
            // 128 KiB be read per round trip: the buffer never grew and the sender was
            // window limited 75% of the time (`ss -ti` in the peer: rwnd_limited,
            // snd_wnd 131072), at 10 Gb/s where MTU 9000 moved 18.
            //
            // Whole segments, as Linux rounds its first window down to the MSS
            // (`tcp_select_initial_window`). Growth needs more read in a round trip than
            // this, and an application reading 64 KiB at a time (iperf3, the bench) read
            // exactly half a 128 KiB buffer per round trip once the receiver's estimate
            // fell below the time between two reads: at MSS 8948 the buffer stayed at
            // 128 KiB for whole transfers (`ulnet bench hurd-tcp`, rx-9000, one round in
            // three at 6.4 Gb/s against 17).
            let first_window = (10 * mss).min(self.rx.capacity() as u64 / 2);
            let space = if first_window > mss {
                first_window - first_window % mss
            } else {
                first_window
            };
            self.drs = Drs {
                since: Some(now),
                read_mark: read,
                space: space.max(1),
                ..self.drs
            };
            return;
        };
        let rtt = self.drs_rtt();
        if now < since + rtt {
            return;
        }
        let copied = read.saturating_sub(self.drs.read_mark);
        let prev = self.drs.space.max(1);
        self.drs.since = Some(now);
        self.drs.read_mark = read;
        if copied <= prev {
            return;
        }
        self.drs.space = copied;
        if self.rx_locked || cx.mem.under_pressure() {
            return;
        }
        let mut rcvwin = copied.saturating_mul(2).saturating_add(16 * mss);
        let grow = rcvwin.saturating_mul(copied - prev) / prev;
        rcvwin = rcvwin.saturating_add(grow.saturating_mul(2));
        let target = usize::try_from(rcvwin).unwrap_or(usize::MAX);
        let cap = self.rx.capacity();
        let max = cx.cfg.recv_buffer_len;
        if target > cap && cap < max {
            let grown = target
                .checked_next_power_of_two()
                .unwrap_or(target)
                .max(cap.saturating_mul(2))
                .min(max);
            self.rx.set_capacity(grown);
        }
    }

    /// SEND could take nothing: the budget refused storage. The connection is not
    /// writable until an ACK frees room (`input.rs`) or the retry check finds the budget
    /// has room again, so an application waiting for writability does not spin.
    pub(crate) fn starve_tx(&mut self, now: Instant) {
        self.tx_starved = true;
        let at = now + STARVED_RETRY;
        match self.timers.reclaim() {
            Some(t) if t <= at => {}
            _ => self.timers.arm_reclaim(at),
        }
    }

    /// Schedules a reclaim check `idle` from now unless one is due already.
    fn arm_reclaim(&mut self, now: Instant, idle: Duration) {
        if !self.timers.reclaim_armed() && self.buffer_storage() > 0 {
            self.timers.arm_reclaim(now + idle);
        }
    }

    /// The reclaim check fired: an idle connection with empty buffers gives their
    /// storage back; one still busy is looked at again later.
    pub(crate) fn reclaim_expired(&mut self, now: Instant, cx: &mut Cx<'_>) {
        if self.tx_starved {
            // Writable again: the next SEND asks the budget afresh.
            self.tx_starved = false;
        }
        let idle = cx.cfg.buffer_idle;
        let quiet_until = self.last_rcv + idle;
        if now >= quiet_until && self.release_storage(cx.mem, cx.cfg) {
            return;
        }
        if self.buffer_storage() > 0 {
            self.timers.arm_reclaim(quiet_until.max(now + idle));
        }
    }

    /// Frees the storage of empty buffers (out-of-order bytes held keep the receive
    /// storage). The receive capacity stays (windows offered are kept, RFC 9293
    /// §3.8.6); the send capacity returns to its starting size (it promises the peer
    /// nothing). True when no storage is left.
    pub(crate) fn release_storage(
        &mut self,
        mem: &mut MemBudget,
        cfg: &crate::tcp::config::TcpConfig,
    ) -> bool {
        if self.tx.release(mem) > 0 && !self.tx_locked {
            let (start, _) = cfg.starting_buffers(mem.under_pressure());
            self.tx.set_capacity(start);
        }
        if self.asm.is_empty() {
            self.rx.release(mem);
        }
        self.rec.release_storage();
        self.buffer_storage() == 0
    }
}
