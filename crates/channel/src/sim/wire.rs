//! The simulated wire: a virtual clock, the endpoints, the links between them and the
//! frames in flight.
//!
//! Frames in flight wait in one min-heap per receiving endpoint, ordered by delivery
//! time and then by a wire-wide sequence number, so equal delivery times resolve in
//! transmission order and every run with the same seed and traffic is identical.
//! Buffers are recycled through a bounded free list; in-flight memory is bounded by
//! each link's in-flight limit.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::rc::Rc;
use std::time::Duration;

use super::config::LinkConfig;
use super::endpoint::Endpoint;
use super::link::{duration_ns, Delivery, Link, LinkStats};

/// The default MTU of a simulated wire (Ethernet, RFC 894).
pub const DEFAULT_MTU: usize = 1500;
/// The default number of frames one `rx_batch` hands out at most.
pub const DEFAULT_BATCH_COUNT: usize = 64;
/// The default number of frames an endpoint queues between two `flush` calls.
pub const DEFAULT_TX_QUEUE_COUNT: usize = 4096;
/// The Ethernet header length the MTU excludes (IEEE 802.3 §3.1.1, without FCS).
const ETHERNET_HEADER_LEN: usize = 14;
/// Spare buffers kept for reuse; more are freed, so a burst does not pin memory.
const POOL_LIMIT: usize = 4096;

/// A frame copy on its way to one endpoint.
#[derive(Debug)]
struct InFlight {
    at_ns: u64,
    seq: u64,
    from: usize,
    link_seq: u64,
    buf: Vec<u8>,
}

impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for InFlight {}

impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for InFlight {
    /// Reversed, so `BinaryHeap` (a max-heap) pops the earliest delivery first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at_ns, other.seq).cmp(&(self.at_ns, self.seq))
    }
}

/// One endpoint's receive side.
#[derive(Debug, Default)]
struct Port {
    rx: BinaryHeap<InFlight>,
    open: bool,
}

/// The state every handle to a wire shares.
#[derive(Debug)]
pub(crate) struct Shared {
    seed: u64,
    now_ns: u64,
    next_seq: u64,
    mtu: usize,
    batch_count: usize,
    tx_queue_count: usize,
    default_link: LinkConfig,
    ports: Vec<Port>,
    /// `links[from][to]`; the diagonal exists but is never used.
    links: Vec<Vec<Link>>,
    pool: Vec<Vec<u8>>,
    /// Reused between transmissions: the copies one frame turns into.
    scratch: Vec<(usize, Delivery)>,
}

impl Shared {
    pub(crate) fn max_frame_len(&self) -> usize {
        self.mtu + ETHERNET_HEADER_LEN
    }

    pub(crate) fn mtu(&self) -> usize {
        self.mtu
    }

    pub(crate) fn batch_count(&self) -> usize {
        self.batch_count
    }

    pub(crate) fn tx_queue_count(&self) -> usize {
        self.tx_queue_count
    }

    pub(crate) fn port_count(&self) -> usize {
        self.ports.len()
    }

    pub(crate) fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// A cleared buffer, from the free list when one is there.
    pub(crate) fn take_buf(&mut self) -> Vec<u8> {
        let cap = self.max_frame_len();
        self.pool.pop().unwrap_or_else(|| Vec::with_capacity(cap))
    }

