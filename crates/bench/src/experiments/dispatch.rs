//! `dispatch` (seed 002, Denali's Figure 2): the cost in cycles of each stage of the
//! receive and transmit paths of 100-byte and 1400-byte UDP datagrams, ulnet against the
//! kernel.
//!
//! What is measured: an echo service in namespace A (the system under test, CPU 1)
//! answers a paced AF_XDP generator in namespace B (CPU 0) at a fixed moderate rate
//! ([`RATE_PPS`], far below what either system sustains, so each datagram crosses an
//! idle path). Each echoed datagram crosses the receive path, the application (the echo
//! loop) and the transmit path once.
//!
//! - ulnet: the stack's own per-stage accounting (`ulnet::stage`, feature `stage-cycles`,
//!   switched on for the round): TSC reads at each stage boundary, from the AF_XDP ring
//!   pop to the application's `UdpSocket::recv_from` return, and from its `send_to` call
//!   to the doorbell, aggregated per stage (mean, median). The whole path of each
//!   direction is also timed as one span with reads of its own, and the table checks
//!   that the stages add up to it (within 10%).
//! - the kernel: the same service on kernel sockets, its stages timed with eBPF
//!   (bpftrace, tracepoints: this kernel has no kprobes, `CONFIG_KPROBES` is off, and
//!   bpftrace 0.17 cannot attach fentry here), in nanoseconds converted to cycles with
//!   the TSC's calibrated rate. Tracepoints put boundaries where the kernel has them:
//!   `netif_rx` (the frame reaches A's veth backlog), `netif_receive_skb` (the protocol
//!   stack starts), `sk_data_ready` (queued on the socket), `sock_recv_length` in the
//!   echo thread (its `udp_recvmsg` returned, having copied and checksummed the datagram
//!   with `skb_copy_and_csum_datagram_msg`, which has no tracepoint; the skb is not freed
//!   there either, so `consume_skb` does not mark it), keyed by socket (the oldest
//!   datagram queued keeps the trace, the next read returns it), `recvfrom` return; `sendto` entry, `net_dev_queue` (UDP/IPv4
//!   built, into the device layer), `net_dev_start_xmit`/`net_dev_xmit` (the veth driver),
//!   `sendto` return. Ethernet, IPv4 and UDP demux cannot be told apart without kprobes
//!   (no tracepoint between `netif_receive_skb` and the socket): they are one stage, with
//!   the whole path beside it.
//! - overhead: each system also runs without its accounting (ulnet with the switch off,
//!   the kernel without probes) in the same alternation, and the echo service's CPU per
//!   echo of the two is compared; the hooks' own cost is also timed in a loop.
//!
//! Caveats, printed as notes: each kernel stage includes about one probe run (the
//! kernel-off rows give the probes' total cost per echo), so the kernel's figures are
//! upper bounds; one datagram per direction is traced at a time, so when frames arrive
//! in bursts (the system under test descheduled on a busy machine) only the first of a
//! burst is traced (`rx_untraced`, `tx_untraced`): the figures are for a datagram that
//! finds the path idle.
//!
//! CPU figures: `sut_*` is this process minus the generator thread, i.e. the echo
//! thread and ulnet's runtime thread; on veth the receive softirq of frames the generator
//! sends runs on the generator's core (in its `sendto`), so the kernel's receive-side
//! protocol work is not in `sut_*` for either system.

use std::fmt::Write as _;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use ulnet::runtime::WaitMode;
use ulnet::stage::{self as ustage, Stage};

use super::load::{self, Flood};
use super::netchannel_cpu::{join, open_stack};
use super::udp_echo::echo_loop;
use super::Experiment;
use crate::exec::ChildGuard;
use crate::harness::{io_err, Ctx, Metrics, Plan, Profile, Window};
use crate::results::{ExperimentResult, Metric, PlotKind, PlotView, SystemKind, TableView, View};
use crate::summary::Summary;
use crate::testbed::{Side, Testbed};

/// ulnet with its stage accounting on.
const ULNET: &str = "ulnet";
/// ulnet with the accounting compiled in but switched off (overhead baseline).
const ULNET_OFF: &str = "ulnet-off";
/// Kernel sockets with the eBPF probes loaded.
const KERNEL: &str = "kernel";
/// Kernel sockets without probes (overhead baseline).
const KERNEL_OFF: &str = "kernel-off";
/// In alternation order.
const SYSTEMS: [&str; 4] = [KERNEL, ULNET, KERNEL_OFF, ULNET_OFF];
/// The echo port.
const PORT: u16 = 7;
/// The offered rate: moderate, so neither side queues (ulnet and the kernel each echo
/// more than ten times this here; `udp-echo` measures where they saturate).
const RATE_PPS: u64 = 10_000;
/// UDP payload sizes (the seed's two).
const SIZES: [usize; 2] = [100, 1400];
/// How long the generator keeps reaping echoes after its last send.
const DRAIN: Duration = Duration::from_millis(100);
/// Setup beyond the window: stacks, threads; bpftrace's start (about 1-2 s to attach).
const OVERHEAD: Duration = Duration::from_millis(400);
const PROBE_OVERHEAD: Duration = Duration::from_millis(2500);
/// How long to wait for bpftrace to attach.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(20);
/// Echoes a round must see at least (else the stage figures mean little).
const MIN_ECHOES: u64 = 100;

/// `dispatch`.
pub struct Dispatch;

/// The measurement window of a profile.
fn window(p: Profile) -> Duration {
    p.pick(
        Duration::from_millis(500),
        Duration::from_secs(1),
        Duration::from_secs(2),
        Duration::from_secs(4),
    )
}

/// The kernel's stages, as the probe script numbers them: (index, key, label).
const K_RX: [(u32, &str, &str); 4] = [
    (
        1,
        "k_rx_backlog",
        "driver: veth backlog + NET_RX softirq (netif_rx → netif_receive_skb)",
    ),
    (
        2,
        "k_rx_stack",
        "Ethernet + IPv4 + UDP demux + socket queue (→ sk_data_ready)",
    ),
    (
        3,
        "k_rx_wake",
        "wake-up of the reader + copy out (sk_data_ready → udp_recvmsg returns)",
    ),
    (
        4,
        "k_rx_copy",
        "recvfrom returns (sock_recv_length → sys_exit)",
    ),
];
const K_APP: (u32, &str, &str) = (5, "k_app", "application (recvfrom return → sendto)");
const K_TX: [(u32, &str, &str); 4] = [
    (
        6,
        "k_tx_build",
        "sendto: syscall, copy, UDP + IPv4 + neighbour (→ net_dev_queue)",
    ),
    (7, "k_tx_qdisc", "qdisc (noqueue) → driver"),
    (
        8,
        "k_tx_xmit",
        "driver: veth_xmit (net_dev_start_xmit → net_dev_xmit)",
    ),
    (
        9,
        "k_tx_after",
        "after the driver: the peer's XDP/softirq on this core + sendto returns",
    ),
];
const K_RX_WHOLE: (u32, &str, &str) = (10, "k_rx_whole", "receive, whole path (one span)");
const K_TX_WHOLE: (u32, &str, &str) = (11, "k_tx_whole", "transmit, whole path (one span)");

