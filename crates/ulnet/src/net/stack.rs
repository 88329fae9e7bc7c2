//! [`Stack`]: one interface with its runtime loop on a thread of its own, and the
//! [`StackBuilder`] that chooses the backend, the interface and its namespace, the
//! addresses, routes, static neighbours, TCP tunables, the wait mode and a pcap file.
//!
//! The common case is three lines:
//!
//! ```no_run
//! use ulnet::net::{Stack, TcpListener};
//! let stack = Stack::builder().interface("veth1").address("198.18.0.5/24").build()?;
//! let listener = TcpListener::bind(&stack, "0.0.0.0:7")?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Lifetime: a `Stack` is a cheap, cloneable reference; every socket holds one too.
//! When the last reference goes, the loop is given a bounded time
//! ([`StackBuilder::close_linger`]) to finish the connections that are closing
//! (FINs sent and acknowledged), then it stops and its thread is joined.

use std::io;
use std::net::{AddrParseError, IpAddr};
use std::num::ParseIntError;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::thread::JoinHandle;
use std::time::Duration;

use ulnet_channel::xdp::XdpOptions;
use ulnet_channel::Channel;
use ulnet_stack::iface::{Interface, IpCidr, Route, RouteError};
use ulnet_stack::tcp::{Algorithm, TcpConfig};
use ulnet_wire::EthernetAddress;

use super::error::{err, stopped};
use super::reactor::{Notify, Reactor, Registry};
use crate::runtime::{self, App, Backend, Clock, Engine, Handle, NetConfig, Runtime, WaitMode};

/// Opens a runtime over a channel the user supplied.
type OpenCustom = Box<dyn FnOnce(&NetConfig) -> io::Result<Runtime<runtime::AnyChannel>> + Send>;

/// How the builder opens its channel.
enum Link {
    Backend,
    Custom(OpenCustom),
}

/// Why [`StackBuilder::build`] did not start a stack.
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

/// Configures and starts a [`Stack`]. Every setting has a default except the address
/// (and the interface, for the kernel backends).
pub struct StackBuilder {
    cfg: NetConfig,
    address: Option<IpCidr>,
    ifname: Option<String>,
    /// The first setter failure; [`build`](Self::build) returns it.
    error: Option<BuildError>,
    routes: Vec<Route>,
    apps: Vec<Box<dyn App + Send>>,
    close_linger: Duration,
    link: Link,
}

impl std::fmt::Debug for StackBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackBuilder")
            .field("backend", &self.cfg.backend)
            .field("ifname", &self.ifname)
            .field("netns", &self.cfg.netns)
            .field("address", &self.address)
            .field("error", &self.error)
            .field("routes", &self.routes)
            .field("wait", &self.cfg.wait)
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
        let placeholder = IpCidr::new(IpAddr::from([0, 0, 0, 0]), 0).expect("valid prefix");
        StackBuilder {
            cfg: NetConfig::new(Backend::Xdp, String::new(), placeholder),
            address: None,
            ifname: None,
            error: None,
            routes: Vec::new(),
            apps: Vec::new(),
            close_linger: Duration::from_secs(1),
            link: Link::Backend,
        }
    }
}

