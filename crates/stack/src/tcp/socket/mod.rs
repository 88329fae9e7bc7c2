//! The per-connection control block ([`Socket`], RFC 9293 §3.3.1 "TCB") and the user
//! calls on it (RFC 9293 §3.10.1-§3.10.6: SEND, RECEIVE, CLOSE, ABORT, STATUS).
//!
//! The block's fields are private to this module; its children add to it: segment
//! arrival in `input.rs`, the receive half in `recv.rs`, segment generation in
//! `output.rs`, timer expiry in `timer.rs`. The parts it is built from own their fields
//! and keep their own invariants without knowing `Socket`: the send sequence space
//! (`tcp/seq.rs`), the receive sequence space and the window we offer
//! (`tcp/rseq.rs`), loss recovery (`tcp/recovery/`, handed the parts it steers through
//! [`Sender`]), congestion control, RTT, the deadlines (`tcp/timers.rs`). The layer
//! (`layer/`) owns sockets and the tables that find them, and asks them through named
//! methods.
//!
//! Invariants:
//! - `snd_una <= snd_nxt`, and `snd_nxt` only grows except when a refused window probe
//!   is retracted (kept by `SendSeq`, see `tcp/seq.rs`).
//! - `rcv_nxt` only advances and the advertised right edge never moves left, except
//!   when a segment carrying it was never sent (kept by `RecvSeq`, see `tcp/rseq.rs`).
//! - The send buffer holds exactly the bytes from `tx_seq0()` on: unacknowledged, then
//!   unsent. A queued FIN sits right after the last buffered byte.
//! - The receive buffer holds in-order bytes up to RCV.NXT; bytes after it (out of
//!   order) are written into its free space and tracked by the assembler.

use alloc::boxed::Box;
use ulnet_wire::{SeqNumber, TcpRepr};

use crate::storage::{MemBudget, RingBuffer};
use crate::time::{Duration, Instant};

use crate::tcp::challenge::ChallengeLimiter;
use crate::tcp::config::{Keepalive, SocketOption, TcpConfig};
use crate::tcp::congestion::{CongestionControl, Controller};
use crate::tcp::error::{ConnError, RecvError, SendError, SocketError};
use crate::tcp::handle::ListenerHandle;
use crate::tcp::options::{ts_clock, Negotiated, Offer, TS_OPTION_LEN};
use crate::tcp::reassembly::Assembler;
use crate::tcp::recovery::{Echo, Recovery, Sender, SentSegs};
use crate::tcp::rseq::{RecvRoom, RecvSeq};
use crate::tcp::rtt::{RttEstimator, RttSampler};
use crate::tcp::seq::SendSeq;
use crate::tcp::state::State;
use crate::tcp::stats::{ConnCounters, TcpInfo, TcpStats};
use crate::tcp::table::FourTuple;
use crate::tcp::timers::Timers;
use crate::tcp::timewait::TimeWaitInit;
use crate::{IpFields, ECN_MASK};

pub(crate) mod input;
mod mem;
pub(crate) mod output;
mod recv;
mod timer;

/// How long new data goes segment by segment after a retransmission, with bursts
/// enabled ([`Socket::burst_max`]): longer than the stalls it avoids (an RTO is at
/// least 200 ms), so random loss of a percent or so keeps a connection off bursts.
pub(crate) const BURST_HOLD: Duration = Duration::from_secs(1);

/// Engine-wide state a socket needs while handling a segment or timer.
pub(crate) struct Cx<'a> {
    pub cfg: &'a TcpConfig,
    pub stats: &'a mut TcpStats,
    pub challenge: &'a mut ChallengeLimiter,
    /// The engine's buffer memory account (`socket/mem.rs`).
    pub mem: &'a mut MemBudget,
}

/// One connection (RFC 9293 §3.3.1 Transmission Control Block).
#[derive(Debug)]
pub(crate) struct Socket {
    tuple: FourTuple,
    state: State,
    /// Set while a passively opened connection is in its listener's SYN or accept queue.
    origin: Option<ListenerHandle>,
    /// Opened by a listener (RST in SYN-RECEIVED then returns to LISTEN, RFC 9293).
    passive: bool,

    /// Send sequence space (RFC 9293 §3.3.1).
    snd: SendSeq,

    /// Receive sequence space and the window we offer (RFC 9293 §3.3.1).
    rcv: RecvSeq,

    // Options.
    offer: Offer,
    ts_on: bool,
    sack_on: bool,
    ws_on: bool,
    ts_recent: u32,
    ts_recent_age: Instant,
    ts_offset: u32,

    // Buffers: storage allocated with use and charged to the budget (`mem.rs`).
    tx: RingBuffer,
    rx: RingBuffer,
    asm: Assembler,
    /// The application fixed a buffer's size (like Linux's SOCK_SNDBUF_LOCK /
    /// SOCK_RCVBUF_LOCK): no growth with use.
    tx_locked: bool,
    rx_locked: bool,
    /// TOS and TTL of what this connection sends (`SocketOption::Tos`, `HopLimit`).
    ip: IpFields,
    /// SEND found no room and the memory budget refused more storage: not writable
    /// until an ACK frees some or a retry (`mem.rs`) finds the budget has room.
    tx_starved: bool,
    /// Receive-buffer auto-tuning (dynamic right-sizing, `mem.rs`).
    drs: mem::Drs,

