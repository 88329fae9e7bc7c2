//! Opening TAP devices through `/dev/net/tun` (`Documentation/networking/tuntap.rst`).
//!
//! The device is created in (or attached from) the network namespace of the calling
//! thread at the time of the `open`, and stays there. Reading and writing frames needs
//! no `unsafe`: the returned descriptor is a plain file.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::packet::ifreq;
use crate::Result;

const TUN_PATH: &std::ffi::CStr = c"/dev/net/tun";

/// Opens `/dev/net/tun` nonblocking and creates, or attaches to, the TAP device `name`
/// (`IFF_TAP | IFF_NO_PI`: plain Ethernet frames, no packet-information prefix, no
/// virtio-net header). An empty `name` lets the kernel pick one (`tap%d`). With
/// `persist`, the device outlives the descriptor (`TUNSETPERSIST`); without it, closing
/// the descriptor removes a device this call created.
///
/// Returns the descriptor and the device's name.
///
/// # Errors
/// - `open(/dev/net/tun)`: `ENOENT`/`ENODEV` when the tun module is not loaded;
/// - `ioctl(TUNSETIFF)`: `EPERM` without CAP_NET_ADMIN, `EBUSY` when another process has
///   the device open, `EINVAL` when `name` exists but is not a TAP device;
/// - `ioctl(TUNSETPERSIST)`.
///
/// Each with a hint naming the fix.
pub fn open_tap(name: &str, persist: bool) -> Result<(OwnedFd, String)> {
    let mut req = if name.is_empty() {
        // SAFETY: ifreq is plain data; all-zero is a valid value (an empty name).
        unsafe { std::mem::zeroed::<libc::ifreq>() }
    } else {
        ifreq(name)?
    };
    // SAFETY: TUN_PATH is a NUL-terminated string that lives for the whole program.
    let fd = syscall!(
        "open(/dev/net/tun)",
        open(
            TUN_PATH.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC
        )
    )
    .map_err(|e| match e.source.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::ENXIO) => {
            e.with_hint("no TUN/TAP support: load the tun module (`modprobe tun`)")
        }
        Some(libc::EPERM) | Some(libc::EACCES) => {
            e.with_hint("opening /dev/net/tun needs root or CAP_NET_ADMIN")
        }
        _ => e,
    })?;
    // SAFETY: `open` returned a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads the name and flags from `req` and writes the chosen name
    // back into it; `req` is a live, writable ifreq for the call.
    syscall!(
        "ioctl(TUNSETIFF)",
        ioctl(
            fd.as_raw_fd(),
            libc::TUNSETIFF as _,
            &mut req as *mut libc::ifreq
        )
    )
    .map_err(|e| match e.source.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => e.with_hint(
            "creating or attaching a TAP device needs root or CAP_NET_ADMIN (or a persistent \
             device owned by this user)",
        ),
        Some(libc::EBUSY) => e.with_hint("another process has this TAP device open"),
        Some(libc::EINVAL) => e.with_hint(
            "an interface with this name exists and is not a TAP device; pick another name",
        ),
        _ => e,
    })?;
    let actual: Vec<u8> = req
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    let actual = String::from_utf8_lossy(&actual).into_owned();
    if persist {
        // SAFETY: TUNSETPERSIST takes its argument by value; no memory is passed.
        syscall!(
            "ioctl(TUNSETPERSIST)",
            ioctl(fd.as_raw_fd(), libc::TUNSETPERSIST as _, 1 as libc::c_ulong)
        )?;
    }
    Ok((fd, actual))
}
