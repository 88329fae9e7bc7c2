//! setsockopt(2) and getsockopt(2) on ulnet sockets: the common SOL_SOCKET,
//! IPPROTO_TCP, IPPROTO_IP and IPPROTO_IPV6 options. Options the engine acts on are
//! applied to the connection (now, or when it is made: accepted connections inherit
//! their listener's, as on Linux); the others are kept and read back so programs that
//! set them work; anything else is `ENOPROTOOPT`, as Linux says for an option it does
//! not know.

use std::ffi::{c_int, c_void};
use std::time::Duration;

use libc::socklen_t;
use ulnet_core::net::{Algorithm, IpFields, Keepalive, SocketOption, TcpStream};
use ulnet_core::stack::tcp::State as TcpState;

use crate::sock::{lock, Sock};

/// What the program set (defaults as Linux reports them).
#[derive(Debug, Clone)]
pub struct Opts {
    pub(crate) reuseaddr: bool,
    pub(crate) reuseport: bool,
    pub(crate) keepalive: bool,
    /// TCP_KEEPIDLE, TCP_KEEPINTVL (seconds), TCP_KEEPCNT.
    pub(crate) ka_idle: u32,
    pub(crate) ka_intvl: u32,
    pub(crate) ka_cnt: u32,
    pub(crate) nodelay: bool,
    pub(crate) quickack: bool,
    /// SO_LINGER: on, seconds.
    pub(crate) linger: Option<u32>,
    /// SO_RCVBUF and SO_SNDBUF as getsockopt reports them (doubled, as Linux does).
    pub(crate) rcvbuf: c_int,
    pub(crate) sndbuf: c_int,
    /// The program set SO_RCVBUF / SO_SNDBUF / TCP_MAXSEG: the engine gets them (and a
    /// set receive buffer turns auto-tuning off, Linux's SOCK_RCVBUF_LOCK).
    pub(crate) rcvbuf_set: bool,
    pub(crate) sndbuf_set: bool,
    pub(crate) maxseg_set: bool,
    pub(crate) rcvtimeo: Option<Duration>,
    pub(crate) sndtimeo: Option<Duration>,
    pub(crate) broadcast: bool,
    pub(crate) oobinline: bool,
    pub(crate) priority: c_int,
    /// IP_TOS as read back (for TCP without the ECN bits, as Linux keeps them).
    pub(crate) tos: c_int,
    /// IP_TTL; `ttl_set` unless the program never set it or set -1 (the default).
    pub(crate) ttl: c_int,
    pub(crate) ttl_set: bool,
    /// IPV6_TCLASS and IPV6_UNICAST_HOPS (-1: the default) of an AF_INET6 socket.
    pub(crate) tclass: c_int,
    pub(crate) hops: c_int,
    pub(crate) v6only: bool,
    pub(crate) user_timeout_ms: u32,
    pub(crate) maxseg: c_int,
    pub(crate) congestion: Algorithm,
    pub(crate) mtu_discover: c_int,
    pub(crate) recverr: bool,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            reuseaddr: false,
            reuseport: false,
            keepalive: false,
            ka_idle: 7200,
            ka_intvl: 75,
            ka_cnt: 9,
            nodelay: false,
            quickack: false,
            linger: None,
            rcvbuf: 131_072,
            sndbuf: 16_384,
            rcvbuf_set: false,
            sndbuf_set: false,
            maxseg_set: false,
            rcvtimeo: None,
            sndtimeo: None,
            broadcast: false,
            oobinline: false,
            priority: 0,
            tos: 0,
            ttl: 64,
            ttl_set: false,
            tclass: 0,
            hops: -1,
            v6only: false,
            user_timeout_ms: 0,
            maxseg: 536,
            congestion: Algorithm::Cubic,
            mtu_discover: 1,
            recverr: false,
        }
    }
}

impl Opts {
    /// Puts what the engine acts on onto `s`.
    pub fn apply(&self, s: &TcpStream) {
        let _ = s.set_nodelay(self.nodelay);
        let _ = s.set_keepalive(self.keepalive.then(|| self.keepalive_timing()));
        let _ = s.set_linger(self.linger.map(|t| Duration::from_secs(t.into())));
        let _ = s.set_delayed_ack(!self.quickack);
        let _ = s.set_congestion(self.congestion);
        let ut =
            (self.user_timeout_ms > 0).then(|| Duration::from_millis(self.user_timeout_ms.into()));
        let _ = s.set_user_timeout(ut);
    }

