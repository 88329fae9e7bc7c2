//! The simulated bulk transfer: `connections` clients on node A each send `bytes` of
//! their seeded stream to one listener on node B, which reads to the end and hashes;
//! both sides then close (A first), and the run checks the digests, the final states
//! and the absence of resets.
//!
//! The applications are event-driven (the events each node's `Driver` drains), as in
//! the runtime, so a thousand idle connections cost nothing per step. Each pass runs the
//! drivers' phases node by node: every node takes its arrived frames, then every node's
//! application acts, then every node sends and flushes; then virtual time jumps to the
//! earliest deadline of either stack or the wire.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::time::Instant as WallInstant;

use sha2::{Digest, Sha256};
use ulnet::runtime::App;
use ulnet_channel::sim::Wire;
use ulnet_stack::iface::{DropReason, Interface};
use ulnet_stack::tcp::{
    Event, ListenerHandle, RecvError, Shutdown, SocketHandle, State, Tcp, TcpConfig, TcpInfo,
};
use ulnet_stack::time::{Duration as StackDuration, Instant};

use super::net::{node_addr, Net, NetConfig, A, B};
use super::options::TcpSimOptions;
use super::payload::{hex, Stream};
use super::report::{
    ConnReport, CwndSample, NodeTcpReport, Retransmissions, Spread, TcpSimReport, Windows,
    WireDirection, WireReport,
};

/// The port B listens on (iperf's).
pub const PORT: u16 = 5001;
/// Payload generated and offered to `send` at a time, per connection.
const CHUNK: usize = 16 * 1024;
/// Passes at one virtual instant while a deadline stays at "now", before the harness
/// moves on to the next later event.
const SAME_INSTANT_PASSES: u32 = 3;
/// Passes at one virtual instant with frames still arriving before the run is declared
/// livelocked (a real exchange at one instant is bounded by the windows).
const BUSY_PASS_LIMIT: u64 = 1_000_000;
/// How often (iterations) the wall clock is read.
const WALL_CHECK_EVERY: u64 = 1024;

#[derive(Debug)]
struct Client {
    h: SocketHandle,
    port: u16,
    stream: Stream,
    sent: u64,
    stage: Vec<u8>,
    stage_pos: usize,
    hasher: Sha256,
    digest: Option<[u8; 32]>,
    shut: bool,
    eof: bool,
    done: bool,
    state: State,
    info: Option<TcpInfo>,
    error: Option<String>,
}

#[derive(Debug)]
struct Server {
    h: SocketHandle,
    client: Option<usize>,
    received: u64,
    hasher: Sha256,
    digest: Option<[u8; 32]>,
    shut: bool,
    done: bool,
    state: State,
    info: Option<TcpInfo>,
    error: Option<String>,
}

/// The applications on both nodes, and what they measured.
#[derive(Debug)]
struct Apps {
    bytes: u64,
    listener: ListenerHandle,
    clients: Vec<Client>,
    client_of: HashMap<SocketHandle, usize>,
    client_by_port: HashMap<u16, usize>,
    servers: Vec<Server>,
    server_of: HashMap<SocketHandle, usize>,
    clients_done: usize,
    servers_done: usize,
    total_received: u64,
    /// Virtual instants (µs) when 25%, 95% and 100% of all bytes had arrived.
    t25: Option<u64>,
    t95: Option<u64>,
    t100: Option<u64>,
    /// Bytes the application had read at `t25` and `t95`: a repaired hole hands over a
    /// burst, so a mark is crossed by more than the mark itself.
    b25: u64,
    b95: u64,
    failures: Vec<String>,
    /// RSTs that answered stray segments after their connection completed.
    rsts_after_close: u64,
    /// RSTs sent on connections still in progress.
    live_rsts: u64,
    buf: Vec<u8>,
}

fn isn_key(seed: u64, node: u8) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&seed.to_le_bytes());
    k[8] = node;
    k[15] = 0x5a;
    k
}

