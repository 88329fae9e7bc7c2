//! The steering program's maps, loading and attachment (with native→generic fallback).
//!
//! The program is attached through a BPF link ([`XdpLink`]): it detaches when the
//! channel is dropped and, because the kernel closes a dead process's descriptors, when
//! the process crashes or is killed.

use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;

use super::program::{
    rule_key, steering_program, MapFds, Steer, SynMapFds, SYN_DROPPED, SYN_INTERVAL,
    SYN_SRC_INTERVAL, SYN_SRC_TOLERANCE, SYN_STATE_LEN, SYN_TOLERANCE,
};
use crate::sys::bpf::{Map, MapType, Program, XdpLink, XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE};
use crate::{Error, Result};

/// Largest number of addresses (IPv4, and IPv6 with their solicited-node groups) and of
/// flow rules the maps hold.
pub const MAX_ENTRIES: u32 = 256;

/// A flow the steering program sends to ulnet: IP protocol number and destination port
/// (`0` = every port, and the only value that makes sense for protocols without ports,
/// e.g. ICMP = 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowRule {
    /// IP protocol number (6 TCP, 17 UDP, 1 ICMP, ...).
    pub protocol: u8,
    /// Destination port in host order; 0 matches any port.
    pub dst_port: u16,
}

impl FlowRule {
    /// TCP to `port`.
    pub fn tcp(port: u16) -> Self {
        FlowRule {
            protocol: 6,
            dst_port: port,
        }
    }
    /// UDP to `port`.
    pub fn udp(port: u16) -> Self {
        FlowRule {
            protocol: 17,
            dst_port: port,
        }
    }
    /// All of ICMP (echo, errors).
    pub fn icmp() -> Self {
        FlowRule {
            protocol: 1,
            dst_port: 0,
        }
    }
}

/// The steering program's SYN policer (see [`program`](super::program)): SYNs (without
/// ACK) for ulnet up to `rate` per second pass whatever their source; above it, each
/// source (IPv4 address, IPv6 /64) passes up to `per_source_rate`, the rest are dropped
/// in the XDP program and counted (`Stats::rx_policed`). Connections already open are
/// never touched.
///
/// Why on by default: without it, a flood of spoofed SYNs from one host fills the
/// AF_XDP receive ring and the ring drops the segments of open connections and the
/// requests of new ones (measured: docs/attack.md). The defaults are far above what one
/// client asks for (a load generator opening connections without keep-alive makes a
/// few thousand a second here) and well below what ulnet answers with SYN cookies on
/// this machine (about 180,000 SYNs/s), so a flood leaves it time for its connections.
/// A server that must accept more new connections a second turns it off or raises it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SynPolicer {
    /// SYNs per second passed whatever their source.
    pub rate: u32,
    /// SYNs above `rate` that may arrive at once (the bucket's depth).
    pub burst: u32,
    /// Above `rate`, SYNs per second passed from one source.
    pub per_source_rate: u32,
    /// A source's burst above its rate.
    pub per_source_burst: u32,
    /// Sources remembered at once (least recently used evicted first).
    pub sources: u32,
}

impl Default for SynPolicer {
    /// 25,000 SYNs/s (burst 256); above that 500 per source (burst 8); 65,536 sources.
    /// The bursts are what a flood gets through at once, before any rate applies:
    /// together they must stay well inside the receive ring (2,048 by default); and what
    /// is admitted must leave ulnet time for the connections it serves. Measured with a
    /// download running (docs/attack.md): bursts of 5,000 and 100 left 6,000-11,000 ring
    /// drops per flood, 50,000/s with bursts of 512 and 16 still 3,000-11,000, these
    /// defaults 0-500.
    fn default() -> Self {
        SynPolicer {
            rate: 25_000,
            burst: 256,
            per_source_rate: 500,
            per_source_burst: 8,
            sources: 65_536,
        }
    }
}

impl SynPolicer {
    /// The policer's initial state: an empty global bucket, the intervals and
    /// tolerances in nanoseconds, no drops (layout: `program::SYN_*`).
    fn state(&self) -> [u8; SYN_STATE_LEN as usize] {
        let interval = |rate: u32| 1_000_000_000 / u64::from(rate.max(1));
        let mut v = [0u8; SYN_STATE_LEN as usize];
        let mut put = |off: i16, x: u64| {
            let o = off as usize;
            v[o..o + 8].copy_from_slice(&x.to_ne_bytes());
        };
        let (g, s) = (interval(self.rate), interval(self.per_source_rate));
        put(SYN_INTERVAL, g);
        put(SYN_TOLERANCE, g.saturating_mul(u64::from(self.burst)));
        put(SYN_SRC_INTERVAL, s);
        put(
            SYN_SRC_TOLERANCE,
            s.saturating_mul(u64::from(self.per_source_burst)),
        );
        v
    }
}

/// XDP attach mode preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// Native (driver) mode, falling back to generic mode when the driver refuses.
    #[default]
    Auto,
    /// Native mode only.
    Native,
    /// Generic (skb) mode only.
    Generic,
}

