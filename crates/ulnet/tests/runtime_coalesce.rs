//! Receive coalescing in a sleeping loop (`Runtime::set_coalesce`, issue 11): a loop
//! that only receives a TCP stream sleeps a short time between batches instead of
//! chasing each frame; a loop in a request/response exchange never does (its latency
//! is the spin's), nor one receiving datagrams (a UDP socket's queue has no flow
//! control to absorb a batch). Two real-time runtimes joined by the in-memory pipe;
//! every datagram and byte is counted, so a coalescing sleep that lost a wake-up would
//! fail the test by its timeout, not pass it.
//!
//! Deterministic however the threads are scheduled: a TCP stream of 32 segments or more
//! with nothing of ours acknowledged always ends with the receiver inside its spin time
//! with an empty channel, which is where it coalesces; a ping-pong resets the count
//! every round, and so does every datagram delivered.

use std::net::SocketAddr;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use ulnet::channel::pipe::{self, PipeChannel};
use ulnet::channel::Channel as _;
use ulnet::runtime::{App, Clock, Runtime, WaitMode, COALESCE_AFTER};
use ulnet::stack::iface::{Interface, InterfaceConfig, IpCidr};
use ulnet::stack::socket::{UdpConfig, UdpHandle, UdpSocket};
use ulnet::stack::tcp::{Event, Tcp, TcpConfig};
use ulnet::stack::time::{Duration, Instant};
use ulnet::wire::EthernetAddress;
use ulnet_apps::bulk::BulkClient;
use ulnet_apps::discard::Discard;
use ulnet_apps::echo::Echo;

/// The longest any test's exchange may take before it fails.
const LIMIT: StdDuration = StdDuration::from_secs(30);

/// Host `last` of 198.18.0.0/24, knowing its peer's MAC: with ARP, datagrams sent
/// before the reply came back would wait in the neighbour's pending queue (8 frames)
/// and the rest be dropped, however fast the reply.
fn iface(last: u8, peer: u8) -> Interface {
    let mac = |n: u8| EthernetAddress([2, 0, 0, 0, 0, n]);
    let cfg = InterfaceConfig::new(mac(last))
        .address(IpCidr::new([198, 18, 0, last].into(), 24).unwrap());
    let mut i = Interface::new(cfg).unwrap();
    i.set_tcp(Tcp::new(TcpConfig::default(), [last; 16]));
    i.add_static_neighbor([198, 18, 0, peer].into(), mac(peer))
        .unwrap();
    i
}

fn runtimes() -> (Runtime<PipeChannel>, Runtime<PipeChannel>) {
    let (a, b) = pipe::pair().unwrap();
    let a = Runtime::new(a, iface(1, 2), WaitMode::Sleep, Clock::monotonic()).unwrap();
    let b = Runtime::new(b, iface(2, 1), WaitMode::Sleep, Clock::monotonic()).unwrap();
    (a, b)
}

fn udp(iface: &mut Interface, at: &str) -> UdpHandle {
    let mut s = UdpSocket::new(UdpConfig::default());
    s.bind(at.parse().unwrap()).unwrap();
    iface.sockets_mut().add_udp(s).unwrap()
}

/// Sends `total` datagrams to `to`, `burst` at a time every `every`.
struct Streamer {
    socket: UdpHandle,
    to: SocketAddr,
    total: u64,
    sent: u64,
    burst: u64,
    every: Duration,
    next: Instant,
}

impl App for Streamer {
    fn poll(&mut self, now: Instant, iface: &mut Interface, _events: &[Event]) {
        if now < self.next || self.sent == self.total {
            return;
        }
        self.next = now + self.every;
        let s = iface.sockets_mut().udp_mut(self.socket).unwrap();
        for _ in 0..self.burst.min(self.total - self.sent) {
            if s.send_to(&self.sent.to_be_bytes(), self.to).is_err() {
                break;
            }
            self.sent += 1;
        }
    }
    fn poll_at(&self) -> Option<Instant> {
        (self.sent < self.total).then_some(self.next)
    }
    fn is_done(&self) -> bool {
        self.sent == self.total
    }
}

/// A discard server that is done once it has counted `datagrams` or, over TCP,
/// `tcp_bytes` from finished connections, or the limit passed.
struct Sink {
    discard: Discard,
    datagrams: u64,
    tcp_bytes: u64,
    until: StdInstant,
}

impl App for Sink {
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        self.discard.poll(now, iface, events);
    }
    fn poll_at(&self) -> Option<Instant> {
        self.discard.poll_at()
    }
    fn is_done(&self) -> bool {
        let s = self.discard.stats();
        (self.datagrams > 0 && s.udp_datagrams >= self.datagrams)
            || (self.tcp_bytes > 0 && s.tcp_bytes >= self.tcp_bytes)
            || StdInstant::now() > self.until
    }
}

