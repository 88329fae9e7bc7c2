//! TCP receive over AF_XDP against the kernel's own receive, in the same run.
//!
//! A kernel sender in namespace B writes `bytes` of the test pattern, shuts down and
//! waits for the receiver to close. Round by round it sends alternately to ulnet's
//! discard service (AF_XDP on A's veth end, every byte checked against the pattern)
//! and to a kernel socket receiver on A's own address doing the same check. The testbed
//! has checksum and segmentation offloads off on both ends, so the kernel receives
//! 1500-byte segments just as ulnet does (target: ulnet ≥ kernel).

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use ulnet::apps::discard::Discard;
use ulnet::channel::Channel as _;
use ulnet::runtime::{Backend, NetConfig, WaitMode};
use ulnet::stack::iface::IpCidr;

use super::load::{self, Done};
use super::{io_err, join, median, open_runtime, pin, Table, RECEIVER_CPU};
use crate::cpu::thread_cpu_time;
use crate::Testbed;

/// How to run [`tcp_rx_vs_kernel`].
#[derive(Debug, Clone)]
pub struct TcpRxOptions {
    /// Rounds (each one ulnet and one kernel transfer, alternating).
    pub rounds: usize,
    /// Bytes per transfer.
    pub bytes: u64,
    /// How ulnet's loop waits.
    pub wait: WaitMode,
    /// The veth MTU.
    pub mtu: u32,
    /// ulnet's spin before sleeping (`Runtime::set_spin`); `None` keeps the default.
    pub spin: Option<Duration>,
}

impl Default for TcpRxOptions {
    fn default() -> Self {
        TcpRxOptions {
            rounds: 3,
            bytes: 500_000_000,
            wait: WaitMode::Sleep,
            mtu: 1500,
            spin: None,
        }
    }
}

/// One transfer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Transfer {
    /// Goodput in Gb/s, from the sender's first write to the receiver's close.
    pub gbps: f64,
    /// The receiving thread's CPU seconds per GB.
    pub rx_cpu_s_per_gb: f64,
    /// The sending thread's CPU seconds per GB.
    pub tx_cpu_s_per_gb: f64,
}

/// Both receivers, every round.
#[derive(Debug, Clone, Default)]
pub struct TcpRxReport {
    /// ulnet's wait mode, in words.
    pub wait: String,
    /// The MTU.
    pub mtu: u32,
    /// ulnet's channel and its mode.
    pub channel: String,
    /// ulnet rounds.
    pub ulnet: Vec<Transfer>,
    /// Kernel rounds.
    pub kernel: Vec<Transfer>,
}

impl TcpRxReport {
    /// Median ulnet goodput over median kernel goodput.
    pub fn ratio(&self) -> f64 {
        let m = |v: &[Transfer]| median(&v.iter().map(|r| r.gbps).collect::<Vec<_>>());
        m(&self.ulnet) / m(&self.kernel)
    }

    /// The report as a table of medians.
    pub fn table(&self) -> Table {
        let m =
            |v: &[Transfer], f: fn(&Transfer) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
        let row = |name: &str, v: &[Transfer]| {
            vec![
                name.to_owned(),
                format!("{:.2}", m(v, |r| r.gbps)),
                format!("{:.3}", m(v, |r| r.rx_cpu_s_per_gb)),
                format!("{:.3}", m(v, |r| r.tx_cpu_s_per_gb)),
                v.iter()
                    .map(|r| format!("{:.2}", r.gbps))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]
        };
        Table {
            title: format!(
                "tcp_rx_vs_kernel: MTU {}, ulnet on {} {}, medians of {} rounds; ulnet/kernel = {:.2}",
                self.mtu,
                self.channel,
                self.wait,
                self.ulnet.len().min(self.kernel.len()),
                self.ratio()
            ),
            header: [
                "receiver",
                "goodput (Gb/s)",
                "rx thread CPU (s/GB)",
                "sender CPU (s/GB)",
                "rounds (Gb/s)",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![
                row("ulnet discard (AF_XDP)", &self.ulnet),
                row("kernel socket, offloads off", &self.kernel),
            ],
        }
    }
}

impl fmt::Display for TcpRxReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.table().fmt(f)
    }
}

