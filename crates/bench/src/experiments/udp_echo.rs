//! Seed 003's Gigabit Ethernet figure: a UDP echo service under a sweep of offered loads,
//! from light to beyond saturation, on ulnet and on a kernel socket.
//!
//! What is measured: in namespace A an echo service (the system under test, on the SUT
//! core) sends every datagram it receives back to its sender: either a kernel UDP socket
//! (`std::net::UdpSocket`, blocking `recv_from`/`send_to`) or ulnet's public
//! `ulnet::net::UdpSocket` on an application thread, over AF_XDP with the runtime
//! sleeping between events. In namespace B a generator pinned to the load core offers
//! datagrams at a fixed rate from an AF_XDP socket (paced by batches against the clock,
//! [`super::load::xdp_echo_load`]) and, on the same thread, counts the echoes that come
//! back to it. Each point of the sweep is one offered rate for a fixed window; its
//! figures: offered and echoed throughput (UDP payload, Mb/s and kpps, both measured:
//! datagrams the generator's ring accepted, and echoes counted), loss (1 − echoed /
//! offered), and CPU. The sweep is 1 KB datagrams (the seed's figure) and a 64-byte
//! series (per-packet cost).
//!
//! CPU figures: `sut_*` is this process minus the generator thread, i.e. the echo
//! thread and, for ulnet, its runtime thread; `tasks_*` (machine) is every process's
//! precise run time, the generator included, so both systems carry the same generator
//! at the same offered rate. On veth the receiving side's kernel work (the kernel's
//! UDP receive path; for ulnet, the XDP redirect) runs on the *sending* core inside the
//! generator's send, so it is in the machine figure and not in the SUT figure; the
//! echo's own transmit (and B's receive of it) runs on the SUT core.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ulnet::runtime::WaitMode;

use super::load::{self, Flood};
use super::netchannel_cpu::{join, open_stack};
use super::xcheck::{self, Counters};
use super::Experiment;
use crate::harness::{io_err, online_cpus, Ctx, Metrics, Plan, Profile, Window, LOAD_CPU};
use crate::results::{ExperimentResult, Metric, PlotKind, PlotView, SystemKind, TableView, View};
use crate::summary::Summary;
use crate::testbed::{Side, Testbed};

/// The kernel's echo socket.
const KERNEL: &str = "kernel";
/// ulnet's echo socket.
const ULNET: &str = "ulnet-xdp";
/// The kernel's echo socket with the veth offloads on, as users run it.
const KERNEL_DEFAULT: &str = "kernel-default";
/// Every system, in alternation order.
const SYSTEMS: [&str; 3] = [KERNEL, ULNET, KERNEL_DEFAULT];
/// The echo port.
const PORT: u16 = 7;
/// The two datagram sizes (UDP payload bytes).
const BIG: usize = 1024;
const SMALL: usize = 64;
/// How long the generator keeps reaping echoes after its last send (at most).
const DRAIN: Duration = Duration::from_millis(200);
/// Setup and teardown of one measurement beyond its window (sockets, stacks, threads).
const OVERHEAD: Duration = Duration::from_millis(350);

/// `udp-echo`.
pub struct UdpEcho;

/// The sweep of a profile: offered loads of 1 KB datagrams (Mb/s of UDP payload), of
/// 64-byte datagrams (kpps), and the window per point.
fn sizes(p: Profile) -> (Vec<u64>, Vec<u64>, Duration) {
    let big_all = vec![
        50, 100, 250, 500, 750, 1000, 1250, 1500, 2000, 2500, 3000, 4000,
    ];
    let small_all = vec![25, 50, 100, 150, 200, 250, 300, 400, 500, 700];
    p.pick(
        (
            vec![100, 1000, 4000],
            vec![100, 500],
            Duration::from_millis(150),
        ),
        (
            vec![100, 250, 500, 750, 1000, 1500, 2000, 2500, 3000, 4000],
            vec![50, 150, 250, 400, 700],
            Duration::from_millis(300),
        ),
        (
            big_all.clone(),
            small_all.clone(),
            Duration::from_millis(800),
        ),
        (big_all, small_all, Duration::from_secs(2)),
    )
}

/// Datagrams per second for `mbps` of `payload`-byte datagrams.
fn pps_of_mbps(mbps: u64, payload: usize) -> u64 {
    mbps * 1_000_000 / (payload as u64 * 8)
}

/// The case of a point.
fn case_id(payload: usize, pps: u64) -> String {
    format!("{payload}B-{pps}pps")
}

