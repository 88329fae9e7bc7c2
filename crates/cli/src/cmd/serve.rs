//! `ulnet serve echo|discard|chargen|http` and the network options every command that
//! runs the stack shares (`--backend`, `--netns`, `--iface`, `--addr`, ...).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use ulnet::net::{Stack, StackBuilder};
use ulnet::runtime::{self, AnyChannel, App, Backend, Handle, Runtime, WaitMode};
use ulnet::stack::iface::{Interface, IpCidr};
use ulnet::stack::tcp::{Event, TcpStats};
use ulnet::stack::time::Instant;
use ulnet_apps::discard::{Chargen, Discard};
use ulnet_apps::echo::Echo;
use ulnet_apps::http::{Http, HttpConfig};
use ulnet_apps::server::{Limits, ServerStats};

/// How to reach the network: the options shared by `serve` and `ping`.
#[derive(Debug, Clone, clap::Args)]
pub struct NetArgs {
    /// Channel backend: xdp (AF_XDP + steering program), packet (AF_PACKET), tap.
    #[arg(long, default_value = "xdp")]
    pub backend: Backend,
    /// Interface to attach to (xdp, packet) or TAP device to create (tap).
    #[arg(long = "iface")]
    pub iface: String,
    /// Network namespace (`ip netns add NAME`) the interface is in.
    #[arg(long)]
    pub netns: Option<String>,
    /// ulnet's own address with prefix, e.g. 198.18.0.16/24 or 2001:2:0:1::10/64 (not
    /// the kernel's). Repeat it (or separate with commas) for several addresses: IPv4
    /// and IPv6 together make a dual stack; the first is the default source.
    #[arg(long, required = true, value_delimiter = ',')]
    pub addr: Vec<String>,
    /// Default gateway.
    #[arg(long)]
    pub gateway: Option<IpAddr>,
    /// MAC address (default: the interface's; for tap a locally administered one).
    #[arg(long)]
    pub mac: Option<String>,
    /// Static neighbour, IP=MAC (repeatable).
    #[arg(long = "neighbor", value_name = "IP=MAC")]
    pub neighbors: Vec<String>,
    /// Spin on the rings instead of sleeping in poll(2) (one core at 100%).
    #[arg(long)]
    pub busy_poll: bool,
    /// Record every frame in and out to this pcap file.
    #[arg(long)]
    pub pcap: Option<PathBuf>,
    /// xdp, packet: send TCP segment by segment, without the bursts of up to 64 KB that go by
    /// default through an AF_PACKET socket for the kernel's GSO (or the device's TSO)
    /// to cut, one system call per burst.
    #[arg(long)]
    pub no_gso: bool,
    /// xdp: turn off the steering program's SYN policer (on by default: SYNs above
    /// 25,000/s, then above 500/s from one source, are dropped before the receive ring;
    /// docs/attack.md).
    #[arg(long)]
    pub no_syn_policer: bool,
    /// xdp on a veth whose other end is this host's kernel: take that kernel's TCP
    /// super-frames of up to 64 KB (its TSO with default offloads) whole, as its own
    /// receive on a veth does (generic XDP). Not for a link to another machine.
    #[arg(long)]
    pub rx_super_frames: bool,
}

impl NetArgs {
    /// The stack these options describe, ready to build.
    pub fn builder(&self) -> anyhow::Result<StackBuilder> {
        let mut b = Stack::builder()
            .backend(self.backend)
            .interface(&self.iface);
        for cidr in self.cidrs()? {
            b = b.address_cidr(cidr);
        }
        if let Some(netns) = &self.netns {
            b = b.netns(netns);
        }
        if let Some(gateway) = self.gateway {
            b = b.gateway(gateway);
        }
        if let Some(mac) = &self.mac {
            b = b.mac(runtime::parse_mac(mac)?);
        }
        for n in &self.neighbors {
            let (ip, mac) = n.split_once('=').context("--neighbor IP=MAC")?;
            b = b.neighbor(
                ip.parse().context("--neighbor IP")?,
                runtime::parse_mac(mac)?,
            );
        }
        b = b.wait(if self.busy_poll {
            WaitMode::BusyPoll
        } else {
            WaitMode::Sleep
        });
        if let Some(pcap) = &self.pcap {
            b = b.pcap(pcap);
        }
        if self.no_gso {
            b = b.gso(false);
        }
        if self.no_syn_policer {
            b = b.syn_policer(None);
        }
        if self.rx_super_frames {
            b = b.rx_super_frames(true);
        }
        Ok(b)
    }

