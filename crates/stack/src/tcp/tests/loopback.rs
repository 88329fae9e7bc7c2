//! Two engines joined by an in-test pipe (delay, seeded loss, optional reordering), in
//! virtual time, moving data byte-exact end to end.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{IpAddr, SocketAddr};

use ulnet_wire::TcpRepr;

use super::harness::Seg;
use crate::tcp::{Algorithm, Shutdown, SocketHandle, State, Tcp, TcpConfig};
use crate::time::{Duration, Instant};

/// xorshift64*: deterministic and good enough for loss decisions.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn chance(&mut self, per_million: u64) -> bool {
        self.next() % 1_000_000 < per_million
    }
}

/// The byte at stream position `i` (a cheap deterministic pattern that is not periodic
/// at any segment size).
pub fn pattern(i: u64) -> u8 {
    let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 56) as u8 ^ (i as u8)
}

/// FNV-1a, to compare streams without keeping them.
#[derive(Clone, Copy)]
pub struct Fnv(u64);

impl Fnv {
    pub fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    pub fn update(&mut self, data: &[u8]) {
        for &b in data {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x100_0000_01b3);
        }
    }
}

pub struct Link {
    pub delay: Duration,
    pub loss_per_million: u64,
    /// Extra random delay up to this (reorders segments).
    pub jitter: Duration,
    pub rng: Rng,
    /// Extra delay of the first segment towards A only (the server's SYN-ACK): what a
    /// SYN-ACK waiting for the neighbour's link-layer address costs (a proxy ARP answers
    /// after up to 0.8 s), seen by the handshake's round-trip sample and nothing else.
    pub first_to_a: Duration,
}

#[allow(dead_code)] // fields kept for tests that inspect them
pub struct Outcome {
    pub sent: u64,
    pub received: u64,
    pub sent_hash: u64,
    pub received_hash: u64,
    pub client_state: Option<State>,
    pub server_eof: bool,
    pub elapsed: Duration,
    pub a: Tcp,
    pub b: Tcp,
    pub client: SocketHandle,
}

pub struct Pipe {
    heap: BinaryHeap<Reverse<(Instant, u64, bool)>>,
    segs: std::collections::HashMap<u64, Seg>,
    n: u64,
    pub link: Link,
    pub delivered: u64,
    pub dropped: u64,
}

impl Pipe {
    pub fn new(link: Link) -> Pipe {
        Pipe {
            heap: BinaryHeap::new(),
            segs: Default::default(),
            n: 0,
            link,
            delivered: 0,
            dropped: 0,
        }
    }
    pub fn push(&mut self, now: Instant, to_b: bool, r: &TcpRepr<'_>) {
        if self.link.loss_per_million > 0 && self.link.rng.chance(self.link.loss_per_million) {
            self.dropped += 1;
            return;
        }
        let mut at = now + self.link.delay;
        if !to_b && !self.link.first_to_a.is_zero() {
            at += self.link.first_to_a;
            self.link.first_to_a = Duration::ZERO;
        }
        if !self.link.jitter.is_zero() {
            let j = self.link.rng.next() % (self.link.jitter.as_micros() as u64 + 1);
            at += Duration::from_micros(j);
        }
        self.n += 1;
        self.heap.push(Reverse((at, self.n, to_b)));
        self.segs.insert(self.n, Seg::from_repr(r));
    }
    pub fn next_at(&self) -> Option<Instant> {
        self.heap.peek().map(|r| r.0 .0)
    }
    pub fn pop_due(&mut self, now: Instant) -> Option<(bool, Seg)> {
        let &Reverse((at, n, to_b)) = self.heap.peek()?;
        if at > now {
            return None;
        }
        self.heap.pop();
        self.delivered += 1;
        Some((to_b, self.segs.remove(&n).unwrap()))
    }
}

pub const A: &str = "198.18.0.1:0";
pub const B: &str = "198.18.0.2:80";

