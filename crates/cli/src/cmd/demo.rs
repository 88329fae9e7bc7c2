//! `ulnet demo`: the end-to-end demonstration. Builds a testbed (two namespaces joined
//! by veth), serves `GET /bytes/N` from ulnet's HTTP app over the AF_XDP channel on a
//! spare address in namespace A, and from the same server logic on kernel sockets on
//! the kernel's own address in namespace A; curl in namespace B fetches from each in
//! turn, the body's SHA-256 is checked against the pattern's, and the medians of rate
//! and CPU cost are printed side by side. Everything is torn down at the end.
//!
//! What the CPU figures count, for both servers alike: the CPU time of this process
//! during the transfer (the server's thread; the main thread only waits for curl), plus
//! the machine's softirq time in that window (where the kernel's receive work runs,
//! for either side of the veth). The machine-wide busy time (curl, its kernel work and
//! the hashing of nothing: the body is hashed after the window) is shown as well.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, ensure, Context as _};
use sha2::{Digest, Sha256};
use ulnet::apps::http::{Http, HttpConfig};
use ulnet::apps::pattern;
use ulnet::channel::Channel as _;
use ulnet::runtime::{self, Backend, NetConfig, WaitMode};
use ulnet::stack::iface::IpCidr;
use ulnet_bench::{CpuSample, Testbed};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Megabytes (10^6 bytes) per transfer.
    #[arg(long, default_value_t = 100)]
    pub size_mb: u64,
    /// Transfers per server (alternating ulnet, kernel).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Backend for ulnet (xdp by default; packet also works).
    #[arg(long, default_value = "xdp")]
    pub backend: Backend,
    /// Busy-poll in ulnet's loop instead of sleeping (charges a full core to ulnet).
    #[arg(long)]
    pub busy_poll: bool,
}

/// One measured transfer.
#[derive(Debug, Clone, Copy)]
struct Sample {
    gbps: f64,
    /// Server CPU seconds (process + machine softirq) per GB.
    server_s_per_gb: f64,
    /// Machine busy CPU seconds per GB.
    machine_s_per_gb: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn first_line(path: &str, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
}

fn commit() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".into())
}

/// SHA-256 of the first `len` bytes of the pattern.
fn pattern_sha256(len: u64) -> String {
    let mut h = Sha256::new();
    let mut off = 0u64;
    while off < len {
        let n = (len - off).min(pattern::MAX_CHUNK as u64) as usize;
        h.update(pattern::slice(off, n));
        off += n as u64;
    }
    hex(&h.finalize())
}

