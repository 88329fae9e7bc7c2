//! AF_XDP sockets: the uapi structures of `<linux/if_xdp.h>` (defined here because
//! distribution headers and `libc` lag the kernel) and a thin owned socket with one
//! method per setsockopt/getsockopt/bind/kick the channel needs.
//!
//! Kernel reference: Documentation/networking/af_xdp.rst; net/xdp/xsk.c.

use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::sys::mmap::Pod;
use crate::{Error, Result};

/// `AF_XDP` address family.
pub const AF_XDP: i32 = 44;
/// `SOL_XDP` socket option level.
pub const SOL_XDP: i32 = 283;

/// getsockopt: ring offsets inside each mmapped ring.
pub const XDP_MMAP_OFFSETS: i32 = 1;
/// setsockopt: rx ring size (descriptors).
pub const XDP_RX_RING: i32 = 2;
/// setsockopt: tx ring size (descriptors).
pub const XDP_TX_RING: i32 = 3;
/// setsockopt: register the UMEM.
pub const XDP_UMEM_REG: i32 = 4;
/// setsockopt: fill ring size.
pub const XDP_UMEM_FILL_RING: i32 = 5;
/// setsockopt: completion ring size.
pub const XDP_UMEM_COMPLETION_RING: i32 = 6;
/// getsockopt: drop counters.
pub const XDP_STATISTICS: i32 = 7;
/// getsockopt: socket options (zero-copy or not).
pub const XDP_OPTIONS: i32 = 8;
/// setsockopt: descriptors one copy-mode `sendto` may process (Linux 6.17+; between 32,
/// the old fixed `TX_BATCH_SIZE`, and the tx ring size).
pub const XDP_MAX_TX_SKB_BUDGET: i32 = 9;

/// bind flag: share another socket's UMEM.
pub const XDP_SHARED_UMEM: u16 = 1 << 0;
/// bind flag: force copy mode.
pub const XDP_COPY: u16 = 1 << 1;
/// bind flag: force zero-copy mode (fails with `EOPNOTSUPP` where the driver lacks it).
pub const XDP_ZEROCOPY: u16 = 1 << 2;
/// bind flag: the kernel sets `XDP_RING_NEED_WAKEUP` instead of polling the rings.
pub const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
/// bind flag: multi-buffer frames (several descriptors per frame). Missing from
/// Debian's headers (docs/LINUX-NOTES.md).
pub const XDP_USE_SG: u16 = 1 << 4;

/// Ring flags word: the kernel needs a system call to make progress on this ring.
pub const XDP_RING_NEED_WAKEUP: u32 = 1 << 0;
/// `XDP_OPTIONS` bit: the socket is in zero-copy mode.
pub const XDP_OPTIONS_ZEROCOPY: u32 = 1 << 0;
/// Descriptor option: more descriptors of this frame follow (multi-buffer).
pub const XDP_PKT_CONTD: u32 = 1 << 0;

/// mmap offset of the rx ring.
pub const XDP_PGOFF_RX_RING: i64 = 0;
/// mmap offset of the tx ring.
pub const XDP_PGOFF_TX_RING: i64 = 0x8000_0000;
/// mmap offset of the fill ring.
pub const XDP_UMEM_PGOFF_FILL_RING: i64 = 0x1_0000_0000;
/// mmap offset of the completion ring.
pub const XDP_UMEM_PGOFF_COMPLETION_RING: i64 = 0x1_8000_0000;

/// `struct sockaddr_xdp`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SockaddrXdp {
    /// `AF_XDP`.
    pub family: u16,
    /// `XDP_*` bind flags.
    pub flags: u16,
    /// Interface index.
    pub ifindex: u32,
    /// Queue id on that interface.
    pub queue_id: u32,
    /// With `XDP_SHARED_UMEM`, the socket whose UMEM is shared.
    pub shared_umem_fd: u32,
}
const _: () = assert!(size_of::<SockaddrXdp>() == 16);

/// `struct xdp_umem_reg` (the 6.8+ layout with `tx_metadata_len`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct UmemReg {
    /// Start of the UMEM (page aligned).
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Frame (chunk) size: a power of two between 2048 and the page size, unless
    /// unaligned mode.
    pub chunk_size: u32,
    /// Headroom the kernel leaves before each received frame.
    pub headroom: u32,
    /// `XDP_UMEM_*` flags.
    pub flags: u32,
    /// Tx metadata length (0: none).
    pub tx_metadata_len: u32,
}
const _: () = assert!(size_of::<UmemReg>() == 32);

