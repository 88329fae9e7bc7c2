//! The measurement both `*_rx_drop` examples run: a generator thread sends one frame in
//! bursts (one flush each) through one channel while the channel under test busy-polls
//! and drops what it receives.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ulnet_channel::{Channel, Stats};

/// What one run measured.
pub struct RxDropRun {
    /// The receiver's counters after the final drain.
    pub rx: Stats,
    /// The generator's counters.
    pub tx: Stats,
    /// How long the receiver polled while the generator ran.
    pub elapsed: Duration,
    /// CPU time the generator thread used.
    pub generator_cpu_ns: u64,
}

impl RxDropRun {
    /// Generator CPU time per generated frame, in ns.
    pub fn generator_ns_per_frame(&self) -> f64 {
        self.generator_cpu_ns as f64 / self.tx.tx_frames as f64
    }
}

/// Generates `frame` through `tx` in bursts of `burst` for `duration` while `rx` polls
/// in batches of 64; then drains `rx` for 20 ms so its drop count is final.
///
/// # Panics
/// On a channel error, or if `rx` handed out a different number of frames than its
/// stats count.
pub fn run<R: Channel, T: Channel + Send>(
    rx: &mut R,
    tx: &mut T,
    frame: &[u8],
    burst: usize,
    duration: Duration,
) -> RxDropRun {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let gen = s.spawn(|| {
            let cpu0 = thread_cpu_ns();
            let start = Instant::now();
            while start.elapsed() < duration {
                for _ in 0..burst {
                    if tx
                        .tx()
                        .send(frame.len(), &mut |b| b.copy_from_slice(frame))
                        .is_err()
                    {
                        break;
                    }
                }
                tx.tx().flush().expect("generator flush");
            }
            stop.store(true, Ordering::Release);
            (tx.stats(), thread_cpu_ns() - cpu0)
        });
        let start = Instant::now();
        let mut count = 0u64;
        while !stop.load(Ordering::Acquire) {
            count += rx.rx_batch(64, &mut |_, _| {}).expect("rx_batch") as u64;
        }
        let elapsed = start.elapsed();
        let drain_until = Instant::now() + Duration::from_millis(20);
        while Instant::now() < drain_until {
            count += rx.rx_batch(64, &mut |_, _| {}).expect("rx_batch") as u64;
        }
        let st = rx.stats();
        assert_eq!(count, st.rx_frames);
        let (tx_stats, generator_cpu_ns) = gen.join().expect("generator panicked");
        RxDropRun {
            rx: st,
            tx: tx_stats,
            elapsed,
            generator_cpu_ns,
        }
    })
}

/// CPU time the calling thread has used, in ns (first field of
/// `/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("reading /proc/thread-self/schedstat")
}
