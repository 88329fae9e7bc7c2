//! Blind attacks on a live download, from a raw-socket injector (issue 12, "How it will
//! be checked", defects 1 and 2): a kernel client in namespace B downloads from ulnet's
//! HTTP server in A while an injector in B (an AF_PACKET socket; frames built by hand)
//! learns the connection's 4-tuple and sequence numbers by sniffing ulnet's segments
//! and sends, posing as the client:
//!
//! (a) ACK segments at RCV.NXT with SEG.ACK far beyond SND.NXT and a TSval far ahead of
//!     the client's clock. RFC 5961 §5 / RFC 7323 §4.3: an unacceptable ACK is dropped
//!     (with a challenge ACK) before TS.Recent can change. Were TS.Recent taken from it,
//!     PAWS would drop every later segment of the real client (its TSval is behind): the
//!     download would stall for good.
//! (b) RSTs outside the window ulnet advertised: just past its right edge, further out,
//!     and below RCV.NXT. RFC 9293 §3.10.7.4 / RFC 5961 §3: dropped silently.
//!
//! The client stops reading for the attack (its window closes, ulnet probes), then
//! resumes: the connection must survive, move more bytes, and deliver the whole body
//! byte-exact. No rate is asserted; the rates before and after are printed.

mod interop_support;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use interop_support::*;
use ulnet::channel::packet::{PacketChannel, PacketOptions};
use ulnet::channel::Channel;
use ulnet::net::Stack;
use ulnet::runtime::Backend;
use ulnet::stack::iface::IpCidr;
use ulnet::wire::{checksum, IpProtocol};
use ulnet_apps::pattern;

/// The download: long enough that the pause comes mid-transfer.
const LEN: u64 = 48 << 20;
/// The client stops reading after this much body.
const PAUSE_AT: u64 = 8 << 20;

/// What the client saw.
#[derive(Debug)]
struct Download {
    before: (u64, Duration),
    after: (u64, Duration),
    total: u64,
}

fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 * 8.0 / d.as_secs_f64().max(1e-9) / 1e6
}

/// The kernel client, in `ns`: GET /bytes/LEN, every body byte compared with the
/// pattern; at PAUSE_AT it asks for the attack and waits until told to go on.
fn download(
    ns: &str,
    to: SocketAddr,
    attack: mpsc::Sender<()>,
    resume: mpsc::Receiver<()>,
) -> Result<Download, String> {
    let _g = ulnet::channel::sys::netns::enter(ns).map_err(|e| format!("enter netns: {e}"))?;
    let mut c = TcpStream::connect_timeout(&to, Duration::from_secs(5))
        .map_err(|e| format!("connect: {e}"))?;
    // A stall (what defect 1 caused) ends the test instead of hanging it.
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        c,
        "GET /bytes/{LEN} HTTP/1.1\r\nHost: ulnet\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("request: {e}"))?;
    let mut buf = vec![0u8; 1 << 16];
    let mut head = Vec::new();
    let mut body = 0u64;
    let mut start = Instant::now();
    let mut before = None;
    let mut resumed = None;
    let check = |data: &[u8], body: &mut u64| -> Result<(), String> {
        if data != pattern::slice(*body, data.len()) {
            return Err(format!("body differs from the pattern near byte {body}"));
        }
        *body += data.len() as u64;
        Ok(())
    };
    loop {
        let n = match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => return Err(format!("read after {body} body bytes: {e}")),
        };
        if head.len() < 4 || !head.ends_with(b"\r\n\r\n") {
            // Still in the head: find its end in this read.
            let mut data = &buf[..n];
            while let Some((&b, rest)) = data.split_first() {
                head.push(b);
                data = rest;
                if head.ends_with(b"\r\n\r\n") {
                    break;
                }
            }
            if head.ends_with(b"\r\n\r\n") {
                if !head.starts_with(b"HTTP/1.1 200") {
                    return Err(format!("status: {}", String::from_utf8_lossy(&head)));
                }
                start = Instant::now();
                check(data, &mut body)?;
            }
        } else {
            check(&buf[..n], &mut body)?;
        }
        if before.is_none() && body >= PAUSE_AT {
            before = Some((body, start.elapsed()));
            attack
                .send(())
                .map_err(|_| "the injector is gone".to_owned())?;
            resume
                .recv_timeout(Duration::from_secs(30))
                .map_err(|_| "the injector never finished".to_owned())?;
            resumed = Some((body, Instant::now()));
        }
    }
    let before = before.ok_or("the download ended before the attack")?;
    let (at, t) = resumed.expect("resumed with the attack");
    Ok(Download {
        before,
        after: (body - at, t.elapsed()),
        total: body,
    })
}

