//! The whole TCP engine of one stack: [`Tcp`] owns every connection, the listeners, the
//! TIME-WAIT records and the timer queue; the IP layer hands it segments
//! ([`Tcp::process`]) and collects what should go out ([`Tcp::dispatch`]); the socket API
//! calls the user operations.
//!
//! Lookup is O(1): a keyed hash table from 4-tuple to connection slot, then the
//! TIME-WAIT table, then listeners by local address (exact, then wildcard). Sockets live in
//! a slab addressed by small generation-checked handles, so a stale handle is an error,
//! never a panic or another connection. Timers are one queue entry per connection (the
//! connection's earliest deadline) in a binary heap with lazy deletion.
//!
//! Memory is bounded by configuration: `max_connections` control blocks, `max_time_wait`
//! records, per-listener SYN and accept queues, and the buffer storage the connections
//! allocate with use, charged to one [`MemBudget`] (`TcpConfig::mem`, like Linux
//! `tcp_mem`): past its hard limit new connections are refused and counted. Storage is
//! given back when a connection is freed or sits idle (`socket/mem.rs`). On the
//! established path nothing allocates once the buffers have grown to their working size:
//! payload is copied from the socket ring into one preallocated scratch buffer.

use alloc::boxed::Box;
use alloc::collections::{BinaryHeap, VecDeque};
use alloc::vec;
use alloc::vec::Vec;
use core::cmp::Reverse;
use core::net::{IpAddr, SocketAddr};
use hashbrown::HashMap;

use ulnet_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr, TcpTimestamp};

use crate::storage::MemBudget;
use crate::time::Instant;
use crate::IpFields;

use super::challenge::ChallengeLimiter;
use super::config::{mss_for_mtu, SocketOption, SynCookies, TcpConfig};
use super::cookie::CookieJar;
use super::error::ConnError;
pub(crate) mod icmp;
mod syn;
mod user;

use super::handle::{Event, ListenerHandle, SocketHandle};
use super::isn::IsnGenerator;
use super::listen::Listener;
use super::options::ts_clock;
use super::socket::input::{self, rst_for};
use super::socket::output::{self, Output};
use super::socket::{Cx, Socket};
use super::state::State;
use super::stats::TcpStats;
use super::table::{ConnTable, FourTuple, KeyedState};
use super::timewait::MIN_SHRINK;
use super::timewait::{TimeWaitTable, TwVerdict};
use crate::ports::EphemeralPorts;

/// Segments one `dispatch` call sends from one connection before moving to the next
/// (fairness), and in total (bounded work per call).
const PER_SOCKET_BURST: usize = 64;
const PER_DISPATCH: usize = 4096;
/// RSTs queued by `abort`/`close` awaiting dispatch.
const MAX_PENDING_RST: usize = 1024;
/// How often `dispatch` looks whether a structure should give capacity back.
const SHRINK_PERIOD: crate::time::Duration = crate::time::Duration::from_secs(1);
/// Remembered per-destination path MTUs.
const MAX_PATH_MTUS: usize = 4096;
/// RFC 6056 §2.1 suggested ephemeral range.
pub(super) const EPHEMERAL: (u16, u16) = (49152, 65535);

#[derive(Debug)]
struct Slot {
    generation: u32,
    sock: Option<Box<Socket>>,
    /// Earliest deadline this slot has in the heap.
    queued_deadline: Option<Instant>,
    in_ready: bool,
    in_events: bool,
    in_table: bool,
    in_syn_queue: bool,
}

#[derive(Debug)]
struct ListenerSlot {
    generation: u32,
    listener: Option<Listener>,
    in_events: bool,
}

/// What the application can observe of a socket, compared before and after an operation
/// to decide whether a readiness event is due.
type Snapshot = (State, usize, bool, Option<ConnError>);

fn snapshot(s: &Socket) -> Snapshot {
    (s.state(), s.recv_queue_len(), s.can_send(), s.error())
}