/// The Denali-like layers both systems are drawn in: (direction, id, label, ulnet
/// stages, kernel stage keys).
type Layer = (
    &'static str,
    &'static str,
    &'static str,
    &'static [Stage],
    &'static [&'static str],
);
const LAYERS: [Layer; 5] = [
    (
        "rx",
        "driver",
        "driver / channel",
        &[Stage::RxChannel],
        &["k_rx_backlog"],
    ),
    (
        "rx",
        "stack",
        "IP/UDP stack + socket queue",
        &[
            Stage::RxEthernet,
            Stage::RxIpv4,
            Stage::RxUdp,
            Stage::RxSocket,
        ],
        &["k_rx_stack"],
    ),
    (
        "rx",
        "app",
        "hand-off + copy to the application",
        &[Stage::RxWake],
        &["k_rx_wake", "k_rx_copy"],
    ),
    (
        "tx",
        "stack",
        "send call + UDP/IP stack",
        &[
            Stage::TxSocket,
            Stage::TxHandoff,
            Stage::TxUdp,
            Stage::TxIpv4,
            Stage::TxEthernet,
        ],
        &["k_tx_build"],
    ),
    (
        "tx",
        "driver",
        "driver / channel + doorbell",
        &[Stage::TxChannel, Stage::TxDoorbell],
        &["k_tx_qdisc", "k_tx_xmit", "k_tx_after"],
    ),
];

fn case_id(size: usize) -> String {
    format!("{size}B")
}
fn stage_case(dir: &str, size: usize, sys: &str, key: &str) -> String {
    format!("{dir}-{size}B-{sys}-{key}")
}
fn layer_case(dir: &str, size: usize, layer: &str) -> String {
    format!("layer-{dir}-{size}B-{layer}")
}

impl Experiment for Dispatch {
    fn name(&self) -> &'static str {
        "dispatch"
    }
    fn seed(&self) -> &'static str {
        "002"
    }
    fn title(&self) -> &'static str {
        "Per-stage cycles of the UDP receive and transmit paths (100 B, 1400 B): ulnet's TSC accounting vs the kernel's eBPF timestamps"
    }
    fn estimate(&self, plan: &Plan) -> Duration {
        let w = window(plan.profile) + DRAIN;
        let per_round = (w + OVERHEAD) * 4 + PROBE_OVERHEAD;
        per_round * (SIZES.len() as u32 * plan.rounds) + Duration::from_secs(2)
    }
    fn tools(&self) -> &'static [&'static str] {
        &["ip", "ethtool", "bpftrace", "mount"]
    }
    fn run(&self, ctx: &mut Ctx<'_>) -> io::Result<()> {
        let tb = Testbed::builder()
            .name_prefix("dsp")
            .build()
            .map_err(io_err)?;
        let r = run_on(ctx, &tb);
        ustage::set_enabled(false);
        tb.teardown().map_err(io_err)?;
        r
    }
    fn seed_figure(&self) -> &'static str {
        "Seed 002 (Denali, Figure 2: Alpine TCP/IP in a Denali VM, 100-byte and 1400-byte UDP \
         packets; the figure's per-stage cycle counts are not in the text, only these shares):\n\n\
         | share of the packet reception cost | 100 B | 1400 B |\n| --- | --- | --- |\n\
         | physical device driver | 43.3% | 38.4% |\n\
         | TCP/IP stack | 37.3% | 41.8% |\n\n\
         Claim: the physical driver and the guest's TCP/IP stack cost far more than the \
         isolation kernel (virtualisation is cheap); the transmit path adds two copies and one \
         VM/kernel crossing, the receive path one copy, a buffer deallocation and a crossing."
    }
    fn verdict(&self, _r: &ExperimentResult, s: &Summary) -> Vec<String> {
        let mut out = Vec::new();
        for (size, seed_drv, seed_stack) in [(100usize, 43.3, 37.3), (1400, 38.4, 41.8)] {
            let case = case_id(size);
            let seed_ratio = seed_drv / seed_stack;
            let mut parts = Vec::new();
            let mut ratios = Vec::new();
            for (sys, name) in [(ULNET, "ulnet"), (KERNEL, "kernel")] {
                let drv = s.median(&case, sys, "rx_driver_pct");
                let st = s.median(&case, sys, "rx_stack_pct");
                let app = s.median(&case, sys, "rx_app_pct");
                let whole = s.median(&case, sys, "rx_whole_cyc");
                if let (Some(d), Some(t), Some(a), Some(w)) = (drv, st, app, whole) {
                    parts.push(format!(
                        "{name}: driver/channel {d:.0}%, IP/UDP stack {t:.0}%, hand-off to the application {a:.0}% of {w:.0} cycles (driver:stack {:.2})",
                        d / t
                    ));
                    ratios.push((name, d / t));
                }
            }
            if parts.is_empty() {
                continue;
            }
            let mut line = format!(
                "{size} B reception: {}; the seed: driver {seed_drv}%, TCP/IP {seed_stack}% (driver:stack {seed_ratio:.2})",
                parts.join("; ")
            );
            for (name, r) in ratios {
                // "About as much as the stack" within a factor of two either way.
                let holds = (0.5..=2.0).contains(&(r / seed_ratio));
                line += &format!(
                    "; for {name} the seed's finding that the driver costs about as much as the stack {}",
                    if holds { "holds" } else { "does not hold" }
                );
            }
            out.push(line + ".");
            for (sys, name) in [(ULNET, "ulnet"), (KERNEL, "kernel")] {
                let mut checks = Vec::new();
                for dir in ["rx", "tx"] {
                    if let Some(d) = s.median(&case, sys, &format!("{dir}_sum_vs_whole_pct")) {
                        checks.push(format!(
                            "{dir} {d:+.1}% ({})",
                            if d.abs() <= 10.0 {
                                "within 10%"
                            } else {
                                "NOT within 10%"
                            }
                        ));
                    }
                }
                if !checks.is_empty() {
                    out.push(format!(
                        "{size} B, {name}: sum of the stages against the whole-path span: {}.",
                        checks.join(", ")
                    ));
                }
            }
            if let Some(h) = s.median(&case, ULNET, "hook_cyc_per_echo") {
                let paths = s.median(&case, ULNET, "rx_whole_cyc").unwrap_or(0.0)
                    + s.median(&case, ULNET, "tx_whole_cyc").unwrap_or(0.0);
                out.push(format!(
                    "{size} B: ulnet's accounting costs {h:.0} cycles per echo timed in a loop ({:.0}% of its traced receive and transmit paths).",
                    if paths > 0.0 { 100.0 * h / paths } else { 0.0 }
                ));
            }
            for (on, off, name) in [
                (ULNET, ULNET_OFF, "ulnet's accounting"),
                (KERNEL, KERNEL_OFF, "the eBPF probes"),
            ] {
                if let (Some(a), Some(b)) = (
                    s.median(&case, on, "sut_cyc_per_echo"),
                    s.median(&case, off, "sut_cyc_per_echo"),
                ) {
                    out.push(format!(
                        "{size} B: with {name} on, the echo service used {:+.0} cycles per echo ({a:.0} on, {b:.0} off; medians over rounds, wake-up noise included).",
                        a - b
                    ));
                }
            }
        }
        if out.is_empty() {
            out.push("Missing figures: no verdict.".into());
        }
        out
    }
}

