//! Misuse and failure paths of the socket API return `io::Error`s of std's kinds,
//! never a panic or a hang; dropping closes gracefully or resets (linger 0); a stopped
//! stack releases every blocked call; the poller reports readiness of many sockets.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::thread;
use std::time::Duration;

use ulnet::channel::pipe;
use ulnet::net::{Interest, Poller, Stack, TcpListener, TcpStream, Token, UdpSocket};

fn stacks() -> (Stack, Stack) {
    let (a, b) = pipe::pair().unwrap();
    let build = |addr: &str, ch| Stack::builder().address(addr).channel(ch).build().unwrap();
    (build("198.18.0.1/24", a), build("198.18.0.2/24", b))
}

fn pair(a: &Stack, b: &Stack, port: u16) -> (TcpStream, TcpStream) {
    let l = TcpListener::bind(b, ("0.0.0.0", port)).unwrap();
    let dst: SocketAddr = ([198, 18, 0, 2], port).into();
    let c = TcpStream::connect_timeout(a, &dst, Duration::from_secs(5)).unwrap();
    let (s, peer) = l.accept().unwrap();
    assert_eq!(peer, c.local_addr().unwrap());
    (c, s)
}

#[test]
fn binding_twice_is_addr_in_use() {
    let (_a, b) = stacks();
    let _l = TcpListener::bind(&b, "0.0.0.0:80").unwrap();
    assert_eq!(
        TcpListener::bind(&b, "0.0.0.0:80").unwrap_err().kind(),
        ErrorKind::AddrInUse
    );
    let _u = UdpSocket::bind(&b, "0.0.0.0:53").unwrap();
    assert_eq!(
        UdpSocket::bind(&b, "0.0.0.0:53").unwrap_err().kind(),
        ErrorKind::AddrInUse
    );
    let any = TcpListener::bind(&b, "0.0.0.0:0").unwrap();
    assert_ne!(any.local_addr().unwrap().port(), 0);
}

