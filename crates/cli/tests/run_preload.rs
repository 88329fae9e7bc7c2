//! `ulnet run -- PROGRAM`: unmodified Debian binaries on ulnet over AF_XDP, in
//! namespace A of a testbed, talking to the kernel in namespace B; byte-exact where data
//! moves. Each program is its own process with its own stack (one after another on the
//! same interface). Needs root, the workspace built (`libulnet_preload.so` beside the
//! `ulnet` binary: `cargo build --workspace`, which scripts/test.sh runs first) and
//! socat, nc, curl, python3, iperf3, nginx, ab, wrk, redis-server, redis-tools and
//! sockperf (scripts/setup.sh installs them).

use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ulnet_bench::exec::ChildGuard;
use ulnet_bench::{Side, Testbed};

const ULNET: &str = env!("CARGO_BIN_EXE_ulnet");

static COUNTER: AtomicU32 = AtomicU32::new(0);

struct Bed {
    _tb: Testbed,
    a: Side,
    b: Side,
    /// ulnet's address (a spare one of A).
    ip: IpAddr,
    dir: PathBuf,
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn bed(label: &str, tools: &[&str]) -> Bed {
    ulnet_bench::preflight::require_net_admin()
        .unwrap_or_else(|e| panic!("these tests need root (CAP_NET_ADMIN, CAP_BPF): {e}"));
    for tool in tools.iter().chain(&["ip", "timeout"]) {
        ulnet_bench::preflight::require_tool(tool)
            .unwrap_or_else(|e| panic!("these tests need `{tool}`: {e}"));
    }
    let lib = Path::new(ULNET).with_file_name("libulnet_preload.so");
    assert!(
        lib.is_file(),
        "{} is missing: run `cargo build --workspace` first (test builds do not write \
         cdylibs there; scripts/test.sh does it)",
        lib.display()
    );
    let tb = Testbed::builder()
        .name_prefix(label)
        .build()
        .unwrap_or_else(|e| panic!("cannot build the testbed: {e}"));
    let (a, b) = (tb.a().clone(), tb.b().clone());
    let ip = a.spare_ip(0);
    let dir = PathBuf::from("/dev/shm").join(format!(
        "ulnet-run-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    Bed {
        _tb: tb,
        a,
        b,
        ip,
        dir,
    }
}

impl Bed {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// `ip netns exec A timeout T ulnet run ... -- args`; no `timeout` when `secs` is 0
    /// (a server, bounded by its guard, which must kill the program itself: `ip netns
    /// exec` and `ulnet run` exec in place).
    fn ulnet(&self, secs: u32, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.a.ns]);
        if secs > 0 {
            c.args(["timeout", "-k", "2", &secs.to_string()]);
        }
        c.arg(ULNET)
            .args(["run", "--iface", &self.a.ifname, "--addr"])
            .arg(format!("{}/{}", self.ip, self.a.prefix_len))
            .arg("--")
            .args(args);
        c
    }

    /// `ip netns exec B timeout T sh -c script`.
    fn peer(&self, secs: u32, script: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.b.ns]);
        if secs > 0 {
            c.args(["timeout", "-k", "2", &secs.to_string()]);
        }
        c.args(["sh", "-c", script]);
        c
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn run(mut c: Command) -> Output {
    c.output()
        .unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"))
}

/// Starts `c` with stdout and stderr piped and waits until one of them prints a line
/// containing `what` (panics if the program ends first, with what it printed).
fn start(mut c: Command, what: &str) -> ChildGuard {
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut g = ChildGuard::spawn(c).unwrap_or_else(|e| panic!("cannot start: {e}"));
    if what.is_empty() {
        return g;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    for r in [
        Box::new(g.child_mut().stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(g.child_mut().stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            // Keeps draining after the line was seen, so the program never writes into
            // a closed pipe (SIGPIPE).
            let mut r = BufReader::new(r);
            let mut buf = Vec::new();
            while r.read_until(b'\n', &mut buf).unwrap_or(0) > 0 {
                let _ = tx.send(Some(String::from_utf8_lossy(&buf).into_owned()));
                buf.clear();
            }
            let _ = tx.send(None);
        });
    }
    let mut seen = String::new();
    let mut ended = 0;
    loop {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(Some(l)) if l.contains(what) => return g,
            Ok(Some(l)) => seen.push_str(&(l + "\n")),
            Ok(None) => {
                ended += 1;
                if ended == 2 {
                    panic!("{} ended before printing {what:?}:\n{seen}", g.command());
                }
            }
            Err(_) => panic!("{} did not print {what:?} in 20 s:\n{seen}", g.command()),
        }
    }
}