fn file_sha256(path: &Path) -> anyhow::Result<(u64, String)> {
    let mut f = std::fs::File::open(path).with_context(|| format!("open {}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        len += n as u64;
    }
    Ok((len, hex(&h.finalize())))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Fetches `url` with curl in namespace `ns` into `out`, measuring CPU around it.
fn fetch(ns: &str, url: &str, out: &Path, bytes: u64, expect: &str) -> anyhow::Result<Sample> {
    let _ = std::fs::remove_file(out);
    let before = CpuSample::now()?;
    let o = ulnet_bench::exec::output_in(
        ns,
        "curl",
        [
            "-sS",
            "--fail",
            "--max-time",
            "120",
            "-o",
            out.to_str().context("temp path")?,
            "-w",
            "%{size_download} %{time_total}",
            url,
        ],
    )?;
    let d = before.elapsed()?;
    ensure!(
        o.status.success(),
        "curl {url} failed: {}",
        String::from_utf8_lossy(&o.stderr).trim()
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let mut it = text.split_whitespace();
    let size: u64 = it
        .next()
        .and_then(|s| s.parse().ok())
        .context("curl -w size")?;
    let secs: f64 = it
        .next()
        .and_then(|s| s.parse().ok())
        .context("curl -w time")?;
    ensure!(
        size == bytes,
        "curl got {size} bytes from {url}, expected {bytes}"
    );
    let (len, sha) = file_sha256(out)?;
    ensure!(
        len == bytes && sha == expect,
        "SHA-256 mismatch from {url}: got {sha} ({len} bytes), expected {expect}"
    );
    let _ = std::fs::remove_file(out);
    let gb = bytes as f64 / 1e9;
    let server = d.process_cpu + d.system.softirq;
    Ok(Sample {
        gbps: bytes as f64 * 8.0 / secs / 1e9,
        server_s_per_gb: server.as_secs_f64() / gb,
        machine_s_per_gb: d.system.busy().as_secs_f64() / gb,
    })
}

/// The baseline: the same `/bytes/N` logic on a kernel socket, on a thread inside `ns`,
/// for exactly one connection.
fn kernel_server(
    ns: String,
    addr: SocketAddr,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<u64>>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || -> anyhow::Result<u64> {
        let bound = (|| -> anyhow::Result<TcpListener> {
            let _ns = ulnet::channel::sys::netns::enter(&ns)?;
            Ok(TcpListener::bind(addr)?)
        })();
        let listener = match bound {
            Ok(l) => {
                let _ = tx.send(Ok(()));
                l
            }
            Err(e) => {
                let _ = tx.send(Err(e.to_string()));
                return Err(e);
            }
        };
        let (mut s, _) = listener.accept()?;
        serve_one(&mut s)
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(())) => Ok(t),
        Ok(Err(e)) => bail!("kernel server: {e}"),
        Err(_) => bail!("kernel server did not start"),
    }
}

fn serve_one(s: &mut TcpStream) -> anyhow::Result<u64> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf)?;
        ensure!(n > 0 && head.len() < 8192, "bad request");
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    let n: u64 = text
        .split_whitespace()
        .nth(1)
        .and_then(|t| t.strip_prefix("/bytes/"))
        .and_then(|n| n.parse().ok())
        .context("kernel server: not GET /bytes/N")?;
    write!(
        s,
        "HTTP/1.1 200 OK\r\nServer: kernel-baseline\r\nContent-Type: application/octet-stream\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n"
    )?;
    let mut off = 0u64;
    while off < n {
        let len = (n - off).min(pattern::MAX_CHUNK as u64) as usize;
        s.write_all(pattern::slice(off, len))?;
        off += len as u64;
    }
    Ok(off)
}

/// What every round shares.
struct Setup<'a> {
    tb: &'a Testbed,
    args: &'a Args,
    /// ulnet's address.
    ip: IpAddr,
    out: &'a Path,
    bytes: u64,
    /// SHA-256 of the body.
    expect: &'a str,
}

