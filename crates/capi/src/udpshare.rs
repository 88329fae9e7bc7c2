//! Several UDP sockets on one port, as Linux allows with `SO_REUSEADDR` (or
//! `SO_REUSEPORT`) set on all of them: the engine keeps one UDP socket per port, so
//! this crate shares it and sorts the datagrams itself.
//!
//! Why: `iperf3 -s` receiving a UDP test binds a UDP socket to its port, takes the
//! client's first datagram, connects the socket to the client and binds a second one to
//! the same port for the next stream (strace of iperf3 3.12 on Linux). Linux delivers a
//! datagram to the socket whose association matches it best: a socket connected to the
//! sender scores higher than an unconnected one (`compute_score` in net/ipv4/udp.c);
//! among unconnected `SO_REUSEPORT` sockets the choice is a hash of the sender,
//! otherwise the newest (`sk_add_node_rcu` adds at the head). A TCP socket on the same
//! port number is unrelated (the engine keeps TCP and UDP ports apart already).
//!
//! How: when a bind finds the port taken by a ulnet UDP socket and both sockets asked
//! for reuse, the first socket's engine socket becomes the [`Group`]'s, its association
//! moves from the engine into this crate (`UdpSocket::disconnect`), and both sockets
//! become [`Member`]s. The engine socket's watch runs in the loop; when it is readable
//! it wakes the one demultiplexing thread of the process, which drains it into the
//! members' queues (bounded, allocated once when a member is made: no allocation per
//! datagram; a full queue drops and counts, like a kernel socket's full receive buffer)
//! and sets their mirrors readable. So each member's descriptor is readable exactly when
//! a datagram for it waits, as poll/select/epoll users (iperf3) need. A port that is not
//! shared keeps the direct path (no thread, no copy).

use std::collections::VecDeque;
use std::ffi::c_int;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};

use ulnet_core::net::{Event, Stack, UdpSocket};

use crate::mirror::{Level, Mirror};
use crate::sock::{errno_of, lock};

/// Datagrams one member's queue holds at most (as many as the engine socket's).
const QUEUE_DATAGRAMS: usize = 256;
/// Bytes one member's queue holds at most.
const QUEUE_BYTES: usize = 256 * 1024;

/// Datagrams waiting for one member: their bytes back to back, and (length, sender).
#[derive(Debug)]
struct Queue {
    bytes: VecDeque<u8>,
    dgrams: VecDeque<(usize, SocketAddr)>,
}

impl Queue {
    fn new() -> Queue {
        Queue {
            bytes: VecDeque::with_capacity(QUEUE_BYTES),
            dgrams: VecDeque::with_capacity(QUEUE_DATAGRAMS),
        }
    }

    /// Queues one datagram; false (and nothing kept) when it does not fit.
    fn push(&mut self, d: &[u8], from: SocketAddr) -> bool {
        if self.dgrams.len() >= QUEUE_DATAGRAMS || self.bytes.len() + d.len() > QUEUE_BYTES {
            return false;
        }
        // Within the capacity reserved at creation: no allocation.
        self.bytes.extend(d);
        self.dgrams.push_back((d.len(), from));
        true
    }

    /// Takes the oldest datagram into `buf` (the part that fits; the rest is discarded,
    /// as recv(2) does); returns its full length and sender.
    fn pop(&mut self, buf: &mut [u8]) -> Option<(usize, SocketAddr)> {
        let (n, from) = self.dgrams.pop_front()?;
        let k = n.min(buf.len());
        let (a, b) = self.bytes.as_slices();
        let from_a = k.min(a.len());
        buf[..from_a].copy_from_slice(&a[..from_a]);
        buf[from_a..k].copy_from_slice(&b[..k - from_a]);
        self.bytes.drain(..n);
        Some((n, from))
    }
}

/// One socket of a shared port.
#[derive(Debug)]
pub(crate) struct Member {
    mirror: Arc<Mirror>,
    /// The association connect(2) made (this crate's, not the engine's).
    peer: Mutex<Option<SocketAddr>>,
    /// Whether the socket asked for SO_REUSEPORT (spread by sender) when it joined.
    reuseport: bool,
    /// Also serialises the mirror's updates for this member.
    q: Mutex<Queue>,
}

impl Member {
    /// Shows this member's readiness: readable while a datagram waits.
    fn show(&self, g: &Group, q: &Queue, event: bool) {
        let error = g.error.load(Ordering::Relaxed);
        self.mirror.set(
            Level {
                readable: !q.dgrams.is_empty() || error,
                writable: g.writable.load(Ordering::Relaxed) || error,
                read_closed: false,
                hangup: error,
            },
            event,
        );
    }
}

