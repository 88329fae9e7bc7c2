//! Runs the data-path measurement scenarios and prints their tables.
//!
//! ```text
//! cargo run --release -p ulnet-bench --features scenarios --example scenarios -- \
//!     [udp] [tcp] [--rounds N] [--busy-poll | --sleep] [--spin-us US] [--seconds S] [--mb M] [--mtu MTU]
//! ```
//! With neither `udp` nor `tcp`, both run. Needs root (namespaces, AF_XDP).

use std::time::Duration;

use ulnet::runtime::WaitMode;
use ulnet_bench::scenarios::{tcp_rx_vs_kernel, udp_echo_vs_raw, TcpRxOptions, UdpEchoOptions};

fn value<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    let i = args.iter().position(|a| a == name)?;
    match args.get(i + 1).map(|v| v.parse()) {
        Some(Ok(v)) => Some(v),
        _ => {
            eprintln!("{name} needs a value");
            std::process::exit(2);
        }
    }
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let has = |s: &str| args.iter().any(|a| a == s);
    let (udp, tcp) = match (has("udp"), has("tcp")) {
        (false, false) => (true, true),
        v => v,
    };
    let rounds = value(&args, "--rounds").unwrap_or(3);
    let busy = has("--busy-poll");
    let spin = value::<u64>(&args, "--spin-us").map(Duration::from_micros);
    if udp {
        let mut o = UdpEchoOptions {
            rounds,
            spin,
            ..Default::default()
        };
        if let Some(s) = value::<f64>(&args, "--seconds") {
            o.duration = Duration::from_secs_f64(s);
        }
        o.wait = if has("--sleep") {
            WaitMode::Sleep
        } else {
            WaitMode::BusyPoll
        };
        println!("{}", udp_echo_vs_raw(&o)?);
    }
    if tcp {
        let mut o = TcpRxOptions {
            rounds,
            spin,
            wait: if busy {
                WaitMode::BusyPoll
            } else {
                WaitMode::Sleep
            },
            ..Default::default()
        };
        if let Some(mb) = value::<u64>(&args, "--mb") {
            o.bytes = mb * 1_000_000;
        }
        if let Some(mtu) = value::<u32>(&args, "--mtu") {
            o.mtu = mtu;
        }
        println!("{}", tcp_rx_vs_kernel(&o)?);
    }
    Ok(())
}