    /// Returns a buffer to the free list (or frees it if the list is full).
    pub(crate) fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.pool.len() < POOL_LIMIT {
            buf.clear();
            self.pool.push(buf);
        }
    }

    /// Frames that links into `port` dropped because they were full: the closest thing
    /// the simulator has to a receive ring overflowing.
    pub(crate) fn rx_dropped(&self, port: usize) -> u64 {
        self.links
            .iter()
            .map(|row| row[port].stats().dropped_overflow)
            .sum()
    }

    /// Puts a frame sent by `from` now on the link to every other open endpoint.
    pub(crate) fn transmit(&mut self, from: usize, buf: Vec<u8>) {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        for to in 0..self.ports.len() {
            if to == from || !self.ports[to].open {
                continue;
            }
            let plan = self.links[from][to].plan(self.now_ns, buf.len());
            scratch.extend(plan.into_iter().flatten().map(|d| (to, d)));
        }
        let mut original = Some(buf);
        let last = scratch.len().checked_sub(1);
        for (i, &(to, d)) in scratch.iter().enumerate() {
            let mut copy = match original.take_if(|_| Some(i) == last) {
                Some(buf) => buf,
                None => {
                    let mut copy = self.take_buf();
                    copy.extend_from_slice(original.as_deref().unwrap_or_default());
                    copy
                }
            };
            if let Some(bit) = d.flip_bit {
                copy[bit / 8] ^= 1 << (bit % 8);
            }
            let seq = self.next_seq;
            self.next_seq += 1;
            let frame = InFlight {
                at_ns: d.at_ns,
                seq,
                from,
                link_seq: d.link_seq,
                buf: copy,
            };
            self.ports[to].rx.push(frame);
        }
        if let Some(buf) = original {
            self.recycle(buf);
        }
        self.scratch = scratch;
    }

    /// The next frame due at `port` (delivery time not after now), counted as delivered.
    pub(crate) fn pop_ready(&mut self, port: usize) -> Option<Vec<u8>> {
        let rx = &mut self.ports[port].rx;
        if rx.peek()?.at_ns > self.now_ns {
            return None;
        }
        let frame = rx.pop()?;
        self.links[frame.from][port].delivered(frame.link_seq, frame.buf.len());
        Some(frame.buf)
    }

    /// Adds an endpoint and links to and from every existing one; returns its id.
    fn add_port(&mut self) -> usize {
        let id = self.ports.len();
        for (from, row) in self.links.iter_mut().enumerate() {
            row.push(Link::new(self.seed, from, id, self.default_link.clone()));
        }
        let row = (0..=id).map(|to| Link::new(self.seed, id, to, self.default_link.clone()));
        self.links.push(row.collect());
        self.ports.push(Port {
            rx: BinaryHeap::new(),
            open: true,
        });
        id
    }

    /// Closes `port`: frames on their way to it are discarded and none are sent to it.
    pub(crate) fn close_port(&mut self, port: usize) {
        self.ports[port].open = false;
        let rx = std::mem::take(&mut self.ports[port].rx);
        for frame in rx {
            self.links[frame.from][port].discarded();
            self.recycle(frame.buf);
        }
    }

    /// The earliest delivery time among the frames on their way to `port`.
    pub(crate) fn next_arrival_ns(&self, port: usize) -> Option<u64> {
        self.ports[port].rx.peek().map(|f| f.at_ns)
    }

    fn next_event_ns(&self) -> Option<u64> {
        self.ports
            .iter()
            .filter_map(|p| p.rx.peek().map(|f| f.at_ns))
            .min()
    }

    fn link_mut(&mut self, from: usize, to: usize) -> &mut Link {
        let n = self.ports.len();
        assert!(
            from < n && to < n && from != to,
            "no simulated link from {from} to {to}"
        );
        &mut self.links[from][to]
    }
}

/// A simulated wire joining endpoints in virtual time; a cheap, cloneable handle.
///
/// Every frame an endpoint transmits reaches every other endpoint, each over its own
/// directed link with its own [`LinkConfig`] and counters: two endpoints make a
/// point-to-point cable, more make a hub (the receivers filter by MAC address, as
/// stacks on a hub do). Rate limits apply per directed link, so a hub behaves like a
/// switch that floods every port rather than one shared half-duplex medium.
///
/// Time stands still until the harness moves it. A harness drives the wire like this:
///
/// ```
/// use std::time::Duration;
/// use ulnet_channel::sim::{LinkConfig, Wire};
/// use ulnet_channel::Channel;
///
/// let cfg = LinkConfig::new().delay(Duration::from_millis(5));
/// let (wire, mut a, mut b) = Wire::pair(42, cfg.clone(), cfg);
/// a.tx().send(60, &mut |frame| frame.fill(0xff)).unwrap();
/// a.tx().flush().unwrap();
/// let mut got = 0;
/// while let Some(t) = wire.next_event() {
///     // A real harness takes the minimum of this and the stacks' deadlines.
///     wire.advance_to(t);
///     got += b.rx_batch(64, &mut |frame, _tx| assert_eq!(frame.len(), 60)).unwrap();
/// }
/// assert_eq!((got, wire.now()), (1, Duration::from_millis(5)));
/// ```
#[derive(Clone)]
pub struct Wire {
    shared: Rc<RefCell<Shared>>,
}

