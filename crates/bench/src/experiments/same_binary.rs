//! "Same binary, two stacks" (issue 16): unmodified Debian servers run once on the
//! kernel's stack and once under `ulnet run` (the interposer, AF_XDP), with the same
//! kernel client in the peer namespace, so the only difference is the stack.
//!
//! What is measured, each round alternating kernel and ulnet:
//! - `iperf3 -s` in namespace A, a kernel `iperf3 -c` in B for a bounded time, both
//!   directions (the server receiving; `-R`: the server sending): goodput and the
//!   client's retransmissions, from iperf3's JSON;
//! - `nginx` (one process, `master_process off`: a forked worker could not use the
//!   parent's ulnet sockets, docs/capi.md) serving a small file to `wrk --latency`
//!   (1 thread, 16 keep-alive connections): requests/s and latency p50/p99, from wrk;
//! - `sockperf server`, UDP and TCP, with a kernel `sockperf ping-pong` (64 B,
//!   `--full-rtt`): round-trip p50/p99/mean, from sockperf.
//!
//! The server runs on the SUT core (`taskset -c 1`; under `ulnet run` the stack's loop
//! thread inherits it), the client on the load core. CPU: machine-wide from /proc/stat
//! and every process's run time over the client's run (as the other experiments), and
//! the server process's own CPU (`server_cores`; the same pid throughout: `ip netns
//! exec`, `taskset` and `ulnet run` all exec in place). The ulnet rows need
//! `libulnet_preload.so` next to the `ulnet` binary (`cargo build --workspace`).

use std::io::{self, BufRead, BufReader};
use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::latency::parse_sockperf;
use super::Experiment;
use crate::exec::ChildGuard;
use crate::harness::{io_err, Ctx, Metrics, Plan, Profile, Window, LOAD_CPU, SUT_CPU};
use crate::results::{ExperimentResult, Metric, PlotKind, PlotView, SystemKind, TableView, View};
use crate::summary::Summary;
use crate::testbed::{Side, Testbed};

/// `same-binary`.
pub struct SameBinary;

const KERNEL: &str = "kernel";
const ULNET: &str = "ulnet-run";
const SYSTEMS: [&str; 2] = [KERNEL, ULNET];

const IPERF_RX: &str = "iperf3-rx";
const IPERF_TX: &str = "iperf3-tx";
const NGINX: &str = "nginx-small";
const SOCKPERF_UDP: &str = "sockperf-udp";
const SOCKPERF_TCP: &str = "sockperf-tcp";
const CASES: [&str; 5] = [IPERF_RX, IPERF_TX, NGINX, SOCKPERF_UDP, SOCKPERF_TCP];

/// Seconds each client runs.
fn secs(p: Profile) -> u32 {
    p.pick(1, 2, 5, 10)
}

/// Per measurement beyond the client's run: starting and stopping the server (an
/// AF_XDP socket's setup under `ulnet run`), sockperf's warm-up.
const OVERHEAD: Duration = Duration::from_millis(1500);

/// The first port (each measurement takes the next: no TIME_WAIT or socket left over
/// from one round can touch the next).
const BASE_PORT: u16 = 31_000;

