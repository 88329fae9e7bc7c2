//! A small HTTP/1.1 server (RFC 9110, RFC 9112) for benchmarks and demos.
//!
//! Routes: `GET|HEAD /bytes/N` answers N bytes of the [`pattern`](super::pattern),
//! sent straight from the precomputed block; with a root directory, any other path is a
//! static file under it (`index.html` for directories). Persistent connections (RFC 9112
//! §9.3) with pipelined requests, `Content-Length` framing, `HEAD`, `400`, `404`, `405`,
//! `431`. Request bodies are not accepted (`400` and close): the routes need none.
//!
//! Bounds: a request head larger than `max_header_len` is refused with 431 (RFC 6585
//! §5) and the connection closed, so no peer can make a session grow; each session holds
//! its head buffer and, while serving a file, one 64 KiB read buffer. Files are read on
//! the loop's thread: serve them from a local disk or page cache.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ulnet_stack::iface::Interface;
use ulnet_stack::tcp::{Event, RecvError, SocketHandle, Tcp};
use ulnet_stack::time::Instant;

use super::echo::AppError;
use super::pattern;
use super::server::{Next, ServerStats, Session, TcpServer};
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
    /// Most connections at once.
    pub max_sessions: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            root: None,
            max_header_len: 8 * 1024,
            max_bytes: 1 << 40,
            max_sessions: 1024,
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

/// One HTTP connection.
#[derive(Debug)]
pub struct HttpSession {
    cfg: Arc<HttpConfig>,
    req: Box<[u8]>,
    req_len: usize,
    head: String,
    head_off: usize,
    body: Body,
    file_buf: Vec<u8>,
    close_after: bool,
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

impl HttpSession {
    fn new(cfg: Arc<HttpConfig>) -> Self {
        let len = cfg.max_header_len;
        HttpSession {
            cfg,
            req: vec![0; len].into_boxed_slice(),
            req_len: 0,
            head: String::new(),
            head_off: 0,
            body: Body::None,
            file_buf: Vec::new(),
            close_after: false,
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

    /// Sets up the answer to the request head `head` (without the blank line).
    fn respond(&mut self, head: &[u8]) {
        self.requests += 1;
        self.stats.requests += 1;
        let req = match parse_request(head) {
            Ok(r) => r,
            Err(status) => return self.error(status, true),
        };
        self.close_after = req.close;
        if req.method != "GET" && req.method != "HEAD" {
            return self.error(405, true);
        }
        let head_only = req.method == "HEAD";
        let path = req.target.split(['?', '#']).next().unwrap_or("");
        if let Some(n) = path.strip_prefix("/bytes/") {
            match n.parse::<u64>() {
                Ok(n) if n <= self.cfg.max_bytes => {
                    self.ok(n, "application/octet-stream");
                    if !head_only {
                        self.body = Body::Pattern { offset: 0, len: n };
                    }
                }
                _ => self.error(400, false),
            }
            return;
        }
        let Some(root) = self.cfg.root.clone() else {
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
        match open_static(&root, path) {
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
                Flush::Blocked => return Next::Open,
                Flush::Failed => return Next::Abort,
            }
            if self.close_after {
                return Next::Close;
            }
            if let Some(end) = head_end(&self.req[..self.req_len]) {
                let head = self.req[..end].to_vec();
                self.req.copy_within(end + 4..self.req_len, 0);
                self.req_len -= end + 4;
                self.respond(&head);
                continue;
            }
            if self.req_len == self.req.len() {
                self.requests += 1;
                self.stats.requests += 1;
                self.error(431, true);
                continue;
            }
            match tcp.recv(now, h, &mut self.req[self.req_len..]) {
                Ok(0) => return Next::Close,
                Ok(n) => self.req_len += n,
                Err(RecvError::WouldBlock) => return Next::Open,
                Err(_) => return Next::Abort,
            }
        }
    }
}

/// Where the blank line ending a request head starts.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n")
}

struct Request<'a> {
    method: &'a str,
    target: &'a str,
    close: bool,
}

/// Parses a request head (RFC 9112 §3 request line, §5 fields); `Err(400)` for
/// anything malformed or with a body.
fn parse_request(head: &[u8]) -> Result<Request<'_>, u16> {
    let text = std::str::from_utf8(head).map_err(|_| 400u16)?;
    let mut lines = text.split("\r\n");
    let line = lines.next().ok_or(400u16)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(400);
    };
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        _ => return Err(400),
    };
    if method.is_empty() || !target.starts_with('/') {
        return Err(400);
    }
    let mut close = http10;
    for field in lines {
        let (name, value) = field.split_once(':').ok_or(400u16)?;
        if name.is_empty() || name.ends_with([' ', '\t']) {
            // RFC 9112 §5.1: no whitespace between the name and the colon.
            return Err(400);
        }
        let value = value.trim_matches([' ', '\t']);
        if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    close = true;
                } else if token.eq_ignore_ascii_case("keep-alive") {
                    close = false;
                }
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            || (name.eq_ignore_ascii_case("content-length") && value != "0")
        {
            return Err(400);
        }
    }
    Ok(Request {
        method,
        target,
        close,
    })
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

