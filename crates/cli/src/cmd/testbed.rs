//! `ulnet testbed up|down|list`: test hosts (two network namespaces joined by a veth pair)
//! made and removed from the command line, for manual experiments and for cleaning up after
//! crashed runs. The work is done by `ulnet_bench::testbed`; this file only maps arguments
//! and prints JSON.

use anyhow::Context as _;
use ulnet_bench::testbed::{self, Testbed, DEFAULT_MTU};

/// Subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Create a testbed and leave it in place; print it as JSON (namespaces, interfaces,
    /// MAC and IP addresses, prefix, spare addresses for ulnet).
    Up(UpArgs),
    /// Remove testbeds by name, or every testbed on this machine with --all.
    Down(DownArgs),
    /// Print every testbed on this machine as a JSON array (broken ones with an "error").
    List,
}

/// Arguments of `testbed up`.
#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Label after `ulnet-` in the names (a-z, 0-9, _).
    #[arg(long, default_value = "cli")]
    label: String,
    /// MTU of both veth ends (jumbo frames allowed, up to 65535).
    #[arg(long, default_value_t = DEFAULT_MTU)]
    mtu: u32,
    /// Leave the kernel's checksum/segmentation/GRO offloads on (kernel-only baselines).
    #[arg(long)]
    kernel_offloads: bool,
    /// Dual stack: IPv6 on both veth ends with 2001:2:0:<slot>::1 and ::2 (/64, no DAD, no
    /// kernel link-local) and spare IPv6 addresses for ulnet.
    #[arg(long)]
    ipv6: bool,
}

/// Arguments of `testbed down`.
#[derive(Debug, clap::Args)]
pub struct DownArgs {
    /// Testbed names, as `up` and `list` print them.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    names: Vec<String>,
    /// Remove every ulnet testbed (every namespace named `ulnet-...-a`/`-b`).
    #[arg(long)]
    all: bool,
    /// With --all: only testbeds with this label.
    #[arg(long, requires = "all")]
    label: Option<String>,
}

/// Runs the subcommand.
pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Up(args) => up(args),
        Command::Down(args) => down(args),
        Command::List => list(),
    }
}

fn up(args: UpArgs) -> anyhow::Result<()> {
    let testbed = Testbed::builder()
        .name_prefix(args.label)
        .mtu(args.mtu)
        .kernel_offloads(args.kernel_offloads)
        .ipv6(args.ipv6)
        .keep(true)
        .build()
        .context("cannot build the testbed")?;
    println!("{}", testbed.to_json());
    Ok(())
}

fn down(args: DownArgs) -> anyhow::Result<()> {
    let removed = if args.all {
        testbed::down_all(args.label.as_deref()).context("cannot remove every testbed")?
    } else {
        for name in &args.names {
            testbed::down(name).with_context(|| format!("cannot remove {name}"))?;
        }
        args.names
    };
    println!("{}", serde_json::json!({ "removed": removed }));
    Ok(())
}

/// One `list` entry: a testbed as read back, or one too broken to read (half-built or
/// half-removed), which `down` still removes.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Entry {
    // Boxed: a testbed's description (with its IPv6 fields) dwarfs the broken variant.
    Ok(Box<testbed::TestbedInfo>),
    Broken { name: String, error: String },
}

fn list() -> anyhow::Result<()> {
    let entries: Vec<Entry> = testbed::list()?
        .into_iter()
        .map(|name| match testbed::inspect(&name) {
            Ok(info) => Entry::Ok(Box::new(info)),
            Err(e) => Entry::Broken {
                name,
                error: e.to_string(),
            },
        })
        .collect();
    println!("{}", serde_json::to_string_pretty(&entries)?);
    Ok(())
}
