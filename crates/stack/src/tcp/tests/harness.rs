//! A scripted peer for segment-level tests: inject [`TcpRepr`]s into [`Tcp::process`],
//! run [`Tcp::dispatch`], and compare what came out, all in virtual time.

use std::net::{IpAddr, SocketAddr};

use ulnet_wire::{SackBlocks, SeqNumber, TcpFlags, TcpOptions, TcpRepr, TcpTimestamp};

use crate::tcp::{ListenerHandle, SocketHandle, Tcp, TcpConfig};
use crate::time::{Duration, Instant};

/// An owned segment (the engine lends its payload only for the duration of `out`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seg {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    pub window: u16,
    pub options: TcpOptions,
    pub payload: Vec<u8>,
}

#[allow(dead_code)] // a toolbox: not every test uses every helper
impl Seg {
    pub fn from_repr(r: &TcpRepr<'_>) -> Seg {
        Seg {
            src_port: r.src_port,
            dst_port: r.dst_port,
            seq: r.seq.0,
            ack: r.ack.0,
            flags: r.flags,
            window: r.window,
            options: r.options,
            payload: r.payload.to_vec(),
        }
    }

    pub fn repr(&self) -> TcpRepr<'_> {
        TcpRepr {
            src_port: self.src_port,
            dst_port: self.dst_port,
            seq: SeqNumber(self.seq),
            ack: SeqNumber(self.ack),
            flags: self.flags,
            window: self.window,
            urgent: 0,
            options: self.options,
            payload: &self.payload,
            payload_rest: &[],
        }
    }

    pub fn has(&self, f: TcpFlags) -> bool {
        self.flags.contains(f)
    }

    /// Sequence space taken.
    pub fn len(&self) -> u32 {
        self.payload.len() as u32
            + u32::from(self.has(TcpFlags::SYN))
            + u32::from(self.has(TcpFlags::FIN))
    }

    pub fn tsval(&self) -> Option<u32> {
        self.options.timestamp.map(|t| t.tsval)
    }

    pub fn sack(&self) -> Vec<(u32, u32)> {
        self.options
            .sack_blocks
            .iter()
            .map(|&(a, b)| (a.0, b.0))
            .collect()
    }

    // Builder-style setters for peer segments.
    pub fn seq(mut self, v: u32) -> Seg {
        self.seq = v;
        self
    }
    pub fn ack(mut self, v: u32) -> Seg {
        self.ack = v;
        self.flags |= TcpFlags::ACK;
        self
    }
    pub fn flags(mut self, f: TcpFlags) -> Seg {
        self.flags = f;
        self
    }
    pub fn window(mut self, w: u16) -> Seg {
        self.window = w;
        self
    }
    pub fn data(mut self, d: &[u8]) -> Seg {
        self.payload = d.to_vec();
        self
    }
    pub fn ts(mut self, tsval: u32, tsecr: u32) -> Seg {
        self.options.timestamp = Some(TcpTimestamp { tsval, tsecr });
        self
    }
    pub fn sack_blocks(mut self, blocks: &[(u32, u32)]) -> Seg {
        let v: Vec<_> = blocks
            .iter()
            .map(|&(a, b)| (SeqNumber(a), SeqNumber(b)))
            .collect();
        self.options.sack_blocks = SackBlocks::from_slice(&v);
        self
    }
    pub fn mss(mut self, m: u16) -> Seg {
        self.options.mss = Some(m);
        self
    }
    pub fn wscale(mut self, s: u8) -> Seg {
        self.options.window_scale = Some(s);
        self
    }
    pub fn sack_ok(mut self) -> Seg {
        self.options.sack_permitted = true;
        self
    }
}

pub const LOCAL: &str = "198.18.0.1:80";
pub const REMOTE: &str = "198.18.0.2:40000";

