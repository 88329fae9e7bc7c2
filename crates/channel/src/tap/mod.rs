//! The `tap` channel: a TAP device (`/dev/net/tun`, `IFF_TAP | IFF_NO_PI`), the kernel's
//! own virtual Ethernet interface with a file descriptor as its wire.
//!
//! In: frames the kernel sends out of the TAP interface, one `read(2)` each, drained up
//! to the batch size per [`Channel::rx_batch`] from a nonblocking descriptor; each frame
//! is handed to the callback straight from one preallocated buffer (run to completion,
//! so no ring of receive buffers is needed). Out: [`Tx::send`] writes the frame in place
//! into a preallocated ring of slots; [`Tx::flush`] writes them to the device in order.
//!
//! One system call per frame is unavoidable here: the TUN/TAP character device reads and
//! writes exactly one frame per call (`readv`/`writev` gather one frame from several
//! buffers; there is no multi-frame read or write, and `recvmmsg` does not apply to it).
//! The flush still batches: frames queue in user space and leave together, so a caller
//! that flushes once per batch sees the same semantics as on the ring channels.
//!
//! Unlike the `packet` channel, the kernel does not process the frames ulnet sends or
//! receives here: the TAP interface is the kernel's peer, so give the kernel side its own
//! address (distinct from ulnet's) to talk to ulnet, or route through it.
//!
//! Invariants: no heap allocation after [`TapChannel::open`]; a full transmit ring drops
//! and counts.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};

use crate::sys::netns;
use crate::sys::packet as ifctl;
use crate::sys::tap as sys;
use crate::{Capabilities, Channel, Error, Result, Stats, Tx, TxError};

/// Largest frame a TAP device without offloads hands out: an IP packet of at most
/// 64 KiB plus Ethernet and VLAN headers. Sizing the receive buffer for it means no
/// frame is ever truncated, whatever MTU the device is given later.
const RX_BUF_LEN: usize = 65_535 + 18;

/// Options for [`TapChannel::open`]: everything specific to a TAP device (its name
/// and namespace are `open`'s own arguments, as for
/// [`XdpChannel::open`](crate::xdp::XdpChannel::open)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapOptions {
    /// MTU to set; `None` keeps the device's (1500 for a new device).
    pub mtu: Option<usize>,
    /// Keep the device after the channel closes (`TUNSETPERSIST`). Off by default: the
    /// device disappears with the channel.
    pub persist: bool,
    /// Most frames one `rx_batch` hands out.
    pub batch_count: usize,
    /// Transmit slots queued between flushes.
    pub tx_frame_count: usize,
}

impl Default for TapOptions {
    /// MTU unchanged, not persistent, batches of 64, 256 transmit slots.
    fn default() -> Self {
        TapOptions {
            mtu: None,
            persist: false,
            batch_count: 64,
            tx_frame_count: 256,
        }
    }
}

/// The transmit half of a [`TapChannel`]: a ring of frame slots written out at flush.
#[derive(Debug)]
pub struct TapTx {
    file: File,
    slots: Box<[u8]>,
    lens: Box<[usize]>,
    slot_len: usize,
    /// Oldest queued slot.
    head: usize,
    queued: usize,
    frames: u64,
    bytes: u64,
    dropped: u64,
    writes: u64,
}

/// A TAP device as a channel.
#[derive(Debug)]
pub struct TapChannel {
    file: File,
    buf: Box<[u8]>,
    tx: TapTx,
    name: String,
    caps: Capabilities,
    rx_frames: u64,
    rx_bytes: u64,
    empty_polls: u64,
}

