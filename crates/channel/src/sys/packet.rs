//! AF_PACKET sockets with TPACKET_V3 memory-mapped rings (`Documentation/networking/
//! packet_mmap.rst` in the kernel tree), and the interface ioctls the `packet` and `tap`
//! backends share.
//!
//! Sockets that make one channel: [`RxRing`] (a TPACKET_V3 receive ring of blocks, bound
//! to the interface with `ETH_P_ALL`, `PACKET_IGNORE_OUTGOING`), optionally
//! [`FrameRing`] (a TPACKET_V2 receive ring of small slots, each handed over as it is
//! written; a classic BPF filter on both receive sockets decides which ring a frame
//! lands in), and [`TxRing`] (a TPACKET_V3 transmit ring of fixed-size frames,
//! `PACKET_QDISC_BYPASS`, bound with protocol 0 so the kernel never queues received
//! packets on it). Each owns its descriptor and its mapping.
//!
//! Ownership protocol (the reason the safe API below is sound):
//! - rx: a block belongs to user space once its `block_status` has `TP_STATUS_USER`
//!   (read with acquire); the kernel then never writes it until user space stores
//!   `TP_STATUS_KERNEL` (release). [`RxBlock`] borrows the ring shared, and
//!   [`RxRing::release`] needs `&mut`, so no frame slice outlives its block's ownership.
//!   A [`FrameRing`] slot follows the same rule through its own `tp_status`.
//! - tx: a frame belongs to user space while its `tp_status` is `TP_STATUS_AVAILABLE`
//!   (or `TP_STATUS_WRONG_FORMAT`); user space writes it and publishes it with a release
//!   store of `TP_STATUS_SEND_REQUEST`, after which it does not touch it again until the
//!   kernel sets it available.

use std::mem::{offset_of, size_of};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;

use super::mmap::Mmap;
use crate::{Error, Gso, Result};

// The kernel ABI (include/uapi/linux/if_packet.h). libc defines the structs; check that
// its layout is the one this module's offsets assume.
const _: () = assert!(size_of::<libc::tpacket_req3>() == 28);
const _: () = assert!(size_of::<libc::tpacket_hdr_variant1>() == 12);
const _: () = assert!(size_of::<libc::tpacket3_hdr>() == 48);
const _: () = assert!(size_of::<libc::tpacket_bd_ts>() == 8);
const _: () = assert!(size_of::<libc::tpacket_hdr_v1>() == 40);
const _: () = assert!(size_of::<libc::tpacket_block_desc>() == 48);
const _: () = assert!(size_of::<libc::tpacket_stats_v3>() == 12);
const _: () = assert!(size_of::<libc::sockaddr_ll>() == 20);
const _: () = assert!(size_of::<libc::ifreq>() == 40);

/// Offset of `tpacket_hdr_v1` inside a block descriptor.
const BLOCK_HDR: usize = offset_of!(libc::tpacket_block_desc, hdr);
const BLOCK_STATUS: usize = BLOCK_HDR + offset_of!(libc::tpacket_hdr_v1, block_status);
const BLOCK_NUM_PKTS: usize = BLOCK_HDR + offset_of!(libc::tpacket_hdr_v1, num_pkts);
const BLOCK_FIRST_PKT: usize = BLOCK_HDR + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);

const PKT_NEXT: usize = offset_of!(libc::tpacket3_hdr, tp_next_offset);
const PKT_SNAPLEN: usize = offset_of!(libc::tpacket3_hdr, tp_snaplen);
const PKT_LEN: usize = offset_of!(libc::tpacket3_hdr, tp_len);
const PKT_STATUS: usize = offset_of!(libc::tpacket3_hdr, tp_status);
const PKT_MAC: usize = offset_of!(libc::tpacket3_hdr, tp_mac);

/// Where frame data starts in a transmit slot: the kernel reads it at
/// `tp_hdrlen - sizeof(sockaddr_ll)` unless `PACKET_TX_HAS_OFF` is set (af_packet.c,
/// `tpacket_parse_header`).
pub const TX_DATA_OFFSET: usize = libc::TPACKET3_HDRLEN - size_of::<libc::sockaddr_ll>();
const _: () = assert!(TX_DATA_OFFSET == 48);

/// The alignment the kernel wants for ring frame sizes (`TPACKET_ALIGNMENT`).
pub const TPACKET_ALIGNMENT: usize = libc::TPACKET_ALIGNMENT;

/// Receive headroom the kernel reserves before each frame in a V3 block: the packet
/// header, then the MAC header placed so the network header is 16-byte aligned
/// (`tpacket_rcv`: `TPACKET_ALIGN(tp_hdrlen + max(16, maclen))`).
pub const RX_FRAME_OVERHEAD: usize = 96;

const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// The page size, for block-size checks.
pub fn page_size() -> usize {
    // SAFETY: sysconf reads a process-wide constant and has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

fn hint_for(e: Error, what: &'static str) -> Error {
    match e.source.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => e.with_hint(what),
        Some(libc::ENODEV) | Some(libc::ENXIO) => e.with_hint(
            "no such interface in this network namespace: check the name (`ip link`) and \
             the namespace the channel was opened in",
        ),
        Some(libc::ENOMEM) => {
            e.with_hint("the kernel could not allocate the ring: use fewer or smaller blocks")
        }
        _ => e,
    }
}

const PACKET_PRIV_HINT: &str = "AF_PACKET needs root or CAP_NET_RAW";

/// A raw, non-blocking AF_PACKET socket with protocol 0: it receives nothing until
/// `bind` names the interface (and, bound with protocol 0, nothing at all), so no other
/// interface's packets land in a ring first.
fn packet_socket() -> Result<OwnedFd> {
    // SAFETY: plain socket creation; no pointers.
    let fd = syscall!(
        "socket(AF_PACKET)",
        socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0
        )
    )
    .map_err(|e| hint_for(e, PACKET_PRIV_HINT))?;
    // SAFETY: `socket` returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An AF_PACKET socket set to TPACKET_V3, ready for a ring.
fn tpacket_v3_socket() -> Result<OwnedFd> {
    tpacket_socket(libc::tpacket_versions::TPACKET_V3)
}

/// An AF_PACKET socket set to ring version `v`.
fn tpacket_socket(v: libc::tpacket_versions) -> Result<OwnedFd> {
    let fd = packet_socket()?;
    let v: libc::c_int = v as libc::c_int;
    setsockopt(
        fd.as_fd(),
        "setsockopt(PACKET_VERSION)",
        libc::PACKET_VERSION,
        &v,
    )?;
    Ok(fd)
}

