//! [`StackBuilder`]: the one way to configure ulnet on a network. It collects the
//! backend (or a channel the user opened), the interface and its namespace, the
//! address, routes, static neighbours, TCP tunables, the wait mode and a pcap file,
//! and builds either a [`Stack`] (the socket API, its loop on a thread of its own)
//! with [`build`](StackBuilder::build), or a bare [`Runtime`] for apps that run inside
//! the loop (`ulnet serve`, the bench, the interop tests) with
//! [`build_runtime`](StackBuilder::build_runtime). Both report a typed [`BuildError`].
//!
//! Invariants: every setting lives in exactly one place, the builder's own field,
//! until building assembles the runtime's `NetConfig` from them once (no placeholder
//! is written and overwritten); a setter that parses keeps its first failure, and
//! building returns it before anything is opened.

use std::io;
use std::net::{AddrParseError, IpAddr};
use std::num::ParseIntError;
use std::path::PathBuf;
use std::time::Duration;

use ulnet_channel::xdp::XdpOptions;
use ulnet_channel::Channel;
use ulnet_stack::iface::{IpCidr, Limits, Route, RouteError};
use ulnet_stack::tcp::{Algorithm, TcpConfig};
use ulnet_wire::EthernetAddress;

use super::stack::Stack;
use crate::runtime::{self, AnyChannel, App, Backend, Link, NetConfig, Runtime, WaitMode};

/// Why [`StackBuilder::build`] did not start a stack (or
/// [`build_runtime`](StackBuilder::build_runtime) a runtime).
///
/// Setters that parse ([`address`](StackBuilder::address),
/// [`from_env`](StackBuilder::from_env)) keep the first failure and `build` returns
/// it, so a chain of setters needs no error handling of its own. Converts into an
/// `io::Error` (kind [`InvalidInput`](io::ErrorKind::InvalidInput) for configuration
/// errors) for functions that return `io::Result`.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// No address was given ([`StackBuilder::address`]).
    MissingAddress,
    /// No interface was given for a kernel backend ([`StackBuilder::interface`]).
    MissingInterface,
    /// An address with prefix did not parse.
    Cidr {
        /// The text given.
        input: String,
        /// What is wrong with it.
        error: CidrError,
    },
    /// An unknown backend name (`ULNET_BACKEND`).
    Backend {
        /// The text given.
        input: String,
    },
    /// A gateway address did not parse (`ULNET_GATEWAY`).
    Gateway {
        /// The text given.
        input: String,
        /// The parser's error.
        error: AddrParseError,
    },
    /// An environment variable of [`StackBuilder::from_env`] held a malformed value.
    Env {
        /// The variable.
        var: &'static str,
        /// What is wrong with its value.
        error: Box<BuildError>,
    },
    /// The routing table refused a route.
    Route {
        /// The route's destination.
        dst: IpCidr,
        /// The table's reason.
        error: RouteError,
    },
    /// Opening the channel or the pcap file, building the interface or starting the
    /// loop failed (the message names the system call and the fix).
    Io(io::Error),
}

/// What is wrong with an address-with-prefix text such as `"198.18.0.5/24"`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CidrError {
    /// No `/prefix` part.
    NoPrefix,
    /// The address part did not parse.
    Address(AddrParseError),
    /// The prefix part is not a number.
    Prefix(ParseIntError),
    /// The prefix is longer than the address.
    PrefixTooLong,
}

impl BuildError {
    /// The `io::ErrorKind` this error converts to: the I/O error's own kind, else
    /// `InvalidInput`.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            BuildError::Io(e) => e.kind(),
            _ => io::ErrorKind::InvalidInput,
        }
    }
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::MissingAddress => {
                f.write_str("the stack needs an address (StackBuilder::address)")
            }
            BuildError::MissingInterface => {
                f.write_str("the stack needs an interface (StackBuilder::interface)")
            }
            BuildError::Cidr { input, error } => match error {
                CidrError::NoPrefix => write!(
                    f,
                    "address {input:?} needs a prefix length, e.g. 198.18.0.5/24"
                ),
                CidrError::Address(e) => write!(f, "address {input:?}: {e}"),
                CidrError::Prefix(e) => write!(f, "prefix of {input:?}: {e}"),
                CidrError::PrefixTooLong => write!(f, "prefix length of {input:?} too long"),
            },
            BuildError::Backend { input } => {
                write!(f, "unknown backend {input:?} (xdp, packet or tap)")
            }
            BuildError::Gateway { input, error } => write!(f, "gateway {input:?}: {error}"),
            BuildError::Env { var, error } => write!(f, "{var}: {error}"),
            BuildError::Route { dst, error } => write!(f, "route {dst:?}: {error}"),
            BuildError::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Cidr {
                error: CidrError::Address(e),
                ..
            }
            | BuildError::Gateway { error: e, .. } => Some(e),
            BuildError::Cidr {
                error: CidrError::Prefix(e),
                ..
            } => Some(e),
            BuildError::Env { error, .. } => Some(&**error),
            BuildError::Route { error, .. } => Some(error),
            BuildError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for BuildError {
    fn from(e: io::Error) -> Self {
        BuildError::Io(e)
    }
}

