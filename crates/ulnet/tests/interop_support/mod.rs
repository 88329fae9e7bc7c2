//! Shared by the kernel interop tests (`interop_*.rs`): a testbed, ulnet's services in
//! one runtime, kernel-side peers (ping, curl, socat, std sockets inside a namespace),
//! pattern hashes. Missing tools or privileges fail with what is missing.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};
use ulnet::runtime::{AnyChannel, App, Runtime};
use ulnet::stack::iface::Interface;
use ulnet::stack::tcp::Event;
use ulnet::stack::time::Instant;
use ulnet_apps::bulk::{BulkClient, BulkResult};
use ulnet_apps::discard::Discard;
use ulnet_apps::echo::Echo;
use ulnet_apps::http::{Http, HttpConfig};
use ulnet_apps::pattern;
use ulnet_apps::ping::{Ping, PingConfig};
use ulnet_bench::Testbed;

mod phases;
#[allow(unused_imports)] // a test of the socket API alone uses none of the phases
pub use phases::*;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Every tool the interop tests use, checked up front with a clear message.
pub fn preflight() {
    ulnet_bench::preflight::require_net_admin()
        .unwrap_or_else(|e| panic!("interop tests need root (CAP_NET_ADMIN, CAP_BPF): {e}"));
    for tool in ["ip", "ping", "curl", "socat", "nft", "tshark", "ethtool"] {
        ulnet_bench::preflight::require_tool(tool)
            .unwrap_or_else(|e| panic!("interop tests need `{tool}`: {e}"));
    }
}

/// A fresh testbed labelled `label`.
pub fn testbed(label: &str) -> Testbed {
    preflight();
    Testbed::builder()
        .name_prefix(label)
        .build()
        .unwrap_or_else(|e| panic!("cannot build the testbed: {e}"))
}

/// A fresh testbed labelled `label` with MTU `mtu` on both ends.
pub fn testbed_mtu(label: &str, mtu: u32) -> Testbed {
    preflight();
    Testbed::builder()
        .name_prefix(label)
        .mtu(mtu)
        .build()
        .unwrap_or_else(|e| panic!("cannot build the testbed: {e}"))
}

