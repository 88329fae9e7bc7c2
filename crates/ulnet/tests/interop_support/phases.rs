//! The checks the interop tests share, one phase each, as methods of a [`Session`]:
//! ulnet serving [`Services`] at `ip`, the kernel peer in namespace `ns`. Each asserts
//! with a message naming the direction that failed.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use ulnet::net::StackBuilder;
use ulnet::runtime::{AnyChannel, App, Runtime};
use ulnet::stack::iface::{Interface, Lookup};
use ulnet::stack::tcp::Event;
use ulnet::stack::time::Instant;
use ulnet_apps::http::{Http, HttpConfig};
use ulnet_apps::server::Limits;
use ulnet_bench::testbed::Side;

use super::{
    curl, kernel_neighbor, kernel_tcp_server, kernel_udp_echo, output_in, pattern_sha, serve_until,
    serve_while, text, ulnet_bulk, ulnet_ping, ulnet_ping_with, write_pattern, Scratch, Services,
};

/// How long one phase may serve before a hung peer fails the test.
pub const LIMIT: Duration = Duration::from_secs(60);
/// [`LIMIT`] for a phase under 2% loss, where TCP spends time in recovery.
pub const LOSS_LIMIT: Duration = Duration::from_secs(90);

/// `ping -c COUNT -i 0.2 -W 2 IP` by the kernel in `ns` (any exit status).
pub fn ping_from(ns: &str, ip: IpAddr, count: u32) -> Output {
    let (count, ip) = (count.to_string(), ip.to_string());
    output_in(ns, "ping", &["-c", &count, "-i", "0.2", "-W", "2", &ip])
}

/// ulnet's runtime with its [`Services`] at `ip`, and the kernel peer's namespace `ns`.
/// Dropping it closes the runtime (detaching the channel, flushing a capture).
pub struct Session {
    pub rt: Runtime<AnyChannel>,
    pub s: Services,
    pub ip: IpAddr,
    pub ns: String,
}

impl Session {
    /// Builds the runtime `builder` describes and starts the services at its address;
    /// the kernel peer is in namespace `ns`.
    pub fn open(builder: StackBuilder, ns: &str) -> Session {
        let what = format!("{builder:?}");
        let mut rt = builder
            .build_runtime()
            .unwrap_or_else(|e| panic!("open the runtime {what}: {e}"));
        // IPv6 addresses pass duplicate address detection before any phase uses them.
        let settle = rt.settle_timeout();
        rt.settle_addresses(settle)
            .unwrap_or_else(|e| panic!("settle the addresses of {what}: {e}"));
        let ip = rt.iface().config().addresses[0].address();
        let s = Services::start(&rt, ip);
        Session {
            rt,
            s,
            ip,
            ns: ns.to_owned(),
        }
    }

    /// [`serve_while`] with the services, within [`LIMIT`].
    pub fn serve_while<T: Send>(&mut self, work: impl FnOnce() -> T + Send) -> T {
        serve_while(&mut self.rt, &mut self.s, LIMIT, work)
    }

    /// The kernel learned `mac` for ulnet's address by ARP.
    pub fn check_kernel_learned(&self, mac: &str) {
        assert_eq!(
            kernel_neighbor(&self.ns, self.ip).as_deref(),
            Some(mac),
            "ARP kernel → ulnet: the kernel did not learn ulnet's MAC"
        );
    }

    /// The kernel pings ulnet three times (resolving it by ARP first, so it must then
    /// hold `mac` for it), and ulnet pings the kernel at `kernel` three times.
    pub fn check_pings_both_ways(&mut self, mac: &str, kernel: IpAddr) {
        let (ns, ip) = (self.ns.clone(), self.ip);
        let ping = self.serve_while(|| ping_from(&ns, ip, 3));
        assert!(
            ping.status.success(),
            "kernel → ulnet ping: {}",
            text(&ping)
        );
        self.check_kernel_learned(mac);
        self.check_ulnet_pings(kernel);
    }