fn tcp_config(o: &TcpSimOptions) -> TcpConfig {
    let mut c = TcpConfig::default();
    c.congestion = o.congestion;
    c.sack = o.sack;
    c.timestamps = o.timestamps;
    c.window_scaling = o.window_scaling;
    if let Some(n) = o.send_buffer {
        c.send_buffer_len = n;
    }
    if let Some(n) = o.recv_buffer {
        c.recv_buffer_len = n;
    }
    c.mtu = match o.mss {
        // The MSS excludes the IP and TCP headers: 40 bytes over IPv4, 60 over IPv6.
        Some(mss) => o.mtu.min(usize::from(mss) + if o.ipv6 { 60 } else { 40 }),
        None => o.mtu,
    };
    if let Some(d) = o.delayed_ack {
        c.delayed_ack = StackDuration::from_micros(d.as_micros().min(u128::from(u64::MAX)) as u64);
    }
    // Room for every connection of the run in the listener's queues.
    c.max_backlog = c.max_backlog.max(o.connections);
    c.syn_queue_len = c.syn_queue_len.max(o.connections);
    c.max_connections = c.max_connections.max(o.connections + 16);
    c
}

fn micros_to_s(us: u64) -> f64 {
    us as f64 / 1e6
}

impl Apps {
    fn client(&mut self, tcp: &mut Tcp, now: Instant, i: usize) {
        let c = &mut self.clients[i];
        if c.done {
            return;
        }
        let Ok(r) = tcp.readiness(c.h) else {
            c.error = Some("socket handle became invalid".into());
            c.digest = Some(std::mem::take(&mut c.hasher).finalize().into());
            c.done = true;
            self.clients_done += 1;
            return;
        };
        c.state = tcp.state(c.h).unwrap_or(State::Closed);
        if let Ok(info) = tcp.info(c.h) {
            c.info = Some(info);
        }
        if let Some(e) = r.error {
            c.error = Some(format!("client: {e}"));
        }
        while c.sent < self.bytes && c.error.is_none() {
            if c.stage_pos == c.stage.len() {
                let n = (self.bytes - c.sent).min(CHUNK as u64) as usize;
                c.stage.resize(n, 0);
                c.stream.fill(c.sent, &mut c.stage);
                c.stage_pos = 0;
            }
            match tcp.send(now, c.h, &c.stage[c.stage_pos..]) {
                Ok(0) => break,
                Ok(k) => {
                    c.hasher.update(&c.stage[c.stage_pos..c.stage_pos + k]);
                    c.stage_pos += k;
                    c.sent += k as u64;
                }
                Err(e) => {
                    c.error = Some(format!("client send: {e}"));
                    break;
                }
            }
        }
        if c.sent == self.bytes && !c.shut && c.error.is_none() && c.state.is_synchronized() {
            match tcp.shutdown(now, c.h, Shutdown::Write) {
                Ok(()) => c.shut = true,
                Err(e) => c.error = Some(format!("client shutdown: {e}")),
            }
        }
        while c.error.is_none() {
            match tcp.recv(now, c.h, &mut self.buf) {
                Ok(0) => {
                    c.eof = true;
                    break;
                }
                Ok(n) => {
                    c.error = Some(format!("client received {n} unexpected bytes"));
                }
                Err(RecvError::WouldBlock) => break,
                Err(e) => {
                    c.error = Some(format!("client recv: {e}"));
                    break;
                }
            }
        }
        c.state = tcp.state(c.h).unwrap_or(State::Closed);
        let finished = c.shut && c.eof && matches!(c.state, State::TimeWait | State::Closed);
        if finished || c.error.is_some() {
            c.info = tcp.info(c.h).ok().or(c.info);
            c.digest = Some(std::mem::take(&mut c.hasher).finalize().into());
            let _ = tcp.close(now, c.h);
            c.done = true;
            self.clients_done += 1;
        }
    }

