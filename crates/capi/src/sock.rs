//! A ulnet socket behind a kernel descriptor: its state (fresh, listening, connected,
//! UDP), the blocking rules and Linux's errno values for each call.
//!
//! The engine's sockets are always used non-blocking; a blocking call waits on the
//! mirror descriptor (`mirror.rs`) with the kernel's poll, so a signal interrupts it
//! with `EINTR` like a kernel socket call, and SO_RCVTIMEO/SO_SNDTIMEO bound it.

use std::ffi::c_int;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use ulnet_core::net::{ConnectOptions, Source, Stack, TcpListener, TcpStream, UdpSocket};
use ulnet_core::stack::tcp::State as TcpState;

use crate::mirror::{Level, Mirror};
use crate::opts::Opts;
use crate::sys;
use crate::udpshare::{Group, Member};

/// The errno Linux gives for what an `io::Error` of ulnet says.
pub fn errno_of(e: &io::Error) -> c_int {
    if let Some(n) = e.raw_os_error() {
        return n;
    }
    use io::ErrorKind as K;
    match e.kind() {
        K::WouldBlock => libc::EAGAIN,
        K::ConnectionReset => libc::ECONNRESET,
        K::ConnectionRefused => libc::ECONNREFUSED,
        K::ConnectionAborted => libc::ECONNABORTED,
        K::TimedOut => libc::ETIMEDOUT,
        K::AddrInUse => libc::EADDRINUSE,
        K::AddrNotAvailable => libc::EADDRNOTAVAIL,
        K::BrokenPipe => libc::EPIPE,
        K::NotConnected => libc::ENOTCONN,
        K::InvalidInput => libc::EINVAL,
        K::NetworkUnreachable => libc::ENETUNREACH,
        K::HostUnreachable => libc::EHOSTUNREACH,
        K::Unsupported => libc::EOPNOTSUPP,
        K::OutOfMemory => libc::ENOMEM,
        K::Interrupted => libc::EINTR,
        _ => libc::EIO,
    }
}

/// Says once per call name, on standard error, that `call` is not supported on a ulnet
/// socket, and gives the errno to fail with (`EOPNOTSUPP`).
pub fn unsupported(call: &str, what: &str) -> c_int {
    static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let key = format!("{call}/{what}");
    let first = {
        let mut g = SAID.lock().unwrap_or_else(PoisonError::into_inner);
        let first = !g.contains(&key);
        if first {
            g.push(key);
        }
        first
    };
    if first {
        sys::stderr(&format!(
            "ulnet: {}: {call}() on a ulnet socket: {what} is not supported (EOPNOTSUPP)\n",
            sys::program()
        ));
    }
    libc::EOPNOTSUPP
}

/// What a socket is so far.
#[derive(Debug)]
pub(crate) enum State {
    /// Made by socket(2); maybe bound (the address waits for listen or connect, or
    /// for the first datagram).
    Fresh,
    Listener(TcpListener),
    Stream(TcpStream),
    Udp(UdpSocket),
    /// One of several UDP sockets on a port (`udpshare.rs`).
    Shared(Shared),
}

/// A UDP socket's place in a shared port; leaves the group when the socket goes.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    group: Arc<Group>,
    member: Arc<Member>,
}

/// Leaves the group when the last handle of the membership goes (the socket closed).
#[derive(Debug)]
struct Membership(Shared);

impl Drop for Membership {
    fn drop(&mut self) {
        self.0.group.leave(&self.0.member);
    }
}

/// One engine object, taken out of the state's lock for one call.
enum Obj {
    Fresh,
    Listener(TcpListener),
    Stream(TcpStream),
    Udp(UdpSocket),
    Shared(Shared),
}

/// The UDP sockets bound so far, by port, so a second bind to a port can find the
/// first socket and share it (`udpshare.rs`); dead entries are pruned at each bind.
static UDP_BOUND: Mutex<Vec<(u16, Weak<Sock>)>> = Mutex::new(Vec::new());

/// The TCP sockets holding a port by bind(2) or listen(2), so a second bind finds it
/// taken (the engine knows a port only once it listens or connects); dead entries are
/// pruned at each bind.
static TCP_BOUND: Mutex<Vec<(u16, Weak<Sock>)>> = Mutex::new(Vec::new());

