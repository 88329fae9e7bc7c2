//! Opening a runtime from a description: which channel backend on which interface in
//! which namespace, the interface's identity (address, gateway, MAC, static neighbours),
//! TCP, waiting and capture.
//!
//! [`NetConfig`] is plain data: [`StackBuilder`](crate::net::StackBuilder) is the one way
//! in, and assembles it once when it builds (a [`Stack`](crate::net::Stack) or a bare
//! [`Runtime`]). Its [`Link`] is the one place the interface and its namespace are
//! stated: the backends' own options ([`XdpOptions`]) carry only what is specific to
//! them and are opened on that interface, so nothing is copied over or overwritten.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter};
use std::net::IpAddr;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;
use std::time::Duration;

use ulnet_channel::packet::{PacketChannel, PacketOptions};
use ulnet_channel::pcap::{system_clock, Pcap, PcapWriter, Precision};
use ulnet_channel::tap::{TapChannel, TapOptions};
use ulnet_channel::xdp::{XdpChannel, XdpOptions};
use ulnet_channel::{Capabilities, Channel, RxParts, Stats, Tx};
use ulnet_stack::iface::{
    link_local_from_mac, ChecksumCaps, Interface, InterfaceConfig, IpCidr, Limits,
};
use ulnet_stack::tcp::{Tcp, TcpConfig};
use ulnet_wire::{ChecksumMode, EthernetAddress};

use super::{Clock, Runtime, WaitMode};

/// Which netchannel carries the frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// AF_XDP with the steering program: frames for ulnet's address go to ulnet,
    /// everything else to the kernel.
    Xdp,
    /// AF_PACKET (TPACKET_V3): ulnet sees a copy of every frame; its address must not
    /// be the kernel's.
    Packet,
    /// A TAP device that ulnet creates: the kernel is the peer on the other side of it.
    Tap,
}

impl Backend {
    /// The name as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Xdp => "xdp",
            Backend::Packet => "packet",
            Backend::Tap => "tap",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "xdp" => Ok(Backend::Xdp),
            "packet" => Ok(Backend::Packet),
            "tap" => Ok(Backend::Tap),
            _ => Err(format!("unknown backend {s:?} (xdp, packet or tap)")),
        }
    }
}

/// A runtime's whole description, assembled once by
/// [`StackBuilder`](crate::net::StackBuilder) (its only constructor) from the settings
/// it collected and checked, and consumed by [`open`].
#[derive(Debug)]
pub(crate) struct NetConfig {
    /// What carries the frames.
    pub link: Link,
    /// ulnet's addresses with their prefixes (at least one; IPv4 and IPv6 together for
    /// dual stack). The first is the default source address.
    pub addresses: Vec<IpCidr>,
    /// The default gateway.
    pub gateway: Option<IpAddr>,
    /// ulnet's MAC; `None` takes the interface's (xdp, packet) or a locally administered
    /// one derived from the first address (tap, a channel given by the user).
    pub mac: Option<EthernetAddress>,
    /// Neighbours that are never asked for.
    pub neighbors: Vec<(IpAddr, EthernetAddress)>,
    /// The interface's bounds and timers.
    pub limits: Limits,
    /// TCP configuration; `None` leaves TCP off (segments are answered with nothing).
    pub tcp: Option<TcpConfig>,
    /// Busy-poll or sleep.
    pub wait: WaitMode,
    /// Record every frame in and out to this pcap file.
    pub pcap: Option<PathBuf>,
    /// The receive coalescing time ([`Runtime::set_coalesce`]); `None`: the default.
    pub coalesce: Option<Duration>,
}

