//! Facts about a kernel network interface that a program needs before it opens a channel
//! on it, read with interface ioctls from inside the interface's namespace.
//!
//! Reading them here, through `sys/`, keeps the callers free of both `unsafe` and child
//! processes (`ip`): the namespace is entered on the calling thread only for the call and
//! left again when it returns (see [`crate::sys::netns`]).

use std::os::fd::AsFd;

use crate::sys::{netns, packet as sys};
use crate::Result;

/// The MAC address of interface `ifname` in network namespace `netns` (`None`: the
/// calling thread's), via `SIOCGIFHWADDR`.
///
/// # Errors
/// - `netns name`/`open(netns)`/`setns(CLONE_NEWNET)` when the namespace cannot be
///   entered (see [`netns::enter`]);
/// - `ioctl(SIOCGIFHWADDR)` (`ENODEV`) when there is no such interface;
/// - `address family` (`EINVAL`) when the interface has no Ethernet address.
pub fn interface_mac(netns: Option<&str>, ifname: &str) -> Result<[u8; 6]> {
    let _ns = netns.map(netns::enter).transpose()?;
    let ctl = sys::control_socket()?;
    sys::interface_mac(ctl.as_fd(), ifname)
}

/// The driver behind interface `ifname` in network namespace `netns` (`None`: the
/// calling thread's), as `ethtool -i` names it (`"veth"`, `"tun"`, `"virtio_net"`).
///
/// # Errors
/// As [`interface_mac`], with `ioctl(SIOCETHTOOL)` (`EOPNOTSUPP` for `lo`, which has no
/// driver information).
pub fn interface_driver(netns: Option<&str>, ifname: &str) -> Result<String> {
    let _ns = netns.map(netns::enter).transpose()?;
    let ctl = sys::control_socket()?;
    sys::interface_driver(ctl.as_fd(), ifname)
}

/// Whether interface `ifname` (in the calling thread's namespace) is one end of a veth
/// pair: its peer is a kernel in the same memory, which leaves the checksums of what it
/// sends unfinished when its transmit checksum offload is on (Linux's
/// `CHECKSUM_PARTIAL`; the receiving kernel trusts them, and a raw reader sees the
/// field as the sender left it). False when the driver cannot be read.
pub(crate) fn is_veth(ifname: &str) -> bool {
    sys::control_socket()
        .and_then(|ctl| sys::interface_driver(ctl.as_fd(), ifname))
        .is_ok_and(|d| d == "veth")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_reads_as_zeros_and_a_missing_interface_is_enodev() {
        // `lo` exists in every namespace and has the all-zero address.
        assert_eq!(interface_mac(None, "lo").unwrap(), [0; 6]);
        let e = interface_mac(None, "ulnet-no-such0").unwrap_err();
        assert_eq!(e.source.raw_os_error(), Some(libc::ENODEV), "{e}");
    }

    #[test]
    fn loopback_has_no_driver_to_name_and_is_not_veth() {
        let e = interface_driver(None, "lo").unwrap_err();
        assert_eq!(e.source.raw_os_error(), Some(libc::EOPNOTSUPP), "{e}");
        assert!(!is_veth("lo"));
        assert!(!is_veth("ulnet-no-such0"));
    }
}