impl StackBuilder {
    /// Settings from the environment, for examples and tools: `ULNET_BACKEND`
    /// (xdp, packet, tap), `ULNET_IFACE`, `ULNET_NETNS`, `ULNET_ADDR` (with prefix),
    /// `ULNET_GATEWAY`, `ULNET_PCAP` and `ULNET_BUSY_POLL=1`. Unset variables leave the
    /// builder as it is; malformed ones make [`build`](Self::build) fail
    /// ([`BuildError::Env`]).
    #[must_use]
    pub fn from_env(mut self) -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        if let Some(b) = var("ULNET_BACKEND") {
            match b.parse() {
                Ok(b) => self.cfg.backend = b,
                Err(_) => self.fail_env("ULNET_BACKEND", BuildError::Backend { input: b }),
            }
        }
        if let Some(i) = var("ULNET_IFACE") {
            self.ifname = Some(i);
        }
        if let Some(n) = var("ULNET_NETNS") {
            self.cfg.netns = Some(n);
        }
        if let Some(a) = var("ULNET_ADDR") {
            match parse_cidr(&a) {
                Ok(c) => self.address = Some(c),
                Err(e) => self.fail_env("ULNET_ADDR", e),
            }
        }
        if let Some(g) = var("ULNET_GATEWAY") {
            match g.parse() {
                Ok(g) => self.cfg.gateway = Some(g),
                Err(error) => {
                    self.fail_env("ULNET_GATEWAY", BuildError::Gateway { input: g, error })
                }
            }
        }
        if let Some(p) = var("ULNET_PCAP") {
            self.cfg.pcap = Some(p.into());
        }
        if var("ULNET_BUSY_POLL").is_some_and(|v| v == "1") {
            self.cfg.wait = WaitMode::BusyPoll;
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
        self.cfg.backend = backend;
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
        self.cfg.netns = Some(netns.into());
        self
    }

    /// The stack's address with its prefix, e.g. `"198.18.0.5/24"` (not the kernel's;
    /// a malformed one makes [`build`](Self::build) fail with [`BuildError::Cidr`]).
    #[must_use]
    pub fn address(mut self, cidr: &str) -> Self {
        match parse_cidr(cidr) {
            Ok(c) => self.address = Some(c),
            Err(e) => self.fail(e),
        }
        self
    }

    /// The stack's address as an [`IpCidr`].
    #[must_use]
    pub fn address_cidr(mut self, cidr: IpCidr) -> Self {
        self.address = Some(cidr);
        self
    }

    /// The default gateway.
    #[must_use]
    pub fn gateway(mut self, gateway: IpAddr) -> Self {
        self.cfg.gateway = Some(gateway);
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
        self.cfg.mac = Some(mac);
        self
    }

    /// A static neighbour: never resolved by ARP.
    #[must_use]
    pub fn neighbor(mut self, ip: IpAddr, mac: EthernetAddress) -> Self {
        self.cfg.neighbors.push((ip, mac));
        self
    }

    /// Busy-poll or sleep (default: sleep).
    #[must_use]
    pub fn wait(mut self, wait: WaitMode) -> Self {
        self.cfg.wait = wait;
        self
    }

    /// Records every frame in and out to a pcap file.
    #[must_use]
    pub fn pcap(mut self, path: impl Into<PathBuf>) -> Self {
        self.cfg.pcap = Some(path.into());
        self
    }

    /// AF_XDP options (queue, ring sizes, copy or zero-copy, further steered
    /// addresses); the interface and namespace are [`interface`](Self::interface) and
    /// [`netns`](Self::netns), and the stack's address is always steered.
    #[must_use]
    pub fn xdp(mut self, options: XdpOptions) -> Self {
        self.cfg.xdp = Some(options);
        self
    }

    /// The whole TCP configuration (replaces what the setters below changed).
    #[must_use]
    pub fn tcp_config(mut self, tcp: TcpConfig) -> Self {
        self.cfg.tcp = Some(tcp);
        self
    }

    fn tcp_mut(&mut self) -> &mut TcpConfig {
        self.cfg.tcp.get_or_insert_with(TcpConfig::default)
    }

    /// Per-connection send and receive buffer sizes, in bytes (the engine's buffers are
    /// allocated per connection when it opens, so this applies to every socket).
    #[must_use]
    pub fn tcp_buffers(mut self, send_len: usize, recv_len: usize) -> Self {
        let t = self.tcp_mut();
        t.send_buffer_len = send_len.max(1);
        t.recv_buffer_len = recv_len.max(1);
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
        self.cfg.tcp = None;
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

    /// Runs over `channel` instead of opening a backend: e.g. one end of a
    /// [`pipe`](crate::channel::pipe::pair) or a simulated wire. The MAC defaults to one derived
    /// from the address.
    #[must_use]
    pub fn channel<C: Channel + Send + 'static>(mut self, channel: C) -> Self {
        self.link = Link::Custom(Box::new(move |cfg: &NetConfig| {
            let ch = runtime::AnyChannel(Box::new(channel));
            let caps = ch.capabilities();
            let mac = cfg
                .mac
                .unwrap_or_else(|| runtime::local_mac(cfg.address.address()));
            let iface = runtime::build_interface(cfg, &caps, mac)?;
            Runtime::new(ch, iface, cfg.wait, Clock::monotonic())
        }));
        self
    }

