//! Seed 004 (netchannels and a userspace network stack, 2006): CPU at a fixed TCP rate.
//!
//! What is measured: one TCP connection carrying 100 Mb/s of payload in 128-byte (and
//! 4 KiB) application writes, in each direction, and what that costs in CPU. The system
//! under test (SUT) sits in namespace A on the SUT core; its peer is a kernel socket in
//! namespace B on a thread pinned to the load core. For `send-*` the SUT writes, paced
//! against the clock (every millisecond it writes what is due, so the load is the
//! seed's "same 100 Mbit speed"), and the peer reads and discards. For `recv-*` the
//! peer writes the same paced small writes with TCP_NODELAY (so the SUT really receives
//! small segments) and the SUT reads whatever is there into a 64 KiB buffer.
//!
//! The systems: the kernel (non-blocking socket, `epoll_wait` + `send`/`recv`, sleeping
//! in `epoll_wait` between slices, as the seed's socket test did), ulnet over AF_XDP with
//! the loop sleeping when idle (`WaitMode::Sleep`, blocking `ulnet::net::TcpStream`
//! reads and writes, the thread sleeping between slices), and ulnet busy-polling (one
//! core spinning by design; reported apart); with `--backend packet`, ulnet over
//! AF_PACKET sleeping as well (`ulnet-packet-sleep`: its receive blocks are handed over
//! when full or after 1 ms, so at this rate the loop wakes about once a millisecond).
//! TCP_NODELAY is set on the SUT's socket in every system for the 128-byte cases (so
//! each write may leave as its own segment, as in the seed), and left off for 4 KiB.
//! Beside them in the 128-byte cases, the channel's floor (`xdp-floor`): the same bytes
//! on the same schedule, each millisecond's as UDP datagrams of a full frame, through a
//! bare AF_XDP channel on the SUT core: receiving, B's kernel sends them and the channel
//! only counts frames, sleeping 1 ms whenever its ring is empty ([`floor_round`]);
//! sending, the channel sends prebuilt frames, one flush a burst, and a kernel socket in
//! B counts them ([`floor_send_round`]). No stack, no ACKs, and no more frames or
//! wake-ups than any TCP stream of those bytes needs, so its SUT core time is below what
//! any stack on this channel can reach.
//!
//! Two hosts on one machine: on veth the kernel runs a frame's receive processing on
//! the *sending* core, inside the sender's system call, so without help each end's
//! receive work (the kernel SUT's TCP input, ulnet's channel copying frames into its
//! UMEM, the peer's TCP input of the SUT's ACKs or data) would be charged to the other
//! end. The testbed therefore steers each end's receive processing to its own core with
//! RPS (A's to the SUT core, B's to the load core: [`crate::testbed::Builder::rps_cpu`]),
//! and ulnet's XDP program runs in generic mode, inside that same steered receive path;
//! veth's native XDP runs in veth's NAPI on the sending core, where RPS cannot reach it
//! (pinning it with threaded NAPI adds a kernel thread's wake-up per handful of frames:
//! measured 15,000 a second, SUT core 0.17-0.18 cores against generic's 0.12-0.13).
//!
//! CPU figures: `sut_core_cores` is the SUT core's busy time over the window (the window
//! minus that CPU's idle time from cpuidle or, without a cpuidle driver, from the
//! tickless kernel's accounting, both kept exactly at every idle entry and exit:
//! [`crate::cpu::idle_per_cpu`]), so it counts everything that ran there: the SUT's
//! threads, its system calls, and its receive processing in softirq, also while the core
//! was otherwise idle; it is
//! the figure the verdict and the goal use. `sut_cores` is this process's CPU over the
//! window minus the peer thread's own CPU (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)` on
//! that thread): the SUT's threads and the kernel work done in their system calls,
//! without softirq work that ran while they slept. `cpus_busy_cores` is the same busy
//! time summed over both cores, the machine-wide figure. `tasks_cores` (every process's
//! precise run time, from each `/proc/<pid>/stat`) misses softirq work on an otherwise
//! idle CPU (0.22 cores of the kernel SUT's before the steering, measured);
//! `machine_busy_cores` (user + sys + softirq from /proc/stat) is shown beside them, but
//! this kernel samples it at the timer tick and misses most of a loop paced every 1 ms.
//! Without either source the verdict falls back to `sut_cores` and `tasks_cores`.
//! Segment counts come from the peer namespace's `/proc/net/snmp` (Tcp InSegs/OutSegs),
//! the same counter for every system since the peer is always the kernel;
//! `sut_core_ns_per_pkt` is the SUT core's busy time per segment the peer sent (a receive
//! case) or received (a send case), nearly all of them data. The peer cuts the same writes
//! into more or fewer segments depending on the system it talks to (its autocorking and
//! TCP Small Queues wait for its earlier frames to be consumed), so the per-segment
//! figure separates what each system costs per frame from how many frames it was given.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::epoll;
use rustix::net::{RecvFlags, SendFlags};
use ulnet::channel::xdp::{XdpMode, XdpOptions};
use ulnet::channel::Channel as _;
use ulnet::net::Stack;
use ulnet::runtime::{Backend, WaitMode};
use ulnet::stack::iface::IpCidr;
use ulnet::wire::EthernetAddress;

use super::Experiment;
use crate::cpu::thread_cpu_time;
use crate::harness::{
    io_err, online_cpus, CpuUse, Ctx, Metrics, Plan, Profile, Window, LOAD_CPU, SUT_CPU,
};
use crate::results::{ExperimentResult, Metric, PlotKind, PlotView, SystemKind, TableView, View};
use crate::summary::Summary;
use crate::testbed::{Side, SideId, Testbed};

/// The offered payload rate.
const RATE_BPS: f64 = 100e6;
/// The pacing slice: every slice, write what is due.
const SLICE: Duration = Duration::from_millis(1);
/// The longest any single socket operation may block before the round fails.
const OP_TIMEOUT: Duration = Duration::from_secs(5);
/// The TCP port of the first connection (each measurement takes the next).
const BASE_PORT: u16 = 20_000;

/// `netchannel-cpu`.
pub struct NetchannelCpu;

/// One direction and write size.
struct CaseDef {
    id: &'static str,
    label: &'static str,
    size: usize,
    send: bool,
}

static CASES: [CaseDef; 4] = [
    CaseDef {
        id: "send-128",
        label: "send, 128 B writes",
        size: 128,
        send: true,
    },
    CaseDef {
        id: "recv-128",
        label: "receive, 128 B writes",
        size: 128,
        send: false,
    },
    CaseDef {
        id: "send-4096",
        label: "send, 4 KiB writes",
        size: 4096,
        send: true,
    },
    CaseDef {
        id: "recv-4096",
        label: "receive, 4 KiB writes",
        size: 4096,
        send: false,
    },
];

const KERNEL: &str = "kernel-epoll";
const ULNET_SLEEP: &str = "ulnet-sleep";
const ULNET_BUSY: &str = "ulnet-busy";
const ULNET_PACKET_SLEEP: &str = "ulnet-packet-sleep";
/// The channel's floor for the 128-byte receive case: a bare AF_XDP channel, no stack,
/// taking in the same paced bytes as full-frame UDP datagrams ([`floor_round`];
/// [`floor_fits`]).
const CHANNEL_FLOOR: &str = "xdp-floor";

