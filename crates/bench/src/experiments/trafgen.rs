//! An independent UDP load generator and echo counter, to cross-check the bench's own
//! (issue 14: the echo knee must agree with a tool no one here wrote).
//!
//! netsniff-ng's `trafgen` sends, from B, the same Ethernet/IP/UDP frames as
//! [`super::load::xdp_echo_load`] (same addresses, ports and payload length), paced by
//! its own rate option or unpaced, and an nftables counter at B's ingress hook counts the
//! echoes (and drops them before B's stack would answer them with port unreachables).
//! Neither the pacing, nor the count of what was sent (trafgen's own report), nor the
//! count of echoes (the kernel's nftables counter) passes through the bench's code.

use std::io;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::load::{Flood, FLOOD_SRC_PORT};
use crate::exec;
use crate::harness::{io_err, LOAD_CPU};

/// Counts and drops, at B's ingress, the echoes of one flood: UDP from the flood's
/// destination and port back to its source port. Removed when dropped.
pub(crate) struct EchoCounter {
    ns: String,
    table: String,
}

impl EchoCounter {
    /// Installs the counter in the flood's namespace, on its interface.
    ///
    /// # Errors
    /// `nft` failed.
    pub(crate) fn install(f: &Flood) -> io::Result<EchoCounter> {
        let table = format!("ulnet_xcheck_{}", std::process::id());
        let family = match f.ips.1 {
            IpAddr::V4(_) => "ip",
            IpAddr::V6(_) => "ip6",
        };
        let rules = format!(
            "table netdev {table} {{\n  counter echoes {{}}\n  chain ingress {{\n    \
             type filter hook ingress device \"{dev}\" priority 0;\n    \
             {family} saddr {src} udp sport {port} udp dport {dport} counter name echoes drop\n  }}\n}}\n",
            dev = f.ifname,
            src = f.ips.1,
            port = f.port,
            dport = FLOOD_SRC_PORT,
        );
        let path = scratch_file(&format!("{table}.nft"), &rules)?;
        let r = exec::run_in(&f.ns, "nft", ["-f", path.to_string_lossy().as_ref()]);
        let _ = std::fs::remove_file(&path);
        r.map_err(io_err)?;
        Ok(EchoCounter {
            ns: f.ns.clone(),
            table,
        })
    }

    /// Echoes counted since the last call (the counter is reset as it is read).
    ///
    /// # Errors
    /// `nft` failed or printed no packet count.
    pub(crate) fn take(&self) -> io::Result<u64> {
        let out = exec::run_in(
            &self.ns,
            "nft",
            ["reset", "counter", "netdev", self.table.as_str(), "echoes"],
        )
        .map_err(io_err)?;
        parse_counter_packets(&String::from_utf8_lossy(&out.stdout))
            .ok_or_else(|| io_err("nft printed no packet count"))
    }
}

impl Drop for EchoCounter {
    fn drop(&mut self) {
        let _ = exec::run_in(
            &self.ns,
            "nft",
            ["delete", "table", "netdev", self.table.as_str()],
        );
    }
}

/// `packets N` of an `nft list/reset counter` answer.
fn parse_counter_packets(text: &str) -> Option<u64> {
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == "packets" {
            return words.next()?.parse().ok();
        }
    }
    None
}

/// What one trafgen run sent and how many echoes came back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TrafgenDone {
    /// Frames trafgen reports sent.
    pub sent: u64,
    /// Its sending span: the wall time of the process. (Its exit report's time is not the
    /// span: asked for 300 kpps it reported 1.0 s for a run that took 2.8 s.)
    pub elapsed: Duration,
    /// Echoes counted at B's ingress, over the span and `drain` after it.
    pub echoed: u64,
}

