//! Load from the peer's side of the testbed, each on its own thread: a UDP flood from an
//! AF_XDP socket, a kernel TCP bulk sender and a kernel TCP receiver (both inside a
//! namespace). Every loop is bounded in time or bytes.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ulnet::channel::xdp::{XdpChannel, XdpOptions};
use ulnet::channel::Channel as _;
use ulnet::wire::checksum;
use ulnet::wire::IpProtocol;
use ulnet_apps::pattern;

use crate::cpu::thread_cpu_time;
use crate::harness::{io_err, pin, LOAD_CPU};

/// Frames the flood queues per doorbell.
const FLOOD_BATCH: usize = 64;
/// The longest any single transfer may take before it counts as failed.
const TRANSFER_LIMIT: Duration = Duration::from_secs(120);

/// What a load thread did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    /// Datagrams or bytes.
    pub count: u64,
    /// From the first send to the end (for TCP: until the peer's FIN).
    pub elapsed: Duration,
    /// The thread's CPU time over the same span.
    pub cpu: Duration,
}

/// Runs `f` on a new thread inside namespace `ns`, pinned to `cpu` if given (else on the
/// caller's cores), after telling the caller that the namespace was entered and `setup`
/// succeeded (so the caller can start the other side).
pub(crate) fn in_ns<S, T>(
    ns: &str,
    cpu: impl Into<Option<usize>>,
    setup: impl FnOnce() -> io::Result<S> + Send + 'static,
    f: impl FnOnce(S) -> io::Result<T> + Send + 'static,
) -> io::Result<JoinHandle<io::Result<T>>>
where
    T: Send + 'static,
{
    let ns = ns.to_owned();
    let cpu = cpu.into();
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let ready = (|| {
            if let Some(cpu) = cpu {
                pin(cpu)?;
            }
            let guard = ulnet::channel::sys::netns::enter(&ns).map_err(io_err)?;
            let s = setup()?;
            Ok::<_, io::Error>((guard, s))
        })();
        match ready {
            Ok((_guard, s)) => {
                let _ = tx.send(Ok(()));
                f(s)
            }
            Err(e) => {
                let msg = e.to_string();
                let _ = tx.send(Err(e));
                Err(io::Error::other(msg))
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(())) => Ok(t),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(io::Error::other("thread did not start in its namespace")),
    }
}

/// Where a UDP flood goes, at the Ethernet level.
#[derive(Debug, Clone)]
pub(crate) struct Flood {
    /// Namespace and interface the generator transmits on.
    pub ns: String,
    /// The generator's interface.
    pub ifname: String,
    /// Source and destination MAC.
    pub macs: ([u8; 6], [u8; 6]),
    /// Source and destination address, both IPv4 or both IPv6.
    pub ips: (IpAddr, IpAddr),
    /// Destination UDP port.
    pub port: u16,
    /// UDP payload bytes.
    pub payload_len: usize,
}

/// One Ethernet/IPv4/UDP or Ethernet/IPv6/UDP frame of the flood (by the family of
/// `f.ips`), checksums filled in.
///
/// # Panics
/// If the two addresses are of different families.
pub(crate) fn udp_frame(f: &Flood) -> Vec<u8> {
    let udp_len = 8 + f.payload_len;
    let mut b = Vec::with_capacity(14 + 40 + udp_len);
    b.extend_from_slice(&f.macs.1);
    b.extend_from_slice(&f.macs.0);
    let ip_start = b.len() + 2;
    match f.ips {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            b.extend_from_slice(&0x0800u16.to_be_bytes());
            b.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0]);
            b[ip_start + 2..ip_start + 4].copy_from_slice(&(20 + udp_len as u16).to_be_bytes());
            b.extend_from_slice(&src.octets());
            b.extend_from_slice(&dst.octets());
            let ip_sum = !checksum::data(&b[ip_start..]);
            b[ip_start + 10..ip_start + 12].copy_from_slice(&ip_sum.to_be_bytes());
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            // RFC 8200 §3: version 6, no traffic class or flow label, next header UDP,
            // hop limit 64.
            b.extend_from_slice(&0x86ddu16.to_be_bytes());
            b.extend_from_slice(&[0x60, 0, 0, 0]);
            b.extend_from_slice(&(udp_len as u16).to_be_bytes());
            b.extend_from_slice(&[17, 64]);
            b.extend_from_slice(&src.octets());
            b.extend_from_slice(&dst.octets());
        }
        (src, dst) => panic!("a flood from {src} to {dst}: mixed families"),
    }
    let udp_start = b.len();
    b.extend_from_slice(&40_000u16.to_be_bytes());
    b.extend_from_slice(&f.port.to_be_bytes());
    b.extend_from_slice(&(udp_len as u16).to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b.resize(udp_start + udp_len, 0x5a);
    let sum = checksum::combine(&[
        checksum::pseudo_header(&f.ips.0, &f.ips.1, IpProtocol::Udp, udp_len as u32),
        checksum::data(&b[udp_start..]),
    ]);
    // RFC 768 (and RFC 8200 §8.1, where zero is not allowed at all): a computed zero is
    // sent as all ones.
    let sum = match !sum {
        0 => 0xffff,
        s => s,
    };
    b[udp_start + 6..udp_start + 8].copy_from_slice(&sum.to_be_bytes());
    b
}

