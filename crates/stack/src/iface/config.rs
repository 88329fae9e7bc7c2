//! Interface configuration: identity (MAC, addresses, gateway), link properties (MTU,
//! checksum offloads) and every limit that bounds the interface's memory.

use alloc::vec::Vec;
use core::fmt;
use core::net::IpAddr;

use ulnet_wire::{ChecksumMode, EthernetAddress};

use super::route::IpCidr;
use crate::time::Duration;

/// Every bound on the interface's memory and timers. The defaults follow the RFCs cited
/// per field and Linux where the RFCs leave a choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Routes in the table (on-link networks included).
    pub route_count: usize,
    /// Neighbour cache entries.
    pub neighbor_count: usize,
    /// How long a learned neighbour stays reachable without a confirmation before it is
    /// stale (still used, probed once used: RFC 4861 §7.3, for IPv4 too). Linux uses a
    /// reachable time of 30 s (randomised); RFC 1122 §2.3.2.1 asks for some timeout.
    pub neighbor_ttl: Duration,
    /// Time between ARP requests for the same address: RFC 1122 §2.3.2.1 says at most
    /// one per second.
    pub arp_retry_interval: Duration,
    /// ARP requests sent for an address before it is declared unreachable (Linux
    /// `mcast_solicit` = 3).
    pub arp_max_requests: u8,
    /// Packets waiting for one neighbour's resolution (Linux `unres_qlen`-like).
    pub pending_per_neighbor: usize,
    /// Packets waiting for resolution, over all neighbours.
    pub pending_count: usize,
    /// Bytes of packets waiting for resolution, over all neighbours.
    pub pending_len: usize,
    /// Gratuitous ARP announcements on start (RFC 5227 §1.1 ANNOUNCE_NUM = 2).
    pub announce_count: u8,
    /// Time between announcements (RFC 5227 §1.1 ANNOUNCE_INTERVAL = 2 s).
    pub announce_interval: Duration,
    /// Datagrams in reassembly at once.
    pub frag_datagram_count: usize,
    /// Bytes held by reassembly buffers, over all datagrams.
    pub frag_buffer_len: usize,
    /// Fragments one datagram may be cut into.
    pub frag_per_datagram: usize,
    /// How long a datagram may stay incomplete (RFC 1122 §3.3.2 suggests 60 s;
    /// Linux uses 30 s).
    pub frag_timeout: Duration,
    /// Destination-unreachable messages allowed per second (token rate), RFC 1812
    /// §4.3.2.8 asks for a limit; Linux allows 1000/s with bursts of 50.
    pub icmp_error_rate: u32,
    /// Burst of destination-unreachable messages allowed.
    pub icmp_error_burst: u32,
    /// UDP sockets in the socket set.
    pub udp_socket_count: usize,
    /// ICMP echo sockets in the socket set.
    pub icmp_socket_count: usize,
    /// Neighbor Solicitations sent for Duplicate Address Detection of each IPv6
    /// address (RFC 4862 §5.1 DupAddrDetectTransmits = 1); 0 turns DAD off.
    pub dad_transmits: u8,
    /// Time between DAD solicitations, and after the last (RFC 4861 §10
    /// RETRANS_TIMER = 1 s).
    pub dad_retrans_interval: Duration,
    /// RFC 4861 §10 DELAY_FIRST_PROBE_TIME (5 s): how long a stale neighbour (IPv4 or
    /// IPv6) is used before Neighbor Unreachability Detection probes it.
    pub delay_first_probe: Duration,
    /// Addresses SLAAC (RFC 4862 §5.5.3) may add from Router Advertisements.
    pub slaac_address_count: usize,
    /// On-link prefixes Router Advertisements may add as routes (RFC 4861 §6.3.4); each
    /// is removed when its valid lifetime ends.
    pub ra_prefix_count: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            route_count: 16,
            neighbor_count: 64,
            neighbor_ttl: Duration::from_secs(30),
            arp_retry_interval: Duration::from_secs(1),
            arp_max_requests: 3,
            pending_per_neighbor: 8,
            pending_count: 64,
            pending_len: 256 * 1024,
            announce_count: 2,
            announce_interval: Duration::from_secs(2),
            frag_datagram_count: 16,
            frag_buffer_len: 256 * 1024,
            frag_per_datagram: 64,
            frag_timeout: Duration::from_secs(30),
            icmp_error_rate: 1000,
            icmp_error_burst: 50,
            udp_socket_count: 64,
            icmp_socket_count: 8,
            dad_transmits: 1,
            dad_retrans_interval: Duration::from_secs(1),
            delay_first_probe: Duration::from_secs(5),
            slaac_address_count: 4,
            ra_prefix_count: 4,
        }
    }
}

