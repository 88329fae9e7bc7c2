//! Test hosts: two network namespaces joined by a veth pair, with the kernel's side set up
//! the way user-level channels need it.
//!
//! ```text
//!   namespace <name>-a                       namespace <name>-b
//!   ul<slot>a 198.18.x.1/24  <── veth ──>  ul<slot>b 198.18.x.2/24
//!   spare .16..=.115 for ulnet               spare .144..=.243 for ulnet
//!   with .ipv6(true) also:
//!   2001:2:0:<slot>::1/64                    2001:2:0:<slot>::2/64
//!   spare ::10..=::73 for ulnet              spare ::90..=::f3 for ulnet
//! ```
//!
//! Both ends live in namespaces the testbed created; nothing is added to the root
//! namespace, and every address is in 198.18.0.0/15 (RFC 2544's benchmarking range). By
//! default the checksum and segmentation offloads are turned off on both ends: the kernel
//! side of a veth otherwise hands raw readers (AF_PACKET, AF_XDP) frames with unfinished
//! checksums and GSO frames larger than the MTU. IPv6 is off by default too, so the only
//! frames on the wire are the ones a test sends. With [`Builder::ipv6`] both ends get an
//! IPv6 address from 2001:2::/48 (RFC 5180's benchmarking range) without duplicate address
//! detection (`nodad`: usable at once) and no link-local address of their own
//! (`addrgenmode none`): ulnet on a veth end uses that end's MAC, so the kernel's EUI-64
//! link-local would be ulnet's too.
//!
//! A [`Testbed`] tears itself down when dropped, also when a test panics, unless it was
//! built with [`Builder::keep`]. Namespaces left by a crashed run carry the `ulnet-` prefix
//! and are found by [`list`] and removed by [`down_all`] (`ulnet testbed down --all`).

mod impair;
mod inventory;
mod mac;
mod plan;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::Output;

pub use impair::{clear_loss, loss_drops, set_loss, set_loss_every};
pub use inventory::{down, down_all, inspect, list, offload_features};
pub use mac::{MacAddr, ParseMacError};
pub use plan::{SideId, NAME_PREFIX};

use crate::error::{Error, Result};
use crate::exec::{self, ChildGuard};
use crate::preflight::{require_net_admin, require_tool};

/// Default MTU of both veth ends.
pub const DEFAULT_MTU: u32 = 1500;
/// Largest MTU accepted (the veth maximum, ETH_MAX_MTU).
pub const MAX_MTU: u32 = 65535;
/// Smallest MTU accepted (IPv4's minimum, RFC 791).
pub const MIN_MTU: u32 = 68;
/// Smallest MTU accepted with IPv6 on (RFC 8200 §5; Linux disables IPv6 below it).
pub const MIN_MTU_IPV6: u32 = 1280;

/// The offload features the testbed turns off, as `ethtool -K` names them and as
/// `ethtool -k` reports them.
pub const OFFLOADS_TURNED_OFF: [(&str, &str); 4] = [
    ("tx", "tx-checksumming"),
    ("tso", "tcp-segmentation-offload"),
    ("gso", "generic-segmentation-offload"),
    ("gro", "generic-receive-offload"),
];

/// One end of a testbed, as built (or as read back by [`inspect`]).
///
/// This is a description, not a handle: changing a field changes nothing on the system.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Side {
    /// Which end this is.
    pub side: SideId,
    /// The network namespace.
    pub ns: String,
    /// The veth interface inside `ns`.
    pub ifname: String,
    /// Its interface index inside `ns` (what AF_PACKET/AF_XDP bind to).
    pub ifindex: u32,
    /// Its Ethernet address.
    pub mac: MacAddr,
    /// The kernel's address on it.
    pub ip: IpAddr,
    /// The subnet's prefix length.
    pub prefix_len: u8,
    /// The interface MTU.
    pub mtu: u32,
    /// Whether any of the checksum/segmentation/GRO offloads is on (false as built by
    /// default).
    pub kernel_offloads: bool,
    /// Whether IPv6 is enabled on the interface.
    pub ipv6: bool,
    /// The first address set aside on this side for a user-level stack; no kernel
    /// interface has it. See [`Side::spare_ip`].
    pub spare_first: Ipv4Addr,
    /// How many spare addresses follow `spare_first` (and `spare6_first`).
    pub spare_count: u8,
    /// The kernel's IPv6 address on the interface (`None` with IPv6 off).
    #[serde(default)]
    pub ip6: Option<Ipv6Addr>,
    /// The IPv6 subnet's prefix length (64).
    #[serde(default)]
    pub prefix6_len: u8,
    /// The first IPv6 address set aside for a user-level stack (`None` with IPv6 off).
    /// See [`Side::spare_ip6`].
    #[serde(default)]
    pub spare6_first: Option<Ipv6Addr>,
}