/// The systems of a run, in alternation order: the kernel, ulnet over AF_XDP sleeping
/// and busy-polling (the default backend), ulnet over AF_PACKET sleeping when `--backend
/// packet` names it.
fn systems(plan: &Plan) -> Vec<&'static str> {
    let backends = if plan.backends.is_empty() {
        vec![Backend::Xdp]
    } else {
        plan.backends_or(&[Backend::Xdp, Backend::Packet])
    };
    let mut v = vec![KERNEL];
    if backends.contains(&Backend::Xdp) {
        v.extend([ULNET_SLEEP, ULNET_BUSY, CHANNEL_FLOOR]);
    }
    if backends.contains(&Backend::Packet) {
        v.push(ULNET_PACKET_SLEEP);
    }
    v
}

/// Cases, window and per-measurement overhead for a profile.
fn sizes(p: Profile) -> (usize, Duration) {
    // The budget (90 s default) does not fit 5 s windows for 4 cases x 3 systems x 3
    // rounds; smoke and quick keep the 128-byte cases, the seed's own.
    p.pick(
        (2, Duration::from_millis(250)),
        (2, Duration::from_millis(700)),
        (4, Duration::from_millis(1800)),
        (4, Duration::from_secs(5)),
    )
}

/// Setup time of one measurement beyond its window (stack open, connect, close).
const OVERHEAD: Duration = Duration::from_millis(350);

impl Experiment for NetchannelCpu {
    fn name(&self) -> &'static str {
        "netchannel-cpu"
    }
    fn seed(&self) -> &'static str {
        "004"
    }
    fn title(&self) -> &'static str {
        "CPU of TCP at a fixed 100 Mb/s with small writes: ulnet (AF_XDP) vs kernel epoll sockets"
    }
    fn estimate(&self, plan: &Plan) -> Duration {
        let (cases, window) = sizes(plan.profile);
        let n = cases as u32 * systems(plan).len() as u32 * plan.rounds;
        (window + OVERHEAD) * n + Duration::from_secs(1)
    }
    fn tools(&self) -> &'static [&'static str] {
        &["ip", "ethtool"]
    }
    fn run(&self, ctx: &mut Ctx<'_>) -> io::Result<()> {
        let (ncases, window) = sizes(ctx.profile());
        let mut tb = Testbed::builder().name_prefix("ncpu");
        // Steering needs the two cores (a one-CPU machine runs both ends on its one).
        if online_cpus() > SUT_CPU && online_cpus() > LOAD_CPU {
            tb = tb.rps_cpu(SideId::A, SUT_CPU).rps_cpu(SideId::B, LOAD_CPU);
        } else {
            ctx.note("One CPU online: both ends and their receive processing share it, so the SUT figures count the peer's work too.");
        }
        let tb = tb.build().map_err(io_err)?;
        let r = run_on(ctx, &tb, ncases, window);
        tb.teardown().map_err(io_err)?;
        r
    }
    fn seed_figure(&self) -> &'static str {
        "| setup (seed 004, 2006) | claim |\n| --- | --- |\n\
         | Xeon 2.4 GHz HT, e100 NIC, Linux 2.6.17-rc3; socket test = epoll + send/recv | \
         \"With the same 100 Mbit speed, CPU usage for netchannels and userspace network stack \
         is about 2-3 times smaller than socket one with small packet (128 bytes) \
         sending/receiving\" |\n\n\
         The seed gives no table, only that sentence and a speed/CPU graph of the socket code."
    }
    fn verdict(&self, _r: &ExperimentResult, s: &Summary) -> Vec<String> {
        let mut out = Vec::new();
        // (case, SUT ratio, machine ratio) of the 128-byte cases measured.
        let mut small = Vec::new();
        for (c, a, b) in cpu_ratios(s) {
            // Per segment as well: the peer cuts the same writes into a different
            // number of segments against each system (its autocorking and TCP Small
            // Queues follow how soon its frames are consumed), and most of the SUT
            // core's work is per segment.
            let per_seg = |sys| s.median(c.id, sys, "sut_core_ns_per_pkt");
            let seg = match (per_seg(KERNEL), per_seg(ULNET_SLEEP)) {
                (Some(k), Some(u)) => format!(
                    " Per segment on the SUT core: kernel {:.1} µs, ulnet {:.1} µs.",
                    k / 1e3,
                    u / 1e3
                ),
                _ => String::new(),
            };
            out.push(format!(
                "{}: the kernel used {a:.2}x the CPU of ulnet (sleeping) for the system under test and {b:.2}x machine-wide.{seg}",
                c.label
            ));
            if c.size == 128 {
                small.push((c, a, b));
            }
        }
        if small.is_empty() {
            out.push(
                "No 128-byte case has both kernel and ulnet (sleep) figures: no verdict.".into(),
            );
            out.extend(packet_line(s));
            return out;
        }
        let word = |r: f64| {
            if r >= 2.0 {
                "holds"
            } else if r > 1.0 {
                "holds only partly (cheaper, by less than 2x)"
            } else {
                "does not hold (not cheaper)"
            }
        };
        let per_case: Vec<String> = small
            .iter()
            .map(|(c, a, b)| {
                format!(
                    "{}: {} for the SUT ({a:.2}x), {} machine-wide ({b:.2}x)",
                    c.id,
                    word(*a),
                    word(*b)
                )
            })
            .collect();
        out.push(format!(
            "The seed's claim (2-3x less CPU than sockets with 128-byte writes), ulnet sleeping vs kernel epoll: {}. Busy-poll is excluded: it spins a core by design.",
            per_case.join("; ")
        ));
        out.push(goal(&small));
        out.extend(floor_lines(s));
        out.extend(packet_line(s));
        out
    }

    fn goals(&self, _r: &ExperimentResult, s: &Summary) -> Vec<String> {
        let small: Vec<_> = cpu_ratios(s)
            .into_iter()
            .filter(|(c, _, _)| c.size == 128)
            .collect();
        if small.is_empty() {
            Vec::new()
        } else {
            vec![goal(&small)]
        }
    }
}

/// (case, the kernel's CPU over ulnet sleeping's for the system under test, the same
/// machine-wide) of every case both ran, paired round by round: the SUT core's exact
/// busy time and every CPU's where the machine has them, else the processes' own times.
fn cpu_ratios(s: &Summary) -> Vec<(&'static CaseDef, f64, f64)> {
    CASES
        .iter()
        .filter_map(|c| {
            let sut = s
                .paired(c.id, KERNEL, ULNET_SLEEP, "sut_core_cores")
                .or_else(|| s.paired(c.id, KERNEL, ULNET_SLEEP, "sut_cores"))?;
            let mach = s
                .paired(c.id, KERNEL, ULNET_SLEEP, "cpus_busy_cores")
                .or_else(|| s.paired(c.id, KERNEL, ULNET_SLEEP, "tasks_cores"))?;
            Some((c, sut, mach))
        })
        .collect()
}

