//! Names, subnets and link addresses of testbeds: pure functions, so the scheme is tested
//! without root and `list`/`down` can recognise a testbed from its namespace name alone.
//!
//! A testbed is named `ulnet-<label>-<pid>-<counter>-<random>-s<slot>` and its two
//! namespaces are that name plus `-a` and `-b`. The slot (1..=510) numbers the /24 it uses
//! in 198.18.0.0/15 (RFC 2544 benchmarking range): slot `n` is `198.18.0.0 + n*256`.
//! Slots are claimed under a lock (see `inventory`), so live testbeds never share one;
//! interface names (`ul<slot>a`, `ul<slot>b`) and MAC addresses derive from the slot too.
//! With IPv6 on, slot `n` also has the /64 `2001:2:0:n::/64` (RFC 5180's benchmarking
//! range 2001:2::/48, the slot in the fourth group), with the same host numbers as IPv4.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::error::{Error, Result};
use crate::testbed::MacAddr;

/// Every testbed name starts with this; `down --all` removes only such namespaces.
pub const NAME_PREFIX: &str = "ulnet-";
/// Lowest and highest slot (198.18.1.0/24 ..= 198.19.254.0/24).
pub(crate) const SLOTS: std::ops::RangeInclusive<u16> = 1..=510;
/// Each testbed's prefix length.
pub(crate) const PREFIX_LEN: u8 = 24;
/// Each testbed's IPv6 prefix length (RFC 4291 §2.5.1: interface identifiers are 64 bits).
pub(crate) const PREFIX6_LEN: u8 = 64;
/// Addresses per side set aside for user-level stacks (never assigned to a kernel
/// interface): side A `.16..=.115`, side B `.144..=.243`.
pub(crate) const SPARE_COUNT: u8 = 100;
/// Longest label accepted (keeps names readable).
const MAX_LABEL_LEN: usize = 24;

/// One of the two ends of a testbed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SideId {
    /// The first namespace (`...-a`), address `.1`.
    A,
    /// The second namespace (`...-b`), address `.2`.
    B,
}

impl SideId {
    /// Both sides, A first.
    pub const BOTH: [SideId; 2] = [SideId::A, SideId::B];

    /// `'a'` or `'b'`: the suffix of names on this side.
    pub fn letter(self) -> char {
        match self {
            SideId::A => 'a',
            SideId::B => 'b',
        }
    }

    fn host(self) -> u8 {
        match self {
            SideId::A => 1,
            SideId::B => 2,
        }
    }

    fn spare_host(self) -> u8 {
        match self {
            SideId::A => 16,
            SideId::B => 144,
        }
    }
}

/// Checks a user-chosen label: 1 to 24 of `[a-z0-9_]` (no `-`, which separates fields).
///
/// # Errors
/// [`Error::Invalid`] saying what is wrong.
pub(crate) fn check_label(label: &str) -> Result<()> {
    let ok_chars = label
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if label.is_empty() || label.len() > MAX_LABEL_LEN || !ok_chars {
        return Err(Error::Invalid(format!(
            "label {label:?} must be 1 to {MAX_LABEL_LEN} characters of a-z, 0-9 and _"
        )));
    }
    Ok(())
}

/// The testbed name for these parts.
pub(crate) fn testbed_name(label: &str, pid: u32, counter: u32, random: u16, slot: u16) -> String {
    format!("{NAME_PREFIX}{label}-{pid}-{counter}-{random:04x}-s{slot}")
}

/// The namespace of `side` of testbed `name`.
pub(crate) fn ns_name(name: &str, side: SideId) -> String {
    format!("{name}-{}", side.letter())
}

/// What a testbed name says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParsedName {
    pub(crate) label: String,
    pub(crate) slot: u16,
}

/// Parses a testbed name made by [`testbed_name`]; `None` for anything else.
pub(crate) fn parse_testbed_name(name: &str) -> Option<ParsedName> {
    let rest = name.strip_prefix(NAME_PREFIX)?;
    let mut fields = rest.split('-');
    let label = fields.next()?;
    let pid = fields.next()?;
    let counter = fields.next()?;
    let random = fields.next()?;
    let slot = fields.next()?.strip_prefix('s')?;
    let numeric = |s: &str, radix| !s.is_empty() && s.chars().all(|c| c.is_digit(radix));
    if fields.next().is_some()
        || check_label(label).is_err()
        || !numeric(pid, 10)
        || !numeric(counter, 10)
        || !numeric(random, 16)
        || !numeric(slot, 10)
    {
        return None;
    }
    let slot: u16 = slot.parse().ok().filter(|s| SLOTS.contains(s))?;
    Some(ParsedName {
        label: label.to_owned(),
        slot,
    })
}

/// Splits a namespace name into its testbed name and side; `None` if it is not a testbed
/// namespace.
pub(crate) fn parse_ns_name(ns: &str) -> Option<(String, SideId, ParsedName)> {
    let (name, side) = if let Some(name) = ns.strip_suffix("-a") {
        (name, SideId::A)
    } else {
        (ns.strip_suffix("-b")?, SideId::B)
    };
    let parsed = parse_testbed_name(name)?;
    Some((name.to_owned(), side, parsed))
}

fn slot_host(slot: u16, host: u8) -> Ipv4Addr {
    let base = u32::from(Ipv4Addr::new(198, 18, 0, 0));
    Ipv4Addr::from(base + u32::from(slot) * 256 + u32::from(host))
}

/// The network address of `slot`'s /24.
pub(crate) fn subnet(slot: u16) -> Ipv4Addr {
    slot_host(slot, 0)
}