/// The maps the steering program reads.
#[derive(Debug)]
pub struct SteeringMaps {
    /// rx queue index → AF_XDP socket.
    pub xsks: Map,
    addrs4: Map,
    addrs6: Map,
    rules: Map,
    /// The SYN policer's state and source buckets, when it is on.
    syn: Option<(Map, Map)>,
}

fn invalid(op: &'static str) -> Error {
    Error::new(op, io::Error::from_raw_os_error(libc::EINVAL))
}

impl SteeringMaps {
    /// Creates empty maps for queues `0..queue_count`, and the SYN policer's when `syn`
    /// is given.
    ///
    /// # Errors
    /// `bpf(BPF_MAP_CREATE)` (e.g. `EPERM` with a hint).
    pub fn create(queue_count: u32, syn: Option<&SynPolicer>) -> Result<Self> {
        let syn = match syn {
            Some(p) => {
                let state = Map::create(MapType::Array, "ulnet_syn", 4, SYN_STATE_LEN, 1)?;
                state.update(&0u32.to_ne_bytes(), &p.state())?;
                let sources =
                    Map::create(MapType::LruHash, "ulnet_syn_src", 8, 8, p.sources.max(1))?;
                Some((state, sources))
            }
            None => None,
        };
        Ok(SteeringMaps {
            xsks: Map::create(MapType::Xskmap, "ulnet_xsks", 4, 4, queue_count.max(1))?,
            addrs4: Map::create(MapType::Hash, "ulnet_addr4", 4, 1, MAX_ENTRIES)?,
            addrs6: Map::create(MapType::Hash, "ulnet_addr6", 16, 1, MAX_ENTRIES)?,
            rules: Map::create(MapType::Hash, "ulnet_rules", 4, 1, MAX_ENTRIES)?,
            syn,
        })
    }

    /// SYNs the policer dropped so far (0 without a policer).
    ///
    /// # Errors
    /// `bpf(BPF_MAP_LOOKUP_ELEM)`.
    pub fn syn_dropped(&self) -> Result<u64> {
        let Some((state, _)) = &self.syn else {
            return Ok(0);
        };
        let mut v = [0u8; SYN_STATE_LEN as usize];
        state.lookup(&0u32.to_ne_bytes(), &mut v)?;
        let o = SYN_DROPPED as usize;
        let mut d = [0u8; 8];
        d.copy_from_slice(&v[o..o + 8]);
        Ok(u64::from_ne_bytes(d))
    }

    /// The descriptors the program generator embeds.
    pub fn fds(&self) -> MapFds {
        MapFds {
            xsks: self.xsks.as_raw_fd(),
            addrs4: self.addrs4.as_raw_fd(),
            addrs6: self.addrs6.as_raw_fd(),
            rules: self.rules.as_raw_fd(),
            syn: self.syn.as_ref().map(|(state, sources)| SynMapFds {
                state: state.as_raw_fd(),
                sources: sources.as_raw_fd(),
            }),
        }
    }

    /// Steers frames for `addr` (and ARP for it). For IPv6 also its solicited-node
    /// multicast group, where neighbour solicitations for it arrive (RFC 4861 §7.2.2),
    /// and the all-nodes group `ff02::1` (RFC 4291 §2.7.1), where router
    /// advertisements, unsolicited neighbour advertisements and MLD queries arrive
    /// (RFC 4861 §6.2.6, §7.2.6): a host with an IPv6 address must hear them.
    ///
    /// All-nodes traffic then goes to ulnet only: the kernel on the same interface no
    /// longer hears router advertisements there (it still sends and receives its own
    /// unicast and solicited-node traffic).
    ///
    /// # Errors
    /// `bpf(BPF_MAP_UPDATE_ELEM)`: `E2BIG` when [`MAX_ENTRIES`] are in use.
    pub fn add_address(&self, addr: IpAddr) -> Result<()> {
        match addr {
            IpAddr::V4(a) => self.addrs4.update(&a.octets(), &[1]),
            IpAddr::V6(a) => {
                self.addrs6.update(&a.octets(), &[1])?;
                self.addrs6.update(&solicited_node(&a.octets()), &[1])?;
                self.addrs6.update(&ALL_NODES, &[1])
            }
        }
    }

    /// Stops steering frames for `addr`; `Ok(false)` when it was not steered. (The
    /// solicited-node group of an IPv6 address stays, as does all-nodes: another
    /// address may share them.)
    ///
    /// # Errors
    /// `bpf(BPF_MAP_DELETE_ELEM)`.
    pub fn remove_address(&self, addr: IpAddr) -> Result<bool> {
        match addr {
            IpAddr::V4(a) => self.addrs4.delete(&a.octets()),
            IpAddr::V6(a) => self.addrs6.delete(&a.octets()),
        }
    }

    /// Adds a flow rule (effective when the program was built with rules on).
    ///
    /// # Errors
    /// `bpf(BPF_MAP_UPDATE_ELEM)`; `EINVAL` for a port on a protocol without ports is
    /// not detected (the rule simply never matches).
    pub fn add_rule(&self, rule: FlowRule) -> Result<()> {
        self.rules
            .update(&rule_key(rule.protocol, rule.dst_port), &[1])
    }

