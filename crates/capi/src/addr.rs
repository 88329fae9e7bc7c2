//! `struct sockaddr` to and from `SocketAddr`. An AF_INET6 socket sees IPv4 peers as
//! IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`), as on a dual-stack Linux socket.

use std::ffi::c_int;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use libc::{sockaddr, sockaddr_in, sockaddr_in6, socklen_t};

/// Reads the address at `addr` (`len` bytes).
///
/// # Errors
/// `EFAULT` for a null pointer, `EINVAL` for a short length, `EAFNOSUPPORT` for a
/// family other than AF_INET and AF_INET6.
///
/// # Safety
/// `addr` is null or valid for reads of `len` bytes.
pub unsafe fn read(addr: *const sockaddr, len: socklen_t) -> Result<SocketAddr, c_int> {
    if addr.is_null() {
        return Err(libc::EFAULT);
    }
    if (len as usize) < std::mem::size_of::<libc::sa_family_t>() {
        return Err(libc::EINVAL);
    }
    // SAFETY: at least the family field is readable (checked above); unaligned reads.
    let family = c_int::from(unsafe { std::ptr::read_unaligned(addr).sa_family });
    match family {
        libc::AF_INET if len as usize >= std::mem::size_of::<sockaddr_in>() => {
            // SAFETY: `len` covers a whole sockaddr_in.
            let a = unsafe { std::ptr::read_unaligned(addr.cast::<sockaddr_in>()) };
            Ok(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 if len as usize >= std::mem::size_of::<sockaddr_in6>() => {
            // SAFETY: `len` covers a whole sockaddr_in6.
            let a = unsafe { std::ptr::read_unaligned(addr.cast::<sockaddr_in6>()) };
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        libc::AF_INET | libc::AF_INET6 => Err(libc::EINVAL),
        _ => Err(libc::EAFNOSUPPORT),
    }
}

/// The IPv4 address an IPv6 one stands for (`::ffff:a.b.c.d`, or `::` for any), else
/// the address as it is.
pub fn unmap(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(v6) if v6.ip().is_unspecified() => {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), v6.port())
        }
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), v6.port()),
            None => a,
        },
        a => a,
    }
}

/// Writes `a` as the family `family` expects (IPv4 mapped for AF_INET6) to
/// `addr`/`len` like accept(2) and getsockname(2) do: truncated to `*len`, with the full
/// length stored back. Null `addr` writes nothing.
///
/// # Safety
/// `addr` is null, or `len` is valid for reads and writes and `addr` for writes of
/// `*len` bytes.
pub unsafe fn write(a: SocketAddr, family: c_int, addr: *mut sockaddr, len: *mut socklen_t) {
    if addr.is_null() || len.is_null() {
        return;
    }
    let a = match (a, family) {
        (SocketAddr::V4(v4), libc::AF_INET6) => {
            SocketAddr::V6(SocketAddrV6::new(v4.ip().to_ipv6_mapped(), v4.port(), 0, 0))
        }
        (a, _) => a,
    };
    let mut buf = [0u8; std::mem::size_of::<sockaddr_in6>()];
    let full = match a {
        SocketAddr::V4(v4) => {
            let s = sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: `buf` is larger than a sockaddr_in; unaligned write.
            unsafe { std::ptr::write_unaligned(buf.as_mut_ptr().cast::<sockaddr_in>(), s) };
            std::mem::size_of::<sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let s = sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: `buf` is exactly a sockaddr_in6; unaligned write.
            unsafe { std::ptr::write_unaligned(buf.as_mut_ptr().cast::<sockaddr_in6>(), s) };
            std::mem::size_of::<sockaddr_in6>()
        }
    };
    // SAFETY: the caller gave a readable `len`.
    let room = unsafe { *len } as usize;
    let n = room.min(full);
    // SAFETY: `addr` is writable for `room` bytes, `n <= room`, `buf` holds `full >= n`.
    unsafe {
        std::ptr::copy_nonoverlapping(buf.as_ptr(), addr.cast::<u8>(), n);
        *len = full as socklen_t;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_round_trips_and_maps_for_inet6() {
        let a: SocketAddr = "198.18.0.5:80".parse().unwrap();
        // SAFETY: sockaddr_storage is plain old data; zeros are a valid value.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of_val(&ss) as socklen_t;
        let p = (&mut ss as *mut libc::sockaddr_storage).cast::<sockaddr>();
        // SAFETY: `ss` is a writable sockaddr_storage of `len` bytes.
        unsafe { write(a, libc::AF_INET, p, &mut len) };
        assert_eq!(len as usize, std::mem::size_of::<sockaddr_in>());
        // SAFETY: as above, now initialised.
        assert_eq!(unsafe { read(p, len) }, Ok(a));
        len = std::mem::size_of_val(&ss) as socklen_t;
        // SAFETY: as above.
        unsafe { write(a, libc::AF_INET6, p, &mut len) };
        // SAFETY: as above.
        let back = unsafe { read(p, len) }.unwrap();
        assert_eq!(back.to_string(), "[::ffff:198.18.0.5]:80");
        assert_eq!(unmap(back), a);
    }

    #[test]
    fn short_and_foreign_addresses_are_refused() {
        // SAFETY: sockaddr_in is plain old data; zeros are a valid value.
        let a: sockaddr_in = unsafe { std::mem::zeroed() };
        let p = (&a as *const sockaddr_in).cast::<sockaddr>();
        // SAFETY: `a` is readable for its size.
        assert_eq!(unsafe { read(p, 1) }, Err(libc::EINVAL));
        // SAFETY: a null pointer is checked first.
        assert_eq!(unsafe { read(std::ptr::null(), 16) }, Err(libc::EFAULT));
        // SAFETY: family 0 (AF_UNSPEC) in a readable struct.
        assert_eq!(unsafe { read(p, 16) }, Err(libc::EAFNOSUPPORT));
        let mut len: socklen_t = 4;
        let mut small = [0u8; 4];
        // SAFETY: `small` is writable for `len` bytes.
        unsafe {
            write(
                "1.2.3.4:5".parse().unwrap(),
                libc::AF_INET,
                small.as_mut_ptr().cast(),
                &mut len,
            )
        };
        assert_eq!(len as usize, std::mem::size_of::<sockaddr_in>());
        assert_eq!(small[0..2], (libc::AF_INET as u16).to_ne_bytes());
    }
}
