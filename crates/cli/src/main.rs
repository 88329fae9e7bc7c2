//! The `ulnet` command-line tool: one subcommand per file under `cmd/`.
#![forbid(unsafe_code)]

mod cmd;

use clap::{Parser, Subcommand};

/// User-level networking for Linux: a TCP/IP stack in your process over kernel-bypass
/// channels, and the experiments that show what bypassing the kernel buys.
#[derive(Debug, Parser)]
#[command(name = "ulnet", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the seed experiments, ulnet against the kernel side by side, and write a report.
    Bench(cmd::bench::Args),
    /// Ping from ulnet's stack over a bypass channel, like ping(8).
    Ping(cmd::ping::Args),
    /// Run packetdrill scripts against ulnet's TCP engine in virtual time.
    Pktest(cmd::pktest::Args),
    /// Run an unmodified program with its Internet sockets on ulnet (LD_PRELOAD).
    Run(cmd::run::Args),
    /// Serve echo, discard, chargen or HTTP from ulnet's stack over a bypass channel.
    Serve(cmd::serve::Args),
    /// Run transfers between stacks on the simulated wire, in virtual time.
    #[command(subcommand)]
    Sim(cmd::sim::Command),
    /// Build, list and remove test hosts (network namespaces joined by veth).
    #[command(subcommand)]
    Testbed(cmd::testbed::Command),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => cmd::bench::run(args),
        Command::Ping(args) => cmd::ping::run(args),
        Command::Pktest(args) => cmd::pktest::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Sim(c) => cmd::sim::run(c),
        Command::Testbed(c) => cmd::testbed::run(c),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ulnet: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
