//! `ulnet ping`: ICMP echo from ulnet's stack, printed like ping(8).

use std::net::IpAddr;

use anyhow::Context as _;

use ulnet::stack::time::Duration;
use ulnet_apps::ping::{Ping, PingConfig, PingEvent};

use super::serve::{stop_on_signals, NetArgs};

/// Arguments of `ping`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Whom to ping.
    pub target: IpAddr,
    #[command(flatten)]
    pub net: NetArgs,
    /// Requests to send.
    #[arg(short = 'c', long, default_value_t = 4)]
    pub count: u16,
    /// Seconds between requests.
    #[arg(short = 'i', long, default_value_t = 1.0)]
    pub interval: f64,
    /// Seconds to wait for replies after the last request.
    #[arg(short = 'W', long, default_value_t = 1.0)]
    pub timeout: f64,
    /// ICMP payload bytes.
    #[arg(short = 's', long, default_value_t = 56)]
    pub size: usize,
}

/// Runs the subcommand; fails when no reply came back.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut rt = args.net.open_runtime()?;
    let mut pc = PingConfig::new(args.target, args.count);
    pc.interval = Duration::from_secs_f64(args.interval.max(0.0));
    pc.timeout = Duration::from_secs_f64(args.timeout.max(0.0));
    pc.payload_len = args.size;
    let target = args.target;
    let mut app = Ping::new(
        &mut rt.iface(),
        pc,
        Box::new(move |e| match e {
            PingEvent::Reply {
                from,
                seq,
                len,
                rtt,
            } => match rtt {
                Some(d) => println!(
                    "{} bytes from {from}: icmp_seq={seq} time={:.3} ms",
                    len + 8,
                    d.as_secs_f64() * 1e3
                ),
                None => println!("{} bytes from {from}: icmp_seq={seq}", len + 8),
            },
            PingEvent::SendFailed { seq } => println!("icmp_seq={seq}: send buffer full"),
            _ => {}
        }),
    )?;
    let source = args
        .net
        .ips()?
        .into_iter()
        .find(|a| a.is_ipv6() == target.is_ipv6())
        .with_context(|| {
            format!(
                "no --addr of {target}'s family ({})",
                if target.is_ipv6() { "IPv6" } else { "IPv4" }
            )
        })?;
    println!("PING {target} from {source}: {} data bytes", args.size);
    stop_on_signals(&rt.handle())?;
    let start = std::time::Instant::now();
    rt.run(&mut app)?;
    let s = app.summary();
    let loss = if s.transmitted == 0 {
        0.0
    } else {
        100.0 * f64::from(s.transmitted - s.received.min(s.transmitted)) / f64::from(s.transmitted)
    };
    println!("\n--- {target} ping statistics ---");
    println!(
        "{} packets transmitted, {} received, {loss:.0}% packet loss, time {} ms",
        s.transmitted,
        s.received,
        start.elapsed().as_millis()
    );
    if let Some((min, avg, max, mdev)) = s.rtt_ms {
        println!("rtt min/avg/max/mdev = {min:.3}/{avg:.3}/{max:.3}/{mdev:.3} ms");
    }
    anyhow::ensure!(s.received > 0, "no reply from {target}");
    Ok(())
}
