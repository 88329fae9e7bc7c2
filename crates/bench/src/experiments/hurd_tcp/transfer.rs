//! hurd-tcp's transfers: the receiver's rate windows (average and fullest 100 ms), the
//! offload switch, opening and closing ulnet's stack on each backend, and one function
//! per kind of transfer (kernel, ulnet through the socket API, ulnet's in-loop discard,
//! iperf3), each measured inside a CPU window and checked byte for byte.

use super::*;
use ulnet::channel::Channel;
use ulnet::net::{StackBuilder, TcpInfo};

/// The step a [`RateWindows`] slides its window by.
pub(super) const PEAK_STEP: Duration = Duration::from_millis(1);

/// Bytes seen by a receiver, counted in 1 ms steps from the first byte, so the fullest
/// window of any length that is a whole number of steps can be found by sliding it.
///
/// Why sliding rather than fixed 100 ms buckets: a transfer here spans only a few
/// windows, and with fixed buckets the only complete one is often the first (slow
/// start), which would put the "peak" below the average.
#[derive(Debug, Clone)]
pub(crate) struct RateWindows {
    window: Duration,
    first: Option<Instant>,
    last: Option<Instant>,
    steps: Vec<u64>,
    total: u64,
}

/// What [`RateWindows`] saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rates {
    /// Bytes seen.
    pub total: u64,
    /// From the first read to the last.
    pub span: Duration,
    /// Bytes per second over `span`.
    pub avg_bps: f64,
    /// Bytes per second in the fullest window lying wholly inside `span`; `avg_bps`
    /// when the transfer was shorter than one window.
    pub peak_bps: f64,
    /// How many whole windows `span` holds.
    pub full_windows: usize,
}

impl RateWindows {
    /// Empty, with windows of `window` (a whole number of milliseconds).
    pub(crate) fn new(window: Duration) -> Self {
        RateWindows {
            window,
            first: None,
            last: None,
            steps: Vec::new(),
            total: 0,
        }
    }

    /// Counts `n` bytes read now.
    pub(crate) fn record(&mut self, n: usize) {
        self.record_at(Instant::now(), n);
    }

    /// Counts `n` bytes read at `t`.
    pub(crate) fn record_at(&mut self, t: Instant, n: usize) {
        if n == 0 {
            return;
        }
        let first = *self.first.get_or_insert(t);
        let i = (t.saturating_duration_since(first).as_nanos() / PEAK_STEP.as_nanos()) as usize;
        if self.steps.len() <= i {
            self.steps.resize(i + 1, 0);
        }
        self.steps[i] += n as u64;
        self.total += n as u64;
        self.last = Some(self.last.map_or(t, |l| l.max(t)));
    }

    /// The rates so far.
    pub(crate) fn rates(&self) -> Rates {
        let span = match (self.first, self.last) {
            (Some(f), Some(l)) => l.saturating_duration_since(f),
            _ => Duration::ZERO,
        };
        let secs = span.as_secs_f64();
        let avg_bps = if secs > 0.0 {
            self.total as f64 / secs
        } else {
            0.0
        };
        let full_windows = (span.as_nanos() / self.window.as_nanos()) as usize;
        let k = ((self.window.as_nanos() / PEAK_STEP.as_nanos()) as usize).max(1);
        // Steps wholly inside the span (the last one holds the last byte and may be
        // partial); every window of k of them is a candidate.
        let whole = ((span.as_nanos() / PEAK_STEP.as_nanos()) as usize).min(self.steps.len());
        let peak_bps = if full_windows == 0 || whole < k {
            avg_bps
        } else {
            let mut sum: u64 = self.steps[..k].iter().sum();
            let mut best = sum;
            for i in k..whole {
                sum = sum + self.steps[i] - self.steps[i - k];
                best = best.max(sum);
            }
            best as f64 / self.window.as_secs_f64()
        };
        Rates {
            total: self.total,
            span,
            avg_bps,
            peak_bps,
            full_windows,
        }
    }
}

/// The discard app with the receiver's windows: counts what the in-loop sink has taken
/// after every loop iteration.
pub(super) struct TimedDiscard {
    inner: Discard,
    seen: u64,
    rates: RateWindows,
}

impl App for TimedDiscard {
    fn poll(&mut self, now: ulnet::stack::time::Instant, iface: &mut Interface, events: &[Event]) {
        self.inner.poll(now, iface, events);
        let b = self.inner.stats().tcp_bytes;
        if b > self.seen {
            self.rates.record((b - self.seen) as usize);
            self.seen = b;
        }
    }
}