/// The TCP engine. See the module docs.
#[derive(Debug)]
pub struct Tcp {
    pub(super) cfg: TcpConfig,
    slots: Vec<Slot>,
    free: Vec<u32>,
    pub(super) table: ConnTable,
    listeners: Vec<ListenerSlot>,
    /// Keyed from the secret like every map here: the default hasher would read OS
    /// randomness, which the engine never does.
    listen_map: HashMap<SocketAddr, u32, KeyedState>,
    pub(super) tw: TimeWaitTable,
    pub(super) hasher: KeyedState,
    pub(super) isn: IsnGenerator,
    pub(super) ports: EphemeralPorts,
    pub(super) challenge: ChallengeLimiter,
    /// SYN cookie keys (RFC 4987 §3.6), from the secret.
    cookies: CookieJar,
    pub(super) stats: TcpStats,
    /// Buffer storage of every connection (see the module docs).
    pub(super) mem: MemBudget,
    heap: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    ready: VecDeque<u32>,
    events: VecDeque<Event>,
    pending_rst: VecDeque<(IpAddr, IpAddr, TcpRepr<'static>)>,
    scratch: Vec<u8>,
    path_mtu: HashMap<IpAddr, usize, KeyedState>,
    /// The IPv6 link MTU (`set_v6_link_mtu`; `usize::MAX` until the interface says).
    v6_link_mtu: usize,
    pub(super) last_now: Instant,
    live: usize,
    /// The generation a newly created slot starts at: above that of every slot the slab
    /// gave back (see [`Tcp::shrink`]), so no handle of a connection that lived there
    /// names the slot's next occupant.
    gen_base: u32,
    /// When `dispatch` next looks whether a shrink is due.
    next_shrink: Instant,
    /// Tests pin the next ISS (to exercise wraparound).
    #[cfg(test)]
    next_iss: Option<u32>,
    /// Tests read how far receive auto-tuning took the connections freed so far.
    #[cfg(test)]
    pub(crate) largest_rx_capacity: usize,
}

impl Tcp {
    /// An engine with `config`, keyed by `isn_key` (RFC 6528: ISNs, timestamp offsets,
    /// ephemeral ports and hash placement all derive from it; use 16 random bytes).
    pub fn new(config: TcpConfig, isn_key: [u8; 16]) -> Tcp {
        let scratch = vec![0u8; usize::from(mss_for_mtu(config.mtu.max(65536), false))];
        Tcp {
            table: ConnTable::new(&isn_key, config.max_connections),
            tw: TimeWaitTable::new(&isn_key, config.max_time_wait, config.msl),
            hasher: KeyedState::new(&isn_key, 3),
            isn: IsnGenerator::new(isn_key),
            ports: EphemeralPorts::new(isn_key, EPHEMERAL.0..=EPHEMERAL.1),
            challenge: ChallengeLimiter::new(config.challenge_ack_limit),
            cookies: CookieJar::new(&isn_key),
            stats: TcpStats::default(),
            mem: MemBudget::new(config.mem),
            slots: Vec::new(),
            free: Vec::new(),
            listeners: Vec::new(),
            listen_map: HashMap::with_hasher(KeyedState::new(&isn_key, 4)),
            heap: BinaryHeap::new(),
            ready: VecDeque::new(),
            events: VecDeque::new(),
            pending_rst: VecDeque::new(),
            scratch,
            path_mtu: HashMap::with_hasher(KeyedState::new(&isn_key, 5)),
            v6_link_mtu: usize::MAX,
            last_now: Instant::ZERO,
            live: 0,
            gen_base: 0,
            next_shrink: Instant::ZERO,
            #[cfg(test)]
            next_iss: None,
            #[cfg(test)]
            largest_rx_capacity: 0,
            cfg: config,
        }
    }

    /// Lowers the MTU our MSS derives from to `mtu` (the interface's), never raising it.
    pub(crate) fn cap_mtu(&mut self, mtu: usize) {
        self.cfg.mtu = self.cfg.mtu.min(mtu);
    }

