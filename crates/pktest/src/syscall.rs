//! System calls: the socket API a script uses, mapped onto [`Tcp`](ulnet_stack::tcp::Tcp)
//! calls with Linux's return values and errno names. A call that would block on a
//! blocking socket becomes the interpreter's pending call and completes when the stack
//! lets it (packetdrill runs it on a thread; virtual time makes that unnecessary).

use std::net::{IpAddr, SocketAddr};

use ulnet_stack::tcp::{
    CaState, ConnError, Keepalive, RecvError, SendError, Shutdown, SocketHandle, SocketOption,
    State, TcpInfo,
};
use ulnet_stack::time::{Duration, Instant};

use crate::ast::{Event, Expr, Syscall, When};
use crate::report::FailureKind;
use crate::runner::{Conn, Fd, Here, Interp, Pending, Res, Sock, DEFAULT_PORT};

/// What `getsockopt(SO_RCVBUF/SO_SNDBUF)` reads back for a buffer of `v` bytes: with
/// the FreeBSD profile, once the connection is established, `v` rounded up to a
/// multiple of the connection's maximum segment size, as FreeBSD's `tcp_mss()` reserves
/// `roundup(sb_hiwat, t_maxseg)` (when the buffer is at least one segment). FreeBSD's
/// t_maxseg counts no options, so the timestamp option's 12 bytes are added back to
/// the engine's effective MSS.
fn buffer_size(
    tcp: &ulnet_stack::tcp::Tcp,
    p: &crate::profile::Profile,
    h: Option<SocketHandle>,
    v: i64,
) -> i64 {
    if !p.rounds_buffers_to_mss {
        return v;
    }
    let Some(info) = h.and_then(|h| tcp.info(h).ok()) else {
        return v;
    };
    if !info.state.is_synchronized() {
        return v;
    }
    let mss = i64::from(info.snd_mss) + if info.timestamps { 12 } else { 0 };
    if mss <= 0 || v < mss {
        return v;
    }
    (v + mss - 1) / mss * mss
}

/// A call's outcome: a value, or -1 with an errno name.
pub(crate) type Ret = Result<i64, &'static str>;

/// Linux's values for the symbols scripts use.
pub(crate) fn symbol(name: &str) -> Option<i64> {
    Some(match name {
        "AF_INET" | "PF_INET" => 2,
        "AF_INET6" | "PF_INET6" => 10,
        "SOCK_STREAM" => 1,
        "SOCK_DGRAM" => 2,
        "IPPROTO_IP" => 0,
        "IPPROTO_TCP" | "SOL_TCP" => 6,
        "IPPROTO_UDP" | "SOL_UDP" => 17,
        "SOL_SOCKET" => 1,
        "SO_REUSEADDR" => 2,
        "SO_ERROR" => 4,
        "SO_SNDBUF" => 7,
        "SO_RCVBUF" => 8,
        "SO_KEEPALIVE" => 9,
        "SO_LINGER" => 13,
        "SO_REUSEPORT" => 15,
        "TCP_NODELAY" => 1,
        "TCP_MAXSEG" => 2,
        "TCP_KEEPIDLE" => 4,
        "TCP_KEEPINTVL" => 5,
        "TCP_KEEPCNT" => 6,
        "TCP_INFO" => 11,
        "TCP_QUICKACK" => 12,
        "TCP_CONGESTION" => 13,
        "TCP_USER_TIMEOUT" => 18,
        "F_GETFL" => 3,
        "F_SETFL" => 4,
        "O_RDONLY" => 0,
        "O_WRONLY" => 1,
        "O_RDWR" => 2,
        "O_NONBLOCK" => 0x800,
        "SHUT_RD" => 0,
        "SHUT_WR" => 1,
        "SHUT_RDWR" => 2,
        "POLLIN" => 0x1,
        "POLLPRI" => 0x2,
        "POLLOUT" => 0x4,
        "POLLERR" => 0x8,
        "POLLHUP" => 0x10,
        "POLLNVAL" => 0x20,
        "POLLRDNORM" => 0x40,
        "POLLWRNORM" => 0x100,
        "POLLRDHUP" => 0x2000,
        "MSG_PEEK" => 0x2,
        "MSG_DONTWAIT" => 0x40,
        "MSG_NOSIGNAL" => 0x4000,
        "SIOCINQ" | "FIONREAD" => 0x541B,
        "SIOCOUTQ" | "TIOCOUTQ" => 0x5411,
        "TCP_ESTABLISHED" => 1,
        "TCP_SYN_SENT" => 2,
        "TCP_SYN_RECV" => 3,
        "TCP_FIN_WAIT1" => 4,
        "TCP_FIN_WAIT2" => 5,
        "TCP_TIME_WAIT" => 6,
        "TCP_CLOSE" => 7,
        "TCP_CLOSE_WAIT" => 8,
        "TCP_LAST_ACK" => 9,
        "TCP_LISTEN" => 10,
        "TCP_CLOSING" => 11,
        "TCPI_OPT_TIMESTAMPS" => 1,
        "TCPI_OPT_SACK" => 2,
        "TCPI_OPT_WSCALE" => 4,
        _ => return None,
    })
}

