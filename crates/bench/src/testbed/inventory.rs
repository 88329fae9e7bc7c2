//! Testbeds as the system knows them: claiming a free slot for a new one, finding all of
//! them (also those a crashed run left behind), reading one back, and removing them.
//!
//! The system is the only registry: a testbed exists exactly when a namespace with its name
//! exists under /var/run/netns, so nothing can go stale except the namespaces themselves.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{Error, Result};
use crate::exec;
use crate::testbed::plan::{self, SideId};
use crate::testbed::{Side, TestbedInfo, OFFLOADS_TURNED_OFF};

/// Where `ip netns add` bind-mounts named namespaces.
const NETNS_DIR: &str = "/var/run/netns";
/// Serialises slot claims between processes (held only while claiming).
const LOCK_FILE: &str = "ulnet-testbed.lock";

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn lock_path() -> std::path::PathBuf {
    let run_lock = Path::new("/run/lock");
    if run_lock.is_dir() {
        run_lock.join(LOCK_FILE)
    } else {
        std::env::temp_dir().join(LOCK_FILE)
    }
}

/// Names of all namespaces under /var/run/netns (none if the directory does not exist).
fn namespaces() -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(NETNS_DIR) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(NETNS_DIR, e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(NETNS_DIR, e))?;
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

fn ns_exists(ns: &str) -> bool {
    Path::new(NETNS_DIR).join(ns).exists()
}

/// 16 random bits, so a name from a crashed run is not re-made by a later process that
/// happens to get the same pid.
fn random16() -> u16 {
    let mut buf = [0u8; 2];
    let from_urandom = File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf));
    if from_urandom.is_ok() {
        return u16::from_ne_bytes(buf);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (nanos ^ (nanos >> 16)) as u16
}

/// Picks the lowest slot no testbed namespace uses and creates both namespaces to hold
/// it, under an exclusive lock so concurrent builders (threads or processes) never pick
/// the same slot. Returns the new testbed's name.
pub(crate) fn claim(label: &str) -> Result<String> {
    let path = lock_path();
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    lock.lock().map_err(|e| Error::io(&path, e))?;
    let used: HashSet<u16> = namespaces()?
        .iter()
        .filter_map(|ns| plan::parse_ns_name(ns))
        .map(|(_, _, parsed)| parsed.slot)
        .collect();
    let slot = plan::SLOTS
        .into_iter()
        .find(|slot| !used.contains(slot))
        .ok_or(Error::NoFreeSubnet)?;
    let counter = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = plan::testbed_name(label, std::process::id(), counter, random16(), slot);
    // Both namespaces under the lock: on a fresh machine the first `ip netns add` also
    // makes /var/run/netns a shared mount, which concurrent first calls could each do.
    let a = plan::ns_name(&name, SideId::A);
    exec::run("ip", ["netns", "add", &a])?;
    if let Err(e) = exec::run("ip", ["netns", "add", &plan::ns_name(&name, SideId::B)]) {
        let _ = exec::run("ip", ["netns", "del", &a]);
        return Err(e);
    }
    // The lock is released when `lock` drops: the new namespaces now mark the slot taken.
    Ok(name)
}

/// Names of every testbed on this machine, sorted, including half-built or half-removed
/// ones (any namespace named like a testbed side counts).
///
/// # Errors
/// [`Error::Io`] if /var/run/netns cannot be read.
pub fn list() -> Result<Vec<String>> {
    let names: BTreeSet<String> = namespaces()?
        .iter()
        .filter_map(|ns| plan::parse_ns_name(ns))
        .map(|(name, _, _)| name)
        .collect();
    Ok(names.into_iter().collect())
}