    // User-side flags.
    /// The application shut down writing (or closed): a FIN follows the buffered data.
    fin_queued: bool,
    /// The sequence number our FIN took, once sent.
    fin_sent_seq: Option<SeqNumber>,
    rd_shut: bool,
    /// The application let go of the socket (close or abort); it is freed when closed.
    orphan: bool,

    // Acknowledgement state.
    ack_now: bool,
    /// An ACK must answer the segment being processed, before the next one (see
    /// `recv.rs`).
    ack_immediate: bool,
    /// A SYN or SYN-ACK must be (re)sent.
    syn_pending: bool,
    /// The most recent out-of-order block (first SACK block, RFC 2018 §4).
    last_ooo: Option<(SeqNumber, SeqNumber)>,
    /// A duplicate block to report first (RFC 2883 D-SACK).
    dsack: Option<(SeqNumber, SeqNumber)>,
    /// Quick-ACK mode: how many more ACKs go out at once instead of being delayed
    /// (Linux's `icsk_ack.quick`, see `recv.rs`).
    quick_acks: u8,
    /// Interactive ("ping-pong") mode: we answered the peer's data with data of our own
    /// within the delayed-ACK time, so our ACKs ride on our replies and quick-ACK mode
    /// is off (Linux's `inet_csk_in_pingpong_mode`).
    pingpong: bool,
    /// When in-order data last arrived; `None` before the first (Linux's
    /// `icsk_ack.lrcvtime`, with `ato == 0` as "no data yet").
    data_rcvd_at: Option<Instant>,
    /// SACK compression (`AckPolicy::Linux`): the RCV.NXT the duplicate ACKs below
    /// counted for, how many went out at once for it, and how many out-of-order
    /// segments have waited since the last ACK (Linux's `compressed_ack_rcv_nxt`,
    /// `dup_ack_counter`, `compressed_ack`).
    comp_rcv_nxt: SeqNumber,
    dup_acks_sent: u8,
    compressed_acks: u8,

    // Retransmission and congestion.
    rtt: RttEstimator,
    sampler: RttSampler,
    /// A retransmission made the sampler's result unsafe; timestamps may still measure.
    rtt_ambiguous: bool,
    syn_retransmitted: bool,
    cc: Controller,
    /// Initial window in segments (RFC 6928), for every controller this socket starts.
    initial_window: usize,
    rec: Recovery,
    timers: Timers,
    /// Bytes outstanding right after our latest transmission: how much of cwnd the sender
    /// used at its last chance to send. ACKs processed in one batch shrink the flight
    /// before the sender can refill it; the controller's RFC 7661 "is cwnd in use" test
    /// must not mistake that for an application-limited sender.
    flight_at_send: u32,
    /// SND.NXT right after a window probe that took new sequence space, while nothing
    /// but that probe is outstanding (so an ACK that does not take it can retract it).
    probe_end: Option<SeqNumber>,
    /// New data sent since the last segment that carried PSH (Linux's forced push).
    unpushed: u32,
    /// Consecutive unanswered retransmissions / probes.
    retries: u8,
    /// When the oldest unacknowledged data was first sent (user timeout, RFC 5482).
    unacked_since: Option<Instant>,
    last_rcv: Instant,
    keepalive: Option<Keepalive>,
    user_timeout: Option<Duration>,
    nodelay: bool,
    delack_on: bool,

    error: Option<ConnError>,
    /// The latest ICMP soft error (RFC 1122 §4.2.3.9): reported through SO_ERROR, and
    /// what a timeout reports instead of "timed out" (Linux's `sk_err_soft`).
    soft_error: Option<ConnError>,
    pub(crate) counters: ConnCounters,
    /// Retransmitted bytes when bursts were last allowed ([`Socket::burst_max`]).
    burst_retrans_seen: u64,
    /// New data goes segment by segment until then: the path lost something lately.
    bursts_held_until: Instant,
}

/// How the application wants to shut a connection down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shutdown {
    /// No more receiving: buffered and future data is discarded.
    Read,
    /// No more sending: a FIN follows the buffered data (half-close).
    Write,
    /// Both.
    Both,
}

/// What the application can do with a socket now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Readiness {
    /// `recv` will not block: data, EOF, or an error.
    pub readable: bool,
    /// `send` will accept data (or report an error).
    pub writable: bool,
    /// No more input: the peer's FIN came, the application shut reading down, or the
    /// connection is closed (Linux's `EPOLLRDHUP`).
    pub read_closed: bool,
    /// The connection is fully closed.
    pub closed: bool,
    /// Our sending side is shut: a FIN is queued or sent (shutdown, close), or the
    /// connection is closed.
    pub write_closed: bool,
    /// Both directions are shut: the peer's FIN came or the application shut reading
    /// down, and our sending side is shut; or the connection is closed. What Linux
    /// reports as `EPOLLHUP` (`tcp_poll`: `sk_shutdown == SHUTDOWN_MASK` or CLOSE).
    pub hung_up: bool,
    /// The connection ended with this error.
    pub error: Option<ConnError>,
}