/// An expression's integer value (`[v]` pointers read through), if it has one.
pub(crate) fn int(e: &Expr) -> Option<i64> {
    match e {
        Expr::Int(v) => Some(*v),
        Expr::Word(w) => symbol(w),
        Expr::Or(a, b) => Some(int(a)? | int(b)?),
        Expr::Array(v) if v.len() == 1 => int(&v[0]),
        Expr::Call(f, a) if (f == "htons" || f == "htonl") && a.len() == 1 => int(&a[0]),
        _ => None,
    }
}

fn errno_of(e: ConnError) -> &'static str {
    match e {
        ConnError::Reset => "ECONNRESET",
        ConnError::Refused => "ECONNREFUSED",
        ConnError::TimedOut => "ETIMEDOUT",
        ConnError::NetworkUnreachable => "ENETUNREACH",
        ConnError::HostUnreachable => "EHOSTUNREACH",
        ConnError::ProtocolUnreachable => "ENOPROTOOPT",
        _ => "ECONNABORTED",
    }
}

fn errno_value(name: &str) -> i64 {
    match name {
        "ECONNRESET" => 104,
        "ECONNREFUSED" => 111,
        "ETIMEDOUT" => 110,
        "ECONNABORTED" => 103,
        "ENETUNREACH" => 101,
        "EHOSTUNREACH" => 113,
        "ENOPROTOOPT" => 92,
        "EPIPE" => 32,
        _ => 0,
    }
}

fn state_value(s: State) -> i64 {
    match s {
        State::Established => 1,
        State::SynSent => 2,
        State::SynReceived => 3,
        State::FinWait1 => 4,
        State::FinWait2 => 5,
        State::TimeWait => 6,
        State::Closed => 7,
        State::CloseWait => 8,
        State::LastAck => 9,
        State::Listen => 10,
        State::Closing => 11,
    }
}

/// A Linux `tcp_info` field from the engine's [`TcpInfo`]; `None` for fields it lacks.
fn tcpi(i: &TcpInfo, name: &str) -> Option<i64> {
    let mss = i64::from(i.snd_mss.max(1));
    let us = |d: Duration| d.as_micros().min(i64::MAX as u128) as i64;
    Some(match name {
        "tcpi_state" => state_value(i.state),
        "tcpi_retransmits" | "tcpi_backoff" => i64::from(i.backoff),
        "tcpi_total_retrans" => i.retransmits as i64,
        "tcpi_bytes_retrans" => i.bytes_retrans as i64,
        "tcpi_ca_state" => match i.ca_state {
            CaState::Open => 0,
            CaState::Disorder => 1,
            CaState::Recovery => 3,
            CaState::Loss => 4,
            _ => return None,
        },
        "tcpi_rcv_mss" => i64::from(i.rcv_mss),
        "tcpi_lost" => (i64::from(i.lost) + mss - 1) / mss,
        "tcpi_rto" => us(i.rto),
        "tcpi_rtt" => i.srtt.map_or(0, us),
        "tcpi_rttvar" => us(i.rttvar),
        "tcpi_snd_mss" => mss,
        "tcpi_snd_cwnd" => i64::from(i.cwnd) / mss,
        "tcpi_snd_ssthresh" => {
            if i.ssthresh >= u32::MAX / 2 {
                0x7fff_ffff
            } else {
                i64::from(i.ssthresh) / mss
            }
        }
        "tcpi_unacked" => i64::from(i.bytes_in_flight).div_euclid(mss),
        "tcpi_sacked" => i64::from(i.sacked_bytes).div_euclid(mss),
        "tcpi_snd_wscale" => i64::from(i.window_scale.map_or(0, |w| w.0)),
        "tcpi_rcv_wscale" => i64::from(i.window_scale.map_or(0, |w| w.1)),
        "tcpi_options" => {
            i64::from(i.timestamps)
                | (i64::from(i.sack) << 1)
                | (i64::from(i.window_scale.is_some()) << 2)
        }
        "tcpi_bytes_acked" => i.bytes_acked as i64,
        "tcpi_bytes_received" => i.bytes_received as i64,
        "tcpi_segs_out" => i.segs_out as i64,
        "tcpi_segs_in" => i.segs_in as i64,
        "tcpi_snd_wnd" => i64::from(i.snd_wnd),
        "tcpi_rcv_wnd" => i64::from(i.rcv_wnd),
        "tcpi_notsent_bytes" => (i.send_queue_len as i64 - i64::from(i.bytes_in_flight)).max(0),
        _ => return None,
    })
}

const MAX_IO: usize = 64 << 20;