/// A scratch directory in /dev/shm, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new() -> Scratch {
        let p = PathBuf::from("/dev/shm").join(format!(
            "ulnet-interop-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// SHA-256 of `pattern` bytes `0..len`, hex.
pub fn pattern_sha(len: u64) -> String {
    let mut h = Sha256::new();
    let mut off = 0;
    while off < len {
        let n = (len - off).min(pattern::MAX_CHUNK as u64) as usize;
        h.update(pattern::slice(off, n));
        off += n as u64;
    }
    hex(&h.finalize())
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn file_sha(path: &Path) -> (u64, String) {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    (data.len() as u64, hex(&Sha256::digest(&data)))
}

/// Writes `len` pattern bytes to `path`.
pub fn write_pattern(path: &Path, len: u64) {
    let mut f = std::fs::File::create(path).unwrap();
    let mut off = 0;
    while off < len {
        let n = (len - off).min(pattern::MAX_CHUNK as u64) as usize;
        f.write_all(pattern::slice(off, n)).unwrap();
        off += n as u64;
    }
}

/// Runs `program args` in namespace `ns` and returns its output (any exit status).
pub fn output_in(ns: &str, program: &str, args: &[&str]) -> Output {
    ulnet_bench::exec::output_in(ns, program, args)
        .unwrap_or_else(|e| panic!("cannot run {program} in {ns}: {e}"))
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// ulnet's servers on one stack: echo on 7, discard on 9, HTTP on 80.
pub struct Services {
    pub echo: Echo,
    pub discard: Discard,
    pub http: Http,
}

impl Services {
    pub fn start(rt: &Runtime<AnyChannel>, ip: IpAddr) -> Services {
        let mut i = rt.iface();
        Services {
            echo: Echo::new(&mut i, SocketAddr::new(ip, 7)).unwrap(),
            discard: Discard::new(&mut i, SocketAddr::new(ip, 9)).unwrap(),
            http: Http::new(&mut i, SocketAddr::new(ip, 80), HttpConfig::default()).unwrap(),
        }
    }
}

impl App for Services {
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        self.echo.poll(now, iface, events);
        self.discard.poll(now, iface, events);
        self.http.poll(now, iface, events);
    }
    fn poll_at(&self) -> Option<Instant> {
        // The servers' idle, request-head and linger timeouts fire without any event.
        [
            self.echo.poll_at(),
            self.discard.poll_at(),
            self.http.poll_at(),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

/// The services and a client app, until the client is done.
pub struct Until<'a, C>(pub &'a mut Services, pub &'a mut C);

impl<C: App> App for Until<'_, C> {
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        self.0.poll(now, iface, events);
        self.1.poll(now, iface, events);
    }
    fn poll_at(&self) -> Option<Instant> {
        self.1.poll_at()
    }
    fn is_done(&self) -> bool {
        self.1.is_done()
    }
}

/// Runs the loop on this thread with `app` while `work` runs on another; stops the loop
/// when `work` returns (or after `limit`, so a hung peer fails the test).
pub fn serve_while<T: Send>(
    rt: &mut Runtime<AnyChannel>,
    app: &mut dyn App,
    limit: Duration,
    work: impl FnOnce() -> T + Send,
) -> T {
    let h = rt.handle();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let h2 = rt.handle();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(limit).is_err() {
            h2.stop();
        }
    });
    let out = std::thread::scope(|s| {
        let worker = s.spawn(move || {
            let r = work();
            h.stop();
            r
        });
        let r = rt.run(app);
        let out = worker
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        r.expect("the runtime failed");
        out
    });
    let _ = done_tx.send(());
    let _ = watchdog.join();
    out
}

/// ulnet pings `target` `count` times (100 ms apart); returns replies received.
pub fn ulnet_ping(
    rt: &mut Runtime<AnyChannel>,
    s: &mut Services,
    target: IpAddr,
    count: u16,
) -> u32 {
    let mut cfg = PingConfig::new(target, count);
    cfg.interval = Duration::from_millis(100);
    cfg.timeout = Duration::from_secs(2);
    let mut ping = Ping::new(&mut rt.iface(), cfg, Box::new(|_| {})).unwrap();
    run_client(rt, s, &mut ping, Duration::from_secs(10));
    // The socket stays in the set; a second ping needs another identifier.
    ping.summary().received
}

/// ulnet pings `target` `count` times `interval` apart with echo identifier `ident`
/// (each ping in one runtime needs its own); returns replies received.
pub fn ulnet_ping_with(
    rt: &mut Runtime<AnyChannel>,
    s: &mut Services,
    target: IpAddr,
    count: u16,
    interval: Duration,
    ident: u16,
) -> u32 {
    let mut cfg = PingConfig::new(target, count);
    cfg.interval = interval;
    cfg.timeout = Duration::from_secs(2);
    cfg.ident = ident;
    let mut ping = Ping::new(&mut rt.iface(), cfg, Box::new(|_| {})).unwrap();
    let limit = interval * u32::from(count) + Duration::from_secs(10);
    run_client(rt, s, &mut ping, limit);
    ping.summary().received
}

/// A fresh testbed with IPv6 on both ends (2001:2:0:<slot>::/64) and MTU `mtu`.
pub fn testbed6(label: &str, mtu: u32) -> Testbed {
    preflight();
    Testbed::builder()
        .name_prefix(label)
        .ipv6(true)
        .mtu(mtu)
        .build()
        .unwrap_or_else(|e| panic!("cannot build the IPv6 testbed: {e}"))
}

/// The MSS option of every SYN over IPv6 in `pcap`, with its source address.
pub fn ipv6_syn_mss(pcap: &Path) -> Vec<(IpAddr, Option<u16>)> {
    let raw = std::fs::read(pcap).unwrap();
    let mut out = Vec::new();
    let mut off = 24usize;
    while off + 16 <= raw.len() {
        let incl = u32::from_le_bytes(raw[off + 8..off + 12].try_into().unwrap()) as usize;
        let rec = &raw[off + 16..(off + 16 + incl).min(raw.len())];
        off += 16 + incl;
        // Ethernet, IPv6 (next header TCP, no extension headers), TCP.
        if rec.len() < 14 + 40 + 20 || rec[12..14] != [0x86, 0xdd] || rec[14 + 6] != 6 {
            continue;
        }
        let src: [u8; 16] = rec[14 + 8..14 + 24].try_into().unwrap();
        let tcp = &rec[54..];
        if tcp[13] & 0x02 == 0 {
            continue;
        }
        let hdr = usize::from(tcp[12] >> 4) * 4;
        let opts = &tcp[20..hdr.min(tcp.len()).max(20)];
        let mut mss = None;
        let mut i = 0;
        while i < opts.len() {
            match opts[i] {
                0 => break,
                1 => i += 1,
                kind => {
                    let Some(&len) = opts.get(i + 1) else { break };
                    if kind == 2 && len == 4 && i + 4 <= opts.len() {
                        mss = Some(u16::from_be_bytes([opts[i + 2], opts[i + 3]]));
                    }
                    i += usize::from(len.max(2));
                }
            }
        }
        out.push((IpAddr::from(src), mss));
    }
    out
}

/// Runs `client` with the services until it is done or `limit` passes.
pub fn run_client<C: App>(
    rt: &mut Runtime<AnyChannel>,
    s: &mut Services,
    client: &mut C,
    limit: Duration,
) {
    let h = rt.handle();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if rx.recv_timeout(limit).is_err() {
            h.stop();
        }
    });
    rt.run(&mut Until(s, client)).expect("the runtime failed");
    let _ = tx.send(());
    let _ = watchdog.join();
}