    fn server(&mut self, tcp: &mut Tcp, i: usize, now_us: u64) {
        let now = Instant::from_micros(now_us);
        let s = &mut self.servers[i];
        if s.done {
            return;
        }
        let Ok(r) = tcp.readiness(s.h) else {
            s.error = Some("socket handle became invalid".into());
            s.done = true;
            self.servers_done += 1;
            return;
        };
        if let Ok(info) = tcp.info(s.h) {
            s.info = Some(info);
        }
        let mut eof = s.digest.is_some();
        while !eof {
            match tcp.recv(now, s.h, &mut self.buf) {
                Ok(0) => eof = true,
                Ok(n) => {
                    s.hasher.update(&self.buf[..n]);
                    s.received += n as u64;
                    self.total_received += n as u64;
                }
                Err(RecvError::WouldBlock) => break,
                Err(e) => {
                    s.error = Some(format!("server recv: {e}"));
                    break;
                }
            }
        }
        let total = self.bytes.saturating_mul(self.clients.len() as u64);
        let got = self.total_received;
        for (mark, slot, at) in [
            (25, &mut self.t25, Some(&mut self.b25)),
            (95, &mut self.t95, Some(&mut self.b95)),
            (100, &mut self.t100, None),
        ] {
            if slot.is_none() && got.saturating_mul(100) >= total.saturating_mul(mark) {
                *slot = Some(now_us);
                if let Some(at) = at {
                    *at = got;
                }
            }
        }
        if eof && s.digest.is_none() {
            s.digest = Some(std::mem::take(&mut s.hasher).finalize().into());
        }
        if eof && !s.shut {
            match tcp.shutdown(now, s.h, Shutdown::Write) {
                Ok(()) => s.shut = true,
                Err(e) => s.error = Some(format!("server shutdown: {e}")),
            }
        }
        if let Some(e) = r.error {
            s.error.get_or_insert(format!("server: {e}"));
        }
        s.state = tcp.state(s.h).unwrap_or(State::Closed);
        if (s.shut && s.state == State::Closed) || s.error.is_some() {
            s.info = tcp.info(s.h).ok().or(s.info);
            let _ = tcp.close(now, s.h);
            s.done = true;
            self.servers_done += 1;
        }
    }

    fn accept(&mut self, tcp: &mut Tcp, now_us: u64) {
        let now = Instant::from_micros(now_us);
        loop {
            match tcp.accept(now, self.listener) {
                Ok(Some(h)) => {
                    let client = tcp
                        .addresses(h)
                        .ok()
                        .and_then(|(_, remote)| self.client_by_port.get(&remote.port()).copied());
                    let i = self.servers.len();
                    self.servers.push(Server {
                        h,
                        client,
                        received: 0,
                        hasher: Sha256::new(),
                        digest: None,
                        shut: false,
                        done: false,
                        state: State::Established,
                        info: None,
                        error: None,
                    });
                    self.server_of.insert(h, i);
                    if client.is_none() {
                        self.failures.push(format!(
                            "accepted a connection from no client we know ({h:?})"
                        ));
                    }
                    self.server(tcp, i, now_us);
                }
                Ok(None) => break,
                Err(e) => {
                    self.failures.push(format!("accept: {e}"));
                    break;
                }
            }
        }
    }

    /// Lets both applications act on every readiness change since the last step: each
    /// node's driver shows its events to that node's side ([`Side`]).
    fn step(&mut self, net: &mut Net) {
        for node in [A, B] {
            net.serve(node, &mut Side { apps: self, node });
        }
    }

    /// Node `node`'s application reacting to one readiness event.
    fn on_event(&mut self, node: usize, tcp: &mut Tcp, now: Instant, ev: Event) {
        match (node, ev) {
            (A, Event::Socket(h)) => {
                if let Some(&i) = self.client_of.get(&h) {
                    self.client(tcp, now, i);
                }
            }
            (B, Event::Listener(_)) => self.accept(tcp, now.total_micros()),
            (B, Event::Socket(h)) => {
                if let Some(&i) = self.server_of.get(&h) {
                    self.server(tcp, i, now.total_micros());
                }
            }
            _ => {}
        }
    }