/// Waits (up to 20 s) until the file at `p` contains `what`.
fn wait_file_has(p: &Path, what: &str) {
    for _ in 0..200 {
        if std::fs::read_to_string(p).is_ok_and(|s| s.contains(what)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{} never said {what:?}", p.display());
}

fn write_random(path: &Path, len: usize) {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    std::fs::write(path, v).unwrap();
}

fn assert_same(a: &Path, b: &Path, what: &str) {
    let x = std::fs::read(a).unwrap();
    let y = std::fs::read(b).unwrap_or_default();
    assert!(
        x == y,
        "{what}: {} bytes sent, {} received, equal: {}",
        x.len(),
        y.len(),
        x == y
    );
}

#[test]
fn socat_nc_and_curl_unmodified_on_ulnet_byte_exact() {
    let t = bed("runa", &["socat", "nc", "curl", "python3"]);
    let input = t.path("in");
    write_random(&input, 3_000_000);
    let small = t.path("small");
    write_random(&small, 100_000);
    let ip = t.ip;

    // socat as an echo server on ulnet; a kernel socat client sends and half-closes.
    // 100 kB: an echo through two single-threaded programs that each write before they
    // read can fill both ways' buffers and wait on each other (on any stack) once the
    // data outgrows the buffers; the big transfers below go one way.
    let server = start(
        t.ulnet(
            0,
            &["socat", "-d", "-d", "TCP-LISTEN:7100,reuseaddr", "PIPE"],
        ),
        "listening on",
    );
    let out = t.path("echo");
    let o = run(t.peer(
        60,
        &format!(
            "socat -t 10 - TCP:{ip}:7100 < {} > {}",
            small.display(),
            out.display()
        ),
    ));
    assert!(o.status.success(), "socat client: {}", text(&o));
    assert_same(&small, &out, "socat echo server on ulnet");
    let o = server.wait_timeout(Duration::from_secs(20)).unwrap();
    assert!(o.status.success(), "socat server on ulnet: {}", text(&o));

    // nc as a client on ulnet: sends 3 MB to a kernel sink (socat, which logs the peer:
    // the connection must come from ulnet's address, not the kernel's), then receives
    // 3 MB from a kernel source.
    let peer_log = t.path("peer.log");
    let sunk = t.path("sunk");
    let sink = start(
        t.peer(
            60,
            &format!(
                "exec socat -d -d -lf {} -u TCP-LISTEN:7101,reuseaddr CREATE:{}",
                peer_log.display(),
                sunk.display()
            ),
        ),
        "",
    );
    wait_file_has(&peer_log, "listening on");
    let o = run({
        let mut c = t.ulnet(60, &["nc", "-N", &t.b.ip.to_string(), "7101"]);
        c.stdin(std::fs::File::open(&input).unwrap());
        c
    });
    assert!(
        o.status.success(),
        "nc client sending on ulnet: {}",
        text(&o)
    );
    let o = sink.wait_timeout(Duration::from_secs(20)).unwrap();
    assert!(o.status.success(), "kernel sink: {}", text(&o));
    assert_same(&input, &sunk, "nc client on ulnet sending");
    let log = std::fs::read_to_string(&peer_log).unwrap_or_default();
    assert!(
        log.contains(&format!("accepting connection from AF=2 {ip}:")),
        "the kernel peer did not see ulnet's address: {log}"
    );
    let src_log = t.path("source.log");
    let _source = start(
        t.peer(
            60,
            &format!(
                "exec socat -d -d -lf {} -u OPEN:{} TCP-LISTEN:7104,reuseaddr",
                src_log.display(),
                input.display()
            ),
        ),
        "",
    );
    wait_file_has(&src_log, "listening on");
    let out = t.path("nc-client");
    let o = run({
        let mut c = t.ulnet(60, &["nc", "-d", &t.b.ip.to_string(), "7104"]);
        c.stdout(std::fs::File::create(&out).unwrap());
        c
    });
    assert!(
        o.status.success(),
        "nc client receiving on ulnet: {}",
        text(&o)
    );
    assert_same(&input, &out, "nc client on ulnet receiving");

    // nc as a server on ulnet; a kernel client sends a file one way.
    let out = t.path("nc-server");
    let server = start(
        {
            let script = format!("exec nc -n -v -l 7102 > {}", out.display());
            let mut c = t.ulnet(0, &["sh", "-c", &script]);
            c.stdin(Stdio::null());
            c
        },
        "Listening",
    );
    let o = run(t.peer(
        60,
        &format!("socat -u - TCP:{ip}:7102 < {}", input.display()),
    ));
    assert!(o.status.success(), "socat sender: {}", text(&o));
    let o = server.wait_timeout(Duration::from_secs(20)).unwrap();
    assert!(o.status.success(), "nc server on ulnet: {}", text(&o));
    assert_same(&input, &out, "nc server on ulnet");

    // curl on ulnet downloads 100 MB from a kernel HTTP server.
    let www = t.path("www");
    std::fs::create_dir_all(&www).unwrap();
    let big = www.join("big");
    write_random(&big, 100_000_000);
    let _http = start(
        t.peer(
            0,
            &format!(
                "cd {} && exec python3 -u -m http.server 8000 --bind {}",
                www.display(),
                t.b.ip
            ),
        ),
        "Serving HTTP",
    );
    let out = t.path("curl");
    let o = run(t.ulnet(
        120,
        &[
            "curl",
            "-sS",
            "--fail",
            "-o",
            out.to_str().unwrap(),
            &format!("http://{}:8000/big", t.b.ip),
        ],
    ));
    assert!(o.status.success(), "curl on ulnet: {}", text(&o));
    assert_same(&big, &out, "curl on ulnet, 100 MB");
}

/// iperf3's JSON: no error, and bytes received by the end.
fn iperf_ok(o: &Output, what: &str) {
    let s = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{what}: {}", text(o));
    let v: serde_json::Value =
        serde_json::from_str(&s).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {s}"));
    assert!(v.get("error").is_none(), "{what}: {} {err}", v["error"]);
    let end = &v["end"];
    let bytes = end["sum_received"]["bytes"]
        .as_u64()
        .or_else(|| end["sum"]["bytes"].as_u64())
        .unwrap_or(0);
    assert!(bytes > 1_000_000, "{what}: only {bytes} bytes received");
}

/// A UDP test's two JSON reports: the client sent over 1 MB; the server received whole
/// 1400-byte datagrams, no more than were sent, and at least 95 % of them (the rest it
/// counts lost: iperf3 numbers its datagrams). The rate is 10 Mb/s per stream, so a
/// receiver descheduled for a while on a loaded machine (CI runs tests side by side on
/// two cores) still has queue room: a socket's 256 KiB hold 200 ms of it.
fn udp_counts(client: &Output, server: &Output, what: &str) {
    iperf_ok(client, &format!("{what} (client)"));
    let json = |o: &Output, side: &str| -> serde_json::Value {
        let s = String::from_utf8_lossy(&o.stdout);
        // A retry's failed attempt may print a report first: the last one counts.
        let last = s.rfind("\n{").map_or(0, |i| i + 1);
        serde_json::from_str(&s[last..])
            .unwrap_or_else(|e| panic!("{what}: the {side}'s report is not JSON ({e}): {s}"))
    };
    let c = json(client, "client");
    let srv = json(server, "server");
    assert!(
        srv.get("error").is_none(),
        "{what}: server: {}",
        srv["error"]
    );
    let n = |v: &serde_json::Value, sum: &str, k: &str| v["end"][sum][k].as_u64().unwrap_or(0);
    let (sent, sent_pk) = (n(&c, "sum_sent", "bytes"), n(&c, "sum_sent", "packets"));
    let got = n(&srv, "sum_received", "bytes");
    let lost = n(&srv, "sum_received", "lost_packets");
    let got_pk = got / 1400;
    let msg = format!(
        "{what}: client sent {sent} bytes in {sent_pk} datagrams; server received {got} \
         bytes, counted {lost} datagrams lost"
    );
    assert!(sent > 1_000_000 && sent == sent_pk * 1400, "{msg}");
    assert!(
        got % 1400 == 0 && got <= sent && got_pk + lost <= sent_pk,
        "{msg}"
    );
    assert!(got_pk * 20 >= sent_pk * 19, "{msg}");
}

#[test]
fn iperf3_unmodified_on_ulnet_as_server_and_client() {
    let t = bed("runi", &["iperf3"]);
    let ip = t.ip.to_string();
    // Server on ulnet: TCP, reverse, four streams (one server, three tests).
    let server = start(
        t.ulnet(0, &["iperf3", "--forceflush", "-s", "-p", "5301"]),
        "Server listening",
    );
    for args in [&[][..], &["-R"], &["-P", "4"]] {
        let o = run(t.peer(
            30,
            &format!("iperf3 -J -t 2 -c {ip} -p 5301 {}", args.join(" ")),
        ));
        iperf_ok(&o, &format!("kernel client {args:?} to iperf3 -s on ulnet"));
    }
    drop(server);
    // UDP to a server on ulnet: iperf3 binds a UDP socket to its control port, connects
    // it to the client's first datagram and binds another to the same port for the next
    // stream (SO_REUSEADDR; crates/capi/src/udpshare.rs). One stream and two; the
    // server's JSON (bytes received) against the client's (bytes sent).
    for streams in ["1", "2"] {
        let server = start(
            t.ulnet(
                0,
                &["iperf3", "--forceflush", "-J", "-s", "-1", "-p", "5303"],
            ),
            "",
        );
        // The server says nothing before it is done (-J), so the client retries until
        // it listens. iperf3 3.12 with -J exits 0 even when it could not connect (the
        // error is in the JSON): the loop looks at the JSON, not the exit status. (It
        // looked at the status, and under load a refused first attempt ended the loop,
        // leaving the one-off server waiting for a test that never came.)
        let o = run(t.peer(
            30,
            &format!(
                "for i in $(seq 50); do o=$(iperf3 -J -u -b 10M -l 1400 -t 2 -c {ip} -p 5303 \
                 -P {streams}); case \"$o\" in *'\"error\"'*) sleep 0.2;; *) printf '%s\\n' \"$o\"; \
                 exit 0;; esac; done; printf '%s\\n' \"$o\"; exit 1"
            ),
        ));
        // On a hang, what the client saw tells a server stuck after a finished test
        // from one that never got one.
        let s = server
            .wait_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| {
                panic!("iperf3 -s -1, UDP -P {streams}: {e}; client: {}", text(&o))
            });
        udp_counts(
            &o,
            &s,
            &format!("kernel UDP client -P {streams} to iperf3 -s on ulnet"),
        );
    }
    // Client on ulnet: TCP, reverse, four streams, UDP.
    for args in [&[][..], &["-R"], &["-P", "4"], &["-u", "-b", "200M"]] {
        let kernel = start(
            t.peer(0, "exec iperf3 --forceflush -s -1 -p 5302"),
            "Server listening",
        );
        let mut a = vec!["iperf3", "-J", "-t", "2", "-c"];
        let bip = t.b.ip.to_string();
        a.push(&bip);
        a.extend(["-p", "5302"]);
        a.extend(args);
        let o = run(t.ulnet(30, &a));
        iperf_ok(&o, &format!("iperf3 -c {args:?} on ulnet"));
        let _ = kernel.wait_timeout(Duration::from_secs(10));
    }
}

/// nginx in one process (`master_process off`: a forked worker could not use the
/// parent's ulnet sockets, docs/capi.md) on ulnet: a 100 MB file byte-exact (its
/// sendfile goes through the interposer), 10,000 small requests from ab without a
/// failure, and wrk with keep-alive without a socket error.
#[test]
fn nginx_unmodified_on_ulnet_serves_kernel_clients() {
    let t = bed("runn", &["nginx", "curl", "ab", "wrk"]);
    let root = t.path("ngx");
    let www = root.join("www");
    std::fs::create_dir_all(www.join("tmp")).unwrap();
    let big = www.join("big");
    write_random(&big, 100_000_000);
    std::fs::write(www.join("small"), "hello from nginx on ulnet\n").unwrap();
    let r = root.display();
    let conf = root.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\n\
             error_log {r}/error.log info;\npid {r}/nginx.pid;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  sendfile on;\n  keepalive_requests 100000;\n\
               client_body_temp_path {r}/www/tmp;\n  proxy_temp_path {r}/www/tmp;\n\
               fastcgi_temp_path {r}/www/tmp;\n  uwsgi_temp_path {r}/www/tmp;\n\
               scgi_temp_path {r}/www/tmp;\n\
               server {{ listen 8080; root {r}/www; }}\n}}\n"
        ),
    )
    .unwrap();
    let _nginx = {
        let mut c = t.ulnet(
            0,
            &["nginx", "-p", &r.to_string(), "-c", conf.to_str().unwrap()],
        );
        c.stdout(Stdio::null()).stderr(Stdio::null());
        ChildGuard::spawn(c).expect("nginx")
    };
    wait_file_has(&root.join("error.log"), "getrlimit");
    let url = format!("http://{}:8080", t.ip);
    let o = run(t.peer(
        30,
        &format!("curl -sS --retry 20 --retry-connrefused --retry-delay 1 {url}/small"),
    ));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "hello from nginx on ulnet\n",
        "{}",
        text(&o)
    );
    let out = t.path("big-out");
    let o = run(t.peer(
        120,
        &format!("curl -sS --fail -o {} {url}/big", out.display()),
    ));
    assert!(o.status.success(), "curl of nginx on ulnet: {}", text(&o));
    assert_same(&big, &out, "nginx on ulnet, 100 MB");
    let o = run(t.peer(120, &format!("ab -q -n 10000 -c 32 {url}/small")));
    let s = text(&o);
    assert!(
        o.status.success()
            && s.contains("Complete requests:      10000")
            && s.contains("Failed requests:        0")
            && !s.contains("Non-2xx"),
        "ab against nginx on ulnet: {s}"
    );
    let o = run(t.peer(60, &format!("wrk -t 2 -c 32 -d 2s {url}/small")));
    let s = text(&o);
    assert!(
        o.status.success()
            && s.contains("requests in")
            && !s.contains("Socket errors")
            && !s.contains("Non-2xx"),
        "wrk against nginx on ulnet: {s}"
    );
    let log = std::fs::read_to_string(root.join("error.log")).unwrap_or_default();
    assert!(
        !log.contains("[alert]") && !log.contains("[crit]") && !log.contains("[emerg]"),
        "{log}"
    );
}