/// The cross-check with an independent generator and counters (sockperf and nftables,
/// [`xcheck`]) of a profile: offered loads of 1 KB datagrams (Mb/s; `None`: as fast as
/// sockperf goes), and the seconds of each point.
fn xcheck_sizes(p: Profile) -> (Vec<Option<u64>>, u64) {
    let all = vec![
        Some(750),
        Some(1000),
        Some(1250),
        Some(1500),
        Some(2000),
        Some(2500),
        None,
    ];
    p.pick(
        (vec![Some(1000), None], 1),
        // Either side of the knees seen here (kernel 1250-1500, ulnet 1500-2000) and
        // sockperf's ceiling: the whole set took 100 s of a quick run.
        (vec![Some(1000), Some(1500), None], 1),
        (all.clone(), 2),
        (all, 2),
    )
}

/// The case of a cross-check point.
fn xcheck_id(pps: Option<u64>) -> String {
    pps.map_or_else(
        || "xcheck-1024B-max".into(),
        |p| format!("xcheck-1024B-{p}pps"),
    )
}

/// The cross-check's sentence: per system, the highest sockperf-paced load echoed with
/// < 1% loss beside the sweep's knee, and sockperf's flat-out echo rate beside the
/// sweep's at the nearest offered load.
fn xcheck_verdict(r: &ExperimentResult, s: &Summary) -> Option<String> {
    let case_ids = |key: &str| -> Vec<&str> {
        r.cases
            .iter()
            .filter(|c| c.params.get(key) == Some(&(BIG as f64)))
            .map(|c| c.id.as_str())
            .collect()
    };
    let (xc, sweep) = (case_ids("payload_bytes_xcheck"), case_ids("payload_bytes"));
    if xc.is_empty() {
        return None;
    }
    let knee = |cases: &[&str], sys: &str| {
        cases
            .iter()
            .filter(|c| !c.ends_with("-max"))
            .filter(|c| s.median(c, sys, "loss_pct").is_some_and(|l| l < 1.0))
            .filter_map(|c| s.median(c, sys, "offered_mbps"))
            .max_by(f64::total_cmp)
    };
    let f = |v: Option<f64>| v.map_or("none".to_owned(), |v| format!("{v:.0} Mb/s"));
    let flat = xc.iter().find(|c| c.ends_with("-max"));
    let parts: Vec<String> = [KERNEL, ULNET]
        .iter()
        .map(|sys| {
            let mut p = format!(
                "{sys}: highest sockperf load under 1% loss {} (the sweep's knee {})",
                f(knee(&xc, sys)),
                f(knee(&sweep, sys)),
            );
            let top = flat.and_then(|c| {
                Some((
                    s.median(c, sys, "offered_mbps")?,
                    s.median(c, sys, "echoed_mbps")?,
                ))
            });
            if let Some((off, echoed)) = top {
                let near = sweep
                    .iter()
                    .filter_map(|c| {
                        Some((
                            s.median(c, sys, "offered_mbps")?,
                            s.median(c, sys, "echoed_mbps")?,
                        ))
                    })
                    .min_by(|a, b| (a.0 - off).abs().total_cmp(&(b.0 - off).abs()));
                p += &format!(
                    ", sockperf flat out offered {off:.0} Mb/s and got {echoed:.0} Mb/s back"
                );
                if let Some((o2, e2)) = near {
                    p += &format!(" (the sweep at {o2:.0} Mb/s offered: {e2:.0} Mb/s)");
                }
            }
            p
        })
        .collect();
    Some(format!(
        "Cross-check with an independent generator and counters (sockperf, nftables), 1 KB: {}.",
        parts.join("; ")
    ))
}

/// Who offers the load and counts the echoes.
#[derive(Clone, Copy)]
enum Gen {
    /// The bench's AF_XDP generator ([`load::xdp_echo_load`]).
    Xdp,
    /// sockperf and nftables counters ([`xcheck::echo_load`]) for `secs` seconds, paced
    /// at the point's rate or (`paced` false) as fast as sockperf goes.
    Sockperf { paced: bool, secs: u64 },
}

