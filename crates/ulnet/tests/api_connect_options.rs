//! Options before the SYN through the socket API (issue 16): `TcpStream::connect_with`
//! with a local address and engine options, and `TcpListener::set_option` for the
//! connections a listener accepts; two stacks joined by an in-process pipe.

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;

use ulnet::channel::pipe;
use ulnet::net::{ConnectOptions, SocketOption, Stack, TcpListener, TcpStream};

fn stacks() -> (Stack, Stack) {
    let (a, b) = pipe::pair().unwrap();
    let build = |addr: &str, ch| Stack::builder().address(addr).channel(ch).build().unwrap();
    (build("198.18.0.1/24", a), build("198.18.0.2/24", b))
}

fn dst(port: u16) -> SocketAddr {
    ([198, 18, 0, 2], port).into()
}

#[test]
fn connect_with_a_local_port_and_a_small_receive_buffer() {
    let (a, b) = stacks();
    let l = TcpListener::bind(&b, "0.0.0.0:90").unwrap();
    let how = ConnectOptions::new()
        .local(([0, 0, 0, 0], 40001).into())
        .option(SocketOption::RecvBuffer(3000));
    let c = TcpStream::connect_with(&a, dst(90), &how).unwrap();
    assert_eq!(c.local_addr().unwrap(), ([198, 18, 0, 1], 40001).into());
    let (mut s, peer) = l.accept().unwrap();
    assert_eq!(peer, c.local_addr().unwrap());
    // The SYN offered no scaling beyond what 3000 bytes need, and the window seen by
    // the peer is the buffer.
    let i = s.info().unwrap();
    assert!(i.snd_wnd <= 3000, "the peer sees a window of {}", i.snd_wnd);
    assert_eq!(c.info().unwrap().window_scale.map(|w| w.1), Some(0));
    // Bytes still move exactly through the small window.
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + 3) as u8).collect();
    let sender = std::thread::spawn(move || {
        s.write_all(&data).unwrap();
        data
    });
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let mut c = c;
    while got.len() < 200_000 {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, sender.join().unwrap());
    // The same local port to the same destination again: taken.
    let e = TcpStream::connect_with(&a, dst(90), &how).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
}

#[test]
fn listener_options_reach_accepted_connections() {
    let (a, b) = stacks();
    let l = TcpListener::bind(&b, "0.0.0.0:91").unwrap();
    l.set_option(SocketOption::RecvBuffer(2000)).unwrap();
    let c = TcpStream::connect(&a, dst(91)).unwrap();
    let (s, _) = l.accept().unwrap();
    assert!(c.info().unwrap().snd_wnd <= 2000);
    assert_eq!(s.info().unwrap().window_scale.map(|w| w.1), Some(0));
}