/// The latest segment ulnet sent to the client, as the injector sniffed it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    ulnet_mac: [u8; 6],
    peer_mac: [u8; 6],
    ulnet: (Ipv4Addr, u16),
    peer: (Ipv4Addr, u16),
    /// ulnet's SND.NXT side: the segment's sequence number and length.
    seq: u32,
    /// The client's next sequence number (ulnet's RCV.NXT).
    ack: u32,
    window: u16,
    tsval: u32,
    tsecr: u32,
}

/// Parses an Ethernet/IPv4/TCP frame from `from`; `wscale` learns ulnet's window scale
/// from its SYN-ACK.
fn sniff(frame: &[u8], from: (Ipv4Addr, u16), wscale: &mut Option<u8>) -> Option<Seen> {
    if frame.len() < 54 || frame[12..14] != [0x08, 0x00] || frame[23] != 6 {
        return None;
    }
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    let ip = &frame[14..];
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let tcp = frame.get(14 + ihl..)?;
    if tcp.len() < 20 {
        return None;
    }
    let sport = u16::from_be_bytes([tcp[0], tcp[1]]);
    if (src, sport) != from {
        return None;
    }
    let off = usize::from(tcp[12] >> 4) * 4;
    let opts = tcp.get(20..off)?;
    let (mut tsval, mut tsecr) = (0, 0);
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => break,
            1 => i += 1,
            kind => {
                let len = usize::from(*opts.get(i + 1)?).max(2);
                let o = opts.get(i..i + len)?;
                if kind == 8 && len == 10 {
                    tsval = u32::from_be_bytes([o[2], o[3], o[4], o[5]]);
                    tsecr = u32::from_be_bytes([o[6], o[7], o[8], o[9]]);
                }
                if kind == 3 && len == 3 && tcp[13] & 0x12 == 0x12 {
                    *wscale = Some(o[2]);
                }
                i += len;
            }
        }
    }
    let mut ulnet_mac = [0; 6];
    let mut peer_mac = [0; 6];
    ulnet_mac.copy_from_slice(&frame[6..12]);
    peer_mac.copy_from_slice(&frame[..6]);
    Some(Seen {
        ulnet_mac,
        peer_mac,
        ulnet: from,
        peer: (dst, u16::from_be_bytes([tcp[2], tcp[3]])),
        seq: u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]),
        ack: u32::from_be_bytes([tcp[8], tcp[9], tcp[10], tcp[11]]),
        window: u16::from_be_bytes([tcp[14], tcp[15]]),
        tsval,
        tsecr,
    })
}

const ACK: u8 = 0x10;
const RST: u8 = 0x04;

