//! The interpreter: runs a parsed script against a fresh [`Tcp`] engine in virtual time.
//!
//! Time only moves when the script asks: before an inbound packet or a system call the
//! clock advances to the event's time, calling `dispatch` at every `poll_at` deadline on
//! the way; an outbound line takes the next segment the stack sent (advancing the clock
//! to the stack's next deadline until one appears, up to the line's time plus the
//! tolerance). Everything is deterministic: a fixed ISN key, no wall clock.
//!
//! Numbering follows packetdrill: inbound sequence numbers are used as written (the
//! script's SYN picks the peer's ISN); outbound sequence numbers, inbound ACKs and
//! inbound SACK blocks are offset by the stack's ISN, learnt from its SYN or SYN-ACK;
//! inbound TS ecr values are mapped back to the TS val the stack really sent.
//!
//! This module keeps the interpreter's state, its clock and the system-call side;
//! `packets` turns inbound lines into segments and matches outbound lines.

mod packets;
mod shell;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

use ulnet_stack::tcp::{ListenerHandle, SocketHandle, SynCookies, Tcp};
use ulnet_stack::time::Instant;
use ulnet_wire::{SackBlocks, SeqNumber, TcpFlags, TcpOptions, TcpRepr, TcpTimestamp};

use crate::ast::{Action, Direction, Event, OptSpec, PacketBody, Script, Syscall, TcpSpec, When};
use crate::lexer::Pos;
use crate::parser::parse;
use crate::profile::{Profile, ProfileKind};
use crate::report::{Failure, FailureKind, ScriptReport, Skipped, Status};
use crate::segment::{
    compare, option_list, parse_flags, render_spec, secs, ScriptSeg, Seg, TsCheck,
};

/// The stack's address (packetdrill's `--local_ip`, mapped into the benchmarking range).
pub const LOCAL_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The script's address (packetdrill's `--remote_ip`).
pub const REMOTE_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The stack's address under `--ip_version=ipv6` (packetdrill's fd3d:0a0b:17d6::1,
/// mapped into the IPv6 benchmarking range 2001:2::/48, RFC 5180).
pub const LOCAL_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
/// The script's address under `--ip_version=ipv6` (packetdrill's fd3d:fa7b:d17d::1).
pub const REMOTE_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);
/// Port `bind(..., ...)` and `connect(..., ...)` use (packetdrill's 8080).
pub const DEFAULT_PORT: u16 = 8080;
/// First port the script's side uses for connections it opens.
const FIRST_REMOTE_PORT: u16 = 40_000;
/// The engine's ISN key: fixed, so runs are reproducible.
pub(crate) const ISN_KEY: &[u8; 16] = b"ulnet-pktest-key";

/// Packetdrill's default timing tolerance.
pub const DEFAULT_TOLERANCE_USECS: u64 = 4_000;
/// Bound on engine steps per script: a runaway timer loop ends the run, not the machine.
const MAX_STEPS: u64 = 2_000_000;
/// Segments kept waiting for an outbound line; beyond it the oldest are dropped (bounded
/// memory whatever the stack does).
const MAX_QUEUE: usize = 100_000;

/// How to run scripts.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Profile; `None` takes the script's `// pktest: profile=` directive, else neutral.
    pub profile: Option<ProfileKind>,
    /// Lenient mode (also enabled by a `// pktest: lenient` directive).
    pub lenient: bool,
    /// Overrides the script's `--tolerance_usecs`.
    pub tolerance_usecs: Option<u64>,
    /// Check outbound TS ecr exactly (also by `// pktest: ts_ecr`). Packetdrill does not.
    pub check_ts_ecr: bool,
    /// How far `*` lines and blocking calls may wait, microseconds.
    pub horizon_usecs: u64,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            profile: None,
            lenient: false,
            tolerance_usecs: None,
            check_ts_ecr: false,
            horizon_usecs: 600_000_000,
        }
    }
}