    /// Visits every unfinished connection whether or not an event said so; returns how
    /// many made progress (events the TCP layer should have raised and did not).
    fn sweep(&mut self, net: &mut Net) -> Vec<String> {
        let now_us = net.wire.now_micros();
        let now = Instant::from_micros(now_us);
        let mut missed = Vec::new();
        for i in 0..self.clients.len() {
            let before = (
                self.clients[i].sent,
                self.clients[i].shut,
                self.clients[i].done,
            );
            self.client(net.nodes[A].tcp_mut(), now, i);
            let c = &self.clients[i];
            if (c.sent, c.shut, c.done) != before {
                missed.push(format!("client {i} ({:?})", c.state));
            }
        }
        let before = self.servers.len();
        self.accept(net.nodes[B].tcp_mut(), now_us);
        if self.servers.len() != before {
            missed.push(format!(
                "listener ({} accepted)",
                self.servers.len() - before
            ));
        }
        for i in 0..self.servers.len() {
            let s = &self.servers[i];
            let before = (s.received, s.shut, s.done);
            self.server(net.nodes[B].tcp_mut(), i, now_us);
            let s = &self.servers[i];
            if (s.received, s.shut, s.done) != before {
                missed.push(format!("server {i} ({:?})", s.state));
            }
        }
        missed
    }

    /// Sorts the RSTs either node sent in the last pass: one answering a stray segment
    /// (a duplicated final ACK, say) after its connection completed on both sides is
    /// what RFC 9293 §3.10.7.1 prescribes; one on a connection still in progress is a
    /// failure.
    fn classify_rsts(&mut self, net: &mut Net) {
        for node in [A, B] {
            for (src, dst) in net.take_rsts(node) {
                let port = if node == A { src } else { dst };
                let done = self.client_by_port.get(&port).is_some_and(|&ci| {
                    let c = &self.clients[ci];
                    c.done
                        && c.error.is_none()
                        && self
                            .servers
                            .iter()
                            .any(|s| s.client == Some(ci) && s.done && s.error.is_none())
                });
                if done {
                    self.rsts_after_close += 1;
                } else {
                    self.live_rsts += 1;
                    self.failures.push(format!(
                        "node {} sent an RST on connection port {port} before it completed, \
                         at virtual {:.6} s",
                        if node == A { "A" } else { "B" },
                        micros_to_s(net.wire.now_micros())
                    ));
                }
            }
        }
    }

    fn finished(&self) -> bool {
        self.clients_done == self.clients.len() && self.servers_done == self.clients.len()
    }

    fn stall_summary(&self, net: &Net) -> String {
        let mut states: HashMap<String, usize> = HashMap::new();
        for c in self.clients.iter().filter(|c| !c.done) {
            let k = format!(
                "client {:?} sent={} shut={} eof={}",
                c.state,
                c.sent == self.bytes,
                c.shut,
                c.eof
            );
            *states.entry(k).or_default() += 1;
        }
        for s in self.servers.iter().filter(|s| !s.done) {
            let k = format!(
                "server {:?} eof={} shut={}",
                s.state,
                s.digest.is_some(),
                s.shut
            );
            *states.entry(k).or_default() += 1;
        }
        let mut v: Vec<String> = states
            .into_iter()
            .map(|(k, n)| format!("{n}x [{k}]"))
            .collect();
        v.sort();
        format!(
            "{} of {} accepted; unfinished: {}; in flight on the wire: {}",
            self.servers.len(),
            self.clients.len(),
            v.join(", "),
            net.wire.in_flight()
        )
    }
}

/// One node's half of [`Apps`] as the driver's [`App`]: the clients on A, the
/// listener and its servers on B.
struct Side<'a> {
    apps: &'a mut Apps,
    node: usize,
}

impl App for Side<'_> {
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        let tcp = iface
            .tcp_mut()
            .expect("the harness attaches TCP to every node");
        for &ev in events {
            self.apps.on_event(self.node, tcp, now, ev);
        }
    }
}