/// What one transfer measured.
pub(super) struct Transfer {
    bytes: u64,
    rates: Rates,
}

pub(crate) fn join<T>(t: JoinHandle<io::Result<T>>, what: &str) -> io::Result<T> {
    t.join()
        .map_err(|_| io::Error::other(format!("{what} panicked")))?
}

/// Turns the offloads the testbed switched off on or off again, at both veth ends.
pub(super) fn set_offloads(tb: &Testbed, on: bool) -> io::Result<()> {
    let v = if on { "on" } else { "off" };
    for side in [tb.a(), tb.b()] {
        side.run(
            "ethtool",
            [
                "-K",
                side.ifname.as_str(),
                "tx",
                v,
                "tso",
                v,
                "gso",
                v,
                "gro",
                v,
            ],
        )
        .map_err(io_err)?;
    }
    Ok(())
}

/// Turns A's transmit checksum and segmentation offloads on (B's stay as they are):
/// veth then passes ulnet's 64 KB bursts to B whole, as it does the kernel's own TSO
/// packets. B's transmit checksums stay off, as in the other ulnet rows.
pub(super) fn set_a_tx_offloads(tb: &Testbed, on: bool) -> io::Result<()> {
    let v = if on { "on" } else { "off" };
    let a = tb.a();
    a.run(
        "ethtool",
        ["-K", a.ifname.as_str(), "tx", v, "tso", v, "gso", v],
    )
    .map_err(io_err)?;
    Ok(())
}

/// The offloads of `side` as `ethtool -k` reads them back, in short form.
pub(super) fn offload_text(side: &Side) -> String {
    match side.offload_features() {
        Ok(f) => [
            "tx-checksumming",
            "tcp-segmentation-offload",
            "generic-segmentation-offload",
            "generic-receive-offload",
        ]
        .iter()
        .map(|k| {
            format!(
                "{k} {}",
                match f.get(*k) {
                    Some(true) => "on",
                    Some(false) => "off",
                    None => "?",
                }
            )
        })
        .collect::<Vec<_>>()
        .join(", "),
        Err(e) => format!("unreadable ({e})"),
    }
}

/// `EBUSY`: the previous round's AF_XDP socket on this queue is still being released
/// (the kernel frees its buffer pool from a workqueue), so retry a moment later.
pub(super) fn is_busy(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::ResourceBusy
        || e.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error())
}

pub(super) fn retry_busy<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut tries = 0;
    loop {
        match f() {
            Err(e) if is_busy(&e) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(40));
            }
            r => return r,
        }
    }
}

/// A running ulnet stack for a round, and how its channel runs.
pub(crate) struct UlnetStack {
    pub(crate) stack: Stack,
    pub(crate) ip: IpAddr,
    pub(super) mode: String,
    /// Only for TAP: the forwarding was turned on in A and must go off again.
    forwarding: bool,
}