/// Reads, parses and runs one script file.
pub fn run_file(path: &Path, opts: &RunOptions) -> ScriptReport {
    let name = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(src) => run_source(&name, &src, opts),
        Err(e) => {
            let mut r = empty_report(
                &name,
                opts.profile.unwrap_or(ProfileKind::Neutral),
                opts.lenient,
                0,
            );
            r.status = Status::Error;
            r.failure = Some(Failure::at(
                Pos::default(),
                "",
                FailureKind::Io,
                format!("cannot read: {e}"),
            ));
            r
        }
    }
}

fn empty_report(name: &str, profile: ProfileKind, lenient: bool, events: usize) -> ScriptReport {
    ScriptReport {
        script: name.to_string(),
        profile,
        lenient,
        status: Status::Pass,
        events,
        events_run: 0,
        virtual_usecs: 0,
        skipped: Vec::new(),
        warnings: Vec::new(),
        failure: None,
    }
}

/// Parses and runs a script given as text; `name` labels the report.
pub fn run_source(name: &str, src: &str, opts: &RunOptions) -> ScriptReport {
    let script = match parse(src) {
        Ok(s) => s,
        Err(e) => {
            let mut r = empty_report(
                name,
                opts.profile.unwrap_or(ProfileKind::Neutral),
                opts.lenient,
                0,
            );
            r.status = Status::Error;
            let text = src
                .lines()
                .nth(e.pos.line as usize - 1)
                .unwrap_or("")
                .trim();
            r.failure = Some(Failure::at(
                e.pos,
                text,
                FailureKind::Parse,
                format!("syntax error: {}", e.message),
            ));
            return r;
        }
    };
    run_script(name, &script, opts)
}

/// Runs a parsed script.
pub fn run_script(name: &str, script: &Script, opts: &RunOptions) -> ScriptReport {
    let mut kind = opts.profile;
    let mut lenient = opts.lenient;
    let mut ecr = opts.check_ts_ecr;
    let mut cookies = None;
    let mut warnings = Vec::new();
    for (k, v) in &script.directives {
        match k.as_str() {
            "profile" => match v.parse::<ProfileKind>() {
                Ok(p) => {
                    if kind.is_none() {
                        kind = Some(p);
                    }
                }
                Err(e) => warnings.push(format!("directive ignored: {e}")),
            },
            "lenient" => lenient = true,
            "ts_ecr" => ecr = true,
            // Linux's net.ipv4.tcp_syncookies values (a packetdrill script sets them with
            // a `sysctl` shell line, which the runner cannot run).
            "syncookies" => match v.as_str() {
                "0" => cookies = Some(SynCookies::Never),
                "1" => cookies = Some(SynCookies::WhenFull),
                "2" => cookies = Some(SynCookies::Always),
                _ => warnings.push(format!("directive ignored: syncookies={v}")),
            },
            _ => warnings.push(format!("unknown pktest directive {k:?} ignored")),
        }
    }
    let kind = kind.unwrap_or(ProfileKind::Neutral);
    let mut tol = DEFAULT_TOLERANCE_USECS;
    let mut tick = None;
    let mut mtu = None;
    let mut ipv6 = false;
    for (n, v) in &script.options {
        let num = v.as_deref().and_then(|v| v.parse::<u64>().ok());
        match (n.as_str(), num) {
            ("tolerance_usecs", Some(t)) => tol = t,
            // packetdrill's --mtu sets the tun device's MTU: the engine's path MTU, from
            // which it derives the MSS it offers.
            ("mtu", Some(m)) if (68..=65_535).contains(&m) => mtu = Some(m as usize),
            ("tcp_ts_tick_usecs", Some(t)) if t > 0 => tick = Some(t),
            ("tcp_ts_tick_usecs", Some(_)) => tick = None,
            // ipv6: the connection runs between IPv6 addresses (the engine sizes the MSS
            // for the 40-byte header, RFC 8200, RFC 9293 §3.7.1). ipv4-mapped-ipv6 puts
            // IPv4 on the wire, which is what the engine sees.
            ("ip_version", _) => match v.as_deref() {
                Some("ipv6") => ipv6 = true,
                Some("ipv4" | "ipv4-mapped-ipv6") => ipv6 = false,
                other => warnings.push(format!(
                    "--ip_version={} not modelled: the runner drives IPv4",
                    other.unwrap_or("")
                )),
            },
            (
                "local_ip" | "remote_ip" | "gateway_ip" | "netmask_ip" | "bind_port"
                | "connect_port" | "mtu" | "verbose" | "non_fatal" | "tolerance_percent",
                _,
            ) => {}
            _ => warnings.push(format!("option --{n} ignored")),
        }
    }
    if let Some(t) = opts.tolerance_usecs {
        tol = t;
    }
    let mut profile = Profile::new(kind);
    if let Some(c) = cookies {
        profile.config.syn_cookies = c;
    }
    if let Some(m) = mtu {
        profile.config.mtu = m;
    }
    let mut report = empty_report(name, kind, lenient, script.events.len());
    report.warnings = warnings;
    let mut it = Interp {
        tcp: Tcp::new(profile.config.clone(), *ISN_KEY),
        local_ip: if ipv6 {
            IpAddr::V6(LOCAL_IP6)
        } else {
            IpAddr::V4(LOCAL_IP)
        },
        remote_ip: if ipv6 {
            IpAddr::V6(REMOTE_IP6)
        } else {
            IpAddr::V4(REMOTE_IP)
        },
        profile,
        lenient,
        tol,
        ts: TsCheck {
            tick_usecs: tick,
            tolerance_usecs: tol,
            ecr,
        },
        horizon: opts.horizon_usecs,
        now: 0,
        steps: 0,
        queue: VecDeque::new(),
        fds: BTreeMap::new(),
        conn: None,
        listening: false,
        next_port: FIRST_REMOTE_PORT,
        pending: None,
        prev_inbound_at: None,
        report,
    };
    let result = it.run(&script.events);
    let mut report = it.finish();
    if let Err(f) = result {
        report.status = match f.kind {
            FailureKind::Unsupported | FailureKind::Parse | FailureKind::Io => Status::Error,
            _ => Status::Fail,
        };
        report.failure = Some(*f);
    }
    report
}