    /// What the engine's connection gets before its SYN (connect) or SYN-ACK (from a
    /// listener): the options `apply` sets, and the buffer sizes and MSS the program set,
    /// which shape the SYN (window scale, RFC 7323 §2.3; MSS option, RFC 9293 §3.7.1).
    /// The engine gets the sizes the program asked for: Linux doubles them for its own
    /// bookkeeping (`skb` overhead) and offers about the asked size as window.
    pub fn engine_options(&self) -> Vec<SocketOption> {
        let mut v = vec![
            SocketOption::NoDelay(self.nodelay),
            SocketOption::Keepalive(self.keepalive.then(|| self.keepalive_timing())),
            SocketOption::DelayedAck(!self.quickack),
            SocketOption::Congestion(self.congestion),
            SocketOption::UserTimeout((self.user_timeout_ms > 0).then(|| {
                ulnet_core::stack::time::Duration::from_millis(self.user_timeout_ms.into())
            })),
        ];
        let ip = self.ip_fields();
        v.push(SocketOption::Tos(ip.tos));
        v.push(SocketOption::HopLimit(ip.hop_limit));
        v.extend(self.buffer_options());
        v
    }

    /// The TOS and TTL of what the socket sends: IP_TOS and IP_TTL (ulnet sockets
    /// carry IPv4 only, so IPV6_TCLASS and IPV6_UNICAST_HOPS, which Linux applies to
    /// IPv6 traffic only, change nothing on the wire).
    pub fn ip_fields(&self) -> IpFields {
        IpFields {
            tos: self.tos as u8,
            hop_limit: self.ttl_set.then_some(self.ttl as u8),
        }
    }

    /// The buffer sizes and MSS the program set, as engine options.
    pub fn buffer_options(&self) -> Vec<SocketOption> {
        let mut v = Vec::new();
        if self.rcvbuf_set {
            v.push(SocketOption::RecvBuffer(self.rcvbuf as usize / 2));
        }
        if self.sndbuf_set {
            v.push(SocketOption::SendBuffer(self.sndbuf as usize / 2));
        }
        if self.maxseg_set {
            v.push(SocketOption::MaxSegment(self.maxseg as u16));
        }
        v
    }

    fn keepalive_timing(&self) -> Keepalive {
        use ulnet_core::stack::time::Duration as D;
        Keepalive {
            idle: D::from_secs(self.ka_idle.into()),
            interval: D::from_secs(self.ka_intvl.into()),
            count: self.ka_cnt.min(255) as u8,
        }
    }
}

/// Reads an int option value (Linux accepts any length of at least an int... and for
/// a few, a single byte; an int is asked for here).
///
/// # Safety
/// `v` is valid for reads of `len` bytes.
unsafe fn read_int(v: *const c_void, len: socklen_t) -> Result<c_int, c_int> {
    if v.is_null() {
        return Err(libc::EFAULT);
    }
    if (len as usize) < std::mem::size_of::<c_int>() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's `len` covers an int.
    Ok(unsafe { std::ptr::read_unaligned(v.cast::<c_int>()) })
}

/// # Safety
/// `v` is valid for reads of `len` bytes.
unsafe fn read_timeval(v: *const c_void, len: socklen_t) -> Result<Option<Duration>, c_int> {
    if v.is_null() {
        return Err(libc::EFAULT);
    }
    if (len as usize) < std::mem::size_of::<libc::timeval>() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's `len` covers a timeval.
    let t = unsafe { std::ptr::read_unaligned(v.cast::<libc::timeval>()) };
    if t.tv_usec < 0 || t.tv_usec >= 1_000_000 {
        return Err(libc::EDOM);
    }
    if t.tv_sec < 0 || (t.tv_sec == 0 && t.tv_usec == 0) {
        return Ok(None);
    }
    Ok(Some(
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64),
    ))
}