/// Where the frames go: a kernel backend on a named interface, or a channel the user
/// opened. The interface and its namespace are stated here only; the backends' own
/// options carry what is specific to them.
#[derive(Debug)]
pub(crate) enum Link {
    /// A backend [`open`] opens.
    Kernel {
        /// Which one.
        backend: Backend,
        /// The interface to attach to (xdp, packet) or the TAP device to create (tap).
        ifname: String,
        /// The named network namespace (`ip netns add`) the interface is in.
        netns: Option<String>,
        /// The AF_XDP options (queue, sizes, modes, further steered addresses); the
        /// configuration's addresses (and with IPv6 the link-local one) are always
        /// steered, whether listed here or not.
        xdp: XdpOptions,
    },
    /// A channel already open (one end of a pipe, a simulated wire, a wrapped backend).
    Channel(AnyChannel),
}

/// Any channel, boxed, so one runtime type serves every backend.
pub struct AnyChannel(pub Box<dyn Channel + Send>);

impl fmt::Debug for AnyChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AnyChannel")
            .field(&self.0.capabilities().name)
            .finish()
    }
}

impl Channel for AnyChannel {
    fn rx_batch(
        &mut self,
        max_count: usize,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> ulnet_channel::Result<usize> {
        self.0.rx_batch(max_count, f)
    }
    fn rx_batch_parts(
        &mut self,
        max_count: usize,
        f: &mut RxParts<'_>,
    ) -> ulnet_channel::Result<usize> {
        self.0.rx_batch_parts(max_count, f)
    }
    fn tx(&mut self) -> &mut dyn Tx {
        self.0.tx()
    }
    fn capabilities(&self) -> Capabilities {
        self.0.capabilities()
    }
    fn stats(&self) -> Stats {
        self.0.stats()
    }
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.0.wait_fd()
    }
    fn prepare_wait(&mut self) -> ulnet_channel::Result<()> {
        self.0.prepare_wait()
    }
    fn rx_ready(&mut self) -> bool {
        self.0.rx_ready()
    }
}

/// A channel recording into a pcap file.
pub type PcapChannel = Pcap<AnyChannel, BufWriter<File>, fn() -> Duration>;

/// Opens the channel (unless the user gave one), wraps it in a capture if asked,
/// builds the interface (MTU and checksums from the channel's capabilities, TCP
/// attached if configured) and the runtime on the monotonic clock.
///
/// # Errors
/// The channel could not be opened (the message names the system call and a fix), the
/// MAC could not be read, the configuration is invalid (`InvalidInput`), or the pcap
/// file could not be created.
pub(crate) fn open(cfg: NetConfig) -> io::Result<Runtime<AnyChannel>> {
    let NetConfig {
        link,
        addresses,
        gateway,
        mac,
        neighbors,
        limits,
        tcp,
        wait,
        pcap,
        coalesce,
    } = cfg;
    let (channel, mac) = match link {
        Link::Kernel {
            backend,
            ifname,
            netns,
            xdp,
        } => open_channel(backend, &ifname, netns.as_deref(), xdp, &addresses, mac)?,
        Link::Channel(ch) => {
            let mac = match mac {
                Some(m) => m,
                None => local_mac(first(&addresses)?),
            };
            (ch, mac)
        }
    };
    let channel = match &pcap {
        Some(path) => {
            let writer = PcapWriter::create(path, Precision::Micros)?;
            let clock: fn() -> Duration = system_clock;
            AnyChannel(Box::new(Pcap::new(channel, writer, clock)))
        }
        None => channel,
    };
    let caps = channel.capabilities();
    let iface = build_interface(&addresses, gateway, &neighbors, limits, tcp, &caps, mac)?;
    let mut rt = Runtime::new(channel, iface, wait, Clock::monotonic())?;
    if let Some(c) = coalesce {
        rt.set_coalesce(c);
    }
    Ok(rt)
}