/// The packet-level view of the connection under test (packetdrill's "socket under
/// test"): its live addresses and the numbering maps.
#[derive(Debug, Clone)]
pub(crate) struct Conn {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub script_isn: Option<u32>,
    pub live_isn: Option<u32>,
    /// Script TS val → the TS val the stack really sent.
    pub ts_map: HashMap<u32, u32>,
    pub first_ts: Option<(u32, u32)>,
    /// ACK number and window (bytes) of the last segment matched, to recognise window
    /// updates.
    pub last_out: Option<(u32, u64)>,
    /// The window scale the stack offered, and whether the peer offered one too.
    pub our_wscale: Option<u8>,
    pub peer_wscale: bool,
}

impl Conn {
    /// The window a segment advertises, in bytes (RFC 7323 §2.2: never scaled on SYNs).
    fn window_bytes(&self, a: &ScriptSeg) -> u64 {
        let shift = match (self.our_wscale, self.peer_wscale) {
            (Some(s), true) if !a.flags.contains(TcpFlags::SYN) => s,
            _ => 0,
        };
        u64::from(a.win) << shift
    }
}

impl Conn {
    pub(crate) fn new(local: SocketAddr, remote: SocketAddr) -> Conn {
        Conn {
            local,
            remote,
            script_isn: None,
            live_isn: None,
            ts_map: HashMap::new(),
            first_ts: None,
            last_out: None,
            our_wscale: None,
            peer_wscale: false,
        }
    }

    /// live = script + offset, for the stack's sequence space.
    fn offset(&self) -> u32 {
        match (self.live_isn, self.script_isn) {
            (Some(l), Some(s)) => l.wrapping_sub(s),
            _ => 0,
        }
    }
}

/// What a socket fd is.
#[derive(Debug)]
pub(crate) enum Sock {
    /// Created, not yet listening or connected.
    Fresh,
    /// Listening; connections taken from the engine before `accept` asked.
    Listener(ListenerHandle, VecDeque<SocketHandle>),
    /// A connection.
    Conn(SocketHandle),
}

/// One script fd.
#[derive(Debug)]
pub(crate) struct Fd {
    pub sock: Sock,
    pub nonblock: bool,
    pub bound: Option<SocketAddr>,
    pub nodelay: bool,
    pub rcvbuf: Option<i64>,
    pub sndbuf: Option<i64>,
    pub maxseg: Option<i64>,
    pub linger0: bool,
    /// SO_ERROR already reported.
    pub error_taken: bool,
}