/// Client A sends `total` bytes to server B, then closes; B reads to EOF and closes.
pub fn transfer(
    cfg_a: TcpConfig,
    cfg_b: TcpConfig,
    total: u64,
    link: Link,
    limit: Duration,
) -> Outcome {
    transfer_mtu(cfg_a, cfg_b, total, link, limit, 1500)
}

/// [`transfer`] over a link of `mtu` bytes.
pub fn transfer_mtu(
    cfg_a: TcpConfig,
    cfg_b: TcpConfig,
    total: u64,
    link: Link,
    limit: Duration,
    mtu: usize,
) -> Outcome {
    transfer_paced(cfg_a, cfg_b, total, link, limit, mtu, Reader::GREEDY)
}

/// How B's application reads.
#[derive(Debug, Clone, Copy)]
pub struct Reader {
    /// Bytes asked for per read.
    pub chunk: usize,
    /// Time between reads; zero reads everything there is at every step.
    pub period: Duration,
}

impl Reader {
    /// Everything there is, in 64 KiB reads, at every step.
    pub const GREEDY: Reader = Reader {
        chunk: 64 * 1024,
        period: Duration::ZERO,
    };
}

/// [`transfer_mtu`] with B's application reading as `reader` says.
pub fn transfer_paced(
    cfg_a: TcpConfig,
    cfg_b: TcpConfig,
    total: u64,
    link: Link,
    limit: Duration,
    mtu: usize,
    reader: Reader,
) -> Outcome {
    let a_addr: SocketAddr = A.parse().unwrap();
    let b_addr: SocketAddr = B.parse().unwrap();
    let mut a = Tcp::new(cfg_a, [1; 16]);
    let mut b = Tcp::new(cfg_b, [2; 16]);
    // An Ethernet link between them: the MTU an interface would impose.
    a.cap_mtu(mtu);
    b.cap_mtu(mtu);
    let l = b.listen(b_addr, 8).unwrap();
    let mut now = Instant::from_secs(1);
    let start = now;
    let c = a.connect(now, a_addr, b_addr).unwrap();
    let mut pipe = Pipe::new(link);
    let mut server: Option<SocketHandle> = None;
    let (mut sent, mut received) = (0u64, 0u64);
    let (mut sh, mut rh) = (Fnv::new(), Fnv::new());
    let mut chunk = vec![0u8; 64 * 1024];
    let mut buf = vec![0u8; reader.chunk];
    let mut next_read = now;
    let mut client_closed = false;
    let mut server_eof = false;
    let mut server_closed = false;
    let (aip, bip): (IpAddr, IpAddr) = (a_addr.ip(), b_addr.ip());
    let mut stuck = 0u32;
    while now - start < limit {
        // Deliver everything due.
        while let Some((to_b, seg)) = pipe.pop_due(now) {
            let mut replies = Vec::new();
            let (dst, src, tcp) = if to_b {
                (bip, aip, &mut b)
            } else {
                (aip, bip, &mut a)
            };
            tcp.process(now, src, dst, &seg.repr(), &mut |_, _, r| {
                replies.push(Seg::from_repr(r))
            });
            for r in replies {
                pipe.push(now, !to_b, &r.repr());
            }
        }
        // Applications.
        if server.is_none() {
            server = b.accept(now, l).unwrap();
        }
        if let Some(s) = server.filter(|_| now >= next_read) {
            loop {
                match b.recv(now, s, &mut buf) {
                    Ok(0) => {
                        server_eof = true;
                        break;
                    }
                    Ok(n) => {
                        rh.update(&buf[..n]);
                        received += n as u64;
                        if !reader.period.is_zero() {
                            next_read = now + reader.period;
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
            if server_eof && !server_closed {
                b.close(now, s).unwrap();
                server_closed = true;
            }
        }
        if !client_closed {
            while sent < total {
                let n = (total - sent).min(chunk.len() as u64) as usize;
                for (i, byte) in chunk[..n].iter_mut().enumerate() {
                    *byte = pattern(sent + i as u64);
                }
                match a.send(now, c, &chunk[..n]) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => {
                        sh.update(&chunk[..k]);
                        sent += k as u64;
                    }
                }
            }
            if sent == total && a.state(c).is_ok_and(|s| s == State::Established) {
                a.shutdown(now, c, Shutdown::Write).unwrap();
                client_closed = true;
            }
        }
        // Transmit.
        a.dispatch(now, &mut |_, _, r| {
            pipe.push(now, true, r);
            true
        });
        b.dispatch(now, &mut |_, _, r| {
            pipe.push(now, false, r);
            true
        });
        // Next event.
        let reading = (server.is_some() && !server_eof && next_read > now).then_some(next_read);
        let next = [pipe.next_at(), a.poll_at(), b.poll_at(), reading]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) if t > now => {
                now = t;
                stuck = 0;
            }
            Some(_) => {
                stuck += 1;
                assert!(
                    stuck < 10_000,
                    "no progress at {now}: a={:?} b={:?} client={:?}",
                    a.poll_at(),
                    b.poll_at(),
                    a.info(c)
                );
                now += Duration::from_micros(1);
            }
            None => break,
        }
        if server_closed
            && a.state(c)
                .is_ok_and(|s| matches!(s, State::TimeWait | State::Closed))
            && pipe.next_at().is_none()
        {
            break;
        }
    }
    Outcome {
        sent,
        received,
        sent_hash: sh.0,
        received_hash: rh.0,
        client_state: a.state(c).ok(),
        server_eof,
        elapsed: now - start,
        a,
        b,
        client: c,
    }
}

fn bulk_config(alg: Algorithm) -> TcpConfig {
    TcpConfig {
        congestion: alg,
        ..TcpConfig::default()
    }
}

fn link(delay_ms: u64, loss_per_million: u64, seed: u64) -> Link {
    Link {
        delay: Duration::from_millis(delay_ms),
        loss_per_million,
        jitter: Duration::ZERO,
        rng: Rng(seed | 1),
        first_to_a: Duration::ZERO,
    }
}

fn check(o: &Outcome, total: u64) {
    assert_eq!(o.sent, total, "client could not queue everything");
    assert_eq!(
        o.received, total,
        "server got {} of {} bytes",
        o.received, total
    );
    assert_eq!(o.sent_hash, o.received_hash, "stream corrupted");
    assert!(o.server_eof, "server saw no EOF");
}

#[test]
fn ten_megabytes_clean_link() {
    let total = 10 * 1024 * 1024;
    let o = transfer(
        bulk_config(Algorithm::Cubic),
        bulk_config(Algorithm::Cubic),
        total,
        link(5, 0, 1),
        Duration::from_secs(120),
    );
    check(&o, total);
    assert_eq!(o.client_state, Some(State::TimeWait));
    let info = o.a.info(o.client).unwrap();
    assert_eq!(info.retransmits, 0);
}

#[test]
fn ten_megabytes_lossy_link_sack_newreno() {
    let total = 10 * 1024 * 1024;
    let o = transfer(
        bulk_config(Algorithm::NewReno),
        bulk_config(Algorithm::NewReno),
        total,
        link(2, 10_000, 7),
        Duration::from_secs(600),
    );
    check(&o, total);
    let info = o.a.info(o.client).unwrap();
    assert!(info.retransmits > 0);
    assert!(info.fast_recoveries > 0);
}

#[test]
fn lossy_link_without_sack_or_timestamps() {
    let total = 2 * 1024 * 1024;
    let cfg = TcpConfig {
        sack: false,
        timestamps: false,
        window_scaling: false,
        ..bulk_config(Algorithm::NewReno)
    };
    let o = transfer(
        cfg.clone(),
        cfg,
        total,
        link(2, 20_000, 99),
        Duration::from_secs(600),
    );
    check(&o, total);
}

#[test]
fn reordering_and_loss_cubic() {
    let total = 4 * 1024 * 1024;
    let mut l = link(3, 5_000, 1234);
    l.jitter = Duration::from_millis(2);
    let o = transfer(
        bulk_config(Algorithm::Cubic),
        bulk_config(Algorithm::Cubic),
        total,
        l,
        Duration::from_secs(600),
    );
    check(&o, total);
}

#[test]
fn heavy_loss_still_completes() {
    let total = 256 * 1024;
    let o = transfer(
        bulk_config(Algorithm::Cubic),
        bulk_config(Algorithm::Cubic),
        total,
        link(10, 150_000, 42),
        Duration::from_secs(3600),
    );
    check(&o, total);
}

#[test]
fn small_buffers_exercise_zero_window() {
    let total = 1024 * 1024;
    let small = TcpConfig {
        recv_buffer_len: 4096,
        send_buffer_len: 4096,
        ..bulk_config(Algorithm::NewReno)
    };
    let o = transfer(
        small.clone(),
        small,
        total,
        link(1, 0, 5),
        Duration::from_secs(600),
    );
    check(&o, total);
}

#[test]
fn many_concurrent_connections_through_one_listener() {
    let mut a = Tcp::new(TcpConfig::default(), [1; 16]);
    let mut b = Tcp::new(TcpConfig::default(), [2; 16]);
    let b_addr: SocketAddr = B.parse().unwrap();
    let a_addr: SocketAddr = A.parse().unwrap();
    let l = b.listen(b_addr, 64).unwrap();
    let mut now = Instant::from_secs(1);
    let mut pipe = Pipe::new(link(1, 2_000, 3));
    const N: usize = 50;
    const BYTES: usize = 50_000;
    let clients: Vec<SocketHandle> = (0..N)
        .map(|_| a.connect(now, a_addr, b_addr).unwrap())
        .collect();
    let mut sent = [0usize; N];
    let mut servers: Vec<(SocketHandle, Vec<u8>)> = Vec::new();
    let (aip, bip): (IpAddr, IpAddr) = (a_addr.ip(), b_addr.ip());
    let mut buf = vec![0u8; 65536];
    for _ in 0..2_000_000 {
        while let Some((to_b, seg)) = pipe.pop_due(now) {
            let mut replies = Vec::new();
            let (dst, src, tcp) = if to_b {
                (bip, aip, &mut b)
            } else {
                (aip, bip, &mut a)
            };
            tcp.process(now, src, dst, &seg.repr(), &mut |_, _, r| {
                replies.push(Seg::from_repr(r))
            });
            for r in replies {
                pipe.push(now, !to_b, &r.repr());
            }
        }
        while let Some(s) = b.accept(now, l).unwrap() {
            servers.push((s, Vec::new()));
        }
        for (i, c) in clients.iter().enumerate() {
            if sent[i] < BYTES && a.state(*c).is_ok_and(|s| s == State::Established) {
                let data: Vec<u8> = (sent[i]..BYTES.min(sent[i] + 8192))
                    .map(|k| (k as u8) ^ (i as u8))
                    .collect();
                sent[i] += a.send(now, *c, &data).unwrap();
                if sent[i] == BYTES {
                    a.shutdown(now, *c, Shutdown::Write).unwrap();
                }
            }
        }
        for (s, got) in servers.iter_mut() {
            while let Ok(n) = b.recv(now, *s, &mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
        }
        a.dispatch(now, &mut |_, _, r| {
            pipe.push(now, true, r);
            true
        });
        b.dispatch(now, &mut |_, _, r| {
            pipe.push(now, false, r);
            true
        });
        let done = servers.len() == N
            && servers
                .iter()
                .all(|(s, got)| got.len() == BYTES && b.readiness(*s).is_ok_and(|r| r.read_closed));
        if done {
            break;
        }
        let next = [pipe.next_at(), a.poll_at(), b.poll_at()]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) if t > now => now = t,
            _ => now += Duration::from_micros(10),
        }
    }
    assert_eq!(servers.len(), N);
    for (s, got) in &servers {
        let (_, remote) = b.addresses(*s).unwrap();
        let i = clients
            .iter()
            .position(|c| a.addresses(*c).unwrap().0 == remote)
            .unwrap();
        assert_eq!(got.len(), BYTES, "connection {i}");
        assert!(
            got.iter()
                .enumerate()
                .all(|(k, &v)| v == (k as u8) ^ (i as u8)),
            "connection {i} corrupted"
        );
    }
    assert_eq!(b.connection_count(), N);
}

