//! TCP bursts through an `AF_PACKET` socket with a virtio-net header, for the kernel to
//! cut (GSO) or to pass whole to a device with TSO: one send per burst of up to 64 KB
//! instead of one frame per segment. Shared by the channels whose own ring has no
//! segmentation offload (AF_XDP, an `AF_PACKET` ring); each flushes its ring before a
//! burst, so that a burst never overtakes the frames queued before it.

use crate::sys::packet::GsoSender;
use crate::{Gso, Result, TxError};

/// A transmit half with a ring of its own and [`Bursts`] beside it: what the shared
/// `send_gso` needs of it.
pub(crate) trait BurstTx {
    /// The burst socket.
    fn bursts(&mut self) -> &mut Bursts;
    /// Hands what the ring holds to the device; false when frames stay queued (the
    /// burst must not overtake them).
    fn drain_ring(&mut self) -> bool;
    /// Counts a frame of `len` bytes handed over (`sent`) or dropped.
    fn count(&mut self, len: usize, sent: bool);

    /// Sends one burst of `len` bytes with `send`, after what the ring holds, and
    /// counts it: `Tx::send_gso` of the channels with bursts.
    fn burst(
        &mut self,
        len: usize,
        send: impl FnOnce(&mut Bursts) -> std::result::Result<(), TxError>,
    ) -> std::result::Result<(), TxError>
    where
        Self: Sized,
    {
        if !self.bursts().fits(len) {
            self.count(len, false);
            return Err(TxError::TooLarge);
        }
        if !self.drain_ring() {
            self.count(len, false);
            return Err(TxError::Full);
        }
        let r = send(self.bursts());
        self.count(len, r.is_ok());
        r
    }
}

/// Bursts refused in a row for want of room before the socket is given up on: a full
/// queue empties within a few flushes, a path that drops every burst never does.
const REFUSALS: u32 = 1024;

/// The burst socket and its counters; without a socket every burst is refused as too
/// large, and the stack cuts its segments itself.
#[derive(Debug)]
pub(crate) struct Bursts {
    sender: Option<GsoSender>,
    /// Bursts sent.
    pub(crate) sent: u64,
    /// Bursts refused for room since the last one sent.
    refused_in_row: u32,
}

impl Bursts {
    /// Bursts through `sender`, or none.
    pub(crate) fn new(sender: Option<GsoSender>) -> Bursts {
        Bursts {
            sender,
            sent: 0,
            refused_in_row: 0,
        }
    }

    /// Opens the socket on interface `ifindex` (of the calling thread's namespace) for
    /// the largest IP packet (64 KiB) plus its Ethernet header, when `on`.
    ///
    /// # Errors
    /// As [`GsoSender::open`].
    pub(crate) fn open(on: bool, ifindex: i32) -> Result<Bursts> {
        let sender = if on {
            Some(GsoSender::open(ifindex, 65535 + 14)?)
        } else {
            None
        };
        Ok(Bursts::new(sender))
    }

    /// The largest burst taken (headers included); 0 without bursts.
    pub(crate) fn max_frame_len(&self) -> usize {
        self.sender.as_ref().map_or(0, GsoSender::max_frame_len)
    }

    /// Whether a burst of `len` bytes may be offered at all.
    pub(crate) fn fits(&self, len: usize) -> bool {
        len <= self.max_frame_len()
    }

    /// Sends one burst with `send`; the caller flushed its ring first.
    pub(crate) fn send(
        &mut self,
        send: impl FnOnce(&mut GsoSender) -> Result<()>,
    ) -> std::result::Result<(), TxError> {
        let Some(sender) = self.sender.as_mut() else {
            return Err(TxError::TooLarge);
        };
        match send(sender) {
            Ok(()) => {
                self.sent += 1;
                self.refused_in_row = 0;
                Ok(())
            }
            Err(e)
                if matches!(e.source.raw_os_error(), Some(libc::EAGAIN | libc::ENOBUFS))
                    && self.refused_in_row < REFUSALS =>
            {
                // The socket's send buffer or the device queue is full: try again
                // after the next flush.
                self.refused_in_row += 1;
                Err(TxError::Full)
            }
            Err(_) => {
                // The kernel refuses the bursts (a device that went away, a header it
                // rejects, a path that drops every burst): stop offering them, so the
                // stack cuts them itself from now on instead of retrying forever.
                self.sender = None;
                Err(TxError::TooLarge)
            }
        }
    }

    /// [`Bursts::send`] of a burst built in place by `fill`.
    pub(crate) fn send_filled(
        &mut self,
        len: usize,
        gso: Gso,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> std::result::Result<(), TxError> {
        self.send(|s| s.send(len, gso, fill))
    }

    /// [`Bursts::send`] of a burst given as headers and payload (gathered by `sendmsg`).
    pub(crate) fn send_parts(
        &mut self,
        head: &[u8],
        payload: &[u8],
        gso: Gso,
    ) -> std::result::Result<(), TxError> {
        self.send(|s| s.send_parts(head, payload, gso))
    }
}
