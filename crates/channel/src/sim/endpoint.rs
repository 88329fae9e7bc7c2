//! One station on a simulated wire, driven through the [`Channel`] trait like any other
//! backend.

use std::cell::RefCell;
use std::os::fd::BorrowedFd;
use std::rc::Rc;
use std::time::Duration;

use super::wire::{Shared, Wire};
use crate::{Capabilities, Channel, Stats, Tx, TxError};

/// An endpoint of a [`Wire`], implementing [`Channel`] and [`Tx`].
///
/// Frames sent are queued in the endpoint until [`Tx::flush`], which puts them on the
/// wire at the current virtual time. [`Channel::rx_batch`] hands out the frames whose
/// delivery time has come. Dropping the endpoint detaches it: frames on their way to
/// it are discarded and no more are sent to it.
pub struct Endpoint {
    shared: Rc<RefCell<Shared>>,
    id: usize,
    pending: Vec<Vec<u8>>,
    stats: Stats,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("id", &self.id)
            .field("pending", &self.pending.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    pub(crate) fn new(shared: Rc<RefCell<Shared>>, id: usize) -> Self {
        Endpoint {
            shared,
            id,
            pending: Vec::new(),
            stats: Stats::default(),
        }
    }

    /// This endpoint's id on its wire (0 for the first endpoint attached, and so on);
    /// the `from`/`to` of [`Wire::set_link`] and [`Wire::link_stats`].
    pub fn id(&self) -> usize {
        self.id
    }

    /// A handle to the wire this endpoint is attached to.
    pub fn wire(&self) -> Wire {
        Wire::from_shared(Rc::clone(&self.shared))
    }

    /// The wire's virtual time (for a pcap clock, say).
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.shared.borrow().now_ns())
    }

    /// The earliest delivery time of the frames on their way to this endpoint (at or
    /// before now if some are waiting to be received), or `None` if none are.
    pub fn next_arrival(&self) -> Option<Duration> {
        self.shared
            .borrow()
            .next_arrival_ns(self.id)
            .map(Duration::from_nanos)
    }

    /// Frames sent but not yet flushed onto the wire.
    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }
}

impl Tx for Endpoint {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), TxError> {
        let mut buf = {
            let mut shared = self.shared.borrow_mut();
            if len > shared.max_frame_len() {
                self.stats.tx_dropped += 1;
                return Err(TxError::TooLarge);
            }
            if self.pending.len() >= shared.tx_queue_count() {
                self.stats.tx_dropped += 1;
                return Err(TxError::Full);
            }
            shared.take_buf()
        };
        buf.resize(len, 0);
        fill(&mut buf);
        self.pending.push(buf);
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += len as u64;
        Ok(())
    }

    fn flush(&mut self) -> crate::Result<()> {
        let mut shared = self.shared.borrow_mut();
        for buf in self.pending.drain(..) {
            shared.transmit(self.id, buf);
        }
        Ok(())
    }
}

impl Channel for Endpoint {
    fn rx_batch(
        &mut self,
        max_count: usize,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> crate::Result<usize> {
        let limit = max_count.min(self.shared.borrow().batch_count());
        let mut count = 0;
        while count < limit {
            // The borrow ends with the statement: `f` may send, which borrows again.
            let Some(buf) = self.shared.borrow_mut().pop_ready(self.id) else {
                break;
            };
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += buf.len() as u64;
            f(&buf, self);
            self.shared.borrow_mut().recycle(buf);
            count += 1;
        }
        if count == 0 {
            self.stats.empty_polls += 1;
        }
        Ok(count)
    }

    fn tx(&mut self) -> &mut dyn Tx {
        self
    }

    fn capabilities(&self) -> Capabilities {
        let shared = self.shared.borrow();
        Capabilities {
            name: "sim",
            mtu: shared.mtu(),
            max_frame_len: shared.max_frame_len(),
            rx_checksum_verified: false,
            rx_checksum_unfinished: false,
            tx_checksum_offload: false,
            batch_count: shared.batch_count(),
            gso_max_len: 0,
            mode: format!("virtual time, {} endpoints", shared.port_count()),
        }
    }

    fn stats(&self) -> Stats {
        Stats {
            rx_dropped: self.shared.borrow().rx_dropped(self.id),
            ..self.stats
        }
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // Dropped while unwinding out of an `rx_batch` callback the wire may still be
        // borrowed; leaking the port then beats a double panic.
        let Ok(mut shared) = self.shared.try_borrow_mut() else {
            return;
        };
        for buf in self.pending.drain(..) {
            shared.recycle(buf);
        }
        shared.close_port(self.id);
    }
}
