//! An iperf3 server over the [`net`](ulnet::net) socket API: an unmodified `iperf3 -c`
//! runs TCP and UDP tests against it, forward and reverse (`-R`), with parallel
//! streams (`-P`), and gets results it can print (and `-J`son).
//!
//! The protocol (iperf3's own, as of 3.x): the client opens a control connection and
//! sends a 37-byte cookie; the server drives it through single-byte states
//! (PARAM_EXCHANGE: the client sends its test parameters as length-prefixed JSON;
//! CREATE_STREAMS: the client opens the data streams, each TCP stream starting with the
//! cookie, each UDP stream with a 4-byte hello the server answers; TEST_START,
//! TEST_RUNNING; the client ends the test with TEST_END; EXCHANGE_RESULTS: both sides
//! send per-stream results as JSON; DISPLAY_RESULTS; the client says IPERF_DONE).
//! UDP datagrams carry the sender's time (seconds, microseconds) and a packet count;
//! the receiver counts gaps as losses and tracks jitter as RFC 1889 §6.3.1 / A.8 does.
//!
//! One test at a time, as iperf3 itself; unsupported modes (bidirectional, SCTP) are
//! refused with SERVER_ERROR. Every wait is bounded, so a vanished client never wedges
//! the server.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use ulnet_stack::socket::UdpConfig;
use ulnet_stack::tcp::Algorithm;

use ulnet::net::{Interest, Poller, Stack, TcpListener, TcpStream, Token, UdpSocket};

/// iperf3's well-known port.
pub const DEFAULT_PORT: u16 = 5201;
/// Length of the cookie that opens every connection (36 characters and a NUL).
pub const COOKIE_LEN: usize = 37;

const TEST_START: u8 = 1;
const TEST_RUNNING: u8 = 2;
const TEST_END: u8 = 4;
const PARAM_EXCHANGE: u8 = 9;
const CREATE_STREAMS: u8 = 10;
const CLIENT_TERMINATE: u8 = 12;
const EXCHANGE_RESULTS: u8 = 13;
const DISPLAY_RESULTS: u8 = 14;
const IPERF_DONE: u8 = 16;
/// -1 and -2 as the signed char iperf3 sends.
const ACCESS_DENIED: u8 = 0xff;
const SERVER_ERROR: u8 = 0xfe;
/// The UDP stream hello and its answer, as iperf3 writes them (host-order ints; x86
/// and arm64 are little-endian): "6789"/"9876" since 3.11, decimal numbers before.
const UDP_CONNECT_MSG: u32 = 0x3637_3839;
const UDP_CONNECT_REPLY: u32 = 0x3938_3736;
const LEGACY_UDP_CONNECT_MSG: u32 = 123_456_789;
const LEGACY_UDP_CONNECT_REPLY: u32 = 987_654_321;

/// Largest JSON message accepted from a client.
const MAX_JSON_LEN: usize = 64 * 1024;
/// Most parallel streams accepted (iperf3's own limit is 128).
const MAX_STREAMS: usize = 128;
/// Largest block a client may ask for.
const MAX_BLOCK_LEN: usize = 1024 * 1024;
/// How long each setup step may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Granularity at which workers look at the stop flags.
const TICK: Duration = Duration::from_millis(100);

/// The client's test parameters (the fields the server needs; others are ignored).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct Params {
    tcp: bool,
    udp: bool,
    sctp: bool,
    reverse: bool,
    bidirectional: bool,
    parallel: usize,
    len: usize,
    bandwidth: u64,
    time: u64,
    omit: u64,
    udp_counters_64bit: u64,
    congestion: Option<String>,
    get_server_output: u64,
}

/// What one finished test did, as the server saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct TestSummary {
    /// The client's control-connection address.
    pub client: SocketAddr,
    /// UDP (true) or TCP.
    pub udp: bool,
    /// The server sent (reverse mode) rather than received.
    pub reverse: bool,
    /// Parallel streams.
    pub streams: usize,
    /// Payload bytes moved over all streams while the test ran.
    pub bytes: u64,
    /// Seconds from TEST_START to TEST_END.
    pub seconds: f64,
    /// UDP: datagrams lost (sequence gaps) as the receiver counted them.
    pub lost: u64,
    /// UDP: datagrams received or sent.
    pub packets: u64,
    /// TCP sender: segments retransmitted.
    pub retransmits: u64,
    /// TCP sender: retransmission timeouts that fired (the costly kind of recovery).
    pub timeouts: u64,
}