/// The engine options a socket's recorded `SO_RCVBUF`, `SO_SNDBUF` and `TCP_MAXSEG` ask
/// for. A buffer of `n` bytes gives a window of about `n`: Linux doubles the value it
/// stores (socket(7)) and offers half of that as window (`tcp_adv_win_scale`).
fn recorded_options(f: &Fd) -> Vec<SocketOption> {
    let mut v = Vec::new();
    if let Some(n) = f.rcvbuf.filter(|&n| n > 0) {
        v.push(SocketOption::RecvBuffer(n.min(1 << 30) as usize));
    }
    if let Some(n) = f.sndbuf.filter(|&n| n > 0) {
        v.push(SocketOption::SendBuffer(n.min(1 << 30) as usize));
    }
    if let Some(m) = f.maxseg.filter(|&m| m > 0) {
        v.push(SocketOption::MaxSegment(m.min(i64::from(u16::MAX)) as u16));
    }
    v
}

impl Interp {
    /// Runs a system call event at the current time.
    pub(crate) fn syscall(
        &mut self,
        c: &Syscall,
        ev: &Event,
        start: u64,
        here: &Here<'_>,
    ) -> Res<()> {
        let expect_end = match (c.end, ev.when) {
            (Some(e), When::Relative(d)) => (start - d).saturating_add(e),
            (Some(e), _) => e,
            (None, _) => start,
        };
        let mut p = Pending {
            pos: here.pos,
            text: here.text.to_string(),
            call: c.clone(),
            expect_end,
            deadline: expect_end
                .saturating_add(self.tol)
                .min(self.now.saturating_add(self.horizon)),
            wake_at: None,
            progress: 0,
        };
        if let Some(ms) = (c.name == "poll")
            .then(|| c.args.get(2).and_then(int))
            .flatten()
        {
            if ms > 0 {
                p.wake_at = Some(self.now.saturating_add((ms as u64).saturating_mul(1000)));
            }
        }
        match self.attempt(c, &mut p, here)? {
            Some(ret) => {
                self.check_result(c, ret, here)?;
                self.check_time(expect_end, expect_end, self.now, "system call return", here)
            }
            None => {
                self.pending = Some(p);
                Ok(())
            }
        }
    }

    /// Compares a return value with the script's.
    pub(crate) fn check_result(&mut self, c: &Syscall, ret: Ret, here: &Here<'_>) -> Res<()> {
        let want = int(&c.result);
        let ok = match (&c.result, ret) {
            (Expr::Ellipsis, _) => true,
            (_, Ok(v)) => want == Some(v),
            (_, Err(e)) => want == Some(-1) && c.errno.as_deref().is_none_or(|w| w == e),
        };
        if ok {
            return Ok(());
        }
        let exp = match (&c.errno, want) {
            (Some(e), _) => format!("-1 {e}"),
            (None, Some(v)) => v.to_string(),
            (None, None) => "?".into(),
        };
        let act = match ret {
            Ok(v) => v.to_string(),
            Err(e) => format!("-1 {e}"),
        };
        let mut f = here.fail(
            FailureKind::SyscallMismatch,
            format!("{}() returned {act}, expected {exp}", c.name),
        );
        f.expected = Some(exp);
        f.actual = Some(act);
        f.hint = Some(
            "API behaviour: compare with the socket state the script reached (errno choice for \
             unusual states is platform policy)"
                .into(),
        );
        Err(f)
    }

    fn arg(&self, c: &Syscall, i: usize, here: &Here<'_>) -> Res<i64> {
        c.args.get(i).and_then(int).ok_or_else(|| {
            here.fail(
                FailureKind::Unsupported,
                format!(
                    "{}(): argument {} is not a value pktest understands",
                    c.name,
                    i + 1
                ),
            )
        })
    }

    fn fd_num(&self, c: &Syscall, here: &Here<'_>) -> Res<i64> {
        self.arg(c, 0, here)
    }

    fn value_mismatch(
        &self,
        c: &Syscall,
        what: &str,
        want: i64,
        got: i64,
        here: &Here<'_>,
    ) -> Res<()> {
        if want == got {
            return Ok(());
        }
        let mut f = here.fail(
            FailureKind::SyscallMismatch,
            format!("{}(): {what} is {got}, expected {want}", c.name),
        );
        f.expected = Some(want.to_string());
        f.actual = Some(got.to_string());
        Err(f)
    }