impl Socket {
    /// A fresh control block in CLOSED. Its buffers hold no storage yet; they start at
    /// the configured initial sizes, or the minimum ones when memory is under `pressure`.
    pub(crate) fn new(
        cfg: &TcpConfig,
        tuple: FourTuple,
        iss: SeqNumber,
        ts_offset: u32,
        mtu: usize,
        now: Instant,
        pressure: bool,
    ) -> Box<Socket> {
        let (tx_len, rx_len) = cfg.starting_buffers(pressure);
        let ipv6 = tuple.local().is_ipv6();
        let mss = crate::tcp::config::mss_for_mtu(mtu, ipv6);
        let offer = Offer {
            mss,
            wscale: cfg
                .window_scaling
                .then(|| crate::tcp::options::wscale_for(cfg.recv_buffer_len)),
            timestamps: cfg.timestamps,
            sack: cfg.sack,
        };
        let iw = cfg.initial_window.max(1) as usize;
        Box::new(Socket {
            tuple,
            state: State::Closed,
            origin: None,
            passive: false,
            snd: SendSeq::new(iss, crate::tcp::options::default_mss(ipv6).min(mss)),
            rcv: RecvSeq::new(crate::tcp::options::default_mss(ipv6).min(mss)),
            offer,
            ts_on: false,
            sack_on: false,
            ws_on: false,
            ts_recent: 0,
            ts_recent_age: now,
            ts_offset,
            tx: RingBuffer::lazy(tx_len),
            rx: RingBuffer::lazy(rx_len),
            asm: Assembler::new(cfg.max_ooo_ranges),
            tx_locked: false,
            rx_locked: false,
            ip: IpFields::default(),
            tx_starved: false,
            drs: mem::Drs::default(),
            fin_queued: false,
            fin_sent_seq: None,
            rd_shut: false,
            orphan: false,
            ack_now: false,
            ack_immediate: false,
            syn_pending: false,
            last_ooo: None,
            dsack: None,
            quick_acks: 0,
            pingpong: false,
            data_rcvd_at: None,
            comp_rcv_nxt: SeqNumber(0),
            dup_acks_sent: 0,
            compressed_acks: 0,
            rtt: {
                let mut e = RttEstimator::new(cfg.initial_rto, cfg.min_rto, cfg.max_rto);
                e.set_min_variance(cfg.min_rto_var);
                e
            },
            sampler: RttSampler::new(),
            rtt_ambiguous: false,
            syn_retransmitted: false,
            cc: Controller::new(cfg.congestion.with_rack(cfg.rack), usize::from(mss), iw),
            initial_window: iw,
            rec: Recovery::new(
                iss,
                cfg.max_ooo_ranges,
                cfg.rack,
                cfg.tail_loss_probe,
                SentSegs::for_buffer(cfg.send_buffer_len),
            ),
            timers: Timers::default(),
            retries: 0,
            probe_end: None,
            unpushed: 0,
            flight_at_send: 0,
            unacked_since: None,
            last_rcv: now,
            keepalive: cfg.keepalive,
            user_timeout: cfg.user_timeout,
            nodelay: !cfg.nagle,
            delack_on: !cfg.delayed_ack.is_zero(),
            error: None,
            soft_error: None,
            counters: ConnCounters::default(),
            burst_retrans_seen: 0,
            bursts_held_until: Instant::ZERO,
        })
    }

    /// Active open (RFC 9293 §3.10.1): CLOSED → SYN-SENT, SYN queued for output.
    pub(crate) fn open_active(&mut self) {
        self.state = State::SynSent;
        self.syn_pending = true;
    }

    /// Passive open from a listener's SYN (RFC 9293 §3.10.7.2): LISTEN → SYN-RECEIVED,
    /// SYN-ACK queued.
    pub(crate) fn open_passive(&mut self, now: Instant, syn: &TcpRepr<'_>, origin: ListenerHandle) {
        self.passive = true;
        self.origin = Some(origin);
        self.rcv.sync(syn.seq);
        self.rcv.note_ack_sent();
        let n = self
            .offer
            .negotiate(&syn.options, self.tuple.local().is_ipv6());
        self.apply_negotiated(n);
        if let Some(ts) = syn.options.timestamp.filter(|_| self.ts_on) {
            self.ts_recent = ts.tsval;
            self.ts_recent_age = now;
        }
        // The SYN's window is never scaled (RFC 7323 §2.2).
        self.snd
            .init_window(u32::from(syn.window), syn.seq, self.snd.iss());
        self.state = State::SynReceived;
        self.syn_pending = true;
        self.last_rcv = now;
    }

    /// Passive open rebuilt from a SYN cookie (RFC 4987 §3.6, `tcp/cookie.rs`): the state
    /// a SYN-RECEIVED connection would have right after sending its SYN-ACK — the peer's
    /// ISN `irs`, the options `n` the cookie carried, SND.NXT = ISS + 1 and the SYN-ACK's
    /// window recorded as advertised — so the returning ACK completes the handshake
    /// through the ordinary SYN-RECEIVED rules. `tsval` is the ACK's, standing in for the
    /// SYN's for PAWS (RFC 7323 §5.3). No SYN-ACK is queued: it was sent statelessly.
    pub(crate) fn open_from_cookie(
        &mut self,
        now: Instant,
        irs: SeqNumber,
        tsval: Option<u32>,
        n: Negotiated,
        origin: ListenerHandle,
    ) {
        self.passive = true;
        self.origin = Some(origin);
        self.rcv.sync(irs);
        self.apply_negotiated(n);
        if let Some(v) = tsval.filter(|_| self.ts_on) {
            self.ts_recent = v;
            self.ts_recent_age = now;
        }
        self.state = State::SynReceived;
        let _ = self.take_window_field(true);
        self.note_ack_sent();
        self.snd.sent_to(self.snd.iss() + 1);
        self.last_rcv = now;
    }

