//! Load from the peer's side of the testbed, each on its own thread: a UDP flood from an
//! AF_XDP socket, a kernel TCP bulk sender and a kernel TCP receiver (both inside a
//! namespace). Every loop is bounded in time or bytes.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ulnet::apps::pattern;
use ulnet::channel::xdp::{XdpChannel, XdpOptions};
use ulnet::channel::Channel as _;
use ulnet::wire::checksum;
use ulnet::wire::IpProtocol;

use crate::cpu::thread_cpu_time;
use crate::harness::{io_err, pin, LOAD_CPU, SUT_CPU};

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

/// Runs `f` on a new thread pinned to `cpu` inside namespace `ns`, after telling the caller that the
/// namespace was entered and `setup` succeeded (so the caller can start the other side).
fn in_ns<S, T>(
    ns: &str,
    cpu: usize,
    setup: impl FnOnce() -> io::Result<S> + Send + 'static,
    f: impl FnOnce(S) -> io::Result<T> + Send + 'static,
) -> io::Result<JoinHandle<io::Result<T>>>
where
    T: Send + 'static,
{
    let ns = ns.to_owned();
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let ready = (|| {
            pin(cpu)?;
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
        Err(_) => Err(io::Error::other("load thread did not start")),
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
    /// Source and destination IPv4 address.
    pub ips: (Ipv4Addr, Ipv4Addr),
    /// Destination UDP port.
    pub port: u16,
    /// UDP payload bytes.
    pub payload_len: usize,
}

/// `EBUSY` (rustix spells it without libc).
fn libc_ebusy() -> i32 {
    rustix::io::Errno::BUSY.raw_os_error()
}

/// One Ethernet/IPv4/UDP frame of the flood, checksums filled in.
fn udp_frame(f: &Flood) -> Vec<u8> {
    let udp_len = 8 + f.payload_len;
    let ip_len = 20 + udp_len;
    let mut b = Vec::with_capacity(14 + ip_len);
    b.extend_from_slice(&f.macs.1);
    b.extend_from_slice(&f.macs.0);
    b.extend_from_slice(&0x0800u16.to_be_bytes());
    let ip_start = b.len();
    b.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    b[ip_start + 2..ip_start + 4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    b.extend_from_slice(&f.ips.0.octets());
    b.extend_from_slice(&f.ips.1.octets());
    let ip_sum = !checksum::data(&b[ip_start..]);
    b[ip_start + 10..ip_start + 12].copy_from_slice(&ip_sum.to_be_bytes());
    let udp_start = b.len();
    b.extend_from_slice(&40_000u16.to_be_bytes());
    b.extend_from_slice(&f.port.to_be_bytes());
    b.extend_from_slice(&(udp_len as u16).to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b.resize(udp_start + udp_len, 0x5a);
    let sum = checksum::combine(&[
        checksum::pseudo_header(
            &IpAddr::V4(f.ips.0),
            &IpAddr::V4(f.ips.1),
            IpProtocol::Udp,
            udp_len as u32,
        ),
        checksum::data(&b[udp_start..]),
    ]);
    // RFC 768: a computed zero is sent as all ones.
    let sum = match !sum {
        0 => 0xffff,
        s => s,
    };
    b[udp_start + 6..udp_start + 8].copy_from_slice(&sum.to_be_bytes());
    b
}

/// Floods `f` for `duration` from an AF_XDP socket on the generator's interface (about
/// 1 Mpps of transmit here, several times a kernel UDP socket, so the receiver rather
/// than the generator is what saturates). Whatever comes back to the generator's address
/// (the echoes) is steered to the same socket and dropped there, unread by the kernel.
pub(crate) fn xdp_flood(f: Flood, duration: Duration) -> io::Result<JoinHandle<io::Result<Done>>> {
    let mut o = XdpOptions::new(&f.ifname);
    o.netns = Some(f.ns.clone());
    o.addresses = vec![IpAddr::V4(f.ips.0)];
    // The previous round's socket on this queue may still be releasing (see
    // `open_runtime`).
    let mut tries = 0;
    let mut ch = loop {
        match XdpChannel::open(&o) {
            Err(e) if e.source.raw_os_error() == Some(libc_ebusy()) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(40));
            }
            r => break r.map_err(io_err)?,
        }
    };
    let frame = udp_frame(&f);
    Ok(std::thread::spawn(move || {
        pin(LOAD_CPU)?;
        let cpu0 = thread_cpu_time();
        let start = Instant::now();
        let mut count = 0u64;
        while start.elapsed() < duration {
            for _ in 0..FLOOD_BATCH {
                let tx = ch.tx();
                if tx
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
        Ok(Done {
            count,
            elapsed: start.elapsed(),
            cpu: thread_cpu_time() - cpu0,
        })
    }))
}

/// Connects to `to`, sends `bytes` of the pattern, shuts down its sending side and
/// waits for the receiver to close.
pub(crate) fn tcp_send(
    ns: &str,
    to: SocketAddr,
    bytes: u64,
) -> io::Result<JoinHandle<io::Result<Done>>> {
    in_ns(
        ns,
        LOAD_CPU,
        move || {
            let s = TcpStream::connect_timeout(&to, Duration::from_secs(5))?;
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

/// What the kernel receiver got.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received {
    /// Bytes and timing, as the receiving thread saw them.
    pub done: Done,
    /// Every byte was the pattern at its offset.
    pub pattern_ok: bool,
}

/// A kernel TCP receiver on `at` for one connection: reads everything (checking the
/// pattern, as ulnet's discard service does) and closes at EOF.
pub(crate) fn tcp_sink(ns: &str, at: SocketAddr) -> io::Result<JoinHandle<io::Result<Received>>> {
    in_ns(
        ns,
        SUT_CPU,
        move || TcpListener::bind(at),
        move |l| {
            let (mut s, _) = l.accept()?;
            s.set_read_timeout(Some(TRANSFER_LIMIT))?;
            let mut buf = vec![0u8; 64 * 1024];
            let cpu0 = thread_cpu_time();
            let start = Instant::now();
            let (mut off, mut ok) = (0u64, true);
            loop {
                let n = s.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                ok &= pattern::matches(off, &buf[..n]);
                off += n as u64;
            }
            Ok(Received {
                done: Done {
                    count: off,
                    elapsed: start.elapsed(),
                    cpu: thread_cpu_time() - cpu0,
                },
                pattern_ok: ok,
            })
        },
    )
}