    /// Bursts of up to `max` payload bytes, unless the configuration chose a size.
    pub(crate) fn offer_gso(&mut self, max: u32) {
        if self.cfg.gso_max == 0 {
            self.cfg.gso_max = max;
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &TcpConfig {
        &self.cfg
    }

    /// Bytes of our data acknowledged so far, over all connections (cheaper than
    /// [`stats`](Self::stats) on the per-segment path, and for a runtime that looks
    /// every iteration whether this host's data is getting anywhere).
    pub fn bytes_acked(&self) -> u64 {
        self.stats.bytes_acked
    }

    /// Payload bytes received in order so far, over all connections (as cheap as
    /// [`bytes_acked`](Self::bytes_acked)).
    pub fn bytes_received(&self) -> u64 {
        self.stats.bytes_received
    }

    /// Engine-wide counters, with the buffer memory in use now.
    pub fn stats(&self) -> TcpStats {
        let mut s = self.stats;
        s.mem_bytes = self.mem.used() as u64;
        s.mem_peak_bytes = self.mem.peak() as u64;
        s.mem_pressure = self.mem.under_pressure();
        s
    }

    /// Connections held (every state but TIME-WAIT records).
    pub fn connection_count(&self) -> usize {
        self.live
    }

    /// TIME-WAIT records held.
    pub fn time_wait_count(&self) -> usize {
        self.tw.len()
    }

    // ---------------------------------------------------------------- ingress

    /// Handles an arriving segment from `src` to `dst` (addresses and TCP checksum
    /// already validated by the IP layer). Replies that answer this segment (RST,
    /// challenge ACK, ACK to an unacceptable segment) are passed to `out` as
    /// `(src, dst, segment)`; everything else goes out on the next [`Tcp::dispatch`].
    pub fn process(
        &mut self,
        now: Instant,
        src: IpAddr,
        dst: IpAddr,
        seg: &TcpRepr<'_>,
        out: &mut dyn FnMut(IpAddr, IpAddr, &TcpRepr<'_>),
    ) {
        self.process_ip(now, src, dst, seg, &mut |s, d, _, r| out(s, d, r));
    }

    /// [`Tcp::process`] with the IP header fields each reply asks for (the replying
    /// connection's TOS and TTL, [`SocketOption::Tos`](super::SocketOption::Tos); a
    /// listener's for what it answers itself; the defaults for resets to no connection).
    pub fn process_ip(
        &mut self,
        now: Instant,
        src: IpAddr,
        dst: IpAddr,
        seg: &TcpRepr<'_>,
        out: &mut dyn FnMut(IpAddr, IpAddr, IpFields, &TcpRepr<'_>),
    ) {
        self.saw(now);
        self.stats.segs_in += 1;
        let f = seg.flags;
        if seg.src_port == 0
            || seg.dst_port == 0
            || src.is_ipv4() != dst.is_ipv4()
            || src.is_unspecified()
            || src.is_multicast()
            || dst.is_multicast()
            || (f.contains(TcpFlags::SYN) && f.intersects(TcpFlags::RST | TcpFlags::FIN))
        {
            self.stats.dropped_malformed += 1;
            return;
        }
        let local = SocketAddr::new(dst, seg.dst_port);
        let remote = SocketAddr::new(src, seg.src_port);
        let tuple = FourTuple::new(local, remote);
        let mut min_isn = None;
        if let Some(idx) = self.table.get(&tuple) {
            let ip = self.slots[idx as usize]
                .sock
                .as_ref()
                .map_or(IpFields::default(), |s| s.ip_fields());
            let mut replies = 0u64;
            let mut reply = |r: &TcpRepr<'_>| {
                replies += 1;
                out(dst, src, ip, r);
            };
            let r = self.socket_input(idx, now, seg, &mut reply);
            self.stats.segs_out += replies;
            match r {
                None => return,
                Some(reopen) => min_isn = Some(reopen),
            }
        }
        if min_isn.is_none() {
            match self.tw.process(now, &tuple, seg) {
                None => {}
                Some(TwVerdict::Drop) => {
                    self.stats.dropped_rst += u64::from(f.contains(TcpFlags::RST));
                    self.stats.dropped_other += u64::from(!f.contains(TcpFlags::RST));
                    return;
                }
                Some(TwVerdict::Ack {
                    seq,
                    ack,
                    window,
                    tsecr,
                }) => {
                    let mut options = TcpOptions::none();
                    if let Some(tsecr) = tsecr {
                        let tsval = ts_clock(now, self.ts_offset(&tuple));
                        options.timestamp = Some(TcpTimestamp { tsval, tsecr });
                    }
                    let a = TcpRepr {
                        src_port: seg.dst_port,
                        dst_port: seg.src_port,
                        seq,
                        ack,
                        flags: TcpFlags::ACK,
                        window,
                        urgent: 0,
                        options,
                        payload: &[],
                        payload_rest: &[],
                    };
                    self.stats.segs_out += 1;
                    out(dst, src, IpFields::default(), &a);
                    return;
                }
                Some(TwVerdict::Reopen { min_isn: m }) => {
                    self.stats.time_wait_reused += 1;
                    min_isn = Some(m);
                }
            }
        }
        if let Some(li) = self.find_listener(local) {
            let ip = self.listener_ip_fields(li);
            self.listener_input(li, now, tuple, seg, min_isn, &mut |s, d, r| {
                out(s, d, ip, r)
            });
            return;
        }
        // RFC 9293 §3.10.7.1: no connection.
        if f.contains(TcpFlags::RST) {
            self.stats.dropped_rst += 1;
        } else {
            self.stats.resets_sent += 1;
            self.stats.segs_out += 1;
            out(dst, src, IpFields::default(), &rst_for(seg));
        }
    }

    /// The IP header fields listener `li` gives its connections (its `Tos` and
    /// `HopLimit` options), for what it sends itself: a cookie SYN-ACK, a reset.
    fn listener_ip_fields(&self, li: u32) -> IpFields {
        let mut ip = IpFields::default();
        let opts = self.listeners[li as usize]
            .listener
            .as_ref()
            .map_or(&[][..], |l| &l.options[..]);
        for o in opts {
            match *o {
                SocketOption::Tos(t) => ip.tos = t & !crate::ECN_MASK,
                SocketOption::HopLimit(h) => ip.hop_limit = h,
                _ => {}
            }
        }
        ip
    }

    /// Runs a segment through a connection. Returns `Some(min_isn)` when the segment is
    /// a SYN that legitimately reopens a connection in TIME-WAIT (RFC 6191): the caller
    /// hands it to the listener.
    fn socket_input(
        &mut self,
        idx: u32,
        now: Instant,
        seg: &TcpRepr<'_>,
        reply: &mut dyn FnMut(&TcpRepr<'_>),
    ) -> Option<SeqNumber> {
        let f = seg.flags;
        let slot = &mut self.slots[idx as usize];
        let sock = slot.sock.as_mut()?;
        if sock.state() == State::SynReceived
            && sock.passive()
            && f.contains(TcpFlags::ACK)
            && !f.intersects(TcpFlags::SYN | TcpFlags::RST)
        {
            let full = sock.origin().is_some_and(|o| {
                self.listeners
                    .get(o.index as usize)
                    .and_then(|l| l.listener.as_ref())
                    .is_some_and(Listener::accept_queue_full)
            });
            if full {
                self.stats.accept_queue_overflows += 1;
                return None;
            }
        }
        if sock.state() == State::TimeWait
            && f.contains(TcpFlags::SYN)
            && !f.intersects(TcpFlags::ACK | TcpFlags::RST)
        {
            if let Some(min) = sock.time_wait_reopen(seg) {
                sock.set_closed(None);
                self.stats.time_wait_reused += 1;
                self.settle(idx, now, None);
                return Some(min);
            }
        }
        let before = snapshot(sock);
        let mut cx = Cx {
            cfg: &self.cfg,
            stats: &mut self.stats,
            challenge: &mut self.challenge,
            mem: &mut self.mem,
        };
        let (acked, received) = (sock.counters.bytes_acked, sock.counters.bytes_received);
        input::input(sock, now, seg, &mut cx, reply);
        self.stats.bytes_acked += sock.counters.bytes_acked - acked;
        self.stats.bytes_received += sock.counters.bytes_received - received;
        self.settle(idx, now, Some(before));
        None
    }

    fn listener_input(
        &mut self,
        li: u32,
        now: Instant,
        tuple: FourTuple,
        seg: &TcpRepr<'_>,
        min_isn: Option<SeqNumber>,
        out: &mut dyn FnMut(IpAddr, IpAddr, &TcpRepr<'_>),
    ) {
        let f = seg.flags;
        let (src, dst) = (tuple.remote().ip(), tuple.local().ip());
        // RFC 9293 §3.10.7.2.
        if f.contains(TcpFlags::RST) {
            self.stats.dropped_rst += 1;
            return;
        }
        if f.contains(TcpFlags::ACK) {
            // RFC 4987 §3.6: while cookies may be out, an ACK for no connection may
            // return one.
            if !f.contains(TcpFlags::SYN)
                && self.cookie_mode(li, now)
                && self.cookie_ack(li, now, tuple, seg, out)
            {
                return;
            }
            self.stats.resets_sent += 1;
            self.stats.segs_out += 1;
            out(dst, src, &rst_for(seg));
            return;
        }
        if !f.contains(TcpFlags::SYN) {
            self.stats.dropped_other += 1;
            return;
        }
        let source_over = self.source_over_limit(li, src);
        let ls = &mut self.listeners[li as usize];
        let generation = ls.generation;
        let Some(l) = ls.listener.as_mut() else {
            return;
        };
        if l.accept_queue_full() {
            self.stats.accept_queue_overflows += 1;
            return;
        }
        if l.pending_full() {
            self.stats.listen_pending_refused += 1;
            return;
        }
        if source_over {
            // Refused before the handshake: no state, and the peer learns at once.
            self.stats.listen_source_refused += 1;
            self.stats.resets_sent += 1;
            self.stats.segs_out += 1;
            out(dst, src, &rst_for(seg));
            return;
        }
        if self.cfg.syn_cookies == SynCookies::Always {
            self.send_cookie(li, now, &tuple, seg, out);
            return;
        }
        if l.syn_count >= self.cfg.syn_queue_len {
            // RFC 4987: a full SYN queue is a flood; make room or go stateless.
            self.stats.syn_queue_overflows += 1;
            l.last_overflow = Some(now);
            if !self.evict_oldest_syn(li, now) {
                if self.cfg.syn_cookies != SynCookies::Never {
                    self.send_cookie(li, now, &tuple, seg, out);
                }
                return;
            }
        }
        if self.table.is_full() {
            self.stats.table_full += 1;
            return;
        }
        if self.mem.exhausted() {
            // Past the hard limit the stack refuses new connections rather than growing
            // (like Linux under `tcp_mem[2]`): the SYN is dropped and counted.
            self.stats.mem_refused += 1;
            return;
        }
        let mut iss = self.isn(&tuple, now);
        if let Some(m) = min_isn {
            // RFC 9293 §3.4.1 / RFC 6191: the new incarnation starts above the old one.
            if iss.diff(m) <= 0 {
                iss = m + 65535 + 2;
            }
        }
        let mut sock = self.new_socket_with_iss(tuple, iss, now);
        let listener = self.listeners[li as usize].listener.as_ref();
        for &o in listener.map_or(&[][..], |l| &l.options[..]) {
            // Before the SYN-ACK every option applies (the buffers are empty).
            let _ = sock.set_option(o, now, &mut self.mem);
        }
        sock.open_passive(
            now,
            seg,
            ListenerHandle {
                index: li,
                generation,
            },
        );
        let idx = self.insert_socket(sock);
        self.slots[idx as usize].in_syn_queue = true;
        if let Some(l) = self.listeners[li as usize].listener.as_mut() {
            l.syn_count += 1;
        }
        let h = self.handle_of(idx);
        self.note_syn_order(li, h);
        self.settle(idx, now, None);
    }

    fn find_listener(&self, local: SocketAddr) -> Option<u32> {
        if let Some(&i) = self.listen_map.get(&local) {
            return Some(i);
        }
        let any = match local {
            SocketAddr::V4(_) => IpAddr::V4(core::net::Ipv4Addr::UNSPECIFIED),
            SocketAddr::V6(_) => IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED),
        };
        if let Some(&i) = self.listen_map.get(&SocketAddr::new(any, local.port())) {
            return Some(i);
        }
        // Dual stack (RFC 3493 §3.7, Linux bindv6only=0): an IPv4 segment no IPv4
        // listener claims goes to a `[::]` listener on its port unless that one is
        // v6-only. The connection keeps its IPv4 addresses (Linux would show them
        // v4-mapped, ::ffff:a.b.c.d).
        if local.is_ipv4() {
            let any6 = SocketAddr::new(IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED), local.port());
            let i = *self.listen_map.get(&any6)?;
            let l = self.listeners.get(i as usize)?.listener.as_ref()?;
            return (!l.v6only).then_some(i);
        }
        None
    }

    // ---------------------------------------------------------------- egress

    /// Sends everything due now: queued RSTs, timer work (retransmissions, probes,
    /// delayed ACKs), new data, FINs and ACKs. Stops when `out` returns false (transmit
    /// ring full) or after a bounded amount of work; call again (see [`Tcp::poll_at`]).
    pub fn dispatch(
        &mut self,
        now: Instant,
        out: &mut dyn FnMut(IpAddr, IpAddr, &TcpRepr<'_>) -> bool,
    ) {
        self.dispatch_ip(now, &mut |s, d, _, r, _| out(s, d, r));
    }

    /// [`Tcp::dispatch`] with the IP header fields each segment asks for (its
    /// connection's TOS and TTL, [`SocketOption::Tos`](super::SocketOption::Tos); the
    /// defaults for queued resets), and the segment size of a burst: with
    /// [`TcpConfig::gso_max`] set, new data may come as one `TcpRepr` carrying several
    /// segments' payload, to be cut into segments of that many bytes (0: one segment).
    /// [`Tcp::dispatch`] is for layers without bursts (`gso_max` 0).
    pub fn dispatch_ip(
        &mut self,
        now: Instant,
        out: &mut dyn FnMut(IpAddr, IpAddr, IpFields, &TcpRepr<'_>, u16) -> bool,
    ) {
        self.saw(now);
        while let Some((src, dst, rst)) = self.pending_rst.front() {
            if !out(*src, *dst, IpFields::default(), rst, 0) {
                return;
            }
            self.stats.segs_out += 1;
            self.pending_rst.pop_front();
        }
        self.run_timers(now);
        self.tw.expire(now);
        if now >= self.next_shrink {
            // At most once a second: the check is cheap, a shrink is O(slots) and only
            // happens once structures fell below a quarter of their capacity, never on a
            // busy table.
            self.next_shrink = now + SHRINK_PERIOD;
            self.shrink();
        }

        let mut budget = PER_DISPATCH;
        let rounds = self.ready.len();
        for _ in 0..rounds {
            let Some(idx) = self.ready.pop_front() else {
                break;
            };
            let slot = &mut self.slots[idx as usize];
            slot.in_ready = false;
            let Some(sock) = slot.sock.as_mut() else {
                continue;
            };
            let (local, remote) = (sock.tuple().local().ip(), sock.tuple().remote().ip());
            let ip = sock.ip_fields();
            let before = snapshot(sock);
            let mut cx = Cx {
                cfg: &self.cfg,
                stats: &mut self.stats,
                challenge: &mut self.challenge,
                mem: &mut self.mem,
            };
            let mut sent = 0usize;
            let mut blocked = false;
            let mut more = false;
            loop {
                if sent >= PER_SOCKET_BURST || budget == 0 {
                    more = true;
                    break;
                }
                // A burst counts as the segments it is cut into, so the fairness and
                // work bounds stay in segments.
                let mut segs = 0usize;
                let mut emit = |r: &TcpRepr<'_>, segment_size: u16| {
                    let ok = out(local, remote, ip, r, segment_size);
                    if ok {
                        segs += match segment_size {
                            0 => 1,
                            n => r.payload.len().div_ceil(usize::from(n)).max(1),
                        };
                    }
                    ok
                };
                let step = output::output(sock, now, &mut cx, &mut self.scratch, &mut emit);
                match step {
                    Output::Sent => {
                        let n = segs.max(1);
                        sent += n;
                        budget = budget.saturating_sub(n);
                    }
                    Output::Idle => break,
                    Output::Blocked => {
                        blocked = true;
                        break;
                    }
                }
            }
            self.stats.segs_out += sent as u64;
            if blocked {
                self.ready.push_front(idx);
                self.slots[idx as usize].in_ready = true;
                self.settle(idx, now, Some(before));
                return;
            }
            if more {
                self.ready.push_back(idx);
                self.slots[idx as usize].in_ready = true;
            }
            self.settle_inner(idx, now, Some(before), false);
            if budget == 0 {
                return;
            }
        }
    }

    fn run_timers(&mut self, now: Instant) {
        while let Some(&Reverse((t, idx, generation))) = self.heap.peek() {
            if t > now {
                break;
            }
            self.heap.pop();
            let slot = &mut self.slots[idx as usize];
            if slot.generation != generation || slot.queued_deadline != Some(t) {
                continue;
            }
            slot.queued_deadline = None;
            let Some(sock) = slot.sock.as_mut() else {
                continue;
            };
            let before = snapshot(sock);
            let mut cx = Cx {
                cfg: &self.cfg,
                stats: &mut self.stats,
                challenge: &mut self.challenge,
                mem: &mut self.mem,
            };
            sock.on_timer(now, &mut cx);
            self.settle(idx, now, Some(before));
        }
        if self.heap.len() > 2 * self.live + 64 {
            self.compact_heap();
        }
    }

    /// Gives back the capacity a peak left behind (issue 13: after 20,000 connections
    /// close, RSS should return near where it started). Each structure that holds less
    /// than a quarter of its capacity shrinks to twice what it holds (amortised: a table
    /// that refills pays one regrowth): the connection slab (only its free slots past the
    /// last one in use: slot indices are handles), its free list, the connection table,
    /// the timer heap, the output and event queues, the listeners' queues, the TIME-WAIT
    /// table and the path MTU cache. `dispatch` calls it at most once a second; a
    /// runtime may call it before giving freed memory back to the system.
    pub fn shrink(&mut self) {
        let sparse = |len: usize, cap: usize| cap > MIN_SHRINK && len < cap / 4;
        if sparse(self.live, self.slots.capacity()) {
            // Slots past the last one in use (or waiting in the output queue) go.
            let keep = self
                .slots
                .iter()
                .rposition(|s| s.sock.is_some() || s.in_ready)
                .map_or(0, |i| i + 1);
            if keep < self.slots.len() {
                for s in &self.slots[keep..] {
                    // Freed slots' generations were moved on past every handle to them.
                    self.gen_base = self.gen_base.max(s.generation);
                }
                self.slots.truncate(keep);
                self.free.retain(|&i| (i as usize) < keep);
                // Entries naming a slot that is gone (stale by construction: no live
                // connection is there) leave the queues that index slots directly.
                for ls in &mut self.listeners {
                    if let Some(l) = ls.listener.as_mut() {
                        l.accept_queue.retain(|h| (h.index as usize) < keep);
                        l.syn_order.retain(|h| (h.index as usize) < keep);
                    }
                }
                self.compact_heap();
            }
            self.slots.shrink_to(2 * self.slots.len());
        }
        if self.heap.len() > 2 * self.live + 64 {
            // Stale entries of connections gone would keep the heap from looking sparse.
            self.compact_heap();
        }
        if sparse(self.free.len(), self.free.capacity()) {
            self.free.shrink_to(2 * self.free.len());
        }
        if sparse(self.heap.len(), self.heap.capacity()) {
            self.heap.shrink_to(2 * self.heap.len());
        }
        if sparse(self.ready.len(), self.ready.capacity()) {
            self.ready.shrink_to(2 * self.ready.len());
        }
        if sparse(self.events.len(), self.events.capacity()) {
            self.events.shrink_to(2 * self.events.len());
        }
        if sparse(self.pending_rst.len(), self.pending_rst.capacity()) {
            self.pending_rst.shrink_to(2 * self.pending_rst.len());
        }
        for ls in &mut self.listeners {
            if let Some(l) = ls.listener.as_mut() {
                if sparse(l.accept_queue.len(), l.accept_queue.capacity()) {
                    l.accept_queue.shrink_to(2 * l.accept_queue.len());
                }
                if sparse(l.syn_order.len(), l.syn_order.capacity()) {
                    l.syn_order.shrink_to(2 * l.syn_order.len());
                }
            }
        }
        if sparse(self.path_mtu.len(), self.path_mtu.capacity()) {
            self.path_mtu.shrink_to(2 * self.path_mtu.len());
        }
        self.table.shrink();
        self.tw.shrink();
    }

    /// Capacity of the connection slab (tests of the shrinking).
    #[cfg(test)]
    pub(crate) fn slab_capacity(&self) -> (usize, usize) {
        (self.slots.capacity(), self.table.capacity())
    }

    /// Rebuilds the timer heap from the connections (drops stale entries).
    fn compact_heap(&mut self) {
        self.heap.clear();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            slot.queued_deadline = None;
            if let Some(d) = slot.sock.as_ref().and_then(|s| s.next_deadline()) {
                self.heap.push(Reverse((d, i as u32, slot.generation)));
                slot.queued_deadline = Some(d);
            }
        }
    }

    /// Whether segments wait to be sent now (data, an ACK or window update, a reset):
    /// what [`Tcp::poll_at`] answers with "now", without looking at the timers.
    pub fn output_pending(&self) -> bool {
        !self.ready.is_empty() || !self.pending_rst.is_empty()
    }

    /// When to call [`Tcp::dispatch`] next: the earliest timer, or the last instant seen
    /// when output is already pending. `None` when there is nothing to do.
    pub fn poll_at(&self) -> Option<Instant> {
        if self.output_pending() {
            return Some(self.last_now);
        }
        let heap = self.heap.peek().map(|r| r.0 .0);
        match (heap, self.tw.poll_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    // ---------------------------------------------------------------- bookkeeping

    fn insert_socket(&mut self, sock: Box<Socket>) -> u32 {
        let tuple = sock.tuple();
        let idx = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize].sock = Some(sock);
                i
            }
            None => {
                self.slots.push(Slot {
                    generation: self.gen_base,
                    sock: Some(sock),
                    queued_deadline: None,
                    in_ready: false,
                    in_events: false,
                    in_table: false,
                    in_syn_queue: false,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let inserted = self.table.insert(tuple, idx);
        self.slots[idx as usize].in_table = inserted;
        self.live += 1;
        idx
    }

    fn free_slot(&mut self, idx: u32) {
        let slot = &mut self.slots[idx as usize];
        if let Some(sock) = slot.sock.take() {
            self.mem.release(sock.buffer_storage());
            #[cfg(test)]
            {
                self.largest_rx_capacity = self.largest_rx_capacity.max(sock.rx_capacity());
            }
            self.live -= 1;
        }
        slot.generation = slot.generation.wrapping_add(1);
        slot.queued_deadline = None;
        slot.in_events = false;
        slot.in_table = false;
        slot.in_syn_queue = false;
        self.free.push(idx);
    }

    fn handle_of(&self, idx: u32) -> SocketHandle {
        SocketHandle {
            index: idx,
            generation: self.slots[idx as usize].generation,
        }
    }

    /// After anything happened to connection `idx`: table and queue membership, state
    /// hand-offs (accept queue, TIME-WAIT record, freeing), timer and output scheduling,
    /// readiness events.
    pub(super) fn settle(&mut self, idx: u32, now: Instant, before: Option<Snapshot>) {
        self.settle_inner(idx, now, before, true);
    }

    /// `settle`, with `schedule_output` false after an output pass that found nothing to
    /// send (so an over-eager `wants_output` cannot spin the dispatcher).
    fn settle_inner(
        &mut self,
        idx: u32,
        now: Instant,
        before: Option<Snapshot>,
        schedule_output: bool,
    ) {
        let slot = &mut self.slots[idx as usize];
        let Some(sock) = slot.sock.as_mut() else {
            return;
        };
        let after = snapshot(sock);
        let changed = before != Some(after);
        let state = sock.state();

        if slot.in_syn_queue && (state == State::Closed || state != State::SynReceived) {
            slot.in_syn_queue = false;
            if let Some(o) = sock.origin() {
                if let Some(l) = self.listeners.get_mut(o.index as usize) {
                    if l.generation == o.generation {
                        if let Some(l) = l.listener.as_mut() {
                            l.syn_count = l.syn_count.saturating_sub(1);
                        }
                    }
                }
            }
            if state != State::Closed {
                // Handshake complete: into the accept queue (RFC 9293 §3.10.7.2 note).
                let handle = SocketHandle {
                    index: idx,
                    generation: slot.generation,
                };
                let origin = sock.origin();
                if let Some(o) = origin {
                    let ls = &mut self.listeners[o.index as usize];
                    if ls.generation == o.generation {
                        if let Some(l) = ls.listener.as_mut() {
                            l.accept_queue.push_back(handle);
                            if !ls.in_events {
                                ls.in_events = true;
                                self.events.push_back(Event::Listener(o));
                            }
                        }
                    }
                }
            }
        }

        let slot = &mut self.slots[idx as usize];
        let Some(sock) = slot.sock.as_mut() else {
            return;
        };
        match sock.state() {
            State::Closed => {
                // A closed connection the application still holds keeps only unread
                // data's storage.
                sock.release_storage(&mut self.mem, &self.cfg);
                if slot.in_table {
                    self.table.remove(&sock.tuple());
                    slot.in_table = false;
                }
                if !sock.user_visible() {
                    self.free_slot(idx);
                    return;
                }
            }
            State::TimeWait if sock.time_wait_compactable() => {
                let init = sock.time_wait_record();
                if slot.in_table {
                    self.table.remove(&init.tuple);
                }
                self.stats.time_wait_created += 1;
                if self.tw.insert(now, init) {
                    self.stats.time_wait_recycled += 1;
                }
                self.free_slot(idx);
                return;
            }
            State::TimeWait => {
                sock.release_storage(&mut self.mem, &self.cfg);
            }
            _ => {}
        }

        let slot = &mut self.slots[idx as usize];
        let Some(sock) = slot.sock.as_mut() else {
            return;
        };
        if let Some(d) = sock.next_deadline() {
            if slot.queued_deadline.is_none_or(|q| d < q) {
                self.heap.push(Reverse((d, idx, slot.generation)));
                slot.queued_deadline = Some(d);
            }
        }
        if schedule_output && !slot.in_ready && sock.wants_output() {
            slot.in_ready = true;
            self.ready.push_back(idx);
        }
        let visible = sock.user_visible();
        if changed && visible && !slot.in_events {
            slot.in_events = true;
            self.events.push_back(Event::Socket(SocketHandle {
                index: idx,
                generation: slot.generation,
            }));
        }
    }

    /// Records the latest instant a caller reported (segment arrival, dispatch or a user
    /// call); [`Tcp::poll_at`] answers it when output is pending. Never moves back.
    pub(super) fn saw(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
    }

    /// RFC 6528 ISN.
    pub(super) fn isn(&mut self, t: &FourTuple, now: Instant) -> SeqNumber {
        #[cfg(test)]
        if let Some(v) = self.next_iss.take() {
            return SeqNumber(v);
        }
        self.isn.generate(now, t.local(), t.remote())
    }

    /// Test hook: the next connection gets this ISS.
    #[cfg(test)]
    pub(crate) fn force_next_iss(&mut self, iss: u32) {
        self.next_iss = Some(iss);
    }

    /// RFC 7323 §7.1: a per-connection timestamp offset from a keyed hash.
    pub(super) fn ts_offset(&self, t: &FourTuple) -> u32 {
        self.hasher.hash(t) as u32
    }

    pub(super) fn mtu_for(&self, remote: IpAddr) -> usize {
        match self.path_mtu.get(&remote) {
            Some(&m) => m,
            None if remote.is_ipv6() => self.cfg.mtu.min(self.v6_link_mtu),
            None => self.cfg.mtu,
        }
    }

    /// The IPv6 link MTU, which a Router Advertisement's MTU option may set below the
    /// interface's (RFC 4861 §6.3.4): new IPv6 connections derive their MSS from it, as
    /// from a path MTU (RFC 8201 §5.1 keeps it as the ceiling of every path MTU).
    pub(crate) fn set_v6_link_mtu(&mut self, mtu: usize) {
        self.v6_link_mtu = mtu;
    }

    /// Sets the path MTU towards `remote` (IP header included): new connections derive
    /// their MSS from it, and live connections to `remote` never send larger segments.
    pub fn set_path_mtu(&mut self, remote: IpAddr, mtu: usize) {
        if self.path_mtu.len() >= MAX_PATH_MTUS && !self.path_mtu.contains_key(&remote) {
            self.path_mtu.clear();
        }
        self.path_mtu.insert(remote, mtu);
        let mss = mss_for_mtu(mtu, remote.is_ipv6());
        for slot in &mut self.slots {
            if let Some(s) = slot.sock.as_mut() {
                if s.tuple().remote().ip() == remote {
                    s.clamp_mss(mss);
                }
            }
        }
    }
}