/// A config with the optional extras off, so exact segments are easy to predict; tests
/// that exercise an option turn it on.
pub fn plain_config() -> TcpConfig {
    TcpConfig {
        window_scaling: false,
        timestamps: false,
        sack: false,
        send_buffer_len: 64 * 1024,
        recv_buffer_len: 64 * 1024,
        ..TcpConfig::default()
    }
}

pub struct Harness {
    pub tcp: Tcp,
    pub now: Instant,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// Replies from `process` not yet taken.
    pub pending: Vec<Seg>,
}

impl Harness {
    pub fn new(cfg: TcpConfig) -> Harness {
        // The scripted peer sits on an Ethernet link: cap the MTU as an interface would
        // (`Interface::set_tcp`), so our MSS is 1460 unless a test asks for less.
        let mut tcp = Tcp::new(cfg, [0x5a; 16]);
        tcp.cap_mtu(1500);
        Harness {
            tcp,
            now: Instant::from_secs(1000),
            local: LOCAL.parse().unwrap(),
            remote: REMOTE.parse().unwrap(),
            pending: Vec::new(),
        }
    }

    /// A segment from the peer to us, with ports filled in and nothing else.
    pub fn peer(&self) -> Seg {
        Seg {
            src_port: self.remote.port(),
            dst_port: self.local.port(),
            seq: 0,
            ack: 0,
            flags: TcpFlags::empty(),
            window: 65535,
            options: TcpOptions::none(),
            payload: Vec::new(),
        }
    }