/// Attaches classic BPF `filter` to socket `fd` (`SO_ATTACH_FILTER`, socket(7)); before
/// `bind`, so no frame reaches the socket unfiltered.
fn attach_filter(fd: BorrowedFd<'_>, filter: &[libc::sock_filter]) -> Result<()> {
    let prog = libc::sock_fprog {
        len: u16::try_from(filter.len()).map_err(|_| Error::invalid("socket filter"))?,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points to `filter`, live for the call; the kernel copies the
    // program and keeps no pointer.
    syscall!(
        "setsockopt(SO_ATTACH_FILTER)",
        setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&prog as *const libc::sock_fprog).cast(),
            size_of::<libc::sock_fprog>() as libc::socklen_t
        )
    )?;
    Ok(())
}

/// A receive socket of ring version `v` with ring `req` (`total` bytes) mapped, bound to
/// interface `ifindex` for every protocol but not the interface's outgoing packets, and
/// keeping only what `filter` keeps, when given.
fn rx_ring_socket<R>(
    v: libc::tpacket_versions,
    req: &R,
    total: usize,
    filter: Option<&[libc::sock_filter]>,
    ifindex: i32,
) -> Result<(OwnedFd, Mmap)> {
    let fd = tpacket_socket(v)?;
    let one: libc::c_int = 1;
    setsockopt(
        fd.as_fd(),
        "setsockopt(PACKET_IGNORE_OUTGOING)",
        libc::PACKET_IGNORE_OUTGOING,
        &one,
    )?;
    setsockopt(
        fd.as_fd(),
        "setsockopt(PACKET_RX_RING)",
        libc::PACKET_RX_RING,
        req,
    )
    .map_err(|e| hint_for(e, PACKET_PRIV_HINT))?;
    let map = Mmap::shared(fd.as_fd(), total, 0)?;
    if let Some(filter) = filter {
        attach_filter(fd.as_fd(), filter)?;
    }
    bind(fd.as_fd(), ifindex, ETH_P_ALL_BE)?;
    Ok((fd, map))
}

fn setsockopt<T>(fd: BorrowedFd<'_>, op: &'static str, name: libc::c_int, value: &T) -> Result<()> {
    // SAFETY: `value` points to a live `T` of exactly the length passed; the kernel
    // copies it and keeps no pointer.
    syscall!(
        "setsockopt(SOL_PACKET)",
        setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t
        )
    )
    .map_err(|e| Error { op, ..e })?;
    Ok(())
}

fn bind(fd: BorrowedFd<'_>, ifindex: i32, protocol_be: u16) -> Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol_be;
    sll.sll_ifindex = ifindex;
    // SAFETY: `sll` is a live sockaddr_ll and the length passed is its size.
    syscall!(
        "bind(AF_PACKET)",
        bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t
        )
    )
    .map_err(|e| hint_for(e, PACKET_PRIV_HINT))?;
    Ok(())
}

/// An `ifreq` naming `name`.
///
/// # Errors
/// `interface name` (`EINVAL`) when the name is empty, has a NUL or `/`, or does not fit
/// `IFNAMSIZ - 1` bytes.
pub fn ifreq(name: &str) -> Result<libc::ifreq> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['\0', '/']) {
        return Err(Error::invalid("interface name")
            .with_hint("an interface name is 1 to 15 bytes with no NUL or '/'"));
    }
    // SAFETY: ifreq is plain data (a name and a union of integers/pointers); all-zero is
    // a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
        *dst = src as libc::c_char;
    }
    Ok(req)
}

fn ioctl_ifreq(
    fd: BorrowedFd<'_>,
    op: &'static str,
    request: libc::c_ulong,
    req: &mut libc::ifreq,
) -> Result<()> {
    // SAFETY: every request passed here (SIOC[GS]IF*) reads or writes one `ifreq`, which
    // `req` is, live and writable for the call.
    syscall!(
        "ioctl(ifreq)",
        ioctl(fd.as_raw_fd(), request as _, req as *mut libc::ifreq)
    )
    .map_err(|e| {
        hint_for(
            Error { op, ..e },
            "changing an interface needs root or CAP_NET_ADMIN",
        )
    })?;
    Ok(())
}

/// The index of interface `name` in the namespace of socket `fd` (`SIOCGIFINDEX`).
///
/// # Errors
/// `ioctl(SIOCGIFINDEX)`: `ENODEV` when there is no such interface (with a hint).
pub fn interface_index(fd: BorrowedFd<'_>, name: &str) -> Result<i32> {
    let mut req = ifreq(name)?;
    ioctl_ifreq(fd, "ioctl(SIOCGIFINDEX)", libc::SIOCGIFINDEX, &mut req)?;
    // SAFETY: SIOCGIFINDEX filled the `ifru_ifindex` member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_ifindex })
}

/// The hardware (MAC) address of Ethernet interface `name` in the namespace of socket
/// `fd` (`SIOCGIFHWADDR`, netdevice(7)).
///
/// # Errors
/// `ioctl(SIOCGIFHWADDR)`: `ENODEV` when there is no such interface; `address family`
/// (`EINVAL`) when the interface is neither Ethernet nor loopback (whose address reads
/// as all zeros, as sysfs shows it), so has no 6-byte address to give.
pub fn interface_mac(fd: BorrowedFd<'_>, name: &str) -> Result<[u8; 6]> {
    let mut req = ifreq(name)?;
    ioctl_ifreq(fd, "ioctl(SIOCGIFHWADDR)", libc::SIOCGIFHWADDR, &mut req)?;
    // SAFETY: SIOCGIFHWADDR filled the `ifru_hwaddr` member of the union.
    let hw = unsafe { req.ifr_ifru.ifru_hwaddr };
    if hw.sa_family != libc::ARPHRD_ETHER && hw.sa_family != libc::ARPHRD_LOOPBACK {
        return Err(Error::invalid("address family").with_hint(
            "the interface is not Ethernet (ARPHRD_ETHER): it has no MAC address to read",
        ));
    }
    let mut mac = [0u8; 6];
    for (dst, &src) in mac.iter_mut().zip(hw.sa_data.iter()) {
        // `sa_data` is `c_char`; the cast keeps the byte's bits.
        *dst = src as u8;
    }
    Ok(mac)
}

/// `struct ethtool_drvinfo` (include/uapi/linux/ethtool.h), which `ETHTOOL_GDRVINFO`
/// fills; the libc crate does not declare it.
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// `ETHTOOL_GDRVINFO` (include/uapi/linux/ethtool.h).
const ETHTOOL_GDRVINFO: u32 = 0x0000_0003;