impl TapChannel {
    /// Creates (or attaches to) the TAP device `name` (up to 15 bytes; empty lets the
    /// kernel choose, `tap0`, ...) in network namespace `netns` (as in
    /// `ip netns add NAME`; `None` for the calling thread's), sets its MTU if asked and
    /// brings it up.
    ///
    /// # Errors
    /// - `open(/dev/net/tun)` `ENOENT` when the tun module is not loaded;
    /// - `ioctl(TUNSETIFF)` `EPERM` without root/CAP_NET_ADMIN, `EBUSY`, `EINVAL`;
    /// - `ioctl(SIOCSIFMTU)` `EINVAL` for an MTU the device refuses;
    /// - `open(netns)`/`setns` for a missing namespace;
    /// - `config` (`EINVAL`) for zero counts.
    ///
    /// Each error carries a hint naming the fix.
    pub fn open(name: &str, netns: Option<&str>, cfg: &TapOptions) -> Result<TapChannel> {
        if cfg.batch_count == 0 || cfg.tx_frame_count == 0 {
            return Err(Error::invalid("config")
                .with_hint("batch_count and tx_frame_count must be non-zero"));
        }
        let _ns = netns.map(netns::enter).transpose()?;
        let (fd, name) = sys::open_tap(name, cfg.persist)?;
        let ctl = ifctl::control_socket()?;
        if let Some(mtu) = cfg.mtu {
            ifctl::set_interface_mtu(ctl.as_fd(), &name, mtu)?;
        }
        ifctl::set_interface_up(ctl.as_fd(), &name)?;
        let mtu = ifctl::interface_mtu(ctl.as_fd(), &name)?;
        let file = File::from(fd);
        let tx_file = file.try_clone().map_err(|e| Error::new("dup(tap)", e))?;
        let max_frame_len = mtu + 14;
        // A VLAN tag's worth of slack so a tagged full-size frame still fits a slot.
        let slot_len = max_frame_len + 4;
        let caps = Capabilities {
            name: "tap",
            mtu,
            max_frame_len,
            rx_checksum_verified: false,
            rx_checksum_unfinished: false,
            tx_checksum_offload: false,
            batch_count: cfg.batch_count,
            gso_max_len: 0,
            mode: format!(
                "nonblocking read/write, one frame per call{}",
                if cfg.persist { ", persistent" } else { "" }
            ),
        };
        Ok(TapChannel {
            file,
            buf: vec![0; RX_BUF_LEN].into_boxed_slice(),
            tx: TapTx {
                file: tx_file,
                slots: vec![0; slot_len * cfg.tx_frame_count].into_boxed_slice(),
                lens: vec![0; cfg.tx_frame_count].into_boxed_slice(),
                slot_len,
                head: 0,
                queued: 0,
                frames: 0,
                bytes: 0,
                dropped: 0,
                writes: 0,
            },
            name,
            caps,
            rx_frames: 0,
            rx_bytes: 0,
            empty_polls: 0,
        })
    }

    /// The device's name (the kernel's choice when the configured name was empty).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The transmit half, concretely typed.
    pub fn tap_tx(&mut self) -> &mut TapTx {
        &mut self.tx
    }
}

impl TapTx {
    fn capacity(&self) -> usize {
        self.lens.len()
    }
}

impl Tx for TapTx {
    fn send(
        &mut self,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> std::result::Result<(), TxError> {
        if len > self.slot_len - 4 {
            self.dropped += 1;
            return Err(TxError::TooLarge);
        }
        if self.queued == self.capacity() {
            self.dropped += 1;
            return Err(TxError::Full);
        }
        let mut slot = self.head + self.queued;
        if slot >= self.capacity() {
            slot -= self.capacity();
        }
        let start = slot * self.slot_len;
        fill(&mut self.slots[start..start + len]);
        self.lens[slot] = len;
        self.queued += 1;
        self.frames += 1;
        self.bytes += len as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        while self.queued > 0 {
            let start = self.head * self.slot_len;
            let frame = &self.slots[start..start + self.lens[self.head]];
            self.writes += 1;
            let res = (&self.file).write(frame);
            let err = match res {
                Ok(_) => None,
                // The device's queue is full: keep the rest for the next flush.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => Some(e),
            };
            self.head += 1;
            if self.head == self.capacity() {
                self.head = 0;
            }
            self.queued -= 1;
            if let Some(e) = err {
                self.dropped += 1;
                // A malformed frame (EINVAL) costs only itself.
                if e.raw_os_error() != Some(libc::EINVAL) {
                    return Err(Error::new("write(tap)", e));
                }
            }
        }
        Ok(())
    }
}

impl Channel for TapChannel {
    fn rx_batch(
        &mut self,
        max_count: usize,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> Result<usize> {
        let max = max_count.min(self.caps.batch_count);
        let mut n = 0;
        while n < max {
            match (&self.file).read(&mut self.buf) {
                Ok(0) => break,
                Ok(len) => {
                    n += 1;
                    self.rx_frames += 1;
                    self.rx_bytes += len as u64;
                    f(&self.buf[..len], &mut self.tx);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::new("read(tap)", e)),
            }
        }
        if n == 0 {
            self.empty_polls += 1;
        }
        Ok(n)
    }

    fn tx(&mut self) -> &mut dyn Tx {
        &mut self.tx
    }

    fn capabilities(&self) -> Capabilities {
        self.caps.clone()
    }

    fn stats(&self) -> Stats {
        Stats {
            rx_frames: self.rx_frames,
            rx_bytes: self.rx_bytes,
            // TAP drops happen in the kernel's queue towards us and are visible only
            // as the interface's tx_dropped counter.
            rx_dropped: 0,
            rx_policed: 0,
            tx_frames: self.tx.frames,
            tx_bytes: self.tx.bytes,
            tx_dropped: self.tx.dropped,
            kicks: self.tx.writes,
            empty_polls: self.empty_polls,
        }
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.file.as_fd())
    }
}