/// `struct xdp_ring_offset`: byte offsets inside one mmapped ring.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingOffset {
    /// Producer index.
    pub producer: u64,
    /// Consumer index.
    pub consumer: u64,
    /// Descriptor array.
    pub desc: u64,
    /// Flags word (`XDP_RING_NEED_WAKEUP`).
    pub flags: u64,
}
const _: () = assert!(size_of::<RingOffset>() == 32);

/// `struct xdp_mmap_offsets`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MmapOffsets {
    /// Rx ring.
    pub rx: RingOffset,
    /// Tx ring.
    pub tx: RingOffset,
    /// Fill ring.
    pub fr: RingOffset,
    /// Completion ring.
    pub cr: RingOffset,
}
const _: () = assert!(size_of::<MmapOffsets>() == 128);

/// `struct xdp_statistics`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpStatistics {
    /// Frames dropped for reasons other than invalid descriptors (e.g. too large).
    pub rx_dropped: u64,
    /// Invalid descriptors on the fill ring.
    pub rx_invalid_descs: u64,
    /// Invalid descriptors on the tx ring.
    pub tx_invalid_descs: u64,
    /// Frames dropped because the rx ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when a frame arrived.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the tx ring was empty when the kernel looked.
    pub tx_ring_empty_descs: u64,
}
const _: () = assert!(size_of::<XdpStatistics>() == 48);

/// `struct xdp_desc`: one rx/tx descriptor.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpDesc {
    /// Offset of the data in the UMEM.
    pub addr: u64,
    /// Length of the data.
    pub len: u32,
    /// `XDP_PKT_CONTD` and friends.
    pub options: u32,
}
const _: () = assert!(size_of::<XdpDesc>() == 16);

// SAFETY: two integers and no padding (16 = 8 + 4 + 4); every bit pattern is valid.
unsafe impl Pod for XdpDesc {}

/// An owned AF_XDP socket.
#[derive(Debug)]
pub struct XskSocket {
    fd: OwnedFd,
}

fn from_errno(op: &'static str, errno: i32) -> Error {
    Error::new(op, std::io::Error::from_raw_os_error(errno))
}

fn setsockopt<T>(fd: RawFd, op: &'static str, name: i32, value: &T) -> Result<()> {
    // SAFETY: `value` points to `size_of::<T>()` readable bytes for the call.
    syscall!(
        "setsockopt(SOL_XDP)",
        setsockopt(
            fd,
            SOL_XDP,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t
        )
    )
    .map_err(|e| Error { op, ..e })?;
    Ok(())
}

fn getsockopt<T: Default>(fd: RawFd, op: &'static str, name: i32) -> Result<T> {
    let mut value = T::default();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is `len` writable bytes and `len` is a valid in/out length.
    syscall!(
        "getsockopt(SOL_XDP)",
        getsockopt(fd, SOL_XDP, name, (&mut value as *mut T).cast(), &mut len)
    )
    .map_err(|e| Error { op, ..e })?;
    if len as usize != size_of::<T>() {
        // An older kernel with a shorter struct: the missing fields stay zero, except
        // for ring offsets, where a short answer means no flags word (pre-5.4 kernels);
        // we need the flags word for need_wakeup, so refuse.
        if name == XDP_MMAP_OFFSETS {
            return Err(from_errno(op, libc::EOPNOTSUPP)
                .with_hint("kernel too old for AF_XDP ring flags (need Linux 5.4 or later)"));
        }
    }
    Ok(value)
}