impl Experiment for SameBinary {
    fn name(&self) -> &'static str {
        "same-binary"
    }
    fn seed(&self) -> &'static str {
        "-"
    }
    fn title(&self) -> &'static str {
        "Same binary, two stacks: iperf3, nginx+wrk and sockperf servers on the kernel vs under `ulnet run` (AF_XDP)"
    }
    fn estimate(&self, plan: &Plan) -> Duration {
        let one = Duration::from_secs(u64::from(secs(plan.profile))) + OVERHEAD;
        one * (CASES.len() as u32 * SYSTEMS.len() as u32 * plan.rounds) + Duration::from_secs(1)
    }
    fn tools(&self) -> &'static [&'static str] {
        &[
            "ip", "taskset", "iperf3", "nginx", "wrk", "sockperf", "curl",
        ]
    }
    fn run(&self, ctx: &mut Ctx<'_>) -> io::Result<()> {
        let tb = Testbed::builder()
            .name_prefix("same")
            .build()
            .map_err(io_err)?;
        let dir = std::env::temp_dir().join(format!("ulnet-same-binary-{}", std::process::id()));
        let r = run_on(ctx, &tb, &dir);
        let _ = std::fs::remove_dir_all(&dir);
        tb.teardown().map_err(io_err)?;
        r
    }
    fn seed_figure(&self) -> &'static str {
        "No seed: issue 16's comparison. The systems it follows (OpenOnload's `onload`, \
         VMA/XLIO, VPP's and F-Stack's LD_PRELOAD libraries) are judged the same way: the \
         program a user already has, unchanged, on the kernel and on the user-level stack."
    }
    fn verdict(&self, _r: &ExperimentResult, s: &Summary) -> Vec<String> {
        let mut out = Vec::new();
        for (case, metric, what) in [
            (IPERF_RX, "gbps", "iperf3 server receiving: goodput"),
            (IPERF_TX, "gbps", "iperf3 server sending: goodput"),
            (NGINX, "rps", "nginx small file: requests/s"),
            (NGINX, "lat_p99_us", "nginx small file: latency p99"),
            (SOCKPERF_UDP, "rtt_p50_us", "sockperf UDP: RTT p50"),
            (SOCKPERF_TCP, "rtt_p50_us", "sockperf TCP: RTT p50"),
        ] {
            if let Some(r) = s.paired(case, ULNET, KERNEL, metric) {
                out.push(format!(
                    "{what} under `ulnet run` is {r:.2}x the kernel's (same binary)."
                ));
            }
        }
        if out.is_empty() {
            out.push("Missing ulnet or kernel figures: no verdict.".into());
        }
        out
    }
}

fn declare(ctx: &mut Ctx<'_>, secs: u32) {
    let server = "taskset -c 1 in namespace A; client taskset -c 0 in namespace B";
    ctx.system(
        KERNEL,
        "kernel stack",
        SystemKind::Kernel,
        false,
        &[
            ("stack", "Linux, the binary unchanged".to_owned()),
            ("cores", server.to_owned()),
        ],
    );
    ctx.system(
        ULNET,
        "same binary under `ulnet run`",
        SystemKind::Ulnet,
        false,
        &[
            (
                "stack",
                "ulnet run --backend xdp (LD_PRELOAD libulnet_preload.so)".to_owned(),
            ),
            (
                "cores",
                format!("{server}; the stack's loop thread on core 1"),
            ),
        ],
    );
    ctx.case(IPERF_RX, "iperf3, server receiving", &[("reverse", 0.0)]);
    ctx.case(IPERF_TX, "iperf3 -R, server sending", &[("reverse", 1.0)]);
    ctx.case(NGINX, "nginx, small file, wrk 16 connections", &[]);
    ctx.case(
        SOCKPERF_UDP,
        "sockperf ping-pong, UDP, 64 B",
        &[("tcp", 0.0)],
    );
    ctx.case(
        SOCKPERF_TCP,
        "sockperf ping-pong, TCP, 64 B",
        &[("tcp", 1.0)],
    );
    let cpu = [
        Metric::less("server_cores", "server CPU (cores)", 2),
        Metric::less("machine_busy_cores", "machine CPU (cores)", 2),
    ];
    let table = |title: &str, cases: &[&str], metrics: Vec<Metric>| {
        View::Table(TableView {
            title: title.to_owned(),
            cases: cases.iter().map(|c| (*c).to_owned()).collect(),
            systems: Vec::new(),
            metrics: metrics.into_iter().chain(cpu.clone()).collect(),
            baselines: vec![KERNEL.into()],
            ratio_metric: None,
        })
    };
    ctx.view(table(
        &format!("iperf3, {secs} s per round"),
        &[IPERF_RX, IPERF_TX],
        vec![
            Metric::more("gbps", "goodput (Gbit/s)", 2),
            Metric::less("retransmits", "retransmits", 0),
        ],
    ));
    ctx.view(table(
        &format!("nginx + wrk, small file, {secs} s per round"),
        &[NGINX],
        vec![
            Metric::more("rps", "requests/s", 0),
            Metric::less("lat_p50_us", "p50 (µs)", 0),
            Metric::less("lat_p99_us", "p99 (µs)", 0),
        ],
    ));
    ctx.view(table(
        &format!("sockperf ping-pong, 64 B, {secs} s per round"),
        &[SOCKPERF_UDP, SOCKPERF_TCP],
        vec![
            Metric::less("rtt_p50_us", "p50 (µs)", 1),
            Metric::less("rtt_p99_us", "p99 (µs)", 1),
            Metric::less("rtt_mean_us", "mean (µs)", 1),
        ],
    ));
    ctx.view(View::Plot(PlotView {
        id: "rtt-p50".into(),
        title: "sockperf RTT p50 (µs), same binary".into(),
        kind: PlotKind::Bars,
        cases: vec![SOCKPERF_UDP.into(), SOCKPERF_TCP.into()],
        systems: Vec::new(),
        x_param: None,
        x_label: "protocol".into(),
        y: Metric::less("rtt_p50_us", "RTT p50 (µs)", 1),
        y2: None,
        x_log: false,
    }));
    ctx.view(View::Plot(PlotView {
        id: "iperf3".into(),
        title: "iperf3 goodput (Gbit/s), same binary".into(),
        kind: PlotKind::Bars,
        cases: vec![IPERF_RX.into(), IPERF_TX.into()],
        systems: Vec::new(),
        x_param: None,
        x_label: "direction".into(),
        y: Metric::more("gbps", "goodput (Gbit/s)", 2),
        y2: None,
        x_log: false,
    }));
}