/// Linux's default `net.ipv4.ip_local_port_range`, where bind(2) to port 0 picks.
const EPHEMERAL: std::ops::RangeInclusive<u16> = 32768..=60999;

/// A ulnet socket; one per socket(2) or accept(2), shared by every descriptor number
/// that names it (dup).
#[derive(Debug)]
pub struct Sock {
    /// AF_INET or AF_INET6: how addresses are shown to the program.
    pub family: c_int,
    /// SOCK_STREAM (TCP) rather than SOCK_DGRAM (UDP).
    pub stream: bool,
    pub(crate) mirror: Arc<Mirror>,
    stack: Stack,
    nonblocking: AtomicBool,
    /// listen(2) succeeded (readable without the state's lock, which bind holds while
    /// it looks at other sockets).
    listening: AtomicBool,
    state: Mutex<State>,
    bound: Mutex<Option<SocketAddr>>,
    pub(crate) opts: Mutex<Opts>,
    /// This socket, for the table of bound UDP ports.
    me: Weak<Sock>,
    /// Set when this socket is a member of a shared port.
    membership: Mutex<Option<Arc<Membership>>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `mirror` for `ev` until `deadline`.
fn wait(mirror: &Mirror, ev: i16, deadline: Option<Instant>) -> Result<(), c_int> {
    let left = match deadline {
        Some(d) => {
            let now = Instant::now();
            if now >= d {
                return Err(libc::EAGAIN);
            }
            Some(d - now)
        }
        None => None,
    };
    mirror.wait(ev, left)
}

impl Sock {
    /// A fresh socket of `family` (AF_INET, AF_INET6), TCP when `stream`; returns it
    /// with the program's descriptor (close-on-exec in the kernel, see `mirror.rs`).
    ///
    /// # Errors
    /// The errno of making the descriptors.
    pub fn new(
        stack: &Stack,
        family: c_int,
        stream: bool,
        nonblocking: bool,
    ) -> Result<(Arc<Sock>, c_int), c_int> {
        let (mirror, fd) = Mirror::new()?;
        let s = Arc::new_cyclic(|me| Sock {
            family,
            stream,
            mirror: Arc::new(mirror),
            stack: stack.clone(),
            nonblocking: AtomicBool::new(false),
            listening: AtomicBool::new(false),
            state: Mutex::new(State::Fresh),
            bound: Mutex::new(None),
            opts: Mutex::new(Opts::default()),
            me: me.clone(),
            membership: Mutex::new(None),
        });
        if nonblocking {
            s.set_nonblocking(fd, true)?;
        }
        Ok((s, fd))
    }

    /// Wraps an accepted or connected engine socket.
    fn adopt(&self, state: State, nonblocking: bool) -> Result<(Arc<Sock>, c_int), c_int> {
        let (s, fd) = Sock::new(&self.stack, self.family, self.stream, nonblocking)?;
        *lock(&s.opts) = lock(&self.opts).clone();
        *lock(&s.state) = state;
        s.watch()?;
        s.apply_opts();
        Ok((s, fd))
    }

    /// The stack this socket lives in.
    pub fn stack(&self) -> &Stack {
        &self.stack
    }

    fn obj(&self) -> Obj {
        match &*lock(&self.state) {
            State::Fresh => Obj::Fresh,
            State::Listener(l) => Obj::Listener(l.try_clone().expect("never fails")),
            State::Stream(s) => Obj::Stream(s.try_clone().expect("never fails")),
            State::Udp(u) => Obj::Udp(u.try_clone().expect("never fails")),
            State::Shared(s) => Obj::Shared(s.clone()),
        }
    }

    /// Starts mirroring the engine socket's readiness onto the descriptor.
    fn watch(&self) -> Result<(), c_int> {
        let m = Arc::clone(&self.mirror);
        let r = match &*lock(&self.state) {
            // A shared port's group watches its engine socket.
            State::Fresh | State::Shared(_) => return Ok(()),
            State::Listener(l) => self
                .stack
                .watch(l, Arc::new(move |ev, e| m.set(Level::of(ev, true), e))),
            State::Stream(s) => self
                .stack
                .watch(s, Arc::new(move |ev, e| m.set(Level::of(ev, false), e))),
            State::Udp(u) => self
                .stack
                .watch(u, Arc::new(move |ev, e| m.set(Level::of(ev, false), e))),
        };
        r.map_err(|e| errno_of(&e))
    }