impl Experiment for UdpEcho {
    fn name(&self) -> &'static str {
        "udp-echo"
    }
    fn seed(&self) -> &'static str {
        "003"
    }
    fn title(&self) -> &'static str {
        "UDP echo under a sweep of offered loads (1 KB and 64 B): echoed throughput, loss and CPU, ulnet vs kernel"
    }
    fn estimate(&self, plan: &Plan) -> Duration {
        let (big, small, w) = sizes(plan.profile);
        let points = (big.len() + small.len()) as u32;
        let (xc, secs) = xcheck_sizes(plan.profile);
        (w + OVERHEAD + DRAIN / 4) * (points * plan.rounds * SYSTEMS.len() as u32)
            + (Duration::from_secs(secs) + OVERHEAD + DRAIN) * (xc.len() as u32 * plan.rounds * 2)
            + Duration::from_secs(1)
    }
    fn tools(&self) -> &'static [&'static str] {
        &["ip", "ethtool", "sockperf", "nft", "taskset"]
    }
    fn supports_ipv6(&self) -> bool {
        true
    }
    fn run(&self, ctx: &mut Ctx<'_>) -> io::Result<()> {
        if ctx.ipv6() {
            ctx.note("Over IPv6: the generator sends IPv6/UDP frames from a spare address of B's 2001:2:0:<slot>::/64 to the kernel's or ulnet's IPv6 address in A (static neighbours both ways, as over IPv4); the payload is the same, each frame 20 bytes longer.");
        }
        let tb = Testbed::builder()
            .name_prefix("uecho")
            .ipv6(ctx.plan.ipv6)
            .build()
            .map_err(io_err)?;
        let r = run_on(ctx, &tb);
        tb.teardown().map_err(io_err)?;
        r
    }
    fn seed_figure(&self) -> &'static str {
        "Seed 003 (\"Comparative ethernet performance\", UDP echo over an Intel E1000 Gigabit \
         Ethernet NIC; its user-level *driver* under the kernel's IP stack, read off the text):\n\n\
         | applied load | throughput, user-level vs in-kernel driver | CPU |\n\
         | --- | --- | --- |\n\
         | up to ~750 Mb/s | almost identical | — |\n\
         | above 750 Mb/s | 93% of the in-kernel driver's | — |\n\
         | 720 Mb/s | — | largest difference: +4% of the machine, a 7% increase |\n\n\
         Claim: running the driver at user level costs no throughput up to ~750 Mb/s, 7% at \
         saturation, and at worst 7% more CPU."
    }
    fn verdict(&self, r: &ExperimentResult, s: &Summary) -> Vec<String> {
        let mut out = Vec::new();
        for (payload, what) in [(BIG, "1 KB"), (SMALL, "64 B")] {
            let mut cases: Vec<(&str, f64)> = r
                .cases
                .iter()
                .filter(|c| c.params.get("payload_bytes") == Some(&(payload as f64)))
                .filter_map(|c| Some((c.id.as_str(), *c.params.get("target_pps")?)))
                .collect();
            cases.sort_by(|a, b| a.1.total_cmp(&b.1));
            if cases.is_empty() {
                continue;
            }
            let knee = |sys: &str| -> Option<(f64, f64)> {
                cases
                    .iter()
                    .filter(|(c, _)| s.median(c, sys, "loss_pct").is_some_and(|l| l < 1.0))
                    .filter_map(|(c, _)| {
                        Some((
                            s.median(c, sys, "offered_mbps")?,
                            s.median(c, sys, "offered_kpps")?,
                        ))
                    })
                    .max_by(|a, b| a.0.total_cmp(&b.0))
            };
            let (kk, ku) = (knee(KERNEL), knee(ULNET));
            let fmt = |k: Option<(f64, f64)>| {
                k.map_or("no point under 1% loss".into(), |(m, p)| {
                    format!("{m:.0} Mb/s ({p:.0} kpps)")
                })
            };
            let top = cases.last().map(|c| c.0);
            let top_ratio = top.and_then(|c| s.paired(c, ULNET, KERNEL, "echoed_mbps"));
            let top_loads = top.and_then(|c| {
                Some((
                    s.median(c, KERNEL, "offered_mbps")?,
                    s.median(c, KERNEL, "echoed_mbps")?,
                    s.median(c, ULNET, "echoed_mbps")?,
                ))
            });
            let mut line = format!(
                "{what}: knee (highest offered load echoed with < 1% loss) kernel {}, ulnet {}",
                fmt(kk),
                fmt(ku)
            );
            if s.median(cases[0].0, KERNEL_DEFAULT, "echoed_mbps")
                .is_some()
            {
                line += &format!(
                    ", kernel with its default offloads {}",
                    fmt(knee(KERNEL_DEFAULT))
                );
            }
            if let (Some(ratio), Some((off, ke, ue))) = (top_ratio, top_loads) {
                line += &format!(
                    "; at the highest offered load ({off:.0} Mb/s) ulnet echoed {ue:.0} Mb/s, {ratio:.2}x the kernel's {ke:.0} Mb/s"
                );
                if payload == BIG {
                    let holds = ratio >= 0.93;
                    line += &format!(
                        " (the seed's user-level driver: 0.93x), so the seed's throughput claim {} here",
                        if holds { "holds" } else { "does not hold" }
                    );
                }
            }
            out.push(line + ".");
            // CPU at each load, ulnet − kernel: the SUT's (the echo service's threads),
            // and the machine's (every task, other work on the machine included).
            let mut worst: Option<(f64, f64, f64)> = None; // (offered Mb/s, diff cores, relative)
            let mut worst_machine: Option<(f64, f64)> = None; // (offered Mb/s, diff cores)
            for (c, _) in &cases {
                let Some(off) = s.median(c, KERNEL, "offered_mbps") else {
                    continue;
                };
                if let (Some(k), Some(u)) = (
                    s.median(c, KERNEL, "sut_cores"),
                    s.median(c, ULNET, "sut_cores"),
                ) {
                    let d = u - k;
                    if worst.is_none_or(|w| d.abs() > w.1.abs()) {
                        worst = Some((off, d, if k > 0.0 { d / k } else { f64::NAN }));
                    }
                }
                if let (Some(k), Some(u)) = (
                    s.median(c, KERNEL, "tasks_cores"),
                    s.median(c, ULNET, "tasks_cores"),
                ) {
                    let d = u - k;
                    if worst_machine.is_none_or(|w| d.abs() > w.1.abs()) {
                        worst_machine = Some((off, d));
                    }
                }
            }
            if let Some((off, d, rel)) = worst {
                let cores = online_cpus().max(1) as f64;
                let mut line = format!(
                    "{what}: the largest difference in the echo service's CPU (ulnet − kernel) is {d:+.2} cores ({:+.1}% of the machine's {cores:.0} cores, {:+.0}% relative) at {off:.0} Mb/s offered",
                    100.0 * d / cores,
                    100.0 * rel
                );
                if let Some((moff, md)) = worst_machine {
                    line += &format!(
                        "; machine-wide (all tasks) {:+.1}% of the machine at {moff:.0} Mb/s",
                        100.0 * md / cores
                    );
                }
                if payload == BIG {
                    line += &format!(
                        "; the seed's worst was +4% of the machine (+7% relative), so its CPU claim {} here",
                        if rel <= 0.07 { "holds" } else { "does not hold" }
                    );
                }
                out.push(line + ".");
            }
        }
        if out.is_empty() {
            out.push("Missing ulnet or kernel figures: no verdict.".into());
        }
        out.extend(xcheck_verdict(r, s));
        out
    }
}