/// Opens ulnet's channel for `backend` in namespace A (retrying while the previous
/// round's AF_XDP socket is released), then builds the stack over it with the socket
/// API's builder. The channel is opened here rather than by `build()` so its
/// capabilities (XDP mode, copy/zero-copy, multi-buffer) can be recorded.
///
/// With `gso`, ulnet sends TCP bursts for the kernel to cut (`XdpOptions::gso`,
/// `PacketOptions::gso`); with `super_frames`, it takes B's TSO super-frames whole
/// (`XdpOptions::rx_super_frames`; AF_XDP only).
pub(crate) fn open_stack_with(
    tb: &Testbed,
    backend: Backend,
    gso: bool,
    super_frames: bool,
) -> io::Result<UlnetStack> {
    let a = tb.a();
    let b = tb.b();
    let builder = Stack::builder()
        .netns(&a.ns)
        .wait(WaitMode::Sleep)
        .close_linger(Duration::from_millis(500));
    let (builder, caps, ip, forwarding): (_, Capabilities, IpAddr, bool) = match backend {
        Backend::Xdp => {
            let ip = a.spare_of(a.ipv6, 0);
            let o = XdpOptions {
                addresses: vec![ip],
                gso,
                rx_super_frames: super_frames,
                ..XdpOptions::default()
            };
            let ch = retry_busy(|| {
                XdpChannel::open(&a.ifname, Some(&a.ns), &o).map_err(io::Error::from)
            })?;
            let (builder, caps) = on_veth(builder, a, ip, ch)?;
            (builder, caps, ip, false)
        }
        Backend::Packet => {
            let ip = a.spare_of(a.ipv6, 1);
            let o = PacketOptions {
                gso,
                ..PacketOptions::default()
            };
            let ch = PacketChannel::open(&a.ifname, Some(&a.ns), &o).map_err(io::Error::from)?;
            let (builder, caps) = on_veth(builder, a, ip, ch)?;
            (builder, caps, ip, false)
        }
        Backend::Tap => {
            let ip = IpAddr::V4(TAP_ULNET_IP);
            let ch = TapChannel::open(TAP_DEV, Some(&a.ns), &TapOptions::default())
                .map_err(io::Error::from)?;
            let caps = ch.capabilities();
            // A's kernel is the TAP's other end: give it an address there and let it
            // forward between the veth and the TAP (B routes ulnet's subnet via A).
            let kip = format!("{TAP_KERNEL_IP}/24");
            a.run("ip", ["addr", "replace", kip.as_str(), "dev", TAP_DEV])
                .map_err(io_err)?;
            a.run("sysctl", ["-q", "-w", "net.ipv4.ip_forward=1"])
                .map_err(io_err)?;
            b.run(
                "ip",
                [
                    "route",
                    "replace",
                    "198.19.255.0/24",
                    "via",
                    &a.ip.to_string(),
                ],
            )
            .map_err(io_err)?;
            (
                builder
                    .interface(TAP_DEV)
                    .address_cidr(cidr(ip, 24)?)
                    .gateway(IpAddr::V4(TAP_KERNEL_IP))
                    .channel(ch),
                caps,
                ip,
                true,
            )
        }
    };
    let stack = match builder.build() {
        Ok(s) => s,
        Err(e) => {
            if forwarding {
                let _ = a.run("sysctl", ["-q", "-w", "net.ipv4.ip_forward=0"]);
            }
            return Err(e.into());
        }
    };
    Ok(UlnetStack {
        stack,
        ip,
        mode: format!(
            "{} ({}), link MTU {}, largest frame {}",
            caps.name, caps.mode, caps.mtu, caps.max_frame_len
        ),
        forwarding,
    })
}

/// The builder over `ch`, a channel opened on A's veth end, with A's MAC and `ip`; and
/// the channel's capabilities (read before the builder takes it).
fn on_veth<C: Channel + Send + 'static>(
    builder: StackBuilder,
    a: &Side,
    ip: IpAddr,
    ch: C,
) -> io::Result<(StackBuilder, Capabilities)> {
    let mac = runtime::interface_mac(Some(&a.ns), &a.ifname)?;
    let caps = ch.capabilities();
    let builder = builder
        .interface(&a.ifname)
        .mac(mac)
        .address_cidr(cidr(ip, a.prefix_for(ip))?)
        .channel(ch);
    Ok((builder, caps))
}

/// Stops the stack (after its bounded linger) and undoes the TAP forwarding.
pub(crate) fn close_stack(tb: &Testbed, u: UlnetStack) -> io::Result<()> {
    let UlnetStack {
        stack, forwarding, ..
    } = u;
    drop(stack);
    if forwarding {
        tb.a()
            .run("sysctl", ["-q", "-w", "net.ipv4.ip_forward=0"])
            .map_err(io_err)?;
    }
    Ok(())
}

pub(super) fn cidr(ip: IpAddr, len: u8) -> io::Result<IpCidr> {
    IpCidr::new(ip, len).ok_or_else(|| io_err(format!("bad prefix /{len}")))
}

/// Checks the receiver's count and pattern and turns a transfer into metrics.
pub(crate) fn finish(
    expected: u64,
    got: u64,
    pattern_ok: bool,
    rates: Rates,
    cpu: crate::harness::CpuUse,
) -> io::Result<Metrics> {
    if got != expected || !pattern_ok || rates.total != expected {
        return Err(io::Error::other(format!(
            "the receiver got {got} of {expected} bytes (timed {}; pattern ok: {pattern_ok})",
            rates.total
        )));
    }
    let t = Transfer { bytes: got, rates };
    let mut m = cpu.metrics(Some(t.bytes), None);
    m.insert("bytes_checked".into(), t.bytes as f64);
    m.insert("goodput_gbps".into(), t.rates.avg_bps * 8.0 / 1e9);
    m.insert("avg_mbytes_s".into(), t.rates.avg_bps / 1e6);
    m.insert("peak_gbps".into(), t.rates.peak_bps * 8.0 / 1e9);
    m.insert("peak_mbytes_s".into(), t.rates.peak_bps / 1e6);
    m.insert("transfer_s".into(), t.rates.span.as_secs_f64());
    m.insert("full_windows".into(), t.rates.full_windows as f64);
    Ok(m)
}