impl Side {
    /// The `n`th spare address of this side: on the testbed subnet, assigned to no kernel
    /// interface, distinct from the other side's spares; for ulnet to take.
    ///
    /// # Panics
    /// If `n >= self.spare_count` (100).
    pub fn spare_ip(&self, n: u8) -> IpAddr {
        assert!(
            n < self.spare_count,
            "spare address {n} out of range (0..{})",
            self.spare_count
        );
        IpAddr::V4(Ipv4Addr::from(u32::from(self.spare_first) + u32::from(n)))
    }

    /// The `n`th spare IPv6 address of this side: on the testbed's /64, assigned to no
    /// kernel interface; for ulnet to take.
    ///
    /// # Panics
    /// If the testbed was built without IPv6, or `n >= self.spare_count`.
    pub fn spare_ip6(&self, n: u8) -> IpAddr {
        let first = self
            .spare6_first
            .expect("the testbed was built without IPv6 (Builder::ipv6)");
        assert!(
            n < self.spare_count,
            "spare address {n} out of range (0..{})",
            self.spare_count
        );
        IpAddr::V6(Ipv6Addr::from(u128::from(first) + u128::from(n)))
    }

    /// The kernel's IPv6 address as an [`IpAddr`].
    ///
    /// # Panics
    /// If the testbed was built without IPv6.
    pub fn ip6(&self) -> IpAddr {
        IpAddr::V6(
            self.ip6
                .expect("the testbed was built without IPv6 (Builder::ipv6)"),
        )
    }

    /// The kernel's address of one family: IPv6 (`v6`, see [`Side::ip6`]) or IPv4.
    ///
    /// # Panics
    /// With `v6` if the testbed was built without IPv6.
    pub fn ip_of(&self, v6: bool) -> IpAddr {
        if v6 {
            self.ip6()
        } else {
            self.ip
        }
    }

    /// The `n`th spare address of one family ([`Side::spare_ip6`] or [`Side::spare_ip`]).
    ///
    /// # Panics
    /// As those.
    pub fn spare_of(&self, v6: bool, n: u8) -> IpAddr {
        if v6 {
            self.spare_ip6(n)
        } else {
            self.spare_ip(n)
        }
    }

    /// The testbed subnet's prefix length for `ip`'s family (24 or 64).
    pub fn prefix_for(&self, ip: IpAddr) -> u8 {
        if ip.is_ipv6() {
            self.prefix6_len
        } else {
            self.prefix_len
        }
    }

    /// Runs `program args` in this side's namespace; fails unless it exits with 0.
    ///
    /// # Errors
    /// As [`exec::run_in`].
    pub fn run<I, S>(&self, program: &str, args: I) -> Result<Output>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        exec::run_in(&self.ns, program, args)
    }

    /// Runs `program args` in this side's namespace and returns its output whatever the
    /// exit status.
    ///
    /// # Errors
    /// As [`exec::output_in`].
    pub fn output<I, S>(&self, program: &str, args: I) -> Result<Output>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        exec::output_in(&self.ns, program, args)
    }

    /// Starts `program args` in this side's namespace in the background, killed when the
    /// guard drops.
    ///
    /// # Errors
    /// As [`exec::spawn_in`].
    pub fn spawn<I, S>(&self, program: &str, args: I) -> Result<ChildGuard>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        exec::spawn_in(&self.ns, program, args)
    }

    /// Makes the kernel on this side map `ip` to `mac` permanently (`ip neigh replace ...
    /// nud permanent`), so it sends to a user-level stack without ARP.
    ///
    /// # Errors
    /// [`Error::Command`] if `ip` refuses.
    pub fn set_neighbor(&self, ip: IpAddr, mac: MacAddr) -> Result<()> {
        let (ip, mac) = (ip.to_string(), mac.to_string());
        let args = [
            "-n",
            &self.ns,
            "neigh",
            "replace",
            &ip,
            "lladdr",
            &mac,
            "dev",
            &self.ifname,
            "nud",
            "permanent",
        ];
        exec::run("ip", args).map(drop)
    }

    /// Drops `percent`% of the packets this side's kernel receives and sends, at random;
    /// see [`set_loss`].
    ///
    /// # Errors
    /// As [`set_loss`].
    pub fn set_loss(&self, percent: u8) -> Result<()> {
        set_loss(&self.ns, percent)
    }

    /// Drops every `n`th packet in each direction (see [`set_loss_every`]).
    ///
    /// # Errors
    /// As [`set_loss_every`].
    pub fn set_loss_every(&self, n: u32) -> Result<()> {
        set_loss_every(&self.ns, n)
    }

    /// Removes the loss set by [`Side::set_loss`].
    ///
    /// # Errors
    /// As [`clear_loss`].
    pub fn clear_loss(&self) -> Result<()> {
        clear_loss(&self.ns)
    }

    /// The offload features of this side's interface, by `ethtool -k` name.
    ///
    /// # Errors
    /// As [`offload_features`].
    pub fn offload_features(&self) -> Result<BTreeMap<String, bool>> {
        offload_features(&self.ns, &self.ifname)
    }
}

