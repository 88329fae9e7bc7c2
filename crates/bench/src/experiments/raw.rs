//! Each channel alone, no protocol work: receive-and-drop and transmit-only, with 60-byte
//! and 1500-byte frames, so every ulnet figure can be read as a fraction of what its
//! channel can carry on this machine.
//!
//! Receive (`rx-60`, `rx-1500`): an AF_XDP flood from B's veth end at its full rate
//! (pinned to the load core) into A; the channel under test, on the system-under-test
//! core, busy-polls and drops every frame: `xdp` (AF_XDP socket with the steering program,
//! the flood addressed to ulnet's spare address), `packet` (AF_PACKET TPACKET_V3 ring; the
//! kernel also processes each frame, which it then drops as not its own), and the
//! `kernel-udp` reference (a UDP socket on A's address, drained with `recvmmsg(2)`, up to
//! 64 datagrams a call, until `EAGAIN`, then `poll(2)`).
//! Figure: frames the receiver got per second of generator time.
//!
//! Transmit (`tx-60`, `tx-1500`): the channel under test, on the system-under-test core,
//! sends the same frame as fast as it can for the window (`xdp`, `packet`, `tap`, and a
//! kernel UDP socket calling `sendto` in a loop); the figure is what *arrived*: the
//! receiving side's kernel counter (`rx_packets` of B's veth end, or of the TAP device for
//! `tap`, whose peer is A's own kernel), not what was sent.
//!
//! TAP receive is not measured: a TAP device's peer is its own namespace's kernel, so the
//! only way to feed it from the AF_XDP generator is kernel IP forwarding from the veth
//! into the TAP, whose cost would dominate (the kernel's forwarding, not the channel).
//!
//! CPU figures: machine-wide user/system/softirq time over the window from /proc/stat
//! (on veth the receiver's kernel work runs on the sending core), and the system under
//! test's CPU = this process's CPU minus the generator thread's (rx cases); per packet
//! and per GB of the frames received (rx) or arrived (tx).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ulnet::channel::packet::{PacketChannel, PacketOptions};
use ulnet::channel::tap::{TapChannel, TapOptions};
use ulnet::channel::xdp::XdpOptions;
use ulnet::channel::Channel;

use super::hurd_udp::{join, kernel_udp_rx, link, open_xdp, v4};
use super::load::{self, Flood};
use super::Experiment;
use crate::harness::{io_err, Ctx, Metrics, Plan, Window, SUT_CPU};
use crate::results::{ExperimentResult, Metric, PlotKind, PlotView, SystemKind, TableView, View};
use crate::summary::Summary;
use crate::testbed::{Side, Testbed};

/// The port frames are addressed to.
const PORT: u16 = 9000;
/// How long a receiver keeps polling after the generator stops.
const GRACE: Duration = Duration::from_millis(50);

/// The experiment.
#[derive(Debug)]
pub struct Raw;

/// Seconds per measurement window, by profile.
fn window(plan: &Plan) -> f64 {
    plan.profile.pick(0.25, 0.5, 1.0, 3.0)
}

const CASES: [(&str, bool, usize); 4] = [
    ("rx-60", true, 60),
    ("rx-1500", true, 1500),
    ("tx-60", false, 60),
    ("tx-1500", false, 1500),
];
const RX_SYSTEMS: [&str; 3] = ["kernel-udp", "xdp", "packet"];
const TX_SYSTEMS: [&str; 4] = ["kernel-udp", "xdp", "packet", "tap"];