/// Reads testbed `name` back from the system: links, addresses, MTU, offloads and IPv6
/// state of both sides.
///
/// # Errors
/// [`Error::NotFound`] if `name` is not a testbed name or a side is missing;
/// [`Error::Command`]/[`Error::Parse`] if a side is not as a testbed leaves it.
pub fn inspect(name: &str) -> Result<TestbedInfo> {
    let parsed = plan::parse_testbed_name(name).ok_or_else(|| Error::NotFound(name.to_owned()))?;
    let a = read_side(name, parsed.slot, SideId::A)?;
    let b = read_side(name, parsed.slot, SideId::B)?;
    Ok(TestbedInfo {
        name: name.to_owned(),
        label: parsed.label,
        subnet: plan::subnet(parsed.slot),
        prefix_len: plan::PREFIX_LEN,
        subnet6: a.ip6.map(|_| plan::subnet6(parsed.slot)),
        a,
        b,
    })
}

#[derive(serde::Deserialize)]
struct IpLink {
    ifindex: u32,
    mtu: u32,
    address: String,
    #[serde(default)]
    addr_info: Vec<IpAddrInfo>,
}

#[derive(serde::Deserialize)]
struct IpAddrInfo {
    family: String,
    local: String,
    prefixlen: u8,
}

fn ip_json(ns: &str, args: &[&str]) -> Result<IpLink> {
    let mut argv = vec!["-n", ns, "-j"];
    argv.extend_from_slice(args);
    let out = exec::run("ip", &argv)?;
    let parse_error = |why: String| Error::Parse {
        command: exec::command_line("ip", &argv),
        why,
    };
    let links: Vec<IpLink> =
        serde_json::from_slice(&out.stdout).map_err(|e| parse_error(e.to_string()))?;
    links
        .into_iter()
        .next()
        .ok_or_else(|| parse_error("no link in the answer".into()))
}

/// The interface index of `ifname` inside `ns`.
pub(crate) fn ifindex(ns: &str, ifname: &str) -> Result<u32> {
    Ok(ip_json(ns, &["link", "show", "dev", ifname])?.ifindex)
}

fn read_side(name: &str, slot: u16, side: SideId) -> Result<Side> {
    let ns = plan::ns_name(name, side);
    if !ns_exists(&ns) {
        return Err(Error::NotFound(format!(
            "{name} (namespace {ns} is missing)"
        )));
    }
    let ifname = plan::ifname(slot, side);
    let link = ip_json(&ns, &["addr", "show", "dev", &ifname])?;
    let parse_error = |why: String| Error::Parse {
        command: format!("ip -n {ns} -j addr show dev {ifname}"),
        why,
    };
    let mac = link
        .address
        .parse()
        .map_err(|e| parse_error(format!("{e}")))?;
    let v4 = link
        .addr_info
        .iter()
        .find(|a| a.family == "inet")
        .ok_or_else(|| parse_error("no IPv4 address".into()))?;
    let ip: IpAddr = v4.local.parse().map_err(|e| parse_error(format!("{e}")))?;
    let features = offload_features(&ns, &ifname)?;
    let kernel_offloads = OFFLOADS_TURNED_OFF
        .iter()
        .any(|(_, long)| features.get(*long).copied().unwrap_or(false));
    let key = format!("net.ipv6.conf.{ifname}.disable_ipv6");
    let disabled = exec::run_in(&ns, "sysctl", ["-n", &key])?;
    let ipv6 = String::from_utf8_lossy(&disabled.stdout).trim() == "0";
    // The testbed's own IPv6 address: global scope, inside 2001:2::/48 (a link-local one
    // the kernel made when built with an older layout is not it).
    let v6 = link
        .addr_info
        .iter()
        .filter(|a| a.family == "inet6")
        .filter_map(|a| Some((a.local.parse::<Ipv6Addr>().ok()?, a.prefixlen)))
        .find(|(a, _)| a.segments()[..3] == [0x2001, 2, 0]);
    Ok(Side {
        side,
        ns,
        ifname,
        ifindex: link.ifindex,
        mac,
        ip,
        prefix_len: v4.prefixlen,
        mtu: link.mtu,
        kernel_offloads,
        ipv6,
        spare_first: plan::spare_first(slot, side),
        spare_count: plan::SPARE_COUNT,
        ip6: v6.map(|(a, _)| a),
        prefix6_len: v6.map_or(0, |(_, len)| len),
        spare6_first: v6.map(|_| plan::spare6_first(slot, side)),
    })
}

