//! A small HTTP/1.1 server (RFC 9110, RFC 9112) for benchmarks and demos.
//!
//! Routes: `GET|HEAD /bytes/N` answers N bytes of the [`pattern`],
//! sent straight from the precomputed block; with a root directory, any other path is a
//! static file under it (`index.html` for directories). Persistent connections (RFC 9112
//! §9.3) with pipelined requests, `Content-Length` framing, `HEAD`, `400`, `404`, `405`,
//! `431`. Request bodies are not accepted (`400` and close): the routes need none.
//! Request heads are parsed by `httparse` (origin-form and absolute-form targets, RFC 9112
//! §3.2; bare-LF line endings as §2.2 allows; NUL and other control bytes refused).
//!
//! Bounds (issue 13): a request head larger than `max_header_len` is refused with 431
//! (RFC 6585 §5); a head must complete within `head_timeout` of its first byte
//! (slowloris), a connection without events for the idle timeout is closed, and the
//! total and per-source connection limits of [`Limits`] apply. Each session holds its head
//! buffer (allocated at its first byte) and, while serving a file, one 64 KiB read buffer.
//! A connection the server closes is closed lingeringly (RFC 9112 §9.6): the write side
//! is shut down after the response and input is read and discarded, up to `linger_len`
//! bytes and `linger_time`, until the client's FIN, so that the response is not destroyed
//! by a reset. Static files are opened beneath the root with `openat2(RESOLVE_BENEATH)`:
//! no `..` and no symbolic link leads out of it. Files are read on the loop's thread:
//! serve them from a local disk or page cache.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use ulnet_stack::iface::Interface;
use ulnet_stack::tcp::{Event, RecvError, Shutdown, SocketHandle, Tcp};
use ulnet_stack::time::{Duration, Instant};

use super::echo::AppError;
use super::pattern;
use super::server::{Limits, Next, ServerStats, Session, TcpServer, Timeout};
use ulnet::runtime::App;

/// Server settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// Directory of static files; `None` serves only `/bytes/N` and `/`.
    pub root: Option<PathBuf>,
    /// Largest request head (request line and headers) accepted, in bytes.
    pub max_header_len: usize,
    /// Largest N for `/bytes/N`.
    pub max_bytes: u64,
    /// Connection limits and the idle timeout.
    pub limits: Limits,
    /// A request head must be complete this long after its first byte.
    pub head_timeout: Duration,
    /// Longest lingering close (RFC 9112 §9.6) after the server decided to close.
    pub linger_time: Duration,
    /// Most bytes read and discarded by a lingering close.
    pub linger_len: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            root: None,
            max_header_len: 8 * 1024,
            max_bytes: 1 << 40,
            limits: Limits {
                max_sessions: 4096,
                max_per_source: 256,
                idle_timeout: Some(Duration::from_secs(60)),
            },
            head_timeout: Duration::from_secs(10),
            linger_time: Duration::from_secs(5),
            linger_len: 8 << 20,
        }
    }
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HttpStats {
    /// Requests answered (any status).
    pub requests: u64,
    /// Answers with a 2xx status.
    pub ok: u64,
    /// Answers with a 4xx status.
    pub client_errors: u64,
    /// Body bytes sent by finished connections.
    pub body_bytes: u64,
    /// Lingering closes that ended with the client's FIN (the answer delivered).
    pub lingered: u64,
    /// Lingering closes cut short by `linger_len` (reset).
    pub linger_overflows: u64,
}

#[derive(Debug, Default)]
enum Body {
    #[default]
    None,
    Pattern {
        offset: u64,
        len: u64,
    },
    File {
        file: File,
        left: u64,
        start: usize,
        end: usize,
    },
}

/// What every session shares: the settings and the opened root directory.
#[derive(Debug)]
struct Shared {
    cfg: HttpConfig,
    root: Option<OwnedFd>,
}

/// One HTTP connection.
#[derive(Debug)]
pub struct HttpSession {
    shared: Arc<Shared>,
    /// The request head buffer, `max_header_len` once the first byte arrives.
    req: Vec<u8>,
    req_len: usize,
    /// Whether the buffered input may hold a complete head (a line feed arrived since
    /// the last parse), so a head trickling in is not re-parsed per byte.
    maybe_complete: bool,
    /// The path of the request being answered (reused buffer).
    target: String,
    head: String,
    head_off: usize,
    body: Body,
    file_buf: Vec<u8>,
    close_after: bool,
    /// When the first byte of the head being read arrived.
    head_since: Option<Instant>,
    /// Lingering close: when the write side was shut down, and bytes discarded since.
    linger: Option<(Instant, u64)>,
    /// Waiting on the peer with nothing to send.
    waiting: bool,
    /// Requests answered on this connection.
    pub requests: u64,
    /// Body bytes sent on this connection.
    pub body_bytes: u64,
    stats: HttpStats,
}