/// What the channel does with checksums; the interface picks [`ChecksumMode`]s from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChecksumCaps {
    /// The channel verified IPv4/TCP/UDP checksums of received frames (so the
    /// interface does not check them again; reassembled datagrams are still checked).
    pub rx_verified: bool,
    /// The link may deliver TCP segments and UDP datagrams whose checksum the sender left
    /// for an offload that nothing performed: a veth whose other end has transmit
    /// checksumming on hands over Linux's `CHECKSUM_PARTIAL` packets as they are (the
    /// field holds the pseudo-header sum only). The kernel's own receive on a veth
    /// trusts them; here a checksum field that is exactly that sum is accepted in place
    /// of a sum over the data, and any other is verified as usual. A corrupted packet
    /// passes only if its field happens to equal the pseudo-header sum, one chance in
    /// 65,536, as a corrupted packet passes a full check.
    pub rx_unfinished: bool,
    /// Transport checksums to write on transmit: `Full` computes them; `Partial` leaves
    /// the pseudo-header sum for the device. IPv4 and ICMP checksums, and those of
    /// fragmented datagrams, are always computed.
    pub tx: ChecksumMode,
}

/// Why an interface configuration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The MTU is below the 68 bytes every IPv4 link must carry (RFC 791), or below
    /// the 1280 bytes of IPv6 (RFC 8200 §5) on an interface with IPv6.
    MtuTooSmall,
    /// The MTU is above the largest IPv4 datagram.
    MtuTooLarge,
    /// The MAC address is a group address.
    BadMac,
    /// An address is unspecified, broadcast or multicast.
    BadAddress,
    /// No longer returned (IPv6 is supported); kept so matches on it still compile.
    Ipv6Unsupported,
    /// More addresses or routes than `Limits::route_count`.
    TooManyRoutes,
    /// The gateway is not inside any of the interface's networks.
    GatewayNotOnLink,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfigError::MtuTooSmall => "MTU below 68 bytes (1280 with IPv6)",
            ConfigError::MtuTooLarge => "MTU above 65535 bytes",
            ConfigError::BadMac => "MAC address is a group address",
            ConfigError::BadAddress => "address is unspecified, broadcast or multicast",
            ConfigError::Ipv6Unsupported => "IPv6 addresses are not supported yet",
            ConfigError::TooManyRoutes => "more addresses and routes than the route limit",
            ConfigError::GatewayNotOnLink => "gateway is not on any of the interface's networks",
        })
    }
}

impl core::error::Error for ConfigError {}

/// The configuration an [`Interface`](super::Interface) is built from.
///
/// ```
/// use ulnet_stack::iface::{InterfaceConfig, IpCidr};
/// use ulnet_wire::EthernetAddress;
/// let config = InterfaceConfig::new(EthernetAddress([0x02, 0, 0, 0, 0, 1]))
///     .address(IpCidr::new("198.18.0.1".parse()?, 24).unwrap())
///     .gateway("198.18.0.254".parse()?)
///     .mtu(1500);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceConfig {
    /// The interface's MAC address.
    pub mac: EthernetAddress,
    /// The interface's addresses with their prefixes; each adds an on-link route.
    pub addresses: Vec<IpCidr>,
    /// The default gateway, if any.
    pub gateway: Option<IpAddr>,
    /// The largest IP datagram the link carries (Ethernet header excluded).
    pub mtu: usize,
    /// Default TTL of datagrams we originate (RFC 1700 / Linux: 64).
    pub ttl: u8,
    /// Checksum offloads of the channel.
    pub checksum: ChecksumCaps,
    /// Memory and timer bounds.
    pub limits: Limits,
    /// IPv6 on: a link-local address from the MAC (RFC 4291 §2.5.6, modified EUI-64,
    /// RFC 4291 App. A), Neighbor Discovery, ICMPv6. Set by [`ipv6`](Self::ipv6), and
    /// implied by any IPv6 address.
    pub ipv6: bool,
    /// Accept Router Advertisements (RFC 4861 §6.3.4): default router, MTU, on-link
    /// prefixes.
    pub accept_ra: bool,
    /// Form addresses from advertised prefixes (SLAAC, RFC 4862 §5.5.3).
    pub slaac: bool,
    /// The largest TCP burst frame (Ethernet header included) the channel segments
    /// itself (`Capabilities::gso_max_len` of `ulnet-channel`); 0 when it cannot. TCP
    /// then sends bursts of full-sized segments as one frame each
    /// ([`TcpConfig::gso_max`](crate::tcp::TcpConfig::gso_max)).
    pub gso_max_len: usize,
}