/// setsockopt(2).
///
/// # Errors
/// `ENOPROTOOPT` for an option not listed; `EINVAL`, `EFAULT` for a bad value; `ENOENT`
/// for an unknown congestion control name.
///
/// # Safety
/// `v` is valid for reads of `len` bytes.
pub unsafe fn set(
    s: &Sock,
    level: c_int,
    opt: c_int,
    v: *const c_void,
    len: socklen_t,
) -> Result<(), c_int> {
    // SAFETY: the caller's contract: `v` is readable for `len` bytes.
    let int = || unsafe { read_int(v, len) };
    // SAFETY: as above.
    let timeval = || unsafe { read_timeval(v, len) };
    let mut o = lock(&s.opts);
    // What reaches the engine's connection: the one option this call changed (setting
    // a buffer size again is refused once data is held, and the congestion control
    // again would restart it from the initial window); see `push_for`.
    let mut push = None;
    match (level, opt) {
        (libc::SOL_SOCKET, libc::SO_REUSEADDR) => o.reuseaddr = int()? != 0,
        (libc::SOL_SOCKET, libc::SO_REUSEPORT) => o.reuseport = int()? != 0,
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => o.keepalive = int()? != 0,
        (libc::SOL_SOCKET, libc::SO_BROADCAST) => o.broadcast = int()? != 0,
        (libc::SOL_SOCKET, libc::SO_OOBINLINE) => o.oobinline = int()? != 0,
        (libc::SOL_SOCKET, libc::SO_PRIORITY) => o.priority = int()?,
        // Linux (`sock_setsockopt`): the value is capped by net.core.rmem_max/wmem_max,
        // doubled for bookkeeping, at least SOCK_MIN_RCVBUF/SOCK_MIN_SNDBUF, and
        // getsockopt reports the double; a set size is locked (no auto-tuning).
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => {
            o.rcvbuf = buffer_size(int()?, limits().0, 1152);
            o.rcvbuf_set = true;
            push = Some(Push::Engine(SocketOption::RecvBuffer(
                o.rcvbuf as usize / 2,
            )));
        }
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => {
            o.sndbuf = buffer_size(int()?, limits().1, 2304);
            o.sndbuf_set = true;
            push = Some(Push::Engine(SocketOption::SendBuffer(
                o.sndbuf as usize / 2,
            )));
        }
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO) => o.rcvtimeo = timeval()?,
        (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => o.sndtimeo = timeval()?,
        (libc::SOL_SOCKET, libc::SO_LINGER) => {
            if v.is_null() {
                return Err(libc::EFAULT);
            }
            if (len as usize) < std::mem::size_of::<libc::linger>() {
                return Err(libc::EINVAL);
            }
            // SAFETY: `len` covers a struct linger.
            let l = unsafe { std::ptr::read_unaligned(v.cast::<libc::linger>()) };
            o.linger = (l.l_onoff != 0).then_some(l.l_linger.max(0) as u32);
        }
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => o.nodelay = int()? != 0,
        (libc::IPPROTO_TCP, libc::TCP_QUICKACK) => o.quickack = int()? != 0,
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => o.ka_idle = positive(int()?, 32767)?,
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => o.ka_intvl = positive(int()?, 32767)?,
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => o.ka_cnt = positive(int()?, 127)?,
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => {
            let t = int()?;
            o.user_timeout_ms = u32::try_from(t).map_err(|_| libc::EINVAL)?;
        }
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => {
            let m = int()?;
            if !(88..=32767).contains(&m) {
                return Err(libc::EINVAL);
            }
            o.maxseg = m;
            o.maxseg_set = true;
            push = Some(Push::Engine(SocketOption::MaxSegment(m as u16)));
        }
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => {
            if v.is_null() {
                return Err(libc::EFAULT);
            }
            // SAFETY: the caller's `len` bytes are readable.
            let name = unsafe { std::slice::from_raw_parts(v.cast::<u8>(), len as usize) };
            let name = name.split(|b| *b == 0).next().unwrap_or(&[]);
            o.congestion = match name {
                b"cubic" => Algorithm::Cubic,
                b"reno" | b"newreno" => Algorithm::NewReno,
                b"bbr" => Algorithm::Bbr,
                _ => return Err(libc::ENOENT),
            };
        }
        (libc::IPPROTO_IP, libc::IP_TOS) => {
            // Linux (`__ip_sock_set_tos`): a TCP socket's ECN bits stay TCP's
            // (RFC 3168 §6.1.1); UDP sends the whole byte.
            let mask = if s.stream { 0xfc } else { 0xff };
            o.tos = int()? & mask;
            push = Some(Push::Ip);
        }
        (libc::IPPROTO_IP, libc::IP_TTL) => {
            let t = int()?;
            (o.ttl, o.ttl_set) = if t == -1 {
                (64, false)
            } else {
                (positive(t, 255)? as c_int, true)
            };
            push = Some(Push::Ip);
        }
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) if s.family == libc::AF_INET6 => {
            let t = int()?;
            if !(-1..=255).contains(&t) {
                return Err(libc::EINVAL);
            }
            o.tclass = t.max(0);
        }
        (libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS) if s.family == libc::AF_INET6 => {
            let t = int()?;
            if !(-1..=255).contains(&t) {
                return Err(libc::EINVAL);
            }
            o.hops = t;
        }
        (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER) => o.mtu_discover = int()?,
        (libc::IPPROTO_IP, libc::IP_RECVERR) => o.recverr = int()? != 0,
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) if s.family == libc::AF_INET6 => {
            o.v6only = int()? != 0
        }
        _ => return Err(libc::ENOPROTOOPT),
    }
    let now = o.clone();
    // The connection is updated outside the option lock (it takes the stack's).
    drop(o);
    match push.unwrap_or_else(|| push_for(level, opt, &now)) {
        // Linux never fails setsockopt for a size it cannot apply now: a connection
        // holding data keeps its buffer (the engine refuses to shrink offered window,
        // RFC 9293 §3.8.6) and the size is still reported.
        Push::Engine(e) => {
            s.with_stream(|st| st.set_option(e));
        }
        Push::NoDelay(on) => {
            s.with_stream(|st| st.set_nodelay(on));
        }
        Push::Linger => {
            s.with_stream(|st| st.set_linger(now.linger.map(|t| Duration::from_secs(t.into()))));
        }
        Push::Nothing => {}
        Push::Ip => {
            let ip = now.ip_fields();
            s.with_stream(|st| {
                let _ = st.set_option(SocketOption::Tos(ip.tos));
                let _ = st.set_option(SocketOption::HopLimit(ip.hop_limit));
            });
            s.set_udp_ip_fields(ip);
        }
    }
    s.with_listener(|l| {
        for e in now.engine_options() {
            let _ = l.set_option(e);
        }
    });
    Ok(())
}