fn declare(ctx: &mut Ctx<'_>, window: Duration) {
    let common = |api: &str, wait: &str| {
        vec![
            ("api", api.to_owned()),
            ("wait", wait.to_owned()),
            ("mtu", "1500".to_owned()),
            (
                "offloads",
                "off (testbed default; UDP without GSO: only checksums would be offloaded)"
                    .to_owned(),
            ),
            (
                "generator",
                "AF_XDP UDP flood from B (CPU 0), paced by batches, counting echoes on the same thread".to_owned(),
            ),
            ("window", format!("{window:?} per point")),
        ]
    };
    ctx.system(
        KERNEL,
        "kernel UDP socket",
        SystemKind::Kernel,
        false,
        &common(
            "std::net::UdpSocket in namespace A, recv_from then send_to",
            "blocking recv_from",
        ),
    );
    let mut default = common(
        "std::net::UdpSocket in namespace A, recv_from then send_to",
        "blocking recv_from",
    );
    for (k, v) in &mut default {
        if *k == "offloads" {
            *v = "kernel defaults (ethtool -K tx/tso/gso/gro on at both veth ends for these rounds; \
                  the generator's XDP program stays on B's veth: it must receive the echoes)"
                .to_owned();
        }
    }
    ctx.system(
        KERNEL_DEFAULT,
        "kernel UDP socket, default offloads",
        SystemKind::Kernel,
        false,
        &default,
    );
    ctx.system(
        ULNET,
        "ulnet (AF_XDP), sleeping",
        SystemKind::Ulnet,
        false,
        &common(
            "ulnet::net::UdpSocket (public socket API) on an application thread, recv_from then send_to",
            "runtime WaitMode::Sleep; blocking recv_from",
        ),
    );
}

