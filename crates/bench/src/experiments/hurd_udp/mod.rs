//! Seed 000, experiment 2: a flood of minimum-size UDP packets, counting what the
//! application receives, and offered-load steps up to the generator's full rate.
//!
//! The seed offered 1,000,000 60-byte frames within 30 s to an in-kernel driver and to
//! a user-level one, and explained the kernel's poor count by receive livelock: a driver
//! that queues frames for later processing spends the CPU taking frames off the card
//! only to drop them at a full queue, while a driver that hands each frame straight to
//! the protocol (run to completion) wastes little. It also mentioned "another
//! implementation" of its user-level driver that queued frames first and performed
//! "extremely bad". Here all three are measured, not claimed:
//!
//! - `kernel`: a kernel UDP socket on A's address, read by one thread on the system-under-
//!   test core with `recvmmsg(2)` (up to 64 datagrams a call, through the channel crate's
//!   fenced `sys::mmsg`) until `EAGAIN`, then sleeping in `poll(2)`.
//! - `ulnet-rtc`: ulnet over AF_XDP through the public socket API (`ulnet::net::UdpSocket`
//!   on ulnet's spare address); the stack thread carries each frame from the ring to the
//!   socket buffer run to completion, and an application thread reads and counts.
//! - `ulnet-queued`: the same, but the channel the stack sees is an adapter: a driver
//!   thread pulls frames from the real AF_XDP channel and pushes copies into a bounded
//!   queue (drops counted when full); the stack's `rx_batch` pops from it. The driver
//!   thread runs on the system-under-test core, so it competes with the stack for the
//!   CPU as the seed's queueing driver did.
//!
//! The generator is an AF_XDP socket on B's veth end, pinned to the load core, paced per
//! batch against the clock (rate 0: as fast as it can), bounded in time and count. It
//! writes 60-byte frames (18 bytes of UDP payload). Offered = what it queued / its run
//! time; delivered = datagrams the application read / the same time. The kernel's own
//! counters verify the path: A's veth `rx_packets` (what arrived), `/proc/net/snmp`
//! `Udp: RcvbufErrors / InErrors` in A (the kernel socket's drops), the AF_XDP ring drops
//! and the queue's drops.
//!
//! CPU figures: machine-wide user/system/softirq time from /proc/stat over the window
//! (on veth the kernel's receive work runs on the sending core, i.e. the generator's),
//! and the system under test's CPU = this process's CPU minus the generator thread's;
//! per packet means per datagram delivered to the application.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use ulnet::channel::sys::mmsg::{RecvBatch, MAX_BATCH};
use ulnet::channel::xdp::{XdpChannel, XdpOptions};
use ulnet::channel::{Capabilities, Channel, Stats, Tx, TxError};
use ulnet::net::{Stack, UdpSocket};
use ulnet::runtime::WaitMode;
use ulnet::stack::iface::IpCidr;
use ulnet::wire::EthernetAddress;

mod channels;

use channels::{Counted, Queued};

use super::load::{self, Done, Flood};
use super::Experiment;
use crate::cpu::thread_cpu_time;
use crate::harness::{io_err, pin, Ctx, Metrics, Plan, Window, SUT_CPU};
use crate::results::{ExperimentResult, Metric, PlotKind, PlotView, SystemKind, TableView, View};
use crate::summary::Summary;
use crate::testbed::{Side, Testbed};

/// The seed's offer: 1,000,000 packets within 30 s.
const SEED_COUNT: u64 = 1_000_000;
/// The seed's window.
const SEED_SECS: f64 = 30.0;
/// UDP payload bytes that make a 60-byte frame (14 + 20 + 8 + 18).
const PAYLOAD: usize = 18;
/// The port the receivers listen on.
const PORT: u16 = 9000;
/// The queued variant's driver thread priority (nice), as an interrupt handler's over
/// the protocol processing.
const DRIVER_NICE: i32 = -20;

/// Frames the queued variant's queue holds (Linux's `netdev_max_backlog` is 1000).
const QUEUE_CAP: usize = 1024;
/// How long the receivers keep reading after the generator stops.
const GRACE: Duration = Duration::from_millis(100);

/// The experiment.
#[derive(Debug)]
pub struct HurdUdp;