/// What a setsockopt call of an option `Opts::apply` acts on changes on the
/// connection (the others are kept and read back only).
fn push_for(level: c_int, opt: c_int, o: &Opts) -> Push {
    match (level, opt) {
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE)
        | (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE | libc::TCP_KEEPINTVL | libc::TCP_KEEPCNT) => {
            Push::Engine(SocketOption::Keepalive(
                o.keepalive.then(|| o.keepalive_timing()),
            ))
        }
        (libc::SOL_SOCKET, libc::SO_LINGER) => Push::Linger,
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => Push::NoDelay(o.nodelay),
        (libc::IPPROTO_TCP, libc::TCP_QUICKACK) => {
            Push::Engine(SocketOption::DelayedAck(!o.quickack))
        }
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => {
            Push::Engine(SocketOption::Congestion(o.congestion))
        }
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => Push::Engine(SocketOption::UserTimeout(
            (o.user_timeout_ms > 0)
                .then(|| ulnet_core::stack::time::Duration::from_millis(o.user_timeout_ms.into())),
        )),
        _ => Push::Nothing,
    }
}

/// What a setsockopt call changes on the connection.
enum Push {
    /// Nothing the engine acts on.
    Nothing,
    /// This one engine option.
    Engine(SocketOption),
    /// Nagle off or on (through the stream, which remembers it for TCP_NODELAY).
    NoDelay(bool),
    /// SO_LINGER (the stream's close).
    Linger,
    /// The TOS and TTL (TCP or UDP).
    Ip,
}

/// Linux's `net.core.rmem_max` and `wmem_max` (the caps on SO_RCVBUF and SO_SNDBUF),
/// read once from the host; Linux's defaults (212992) when unreadable.
fn limits() -> (c_int, c_int) {
    static L: std::sync::OnceLock<(c_int, c_int)> = std::sync::OnceLock::new();
    *L.get_or_init(|| {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .and_then(|s| s.trim().parse::<c_int>().ok())
                .filter(|&v| v > 0)
                .unwrap_or(212_992)
        };
        (
            read("/proc/sys/net/core/rmem_max"),
            read("/proc/sys/net/core/wmem_max"),
        )
    })
}

