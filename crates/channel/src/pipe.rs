//! An in-memory Ethernet link between two stacks in one process: a [`Channel`] pair
//! that is `Send`, so each end can live on its own runtime thread (unlike the
//! single-threaded simulated wire). For tests and examples of the socket API without
//! any kernel interface.
//!
//! Each direction is a bounded queue of frames; a flush appends the batch and, when the
//! receiver has readied a sleep (`prepare_wait`, as AF_XDP's need-wakeup flag), signals
//! its eventfd (its wait descriptor), so a sleeping loop wakes once per batch and a
//! polling one costs its peer no system call. A full queue drops and counts (like a
//! ring). Checksums are left out on both ends (declared offloaded and verified), as
//! nothing on the link can corrupt a frame.

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::{Capabilities, Channel, Stats, Tx, TxError};
use rustix::event::EventfdFlags;

/// Frames one direction holds before dropping.
pub const QUEUE_FRAMES: usize = 8192;
/// The link MTU (IP packet size).
pub const MTU: usize = 1500;
const MAX_FRAME: usize = MTU + 14;

#[derive(Debug)]
struct Queue {
    frames: Mutex<VecDeque<Vec<u8>>>,
    efd: OwnedFd,
    dropped: AtomicU64,
    /// Flushes that appended frames so far: a receiver that saw no new one since it last
    /// drained the queue knows it is empty without taking the lock (`rx_ready`).
    flushes: AtomicU64,
    /// The receiver is about to sleep on the eventfd (`prepare_wait`): the next flush
    /// signals it. A receiver that polls is not signalled, so a busy-polling pair pays
    /// no system call per batch.
    armed: AtomicBool,
}

impl Queue {
    fn new() -> std::io::Result<Arc<Queue>> {
        Ok(Arc::new(Queue {
            frames: Mutex::new(VecDeque::with_capacity(QUEUE_FRAMES)),
            efd: rustix::event::eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
            dropped: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            armed: AtomicBool::new(true),
        }))
    }

    fn signal(&self) {
        let _ = rustix::io::write(&self.efd, &1u64.to_ne_bytes());
    }
}

/// The transmit half: frames of the current batch, appended to the peer's queue on
/// flush.
#[derive(Debug)]
struct PipeTx {
    peer: Arc<Queue>,
    batch: Vec<Vec<u8>>,
    pool: Vec<Vec<u8>>,
    stats: Stats,
}

impl Tx for PipeTx {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), TxError> {
        if len > MAX_FRAME {
            self.stats.tx_dropped += 1;
            return Err(TxError::TooLarge);
        }
        if self.batch.len() >= QUEUE_FRAMES {
            return Err(TxError::Full);
        }
        let mut f = self.pool.pop().unwrap_or_default();
        f.clear();
        f.resize(len, 0);
        fill(&mut f);
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += len as u64;
        self.batch.push(f);
        Ok(())
    }

    fn flush(&mut self) -> crate::Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        {
            let mut q = self
                .peer
                .frames
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            for f in self.batch.drain(..) {
                if q.len() < QUEUE_FRAMES {
                    q.push_back(f);
                } else {
                    self.peer.dropped.fetch_add(1, Ordering::Relaxed);
                    self.stats.tx_dropped += 1;
                }
            }
        }
        // Release: the frames are in the queue before the count says so.
        self.peer.flushes.fetch_add(1, Ordering::Release);
        // SeqCst with the receiver's arming and its look at the queue after it: either
        // it sees these frames, or this sees it armed.
        if self.peer.armed.swap(false, Ordering::SeqCst) {
            self.stats.kicks += 1;
            self.peer.signal();
        }
        Ok(())
    }
}

/// One end of an in-memory link (see the module docs).
#[derive(Debug)]
pub struct PipeChannel {
    rx: Arc<Queue>,
    rx_batch: VecDeque<Vec<u8>>,
    tx: PipeTx,
    rx_stats: Stats,
    /// The peer's flush count when the queue was last drained empty (`None`: frames
    /// were left in it).
    drained_at: Option<u64>,
}