impl Experiment for Raw {
    fn name(&self) -> &'static str {
        "raw"
    }
    fn seed(&self) -> &'static str {
        "-"
    }
    fn title(&self) -> &'static str {
        "Each channel alone (rx drop, tx only; 60 B and 1500 B frames): the ceilings ulnet's figures are fractions of"
    }
    fn estimate(&self, plan: &Plan) -> Duration {
        let w = window(plan);
        let measurements = (2 * RX_SYSTEMS.len() + 2 * TX_SYSTEMS.len()) as f64;
        // Per measurement: channel and generator open/close, counter reads.
        let overhead = 0.35;
        Duration::from_secs_f64(1.5 + measurements * (w + overhead) * f64::from(plan.rounds))
    }
    fn tools(&self) -> &'static [&'static str] {
        &["ip", "ethtool", "sysctl"]
    }
    fn run(&self, ctx: &mut Ctx<'_>) -> io::Result<()> {
        let tb = Testbed::builder()
            .name_prefix("raw")
            .build()
            .map_err(io_err)?;
        let r = run_on(ctx, &tb);
        tb.teardown().map_err(io_err)?;
        r
    }
    fn seed_figure(&self) -> &'static str {
        "Not a seed. What this machine measured before (docs/LINUX-NOTES.md, 60-byte frames, medians of 3, \
         generator-capped where noted):\n\n\
         | path | rate |\n| --- | --- |\n\
         | kernel UDP socket receive (batched) | ~339 kpps |\n\
         | AF_XDP receive, busy-poll (copy mode) | ~574 kpps (905 kpps with a faster generator) |\n\
         | AF_XDP receive, sleeping in poll() | ~382 kpps |\n\
         | XDP_DROP (no delivery) | ~663 kpps (1.03 Mpps with a faster generator) |\n\
         | AF_PACKET TPACKET_V3 receive (kernel also processes each packet) | ~306 kpps |\n\
         | AF_PACKET receive with a tc drop after capture | ~600 kpps |\n\
         | AF_XDP transmit | ~1.0 Mpps |\n\
         | TAP write / read loop | ~432 kpps / ≥ 744 kpps |"
    }
    fn verdict(&self, r: &ExperimentResult, s: &Summary) -> Vec<String> {
        let mut out = Vec::new();
        for (case, _, _) in CASES {
            let Some(c) = r.case(case) else { continue };
            let mut best: Vec<(f64, String)> = r
                .systems
                .iter()
                .filter_map(|sys| Some((s.median(case, &sys.id, "pps")?, sys.id.clone())))
                .collect();
            best.sort_by(|a, b| b.0.total_cmp(&a.0));
            if best.is_empty() {
                continue;
            }
            let list = best
                .iter()
                .map(|(p, id)| format!("{id} {:.0} kpps", p / 1e3))
                .collect::<Vec<_>>()
                .join(", ");
            out.push(format!(
                "{}: {} carries the most ({list}).",
                c.label, best[0].1
            ));
        }
        out
    }
}