/// ulnet connects to `remote` and sends `send_len` pattern bytes, reading until the peer
/// closes.
pub fn ulnet_bulk(
    rt: &mut Runtime<AnyChannel>,
    s: &mut Services,
    local: IpAddr,
    remote: SocketAddr,
    send_len: u64,
) -> BulkResult {
    let now = rt.now();
    let mut c = BulkClient::connect(
        &mut rt.iface(),
        now,
        SocketAddr::new(local, 0),
        remote,
        send_len,
        ulnet::stack::time::Duration::from_secs(60),
    )
    .expect("connect");
    run_client(rt, s, &mut c, Duration::from_secs(70));
    c.result()
}

/// A kernel TCP server in namespace `ns` for one connection: sends `send_len` pattern
/// bytes, reads everything, returns (bytes read, their SHA-256).
pub fn kernel_tcp_server(
    ns: &str,
    addr: SocketAddr,
    send_len: u64,
) -> std::thread::JoinHandle<(u64, String)> {
    let ns = ns.to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let _g = ulnet::channel::sys::netns::enter(&ns).expect("enter netns");
        let l = TcpListener::bind(addr).expect("bind kernel server");
        tx.send(()).unwrap();
        let (mut c, _) = l.accept().expect("accept");
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let writer = {
            let mut w = c.try_clone().unwrap();
            std::thread::spawn(move || {
                let mut off = 0;
                while off < send_len {
                    let n = (send_len - off).min(pattern::MAX_CHUNK as u64) as usize;
                    w.write_all(pattern::slice(off, n)).expect("kernel write");
                    off += n as u64;
                }
                let _ = w.shutdown(std::net::Shutdown::Write);
            })
        };
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 65536];
        let mut total = 0u64;
        loop {
            let n = c.read(&mut buf).expect("kernel read");
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            total += n as u64;
        }
        writer.join().unwrap();
        (total, hex(&h.finalize()))
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("kernel server did not start");
    t
}

