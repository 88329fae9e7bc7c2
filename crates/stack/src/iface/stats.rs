//! Interface counters: frames and datagrams that went through, and one drop counter per
//! reason, so that every frame the interface refuses is accounted for.
//!
//! Invariant: every frame handed to [`Interface::ingress`](super::Interface::ingress)
//! either reaches a protocol handler or increments exactly one [`DropReason`] counter.

use core::fmt;

macro_rules! drop_reasons {
    ($($(#[$m:meta])* $var:ident => $name:literal,)*) => {
        /// Why the interface dropped a frame, a datagram or an outgoing packet.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum DropReason {
            $($(#[$m])* $var,)*
        }

        impl DropReason {
            /// Every reason, in counter order.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$var,)*];

            /// A short, stable, snake_case name (for reports and metrics).
            pub const fn name(self) -> &'static str {
                match self {
                    $(DropReason::$var => $name,)*
                }
            }
        }
    };
}

drop_reasons! {
    /// The frame is shorter than an Ethernet header.
    EthTruncated => "eth_truncated",
    /// The destination MAC is neither ours nor broadcast.
    EthNotForUs => "eth_not_for_us",
    /// The source MAC is a group address, which no station may send from.
    EthBadSource => "eth_bad_source",
    /// The EtherType is not one the interface handles.
    EthUnknownType => "eth_unknown_type",
    /// The ARP packet is truncated.
    ArpTruncated => "arp_truncated",
    /// The ARP packet is not Ethernet/IPv4, or its operation is unknown.
    ArpUnsupported => "arp_unsupported",
    /// The ARP sender hardware address is a group address, or the sender protocol
    /// address is broadcast or multicast.
    ArpBadSource => "arp_bad_source",
    /// Someone else claims one of our IPv4 addresses.
    ArpAddressConflict => "arp_address_conflict",
    /// The ARP packet is neither about us nor about a neighbour we know.
    ArpNotForUs => "arp_not_for_us",
    /// The IPv4 header or datagram is cut short.
    Ipv4Truncated => "ipv4_truncated",
    /// The IPv4 header or total length is inconsistent.
    Ipv4Malformed => "ipv4_malformed",
    /// The IP version field is not 4.
    Ipv4BadVersion => "ipv4_bad_version",
    /// The IPv4 header checksum is wrong.
    Ipv4BadChecksum => "ipv4_bad_checksum",
    /// The source address is a broadcast or multicast address (RFC 1122 §3.2.1.3).
    Ipv4BadSource => "ipv4_bad_source",
    /// The destination is not one of our addresses or a broadcast we listen to.
    Ipv4NotForUs => "ipv4_not_for_us",
    /// The TTL is zero, which no host may send (RFC 1122 §3.2.1.7).
    Ipv4TtlZero => "ipv4_ttl_zero",
    /// The protocol is not one the interface handles.
    Ipv4UnknownProtocol => "ipv4_unknown_protocol",
    /// An IPv6 packet reached an interface without IPv6.
    Ipv6Disabled => "ipv6_disabled",
    /// The IPv6 header, payload or an extension header is cut short.
    Ipv6Truncated => "ipv6_truncated",
    /// The IP version field of an IPv6 frame is not 6.
    Ipv6BadVersion => "ipv6_bad_version",
    /// The IPv6 source is multicast (RFC 4291 §2.7), or `::` outside ND.
    Ipv6BadSource => "ipv6_bad_source",
    /// The IPv6 destination is not one of our usable addresses or groups.
    Ipv6NotForUs => "ipv6_not_for_us",
    /// An extension-header chain breaks RFC 8200 §4.1 (order, repetition, an option
    /// past its header).
    Ipv6BadExtHeader => "ipv6_bad_ext_header",
    /// An extension-header chain longer than the walk's bounds (headers or bytes).
    Ipv6ExtChainTooLong => "ipv6_ext_chain_too_long",
    /// An unrecognised option whose action is to discard (RFC 8200 §4.2).
    Ipv6UnknownOption => "ipv6_unknown_option",
    /// A routing header with segments left (a host forwards nothing, RFC 8200 §4.4).
    Ipv6RoutingHeader => "ipv6_routing_header",
    /// "No next header" (RFC 8200 §4.7): nothing to deliver.
    Ipv6NoNextHeader => "ipv6_no_next_header",
    /// The upper-layer protocol is not one the interface handles.
    Ipv6UnknownProtocol => "ipv6_unknown_protocol",
    /// A fragment's offset and length are impossible (past 65535, or a non-final
    /// fragment not a multiple of 8 bytes, RFC 791).
    FragMalformed => "frag_malformed",
    /// A fragment overlapped another of the same datagram: the datagram is dropped
    /// (RFC 5722 applied to IPv4, as Linux does since CVE-2018-5391).
    FragOverlap => "frag_overlap",
    /// An exact duplicate of a fragment already held.
    FragDuplicate => "frag_duplicate",
    /// No room for another datagram in reassembly, or for its bytes.
    FragNoRoom => "frag_no_room",
    /// A datagram was cut into more fragments than the limit.
    FragTooManyFragments => "frag_too_many_fragments",
    /// A datagram in reassembly timed out (RFC 1122 §3.3.2).
    FragTimeout => "frag_timeout",
    /// The ICMP message is truncated or malformed.
    IcmpMalformed => "icmp_malformed",
    /// The ICMP checksum is wrong.
    IcmpBadChecksum => "icmp_bad_checksum",
    /// An ICMP type the host does not handle.
    IcmpUnsupported => "icmp_unsupported",
    /// An echo request to a broadcast address (RFC 1122 §3.2.2.6 allows ignoring it).
    IcmpBroadcastEcho => "icmp_broadcast_echo",
    /// An echo reply no socket was waiting for.
    IcmpNoSocket => "icmp_no_socket",
    /// The UDP header or length is inconsistent.
    UdpMalformed => "udp_malformed",
    /// The UDP checksum is wrong.
    UdpBadChecksum => "udp_bad_checksum",
    /// A UDP datagram longer than the link's MTU and not a fragment: a host's UDP
    /// segmentation super-frame taken whole (`rx_super_frames` on a veth), whose
    /// datagram boundaries the frame no longer carries.
    UdpAboveMtu => "udp_above_mtu",
    /// No socket is bound to the destination port.
    UdpNoSocket => "udp_no_socket",
    /// The receiving socket's buffer is full.
    UdpSocketFull => "udp_socket_full",
    /// The TCP header is truncated or malformed.
    TcpMalformed => "tcp_malformed",
    /// The TCP checksum is wrong.
    TcpBadChecksum => "tcp_bad_checksum",
    /// A TCP segment arrived but the interface has no TCP layer.
    TcpNoLayer => "tcp_no_layer",
    /// No route to the destination.
    NoRoute => "no_route",
    /// No source address to send from.
    NoSourceAddress => "no_source_address",
    /// The queue of packets waiting for neighbour resolution is full.
    NeighborQueueFull => "neighbor_queue_full",
    /// The neighbour did not answer ARP: packets waiting for it are dropped.
    NeighborUnreachable => "neighbor_unreachable",
    /// The neighbour cache is full of entries that cannot be evicted.
    NeighborCacheFull => "neighbor_cache_full",
    /// A Neighbor Discovery message arrived with a hop limit below 255: it was
    /// forwarded, so it is not from the link (RFC 4861 §6.1, §7.1).
    NdBadHopLimit => "nd_bad_hop_limit",
    /// A Neighbor Discovery message failed RFC 4861's validity checks (a zero-length
    /// or overrunning option, a nonzero code, a multicast target, a solicitation from
    /// `::` with a link-layer address, a solicited advertisement to a group).
    NdMalformed => "nd_malformed",
    /// A Neighbor Discovery message about no address of ours or neighbour we track, or
    /// one a host ignores (Router Solicitation).
    NdNotForUs => "nd_not_for_us",
    /// Another node advertised one of our usable IPv6 addresses.
    NdAddressConflict => "nd_address_conflict",
    /// A Router Advertisement from a source that is not link-local (RFC 4861 §6.1.2).
    NdBadRaSource => "nd_bad_ra_source",
    /// A Redirect: validated and ignored.
    NdRedirectIgnored => "nd_redirect_ignored",
    /// The datagram is larger than the MTU and may not be fragmented.
    TooLarge => "too_large",
    /// The channel refused the frame (transmit ring full).
    TxFull => "tx_full",
}

/// The interface counters. Plain integers, read with the getters or [`Stats::drops`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    /// Frames handed to `ingress`.
    pub rx_frames: u64,
    /// Bytes of those frames.
    pub rx_bytes: u64,
    /// The largest of those frames, in bytes: above the link's MTU when a channel hands
    /// over a host's segmentation super-frames whole (`XdpOptions::rx_super_frames`).
    pub rx_largest: u64,
    /// Frames that came in several buffers and were taken where they lie
    /// (`Interface::ingress_parts`: TCP with its headers in the first buffer).
    pub rx_parts_in_place: u64,
    /// Frames that came in several buffers and were gathered into one first.
    pub rx_parts_gathered: u64,
    /// Frames the channel accepted from us.
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// ARP requests sent (resolution, retries and probes).
    pub arp_requests_sent: u64,
    /// Of those, unicast to a stale entry's MAC (NUD probes, RFC 1122 §2.3.2.1 unicast
    /// poll).
    pub arp_probes_sent: u64,
    /// ARP replies sent.
    pub arp_replies_sent: u64,
    /// Gratuitous ARP announcements sent (RFC 5227 §2.3).
    pub arp_announcements_sent: u64,
    /// IPv4 datagrams delivered to a protocol handler (after reassembly).
    pub ipv4_delivered: u64,
    /// Datagrams reassembled from fragments.
    pub frag_reassembled: u64,
    /// Fragments sent (of datagrams larger than the MTU).
    pub frag_sent: u64,
    /// Echo replies sent.
    pub icmp_echo_replies_sent: u64,
    /// Destination-unreachable messages sent.
    pub icmp_unreachables_sent: u64,
    /// Destination-unreachable messages not sent because of the rate limit.
    pub icmp_rate_limited: u64,
    /// ICMP error messages received (destination unreachable, time exceeded).
    pub icmp_errors_received: u64,
    /// ... of which TCP or a connected UDP socket took (TCP found the connection and
    /// the quoted sequence number in its window).
    pub icmp_errors_delivered: u64,
    /// ... of which no transport took: no connection or socket, a sequence number out
    /// of window (TCP counts why), an unconnected UDP socket, another protocol.
    pub icmp_errors_unclaimed: u64,
    /// ... of which quoted a datagram that is cut short, a non-first fragment, or not
    /// from one of our addresses.
    pub icmp_errors_bad_quote: u64,
    /// UDP datagrams delivered to a socket.
    pub udp_delivered: u64,
    /// UDP datagrams sent.
    pub udp_sent: u64,
    /// TCP segments handed to the TCP layer.
    pub tcp_delivered: u64,
    /// TCP segments sent (a burst counts as the segments it is cut into).
    pub tcp_sent: u64,
    /// TCP bursts handed to the channel as one frame to cut (`gso_max_len`).
    pub gso_bursts: u64,
    /// Single TCP segments of a jumbo link handed to the channel whole, with their
    /// checksum left to it (the same offload as `gso_bursts`, nothing to cut).
    pub tcp_csum_offloaded: u64,
    /// Received TCP segments and UDP datagrams accepted with their checksum unfinished
    /// (the pseudo-header sum a sender leaves for an offload), on a link that delivers
    /// such frames ([`ChecksumCaps::rx_unfinished`](super::ChecksumCaps::rx_unfinished)).
    pub rx_checksum_unfinished: u64,
    /// IPv6 packets delivered to a protocol handler (after reassembly).
    pub ipv6_delivered: u64,
    /// Extension headers walked in received IPv6 packets.
    pub ipv6_ext_headers: u64,
    /// Atomic fragments processed as whole packets (RFC 8021 §2).
    pub ipv6_atomic_fragments: u64,
    /// Neighbor Solicitations received.
    pub nd_solicits_received: u64,
    /// Neighbor Advertisements received.
    pub nd_adverts_received: u64,
    /// Router Advertisements accepted.
    pub nd_router_adverts_received: u64,
    /// Neighbor Solicitations sent (resolution and NUD probes; DAD apart).
    pub nd_solicits_sent: u64,
    /// Neighbor Advertisements sent.
    pub nd_adverts_sent: u64,
    /// MTU options ignored: below 1280 or above the link MTU (RFC 4861 §6.3.4).
    pub nd_bad_mtu_options: u64,
    /// Prefixes not taken: route table or SLAAC address limit full.
    pub nd_prefixes_refused: u64,
    /// Router Solicitations sent at start-up (RFC 4861 §6.3.7).
    pub nd_router_solicits_sent: u64,
    /// DAD solicitations sent (RFC 4862 §5.4.2).
    pub dad_solicits_sent: u64,
    /// Addresses that passed DAD.
    pub dad_completed: u64,
    /// Addresses found duplicated by DAD (RFC 4862 §5.4.5): never used.
    pub dad_duplicates: u64,
    /// ICMPv6 Parameter Problems sent.
    pub icmp_param_problems_sent: u64,
    drops: [u64; DropReason::ALL.len()],
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            rx_frames: 0,
            rx_bytes: 0,
            rx_largest: 0,
            rx_parts_in_place: 0,
            rx_parts_gathered: 0,
            tx_frames: 0,
            tx_bytes: 0,
            arp_requests_sent: 0,
            arp_probes_sent: 0,
            arp_replies_sent: 0,
            arp_announcements_sent: 0,
            ipv4_delivered: 0,
            frag_reassembled: 0,
            frag_sent: 0,
            icmp_echo_replies_sent: 0,
            icmp_unreachables_sent: 0,
            icmp_rate_limited: 0,
            icmp_errors_received: 0,
            icmp_errors_delivered: 0,
            icmp_errors_unclaimed: 0,
            icmp_errors_bad_quote: 0,
            udp_delivered: 0,
            udp_sent: 0,
            tcp_delivered: 0,
            tcp_sent: 0,
            gso_bursts: 0,
            tcp_csum_offloaded: 0,
            rx_checksum_unfinished: 0,
            ipv6_delivered: 0,
            ipv6_ext_headers: 0,
            ipv6_atomic_fragments: 0,
            nd_solicits_received: 0,
            nd_adverts_received: 0,
            nd_router_adverts_received: 0,
            nd_solicits_sent: 0,
            nd_adverts_sent: 0,
            nd_bad_mtu_options: 0,
            nd_prefixes_refused: 0,
            dad_solicits_sent: 0,
            nd_router_solicits_sent: 0,
            dad_completed: 0,
            dad_duplicates: 0,
            icmp_param_problems_sent: 0,
            drops: [0; DropReason::ALL.len()],
        }
    }
}

