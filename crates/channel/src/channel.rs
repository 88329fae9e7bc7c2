//! The `Channel` trait every backend implements.

use std::os::fd::BorrowedFd;

/// What a channel can do; the runtime and stack adapt to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    /// Backend name as shown to users (`"xdp"`, `"packet"`, `"tap"`, `"sim"`).
    pub name: &'static str,
    /// The link MTU: the largest IP packet (without the Ethernet header) it carries.
    pub mtu: usize,
    /// The largest frame (Ethernet header included) that `Tx::send` accepts.
    pub max_frame_len: usize,
    /// Received frames have had their IP/TCP/UDP checksums verified by the device.
    pub rx_checksum_verified: bool,
    /// Received TCP and UDP checksums may be unfinished: the sender left the
    /// pseudo-header sum for an offload that nothing performed (a veth whose other end
    /// offloads transmit checksums; Linux's `CHECKSUM_PARTIAL`). The stack then accepts a
    /// checksum field that is exactly that sum, as the kernel's own receive on a veth
    /// does, and verifies every other one.
    pub rx_checksum_unfinished: bool,
    /// The device fills in transmit checksums (the stack may leave them zero).
    pub tx_checksum_offload: bool,
    /// How many frames one `rx_batch` call hands out at most.
    pub batch_count: usize,
    /// The largest TCP burst frame [`Tx::send_gso`] takes (headers included), cut into
    /// segments by the kernel's GSO or the device's TSO; 0 when the channel has none.
    pub gso_max_len: usize,
    /// A human-readable description of the mode in use (e.g. `"native, copy"`).
    pub mode: String,
}

/// Counters every channel keeps. Drops at the ring are counted here, before any work is
/// spent on the frame (seed 000).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames handed to the program.
    pub rx_frames: u64,
    /// Bytes handed to the program.
    pub rx_bytes: u64,
    /// Frames the device or ring dropped before the program saw them, where known.
    pub rx_dropped: u64,
    /// Frames the channel's own filter dropped on purpose (AF_XDP: SYNs over the
    /// steering program's SYN policer, `xdp::SynPolicer`).
    pub rx_policed: u64,
    /// Frames queued for transmission.
    pub tx_frames: u64,
    /// Bytes queued for transmission.
    pub tx_bytes: u64,
    /// Frames dropped because the transmit ring or pool was full, or too large.
    pub tx_dropped: u64,
    /// System calls made to wake the device (doorbells that needed the kernel).
    pub kicks: u64,
    /// Receive polls that found nothing.
    pub empty_polls: u64,
}

/// Why a frame could not be queued for transmission. The frame is dropped and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TxError {
    /// The transmit ring or buffer pool is full.
    Full,
    /// The frame is larger than the channel's `max_frame_len`.
    TooLarge,
}

impl core::fmt::Display for TxError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TxError::Full => f.write_str("transmit ring full"),
            TxError::TooLarge => f.write_str("frame larger than the channel's maximum"),
        }
    }
}

impl std::error::Error for TxError {}

/// How a TCP burst frame given to [`Tx::send_gso`] is to be cut: one Ethernet, IP and TCP
/// header followed by more payload than one segment carries, with the TCP checksum field
/// holding the pseudo-header sum only (`ChecksumMode::Partial`). Every segment gets a copy
/// of the headers with its own sequence number, lengths, IPv4 ID and checksums; FIN and
/// PSH stay on the last (the contract of Linux `SKB_GSO_TCPV4`/`TCPV6`, and of a NIC's TSO).
///
/// A `segment_size` of 0 asks for no cutting: the frame is one segment, and only its
/// TCP checksum is left to the device (checksum offload, `CHECKSUM_PARTIAL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gso {
    /// Payload bytes per segment (all but the last are this long); 0 for a frame that is
    /// one segment already.
    pub segment_size: u16,
    /// Where the TCP header starts: Ethernet plus IP header length.
    pub l4_offset: u16,
    /// Ethernet, IP and TCP headers together.
    pub header_len: u16,
    /// IPv6 (else IPv4).
    pub ipv6: bool,
}