/// Where the channel's floor leaves goal 3 in the cases it runs in. Judged on the SUT
/// core's busy time, as the goal is, not per frame: the floor moves the same bytes in no
/// more frames and wake-ups than a TCP stream of them, and no ACKs, so its busy time is
/// what any stack on this channel costs at least. (Until session 30 the floor took one datagram a
/// write, 97,000 frames a second against the 12,500 segments the peer's TCP cut the same
/// bytes into, and was set against the kernel per frame: its fixed cost of one wake-up a
/// millisecond, spread over eight times the frames, read as 0.06x the kernel's per
/// segment while its busy time was 0.44x the kernel's.)
fn floor_lines(s: &Summary) -> Vec<String> {
    const M: &str = "sut_core_cores";
    CASES
        .iter()
        .filter(|c| floor_fits(c))
        .filter_map(|c| {
            let (k, f) = (s.median(c.id, KERNEL, M)?, s.median(c.id, CHANNEL_FLOOR, M)?);
            let r = s.paired(c.id, CHANNEL_FLOOR, KERNEL, M)?;
            let frames = s
                .median(c.id, CHANNEL_FLOOR, "ops_per_s")
                .map(|n| format!(", {n:.0} frames a second"))
                .unwrap_or_default();
            let room = if r < 1.0 / 3.0 {
                format!(
                    "a third of the kernel's leaves {:.3} cores for a stack's own work, its ACKs and its extra wake-ups",
                    k / 3.0 - f
                )
            } else {
                "goal 3's third of the kernel is below what the channel alone costs here, so no stack on this channel can meet it".to_owned()
            };
            let ulnet = s
                .median(c.id, ULNET_SLEEP, M)
                .map(|u| format!("; ulnet sleeping takes {:.3} cores above the floor", u - f))
                .unwrap_or_default();
            Some(format!(
                "{}: the bare AF_XDP channel {} the same bytes (no stack, full frames{frames}, one wake-up a millisecond) keeps the SUT core {f:.3} cores busy, {r:.2}x the kernel's {k:.3}: {room}{ulnet}.",
                c.id,
                if c.send { "sending" } else { "taking in" },
            ))
        })
        .collect()
}

/// ulnet over AF_PACKET (`--backend packet`), shown beside the verdict, which stays on
/// AF_XDP.
fn packet_line(s: &Summary) -> Option<String> {
    let packet: Vec<String> = CASES
        .iter()
        .filter(|c| c.size == 128)
        .filter_map(|c| {
            let r = s.paired(c.id, KERNEL, ULNET_PACKET_SLEEP, "sut_core_cores")?;
            Some(format!("{} {:.2}x", c.id, 1.0 / r))
        })
        .collect();
    (!packet.is_empty()).then(|| {
        format!(
            "ulnet over AF_PACKET, sleeping, SUT core against the kernel's: {}.",
            packet.join("; ")
        )
    })
}

/// The project's goal for small writes (issue 11, goal 3) from the 128-byte cases'
/// (case, kernel/ulnet SUT ratio, kernel/ulnet machine-wide ratio).
fn goal(small: &[(&CaseDef, f64, f64)]) -> String {
    let per_case: Vec<String> = small
        .iter()
        .map(|(c, sut, mach)| {
            let (u, m) = (1.0 / sut, 1.0 / mach);
            let met = if u <= 1.0 / 3.0 { "met" } else { "not met" };
            // Three decimals next to the limit, where two print 0.33 either way.
            let u = if (0.325..0.335).contains(&u) {
                format!("{u:.3}")
            } else {
                format!("{u:.2}")
            };
            format!("{} {u}x: {met} (machine-wide {m:.2}x)", c.id)
        })
        .collect();
    format!(
        "Goal 3 (100 Mb/s in 128-byte writes, ulnet sleeping at ≤ 1/3 of the kernel's epoll CPU for the system under test, its core's busy time): {}.",
        per_case.join("; ")
    )
}

/// Why ulnet's XDP program runs in generic mode here (see the module doc).
const XDP_MODE_WHY: &str = "generic (skb): it runs in the receive path RPS steers to the SUT core; veth's native XDP would run on the sending core";

/// Declares the run's `systems` and its parameters.
fn declare(ctx: &mut Ctx<'_>, window: Duration, systems: &[&str]) {
    let common = |wait: &str| {
        vec![
            ("rate", "100 Mb/s of payload, paced every 1 ms".to_owned()),
            ("nodelay", "on for 128 B writes, off for 4 KiB".to_owned()),
            ("mtu", "1500".to_owned()),
            ("offloads", "off (testbed default; both ends)".to_owned()),
            (
                "receive processing",
                "each end's on its own core: RPS, A's to the SUT core, B's to the load core"
                    .to_owned(),
            ),
            ("wait", wait.to_owned()),
        ]
    };
    let mut k = common("epoll_wait between 1 ms slices and for readiness");
    k.push(("api", "non-blocking socket, epoll + send/recv".into()));
    ctx.system(
        KERNEL,
        "kernel, epoll (offloads off)",
        SystemKind::Kernel,
        false,
        &k,
    );
    let mut u = common("sleep (poll(2) when idle; a received TCP stream in coalesced batches: Runtime::set_coalesce); app thread sleeps between slices");
    u.push((
        "api",
        "ulnet::net::TcpStream, blocking write/read (public socket API)".into(),
    ));
    u.push(("channel", "xdp".into()));
    u.push(("xdp mode", XDP_MODE_WHY.into()));
    if systems.contains(&ULNET_SLEEP) {
        ctx.system(
            ULNET_SLEEP,
            "ulnet, AF_XDP, sleeping",
            SystemKind::Ulnet,
            false,
            &u,
        );
    }
    let mut p = common("sleep, as ulnet-sleep");
    p.push((
        "api",
        "ulnet::net::TcpStream, blocking write/read (public socket API)".into(),
    ));
    p.push((
        "channel",
        "packet: TPACKET_V3 blocks handed over when full or after 1 ms, pure ACKs through their own ring; tpacket_rcv runs in the receive path RPS steers to the SUT core".into(),
    ));
    if systems.contains(&ULNET_PACKET_SLEEP) {
        ctx.system(
            ULNET_PACKET_SLEEP,
            "ulnet, AF_PACKET, sleeping",
            SystemKind::Ulnet,
            false,
            &p,
        );
    }
    let mut b = common("busy-poll (runtime thread spins on the SUT core)");
    b.push((
        "api",
        "ulnet::net::TcpStream, blocking write/read (public socket API)".into(),
    ));
    b.push(("channel", "xdp".into()));
    b.push(("xdp mode", XDP_MODE_WHY.into()));
    if systems.contains(&ULNET_BUSY) {
        ctx.system(
            ULNET_BUSY,
            "ulnet, AF_XDP, busy-poll (apart)",
            SystemKind::Ulnet,
            false,
            &b,
        );
    }
    if systems.contains(&CHANNEL_FLOOR) {
        let mut f = common("receiving, sleeps 1 ms whenever its ring is empty; sending, sleeps to the next millisecond's burst: one wake-up per paced burst, the fewest that keeps up");
        // UDP: no Nagle to turn off; the rate is the TCP peer's.
        f.retain(|(k, _)| *k != "nodelay");
        f[0].1 = "100 Mb/s of payload, paced every 1 ms, as the TCP peer's writes".into();
        f.push(("bytes", format!("the bytes the case's writes make due each millisecond, as UDP datagrams of up to {FLOOR_DATAGRAM} bytes (one full 1500-byte frame each): no more frames than a TCP stream of the same bytes, and one burst a millisecond")));
        f.push(("peer", "receiving, a kernel UDP socket in B sends them; sending, one in B counts them (no ACKs either way)".into()));
        f.push((
            "api",
            "ulnet::channel::xdp::XdpChannel: rx_batch, frames counted and nothing else; or prebuilt frames through its Tx, one flush a burst".into(),
        ));
        f.push(("xdp mode", XDP_MODE_WHY.into()));
        ctx.system(
            CHANNEL_FLOOR,
            "AF_XDP, no stack (the channel's floor; 128-byte cases only)",
            SystemKind::Channel,
            false,
            &f,
        );
    }
    ctx.param("rate_mbps", 100);
    ctx.param("window_s", window.as_secs_f64());
    ctx.param("pacing_slice_ms", 1);
    ctx.param("read_buffer", "64 KiB (every system)");
}