    /// Tries the call once. `Ok(None)`: it blocks (the socket is blocking).
    pub(crate) fn attempt(
        &mut self,
        c: &Syscall,
        p: &mut Pending,
        here: &Here<'_>,
    ) -> Res<Option<Ret>> {
        let name = c.name.as_str();
        match name {
            "socket" => {
                let ty = self.arg(c, 1, here)?;
                if ty & 0xf != 1 {
                    self.unsupported(
                        here,
                        "non-stream sockets (SOCK_DGRAM, raw): the runner drives TCP only",
                    )?;
                    return Ok(Some(Ok(int(&c.result).unwrap_or(-1))));
                }
                let fd = match int(&c.result) {
                    Some(v) if v >= 0 => v,
                    _ => (3..).find(|n| !self.fds.contains_key(n)).unwrap_or(3),
                };
                let mut f = Fd::new(Sock::Fresh);
                f.nonblock = ty & 0x800 != 0;
                self.fds.insert(fd, f);
                self.conn = None;
                self.listening = false;
                Ok(Some(Ok(fd)))
            }
            "close" => self.sys_close(c, here),
            "bind" => {
                let fd = self.fd_num(c, here)?;
                let port = c
                    .args
                    .get(1)
                    .and_then(|a| a.field("sin_port"))
                    .and_then(int)
                    .unwrap_or(DEFAULT_PORT.into());
                let Some(f) = self.fds.get_mut(&fd) else {
                    return Ok(Some(Err("EBADF")));
                };
                f.bound = Some(SocketAddr::new(self.local_ip, port as u16));
                Ok(Some(Ok(0)))
            }
            "listen" => {
                let fd = self.fd_num(c, here)?;
                let backlog = self.arg(c, 1, here)?.max(1) as usize;
                let Some(f) = self.fds.get_mut(&fd) else {
                    return Ok(Some(Err("EBADF")));
                };
                if !matches!(f.sock, Sock::Fresh) {
                    return Ok(Some(Err("EINVAL")));
                }
                let any = match self.local_ip {
                    IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                    IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
                };
                let local = SocketAddr::new(any, f.bound.map_or(DEFAULT_PORT, |b| b.port()));
                f.bound
                    .get_or_insert(SocketAddr::new(self.local_ip, local.port()));
                let opts = recorded_options(f);
                match self.tcp.listen(local, backlog) {
                    Ok(l) => {
                        for o in opts {
                            let _ = self.tcp.set_listener_option(l, o);
                        }
                        let Some(f) = self.fds.get_mut(&fd) else {
                            return Ok(Some(Err("EBADF")));
                        };
                        f.sock = Sock::Listener(l, Default::default());
                        self.listening = true;
                        self.conn = None;
                        Ok(Some(Ok(0)))
                    }
                    Err(_) => Ok(Some(Err("EADDRINUSE"))),
                }
            }
            "accept" | "accept4" => self.sys_accept(c, here),
            "connect" => {
                // A blocking connect being retried waits for the handshake it started.
                if p.progress > 0 {
                    let fd = self.fd_num(c, here)?;
                    return match self.fds.get(&fd).map(|f| &f.sock) {
                        Some(Sock::Conn(h)) => {
                            let h = *h;
                            self.connect_progress(h)
                        }
                        _ => Ok(Some(Err("EBADF"))),
                    };
                }
                let r = self.sys_connect(c, here)?;
                p.progress = 1;
                Ok(r)
            }
            "read" | "recv" | "recvfrom" | "readv" => self.sys_read(c, here),
            "write" | "send" | "sendto" | "writev" => self.sys_write(c, p, here),
            "shutdown" => {
                let fd = self.fd_num(c, here)?;
                let how = match self.arg(c, 1, here)? {
                    0 => Shutdown::Read,
                    1 => Shutdown::Write,
                    _ => Shutdown::Both,
                };
                match self.fds.get(&fd).map(|f| &f.sock) {
                    Some(Sock::Conn(h)) => {
                        let h = *h;
                        if self.tcp.shutdown(self.instant(), h, how).is_err() {
                            return Ok(Some(Err("ENOTCONN")));
                        }
                        self.settle();
                        Ok(Some(Ok(0)))
                    }
                    Some(_) => Ok(Some(Err("ENOTCONN"))),
                    None => Ok(Some(Err("EBADF"))),
                }
            }
            "fcntl" => {
                let fd = self.fd_num(c, here)?;
                let cmd = self.arg(c, 1, here)?;
                let Some(f) = self.fds.get_mut(&fd) else {
                    return Ok(Some(Err("EBADF")));
                };
                match cmd {
                    3 => Ok(Some(Ok(2 | if f.nonblock { 0x800 } else { 0 }))),
                    4 => {
                        let v = c.args.get(2).and_then(int).unwrap_or(0);
                        f.nonblock = v & 0x800 != 0;
                        Ok(Some(Ok(0)))
                    }
                    _ => {
                        self.unsupported(here, "fcntl commands other than F_GETFL/F_SETFL")?;
                        Ok(Some(Ok(int(&c.result).unwrap_or(0))))
                    }
                }
            }
            "setsockopt" => self.sys_setsockopt(c, here),
            "getsockopt" => self.sys_getsockopt(c, here),
            "poll" => self.sys_poll(c, p, here),
            "ioctl" => {
                let fd = self.fd_num(c, here)?;
                let req = self.arg(c, 1, here)?;
                let Some(Sock::Conn(h)) = self.fds.get(&fd).map(|f| &f.sock) else {
                    return Ok(Some(Err("EINVAL")));
                };
                let Ok(info) = self.tcp.info(*h) else {
                    return Ok(Some(Ok(0)));
                };
                let v = match req {
                    0x541B => info.recv_queue_len as i64,
                    0x5411 => info.send_queue_len as i64,
                    _ => {
                        self.unsupported(here, "ioctl requests other than SIOCINQ/SIOCOUTQ")?;
                        return Ok(Some(Ok(int(&c.result).unwrap_or(0))));
                    }
                };
                if let Some(want) = c.args.get(2).and_then(int) {
                    self.value_mismatch(c, "the queue length", want, v, here)?;
                }
                Ok(Some(Ok(0)))
            }
            _ => {
                self.unsupported(here, &format!("system call {name}()"))?;
                Ok(Some(Ok(int(&c.result).unwrap_or(0))))
            }
        }
    }