/// The name of the driver behind interface `name` (`"veth"`, `"tun"`, `"mlx5_core"`),
/// via `SIOCETHTOOL` with `ETHTOOL_GDRVINFO`, as `ethtool -i` reads it.
///
/// # Errors
/// `ioctl(SIOCETHTOOL)`: `ENODEV` for no such interface, `EOPNOTSUPP` for a device
/// without ethtool operations (`lo`).
pub fn interface_driver(fd: BorrowedFd<'_>, name: &str) -> Result<String> {
    let mut req = ifreq(name)?;
    // SAFETY: the struct is plain integers and byte arrays; all-zero is a valid value.
    let mut info: EthtoolDrvinfo = unsafe { std::mem::zeroed() };
    info.cmd = ETHTOOL_GDRVINFO;
    req.ifr_ifru.ifru_data = (&mut info as *mut EthtoolDrvinfo).cast();
    // SAFETY: SIOCETHTOOL reads the command from, and writes the answer into, the
    // `ethtool_drvinfo` that `ifru_data` points to, which lives across the call.
    syscall!(
        "ioctl(SIOCETHTOOL)",
        ioctl(
            fd.as_raw_fd(),
            libc::SIOCETHTOOL as _,
            &mut req as *mut libc::ifreq
        )
    )?;
    let end = info
        .driver
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(info.driver.len());
    Ok(String::from_utf8_lossy(&info.driver[..end]).into_owned())
}

/// The MTU of interface `name` (`SIOCGIFMTU`).
///
/// # Errors
/// `ioctl(SIOCGIFMTU)`, e.g. `ENODEV`.
pub fn interface_mtu(fd: BorrowedFd<'_>, name: &str) -> Result<usize> {
    let mut req = ifreq(name)?;
    ioctl_ifreq(fd, "ioctl(SIOCGIFMTU)", libc::SIOCGIFMTU, &mut req)?;
    // SAFETY: SIOCGIFMTU filled the `ifru_mtu` member of the union.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    Ok(usize::try_from(mtu).unwrap_or(0))
}

/// Sets the MTU of interface `name` (`SIOCSIFMTU`).
///
/// # Errors
/// `ioctl(SIOCSIFMTU)`: `EPERM` without CAP_NET_ADMIN, `EINVAL` for an MTU the device
/// refuses.
pub fn set_interface_mtu(fd: BorrowedFd<'_>, name: &str, mtu: usize) -> Result<()> {
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_mtu = libc::c_int::try_from(mtu).map_err(|_| Error::invalid("MTU"))?;
    ioctl_ifreq(fd, "ioctl(SIOCSIFMTU)", libc::SIOCSIFMTU, &mut req)
}

/// Sets `IFF_UP` on interface `name` (`SIOCGIFFLAGS`, then `SIOCSIFFLAGS`).
///
/// # Errors
/// The failing ioctl: `EPERM` without CAP_NET_ADMIN, `ENODEV`.
pub fn set_interface_up(fd: BorrowedFd<'_>, name: &str) -> Result<()> {
    let mut req = ifreq(name)?;
    ioctl_ifreq(fd, "ioctl(SIOCGIFFLAGS)", libc::SIOCGIFFLAGS, &mut req)?;
    // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    ioctl_ifreq(fd, "ioctl(SIOCSIFFLAGS)", libc::SIOCSIFFLAGS, &mut req)
}

/// A datagram socket for interface ioctls in the calling thread's network namespace.
///
/// # Errors
/// `socket(AF_INET, SOCK_DGRAM)`.
pub fn control_socket() -> Result<OwnedFd> {
    // SAFETY: plain socket creation; no pointers.
    let fd = syscall!(
        "socket(AF_INET, SOCK_DGRAM)",
        socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
    )?;
    // SAFETY: `socket` returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Shape of a TPACKET_V3 receive ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxGeometry {
    /// Bytes per block: a multiple of the page size, holding at least one largest frame
    /// plus [`RX_FRAME_OVERHEAD`] and the block header.
    pub block_size: usize,
    /// Number of blocks.
    pub block_count: usize,
    /// Milliseconds after which the kernel hands over a block that is not full (the
    /// latency floor of TPACKET_V3 at low rates); at least 1.
    pub block_timeout_ms: u32,
}

/// A TPACKET_V3 receive ring on an AF_PACKET socket bound to one interface.
#[derive(Debug)]
pub struct RxRing {
    map: Mmap,
    fd: OwnedFd,
    block_size: usize,
    block_count: usize,
}

impl RxRing {
    /// Opens a receive ring on interface `ifindex` of the calling thread's namespace,
    /// receiving every protocol (`ETH_P_ALL`) but not the interface's outgoing packets,
    /// and of those only the frames `filter` (classic BPF) keeps, when given.
    ///
    /// # Errors
    /// `ring geometry` (`EINVAL`) for a block size that is not a page multiple or a zero
    /// count; otherwise the failing call (`socket` `EPERM` without CAP_NET_RAW,
    /// `setsockopt(PACKET_RX_RING)` `ENOMEM`, `bind` `ENODEV`), with a hint.
    pub fn open(
        ifindex: i32,
        geo: RxGeometry,
        filter: Option<&[libc::sock_filter]>,
    ) -> Result<RxRing> {
        let page = page_size();
        if geo.block_size == 0 || !geo.block_size.is_multiple_of(page) || geo.block_count == 0 {
            return Err(Error::invalid("ring geometry")
                .with_hint("the rx block size must be a non-zero multiple of the page size"));
        }
        let total = geo
            .block_size
            .checked_mul(geo.block_count)
            .filter(|&t| u32::try_from(t).is_ok())
            .ok_or_else(|| {
                Error::invalid("ring geometry").with_hint("the rx ring must stay below 4 GiB")
            })?;
        // tp_frame_size/nr only have to be consistent for V3 (frames are packed
        // variably into blocks); the kernel checks frames_per_block * block_nr.
        let frame_size = 2048u32.min(geo.block_size as u32);
        let req = libc::tpacket_req3 {
            tp_block_size: geo.block_size as u32,
            tp_block_nr: geo.block_count as u32,
            tp_frame_size: frame_size,
            tp_frame_nr: (total / frame_size as usize) as u32,
            tp_retire_blk_tov: geo.block_timeout_ms.max(1),
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        let (fd, map) = rx_ring_socket(
            libc::tpacket_versions::TPACKET_V3,
            &req,
            total,
            filter,
            ifindex,
        )?;
        // IPv6 neighbour discovery reaches ulnet at multicast MACs the kernel has not
        // joined (33:33:ff:XX:XX:XX for its solicited-node groups, RFC 2464 §7, RFC 4861
        // §7.2.2). A NIC's multicast filter would drop those before the ring sees them;
        // all-multicast mode lets them in, and the kernel undoes it when the socket
        // closes (packet(7), PACKET_MR_ALLMULTI).
        // SAFETY: packet_mreq is plain data; all-zero is a valid value.
        let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mreq.mr_ifindex = ifindex;
        mreq.mr_type = libc::PACKET_MR_ALLMULTI as u16;
        setsockopt(
            fd.as_fd(),
            "setsockopt(PACKET_ADD_MEMBERSHIP)",
            libc::PACKET_ADD_MEMBERSHIP,
            &mreq,
        )?;
        Ok(RxRing {
            map,
            fd,
            block_size: geo.block_size,
            block_count: geo.block_count,
        })
    }

    /// The socket, for `poll(2)` (readable once a block has been handed over).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Number of blocks in the ring.
    pub fn block_count(&self) -> usize {
        self.block_count
    }

    /// Bytes per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Block `index` if the kernel has handed it to user space, else `None`.
    ///
    /// # Panics
    /// If `index >= block_count()`.
    pub fn block(&self, index: usize) -> Option<RxBlock<'_>> {
        assert!(index < self.block_count, "rx block {index} out of range");
        let base = index * self.block_size;
        let status = self
            .map
            .atomic_u32(base + BLOCK_STATUS)
            .load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        Some(RxBlock {
            ring: self,
            base,
            num_pkts: self.map.read::<u32>(base + BLOCK_NUM_PKTS),
            first: self.map.read::<u32>(base + BLOCK_FIRST_PKT) as usize,
        })
    }