impl XskSocket {
    /// Creates an AF_XDP socket.
    ///
    /// # Errors
    /// `socket(AF_XDP)`: `EPERM` without privileges, `EAFNOSUPPORT` when the kernel has
    /// no `CONFIG_XDP_SOCKETS`; both with a hint.
    pub fn new() -> Result<Self> {
        // SAFETY: plain socket(2) call with constant arguments.
        let fd = syscall!(
            "socket(AF_XDP)",
            socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0)
        )
        .map_err(|e| match e.source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                e.with_hint("AF_XDP needs root or CAP_NET_ADMIN+CAP_NET_RAW+CAP_BPF")
            }
            Some(libc::EAFNOSUPPORT) => e.with_hint(
                "this kernel has no AF_XDP (CONFIG_XDP_SOCKETS); use the packet channel",
            ),
            _ => e,
        })?;
        // SAFETY: `socket` returned a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(XskSocket { fd })
    }

    /// Registers `len` bytes at `addr` as the UMEM, in `chunk_size`-byte frames.
    ///
    /// # Errors
    /// `setsockopt(XDP_UMEM_REG)`: `EINVAL` for a bad chunk size or alignment, `ENOMEM`
    /// when the pages cannot be pinned (RLIMIT_MEMLOCK), with a hint.
    ///
    /// The memory must stay mapped for as long as the socket lives: the kernel pins it
    /// and writes frames into it (callers keep the `Mmap` beside the socket and drop the
    /// socket first).
    pub fn register_umem(
        &self,
        addr: *mut u8,
        len: usize,
        chunk_size: u32,
        headroom: u32,
    ) -> Result<()> {
        let reg = UmemReg {
            addr: addr as u64,
            len: len as u64,
            chunk_size,
            headroom,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(
            self.fd.as_raw_fd(),
            "setsockopt(XDP_UMEM_REG)",
            XDP_UMEM_REG,
            &reg,
        )
        .map_err(|e| match e.source.raw_os_error() {
            Some(libc::ENOMEM) | Some(libc::EPERM) => e.with_hint(
                "cannot pin the UMEM: raise RLIMIT_MEMLOCK (ulimit -l) or use fewer frames",
            ),
            Some(libc::EINVAL) => {
                e.with_hint("frame size must be a power of two from 2048 to the page size")
            }
            _ => e,
        })
    }

    /// Sets the size (a power of two) of one ring: `which` is `XDP_RX_RING`,
    /// `XDP_TX_RING`, `XDP_UMEM_FILL_RING` or `XDP_UMEM_COMPLETION_RING`.
    ///
    /// # Errors
    /// `setsockopt(ring size)`: `EINVAL` when `count` is not a power of two.
    pub fn set_ring_size(&self, which: i32, count: u32) -> Result<()> {
        setsockopt(self.fd.as_raw_fd(), "setsockopt(ring size)", which, &count)
            .map_err(|e| e.with_hint("ring sizes must be powers of two"))
    }

    /// Lets one copy-mode `sendto` process up to `budget` tx descriptors instead of 32.
    /// Returns `false` (and changes nothing) on kernels without the option.
    ///
    /// # Errors
    /// `setsockopt(XDP_MAX_TX_SKB_BUDGET)` failing for another reason than the option
    /// being unknown (`ENOPROTOOPT`) or `budget` out of range (`EACCES`).
    pub fn set_tx_budget(&self, budget: u32) -> Result<bool> {
        match setsockopt(
            self.fd.as_raw_fd(),
            "setsockopt(XDP_MAX_TX_SKB_BUDGET)",
            XDP_MAX_TX_SKB_BUDGET,
            &budget,
        ) {
            Ok(()) => Ok(true),
            Err(e)
                if matches!(
                    e.source.raw_os_error(),
                    Some(libc::ENOPROTOOPT | libc::EACCES | libc::EINVAL)
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// The byte offsets of indices, flags and descriptors in each ring.
    ///
    /// # Errors
    /// `getsockopt(XDP_MMAP_OFFSETS)`.
    pub fn mmap_offsets(&self) -> Result<MmapOffsets> {
        getsockopt(
            self.fd.as_raw_fd(),
            "getsockopt(XDP_MMAP_OFFSETS)",
            XDP_MMAP_OFFSETS,
        )
    }

    /// The kernel's drop counters for this socket.
    ///
    /// # Errors
    /// `getsockopt(XDP_STATISTICS)`.
    pub fn statistics(&self) -> Result<XdpStatistics> {
        getsockopt(
            self.fd.as_raw_fd(),
            "getsockopt(XDP_STATISTICS)",
            XDP_STATISTICS,
        )
    }

    /// Whether the bound socket runs in zero-copy mode.
    ///
    /// # Errors
    /// `getsockopt(XDP_OPTIONS)`.
    pub fn is_zero_copy(&self) -> Result<bool> {
        let opts: u32 = getsockopt(self.fd.as_raw_fd(), "getsockopt(XDP_OPTIONS)", XDP_OPTIONS)?;
        Ok(opts & XDP_OPTIONS_ZEROCOPY != 0)
    }

    /// Binds to `queue_id` of interface `ifindex` with `XDP_*` `flags`. The raw error is
    /// returned unchanged so the caller can fall back (zero-copy → copy).
    ///
    /// # Errors
    /// `bind(AF_XDP)` with the OS error.
    pub fn bind(&self, ifindex: u32, queue_id: u32, flags: u16) -> Result<()> {
        let addr = SockaddrXdp {
            family: AF_XDP as u16,
            flags,
            ifindex,
            queue_id,
            shared_umem_fd: 0,
        };
        // SAFETY: `addr` is a valid sockaddr_xdp of the length passed.
        syscall!(
            "bind(AF_XDP)",
            bind(
                self.fd.as_raw_fd(),
                (&addr as *const SockaddrXdp).cast(),
                size_of::<SockaddrXdp>() as libc::socklen_t
            )
        )?;
        Ok(())
    }

    /// Wakes the kernel to process the tx ring (one `sendto(MSG_DONTWAIT)`). `EAGAIN`,
    /// `EBUSY` and `ENOBUFS` mean "try again later" and are not errors; `ENETDOWN` is
    /// reported.
    ///
    /// # Errors
    /// `sendto(AF_XDP kick)`.
    pub fn kick_tx(&self) -> Result<()> {
        // SAFETY: a zero-length send with no buffer and no address is valid for AF_XDP.
        let r = syscall!(
            "sendto(AF_XDP kick)",
            sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0
            )
        );
        match r {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.source.raw_os_error(),
                    Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Wakes the kernel to refill from the fill ring (one `recvfrom(MSG_DONTWAIT)`).
    ///
    /// # Errors
    /// `recvfrom(AF_XDP kick)`, except `EAGAIN`/`EBUSY`, which are expected.
    pub fn kick_rx(&self) -> Result<()> {
        // SAFETY: a zero-length receive with no buffer and no address is valid for AF_XDP.
        let r = syscall!(
            "recvfrom(AF_XDP kick)",
            recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut()
            )
        );
        match r {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.source.raw_os_error(), Some(libc::EAGAIN | libc::EBUSY)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl AsFd for XskSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for XskSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// The index of interface `name` in the calling thread's network namespace.
///
/// # Errors
/// `if_nametoindex` with `ENODEV` and a hint when no such interface exists.
pub fn if_index(name: &str) -> Result<u32> {
    let c = std::ffi::CString::new(name).map_err(|_| from_errno("if_nametoindex", libc::EINVAL))?;
    // SAFETY: `c` is a valid NUL-terminated string for the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        let e = Error::last_os_error("if_nametoindex");
        let e = if e.source.raw_os_error() == Some(0) {
            from_errno("if_nametoindex", libc::ENODEV)
        } else {
            e
        };
        return Err(e.with_hint(
            "no such interface in this network namespace (check `ip link`, or enter its namespace)",
        ));
    }
    Ok(idx)
}

/// The MTU of interface `name` (`SIOCGIFMTU`).
///
/// # Errors
/// `ioctl(SIOCGIFMTU)`, or `ENAMETOOLONG` for a name longer than `IFNAMSIZ - 1`.
pub fn if_mtu(name: &str) -> Result<u32> {
    let bytes = name.as_bytes();
    if bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(from_errno("ioctl(SIOCGIFMTU)", libc::ENAMETOOLONG));
    }
    // SAFETY: a datagram socket used only for the ioctl, closed right after.
    let s = syscall!(
        "socket(ioctl)",
        socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
    )?;
    // SAFETY: `s` is a fresh descriptor we own.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, &b) in req.ifr_name.iter_mut().zip(bytes) {
        *d = b as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq with a NUL-terminated name; the kernel writes ifru_mtu.
    syscall!(
        "ioctl(SIOCGIFMTU)",
        ioctl(s.as_raw_fd(), libc::SIOCGIFMTU, &mut req)
    )?;
    // SAFETY: SIOCGIFMTU wrote the mtu member of the union.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    Ok(mtu as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_index_and_mtu() {
        assert_eq!(if_index("lo").unwrap(), 1);
        assert!(if_mtu("lo").unwrap() >= 1500);
    }

    #[test]
    fn missing_interface_names_the_cause() {
        let e = if_index("ulnet-nonexist0").unwrap_err();
        assert_eq!(e.source.raw_os_error(), Some(libc::ENODEV));
        assert!(e.to_string().contains("no such interface"), "{e}");
    }

    #[test]
    fn socket_and_offsets() {
        let s = XskSocket::new().expect("AF_XDP socket (needs root and CONFIG_XDP_SOCKETS)");
        for ring in [
            XDP_RX_RING,
            XDP_TX_RING,
            XDP_UMEM_FILL_RING,
            XDP_UMEM_COMPLETION_RING,
        ] {
            s.set_ring_size(ring, 64).unwrap();
        }
        let off = s.mmap_offsets().unwrap();
        // The kernel lays out producer, consumer, flags before the descriptors.
        assert!(off.rx.desc > off.rx.producer && off.rx.desc > off.rx.flags);
    }
}