    /// The kernel peer `side` changes its MAC to `new_mac` without telling anyone (no
    /// unsolicited announcement: `arp_notify` and `ndisc_notify` are 0). `count` pings
    /// from ulnet to `peer`, 500 ms apart: the first go to the old MAC and are lost until
    /// unreachability detection has run (reachable time, DELAY, three unanswered probes),
    /// the entry is resolved again by broadcast or multicast, and the rest are answered;
    /// ulnet ends with the new MAC.
    pub fn check_follows_mac_change(
        &mut self,
        side: &Side,
        peer: IpAddr,
        new_mac: &str,
        count: u16,
        ident: u16,
    ) {
        let o = output_in(
            &side.ns,
            "ip",
            &["link", "set", "dev", &side.ifname, "address", new_mac],
        );
        assert!(o.status.success(), "changing the peer's MAC: {}", text(&o));
        let got = ulnet_ping_with(
            &mut self.rt,
            &mut self.s,
            peer,
            count,
            Duration::from_millis(500),
            ident,
        );
        assert!(
            got >= 5 && got < u32::from(count),
            "{got} of {count} replies after the MAC change"
        );
        let i = self.rt.iface();
        let now = self.rt.now();
        assert!(
            matches!(i.neighbors().lookup(peer, now), Lookup::Found(m) if m.to_string() == new_mac),
            "ulnet did not learn the peer's new MAC"
        );
    }

    /// ulnet pings the kernel at `kernel` three times and gets every reply.
    pub fn check_ulnet_pings(&mut self, kernel: IpAddr) {
        assert_eq!(
            ulnet_ping(&mut self.rt, &mut self.s, kernel, 3),
            3,
            "ulnet → kernel ping"
        );
    }

    /// A kernel UDP client gets `count` datagrams echoed intact by ulnet's echo service.
    pub fn check_udp_echo(&mut self, count: usize) {
        let (ns, to) = (self.ns.clone(), SocketAddr::new(self.ip, 7));
        let echoed = self.serve_while(|| kernel_udp_echo(&ns, to, count));
        assert_eq!(echoed, count, "UDP echoes intact");
    }

    /// curl fetches `len` pattern bytes from ulnet's HTTP server into `out`, intact.
    pub fn check_curl(&mut self, len: u64, out: &Path) {
        let url = super::http_url(self.ip, 80, &format!("bytes/{len}"));
        let ns = self.ns.clone();
        let got = self.serve_while(|| curl(&ns, &url, out));
        assert_eq!(got, (len, pattern_sha(len)), "curl body");
    }

    /// socat sends a file of `len` pattern bytes to ulnet's discard service, which must
    /// count them all, in order.
    pub fn check_socat_to_discard(&mut self, scratch: &Scratch, len: u64) {
        let file = scratch.path("up");
        write_pattern(&file, len);
        let src = format!("FILE:{}", file.display());
        let dst = match self.ip {
            IpAddr::V4(ip) => format!("TCP4:{ip}:9"),
            IpAddr::V6(ip) => format!("TCP6:[{ip}]:9"),
        };
        // Counted from what the discard service saw before, so a session may run this
        // more than once.
        let (before, done) = (self.s.discard.stats(), self.s.discard.tcp_stats().finished);
        let sent = serve_until(
            &mut self.rt,
            &mut self.s,
            LIMIT,
            &self.ns,
            "socat",
            &["-u", &src, &dst],
            |s| s.discard.tcp_stats().finished > done,
        );
        assert!(sent.status.success(), "socat → discard: {}", text(&sent));
        let st = self.s.discard.stats();
        assert_eq!(
            (
                st.tcp_bytes - before.tcp_bytes,
                st.tcp_pattern_ok - before.tcp_pattern_ok
            ),
            (len, 1),
            "discard saw {st:?}, {before:?} before"
        );
    }

    /// ulnet connects to a kernel server at `server`; ulnet sends `ulnet_sends` pattern
    /// bytes, the kernel `kernel_sends`, and both sides get theirs intact.
    pub fn check_bulk(&mut self, server: SocketAddr, ulnet_sends: u64, kernel_sends: u64) {
        let kernel = kernel_tcp_server(&self.ns, server, kernel_sends);
        let r = ulnet_bulk(&mut self.rt, &mut self.s, self.ip, server, ulnet_sends);
        assert!(!r.failed && r.sent == ulnet_sends, "ulnet ⇄ kernel: {r:?}");
        assert_eq!(
            (r.received, r.received_pattern_ok),
            (kernel_sends, true),
            "ulnet received"
        );
        assert_eq!(
            kernel.join().unwrap(),
            (ulnet_sends, pattern_sha(ulnet_sends)),
            "kernel received"
        );
    }