/// Sends `count` frames of `f` with trafgen on the load core, at `pps` frames per second
/// (its `-b` option) or, with `None`, as fast as it can (its TX_RING), then waits `drain`
/// and reads the echo counter (reset first).
///
/// # Errors
/// trafgen or nft failed, or trafgen's report could not be read.
pub(crate) fn echo_load(
    f: &Flood,
    counter: &EchoCounter,
    pps: Option<u64>,
    count: u64,
    drain: Duration,
) -> io::Result<TrafgenDone> {
    let conf = scratch_file(
        &format!("ulnet_trafgen_{}.cfg", std::process::id()),
        &config(f),
    )?;
    counter.take()?;
    let cpu = LOAD_CPU.to_string();
    let count_s = count.to_string();
    let rate = pps.map(|p| format!("{p}pps"));
    let mut args: Vec<&str> = vec![
        "-c",
        cpu.as_str(),
        "trafgen",
        "--dev",
        f.ifname.as_str(),
        "--conf",
        conf.to_str().unwrap_or_default(),
        // One process (it forks one per CPU otherwise), leave IRQ affinities alone.
        "--cpus",
        "1",
        "--notouch-irq",
        "--num",
        count_s.as_str(),
    ];
    if let Some(r) = &rate {
        args.extend(["--rate", r.as_str()]);
    }
    crate::preflight::require_tool("trafgen").map_err(io_err)?;
    let t = Instant::now();
    let out = exec::run_in(&f.ns, "taskset", &args);
    let wall = t.elapsed();
    let _ = std::fs::remove_file(&conf);
    let out = out.map_err(io_err)?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let sent = parse_report(&text)
        .ok_or_else(|| io_err(format!("no packet count in trafgen's report: {text}")))?;
    std::thread::sleep(drain);
    let echoed = counter.take()?;
    Ok(TrafgenDone {
        sent,
        elapsed: wall,
        echoed,
    })
}

/// trafgen's packet configuration for the flood's frame: the same headers and payload
/// length as the bench's generator (`fill` bytes; trafgen computes lengths and
/// checksums).
fn config(f: &Flood) -> String {
    let mac = |m: [u8; 6]| {
        m.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    let ip = match f.ips {
        (IpAddr::V6(s), IpAddr::V6(d)) => format!("ipv6(saddr={s}, daddr={d}, hl=64)"),
        (s, d) => format!("ipv4(saddr={s}, daddr={d}, ttl=64, df)"),
    };
    format!(
        "{{\n  eth(da={}, sa={}),\n  {ip},\n  udp(sp={FLOOD_SRC_PORT}, dp={}),\n  fill(0x55, {})\n}}\n",
        mac(f.macs.1),
        mac(f.macs.0),
        f.port,
        f.payload_len
    )
}

/// The packet count (`N packets outgoing`) of trafgen's exit report.
fn parse_report(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let w: Vec<&str> = line.split_whitespace().collect();
        (w.len() >= 3 && w[1] == "packets" && w[2] == "outgoing")
            .then(|| w[0].parse().ok())
            .flatten()
    })
}

/// Writes `text` to `name` in the temporary directory.
fn scratch_file(name: &str, text: &str) -> io::Result<PathBuf> {
    let p = std::env::temp_dir().join(name);
    std::fs::write(&p, text)?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn reads_trafgen_and_nft_reports() {
        let report = "\n      200000 packets outgoing\n   213200000 bytes outgoing\n           2 sec, 94 usec on CPU0 (200000 packets)\n";
        assert_eq!(parse_report(report), Some(200_000));
        assert_eq!(parse_report("nothing"), None);
        let nft =
            "table netdev x {\n\tcounter echoes {\n\t\tpackets 199912 bytes 210307424\n\t}\n}\n";
        assert_eq!(parse_counter_packets(nft), Some(199_912));
        assert_eq!(parse_counter_packets("counter echoes {}"), None);
    }

    #[test]
    fn the_frame_is_the_generators() {
        let f = Flood {
            ns: "n".into(),
            ifname: "ul1b".into(),
            macs: ([2, 0, 0, 0, 0, 0xb], [2, 0, 0, 0, 0, 0xa]),
            ips: (
                IpAddr::V4(Ipv4Addr::new(198, 18, 1, 144)),
                IpAddr::V4(Ipv4Addr::new(198, 18, 1, 16)),
            ),
            port: 7,
            payload_len: 1024,
        };
        let c = config(&f);
        assert!(
            c.contains("eth(da=02:00:00:00:00:0a, sa=02:00:00:00:00:0b)"),
            "{c}"
        );
        assert!(
            c.contains("ipv4(saddr=198.18.1.144, daddr=198.18.1.16"),
            "{c}"
        );
        assert!(
            c.contains(&format!("udp(sp={FLOOD_SRC_PORT}, dp=7)")),
            "{c}"
        );
        assert!(c.contains("fill(0x55, 1024)"), "{c}");
    }
}
