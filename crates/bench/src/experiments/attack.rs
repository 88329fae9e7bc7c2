//! `attack` (issue 13, "Under attack and under load"): what one hostile host can make
//! ulnet's HTTP server spend, and whether everyone else is still served, measured on the
//! testbed. Namespace A holds the server, namespace B the attacker and the clients (kernel
//! sockets on threads inside B, on the load core; extra addresses of B's subnet added to
//! B's interface stand for other hosts).
//!
//! The ulnet server is the in-loop HTTP app exactly as `ulnet serve http` runs it
//! (`ulnet_apps::http::Http` on a [`Runtime`] with the default limits: 4,096 sessions, 256
//! per source, 60 s idle timeout, lingering close), over AF_XDP and AF_PACKET on A's veth
//! end; its rows are "engine only" (no socket API in the path). Four parts:
//!
//! 1. **SYN flood**: `N` spoofed SYNs at full rate from an AF_PACKET socket in B (crafted
//!    Ethernet/IPv4/TCP frames, random sources from the subnet's unused addresses, random
//!    ports and sequence numbers; both servers map those addresses to B's MAC, where the
//!    SYN-ACKs die) while a `D`-byte download (`GET /bytes/D`, every byte checked) runs,
//!    and a fresh client's request during the flood and one right after it. SYN-ACKs are
//!    counted on B's ingress by an nftables counter (the same for both servers); the cookie
//!    counts come from ulnet's `TcpStats` or the kernel's `TcpExt Syncookies*` in A. The
//!    kernel row is a small thread-per-connection HTTP server on a kernel socket in A, with
//!    the namespace's own `tcp_syncookies` (1, Linux's default). RSS is this process's
//!    VmRSS (the ulnet rows' server lives here), sampled every 20 ms.
//! 2. **Idle connections**: `M` established connections from one address, holding still;
//!    the limits are raised above `M` for this part (else the per-source limit refuses
//!    them, which is the defence but not what is measured); another address is served
//!    meanwhile; RSS before, held, and after they closed (the runtime trims the heap);
//!    then `E` spoofed SYNs with SYN cookies off and a SYN queue of `E`, so each one leaves
//!    an embryonic connection: RSS delta per connection.
//! 3. **Slowloris**: `L` connections from eight addresses (under the per-source limit, so
//!    the head timeout is what must act) each sending a never-ending request head one byte
//!    a second; a normal client from another address fetches 1,000 bytes every 100 ms
//!    throughout: its latency and failures, and how many slow connections the server closed.
//! 4. **Checks**: a 1 MB request line gets its 431 (read by the client after writing it all,
//!    so the lingering close is what delivers it), a symbolic link out of `--root` gets 404
//!    while a file inside gets 200.
//!
//! CPU figures (part 1): machine-wide user/sys/softirq over the flooded download, per GB
//! downloaded and per SYN; the system under test's own CPU is this process minus the flood
//! and client threads (for the kernel row, its server threads; its SYN handling runs in
//! softirq on the flooding core and is only in the machine-wide figure).

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ulnet::channel::packet::{PacketChannel, PacketOptions};
use ulnet::channel::xdp::{XdpChannel, XdpOptions};
use ulnet::channel::Channel;
use ulnet::net::Stack;
use ulnet::runtime::{self, AnyChannel, App, Backend, Handle, Runtime, WaitMode};
use ulnet::stack::iface::{Interface, IpCidr};
use ulnet::stack::tcp::{Event, SynCookies, TcpConfig, TcpStats};
use ulnet::wire::checksum;
use ulnet::wire::IpProtocol;
use ulnet_apps::http::{Http, HttpConfig};
use ulnet_apps::pattern;
use ulnet_apps::server::{Limits, ServerStats};

use super::load::{in_ns, Done};
use super::Experiment;
use crate::cpu::thread_cpu_time;
use crate::harness::{io_err, pin_load, Ctx, Metrics, Plan, Profile, Window, LOAD_CPU, SUT_CPU};
use crate::results::{ExperimentResult, Metric, PlotKind, PlotView, SystemKind, TableView, View};
use crate::summary::Summary;
use crate::testbed::{Side, Testbed};

/// The experiment.
#[derive(Debug, Clone, Copy)]
pub struct Attack;

const KERNEL: &str = "kernel";
const PORT: u16 = 80;
/// Every client operation's bound (connect, a read, a write).
const IO_LIMIT: Duration = Duration::from_secs(20);
/// How long the runtime takes to notice freed buffers and trim the heap (it looks once a
/// second), plus margin.
const TRIM_WAIT: Duration = Duration::from_millis(2500);
/// Addresses of B's spare range added to B's interface: sources of the slowloris
/// connections (the first [`LORIS_SOURCES`]) and the "other host" (the next one).
const LORIS_SOURCES: u8 = 8;
/// The nftables table in B counting the SYN-ACKs that reach it.
const NFT_TABLE: &str = "ulattack";

/// The flood's AF_XDP row without the steering program's SYN policer.
const UNPOLICED: &str = "ulnet-xdp-unpoliced";

fn ulnet_id(b: Backend) -> &'static str {
    match b {
        Backend::Xdp => "ulnet-xdp",
        Backend::Packet => "ulnet-packet",
        _ => "ulnet-tap",
    }
}

/// The channels measured: both of the issue's in every profile but smoke, which only
/// proves the harness runs (AF_XDP).
fn wanted_backends(p: Profile) -> &'static [Backend] {
    p.pick(
        &[Backend::Xdp][..],
        &[Backend::Xdp, Backend::Packet][..],
        &[Backend::Xdp, Backend::Packet][..],
        &[Backend::Xdp, Backend::Packet][..],
    )
}

/// The sizes of a profile.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    syns: u64,
    download: u64,
    idle: usize,
    embryonic: usize,
    loris: usize,
    head_timeout: Duration,
}

fn sizes(p: Profile) -> Sizes {
    Sizes {
        syns: p.pick(3_000, 30_000, 100_000, 100_000),
        download: p.pick(5_000_000, 20_000_000, 100_000_000, 100_000_000),
        idle: p.pick(200, 3_000, 20_000, 20_000),
        embryonic: p.pick(200, 3_000, 20_000, 20_000),
        loris: p.pick(80, 1_000, 2_000, 2_000),
        // The app's default (10 s) where the profile has time for it.
        head_timeout: Duration::from_secs(p.pick(2, 2, 10, 10)),
    }
}

/// The spoofed sources: the testbed subnet's addresses that neither kernel nor any spare
/// range uses (.116-.143 and .244-.253 of A's /24), so nothing on the testbed answers
/// for them and nothing outside the namespaces is ever addressed.
fn spoof_pool(a: &Side) -> Vec<Ipv4Addr> {
    let IpAddr::V4(ip) = a.ip else {
        return Vec::new();
    };
    let o = ip.octets();
    (116..=143u8)
        .chain(244..=253)
        .map(|h| Ipv4Addr::new(o[0], o[1], o[2], h))
        .collect()
}