/// A kernel receiver with the peak windows, on `cpu` in `side`'s namespace.
pub(crate) type Sink = JoinHandle<io::Result<(load::Received, RateWindows)>>;

pub(crate) fn timed_sink(side: &Side, at: SocketAddr, cpu: usize) -> io::Result<Sink> {
    load::tcp_sink_with(
        &side.ns,
        at,
        cpu,
        RateWindows::new(PEAK_WINDOW),
        RateWindows::record,
    )
}

/// The peer in B sends; the kernel's socket in A receives (the system under test).
pub(crate) fn kernel_rx(tb: &Testbed, port: u16, bytes: u64) -> io::Result<Metrics> {
    let at = SocketAddr::new(tb.a().ip_of(tb.a().ipv6), port);
    let w = Window::start()?;
    let sink = timed_sink(tb.a(), at, SUT_CPU)?;
    let sent = load::tcp_send(&tb.b().ns, at, bytes).and_then(|s| join(s, "sender"));
    let got = join(sink, "kernel receiver");
    let sent = sent?;
    let (got, rates) = got?;
    let cpu = w.finish(sent.cpu)?;
    finish(bytes, got.done.count, got.pattern_ok, rates.rates(), cpu)
}

/// The cross-check by a tool no one here wrote: `iperf3 -c` in B (load core) sends
/// `bytes` to `iperf3 -s` in A (SUT core), kernel both ends, 100 ms report intervals.
/// Its own figures are recorded: the receiver's average, the fullest 100 ms interval as
/// the peak, and its server's CPU (as the system under test's); the machine's CPU from
/// the window as for every row. iperf3 checks no bytes.
pub(super) fn iperf3_rx(tb: &Testbed, port: u16, bytes: u64) -> io::Result<Metrics> {
    let (a, b) = (tb.a(), tb.b());
    let (ip, port) = (a.ip_of(a.ipv6).to_string(), port.to_string());
    let _server = a
        .spawn(
            "taskset",
            ["-c", "1", "iperf3", "-s", "-1", "-B", &ip, "-p", &port],
        )
        .map_err(io_err)?;
    let w = Window::start()?;
    let mut tries = 0;
    let out = loop {
        let o = b
            .output(
                "taskset",
                [
                    "-c",
                    "0",
                    "iperf3",
                    "-c",
                    &ip,
                    "-p",
                    &port,
                    "-n",
                    &bytes.to_string(),
                    "-i",
                    "0.1",
                    "-J",
                ],
            )
            .map_err(io_err)?;
        // The server may not be listening yet. iperf3 -J reports that as JSON with an
        // "error" member ("unable to connect to server: Connection refused") and, in the
        // version here, exit status 0: retry that case only, until the server listens.
        let refused = String::from_utf8_lossy(&o.stdout).contains("unable to connect");
        if !refused || tries >= 40 {
            break o;
        }
        tries += 1;
        std::thread::sleep(Duration::from_millis(50));
    };
    let cpu = w.finish(Duration::ZERO)?;
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(io_err)?;
    if let Some(e) = j["error"].as_str() {
        return Err(io::Error::other(format!("iperf3 client: {e}")));
    }
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "iperf3 client failed ({})",
            out.status
        )));
    }
    let f = iperf3_figures(&j).ok_or_else(|| io_err("iperf3's JSON lacks its end summary"))?;
    let mut m = cpu.metrics(Some(f.bytes), None);
    let secs = f.bytes as f64 * 8.0 / f.bps;
    m.insert("goodput_gbps".into(), f.bps / 1e9);
    m.insert("avg_mbytes_s".into(), f.bps / 8.0 / 1e6);
    m.insert("peak_gbps".into(), f.peak_bps / 1e9);
    m.insert("peak_mbytes_s".into(), f.peak_bps / 8.0 / 1e6);
    m.insert("transfer_s".into(), secs);
    // iperf3's own CPU figure for its server, the receiving system under test.
    let sut_s = f.server_cpu_pct / 100.0 * secs;
    m.insert("sut_s".into(), sut_s);
    m.insert("sut_s_per_gb".into(), sut_s / (f.bytes as f64 / 1e9));
    Ok(m)
}