fn open_channel(
    backend: Backend,
    ifname: &str,
    ns: Option<&str>,
    mut xdp: XdpOptions,
    addresses: &[IpCidr],
    mac: Option<EthernetAddress>,
) -> io::Result<(AnyChannel, EthernetAddress)> {
    Ok(match backend {
        Backend::Xdp => {
            let mac = match mac {
                Some(m) => m,
                None => interface_mac(ns, ifname)?,
            };
            for a in steered_addresses(addresses, mac) {
                if !xdp.addresses.contains(&a) {
                    xdp.addresses.push(a);
                }
            }
            let ch = XdpChannel::open(ifname, ns, &xdp)?;
            (AnyChannel(Box::new(ch)), mac)
        }
        Backend::Packet => {
            let mac = match mac {
                Some(m) => m,
                None => interface_mac(ns, ifname)?,
            };
            // Bursts as for AF_XDP (`StackBuilder::gso`, `ULNET_GSO`).
            let o = PacketOptions {
                gso: xdp.gso,
                ..PacketOptions::default()
            };
            let ch = PacketChannel::open(ifname, ns, &o)?;
            (AnyChannel(Box::new(ch)), mac)
        }
        Backend::Tap => {
            let mac = match mac {
                Some(m) => m,
                None => local_mac(first(addresses)?),
            };
            let ch = TapChannel::open(ifname, ns, &TapOptions::default())?;
            (AnyChannel(Box::new(ch)), mac)
        }
    })
}

fn invalid(what: impl fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

/// The first configured address (the configuration always has one: the builder checks).
fn first(addresses: &[IpCidr]) -> io::Result<IpAddr> {
    addresses
        .first()
        .map(IpCidr::address)
        .ok_or_else(|| invalid("the stack needs an address"))
}

/// What the steering program must send to ulnet: every configured address and, when one
/// of them is IPv6, the link-local address of `mac` (the stack's own, RFC 4862 §5.3;
/// the steering program adds the solicited-node and all-nodes groups).
fn steered_addresses(addresses: &[IpCidr], mac: EthernetAddress) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = addresses.iter().map(IpCidr::address).collect();
    if out.iter().any(IpAddr::is_ipv6) {
        let ll = IpAddr::V6(link_local_from_mac(mac));
        if !out.contains(&ll) {
            out.push(ll);
        }
    }
    out
}

/// The interface with `addresses` on a channel with `caps`.
///
/// # Errors
/// `InvalidInput` for a configuration the stack refuses.
fn build_interface(
    addresses: &[IpCidr],
    gateway: Option<IpAddr>,
    neighbors: &[(IpAddr, EthernetAddress)],
    limits: Limits,
    tcp: Option<TcpConfig>,
    caps: &Capabilities,
    mac: EthernetAddress,
) -> io::Result<Interface> {
    // The largest IP packet that fits both the link and one channel frame.
    let mtu = caps.mtu.min(caps.max_frame_len.saturating_sub(14));
    let mut ic = InterfaceConfig::new(mac)
        .mtu(mtu)
        .gso_max_len(caps.gso_max_len)
        .limits(limits)
        .checksum(ChecksumCaps {
            rx_verified: caps.rx_checksum_verified,
            rx_unfinished: caps.rx_checksum_unfinished,
            tx: if caps.tx_checksum_offload {
                ChecksumMode::Offload
            } else {
                ChecksumMode::Full
            },
        });
    for a in addresses {
        ic = ic.address(*a);
    }
    if let Some(gw) = gateway {
        ic = ic.gateway(gw);
    }
    let mut iface = Interface::new(ic).map_err(invalid)?;
    // Demux placement and ephemeral ports (RFC 6056) of UDP sockets and listeners.
    iface.set_secret(random_key()?);
    for (ip, mac) in neighbors {
        iface.add_static_neighbor(*ip, *mac).map_err(invalid)?;
    }
    if let Some(mut tcp) = tcp {
        tcp.mtu = tcp.mtu.min(mtu);
        iface.set_tcp(Tcp::new(tcp, random_key()?));
    }
    Ok(iface)
}

/// 16 random bytes for the engine's secrets (RFC 6528, RFC 6056).
fn random_key() -> io::Result<[u8; 16]> {
    let mut key = [0u8; 16];
    rustix::rand::getrandom(&mut key, rustix::rand::GetRandomFlags::empty())?;
    Ok(key)
}