fn declare(ctx: &mut Ctx<'_>, w: Duration) {
    let base = |wait: &str, api: &str, acct: &str| {
        vec![
            (
                "datagrams",
                format!("echo of 100 B or 1400 B UDP payloads at {RATE_PPS} per second"),
            ),
            ("mtu", "1500".to_owned()),
            ("offloads", "off (testbed default)".to_owned()),
            ("wait", wait.to_owned()),
            ("api", api.to_owned()),
            ("accounting", acct.to_owned()),
            ("window", format!("{w:?}")),
        ]
    };
    let u_api = "ulnet::net::UdpSocket::{recv_from,send_to}, blocking (public socket API)";
    let k_api = "std::net::UdpSocket, blocking recv_from / send_to";
    ctx.system(
        ULNET,
        "ulnet, stage accounting on",
        SystemKind::Ulnet,
        false,
        &base(
            "WaitMode::Sleep",
            u_api,
            "ulnet::stage (TSC at stage boundaries) on",
        ),
    );
    ctx.system(
        ULNET_OFF,
        "ulnet, accounting off",
        SystemKind::Ulnet,
        false,
        &base(
            "WaitMode::Sleep",
            u_api,
            "compiled in (feature stage-cycles), switched off: a branch not taken per hook",
        ),
    );
    ctx.system(
        KERNEL,
        "kernel, eBPF probes",
        SystemKind::Kernel,
        false,
        &base(
            "blocking recv_from",
            k_api,
            "bpftrace 0.17, 11 tracepoints (no kprobes on this kernel)",
        ),
    );
    ctx.system(
        KERNEL_OFF,
        "kernel, no probes",
        SystemKind::Kernel,
        false,
        &base("blocking recv_from", k_api, "none"),
    );
}

fn stage_metric_rows() -> (Vec<Metric>, Vec<Metric>) {
    let stats = vec![
        Metric::less("mean_cyc", "mean (cycles)", 0),
        Metric::less("median_cyc", "median (cycles)", 0),
        Metric::plain("share_pct", "share of the path (%)", 1),
        Metric::less("mean_ns", "mean (ns)", 0),
        Metric::plain("samples", "samples", 0),
    ];
    let check = vec![
        Metric::less("rx_whole_cyc", "rx whole span (cycles)", 0),
        Metric::less("rx_sum_cyc", "rx sum of stages (cycles)", 0),
        Metric::plain("rx_sum_vs_whole_pct", "rx sum − whole (%)", 1),
        Metric::less("tx_whole_cyc", "tx whole span (cycles)", 0),
        Metric::less("tx_sum_cyc", "tx sum of stages (cycles)", 0),
        Metric::plain("tx_sum_vs_whole_pct", "tx sum − whole (%)", 1),
        Metric::less("app_cyc", "application (cycles)", 0),
    ];
    (stats, check)
}

/// The stage keys of a system and direction: (key, label).
fn stages_of(sys: &str, dir: &str) -> Vec<(String, String)> {
    if sys == ULNET {
        let set: &[Stage] = if dir == "rx" { &Stage::RX } else { &Stage::TX };
        set.iter()
            .map(|s| (s.name().to_owned(), s.label().to_owned()))
            .collect()
    } else {
        let set = if dir == "rx" { &K_RX } else { &K_TX };
        set.iter()
            .map(|(_, k, l)| ((*k).to_owned(), (*l).to_owned()))
            .collect()
    }
}

fn views(ctx: &mut Ctx<'_>) {
    let (stats, check) = stage_metric_rows();
    let sizes: Vec<String> = SIZES.iter().map(|s| case_id(*s)).collect();
    for dir in ["rx", "tx"] {
        let what = if dir == "rx" { "Receive" } else { "Transmit" };
        for size in SIZES {
            for (sys, name) in [(ULNET, "ulnet"), (KERNEL, "kernel (eBPF)")] {
                let cases = stages_of(sys, dir)
                    .into_iter()
                    .map(|(k, _)| stage_case(dir, size, sys, &k))
                    .collect();
                ctx.view(View::Table(TableView {
                    title: format!("{what} path, {size} B, {name}: cycles per datagram by stage"),
                    cases,
                    systems: vec![sys.into()],
                    metrics: stats.clone(),
                    baselines: Vec::new(),
                    ratio_metric: None,
                }));
            }
        }
        let cases: Vec<String> = SIZES
            .iter()
            .flat_map(|&size| {
                LAYERS
                    .iter()
                    .filter(|l| l.0 == dir)
                    .map(move |l| layer_case(dir, size, l.1))
            })
            .collect();
        // The receive plot leaves out the hand-off layer: the kernel's wake-up of its
        // blocked reader (hundreds of thousands of cycles) would flatten every other bar;
        // the table below it has all layers.
        let plotted: Vec<String> = cases
            .iter()
            .filter(|c| dir == "tx" || !c.ends_with("-app"))
            .cloned()
            .collect();
        ctx.view(View::Plot(PlotView {
            id: format!("{dir}-stages"),
            title: if dir == "rx" {
                "Receive: cycles per datagram, driver and stack layers".into()
            } else {
                "Transmit: cycles per datagram by layer".into()
            },
            kind: PlotKind::Bars,
            cases: plotted,
            systems: vec![ULNET.into(), KERNEL.into()],
            x_param: None,
            x_label: "layer (size)".into(),
            y: Metric::less("mean_cyc", "cycles (mean)", 0),
            y2: None,
            x_log: false,
        }));
        ctx.view(View::Table(TableView {
            title: format!("{what} path by layer (both systems; share of the path)"),
            cases,
            systems: vec![ULNET.into(), KERNEL.into()],
            metrics: vec![
                Metric::less("mean_cyc", "mean (cycles)", 0),
                Metric::plain("share_pct", "share (%)", 1),
            ],
            baselines: vec![KERNEL.into()],
            ratio_metric: None,
        }));
    }
    ctx.view(View::Table(TableView {
        title: "Do the stages add up? Whole-path spans against the sums of their stages".into(),
        cases: sizes.clone(),
        systems: vec![ULNET.into(), KERNEL.into()],
        metrics: check,
        baselines: Vec::new(),
        ratio_metric: None,
    }));
    ctx.view(View::Table(TableView {
        title: "The accounting's own cost: the echo service's CPU per echo with it on and off"
            .into(),
        cases: sizes,
        systems: SYSTEMS.iter().map(|s| (*s).to_owned()).collect(),
        metrics: vec![
            Metric::less("sut_cyc_per_echo", "echo service CPU (cycles/echo)", 0),
            Metric::less(
                "hook_cyc_per_echo",
                "hooks timed in a loop (cycles/echo)",
                0,
            ),
            Metric::more("echoed_kpps", "echoed (kpps)", 2),
            Metric::less("loss_pct", "loss (%)", 2),
            Metric::less("sut_cores", "echo service CPU (cores)", 3),
        ],
        baselines: vec![ULNET_OFF.into(), KERNEL_OFF.into()],
        ratio_metric: Some("sut_cyc_per_echo".into()),
    }));
}