fn views(ctx: &mut Ctx<'_>, big: &[String], small: &[String]) {
    let table_metrics = || {
        vec![
            Metric::more("echoed_mbps", "echoed (Mb/s)", 0),
            Metric::plain("offered_mbps", "offered (Mb/s)", 0),
            Metric::plain("offered_kpps", "offered (kpps)", 1),
            Metric::more("echoed_kpps", "echoed (kpps)", 1),
            Metric::less("loss_pct", "loss (%)", 2),
            Metric::less("socket_drops_pct", "of which socket buffer full (%)", 2),
            Metric::less("sut_cores", "echo service CPU (cores)", 2),
            Metric::less("tasks_cores", "machine CPU, all tasks (cores)", 2),
        ]
    };
    for (cases, what, xl) in [
        (big, "1 KB", "offered load (Mb/s of UDP payload)"),
        (small, "64 B", "offered load (kpps)"),
    ] {
        if cases.is_empty() {
            continue;
        }
        ctx.view(View::Table(TableView {
            title: format!("UDP echo, {what} datagrams: one row per offered load"),
            cases: cases.to_vec(),
            systems: Vec::new(),
            metrics: table_metrics(),
            baselines: vec![KERNEL.into()],
            ratio_metric: None,
        }));
        let tag = if what == "1 KB" { "1k" } else { "64" };
        let (y, y_label) = if tag == "1k" {
            ("echoed_mbps", "echoed (Mb/s)")
        } else {
            ("echoed_kpps", "echoed (kpps)")
        };
        ctx.view(View::Plot(PlotView {
            id: format!("echoed-{tag}"),
            title: format!("UDP echo, {what}: echoed throughput against offered load"),
            kind: PlotKind::Lines,
            cases: cases.to_vec(),
            systems: Vec::new(),
            x_param: Some(format!(
                "target_{}",
                if tag == "1k" { "mbps" } else { "kpps" }
            )),
            x_label: xl.into(),
            y: Metric::more(y, y_label, 0),
            y2: None,
            x_log: false,
        }));
        ctx.view(View::Plot(PlotView {
            id: format!("cpu-{tag}"),
            title: format!("UDP echo, {what}: CPU against offered load"),
            kind: PlotKind::Lines,
            cases: cases.to_vec(),
            systems: Vec::new(),
            x_param: Some(format!(
                "target_{}",
                if tag == "1k" { "mbps" } else { "kpps" }
            )),
            x_label: xl.into(),
            y: Metric::less("sut_cores", "echo service CPU (cores)", 2),
            y2: Some(Metric::less(
                "tasks_cores",
                "machine CPU, all tasks (cores)",
                2,
            )),
            x_log: false,
        }));
    }
}

fn run_on(ctx: &mut Ctx<'_>, tb: &Testbed) -> io::Result<()> {
    let (big, small, window) = sizes(ctx.profile());
    let (a, b) = (tb.a(), tb.b());
    declare(ctx, window);
    let v6 = a.ipv6;
    let gen_ip = b.spare_of(v6, 0);
    let ua = a.spare_of(v6, 0);
    ctx.param(
        "addresses",
        format!("generator {gen_ip}, kernel A {}, ulnet A {ua}", a.ip_of(v6)),
    );
    // The kernel in A answers the generator's spare address without ARP (the
    // generator's AF_XDP socket would swallow ARP replies meant for B's kernel).
    a.set_neighbor(gen_ip, b.mac).map_err(io_err)?;
    let rmem = std::fs::read_to_string("/proc/sys/net/core/rmem_default")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".into());
    ctx.system_setup(
        KERNEL,
        "socket buffers",
        format!("kernel defaults (rmem_default {rmem} bytes)"),
    );
    ctx.system_setup(
        ULNET,
        "socket buffers",
        "UdpSocket::bind defaults (256 datagrams / 256 KiB each way)",
    );
    ctx.param("payload_bytes", format!("{BIG} and {SMALL}"));
    ctx.param("window", format!("{window:?}"));
    ctx.param(
        "drain_after_window",
        format!("up to {DRAIN:?} (ends after 20 ms without an echo)"),
    );
    ctx.param("offered_1k_mbps", format!("{big:?}"));
    ctx.param("offered_64_kpps", format!("{small:?}"));
    ctx.note("Throughput figures are UDP payload. Offered = datagrams the generator's AF_XDP ring accepted over the window (measured, so where the generator cannot keep up, offered falls below the target); echoed = echoes it counted (over the window and the drain after it), both divided by the window.");
    ctx.note("The generator (one AF_XDP socket on B's veth, one thread on CPU 0) sends and reaps echoes on the same thread; its own ceiling shows as offered < target at the top of the sweep. On veth the receiving kernel's work runs on the sending core, i.e. CPU 0, which the generator shares.");
    ctx.note("CPU: SUT = this process minus the generator thread (echo thread, and for ulnet its runtime thread); machine = every task's precise run time, the generator included (the same generator at the same rate for both systems) and so is any other work on the machine: where it reads ~2 cores in every round the machine was busy with more than this experiment, and the knee moves with that load (the echo thread waits for its core while its socket buffer fills). Cores = CPU seconds / wall seconds of the window (including the drain).");
    ctx.note("The kernel is measured with offloads off (the testbed's default) and, as users run it, with its default offloads (kernel-default: ethtool -K tx/tso/gso/gro on at both veth ends for those rounds, off again before the next); with 1 KB UDP datagrams and no GSO, offloads mostly save checksums. The generator's XDP program on B's veth is there in every system's rounds (it receives the echoes), so kernel-default is not free of XDP on the link: a native program on B turns off TSO on A, which UDP without GSO does not use.");

    let mut big_ids = Vec::new();
    let mut small_ids = Vec::new();
    let mut points: Vec<(usize, u64, f64)> = Vec::new();
    for &m in &big {
        let pps = pps_of_mbps(m, BIG);
        let id = case_id(BIG, pps);
        big_ids.push(id);
        points.push((BIG, pps, m as f64));
    }
    for &k in &small {
        let pps = k * 1000;
        let id = case_id(SMALL, pps);
        small_ids.push(id);
        points.push((SMALL, pps, (pps * SMALL as u64 * 8) as f64 / 1e6));
    }
    views(ctx, &big_ids, &small_ids);
    let mut mode: Option<String> = None;
    for (payload, pps, mbps) in points {
        let id = case_id(payload, pps);
        ctx.case(
            &id,
            &format!("{payload} B at {mbps:.0} Mb/s ({} kpps)", pps / 1000),
            &[
                ("payload_bytes", payload as f64),
                ("target_pps", pps as f64),
                ("target_kpps", pps as f64 / 1000.0),
                ("target_mbps", mbps),
            ],
        );
        ctx.alternate(&id, &SYSTEMS, |sys, _| {
            let default = sys == KERNEL_DEFAULT;
            if default {
                set_offloads(a, b, true)?;
            }
            let r = measure(sys, a, b, gen_ip, ua, payload, pps, window, Gen::Xdp);
            // Off again whatever happened: ulnet's raw reader needs them off.
            if default {
                set_offloads(a, b, false)?;
            }
            let (m, md) = r?;
            if md.is_some() {
                mode = md;
            }
            Ok(m)
        });
    }
    cross_check(ctx, a, b, gen_ip, ua);
    if let Some(m) = mode {
        ctx.system_setup(ULNET, "channel", format!("xdp ({m})"));
    }
    Ok(())
}

