//! UDP echo over AF_XDP at saturation, as a fraction of the raw channel.
//!
//! One generator (an AF_XDP socket on B's veth end, so the generator is not the limit)
//! floods ulnet's address with small datagrams.
//! "Raw" is the same AF_XDP channel (opened the same way as the runtime opens it)
//! receiving and dropping every frame in a busy loop, with no protocol work: the most the
//! channel delivers under this load. "Echo" is ulnet's runtime with the UDP echo app:
//! every datagram parsed, delivered to the socket, read by the app and sent back. The
//! figure of merit is echoes per second over raw frames per second (target ≥ 0.8).
//!
//! On this 2-core testbed the generator's core usually saturates first (veth runs the
//! XDP redirect and the copy into the UMEM on the sender's core), so both sides may
//! handle everything offered; the receiving thread's CPU time per frame then says how
//! far each is from its own limit (`1e9 / ns` frames per second of one core). With
//! `WaitMode::Sleep` both loops sleep in `poll(2)` when idle (after the same spin), so
//! that figure is the work done, not the spinning.
//!
//! The kernel in B knows ulnet's MAC statically, so the raw side needs no ARP (and the
//! generator writes the MACs itself).

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags};
use ulnet::apps::echo::Echo;
use ulnet::channel::Channel as _;
use ulnet::runtime::{Backend, NetConfig, WaitMode};
use ulnet::stack::iface::IpCidr;

use super::load::{self, Done, Flood};
use super::{io_err, join, median, open_runtime, pin, Table, RECEIVER_CPU};
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
    /// How both loops wait.
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

    /// Median raw CPU per frame over median echo CPU per frame: echo's capacity as a
    /// fraction of the raw channel's when neither is generator-capped by its CPU.
    pub fn cpu_ratio(&self) -> f64 {
        let m = |v: &[Rate]| median(&v.iter().map(|r| r.cpu_ns_per_frame).collect::<Vec<_>>());
        m(&self.raw) / m(&self.echo)
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
                "udp_echo_vs_raw: {} ({}), medians of {} rounds; echo/raw rate = {:.2}, \
                 raw/echo CPU per frame = {:.2}",
                self.channel,
                self.wait,
                self.raw.len().min(self.echo.len()),
                self.ratio(),
                self.cpu_ratio()
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

/// An owned duplicate of this process's descriptor `fd` (`pidfd_getfd(2)` on our own
/// pidfd: the safe way to turn the channel's bare wait descriptor into one to poll).
fn own_fd(fd: std::os::fd::RawFd) -> io::Result<std::os::fd::OwnedFd> {
    use rustix::process::{getpid, pidfd_getfd, pidfd_open, PidfdFlags, PidfdGetfdFlags};
    let pidfd = pidfd_open(getpid(), PidfdFlags::empty())?;
    Ok(pidfd_getfd(&pidfd, fd, PidfdGetfdFlags::empty())?)
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
    let v4 = |ip: IpAddr| match ip {
        IpAddr::V4(a) => Ok(a),
        IpAddr::V6(_) => Err(io_err("the testbed is IPv4")),
    };
    let flood = Flood {
        ns: b.ns.clone(),
        ifname: b.ifname.clone(),
        macs: (b.mac.0, a.mac.0),
        ips: (v4(b.ip)?, v4(ip)?),
        port: 7,
        payload_len: opts.payload_len,
    };
    let mut report = UdpEchoReport {
        wait: match opts.wait {
            WaitMode::BusyPoll => "both busy-poll".into(),
            WaitMode::Sleep => "both sleep in poll(2) when idle".into(),
        },
        ..Default::default()
    };
    for _ in 0..opts.rounds {
        // Raw: the channel alone, dropping every frame, waiting as the echo loop does.
        let mut rt = open_runtime(&cfg.clone().wait(WaitMode::BusyPoll))?;
        let caps = rt.channel().capabilities();
        report.channel = format!("{} ({})", caps.name, caps.mode);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let wait = opts.wait;
        let spin = opts.spin.unwrap_or(ulnet::runtime::DEFAULT_SPIN);
        let rx = std::thread::spawn(move || -> io::Result<(u64, Duration)> {
            pin(RECEIVER_CPU)?;
            let fd = match rt.channel().wait_fd() {
                Some(fd) => Some(own_fd(fd)?),
                None => None,
            };
            let cpu0 = thread_cpu_time();
            let mut count = 0u64;
            let mut last = std::time::Instant::now();
            while !stop2.load(Ordering::Relaxed) {
                let n = rt
                    .channel_mut()
                    .rx_batch(64, &mut |_, _| {})
                    .map_err(io_err)?;
                count += n as u64;
                if n > 0 {
                    last = std::time::Instant::now();
                } else if wait == WaitMode::Sleep && last.elapsed() >= spin {
                    rt.channel_mut().prepare_wait().map_err(io_err)?;
                    if let Some(fd) = &fd {
                        let mut p = [PollFd::new(fd, PollFlags::IN)];
                        let ts = rustix::time::Timespec {
                            tv_sec: 0,
                            tv_nsec: 10_000_000,
                        };
                        match rustix::event::poll(&mut p, Some(&ts)) {
                            Ok(_) | Err(rustix::io::Errno::INTR) => {}
                            Err(e) => return Err(e.into()),
                        }
                    }
                }
            }
            let cpu = thread_cpu_time() - cpu0;
            if std::env::var_os("ULNET_SCENARIO_DEBUG").is_some() {
                eprintln!("raw: {:?}", rt.channel().stats());
            }
            Ok((count, cpu))
        });
        let gen = load::xdp_flood(flood.clone(), opts.duration).and_then(|g| join(g, "generator"));
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
            pin(RECEIVER_CPU)?;
            let cpu0 = thread_cpu_time();
            rt.run(&mut app)?;
            Ok((app, thread_cpu_time() - cpu0))
        });
        let gen = load::xdp_flood(flood.clone(), opts.duration).and_then(|g| join(g, "generator"));
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