#[test]
fn simultaneous_open_between_two_engines() {
    let pa: SocketAddr = "198.18.0.1:5000".parse().unwrap();
    let pb: SocketAddr = "198.18.0.2:6000".parse().unwrap();
    let mut a = Tcp::new(TcpConfig::default(), [1; 16]);
    let mut b = Tcp::new(TcpConfig::default(), [2; 16]);
    let mut now = Instant::from_secs(1);
    let ca = a.connect(now, pa, pb).unwrap();
    let cb = b.connect(now, pb, pa).unwrap();
    let mut pipe = Pipe::new(link(5, 0, 1));
    a.send(now, ca, b"from a").unwrap();
    b.send(now, cb, b"from b").unwrap();
    let mut got_a = Vec::new();
    let mut got_b = Vec::new();
    let mut buf = [0u8; 64];
    for _ in 0..1000 {
        while let Some((to_b, seg)) = pipe.pop_due(now) {
            let mut replies = Vec::new();
            let (dst, src, tcp) = if to_b {
                (pb.ip(), pa.ip(), &mut b)
            } else {
                (pa.ip(), pb.ip(), &mut a)
            };
            tcp.process(now, src, dst, &seg.repr(), &mut |_, _, r| {
                replies.push(Seg::from_repr(r))
            });
            for r in replies {
                pipe.push(now, !to_b, &r.repr());
            }
        }
        if let Ok(n) = a.recv(now, ca, &mut buf) {
            got_a.extend_from_slice(&buf[..n]);
        }
        if let Ok(n) = b.recv(now, cb, &mut buf) {
            got_b.extend_from_slice(&buf[..n]);
        }
        a.dispatch(now, &mut |_, _, r| {
            pipe.push(now, true, r);
            true
        });
        b.dispatch(now, &mut |_, _, r| {
            pipe.push(now, false, r);
            true
        });
        match [pipe.next_at(), a.poll_at(), b.poll_at()]
            .into_iter()
            .flatten()
            .min()
        {
            Some(t) if t > now => now = t,
            Some(_) => now += Duration::from_micros(1),
            None => break,
        }
        if got_a == b"from b" && got_b == b"from a" {
            break;
        }
    }
    assert_eq!(a.state(ca).unwrap(), State::Established);
    assert_eq!(b.state(cb).unwrap(), State::Established);
    assert_eq!(
        (got_a.as_slice(), got_b.as_slice()),
        (&b"from b"[..], &b"from a"[..])
    );
    // Simultaneous close as well: both shut down at once and end in TIME-WAIT.
    a.shutdown(now, ca, Shutdown::Write).unwrap();
    b.shutdown(now, cb, Shutdown::Write).unwrap();
    for _ in 0..1000 {
        while let Some((to_b, seg)) = pipe.pop_due(now) {
            let (dst, src, tcp) = if to_b {
                (pb.ip(), pa.ip(), &mut b)
            } else {
                (pa.ip(), pb.ip(), &mut a)
            };
            tcp.process(now, src, dst, &seg.repr(), &mut |_, _, _| {});
        }
        a.dispatch(now, &mut |_, _, r| {
            pipe.push(now, true, r);
            true
        });
        b.dispatch(now, &mut |_, _, r| {
            pipe.push(now, false, r);
            true
        });
        if a.state(ca).unwrap() == State::TimeWait && b.state(cb).unwrap() == State::TimeWait {
            break;
        }
        match [pipe.next_at(), a.poll_at(), b.poll_at()]
            .into_iter()
            .flatten()
            .min()
        {
            Some(t) if t > now => now = t,
            _ => now += Duration::from_micros(1),
        }
    }
    assert_eq!(a.state(ca).unwrap(), State::TimeWait);
    assert_eq!(b.state(cb).unwrap(), State::TimeWait);
}
