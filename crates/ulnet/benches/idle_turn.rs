//! What one iteration of a busy-polling loop costs when nothing arrives and nothing is
//! due (issue 11, goal 4): the loop of a stack with an established TCP connection, its
//! peer's MAC learned by ARP, over the in-memory pipe. A driver spinning for a frame takes
//! such iterations back to back, so a frame that lands during one waits for the rest of
//! it, and every round trip of a busy-polled ping-pong crosses two full iterations on each
//! end (the one that takes the frame in, the one that sends the answer): their fixed cost
//! is paid on the critical path.

use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use criterion::{criterion_group, criterion_main, Criterion};
use ulnet::channel::pipe;
use ulnet::channel::sim::{Endpoint, LinkConfig, Wire};
use ulnet::runtime::{Clock, Runtime, WaitMode};
use ulnet::stack::iface::{Interface, InterfaceConfig, IpCidr};
use ulnet::stack::socket::{UdpConfig, UdpHandle, UdpSocket};
use ulnet::stack::tcp::{SocketHandle, SocketOption, State, Tcp, TcpConfig};
use ulnet::wire::EthernetAddress;

fn iface(last: u8) -> Interface {
    let cfg = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, last]))
        .address(IpCidr::new([198, 18, 0, last].into(), 24).unwrap());
    let mut i = Interface::new(cfg).unwrap();
    i.set_tcp(Tcp::new(TcpConfig::default(), [last; 16]));
    i
}

/// Connects `a` (198.18.0.1) to a listener on `b` (198.18.0.2:7), turning both loops and
/// calling `between` after each pair of turns: (the client's socket, the accepted one).
fn establish<C: ulnet::channel::Channel>(
    a: &mut Runtime<C>,
    b: &mut Runtime<C>,
    mut between: impl FnMut(),
) -> (SocketHandle, SocketHandle) {
    let server: SocketAddr = "198.18.0.2:7".parse().unwrap();
    let l = b.iface().tcp_mut().unwrap().listen(server, 8).unwrap();
    let now = a.now();
    let s = a
        .iface()
        .tcp_mut()
        .unwrap()
        .connect(now, "198.18.0.1:0".parse().unwrap(), server)
        .unwrap();
    let mut accepted = None;
    for _ in 0..10_000 {
        a.poll_once(&mut ()).unwrap();
        b.poll_once(&mut ()).unwrap();
        between();
        let now = b.now();
        if accepted.is_none() {
            accepted = b.iface().tcp_mut().unwrap().accept(now, l).unwrap();
        }
        if accepted.is_some() && a.iface().tcp().unwrap().state(s).unwrap() == State::Established {
            break;
        }
    }
    (s, accepted.expect("no connection"))
}

fn idle(c: &mut Criterion) {
    let (ea, eb) = pipe::pair().unwrap();
    let rt = |ch, last| Runtime::new(ch, iface(last), WaitMode::BusyPoll, Clock::monotonic());
    let (mut a, mut b) = (rt(ea, 1).unwrap(), rt(eb, 2).unwrap());
    establish(&mut a, &mut b, || {});
    c.bench_function("idle_turn/tcp_established", |bn| {
        bn.iter(|| black_box(a.poll_once(&mut ()).unwrap()));
    });
}

/// The simulated wire's two ends and a manual clock at 1 s, with the step that moves
/// both on by the given microseconds.
fn virtual_wire() -> (Endpoint, Endpoint, Clock, impl FnMut(u64)) {
    let (wire, ea, eb) = Wire::pair(5, LinkConfig::new(), LinkConfig::new());
    let (clock, time) = Clock::manual();
    let mut t_us = 1_000_000u64;
    let mut tick = move |d: u64| {
        t_us += d;
        wire.advance_to_micros(t_us);
        time.store(t_us, Ordering::Relaxed);
    };
    tick(0);
    (ea, eb, clock, tick)
}

/// A 64-byte TCP ping-pong between two loops on the simulated wire, on one thread, in
/// virtual time: per round trip, each end's turn that sends, the other's turn that takes
/// the segment in, and the reads and writes between (the engine, the interface, the
/// runtime's iteration; no socket API, no thread hand-off, no kernel, and a channel
/// that costs a copy). The wire with a manual clock: virtual time leaves out the clock
/// reads (the idle case above counts them) and the host's timing noise.
fn ping_pong(c: &mut Criterion) {
    let (ea, eb, clock, mut tick) = virtual_wire();
    let rt = |ch, last| Runtime::new(ch, iface(last), WaitMode::BusyPoll, clock.clone());
    let (mut a, mut b) = (rt(ea, 1).unwrap(), rt(eb, 2).unwrap());
    let (s, t) = establish(&mut a, &mut b, || tick(10));
    for (rt, h) in [(&mut a, s), (&mut b, t)] {
        let now = rt.now();
        rt.iface()
            .tcp_mut()
            .unwrap()
            .set_option(now, h, SocketOption::NoDelay(true))
            .unwrap();
    }
    let msg = [7u8; 64];
    let mut buf = [0u8; 64];
    // One end's step: write `msg` on `h`, turn (it leaves), the wire carries it (1 µs),
    // the other end turns (it arrives) and reads it.
    let mut hop = |from: &mut Runtime<Endpoint>, h: SocketHandle, to: &mut Runtime<Endpoint>, g| {
        let now = from.now();
        let n = from.iface().tcp_mut().unwrap().send(now, h, &msg).unwrap();
        assert_eq!(n, 64);
        from.poll_once(&mut ()).unwrap();
        tick(1);
        to.poll_once(&mut ()).unwrap();
        let now = to.now();
        let n = to
            .iface()
            .tcp_mut()
            .unwrap()
            .recv(now, g, &mut buf)
            .unwrap();
        assert_eq!(n, 64);
    };
    c.bench_function("turns/tcp_ping_pong_64", |bn| {
        bn.iter(|| {
            hop(&mut a, s, &mut b, t);
            hop(&mut b, t, &mut a, s);
        });
    });
}