fn v4(ip: IpAddr) -> io::Result<Ipv4Addr> {
    match ip {
        IpAddr::V4(v) => Ok(v),
        IpAddr::V6(_) => Err(io_err("the testbed gave an IPv6 address")),
    }
}

/// A round's figures, and the per-stage rows for the stage cases.
struct Round {
    metrics: Metrics,
    /// (case, metrics) for stage and layer cases.
    rows: Vec<(String, Metrics)>,
}

fn run_on(ctx: &mut Ctx<'_>, tb: &Testbed) -> io::Result<()> {
    let w = window(ctx.profile());
    let (a, b) = (tb.a(), tb.b());
    declare(ctx, w);
    let (inv_c, inv_n) = ustage::tsc_flags()?;
    let hz = ustage::calibrate(Duration::from_millis(200));
    if hz <= 0.0 {
        return Err(io_err("TSC calibration failed"));
    }
    ctx.param("tsc_hz", format!("{hz:.0}"));
    ctx.param(
        "tsc_invariant",
        format!(
            "constant_tsc {inv_c}, nonstop_tsc {inv_n} (/proc/cpuinfo): {}",
            if inv_c && inv_n {
                "invariant"
            } else {
                "NOT invariant: cycles across cores and idle are not comparable"
            }
        ),
    );
    ctx.param("rate_pps", RATE_PPS);
    ctx.param("window", format!("{w:?}"));
    ctx.param("payload_bytes", "100 and 1400");
    ctx.note(format!(
        "The TSC runs at {:.4} GHz here (calibrated against CLOCK_MONOTONIC over 200 ms); /proc/cpuinfo: constant_tsc {inv_c}, nonstop_tsc {inv_n}. The kernel's eBPF timestamps (nanoseconds) are converted to cycles at that rate.",
        hz / 1e9
    ));
    ctx.note("ulnet's receive path starts at the AF_XDP ring pop (the frame already in the ring: the kernel's veth/XDP work that put it there ran on the generator's core and is not in it); the kernel's starts where the frame reaches A's veth backlog (netif_rx), the veth transmit before it also on the generator's core. Both end when recv returns the datagram to the application.");
    ctx.note("ulnet's doorbell on AF_XDP in copy mode is a sendto(2) that runs the veth transmit and the peer's receive (B's XDP program and its AF_XDP copy) synchronously; the kernel's equivalent is split in k_tx_xmit and k_tx_after. The transmit whole path ends when the doorbell (ulnet) or sendto (kernel) returns; ulnet's doorbell is shared among the frames it sent.");
    ctx.note("Kernel stages: tracepoints only (CONFIG_KPROBES is off here, so no ip_rcv/udp_rcv/veth_xmit kprobes; bpftrace 0.17 reports kfunc/fentry unavailable). Ethernet, IPv4, UDP demux and the socket queue are therefore one stage (netif_receive_skb → sk_data_ready); each stage includes about one probe's run (~0.1-0.3 µs), see the kernel-off rows for the probes' total cost.");
    ctx.note("Where the wake-up falls: the kernel's blocked reader is woken after the protocol work (k_rx_wake, usually the largest receive stage); ulnet's sleeping application thread is woken by poll(2) on the channel before the ring pop and then runs the stack itself, so its wake-up is outside the measured path. Compare the layers (driver/channel, stack), not the totals.");
    ctx.note("Plots: the report's plots have no stacked kind, so each direction is drawn as bars per layer in path order, ulnet beside the kernel; the receive plot shows the driver/channel and stack layers only (the kernel's wake-up of its blocked reader would flatten them), the layer tables give every layer and the per-stage tables every stage.");
    ctx.note("The probes' own cost: compare the echo service's CPU per echo of kernel (probes) and kernel-off; on the machine this was written on it was ~9,000-11,000 cycles per echo, ~1,300 per probe hit, and each kernel stage includes about one hit, so the kernel's stage figures are upper bounds.");
    ctx.note("Stage accounting is per datagram for those traced (one trace in flight per direction; a datagram queued behind another is not traced, counted in rx_untraced/tx_untraced): when frames arrive in bursts (the echo thread descheduled on a busy machine) only the first of each is traced, so the figures are for a datagram that finds the path idle; means and medians are over traced datagrams, whole-path spans over the same ones.");
    let gen_ip = b.spare_ip(0);
    let ua = a.spare_ip(0);
    // The kernel in A answers the generator's spare address without ARP.
    a.set_neighbor(gen_ip, b.mac).map_err(io_err)?;

    // Cases: one per size (all the flat figures), one per stage and per layer.
    let mut stage_cases: Vec<(String, String)> = Vec::new();
    for size in SIZES {
        ctx.case(
            &case_id(size),
            &format!("{size} B echo at {RATE_PPS} datagrams/s"),
            &[("payload_bytes", size as f64)],
        );
        for dir in ["rx", "tx"] {
            for sys in [ULNET, KERNEL] {
                for (k, l) in stages_of(sys, dir) {
                    stage_cases.push((stage_case(dir, size, sys, &k), format!("{size} B: {l}")));
                }
            }
            for l in LAYERS.iter().filter(|l| l.0 == dir) {
                stage_cases.push((layer_case(dir, size, l.1), format!("{size} B: {}", l.2)));
            }
        }
    }
    for (id, label) in &stage_cases {
        ctx.case(id, label, &[]);
    }
    views(ctx);
    let mut mode = None;
    for size in SIZES {
        let case = case_id(size);
        let mut rows: Vec<(String, &'static str, u32, Metrics)> = Vec::new();
        ctx.alternate(&case, &SYSTEMS, |sys, round| {
            let r = measure(sys, a, b, gen_ip, ua, size, w, hz)?;
            if let Some(m) = r.1 {
                mode = Some(m);
            }
            let sys_id: &'static str = SYSTEMS
                .iter()
                .find(|s| **s == sys)
                .copied()
                .unwrap_or(ULNET);
            for (c, m) in r.0.rows {
                rows.push((c, sys_id, round, m));
            }
            Ok(r.0.metrics)
        });
        for (c, sys, round, m) in rows {
            ctx.record(&c, sys, round, m);
        }
    }
    if let Some(m) = mode {
        for s in [ULNET, ULNET_OFF] {
            ctx.system_setup(s, "channel", format!("xdp ({m})"));
        }
    }
    Ok(())
}

/// One round of one system: the echo service, the probes or the accounting, the load.
#[allow(clippy::too_many_arguments)]
fn measure(
    sys: &str,
    a: &Side,
    b: &Side,
    gen_ip: IpAddr,
    ua: IpAddr,
    size: usize,
    w: Duration,
    hz: f64,
) -> io::Result<(Round, Option<String>)> {
    let is_ulnet = sys == ULNET || sys == ULNET_OFF;
    let to_ip = if is_ulnet { ua } else { a.ip };
    let at = SocketAddr::new(to_ip, PORT);
    let stop = Arc::new(AtomicBool::new(false));
    let mut stack = None;
    let mut probes = None;
    let mut hook_cyc = None;
    let server: JoinHandle<io::Result<u64>> = if is_ulnet {
        let (st, mode) = open_stack(a, ua, WaitMode::Sleep, &[(gen_ip, b.mac.0)])?;
        let s = ulnet::net::UdpSocket::bind(&st, at)?;
        s.set_read_timeout(Some(Duration::from_millis(50)))?;
        stack = Some((st, mode));
        if sys == ULNET {
            hook_cyc = Some(hook_cost());
            ustage::reset();
            ustage::set_enabled(true);
        }
        let st2 = Arc::clone(&stop);
        // The echo thread inherits the SUT core from the main thread.
        std::thread::spawn(move || {
            echo_loop(|buf| s.recv_from(buf), |buf, to| s.send_to(buf, to), &st2)
        })
    } else {
        let st2 = Arc::clone(&stop);
        let (tid_tx, tid_rx) = mpsc::channel();
        let t = load::in_ns(
            &a.ns,
            None,
            move || {
                let _ = tid_tx.send(current_tid());
                let s = UdpSocket::bind(at)?;
                s.set_read_timeout(Some(Duration::from_millis(50)))?;
                Ok(s)
            },
            move |s| echo_loop(|buf| s.recv_from(buf), |buf, to| s.send_to(buf, to), &st2),
        )?;
        if sys == KERNEL {
            let tid = tid_rx
                .recv_timeout(Duration::from_secs(5))
                .map_err(io_err)??;
            let script = probe_script(tid, &a.ifname, size + 28);
            match Probes::start(&script) {
                Ok(p) => probes = Some(p),
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    let _ = join(t, "echo service");
                    return Err(e);
                }
            }
        }
        t
    };
    let flood = Flood {
        ns: b.ns.clone(),
        ifname: b.ifname.clone(),
        macs: (b.mac.0, a.mac.0),
        ips: (v4(gen_ip)?.into(), v4(to_ip)?.into()),
        port: PORT,
        payload_len: size,
    };
    let r = (|| {
        let win = Window::start()?;
        let g = load::xdp_echo_load(flood, RATE_PPS, w, u64::MAX, DRAIN)?;
        let done = join(g, "generator")?;
        let cpu = win.finish(done.sent.cpu)?;
        Ok::<_, io::Error>((done, cpu))
    })();
    let snap = if sys == ULNET {
        let s = ustage::snapshot();
        ustage::set_enabled(false);
        Some(s)
    } else {
        None
    };
    let probe_out = probes.map(Probes::stop);
    stop.store(true, Ordering::Relaxed);
    let echoed_by_server = join(server, "echo service");
    let mode = stack.map(|(st, mode)| {
        drop(st);
        mode
    });
    let (done, cpu) = r?;
    echoed_by_server?;
    if done.echoed < MIN_ECHOES {
        return Err(io_err(format!(
            "only {} echoes of {} sent",
            done.echoed, done.sent.count
        )));
    }
    let span = done.sent.elapsed.as_secs_f64();
    let sent = done.sent.count as f64;
    let echoed = done.echoed as f64;
    let mut m = cpu.metrics(None, Some(done.echoed));
    m.insert("echoed_kpps".into(), echoed / span / 1e3);
    m.insert("loss_pct".into(), (100.0 * (sent - echoed) / sent).max(0.0));
    m.insert("sut_cyc_per_echo".into(), cpu.sut_s * hz / echoed);
    m.insert("tsc_ghz".into(), hz / 1e9);
    if let Some(h) = hook_cyc {
        m.insert("hook_cyc_per_echo".into(), h);
    }
    let mut rows = Vec::new();
    if let Some(s) = snap {
        ulnet_round(&s, size, hz, &mut m, &mut rows)?;
    }
    if let Some(out) = probe_out {
        let text = out?;
        let k = parse_bpftrace(&text);
        kernel_round(&k, size, hz, &mut m, &mut rows)?;
    }
    Ok((Round { metrics: m, rows }, mode))
}