impl TestSummary {
    /// Throughput in bits per second.
    pub fn bits_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 * 8.0 / self.seconds
        } else {
            0.0
        }
    }
}

impl std::fmt::Display for TestSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} from {}: {} stream(s), {} bytes in {:.2} s = {:.1} Mbit/s",
            if self.udp { "udp" } else { "tcp" },
            if self.reverse { "send" } else { "receive" },
            self.client,
            self.streams,
            self.bytes,
            self.seconds,
            self.bits_per_second() / 1e6
        )?;
        if self.udp {
            write!(f, ", {} packets, {} lost", self.packets, self.lost)?;
        } else if self.reverse {
            write!(
                f,
                ", {} retransmits, {} timeouts",
                self.retransmits, self.timeouts
            )?;
        }
        Ok(())
    }
}

/// Per-stream results, as they go into the results JSON.
#[derive(Debug, Clone, Copy, Default)]
struct StreamResult {
    bytes: u64,
    retransmits: i64,
    jitter: f64,
    errors: u64,
    packets: u64,
}

/// iperf3 numbers streams 1, 3, 4, 5, ... (its list insertion counts from 2 after the
/// first).
fn stream_id(i: usize) -> usize {
    if i == 0 {
        1
    } else {
        i + 2
    }
}

/// An iperf3 server on one stack.
#[derive(Debug)]
pub struct Iperf3Server {
    stack: Stack,
    listener: TcpListener,
    port: u16,
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Fills `buf` by `deadline`: the read timeout alone restarts with every byte, so a
/// client trickling one byte at a time could hold the one-test-at-a-time server forever
/// (issue 13).
fn read_exact_by(s: &mut TcpStream, mut buf: &mut [u8], deadline: Instant) -> io::Result<()> {
    while !buf.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client is too slow",
            ));
        }
        s.set_read_timeout(Some(left))?;
        match s.read(buf) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One length-prefixed JSON message, complete by `deadline`.
fn read_json(s: &mut TcpStream, deadline: Instant) -> io::Result<serde_json::Value> {
    let mut len = [0u8; 4];
    read_exact_by(s, &mut len, deadline)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_JSON_LEN {
        return Err(bad(format!("JSON message of {len} bytes")));
    }
    let mut buf = vec![0u8; len];
    read_exact_by(s, &mut buf, deadline)?;
    serde_json::from_slice(&buf).map_err(|e| bad(format!("bad JSON: {e}")))
}

fn write_json(s: &mut TcpStream, v: &serde_json::Value) -> io::Result<()> {
    let text = v.to_string();
    let mut msg = Vec::with_capacity(4 + text.len());
    msg.extend_from_slice(&(text.len() as u32).to_be_bytes());
    msg.extend_from_slice(text.as_bytes());
    s.write_all(&msg)
}

/// CPU time of this process (user, system), from `/proc/self/stat` (clock ticks of
/// 1/100 s, the `USER_HZ` Linux reports there on every architecture).
fn cpu_times() -> (f64, f64) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return (0.0, 0.0);
    };
    // Fields after the parenthesised command name: state is field 3; utime 14, stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    (tick(11), tick(12))
}

impl Iperf3Server {
    /// Listens on `port` (TCP) of `stack`; UDP tests bind the same port when they
    /// start.
    ///
    /// # Errors
    /// As [`TcpListener::bind`].
    pub fn bind(stack: &Stack, port: u16) -> io::Result<Iperf3Server> {
        Self::bind_addr(stack, SocketAddr::new(stack.local_ip(), port))
    }

    /// Listens on `local` (TCP): one of the stack's addresses, or a wildcard (`[::]`
    /// takes IPv4 too, a dual-stack server). UDP tests bind the address the control
    /// connection arrived on.
    ///
    /// # Errors
    /// As [`TcpListener::bind`].
    pub fn bind_addr(stack: &Stack, local: SocketAddr) -> io::Result<Iperf3Server> {
        let listener = TcpListener::bind(stack, local)?;
        // Port 0 picked a free port: UDP tests bind that one too.
        let port = listener.local_addr()?.port();
        Ok(Iperf3Server {
            stack: stack.clone(),
            listener,
            port,
        })
    }