/// Everything about a testbed, as `ulnet testbed up` prints it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TestbedInfo {
    /// The testbed name (`ulnet-<label>-<pid>-<counter>-<random>-s<slot>`).
    pub name: String,
    /// The label chosen with [`Builder::name_prefix`].
    pub label: String,
    /// The subnet's network address.
    pub subnet: Ipv4Addr,
    /// The subnet's prefix length.
    pub prefix_len: u8,
    /// The IPv6 subnet's network address (`None` with IPv6 off).
    #[serde(default)]
    pub subnet6: Option<Ipv6Addr>,
    /// Side A (`<name>-a`).
    pub a: Side,
    /// Side B (`<name>-b`).
    pub b: Side,
}

impl TestbedInfo {
    /// The side `which`.
    pub fn side(&self, which: SideId) -> &Side {
        match which {
            SideId::A => &self.a,
            SideId::B => &self.b,
        }
    }
}

/// Configures a testbed before building it; start from [`Testbed::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder {
    label: String,
    mtu: u32,
    kernel_offloads: bool,
    ipv6: bool,
    keep: bool,
    rps: [Option<usize>; 2],
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            label: "tb".into(),
            mtu: DEFAULT_MTU,
            kernel_offloads: false,
            ipv6: false,
            keep: false,
            rps: [None; 2],
        }
    }
}