    fn sys_close(&mut self, c: &Syscall, here: &Here<'_>) -> Res<Option<Ret>> {
        let fd = self.fd_num(c, here)?;
        let Some(f) = self.fds.remove(&fd) else {
            return Ok(Some(Err("EBADF")));
        };
        match f.sock {
            Sock::Fresh => {}
            Sock::Listener(l, queued) => {
                for h in queued {
                    let _ = self.tcp.abort(self.instant(), h);
                }
                let _ = self.tcp.close_listener(self.instant(), l);
            }
            Sock::Conn(h) => {
                // SO_LINGER {onoff=1, linger=0}: close sends RST (socket(7)).
                let _ = if f.linger0 {
                    self.tcp.abort(self.instant(), h)
                } else {
                    self.tcp.close(self.instant(), h)
                };
            }
        }
        self.settle();
        Ok(Some(Ok(0)))
    }

    fn sys_accept(&mut self, c: &Syscall, here: &Here<'_>) -> Res<Option<Ret>> {
        let fd = self.fd_num(c, here)?;
        let Some(f) = self.fds.get_mut(&fd) else {
            return Ok(Some(Err("EBADF")));
        };
        let nonblock = f.nonblock;
        let nodelay = f.nodelay;
        let inherited = (f.rcvbuf, f.sndbuf, f.maxseg);
        let Sock::Listener(l, queued) = &mut f.sock else {
            return Ok(Some(Err("EINVAL")));
        };
        let h = match queued.pop_front() {
            Some(h) => Some(h),
            None => self
                .tcp
                .accept(Instant::from_micros(self.now), *l)
                .ok()
                .flatten(),
        };
        let Some(h) = h else {
            return Ok(if nonblock { Some(Err("EAGAIN")) } else { None });
        };
        let newfd = match int(&c.result) {
            Some(v) if v >= 0 => v,
            _ => (3..).find(|n| !self.fds.contains_key(n)).unwrap_or(3),
        };
        let mut nf = Fd::new(Sock::Conn(h));
        nf.nodelay = nodelay;
        // Accepted sockets inherit the listener's options (the engine applied them).
        (nf.rcvbuf, nf.sndbuf, nf.maxseg) = inherited;
        if nodelay {
            let _ = self
                .tcp
                .set_option(self.instant(), h, SocketOption::NoDelay(true));
        }
        self.fds.insert(newfd, nf);
        self.settle();
        Ok(Some(Ok(newfd)))
    }

    fn sys_connect(&mut self, c: &Syscall, here: &Here<'_>) -> Res<Option<Ret>> {
        let fd = self.fd_num(c, here)?;
        let port = c
            .args
            .get(1)
            .and_then(|a| a.field("sin_port"))
            .and_then(int)
            .unwrap_or(DEFAULT_PORT.into());
        let now = self.instant();
        let Some(f) = self.fds.get_mut(&fd) else {
            return Ok(Some(Err("EBADF")));
        };
        let nonblock = f.nonblock;
        match f.sock {
            Sock::Conn(h) => {
                // A repeated connect() reports progress (connect(2)).
                return Ok(Some(match self.tcp.readiness(h) {
                    Ok(r) if r.error.is_some() => Err(errno_of(r.error.expect("checked"))),
                    _ => match self.tcp.state(h) {
                        Ok(State::SynSent) => {
                            if nonblock {
                                Err("EALREADY")
                            } else {
                                return Ok(None);
                            }
                        }
                        Ok(_) => Err("EISCONN"),
                        Err(_) => Err("EBADF"),
                    },
                }));
            }
            Sock::Listener(..) => return Ok(Some(Err("EISCONN"))),
            Sock::Fresh => {}
        }
        let local = SocketAddr::new(self.local_ip, f.bound.map_or(0, |b| b.port()));
        let remote = SocketAddr::new(self.remote_ip, port as u16);
        let opts = recorded_options(f);
        let h = match self.tcp.connect_with(now, local, remote, &opts) {
            Ok(h) => h,
            Err(_) => return Ok(Some(Err("EADDRNOTAVAIL"))),
        };
        f.sock = Sock::Conn(h);
        if f.nodelay {
            let _ = self.tcp.set_option(now, h, SocketOption::NoDelay(true));
        }
        let (l, r) = self.tcp.addresses(h).unwrap_or((local, remote));
        self.conn = Some(Conn::new(l, r));
        self.listening = false;
        self.settle();
        if nonblock {
            return Ok(Some(Err("EINPROGRESS")));
        }
        self.connect_progress(h)
    }