impl std::fmt::Debug for Wire {
    /// A summary: the frames in flight are left out (there may be thousands).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.shared.try_borrow() {
            Ok(shared) => f
                .debug_struct("Wire")
                .field("now_ns", &shared.now_ns)
                .field("endpoints", &shared.ports.len())
                .field(
                    "in_flight",
                    &shared.ports.iter().map(|p| p.rx.len()).sum::<usize>(),
                )
                .finish(),
            Err(_) => f.write_str("Wire { <in use> }"),
        }
    }
}

impl Wire {
    /// An empty wire at virtual time zero whose links draw their randomness from `seed`.
    /// Links default to a perfect wire; see [`Wire::set_default_link`].
    pub fn new(seed: u64) -> Wire {
        let shared = Shared {
            seed,
            now_ns: 0,
            next_seq: 0,
            mtu: DEFAULT_MTU,
            batch_count: DEFAULT_BATCH_COUNT,
            tx_queue_count: DEFAULT_TX_QUEUE_COUNT,
            default_link: LinkConfig::default(),
            ports: Vec::new(),
            links: Vec::new(),
            pool: Vec::new(),
            scratch: Vec::new(),
        };
        Wire {
            shared: Rc::new(RefCell::new(shared)),
        }
    }

    /// A point-to-point cable: endpoint 0 (`a`) and endpoint 1 (`b`), with `a_to_b` on
    /// the link from `a` to `b` and `b_to_a` on the way back.
    pub fn pair(seed: u64, a_to_b: LinkConfig, b_to_a: LinkConfig) -> (Wire, Endpoint, Endpoint) {
        let wire = Wire::new(seed);
        let a = wire.endpoint();
        let b = wire.endpoint();
        wire.set_link(a.id(), b.id(), a_to_b);
        wire.set_link(b.id(), a.id(), b_to_a);
        (wire, a, b)
    }

    /// A hub of `count` endpoints (ids `0..count`), every directed link set to `config`.
    pub fn hub(seed: u64, count: usize, config: LinkConfig) -> (Wire, Vec<Endpoint>) {
        let wire = Wire::new(seed);
        wire.set_default_link(config);
        let endpoints = (0..count).map(|_| wire.endpoint()).collect();
        (wire, endpoints)
    }

    pub(crate) fn from_shared(shared: Rc<RefCell<Shared>>) -> Wire {
        Wire { shared }
    }

    /// Attaches a new endpoint, linked to and from every endpoint already attached with
    /// the default link configuration. Ids count up from 0 in attachment order.
    pub fn endpoint(&self) -> Endpoint {
        let id = self.shared.borrow_mut().add_port();
        Endpoint::new(Rc::clone(&self.shared), id)
    }

    /// The configuration links created from now on get (default: a perfect wire).
    pub fn set_default_link(&self, config: LinkConfig) {
        self.shared.borrow_mut().default_link = config;
    }

    /// Configures the directed link from endpoint `from` to endpoint `to`. Frames already
    /// in flight keep their schedule.
    ///
    /// # Panics
    /// If either id is not an attached endpoint, or `from == to`.
    pub fn set_link(&self, from: usize, to: usize, config: LinkConfig) {
        self.shared
            .borrow_mut()
            .link_mut(from, to)
            .set_config(config);
    }

    /// Configures every existing directed link, and the default for future ones.
    pub fn set_all_links(&self, config: LinkConfig) {
        let mut shared = self.shared.borrow_mut();
        for row in &mut shared.links {
            for link in row {
                link.set_config(config.clone());
            }
        }
        shared.default_link = config;
    }

    /// The configuration of the directed link from `from` to `to`.
    ///
    /// # Panics
    /// If either id is not an attached endpoint, or `from == to`.
    pub fn link_config(&self, from: usize, to: usize) -> LinkConfig {
        self.shared.borrow_mut().link_mut(from, to).config().clone()
    }