    /// Injects a peer segment; replies are kept for [`Harness::out`].
    pub fn send(&mut self, seg: Seg) {
        let (src, dst) = (self.remote.ip(), self.local.ip());
        let mut got = Vec::new();
        self.tcp.process(
            self.now,
            src,
            dst,
            &seg.repr(),
            &mut |s: IpAddr, d: IpAddr, r: &TcpRepr<'_>| {
                assert_eq!((s, d), (dst, src), "reply addressed wrongly");
                got.push(Seg::from_repr(r));
            },
        );
        self.pending.extend(got);
    }

    /// Everything that came out: replies from `process`, then a dispatch.
    pub fn out(&mut self) -> Vec<Seg> {
        let mut got = std::mem::take(&mut self.pending);
        let (local, remote) = (self.local.ip(), self.remote.ip());
        self.tcp
            .dispatch(self.now, &mut |s: IpAddr, d: IpAddr, r: &TcpRepr<'_>| {
                assert_eq!((s, d), (local, remote), "segment addressed wrongly");
                got.push(Seg::from_repr(r));
                true
            });
        got
    }

    /// Exactly one segment came out.
    pub fn out1(&mut self) -> Seg {
        let v = self.out();
        assert_eq!(v.len(), 1, "expected one segment, got {v:#?}");
        v.into_iter().next().unwrap()
    }

    /// Drops the replies already taken from `process`; then nothing more came out.
    pub fn quiet_after_pending(&mut self) {
        self.pending.clear();
        self.quiet();
    }

    /// Nothing came out.
    pub fn quiet(&mut self) {
        let v = self.out();
        assert!(v.is_empty(), "expected silence, got {v:#?}");
    }

    /// Moves virtual time forward, running timers on the way (dispatching at every
    /// deadline the engine asks for); returns everything sent.
    pub fn advance(&mut self, d: Duration) -> Vec<Seg> {
        let end = self.now + d;
        let mut got = std::mem::take(&mut self.pending);
        for _ in 0..100_000 {
            match self.tcp.poll_at() {
                Some(t) if t <= end => {
                    if t > self.now {
                        self.now = t;
                    }
                    let before = got.len();
                    got.extend(self.out());
                    // A dispatch that sent nothing leaves no work due now: a runtime that
                    // trusts `poll_at` must not spin (finding 1 of the TCP bug list).
                    assert!(
                        got.len() > before || self.tcp.poll_at().is_none_or(|t2| t2 > self.now),
                        "poll_at stays at {:?} after an idle dispatch",
                        self.now
                    );
                }
                _ => break,
            }
        }
        self.now = end;
        got.extend(self.out());
        got
    }

    /// Jumps to each deadline the engine reports until something comes out (spurious
    /// early wake-ups are allowed by the `poll_at` contract).
    pub fn wait(&mut self) -> Vec<Seg> {
        for _ in 0..1000 {
            let t = self.tcp.poll_at().expect("no timer pending");
            if t > self.now {
                self.now = t;
            }
            let v = self.out();
            if !v.is_empty() {
                return v;
            }
        }
        panic!("nothing came out");
    }

    pub fn listen(&mut self) -> ListenerHandle {
        self.tcp.listen(self.local, 16).unwrap()
    }

    /// Passive open up to ESTABLISHED: peer ISN `peer_isn`, peer SYN built by `syn`.
    /// Returns (handle, our ISS).
    pub fn passive_open(&mut self, peer_isn: u32, syn: Seg) -> (SocketHandle, u32) {
        let l = self.listen();
        let peer_ts = syn.tsval().unwrap_or(1);
        self.send(syn.seq(peer_isn).flags(TcpFlags::SYN));
        let synack = self.out1();
        assert_eq!(synack.flags, TcpFlags::SYN | TcpFlags::ACK);
        assert_eq!(synack.ack, peer_isn.wrapping_add(1));
        let iss = synack.seq;
        let mut ack = self
            .peer()
            .seq(peer_isn.wrapping_add(1))
            .ack(iss.wrapping_add(1));
        if let Some(ts) = synack.tsval() {
            ack = ack.ts(peer_ts, ts);
        }
        self.send(ack);
        self.quiet();
        let h = self.tcp.accept(self.now, l).unwrap().expect("accept");
        assert_eq!(self.tcp.state(h).unwrap(), crate::tcp::State::Established);
        (h, iss)
    }

    /// Active open up to ESTABLISHED. Returns (handle, our ISS).
    pub fn active_open(&mut self, peer_isn: u32, synack_opts: Seg) -> (SocketHandle, u32) {
        let h = self.tcp.connect(self.now, self.local, self.remote).unwrap();
        let syn = self.out1();
        assert_eq!(syn.flags, TcpFlags::SYN);
        let iss = syn.seq;
        let mut sa = synack_opts
            .seq(peer_isn)
            .flags(TcpFlags::SYN)
            .ack(iss.wrapping_add(1));
        if let Some(ts) = syn.tsval() {
            sa = sa.ts(1, ts);
        }
        self.send(sa);
        let ack = self.out1();
        assert_eq!(ack.flags, TcpFlags::ACK);
        assert_eq!(
            (ack.seq, ack.ack),
            (iss.wrapping_add(1), peer_isn.wrapping_add(1))
        );
        assert_eq!(self.tcp.state(h).unwrap(), crate::tcp::State::Established);
        (h, iss)
    }

    /// Uses up the quick ACKs a connection starts with (Linux's quick-ACK mode: the first
    /// ~16 segments are acknowledged at once): one-byte segments from `seq` until one is
    /// not acknowledged at once, then lets its delayed ACK go out and reads the bytes
    /// back. Returns the next sequence number.
    pub fn end_quick_acks(&mut self, h: SocketHandle, mut seq: u32, ack: u32) -> u32 {
        for _ in 0..64 {
            self.send(self.peer().seq(seq).ack(ack).data(b"q"));
            seq = seq.wrapping_add(1);
            if self.out().is_empty() {
                let a = self.advance(Duration::from_millis(200));
                assert_eq!(a.len(), 1, "one delayed ACK: {a:#?}");
                assert_eq!(a[0].ack, seq);
                self.read_all(h);
                return seq;
            }
        }
        panic!("quick-ACK mode never ended");
    }

    pub fn read_all(&mut self, h: SocketHandle) -> Vec<u8> {
        let mut v = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.tcp.recv(self.now, h, &mut buf) {
            if n == 0 {
                break;
            }
            v.extend_from_slice(&buf[..n]);
        }
        v
    }
}
