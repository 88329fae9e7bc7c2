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

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;

use ulnet_stack::tcp::{ListenerHandle, SocketHandle, Tcp};
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
/// Port `bind(..., ...)` and `connect(..., ...)` use (packetdrill's 8080).
pub const DEFAULT_PORT: u16 = 8080;
/// First port the script's side uses for connections it opens.
const FIRST_REMOTE_PORT: u16 = 40_000;
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
            _ => warnings.push(format!("unknown pktest directive {k:?} ignored")),
        }
    }
    let kind = kind.unwrap_or(ProfileKind::Neutral);
    let mut tol = DEFAULT_TOLERANCE_USECS;
    let mut tick = None;
    for (n, v) in &script.options {
        let num = v.as_deref().and_then(|v| v.parse::<u64>().ok());
        match (n.as_str(), num) {
            ("tolerance_usecs", Some(t)) => tol = t,
            ("tcp_ts_tick_usecs", Some(t)) if t > 0 => tick = Some(t),
            ("tcp_ts_tick_usecs", Some(_)) => tick = None,
            ("ip_version", _) if v.as_deref().is_some_and(|v| v != "ipv4") => {
                warnings.push(format!(
                    "--ip_version={} not modelled: the runner drives IPv4",
                    v.as_deref().unwrap_or("")
                ))
            }
            (
                "ip_version" | "local_ip" | "remote_ip" | "gateway_ip" | "netmask_ip" | "bind_port"
                | "connect_port" | "mtu" | "verbose" | "non_fatal" | "tolerance_percent",
                _,
            ) => {}
            _ => warnings.push(format!("option --{n} ignored")),
        }
    }
    if let Some(t) = opts.tolerance_usecs {
        tol = t;
    }
    let profile = Profile::new(kind);
    let mut report = empty_report(name, kind, lenient, script.events.len());
    report.warnings = warnings;
    let mut it = Interp {
        tcp: Tcp::new(profile.config.clone(), *b"ulnet-pktest-key"),
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
                        kind, code, mtu, ..
                    } => self.inbound_icmp(kind, code.as_deref(), *mtu, here),
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
                self.skip(here, &format!("shell command `{cmd}`"))
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
                got.push((s, d, TcpRepr { payload: &[], ..*r }, r.payload.to_vec()));
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

    // ------------------------------------------------------------ inbound

    fn new_remote_port(&mut self) -> u16 {
        let p = self.next_port;
        self.next_port = self.next_port.checked_add(1).unwrap_or(FIRST_REMOTE_PORT);
        p
    }

    fn listener_port(&self) -> u16 {
        self.fds
            .values()
            .find_map(|f| match f.sock {
                Sock::Listener(..) => f.bound.map(|b| b.port()),
                _ => None,
            })
            .unwrap_or(DEFAULT_PORT)
    }

    fn inbound_tcp(&mut self, t: &TcpSpec, ports: Option<(u16, u16)>, here: &Here<'_>) -> Res<()> {
        if self.conn.is_none() || self.listening {
            // Packetdrill's handle_listen_for_script_packet: a packet towards a listening
            // (or absent) socket starts a new connection from a fresh remote port.
            self.listening = false;
            let local = SocketAddr::new(IpAddr::V4(LOCAL_IP), self.listener_port());
            let remote = SocketAddr::new(IpAddr::V4(REMOTE_IP), self.new_remote_port());
            self.conn = Some(Conn::new(local, remote));
        }
        let conn = self.conn.as_ref().expect("created above");
        let flags = parse_flags(&t.flags);
        let off = conn.offset();
        let mut options = TcpOptions::none();
        for o in t.options.as_deref().unwrap_or(&[]) {
            match o {
                OptSpec::Nop | OptSpec::Eol => {}
                OptSpec::Mss(m) => options.mss = Some(*m),
                OptSpec::Wscale(w) => options.window_scale = Some(*w),
                OptSpec::SackOk => options.sack_permitted = true,
                OptSpec::Sack(blocks) => {
                    let mut b = SackBlocks::new();
                    for &(l, r) in blocks {
                        if !b.push((
                            SeqNumber(l.wrapping_add(off)),
                            SeqNumber(r.wrapping_add(off)),
                        )) {
                            return self.unsupported(here, "more SACK blocks than fit in a header");
                        }
                    }
                    options.sack_blocks = b;
                }
                OptSpec::Ts(val, ecr) => {
                    let ecr = if flags.contains(TcpFlags::ACK) && *ecr != 0 {
                        match conn.ts_map.get(ecr) {
                            Some(live) => *live,
                            None => match conn.first_ts {
                                Some((s, l)) => ecr.wrapping_sub(s).wrapping_add(l),
                                None => {
                                    return Err(here.fail(
                                        FailureKind::Unsupported,
                                        format!(
                                            "unable to infer live TS ecr for script TS ecr {ecr}: no matching or \
                                             preceding outbound TS val"
                                        ),
                                    ))
                                }
                            },
                        }
                    } else {
                        *ecr
                    };
                    options.timestamp = Some(TcpTimestamp {
                        tsval: *val,
                        tsecr: ecr,
                    });
                }
                OptSpec::Other(n) => {
                    return self.unsupported(
                        here,
                        &format!("TCP option {n} (not modelled by the engine)"),
                    )
                }
            }
        }
        if flags.contains(TcpFlags::SYN) {
            let ws = options.window_scale.is_some();
            if let Some(c) = self.conn.as_mut() {
                c.peer_wscale = ws;
            }
        }
        let conn = self.conn.as_ref().expect("created above");
        let (sport, dport) = ports.unwrap_or((conn.remote.port(), conn.local.port()));
        let payload = vec![0u8; usize::from(t.len)];
        let seg = TcpRepr {
            src_port: sport,
            dst_port: dport,
            seq: SeqNumber(t.seq),
            ack: SeqNumber(if flags.contains(TcpFlags::ACK) {
                t.ack.unwrap_or(0).wrapping_add(off)
            } else {
                t.ack.unwrap_or(0)
            }),
            flags,
            window: t.win.unwrap_or(0),
            urgent: t.urg,
            options,
            payload: &payload,
        };
        let (src, dst) = (conn.remote.ip(), conn.local.ip());
        let now = self.instant();
        let mut replies: Vec<(IpAddr, IpAddr, TcpRepr<'static>)> = Vec::new();
        self.tcp.process(now, src, dst, &seg, &mut |s, d, r| {
            replies.push((s, d, TcpRepr { payload: &[], ..*r }));
        });
        for (s, d, r) in replies {
            self.capture(s, d, &r);
        }
        self.settle();
        self.poll_pending()
    }

    fn inbound_icmp(
        &mut self,
        kind: &str,
        code: Option<&str>,
        mtu: Option<u32>,
        here: &Here<'_>,
    ) -> Res<()> {
        let frag_needed = kind == "unreachable"
            && matches!(code, Some("frag_needed") | Some("fragmentation_needed"));
        match (frag_needed, mtu) {
            (true, Some(mtu)) => {
                // RFC 1191: the path MTU towards the peer drops; the engine re-segments.
                self.tcp.set_path_mtu(IpAddr::V4(REMOTE_IP), mtu as usize);
                self.settle();
                self.poll_pending()
            }
            _ => self.unsupported(
                here,
                "inbound ICMP other than 'unreachable frag_needed mtu N' (the TCP engine takes path-MTU \
                 updates only)",
            ),
        }
    }

    // ------------------------------------------------------------ outbound

    fn describe(&self, s: &Seg) -> String {
        match &self.conn {
            Some(c) if s.src == c.local && s.dst == c.remote => {
                format!("{} > {}", secs(s.at), self.to_script(c, s).render())
            }
            _ => format!(
                "{} > {} (another connection: {} > {})",
                secs(s.at),
                seg_raw(s),
                s.src,
                s.dst
            ),
        }
    }

    fn to_script(&self, c: &Conn, s: &Seg) -> ScriptSeg {
        let mut options = option_list(&s.options);
        for o in &mut options {
            if let OptSpec::Ts(val, _) = o {
                if let Some((sv, lv)) = c.first_ts {
                    *val = sv.wrapping_add(val.wrapping_sub(lv));
                }
            }
        }
        ScriptSeg {
            flags: s.flags,
            seq: s.seq.wrapping_sub(c.offset()),
            len: s.len,
            ack: s.ack,
            win: s.window,
            urg: s.urgent,
            options,
        }
    }

    /// Takes the next segment of the connection under test, advancing time up to
    /// `deadline` for one to appear. Segments of other connections are skipped (as
    /// packetdrill ignores packets not on the socket under test).
    fn next_segment(&mut self, deadline: u64, here: &Here<'_>) -> Res<Option<Seg>> {
        loop {
            while let Some(s) = self.queue.pop_front() {
                let mine = match &self.conn {
                    Some(c) => s.src == c.local && s.dst == c.remote,
                    None => false,
                };
                if mine {
                    return Ok(Some(s));
                }
                let d = self.describe(&s);
                if self.report.warnings.len() < 50 {
                    self.report
                        .warnings
                        .push(format!("ignored a segment of another connection: {d}"));
                }
            }
            match self.next_wakeup() {
                Some(w) if w <= deadline => {
                    self.now = w.max(self.now);
                    self.settle();
                    self.poll_pending()?;
                    self.step_budget(here)?;
                }
                _ => return Ok(None),
            }
        }
    }

    fn outbound_tcp(
        &mut self,
        ev: &Event,
        t: &TcpSpec,
        start: u64,
        end: u64,
        here: &Here<'_>,
    ) -> Res<()> {
        let expected = format!("{} > {}", secs(start), render_spec(t));
        if self.conn.is_none() {
            return Err(here.fail(
                FailureKind::NoPacket,
                "outbound packet expected but no connection exists (no connect() and no inbound packet yet)",
            ));
        }
        let deadline = end.saturating_add(self.tol);
        let Some(first) = self.next_segment(deadline, here)? else {
            // Like packetdrill, look on for the segment that did come, to say when it came.
            let limit = self.now.saturating_add(self.horizon);
            if let Some(late) = self.next_segment(limit, here)? {
                let c = self.conn.clone().expect("checked above");
                let mut f = here.fail(
                    FailureKind::Timing,
                    format!(
                        "timing error: expected outbound packet at {} s (tolerance {} s) but the next \
                         segment came at {} s",
                        secs(start),
                        secs(self.tol),
                        secs(late.at)
                    ),
                );
                f.expected = Some(expected);
                f.actual = Some(format!(
                    "{} > {}",
                    secs(late.at),
                    self.to_script(&c, &late).render()
                ));
                f.hint = Some(
                    "timer policy (RTO, minimum RTO, delayed ACK, TIME-WAIT length) when the \
                     segment is the one expected; otherwise the stack sent nothing in time"
                        .into(),
                );
                return Err(f);
            }
            let mut f = here.fail(
                FailureKind::NoPacket,
                format!(
                    "expected an outbound packet by {} s; the stack sent nothing",
                    secs(deadline)
                ),
            );
            f.expected = Some(expected);
            f.hint = Some(
                "missing behaviour: nothing was sent even waiting the whole horizon (the stack \
                 had no timer left, or a state the script expects was never reached)"
                    .into(),
            );
            return Err(f);
        };
        let want_syn = parse_flags(&t.flags).contains(TcpFlags::SYN);
        if let Some(c) = self.conn.as_mut() {
            if first.flags.contains(TcpFlags::SYN) {
                c.our_wscale = first.options.window_scale;
            }
            if c.live_isn.is_none() && want_syn && first.flags.contains(TcpFlags::SYN) {
                c.live_isn = Some(first.seq);
                c.script_isn = Some(t.seq);
            }
            // Learn the script↔live TS val mapping (packetdrill's map_outbound_live_packet).
            if let (Some(OptSpec::Ts(sv, _)), Some(ts)) = (
                t.options
                    .as_deref()
                    .and_then(|o| o.iter().find(|x| matches!(x, OptSpec::Ts(..)))),
                first.options.timestamp,
            ) {
                c.ts_map.insert(*sv, ts.tsval);
                if c.first_ts.is_none() {
                    c.first_ts = Some((*sv, ts.tsval));
                }
            }
        }
        let conn = self.conn.clone().expect("checked above");
        let mut actual = self.to_script(&conn, &first);
        let mut at = first.at;
        // Lenient: a TSO super-segment in the script matches consecutive smaller segments.
        if self.lenient && u32::from(t.len) > actual.len && actual.len > 0 {
            while actual.len < u32::from(t.len) {
                let Some(next) = self.next_segment(deadline, here)? else {
                    break;
                };
                let n = self.to_script(&conn, &next);
                if n.seq != actual.seq.wrapping_add(actual.len) || n.flags.contains(TcpFlags::SYN) {
                    self.queue.push_front(next);
                    break;
                }
                actual.len += n.len;
                actual.flags |= n.flags & (TcpFlags::PSH | TcpFlags::FIN);
                actual.ack = n.ack;
                actual.win = n.win;
                at = next.at;
            }
        }
        if let Err(m) = compare(
            t,
            &actual,
            self.profile.unordered_options || self.lenient,
            self.ts,
        ) {
            let update = self.is_window_update(&conn, &actual);
            if update && self.lenient {
                // Lenient: an unexpected pure window update is receive-window policy; skip it.
                self.report.warnings.push(format!(
                    "line {}: skipped an unexpected window update {} > {}",
                    here.pos.line,
                    secs(at),
                    actual.render()
                ));
                if let Some(c) = self.conn.as_mut() {
                    c.last_out = Some((actual.ack, c.window_bytes(&actual)));
                }
                return self.outbound_tcp(ev, t, start, end, here);
            }
            let mut f = here.fail(
                FailureKind::PacketMismatch,
                format!("outbound packet mismatch: {}", m.message),
            );
            f.expected = Some(expected);
            f.actual = Some(format!("{} > {}", secs(at), actual.render()));
            f.hint = Some(if update {
                "receive-window update policy: the stack sent a pure window update (same ACK as its \
                 previous segment, larger window) that the script's platform does not send; \
                 --lenient skips such updates"
                    .into()
            } else {
                m.hint
            });
            return Err(f);
        }
        if let Some(c) = self.conn.as_mut() {
            c.last_out = Some((actual.ack, c.window_bytes(&actual)));
        }
        if !matches!(ev.when, When::Any) {
            if let Err(mut f) = self.check_time(start, end, at, "outbound packet", here) {
                f.expected = Some(expected);
                f.actual = Some(format!("{} > {}", secs(at), actual.render()));
                f.hint = Some(
                    "timer policy (RTO, minimum RTO, delayed ACK, pacing) when the segment itself is \
                     right; a protocol bug when the RFC fixes the time"
                        .into(),
                );
                return Err(f);
            }
        }
        Ok(())
    }
}

impl Interp {
    /// A bare ACK repeating the previous ACK number with a larger window.
    fn is_window_update(&self, c: &Conn, a: &ScriptSeg) -> bool {
        a.len == 0
            && a.flags == TcpFlags::ACK
            && c.last_out
                .is_some_and(|(ack, win)| ack == a.ack && c.window_bytes(a) > win)
    }
}

fn seg_raw(s: &Seg) -> String {
    ScriptSeg {
        flags: s.flags,
        seq: s.seq,
        len: s.len,
        ack: s.ack,
        win: s.window,
        urg: s.urgent,
        options: option_list(&s.options),
    }
    .render()
}