/// Connects to `to`, sends `bytes` of the pattern, shuts down its sending side and
/// waits for the receiver to close; on the load core.
pub(crate) fn tcp_send(
    ns: &str,
    to: SocketAddr,
    bytes: u64,
) -> io::Result<JoinHandle<io::Result<Done>>> {
    tcp_send_on(ns, to, bytes, LOAD_CPU)
}

/// What the kernel receiver got.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received {
    /// Bytes and timing, as the receiving thread saw them.
    pub done: Done,
    /// Every byte was the pattern at its offset.
    pub pattern_ok: bool,
}

/// [`tcp_send`] on a thread pinned to `cpu`: the system under test's core when the
/// kernel's own sender is what is measured (a kernel socket sending from namespace A).
pub(crate) fn tcp_send_on(
    ns: &str,
    to: SocketAddr,
    bytes: u64,
    cpu: usize,
) -> io::Result<JoinHandle<io::Result<Done>>> {
    tcp_send_with(ns, to, bytes, cpu, None)
}

/// [`tcp_send_on`] with the socket's congestion control set to `cc` (`TCP_CONGESTION`,
/// e.g. "cubic") once connected, before any data: a kernel sender with another
/// algorithm than the namespace's default. Setting one outside
/// `net.ipv4.tcp_allowed_congestion_control` needs CAP_NET_ADMIN, which the bench has.
/// Fails if the kernel reports another algorithm afterwards.
pub(crate) fn tcp_send_with(
    ns: &str,
    to: SocketAddr,
    bytes: u64,
    cpu: usize,
    cc: Option<&'static str>,
) -> io::Result<JoinHandle<io::Result<Done>>> {
    in_ns(
        ns,
        cpu,
        move || {
            let s = TcpStream::connect_timeout(&to, Duration::from_secs(5))?;
            if let Some(cc) = cc {
                rustix::net::sockopt::set_tcp_congestion(&s, cc)?;
                let now = rustix::net::sockopt::tcp_congestion(&s)?;
                if now != cc {
                    return Err(io::Error::other(format!(
                        "TCP_CONGESTION {cc} asked, the socket has {now}"
                    )));
                }
            }
            s.set_read_timeout(Some(TRANSFER_LIMIT))?;
            s.set_write_timeout(Some(TRANSFER_LIMIT))?;
            Ok(s)
        },
        move |mut s| {
            let cpu0 = thread_cpu_time();
            let start = Instant::now();
            let mut off = 0u64;
            while off < bytes {
                let n = (bytes - off).min(pattern::MAX_CHUNK as u64) as usize;
                s.write_all(pattern::slice(off, n))?;
                off += n as u64;
            }
            s.shutdown(Shutdown::Write)?;
            // The receiver closes once it has read everything: EOF marks the end.
            let mut buf = [0u8; 64];
            while s.read(&mut buf)? > 0 {}
            Ok(Done {
                count: off,
                elapsed: start.elapsed(),
                cpu: thread_cpu_time() - cpu0,
            })
        },
    )
}