impl InterfaceConfig {
    /// A configuration with MAC `mac`, no address, MTU 1500 and default limits.
    pub fn new(mac: EthernetAddress) -> InterfaceConfig {
        InterfaceConfig {
            mac,
            addresses: Vec::new(),
            gateway: None,
            mtu: 1500,
            ttl: 64,
            checksum: ChecksumCaps::default(),
            limits: Limits::default(),
            ipv6: false,
            accept_ra: true,
            slaac: false,
            gso_max_len: 0,
        }
    }

    /// Adds an address; an IPv6 one turns IPv6 on.
    pub fn address(mut self, cidr: IpCidr) -> Self {
        self.ipv6 |= cidr.address().is_ipv6();
        self.addresses.push(cidr);
        self
    }

    /// Turns IPv6 on (link-local address, Neighbor Discovery) or off.
    pub fn ipv6(mut self, on: bool) -> Self {
        self.ipv6 = on;
        self
    }

    /// Turns SLAAC (addresses from advertised prefixes) on or off.
    pub fn slaac(mut self, on: bool) -> Self {
        self.slaac = on;
        self
    }

    /// Whether IPv6 runs on the interface: asked for, or an IPv6 address configured.
    pub fn ipv6_enabled(&self) -> bool {
        self.ipv6 || self.addresses.iter().any(|a| a.address().is_ipv6())
    }

    /// Sets the default gateway.
    pub fn gateway(mut self, gateway: IpAddr) -> Self {
        self.gateway = Some(gateway);
        self
    }

    /// Sets the MTU.
    pub fn mtu(mut self, mtu: usize) -> Self {
        self.mtu = mtu;
        self
    }

    /// Sets the default TTL.
    pub fn ttl(mut self, ttl: u8) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets the checksum offloads.
    pub fn checksum(mut self, caps: ChecksumCaps) -> Self {
        self.checksum = caps;
        self
    }

    /// Sets the largest TCP burst frame the channel segments (0: none).
    pub fn gso_max_len(mut self, len: usize) -> Self {
        self.gso_max_len = len;
        self
    }

    /// Sets the limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Checks the configuration as [`Interface::new`](super::Interface::new) does.
    ///
    /// # Errors
    /// The first problem found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.mtu < 68 || (self.ipv6_enabled() && self.mtu < 1280) {
            return Err(ConfigError::MtuTooSmall);
        }
        if self.mtu > 65535 {
            return Err(ConfigError::MtuTooLarge);
        }
        if !self.mac.is_unicast() {
            return Err(ConfigError::BadMac);
        }
        for a in &self.addresses {
            match a.address() {
                IpAddr::V4(v4) => {
                    if v4.is_unspecified() || v4.is_broadcast() || v4.is_multicast() {
                        return Err(ConfigError::BadAddress);
                    }
                }
                IpAddr::V6(v6) => {
                    if v6.is_unspecified() || v6.is_multicast() || v6.is_loopback() {
                        return Err(ConfigError::BadAddress);
                    }
                }
            }
        }
        // The link-local prefix fe80::/64 takes a route when IPv6 is on.
        let link_local = usize::from(self.ipv6_enabled());
        if self.addresses.len() + usize::from(self.gateway.is_some()) + link_local
            > self.limits.route_count
        {
            return Err(ConfigError::TooManyRoutes);
        }
        if let Some(gw) = self.gateway {
            // An IPv6 router is usually named by its link-local address (RFC 4861 §8).
            let link_local = matches!(gw, IpAddr::V6(a) if a.is_unicast_link_local());
            if !link_local && !self.addresses.iter().any(|a| a.contains(gw)) {
                return Err(ConfigError::GatewayNotOnLink);
            }
        }
        Ok(())
    }
}