fn run_on(ctx: &mut Ctx<'_>, tb: &Testbed) -> io::Result<()> {
    let (a, b) = (tb.a(), tb.b());
    let secs = window(ctx.plan);
    let w = Duration::from_secs_f64(secs);
    let spare = v4(a.spare_ip(0))?;
    ctx.param("window_s", secs);
    ctx.param(
        "rx_generator",
        "AF_XDP flood from B's veth end, unpaced, pinned to the load core",
    );
    ctx.param(
        "tx_count",
        "frames that arrived: the receiving kernel's rx_packets (B's veth; the TAP device for tap)",
    );
    let mtu = a.mtu.to_string();
    ctx.system(
        "kernel-udp",
        "kernel UDP socket (recvmmsg / sendto loop)",
        SystemKind::Kernel,
        false,
        &[
            ("rx", format!("UDP socket on {}:{PORT}: recvmmsg(2), up to 64 datagrams a call, until EAGAIN, then poll(2)", a.ip)),
            ("tx", format!("UDP socket sendto({}:{PORT}) in a loop, blocking", b.ip)),
            ("offloads", "off (testbed default)".into()),
            ("mtu", mtu.clone()),
        ],
    );
    ctx.system(
        "xdp",
        "AF_XDP (busy-poll)",
        SystemKind::Channel,
        false,
        &[
            (
                "rx",
                format!("XdpChannel on A's veth, steering {spare}; rx_batch(64) busy-poll, drop"),
            ),
            (
                "tx",
                "XdpChannel on A's veth; send + flush per 64 frames".into(),
            ),
            ("mtu", mtu.clone()),
        ],
    );
    ctx.system(
        "packet",
        "AF_PACKET TPACKET_V3 (busy-poll)",
        SystemKind::Channel,
        false,
        &[
            ("rx", "PacketChannel on A's veth; rx_batch(64) busy-poll, drop; the kernel also processes (and drops) each frame".into()),
            ("tx", "PacketChannel on A's veth; send + flush per 64 frames".into()),
            ("mtu", mtu.clone()),
        ],
    );
    ctx.system(
        "tap",
        "TAP (tx only)",
        SystemKind::Channel,
        false,
        &[
            ("tx", "TapChannel created in A; frames written to it arrive at A's kernel (counted by the TAP's rx_packets)".into()),
            ("rx", "not measured: feeding a TAP from the veth generator needs kernel forwarding, which would dominate".into()),
        ],
    );
    ctx.note("TAP receive is not measured: a TAP's peer is its own namespace's kernel, so feeding it from the AF_XDP generator would go through kernel IP forwarding, whose cost would be the figure.");
    ctx.note("AF_PACKET receive: the kernel also carries every frame through its own receive path (and drops it: the destination is not its address), on the sending core on veth.");

    for (case, rx, size) in CASES {
        let label = format!(
            "{} {size} B frames",
            if rx { "receive" } else { "transmit" }
        );
        ctx.case(case, &label, &[("frame_bytes", size as f64)]);
        let payload = size - 42;
        let flood = |ns: &Side, ifname_side: &Side, dst_ip: IpAddr| -> io::Result<Flood> {
            Ok(Flood {
                ns: ns.ns.clone(),
                ifname: ns.ifname.clone(),
                macs: (ns.mac.0, ifname_side.mac.0),
                ips: (v4(ns.ip)?.into(), v4(dst_ip)?.into()),
                port: PORT,
                payload_len: payload,
            })
        };
        if rx {
            let to_spare = flood(b, a, IpAddr::V4(spare))?;
            let to_kernel = flood(b, a, a.ip)?;
            let mut modes = Vec::new();
            ctx.alternate(case, &RX_SYSTEMS, |sys, _| {
                let (m, mode) = measure_rx(sys, a, &to_spare, &to_kernel, w)?;
                modes.push((sys.to_owned(), mode));
                Ok(m)
            });
            for (sys, mode) in modes {
                ctx.system_setup(&sys, "mode", mode);
            }
        } else {
            let to_b = flood(a, b, b.ip)?;
            ctx.alternate(case, &TX_SYSTEMS, |sys, _| measure_tx(sys, a, b, &to_b, w));
        }
    }

    let metrics = |rx: bool| {
        let mut v = vec![
            Metric::more(
                "pps",
                if rx {
                    "received (pps)"
                } else {
                    "arrived (pps)"
                },
                0,
            ),
            Metric::more("gbps", "Gb/s (frame bytes)", 2),
        ];
        if rx {
            v.push(Metric::plain("offered_pps", "offered (pps)", 0));
        } else {
            v.push(Metric::plain("sent_pps", "sent (pps)", 0));
        }
        v.push(Metric::less("sut_ns_per_pkt", "SUT CPU (ns/frame)", 0));
        v.push(Metric::less(
            "machine_ns_per_pkt",
            "machine CPU (ns/frame)",
            0,
        ));
        v
    };
    ctx.view(View::Table(TableView {
        title: "Receive and drop (the generator at full rate)".into(),
        cases: vec!["rx-60".into(), "rx-1500".into()],
        systems: RX_SYSTEMS.iter().map(|s| (*s).to_owned()).collect(),
        metrics: metrics(true),
        baselines: vec!["kernel-udp".into()],
        ratio_metric: Some("pps".into()),
    }));
    ctx.view(View::Table(TableView {
        title: "Transmit only (counted where it arrived)".into(),
        cases: vec!["tx-60".into(), "tx-1500".into()],
        systems: TX_SYSTEMS.iter().map(|s| (*s).to_owned()).collect(),
        metrics: metrics(false),
        baselines: vec!["kernel-udp".into()],
        ratio_metric: Some("pps".into()),
    }));
    ctx.view(View::Plot(PlotView {
        id: "channels-pps".into(),
        title: "Frames per second each channel carries alone".into(),
        kind: PlotKind::Bars,
        cases: vec![],
        systems: TX_SYSTEMS.iter().map(|s| (*s).to_owned()).collect(),
        x_param: None,
        x_label: "case".into(),
        y: Metric::more("pps", "frames/s (received or arrived)", 0),
        y2: None,
        x_log: false,
    }));
    Ok(())
}