enum Flush {
    Done,
    Blocked,
    Failed,
}

/// A request method, as far as the routes care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Get,
    Head,
    Other,
}

impl HttpSession {
    fn new(shared: Arc<Shared>) -> Self {
        HttpSession {
            shared,
            req: Vec::new(),
            req_len: 0,
            maybe_complete: false,
            target: String::new(),
            head: String::new(),
            head_off: 0,
            body: Body::None,
            file_buf: Vec::new(),
            close_after: false,
            head_since: None,
            linger: None,
            waiting: false,
            requests: 0,
            body_bytes: 0,
            stats: HttpStats::default(),
        }
    }

    fn flush(&mut self, tcp: &mut Tcp, now: Instant, h: SocketHandle) -> Flush {
        while self.head_off < self.head.len() {
            match tcp.send(now, h, &self.head.as_bytes()[self.head_off..]) {
                Ok(0) => return Flush::Blocked,
                Ok(n) => self.head_off += n,
                Err(_) => return Flush::Failed,
            }
        }
        loop {
            match &mut self.body {
                Body::None => return Flush::Done,
                Body::Pattern { offset, len } => {
                    if *len == 0 {
                        self.body = Body::None;
                        continue;
                    }
                    let want = (*len).min(pattern::MAX_CHUNK as u64) as usize;
                    match tcp.send(now, h, pattern::slice(*offset, want)) {
                        Ok(0) => return Flush::Blocked,
                        Ok(n) => {
                            *offset += n as u64;
                            *len -= n as u64;
                            self.body_bytes += n as u64;
                        }
                        Err(_) => return Flush::Failed,
                    }
                }
                Body::File {
                    file,
                    left,
                    start,
                    end,
                } => {
                    if *start == *end {
                        if *left == 0 {
                            self.body = Body::None;
                            continue;
                        }
                        let want = (*left).min(self.file_buf.len() as u64) as usize;
                        match file.read(&mut self.file_buf[..want]) {
                            // The file shrank under us: the promised length cannot be
                            // kept, so the connection must end (RFC 9112 §6.3).
                            Ok(0) | Err(_) => return Flush::Failed,
                            Ok(n) => {
                                *start = 0;
                                *end = n;
                                *left -= n as u64;
                            }
                        }
                    }
                    match tcp.send(now, h, &self.file_buf[*start..*end]) {
                        Ok(0) => return Flush::Blocked,
                        Ok(n) => {
                            *start += n;
                            self.body_bytes += n as u64;
                        }
                        Err(_) => return Flush::Failed,
                    }
                }
            }
        }
    }

    /// Sets up the answer to a parsed request for `self.target`.
    fn respond(&mut self, method: Method, close: bool) {
        self.requests += 1;
        self.stats.requests += 1;
        self.close_after = close;
        let head_only = match method {
            Method::Get => false,
            Method::Head => true,
            Method::Other => return self.error(405, true),
        };
        // The buffer goes back with its capacity, so steady-state requests allocate nothing.
        let target = std::mem::take(&mut self.target);
        self.route(&target, head_only);
        self.target = target;
    }

    fn route(&mut self, target: &str, head_only: bool) {
        let path = target.split(['?', '#']).next().unwrap_or("");
        if let Some(n) = path.strip_prefix("/bytes/") {
            match strict_decimal(n) {
                Some(n) if n <= self.shared.cfg.max_bytes => {
                    self.ok(n, "application/octet-stream");
                    if !head_only {
                        self.body = Body::Pattern { offset: 0, len: n };
                    }
                }
                _ => self.error(400, false),
            }
            return;
        }
        let Some(root) = &self.shared.root else {
            if path == "/" {
                const INDEX: &str = "ulnet http server: GET /bytes/N\n";
                self.ok(INDEX.len() as u64, "text/plain");
                if !head_only {
                    self.head.push_str(INDEX);
                }
            } else {
                self.error(404, false);
            }
            return;
        };
        match open_static(root, path) {
            Some((file, len)) => {
                self.ok(len, content_type(path));
                if !head_only {
                    if self.file_buf.is_empty() {
                        self.file_buf = vec![0; 64 * 1024];
                    }
                    self.body = Body::File {
                        file,
                        left: len,
                        start: 0,
                        end: 0,
                    };
                }
            }
            None => self.error(404, false),
        }
    }

