//! The socket API's listener has the protection the apps' servers have (issue 13):
//! bounds on connections not yet accepted, per remote address and in all, checked when
//! the SYN arrives, so a host over its share is refused before the handshake.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use ulnet::channel::pipe;
use ulnet::net::{ListenerLimits, Stack, TcpListener, TcpStream};

fn stacks() -> (Stack, Stack) {
    let (a, b) = pipe::pair().unwrap();
    let build = |addr: &str, ch| Stack::builder().address(addr).channel(ch).build().unwrap();
    (build("198.18.0.1/24", a), build("198.18.0.2/24", b))
}

fn dst(port: u16) -> SocketAddr {
    ([198, 18, 0, 2], port).into()
}

#[test]
fn a_source_over_its_share_is_refused_at_once() {
    let (a, b) = stacks();
    let l = TcpListener::bind(&b, "0.0.0.0:81").unwrap();
    l.set_limits(ListenerLimits::new(None, Some(2))).unwrap();
    let limit = Duration::from_secs(5);
    // Two connections wait un-accepted (connect returns once the handshake completes).
    let c1 = TcpStream::connect_timeout(&a, &dst(81), limit).unwrap();
    let _c2 = TcpStream::connect_timeout(&a, &dst(81), limit).unwrap();
    // The third from the same address: refused with a RST before any handshake.
    let e = TcpStream::connect_timeout(&a, &dst(81), limit).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
    // Accepting one frees its place.
    let (_s1, peer) = l.accept().unwrap();
    assert_eq!(peer, c1.local_addr().unwrap());
    let _c3 = TcpStream::connect_timeout(&a, &dst(81), limit).unwrap();
}

#[test]
fn beyond_the_total_bound_a_syn_waits_for_room() {
    let (a, b) = stacks();
    let l = TcpListener::bind(&b, "0.0.0.0:82").unwrap();
    l.set_limits(ListenerLimits::new(Some(2), None)).unwrap();
    let limit = Duration::from_secs(5);
    let _c1 = TcpStream::connect_timeout(&a, &dst(82), limit).unwrap();
    let _c2 = TcpStream::connect_timeout(&a, &dst(82), limit).unwrap();
    // Dropped silently, like a full backlog: the bounded connect gives up (its SYN
    // retransmission comes after 1 s).
    let e = TcpStream::connect_timeout(&a, &dst(82), Duration::from_millis(300)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
    // Room again after an accept: a new connection completes (on its first SYN or the
    // retransmission).
    let _s1 = l.accept().unwrap();
    let _c3 = TcpStream::connect_timeout(&a, &dst(82), limit).unwrap();
}