    /// Points queue `queue_id` at the AF_XDP socket `fd`.
    ///
    /// # Errors
    /// `bpf(BPF_MAP_UPDATE_ELEM)`: `EINVAL`/`EOPNOTSUPP` if `fd` is not a bound AF_XDP
    /// socket, `E2BIG` for a queue beyond the map.
    pub fn set_socket(&self, queue_id: u32, fd: i32) -> Result<()> {
        let fd = u32::try_from(fd).map_err(|_| invalid("bpf(BPF_MAP_UPDATE_ELEM)"))?;
        self.xsks.update(&queue_id.to_ne_bytes(), &fd.to_ne_bytes())
    }
}

/// The link-local all-nodes group `ff02::1` (RFC 4291 §2.7.1).
const ALL_NODES: [u8; 16] = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];

/// `ff02::1:ffXX:XXXX` for the low 24 bits of `a` (RFC 4291 §2.7.1).
pub(crate) fn solicited_node(a: &[u8; 16]) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[0] = 0xff;
    s[1] = 0x02;
    s[11] = 0x01;
    s[12] = 0xff;
    s[13..].copy_from_slice(&a[13..]);
    s
}

/// Builds and loads the steering program for `maps`. `rules` turns the flow-rule check
/// on; `frags` loads it multi-buffer aware (needed for MTUs above one page).
///
/// # Errors
/// `bpf(BPF_PROG_LOAD)` with the verifier log.
pub fn load(maps: &SteeringMaps, rules: bool, frags: bool, steer: Steer) -> Result<Program> {
    let insns = steering_program(maps.fds(), rules, steer)
        .map_err(|e| Error::new("assemble steering program", io::Error::other(e)))?;
    Program::load_xdp("ulnet_steer", &insns, c"Dual MIT/GPL", frags)
}

/// The mode an attachment ended up in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attached {
    /// Native (driver) XDP.
    Native,
    /// Generic (skb) XDP.
    Generic,
}

fn attach_hint(e: Error, frags: bool) -> Error {
    match e.source.raw_os_error() {
        Some(libc::ERANGE) if !frags => {
            e.with_hint("MTU too large for XDP without multi-buffer; lower the MTU or enable multi-buffer")
        }
        Some(libc::ERANGE) => e.with_hint("MTU too large for XDP on this device; lower the MTU"),
        Some(libc::EBUSY) | Some(libc::EEXIST) => e.with_hint(
            "another XDP program is attached to this interface; detach it (`ip link set dev IF xdp off`)",
        ),
        Some(libc::EOPNOTSUPP) => e.with_hint("this device does not support XDP in the requested mode"),
        Some(libc::EPERM) => e.with_hint("attaching XDP needs root or CAP_NET_ADMIN+CAP_BPF"),
        _ => e,
    }
}

/// Attaches `prog` to `ifindex`: native mode first and generic on refusal (for
/// [`XdpMode::Auto`]), or exactly the mode asked for.
///
/// # Errors
/// `bpf(BPF_LINK_CREATE)` with a hint naming the cause (busy, MTU, unsupported,
/// privileges). With `Auto`, the native attempt's error is reported when both fail.
pub fn attach(
    prog: &Program,
    ifindex: u32,
    mode: XdpMode,
    frags: bool,
) -> Result<(XdpLink, Attached)> {
    match mode {
        XdpMode::Native => XdpLink::attach(prog, ifindex, XDP_FLAGS_DRV_MODE)
            .map(|l| (l, Attached::Native))
            .map_err(|e| attach_hint(e, frags)),
        XdpMode::Generic => XdpLink::attach(prog, ifindex, XDP_FLAGS_SKB_MODE)
            .map(|l| (l, Attached::Generic))
            .map_err(|e| attach_hint(e, frags)),
        XdpMode::Auto => match XdpLink::attach(prog, ifindex, XDP_FLAGS_DRV_MODE) {
            Ok(l) => Ok((l, Attached::Native)),
            // Privilege and "someone else is attached" failures would fail the same way
            // in generic mode; report them as they are.
            Err(e)
                if matches!(
                    e.source.raw_os_error(),
                    Some(libc::EPERM | libc::EBUSY | libc::EEXIST)
                ) =>
            {
                Err(attach_hint(e, frags))
            }
            Err(native) => XdpLink::attach(prog, ifindex, XDP_FLAGS_SKB_MODE)
                .map(|l| (l, Attached::Generic))
                .map_err(|_| attach_hint(native, frags)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solicited_node_group() {
        let a: std::net::Ipv6Addr = "2001:db8::1:2345:6789".parse().unwrap();
        let s = std::net::Ipv6Addr::from(solicited_node(&a.octets()));
        assert_eq!(
            s,
            "ff02::1:ff45:6789".parse::<std::net::Ipv6Addr>().unwrap()
        );
    }

    #[test]
    fn rule_keys_put_the_port_in_network_order() {
        assert_eq!(rule_key(17, 0x1234), [17, 0, 0x12, 0x34]);
        assert_eq!(rule_key(1, 0), [1, 0, 0, 0]);
    }
}