/// Busy-polls `ch` and drops every frame until `stop`: (frames, bytes).
fn drop_loop(ch: &mut dyn Channel, stop: &AtomicBool) -> io::Result<(u64, u64)> {
    let (mut n, mut bytes) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        n += ch
            .rx_batch(64, &mut |f, _| bytes += f.len() as u64)
            .map_err(io_err)? as u64;
    }
    Ok((n, bytes))
}

fn rate_metrics(frames: u64, bytes: u64, secs: f64) -> Metrics {
    let mut m = Metrics::new();
    let secs = secs.max(1e-9);
    m.insert("frames".into(), frames as f64);
    m.insert("pps".into(), frames as f64 / secs);
    m.insert("gbps".into(), bytes as f64 * 8.0 / secs / 1e9);
    m
}

fn measure_rx(
    sys: &str,
    a: &Side,
    to_spare: &Flood,
    to_kernel: &Flood,
    w: Duration,
) -> io::Result<(Metrics, String)> {
    let stop = Arc::new(AtomicBool::new(false));
    let (flood, mode, rx) = match sys {
        "kernel-udp" => {
            let t = kernel_udp_rx(
                &a.ns,
                SUT_CPU,
                SocketAddr::new(a.ip, PORT),
                Arc::clone(&stop),
            )?;
            let t = std::thread::spawn(move || join(t, "kernel receiver").map(|(n, b, _)| (n, b)));
            (to_kernel, "recvmmsg loop".to_owned(), t)
        }
        "xdp" | "packet" => {
            let mut ch: Box<dyn Channel + Send> = if sys == "xdp" {
                let o = XdpOptions {
                    addresses: vec![to_spare.ips.1],
                    ..XdpOptions::default()
                };
                Box::new(open_xdp(&a.ifname, &a.ns, &o)?)
            } else {
                Box::new(
                    PacketChannel::open(&a.ifname, Some(&a.ns), &PacketOptions::default())
                        .map_err(io_err)?,
                )
            };
            let caps = ch.capabilities();
            let mode = format!("{} ({})", caps.name, caps.mode);
            let stop2 = Arc::clone(&stop);
            // Spawned from the SUT-pinned thread, so it runs on the SUT core.
            let t = std::thread::spawn(move || drop_loop(&mut *ch, &stop2));
            (to_spare, mode, t)
        }
        _ => return Err(io_err(format!("no rx for {sys}"))),
    };
    let win = Window::start()?;
    let gen =
        load::xdp_flood_paced(flood.clone(), 0, w, u64::MAX).and_then(|g| join(g, "generator"));
    std::thread::sleep(GRACE);
    stop.store(true, Ordering::Relaxed);
    let (n, bytes) = rx.join().map_err(|_| io_err("receiver panicked"))??;
    let gen = gen?;
    let cpu = win.finish(gen.cpu)?;
    let secs = gen.elapsed.as_secs_f64();
    let mut m = rate_metrics(n, bytes, secs);
    m.insert("offered_pps".into(), gen.count as f64 / secs);
    m.extend(cpu.metrics(Some(bytes), Some(n)));
    if n == 0 {
        return Err(io_err(format!("{sys} received nothing")));
    }
    Ok((m, mode))
}

