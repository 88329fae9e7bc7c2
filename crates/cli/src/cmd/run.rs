//! `ulnet run -- PROGRAM ARGS`: runs an unmodified program on ulnet. It sets
//! LD_PRELOAD to the interposer (`libulnet_preload.so`, crates/capi/preload) and the
//! settings it reads from the environment, then execs PROGRAM in place (same pid, so
//! signals and exit codes are the program's own). See docs/capi.md.

use std::net::IpAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// The interposer's file name.
const LIB: &str = "libulnet_preload.so";

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Channel backend: xdp (AF_XDP + steering program), packet (AF_PACKET), tap.
    #[arg(long, default_value = "xdp")]
    pub backend: String,
    /// Interface to attach to (xdp, packet) or TAP device to create (tap).
    #[arg(long = "iface")]
    pub iface: String,
    /// ulnet's own address with prefix, e.g. 198.18.0.16/24 (not the kernel's).
    #[arg(long)]
    pub addr: String,
    /// Network namespace the interface is in (the program itself runs where `ulnet run`
    /// runs; its kernel sockets stay there).
    #[arg(long)]
    pub netns: Option<String>,
    /// Default gateway (then every non-loopback IPv4 destination goes to ulnet).
    #[arg(long)]
    pub gateway: Option<IpAddr>,
    /// Move every non-loopback IPv4 socket to ulnet, not only those bound to ulnet's
    /// address or talking to its subnet.
    #[arg(long)]
    pub all: bool,
    /// Spin on the rings instead of sleeping in poll(2) (one core at 100%).
    #[arg(long)]
    pub busy_poll: bool,
    /// xdp, packet: send TCP segment by segment, without the bursts of up to 64 KB for the
    /// kernel's GSO (or the device's TSO) to cut that go by default (ULNET_GSO=0).
    #[arg(long)]
    pub no_gso: bool,
    /// xdp: turn off the steering program's SYN policer (ULNET_SYN_POLICER=0).
    #[arg(long)]
    pub no_syn_policer: bool,
    /// xdp on a veth whose other end is this host's kernel: take its TCP super-frames
    /// whole (ULNET_RX_SUPER_FRAMES=1; `ulnet serve --help`).
    #[arg(long)]
    pub rx_super_frames: bool,
    /// Record every frame in and out to this pcap file.
    #[arg(long)]
    pub pcap: Option<PathBuf>,
    /// The interposer library (default: $ULNET_PRELOAD_LIB, else libulnet_preload.so
    /// next to this binary or in ../lib/ulnet/).
    #[arg(long)]
    pub lib: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    pub program: Vec<String>,
}

/// Where the interposer is.
fn find_lib(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("ULNET_PRELOAD_LIB") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("cannot find the ulnet binary's path")?;
    let dir = exe.parent().context("the ulnet binary has no directory")?;
    let candidates = [dir.join(LIB), dir.join("../lib/ulnet").join(LIB)];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .with_context(|| {
            format!(
                "{LIB} not found next to {} nor in ../lib/ulnet (build it with \
                 `cargo build -p ulnet-preload`, or pass --lib)",
                exe.display()
            )
        })
}

/// Runs the subcommand: on success it does not return (the program replaces it).
pub fn run(args: Args) -> anyhow::Result<()> {
    if !["xdp", "packet", "tap"].contains(&args.backend.as_str()) {
        bail!("unknown backend {:?} (xdp, packet or tap)", args.backend);
    }
    if !args.addr.contains('/') {
        bail!("--addr needs a prefix length, e.g. 198.18.0.16/24");
    }
    let lib = find_lib(args.lib.as_deref())?;
    let lib = lib
        .canonicalize()
        .with_context(|| format!("interposer {}", lib.display()))?;
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", lib.display()),
        _ => lib.display().to_string(),
    };
    let (program, rest) = args.program.split_first().context("no program given")?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest)
        .env("LD_PRELOAD", preload)
        .env("ULNET_BACKEND", &args.backend)
        .env("ULNET_IFACE", &args.iface)
        .env("ULNET_ADDR", &args.addr)
        .env("ULNET_SOCKETS", if args.all { "all" } else { "auto" });
    for var in [
        "ULNET_NETNS",
        "ULNET_GATEWAY",
        "ULNET_PCAP",
        "ULNET_BUSY_POLL",
        "ULNET_GSO",
        "ULNET_SYN_POLICER",
    ] {
        cmd.env_remove(var);
    }
    if let Some(ns) = &args.netns {
        cmd.env("ULNET_NETNS", ns);
    }
    if let Some(g) = args.gateway {
        cmd.env("ULNET_GATEWAY", g.to_string());
    }
    if let Some(p) = &args.pcap {
        cmd.env("ULNET_PCAP", p);
    }
    if args.busy_poll {
        cmd.env("ULNET_BUSY_POLL", "1");
    }
    if args.no_gso {
        cmd.env("ULNET_GSO", "0");
    }
    if args.no_syn_policer {
        cmd.env("ULNET_SYN_POLICER", "0");
    }
    if args.rx_super_frames {
        cmd.env("ULNET_RX_SUPER_FRAMES", "1");
    }
    let e = cmd.exec();
    Err(e).with_context(|| format!("cannot run {program}"))
}
