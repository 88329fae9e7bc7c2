//! `ulnet serve iperf3`: an iperf3 server on ulnet's stack, through the socket API
//! (`ulnet::net`), so an unmodified `iperf3 -c` can test it.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use ulnet::net::Stack;
use ulnet_apps::iperf3::{Iperf3Server, DEFAULT_PORT};

use super::serve::Args;

/// Runs the iperf3 server until SIGINT/SIGTERM, `--duration`, or `--limit` tests.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let rt = args.net.open_runtime()?;
    let caps = ulnet::channel::Channel::capabilities(rt.channel());
    let stack = Stack::from_runtime(rt, Vec::new())?;
    let port = args.port.unwrap_or(DEFAULT_PORT);
    // Dual stack (IPv4 and IPv6 --addr): one listener on [::] takes both families (the
    // stack hands IPv4 connections no IPv4 listener claims to it, as Linux does);
    // otherwise the one address.
    let ips = args.net.ips()?;
    let local = if ips.iter().any(IpAddr::is_ipv4) && ips.iter().any(IpAddr::is_ipv6) {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port)
    } else {
        SocketAddr::new(stack.local_ip(), port)
    };
    let server = Iperf3Server::bind_addr(&stack, local)?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let s = Arc::clone(&stop);
        ctrlc::set_handler(move || s.store(true, Ordering::SeqCst))
            .context("installing the SIGINT/SIGTERM handler")?;
    }
    if let Some(secs) = args.duration {
        let s = Arc::clone(&stop);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(secs.max(0.0)));
            s.store(true, Ordering::SeqCst);
        });
    }
    eprintln!(
        "ulnet: iperf3 server on {local} ({} {}, mtu {})",
        caps.name, caps.mode, caps.mtu
    );
    let max_tests = args.limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX));
    server.run(&stop, max_tests, &mut |r| match r {
        Ok(s) => eprintln!("ulnet: iperf3 {s}"),
        Err(e) => eprintln!("ulnet: iperf3 test failed: {e}"),
    })?;
    drop(server);
    stack.stop()?;
    eprintln!("ulnet: stopped");
    Ok(())
}
