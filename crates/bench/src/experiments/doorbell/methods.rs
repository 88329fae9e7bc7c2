//! The seven ways to start a transmission that `doorbell` times, and the round that
//! times each: the frames, the sockets and channels on side A, the receive counter on
//! side B that proves the frames arrived.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketAddrAny, SocketType};
use ulnet::channel::packet::{PacketChannel, PacketOptions};
use ulnet::channel::sys::netns;
use ulnet::channel::tap::{TapChannel, TapOptions};
use ulnet::channel::xdp::{XdpChannel, XdpOptions};
use ulnet::channel::{Channel, TxError};

use super::super::load::{flood_frame, Flood};
use crate::exec;
use crate::harness::{io_err, Metrics, Window};
use crate::testbed::Testbed;

/// The frame every method puts on the wire: Ethernet 14 + IPv4 20 + UDP 8 + 18 bytes.
pub(super) const FRAME_LEN: usize = 60;
/// UDP payload that makes a [`FRAME_LEN`] frame.
const PAYLOAD_LEN: usize = FRAME_LEN - 42;
/// Where the frames go on side B (a bound socket that is never read, so the kernel
/// there drops them quietly instead of answering with ICMP).
pub(super) const PORT: u16 = 9;
/// Frames per doorbell on the ring channels.
pub(super) const BATCH: usize = 64;
/// Slots of the shared-memory ring (a power of two).
pub(super) const SHM_SLOTS: usize = 4096;
/// The TAP device's name inside side A.
const TAP_NAME: &str = "dbtap0";
/// The TAP side's subnet, configured only inside namespace A: A's kernel forwards the
/// frames written to the TAP from .2 to B. In 198.18.0.0/15 (RFC 2544's benchmarking
/// range) but outside every testbed subnet (198.18.1.0/24 ..= 198.19.254.0/24), so it
/// never overlaps the veth's.
const TAP_KERNEL_IP: &str = "198.19.255.1/24";
/// The source address of the frames written to the TAP.
const TAP_PEER_IP: Ipv4Addr = Ipv4Addr::new(198, 19, 255, 2);
/// Source MAC of the frames written to the TAP (locally administered).
const TAP_PEER_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0xdb, 0x00, 0x02];
/// The longest a round's starts may take before it counts as failed.
pub(super) const START_LIMIT: Duration = Duration::from_secs(20);
/// How long after the last start the frames may take to show up at B.
pub(super) const COMPLETE_LIMIT: Duration = Duration::from_secs(2);

/// Side B's `rx_packets` for its veth end, read from `/proc/<tid>/net/dev` opened by a
/// thread inside B (the file keeps the namespace it was opened in).
pub(super) struct RxCounter {
    file: File,
    ifname: String,
    buf: String,
}

impl RxCounter {
    fn open(ns: &str, ifname: &str) -> io::Result<RxCounter> {
        let file =
            netns::run_in(ns, || File::open("/proc/thread-self/net/dev")).map_err(io_err)??;
        let mut c = RxCounter {
            file,
            ifname: ifname.to_owned(),
            buf: String::new(),
        };
        c.read()?;
        Ok(c)
    }

    /// The counter now.
    pub(super) fn read(&mut self) -> io::Result<u64> {
        self.file.seek(SeekFrom::Start(0))?;
        self.buf.clear();
        self.file.read_to_string(&mut self.buf)?;
        rx_packets(&self.buf, &self.ifname)
            .ok_or_else(|| io::Error::other(format!("{} not in net/dev", self.ifname)))
    }

    /// Waits until two reads a millisecond apart agree (frames still in flight from a
    /// warm-up have landed), at most half a second; returns the count.
    fn settle(&mut self) -> io::Result<u64> {
        let t = Instant::now();
        let mut last = self.read()?;
        loop {
            std::thread::sleep(Duration::from_millis(1));
            let now = self.read()?;
            if now == last || t.elapsed() > Duration::from_millis(500) {
                return Ok(now);
            }
            last = now;
        }
    }
}

/// `rx_packets` of `ifname` in the text of `/proc/net/dev`.
pub(super) fn rx_packets(text: &str, ifname: &str) -> Option<u64> {
    text.lines().skip(2).find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        if name.trim() != ifname {
            return None;
        }
        rest.split_whitespace().nth(1)?.parse().ok()
    })
}