/// The kernel interface address of `side`.
pub(crate) fn side_ip(slot: u16, side: SideId) -> Ipv4Addr {
    slot_host(slot, side.host())
}

/// The first spare address of `side` (there are [`SPARE_COUNT`]).
pub(crate) fn spare_first(slot: u16, side: SideId) -> Ipv4Addr {
    slot_host(slot, side.spare_host())
}

fn slot_host6(slot: u16, host: u8) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0x0002, 0, slot, 0, 0, 0, u16::from(host))
}

/// The network address of `slot`'s IPv6 /64 (in 2001:2::/48, RFC 5180 §8).
pub(crate) fn subnet6(slot: u16) -> Ipv6Addr {
    slot_host6(slot, 0)
}

/// The kernel interface's IPv6 address on `side`.
pub(crate) fn side_ip6(slot: u16, side: SideId) -> Ipv6Addr {
    slot_host6(slot, side.host())
}

/// The first spare IPv6 address of `side` (there are [`SPARE_COUNT`]).
pub(crate) fn spare6_first(slot: u16, side: SideId) -> Ipv6Addr {
    slot_host6(slot, side.spare_host())
}

/// The veth interface name of `side` (at most 7 bytes, well inside IFNAMSIZ).
pub(crate) fn ifname(slot: u16, side: SideId) -> String {
    format!("ul{slot}{}", side.letter())
}

/// The veth MAC address of `side`: locally administered unicast (first octet 0x02),
/// `75:6c` ("ul"), the slot, then 0x0a or 0x0b.
pub(crate) fn mac(slot: u16, side: SideId) -> MacAddr {
    let [hi, lo] = slot.to_be_bytes();
    let last = match side {
        SideId::A => 0x0a,
        SideId::B => 0x0b,
    };
    MacAddr([0x02, 0x75, 0x6c, hi, lo, last])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let name = testbed_name("tcp_rx", 4242, 7, 0xbeef, 300);
        assert_eq!(name, "ulnet-tcp_rx-4242-7-beef-s300");
        let parsed = parse_testbed_name(&name).unwrap();
        assert_eq!(
            parsed,
            ParsedName {
                label: "tcp_rx".into(),
                slot: 300
            }
        );
        let (stem, side, _) = parse_ns_name(&ns_name(&name, SideId::B)).unwrap();
        assert_eq!((stem.as_str(), side), (name.as_str(), SideId::B));
    }

    #[test]
    fn foreign_names_are_not_testbeds() {
        for other in [
            "ulnet",
            "ulnet-x-1-2-3-s4-c",
            "ulnet-x-1-2-3-s0-a",
            "ulnet-x-1-2-3-s511-a",
            "ulnet-X-1-2-3-s4-a",
            "ulnet-x-1-2-3-s4-extra-a",
            "ulnet-x-1-2-zz-s4-a",
            "myns-a",
            "ulnet--1-2-3-s4-a",
        ] {
            assert!(parse_ns_name(other).is_none(), "{other} accepted");
        }
    }

    #[test]
    fn labels_are_checked() {
        assert!(check_label("bench_1").is_ok());
        for bad in ["", "a-b", "A", "x".repeat(25).as_str(), "sp ace", "dot."] {
            assert!(check_label(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn slots_cover_the_benchmarking_range_without_overlap() {
        assert_eq!(subnet(1), Ipv4Addr::new(198, 18, 1, 0));
        assert_eq!(subnet(255), Ipv4Addr::new(198, 18, 255, 0));
        assert_eq!(subnet(256), Ipv4Addr::new(198, 19, 0, 0));
        assert_eq!(subnet(510), Ipv4Addr::new(198, 19, 254, 0));
        assert_eq!(side_ip(3, SideId::A), Ipv4Addr::new(198, 18, 3, 1));
        assert_eq!(side_ip(3, SideId::B), Ipv4Addr::new(198, 18, 3, 2));
        // Spare ranges stay inside the /24, apart from each other and the kernel addresses.
        let a_last = u32::from(spare_first(3, SideId::A)) + u32::from(SPARE_COUNT) - 1;
        let b_first = u32::from(spare_first(3, SideId::B));
        let b_last = b_first + u32::from(SPARE_COUNT) - 1;
        assert!(a_last < b_first);
        assert_eq!(Ipv4Addr::from(b_last), Ipv4Addr::new(198, 18, 3, 243));
    }

    #[test]
    fn ipv6_subnets_are_per_slot_inside_the_benchmarking_range() {
        assert_eq!(subnet6(1), "2001:2:0:1::".parse::<Ipv6Addr>().unwrap());
        assert_eq!(subnet6(510), "2001:2:0:1fe::".parse::<Ipv6Addr>().unwrap());
        assert_eq!(
            side_ip6(300, SideId::B),
            "2001:2:0:12c::2".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            spare6_first(3, SideId::A),
            "2001:2:0:3::10".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            spare6_first(3, SideId::B),
            "2001:2:0:3::90".parse::<Ipv6Addr>().unwrap()
        );
        // Inside 2001:2::/48.
        for slot in [1, 255, 256, 510] {
            assert_eq!(subnet6(slot).segments()[..3], [0x2001, 2, 0]);
        }
    }

    #[test]
    fn link_names_and_macs_are_distinct_per_side_and_slot() {
        assert_eq!(ifname(510, SideId::A), "ul510a");
        assert_eq!(mac(300, SideId::B).to_string(), "02:75:6c:01:2c:0b");
        assert_ne!(mac(1, SideId::A), mac(1, SideId::B));
        assert_ne!(mac(1, SideId::A), mac(2, SideId::A));
        // Locally administered, unicast.
        assert_eq!(mac(7, SideId::A).octets()[0] & 0x03, 0x02);
    }
}