/// Where a round's server runs and how it is started.
struct Where<'a> {
    a: &'a Side,
    b: &'a Side,
    /// ulnet's address (a spare one of A).
    ua: IpAddr,
    ulnet: &'a Path,
    dir: &'a Path,
}

impl Where<'_> {
    /// The server's address for `system`.
    fn ip(&self, system: &str) -> IpAddr {
        if system == ULNET {
            self.ua
        } else {
            self.a.ip
        }
    }

    /// `ip netns exec A taskset -c 1 [ulnet run ... --] program args`.
    fn server(&self, system: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            &self.a.ns,
            "taskset",
            "-c",
            &SUT_CPU.to_string(),
        ]);
        if system == ULNET {
            c.arg(self.ulnet).args([
                "run",
                "--backend",
                "xdp",
                "--iface",
                &self.a.ifname,
                "--addr",
                &format!("{}/{}", self.ua, self.a.prefix_len),
                "--",
            ]);
        }
        c.args(args).stdin(Stdio::null());
        c
    }

    /// `ip netns exec B taskset -c 0 sh -c script`, bounded by `timeout`.
    fn client(&self, secs: u32, script: &str) -> io::Result<std::process::Output> {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.b.ns, "timeout", "-k", "2"])
            .arg((secs + 20).to_string())
            .args(["taskset", "-c", &LOAD_CPU.to_string(), "sh", "-c", script])
            .stdin(Stdio::null());
        c.output()
    }
}

/// Starts `c` and waits (up to 20 s) until it prints a line containing `what` on
/// stdout or stderr; keeps draining both afterwards so it never blocks on a pipe.
fn start(mut c: Command, what: &str) -> io::Result<ChildGuard> {
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut g = ChildGuard::spawn(c).map_err(io_err)?;
    let (tx, rx) = mpsc::channel();
    let outs: [Box<dyn io::Read + Send>; 2] = [
        Box::new(g.child_mut().stdout.take().expect("piped")),
        Box::new(g.child_mut().stderr.take().expect("piped")),
    ];
    for r in outs {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut r = BufReader::new(r);
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 0 {
                let _ = tx.send(Some(std::mem::take(&mut line)));
            }
            let _ = tx.send(None);
        });
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = String::new();
    let mut ended = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Some(l)) if l.contains(what) => return Ok(g),
            Ok(Some(l)) => seen.push_str(&l),
            Ok(None) => {
                ended += 1;
                if ended == 2 {
                    return Err(io_err(format!(
                        "{} ended before it was ready: {}",
                        g.command(),
                        seen.trim()
                    )));
                }
            }
            Err(_) => {
                return Err(io_err(format!(
                    "{} not ready in 20 s: {}",
                    g.command(),
                    seen.trim()
                )))
            }
        }
    }
}