/// What iperf3 -J reports of a transfer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Iperf3 {
    /// Bytes the receiver got.
    bytes: u64,
    /// The receiver's average, bits per second.
    bps: f64,
    /// The fullest report interval, bits per second.
    peak_bps: f64,
    /// The server's (receiver's) CPU, percent of one core over the test.
    server_cpu_pct: f64,
}

pub(super) fn iperf3_figures(j: &serde_json::Value) -> Option<Iperf3> {
    let end = &j["end"];
    let recv = &end["sum_received"];
    let peak_bps = j["intervals"]
        .as_array()?
        .iter()
        .filter_map(|i| i["sum"]["bits_per_second"].as_f64())
        .fold(0.0, f64::max);
    Some(Iperf3 {
        bytes: recv["bytes"].as_u64()?,
        bps: recv["bits_per_second"].as_f64()?,
        peak_bps,
        server_cpu_pct: end["cpu_utilization_percent"]["remote_total"].as_f64()?,
    })
}

/// The kernel's socket in A sends (the system under test) to the peer in B.
pub(crate) fn kernel_tx(tb: &Testbed, port: u16, bytes: u64) -> io::Result<Metrics> {
    let at = SocketAddr::new(tb.b().ip_of(tb.b().ipv6), port);
    let w = Window::start()?;
    let sink = timed_sink(tb.b(), at, LOAD_CPU)?;
    let sent = load::tcp_send_on(&tb.a().ns, at, bytes, SUT_CPU).and_then(|s| join(s, "sender"));
    let got = join(sink, "peer receiver");
    sent?;
    let (got, rates) = got?;
    let cpu = w.finish(got.done.cpu)?;
    finish(bytes, got.done.count, got.pattern_ok, rates.rates(), cpu)
}

/// What an application thread reports after reading a transfer: bytes, whether every
/// byte matched the pattern, and the per-read rate windows.
type Received = (u64, bool, RateWindows);

/// The peer in B sends `bytes` to ulnet in A; `app` is the application on its own
/// thread (it inherits the system-under-test core from the main thread): it accepts one
/// connection on the listener, reads to EOF checking the pattern, and closes.
fn ulnet_rx_with(
    u: &UlnetStack,
    b: &Side,
    port: u16,
    bytes: u64,
    app: impl FnOnce(TcpListener) -> io::Result<Received> + Send + 'static,
) -> io::Result<Metrics> {
    let at = SocketAddr::new(u.ip, port);
    let listener = TcpListener::bind(&u.stack, at)?;
    let count = LoopCount::now(&u.stack);
    let w = Window::start()?;
    let reader = std::thread::spawn(move || app(listener));
    let sent = load::tcp_send(&b.ns, at, bytes).and_then(|s| join(s, "sender"));
    if sent.is_err() {
        // Unblocks the reader (a blocked accept or read returns NotConnected).
        let _ = u.stack.stop();
    }
    let got = join(reader, "ulnet reader");
    let sent = sent?;
    let (got, ok, rates) = got?;
    let cpu = w.finish(sent.cpu)?;
    let mut m = finish(bytes, got, ok, rates.rates(), cpu)?;
    count.add_to(&u.stack, &mut m);
    Ok(m)
}

/// Where ulnet's loop turned during a transfer: which thread did the stack's work.
#[derive(Clone, Copy)]
struct LoopCount {
    stats: ulnet::runtime::RuntimeStats,
    /// `Stack::loop_thread_turns`, read under the turn (so it agrees with the loop's
    /// iterations, which `stats` read apart from it may not).
    thread_turns: u64,
    /// Frames that came in several buffers: taken where they lie, and gathered first
    /// (`Interface::ingress_parts`).
    parts: (u64, u64),
}

impl LoopCount {
    fn now(stack: &Stack) -> LoopCount {
        LoopCount {
            stats: stack.loop_stats(),
            thread_turns: stack.loop_thread_turns(),
            parts: stack.with(|iface| {
                let s = iface.stats();
                (s.rx_parts_in_place, s.rx_parts_gathered)
            }),
        }
    }

