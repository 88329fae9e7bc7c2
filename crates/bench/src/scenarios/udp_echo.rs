//! UDP echo over AF_XDP at saturation, as a fraction of the raw channel.
//!
//! One kernel generator in namespace B floods ulnet's address with small datagrams.
//! "Raw" is the same AF_XDP channel (opened the same way as the runtime opens it)
//! receiving and dropping every frame in a busy loop, with no protocol work: the most the
//! channel delivers under this load. "Echo" is ulnet's runtime with the UDP echo app:
//! every datagram parsed, delivered to the socket, read by the app and sent back. The
//! figure of merit is echoes per second over raw frames per second (target ≥ 0.8).
//!
//! The kernel in B knows ulnet's MAC statically, so the raw side needs no ARP.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ulnet::apps::echo::Echo;
use ulnet::channel::Channel as _;
use ulnet::runtime::{Backend, NetConfig, WaitMode};
use ulnet::stack::iface::IpCidr;

use super::load::{self, Done};
use super::{io_err, join, median, open_runtime, Table};
use crate::cpu::thread_cpu_time;
use crate::Testbed;

/// How to run [`udp_echo_vs_raw`].
#[derive(Debug, Clone)]
pub struct UdpEchoOptions {
    /// Rounds (each one raw and one echo measurement, alternating).
    pub rounds: usize,
    /// Generator run time per measurement.
    pub duration: Duration,
    /// UDP payload bytes (18 makes 60-byte frames).
    pub payload_len: usize,
    /// How ulnet's echo loop waits (the raw loop always spins).
    pub wait: WaitMode,
    /// ulnet's spin before sleeping (`Runtime::set_spin`); `None` keeps the default.
    pub spin: Option<Duration>,
}

impl Default for UdpEchoOptions {
    fn default() -> Self {
        UdpEchoOptions {
            rounds: 3,
            duration: Duration::from_secs(2),
            payload_len: 18,
            wait: WaitMode::BusyPoll,
            spin: None,
        }
    }
}

/// One measurement.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rate {
    /// Datagrams the generator sent per second.
    pub offered_pps: f64,
    /// Frames received (raw) or datagrams echoed (echo) per second of generator time.
    pub pps: f64,
    /// The receiving thread's CPU time per frame handled, in nanoseconds.
    pub cpu_ns_per_frame: f64,
}

/// Both sides, every round.
#[derive(Debug, Clone, Default)]
pub struct UdpEchoReport {
    /// The options used.
    pub wait: String,
    /// Channel mode, e.g. `xdp native, copy`.
    pub channel: String,
    /// Raw channel rounds.
    pub raw: Vec<Rate>,
    /// Echo rounds.
    pub echo: Vec<Rate>,
}

impl UdpEchoReport {
    /// Median echo rate over median raw rate.
    pub fn ratio(&self) -> f64 {
        let m = |v: &[Rate]| median(&v.iter().map(|r| r.pps).collect::<Vec<_>>());
        m(&self.echo) / m(&self.raw)
    }

    /// The report as a table of medians.
    pub fn table(&self) -> Table {
        let m = |v: &[Rate], f: fn(&Rate) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
        let row = |name: &str, v: &[Rate]| {
            vec![
                name.to_owned(),
                format!("{:.0}", m(v, |r| r.offered_pps) / 1e3),
                format!("{:.0}", m(v, |r| r.pps) / 1e3),
                format!("{:.0}", m(v, |r| r.cpu_ns_per_frame)),
                v.iter()
                    .map(|r| format!("{:.0}", r.pps / 1e3))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]
        };
        Table {
            title: format!(
                "udp_echo_vs_raw: {} ({}), medians of {} rounds; echo/raw = {:.2}",
                self.channel,
                self.wait,
                self.raw.len().min(self.echo.len()),
                self.ratio()
            ),
            header: [
                "side",
                "offered (kpps)",
                "handled (kpps)",
                "rx thread CPU (ns/frame)",
                "rounds (kpps)",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![
                row("raw AF_XDP rx-drop", &self.raw),
                row("ulnet UDP echo", &self.echo),
            ],
        }
    }
}

impl fmt::Display for UdpEchoReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.table().fmt(f)
    }
}