/// The size SO_RCVBUF/SO_SNDBUF records for `v`: capped by `max`, doubled, at least
/// twice `min_half` (Linux's `__sock_set_rcvbuf`, with SOCK_MIN_RCVBUF = 2304 and
/// SOCK_MIN_SNDBUF = 4608).
/// (A negative value is a huge unsigned one to Linux: the cap.)
fn buffer_size(v: c_int, max: c_int, min_half: c_int) -> c_int {
    let max = max.clamp(min_half, i32::MAX / 2);
    let v = if v < 0 { max } else { v.min(max) };
    v.max(min_half) * 2
}

fn positive(v: c_int, max: u32) -> Result<u32, c_int> {
    match u32::try_from(v) {
        Ok(v) if (1..=max).contains(&v) => Ok(v),
        _ => Err(libc::EINVAL),
    }
}

/// getsockopt(2).
///
/// # Errors
/// `ENOPROTOOPT` for an option not listed; `EFAULT` for null pointers; `EINVAL` for a
/// negative length.
///
/// # Safety
/// `len` is valid for reads and writes, and `v` for writes of `*len` bytes.
pub unsafe fn get(
    s: &Sock,
    level: c_int,
    opt: c_int,
    v: *mut c_void,
    len: *mut socklen_t,
) -> Result<(), c_int> {
    if v.is_null() || len.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: `len` is readable.
    let room = unsafe { *len } as i32;
    if room < 0 {
        return Err(libc::EINVAL);
    }
    let o = lock(&s.opts).clone();
    let mut out = [0u8; 256];
    let b = |x: bool| c_int::from(x).to_ne_bytes().to_vec();
    let i = |x: c_int| x.to_ne_bytes().to_vec();
    let tv = |d: Option<Duration>| {
        let d = d.unwrap_or_default();
        let t = libc::timeval {
            tv_sec: d.as_secs() as libc::time_t,
            tv_usec: libc::suseconds_t::from(d.subsec_micros()),
        };
        // SAFETY: a timeval is plain old data; reading its bytes is defined.
        unsafe {
            std::slice::from_raw_parts(
                (&t as *const libc::timeval).cast::<u8>(),
                std::mem::size_of::<libc::timeval>(),
            )
        }
        .to_vec()
    };
    let bytes: Vec<u8> = match (level, opt) {
        (libc::SOL_SOCKET, libc::SO_TYPE) => i(if s.stream {
            libc::SOCK_STREAM
        } else {
            libc::SOCK_DGRAM
        }),
        (libc::SOL_SOCKET, libc::SO_DOMAIN) => i(s.family),
        (libc::SOL_SOCKET, libc::SO_PROTOCOL) => i(if s.stream {
            libc::IPPROTO_TCP
        } else {
            libc::IPPROTO_UDP
        }),
        (libc::SOL_SOCKET, libc::SO_ERROR) => i(s.take_error()),
        (libc::SOL_SOCKET, libc::SO_ACCEPTCONN) => b(s.is_listener()),
        (libc::SOL_SOCKET, libc::SO_REUSEADDR) => b(o.reuseaddr),
        (libc::SOL_SOCKET, libc::SO_REUSEPORT) => b(o.reuseport),
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => b(o.keepalive),
        (libc::SOL_SOCKET, libc::SO_BROADCAST) => b(o.broadcast),
        (libc::SOL_SOCKET, libc::SO_OOBINLINE) => b(o.oobinline),
        (libc::SOL_SOCKET, libc::SO_PRIORITY) => i(o.priority),
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => i(o.rcvbuf),
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => i(o.sndbuf),
        (libc::SOL_SOCKET, libc::SO_RCVLOWAT) | (libc::SOL_SOCKET, libc::SO_SNDLOWAT) => i(1),
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO) => tv(o.rcvtimeo),
        (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => tv(o.sndtimeo),
        (libc::SOL_SOCKET, libc::SO_LINGER) => {
            let mut v = i(c_int::from(o.linger.is_some()));
            v.extend(i(o.linger.unwrap_or(0) as c_int));
            v
        }
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => b(s
            .with_stream(|st| st.nodelay().unwrap_or(o.nodelay))
            .unwrap_or(o.nodelay)),
        (libc::IPPROTO_TCP, libc::TCP_QUICKACK) => b(o.quickack),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => i(o.ka_idle as c_int),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => i(o.ka_intvl as c_int),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => i(o.ka_cnt as c_int),
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => i(o.user_timeout_ms as c_int),
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => i(s
            .with_stream(|st| st.info().map(|x| c_int::from(x.snd_mss)).ok())
            .flatten()
            .unwrap_or(o.maxseg)),
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => {
            let mut n = match o.congestion {
                Algorithm::NewReno => b"reno".to_vec(),
                Algorithm::Bbr => b"bbr".to_vec(),
                _ => b"cubic".to_vec(),
            };
            n.resize(16, 0);
            n
        }
        (libc::IPPROTO_TCP, libc::TCP_INFO) => tcp_info(s),
        (libc::IPPROTO_IP, libc::IP_TOS) => i(o.tos),
        (libc::IPPROTO_IP, libc::IP_TTL) => i(o.ttl),
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) if s.family == libc::AF_INET6 => i(o.tclass),
        // -1 reads back as the default hop limit, as on Linux.
        (libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS) if s.family == libc::AF_INET6 => {
            i(if o.hops < 0 { 64 } else { o.hops })
        }
        (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER) => i(o.mtu_discover),
        (libc::IPPROTO_IP, libc::IP_RECVERR) => b(o.recverr),
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) if s.family == libc::AF_INET6 => b(o.v6only),
        _ => return Err(libc::ENOPROTOOPT),
    };
    let n = bytes.len().min(room as usize).min(out.len());
    out[..n].copy_from_slice(&bytes[..n]);
    // SAFETY: `v` is writable for `room >= n` bytes; `len` is writable.
    unsafe {
        std::ptr::copy_nonoverlapping(out.as_ptr(), v.cast::<u8>(), n);
        *len = n as socklen_t;
    }
    Ok(())
}

