//! Routes: which neighbour a datagram goes to. Longest-prefix match over a bounded table
//! of on-link subnets (from the interface's addresses) and gateway routes, with the
//! default gateway as the `/0` route.
//!
//! In: a destination address; out: the next hop (the destination itself when on-link,
//! else the gateway). Addresses are [`IpAddr`] throughout so IPv6 routes are an addition;
//! the interface uses only the IPv4 ones today.

use alloc::vec::Vec;
use core::fmt;
use core::net::{IpAddr, Ipv4Addr};

/// An address with a prefix length, as in `198.18.0.1/24`: an interface address or a
/// route's destination network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpCidr {
    addr: IpAddr,
    prefix_len: u8,
}

impl IpCidr {
    /// `addr/prefix_len`, or `None` when `prefix_len` exceeds 32 (IPv4) or 128 (IPv6).
    pub fn new(addr: IpAddr, prefix_len: u8) -> Option<IpCidr> {
        let max = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        (prefix_len <= max).then_some(IpCidr { addr, prefix_len })
    }

    /// The address as given (host bits kept).
    pub const fn address(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length in bits.
    pub const fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    /// The network address: host bits cleared.
    pub fn network(&self) -> IpAddr {
        match self.addr {
            IpAddr::V4(a) => {
                IpAddr::V4(Ipv4Addr::from_bits(a.to_bits() & v4_mask(self.prefix_len)))
            }
            IpAddr::V6(a) => {
                let mask = if self.prefix_len == 0 {
                    0
                } else {
                    u128::MAX << (128 - u32::from(self.prefix_len))
                };
                IpAddr::V6(core::net::Ipv6Addr::from_bits(a.to_bits() & mask))
            }
        }
    }

    /// Whether `ip` lies in this network (never across address families).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let m = v4_mask(self.prefix_len);
                a.to_bits() & m == b.to_bits() & m
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                if self.prefix_len == 0 {
                    return true;
                }
                let m = u128::MAX << (128 - u32::from(self.prefix_len));
                a.to_bits() & m == b.to_bits() & m
            }
            _ => false,
        }
    }

    /// The directed broadcast address of an IPv4 network (RFC 919, RFC 1122 §3.2.1.3),
    /// `None` for IPv6 and for /31 and /32, which have none (RFC 3021).
    pub fn broadcast(&self) -> Option<Ipv4Addr> {
        match self.addr {
            IpAddr::V4(a) if self.prefix_len < 31 => {
                Some(Ipv4Addr::from_bits(a.to_bits() | !v4_mask(self.prefix_len)))
            }
            _ => None,
        }
    }
}

impl fmt::Display for IpCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

fn v4_mask(prefix_len: u8) -> u32 {
    if prefix_len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix_len.min(32)))
    }
}

/// One route: datagrams to `dst` go to `via`, or straight to the destination when
/// `via` is `None` (an on-link network).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Route {
    /// The destination network.
    pub dst: IpCidr,
    /// The gateway, `None` for on-link.
    pub via: Option<IpAddr>,
}

/// Why a route could not be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RouteError {
    /// The table holds its maximum number of routes.
    Full,
    /// The gateway's address family differs from the destination's.
    FamilyMismatch,
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteError::Full => f.write_str("route table full"),
            RouteError::FamilyMismatch => f.write_str("gateway and destination differ in family"),
        }
    }
}

impl core::error::Error for RouteError {}

/// A bounded route table with longest-prefix match.
#[derive(Debug, Clone)]
pub struct RouteTable {
    routes: Vec<Route>,
    capacity: usize,
}

impl RouteTable {
    /// An empty table holding at most `capacity` routes.
    pub fn new(capacity: usize) -> RouteTable {
        RouteTable {
            routes: Vec::with_capacity(capacity),
            capacity,
        }
    }

    /// Adds `route`, replacing any route to the same network (same prefix, same network
    /// address).
    ///
    /// # Errors
    /// [`RouteError::Full`] when the table is full, [`RouteError::FamilyMismatch`] when
    /// the gateway's family differs from the destination's.
    pub fn add(&mut self, route: Route) -> Result<(), RouteError> {
        if let Some(via) = route.via {
            if via.is_ipv4() != route.dst.address().is_ipv4() {
                return Err(RouteError::FamilyMismatch);
            }
        }
        if let Some(r) = self
            .routes
            .iter_mut()
            .find(|r| same_network(&r.dst, &route.dst))
        {
            *r = route;
            return Ok(());
        }
        if self.routes.len() >= self.capacity {
            return Err(RouteError::Full);
        }
        self.routes.push(route);
        Ok(())
    }