    /// Adds, per GB moved, the loop's turns (`loop_turns_per_gb`), those the loop's
    /// own thread took (`loop_thread_turns_per_gb`: the rest ran on the application's
    /// thread, in a blocked call, a tokio task or after a call that queued data), its
    /// sleeps (`loop_sleeps_per_gb`) and the doorbells it rang (`loop_flushes_per_gb`).
    /// A hand-off between the application's thread and the loop's shows as the loop's
    /// own thread's share. Where frames came in several buffers (AF_XDP multi-buffer),
    /// how many per GB the stack took where they lie (`rx_parts_in_place_per_gb`) and
    /// how many it gathered into one buffer first (`rx_parts_gathered_per_gb`).
    fn add_to(self, end: &Stack, m: &mut Metrics) {
        let e = LoopCount::now(end);
        let Some(gb) = m.get("bytes_checked").map(|b| b / 1e9).filter(|g| *g > 0.0) else {
            return;
        };
        let all = e.stats.iterations.saturating_sub(self.stats.iterations);
        let per = |n: u64| n as f64 / gb;
        m.insert("loop_turns_per_gb".into(), per(all));
        m.insert(
            "loop_thread_turns_per_gb".into(),
            per(e.thread_turns.saturating_sub(self.thread_turns)),
        );
        m.insert(
            "loop_sleeps_per_gb".into(),
            per(e.stats.sleeps.saturating_sub(self.stats.sleeps)),
        );
        m.insert(
            "loop_flushes_per_gb".into(),
            per(e.stats.flushes.saturating_sub(self.stats.flushes)),
        );
        let in_place = e.parts.0.saturating_sub(self.parts.0);
        let gathered = e.parts.1.saturating_sub(self.parts.1);
        if in_place + gathered > 0 {
            m.insert("rx_parts_in_place_per_gb".into(), per(in_place));
            m.insert("rx_parts_gathered_per_gb".into(), per(gathered));
        }
    }
}

/// One read's bookkeeping: rate window, pattern check, offset.
fn note_read(rx: &mut Received, data: &[u8]) {
    rx.2.record(data.len());
    rx.1 &= pattern::matches(rx.0, data);
    rx.0 += data.len() as u64;
}

/// The peer in B sends to ulnet in A, which receives through its socket API.
pub(crate) fn ulnet_rx(u: &UlnetStack, b: &Side, port: u16, bytes: u64) -> io::Result<Metrics> {
    ulnet_rx_with(u, b, port, bytes, |listener| {
        let (mut s, _) = listener.accept()?;
        s.set_read_timeout(Some(IDLE_LIMIT))?;
        let mut buf = vec![0u8; IO_CHUNK];
        let mut rx: Received = (0, true, RateWindows::new(PEAK_WINDOW));
        loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                break;
            }
            note_read(&mut rx, &buf[..n]);
        }
        // Closing tells the sender everything arrived.
        drop(s);
        Ok(rx)
    })
}

/// ulnet in A sends `bytes` to the peer in B; `app` is the application on this thread:
/// it connects, writes the pattern, half-closes and reads until the peer closes, and
/// returns the bytes written and the connection's figures after the last write.
fn ulnet_tx_with(
    u: &UlnetStack,
    b: &Side,
    port: u16,
    bytes: u64,
    app: impl FnOnce(&Stack, SocketAddr) -> io::Result<(u64, Option<TcpInfo>)>,
) -> io::Result<Metrics> {
    let at = SocketAddr::new(b.ip_of(b.ipv6), port);
    let count = LoopCount::now(&u.stack);
    let w = Window::start()?;
    let sink = timed_sink(b, at, LOAD_CPU)?;
    let sent = app(&u.stack, at);
    if sent.is_err() {
        // Resets nothing gracefully, but the peer's idle timeout bounds its wait.
        let _ = u.stack.stop();
    }
    let got = join(sink, "peer receiver");
    let (_, info) = sent?;
    let (got, rates) = got?;
    let cpu = w.finish(got.done.cpu)?;
    let mut m = finish(bytes, got.done.count, got.pattern_ok, rates.rates(), cpu)?;
    count.add_to(&u.stack, &mut m);
    if let Some(info) = info {
        sender_figures(&info, &mut m);
    }
    Ok(m)
}

/// What the sending connection knew once everything was written: its smoothed round
/// trip (how long ACKs took to come back: a sender whose ACKs wait is held to a window
/// per round trip), congestion window and retransmissions.
fn sender_figures(info: &TcpInfo, m: &mut Metrics) {
    if let Some(srtt) = info.srtt {
        m.insert("sender_srtt_us".into(), srtt.as_secs_f64() * 1e6);
    }
    m.insert("sender_cwnd_kb".into(), f64::from(info.cwnd) / 1024.0);
    m.insert("sender_retransmits".into(), info.retransmits as f64);
}

