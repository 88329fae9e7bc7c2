//! The plain driver: one [`Interface`] over one [`Channel`], one iteration at a time,
//! with `now` passed in. No thread, no lock, no sleep, no clock: whoever holds a
//! [`Driver`] decides when to call it and what time it is (the monotonic clock in
//! [`Runtime`](super::Runtime), virtual time in the simulator and the tests).
//!
//! One iteration ([`Driver::poll`]) is four phases, each public so that a harness
//! driving several interfaces in lock step (the simulator runs every node's ingress
//! before any node's application) can interleave them:
//!
//! 1. [`receive`](Driver::receive): a batch of received frames, each carried through
//!    [`Interface::ingress`] with the channel's transmit half as the sink, so answers
//!    (ACKs, ARP replies) are queued in the same batch (run to completion, seed 000);
//! 2. [`serve`](Driver::serve): the TCP layer's and the socket set's readiness events
//!    are drained and shown to the [`App`], which reacts and queues sends;
//! 3. [`transmit`](Driver::transmit): [`Interface::egress`] runs the timers and sends
//!    what the sockets queued;
//! 4. [`flush`](Driver::flush): one doorbell for everything the iteration queued.
//!
//! Invariants: no heap allocation per frame or per iteration once the event buffers
//! have grown (`tests/no_alloc_runtime.rs` counts); the channel is called through its
//! concrete type, the only dynamic dispatch per frame is the [`Tx`] the channel lends
//! (as before the driver existed); the events an app sees were drained by the driver,
//! never by the app itself.
//!
//! Why here and not in `stack`: the driver joins the engine to a [`Channel`], and the
//! engine (`no_std`, no I/O) must not know channels; `channel` must not know the engine.
//! `ulnet` is the lowest crate that sees both.

use std::io;

use ulnet_channel::{Channel, Tx, TxError};
use ulnet_stack::iface::{Gso, GsoSent, Interface, TxSink};
use ulnet_stack::socket::Event as SocketEvent;
use ulnet_stack::tcp::Event;
use ulnet_stack::time::Instant;

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

    /// True once the app is finished; [`Runtime::run`](super::Runtime::run) then returns.
    fn is_done(&self) -> bool {
        false
    }

    /// Whether something may wait for this app's events without turning the loop itself:
    /// a task woken through a stored waker, a program asleep in the kernel's `poll(2)`
    /// on a descriptor the app signals. The loop's own thread then spins after every
    /// send, as it does after data in, so an answer finds it awake. `true` unless the
    /// app knows better (the default is the safe side).
    fn waits_outside_calls(&self) -> bool {
        true
    }
}

/// An app that does nothing: the loop then only serves the stack (ARP, ping) and
/// whatever other threads queue through a [`Handle`](super::Handle).
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
    fn waits_outside_calls(&self) -> bool {
        self.0.waits_outside_calls() || self.1.waits_outside_calls()
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
    fn waits_outside_calls(&self) -> bool {
        self.iter().any(|a| a.waits_outside_calls())
    }
}

/// The transmit half as the stack's sink, counting what it accepted.
struct Sink<'a> {
    tx: &'a mut dyn Tx,
    sent: &'a mut u64,
}

impl TxSink for Sink<'_> {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        #[cfg(feature = "stage-cycles")]
        let ok = if ulnet_stack::stage::enabled() {
            use ulnet_stack::stage::{tx_mark, tx_submitted, Stage};
            // The channel's share: before the fill (a frame from the pool) and after it
            // (the descriptor on the ring).
            tx_mark(Stage::TxEthernet);
            let ok = self
                .tx
                .send(len, &mut |buf| {
                    tx_mark(Stage::TxChannel);
                    fill(buf);
                })
                .is_ok();
            if ok {
                tx_submitted();
            }
            ok
        } else {
            self.tx.send(len, fill).is_ok()
        };
        #[cfg(not(feature = "stage-cycles"))]
        let ok = self.tx.send(len, fill).is_ok();
        *self.sent += u64::from(ok);
        ok
    }

    fn send_gso(&mut self, len: usize, gso: Gso, fill: &mut dyn FnMut(&mut [u8])) -> GsoSent {
        let gso = channel_gso(gso);
        sent(self.sent, self.tx.send_gso(len, gso, fill))
    }

    fn send_gso_parts(&mut self, head: &[u8], payload: &[u8], gso: Gso) -> GsoSent {
        let gso = channel_gso(gso);
        sent(self.sent, self.tx.send_gso_parts(head, payload, gso))
    }
}

/// The stack's burst description as the channel's.
fn channel_gso(gso: Gso) -> ulnet_channel::Gso {
    ulnet_channel::Gso {
        segment_size: gso.segment_size,
        l4_offset: gso.l4_offset,
        header_len: gso.header_len,
        ipv6: gso.ipv6,
    }
}