    /// Non-blocking mode (O_NONBLOCK), kept on the program's descriptor too so that
    /// F_GETFL tells the truth.
    ///
    /// # Errors
    /// The errno of fcntl on `fd`.
    pub fn set_nonblocking(&self, fd: c_int, on: bool) -> Result<(), c_int> {
        let fl = sys::fcntl(fd, libc::F_GETFL, 0)?;
        let fl = if on {
            fl | libc::O_NONBLOCK
        } else {
            fl & !libc::O_NONBLOCK
        };
        sys::fcntl(fd, libc::F_SETFL, libc::c_long::from(fl))?;
        self.nonblocking.store(on, Ordering::Relaxed);
        Ok(())
    }

    /// Records the O_NONBLOCK flag the program set through fcntl(F_SETFL).
    pub fn note_flags(&self, fl: c_int) {
        self.nonblocking
            .store(fl & libc::O_NONBLOCK != 0, Ordering::Relaxed);
    }

    fn nb(&self, flags: c_int) -> bool {
        self.nonblocking.load(Ordering::Relaxed) || flags & libc::MSG_DONTWAIT != 0
    }

    fn check_ip(&self, a: SocketAddr) -> Result<SocketAddr, c_int> {
        let a = crate::addr::unmap(a);
        if self.family == libc::AF_INET && !a.is_ipv4() {
            return Err(libc::EAFNOSUPPORT);
        }
        Ok(a)
    }

    /// bind(2).
    ///
    /// # Errors
    /// `EINVAL` when bound already; `EADDRNOTAVAIL` for an address that is not the
    /// stack's; what the engine says for UDP (`EADDRINUSE`).
    pub fn bind(&self, a: SocketAddr) -> Result<(), c_int> {
        let a = self.check_ip(a)?;
        if !a.ip().is_unspecified() && a.ip() != self.stack.local_ip() {
            return Err(libc::EADDRNOTAVAIL);
        }
        let mut st = lock(&self.state);
        let mut b = lock(&self.bound);
        if b.is_some() || !matches!(*st, State::Fresh) {
            return Err(libc::EINVAL);
        }
        if !self.stream {
            let u = match UdpSocket::bind(&self.stack, a) {
                Ok(u) => u,
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                    drop((st, b));
                    return self.share(a);
                }
                Err(e) => return Err(errno_of(&e)),
            };
            u.set_nonblocking(true).map_err(|e| errno_of(&e))?;
            let ip = lock(&self.opts).ip_fields();
            u.set_ip_fields(ip).map_err(|e| errno_of(&e))?;
            let port = u.local_addr().map_or(0, |l| l.port());
            *st = State::Udp(u);
            drop(st);
            *b = Some(a);
            drop(b);
            self.note_udp_port(port);
            return self.watch();
        }
        // TCP: the port is taken now, as Linux's `inet_csk_get_port` does, so a bound
        // socket's port is known (getsockname) and a second bind fails here.
        let port = self.claim_tcp_port(a.port())?;
        *b = Some(SocketAddr::new(a.ip(), port));
        Ok(())
    }

    /// Takes TCP port `port` for this socket (0: a free one of the ephemeral range,
    /// from a random start as RFC 6056 §3.3.1 asks).
    ///
    /// # Errors
    /// `EADDRINUSE` when another socket holds it and they may not share it;
    /// `EADDRNOTAVAIL` when no ephemeral port is free.
    fn claim_tcp_port(&self, port: u16) -> Result<u16, c_int> {
        let mut t = lock(&TCP_BOUND);
        t.retain(|(_, w)| w.strong_count() > 0);
        let taken = |p: u16| {
            t.iter()
                .filter(|(q, _)| *q == p)
                .filter_map(|(_, w)| w.upgrade())
                .any(|o| !std::ptr::eq(Arc::as_ptr(&o), self) && !self.may_share_tcp(&o))
        };
        let port = if port != 0 {
            if taken(port) {
                return Err(libc::EADDRINUSE);
            }
            port
        } else {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(self as *const Sock as usize);
            let n = u32::from(EPHEMERAL.end() - EPHEMERAL.start()) + 1;
            let start = (h.finish() % u64::from(n)) as u32;
            (0..n)
                .map(|i| EPHEMERAL.start() + ((start + i) % n) as u16)
                .find(|&p| t.iter().all(|(q, _)| *q != p))
                .ok_or(libc::EADDRNOTAVAIL)?
        };
        t.push((port, self.me.clone()));
        Ok(port)
    }