/// The same echo services under load from an independent generator and counter
/// (`sockperf` and nftables counters, see [`xcheck`]): the knee the sweep finds
/// should not be the bench generator's own.
fn cross_check(ctx: &mut Ctx<'_>, a: &Side, b: &Side, gen_ip: IpAddr, ua: IpAddr) {
    if a.ipv6 {
        ctx.note("No cross-check over IPv6: sockperf 3.7 (Debian's) speaks IPv4 only.");
        return;
    }
    let (points, secs) = xcheck_sizes(ctx.profile());
    ctx.note(format!("Cross-check (cases xcheck-*): the kernel's and ulnet's echo services as above, but the load from sockperf under-load (Debian's sockperf, from B's kernel socket, one process on CPU {LOAD_CPU}, 1 KB datagrams, every one asking for a reply, paced by its own sender with --mps for {secs} s, or --mps=max), and both counts from nftables counters on B's interface: datagrams leaving at the egress hook, echoes arriving at the ingress hook (dropped there, read {DRAIN:?} after sockperf ends). The bench's code neither paces nor counts. Offered = datagrams counted leaving / sockperf's test time (its few warm-up datagrams before the timer are in the count). netsniff-ng's trafgen was tried first: its --rate sends line-rate bursts with ~10 ms pauses, which every echo service drops from at any average rate, and its evenly spaced --gap mode stops near 45 kpps here."));
    let ids: Vec<String> = points
        .iter()
        .map(|p| xcheck_id(p.map(|m| pps_of_mbps(m, BIG))))
        .collect();
    ctx.view(View::Table(TableView {
        title: "Cross-check, 1 KB datagrams: sockperf's load, both counts from nftables".into(),
        cases: ids,
        systems: vec![KERNEL.into(), ULNET.into()],
        metrics: vec![
            Metric::more("echoed_mbps", "echoed (Mb/s)", 0),
            Metric::plain("offered_mbps", "offered (Mb/s)", 0),
            Metric::plain("offered_kpps", "offered (kpps)", 1),
            Metric::more("echoed_kpps", "echoed (kpps)", 1),
            Metric::less("loss_pct", "loss (%)", 2),
            Metric::less("sut_cores", "echo service CPU (cores)", 2),
        ],
        baselines: vec![KERNEL.into()],
        ratio_metric: None,
    }));
    for p in points {
        let pps = p.map_or(0, |m| pps_of_mbps(m, BIG));
        let id = xcheck_id(p.map(|_| pps));
        let label = p.map_or_else(
            || "cross-check: 1024 B, sockperf --mps=max".to_owned(),
            |m| {
                format!(
                    "cross-check: 1024 B at {m} Mb/s ({} kpps, sockperf)",
                    pps / 1000
                )
            },
        );
        ctx.case(
            &id,
            &label,
            &[
                ("payload_bytes_xcheck", BIG as f64),
                ("target_pps", pps as f64),
            ],
        );
        let gen = Gen::Sockperf {
            paced: p.is_some(),
            secs,
        };
        let window = Duration::from_secs(secs);
        ctx.alternate(&id, &[KERNEL, ULNET], |sys, _| {
            measure(sys, a, b, gen_ip, ua, BIG, pps, window, gen).map(|(m, _)| m)
        });
    }
}