/// A small xorshift generator: the flood's sources, ports and sequence numbers need to
/// vary, not to be unpredictable.
#[derive(Debug, Clone, Copy)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// One Ethernet/IPv4/TCP SYN with an MSS option (58 bytes), checksums filled in.
fn syn_frame(
    out: &mut [u8; 58],
    macs: ([u8; 6], [u8; 6]),
    src: (Ipv4Addr, u16),
    dst: SocketAddrV4,
    seq: u32,
) {
    out[..6].copy_from_slice(&macs.1);
    out[6..12].copy_from_slice(&macs.0);
    out[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut out[14..34];
    ip.copy_from_slice(&[
        0x45, 0, 0, 44, 0, 0, 0x40, 0, 64, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ]);
    ip[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
    ip[12..16].copy_from_slice(&src.0.octets());
    ip[16..20].copy_from_slice(&dst.ip().octets());
    let s = !checksum::data(ip);
    ip[10..12].copy_from_slice(&s.to_be_bytes());
    let tcp = &mut out[34..58];
    tcp[0..2].copy_from_slice(&src.1.to_be_bytes());
    tcp[2..4].copy_from_slice(&dst.port().to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[8..12].copy_from_slice(&[0; 4]);
    // Data offset 6 words, SYN, window 64240, checksum, urgent, MSS 1460.
    tcp[12..24].copy_from_slice(&[0x60, 0x02, 0xfa, 0xf0, 0, 0, 0, 0, 2, 4, 0x05, 0xb4]);
    let sum = !checksum::combine(&[
        checksum::pseudo_header(
            &IpAddr::V4(src.0),
            &IpAddr::V4(*dst.ip()),
            IpProtocol::Tcp,
            24,
        ),
        checksum::data(tcp),
    ]);
    tcp[16..18].copy_from_slice(&sum.to_be_bytes());
}

/// A SYN flood from B.
#[derive(Debug, Clone)]
struct SynFlood {
    ns: String,
    ifname: String,
    macs: ([u8; 6], [u8; 6]),
    pool: Vec<Ipv4Addr>,
    dst: SocketAddrV4,
    count: u64,
}

/// Sends `f.count` SYNs as fast as B's AF_PACKET socket takes them (at most 60 s), on the
/// load core; `sent` follows the count so others can act mid-flood.
fn syn_flood(f: SynFlood, sent: Arc<AtomicU64>) -> io::Result<JoinHandle<io::Result<Done>>> {
    let mut ch = PacketChannel::open(&f.ifname, Some(&f.ns), &PacketOptions::default())
        .map_err(io::Error::from)?;
    Ok(std::thread::spawn(move || {
        pin_load()?;
        let cpu0 = thread_cpu_time();
        let start = Instant::now();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id()));
        let mut frame = [0u8; 58];
        let mut count = 0u64;
        while count < f.count && start.elapsed() < Duration::from_secs(60) {
            let mut queued = 0;
            while queued < 64 && count < f.count {
                let r = rng.next();
                let src = f.pool[(r % f.pool.len() as u64) as usize];
                let port = 1024 + ((r >> 16) % 64_000) as u16;
                syn_frame(&mut frame, f.macs, (src, port), f.dst, (r >> 32) as u32);
                if ch
                    .tx()
                    .send(frame.len(), &mut |b| b.copy_from_slice(&frame))
                    .is_err()
                {
                    // Ring full: ring the doorbell and come back.
                    break;
                }
                queued += 1;
                count += 1;
            }
            ch.tx().flush().map_err(io_err)?;
            // The socket also receives what reaches B (SYN-ACKs, the download): drop it.
            ch.rx_batch(64, &mut |_, _| {}).map_err(io_err)?;
            sent.store(count, Ordering::Relaxed);
        }
        for _ in 0..8 {
            ch.tx().flush().map_err(io_err)?;
        }
        sent.store(count, Ordering::Relaxed);
        Ok(Done {
            count,
            elapsed: start.elapsed(),
            cpu: thread_cpu_time() - cpu0,
        })
    }))
}

/// This process's resident set after giving free heap back to the system (as the
/// runtime does once it freed 8 MiB): a baseline that freed memory of an earlier part
/// does not inflate, so the next part's growth shows in full.
fn trimmed_rss() -> io::Result<u64> {
    let _ = ulnet::channel::sys::heap::trim();
    vm_rss()
}

/// This process's resident set, in bytes (`VmRSS` of /proc/self/status).
fn vm_rss() -> io::Result<u64> {
    let s = std::fs::read_to_string("/proc/self/status")?;
    parse_vm_rss(&s).ok_or_else(|| io_err("no VmRSS in /proc/self/status"))
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Samples VmRSS every 20 ms on the load core until stopped; returns the peak.
struct RssSampler {
    stop: Arc<AtomicBool>,
    t: JoinHandle<u64>,
}

impl RssSampler {
    fn start() -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let t = std::thread::spawn(move || {
            let _ = pin_load();
            let mut peak = 0;
            // Bounded: the caller stops it; 10 minutes at most in any case.
            let end = Instant::now() + Duration::from_secs(600);
            while !s.load(Ordering::Relaxed) && Instant::now() < end {
                peak = peak.max(vm_rss().unwrap_or(0));
                std::thread::sleep(Duration::from_millis(20));
            }
            peak.max(vm_rss().unwrap_or(0))
        });
        RssSampler { stop, t }
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.t.join().unwrap_or(0)
    }
}

/// What the server shares with the experiment while it runs (the app is inside the
/// runtime's thread).
#[derive(Debug, Clone, Copy, Default)]
struct Snap {
    sessions: usize,
    peak_sessions: usize,
    stats: ServerStats,
}

/// The HTTP app, publishing its session count and counters after every poll.
struct Watched {
    http: Http,
    shared: Arc<Mutex<Snap>>,
}

impl App for Watched {
    fn poll(&mut self, now: ulnet::stack::time::Instant, iface: &mut Interface, events: &[Event]) {
        self.http.poll(now, iface, events);
        if let Ok(mut s) = self.shared.lock() {
            s.sessions = self.http.session_count();
            s.peak_sessions = s.peak_sessions.max(s.sessions);
            s.stats = self.http.tcp_stats();
        }
    }

    fn poll_at(&self) -> Option<ulnet::stack::time::Instant> {
        self.http.poll_at()
    }
}

type RuntimeJoin = JoinHandle<io::Result<(Runtime<AnyChannel>, Watched)>>;

/// ulnet's HTTP server running on its own thread (on the system-under-test core, which it
/// inherits from the main thread).
struct UlnetServer {
    handle: Handle,
    join: Option<RuntimeJoin>,
    shared: Arc<Mutex<Snap>>,
    addr: SocketAddr,
}

impl UlnetServer {
    fn tcp_stats(&self) -> TcpStats {
        self.handle
            .with(|iface, _| iface.tcp().map(|t| t.stats()))
            .unwrap_or_default()
    }

    fn snap(&self) -> Snap {
        self.shared.lock().map(|s| *s).unwrap_or_default()
    }

    /// Waits (at most `limit`) until `ok(snap)`.
    fn wait_for(&self, limit: Duration, ok: impl Fn(&Snap) -> bool) -> bool {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if ok(&self.snap()) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        ok(&self.snap())
    }

    /// Stops the runtime; returns its channel's counters (frames the ring dropped among
    /// them).
    fn stop(mut self) -> io::Result<ulnet::channel::Stats> {
        self.handle.stop();
        let mut stats = ulnet::channel::Stats::default();
        if let Some(j) = self.join.take() {
            let (rt, _app) = j.join().map_err(|_| io_err("ulnet runtime panicked"))??;
            stats = Channel::stats(rt.channel());
        }
        Ok(stats)
    }
}

impl Drop for UlnetServer {
    fn drop(&mut self) {
        self.handle.stop();
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

fn retry_busy<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut tries = 0;
    loop {
        match f() {
            Err(e)
                if (e.kind() == io::ErrorKind::ResourceBusy
                    || e.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error()))
                    && tries < 50 =>
            {
                tries += 1;
                std::thread::sleep(Duration::from_millis(40));
            }
            r => return r,
        }
    }
}

/// Starts ulnet's HTTP server on `backend` in A with `cfg` and `tcp`, every address of
/// `neighbors` (and B's) mapped to B's MAC.
fn open_ulnet(
    tb: &Testbed,
    backend: Backend,
    cfg: HttpConfig,
    tcp: TcpConfig,
    neighbors: &[Ipv4Addr],
    policer: bool,
) -> io::Result<UlnetServer> {
    let (a, b) = (tb.a(), tb.b());
    let ip = match backend {
        Backend::Xdp => a.spare_ip(0),
        _ => a.spare_ip(1),
    };
    let mac = runtime::interface_mac(Some(&a.ns), &a.ifname)?;
    let bmac = ulnet::wire::EthernetAddress(b.mac.octets());
    let cidr = IpCidr::new(ip, a.prefix_len).ok_or_else(|| io_err("bad prefix"))?;
    let mut builder = Stack::builder()
        .netns(&a.ns)
        .wait(WaitMode::Sleep)
        .interface(&a.ifname)
        .mac(mac)
        .address_cidr(cidr)
        .tcp_config(tcp)
        .neighbor(b.ip, bmac);
    for n in neighbors {
        builder = builder.neighbor(IpAddr::V4(*n), bmac);
    }
    let builder = match open_channel(a, backend, ip, policer)? {
        Opened::Xdp(ch) => builder.channel(*ch),
        Opened::Packet(ch) => builder.channel(*ch),
    };
    let rt = builder.build_runtime().map_err(io_err)?;
    b.set_neighbor(ip, crate::testbed::MacAddr(mac.0))
        .map_err(io_err)?;
    let addr = SocketAddr::new(ip, PORT);
    let http = {
        let mut iface = rt.iface();
        Http::new(&mut iface, addr, cfg).map_err(io_err)?
    };
    let shared = Arc::new(Mutex::new(Snap::default()));
    let handle = rt.handle();
    let join = rt.spawn(Watched {
        http,
        shared: shared.clone(),
    })?;
    Ok(UlnetServer {
        handle,
        join: Some(join),
        shared,
        addr,
    })
}

/// A channel opened on A's veth end.
enum Opened {
    Xdp(Box<XdpChannel>),
    Packet(Box<PacketChannel>),
}

impl Opened {
    fn mode(&self) -> String {
        let c = match self {
            Opened::Xdp(ch) => ch.capabilities(),
            Opened::Packet(ch) => ch.capabilities(),
        };
        format!("{} {}, mtu {}", c.name, c.mode, c.mtu)
    }
}

/// Opens `backend`'s channel on A's veth end for ulnet's address `ip` (retrying while
/// the previous round's AF_XDP socket is still being released).
/// `policer` false turns the AF_XDP steering program's SYN policer off (the flood's
/// unpoliced row: what the policer buys, and the stack's own SYN-cookie rate).
fn open_channel(a: &Side, backend: Backend, ip: IpAddr, policer: bool) -> io::Result<Opened> {
    match backend {
        Backend::Xdp => {
            let mut o = XdpOptions {
                addresses: vec![ip],
                ..XdpOptions::default()
            };
            if !policer {
                o.syn_policer = None;
            }
            let ch = retry_busy(|| {
                XdpChannel::open(&a.ifname, Some(&a.ns), &o).map_err(io::Error::from)
            })?;
            Ok(Opened::Xdp(Box::new(ch)))
        }
        Backend::Packet => {
            let ch = PacketChannel::open(&a.ifname, Some(&a.ns), &PacketOptions::default())
                .map_err(io::Error::from)?;
            Ok(Opened::Packet(Box::new(ch)))
        }
        other => Err(io_err(format!("backend {other:?} not measured here"))),
    }
}

/// The kernel's row: a thread-per-connection HTTP server on a kernel socket in A
/// (`GET /bytes/N` answers N bytes of the pattern, as ulnet's app does).
struct KernelServer {
    stop: Arc<AtomicBool>,
    join: Option<JoinHandle<io::Result<()>>>,
    addr: SocketAddr,
}

impl KernelServer {
    fn start(a: &Side) -> io::Result<KernelServer> {
        let addr = SocketAddr::new(a.ip, PORT);
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let join = in_ns(
            &a.ns,
            SUT_CPU,
            move || {
                let l = TcpListener::bind(addr)?;
                l.set_nonblocking(true)?;
                Ok(l)
            },
            move |l| {
                // Bounded by the stop flag and, whatever happens, by ten minutes.
                let end = Instant::now() + Duration::from_secs(600);
                while !s.load(Ordering::Relaxed) && Instant::now() < end {
                    match l.accept() {
                        Ok((c, _)) => {
                            std::thread::spawn(move || kernel_serve(c));
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(1)),
                    }
                }
                Ok(())
            },
        )?;
        Ok(KernelServer {
            stop,
            join: Some(join),
            addr,
        })
    }
}

impl Drop for KernelServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

/// Serves one kernel connection: one request, then close.
fn kernel_serve(mut c: TcpStream) -> io::Result<()> {
    c.set_nonblocking(false)?;
    c.set_read_timeout(Some(IO_LIMIT))?;
    c.set_write_timeout(Some(IO_LIMIT))?;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = c.read(&mut buf)?;
        if n == 0 || head.len() > 8192 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let n: Option<u64> = line
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.strip_prefix("/bytes/"))
        .and_then(|n| n.parse().ok());
    let Some(n) = n else {
        c.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
        return Ok(());
    };
    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n");
    c.write_all(head.as_bytes())?;
    let mut off = 0u64;
    while off < n {
        let k = (n - off).min(pattern::MAX_CHUNK as u64) as usize;
        c.write_all(pattern::slice(off, k))?;
        off += k as u64;
    }
    Ok(())
}