fn ulnet_round(setup: &Setup<'_>, url: &str, mode: &mut String) -> anyhow::Result<Sample> {
    let Setup {
        tb,
        args,
        ip,
        out,
        bytes,
        expect,
    } = *setup;
    let a = tb.a();
    let mut cfg = NetConfig::new(
        args.backend,
        &a.ifname,
        IpCidr::new(ip, a.prefix_len).context("prefix")?,
    )
    .netns(&a.ns);
    cfg.wait = if args.busy_poll {
        WaitMode::BusyPoll
    } else {
        WaitMode::Sleep
    };
    let rt = runtime::open(&cfg).context("opening ulnet's channel")?;
    let caps = rt.channel().capabilities();
    *mode = format!("{} {}", caps.name, caps.mode);
    let app = Http::new(
        &mut rt.iface(),
        SocketAddr::new(ip, 80),
        HttpConfig::default(),
    )?;
    let handle = rt.handle();
    let thread = rt.spawn(app)?;
    let r = fetch(&tb.b().ns, url, out, bytes, expect);
    handle.stop();
    let joined = thread.join();
    let (_rt, app) = match joined {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => return Err(e).context("ulnet runtime"),
        Err(_) => bail!("ulnet runtime panicked"),
    };
    let s = r?;
    ensure!(app.stats().ok == 1, "ulnet served {:?}", app.stats());
    Ok(s)
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    ensure!(
        args.rounds > 0 && args.size_mb > 0,
        "--rounds and --size-mb must be positive"
    );
    ulnet_bench::preflight::require_tool("curl")?;
    let bytes = args.size_mb * 1_000_000;
    println!(
        "ulnet demo: {} MB over HTTP, ulnet vs the kernel",
        args.size_mb
    );
    println!("  commit  {}", commit());
    println!(
        "  kernel  {}",
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
    );
    println!(
        "  cpu     {} ({} cores)",
        first_line("/proc/cpuinfo", "model name").unwrap_or_else(|| "unknown".into()),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let expect = pattern_sha256(bytes);
    let tb = Testbed::builder().name_prefix("demo").build()?;
    let (a, b) = (tb.a(), tb.b());
    let ulnet_ip = a.spare_ip(0);
    println!(
        "  testbed {} ({} {} <-> {} {}, veth, offloads off, MTU {})",
        tb.name(),
        a.ns,
        a.ip,
        b.ns,
        b.ip,
        a.mtu
    );
    let dir = PathBuf::from("/dev/shm").join(format!("ulnet-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let out = dir.join("body");
    let ulnet_url = format!("http://{ulnet_ip}/bytes/{bytes}");
    let kernel_url = format!("http://{}:8080/bytes/{bytes}", a.ip);
    let mut mode = String::new();
    let (mut u, mut k) = (Vec::new(), Vec::new());
    let setup = Setup {
        tb: &tb,
        args: &args,
        ip: ulnet_ip,
        out: &out,
        bytes,
        expect: &expect,
    };
    let result = (|| -> anyhow::Result<()> {
        for round in 1..=args.rounds {
            let s = ulnet_round(&setup, &ulnet_url, &mut mode)?;
            println!(
                "  round {round}: ulnet  {:6.2} Gb/s  {:.3} CPU-s/GB (server)  SHA-256 ok",
                s.gbps, s.server_s_per_gb
            );
            u.push(s);
            let server = kernel_server(a.ns.clone(), SocketAddr::new(a.ip, 8080))?;
            let s = fetch(&b.ns, &kernel_url, &out, bytes, &expect);
            let served = server
                .join()
                .map_err(|_| anyhow::anyhow!("kernel server panicked"))?;
            let s = s?;
            ensure!(served? == bytes, "kernel server sent a short body");
            println!(
                "  round {round}: kernel {:6.2} Gb/s  {:.3} CPU-s/GB (server)  SHA-256 ok",
                s.gbps, s.server_s_per_gb
            );
            k.push(s);
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    let col = |v: &[Sample], f: fn(&Sample) -> f64| median(v.iter().map(f).collect());
    println!();
    println!(
        "  ulnet channel: {mode}; wait: {}",
        if args.busy_poll {
            "busy-poll"
        } else {
            "sleep in poll(2)"
        }
    );
    println!(
        "  medians of {} rounds, {} MB each, SHA-256 {}…",
        args.rounds,
        args.size_mb,
        &expect[..16]
    );
    println!("  | server | rate (Gb/s) | server CPU (s/GB) | machine CPU (s/GB) |");
    println!("  | --- | --- | --- | --- |");
    for (name, v) in [
        ("ulnet (user-level TCP/IP)", &u),
        ("kernel (std::net socket)", &k),
    ] {
        println!(
            "  | {name} | {:.2} | {:.3} | {:.3} |",
            col(v, |s| s.gbps),
            col(v, |s| s.server_s_per_gb),
            col(v, |s| s.machine_s_per_gb)
        );
    }
    println!(
        "  server CPU = this process's CPU time (the serving thread) + machine-wide softirq time;"
    );
    println!("  machine CPU = every core's non-idle time (curl and both kernels included).");
    tb.teardown()?;
    Ok(())
}