impl From<BuildError> for io::Error {
    fn from(e: BuildError) -> Self {
        match e {
            BuildError::Io(e) => e,
            e => io::Error::new(io::ErrorKind::InvalidInput, e),
        }
    }
}

/// Configures and starts a [`Stack`], or a bare [`Runtime`]. Every setting has a
/// default except the address (and the interface, for the kernel backends).
pub struct StackBuilder {
    backend: Backend,
    /// The interface (kernel backends); `None` until set.
    ifname: Option<String>,
    netns: Option<String>,
    /// `None` takes the defaults.
    xdp: Option<XdpOptions>,
    /// A channel the user opened; when set, the backend, interface, namespace and XDP
    /// options are not used.
    channel: Option<AnyChannel>,
    /// ulnet's addresses, IPv4 and IPv6 together (dual stack); the first is the
    /// default source.
    addresses: Vec<IpCidr>,
    gateway: Option<IpAddr>,
    routes: Vec<Route>,
    mac: Option<EthernetAddress>,
    neighbors: Vec<(IpAddr, EthernetAddress)>,
    /// The interface's bounds and timers (neighbour cache, ND/ARP, fragments, ...).
    limits: Limits,
    /// `None`: no TCP layer.
    tcp: Option<TcpConfig>,
    wait: WaitMode,
    /// The receive coalescing time; `None`: the runtime's default.
    coalesce: Option<Duration>,
    pcap: Option<PathBuf>,
    apps: Vec<Box<dyn App + Send>>,
    close_linger: Duration,
    drive_from_tasks: bool,
    /// The first setter failure; building returns it.
    error: Option<BuildError>,
}

impl std::fmt::Debug for StackBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackBuilder")
            .field("backend", &self.backend)
            .field("ifname", &self.ifname)
            .field("netns", &self.netns)
            .field("channel", &self.channel)
            .field("addresses", &self.addresses)
            .field("error", &self.error)
            .field("routes", &self.routes)
            .field("wait", &self.wait)
            .field("apps", &self.apps.len())
            .finish_non_exhaustive()
    }
}

fn parse_cidr(s: &str) -> Result<IpCidr, BuildError> {
    let fail = |error| BuildError::Cidr {
        input: s.to_owned(),
        error,
    };
    let (ip, len) = s.split_once('/').ok_or_else(|| fail(CidrError::NoPrefix))?;
    let ip: IpAddr = ip.parse().map_err(|e| fail(CidrError::Address(e)))?;
    let len: u8 = len.parse().map_err(|e| fail(CidrError::Prefix(e)))?;
    IpCidr::new(ip, len).ok_or_else(|| fail(CidrError::PrefixTooLong))
}

impl Default for StackBuilder {
    fn default() -> Self {
        StackBuilder {
            backend: Backend::Xdp,
            ifname: None,
            netns: None,
            xdp: None,
            channel: None,
            addresses: Vec::new(),
            gateway: None,
            routes: Vec::new(),
            mac: None,
            neighbors: Vec::new(),
            limits: Limits::default(),
            tcp: Some(TcpConfig::default()),
            wait: WaitMode::Sleep,
            coalesce: None,
            pcap: None,
            apps: Vec::new(),
            close_linger: Duration::from_secs(1),
            drive_from_tasks: true,
            error: None,
        }
    }
}