/// Sends `frame` through `ch` for `w`, 64 frames per flush: frames queued.
fn tx_loop(ch: &mut dyn Channel, frame: &[u8], w: Duration) -> io::Result<u64> {
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed() < w {
        for _ in 0..64 {
            if ch
                .tx()
                .send(frame.len(), &mut |b| b.copy_from_slice(frame))
                .is_err()
            {
                break;
            }
            sent += 1;
        }
        ch.tx().flush().map_err(io_err)?;
        // Reap completions/echoes so rings do not fill.
        ch.rx_batch(64, &mut |_, _| {}).map_err(io_err)?;
    }
    for _ in 0..8 {
        ch.tx().flush().map_err(io_err)?;
    }
    Ok(sent)
}

fn measure_tx(sys: &str, a: &Side, b: &Side, to_b: &Flood, w: Duration) -> io::Result<Metrics> {
    let frame = load::flood_frame(to_b);
    let tap_name = format!("rt{}", &a.ifname.trim_start_matches("ul"));
    // Where arrivals are counted: B's veth, or the TAP device (its peer is A's kernel).
    let (count_ns, count_if) = if sys == "tap" {
        (a.ns.clone(), tap_name.clone())
    } else {
        (b.ns.clone(), b.ifname.clone())
    };
    let mut ch: Option<Box<dyn Channel>> = match sys {
        "xdp" => {
            let o = XdpOptions {
                addresses: vec![a.spare_ip(0)],
                ..XdpOptions::default()
            };
            Some(Box::new(open_xdp(&a.ifname, &a.ns, &o)?))
        }
        "packet" => {
            let c = PacketOptions {
                tx_frame_count: 2048,
                ..PacketOptions::default()
            };
            Some(Box::new(
                PacketChannel::open(&a.ifname, Some(&a.ns), &c).map_err(io_err)?,
            ))
        }
        "tap" => Some(Box::new(
            TapChannel::open(&tap_name, Some(&a.ns), &TapOptions::default()).map_err(io_err)?,
        )),
        _ => None,
    };
    let sock = if ch.is_none() {
        Some(udp_sender(a)?)
    } else {
        None
    };
    let before = link(&count_ns, &count_if)?;
    let win = Window::start()?;
    let start = Instant::now();
    let to = SocketAddr::new(b.ip, PORT);
    let sent = match (&mut ch, &sock) {
        (Some(ch), _) => tx_loop(&mut **ch, &frame, w)?,
        (None, Some(s)) => {
            let payload = &frame[42..];
            let mut n = 0u64;
            while start.elapsed() < w {
                for _ in 0..64 {
                    s.send_to(payload, to)?;
                    n += 1;
                }
            }
            n
        }
        (None, None) => unreachable!("a channel or a socket was opened"),
    };
    let secs = start.elapsed().as_secs_f64();
    // Let the last frames land before reading the counter.
    std::thread::sleep(Duration::from_millis(20));
    let cpu = win.finish(Duration::ZERO)?;
    let after = link(&count_ns, &count_if)?;
    drop(ch);
    let arrived = after.rx_packets.saturating_sub(before.rx_packets);
    let bytes = after.rx_bytes.saturating_sub(before.rx_bytes);
    let mut m = rate_metrics(arrived, bytes, secs);
    m.insert("sent".into(), sent as f64);
    m.insert("sent_pps".into(), sent as f64 / secs);
    m.insert(
        "peer_rx_dropped".into(),
        after.rx_dropped.saturating_sub(before.rx_dropped) as f64,
    );
    m.extend(cpu.metrics(Some(bytes), Some(arrived)));
    if arrived == 0 {
        return Err(io_err(format!("nothing {sys} sent arrived")));
    }
    Ok(m)
}

/// A kernel UDP socket in `a`'s namespace (the socket keeps the namespace it was made
/// in; the thread leaves it again at once). Unconnected, so the peer's ICMP port
/// unreachable replies do not turn into errors on later sends.
fn udp_sender(a: &Side) -> io::Result<std::net::UdpSocket> {
    let ns = a.ns.clone();
    let local = SocketAddr::new(a.ip, 0);
    std::thread::spawn(move || -> io::Result<std::net::UdpSocket> {
        let _g = ulnet::channel::sys::netns::enter(&ns).map_err(io_err)?;
        std::net::UdpSocket::bind(local)
    })
    .join()
    .map_err(|_| io_err("socket thread panicked"))?
}