#[test]
fn connecting_to_nothing_is_refused_or_times_out() {
    let (a, _b) = stacks();
    let e = TcpStream::connect(&a, "198.18.0.2:1").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
    // Nobody answers ARP for .99: the bounded connect gives up.
    let dst: SocketAddr = "198.18.0.99:80".parse().unwrap();
    let e = TcpStream::connect_timeout(&a, &dst, Duration::from_millis(300)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
    let e = TcpStream::connect(&a, "0.0.0.0:80").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let e = TcpStream::connect_timeout(&a, &dst, Duration::ZERO).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
}

#[test]
fn shutdown_then_read_or_write() {
    let (a, b) = stacks();
    let (mut c, mut s) = pair(&a, &b, 7);
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(c.write(b"x").unwrap_err().kind(), ErrorKind::BrokenPipe);
    let mut buf = [0u8; 8];
    assert_eq!(s.read(&mut buf).unwrap(), 0, "the peer sees EOF");
    s.write_all(b"late").unwrap();
    assert_eq!(c.read(&mut buf).unwrap(), 4, "half-closed: still readable");
    c.shutdown(Shutdown::Read).unwrap();
    assert_eq!(
        c.read(&mut buf).unwrap(),
        0,
        "std: reads after shutdown(Read) are EOF"
    );
    assert!(c.shutdown(Shutdown::Both).is_ok());
}

#[test]
fn timeouts_and_nonblocking_would_block() {
    let (a, b) = stacks();
    let (c, _s) = pair(&a, &b, 8);
    let mut buf = [0u8; 8];
    c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    assert_eq!(
        (&c).read(&mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    c.set_nonblocking(true).unwrap();
    assert_eq!(
        (&c).read(&mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    assert_eq!(c.peek(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
    assert_eq!(
        c.set_read_timeout(Some(Duration::ZERO)).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let u = UdpSocket::bind(&a, "0.0.0.0:0").unwrap();
    u.set_nonblocking(true).unwrap();
    assert_eq!(
        u.recv_from(&mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    assert_eq!(u.send(b"x").unwrap_err().kind(), ErrorKind::NotConnected);
    let l = TcpListener::bind(&a, "0.0.0.0:9").unwrap();
    l.set_nonblocking(true).unwrap();
    assert_eq!(l.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
}

#[test]
fn drop_closes_gracefully_and_linger_zero_resets() {
    let (a, b) = stacks();
    let (mut c, mut s) = pair(&a, &b, 10);
    c.write_all(&[7u8; 100_000]).unwrap();
    drop(c);
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    assert_eq!(
        all.len(),
        100_000,
        "queued data and FIN arrive after the drop"
    );

    let (c, mut s) = pair(&a, &b, 11);
    c.set_linger(Some(Duration::ZERO)).unwrap();
    drop(c);
    let mut buf = [0u8; 8];
    let e = s.read(&mut buf).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionReset);
    // SO_ERROR semantics: the hard error is reported once, then cleared.
    let e = s.take_error().unwrap().expect("the reset");
    assert_eq!(e.kind(), ErrorKind::ConnectionReset);
    assert!(s.take_error().unwrap().is_none());
    assert_eq!(
        s.write(b"x").unwrap_err().kind(),
        ErrorKind::ConnectionReset
    );
}

#[test]
fn clones_share_the_connection_and_options_apply() {
    let (a, b) = stacks();
    let (c, s) = pair(&a, &b, 12);
    let c2 = c.try_clone().unwrap();
    drop(c);
    (&c2).write_all(b"still open").unwrap();
    let mut buf = [0u8; 10];
    (&s).read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"still open");
    c2.set_nodelay(true).unwrap();
    assert!(c2.nodelay().unwrap());
    c2.set_congestion(ulnet::net::Algorithm::NewReno).unwrap();
    c2.set_keepalive(Some(ulnet::net::Keepalive::default()))
        .unwrap();
    let info = c2.info().unwrap();
    assert_eq!(info.congestion, ulnet::net::Algorithm::NewReno);
    assert!(info.sack && info.timestamps);
    assert!(c2.take_error().unwrap().is_none());
}

#[test]
fn stopping_the_stack_releases_blocked_calls() {
    let (a, b) = stacks();
    let (c, _s) = pair(&a, &b, 13);
    let t = thread::spawn(move || {
        let mut buf = [0u8; 8];
        (&c).read(&mut buf)
    });
    thread::sleep(Duration::from_millis(50));
    a.stop().unwrap();
    let e = t.join().unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotConnected);
    assert!(!a.is_running());
    assert_eq!(
        TcpStream::connect(&a, "198.18.0.2:13").unwrap_err().kind(),
        ErrorKind::NotConnected
    );
}

#[test]
fn poller_reports_accepts_reads_and_udp() {
    let (a, b) = stacks();
    let p = Poller::new(&b);
    let l = TcpListener::bind(&b, "0.0.0.0:20").unwrap();
    l.set_nonblocking(true).unwrap();
    p.register(&l, Token(0), Interest::READABLE).unwrap();
    let u = UdpSocket::bind(&b, "0.0.0.0:21").unwrap();
    u.set_nonblocking(true).unwrap();
    p.register(&u, Token(1), Interest::READABLE).unwrap();
    let mut events = Vec::new();
    // A listener is reported once at registration (accept until WouldBlock).
    p.poll(&mut events, Some(Duration::from_millis(10)))
        .unwrap();
    assert_eq!(l.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
    assert_eq!(
        p.poll(&mut events, Some(Duration::from_millis(20)))
            .unwrap(),
        0
    );

    let clients: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(&a, "198.18.0.2:20").unwrap())
        .collect();
    let mut streams = Vec::new();
    while streams.len() < 3 {
        p.poll(&mut events, Some(Duration::from_secs(5))).unwrap();
        assert!(!events.is_empty(), "accept readiness within 5 s");
        while let Ok((s, _)) = l.accept() {
            s.set_nonblocking(true).unwrap();
            p.register(&s, Token(10 + streams.len()), Interest::READABLE)
                .unwrap();
            streams.push(s);
        }
    }
    (&clients[1]).write_all(b"hi").unwrap();
    let ua = UdpSocket::bind(&a, "0.0.0.0:0").unwrap();
    ua.send_to(b"dgram", "198.18.0.2:21").unwrap();
    let (mut got_tcp, mut got_udp) = (false, false);
    let mut buf = [0u8; 16];
    for _ in 0..50 {
        p.poll(&mut events, Some(Duration::from_millis(200)))
            .unwrap();
        for e in &events {
            if e.token == Token(11) && e.readable {
                assert_eq!((&streams[1]).read(&mut buf).unwrap(), 2);
                got_tcp = true;
            }
            if e.token == Token(1) && e.readable {
                assert_eq!(u.recv_from(&mut buf).unwrap().0, 5);
                got_udp = true;
            }
            assert!(
                e.token != Token(10) && e.token != Token(12),
                "no data there: {e:?}"
            );
        }
        if got_tcp && got_udp {
            break;
        }
    }
    assert!(got_tcp && got_udp);
    p.deregister(&u).unwrap();
    assert_eq!(p.deregister(&u).unwrap_err().kind(), ErrorKind::NotFound);
}