    /// Sets the default gateway: the `/0` route of `gateway`'s family.
    ///
    /// # Errors
    /// As [`RouteTable::add`].
    pub fn set_default_gateway(&mut self, gateway: IpAddr) -> Result<(), RouteError> {
        let any = match gateway {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED),
        };
        self.add(Route {
            dst: IpCidr {
                addr: any,
                prefix_len: 0,
            },
            via: Some(gateway),
        })
    }

    /// Removes the route to `dst`'s network; returns it if there was one.
    pub fn remove(&mut self, dst: IpCidr) -> Option<Route> {
        let i = self
            .routes
            .iter()
            .position(|r| same_network(&r.dst, &dst))?;
        Some(self.routes.swap_remove(i))
    }

    /// The routes, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Route> + '_ {
        self.routes.iter()
    }

    /// The most specific route covering `dst`.
    pub fn lookup(&self, dst: IpAddr) -> Option<&Route> {
        self.routes
            .iter()
            .filter(|r| r.dst.contains(dst))
            .max_by_key(|r| r.dst.prefix_len())
    }

    /// The neighbour a datagram to `dst` is handed to: the gateway of the most specific
    /// route, or `dst` itself when that route is on-link.
    pub fn next_hop(&self, dst: IpAddr) -> Option<IpAddr> {
        self.lookup(dst).map(|r| r.via.unwrap_or(dst))
    }
}

fn same_network(a: &IpCidr, b: &IpCidr) -> bool {
    a.prefix_len == b.prefix_len && a.network() == b.network()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(a, b, c, d))
    }

    fn cidr(a: IpAddr, p: u8) -> IpCidr {
        IpCidr::new(a, p).unwrap()
    }

    #[test]
    fn cidr_arithmetic() {
        let c = cidr(v4(198, 18, 1, 7), 24);
        assert_eq!(c.network(), v4(198, 18, 1, 0));
        assert_eq!(c.broadcast(), Some(Ipv4Addr::new(198, 18, 1, 255)));
        assert!(c.contains(v4(198, 18, 1, 200)));
        assert!(!c.contains(v4(198, 18, 2, 1)));
        assert!(cidr(v4(0, 0, 0, 0), 0).contains(v4(1, 2, 3, 4)));
        assert_eq!(cidr(v4(198, 18, 0, 1), 31).broadcast(), None);
        assert!(IpCidr::new(v4(1, 1, 1, 1), 33).is_none());
        assert!(!c.contains(IpAddr::V6(core::net::Ipv6Addr::LOCALHOST)));
    }

    #[test]
    fn longest_prefix_wins() {
        let mut t = RouteTable::new(4);
        t.add(Route {
            dst: cidr(v4(198, 18, 0, 0), 16),
            via: None,
        })
        .unwrap();
        t.add(Route {
            dst: cidr(v4(198, 18, 5, 0), 24),
            via: Some(v4(198, 18, 0, 9)),
        })
        .unwrap();
        t.set_default_gateway(v4(198, 18, 0, 1)).unwrap();
        assert_eq!(t.next_hop(v4(198, 18, 7, 7)), Some(v4(198, 18, 7, 7)));
        assert_eq!(t.next_hop(v4(198, 18, 5, 7)), Some(v4(198, 18, 0, 9)));
        assert_eq!(t.next_hop(v4(8, 8, 8, 8)), Some(v4(198, 18, 0, 1)));
        // Replacing the default route keeps the table size.
        t.set_default_gateway(v4(198, 18, 0, 2)).unwrap();
        assert_eq!(t.iter().count(), 3);
        assert_eq!(t.next_hop(v4(8, 8, 8, 8)), Some(v4(198, 18, 0, 2)));
        assert!(t.remove(cidr(v4(0, 0, 0, 0), 0)).is_some());
        assert_eq!(t.next_hop(v4(8, 8, 8, 8)), None);
    }

    #[test]
    fn bounded_and_family_checked() {
        let mut t = RouteTable::new(1);
        t.add(Route {
            dst: cidr(v4(198, 18, 0, 0), 16),
            via: None,
        })
        .unwrap();
        assert_eq!(
            t.add(Route {
                dst: cidr(v4(10, 0, 0, 0), 8),
                via: None
            }),
            Err(RouteError::Full)
        );
        let mut t = RouteTable::new(2);
        assert_eq!(
            t.add(Route {
                dst: cidr(v4(10, 0, 0, 0), 8),
                via: Some(IpAddr::V6(core::net::Ipv6Addr::LOCALHOST))
            }),
            Err(RouteError::FamilyMismatch)
        );
    }
}