/// A kernel TCP receiver on `at` for one connection, on a thread pinned to `cpu` (the
/// load core when the kernel receiver is the peer, not the system under test): reads
/// everything, checking the pattern, and closes at EOF; with the accept bounded (10 s) and
/// the reads bounded by an idle timeout (20 s), calling `observe(&mut state, n)` after
/// every read of `n` bytes (e.g. to timestamp the arrival); hands `state` back at the end.
pub(crate) fn tcp_sink_with<S, F>(
    ns: &str,
    at: SocketAddr,
    cpu: usize,
    mut state: S,
    observe: F,
) -> io::Result<JoinHandle<io::Result<(Received, S)>>>
where
    S: Send + 'static,
    F: Fn(&mut S, usize) + Send + 'static,
{
    in_ns(
        ns,
        cpu,
        move || {
            let l = TcpListener::bind(at)?;
            l.set_nonblocking(true)?;
            Ok(l)
        },
        move |l| {
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut s = loop {
                match l.accept() {
                    Ok((s, _)) => break s,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if Instant::now() >= deadline {
                            return Err(io::Error::new(
                                io::ErrorKind::TimedOut,
                                "no connection to the kernel receiver within 10 s",
                            ));
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(e) => return Err(e),
                }
            };
            s.set_nonblocking(false)?;
            s.set_read_timeout(Some(Duration::from_secs(20)))?;
            let mut buf = vec![0u8; 64 * 1024];
            let cpu0 = thread_cpu_time();
            let start = Instant::now();
            let (mut off, mut ok) = (0u64, true);
            loop {
                let n = s.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                observe(&mut state, n);
                ok &= pattern::matches(off, &buf[..n]);
                off += n as u64;
            }
            Ok((
                Received {
                    done: Done {
                        count: off,
                        elapsed: start.elapsed(),
                        cpu: thread_cpu_time() - cpu0,
                    },
                    pattern_ok: ok,
                },
                state,
            ))
        },
    )
}

/// One Ethernet/IPv4/UDP frame as `f` describes it, checksums filled in (what
/// [`xdp_flood_paced`] sends), for experiments that transmit frames of their own.
pub(crate) fn flood_frame(f: &Flood) -> Vec<u8> {
    udp_frame(f)
}
/// Frames per doorbell of a paced flood at `rate_pps` (0: unpaced): about 50 µs of
/// frames per batch, so the offered load is smooth on the scale of the receiver's
/// rings, never more than [`FLOOD_BATCH`] and at least one.
pub(crate) fn paced_batch(rate_pps: u64) -> usize {
    if rate_pps == 0 {
        FLOOD_BATCH
    } else {
        ((rate_pps / 20_000) as usize).clamp(1, FLOOD_BATCH)
    }
}

/// How many frames a flood at `rate_pps` should have sent `elapsed` after its start
/// (`u64::MAX` when unpaced).
pub(crate) fn paced_due(rate_pps: u64, elapsed: Duration) -> u64 {
    if rate_pps == 0 {
        u64::MAX
    } else {
        (rate_pps as f64 * elapsed.as_secs_f64()) as u64
    }
}

/// The generator's AF_XDP socket on `f`'s interface, steering the flood's source address
/// to itself (the channel waits for the previous round's socket on the queue to be
/// released).
fn open_generator(f: &Flood) -> io::Result<XdpChannel> {
    let o = XdpOptions {
        addresses: vec![f.ips.0],
        ..XdpOptions::default()
    };
    XdpChannel::open(&f.ifname, Some(&f.ns), &o).map_err(io_err)
}

/// Floods `f` for `duration` from an AF_XDP socket on the generator's interface, paced
/// to `rate_pps` frames per second (0: as fast as it can),
/// for at most `duration` and at most `max_count` frames. Pacing is per batch against
/// the clock: a batch goes out when the frames due by now exceed those sent, so a late
/// batch is made up at once and the average holds even when the thread is preempted.
/// Frames the transmit ring refuses are not counted (the count is what was offered).
pub(crate) fn xdp_flood_paced(
    f: Flood,
    rate_pps: u64,
    duration: Duration,
    max_count: u64,
) -> io::Result<JoinHandle<io::Result<Done>>> {
    let mut ch = open_generator(&f)?;
    let frame = udp_frame(&f);
    let batch = paced_batch(rate_pps);
    Ok(std::thread::spawn(move || {
        pin(LOAD_CPU)?;
        let cpu0 = thread_cpu_time();
        let start = Instant::now();
        let mut count = 0u64;
        loop {
            let elapsed = start.elapsed();
            if elapsed >= duration || count >= max_count {
                break;
            }
            let due = paced_due(rate_pps, elapsed).min(max_count);
            if count >= due {
                // Ahead of schedule: wait for the next batch's time. Sleep only for long
                // gaps (a sleep overshoots by tens of µs in a VM); yield otherwise.
                let next = (count + batch as u64) as f64 / rate_pps.max(1) as f64;
                let gap = next - elapsed.as_secs_f64();
                if gap > 0.002 {
                    std::thread::sleep(Duration::from_secs_f64(gap - 0.001));
                } else {
                    std::thread::yield_now();
                }
                continue;
            }
            let n = ((due - count) as usize).min(batch);
            for _ in 0..n {
                if ch
                    .tx()
                    .send(frame.len(), &mut |b| b.copy_from_slice(&frame))
                    .is_err()
                {
                    break;
                }
                count += 1;
            }
            ch.tx().flush().map_err(io_err)?;
            ch.rx_batch(FLOOD_BATCH, &mut |_, _| {}).map_err(io_err)?;
        }
        // Let the ring drain into the wire before the socket closes.
        for _ in 0..8 {
            ch.tx().flush().map_err(io_err)?;
        }
        Ok(Done {
            count,
            elapsed: start.elapsed(),
            cpu: thread_cpu_time() - cpu0,
        })
    }))
}

#[cfg(test)]
mod paced_tests {
    use super::*;

    #[test]
    fn pacing_math() {
        assert_eq!(paced_batch(0), FLOOD_BATCH);
        assert_eq!(paced_batch(10_000), 1);
        assert_eq!(paced_batch(200_000), 10);
        assert_eq!(paced_batch(10_000_000), FLOOD_BATCH);
        assert_eq!(paced_due(0, Duration::from_secs(1)), u64::MAX);
        assert_eq!(paced_due(33_333, Duration::from_secs(30)), 999_990);
        assert_eq!(paced_due(100_000, Duration::from_millis(250)), 25_000);
    }
}

/// What an echo load ([`xdp_echo_load`]) offered and got back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EchoDone {
    /// Datagrams offered and the sending span and thread CPU (over the drain too).
    pub sent: Done,
    /// Echoes received: datagrams from the echo port back to the flood's source port
    /// carrying a payload of the flood's length.
    pub echoed: u64,
}