/// A kernel UDP client in `ns`: sends `count` datagrams of growing sizes to `target` and
/// checks every echo; returns the echoes received intact.
pub fn kernel_udp_echo(ns: &str, target: SocketAddr, count: usize) -> usize {
    let ns = ns.to_owned();
    std::thread::spawn(move || {
        let _g = ulnet::channel::sys::netns::enter(&ns).expect("enter netns");
        let any: IpAddr = if target.is_ipv6() {
            std::net::Ipv6Addr::UNSPECIFIED.into()
        } else {
            std::net::Ipv4Addr::UNSPECIFIED.into()
        };
        let s = UdpSocket::bind((any, 0)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut ok = 0;
        let mut buf = vec![0u8; 2048];
        for i in 0..count {
            let len = 1 + (i * 37) % 1472;
            let msg = pattern::slice(i as u64 * 11, len);
            s.send_to(msg, target).unwrap();
            if let Ok((n, from)) = s.recv_from(&mut buf) {
                if from == target && &buf[..n] == msg {
                    ok += 1;
                }
            }
        }
        ok
    })
    .join()
    .unwrap()
}

/// `http://ip:port/path`, with an IPv6 address in brackets (RFC 3986 §3.2.2).
pub fn http_url(ip: IpAddr, port: u16, path: &str) -> String {
    format!("http://{}/{path}", SocketAddr::new(ip, port))
}

/// Fetches `url` with curl in `ns` into `out`; returns (length, SHA-256).
pub fn curl(ns: &str, url: &str, out: &Path) -> (u64, String) {
    let o = output_in(
        ns,
        "curl",
        &[
            "-sS",
            "--fail",
            // An IPv6 literal's brackets are not a glob range.
            "-g",
            "--max-time",
            "60",
            "-o",
            out.to_str().unwrap(),
            url,
        ],
    );
    assert!(o.status.success(), "curl {url}: {}", text(&o));
    file_sha(out)
}

/// Whether any XDP program is attached to `ifname` in `ns`.
pub fn xdp_attached(ns: &str, ifname: &str) -> bool {
    let o = output_in(ns, "ip", &["-d", "link", "show", "dev", ifname]);
    assert!(o.status.success(), "ip link show: {}", text(&o));
    let t = text(&o);
    t.contains("prog/xdp") || t.contains(" xdp") || t.contains("xdpgeneric")
}

/// The MAC the kernel in `ns` has for `ip` (after `ping`), from `ip neigh`.
pub fn kernel_neighbor(ns: &str, ip: IpAddr) -> Option<String> {
    let o = output_in(ns, "ip", &["neigh", "show", "to", &ip.to_string()]);
    let t = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut it = t.split_whitespace();
    while let Some(w) = it.next() {
        if w == "lladdr" {
            return it.next().map(str::to_owned);
        }
    }
    None
}

/// tshark finds no malformed packet and no checksum (or other error-level) problem in
/// `pcap`, which holds at least `min_frames` frames; and every byte a TCP segment in it
/// carries again equals the byte first sent at that sequence number
/// ([`retransmissions_match`]).
///
/// tshark's TCP reassembly is off for this check: with it on, Wireshark's HTTP
/// desegmenter flags a retransmission that overlaps data it already reassembled
/// ("Reassembly error, protocol TCP: New fragment overlaps old data") even when the bytes
/// are identical, which made the test fail now and then on a lossy run (issue 12). What
/// that message would have caught, a retransmission with other bytes, is checked here
/// directly instead.
pub fn tshark_clean(pcap: &Path, min_frames: u64) {
    tshark_clean_with(pcap, min_frames, &[]);
}

/// [`tshark_clean`] up to the transport layer: TCP payload on `ports` is read as plain
/// data. With TCP reassembly off, the HTTP dissector (and heuristic ones such as
/// Thrift's) read a body segment that happens to look like their protocol, e.g. one
/// starting with CR LF, as a malformed message; a 100 MB download of the test pattern
/// has such segments somewhere.
pub fn tshark_clean_transport(pcap: &Path, min_frames: u64, ports: &[u16]) {
    let decode: Vec<String> = ports
        .iter()
        .map(|p| format!("tcp.port=={p},data"))
        .collect();
    let mut extra = Vec::new();
    for d in &decode {
        extra.extend(["-d", d.as_str()]);
    }
    tshark_clean_with(pcap, min_frames, &extra);
}

fn tshark_clean_with(pcap: &Path, min_frames: u64, extra: &[&str]) {
    let p = pcap.to_str().unwrap();
    let o = std::process::Command::new("tshark")
        .args(extra)
        .args([
            "-r",
            p,
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "tcp.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
            "-o",
            "tcp.desegment_tcp_streams:FALSE",
            "-Y",
            "_ws.malformed || _ws.expert.severity >= error",
        ])
        .output()
        .expect("run tshark");
    assert!(o.status.success(), "tshark failed: {}", text(&o));
    let bad = String::from_utf8_lossy(&o.stdout);
    let bad: Vec<&str> = bad.lines().take(20).collect();
    assert!(
        bad.is_empty(),
        "tshark flags {} frames, e.g.:\n{}",
        bad.len(),
        bad.join("\n")
    );
    let n = pcap_frames(pcap);
    assert!(n >= min_frames, "pcap holds only {n} frames");
    retransmissions_match(pcap);
}

/// Every TCP payload byte (over IPv4 or IPv6) in `pcap` that was already seen in an
/// earlier segment of the same direction of the same connection equals it (a retransmission resends the same
/// bytes, RFC 9293 §3.10.7); panics naming the first difference. Returns the number of
/// bytes seen again.
pub fn retransmissions_match(pcap: &Path) -> u64 {
    use std::collections::HashMap;
    use ulnet::wire::{EtherType, EthernetFrame, IpProtocol, Ipv4Packet, TcpPacket};

    /// One direction of one connection: its bytes by offset from the first sequence
    /// number seen, and which offsets are known.
    #[derive(Default)]
    struct Flow {
        base: Option<u32>,
        data: Vec<u8>,
        known: Vec<bool>,
    }
    let raw = std::fs::read(pcap).unwrap();
    let mut flows: HashMap<(IpAddr, u16, IpAddr, u16), Flow> = HashMap::new();
    let (mut off, mut frame, mut again) = (24usize, 0u64, 0u64);
    while off + 16 <= raw.len() {
        let incl = u32::from_le_bytes(raw[off + 8..off + 12].try_into().unwrap()) as usize;
        let rec = &raw[off + 16..(off + 16 + incl).min(raw.len())];
        off += 16 + incl;
        frame += 1;
        let Ok(eth) = EthernetFrame::new_checked(rec) else {
            continue;
        };
        let (src, dst, segment) = match eth.ethertype() {
            EtherType::Ipv4 => {
                let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
                    continue;
                };
                if ip.protocol() != IpProtocol::Tcp || ip.is_fragment() {
                    continue;
                }
                (
                    IpAddr::V4(ip.src_addr()),
                    IpAddr::V4(ip.dst_addr()),
                    ip.payload(),
                )
            }
            // IPv6 with TCP right after the fixed header (what ulnet and the kernel send
            // here: no extension headers, no fragments).
            EtherType::Ipv6 => {
                let p = eth.payload();
                if p.len() < 40 || p[6] != 6 {
                    continue;
                }
                let len = 40 + usize::from(u16::from_be_bytes([p[4], p[5]]));
                let src: [u8; 16] = p[8..24].try_into().unwrap();
                let dst: [u8; 16] = p[24..40].try_into().unwrap();
                (
                    IpAddr::from(src),
                    IpAddr::from(dst),
                    &p[40..len.min(p.len())],
                )
            }
            _ => continue,
        };
        let Ok(tcp) = TcpPacket::new_checked(segment) else {
            continue;
        };
        let key = (src, tcp.src_port(), dst, tcp.dst_port());
        let f = flows.entry(key).or_default();
        // Payload starts one past a SYN's sequence number.
        let seq = tcp.seq_number().0.wrapping_add(u32::from(tcp.syn()));
        if tcp.syn() {
            // A new connection on the same ports starts the flow afresh.
            *f = Flow::default();
        }
        let base = *f.base.get_or_insert(seq);
        let payload = tcp.payload();
        if payload.is_empty() {
            continue;
        }
        let start = seq.wrapping_sub(base) as usize;
        if start > 1 << 30 {
            // Before the first byte seen (capture began mid-flow): nothing to compare.
            continue;
        }
        let end = start + payload.len();
        if f.data.len() < end {
            f.data.resize(end, 0);
            f.known.resize(end, false);
        }
        for (i, &b) in payload.iter().enumerate() {
            let at = start + i;
            if f.known[at] {
                again += 1;
                assert_eq!(
                    f.data[at], b,
                    "frame {frame}: {key:?} resends offset {at} with other bytes"
                );
            } else {
                f.data[at] = b;
                f.known[at] = true;
            }
        }
    }
    again
}