fn views(ctx: &mut Ctx<'_>, cases: &[&str], systems: &[&str]) {
    let cases: Vec<String> = cases.iter().map(|c| (*c).to_owned()).collect();
    ctx.view(View::Table(TableView {
        title: "CPU at 100 Mb/s (system under test and whole machine)".into(),
        cases: cases.clone(),
        systems: systems.iter().map(|s| (*s).to_owned()).collect(),
        metrics: vec![
            Metric::less("sut_core_cores", "SUT core busy (cores)", 3),
            Metric::less("sut_cores", "SUT process CPU (cores)", 3),
            Metric::less("cpus_busy_cores", "machine CPU, both cores busy (cores)", 3),
            Metric::less("tasks_cores", "machine CPU, all tasks (cores)", 3),
            Metric::less("machine_busy_cores", "machine CPU, /proc/stat (cores)", 3),
            Metric::plain("achieved_mbps", "achieved (Mb/s)", 1),
            Metric::less("sut_core_s_per_gb", "SUT core busy (s/GB)", 2),
            Metric::less("sut_core_ns_per_pkt", "SUT core busy per segment (ns)", 0),
            Metric::less("tasks_s_per_gb", "machine CPU, all tasks (s/GB)", 2),
            Metric::plain("ops_per_s", "SUT writes or reads (/s)", 0),
            Metric::plain("peer_segs_in_per_s", "peer segs in (/s)", 0),
            Metric::plain("peer_segs_out_per_s", "peer segs out (/s)", 0),
        ],
        baselines: vec![KERNEL.into()],
        ratio_metric: None,
    }));
    for (id, key, label) in [
        ("sut_cpu", "sut_core_cores", "SUT core busy (cores)"),
        (
            "machine_cpu",
            "cpus_busy_cores",
            "machine CPU, both cores busy (cores)",
        ),
    ] {
        ctx.view(View::Plot(PlotView {
            id: id.into(),
            title: format!("{label} at 100 Mb/s"),
            kind: PlotKind::Bars,
            cases: cases.clone(),
            systems: Vec::new(),
            x_param: None,
            x_label: "case".into(),
            y: Metric::less(key, label, 3),
            y2: None,
            x_log: false,
        }));
    }
}