/// Connects to `to` from `from` (any address of the namespace if `None`), within `limit`.
fn connect_from(from: Option<IpAddr>, to: SocketAddr, limit: Duration) -> io::Result<TcpStream> {
    let Some(from) = from else {
        return TcpStream::connect_timeout(&to, limit);
    };
    use rustix::net::{bind, connect, socket, sockopt, AddressFamily, SocketType};
    let fd: OwnedFd = socket(AddressFamily::INET, SocketType::STREAM, None)?;
    // A blocking connect gives up after SO_SNDTIMEO (Linux), so this bounds it.
    sockopt::set_socket_timeout(&fd, sockopt::Timeout::Send, Some(limit))?;
    bind(&fd, &SocketAddr::new(from, 0))?;
    connect(&fd, &to)?;
    Ok(TcpStream::from(fd))
}

/// One HTTP exchange as the client saw it.
#[derive(Debug, Clone, Copy)]
struct Got {
    status: u16,
    body: u64,
    pattern_ok: bool,
    /// From the start of the connect to the last byte.
    total: Duration,
    /// From the first body byte to the last.
    body_time: Duration,
    cpu: Duration,
}

/// `GET path` on a new connection from `from`, reading to the end (the server closes),
/// checking a `/bytes/N` body against the pattern.
fn http_get(from: Option<IpAddr>, to: SocketAddr, path: &str) -> io::Result<Got> {
    let cpu0 = thread_cpu_time();
    let start = Instant::now();
    let mut s = connect_from(from, to, Duration::from_secs(10))?;
    s.set_read_timeout(Some(IO_LIMIT))?;
    s.set_write_timeout(Some(IO_LIMIT))?;
    // One write: `write!` would send the request in pieces, and a client with Nagle on
    // then waits for the server's (delayed) ACK of the first piece.
    s.set_nodelay(true)?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes())?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut head = Vec::new();
    let (status, mut off, mut ok, mut first);
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(io_err(format!("{path}: closed before the response head")));
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            status = parse_status(&head).ok_or_else(|| io_err("bad status line"))?;
            let body = &head[i + 4..];
            first = (!body.is_empty()).then(Instant::now);
            ok = pattern::matches(0, body);
            off = body.len() as u64;
            break;
        }
        if head.len() > 64 * 1024 {
            return Err(io_err("response head too long"));
        }
    }
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        first.get_or_insert_with(Instant::now);
        ok &= pattern::matches(off, &buf[..n]);
        off += n as u64;
    }
    let end = Instant::now();
    Ok(Got {
        status,
        body: off,
        pattern_ok: ok,
        total: end - start,
        body_time: first.map_or(Duration::ZERO, |f| end - f),
        cpu: thread_cpu_time() - cpu0,
    })
}

fn parse_status(head: &[u8]) -> Option<u16> {
    let line = head.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut it = line.split_whitespace();
    it.next().filter(|v| v.starts_with("HTTP/1."))?;
    it.next()?.parse().ok()
}

/// [`http_get`] on a thread in `ns`, on the load core.
fn get_in(
    ns: &str,
    from: Option<IpAddr>,
    to: SocketAddr,
    path: &str,
) -> io::Result<JoinHandle<io::Result<Got>>> {
    let path = path.to_owned();
    in_ns(ns, LOAD_CPU, || Ok(()), move |()| http_get(from, to, &path))
}

fn join<T>(t: JoinHandle<io::Result<T>>, what: &str) -> io::Result<T> {
    t.join()
        .map_err(|_| io_err(format!("{what}: thread panicked")))?
}

/// `packets N` of the nftables counter in B's ingress (SYN-ACKs that reached B).
fn synacks_seen(b: &Side) -> io::Result<u64> {
    let out = b
        .run("nft", ["list", "table", "netdev", NFT_TABLE])
        .map_err(io_err)?;
    Ok(counter_packets(&String::from_utf8_lossy(&out.stdout)))
}

fn counter_packets(text: &str) -> u64 {
    text.split_whitespace()
        .skip_while(|w| *w != "packets")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn setup_synack_counter(b: &Side) -> io::Result<()> {
    b.run("nft", ["add", "table", "netdev", NFT_TABLE])
        .map_err(io_err)?;
    let chain = format!(
        "add chain netdev {NFT_TABLE} in {{ type filter hook ingress device \"{}\" priority 0 ; }}",
        b.ifname
    );
    b.run("nft", [chain.as_str()]).map_err(io_err)?;
    let rule = format!(
        "add rule netdev {NFT_TABLE} in ether type ip ip protocol tcp tcp flags & (syn | ack) == (syn | ack) counter"
    );
    b.run("nft", [rule.as_str()]).map_err(io_err)?;
    Ok(())
}

/// The kernel's TcpExt counters in `side`'s namespace.
fn tcp_ext(side: &Side) -> io::Result<BTreeMap<String, u64>> {
    let out = side.run("cat", ["/proc/net/netstat"]).map_err(io_err)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut m = BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((g, names)), Some((_, values))) = (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        if g != "TcpExt" {
            continue;
        }
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            m.insert(n.to_owned(), v.parse().unwrap_or(0));
        }
    }
    Ok(m)
}