fn node_report(net: &Net, i: usize) -> NodeTcpReport {
    let n = &net.nodes[i];
    let s = n.tcp().stats();
    NodeTcpReport {
        resets_sent: s.resets_sent,
        resets_received: s.resets_received,
        rsts_on_wire: n.tap().rsts,
        timeouts: s.timeouts,
        dropped_paws: s.dropped_paws,
        dropped_out_of_window: s.dropped_out_of_window,
        ooo_dropped: s.ooo_dropped,
        syn_queue_overflows: s.syn_queue_overflows,
        accept_queue_overflows: s.accept_queue_overflows,
        bad_checksums: n.iface.stats().drops(DropReason::TcpBadChecksum),
    }
}

/// Runs the transfer `opts` describes and reports what happened. A failed transfer
/// (corrupted data, a reset, a connection that did not close, a virtual-time or
/// wall-clock limit reached) is a report with `ok == false`, not an error.
///
/// # Errors
/// Only set-up problems: an invalid MTU, the pcap file failing to open or write.
pub fn run_tcp(opts: &TcpSimOptions) -> io::Result<TcpSimReport> {
    let wall_start = WallInstant::now();
    let (wire, ea, eb) = Wire::pair(
        opts.seed,
        opts.a_to_b.link_config(),
        opts.b_to_a.link_config(),
    );
    let mut cfg = tcp_config(opts);
    cfg.gso_max = opts.gso_max;
    let mut cfg_b = cfg.clone();
    cfg_b.ack_policy = opts.receiver_acks;
    let mut net = Net::new(
        wire,
        ea,
        eb,
        NetConfig {
            mtu: opts.mtu,
            static_arp: opts.static_arp,
            tcp: [
                Tcp::new(cfg.clone(), isn_key(opts.seed, 1)),
                Tcp::new(cfg_b, isn_key(opts.seed, 2)),
            ],
            pcap: [opts.pcap.as_deref(), opts.pcap_b.as_deref()],
            drop_segments: opts.drop_segments.clone(),
            ipv6: opts.ipv6,
        },
    )?;
    let listen_at = SocketAddr::new(node_addr(B, opts.ipv6), PORT);
    let listener = net.nodes[B]
        .tcp_mut()
        .listen(listen_at, opts.connections.max(1))
        .map_err(|e| io::Error::other(format!("listen: {e}")))?;
    let mut apps = Apps {
        bytes: opts.bytes,
        listener,
        clients: Vec::with_capacity(opts.connections),
        client_of: HashMap::new(),
        client_by_port: HashMap::new(),
        servers: Vec::with_capacity(opts.connections),
        server_of: HashMap::new(),
        clients_done: 0,
        servers_done: 0,
        total_received: 0,
        t25: None,
        t95: None,
        b25: 0,
        b95: 0,
        t100: None,
        failures: Vec::new(),
        rsts_after_close: 0,
        live_rsts: 0,
        buf: vec![0u8; 64 * 1024],
    };
    let now = net.now();
    let local = SocketAddr::new(node_addr(A, opts.ipv6), 0);
    for i in 0..opts.connections {
        let tcp = net.nodes[A].tcp_mut();
        let h = tcp
            .connect(now, local, listen_at)
            .map_err(|e| io::Error::other(format!("connect #{i}: {e}")))?;
        let port = tcp.addresses(h).map(|(l, _)| l.port()).unwrap_or(0);
        apps.client_of.insert(h, i);
        apps.client_by_port.insert(port, i);
        apps.clients.push(Client {
            h,
            port,
            stream: Stream::new(opts.seed, i as u64),
            sent: 0,
            stage: Vec::new(),
            stage_pos: 0,
            hasher: Sha256::new(),
            digest: None,
            shut: false,
            eof: false,
            done: false,
            state: State::SynSent,
            info: None,
            error: None,
        });
        apps.client(tcp, now, i);
    }

    let limit_us = u64::try_from(opts.time_limit.as_micros()).unwrap_or(u64::MAX);
    let mut trace = Vec::new();
    let mut same_instant = 0u32;
    let mut stale_deadlines = 0u64;
    let mut busy_passes = 0u64;
    let mut drained = false;
    let mut iterations = 0u64;
    loop {
        net.ingress();
        apps.step(&mut net);
        net.egress();
        apps.classify_rsts(&mut net);
        if apps.finished() {
            break;
        }
        if opts.cwnd_trace {
            sample(&net, &apps, &mut trace);
        }
        iterations += 1;
        if iterations.is_multiple_of(WALL_CHECK_EVERY) && wall_start.elapsed() > opts.wall_limit {
            apps.failures.push(format!(
                "wall-clock limit of {:?} reached at virtual {:.3} s; {}",
                opts.wall_limit,
                net.wire.now().as_secs_f64(),
                apps.stall_summary(&net)
            ));
            break;
        }
        let now_us = net.wire.now_micros();
        if net.next_event_micros().is_some() {
            drained = false;
        }
        if net.wire.next_event_micros().is_some_and(|t| t <= now_us) {
            // Frames to deliver at this instant: progress, not a stale deadline.
            same_instant = 0;
            busy_passes += 1;
            if busy_passes > BUSY_PASS_LIMIT {
                apps.failures.push(format!(
                    "livelock: {BUSY_PASS_LIMIT} passes at virtual {:.6} s with frames \
                     still arriving; {}",
                    micros_to_s(now_us),
                    apps.stall_summary(&net)
                ));
                break;
            }
            continue;
        }
        match net.next_event_micros() {
            None if !drained => {
                // Events queued by the last egress (a timeout, say) are taken in one
                // more pass before the run is judged idle.
                drained = true;
            }
            None => {
                let missed = apps.sweep(&mut net);
                if missed.is_empty() {
                    apps.failures.push(format!(
                        "stalled at virtual {:.6} s: no timer pending and nothing on the wire; {}",
                        micros_to_s(now_us),
                        apps.stall_summary(&net)
                    ));
                    break;
                }
                apps.failures.push(format!(
                    "TCP raised no readiness event for: {}",
                    missed.join(", ")
                ));
                net.egress();
            }
            Some(t) if t <= now_us && same_instant < SAME_INSTANT_PASSES => {
                same_instant += 1;
            }
            Some(t) => {
                let t = if t <= now_us {
                    // A deadline that stays at "now" after several passes (a layer that
                    // has work queued it cannot do yet): a runtime that sleeps between
                    // polls would move on, and so does the harness, counting it.
                    stale_deadlines += 1;
                    match net.next_event_after(now_us) {
                        Some(t) => t,
                        None => {
                            apps.failures.push(format!(
                                "stalled at virtual {:.6} s: a deadline stays at now and \
                                 nothing else is pending; {}",
                                micros_to_s(now_us),
                                apps.stall_summary(&net)
                            ));
                            break;
                        }
                    }
                } else {
                    t
                };
                same_instant = 0;
                busy_passes = 0;
                if t > limit_us {
                    apps.failures.push(format!(
                        "virtual time limit of {:?} reached; {}",
                        opts.time_limit,
                        apps.stall_summary(&net)
                    ));
                    break;
                }
                net.wire.advance_to_micros(t);
            }
        }
    }
    if opts.cwnd_trace {
        sample(&net, &apps, &mut trace);
    }
    let end_us = net.wire.now_micros();
    net.finish_capture()?;
    let mut r = report(
        opts,
        &net,
        apps,
        trace,
        end_us,
        wall_start.elapsed().as_secs_f64(),
    );
    r.stale_deadlines = stale_deadlines;
    Ok(r)
}