/// A stage row: mean and median cycles, share of the path, mean ns, samples.
fn row(mean: f64, median: f64, total: f64, hz: f64, samples: u64) -> Metrics {
    let mut r = Metrics::new();
    r.insert("mean_cyc".into(), mean);
    r.insert("median_cyc".into(), median);
    r.insert(
        "share_pct".into(),
        if total > 0.0 {
            100.0 * mean / total
        } else {
            0.0
        },
    );
    r.insert("mean_ns".into(), mean * 1e9 / hz);
    r.insert("samples".into(), samples as f64);
    r
}

/// ulnet's figures of a round into `m` (flat) and `rows` (stage and layer cases).
fn ulnet_round(
    s: &ustage::Snapshot,
    size: usize,
    hz: f64,
    m: &mut Metrics,
    rows: &mut Vec<(String, Metrics)>,
) -> io::Result<()> {
    if s.get(Stage::RxWhole).count == 0 || s.get(Stage::TxWhole).count == 0 {
        return Err(io_err(format!(
            "no traced datagrams (untraced: {} rx, {} tx)",
            s.rx_untraced, s.tx_untraced
        )));
    }
    for (dir, set, whole) in [
        ("rx", &Stage::RX[..], Stage::RxWhole),
        ("tx", &Stage::TX[..], Stage::TxWhole),
    ] {
        let total: f64 = set.iter().map(|x| s.get(*x).mean).sum();
        for st in set {
            let f = s.get(*st);
            m.insert(format!("u_{}_cyc", st.name()), f.mean);
            m.insert(format!("u_{}_median_cyc", st.name()), f.median);
            rows.push((
                stage_case(dir, size, ULNET, st.name()),
                row(f.mean, f.median, total, hz, f.count),
            ));
        }
        let w = s.get(whole);
        check(m, dir, total, w.mean, w.count);
        for l in LAYERS.iter().filter(|l| l.0 == dir) {
            let v: f64 = l.3.iter().map(|x| s.get(*x).mean).sum();
            if dir == "rx" {
                m.insert(format!("rx_{}_pct", l.1), 100.0 * v / total);
            }
            let mut r = Metrics::new();
            r.insert("mean_cyc".into(), v);
            r.insert("share_pct".into(), 100.0 * v / total);
            rows.push((layer_case(dir, size, l.1), r));
        }
    }
    m.insert("app_cyc".into(), s.get(Stage::App).mean);
    m.insert("rx_untraced".into(), s.rx_untraced as f64);
    m.insert("tx_untraced".into(), s.tx_untraced as f64);
    Ok(())
}