    /// A blocking connect: done when established, or with the connection's error.
    fn connect_progress(&mut self, h: SocketHandle) -> Res<Option<Ret>> {
        let r = self.tcp.readiness(h);
        Ok(match (r, self.tcp.state(h)) {
            (Ok(r), _) if r.error.is_some() => Some(Err(errno_of(r.error.expect("checked")))),
            (_, Ok(State::SynSent)) => None,
            (_, Ok(State::Closed)) => Some(Err("ECONNREFUSED")),
            _ => Some(Ok(0)),
        })
    }

    fn sys_read(&mut self, c: &Syscall, here: &Here<'_>) -> Res<Option<Ret>> {
        let fd = self.fd_num(c, here)?;
        let len = if c.name == "readv" {
            iov_len(c.args.get(1))
        } else {
            self.arg(c, 2, here)?.max(0) as usize
        };
        let flags = if matches!(c.name.as_str(), "recv" | "recvfrom") {
            c.args.get(3).and_then(int).unwrap_or(0)
        } else {
            0
        };
        let Some(f) = self.fds.get(&fd) else {
            return Ok(Some(Err("EBADF")));
        };
        let nonblock = f.nonblock || flags & 0x40 != 0;
        let Sock::Conn(h) = f.sock else {
            return Ok(Some(Err("ENOTCONN")));
        };
        // Linux reports a connection's error once (sock_error() clears sk_err); after
        // that reads see end of file.
        let taken = f.error_taken;
        let mut buf = vec![0u8; len.min(MAX_IO)];
        let r = if flags & 0x2 != 0 {
            self.tcp.peek(h, &mut buf)
        } else {
            self.tcp.recv(self.instant(), h, &mut buf)
        };
        self.settle();
        Ok(match r {
            Ok(n) => Some(Ok(n as i64)),
            Err(RecvError::WouldBlock) => {
                if nonblock {
                    Some(Err("EAGAIN"))
                } else {
                    None
                }
            }
            Err(
                RecvError::ConnectionReset | RecvError::TimedOut | RecvError::ConnectionRefused,
            ) if taken => Some(Ok(0)),
            Err(
                e @ (RecvError::ConnectionReset
                | RecvError::TimedOut
                | RecvError::ConnectionRefused),
            ) => {
                if let Some(f) = self.fds.get_mut(&fd) {
                    f.error_taken = true;
                }
                Some(Err(match e {
                    RecvError::ConnectionReset => "ECONNRESET",
                    RecvError::TimedOut => "ETIMEDOUT",
                    _ => "ECONNREFUSED",
                }))
            }
            Err(RecvError::Closed) => Some(Ok(0)),
            Err(_) => Some(Err("EBADF")),
        })
    }

    fn sys_write(&mut self, c: &Syscall, p: &mut Pending, here: &Here<'_>) -> Res<Option<Ret>> {
        let fd = self.fd_num(c, here)?;
        let len = if c.name == "writev" {
            iov_len(c.args.get(1))
        } else {
            self.arg(c, 2, here)?.max(0) as usize
        }
        .min(MAX_IO);
        let flags = if matches!(c.name.as_str(), "send" | "sendto") {
            c.args.get(3).and_then(int).unwrap_or(0)
        } else {
            0
        };
        let Some(f) = self.fds.get(&fd) else {
            return Ok(Some(Err("EBADF")));
        };
        let nonblock = f.nonblock || flags & 0x40 != 0;
        let Sock::Conn(h) = f.sock else {
            return Ok(Some(Err("EPIPE")));
        };
        if self.tcp.state(h) == Ok(State::SynSent) {
            // Linux waits for the handshake before queueing (sk_stream_wait_connect).
            return Ok(if nonblock { Some(Err("EAGAIN")) } else { None });
        }
        let taken = f.error_taken;
        let zeros = vec![0u8; (len - p.progress).min(1 << 20)];
        let r = self.tcp.send(self.instant(), h, &zeros);
        self.settle();
        if let Err(
            SendError::ConnectionReset | SendError::TimedOut | SendError::ConnectionRefused,
        ) = r
        {
            // The error is reported once (then EPIPE), as Linux's sock_error() does.
            if taken {
                return Ok(Some(Err("EPIPE")));
            }
            if let Some(f) = self.fds.get_mut(&fd) {
                f.error_taken = true;
            }
        }
        match r {
            Ok(n) => {
                p.progress += n;
                if p.progress >= len {
                    Ok(Some(Ok(len as i64)))
                } else if nonblock {
                    Ok(Some(if p.progress > 0 {
                        Ok(p.progress as i64)
                    } else {
                        Err("EAGAIN")
                    }))
                } else {
                    Ok(None)
                }
            }
            Err(SendError::Closed) => Ok(Some(Err("EPIPE"))),
            Err(SendError::ConnectionReset) => Ok(Some(Err("ECONNRESET"))),
            Err(SendError::TimedOut) => Ok(Some(Err("ETIMEDOUT"))),
            Err(SendError::ConnectionRefused) => Ok(Some(Err("ECONNREFUSED"))),
            Err(_) => Ok(Some(Err("EBADF"))),
        }
    }