    /// Whether this TCP socket and `other` may hold one port: both set SO_REUSEADDR and
    /// neither listens, or both set SO_REUSEPORT (Linux's `inet_csk_bind_conflict`).
    fn may_share_tcp(&self, other: &Sock) -> bool {
        let (a, b) = (lock(&self.opts).clone(), lock(&other.opts).clone());
        let listening = |s: &Sock| s.listening.load(Ordering::Relaxed);
        (a.reuseaddr && b.reuseaddr && !listening(self) && !listening(other))
            || (a.reuseport && b.reuseport)
    }

    fn note_udp_port(&self, port: u16) {
        let mut t = lock(&UDP_BOUND);
        t.retain(|(_, w)| w.strong_count() > 0);
        t.push((port, self.me.clone()));
    }

    /// Whether this socket and `other` may share a port: both asked for SO_REUSEADDR,
    /// or both for SO_REUSEPORT (Linux's rule for UDP, `udp_lib_lport_inuse`).
    fn may_share(&self, other: &Sock) -> bool {
        let (a, b) = (lock(&self.opts).clone(), lock(&other.opts).clone());
        (a.reuseaddr && b.reuseaddr) || (a.reuseport && b.reuseport)
    }

    /// bind(2) of a UDP socket to a port a ulnet UDP socket has: shares it when both
    /// asked for reuse (`udpshare.rs`), else `EADDRINUSE`.
    fn share(&self, a: SocketAddr) -> Result<(), c_int> {
        let port = a.port();
        let owner = lock(&UDP_BOUND)
            .iter()
            .filter(|(p, _)| *p == port)
            .filter_map(|(_, w)| w.upgrade())
            .find(|o| !std::ptr::eq(Arc::as_ptr(o), self));
        let Some(owner) = owner.filter(|o| self.may_share(o)) else {
            return Err(libc::EADDRINUSE);
        };
        let group = {
            let mut ost = lock(&owner.state);
            match &*ost {
                State::Shared(s) => Arc::clone(&s.group),
                State::Udp(u) => {
                    let reuseport = lock(&owner.opts).reuseport;
                    let u = u.try_clone().expect("never fails");
                    let (g, m) = Group::new(&self.stack, u, Arc::clone(&owner.mirror), reuseport)?;
                    let sh = Shared {
                        group: Arc::clone(&g),
                        member: m,
                    };
                    *lock(&owner.membership) = Some(Arc::new(Membership(sh.clone())));
                    *ost = State::Shared(sh);
                    g
                }
                _ => return Err(libc::EADDRINUSE),
            }
        };
        let m = group.join(Arc::clone(&self.mirror), lock(&self.opts).reuseport);
        let sh = Shared { group, member: m };
        *lock(&self.membership) = Some(Arc::new(Membership(sh.clone())));
        *lock(&self.state) = State::Shared(sh);
        *lock(&self.bound) = Some(a);
        self.note_udp_port(port);
        Ok(())
    }