/// The flood's UDP source port (fixed in [`flood_frame`]): echoes come back to it.
pub(crate) const FLOOD_SRC_PORT: u16 = 40_000;

/// Whether `frame` is an echo of a flood to `port`: IPv4/UDP (no IP options, as the echo
/// sends them) or IPv6/UDP (no extension headers) from `port` to [`FLOOD_SRC_PORT`] with
/// `payload_len` bytes of payload.
pub(crate) fn is_echo(frame: &[u8], port: u16, payload_len: usize) -> bool {
    let v4 =
        frame.len() >= 42 && frame[12..14] == [0x08, 0x00] && frame[14] == 0x45 && frame[23] == 17;
    let v6 = frame.len() >= 62
        && frame[12..14] == [0x86, 0xdd]
        && frame[14] >> 4 == 6
        && frame[20] == 17;
    let u = match (v4, v6) {
        (true, _) => &frame[34..42],
        (_, true) => &frame[54..62],
        _ => return false,
    };
    u16::from_be_bytes([u[0], u[1]]) == port
        && u16::from_be_bytes([u[2], u[3]]) == FLOOD_SRC_PORT
        && usize::from(u16::from_be_bytes([u[4], u[5]])) == 8 + payload_len
}

/// [`xdp_flood_paced`] that also counts what comes back: the same paced flood of `f` at
/// `rate_pps` (0: as fast as it can) for `duration` or `max_count` datagrams, and, on
/// the same thread, the echoes its AF_XDP socket receives (the socket steers frames for
/// the flood's source address to itself), reaped after every batch and for `drain`
/// after the last send so that echoes still in flight are counted. One thread does
/// both: a second receiver would need a second socket on the same queue, and reaping a
/// batch costs little next to sending it.
pub(crate) fn xdp_echo_load(
    f: Flood,
    rate_pps: u64,
    duration: Duration,
    max_count: u64,
    drain: Duration,
) -> io::Result<JoinHandle<io::Result<EchoDone>>> {
    let mut ch = open_generator(&f)?;
    let frame = udp_frame(&f);
    let batch = paced_batch(rate_pps);
    let (port, len) = (f.port, f.payload_len);
    Ok(std::thread::spawn(move || {
        pin(LOAD_CPU)?;
        let cpu0 = thread_cpu_time();
        let start = Instant::now();
        let (mut count, mut echoed) = (0u64, 0u64);
        let mut reap = |ch: &mut XdpChannel| -> io::Result<usize> {
            ch.rx_batch(FLOOD_BATCH, &mut |fr, _| {
                if is_echo(fr, port, len) {
                    echoed += 1;
                }
            })
            .map_err(io_err)
        };
        loop {
            let elapsed = start.elapsed();
            if elapsed >= duration || count >= max_count {
                break;
            }
            let due = paced_due(rate_pps, elapsed).min(max_count);
            if count >= due {
                // Ahead of schedule: reap echoes while waiting for the next batch's time
                // (a sleep overshoots by tens of µs in a VM, so only long gaps sleep).
                if reap(&mut ch)? == 0 {
                    let next = (count + batch as u64) as f64 / rate_pps.max(1) as f64;
                    let gap = next - elapsed.as_secs_f64();
                    if gap > 0.002 {
                        std::thread::sleep(Duration::from_secs_f64(gap - 0.001).min(drain));
                    } else {
                        std::thread::yield_now();
                    }
                }
                continue;
            }
            let n = ((due - count) as usize).min(batch);
            for _ in 0..n {
                if ch
                    .tx()
                    .send(frame.len(), &mut |b| b.copy_from_slice(&frame))
                    .is_err()
                {
                    break;
                }
                count += 1;
            }
            ch.tx().flush().map_err(io_err)?;
            reap(&mut ch)?;
        }
        let sent_for = start.elapsed();
        // Echoes still in flight (in the rings, the socket buffers, the echo thread):
        // reap until `drain` has passed with nothing new for a millisecond at the end.
        let end = Instant::now() + drain;
        let mut quiet_since = Instant::now();
        while Instant::now() < end {
            ch.tx().flush().map_err(io_err)?;
            if reap(&mut ch)? > 0 {
                quiet_since = Instant::now();
            } else if quiet_since.elapsed() > Duration::from_millis(20) {
                break;
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        Ok(EchoDone {
            sent: Done {
                count,
                elapsed: sent_for,
                cpu: thread_cpu_time() - cpu0,
            },
            echoed,
        })
    }))
}

#[cfg(test)]
mod echo_tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn echoes_are_recognised() {
        let f = Flood {
            ns: String::new(),
            ifname: String::new(),
            macs: ([2; 6], [4; 6]),
            ips: (
                Ipv4Addr::new(198, 18, 0, 1).into(),
                Ipv4Addr::new(198, 18, 0, 2).into(),
            ),
            port: 7,
            payload_len: 100,
        };
        // The flood's own frame goes to port 7 from 40000: not an echo.
        let mut fr = udp_frame(&f);
        assert!(!is_echo(&fr, 7, 100));
        // Swap the ports as an echo server does.
        fr[34..36].copy_from_slice(&7u16.to_be_bytes());
        fr[36..38].copy_from_slice(&FLOOD_SRC_PORT.to_be_bytes());
        assert!(is_echo(&fr, 7, 100));
        assert!(!is_echo(&fr, 8, 100));
        assert!(!is_echo(&fr, 7, 64));
        assert!(!is_echo(&fr[..30], 7, 100));
    }

    #[test]
    fn ipv6_flood_frames_and_their_echoes() {
        let (src, dst): (IpAddr, IpAddr) = (
            "2001:2:0:1::10".parse().unwrap(),
            "2001:2:0:1::20".parse().unwrap(),
        );
        let f = Flood {
            ns: String::new(),
            ifname: String::new(),
            macs: ([2; 6], [4; 6]),
            ips: (src, dst),
            port: 7,
            payload_len: 100,
        };
        let mut fr = udp_frame(&f);
        assert_eq!(fr.len(), 14 + 40 + 8 + 100);
        assert_eq!(fr[12..14], [0x86, 0xdd]);
        assert_eq!(u16::from_be_bytes([fr[18], fr[19]]), 108, "payload length");
        assert_eq!((fr[20], fr[21]), (17, 64), "next header, hop limit");
        assert_eq!(
            fr[22..38],
            match src {
                IpAddr::V6(a) => a.octets(),
                _ => unreachable!(),
            }
        );
        // The UDP checksum over the IPv6 pseudo-header verifies (RFC 8200 §8.1).
        let udp = &fr[54..];
        let sum = checksum::combine(&[
            checksum::pseudo_header(&src, &dst, IpProtocol::Udp, udp.len() as u32),
            checksum::data(udp),
        ]);
        assert_eq!(sum, 0xffff);
        assert!(!is_echo(&fr, 7, 100));
        fr[54..56].copy_from_slice(&7u16.to_be_bytes());
        fr[56..58].copy_from_slice(&FLOOD_SRC_PORT.to_be_bytes());
        assert!(is_echo(&fr, 7, 100));
        assert!(!is_echo(&fr, 7, 64));
        assert!(!is_echo(&fr[..60], 7, 100));
    }
}
