//! Issue 15, the socket API with several addresses: two stacks joined by an in-memory
//! link, each with IPv4 (and IPv6) addresses. Connections take the source address of
//! the peer's family and network; a `[::]` listener takes both families unless v6-only;
//! UDP and tokio work over IPv6 as over IPv4.

use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr};
use std::thread;

use ulnet::channel::pipe;
use ulnet::net::{Stack, TcpListener, TcpStream, UdpSocket};

fn pair(a: &[&str], b: &[&str]) -> (Stack, Stack) {
    let (ca, cb) = pipe::pair().unwrap();
    let build = |addrs: &[&str], ch| {
        let mut builder = Stack::builder();
        for a in addrs {
            builder = builder.address(a);
        }
        builder
            .channel(ch)
            .build()
            .unwrap_or_else(|e| panic!("stack {addrs:?}: {e}"))
    };
    (build(a, ca), build(b, cb))
}

/// Accepts `count` connections on `l`, echoes each, returns the peers' addresses.
fn echo(l: TcpListener, count: usize) -> thread::JoinHandle<Vec<SocketAddr>> {
    thread::spawn(move || {
        (0..count)
            .map(|_| {
                let (mut s, peer) = l.accept().unwrap();
                let mut buf = Vec::new();
                s.read_to_end(&mut buf).unwrap();
                s.write_all(&buf).unwrap();
                peer
            })
            .collect()
    })
}

fn round_trip(stack: &Stack, to: SocketAddr, msg: &[u8]) -> std::io::Result<(SocketAddr, Vec<u8>)> {
    let mut c = TcpStream::connect(stack, to)?;
    let local = c.local_addr()?;
    c.write_all(msg)?;
    c.shutdown(Shutdown::Write)?;
    let mut got = Vec::new();
    c.read_to_end(&mut got)?;
    Ok((local, got))
}

#[test]
fn the_source_address_follows_the_peers_network() {
    let (a, b) = pair(&["198.18.0.1/24", "198.18.1.1/24"], &["198.18.1.2/24"]);
    assert_eq!(a.addresses().len(), 2);
    assert_eq!(a.local_ip(), "198.18.0.1".parse::<IpAddr>().unwrap());
    let peer: IpAddr = "198.18.1.2".parse().unwrap();
    assert_eq!(a.source_for(peer), Some("198.18.1.1".parse().unwrap()));
    // Off every prefix: the first address of the family.
    assert_eq!(
        a.source_for("203.0.113.9".parse().unwrap()),
        Some("198.18.0.1".parse().unwrap())
    );
    // No IPv6 address: no IPv6 source, and connecting says so.
    assert_eq!(a.source_for("2001:2::2".parse().unwrap()), None);
    let e = TcpStream::connect(&a, "[2001:2::2]:80").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrNotAvailable, "{e}");

    let l = TcpListener::bind(&b, "0.0.0.0:80").unwrap();
    let server = echo(l, 1);
    let (local, got) = round_trip(&a, SocketAddr::new(peer, 80), b"on link").unwrap();
    assert_eq!(got, b"on link");
    assert_eq!(local.ip(), "198.18.1.1".parse::<IpAddr>().unwrap());
    assert_eq!(server.join().unwrap()[0].ip(), local.ip());
}

const A: [&str; 2] = ["2001:2::1/64", "198.18.0.1/24"];
const B: [&str; 2] = ["2001:2::2/64", "198.18.0.2/24"];