/// Offered-load steps in kpps (0: the generator's full rate, unpaced), by profile.
fn steps(plan: &Plan) -> Vec<u64> {
    plan.profile.pick(
        vec![100, 0],
        vec![50, 200, 400, 0],
        vec![50, 100, 200, 350, 500, 0],
        vec![50, 100, 150, 200, 300, 400, 500, 700, 900, 0],
    )
}

/// Seconds of the `seed` case and of each load step.
fn windows(plan: &Plan) -> (f64, f64) {
    plan.profile
        .pick((0.5, 0.3), (1.5, 0.6), (4.0, 0.8), (30.0, 2.0))
}

/// The seed's rate, in packets per second.
fn seed_rate() -> u64 {
    (SEED_COUNT as f64 / SEED_SECS).round() as u64
}

impl Experiment for HurdUdp {
    fn name(&self) -> &'static str {
        "hurd-udp"
    }
    fn seed(&self) -> &'static str {
        "000"
    }
    fn title(&self) -> &'static str {
        "Minimum-size UDP flood: delivered vs offered, kernel vs ulnet run-to-completion vs ulnet with a queueing driver"
    }
    fn estimate(&self, plan: &Plan) -> Duration {
        let (seed, step) = windows(plan);
        let n = steps(plan).len() as f64;
        // Per measurement: generator and channel open/close, grace, counter reads.
        let overhead = 0.45;
        let per_round = 3.0 * (seed + overhead + n * (step + overhead));
        Duration::from_secs_f64(2.0 + per_round * f64::from(plan.rounds))
    }
    fn tools(&self) -> &'static [&'static str] {
        &["ip", "ethtool", "sysctl"]
    }
    fn run(&self, ctx: &mut Ctx<'_>) -> io::Result<()> {
        let tb = Testbed::builder()
            .name_prefix("hudp")
            .build()
            .map_err(io_err)?;
        let r = run_on(ctx, &tb);
        tb.teardown().map_err(io_err)?;
        r
    }
    fn seed_figure(&self) -> &'static str {
        "| seed 000, experiment 2 | in-kernel driver | user-level driver |\n\
         | --- | --- | --- |\n\
         | UDP packets offered (60-byte frames, within 30 s) | 1,000,000 | 1,000,000 |\n\
         | packets received | 46,959 | 68,174 |\n\n\
         Claim: the in-kernel driver queues received packets for the software interrupt and \
         livelocks (CPU spent taking packets off the card only to drop them at a full queue); \
         the user-level driver hands each packet to pfinet directly (run to completion) and \
         wastes little; another user-level implementation that queued packets first had \
         \"extremely bad performance in the case that lots of packets rush in\"."
    }
    fn verdict(&self, r: &ExperimentResult, s: &Summary) -> Vec<String> {
        verdict(r, s)
    }
}

const SYSTEMS: [&str; 3] = ["kernel", "ulnet-rtc", "ulnet-queued"];