    /// The counters of the directed link from `from` to `to`.
    ///
    /// # Panics
    /// If either id is not an attached endpoint, or `from == to`.
    pub fn link_stats(&self, from: usize, to: usize) -> LinkStats {
        self.shared.borrow_mut().link_mut(from, to).stats()
    }

    /// Frame copies on the directed link from `from` to `to` that have not been handed
    /// to the receiver yet.
    ///
    /// # Panics
    /// If either id is not an attached endpoint, or `from == to`.
    pub fn link_in_flight(&self, from: usize, to: usize) -> usize {
        self.shared.borrow_mut().link_mut(from, to).in_flight()
    }

    /// Frame copies on any link that have not been handed to their receiver yet.
    pub fn in_flight(&self) -> usize {
        self.shared.borrow().ports.iter().map(|p| p.rx.len()).sum()
    }

    /// How many endpoints have been attached (dropped ones included).
    pub fn endpoint_count(&self) -> usize {
        self.shared.borrow().ports.len()
    }

    /// Sets the MTU every endpoint reports and enforces (largest frame = `mtu` + 14).
    pub fn set_mtu(&self, mtu: usize) {
        self.shared.borrow_mut().mtu = mtu;
    }

    /// The MTU of this wire.
    pub fn mtu(&self) -> usize {
        self.shared.borrow().mtu
    }

    /// Sets how many frames one `rx_batch` call hands out at most (at least 1).
    pub fn set_batch_count(&self, count: usize) {
        self.shared.borrow_mut().batch_count = count.max(1);
    }

    /// Sets how many frames an endpoint queues between two flushes before `send` fails
    /// with [`TxError::Full`](crate::TxError::Full).
    pub fn set_tx_queue_count(&self, count: usize) {
        self.shared.borrow_mut().tx_queue_count = count;
    }

    /// The virtual time since the wire was created.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.now_nanos())
    }

    /// The virtual time in whole microseconds (rounded down), the unit of the stack's
    /// `Instant`.
    pub fn now_micros(&self) -> u64 {
        self.now_nanos() / 1000
    }

    /// The virtual time in nanoseconds, the wire's own resolution.
    pub fn now_nanos(&self) -> u64 {
        self.shared.borrow().now_ns
    }

    /// Moves virtual time forward to `t`; frames whose delivery time is not after `t`
    /// become receivable. Time never goes backwards: an earlier `t` changes nothing.
    pub fn advance_to(&self, t: Duration) {
        self.advance_to_nanos(duration_ns(t));
    }

    /// [`Wire::advance_to`] in microseconds.
    pub fn advance_to_micros(&self, micros: u64) {
        self.advance_to_nanos(micros.saturating_mul(1000));
    }

    /// [`Wire::advance_to`] in nanoseconds.
    pub fn advance_to_nanos(&self, nanos: u64) {
        let mut shared = self.shared.borrow_mut();
        shared.now_ns = shared.now_ns.max(nanos);
    }

    /// Moves virtual time forward by `d`.
    pub fn advance_by(&self, d: Duration) {
        let mut shared = self.shared.borrow_mut();
        shared.now_ns = shared.now_ns.saturating_add(duration_ns(d));
    }

    /// The earliest delivery time of any frame not yet handed to its receiver, or `None`
    /// if nothing is in flight. It may be at or before [`Wire::now`] when frames are
    /// waiting to be polled.
    pub fn next_event(&self) -> Option<Duration> {
        self.next_event_nanos().map(Duration::from_nanos)
    }

    /// [`Wire::next_event`] in microseconds, rounded UP so that advancing to it always
    /// makes the frame receivable (a harness on a microsecond clock never spins).
    pub fn next_event_micros(&self) -> Option<u64> {
        self.next_event_nanos().map(|ns| ns.div_ceil(1000))
    }

    /// [`Wire::next_event`] in nanoseconds.
    pub fn next_event_nanos(&self) -> Option<u64> {
        self.shared.borrow().next_event_ns()
    }
}