    /// With 2% random loss each way on `peer` (nftables), curl there still fetches `len`
    /// bytes intact. Returns how many packets the loss rules dropped.
    pub fn check_curl_under_loss(&mut self, peer: &Side, len: u64, out: &Path) -> u64 {
        peer.set_loss(2).expect("nft loss rules");
        self.curl_with_loss_set(peer, len, out)
    }

    /// [`Session::check_curl_under_loss`] with every `n`th packet dropped each way on
    /// `peer` instead of a random 2%: as many drops in every run.
    pub fn check_curl_dropping_every(&mut self, peer: &Side, n: u32, len: u64, out: &Path) -> u64 {
        peer.set_loss_every(n).expect("nft loss rules");
        self.curl_with_loss_set(peer, len, out)
    }

    fn curl_with_loss_set(&mut self, peer: &Side, len: u64, out: &Path) -> u64 {
        let url = super::http_url(self.ip, 80, &format!("bytes/{len}"));
        let ns = &self.ns;
        let got = serve_while(&mut self.rt, &mut self.s, LOSS_LIMIT, || {
            curl(ns, &url, out)
        });
        let drops = ulnet_bench::testbed::loss_drops(&peer.ns).unwrap_or(0);
        peer.clear_loss().unwrap();
        assert_eq!(got, (len, pattern_sha(len)), "curl body under loss");
        drops
    }
}

/// The services and a second HTTP server, polled together.
struct WithHttp<'a>(&'a mut Services, &'a mut Http);

impl App for WithHttp<'_> {
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        self.0.poll(now, iface, events);
        self.1.poll(now, iface, events);
    }
    fn poll_at(&self) -> Option<Instant> {
        match (self.0.poll_at(), self.1.poll_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// How a kernel client's read ended.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadEnd {
    /// FIN (read returned 0).
    Eof,
    /// ECONNRESET.
    Reset,
    /// Nothing within the read timeout.
    TimedOut,
    /// Another error.
    Other(String),
}

/// Reads from `c` until EOF, reset or `limit`; returns what arrived and how it ended.
pub fn read_until_end(c: &mut TcpStream, limit: Duration) -> (Vec<u8>, ReadEnd) {
    c.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return (got, ReadEnd::Eof),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return (got, ReadEnd::Reset),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return (got, ReadEnd::TimedOut)
            }
            Err(e) => return (got, ReadEnd::Other(e.to_string())),
        }
    }
}