impl Fd {
    pub(crate) fn new(sock: Sock) -> Fd {
        Fd {
            sock,
            nonblock: false,
            bound: None,
            nodelay: false,
            rcvbuf: None,
            sndbuf: None,
            maxseg: None,
            linger0: false,
            error_taken: false,
        }
    }
}

/// A blocking call waiting for the stack.
#[derive(Debug)]
pub(crate) struct Pending {
    pub pos: Pos,
    pub text: String,
    pub call: Syscall,
    /// When the script expects it to return.
    pub expect_end: u64,
    /// Give up (and fail) after this.
    pub deadline: u64,
    /// A poll timeout: the call returns by itself at this time.
    pub wake_at: Option<u64>,
    /// Bytes already written by a blocking write.
    pub progress: usize,
}

/// The interpreter's state.
pub(crate) struct Interp {
    pub tcp: Tcp,
    /// The stack's address: [`LOCAL_IP`], or [`LOCAL_IP6`] with `--ip_version=ipv6`.
    pub local_ip: IpAddr,
    /// The script's address: [`REMOTE_IP`] or [`REMOTE_IP6`].
    pub remote_ip: IpAddr,
    pub profile: Profile,
    pub lenient: bool,
    pub tol: u64,
    pub ts: TsCheck,
    pub horizon: u64,
    pub now: u64,
    pub steps: u64,
    pub queue: VecDeque<Seg>,
    pub fds: BTreeMap<i64, Fd>,
    pub conn: Option<Conn>,
    pub listening: bool,
    pub next_port: u16,
    pub pending: Option<Pending>,
    pub prev_inbound_at: Option<u64>,
    pub report: ScriptReport,
}

/// Where the current event is, for failures.
#[derive(Debug, Clone)]
pub(crate) struct Here<'a> {
    pub pos: Pos,
    pub text: &'a str,
}

impl Here<'_> {
    pub(crate) fn fail(&self, kind: FailureKind, msg: impl Into<String>) -> Box<Failure> {
        Box::new(Failure::at(self.pos, self.text, kind, msg))
    }
}

pub(crate) type Res<T> = Result<T, Box<Failure>>;

impl Interp {
    fn finish(mut self) -> ScriptReport {
        let stray = self.queue.len();
        if stray > 0 {
            let first = self
                .queue
                .front()
                .map(|s| self.describe(s))
                .unwrap_or_default();
            self.report.warnings.push(format!(
                "{stray} outbound segment(s) after the last matched line were not checked (first: {first})"
            ));
        }
        self.report.virtual_usecs = self.now;
        self.report
    }

    pub(crate) fn instant(&self) -> Instant {
        Instant::from_micros(self.now)
    }

    fn run(&mut self, events: &[Event]) -> Res<()> {
        for ev in events {
            let here = Here {
                pos: ev.pos,
                text: &ev.text,
            };
            self.event(ev, &here)?;
            self.report.events_run += 1;
        }
        let here = Here {
            pos: events.last().map_or(Pos::default(), |e| e.pos),
            text: events.last().map_or("", |e| e.text.as_str()),
        };
        self.finish_pending(&here)
    }

    /// The script time an event is scheduled for, and the end of its window.
    fn schedule(&self, when: When, inbound: bool) -> (u64, u64) {
        let base = match (inbound, self.prev_inbound_at) {
            // Consecutive inbound packets are anchored to each other's script times.
            (true, Some(t)) => t,
            _ => self.now,
        };
        match when {
            When::Absolute(t) => (t, t),
            When::Relative(d) => (base.saturating_add(d), base.saturating_add(d)),
            When::Any => (self.now, self.now.saturating_add(self.horizon)),
            When::AbsoluteRange(a, b) => (a, b),
            When::RelativeRange(a, b) => (base.saturating_add(a), base.saturating_add(b)),
        }
    }