    /// Returns block `index` to the kernel. Every frame slice of it must be gone, which
    /// the `&mut` borrow guarantees.
    ///
    /// # Panics
    /// If `index >= block_count()`.
    pub fn release(&mut self, index: usize) {
        assert!(index < self.block_count, "rx block {index} out of range");
        let base = index * self.block_size;
        self.map
            .atomic_u32(base + BLOCK_STATUS)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }

    /// Frames the kernel dropped for lack of ring space since the last call
    /// (`PACKET_STATISTICS` resets its counters when read).
    ///
    /// # Errors
    /// `getsockopt(PACKET_STATISTICS)`.
    pub fn take_drops(&self) -> Result<u64> {
        take_drops(self.fd.as_fd())
    }
}

/// A receive block owned by user space; frames are read from it by offset.
#[derive(Debug, Clone, Copy)]
pub struct RxBlock<'a> {
    ring: &'a RxRing,
    base: usize,
    num_pkts: u32,
    first: usize,
}

/// One received frame in a block.
#[derive(Debug, Clone, Copy)]
pub struct RxFrame<'a> {
    /// The captured bytes, from the Ethernet header on.
    pub data: &'a [u8],
    /// The frame's length on the wire; larger than `data.len()` when it was truncated.
    pub wire_len: usize,
    /// The kernel's `tp_status` bits (`TP_STATUS_CSUMNOTREADY`, `TP_STATUS_CSUM_VALID`, ...).
    pub status: u32,
    /// Offset of the next frame in the block (meaningless for the last one).
    pub next_offset: usize,
}

impl<'a> RxBlock<'a> {
    /// Number of frames in the block.
    pub fn frame_count(&self) -> u32 {
        self.num_pkts
    }

    /// Offset of the first frame.
    pub fn first_offset(&self) -> usize {
        self.first
    }

    /// The frame whose header is at `offset` within the block, or `None` if the header
    /// or its data would leave the block (a broken kernel promise; the caller drops the
    /// rest of the block).
    pub fn frame(&self, offset: usize) -> Option<RxFrame<'a>> {
        let bs = self.ring.block_size;
        let hdr_end = offset.checked_add(size_of::<libc::tpacket3_hdr>())?;
        if hdr_end > bs || !offset.is_multiple_of(4) {
            return None;
        }
        let at = self.base + offset;
        let m = &self.ring.map;
        let next = m.read::<u32>(at + PKT_NEXT) as usize;
        let snaplen = m.read::<u32>(at + PKT_SNAPLEN) as usize;
        let wire_len = m.read::<u32>(at + PKT_LEN) as usize;
        let status = m.read::<u32>(at + PKT_STATUS);
        let mac = usize::from(m.read::<u16>(at + PKT_MAC));
        let start = offset.checked_add(mac)?;
        if start.checked_add(snaplen)? > bs {
            return None;
        }
        // SAFETY: the block's status had TP_STATUS_USER (checked with acquire in
        // `RxRing::block`), so the kernel does not write it until `RxRing::release`,
        // which needs `&mut RxRing` and therefore cannot run while this `'a` borrow of
        // the ring lives. The range is inside the block (checked above).
        let data = unsafe { m.slice(self.base + start, snaplen) };
        Some(RxFrame {
            data,
            wire_len,
            status,
            next_offset: offset.wrapping_add(next),
        })
    }
}

/// A TPACKET_V2 receive ring of fixed-size slots on an AF_PACKET socket bound to one
/// interface: the kernel hands each frame over as soon as it is written, where a V3
/// block waits until it is full or its timer fires. Slots are small, so it is for small
/// frames (the channel's pure ACKs); a larger frame arrives truncated.
#[derive(Debug)]
pub struct FrameRing {
    map: Mmap,
    fd: OwnedFd,
    slot_size: usize,
    slot_count: usize,
}

const V2_STATUS: usize = offset_of!(libc::tpacket2_hdr, tp_status);
const V2_LEN: usize = offset_of!(libc::tpacket2_hdr, tp_len);
const V2_SNAPLEN: usize = offset_of!(libc::tpacket2_hdr, tp_snaplen);
const V2_MAC: usize = offset_of!(libc::tpacket2_hdr, tp_mac);
const _: () = assert!(size_of::<libc::tpacket2_hdr>() == 32);
const _: () = assert!(size_of::<libc::tpacket_req>() == 16);

impl FrameRing {
    /// Opens a ring of `slot_count` slots of `slot_size` bytes (a power of two from 256
    /// to the page size) on interface `ifindex` of the calling thread's namespace,
    /// receiving every protocol but not outgoing packets, and of those only what
    /// `filter` (classic BPF, attached before the socket is bound) keeps.
    ///
    /// # Errors
    /// `ring geometry` (`EINVAL`) for a bad slot size or a zero count; otherwise the
    /// failing call, with a hint.
    pub fn open(
        ifindex: i32,
        slot_size: usize,
        slot_count: usize,
        filter: &[libc::sock_filter],
    ) -> Result<FrameRing> {
        let page = page_size();
        if !slot_size.is_power_of_two() || !(256..=page).contains(&slot_size) || slot_count == 0 {
            return Err(Error::invalid("ring geometry").with_hint(
                "frame-ring slots are a power of two from 256 bytes to a page, at least one",
            ));
        }
        let total = slot_size
            .checked_mul(slot_count)
            .map(|t| round_up_to(t, page))
            .filter(|&t| u32::try_from(t).is_ok())
            .ok_or_else(|| {
                Error::invalid("ring geometry").with_hint("the rx ring must stay below 4 GiB")
            })?;
        let req = libc::tpacket_req {
            tp_block_size: page as u32,
            tp_block_nr: (total / page) as u32,
            tp_frame_size: slot_size as u32,
            tp_frame_nr: (total / slot_size) as u32,
        };
        let (fd, map) = rx_ring_socket(
            libc::tpacket_versions::TPACKET_V2,
            &req,
            total,
            Some(filter),
            ifindex,
        )?;
        Ok(FrameRing {
            map,
            fd,
            slot_size,
            slot_count: total / slot_size,
        })
    }