    /// A SYN-RECEIVED connection retransmitted its SYN-ACK (no ACK within an RTO).
    pub(crate) fn syn_retransmitted(&self) -> bool {
        self.syn_retransmitted
    }

    pub(crate) fn apply_negotiated(&mut self, n: Negotiated) {
        self.snd
            .set_negotiated(n.snd_mss, n.snd_wscale, n.timestamps);
        self.rcv.set_wscale(n.rcv_wscale);
        self.ws_on = n.window_scaling;
        self.ts_on = n.timestamps;
        self.sack_on = n.sack;
        self.rec.set_sack(n.sack);
        // Nothing was sent yet: start the controller with the real SMSS, so the initial
        // window (RFC 6928) is counted in the segments actually used.
        self.cc = Controller::new(
            self.cc.algorithm(),
            usize::from(self.data_mss()),
            self.initial_window,
        );
    }

    /// The largest burst of new data to plan now ([`TcpConfig::gso_max`]): none for
    /// [`BURST_HOLD`] after any retransmission, so a lossy path is sent segment by
    /// segment.
    ///
    /// Measured, not assumed: with a Linux receiver and 1-2% random loss each way, a
    /// sender whose bursts the kernel cuts (ours, and the kernel's own 64 KB GSO
    /// packets) took 1-5 RTOs of 200-600 ms per 100 MB, every one answered by an ACK
    /// with a D-SACK (the receiver had the data and held its ACKs); segment by segment
    /// it took at most one (`ulnet bench loss`, docs/performance-log.md "Session 7"). A
    /// clean path keeps its bursts, which cut the per-segment cost on both hosts.
    ///
    /// [`TcpConfig::gso_max`]: crate::tcp::TcpConfig::gso_max
    pub(crate) fn burst_max(&mut self, now: Instant, gso_max: u32) -> u32 {
        if gso_max == 0 {
            return 0;
        }
        if self.counters.bytes_retrans != self.burst_retrans_seen {
            self.burst_retrans_seen = self.counters.bytes_retrans;
            self.bursts_held_until = now + BURST_HOLD;
        }
        if now < self.bursts_held_until {
            0
        } else {
            gso_max
        }
    }

    /// The payload bytes of a full-sized segment: the peer's MSS less the options every
    /// segment carries (RFC 6691, RFC 9293 §3.7.1 Eff.snd.MSS).
    #[inline]
    pub(crate) fn data_mss(&self) -> u16 {
        self.snd.data_mss()
    }

    /// Sequence number of the first byte in the send buffer.
    #[inline]
    pub(crate) fn tx_seq0(&self) -> SeqNumber {
        self.snd.buf_start()
    }

    /// Bytes in the send buffer past SND.NXT: queued, never sent.
    #[inline]
    pub(crate) fn unsent_len(&self) -> usize {
        let sent = self.snd.nxt().distance_from(self.tx_seq0()) as usize;
        self.tx.len().saturating_sub(sent)
    }

    /// True once our FIN has been sent (it may still be unacknowledged).
    #[inline]
    pub(crate) fn fin_sent(&self) -> bool {
        self.fin_sent_seq.is_some()
    }

    /// True once our FIN is acknowledged.
    #[inline]
    pub(crate) fn fin_acked(&self) -> bool {
        self.fin_sent_seq
            .is_some_and(|f| self.snd.una().diff(f) > 0)
    }

    /// Our timestamp clock now.
    #[inline]
    pub(crate) fn tsval(&self, now: Instant) -> u32 {
        ts_clock(now, self.ts_offset)
    }

    /// The most the receive buffer could take after RCV.NXT.
    #[inline]
    pub(crate) fn rcv_space(&self) -> u32 {
        if self.rd_shut {
            // Discarded data is acknowledged, so never close the window on it.
            return self.rx.capacity().min(u32::MAX as usize) as u32;
        }
        self.rx.window().min(u32::MAX as usize) as u32
    }

    /// The window currently offered to the peer: up to the advertised right edge.
    #[inline]
    pub(crate) fn rcv_wnd(&self) -> u32 {
        self.rcv.wnd()
    }

    /// The peer's Eff.snd.MSS as the receiver sees it (RFC 9293 §3.7.1, RFC 6691): the MSS
    /// we offered less the options every segment of the connection carries.
    #[inline]
    pub(crate) fn peer_eff_mss(&self) -> u32 {
        let opt = if self.ts_on { TS_OPTION_LEN } else { 0 };
        u32::from(self.offer.mss.saturating_sub(opt).max(1))
    }

    /// What the window rules of [`RecvSeq`] need of the receive buffer and the options.
    #[inline]
    fn recv_room(&self) -> RecvRoom {
        RecvRoom {
            space: self.rcv_space(),
            buff: self.rx.capacity().min(u32::MAX as usize) as u32,
            eff_mss: self.peer_eff_mss(),
        }
    }

    /// The window field for an outgoing segment; records the advertised edge.
    #[inline]
    pub(crate) fn take_window_field(&mut self, syn: bool) -> u16 {
        let room = self.recv_room();
        self.rcv.take_window_field(syn, room)
    }