/// The file for URL path `path` under `root`, with its length; `None` when it does not
/// exist or the path tries to leave the root.
fn open_static(root: &Path, path: &str) -> Option<(File, u64)> {
    let decoded = String::from_utf8(percent_decode(path)?).ok()?;
    let mut full = root.to_path_buf();
    for seg in decoded.split('/') {
        if seg.is_empty() || seg == "." {
            continue;
        }
        if seg == ".." || seg.contains(['\0', '\\']) {
            return None;
        }
        full.push(seg);
    }
    let mut meta = std::fs::metadata(&full).ok()?;
    if meta.is_dir() {
        full.push("index.html");
        meta = std::fs::metadata(&full).ok()?;
    }
    if !meta.is_file() {
        return None;
    }
    let file = File::open(&full).ok()?;
    Some((file, meta.len()))
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
    cfg: Arc<HttpConfig>,
    stats: HttpStats,
}

impl Http {
    /// Listens on `local` (TCP).
    ///
    /// # Errors
    /// No TCP layer, or the listener could not be created.
    pub fn new(
        iface: &mut Interface,
        local: SocketAddr,
        cfg: HttpConfig,
    ) -> Result<Http, AppError> {
        let mut tcp = TcpServer::new(local, cfg.max_sessions);
        tcp.listen(iface.tcp_mut().ok_or(AppError::NoTcp)?)?;
        Ok(Http {
            tcp,
            cfg: Arc::new(cfg),
            stats: HttpStats::default(),
        })
    }

    /// Totals, open connections included.
    pub fn stats(&self) -> HttpStats {
        let mut s = self.stats;
        for sess in self.tcp.sessions() {
            s.requests += sess.stats.requests;
            s.ok += sess.stats.ok;
            s.client_errors += sess.stats.client_errors;
            s.body_bytes += sess.body_bytes;
        }
        s
    }

    /// Connection counters.
    pub fn tcp_stats(&self) -> ServerStats {
        self.tcp.stats()
    }
}

impl App for Http {
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        let Some(t) = iface.tcp_mut() else {
            return;
        };
        let cfg = &self.cfg;
        let stats = &mut self.stats;
        self.tcp.poll(
            t,
            now,
            events,
            &mut || HttpSession::new(Arc::clone(cfg)),
            &mut |s| {
                stats.requests += s.stats.requests;
                stats.ok += s.stats.ok;
                stats.client_errors += s.stats.client_errors;
                stats.body_bytes += s.body_bytes;
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads_parse_or_are_refused() {
        let r = parse_request(b"GET /bytes/10 HTTP/1.1\r\nHost: x\r\nConnection: close").unwrap();
        assert_eq!((r.method, r.target, r.close), ("GET", "/bytes/10", true));
        let r = parse_request(b"HEAD / HTTP/1.0\r\nConnection: keep-alive").unwrap();
        assert!(!r.close);
        assert!(parse_request(b"GET / HTTP/1.0").unwrap().close);
        for bad in [
            &b"GET /"[..],
            b"GET / HTTP/2.0",
            b"GET x HTTP/1.1",
            b"GET / HTTP/1.1\r\nHost : x",
            b"GET / HTTP/1.1\r\nnocolon",
            b"POST / HTTP/1.1\r\nContent-Length: 5",
            b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked",
            b"\xff / HTTP/1.1",
        ] {
            assert_eq!(parse_request(bad).err(), Some(400), "{bad:?}");
        }
    }

    #[test]
    fn static_paths_stay_under_the_root() {
        let dir = std::env::temp_dir().join(format!("ulnet-http-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/a b.txt"), b"hello").unwrap();
        std::fs::write(dir.join("index.html"), b"<p>").unwrap();
        assert_eq!(open_static(&dir, "/sub/a%20b.txt").unwrap().1, 5);
        assert_eq!(open_static(&dir, "/").unwrap().1, 3);
        assert!(open_static(&dir, "/../etc/passwd").is_none());
        assert!(open_static(&dir, "/sub/%2e%2e/%2e%2e/etc/passwd").is_none());
        assert!(open_static(&dir, "/missing").is_none());
        assert!(open_static(&dir, "/bad%zz").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn head_end_finds_the_blank_line() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(14));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    }
}