/// Datagrams of shared ports that no member wanted, or whose member's queue was full,
/// in this process (reported at exit with `ULNET_STATS=1`, `global.rs`).
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// How many datagrams of shared ports were dropped so far (see [`DROPPED`]).
pub(crate) fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// The engine socket of a shared port and its members.
#[derive(Debug)]
pub(crate) struct Group {
    sock: UdpSocket,
    stack: Stack,
    /// In the order they were bound.
    members: Mutex<Vec<Arc<Member>>>,
    /// The engine socket was seen readable and is not drained yet.
    pending: AtomicBool,
    writable: AtomicBool,
    error: AtomicBool,
}

impl Group {
    /// Takes over `sock` (bound, the socket of `first`, whose association `peer` moves
    /// here) and starts sorting its datagrams. Returns the group and `first`'s member.
    pub(crate) fn new(
        stack: &Stack,
        sock: UdpSocket,
        first: Arc<Mirror>,
        reuseport: bool,
    ) -> Result<(Arc<Group>, Arc<Member>), c_int> {
        let peer = sock.peer_addr().ok();
        sock.disconnect();
        let g = Arc::new(Group {
            sock,
            stack: stack.clone(),
            members: Mutex::new(Vec::new()),
            pending: AtomicBool::new(true),
            writable: AtomicBool::new(true),
            error: AtomicBool::new(false),
        });
        let m = g.join(first, reuseport);
        *lock(&m.peer) = peer;
        pump()
            .groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::downgrade(&g));
        // The watch holds the group weakly: the engine socket (in the group) holds the
        // watch, and the group ends with its last member.
        let w = Arc::downgrade(&g);
        g.stack
            .watch(
                &g.sock,
                Arc::new(move |ev: &Event, _event| {
                    if let Some(g) = w.upgrade() {
                        g.on_event(ev);
                    }
                }),
            )
            .map_err(|e| errno_of(&e))?;
        kick();
        Ok((g, m))
    }

    /// A new member (not connected) showing its readiness on `mirror`.
    pub(crate) fn join(&self, mirror: Arc<Mirror>, reuseport: bool) -> Arc<Member> {
        let m = Arc::new(Member {
            mirror,
            peer: Mutex::new(None),
            reuseport,
            q: Mutex::new(Queue::new()),
        });
        m.show(self, &lock(&m.q), false);
        lock(&self.members).push(Arc::clone(&m));
        m
    }

    /// Removes `m` (its socket was closed); its queued datagrams go with it.
    pub(crate) fn leave(&self, m: &Arc<Member>) {
        lock(&self.members).retain(|x| !Arc::ptr_eq(x, m));
    }

    /// The engine socket (sending, addresses, the stack's refresh).
    pub(crate) fn sock(&self) -> &UdpSocket {
        &self.sock
    }

    /// The engine socket's readiness, in the loop under the interface lock: must not
    /// call into the stack. Wakes the demultiplexer when datagrams wait.
    fn on_event(&self, ev: &Event) {
        self.writable.store(ev.writable, Ordering::Relaxed);
        self.error.store(ev.error, Ordering::Relaxed);
        if ev.readable && !self.pending.swap(true, Ordering::AcqRel) {
            kick();
        }
        for m in lock(&self.members).iter() {
            m.show(self, &lock(&m.q), false);
        }
    }

    /// Drains the engine socket into the members' queues (the demultiplexer's thread).
    fn drain(&self, scratch: &mut [u8]) {
        while let Ok((n, from)) = self.sock.recv_from(scratch) {
            let target = {
                let ms = lock(&self.members);
                let connected = ms.iter().find(|m| *lock(&m.peer) == Some(from));
                connected
                    .or_else(|| {
                        let free = || ms.iter().filter(|m| lock(&m.peer).is_none());
                        let count = free().count();
                        if count > 1 && free().all(|m| m.reuseport) {
                            free().nth(spread(from) % count)
                        } else {
                            free().next_back()
                        }
                    })
                    .cloned()
            };
            let Some(m) = target else {
                DROPPED.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let mut q = lock(&m.q);
            if q.push(&scratch[..n.min(scratch.len())], from) {
                m.show(self, &q, true);
            } else {
                DROPPED.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A sender's share among SO_REUSEPORT sockets (FNV-1a of its address and port).
fn spread(a: SocketAddr) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let ip = match a.ip() {
        std::net::IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
        std::net::IpAddr::V6(v) => v.octets(),
    };
    for b in ip.iter().chain(&a.port().to_be_bytes()) {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    h as usize
}

impl Member {
    /// recv(2) on this member: the oldest datagram waiting for it, or `EAGAIN`.
    pub(crate) fn try_recv(&self, g: &Group, buf: &mut [u8]) -> Result<(usize, SocketAddr), c_int> {
        let mut q = lock(&self.q);
        let r = q.pop(buf);
        self.show(g, &q, false);
        r.ok_or(libc::EAGAIN)
    }

    /// The mirror blocking calls wait on.
    pub(crate) fn mirror(&self) -> &Mirror {
        &self.mirror
    }

    /// Whether a datagram waits (FIONREAD's 1 or 0).
    pub(crate) fn has_datagram(&self) -> bool {
        !lock(&self.q).dgrams.is_empty()
    }

    /// The association (connect(2)).
    pub(crate) fn peer(&self) -> Option<SocketAddr> {
        *lock(&self.peer)
    }

    /// Sets the association; datagrams from others already queued stay, as on Linux.
    pub(crate) fn connect(&self, to: SocketAddr) {
        *lock(&self.peer) = Some(to);
    }
}

/// The demultiplexer: one thread for the process, started with the first group.
struct Pump {
    groups: Mutex<Vec<Weak<Group>>>,
    work: Mutex<bool>,
    cv: Condvar,
}

fn pump() -> &'static Pump {
    static P: OnceLock<Pump> = OnceLock::new();
    P.get_or_init(|| {
        std::thread::Builder::new()
            .name("ulnet-udp-demux".into())
            .spawn(run)
            .expect("cannot start the UDP demultiplexer thread");
        Pump {
            groups: Mutex::new(Vec::new()),
            work: Mutex::new(false),
            cv: Condvar::new(),
        }
    })
}

/// Wakes the demultiplexer (cheap; called under the interface lock).
fn kick() {
    let p = pump();
    *lock(&p.work) = true;
    p.cv.notify_one();
}

fn run() {
    let p = pump();
    // One datagram's largest payload (IPv4: 65535 - 20 - 8).
    let mut scratch = vec![0u8; 65507];
    let mut live: Vec<Arc<Group>> = Vec::new();
    loop {
        {
            let mut w = lock(&p.work);
            while !*w {
                w = p.cv.wait(w).unwrap_or_else(|e| e.into_inner());
            }
            *w = false;
        }
        {
            let mut gs = lock(&p.groups);
            gs.retain(|g| g.strong_count() > 0);
            live.extend(gs.iter().filter_map(Weak::upgrade));
        }
        for g in &live {
            if g.pending.swap(false, Ordering::AcqRel) {
                g.drain(&mut scratch);
            }
        }
        // A group whose last member closed meanwhile ends here (its engine socket is
        // dropped on this thread, outside every lock of this module).
        live.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(port: u16) -> SocketAddr {
        SocketAddr::from(([198, 18, 0, 1], port))
    }

    #[test]
    fn queue_is_bounded_keeps_order_and_truncates_like_recv() {
        let mut q = Queue::new();
        let cap = q.bytes.capacity();
        // Byte bound: 256 KiB in 64 KiB datagrams = 4, the fifth is refused.
        let big = vec![7u8; 65536];
        for _ in 0..4 {
            assert!(q.push(&big, from(1)));
        }
        assert!(!q.push(&big, from(1)), "bytes over the bound");
        let mut buf = vec![0u8; 100];
        assert_eq!(
            q.pop(&mut buf),
            Some((65536, from(1))),
            "full length reported"
        );
        assert!(buf.iter().all(|&b| b == 7));
        // Datagram bound, across the ring's wrap-around, order kept.
        let mut q = Queue::new();
        for i in 0..QUEUE_DATAGRAMS {
            assert!(q.push(&[(i % 251) as u8; 1000], from(i as u16)));
        }
        assert!(!q.push(&[1], from(9)), "datagrams over the bound");
        for i in 0..QUEUE_DATAGRAMS * 3 {
            let mut b = [0u8; 1000];
            let (n, f) = q.pop(&mut b).unwrap();
            assert_eq!((n, f), (1000, from(i as u16)));
            assert!(b.iter().all(|&x| x == (i % 251) as u8), "datagram {i}");
            let j = i + QUEUE_DATAGRAMS;
            assert!(q.push(&[(j % 251) as u8; 1000], from(j as u16)));
        }
        assert_eq!(q.bytes.capacity(), cap, "no reallocation");
    }
}