    /// Reads and discards input after the write side was shut down, until the client's
    /// FIN (RFC 9112 §9.6): closing with unread input would reset the connection and the
    /// client's stack could discard the answer before its application read it.
    fn linger(&mut self, tcp: &mut Tcp, now: Instant, h: SocketHandle) -> Next {
        let Some((_, discarded)) = &mut self.linger else {
            return Next::Close;
        };
        if self.req.is_empty() {
            self.req = vec![0; self.shared.cfg.max_header_len.max(1)];
        }
        loop {
            match tcp.recv(now, h, &mut self.req) {
                Ok(0) => {
                    self.stats.lingered += 1;
                    return Next::Close;
                }
                Ok(n) => {
                    *discarded += n as u64;
                    if *discarded > self.shared.cfg.linger_len {
                        self.stats.linger_overflows += 1;
                        return Next::Abort;
                    }
                }
                Err(RecvError::WouldBlock) => {
                    self.waiting = true;
                    return Next::Open;
                }
                Err(_) => return Next::Abort,
            }
        }
    }

    fn ok(&mut self, len: u64, content_type: &str) {
        self.stats.ok += 1;
        self.start_head(200, "OK", len, content_type);
    }

    fn error(&mut self, status: u16, close: bool) {
        self.stats.client_errors += 1;
        self.close_after |= close;
        let reason = match status {
            400 => "Bad Request",
            404 => "Not Found",
            405 => "Method Not Allowed",
            _ => "Request Header Fields Too Large",
        };
        let body = format!("{status} {reason}\n");
        self.start_head(status, reason, body.len() as u64, "text/plain");
        if status == 405 {
            // RFC 9110 §15.5.6: a 405 names the allowed methods.
            let at = self.head.len() - 2;
            self.head.insert_str(at, "Allow: GET, HEAD\r\n");
        }
        self.head.push_str(&body);
    }

    fn start_head(&mut self, status: u16, reason: &str, len: u64, content_type: &str) {
        self.head.clear();
        self.head_off = 0;
        let conn = if self.close_after {
            "close"
        } else {
            "keep-alive"
        };
        let _ = write!(
            self.head,
            "HTTP/1.1 {status} {reason}\r\nServer: ulnet\r\nContent-Type: {content_type}\r\nContent-Length: {len}\r\nConnection: {conn}\r\n\r\n"
        );
    }
}

impl Session for HttpSession {
    fn drive(&mut self, tcp: &mut Tcp, now: Instant, h: SocketHandle) -> Next {
        loop {
            match self.flush(tcp, now, h) {
                Flush::Done => {}
                Flush::Blocked => {
                    self.waiting = false;
                    return Next::Open;
                }
                Flush::Failed => return Next::Abort,
            }
            if self.close_after {
                if self.linger.is_none() {
                    // FIN after the answer; the read side stays open to drain.
                    if tcp.shutdown(now, h, Shutdown::Write).is_err() {
                        return Next::Abort;
                    }
                    self.linger = Some((now, 0));
                }
                return self.linger(tcp, now, h);
            }
            if self.maybe_complete {
                self.maybe_complete = false;
                match parse_head(&self.req[..self.req_len], &mut self.target) {
                    Ok(Some((len, method, close))) => {
                        self.req.copy_within(len..self.req_len, 0);
                        self.req_len -= len;
                        // Pipelined bytes of the next head: its clock starts when we
                        // next wait for it.
                        self.head_since = None;
                        self.maybe_complete = self.req[..self.req_len].contains(&b'\n');
                        self.respond(method, close);
                        continue;
                    }
                    Ok(None) => {}
                    Err(status) => {
                        self.requests += 1;
                        self.stats.requests += 1;
                        self.error(status, true);
                        continue;
                    }
                }
            }
            let max = self.shared.cfg.max_header_len;
            if self.req_len >= max {
                self.requests += 1;
                self.stats.requests += 1;
                self.error(431, true);
                continue;
            }
            if self.req.is_empty() {
                // An idle connection holds no head buffer until its first byte.
                if !tcp.can_recv(h) {
                    self.waiting = true;
                    return Next::Open;
                }
                self.req = vec![0; max];
            }
            match tcp.recv(now, h, &mut self.req[self.req_len..max]) {
                Ok(0) => return Next::Close,
                Ok(n) => {
                    if self.req_len == 0 {
                        self.head_since = Some(now);
                    }
                    self.maybe_complete |=
                        self.req[self.req_len..self.req_len + n].contains(&b'\n');
                    self.req_len += n;
                }
                Err(RecvError::WouldBlock) => {
                    if self.req_len > 0 && self.head_since.is_none() {
                        self.head_since = Some(now);
                    }
                    self.waiting = true;
                    return Next::Open;
                }
                Err(_) => return Next::Abort,
            }
        }
    }