    /// listen(2): the listener is made here (ulnet binds and listens in one step), so a
    /// taken address is reported here rather than by bind.
    ///
    /// # Errors
    /// `EOPNOTSUPP` for UDP; `EINVAL` when connected; `EADDRINUSE`.
    pub fn listen(&self, _backlog: c_int) -> Result<(), c_int> {
        if !self.stream {
            return Err(libc::EOPNOTSUPP);
        }
        let mut st = lock(&self.state);
        match &*st {
            State::Listener(_) => return Ok(()),
            State::Stream(_) | State::Udp(_) | State::Shared(_) => return Err(libc::EINVAL),
            State::Fresh => {}
        }
        let bound = *lock(&self.bound);
        if let Some(b) = bound {
            let reuseport = lock(&self.opts).reuseport;
            // Listening on a port other sockets share by SO_REUSEADDR is a conflict
            // again (Linux checks at listen(2)).
            let others = lock(&TCP_BOUND)
                .iter()
                .filter(|(p, _)| *p == b.port())
                .filter_map(|(_, w)| w.upgrade())
                .filter(|o| !std::ptr::eq(Arc::as_ptr(o), self))
                .any(|o| !(reuseport && lock(&o.opts).reuseport));
            if others {
                return Err(libc::EADDRINUSE);
            }
        }
        let a = bound.unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
        let l = TcpListener::bind(&self.stack, a).map_err(|e| errno_of(&e))?;
        l.set_nonblocking(true).map_err(|e| errno_of(&e))?;
        // Accepted connections inherit the listener's options before their SYN-ACK
        // (Linux clones the listener's socket: buffer sizes, hence the window scale).
        for o in lock(&self.opts).engine_options() {
            l.set_option(o).map_err(|e| errno_of(&e))?;
        }
        *lock(&self.bound) = l.local_addr().ok();
        if bound.is_none() {
            if let Ok(la) = l.local_addr() {
                lock(&TCP_BOUND).push((la.port(), self.me.clone()));
            }
        }
        *st = State::Listener(l);
        self.listening.store(true, Ordering::Relaxed);
        drop(st);
        self.watch()
    }

    /// accept4(2): a new socket and descriptor for the next connection, and its peer.
    ///
    /// # Errors
    /// `EINVAL` when not listening; `EAGAIN` when non-blocking and none waits;
    /// `EINTR`.
    pub fn accept(&self, flags: c_int) -> Result<(Arc<Sock>, c_int, SocketAddr), c_int> {
        let Obj::Listener(l) = self.obj() else {
            return Err(libc::EINVAL);
        };
        let nb = self.nb(0);
        let (s, peer) = self.run(nb, libc::POLLIN, None, &l, || l.accept())?;
        s.set_nonblocking(true).map_err(|e| errno_of(&e))?;
        let (sock, fd) = self.adopt(State::Stream(s), flags & libc::SOCK_NONBLOCK != 0)?;
        Ok((sock, fd, peer))
    }