/// Turns the offloads the testbed switched off on (the kernel's defaults) or off again,
/// at both veth ends.
fn set_offloads(a: &Side, b: &Side, on: bool) -> io::Result<()> {
    let v = if on { "on" } else { "off" };
    for side in [a, b] {
        let dev = side.ifname.as_str();
        side.run(
            "ethtool",
            ["-K", dev, "tx", v, "tso", v, "gso", v, "gro", v],
        )
        .map_err(io_err)?;
    }
    Ok(())
}

/// An echo service's thread (handing back what it echoed and, for ulnet, what its
/// socket dropped) and its stop flag.
type Server = (JoinHandle<io::Result<(u64, Option<u64>)>>, Arc<AtomicBool>);

/// `RcvbufErrors` of the `Udp:` lines of `/proc/net/snmp`: datagrams the kernel dropped
/// because a socket's receive buffer was full.
fn parse_udp_rcvbuf_errors(text: &str) -> Option<u64> {
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let (head, vals) = (udp.next()?, udp.next()?);
    head.split_whitespace()
        .zip(vals.split_whitespace())
        .find(|(h, _)| *h == "RcvbufErrors")?
        .1
        .parse()
        .ok()
}

/// The kernel's UDP receive-buffer drops so far in namespace `ns`.
fn udp_rcvbuf_errors(ns: &str) -> io::Result<u64> {
    let out = crate::exec::run_in(ns, "cat", ["/proc/net/snmp"]).map_err(io_err)?;
    parse_udp_rcvbuf_errors(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| io_err("no Udp RcvbufErrors in /proc/net/snmp"))
}