    /// The socket, for `poll(2)` (readable once a frame has been handed over).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Number of slots.
    pub fn slot_count(&self) -> usize {
        self.slot_count
    }

    /// The frame in slot `index` if the kernel has handed it to user space, else
    /// `None`. A frame whose header points outside its slot comes back with no data
    /// (`data` empty, `wire_len` non-zero), for the caller to drop and count.
    ///
    /// # Panics
    /// If `index >= slot_count()`.
    pub fn frame(&self, index: usize) -> Option<RxFrame<'_>> {
        assert!(index < self.slot_count, "frame slot {index} out of range");
        let base = index * self.slot_size;
        let m = &self.map;
        let status = m.atomic_u32(base + V2_STATUS).load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        let wire_len = m.read::<u32>(base + V2_LEN) as usize;
        let snaplen = m.read::<u32>(base + V2_SNAPLEN) as usize;
        let mac = usize::from(m.read::<u16>(base + V2_MAC));
        let data = if mac >= size_of::<libc::tpacket2_hdr>()
            && mac.saturating_add(snaplen) <= self.slot_size
        {
            // SAFETY: the slot's status had TP_STATUS_USER (acquire above), so the
            // kernel does not write it until `release`, which needs `&mut self` and so
            // cannot run while this borrow lives; the range is inside the slot.
            unsafe { m.slice(base + mac, snaplen) }
        } else {
            &[]
        };
        Some(RxFrame {
            data,
            wire_len: wire_len.max(1),
            status,
            next_offset: 0,
        })
    }

    /// Returns slot `index` to the kernel.
    ///
    /// # Panics
    /// If `index >= slot_count()`.
    pub fn release(&mut self, index: usize) {
        assert!(index < self.slot_count, "frame slot {index} out of range");
        self.map
            .atomic_u32(index * self.slot_size + V2_STATUS)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }

    /// Frames the kernel dropped for lack of a free slot since the last call.
    ///
    /// # Errors
    /// `getsockopt(PACKET_STATISTICS)`.
    pub fn take_drops(&self) -> Result<u64> {
        take_drops(self.fd.as_fd())
    }
}

/// Frames the kernel dropped on packet socket `fd` for lack of ring space since the last
/// call (`PACKET_STATISTICS` resets its counters when read). The V3 answer's first two
/// fields are the V1/V2 one; the kernel writes as much as the socket's version has.
fn take_drops(fd: BorrowedFd<'_>) -> Result<u64> {
    let mut st = libc::tpacket_stats_v3 {
        tp_packets: 0,
        tp_drops: 0,
        tp_freeze_q_cnt: 0,
    };
    let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
    // SAFETY: `st` and `len` are live and writable; `len` holds the size of `st`.
    syscall!(
        "getsockopt(PACKET_STATISTICS)",
        getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats_v3).cast(),
            &mut len
        )
    )?;
    Ok(u64::from(st.tp_drops))
}

fn round_up_to(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// Shape of a TPACKET_V3 transmit ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxGeometry {
    /// Bytes per slot, header included: a power of two from 128 (the kernel wants room
    /// for the 68-byte `TPACKET3_HDRLEN`) so slots tile the blocks.
    pub frame_size: usize,
    /// Number of slots.
    pub frame_count: usize,
}

/// State of one transmit slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxSlot {
    /// User space may fill it.
    Free,
    /// Queued for, or being sent by, the kernel.
    Busy,
    /// The kernel refused the frame in it (`TP_STATUS_WRONG_FORMAT`); it may be refilled.
    Rejected,
}

/// A TPACKET_V3 transmit ring on an AF_PACKET socket bound to one interface.
#[derive(Debug)]
pub struct TxRing {
    map: Mmap,
    fd: OwnedFd,
    frame_size: usize,
    frame_count: usize,
}