impl Builder {
    /// Sets the label that follows `ulnet-` in every name (1 to 24 of `[a-z0-9_]`;
    /// default `tb`). The `ulnet-` prefix itself is fixed so `down --all` finds every
    /// testbed.
    pub fn name_prefix(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Sets both ends' MTU (default 1500; jumbo frames up to 65535 are allowed).
    pub fn mtu(mut self, mtu: u32) -> Self {
        self.mtu = mtu;
        self
    }

    /// Leaves the kernel's checksum/segmentation/GRO offloads on (default: off). Only for
    /// kernel-to-kernel baselines: raw readers see unfinished checksums and oversized
    /// frames with them on.
    pub fn kernel_offloads(mut self, on: bool) -> Self {
        self.kernel_offloads = on;
        self
    }

    /// Turns IPv6 on, on both ends (default: disabled, so the kernel sends no neighbour
    /// discovery or MLD of its own): each end gets `2001:2:0:<slot>::1` / `::2` with
    /// prefix 64, without DAD, and spare IPv6 addresses for ulnet ([`Side::spare_ip6`]).
    /// The kernel gets no link-local address (`addrgenmode none`), so ulnet may use the
    /// EUI-64 link-local of the veth end's MAC. Needs an MTU of at least 1280.
    pub fn ipv6(mut self, on: bool) -> Self {
        self.ipv6 = on;
        self
    }

    /// Runs the kernel's receive processing of frames arriving at end `side` on `cpu`
    /// (RPS: the interface's `queues/rx-*/rps_cpus`), as a second host would run it on
    /// its own cores. Default: where the kernel runs it, which on veth is the *sending*
    /// core, in the sender's system call, so a CPU figure of the sender counts the
    /// receiver's TCP input too. RPS steers what takes the backlog path (no XDP program
    /// on the end, GRO off), the kernel stack's receive; frames an XDP program takes run
    /// where veth's NAPI runs, on the sending core, either way.
    pub fn rps_cpu(mut self, side: SideId, cpu: usize) -> Self {
        self.rps[usize::from(side == SideId::B)] = Some(cpu);
        self
    }

    /// Keeps the testbed when the [`Testbed`] value is dropped (for `ulnet testbed up`);
    /// remove it later with [`down`].
    pub fn keep(mut self, keep: bool) -> Self {
        self.keep = keep;
        self
    }

    /// Creates the namespaces, the veth pair and the addresses.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad label or MTU; [`Error::NotPermitted`] without
    /// CAP_NET_ADMIN and CAP_SYS_ADMIN; [`Error::MissingTool`] without `ip`, `ethtool`
    /// or `sysctl`; [`Error::NoFreeSubnet`] when 510 testbeds exist; [`Error::Command`]
    /// when a step fails. Whatever was created before the failure is removed.
    pub fn build(self) -> Result<Testbed> {
        plan::check_label(&self.label)?;
        if !(MIN_MTU..=MAX_MTU).contains(&self.mtu) {
            return Err(Error::Invalid(format!(
                "MTU {} is outside {MIN_MTU}..={MAX_MTU}",
                self.mtu
            )));
        }
        if self.ipv6 && self.mtu < MIN_MTU_IPV6 {
            return Err(Error::Invalid(format!(
                "MTU {} is below IPv6's minimum of {MIN_MTU_IPV6}",
                self.mtu
            )));
        }
        require_net_admin()?;
        require_tool("ip")?;
        if !self.kernel_offloads {
            require_tool("ethtool")?;
        }
        require_tool("sysctl")?;

        let name = inventory::claim(&self.label)?;
        let slot = plan::parse_testbed_name(&name)
            .expect("claim returns a well-formed name")
            .slot;
        // From here on an early return drops `partial`, which removes what exists so far.
        let mut partial = Testbed {
            info: TestbedInfo {
                name: name.clone(),
                label: self.label.clone(),
                subnet: plan::subnet(slot),
                prefix_len: plan::PREFIX_LEN,
                subnet6: self.ipv6.then(|| plan::subnet6(slot)),
                a: self.plan_side(&name, slot, SideId::A),
                b: self.plan_side(&name, slot, SideId::B),
            },
            keep: false,
        };

        let (a, b) = (&partial.info.a, &partial.info.b);
        let mtu = self.mtu.to_string();
        let (mac_a, mac_b) = (a.mac.to_string(), b.mac.to_string());
        // Created directly inside the namespaces: the root namespace never sees the pair.
        exec::run(
            "ip",
            [
                "-n", &a.ns, "link", "add", "name", &a.ifname, "address", &mac_a, "mtu", &mtu,
                "type", "veth", "peer", "name", &b.ifname, "address", &mac_b, "mtu", &mtu, "netns",
                &b.ns,
            ],
        )?;
        for which in SideId::BOTH {
            self.configure(partial.info.side(which))?;
        }
        partial.info.a.ifindex = inventory::ifindex(&partial.info.a.ns, &partial.info.a.ifname)?;
        partial.info.b.ifindex = inventory::ifindex(&partial.info.b.ns, &partial.info.b.ifname)?;
        partial.keep = self.keep;
        Ok(partial)
    }

    fn plan_side(&self, name: &str, slot: u16, side: SideId) -> Side {
        Side {
            side,
            ns: plan::ns_name(name, side),
            ifname: plan::ifname(slot, side),
            ifindex: 0,
            mac: plan::mac(slot, side),
            ip: IpAddr::V4(plan::side_ip(slot, side)),
            prefix_len: plan::PREFIX_LEN,
            mtu: self.mtu,
            kernel_offloads: self.kernel_offloads,
            ipv6: self.ipv6,
            spare_first: plan::spare_first(slot, side),
            spare_count: plan::SPARE_COUNT,
            ip6: self.ipv6.then(|| plan::side_ip6(slot, side)),
            prefix6_len: if self.ipv6 { plan::PREFIX6_LEN } else { 0 },
            spare6_first: self.ipv6.then(|| plan::spare6_first(slot, side)),
        }
    }

    fn configure(&self, side: &Side) -> Result<()> {
        let ns = side.ns.as_str();
        let dev = side.ifname.as_str();
        exec::run("ip", ["-n", ns, "link", "set", "dev", "lo", "up"])?;
        if let Some(ip6) = side.ip6 {
            // Before the link comes up, so no link-local address is ever made: ulnet on
            // this end shares the MAC, hence the EUI-64 link-local (RFC 4291 App. A).
            exec::run(
                "ip",
                ["-n", ns, "link", "set", "dev", dev, "addrgenmode", "none"],
            )?;
            // The kernel ignores router advertisements here: the testbed has no router,
            // and an interop test may send one to ulnet.
            let key = format!("net.ipv6.conf.{dev}.accept_ra=0");
            exec::run_in(ns, "sysctl", ["-q", "-w", &key])?;
            let cidr = format!("{ip6}/{}", side.prefix6_len);
            // nodad: usable at once (RFC 4862 §5.4 would hold it tentative for a second).
            exec::run("ip", ["-n", ns, "addr", "add", &cidr, "dev", dev, "nodad"])?;
        } else {
            let key = format!("net.ipv6.conf.{dev}.disable_ipv6=1");
            exec::run_in(ns, "sysctl", ["-q", "-w", &key])?;
        }
        let cidr = format!("{}/{}", side.ip, side.prefix_len);
        exec::run("ip", ["-n", ns, "addr", "add", &cidr, "dev", dev])?;
        if !self.kernel_offloads {
            // docs/LINUX-NOTES.md: with these on, the kernel side of a veth hands raw readers frames
            // with partial checksums and GSO frames above the MTU. Both ends, so either side
            // may host the raw reader.
            let mut args = vec!["-K", dev];
            for (short, _) in OFFLOADS_TURNED_OFF {
                args.extend([short, "off"]);
            }
            exec::run_in(ns, "ethtool", args)?;
        }
        exec::run("ip", ["-n", ns, "link", "set", "dev", dev, "up"])?;
        if let Some(cpu) = self.rps[usize::from(side.side == SideId::B)] {
            // `ip netns exec` mounts the namespace's own sysfs, where `dev` is visible.
            let mask = cpu_mask(cpu);
            let script = format!(
                "for q in /sys/class/net/{dev}/queues/rx-*; do echo {mask} > $q/rps_cpus; done"
            );
            exec::run_in(ns, "sh", ["-c", &script])?;
        }
        Ok(())
    }
}

/// The kernel's CPU-mask text (`bitmap_parse`: 32-bit hex groups, most significant first,
/// separated by commas) with only `cpu` set.
fn cpu_mask(cpu: usize) -> String {
    let mut mask = format!("{:x}", 1u32 << (cpu % 32));
    for _ in 0..cpu / 32 {
        mask.push_str(",00000000");
    }
    mask
}

/// A live testbed; removes its namespaces (and with them the veth pair and any nftables
/// rules) when dropped, unless kept.
#[derive(Debug)]
pub struct Testbed {
    info: TestbedInfo,
    keep: bool,
}

impl Testbed {
    /// Starts configuring a testbed.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The testbed name.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// Side A.
    pub fn a(&self) -> &Side {
        &self.info.a
    }