/// The CPU time of process `pid` so far.
fn proc_cpu(pid: u32) -> io::Result<Duration> {
    crate::cpu::all_processes()
        .map_err(io_err)?
        .get(&pid)
        .copied()
        .ok_or_else(|| io_err(format!("the server (pid {pid}) is gone")))
}

/// Runs `client` inside a CPU window while `server` serves; adds the machine-wide and
/// the server process's CPU to the metrics `client` returns with the bytes and
/// packets they are per. Kills the server.
fn measure(
    server: ChildGuard,
    client: impl FnOnce() -> io::Result<(Metrics, Option<u64>, Option<u64>)>,
) -> io::Result<Metrics> {
    let pid = server.id();
    let c0 = proc_cpu(pid)?;
    let w = Window::start()?;
    let r = client();
    let c1 = proc_cpu(pid);
    let cpu = w.finish(Duration::ZERO);
    let _ = server.kill();
    let (mut m, bytes, packets) = r?;
    let cpu = cpu?;
    let mut all = cpu.metrics(bytes, packets);
    // The servers are separate processes: this process's CPU says nothing about them.
    all.retain(|k, _| !k.starts_with("sut_"));
    let wall = cpu.delta.wall.as_secs_f64();
    if wall > 0.0 {
        m.insert(
            "server_cores".into(),
            c1?.saturating_sub(c0).as_secs_f64() / wall,
        );
    }
    all.append(&mut m);
    Ok(all)
}

fn run_on(ctx: &mut Ctx<'_>, tb: &Testbed, dir: &Path) -> io::Result<()> {
    let secs = secs(ctx.profile());
    let (a, b) = (tb.a(), tb.b());
    declare(ctx, secs);
    ctx.param("seconds_per_round", secs);
    ctx.param("wrk", "-t 1 -c 16 --latency, keep-alive");
    ctx.param("sockperf", "ping-pong -m 64 --full-rtt");
    ctx.note("The same Debian binaries both times; only the stack differs. Under `ulnet run` the server's sockets are ulnet's (AF_XDP, the loop thread on the server's core); the client is always the kernel's, in namespace B.");
    ctx.note("nginx runs as one process (master_process off, worker_processes 1) on both stacks: a forked worker cannot use the parent's ulnet sockets (docs/capi.md).");
    ctx.note("server_cores is the server process's own CPU (its threads, including ulnet's loop under `ulnet run`); machine_busy_cores includes the kernel client and, on veth, the kernel's work for both ends.");
    let ulnet = std::env::current_exe()?;
    let lib = ulnet.with_file_name("libulnet_preload.so");
    if !lib.is_file() {
        ctx.note(format!(
            "{} is missing, so the ulnet rows fail: build it with `cargo build --workspace`.",
            lib.display()
        ));
    }
    std::fs::create_dir_all(dir.join("www/tmp"))?;
    std::fs::write(dir.join("www/small"), "hello from the same binary\n")?;
    let ua = a.spare_ip(0);
    // The kernel in B reaches ulnet in A without ARP.
    b.set_neighbor(ua, a.mac).map_err(io_err)?;
    let w = Where {
        a,
        b,
        ua,
        ulnet: &ulnet,
        dir,
    };
    let mut port = BASE_PORT;
    for case in CASES {
        ctx.alternate(case, &SYSTEMS, |sys, _round| {
            port += 1;
            match case {
                IPERF_RX | IPERF_TX => iperf_round(&w, sys, port, secs, case == IPERF_TX),
                NGINX => nginx_round(&w, sys, port, secs),
                _ => sockperf_round(&w, sys, port, secs, case == SOCKPERF_TCP),
            }
        });
    }
    Ok(())
}