    /// True when a read opened enough window to be worth an ACK of its own.
    ///
    /// RFC 9293 §3.8.6.2.2 / RFC 1122 §4.2.3.3 decide *what* window may be offered
    /// ([`RecvSeq::window_to_advertise`]); when to announce it without data is the
    /// receiver's choice. Like Linux (`__tcp_cleanup_rbuf`), only when the window still
    /// offered has fallen to half the largest one ever offered and the new one is at least
    /// twice as large: a peer with half a window to fill is not waiting for the update, and
    /// the next ACK carries it anyway. "Largest ever offered" rather than the buffer size
    /// (Linux's `window_clamp`) also keeps a passive open quiet: its SYN-ACK could offer
    /// only 65535 bytes (never scaled, RFC 7323 §2.2), and a small read right after it is
    /// no reason for an update, which Linux avoids through its slowly growing
    /// `rcv_ssthresh`. A closed window always reopens with an update once SWS avoidance
    /// lets it grow.
    pub(crate) fn window_update_due(&self) -> bool {
        if !self.state.may_receive() || self.state == State::SynReceived {
            return false;
        }
        self.rcv.window_update_due(self.recv_room())
    }

    /// Moves to CLOSED with `error` (None for a clean close), dropping all timers.
    pub(crate) fn set_closed(&mut self, error: Option<ConnError>) {
        self.state = State::Closed;
        // A connection that timed out after an ICMP soft error reports that error, as
        // Linux does (RFC 1122 §4.2.3.9: the soft error is what the application learns).
        let error = match error {
            Some(ConnError::TimedOut) => self.soft_error.take().or(error),
            e => e,
        };
        if error.is_some() && self.error.is_none() {
            self.error = error;
        }
        self.timers = Timers::default();
        self.ack_now = false;
        self.ack_immediate = false;
        self.syn_pending = false;
    }

    // ---- user calls (RFC 9293 §3.10) ----

    /// SEND: queues as much of `data` as fits; `Ok(0)` when the buffer is full (or the
    /// memory budget has no storage for it).
    pub(crate) fn send(
        &mut self,
        data: &[u8],
        now: Instant,
        cx: &mut Cx<'_>,
    ) -> Result<usize, SendError> {
        if let Some(e) = self.error {
            return Err(e.into());
        }
        if self.fin_queued || !self.state.may_send() {
            return Err(SendError::Closed);
        }
        // A refusal leaves whatever storage there is: SEND takes what fits in it.
        let granted = self.reserve_tx(data.len(), now, cx);
        let n = self.tx.enqueue_slice(data);
        if n == 0 && !granted && !data.is_empty() {
            self.starve_tx(now);
        }
        Ok(n)
    }

    /// RECEIVE (RFC 9293 §3.10.3). `Ok(0)` is EOF; an empty buffer before EOF is
    /// [`RecvError::WouldBlock`].
    pub(crate) fn recv(&mut self, buf: &mut [u8]) -> Result<usize, RecvError> {
        if let Some(r) = self.recv_status(buf) {
            return r;
        }
        let n = self.rx.dequeue_slice(buf);
        if self.asm.is_empty() {
            // Nothing out of order is held past the write pointer (`RingBuffer::rewind`).
            self.rx.rewind();
        }
        if self.window_update_due() {
            self.ack_now = true;
        }
        Ok(n)
    }

    /// What RECEIVE answers when it copies nothing: EOF, an error, or would-block.
    fn recv_status(&self, buf: &[u8]) -> Option<Result<usize, RecvError>> {
        if self.rd_shut {
            // Like POSIX `recv` after `shutdown(SHUT_RD)`: end of stream.
            return Some(Ok(0));
        }
        if self.rx.is_empty() {
            if let Some(e) = self.error {
                return Some(Err(e.into()));
            }
            if self.state.fin_received() || self.state == State::Closed {
                return Some(Ok(0));
            }
            return Some(Err(RecvError::WouldBlock));
        }
        if buf.is_empty() {
            return Some(Ok(0));
        }
        None
    }

    /// Half-close the sending direction: queue a FIN after the data (RFC 9293 §3.10.4).
    /// Returns true when the socket can be freed at once (it never synchronized).
    fn shutdown_write(&mut self) -> bool {
        match self.state {
            State::Closed | State::Listen => true,
            State::SynSent => {
                self.set_closed(None);
                true
            }
            State::SynReceived | State::Established => {
                if !self.fin_queued {
                    self.fin_queued = true;
                    if self.state == State::Established {
                        self.state = State::FinWait1;
                    }
                }
                false
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.state = State::LastAck;
                false
            }
            _ => false,
        }
    }

    /// Stop receiving: buffered data is dropped, further data is acknowledged and
    /// discarded.
    fn shutdown_read(&mut self) {
        self.rd_shut = true;
        self.rx.clear();
    }