/// Linux's `struct tcp_info` for the connection, with what the engine knows (zeros
/// elsewhere, and all zeros when not connected).
fn tcp_info(s: &Sock) -> Vec<u8> {
    // SAFETY: tcp_info is plain old data; all zeros is a valid value.
    let mut t: libc::tcp_info = unsafe { std::mem::zeroed() };
    if let Some(Ok(i)) = s.with_stream(|st| st.info()) {
        // include/net/tcp_states.h numbering.
        t.tcpi_state = match i.state {
            TcpState::Established => 1,
            TcpState::SynSent => 2,
            TcpState::SynReceived => 3,
            TcpState::FinWait1 => 4,
            TcpState::FinWait2 => 5,
            TcpState::TimeWait => 6,
            TcpState::Closed => 7,
            TcpState::CloseWait => 8,
            TcpState::LastAck => 9,
            TcpState::Listen => 10,
            TcpState::Closing => 11,
        };
        let mss = u32::from(i.snd_mss.max(1));
        t.tcpi_snd_mss = mss;
        t.tcpi_rcv_mss = u32::from(i.rcv_mss);
        // Linux reports ~0 for "not paced".
        t.tcpi_pacing_rate = i.pacing_rate.unwrap_or(u64::MAX);
        t.tcpi_delivery_rate = i.delivery_rate.unwrap_or(0);
        t.tcpi_snd_cwnd = i.cwnd / mss;
        t.tcpi_snd_ssthresh = i.ssthresh / mss;
        t.tcpi_rtt = i.srtt.map_or(0, |d| d.as_micros() as u32);
        t.tcpi_rttvar = i.rttvar.as_micros() as u32;
        t.tcpi_rto = i.rto.as_micros() as u32;
        t.tcpi_total_retrans = i.retransmits.min(u64::from(u32::MAX)) as u32;
        t.tcpi_lost = i.lost;
        t.tcpi_backoff = i.backoff;
        t.tcpi_pmtu = mss + 40;
        t.tcpi_unacked = i.bytes_in_flight / mss;
    }
    // SAFETY: plain old data, read as bytes.
    unsafe {
        std::slice::from_raw_parts(
            (&t as *const libc::tcp_info).cast::<u8>(),
            std::mem::size_of::<libc::tcp_info>(),
        )
    }
    .to_vec()
}