    fn event(&mut self, ev: &Event, here: &Here<'_>) -> Res<()> {
        let inbound = matches!(&ev.action, Action::Packet(p) if p.dir == Direction::Inbound);
        let (start, end) = self.schedule(ev.when, inbound);
        match &ev.action {
            Action::Packet(p) if p.dir == Direction::Outbound => {
                self.prev_inbound_at = None;
                match &p.body {
                    PacketBody::Tcp(t) => self.outbound_tcp(ev, t, start, end, here),
                    PacketBody::Udp { .. } | PacketBody::Icmp { .. } => self.unsupported(
                        here,
                        "outbound UDP/ICMP lines: this runner drives the TCP engine only",
                    ),
                }
            }
            Action::Packet(p) => {
                self.reach(start, here)?;
                self.prev_inbound_at = Some(start);
                match &p.body {
                    PacketBody::Tcp(t) => self.inbound_tcp(t, p.ports, here),
                    PacketBody::Icmp {
                        kind,
                        code,
                        mtu,
                        echoed_seq,
                    } => self.inbound_icmp(kind, code.as_deref(), *mtu, *echoed_seq, here),
                    PacketBody::Udp { .. } => self.unsupported(
                        here,
                        "inbound UDP lines: this runner drives the TCP engine only",
                    ),
                }
            }
            Action::Syscall(c) => {
                self.prev_inbound_at = None;
                self.finish_pending(here)?;
                self.reach(start, here)?;
                self.syscall(c, ev, start, here)
            }
            Action::Command(cmd) => {
                self.prev_inbound_at = None;
                self.reach(start, here)?;
                self.shell(cmd, here)
            }
            Action::Code(_) => {
                self.prev_inbound_at = None;
                self.reach(start, here)?;
                self.skip(here, "%{ python }% code block")
            }
        }
    }

    /// Lenient mode skips what cannot be honoured; strict mode fails on it.
    pub(crate) fn skip(&mut self, here: &Here<'_>, what: &str) -> Res<()> {
        if self.lenient {
            self.report.skipped.push(Skipped {
                line: here.pos.line,
                text: here.text.to_string(),
                reason: format!("{what} cannot be run by pktest"),
            });
            Ok(())
        } else {
            Err(here.fail(
                FailureKind::Unsupported,
                format!("{what} cannot be run by pktest (--lenient skips such lines)"),
            ))
        }
    }

    pub(crate) fn unsupported(&mut self, here: &Here<'_>, what: &str) -> Res<()> {
        self.skip(here, what)
    }

    /// Advances to `t` (an event's start); fails if the run is already later than that
    /// plus the tolerance.
    fn reach(&mut self, t: u64, here: &Here<'_>) -> Res<()> {
        if self.now > t.saturating_add(self.tol) {
            return Err(here.fail(
                FailureKind::Timing,
                format!(
                    "timing error: event scheduled at {} s but the run is already at {} s (tolerance {} s)",
                    secs(t),
                    secs(self.now),
                    secs(self.tol)
                ),
            ));
        }
        self.advance_to(t, here)
    }

    // ------------------------------------------------------------ engine driving

    fn capture(&mut self, src: IpAddr, dst: IpAddr, r: &TcpRepr<'_>) {
        if self.queue.len() >= MAX_QUEUE {
            self.queue.pop_front();
        }
        self.queue.push_back(Seg {
            at: self.now,
            src: SocketAddr::new(src, r.src_port),
            dst: SocketAddr::new(dst, r.dst_port),
            seq: r.seq.0,
            ack: r.ack.0,
            flags: r.flags,
            window: r.window,
            urgent: r.urgent,
            options: r.options,
            len: r.payload.len() as u32,
        });
    }