impl TxRing {
    /// Opens a transmit ring on interface `ifindex` of the calling thread's namespace.
    /// With `qdisc_bypass`, frames go straight to the driver (`PACKET_QDISC_BYPASS`):
    /// no queueing discipline, and no copy to other packet sockets on the interface.
    ///
    /// # Errors
    /// `ring geometry` (`EINVAL`) for a frame size that is not a power of two in
    /// 128..=1 MiB or a zero count; otherwise the failing call, with a hint.
    pub fn open(ifindex: i32, geo: TxGeometry, qdisc_bypass: bool) -> Result<TxRing> {
        let page = page_size();
        if !geo.frame_size.is_power_of_two()
            || !(128..=1 << 20).contains(&geo.frame_size)
            || geo.frame_count == 0
        {
            return Err(Error::invalid("ring geometry")
                .with_hint("the tx frame size must be a power of two between 128 and 1 MiB"));
        }
        // Power-of-two slots tile page-multiple blocks exactly, so slot `i` sits at
        // `i * frame_size` in the mapping.
        let block_size = geo.frame_size.max(page);
        let per_block = block_size / geo.frame_size;
        let frame_count = geo.frame_count.div_ceil(per_block) * per_block;
        let total = frame_count
            .checked_mul(geo.frame_size)
            .filter(|&t| u32::try_from(t).is_ok())
            .ok_or_else(|| {
                Error::invalid("ring geometry").with_hint("the tx ring must stay below 4 GiB")
            })?;
        let fd = tpacket_v3_socket()?;
        let one: libc::c_int = 1;
        if qdisc_bypass {
            setsockopt(
                fd.as_fd(),
                "setsockopt(PACKET_QDISC_BYPASS)",
                libc::PACKET_QDISC_BYPASS,
                &one,
            )?;
        }
        // With PACKET_LOSS a malformed frame is skipped and its slot made available
        // instead of stopping the ring at it (af_packet.c, `tpacket_snd`).
        setsockopt(
            fd.as_fd(),
            "setsockopt(PACKET_LOSS)",
            libc::PACKET_LOSS,
            &one,
        )?;
        // V3 transmit rings take the V3 request with the block-retire fields zero.
        let req = libc::tpacket_req3 {
            tp_block_size: block_size as u32,
            tp_block_nr: (total / block_size) as u32,
            tp_frame_size: geo.frame_size as u32,
            tp_frame_nr: frame_count as u32,
            tp_retire_blk_tov: 0,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(
            fd.as_fd(),
            "setsockopt(PACKET_TX_RING)",
            libc::PACKET_TX_RING,
            &req,
        )
        .map_err(|e| hint_for(e, PACKET_PRIV_HINT))?;
        let map = Mmap::shared(fd.as_fd(), total, 0)?;
        // Protocol 0: no receive hook, so nothing is ever queued on this socket; the
        // kernel takes the EtherType from each frame's header (`packet_parse_headers`).
        bind(fd.as_fd(), ifindex, 0)?;
        Ok(TxRing {
            map,
            fd,
            frame_size: geo.frame_size,
            frame_count,
        })
    }

    /// Number of slots (the requested count rounded up to whole blocks).
    pub fn frame_count(&self) -> usize {
        self.frame_count
    }

    /// The largest frame one slot carries.
    pub fn max_frame_len(&self) -> usize {
        self.frame_size - TX_DATA_OFFSET
    }

    /// The state of slot `index`.
    ///
    /// # Panics
    /// If `index >= frame_count()`.
    pub fn slot(&self, index: usize) -> TxSlot {
        assert!(index < self.frame_count, "tx slot {index} out of range");
        let status = self
            .map
            .atomic_u32(index * self.frame_size + PKT_STATUS)
            .load(Ordering::Acquire);
        match status {
            libc::TP_STATUS_AVAILABLE => TxSlot::Free,
            libc::TP_STATUS_WRONG_FORMAT => TxSlot::Rejected,
            _ => TxSlot::Busy,
        }
    }

    /// Lets `fill` write a `len`-byte frame into slot `index` and hands the slot to the
    /// kernel (`TP_STATUS_SEND_REQUEST`); it leaves at the next [`TxRing::kick`].
    /// Returns `false`, writing nothing, when the slot is busy or `len` exceeds
    /// [`TxRing::max_frame_len`].
    ///
    /// # Panics
    /// If `index >= frame_count()`.
    pub fn fill(&mut self, index: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        if len > self.max_frame_len() || self.slot(index) == TxSlot::Busy {
            return false;
        }
        let base = index * self.frame_size;
        {
            // SAFETY: the slot's status is AVAILABLE or WRONG_FORMAT (acquire load in
            // `slot`), so the kernel neither reads nor writes its bytes until we publish
            // SEND_REQUEST below; `&mut self` excludes any other slice of this ring.
            let buf = unsafe { self.map.slice_mut(base + TX_DATA_OFFSET, len) };
            fill(buf);
        }
        self.map.write::<u32>(base + PKT_LEN, len as u32);
        self.map.write::<u32>(base + PKT_SNAPLEN, len as u32);
        // V3 transmit slots are fixed-size: a non-zero next offset is refused.
        self.map.write::<u32>(base + PKT_NEXT, 0);
        self.map
            .atomic_u32(base + PKT_STATUS)
            .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        true
    }

    /// Marks a rejected slot free again.
    ///
    /// # Panics
    /// If `index >= frame_count()`.
    pub fn reclaim(&mut self, index: usize) {
        if self.slot(index) == TxSlot::Rejected {
            self.map
                .atomic_u32(index * self.frame_size + PKT_STATUS)
                .store(libc::TP_STATUS_AVAILABLE, Ordering::Release);
        }
    }

    /// Asks the kernel to send every slot in `TP_STATUS_SEND_REQUEST`, without waiting
    /// for completion: `send(fd, NULL, 0, MSG_DONTWAIT)`. Returns the bytes queued.
    ///
    /// # Errors
    /// `send(AF_PACKET tx ring)`; `EAGAIN`/`ENOBUFS` mean the device is congested and the
    /// remaining slots stay queued for the next kick.
    pub fn kick(&self) -> Result<usize> {
        // SAFETY: a NULL buffer of length 0 is how the tx ring is flushed; the kernel
        // reads frames from the mapping, not from the buffer argument.
        let n = syscall!(
            "send(AF_PACKET tx ring)",
            send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT)
        )?;
        Ok(n as usize)
    }
}

/// `struct virtio_net_hdr` (include/uapi/linux/virtio_net.h): the 10 bytes a
/// `PACKET_VNET_HDR` socket expects before every frame, in the byte order of legacy virtio
/// (the host's: `vio_le()` in af_packet.c is true exactly on little-endian hosts).
const VNET_HDR_LEN: usize = 10;
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
const VIRTIO_NET_HDR_GSO_TCPV6: u8 = 4;
/// `offsetof(struct tcphdr, check)`.
const TCP_CHECK_OFFSET: u16 = 16;

/// An AF_PACKET socket that sends TCP bursts for the kernel to segment: `PACKET_VNET_HDR`
/// (a virtio-net header before each frame says how to cut it, `SKB_GSO_TCPV4`/`TCPV6`,
/// and where the checksum goes), bound with protocol 0 (it receives nothing). The device segments
/// with TSO when it has it, else `validate_xmit_skb` does it in software, once per burst
/// instead of one send per segment.
#[derive(Debug)]
pub struct GsoSender {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl GsoSender {
    /// Opens the socket on interface `ifindex` of the calling thread's namespace, for
    /// frames of up to `max_frame_len` bytes.
    ///
    /// # Errors
    /// The failing call, with a hint.
    pub fn open(ifindex: i32, max_frame_len: usize) -> Result<GsoSender> {
        let fd = packet_socket()?;
        let one: libc::c_int = 1;
        setsockopt(
            fd.as_fd(),
            "setsockopt(PACKET_VNET_HDR)",
            libc::PACKET_VNET_HDR,
            &one,
        )?;
        // No PACKET_QDISC_BYPASS: its direct transmit drops any packet that
        // `validate_xmit_skb` had to segment (`__dev_direct_xmit`: "skb != orig_skb"),
        // which is every burst on a device without TSO. Through `dev_queue_xmit` the
        // segments go out as a list; on a `noqueue` device (veth's default) there is no
        // queue in between either.
        bind(fd.as_fd(), ifindex, 0)?;
        Ok(GsoSender {
            fd,
            buf: vec![0; VNET_HDR_LEN + max_frame_len],
        })
    }

    /// The largest frame [`GsoSender::send`] takes.
    pub fn max_frame_len(&self) -> usize {
        self.buf.len() - VNET_HDR_LEN
    }