/// ulnet in A sends through its socket API to the peer in B.
pub(super) fn ulnet_tx(u: &UlnetStack, b: &Side, port: u16, bytes: u64) -> io::Result<Metrics> {
    ulnet_tx_with(u, b, port, bytes, |stack, at| {
        let mut s = TcpStream::connect_timeout(stack, &at, Duration::from_secs(5))?;
        send_pattern(&mut s, bytes)
    })
}

/// A current-thread tokio runtime for one application thread, as a small async service
/// would run: the task is the only one, so every wake-up goes to it. IO enabled, as
/// `#[tokio::main]` does: the task then drives the loop (`StackBuilder::drive_from_tasks`).
fn tokio_rt() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// An async operation bounded by [`IDLE_LIMIT`], as the blocking rows bound theirs with
/// socket timeouts.
async fn idle_bounded<T>(f: impl std::future::Future<Output = io::Result<T>>) -> io::Result<T> {
    tokio::time::timeout(IDLE_LIMIT, f)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "transfer idle too long"))?
}

/// As [`ulnet_rx`], with the application on tokio: `accept_async`, then
/// `AsyncReadExt::read` of 64 KiB on a current-thread runtime.
pub(super) fn ulnet_rx_tokio(
    u: &UlnetStack,
    b: &Side,
    port: u16,
    bytes: u64,
) -> io::Result<Metrics> {
    use tokio::io::AsyncReadExt;
    ulnet_rx_with(u, b, port, bytes, |listener| {
        tokio_rt()?.block_on(async move {
            let (mut s, _) = idle_bounded(listener.accept_async()).await?;
            let mut buf = vec![0u8; IO_CHUNK];
            let mut rx: Received = (0, true, RateWindows::new(PEAK_WINDOW));
            loop {
                let n = idle_bounded(AsyncReadExt::read(&mut s, &mut buf)).await?;
                if n == 0 {
                    break;
                }
                note_read(&mut rx, &buf[..n]);
            }
            drop(s);
            Ok(rx)
        })
    })
}

/// As [`ulnet_tx`], with the application on tokio: `connect_async`, then
/// `AsyncWriteExt::write_all` of 64 KiB pieces, a half-close, and a read until the peer
/// closes, on a current-thread runtime.
pub(super) fn ulnet_tx_tokio(
    u: &UlnetStack,
    b: &Side,
    port: u16,
    bytes: u64,
) -> io::Result<Metrics> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    ulnet_tx_with(u, b, port, bytes, |stack, at| {
        tokio_rt()?.block_on(async move {
            let mut s = idle_bounded(TcpStream::connect_async(stack, at)).await?;
            let mut off = 0u64;
            while off < bytes {
                let n = (bytes - off).min(IO_CHUNK as u64) as usize;
                idle_bounded(AsyncWriteExt::write_all(&mut s, pattern::slice(off, n))).await?;
                off += n as u64;
            }
            let info = s.info().ok();
            idle_bounded(AsyncWriteExt::shutdown(&mut s)).await?;
            let mut buf = [0u8; 64];
            while idle_bounded(AsyncReadExt::read(&mut s, &mut buf)).await? > 0 {}
            Ok((off, info))
        })
    })
}

/// The peer in B sends to ulnet's discard app running inside the loop (engine only).
pub(super) fn engine_rx(tb: &Testbed, port: u16, bytes: u64) -> io::Result<(Metrics, String)> {
    let a = tb.a();
    let ip = a.spare_of(a.ipv6, 0);
    let cidr = cidr(ip, a.prefix_for(ip))?;
    let mut rt = retry_busy(|| {
        Stack::builder()
            .backend(Backend::Xdp)
            .interface(&a.ifname)
            .netns(&a.ns)
            .address_cidr(cidr)
            .wait(WaitMode::Sleep)
            .build_runtime()
            .map_err(io::Error::from)
    })?;
    // An IPv6 address is usable once duplicate address detection passed (RFC 4862 §5.4).
    rt.settle_addresses(rt.settle_timeout())?;
    let caps = rt.channel().capabilities();
    let mode = format!(
        "{} ({}), link MTU {}, largest frame {}",
        caps.name, caps.mode, caps.mtu, caps.max_frame_len
    );
    let target = SocketAddr::new(ip, port);
    let inner = Discard::new(&mut rt.iface(), target).map_err(io_err)?;
    let mut app = TimedDiscard {
        inner,
        seen: 0,
        rates: RateWindows::new(PEAK_WINDOW),
    };
    let handle = rt.handle();
    let w = Window::start()?;
    let t = std::thread::spawn(move || -> io::Result<TimedDiscard> {
        let mut rt = rt;
        rt.run(&mut app)?;
        Ok(app)
    });
    let sent = load::tcp_send(&tb.b().ns, target, bytes).and_then(|s| join(s, "sender"));
    handle.stop();
    let app = join(t, "ulnet runtime");
    let sent = sent?;
    let app = app?;
    let cpu = w.finish(sent.cpu)?;
    let s = app.inner.stats();
    let m = finish(
        bytes,
        s.tcp_bytes,
        s.tcp_pattern_ok == 1,
        app.rates.rates(),
        cpu,
    )?;
    Ok((m, mode))
}

