//! Load from the kernel's side of the testbed, each on its own thread inside a namespace:
//! a UDP generator (connected socket, `sendmmsg` batches), a TCP bulk sender and a
//! kernel TCP receiver. Every loop is bounded in time or bytes.

use std::io::{self, IoSlice, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::net::{sendmmsg, MMsgHdr, SendAncillaryBuffer, SendFlags};
use ulnet::apps::pattern;

use super::io_err;
use crate::cpu::thread_cpu_time;

/// Datagrams per `sendmmsg`.
const UDP_BATCH: usize = 32;
/// The longest any single transfer may take before it counts as failed.
const TRANSFER_LIMIT: Duration = Duration::from_secs(120);

/// What a load thread did.
#[derive(Debug, Clone, Copy)]
pub(super) struct Done {
    /// Datagrams or bytes.
    pub count: u64,
    /// From the first send to the end (for TCP: until the peer's FIN).
    pub elapsed: Duration,
    /// The thread's CPU time over the same span.
    pub cpu: Duration,
}

/// Runs `f` on a new thread inside namespace `ns`, after telling the caller that the
/// namespace was entered and `setup` succeeded (so the caller can start the other side).
fn in_ns<S, T>(
    ns: &str,
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

/// Sends `payload_len`-byte datagrams from `from` to `to` as fast as the kernel takes
/// them, for `duration`.
pub(super) fn udp_flood(
    ns: &str,
    from: IpAddr,
    to: SocketAddr,
    payload_len: usize,
    duration: Duration,
) -> io::Result<JoinHandle<io::Result<Done>>> {
    in_ns(
        ns,
        move || {
            let s = UdpSocket::bind(SocketAddr::new(from, 0))?;
            s.connect(to)?;
            Ok(s)
        },
        move |s| {
            let payload = vec![0x5a; payload_len];
            let iovs: Vec<[IoSlice<'_>; 1]> =
                (0..UDP_BATCH).map(|_| [IoSlice::new(&payload)]).collect();
            let mut controls: Vec<SendAncillaryBuffer<'_, '_, '_>> = (0..UDP_BATCH)
                .map(|_| SendAncillaryBuffer::default())
                .collect();
            let mut msgs: Vec<MMsgHdr<'_>> = iovs
                .iter()
                .zip(controls.iter_mut())
                .map(|(iov, c)| MMsgHdr::new(iov, c))
                .collect();
            let cpu0 = thread_cpu_time();
            let start = Instant::now();
            let mut count = 0u64;
            while start.elapsed() < duration {
                match sendmmsg(&s, &mut msgs, SendFlags::empty()) {
                    Ok(n) => count += n as u64,
                    // The device queue is momentarily full: the datagrams are lost.
                    Err(rustix::io::Errno::NOBUFS | rustix::io::Errno::AGAIN) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(Done {
                count,
                elapsed: start.elapsed(),
                cpu: thread_cpu_time() - cpu0,
            })
        },
    )
}

/// Connects to `to`, sends `bytes` of the pattern, shuts down its sending side and
/// waits for the receiver to close.
pub(super) fn tcp_send(
    ns: &str,
    to: SocketAddr,
    bytes: u64,
) -> io::Result<JoinHandle<io::Result<Done>>> {
    in_ns(
        ns,
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
pub(super) struct Received {
    /// Bytes and timing, as the receiving thread saw them.
    pub done: Done,
    /// Every byte was the pattern at its offset.
    pub pattern_ok: bool,
}

/// A kernel TCP receiver on `at` for one connection: reads everything (checking the
/// pattern, as ulnet's discard service does) and closes at EOF.
pub(super) fn tcp_sink(ns: &str, at: SocketAddr) -> io::Result<JoinHandle<io::Result<Received>>> {
    in_ns(
        ns,
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
