//! Tests of the HTTP server: the request-head parser, the root confinement, and the
//! server on a simulated wire in virtual time against a client driving the TCP API of a
//! second stack (timeouts, limits, lingering close).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use ulnet::runtime::Driver;
use ulnet_channel::sim::{Endpoint, LinkConfig, Wire};
use ulnet_stack::iface::{InterfaceConfig, IpCidr};
use ulnet_stack::tcp::{ConnError, TcpConfig};
use ulnet_wire::EthernetAddress;

use super::*;

fn parse(head: &[u8]) -> Result<Option<(usize, Method, bool, String)>, u16> {
    let mut target = String::new();
    parse_head(head, &mut target).map(|r| r.map(|(n, m, c)| (n, m, c, target)))
}

#[test]
fn request_heads_parse_or_are_refused() {
    let head = b"GET /bytes/10 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET";
    let r = parse(head).unwrap().unwrap();
    assert_eq!(r, (head.len() - 3, Method::Get, true, "/bytes/10".into()));
    let r = parse(b"HEAD / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let r = r.unwrap().unwrap();
    assert_eq!((r.1, r.2), (Method::Head, false));
    assert!(parse(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap().2);
    assert_eq!(
        parse(b"DELETE / HTTP/1.1\r\n\r\n").unwrap().unwrap().1,
        Method::Other
    );
    // Incomplete heads wait for more.
    assert_eq!(parse(b"GET / HTTP/1.1\r\nHost: x\r\n"), Ok(None));
    assert_eq!(parse(b"GET /"), Ok(None));
    for bad in [
        &b"GET / HTTP/2.0\r\n\r\n"[..],
        b"GET x HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost : x\r\n\r\n",
        b"GET / HTTP/1.1\r\nnocolon\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
        b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"\xff / HTTP/1.1\r\n\r\n",
        // Issue 13 item 7: NUL in a field value.
        b"GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n",
        b"GET / HTTP/1.1\r\nX-A: \0\r\n\r\n",
    ] {
        assert_eq!(parse(bad), Err(400), "{bad:?}");
    }
    let mut many = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..=MAX_FIELDS {
        many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(parse(&many), Err(431));
}

/// Heads to mutate: valid ones of each shape the parser accepts.
const SEEDS: [&[u8]; 4] = [
    b"GET /bytes/10 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    b"HEAD http://h/a%20b?q HTTP/1.0\nConnection: keep-alive\n\n",
    b"GET / HTTP/1.1\r\nContent-Length: 0\r\nX: y\r\n\r\nGET / HTTP/1.1\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\n\r\n",
];

proptest::proptest! {
    /// Whatever the bytes, the request path never panics, a complete head is a prefix of
    /// the input that parses the same on its own, its path is origin-form, and no NUL
    /// survives into a head that is accepted.
    #[test]
    fn any_request_head_is_parsed_or_refused(
        seed in 0usize..SEEDS.len(),
        edits in proptest::collection::vec((0usize..256, 0u8..6, proptest::num::u8::ANY), 0..6),
        tail in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
    ) {
        let mut buf = SEEDS[seed].to_vec();
        for (at, kind, b) in edits {
            let at = at % (buf.len() + 1);
            match kind {
                0 => buf.insert(at, b),
                1 if at < buf.len() => buf[at] = b,
                2 if at < buf.len() => { buf.remove(at); }
                3 => buf.insert(at, [0, b'\r', b'\n', b' ', b':', b'\t'][usize::from(b) % 6]),
                4 => buf.truncate(at),
                _ => {}
            }
        }
        buf.extend_from_slice(&tail);
        match parse(&buf) {
            Ok(Some((len, method, close, target))) => {
                proptest::prop_assert!(len <= buf.len());
                proptest::prop_assert!(!buf[..len].contains(&0), "NUL accepted");
                proptest::prop_assert!(target.starts_with('/') || method == Method::Other);
                proptest::prop_assert_eq!(
                    parse(&buf[..len]),
                    Ok(Some((len, method, close, target)))
                );
            }
            Ok(None) => {
                // Incomplete: every prefix is incomplete or already refused.
                let prefix = &buf[..buf.len() / 2];
                proptest::prop_assert!(!matches!(parse(prefix), Ok(Some(_))));
            }
            Err(status) => proptest::prop_assert!(status == 400 || status == 431),
        }
    }
}

#[test]
fn bare_lf_heads_are_answered() {
    // RFC 9112 §2.2: a recipient MAY accept a bare LF as a line terminator.
    let head = b"GET /bytes/3 HTTP/1.1\nHost: x\n\n";
    assert_eq!(
        parse(head),
        Ok(Some((head.len(), Method::Get, false, "/bytes/3".into())))
    );
}

#[test]
fn absolute_form_targets_are_accepted() {
    // RFC 9112 §3.2.2: a server MUST accept the absolute form.
    for (raw, path) in [
        ("http://example.com/bytes/5", "/bytes/5"),
        ("HTTP://example.com:80/a?b=c", "/a?b=c"),
        ("https://example.com", "/"),
        ("http://example.com?q", "/?q"),
    ] {
        let head = format!("GET {raw} HTTP/1.1\r\nHost: example.com\r\n\r\n");
        let r = parse(head.as_bytes()).unwrap().unwrap();
        assert_eq!(r.3, path, "{raw}");
    }
    assert_eq!(parse(b"GET ftp://x/y HTTP/1.1\r\n\r\n"), Err(400));
}

#[test]
fn byte_counts_are_strict_decimal() {
    assert_eq!(strict_decimal("5"), Some(5));
    assert_eq!(strict_decimal("007"), Some(7));
    assert_eq!(strict_decimal("18446744073709551615"), Some(u64::MAX));
    for bad in [
        "+5",
        "-5",
        " 5",
        "5 ",
        "",
        "0x10",
        "18446744073709551616",
        "5a",
    ] {
        assert_eq!(strict_decimal(bad), None, "{bad:?}");
    }
}

/// A scratch directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("ulnet-http-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn static_paths_stay_under_the_root() {
    let dir = TempDir::new("root");
    let d = &dir.0;
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(d.join("sub/a b.txt"), b"hello").unwrap();
    std::fs::write(d.join("index.html"), b"<p>").unwrap();
    let root = open_root(d).unwrap();
    assert_eq!(open_static(&root, "/sub/a%20b.txt").unwrap().1, 5);
    assert_eq!(open_static(&root, "/").unwrap().1, 3);
    assert!(open_static(&root, "/../etc/passwd").is_none());
    assert!(open_static(&root, "/sub/%2e%2e/%2e%2e/etc/passwd").is_none());
    assert!(open_static(&root, "/missing").is_none());
    assert!(open_static(&root, "/bad%zz").is_none());
    // A directory without index.html is no file.
    assert!(open_static(&root, "/sub/").is_none());
}

#[test]
fn symlinks_out_of_the_root_are_not_followed() {
    let dir = TempDir::new("links");
    let d = &dir.0;
    std::fs::create_dir_all(d.join("www/sub")).unwrap();
    std::fs::write(d.join("www/sub/in.txt"), b"inside").unwrap();
    std::fs::write(d.join("secret.txt"), b"outside").unwrap();
    let www = d.join("www");
    std::os::unix::fs::symlink("/etc", www.join("etc")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", www.join("passwd")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", www.join("up.txt")).unwrap();
    std::os::unix::fs::symlink("../../secret.txt", www.join("sub/upup.txt")).unwrap();
    std::os::unix::fs::symlink("sub/in.txt", www.join("alias.txt")).unwrap();
    let root = open_root(&www).unwrap();
    for out in [
        "/etc/passwd",
        "/etc/hostname",
        "/passwd",
        "/up.txt",
        "/sub/upup.txt",
    ] {
        assert!(open_static(&root, out).is_none(), "{out} leaves the root");
    }
    // A link that stays beneath the root is followed (openat2 available since 5.6).
    assert_eq!(open_static(&root, "/alias.txt").map(|f| f.1), Some(6));
    assert_eq!(open_static(&root, "/sub/in.txt").map(|f| f.1), Some(6));
}

// ---- On the simulated wire -------------------------------------------------------------

const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 7, 1);
/// The client node's two addresses: two "hosts" for the per-source limit.
const CLIENT: [Ipv4Addr; 2] = [Ipv4Addr::new(198, 18, 7, 2), Ipv4Addr::new(198, 18, 7, 3)];

fn mac(i: u8) -> EthernetAddress {
    EthernetAddress([0x02, 0, 0, 0, 7, i])
}

struct Node {
    iface: Interface,
    driver: Driver<Endpoint>,
}

/// A client stack and the HTTP server's stack on one cable (1 ms each way), in virtual
/// time.
struct Bed {
    wire: Wire,
    client: Node,
    server: Node,
    http: Http,
}

/// What a client connection saw.
#[derive(Debug, Default)]
struct Seen {
    data: Vec<u8>,
    eof: bool,
    reset: bool,
}

impl Bed {
    fn new(cfg: HttpConfig) -> Bed {
        Bed::with_tcp(cfg, TcpConfig::default())
    }

    fn with_tcp(cfg: HttpConfig, tcp_cfg: TcpConfig) -> Bed {
        let link = LinkConfig::new().delay(std::time::Duration::from_millis(1));
        let (wire, ea, eb) = Wire::pair(13, link.clone(), link);
        let mut c = InterfaceConfig::new(mac(2));
        for ip in CLIENT {
            c = c.address(IpCidr::new(IpAddr::V4(ip), 24).unwrap());
        }
        let mut client = Interface::new(c).unwrap();
        client
            .add_static_neighbor(IpAddr::V4(SERVER), mac(1))
            .unwrap();
        client.set_tcp(Tcp::new(tcp_cfg.clone(), [1; 16]));
        let mut server = Interface::new(
            InterfaceConfig::new(mac(1)).address(IpCidr::new(IpAddr::V4(SERVER), 24).unwrap()),
        )
        .unwrap();
        for ip in CLIENT {
            server.add_static_neighbor(IpAddr::V4(ip), mac(2)).unwrap();
        }
        server.set_tcp(Tcp::new(tcp_cfg, [2; 16]));
        let http = Http::new(&mut server, SocketAddr::new(IpAddr::V4(SERVER), 80), cfg).unwrap();
        let node = |iface, ep| {
            let mut driver = Driver::new(ep);
            driver.set_batch_count(usize::MAX);
            Node { iface, driver }
        };
        Bed {
            wire,
            client: node(client, ea),
            server: node(server, eb),
            http,
        }
    }

    fn now(&self) -> Instant {
        Instant::from_micros(self.wire.now_micros())
    }

    fn tcp(&mut self) -> &mut Tcp {
        self.client.iface.tcp_mut().unwrap()
    }

    /// One pass of both drivers at the current instant.
    fn step(&mut self) {
        let now = self.now();
        for n in [&mut self.client, &mut self.server] {
            while n.driver.receive(now, &mut n.iface).unwrap_or(0) > 0 {}
        }
        self.client
            .driver
            .serve(now, &mut self.client.iface, &mut ());
        self.server
            .driver
            .serve(now, &mut self.server.iface, &mut self.http);
        for n in [&mut self.client, &mut self.server] {
            n.driver.transmit(now, &mut n.iface);
            let _ = n.driver.flush();
        }
    }

    /// Runs until virtual time `secs` later, jumping from event to event.
    fn run_for(&mut self, secs: f64) {
        let end = self.wire.now_micros() + (secs * 1e6) as u64;
        for _ in 0..1_000_000 {
            self.step();
            let now = self.wire.now_micros();
            let next = [
                self.wire.next_event_micros(),
                self.client.iface.poll_at().map(Instant::total_micros),
                self.server.iface.poll_at().map(Instant::total_micros),
                self.http.poll_at().map(Instant::total_micros),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(end)
            .max(now + 1);
            if next > end {
                self.wire.advance_to_micros(end);
                self.step();
                return;
            }
            self.wire.advance_to_micros(next);
        }
        panic!("no end in sight at {} µs", self.wire.now_micros());
    }

    fn connect(&mut self, from: usize) -> SocketHandle {
        let now = self.now();
        let h = self
            .tcp()
            .connect(
                now,
                SocketAddr::new(IpAddr::V4(CLIENT[from]), 0),
                SocketAddr::new(IpAddr::V4(SERVER), 80),
            )
            .unwrap();
        self.run_for(0.01);
        h
    }

    /// Queues all of `data` on `h`, running the wire while the send buffer is full;
    /// everything received meanwhile goes to `seen`.
    fn send(&mut self, h: SocketHandle, mut data: &[u8], seen: &mut Seen) {
        for _ in 0..100_000 {
            if data.is_empty() {
                return;
            }
            let now = self.now();
            match self.tcp().send(now, h, data) {
                Ok(n) => data = &data[n..],
                Err(_) => return,
            }
            self.read(h, seen);
            if seen.reset {
                return;
            }
            self.run_for(0.001);
        }
        panic!("send did not finish");
    }

    /// Takes what `h` has received into `seen`.
    fn read(&mut self, h: SocketHandle, seen: &mut Seen) {
        let now = self.now();
        let mut buf = [0u8; 4096];
        loop {
            match self.tcp().recv(now, h, &mut buf) {
                Ok(0) => {
                    seen.eof = true;
                    return;
                }
                Ok(n) => seen.data.extend_from_slice(&buf[..n]),
                Err(RecvError::WouldBlock) => return,
                Err(_) => {
                    seen.reset = true;
                    return;
                }
            }
        }
    }

    fn seen(&mut self, h: SocketHandle) -> Seen {
        let mut s = Seen::default();
        self.read(h, &mut s);
        if let Ok(r) = self.tcp().readiness(h) {
            s.reset |= r.error == Some(ConnError::Reset);
        }
        s
    }

    /// Sends `req` on `h` and returns what came back within `secs`.
    fn exchange(&mut self, h: SocketHandle, req: &[u8], secs: f64) -> Seen {
        let mut seen = Seen::default();
        self.send(h, req, &mut seen);
        self.run_for(secs);
        let more = self.seen(h);
        seen.data.extend_from_slice(&more.data);
        seen.eof |= more.eof;
        seen.reset |= more.reset;
        seen
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn requests_are_answered_over_the_wire() {
    let mut bed = Bed::new(HttpConfig::default());
    let h = bed.connect(0);
    let got = bed.exchange(h, b"GET /bytes/5 HTTP/1.1\r\nHost: x\r\n\r\n", 0.1);
    let t = text(&got.data);
    assert!(t.starts_with("HTTP/1.1 200 OK\r\n"), "{t}");
    assert!(t.ends_with(&text(pattern::slice(0, 5))), "{t}");
    // Bare LF and the absolute form, pipelined on the same connection.
    let got = bed.exchange(
        h,
        b"GET /bytes/+5 HTTP/1.1\nHost: x\n\nGET http://x/bytes/2 HTTP/1.1\nHost: x\n\n",
        0.1,
    );
    let t = text(&got.data);
    assert!(t.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{t}");
    assert!(t.contains("HTTP/1.1 200 OK\r\n"), "{t}");
    assert!(!got.eof && !got.reset);
    let s = bed.http.stats();
    assert_eq!((s.requests, s.ok, s.client_errors), (3, 2, 1));
}

#[test]
fn a_huge_request_line_gets_its_431_before_the_close() {
    // Issue 13 item 4: a 1 MB request line. The server answers 431 after 8 KiB, shuts
    // its write side and discards the rest until the client's FIN (RFC 9112 §9.6), so
    // the client reads the answer and no reset destroys it.
    let mut bed = Bed::new(HttpConfig::default());
    let h = bed.connect(0);
    let mut req = b"GET /".to_vec();
    req.resize(1 << 20, b'a');
    req.extend_from_slice(b" HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut seen = Seen::default();
    bed.send(h, &req, &mut seen);
    assert!(!seen.reset, "reset while sending: {:?}", text(&seen.data));
    bed.run_for(0.5);
    let now = bed.now();
    bed.tcp().shutdown(now, h, Shutdown::Write).unwrap();
    bed.run_for(0.5);
    let more = bed.seen(h);
    seen.data.extend_from_slice(&more.data);
    let t = text(&seen.data);
    assert!(
        t.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        "{t}"
    );
    assert!(t.contains("Connection: close\r\n"), "{t}");
    assert!(more.eof && !more.reset && !seen.reset, "{more:?}");
    assert_eq!(bed.http.stats().lingered, 1);
    assert_eq!(bed.http.session_count(), 0);
}

#[test]
fn a_lingering_close_is_bounded_in_time() {
    // A client that never sends its FIN: the lingering close ends after linger_time.
    let cfg = HttpConfig {
        linger_time: Duration::from_secs(2),
        ..HttpConfig::default()
    };
    let mut bed = Bed::new(cfg);
    let h = bed.connect(0);
    let got = bed.exchange(h, b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", 1.0);
    assert!(text(&got.data).starts_with("HTTP/1.1 200 OK"));
    assert!(got.eof, "the FIN follows the answer");
    assert_eq!(bed.http.session_count(), 1, "lingering");
    bed.run_for(1.5);
    assert_eq!(bed.http.session_count(), 0);
    assert_eq!(bed.http.tcp_stats().linger_timeouts, 1);
}

#[test]
fn a_slow_request_head_times_out_with_408() {
    // Slowloris: one byte every second never completes a head within head_timeout,
    // although each byte is far within the idle timeout. RFC 9110 §15.5.9: the server
    // answers 408 with `Connection: close`, then closes (lingering, RFC 9112 §9.6).
    let cfg = HttpConfig {
        head_timeout: Duration::from_secs(5),
        ..HttpConfig::default()
    };
    let mut bed = Bed::new(cfg);
    let h = bed.connect(0);
    let mut seen = Seen::default();
    let line = b"GET /bytes/1 HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaa";
    let mut sent = 0;
    for &b in line {
        bed.send(h, &[b], &mut seen);
        bed.run_for(1.0);
        sent += 1;
        bed.read(h, &mut seen);
        if seen.eof || bed.http.session_count() == 0 {
            break;
        }
    }
    assert_eq!(bed.http.tcp_stats().head_timeouts, 1);
    assert!((5..=6).contains(&sent), "closed after {sent} s");
    let answer = text(&seen.data);
    assert!(
        answer.starts_with("HTTP/1.1 408 Request Timeout\r\n"),
        "{answer:?}"
    );
    assert!(answer.contains("Connection: close\r\n"), "{answer:?}");
    assert!(seen.eof && !seen.reset, "408 then FIN: {seen:?}");
    assert_eq!(bed.http.stats().request_timeouts, 1);
    // Our FIN ends the lingering close.
    let now = bed.now();
    bed.tcp().close(now, h).unwrap();
    bed.run_for(0.5);
    assert_eq!(bed.http.session_count(), 0);
    // A head that completes in time on a fresh connection is served.
    let h2 = bed.connect(1);
    let got = bed.exchange(h2, b"GET /bytes/1 HTTP/1.1\r\n\r\n", 0.1);
    assert!(text(&got.data).starts_with("HTTP/1.1 200 OK"));
}

#[test]
fn an_idle_connection_without_a_head_gets_no_408() {
    // The idle timeout closes a connection that never started a head: no answer is
    // owed (RFC 9110 §15.5.9 is for a request that did not complete).
    let cfg = HttpConfig {
        limits: Limits {
            idle_timeout: Some(Duration::from_secs(3)),
            ..HttpConfig::default().limits
        },
        ..HttpConfig::default()
    };
    let mut bed = Bed::new(cfg);
    let h = bed.connect(0);
    bed.run_for(4.0);
    let seen = bed.seen(h);
    assert!(seen.data.is_empty(), "{:?}", text(&seen.data));
    assert_eq!(bed.http.stats().request_timeouts, 0);
}

#[test]
fn an_idle_connection_is_closed() {
    let cfg = HttpConfig {
        limits: Limits {
            idle_timeout: Some(Duration::from_secs(30)),
            ..HttpConfig::default().limits
        },
        ..HttpConfig::default()
    };
    let mut bed = Bed::new(cfg);
    let h = bed.connect(0);
    let got = bed.exchange(h, b"GET /bytes/1 HTTP/1.1\r\n\r\n", 0.1);
    assert!(text(&got.data).starts_with("HTTP/1.1 200 OK"));
    bed.run_for(29.0);
    assert_eq!(bed.http.session_count(), 1, "not idle long enough yet");
    bed.run_for(1.5);
    assert_eq!(bed.http.session_count(), 0);
    assert_eq!(bed.http.tcp_stats().idle_closed, 1);
    let s = bed.seen(h);
    assert!(s.eof && !s.reset, "{s:?}");
}

#[test]
fn one_source_cannot_take_every_slot() {
    let cfg = HttpConfig {
        limits: Limits {
            max_sessions: 8,
            max_per_source: 3,
            idle_timeout: None,
        },
        ..HttpConfig::default()
    };
    let mut bed = Bed::new(cfg);
    let held: Vec<_> = (0..5).map(|_| bed.connect(0)).collect();
    bed.run_for(0.1);
    let st = bed.http.tcp_stats();
    assert_eq!((st.accepted, st.per_source_refused), (3, 2));
    assert_eq!(held.iter().filter(|&&h| bed.seen(h).reset).count(), 2);
    // Another host is served.
    let h = bed.connect(1);
    let got = bed.exchange(h, b"GET /bytes/1 HTTP/1.1\r\n\r\n", 0.1);
    assert!(text(&got.data).starts_with("HTTP/1.1 200 OK"));
}

#[test]
fn a_full_server_closes_its_oldest_idle_connection_for_a_new_one() {
    let cfg = HttpConfig {
        limits: Limits {
            max_sessions: 3,
            max_per_source: 3,
            idle_timeout: None,
        },
        ..HttpConfig::default()
    };
    let mut bed = Bed::new(cfg);
    let first = bed.connect(0);
    bed.run_for(1.0);
    let others: Vec<_> = (0..2).map(|_| bed.connect(0)).collect();
    bed.run_for(1.0);
    assert_eq!(bed.http.session_count(), 3);
    let h = bed.connect(1);
    let got = bed.exchange(h, b"GET /bytes/1 HTTP/1.1\r\n\r\n", 0.1);
    assert!(text(&got.data).starts_with("HTTP/1.1 200 OK"));
    let st = bed.http.tcp_stats();
    assert_eq!((st.evicted, st.refused), (1, 0));
    assert!(bed.seen(first).eof, "the oldest idle connection was closed");
    for o in others {
        let s = bed.seen(o);
        assert!(!s.eof && !s.reset, "{s:?}");
    }
}

#[test]
fn a_full_server_of_busy_connections_refuses_a_new_one() {
    // Connections in the middle of an answer are not idle: none is closed for room.
    let cfg = HttpConfig {
        limits: Limits {
            max_sessions: 2,
            max_per_source: 8,
            idle_timeout: None,
        },
        ..HttpConfig::default()
    };
    let mut bed = Bed::new(cfg);
    let busy: Vec<_> = (0..2).map(|_| bed.connect(0)).collect();
    for &h in &busy {
        // The client never reads: the server stays blocked sending.
        let mut seen = Seen::default();
        bed.send(h, b"GET /bytes/100000000 HTTP/1.1\r\n\r\n", &mut seen);
    }
    bed.run_for(1.0);
    let h = bed.connect(1);
    bed.run_for(0.1);
    assert!(bed.seen(h).reset, "refused with a reset");
    let st = bed.http.tcp_stats();
    assert_eq!((st.refused, st.evicted, st.per_source_refused), (1, 0, 0));
    assert_eq!(bed.http.session_count(), 2);
}

#[test]
fn a_reader_that_stalls_mid_answer_is_reset_by_the_idle_timeout() {
    let cfg = HttpConfig {
        limits: Limits {
            idle_timeout: Some(Duration::from_secs(10)),
            ..HttpConfig::default().limits
        },
        ..HttpConfig::default()
    };
    let mut bed = Bed::new(cfg);
    let h = bed.connect(0);
    let mut seen = Seen::default();
    bed.send(h, b"GET /bytes/100000000 HTTP/1.1\r\n\r\n", &mut seen);
    bed.run_for(9.0);
    assert_eq!(bed.http.session_count(), 1);
    bed.run_for(70.0);
    assert_eq!(bed.http.session_count(), 0);
    assert_eq!(bed.http.tcp_stats().idle_closed, 1);
    assert!(
        bed.seen(h).reset,
        "reset, not a FIN behind data that cannot leave"
    );
}

#[test]
fn slowloris_connections_do_not_lock_others_out() {
    // 200 connections from one host each hold half a request head; the server holds 64.
    // Clients from another host are still served, throughout and after the heads time out.
    let cfg = HttpConfig {
        limits: Limits {
            max_sessions: 64,
            max_per_source: 1000,
            idle_timeout: Some(Duration::from_secs(60)),
        },
        head_timeout: Duration::from_secs(5),
        ..HttpConfig::default()
    };
    let mut tcp = TcpConfig::default();
    (tcp.send_buffer_len, tcp.recv_buffer_len) = (16 * 1024, 16 * 1024);
    let mut bed = Bed::with_tcp(cfg, tcp);
    let mut slow = Vec::new();
    let mut served = 0;
    for i in 0..200 {
        let h = bed.connect(0);
        let mut seen = Seen::default();
        bed.send(h, b"GET / HTTP/1.1\r\nX-Slow: ", &mut seen);
        slow.push(h);
        if i % 40 == 39 {
            let c = bed.connect(1);
            let got = bed.exchange(c, b"GET /bytes/1 HTTP/1.1\r\n\r\n", 0.1);
            served += usize::from(text(&got.data).starts_with("HTTP/1.1 200 OK"));
        }
    }
    assert_eq!(served, 5, "served during the attack");
    assert!(bed.http.session_count() <= 64);
    bed.run_for(6.0);
    let st = bed.http.tcp_stats();
    assert!(st.evicted >= 136 && st.head_timeouts >= 1, "{st:?}");
    let c = bed.connect(1);
    let got = bed.exchange(c, b"GET /bytes/1 HTTP/1.1\r\n\r\n", 0.1);
    assert!(text(&got.data).starts_with("HTTP/1.1 200 OK"));
}