    /// Opens the runtime these options describe (for apps inside the loop).
    /// Its IPv6 addresses have passed duplicate address detection when this returns.
    pub fn open_runtime(&self) -> anyhow::Result<Runtime<AnyChannel>> {
        let mut rt = self
            .builder()?
            .build_runtime()
            .with_context(|| format!("opening the {} channel on {}", self.backend, self.iface))?;
        let timeout = rt.settle_timeout();
        rt.settle_addresses(timeout)
            .context("duplicate address detection")?;
        Ok(rt)
    }

    /// ulnet's addresses with their prefixes, in the order given.
    pub fn cidrs(&self) -> anyhow::Result<Vec<IpCidr>> {
        self.addr
            .iter()
            .map(|a| {
                let (ip, prefix) = a.split_once('/').with_context(|| {
                    format!("--addr {a}: needs a prefix length, e.g. 198.18.0.16/24")
                })?;
                let ip: IpAddr = ip.parse().with_context(|| format!("--addr {a}"))?;
                let prefix: u8 = prefix
                    .parse()
                    .with_context(|| format!("--addr {a}: prefix"))?;
                IpCidr::new(ip, prefix).with_context(|| format!("--addr {a}: bad prefix length"))
            })
            .collect()
    }

    /// ulnet's addresses.
    pub fn ips(&self) -> anyhow::Result<Vec<IpAddr>> {
        Ok(self.cidrs()?.iter().map(IpCidr::address).collect())
    }

    /// The addresses as given, for messages.
    pub fn addr_list(&self) -> String {
        self.addr.join(",")
    }
}

/// The services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Service {
    /// UDP and TCP echo (RFC 862), port 7 by default.
    Echo,
    /// UDP and TCP sink (RFC 863), port 9.
    Discard,
    /// UDP and TCP source of the test pattern, port 19.
    Chargen,
    /// HTTP/1.1: GET /bytes/N and static files with --root, port 80.
    Http,
    /// iperf3's control and data protocol (TCP and UDP tests, -R, -P), port 5201;
    /// --limit stops after that many tests.
    Iperf3,
}

/// Arguments of `serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which service.
    #[arg(value_enum)]
    pub service: Service,
    #[command(flatten)]
    pub net: NetArgs,
    /// Port (default: the service's well-known port).
    #[arg(long)]
    pub port: Option<u16>,
    /// Directory of static files (http).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Stop after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Stop each chargen stream after this many bytes.
    #[arg(long)]
    pub limit: Option<u64>,
    /// Most TCP connections at once (echo, discard, chargen, http); when full, the
    /// connection idle the longest is closed for a new one. Default 4096.
    #[arg(long)]
    pub max_sessions: Option<usize>,
    /// Most TCP connections at once from one remote address. Default 256.
    #[arg(long)]
    pub max_per_source: Option<usize>,
    /// Close a TCP connection without any event for this long (e.g. 60s, 2min; 0 never).
    /// Default 60s.
    #[arg(long, value_parser = ulnet_apps::sim::parse_duration)]
    pub idle_timeout: Option<Duration>,
    /// http: a request head must be complete this long after its first byte (slowloris).
    /// Default 10s.
    #[arg(long, value_parser = ulnet_apps::sim::parse_duration)]
    pub head_timeout: Option<Duration>,
    /// http: longest lingering close (RFC 9112 §9.6) after an answer that ends the
    /// connection. Default 5s.
    #[arg(long, value_parser = ulnet_apps::sim::parse_duration)]
    pub linger_time: Option<Duration>,
    /// Per-stage cycle accounting of the UDP path (ring pop, Ethernet, IPv4, UDP, socket,
    /// application, and back down to the doorbell): prints the breakdown every SECS
    /// seconds (default 10; 0: only at exit) and when the server stops.
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "10")]
    pub stage_cycles: Option<f64>,
}