/// `redis-server` (one process, no persistence: a forked BGSAVE child could not use the
/// parent's ulnet sockets) on ulnet under the kernel's `redis-benchmark`: every request
/// of four commands answered (the server's own command counts say so), and a 1 MB value
/// set and read back byte-exact by `redis-cli`.
#[test]
fn redis_unmodified_on_ulnet_under_redis_benchmark() {
    let t = bed("runr", &["redis-server", "redis-benchmark", "redis-cli"]);
    let dir = t.path("redis");
    std::fs::create_dir_all(&dir).unwrap();
    let _server = start(
        t.ulnet(
            0,
            &[
                "redis-server",
                "--port",
                "6390",
                "--bind",
                &t.ip.to_string(),
                "--protected-mode",
                "no",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--dir",
                dir.to_str().unwrap(),
            ],
        ),
        "Ready to accept connections",
    );
    let cli = format!("redis-cli -h {} -p 6390", t.ip);
    let n = 20_000;
    let o = run(t.peer(
        120,
        &format!(
            "redis-benchmark -h {} -p 6390 -n {n} -c 20 -t set,get,incr,lpush --csv",
            t.ip
        ),
    ));
    let s = text(&o);
    assert!(o.status.success(), "redis-benchmark: {s}");
    for cmd in ["SET", "GET", "INCR", "LPUSH"] {
        assert!(
            s.contains(&format!("\"{cmd}\",")),
            "redis-benchmark: no {cmd} row: {s}"
        );
    }
    // The server counted every request: redis-benchmark issues exactly n of each.
    let o = run(t.peer(30, &format!("{cli} INFO commandstats")));
    let stats = text(&o);
    for cmd in ["set", "get", "incr", "lpush"] {
        let calls = stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:calls=")))
            .and_then(|r| r.split(',').next())
            .and_then(|c| c.parse::<u64>().ok());
        assert_eq!(calls, Some(n), "{cmd} calls on the server: {stats}");
    }
    // 1 MB of random bytes in, the same out (`--raw` adds one newline).
    let value = t.path("value");
    write_random(&value, 1_000_000);
    let o = run(t.peer(30, &format!("{cli} -x SET big < {}", value.display())));
    assert!(
        o.status.success() && text(&o).contains("OK"),
        "SET: {}",
        text(&o)
    );
    let out = t.path("value-out");
    let o = run(t.peer(30, &format!("{cli} --raw GET big > {}", out.display())));
    assert!(o.status.success(), "GET: {}", text(&o));
    let mut got = std::fs::read(&out).unwrap();
    assert_eq!(
        got.pop(),
        Some(b'\n'),
        "redis-cli --raw ends with a newline"
    );
    std::fs::write(&out, got).unwrap();
    assert_same(&value, &out, "a 1 MB value through redis on ulnet");
}

