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
        .enable_all()
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

#[test]
fn ipv4_wildcard_sockets_take_no_ipv6() {
    // Linux: an AF_INET socket on 0.0.0.0 receives IPv4 only. A datagram to the IPv6
    // address on its port finds no socket (port unreachable, RFC 4443 §3.1), a SYN to it
    // a reset.
    let (a, b) = pair(&A, &B);
    let timeout = Some(std::time::Duration::from_millis(300));
    let sb = UdpSocket::bind(&b, "0.0.0.0:7100").unwrap();
    sb.set_read_timeout(timeout).unwrap();
    let sa = UdpSocket::bind(&a, "[::]:0").unwrap();
    sa.send_to(b"to six", "[2001:2::2]:7100").unwrap();
    let mut buf = [0u8; 64];
    let e = sb.recv_from(&mut buf).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
    let sa4 = UdpSocket::bind(&a, "0.0.0.0:0").unwrap();
    sa4.send_to(b"to four", "198.18.0.2:7100").unwrap();
    let (n, from) = sb.recv_from(&mut buf).unwrap();
    assert_eq!(
        (&buf[..n], from.ip()),
        (&b"to four"[..], "198.18.0.1".parse::<IpAddr>().unwrap())
    );

    let l = TcpListener::bind(&b, "0.0.0.0:81").unwrap();
    let e = round_trip(&a, "[2001:2::2]:81".parse().unwrap(), b"x").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
    let server = echo(l, 1);
    let (_, got) = round_trip(&a, "198.18.0.2:81".parse().unwrap(), b"four").unwrap();
    assert_eq!(got, b"four");
    server.join().unwrap();
}

#[test]
fn wildcards_of_both_families_conflict_unless_v6only() {
    // Linux (bindv6only=0): `[::]:p` also holds 0.0.0.0:p, so binding the other wildcard
    // of the pair fails with EADDRINUSE in either order; a v6-only `[::]:p` holds IPv6
    // only and shares the port with 0.0.0.0:p.
    let (_a, b) = pair(&A, &B);
    let in_use = |r: std::io::Result<()>, what: &str| {
        let e = r.expect_err(what);
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{what}: {e}");
    };
    // UDP, [::] first, then 0.0.0.0 first.
    let u6 = UdpSocket::bind(&b, "[::]:7200").unwrap();
    in_use(
        UdpSocket::bind(&b, "0.0.0.0:7200").map(drop),
        "udp [::] then 0.0.0.0",
    );
    in_use(
        UdpSocket::bind(&b, "198.18.0.2:7200").map(drop),
        "udp [::] then an IPv4 address",
    );
    let u4 = UdpSocket::bind(&b, "0.0.0.0:7201").unwrap();
    in_use(
        UdpSocket::bind(&b, "[::]:7201").map(drop),
        "udp 0.0.0.0 then [::]",
    );
    // An IPv6 address and the IPv4 wildcard do not overlap.
    let u6a = UdpSocket::bind(&b, "[2001:2::2]:7201").unwrap();
    // v6-only: the IPv4 wildcard may join, and then v6-only cannot be turned off.
    u6.set_only_v6(true).unwrap();
    let u4b = UdpSocket::bind(&b, "0.0.0.0:7200").unwrap();
    in_use(
        u6.set_only_v6(false),
        "udp v6-only off while 0.0.0.0 holds the port",
    );
    drop((u4, u6a, u4b));

    // TCP listeners, the same rules.
    let l6 = TcpListener::bind(&b, "[::]:8200").unwrap();
    in_use(
        TcpListener::bind(&b, "0.0.0.0:8200").map(drop),
        "tcp [::] then 0.0.0.0",
    );
    let l4 = TcpListener::bind(&b, "0.0.0.0:8201").unwrap();
    in_use(
        TcpListener::bind(&b, "[::]:8201").map(drop),
        "tcp 0.0.0.0 then [::]",
    );
    l6.set_only_v6(true).unwrap();
    let l4b = TcpListener::bind(&b, "0.0.0.0:8200").unwrap();
    in_use(
        l6.set_only_v6(false),
        "tcp v6-only off while 0.0.0.0 holds the port",
    );
    drop((l4, l4b, l6));
    // Closed, the port is free for either again.
    let _l = TcpListener::bind(&b, "[::]:8201").unwrap();
    let _u = UdpSocket::bind(&b, "[::]:7201").unwrap();
}

#[test]
fn v6only_udp_wildcard_leaves_ipv4_to_the_ipv4_socket() {
    let (a, b) = pair(&A, &B);
    let timeout = Some(std::time::Duration::from_secs(5));
    let u6 = UdpSocket::bind(&b, "[::]:7300").unwrap();
    u6.set_only_v6(true).unwrap();
    let u4 = UdpSocket::bind(&b, "0.0.0.0:7300").unwrap();
    u6.set_read_timeout(timeout).unwrap();
    u4.set_read_timeout(timeout).unwrap();
    let sa = UdpSocket::bind(&a, "[::]:0").unwrap();
    sa.send_to(b"four", "198.18.0.2:7300").unwrap();
    sa.send_to(b"six", "[2001:2::2]:7300").unwrap();
    let mut buf = [0u8; 64];
    let (n, _) = u4.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"four");
    let (n, _) = u6.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"six");
    // Without v6-only (and no IPv4 socket), [::] takes IPv4 too.
    let d = UdpSocket::bind(&b, "[::]:7301").unwrap();
    d.set_read_timeout(timeout).unwrap();
    sa.send_to(b"four again", "198.18.0.2:7301").unwrap();
    let (n, from) = d.recv_from(&mut buf).unwrap();
    assert_eq!(
        (&buf[..n], from.ip()),
        (&b"four again"[..], "198.18.0.1".parse::<IpAddr>().unwrap())
    );
}