    /// Lets `fill` write a `len`-byte frame and sends it with one system call.
    ///
    /// # Errors
    /// `send(AF_PACKET gso)`: `EAGAIN`/`ENOBUFS` when the socket's send buffer or the
    /// device is full (nothing was sent), `EINVAL` when the kernel refused the header.
    pub fn send(&mut self, len: usize, f: Gso, fill: &mut dyn FnMut(&mut [u8])) -> Result<()> {
        let total = VNET_HDR_LEN + len;
        let buf = self.buf.get_mut(..total).ok_or_else(too_long)?;
        let (hdr, frame) = buf.split_at_mut(VNET_HDR_LEN);
        fill(frame);
        vnet_header(hdr, f);
        // SAFETY: `buf` is live for `total` bytes; the kernel copies them before returning.
        syscall!(
            "send(AF_PACKET gso)",
            send(
                self.fd.as_raw_fd(),
                buf.as_ptr().cast(),
                total,
                libc::MSG_DONTWAIT
            )
        )?;
        Ok(())
    }

    /// Sends the frame `head` then `payload` (the headers and the burst's data, where
    /// the caller keeps them) with one `sendmsg(2)`: the kernel gathers the parts while
    /// it copies them into its buffer, so the payload is not first copied into a frame
    /// buffer here (one copy of every sent byte fewer).
    ///
    /// # Errors
    /// As [`GsoSender::send`]; `EMSGSIZE` when the frame is longer than the socket's
    /// maximum.
    pub fn send_parts(&mut self, head: &[u8], payload: &[u8], f: Gso) -> Result<()> {
        if head.len() + payload.len() > self.max_frame_len() {
            return Err(too_long());
        }
        let mut hdr = [0u8; VNET_HDR_LEN];
        vnet_header(&mut hdr, f);
        let mut iov = [
            libc::iovec {
                iov_base: hdr.as_mut_ptr().cast(),
                iov_len: hdr.len(),
            },
            libc::iovec {
                iov_base: head.as_ptr().cast_mut().cast(),
                iov_len: head.len(),
            },
            libc::iovec {
                iov_base: payload.as_ptr().cast_mut().cast(),
                iov_len: payload.len(),
            },
        ];
        // SAFETY: all-zero is a valid `msghdr` (no name, no control).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = iov.len() as _;
        // SAFETY: the three iovecs cover `hdr`, `head` and `payload`, all live for the
        // call; the kernel only reads them (a send), so the `*mut` of the shared slices
        // is never written through.
        syscall!(
            "sendmsg(AF_PACKET gso)",
            sendmsg(self.fd.as_raw_fd(), &msg, libc::MSG_DONTWAIT)
        )?;
        Ok(())
    }
}

fn too_long() -> Error {
    Error::new(
        "GSO frame",
        std::io::Error::from_raw_os_error(libc::EMSGSIZE),
    )
}

/// The virtio-net header of a TCP burst: the kernel completes each segment's checksum
/// (the pseudo-header sum is in the TCP checksum field) and cuts it as `f` says; with a
/// segment size of 0 it cuts nothing (`GSO_NONE`) and only finishes the checksum.
fn vnet_header(hdr: &mut [u8], f: Gso) {
    hdr[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
    hdr[1] = match (f.segment_size, f.ipv6) {
        (0, _) => VIRTIO_NET_HDR_GSO_NONE,
        (_, true) => VIRTIO_NET_HDR_GSO_TCPV6,
        (_, false) => VIRTIO_NET_HDR_GSO_TCPV4,
    };
    hdr[2..4].copy_from_slice(&f.header_len.to_ne_bytes());
    hdr[4..6].copy_from_slice(&f.segment_size.to_ne_bytes());
    hdr[6..8].copy_from_slice(&f.l4_offset.to_ne_bytes());
    hdr[8..10].copy_from_slice(&TCP_CHECK_OFFSET.to_ne_bytes());
}

/// Rings over private memory instead of a socket's, filled by the test as the kernel
/// would, for exercising the walk (and its defences) without a kernel.
#[cfg(test)]
pub(crate) mod fake {
    use super::*;

    fn null_fd() -> OwnedFd {
        OwnedFd::from(std::fs::File::open("/dev/null").unwrap())
    }

    impl RxRing {
        pub(crate) fn fake(block_size: usize, block_count: usize) -> RxRing {
            RxRing {
                map: Mmap::anonymous(block_size * block_count, true).unwrap(),
                fd: null_fd(),
                block_size,
                block_count,
            }
        }

        /// Lays `frames` (data, wire length) out in block `index` the way `tpacket_rcv`
        /// does and hands the block to user space. Returns each frame's header offset.
        pub(crate) fn fake_fill(&self, index: usize, frames: &[(&[u8], u32)]) -> Vec<usize> {
            let base = index * self.block_size;
            let mut off = size_of::<libc::tpacket_block_desc>();
            let mut offsets = Vec::new();
            for (i, (data, wire_len)) in frames.iter().enumerate() {
                let mac = RX_FRAME_OVERHEAD - 14;
                let next = (mac + data.len()).next_multiple_of(TPACKET_ALIGNMENT);
                let last = i + 1 == frames.len();
                self.map
                    .write::<u32>(base + off + PKT_NEXT, if last { 0 } else { next as u32 });
                self.map
                    .write::<u32>(base + off + PKT_SNAPLEN, data.len() as u32);
                self.map.write::<u32>(base + off + PKT_LEN, *wire_len);
                self.map
                    .write::<u32>(base + off + PKT_STATUS, libc::TP_STATUS_USER);
                self.map.write::<u16>(base + off + PKT_MAC, mac as u16);
                for (j, &b) in data.iter().enumerate() {
                    self.map.write::<u8>(base + off + mac + j, b);
                }
                offsets.push(off);
                off += next;
            }
            self.map
                .write::<u32>(base + BLOCK_NUM_PKTS, frames.len() as u32);
            self.map.write::<u32>(
                base + BLOCK_FIRST_PKT,
                size_of::<libc::tpacket_block_desc>() as u32,
            );
            self.map
                .atomic_u32(base + BLOCK_STATUS)
                .store(libc::TP_STATUS_USER, Ordering::Release);
            offsets
        }

        /// Overwrites the `u32` at `offset` in block `index` (to corrupt a header).
        pub(crate) fn fake_poke(&self, index: usize, offset: usize, value: u32) {
            self.map
                .write::<u32>(index * self.block_size + offset, value);
        }

        /// The block's status word.
        pub(crate) fn fake_status(&self, index: usize) -> u32 {
            self.map.read::<u32>(index * self.block_size + BLOCK_STATUS)
        }
    }

    impl TxRing {
        pub(crate) fn fake(frame_size: usize, frame_count: usize) -> TxRing {
            TxRing {
                map: Mmap::anonymous(frame_size * frame_count, true).unwrap(),
                fd: null_fd(),
                frame_size,
                frame_count,
            }
        }

        /// Plays the kernel: slot `index` is sent (status, length, bytes returned) and
        /// then set to `new_status`.
        pub(crate) fn fake_take(&self, index: usize, new_status: u32) -> (u32, Vec<u8>) {
            let base = index * self.frame_size;
            let status = self.map.read::<u32>(base + PKT_STATUS);
            let len = self.map.read::<u32>(base + PKT_LEN) as usize;
            let bytes = (0..len.min(self.max_frame_len()))
                .map(|j| self.map.read::<u8>(base + TX_DATA_OFFSET + j))
                .collect();
            self.map.write::<u32>(base + PKT_STATUS, new_status);
            (status, bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_offsets() {
        assert_eq!(BLOCK_STATUS, 8);
        assert_eq!(BLOCK_NUM_PKTS, 12);
        assert_eq!(BLOCK_FIRST_PKT, 16);
        assert_eq!(
            (PKT_NEXT, PKT_SNAPLEN, PKT_LEN, PKT_STATUS, PKT_MAC),
            (0, 12, 16, 20, 24)
        );
        assert_eq!(libc::TPACKET3_HDRLEN, 68);
    }

    #[test]
    fn vnet_header_cuts_bursts_and_only_checksums_single_segments() {
        let mut hdr = [0xffu8; VNET_HDR_LEN];
        let burst = Gso {
            segment_size: 1448,
            l4_offset: 34,
            header_len: 66,
            ipv6: false,
        };
        vnet_header(&mut hdr, burst);
        assert_eq!(
            hdr[..2],
            [VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4]
        );
        assert_eq!(u16::from_ne_bytes([hdr[2], hdr[3]]), 66);
        assert_eq!(u16::from_ne_bytes([hdr[4], hdr[5]]), 1448);
        assert_eq!(u16::from_ne_bytes([hdr[6], hdr[7]]), 34);
        assert_eq!(u16::from_ne_bytes([hdr[8], hdr[9]]), TCP_CHECK_OFFSET);
        vnet_header(
            &mut hdr,
            Gso {
                ipv6: true,
                ..burst
            },
        );
        assert_eq!(hdr[1], VIRTIO_NET_HDR_GSO_TCPV6);
        // One segment: nothing to cut, the checksum still the kernel's to finish.
        for ipv6 in [false, true] {
            let whole = Gso {
                segment_size: 0,
                l4_offset: if ipv6 { 54 } else { 34 },
                header_len: if ipv6 { 86 } else { 66 },
                ipv6,
            };
            vnet_header(&mut hdr, whole);
            assert_eq!(
                hdr[..2],
                [VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_NONE]
            );
            assert_eq!(u16::from_ne_bytes([hdr[4], hdr[5]]), 0);
            assert_eq!(u16::from_ne_bytes([hdr[6], hdr[7]]), whole.l4_offset);
        }
    }

    #[test]
    fn ifreq_rejects_bad_names() {
        for name in ["", "0123456789abcdef", "a/b", "x\0"] {
            let e = ifreq(name).unwrap_err();
            assert_eq!(e.source.raw_os_error(), Some(libc::EINVAL), "{name:?}");
        }
        let r = ifreq("veth0").unwrap();
        assert_eq!(
            r.ifr_name[..6].iter().map(|&c| c as u8).collect::<Vec<_>>(),
            b"veth0\0"
        );
    }

    #[test]
    fn geometry_is_checked_before_any_syscall() {
        let e = RxRing::open(
            1,
            RxGeometry {
                block_size: 1000,
                block_count: 4,
                block_timeout_ms: 1,
            },
            None,
        )
        .unwrap_err();
        assert_eq!(e.op, "ring geometry");
        for (size, count) in [
            (128, 4),
            (300, 4),
            (256, 0),
            (1 << 20, 1),
            (256, usize::MAX),
            (256, 1 << 24),
        ] {
            let e = FrameRing::open(1, size, count, &[]).unwrap_err();
            assert_eq!(e.op, "ring geometry", "{size} x {count}");
        }
        let e = TxRing::open(
            1,
            TxGeometry {
                frame_size: 3000,
                frame_count: 4,
            },
            true,
        )
        .unwrap_err();
        assert_eq!(e.op, "ring geometry");
    }

    #[test]
    fn rx_block_walk_and_bounds() {
        let mut ring = RxRing::fake(4096, 2);
        assert!(
            ring.block(0).is_none(),
            "a kernel-owned block is not handed out"
        );
        let offs = ring.fake_fill(0, &[(b"first frame", 11), (b"second", 60)]);
        let block = ring.block(0).unwrap();
        assert_eq!((block.frame_count(), block.first_offset()), (2, 48));
        let f = block.frame(offs[0]).unwrap();
        assert_eq!(
            (f.data, f.wire_len, f.next_offset),
            (&b"first frame"[..], 11, offs[1])
        );
        let f = block.frame(f.next_offset).unwrap();
        assert_eq!((f.data, f.wire_len), (&b"second"[..], 60));
        // Headers or data leaving the block, or misaligned headers, are refused.
        assert!(block.frame(4096 - 40).is_none());
        assert!(block.frame(offs[0] + 2).is_none());
        assert!(block.frame(usize::MAX - 8).is_none());
        ring.fake_poke(0, offs[1] + PKT_SNAPLEN, 5000);
        assert!(ring.block(0).unwrap().frame(offs[1]).is_none());
        ring.release(0);
        assert_eq!(ring.fake_status(0), libc::TP_STATUS_KERNEL);
        assert!(ring.block(0).is_none());
    }

    #[test]
    fn tx_slot_protocol() {
        let mut ring = TxRing::fake(2048, 2);
        assert_eq!(ring.max_frame_len(), 2000);
        assert_eq!(ring.slot(0), TxSlot::Free);
        assert!(ring.fill(0, 5, &mut |b| b.copy_from_slice(b"hello")));
        assert_eq!(ring.slot(0), TxSlot::Busy);
        assert!(!ring.fill(0, 1, &mut |_| panic!("busy slot written")));
        assert!(!ring.fill(1, 2001, &mut |_| panic!("oversize written")));
        let (status, bytes) = ring.fake_take(0, libc::TP_STATUS_WRONG_FORMAT);
        assert_eq!(
            (status, &bytes[..]),
            (libc::TP_STATUS_SEND_REQUEST, &b"hello"[..])
        );
        assert_eq!(ring.slot(0), TxSlot::Rejected);
        ring.reclaim(0);
        assert_eq!(ring.slot(0), TxSlot::Free);
        // /dev/null is not a socket: the kick's error names the call.
        assert_eq!(ring.kick().unwrap_err().op, "send(AF_PACKET tx ring)");
    }

    #[test]
    fn missing_interface_names_the_cause() {
        let s = control_socket().unwrap();
        let e = interface_index(s.as_fd(), "ulnet-nope0").unwrap_err();
        assert_eq!(e.source.raw_os_error(), Some(libc::ENODEV));
        assert!(e.to_string().contains("no such interface"), "{e}");
    }
}