    /// Runs `op` until it does not block: waits on the mirror for `ev` unless `nb`,
    /// bounded by `timeout`; refreshes the mirror after each try.
    fn run<T>(
        &self,
        nb: bool,
        ev: i16,
        timeout: Option<Duration>,
        src: &dyn Source,
        mut op: impl FnMut() -> io::Result<T>,
    ) -> Result<T, c_int> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let r = op();
            self.stack.refresh(src);
            match r {
                Ok(v) => return Ok(v),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if nb {
                        return Err(libc::EAGAIN);
                    }
                    wait(&self.mirror, ev, deadline)?;
                }
                Err(e) => return Err(errno_of(&e)),
            }
        }
    }

    fn udp(&self) -> Result<UdpSocket, c_int> {
        if let Obj::Udp(u) = self.obj() {
            return Ok(u);
        }
        // The first datagram binds an unbound socket to any address and a free port.
        let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
        match self.bind(any) {
            Ok(()) | Err(libc::EINVAL) => {}
            Err(e) => return Err(e),
        }
        match self.obj() {
            Obj::Udp(u) => Ok(u),
            _ => Err(libc::EINVAL),
        }
    }

    /// connect(2).
    ///
    /// # Errors
    /// `EINPROGRESS` (non-blocking TCP), `EALREADY`, `EISCONN`, the connection's
    /// error (`ECONNREFUSED`, `ETIMEDOUT`, ...), `EINTR` (the handshake goes on).
    pub fn connect(&self, dst: SocketAddr) -> Result<(), c_int> {
        let dst = self.check_ip(dst)?;
        if !dst.is_ipv4() || dst.is_ipv4() != self.stack.local_ip().is_ipv4() {
            return Err(libc::ENETUNREACH);
        }
        if !self.stream {
            if let Obj::Shared(sh) = self.obj() {
                sh.member.connect(dst);
                return Ok(());
            }
            let u = self.udp()?;
            u.connect(dst).map_err(|e| errno_of(&e))?;
            self.stack.refresh(&u);
            return Ok(());
        }
        let s = match self.obj() {
            Obj::Listener(_) | Obj::Udp(_) | Obj::Shared(_) => return Err(libc::EISCONN),
            Obj::Stream(s) => {
                return match self.connect_state(&s)? {
                    true => Err(libc::EISCONN),
                    false => Err(libc::EALREADY),
                }
            }
            Obj::Fresh => {
                // The options set so far shape the SYN (window scale, MSS); a bound
                // address is the connection's local end.
                let mut how = ConnectOptions::new().nonblocking(true);
                let bound = *lock(&self.bound);
                if let Some(b) = bound {
                    how = how.local(b);
                }
                for o in lock(&self.opts).engine_options() {
                    how = how.option(o);
                }
                let s = TcpStream::connect_with(&self.stack, dst, &how).map_err(|e| {
                    match errno_of(&e) {
                        // Linux: the bound port already has a connection to `dst`.
                        libc::EADDRINUSE if bound.is_some() => libc::EADDRNOTAVAIL,
                        n => n,
                    }
                })?;
                *lock(&self.state) = State::Stream(s.try_clone().expect("never fails"));
                self.watch()?;
                self.apply_opts();
                s
            }
        };
        if self.nb(0) {
            return Err(libc::EINPROGRESS);
        }
        let deadline = lock(&self.opts).sndtimeo.map(|t| Instant::now() + t);
        loop {
            if self.connect_state(&s)? {
                return Ok(());
            }
            wait(&self.mirror, libc::POLLOUT, deadline).map_err(|e| match e {
                libc::EAGAIN => libc::EINPROGRESS,
                e => e,
            })?;
        }
    }

    /// Whether the handshake is done (`Err` with its error when it failed).
    fn connect_state(&self, s: &TcpStream) -> Result<bool, c_int> {
        if let Some(e) = s.take_error().map_err(|e| errno_of(&e))? {
            return Err(errno_of(&e));
        }
        match s.info() {
            Ok(i) => Ok(!matches!(i.state, TcpState::SynSent)),
            Err(e) => Err(errno_of(&e)),
        }
    }

    /// recv(2)/recvfrom(2) into `buf`: bytes and, for UDP, the sender.
    ///
    /// # Errors
    /// `ENOTCONN`; `EAGAIN`; `EINTR`; the connection's error; `EOPNOTSUPP` for
    /// MSG_OOB, MSG_PEEK on UDP and MSG_ERRQUEUE.
    pub fn recv(&self, buf: &mut [u8], flags: c_int) -> Result<(usize, Option<SocketAddr>), c_int> {
        let known = libc::MSG_DONTWAIT
            | libc::MSG_PEEK
            | libc::MSG_WAITALL
            | libc::MSG_NOSIGNAL
            | libc::MSG_CMSG_CLOEXEC
            | libc::MSG_TRUNC;
        if flags & !known != 0 {
            return Err(unsupported("recv", "this flag (MSG_OOB, MSG_ERRQUEUE)"));
        }
        let nb = self.nb(flags);
        let timeout = lock(&self.opts).rcvtimeo;
        match self.obj() {
            Obj::Fresh | Obj::Listener(_) => Err(libc::ENOTCONN),
            Obj::Stream(s) => {
                if flags & libc::MSG_PEEK != 0 {
                    return self
                        .run(nb, libc::POLLIN, timeout, &s, || s.peek(buf))
                        .map(|n| (n, None));
                }
                let mut got = self.run(nb, libc::POLLIN, timeout, &s, || (&s).read(buf))?;
                // MSG_WAITALL: fill the buffer unless EOF, an error or a signal stops it.
                while flags & libc::MSG_WAITALL != 0 && !nb && got > 0 && got < buf.len() {
                    match self.run(false, libc::POLLIN, timeout, &s, || {
                        (&s).read(&mut buf[got..])
                    }) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got += n,
                    }
                }
                Ok((got, None))
            }
            Obj::Udp(u) => {
                if flags & libc::MSG_PEEK != 0 {
                    return Err(unsupported("recv", "MSG_PEEK on UDP"));
                }
                let (n, from) = self.run(nb, libc::POLLIN, timeout, &u, || u.recv_from(buf))?;
                Ok((n, Some(from)))
            }
            Obj::Shared(sh) => {
                if flags & libc::MSG_PEEK != 0 {
                    return Err(unsupported("recv", "MSG_PEEK on UDP"));
                }
                let deadline = timeout.map(|t| Instant::now() + t);
                loop {
                    match sh.member.try_recv(&sh.group, buf) {
                        Err(libc::EAGAIN) if !nb => {
                            wait(sh.member.mirror(), libc::POLLIN, deadline)?;
                        }
                        Ok((n, from)) => return Ok((n.min(buf.len()), Some(from))),
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }

    /// send(2)/sendto(2) of `buf` (to `dst` for UDP). A blocking TCP send returns once
    /// all is queued, or with what was queued when a signal or timeout stops it.
    /// `EPIPE` raises SIGPIPE unless MSG_NOSIGNAL, as Linux does.
    ///
    /// # Errors
    /// `EPIPE`, `ECONNRESET`, `EAGAIN`, `EINTR`, `EDESTADDRREQ`, `EMSGSIZE`,
    /// `EOPNOTSUPP` for MSG_OOB.
    pub fn send(&self, buf: &[u8], flags: c_int, dst: Option<SocketAddr>) -> Result<usize, c_int> {
        let known = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL | libc::MSG_MORE | libc::MSG_EOR;
        if flags & !known != 0 {
            return Err(unsupported(
                "send",
                "this flag (MSG_OOB, MSG_CONFIRM, MSG_ZEROCOPY)",
            ));
        }
        let r = self.send_inner(buf, flags, dst);
        if r == Err(libc::EPIPE) && flags & libc::MSG_NOSIGNAL == 0 {
            // SAFETY: signalling the calling thread, as the kernel's send does.
            unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGPIPE) };
        }
        r
    }

    fn send_inner(
        &self,
        buf: &[u8],
        flags: c_int,
        dst: Option<SocketAddr>,
    ) -> Result<usize, c_int> {
        let nb = self.nb(flags);
        let timeout = lock(&self.opts).sndtimeo;
        match self.obj() {
            Obj::Fresh | Obj::Listener(_) if self.stream => Err(libc::EPIPE),
            Obj::Stream(s) => {
                let mut done = 0;
                loop {
                    match self.run(nb, libc::POLLOUT, timeout, &s, || (&s).write(&buf[done..])) {
                        Ok(n) => done += n,
                        Err(e) if done == 0 => return Err(e),
                        Err(_) => return Ok(done),
                    }
                    if done == buf.len() || nb {
                        return Ok(done);
                    }
                }
            }
            Obj::Shared(sh) => {
                let u = sh.group.sock();
                let dst = match dst {
                    Some(d) => self.check_ip(d)?,
                    None => sh.member.peer().ok_or(libc::EDESTADDRREQ)?,
                };
                if buf.len() > 65507 {
                    return Err(libc::EMSGSIZE);
                }
                self.run(nb, libc::POLLOUT, timeout, u, || u.send_to(buf, dst))
            }
            _ => {
                let u = self.udp()?;
                let dst = match dst {
                    Some(d) => self.check_ip(d)?,
                    None => u.peer_addr().map_err(|_| libc::EDESTADDRREQ)?,
                };
                if buf.len() > 65507 {
                    return Err(libc::EMSGSIZE);
                }
                self.run(nb, libc::POLLOUT, timeout, &u, || u.send_to(buf, dst))
            }
        }
    }

    /// shutdown(2).
    ///
    /// # Errors
    /// `ENOTCONN` unless connected; `EINVAL` for a bad `how`.
    pub fn shutdown(&self, how: c_int) -> Result<(), c_int> {
        let how = match how {
            libc::SHUT_RD => Shutdown::Read,
            libc::SHUT_WR => Shutdown::Write,
            libc::SHUT_RDWR => Shutdown::Both,
            _ => return Err(libc::EINVAL),
        };
        match self.obj() {
            Obj::Stream(s) => {
                let r = s.shutdown(how).map_err(|e| errno_of(&e));
                self.stack.refresh(&s);
                r
            }
            _ => Err(libc::ENOTCONN),
        }
    }

    /// getsockname(2).
    pub fn local_addr(&self) -> SocketAddr {
        let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
        match self.obj() {
            Obj::Stream(s) => s.local_addr().unwrap_or(any),
            Obj::Udp(u) => u.local_addr().unwrap_or(any),
            Obj::Shared(sh) => sh.group.sock().local_addr().unwrap_or(any),
            Obj::Listener(l) => l.local_addr().unwrap_or(any),
            Obj::Fresh => lock(&self.bound).unwrap_or(any),
        }
    }

    /// getpeername(2).
    ///
    /// # Errors
    /// `ENOTCONN`.
    pub fn peer_addr(&self) -> Result<SocketAddr, c_int> {
        match self.obj() {
            Obj::Stream(s) => match s.info() {
                Ok(i) if !matches!(i.state, TcpState::SynSent | TcpState::Closed) => {
                    s.peer_addr().map_err(|e| errno_of(&e))
                }
                _ => Err(libc::ENOTCONN),
            },
            Obj::Udp(u) => u.peer_addr().map_err(|_| libc::ENOTCONN),
            Obj::Shared(sh) => sh.member.peer().ok_or(libc::ENOTCONN),
            _ => Err(libc::ENOTCONN),
        }
    }

    /// Bytes readable now (FIONREAD): the buffered stream bytes up to 64 KiB, or for
    /// UDP whether a datagram waits (1) or not (0).
    pub fn readable_len(&self) -> Result<c_int, c_int> {
        match self.obj() {
            Obj::Stream(s) => {
                let mut buf = [0u8; 65536];
                match s.peek(&mut buf) {
                    Ok(n) => Ok(n as c_int),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                    Err(e) => Err(errno_of(&e)),
                }
            }
            Obj::Udp(u) => Ok(c_int::from(
                self.stack.readiness(&u).is_some_and(|e| e.readable),
            )),
            Obj::Shared(sh) => Ok(c_int::from(sh.member.has_datagram())),
            Obj::Listener(_) => Err(libc::EINVAL),
            Obj::Fresh => Ok(0),
        }
    }

    /// Whether this is a listening socket (SO_ACCEPTCONN).
    pub fn is_listener(&self) -> bool {
        matches!(*lock(&self.state), State::Listener(_))
    }

    /// The pending error (SO_ERROR), taken.
    pub fn take_error(&self) -> c_int {
        match self.obj() {
            Obj::Stream(s) => match s.take_error() {
                Ok(Some(e)) => errno_of(&e),
                _ => 0,
            },
            _ => 0,
        }
    }

    /// Puts the recorded options onto the engine's connection.
    pub(crate) fn apply_opts(&self) {
        if let Obj::Stream(s) = self.obj() {
            let o = lock(&self.opts).clone();
            o.apply(&s);
        }
    }

    /// Puts IP_TOS/IP_TTL onto a UDP socket's engine socket. A shared port's members
    /// send through one engine socket: there the fields are recorded but not applied
    /// (one member's TOS would become every member's).
    pub(crate) fn set_udp_ip_fields(&self, ip: ulnet_core::net::IpFields) {
        if let Obj::Udp(u) = self.obj() {
            let _ = u.set_ip_fields(ip);
        }
    }

    /// Runs `f` with the listener, if listening.
    pub(crate) fn with_listener<R>(&self, f: impl FnOnce(&TcpListener) -> R) -> Option<R> {
        match self.obj() {
            Obj::Listener(l) => Some(f(&l)),
            _ => None,
        }
    }

    /// Runs `f` with the connection, if connected.
    pub(crate) fn with_stream<R>(&self, f: impl FnOnce(&TcpStream) -> R) -> Option<R> {
        match self.obj() {
            Obj::Stream(s) => Some(f(&s)),
            _ => None,
        }
    }
}