    fn deadline(&self) -> Option<(Instant, Timeout)> {
        let cfg = &self.shared.cfg;
        if let Some((since, _)) = self.linger {
            return Some((since + cfg.linger_time, Timeout::Linger));
        }
        self.head_since
            .map(|t| (t + cfg.head_timeout, Timeout::Head))
    }

    fn is_idle(&self) -> bool {
        self.waiting
    }
}

/// Most header fields in one request head.
const MAX_FIELDS: usize = 64;

/// Parses the request head at the start of `buf` (RFC 9112 §2-§5) and puts the target's
/// path (origin-form, or the path of an absolute-form target, §3.2.2) in `target`.
/// `Ok(None)` while the head is incomplete; otherwise its length, method and whether the
/// connection closes after the answer.
///
/// # Errors
/// The status to answer before closing: 431 for too many fields, 400 for anything
/// malformed (NUL or other control bytes, whitespace before a colon, an unknown version)
/// or a request with a body.
fn parse_head(buf: &[u8], target: &mut String) -> Result<Option<(usize, Method, bool)>, u16> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut req = httparse::Request::new(&mut fields);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(431),
        Err(_) => return Err(400),
    };
    let (Some(method), Some(raw), Some(version)) = (req.method, req.path, req.version) else {
        return Err(400);
    };
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        _ => Method::Other,
    };
    target.clear();
    if raw.starts_with('/') {
        target.push_str(raw);
    } else if let Some(rest) = absolute_form(raw) {
        // RFC 9112 §3.2.2: the path of an absolute-form target; an empty one is "/".
        match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => target.push_str(&rest[i..]),
            Some(i) => {
                target.push('/');
                target.push_str(&rest[i..]);
            }
            None => target.push('/'),
        }
    } else if method == Method::Other {
        // Asterisk- or authority-form (OPTIONS *, CONNECT): answered 405 below.
    } else {
        return Err(400);
    }
    // RFC 9112 §9.3: HTTP/1.1 persists unless "close"; HTTP/1.0 only with "keep-alive".
    let mut close = version == 0;
    for f in req.headers.iter() {
        let value = std::str::from_utf8(f.value)
            .map_err(|_| 400u16)?
            .trim_matches([' ', '\t']);
        if f.name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    close = true;
                } else if token.eq_ignore_ascii_case("keep-alive") {
                    close = false;
                }
            }
        } else if f.name.eq_ignore_ascii_case("transfer-encoding")
            || (f.name.eq_ignore_ascii_case("content-length") && value != "0")
        {
            return Err(400);
        }
    }
    Ok(Some((len, method, close)))
}

/// The part after `scheme://` of an `http` or `https` absolute-form target.
fn absolute_form(raw: &str) -> Option<&str> {
    let (scheme, rest) = raw.split_once("://")?;
    (scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")).then_some(rest)
}

/// A decimal number of ASCII digits only: no sign, no space, no overflow.
fn strict_decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Decodes `%XX` escapes; `None` for a bad escape.
fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// The file for URL path `path` beneath the directory `root`, with its length; `None`
/// when it does not exist, is not a regular file, or the path would leave the root.
fn open_static(root: &OwnedFd, path: &str) -> Option<(File, u64)> {
    let decoded = String::from_utf8(percent_decode(path)?).ok()?;
    let mut rel = String::with_capacity(decoded.len());
    for seg in decoded.split('/') {
        if seg.is_empty() || seg == "." {
            continue;
        }
        if seg == ".." || seg.contains(['\0', '\\']) {
            return None;
        }
        if !rel.is_empty() {
            rel.push('/');
        }
        rel.push_str(seg);
    }
    let mut fd = open_beneath(root, if rel.is_empty() { "." } else { &rel })?;
    let mut st = rustix::fs::fstat(&fd).ok()?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory {
        rel.push_str(if rel.is_empty() {
            "index.html"
        } else {
            "/index.html"
        });
        fd = open_beneath(root, &rel)?;
        st = rustix::fs::fstat(&fd).ok()?;
    }
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return None;
    }
    Some((File::from(fd), u64::try_from(st.st_size).ok()?))
}