/// One way of starting transmissions of the one frame.
trait Starter {
    /// Starts one transmission.
    fn start(&mut self) -> io::Result<()>;
    /// Hands anything still queued to the device (the last partial batch's doorbell).
    fn finish(&mut self) -> io::Result<()>;
    /// Doorbells that needed the kernel so far (system calls), where known.
    fn kicks(&self) -> u64;
}

/// A kernel UDP socket, connected: `send()` is `sendto()` with no address.
struct UdpStarter<'a> {
    sock: &'a UdpSocket,
    payload: [u8; PAYLOAD_LEN],
    calls: u64,
}

impl Starter for UdpStarter<'_> {
    fn start(&mut self) -> io::Result<()> {
        self.sock.send(&self.payload)?;
        self.calls += 1;
        Ok(())
    }
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn kicks(&self) -> u64 {
        self.calls
    }
}

/// `sendto()` of the whole frame on an AF_PACKET SOCK_RAW socket.
struct PacketSendStarter<'a> {
    fd: &'a OwnedFd,
    addr: &'a SocketAddrAny,
    frame: &'a [u8],
    calls: u64,
    retries: u64,
}

impl Starter for PacketSendStarter<'_> {
    fn start(&mut self) -> io::Result<()> {
        loop {
            self.calls += 1;
            match rustix::net::sendto(self.fd, self.frame, SendFlags::empty(), self.addr) {
                Ok(_) => return Ok(()),
                // The device queue is busy: the start is retried (and its time counts).
                Err(e) if e == rustix::io::Errno::NOBUFS || e == rustix::io::Errno::AGAIN => {
                    self.retries += 1;
                    if self.retries > 1_000_000 {
                        return Err(io::Error::other("AF_PACKET sendto: ENOBUFS for too long"));
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn kicks(&self) -> u64 {
        self.calls
    }
}

/// A ulnet channel's transmit ring: each start queues one frame in place, every
/// [`BATCH`] starts ring the doorbell once (`Tx::flush`, which makes a system call only
/// when the channel decides the kernel needs one). A full ring is flushed and retried.
struct RingStarter<'a, C: Channel> {
    ch: &'a mut C,
    frame: &'a [u8],
    pending: usize,
    batch: usize,
    full: u64,
    deadline: Instant,
}

impl<C: Channel> Starter for RingStarter<'_, C> {
    fn start(&mut self) -> io::Result<()> {
        let frame = self.frame;
        loop {
            match self
                .ch
                .tx()
                .send(frame.len(), &mut |b| b.copy_from_slice(frame))
            {
                Ok(()) => break,
                Err(TxError::Full) => {
                    // The ring drains only as fast as the kernel takes it: ring again.
                    self.full += 1;
                    self.ch.tx().flush().map_err(io_err)?;
                    if self.full.is_multiple_of(1024) && Instant::now() > self.deadline {
                        return Err(io::Error::other("transmit ring stayed full"));
                    }
                }
                Err(e) => return Err(io_err(e)),
            }
        }
        self.pending += 1;
        if self.pending == self.batch {
            self.pending = 0;
            self.ch.tx().flush().map_err(io_err)?;
        }
        Ok(())
    }
    fn finish(&mut self) -> io::Result<()> {
        self.pending = 0;
        self.ch.tx().flush().map_err(io_err)
    }
    fn kicks(&self) -> u64 {
        self.ch.stats().kicks
    }
}

/// Everything the methods need on side A, set up once.
pub(super) struct Env {
    a_ns: String,
    a_if: String,
    counter: RxCounter,
    /// Frame from A to B (AF_PACKET, rings).
    frame: Vec<u8>,
    /// Frame from the TAP's peer through A's kernel to B.
    tap_frame: Vec<u8>,
    udp: UdpSocket,
    packet_fd: OwnedFd,
    packet_addr: SocketAddrAny,
    tap: TapChannel,
    /// B's sink socket: kept open so B's kernel drops rather than answers.
    _sink: UdpSocket,
    /// The channels' modes, found once they are open.
    pub(super) xdp_mode: Option<String>,
    /// The packet channel's mode.
    pub(super) packet_mode: Option<String>,
}

fn v4(ip: IpAddr) -> io::Result<Ipv4Addr> {
    match ip {
        IpAddr::V4(v) => Ok(v),
        IpAddr::V6(_) => Err(io::Error::other("the testbed is IPv4")),
    }
}

impl Env {
    /// Sets up side A's sockets and TAP, side B's sink and counter.
    pub(super) fn new(tb: &Testbed) -> io::Result<Env> {
        let (a, b) = (tb.a(), tb.b());
        let (a_ip, b_ip) = (v4(a.ip)?, v4(b.ip)?);
        // Static neighbours: no ARP on the wire, so B's counter counts only our frames.
        a.set_neighbor(b.ip, b.mac).map_err(io_err)?;
        b.set_neighbor(a.ip, a.mac).map_err(io_err)?;
        let sink = netns::run_in(&b.ns, || UdpSocket::bind((b_ip, PORT))).map_err(io_err)??;
        let counter = RxCounter::open(&b.ns, &b.ifname)?;
        let udp = netns::run_in(&a.ns, || -> io::Result<UdpSocket> {
            let s = UdpSocket::bind((a_ip, 0))?;
            s.connect((b_ip, PORT))?;
            s.set_write_timeout(Some(Duration::from_secs(1)))?;
            Ok(s)
        })
        .map_err(io_err)??;
        let (packet_fd, packet_addr) = packet_socket(&a.ns, &udp)?;
        let frame = flood_frame(&Flood {
            ns: a.ns.clone(),
            ifname: a.ifname.clone(),
            macs: (a.mac.octets(), b.mac.octets()),
            ips: (a_ip.into(), b_ip.into()),
            port: PORT,
            payload_len: PAYLOAD_LEN,
        });
        let (tap, tap_mac) = open_tap(&a.ns)?;
        let tap_frame = flood_frame(&Flood {
            ns: a.ns.clone(),
            ifname: TAP_NAME.into(),
            macs: (TAP_PEER_MAC, tap_mac),
            ips: (TAP_PEER_IP.into(), b_ip.into()),
            port: PORT,
            payload_len: PAYLOAD_LEN,
        });
        debug_assert_eq!(frame.len(), FRAME_LEN);
        Ok(Env {
            a_ns: a.ns.clone(),
            a_if: a.ifname.clone(),
            counter,
            frame,
            tap_frame,
            udp,
            packet_fd,
            packet_addr,
            tap,
            _sink: sink,
            xdp_mode: None,
            packet_mode: None,
        })
    }

    /// One round of `system` over `ops` starts (after `warm` untimed ones).
    pub(super) fn measure(&mut self, system: &str, ops: u64, warm: u64) -> io::Result<Metrics> {
        match system {
            "syscall" => syscall_round(ops, warm),
            "udp-sendto" => {
                let mut s = UdpStarter {
                    sock: &self.udp,
                    payload: [0x5a; PAYLOAD_LEN],
                    calls: 0,
                };
                veth_round(&mut self.counter, &mut s, ops, warm, false)
            }
            "packet-sendto" => {
                let mut s = PacketSendStarter {
                    fd: &self.packet_fd,
                    addr: &self.packet_addr,
                    frame: &self.frame,
                    calls: 0,
                    retries: 0,
                };
                let mut m = veth_round(&mut self.counter, &mut s, ops, warm, false)?;
                m.insert("busy_retries".into(), s.retries as f64);
                Ok(m)
            }
            "tap-write" => {
                let frame = self.tap_frame.clone();
                let mut s = RingStarter {
                    ch: &mut self.tap,
                    frame: &frame,
                    pending: 0,
                    // One write() per start: the TAP device takes one frame per call.
                    batch: 1,
                    full: 0,
                    deadline: Instant::now() + START_LIMIT,
                };
                veth_round(&mut self.counter, &mut s, ops, warm, false)
            }
            "packet-ring" => {
                let mut ch =
                    PacketChannel::open(&self.a_if, Some(&self.a_ns), &PacketOptions::default())
                        .map_err(io_err)?;
                self.packet_mode = Some(ch.capabilities().mode);
                ring_round(&mut self.counter, &mut ch, &self.frame, ops, warm)
            }
            "xdp-ring" => {
                let mut ch = open_xdp(&self.a_ns, &self.a_if)?;
                let caps = ch.capabilities();
                self.xdp_mode = Some(format!(
                    "{} ({} XDP, {})",
                    caps.mode,
                    if ch.is_native() { "native" } else { "generic" },
                    if ch.is_zero_copy() {
                        "zero-copy"
                    } else {
                        "copy"
                    }
                ));
                ring_round(&mut self.counter, &mut ch, &self.frame, ops, warm)
            }
            "shm-ring" => super::shm::shm_round(ops, warm),
            other => Err(io::Error::other(format!("unknown method {other}"))),
        }
    }
}

/// An AF_PACKET SOCK_RAW socket in namespace `ns` that receives nothing (protocol 0),
/// and the link-level address to `sendto()` A's veth end with. rustix builds no
/// `sockaddr_ll` and the crate has no unsafe code, so the address is taken from a frame
/// a temporary `ETH_P_ALL` socket sees leave on that interface (one datagram from the
/// kernel UDP socket): `recvfrom` hands it out as a ready `SocketAddrAny`.
fn packet_socket(ns: &str, udp: &UdpSocket) -> io::Result<(OwnedFd, SocketAddrAny)> {
    netns::run_in(ns, || -> io::Result<(OwnedFd, SocketAddrAny)> {
        let fd = rustix::net::socket(AddressFamily::PACKET, SocketType::RAW, None)?;
        let spy = rustix::net::socket(
            AddressFamily::PACKET,
            SocketType::RAW,
            Some(rustix::net::eth::ALL),
        )?;
        udp.send(&[0u8; PAYLOAD_LEN])?;
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut buf = [0u8; 2048];
        while Instant::now() < deadline {
            match rustix::net::recvfrom(&spy, &mut buf[..], RecvFlags::DONTWAIT) {
                Ok((_, _, Some(addr))) => return Ok((fd, addr)),
                Ok(_) => {}
                Err(e) if e == rustix::io::Errno::AGAIN => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(io::Error::other(
            "no frame seen on side A to take the link address from",
        ))
    })
    .map_err(io_err)?
}

/// Opens the TAP device in `ns`, gives it an address and turns on forwarding in `ns`
/// (so frames written to it reach B through A's kernel); returns it with its MAC.
fn open_tap(ns: &str) -> io::Result<(TapChannel, [u8; 6])> {
    let tap = TapChannel::open(TAP_NAME, Some(ns), &TapOptions::default()).map_err(io_err)?;
    let key = format!("net.ipv6.conf.{TAP_NAME}.disable_ipv6=1");
    exec::run_in(ns, "sysctl", ["-q", "-w", &key]).map_err(io_err)?;
    exec::run_in(ns, "sysctl", ["-q", "-w", "net.ipv4.ip_forward=1"]).map_err(io_err)?;
    exec::run(
        "ip",
        ["-n", ns, "addr", "add", TAP_KERNEL_IP, "dev", TAP_NAME],
    )
    .map_err(io_err)?;
    let out =
        exec::run("ip", ["-n", ns, "-br", "link", "show", "dev", TAP_NAME]).map_err(io_err)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mac = text
        .split_whitespace()
        .nth(2)
        .and_then(|m| m.parse::<crate::MacAddr>().ok())
        .ok_or_else(|| io::Error::other(format!("no MAC for {TAP_NAME} in {text:?}")))?;
    Ok((tap, mac.octets()))
}

/// Opens ulnet's AF_XDP channel on A's veth end (nothing steered to it: it only
/// transmits), retrying while the previous round's socket is still being released.
fn open_xdp(ns: &str, ifname: &str) -> io::Result<XdpChannel> {
    let o = XdpOptions::default();
    let mut tries = 0;
    loop {
        match XdpChannel::open(ifname, Some(ns), &o) {
            Err(e)
                if e.source.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error())
                    && tries < 50 =>
            {
                tries += 1;
                std::thread::sleep(Duration::from_millis(40));
            }
            r => return r.map_err(io_err),
        }
    }
}

/// The unit: an empty system call (getppid(2): glibc and rustix both enter the kernel
/// for it; there is no vDSO version).
fn syscall_round(ops: u64, warm: u64) -> io::Result<Metrics> {
    let mut acc = 0i64;
    for _ in 0..warm {
        acc = acc.wrapping_add(
            rustix::process::getppid().map_or(0, |p| i64::from(p.as_raw_nonzero().get())),
        );
    }
    let w = Window::start()?;
    let t0 = Instant::now();
    for _ in 0..ops {
        acc = acc.wrapping_add(
            rustix::process::getppid().map_or(0, |p| i64::from(p.as_raw_nonzero().get())),
        );
    }
    let t = t0.elapsed();
    let cpu = w.finish(Duration::ZERO)?;
    std::hint::black_box(acc);
    let mut m = cpu.metrics(None, Some(ops));
    m.insert("ops".into(), ops as f64);
    m.insert("ns_per_start".into(), t.as_nanos() as f64 / ops as f64);
    m.insert("kicks".into(), ops as f64);
    Ok(m)
}

/// The figures every method reports for `ops` starts: time per start (to the last start
/// call returning) and per completion (to the last arrival), arrivals and kicks, and the
/// window's CPU per start.
pub(super) fn start_metrics(
    cpu: &crate::harness::CpuUse,
    ops: u64,
    t_start: Duration,
    t_complete: Duration,
    arrived: u64,
    kicks: u64,
) -> Metrics {
    let n = ops as f64;
    let mut m = cpu.metrics(None, Some(ops));
    m.insert("ops".into(), n);
    m.insert("ns_per_start".into(), t_start.as_nanos() as f64 / n);
    m.insert("ns_per_complete".into(), t_complete.as_nanos() as f64 / n);
    m.insert("arrived".into(), arrived as f64);
    m.insert("arrived_fraction".into(), arrived as f64 / n);
    m.insert("kicks".into(), kicks as f64);
    m.insert("kicks_per_start".into(), kicks as f64 / n);
    m
}

/// Starts `ops` frames on a channel's transmit ring, one kick per batch.
fn ring_round<C: Channel>(
    counter: &mut RxCounter,
    ch: &mut C,
    frame: &[u8],
    ops: u64,
    warm: u64,
) -> io::Result<Metrics> {
    let mut s = RingStarter {
        ch,
        frame,
        pending: 0,
        batch: BATCH,
        full: 0,
        deadline: Instant::now() + START_LIMIT,
    };
    let mut m = veth_round(counter, &mut s, ops, warm, true)?;
    m.insert("ring_full_retries".into(), s.full as f64);
    Ok(m)
}

/// Times `ops` starts of `s`: from the first start to the last start call returning
/// (the ring methods' last partial batch rung), then until B's counter shows them all
/// (re-ringing meanwhile, as a ring whose kick met a busy device needs).
fn veth_round(
    counter: &mut RxCounter,
    s: &mut dyn Starter,
    ops: u64,
    warm: u64,
    ring: bool,
) -> io::Result<Metrics> {
    for _ in 0..warm {
        s.start()?;
    }
    s.finish()?;
    let base = counter.settle()?;
    let kicks0 = s.kicks();
    let w = Window::start()?;
    let t0 = Instant::now();
    for _ in 0..ops {
        s.start()?;
    }
    s.finish()?;
    let t_start = t0.elapsed();
    let mut arrived = counter.read()?.saturating_sub(base);
    while arrived < ops && t0.elapsed() < t_start + COMPLETE_LIMIT {
        if ring {
            s.finish()?;
        }
        arrived = counter.read()?.saturating_sub(base);
    }
    let t_complete = t0.elapsed();
    let cpu = w.finish(Duration::ZERO)?;
    let kicks = s.kicks() - kicks0;
    Ok(start_metrics(
        &cpu, ops, t_start, t_complete, arrived, kicks,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_net_dev() {
        let text = "Inter-|   Receive                            |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n ul12b: 6000000  100000    0    0    0     0          0         0      180       3    0    0    0     0       0          0\n";
        assert_eq!(rx_packets(text, "ul12b"), Some(100_000));
        assert_eq!(rx_packets(text, "lo"), Some(0));
        assert_eq!(rx_packets(text, "ul12"), None);
    }
}