    /// Serves tests one after the other until `stop` is set or `max_tests` tests have
    /// run, calling `report` with each test's summary or error.
    ///
    /// # Errors
    /// The stack stopped under the server.
    pub fn run(
        &self,
        stop: &AtomicBool,
        max_tests: Option<usize>,
        report: &mut dyn FnMut(io::Result<TestSummary>),
    ) -> io::Result<()> {
        let poller = Poller::new(&self.stack);
        self.listener.set_nonblocking(true)?;
        poller.register(&self.listener, Token(0), Interest::READABLE)?;
        let mut events = Vec::new();
        let mut done = 0;
        while !stop.load(Ordering::Relaxed) && max_tests.is_none_or(|m| done < m) {
            match self.listener.accept() {
                Ok((ctrl, peer)) => {
                    report(self.serve_one(ctrl, peer));
                    done += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    poller.poll(&mut events, Some(Duration::from_millis(200)))?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Accepts the next connection within `STEP_TIMEOUT`.
    fn accept_within(&self, deadline: Instant) -> io::Result<TcpStream> {
        let poller = Poller::new(&self.stack);
        poller.register(&self.listener, Token(0), Interest::READABLE)?;
        let mut events = Vec::new();
        loop {
            match self.listener.accept() {
                Ok((s, _)) => return Ok(s),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the client did not open its streams",
                        ));
                    }
                    poller.poll(&mut events, Some(deadline - now))?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs one test on the control connection `ctrl`.
    fn serve_one(&self, mut ctrl: TcpStream, peer: SocketAddr) -> io::Result<TestSummary> {
        ctrl.set_nonblocking(false)?;
        ctrl.set_read_timeout(Some(STEP_TIMEOUT))?;
        ctrl.set_write_timeout(Some(STEP_TIMEOUT))?;
        // The cookie and the parameters together within one step's time.
        let setup = Instant::now() + STEP_TIMEOUT;
        let mut cookie = [0u8; COOKIE_LEN];
        read_exact_by(&mut ctrl, &mut cookie, setup)?;
        ctrl.write_all(&[PARAM_EXCHANGE])?;
        let params: Params = serde_json::from_value(read_json(&mut ctrl, setup)?)
            .map_err(|e| bad(format!("bad parameters: {e}")))?;
        let refuse = if params.bidirectional {
            Some("bidirectional tests are not supported")
        } else if params.sctp || (!params.tcp && !params.udp) {
            Some("only TCP and UDP tests are supported")
        } else if params.parallel > MAX_STREAMS || params.len > MAX_BLOCK_LEN {
            Some("too many streams or too large a block")
        } else {
            None
        };
        if let Some(why) = refuse {
            // SERVER_ERROR, then iperf3's i_errno and errno (network order).
            let mut m = vec![SERVER_ERROR];
            m.extend_from_slice(&1i32.to_be_bytes());
            m.extend_from_slice(&0i32.to_be_bytes());
            let _ = ctrl.write_all(&m);
            return Err(io::Error::new(io::ErrorKind::Unsupported, why));
        }
        let n = params.parallel.max(1);
        let blk = if params.len == 0 {
            if params.udp {
                1448
            } else {
                128 * 1024
            }
        } else {
            params.len
        };
        let udp = if params.udp {
            Some(UdpSocket::bind_with(
                &self.stack,
                SocketAddr::new(ctrl.local_addr()?.ip(), self.port),
                UdpConfig {
                    rx_datagram_count: 4096,
                    rx_len: 4 * 1024 * 1024,
                    tx_datagram_count: 1024,
                    tx_len: 1024 * 1024,
                },
            )?)
        } else {
            None
        };
        ctrl.write_all(&[CREATE_STREAMS])?;
        let deadline = Instant::now() + STEP_TIMEOUT;
        let mut tcp_streams = Vec::new();
        let mut udp_peers = Vec::new();
        match &udp {
            None => {
                let mut attempts = 0;
                while tcp_streams.len() < n {
                    attempts += 1;
                    if attempts > 4 * n + 4 {
                        return Err(bad("too many stray connections"));
                    }
                    let mut s = self.accept_within(deadline)?;
                    s.set_nonblocking(false)?;
                    let mut c = [0u8; COOKIE_LEN];
                    if read_exact_by(&mut s, &mut c, deadline).is_err() || c != cookie {
                        // Another client while this test runs: iperf3 says busy.
                        let _ = s.write_all(&[ACCESS_DENIED]);
                        continue;
                    }
                    if let Some(alg) = params.congestion.as_deref().and_then(algorithm) {
                        let _ = s.set_congestion(alg);
                    }
                    tcp_streams.push(s);
                }
            }
            Some(u) => {
                u.set_read_timeout(Some(TICK))?;
                let mut buf = [0u8; 2048];
                while udp_peers.len() < n {
                    if Instant::now() >= deadline {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the client did not open its UDP streams",
                        ));
                    }
                    match u.recv_from(&mut buf) {
                        Ok((len, from)) => {
                            let msg = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
                            let reply = match msg {
                                _ if len != 4 => None,
                                UDP_CONNECT_MSG => Some(UDP_CONNECT_REPLY),
                                LEGACY_UDP_CONNECT_MSG => Some(LEGACY_UDP_CONNECT_REPLY),
                                _ => None,
                            };
                            if let Some(reply) = reply {
                                if !udp_peers.contains(&from) {
                                    udp_peers.push(from);
                                }
                                u.send_to(&reply.to_ne_bytes(), from)?;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        ctrl.write_all(&[TEST_START])?;
        let shared = Arc::new(Shared {
            running: AtomicBool::new(true),
            finished: AtomicBool::new(false),
            stopped: AtomicUsize::new(0),
            results: Mutex::new(vec![StreamResult::default(); n]),
        });
        let start = Instant::now();
        let cpu0 = cpu_times();
        ctrl.write_all(&[TEST_RUNNING])?;
        let mut workers: Vec<JoinHandle<()>> = Vec::new();
        match &udp {
            None => {
                for (i, s) in tcp_streams.iter().enumerate() {
                    let s = s.try_clone()?;
                    let sh = Arc::clone(&shared);
                    let reverse = params.reverse;
                    workers.push(thread::spawn(move || {
                        if reverse {
                            tcp_send(&s, i, blk, &sh);
                        } else {
                            tcp_recv(&s, i, &sh);
                        }
                    }));
                }
            }
            Some(u) => {
                let u = u.try_clone()?;
                let sh = Arc::clone(&shared);
                let peers = udp_peers.clone();
                let wide = params.udp_counters_64bit != 0;
                let (rate, reverse) = (params.bandwidth, params.reverse);
                workers.push(thread::spawn(move || {
                    if reverse {
                        udp_send(&u, &peers, blk, rate, wide, &sh);
                    } else {
                        udp_recv(&u, &peers, wide, &sh);
                    }
                }));
            }
        }
        let ended = wait_test_end(&mut ctrl, params.time + params.omit);
        shared.running.store(false, Ordering::SeqCst);
        let seconds = start.elapsed().as_secs_f64();
        let cpu1 = cpu_times();
        // Each worker records its final counts when it sees the test stop (within a
        // tick); forward TCP receivers then keep draining until the client is done, so
        // closing never resets a connection that still carries data.
        let wait_until = Instant::now() + 10 * TICK;
        while shared.stopped.load(Ordering::SeqCst) < workers.len() && Instant::now() < wait_until {
            thread::sleep(TICK / 10);
        }
        let mut retransmits = Vec::new();
        let mut timeouts = 0;
        if params.reverse {
            // iperf3 closes the data streams at TEST_END: the client's reads end with
            // EOF once what is queued has arrived.
            retransmits = tcp_streams
                .iter()
                .map(|s| s.info().map_or(0, |i| i.retransmits as i64))
                .collect();
            timeouts = tcp_streams
                .iter()
                .map(|s| s.info().map_or(0, |i| i.timeouts))
                .sum();
            for w in workers.drain(..) {
                let _ = w.join();
            }
            tcp_streams.clear();
        }
        let outcome = ended.and_then(|()| {
            let mut results = shared
                .results
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            for (r, x) in results.iter_mut().zip(&retransmits) {
                r.retransmits = *x;
            }
            let summary = TestSummary {
                client: peer,
                udp: params.udp,
                reverse: params.reverse,
                streams: n,
                bytes: results.iter().map(|r| r.bytes).sum(),
                seconds,
                lost: results.iter().map(|r| r.errors).sum(),
                packets: results.iter().map(|r| r.packets).sum(),
                retransmits: results.iter().map(|r| r.retransmits.max(0) as u64).sum(),
                timeouts,
            };
            exchange(
                &mut ctrl,
                &params,
                &results,
                seconds,
                (cpu0, cpu1),
                &summary,
            )?;
            Ok(summary)
        });
        shared.finished.store(true, Ordering::SeqCst);
        for w in workers {
            let _ = w.join();
        }
        outcome
    }
}

/// State the control thread shares with the stream workers.
#[derive(Debug)]
struct Shared {
    /// The test runs: count bytes.
    running: AtomicBool,
    /// The client is done: stop draining.
    finished: AtomicBool,
    /// Workers that recorded their final counts.
    stopped: AtomicUsize,
    results: Mutex<Vec<StreamResult>>,
}

impl Shared {
    fn record(&self, i: usize, r: StreamResult) {
        if let Some(slot) = self
            .results
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(i)
        {
            *slot = r;
        }
        self.stopped.fetch_add(1, Ordering::SeqCst);
    }
}

/// Waits for TEST_END on the control connection; the client's test time plus a
/// margin bounds the wait.
fn wait_test_end(ctrl: &mut TcpStream, seconds: u64) -> io::Result<()> {
    ctrl.set_read_timeout(Some(TICK * 5))?;
    let limit = Instant::now() + Duration::from_secs(seconds.min(86_400) + 30);
    let mut b = [0u8; 1];
    loop {
        match ctrl.read(&mut b) {
            Ok(0) => return Err(bad("the client closed the control connection")),
            Ok(_) if b[0] == TEST_END => return Ok(()),
            Ok(_) if b[0] == CLIENT_TERMINATE => return Err(bad("the client terminated the test")),
            Ok(_) => return Err(bad(format!("unexpected state {} during the test", b[0]))),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= limit {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "no TEST_END"));
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// EXCHANGE_RESULTS, DISPLAY_RESULTS and the client's IPERF_DONE.
fn exchange(
    ctrl: &mut TcpStream,
    params: &Params,
    results: &[StreamResult],
    seconds: f64,
    (cpu0, cpu1): ((f64, f64), (f64, f64)),
    summary: &TestSummary,
) -> io::Result<()> {
    ctrl.set_read_timeout(Some(STEP_TIMEOUT))?;
    ctrl.write_all(&[EXCHANGE_RESULTS])?;
    let _client_results = read_json(ctrl, Instant::now() + STEP_TIMEOUT)?;
    let wall = seconds.max(1e-6);
    let user = 100.0 * (cpu1.0 - cpu0.0).max(0.0) / wall;
    let system = 100.0 * (cpu1.1 - cpu0.1).max(0.0) / wall;
    let sender_tcp = params.reverse && params.tcp;
    let streams: Vec<serde_json::Value> = results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            serde_json::json!({
                "id": stream_id(i),
                "bytes": r.bytes,
                "retransmits": if sender_tcp { r.retransmits } else { -1 },
                "jitter": r.jitter,
                "errors": r.errors,
                "omitted_errors": 0,
                "packets": r.packets,
                "start_time": 0,
                "end_time": seconds,
            })
        })
        .collect();
    let mut ours = serde_json::json!({
        "cpu_util_total": user + system,
        "cpu_util_user": user,
        "cpu_util_system": system,
        "sender_has_retransmits": i32::from(sender_tcp),
        "congestion_used": params.congestion.as_deref().unwrap_or("cubic"),
        "streams": streams,
    });
    if params.get_server_output != 0 {
        ours["server_output_text"] = serde_json::Value::String(format!("ulnet: {summary}\n"));
    }
    write_json(ctrl, &ours)?;
    ctrl.write_all(&[DISPLAY_RESULTS])?;
    let mut b = [0u8; 1];
    match ctrl.read(&mut b) {
        Ok(1) if b[0] == IPERF_DONE => Ok(()),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
        Err(e) => Err(e),
    }
}

/// Forward TCP: count what arrives while the test runs, then drain until done.
fn tcp_recv(s: &TcpStream, i: usize, sh: &Shared) {
    let _ = s.set_read_timeout(Some(TICK));
    let mut buf = vec![0u8; 128 * 1024];
    let mut r = StreamResult::default();
    let mut recorded = false;
    let mut reader = s;
    loop {
        if !recorded && !sh.running.load(Ordering::SeqCst) {
            sh.record(i, r);
            recorded = true;
        }
        if sh.finished.load(Ordering::SeqCst) {
            break;
        }
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) if !recorded => r.bytes += n as u64,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    if !recorded {
        // EOF or an error before the test ended: what arrived is the result.
        while sh.running.load(Ordering::SeqCst) && !sh.finished.load(Ordering::SeqCst) {
            thread::sleep(TICK);
        }
        sh.record(i, r);
    }
}

/// Reverse TCP: send blocks as fast as the connection takes them while the test runs.
fn tcp_send(s: &TcpStream, i: usize, blk: usize, sh: &Shared) {
    let _ = s.set_write_timeout(Some(TICK));
    let block: Vec<u8> = (0..blk).map(|k| (k % 251) as u8).collect();
    let mut r = StreamResult::default();
    let mut writer = s;
    let mut off = 0;
    while sh.running.load(Ordering::SeqCst) {
        match writer.write(&block[off..]) {
            Ok(n) => {
                r.bytes += n as u64;
                off = (off + n) % blk;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    sh.record(i, r);
}

/// The receiver's view of one UDP stream (iperf3's loss and jitter rules).
#[derive(Debug, Default, Clone, Copy)]
struct UdpRx {
    r: StreamResult,
    highest: u64,
    prev_transit: Option<f64>,
}

impl UdpRx {
    fn datagram(&mut self, data: &[u8], wide: bool, arrival: f64) {
        let (hdr, count) = if wide {
            let Some(c) = data.get(8..16) else { return };
            (data, u64::from_be_bytes(c.try_into().unwrap_or_default()))
        } else {
            let Some(c) = data.get(8..12) else { return };
            (
                data,
                u64::from(u32::from_be_bytes(c.try_into().unwrap_or_default())),
            )
        };
        let sec = u32::from_be_bytes(hdr[0..4].try_into().unwrap_or_default());
        let usec = u32::from_be_bytes(hdr[4..8].try_into().unwrap_or_default());
        self.r.bytes += data.len() as u64;
        if count > self.highest {
            // A gap counts as loss; a late datagram below takes one back.
            self.r.errors += count - 1 - self.highest;
            self.highest = count;
        } else {
            self.r.errors = self.r.errors.saturating_sub(1);
        }
        self.r.packets = self.highest;
        // RFC 1889 §6.3.1 / A.8: J += (|D| - J) / 16 over transit-time differences.
        let sent = f64::from(sec) + f64::from(usec) / 1e6;
        let transit = arrival - sent;
        let d = (transit - self.prev_transit.unwrap_or(transit)).abs();
        self.prev_transit = Some(transit);
        self.r.jitter += (d - self.r.jitter) / 16.0;
    }
}

fn wall_clock() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Forward UDP: one receiver demultiplexes the streams by sender address.
fn udp_recv(u: &UdpSocket, peers: &[SocketAddr], wide: bool, sh: &Shared) {
    let index: HashMap<SocketAddr, usize> =
        peers.iter().enumerate().map(|(i, p)| (*p, i)).collect();
    let mut rx = vec![UdpRx::default(); peers.len()];
    let mut buf = vec![0u8; 65536];
    let _ = u.set_read_timeout(Some(TICK));
    while sh.running.load(Ordering::SeqCst) {
        match u.recv_from(&mut buf) {
            Ok((n, from)) => {
                if let Some(&i) = index.get(&from) {
                    rx[i].datagram(&buf[..n], wide, wall_clock());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    for (i, s) in rx.iter().enumerate() {
        sh.record(i, s.r);
    }
}

/// Reverse UDP: each stream paced at `rate` bits/s (0: as fast as the buffer drains).
fn udp_send(u: &UdpSocket, peers: &[SocketAddr], blk: usize, rate: u64, wide: bool, sh: &Shared) {
    let blk = blk.clamp(16, 65_507);
    let mut pkt = vec![0u8; blk];
    let mut r = vec![StreamResult::default(); peers.len()];
    let start = Instant::now();
    let _ = u.set_write_timeout(Some(TICK));
    'run: while sh.running.load(Ordering::SeqCst) {
        let elapsed = start.elapsed().as_secs_f64();
        let mut sent_any = false;
        for (i, p) in peers.iter().enumerate() {
            // At most a burst of 64 datagrams per stream per round.
            for _ in 0..64 {
                let due = rate == 0 || (r[i].bytes as f64 * 8.0) < rate as f64 * elapsed;
                if !due || !sh.running.load(Ordering::SeqCst) {
                    break;
                }
                let now = wall_clock();
                let count = r[i].packets + 1;
                pkt[0..4].copy_from_slice(&(now as u32).to_be_bytes());
                pkt[4..8].copy_from_slice(&((now.fract() * 1e6) as u32).to_be_bytes());
                if wide {
                    pkt[8..16].copy_from_slice(&count.to_be_bytes());
                } else {
                    pkt[8..12].copy_from_slice(&(count as u32).to_be_bytes());
                }
                match u.send_to(&pkt, *p) {
                    Ok(n) => {
                        r[i].bytes += n as u64;
                        r[i].packets = count;
                        sent_any = true;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => break 'run,
                }
            }
        }
        if !sent_any {
            thread::sleep(Duration::from_millis(1));
        }
    }
    for (i, s) in r.iter().enumerate() {
        sh.record(i, *s);
    }
}

/// The congestion control named by iperf3's `-C`.
fn algorithm(name: &str) -> Option<Algorithm> {
    match name {
        "reno" | "newreno" => Some(Algorithm::NewReno),
        "cubic" => Some(Algorithm::Cubic),
        "bbr" => Some(Algorithm::Bbr),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dgram(sec: u32, usec: u32, count: u32) -> Vec<u8> {
        let mut d = vec![0u8; 64];
        d[0..4].copy_from_slice(&sec.to_be_bytes());
        d[4..8].copy_from_slice(&usec.to_be_bytes());
        d[8..12].copy_from_slice(&count.to_be_bytes());
        d
    }

    #[test]
    fn stream_ids_follow_iperf3() {
        assert_eq!((0..4).map(stream_id).collect::<Vec<_>>(), [1, 3, 4, 5]);
    }

    #[test]
    fn udp_receiver_counts_gaps_late_datagrams_and_jitter() {
        let mut rx = UdpRx::default();
        rx.datagram(&dgram(10, 0, 1), false, 10.5);
        rx.datagram(&dgram(10, 1000, 2), false, 10.501);
        assert_eq!((rx.r.errors, rx.r.packets), (0, 2));
        assert_eq!(rx.r.jitter, 0.0, "same transit time: no jitter");
        rx.datagram(&dgram(10, 3000, 4), false, 10.504);
        assert_eq!((rx.r.errors, rx.r.packets), (1, 4), "3 is missing");
        assert!(rx.r.jitter > 0.0 && rx.r.jitter < 0.001);
        rx.datagram(&dgram(10, 2000, 3), false, 10.505);
        assert_eq!(rx.r.errors, 0, "3 arrived late: not lost");
        assert_eq!(rx.r.bytes, 4 * 64);
        // Too short for a header: ignored, no panic.
        rx.datagram(&[1, 2, 3], false, 11.0);
        rx.datagram(&[0; 12], true, 11.0);
        assert_eq!(rx.r.bytes, 4 * 64);
    }

    #[test]
    fn parameters_parse_with_defaults_and_summaries_print() {
        let p: Params = serde_json::from_str(
            r#"{"tcp":true,"parallel":4,"reverse":true,"len":131072,"time":10,"client_version":"3.12"}"#,
        )
        .unwrap();
        assert!(p.tcp && p.reverse && !p.udp && !p.bidirectional);
        assert_eq!((p.parallel, p.len, p.bandwidth), (4, 131_072, 0));
        let s = TestSummary {
            client: "198.18.0.1:1".parse().unwrap(),
            udp: false,
            reverse: true,
            streams: 4,
            bytes: 125_000_000,
            seconds: 1.0,
            lost: 0,
            packets: 0,
            retransmits: 3,
            timeouts: 1,
        };
        assert_eq!(s.bits_per_second(), 1e9);
        assert!(s
            .to_string()
            .contains("1000.0 Mbit/s, 3 retransmits, 1 timeouts"));
        assert_eq!(algorithm("cubic"), Some(Algorithm::Cubic));
        assert_eq!(algorithm("bbr"), Some(Algorithm::Bbr));
        assert_eq!(algorithm("vegas"), None);
        let (u, s) = cpu_times();
        assert!(u >= 0.0 && s >= 0.0);
    }
}