/// The whole-path check of one direction.
fn check(m: &mut Metrics, dir: &str, sum: f64, whole: f64, samples: u64) {
    m.insert(format!("{dir}_sum_cyc"), sum);
    m.insert(format!("{dir}_whole_cyc"), whole);
    m.insert(format!("{dir}_whole_samples"), samples as f64);
    if whole > 0.0 {
        m.insert(
            format!("{dir}_sum_vs_whole_pct"),
            100.0 * (sum - whole) / whole,
        );
    }
}

/// The kernel's figures of a round (from bpftrace's maps, ns → cycles at `hz`).
fn kernel_round(
    k: &KernelStats,
    size: usize,
    hz: f64,
    m: &mut Metrics,
    rows: &mut Vec<(String, Metrics)>,
) -> io::Result<()> {
    let cyc = |ns: f64| ns * hz / 1e9;
    let get = |i: u32| k.stage(i);
    if get(K_RX_WHOLE.0).count == 0 || get(K_TX_WHOLE.0).count == 0 {
        let counts: Vec<String> = (1..=11).map(|i| format!("{i}:{}", get(i).count)).collect();
        return Err(io_err(format!(
            "the probes saw no whole path (samples per stage {}): tracepoints not firing?",
            counts.join(" ")
        )));
    }
    let mut means = std::collections::BTreeMap::new();
    for (dir, set, whole) in [("rx", &K_RX, K_RX_WHOLE), ("tx", &K_TX, K_TX_WHOLE)] {
        let total: f64 = set.iter().map(|(i, _, _)| cyc(get(*i).mean_ns)).sum();
        for (i, key, _) in set.iter() {
            let f = get(*i);
            let (mean, med) = (cyc(f.mean_ns), cyc(f.median_ns));
            means.insert(*key, mean);
            m.insert(format!("{key}_cyc"), mean);
            m.insert(format!("{key}_median_cyc"), med);
            rows.push((
                stage_case(dir, size, KERNEL, key),
                row(mean, med, total, hz, f.count),
            ));
        }
        let w = get(whole.0);
        check(m, dir, total, cyc(w.mean_ns), w.count);
        for l in LAYERS.iter().filter(|l| l.0 == dir) {
            let v: f64 = l.4.iter().filter_map(|key| means.get(key)).sum();
            if dir == "rx" {
                m.insert(format!("rx_{}_pct", l.1), 100.0 * v / total);
            }
            let mut r = Metrics::new();
            r.insert("mean_cyc".into(), v);
            r.insert("share_pct".into(), 100.0 * v / total);
            rows.push((layer_case(dir, size, l.1), r));
        }
    }
    m.insert("app_cyc".into(), cyc(get(K_APP.0).mean_ns));
    Ok(())
}

/// The hooks' own cost: a full receive, application and transmit trace, timed in a loop
/// (TSC cycles per echo). Call before [`ustage::reset`]: it fills the aggregates.
fn hook_cost() -> f64 {
    const N: u64 = 20_000;
    ustage::set_enabled(true);
    let t0 = ustage::now();
    for _ in 0..N {
        ulnet::stack::stage::rx_poll();
        ulnet::stack::stage::rx_frame();
        ulnet::stack::stage::rx_mark(Stage::RxEthernet);
        ulnet::stack::stage::rx_mark(Stage::RxIpv4);
        ulnet::stack::stage::rx_mark(Stage::RxUdp);
        ulnet::stack::stage::rx_delivered(PORT, true);
        ulnet::stack::stage::rx_frame_done();
        ulnet::stack::stage::rx_received(PORT);
        let s = ulnet::stack::stage::tx_enter();
        ulnet::stack::stage::tx_queued(PORT, true, s);
        ulnet::stack::stage::tx_pick(PORT);
        ulnet::stack::stage::tx_mark(Stage::TxUdp);
        ulnet::stack::stage::tx_mark(Stage::TxIpv4);
        ulnet::stack::stage::tx_mark(Stage::TxEthernet);
        ulnet::stack::stage::tx_mark(Stage::TxEthernet);
        ulnet::stack::stage::tx_mark(Stage::TxChannel);
        ulnet::stack::stage::tx_mark(Stage::TxIpv4);
        ulnet::stack::stage::tx_mark(Stage::TxUdp);
        ulnet::stack::stage::tx_submitted();
        ulnet::stack::stage::tx_emitted();
        let f = ulnet::stack::stage::tx_flush_start();
        ulnet::stack::stage::tx_flushed(f, 1);
    }
    let c = ustage::now().wrapping_sub(t0) as f64 / N as f64;
    ustage::set_enabled(false);
    c
}

/// The calling thread's kernel id (from `/proc/thread-self`, a link to `PID/task/TID`).
fn current_tid() -> io::Result<u32> {
    let link = std::fs::read_link("/proc/thread-self")?;
    link.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| io_err(format!("cannot read a tid from {}", link.display())))
}

// ---------------------------------------------------------------------------------------
// The kernel's probes