impl Session {
    /// Issue 13 on a real kernel peer: a 1 MB request line gets its 431 before the close
    /// (lingering close), curl gets 431 for a 100 KB one and 404 for a symbolic link out
    /// of `--root`; on a second server with short limits, a slow request head and an idle
    /// connection are closed by their timeouts and a fifth connection from one host is
    /// refused by the per-source limit while another request is served.
    pub fn check_http_limits(&mut self, scratch: &Scratch) {
        let root = scratch.path("www");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("index.html"), b"<p>hello</p>\n").unwrap();
        std::os::unix::fs::symlink("/etc", root.join("etc")).unwrap();
        let short = HttpConfig {
            root: Some(root),
            limits: Limits {
                max_sessions: 64,
                max_per_source: 4,
                idle_timeout: Some(ulnet::stack::time::Duration::from_secs(3)),
            },
            head_timeout: ulnet::stack::time::Duration::from_secs(2),
            ..HttpConfig::default()
        };
        let port = 8080;
        let mut http = Http::new(&mut self.rt.iface(), SocketAddr::new(self.ip, port), short)
            .expect("second HTTP server");
        let (ns, ip) = (self.ns.clone(), self.ip);
        let long_line = format!("http://{ip}/{}", "a".repeat(100_000));
        let (huge, curl_431, curl_404, curl_ok, slow, idle, refused) = serve_while(
            &mut self.rt,
            &mut WithHttp(&mut self.s, &mut http),
            LIMIT,
            || {
                let code = |url: &str| {
                    let o = output_in(
                        &ns,
                        "curl",
                        &[
                            "-sS",
                            "-o",
                            "/dev/null",
                            "-w",
                            "%{http_code}",
                            "--max-time",
                            "20",
                            url,
                        ],
                    );
                    String::from_utf8_lossy(&o.stdout).into_owned()
                };
                let curl_431 = code(&long_line);
                let curl_404 = code(&format!("http://{ip}:{port}/etc/passwd"));
                let curl_ok = code(&format!("http://{ip}:{port}/"));
                let _g = ulnet::channel::sys::netns::enter(&ns).expect("enter netns");
                // A 1 MB request line: the whole request is written (the server reads
                // and discards it), then the 431 and a FIN arrive, no reset.
                let mut c = TcpStream::connect((ip, 80)).expect("connect :80");
                let mut req = b"GET /".to_vec();
                req.resize(1 << 20, b'a');
                req.extend_from_slice(b" HTTP/1.1\r\nHost: x\r\n\r\n");
                c.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
                let wrote = c.write_all(&req).map_err(|e| e.to_string());
                let _ = c.shutdown(std::net::Shutdown::Write);
                let huge = (wrote, read_until_end(&mut c, Duration::from_secs(20)));
                // Slowloris: half a head, then nothing. The server answers 408 (RFC 9110
                // §15.5.9) and closes; this client closes too once it read the answer
                // (the server's lingering close then ends at once).
                let mut c = TcpStream::connect((ip, port)).expect("connect");
                c.write_all(b"GET / HTTP/1.1\r\nX-Slow: a").unwrap();
                let slow = read_until_end(&mut c, Duration::from_secs(15));
                drop(c);
                // An idle keep-alive connection after one answer.
                let mut c = TcpStream::connect((ip, port)).expect("connect");
                c.write_all(b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\n\r\n")
                    .unwrap();
                let idle = read_until_end(&mut c, Duration::from_secs(15));
                // Four held connections from this host, the fifth refused.
                let held: Vec<TcpStream> = (0..4)
                    .map(|_| TcpStream::connect((ip, port)).expect("connect"))
                    .collect();
                std::thread::sleep(Duration::from_millis(300));
                // The RST can come before connect(2) returns: then connect reports it.
                let refused = match TcpStream::connect((ip, port)) {
                    Ok(mut fifth) => read_until_end(&mut fifth, Duration::from_secs(5)).1,
                    Err(e) if e.kind() == ErrorKind::ConnectionReset => ReadEnd::Reset,
                    Err(e) => ReadEnd::Other(format!("connect: {e}")),
                };
                drop(held);
                (huge, curl_431, curl_404, curl_ok, slow, idle, refused)
            },
        );
        let (wrote, (body, end)) = huge;
        let text = String::from_utf8_lossy(&body);
        assert_eq!(wrote, Ok(()), "1 MB request line: write");
        assert!(
            text.starts_with("HTTP/1.1 431 ") && end == ReadEnd::Eof,
            "1 MB request line: {end:?} after {text:?}"
        );
        assert_eq!(curl_431, "431", "curl, 100 KB request line");
        assert_eq!(curl_404, "404", "curl, a symbolic link out of the root");
        assert_eq!(curl_ok, "200", "curl, the root's index");
        let (slow_body, slow_end) = slow;
        assert!(
            String::from_utf8_lossy(&slow_body).starts_with("HTTP/1.1 408 Request Timeout")
                && slow_end == ReadEnd::Eof,
            "slow head: {slow_end:?} after {:?}",
            String::from_utf8_lossy(&slow_body)
        );
        let (idle_body, idle_end) = idle;
        assert!(
            String::from_utf8_lossy(&idle_body).starts_with("HTTP/1.1 200 OK")
                && idle_end == ReadEnd::Eof,
            "idle connection: {idle_end:?}"
        );
        assert_eq!(refused, ReadEnd::Reset, "fifth connection from one host");
        let st = http.tcp_stats();
        assert!(
            st.head_timeouts == 1 && st.idle_closed >= 1 && st.per_source_refused == 1,
            "{st:?}"
        );
        assert!(
            self.s.http.stats().lingered >= 2,
            "{:?}",
            self.s.http.stats()
        );
    }
}