/// One point for one system: starts the echo service, offers the load, stops the
/// service. Also the XDP mode, for ulnet.
#[allow(clippy::too_many_arguments)]
fn measure(
    sys: &str,
    a: &Side,
    b: &Side,
    gen_ip: IpAddr,
    ua: IpAddr,
    payload: usize,
    pps: u64,
    window: Duration,
    gen: Gen,
) -> io::Result<(Metrics, Option<String>)> {
    let (to_ip, stack) = if sys == ULNET {
        let (st, mode) = open_stack(a, ua, WaitMode::Sleep, &[(gen_ip, b.mac.0)])?;
        (ua, Some((st, mode)))
    } else {
        (a.ip_of(a.ipv6), None)
    };
    let at = SocketAddr::new(to_ip, PORT);
    let server: Server = match &stack {
        Some((st, _)) => {
            let s = ulnet::net::UdpSocket::bind(st, at)?;
            s.set_read_timeout(Some(Duration::from_millis(50)))?;
            let stop = Arc::new(AtomicBool::new(false));
            let st2 = Arc::clone(&stop);
            // The echo thread inherits the SUT core from the main thread.
            let t = std::thread::spawn(move || {
                let n = echo_loop(|buf| s.recv_from(buf), |buf, to| s.send_to(buf, to), &st2)?;
                Ok((n, Some(s.dropped_count())))
            });
            (t, stop)
        }
        None => {
            let stop = Arc::new(AtomicBool::new(false));
            let st2 = Arc::clone(&stop);
            let t = load::in_ns(
                &a.ns,
                None,
                move || {
                    let s = UdpSocket::bind(at)?;
                    s.set_read_timeout(Some(Duration::from_millis(50)))?;
                    Ok(s)
                },
                move |s| {
                    let n = echo_loop(|buf| s.recv_from(buf), |buf, to| s.send_to(buf, to), &st2)?;
                    Ok((n, None))
                },
            )?;
            (t, stop)
        }
    };
    let flood = Flood {
        ns: b.ns.clone(),
        ifname: b.ifname.clone(),
        macs: (b.mac.0, a.mac.0),
        ips: (gen_ip, to_ip),
        port: PORT,
        payload_len: payload,
    };
    let counters = match gen {
        Gen::Sockperf { .. } => Some(Counters::install(&flood)),
        Gen::Xdp => None,
    };
    let drops0 = udp_rcvbuf_errors(&a.ns);
    let r = (|| {
        let w = Window::start()?;
        let done = match (gen, &counters) {
            (Gen::Sockperf { paced, secs }, Some(c)) => {
                let c = c.as_ref().map_err(|e| io_err(format!("nft: {e}")))?;
                let d = xcheck::echo_load(&flood, c, paced.then_some(pps), secs, DRAIN)?;
                // sockperf is another process: its CPU is in the machine's figure only.
                load::EchoDone {
                    sent: load::Done {
                        count: d.sent,
                        elapsed: d.elapsed,
                        cpu: Duration::ZERO,
                    },
                    echoed: d.echoed,
                }
            }
            _ => join(
                load::xdp_echo_load(flood, pps, window, u64::MAX, DRAIN)?,
                "generator",
            )?,
        };
        let cpu = w.finish(done.sent.cpu)?;
        Ok::<_, io::Error>((done, cpu))
    })();
    drop(counters);
    let (thread, stop) = server;
    stop.store(true, Ordering::Relaxed);
    let echoed_by_server = join(thread, "echo service");
    let mode = stack.map(|(st, mode)| {
        drop(st);
        mode
    });
    let (done, cpu) = r?;
    let (_, ulnet_drops) = echoed_by_server?;
    let socket_drops = match ulnet_drops {
        Some(d) => d,
        None => udp_rcvbuf_errors(&a.ns)?.saturating_sub(drops0?),
    };
    let span = done.sent.elapsed.as_secs_f64();
    if done.sent.count == 0 || span <= 0.0 {
        return Err(io_err("the generator sent nothing"));
    }
    let bits = (payload * 8) as f64;
    let sent = done.sent.count as f64;
    let echoed = done.echoed as f64;
    let mut m = cpu.metrics(
        Some(done.echoed * payload as u64),
        Some(done.sent.count + done.echoed),
    );
    m.insert("offered_mbps".into(), sent * bits / span / 1e6);
    m.insert("offered_kpps".into(), sent / span / 1e3);
    m.insert("echoed_mbps".into(), echoed * bits / span / 1e6);
    m.insert("echoed_kpps".into(), echoed / span / 1e3);
    m.insert("loss_pct".into(), (100.0 * (sent - echoed) / sent).max(0.0));
    m.insert("target_kpps".into(), pps as f64 / 1e3);
    // Where the loss was: datagrams the echo socket's full receive buffer dropped.
    m.insert(
        "socket_drops_pct".into(),
        100.0 * socket_drops as f64 / sent,
    );
    if matches!(gen, Gen::Xdp) {
        m.insert("generator_cores".into(), done.sent.cpu.as_secs_f64() / span);
    }
    Ok((m, mode))
}

/// Sends every datagram back to its sender until `stop`; returns how many it echoed.
/// A read timeout only rechecks `stop`. (`dispatch` echoes with it too.)
pub(super) fn echo_loop(
    mut recv: impl FnMut(&mut [u8]) -> io::Result<(usize, SocketAddr)>,
    mut send: impl FnMut(&[u8], SocketAddr) -> io::Result<usize>,
    stop: &AtomicBool,
) -> io::Result<u64> {
    let mut buf = [0u8; 2048];
    let mut n_echoed = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match recv(&mut buf) {
            Ok((n, from)) => {
                send(&buf[..n], from)?;
                n_echoed += 1;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n_echoed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snmp_rcvbuf_errors() {
        let t = "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\nUdp: 516 0 7 519 42 0\nUdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\nUdpLite: 0 0 0 0 0\n";
        assert_eq!(parse_udp_rcvbuf_errors(t), Some(42));
        assert_eq!(parse_udp_rcvbuf_errors("Tcp: a\nTcp: 1\n"), None);
    }

    #[test]
    fn sweep_rates() {
        // 1 Gb/s of 1024-byte payloads is 122,070 datagrams a second.
        assert_eq!(pps_of_mbps(1000, 1024), 122_070);
        assert_eq!(pps_of_mbps(100, 64), 195_312);
        for p in [
            Profile::Smoke,
            Profile::Quick,
            Profile::Default,
            Profile::Full,
        ] {
            let (big, small, _) = sizes(p);
            // Strictly increasing, so every point is its own case.
            assert!(big.windows(2).all(|w| w[0] < w[1]));
            assert!(small.windows(2).all(|w| w[0] < w[1]));
            if p >= Profile::Quick {
                assert!(big.len() >= 10, "the issue asks for >= 10 points");
            }
        }
    }
}