/// The features `ethtool -k <ifname>` reports inside `ns`, by name, `true` for on.
///
/// # Errors
/// [`Error::MissingTool`] without ethtool; [`Error::Command`] if it fails.
pub fn offload_features(ns: &str, ifname: &str) -> Result<BTreeMap<String, bool>> {
    let out = exec::run_in(ns, "ethtool", ["-k", ifname])?;
    Ok(parse_ethtool_features(&String::from_utf8_lossy(
        &out.stdout,
    )))
}

/// Parses `ethtool -k` output: `name: on|off [fixed]` lines, sub-features indented.
fn parse_ethtool_features(text: &str) -> BTreeMap<String, bool> {
    text.lines()
        .filter_map(|line| {
            let (name, value) = line.split_once(':')?;
            let on = match value.split_whitespace().next()? {
                "on" => true,
                "off" => false,
                _ => return None,
            };
            Some((name.trim().to_owned(), on))
        })
        .collect()
}

/// Removes testbed `name`: its veth pair and both namespaces, whatever part of it exists
/// (so it also cleans up after a build or a run that crashed half-way).
///
/// # Errors
/// [`Error::Invalid`] if `name` is not a testbed name (nothing else is ever touched);
/// [`Error::NotFound`] if neither namespace exists; [`Error::Command`] if `ip` fails.
pub fn down(name: &str) -> Result<()> {
    let parsed = plan::parse_testbed_name(name)
        .ok_or_else(|| Error::Invalid(format!("{name:?} is not a ulnet testbed name")))?;
    let mut found = false;
    for side in SideId::BOTH {
        let ns = plan::ns_name(name, side);
        if !ns_exists(&ns) {
            continue;
        }
        found = true;
        // Delete the pair first: a process still running inside a namespace keeps that
        // namespace (and a veth in it) alive after `ip netns del`. Best effort: the pair
        // may be gone already, or the namespace file stale; `netns del` below is what
        // must succeed.
        let ifname = plan::ifname(parsed.slot, side);
        let mut del = Command::new("ip");
        del.args(["-n", &ns, "link", "del", "dev", &ifname]);
        exec::output_command(&mut del)?;
        exec::run("ip", ["netns", "del", &ns])?;
    }
    if found {
        Ok(())
    } else {
        Err(Error::NotFound(name.to_owned()))
    }
}

/// Removes every testbed on the machine, or only those whose label is `label`. Returns the
/// names removed. Tries them all, then reports the first failure.
///
/// # Errors
/// The first error of [`list`] or [`down`].
pub fn down_all(label: Option<&str>) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let mut first_error = None;
    for name in list()? {
        let matches =
            plan::parse_testbed_name(&name).is_some_and(|p| label.is_none_or(|l| p.label == l));
        if !matches {
            continue;
        }
        match down(&name) {
            Ok(()) => removed.push(name),
            // Removed meanwhile by its owner: that is what we wanted.
            Err(Error::NotFound(_)) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(removed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ethtool_feature_lines() {
        let text = "Features for ul3a:\n\
                    rx-checksumming: on [fixed]\n\
                    tx-checksumming: off\n\
                    \ttx-checksum-ip-generic: off\n\
                    tcp-segmentation-offload: off\n\
                    generic-receive-offload: on\n\
                    hw-tc-offload: off [fixed]\n";
        let f = parse_ethtool_features(text);
        assert_eq!(f.get("rx-checksumming"), Some(&true));
        assert_eq!(f.get("tx-checksumming"), Some(&false));
        assert_eq!(f.get("tx-checksum-ip-generic"), Some(&false));
        assert_eq!(f.get("generic-receive-offload"), Some(&true));
        assert!(!f.contains_key("Features for ul3a"));
    }

    #[test]
    fn down_refuses_foreign_names() {
        let err = down("my-precious-namespace").unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{err}");
    }
}