fn delta(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>, k: &str) -> f64 {
    b.get(k)
        .copied()
        .unwrap_or(0)
        .saturating_sub(a.get(k).copied().unwrap_or(0)) as f64
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn gbps(bytes: u64, d: Duration) -> f64 {
    if d.is_zero() {
        0.0
    } else {
        bytes as f64 * 8.0 / d.as_secs_f64() / 1e9
    }
}

/// Part 1, one round of one system.
fn flood_round(
    tb: &Testbed,
    backend: Option<Backend>,
    policer: bool,
    sz: &Sizes,
    pool: &[Ipv4Addr],
) -> io::Result<Metrics> {
    let (a, b) = (tb.a(), tb.b());
    let (ulnet, _kernel, to) = match backend {
        Some(be) => {
            let u = open_ulnet(
                tb,
                be,
                HttpConfig::default(),
                TcpConfig::default(),
                pool,
                policer,
            )?;
            let to = u.addr;
            (Some(u), None, to)
        }
        None => {
            let k = KernelServer::start(a)?;
            let to = k.addr;
            (None, Some(k), to)
        }
    };
    std::thread::sleep(Duration::from_millis(200));
    let path = format!("/bytes/{}", sz.download);
    let rss0 = trimmed_rss()?;
    let base = join(get_in(&b.ns, None, to, &path)?, "download")?;
    let base_ok = base.status == 200 && base.body == sz.download && base.pattern_ok;

    let tcp0 = ulnet.as_ref().map(UlnetServer::tcp_stats);
    let ext0 = if ulnet.is_none() {
        Some(tcp_ext(a)?)
    } else {
        None
    };
    let seen0 = synacks_seen(b)?;
    let w = Window::start()?;
    let sampler = RssSampler::start();
    let dl = get_in(&b.ns, None, to, &path)?;
    std::thread::sleep(Duration::from_millis(20));
    let sent = Arc::new(AtomicU64::new(0));
    let IpAddr::V4(dip) = to.ip() else {
        return Err(io_err("IPv4 only"));
    };
    let flood = syn_flood(
        SynFlood {
            ns: b.ns.clone(),
            ifname: b.ifname.clone(),
            macs: (
                b.mac.octets(),
                runtime::interface_mac(Some(&a.ns), &a.ifname)?.0,
            ),
            pool: pool.to_vec(),
            dst: SocketAddrV4::new(dip, to.port()),
            count: sz.syns,
        },
        sent.clone(),
    )?;
    // The fresh client starts once a tenth of the flood is out.
    let end = Instant::now() + Duration::from_secs(10);
    while sent.load(Ordering::Relaxed) < sz.syns / 10 && Instant::now() < end {
        std::thread::sleep(Duration::from_micros(200));
    }
    let during = join(get_in(&b.ns, None, to, "/bytes/1000")?, "fresh client");
    let sent_at_fresh = sent.load(Ordering::Relaxed);
    let fl = join(flood, "flood")?;
    let seen_flood = synacks_seen(b)?;
    let after = join(
        get_in(&b.ns, None, to, "/bytes/1000")?,
        "fresh client after",
    );
    let got = join(dl, "download under flood");
    let load_cpu = fl.cpu
        + got.as_ref().map_or(Duration::ZERO, |g| g.cpu)
        + during.as_ref().map_or(Duration::ZERO, |g| g.cpu);
    let cpu = w.finish(load_cpu)?;
    let peak = sampler.finish();
    let got = got?;
    let mut m = cpu.metrics(Some(got.body), Some(fl.count));
    m.insert("flood_syns".into(), fl.count as f64);
    m.insert("flood_ms".into(), fl.elapsed.as_secs_f64() * 1e3);
    m.insert(
        "flood_pps".into(),
        fl.count as f64 / fl.elapsed.as_secs_f64().max(1e-9),
    );
    m.insert(
        "synack_per_s".into(),
        seen_flood.saturating_sub(seen0) as f64 / fl.elapsed.as_secs_f64().max(1e-9),
    );
    m.insert("goodput_base_gbps".into(), gbps(base.body, base.body_time));
    m.insert("goodput_flood_gbps".into(), gbps(got.body, got.body_time));
    let flood_ok = got.status == 200 && got.body == sz.download && got.pattern_ok;
    m.insert(
        "download_exact".into(),
        f64::from(u8::from(base_ok && flood_ok)),
    );
    match &during {
        Ok(g) => {
            m.insert("fresh_during_ms".into(), g.total.as_secs_f64() * 1e3);
            m.insert(
                "fresh_during_ok".into(),
                f64::from(u8::from(g.status == 200 && g.body == 1000 && g.pattern_ok)),
            );
        }
        Err(_) => {
            m.insert("fresh_during_ok".into(), 0.0);
        }
    }
    // Whether the flood was still going when the fresh client's answer was complete.
    m.insert(
        "fresh_in_flood".into(),
        f64::from(u8::from(sent_at_fresh < fl.count)),
    );
    match &after {
        Ok(g) => {
            m.insert("fresh_after_ms".into(), g.total.as_secs_f64() * 1e3);
            m.insert(
                "fresh_after_ok".into(),
                f64::from(u8::from(g.status == 200 && g.body == 1000 && g.pattern_ok)),
            );
        }
        Err(_) => {
            m.insert("fresh_after_ok".into(), 0.0);
        }
    }
    if let Some(u) = &ulnet {
        let t1 = u.tcp_stats();
        let t0 = tcp0.unwrap_or_default();
        m.insert(
            "cookies_sent".into(),
            (t1.syn_cookies_sent - t0.syn_cookies_sent) as f64,
        );
        m.insert(
            "cookies_accepted".into(),
            (t1.syn_cookies_accepted - t0.syn_cookies_accepted) as f64,
        );
        m.insert(
            "syn_queue_overflows".into(),
            (t1.syn_queue_overflows - t0.syn_queue_overflows) as f64,
        );
        m.insert(
            "syn_evictions".into(),
            (t1.syn_queue_evictions - t0.syn_queue_evictions) as f64,
        );
        m.insert("rss_before_mb".into(), mb(rss0));
        m.insert("rss_peak_mb".into(), mb(peak.max(rss0)));
        std::thread::sleep(TRIM_WAIT);
        m.insert("rss_after_mb".into(), mb(vm_rss()?));
    } else if let Some(e0) = &ext0 {
        let e1 = tcp_ext(a)?;
        m.insert("cookies_sent".into(), delta(e0, &e1, "SyncookiesSent"));
        m.insert("cookies_accepted".into(), delta(e0, &e1, "SyncookiesRecv"));
        m.insert(
            "syn_queue_overflows".into(),
            delta(e0, &e1, "ListenOverflows") + delta(e0, &e1, "TCPReqQFullDoCookies"),
        );
    }
    if let Some(u) = ulnet {
        // Frames the receive ring dropped before ulnet saw them (ring full), and SYNs
        // the steering program's policer dropped (AF_XDP only), this round.
        let st = u.stop()?;
        m.insert("rx_dropped".into(), st.rx_dropped as f64);
        m.insert("syn_policed".into(), st.rx_policed as f64);
    }
    Ok(m)
}

/// Raises the process's open-file soft limit towards `n`, up to the hard limit (raising
/// that needs CAP_SYS_RESOURCE, which a container may lack); a connection that finds no
/// descriptor then fails and is counted.
fn raise_nofile(n: u64) -> io::Result<()> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let cur = getrlimit(Resource::Nofile);
    let want = n.max(cur.current.unwrap_or(0));
    let want = cur.maximum.map_or(want, |m| want.min(m));
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(want),
            maximum: cur.maximum,
        },
    )?;
    Ok(())
}

/// Part 2, one round: idle connections, then embryonic ones.
fn idle_round(
    tb: &Testbed,
    backend: Backend,
    sz: &Sizes,
    pool: &[Ipv4Addr],
    other: IpAddr,
) -> io::Result<Metrics> {
    let (a, b) = (tb.a(), tb.b());
    let m_conns = sz.idle;
    let cfg = HttpConfig {
        limits: Limits {
            max_sessions: m_conns + 64,
            max_per_source: m_conns + 64,
            ..HttpConfig::default().limits
        },
        ..HttpConfig::default()
    };
    let mut tcp = TcpConfig::default();
    tcp.syn_queue_len = sz.embryonic.max(1024);
    tcp.syn_cookies = SynCookies::Never;
    let hard = tcp.mem.hard;
    let u = open_ulnet(tb, backend, cfg, tcp, pool, true)?;
    let to = u.addr;
    std::thread::sleep(Duration::from_millis(200));
    // A first request from the other host, so what any connection sets up once (the
    // neighbour entry, the first buffers) is in the starting figure.
    join(get_in(&b.ns, Some(other), to, "/bytes/1000")?, "warm-up")?;
    let rss0 = trimmed_rss()?;
    let t = Instant::now();
    let conns = IdleHolders::open(b, to, m_conns)?;
    let open_s = t.elapsed().as_secs_f64();
    let held = u.wait_for(Duration::from_secs(20), |s| s.sessions >= m_conns);
    std::thread::sleep(Duration::from_millis(300));
    let snap = u.snap();
    let rss_held = vm_rss()?;
    let tcp_held = u.tcp_stats();
    let o = join(get_in(&b.ns, Some(other), to, "/bytes/1000")?, "other host");
    conns.close();
    let closed = u.wait_for(Duration::from_secs(20), |s| s.sessions == 0);
    std::thread::sleep(TRIM_WAIT);
    let rss_after = vm_rss()?;
    let rss_emb0 = trimmed_rss()?;

    // Embryonic: spoofed SYNs with cookies off and a queue as long as the flood, so each
    // leaves a SYN-RECEIVED connection (until its SYN-ACK retries run out).
    let seen0 = synacks_seen(b)?;
    let tcp0 = u.tcp_stats();
    let IpAddr::V4(dip) = to.ip() else {
        return Err(io_err("IPv4 only"));
    };
    let sent = Arc::new(AtomicU64::new(0));
    let fl = join(
        syn_flood(
            SynFlood {
                ns: b.ns.clone(),
                ifname: b.ifname.clone(),
                macs: (
                    b.mac.octets(),
                    runtime::interface_mac(Some(&a.ns), &a.ifname)?.0,
                ),
                pool: pool.to_vec(),
                dst: SocketAddrV4::new(dip, to.port()),
                count: sz.embryonic as u64,
            },
            sent,
        )?,
        "embryonic flood",
    )?;
    // Read before the first SYN-ACK retransmissions (1 s after the first SYN-ACK).
    std::thread::sleep(Duration::from_millis(200));
    let rss_emb = vm_rss()?;
    let tcp1 = u.tcp_stats();
    let seen = synacks_seen(b)?.saturating_sub(seen0);
    u.stop()?;

    let mut m = Metrics::new();
    m.insert("idle_conns".into(), snap.sessions as f64);
    m.insert("idle_all_held".into(), f64::from(u8::from(held)));
    m.insert("idle_open_per_s".into(), m_conns as f64 / open_s.max(1e-9));
    m.insert("rss_start_mb".into(), mb(rss0));
    m.insert("rss_held_mb".into(), mb(rss_held));
    m.insert("rss_after_mb".into(), mb(rss_after));
    m.insert("rss_after_ratio".into(), rss_after as f64 / rss0 as f64);
    // The same after an explicit trim: what the allocator could give back but the
    // runtime did not (its trim looks only at freed buffer storage).
    m.insert("rss_trimmed_mb".into(), mb(rss_emb0));
    m.insert("rss_trimmed_ratio".into(), rss_emb0 as f64 / rss0 as f64);
    m.insert(
        "rss_under_budget".into(),
        f64::from(u8::from(rss_held.saturating_sub(rss0) <= hard as u64)),
    );
    m.insert("all_closed".into(), f64::from(u8::from(closed)));
    m.insert(
        "kb_per_idle_conn".into(),
        rss_held.saturating_sub(rss0) as f64 / 1024.0 / snap.sessions.max(1) as f64,
    );
    m.insert(
        "mem_bytes_held_kb".into(),
        tcp_held.mem_bytes as f64 / 1024.0,
    );
    match o {
        Ok(g) => {
            m.insert("other_ms".into(), g.total.as_secs_f64() * 1e3);
            m.insert(
                "other_ok".into(),
                f64::from(u8::from(g.status == 200 && g.body == 1000 && g.pattern_ok)),
            );
        }
        Err(_) => {
            m.insert("other_ok".into(), 0.0);
        }
    }
    let emb = seen.min(fl.count);
    m.insert("embryonic".into(), emb as f64);
    m.insert(
        "embryonic_dropped".into(),
        (tcp1.syn_queue_overflows - tcp0.syn_queue_overflows) as f64,
    );
    m.insert(
        "kb_per_embryonic".into(),
        rss_emb.saturating_sub(rss_emb0) as f64 / 1024.0 / emb.max(1) as f64,
    );
    Ok(m)
}