    /// Opens the channel, builds the interface and starts the loop's thread.
    ///
    /// # Errors
    /// The first setter failure; [`BuildError::MissingAddress`], or
    /// [`BuildError::MissingInterface`] for a kernel backend; [`BuildError::Route`] for a
    /// route the table refuses; [`BuildError::Io`] with whatever opening the channel
    /// reports (the message names the system call and the fix).
    pub fn build(mut self) -> Result<Stack, BuildError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.cfg.address = self.address.take().ok_or(BuildError::MissingAddress)?;
        let rt = match self.link {
            Link::Backend => {
                self.cfg.ifname = self.ifname.take().ok_or(BuildError::MissingInterface)?;
                runtime::open(&self.cfg)?
            }
            Link::Custom(open) => {
                self.cfg.ifname = self.ifname.take().unwrap_or_default();
                open(&self.cfg)?
            }
        };
        {
            let mut iface = rt.iface();
            for r in &self.routes {
                iface
                    .routes_mut()
                    .add(*r)
                    .map_err(|error| BuildError::Route { dst: r.dst, error })?;
            }
        }
        Ok(Stack::start(rt, self.apps, self.close_linger)?)
    }
}

pub(crate) struct StackInner {
    handle: Handle,
    registry: Arc<Registry>,
    local_ip: IpAddr,
    close_linger: Duration,
    /// The loop, turned by its own thread and by application threads that wait.
    engine: Arc<Engine>,
    thread: Mutex<Option<JoinHandle<io::Result<()>>>>,
}

impl Drop for StackInner {
    fn drop(&mut self) {
        if !self.registry.is_closed() {
            // Let closing connections finish (FIN out and acknowledged), bounded.
            let deadline = std::time::Instant::now() + self.close_linger;
            let mut g = self.handle.lock();
            while g.tcp().is_some_and(|t| t.connection_count() > 0) {
                let now = std::time::Instant::now();
                if now >= deadline {
                    break;
                }
                self.handle.wake();
                g = self
                    .handle
                    .wait_change(g, (deadline - now).min(Duration::from_millis(50)));
            }
        }
        self.handle.stop();
        let t = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}

/// A running user-level stack: an interface driven by a runtime loop on its own
/// thread. Clone it freely (it is a reference); it is `Send + Sync`.
#[derive(Clone)]
pub struct Stack {
    inner: Arc<StackInner>,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("local_ip", &self.inner.local_ip)
            .field("running", &self.is_running())
            .finish()
    }
}

impl Stack {
    /// A builder with the defaults.
    pub fn builder() -> StackBuilder {
        StackBuilder::default()
    }