/// Two connected ends: what one sends, the other receives.
///
/// # Errors
/// Creating the eventfds failed.
pub fn pair() -> std::io::Result<(PipeChannel, PipeChannel)> {
    let (a, b) = (Queue::new()?, Queue::new()?);
    let end = |rx: &Arc<Queue>, peer: &Arc<Queue>| PipeChannel {
        rx: Arc::clone(rx),
        rx_batch: VecDeque::new(),
        tx: PipeTx {
            peer: Arc::clone(peer),
            batch: Vec::new(),
            pool: Vec::new(),
            stats: Stats::default(),
        },
        rx_stats: Stats::default(),
        drained_at: None,
    };
    Ok((end(&a, &b), end(&b, &a)))
}

impl Channel for PipeChannel {
    fn rx_batch(
        &mut self,
        max_count: usize,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> crate::Result<usize> {
        {
            // Read before the lock: a flush after this read moves the count past it.
            let flushes = self.rx.flushes.load(Ordering::Acquire);
            let mut q = self
                .rx
                .frames
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let n = max_count.min(q.len());
            self.rx_batch.extend(q.drain(..n));
            self.drained_at = q.is_empty().then_some(flushes);
        }
        let mut count = 0;
        while let Some(frame) = self.rx_batch.pop_front() {
            count += 1;
            self.rx_stats.rx_frames += 1;
            self.rx_stats.rx_bytes += frame.len() as u64;
            f(&frame, &mut self.tx);
            if self.tx.pool.len() < QUEUE_FRAMES {
                self.tx.pool.push(frame);
            }
        }
        if count == 0 {
            self.rx_stats.empty_polls += 1;
        }
        Ok(count)
    }

    fn tx(&mut self) -> &mut dyn Tx {
        &mut self.tx
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            name: "pipe",
            mtu: MTU,
            max_frame_len: MAX_FRAME,
            rx_checksum_verified: true,
            rx_checksum_unfinished: false,
            tx_checksum_offload: true,
            batch_count: 64,
            gso_max_len: 0,
            mode: "in-memory".into(),
        }
    }

    fn stats(&self) -> Stats {
        Stats {
            rx_dropped: self.rx.dropped.load(Ordering::Relaxed),
            tx_frames: self.tx.stats.tx_frames,
            tx_bytes: self.tx.stats.tx_bytes,
            tx_dropped: self.tx.stats.tx_dropped,
            kicks: self.tx.stats.kicks,
            ..self.rx_stats
        }
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.rx.efd.as_fd())
    }

    /// Resets the eventfd, then makes it readable again if frames are waiting, so the
    /// loop's `poll(2)` neither misses a batch nor spins on an old signal.
    fn prepare_wait(&mut self) -> crate::Result<()> {
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(&self.rx.efd, &mut buf);
        self.rx.armed.store(true, Ordering::SeqCst);
        let waiting = !self
            .rx
            .frames
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty();
        if waiting {
            self.rx.signal();
        }
        Ok(())
    }

    fn rx_ready(&mut self) -> bool {
        self.drained_at != Some(self.rx.flushes.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cross_in_order_and_a_full_queue_drops() {
        let (mut a, mut b) = pair().unwrap();
        for i in 0..3u8 {
            a.tx().send(60, &mut |f| f[0] = i).unwrap();
        }
        a.tx().flush().unwrap();
        let mut seen = Vec::new();
        b.rx_batch(64, &mut |f, _| seen.push(f[0])).unwrap();
        assert_eq!(seen, [0, 1, 2]);
        assert!(a.tx().send(MAX_FRAME + 1, &mut |_| {}).is_err());
        for _ in 0..QUEUE_FRAMES + 5 {
            let _ = a.tx().send(60, &mut |_| {});
            a.tx().flush().unwrap();
        }
        assert_eq!(b.stats().rx_dropped, 5);
    }
}