#[test]
fn ipv6_wildcard_listener_takes_both_families_unless_v6only() {
    let (a, b) = pair(&A, &B);
    assert_eq!(a.local_ip(), "2001:2::1".parse::<IpAddr>().unwrap());
    let l = TcpListener::bind(&b, "[::]:80").unwrap();
    assert_eq!(l.local_addr().unwrap(), "[::]:80".parse().unwrap());
    let server = echo(l.try_clone().unwrap(), 2);
    let (l6, got6) = round_trip(&a, "[2001:2::2]:80".parse().unwrap(), b"six").unwrap();
    let (l4, got4) = round_trip(&a, "198.18.0.2:80".parse().unwrap(), b"four").unwrap();
    assert_eq!(
        (got6.as_slice(), got4.as_slice()),
        (&b"six"[..], &b"four"[..])
    );
    assert_eq!(
        (l6.ip(), l4.ip()),
        ("2001:2::1".parse().unwrap(), "198.18.0.1".parse().unwrap())
    );
    assert_eq!(server.join().unwrap(), vec![l6, l4], "accepted peers");

    l.set_only_v6(true).unwrap();
    let e = round_trip(&a, "198.18.0.2:80".parse().unwrap(), b"x").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
    let server = echo(l, 1);
    let (_, got) = round_trip(&a, "[2001:2::2]:80".parse().unwrap(), b"still six").unwrap();
    assert_eq!(got, b"still six");
    server.join().unwrap();
}

#[test]
fn udp_over_ipv6() {
    let (a, b) = pair(&A, &B);
    let sb = UdpSocket::bind(&b, "[2001:2::2]:7000").unwrap();
    let sa = UdpSocket::bind(&a, "[2001:2::1]:0").unwrap();
    sa.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    sb.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    sa.send_to(b"ping6", "[2001:2::2]:7000").unwrap();
    let mut buf = [0u8; 64];
    let (n, from) = sb.recv_from(&mut buf).unwrap();
    assert_eq!((&buf[..n], from), (&b"ping6"[..], sa.local_addr().unwrap()));
    sb.send_to(b"pong6", from).unwrap();
    let (n, from) = sa.recv_from(&mut buf).unwrap();
    assert_eq!((&buf[..n], from), (&b"pong6"[..], sb.local_addr().unwrap()));
}

#[cfg(feature = "tokio")]
#[test]
fn tokio_connect_over_ipv6() {
    let (a, b) = pair(&A, &B);
    let l = TcpListener::bind(&b, "[2001:2::2]:8080").unwrap();
    let server = echo(l, 1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let got = rt.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = TcpStream::connect_async(&a, "[2001:2::2]:8080".parse().unwrap())
            .await
            .unwrap();
        assert_eq!(
            s.local_addr().unwrap().ip(),
            "2001:2::1".parse::<IpAddr>().unwrap()
        );
        AsyncWriteExt::write_all(&mut s, b"async six")
            .await
            .unwrap();
        AsyncWriteExt::shutdown(&mut s).await.unwrap();
        let mut got = Vec::new();
        AsyncReadExt::read_to_end(&mut s, &mut got).await.unwrap();
        got
    });
    assert_eq!(got, b"async six");
    server.join().unwrap();
}

#[test]
fn link_local_peers_get_the_link_local_source() {
    // RFC 6724 §5 rule 2 (matching scope): to a link-local peer the source is the stack's
    // own link-local address (fe80:: + the modified EUI-64 of its MAC, RFC 4862 §5.3).
    let (a, b) = pair(&A, &B);
    let mac_of = |s: &Stack| s.with(|i| i.mac());
    let (ll_a, ll_b) = (
        ulnet::stack::iface::link_local_from_mac(mac_of(&a)),
        ulnet::stack::iface::link_local_from_mac(mac_of(&b)),
    );
    assert_eq!(a.source_for(ll_b.into()), Some(ll_a.into()));
    let l = TcpListener::bind(&b, "[::]:90").unwrap();
    let server = echo(l, 1);
    let (local, got) = round_trip(&a, SocketAddr::new(ll_b.into(), 90), b"link-local").unwrap();
    assert_eq!(
        (local.ip(), got.as_slice()),
        (IpAddr::from(ll_a), &b"link-local"[..])
    );
    assert_eq!(server.join().unwrap()[0].ip(), IpAddr::from(ll_a));
}