/// A locally administered unicast MAC (IEEE 802: bit 1 of the first octet set, bit 0
/// clear) derived from the address, so the same configuration keeps the same MAC.
pub fn local_mac(addr: IpAddr) -> EthernetAddress {
    let tail = match addr {
        IpAddr::V4(a) => a.octets(),
        IpAddr::V6(a) => {
            let o = a.octets();
            [o[12], o[13], o[14], o[15]]
        }
    };
    EthernetAddress([0x02, 0x75, tail[0], tail[1], tail[2], tail[3]])
}

/// Parses `aa:bb:cc:dd:ee:ff`.
///
/// # Errors
/// `InvalidInput` for anything else.
pub fn parse_mac(s: &str) -> io::Result<EthernetAddress> {
    let mut out = [0u8; 6];
    let mut parts = s.trim().split(':');
    for o in &mut out {
        let p = parts
            .next()
            .ok_or_else(|| invalid(format!("bad MAC {s:?}")))?;
        *o = u8::from_str_radix(p, 16).map_err(|_| invalid(format!("bad MAC {s:?}")))?;
    }
    if parts.next().is_some() {
        return Err(invalid(format!("bad MAC {s:?}")));
    }
    Ok(EthernetAddress(out))
}

/// The MAC of interface `ifname` in namespace `netns` (or the current one), read with
/// `SIOCGIFHWADDR` inside the namespace (see [`ulnet_channel::netif`]).
///
/// # Errors
/// The namespace cannot be entered, or it has no Ethernet interface `ifname`.
pub fn interface_mac(netns: Option<&str>, ifname: &str) -> io::Result<EthernetAddress> {
    let mac = ulnet_channel::netif::interface_mac(netns, ifname).map_err(|e| {
        let err = io::Error::from(e);
        io::Error::new(err.kind(), format!("reading the MAC of {ifname}: {err}"))
    })?;
    Ok(EthernetAddress(mac))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_and_local_ones_are_unicast_and_local() {
        let m = parse_mac("02:00:0a:ff:10:01\n").unwrap();
        assert_eq!(m, EthernetAddress([2, 0, 0x0a, 0xff, 0x10, 1]));
        assert!(parse_mac("02:00:0a:ff:10").is_err());
        assert!(parse_mac("02:00:0a:ff:10:01:02").is_err());
        assert!(parse_mac("zz:00:0a:ff:10:01").is_err());
        let l = local_mac("198.18.0.7".parse().unwrap());
        assert_eq!(l.0[0] & 0b11, 0b10);
        assert_eq!(&l.0[2..], &[198, 18, 0, 7]);
        assert_eq!("tap".parse::<Backend>().unwrap(), Backend::Tap);
        assert!("dpdk".parse::<Backend>().is_err());
    }

    #[test]
    fn ipv6_steers_the_link_local_of_the_mac_too() {
        // RFC 4291 Appendix A's example form: 02:75:6c:00:01:0a -> fe80::75:6cff:fe00:10a
        // (the U/L bit of 0x02 inverted to 0x00).
        let mac = EthernetAddress([0x02, 0x75, 0x6c, 0x00, 0x01, 0x0a]);
        assert_eq!(
            link_local_from_mac(mac),
            "fe80::75:6cff:fe00:10a"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
        );
        let v4: IpCidr = IpCidr::new("198.18.1.16".parse().unwrap(), 24).unwrap();
        let v6: IpCidr = IpCidr::new("2001:2:0:1::10".parse().unwrap(), 64).unwrap();
        assert_eq!(steered_addresses(&[v4], mac), vec![v4.address()]);
        assert_eq!(
            steered_addresses(&[v4, v6], mac),
            vec![
                v4.address(),
                v6.address(),
                IpAddr::V6(link_local_from_mac(mac))
            ]
        );
    }
}