impl Args {
    /// The connection limits these options give, over `base`.
    fn limits(&self, base: Limits) -> Limits {
        Limits {
            max_sessions: self.max_sessions.unwrap_or(base.max_sessions),
            max_per_source: self.max_per_source.unwrap_or(base.max_per_source),
            idle_timeout: match self.idle_timeout {
                Some(d) if d.is_zero() => None,
                Some(d) => Some(d),
                None => base.idle_timeout,
            },
        }
    }
}

/// Stops the loop on SIGINT/SIGTERM (the runtime then returns, the channel drops and the
/// XDP program is detached by its BPF link).
pub fn stop_on_signals(handle: &Handle) -> anyhow::Result<()> {
    let h = handle.clone();
    ctrlc::set_handler(move || h.stop()).context("installing the SIGINT/SIGTERM handler")
}

/// Stops the loop after `secs` seconds, from a helper thread.
pub fn stop_after(handle: &Handle, secs: Option<f64>) {
    if let Some(s) = secs {
        let h = handle.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(s.max(0.0)));
            h.stop();
        });
    }
}

/// The service on each of ulnet's addresses (one server per address, so each family
/// is served whatever the stack does with wildcard binds).
struct Servers(Vec<Running>);

impl App for Servers {
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        for s in &mut self.0 {
            s.poll(now, iface, events);
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        self.0.iter().filter_map(Running::poll_at).min()
    }
}

/// A running service, boxed so `serve` handles them alike.
enum Running {
    Echo(Echo),
    Discard(Discard),
    Chargen(Chargen),
    Http(Http),
}

impl App for Running {
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        match self {
            Running::Echo(a) => a.poll(now, iface, events),
            Running::Discard(a) => a.poll(now, iface, events),
            Running::Chargen(a) => a.poll(now, iface, events),
            Running::Http(a) => a.poll(now, iface, events),
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        // The servers' idle and request-head timeouts fire without any event.
        match self {
            Running::Echo(a) => a.poll_at(),
            Running::Discard(a) => a.poll_at(),
            Running::Chargen(a) => a.poll_at(),
            Running::Http(a) => a.poll_at(),
        }
    }
}

impl Running {
    fn summary(&self) -> String {
        match self {
            Running::Echo(a) => format!(
                "udp echoed {} (dropped {}); tcp {}",
                a.udp_stats().echoed,
                a.udp_stats().dropped,
                connections(&a.tcp_stats())
            ),
            Running::Discard(a) => {
                format!("{:?}; tcp {}", a.stats(), connections(&a.tcp_stats()))
            }
            Running::Chargen(a) => {
                format!("{:?}; tcp {}", a.stats(), connections(&a.tcp_stats()))
            }
            Running::Http(a) => format!(
                "{:?}; tcp {}, {} open",
                a.stats(),
                connections(&a.tcp_stats()),
                a.session_count()
            ),
        }
    }
}

/// A server's connection counters, for the summary.
fn connections(s: &ServerStats) -> String {
    format!(
        "connections accepted {} finished {} refused {} (per-source {}), \
         closed idle {}, evicted for room {}, head timeouts {}, linger timeouts {}",
        s.accepted,
        s.finished,
        s.refused,
        s.per_source_refused,
        s.idle_closed,
        s.evicted,
        s.head_timeouts,
        s.linger_timeouts
    )
}

fn start(args: &Args, rt: &Runtime<AnyChannel>, ip: IpAddr) -> anyhow::Result<Running> {
    let mut iface = rt.iface();
    let port = args.port.unwrap_or(match args.service {
        Service::Echo => 7,
        Service::Discard => 9,
        Service::Chargen => 19,
        Service::Http => 80,
        Service::Iperf3 => 5201,
    });
    let local = SocketAddr::new(ip, port);
    let limits = args.limits(Limits::default());
    Ok(match args.service {
        Service::Echo => {
            let mut a = Echo::new(&mut iface, local)?;
            a.set_limits(limits);
            Running::Echo(a)
        }
        Service::Discard => {
            let mut a = Discard::new(&mut iface, local)?;
            a.set_limits(limits);
            Running::Discard(a)
        }
        Service::Chargen => {
            let mut a = Chargen::new(&mut iface, local, args.limit)?;
            a.set_limits(limits);
            Running::Chargen(a)
        }
        Service::Http => {
            if let Some(r) = &args.root {
                if !r.is_dir() {
                    bail!("--root {} is not a directory", r.display());
                }
            }
            let base = HttpConfig::default();
            let cfg = HttpConfig {
                root: args.root.clone(),
                limits: args.limits(base.limits),
                head_timeout: args.head_timeout.unwrap_or(base.head_timeout),
                linger_time: args.linger_time.unwrap_or(base.linger_time),
                ..base
            };
            Running::Http(Http::new(&mut iface, local, cfg)?)
        }
        Service::Iperf3 => bail!("iperf3 runs on the socket API (cmd::serve_iperf3)"),
    })
}