/// Keeps one datagram in flight to an echo server, `total` times.
struct Pinger {
    socket: UdpHandle,
    server: SocketAddr,
    outstanding: bool,
    replies: u64,
    total: u64,
    until: StdInstant,
}

impl App for Pinger {
    fn poll(&mut self, _now: Instant, iface: &mut Interface, _events: &[Event]) {
        let s = iface.sockets_mut().udp_mut(self.socket).unwrap();
        let mut buf = [0u8; 64];
        while s.recv_from(&mut buf).is_ok() {
            self.replies += 1;
            self.outstanding = false;
        }
        if !self.outstanding
            && self.replies < self.total
            && s.send_to(&[7; 64], self.server).is_ok()
        {
            self.outstanding = true;
        }
    }
    fn is_done(&self) -> bool {
        self.replies >= self.total || StdInstant::now() > self.until
    }
}

#[test]
fn a_udp_stream_is_never_coalesced_and_arrives_whole() {
    let (a, b) = runtimes();
    let sink_at: SocketAddr = "198.18.0.1:9".parse().unwrap();
    const N: u64 = 4000;
    let sink = Sink {
        discard: Discard::new(&mut a.iface(), sink_at).unwrap(),
        datagrams: N,
        tcp_bytes: 0,
        until: StdInstant::now() + LIMIT,
    };
    let streamer = Streamer {
        socket: udp(&mut b.iface(), "198.18.0.2:5000"),
        to: sink_at,
        total: N,
        sent: 0,
        burst: 8,
        every: Duration::from_micros(20),
        next: Instant::ZERO,
    };
    let ta = a.spawn(sink).unwrap();
    let tb = b.spawn(streamer).unwrap();
    let (b, _) = tb.join().unwrap().unwrap();
    let (a, sink) = ta.join().unwrap().unwrap();
    assert_eq!(sink.discard.stats().udp_datagrams, N, "datagrams lost");
    assert_eq!(b.channel().stats().tx_dropped, 0);
    let st = a.stats();
    assert_eq!(
        st.coalesced_sleeps, 0,
        "a datagram stream was coalesced: {st:?}"
    );
}

#[test]
fn a_tcp_stream_is_received_in_coalesced_batches_and_whole() {
    let (a, b) = runtimes();
    let sink_at: SocketAddr = "198.18.0.1:9".parse().unwrap();
    const BYTES: u64 = 4 << 20;
    let sink = Sink {
        discard: Discard::new(&mut a.iface(), sink_at).unwrap(),
        datagrams: 0,
        tcp_bytes: BYTES,
        until: StdInstant::now() + LIMIT,
    };
    let now = b.now();
    let bulk = BulkClient::connect(
        &mut b.iface(),
        now,
        "198.18.0.2:0".parse().unwrap(),
        sink_at,
        BYTES,
        Duration::from_secs(30),
    )
    .unwrap();
    let ta = a.spawn(sink).unwrap();
    let tb = b.spawn(bulk).unwrap();
    let (a, sink) = ta.join().unwrap().unwrap();
    let (_b, bulk) = tb.join().unwrap().unwrap();
    assert!(!bulk.result().failed);
    let s = sink.discard.stats();
    assert_eq!(s.tcp_bytes, BYTES);
    assert_eq!(
        s.tcp_pattern_ok, 1,
        "the stream's bytes were not the pattern"
    );
    let st = a.stats();
    assert!(
        st.coalesced_sleeps > 0,
        "a {BYTES}-byte stream was never coalesced: {st:?}"
    );
}

#[test]
fn a_ping_pong_is_never_coalesced() {
    let (a, b) = runtimes();
    let echo_at: SocketAddr = "198.18.0.1:7".parse().unwrap();
    let echo = Echo::new(&mut a.iface(), echo_at).unwrap();
    // Far more rounds than a stream needs to be coalesced.
    let total = 20 * COALESCE_AFTER as u64;
    let pinger = Pinger {
        socket: udp(&mut b.iface(), "198.18.0.2:5000"),
        server: echo_at,
        outstanding: false,
        replies: 0,
        total,
        until: StdInstant::now() + LIMIT,
    };
    let handle = a.handle();
    let ta = a.spawn(echo).unwrap();
    let (_b, pinger) = b.spawn(pinger).unwrap().join().unwrap().unwrap();
    handle.stop();
    let (a, echo) = ta.join().unwrap().unwrap();
    assert_eq!(pinger.replies, total);
    assert_eq!(echo.udp_stats().echoed, total);
    let st = a.stats();
    assert_eq!(
        st.coalesced_sleeps, 0,
        "the echo server delayed a request/response exchange: {st:?}"
    );
}