/// Holds idle connections open from B in helper processes (`python3`, on the load core):
/// this process may not raise its open-file limit past the hard limit (no
/// CAP_SYS_RESOURCE in a container), and 20,000 sockets plus its own files do not fit
/// under a 20,000 limit; each helper holds at most [`IDLE_PER_PROCESS`].
struct IdleHolders {
    children: Vec<std::process::Child>,
}

/// Connections one helper process holds.
const IDLE_PER_PROCESS: usize = 8_000;

/// The helper: opens N connections, says so, holds them until its stdin closes, then
/// closes them all (a FIN each) and says so.
const IDLE_SCRIPT: &str = r#"
import resource, socket, sys
h, p, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
c = [socket.create_connection((h, p), timeout=5) for _ in range(n)]
print("ok", len(c), flush=True)
sys.stdin.read()
for x in c:
    x.close()
print("closed", flush=True)
"#;

impl IdleHolders {
    fn open(b: &Side, to: SocketAddr, n: usize) -> io::Result<IdleHolders> {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let mut h = IdleHolders {
            children: Vec::new(),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let mut left = n;
        while left > 0 {
            let k = left.min(IDLE_PER_PROCESS);
            left -= k;
            let mut c = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &b.ns,
                    "taskset",
                    "-c",
                    &LOAD_CPU.to_string(),
                ])
                .args(["python3", "-c", IDLE_SCRIPT, &to.ip().to_string()])
                .args([to.port().to_string(), k.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()?;
            let out = c.stdout.take().ok_or_else(|| io_err("no stdout"))?;
            h.children.push(c);
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut held = 0;
        let end = Instant::now() + Duration::from_secs(120);
        while held < n {
            let wait = end.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(line) => {
                    if let Some(k) = line.strip_prefix("ok ") {
                        held += k.trim().parse::<usize>().unwrap_or(0);
                    }
                }
                Err(_) => {
                    return Err(io_err(format!(
                        "the idle-connection helpers held {held} of {n} connections"
                    )))
                }
            }
        }
        Ok(h)
    }

    /// Closes every connection (the helpers' stdin ends) and waits for the helpers.
    fn close(mut self) {
        for c in &mut self.children {
            drop(c.stdin.take());
        }
        let end = Instant::now() + Duration::from_secs(20);
        for c in &mut self.children {
            while Instant::now() < end {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

impl Drop for IdleHolders {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// What the slowloris thread saw.
#[derive(Debug, Clone, Copy, Default)]
struct Loris {
    opened: u64,
    refused: u64,
    closed_by_server: u64,
    /// Seconds from a connection's first byte to the server's close, the largest.
    max_life_s: f64,
}

/// Part 3, one round.
fn loris_round(
    tb: &Testbed,
    backend: Backend,
    sz: &Sizes,
    sources: &[IpAddr],
    other: IpAddr,
) -> io::Result<Metrics> {
    let b = tb.b();
    let cfg = HttpConfig {
        head_timeout: ulnet::stack::time::Duration::from_millis(sz.head_timeout.as_millis() as u64),
        ..HttpConfig::default()
    };
    let u = open_ulnet(tb, backend, cfg, TcpConfig::default(), &[], true)?;
    let to = u.addr;
    std::thread::sleep(Duration::from_millis(200));
    let hold = sz.head_timeout + Duration::from_secs(2);
    let n = sz.loris;
    let srcs = sources.to_vec();
    let stats0 = u.snap().stats;
    let running = Arc::new(AtomicBool::new(true));
    let r2 = running.clone();
    let loris = in_ns(
        &b.ns,
        LOAD_CPU,
        move || raise_nofile(n as u64 + 1024),
        move |()| {
            let mut out = Loris::default();
            let mut conns: Vec<Option<(TcpStream, Instant)>> = Vec::with_capacity(n);
            for i in 0..n {
                match connect_from(Some(srcs[i % srcs.len()]), to, Duration::from_secs(5)) {
                    Ok(mut s) => {
                        s.set_nonblocking(true)?;
                        let _ = s.write(b"G");
                        conns.push(Some((s, Instant::now())));
                        out.opened += 1;
                    }
                    Err(_) => out.refused += 1,
                }
            }
            let head = b"ET / HTTP/1.1\r\nHost: bench\r\nX-Slow: ";
            let start = Instant::now();
            let mut k = 0usize;
            let mut buf = [0u8; 512];
            while start.elapsed() < hold {
                std::thread::sleep(Duration::from_millis(1000));
                let byte = head.get(k).copied().unwrap_or(b'a');
                k += 1;
                for c in &mut conns {
                    let Some((s, t0)) = c else { continue };
                    let gone = match s.read(&mut buf) {
                        Ok(_) => true, // EOF, or an answer: the server is done with it
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            s.write(&[byte]).is_err()
                        }
                        Err(_) => true,
                    };
                    if gone {
                        out.closed_by_server += 1;
                        out.max_life_s = out.max_life_s.max(t0.elapsed().as_secs_f64());
                        *c = None;
                    }
                }
            }
            r2.store(false, Ordering::Relaxed);
            Ok(out)
        },
    )?;
    // The normal client: 1,000 bytes every 100 ms from another address while the
    // slow connections are held (bounded by the slowloris' own bound, at most 1,000).
    let normal = in_ns(&b.ns, LOAD_CPU, || Ok(()), {
        let running = running.clone();
        move |()| {
            let mut lat = Vec::new();
            let mut failed = 0u64;
            std::thread::sleep(Duration::from_millis(500));
            while running.load(Ordering::Relaxed) && lat.len() + (failed as usize) < 1000 {
                match http_get(Some(other), to, "/bytes/1000") {
                    Ok(g) if g.status == 200 && g.body == 1000 && g.pattern_ok => {
                        lat.push(g.total.as_secs_f64() * 1e3);
                    }
                    _ => failed += 1,
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok((lat, failed))
        }
    })?;
    let l = join(loris, "slowloris");
    running.store(false, Ordering::Relaxed);
    let (mut lat, failed) = join(normal, "normal client")?;
    let l = l?;
    let snap = u.snap();
    u.stop()?;
    lat.sort_by(f64::total_cmp);
    let mut m = Metrics::new();
    m.insert("loris_opened".into(), l.opened as f64);
    m.insert("loris_refused".into(), l.refused as f64);
    m.insert("loris_held_peak".into(), snap.peak_sessions as f64);
    m.insert(
        "head_timeouts".into(),
        (snap.stats.head_timeouts - stats0.head_timeouts) as f64,
    );
    m.insert("loris_closed".into(), l.closed_by_server as f64);
    m.insert("loris_max_life_s".into(), l.max_life_s);
    m.insert("normal_ok".into(), lat.len() as f64);
    m.insert("normal_failed".into(), failed as f64);
    if !lat.is_empty() {
        m.insert("normal_p50_ms".into(), lat[lat.len() / 2]);
        m.insert("normal_max_ms".into(), lat[lat.len() - 1]);
    }
    Ok(m)
}

/// A directory with a file inside and a symbolic link to a file outside; removed on drop.
struct RootDir {
    dir: PathBuf,
}

impl RootDir {
    fn create() -> io::Result<RootDir> {
        let dir = std::env::temp_dir().join(format!("ulnet-bench-attack-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("root"))?;
        std::fs::write(dir.join("secret.txt"), b"outside the root\n")?;
        std::fs::write(dir.join("root/ok.txt"), b"inside the root\n")?;
        std::os::unix::fs::symlink("../secret.txt", dir.join("root/escape"))?;
        Ok(RootDir { dir })
    }
}

impl Drop for RootDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Sends a request whose line is `len` bytes long, then reads the answer.
fn long_line(to: SocketAddr, len: usize) -> io::Result<(u16, bool)> {
    let mut s = connect_from(None, to, Duration::from_secs(10))?;
    s.set_read_timeout(Some(IO_LIMIT))?;
    s.set_write_timeout(Some(IO_LIMIT))?;
    let mut req = Vec::with_capacity(len + 64);
    req.extend_from_slice(b"GET /");
    req.resize(len, b'a');
    req.extend_from_slice(b" HTTP/1.1\r\nHost: bench\r\n\r\n");
    // The whole request goes out first, as a client that does not read while it writes
    // would: only a lingering close (RFC 9112 §9.6) lets the answer survive that.
    let wrote_all = s.write_all(&req).is_ok();
    let mut resp = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                resp.extend_from_slice(&buf[..n]);
                if resp.len() > 64 * 1024 {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    Ok((parse_status(&resp).unwrap_or(0), wrote_all))
}

/// Part 4, one round.
fn checks_round(tb: &Testbed, backend: Backend, root: &RootDir) -> io::Result<Metrics> {
    let b = tb.b();
    let cfg = HttpConfig {
        root: Some(root.dir.join("root")),
        ..HttpConfig::default()
    };
    let u = open_ulnet(tb, backend, cfg, TcpConfig::default(), &[], true)?;
    let to = u.addr;
    std::thread::sleep(Duration::from_millis(200));
    let t = in_ns(
        &b.ns,
        LOAD_CPU,
        || Ok(()),
        move |()| {
            let line = long_line(to, 1 << 20)?;
            let inside = http_get(None, to, "/ok.txt")?.status;
            let escape = http_get(None, to, "/escape")?.status;
            Ok((line, inside, escape))
        },
    )?;
    let r = join(t, "checks");
    u.stop()?;
    let ((line, wrote_all), inside, escape) = r?;
    let mut m = Metrics::new();
    m.insert("long_line_status".into(), f64::from(line));
    m.insert("long_line_wrote_all".into(), f64::from(u8::from(wrote_all)));
    m.insert("inside_status".into(), f64::from(inside));
    m.insert("symlink_status".into(), f64::from(escape));
    m.insert(
        "checks_pass".into(),
        f64::from(u8::from(line == 431 && inside == 200 && escape == 404)),
    );
    Ok(m)
}

fn flag(m: &str, label: &str) -> Metric {
    Metric::more(m, label, 0)
}

impl Experiment for Attack {
    fn name(&self) -> &'static str {
        "attack"
    }

    fn seed(&self) -> &'static str {
        "-"
    }

    fn title(&self) -> &'static str {
        "One hostile host against ulnet's HTTP server (issue 13): SYN flood with a download running, idle and embryonic connection memory, slowloris, the 431 and symlink checks"
    }

    fn estimate(&self, plan: &Plan) -> Duration {
        let sz = sizes(plan.profile);
        let r = f64::from(plan.rounds);
        let n_ulnet = plan.backends_or(wanted_backends(plan.profile)).len() as f64;
        // Pessimistic figures of this shared 2-core machine: downloads at 0.5 Gb/s (two
        // per round), the flood at 100k SYN/s, connections opened at 3,000/s, plus the
        // fixed waits (XDP attach, heap trim) of each part.
        let dl = 2.0 * sz.download as f64 * 8.0 / 0.5e9;
        let flood = 1.0 + dl + sz.syns as f64 / 100_000.0 + 2.5;
        let idle = 6.0 + sz.idle as f64 / 3_000.0 + sz.embryonic as f64 / 100_000.0 + 3.0;
        let loris = 1.0 + sz.loris as f64 / 3_000.0 + sz.head_timeout.as_secs_f64() + 2.0;
        let checks = 2.0;
        Duration::from_secs_f64(
            3.0 + r * (flood * (1.0 + n_ulnet) + n_ulnet * (idle + loris + checks)),
        )
    }

    fn tools(&self) -> &'static [&'static str] {
        &["ip", "nft", "cat", "sysctl", "taskset", "python3"]
    }

    fn run(&self, ctx: &mut Ctx<'_>) -> io::Result<()> {
        let sz = sizes(ctx.profile());
        let backends = ctx.plan.backends_or(wanted_backends(ctx.profile()));
        let ulnets: Vec<&str> = backends.iter().map(|b| ulnet_id(*b)).collect();
        let mut flood_systems = vec![KERNEL];
        flood_systems.extend(&ulnets);
        if backends.contains(&Backend::Xdp) {
            flood_systems.push(UNPOLICED);
        }

        ctx.status("testbed");
        let tb = Testbed::builder()
            .name_prefix("atk")
            .build()
            .map_err(io_err)?;
        let (a, b) = (tb.a().clone(), tb.b().clone());
        let pool = spoof_pool(&a);
        // Both servers send their SYN-ACKs for the spoofed sources to B's MAC (no ARP for
        // addresses nobody holds), where B's kernel drops them after the counter.
        for ip in &pool {
            a.set_neighbor(IpAddr::V4(*ip), b.mac).map_err(io_err)?;
        }
        setup_synack_counter(&b)?;
        let sources: Vec<IpAddr> = (0..LORIS_SOURCES).map(|i| b.spare_ip(i)).collect();
        let other = b.spare_ip(LORIS_SOURCES);
        for ip in sources.iter().chain([&other]) {
            let c = format!("{ip}/{}", b.prefix_len);
            b.run("ip", ["addr", "add", c.as_str(), "dev", b.ifname.as_str()])
                .map_err(io_err)?;
        }
        // Room for 20,000 client ports towards one server address.
        b.run(
            "sysctl",
            ["-q", "-w", "net.ipv4.ip_local_port_range=1024 65000"],
        )
        .map_err(io_err)?;
        let syncookies = a
            .run("cat", ["/proc/sys/net/ipv4/tcp_syncookies"])
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_else(|e| format!("unreadable ({e})"));
        let backlog = a
            .run("cat", ["/proc/sys/net/ipv4/tcp_max_syn_backlog"])
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();

        let offloads = "off at both veth ends (as the testbed leaves them)".to_owned();
        ctx.system(
            KERNEL,
            "kernel (thread-per-connection server, syncookies)",
            SystemKind::Kernel,
            false,
            &[
                ("server", "a std::net TcpListener in A, a thread per connection, GET /bytes/N answers the pattern".into()),
                ("tcp_syncookies", syncookies),
                ("tcp_max_syn_backlog", backlog),
                ("offloads", offloads.clone()),
                ("MTU", "1500".into()),
            ],
        );
        for be in &backends {
            let mode = open_channel(&a, *be, a.spare_ip(0), true)
                .map_or_else(|e| format!("unknown ({e})"), |c| c.mode());
            ctx.system(
                ulnet_id(*be),
                &format!("ulnet {} (serve http)", be.name()),
                SystemKind::Ulnet,
                true,
                &[
                    ("server", "ulnet_apps::http::Http in the runtime's loop, as `ulnet serve http` runs it".into()),
                    ("channel", format!("{mode} on A's veth end")),
                    ("SYN policer", match be {
                        Backend::Xdp => {
                            let p = ulnet::channel::xdp::SynPolicer::default();
                            format!("in the steering program, default: {} SYNs/s (burst {}), above that {}/s per source (burst {})", p.rate, p.burst, p.per_source_rate, p.per_source_burst)
                        }
                        _ => "none (only the AF_XDP channel has one)".into(),
                    }),
                    ("wait", "sleep (poll(2))".into()),
                    ("limits", "default: 4096 sessions, 256 per source, idle 60 s, head timeout 10 s (part 3: the profile's), linger 5 s; part 2 raises sessions and per-source above M".into()),
                    ("tcp", "default TcpConfig (SYN queue 1024, SYN cookies when full, mem hard 512 MiB); part 2: cookies never, SYN queue E".into()),
                    ("offloads", offloads.clone()),
                    ("MTU", "1500".into()),
                ],
            );
        }
        if backends.contains(&Backend::Xdp) {
            ctx.system(
                UNPOLICED,
                "ulnet xdp without the SYN policer (flood only)",
                SystemKind::Ulnet,
                false,
                &[
                    ("server", "as ulnet-xdp".into()),
                    ("SYN policer", "off (XdpOptions::syn_policer = None): every SYN reaches the stack, so its SYN-ACK rate is the stack's SYN-cookie throughput; reported beside the goal, not in it".into()),
                    ("offloads", offloads.clone()),
                    ("MTU", "1500".into()),
                ],
            );
        }
        ctx.param("N spoofed SYNs", sz.syns);
        ctx.param("D download bytes", sz.download);
        ctx.param("M idle connections", sz.idle);
        ctx.param("E embryonic connections", sz.embryonic);
        ctx.param("L slowloris connections", sz.loris);
        ctx.param("head timeout (part 3)", format!("{:?}", sz.head_timeout));
        ctx.param(
            "spoofed sources",
            format!(
                "{} unused addresses of the testbed subnet ({}..), random ports 1024-65023, random ISNs, MSS option, from an AF_PACKET socket in B on CPU {LOAD_CPU}",
                pool.len(),
                pool.first().map(ToString::to_string).unwrap_or_default()
            ),
        );
        ctx.param(
            "clients",
            format!(
                "kernel sockets on threads in B on CPU {LOAD_CPU}; slowloris from {LORIS_SOURCES} addresses of B; the other host is {other}"
            ),
        );

        let mut result = Ok(());
        let root = RootDir::create();
        (|| -> io::Result<()> {
            ctx.case(
                "flood",
                &format!(
                    "{} spoofed SYNs during a {} MB download",
                    sz.syns,
                    sz.download / 1_000_000
                ),
                &[],
            );
            ctx.alternate("flood", &flood_systems, |sys, _| {
                if sys == UNPOLICED {
                    return flood_round(&tb, Some(Backend::Xdp), false, &sz, &pool);
                }
                let be = backends.iter().copied().find(|b| ulnet_id(*b) == sys);
                flood_round(&tb, be, true, &sz, &pool)
            });
            ctx.case(
                "idle",
                &format!(
                    "{} idle connections from one host, then {} embryonic",
                    sz.idle, sz.embryonic
                ),
                &[],
            );
            ctx.alternate("idle", &ulnets, |sys, _| {
                let be = backends
                    .iter()
                    .copied()
                    .find(|b| ulnet_id(*b) == sys)
                    .unwrap_or(Backend::Xdp);
                idle_round(&tb, be, &sz, &pool, other)
            });
            ctx.case(
                "slowloris",
                &format!(
                    "{} slowloris connections from {LORIS_SOURCES} addresses",
                    sz.loris
                ),
                &[],
            );
            ctx.alternate("slowloris", &ulnets, |sys, _| {
                let be = backends
                    .iter()
                    .copied()
                    .find(|b| ulnet_id(*b) == sys)
                    .unwrap_or(Backend::Xdp);
                loris_round(&tb, be, &sz, &sources, other)
            });
            let root = root
                .as_ref()
                .map_err(|e| io_err(format!("root directory: {e}")))?;
            ctx.case("checks", "1 MB request line; symlink out of --root", &[]);
            ctx.alternate("checks", &ulnets, |sys, _| {
                let be = backends
                    .iter()
                    .copied()
                    .find(|b| ulnet_id(*b) == sys)
                    .unwrap_or(Backend::Xdp);
                checks_round(&tb, be, root)
            });
            Ok(())
        })()
        .unwrap_or_else(|e| result = Err(e));
        drop(root);
        tb.teardown().map_err(io_err)?;
        result?;

        let all: Vec<String> = flood_systems.iter().map(|s| (*s).to_owned()).collect();
        let uls: Vec<String> = ulnets.iter().map(|s| (*s).to_owned()).collect();
        ctx.view(View::Table(TableView {
            title: format!("SYN flood: {} spoofed SYNs at full rate during a {} MB download; fresh clients during and after", sz.syns, sz.download / 1_000_000),
            cases: vec!["flood".into()],
            systems: all.clone(),
            metrics: vec![
                Metric::more("synack_per_s", "SYN-ACKs/s seen at B", 0),
                Metric::more("flood_pps", "flood offered (SYN/s)", 0),
                Metric::plain("cookies_sent", "cookies sent", 0),
                Metric::plain("cookies_accepted", "cookies accepted", 0),
                Metric::more("goodput_base_gbps", "download alone (Gb/s)", 3),
                Metric::more("goodput_flood_gbps", "download in flood (Gb/s)", 3),
                flag("download_exact", "byte-exact (1=yes)"),
                Metric::less("fresh_during_ms", "fresh client in flood (ms)", 1),
                flag("fresh_in_flood", "answered before flood end (1=yes)"),
                Metric::less("fresh_after_ms", "fresh client after (ms)", 1),
                Metric::plain("rx_dropped", "frames dropped by ulnet's RX ring", 0),
                Metric::plain("syn_policed", "SYNs dropped by the XDP SYN policer", 0),
                Metric::plain("rss_before_mb", "RSS before (MB)", 1),
                Metric::less("rss_peak_mb", "RSS peak (MB)", 1),
                Metric::plain("rss_after_mb", "RSS after (MB)", 1),
                Metric::less("machine_busy_cores", "machine busy (cores)", 2),
            ],
            baselines: vec![KERNEL.into()],
            ratio_metric: Some("synack_per_s".into()),
        }));
        ctx.view(View::Plot(PlotView {
            id: "flood-goodput".into(),
            title: "Download goodput during the SYN flood".into(),
            kind: PlotKind::Bars,
            cases: vec!["flood".into()],
            systems: all.clone(),
            x_param: None,
            x_label: String::new(),
            y: Metric::more("goodput_flood_gbps", "goodput in flood (Gb/s)", 3),
            y2: None,
            x_log: false,
        }));
        ctx.view(View::Plot(PlotView {
            id: "flood-synacks".into(),
            title: "SYN-ACKs per second under the flood (SYN-cookie throughput)".into(),
            kind: PlotKind::Bars,
            cases: vec!["flood".into()],
            systems: all,
            x_param: None,
            x_label: String::new(),
            y: Metric::more("synack_per_s", "SYN-ACKs/s", 0),
            y2: None,
            x_log: false,
        }));
        ctx.view(View::Table(TableView {
            title: format!("Idle connections: {} established from one host (limits raised above it), another host served; then {} embryonic (cookies off)", sz.idle, sz.embryonic),
            cases: vec!["idle".into()],
            systems: uls.clone(),
            metrics: vec![
                Metric::plain("idle_conns", "held", 0),
                Metric::plain("rss_start_mb", "RSS start (MB)", 1),
                Metric::less("rss_held_mb", "RSS held (MB)", 1),
                Metric::less("rss_after_mb", "RSS after close (MB)", 1),
                Metric::less("rss_after_ratio", "after/start", 3),
                Metric::less("rss_trimmed_mb", "RSS after malloc_trim (MB)", 1),
                Metric::less("rss_trimmed_ratio", "trimmed/start", 3),
                Metric::less("kb_per_idle_conn", "KiB per idle conn (RSS)", 2),
                Metric::less("mem_bytes_held_kb", "buffer storage held (KiB)", 0),
                flag("other_ok", "other host served (1=yes)"),
                Metric::less("other_ms", "other host request (ms)", 1),
                Metric::plain("embryonic", "embryonic", 0),
                Metric::less("kb_per_embryonic", "KiB per embryonic (RSS)", 2),
            ],
            baselines: vec![],
            ratio_metric: None,
        }));
        ctx.view(View::Table(TableView {
            title: format!("Slowloris: {} connections, one byte a second, from {LORIS_SOURCES} addresses; a normal client every 100 ms", sz.loris),
            cases: vec!["slowloris".into()],
            systems: uls.clone(),
            metrics: vec![
                Metric::plain("loris_opened", "opened", 0),
                Metric::plain("loris_held_peak", "server sessions peak", 0),
                Metric::plain("head_timeouts", "head timeouts", 0),
                Metric::plain("loris_closed", "closed by server", 0),
                Metric::less("loris_max_life_s", "longest life (s)", 1),
                Metric::more("normal_ok", "normal requests ok", 0),
                Metric::less("normal_failed", "normal requests failed", 0),
                Metric::less("normal_p50_ms", "normal p50 (ms)", 1),
                Metric::less("normal_max_ms", "normal max (ms)", 1),
            ],
            baselines: vec![],
            ratio_metric: None,
        }));
        ctx.view(View::Table(TableView {
            title: "Checks: a 1 MB request line; a symbolic link out of --root".into(),
            cases: vec!["checks".into()],
            systems: uls,
            metrics: vec![
                Metric::plain("long_line_status", "1 MB line: status", 0),
                Metric::plain("long_line_wrote_all", "request fully written", 0),
                Metric::plain("inside_status", "file inside root: status", 0),
                Metric::plain("symlink_status", "symlink out: status", 0),
                flag("checks_pass", "pass (1=yes)"),
            ],
            baselines: vec![],
            ratio_metric: None,
        }));
        ctx.note("SYN-ACKs are counted by an nftables counter on B's ingress, the same for every row; they include SYN-ACKs from the SYN queue (the first 1024 spoofed SYNs, and their retransmissions) as well as cookies. The kernel row's cookie counts are its namespace's TcpExt SyncookiesSent/SyncookiesRecv; its SYN handling runs in softirq on the flooding core (veth), so it competes with the flood sender for CPU 0 while ulnet's runs on CPU 1.");
        ctx.note("RSS is this process's VmRSS: the ulnet rows' server runs here (with the client and flood threads, whose memory is small and steady); it means nothing for the kernel row, which shows none. Memory per connection is the RSS delta over the connections held.");
        ctx.note("Part 2's 'RSS after close' is what the runtime gave back by itself (it calls malloc_trim once at least 8 MiB of buffer storage was freed); 'after malloc_trim' is the same heap after the bench called malloc_trim itself: the difference is freed memory the runtime's trim rule does not see (idle connections hold no buffer storage, so their control blocks' memory never triggers a trim).");
        ctx.note("The kernel server has no idle or head timeout and no per-source limit (a plain thread-per-connection server), so it has no row in parts 2-4: what is checked there is ulnet's app against the issue's bounds.");
        if ctx.profile() == Profile::Smoke {
            ctx.note("Smoke profile: a few thousand SYNs and a few hundred connections; the figures prove the harness runs, nothing more.");
        }
        Ok(())
    }

    fn seed_figure(&self) -> &'static str {
        "Issue 13 (before its fixes), `ulnet serve http` on the testbed:\n\n\
| attack | effect |\n\
| --- | --- |\n\
| 1,024 spoofed SYNs (~20 ms of a flood) | every new connection blocked for ~2 minutes |\n\
| 1,024 half-open connections | ~280 MB RSS (547 MB once reused heap is zeroed), never returned |\n\
| 1,024 idle or one-byte-per-second connections | everyone else locked out while held |\n\
| request head > 8 KiB | the 431 is never delivered (reset) |\n\
| symlink in --root | followed out of the directory |\n\n\
Goal: 100,000 spoofed SYNs while a 100 MB download runs, the download byte-exact and a fresh client served during and after; 20,000 idle connections from one host without locking others out, RSS back within 10% after; 2,000 slowloris connections with others served; the 431 delivered; the symlink refused."
    }

    fn verdict(&self, r: &ExperimentResult, s: &Summary) -> Vec<String> {
        let mut out = Vec::new();
        let min = |case: &str, sys: &str, m: &str| s.get(case, sys, m).map(|x| x.min);
        let med = |case: &str, sys: &str, m: &str| s.median(case, sys, m);
        for sys in r.systems.iter().filter(|x| x.id != KERNEL) {
            let id = sys.id.as_str();
            if let (Some(exact), Some(during), Some(after), Some(inside)) = (
                min("flood", id, "download_exact"),
                min("flood", id, "fresh_during_ok"),
                min("flood", id, "fresh_after_ok"),
                s.get("flood", id, "fresh_in_flood"),
            ) {
                let in_all = inside.min >= 1.0;
                let holds = exact >= 1.0 && during >= 1.0 && after >= 1.0 && in_all;
                let in_rounds = r
                    .measurements
                    .iter()
                    .filter(|m| m.case == "flood" && m.system == id)
                    .filter(|m| m.metrics.get("fresh_in_flood") == Some(&1.0))
                    .count();
                out.push(format!(
                    "{}: under the SYN flood the download was {} in every round, a fresh client started mid-flood was {} (its answer complete before the flood's end in {} round(s) of {}; the flood lasted {:.0} ms) and one after it {}; {:.0} SYN-ACKs/s (the kernel row {}), goodput {:.3} Gb/s in the flood vs {:.3} alone; RSS peak {:.1} MB from {:.1} MB. The flood goal {}.",
                    sys.label,
                    if exact >= 1.0 { "byte-exact" } else { "NOT byte-exact" },
                    if during >= 1.0 { "served" } else { "NOT always served" },
                    in_rounds,
                    inside.n,
                    med("flood", id, "flood_ms").unwrap_or(0.0),
                    if after >= 1.0 { "was served" } else { "was NOT always served" },
                    med("flood", id, "synack_per_s").unwrap_or(0.0),
                    med("flood", KERNEL, "synack_per_s").map_or("not measured".into(), |k| format!("{k:.0}")),
                    med("flood", id, "goodput_flood_gbps").unwrap_or(0.0),
                    med("flood", id, "goodput_base_gbps").unwrap_or(0.0),
                    med("flood", id, "rss_peak_mb").unwrap_or(0.0),
                    med("flood", id, "rss_before_mb").unwrap_or(0.0),
                    if id == UNPOLICED {
                        "is not judged on this row (the SYN policer off; beside the goal)"
                    } else if holds {
                        "holds"
                    } else {
                        "does not hold"
                    }
                ));
            }
            if let (Some(other), Some(ratio), Some(budget)) = (
                min("idle", id, "other_ok"),
                s.get("idle", id, "rss_after_ratio").map(|x| x.max),
                min("idle", id, "rss_under_budget"),
            ) {
                let holds = other >= 1.0 && ratio <= 1.10 && budget >= 1.0;
                out.push(format!(
                    "{}: with {:.0} idle connections held another host was {}, RSS {} the budget, and after they closed RSS was at most {:.2}x the start (goal ≤ 1.10x; {:.2}x after an explicit malloc_trim); {:.2} KiB per idle and {:.2} KiB per embryonic connection. The idle goal {}.",
                    sys.label,
                    med("idle", id, "idle_conns").unwrap_or(0.0),
                    if other >= 1.0 { "served" } else { "NOT always served" },
                    if budget >= 1.0 { "stayed under" } else { "went over" },
                    ratio,
                    s.get("idle", id, "rss_trimmed_ratio").map_or(0.0, |x| x.max),
                    med("idle", id, "kb_per_idle_conn").unwrap_or(0.0),
                    med("idle", id, "kb_per_embryonic").unwrap_or(0.0),
                    if holds { "holds" } else { "does not hold" }
                ));
            }
            if let (Some(failed), Some(okn)) = (
                s.get("slowloris", id, "normal_failed").map(|x| x.max),
                min("slowloris", id, "normal_ok"),
            ) {
                let holds = failed == 0.0 && okn > 0.0;
                out.push(format!(
                    "{}: during slowloris a normal client got {:.0}+ answers per round with {:.0} failures at most (median latency {:.1} ms, max {:.1} ms) and the server closed {:.0} slow connections by head timeout. The slowloris goal {}.",
                    sys.label,
                    okn,
                    failed,
                    med("slowloris", id, "normal_p50_ms").unwrap_or(0.0),
                    med("slowloris", id, "normal_max_ms").unwrap_or(0.0),
                    med("slowloris", id, "head_timeouts").unwrap_or(0.0),
                    if holds { "holds" } else { "does not hold" }
                ));
            }
            if let Some(p) = min("checks", id, "checks_pass") {
                out.push(format!(
                    "{}: the 1 MB request line got status {:.0} and the symlink out of the root {:.0}: the checks {}.",
                    sys.label,
                    med("checks", id, "long_line_status").unwrap_or(0.0),
                    med("checks", id, "symlink_status").unwrap_or(0.0),
                    if p >= 1.0 { "pass" } else { "fail" }
                ));
            }
        }
        if out.is_empty() {
            out.push("No ulnet row was measured; no verdict.".into());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syn_frames_carry_valid_checksums() {
        let mut f = [0u8; 58];
        let src = (Ipv4Addr::new(198, 18, 3, 120), 4321);
        let dst = SocketAddrV4::new(Ipv4Addr::new(198, 18, 3, 16), 80);
        syn_frame(&mut f, ([1; 6], [2; 6]), src, dst, 0xdead_beef);
        assert_eq!(&f[..6], &[2; 6]);
        assert_eq!(checksum::data(&f[14..34]), 0xffff, "IPv4 header checksum");
        let sum = checksum::combine(&[
            checksum::pseudo_header(
                &IpAddr::V4(src.0),
                &IpAddr::V4(*dst.ip()),
                IpProtocol::Tcp,
                24,
            ),
            checksum::data(&f[34..]),
        ]);
        assert_eq!(sum, 0xffff, "TCP checksum");
        assert_eq!(f[47], 0x02, "SYN only");
        assert_eq!(
            u32::from_be_bytes([f[38], f[39], f[40], f[41]]),
            0xdead_beef
        );
    }

    #[test]
    fn parsers() {
        assert_eq!(
            parse_vm_rss("Name:\tx\nVmRSS:\t  1234 kB\n"),
            Some(1234 * 1024)
        );
        assert_eq!(parse_vm_rss("Name: x\n"), None);
        assert_eq!(
            parse_status(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            Some(431)
        );
        assert_eq!(parse_status(b"garbage"), None);
        assert_eq!(
            counter_packets(
                "table netdev t {\n chain in {\n ... counter packets 42 bytes 2520\n }\n}"
            ),
            42
        );
    }

    #[test]
    fn spoof_pool_avoids_used_addresses() {
        let side = Side {
            side: crate::testbed::SideId::A,
            ns: "x".into(),
            ifname: "x".into(),
            ifindex: 1,
            mac: crate::testbed::MacAddr([2; 6]),
            ip: IpAddr::V4(Ipv4Addr::new(198, 18, 7, 1)),
            prefix_len: 24,
            mtu: 1500,
            kernel_offloads: false,
            ipv6: false,
            spare_first: Ipv4Addr::new(198, 18, 7, 16),
            spare_count: 100,
            ip6: None,
            prefix6_len: 0,
            spare6_first: None,
        };
        let p = spoof_pool(&side);
        assert_eq!(p.len(), 38);
        for ip in p {
            let h = ip.octets()[3];
            assert!((116..=143).contains(&h) || (244..=253).contains(&h));
        }
    }
}