fn iperf_round(
    w: &Where<'_>,
    sys: &str,
    port: u16,
    secs: u32,
    reverse: bool,
) -> io::Result<Metrics> {
    let p = port.to_string();
    let server = start(
        w.server(sys, &["iperf3", "--forceflush", "-s", "-1", "-p", &p]),
        "Server listening",
    )?;
    let ip = w.ip(sys);
    measure(server, || {
        let o = w.client(
            secs,
            &format!(
                "iperf3 -J -t {secs} -c {ip} -p {port} {}",
                if reverse { "-R" } else { "" }
            ),
        )?;
        let text = String::from_utf8_lossy(&o.stdout);
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| io_err(format!("iperf3 JSON ({e}): {}", tail(&o))))?;
        if let Some(e) = v.get("error") {
            return Err(io_err(format!("iperf3: {e}")));
        }
        let end = &v["end"];
        let bytes = end["sum_received"]["bytes"].as_u64().unwrap_or(0);
        let bps = end["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0);
        if bytes == 0 {
            return Err(io_err(format!("iperf3 moved no data: {}", tail(&o))));
        }
        let mut m = Metrics::new();
        m.insert("gbps".into(), bps / 1e9);
        m.insert("bytes".into(), bytes as f64);
        m.insert(
            "retransmits".into(),
            end["sum_sent"]["retransmits"].as_f64().unwrap_or(0.0),
        );
        Ok((m, Some(bytes), None))
    })
}

fn nginx_round(w: &Where<'_>, sys: &str, port: u16, secs: u32) -> io::Result<Metrics> {
    let ip = w.ip(sys);
    let r = w.dir.display();
    let conf = w.dir.join(format!("nginx-{port}.conf"));
    std::fs::write(
        &conf,
        format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\n\
             error_log {r}/error-{port}.log warn;\npid {r}/nginx-{port}.pid;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  sendfile on;\n  keepalive_requests 1000000;\n\
               client_body_temp_path {r}/www/tmp;\n  proxy_temp_path {r}/www/tmp;\n\
               fastcgi_temp_path {r}/www/tmp;\n  uwsgi_temp_path {r}/www/tmp;\n\
               scgi_temp_path {r}/www/tmp;\n\
               server {{ listen {ip}:{port}; root {r}/www; }}\n}}\n"
        ),
    )?;
    let prefix = w.dir.display().to_string();
    let server = {
        let mut c = w.server(
            sys,
            &["nginx", "-p", &prefix, "-c", conf.to_str().unwrap_or("")],
        );
        c.stdout(Stdio::null()).stderr(Stdio::null());
        ChildGuard::spawn(c).map_err(io_err)?
    };
    let url = format!("http://{ip}:{port}/small");
    // Ready when it answers (bounded: 100 tries 0.1 s apart).
    let o = w.client(
        20,
        &format!(
            "for i in $(seq 100); do curl -sf -o /dev/null {url} && exit 0; sleep 0.1; done; exit 1"
        ),
    )?;
    if !o.status.success() {
        let _ = server.kill();
        let log =
            std::fs::read_to_string(w.dir.join(format!("error-{port}.log"))).unwrap_or_default();
        return Err(io_err(format!("nginx did not answer: {}", log.trim())));
    }
    measure(server, || {
        let o = w.client(secs, &format!("wrk -t 1 -c 16 -d {secs}s --latency {url}"))?;
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let f = parse_wrk(&text)
            .ok_or_else(|| io_err(format!("wrk output not understood: {}", tail(&o))))?;
        if f.bad_responses > 0 || f.socket_errors > 0 {
            return Err(io_err(format!(
                "wrk: {} socket errors, {} non-2xx responses",
                f.socket_errors, f.bad_responses
            )));
        }
        let mut m = Metrics::new();
        m.insert("rps".into(), f.rps);
        m.insert("requests".into(), f.requests as f64);
        m.insert("lat_p50_us".into(), f.p50_us);
        m.insert("lat_p99_us".into(), f.p99_us);
        Ok((m, None, Some(f.requests)))
    })
}