impl StackBuilder {
    /// Settings from the environment, for examples and tools: `ULNET_BACKEND`
    /// (xdp, packet, tap), `ULNET_IFACE`, `ULNET_NETNS`, `ULNET_ADDR` (with prefix;
    /// several separated by commas for dual stack, e.g.
    /// `198.18.1.16/24,2001:2:0:1::10/64`),
    /// `ULNET_GATEWAY`, `ULNET_PCAP`, `ULNET_BUSY_POLL=1`, `ULNET_GSO=0`
    /// ([`gso`](Self::gso) off; `1` on, the default), `ULNET_SYN_POLICER=0`
    /// ([`syn_policer`](Self::syn_policer) off), `ULNET_RX_SUPER_FRAMES=1`
    /// ([`rx_super_frames`](Self::rx_super_frames) on) and `ULNET_RX_COALESCE_US` ([`rx_coalesce`](Self::rx_coalesce) in
    /// microseconds, 0: off). Unset variables leave the
    /// builder as it is; malformed ones make [`build`](Self::build) fail
    /// ([`BuildError::Env`]).
    #[must_use]
    pub fn from_env(mut self) -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        if let Some(b) = var("ULNET_BACKEND") {
            match b.parse() {
                Ok(b) => self.backend = b,
                Err(_) => self.fail_env("ULNET_BACKEND", BuildError::Backend { input: b }),
            }
        }
        if let Some(i) = var("ULNET_IFACE") {
            self.ifname = Some(i);
        }
        if let Some(n) = var("ULNET_NETNS") {
            self.netns = Some(n);
        }
        if let Some(a) = var("ULNET_ADDR") {
            for one in a.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                match parse_cidr(one) {
                    Ok(c) => self.push_address(c),
                    Err(e) => self.fail_env("ULNET_ADDR", e),
                }
            }
        }
        if let Some(g) = var("ULNET_GATEWAY") {
            match g.parse() {
                Ok(g) => self.gateway = Some(g),
                Err(error) => {
                    self.fail_env("ULNET_GATEWAY", BuildError::Gateway { input: g, error })
                }
            }
        }
        if let Some(p) = var("ULNET_PCAP") {
            self.pcap = Some(p.into());
        }
        if var("ULNET_BUSY_POLL").is_some_and(|v| v == "1") {
            self.wait = WaitMode::BusyPoll;
        }
        match var("ULNET_GSO").as_deref() {
            Some("0") => self = self.gso(false),
            Some("1") => self = self.gso(true),
            _ => {}
        }
        match var("ULNET_RX_SUPER_FRAMES").as_deref() {
            Some("1") => self = self.rx_super_frames(true),
            Some("0") => self = self.rx_super_frames(false),
            _ => {}
        }
        if var("ULNET_SYN_POLICER").is_some_and(|v| v == "0") {
            self = self.syn_policer(None);
        }
        if let Some(c) = var("ULNET_RX_COALESCE_US") {
            match c.parse::<u64>() {
                Ok(us) => self = self.rx_coalesce(Duration::from_micros(us)),
                Err(_) => self.fail_env(
                    "ULNET_RX_COALESCE_US",
                    BuildError::Io(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("not a whole number of microseconds: {c:?}"),
                    )),
                ),
            }
        }
        self
    }

    /// Keeps the first failure for [`build`](Self::build).
    fn fail(&mut self, e: BuildError) {
        self.error.get_or_insert(e);
    }

    fn fail_env(&mut self, var: &'static str, e: BuildError) {
        self.fail(BuildError::Env {
            var,
            error: Box::new(e),
        });
    }

    /// The channel backend (default: AF_XDP with the steering program).
    #[must_use]
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// The interface to attach to (xdp, packet), or the TAP device to create (tap).
    #[must_use]
    pub fn interface(mut self, ifname: impl Into<String>) -> Self {
        self.ifname = Some(ifname.into());
        self
    }

    /// The named network namespace (`ip netns add`) the interface is in.
    #[must_use]
    pub fn netns(mut self, netns: impl Into<String>) -> Self {
        self.netns = Some(netns.into());
        self
    }

    /// Adds an address of the stack with its prefix, e.g. `"198.18.0.5/24"` or
    /// `"2001:2:0:1::10/64"` (not the kernel's; a malformed one makes
    /// [`build`](Self::build) fail with [`BuildError::Cidr`]). Call it once per address:
    /// IPv4 and IPv6 together make a dual stack. The first address is the default
    /// source ([`Stack::local_ip`]); connections pick one of the peer's family
    /// ([`Stack::source_for`]). With IPv6 the stack also has the link-local address of
    /// its MAC (`fe80::` + EUI-64, RFC 4862 §5.3), which the XDP backend steers too.
    /// Giving the same address twice keeps one.
    #[must_use]
    pub fn address(mut self, cidr: &str) -> Self {
        match parse_cidr(cidr) {
            Ok(c) => self.push_address(c),
            Err(e) => self.fail(e),
        }
        self
    }

    /// Adds an address as an [`IpCidr`] (see [`address`](Self::address)).
    #[must_use]
    pub fn address_cidr(mut self, cidr: IpCidr) -> Self {
        self.push_address(cidr);
        self
    }

    fn push_address(&mut self, cidr: IpCidr) {
        if !self.addresses.contains(&cidr) {
            self.addresses.push(cidr);
        }
    }

    /// The default gateway.
    #[must_use]
    pub fn gateway(mut self, gateway: IpAddr) -> Self {
        self.gateway = Some(gateway);
        self
    }

    /// A route: datagrams to `dst` go via `via` (`None`: on-link).
    #[must_use]
    pub fn route(mut self, dst: IpCidr, via: Option<IpAddr>) -> Self {
        self.routes.push(Route { dst, via });
        self
    }

    /// The stack's MAC (default: the interface's, or for tap one derived from the
    /// address).
    #[must_use]
    pub fn mac(mut self, mac: EthernetAddress) -> Self {
        self.mac = Some(mac);
        self
    }

    /// A static neighbour: never resolved by ARP.
    #[must_use]
    pub fn neighbor(mut self, ip: IpAddr, mac: EthernetAddress) -> Self {
        self.neighbors.push((ip, mac));
        self
    }

    /// The interface's memory bounds and timers (default: [`Limits::default`], the
    /// RFCs' and Linux's values): neighbour cache size and reachable time, resolution
    /// retries, reassembly, ICMP rate, socket counts, and with IPv6 duplicate address
    /// detection and unreachability detection.
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Busy-poll or sleep (default: sleep).
    #[must_use]
    pub fn wait(mut self, wait: WaitMode) -> Self {
        self.wait = wait;
        self
    }

    /// Records every frame in and out to a pcap file.
    #[must_use]
    pub fn pcap(mut self, path: impl Into<PathBuf>) -> Self {
        self.pcap = Some(path.into());
        self
    }

    /// AF_XDP options (queue, ring sizes, copy or zero-copy, further steered
    /// addresses); the interface and namespace are [`interface`](Self::interface) and
    /// [`netns`](Self::netns), and the stack's address is always steered.
    #[must_use]
    pub fn xdp(mut self, options: XdpOptions) -> Self {
        self.xdp = Some(options);
        self
    }

    /// The AF_XDP steering program's SYN policer ([`SynPolicer`](ulnet_channel::xdp::SynPolicer):
    /// SYNs over a global rate, then over a per-source rate, are dropped before the
    /// receive ring). On by default with its defaults; `None` turns it off (a load test
    /// opening more than 25,000 connections a second from few hosts needs that). Other
    /// backends have no program in front of the stack and ignore it.
    #[must_use]
    pub fn syn_policer(mut self, policer: Option<ulnet_channel::xdp::SynPolicer>) -> Self {
        self.xdp.get_or_insert_with(XdpOptions::default).syn_policer = policer;
        self
    }

    /// TCP bursts cut by the kernel (AF_XDP and AF_PACKET backends): new data leaves as
    /// one frame of up to 64 KB through an AF_PACKET socket with a virtio-net header,
    /// and the kernel's GSO (or the device's TSO) cuts it into segments, one system call
    /// per burst instead of a frame per segment; receive and every other frame stay on
    /// the channel's rings ([`XdpOptions::gso`], `PacketOptions::gso`). On by default; a connection that retransmitted sends
    /// segment by segment for a second (a Linux receiver held its ACKs after cut bursts
    /// under loss). On a link above 16 KB (MTU 65535) a single segment of 16 KB or more
    /// takes the same socket whole, with only its checksum left to the kernel. TAP
    /// ignores it.
    #[must_use]
    pub fn gso(mut self, on: bool) -> Self {
        self.xdp.get_or_insert_with(XdpOptions::default).gso = on;
        self
    }

    /// Take the TCP super-frames (up to 64 KB) that this host's own kernel sends over a
    /// veth with its default offloads whole, accepting the checksums it leaves
    /// unfinished as that kernel's own receive on a veth does
    /// ([`XdpOptions::rx_super_frames`]; AF_XDP backend, in generic mode). Off by
    /// default: meant for a veth whose other end is this host's kernel. Other backends
    /// ignore it. (Unfinished checksums are accepted on any veth, with or without it.)
    #[must_use]
    pub fn rx_super_frames(mut self, on: bool) -> Self {
        self.xdp
            .get_or_insert_with(XdpOptions::default)
            .rx_super_frames = on;
        self
    }

    /// How long a sleeping stack that is receiving a stream waits between batches
    /// instead of polling for each frame ([`Runtime::set_coalesce`]: the first wait; it
    /// adapts up to [`runtime::MAX_COALESCE`]). Default
    /// [`runtime::DEFAULT_COALESCE`]; zero turns it off, for a receiver whose every
    /// frame is latency-critical even in a stream (busy-polling stacks never coalesce).
    #[must_use]
    pub fn rx_coalesce(mut self, first: Duration) -> Self {
        self.coalesce = Some(first);
        self
    }

    /// The whole TCP configuration (replaces what the setters below changed).
    #[must_use]
    pub fn tcp_config(mut self, tcp: TcpConfig) -> Self {
        self.tcp = Some(tcp);
        self
    }

    fn tcp_mut(&mut self) -> &mut TcpConfig {
        self.tcp.get_or_insert_with(TcpConfig::default)
    }

    /// The largest per-connection send and receive buffers, in bytes (Linux
    /// `tcp_wmem[2]` / `tcp_rmem[2]`). Buffers start smaller and grow with use up to these;
    /// their storage is allocated only for data held (see [`TcpConfig::mem`] for the
    /// stack-wide budget).
    #[must_use]
    pub fn tcp_buffers(mut self, send_len: usize, recv_len: usize) -> Self {
        let t = self.tcp_mut();
        t.send_buffer_len = send_len.max(1);
        t.recv_buffer_len = recv_len.max(1);
        self
    }

    /// The stack-wide budget for TCP buffer storage (Linux `tcp_mem`): past `pressure`
    /// buffers stop growing, past `hard` new connections are refused.
    #[must_use]
    pub fn tcp_memory(mut self, limits: ulnet_stack::tcp::MemLimits) -> Self {
        self.tcp_mut().mem = limits;
        self
    }

    /// Selective acknowledgements (RFC 2018) on or off (default on).
    #[must_use]
    pub fn tcp_sack(mut self, on: bool) -> Self {
        self.tcp_mut().sack = on;
        self
    }

    /// Timestamps (RFC 7323) on or off (default on).
    #[must_use]
    pub fn tcp_timestamps(mut self, on: bool) -> Self {
        self.tcp_mut().timestamps = on;
        self
    }

    /// The congestion control new connections start with (per socket:
    /// [`TcpStream::set_congestion`](super::TcpStream::set_congestion)).
    #[must_use]
    pub fn tcp_congestion(mut self, alg: Algorithm) -> Self {
        self.tcp_mut().congestion = alg;
        self
    }

    /// No TCP layer at all (segments get no answer).
    #[must_use]
    pub fn without_tcp(mut self) -> Self {
        self.tcp = None;
        self
    }

    /// Runs `app` inside the loop too (after the socket API's own reactor).
    #[must_use]
    pub fn app(mut self, app: impl App + Send + 'static) -> Self {
        self.apps.push(Box::new(app));
        self
    }

    /// How long the last drop of the stack waits for closing connections to finish
    /// (default 1 s).
    #[must_use]
    pub fn close_linger(mut self, d: Duration) -> Self {
        self.close_linger = d;
        self
    }

    /// Whether tokio tasks whose socket operation is pending drive the loop from their
    /// own thread (default: yes, when the loop sleeps and its channel has a
    /// descriptor): the channel is registered with the task's runtime's reactor, and a
    /// task woken by it turns the loop, as a blocked call does, instead of the loop's
    /// thread taking every batch in and waking the task. This needs the runtime's IO
    /// driver, as tokio's own sockets do (`enable_io` or `enable_all`, which
    /// `#[tokio::main]` sets); without it the first pending operation panics in tokio.
    /// With `false` async sockets work on any runtime, the loop's thread handing every
    /// batch over (at MTU 1500 about a tenth slower and a third more CPU per byte:
    /// docs/performance-log.md, "Session 18"). No effect without the `tokio` feature.
    #[must_use]
    pub fn drive_from_tasks(mut self, yes: bool) -> Self {
        self.drive_from_tasks = yes;
        self
    }

    /// Runs over `channel` instead of opening a backend: e.g. one end of a
    /// [`pipe`](crate::channel::pipe::pair) or a simulated wire. The MAC defaults to one derived
    /// from the address.
    #[must_use]
    pub fn channel<C: Channel + Send + 'static>(mut self, channel: C) -> Self {
        self.channel = Some(AnyChannel(Box::new(channel)));
        self
    }

    /// Opens the channel, builds the interface, waits for its IPv6 addresses to pass
    /// duplicate address detection (about a second with IPv6, nothing without) and
    /// starts the loop's thread.
    ///
    /// # Errors
    /// As [`build_runtime`](Self::build_runtime); [`BuildError::Io`] when the loop's
    /// thread could not start, with kind `AddrInUse` when another node on the link holds
    /// one of the IPv6 addresses ([`Runtime::settle_addresses`]).
    pub fn build(mut self) -> Result<Stack, BuildError> {
        let apps = std::mem::take(&mut self.apps);
        let close_linger = self.close_linger;
        let drive_from_tasks = self.drive_from_tasks;
        let mut rt = self.build_runtime()?;
        // Sockets may be used as soon as this returns: IPv6 addresses must have passed
        // duplicate address detection (RFC 4862 §5.4) by then.
        let timeout = rt.settle_timeout();
        rt.settle_addresses(timeout)?;
        Ok(Stack::start(rt, apps, close_linger, drive_from_tasks)?)
    }

    /// Opens the channel and builds the interface and its runtime, without starting
    /// it: the caller runs its loop ([`Runtime::run`]) with its own [`App`], or hands it
    /// to [`Stack::from_runtime`]. The [`app`](Self::app)s and the
    /// [`close_linger`](Self::close_linger) belong to a [`Stack`] and are not used here.
    ///
    /// # Errors
    /// The first setter failure; [`BuildError::MissingAddress`], or
    /// [`BuildError::MissingInterface`] for a kernel backend; [`BuildError::Route`] for a
    /// route the table refuses; [`BuildError::Io`] with whatever opening the channel
    /// reports (the message names the system call and the fix).
    pub fn build_runtime(self) -> Result<Runtime<AnyChannel>, BuildError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.addresses.is_empty() {
            return Err(BuildError::MissingAddress);
        }
        let link = match self.channel {
            Some(ch) => Link::Channel(ch),
            None => Link::Kernel {
                backend: self.backend,
                ifname: self.ifname.ok_or(BuildError::MissingInterface)?,
                netns: self.netns,
                xdp: self.xdp.unwrap_or_default(),
            },
        };
        let rt = runtime::open(NetConfig {
            link,
            addresses: self.addresses,
            gateway: self.gateway,
            mac: self.mac,
            neighbors: self.neighbors,
            limits: self.limits,
            tcp: self.tcp,
            wait: self.wait,
            pcap: self.pcap,
            coalesce: self.coalesce,
        })?;
        {
            let mut iface = rt.iface();
            for r in &self.routes {
                iface
                    .routes_mut()
                    .add(*r)
                    .map_err(|error| BuildError::Route { dst: r.dst, error })?;
            }
        }
        Ok(rt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_reports_a_bad_or_missing_address_and_interface() {
        let e = Stack::builder().interface("x").build().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = Stack::builder()
            .interface("x")
            .address("198.18.0.1")
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("prefix"), "{e}");
        let e = Stack::builder()
            .address("198.18.0.1/24")
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("interface"), "{e}");
        assert!(parse_cidr("198.18.0.1/33").is_err());
        assert_eq!(
            parse_cidr("198.18.0.1/24").unwrap().address(),
            IpAddr::from([198, 18, 0, 1])
        );
    }

    #[test]
    fn builder_errors_are_typed_and_the_first_failure_wins() {
        let e = Stack::builder()
            .interface("x")
            .address("198.18.0.1/40")
            .address("nonsense/24")
            .build()
            .unwrap_err();
        assert!(
            matches!(
                &e,
                BuildError::Cidr { input, error: CidrError::PrefixTooLong } if input == "198.18.0.1/40"
            ),
            "{e:?}"
        );
        let e = Stack::builder().interface("x").build().unwrap_err();
        assert!(matches!(e, BuildError::MissingAddress), "{e:?}");
        let io: io::Error = Stack::builder()
            .address("198.18.0.1/24")
            .build()
            .unwrap_err()
            .into();
        assert_eq!(io.kind(), io::ErrorKind::InvalidInput);
        let inner = io.get_ref().and_then(|e| e.downcast_ref::<BuildError>());
        assert!(
            matches!(inner, Some(BuildError::MissingInterface)),
            "{io:?}"
        );
    }
}