fn run_on(ctx: &mut Ctx<'_>, tb: &Testbed, ncases: usize, window: Duration) -> io::Result<()> {
    let (a, b) = (tb.a(), tb.b());
    let systems = systems(ctx.plan);
    declare(ctx, window, &systems);
    let ulnet_ip = a.spare_ip(0);
    b.set_neighbor(ulnet_ip, a.mac).map_err(io_err)?;
    let cases = &CASES[..ncases];
    views(
        ctx,
        &cases.iter().map(|c| c.id).collect::<Vec<_>>(),
        &systems,
    );
    ctx.note("Pacing: every 1 ms the writer sends what is due for 100 Mb/s of payload since the start; a round whose achieved rate misses 100 Mb/s by more than 3% is still recorded and flagged in the notes.");
    ctx.note("ulnet-busy spins its runtime thread on the SUT core by design (its core busy all the time): it is in the table for completeness; the verdict compares ulnet-sleep with the kernel.");
    ctx.note("Machine-wide figures count everything on the machine, both ends and any other work running at the same time, which inflates them alike for every system and can swamp the difference; 'SUT core busy' is the SUT core alone, 'SUT process CPU' this process's threads alone.");
    ctx.note("On veth the sender's core would do the receiver's kernel work; RPS steers each end's receive processing to its own core (A's to the SUT core, B's to the load core), as two hosts would run it, and ulnet's XDP program runs in generic mode, inside that steered path. The SUT core's busy time thus counts the SUT's receive work (the kernel's TCP input; ulnet's channel copying frames into its UMEM) and not the peer's.");
    ctx.note("This kernel samples /proc/stat's user/system/softirq split at each timer tick (CONFIG_TICK_CPU_ACCOUNTING): a loop paced every 1 ms runs between ticks and is largely missed (machine_busy_cores fell below the SUT's own precise CPU in earlier runs). The machine-wide figure used here, 'both cores busy', is each CPU's window minus its idle time (cpuidle or tickless accounting, exact), so it counts every context, also softirq work that runs while a CPU is otherwise idle; 'all tasks' (every process's precise run time from /proc/<pid>/stat) misses that work and is shown beside it.");
    if ncases < CASES.len() {
        ctx.note(
            "This profile runs only the 128-byte cases (the seed's); default and full add 4 KiB.",
        );
    }
    ctx.note("Windows are shorter than the issue's 5 s in default (1.8 s) so the whole experiment fits its 90 s budget; full uses 5 s.");
    let mut port = BASE_PORT;
    let mut slow: Vec<String> = Vec::new();
    let mut mode: Option<String> = None;
    for c in cases {
        ctx.case(
            c.id,
            c.label,
            &[
                ("write_bytes", c.size as f64),
                ("direction_send", if c.send { 1.0 } else { 0.0 }),
            ],
        );
        let case_systems: Vec<&str> = systems
            .iter()
            .copied()
            .filter(|s| *s != CHANNEL_FLOOR || floor_fits(c))
            .collect();
        ctx.alternate(c.id, &case_systems, |sys, round| {
            port += 1;
            let peer_at = SocketAddr::new(b.ip, port);
            let m = match sys {
                KERNEL => kernel_round(a, b, c, peer_at, window),
                CHANNEL_FLOOR if c.send => floor_send_round(a, b, ulnet_ip, c, port, window),
                CHANNEL_FLOOR => floor_round(a, b, ulnet_ip, c, port, window),
                _ => {
                    let wait = if sys == ULNET_BUSY {
                        WaitMode::BusyPoll
                    } else {
                        WaitMode::Sleep
                    };
                    let backend = if sys == ULNET_PACKET_SLEEP {
                        Backend::Packet
                    } else {
                        Backend::Xdp
                    };
                    ulnet_round(a, b, ulnet_ip, wait, backend, c, peer_at, window, &mut mode)
                }
            }?;
            if let Some(r) = m.get("achieved_mbps") {
                if (r - 100.0).abs() > 3.0 {
                    slow.push(format!(
                        "{} / {sys} / round {}: {r:.1} Mb/s",
                        c.id,
                        round + 1
                    ));
                }
            }
            Ok(m)
        });
    }
    if let Some(m) = mode {
        for s in [ULNET_SLEEP, ULNET_BUSY] {
            ctx.system_setup(s, "channel", format!("xdp ({m})"));
        }
    }
    if !slow.is_empty() {
        ctx.note(format!(
            "Rounds off the 100 Mb/s target by more than 3%: {}.",
            slow.join("; ")
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Pacing

/// Bytes due after `elapsed` at `rate_bps` bits per second, rounded up to whole writes
/// of `size` bytes (so the first slice already sends something).
pub(super) fn due_bytes(elapsed: Duration, rate_bps: f64, size: usize) -> u64 {
    let bytes = elapsed.as_secs_f64() * rate_bps / 8.0;
    let writes = (bytes / size as f64).ceil() as u64;
    writes * size as u64
}

/// The start of the slice after the one `elapsed` falls in.
pub(super) fn next_slice(elapsed: Duration, slice: Duration) -> Duration {
    let n = elapsed.as_nanos() / slice.as_nanos() + 1;
    Duration::from_nanos((n * slice.as_nanos()) as u64)
}

// ---------------------------------------------------------------------------------------
// Shared helpers (also used by the latency experiment)

/// Joins a thread, turning a panic into an error.
pub(super) fn join<T>(t: JoinHandle<io::Result<T>>, what: &str) -> io::Result<T> {
    t.join()
        .map_err(|_| io::Error::other(format!("{what} panicked")))?
}

/// A ulnet stack over AF_XDP on `side`'s veth end at `ip`, with `peers` as static
/// neighbours, waiting as `wait`; also the channel's mode. Retries while the previous
/// round's socket on the queue is still being released (EBUSY).
pub(super) fn open_stack(
    side: &Side,
    ip: IpAddr,
    wait: WaitMode,
    peers: &[(IpAddr, [u8; 6])],
) -> io::Result<(Stack, String)> {
    open_stack_mode(side, ip, wait, peers, XdpMode::Auto, Backend::Xdp)
}

/// [`open_stack`] with the XDP program attached in `mode`.
fn open_stack_mode(
    side: &Side,
    ip: IpAddr,
    wait: WaitMode,
    peers: &[(IpAddr, [u8; 6])],
    mode: XdpMode,
    backend: Backend,
) -> io::Result<(Stack, String)> {
    let cidr = IpCidr::new(ip, side.prefix_for(ip)).ok_or_else(|| io_err("bad prefix"))?;
    let builder = || {
        peers.iter().fold(
            Stack::builder()
                .backend(backend)
                .interface(&side.ifname)
                .netns(&side.ns)
                .address_cidr(cidr)
                .xdp(XdpOptions {
                    mode,
                    ..XdpOptions::default()
                })
                .wait(wait),
            |b, (ip, mac)| b.neighbor(*ip, EthernetAddress(*mac)),
        )
    };
    let mut tries = 0;
    let mut rt = loop {
        match builder().build_runtime() {
            Err(e) if e.kind() == io::ErrorKind::ResourceBusy && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(40));
            }
            r => break r?,
        }
    };
    // An IPv6 address is usable once duplicate address detection passed (RFC 4862
    // §5.4); with IPv4 only this returns at once.
    rt.settle_addresses(rt.settle_timeout())?;
    let caps = rt.channel().capabilities();
    let mode = format!("{}, {}", caps.name, caps.mode);
    Ok((Stack::from_runtime(rt, Vec::new())?, mode))
}

/// Tcp InSegs and OutSegs of the calling thread's network namespace.
pub(super) fn tcp_segs() -> io::Result<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/net/snmp")?;
    parse_tcp_segs(&text).ok_or_else(|| io_err("no Tcp InSegs/OutSegs in /proc/net/snmp"))
}

/// InSegs and OutSegs from the text of `/proc/net/snmp`.
pub(super) fn parse_tcp_segs(text: &str) -> Option<(u64, u64)> {
    let mut tcp = text.lines().filter(|l| l.starts_with("Tcp:"));
    let (head, vals) = (tcp.next()?, tcp.next()?);
    let pairs: Vec<(&str, &str)> = head
        .split_whitespace()
        .zip(vals.split_whitespace())
        .collect();
    let get = |k: &str| pairs.iter().find(|(h, _)| *h == k)?.1.parse().ok();
    Some((get("InSegs")?, get("OutSegs")?))
}

/// Accepts one connection within [`OP_TIMEOUT`].
pub(super) fn accept_timeout(l: &TcpListener) -> io::Result<TcpStream> {
    l.set_nonblocking(true)?;
    let deadline = Instant::now() + OP_TIMEOUT;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                return Ok(s);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(io_err("no connection to accept in time"));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The peer (kernel, namespace B, load core)

/// What the peer did.
struct PeerDone {
    bytes: u64,
    cpu: Duration,
    segs_in: u64,
    segs_out: u64,
}

/// The kernel peer on `at`: for a `send` case it reads and discards until EOF; for a
/// receive case it writes `size`-byte paced writes for `window`, then closes its side
/// and waits for the SUT to close.
fn peer(
    ns: &str,
    at: SocketAddr,
    c: &CaseDef,
    window: Duration,
) -> io::Result<JoinHandle<io::Result<PeerDone>>> {
    let (send, size) = (c.send, c.size);
    super::load::in_ns(
        ns,
        Some(LOAD_CPU),
        move || TcpListener::bind(at),
        move |l| {
            let mut s = accept_timeout(&l)?;
            s.set_read_timeout(Some(OP_TIMEOUT))?;
            s.set_write_timeout(Some(OP_TIMEOUT))?;
            let segs0 = tcp_segs()?;
            let cpu0 = thread_cpu_time();
            let mut bytes = 0u64;
            let mut buf = vec![0u8; 64 * 1024];
            if send {
                let end = Instant::now() + window + Duration::from_secs(10);
                loop {
                    let n = s.read(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    bytes += n as u64;
                    if Instant::now() > end {
                        return Err(io_err("the sender did not stop"));
                    }
                }
            } else {
                s.set_nodelay(true)?;
                bytes = paced_writes(size, window, |chunk| s.write_all(chunk))?.0;
                s.shutdown(Shutdown::Write)?;
            }
            let cpu = thread_cpu_time() - cpu0;
            let segs1 = tcp_segs()?;
            if !send {
                // Wait for the SUT's close so the connection ends cleanly.
                while s.read(&mut buf)? > 0 {}
            }
            Ok(PeerDone {
                bytes,
                cpu,
                segs_in: segs1.0 - segs0.0,
                segs_out: segs1.1 - segs0.1,
            })
        },
    )
}

/// Every [`SLICE`] for `window`, what is due for [`RATE_BPS`] since the start in
/// `size`-byte writes (a multiple of `size`), to `slice`, sleeping between slices:
/// the schedule of every paced sender here.
fn paced(
    size: usize,
    window: Duration,
    mut slice: impl FnMut(u64) -> io::Result<()>,
) -> io::Result<()> {
    let start = Instant::now();
    loop {
        let el = start.elapsed();
        if el >= window {
            return Ok(());
        }
        slice(due_bytes(el, RATE_BPS, size))?;
        let next = next_slice(start.elapsed(), SLICE);
        if let Some(d) = next.checked_sub(start.elapsed()) {
            std::thread::sleep(d);
        }
    }
}

/// Writes `size`-byte chunks through `write` on [`paced`]'s schedule: (bytes, writes).
fn paced_writes(
    size: usize,
    window: Duration,
    mut write: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<(u64, u64)> {
    let chunk = vec![0x5au8; size];
    let (mut bytes, mut writes) = (0u64, 0u64);
    paced(size, window, |due| {
        while bytes < due {
            write(&chunk)?;
            bytes += size as u64;
            writes += 1;
        }
        Ok(())
    })?;
    Ok((bytes, writes))
}

/// [`paced_writes`]' bytes on its schedule, but each slice's as one burst of datagrams
/// of up to [`FLOOR_DATAGRAM`] bytes: `burst` gets their lengths. Returns (bytes,
/// datagrams).
fn paced_datagrams(
    size: usize,
    window: Duration,
    mut burst: impl FnMut(&[usize]) -> io::Result<()>,
) -> io::Result<(u64, u64)> {
    let (mut bytes, mut sent) = (0u64, 0u64);
    let mut lens = Vec::new();
    paced(size, window, |due| {
        lens.clear();
        while bytes < due {
            let n = (due - bytes).min(FLOOR_DATAGRAM as u64) as usize;
            lens.push(n);
            bytes += n as u64;
        }
        if !lens.is_empty() {
            burst(&lens)?;
            sent += lens.len() as u64;
        }
        Ok(())
    })?;
    Ok((bytes, sent))
}

/// The round's metrics from the window, the peer and the SUT's counts.
fn metrics(cpu: CpuUse, peer: &PeerDone, sut_bytes: u64, ops: u64, send: bool) -> Metrics {
    // The peer's CPU is known only after it finished: subtract it here.
    let cpu = CpuUse {
        sut_s: (cpu.sut_s - peer.cpu.as_secs_f64()).max(0.0),
        ..cpu
    };
    let bytes = if send { peer.bytes } else { sut_bytes };
    let segs = if send { peer.segs_in } else { peer.segs_out };
    let mut m = cpu.metrics(Some(bytes), Some(segs));
    let wall = cpu.delta.wall.as_secs_f64();
    m.insert("achieved_mbps".into(), bytes as f64 * 8.0 / wall / 1e6);
    m.insert("ops_per_s".into(), ops as f64 / wall);
    m.insert("peer_segs_in_per_s".into(), peer.segs_in as f64 / wall);
    m.insert("peer_segs_out_per_s".into(), peer.segs_out as f64 / wall);
    m.insert("bytes".into(), bytes as f64);
    m.insert("peer_cpu_s".into(), peer.cpu.as_secs_f64());
    m
}

// ---------------------------------------------------------------------------------------
// The kernel SUT

fn epoll_wait(ep: &impl std::os::fd::AsFd, timeout: Duration) -> io::Result<()> {
    let ts = rustix::time::Timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    let mut ev: Vec<epoll::Event> = Vec::with_capacity(4);
    match epoll::wait(ep, rustix::buffer::spare_capacity(&mut ev), Some(&ts)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn kernel_round(
    a: &Side,
    b: &Side,
    c: &CaseDef,
    peer_at: SocketAddr,
    window: Duration,
) -> io::Result<Metrics> {
    let p = peer(&b.ns, peer_at, c, window)?;
    let (send, size) = (c.send, c.size);
    // The SUT thread inherits the SUT core from the harness's main thread.
    let sut = super::load::in_ns(
        &a.ns,
        None,
        move || {
            let s = TcpStream::connect_timeout(&peer_at, OP_TIMEOUT)?;
            s.set_nodelay(size <= 128)?;
            s.set_nonblocking(true)?;
            Ok(s)
        },
        move |s| {
            let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
            let flags = if send {
                // Edge-triggered: reported only after a send hit EAGAIN and room came back.
                epoll::EventFlags::OUT | epoll::EventFlags::ET
            } else {
                epoll::EventFlags::IN
            };
            epoll::add(&ep, &s, epoll::EventData::new_u64(1), flags)?;
            let w = Window::start()?;
            let (mut bytes, mut ops) = (0u64, 0u64);
            let start = Instant::now();
            if send {
                let chunk = vec![0x5au8; size];
                loop {
                    let el = start.elapsed();
                    if el >= window {
                        break;
                    }
                    let due = due_bytes(el, RATE_BPS, size);
                    while bytes < due {
                        match rustix::net::send(&s, &chunk, SendFlags::NOSIGNAL) {
                            Ok(n) => {
                                bytes += n as u64;
                                ops += 1;
                            }
                            Err(rustix::io::Errno::AGAIN) => break,
                            Err(e) => return Err(e.into()),
                        }
                    }
                    let el = start.elapsed();
                    let next = next_slice(el, SLICE);
                    epoll_wait(&ep, next.saturating_sub(el))?;
                }
                s.shutdown(Shutdown::Write)?;
            } else {
                let mut buf = vec![0u8; 64 * 1024];
                let end = start + window + Duration::from_secs(10);
                'outer: loop {
                    loop {
                        match rustix::net::recv(&s, &mut buf[..], RecvFlags::empty()) {
                            Ok((0, _)) => break 'outer,
                            Ok((n, _)) => {
                                bytes += n as u64;
                                ops += 1;
                            }
                            Err(rustix::io::Errno::AGAIN) => break,
                            Err(e) => return Err(e.into()),
                        }
                    }
                    if Instant::now() > end {
                        return Err(io_err("the peer did not close"));
                    }
                    epoll_wait(&ep, Duration::from_millis(100))?;
                }
                s.shutdown(Shutdown::Write)?;
            }
            let cpu = w.finish(Duration::ZERO)?;
            Ok((cpu, bytes, ops))
        },
    );
    let sut = match sut {
        Ok(t) => join(t, "kernel SUT"),
        Err(e) => Err(e),
    };
    let peer = join(p, "peer");
    let (cpu, bytes, ops) = sut?;
    let peer = peer?;
    Ok(metrics(cpu, &peer, bytes, ops, send))
}

// ---------------------------------------------------------------------------------------
// The channel's floor

/// Whether case `c` has a channel floor: goal 3's cases (128-byte writes).
fn floor_fits(c: &CaseDef) -> bool {
    c.size == 128
}

/// The floor's datagrams: the most UDP payload one 1500-byte frame carries (the
/// testbed's MTU less the IPv4 and UDP headers), so the floor's frames are no more than
/// the segments of any TCP stream of the same bytes.
const FLOOR_DATAGRAM: usize = 1500 - 20 - 8;

/// A kernel UDP sender in namespace B on the load core, from `from` to `to` for
/// `window`: every slice, the bytes [`peer`]'s `size`-byte writes make due by then, as
/// datagrams of up to [`FLOOR_DATAGRAM`] bytes.
fn udp_peer(
    ns: &str,
    from: SocketAddr,
    to: SocketAddr,
    size: usize,
    window: Duration,
) -> io::Result<JoinHandle<io::Result<PeerDone>>> {
    super::load::in_ns(
        ns,
        Some(LOAD_CPU),
        move || {
            let s = UdpSocket::bind(from)?;
            s.connect(to)?;
            Ok(s)
        },
        move |s| {
            let cpu0 = thread_cpu_time();
            let buf = [0x5au8; FLOOR_DATAGRAM];
            let (bytes, sent) = paced_datagrams(size, window, |lens| {
                lens.iter().try_for_each(|&n| s.send(&buf[..n]).map(drop))
            })?;
            Ok(PeerDone {
                bytes,
                cpu: thread_cpu_time() - cpu0,
                segs_in: 0,
                segs_out: sent,
            })
        },
    )
}

/// The floor's bare AF_XDP channel on A's veth end for `ip`, opened on the calling
/// thread (the harness's: the SUT core), in generic mode as ulnet's here.
fn floor_channel(a: &Side, ip: IpAddr) -> io::Result<ulnet::channel::xdp::XdpChannel> {
    let o = XdpOptions {
        addresses: vec![ip],
        mode: XdpMode::Generic,
        gso: false,
        ..XdpOptions::default()
    };
    super::hurd_udp::open_xdp(&a.ifname, &a.ns, &o)
}

/// The channel's floor for a receive case: what taking the case's bytes in costs the SUT
/// core with no stack at all. B's kernel sends them on the case's schedule as full-frame
/// UDP datagrams to ulnet's address ([`udp_peer`]; a TCP peer needs ACKs, which a bare
/// channel does not send); a bare AF_XDP channel on A's veth end (generic XDP, as
/// ulnet's here, so RPS steers the kernel's share of the work to the SUT core) takes
/// them in and sleeps 1 ms whenever its ring is empty. Any stack on this channel takes
/// the same bytes in at least as many frames, with at least one wake-up per paced
/// burst, so its SUT core time is at least this.
fn floor_round(
    a: &Side,
    b: &Side,
    ip: IpAddr,
    c: &CaseDef,
    port: u16,
    window: Duration,
) -> io::Result<Metrics> {
    let mut ch = floor_channel(a, ip)?;
    let w = Window::start()?;
    let p = udp_peer(
        &b.ns,
        SocketAddr::new(b.ip, port),
        SocketAddr::new(ip, port),
        c.size,
        window,
    )?;
    let (mut frames, mut bytes, mut drained) = (0u64, 0u64, 0u32);
    let end = Instant::now() + window + Duration::from_secs(10);
    // After the peer is done, two empty looks a slice apart end the round.
    while drained < 2 {
        let n = ch
            .rx_batch(256, &mut |f, _| {
                frames += 1;
                // The UDP payload: the frame less its Ethernet, IPv4 and UDP headers.
                bytes += f.len().saturating_sub(14 + 20 + 8) as u64;
            })
            .map_err(io_err)?;
        if n > 0 {
            continue;
        }
        if p.is_finished() {
            drained += 1;
        }
        if Instant::now() > end {
            return Err(io_err("the UDP peer did not finish"));
        }
        std::thread::sleep(SLICE);
    }
    let cpu = w.finish(Duration::ZERO)?;
    let peer = join(p, "UDP peer")?;
    if frames < peer.segs_out || bytes < peer.bytes {
        return Err(io_err(format!(
            "the floor channel took {frames} of {} datagrams, {bytes} of {} bytes",
            peer.segs_out, peer.bytes
        )));
    }
    Ok(metrics(cpu, &peer, bytes, frames, false))
}

/// The channel's floor for a send case: what sending the case's bytes costs the SUT core
/// with no stack at all. On the SUT core, a bare AF_XDP channel on A's veth end (generic
/// XDP, as ulnet's) sends them on the case's schedule as full-frame UDP datagrams from
/// ulnet's address, prebuilt, one flush a burst, and sleeps to the next burst; a kernel
/// UDP socket in B counts them (`hurd_udp::kernel_udp_rx`). Any stack on this channel sends the same
/// bytes in at least as many frames, wakes at least once a burst and takes the ACKs in
/// besides, so its SUT core time is at least this.
fn floor_send_round(
    a: &Side,
    b: &Side,
    ip: IpAddr,
    c: &CaseDef,
    port: u16,
    window: Duration,
) -> io::Result<Metrics> {
    let mut ch = floor_channel(a, ip)?;
    let to = SocketAddr::new(b.ip, port);
    let stop = Arc::new(AtomicBool::new(false));
    let sink = super::hurd_udp::kernel_udp_rx(&b.ns, LOAD_CPU, to, Arc::clone(&stop))?;
    // Every length a burst can end in, built before the window opens.
    let frames: Vec<Vec<u8>> = (0..=FLOOR_DATAGRAM)
        .map(|n| {
            super::load::udp_frame(&super::load::Flood {
                ns: a.ns.clone(),
                ifname: a.ifname.clone(),
                macs: (a.mac.0, b.mac.0),
                ips: (ip, b.ip),
                port,
                payload_len: n,
            })
        })
        .collect();
    let w = Window::start()?;
    let sent = paced_datagrams(c.size, window, |lens| {
        let tx = ch.tx();
        for &n in lens {
            let f = &frames[n];
            tx.send(f.len(), &mut |buf| buf.copy_from_slice(f))
                .map_err(|e| io_err(format!("floor frame: {e:?}")))?;
        }
        tx.flush().map_err(io_err)
    });
    let cpu = w.finish(Duration::ZERO);
    // The last burst is on the wire; the sink drains its socket, then stops.
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    let peer = join(sink, "UDP sink").map(|(n, bytes, cpu)| PeerDone {
        bytes,
        cpu,
        segs_in: n,
        segs_out: 0,
    });
    let ((bytes, datagrams), cpu, peer) = (sent?, cpu?, peer?);
    if peer.bytes != bytes || peer.segs_in != datagrams {
        return Err(io_err(format!(
            "the floor sent {datagrams} datagrams, {bytes} bytes; B's socket got {}, {}",
            peer.segs_in, peer.bytes
        )));
    }
    Ok(metrics(cpu, &peer, bytes, datagrams, true))
}

// ---------------------------------------------------------------------------------------
// The ulnet SUT

#[allow(clippy::too_many_arguments)]
fn ulnet_round(
    a: &Side,
    b: &Side,
    ip: IpAddr,
    wait: WaitMode,
    backend: Backend,
    c: &CaseDef,
    peer_at: SocketAddr,
    window: Duration,
    mode: &mut Option<String>,
) -> io::Result<Metrics> {
    // Built on the harness's thread (SUT core): the runtime thread inherits it.
    let (stack, m) = open_stack_mode(a, ip, wait, &[(b.ip, b.mac.0)], XdpMode::Generic, backend)?;
    if backend == Backend::Xdp {
        *mode = Some(m);
    }
    let p = peer(&b.ns, peer_at, c, window)?;
    let r = ulnet_sut(&stack, c, peer_at, window);
    let peer = join(p, "peer");
    drop(stack);
    let (cpu, bytes, ops) = r?;
    Ok(metrics(cpu, &peer?, bytes, ops, c.send))
}

fn ulnet_sut(
    stack: &Stack,
    c: &CaseDef,
    peer_at: SocketAddr,
    window: Duration,
) -> io::Result<(CpuUse, u64, u64)> {
    let mut s = ulnet::net::TcpStream::connect_timeout(stack, &peer_at, OP_TIMEOUT)?;
    s.set_nodelay(c.size <= 128)?;
    s.set_read_timeout(Some(OP_TIMEOUT))?;
    s.set_write_timeout(Some(OP_TIMEOUT))?;
    let w = Window::start()?;
    let (mut bytes, mut ops) = (0u64, 0u64);
    let start = Instant::now();
    if c.send {
        let chunk = vec![0x5au8; c.size];
        loop {
            let el = start.elapsed();
            if el >= window {
                break;
            }
            let due = due_bytes(el, RATE_BPS, c.size);
            while bytes < due {
                s.write_all(&chunk)?;
                bytes += c.size as u64;
                ops += 1;
            }
            let el = start.elapsed();
            std::thread::sleep(next_slice(el, SLICE).saturating_sub(el));
        }
        s.shutdown(Shutdown::Write)?;
        // The window ends here, as the kernel's does; then wait (outside it) for the
        // peer, which closes once it has read everything.
        let cpu = w.finish(Duration::ZERO)?;
        let mut buf = [0u8; 64];
        while s.read(&mut buf)? > 0 {}
        return Ok((cpu, bytes, ops));
    } else {
        let mut buf = vec![0u8; 64 * 1024];
        let end = start + window + Duration::from_secs(10);
        loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                break;
            }
            bytes += n as u64;
            ops += 1;
            if Instant::now() > end {
                return Err(io_err("the peer did not close"));
            }
        }
        s.shutdown(Shutdown::Write)?;
    }
    let cpu = w.finish(Duration::ZERO)?;
    Ok((cpu, bytes, ops))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_line_sets_the_channels_busy_time_against_a_third_of_the_kernels() {
        use crate::results::Measurement;
        let mut r = ExperimentResult::new("netchannel-cpu", "004", "t");
        for (seq, (sys, cores)) in [
            (KERNEL, 0.071),
            (CHANNEL_FLOOR, 0.031),
            (ULNET_SLEEP, 0.062),
        ]
        .into_iter()
        .enumerate()
        {
            let mut metrics: std::collections::BTreeMap<String, f64> =
                [("sut_core_cores".to_owned(), cores)].into_iter().collect();
            if sys == CHANNEL_FLOOR {
                metrics.insert("ops_per_s".into(), 8491.0);
            }
            r.measurements.push(Measurement {
                case: "recv-128".into(),
                system: sys.into(),
                round: 0,
                seq: seq as u32,
                metrics,
            });
        }
        // This host's first run (session 30): the floor alone above a third.
        let lines = floor_lines(&Summary::of(&r));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("recv-128: "), "{}", lines[0]);
        assert!(
            lines[0].contains("8491 frames a second, one wake-up a millisecond) keeps the SUT core 0.031 cores busy, 0.44x the kernel's 0.071"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("below what the channel alone costs here"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("ulnet sleeping takes 0.031 cores above the floor"),
            "{}",
            lines[0]
        );
        // A floor under a third says what it leaves: 0.071 / 3 - 0.020 = 0.0037.
        r.measurements[1]
            .metrics
            .insert("sut_core_cores".into(), 0.020);
        let lines = floor_lines(&Summary::of(&r));
        assert!(lines[0].contains("0.28x the kernel's"), "{}", lines[0]);
        assert!(lines[0].contains("leaves 0.004 cores"), "{}", lines[0]);
    }

    #[test]
    fn backends_pick_the_ulnet_systems() {
        let plan = |backends| Plan {
            profile: Profile::Default,
            rounds: 1,
            backends,
            out: "/tmp".into(),
            ipv6: false,
            cases: vec![],
            systems: vec![],
        };
        assert_eq!(
            systems(&plan(vec![])),
            [KERNEL, ULNET_SLEEP, ULNET_BUSY, CHANNEL_FLOOR]
        );
        assert_eq!(
            systems(&plan(vec![Backend::Xdp, Backend::Packet])),
            [
                KERNEL,
                ULNET_SLEEP,
                ULNET_BUSY,
                CHANNEL_FLOOR,
                ULNET_PACKET_SLEEP
            ]
        );
        assert_eq!(
            systems(&plan(vec![Backend::Packet])),
            [KERNEL, ULNET_PACKET_SLEEP]
        );
        assert_eq!(systems(&plan(vec![Backend::Tap])), [KERNEL]);
    }

    #[test]
    fn pacing_math() {
        // 100 Mb/s = 12.5 MB/s: 12 500 bytes per ms, rounded up to whole writes.
        assert_eq!(due_bytes(Duration::ZERO, RATE_BPS, 128), 0);
        assert_eq!(due_bytes(Duration::from_millis(1), RATE_BPS, 128), 98 * 128);
        assert_eq!(
            due_bytes(Duration::from_secs(1), RATE_BPS, 4096),
            3052 * 4096
        );
        assert_eq!(
            next_slice(Duration::from_micros(2500), SLICE),
            Duration::from_millis(3)
        );
        assert_eq!(next_slice(Duration::ZERO, SLICE), Duration::from_millis(1));
    }

    #[test]
    fn goal_three_is_a_third_of_the_kernels_sut_cpu() {
        let (send, recv) = (&CASES[0], &CASES[1]);
        assert_eq!(
            (send.size, send.send, recv.size, recv.send),
            (128, true, 128, false)
        );
        // The kernel used 5x and 2.9x ulnet's SUT CPU: 0.20x met, 0.34x not; 2.99x
        // (0.334x) is not met either, and says so in three decimals.
        assert_eq!(
            goal(&[(send, 5.0, 4.0), (recv, 2.9, 1.5)]),
            format!(
                "Goal 3 (100 Mb/s in 128-byte writes, ulnet sleeping at ≤ 1/3 of the kernel's epoll CPU for the system under test, its core's busy time): {} 0.20x: met (machine-wide 0.25x); {} 0.34x: not met (machine-wide 0.67x).",
                send.id, recv.id
            )
        );
        assert!(goal(&[(recv, 2.99, 1.5)]).contains("recv-128 0.334x: not met"));
    }

    #[test]
    fn snmp_parsing() {
        let text = "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin InSegs OutSegs\nTcp: 1 200 1234 5678\nUdp: InDatagrams\nUdp: 3\n";
        assert_eq!(parse_tcp_segs(text), Some((1234, 5678)));
        assert_eq!(parse_tcp_segs("Ip: a\nIp: 1\n"), None);
    }
}