/// The bpftrace program for one round: the receive path of frames of `ip_len` bytes
/// arriving on `ifname`, and the echo thread `tid`'s send path. Per-stage stats and
/// linear histograms (50 ns buckets) in nanoseconds, keyed by stage number.
fn probe_script(tid: u32, ifname: &str, ip_len: usize) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r#"BEGIN {{ printf("ready\n"); }}
tracepoint:net:netif_rx /args->len == {ip_len} && str(args->name) == "{ifname}"/ {{
  @rx0[args->skbaddr] = nsecs;
}}
tracepoint:net:napi_gro_receive_entry /args->len == {ip_len} && str(args->name) == "{ifname}" && !@rx0[args->skbaddr]/ {{
  @rx0[args->skbaddr] = nsecs;
}}
tracepoint:net:netif_receive_skb /@rx0[args->skbaddr]/ {{
  $t = nsecs; $d = $t - @rx0[args->skbaddr];
  @st[1] = stats($d); @lh[1] = lhist($d, 0, 40000, 50);
  @rx1[args->skbaddr] = $t; @cur[cpu] = args->skbaddr;
}}
tracepoint:sock:sk_data_ready /@cur[cpu]/ {{
  $skb = @cur[cpu]; $t = nsecs; $d = $t - @rx1[$skb];
  @st[2] = stats($d); @lh[2] = lhist($d, 0, 40000, 50);
  // The oldest datagram queued keeps the socket's trace (the next read returns it);
  // its start goes first, so a reader on the other core never sees half a trace.
  if (!@rx2[args->skaddr]) {{ @rxw[args->skaddr] = @rx0[$skb]; @rx2[args->skaddr] = $t; }}
  delete(@cur[cpu]); delete(@rx1[$skb]); delete(@rx0[$skb]);
}}
tracepoint:sock:sock_recv_length /tid == {tid} && args->ret > 0 && @rx2[args->sk] && @rxw[args->sk]/ {{
  $t = nsecs; $d = $t - @rx2[args->sk];
  @st[3] = stats($d); @lh[3] = lhist($d, 0, 40000, 50);
  @copy[tid] = $t; @whole[tid] = @rxw[args->sk];
  delete(@rx2[args->sk]); delete(@rxw[args->sk]);
}}
tracepoint:syscalls:sys_exit_recvfrom /@copy[tid] && @whole[tid]/ {{
  $t = nsecs; $d = $t - @copy[tid]; $w = $t - @whole[tid];
  @st[4] = stats($d); @lh[4] = lhist($d, 0, 40000, 50);
  @st[10] = stats($w); @lh[10] = lhist($w, 0, 40000, 50);
  @app[tid] = $t; delete(@copy[tid]); delete(@whole[tid]);
}}
tracepoint:syscalls:sys_enter_sendto /tid == {tid}/ {{
  $t = nsecs;
  if (@app[tid]) {{ $d = $t - @app[tid]; @st[5] = stats($d); @lh[5] = lhist($d, 0, 40000, 50); delete(@app[tid]); }}
  @tx0[tid] = $t;
}}
tracepoint:net:net_dev_queue /@tx0[tid]/ {{
  $t = nsecs; $d = $t - @tx0[tid];
  @st[6] = stats($d); @lh[6] = lhist($d, 0, 40000, 50);
  @txq[tid] = $t; @txw[tid] = @tx0[tid]; delete(@tx0[tid]);
}}
tracepoint:net:net_dev_start_xmit /@txq[tid]/ {{
  $t = nsecs; $d = $t - @txq[tid];
  @st[7] = stats($d); @lh[7] = lhist($d, 0, 40000, 50);
  @txs[tid] = $t; delete(@txq[tid]);
}}
tracepoint:net:net_dev_xmit /@txs[tid]/ {{
  $t = nsecs; $d = $t - @txs[tid];
  @st[8] = stats($d); @lh[8] = lhist($d, 0, 40000, 50);
  @txx[tid] = $t; delete(@txs[tid]);
}}
tracepoint:syscalls:sys_exit_sendto /@txx[tid]/ {{
  $t = nsecs; $d = $t - @txx[tid]; $w = $t - @txw[tid];
  @st[9] = stats($d); @lh[9] = lhist($d, 0, 40000, 50);
  @st[11] = stats($w); @lh[11] = lhist($w, 0, 40000, 50);
  delete(@txx[tid]); delete(@txw[tid]);
}}
END {{
  clear(@rx0); clear(@rx1); clear(@rx2); clear(@rxw); clear(@cur); clear(@copy); clear(@whole);
  clear(@app); clear(@tx0); clear(@txq); clear(@txs); clear(@txx); clear(@txw);
}}
"#
    );
    s
}

/// Where the kernel's tracepoints are listed; bpftrace resolves `tracepoint:` probes
/// there.
const TRACEFS: &str = "/sys/kernel/tracing";

/// Mounts tracefs at [`TRACEFS`] when nothing is mounted there (a fresh VM booted without
/// systemd's `sys-kernel-tracing.mount` has the empty directory only; bpftrace then
/// fails with "tracepoint not found: net:netif_rx"). Left mounted: it is the kernel's
/// own pseudo-filesystem, and mounting it changes no setting.
fn ensure_tracefs() -> io::Result<()> {
    if std::path::Path::new(TRACEFS).join("events").is_dir() {
        return Ok(());
    }
    crate::exec::run("mount", ["-t", "tracefs", "nodev", TRACEFS])
        .map(|_| ())
        .map_err(|e| io_err(format!("bpftrace needs tracefs at {TRACEFS}: {e}")))
}

/// A running bpftrace, its script file and the thread reading its output.
struct Probes {
    child: ChildGuard,
    script: PathBuf,
    reader: JoinHandle<String>,
}