/// The same exchange as `turns/tcp_ping_pong_64` with UDP datagrams between two bound
/// sockets (the peers' MACs set, as TCP's handshake would have learned them): what the
/// loop, the interface and the channel cost without TCP, so the difference between the
/// two is the TCP engine's share of a round trip.
fn udp_ping_pong(c: &mut Criterion) {
    let (ea, eb, clock, mut tick) = virtual_wire();
    let rt = |ch, last: u8, peer: u8| {
        let rt = Runtime::new(ch, iface(last), WaitMode::BusyPoll, clock.clone()).unwrap();
        let mut i = rt.iface();
        i.add_static_neighbor(
            [198, 18, 0, peer].into(),
            EthernetAddress([2, 0, 0, 0, 0, peer]),
        )
        .unwrap();
        let mut u = UdpSocket::new(UdpConfig::default());
        u.bind(SocketAddr::from(([198, 18, 0, last], 7))).unwrap();
        let h = i.sockets_mut().add_udp(u).unwrap();
        drop(i);
        (rt, h)
    };
    let ((mut a, s), (mut b, t)) = (rt(ea, 1, 2), rt(eb, 2, 1));
    // Each interface announces its address on its first turns (gratuitous ARP): out of
    // the way before the timed exchange, as TCP's handshake has them.
    for _ in 0..4 {
        a.poll_once(&mut ()).unwrap();
        b.poll_once(&mut ()).unwrap();
        tick(10);
    }
    let msg = [7u8; 64];
    let mut buf = [0u8; 64];
    // Both sets' first socket: the handles are equal, the peers are not.
    let (at_a, at_b) = (
        SocketAddr::from(([198, 18, 0, 1], 7)),
        SocketAddr::from(([198, 18, 0, 2], 7)),
    );
    let mut hop = |from: &mut Runtime<Endpoint>,
                   h: UdpHandle,
                   peer: SocketAddr,
                   to: &mut Runtime<Endpoint>,
                   g: UdpHandle| {
        from.iface()
            .sockets_mut()
            .udp_mut(h)
            .unwrap()
            .send_to(&msg, peer)
            .unwrap();
        from.poll_once(&mut ()).unwrap();
        tick(1);
        to.poll_once(&mut ()).unwrap();
        let (n, _) = to
            .iface()
            .sockets_mut()
            .udp_mut(g)
            .unwrap()
            .recv_from(&mut buf)
            .unwrap();
        assert_eq!(n, 64);
    };
    c.bench_function("turns/udp_ping_pong_64", |bn| {
        bn.iter(|| {
            hop(&mut a, s, at_b, &mut b, t);
            hop(&mut b, t, at_a, &mut a, s);
        });
    });
}

/// Seed 004's small-write receive as the receiving loop sees it (issue 11, goal 3): a
/// peer with TCP_NODELAY sends a millisecond's worth of 100 Mb/s in 128-byte writes (98
/// segments, each its own frame), then the receiver's loop takes the burst in and its
/// application reads it all. Only the receiver is timed: its turns (the channel, the
/// interface, the engine, the ACK it sends) and the reads, per burst; the sender, the
/// wire and taking the ACK back are not. Each burst moves virtual time on by 1 ms, so a
/// long run also crosses the neighbour entries' lifetimes (this bench found IPv4 entries
/// expiring under a stream).
fn recv_burst(c: &mut Criterion) {
    const SEGMENTS: usize = 98;
    let (ea, eb, clock, mut tick) = virtual_wire();
    let rt = |ch, last| Runtime::new(ch, iface(last), WaitMode::BusyPoll, clock.clone());
    let (mut a, mut b) = (rt(ea, 1).unwrap(), rt(eb, 2).unwrap());
    let (s, t) = establish(&mut a, &mut b, || tick(10));
    let now = a.now();
    a.iface()
        .tcp_mut()
        .unwrap()
        .set_option(now, s, SocketOption::NoDelay(true))
        .unwrap();
    let msg = [7u8; 128];
    let mut buf = vec![0u8; 64 * 1024];
    let mut burst = || {
        for _ in 0..SEGMENTS {
            let now = a.now();
            let n = a.iface().tcp_mut().unwrap().send(now, s, &msg).unwrap();
            assert_eq!(n, 128);
            a.poll_once(&mut ()).unwrap();
        }
        tick(5);
        let t0 = std::time::Instant::now();
        let mut got = 0;
        while b.poll_once(&mut ()).unwrap() > 0 {}
        loop {
            let now = b.now();
            let r = b.iface().tcp_mut().unwrap().recv(now, t, &mut buf);
            match r {
                Ok(n) if n > 0 => got += n,
                _ => break,
            }
        }
        b.poll_once(&mut ()).unwrap();
        let spent = t0.elapsed();
        assert_eq!(got, SEGMENTS * 128);
        tick(5);
        a.poll_once(&mut ()).unwrap();
        tick(990);
        spent
    };
    c.bench_function("turns/tcp_recv_burst_128x98", |bn| {
        bn.iter_custom(|iters| (0..iters).map(|_| burst()).sum());
    });
}

criterion_group!(benches, idle, ping_pong, udp_ping_pong, recv_burst);
criterion_main!(benches);