/// Counts the records of a classic pcap file.
pub fn pcap_frames(path: &Path) -> u64 {
    let data = std::fs::read(path).unwrap();
    assert!(data.len() >= 24, "pcap shorter than its header");
    let mut off = 24;
    let mut n = 0;
    while off + 16 <= data.len() {
        let incl = u32::from_le_bytes(data[off + 8..off + 12].try_into().unwrap()) as usize;
        off += 16 + incl;
        n += 1;
    }
    n
}

/// The services until `done(services)` holds.
pub struct Cond<'a, F>(pub &'a mut Services, pub F, pub bool);

impl<F: Fn(&Services) -> bool> App for Cond<'_, F> {
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        self.0.poll(now, iface, events);
        self.2 = (self.1)(self.0);
    }
    fn is_done(&self) -> bool {
        self.2
    }
}

/// Runs the kernel command `program args` in `ns` in the background and serves until
/// `done(services)` holds and the command has exited (or `limit` passes); returns the
/// command's output.
pub fn serve_until(
    rt: &mut Runtime<AnyChannel>,
    s: &mut Services,
    limit: Duration,
    ns: &str,
    program: &str,
    args: &[&str],
    done: impl Fn(&Services) -> bool,
) -> Output {
    let child = ulnet_bench::exec::spawn_in(ns, program, args)
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    let mut app = Cond(s, done, false);
    let h = rt.handle();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if rx.recv_timeout(limit).is_err() {
            h.stop();
        }
    });
    rt.run(&mut app).expect("the runtime failed");
    let _ = tx.send(());
    let _ = watchdog.join();
    child
        .wait_timeout(Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{program} did not finish: {e}"))
}