/// The transmit half of a channel: frames are written in place into the channel's own
/// buffers, then submitted with one doorbell per batch.
pub trait Tx {
    /// Reserves a `len`-byte transmit buffer, lets `fill` write the frame into it in
    /// place and queues it. Nothing reaches the device before [`Tx::flush`].
    ///
    /// # Errors
    /// [`TxError::Full`] when no buffer is free, [`TxError::TooLarge`] when `len`
    /// exceeds the channel's maximum frame length; the frame is dropped and counted.
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), TxError>;

    /// Like [`Tx::send`] for a TCP burst frame of `len` bytes (at most
    /// [`Capabilities::gso_max_len`]) that the kernel or device cuts into segments as
    /// `gso` says. Frames queued by `send` before it leave before it. Channels without
    /// segmentation offload ([`Capabilities::gso_max_len`] 0) refuse it as too large.
    ///
    /// # Errors
    /// As [`Tx::send`].
    fn send_gso(
        &mut self,
        len: usize,
        gso: Gso,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TxError> {
        let _ = (len, gso, fill);
        Err(TxError::TooLarge)
    }

    /// [`Tx::send_gso`] for a burst given as its headers and its payload, in the caller's
    /// memory. A channel that can gather them (an `AF_PACKET` socket's `sendmsg`) sends
    /// them from there, saving the copy of the payload into a frame buffer; the default
    /// copies both into the frame [`Tx::send_gso`] reserves.
    ///
    /// # Errors
    /// As [`Tx::send_gso`].
    fn send_gso_parts(&mut self, head: &[u8], payload: &[u8], gso: Gso) -> Result<(), TxError> {
        let h = head.len();
        self.send_gso(h + payload.len(), gso, &mut |buf| {
            buf[..h].copy_from_slice(head);
            buf[h..].copy_from_slice(payload);
        })
    }

    /// Hands every queued frame to the device: one doorbell for the batch, and a system
    /// call only when the device needs a wake-up.
    ///
    /// # Errors
    /// The failing system call.
    fn flush(&mut self) -> crate::Result<()>;
}

/// The receiver [`Channel::rx_batch_parts`] hands each frame to: its first buffer, the
/// rest of its buffers in order (empty for a frame in one), and the transmit half.
pub type RxParts<'a> = dyn FnMut(&[u8], &[&[u8]], &mut dyn Tx) + 'a;

/// A batched, bidirectional frame channel.
///
/// The receive callback gets the transmit half too, so the stack can answer a frame
/// (an ACK, an ARP reply) while carrying it through, run to completion, without the
/// frame being queued in between.
pub trait Channel {
    /// Hands up to `max_count` received frames to `f`, one at a time, each borrowed from
    /// the ring for the duration of the call and returned to it afterwards. Does not
    /// block. Returns how many frames were handed out.
    ///
    /// # Errors
    /// The failing system call.
    fn rx_batch(
        &mut self,
        max_count: usize,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> crate::Result<usize>;

    /// [`Channel::rx_batch`] for a receiver that takes a frame in pieces: a frame that
    /// arrived in several buffers (AF_XDP multi-buffer) is handed to `f` as its first
    /// buffer and the rest, in order, where they lie, instead of being gathered into one
    /// first. The default hands every frame whole (`rest` empty).
    ///
    /// # Errors
    /// The failing system call.
    fn rx_batch_parts(&mut self, max_count: usize, f: &mut RxParts<'_>) -> crate::Result<usize> {
        self.rx_batch(max_count, &mut |frame, tx| f(frame, &[], tx))
    }

    /// The transmit half, for frames that do not answer a received one (timers,
    /// application sends).
    fn tx(&mut self) -> &mut dyn Tx;

    /// What this channel can do.
    fn capabilities(&self) -> Capabilities;

    /// The counters so far.
    fn stats(&self) -> Stats;

    /// A file descriptor that becomes readable when frames arrive, for sleeping in
    /// `poll(2)`; `None` for channels with nothing to wait on (the simulator).
    ///
    /// Borrowed from the channel, so it cannot outlive the descriptor it names: a caller
    /// polls it in place and never needs `unsafe` or a duplicate to do so.
    fn wait_fd(&self) -> Option<BorrowedFd<'_>>;

    /// Prepares the channel for the program to sleep on [`Channel::wait_fd`] (for AF_XDP,
    /// makes sure the fill ring is stocked and the kernel knows to wake us).
    ///
    /// # Errors
    /// The failing system call.
    fn prepare_wait(&mut self) -> crate::Result<()> {
        Ok(())
    }

    /// Whether a received frame may be waiting: `false` only when the channel knows that
    /// none is, from a look that costs no system call and no lock (an AF_XDP receive
    /// ring's producer index). A busy-polling loop asks it between iterations to skip
    /// the rest of one while nothing can have arrived. The default, `true`, always
    /// takes the iteration.
    fn rx_ready(&mut self) -> bool {
        true
    }
}

/// A boxed channel is a channel (`Box<dyn Channel + Send>`, or a box of a subtrait the
/// caller defines), so code that picks its backend at run time needs no forwarding type.
impl<C: Channel + ?Sized> Channel for Box<C> {
    fn rx_batch(
        &mut self,
        max_count: usize,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> crate::Result<usize> {
        (**self).rx_batch(max_count, f)
    }
    fn rx_batch_parts(&mut self, max_count: usize, f: &mut RxParts<'_>) -> crate::Result<usize> {
        (**self).rx_batch_parts(max_count, f)
    }
    fn tx(&mut self) -> &mut dyn Tx {
        (**self).tx()
    }
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    fn stats(&self) -> Stats {
        (**self).stats()
    }
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        (**self).wait_fd()
    }
    fn prepare_wait(&mut self) -> crate::Result<()> {
        (**self).prepare_wait()
    }
    fn rx_ready(&mut self) -> bool {
        (**self).rx_ready()
    }
}
