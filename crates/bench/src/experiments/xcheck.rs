//! An independent UDP load generator and counters, to cross-check the bench's own
//! (issue 14: the echo knee must agree with a tool no one here wrote).
//!
//! `sockperf under-load` sends from B, from its own kernel socket, datagrams of the
//! flood's payload length to the echo service at the flood's destination, paced by its
//! own busy-waiting sender (`--mps`) or as fast as it goes (`--mps=max`); two nftables
//! counters on B's interface count what left (egress hook) and the echoes that came back
//! (ingress hook, where they are also dropped, so sockperf's receiver stays idle and
//! B's stack sends no port unreachables). Neither the pacing nor either count passes
//! through the bench's code.
//!
//! Why sockperf and not netsniff-ng's trafgen (tried first): trafgen's `--rate` sends
//! bursts at line rate separated by ~10 ms pauses (a capture at 100 kpps showed a median
//! gap of 2 µs), which overflow a socket buffer at any average rate (both echo services
//! lost 13-35% from 91 kpps up, where the bench's evenly paced generator saw < 1%), and
//! its evenly spaced `--gap` mode stops at ~45 kpps here, below the knee. sockperf's sender
//! held 250 kpps evenly paced.

use std::io;
use std::net::IpAddr;
use std::time::Duration;

use super::load::{Flood, FLOOD_SRC_PORT};
use crate::exec;
use crate::harness::{io_err, LOAD_CPU};

/// Counts, on B's interface, the flood's datagrams leaving (to the flood's destination
/// and port from [`FLOOD_SRC_PORT`]) and their echoes arriving (dropped there). Removed
/// when dropped.
pub(crate) struct Counters {
    ns: String,
    table: String,
}

impl Counters {
    /// Installs the counters in the flood's namespace, on its interface.
    ///
    /// # Errors
    /// `nft` failed (the egress hook needs Linux 5.16).
    pub(crate) fn install(f: &Flood) -> io::Result<Counters> {
        let table = format!("ulnet_xcheck_{}", std::process::id());
        let family = match f.ips.1 {
            IpAddr::V4(_) => "ip",
            IpAddr::V6(_) => "ip6",
        };
        let rules = format!(
            "table netdev {table} {{\n  counter offered {{}}\n  counter echoes {{}}\n  \
             chain egress {{\n    type filter hook egress device \"{dev}\" priority 0;\n    \
             {family} daddr {peer} udp sport {me} udp dport {port} counter name offered\n  }}\n  \
             chain ingress {{\n    type filter hook ingress device \"{dev}\" priority 0;\n    \
             {family} saddr {peer} udp sport {port} udp dport {me} counter name echoes drop\n  }}\n}}\n",
            dev = f.ifname,
            peer = f.ips.1,
            port = f.port,
            me = FLOOD_SRC_PORT,
        );
        let path = std::env::temp_dir().join(format!("{table}.nft"));
        std::fs::write(&path, rules)?;
        let r = exec::run_in(&f.ns, "nft", ["-f", path.to_string_lossy().as_ref()]);
        let _ = std::fs::remove_file(&path);
        r.map_err(io_err)?;
        Ok(Counters {
            ns: f.ns.clone(),
            table,
        })
    }

    /// One counter's packets since it was last read (it is reset as it is read).
    fn take(&self, name: &str) -> io::Result<u64> {
        let out = exec::run_in(
            &self.ns,
            "nft",
            ["reset", "counter", "netdev", self.table.as_str(), name],
        )
        .map_err(io_err)?;
        parse_counter_packets(&String::from_utf8_lossy(&out.stdout))
            .ok_or_else(|| io_err(format!("nft printed no packet count for {name}")))
    }
}

impl Drop for Counters {
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

/// What one sockperf run offered and how many echoes came back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct XcheckDone {
    /// Datagrams counted leaving B.
    pub sent: u64,
    /// sockperf's test time (its own timer; the few warm-up datagrams before it are
    /// counted in `sent`).
    pub elapsed: Duration,
    /// Echoes counted arriving at B, over the run and `drain` after it.
    pub echoed: u64,
}

/// Runs `sockperf under-load` on the load core for `secs` seconds against the flood's
/// destination, `mps` datagrams per second or (`None`) as many as it can, every one
/// asking for a reply (so sockperf's own server would echo each, like the echo services
/// here); then waits `drain` and reads the counters (reset first).
///
/// # Errors
/// sockperf or nft failed.
pub(crate) fn echo_load(
    f: &Flood,
    c: &Counters,
    mps: Option<u64>,
    secs: u64,
    drain: Duration,
) -> io::Result<XcheckDone> {
    crate::preflight::require_tool("sockperf").map_err(io_err)?;
    c.take("offered")?;
    c.take("echoes")?;
    let args = sockperf_args(f, mps, secs);
    let out = exec::run_in(&f.ns, "taskset", &args);
    out.map_err(io_err)?;
    std::thread::sleep(drain);
    Ok(XcheckDone {
        sent: c.take("offered")?,
        elapsed: Duration::from_secs(secs),
        echoed: c.take("echoes")?,
    })
}

/// `taskset`'s arguments for the sockperf client of [`echo_load`].
fn sockperf_args(f: &Flood, mps: Option<u64>, secs: u64) -> Vec<String> {
    [
        "-c".into(),
        LOAD_CPU.to_string(),
        "sockperf".into(),
        "under-load".into(),
        "-i".into(),
        f.ips.1.to_string(),
        "-p".into(),
        f.port.to_string(),
        "-m".into(),
        f.payload_len.to_string(),
        format!("--mps={}", mps.map_or("max".into(), |m| m.to_string())),
        "--reply-every=1".into(),
        "-t".into(),
        secs.to_string(),
        "--client_port".into(),
        FLOOD_SRC_PORT.to_string(),
    ]
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn reads_nft_counters() {
        let nft =
            "table netdev x {\n\tcounter echoes {\n\t\tpackets 199912 bytes 210307424\n\t}\n}\n";
        assert_eq!(parse_counter_packets(nft), Some(199_912));
        assert_eq!(parse_counter_packets("counter echoes {}"), None);
    }

    #[test]
    fn sockperf_sends_the_generators_datagrams() {
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
        let a = sockperf_args(&f, Some(150_000), 2).join(" ");
        assert_eq!(
            a,
            format!("-c {LOAD_CPU} sockperf under-load -i 198.18.1.16 -p 7 -m 1024 --mps=150000 --reply-every=1 -t 2 --client_port {FLOOD_SRC_PORT}")
        );
        assert!(sockperf_args(&f, None, 1).join(" ").contains("--mps=max"));
    }
}