fn transfer(sent: &Done, rx_cpu: Duration) -> Transfer {
    let gb = sent.count as f64 / 1e9;
    Transfer {
        gbps: sent.count as f64 * 8.0 / sent.elapsed.as_secs_f64() / 1e9,
        rx_cpu_s_per_gb: rx_cpu.as_secs_f64() / gb,
        tx_cpu_s_per_gb: sent.cpu.as_secs_f64() / gb,
    }
}

/// Runs the comparison on a fresh testbed (torn down afterwards, also on failure).
///
/// # Errors
/// The testbed, channel, sender or runtime failed, or a receiver got other bytes than
/// were sent.
pub fn tcp_rx_vs_kernel(opts: &TcpRxOptions) -> io::Result<TcpRxReport> {
    let tb = Testbed::builder()
        .name_prefix("tcprx")
        .mtu(opts.mtu)
        .build()
        .map_err(io_err)?;
    let (a, b) = (tb.a(), tb.b());
    let ip = a.spare_ip(0);
    let cfg = NetConfig::new(
        Backend::Xdp,
        &a.ifname,
        IpCidr::new(ip, a.prefix_len).ok_or_else(|| io_err("bad prefix"))?,
    )
    .netns(&a.ns)
    .wait(opts.wait);
    let mut report = TcpRxReport {
        wait: match opts.wait {
            WaitMode::BusyPoll => "busy-polls".into(),
            WaitMode::Sleep => "sleeps in poll(2)".into(),
        },
        mtu: opts.mtu,
        ..Default::default()
    };
    for round in 0..opts.rounds {
        // ulnet: discard on the spare address.
        let target = SocketAddr::new(ip, 9);
        let mut rt = open_runtime(&cfg)?;
        if let Some(spin) = opts.spin {
            rt.set_spin(spin);
        }
        let caps = rt.channel().capabilities();
        report.channel = format!("{} ({})", caps.name, caps.mode);
        let mut app = Discard::new(&mut rt.iface(), target).map_err(io_err)?;
        let handle = rt.handle();
        let t = std::thread::spawn(move || -> io::Result<(Discard, Duration)> {
            let mut rt = rt;
            pin(RECEIVER_CPU)?;
            let cpu0 = thread_cpu_time();
            rt.run(&mut app)?;
            Ok((app, thread_cpu_time() - cpu0))
        });
        let sent = load::tcp_send(&b.ns, target, opts.bytes).and_then(|s| join(s, "sender"));
        handle.stop();
        let (app, cpu) = join(t, "ulnet runtime")?;
        let sent = sent?;
        let s = app.stats();
        if s.tcp_bytes != opts.bytes || s.tcp_pattern_ok != 1 {
            return Err(io::Error::other(format!(
                "ulnet received {} of {} bytes (pattern ok: {})",
                s.tcp_bytes, opts.bytes, s.tcp_pattern_ok
            )));
        }
        report.ulnet.push(transfer(&sent, cpu));

        // The kernel: a socket receiver on A's own address (a fresh port each round, so
        // no TIME-WAIT is in the way).
        let at = SocketAddr::new(a.ip, 5100 + round as u16);
        let sink = load::tcp_sink(&a.ns, at)?;
        let sent = load::tcp_send(&b.ns, at, opts.bytes).and_then(|s| join(s, "sender"));
        let got = join(sink, "kernel receiver")?;
        let sent = sent?;
        if got.done.count != opts.bytes || !got.pattern_ok {
            return Err(io::Error::other(format!(
                "the kernel received {} of {} bytes (pattern ok: {})",
                got.done.count, opts.bytes, got.pattern_ok
            )));
        }
        report.kernel.push(transfer(&sent, got.done.cpu));
    }
    tb.teardown().map_err(io_err)?;
    Ok(report)
}