fn run_on(ctx: &mut Ctx<'_>, tb: &Testbed) -> io::Result<()> {
    let (a, b) = (tb.a(), tb.b());
    let ulnet_ip = v4(a.spare_ip(0))?;
    let (seed_s, step_s) = windows(ctx.plan);
    let rate = seed_rate();
    let seed_count = (rate as f64 * seed_s).round() as u64;

    ctx.param("frame_bytes", 60);
    ctx.param("udp_payload_bytes", PAYLOAD);
    ctx.param("seed_rate_pps", rate);
    ctx.param("seed_window_s", seed_s);
    ctx.param("seed_count", seed_count);
    ctx.param("step_window_s", step_s);
    ctx.param(
        "steps_kpps",
        steps(ctx.plan)
            .iter()
            .map(|k| {
                if *k == 0 {
                    "full".into()
                } else {
                    k.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
    );
    ctx.param("queue_capacity_frames", QUEUE_CAP);
    ctx.param("grace_ms", GRACE.as_millis());
    ctx.param(
        "generator",
        "AF_XDP socket on B's veth end (copy mode), paced per batch, pinned to the load core",
    );

    let mtu = a.mtu.to_string();
    ctx.system(
        "kernel",
        "kernel UDP socket (recvmmsg, offloads off)",
        SystemKind::Kernel,
        false,
        &[
            (
                "socket",
                format!("UDP on {}:{PORT}, default SO_RCVBUF", a.ip),
            ),
            (
                "read",
                "recvmmsg(2), up to 64 datagrams a call, until EAGAIN, then poll(2)".into(),
            ),
            ("offloads", "off (testbed default)".into()),
            ("mtu", mtu.clone()),
            ("thread", format!("one reader on CPU {SUT_CPU}")),
        ],
    );
    for (id, label, how) in [
        (
            "ulnet-rtc",
            "ulnet, run to completion (UdpSocket)",
            "the stack thread carries each frame from the AF_XDP ring to the socket buffer",
        ),
        (
            "ulnet-queued",
            "ulnet, driver thread + bounded queue (UdpSocket)",
            "a driver thread copies frames from the AF_XDP ring into a bounded queue; the stack thread pops them",
        ),
    ] {
        ctx.system(
            id,
            label,
            SystemKind::Ulnet,
            false,
            &[
                ("channel", "xdp".into()),
                ("api", "ulnet::net::UdpSocket, one application thread reading".into()),
                ("path", how.into()),
                ("wait", "sleep (50 µs yield-spin, then poll(2))".into()),
                ("mtu", mtu.clone()),
                ("address", format!("{ulnet_ip}:{PORT}")),
                ("cpu", format!("stack, driver and application threads on CPU {SUT_CPU}")),
            ],
        );
    }
    ctx.system_setup("ulnet-queued", "queue_capacity", QUEUE_CAP);
    ctx.system_setup(
        "ulnet-queued",
        "driver_priority",
        format!("nice {DRIVER_NICE} (the stack and application at 0): the driver preempts protocol work as an interrupt handler does"),
    );
    ctx.note(
        "The kernel is measured in one setting only (offloads off, the testbed's default): the generator's \
         AF_XDP frames bypass transmit offloads and UDP GRO applies only to sockets that ask for it, so \
         'default offloads' would not change this receiver's path.",
    );
    ctx.note(
        "On veth the kernel's receive work for every frame (including the XDP redirect into ulnet's AF_XDP \
         socket) runs on the sending core, the generator's: the kernel system's protocol work is \
         in machine_softirq_s, not in sut_s.",
    );

    let flood_to = |dst: Ipv4Addr| -> io::Result<Flood> {
        Ok(Flood {
            ns: b.ns.clone(),
            ifname: b.ifname.clone(),
            macs: (b.mac.0, a.mac.0),
            ips: (v4(b.ip)?.into(), dst.into()),
            port: PORT,
            payload_len: PAYLOAD,
        })
    };
    let flood_kernel = flood_to(v4(a.ip)?)?;
    let flood_ulnet = flood_to(ulnet_ip)?;

    let mut cases: Vec<(String, u64, f64)> = vec![("seed".into(), rate, seed_s)];
    ctx.case(
        "seed",
        &format!(
            "seed: {seed_count} packets at {} kpps ({seed_s} s)",
            rate / 1000
        ),
        &[
            ("rate_pps", rate as f64),
            ("count", seed_count as f64),
            ("window_s", seed_s),
        ],
    );
    // The unpaced step's x value: the generator's full rate, measured now for a moment
    // (into ulnet's address with nothing listening yet: the kernel drops each frame).
    ctx.status("measuring the generator's full rate");
    let calib = load::xdp_flood_paced(flood_ulnet.clone(), 0, Duration::from_millis(300), u64::MAX)
        .and_then(|g| join(g, "generator"))?;
    let full_pps = calib.count as f64 / calib.elapsed.as_secs_f64().max(1e-9);
    ctx.param("generator_full_rate_pps", format!("{full_pps:.0}"));
    for k in steps(ctx.plan) {
        let id = if k == 0 {
            "load-full".to_owned()
        } else {
            format!("load-{k}")
        };
        let label = if k == 0 {
            format!(
                "offered: generator's full rate (~{:.0} kpps)",
                full_pps / 1e3
            )
        } else {
            format!("offered: {k} kpps")
        };
        let x = if k == 0 { full_pps } else { (k * 1000) as f64 };
        ctx.case(
            &id,
            &label,
            &[
                ("rate_pps", x),
                ("window_s", step_s),
                ("unpaced", f64::from(k == 0)),
            ],
        );
        cases.push((id, k * 1000, step_s));
    }

    for (case, rate, secs) in &cases {
        let window = Duration::from_secs_f64(*secs);
        // Bounded in count too: at most the rate's share of the window (unpaced: the
        // ring's and the clock's limit).
        let max_count = if *rate == 0 {
            u64::MAX
        } else {
            (*rate as f64 * secs).round() as u64
        };
        let mut modes: Vec<(String, String)> = Vec::new();
        ctx.alternate(case, &SYSTEMS, |sys, _round| {
            let m = match sys {
                "kernel" => measure_kernel(a, flood_kernel.clone(), *rate, window, max_count),
                _ => measure_ulnet(
                    a,
                    ulnet_ip,
                    sys == "ulnet-queued",
                    flood_ulnet.clone(),
                    *rate,
                    window,
                    max_count,
                )
                .map(|(m, mode)| {
                    modes.push((sys.to_owned(), mode));
                    m
                }),
            }?;
            Ok(m)
        });
        for (sys, mode) in modes {
            ctx.system_setup(&sys, "xdp_mode", mode);
        }
    }

    let flow = [
        Metric::plain("offered_pps", "offered (pps)", 0),
        Metric::more("delivered_pps", "delivered (pps)", 0),
        Metric::more("delivered_frac", "delivered / offered", 3),
        Metric::plain("offered", "offered (packets)", 0),
        Metric::more("delivered", "delivered (packets)", 0),
        Metric::plain("veth_a_rx_packets", "arrived at A's veth (packets)", 0),
        Metric::less("socket_drops", "socket drops", 0),
        Metric::less("xdp_ring_drops", "AF_XDP ring drops", 0),
        Metric::less("queue_drops", "queue drops", 0),
        Metric::less("sut_ns_per_pkt", "SUT CPU (ns/packet)", 0),
        Metric::less("machine_ns_per_pkt", "machine CPU (ns/packet)", 0),
    ];
    ctx.view(View::Table(TableView {
        title: format!(
            "The seed's offer: {seed_count} 60-byte UDP packets at {} kpps ({seed_s} s; the seed: 1,000,000 in 30 s)",
            rate / 1000
        ),
        cases: vec!["seed".into()],
        systems: SYSTEMS.iter().map(|s| (*s).to_owned()).collect(),
        metrics: flow.to_vec(),
        baselines: vec!["kernel".into()],
        ratio_metric: Some("delivered_pps".into()),
    }));
    let step_ids: Vec<String> = cases
        .iter()
        .filter(|c| c.0 != "seed")
        .map(|c| c.0.clone())
        .collect();
    ctx.view(View::Plot(PlotView {
        id: "delivered-vs-offered".into(),
        title: "Delivered vs offered, 60-byte UDP (offered rate as set; full = unpaced)".into(),
        kind: PlotKind::Lines,
        cases: cases.iter().map(|c| c.0.clone()).collect(),
        systems: SYSTEMS.iter().map(|s| (*s).to_owned()).collect(),
        x_param: Some("rate_pps".into()),
        x_label: "offered rate set (pps; the last point: the generator unpaced, at its rate measured before the run)".into(),
        y: Metric::more("delivered_pps", "delivered (pps)", 0),
        y2: None,
        x_log: false,
    }));
    ctx.view(View::Table(TableView {
        title: "Offered-load steps".into(),
        cases: step_ids,
        systems: SYSTEMS.iter().map(|s| (*s).to_owned()).collect(),
        metrics: vec![
            Metric::more("delivered_pps", "delivered (pps)", 0),
            Metric::plain("offered_pps", "offered (pps)", 0),
            Metric::more("delivered_frac", "delivered / offered", 3),
            Metric::less("socket_drops", "socket drops", 0),
            Metric::less("xdp_ring_drops", "AF_XDP ring drops", 0),
            Metric::less("queue_drops", "queue drops", 0),
            Metric::less("sut_ns_per_pkt", "SUT CPU (ns/packet)", 0),
        ],
        baselines: vec!["kernel".into()],
        ratio_metric: Some("delivered_pps".into()),
    }));
    Ok(())
}

/// The IPv4 address in `ip`.
pub(super) fn v4(ip: IpAddr) -> io::Result<Ipv4Addr> {
    match ip {
        IpAddr::V4(a) => Ok(a),
        IpAddr::V6(_) => Err(io_err("the testbed is IPv4")),
    }
}

/// Joins a measurement thread, turning a panic into an error.
pub(super) fn join<T>(h: JoinHandle<io::Result<T>>, what: &str) -> io::Result<T> {
    h.join().map_err(|_| io_err(format!("{what} panicked")))?
}

/// A veth end's kernel counters.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Link {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_dropped: u64,
}

/// Reads `side`'s veth counters (`ip -s -j link show`).
pub(super) fn link(ns: &str, ifname: &str) -> io::Result<Link> {
    let out = crate::exec::run("ip", ["-n", ns, "-s", "-j", "link", "show", "dev", ifname])
        .map_err(io_err)?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(io_err)?;
    let s = &v[0]["stats64"];
    let g = |dir: &str, k: &str| s[dir][k].as_u64().unwrap_or(0);
    Ok(Link {
        rx_packets: g("rx", "packets"),
        rx_bytes: g("rx", "bytes"),
        rx_dropped: g("rx", "dropped"),
    })
}

/// The kernel's UDP counters in namespace `ns`: (InDatagrams, InErrors, RcvbufErrors).
pub(super) fn udp_snmp(ns: &str) -> io::Result<(u64, u64, u64)> {
    let out = crate::exec::run_in(ns, "cat", ["/proc/net/snmp"]).map_err(io_err)?;
    parse_udp_snmp(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| io_err("no Udp: lines in /proc/net/snmp"))
}

/// Parses the `Udp:` header and value lines of /proc/net/snmp.
fn parse_udp_snmp(text: &str) -> Option<(u64, u64, u64)> {
    let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
    let head: Vec<&str> = lines.next()?.split_whitespace().collect();
    let vals: Vec<&str> = lines.next()?.split_whitespace().collect();
    let get = |k: &str| -> Option<u64> {
        let i = head.iter().position(|h| *h == k)?;
        vals.get(i)?.parse().ok()
    };
    Some((get("InDatagrams")?, get("InErrors")?, get("RcvbufErrors")?))
}

/// Opens an AF_XDP channel on `ifname` in namespace `ns`, retrying while the previous
/// round's socket on the same queue is still being released (EBUSY).
pub(super) fn open_xdp(ifname: &str, ns: &str, o: &XdpOptions) -> io::Result<XdpChannel> {
    let ebusy = rustix::io::Errno::BUSY.raw_os_error();
    let mut tries = 0;
    loop {
        match XdpChannel::open(ifname, Some(ns), o) {
            Err(e) if e.source.raw_os_error() == Some(ebusy) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(40));
            }
            r => return r.map_err(io_err),
        }
    }
}