    /// Sends everything due now. Returns the segments sent.
    pub(crate) fn settle(&mut self) -> usize {
        let now = self.instant();
        let mut sent = 0;
        for _ in 0..64 {
            match self.tcp.poll_at() {
                Some(t) if t <= now => {}
                _ => break,
            }
            let mut got: Vec<(IpAddr, IpAddr, TcpRepr<'static>, Vec<u8>)> = Vec::new();
            self.tcp.dispatch(now, &mut |s, d, r| {
                got.push((
                    s,
                    d,
                    TcpRepr {
                        payload: &[],
                        payload_rest: &[],
                        ..*r
                    },
                    r.payload.to_vec(),
                ));
                true
            });
            self.steps += 1;
            if got.is_empty() {
                break;
            }
            sent += got.len();
            for (s, d, r, p) in got {
                self.capture(s, d, &TcpRepr { payload: &p, ..r });
            }
        }
        sent
    }

    /// The next instant something may happen: a stack deadline or a poll timeout.
    fn next_wakeup(&self) -> Option<u64> {
        let stack = self.tcp.poll_at().map(|t| {
            let t = t.total_micros();
            // A deadline that did not clear at `now` is retried a millisecond later.
            if t <= self.now {
                self.now.saturating_add(1000)
            } else {
                t
            }
        });
        let poll = self.pending.as_ref().and_then(|p| p.wake_at);
        match (stack, poll) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn step_budget(&self, here: &Here<'_>) -> Res<()> {
        if self.steps > MAX_STEPS {
            return Err(here.fail(
                FailureKind::Unsupported,
                format!("the stack kept asking for timer work: gave up after {MAX_STEPS} steps"),
            ));
        }
        Ok(())
    }

    /// Runs the stack up to `t`, completing a pending blocking call on the way.
    pub(crate) fn advance_to(&mut self, t: u64, here: &Here<'_>) -> Res<()> {
        loop {
            self.settle();
            self.poll_pending()?;
            self.step_budget(here)?;
            match self.next_wakeup() {
                Some(w) if w <= t && w > self.now => self.now = w,
                _ => break,
            }
        }
        if t > self.now {
            self.now = t;
            self.settle();
            self.poll_pending()?;
        }
        Ok(())
    }

    /// Completes the pending call (advancing time) before anything else may be called.
    fn finish_pending(&mut self, here: &Here<'_>) -> Res<()> {
        while let Some(p) = &self.pending {
            let deadline = p.deadline;
            let next = self.next_wakeup().filter(|&w| w <= deadline);
            match next {
                Some(w) => {
                    self.now = w.max(self.now);
                    self.settle();
                    self.poll_pending()?;
                    self.step_budget(here)?;
                }
                None => {
                    let p = self.pending.take().expect("checked above");
                    return Err(Box::new(Failure::at(
                        p.pos,
                        &p.text,
                        FailureKind::Timing,
                        format!(
                            "blocking {}() expected to return at {} s is still blocked at {} s; nothing the \
                             script or the stack's timers do would wake it",
                            p.call.name,
                            secs(p.expect_end),
                            secs(deadline.max(self.now))
                        ),
                    )));
                }
            }
        }
        Ok(())
    }

    fn poll_pending(&mut self) -> Res<()> {
        let Some(mut p) = self.pending.take() else {
            return Ok(());
        };
        let here = Here {
            pos: p.pos,
            text: &p.text.clone(),
        };
        let call = p.call.clone();
        match self.attempt(&call, &mut p, &here)? {
            None => {
                if self.now > p.deadline {
                    return Err(here.fail(
                        FailureKind::Timing,
                        format!(
                            "blocking {}() expected to return at {} s is still blocked at {} s",
                            call.name,
                            secs(p.expect_end),
                            secs(self.now)
                        ),
                    ));
                }
                self.pending = Some(p);
                Ok(())
            }
            Some(ret) => {
                self.check_result(&call, ret, &here)?;
                self.check_time(
                    p.expect_end,
                    p.expect_end,
                    self.now,
                    "system call return",
                    &here,
                )
            }
        }
    }

    pub(crate) fn check_time(
        &self,
        start: u64,
        end: u64,
        actual: u64,
        what: &str,
        here: &Here<'_>,
    ) -> Res<()> {
        if actual.saturating_add(self.tol) < start || actual > end.saturating_add(self.tol) {
            let expected = if start == end {
                format!("at {} s", secs(start))
            } else {
                format!("in {}~{} s", secs(start), secs(end))
            };
            return Err(here.fail(
                FailureKind::Timing,
                format!(
                    "timing error: expected {what} {expected} but it happened at {} s (tolerance {} s)",
                    secs(actual),
                    secs(self.tol)
                ),
            ));
        }
        Ok(())
    }
}