fn rate(gen: &Done, handled: u64, cpu: Duration) -> Rate {
    let secs = gen.elapsed.as_secs_f64();
    Rate {
        offered_pps: gen.count as f64 / secs,
        pps: handled as f64 / secs,
        cpu_ns_per_frame: cpu.as_nanos() as f64 / handled.max(1) as f64,
    }
}

/// Runs the comparison on a fresh testbed (torn down afterwards, also on failure).
///
/// # Errors
/// The testbed, channel, generator or runtime failed; or the echo side echoed nothing.
pub fn udp_echo_vs_raw(opts: &UdpEchoOptions) -> io::Result<UdpEchoReport> {
    let tb = Testbed::builder()
        .name_prefix("udpecho")
        .build()
        .map_err(io_err)?;
    let (a, b) = (tb.a(), tb.b());
    let ip = a.spare_ip(0);
    b.set_neighbor(ip, a.mac).map_err(io_err)?;
    let cfg = NetConfig::new(
        Backend::Xdp,
        &a.ifname,
        IpCidr::new(ip, a.prefix_len).ok_or_else(|| io_err("bad prefix"))?,
    )
    .netns(&a.ns);
    let target = SocketAddr::new(ip, 7);
    let mut report = UdpEchoReport {
        wait: match opts.wait {
            WaitMode::BusyPoll => "echo busy-polls".into(),
            WaitMode::Sleep => "echo sleeps in poll(2)".into(),
        },
        ..Default::default()
    };
    for _ in 0..opts.rounds {
        // Raw: the channel alone, spinning, dropping every frame.
        let mut rt = open_runtime(&cfg.clone().wait(WaitMode::BusyPoll))?;
        let caps = rt.channel().capabilities();
        report.channel = format!("{} ({})", caps.name, caps.mode);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let rx = std::thread::spawn(move || -> io::Result<(u64, Duration)> {
            let cpu0 = thread_cpu_time();
            let mut count = 0u64;
            while !stop2.load(Ordering::Relaxed) {
                count += rt
                    .channel_mut()
                    .rx_batch(64, &mut |_, _| {})
                    .map_err(io_err)? as u64;
            }
            Ok((count, thread_cpu_time() - cpu0))
        });
        let gen = load::udp_flood(&b.ns, b.ip, target, opts.payload_len, opts.duration)
            .and_then(|g| join(g, "generator"));
        std::thread::sleep(Duration::from_millis(50));
        stop.store(true, Ordering::Relaxed);
        let (count, cpu) = join(rx, "raw receiver")?;
        report.raw.push(rate(&gen?, count, cpu));

        // Echo: the whole stack and the app.
        let mut rt = open_runtime(&cfg.clone().wait(opts.wait))?;
        if let Some(spin) = opts.spin {
            rt.set_spin(spin);
        }
        let mut app = Echo::new(&mut rt.iface(), target).map_err(io_err)?;
        let handle = rt.handle();
        let t = std::thread::spawn(move || -> io::Result<(Echo, Duration)> {
            let mut rt = rt;
            let cpu0 = thread_cpu_time();
            rt.run(&mut app)?;
            Ok((app, thread_cpu_time() - cpu0))
        });
        let gen = load::udp_flood(&b.ns, b.ip, target, opts.payload_len, opts.duration)
            .and_then(|g| join(g, "generator"));
        std::thread::sleep(Duration::from_millis(50));
        handle.stop();
        let (app, cpu) = join(t, "echo runtime")?;
        let echoed = app.udp_stats().echoed;
        if echoed == 0 {
            return Err(io::Error::other("ulnet echoed nothing"));
        }
        report.echo.push(rate(&gen?, echoed, cpu));
    }
    tb.teardown().map_err(io_err)?;
    Ok(report)
}