    /// Wraps a runtime built by hand (e.g. with [`runtime::open`]) and starts its loop
    /// on a new thread, with `apps` inside it.
    ///
    /// # Errors
    /// `InvalidInput` when the interface has no address; the thread could not start.
    pub fn from_runtime<C: Channel + Send + 'static>(
        rt: Runtime<C>,
        apps: Vec<Box<dyn App + Send>>,
    ) -> io::Result<Stack> {
        Stack::start(rt, apps, Duration::from_secs(1))
    }

    fn start<C: Channel + Send + 'static>(
        rt: Runtime<C>,
        apps: Vec<Box<dyn App + Send>>,
        close_linger: Duration,
    ) -> io::Result<Stack> {
        let local_ip = rt
            .iface()
            .config()
            .addresses
            .first()
            .map(IpCidr::address)
            .ok_or_else(|| err(io::ErrorKind::InvalidInput, "the interface has no address"))?;
        let handle = rt.handle();
        let registry = Arc::new(Registry::default());
        let reactor = Reactor {
            registry: Arc::clone(&registry),
            apps,
            socket_events: Vec::with_capacity(128),
        };
        let engine = Arc::new(Engine::new(rt, reactor)?);
        let reg = Arc::clone(&registry);
        let e = Arc::clone(&engine);
        let thread = std::thread::Builder::new()
            .name("ulnet-stack".into())
            .spawn(move || {
                let r = e.run();
                reg.close();
                r
            })?;
        Ok(Stack {
            inner: Arc::new(StackInner {
                handle,
                registry,
                local_ip,
                close_linger,
                engine,
                thread: Mutex::new(Some(thread)),
            }),
        })
    }

    /// The runtime handle: lock the interface, wake or stop the loop.
    pub fn handle(&self) -> &Handle {
        &self.inner.handle
    }

    /// The stack's own address (the first configured).
    pub fn local_ip(&self) -> IpAddr {
        self.inner.local_ip
    }

    /// Runs `f` on the locked interface with the loop's `now`, then wakes the loop.
    /// Keep `f` short: the loop waits for it.
    pub fn with<R>(&self, f: impl FnOnce(&mut Interface) -> R) -> R {
        self.inner.handle.with(|iface, _| f(iface))
    }

    /// Whether the loop still runs.
    pub fn is_running(&self) -> bool {
        !self.inner.registry.is_closed()
    }

    /// Stops the loop now (connections are not closed gracefully); every blocked
    /// operation returns `NotConnected`. Waits for the loop's thread.
    ///
    /// # Errors
    /// The loop had failed with this error (a channel system call).
    pub fn stop(&self) -> io::Result<()> {
        self.inner.handle.stop();
        let t = self
            .inner
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match t.map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(err(io::ErrorKind::Other, "the ulnet loop panicked")),
            None => Ok(()),
        }
    }

    /// Turns the loop on the calling thread until `ready()` or `deadline` (false when
    /// it passed first); see `runtime/turn.rs`.
    pub(crate) fn drive_until(
        &self,
        ready: impl FnMut() -> bool,
        deadline: Option<std::time::Instant>,
    ) -> bool {
        self.inner.engine.drive_until(ready, deadline)
    }

    pub(crate) fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    pub(crate) fn same(&self, other: &Stack) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Runs `op` on the locked interface until it is ready: `Poll::Pending` waits for
    /// the socket's next readiness event (`notify`), up to `timeout`. `before_wait` runs
    /// under the lock just before sleeping.
    ///
    /// # Errors
    /// What `op` returns; `WouldBlock` when `nonblocking` and not ready, or when the
    /// timeout passes (std's read/write timeouts on Unix), `timeout_kind` for the
    /// latter; `NotConnected` once the loop has stopped.
    pub(crate) fn block<T>(
        &self,
        notify: &Notify,
        nonblocking: bool,
        timeout: Option<Duration>,
        timeout_kind: io::ErrorKind,
        mut op: impl FnMut(&mut Interface) -> Poll<io::Result<T>>,
        before_wait: &dyn Fn(),
    ) -> io::Result<T> {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        loop {
            let seen = {
                let mut g = self.inner.handle.lock();
                if let Poll::Ready(r) = op(&mut g) {
                    drop(g);
                    // What `op` queued (data, a window update) leaves from this thread
                    // when application threads drive, else with the loop's next batch.
                    self.inner.engine.after_call();
                    return r;
                }
                if self.registry().is_closed() {
                    return Err(stopped());
                }
                if !nonblocking {
                    before_wait();
                }
                notify.seq()
            };
            if nonblocking {
                self.inner.engine.after_call();
                return Err(io::ErrorKind::WouldBlock.into());
            }
            // Drive the loop from this thread until the socket's readiness moves,
            // rather than sleep until the loop's thread hands it over.
            if !self
                .inner
                .engine
                .drive_until(|| notify.seq() != seen, deadline)
            {
                return Err(err(timeout_kind, "operation timed out"));
            }
        }
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