/// Opens `rel` (relative, no `..`) for reading beneath `root`.
///
/// The kernel resolves it with `RESOLVE_BENEATH` (openat2(2), Linux 5.6): a symbolic link
/// that leads out of the root (absolute, or climbing above it) fails with EXDEV, and since
/// the check is the open itself there is no window in which a link swapped after a check
/// could be followed (no TOCTOU, unlike canonicalize-then-open). Links that stay beneath
/// the root are followed. Without openat2 (ENOSYS), each component is opened with
/// `O_NOFOLLOW` from the one before: race-free as well, but no link is followed at all.
/// `O_NONBLOCK` keeps a FIFO placed under the root from blocking the loop in open; it is
/// then refused as not a regular file.
fn open_beneath(root: &OwnedFd, rel: &str) -> Option<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    match rustix::fs::openat2(root, rel, flags, Mode::empty(), resolve) {
        Ok(fd) => Some(fd),
        Err(rustix::io::Errno::NOSYS) => open_each_nofollow(root, rel, flags),
        Err(_) => None,
    }
}

/// [`open_beneath`] without openat2: one `openat(O_NOFOLLOW)` per component.
fn open_each_nofollow(root: &OwnedFd, rel: &str, flags: OFlags) -> Option<OwnedFd> {
    use std::os::fd::AsFd as _;
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut segs = rel.split('/').peekable();
    let mut at: Option<OwnedFd> = None;
    while let Some(seg) = segs.next() {
        let f = if segs.peek().is_some() {
            dir_flags
        } else {
            flags | OFlags::NOFOLLOW
        };
        let base = at.as_ref().map_or(root.as_fd(), |d| d.as_fd());
        at = Some(rustix::fs::openat(base, seg, f, Mode::empty()).ok()?);
    }
    at
}

fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit('.').next().unwrap_or("");
    match ext {
        "html" | "htm" => "text/html",
        "txt" => "text/plain",
        "css" => "text/css",
        "js" => "text/javascript",
        "json" => "application/json",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        _ => "application/octet-stream",
    }
}

/// The HTTP app.
#[derive(Debug)]
pub struct Http {
    tcp: TcpServer<HttpSession>,
    shared: Arc<Shared>,
    stats: HttpStats,
}

impl Http {
    /// Listens on `local` (TCP).
    ///
    /// # Errors
    /// No TCP layer, the listener could not be created, or the root directory could not
    /// be opened.
    pub fn new(
        iface: &mut Interface,
        local: SocketAddr,
        cfg: HttpConfig,
    ) -> Result<Http, AppError> {
        let root = match &cfg.root {
            Some(dir) => Some(open_root(dir)?),
            None => None,
        };
        let mut tcp = TcpServer::new(local, cfg.limits);
        tcp.listen(iface.tcp_mut().ok_or(AppError::NoTcp)?)?;
        Ok(Http {
            tcp,
            shared: Arc::new(Shared { cfg, root }),
            stats: HttpStats::default(),
        })
    }

    /// Totals, open connections included.
    pub fn stats(&self) -> HttpStats {
        let mut s = self.stats;
        for sess in self.tcp.sessions() {
            add(&mut s, sess);
        }
        s
    }

    /// Connection counters (accepted, refused, timed out, ...).
    pub fn tcp_stats(&self) -> ServerStats {
        self.tcp.stats()
    }

    /// Open connections.
    pub fn session_count(&self) -> usize {
        self.tcp.session_count()
    }
}

/// The root directory, held open so that files resolve beneath it.
fn open_root(dir: &Path) -> Result<OwnedFd, AppError> {
    rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| AppError::Root(std::io::Error::from(e).kind()))
}

/// Adds one session's counters to `s`.
fn add(s: &mut HttpStats, sess: &HttpSession) {
    s.requests += sess.stats.requests;
    s.ok += sess.stats.ok;
    s.client_errors += sess.stats.client_errors;
    s.body_bytes += sess.body_bytes;
    s.lingered += sess.stats.lingered;
    s.linger_overflows += sess.stats.linger_overflows;
}

impl App for Http {
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        let Some(t) = iface.tcp_mut() else {
            return;
        };
        let shared = &self.shared;
        let stats = &mut self.stats;
        self.tcp.poll(
            t,
            now,
            events,
            &mut || HttpSession::new(Arc::clone(shared)),
            &mut |s| add(stats, &s),
        );
    }

    fn poll_at(&self) -> Option<Instant> {
        // Idle, head and linger timeouts fire without any event.
        self.tcp.poll_at()
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