impl Stats {
    /// How many times the interface dropped something for `reason`.
    pub fn drops(&self, reason: DropReason) -> u64 {
        self.drops[reason as usize]
    }

    /// The sum of all drop counters.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Every reason with a non-zero count.
    pub fn nonzero_drops(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|&r| (r, self.drops(r)))
            .filter(|&(_, n)| n != 0)
    }

    pub(crate) fn drop(&mut self, reason: DropReason) {
        self.drops[reason as usize] += 1;
    }

    pub(crate) fn drop_n(&mut self, reason: DropReason, n: u64) {
        self.drops[reason as usize] += n;
    }
}

impl fmt::Display for Stats {
    /// One `name value` pair per line, non-zero drop counters only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "rx_frames {}", self.rx_frames)?;
        writeln!(f, "rx_bytes {}", self.rx_bytes)?;
        writeln!(f, "rx_largest {}", self.rx_largest)?;
        writeln!(f, "rx_parts_in_place {}", self.rx_parts_in_place)?;
        writeln!(f, "rx_parts_gathered {}", self.rx_parts_gathered)?;
        writeln!(f, "tx_frames {}", self.tx_frames)?;
        writeln!(f, "tx_bytes {}", self.tx_bytes)?;
        writeln!(f, "arp_requests_sent {}", self.arp_requests_sent)?;
        writeln!(f, "arp_probes_sent {}", self.arp_probes_sent)?;
        writeln!(f, "arp_replies_sent {}", self.arp_replies_sent)?;
        writeln!(f, "arp_announcements_sent {}", self.arp_announcements_sent)?;
        writeln!(f, "ipv4_delivered {}", self.ipv4_delivered)?;
        writeln!(f, "frag_reassembled {}", self.frag_reassembled)?;
        writeln!(f, "frag_sent {}", self.frag_sent)?;
        writeln!(f, "icmp_echo_replies_sent {}", self.icmp_echo_replies_sent)?;
        writeln!(f, "icmp_unreachables_sent {}", self.icmp_unreachables_sent)?;
        writeln!(f, "icmp_rate_limited {}", self.icmp_rate_limited)?;
        writeln!(f, "icmp_errors_received {}", self.icmp_errors_received)?;
        writeln!(f, "icmp_errors_delivered {}", self.icmp_errors_delivered)?;
        writeln!(f, "icmp_errors_unclaimed {}", self.icmp_errors_unclaimed)?;
        writeln!(f, "icmp_errors_bad_quote {}", self.icmp_errors_bad_quote)?;
        writeln!(f, "udp_delivered {}", self.udp_delivered)?;
        writeln!(f, "udp_sent {}", self.udp_sent)?;
        writeln!(f, "tcp_delivered {}", self.tcp_delivered)?;
        writeln!(f, "tcp_sent {}", self.tcp_sent)?;
        writeln!(f, "gso_bursts {}", self.gso_bursts)?;
        writeln!(f, "tcp_csum_offloaded {}", self.tcp_csum_offloaded)?;
        writeln!(f, "rx_checksum_unfinished {}", self.rx_checksum_unfinished)?;
        writeln!(f, "ipv6_delivered {}", self.ipv6_delivered)?;
        writeln!(f, "ipv6_ext_headers {}", self.ipv6_ext_headers)?;
        writeln!(f, "ipv6_atomic_fragments {}", self.ipv6_atomic_fragments)?;
        writeln!(f, "nd_solicits_received {}", self.nd_solicits_received)?;
        writeln!(f, "nd_adverts_received {}", self.nd_adverts_received)?;
        writeln!(
            f,
            "nd_router_adverts_received {}",
            self.nd_router_adverts_received
        )?;
        writeln!(f, "nd_solicits_sent {}", self.nd_solicits_sent)?;
        writeln!(f, "nd_adverts_sent {}", self.nd_adverts_sent)?;
        writeln!(f, "nd_bad_mtu_options {}", self.nd_bad_mtu_options)?;
        writeln!(f, "nd_prefixes_refused {}", self.nd_prefixes_refused)?;
        writeln!(f, "dad_solicits_sent {}", self.dad_solicits_sent)?;
        writeln!(
            f,
            "nd_router_solicits_sent {}",
            self.nd_router_solicits_sent
        )?;
        writeln!(f, "dad_completed {}", self.dad_completed)?;
        writeln!(f, "dad_duplicates {}", self.dad_duplicates)?;
        writeln!(
            f,
            "icmp_param_problems_sent {}",
            self.icmp_param_problems_sent
        )?;
        for (reason, n) in self.nonzero_drops() {
            writeln!(f, "drop_{} {}", reason.name(), n)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_own_counter() {
        let mut s = Stats::default();
        for (i, &r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r as usize, i);
            s.drop(r);
        }
        assert_eq!(s.total_drops(), DropReason::ALL.len() as u64);
        let names: std::collections::HashSet<_> =
            DropReason::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(names.len(), DropReason::ALL.len());
    }
}