impl Probes {
    /// Starts bpftrace on `script` and waits until its probes are attached (its BEGIN
    /// probe prints `ready`; bpftrace flushes each line to a pipe, not to a file).
    fn start(script: &str) -> io::Result<Probes> {
        ensure_tracefs()?;
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let script_path =
            std::env::temp_dir().join(format!("ulnet-dispatch-{}-{n}.bt", std::process::id()));
        std::fs::write(&script_path, script)?;
        let mut cmd = Command::new("bpftrace");
        cmd.arg(&script_path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = ChildGuard::spawn(cmd).map_err(io_err)?;
        let stdout = child
            .child_mut()
            .stdout
            .take()
            .ok_or_else(|| io_err("bpftrace has no stdout"))?;
        let (ready_tx, ready_rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            use std::io::BufRead;
            let mut text = String::new();
            for line in io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.trim() == "ready" {
                    let _ = ready_tx.send(());
                }
                text.push_str(&line);
                text.push('\n');
            }
            text
        });
        if ready_rx.recv_timeout(ATTACH_TIMEOUT).is_err() {
            let o = child.kill().map_err(io_err)?;
            let _ = std::fs::remove_file(&script_path);
            let _ = reader.join();
            return Err(io_err(format!(
                "bpftrace did not attach within {ATTACH_TIMEOUT:?}: {}",
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .filter(|l| !l.contains("RLIMIT_MEMLOCK"))
                    .collect::<Vec<_>>()
                    .join(" | ")
            )));
        }
        Ok(Probes {
            child,
            script: script_path,
            reader,
        })
    }

    /// Stops bpftrace (SIGINT: it prints its maps and exits) and returns its output.
    fn stop(self) -> io::Result<String> {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32)
            .ok_or_else(|| io_err("bpftrace has no pid"))?;
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
        // Bounded: on timeout the guard kills it, and the reader sees the pipe close.
        let r = self.child.wait_timeout(Duration::from_secs(15));
        let _ = std::fs::remove_file(&self.script);
        let text = self
            .reader
            .join()
            .map_err(|_| io_err("the bpftrace reader panicked"))?;
        r.map_err(io_err)?;
        Ok(text)
    }
}

/// One kernel stage from bpftrace's maps, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct KStage {
    count: u64,
    mean_ns: f64,
    median_ns: f64,
}

/// Every kernel stage by number.
#[derive(Debug, Default)]
struct KernelStats {
    stages: std::collections::BTreeMap<u32, KStage>,
}

impl KernelStats {
    fn stage(&self, i: u32) -> KStage {
        self.stages.get(&i).copied().unwrap_or_default()
    }
}

/// Parses bpftrace's printout of `@st[N]: count C, average A, total T` and the linear
/// histograms `@lh[N]:` (lines `[lo, hi)  count |@@@|`), taking the median from the
/// histogram (interpolated in its bucket) and the mean from the stats.
fn parse_bpftrace(text: &str) -> KernelStats {
    let mut k = KernelStats::default();
    let mut hists: std::collections::BTreeMap<u32, Vec<(f64, f64, u64)>> = Default::default();
    let mut cur: Option<u32> = None;
    let key = |l: &str, map: &str| -> Option<u32> {
        let rest = l.strip_prefix(map)?;
        rest[..rest.find(']')?].parse().ok()
    };
    for line in text.lines() {
        let l = line.trim();
        if let Some(i) = key(l, "@st[") {
            cur = None;
            let num = |name: &str| -> Option<f64> {
                let at = l.find(name)? + name.len();
                let rest = l[at..].trim_start();
                let end = rest
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(rest.len());
                rest[..end].parse().ok()
            };
            let e = k.stages.entry(i).or_default();
            e.count = num("count").unwrap_or(0.0) as u64;
            e.mean_ns = num("average").unwrap_or(0.0);
        } else if let Some(i) = key(l, "@lh[") {
            cur = Some(i);
        } else if let (Some(i), Some(rest)) = (cur, l.strip_prefix('[')) {
            // "[100, 150)   3 |@@@   |"
            let Some(close) = rest.find(')') else {
                continue;
            };
            let bounds: Vec<&str> = rest[..close].split(',').map(str::trim).collect();
            let parse = |s: &str| -> Option<f64> {
                let s = s.trim_end_matches(|c: char| c.is_alphabetic());
                s.parse().ok()
            };
            let count = rest[close + 1..]
                .split_whitespace()
                .next()
                .and_then(|c| c.parse::<u64>().ok());
            if let ([lo, hi], Some(c)) = (&bounds[..], count) {
                if let (Some(lo), Some(hi)) = (parse(lo), parse(hi)) {
                    hists.entry(i).or_default().push((lo, hi, c));
                }
            }
        } else if l.starts_with('@') {
            cur = None;
        }
    }
    for (i, h) in hists {
        let total: u64 = h.iter().map(|b| b.2).sum();
        if total == 0 {
            continue;
        }
        let half = total.div_ceil(2);
        let mut seen = 0;
        for (lo, hi, c) in &h {
            if seen + c >= half {
                let frac = (half - seen) as f64 / *c as f64;
                k.stages.entry(i).or_default().median_ns = lo + frac * (hi - lo);
                break;
            }
            seen += c;
        }
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str = "ready\n\n\n@lh[1]: \n[200, 250)             3 |@@@@@@                      |\n[250, 300)             5 |@@@@@@@@@@                  |\n[300, 350)             2 |@@@@                        |\n\n@lh[10]: \n[1K, 1.05K)   1 |@@@@|\n\n@st[1]: count 10, average 270, total 2700\n@st[10]: count 1, average 1020, total 1020\n";

    #[test]
    fn bpftrace_maps() {
        let k = parse_bpftrace(OUT);
        let s1 = k.stage(1);
        assert_eq!(s1.count, 10);
        assert_eq!(s1.mean_ns, 270.0);
        // The 5th of 10 samples is the 2nd of the [250, 300) bucket's 5.
        assert!((s1.median_ns - 270.0).abs() < 1e-9, "{}", s1.median_ns);
        assert_eq!(k.stage(10).count, 1);
        assert_eq!(k.stage(2), KStage::default());
    }

    #[test]
    fn script_filters_on_the_flow() {
        let s = probe_script(1234, "dsp-a0", 128);
        assert!(s.contains("/tid == 1234/"));
        assert!(s.contains("args->len == 128 && str(args->name) == \"dsp-a0\""));
        // Every stage the tables name is in the script.
        for (i, _, _) in K_RX
            .iter()
            .chain(K_TX.iter())
            .chain([K_APP, K_RX_WHOLE, K_TX_WHOLE].iter())
        {
            assert!(s.contains(&format!("@st[{i}] = stats(")), "stage {i}");
        }
    }

    #[test]
    fn layers_cover_every_stage_once() {
        for dir in ["rx", "tx"] {
            let set: &[Stage] = if dir == "rx" { &Stage::RX } else { &Stage::TX };
            let mut u: Vec<Stage> = LAYERS
                .iter()
                .filter(|l| l.0 == dir)
                .flat_map(|l| l.3.iter().copied())
                .collect();
            assert_eq!(u.len(), set.len(), "{dir}");
            u.dedup();
            assert_eq!(u.len(), set.len(), "{dir}");
            let kset = if dir == "rx" { &K_RX } else { &K_TX };
            let k: Vec<&str> = LAYERS
                .iter()
                .filter(|l| l.0 == dir)
                .flat_map(|l| l.4.iter().copied())
                .collect();
            assert_eq!(k.len(), kset.len(), "{dir}");
            for (_, key, _) in kset {
                assert!(k.contains(key), "{key}");
            }
        }
    }
}