/// A channel's answer to a burst as the stack's, counting it when queued.
fn sent(count: &mut u64, r: Result<(), TxError>) -> GsoSent {
    match r {
        Ok(()) => {
            *count += 1;
            GsoSent::Sent
        }
        Err(TxError::Full) => GsoSent::Full,
        Err(_) => GsoSent::Unsupported,
    }
}

/// What one [`Driver::flush`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flushed {
    /// Frames the stack queued on the channel since the previous flush.
    pub sent: u64,
    /// Whether the channel's transmit half was flushed (at most once per call).
    pub flushed: bool,
}

/// What one [`Driver::poll`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Iteration {
    /// Frames received and carried through the stack.
    pub received: usize,
    /// Frames the stack queued on the channel (received answers, app sends, timers).
    pub sent: u64,
    /// Whether the app was shown any event.
    pub events: bool,
    /// Whether the transmit half was flushed.
    pub flushed: bool,
}

/// One interface's I/O over one channel, one iteration at a time, in the caller's time
/// (module docs). The interface is lent to every call rather than owned, so a caller
/// may keep it behind a lock (the [`Runtime`](super::Runtime)) or beside the driver.
///
/// Two interfaces on the simulated wire, pinging in virtual time:
///
/// ```
/// use ulnet::runtime::Driver;
/// use ulnet_channel::sim::{LinkConfig, Wire};
/// use ulnet_stack::iface::{Interface, InterfaceConfig, IpCidr};
/// use ulnet_stack::socket::IcmpSocket;
/// use ulnet_stack::time::Instant;
/// use ulnet_wire::EthernetAddress;
///
/// let config = |last: u8| {
///     InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, last]))
///         .address(IpCidr::new([198, 18, 0, last].into(), 24).unwrap())
/// };
/// let (wire, ea, eb) = Wire::pair(7, LinkConfig::new(), LinkConfig::new());
/// let mut nodes = [
///     (Interface::new(config(1))?, Driver::new(ea)),
///     (Interface::new(config(2))?, Driver::new(eb)),
/// ];
/// let ping = nodes[0].0.sockets_mut().add_icmp(IcmpSocket::new(1, 4, 1024))?;
/// nodes[0].0.sockets_mut().icmp_mut(ping)?.send_echo([198, 18, 0, 2].into(), 1, b"hi")?;
///
/// for _ in 0..1000 {
///     let now = Instant::from_micros(wire.now_micros());
///     for (iface, driver) in nodes.iter_mut() {
///         driver.poll(now, iface, &mut ())?;
///     }
///     if nodes[0].0.sockets().icmp(ping)?.can_recv() {
///         break;
///     }
///     // Jump to whatever happens next: a frame arriving or a stack timer.
///     let next = nodes.iter().filter_map(|(i, _)| i.poll_at())
///         .map(|t| t.total_micros())
///         .chain(wire.next_event_micros())
///         .min();
///     match next {
///         Some(t) => wire.advance_to_micros(t.max(wire.now_micros())),
///         None => break,
///     }
/// }
/// let reply = nodes[0].0.sockets_mut().icmp_mut(ping)?.recv_reply(&mut [0; 64])?;
/// assert_eq!(reply.seq_no, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Driver<C> {
    channel: C,
    batch_count: usize,
    /// Frames queued on the channel since the last flush.
    queued: u64,
    /// Frames may still be in the transmit ring from the last flush: flush once more.
    flush_debt: bool,
    /// TCP events for the app (reused: no allocation once it has grown).
    events: Vec<Event>,
    /// UDP and ICMP events for the app (at most one per socket; reused likewise).
    socket_events: Vec<SocketEvent>,
}

impl<C: Channel> Driver<C> {
    /// A driver over `channel`, taking batches of the channel's
    /// [`batch_count`](ulnet_channel::Capabilities::batch_count).
    pub fn new(channel: C) -> Self {
        let batch_count = channel.capabilities().batch_count.max(1);
        Driver {
            channel,
            batch_count,
            queued: 0,
            flush_debt: false,
            events: Vec::with_capacity(256),
            socket_events: Vec::with_capacity(128),
        }
    }

    /// The channel.
    pub fn channel(&self) -> &C {
        &self.channel
    }

    /// The channel, mutably (frames sent through it directly are not counted).
    pub fn channel_mut(&mut self) -> &mut C {
        &mut self.channel
    }

    /// Unwraps into the channel.
    pub fn into_channel(self) -> C {
        self.channel
    }

    /// The most frames one [`receive`](Self::receive) takes.
    pub fn batch_count(&self) -> usize {
        self.batch_count
    }