/// Writes `bytes` of the test pattern to `s` in [`IO_CHUNK`] writes, half-closes, and
/// waits for the peer to close (it does once it has read everything, so every byte is
/// acknowledged and the connection's counters are final). Returns the bytes written and
/// the connection's figures after the last write.
pub(crate) fn send_pattern(s: &mut TcpStream, bytes: u64) -> io::Result<(u64, Option<TcpInfo>)> {
    s.set_write_timeout(Some(IDLE_LIMIT))?;
    s.set_read_timeout(Some(IDLE_LIMIT))?;
    let mut off = 0u64;
    while off < bytes {
        let n = (bytes - off).min(IO_CHUNK as u64) as usize;
        s.write_all(pattern::slice(off, n))?;
        off += n as u64;
    }
    let info = s.info().ok();
    s.shutdown(Shutdown::Write)?;
    let mut buf = [0u8; 64];
    while s.read(&mut buf)? > 0 {}
    Ok((off, info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_is_the_fullest_sliding_window() {
        let t0 = Instant::now();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        let mut r = RateWindows::new(Duration::from_millis(100));
        r.record_at(ms(0), 1000);
        r.record_at(ms(50), 1000);
        r.record_at(ms(120), 3000);
        r.record_at(ms(140), 2000); // 50..150 holds 6000: the fullest window
        r.record_at(ms(250), 1000);
        let x = r.rates();
        assert_eq!(x.total, 8000);
        assert_eq!(x.span, Duration::from_millis(250));
        assert_eq!(x.full_windows, 2);
        assert!((x.peak_bps - 60_000.0).abs() < 1e-6, "{x:?}");
        assert!((x.avg_bps - 8000.0 / 0.25).abs() < 1e-6);
        // The last step (the last byte's) is not part of any window: 150..250 would
        // otherwise hold 1000 and 151..251 is past the end.
        let mut r = RateWindows::new(Duration::from_millis(100));
        r.record_at(ms(0), 10);
        r.record_at(ms(100), 1_000_000);
        assert!((r.rates().peak_bps - 100.0).abs() < 1e-6);
    }

    #[test]
    fn a_transfer_shorter_than_a_window_peaks_at_its_average() {
        let t0 = Instant::now();
        let mut r = RateWindows::new(Duration::from_millis(100));
        r.record_at(t0, 500);
        r.record_at(t0 + Duration::from_millis(40), 500);
        let x = r.rates();
        assert_eq!(x.full_windows, 0);
        assert!((x.peak_bps - x.avg_bps).abs() < 1e-9);
        assert!((x.avg_bps - 1000.0 / 0.04).abs() < 1e-6);
        assert_eq!(
            RateWindows::new(Duration::from_millis(100)).rates().avg_bps,
            0.0
        );
    }

    #[test]
    fn iperf3_json_is_read() {
        let j: serde_json::Value = serde_json::from_str(
            r#"{"intervals":[{"sum":{"bits_per_second":4e9}},{"sum":{"bits_per_second":6e9}}],
                "end":{"sum_received":{"bytes":100000000,"bits_per_second":5e9},
                       "cpu_utilization_percent":{"host_total":80.0,"remote_total":55.5}}}"#,
        )
        .unwrap();
        assert_eq!(
            iperf3_figures(&j),
            Some(Iperf3 {
                bytes: 100_000_000,
                bps: 5e9,
                peak_bps: 6e9,
                server_cpu_pct: 55.5
            })
        );
        assert_eq!(iperf3_figures(&serde_json::json!({})), None);
    }
}