/// Appends connection 0's state to `trace` when its window or RTT changed.
fn sample(net: &Net, apps: &Apps, trace: &mut Vec<CwndSample>) {
    let Some(c) = apps.clients.first() else {
        return;
    };
    let info = if c.done {
        c.info
    } else {
        net.nodes[A].tcp().info(c.h).ok()
    };
    let Some(info) = info else {
        return;
    };
    let s = CwndSample {
        t: net.wire.now().as_secs_f64(),
        cwnd: info.cwnd,
        ssthresh: info.ssthresh,
        srtt: info.srtt.map_or(0.0, |d| d.as_micros() as f64 / 1e6),
        mss: info.snd_mss,
        in_flight: info.bytes_in_flight,
    };
    let changed = trace
        .last()
        .is_none_or(|l: &CwndSample| (l.cwnd, l.ssthresh, l.srtt) != (s.cwnd, s.ssthresh, s.srtt));
    if changed {
        trace.push(s);
    }
}

fn digest_of_digests<'a>(digests: impl Iterator<Item = Option<&'a [u8; 32]>>) -> String {
    let mut h = Sha256::new();
    for d in digests {
        h.update(d.map_or([0u8; 32], |d| *d));
    }
    hex(&h.finalize())
}

fn report(
    opts: &TcpSimOptions,
    net: &Net,
    mut apps: Apps,
    cwnd_trace: Vec<CwndSample>,
    end_us: u64,
    wall_s: f64,
) -> TcpSimReport {
    // Received digest per client, through the server that accepted it.
    let mut recv_of: Vec<Option<usize>> = vec![None; apps.clients.len()];
    for (si, s) in apps.servers.iter().enumerate() {
        if let Some(ci) = s.client {
            recv_of[ci] = Some(si);
        }
    }
    let mut failures = std::mem::take(&mut apps.failures);
    let mut hashes_equal = true;
    let mut closed_cleanly = true;
    let mut retx = Retransmissions::default();
    let mut per_conn = Vec::new();
    let (mut cwnds, mut ssthreshes, mut srtts) = (Vec::new(), Vec::new(), Vec::new());
    for (i, c) in apps.clients.iter().enumerate() {
        let server = recv_of[i].map(|si| &apps.servers[si]);
        let sent_digest = c.digest;
        let recv_digest = server.and_then(|s| s.digest);
        let equal = c.sent == opts.bytes && sent_digest.is_some() && sent_digest == recv_digest;
        if !equal {
            hashes_equal = false;
            failures.push(format!(
                "connection {i}: sent {} of {} bytes, received {} ({})",
                c.sent,
                opts.bytes,
                server.map_or(0, |s| s.received),
                if recv_digest.is_none() {
                    "no end of stream"
                } else {
                    "digests differ"
                }
            ));
        }
        let clean = c.done
            && c.error.is_none()
            && matches!(c.state, State::TimeWait | State::Closed)
            && server.is_some_and(|s| s.done && s.error.is_none() && s.state == State::Closed);
        if !clean {
            closed_cleanly = false;
            failures.push(format!(
                "connection {i}: not closed cleanly: client {:?}{}, server {}",
                c.state,
                c.error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default(),
                server.map_or("never accepted".to_string(), |s| format!(
                    "{:?}{}",
                    s.state,
                    s.error
                        .as_deref()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                ))
            ));
        }
        let ci = c.info;
        let si = server.and_then(|s| s.info);
        if let Some(ci) = ci {
            retx.segments += ci.retransmits;
            retx.rto_expiries += ci.timeouts;
            retx.fast_retransmits += ci.fast_recoveries;
            cwnds.push(f64::from(ci.cwnd));
            if ci.ssthresh != u32::MAX {
                ssthreshes.push(f64::from(ci.ssthresh));
            }
            if let Some(d) = ci.srtt {
                srtts.push(d.as_micros() as f64 / 1e3);
            }
        }
        if let Some(si) = si {
            retx.segments += si.retransmits;
            retx.rto_expiries += si.timeouts;
            retx.fast_retransmits += si.fast_recoveries;
        }
        if apps.clients.len() <= 16 {
            per_conn.push(ConnReport {
                index: i,
                port: c.port,
                bytes_sent: c.sent,
                bytes_received: server.map_or(0, |s| s.received),
                hash_sent: sent_digest.map(|d| hex(&d)).unwrap_or_default(),
                hash_received: recv_digest.map(|d| hex(&d)),
                client_state: c.state.name().to_string(),
                server_state: server.map(|s| s.state.name().to_string()),
                error: c
                    .error
                    .clone()
                    .or_else(|| server.and_then(|s| s.error.clone())),
                cwnd: ci.map_or(0, |i| i.cwnd),
                ssthresh: ci.and_then(|i| (i.ssthresh != u32::MAX).then_some(i.ssthresh)),
                srtt_ms: ci.and_then(|i| i.srtt).map(|d| d.as_micros() as f64 / 1e3),
                retransmits: (
                    ci.map_or(0, |i| i.retransmits),
                    si.map_or(0, |i| i.retransmits),
                ),
                rto_expiries: ci.map_or(0, |i| i.timeouts),
                fast_retransmits: ci.map_or(0, |i| i.fast_recoveries),
            });
        }
    }
    let tap_a = net.nodes[A].tap();
    retx.segments_on_wire = tap_a.retransmitted_segments;
    retx.bytes_on_wire = tap_a.retransmitted_bytes;
    let (tcp_a, tcp_b) = (node_report(net, A), node_report(net, B));
    for (name, t) in [("A", &tcp_a), ("B", &tcp_b)] {
        if t.resets_received > 0 {
            closed_cleanly = false;
            failures.push(format!(
                "node {name}: {} connections reset by the peer",
                t.resets_received
            ));
        }
    }
    if apps.live_rsts > 0 {
        closed_cleanly = false;
    }
    let bytes_sent: u64 = apps.clients.iter().map(|c| c.sent).sum();
    let bytes_received = apps.total_received;
    let transfer_us = apps.t100.unwrap_or(end_us);
    let goodput = (transfer_us > 0).then(|| bytes_received as f64 * 8.0 / micros_to_s(transfer_us));
    // Bytes read between the two marks over the time between them. Data that crossed the
    // wire before the first mark but waited behind a hole is read after it, so this can
    // exceed the link's payload rate by a fraction of a receive window.
    let steady = match (apps.t25, apps.t95) {
        (Some(a), Some(b)) if b > a && apps.b95 > apps.b25 => {
            Some((apps.b95 - apps.b25) as f64 * 8.0 / micros_to_s(b - a))
        }
        _ => None,
    };
    TcpSimReport {
        ok: failures.is_empty() && hashes_equal && closed_cleanly,
        failures,
        connections: apps.clients.len(),
        bytes_sent,
        bytes_received,
        hash_sent: digest_of_digests(apps.clients.iter().map(|c| c.digest.as_ref())),
        hash_received: digest_of_digests(
            recv_of
                .iter()
                .map(|s| s.and_then(|si| apps.servers[si].digest.as_ref())),
        ),
        hashes_equal,
        all_closed_cleanly: closed_cleanly,
        virtual_duration_s: micros_to_s(end_us),
        transfer_duration_s: micros_to_s(transfer_us),
        goodput_bps: goodput,
        goodput_steady_bps: steady,
        wall_s,
        retransmissions: retx,
        windows: Windows {
            cwnd: Spread::of(cwnds),
            ssthresh: Spread::of(ssthreshes),
            srtt_ms: Spread::of(srtts),
        },
        wire: WireReport {
            a_to_b: WireDirection::new(net.link_stats(A, B), tap_a.dropped),
            b_to_a: WireDirection::new(net.link_stats(B, A), net.nodes[B].tap().dropped),
        },
        tcp_a,
        tcp_b,
        per_connection: (apps.clients.len() <= 16).then_some(per_conn),
        options: opts.clone(),
        cwnd_trace,
        stale_deadlines: 0,
        rsts_after_close: apps.rsts_after_close,
    }
}