/// `sockperf server` on ulnet, UDP and TCP, with the kernel's `sockperf ping-pong`
/// for 2 s: it reports observations (and so latency percentiles) and no error.
#[test]
fn sockperf_unmodified_on_ulnet_ping_pong() {
    let t = bed("runs", &["sockperf"]);
    let ip = t.ip.to_string();
    for (port, tcp) in [("11111", false), ("11112", true)] {
        let mut args = vec!["sockperf", "server", "-i", &ip, "-p", port];
        if tcp {
            args.push("--tcp");
        }
        let _server = start(t.ulnet(0, &args), "to block on socket");
        let o = run(t.peer(
            30,
            &format!(
                "sockperf ping-pong -i {ip} -p {port} -t 2 {}",
                if tcp { "--tcp" } else { "" }
            ),
        ));
        let s = text(&o);
        let what = if tcp { "TCP" } else { "UDP" };
        // "Total 9165 observations" (after a colour escape).
        let observations = s
            .split("Total ")
            .filter_map(|r| r.split(' ').next()?.parse::<u64>().ok())
            .next()
            .unwrap_or(0);
        assert!(
            o.status.success()
                && observations > 100
                && s.contains("percentile 99.000")
                && s.contains("# dropped messages = 0;")
                && !s.contains("ERROR"),
            "sockperf ping-pong {what} against sockperf server on ulnet: {s}"
        );
    }
}

/// `python3 -m http.server` (Debian's /usr/bin/python3) on ulnet serves 100 MB to the
/// kernel's curl, byte-exact.
#[test]
fn python_http_server_unmodified_on_ulnet_serves_100_mb() {
    let t = bed("runp", &["curl", "/usr/bin/python3"]);
    let www = t.path("www");
    std::fs::create_dir_all(&www).unwrap();
    let big = www.join("big");
    write_random(&big, 100_000_000);
    let _http = start(
        {
            let mut c = t.ulnet(
                0,
                &[
                    "/usr/bin/python3",
                    "-u",
                    "-m",
                    "http.server",
                    "8001",
                    "--bind",
                    &t.ip.to_string(),
                    "--directory",
                    www.to_str().unwrap(),
                ],
            );
            c.stdin(Stdio::null());
            c
        },
        "Serving HTTP",
    );
    let out = t.path("got");
    let o = run(t.peer(
        120,
        &format!(
            "curl -sS --fail -o {} http://{}:8001/big",
            out.display(),
            t.ip
        ),
    ));
    assert!(
        o.status.success(),
        "curl from http.server on ulnet: {}",
        text(&o)
    );
    assert_same(&big, &out, "python3 -m http.server on ulnet, 100 MB");
}
