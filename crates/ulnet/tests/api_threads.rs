//! The blocking socket API from many threads at once: two stacks joined by an
//! in-memory link, each on its own runtime thread; 8 client threads share stack A, each
//! with its own connections to an echo server on stack B (a thread per connection),
//! writing from one handle and reading from a clone; every byte comes back exact.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::thread;
use std::time::Duration;

use ulnet::channel::pipe;
use ulnet::net::{Stack, TcpListener, TcpStream, UdpSocket};

fn stacks() -> (Stack, Stack) {
    let (a, b) = pipe::pair().unwrap();
    let sa = Stack::builder()
        .address("198.18.0.1/24")
        .channel(a)
        .build()
        .unwrap();
    let sb = Stack::builder()
        .address("198.18.0.2/24")
        .channel(b)
        .build()
        .unwrap();
    (sa, sb)
}

/// Byte `i` of stream `seed`: a pattern that catches reordering and loss.
fn pattern(seed: u64, i: u64) -> u8 {
    let x = (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i).wrapping_mul(0xff51_afd7_ed55_8ccd);
    (x >> 56) as u8
}

fn echo_server(l: TcpListener, count: usize) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut workers = Vec::new();
        for _ in 0..count {
            let (mut s, _) = l.accept().unwrap();
            workers.push(thread::spawn(move || {
                let mut buf = vec![0u8; 32 * 1024];
                loop {
                    let n = s.read(&mut buf).unwrap();
                    if n == 0 {
                        break;
                    }
                    s.write_all(&buf[..n]).unwrap();
                }
                s.shutdown(Shutdown::Write).unwrap();
            }));
        }
        for w in workers {
            w.join().unwrap();
        }
    })
}

#[test]
fn eight_threads_share_one_stack_byte_exact() {
    const THREADS: u64 = 8;
    const CONNS: u64 = 2;
    const LEN: u64 = 384 * 1024;
    let (a, b) = stacks();
    let l = TcpListener::bind(&b, "0.0.0.0:7000").unwrap();
    let server = echo_server(l, (THREADS * CONNS) as usize);
    let dst: SocketAddr = "198.18.0.2:7000".parse().unwrap();
    let clients: Vec<_> = (0..THREADS)
        .map(|t| {
            let a = a.clone();
            thread::spawn(move || {
                for c in 0..CONNS {
                    let seed = t * 100 + c;
                    let s = TcpStream::connect_timeout(&a, &dst, Duration::from_secs(10)).unwrap();
                    assert_eq!(s.peer_addr().unwrap(), dst);
                    let mut w = s.try_clone().unwrap();
                    let writer = thread::spawn(move || {
                        let mut chunk = vec![0u8; 7000];
                        let mut i = 0u64;
                        while i < LEN {
                            let n = (LEN - i).min(chunk.len() as u64) as usize;
                            for (k, b) in chunk[..n].iter_mut().enumerate() {
                                *b = pattern(seed, i + k as u64);
                            }
                            w.write_all(&chunk[..n]).unwrap();
                            i += n as u64;
                        }
                        w.shutdown(Shutdown::Write).unwrap();
                    });
                    let mut r = &s;
                    let mut buf = vec![0u8; 16 * 1024];
                    let mut got = 0u64;
                    loop {
                        let n = r.read(&mut buf).unwrap();
                        if n == 0 {
                            break;
                        }
                        for (k, b) in buf[..n].iter().enumerate() {
                            assert_eq!(
                                *b,
                                pattern(seed, got + k as u64),
                                "stream {seed} byte {}",
                                got + k as u64
                            );
                        }
                        got += n as u64;
                    }
                    writer.join().unwrap();
                    assert_eq!(got, LEN, "stream {seed}");
                    let info = s.info().unwrap();
                    assert_eq!(info.bytes_received, LEN);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    server.join().unwrap();
}

#[test]
fn udp_ping_pong_between_two_stacks() {
    let (a, b) = stacks();
    let server = UdpSocket::bind(&b, "0.0.0.0:9000").unwrap();
    let t = thread::spawn(move || {
        let mut buf = [0u8; 2048];
        for _ in 0..100 {
            let (n, from) = server.recv_from(&mut buf).unwrap();
            server.send_to(&buf[..n], from).unwrap();
        }
    });
    let c = UdpSocket::bind(&a, "0.0.0.0:0").unwrap();
    assert_ne!(c.local_addr().unwrap().port(), 0);
    c.connect("198.18.0.2:9000").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 2048];
    for i in 0..100u32 {
        let msg = vec![i as u8; 1 + (i as usize * 13) % 1400];
        c.send(&msg).unwrap();
        let n = c.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], &msg[..]);
    }
    t.join().unwrap();
}