/// The TCP engine's buffer memory (issue 13): storage in use and its peak, whether the
/// budget is under pressure, and what it refused.
pub(crate) fn tcp_memory(s: &TcpStats) -> String {
    format!(
        "buffer memory {} KiB (peak {} KiB{}), connections refused for memory {}, \
         segments dropped for memory {}",
        s.mem_bytes / 1024,
        s.mem_peak_bytes / 1024,
        if s.mem_pressure {
            ", under pressure"
        } else {
            ""
        },
        s.mem_refused,
        s.mem_dropped
    )
}

/// Switches the stage accounting on (after calibrating the TSC) and prints its breakdown
/// every `every` seconds until told to stop; returns the TSC rate, the printer's stop
/// switch and the printer (the runtime's own stop switch is reset when `run` returns, so
/// the printer has one of its own).
fn start_stage_cycles(every: f64) -> (f64, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let hz = ulnet::stage::calibrate(Duration::from_millis(200));
    let invariant = ulnet::stage::tsc_flags().map_or("unknown".to_owned(), |(c, n)| {
        format!("constant_tsc {c}, nonstop_tsc {n}")
    });
    eprintln!(
        "ulnet: stage cycles on: TSC {:.3} GHz ({invariant})",
        hz / 1e9
    );
    ulnet::stage::reset();
    ulnet::stage::set_enabled(true);
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    let printer = std::thread::spawn(move || {
        let tick = Duration::from_millis(100);
        let mut last = std::time::Instant::now();
        while !s.load(Ordering::Relaxed) {
            std::thread::sleep(tick);
            if every > 0.0 && last.elapsed().as_secs_f64() >= every {
                last = std::time::Instant::now();
                eprintln!(
                    "ulnet: stage cycles:\n{}",
                    ulnet::stage::format(&ulnet::stage::snapshot(), hz)
                );
            }
        }
    });
    (hz, stop, printer)
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.service == Service::Iperf3 {
        return super::serve_iperf3::run(&args);
    }
    let mut rt = args.net.open_runtime()?;
    let mut servers = Vec::new();
    for ip in args.net.ips()? {
        servers.push(start(&args, &rt, ip)?);
    }
    let mut app = Servers(servers);
    let handle = rt.handle();
    stop_on_signals(&handle)?;
    stop_after(&handle, args.duration);
    let caps = ulnet::channel::Channel::capabilities(rt.channel());
    eprintln!(
        "ulnet: serving {:?} on {} ({} {}, mtu {}){}",
        args.service,
        args.net.addr_list(),
        caps.name,
        caps.mode,
        caps.mtu,
        if args.net.busy_poll {
            ", busy-polling"
        } else {
            ""
        }
    );
    let stages = args.stage_cycles.map(start_stage_cycles);
    let r = rt.run(&mut app);
    if let Some((hz, stop, printer)) = stages {
        stop.store(true, Ordering::Relaxed);
        let _ = printer.join();
        ulnet::stage::set_enabled(false);
        eprintln!(
            "ulnet: stage cycles at exit:\n{}",
            ulnet::stage::format(&ulnet::stage::snapshot(), hz)
        );
    }
    r?;
    let stats = ulnet::channel::Channel::stats(rt.channel());
    for (ip, s) in args.net.ips()?.iter().zip(&app.0) {
        eprintln!("ulnet: stopped on {ip}: {}", s.summary());
    }
    if let Some(t) = rt.iface().tcp().map(|t| t.stats()) {
        eprintln!("ulnet: tcp {}", tcp_memory(&t));
    }
    eprintln!("ulnet: channel {stats:?}");
    eprintln!("ulnet: runtime {:?}", rt.stats());
    Ok(())
}