fn sockperf_round(
    w: &Where<'_>,
    sys: &str,
    port: u16,
    secs: u32,
    tcp: bool,
) -> io::Result<Metrics> {
    let (ip, p) = (w.ip(sys).to_string(), port.to_string());
    let mut args = vec!["sockperf", "server", "-i", &ip, "-p", &p];
    if tcp {
        args.push("--tcp");
    }
    // It prints this once its socket is bound and it waits for messages.
    let server = start(w.server(sys, &args), "to block on socket")?;
    measure(server, || {
        let o = w.client(
            secs,
            &format!(
                "sockperf ping-pong -i {ip} -p {port} -m 64 -t {secs} --full-rtt {}",
                if tcp { "--tcp" } else { "" }
            ),
        )?;
        let text =
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        let f = parse_sockperf(&text)
            .ok_or_else(|| io_err(format!("sockperf output not understood: {}", tail(&o))))?;
        let mut m = Metrics::new();
        m.insert("rtt_p50_us".into(), f.p50);
        m.insert("rtt_p99_us".into(), f.p99);
        m.insert("rtt_mean_us".into(), f.mean);
        m.insert("rtts".into(), f.count as f64);
        Ok((m, None, Some(f.count)))
    })
}

/// The last lines a client printed, for an error message.
fn tail(o: &std::process::Output) -> String {
    let t = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = t.lines().rev().take(4).collect();
    format!("(exit {}) {}", o.status, lines.join(" | "))
}

/// Figures from wrk's report with `--latency`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct WrkFigures {
    rps: f64,
    requests: u64,
    p50_us: f64,
    p99_us: f64,
    socket_errors: u64,
    bad_responses: u64,
}

/// A wrk duration (`339.00us`, `1.23ms`, `2.00s`) in µs.
fn wrk_us(s: &str) -> Option<f64> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60e6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e6)
    } else {
        return None;
    };
    num.parse::<f64>().ok().map(|v| v * scale)
}

/// Parses wrk 4's report (`--latency`).
fn parse_wrk(out: &str) -> Option<WrkFigures> {
    let field = |key: &str| -> Option<&str> {
        out.lines()
            .find_map(|l| l.trim_start().strip_prefix(key).map(str::trim))
    };
    let rps = field("Requests/sec:")?.parse().ok()?;
    let requests = out.lines().find_map(|l| {
        let l = l.trim_start();
        let (n, rest) = l.split_once(' ')?;
        rest.starts_with("requests in").then(|| n.parse().ok())?
    })?;
    let socket_errors = field("Socket errors:").map_or(0, |s| {
        s.split(',')
            .filter_map(|p| p.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum()
    });
    let bad_responses = field("Non-2xx or 3xx responses:")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Some(WrkFigures {
        rps,
        requests,
        p50_us: wrk_us(field("50%")?)?,
        p99_us: wrk_us(field("99%")?)?,
        socket_errors,
        bad_responses,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRK: &str = "Running 2s test @ http://198.18.0.3:31003/small
  1 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   420.13us  130.02us   3.20ms   90.12%
    Req/Sec    36.93k     1.18k   38.59k    70.00%
  Latency Distribution
     50%  398.00us
     75%  451.00us
     90%  520.00us
     99%    1.02ms
  73477 requests in 2.00s, 17.96MB read
Requests/sec:  36712.43
Transfer/sec:      8.97MB
";

    #[test]
    fn wrk_output() {
        assert_eq!(
            parse_wrk(WRK),
            Some(WrkFigures {
                rps: 36712.43,
                requests: 73477,
                p50_us: 398.0,
                p99_us: 1020.0,
                socket_errors: 0,
                bad_responses: 0,
            })
        );
        let bad = WRK.replace(
            "Requests/sec",
            "  Socket errors: connect 0, read 3, write 0, timeout 2\n  Non-2xx or 3xx responses: 7\nRequests/sec",
        );
        let f = parse_wrk(&bad).unwrap();
        assert_eq!((f.socket_errors, f.bad_responses), (5, 7));
        assert!(parse_wrk("unable to connect").is_none());
        assert_eq!(wrk_us("2.00s"), Some(2e6));
    }
}