    /// ABORT (RFC 9293 §3.10.5): a RST goes out in synchronized states; the socket is
    /// CLOSED afterwards. Returns the RST to send, if any.
    pub(crate) fn abort(&mut self, now: Instant) -> Option<TcpRepr<'static>> {
        let rst = match self.state {
            State::SynReceived
            | State::Established
            | State::FinWait1
            | State::FinWait2
            | State::CloseWait => Some(self.rst_segment(now)),
            _ => None,
        };
        self.set_closed(Some(ConnError::Aborted));
        self.tx.clear();
        self.rx.clear();
        rst
    }

    /// Applies a per-socket option (see [`SocketOption`] for when each may be set).
    ///
    /// # Errors
    /// [`SocketError::InvalidState`] for a buffer size while data is held, or a smaller
    /// receive buffer once a window was offered.
    pub(crate) fn set_option(
        &mut self,
        opt: SocketOption,
        now: Instant,
        mem: &mut MemBudget,
    ) -> Result<(), SocketError> {
        // Nothing sent yet: what the SYN announces may still change.
        let before_syn = self.state == State::Closed && self.snd.nxt() == self.snd.iss();
        match opt {
            SocketOption::RecvBuffer(n) => {
                let n = n.max(1);
                let held = !self.rx.is_empty() || !self.asm.is_empty();
                if held || (!before_syn && n < self.rx.capacity()) {
                    return Err(SocketError::InvalidState);
                }
                // Nothing is held: the storage (if any) goes back, the new size is a
                // promise until data comes.
                self.rx.release(mem);
                self.rx = RingBuffer::lazy(n);
                self.rx_locked = true;
                if before_syn && self.offer.wscale.is_some() {
                    self.offer.wscale = Some(crate::tcp::options::wscale_for(n));
                }
            }
            SocketOption::SendBuffer(n) => {
                if !self.tx.is_empty() {
                    return Err(SocketError::InvalidState);
                }
                self.tx.release(mem);
                self.tx = RingBuffer::lazy(n.max(1));
                self.tx_locked = true;
            }
            SocketOption::MaxSegment(m) => {
                let m = m.max(88);
                if before_syn {
                    self.offer.mss = self.offer.mss.min(m);
                }
                if self.snd.clamp_mss(m) {
                    let mss = usize::from(self.data_mss());
                    self.cc.set_mss(mss);
                }
            }
            other => self.set_flag_option(other, now),
        }
        Ok(())
    }

    fn set_flag_option(&mut self, opt: SocketOption, now: Instant) {
        match opt {
            SocketOption::NoDelay(on) => self.nodelay = on,
            SocketOption::Keepalive(k) => {
                self.keepalive = k;
                self.last_rcv = now;
                self.rearm_keepalive(now);
            }
            SocketOption::UserTimeout(t) => self.user_timeout = t,
            SocketOption::Congestion(alg) => {
                let alg = alg.with_rack(self.rec.rack_on());
                self.cc = Controller::new(alg, usize::from(self.data_mss()), self.initial_window);
            }
            SocketOption::DelayedAck(on) => {
                self.delack_on = on;
                if !on && self.timers.delack_pending() {
                    self.ack_now = true;
                }
            }
            SocketOption::Tos(t) => self.ip.tos = t & !ECN_MASK,
            SocketOption::HopLimit(h) => self.ip.hop_limit = h,
            SocketOption::RecvBuffer(_)
            | SocketOption::SendBuffer(_)
            | SocketOption::MaxSegment(_) => {}
        }
    }

    /// The IP header fields of this connection's segments.
    #[inline]
    pub(crate) fn ip_fields(&self) -> IpFields {
        self.ip
    }

    /// The connection's state.
    #[inline]
    pub(crate) fn state(&self) -> State {
        self.state
    }

    /// The connection's addresses.
    #[inline]
    pub(crate) fn tuple(&self) -> FourTuple {
        self.tuple
    }

    /// True while the application holds this connection: accepted (or actively opened)
    /// and not yet closed or aborted.
    #[inline]
    pub(crate) fn user_visible(&self) -> bool {
        !self.orphan && self.origin.is_none()
    }

    /// The application took this connection from its listener's accept queue.
    pub(crate) fn accepted(&mut self) {
        self.origin = None;
    }

    /// RECEIVE without consuming: copies buffered in-order data into `buf`.
    pub(crate) fn peek(&self, buf: &mut [u8]) -> Result<usize, RecvError> {
        if let Some(r) = self.recv_status(buf) {
            return r;
        }
        Ok(self.rx.read_allocated(0, buf))
    }

    /// Shuts down one or both directions (RFC 9293 §3.10.4 for the sending one).
    pub(crate) fn shutdown(&mut self, how: Shutdown) {
        if matches!(how, Shutdown::Read | Shutdown::Both) {
            self.shutdown_read();
        }
        if matches!(how, Shutdown::Write | Shutdown::Both) {
            self.shutdown_write();
        }
    }

    /// CLOSE must reset rather than close gracefully: received data was never read (RFC
    /// 1122 §4.2.2.13).
    pub(crate) fn close_resets(&self) -> bool {
        !self.rx.is_empty() && self.state.is_synchronized()
    }

    /// CLOSE (RFC 9293 §3.10.4): the application lets go; a FIN follows the data, and a
    /// connection that never synchronized is closed at once.
    pub(crate) fn close(&mut self, now: Instant, fin_wait2_timeout: Duration) {
        self.orphan = true;
        let freed = self.shutdown_write();
        if freed || self.state == State::Closed {
            self.set_closed(None);
        } else if self.state == State::FinWait2 {
            self.arm_fin_wait2(now, fin_wait2_timeout);
        }
    }

    /// What the application can do with the socket now.
    pub(crate) fn readiness(&self) -> Readiness {
        Readiness {
            readable: self.can_recv(),
            writable: self.can_send(),
            read_closed: self.rd_shut || self.state.fin_received() || self.state == State::Closed,
            closed: self.state == State::Closed,
            write_closed: self.write_shut(),
            hung_up: self.state == State::Closed
                || ((self.rd_shut || self.state.fin_received()) && self.write_shut()),
            error: self.error,
        }
    }

    /// Our sending side is shut (FIN queued or sent) or the connection is closed.
    fn write_shut(&self) -> bool {
        self.fin_queued
            || matches!(
                self.state,
                State::Closed
                    | State::FinWait1
                    | State::FinWait2
                    | State::Closing
                    | State::LastAck
                    | State::TimeWait
            )
    }

    /// Readable: data, EOF, or an error to report.
    pub(crate) fn can_recv(&self) -> bool {
        self.rd_shut
            || !self.rx.is_empty()
            || self.error.is_some()
            || self.state.fin_received()
            || self.state == State::Closed
    }

    /// Writable: established-or-later with room in the send buffer for at least half of
    /// what it holds (or an error to report).
    ///
    /// The room threshold is Linux's (`__sk_stream_is_writeable`: free space at least
    /// `sk_stream_min_wspace`, half the bytes queued), which both `tcp_poll`'s `EPOLLOUT`
    /// and the wake-up of a writer blocked on a full buffer (`sk_stream_write_space`)
    /// use. A full buffer then becomes writable once a third of it has drained, not at
    /// the first ACK: a writer blocked on it comes back for one large write instead of
    /// one per ACK, each a wake-up and a turn of the loop for a few segments (a silly
    /// window on the application's side of the buffer). `send` itself still takes
    /// whatever fits.
    pub(crate) fn can_send(&self) -> bool {
        self.error.is_some()
            || (matches!(self.state, State::Established | State::CloseWait)
                && !self.fin_queued
                && self.tx_room()
                && !self.tx_starved)
    }

    /// Queued data that the windows keep from leaving now: more unsent bytes than the
    /// congestion window and the peer's window leave room for beside what is in flight.
    /// Only ACKs, which a turn of the loop takes in, let it go.
    pub(crate) fn held_by_windows(&self) -> bool {
        let unsent = self.unsent_len();
        if unsent == 0 {
            return false;
        }
        let in_flight = self.snd.nxt().distance_from(self.snd.una()) as usize;
        let wnd = (self.snd.wnd() as usize).min(self.cc.cwnd());
        in_flight + unsent > wnd
    }

    /// The send buffer has room for at least half of what it holds: the threshold of
    /// [`Socket::can_send`].
    pub(crate) fn tx_room(&self) -> bool {
        self.tx.window() > 0 && self.tx.window() >= self.tx.len() / 2
    }

    // ---- loss recovery's view of the connection ----

    /// Loss recovery, and the parts of the connection it reads and steers, borrowed
    /// apart.
    #[inline]
    fn loss(&mut self) -> (&mut Recovery, Sender<'_>) {
        (
            &mut self.rec,
            Sender {
                seq: &self.snd,
                cc: &mut self.cc,
                rtt: &self.rtt,
                timers: &mut self.timers,
                counters: &mut self.counters,
            },
        )
    }

    /// The connection's half of "may a tail loss probe be sent" (RFC 8985 §7.2): a state
    /// that sends data, and no window probe outstanding.
    #[inline]
    fn probe_open(&self) -> bool {
        matches!(
            self.state,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        ) && self.probe_end.is_none()
    }

    /// (Re)starts the tail loss probe timer, or stops it when no probe may be sent
    /// (RFC 8985 §7.2).
    fn arm_tlp(&mut self, now: Instant) {
        let open = self.probe_open();
        let (rec, mut p) = self.loss();
        rec.tlp_arm(&mut p, now, open);
    }

    /// RACK (RFC 8985 §6) when its reordering timer fired, counting a loss it declares.
    fn rack_detect(&mut self, now: Instant, stats: &mut TcpStats) {
        let (rec, mut p) = self.loss();
        if rec.rack_detect(&mut p, now) {
            stats.rack_losses += 1;
        }
    }

    /// The end of an ACK's processing: RACK per segment and PRR (RFC 8985 §6.2, RFC 6937
    /// §3); `delivered` is the data the ACK reported delivered, cumulatively or by SACK;
    /// `tsecr` the timestamp it echoed.
    fn after_ack(
        &mut self,
        now: Instant,
        delivered: u32,
        tsecr: Option<u32>,
        stats: &mut TcpStats,
    ) {
        let echo = tsecr.filter(|&t| self.ts_on && t != 0).map(|tsecr| Echo {
            tsecr,
            offset: self.ts_offset,
        });
        let (rec, mut p) = self.loss();
        if rec.after_ack(&mut p, now, delivered, echo) {
            stats.rack_losses += 1;
        }
    }

    // ---- what the layer asks of a connection ----

    /// The connection's pending error, if it ended with one.
    #[inline]
    pub(crate) fn error(&self) -> Option<ConnError> {
        self.error
    }

    /// Bytes of in-order data waiting for the application.
    #[inline]
    pub(crate) fn recv_queue_len(&self) -> usize {
        self.rx.len()
    }

    /// The listener this passively opened connection still belongs to (SYN or accept
    /// queue), if any.
    #[inline]
    pub(crate) fn origin(&self) -> Option<ListenerHandle> {
        self.origin
    }

    /// Opened by a listener.
    #[inline]
    pub(crate) fn passive(&self) -> bool {
        self.passive
    }

    /// The application let go of the socket (close or abort): it is freed once closed.
    pub(crate) fn orphan(&mut self) {
        self.orphan = true;
    }

    /// The earliest of the connection's deadlines.
    #[inline]
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Whether a SYN reaching this connection in TIME-WAIT is newer than what it saw (by
    /// timestamp when both sides use them, else by sequence number), so it may reopen
    /// the connection; then SND.NXT, which the new connection's ISS must exceed.
    pub(crate) fn time_wait_reopen(&self, seg: &TcpRepr<'_>) -> Option<SeqNumber> {
        let newer = match (self.ts_on, seg.options.timestamp) {
            (true, Some(ts)) => (ts.tsval.wrapping_sub(self.ts_recent) as i32) > 0,
            _ => seg.seq.diff(self.rcv.nxt()) > 0,
        };
        newer.then_some(self.snd.nxt())
    }

    /// A connection in TIME-WAIT may shrink to a compact record once the application let
    /// go of it and it owes the peer no ACK.
    #[inline]
    pub(crate) fn time_wait_compactable(&self) -> bool {
        self.orphan && !self.ack_now
    }

    /// The compact TIME-WAIT record that replaces this connection (see
    /// [`Socket::time_wait_compactable`]); records the window it advertises.
    pub(crate) fn time_wait_record(&mut self) -> TimeWaitInit {
        let window = self.take_window_field(false);
        TimeWaitInit {
            tuple: self.tuple,
            snd_nxt: self.snd.nxt(),
            rcv_nxt: self.rcv.nxt(),
            ts_recent: self.ts_on.then_some(self.ts_recent),
            window,
        }
    }

    /// SND.UNA and SND.NXT: the sequence numbers an ICMP error may quote (RFC 5927 §4.1).
    pub(crate) fn unacked_range(&self) -> (SeqNumber, SeqNumber) {
        (self.snd.una(), self.snd.nxt())
    }

    /// Records an ICMP soft error (`None` takes it back, as SO_ERROR reads clear it).
    pub(crate) fn set_soft_error(&mut self, e: Option<ConnError>) -> Option<ConnError> {
        core::mem::replace(&mut self.soft_error, e)
    }

    /// The path MTU towards the peer dropped: never send segments larger than `mss`.
    pub(crate) fn clamp_mss(&mut self, mss: u16) {
        if self.snd.clamp_mss(mss) {
            let m = usize::from(self.data_mss());
            self.cc.set_mss(m);
            // The segments in flight larger than the new size were dropped by the router
            // that said so: resend them now, in the new size (Linux's
            // tcp_simple_retransmit), not after a retransmission timeout.
            self.rec.on_mss_drop(&self.snd);
        }
    }

    /// Whether the connection has something to send now (or may, after a check).
    pub(crate) fn wants_output(&self) -> bool {
        if self.syn_pending
            || self.ack_now
            || self.timers.probe_due()
            || self.timers.keepalive_due()
            || self.timers.tlp_due()
        {
            return true;
        }
        if !self.state.is_synchronized() || self.state == State::SynReceived {
            return false;
        }
        if self.rec.retransmission_pending() {
            return true;
        }
        let sent = self.snd.nxt().distance_from(self.tx_seq0()) as usize;
        self.tx.len() > sent || (self.fin_queued && !self.fin_sent())
    }

    /// STATUS (RFC 9293 §3.10.6) as a [`TcpInfo`].
    pub(crate) fn info(&self) -> TcpInfo {
        TcpInfo {
            state: self.state,
            cwnd: self.cc.cwnd().min(u32::MAX as usize) as u32,
            ssthresh: self.cc.ssthresh().min(u32::MAX as usize) as u32,
            srtt: self.rtt.srtt(),
            rttvar: self.rtt.rttvar(),
            rto: self.rtt.rto(),
            snd_mss: self.data_mss(),
            snd_wnd: self.snd.wnd(),
            rcv_wnd: self.rcv_wnd(),
            bytes_in_flight: self.rec.pipe(&self.snd),
            sacked_bytes: self.rec.sacked_bytes(),
            retransmits: self.counters.retransmits,
            bytes_retrans: self.counters.bytes_retrans,
            ca_state: self.rec.ca_state(),
            lost: self.rec.lost_bytes(&self.snd),
            rcv_mss: self.rcv.mss(),
            backoff: self.retries,
            dsacks_received: self.rec.dsacks(),
            fast_recoveries: self.counters.fast_recoveries,
            timeouts: self.counters.timeouts,
            segs_out: self.counters.segs_out,
            segs_in: self.counters.segs_in,
            bytes_acked: self.counters.bytes_acked,
            bytes_received: self.counters.bytes_received,
            send_queue_len: self.tx.len(),
            recv_queue_len: self.rx.len(),
            window_scale: self.ws_on.then_some((self.snd.wscale(), self.rcv.wscale())),
            timestamps: self.ts_on,
            sack: self.sack_on,
            congestion: self.cc.algorithm(),
            pacing_rate: self.cc.pacing_rate(),
            delivery_rate: self.rec.delivery_rate(),
        }
    }
}
