//! The channels hurd-udp's ulnet variants run on: [`Counted`], the AF_XDP channel as it is
//! with its counters published (run to completion), and [`Queued`], the seed's "other
//! implementation": a driver thread at interrupt-like priority that copies frames into a
//! bounded queue the stack thread drains. [`Probe`] reads both while the stack owns them.

use super::*;

/// What a measurement reads back from a channel the stack owns.
#[derive(Debug, Clone)]
pub(super) struct Probe {
    /// The AF_XDP channel's counters, as last published.
    stats: Arc<Mutex<Stats>>,
    /// Frames the queue refused (queued variant only).
    queue_drops: Arc<AtomicU64>,
    /// Asks the driver thread to stop (queued variant only).
    stop: Arc<AtomicBool>,
    /// Set by the driver thread once it published its final counters.
    done: Arc<AtomicBool>,
    /// Whether there is a driver thread to wait for.
    driver: bool,
}

impl Probe {
    /// Stops the driver thread (if any, waiting at most a second for it) and returns the
    /// AF_XDP counters and the queue's drops.
    pub(super) fn finish(&self) -> (Stats, u64) {
        if self.driver {
            self.stop.store(true, Ordering::Relaxed);
            let deadline = Instant::now() + Duration::from_secs(1);
            while !self.done.load(Ordering::Acquire) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let s = *self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        (s, self.queue_drops.load(Ordering::Relaxed))
    }
}

/// The AF_XDP channel as the stack sees it in the run-to-completion variant: a pass-
/// through that publishes the channel's counters (so the ring's drops can be read while
/// the stack owns it).
pub(super) struct Counted {
    inner: XdpChannel,
    stats: Arc<Mutex<Stats>>,
    calls: u32,
}

impl Counted {
    pub(super) fn new(inner: XdpChannel) -> (Counted, Probe) {
        let stats = Arc::new(Mutex::new(Stats::default()));
        let probe = Probe {
            stats: Arc::clone(&stats),
            queue_drops: Arc::new(AtomicU64::new(0)),
            stop: Arc::new(AtomicBool::new(false)),
            done: Arc::new(AtomicBool::new(true)),
            driver: false,
        };
        (
            Counted {
                inner,
                stats,
                calls: 0,
            },
            probe,
        )
    }
}

impl Channel for Counted {
    fn rx_batch(
        &mut self,
        max_count: usize,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> ulnet::channel::Result<usize> {
        let n = self.inner.rx_batch(max_count, f)?;
        // Publish now and then (every idle poll, or every 64th busy one): a lock per
        // call would be cheap, but the counters need not be fresher than that.
        self.calls = self.calls.wrapping_add(1);
        if n == 0 || self.calls.is_multiple_of(64) {
            *self.stats.lock().unwrap_or_else(PoisonError::into_inner) = self.inner.stats();
        }
        Ok(n)
    }
    fn tx(&mut self) -> &mut dyn Tx {
        self.inner.tx()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn stats(&self) -> Stats {
        self.inner.stats()
    }
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.wait_fd()
    }
    fn prepare_wait(&mut self) -> ulnet::channel::Result<()> {
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner) = self.inner.stats();
        self.inner.prepare_wait()
    }
}

/// The queueing driver of the seed's "other implementation": a driver thread owns the
/// AF_XDP channel, copies every received frame into a bounded queue (counting a drop when
/// it is full) and transmits what the stack queued for it; the stack's `rx_batch` pops
/// from the queue. An eventfd the driver writes after each batch it queued lets the
/// stack sleep in `poll(2)` as it does on a real channel.
pub(super) struct Queued {
    rx: Receiver<Vec<u8>>,
    /// A frame taken off the queue by `prepare_wait` to see whether it was empty.
    pending: Option<Vec<u8>>,
    tx: QueuedTx,
    caps: Capabilities,
    stats: Stats,
    event: Arc<OwnedFd>,
    stop: Arc<AtomicBool>,
    driver: Option<JoinHandle<()>>,
}

/// The transmit half of [`Queued`]: frames go to the driver thread by a second queue.
pub(super) struct QueuedTx {
    out: SyncSender<Vec<u8>>,
    max_frame_len: usize,
    frames: u64,
    bytes: u64,
    dropped: u64,
}

impl Tx for QueuedTx {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), TxError> {
        if len > self.max_frame_len {
            self.dropped += 1;
            return Err(TxError::TooLarge);
        }
        let mut b = vec![0u8; len];
        fill(&mut b);
        match self.out.try_send(b) {
            Ok(()) => {
                self.frames += 1;
                self.bytes += len as u64;
                Ok(())
            }
            Err(_) => {
                self.dropped += 1;
                Err(TxError::Full)
            }
        }
    }
    fn flush(&mut self) -> ulnet::channel::Result<()> {
        // The driver thread transmits (and flushes) on its own.
        Ok(())
    }
}

/// Wakes whoever polls `fd` (an eventfd).
pub(super) fn signal(fd: &impl AsFd) {
    let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
}