    fn sys_setsockopt(&mut self, c: &Syscall, here: &Here<'_>) -> Res<Option<Ret>> {
        let fd = self.fd_num(c, here)?;
        let level = self.arg(c, 1, here)?;
        let opt = self.arg(c, 2, here)?;
        let val_expr = c.args.get(3).cloned().unwrap_or(Expr::Ellipsis);
        let val = int(&val_expr);
        let Some(f) = self.fds.get_mut(&fd) else {
            return Ok(Some(Err("EBADF")));
        };
        let h = match f.sock {
            Sock::Conn(h) => Some(h),
            _ => None,
        };
        let mut apply = None;
        match (level, opt) {
            (1, 2) | (1, 15) => {}
            (1, 8) => {
                f.rcvbuf = val;
                apply = recorded_options(f)
                    .into_iter()
                    .find(|o| matches!(o, SocketOption::RecvBuffer(_)));
            }
            (1, 7) => {
                f.sndbuf = val;
                apply = recorded_options(f)
                    .into_iter()
                    .find(|o| matches!(o, SocketOption::SendBuffer(_)));
            }
            (1, 13) => {
                let on = val_expr.field("onoff").and_then(int).unwrap_or(0);
                let secs = val_expr.field("linger").and_then(int).unwrap_or(0);
                f.linger0 = on != 0 && secs == 0;
            }
            (1, 9) => {
                apply = Some(SocketOption::Keepalive(
                    (val.unwrap_or(0) != 0)
                        .then(|| self.profile.config.keepalive.unwrap_or_default()),
                ))
            }
            (6, 1) => {
                f.nodelay = val.unwrap_or(0) != 0;
                apply = Some(SocketOption::NoDelay(f.nodelay));
            }
            (6, 2) => {
                f.maxseg = val;
                apply = recorded_options(f)
                    .into_iter()
                    .find(|o| matches!(o, SocketOption::MaxSegment(_)));
            }
            (6, 12) => apply = Some(SocketOption::DelayedAck(val.unwrap_or(0) == 0)),
            (6, 18) => {
                let ms = val.unwrap_or(0).max(0) as u64;
                apply = Some(SocketOption::UserTimeout(
                    (ms > 0).then(|| Duration::from_millis(ms)),
                ));
            }
            (6, 13) => {
                let alg = match &val_expr {
                    Expr::Str(s) => s.parse().ok(),
                    _ => None,
                };
                match alg {
                    Some(a) => apply = Some(SocketOption::Congestion(a)),
                    None => return Ok(Some(Err("ENOENT"))),
                }
            }
            (6, 4..=6) => {
                let mut k = self.profile.config.keepalive.unwrap_or_default();
                let v = val.unwrap_or(0).max(1) as u64;
                match opt {
                    4 => k.idle = Duration::from_secs(v),
                    5 => k.interval = Duration::from_secs(v),
                    _ => k.count = v.min(255) as u8,
                }
                apply = Some(SocketOption::Keepalive(Some(Keepalive { ..k })));
            }
            _ => {
                self.unsupported(here, "this socket option")?;
                return Ok(Some(Ok(0)));
            }
        }
        // On a fresh socket the buffer and MSS options wait for connect() or listen()
        // (they shape the SYN); the others apply to connections only.
        if let (Some(h), Some(o)) = (h, apply) {
            if self.tcp.set_option(self.instant(), h, o).is_err() {
                self.report.warnings.push(format!(
                    "line {}: the engine cannot change this buffer size now (data is held, or \
                     it would shrink an offered window); recorded only",
                    here.pos.line
                ));
            }
            self.settle();
        }
        Ok(Some(Ok(0)))
    }