/// A kernel UDP receiver thread in namespace `ns` on core `cpu`, bound to `at`,
/// counting datagrams until `stop`: (datagrams, bytes, thread CPU).
pub(super) fn kernel_udp_rx(
    ns: &str,
    cpu: usize,
    at: SocketAddr,
    stop: Arc<AtomicBool>,
) -> io::Result<JoinHandle<io::Result<(u64, u64, Duration)>>> {
    let ns = ns.to_owned();
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || -> io::Result<(u64, u64, Duration)> {
        let ready = (|| {
            pin(cpu)?;
            let guard = ulnet::channel::sys::netns::enter(&ns).map_err(io_err)?;
            let s = std::net::UdpSocket::bind(at)?;
            s.set_nonblocking(true)?;
            Ok::<_, io::Error>((guard, s))
        })();
        let (_guard, s) = match ready {
            Ok(x) => {
                let _ = tx.send(Ok(()));
                x
            }
            Err(e) => {
                let msg = e.to_string();
                let _ = tx.send(Err(e));
                return Err(io_err(msg));
            }
        };
        let cpu0 = thread_cpu_time();
        let mut batch = RecvBatch::new(MAX_BATCH, 2048);
        let (mut n, mut bytes) = (0u64, 0u64);
        let ts = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 10_000_000,
        };
        // Drain with recvmmsg (up to 64 datagrams a call) until the socket is empty, then
        // sleep until it is readable (or 10 ms pass, to see `stop`): the way a batching
        // single-threaded server reads a busy socket.
        while !stop.load(Ordering::Relaxed) {
            let got = batch.recv(s.as_fd()).map_err(io_err)?;
            for i in 0..got {
                n += 1;
                bytes += batch.datagram(i).len() as u64;
            }
            if got == 0 {
                let mut p = [PollFd::new(&s, PollFlags::IN)];
                match rustix::event::poll(&mut p, Some(&ts)) {
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok((n, bytes, thread_cpu_time() - cpu0))
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(())) => Ok(t),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(io_err("kernel receiver did not start")),
    }
}

/// The figures every system reports, from the generator, the application's count and
/// the kernel's counters.
fn flow_metrics(gen: &Done, delivered: u64, before: Link, after: Link) -> Metrics {
    let secs = gen.elapsed.as_secs_f64().max(1e-9);
    let mut m = Metrics::new();
    m.insert("offered".into(), gen.count as f64);
    m.insert("delivered".into(), delivered as f64);
    m.insert("offered_pps".into(), gen.count as f64 / secs);
    m.insert("delivered_pps".into(), delivered as f64 / secs);
    m.insert(
        "delivered_frac".into(),
        delivered as f64 / gen.count.max(1) as f64,
    );
    m.insert(
        "veth_a_rx_packets".into(),
        after.rx_packets.saturating_sub(before.rx_packets) as f64,
    );
    m.insert(
        "veth_a_rx_dropped".into(),
        after.rx_dropped.saturating_sub(before.rx_dropped) as f64,
    );
    m.insert("gen_s".into(), secs);
    m
}

fn measure_kernel(
    a: &Side,
    flood: Flood,
    rate: u64,
    window: Duration,
    max_count: u64,
) -> io::Result<Metrics> {
    let stop = Arc::new(AtomicBool::new(false));
    let rx = kernel_udp_rx(
        &a.ns,
        SUT_CPU,
        SocketAddr::new(a.ip, PORT),
        Arc::clone(&stop),
    )?;
    let before = link(&a.ns, &a.ifname)?;
    let snmp0 = udp_snmp(&a.ns)?;
    let w = Window::start()?;
    let gen =
        load::xdp_flood_paced(flood, rate, window, max_count).and_then(|g| join(g, "generator"));
    std::thread::sleep(GRACE);
    stop.store(true, Ordering::Relaxed);
    let (n, _bytes, _cpu) = join(rx, "kernel receiver")?;
    let gen = gen?;
    let cpu = w.finish(gen.cpu)?;
    let after = link(&a.ns, &a.ifname)?;
    let snmp1 = udp_snmp(&a.ns)?;
    let mut m = flow_metrics(&gen, n, before, after);
    m.insert("udp_in_datagrams".into(), (snmp1.0 - snmp0.0) as f64);
    m.insert("udp_in_errors".into(), (snmp1.1 - snmp0.1) as f64);
    m.insert("udp_rcvbuf_errors".into(), (snmp1.2 - snmp0.2) as f64);
    m.insert("socket_drops".into(), (snmp1.2 - snmp0.2) as f64);
    m.extend(cpu.metrics(None, Some(n)));
    if n == 0 {
        return Err(io_err("the kernel socket received nothing"));
    }
    Ok(m)
}

fn measure_ulnet(
    a: &Side,
    ip: Ipv4Addr,
    queued: bool,
    flood: Flood,
    rate: u64,
    window: Duration,
    max_count: u64,
) -> io::Result<(Metrics, String)> {
    let o = XdpOptions {
        addresses: vec![IpAddr::V4(ip)],
        ..XdpOptions::default()
    };
    let xdp = open_xdp(&a.ifname, &a.ns, &o)?;
    let caps = xdp.capabilities();
    let mode = format!("{} ({})", caps.name, caps.mode);
    let cidr = IpCidr::new(IpAddr::V4(ip), a.prefix_len).ok_or_else(|| io_err("bad prefix"))?;
    let builder = Stack::builder()
        .address_cidr(cidr)
        .mac(EthernetAddress(a.mac.0))
        .wait(WaitMode::Sleep)
        .without_tcp();
    // Built on this thread (pinned to the SUT core), so the stack's and the driver's
    // threads run there too.
    let (stack, probe) = if queued {
        let (ch, probe) = Queued::new(xdp, QUEUE_CAP)?;
        (builder.channel(ch).build()?, probe)
    } else {
        let (ch, probe) = Counted::new(xdp);
        (builder.channel(ch).build()?, probe)
    };
    let sock = UdpSocket::bind(&stack, SocketAddr::new(IpAddr::V4(ip), PORT))?;
    sock.set_read_timeout(Some(Duration::from_millis(10)))?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let app = std::thread::spawn(move || -> io::Result<(u64, UdpSocket)> {
        let mut buf = [0u8; 2048];
        let mut n = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            match sock.recv_from(&mut buf) {
                Ok(_) => n += 1,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok((n, sock))
    });
    let before = link(&a.ns, &a.ifname)?;
    let w = Window::start()?;
    let gen =
        load::xdp_flood_paced(flood, rate, window, max_count).and_then(|g| join(g, "generator"));
    std::thread::sleep(GRACE);
    stop.store(true, Ordering::Relaxed);
    let (n, sock) = join(app, "application")?;
    let gen = gen?;
    let cpu = w.finish(gen.cpu)?;
    let after = link(&a.ns, &a.ifname)?;
    let socket_drops = sock.dropped_count();
    let (xdp_stats, queue_drops) = probe.finish();
    drop(sock);
    stack.stop()?;
    drop(stack);
    let mut m = flow_metrics(&gen, n, before, after);
    m.insert("socket_drops".into(), socket_drops as f64);
    m.insert("xdp_rx_frames".into(), xdp_stats.rx_frames as f64);
    m.insert("xdp_ring_drops".into(), xdp_stats.rx_dropped as f64);
    if queued {
        m.insert("queue_drops".into(), queue_drops as f64);
    }
    m.extend(cpu.metrics(None, Some(n)));
    if n == 0 {
        return Err(io_err("the application received nothing"));
    }
    Ok((m, mode))
}

fn fmt_rate(pps: f64) -> String {
    format!("{:.0} kpps", pps / 1e3)
}

fn verdict(r: &ExperimentResult, s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let get = |case: &str, sys: &str| s.median(case, sys, "delivered_pps");
    match (get("seed", "kernel"), get("seed", "ulnet-rtc")) {
        (Some(k), Some(u)) => out.push(format!(
            "At the seed's load ({}): ulnet run-to-completion delivered {} vs the kernel's {} ({:.2}x), so the seed's claim that the user-level receiver gets at least the in-kernel one's count {}.",
            fmt_rate(s.median("seed", "kernel", "offered_pps").unwrap_or(0.0)),
            fmt_rate(u),
            fmt_rate(k),
            u / k.max(1e-9),
            if u >= k * 0.98 { "holds here" } else { "does not hold here" }
        )),
        _ => out.push("The seed case has no kernel or ulnet-rtc figure (see errors).".into()),
    }
    // Saturation: the unpaced step.
    let full = "load-full";
    if let (Some(k), Some(u)) = (get(full, "kernel"), get(full, "ulnet-rtc")) {
        out.push(format!(
            "At the generator's full rate ({} offered): ulnet-rtc {} vs kernel {} ({:.2}x).",
            fmt_rate(s.median(full, "ulnet-rtc", "offered_pps").unwrap_or(0.0)),
            fmt_rate(u),
            fmt_rate(k),
            u / k.max(1e-9)
        ));
    }
    // Livelock: does the queued variant's delivered rate fall as the offered load rises
    // past its own peak, while rtc's does not?
    let curve = |sys: &str| -> Vec<(f64, f64)> {
        r.cases
            .iter()
            .filter(|c| c.id.starts_with("load-"))
            .filter_map(|c| {
                Some((
                    s.median(&c.id, sys, "offered_pps")?,
                    s.median(&c.id, sys, "delivered_pps")?,
                ))
            })
            .collect()
    };
    let (q, rtc) = (curve("ulnet-queued"), curve("ulnet-rtc"));
    let peak_and_last = |v: &[(f64, f64)]| -> Option<(f64, f64)> {
        let peak = v.iter().map(|p| p.1).fold(f64::NAN, f64::max);
        let last = v.iter().max_by(|a, b| a.0.total_cmp(&b.0))?.1;
        Some((peak, last))
    };
    if let (Some((qp, ql)), Some((rp, rl))) = (peak_and_last(&q), peak_and_last(&rtc)) {
        let q_fall = 1.0 - ql / qp.max(1e-9);
        let r_fall = 1.0 - rl / rp.max(1e-9);
        let shown = q_fall > 0.2 && q_fall > r_fall + 0.1;
        out.push(format!(
            "Livelock: the queued variant peaked at {} and delivered {} at the highest offered load ({:.0}% below its peak; run-to-completion {:.0}% below its peak of {}), so receive livelock of the queueing driver is {} here.",
            fmt_rate(qp),
            fmt_rate(ql),
            q_fall * 100.0,
            r_fall * 100.0,
            fmt_rate(rp),
            if shown { "shown" } else { "not shown" }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snmp_udp_lines() {
        let text = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
                    Udp: 120 3 7 0 5 0 0 0 0\n\
                    UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
                    UdpLite: 0 0 0 0 0 0 0 0 0\n";
        assert_eq!(parse_udp_snmp(text), Some((120, 7, 5)));
    }
}
