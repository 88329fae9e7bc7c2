//! The socket API's own share of a busy-poll round trip (issue 11, goal 4): two stacks
//! joined by the in-memory pipe, both busy-polling, a 64-byte UDP or TCP ping-pong
//! between a client thread and an echo thread through the public blocking sockets.
//!
//! No kernel path is crossed except the pipe's eventfd signal per flush, so what this
//! times is ulnet's per-message work on both ends (ingress, the hand-off to the
//! application, the call itself, egress) plus that signal: the part of `ulnet bench
//! latency`'s busy-poll round trip that ulnet can change. Run it on a quiet machine
//! (each end spins on a core of its own: the server's threads on the system-under-test
//! core, the client's on the load core, as in `ulnet bench`).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use ulnet::channel::pipe;
use ulnet::net::{Stack, TcpListener, TcpStream, UdpSocket};
use ulnet::runtime::{Clock, Runtime, WaitMode};
use ulnet::stack::iface::{Interface, InterfaceConfig, IpCidr};
use ulnet::stack::tcp::{Tcp, TcpConfig};
use ulnet::wire::EthernetAddress;

/// The cores `ulnet bench` uses: the system under test, and the load (client).
const SUT_CPU: usize = 1;
const LOAD_CPU: usize = 0;

/// Pins the calling thread (and the threads it spawns later) to `cpu`; on a machine
/// without it (`EINVAL`) the thread stays where it may run. (Not by
/// `available_parallelism`: it counts the caller's own mask, one CPU once pinned.)
fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    let _ = rustix::thread::sched_setaffinity(None, &set);
}

fn pin_sut() {
    pin(SUT_CPU);
}

fn pin_load() {
    pin(LOAD_CPU);
}

const MSG: usize = 64;

/// Host `last` of 198.18.0.0/24 with its peer's MAC known (no ARP in the timed part).
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

/// The server's stack (its loop thread pinned to the system-under-test core, as the
/// echo thread will be) and the client's (load core, with the calling thread, which
/// stays there): unpinned, the four threads met on one core now and then, and a run
/// read 1.5 or 3 µs by where they landed.
fn stacks() -> (Stack, Stack) {
    stacks_waiting(WaitMode::BusyPoll)
}

/// [`stacks`] with both loops waiting as `mode` says.
fn stacks_waiting(mode: WaitMode) -> (Stack, Stack) {
    let (a, b) = pipe::pair().unwrap();
    let rt =
        |ch, last, peer| Runtime::new(ch, iface(last, peer), mode, Clock::monotonic()).unwrap();
    pin_sut();
    let a = Stack::from_runtime(rt(a, 1, 2), Vec::new()).unwrap();
    pin_load();
    let b = Stack::from_runtime(rt(b, 2, 1), Vec::new()).unwrap();
    (a, b)
}

/// Spawns `f` on the system-under-test core.
fn on_sut(f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    std::thread::spawn(move || {
        pin_sut();
        f();
    })
}

fn server_addr() -> SocketAddr {
    "198.18.0.1:7".parse().unwrap()
}

/// An echo thread on `a` until `stop`.
fn udp_echo(a: &Stack, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    let s = UdpSocket::bind(a, server_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    on_sut(move || {
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, from)) = s.recv_from(&mut buf) {
                let _ = s.send_to(&buf[..n], from);
            }
        }
    })
}

fn tcp_echo(a: &Stack, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    let l = TcpListener::bind(a, server_addr()).unwrap();
    on_sut(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut buf = [0u8; MSG];
        while !stop.load(Ordering::Relaxed) {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
    })
}

fn rtt(c: &mut Criterion) {
    let mut g = c.benchmark_group("busy_poll_rtt_64B");
    g.measurement_time(Duration::from_secs(4));

    {
        let (a, b) = stacks();
        let stop = Arc::new(AtomicBool::new(false));
        let server = udp_echo(&a, Arc::clone(&stop));
        let s = UdpSocket::bind(&b, "198.18.0.2:0").unwrap();
        s.connect(server_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let mut buf = [0u8; 2048];
        g.bench_function("udp", |bn| {
            bn.iter_custom(|iters| {
                let t = Instant::now();
                for _ in 0..iters {
                    s.send(&[7; MSG]).unwrap();
                    assert_eq!(s.recv(&mut buf).unwrap(), MSG);
                }
                t.elapsed()
            });
        });
        stop.store(true, Ordering::Relaxed);
        server.join().unwrap();
    }

    {
        let (a, b) = stacks();
        let stop = Arc::new(AtomicBool::new(false));
        let server = tcp_echo(&a, Arc::clone(&stop));
        let mut s = TcpStream::connect_timeout(&b, &server_addr(), Duration::from_secs(5)).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let mut buf = [0u8; MSG];
        g.bench_function("tcp", |bn| {
            bn.iter_custom(|iters| {
                let t = Instant::now();
                for _ in 0..iters {
                    s.write_all(&[7; MSG]).unwrap();
                    s.read_exact(&mut buf).unwrap();
                }
                t.elapsed()
            });
        });
        stop.store(true, Ordering::Relaxed);
        drop(s);
        server.join().unwrap();
    }
    g.finish();
}

/// A tokio client's round trip against the blocking echo thread, both stacks sleeping
/// (a task's writes are sent when it yields only where its runtime's reactor watches the
/// channel, which a busy-polled loop does not offer): what a request/response task pays
/// for the turn that runs at its yield rather than in its write.
fn tokio_rtt(c: &mut Criterion) {
    let mut g = c.benchmark_group("sleeping_rtt_64B");
    g.measurement_time(Duration::from_secs(4));
    let (a, b) = stacks_waiting(WaitMode::Sleep);
    let stop = Arc::new(AtomicBool::new(false));
    let server = tcp_echo(&a, Arc::clone(&stop));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut s = rt
        .block_on(TcpStream::connect_async(&b, server_addr()))
        .unwrap();
    s.set_nodelay(true).unwrap();
    let mut buf = [0u8; MSG];
    g.bench_function("tokio_tcp", |bn| {
        bn.iter_custom(|iters| {
            rt.block_on(async {
                let t = Instant::now();
                for _ in 0..iters {
                    tokio::io::AsyncWriteExt::write_all(&mut s, &[7; MSG])
                        .await
                        .unwrap();
                    tokio::io::AsyncReadExt::read_exact(&mut s, &mut buf)
                        .await
                        .unwrap();
                }
                t.elapsed()
            })
        });
    });
    stop.store(true, Ordering::Relaxed);
    drop(s);
    server.join().unwrap();
    g.finish();
}

criterion_group!(benches, rtt, tokio_rtt);
criterion_main!(benches);