impl Queued {
    pub(super) fn new(mut xdp: XdpChannel, cap: usize) -> io::Result<(Queued, Probe)> {
        let mut caps = xdp.capabilities();
        caps.mode = format!(
            "{} + driver thread, bounded queue of {cap} frames",
            caps.mode
        );
        let max_frame_len = caps.max_frame_len;
        let (q_tx, q_rx) = mpsc::sync_channel::<Vec<u8>>(cap);
        let (out_tx, out_rx) = mpsc::sync_channel::<Vec<u8>>(256);
        let event = Arc::new(rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )?);
        let probe = Probe {
            stats: Arc::new(Mutex::new(Stats::default())),
            queue_drops: Arc::new(AtomicU64::new(0)),
            stop: Arc::new(AtomicBool::new(false)),
            done: Arc::new(AtomicBool::new(false)),
            driver: true,
        };
        let (p, ev) = (probe.clone(), Arc::clone(&event));
        // Spawned from the SUT-pinned thread: the driver shares the stack's core.
        let driver = std::thread::Builder::new()
            .name("queued-driver".into())
            .spawn(move || {
                // The seed's drivers ran at interrupt priority: taking frames off the
                // card preempts the protocol work. Nice -20 against the stack's 0 gives
                // the driver about 87 times the stack's share of the core whenever both
                // can run (CFS weights 88761 : 1024), so past the stack's capacity the
                // driver keeps taking frames only to drop them at the full queue.
                let _ = rustix::process::setpriority_process(
                    Some(rustix::thread::gettid()),
                    DRIVER_NICE,
                );
                let mut idle_since: Option<Instant> = None;
                let mut drops = 0u64;
                while !p.stop.load(Ordering::Relaxed) {
                    let mut pushed = 0u32;
                    let n = xdp
                        .rx_batch(64, &mut |frame, _| match q_tx.try_send(frame.to_vec()) {
                            Ok(()) => pushed += 1,
                            Err(TrySendError::Full(_)) => drops += 1,
                            Err(TrySendError::Disconnected(_)) => {}
                        })
                        .unwrap_or(0);
                    if pushed > 0 {
                        signal(&*ev);
                        p.queue_drops.store(drops, Ordering::Relaxed);
                    } else if n > 0 {
                        p.queue_drops.store(drops, Ordering::Relaxed);
                    }
                    let mut sent = false;
                    while let Ok(f) = out_rx.try_recv() {
                        let _ = xdp.tx().send(f.len(), &mut |b| b.copy_from_slice(&f));
                        sent = true;
                    }
                    if sent {
                        let _ = xdp.tx().flush();
                    }
                    if n > 0 || sent {
                        idle_since = None;
                        continue;
                    }
                    *p.stats.lock().unwrap_or_else(PoisonError::into_inner) = xdp.stats();
                    // Idle: yield for 50 µs like the runtime, then sleep until frames
                    // arrive (at most 1 ms, to see `stop` and the transmit queue).
                    let since = *idle_since.get_or_insert_with(Instant::now);
                    if since.elapsed() < Duration::from_micros(50) {
                        std::thread::yield_now();
                    } else if xdp.wait_fd().is_some() {
                        let _ = xdp.prepare_wait();
                        // Polled in place: the descriptor stays borrowed from `xdp`.
                        if let Some(fd) = xdp.wait_fd() {
                            let mut pf = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
                            let ts = rustix::time::Timespec {
                                tv_sec: 0,
                                tv_nsec: 1_000_000,
                            };
                            let _ = rustix::event::poll(&mut pf, Some(&ts));
                        }
                    } else {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                *p.stats.lock().unwrap_or_else(PoisonError::into_inner) = xdp.stats();
                p.queue_drops.store(drops, Ordering::Relaxed);
                p.done.store(true, Ordering::Release);
            })?;
        Ok((
            Queued {
                rx: q_rx,
                pending: None,
                tx: QueuedTx {
                    out: out_tx,
                    max_frame_len,
                    frames: 0,
                    bytes: 0,
                    dropped: 0,
                },
                caps,
                stats: Stats::default(),
                event,
                stop: Arc::clone(&probe.stop),
                driver: Some(driver),
            },
            probe,
        ))
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(d) = self.driver.take() {
            let _ = d.join();
        }
    }
}

impl Channel for Queued {
    fn rx_batch(
        &mut self,
        max_count: usize,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> ulnet::channel::Result<usize> {
        let mut n = 0;
        while n < max_count {
            let frame = match self.pending.take() {
                Some(fr) => fr,
                None => match self.rx.try_recv() {
                    Ok(fr) => fr,
                    Err(_) => break,
                },
            };
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += frame.len() as u64;
            f(&frame, &mut self.tx);
            n += 1;
        }
        if n == 0 {
            self.stats.empty_polls += 1;
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
            tx_frames: self.tx.frames,
            tx_bytes: self.tx.bytes,
            tx_dropped: self.tx.dropped,
            ..self.stats
        }
    }
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.event.as_fd())
    }
    fn prepare_wait(&mut self) -> ulnet::channel::Result<()> {
        // Consume the wake-ups so far, then look at the queue: if a frame slipped in
        // before the drain, make the descriptor readable again so the sleep returns.
        let mut b = [0u8; 8];
        let _ = rustix::io::read(&*self.event, &mut b);
        if self.pending.is_none() {
            self.pending = self.rx.try_recv().ok();
        }
        if self.pending.is_some() {
            signal(&*self.event);
        }
        Ok(())
    }
}
