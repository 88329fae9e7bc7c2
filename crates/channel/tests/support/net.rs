//! Namespaces and veth pairs for the kernel interop tests: uniquely named (pid and a
//! counter), addresses from 198.18.0.0/15, torn down by `Drop` even when a test fails.
//! The kernel end of every pair has its offloads off, so raw readers see finished
//! checksums and no GSO super-frames (docs/LINUX-NOTES.md).

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use ulnet_channel::sys::netns;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A number unique within this test process, for names.
pub fn unique() -> u32 {
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// A short id from the pid and a counter, for names that must fit 15 bytes.
pub fn short_id() -> String {
    format!("{}x{}", std::process::id() % 100_000, unique())
}

/// Runs `prog args`, panicking with its output (and what may be missing) on failure.
pub fn run(prog: &str, args: &[&str]) -> String {
    let out = Command::new(prog).args(args).output().unwrap_or_else(|e| {
        panic!("cannot run `{prog}` ({e}): this test needs it installed (iproute2/ethtool)")
    });
    if !out.status.success() {
        panic!(
            "`{prog} {}` failed ({}): {}\nthis test needs root (CAP_NET_ADMIN, \
             CAP_SYS_ADMIN, and CAP_BPF for XDP) to create namespaces and interfaces",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace created for one test, deleted (with its interfaces) on drop.
#[derive(Debug)]
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let name = format!("ulnet-{tag}-{}-{}", std::process::id(), unique());
        run("ip", &["netns", "add", &name]);
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// `ip -n NAME args...`.
    pub fn ip(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Runs `prog args` inside the namespace (`ip netns exec`).
    pub fn exec(&self, prog: &str, args: &[&str]) -> String {
        let mut all = vec!["netns", "exec", self.name.as_str(), prog];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// The MAC address of `ifname` in this namespace.
    pub fn mac(&self, ifname: &str) -> [u8; 6] {
        let out = self.ip(&["-br", "link", "show", "dev", ifname]);
        let field = out.split_whitespace().nth(2).unwrap_or("");
        parse_mac(field).unwrap_or_else(|| panic!("no MAC in `ip -br link` output {out:?}"))
    }

    /// A nonblocking UDP socket bound to `addr` inside this namespace (it stays there
    /// whichever thread uses it).
    pub fn udp_socket(&self, addr: SocketAddrV4) -> UdpSocket {
        let s = netns::run_in(&self.name, || UdpSocket::bind(addr))
            .unwrap_or_else(|e| panic!("entering {}: {e}", self.name))
            .unwrap_or_else(|e| panic!("binding {addr} in {}: {e}", self.name));
        s.set_nonblocking(true).unwrap();
        s
    }

    /// Adds (or replaces) a permanent neighbour entry `ip → mac` on `ifname`, so the
    /// kernel here sends to `ip` without asking ARP first.
    pub fn static_neighbour(&self, ifname: &str, ip: Ipv4Addr, mac: [u8; 6]) {
        self.ip(&[
            "neigh",
            "replace",
            &ip.to_string(),
            "lladdr",
            &fmt_mac(mac),
            "dev",
            ifname,
            "nud",
            "permanent",
        ]);
    }

    /// Turns off checksum offload, TSO and GSO on `ifname`: a veth with them on leaves
    /// checksums partial and passes super-frames to its peer (docs/LINUX-NOTES.md).
    pub fn offloads_off(&self, ifname: &str) {
        self.exec(
            "ethtool",
            &["-K", ifname, "tx", "off", "tso", "off", "gso", "off"],
        );
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace deletes the interfaces in it (both veth ends go with
        // whichever namespace goes first). Nothing to do about a failure in drop.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

pub fn fmt_mac(m: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// Creates a veth pair `if_a` (in `a`) — `if_b` (in `b`), with the given MAC addresses
/// or kernel-chosen ones. Both ends stay down.
fn add_veth(
    a: &Netns,
    if_a: &str,
    mac_a: Option<[u8; 6]>,
    b: &Netns,
    if_b: &str,
    mac_b: Option<[u8; 6]>,
) {
    assert!(
        if_a.len() < 16 && if_b.len() < 16,
        "interface name too long: {if_a} {if_b}"
    );
    let (mac_a, mac_b) = (mac_a.map(fmt_mac), mac_b.map(fmt_mac));
    let mut args = vec!["link", "add", if_a, "netns", &a.name];
    if let Some(m) = &mac_a {
        args.extend(["address", m]);
    }
    args.extend(["type", "veth", "peer", "name", if_b, "netns", &b.name]);
    if let Some(m) = &mac_b {
        args.extend(["address", m]);
    }
    run("ip", &args);
}

/// Two namespaces joined by a veth pair: `a` is the end a channel attaches to (no
/// address in the kernel), `b` is the kernel peer at `ip_b`/24 with offloads off and a
/// permanent neighbour entry for `ip_a` → `mac_a`, so no ARP is needed.
#[derive(Debug)]
pub struct VethPair {
    pub if_a: String,
    pub if_b: String,
    pub mac_a: [u8; 6],
    pub mac_b: [u8; 6],
    pub ip_a: Ipv4Addr,
    pub ip_b: Ipv4Addr,
    pub a: Netns,
    pub b: Netns,
}

impl VethPair {
    pub fn new(tag: &str) -> VethPair {
        let a = Netns::new(&format!("{tag}a"));
        let b = Netns::new(&format!("{tag}b"));
        let id = short_id();
        let (if_a, if_b) = (format!("u{id}a"), format!("u{id}b"));
        let n = unique() as u8;
        let mac_a = [0x02, 0x00, 0x5e, 0x10, n, 0x0a];
        let mac_b = [0x02, 0x00, 0x5e, 0x10, n, 0x0b];
        add_veth(&a, &if_a, Some(mac_a), &b, &if_b, Some(mac_b));
        let ip_a = Ipv4Addr::new(198, 18, n, 2);
        let ip_b = Ipv4Addr::new(198, 18, n, 1);
        b.offloads_off(&if_b);
        b.ip(&["addr", "add", &format!("{ip_b}/24"), "dev", &if_b]);
        b.static_neighbour(&if_b, ip_a, mac_a);
        a.ip(&["link", "set", &if_a, "up"]);
        b.ip(&["link", "set", &if_b, "up"]);
        VethPair {
            if_a,
            if_b,
            mac_a,
            mac_b,
            ip_a,
            ip_b,
            a,
            b,
        }
    }
}

/// The XDP side's steered address (owned by ulnet, not by the kernel there).
pub const STEERED: [u8; 4] = [198, 18, 0, 1];
/// A kernel address on the XDP side (not steered).
pub const KERNEL_A: [u8; 4] = [198, 18, 0, 2];
/// The peer's kernel address.
pub const PEER: [u8; 4] = [198, 18, 0, 3];

/// The XDP tests' pair: namespace `xdp` holds `xdp_dev` (where the channel attaches,
/// kernel address [`KERNEL_A`]), namespace `peer` holds `peer_dev` ([`PEER`], offloads
/// off). Unlike [`VethPair`], the kernel on the channel's side keeps an address (the
/// steering program must pass its traffic on) and the peer has no neighbour entry for
/// [`STEERED`] until [`Testbed::static_neighbour`].
#[derive(Debug)]
pub struct Testbed {
    pub xdp: Netns,
    pub peer: Netns,
    pub xdp_dev: String,
    pub peer_dev: String,
}

impl Testbed {
    pub fn new(mtu: u32) -> Self {
        let xdp = Netns::new("xdp");
        let peer = Netns::new("peer");
        let id = short_id();
        let (xdp_dev, peer_dev) = (format!("u{id}x"), format!("u{id}p"));
        add_veth(&xdp, &xdp_dev, None, &peer, &peer_dev, None);
        let mtu = mtu.to_string();
        for (ns, dev, addr) in [(&xdp, &xdp_dev, KERNEL_A), (&peer, &peer_dev, PEER)] {
            ns.ip(&["link", "set", dev, "mtu", &mtu, "up"]);
            let addr = format!("{}/24", Ipv4Addr::from(addr));
            ns.ip(&["addr", "add", &addr, "dev", dev]);
        }
        peer.offloads_off(&peer_dev);
        Testbed {
            xdp,
            peer,
            xdp_dev,
            peer_dev,
        }
    }

    pub fn xdp_mac(&self) -> [u8; 6] {
        self.xdp.mac(&self.xdp_dev)
    }

    pub fn peer_mac(&self) -> [u8; 6] {
        self.peer.mac(&self.peer_dev)
    }

    /// Lets the peer reach the steered address without ARP.
    pub fn static_neighbour(&self) {
        self.peer
            .static_neighbour(&self.peer_dev, STEERED.into(), self.xdp_mac());
    }

    /// `ip link show` of the XDP-side device.
    pub fn xdp_link_show(&self) -> String {
        self.xdp.ip(&["link", "show", &self.xdp_dev])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_parsing() {
        assert_eq!(
            parse_mac("02:00:5e:10:01:0a"),
            Some([2, 0, 0x5e, 0x10, 1, 0x0a])
        );
        assert_eq!(parse_mac("02:00:5e"), None);
        assert_eq!(parse_mac("02:00:5e:10:01:0a:00"), None);
        assert_eq!(fmt_mac([2, 0, 0x5e, 0x10, 1, 0x0a]), "02:00:5e:10:01:0a");
    }
}