    /// Sets the most frames one [`receive`](Self::receive) takes (at least one).
    pub fn set_batch_count(&mut self, count: usize) {
        self.batch_count = count.max(1);
    }

    /// One iteration at `now`: a batch in, the app, egress, one flush; the events
    /// egress raised (timers) are kept for the next iteration's app.
    ///
    /// # Errors
    /// A channel system call failed.
    pub fn poll(
        &mut self,
        now: Instant,
        iface: &mut Interface,
        app: &mut dyn App,
    ) -> io::Result<Iteration> {
        let received = self.receive(now, iface)?;
        let events = self.serve(now, iface, app);
        self.transmit(now, iface);
        self.drain_events(iface);
        let f = self.flush()?;
        Ok(Iteration {
            received,
            sent: f.sent,
            events,
            flushed: f.flushed,
        })
    }

    /// Phase 1: up to [`batch_count`](Self::batch_count) received frames through
    /// [`Interface::ingress`]; answers are queued on the channel. Returns how many
    /// frames were received.
    ///
    /// # Errors
    /// The channel's receive failed.
    pub fn receive(&mut self, now: Instant, iface: &mut Interface) -> io::Result<usize> {
        let sent = &mut self.queued;
        crate::stage::rx_poll();
        let received = self
            .channel
            .rx_batch_parts(self.batch_count, &mut |frame, rest, tx| {
                crate::stage::rx_frame();
                iface.ingress_parts(
                    now,
                    frame,
                    rest,
                    &mut Sink {
                        tx,
                        sent: &mut *sent,
                    },
                );
                crate::stage::rx_frame_done();
            })?;
        Ok(received)
    }

    /// Phase 2: drains the pending readiness events (with those kept from the last
    /// [`drain_events`](Self::drain_events)) and shows them to `app`, then lets it
    /// poll. Returns whether there were any events.
    pub fn serve(&mut self, now: Instant, iface: &mut Interface, app: &mut dyn App) -> bool {
        self.drain_events(iface);
        let any = self.has_events();
        app.socket_events(iface, &self.socket_events);
        app.poll(now, iface, &self.events);
        self.events.clear();
        self.socket_events.clear();
        any
    }

    /// Phase 3: [`Interface::egress`]: timers, and what the sockets queued.
    pub fn transmit(&mut self, now: Instant, iface: &mut Interface) {
        iface.egress(
            now,
            &mut Sink {
                tx: self.channel.tx(),
                sent: &mut self.queued,
            },
        );
    }

    /// Moves the TCP layer's and the socket set's pending readiness events into the
    /// driver, for the next [`serve`](Self::serve). After [`transmit`](Self::transmit):
    /// timers may have changed sockets (an RTO gave up) and egress freed room in UDP
    /// and ICMP sockets (writable events); the app hears it next iteration, and a loop
    /// that sees [`has_events`](Self::has_events) does not sleep before that.
    pub fn drain_events(&mut self, iface: &mut Interface) {
        // The looks first: a busy-polling loop comes here twice an iteration, mostly to
        // find nothing.
        if let Some(tcp) = iface.tcp_mut().filter(|t| t.has_events()) {
            while let Some(e) = tcp.poll_event() {
                self.events.push(e);
            }
        }
        if iface.sockets().has_events() {
            while let Some(e) = iface.sockets_mut().poll_event() {
                self.socket_events.push(e);
            }
        }
    }

    /// Whether nothing is left for the next iteration: no frame queued since the last
    /// flush, no flush owed, no event waiting.
    pub fn settled(&self) -> bool {
        self.queued == 0 && !self.flush_debt && !self.has_events()
    }

    /// Whether events are waiting for the next [`serve`](Self::serve).
    pub fn has_events(&self) -> bool {
        !self.events.is_empty() || !self.socket_events.is_empty()
    }

    /// Phase 4: flushes the transmit half once if anything was queued since the last
    /// flush, or if the last flush queued frames (copy-mode AF_XDP completes
    /// asynchronously: one more flush reclaims their buffers).
    ///
    /// # Errors
    /// The channel's flush failed.
    pub fn flush(&mut self) -> io::Result<Flushed> {
        let sent = std::mem::take(&mut self.queued);
        if sent == 0 && !self.flush_debt {
            return Ok(Flushed {
                sent,
                flushed: false,
            });
        }
        let bell = crate::stage::tx_flush_start();
        self.channel.tx().flush()?;
        crate::stage::tx_flushed(bell, sent);
        self.flush_debt = sent > 0;
        Ok(Flushed {
            sent,
            flushed: true,
        })
    }

    /// Forgets the extra flush owed after the last one: [`Channel::prepare_wait`]
    /// reclaims the completions before the loop sleeps.
    pub fn forgive_flush_debt(&mut self) {
        self.flush_debt = false;
    }
}
