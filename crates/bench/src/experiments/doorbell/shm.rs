//! The shared-memory doorbell: a single-producer single-consumer descriptor ring
//! between the system-under-test thread and a polling consumer on the load core. A
//! start is one descriptor store and one release store of the producer's index.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::methods::{COMPLETE_LIMIT, FRAME_LEN, SHM_SLOTS, START_LIMIT};
use crate::cpu::thread_cpu_time;
use crate::harness::{pin_load, Metrics, Window};

/// A cache line of its own, so the producer's and consumer's indices do not share one.
#[repr(align(64))]
#[derive(Default)]
struct Line(AtomicU64);

/// The shared-memory descriptor ring: slots, the producer's index (the doorbell) and
/// the consumer's.
struct Shm {
    slots: Vec<AtomicU64>,
    head: Line,
    tail: Line,
    stop: AtomicBool,
}

/// The descriptor of the `i`th start: a buffer address (2 KiB apart) and the length.
fn descriptor(i: u64) -> u64 {
    (i << 16) | FRAME_LEN as u64
}

/// What the polling consumer saw.
struct Seen {
    count: u64,
    bad: u64,
    /// Its CPU time after the warm-up descriptors.
    cpu: Duration,
}

/// The consumer: polls the producer's index, reads and checks each descriptor, and
/// publishes how far it got. Bounded by `stop` and a deadline.
fn consume(shm: &Shm, total: u64, warm: u64) -> io::Result<Seen> {
    pin_load()?;
    let mask = SHM_SLOTS as u64 - 1;
    let deadline = Instant::now() + START_LIMIT + COMPLETE_LIMIT;
    let (mut tail, mut bad, mut spins) = (0u64, 0u64, 0u64);
    let mut cpu_warm = if warm == 0 {
        Some(thread_cpu_time())
    } else {
        None
    };
    while tail < total {
        let head = shm.head.0.load(Ordering::Acquire);
        if head == tail {
            spins += 1;
            if spins.is_multiple_of(4096)
                && (shm.stop.load(Ordering::Relaxed) || Instant::now() > deadline)
            {
                break;
            }
            std::hint::spin_loop();
            continue;
        }
        while tail < head {
            if shm.slots[(tail & mask) as usize].load(Ordering::Relaxed) != descriptor(tail) {
                bad += 1;
            }
            tail += 1;
        }
        shm.tail.0.store(tail, Ordering::Release);
        if cpu_warm.is_none() && tail >= warm {
            cpu_warm = Some(thread_cpu_time());
        }
    }
    let cpu = thread_cpu_time() - cpu_warm.unwrap_or_else(thread_cpu_time);
    Ok(Seen {
        count: tail,
        bad,
        cpu,
    })
}

/// The producer's side of the shared-memory ring: write the descriptor, publish the
/// index with a release store (the doorbell), waiting only when the ring is full.
pub(super) fn shm_round(ops: u64, warm: u64) -> io::Result<Metrics> {
    let shm = Arc::new(Shm {
        slots: (0..SHM_SLOTS).map(|_| AtomicU64::new(0)).collect(),
        head: Line::default(),
        tail: Line::default(),
        stop: AtomicBool::new(false),
    });
    let total = warm + ops;
    let consumer = {
        let shm = Arc::clone(&shm);
        std::thread::spawn(move || consume(&shm, total, warm))
    };
    let mask = SHM_SLOTS as u64 - 1;
    let mut cached_tail = 0u64;
    let mut full_waits = 0u64;
    let deadline = Instant::now() + START_LIMIT;
    let mut produce = |range: std::ops::Range<u64>| -> io::Result<()> {
        for i in range {
            while i - cached_tail >= SHM_SLOTS as u64 {
                cached_tail = shm.tail.0.load(Ordering::Acquire);
                full_waits += 1;
                if full_waits.is_multiple_of(4096) && Instant::now() > deadline {
                    return Err(io::Error::other("shared-memory ring stayed full"));
                }
                std::hint::spin_loop();
            }
            shm.slots[(i & mask) as usize].store(descriptor(i), Ordering::Relaxed);
            shm.head.0.store(i + 1, Ordering::Release);
        }
        Ok(())
    };
    let res = (|| {
        produce(0..warm)?;
        // The consumer has taken the warm-up before the window opens.
        let t = Instant::now();
        while shm.tail.0.load(Ordering::Acquire) < warm {
            if t.elapsed() > COMPLETE_LIMIT {
                return Err(io::Error::other("consumer did not take the warm-up"));
            }
            std::hint::spin_loop();
        }
        let w = Window::start()?;
        let t0 = Instant::now();
        produce(warm..total)?;
        let t_start = t0.elapsed();
        while shm.tail.0.load(Ordering::Acquire) < total && t0.elapsed() < t_start + COMPLETE_LIMIT
        {
            std::hint::spin_loop();
        }
        let t_complete = t0.elapsed();
        Ok((w, t_start, t_complete))
    })();
    shm.stop.store(true, Ordering::Relaxed);
    let seen = consumer
        .join()
        .map_err(|_| io::Error::other("consumer thread panicked"))??;
    let (w, t_start, t_complete) = res?;
    let cpu = w.finish(seen.cpu)?;
    if seen.bad > 0 {
        return Err(io::Error::other(format!(
            "consumer read {} wrong descriptors",
            seen.bad
        )));
    }
    let arrived = seen.count.saturating_sub(warm);
    // A memory write rings this doorbell: no kicks.
    let mut m = super::methods::start_metrics(&cpu, ops, t_start, t_complete, arrived, 0);
    m.insert("ring_full_waits".into(), full_waits as f64);
    m.insert("consumer_cpu_s".into(), seen.cpu.as_secs_f64());
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_differ() {
        assert_ne!(descriptor(0), descriptor(1));
        assert_eq!(descriptor(3) & 0xffff, FRAME_LEN as u64);
    }
}