/// A client → ulnet segment, posing as the client: Ethernet, IPv4, TCP with a timestamp
/// option, checksums filled in (66 bytes).
fn forged(s: &Seen, seq: u32, ack: u32, flags: u8, ts: (u32, u32)) -> [u8; 66] {
    let mut f = [0u8; 66];
    f[..6].copy_from_slice(&s.ulnet_mac);
    f[6..12].copy_from_slice(&s.peer_mac);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip.copy_from_slice(&[
        0x45, 0, 0, 52, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ]);
    ip[12..16].copy_from_slice(&s.peer.0.octets());
    ip[16..20].copy_from_slice(&s.ulnet.0.octets());
    let sum = !checksum::data(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let tcp = &mut f[34..66];
    tcp[0..2].copy_from_slice(&s.peer.1.to_be_bytes());
    tcp[2..4].copy_from_slice(&s.ulnet.1.to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[8..12].copy_from_slice(&ack.to_be_bytes());
    // Data offset 8 words (20 + NOP, NOP, timestamps), flags, window 512.
    tcp[12] = 8 << 4;
    tcp[13] = flags;
    tcp[14..16].copy_from_slice(&512u16.to_be_bytes());
    tcp[20..24].copy_from_slice(&[1, 1, 8, 10]);
    tcp[24..28].copy_from_slice(&ts.0.to_be_bytes());
    tcp[28..32].copy_from_slice(&ts.1.to_be_bytes());
    let sum = !checksum::combine(&[
        checksum::pseudo_header(
            &IpAddr::V4(s.peer.0),
            &IpAddr::V4(s.ulnet.0),
            IpProtocol::Tcp,
            32,
        ),
        checksum::data(tcp),
    ]);
    tcp[16..18].copy_from_slice(&sum.to_be_bytes());
    f
}

/// What the injector sent.
#[derive(Debug, Default)]
struct Injected {
    blind_acks: u32,
    off_window_rsts: u32,
    window: u32,
}

/// The injector, on B's interface: sniffs ulnet's segments from `ulnet` until told to
/// attack, then sends the forged segments and tells the client to go on.
fn injector(
    b_if: &str,
    b_ns: &str,
    ulnet: (Ipv4Addr, u16),
    attack: mpsc::Receiver<()>,
    resume: mpsc::Sender<()>,
    ready: mpsc::Sender<()>,
    stop: Arc<AtomicBool>,
) -> Result<Injected, String> {
    let mut ch = PacketChannel::open(b_if, Some(b_ns), &PacketOptions::default())
        .map_err(|e| format!("AF_PACKET socket in B: {e}"))?;
    // Open before the client connects: the SYN-ACK tells ulnet's window scale.
    let _ = ready.send(());
    let mut wscale = None;
    let mut latest: Option<Seen> = None;
    // The furthest right edge ulnet advertised (an edge once offered stays acceptable,
    // RFC 7323 §2.4, even when a later rounded window field shows it a little short).
    let mut max_edge: Option<u32> = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    let drain = |ch: &mut PacketChannel,
                 latest: &mut Option<Seen>,
                 wscale: &mut Option<u8>,
                 max_edge: &mut Option<u32>| {
        let _ = ch.rx_batch(256, &mut |frame, _| {
            if let Some(s) = sniff(frame, ulnet, wscale) {
                if let Some(shift) = *wscale {
                    let edge = s.ack.wrapping_add(u32::from(s.window) << shift);
                    if max_edge.is_none_or(|m| (edge.wrapping_sub(m) as i32) > 0) {
                        *max_edge = Some(edge);
                    }
                }
                *latest = Some(s);
            }
        });
    };
    // Sniff until the client has read PAUSE_AT and stopped reading.
    loop {
        drain(&mut ch, &mut latest, &mut wscale, &mut max_edge);
        if attack.try_recv().is_ok() {
            break;
        }
        if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
            return Err("no attack request".into());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    // Let the client's window close and ulnet's last segments arrive: what we sniff now
    // is ulnet's current state (its probes keep coming).
    let settle = Instant::now() + Duration::from_millis(300);
    while Instant::now() < settle {
        drain(&mut ch, &mut latest, &mut wscale, &mut max_edge);
        std::thread::sleep(Duration::from_millis(1));
    }
    let s = latest.ok_or("sniffed no segment of the download")?;
    let shift = wscale.ok_or("sniffed no SYN-ACK (window scale unknown)")?;
    let window = u32::from(s.window) << shift;
    let mut out = Injected {
        window,
        ..Injected::default()
    };
    let send = |ch: &mut PacketChannel, f: &[u8]| -> Result<(), String> {
        ch.tx()
            .send(f.len(), &mut |b| b.copy_from_slice(f))
            .map_err(|e| format!("inject: {e}"))?;
        ch.tx().flush().map_err(|e| format!("inject: {e}"))
    };
    // (a) Blind ACKs: in the window (SEG.SEQ = RCV.NXT), SEG.ACK a gigabyte beyond
    // anything ulnet sent, TSval 2^30 ahead of the client's clock (still "newer" in
    // RFC 7323's modular order).
    let huge_ts = s.tsecr.wrapping_add(1 << 30);
    for k in 0..8u32 {
        let f = forged(
            &s,
            s.ack,
            s.seq.wrapping_add((1 << 30) + k),
            ACK,
            (huge_ts.wrapping_add(k), s.tsval),
        );
        send(&mut ch, &f)?;
        out.blind_acks += 1;
    }
    // (b) RSTs outside the advertised window: at its right edge and beyond, far out, and
    // below RCV.NXT.
    let edge = max_edge.ok_or("no window seen")?;
    for seq in [
        edge,
        edge.wrapping_add(1),
        edge.wrapping_add(1460),
        edge.wrapping_add(window),
        edge.wrapping_add(1 << 20),
        s.ack.wrapping_add(1 << 30),
        s.ack.wrapping_sub(1),
        s.ack.wrapping_sub(1 << 20),
    ] {
        let f = forged(&s, seq, s.seq, RST | ACK, (s.tsecr, s.tsval));
        send(&mut ch, &f)?;
        let f = forged(&s, seq, 0, RST, (s.tsecr, s.tsval));
        send(&mut ch, &f)?;
        out.off_window_rsts += 2;
    }
    // Give ulnet time to take them all before the client's window reopens.
    std::thread::sleep(Duration::from_millis(100));
    resume
        .send(())
        .map_err(|_| "the client is gone".to_owned())?;
    Ok(out)
}

#[test]
fn blind_ack_and_off_window_rsts_do_not_stall_a_download() {
    let tb = testbed("iinj");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    let ip = a.spare_ip(1);
    let IpAddr::V4(ip4) = ip else {
        panic!("the testbed is IPv4")
    };
    let cfg = Stack::builder()
        .backend(Backend::Packet)
        .interface(&a.ifname)
        .address_cidr(IpCidr::new(ip, a.prefix_len).unwrap())
        .netns(&a.ns);
    let mut t = Session::open(cfg, &b.ns);

    let (attack_tx, attack_rx) = mpsc::channel();
    let (resume_tx, resume_rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let inj = {
        let (ifname, ns, stop) = (b.ifname.clone(), b.ns.clone(), stop.clone());
        std::thread::spawn(move || {
            injector(
                &ifname,
                &ns,
                (ip4, 80),
                attack_rx,
                resume_tx,
                ready_tx,
                stop,
            )
        })
    };
    // An injector that failed to open drops its sender: its error shows at the join.
    let _ = ready_rx.recv_timeout(Duration::from_secs(10));
    let ns = b.ns.clone();
    let got = t.serve_while(|| download(&ns, SocketAddr::new(ip, 80), attack_tx, resume_rx));
    stop.store(true, Ordering::Relaxed);
    let injected = inj.join().expect("the injector panicked");
    let injected = injected.unwrap_or_else(|e| panic!("injector: {e}"));
    let d = got.unwrap_or_else(|e| panic!("download under attack ({injected:?}): {e}"));
    let stats =
        t.rt.iface()
            .tcp()
            .map(|tcp| tcp.stats())
            .expect("TCP stats");
    eprintln!(
        "injected {injected:?} (ulnet's window {} bytes); before the attack {} bytes at {:.0} Mb/s, after it {} bytes \
         at {:.0} Mb/s; TCP stats {stats:?}",
        injected.window,
        d.before.0,
        mbps(d.before.0, d.before.1),
        d.after.0,
        mbps(d.after.0, d.after.1),
    );
    assert!(injected.blind_acks > 0 && injected.off_window_rsts > 0);
    // Every forged segment was dropped where RFC 5961 says: the blind ACKs as
    // unacceptable ACKs (each with a challenge ACK, §5.2), the RSTs as outside the window
    // (silently, §3.2); none reset the connection.
    assert!(
        stats.dropped_bad_ack >= u64::from(injected.blind_acks),
        "{stats:?}"
    );
    assert!(
        stats.dropped_rst >= u64::from(injected.off_window_rsts),
        "{stats:?}"
    );
    assert_eq!(stats.resets_received, 0, "{stats:?}");
    // The blind ACKs' huge TSval did not become TS.Recent: PAWS would then drop every
    // later segment of the client's and the download would stall. A few of the
    // client's ACKs are PAWS-dropped anyway: the client's kernel sends them from both
    // cores (its softirq and its reader's window updates), so they reach ulnet a
    // millisecond tick out of order now and then (seen in a capture: TSval 727 after
    // 728), and Linux drops those too (`tcp_disordered_ack` spares only duplicate ACKs).
    assert!(stats.dropped_paws * 10 < stats.segs_in, "{stats:?}");
    // The connection survived the attack, kept moving, and the body is byte-exact (every
    // byte was compared with the pattern as it arrived).
    assert_eq!(d.total, LEN, "{d:?}");
    assert!(d.after.0 > 0, "{d:?}");
}