    fn sys_getsockopt(&mut self, c: &Syscall, here: &Here<'_>) -> Res<Option<Ret>> {
        let fd = self.fd_num(c, here)?;
        let level = self.arg(c, 1, here)?;
        let opt = self.arg(c, 2, here)?;
        let want = c.args.get(3).cloned().unwrap_or(Expr::Ellipsis);
        let Some(f) = self.fds.get_mut(&fd) else {
            return Ok(Some(Err("EBADF")));
        };
        let h = match f.sock {
            Sock::Conn(h) => Some(h),
            _ => None,
        };
        let dbl = if self.profile.doubles_buffer_sizes {
            2
        } else {
            1
        };
        let got = match (level, opt) {
            (1, 4) => {
                let e = h
                    .and_then(|h| self.tcp.readiness(h).ok())
                    .and_then(|r| r.error);
                match e {
                    Some(e) if !f.error_taken => {
                        f.error_taken = true;
                        errno_value(errno_of(e))
                    }
                    // Linux's SO_ERROR: the pending error, else the ICMP soft error
                    // (taken: reported once).
                    None => h
                        .and_then(|h| self.tcp.take_soft_error(h).ok().flatten())
                        .map_or(0, |e| errno_value(errno_of(e))),
                    _ => 0,
                }
            }
            (1, 8) => {
                let v = f.rcvbuf.map_or(self.profile.rcvbuf_default, |v| v * dbl);
                buffer_size(&self.tcp, &self.profile, h, v)
            }
            (1, 7) => {
                let v = f.sndbuf.map_or(self.profile.sndbuf_default, |v| v * dbl);
                buffer_size(&self.tcp, &self.profile, h, v)
            }
            (6, 1) => i64::from(f.nodelay),
            (6, 2) => match h.and_then(|h| self.tcp.info(h).ok()) {
                Some(i) => i64::from(i.snd_mss),
                None => f.maxseg.unwrap_or(536),
            },
            (6, 11) => {
                let Some(info) = h.and_then(|h| self.tcp.info(h).ok()) else {
                    return Ok(Some(Err("ENOTCONN")));
                };
                if let Expr::Struct(fields) = &want {
                    for fe in fields {
                        let Expr::Field(n, v) = fe else { continue };
                        if **v == Expr::Ellipsis {
                            continue;
                        }
                        match (tcpi(&info, n), int(v)) {
                            (Some(g), Some(w)) => self.value_mismatch(c, n, w, g, here)?,
                            _ => self.unsupported(here, &format!("TCP_INFO field {n}"))?,
                        }
                    }
                }
                return Ok(Some(Ok(0)));
            }
            _ => {
                self.unsupported(here, "this socket option")?;
                return Ok(Some(Ok(0)));
            }
        };
        // An errno name (`[ECONNREFUSED]`, SO_ERROR's value) is compared as its number.
        let errno_name = match &want {
            Expr::Array(v) if v.len() == 1 => match &v[0] {
                Expr::Word(w) => Some(errno_value(w)).filter(|&n| n != 0),
                _ => None,
            },
            _ => None,
        };
        if let Some(w) = int(&want).or(errno_name) {
            self.value_mismatch(c, "the option value", w, got, here)?;
        }
        Ok(Some(Ok(0)))
    }

    fn sys_poll(&mut self, c: &Syscall, p: &mut Pending, here: &Here<'_>) -> Res<Option<Ret>> {
        let Some(Expr::Array(items)) = c.args.first() else {
            self.unsupported(here, "poll() without a [{fd=..., events=...}] array")?;
            return Ok(Some(Ok(0)));
        };
        let timeout = c.args.get(2).and_then(int).unwrap_or(0);
        let mut ready = 0;
        let mut results = Vec::new();
        for it in items {
            let fd = it.field("fd").and_then(int).unwrap_or(-1);
            let events = it.field("events").and_then(int).unwrap_or(0);
            let want = it.field("revents").and_then(int).unwrap_or(0);
            let got = self.revents(fd) & (events | 0x8 | 0x10 | 0x20);
            if got != 0 {
                ready += 1;
            }
            results.push((want, got));
        }
        let timed_out = p.wake_at.is_some_and(|w| self.now >= w);
        if ready == 0 && timeout != 0 && !timed_out {
            return Ok(None);
        }
        for (want, got) in results {
            self.value_mismatch(c, "revents", want, got, here)?;
        }
        Ok(Some(Ok(ready)))
    }

    fn revents(&mut self, fd: i64) -> i64 {
        let Some(f) = self.fds.get_mut(&fd) else {
            return 0x20;
        };
        match &mut f.sock {
            Sock::Fresh => 0x4 | 0x10,
            Sock::Listener(l, queued) => {
                if queued.is_empty() {
                    if let Ok(Some(h)) = self.tcp.accept(Instant::from_micros(self.now), *l) {
                        queued.push_back(h);
                    }
                }
                if queued.is_empty() {
                    0
                } else {
                    0x1 | 0x40
                }
            }
            Sock::Conn(h) => {
                let h = *h;
                let Ok(r) = self.tcp.readiness(h) else {
                    return 0x20;
                };
                let state = self.tcp.state(h).unwrap_or(State::Closed);
                let mut m = 0;
                if r.readable {
                    m |= 0x1 | 0x40;
                }
                if r.writable && r.error.is_none() {
                    m |= 0x4 | 0x100;
                }
                if r.error.is_some() {
                    m |= 0x8;
                }
                if r.read_closed {
                    m |= 0x2000 | 0x1 | 0x40;
                }
                if r.closed || state == State::Closed {
                    m |= 0x10;
                }
                m
            }
        }
    }
}

fn iov_len(e: Option<&Expr>) -> usize {
    match e {
        Some(Expr::Array(v)) => v
            .iter()
            .map(|iov| match iov {
                Expr::Struct(parts) => parts.last().and_then(int).unwrap_or(0).max(0) as usize,
                _ => 0,
            })
            .sum(),
        _ => 0,
    }
}