    /// Side B.
    pub fn b(&self) -> &Side {
        &self.info.b
    }

    /// The side `which`.
    pub fn side(&self, which: SideId) -> &Side {
        self.info.side(which)
    }

    /// Everything about the testbed.
    pub fn info(&self) -> &TestbedInfo {
        &self.info
    }

    /// The description as pretty-printed JSON (what `ulnet testbed up` prints).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.info).expect("TestbedInfo always serialises")
    }

    /// Leaves the testbed in place when this value is dropped.
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// Removes the testbed now, reporting failures (dropping also removes it, but can only
    /// print them).
    ///
    /// # Errors
    /// As [`down`].
    pub fn teardown(mut self) -> Result<()> {
        self.keep = true;
        down(&self.info.name)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if !self.keep {
            if let Err(e) = down(&self.info.name) {
                eprintln!("ulnet testbed {}: teardown failed: {e}", self.info.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cpu_mask;

    #[test]
    fn cpu_masks_are_the_kernels_32_bit_groups() {
        assert_eq!(cpu_mask(0), "1");
        assert_eq!(cpu_mask(1), "2");
        assert_eq!(cpu_mask(31), "80000000");
        assert_eq!(cpu_mask(32), "1,00000000");
        assert_eq!(cpu_mask(70), "40,00000000,00000000");
    }
}
